"""Where interlock's log lines go and what they look like.

Every subcommand configures logging through :func:`configure_logging`, so the process writes one
kind of line to stderr whichever subcommand runs. ``diagnose=False`` matters: loguru would
otherwise print every local variable of a failing frame, which can hold Secret data.
"""

from __future__ import annotations

import sys


def configure_logging(level: str) -> None:
    """Log lines to stderr at ``level`` and above."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level=level, diagnose=False)
