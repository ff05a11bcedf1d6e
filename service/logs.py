"""The API's logs: JSON lines on stderr, each carrying the id of the request it was written in.

Every request gets an id (`service.middleware.Telemetry`): the caller's `X-Request-ID` when
it is sane, a new one otherwise. While the request runs the id sits in a context variable,
so every line logged meanwhile, by the service or by the core, carries it (`RequestIdFilter`),
and so does every problem+json body (`service.problems.problem`). Threads see it when they
run in a copy of the request's context (Starlette's thread pool does this).

Each request ends with one access line, logger `service.access`, carrying `method`, `route`
(the path template), `path`, `status`, `duration_ms` and, once the request authenticated,
`team`. Uvicorn's own access log says less and is silenced.

Deliberately not handled: log shipping and rotation (stderr is the container's log), and
`tokenmill worker`'s logs, which stay Celery's.
"""

import json
import logging
import re
import sys
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime

REQUEST_ID_HEADER = "X-Request-ID"
REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
# An incoming id is kept when it is 1 to 128 characters from this set (UUIDs, ULIDs, trace ids);
# anything else (too long, control characters, quotes, non-ASCII) is replaced, never echoed.
SANE_ID = re.compile(r"[A-Za-z0-9._:=+/-]{1,128}")
ACCESS_FIELDS = ("method", "route", "path", "status", "duration_ms", "team")

access_log = logging.getLogger("service.access")


def request_id(incoming: str | None) -> str:
    """The caller's request id when it is sane, otherwise a new one."""
    if incoming is not None and SANE_ID.fullmatch(incoming):
        return incoming
    return uuid.uuid4().hex


class RequestIdFilter(logging.Filter):
    """Gives every record the id of the request being served (`request_id`, None outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, request_id, an access line's fields, the error."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request is not None:
            line["request_id"] = request
        for name in ACCESS_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def install() -> None:
    """Send every logger of this process, uvicorn's included, to stderr as JSON lines; idempotent."""
    root = logging.getLogger()
    if any(isinstance(handler.formatter, JsonFormatter) for handler in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RequestIdFilter())
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    # Uvicorn configured its loggers with handlers of its own before it built the app: its
    # server lines go through ours instead, and its access line gives way to `access_log`.
    server = logging.getLogger("uvicorn")
    server.handlers.clear()
    server.propagate = True
    logging.getLogger("uvicorn.access").disabled = True
