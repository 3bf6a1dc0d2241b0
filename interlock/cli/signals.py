"""Stopping on SIGINT and SIGTERM, the same way in every subcommand.

SIGINT (Ctrl-C) and SIGTERM (``kubectl delete pod``) must end a subcommand cleanly with exit
status 0 and a line saying why, not a traceback — and at any moment, also while the work is still
starting (retrying discovery against an API server that does not answer, say). So the handlers
are installed before the work begins and cancel it wherever it is; the work's own ``finally``
blocks then release what it holds. A handler that only set a flag awaited after start-up would
leave the process deaf until start-up ended.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Coroutine
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def serve_until_signalled(
    serving: Coroutine[Any, Any, object],
    *,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Run ``serving`` until it returns or SIGINT/SIGTERM cancels it; the exit status is 0.

    ``announce`` receives the one-line reason (``received SIGTERM``) the moment a signal arrives.
    """
    task = asyncio.create_task(serving)
    loop = asyncio.get_running_loop()
    received: list[signal.Signals] = []

    def stop(signum: signal.Signals) -> None:
        if not received and announce is not None:
            announce(f"received {signum.name}")
        received.append(signum)
        task.cancel()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    try:
        await task
    except asyncio.CancelledError:
        if not received:
            raise
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
    return 0
