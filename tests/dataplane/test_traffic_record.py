"""``Traffic.record`` counts each finished request once, under its labels: requests by status
class, the latency histogram (a tunnel's apart), connect errors, timeouts, retries and a
tunnel's bytes each way (``interlock.dataplane.metrics``)."""

from __future__ import annotations

import pytest

from interlock.dataplane.access_log import Exchange, Front
from interlock.dataplane.metrics import (
    DURATION_BUCKETS,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
    Traffic,
)


def _traffic_at(now: float) -> Traffic:
    return Traffic(clock=lambda: now)


def _exchange(started: float, *, route: str = "r", retries: int = 0) -> Exchange:
    exchange = Exchange("edge", "a.example", "GET", "/", started)
    exchange.target = "a.example"
    exchange.route = route
    exchange.retries = retries
    return exchange


def test_requests_are_counted_by_status_class_and_latency() -> None:
    now = [10.0]
    traffic = Traffic(clock=lambda: now[0])
    traffic.record(_exchange(9.998), status=200, sent=120, reason="")
    traffic.record(_exchange(9.0, retries=2), status=204, sent=80, reason="")
    traffic.record(_exchange(9.99, route=""), status=502, sent=0, reason=UPSTREAM_UNREACHABLE)
    traffic.record(_exchange(9.99), status=504, sent=0, reason=UPSTREAM_TIMEOUT)
    traffic.record(_exchange(9.99), status=99, sent=0, reason="")
    stats = traffic.statistics()
    labels = ("edge", "a.example")
    assert stats.requests == {
        ("edge", "a.example", "r", "2xx"): 2,
        ("edge", "a.example", "", "5xx"): 1,
        ("edge", "a.example", "r", "5xx"): 1,
        ("edge", "a.example", "r", "0xx"): 1,
    }
    histogram = stats.durations[labels]
    assert sum(histogram.buckets) == 5
    assert histogram.buckets[DURATION_BUCKETS.index(0.0025)] == 1  # 2 ms
    assert histogram.buckets[DURATION_BUCKETS.index(1.0)] == 1  # 1 s
    assert histogram.buckets[DURATION_BUCKETS.index(0.01)] == 3  # 10 ms
    assert round(histogram.total, 6) == round(0.002 + 1.0 + 3 * 0.01, 6)
    assert stats.connect_errors == {labels: 1}
    assert stats.timeouts == {labels: 1}
    assert stats.retries == {labels: 2}
    assert stats.tunnel_durations == {}
    assert stats.tunnel_bytes == {}


def test_a_tunnel_is_counted_apart_with_its_bytes_each_way() -> None:
    traffic = Traffic(clock=lambda: 20.0)
    exchange = _exchange(15.0)
    exchange.tunnel = True
    exchange.received = 300
    traffic.record(exchange, status=200, sent=700, reason="")
    stats = traffic.statistics()
    labels = ("edge", "a.example")
    assert stats.durations == {}
    assert stats.tunnel_durations[labels].buckets[DURATION_BUCKETS.index(5.0)] == 1
    assert stats.tunnel_bytes == {(*labels, "to_client"): 700, (*labels, "to_upstream"): 300}
    assert (exchange.duration, exchange.status, exchange.bytes) == (5.0, 200, 700)


def test_each_route_and_front_is_counted_apart_and_shares_its_targets_histogram() -> None:
    # The keys and histograms found once per (front, target, route) are the statistics' own:
    # routes of one target share its histogram, the fronts and targets do not, a tunnel of the
    # same labels is counted under the same request key but its own histogram, and every
    # status class (past 5xx and below 1xx: 0xx) goes under its own key.
    traffic = Traffic(clock=lambda: 1.0)
    counted: list[tuple[Front, str, str, int, bool]] = [
        ("edge", "a", "r1", 200, False),
        ("edge", "a", "r2", 404, False),
        ("edge", "a", "r1", 200, True),
        ("edge", "a", "r1", 200, False),
        ("mesh", "a", "r1", 503, False),
        ("edge", "b", "r1", 700, False),
        ("edge", "a", "r1", 101, False),
        ("edge", "a", "r1", 302, False),
    ]
    for front, target, route, status, tunnel in counted:
        exchange = Exchange(front, target, "GET", "/", 0.9995)
        exchange.target, exchange.route, exchange.tunnel = target, route, tunnel
        traffic.record(exchange, status=status, sent=0, reason="")
    stats = traffic.statistics()
    assert stats.requests == {
        ("edge", "a", "r1", "2xx"): 3,
        ("edge", "a", "r2", "4xx"): 1,
        ("mesh", "a", "r1", "5xx"): 1,
        ("edge", "b", "r1", "0xx"): 1,
        ("edge", "a", "r1", "1xx"): 1,
        ("edge", "a", "r1", "3xx"): 1,
    }
    first = DURATION_BUCKETS.index(0.001)
    assert {labels: h.buckets[first] for labels, h in stats.durations.items()} == {
        ("edge", "a"): 5,
        ("mesh", "a"): 1,
        ("edge", "b"): 1,
    }
    assert all(sum(h.buckets) == h.buckets[first] for h in stats.durations.values())
    assert stats.tunnel_durations[("edge", "a")].buckets[first] == 1


@pytest.mark.parametrize("bound", DURATION_BUCKETS)
def test_a_latency_on_a_bucket_bound_is_counted_in_that_bucket(bound: float) -> None:
    # Prometheus buckets are upper bounds, inclusive (``le``); past the last: +Inf.
    for duration, slot in [
        (bound, DURATION_BUCKETS.index(bound)),
        (bound * 1.01, DURATION_BUCKETS.index(bound) + 1),
    ]:
        traffic = _traffic_at(duration)
        traffic.record(_exchange(0.0), status=200, sent=0, reason="")
        buckets = traffic.statistics().durations[("edge", "a.example")].buckets
        assert buckets[slot] == 1 and sum(buckets) == 1


def test_requests_read_between_counts_are_current_and_counted_once() -> None:
    # Traffic counts a request where it found its labels, added to the statistics' requests
    # when they are read: read between counts, each request is there once.
    traffic = _traffic_at(10.0)
    stats = traffic.statistics()  # taken before anything was counted
    traffic.record(_exchange(9.99), status=200, sent=1, reason="")
    assert stats.requests == {("edge", "a.example", "r", "2xx"): 1}
    traffic.record(_exchange(9.99), status=201, sent=1, reason="")
    traffic.record(_exchange(9.99, route="other"), status=404, sent=1, reason="")
    assert stats.requests == {
        ("edge", "a.example", "r", "2xx"): 2,
        ("edge", "a.example", "other", "4xx"): 1,
    }
    assert stats.requests == {
        ("edge", "a.example", "r", "2xx"): 2,
        ("edge", "a.example", "other", "4xx"): 1,
    }
