"""rateLimit: a burst of ``requests`` per client, then 429 with Retry-After until tokens refill."""

from __future__ import annotations

import pytest

from interlock.edge.modules import ModuleChain, ModuleConfigError, compile_modules
from interlock.edge.modules.rate_limit import RateLimit
from interlock.model.module_settings import RateLimitSettings
from interlock.model.moduleset import RateLimitModule
from tests.kit.modules_testkit import Clock, modules, view


def chain(clock: Clock, requests: int = 3, period: str = "1m") -> ModuleChain:
    return compile_modules(
        modules({"rateLimit": {"requests": requests, "period": period}}), {}, clock=clock
    )


def test_burst_then_429_with_retry_after() -> None:
    edge = chain(Clock())
    for _ in range(3):
        assert edge.check_request(view()) is None
    rejection = edge.check_request(view())
    assert rejection is not None
    assert rejection.status == 429
    # 3 per minute: one token every 20 seconds.
    assert rejection.headers["Retry-After"] == "20"


def test_tokens_come_back_over_time() -> None:
    clock = Clock()
    edge = chain(clock)
    for _ in range(3):
        assert edge.check_request(view()) is None
    clock.advance(15)
    rejection = edge.check_request(view())
    assert rejection is not None
    assert rejection.headers["Retry-After"] == "5"
    clock.advance(5)
    assert edge.check_request(view()) is None
    assert edge.check_request(view()) is not None


def test_clients_are_limited_separately() -> None:
    edge = chain(Clock(), requests=1)
    assert edge.check_request(view(peer_ip="10.0.0.1")) is None
    assert edge.check_request(view(peer_ip="10.0.0.1")) is not None
    assert edge.check_request(view(peer_ip="10.0.0.2")) is None


def test_the_client_is_the_one_named_by_a_trusted_proxy() -> None:
    edge = compile_modules(
        modules({"rateLimit": {"requests": 1, "period": "1m"}}),
        {},
        trusted_proxies=["192.0.2.1"],
        clock=Clock(),
    )
    first = view(peer_ip="192.0.2.1", headers={"X-Forwarded-For": "198.51.100.1"})
    second = view(peer_ip="192.0.2.1", headers={"X-Forwarded-For": "198.51.100.2"})
    assert edge.check_request(first) is None
    assert edge.check_request(second) is None
    assert edge.check_request(first) is not None


def test_idle_clients_are_evicted() -> None:
    clock = Clock()
    limiter = RateLimit(RateLimitSettings(RateLimitModule(requests=5, period="10s"), 10.0))
    for index in range(100):
        assert limiter.check(f"10.0.0.{index}", now=clock()) is None
    assert limiter.tracked_clients() == 100
    clock.advance(10)
    assert limiter.check("10.0.1.1", now=clock()) is None
    assert limiter.tracked_clients() == 1


def test_client_count_is_bounded() -> None:
    limiter = RateLimit(
        RateLimitSettings(RateLimitModule(requests=1, period="1h"), 3600.0), max_clients=10
    )
    for index in range(50):
        limiter.check(f"client-{index}", now=0.0)
    assert limiter.tracked_clients() == 10
    # The most recent clients are the ones still limited.
    assert limiter.check("client-49", now=0.0) is not None


def test_bad_period_is_a_config_error() -> None:
    with pytest.raises(ModuleConfigError) as caught:
        chain(Clock(), period="soon")
    assert caught.value.field == "rateLimit.period"
    assert '"soon"' in str(caught.value)
