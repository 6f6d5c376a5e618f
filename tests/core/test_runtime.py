"""mha_course.runtime: the BLAS thread variables (one place, read by conftest.py, `mha-course execute`, the
benchmarks and the hub), the package's pool, and the allocator setting that only the fast path asks for."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from mha_course import runtime
from mha_course import runtime as threads


def _blas_threads() -> int:
    from threadpoolctl import threadpool_info
    return max(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- BLAS threads are a choice
def test_blas_threads_follow_the_environment():
    assert os.environ["OMP_NUM_THREADS"] == os.environ.get("MHA_COURSE_THREADS", "1").strip()
    assert os.environ["OPENBLAS_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == os.environ["OMP_NUM_THREADS"]


def test_mha_course_threads_reaches_pytest_and_execute(monkeypatch):
    env = {**os.environ, "MHA_COURSE_THREADS": "2"}
    run = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:randomly",
                          "-k", "test_blas_threads_follow_the_environment"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    monkeypatch.setenv("MHA_COURSE_THREADS", "2")
    assert threads.thread_env() == {v: "2" for v in threads.THREAD_VARS}
    monkeypatch.setenv("MHA_COURSE_THREADS", "many")
    with pytest.raises(ValueError, match="MHA_COURSE_THREADS='many' must be a whole number"):
        threads.thread_env()
    monkeypatch.delenv("MHA_COURSE_THREADS")
    assert threads.thread_env()["OMP_NUM_THREADS"] == "1"


# ---------------------------------------------------------------- the pool
def test_run_jobs_inside_a_worker_runs_serially(monkeypatch):
    monkeypatch.setattr(runtime, "cpu_count", lambda: 2)
    seen = []
    runtime.run_jobs(lambda job: runtime.run_jobs(lambda j: seen.append((j, threading.current_thread().name)), [job, job]),
                  [1, 2, 3])
    assert sorted(j for j, _ in seen) == [1, 1, 2, 2, 3, 3]
    assert all(name.startswith("mha_course") for _, name in seen)  # the inner calls ran in the workers
    with pytest.raises(ZeroDivisionError):
        runtime.run_jobs(lambda job: 1 / job, [1, 0])  # a worker's exception reaches the caller
    assert runtime.pool_state().blas_users == 0  # the BLAS limit was released


def test_blas_on_one_thread_nests_and_restores():
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=2, user_api="blas"):
        with runtime.blas_on_one_thread():
            assert _blas_threads() == 1
            with runtime.blas_on_one_thread():
                runtime.run_jobs(lambda j: None, [1, 2])
                assert _blas_threads() == 1
            assert _blas_threads() == 1  # the outer block still holds it
        assert _blas_threads() == 2


def test_the_pool_is_kept_and_remade_after_a_fork(monkeypatch):
    import os
    monkeypatch.setattr(runtime, "cpu_count", lambda: 2)
    runtime.run_jobs(lambda j: None, [1, 2])
    pool = runtime.pool_state().pool
    runtime.run_jobs(lambda j: None, [1, 2])
    assert runtime.pool_state().pool is pool  # one pool for the process: no thread start per call
    if not hasattr(os, "fork"):
        return
    pid = os.fork()
    if pid == 0:  # the child has none of the parent's threads: a stale pool would hang here
        try:
            runtime.run_jobs(lambda j: None, [1, 2])
            os._exit(0 if runtime.pool_state().pool is not pool else 1)
        finally:
            os._exit(2)
    assert os.waitpid(pid, 0)[1] == 0


_FAULTS = """
import resource, sys
import numpy as np
import mha_course as mc  # the import alone changes nothing of the process
if sys.argv[1] == "attend":  # the fast path's first call asks for the allocator setting
    mc.multi_head_attention(np.ones((1, 4, 8)), mc.init_params(8, rng=np.random.default_rng(0)), 2)
def one_call():  # what a call of attention does to memory: a few arrays of MiBs, made, touched, freed
    arrays = [np.ones(1 << 19, np.float32) for _ in range(4)]  # four 2 MiB arrays
    del arrays
for _ in range(3):
    one_call()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    one_call()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
GLIBC = sys.platform == "linux" and __import__("platform").libc_ver()[0] == "glibc"


def _faults(who: str, **env) -> int:
    done = subprocess.run([sys.executable, "-c", _FAULTS, who], capture_output=True, text=True, check=True,
                          env={**os.environ, **env})
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not GLIBC, reason="the allocator setting is for glibc on Linux")
def test_the_fast_path_keeps_freed_memory_and_the_import_changes_nothing():
    """After the fast path's first call, arrays freed by one call are reused by the next one, page for
    page: no page faults in 20 calls. After the import alone, or with MHA_COURSE_KEEP_FREED_MEMORY=0,
    glibc hands the memory back and every call faults its pages in again (about 2,000 a call)."""
    assert _faults("attend") < 200  # page faults are counted, not timed: the same on a busy machine
    assert _faults("import") > 20 * 1000  # glibc's default: the import set nothing
    assert _faults("attend", MHA_COURSE_KEEP_FREED_MEMORY="0") > 20 * 1000  # the one switch


def test_the_memory_switch_refuses_other_values():
    done = subprocess.run([sys.executable, "-c", "from mha_course import runtime; runtime.keep_freed_memory()"],
                          capture_output=True, text=True, env={**os.environ, runtime.MEMORY_VAR: "yes"})
    assert done.returncode != 0 and "MHA_COURSE_KEEP_FREED_MEMORY='yes' must be 1" in done.stderr


def test_run_jobs_and_keep_freed_memory_refuse_a_flag_that_is_not_a_bool():
    done = []
    for call in (lambda: runtime.run_jobs(done.append, [1, 2], parallel="no"),
                 lambda: runtime.run_jobs(done.append, [1, 2], parallel=0),
                 lambda: runtime.keep_freed_memory(default=1)):
        with pytest.raises(ValueError, match="must be True or False"):
            call()
    assert done == []


@pytest.mark.parametrize("bad", ["yes", 1, None, np.array([True, False])])
def test_serial_jobs_takes_only_true_or_false(bad):
    with pytest.raises(ValueError, match="must be True or False"):
        runtime.serial_jobs(bad)


def test_serial_jobs_runs_every_job_in_the_calling_thread_until_restored():
    where = []
    before = runtime.serial_jobs(True)
    try:
        runtime.run_jobs(lambda job: where.append(threading.current_thread().name), list(range(6)))
    finally:
        assert runtime.serial_jobs(before) is True
    assert set(where) == {threading.current_thread().name}
    if runtime.cpu_count() > 1:  # restored: the pool again, as before
        where.clear()
        runtime.run_jobs(lambda job: where.append(threading.current_thread().name), list(range(6)))
        assert threading.current_thread().name not in where
