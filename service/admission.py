"""Admission: at most `slots` requests of an API process inside the app at once, the others waiting
in the event loop, where a waiting request costs a few kilobytes and no thread, connection or lock.

Why: a route runs on one of anyio's 40 threads and holds one of the pool's database connections,
and FastAPI closes a request's session on a thread of its own after the route. With more requests
in flight than threads or connections (150 clients of one team were enough), routes held every
thread waiting for a connection that only a session's close, itself waiting for a thread, would
give back: every request of every team stalled for the pool's timeout and ended 503. Bounded below
both, no request waits for a thread or a connection inside the app; and fewer threads contend for
the GIL, so a process answers more requests a second, not fewer.

Turns are fair: a slot that frees goes to the next caller in rotation (an API key, a dashboard
session, or else the client's address), so a team that sends a thousand requests at once waits
behind its own, and another team's request waits for one slot, not for the thousand. A caller may
have `waiting_per_caller` requests waiting; past that, or after `wait_seconds`, the answer is a
503 Busy with Retry-After, as when the database pool is exhausted (service.problems.pool_busy).

Uploads and downloads stream for as long as the client takes and hold no connection meanwhile:
they are not admitted here (uploads compute in turns of their own, service/uploads.py), nor are
/healthz, /metrics and the static files.
"""

import asyncio
import time
from collections import deque
from collections.abc import Iterable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from service.problems import problem
from service.web.auth import SESSION_COOKIE

UNADMITTED_PREFIXES = ("/healthz", "/metrics", "/static/")
UNADMITTED_SUFFIXES = ("/bundle.tar.gz",)


class Full(Exception):
    """The caller already has as many requests waiting as it may."""


class FairTurns:
    """`slots` turns handed out in rotation among the callers waiting for one."""

    def __init__(self, slots: int, waiting_per_caller: int) -> None:
        self.slots = self.free = slots
        self.waiting_per_caller = waiting_per_caller
        self.waiting: dict[str, deque[asyncio.Future[None]]] = {}  # in turn order: the next caller first
        # For GET /metrics (service/metrics.py): since the process started.
        self.admitted_total = self.turned_away_total = 0
        self.wait_seconds_total = 0.0

    async def enter(self, caller: str, wait_seconds: float) -> None:
        """Take a slot, waiting for this caller's turn; TimeoutError after `wait_seconds`, Full at once."""
        if self.free and not self.waiting:
            self.free -= 1
            self.admitted_total += 1
            return
        queue = self.waiting.setdefault(caller, deque())
        if len(queue) >= self.waiting_per_caller:
            self.turned_away_total += 1
            raise Full
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(turn)
        started = time.monotonic()
        try:
            await asyncio.wait_for(asyncio.shield(turn), wait_seconds)
        except BaseException as exc:
            if turn.done():
                self.leave()  # handed a slot as the wait ended: give it on
            else:
                turn.cancel()
                self._forget(caller, turn)
            if isinstance(exc, TimeoutError):
                self.turned_away_total += 1
            raise
        finally:
            self.wait_seconds_total += time.monotonic() - started
        self.admitted_total += 1

    def leave(self) -> None:
        """Give the slot to the next caller in rotation (it goes to the back), or free it."""
        while self.waiting:
            caller = next(iter(self.waiting))
            queue = self.waiting.pop(caller)
            turn = queue.popleft()
            if queue:
                self.waiting[caller] = queue
            if not turn.done():
                turn.set_result(None)
                return
        self.free += 1

    def waiting_count(self) -> int:
        return sum(len(queue) for queue in self.waiting.values())

    def _forget(self, caller: str, turn: asyncio.Future[None]) -> None:
        queue = self.waiting.get(caller)
        if queue is not None and turn in queue:
            queue.remove(turn)
            if not queue:
                del self.waiting[caller]


def caller_of(scope: Scope) -> str:
    """Whose turn a request takes: its API key, else its dashboard session, else its client's address."""
    headers = Headers(scope=scope)
    if authorization := headers.get("authorization"):
        return "key:" + authorization
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE and value:
            return "session:" + value
    client = scope.get("client")
    return "address:" + (client[0] if client else "")


def admitted(scope: Scope, upload_paths: Iterable[str]) -> bool:
    """Whether the request waits for a slot: everything but streaming transfers and the operator's routes."""
    path: str = scope["path"]
    if path.startswith(UNADMITTED_PREFIXES) or path.endswith(UNADMITTED_SUFFIXES) or "/files/" in path:
        return False
    return not (scope["method"] == "POST" and path in upload_paths)


class Admission:
    """ASGI middleware: a request enters the app once FairTurns gives it a slot (503 Busy otherwise)."""

    def __init__(self, app: ASGIApp, turns: FairTurns, wait_seconds: float, upload_paths: Iterable[str]) -> None:
        self.app = app
        self.turns = turns
        self.wait_seconds = wait_seconds
        self.upload_paths = frozenset(upload_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not admitted(scope, self.upload_paths):
            await self.app(scope, receive, send)
            return
        try:
            await self.turns.enter(caller_of(scope), self.wait_seconds)
        except (Full, TimeoutError):
            response = problem(503, "Busy", "the service is busy with this caller's other requests and others'; "
                               "try again in a second", headers={"Retry-After": "1"}, instance=scope["path"])
            await response(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.turns.leave()
