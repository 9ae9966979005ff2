"""Request and response bodies of the HTTP API (pydantic); also the source of the OpenAPI schemas."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from gatehouse.models import STATES
from gatehouse.progress import PHASES

# Some visible character, and no NUL (PostgreSQL text cannot hold it).
NON_BLANK = r"^[^\u0000]*[^\s\u0000][^\u0000]*$"


class Body(BaseModel):
    """Request bodies: strict types, unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True)


class CreateAccount(Body):
    name: Annotated[str, StringConstraints(max_length=200, pattern=NON_BLANK)]
    wbToken: Annotated[str, StringConstraints(max_length=4096, pattern=NON_BLANK)]


class ImportRequest(Body):
    kind: Literal["feeds", "report"]
    dateFrom: date = Field(description="first day, YYYY-MM-DD")
    dateTo: date = Field(description="last day, YYYY-MM-DD, not before dateFrom")


class AutobidderSyncRequest(Body):
    """No options yet; the body may be empty or ``{}``."""


class Reply(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AccountCreated(Reply):
    accountId: uuid.UUID
    name: str


class AccountView(Reply):
    accountId: uuid.UUID
    name: str
    createdAt: datetime


class KeyCreated(Reply):
    key: str = Field(description="shown once; stored only as a hash")


class JobAccepted(Reply):
    jobId: uuid.UUID
    alreadyRunning: bool = Field(
        description="true: a live job of this type already existed; nothing was enqueued"
    )


class Progress(Reply):
    phase: Literal[PHASES]  # type: ignore[valid-type]
    message: str = Field(description="ready-to-show Russian text")
    resumeAt: datetime | None = Field(description="when a delayed job becomes eligible again")
    attempt: int = Field(description="the attempt that runs or will run next")
    maxAttempts: int


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


class JobPage(Reply):
    items: list[JobView]
    nextCursor: str | None = Field(description="pass as ?cursor= for the next page; null on the last")


class GateView(Reply):
    holder: uuid.UUID | None = Field(description="the job holding the account's gate")
    leaseMsLeft: int | None = Field(description="until the holder's lease runs out")
    wanted: uuid.UUID | None = Field(
        description="the user job that last asked for the gate (keeps scheduled jobs off)"
    )
    waiting: list[uuid.UUID] = Field(description="parked jobs, the next to be woken first")


class ScheduleView(Reply):
    name: str
    jobType: str
    cron: str = Field(description="minute hour day month weekday, in UTC")
    maxWaitMs: int | None = Field(description="how long a job of the tick may wait for its account's gate")
    enabled: bool
    lastRun: datetime | None
    nextRun: datetime | None


class ScheduleList(Reply):
    items: list[ScheduleView]


class ScheduleRun(Reply):
    name: str
    messageId: str


class Problem(BaseModel):
    """RFC 9457 problem details, with a stable machine-readable code."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    field: str | None = None
    store: Literal["postgresql", "redis"] | None = Field(
        default=None, description="with STORE_UNAVAILABLE: the store that is not answering"
    )
