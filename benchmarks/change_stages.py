"""Where a Service change's latency goes, stage by stage, in the controller that measures it.

``benchmarks/outbound.py`` times a Service change from the admin's request to the moment every
affected watch stream has the new policy in the client. That one figure cannot say whether the
time is the API server's (the request itself, etcd, the watch cache's delivery), the client's
(reading the watch stream, decoding the event) or ours (router, directory, route actors, watch
actors, the stream write). This module timestamps each of those stages for every change, in
the benchmark's own process, without changing the controller:

- ``returned``: the admin's create / delete request got its answer (in ``outbound.py``);
- ``arrived``: the first bytes of the Service's watch event reached the informer's connection
  (aiohttp's protocol, after TLS): the server's commit and watch delivery end here;
- ``decoded``: the informer has the event decoded (``json.loads`` of the line returned);
- ``router``, ``directory``, ``routes``, ``watches``: each actor stage's handler returned
  (the last one of the stage), read from the runtime's tracer, set only while changes run,
  by the change's correlation id (``Deleted Service default/svc-3 rv=…``);
- ``written``: the last affected stream's chunk was written to its socket;
- ``received``: the watch client (another process) had it on every affected stream.

Every timestamp is ``time.time()`` (the clock both processes share), relative to the request's
start. The probes cost a regular expression over each chunk the client receives and a tracer
record per message (a few microseconds each): they are installed in both servers' runs alike.
"""

from __future__ import annotations

import calendar
import json
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import client_proto

from interlock.api import policy_stream
from interlock.kube import informer
from interlock.mailbox.tracing import Tracer

STAGES = (
    "returned",
    "arrived",
    "decoded",
    "router",
    "directory",
    "routes",
    "watches",
    "written",
    "received",
)
"""The stages in the order a change passes them (``returned`` may come after ``arrived``: the
server answers the request and sends the watch event after the same commit)."""

_EVENT = re.compile(
    rb'\{"type":\s*"(?:ADDED|MODIFIED|DELETED)",\s*"object":\s*\{[^{]*?"kind":\s*"Service"'
)
_NAME = re.compile(rb'"name":\s*"(svc-\d+)"')
_CORRELATION = re.compile(r"(?:Upserted|Deleted) Service [^/]+/(svc-\d+) ")
_STAGE_OF_RECIPIENT = (
    ("informer-router", "router"),
    ("service-directory", "directory"),
    ("route/", "routes"),
    ("watch/", "watches"),
)


