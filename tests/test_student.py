"""Student copies (`mha-course student`): stubs, round trip, execution, never losing work.

The core tests use a small fixture notebook with two exercises (one inside a function,
one at the top level of a cell). The parametrized tests at the end run over whatever
course notebooks exist under notebooks/ (and skip cleanly while there are none).
"""
import re
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from mha_course import cli

ROOT = Path(__file__).resolve().parents[1]
COURSE_NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
STUB = re.compile(r'^(\s*)# Your code here \(about \d+ lines?\)[^\n]*\n\s*raise NotImplementedError\("[^\n]*"\)$',
                  re.M)
SOLUTION = re.compile(r"^[ \t]*### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION$", re.M | re.S)


def fixture_notebook():
    """Two exercises, their check cells, a later cell using the result, outputs everywhere."""
    cells = [
        new_markdown_cell("# Fixture\nSee the [glossary](../docs/glossary.md), "
                          "[the docs](https://example.org/x.md) and [the next notebook](10_other.ipynb)."),
        new_code_cell("import numpy as np\nimport mha_course as mc\nfrom mha_course import check",
                      execution_count=1),
        new_code_cell("# Exercise 9.1: a numerically stable softmax\ndef my_softmax(x, axis=-1):\n"
                      "    ### BEGIN SOLUTION\n    # subtract each row's maximum\n"
                      "    z = x - x.max(axis=axis, keepdims=True)\n    e = np.exp(z)\n"
                      "    return e / e.sum(axis=axis, keepdims=True)\n    ### END SOLUTION",
                      execution_count=2),
        new_code_cell("assert check.softmax(my_softmax)", execution_count=3,
                      outputs=[new_output("stream", name="stdout", text="✔ softmax: all 4 cases match\n")]),
        new_code_cell("# the softmax of two huge equal logits\nprint(my_softmax(np.array([1e4, 1e4])))",
                      execution_count=4, outputs=[new_output("stream", name="stdout", text="[0.5 0.5]\n")]),
        new_markdown_cell("Now count parameters."),
        new_code_cell("# Exercise 9.2: count the parameters\nparams = mc.init_params(6, rng=np.random.default_rng(0))\n"
                      "### BEGIN SOLUTION\nn_params = 4 * 6 ** 2\n### END SOLUTION\nprint(n_params)",
                      execution_count=5, outputs=[new_output("stream", name="stdout", text="144\n")]),
        new_code_cell("assert n_params == mc.count_params(params)", execution_count=6),
        new_code_cell("print('done')", execution_count=7,
                      outputs=[new_output("stream", name="stdout", text="done\n")]),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(cli.KERNELSPEC)
    return nb


@pytest.fixture
def course(tmp_path):
    """A tiny course folder: notebooks/09_fixture.ipynb and docs/glossary.md."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "glossary.md").write_text("# Glossary\n")
    (tmp_path / "notebooks").mkdir()
    path = tmp_path / "notebooks" / "09_fixture.ipynb"
    nbformat.write(fixture_notebook(), path)
    return path


def paste_back(student_source: str, original_source: str) -> str:
    """Replace the stubs of a student cell by the original's solution blocks, in order."""
    blocks = iter(SOLUTION.findall(original_source))
    return STUB.sub(lambda m: next(blocks), student_source)


def paste_solutions(student_nb, original_nb, upto: int):
    """A copy of the student notebook with the solutions of its first ``upto`` exercise cells back."""
    nb = nbformat.from_dict(student_nb)
    exercise_cells = [i for i, c in enumerate(original_nb.cells)
                      if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    for i in exercise_cells[:upto]:
        nb.cells[i].source = paste_back(nb.cells[i].source, original_nb.cells[i].source)
    return nb


def execute(nb, cwd):
    """Run nb on this interpreter's kernel; return (index of the first failing cell or None, nb)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    with tempfile.TemporaryDirectory() as tmp:
        client = NotebookClient(nb, timeout=120, km=cli._current_env_kernel_manager(tmp),
                                resources={"metadata": {"path": str(cwd)}}, record_timing=False)
        try:
            client.execute()
        except CellExecutionError:
            pass
    failing = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
               and "raises-exception" not in c.metadata.get("tags", [])
               and any(o.output_type == "error" for o in c.get("outputs", []))]
    return (failing[0] if failing else None), nb


def cell_text(cell) -> str:
    """Everything a cell printed, including its error."""
    parts = []
    for o in cell.outputs:
        parts += [o.get("text", ""), o.get("ename", ""), o.get("evalue", "")] + o.get("traceback", [])
    return "\n".join(parts)


# ---------------------------------------------------------------- the pure transformation
def test_stub_keeps_indentation_label_and_hint():
    src = fixture_notebook().cells[2].source
    out = cli.stub_solutions(src)
    assert out.splitlines() == [
        "# Exercise 9.1: a numerically stable softmax",
        "def my_softmax(x, axis=-1):",
        "    # Your code here (about 3 lines). Hint: subtract each row's maximum",
        '    raise NotImplementedError("Exercise 9.1: a numerically stable softmax")',
    ]
    compile(out, "<stub>", "exec")  # the stub is valid Python


def test_stub_quotes_are_escaped_and_code_stays_valid():
    src = '# Exercise 1.2: the "chief" merges\n### BEGIN SOLUTION\nx = 1\n### END SOLUTION'
    out = cli.stub_solutions(src)
    namespace = {}
    with pytest.raises(NotImplementedError, match=r'Exercise 1.2: the "chief" merges'):
        exec(compile(out, "<stub>", "exec"), namespace)


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"])
def test_unbalanced_markers_are_refused(src):
    with pytest.raises(cli.StudentCopyError, match="SOLUTION"):
        cli.stub_solutions(src)


def test_student_notebook_stubs_clears_and_keeps_everything_else():
    original = fixture_notebook()
    before = nbformat.writes(original)
    student = cli.student_notebook(original)
    assert nbformat.writes(original) == before  # the input is not changed
    assert "BEGIN SOLUTION" not in nbformat.writes(student)
    cleared = {2, 3, 6, 7}  # the two exercise cells and their check cells
    for i, (o, s) in enumerate(zip(original.cells, student.cells)):
        if i in cleared:
            assert s.outputs == [] and s.execution_count is None, i
        else:
            assert s == o, i  # source, outputs, metadata, execution count all kept
    assert student.metadata == original.metadata


def test_pasting_the_solutions_back_restores_the_original_sources():
    original = fixture_notebook()
    restored = paste_solutions(cli.student_notebook(original), original, upto=99)
    assert [c.source for c in restored.cells] == [c.source for c in original.cells]


# ---------------------------------------------------------------- execution of student copies
def test_student_copy_fails_exactly_at_each_stub_and_passes_with_solutions(course):
    original = nbformat.read(course, as_version=4)
    student = cli.student_notebook(original)
    expected_stops = [(3, "Exercise 9.1: a numerically stable softmax"),  # the check cell of 9.1
                      (6, "Exercise 9.2: count the parameters")]         # 9.2 raises in its own cell
    for solved, (stop, label) in enumerate(expected_stops):
        failing, ran = execute(paste_solutions(student, original, solved), course.parent)
        assert failing == stop, (solved, failing)
        assert "NotImplementedError" in cell_text(ran.cells[stop]) and label in cell_text(ran.cells[stop])
    failing, ran = execute(paste_solutions(student, original, 2), course.parent)
    assert failing is None
    assert "✔ softmax: all 4 cases match" in cell_text(ran.cells[3])


def test_a_wrong_solution_pasted_into_the_student_copy_is_named(course):
    original = nbformat.read(course, as_version=4)
    nb = cli.student_notebook(original)
    nb.cells[2].source = ("def my_softmax(x, axis=-1):\n    e = np.exp(x)\n"
                          "    return e / e.sum(axis=axis, keepdims=True)")
    failing, ran = execute(nb, course.parent)
    assert failing == 3
    assert "Looks like: softmax without subtracting the maximum" in cell_text(ran.cells[3])


# ---------------------------------------------------------------- the command never loses work
def test_command_writes_copies_and_linked_files(course, tmp_path, capsys):
    nbformat.write(fixture_notebook(), course.with_name("10_other.ipynb"))  # linked, not asked for
    out = tmp_path / "student"
    assert cli.main(["student", str(out), "--notebooks", str(course)]) == 0
    copy = out / "notebooks" / course.name
    assert nbformat.writes(nbformat.read(copy, as_version=4)) == nbformat.writes(
        cli.student_notebook(nbformat.read(course, as_version=4)))
    assert (out / "docs" / "glossary.md").read_text() == "# Glossary\n"
    assert not (out / "x.md").exists()  # web links are not files to copy
    assert sorted(p.name for p in (out / "notebooks").iterdir()) == [course.name]  # linked notebooks neither


def test_running_twice_keeps_the_learners_edits(course, tmp_path, capsys):
    out = tmp_path / "student"
    assert cli.main(["student", str(out), "--notebooks", str(course)]) == 0
    assert cli.main(["student", str(out), "--notebooks", str(course)]) == 0  # unchanged: fine
    copy = out / "notebooks" / course.name
    nb = nbformat.read(copy, as_version=4)
    nb.cells[2].source += "\n# my own notes"
    nbformat.write(nb, copy)
    (out / "docs" / "glossary.md").write_text("my annotated glossary")
    edited = copy.read_text()
    capsys.readouterr()
    assert cli.main(["student", str(out), "--notebooks", str(course)]) == 1
    err = capsys.readouterr().err
    assert str(copy) in err and "--overwrite" in err and "nothing was written" in err
    assert copy.read_text() == edited
    assert (out / "docs" / "glossary.md").read_text() == "my annotated glossary"


def test_overwrite_keeps_a_timestamped_backup(course, tmp_path, capsys):
    out = tmp_path / "student"
    cli.main(["student", str(out), "--notebooks", str(course)])
    copy = out / "notebooks" / course.name
    copy.write_text(copy.read_text().replace("Now count parameters.", "Now count parameters. MY NOTE"))
    edited = copy.read_text()
    assert cli.main(["student", str(out), "--notebooks", str(course), "--overwrite"]) == 0
    backups = list((out / "backups").glob(f"*/notebooks/{course.name}"))
    assert len(backups) == 1 and backups[0].read_text() == edited
    assert re.fullmatch(r"\d{8}-\d{6}(-\d+)?", backups[0].parents[1].name)
    assert "MY NOTE" not in copy.read_text()
    assert (out / "docs" / "glossary.md").read_text() == "# Glossary\n"
    for note in ("SECOND", "THIRD"):  # two more overwrites, possibly within the same second
        copy.write_text(copy.read_text().replace("Now count parameters.", f"Now count parameters. {note}"))
        assert cli.main(["student", str(out), "--notebooks", str(course), "--overwrite"]) == 0
    kept = sorted(p.read_text() for p in (out / "backups").glob(f"*/notebooks/{course.name}"))
    assert len(kept) == 3 and sum(n in k for k in kept for n in ("MY NOTE", "SECOND", "THIRD")) == 3


def test_nothing_is_written_when_one_of_several_files_clashes(course, tmp_path, capsys):
    second = course.with_name("10_other.ipynb")
    nbformat.write(fixture_notebook(), second)
    out = tmp_path / "student"
    (out / "notebooks").mkdir(parents=True)
    (out / "notebooks" / second.name).write_text("learner's work")
    assert cli.main(["student", str(out), "--notebooks", str(course), str(second)]) == 1
    assert not (out / "notebooks" / course.name).exists()
    assert (out / "notebooks" / second.name).read_text() == "learner's work"


# ---------------------------------------------------------------- the real course notebooks
needs_notebooks = pytest.mark.skipif(not COURSE_NOTEBOOKS, reason="no course notebooks yet")


@needs_notebooks
@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=[p.name for p in COURSE_NOTEBOOKS])
def test_course_notebook_is_stubbed_and_nothing_else_changes(path):
    original = nbformat.read(path, as_version=4)
    student = cli.student_notebook(original)
    code = [c for c in original.cells if c.cell_type == "code"]
    n_blocks = sum(len(SOLUTION.findall(c.source)) for c in code)
    assert not [c for c in student.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert sum(len(STUB.findall(c.source)) for c in student.cells if c.cell_type == "code") == n_blocks
    restored = paste_solutions(student, original, upto=10 ** 6)
    assert [c.source for c in restored.cells] == [c.source for c in original.cells]
    for o, s in zip(original.cells, student.cells):
        if s.source == o.source and s.get("outputs") != []:
            assert s == o  # untouched cells are kept exactly
    for c in code:
        if "### BEGIN SOLUTION" in c.source:
            assert cli.exercise_label(c.source) != "Exercise", f"exercise cell without '# Exercise N.k:'\n{c.source}"


@needs_notebooks
@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=[p.name for p in COURSE_NOTEBOOKS])
def test_course_student_copy_runs_up_to_its_first_stub(path):
    original = nbformat.read(path, as_version=4)
    student = cli.student_notebook(original)
    exercises = [i for i, c in enumerate(original.cells) if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    if not exercises:
        pytest.skip("no exercise in this notebook")
    first, label = exercises[0], cli.exercise_label(original.cells[exercises[0]].source)
    next_code = [i for i, c in enumerate(student.cells) if i > first and c.cell_type == "code"][:1]
    student.cells = student.cells[:(next_code or [first])[0] + 1]  # run only up to its check cell
    failing, ran = execute(student, path.parent)
    assert failing in (first, *next_code), failing
    assert "NotImplementedError" in cell_text(ran.cells[failing]) and label in cell_text(ran.cells[failing])
