"""Domain errors. Each carries the HTTP status it means; the service renders them once.

    TokenmillError
    ├── NotFound            404  a row that does not exist or belongs to another team
    ├── Unauthorized        401  no API key, or a wrong or revoked one
    ├── Conflict            409  the request contradicts the current state
    ├── InvalidInput        422  a field or a file a person must fix (names the field)
    │   └── InvalidCorpus   422  the uploaded file is not what its format says
    ├── TooLarge            413  the upload exceeds the configured limit
    └── Busy                503  a bounded resource is taken: try again after `retry_after` seconds
"""


class TokenmillError(Exception):
    status = 500
    title = "Internal error"

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field


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


class Busy(TokenmillError):
    """Every process of a bounded pool is taken (or this team's share is): try again later."""

    status = 503
    title = "Busy"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after
