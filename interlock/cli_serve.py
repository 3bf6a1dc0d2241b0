"""Serving until the process is told to stop, shared by the subcommands that only serve.

``interlock edge`` and ``interlock apiserver`` run one serving coroutine; SIGINT (Ctrl-C) and
SIGTERM (``kubectl delete pod``) must both end it cleanly with exit status 0, not a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from typing import Any


async def serve_until_signalled(serving: Coroutine[Any, Any, None]) -> int:
    """Run ``serving`` until it returns or SIGINT/SIGTERM cancels it; the exit status is 0."""
    task = asyncio.create_task(serving)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, task.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return 0
