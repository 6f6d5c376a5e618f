"""The newcomer's `make test` has no PyTorch: what it runs of the notebooks, checked here even where torch is installed.

torch is hidden from a fresh pytest process and from the kernels it starts (a ``sitecustomize`` on
PYTHONPATH that refuses to import it, and MHA_COURSE_REQUIRE_TORCH unset), then nbval runs:
- every notebook that reads torch only behind ``try: import torch / except ImportError`` (06) runs
  whole under strict nbval, each of its torch cells printing ``torch_rule.SKIPPED_LINE``;
- every notebook that imports torch unguarded (12) is skipped, each cell with the reason.
The notebooks are found by the torch rule itself, so a new notebook joins the right list by its code.
Without torch installed (the newcomer's run itself) the session's own nbval does this, and the tests skip.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mha_course.tools.torch_rule import REQUIRE_TORCH_VAR, guarded_torch_cells, notebook_needs_torch, torch_available

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
GUARDED = [nb for nb in NOTEBOOKS if guarded_torch_cells(nb)]
NEEDS_TORCH = [nb for nb in NOTEBOOKS if notebook_needs_torch(nb)]
HIDE_TORCH = '''import sys


class _NoTorch:
    """A newcomer's machine: no PyTorch (tests/cross/test_without_torch.py)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _NoTorch())
'''


def _code_cells(nb: Path) -> int:
    return sum(c["cell_type"] == "code" for c in json.loads(nb.read_text(encoding="utf-8"))["cells"])


@pytest.fixture(scope="module")
def no_torch_env(tmp_path_factory) -> dict:
    """os.environ with torch hidden (for this process's children and their kernels) and not required."""
    if not torch_available():
        pytest.skip("PyTorch is not installed: this session's own nbval runs the notebooks without it")
    folder = tmp_path_factory.mktemp("no-torch")
    (folder / "sitecustomize.py").write_text(HIDE_TORCH, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_TORCH_VAR}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert probe.returncode != 0 and "No module named 'torch'" in probe.stderr, "torch was not hidden"
    return env


def _nbval(notebooks, env) -> tuple:
    run = subprocess.run([sys.executable, "-m", "pytest", *map(str, notebooks), "-p", "no:xdist", "-q", "-rs",
                          "-p", "no:cacheprovider"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?)\b", run.stdout)}
    return run, counts


def test_the_course_has_a_notebook_of_each_kind():
    assert GUARDED and NEEDS_TORCH, (GUARDED, NEEDS_TORCH)
    assert not set(GUARDED) & set(NEEDS_TORCH)


def test_a_notebook_with_guarded_torch_cells_runs_whole_without_torch(no_torch_env):
    run, counts = _nbval(GUARDED, no_torch_env)
    expected = sum(_code_cells(nb) for nb in GUARDED)
    assert run.returncode == 0 and counts == {"passed": expected}, run.stdout[-4000:] + run.stderr[-2000:]


def test_a_notebook_that_imports_torch_unguarded_skips_every_cell_with_the_reason(no_torch_env):
    run, counts = _nbval(NEEDS_TORCH, no_torch_env)
    expected = sum(_code_cells(nb) for nb in NEEDS_TORCH)
    assert run.returncode == 0 and counts == {"skipped": expected}, run.stdout[-4000:]
    assert "needs PyTorch, which is not installed: pip install torch==2.13.0" in run.stdout, run.stdout[-2000:]
