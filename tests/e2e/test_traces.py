"""Traces end to end: the real API, worker and scheduler export to a real OTLP/HTTP receiver on loopback.

One request's trace runs from the API's server span through the job message to the
worker's job span and its WB calls; a scheduler's tick starts a trace that its run and
fan-out continue, and the fan-out's jobs each start a trace linked to it.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

from gatehouse import job_types as jt
from gatehouse.schedules import DEFAULTS
from tests.conftest import ADMIN_TOKEN
from tests.support.processes import wait_until
from tests.support.wb_sandbox import running_sandbox, scaled_limits

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
SELLER = "seller-traces"  # a raw (non-JWT) token is its own seller id


@dataclass
class Span:
    service: str
    trace: str
    id: str
    parent: str
    name: str
    kind: int
    attributes: dict
    events: list[str]
    links: list[tuple[str, str]] = field(default_factory=list)


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: every span posted to /v1/traces, decoded."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Receive)
        self.spans: list[Span] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def take(self, request: ExportTraceServiceRequest) -> None:
        got = []
        for resource in request.resource_spans:
            attrs = {a.key: a.value.string_value for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                for s in scope.spans:
                    got.append(
                        Span(
                            service=attrs["service.name"],
                            trace=s.trace_id.hex(),
                            id=s.span_id.hex(),
                            parent=s.parent_span_id.hex(),
                            name=s.name,
                            kind=s.kind,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            events=[e.name for e in s.events],
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in s.links],
                        )
                    )
        with self.lock:
            self.spans.extend(got)

    def find(self, **where) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if all(_matches(s, k, v) for k, v in where.items())]


def _value(v):
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


def _matches(span: Span, key: str, want) -> bool:
    if key == "attr":
        return all(span.attributes.get(k) == v for k, v in want.items())
    if key == "name_starts":
        return span.name.startswith(want)
    return getattr(span, key) == want


class Receive(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.take(request)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def collector():
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def stack(processes, collector):
    with running_sandbox(time_scale=1000, rows_per_day=2, page_size=40) as sandbox:
        env = {
            "WB_API_BASE_URL": sandbox.url,
            **scaled_limits(1000),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            # rnp-ads only, due every minute (a scheduler ticks it as it starts), its jobs due at once.
            "SCHEDULES": json.dumps(
                {
                    "rnp-ads": {"cron": "* * * * *", "spread_ms": 0},
                    **{s.name: {"enabled": False} for s in DEFAULTS if s.name != "rnp-ads"},
                }
            ),
        }
        worker = processes.start("worker", "gatehouse-worker", "--processes", "1", "--threads", "4", env=env)
        wait_until(lambda: "Worker process is ready" in worker.log(), timeout=60, what="the worker")
        _, url = processes.api(env={**env, "BACKEND_ROLE": "api"})
        yield url, env


def finished(url: str, job_id: str) -> dict:
    def done():
        status = httpx.get(f"{url}/v1/jobs/{job_id}", headers=ADMIN).json()
        return status if status["state"] in ("completed", "failed") else None

    return wait_until(done, timeout=60, what=f"job {job_id} to finish")


def test_one_request_is_one_trace_from_the_api_to_the_wb_call_and_a_tick_one_its_fan_out_links_to(
    stack, collector, processes
):
    url, env = stack
    account = httpx.post(
        f"{url}/v1/accounts", json={"name": "Shop", "wbToken": SELLER}, headers=ADMIN
    ).json()["accountId"]

    # When one WB job is posted and runs
    path = f"/v1/accounts/{account}/autobidder/sync"
    job_id = httpx.post(f"{url}{path}", headers=ADMIN).json()["jobId"]
    assert finished(url, job_id)["state"] == "completed"

    # Then the worker's job span, with its outcome, is the child of the API's server span of that request
    # (a run that parked, on a WB bucket, is the parent of the next: the first run is the request's child)
    def runs():
        found = collector.find(service="gatehouse-worker", attr={"gatehouse.job.id": job_id})
        return found if any(s.attributes["gatehouse.job.outcome"] == "complete" for s in found) else None

    job = min(wait_until(runs, what="the job's spans"), key=lambda s: s.attributes["gatehouse.job.number"])
    assert job.name == f"job {jt.AUTOBIDDER_SYNC_USER.name}" and job.kind == SpanProto.SPAN_KIND_CONSUMER
    assert "gate.acquired" in job.events
    (request,) = collector.find(service="gatehouse-api", id=job.parent)
    assert request.kind == SpanProto.SPAN_KIND_SERVER and request.trace == job.trace
    assert request.name == "POST /v1/accounts/{account_id:uuid}/autobidder/sync"  # named by its route
    assert path in request.attributes.get("http.target", request.attributes.get("url.path", ""))
    # … its claim and body are spans in it, and each WB call (bucket, status) is in the same trace
    names = {s.name for s in collector.find(trace=job.trace, parent=job.id)}
    assert {"job claim", "job body"} <= names
    wb_calls = wait_until(
        lambda: collector.find(service="gatehouse-worker", trace=job.trace, name_starts="WB "),
        what="the WB call spans",
    )
    spans = {s.id: s for s in collector.find(trace=job.trace)}
    for call in wb_calls:
        assert call.attributes["http.response.status_code"] == 200 and call.attributes["wb.bucket"]
        ancestor = call
        while ancestor.parent in spans and ancestor.id != job.id:
            ancestor = spans[ancestor.parent]
        assert ancestor.id == job.id, call

    # When the scheduler starts: rnp-ads is due, so it ticks; the tick's run creates the fan-out,
    # which writes the account's rnp-ads job
    processes.start("scheduler", "gatehouse-scheduler", env=env)
    fan_out = wait_until(
        lambda: collector.find(service="gatehouse-worker", name="job fan-out:rnp-ads"),
        timeout=30,
        what="the fan-out",
    )[0]
    # (its first run: a root span, as each account's job starts a trace of its own)
    ads = wait_until(
        lambda: collector.find(service="gatehouse-worker", name=f"job {jt.RNP_ADS.name}", parent=""),
        what="the account's rnp-ads job",
    )[0]

    # Then the scheduler's tick started a trace that its run on the worker and the fan-out continue …
    (run,) = collector.find(id=fan_out.parent)
    assert run.service == "gatehouse-worker" and run.name == "tick schedule:rnp-ads"
    (tick,) = wait_until(lambda: collector.find(id=run.parent), what="the scheduler's tick")
    assert (
        tick.service == "gatehouse-scheduler" and tick.name == "tick schedule:rnp-ads" and tick.parent == ""
    )
    assert run.trace == fan_out.trace == tick.trace
    # … and the account's job is a trace of its own, linked to the fan-out's run
    assert ads.trace != fan_out.trace
    ((linked_trace, linked_id),) = ads.links
    (linked,) = collector.find(trace=linked_trace, id=linked_id)
    assert linked.name == "job body" and linked.parent == fan_out.id  # the fan-out's run that wrote it

    # And no client call outside a trace (a queue poll, a lease beat) became a trace of its own
    assert all(s.parent for s in collector.find(kind=SpanProto.SPAN_KIND_CLIENT))
