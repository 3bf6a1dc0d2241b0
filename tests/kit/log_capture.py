"""Log lines a test reads back: loguru's messages, captured for the length of a ``with``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from loguru import logger


@contextmanager
def captured_logs(level: str = "DEBUG") -> Iterator[list[str]]:
    """The messages logged at ``level`` or above while the block runs, in order."""
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level=level, format="{message}")
    try:
        yield lines
    finally:
        logger.remove(sink)
