"""Request and response bodies of the HTTP API (pydantic); also the source of the OpenAPI schemas."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    RootModel,
    StringConstraints,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from gatehouse.catalog import rules as catalog
from gatehouse.errors import ValidationFailed
from gatehouse.models import STATES
from gatehouse.progress import PHASES
from gatehouse.sweeps import rules as sweeps
from gatehouse.users import EMAIL_MAX, EMAIL_PATTERN
from gatehouse.users import NAME_MAX as USER_NAME_MAX
from gatehouse.webhooks import store as webhooks_store
from gatehouse.webhooks import tables as webhooks_tables

# Some visible character, and no NUL (PostgreSQL text cannot hold it).
NON_BLANK = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"
# Any text without NUL, empty included.
NO_NUL = r"^[^\u0000]*$"
# Unicode's format characters (category Cf as of Unicode 14): bidi controls and overrides, zero-width
# spaces and joiners, the soft hyphen, tags. Invisible, they make a name read as another or reverse
# the text around it (a console page's title), so names refuse them; free text (descriptions) keeps them.
FORMAT_CHARS = (
    r"\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890-\u0891\u08E2\u180E\u200B-\u200F\u202A-\u202E"
    r"\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB\U000110BD\U000110CD\U00013430-\U00013438"
    r"\U0001BCA0-\U0001BCA3\U0001D173-\U0001D17A\U000E0001\U000E0020-\U000E007F"
)
# A name (of an account, a staff user, a product, an attribute, a price list; a customer's reference):
# some visible character, no NUL, no format character.
NAME = rf"^[^\u0000{FORMAT_CHARS}]*[^\s\u0000{FORMAT_CHARS}][^\u0000{FORMAT_CHARS}]*$"
# What a value breaking each pattern of these bodies is told, in words (a raw regex means nothing to a user).
PATTERN_RULES = {
    NON_BLANK: "must hold at least one visible character, and no NUL character",
    NO_NUL: "must not contain a NUL character",
    NAME: (
        "must hold at least one visible character, and no NUL or invisible formatting character "
        "(a bidi control, a zero-width space or joiner)"
    ),
    EMAIL_PATTERN: "must be an email address such as ops@example.com",
    catalog.SKU_PATTERN: catalog.SKU_RULE,
    catalog.CODE_PATTERN: catalog.CODE_RULE,
}


class Body(BaseModel):
    """Request bodies: strict types, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


AccountName = Annotated[str, StringConstraints(max_length=200, pattern=NAME)]
WbToken = Annotated[str, StringConstraints(max_length=4096, pattern=NON_BLANK)]


class CreateAccount(Body):
    name: AccountName
    wbToken: WbToken


class PatchAccount(Body):
    """At least one field; an absent one stays as it is."""

    name: AccountName = None
    wbToken: WbToken = Field(
        default=None, description="a new WB token: stored encrypted, never returned; clears tokenInvalid"
    )
    active: bool = Field(
        default=None,
        description="false: its scheduled fan-outs skip it and its job creates answer 409 ACCOUNT_INACTIVE "
        "(live jobs finish); true: back on",
    )


class ImportRequest(Body):
    kind: Literal["feeds", "report"]
    dateFrom: date = Field(description="first day, YYYY-MM-DD, not after today (UTC)")
    dateTo: date = Field(description="last day, YYYY-MM-DD, not before dateFrom")


class SyncRequest(Body):
    """A user's WB sync (autobidder, inventory): no options yet; the body may be empty or ``{}``."""


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AccountCreated(Reply):
    accountId: uuid.UUID
    name: str


class TokenInvalidView(Reply):
    since: datetime = Field(description="when WB first rejected the token")
    jobId: uuid.UUID = Field(description="the job WB rejected it on")
    status: int = Field(description="WB's answer: 401")


Access = Literal["granted", "denied", "unknown"]


class TokenAccessView(Reply):
    """A WB token category: granted or denied as WB answered (account-verify's /ping, or a job's 401
    ``token scope not allowed``), unknown until then. A denied one's jobs answer 409."""

    statistics: Access
    finance: Access
    promotion: Access
    analytics: Access
    content: Access


class SellerView(Reply):
    """WB's seller-info of the token (GET common-api /api/v1/seller-info)."""

    name: str | None
    sid: str | None
    tin: str | None
    tradeMark: str | None


