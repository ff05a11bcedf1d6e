"""The request rate of the expensive endpoints, per API key: a token bucket.

Each key has a bucket `TOKENMILL_RATE_BURST` deep that refills at its team's
`requests_per_minute` (tokenmill.quotas). An expensive request (encode, BPE steps, the cost
report, an upload, a job submission) takes one token; an empty bucket answers 429 with
`Retry-After` and the IETF `RateLimit`/`RateLimit-Policy` headers. A team's dashboard sessions
share one bucket of their own (`team:<id>`).

The buckets live in the API process: an operator who runs several API processes behind one
address divides the figure by their number (docs/operations.md, "Fair share").
"""

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from tokenmill.errors import RateLimited

MAX_KEYS = 100_000  # buckets kept; the least recently used is forgotten (it was full anyway, or nearly)


class TokenBuckets:
    def __init__(self, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.burst, self.clock = burst, clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, when)
        self._lock = threading.Lock()

    def take(self, key: str, per_minute: int, cost: int = 1) -> None:
        """Spend `cost` tokens of `key`'s bucket, or raise RateLimited saying when they will be there."""
        rate = per_minute / 60.0
        with self._lock:
            now = self.clock()
            tokens, when = self._buckets.pop(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - when) * rate)
            if tokens < cost:
                self._buckets[key] = (tokens, now)
                wait = math.inf if rate <= 0 else (cost - tokens) / rate
                raise RateLimited(
                    f"quota requests_per_minute: this API key may send {per_minute} expensive requests a minute "
                    f"(bursts of {self.burst}); try again in {max(1, math.ceil(min(wait, 3600)))} s",
                    limit=per_minute, used=self.burst, retry_after=max(1, math.ceil(min(wait, 3600))), burst=self.burst)
            self._buckets[key] = (tokens - cost, now)
            while len(self._buckets) > MAX_KEYS:
                self._buckets.popitem(last=False)
