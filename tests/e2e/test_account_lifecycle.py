"""A seller account's lifecycle end to end: WB rejecting one seller's token while another's works, the
token rotated, an account switched off — with the real API, worker, WB sandbox and a webhook receiver."""

from __future__ import annotations

import json
import time
from datetime import datetime

import httpx

from gatehouse.schedules import DEFAULTS, FANOUT_QUEUE
from gatehouse_wb_sandbox.tokens import make_token
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.receiver import Receiver
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
ADS = "rnp:ads-sync-account"
TOKEN_REJECTED = "Wildberries отклонил токен — обновите токен в настройках кабинета"


def test_a_rejected_token_marks_its_account_until_rotated_and_a_switched_off_account_takes_no_work(
    processes, gh, sql
):
    # Given the rnp-ads schedule alone (the test sends its ticks), a receiver of the token event, and
    # three sellers: WB rejects one's token (expired), another's works, the third is switched off
    schedules = {s.name: {"enabled": False} for s in DEFAULTS if s.name != "rnp-ads"}
    with running_sandbox(time_scale=1000, rows_per_day=1) as sandbox:
        receiver = Receiver()
        env = {
            "WB_API_BASE_URL": sandbox.url,
            **scaled_limits(1000),
            "SCHEDULES": json.dumps({"rnp-ads": {"cron": "0 0 1 1 *", "spread_ms": 0}, **schedules}),
            "WEBHOOK_ALLOWED_HOSTS": "127.0.0.1",
        }
        processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
        _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
        try:
            run_the_lifecycle(url, gh, sql, receiver)
        finally:
            receiver.stop()


def run_the_lifecycle(url: str, gh, sql, receiver: Receiver) -> None:
    def create(seller: str, **claims) -> str:
        body = {"name": seller, "wbToken": make_token(seller, **claims)}
        return httpx.post(f"{url}/v1/accounts", json=body, headers=ADMIN).json()["accountId"]

    # An expired token is refused up front (422): this one expires once its account has been checked
    expires = int(time.time()) + 3
    rejected, fine, off = create("seller-expired", exp=expires), create("seller-fine"), create("seller-off")
    endpoint = {"url": receiver.url, "eventTypes": ["wb.account.token_invalid"]}
    assert httpx.post(f"{url}/v1/admin/webhooks/endpoints", json=endpoint, headers=ADMIN).status_code == 201
    wait_until(
        lambda: (
            sql("SELECT count(*) FROM jobs WHERE type = 'account-verify' AND state = 'completed'")[0][0] == 3
        ),
        timeout=30,
        what="the three tokens' checks",
    )
    wait_until(lambda: time.time() > expires, timeout=10, what="the token to expire")

    # When the rejected seller's user sync runs: WB answers 401 (token expired)
    job_id = httpx.post(f"{url}/v1/accounts/{rejected}/inventory/sync", headers=ADMIN).json()["jobId"]
    status = wait_until(
        lambda: (s := httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json())["state"] == "failed" and s,
        timeout=60,
        what="the sync to fail",
    )

    # Then it failed at once, telling the seller what to do; the account is marked; the event went out
    assert status["error"]["code"] == "wb-unauthorized" and status["progress"]["attempt"] == 1
    assert status["progress"]["message"] == TOKEN_REJECTED
    account = httpx.get(f"{url}/v1/accounts/{rejected}", headers=ADMIN).json()
    assert account["active"] is True
    assert account["tokenInvalid"] == {
        "since": account["tokenInvalid"]["since"],
        "jobId": job_id,
        "status": 401,
    }
    [event] = wait_until(lambda: [r.event for r in receiver.received], timeout=30, what="the webhook")
    assert event["type"] == "wb.account.token_invalid"
    data = event["data"]
    assert data == {"accountId": rejected, "since": data["since"], "jobId": job_id, "status": 401}
    assert datetime.fromisoformat(data["since"]) == datetime.fromisoformat(account["tokenInvalid"]["since"])
    assert httpx.get(f"{url}/v1/accounts/{fine}", headers=ADMIN).json()["tokenInvalid"] is None

    # When the third account is switched off, its user POSTs answer 409
    patched = httpx.patch(f"{url}/v1/accounts/{off}", json={"active": False}, headers=ADMIN)
    assert patched.status_code == 200 and patched.json()["active"] is False
    refused = httpx.post(f"{url}/v1/accounts/{off}/autobidder/sync", headers=ADMIN)
    assert refused.status_code == 409 and refused.json()["code"] == "ACCOUNT_INACTIVE"
    assert refused.headers["content-type"] == "application/problem+json"

    # … and a scheduled tick writes a job for the working account only: none for the rejected or the off one
    assert tick(gh, sql, 1) == {fine}

    # When the rejected account gets a new token, the mark is gone and the next tick includes it
    new_token = {"wbToken": make_token("seller-expired")}
    patched = httpx.patch(f"{url}/v1/accounts/{rejected}", json=new_token, headers=ADMIN)
    assert patched.status_code == 200 and patched.json()["tokenInvalid"] is None
    assert "wbToken" not in patched.json()
    after = tick(gh, sql, 2)
    assert rejected in after and off not in after


def tick(gh, sql, n: int) -> set[str]:
    """Send rnp-ads's tick (as the scheduler does) and wait for its fan-out, the ``n``-th; the accounts
    that have rnp-ads jobs then."""
    gh.dispatcher.tick(FANOUT_QUEUE, "schedule:rnp-ads")
    wait_until(
        lambda: (
            sql("SELECT count(*) FROM jobs WHERE type = 'fan-out:rnp-ads' AND state = 'completed'")[0][0] == n
        ),
        timeout=30,
        what=f"fan-out {n} to finish",
    )
    return {str(r.account_id) for r in sql("SELECT account_id FROM jobs WHERE type = :t", t=ADS)}
