"""Repository-wide pytest set-up, loaded from any folder of the checkout.

- BLAS threads: every BLAS variable is set to ``MHA_COURSE_THREADS`` (default 1) before numpy
  is imported here or in a notebook kernel (kernels inherit this environment). One thread
  makes the last bits of results reproducible, which the committed outputs rely on; CI also
  runs the notebooks at 2 threads (``MHA_COURSE_THREADS=2``), as learners' machines have many
  cores and the compared outputs must not depend on it.
- Tests marked ``busy`` (tests/cross/test_busy_machine.py: the timing notebooks next to a busy machine)
  are slow and skip unless pytest gets ``--busy``; CI's full run passes it, ``make test`` does not.
- nbval's sanitize file is given by absolute path, so `cd notebooks && pytest` works too.
- Kernels started by the tests get a profile of their own (``IPYTHONDIR`` in a temporary folder)
  that keeps the kernel's own log lines and C-level writes out of the cells: ipykernel forwards
  whatever reaches file descriptor 2 into the cell running at that moment, so a start-up
  warning that arrived late under load showed up as a stray ``stderr`` output in a random cell.
  Python-level output (``print``, ``warnings``) still reaches the cells and is compared.
- Fixtures that test files in different folders share (here, because a tests/conftest.py would
  clash with notebooks/conftest.py: neither folder is a package): notebook 13's models, loaded
  once per session, and the closing of any figure a test leaves open.
"""
import atexit
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def _load_threads():
    """mha_course/runtime.py, loaded by path: importing the package would start numpy (and its BLAS)."""
    spec = importlib.util.spec_from_file_location("_mha_course_runtime", ROOT / "mha_course" / "runtime.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


try:
    THREADS = _load_threads().pin_threads()  # every BLAS variable, before numpy loads
except ValueError as _err:
    raise SystemExit(str(_err)) from None
os.environ.pop("MPLBACKEND", None)


def _quiet_kernel_profile() -> str:
    """A fresh IPYTHONDIR whose kernels log errors only and do not capture fd-level output."""
    home = tempfile.mkdtemp(prefix="mha-course-ipython-")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    profile = Path(home) / "profile_default"
    profile.mkdir()
    (profile / "ipython_kernel_config.py").write_text(
        "c.IPKernelApp.log_level = 'ERROR'\nc.IPKernelApp.capture_fd_output = False\n")
    return home


if "MHA_COURSE_KEEP_IPYTHONDIR" not in os.environ:
    os.environ["IPYTHONDIR"] = _quiet_kernel_profile()

SANITIZE = ROOT / "nbval_sanitize.cfg"

collect_ignore = ["benchmarks", "build", "docs", ".venv"]
collect_ignore_glob = [".venv-*"]  # CI's newcomer venv (.venv-newcomer), and any other


def pytest_addoption(parser):
    parser.addoption("--busy", action="store_true", default=False,
                     help="also run the tests marked busy (the timing notebooks next to a busy machine; slow)")


def pytest_configure(config):
    if getattr(config.option, "nbval_sanitize_with", "unset") is None:
        config.option.nbval_sanitize_with = str(SANITIZE)
    config.addinivalue_line("markers", "busy: slow; runs only with --busy (CI's full run), not in make test")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--busy"):
        return
    skip = pytest.mark.skip(reason="slow (notebooks re-run next to a busy machine): run with --busy, as CI does")
    for item in items:
        if "busy" in item.keywords:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"BLAS threads: {THREADS} (MHA_COURSE_THREADS)"


@pytest.fixture(scope="session")
def long_context_models():
    """Notebook 13's shipped models, {position scheme: (config, params)} (lessons.long_context)."""
    from mha_course.lessons import long_context as lc
    return {name: lc.load_scheme(name) for name in lc.SCHEMES}


@pytest.fixture(autouse=True)
def close_figures():
    """After every test, close the figures it left open (when it used pyplot at all)."""
    yield
    import sys
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
