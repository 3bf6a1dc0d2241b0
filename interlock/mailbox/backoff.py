"""Exponential backoff with jitter, as a pure policy plus injected randomness.

Supervisor restarts, informer reconnects and edge retries all back off the same way; one policy
keeps them consistent and lets tests pass a seeded ``random.Random`` instead of sleeping.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    """``initial * multiplier**attempt`` capped at ``maximum``, then jittered upwards."""

    initial: float
    """Delay before the first retry, in seconds."""
    maximum: float
    """Upper bound of the un-jittered delay, in seconds."""
    multiplier: float = 2.0
    """Growth factor between attempts."""
    jitter: float = 0.5
    """Fraction of the delay added at random: the delay is in ``[d, d * (1 + jitter)]``."""

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The delay before retry number ``attempt`` (0-based)."""
        base = min(self.maximum, self.initial * self.multiplier ** max(0, attempt))
        return base + base * self.jitter * rng.random()
