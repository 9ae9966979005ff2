"""Catalog search end to end: a real API, real workers, a searchable flip under search load, the CLI."""

from __future__ import annotations

import subprocess
import threading
import time

import httpx
import pytest

from gatehouse.catalog import NewProduct, Price
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import BIN, wait_until

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
PROBLEM = "application/problem+json"
N = 1_000  # every product answers within the limit (1000), so a partial index would show


def catalog(gh, n: int = N) -> None:
    gh.catalog_handlers.create_attribute("material", "Materiał", False)
    for start in range(0, n, 1000):
        gh.catalog_handlers.create_products(
            [
                NewProduct(
                    sku=f"CH-{i:05d}",
                    name=f"Krzesło {i}",
                    price=Price(100, "PLN"),
                    attributes={"material": "dąb"},
                )
                for i in range(start, min(n, start + 1000))
            ]
        )


def count(client: httpx.Client, url: str, q: str) -> int:
    response = client.get(f"{url}/v1/admin/catalog/search", params={"q": q, "limit": 1000}, headers=ADMIN)
    assert response.status_code == 200, response.text
    return len(response.json()["items"])


def operation(url: str, op_id: str) -> dict:
    return httpx.get(f"{url}/v1/admin/catalog/bulk-operations/{op_id}", headers=ADMIN).json()


def test_a_searchable_flip_under_search_load_never_answers_from_a_half_built_index(processes, gh):
    # Small batches: the shadow builds in many transactions while the searches run
    env = {"BULK_BATCH_SIZE": "50"}
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env=env)
    catalog(gh)
    n_chairs = N
    assert count(httpx.Client(), url, "krzeslo") == n_chairs
    assert count(httpx.Client(), url, "dab") == 0  # not searchable yet

    answers: list[tuple[int, int]] = []
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(timeout=10) as client:
            while not stop.is_set():
                answers.append((count(client, url, "krzeslo"), count(client, url, "dab")))

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    try:
        flip = httpx.patch(
            f"{url}/v1/admin/catalog/attributes/material", json={"searchable": True}, headers=ADMIN
        )
        assert flip.status_code == 200, flip.text
        body = flip.json()
        assert body["searchable"] is True and body["reindex"]["alreadyRunning"] is False
        op_id = body["reindex"]["operationId"]
        seen_running = []
        done = wait_until(
            lambda: (
                (
                    (op := operation(url, op_id))["status"] == "completed"
                    or seen_running.append(op["counters"]["processed"])
                )
                and op
            ),
            timeout=60,
            interval=0.05,
            what="the re-index",
        )
        time.sleep(0.3)  # a few searches after the swap
    finally:
        stop.set()
        thread.join(timeout=15)

    assert done["type"] == "search_reindex"
    assert done["counters"] == {"total": N, "processed": N, "succeeded": N, "failed": 0}
    assert any(0 < p < N for p in seen_running), "the counters moved while it ran"
    assert len(answers) > 10
    # Every answer is the old index or the new one, whole: never fewer chairs, never part of the oak
    assert {chairs for chairs, _ in answers} == {n_chairs}
    assert {oak for _, oak in answers} <= {0, n_chairs}
    # The old index answered first; once the new one answered, the old one never came back
    oaks = [oak for _, oak in answers]
    assert oaks[0] == 0 and oaks[-1] == n_chairs
    assert oaks == sorted(oaks)
    assert count(httpx.Client(), url, "dab") == n_chairs

    # A label change is no flip: no reindex in the answer
    label = httpx.patch(
        f"{url}/v1/admin/catalog/attributes/material", json={"label": "Drewno"}, headers=ADMIN
    )
    assert label.status_code == 200 and "reindex" not in label.json()


def test_the_cli_waits_for_the_reindex_and_prints_its_counters(processes, process_env, gh):
    processes.start(
        "worker", "gatehouse-worker", "--processes", "1", "--threads", "2", env={"BULK_BATCH_SIZE": "100"}
    )
    catalog(gh, 300)

    result = subprocess.run(
        [str(BIN / "gatehouse-search-reindex"), "--wait", "--timeout", "60", "--interval", "0.05"],
        env=process_env,
        capture_output=True,
        text=True,
        timeout=90,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "queued (300 products)" in lines[0]
    assert lines[-1] == "completed: processed 300/300, succeeded 300, failed 0"
    [op] = gh.bulk.list(type="search_reindex")
    assert op.status == "completed"


def test_the_cli_without_a_database_says_so_and_exits_2(process_env):
    env = {k: v for k, v in process_env.items() if k != "DATABASE_URL"}
    result = subprocess.run(
        [str(BIN / "gatehouse-search-reindex")], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "DATABASE_URL" in result.stderr


def test_reindex_route_answers_202_and_the_live_one_while_it_is_pending(processes, gh):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})  # no worker: it stays pending
    catalog(gh, 10)
    first = httpx.post(f"{url}/v1/admin/catalog/search/reindex", headers=ADMIN)
    second = httpx.post(f"{url}/v1/admin/catalog/search/reindex", headers=ADMIN)
    assert (first.status_code, second.status_code) == (202, 202)
    assert first.json()["alreadyRunning"] is False and second.json()["alreadyRunning"] is True
    assert first.json()["operationId"] == second.json()["operationId"]
    assert operation(url, first.json()["operationId"])["status"] == "pending"
    # The flip during it answers with the same live one
    flip = httpx.patch(
        f"{url}/v1/admin/catalog/attributes/material", json={"searchable": True}, headers=ADMIN
    )
    assert flip.json()["reindex"] == {"operationId": first.json()["operationId"], "alreadyRunning": True}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "q"),
        ({"q": ""}, "q"),
        ({"q": "  ?! "}, "q"),
        ({"q": "x" * 201}, "q"),
        ({"q": "a", "limit": "0"}, "limit"),
        ({"q": "a", "limit": "1001"}, "limit"),
        ({"q": "a", "limit": "ten"}, "limit"),
        ({"q": "a", "status": "gone"}, "status"),
        ({"q": "a", "status": ""}, "status"),
    ],
)
def test_bad_search_input_is_a_422_problem(processes, params, field):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    response = httpx.get(f"{url}/v1/admin/catalog/search", params=params, headers=ADMIN)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["code"] == "VALIDATION_ERROR" and response.json()["field"] == field


def test_search_needs_an_admin_credential(processes):
    _, url = processes.api(env={"BACKEND_ROLE": "api"})
    assert httpx.get(f"{url}/v1/admin/catalog/search", params={"q": "a"}).status_code == 401
    assert httpx.post(f"{url}/v1/admin/catalog/search/reindex").status_code == 401
