"""Tracebacks for logs that cannot leak what the failing code was holding.

loguru's ``logger.exception`` renders, by default (``diagnose=True``), the value of every
variable in every frame of the traceback. A sink or callback that fails while holding a Secret
would print the Secret into the log. These helpers log a plain traceback (file, line, source
text) instead: enough to find the bug, nothing of the data.
"""

from __future__ import annotations

import traceback

from loguru import logger


def plain_traceback(error: BaseException) -> str:
    """The standard-library rendering of ``error``: frames and source lines, no variable values."""
    return "".join(traceback.format_exception(error)).rstrip()


def log_failure(message: str, *args: object, error: BaseException) -> None:
    """Log ``message`` (a loguru format string) at ERROR with ``error``'s plain traceback."""
    logger.error(message + "\n{}", *args, plain_traceback(error))
