"""Guard: every notebook under notebooks/ is committed executed, top to bottom, with outputs.

nbval compares stored outputs with fresh ones, so a notebook committed with its outputs
stripped passes nbval while checking nothing. This guard closes that hole: every code cell
with source has an execution count, the counts run 1, 2, 3, ... in cell order (one clean
"Restart & Run All"), and the notebook stores at least one output.
"""
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def course_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """Every .ipynb under ``folder`` (checkpoint copies excluded), sorted."""
    return sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def execution_problems(nb) -> list[str]:
    """What shows that ``nb`` was not executed in order with stored outputs (empty when fine)."""
    problems, never, expected, n_outputs = [], [], 1, 0
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue  # Jupyter gives empty code cells no execution count
        count = cell.get("execution_count")
        n_outputs += len(cell.get("outputs", []))
        if count is None:
            never.append(i)
            continue
        if count != expected:
            problems.append(f"cell {i} has execution_count {count}, expected {expected} "
                            "(run all cells in order from a fresh kernel)")
        expected = count + 1
    if never:
        shown = ", ".join(map(str, never[:8])) + (", ..." if len(never) > 8 else "")
        problems.insert(0, f"{len(never)} code cell(s) never executed (execution_count None): cells {shown}")
    if n_outputs == 0:
        problems.append("no cell has a stored output (were the outputs stripped?)")
    return problems


def test_every_course_notebook_is_committed_executed_in_order():
    """Passes trivially while notebooks/ holds no notebook."""
    report = {}
    for path in course_notebooks():
        problems = execution_problems(nbformat.read(path, as_version=4))
        if problems:
            report[str(path.relative_to(ROOT))] = problems
    assert not report, "re-execute with `mha-course execute <notebook>`:\n" + "\n".join(
        f"{name}: " + "; ".join(problems) for name, problems in report.items())


# ----------------------------------------------------------------------------- the guard can fail
def _executed_notebook():
    """A small notebook as Jupyter saves it after Restart & Run All (no kernel needed)."""
    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_markdown_cell("# A tiny notebook"),
             nbformat.v4.new_code_cell("x = 2"),
             nbformat.v4.new_code_cell("print(x * 3)"),
             nbformat.v4.new_code_cell(""),  # an empty cell keeps no count
             nbformat.v4.new_code_cell("x + 1")]
    cells[1].execution_count = 1
    cells[2].execution_count = 2
    cells[2].outputs = [nbformat.v4.new_output("stream", name="stdout", text="6\n")]
    cells[4].execution_count = 3
    cells[4].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "3"},
                                               execution_count=3)]
    nb.cells = cells
    return nb


def _stripped(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count, cell.outputs = None, []
    return nb


def _reordered(nb):
    nb.cells[2].execution_count, nb.cells[4].execution_count = 3, 2
    return nb


def _rerun_one_cell(nb):
    nb.cells[2].execution_count = 4  # cell 2 re-run by hand after the others
    return nb


def _outputs_only_stripped(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    return nb


def _one_cell_unexecuted(nb):
    nb.cells[4].execution_count, nb.cells[4].outputs = None, []
    return nb


@pytest.fixture
def notebook_folder(tmp_path):
    """A temporary notebooks/ folder holding one well-executed copy (plus a checkpoint)."""
    (tmp_path / ".ipynb_checkpoints").mkdir()
    nbformat.write(_stripped(_executed_notebook()), tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb")
    nbformat.write(_executed_notebook(), tmp_path / "00_ok.ipynb")
    return tmp_path


def _problems_in(folder):
    return {p.name: execution_problems(nbformat.read(p, as_version=4)) for p in course_notebooks(folder)}


def test_guard_accepts_a_notebook_executed_in_order(notebook_folder):
    assert _problems_in(notebook_folder) == {"00_ok.ipynb": []}  # the checkpoint copy is ignored


@pytest.mark.parametrize("damage,expected", [
    (_stripped, "never executed"),
    (_reordered, "has execution_count 3, expected 2"),
    (_rerun_one_cell, "has execution_count 4, expected 2"),
    (_outputs_only_stripped, "no cell has a stored output"),
    (_one_cell_unexecuted, "1 code cell(s) never executed (execution_count None): cells 4"),
])
def test_guard_rejects_a_damaged_copy(notebook_folder, damage, expected):
    nbformat.write(damage(_executed_notebook()), notebook_folder / "01_damaged.ipynb")
    problems = _problems_in(notebook_folder)
    assert problems["00_ok.ipynb"] == []
    assert any(expected in p for p in problems["01_damaged.ipynb"]), problems["01_damaged.ipynb"]
