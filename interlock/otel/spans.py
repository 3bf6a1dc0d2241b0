"""One OpenTelemetry span per handled message, exported over OTLP/HTTP (``--otlp-endpoint``).

The trace file answers "why did this change?" for a person with ``interlock trace``; an
operator whose platform already collects traces (Jaeger, Tempo, Honeycomb …) wants the same
answer there, next to the traces of everything else. This module turns the runtime's trace
events into spans with the official OpenTelemetry SDK and its OTLP/HTTP exporter:

- one span per handled message (``started()`` included), named after the message type, from
  the moment its handler began to when it returned; a handler that raised gives a span with
  status ERROR and the error's type and (cut) text;
- the span's parent is the span of the message whose handler sent it (``causation_id``), and
  its trace id is derived from the correlation id, so everything one Kubernetes event
  (``Upserted Service default/web rv=12``) caused is one trace — across replicas too, since
  they derive the same id from the same event;
- the attributes are the trace file's fields (ids, sender, recipient, type, the redacted
  summary, mailbox depth): never a message's payload, so never a Secret value.

It is a :class:`~interlock.mailbox.tracing.Tracer` subclass so that the runtime's hot path is
untouched: with no ``--otlp-endpoint`` nothing here is imported and the system pays what it
paid before (no tracer: one ``is None`` test per event; a trace file: the plain ``Tracer``).
The SDK is an optional extra (``pip install 'interlock[otel]'``), so the default install stays
light. The SDK's batch processor exports from its own thread (the exporter is synchronous
HTTP); span ids are chosen by an ``IdGenerator`` that hands the SDK the ids computed from the
envelope, the extension point the SDK offers for that.
"""

from __future__ import annotations

import hashlib
import os
import time
from urllib.parse import urlsplit

from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from interlock import __version__
from interlock.mailbox.envelope import Envelope
from interlock.mailbox.summary import summarize
from interlock.mailbox.tracing import Tracer, error_text

TRACES_PATH = "/v1/traces"
EXPORT_TIMEOUT = 2.0
"""Seconds one export may take by default: a collector that does not answer must not hold up
shutdown (``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` changes it)."""

_SPAN_MASK = (1 << 64) - 1
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for ``--otlp-endpoint``: a collector's base URL
    (``http://collector:4318``) gets ``/v1/traces``; a URL with a path is used as given."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"--otlp-endpoint {endpoint!r}: expected an http:// or https:// URL such as "
            "http://otel-collector:4318"
        )
    if parts.path in ("", "/"):
        return endpoint.rstrip("/") + TRACES_PATH
    return endpoint


class EnvelopeIds(IdGenerator):
    """Ids from envelopes, not random: the span id of envelope ``n`` is a function of ``n``
    (and of this process, so two replicas' envelope 7 differ), its trace id a function of its
    correlation. :meth:`SpanTracer._span` sets the next ids just before the SDK asks."""

    def __init__(self, salt: int) -> None:
        self.salt = salt
        self.next_trace_id = 0
        self.next_span_id = 0

    def generate_span_id(self) -> int:
        return self.next_span_id

    def generate_trace_id(self) -> int:
        return self.next_trace_id

    def is_trace_id_random(self) -> bool:
        return False

    def span_id(self, envelope_id: int) -> int:
        # A multiplicative hash: distinct ids stay distinct; never 0 (the invalid span id).
        return (((envelope_id * 0x9E3779B97F4A7C15) ^ self.salt) & _SPAN_MASK) or 1

    def trace_id(self, correlation_id: str) -> int:
        # A correlation the runtime numbered itself (no external event) is only unique within
        # this process: salt it. An event's identity is the same on every replica: do not.
        seed = f"{self.salt}:{correlation_id}" if correlation_id.isdigit() else correlation_id
        digest = hashlib.blake2b(seed.encode(), digest_size=16).digest()
        return int.from_bytes(digest, "big") or 1


