"""rateLimit: ``requests`` per ``period`` per client address, as a token bucket.

Each client address has a bucket holding up to ``requests`` tokens, refilled continuously at
``requests / period`` per second; a request takes one token or is refused with 429 and a
``Retry-After`` of the whole seconds until a token is back. A bucket allows a burst of
``requests`` and then a steady rate, which is what "100 per minute" means to most users, without
the double burst a fixed window allows at its boundary.

Memory is bounded: a bucket untouched for a whole ``period`` is full again, i.e. the same as no
bucket, so it is dropped; and at most ``max_clients`` buckets are kept (the least recently seen is
dropped first, which only ever makes the limit more lenient for that client, never stricter).
"""

from __future__ import annotations

import math
from collections import OrderedDict

from interlock.edge.modules.view import Rejection, reject
from interlock.model.module_settings import RateLimitSettings

DEFAULT_MAX_CLIENTS = 100_000


class RateLimit:
    """Per-client token buckets; the only mutable state is the buckets themselves."""

    __slots__ = ("_buckets", "_capacity", "_max_clients", "_period", "_period_text", "_rate")

    def __init__(
        self, settings: RateLimitSettings, *, max_clients: int = DEFAULT_MAX_CLIENTS
    ) -> None:
        self._period = settings.period
        self._period_text = settings.module.period
        self._capacity = float(settings.module.requests)
        self._rate = settings.module.requests / self._period
        self._max_clients = max_clients
        # client -> (tokens, last update); ordered by last update, oldest first.
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def __repr__(self) -> str:
        return f"RateLimit({self.summary()})"

    def check(self, client: str, *, now: float) -> Rejection | None:
        self._evict_idle(now)
        tokens, last = self._buckets.pop(client, (self._capacity, now))
        tokens = min(self._capacity, tokens + max(0.0, now - last) * self._rate)
        if tokens >= 1.0:
            self._store(client, tokens - 1.0, now)
            return None
        self._store(client, tokens, now)
        retry_after = max(1, math.ceil((1.0 - tokens) / self._rate))
        return reject(429, "too many requests\n", {"Retry-After": str(retry_after)})

    def _store(self, client: str, tokens: float, now: float) -> None:
        while len(self._buckets) >= self._max_clients:
            self._buckets.popitem(last=False)
        self._buckets[client] = (tokens, now)

    def _evict_idle(self, now: float) -> None:
        while self._buckets:
            _, (_, last) = next(iter(self._buckets.items()))
            if now - last < self._period:
                return
            self._buckets.popitem(last=False)

    def tracked_clients(self) -> int:
        return len(self._buckets)

    def summary(self) -> dict[str, object]:
        return {
            "requests": int(self._capacity),
            "period": self._period_text,
            "algorithm": "token bucket per client address",
            "trackedClients": len(self._buckets),
        }
