"""The job's memory readings: the version's peak counts a training child, the guard reads PSS only when RSS is over."""

import subprocess
import sys
import time

import psutil

from tokenmill.queued_work import heartbeat
from tokenmill.queued_work.progress import PeakMemory

HOLD = 200 * 2**20
# A child that holds HOLD bytes (touched, so resident) until its stdin closes.
CHILD = f"import sys; data = bytearray({HOLD}); print('ready', flush=True); sys.stdin.read()"


def _child() -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout.readline().strip() == b"ready"
    return child


def _end(child: subprocess.Popen) -> None:
    child.stdin.close()
    child.wait(10)


def test_peak_memory_counts_a_child_started_while_it_samples():
    with PeakMemory(every=0.05, look_for_children_every=0.1) as memory:
        own = psutil.Process().memory_info().rss  # after it gave back what this process had freed
        child = _child()
        time.sleep(0.3)
        _end(child)
    assert memory.peak >= own + HOLD * 0.9


def test_peak_memory_leaves_out_children_that_were_already_running():
    child = _child()  # like the evaluation's encode processes, kept between jobs
    try:
        with PeakMemory(every=0.05, look_for_children_every=0.1) as memory:
            time.sleep(0.3)
    finally:
        _end(child)
    assert memory.peak < psutil.Process().memory_info().rss + HOLD * 0.5


def test_the_guard_reads_pss_only_once_rss_passes_the_limit(monkeypatch):
    reads = []
    real = heartbeat.proportional_memory
    monkeypatch.setattr(heartbeat, "proportional_memory", lambda process: reads.append(1) or real(process))
    process = psutil.Process()
    assert not heartbeat.over_memory(process, 1 << 40)
    assert reads == []
    assert heartbeat.over_memory(process, 1 << 20)
    assert reads == [1]
