"""The message log: one JSON object per line for every delivery, handling, failure, dead letter,
restart, stop and spawn.

It exists so a person can follow *why* anything changed: each record names the envelope, its
correlation (the external event that started the chain) and its causation (the message being
handled when it was sent). The format is documented in ``docs/tracing.md`` and read by
``interlock trace``.

It runs for every message, so it is built for cost: each record is formatted straight into a
JSON line (strings escaped by the C encoder of the standard library, no intermediate dict) and
written to a buffered file, not through a logging framework. When tracing is off the system
holds no tracer and pays one ``is None`` test per event.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import IO, Any

from loguru import logger

from interlock.mailbox.envelope import Envelope
from interlock.mailbox.summary import summarize

Record = dict[str, Any]
"""One trace record as parsed from its JSON line."""

_ERROR_LIMIT = 200
_FLUSH_INTERVAL = 0.5
_quote: Callable[[str], str] = encode_basestring


class Tracer:
    """Formats runtime events as JSON lines and hands each line (ending in a newline) to
    ``write``.

    Use :meth:`to_file` for a trace file, :meth:`to_stream` for an open text stream, or any
    ``write`` callable (the test helper :func:`interlock.mailbox.testing.capture_trace` parses
    the lines back into records).
    """

    __slots__ = ("_close", "_last_message", "_last_summary", "_second", "_second_text", "_write")

    def __init__(
        self, *, write: Callable[[str], object], close: Callable[[], object] | None = None
    ) -> None:
        self._write = write
        self._close = close
        self._second = -1
        self._second_text = ""
        # One publish sends the same message to many subscribers: summarize it once.
        self._last_message: object = None
        self._last_summary = ""

    @classmethod
    def to_stream(cls, stream: IO[str], *, close: Callable[[], object] | None = None) -> Tracer:
        """Write to an open text stream, flushed at most every half second and on close."""
        last_flush = time.monotonic()
        write_text = stream.write
        broken = False

        def write(line: str) -> None:
            nonlocal last_flush, broken
            try:
                write_text(line)
                now = time.monotonic()
                if now - last_flush >= _FLUSH_INTERVAL:
                    last_flush = now
                    stream.flush()
            except (OSError, ValueError) as error:
                # A full disk or a closed file must not fail the message being sent: the trace
                # is a diagnostic. Say so once, then drop records.
                if not broken:
                    broken = True
                    logger.error("trace: cannot write, dropping records: {}", error)

        return cls(write=write, close=close if close is not None else stream.flush)

    @classmethod
    def to_file(cls, path: str | os.PathLike[str]) -> Tracer:
        """Append to the file at ``path``; :meth:`close` flushes and closes it."""
        stream = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by Tracer.close
        return cls.to_stream(stream, close=stream.close)

    @classmethod
    def to_loguru(cls, *, level: str = "DEBUG") -> Tracer:
        """Emit each line as a raw loguru record bound with ``interlock_trace=True``, for
        deployments that route everything through loguru sinks (a sink filtering on that extra
        key gets pure JSON lines). Costs a loguru record per event: several times
        :meth:`to_file`."""
        emit = logger.bind(interlock_trace=True).opt(raw=True).log

        def write(line: str) -> None:
            emit(level, line)

        return cls(write=write)

    def close(self) -> None:
        """Flush and release the sink (nothing to do for a plain ``write`` callable)."""
        if self._close is not None:
            self._close()

    def _timestamp(self) -> str:
        # RFC 3339 UTC with microseconds; the seconds part is formatted once per second.
        second, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
        if second != self._second:
            self._second = second
            self._second_text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        # zfill, not a ``:06d`` format spec: the spec is parsed on every call (about 1,400
        # instructions more per record under callgrind, two records per message).
        return f"{self._second_text}.{str(nanoseconds // 1000).zfill(6)}Z"

    def _fields(self, envelope: Envelope) -> str:
        """The envelope's fields as JSON members, rendered once per envelope."""
        try:
            return envelope.trace_fields
        except AttributeError:
            return self._render_fields(envelope)

    def _render_fields(self, envelope: Envelope) -> str:
        """Render (and keep on the envelope) its fields as JSON members.

        ``deliver`` calls this directly: the envelope is new there (or its message was just
        replaced by coalescing), and asking it for fields it does not have yet would raise an
        AttributeError whose message CPython formats — about 2,000 instructions per message
        under callgrind, for nothing.
        """
        message = envelope.message
        if message is self._last_message:
            summary = self._last_summary
        else:
            summary = self._last_summary = summarize(message)
            self._last_message = message
        causation = envelope.causation_id
        cause = "null" if causation is None else f'"{causation}"'
        fields = envelope.trace_fields = (
            f'"id":"{envelope.id}","correlation_id":{_quote(envelope.correlation_id)},'
            f'"causation_id":{cause},"sender":{_quote(envelope.sender)},'
            f'"recipient":{_quote(envelope.recipient)},"type":{_quote(type(message).__name__)},'
            f'"summary":{_quote(summary)}'
        )
        return fields

    def _head(self, event: str, envelope: Envelope) -> str:
        """The fields every message record has, as the start of a JSON object."""
        return f'{{"ts":"{self._timestamp()}","event":"{event}",{self._fields(envelope)}'

    def deliver(self, envelope: Envelope, *, depth: int, coalesced: int | None) -> None:
        """The message entered the recipient's mailbox (``coalesced``: the id it replaced)."""
        if coalesced is None:
            # The per-message records are formatted inline: one call less per message.
            self._write(
                f'{{"ts":"{self._timestamp()}","event":"deliver",{self._render_fields(envelope)},'
                f'"depth":{depth}}}\n'
            )
        else:
            self._write(
                f'{{"ts":"{self._timestamp()}","event":"deliver",{self._render_fields(envelope)},'
                f'"depth":{depth},"coalesced":"{coalesced}"}}\n'
            )

    def handled(self, envelope: Envelope, *, duration: float, depth: int) -> None:
        """The handler returned; ``depth`` is what is still queued behind it."""
        self._write(
            f'{{"ts":"{self._timestamp()}","event":"handled",{self._fields(envelope)},'
            f'"duration_ms":{duration * 1000.0:.3f},"depth":{depth}}}\n'
        )

    def failed(self, envelope: Envelope, *, duration: float, error: BaseException) -> None:
        """The handler raised (type and message of the error; no traceback, no payload)."""
        self._write(
            f'{self._head("failed", envelope)},"duration_ms":{duration * 1000.0:.3f},'
            f'"error_type":{_quote(type(error).__name__)},"error":{_quote(error_text(error))}}}\n'
        )

    def scheduled(self, envelope: Envelope, *, delay: float) -> None:
        """A timer was set: ``envelope`` is delivered in ``delay`` seconds unless cancelled."""
        self._write(f'{self._head("scheduled", envelope)},"delay_ms":{delay * 1000.0:.3f}}}\n')

    def dead_letter(self, envelope: Envelope, *, reason: str) -> None:
        """The message was not delivered: ``unknown``, ``stopped``, ``overflow``, ``shutdown``."""
        self._write(f'{self._head("dead_letter", envelope)},"reason":"{reason}"}}\n')

    def restart(self, envelope: Envelope, *, attempt: int, delay: float) -> None:
        """The actor failed on ``envelope`` and is restarted after ``delay`` seconds."""
        self._write(
            f'{self._head("restart", envelope)},"attempt":{attempt},'
            f'"delay_ms":{delay * 1000.0:.3f}}}\n'
        )

    def spawned(self, envelope: Envelope, *, actor_type: str) -> None:
        """An actor was spawned; ``envelope`` is its ``Started`` item."""
        self._write(f'{self._head("spawned", envelope)},"actor_type":{_quote(actor_type)}}}\n')

    def stopped(self, address: str, *, reason: str, actor_type: str) -> None:
        """The actor at ``address`` ended: ``requested``, ``restart intensity``, ``shutdown``."""
        self._write(
            f'{{"ts":"{self._timestamp()}","event":"stopped","id":null,"correlation_id":null,'
            f'"causation_id":null,"sender":null,"recipient":{_quote(address)},"type":null,'
            f'"summary":null,"reason":{_quote(reason)},"actor_type":{_quote(actor_type)}}}\n'
        )


def error_text(error: BaseException) -> str:
    """``str(error)`` cut to a log-friendly length."""
    text = str(error)
    if len(text) > _ERROR_LIMIT:
        return text[: _ERROR_LIMIT - 1] + "…"
    return text
