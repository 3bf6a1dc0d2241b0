"""Consecutive-failure accrual: ejection after N failures, growing penalties, reset on success."""

from __future__ import annotations

from datetime import timedelta

from interlock.dataplane.accrual import FailureAccrualTable
from interlock.model.policy_annotations import FailureAccrual

SETTINGS = FailureAccrual(
    max_failures=3,
    min_penalty=timedelta(seconds=1),
    max_penalty=timedelta(seconds=5),
    jitter_ratio=0.5,
)
A = ("10.0.0.1", 80)


def test_ejected_after_consecutive_failures_for_the_penalty() -> None:
    table = FailureAccrualTable(rng=lambda: 0.0)
    for _ in range(2):
        table.record(A, failed=True, settings=SETTINGS, now=0.0)
    assert table.available(A, now=0.0)
    table.record(A, failed=True, settings=SETTINGS, now=0.0)
    assert not table.available(A, now=0.0)
    assert not table.available(A, now=0.99)
    assert table.available(A, now=1.0)


def test_a_success_in_between_resets_the_count() -> None:
    table = FailureAccrualTable(rng=lambda: 0.0)
    for _ in range(2):
        table.record(A, failed=True, settings=SETTINGS, now=0.0)
    table.record(A, failed=False, settings=SETTINGS, now=0.0)
    table.record(A, failed=True, settings=SETTINGS, now=0.0)
    assert table.available(A, now=0.0)
    assert len(table) == 1


def test_failing_again_after_the_penalty_doubles_it_up_to_the_maximum() -> None:
    table = FailureAccrualTable(rng=lambda: 0.0)
    for _ in range(3):
        table.record(A, failed=True, settings=SETTINGS, now=0.0)
    now = 1.0
    penalties = []
    for _ in range(5):
        table.record(A, failed=True, settings=SETTINGS, now=now)  # one failure on probation
        start = now
        while not table.available(A, now=now):
            now += 0.5
        penalties.append(now - start)
    assert penalties == [2.0, 4.0, 5.0, 5.0, 5.0]
    table.record(A, failed=False, settings=SETTINGS, now=now)
    assert len(table) == 0


def test_jitter_lengthens_the_penalty_by_at_most_its_ratio() -> None:
    assert FailureAccrualTable(rng=lambda: 0.999).penalty(SETTINGS, 1) < 1.5
    assert FailureAccrualTable(rng=lambda: 0.5).penalty(SETTINGS, 1) == 1.25
    assert FailureAccrualTable(rng=lambda: 0.0).penalty(SETTINGS, 1) == 1.0
