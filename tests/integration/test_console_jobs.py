"""Accounts & gates and jobs pages, in process: what they show, their JSON twins, retry and cancel."""

from __future__ import annotations

import re
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from falcon import testing

from gatehouse import progress as P
from gatehouse.gate import owner
from gatehouse.job_types import AUTOBIDDER_SYNC_USER, IMPORT_USER_FEEDS, IMPORT_USER_REPORT
from gatehouse.jobs import Outcome
from gatehouse_api.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.support.accounts import forget_account_checks

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
XSS = "<script>alert(1)</script>"
ASK = dict(lease_ms=60_000, wanted_ttl_ms=30_000, waiting_ttl_ms=30_000)


@pytest.fixture
def client(gh):
    return testing.TestClient(create_app(gh))


def page(client, cookie, path: str, status: int = 200) -> str:
    response = client.simulate_get(path, headers=cookie)
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', html).group(1)


def hold(gh, account_id, job_id, *, tier="user", at_ms=None) -> bool:
    """The job asks for its account's gate, as its worker would: True if it got it."""
    at_ms = at_ms or int(time.time() * 1000)
    return gh.gate.acquire(
        str(account_id), owner("wb-user", job_id), tier=tier, first_wait_ms=at_ms, **ASK
    ).proceed


def busy_account(gh, name="Busy shop"):
    """An account whose gate a running job holds, a second job of it waiting in line."""
    account = gh.account_handlers.create_account(name, "token").id
    holder, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=account, payload={})
    gh.jobs.start(gh.jobs.claim(holder.id, 1, 60_000), P.stored(P.RUNNING))
    waiter, _ = gh.job_handlers.submit(IMPORT_USER_REPORT, account_id=account, payload={})
    assert hold(gh, account, holder.id) and not hold(gh, account, waiter.id)
    claim = gh.jobs.claim(waiter.id, 1, 60_000)
    resume = int(time.time() * 1000) + 60_000
    with gh.uow.autocommit() as tx:
        gh.jobs.reschedule(
            tx,
            claim,
            eta_ms=resume,
            progress=P.stored(P.WAITING_ACCOUNT, resume_at_ms=resume),
            consume_attempt=False,
        )
    return account, holder.id, waiter.id


# -- accounts & gates -------------------------------------------------------------------


def test_the_accounts_page_shows_each_gate_and_marks_the_hot_account(client, cookie, gh):
    account, holder, waiter = busy_account(gh)
    quiet = gh.account_handlers.create_account("Quiet shop", "token").id

    html = page(client, cookie, "/console/accounts")

    row = re.search(rf'<tr data-account="{account}" class="hot">.*?</tr>', html, re.S).group(0)
    assert f'href="/console/jobs/{holder}"' in row and f'href="/console/jobs/{waiter}"' in row
    assert "data-countdown" in row  # the holder's lease left, ticking
    assert re.search(rf'<tr data-account="{quiet}">.*?free', html, re.S)
    hot_only = page(client, cookie, "/console/accounts?hot=true")
    assert str(account) in hot_only and str(quiet) not in hot_only
    named = page(client, cookie, "/console/accounts?name=quiet")
    assert str(quiet) in named and str(account) not in named


def test_the_admin_accounts_api_is_the_same_reading(client, gh):
    account, holder, waiter = busy_account(gh)
    paused = gh.account_handlers.create_account("Paused shop", "token").id
    now = int(time.time() * 1000)
    gh.pauses.record(str(paused), uuid.uuid4(), at_ms=now, resume_at_ms=now + 5000, reason="wb-429")
    gh.account_handlers.create_account("Quiet shop", "token")

    found = client.simulate_get("/v1/admin/accounts", headers=ADMIN).json
    by_id = {a["accountId"]: a for a in found["items"]}
    assert len(by_id) == 3 and found["nextCursor"] is None
    busy = by_id[str(account)]
    assert busy["hot"] and busy["gate"]["holder"] == str(holder) and busy["gate"]["waiting"] == [str(waiter)]
    assert busy["gate"]["waiters"][0]["tier"] == "user" and busy["gate"]["wanted"] == str(waiter)
    assert by_id[str(paused)]["hot"] and by_id[str(paused)]["gate"]["recentPauses"][0]["reason"] == "wb-429"
    hot = client.simulate_get("/v1/admin/accounts", params={"hot": "true"}, headers=ADMIN).json["items"]
    assert {a["accountId"] for a in hot} == {str(account), str(paused)}
    gate = client.simulate_get(f"/v1/admin/accounts/{account}/gate", headers=ADMIN).json
    assert gate == busy["gate"] | {"leaseMsLeft": gate["leaseMsLeft"]}
    assert (
        client.simulate_get("/v1/admin/accounts", params={"hot": "yes"}, headers=ADMIN).json["field"] == "hot"
    )
    key = client.simulate_post(f"/v1/accounts/{account}/keys", headers=ADMIN).json["key"]
    assert (
        client.simulate_get("/v1/admin/accounts", headers={"Authorization": f"Bearer {key}"}).status_code
        == 403
    )