class AccountView(Reply):
    accountId: uuid.UUID
    name: str
    active: bool = Field(description="false: switched off (PATCH): no scheduled jobs, no new jobs")
    tokenInvalid: TokenInvalidView | None = Field(
        description="WB rejected the account's token: its scheduled fan-outs skip it until PATCH sets a "
        "new one; null: not rejected"
    )
    access: TokenAccessView = Field(description="the token's categories; a new token resets them to unknown")
    seller: SellerView | None = Field(description="whose token it is, per WB; null until account-verify ends")
    tokenExpiresAt: datetime | None = Field(
        description="the token's JWT exp; null for an opaque token. WB tokens live 180 days"
    )
    createdAt: datetime
    paused: bool = Field(
        description="an operator paused it (POST /v1/admin/accounts/{accountId}/pause): its WB jobs wait"
    )


class IssueKey(Body):
    """The body may be empty or ``{}``: a key that never expires."""

    expiresAt: AwareDatetime | None = Field(
        default=None, description="past this instant the key answers 401; must be ahead, with its offset"
    )


class KeyCreated(Reply):
    key: str = Field(description="shown once; stored only as a hash")


class KeyView(Reply):
    """A key as listed: never its secret."""

    keyId: str = Field(description="the <id> of ghk_<id>_… or ghu_<id>_…")
    createdAt: datetime
    lastUsedAt: datetime | None = Field(description="to within a minute; null if never used")
    expiresAt: datetime | None = Field(description="null: it never expires")


class KeyList(Reply):
    items: list[KeyView] = Field(description="every key not revoked, newest first (expired ones too)")


class JobAccepted(Reply):
    jobId: uuid.UUID
    alreadyRunning: bool = Field(
        description="true: a live job of this type already existed; nothing was enqueued"
    )


class WaitingForView(Reply):
    jobId: uuid.UUID
    type: str
    tier: Literal["user", "scheduled"]
    phase: Literal[PHASES] | None  # type: ignore[valid-type]


class Progress(Reply):
    phase: Literal[PHASES]  # type: ignore[valid-type]
    message: str = Field(description="ready-to-show Russian text")
    resumeAt: datetime | None = Field(description="when a delayed job becomes eligible again")
    attempt: int = Field(description="the attempt that runs or will run next")
    maxAttempts: int
    # Only on a job's own status poll (GET /v1/jobs/{jobId}) while it waits for its account's gate.
    waitingFor: WaitingForView | None = Field(
        default=None,
        description="phase waiting-account only: the job that holds its account's gate; null if none now",
    )
    position: int | None = Field(
        default=None,
        description="phase waiting-account only: its place in its account's line (1 = next); null if not in it",
    )
    # Only on a job's own status poll, while its account's WB token expires within WB_TOKEN_EXPIRY_WARNING_MS.
    tokenWarning: str | None = Field(
        default=None, description="the account's WB token expires soon (Russian; also ends `message`)"
    )


class JobView(Reply):
    jobId: uuid.UUID
    type: str
    accountId: uuid.UUID | None
    tier: Literal["user", "scheduled"]
    state: Literal[STATES]  # type: ignore[valid-type]
    progress: Progress | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    createdAt: datetime
    startedAt: datetime | None
    finishedAt: datetime | None
    cancelRequestedAt: datetime | None = Field(
        default=None, description="an operator cancelled it while it ran; it stops at its next checkpoint"
    )


# -- steering: holds and bulk actions ---------------------------------------------------------


class HoldView(Reply):
    paused: bool
    pausedBy: str | None = Field(
        description="who paused it: a staff user's id, \"admin\"; a module's switcher"
    )
    pausedAt: datetime | None
    module: str | None = Field(
        default=None, description="set when a module's queue is held because the module is off (its switch)"
    )


class QueueHold(HoldView):
    queue: str


class AccountHold(HoldView):
    accountId: uuid.UUID


class ByState(Reply):
    waiting: int | None
    active: int | None
    delayed: int | None


class QueueView(QueueHold):
    depth: ByState = Field(description="its live job rows by state")
    oldestAgeMs: ByState = Field(
        description="the age of the oldest row in each state (since created); null: none"
    )


class QueueList(Reply):
    items: list[QueueView]


