"""A data-plane worker's request counters over its admin API, and their sum: one ``/metrics``.

With ``--edge-workers N`` every worker process counts its own requests
(:class:`~interlock.dataplane.metrics.TrafficStatistics`); the controller reads each worker's
``GET /v1/worker`` and ``/metrics`` shows the sum, with the same series a single data plane
has. JSON keeps each counter's labels as a list beside its value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from interlock.dataplane.metrics import DURATION_BUCKETS, Histogram, TrafficStatistics

_COUNTERS = (
    "requests",
    "connect_errors",
    "timeouts",
    "retries",
    "tunnel_bytes",
    "open_connections",
)
_HISTOGRAMS = ("durations", "tunnel_durations")


def statistics_json(stats: TrafficStatistics) -> dict[str, Any]:
    """``stats`` as JSON: each counter a list of ``[labels, value]``, each histogram a list of
    ``[labels, buckets, total]``."""
    data: dict[str, Any] = {}
    for name in _COUNTERS:
        counter: Mapping[tuple[str, ...], int] = getattr(stats, name)
        data[name] = [[list(labels), value] for labels, value in counter.items()]
    for name in _HISTOGRAMS:
        histograms: Mapping[tuple[str, ...], Histogram] = getattr(stats, name)
        data[name] = [[list(labels), list(h.buckets), h.total] for labels, h in histograms.items()]
    return data


def statistics_from_json(data: Mapping[str, Any]) -> TrafficStatistics:
    """The counters :func:`statistics_json` wrote; raises ValueError on another shape."""
    stats = TrafficStatistics()
    try:
        for name in _COUNTERS:
            counter: dict[tuple[str, ...], int] = getattr(stats, name)
            for labels, value in data.get(name, []):
                counter[tuple(str(label) for label in labels)] = int(value)
        for name in _HISTOGRAMS:
            histograms: dict[tuple[str, ...], Histogram] = getattr(stats, name)
            for labels, buckets, total in data.get(name, []):
                if len(buckets) != len(DURATION_BUCKETS) + 1:
                    raise ValueError(f"{name}: {len(buckets)} buckets")
                histograms[tuple(str(label) for label in labels)] = Histogram(
                    buckets=[int(b) for b in buckets], total=float(total)
                )
    except (TypeError, AttributeError) as exc:
        raise ValueError(f"worker traffic: unreadable ({exc})") from None
    return stats


def summed(all_stats: Iterable[TrafficStatistics]) -> TrafficStatistics:
    """One set of counters adding up every worker's, series by series."""
    total = TrafficStatistics()
    for stats in all_stats:
        for name in _COUNTERS:
            into: dict[tuple[str, ...], int] = getattr(total, name)
            for labels, value in getattr(stats, name).items():
                into[labels] = into.get(labels, 0) + value
        for name in _HISTOGRAMS:
            hists: dict[tuple[str, ...], Histogram] = getattr(total, name)
            for labels, histogram in getattr(stats, name).items():
                mine = hists.get(labels)
                if mine is None:
                    mine = hists[labels] = Histogram()
                mine.buckets = [a + b for a, b in zip(mine.buckets, histogram.buckets, strict=True)]
                mine.total += histogram.total
    return total
