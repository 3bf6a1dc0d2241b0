"""Counting and reporting dead letters without flooding the log.

A dead letter is usually harmless (a message to an actor that was just stopped) but a stream of
them means something is wrong (a full mailbox, a typo in an address). So every dead letter is
counted, the first one is logged at once, and the rest are summed into one line per interval.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

from loguru import logger


class DeadLetterLog:
    """Counts dead letters and logs at most one warning per ``interval`` seconds."""

    def __init__(self, *, clock: Callable[[], float], interval: float) -> None:
        self._clock = clock
        self._interval = interval
        self.total = 0
        self._unreported = 0
        self._last_report = -math.inf
        self._latest = ""
        self._pending: asyncio.TimerHandle | None = None

    def record(self, *, message_type: str, recipient: str, reason: str) -> None:
        self.total += 1
        self._unreported += 1
        self._latest = f"{message_type} to {recipient} ({reason})"
        if self._clock() - self._last_report >= self._interval:
            self.report()
        elif self._pending is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # reported with the next dead letter or at flush()
            self._pending = loop.call_later(self._interval, self.report)

    def report(self) -> None:
        """Log the dead letters not reported yet (if any)."""
        self._pending = None
        if not self._unreported:
            return
        self._last_report = self._clock()
        logger.warning(
            "{} dead letter(s) since the last report ({} in total); latest: {}",
            self._unreported,
            self.total,
            self._latest,
        )
        self._unreported = 0

    def flush(self) -> None:
        """Report what is held back now (at shutdown)."""
        if self._pending is not None:
            self._pending.cancel()
        self.report()
