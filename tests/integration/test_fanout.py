"""Fan-outs on real PostgreSQL and Redis, in process: the batched send, the chunks and their checkpoint,
the spread etas, and WB upserts that write only what changed."""

from __future__ import annotations

import json
import uuid
from unittest.mock import ANY

import pytest

from gatehouse import metrics
from gatehouse.accounts import AccountChange
from gatehouse.composition import bootstrap
from gatehouse.fanout import TICK_FIELD, FanOutHandlers, offset_ms
from gatehouse.gate.vocabulary import DUE_AT_FIELD
from gatehouse.jobs import JobMessage, datetime_to_ms, utcnow
from gatehouse.schedules import schedules
from gatehouse.wb import tables
from gatehouse.wb.tables import WbData
from tests.support.processes import free_port


def broker_contents(gh) -> dict[str, dict]:
    """Every message in the broker, by job id: its decoded data and the list that names it."""
    found = {}
    for key in gh.redis.scan_iter(match="gatehouse:*.msgs"):
        listing = key.decode().removesuffix(".msgs")
        listed = [i.decode() for i in gh.redis.lrange(listing, 0, -1)]
        for redis_id, data in gh.redis.hgetall(key).items():
            message = json.loads(data)
            assert redis_id.decode() == message["options"]["redis_message_id"]
            found[message["message_id"]] = {"list": listing, "at": listed.index(redis_id.decode()), **message}
    return found


def test_a_batch_is_written_to_the_broker_as_the_broker_writes_each_message(gh):
    # Given messages due now on two queues and messages due in a minute
    now_ms = datetime_to_ms(utcnow())
    messages = [JobMessage(uuid.uuid4(), "probe", "probe", n) for n in (1, 2, 3)]
    messages += [JobMessage(uuid.uuid4(), "wb-scheduled", "rnp:ads-sync-account", 1)]
    messages += [JobMessage(uuid.uuid4(), "probe", "probe", 7, eta_ms=now_ms + 60_000) for _ in range(2)]

    # When they are sent one by one (RedisBroker.enqueue), and again as one batch
    for m in messages:
        gh.dispatcher.send(m)
    one_by_one = broker_contents(gh)
    gh.redis.flushdb()
    gh.dispatcher.send_all(messages)
    batched = broker_contents(gh)

    # Then the same keys hold the same messages, in the same order; only the ids and clocks differ
    assert set(batched) == set(one_by_one) == {str(m.job_id) for m in messages}

    def comparable(message: dict) -> dict:
        options = {k: v for k, v in message["options"].items() if k != "redis_message_id"}
        return {
            **{k: v for k, v in message.items() if k not in ("options", "message_timestamp")},
            "options": {**options, "eta": round(options["eta"] / 1000)} if "eta" in options else options,
        }

    for job_id, message in batched.items():
        assert comparable(message) == comparable(one_by_one[job_id])
        assert list(message) == list(one_by_one[job_id])  # the fields in the broker's order
        assert message["options"].keys() == one_by_one[job_id]["options"].keys()
    assert batched[str(messages[4].job_id)]["list"] == "gatehouse:probe.DQ"
    assert batched[str(messages[0].job_id)]["args"] == [str(messages[0].job_id), 1]


def fan_outs(gh, *, chunk_size: int, **overrides) -> FanOutHandlers:
    return FanOutHandlers(
        gh.uow,
        gh.jobs,
        gh.accounts,
        gh.modules,
        gh.schedule_runs,
        gh.skip_streaks,
        schedules=schedules(overrides),
        chunk_size=chunk_size,
        starvation_limit=3,
    )


