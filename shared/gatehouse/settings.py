"""All configuration, read from the environment here and nowhere else.

Every field maps to an upper-case environment variable of the same name
(``database_url`` ← ``DATABASE_URL``). Durations are milliseconds so tests can
run the production rules at millisecond scale; every duration setting (each
``*_MS``, and the retention settings) may also be written ``<n>s|m|h|d``
(``90s``, ``7d``), read by the one parser, gatehouse.durations.
"""

from __future__ import annotations

import os
from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from gatehouse.durations import parse_ms
from gatehouse.errors import ConfigurationError
from gatehouse.logs import LogFormat
from gatehouse.wb.hosts import HOST_LABELS

ROLES = ("all", "api", "worker")
# The shortest ADMIN_TOKEN accepted: a short one can be guessed (`make run` generates 32 characters).
ADMIN_TOKEN_MIN = 32
MAKE_ADMIN_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'
Role = Literal["all", "api", "worker"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False)

    # Stores. Unset means "not configured": `make run` then starts embedded
    # servers, and the services refuse to start with a message saying so.
    database_url: str | None = None
    redis_url: str | None = None
    db_pool_size: int = 5

    backend_role: Role = "all"
    # The bootstrap bearer token of the admin API: at least ADMIN_TOKEN_MIN characters (unset: no admin token).
    admin_token: SecretStr | None = None
    # Fernet keys (comma-separated) encrypting WB tokens at rest: the first
    # encrypts, all decrypt, so a key can be rotated in.
    token_encryption_key: SecretStr | None = None
    log_level: LogLevel = "INFO"
    # text: lines for people (`make run`); json: one object per line for a log pipeline (the images'
    # manifests). Either way each line carries the ids that apply (gatehouse.logs).
    log_format: LogFormat = "text"

    # API process (gunicorn). Command-line arguments of gatehouse-api win (--bind).
    # Loopback unless told otherwise: the API image and the manifests set API_HOST=0.0.0.0.
    api_host: str = "127.0.0.1"
    api_port: int = 8000
    api_workers: int = 2
    api_threads: int = 4
    # Consumer threads hosted inside each API worker when BACKEND_ROLE=all.
    inprocess_consumer_threads: int = 2
    # Request bodies larger than this are refused with 413.
    max_body_bytes: int = 65_536
    # A request (head and body) must have arrived this long after its connection
    # was accepted or became readable again; gatehouse-api reads it in the event
    # loop meanwhile (gatehouse_api.buffering) and answers 408 past it.
    api_read_timeout_ms: int = 10_000
    # With a port, gatehouse-api's workers also listen there (on API_HOST) and answer only
    # /metrics (all gunicorn workers summed), which the public port answers 404: the
    # manifests expose it to Prometheus alone. Unset: the API serves no metrics.
    metrics_port: int | None = None

    # Graceful shutdown: in-flight jobs get this long to finish on SIGTERM.
    shutdown_timeout_ms: int = 30_000

    # Job rows: an active job's lease, renewed by its worker process's lease
    # keeper; a row whose lease ran out is put back in line by any live worker.
    job_lease_ms: int = 90_000
    job_heartbeat_ms: int = 30_000
    # Dead-worker recovery: each worker process writes a liveness key this often
    # (the lease keeper's tick) that lives WORKER_DEAD_AFTER_MS; a live worker
    # re-queues the running jobs of a worker whose key is gone (seen twice in a
    # row, so a Redis restart that lost every key kills nobody). A process paused
    # for less than WORKER_DEAD_AFTER_MS keeps its jobs.
    worker_heartbeat_ms: int = 2_000
    worker_dead_after_ms: int = 10_000

    # The per-account gate (ADR-0057): lease and heartbeat of the holder, how
    # often a blocked job looks again, how long a user job's "wanted" mark
    # lives, and how much longer than a WB pause a paused holder keeps it.
    # Off switch for the gate (incidents, benchmarks): jobs then run without it.
    gate_enabled: bool = True
    gate_lease_ms: int = 90_000
    gate_heartbeat_ms: int = 30_000
    gate_poll_delay_ms: int = 15_000
    gate_wanted_ttl_ms: int = 60_000
    gate_pause_margin_ms: int = 60_000

    # Each job type declares its retry policy (gatehouse.job_types); every retry
    # delay is multiplied by this (tests run the production schedules in ms).
    retry_delay_scale: float = 1.0

    # Dramatiq broker tuning (see dramatiq's RedisBroker). The namespace prefixes every
    # Redis key of the deployment, Dramatiq's and ours: deployments on one Redis database
    # with different namespaces never see each other's queues, gates or workers.
    broker_namespace: str = "gatehouse"
    broker_heartbeat_timeout_ms: int = 60_000
    broker_maintenance_chance: int = 1_000
    # How long an idle consumer waits between polls; bounds the latency of a
    # woken or newly due message. Quiet queues (ticks, sweeps, e-mail) poll
    # less often: every poll costs a busy worker CPU.
    worker_idle_poll_ms: int = 100
    worker_quiet_poll_ms: int = 1_000

    # Modules whose @job bodies the consumers load (comma-separated).
    job_modules: Annotated[list[str], NoDecode] = ["gatehouse_worker.jobs"]

    # Reconciliation re-enqueues live rows that have no message in the broker.
    # A row younger than the grace is left alone: its producer may be between
    # the insert and the enqueue.
    reconcile_interval_cron: str = "* * * * *"
    # Periodic syncs (gatehouse.schedules): JSON {name: {"cron", "max_wait_ms", "spread_ms", "enabled"}} overrides.
    schedules: dict[str, dict[str, Any]] = {}
    # Data freshness (gatehouse.freshness): JSON {dataset: max age in seconds} overrides the SLO its
    # schedule gives it (2 × cadence + spread).
    freshness_slo: dict[str, int] = {}
    reconcile_grace_ms: int = 10_000

    # Set by gatehouse-api / gatehouse-worker for their children (prometheus-client
    # multiprocess mode); not meant to be set by hand.
    prometheus_multiproc_dir: str | None = None
    # Set by gatehouse-worker: where its processes prove they are alive.
    worker_alive_dir: str | None = None

    # Worker liveness for orchestrators: with a port, gatehouse-worker serves
    # /healthz and /metrics there; a process whose threads stopped for the
    # timeout makes /healthz fail. Unset: the worker opens no port.
    worker_health_port: int | None = None
    worker_liveness_timeout_ms: int = 30_000

    # Wildberries. Each API host is a setting, and may carry a path prefix (a request goes to
    # that URL + the path WB's OpenAPI gives). WB_API_BASE_URL, when set, replaces all of them at
    # once with <base>/<host label> (the sandbox, tests: gatehouse.wb.hosts.HOST_LABELS).
    wb_api_base_url: str | None = None
    wb_statistics_url: str = "https://statistics-api.wildberries.ru"
    wb_finance_url: str = "https://finance-api.wildberries.ru"
    wb_advert_url: str = "https://advert-api.wildberries.ru"
    wb_analytics_url: str = "https://seller-analytics-api.wildberries.ru"
    wb_content_url: str = "https://content-api.wildberries.ru"
    wb_common_url: str = "https://common-api.wildberries.ru"
    # An account whose WB token (a JWT) expires within this long raises wb.account.token_expiring
    # once, and its status messages and console page warn (7 days).
    wb_token_expiry_warning_ms: int = 7 * 86_400_000
    wb_timeout_ms: int = 30_000
    # Rows per realization-report request (WB allows up to 100 000).
    wb_report_page_rows: int = 100_000
    # Our per-account token buckets keep WB's documented limits (gatehouse.wb.limits);
    # JSON {bucket: {"period_ms", "limit", "burst"}} overrides entries.
    wb_limits: dict[str, dict[str, float]] = {}
    # Our buckets refill this fraction slower than the limits above, so jitter
    # between our clock and WB's does not turn into 429s.
    wb_limit_headroom: float = 0.1
    # A bucket wait up to this long is slept in place; a longer one pauses the
    # job (rate-limited, no attempt) until WB allows the call.
    wb_bucket_max_sleep_ms: int = 5_000
    # A 429 asking for a longer wait than this counts as a failed attempt instead of a pause.
    wb_max_pause_ms: int = 1_800_000
    # The 127.0.0.1 port gatehouse-wb-sandbox listens on by default (and `make run` points WB at).
    wb_sandbox_port: int = 8081
    # The 127.0.0.1 port of `make run`'s SMTP sink (dev/mail_sink.py, when SMTP_URL is unset).
    mail_sink_port: int = 1025

    # Catalog bulk operations: up to this many products run at once on the request
    # (200, one transaction); more are queued (202) and run in batches of BULK_BATCH_SIZE,
    # each batch one transaction with its audit rows and counters.
    bulk_sync_threshold: int = 50
    bulk_batch_size: int = 500
    # Sweeps (gatehouse.sweeps: jobs on the workers, never timers in a request process): an
    # open cart untouched for this long is abandoned by the cart abandonment sweep (24 h).
    cart_abandon_after_ms: int = 86_400_000
    # Rows per batch of every sweep; each batch (its flips, audit rows and events) is one transaction.
    sweep_batch_size: int = 500

    # Fan-outs (gatehouse.fanout): a tick's jobs are written this many accounts per statement and
    # transaction (the fan-out job's checkpoint moves after each); after this many account-busy
    # skips in a row, an (account, type)'s next scheduled job waits for the gate as a user job, once.
    fan_out_chunk_size: int = Field(default=1_000, ge=1)
    skip_starvation_limit: int = Field(default=3, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _durations(cls, data: object) -> object:
        """Every duration field (``*_ms``, ``RETENTION_FIELDS``) takes ``90s``/``7d`` or bare milliseconds;
        a list of them (WEBHOOK_RETRY_SCHEDULE_MS) takes them comma-separated."""
        if not isinstance(data, dict):
            return data
        parsed = dict(data)
        for key, value in data.items():
            name = key.lower() if isinstance(key, str) else key
            if name not in cls.model_fields or not (name.endswith("_ms") or name in RETENTION_FIELDS):
                continue
            bare_ms = name.endswith("_ms")
            try:
                if cls.model_fields[name].annotation == list[int]:
                    items = value.split(",") if isinstance(value, str) else value
                    parsed[key] = [parse_ms(item, bare_ms=bare_ms) for item in items if str(item).strip()]
                elif value is not None:
                    parsed[key] = parse_ms(value, bare_ms=bare_ms)
            except ValueError as exc:
                raise ValueError(f"{name.upper()}: {exc}") from None
        return parsed

    @field_validator("backend_role", mode="before")
    @classmethod
    def _role(cls, value: object) -> object:
        if value is None or value == "":
            return "all"
        if isinstance(value, str) and value.strip().lower() in ROLES:
            return value.strip().lower()
        raise ValueError(f"must be one of {', '.join(ROLES)} (got {value!r})")

    @field_validator("log_level", mode="before")
    @classmethod
    def _level(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("log_format", mode="before")
    @classmethod
    def _format(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("job_modules", "webhook_retry_schedule_ms", "webhook_allowed_hosts", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [m.strip() for m in value.split(",") if m.strip()]
        return value

    @field_validator("webhook_retry_schedule_ms")
    @classmethod
    def _schedule(cls, value: list[int]) -> list[int]:
        if not value or any(delay < 0 for delay in value):
            raise ValueError("must be one or more delays in ms, comma-separated, none negative")
        return value

    @field_validator("admin_token", mode="before")
    @classmethod
    def _admin_token(cls, value: object) -> object:
        if value is None or value == "":
            return None
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        if isinstance(text, str) and len(text) < ADMIN_TOKEN_MIN:
            raise ValueError(
                f"must be at least {ADMIN_TOKEN_MIN} characters (got {len(text)}): a short token can be "
                f"guessed. Make one with: {MAKE_ADMIN_TOKEN}"
            )
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxies(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        networks = []
        for item in (part.strip() for part in value.split(",")):
            if item:
                try:
                    networks.append(ip_network(item, strict=False))
                except ValueError:
                    raise ValueError(f"{item!r} is not an IP address or CIDR (such as 10.0.0.0/8)") from None
        return networks

    @field_validator("metrics_port")
    @classmethod
    def _metrics_port_apart(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value == info.data.get("api_port"):
            raise ValueError(f"must differ from API_PORT ({value}): the public port never serves /metrics")
        return value

    @field_validator("broker_namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        # A brace would become the Redis Cluster hash tag of every key and put them all in one slot.
        if not value or "{" in value or "}" in value:
            raise ValueError(f"must be non-empty and without braces (got {value!r})")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        url = urlsplit(value.strip())
        if url.scheme not in ("http", "https") or not url.netloc or url.query or url.fragment:
            raise ValueError(
                f"must be an absolute http:// or https:// URL, like http://127.0.0.1:8000 (got {value!r})"
            )
        return value.strip().rstrip("/")

    @field_validator("database_url", "redis_url", "wb_api_base_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def api_bind(self) -> str:
        """API_HOST and API_PORT as gunicorn's ``--bind`` (an IPv6 address in brackets)."""
        return self.bind_on_api_host(self.api_port)

    def bind_on_api_host(self, port: int) -> str:
        host = f"[{self.api_host}]" if ":" in self.api_host else self.api_host
        return f"{host}:{port}"

    def wb_host(self, service: str) -> str:
        """Base URL of a WB service (statistics, finance, advert, analytics, content, common)."""
        if self.wb_api_base_url:
            return f"{self.wb_api_base_url.rstrip('/')}/{HOST_LABELS[service]}"
        return getattr(self, f"wb_{service}_url").rstrip("/")

    @property
    def sqlalchemy_url(self) -> str:
        """DATABASE_URL with the psycopg 3 driver, whatever scheme was given."""
        return "postgresql+psycopg://" + self.libpq_url.removeprefix("postgresql://")

    @property
    def libpq_url(self) -> str:
        """DATABASE_URL as libpq (psycopg itself) takes it, whatever scheme was given."""
        url = self.require("database_url")
        for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
            if url.startswith(prefix):
                return "postgresql://" + url[len(prefix) :]
        raise ConfigurationError(f"DATABASE_URL must be a postgresql:// URL (got {url.split(':')[0]}://…)")

    def require(self, field: str) -> str:
        value = getattr(self, field)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if not value:
            stores = (
                "Point it at your server, or use `make run`, which starts embedded "
                "PostgreSQL and Redis under ./var."
            )
            what = {
                "database_url": f"it is the PostgreSQL URL (postgresql://user:password@host:5432/db). {stores}",
                "redis_url": f"it is the Redis URL (redis://host:6379/0 or unix://…). {stores}",
                "token_encryption_key": (
                    "it is the Fernet key that encrypts the sellers' WB tokens at rest "
                    "(several, comma-separated, to rotate: the first encrypts, all decrypt). "
                    "Make one with: "
                    'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
                    " and keep it: tokens stored under a key cannot be read without it "
                    "(`make run` keeps one in var/token-key)."
                ),
                "admin_token": (
                    f"it is the bearer token of the admin API (a random string of {ADMIN_TOKEN_MIN} "
                    f"characters or more). Make one with: {MAKE_ADMIN_TOKEN}"
                ),
                "console_secret": (
                    "it keys the console's sessions and CSRF tokens, the same in every API replica "
                    '(any long random string). Make one with: python -c "import secrets; '
                    'print(secrets.token_urlsafe(32))" (`make run` keeps one in var/console-secret).'
                ),
            }.get(field, "")
            raise ConfigurationError(f"{field.upper()} is not set{': ' + what if what else '.'}")
        return value

    # Redis calls of the producer and the API (socket and connect timeout). The
    # job row is written before its enqueue, so a Redis that stopped answering
    # must cost a request this long at most, not a hang: reconciliation enqueues later.
    redis_timeout_ms: int = 2_000
    # /readyz waits this long for each store before it reports it down; below the
    # readiness probe's own timeout (infra/k8s: 3 s), so the probe gets an answer.
    ready_timeout_ms: int = 1_000
    # POST /v1/admin/catalog/products/batch (up to 1,000 products) may send a body
    # this large; every other request body stays under MAX_BODY_BYTES.
    catalog_batch_max_body_bytes: int = 4_194_304

    # Notification e-mails (the notifications.email job, stdlib smtplib): the SMTP
    # server as smtp://host:port (smtps:// for TLS from the first byte,
    # smtp://user:password@host:port to log in). Unset, an e-mail job fails at
    # once with SMTP_NOT_CONFIGURED (the in-app notification stays). `make run`
    # points it at its local sink.
    smtp_url: str | None = None
    # The whole SMTP exchange (connect to QUIT) ends after this long, however slowly the
    # server answers, so it costs a worker thread seconds, not minutes; a timeout is a failed attempt.
    smtp_timeout_ms: int = 10_000
    # The From: of every notification e-mail.
    mail_from: str = "Gatehouse <gatehouse@localhost>"
    # Where operators reach the API and its console (scheme, host, port, any path
    # prefix), as they would type it: an e-mail links to the console page of what it
    # is about as PUBLIC_URL + that page's path. `make run` should set it from its port.
    public_url: str = "http://127.0.0.1:8000"

    # Webhooks (the webhook.deliver job). The delays before attempts 1…8 (Svix's
    # schedule: at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h), scaled like every
    # retry by RETRY_DELAY_SCALE; the number of delays is the number of attempts.
    webhook_retry_schedule_ms: Annotated[list[int], NoDecode] = [
        0, 5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000,
    ]  # fmt: skip
    # An attempt succeeds with a 2xx within this long (connect to last byte read: a total
    # deadline, however slowly the receiver trickles its answer).
    webhook_timeout_ms: int = 15_000
    # Hosts or CIDRs a webhook may target despite the SSRF rules (loopback, private,
    # link-local, metadata addresses), and over plain http. Empty in production.
    webhook_allowed_hosts: Annotated[list[str], NoDecode] = []
    # After a secret rotation, deliveries are signed with the old secret too for this long.
    webhook_rotation_grace_ms: int = 86_400_000
    # At most this many attempts to one endpoint run at once (across every worker);
    # more wait for a slot without spending an attempt, so a slow endpoint holds few threads.
    webhook_max_per_endpoint: int = 4
    # One webhook.deliver job sends at most this many deliveries to one endpoint (those
    # raised in one transaction, or replayed together), one after another in its slot,
    # so a run and its bookkeeping serve the batch; the undelivered are retried together.
    webhook_batch_size: int = Field(default=50, ge=1)
    # An endpoint whose every attempt has failed for this long (since its first failure after a
    # success) is disabled with reason `failing`; the other endpoints get webhook.endpoint.disabled
    # and the staff a notification (5 days, as Svix).
    webhook_disable_after_ms: int = Field(default=432_000_000, ge=0)

    # Throttled authentication (gatehouse.auth_throttle): AUTH_MAX_FAILURES failed bearer or console
    # sign-in attempts from one client address within a minute lock that address out for
    # AUTH_LOCKOUT_MS (429 with Retry-After), counted in Redis so every API process agrees.
    auth_max_failures: int = Field(default=20, ge=1)
    auth_lockout_ms: int = Field(default=60_000, ge=1)
    # CIDRs of the proxies whose X-Forwarded-For is believed (the right-most untrusted hop is the
    # client); empty: the client is the socket's peer and the header is ignored.
    trusted_proxies: Annotated[list[IPv4Network | IPv6Network], NoDecode] = []

    # The operations console (/console, served by the API). Its sessions live in Redis; CONSOLE_SECRET
    # (required by gatehouse-api; `make run` keeps one) keys their names there and their CSRF tokens.
    # Every API replica needs the same one; a new one ends every session.
    console_secret: SecretStr | None = None
    # A console session ends after this long without a request, and this long after its sign-in at most.
    console_idle_timeout_ms: int = Field(default=1_800_000, gt=0)
    console_session_ms: int = Field(default=28_800_000, gt=0)
    # The session cookie's Secure flag: true (the browser sends it over https only) unless the console
    # is served over plain http (`make run`, tests on loopback).
    session_cookie_secure: bool = True
    # Live numbers on console pages refresh this often.
    console_refresh_ms: int = 3_000

    # Nothing hangs for ever (docs/operations/limits.md). A WB call, connect to last byte,
    # ends after this long whatever the server trickles (WB_TIMEOUT_MS bounds each socket wait).
    wb_call_deadline_ms: int = 120_000
    # Every API and worker connection to PostgreSQL (not the migrations') waits at most this
    # long for a lock and runs a statement at most this long; past it the statement fails.
    db_lock_timeout_ms: int = 10_000
    db_statement_timeout_ms: int = 60_000
    # Each job type's run time limit (gatehouse.job_types) is multiplied by this; tests shrink it.
    run_time_limit_scale: float = Field(default=1.0, gt=0)

    # Retention (gatehouse.retention, docs/operations/retention.md): the hourly maintenance:prune
    # job (and gatehouse-prune) deletes finished jobs, webhook deliveries with their attempts,
    # notifications and audit rows older than these, in batches of PRUNE_BATCH_SIZE rows, each
    # its own transaction. Written 7d, 12h, …; 0 keeps that kind for ever. A job type may
    # override the job ones (JobType.retention); a job's latest finished run is always kept.
    job_retention_completed: int = 7 * 86_400_000
    job_retention_failed: int = 30 * 86_400_000
    webhook_retention_delivered: int = 7 * 86_400_000
    webhook_retention_dead: int = 30 * 86_400_000
    notification_retention: int = 90 * 86_400_000
    audit_retention: int = 365 * 86_400_000
    # Multiplies every retention above and every job type's own (like RETRY_DELAY_SCALE): a soak
    # runs a day's retention in minutes (0.0333: a sync's completed run kept 2 min, not 1 h).
    retention_scale: float = Field(default=1.0, gt=0)
    prune_batch_size: int = Field(default=5_000, ge=1)


# Retention settings: durations without the _ms suffix (their name is the contract); a bare
# number must be 0 (keep forever), anything else needs its unit.
RETENTION_FIELDS = frozenset(
    {
        "job_retention_completed",
        "job_retention_failed",
        "webhook_retention_delivered",
        "webhook_retention_dead",
        "notification_retention",
        "audit_retention",
    }
)

# Settings that were replaced: set, they would be ignored without a word (an API that
# used to listen on 0.0.0.0 would listen on loopback only), so they stop the process.
REPLACED = {
    "API_BIND": "API_HOST and API_PORT",
    "WB_SANDBOX_BIND": "WB_SANDBOX_PORT (the sandbox listens on 127.0.0.1; its --bind still takes host:port)",
}


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, with overrides (tests, embedded run).

    A bad value becomes a ConfigurationError naming the variable, so entry
    points can print one line and exit non-zero instead of a traceback.
    """
    replaced = [f"{old} was replaced by {new}" for old, new in REPLACED.items() if old in os.environ]
    if replaced:
        raise ConfigurationError("; ".join(replaced))
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            message = err["msg"].removeprefix("Value error, ")
            # A field's error names its variable; the duration check (a model validator) names its own.
            lines.append(f"{str(err['loc'][0]).upper()}: {message}" if err["loc"] else message)
        raise ConfigurationError("; ".join(lines)) from None
