"""The layout: one folder per layer, and a test file for every module, in folders that mirror the package.

``mha_course/<stem>.py`` is tested in ``tests/test_<stem>.py``; ``mha_course/<folder>/<stem>.py``
in ``tests/<folder>/test_<stem>.py``. A topic keeps one stem across folders.
"""
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mha_course"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts)


def mirror_of(module: Path) -> Path:
    """mha_course/lessons/model.py -> tests/lessons/test_model.py; mha_course/_validate.py -> tests/core/test_validate.py."""
    rel = module.relative_to(PACKAGE)
    folder = rel.parent if rel.parent.parts else Path("core")
    return ROOT / "tests" / folder / f"test_{rel.stem.lstrip('_')}.py"


def test_the_mirror_rule():
    assert mirror_of(PACKAGE / "lessons" / "model.py") == ROOT / "tests" / "lessons" / "test_model.py"
    assert mirror_of(PACKAGE / "_validate.py") == ROOT / "tests" / "core" / "test_validate.py"


# check-engine's tests/test_check*.py move into tests/check/ on their own branch
TOP_LEVEL_ALLOWED = {"_mha_checks.py", "jupyterlab_harness.py", "test_check.py", "test_check_exercises.py",
                     "test_check_rules.py"}


def test_no_test_file_stands_at_the_top_of_tests():
    top = {p.name for p in (ROOT / "tests").glob("*.py")}
    assert top <= TOP_LEVEL_ALLOWED, f"move {sorted(top - TOP_LEVEL_ALLOWED)} into tests/<folder>/ or tests/cross/"


@pytest.mark.parametrize("module", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_has_its_test_file(module):
    path = mirror_of(module)
    assert path.exists(), f"{module.relative_to(ROOT)} has no test file: write {path.relative_to(ROOT)}"
    assert "def test_" in path.read_text(encoding="utf-8"), f"{path.relative_to(ROOT)} holds no test"


def test_the_layers_are_the_folders():
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == ["check", "explorer", "lessons", "tools", "views", "widgets"]
