"""Domain errors. Each carries the HTTP status it means; the service renders them once.

    TokenmillError
    ├── NotFound            404  a row that does not exist or belongs to another team
    ├── Unauthorized        401  no API key, or a wrong or revoked one
    ├── Conflict            409  the request contradicts the current state
    ├── InvalidInput        422  a field or a file a person must fix (names the field)
    │   └── InvalidCorpus   422  the uploaded file is not what its format says
    ├── TooLarge            413  the upload exceeds the configured limit
    ├── OverQuota           409  the team is at one of its quotas (names it, its limit and its use)
    │   └── RateLimited     429  the API key spent its token bucket: try again after `retry_after` seconds
    └── Busy                503  a bounded resource is taken: try again after `retry_after` seconds
        └── ShareBusy       429  the team's own share of it is taken (its other requests): its rate, not an outage

Each error says what its problem+json adds: `fields()` (beyond detail and field) and `headers()`.

Below them, the errors that never reach a person as they are: the core raises and catches them
between its own parts (a cancelled job, a transient fault, a sandbox's unanswered call, a
split past its time, a reference file not the pinned one).
"""


class TokenmillError(Exception):
    status = 500
    title = "Internal error"

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field

    def fields(self) -> dict[str, object]:
        """Members of the problem+json body beyond title, status, detail and field."""
        return {}

    def headers(self) -> dict[str, str]:
        """Response headers the answer carries (Retry-After where a wait helps)."""
        retry_after = getattr(self, "retry_after", None)
        return {} if retry_after is None else {"Retry-After": str(retry_after)}


class NotFound(TokenmillError):
    status = 404
    title = "Not found"


class Unauthorized(TokenmillError):
    status = 401
    title = "Unauthorized"


class Conflict(TokenmillError):
    status = 409
    title = "Conflict"


class InvalidInput(TokenmillError):
    status = 422
    title = "Invalid input"


class InvalidCorpus(InvalidInput):
    title = "Invalid corpus"


class TooLarge(TokenmillError):
    status = 413
    title = "Upload too large"


class OverQuota(TokenmillError):
    """The team is at one of its quotas (tokenmill.quotas): `quota` names it, with its limit and use.
    `retry_after` is set where waiting helps (running work that ends), None where it does not."""

    status = 409
    title = "Quota exceeded"

    def __init__(self, detail: str, *, quota: str, limit: int, used: int, retry_after: int | None = None) -> None:
        super().__init__(detail, field=None)
        self.quota, self.limit, self.used, self.retry_after = quota, limit, used, retry_after

    def fields(self) -> dict[str, object]:
        return {"quota": self.quota, "limit": self.limit, "used": self.used}


class RateLimited(OverQuota):
    """The key's token bucket is empty (IETF RateLimit headers: the policy, what is left, when it refills)."""

    status = 429
    title = "Too many requests"

    def __init__(self, detail: str, *, limit: int, used: int, retry_after: int, burst: int) -> None:
        super().__init__(detail, quota="requests_per_minute", limit=limit, used=used, retry_after=retry_after)
        self.burst = burst

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "RateLimit-Policy": f"{self.burst};w={max(1, 60 * self.burst // max(1, self.limit))}",
                "RateLimit": f"limit={self.burst}, remaining=0, reset={self.retry_after}"}


class Busy(TokenmillError):
    """Every process of a bounded pool is taken (or this team's share is): try again later."""

    status = 503
    title = "Busy"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class ShareBusy(Busy):
    """The team's own share of a bounded pool is taken by its other requests: a 429, like a rate."""

    status = 429
    title = "Too many requests"


# ---- internal: raised and caught inside the core ---------------------------------------------

class JobCancelled(Exception):
    """The row is no longer running in this attempt (cancelled, failed or taken over by the sweeper)."""


class TransientError(Exception):
    """A fault worth retrying (database or store unavailable); the job is queued again, due
    `retry_in` seconds from now."""

    def __init__(self, message: str, retry_in: float) -> None:
        super().__init__(message)
        self.retry_in = retry_in


class SandboxError(Exception):
    """Work sent to a sandbox process (tokenmill.sandboxed.sandbox) gave no answer."""


class TimedOut(SandboxError):
    """The work passed its wall-time limit; its process was killed."""


class OverMemory(SandboxError):
    """The work's process grew past the memory limit; it was killed."""


class Failed(SandboxError):
    """The work raised in its process (`kind` "error"), a Rust panic ended it ("panic"), or the
    process died ("died": a crash, or killed from outside)."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class SlowDocument(Exception):
    """A split ran past its time limit on a document: its number (from 0) among those counted."""

    def __init__(self, number: int) -> None:
        super().__init__(f"document {number + 1}")
        self.number = number


class ReferenceFileError(RuntimeError):
    """A reference rank file is missing or is not the pinned file."""

