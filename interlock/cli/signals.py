"""Stopping on SIGINT and SIGTERM, the same way in every subcommand.

SIGINT (Ctrl-C) and SIGTERM (``kubectl delete pod``) must end a subcommand cleanly with exit
status 0 and one line saying why, not a traceback — and at any moment: while Python is still
importing, while the work is starting (retrying discovery against an API server that does not
answer, say), while it serves, and while it stops. So:

- :func:`early_handlers` wraps ``main``: until an event loop takes over, a
  signal ends the process at once (there is nothing to release yet);
- :func:`serve_until_signalled` installs the loop's handlers *before* the work begins, and a
  signal cancels the work wherever it is, so the work's own ``finally`` blocks release what it
  holds (drain actors, release the Lease). A second signal cancels that clean-up too: a person
  pressing Ctrl-C twice wants the process gone.

A handler that only set a flag awaited after start-up would leave the process deaf until
start-up ended — a minute, against an API server that cannot be reached.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any, NoReturn

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_line(signum: signal.Signals, *, doing: str = "stopping") -> str:
    """The one line printed when a signal stops the process: ``received SIGTERM: stopping``."""
    return f"received {signum.name}: {doing}"


def _say(line: str) -> None:
    print(line, flush=True)


_announce: Callable[[str], None] = _say
"""Prints the stop line; a subcommand that knows its log format sets it (:func:`announce_with`)."""


def announce_with(announce: Callable[[str], None]) -> None:
    """Print the stop lines of this process with ``announce`` (``--log-format json``: one JSON
    object a line, ``interlock.cli.announce``) — those printed by the handlers that act without
    an event loop too."""
    global _announce
    _announce = announce


def _exit_at_once(signum: int, _frame: FrameType | None) -> None:
    _announce(stop_line(signal.Signals(signum)))
    raise SystemExit(0)


@contextlib.contextmanager
def early_handlers() -> Iterator[None]:
    """Inside, until an event loop installs its own, SIGINT and SIGTERM exit 0 with one line;
    the previous handlers come back on the way out (``main`` also runs inside test processes)."""
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, _exit_at_once)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _exit_without_teardown(signum: int, _frame: FrameType | None) -> None:
    _announce(stop_line(signal.Signals(signum), doing="stopping now, without waiting for clean-up"))
    exit_now(0)


def exit_now(code: int) -> NoReturn:
    """Flush what was printed and end the process with ``code`` without interpreter teardown."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


async def serve_until_signalled(
    serving: Coroutine[Any, Any, int | None],
    *,
    doing: str = "stopping",
    announce: Callable[[str], None] | None = None,
) -> int:
    """Run ``serving`` until it returns (its status, or 0) or SIGINT/SIGTERM cancels it (0).

    ``announce`` receives the one-line reason (``received SIGTERM: stopping``, with ``doing``
    saying what stopping involves) the moment the first signal arrives; by default what
    :func:`announce_with` set.
    """
    say = announce if announce is not None else _announce
    task = asyncio.create_task(serving)
    loop = asyncio.get_running_loop()
    received: list[signal.Signals] = []

    def stop(signum: signal.Signals) -> None:
        first = not received
        received.append(signum)
        task.cancel()
        # Stop even when the line cannot be printed: stdout may be a pipe whose reader is gone
        # (an edge worker whose controller was killed).
        with contextlib.suppress(OSError):
            if first:
                say(stop_line(signum, doing=doing))
            else:
                say(stop_line(signum, doing="stopping now, without waiting for clean-up"))

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        return await task or 0
    except asyncio.CancelledError:
        if not received:
            raise
        return 0
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
            # What is left (the loop closing) holds nothing worth waiting for. Not SystemExit:
            # raised into the runner's close, it would close the loop while the thread shutting
            # down the default executor still calls into it (a traceback from that thread).
            signal.signal(signum, _exit_without_teardown)
