"""Kubernetes timestamps and ages, formatted the way kubectl users expect.

The server writes ``creationTimestamp`` as RFC 3339 with second precision (``2024-05-01T10:00:00Z``)
and renders Table ``Age`` cells with apimachinery's ``HumanDuration`` rules (``45s``, ``3m12s``,
``5h``, ``12d``), so ``kubectl get`` output looks the same as against a real cluster.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta


def format_timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# apimachinery's steps: (unit, its length in the unit before, below how many of it the rest in
# the unit before is shown too, below how many it is shown alone); years have no upper bound.
_UNITS: tuple[tuple[str, int, int, float], ...] = (
    ("m", 60, 10, 180),
    ("h", 60, 8, 48),
    ("d", 24, 8, 365 * 2),
    ("y", 365, 8, math.inf),
)


def human_duration(delta: timedelta) -> str:
    """apimachinery's ``duration.HumanDuration``."""
    seconds = int(delta.total_seconds())
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    value, smaller = seconds, "s"
    for unit, size, with_rest, alone in _UNITS:
        whole, rest = divmod(value, size)
        if whole < with_rest:
            return f"{whole}{unit}" if rest == 0 else f"{whole}{unit}{rest}{smaller}"
        if whole < alone:
            return f"{whole}{unit}"
        value, smaller = whole, unit
    raise AssertionError("years have no upper bound")
