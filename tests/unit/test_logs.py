"""The log line formats (gatehouse.logs): JSON's fields, the bound ids, the span's, the exception; text's ids."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from datetime import UTC, datetime, timedelta

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from gatehouse import logs


def record(message: str, *args: object, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("gatehouse.test", logging.WARNING, __file__, 1, message, args, exc_info)


def test_a_json_line_has_its_fields_the_ids_bound_around_it_and_the_exception():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        exc_info = sys.exc_info()
    account = uuid.uuid4()
    span = NonRecordingSpan(SpanContext(trace_id=0xABC, span_id=0xDEF, is_remote=False))

    # Given ids bound by nested scopes and a current span
    with logs.bound(job_id="j1", job_type="probe", account_id=account), trace.use_span(span):
        with logs.bound(delivery_id="d1"):
            line = json.loads(logs.JsonFormatter().format(record("job %s failed", "j1", exc_info=exc_info)))
        after_inner = logs.context()

    # Then the line is one object with its fields, every id that applies and the exception
    assert line.pop("exception").startswith("Traceback (most recent call last)")
    at = datetime.fromisoformat(line.pop("time"))
    assert at.utcoffset() == timedelta(0) and abs(datetime.now(UTC) - at) < timedelta(seconds=5)
    assert isinstance(line.pop("pid"), int) and line.pop("thread")
    assert line == {
        "level": "WARNING",
        "logger": "gatehouse.test",
        "message": "job j1 failed",
        "job_id": "j1",
        "job_type": "probe",
        "account_id": str(account),
        "delivery_id": "d1",
        "trace_id": f"{0xABC:032x}",
        "span_id": f"{0xDEF:016x}",
    }
    # … an inner scope's id ends with it, and outside every scope (and span) a line has no id at all
    assert "delivery_id" not in after_inner and after_inner["job_id"] == "j1"
    bare = json.loads(logs.JsonFormatter().format(record("plain")))
    assert set(bare) == {"time", "level", "logger", "message", "pid", "thread"}


def test_a_text_line_ends_with_its_ids_in_short():
    with logs.bound(request_id="r1", job_id="j1", job_type="probe"):
        line = logs.TextFormatter().format(record("hello %s", "you"))
    assert line.endswith("[gatehouse.test] [WARNING] hello you [req=r1 job=j1 type=probe]"), line
    assert logs.TextFormatter().format(record("hello")).endswith("[WARNING] hello")
