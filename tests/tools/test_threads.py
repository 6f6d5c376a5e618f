"""The BLAS thread variables (tools/threads.py): one place, read by conftest.py and by `mha-course execute`."""
import os
import subprocess
import sys

import pytest

from mha_course.tools import threads

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


