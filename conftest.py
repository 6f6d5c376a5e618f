"""Repository-wide pytest set-up, loaded from any folder of the checkout.

- BLAS threads: every BLAS variable is set to ``MHA_COURSE_THREADS`` (default 1) before numpy
  is imported here or in a notebook kernel (kernels inherit this environment). One thread
  makes the last bits of results reproducible, which the committed outputs rely on; CI also
  runs the notebooks at 2 threads (``MHA_COURSE_THREADS=2``), as learners' machines have many
  cores and the compared outputs must not depend on it.
- nbval's sanitize file is given by absolute path, so `cd notebooks && pytest` works too.
"""
import os
from pathlib import Path

THREADS = os.environ.get("MHA_COURSE_THREADS", "1").strip() or "1"
if not THREADS.isdigit() or int(THREADS) < 1:
    raise SystemExit(f"MHA_COURSE_THREADS={THREADS!r} must be a whole number >= 1, e.g. MHA_COURSE_THREADS=2")
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = THREADS
os.environ.pop("MPLBACKEND", None)

ROOT = Path(__file__).resolve().parent
SANITIZE = ROOT / "nbval_sanitize.cfg"

collect_ignore = ["benchmarks", "build", "docs", ".venv"]


def pytest_configure(config):
    if getattr(config.option, "nbval_sanitize_with", "unset") is None:
        config.option.nbval_sanitize_with = str(SANITIZE)


def pytest_report_header(config):
    return f"BLAS threads: {THREADS} (MHA_COURSE_THREADS)"
