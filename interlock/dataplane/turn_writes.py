"""Writes held until the event loop's turn ends: one wake of each reader for all of a turn's.

A write goes to the kernel at once, and a send to a socket whose reader sleeps wakes it: on
another CPU that is an inter-processor interrupt, which costs the sender microseconds (on a VM,
an exit to the hypervisor). A busy proxy answers in turns: the loop hands it every event that is
ready, it answers each, then it waits again. Written at once, each answer wakes its reader, which
reads it and sleeps again before the next comes; in the edge's benchmark that was two wakes a
request (the backend's and the client's: docs/benchmarks.md, "Writes held until the turn ends").
Held until the turn's callbacks are done and written then, they wake each reader once for the
whole turn — what Netty's ``FlushConsolidationHandler`` does.

Holding pays only when a turn writes to more than one connection; alone, a held write costs a
callback of the loop more. So it adapts: writes go at once, but one turn in
:data:`SAMPLE_EVERY` writes is held to see; while held turns write to several connections, the
loop keeps holding, and after :data:`QUIET_TURNS` turns in a row that wrote to one connection
only, writes go at once again.

A connection's bytes are never reordered: every write of a connection goes through its
:class:`HeldWrites` (a write that would hold more than :data:`HELD_MOST` bytes goes at once, with
what was held), and whatever closes or hands over its transport calls :meth:`HeldWrites.flush`
first. What is held waits no longer than the rest of the turn: it is written with the callbacks
the turn scheduled, before the loop waits for events again.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Protocol

SAMPLE_EVERY = 32
"""While writes go at once, the turn of every this many-th write is held, to see how many
connections a turn writes to."""
QUIET_TURNS = 4
"""Held turns in a row that wrote to one connection only, after which writes go at once again."""
HELD_MOST = 64 * 1024
"""Bytes a connection holds for the turn's end; a write that would hold more goes at once with
what was held (a body streaming in large chunks keeps its back-pressure: the transport's buffer,
not this one, says when to wait)."""


class _Writes(Protocol):
    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool: ...


class TurnWrites:
    """One event loop's connections that hold writes for the end of its turn (:func:`turn_of`)."""

    __slots__ = ("__weakref__", "_loop", "held", "holding", "quiet", "until_sample")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.held: list[HeldWrites] = []
        """The connections holding bytes this turn."""
        self.holding = False
        """Whether writes are held (else they go at once, but one turn in
        :data:`SAMPLE_EVERY` writes)."""
        self.until_sample = SAMPLE_EVERY
        """Writes until the next turn held to see (while :attr:`holding` is off)."""
        self.quiet = 0
        """Held turns in a row that wrote to one connection only."""

    def hold(self, writes: HeldWrites) -> None:
        """``writes`` holds bytes: they are written once this turn's callbacks are done."""
        held = self.held
        if not held:
            self._loop.call_soon(self._write_all)
        held.append(writes)

    def _write_all(self) -> None:
        held, self.held = self.held, []
        if len(held) > 1:
            self.quiet = 0
        else:
            self.quiet += 1
            if self.quiet >= QUIET_TURNS:
                self.holding, self.quiet, self.until_sample = False, 0, SAMPLE_EVERY
        for writes in held:
            writes.flush()


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TurnWrites] = (
    weakref.WeakKeyDictionary()
)


def turn_of(loop: asyncio.AbstractEventLoop) -> TurnWrites:
    """The :class:`TurnWrites` of ``loop`` (one per loop, made on first use)."""
    turn = _turns.get(loop)
    if turn is None:
        turn = _turns[loop] = TurnWrites(loop)
    return turn


def _dropped(data: bytes) -> None:
    """Where :class:`HeldWrites` writes while it has no transport: nowhere (never called:
    :func:`_closed` says so first)."""


def _closed() -> bool:
    """A missing transport's ``is_closing``."""
    return True


class HeldWrites:
    """One connection's writes, held for the end of the loop's turn (see the module docstring)."""

    __slots__ = ("_held", "_send", "_transport", "_turn", "closing")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._turn = turn_of(loop)
        self._held: bytes | None = None
        self._transport: _Writes | None = None
        self._send: Callable[[bytes], None] = _dropped
        self.closing: Callable[[], bool] = _closed
        """The transport's ``is_closing`` (and :attr:`_send` its ``write``), bound once
        (:attr:`transport`): each called per write, where a method of a value typed by a
        Protocol is looked up on its type on every call (compiled: a generic method call)."""

    @property
    def transport(self) -> _Writes | None:
        """Where the bytes go (set once the connection is made)."""
        return self._transport

    @transport.setter
    def transport(self, transport: _Writes | None) -> None:
        self._transport = transport
        if transport is None:
            self._send, self.closing = _dropped, _closed
        else:
            self._send, self.closing = transport.write, transport.is_closing

    def write(self, data: bytes) -> None:
        """``data``, after what is held: now, or at the turn's end (the module docstring)."""
        held = self._held
        if held is not None:
            held += data
            self._held = held
            if len(held) > HELD_MOST:
                self.flush()
            return
        turn = self._turn
        if not turn.holding:
            turn.until_sample -= 1
            if turn.until_sample > 0:  # _write, inlined (the usual path: a call fewer)
                if not self.closing():
                    self._send(data)
                return
            turn.holding = True  # this turn is held, to see what it writes
        if len(data) > HELD_MOST:
            self._write(data)
            return
        self._held = data
        turn.hold(self)

    def write_open(self, data: bytes) -> None:
        """:meth:`write`, for a caller that found the transport open (``is_closing``) in this
        same call: when it goes at once, the transport is not asked again (a Python method
        call, ~180 instructions compiled)."""
        turn = self._turn
        if self._held is None and not turn.holding and turn.until_sample > 1:
            turn.until_sample -= 1  # what write() counts (this write is not the sampled one)
            self._send(data)
            return
        self.write(data)

    def flush(self) -> None:
        """Write what is held now (before the transport closes or changes hands)."""
        held = self._held
        if held is not None:
            self._held = None
            self._write(held)

    def _write(self, data: bytes) -> None:
        if not self.closing():
            self._send(data)
