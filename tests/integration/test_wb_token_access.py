"""What WB says of an account's token, through the API in this process: its expiry, its categories
(a denied one refuses its jobs with 409 and fan-outs skip the account for it), its seller, the
account-verify job a new token writes, and the once-per-token announcement of a coming expiry.

The worker side (account-verify against the sandbox, a job's 401 ``token scope not allowed``) is
tests/e2e/test_account_verify.py."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from unittest.mock import ANY

import pytest
from falcon import testing
from sqlalchemy import text

from gatehouse import metrics
from gatehouse.accounts import AccountChange
from gatehouse.composition import bootstrap
from gatehouse.fanout import TICK_FIELD, FanOutHandlers
from gatehouse.schedules import schedules
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
DAY_MS = 86_400_000
LOOPBACK = ["127.0.0.0/8", "::1"]


def jwt(sid: str, *, expires_in: timedelta) -> str:
    part = lambda data: base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()  # noqa: E731
    exp = int((datetime.now(UTC) + expires_in).timestamp())
    return f"{part({'alg': 'ES256', 'typ': 'JWT'})}.{part({'sid': sid, 'exp': exp})}.c2ln"


@pytest.fixture
def gh(settings, clean):
    # Webhook endpoints on loopback are allowed (never contacted: no worker runs here).
    components = bootstrap(settings.model_copy(update={"webhook_allowed_hosts": LOOPBACK}))
    yield components
    components.close()


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


@pytest.fixture
def sql(gh):
    def run(statement: str, **params: object) -> list:
        with gh.engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return list(result) if result.returns_rows else []

    return run


def create(client, token: str, name: str = "Shop"):
    return client.simulate_post("/v1/accounts", json={"name": name, "wbToken": token}, headers=ADMIN)


def verify_jobs(sql, account) -> list:
    return sql(
        "SELECT id, state, queue, tier FROM jobs WHERE type = 'account-verify' AND account_id = :a",
        a=uuid.UUID(str(account)),
    )


def test_a_new_account_shows_its_tokens_expiry_unknown_categories_and_gets_its_verify_job(client, gh, sql):
    token = jwt("seller-9", expires_in=timedelta(days=180))
    created = create(client, token)
    assert created.status_code == 201, created.text
    account = created.json["accountId"]

    shown = client.simulate_get(f"/v1/accounts/{account}", headers=ADMIN).json
    expires = datetime.fromisoformat(shown["tokenExpiresAt"])
    assert abs((expires - datetime.now(UTC)) - timedelta(days=180)) < timedelta(seconds=5)
    assert shown["access"] == dict.fromkeys(
        ("statistics", "finance", "promotion", "analytics", "content"), "unknown"
    )
    assert shown["seller"] is None
    # Its check was written with it (the row before the message), on the user queue, not gated
    [job] = verify_jobs(sql, account)
    assert (job.state, job.queue, job.tier) == ("waiting", "wb-user", "user")
    assert str(job.id) in gh.dispatcher.queued_job_ids({"wb-user"})

    opaque = create(client, "seller-1", "Opaque").json["accountId"]
    assert client.simulate_get(f"/v1/accounts/{opaque}", headers=ADMIN).json["tokenExpiresAt"] is None


def test_an_expired_token_is_refused_at_create_and_at_patch_and_nothing_is_written(client, sql):
    expired = jwt("seller-9", expires_in=timedelta(seconds=-1))
    refused = create(client, expired)
    assert refused.status_code == 422, refused.text
    assert refused.json["code"] == "VALIDATION_ERROR" and refused.json["field"] == "wbToken"
    assert "Срок действия токена Wildberries истёк" in refused.json["detail"]
    assert sql("SELECT count(*) FROM accounts")[0][0] == 0
    assert sql("SELECT count(*) FROM jobs")[0][0] == 0

    account = create(client, "seller-1").json["accountId"]
    patched = client.simulate_patch(f"/v1/accounts/{account}", json={"wbToken": expired}, headers=ADMIN)
    assert patched.status_code == 422 and patched.json["field"] == "wbToken"
    assert sql("SELECT count(*) FROM audit_log WHERE action = 'account.update'")[0][0] == 0


def test_a_new_token_resets_what_wb_said_of_the_old_one_until_its_check_ends(client, gh, sql):
    account = uuid.UUID(create(client, "seller-1").json["accountId"])
    seller = {"name": "ИП Кружинин", "sid": "seller-1", "tin": "1234567890", "tradeMark": "Flax"}
    # A check of a token that is no longer the account's writes nothing; its own token's does
    assert (
        gh.account_handlers.record_verification(account, "seller-0", {"finance": "granted"}, seller) is False
    )
    access = {"statistics": "granted", "finance": "denied", "promotion": "granted", "analytics": "granted",
              "content": "granted"}  # fmt: skip
    assert gh.account_handlers.record_verification(account, "seller-1", access, seller) is True
    shown = client.simulate_get(f"/v1/accounts/{account}", headers=ADMIN).json
    assert (shown["access"], shown["seller"]) == (access, seller)
    sql("UPDATE jobs SET state = 'completed' WHERE type = 'account-verify'")  # its check ended

    token = jwt("seller-2", expires_in=timedelta(days=30))
    patched = client.simulate_patch(f"/v1/accounts/{account}", json={"wbToken": token}, headers=ADMIN)
    assert patched.status_code == 200, patched.text
    assert set(patched.json["access"].values()) == {"unknown"} and patched.json["seller"] is None
    assert patched.json["tokenExpiresAt"] is not None
    assert sorted(j.state for j in verify_jobs(sql, account)) == ["completed", "waiting"]
    # A rename alone checks nothing again
    client.simulate_patch(f"/v1/accounts/{account}", json={"name": "Renamed"}, headers=ADMIN)
    assert len(verify_jobs(sql, account)) == 2


def test_a_denied_category_refuses_the_jobs_that_need_it_with_409_and_others_run(client, gh):
    account = uuid.UUID(create(client, "seller-1").json["accountId"])
    key = client.simulate_post(f"/v1/accounts/{account}/keys", headers=ADMIN).json["key"]
    with gh.uow.begin() as tx:
        gh.accounts.scope_denied(tx, account, "another-token", "statistics")  # not its token: nothing
        gh.accounts.scope_denied(tx, account, "seller-1", "finance")
    period = {"dateFrom": "2026-11-01", "dateTo": "2026-11-02"}
    imports = f"/v1/accounts/{account}/digitization/imports"

    for who in (ADMIN, {"Authorization": f"Bearer {key}"}):  # the key reads it with itself
        refused = client.simulate_post(imports, json={"kind": "report", **period}, headers=who)
        assert refused.status_code == 409, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        body = refused.json
        assert (body["code"], body["category"], body["field"]) == (
            "TOKEN_SCOPE_MISSING",
            "finance",
            "wbToken",
        )
        assert body["detail"].startswith("Токен не даёт доступа к категории «Финансы»")
    feeds = client.simulate_post(imports, json={"kind": "feeds", **period}, headers=ADMIN)
    assert feeds.status_code == 202, feeds.text
    assert client.simulate_post(f"/v1/accounts/{account}/autobidder/sync", headers=ADMIN).status_code == 202
    shown = client.simulate_get(f"/v1/accounts/{account}", headers=ADMIN).json
    assert shown["access"]["finance"] == "denied" and shown["access"]["statistics"] == "unknown"
    assert shown["tokenInvalid"] is None  # the token itself is fine


def test_a_fan_out_skips_an_account_for_the_schedules_that_need_its_denied_category(gh, sql):
    denied, fine = (gh.account_handlers.create_account(f"shop-{i}", f"s-{i}").id for i in range(2))
    with gh.uow.begin() as tx:
        gh.accounts.scope_denied(tx, denied, "s-0", "finance")
    handlers = FanOutHandlers(
        gh.uow, gh.jobs, gh.accounts, gh.modules, gh.schedule_runs, gh.skip_streaks,
        schedules=schedules({"rnp-finance": {"spread_ms": 0}, "rnp-ads": {"spread_ms": 0}}),
        chunk_size=10, starvation_limit=3,
    )  # fmt: skip
    skipped = metrics.FANOUT_SKIPPED.labels(reason="token-scope")
    before = skipped._value.get()

    def tick(name: str, job_type: str) -> set[uuid.UUID]:
        handlers.tick(handlers.schedules[name])
        [row] = gh.jobs.list_jobs(type=f"fan-out:{name}", state="waiting")
        claim = gh.jobs.claim(row.id, row.message_number, 60_000, worker="w", start=True)
        handlers.run(
            name,
            tick_ms=row.payload[TICK_FIELD],
            resume={},
            save=lambda checkpoint, tx: gh.jobs.save_checkpoint(claim, checkpoint, tx=tx),
        )
        return {r.account_id for r in sql("SELECT account_id FROM jobs WHERE type = :t", t=job_type)}

    assert tick("rnp-finance", "rnp:finance-sync-account") == {fine}  # no row for the denied one
    assert skipped._value.get() == before + 1
    assert tick("rnp-ads", "rnp:ads-sync-account") == {denied, fine}  # its other syncs keep running
    assert skipped._value.get() == before + 1


def test_a_token_about_to_expire_is_announced_once_and_a_new_token_anew(client, gh, sql):
    soon = uuid.UUID(create(client, jwt("s-1", expires_in=timedelta(days=3)), "Soon").json["accountId"])
    create(client, jwt("s-2", expires_in=timedelta(days=30)), "Later")
    create(client, "seller-1", "Opaque")
    hook = gh.webhook_handlers.create_endpoint(
        "http://127.0.0.1:9/hook", event_types=["wb.account.token_expiring"], description=""
    ).endpoint.id

    def announced() -> list:
        return sql(
            "SELECT payload FROM webhook_deliveries WHERE endpoint_id = :e ORDER BY created_at", e=hook
        )

    assert gh.account_handlers.announce_expiring(within_ms=7 * DAY_MS) == 1
    [delivery] = announced()
    assert delivery.payload["type"] == "wb.account.token_expiring"
    assert delivery.payload["data"] == {"accountId": str(soon), "tokenExpiresAt": ANY}
    assert gh.account_handlers.announce_expiring(within_ms=7 * DAY_MS) == 0  # once per token

    # The status poll and the account warn while it lasts
    job = client.simulate_post(f"/v1/accounts/{soon}/autobidder/sync", headers=ADMIN).json["jobId"]
    sql('UPDATE jobs SET progress = \'{"phase": "running"}\' WHERE id = :id', id=uuid.UUID(job))
    poll = client.simulate_get(f"/v1/jobs/{job}", headers=ADMIN).json["progress"]
    assert poll["tokenWarning"].startswith("Токен Wildberries истекает через 2 дня")
    assert poll["message"].endswith(poll["tokenWarning"])

    # A new token that expires soon too is announced when its time comes, again once
    gh.account_handlers.update_account(
        soon, AccountChange(wb_token=jwt("s-1", expires_in=timedelta(days=6))), actor="admin"
    )
    assert gh.account_handlers.announce_expiring(within_ms=7 * DAY_MS) == 1
    assert len(announced()) == 2


def test_the_console_account_page_shows_the_tokens_seller_categories_and_expiry_warning(client, gh, cookie):
    account = uuid.UUID(create(client, jwt("s-1", expires_in=timedelta(days=2))).json["accountId"])
    seller = {"name": "ИП Кружинин", "sid": "s-1", "tin": "1234567890", "tradeMark": "Flax"}
    with gh.uow.begin() as tx:
        gh.accounts.scope_denied(tx, account, gh.accounts.wb_token(account), "finance")
        gh.accounts.verified(tx, account, gh.accounts.wb_token(account), {"statistics": "granted"}, seller)
    page = client.simulate_get(f"/console/accounts/{account}", headers=cookie)
    assert page.status_code == 200, page.text
    assert 'data-category="finance" data-access="denied"' in page.text
    assert 'data-category="statistics" data-access="granted"' in page.text
    assert "ИП Кружинин" in page.text and "Flax" in page.text
    assert "data-token-warning" in page.text and "Токен Wildberries истекает" in page.text
