"""Repository-wide pytest set-up, loaded from any folder of the checkout.

- BLAS is pinned to one thread before numpy is imported here or in a notebook kernel
  (kernels inherit this environment), so the last bits of results do not depend on it.
- nbval's sanitize file is given by absolute path, so `cd notebooks && pytest` works too.
"""
import os
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.pop("MPLBACKEND", None)

ROOT = Path(__file__).resolve().parent
SANITIZE = ROOT / "nbval_sanitize.cfg"

collect_ignore = ["benchmarks", "build", "docs", ".venv"]


def pytest_configure(config):
    if getattr(config.option, "nbval_sanitize_with", "unset") is None:
        config.option.nbval_sanitize_with = str(SANITIZE)
