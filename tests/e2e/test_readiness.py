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
