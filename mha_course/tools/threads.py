"""The BLAS thread variables: one place that names them and reads ``MHA_COURSE_THREADS``.

Standard library only, and it imports nothing of the package, so the repository's
``conftest.py`` loads this file by path before numpy starts (a BLAS reads these variables once,
when it loads).

>>> thread_env(2)["OMP_NUM_THREADS"]
'2'
"""
from __future__ import annotations

import os

__all__ = ["THREAD_VARS", "THREADS_VAR", "thread_count", "thread_env", "pin_threads"]

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
