"""The message log: one JSON object per line for every delivery, handling, failure, dead letter,
restart, stop and spawn.

It exists so a person can follow *why* anything changed: each record names the envelope, its
correlation (the external event that started the chain) and its causation (the message being
handled when it was sent). The format is documented in ``docs/tracing.md`` and read by
``interlock trace``. It is written with a plain buffered file handle, not through a logging
framework, because it runs for every message: when tracing is off the system holds no tracer
and pays one ``is None`` test per event.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import IO, Any

from interlock.mailbox.envelope import Envelope
from interlock.mailbox.summary import summarize

Record = dict[str, Any]

_ERROR_LIMIT = 200
_FLUSH_INTERVAL = 0.5
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode


def envelope_summary(envelope: Envelope) -> str:
    """The envelope's redacted summary, computed once."""
    summary = envelope.summary
    if summary is None:
        summary = envelope.summary = summarize(envelope.message)
    return summary


class Tracer:
    """Turns runtime events into trace records and hands each to ``emit``.

    Use :meth:`to_file` for a JSON-lines file, or pass any ``emit`` callable (the test helper
    :func:`interlock.mailbox.testing.capture_trace` collects the records in memory).
    """

    __slots__ = ("_close", "_emit", "_second", "_second_text")

    def __init__(
        self, *, emit: Callable[[Record], None], close: Callable[[], None] | None = None
    ) -> None:
        self._emit = emit
        self._close = close
        self._second = -1
        self._second_text = ""

    @classmethod
    def to_stream(cls, stream: IO[str], *, close: Callable[[], None] | None = None) -> Tracer:
        """Write JSON lines to an open text stream (flushed at most every half second)."""
        last_flush = time.monotonic()

        def emit(record: Record) -> None:
            nonlocal last_flush
            stream.write(_encode(record) + "\n")
            now = time.monotonic()
            if now - last_flush >= _FLUSH_INTERVAL:
                last_flush = now
                stream.flush()

        return cls(emit=emit, close=close if close is not None else stream.flush)

    @classmethod
    def to_file(cls, path: str | os.PathLike[str]) -> Tracer:
        """Append JSON lines to ``path``; call :meth:`close` to flush and close it."""
        stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by Tracer.close
        return cls.to_stream(stream, close=stream.close)

    def close(self) -> None:
        """Flush and release the sink (no-op for a plain ``emit`` callable)."""
        if self._close is not None:
            self._close()

    def _timestamp(self) -> str:
        # RFC 3339 UTC with microseconds; the seconds part is formatted once per second.
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._second_text}.{int((now - second) * 1_000_000):06d}Z"

    def _record(self, event: str, envelope: Envelope) -> Record:
        causation = envelope.causation_id
        return {
            "ts": self._timestamp(),
            "event": event,
            "id": str(envelope.id),
            "correlation_id": envelope.correlation_id,
            "causation_id": None if causation is None else str(causation),
            "sender": envelope.sender,
            "recipient": envelope.recipient,
            "type": envelope.type,
            "summary": envelope_summary(envelope),
        }

    def deliver(self, envelope: Envelope, *, depth: int, coalesced: int | None) -> None:
        record = self._record("deliver", envelope)
        record["depth"] = depth
        if coalesced is not None:
            record["coalesced"] = str(coalesced)
        self._emit(record)

    def handled(self, envelope: Envelope, *, duration: float, depth: int) -> None:
        record = self._record("handled", envelope)
        record["duration_ms"] = round(duration * 1000.0, 3)
        record["depth"] = depth
        self._emit(record)

    def failed(self, envelope: Envelope, *, duration: float, error: BaseException) -> None:
        record = self._record("failed", envelope)
        record["duration_ms"] = round(duration * 1000.0, 3)
        record["error_type"] = type(error).__name__
        record["error"] = error_text(error)
        self._emit(record)

    def dead_letter(self, envelope: Envelope, *, reason: str) -> None:
        record = self._record("dead_letter", envelope)
        record["reason"] = reason
        self._emit(record)

    def restart(self, envelope: Envelope, *, attempt: int, delay: float) -> None:
        record = self._record("restart", envelope)
        record["attempt"] = attempt
        record["delay_ms"] = round(delay * 1000.0, 3)
        self._emit(record)

    def spawned(self, envelope: Envelope, *, actor_type: str) -> None:
        record = self._record("spawned", envelope)
        record["actor_type"] = actor_type
        self._emit(record)

    def stopped(self, address: str, *, reason: str, actor_type: str) -> None:
        self._emit(
            {
                "ts": self._timestamp(),
                "event": "stopped",
                "id": None,
                "correlation_id": None,
                "causation_id": None,
                "sender": None,
                "recipient": address,
                "type": None,
                "summary": None,
                "reason": reason,
                "actor_type": actor_type,
            }
        )


def error_text(error: BaseException) -> str:
    """``str(error)`` cut to a log-friendly length."""
    text = str(error)
    if len(text) > _ERROR_LIMIT:
        return text[: _ERROR_LIMIT - 1] + "…"
    return text
