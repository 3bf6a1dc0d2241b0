"""circuitBreaker: opens on errors over the window, answers 503 without the upstream, half-opens."""

from __future__ import annotations

import pytest

from interlock.edge.modules import ModuleChain, ModuleConfigError, compile_modules
from tests.kit.modules_testkit import Clock, modules, view


def chain(clock: Clock, **config: object) -> ModuleChain:
    settings = {
        "errorThresholdPercentage": 50,
        "volumeThreshold": 4,
        "rollingWindow": "10s",
        "trippedDuration": "30s",
        **config,
    }
    return compile_modules(modules({"circuitBreaker": settings}), {}, clock=clock)


def send(edge: ModuleChain, status: int | None) -> bool:
    """One request: True if it reached the upstream (whose answer is ``status``)."""
    if edge.check_request(view()) is not None:
        return False
    edge.record_upstream(status)
    return True


def state(edge: ModuleChain) -> object:
    """The circuit state /debug/edges shows."""
    return edge.summary()["modules"]["circuitBreaker"]["state"]  # type: ignore[index]


def trip(edge: ModuleChain) -> None:
    for status in (500, None, 200, 502):
        assert send(edge, status)


def test_stays_closed_below_the_volume_threshold() -> None:
    edge = chain(Clock())
    for _ in range(3):
        assert send(edge, 500)
    assert state(edge) == "closed"


def test_stays_closed_below_the_error_percentage() -> None:
    edge = chain(Clock())
    for status in (500, 200, 200, 200, 200, 503, 200, 200):
        assert send(edge, status)
    assert edge.check_request(view()) is None


def test_opens_and_answers_503_with_retry_after_without_the_upstream() -> None:
    clock = Clock()
    edge = chain(clock)
    trip(edge)
    rejection = edge.check_request(view())
    assert rejection is not None
    assert rejection.status == 503
    assert rejection.headers["Retry-After"] == "30"
    clock.advance(20)
    rejection = edge.check_request(view())
    assert rejection is not None
    assert rejection.headers["Retry-After"] == "10"
    assert state(edge) == "open"
    clock.advance(10)
    assert state(edge) == "half-open"


def test_half_open_lets_one_trial_through_and_success_closes() -> None:
    clock = Clock()
    edge = chain(clock)
    trip(edge)
    clock.advance(30)
    assert edge.check_request(view()) is None  # the trial
    assert edge.check_request(view()) is not None  # others wait for its outcome
    edge.record_upstream(200)
    for _ in range(5):
        assert send(edge, 200)


def test_half_open_trial_failure_reopens() -> None:
    clock = Clock()
    edge = chain(clock)
    trip(edge)
    clock.advance(31)
    assert send(edge, 504)
    rejection = edge.check_request(view())
    assert rejection is not None
    assert rejection.status == 503
    clock.advance(29)
    assert edge.check_request(view()) is not None
    clock.advance(1)
    assert send(edge, 200)
    assert send(edge, 200)


def test_a_trial_never_recorded_does_not_wedge_the_circuit() -> None:
    clock = Clock()
    edge = chain(clock)
    trip(edge)
    clock.advance(30)
    assert edge.check_request(view()) is None  # the trial's client went away
    clock.advance(30)
    assert send(edge, 200)
    assert send(edge, 200)


def test_errors_older_than_the_window_are_forgotten() -> None:
    clock = Clock()
    edge = chain(clock)
    for _ in range(3):
        assert send(edge, 500)
    clock.advance(11)
    assert send(edge, 500)  # only 1 in the window: below the volume threshold
    assert edge.check_request(view()) is None


def test_4xx_is_not_an_error() -> None:
    edge = chain(Clock())
    for _ in range(10):
        assert send(edge, 404)
    assert edge.check_request(view()) is None


@pytest.mark.parametrize(
    ("field", "value"), [("rollingWindow", "ten seconds"), ("trippedDuration", "0s")]
)
def test_bad_duration_is_a_config_error(field: str, value: str) -> None:
    with pytest.raises(ModuleConfigError) as caught:
        chain(Clock(), **{field: value})
    assert caught.value.field == f"circuitBreaker.{field}"


def test_a_zero_threshold_still_needs_an_error_to_open() -> None:
    edge = chain(Clock(), errorThresholdPercentage=0, volumeThreshold=2)
    for _ in range(5):
        assert send(edge, 200)
    assert send(edge, 500)
    assert edge.check_request(view()) is not None