def test_accounts_page_in_pages_of_fifty_newest_first(client, cookie, gh, sql):
    sql(
        "INSERT INTO accounts (id, name, created_at) SELECT gen_random_uuid(), 'Shop ' || i, "
        "now() - i * interval '1 second' FROM generate_series(1, 120) i"
    )
    first = client.simulate_get("/v1/admin/accounts", params={"limit": "50"}, headers=ADMIN).json
    second = client.simulate_get(
        "/v1/admin/accounts", params={"limit": "50", "cursor": first["nextCursor"]}, headers=ADMIN
    ).json
    names = [a["name"] for a in first["items"] + second["items"]]
    assert names == [f"Shop {i}" for i in range(1, 101)]
    html = page(client, cookie, "/console/accounts")
    assert html.count("<tr data-account=") == 50 and 'rel="next"' in html
    # A hot-only page walks past chunks of quiet accounts to the hot one at the end
    hot = gh.accounts.page(limit=200)[-1]
    now = int(time.time() * 1000)
    gh.pauses.record(str(hot.id), uuid.uuid4(), at_ms=now, resume_at_ms=now + 1000, reason="wb-429")
    assert [
        a["name"] for a in client.simulate_get("/v1/admin/accounts?hot=true", headers=ADMIN).json["items"]
    ] == ["Shop 120"]
    # A name filter's wildcards are literal
    assert client.simulate_get("/v1/admin/accounts?name=%25", headers=ADMIN).json["items"] == []


def test_an_account_page_shows_its_gate_waiters_pauses_and_timeline(client, cookie, gh, sql):
    account, holder, waiter = busy_account(gh)
    done, _ = gh.job_handlers.submit(AUTOBIDDER_SYNC_USER, account_id=account, payload={})
    claim = gh.jobs.claim(done.id, 1, 60_000, start=True)
    with gh.uow.autocommit() as tx:
        gh.jobs.finish(tx, claim, state="completed", progress=P.stored(P.COMPLETED))
    sql(
        "UPDATE jobs SET started_at = now() - interval '2 hours', finished_at = now() - interval '1 hour' WHERE id = :id",
        id=done.id,
    )
    now = int(time.time() * 1000)
    gh.pauses.record(str(account), holder, at_ms=now - 1000, resume_at_ms=now + 9000, reason="wb-429")

    html = page(client, cookie, f"/console/accounts/{account}")

    gate = re.search(r'<section id="gate" data-live.*?</section>', html, re.S).group(0)
    assert f'<a href="/console/jobs/{holder}" data-holder>' in gate
    assert f'data-waiter="{waiter}"' in gate and ">user<" in gate and "data-countdown" in gate
    pauses_html = re.search(r'<section id="pauses".*?</section>', html, re.S).group(0)
    assert f"/console/jobs/{holder}" in pauses_html and "wb-429" in pauses_html
    timeline = re.search(r'<section id="timeline".*?</section>', html, re.S).group(0)
    # the holder (running: until now) and the finished sync; the waiter has not started
    rects = re.findall(r"<rect [^>]*>", timeline)
    assert len(rects) == 2 and all("style=" not in r for r in rects)
    runs = re.search(r'<ol class="runs">.*?</ol>', timeline, re.S).group(0)
    assert str(holder)[:8] in runs and "now (running)" in runs and str(done.id)[:8] in runs
    assert str(waiter)[:8] not in runs
    assert f'data-job="{waiter}"' in html and "Ждём завершения другой задачи по этому кабинету" in html
    page(client, cookie, f"/console/accounts/{uuid.uuid4()}", status=404)


