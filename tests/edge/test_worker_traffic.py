"""Edge workers' counters: JSON there and back, summed series by series; the limits a worker
is started with are the controller's."""

from __future__ import annotations

import dataclasses

from interlock.cli import build_parser
from interlock.cli.edge_limits import edge_limit_args, edge_limits_from_args
from interlock.dataplane.limits import DEFAULT_LIMITS
from interlock.dataplane.metrics import Histogram, TrafficStatistics
from interlock.edge.worker_traffic import statistics_from_json, statistics_json, summed


def some_traffic(scale: int) -> TrafficStatistics:
    stats = TrafficStatistics()
    stats.requests[("edge", "a.example", "r", "2xx")] = 3 * scale
    stats.durations[("edge", "a.example")] = Histogram(
        buckets=[scale] + [0] * (len(Histogram().buckets) - 1), total=0.5 * scale
    )
    stats.connect_errors[("edge", "a.example")] = scale
    stats.tunnel_bytes[("edge", "a.example", "to_client")] = 100 * scale
    stats.open_connections[("edge", "websocket")] = scale
    return stats


def test_every_counter_goes_over_json_and_back() -> None:
    stats = some_traffic(2)
    assert statistics_from_json(statistics_json(stats)) == stats
    carried = set(statistics_json(TrafficStatistics()))
    # Each field but the requests Traffic counts and has not added yet (``_counting``), by the
    # name it is read by (``_requests`` is read as the ``requests`` property).
    fields = {f.name for f in dataclasses.fields(TrafficStatistics)} - {"_counting"}
    assert carried == {name.removeprefix("_") for name in fields}


def test_workers_counters_add_up_series_by_series() -> None:
    one, two = some_traffic(1), some_traffic(2)
    two.requests[("edge", "b.example", "r", "5xx")] = 1
    total = summed([one, two])
    assert total.requests == {
        ("edge", "a.example", "r", "2xx"): 9,
        ("edge", "b.example", "r", "5xx"): 1,
    }
    assert total.durations[("edge", "a.example")].buckets[0] == 3
    assert total.durations[("edge", "a.example")].total == 1.5
    assert total.open_connections[("edge", "websocket")] == 3
    assert one == some_traffic(1)  # the readings are not changed


def test_a_worker_is_started_with_the_controllers_limits() -> None:
    limits = dataclasses.replace(
        DEFAULT_LIMITS, upstream_connections=7, drain_timeout=2.5, underscores_in_headers=True
    )
    args = ["edge", "--admin-token-file", "unused", *edge_limit_args(limits)]
    assert edge_limits_from_args(build_parser().parse_args(args)) == limits
    assert edge_limit_args(DEFAULT_LIMITS) == []
