"""Student copies (`mha-course student`): stubs, round trip, Run All, never losing work.

The core tests use a small fixture notebook with two exercises (one inside a function,
one at the top level of a cell). The parametrized tests at the end run over whatever
course notebooks exist under notebooks/: a fresh student copy of each runs top to bottom
with every stub unfinished, each check cell saying "not finished yet" and a summary last.
"""
import ast
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from mha_course import check
from mha_course.tools import cli

ROOT = Path(__file__).resolve().parents[1]
COURSE_NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
STUB = re.compile(r'^(\s*)# Your code here \(about \d+ lines?\)[^\n]*\n'
                  r'(\s*raise NotImplementedError\("[^\n]*"\)|(\s*\w+ = \.\.\.  # replace \.\.\. with your answer\n?)*)$',
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
                      "    m = np.max(x, axis=axis, keepdims=True)\n    e = np.exp(x - np.where(np.isfinite(m), m, 0))\n"
                      "    total = e.sum(axis=axis, keepdims=True)\n    return e / np.where(total == 0, 1, total)\n"
                      "    ### END SOLUTION",
                      execution_count=2),
        new_code_cell("assert check.softmax(my_softmax)\n# the softmax of two huge equal logits\n"
                      "print(my_softmax(np.array([1e4, 1e4])))", execution_count=3,
                      outputs=[new_output("stream", name="stdout", text="✔ softmax: all 4 cases match\n[0.5 0.5]\n")]),
        new_code_cell("# the package's softmax of two huge equal logits\nprint(mc.softmax(np.array([1e4, 1e4])))",
                      execution_count=4, outputs=[new_output("stream", name="stdout", text="[0.5 0.5]\n")]),
        new_markdown_cell("Now count parameters."),
        new_code_cell("# Exercise 9.2: the shape of every stage\nB, T, D, H = 2, 3, 4, 2\n"
                      "### BEGIN SOLUTION\nmy_shapes = mc.trace(np.zeros((B, T, D)), "
                      "mc.init_params(D, rng=np.random.default_rng(0)), H).shapes\n### END SOLUTION\n"
                      "print(type(my_shapes).__name__)",
                      execution_count=5, outputs=[new_output("stream", name="stdout", text="dict\n")]),
        new_code_cell("assert check.stage_shapes(my_shapes, B, T, D, H)\nprint(my_shapes['weights'])",
                      execution_count=6),
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
    return STUB.sub(lambda m: next(blocks) + ("\n" if m[0].endswith("\n") else ""), student_source)


def exercise_cells(nb) -> list:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]


def paste_solutions(student_nb, original_nb, upto: int):
    """A copy of the student notebook with the solutions of its first ``upto`` exercise cells back."""
    nb = nbformat.from_dict(student_nb)
    for i in exercise_cells(original_nb)[:upto]:
        nb.cells[i].source = paste_back(nb.cells[i].source, original_nb.cells[i].source)
    return nb


def execute(nb, cwd):
    """Run nb top to bottom on this interpreter's kernel as `mha-course execute` does; return nb.

    A cell that raises (other than one tagged raises-exception) fails the test, naming the cell.
    """
    try:
        cli._run_client(nb, Path(cwd) / "student-copy.ipynb", timeout=120)
    except cli.NotebookRunError as err:
        pytest.fail(str(err))
    return nb


def printed(cell) -> str:
    """What a cell printed on stdout."""
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")


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
        "    # Your code here (about 4 lines). Hint: subtract each row's maximum",
        '    raise NotImplementedError("Exercise 9.1: a numerically stable softmax")',
    ]
    compile(out, "<stub>", "exec")  # the stub is valid Python


def test_stub_quotes_are_escaped_and_code_stays_valid():
    src = '# Exercise 1.2: the "chief" merges\ndef f():\n    ### BEGIN SOLUTION\n    x = 1\n    ### END SOLUTION'
    out = cli.stub_solutions(src)
    namespace = {}
    exec(compile(out, "<stub>", "exec"), namespace)
    with pytest.raises(NotImplementedError, match=r'Exercise 1.2: the "chief" merges'):
        namespace["f"]()


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"])
def test_unbalanced_markers_are_refused(src):
    with pytest.raises(cli.StudentCopyError, match="SOLUTION"):
        cli.stub_solutions(src)


