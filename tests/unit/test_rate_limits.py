"""The token bucket of the expensive endpoints (service/rate_limits.py), on a clock the test moves."""

import pytest

from service.rate_limits import TokenBuckets
from tokenmill.errors import RateLimited


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate():
    clock = Clock()
    buckets = TokenBuckets(burst=3, clock=clock)
    for _ in range(3):
        buckets.take("k", per_minute=60)
    with pytest.raises(RateLimited) as refused:
        buckets.take("k", per_minute=60)
    assert refused.value.retry_after == 1 and refused.value.status == 429
    clock.now += 1.0  # one token a second at 60 a minute
    buckets.take("k", per_minute=60)
    with pytest.raises(RateLimited):
        buckets.take("k", per_minute=60)


def test_keys_do_not_share_a_bucket():
    buckets = TokenBuckets(burst=1, clock=Clock())
    buckets.take("a", per_minute=1)
    buckets.take("b", per_minute=1)
    with pytest.raises(RateLimited):
        buckets.take("a", per_minute=1)


def test_a_bucket_never_fills_past_its_depth():
    clock = Clock()
    buckets = TokenBuckets(burst=2, clock=clock)
    buckets.take("k", per_minute=600)
    clock.now += 3600
    buckets.take("k", per_minute=600)
    buckets.take("k", per_minute=600)
    with pytest.raises(RateLimited):
        buckets.take("k", per_minute=600)


def test_a_zero_rate_refuses_after_the_burst_for_an_hour_at_most():
    buckets = TokenBuckets(burst=1, clock=Clock())
    buckets.take("k", per_minute=0)
    with pytest.raises(RateLimited) as refused:
        buckets.take("k", per_minute=0)
    assert refused.value.retry_after == 3600