class BulkJobFilter(Body):
    state: Literal["waiting", "delayed", "failed"] | None = Field(
        default=None, description="retry: failed (the default); cancel: waiting or delayed (both by default)"
    )
    type: Annotated[str, StringConstraints(max_length=200)] | None = None
    accountId: uuid.UUID | None = None
    errorCode: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        default=None, description="error.code of the job, e.g. wb-unauthorized"
    )
    finishedAfter: datetime | None = Field(default=None, description="inclusive; retry only")
    finishedBefore: datetime | None = Field(default=None, description="exclusive; retry only")


class BulkJobsRequest(Body):
    filter: BulkJobFilter = Field(default_factory=BulkJobFilter)
    dryRun: bool = Field(default=False, description="answer how many match, queue nothing")


class BulkMatched(Reply):
    matched: int


class BulkAccepted(Reply):
    operationId: uuid.UUID = Field(
        description="the maintenance:bulk-jobs job doing it: GET /v1/jobs/{operationId} (its result when done)"
    )
    matched: int = Field(description="how many matched when it was queued")


class JobPage(Reply):
    items: list[JobView]
    nextCursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")


class JobAttemptView(Reply):
    attempt: int = Field(description="the job's attempt number the run had (a WB pause uses none)")
    worker: str | None = Field(description="the worker process that ran it (host:pid:tail)")
    startedAt: datetime = Field(description="when its body started (a run parked at the gate has no record)")
    finishedAt: datetime | None = Field(description="null while it runs, or when its worker died (lost)")
    durationMs: int | None
    outcome: Literal["completed", "failed", "skipped", "retry", "parked", "lost"] | None = Field(
        description="how it ended: `retry` (failed, another attempt follows), `parked` (a WB pause, no "
        "attempt used), `lost` (its worker died; recovery put the job back in line); null while it runs"
    )
    error: dict[str, Any] | None = Field(description="the run's error: `code`, `message`")


class JobAttempts(Reply):
    items: list[JobAttemptView] = Field(description="oldest first")


class WaiterView(Reply):
    jobId: uuid.UUID
    tier: Literal["user", "scheduled"]
    waitingSince: datetime = Field(description="when it first asked for the gate (its line position)")


class PauseView(Reply):
    jobId: uuid.UUID
    at: datetime = Field(description="when WB answered 429")
    resumeAt: datetime = Field(description="when WB allowed the job to go on")
    reason: str


class GateView(Reply):
    holder: uuid.UUID | None = Field(description="the job holding the account's gate")
    leaseMsLeft: int | None = Field(description="until the holder's lease runs out")
    wanted: uuid.UUID | None = Field(
        description="the user job that last asked for the gate (keeps scheduled jobs off)"
    )
    waiting: list[uuid.UUID] = Field(description="parked jobs, the next to be woken first")
    waiters: list[WaiterView] = Field(description="the same parked jobs with their tier and wait")
    recentPauses: list[PauseView] = Field(
        description="WB 429 pauses of the account's jobs, last 24 h, newest first"
    )


class AccountGateView(Reply):
    accountId: uuid.UUID
    name: str
    createdAt: datetime
    hot: bool = Field(
        description="its gate is held with jobs waiting, or WB paused one of its jobs in the last 24 h"
    )
    gate: GateView


class AccountGatePage(Reply):
    items: list[AccountGateView]
    nextCursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")


class ScheduleView(Reply):
    name: str
    jobType: str
    cron: str = Field(description="minute hour day month weekday, in UTC")
    maxWaitMs: int | None = Field(description="how long a job of the tick may wait for its account's gate")
    perAccount: bool = Field(description="true: a tick is a job per active account; false: one job (a sweep)")
    spreadMs: int = Field(
        description="the window a tick's jobs are due over, each account at the same offset every tick "
        "(0: all at the tick, and always for a single job)"
    )
    enabled: bool = Field(description="false: no cron (an admin may still run it now)")
    module: str | None = Field(
        description="the platform module its jobs belong to; null: the core's (never off)"
    )
    moduleEnabled: bool | None = Field(
        description="false: its module is disabled or not installed, so its ticks create nothing and "
        "run now answers MODULE_DISABLED; null: unknown (the overview, PostgreSQL not answering)"
    )
    lastRun: datetime | None
    nextRun: datetime | None


class ScheduleList(Reply):
    items: list[ScheduleView]


class ScheduleRun(Reply):
    name: str
    messageId: str


# -- B2B: staff users -------------------------------------------------------------------


class CreateUser(Body):
    email: Annotated[str, StringConstraints(max_length=EMAIL_MAX, pattern=EMAIL_PATTERN)] = Field(
        description="stored lower-cased; unique regardless of case"
    )
    name: Annotated[str, StringConstraints(max_length=USER_NAME_MAX, pattern=NAME)]