def test_an_account_named_like_a_script_is_text(client, cookie, gh):
    account = gh.account_handlers.create_account(XSS, "token").id
    for path in ("/console/accounts", f"/console/accounts/{account}"):
        html = page(client, cookie, path)
        assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# -- jobs -------------------------------------------------------------------------------


def test_the_admin_jobs_api_filters_and_pages_newest_first(client, gh, sql):
    _, holder, waiter = busy_account(gh)
    other = gh.account_handlers.create_account("Other", "token").id
    forget_account_checks(gh)
    jobs = [
        gh.job_handlers.submit(t, account_id=other, payload={})[0].id
        for t in (IMPORT_USER_FEEDS, AUTOBIDDER_SYNC_USER)
    ]
    sql("UPDATE jobs SET created_at = now() - interval '3 days' WHERE id = :id", id=jobs[0])

    def ids(**params) -> list[str]:
        answer = client.simulate_get("/v1/admin/jobs", params=params, headers=ADMIN)
        assert answer.status_code == 200, answer.text
        return [j["jobId"] for j in answer.json["items"]]

    assert ids() == [str(j) for j in (jobs[1], waiter, holder, jobs[0])]
    assert ids(phase="waiting-account") == [str(waiter)]
    assert ids(state="active") == [str(holder)]
    assert ids(type="autobidder-sync-user") == [str(jobs[1])]
    assert ids(accountId=str(other), tier="user") == [str(jobs[1]), str(jobs[0])]
    since = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    assert str(jobs[0]) not in ids(createdAfter=since) and ids(createdBefore=since) == [str(jobs[0])]
    first = client.simulate_get("/v1/admin/jobs", params={"limit": "3"}, headers=ADMIN).json
    rest = client.simulate_get(
        "/v1/admin/jobs", params={"limit": "3", "cursor": first["nextCursor"]}, headers=ADMIN
    ).json
    assert [j["jobId"] for j in first["items"] + rest["items"]] == ids() and rest["nextCursor"] is None
    waiting = client.simulate_get("/v1/admin/jobs", params={"phase": "waiting-account"}, headers=ADMIN).json
    # The job's own status poll is the listed job, and where it stands at the gate (read at poll time only)
    polled = client.simulate_get(f"/v1/jobs/{waiter}", headers=ADMIN).json
    progress = polled["progress"]
    assert progress.pop("waitingFor") == {
        "jobId": str(holder),
        "type": "import-user-feeds",
        "tier": "user",
        "phase": "running",
    }
    assert progress.pop("position") == 1
    assert progress.pop("message").startswith(
        "Ждём завершения импорта заказов и продаж по этому кабинету — вы следующий, проверим через ~"
    )
    del waiting["items"][0]["progress"]["message"]
    assert waiting["items"][0] == polled


@pytest.mark.parametrize(
    "field, value",
    [("state", "asleep"), ("phase", "x"), ("type", "nope"), ("tier", "vip"), ("accountId", "42"),
     ("createdAfter", "yesterday"), ("createdBefore", "2026-13-01"), ("limit", "0"), ("cursor", "zz")],
)  # fmt: skip
def test_the_admin_jobs_api_refuses_a_bad_filter_naming_it(client, gh, field, value):
    answer = client.simulate_get("/v1/admin/jobs", params={field: value}, headers=ADMIN)
    assert answer.status_code == 422 and answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json["field"] == field


def test_the_jobs_page_lists_the_status_poll_rows_with_their_countdowns(client, cookie, gh):
    _, holder, waiter = busy_account(gh)

    html = page(client, cookie, "/console/jobs?phase=waiting-account&state=&type=")

    assert f'data-job="{waiter}"' in html and f'data-job="{holder}"' not in html
    row = re.search(rf'<tr data-job="{waiter}">.*?</tr>', html, re.S).group(0)
    assert "Ждём завершения другой задачи по этому кабинету" in row and "data-countdown" in row
    assert "1/5" in row and "waiting-account" in row
    assert '<option value="waiting-account" selected>' in html
    assert "VALIDATION_ERROR" not in page(client, cookie, "/console/jobs")
    # a bad filter is said beside the form (the page, not an error page), the form as it was filled
    bad = page(client, cookie, "/console/jobs?state=asleep&phase=waiting-account")
    assert bad.count("state must be one of") == 1 and 'id="filter-error"' in bad
    assert '<option value="waiting-account" selected>' in bad and "No job matches." in bad


