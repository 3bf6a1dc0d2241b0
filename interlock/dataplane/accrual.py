"""Consecutive-failure accrual per endpoint (Linkerd's ``failure-accrual: consecutive``).

An endpoint that keeps failing — a pod that is up but broken — would otherwise keep receiving
its share of every request until its readiness probe notices, if it ever does. With failure
accrual on a Service (``balancer.linkerd.io/failure-accrual: consecutive``, ``failureAccrual``
in the policy), after ``maxFailures`` failures in a row an endpoint is taken out of balancing
for a penalty: ``minPenalty`` the first time, doubled each time it fails again right after
coming back, at most ``maxPenalty``, each lengthened by a random share of up to
``jitterRatio`` of itself so that endpoints ejected together do not come back together. After
the penalty one failure ejects it again (with the next penalty); one success clears its record.

A failure is what the client would see as the upstream's fault: a connection that fails, an
attempt that times out, or a 5xx status. The clock and the random numbers are injected
(``now`` arguments, ``rng``) so the behaviour is tested without waiting.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from interlock.model.policy_annotations import FailureAccrual


@dataclass(slots=True)
class _Record:
    failures: int = 0
    ejections: int = 0
    until: float = 0.0


class FailureAccrualTable:
    """The failure records of the endpoints of every Service port that has accrual on.

    Only endpoints that failed have a record, so the table stays small; a success removes it.
    """

    def __init__(self, *, rng: Callable[[], float] | None = None) -> None:
        self._rng = rng or random.random
        self._records: dict[Hashable, _Record] = {}

    def available(self, endpoint: Hashable, *, now: float) -> bool:
        """Whether ``endpoint`` may take requests (it is not serving a penalty)."""
        record = self._records.get(endpoint)
        return record is None or record.until <= now

    def record(
        self, endpoint: Hashable, *, failed: bool, settings: FailureAccrual, now: float
    ) -> None:
        """Count one outcome of a request sent to ``endpoint``."""
        if not failed:
            self._records.pop(endpoint, None)
            return
        record = self._records.setdefault(endpoint, _Record())
        record.failures += 1
        probation = record.ejections > 0 and record.until <= now
        if record.failures >= settings.max_failures or probation:
            record.ejections += 1
            record.failures = 0
            record.until = now + self.penalty(settings, record.ejections)

    def penalty(self, settings: FailureAccrual, ejections: int) -> float:
        """Seconds out of balancing for the ``ejections``-th ejection in a row."""
        low = settings.min_penalty.total_seconds()
        high = settings.max_penalty.total_seconds()
        base = min(low * 2 ** min(ejections - 1, 62), high)
        return float(base * (1.0 + settings.jitter_ratio * self._rng()))

    def __len__(self) -> int:
        return len(self._records)
