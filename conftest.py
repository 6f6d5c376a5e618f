"""Repository-wide pytest set-up, loaded from any folder of the checkout.

- BLAS threads: every BLAS variable is set to ``MHA_COURSE_THREADS`` (default 1) before numpy
  is imported here or in a notebook kernel (kernels inherit this environment). One thread
  makes the last bits of results reproducible, which the committed outputs rely on; CI also
  runs the notebooks at 2 threads (``MHA_COURSE_THREADS=2``), as learners' machines have many
  cores and the compared outputs must not depend on it.
- nbval's sanitize file is given by absolute path, so `cd notebooks && pytest` works too.
- Kernels started by the tests get a profile of their own (``IPYTHONDIR`` in a temporary folder)
  that keeps the kernel's own log lines and C-level writes out of the cells: ipykernel forwards
  whatever reaches file descriptor 2 into the cell running at that moment, so a start-up
  warning that arrived late under load showed up as a stray ``stderr`` output in a random cell.
  Python-level output (``print``, ``warnings``) still reaches the cells and is compared.
"""
import atexit
import os
import shutil
import tempfile
from pathlib import Path

THREADS = os.environ.get("MHA_COURSE_THREADS", "1").strip() or "1"
if not THREADS.isdigit() or int(THREADS) < 1:
    raise SystemExit(f"MHA_COURSE_THREADS={THREADS!r} must be a whole number >= 1, e.g. MHA_COURSE_THREADS=2")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS
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

ROOT = Path(__file__).resolve().parent
SANITIZE = ROOT / "nbval_sanitize.cfg"

collect_ignore = ["benchmarks", "build", "docs", ".venv"]


def pytest_configure(config):
    if getattr(config.option, "nbval_sanitize_with", "unset") is None:
        config.option.nbval_sanitize_with = str(SANITIZE)


def pytest_report_header(config):
    return f"BLAS threads: {THREADS} (MHA_COURSE_THREADS)"
