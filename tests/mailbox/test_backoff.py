import random

from hypothesis import given
from hypothesis import strategies as st

from interlock.mailbox.backoff import BackoffPolicy


def test_delays_grow_then_cap():
    policy = BackoffPolicy(initial=0.8, maximum=30.0, jitter=0.0)
    rng = random.Random(1)
    assert [policy.delay(n, rng) for n in range(7)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]


@given(st.integers(min_value=0, max_value=100), st.integers())
def test_jitter_stays_within_bounds(attempt, seed):
    policy = BackoffPolicy(initial=0.01, maximum=10.0, jitter=0.5)
    base = min(10.0, 0.01 * 2**attempt)
    assert base <= policy.delay(attempt, random.Random(seed)) <= base * 1.5