@dataclass
class ChangeStages:
    """Probes for the changes of one run; :meth:`begin` before each change, :meth:`end` after."""

    names: dict[str, float] = field(default_factory=dict)
    """By Service name, the time its current change's first stage of each kind was seen."""
    current: str | None = None
    started: float = 0.0
    seen: dict[str, float] = field(default_factory=dict)
    trace: list[str] = field(default_factory=list)
    rows: list[dict[str, float]] = field(default_factory=list)
    decode_seconds: list[float] = field(default_factory=list)
    """Seconds each watch event of a Service took to decode (``json.loads``)."""
    event_bytes: list[int] = field(default_factory=list)
    handled: list[list[tuple[float, str, float]]] = field(default_factory=list)
    """Per change, every message its correlation id reached: (ms since the request started
    when the handler returned, recipient, the handler's ms)."""

    def begin(self, name: str, started: float) -> None:
        self.current, self.started, self.seen = name, started, {}
        self.trace.clear()

    def mark(self, stage: str, at: float | None = None, *, last: bool = False) -> None:
        """``stage`` reached at ``at`` (now by default): the first time, or the last (``last``)."""
        when = time.time() if at is None else at
        if last or stage not in self.seen:
            self.seen[stage] = when

    def end(self, received: float) -> dict[str, float]:
        """The change's stages in milliseconds since its request started."""
        self.mark("received", received)
        handled: list[tuple[float, str, float]] = []
        for line in self.trace:
            record = json.loads(line)
            if record.get("event") != "handled":
                continue
            correlation = _CORRELATION.match(record.get("correlation_id") or "")
            if correlation is None or correlation.group(1) != self.current:
                continue
            recipient = record.get("recipient") or ""
            at_ms = 1000 * (_epoch(record["ts"]) - self.started)
            handled.append((round(at_ms, 2), recipient, record.get("duration_ms", 0.0)))
            for prefix, stage in _STAGE_OF_RECIPIENT:
                if recipient.startswith(prefix):
                    at = _epoch(record["ts"])
                    self.mark(stage, at, last=True)
        self.trace.clear()
        row = {stage: 1000 * (self.seen[stage] - self.started) for stage in self.seen}
        self.rows.append(row)
        self.handled.append(handled)
        self.current = None
        return row

    @contextmanager
    def installed(self, system: Any) -> Iterator[None]:
        """The probes in place (and the runtime's tracer on) for the duration of the block."""
        probe = self
        received = client_proto.ResponseHandler.data_received
        send = policy_stream._Connection._send
        loads = informer.json.loads

        def data_received(handler: Any, data: bytes) -> None:
            if probe.current is not None and b"svc-" in data and _EVENT.search(data):
                found = _NAME.search(data)
                if found is not None and found.group(1).decode() == probe.current:
                    probe.mark("arrived")
            received(handler, data)

        def timed_loads(text: str | bytes) -> Any:
            started = time.perf_counter()
            value = loads(text)
            if probe.current is not None and isinstance(value, dict):
                obj = value.get("object") or {}
                if (
                    obj.get("kind") == "Service"
                    and obj.get("metadata", {}).get("name") == probe.current
                ):
                    probe.decode_seconds.append(time.perf_counter() - started)
                    probe.event_bytes.append(len(text))
                    probe.mark("decoded")
            return value

        def timed_send(connection: Any) -> None:
            slot = connection._slot
            fresh = slot is not None and slot.version > connection._version
            send(connection)
            if fresh and probe.current is not None:
                probe.mark("written", last=True)

        client_proto.ResponseHandler.data_received = data_received  # type: ignore[method-assign]
        policy_stream._Connection._send = timed_send  # type: ignore[method-assign]
        informer.json = _Json(timed_loads)  # type: ignore[assignment]
        system.set_tracer(Tracer(write=self._record))
        try:
            yield
        finally:
            system.set_tracer(None)
            client_proto.ResponseHandler.data_received = received  # type: ignore[method-assign]
            policy_stream._Connection._send = send  # type: ignore[method-assign]
            informer.json = json  # type: ignore[assignment]

    def _record(self, line: str) -> None:
        if self.current is not None:
            self.trace.append(line)

    def summary(self) -> dict[str, Any]:
        """Per stage: median, p90, max (ms since the request started); per step between
        consecutive stages: median and p90 of its own duration."""
        out: dict[str, Any] = {"changes": len(self.rows), "stages": {}, "steps": {}}
        for stage in STAGES:
            values = [row[stage] for row in self.rows if stage in row]
            if values:
                out["stages"][stage] = _spread(values)
        previous: str | None = None
        for stage in STAGES[1:]:
            # ``returned`` is not on the event's path: the steps run arrived → … → received.
            steps = [
                row[stage] - row[previous]
                for row in self.rows
                if previous is not None and stage in row and previous in row
            ]
            if steps:
                out["steps"][f"{previous} → {stage}"] = _spread(steps)
            previous = stage
        out["steps"]["start → arrived"] = _spread(
            [r["arrived"] for r in self.rows if "arrived" in r]
        )
        if self.decode_seconds:
            out["decode_us"] = _spread([1e6 * s for s in self.decode_seconds])
            out["event_bytes"] = statistics.median(self.event_bytes)
        return out


class _Json:
    """The informer's ``json`` module with a timed ``loads``."""

    def __init__(self, loads: Callable[[str | bytes], Any]) -> None:
        self.loads = loads


def _spread(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))],
        "p99": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "max": ordered[-1],
    }


def _epoch(ts: str) -> float:
    """The tracer's RFC 3339 UTC timestamp (microseconds) as Unix seconds."""
    seconds, _, fraction = ts.rstrip("Z").partition(".")
    return calendar.timegm(time.strptime(seconds, "%Y-%m-%dT%H:%M:%S")) + float(f"0.{fraction}")