def test_top_level_stub_assigns_ellipsis_and_keeps_going():
    out = cli.stub_solutions(fixture_notebook().cells[6].source)
    assert "my_shapes = ...  # replace ... with your answer" in out and "raise" not in out
    namespace = {"np": __import__("numpy"), "mc": __import__("mha_course")}
    exec(compile(out, "<stub>", "exec"), namespace)  # runs: Run All does not stop here
    assert namespace["my_shapes"] is Ellipsis


def test_check_cells_are_softened_only_in_the_student_copy():
    original = fixture_notebook()
    student = cli.student_notebook(original)
    assert student.cells[3].source == ("if check.softmax(my_softmax):\n    # the softmax of two huge equal logits\n"
                                       "    print(my_softmax(np.array([1e4, 1e4])))")
    assert student.cells[7].source == ("if check.stage_shapes(my_shapes, B, T, D, H):\n"
                                       "    print(my_shapes['weights'])")
    assert original.cells[3].source.startswith("assert check.softmax(my_softmax)\n")  # the answer key keeps it
    assert student.cells[-1].source == cli.SUMMARY_CELL and len(student.cells) == len(original.cells) + 1
    assert cli.student_notebook(original) == student  # deterministic (cell ids too): a re-run is no clash


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
    for o, r in zip(original.cells, restored.cells):
        assert r.source in (o.source, cli.soften_check(o.source))


# ---------------------------------------------------------------- execution of student copies
def test_a_fresh_student_copy_runs_all_and_the_summary_counts(course):
    original = nbformat.read(course, as_version=4)
    student = cli.student_notebook(original)
    wrong = nbformat.from_dict(student)
    wrong.cells[2].source = "def my_softmax(x, axis=-1):\n    e = np.exp(x)\n    return e / e.sum(axis=axis, keepdims=True)"
    wrong.cells[6].source = paste_back(wrong.cells[6].source, original.cells[6].source)
    runs = {solved: execute(nb, course.parent) for solved, nb in
            [(0, student), ("wrong", wrong), (2, paste_solutions(student, original, 2))]}
    for i in (3, 7):  # every check cell of the untouched copy: one line, "not finished yet"
        assert len(printed(runs[0].cells[i]).splitlines()) == 1 and "not finished yet" in printed(runs[0].cells[i])
    assert "Looks like: softmax without subtracting the maximum" in printed(runs["wrong"].cells[3])
    assert "(2, 2, 3, 3)" in printed(runs[2].cells[7])  # the lines after a passing check run
    if hasattr(check, "summary"):
        for solved, done in ((0, 0), ("wrong", 1), (2, 2)):
            assert f"{done} of 2 exercises done" in printed(runs[solved].cells[-1]), solved


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
    work = fixture_notebook()
    work.cells[2].source += "\n# learner's work"
    nbformat.write(work, out / "notebooks" / second.name)
    mine = (out / "notebooks" / second.name).read_bytes()
    assert cli.main(["student", str(out), "--notebooks", str(course), str(second)]) == 1
    assert not (out / "notebooks" / course.name).exists()
    assert (out / "notebooks" / second.name).read_bytes() == mine


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
    for o, r in zip(original.cells, restored.cells):
        assert r.source in (o.source, cli.soften_check(o.source))  # only stubs and check asserts differ
    assert len(student.cells) == len(original.cells) + bool(n_blocks)  # + the summary cell
    for o, s in zip(original.cells, student.cells):
        if s.source == o.source and s.get("outputs") != []:
            assert s == o  # untouched cells are kept exactly
    for c in code:
        if "### BEGIN SOLUTION" in c.source:
            assert cli.exercise_label(c.source) != "Exercise", f"exercise cell without '# Exercise N.k:'\n{c.source}"


def check_cells(nb) -> list:
    """Index of the check cell (the next code cell) of each exercise cell."""
    return [next(j for j in range(i + 1, len(nb.cells)) if nb.cells[j].cell_type == "code")
            for i in exercise_cells(nb)]


def learner_names(nb) -> set:
    """Names the exercise cells define (functions, or variables assigned at the top level)."""
    found = set()
    for i in exercise_cells(nb):
        found |= {a or b for a, b in re.findall(r"^def (\w+)|^(\w+)\s*=", nb.cells[i].source, re.M)}
    return found


