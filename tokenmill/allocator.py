"""How much of a process's freed memory glibc's malloc keeps: set by a worker for the processes
that run jobs (workers/tasks.py), trimmed around a job's memory reading (queued_work.progress),
and set by the benchmarks that run an engine as a worker does. It imports nothing of the
service, so a benchmark's engine process loads nothing more than the engine for it."""

import contextlib
import ctypes

M_MMAP_THRESHOLD = -3  # mallopt(3)'s parameter
LARGE_BLOCK = 1 << 20


def map_large_blocks(threshold: int = LARGE_BLOCK) -> None:
    """Have glibc's malloc map each block of `threshold` bytes or more on its own, and unmap it
    when it is freed. By default that threshold rises to the largest block freed so far (up to
    32 MiB), and blocks below it come from heaps that give memory back only from their top:
    training on 100 MB of text, which frees and asks for blocks of a few MiB many times a second,
    then held 20-80 MiB more at its peak, a different amount on every run (BENCHMARKS.md). A
    worker sets it before it forks its children (workers/tasks.py). Not glibc: nothing is set."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, threshold)


def give_back_memory() -> None:
    """Return the memory freed so far to the system (glibc's malloc_trim: every arena, the
    libraries' threads' too), so this process's resident memory is what it still uses."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim this way
        ctypes.CDLL(None).malloc_trim(0)
