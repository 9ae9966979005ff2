"""The sweeps: time-driven status changes, in batches, each batch one transaction.

A sweep (``SWEEPS``) is run by its job on a worker — never by a timer in a
request process. Before each batch it reads its module's row fresh from
``module_registrations``: with the module off it does nothing (``ModuleDisabled``
before the first batch; a run that sees it go off stops between batches).

A batch is one statement in one transaction:

- it selects up to SWEEP_BATCH_SIZE due rows ``FOR UPDATE SKIP LOCKED`` — rows
  another sweep is flipping right now are skipped, not waited for, and a row
  changed meanwhile is re-checked against the due condition;
- flips them with a conditional UPDATE (the status it was selected in) … RETURNING;
- writes one ``audit_log`` row per flipped row (set-based, in the same statement),

then raises one event per new status with the batch's ids on the event bus, in
the same unit of work, which sends the event's jobs after the commit. So an
interrupted run leaves whole batches, the next run continues with what is still
due, and two sweeps at once (two schedulers, a CLI run during a tick) flip each
row once. A sweep ends at the first batch that finds nothing due.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import text

from gatehouse import job_types as jt
from gatehouse.events import Event
from gatehouse.job_types import JobType

if TYPE_CHECKING:
    from gatehouse.uow import Tx


@dataclass(frozen=True)
class Move:
    """One status change a sweep makes: to ``status``, audited as ``action``, raising ``event``."""

    status: str
    action: str
    event: str
    counted_as: str  # its key in the job's result, e.g. "abandoned"


@dataclass(frozen=True)
class Sweep:
    name: str  # also its schedule's name
    module: str
    job_type: JobType
    table: str
    entity: str  # of its audit rows
    ids_field: str  # of its events' data
    # SQL: which rows are due (over the table's columns), and the status a due row ``t`` moves to.
    due: str
    to: str
    moves: tuple[Move, ...]
    order: str = "id"

    @property
    def actor(self) -> str:
        """Who its audit rows name."""
        return f"sweep:{self.name}"

    def batch_sql(self) -> str:
        """One batch: lock the due rows, flip them, audit them; returns (id, after) per flipped row."""
        action = (
            "CASE f.after " + " ".join(f"WHEN '{m.status}' THEN '{m.action}'" for m in self.moves) + " END"
        )
        return f"""
WITH due AS (
  SELECT id, status FROM {self.table} WHERE {self.due}
  ORDER BY {self.order} LIMIT :size FOR UPDATE SKIP LOCKED
), flipped AS (
  UPDATE {self.table} AS t SET status = {self.to}, updated_at = now()
  FROM due WHERE t.id = due.id AND t.status = due.status
  RETURNING t.id, due.status AS before, t.status AS after
), audited AS (
  INSERT INTO audit_log (actor, action, entity, entity_id, before, after)
  SELECT :actor, {action}, '{self.entity}', f.id::text,
    jsonb_build_object('status', f.before), jsonb_build_object('status', f.after)
  FROM flipped AS f
)
SELECT id, after FROM flipped ORDER BY id"""


_MS = ":abandon_after_ms * interval '1 millisecond'"
CART_ABANDONMENT = Sweep(
    name="cart-abandonment",
    module="carts",
    job_type=jt.CART_ABANDONMENT_SWEEP,
    table="carts",
    entity="cart",
    ids_field="cartIds",
    due=f"status = 'open' AND updated_at < now() - {_MS}",
    to="'abandoned'",
    moves=(Move("abandoned", "cart.abandon", "carts.cart.abandoned", "abandoned"),),
    order="updated_at",  # oldest first, by carts_open_by_updated
)
PRICE_LIST_STATUS = Sweep(
    name="price-list-status",
    module="price_lists",
    job_type=jt.PRICE_LIST_STATUS_SWEEP,
    table="price_lists",
    entity="price_list",
    ids_field="priceListIds",
    due=(
        "(status = 'scheduled' AND valid_from <= now()) "
        "OR (status IN ('scheduled', 'active') AND valid_to <= now())"
    ),
    # Past its end it is expired, whether it was scheduled or active.
    to="CASE WHEN t.valid_to <= now() THEN 'expired' ELSE 'active' END",
    moves=(
        Move("active", "price_list.activate", "price_lists.price_list.activated", "activated"),
        Move("expired", "price_list.expire", "price_lists.price_list.expired", "expired"),
    ),
)
RFQ_EXPIRY = Sweep(
    name="rfq-expiry",
    module="rfq",
    job_type=jt.RFQ_EXPIRY_SWEEP,
    table="rfqs",
    entity="rfq",
    ids_field="rfqIds",
    due="status IN ('open', 'quoted') AND expires_at <= now()",
    to="'expired'",
    moves=(Move("expired", "rfq.expire", "rfq.rfq.expired", "expired"),),
    order="expires_at",  # by rfqs_live_by_expires_at
)
SWEEPS: dict[str, Sweep] = {s.name: s for s in (CART_ABANDONMENT, PRICE_LIST_STATUS, RFQ_EXPIRY)}
BY_JOB_TYPE: dict[str, Sweep] = {s.job_type.name: s for s in SWEEPS.values()}


@dataclass
class SweepRun:
    """What one run of a sweep did: rows flipped per new status, batches committed."""

    sweep: Sweep
    flipped: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    stopped: str | None = None  # MODULE_DISABLED: its module went off between two batches

    @property
    def total(self) -> int:
        return sum(self.flipped.values())

    def result(self) -> dict[str, Any]:
        """The job's result, e.g. {"abandoned": 1234, "batches": 3}."""
        counted = {m.counted_as: self.flipped.get(m.status, 0) for m in self.sweep.moves}
        return {**counted, "batches": self.batches, **({"stopped": self.stopped} if self.stopped else {})}


def run_batch(tx: Tx, sweep: Sweep, *, size: int, params: dict[str, Any]) -> dict[str, list[str]]:
    """One batch in ``tx``: the flips, their audit rows and their events; returns new status -> ids."""
    rows = tx.conn.execute(text(sweep.batch_sql()), {"size": size, "actor": sweep.actor, **params}).all()
    flipped: dict[str, list[str]] = {}
    for row in rows:
        flipped.setdefault(row.after, []).append(str(row.id))
    tx.publish(
        *(Event(m.event, {sweep.ids_field: flipped[m.status]}) for m in sweep.moves if m.status in flipped)
    )
    return flipped