def _names(source: str):
    """(names a cell's code stores, names it reads); ``None`` when it is not plain Python."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    stored, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (stored if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.alias)):
            stored.add(getattr(node, "asname", None) or node.name.split(".")[0])
    return stored, read


def _display_only(cell, later) -> bool:
    """A plot or widget cell whose names no later cell reads: it cannot change what follows."""
    shows = "plt.show()" in cell.source or cell.source.startswith("# NBVAL_IGNORE_OUTPUT")
    names = _names(cell.source) if shows else None
    if names is None:
        return False
    needed = set().union(*[(n[1] - n[0]) if n else {"*"} for n in map(_names, later)])
    return "*" not in needed and not names[0] & needed


def _widget_cells(nb, protected: set) -> set:
    """Indices of the ``# NBVAL_IGNORE_OUTPUT`` cells (widgets, timings) and of the cells reading their names.

    Widget cells are the answer key's own (nbval runs them); under two kernels at once a live
    view once waited for the whole cell timeout, so the student-copy run leaves them out.
    Exercise and check cells (``protected``) are never left out.
    """
    dropped, names = set(), set()
    for i, cell in enumerate(nb.cells):
        found = _names(cell.source) if cell.cell_type == "code" and i not in protected else None
        if found and (cell.source.startswith("# NBVAL_IGNORE_OUTPUT") or found[1] & names):
            dropped.add(i)
            names |= found[0]
    return dropped


def run_all_cells(original, nb):
    """What Run All of the student copy needs to run to reach every check and the summary.

    Cut after the last check cell (the cells after it are the answer key's own, which nbval
    runs; the test makes sure none uses a learner's name), and without the cells that only
    draw (plots, widgets) and define nothing a later cell reads: they cannot stop Run All,
    and they are most of its time.
    """
    nb = nbformat.from_dict(nb)
    kept = nb.cells[:check_cells(original)[-1] + 1]
    for i, cell in enumerate(kept):
        cell.metadata["index_in_student_copy"] = i
    widgets = _widget_cells(nb, set(exercise_cells(original)) | set(check_cells(original)))
    code = [c.source for c in kept if c.cell_type == "code"]
    keep = [c for i, c in enumerate(kept) if i not in widgets and (c.cell_type != "code" or not _display_only(
        c, code[sum(k.cell_type == "code" for k in kept[:i + 1]):]))]
    nb.cells = keep + nb.cells[-1:]
    return nb


def run_student_copy(path: Path):
    """(path, the executed student copy as text, or the one-line failure, or None: no exercise)."""
    original = nbformat.read(path, as_version=4)
    if not exercise_cells(original):
        return path, None  # no exercise: the copy is the answer key, which nbval runs
    nb = run_all_cells(original, cli.student_notebook(original))
    try:
        cli._run_client(nb, path, timeout=300)
    except cli.NotebookRunError as err:
        return path, str(err)
    return path, nbformat.writes(nb)


@pytest.fixture(scope="module")
def executed_student_copies():
    """Every course notebook's fresh student copy, executed top to bottom, two at a time.

    In two processes, not threads: two nbclient clients in threads of one process share
    zmq and event-loop state, and a widget cell then waited for the whole cell timeout.
    """
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = dict(pool.map(run_student_copy, COURSE_NOTEBOOKS))
    return {p: nbformat.reads(r, as_version=4) if r and r.startswith("{") else r for p, r in done.items()}


@needs_notebooks
@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=[p.name for p in COURSE_NOTEBOOKS])
def test_course_student_copy_runs_all_with_every_stub_unfinished(path, executed_student_copies):
    original = nbformat.read(path, as_version=4)
    ran = executed_student_copies[path]
    if ran is None:
        assert cli.student_notebook(original) == original
        pytest.skip("no exercise in this notebook: its student copy is the answer key")
    assert not isinstance(ran, str), ran  # Run All stopped: the message names the notebook and the cell
    by_index = {c.metadata.get("index_in_student_copy"): c for c in ran.cells}
    for j in check_cells(original):
        said = printed(by_index[j])
        assert len(said.splitlines()) == 1 and "not finished yet" in said, (j, said)
    if hasattr(check, "summary"):
        assert re.search(r"\b0 of \d+ exercises? done", printed(ran.cells[-1])), printed(ran.cells[-1])
    names = learner_names(original)
    for cell in original.cells[check_cells(original)[-1] + 1:]:
        used = {n for n in names if cell.cell_type == "code" and re.search(rf"\b{n}\b", cell.source)}
        assert not used, f"a cell after the last check uses the learner's {used}; move it into a check cell"
