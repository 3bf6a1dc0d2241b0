"""The event loop the serving subcommands (``run``, ``edge``, ``demo``) run on: uvloop by default.

The edge proxies every request on one asyncio loop, and asyncio's own loop (selectors, Python
callbacks, Python transports) was about a sixth of the edge's time per request. uvloop — the
libuv-based loop that uvicorn uses — does the same work in C. It is an optional dependency:
where it is not installed (a platform without a wheel) the subcommands run on asyncio's loop as
before, and ``--no-uvloop`` (``INTERLOCK_NO_UVLOOP=true``) asks for asyncio's loop on purpose,
to rule the loop out when something behaves oddly. The test suite keeps pytest-asyncio's default
loop; the behaviour must not depend on which loop runs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from interlock.cli.env import EnvDefaults
from interlock.cli.malloc import pin_mmap_threshold

T = TypeVar("T")

NO_UVLOOP_FLAG = "--no-uvloop"


def add_loop_flag(add: EnvDefaults) -> None:
    """Register ``--no-uvloop`` on a serving subcommand's parser."""
    add.switch(NO_UVLOOP_FLAG, help="run on asyncio's own event loop instead of uvloop")


def loop_factory(*, uvloop: bool = True) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory when asked for and installed, else ``None`` (asyncio's loop)."""
    if not uvloop:
        return None
    try:
        import uvloop as _uvloop
    except ImportError:
        return None
    return _uvloop.new_event_loop


def run_on_loop(main: Coroutine[Any, Any, T], *, uvloop: bool = True) -> T:
    """``asyncio.run(main)`` on uvloop's loop when ``uvloop`` and it is installed, with glibc's
    mmap threshold pinned (:mod:`interlock.cli.malloc`: a long-running process's heap must not
    fill with holes)."""
    pin_mmap_threshold()
    with asyncio.Runner(loop_factory=loop_factory(uvloop=uvloop)) as runner:
        return runner.run(main)