def test_a_job_page_shows_its_row_and_checkpoint(client, cookie, gh):
    _, holder, waiter = busy_account(gh)
    claim = gh.jobs.claim(holder, 2, 60_000)  # stale message: nothing
    assert claim is None
    gh.jobs.save_checkpoint(
        type("C", (), {"job_id": holder, "claims": gh.jobs.get(holder).claims})(),
        {"rrdId": 42, "страница": 3},
    )

    html = page(client, cookie, f"/console/jobs/{holder}")

    assert "<pre>" in html and "&#34;rrdId&#34;: 42" in html and "страница" in html
    assert re.search(r"Claims</th><td>1 ", html) and "wb-user" in html
    # A running job is cancelled after a confirm step too (it stops at its next checkpoint); no retry
    assert f'href="/console/jobs/{holder}/cancel"' in html and "Retry" not in html
    assert f'href="/console/jobs/{waiter}/cancel"' in page(client, cookie, f"/console/jobs/{waiter}")
    page(client, cookie, f"/console/jobs/{uuid.uuid4()}", status=404)


def test_cancel_and_retry_from_the_console(client, cookie, gh):
    _, holder, waiter = busy_account(gh)
    token = csrf(page(client, cookie, f"/console/jobs/{waiter}"))

    def post(path: str):
        return client.simulate_post(path, body=f"csrf={token}", headers={**cookie, **FORM})

    assert (
        client.simulate_post(f"/console/jobs/{waiter}/cancel", headers={**cookie, **FORM}).status_code == 403
    )
    assert gh.jobs.get(waiter).state == "delayed"
    # The confirm step says what will happen and posts to itself; it changes nothing
    confirm = page(client, cookie, f"/console/jobs/{waiter}/cancel")
    assert "never runs again" in confirm and f'action="/console/jobs/{waiter}/cancel"' in confirm
    assert gh.jobs.get(waiter).state == "delayed"
    cancelled = post(f"/console/jobs/{waiter}/cancel")
    assert cancelled.status_code == 303 and cancelled.headers["location"] == f"/console/jobs/{waiter}"
    status = client.simulate_get(f"/v1/jobs/{waiter}", headers=ADMIN).json
    assert status["state"] == "failed" and status["error"]["code"] == "cancelled"
    # A running job is asked to stop: still active, flagged; a finished one is refused with the reason
    assert "next checkpoint" in page(client, cookie, f"/console/jobs/{holder}/cancel")
    assert post(f"/console/jobs/{holder}/cancel").status_code == 303
    assert gh.jobs.get(holder).state == "active" and gh.jobs.get(holder).cancel_requested_at is not None
    refused = post(f"/console/jobs/{waiter}/cancel")
    assert refused.status_code == 409 and "has already failed" in refused.text

    retried = post(f"/console/jobs/{waiter}/retry")
    assert retried.status_code == 303 and gh.jobs.get(waiter).state == "waiting"
    again = post(f"/console/jobs/{waiter}/retry")
    assert again.status_code == 409 and "only a failed job is retried" in again.text


def test_a_job_page_takes_a_row_written_by_older_code(client, cookie, gh, sql):
    # progress without a reason, an error without a message: rows of earlier releases, or seeded
    account = gh.account_handlers.create_account("Shop", "token").id
    job, _ = gh.job_handlers.submit(IMPORT_USER_FEEDS, account_id=account, payload={})
    sql(
        """UPDATE jobs SET state = 'failed', progress = '{"phase": "failed"}', error = '{"code": "wb-error"}',
           finished_at = now() WHERE id = :id""",
        id=job.id,
    )
    html = page(client, cookie, f"/console/jobs/{job.id}")
    assert "wb-error" in html and 'action="/console/jobs/' + str(job.id) + '/retry"' in html