class UserCreated(Reply):
    userId: uuid.UUID
    email: str
    name: str


class UserView(Reply):
    userId: uuid.UUID
    email: str
    name: str
    role: str
    createdAt: datetime


class UserList(Reply):
    items: list[UserView] = Field(description="every staff user not removed, by e-mail")


# -- B2B: catalog (admin) ----------------------------------------------------------------

Sku = Annotated[str, StringConstraints(max_length=catalog.SKU_MAX, pattern=catalog.SKU_PATTERN)]
ProductName = Annotated[str, StringConstraints(max_length=catalog.NAME_MAX, pattern=NAME)]
Description = Annotated[str, StringConstraints(max_length=catalog.DESCRIPTION_MAX, pattern=NO_NUL)]
Status = Literal[catalog.STATUSES]  # type: ignore[valid-type]
Code = Annotated[str, StringConstraints(max_length=catalog.CODE_MAX, pattern=catalog.CODE_PATTERN)]
Label = Annotated[str, StringConstraints(max_length=catalog.LABEL_MAX, pattern=NAME)]
VALUE_SCHEMA: list[dict[str, Any]] = [
    {"type": "string", "maxLength": catalog.VALUE_MAX, "pattern": NO_NUL},
    {"type": "number"},
    {"type": "boolean"},
]


def _attribute_value(removable: bool) -> Any:
    """One value, checked by the catalog's rule (one error at ``attributes.<code>``, no union noise)."""

    def check(value: Any) -> Any:
        try:
            catalog.check_value(value, "value", removable=removable)
        except ValidationFailed as exc:
            raise PydanticCustomError("attribute_value", exc.detail.removeprefix("value ")) from None
        return value

    schema = [*VALUE_SCHEMA, {"type": "null"}] if removable else VALUE_SCHEMA
    return Annotated[Any, PlainValidator(check), WithJsonSchema({"anyOf": schema})]


AttributeValue = _attribute_value(removable=False)
RemovableValue = _attribute_value(removable=True)
ATTRIBUTES_DOC = "{attribute code: string, number or boolean}; every code must be a defined attribute"
# PATCH bodies must change something.
SOME_FIELD = ConfigDict(json_schema_extra={"minProperties": 1})


def _currency(value: str) -> str:
    if value not in catalog.CURRENCIES:
        raise PydanticCustomError("currency", catalog.currency_problem(value))
    return value


# An active ISO 4217 code (the catalog's list), checked with the other fields of the body.
Currency = Annotated[
    str,
    AfterValidator(_currency),
    WithJsonSchema({"type": "string", "enum": sorted(catalog.CURRENCIES)}),
]


class PriceBody(Body):
    amount: Annotated[int, Field(ge=0, le=catalog.AMOUNT_MAX, description="minor units (e.g. grosze)")]
    currency: Currency = Field(description="an active ISO 4217 code, e.g. PLN")


class CreateProduct(Body):
    sku: Sku
    name: ProductName
    description: Description = ""
    price: PriceBody
    status: Status = "draft"
    attributes: Annotated[
        dict[Code, AttributeValue], Field(max_length=catalog.ATTRIBUTES_MAX, description=ATTRIBUTES_DOC)
    ] = Field(default_factory=dict)


class CreateProducts(Body):
    items: Annotated[list[CreateProduct], Field(min_length=1, max_length=catalog.BATCH_MAX)]


class PatchProduct(Body):
    """Only the fields sent change; ``attributes`` merges into the product's (null removes a code)."""

    model_config = SOME_FIELD

    name: ProductName = None
    description: Description = None
    price: PriceBody = None
    status: Status = None
    attributes: Annotated[
        dict[Code, RemovableValue],
        Field(max_length=catalog.ATTRIBUTES_MAX, description="merged; a null value removes the code"),
    ] = None


class PriceView(Reply):
    amount: int
    currency: str


class ProductView(Reply):
    productId: uuid.UUID
    sku: str
    name: str
    description: str
    price: PriceView
    status: Status
    attributes: dict[str, Any]
    createdAt: datetime
    updatedAt: datetime


class ProductPage(Reply):
    items: list[ProductView]
    nextCursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")


class ProductsCreated(Reply):
    created: int


class CreateAttribute(Body):
    code: Code
    label: Label
    searchable: bool = Field(default=False, description="its values go into the products' search documents")


