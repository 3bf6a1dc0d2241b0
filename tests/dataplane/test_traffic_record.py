"""``Traffic.record`` counts each finished request once, under its labels: requests by status
class, the latency histogram (a tunnel's apart), connect errors, timeouts, retries and a
tunnel's bytes each way (``interlock.dataplane.metrics``)."""

from __future__ import annotations

from interlock.dataplane.access_log import Exchange
from interlock.dataplane.metrics import (
    DURATION_BUCKETS,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
    Traffic,
)


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
