"""The demo's live trace: one readable line per handled message, as it happens.

A trace file is precise but made for ``interlock trace`` after the fact. During the demo a person
changes something with kubectl and wants to see, right away, which actors reacted and *why*, so
each line names the actor, the message, how it ended and the external event that started the
chain (the correlation's root: ``Upserted Service default/echo-v2 rv=42``).

The demo gives the controller's actor system a tracer whose lines go both to the trace file and
to a :class:`TraceTee` queue; a task drains the queue a few times a second, flushes the file (so
``interlock trace`` can read it while the demo runs) and prints. Parsing and printing never run
inside a message handler. Records are parsed with the same :mod:`interlock.traceview` types the
``trace`` command uses; like the trace itself, they hold summaries, never Secret data.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import IO

from interlock.traceview.load import Message, parse_ts

_OUTCOMES = frozenset({"handled", "failed", "dead_letter"})
_ROOTS_KEPT = 10_000
_SUMMARY_WIDTH = 90
_ACTOR_WIDTH = 28


_PUBLISHED = re.compile(r"^(Published|Unpublished)\(topic='([^']*)', key='([^']*)'")


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def short_address(address: str) -> str:
    """``route/gateway.networking.k8s.io/default/web`` → ``route/default/web``: API groups
    (the segments with a dot) dropped, the kind and the object kept."""
    parts = address.split("/")
    kept = [part for part in parts[1:] if "." not in part]
    return "/".join((parts[0], *kept))


def describe(message: Message) -> str:
    """What the message says: its summary, with retained-value deliveries shown as
    ``Published <topic> [<key>]`` rather than the whole value."""
    what = message.summary or message.type
    published = _PUBLISHED.match(what)
    if published is not None:
        return f"{published[1]} {published[2]} [{published[3]}]"
    if message.type and not what.startswith(message.type):
        return f"{message.type}: {what}"
    return what


def _message(record: dict[str, object]) -> Message:
    message = Message(
        id=str(record.get("id")),
        correlation_id=str(record.get("correlation_id") or record.get("id")),
        causation_id=None if record.get("causation_id") is None else str(record["causation_id"]),
        sender=None if record.get("sender") is None else str(record["sender"]),
        recipient=str(record.get("recipient") or ""),
        type=str(record.get("type") or ""),
        summary=str(record.get("summary") or ""),
        ended_at=parse_ts(str(record["ts"])),
        outcome=str(record["event"]),
    )
    duration = record.get("duration_ms")
    if isinstance(duration, int | float):
        message.duration_ms = float(duration)
    if message.outcome == "failed":
        message.error = f"{record.get('error_type', 'Error')}: {record.get('error', '')}"
    elif message.outcome == "dead_letter":
        message.error = str(record.get("reason", ""))
    return message


def _outcome(message: Message) -> str:
    if message.outcome == "failed":
        return f"FAILED {message.error}"
    if message.outcome == "dead_letter":
        return f"dead letter ({message.error})"
    if message.duration_ms is None:
        return "handled"
    return f"{message.duration_ms:.2f} ms"


class LiveTrace:
    """Turns trace lines into one printed line per message that finished (handled, failed or
    dead-lettered), each naming the external event that caused it."""

    def __init__(self, *, out: Callable[[str], None]) -> None:
        self._out = out
        self._roots: OrderedDict[str, str] = OrderedDict()
        """correlation id → summary of its external event (bounded; oldest dropped first)."""

    def feed(self, line: str) -> None:
        """Read one JSON line of the trace; lines that are not trace records are ignored."""
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict) or "ts" not in record:
            return
        event = record.get("event")
        if event == "deliver" and record.get("sender") == "external":
            self._remember_root(record)
        elif event in _OUTCOMES:
            if record.get("sender") == "external":
                self._remember_root(record)
            self._out(self.render(_message(record)))

    def _remember_root(self, record: dict[str, object]) -> None:
        correlation = str(record.get("correlation_id") or record.get("id"))
        self._roots[correlation] = str(record.get("summary") or record.get("type") or "")
        self._roots.move_to_end(correlation)
        while len(self._roots) > _ROOTS_KEPT:
            self._roots.popitem(last=False)

    def render(self, message: Message) -> str:
        """``HH:MM:SS.mmm  actor  message  outcome  <= cause``."""
        when = message.at.strftime("%H:%M:%S.%f")[:-3]
        actor = _shorten(short_address(message.recipient), _ACTOR_WIDTH)
        line = (
            f"{when}  {actor:<{_ACTOR_WIDTH}}  "
            f"{_shorten(describe(message), _SUMMARY_WIDTH)}  [{_outcome(message)}]"
        )
        if message.external:
            return f"{line}  <= external event"
        return f"{line}  <= {self.cause(message.correlation_id)}"

    def cause(self, correlation_id: str) -> str:
        """The external event of a correlation: its id when the sender named it (the
        controller uses informer events' identities, ``Upserted Service default/web rv=5``),
        else the summary of the chain's first message."""
        if not correlation_id.isdigit():
            return correlation_id
        return self._roots.get(correlation_id, f"message {correlation_id}")


class TraceTee:
    """The ``write`` of a :class:`~interlock.mailbox.Tracer`: every line goes to the trace file
    and, unless quiet, to a :class:`LiveTrace`; :meth:`pump` does the slow part off the hot path."""

    def __init__(self, file: IO[str], *, live: LiveTrace | None) -> None:
        self._file = file
        self._live = live
        self._pending: deque[str] = deque()

    def write(self, line: str) -> None:
        self._file.write(line)
        if self._live is not None:
            self._pending.append(line)

    @property
    def pending(self) -> int:
        """Lines queued for printing and not printed yet."""
        return len(self._pending)

    def discard_pending(self) -> None:
        """Forget the lines queued for printing so far (they stay in the file)."""
        self._pending.clear()

    def mute(self) -> None:
        """Stop printing: from now on lines only go to the file."""
        self._live = None
        self._pending.clear()

    def drain(self) -> None:
        """Flush the file and print every line queued so far."""
        self._file.flush()
        pending = self._pending
        live = self._live
        while pending and live is not None:
            live.feed(pending.popleft())

    async def pump(self, *, interval: float = 0.2) -> None:
        """:meth:`drain` every ``interval`` seconds until cancelled (and once more then)."""
        try:
            while True:
                await asyncio.sleep(interval)
                self.drain()
        finally:
            self.drain()