class PatchAttribute(Body):
    model_config = SOME_FIELD

    label: Label = None
    searchable: bool = None


class AttributeView(Reply):
    code: str
    label: str
    searchable: bool
    createdAt: datetime


class AttributeList(Reply):
    items: list[AttributeView]


class FieldError(BaseModel):
    """One invalid field of a request."""

    field: str | None = Field(description="the field, as the body spells it (price.currency, items.0.sku)")
    message: str = Field(description="what is wrong with it, in words, the field named first")


class Problem(BaseModel):
    """RFC 9457 problem details, with a stable machine-readable code."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    field: str | None = Field(default=None, description="the offending field (the first of `errors`)")
    errors: list[FieldError] | None = Field(
        default=None,
        description="with VALIDATION_ERROR: every invalid field found; the first is `field` and `detail`",
    )
    store: Literal["postgresql", "redis"] | None = Field(
        default=None, description="with STORE_UNAVAILABLE: the store that is not answering"
    )


# -- B2B: the calling staff user's notifications ------------------------------------------


class NotificationView(Reply):
    notificationId: uuid.UUID
    kind: str = Field(description='what it is about, e.g. "catalog.bulk_operation.completed"')
    title: str
    body: str
    link: str | None
    createdAt: datetime
    readAt: datetime | None = Field(description="null until marked read")


class NotificationList(Reply):
    items: list[NotificationView] = Field(description="the newest 100, newest first")


# -- data freshness ----------------------------------------------------------------------


class FreshnessSlo(Reply):
    maxAgeSeconds: int = Field(
        description="older than this the dataset is stale (FRESHNESS_SLO, or 2 × its schedule's cadence + spread)"
    )


class DatasetFreshness(Reply):
    dataset: Literal["orders", "sales", "report", "campaigns", "campaign-stats", "stocks", "cards"]
    lastSyncedAt: datetime | None = Field(
        description="when a completed job last brought it up to date; null: never"
    )
    lastJobId: uuid.UUID | None = Field(description="that job")
    ageSeconds: int | None = Field(description="seconds since lastSyncedAt; null: never synced")
    slo: FreshnessSlo
    stale: bool = Field(description="never synced, or older than slo.maxAgeSeconds")


class AccountFreshness(Reply):
    datasets: list[DatasetFreshness] = Field(description="every dataset, in a fixed order")


# -- catalog bulk operations ----------------------------------------------------------

BULK_IDS_MAX = 100_000


class BulkFilter(Body):
    """Products matching all the given fields (an empty filter selects the whole catalog)."""

    status: Status = None
    skuPrefix: Annotated[str, StringConstraints(max_length=catalog.SKU_MAX, pattern=NO_NUL)] = None
    attributes: Annotated[dict[Code, AttributeValue], Field(max_length=catalog.ATTRIBUTES_MAX)] = None


class CreateBulkOperation(Body):
    """Exactly one of ``productIds`` and ``filter``, and the ``patch`` applied to each product."""

    productIds: Annotated[list[uuid.UUID], Field(min_length=1, max_length=BULK_IDS_MAX)] = None
    filter: BulkFilter = None
    patch: PatchProduct
    dryRun: bool = Field(
        False, description="true: answer what it would change (BulkPreview), write nothing, whatever its size"
    )


class BulkCounters(Reply):
    total: int
    processed: int
    succeeded: int
    failed: int


class FailedItem(Reply):
    productId: uuid.UUID
    reason: str


class BulkOperationView(Reply):
    operationId: uuid.UUID
    type: Literal["product_bulk_update", "search_reindex"]
    status: Literal["pending", "running", "completed", "failed"]
    requester: uuid.UUID | None = Field(description="the staff user who started it; null for the admin token")
    counters: BulkCounters
    failedItems: list[FailedItem] = Field(description="the first 1,000 products that could not be patched")
    createdAt: datetime
    startedAt: datetime | None
    finishedAt: datetime | None
    error: dict[str, Any] | None
    request: dict[str, Any] = Field(
        description=(
            "what it applies: the patch and the filter as sent (listed productIds are counted in total); "
            'a revert: {"revertOf"}'
        )
    )
    revertOf: uuid.UUID | None = Field(description="the operation it reverts; null: not a revert")
    links: dict[str, str]


class BulkPreviewItem(Reply):
    productId: uuid.UUID
    sku: str
    before: dict[str, Any] = Field(description="the fields the patch would change, as they are")
    after: dict[str, Any] = Field(description="those fields as the patch would leave them")


class BulkPreview(Reply):
    """A dry run (``dryRun: true``): nothing was written."""

    matched: int = Field(description="the existing products the selection matches")
    wouldChange: int = Field(description="how many of them the patch would change")
    sample: list[BulkPreviewItem] = Field(description="the first 20 it would change, by product id")


class BulkCreated(RootModel[BulkOperationView | BulkPreview]):
    """The operation applied at once, or (``dryRun``) what it would do."""


class BulkOperationPage(Reply):
    items: list[BulkOperationView]
    nextCursor: str | None


class BulkFailure(Reply):
    position: int = Field(description="1-based, in the order the batches met them")
    productId: str
    sku: str | None = Field(description="null: the product does not exist (any more)")
    name: str | None
    reason: str


class BulkFailurePage(Reply):
    items: list[BulkFailure]
    nextCursor: str | None


# -- catalog search --------------------------------------------------------------------


class SearchHit(Reply):
    productId: uuid.UUID
    sku: str
    name: str
    status: str
    rank: float


class SearchPage(Reply):
    items: list[SearchHit]


class ReindexStarted(Reply):
    """The live re-index: the one just queued, or (alreadyRunning) the one pending or running."""

    operationId: uuid.UUID
    alreadyRunning: bool


class AttributePatched(AttributeView):
    """The attribute as changed; ``reindex`` only when its ``searchable`` flag flipped."""

    reindex: ReindexStarted | None = None


# -- webhooks --------------------------------------------------------------------------

EventType = Literal[webhooks_store.EVENT_TYPES]  # type: ignore[valid-type]
WebhookUrl = Annotated[str, StringConstraints(min_length=1, max_length=2_000)]
Description = Annotated[str, StringConstraints(max_length=webhooks_store.DESCRIPTION_MAX, pattern=NO_NUL)]
RateLimit = Annotated[int, Field(ge=1, le=1_000_000)]


class CreateEndpoint(Body):
    url: WebhookUrl
    eventTypes: Annotated[list[EventType], Field(min_length=1)] | None = Field(
        default=None, description="the event types it receives; absent or null: every type"
    )
    description: Description = ""
    rateLimitPerSecond: RateLimit | None = Field(
        default=None, description="deliveries beyond it wait, spending no attempt; absent or null: no limit"
    )


class PatchEndpoint(Body):
    url: WebhookUrl = None
    eventTypes: Annotated[list[EventType], Field(min_length=1)] | None = Field(
        default=None, description="null: every type"
    )
    enabled: bool = None
    description: Description = None
    rateLimitPerSecond: RateLimit | None = Field(default=None, description="null: no limit")


class EndpointView(Reply):
    endpointId: uuid.UUID
    accountId: uuid.UUID | None = Field(
        description="the account whose events it receives; null: an admin endpoint"
    )
    url: str
    description: str
    eventTypes: list[str] | None = Field(description="null: every type (of its account's, for an account's)")
    enabled: bool
    disabledReason: str | None = Field(
        description="failing, the endpoint answered 410 Gone, disabled by an admin"
    )
    disabledAt: datetime | None
    rateLimitPerSecond: int | None
    failingSince: datetime | None = Field(
        description="since when every attempt has failed (null: the last succeeded)"
    )
    createdAt: datetime
    updatedAt: datetime


class EndpointCreated(EndpointView):
    secret: str = Field(description="whsec_…: shown only here and on rotation")


class EndpointList(Reply):
    items: list[EndpointView]


class SecretRotated(Reply):
    secret: str
    previousSecretValidUntil: datetime


class TestSent(Reply):
    deliveryId: uuid.UUID


class ReplayQueued(Reply):
    jobId: uuid.UUID
    endpointId: uuid.UUID
    since: datetime | None


class AttemptView(Reply):
    attempt: int
    at: datetime
    statusCode: int | None
    error: str | None
    durationMs: int | None
    responseBody: str | None = Field(description="the first 2,000 characters of the answer")


class DeliveryView(Reply):
    deliveryId: uuid.UUID
    webhookId: str = Field(description="msg_…: the webhook-id header on every attempt and replay")
    endpointId: uuid.UUID
    eventType: str
    status: Literal[webhooks_tables.STATUSES]  # type: ignore[valid-type]
    attemptCount: int
    nextAttemptAt: datetime | None
    createdAt: datetime
    deliveredAt: datetime | None
    jobId: uuid.UUID | None = Field(
        description="the job of its current series of attempts (GET /v1/jobs/{jobId})"
    )
    deadReason: dict[str, Any] | None = Field(
        default=None,
        description="why it is dead (null unless dead), with `at`: `reason` `exhausted` (its last attempt "
        "failed: `attempt`, `statusCode`, `error`), `endpoint-gone` (a 410 disabled the endpoint: its own "
        "attempt's `attempt` and `statusCode`, or `byDelivery` and `endpointDisabledAt` when another "
        "delivery's 410 stopped it), `endpoint-disabled` (its endpoint was off when its attempt was due: "
        "`endpointDisabledReason`, `endpointDisabledAt`), `endpoint-failing` (its endpoint failed every "
        "attempt for WEBHOOK_DISABLE_AFTER_MS and was disabled: `endpointDisabledAt`)",
    )


class DeliveryDetail(DeliveryView):
    payload: dict[str, Any]
    attempts: list[AttemptView]


class DeliveryPage(Reply):
    items: list[DeliveryView]
    nextCursor: str | None


class Latency(Reply):
    p50: float | None
    p95: float | None


class LastFailure(Reply):
    at: datetime
    statusCode: int | None = None
    error: str | None = None


class EndpointStats(Reply):
    successRate: float | None = Field(description="2xx answers / attempts, 0 to 1; null without attempts")
    attempts: int = Field(description="finished attempts since `since`")
    latencyMs: Latency
    lastFailure: LastFailure | None


class DeliveryCounts(Reply):
    """One endpoint's deliveries by status."""

    endpointId: uuid.UUID
    pending: int
    delivering: int
    failed: int
    delivered: int
    dead: int


