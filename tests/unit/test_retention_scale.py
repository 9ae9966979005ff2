"""RETENTION_SCALE multiplies every retention, the settings' and each job type's own; "for ever" stays."""

from __future__ import annotations

from gatehouse.retention import RetentionPolicy
from gatehouse.settings import load_settings

HOUR, DAY = 3_600_000, 86_400_000


def policy(scale: float, **overrides: str) -> RetentionPolicy:
    settings = load_settings(
        database_url="postgresql://x/y", redis_url="redis://x", retention_scale=scale, **overrides
    )
    return RetentionPolicy.from_settings(settings)


def test_every_retention_scales_a_job_types_own_too():
    full, soak = policy(1.0), policy(0.0333)
    # a scheduled sync's completed run: its type keeps it an hour
    assert full.job_age_ms("rnp:ads-sync-account", "completed") == HOUR
    assert soak.job_age_ms("rnp:ads-sync-account", "completed") == round(HOUR * 0.0333)
    # a type without its own: the settings' 7 days
    assert soak.job_age_ms("notifications.email", "completed") == round(7 * DAY * 0.0333)
    assert soak.deliveries() == {"delivered": round(7 * DAY * 0.0333), "dead": round(30 * DAY * 0.0333)}
    assert (soak.notification_age_ms, soak.audit_age_ms) == (
        round(90 * DAY * 0.0333),
        round(365 * DAY * 0.0333),
    )


def test_kept_for_ever_stays_for_ever_at_any_scale():
    soak = policy(0.001, audit_retention="0", job_retention_failed="0")
    assert soak.audit_age_ms == 0
    assert soak.job_age_ms("notifications.email", "failed") == 0
