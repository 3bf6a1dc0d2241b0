"""SpanTracer on an actor system: one span per handled message, the causing message's span as
parent, the correlation as the trace, errors as status; the trace file's lines unchanged
beside it, and none formatted when there is no file."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from interlock.mailbox import Actor, ActorSystem
from interlock.mailbox.testing import CapturedTrace, wait_idle
from interlock.otel import span_tracer, traces_url


class Forward(Actor):
    """Forwards ``"go"`` to ``sink`` as ``"went"``; raises on ``"boom"``."""

    async def receive(self, message: object) -> None:
        if message == "go":
            self.tell("sink", "went")
        elif message == "boom":
            raise RuntimeError("boom happened")


class Sink(Actor):
    async def receive(self, message: object) -> None:
        return None


@pytest.mark.parametrize("with_file", [False, True])
async def test_a_span_per_handled_message_linked_to_its_cause(with_file: bool) -> None:
    exported = InMemorySpanExporter()
    lines = CapturedTrace()
    tracer = span_tracer(
        "http://collector:4318",
        lines=lines.tracer if with_file else None,
        processor=SimpleSpanProcessor(exported),
    )
    system = ActorSystem(tracer=tracer)
    system.spawn("forward", Forward)
    system.spawn("sink", Sink)
    system.tell("forward", "go", correlation_id="Upserted Service default/web rv=1")
    system.tell("forward", "go", correlation_id="Upserted Service default/web rv=2")
    system.tell("forward", "boom", correlation_id="Upserted Service default/api rv=3")
    await wait_idle(system)
    await system.shutdown()
    spans = exported.get_finished_spans()

    def of(correlation: str) -> list[ReadableSpan]:
        return [
            s for s in spans if (s.attributes or {}).get("interlock.correlation_id") == correlation
        ]

    first, second = of("Upserted Service default/web rv=1"), of("Upserted Service default/web rv=2")
    assert [s.name for s in first] == ["str", "str"] and len(second) == 2
    go, went = first
    assert go.context is not None and went.context is not None and went.parent is not None
    assert went.parent.span_id == go.context.span_id and go.parent is None
    assert go.context.trace_id == went.context.trace_id
    assert second[0].context is not None and second[0].context.trace_id != go.context.trace_id
    assert (went.attributes or {})["interlock.recipient"] == "sink"
    assert (went.attributes or {})["interlock.causation_id"] == (go.attributes or {})[
        "interlock.message.id"
    ]
    assert go.start_time is not None and go.end_time is not None
    assert go.start_time <= go.end_time

    (boom,) = of("Upserted Service default/api rv=3")
    assert boom.status.status_code is StatusCode.ERROR
    assert boom.status.description == "RuntimeError: boom happened"
    if with_file:
        assert lines.events("handled") and lines.events("failed") and lines.events("deliver")
    else:
        assert lines.lines == []


def test_traces_url_adds_the_otlp_path_to_a_base_url() -> None:
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("https://collector:4318/") == "https://collector:4318/v1/traces"
    assert traces_url("http://c:4318/custom/traces") == "http://c:4318/custom/traces"
    with pytest.raises(ValueError, match="--otlp-endpoint 'collector:4318'"):
        traces_url("collector:4318")


def test_the_run_flag_reaches_the_config() -> None:
    from interlock.cli import build_parser
    from interlock.cli.run import config_from_args

    args = build_parser().parse_args(["run", "--otlp-endpoint", "http://collector:4318"])
    assert config_from_args(args).observability.otlp_endpoint == "http://collector:4318"
    assert config_from_args(build_parser().parse_args(["run"])).observability.otlp_endpoint is None


def test_the_export_timeout_follows_the_standard_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.otel.spans import EXPORT_TIMEOUT, _export_timeout

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TIMEOUT", raising=False)
    assert _export_timeout() == EXPORT_TIMEOUT
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "9")
    assert _export_timeout() is None  # the exporter reads it
