"""The course notebooks keep the promises the course makes about every lesson.

Checked statically on the committed .ipynb files (nbval checks their outputs):
learning goals / prerequisites / time up front; summary, misconceptions and hidden answers at
the end; a glossary link; at least three exercises with solution marks and an automatic check;
widget cells marked for nbval; error demonstrations tagged; no copy of a package function.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import mha_course

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
CORE = ["00_overview", "01_qkv", "02_scaled_dot_product", "03_multi_head_split",
        "04_concat_output", "05_complexity"]
WIDGET_CALLS = ("live_view(", "SizeControls(", "Explorer(", "interact(", "interactive(")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _src(cell: dict) -> str:
    return "".join(cell["source"])


def _markdown(path: Path) -> str:
    return "\n".join(_src(c) for c in _cells(path) if c["cell_type"] == "markdown")


def _code_cells(path: Path) -> list[dict]:
    return [c for c in _cells(path) if c["cell_type"] == "code"]


def _strip_solutions(src: str) -> str:
    return re.sub(r"### BEGIN SOLUTION.*?### END SOLUTION", "", src, flags=re.S)


lesson = pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])


def test_core_notebooks_present_in_order():
    names = [p.stem for p in LESSONS]
    present = [n for n in CORE if n in names]
    assert names[: len(present)] == present, f"core notebooks out of order: {names}"


@lesson
def test_opens_with_goals_prerequisites_and_time(path):
    opening = "\n".join(_src(c) for c in _cells(path)[:3] if c["cell_type"] == "markdown").lower()
    for needle in ("learning goals", "prerequisites", "minutes"):
        assert needle in opening, f"{path.name}: the opening should state its {needle}"


@lesson
def test_closes_with_summary_misconceptions_and_hidden_answers(path):
    text = _markdown(path).lower()
    for needle in ("summary", "misconception", "<details>", "</details>"):
        assert needle in text, f"{path.name}: missing {needle!r}"


@lesson
def test_links_the_glossary(path):
    assert "../docs/glossary.md" in _markdown(path), f"{path.name}: link ../docs/glossary.md"


@lesson
def test_has_three_checked_exercises(path):
    cells = _code_cells(path)
    exercises = [i for i, c in enumerate(cells)
                 if re.match(r"#\s*Exercise \d+\.\d+: \S", _src(c).lstrip())]
    assert len(exercises) >= 3, f"{path.name}: {len(exercises)} exercises, need at least 3"
    for i in exercises:
        src = _src(cells[i])
        assert src.count("### BEGIN SOLUTION") == src.count("### END SOLUTION") >= 1, \
            f"{path.name}: exercise cell {i} lacks balanced solution marks"
        following = _src(cells[i + 1]) if i + 1 < len(cells) else ""
        assert "check." in following or "assert" in following, \
            f"{path.name}: the cell after exercise {src.splitlines()[0]!r} should check it"


@lesson
def test_widget_cells_are_marked_for_nbval(path):
    """A cell that displays a live widget varies under nbval; it must be NBVAL_IGNORE_OUTPUT."""
    for c in _code_cells(path):
        shows_widget = any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
                           for o in c.get("outputs", []))
        if shows_widget:
            first = _src(c).lstrip().splitlines()[0].strip()
            assert first == "# NBVAL_IGNORE_OUTPUT", f"{path.name}: widget cell not marked:\n{_src(c)}"


@lesson
def test_has_a_live_widget_and_a_static_view(path):
    cells = _code_cells(path)
    assert any(any(call in _src(c) for call in WIDGET_CALLS) for c in cells), \
        f"{path.name}: every lesson has at least one live control set"
    assert any(any("image/png" in o.get("data", {}) for o in c.get("outputs", []))
               for c in cells if not _src(c).lstrip().startswith("# NBVAL_IGNORE_OUTPUT")), \
        f"{path.name}: the view should also be drawn statically in a compared cell"


@lesson
def test_markers_are_exact(path):
    for c in _code_cells(path):
        for line in _src(c).splitlines():
            if "NBVAL_" in line and line.strip().startswith("#"):
                assert re.fullmatch(r"#\s*NBVAL_[A-Z_]+", line.strip()), \
                    f"{path.name}: text after an nbval marker disables it: {line!r}"


@lesson
def test_error_cells_are_tagged(path):
    for c in _code_cells(path):
        errors = [o for o in c.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            assert "raises-exception" in c.get("metadata", {}).get("tags", []), \
                f"{path.name}: a cell raising {errors[0]['ename']} lacks the raises-exception tag"


@lesson
def test_first_cell_is_deterministic(path):
    first = _src(_code_cells(path)[0])
    for needle in ("%matplotlib inline", "set_printoptions", "default_rng("):
        assert needle in first, f"{path.name}: first code cell should contain {needle!r}"


@lesson
def test_never_copies_the_package(path):
    public = set(mha_course.__all__)
    for c in _code_cells(path):
        defined = re.findall(r"^\s*def (\w+)\(", _strip_solutions(_src(c)), flags=re.M)
        copied = public.intersection(defined)
        assert not copied, f"{path.name}: redefines package functions {copied}; import them"
