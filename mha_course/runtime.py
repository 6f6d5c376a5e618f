"""The process around the numbers: BLAS threads, the package's thread pool and the allocator, in one place.

- **Thread variables** (``THREAD_VARS``, ``THREADS_VAR``, ``thread_env``, ``pin_threads``): the names of
  the BLAS thread variables, written once here; ``mha-course execute``, the repository's
  ``conftest.py``, the benchmarks and the hub's config read them from here.
- **The pool** (``run_jobs``, ``blas_on_one_thread``, ``cpu_count``): every parallel region of the
  package chooses its threads here: a pool of one thread per core with BLAS on one thread inside it.
- **The allocator** (``keep_freed_memory``, ``MEMORY_VAR``): glibc's reuse of freed arrays, set only
  when asked for (see its docstring and the README's speed section).

Standard library and threadpoolctl only; it imports nothing of the package, so ``conftest.py`` can
load this file by path before numpy starts (a BLAS reads its thread variables once, when it loads).

>>> thread_env(2)["OMP_NUM_THREADS"]
'2'
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple, Optional

import threadpoolctl

__all__ = ["THREAD_VARS", "THREADS_VAR", "thread_count", "thread_env", "pin_threads", "cpu_count",
           "blas_on_one_thread", "run_jobs", "serial_jobs", "pool_state", "PoolState", "MEMORY_VAR", "keep_freed_memory"]

# ---- Thread variables: named once, here. ----

THREADS_VAR = "MHA_COURSE_THREADS"
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def thread_count(threads=None) -> str:
    """``threads``, else $MHA_COURSE_THREADS, else 1, as a string; ValueError unless a whole number >= 1.

    >>> thread_count(3)
    '3'
    """
    raw = threads if threads is not None else (os.environ.get(THREADS_VAR, "1").strip() or "1")
    value = str(raw).strip()
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{THREADS_VAR}={value!r} must be a whole number >= 1, e.g. {THREADS_VAR}=2")
    return str(int(value))


def thread_env(threads=None) -> dict:
    """{BLAS variable: count}: ``threads``, else $MHA_COURSE_THREADS, else 1 (reproducible last bits).

    >>> sorted(thread_env(1))
    ['MKL_NUM_THREADS', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS']
    """
    value = thread_count(threads)
    return {var: value for var in THREAD_VARS}


def pin_threads(threads=None) -> str:
    """Set every BLAS variable of this process (and its future children) to the count; return it."""
    env = thread_env(threads)
    os.environ.update(env)
    return env[THREAD_VARS[0]]


# ---- The pool: every parallel region of the package chooses its threads once, here. ----

def cpu_count() -> int:
    """The number of cores this process may run on (its CPU affinity), at least 1.

    >>> cpu_count() >= 1
    True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows: no affinity call
        return os.cpu_count() or 1


_WORKER = threading.local()  # .inside is True in a worker of run_jobs: a nested run_jobs runs serially
_STATE = {"lock": threading.Lock(), "users": 0, "limiter": None, "controller": None, "pool": None, "size": 0}


class PoolState(NamedTuple):
    """The package's pool (None before first use), its thread count, and how many
    ``blas_on_one_thread`` blocks are open: what ``pool_state`` reports (the tests' one hook)."""
    pool: Optional[ThreadPoolExecutor]
    workers: int
    blas_users: int


def pool_state() -> PoolState:
    """-> PoolState(pool, workers, blas_users) of this process, read under the lock.

    >>> pool_state().blas_users
    0
    """
    with _STATE["lock"]:
        return PoolState(_STATE["pool"], _STATE["size"], _STATE["users"])


def _reset_after_fork() -> None:
    """A forked child has none of its parent's threads: forget the pool and the BLAS limit."""
    _STATE.update(lock=threading.Lock(), users=0, limiter=None, pool=None, size=0)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _pool(workers: int) -> ThreadPoolExecutor:
    """The package's one pool of ``workers`` threads, made on first use and kept: idle, its
    threads wait on a queue (no spinning), and a call costs no thread start."""
    with _STATE["lock"]:
        if _STATE["pool"] is None or _STATE["size"] != workers:
            _STATE["pool"], _STATE["size"] = ThreadPoolExecutor(workers, thread_name_prefix="mha_course"), workers
        return _STATE["pool"]


@contextlib.contextmanager
def blas_on_one_thread():
    """A ``with`` block in which BLAS runs on one thread (threadpoolctl), restored when the last
    concurrent user leaves (two threads running attention at once share one limit).

    For code whose matmuls are small (the tiny model's training step: a threaded BLAS spends
    more time keeping its threads in step than multiplying, the more so on a busy machine).

    >>> import numpy as np
    >>> with blas_on_one_thread():
    ...     y = np.ones((3, 3)) @ np.ones((3, 3))
    """
    with _STATE["lock"]:
        if _STATE["users"] == 0:
            if _STATE["controller"] is None:
                _STATE["controller"] = threadpoolctl.ThreadpoolController()  # numpy's BLAS is loaded by now
            _STATE["limiter"] = _STATE["controller"].limit(limits=1, user_api="blas")
        _STATE["users"] += 1
    try:
        yield
    finally:
        with _STATE["lock"]:
            _STATE["users"] -= 1
            if _STATE["users"] == 0:
                _STATE["limiter"].restore_original_limits()


def _flag(value, name: str) -> None:
    """Refuse a ``value`` that is not True or False (numpy's too): "no" or 2 would read as True.
    (_validate.flag's check, here without numpy: this module imports nothing of the package.)"""
    if not (isinstance(value, bool) or (getattr(value, "dtype", None) is not None and value.dtype.kind == "b"
                                        and getattr(value, "ndim", 1) == 0)):
        raise ValueError(f"{name}={value!r} must be True or False (got {type(value).__name__})")


def serial_jobs(on: bool) -> bool:
    """Make run_jobs in this thread run every job serially, where it is (``on=True``), or as before;
    -> the previous setting, to restore. For code that may be stopped at any line (a learner's
    function under the checkers' time limit): stopped inside the pool's submit, it would leave the
    pool's locks held, and the next run_jobs, or the process's exit, would wait for ever.

    >>> before = serial_jobs(True); serial_jobs(before)
    True
    """
    _flag(on, "on")
    before = bool(getattr(_WORKER, "inside", False))
    _WORKER.inside = on
    return before


def run_jobs(run, jobs: list, parallel: bool = True) -> None:
    """Call ``run(job)`` for every job: on the pool of one thread per core when ``parallel``.

    The threads are chosen once, here, whatever the thread variables say: while the jobs run,
    BLAS runs on one thread and the pool spreads the jobs (numpy's one-threaded ``exp``
    included) over the cores. So no pool is ever stacked on a threaded BLAS, and a busy machine
    costs little: a threaded BLAS keeps its threads in step on every call (they spin and wait,
    and queue behind other processes; measured 1.6 to 5x slower at load 13 on 2 cores), the
    pool's threads meet once per call. One job, ``parallel=False`` or a call from inside a
    worker runs serially, where it is. A job's exception is raised here.

    >>> out = []
    >>> run_jobs(out.append, [1, 2, 3], parallel=False); out
    [1, 2, 3]
    """
    _flag(parallel, "parallel")
    workers = min(cpu_count(), len(jobs)) if parallel else 1
    if workers < 2 or getattr(_WORKER, "inside", False):
        for job in jobs:
            run(job)
        return

    def work(job):
        _WORKER.inside = True
        run(job)

    with blas_on_one_thread():
        list(_pool(cpu_count()).map(work, jobs))  # list(): re-raises a worker's exception here


# ---- Memory: arrays the size attention makes are reused, not handed back to the system. ----

MEMORY_VAR = "MHA_COURSE_KEEP_FREED_MEMORY"
# glibc's mallopt parameters (malloc.h) and the values set.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_BYTES = 4 << 20  # arrays up to this size come from the heap (larger ones are mapped, with huge pages)
_TRIM_BYTES = 64 << 20  # freed heap memory kept for the next call, at most
_MEMORY = {"kept": None}


def _memory_wanted(default: bool) -> bool:
    """$MHA_COURSE_KEEP_FREED_MEMORY as a bool ("1" on, "0" off, unset: ``default``); ValueError otherwise."""
    raw = os.environ.get(MEMORY_VAR, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{MEMORY_VAR}={raw!r} must be 1 (keep freed memory) or 0 (glibc's defaults)")
    return default if raw == "" else raw == "1"


def keep_freed_memory(default: bool = True) -> bool:
    """Let glibc reuse the memory of freed arrays (up to 4 MiB each, 64 MiB in all) instead of
    returning it to the system, unless $MHA_COURSE_KEEP_FREED_MEMORY is 0; True when the setting
    holds in this process. It changes the whole process's allocator, so only a caller that asks
    sets it; once set it stays (glibc has no undo).

    Each call of attention allocates its projections, its weights and a few temporaries, and frees
    them when the caller drops them. With glibc's defaults, the freed memory at the top of the heap
    goes back to the system whenever it exceeds twice the largest recent array, and comes back on
    the next call one page fault and one zeroed page at a time. PyTorch's CPU performance tuning
    guide (https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html) suggests jemalloc or
    TCMalloc for the same reason: they reuse freed memory. Arrays above 4 MiB stay mapped one by
    one, as numpy asks for huge pages for them. Elsewhere than glibc on Linux it does nothing.

    >>> MEMORY_VAR
    'MHA_COURSE_KEEP_FREED_MEMORY'
    """
    _flag(default, "default")
    if _MEMORY["kept"] is None and _memory_wanted(default):
        _MEMORY["kept"] = False
        if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
            libc = ctypes.CDLL(None)  # the C library this process already runs on (no search, no subprocess)
            _MEMORY["kept"] = bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_BYTES)) and \
                bool(libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_BYTES))
    return bool(_MEMORY["kept"])