def test_a_fan_out_commits_each_chunk_with_its_checkpoint_and_a_run_that_lost_its_row_writes_nothing(gh, sql):
    # Given 25 accounts and the rnp-ads tick's fan-out job, claimed, in chunks of 10
    accounts = sorted(gh.account_handlers.create_account(f"shop-{i}", f"s-{i}").id for i in range(25))
    handlers = fan_outs(gh, chunk_size=10)
    schedule = handlers.schedules["rnp-ads"]
    assert handlers.tick(schedule) == (1, 0)
    assert handlers.tick(schedule) == (0, 1)  # one live fan-out per schedule
    [row] = gh.jobs.list_jobs(type="fan-out:rnp-ads")
    claim = gh.jobs.claim(row.id, row.message_number, 60_000, worker="w-1", start=True)
    tick_ms = row.payload[TICK_FIELD]

    # When its run dies in the middle of its third chunk (after the INSERT, before the commit)
    saved = []

    def crash_on_third(checkpoint, tx):
        assert gh.jobs.save_checkpoint(claim, checkpoint, tx=tx)
        saved.append(checkpoint)
        if len(saved) == 3:
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        handlers.run("rnp-ads", tick_ms=tick_ms, resume={}, save=crash_on_third)

    # Then two chunks are written with the checkpoint after them, the third not at all
    children = sql("SELECT account_id FROM jobs WHERE type = 'rnp:ads-sync-account' ORDER BY account_id")
    assert [c.account_id for c in children] == accounts[:20]
    assert gh.jobs.get(row.id).checkpoint == {"after": str(accounts[19]), "created": 20, "alreadyLive": 0}

    # When another worker requeues the run, a stale run's next chunk is fenced out and rolls back
    with gh.uow.autocommit() as tx:
        assert gh.jobs.requeue_orphans(tx, {"w-1"}) == 1

    def stale(checkpoint, tx):
        if not gh.jobs.save_checkpoint(claim, checkpoint, tx=tx):
            raise RuntimeError("lost the row")

    with pytest.raises(RuntimeError, match="lost the row"):
        handlers.run("rnp-ads", tick_ms=tick_ms, resume=gh.jobs.get(row.id).checkpoint, save=stale)
    assert sql("SELECT count(*) FROM jobs WHERE type = 'rnp:ads-sync-account'")[0][0] == 20

    # … and the new run carries on from the checkpoint: every account has exactly one job
    row = gh.jobs.get(row.id)
    claim = gh.jobs.claim(row.id, row.message_number, 60_000, worker="w-2", start=True)
    result = handlers.run(
        "rnp-ads",
        tick_ms=tick_ms,
        resume=row.checkpoint,
        save=lambda checkpoint, tx: gh.jobs.save_checkpoint(claim, checkpoint, tx=tx),
    )
    assert result == {"created": 25, "alreadyLive": 0, "spreadMs": 150_000}
    children = sql(
        "SELECT id, account_id, state, resume_at, payload FROM jobs WHERE type = 'rnp:ads-sync-account'"
    )
    assert sorted(c.account_id for c in children) == accounts

    # … each delayed until its stable offset in the 150 s window, its message on the delay queue with that eta
    queued = broker_contents(gh)
    for child in children:
        due = tick_ms + offset_ms(child.account_id, 150_000)
        assert child.state == "delayed" and datetime_to_ms(child.resume_at) == due
        assert child.payload == {DUE_AT_FIELD: due}
        message = queued[str(child.id)]
        assert message["list"] == "gatehouse:wb-scheduled.DQ" and abs(message["options"]["eta"] - due) < 50


def test_a_tick_over_accounts_with_live_jobs_creates_none_for_them(gh, sql):
    accounts = [gh.account_handlers.create_account(f"shop-{i}", f"s-{i}").id for i in range(5)]
    handlers = fan_outs(gh, chunk_size=2, **{"rnp-ads": {"spread_ms": 0}})
    live, _ = gh.job_handlers.submit(handlers.schedules["rnp-ads"].job_type, account_id=accounts[0])

    handlers.tick(handlers.schedules["rnp-ads"])
    [row] = gh.jobs.list_jobs(type="fan-out:rnp-ads")
    claim = gh.jobs.claim(row.id, row.message_number, 60_000, worker="w", start=True)
    result = handlers.run(
        "rnp-ads",
        tick_ms=row.payload[TICK_FIELD],
        resume={},
        save=lambda checkpoint, tx: gh.jobs.save_checkpoint(claim, checkpoint, tx=tx),
    )

    assert result == {"created": 4, "alreadyLive": 1, "spreadMs": 0}
    rows = sql("SELECT id, account_id, state FROM jobs WHERE type = 'rnp:ads-sync-account'")
    assert len(rows) == 5 and {r.account_id for r in rows} == set(accounts)
    assert {r.state for r in rows if r.id != live.id} == {"waiting"}  # unspread: due at the tick
    queued = {i for i, m in broker_contents(gh).items() if m["list"] == "gatehouse:wb-scheduled"}
    assert queued == {str(r.id) for r in rows}


def test_an_upsert_over_unchanged_rows_writes_nothing_and_a_changed_row_alone_moves(gh, sql):
    [account] = [gh.account_handlers.create_account("shop", "s").id]
    data = WbData(gh.statements)
    campaigns = [{"id": n, "name": f"campaign {n}", "status": 9} for n in range(1, 6)]
    data.upsert(tables.CAMPAIGNS, account, campaigns)
    before = {
        r.advert_id: (r.xmin, r.imported_at)
        for r in sql("SELECT advert_id, xmin, imported_at FROM wb_campaigns")
    }

    # When the same rows come again (in another order, as JSON with its keys reordered)
    data.upsert(tables.CAMPAIGNS, account, [dict(reversed(c.items())) for c in reversed(campaigns)])
    after = {
        r.advert_id: (r.xmin, r.imported_at)
        for r in sql("SELECT advert_id, xmin, imported_at FROM wb_campaigns")
    }
    # Then no row was written
    assert after == before

    # When one changed, only it is written, and its imported_at moves
    data.upsert(tables.CAMPAIGNS, account, [*campaigns[:2], {**campaigns[2], "status": 11}, *campaigns[3:]])
    rows = {r.advert_id: r for r in sql("SELECT advert_id, xmin, imported_at, data FROM wb_campaigns")}
    assert {n for n, r in rows.items() if (r.xmin, r.imported_at) != before[n]} == {3}
    assert rows[3].data["status"] == 11 and rows[3].imported_at > before[3][1]


