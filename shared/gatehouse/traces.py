"""OpenTelemetry traces: off unless an OTLP endpoint is set, then one SDK per process; the helpers.

``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) turns
traces on: ``setup(service)``, called by each process's root after any fork,
gives the process a tracer provider that batches its spans to that endpoint over
OTLP/HTTP and instruments psycopg, redis and httpx. The SDK reads every other
``OTEL_*`` variable itself (headers, timeouts, sampler, batch delays, resource
attributes, ``OTEL_SERVICE_NAME``, ``OTEL_SDK_DISABLED``).

Off, nothing here imports OpenTelemetry's SDK, exporter or instrumentations
(importing them took a process 0.5 s or more of its start-up here), and every
helper is a no-op.

Where the context travels between processes: in a job message's options
(``TRACE_OPTION``, a W3C ``traceparent``/``tracestate`` carrier), put there by the
one send path (``gatehouse.dispatch``) from the code that sent it (a request, a
job's run, a tick), and opened as the parent of the run's span by whoever
consumes it (``consume``). A job written in bulk by a fan-out (``linking``)
carries its fan-out's context as a link instead (``LINK_OPTION``): each account's
job is a trace of its own that points at the fan-out, not one trace of thousands.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping
from typing import Any

TRACE_OPTION = "trace"  # message option: the sender's context, the parent of the consumer's span
LINK_OPTION = "trace_link"  # message option: a context the consumer's span links to (a fan-out's)

_tracer: Any = None  # the process's tracer once set up; None while traces are off
_provider: Any = None
_OFF = contextlib.nullcontext()
_linking = contextvars.ContextVar("gatehouse_trace_linking", default=False)


def configured() -> bool:
    """Whether the environment asks for traces (an OTLP endpoint, and the SDK not disabled)."""
    env = os.environ
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) and env.get("OTEL_SDK_DISABLED", "").strip().lower() != "true"


def setup(service: str) -> bool:
    """Traces for this process as ``service`` (``OTEL_SERVICE_NAME`` wins) if configured; whether they are on.

    Once per process, in the process that makes the spans: a forked child sets up its own.
    """
    global _tracer, _provider
    if _provider is not None or not configured():
        return _provider is not None
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or service})
    )
    provider.sampler = _no_lone_clients(provider.sampler)  # the sampler OTEL_TRACES_SAMPLER chose
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    PsycopgInstrumentor().instrument()
    RedisInstrumentor().instrument()
    HTTPXClientInstrumentor().instrument()
    _provider, _tracer = provider, trace.get_tracer("gatehouse")
    return True


def _no_lone_clients(inner: Any) -> Any:
    """``inner``, except that a client call (SQL, Redis, HTTP) outside any trace starts none.

    A consumer's poll of its queue, the lease keeper's beats and a dead message's ack run outside
    any request or job: each would be a trace of one span, many a second.
    """
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
    from opentelemetry.trace import SpanKind, get_current_span

    class NoLoneClients(Sampler):
        def should_sample(self, parent_context, trace_id, name, kind=None, *args, **kwargs):
            if kind == SpanKind.CLIENT and not get_current_span(parent_context).get_span_context().is_valid:
                return SamplingResult(Decision.DROP)
            return inner.should_sample(parent_context, trace_id, name, kind, *args, **kwargs)

        def get_description(self) -> str:
            return f"NoLoneClients{{{inner.get_description()}}}"

    return NoLoneClients()


def shutdown() -> None:
    """Export what is still batched, then stop (a process's last step: a forked child skips atexit)."""
    global _tracer, _provider
    if _provider is not None:
        _provider.shutdown()
        _provider = _tracer = None


def span(name: str, attributes: Mapping[str, Any] | None = None) -> contextlib.AbstractContextManager[Any]:
    """A span of this process's work, current while the block runs (an exception marks it failed)."""
    if _tracer is None:
        return _OFF
    return _tracer.start_as_current_span(name, attributes=_attributes(attributes))


def note(attributes: Mapping[str, Any], *, error: str | None = None) -> None:
    """Attributes on the current span (None values left out); ``error`` marks it failed, saying why."""
    if _tracer is None:
        return
    from opentelemetry.trace import Status, StatusCode, get_current_span

    current = get_current_span()
    current.set_attributes(_attributes(attributes))
    if error is not None:
        current.set_status(Status(StatusCode.ERROR, error))


def rename(span_name: str, attributes: Mapping[str, Any]) -> None:
    """Rename the current span (a request's, once its route is known), with these attributes."""
    if _tracer is None:
        return
    from opentelemetry.trace import get_current_span

    current = get_current_span()
    current.update_name(span_name)
    current.set_attributes(_attributes(attributes))


def event(name: str, attributes: Mapping[str, Any]) -> None:
    """Something that happened at one moment of the current span (a gate wait)."""
    if _tracer is None:
        return
    from opentelemetry.trace import get_current_span

    get_current_span().add_event(name, _attributes(attributes))


@contextlib.contextmanager
def linking() -> Iterator[None]:
    """Messages sent in this block carry the current context as a link, not as their parent."""
    token = _linking.set(True)
    try:
        yield
    finally:
        _linking.reset(token)


def carried() -> dict[str, Any]:
    """Message options that carry the current context (none while traces are off or outside a span)."""
    if _tracer is None:
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return {}
    return {LINK_OPTION if _linking.get() else TRACE_OPTION: carrier}


def consume(name: str, message: Any, attributes: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """The span of a message's processing (a Dramatiq ``message``, or None), current while it runs:
    the child of the context its options carry, linked to the one they carry as a link."""
    if _tracer is None:
        return _OFF
    from opentelemetry import propagate
    from opentelemetry.trace import Link, SpanKind, get_current_span

    options = message.options if message is not None else {}
    links = []
    if LINK_OPTION in options:
        linked = get_current_span(propagate.extract(options[LINK_OPTION])).get_span_context()
        if linked.is_valid:
            links.append(Link(linked))
    return _tracer.start_as_current_span(
        name,
        context=propagate.extract(options.get(TRACE_OPTION) or {}),
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=_attributes(attributes),
    )


def _attributes(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (attributes or {}).items() if v is not None}
