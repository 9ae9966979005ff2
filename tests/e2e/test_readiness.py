"""/healthz, /readyz and /metrics of a real gunicorn."""

from __future__ import annotations

import httpx
import pytest

from tests.support.processes import free_port


def test_ready_when_both_stores_answer(processes):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    response = httpx.get(f"{url}/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"postgresql": "ok", "redis": "ok"}


@pytest.mark.parametrize(
    ("store", "variable", "url"),
    [
        ("redis", "REDIS_URL", "redis://127.0.0.1:{port}/0"),
        ("postgresql", "DATABASE_URL", "postgresql://postgres@127.0.0.1:{port}/postgres"),
    ],
)
def test_not_ready_names_the_store_that_is_down(processes, store, variable, url):
    _, api = processes.api(env={"BACKEND_ROLE": "api", variable: url.format(port=free_port())})

    response = httpx.get(f"{api}/readyz", timeout=15)

    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "NOT_READY"
    assert body["down"] == [store]
    assert store in body["detail"]
    # Liveness does not depend on the stores.
    assert httpx.get(f"{api}/healthz").status_code == 200


def test_metrics_aggregate_all_gunicorn_workers_on_the_metrics_port_only(processes, gh):
    from tests.support.probe_client import job, submit_probes
    from tests.support.processes import wait_until

    metrics_port = free_port()
    _, url = processes.api(env={"BACKEND_ROLE": "all", "API_WORKERS": "3", "METRICS_PORT": str(metrics_port)})
    metrics_url = f"http://127.0.0.1:{metrics_port}"
    ids = submit_probes(gh, 12)
    wait_until(lambda: all(job(gh, i).state == "completed" for i in ids), what="jobs to complete")

    # Whichever worker answers on METRICS_PORT, the counter is the sum over all of them.
    for _ in range(6):
        text = httpx.get(f"{metrics_url}/metrics").text
        line = next(x for x in text.splitlines() if x.startswith("gatehouse_job_runs_total{"))
        assert 'type="probe"' in line and 'outcome="completed"' in line
        assert float(line.rsplit(" ", 1)[1]) == 12.0
    # The public port has no /metrics, and the metrics port nothing else
    public = httpx.get(f"{url}/metrics")
    assert (public.status_code, public.json()["code"]) == (404, "NOT_FOUND")
    assert "gatehouse_" not in public.text
    for path in ("/healthz", "/v1/admin/overview", "/console"):
        assert httpx.get(f"{metrics_url}{path}").status_code == 404, path


def test_metrics_port_shows_job_durations_wb_calls_queue_gauges_and_request_latency(processes):
    from prometheus_client.parser import text_string_to_metric_families

    from gatehouse.live_metrics import QUEUE_STATES
    from gatehouse.operations import queue_names
    from tests.e2e.test_wb_pauses import ADMIN, SCALE, SELLER, status
    from tests.support.processes import wait_until
    from tests.support.wb_sandbox import running_sandbox, scaled_limits

    metrics_port = free_port()
    with running_sandbox(time_scale=SCALE) as sandbox:
        env = {"BACKEND_ROLE": "all", "METRICS_PORT": str(metrics_port), "WB_API_BASE_URL": sandbox.url}
        _, url = processes.api(env={**env, **scaled_limits(SCALE)})
        # Given one WB job run through the sandbox
        account = httpx.post(f"{url}/v1/accounts", json={"name": "Shop", "wbToken": SELLER}, headers=ADMIN)
        accounts = f"{url}/v1/accounts/{account.json()['accountId']}"
        job = httpx.post(f"{accounts}/autobidder/sync", headers=ADMIN).json()["jobId"]
        wait_until(lambda: status(url, job)["state"] == "completed", timeout=30, what="the sync to complete")

        # When Prometheus scrapes the metrics port
        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    def value(name: str, **labels: str) -> float | None:
        return samples.get((name, tuple(sorted(labels.items()))))

    # Then the run's duration is there by type and outcome, and the WB calls by bucket and status
    assert (
        value("gatehouse_job_duration_seconds_count", type="autobidder-sync-user", outcome="completed") == 1
    )
    wb_ok = [
        v
        for (name, labels), v in samples.items()
        if name == "gatehouse_wb_calls_total" and ("status", "200") in labels
    ]
    assert wb_ok and sum(wb_ok) >= 1
    # … every queue of the registry has its depth and oldest age in each live state, the finished job in none
    for name in ("gatehouse_queue_depth", "gatehouse_queue_oldest_age_seconds"):
        for queue in queue_names():
            for state in QUEUE_STATES:
                assert value(name, queue=queue, state=state) is not None, (name, queue, state)
    assert value("gatehouse_queue_depth", queue="wb-user", state="waiting") == 0
    # … the live workers (this API's gunicorn workers host consumers), and the request's latency by route template
    assert value("gatehouse_workers_live") >= 1
    route = "/v1/accounts/{account_id:uuid}/autobidder/sync"
    assert (
        value("gatehouse_http_request_duration_seconds_count", route=route, method="POST", status="2xx") == 1
    )
