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


# Frees blocks of 4 MiB after glibc's threshold for mapping a block apart has risen to 16 MiB
# (it rises to the largest mapped block freed), keeping the last block, and prints how much of
# them is still resident: a heap gives memory back only from its top, which the last one holds.
FREED = """
import ctypes, sys
from tokenmill.allocator import map_large_blocks
if sys.argv[1] == "set":
    map_large_blocks()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
libc.free(libc.malloc(16 << 20))
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
before = resident()
blocks = [libc.malloc(4 << 20) for _ in range(8)]
for block in blocks:
    ctypes.memset(block, 1, 4 << 20)
for block in blocks[:-1]:
    libc.free(block)
print(resident() - before)
"""


def test_with_large_blocks_mapped_apart_a_freed_block_is_given_back_at_once():
    def still_resident(how: str) -> int:
        return int(subprocess.run([sys.executable, "-c", FREED, how], capture_output=True, check=True).stdout)

    assert still_resident("default") > 24 * 2**20  # the seven freed blocks kept by the heap
    assert still_resident("set") < 8 * 2**20  # only the block still held
