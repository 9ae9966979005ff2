"""LOG_FORMAT=json on real processes: every line a worker writes is a JSON object, a job's lines carry its
ids, and the API answers every request its X-Request-Id and puts it on the request's lines."""

from __future__ import annotations

import json
import re
import signal
import uuid

import httpx

from tests.conftest import ADMIN_TOKEN
from tests.support.probe import PROBE
from tests.support.processes import free_port, wait_until

GENERATED = re.compile(r"[0-9a-f]{32}")


def json_lines(log: str) -> list[dict]:
    """Every line of a log as JSON; a line that is not a JSON object fails the test."""
    lines = []
    for n, text in enumerate(log.splitlines(), 1):
        try:
            line = json.loads(text)
        except ValueError:
            line = None
        assert isinstance(line, dict), f"line {n} is not a JSON object: {text!r}\n{log}"
        assert {"time", "level", "logger", "message"} <= line.keys(), text
        lines.append(line)
    return lines


def test_a_json_worker_writes_only_json_lines_and_a_jobs_lines_carry_its_ids(processes, gh):
    # Given a worker logging JSON at DEBUG from its start, with its health fork: dramatiq's supervisor,
    # consumer process and fork process each set up logging
    worker = processes.start(
        "worker", "gatehouse-worker", "--processes", "1", "--threads", "2", "--verbose",
        env={"LOG_FORMAT": "json", "WORKER_HEALTH_PORT": str(free_port())},
    )  # fmt: skip
    account = gh.account_handlers.create_account(f"acc-{uuid.uuid4().hex[:6]}", "token").id

    # When it runs an account's job that fails (a warning with its traceback), then stops
    job_id = gh.job_handlers.submit(PROBE, account_id=account, payload={"fail": "boom"})[0].id
    wait_until(lambda: gh.jobs.get(job_id).state == "failed", timeout=30, what="the job to fail")
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0, worker.log()

    # Then every line it wrote, from its start to its stop, is a JSON object
    lines = json_lines(worker.log())
    messages = " | ".join(line["message"] for line in lines)
    assert "is booting up" in messages and "Worker process is ready" in messages, messages
    assert "Fork process 'gatehouse_worker.health:serve_health' is ready" in messages, messages
    # … and the lines of the job's run carry its id, type and account; the failure its exception
    run = [line for line in lines if line.get("job_id") == str(job_id)]
    assert {(line["job_type"], line["account_id"]) for line in run} == {("probe", str(account))}, run
    [failed] = [line for line in run if line["message"] == f"job {job_id} attempt 1 failed"]
    assert failed["level"] == "WARNING" and "RuntimeError: boom" in failed["exception"], failed
    # … and no line outside a run carries a job's ids
    assert all("job_id" in line for line in lines if "account_id" in line or "job_type" in line)


def test_every_answer_has_a_request_id_and_the_apis_json_lines_carry_it(processes):
    # AUTH_MAX_FAILURES=1: one wrong token logs a lockout warning during its request
    env = {"BACKEND_ROLE": "api", "LOG_FORMAT": "json", "AUTH_MAX_FAILURES": "1"}
    api, url = processes.api(env=env)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    # A client's id comes back as sent, on a success, an error, a 404 and a console page
    for path, headers, status in [
        ("/healthz", {}, 200),
        ("/v1/jobs", {}, 401),
        ("/v1/nope", admin, 404),
        ("/console", {}, 303),
    ]:
        sent = f"client-{uuid.uuid4().hex[:8]}"
        answer = httpx.get(f"{url}{path}", headers={**headers, "X-Request-Id": sent})
        assert answer.status_code == status, (path, answer.text)
        assert answer.headers["X-Request-Id"] == sent, path
    # … none, or one too long or not visible ASCII, is replaced by a new one, unique to the request
    made = set()
    for sent in (None, "x" * 129, "with space"):
        answer = httpx.get(f"{url}/v1/jobs", headers={} if sent is None else {"X-Request-Id": sent})
        assert GENERATED.fullmatch(answer.headers["X-Request-Id"]), answer.headers
        made.add(answer.headers["X-Request-Id"])
    assert len(made) == 3
    wrong = httpx.get(f"{url}/v1/jobs", headers={"Authorization": "Bearer wrong", "X-Request-Id": "wrong-1"})
    assert wrong.status_code == 401 and wrong.headers["X-Request-Id"] == "wrong-1"

    # And the API's lines are JSON: the access line of each request carries its id, as does what the
    # app logs while it answers (the lockout)
    def by_request() -> dict[tuple[str, str], dict]:
        lines = json_lines(api.log())
        return {(line["logger"], line["request_id"]): line for line in lines if "request_id" in line}

    lockout = ("gatehouse.auth_throttle", "wrong-1")
    lines = wait_until(
        lambda: (
            (found := by_request()).keys() >= {lockout, *(("gunicorn.access", i) for i in made)} and found
        ),
        what="the access lines and the lockout warning",
    )
    assert "locked out" in lines[lockout]["message"], lines[lockout]
    for request_id in made:
        assert "GET /v1/jobs" in lines["gunicorn.access", request_id]["message"]
