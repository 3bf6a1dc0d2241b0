"""circuitBreaker: stop sending requests to an upstream that is failing, and probe its recovery.

Closed: requests flow and their outcomes are counted over a rolling window (ten buckets, so the
memory is constant whatever the request rate). When the window holds at least
``volumeThreshold`` outcomes, at least one of them an error, and the error percentage reaches
``errorThresholdPercentage``, the circuit opens.

Open: requests are answered 503 (with ``Retry-After``) without contacting the upstream, for
``trippedDuration``. Then half-open: exactly one trial request goes through; its success closes
the circuit (with a fresh window), its failure opens it again for another ``trippedDuration``. A
trial whose outcome is never recorded (the client went away) does not wedge the circuit: after
``trippedDuration`` another trial is let through.

An error is a connection failure, a timeout or a 5xx answer.
"""

from __future__ import annotations

import math

from interlock.edge.modules.view import Rejection, reject
from interlock.model.module_settings import CircuitBreakerSettings

BUCKETS = 10


class CircuitBreaker:
    """The breaker's state machine; the only mutable part of a compiled chain besides rateLimit."""

    __slots__ = (
        "_bucket_span",
        "_buckets",
        "_config",
        "_opened_at",
        "_state",
        "_threshold",
        "_trial_started",
        "_tripped",
        "_volume",
        "_window",
    )

    def __init__(self, settings: CircuitBreakerSettings) -> None:
        config = self._config = settings.module
        self._window = settings.rolling_window
        self._tripped = settings.tripped_duration
        self._threshold = config.error_threshold_percentage
        self._volume = config.volume_threshold
        self._bucket_span = self._window / BUCKETS
        # bucket index (time // span) -> [requests, errors]; at most BUCKETS + 1 entries.
        self._buckets: dict[int, list[int]] = {}
        self._state = "closed"
        self._opened_at = 0.0
        self._trial_started: float | None = None

    def __repr__(self) -> str:
        return f"CircuitBreaker(state={self._state!r})"

    def state(self, *, now: float) -> str:
        """``closed``, ``open`` or ``half-open`` as of ``now``."""
        if self._state == "open" and now >= self._opened_at + self._tripped:
            return "half-open"
        return self._state

    def check(self, *, now: float) -> Rejection | None:
        if self._state == "closed":
            return None
        if self._state == "open":
            remaining = self._opened_at + self._tripped - now
            if remaining > 0:
                return _open_rejection(remaining)
            self._state = "half-open"
            self._trial_started = None
        if self._trial_started is not None and now - self._trial_started < self._tripped:
            return _open_rejection(self._trial_started + self._tripped - now)
        self._trial_started = now
        return None

    def record(self, status: int | None, *, now: float) -> None:
        failed = status is None or status >= 500
        if self._state == "half-open":
            if self._trial_started is None:
                return
            if failed:
                self._open(now)
            else:
                self._state = "closed"
                self._buckets.clear()
            self._trial_started = None
            return
        if self._state == "open":
            # A request admitted before the circuit opened; the decision is already made.
            return
        requests, errors = self._count(now, failed)
        if requests >= self._volume and errors > 0 and errors * 100 >= self._threshold * requests:
            self._open(now)

    def _open(self, now: float) -> None:
        self._state = "open"
        self._opened_at = now
        self._buckets.clear()

    def _count(self, now: float, failed: bool) -> tuple[int, int]:
        current = math.floor(now / self._bucket_span)
        oldest = current - BUCKETS + 1
        for index in [index for index in self._buckets if index < oldest]:
            del self._buckets[index]
        bucket = self._buckets.setdefault(current, [0, 0])
        bucket[0] += 1
        bucket[1] += int(failed)
        return (
            sum(counts[0] for counts in self._buckets.values()),
            sum(counts[1] for counts in self._buckets.values()),
        )

    def summary(self, *, now: float) -> dict[str, object]:
        return {
            "errorThresholdPercentage": self._threshold,
            "volumeThreshold": self._volume,
            "rollingWindow": self._config.rolling_window,
            "trippedDuration": self._config.tripped_duration,
            "state": self.state(now=now),
        }


def _open_rejection(remaining: float) -> Rejection:
    return reject(
        503,
        "service unavailable: circuit open\n",
        {"Retry-After": str(max(1, math.ceil(remaining)))},
    )
