"""Admission (service/admission.py): slots bounded, turns taken in rotation across callers, a
caller's waiting bounded, and a wait that ends (timeout, a client gone) never loses a slot."""

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from service.admission import Admission, FairTurns, Full, admitted, caller_of


def run(coroutine):
    """The scenario in an event loop of its own thread (a browser test may leave one running in this one)."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_request_past_the_slots_waits_until_one_leaves():
    async def scenario():
        turns = FairTurns(slots=2, waiting_per_caller=10)
        await turns.enter("a", 1)
        await turns.enter("a", 1)
        third = asyncio.create_task(turns.enter("a", 1))
        await settle()
        assert not third.done() and turns.waiting_count() == 1
        turns.leave()
        await settle()
        assert third.done() and turns.free == 0 and turns.waiting_count() == 0

    run(scenario())


def test_a_freed_slot_goes_to_the_next_caller_in_rotation_not_to_the_flood():
    async def scenario():
        turns = FairTurns(slots=1, waiting_per_caller=100)
        await turns.enter("flood", 1)
        order: list[str] = []

        async def request(caller: str) -> None:
            await turns.enter(caller, 5)
            order.append(caller)

        tasks = [asyncio.create_task(request("flood")) for _ in range(5)]
        await settle()
        tasks.append(asyncio.create_task(request("victim")))
        await settle()
        for _ in range(6):
            turns.leave()
            await settle()
        await asyncio.gather(*tasks)
        # The victim came after five of the flood's requests and is served second.
        assert order[:2] == ["flood", "victim"], order

    run(scenario())


def test_a_caller_past_its_waiting_requests_is_full_and_others_still_wait():
    async def scenario():
        turns = FairTurns(slots=1, waiting_per_caller=2)
        await turns.enter("a", 1)
        waiting = [asyncio.create_task(turns.enter("a", 5)) for _ in range(2)]
        await settle()
        with pytest.raises(Full):
            await turns.enter("a", 5)
        other = asyncio.create_task(turns.enter("b", 5))
        await settle()
        assert turns.waiting_count() == 3 and turns.turned_away_total == 1
        for _ in range(3):
            turns.leave()
            await settle()
        await asyncio.gather(*waiting, other)

    run(scenario())


def test_a_wait_that_times_out_or_is_cancelled_leaves_the_slots_as_they_were():
    async def scenario():
        turns = FairTurns(slots=1, waiting_per_caller=10)
        await turns.enter("a", 1)
        with pytest.raises(TimeoutError):
            await turns.enter("b", 0.01)
        gone = asyncio.create_task(turns.enter("c", 5))
        await settle()
        gone.cancel()
        await settle()
        assert turns.waiting_count() == 0
        turns.leave()
        assert turns.free == 1
        await turns.enter("d", 1)  # the slot is there to take at once
        assert turns.free == 0

    run(scenario())


def test_a_turn_handed_over_as_its_waiter_is_cancelled_goes_on_to_the_next():
    async def scenario():
        turns = FairTurns(slots=1, waiting_per_caller=10)
        await turns.enter("a", 1)
        first = asyncio.create_task(turns.enter("b", 5))
        second = asyncio.create_task(turns.enter("c", 5))
        await settle()
        turns.leave()  # the turn is b's ...
        first.cancel()  # ... but b's client went away before it ran
        await settle()
        if not first.cancelled():
            turns.leave()  # asyncio.wait_for kept the turn it was handed: b's request runs, then leaves
        await asyncio.wait_for(second, 1)
        assert turns.free == 0 and turns.waiting_count() == 0

    run(scenario())


def scope(path: str, method: str = "GET", headers: list[tuple[bytes, bytes]] = (), client=("10.0.0.1", 5)) -> dict:
    return {"type": "http", "path": path, "method": method, "headers": list(headers), "client": client}


def test_callers_are_keys_then_dashboard_sessions_then_addresses():
    assert caller_of(scope("/v1/corpora", headers=[(b"authorization", b"Bearer tm_x")])) == "key:Bearer tm_x"
    session = scope("/corpora", headers=[(b"cookie", b"other=1; tokenmill_session=abc")])
    assert caller_of(session) == "session:abc"
    assert caller_of(scope("/signin")) == "address:10.0.0.1"


def test_streaming_transfers_and_operator_routes_are_not_admitted():
    uploads = {"/v1/corpora"}
    assert admitted(scope("/v1/corpora"), uploads)
    assert not admitted(scope("/v1/corpora", "POST"), uploads)
    assert not admitted(scope("/v1/tokenizers/t/versions/1/files/tokenizer.json"), uploads)
    assert not admitted(scope("/v1/tokenizers/t/versions/1/bundle.tar.gz"), uploads)
    for path in ("/healthz", "/metrics", "/static/app.css"):
        assert not admitted(scope(path), uploads)


def test_the_middleware_answers_503_busy_with_retry_after_when_the_caller_waited_too_long():
    async def scenario():
        turns = FairTurns(slots=1, waiting_per_caller=10)
        await turns.enter("other", 1)
        reached: list[str] = []

        async def app(scope, receive, send):
            reached.append(scope["path"])

        sent: list[dict] = []

        async def send(message):
            sent.append(message)

        middleware = Admission(app, turns, wait_seconds=0.01, upload_paths=())
        await middleware(scope("/v1/jobs"), None, send)
        assert not reached and sent[0]["status"] == 503
        assert (b"retry-after", b"1") in sent[0]["headers"]
        turns.leave()
        await middleware(scope("/v1/jobs"), None, send)
        assert reached == ["/v1/jobs"] and turns.free == 1  # admitted, then the slot given back

    run(scenario())
