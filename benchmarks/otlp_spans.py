"""What ``--otlp-endpoint`` costs per message: CPU time of one actor handling messages with no
tracer and with the OTLP span tracer (spans made by the SDK and handed to its batch processor,
whose exporter here drops them, so the collector's network cost is left out), medians of
repeats in the same run.

    .venv/bin/python benchmarks/otlp_spans.py
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from interlock.mailbox import Actor, ActorSystem, Tracer
from interlock.mailbox.testing import wait_idle
from interlock.otel import span_tracer

MESSAGES = 20_000
REPEATS = 5


class Dropping(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class Idle(Actor):
    async def receive(self, message: object) -> None:
        return None


async def cpu_per_message(tracer: Tracer | None) -> float:
    system = ActorSystem(tracer=tracer)
    system.spawn("bench/idle", Idle)
    started = time.process_time()
    for n in range(MESSAGES):
        system.tell("bench/idle", n, correlation_id=f"Upserted Service default/web rv={n}")
        if n % 500 == 0:
            await wait_idle(system)
    await wait_idle(system)
    spent = time.process_time() - started
    await system.shutdown()
    return spent / MESSAGES * 1e6


async def main() -> None:
    off: list[float] = []
    on: list[float] = []
    for _ in range(REPEATS):
        off.append(await cpu_per_message(None))
        processor = BatchSpanProcessor(Dropping(), max_queue_size=MESSAGES * 2)
        tracer = span_tracer("http://collector.invalid:4318", processor=processor)
        on.append(await cpu_per_message(tracer))
        tracer.shutdown()
    no, yes = statistics.median(off), statistics.median(on)
    print(f"CPU per message, median of {REPEATS} x {MESSAGES:,} messages:")
    print(f"  no tracer      {no:6.1f} µs")
    print(f"  OTLP spans     {yes:6.1f} µs  (+{yes - no:.1f} µs, export thread's CPU included)")


if __name__ == "__main__":
    asyncio.run(main())
