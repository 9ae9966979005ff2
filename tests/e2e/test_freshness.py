"""Data freshness end to end: a WB job on a real worker against the WB sandbox makes its dataset fresh."""

from __future__ import annotations

import re
import uuid

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.support.processes import free_port, wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
DATASETS = ["orders", "sales", "report", "campaigns", "campaign-stats", "stocks", "cards"]


def gauge(text: str, name: str, dataset: str) -> float | None:
    found = re.search(rf'^{name}{{dataset="{dataset}"}} (\S+)$', text, re.M)
    return None if found is None else float(found[1])


def test_a_completed_wb_job_makes_its_dataset_fresh_and_the_gauges_show_it(processes, gh, sql):
    with running_sandbox(time_scale=1000, rows_per_day=3, page_size=40) as sandbox:
        env = {"WB_API_BASE_URL": sandbox.url, **scaled_limits(1000)}
        processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
        metrics_port = free_port()
        _, url = processes.api(env={**env, "BACKEND_ROLE": "api", "METRICS_PORT": str(metrics_port)})
        account, other = (
            httpx.post(f"{url}/v1/accounts", json={"name": n, "wbToken": n}, headers=ADMIN).json()[
                "accountId"
            ]
            for n in ("seller-fresh", "seller-other")
        )
        key = httpx.post(f"{url}/v1/accounts/{account}/keys", headers=ADMIN).json()["key"]
        mine = {"Authorization": f"Bearer {key}"}

        # When the account's stocks are synced by a completed job
        job_id = httpx.post(f"{url}/v1/accounts/{account}/inventory/sync", headers=mine).json()["jobId"]
        wait_until(
            lambda: httpx.get(f"{url}/v1/jobs/{job_id}", headers=mine).json()["state"] == "completed",
            timeout=60,
            what="the inventory sync",
        )

    # Then its key reads stocks fresh, by that job, and every other dataset stale (never synced)
    answer = httpx.get(f"{url}/v1/accounts/{account}/freshness", headers=mine)
    assert answer.status_code == 200, answer.text
    datasets = answer.json()["datasets"]
    assert [d["dataset"] for d in datasets] == DATASETS
    stocks = datasets[DATASETS.index("stocks")]
    assert (stocks["lastJobId"], stocks["stale"], stocks["slo"]) == (job_id, False, {"maxAgeSeconds": 9000})
    assert 0 <= stocks["ageSeconds"] < 60 and stocks["lastSyncedAt"]
    assert [(d["lastSyncedAt"], d["stale"]) for d in datasets if d["dataset"] != "stocks"] == [
        (None, True)
    ] * 6
    # … recorded once, in the job's completion; another account's freshness is not its key's to read
    assert sql("SELECT dataset, last_job_id FROM account_datasets") == [("stocks", uuid.UUID(job_id))]
    assert httpx.get(f"{url}/v1/accounts/{other}/freshness", headers=mine).status_code == 404

    # … and /metrics (on METRICS_PORT) exports the oldest age per dataset and the stale accounts
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
    assert 0 <= gauge(text, "gatehouse_data_age_seconds", "stocks") < 60
    assert gauge(text, "gatehouse_data_age_seconds", "orders") is None  # no account synced it
    assert gauge(text, "gatehouse_data_stale_accounts", "stocks") == 1  # the other account
    assert gauge(text, "gatehouse_data_stale_accounts", "orders") == 2