class DeliveryCountList(Reply):
    items: list[DeliveryCounts]


# -- modules ---------------------------------------------------------------------------


class ModuleView(Reply):
    name: str
    installed: bool
    enabled: bool
    queues: list[str] = Field(description="the queues whose consumers pause while it is off")
    updatedAt: datetime
    updatedBy: str


class ModuleList(Reply):
    items: list[ModuleView]


class SetModule(Body):
    enabled: bool = None
    installed: bool = None


# -- B2B: carts, price lists, RFQs (their moves in time are sweeps, jobs on the workers) ------

CustomerRef = Annotated[str, StringConstraints(max_length=sweeps.CUSTOMER_REF_MAX, pattern=NAME)]


class CartItem(Body):
    sku: Sku
    quantity: Annotated[int, Field(ge=1, le=sweeps.QUANTITY_MAX)]


CartItems = Annotated[list[CartItem], Field(max_length=sweeps.ITEMS_MAX, description="each sku at most once")]


class CreateCart(Body):
    customerRef: CustomerRef
    items: CartItems = Field(default_factory=list)


class PatchCart(Body):
    """The cart's new items; it touches the cart (``updatedAt``), and an abandoned cart is open again."""

    items: CartItems


class CartItemView(Reply):
    sku: str
    quantity: int


