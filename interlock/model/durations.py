"""Kubernetes-style duration strings (``30s``, ``1m``, ``1h30m``, ``500ms``).

ModuleSets write durations the way Kubernetes users already know them from Go's
``time.ParseDuration``: a sequence of decimal numbers, each with a unit. Parsing lives here, in
one place, so that validation (which reports a bad duration in the ModuleSet's status) and the
edge (which needs the number) can never disagree about what ``1h30m`` means.

Unlike Go, a sign is not accepted: every duration in a ModuleSet is a length of time, and a
negative one is always a mistake worth reporting.
"""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

# Go's units, in nanoseconds. "µs" and "μs" (micro sign and Greek mu) are both accepted by Go.
_UNIT_NANOS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}

_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class InvalidDuration(ValueError):
    """A duration string that is not of the form ``1h30m``; the message quotes the input."""


def parse_duration(text: str) -> timedelta:
    """The length of time ``text`` names, e.g. ``parse_duration("1m30s") == timedelta(seconds=90)``.

    ``"0"`` alone is accepted (as in Go); every other number needs a unit.
    """
    if text == "0":
        return timedelta(0)
    if not text:
        raise InvalidDuration('"" is not a duration; use e.g. "30s", "1m" or "1h30m"')
    nanos = Decimal(0)
    pos = 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:
            raise InvalidDuration(
                f'"{text}" is not a duration; use e.g. "30s", "500ms", "1m" or "1h30m"'
            )
        nanos += Decimal(match.group(1)) * _UNIT_NANOS[match.group(2)]
        pos = match.end()
    try:
        return timedelta(microseconds=float(nanos / 1000))
    except OverflowError:
        raise InvalidDuration(f'"{text}" is longer than any duration interlock can use') from None


def duration_seconds(text: str) -> float:
    """``parse_duration(text)`` in seconds, for code that works with float timeouts."""
    return parse_duration(text).total_seconds()
