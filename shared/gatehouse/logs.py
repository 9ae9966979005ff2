"""How every process logs (``LOG_FORMAT``), and the ids its lines carry.

``text`` (the default, `make run`'s) is a line for people, its ids at the end
(``… [req=… job=… type=…]``); ``json`` (the images' manifests) is one object per
line: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``, ``pid``,
``thread``, ``exception`` when there is one, and the ids that apply.

The ids are bound per context (a request, a job run, a delivery attempt) with
``bound(…)`` and read by the formatters when a line is written, so every logger
— ours, dramatiq's, httpx's, gunicorn's — carries them; the current span's
``trace_id``/``span_id`` join them when a span is recording.

Each process formats its lines here: the scheduler, the migrations and the
commands own their handler (``configure``); gunicorn and the dramatiq CLI make
theirs, which get our formatter (``use_format``).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Literal

from opentelemetry import trace

LogFormat = Literal["text", "json"]
FORMATS: tuple[LogFormat, ...] = ("text", "json")
# The ids a line may carry (JSON keys), each with its short name in the text format, in the order shown.
TEXT_NAMES = {
    "request_id": "req",
    "job_id": "job",
    "job_type": "type",
    "account_id": "account",
    "operation_id": "op",
    "delivery_id": "delivery",
    "trace_id": "trace",
}
# dramatiq's own format, which the workers wrote before LOG_FORMAT: the process and thread tell
# apart the lines of a worker's processes and threads.
TEXT = "[%(asctime)s] [PID %(process)d] [%(threadName)s] [%(name)s] [%(levelname)s] %(message)s"

_ids: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("gatehouse_log_ids", default={})  # noqa: B039 - never mutated


def bind(
    *,
    request_id: object = None,
    job_id: object = None,
    job_type: object = None,
    account_id: object = None,
    operation_id: object = None,
    delivery_id: object = None,
) -> contextvars.Token:
    """Adds ids (those not None) to this context's lines until ``reset(token)`` or the end of the
    enclosing ``bound``."""
    given = {
        "request_id": request_id,
        "job_id": job_id,
        "job_type": job_type,
        "account_id": account_id,
        "operation_id": operation_id,
        "delivery_id": delivery_id,
    }
    return _ids.set({**_ids.get(), **{k: str(v) for k, v in given.items() if v is not None}})


def reset(token: contextvars.Token) -> None:
    _ids.reset(token)


@contextlib.contextmanager
def bound(**ids: object) -> Iterator[None]:
    """``with logs.bound(job_id=…, job_type=…):`` — every line logged inside carries these ids."""
    token = bind(**ids)
    try:
        yield
    finally:
        reset(token)


def context() -> dict[str, str]:
    """The ids of a line logged here and now: the bound ones, and the current span's if it records."""
    ids = dict(_ids.get())
    span = trace.get_current_span().get_span_context()
    if span.is_valid:
        ids["trace_id"] = format(span.trace_id, "032x")
        ids["span_id"] = format(span.span_id, "016x")
    return ids


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "pid": record.process,
            "thread": record.threadName,
            **context(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        # ASCII only: a line stays valid JSON whatever encoding the stream has.
        return json.dumps(line)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__(TEXT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        ids = context()
        shown = " ".join(f"{short}={ids[key]}" for key, short in TEXT_NAMES.items() if key in ids)
        return f"{line} [{shown}]" if shown else line


def formatter(log_format: LogFormat) -> logging.Formatter:
    return JsonFormatter() if log_format == "json" else TextFormatter()


def configure(log_format: LogFormat, level: str | int = logging.INFO) -> None:
    """This process's logging: the root logger writes ``log_format`` lines to stderr at ``level``."""
    logging.basicConfig(level=level, handlers=[logging.StreamHandler()], force=True)
    use_format(log_format)


def use_format(log_format: LogFormat, *loggers: logging.Logger) -> None:
    """Formats every handler of ``loggers`` (default: the root logger) in ``log_format``, and makes
    what would bypass them a log line too: Python's warnings and uncaught exceptions."""
    for logger in loggers or (logging.getLogger(),):
        for handler in logger.handlers:
            handler.setFormatter(formatter(log_format))
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread


def _log_uncaught(exc_type, exc_value, exc_traceback) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc_value, exc_traceback)
    else:
        logging.getLogger("gatehouse").critical(
            "uncaught exception", exc_info=(exc_type, exc_value, exc_traceback)
        )


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if not issubclass(args.exc_type, SystemExit):  # a thread's SystemExit ends it quietly, as by default
        _log_uncaught(args.exc_type, args.exc_value, args.exc_traceback)