def test_the_throughput_page_counts_and_draws_each_types_finished_jobs_by_hour_and_day(client, cookie, sql):
    def finished(job_type, state: str, minutes_ago: int, n: int = 1) -> None:
        sql(
            "INSERT INTO jobs (id, type, queue, tier, state, max_attempts, payload, created_at, finished_at) "
            "SELECT gen_random_uuid(), :type, :queue, 'user', :state, 1, '{}'::jsonb, at, at "
            "FROM generate_series(1, :n), LATERAL (SELECT now() - :ago * interval '1 minute' AS at) AS t",
            type=job_type.name,
            queue=job_type.queue,
            state=state,
            ago=minutes_ago,
            n=n,
        )

    a, b = IMPORT_USER_REPORT, IMPORT_USER_FEEDS
    finished(a, "completed", 1, n=3)
    finished(a, "failed", 1)
    finished(a, "completed", 180, n=2)
    finished(a, "failed", 30 * 60)  # older than a day: in neither
    finished(b, "failed", 90)

    html = page(client, cookie, "/console/throughput")
    assert "<script" not in html.split("<main", 1)[1]  # drawn on the server

    def window(key: str) -> dict[str, tuple[int, int, list[tuple[int, int, str, str]]]]:
        """Per type: its totals, and per bar drawn its numbers and its rectangles' heights."""
        section = html.split(f'id="throughput-{key}"', 1)[1].split("</section>", 1)[0]
        rows = re.findall(
            r'<tr data-type="([^"]+)" data-completed="(\d+)" data-failed="(\d+)">(.*?)</tr>', section, re.S
        )

        def height(bar: str, kind: str) -> str:
            found = re.search(rf'class="{kind}"[^>]*height="([\d.]+)"', bar)
            return found.group(1) if found else "0"

        return {
            t: (
                int(done),
                int(failed),
                [
                    (int(d), int(f), height(bar, "completed"), height(bar, "failed"))
                    for d, f, bar in re.findall(
                        r'<g data-completed="(\d+)" data-failed="(\d+)">(.*?)</g>', svg, re.S
                    )
                ],
            )
            for t, done, failed, svg in rows
        }

    hour, day = window("hour"), window("day")
    assert set(hour) == {a.name} and set(day) == {a.name, b.name}
    # the last hour: one bar, 3 completed over 1 failed, the whole height (40) shared 3:1
    assert hour[a.name] == (3, 1, [(3, 1, "30.00", "10.00")])
    # the day: the same bar summed into its hour, the one 3 h ago, and b's failure 90 min ago
    assert day[a.name][:2] == (5, 1) and sorted(bar[:2] for bar in day[a.name][2]) == [(2, 0), (3, 1)]
    assert day[b.name] == (0, 1, [(0, 1, "0", "40.00")])
    # a total links to its jobs
    assert f"type={b.name}&amp;state=failed&amp;finishedAfter=" in html


def test_a_jobs_attempts_read_the_same_in_the_api_and_on_its_page(client, cookie, gh):
    _, holder, waiter = busy_account(gh)  # the holder started (its record is open), the waiter parked
    job = gh.job_handlers.submit(AUTOBIDDER_SYNC_USER, account_id=None, payload={})[0].id
    claim = gh.jobs.claim(job, 1, 60_000, worker="host:1:w", start=True)
    error = {"code": "wb-unavailable", "message": "WB failed"}
    assert gh.jobs.finish_many([Outcome(claim, "failed", P.stored(P.FAILED), error=error)]) == [True]

    answer = client.simulate_get(f"/v1/admin/jobs/{job}/attempts", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    (item,) = answer.json["items"]
    assert (item["attempt"], item["worker"], item["outcome"], item["error"]) == (
        1,
        "host:1:w",
        "failed",
        error,
    )
    assert item["durationMs"] >= 0 and item["finishedAt"] >= item["startedAt"]
    (running,) = client.simulate_get(f"/v1/admin/jobs/{holder}/attempts", headers=ADMIN).json["items"]
    assert (running["outcome"], running["finishedAt"]) == (None, None)
    assert client.simulate_get(f"/v1/admin/jobs/{waiter}/attempts", headers=ADMIN).json == {"items": []}
    assert client.simulate_get(f"/v1/admin/jobs/{uuid.uuid4()}/attempts", headers=ADMIN).status_code == 404

    html = page(client, cookie, f"/console/jobs/{job}")
    assert 'data-outcome="failed"' in html and "host:1:w" in html and "WB failed" in html
    assert 'data-outcome="running"' in page(client, cookie, f"/console/jobs/{holder}")
    assert "No run has started yet." in page(client, cookie, f"/console/jobs/{waiter}")