def test_a_fan_out_with_redis_down_writes_its_jobs_and_reconciliation_sends_them(gh, sql, settings):
    # Given 5 accounts, a tick's fan-out job, and a worker whose Redis stops answering
    accounts = sorted(gh.account_handlers.create_account(f"shop-{i}", f"s-{i}").id for i in range(5))
    fan_outs(gh, chunk_size=2).tick(gh.fan_out_handlers.schedules["rnp-ads"])
    offline = bootstrap(settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"}))
    handlers = fan_outs(offline, chunk_size=2)

    # When the fan-out runs there (skip streaks unreadable, every send failing)
    [row] = gh.jobs.list_jobs(type="fan-out:rnp-ads")
    claim = gh.jobs.claim(row.id, row.message_number, 60_000, worker="w", start=True)
    result = handlers.run(
        "rnp-ads",
        tick_ms=row.payload[TICK_FIELD],
        resume={},
        save=lambda checkpoint, tx: gh.jobs.save_checkpoint(claim, checkpoint, tx=tx),
    )
    offline.close()

    # Then every job is written, and reconciliation puts each on its queue
    assert result["created"] == 5
    children = sql("SELECT id, account_id FROM jobs WHERE type = 'rnp:ads-sync-account'")
    assert sorted(c.account_id for c in children) == accounts
    assert gh.dispatcher.queued_job_ids(["wb-scheduled"]) == set()
    gh.job_handlers.reconcile(grace_ms=0)
    assert gh.dispatcher.queued_job_ids(["wb-scheduled"]) == {str(c.id) for c in children}


def test_a_fan_out_skips_switched_off_accounts_and_rejected_tokens_until_a_new_token(gh, sql):
    # Given three accounts: one WB rejected the token of (on a job), one switched off, one fine
    rejected, off, fine = (gh.account_handlers.create_account(f"shop-{i}", f"s-{i}").id for i in range(3))
    job_id = uuid.uuid4()
    with gh.uow.begin() as tx:
        # a token replaced since the job read it marks nothing; the account's own token does, once
        assert gh.accounts.token_rejected(tx, rejected, "s-old", job_id=job_id, status=401) is None
        event = gh.accounts.token_rejected(tx, rejected, "s-0", job_id=job_id, status=401)
        assert gh.accounts.token_rejected(tx, rejected, "s-0", job_id=uuid.uuid4(), status=401) is None
    assert event.type == "wb.account.token_invalid"
    assert event.data == {"accountId": str(rejected), "since": ANY, "jobId": str(job_id), "status": 401}
    gh.account_handlers.update_account(off, AccountChange(active=False), actor="admin")
    handlers = fan_outs(gh, chunk_size=2, **{"rnp-ads": {"spread_ms": 0}})
    skipped = metrics.FANOUT_SKIPPED.labels(reason="token-invalid")
    before = skipped._value.get()

    def tick() -> set[uuid.UUID]:
        handlers.tick(handlers.schedules["rnp-ads"])
        [row] = gh.jobs.list_jobs(type="fan-out:rnp-ads", state="waiting")
        claim = gh.jobs.claim(row.id, row.message_number, 60_000, worker="w", start=True)
        handlers.run(
            "rnp-ads",
            tick_ms=row.payload[TICK_FIELD],
            resume={},
            save=lambda checkpoint, tx: gh.jobs.save_checkpoint(claim, checkpoint, tx=tx),
        )
        with gh.uow.autocommit() as tx:
            gh.jobs.finish(tx, claim, state="completed", progress={"phase": "completed"})
        return {r.account_id for r in sql("SELECT account_id FROM jobs WHERE type = 'rnp:ads-sync-account'")}

    # When a tick fans out: only the fine account gets a job; the rejected one is counted as skipped
    assert tick() == {fine}
    assert skipped._value.get() == before + 1

    # When the rejected account gets a new token (audited, never its value), the next tick includes it
    account = gh.account_handlers.update_account(rejected, AccountChange(wb_token="s-new"), actor="admin")
    assert account.token_invalid is None and gh.accounts.wb_token(rejected) == "s-new"
    [audit] = sql(
        "SELECT actor, before, after FROM audit_log WHERE action = 'account.update' AND entity_id = :a",
        a=str(rejected),
    )
    assert audit.before == {"tokenInvalid": {"since": ANY, "jobId": str(job_id), "status": 401}}
    assert audit.after == {"wbToken": "replaced", "tokenInvalid": None}
    assert tick() == {fine, rejected}
    assert skipped._value.get() == before + 1