class CartView(Reply):
    cartId: uuid.UUID
    customerRef: str
    status: Literal[sweeps.CART_STATUSES]  # type: ignore[valid-type]
    items: list[CartItemView]
    createdAt: datetime
    updatedAt: datetime = Field(description="the last change; an open cart untouched for a day is abandoned")


class CreatePriceList(Body):
    name: Annotated[str, StringConstraints(max_length=sweeps.NAME_MAX, pattern=NAME)]
    validFrom: AwareDatetime
    validTo: AwareDatetime = Field(description="after validFrom")


class PriceListView(Reply):
    priceListId: uuid.UUID
    name: str
    status: Literal[sweeps.PRICE_LIST_STATUSES] = Field(  # type: ignore[valid-type]
        description="scheduled before validFrom, active until validTo, then expired"
    )
    validFrom: datetime
    validTo: datetime
    createdAt: datetime
    updatedAt: datetime


class CreateRfq(Body):
    customerRef: CustomerRef
    expiresAt: AwareDatetime


class RfqView(Reply):
    rfqId: uuid.UUID
    customerRef: str
    status: Literal[sweeps.RFQ_STATUSES] = Field(  # type: ignore[valid-type]
        description="open or quoted until expiresAt, then expired"
    )
    expiresAt: datetime
    createdAt: datetime
    updatedAt: datetime