class SpanTracer(Tracer):
    """A :class:`Tracer` that exports a span per handled message and hands every record to
    ``lines`` too (the trace file's tracer) when there is one."""

    __slots__ = ("_ids", "_lines", "_otel", "_provider")

    def __init__(self, *, provider: TracerProvider, ids: EnvelopeIds, lines: Tracer | None) -> None:
        super().__init__(write=_discard)
        self._lines = lines
        self._provider = provider
        self._ids = ids
        self._otel = provider.get_tracer("interlock", __version__)

    def deliver(self, envelope: Envelope, *, depth: int, coalesced: int | None) -> None:
        if self._lines is not None:
            self._lines.deliver(envelope, depth=depth, coalesced=coalesced)

    def scheduled(self, envelope: Envelope, *, delay: float) -> None:
        if self._lines is not None:
            self._lines.scheduled(envelope, delay=delay)

    def dead_letter(self, envelope: Envelope, *, reason: str) -> None:
        if self._lines is not None:
            self._lines.dead_letter(envelope, reason=reason)

    def restart(self, envelope: Envelope, *, attempt: int, delay: float) -> None:
        if self._lines is not None:
            self._lines.restart(envelope, attempt=attempt, delay=delay)

    def spawned(self, envelope: Envelope, *, actor_type: str) -> None:
        if self._lines is not None:
            self._lines.spawned(envelope, actor_type=actor_type)

    def stopped(self, address: str, *, reason: str, actor_type: str) -> None:
        if self._lines is not None:
            self._lines.stopped(address, reason=reason, actor_type=actor_type)

    def handled(self, envelope: Envelope, *, duration: float, depth: int) -> None:
        if self._lines is not None:
            self._lines.handled(envelope, duration=duration, depth=depth)
        self._span(envelope, duration=duration, depth=depth, error=None)

    def failed(self, envelope: Envelope, *, duration: float, error: BaseException) -> None:
        if self._lines is not None:
            self._lines.failed(envelope, duration=duration, error=error)
        self._span(envelope, duration=duration, depth=None, error=error)

    def _span(
        self, envelope: Envelope, *, duration: float, depth: int | None, error: BaseException | None
    ) -> None:
        ids = self._ids
        end = time.time_ns()
        start = end - int(duration * 1e9)
        trace_id = ids.trace_id(envelope.correlation_id)
        causation = envelope.causation_id
        context = None
        if causation is not None:
            parent = SpanContext(
                trace_id, ids.span_id(causation), is_remote=False, trace_flags=_SAMPLED
            )
            context = trace_api.set_span_in_context(NonRecordingSpan(parent))
        ids.next_trace_id = trace_id
        ids.next_span_id = ids.span_id(envelope.id)
        message = envelope.message
        attributes: dict[str, str | int] = {
            "interlock.message.id": envelope.id,
            "interlock.message.type": type(message).__name__,
            "interlock.message.summary": summarize(message),
            "interlock.correlation_id": envelope.correlation_id,
            "interlock.sender": envelope.sender,
            "interlock.recipient": envelope.recipient,
            "interlock.actor.kind": envelope.recipient.partition("/")[0],
        }
        if causation is not None:
            attributes["interlock.causation_id"] = causation
        if depth is not None:
            attributes["interlock.mailbox.depth"] = depth
        span = self._otel.start_span(
            type(message).__name__, context=context, attributes=attributes, start_time=start
        )
        if error is not None:
            span.set_status(
                Status(StatusCode.ERROR, f"{type(error).__name__}: {error_text(error)}")
            )
        span.end(end_time=end)

    def close(self) -> None:
        """Close the trace file (if any); the spans are flushed by :meth:`shutdown`."""
        if self._lines is not None:
            self._lines.close()

    def shutdown(self) -> None:
        """Export what is buffered and stop the exporter (blocks up to the export timeout:
        call it off the event loop)."""
        self._provider.shutdown()


def _export_timeout() -> float | None:
    """:data:`EXPORT_TIMEOUT`, unless the standard ``OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`` or
    ``OTEL_EXPORTER_OTLP_TIMEOUT`` (seconds) says otherwise: ``None`` lets the exporter read
    them."""
    names = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
    return None if any(os.environ.get(name) for name in names) else EXPORT_TIMEOUT


def _discard(_line: str) -> None:
    return None


def span_tracer(
    endpoint: str, *, lines: Tracer | None = None, processor: SpanProcessor | None = None
) -> SpanTracer:
    """A :class:`SpanTracer` exporting to the OTLP/HTTP ``endpoint`` (see :func:`traces_url`)
    with a batch processor (or ``processor``), writing ``lines`` (a trace file) too if given."""
    url = traces_url(endpoint)
    ids = EnvelopeIds(int.from_bytes(os.urandom(8), "big"))
    provider = TracerProvider(
        resource=Resource.create({"service.name": "interlock", "service.version": __version__}),
        id_generator=ids,
        shutdown_on_exit=False,
    )
    provider.add_span_processor(
        processor
        if processor is not None
        else BatchSpanProcessor(OTLPSpanExporter(endpoint=url, timeout=_export_timeout()))
    )
    return SpanTracer(provider=provider, ids=ids, lines=lines)
