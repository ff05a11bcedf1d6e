"""Uploads compute in turns (tokenmill/corpora/ingest.py `Turns`): a few at once, and none while it waits for input."""

import threading

from tokenmill.corpora.ingest import CorpusFields, Tally, Turns, _scanned

WAIT = 30.0  # a bound on waits that end at once when the code is right


def test_a_third_upload_waits_for_a_turn():
    turns, computed = Turns(2), threading.Event()

    def third() -> None:
        with turns:
            computed.set()

    with turns, turns:  # two uploads compute
        thread = threading.Thread(target=third)
        thread.start()
        assert not computed.wait(0.5)  # the third waits (a negative: only a bounded wait shows it)
    assert computed.wait(WAIT)  # until a turn is given back
    thread.join(WAIT)


def test_an_upload_waiting_for_its_input_holds_no_turn():
    turns, arrived, waiting, other_computed = Turns(1), threading.Event(), threading.Event(), threading.Event()

    def slow_client():
        yield b"first line\n"
        waiting.set()
        assert arrived.wait(WAIT), "the other upload never got the turn"  # the turn is free meanwhile
        yield b"second line\n"

    def other_upload() -> None:
        assert waiting.wait(WAIT)
        with turns:
            other_computed.set()
        arrived.set()

    other = threading.Thread(target=other_upload)
    other.start()
    tally = Tally(max_bytes=1000, max_line_bytes=100)
    stored = b"".join(_scanned(slow_client(), CorpusFields("c", "d", "l", format="text"), tally, turns))
    other.join(WAIT)
    assert other_computed.is_set()
    assert stored == b"first line\nsecond line\n" and tally.counts.lines == 2
    with turns:  # and the turn is back, not lost
        pass
