"""The notebook registry (mha_course/registry.py) against what it describes: the table of
mha_course/__init__.py, the README's course map, check/__init__.py, the notebooks' own code, the quiz."""
import importlib
import json
import re
from pathlib import Path

import pytest

import mha_course
from mha_course import check, registry
from mha_course.lessons import quiz

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _code(stem: str) -> str:
    cells = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_every_notebook_is_registered_in_order():
    assert list(registry.NOTEBOOKS) == NOTEBOOKS


def test_the_package_table_is_the_registry():
    assert registry.table() in mha_course.__doc__


def test_the_readme_map_lists_the_registered_notebooks():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The course map"):readme.index("## The package")]
    assert re.findall(r"^\| \[(\d\d_\w+)\]", section, re.M) == list(registry.NOTEBOOKS)


def test_the_checkers_are_the_registered_ones_each_in_one_notebook():
    engine = {"Case", "Exercise", "Mistake", "ShapeExercise", "ShapeMistake", "catalogue", "matches", "summary"}
    listed = [name for lesson in registry.NOTEBOOKS.values() for name in lesson.checkers]
    assert len(listed) == len(set(listed))  # each checker belongs to one notebook
    assert set(listed) == set(check.__all__) - engine
    assert set(listed) <= set(check.catalogue())


@pytest.mark.parametrize("stem", list(registry.NOTEBOOKS))
def test_a_notebook_calls_its_registered_checkers_and_imports_its_modules(stem):
    lesson, code = registry.NOTEBOOKS[stem], _code(stem)
    assert set(re.findall(r"\bcheck\.(\w+)\(", code)) == set(lesson.checkers)
    for folder, names in re.findall(r"from mha_course\.(lessons|views|widgets) import ([\w ,]+)", code):
        for name in re.findall(r"(\w+)(?: as \w+)?", names):
            if name != "as" and importlib.util.find_spec(f"mha_course.{folder}.{name}"):
                assert f"{folder}.{name}" in lesson.modules, f"{stem} imports {folder}.{name}"
    for module in lesson.core + lesson.modules:
        importlib.import_module(f"mha_course.{module}")


def test_the_quiz_sections_are_registered_notebooks():
    assert {q.notebook for q in quiz.load_questions()} <= {lesson.quiz for lesson in registry.NOTEBOOKS.values()}
