"""Student copies (`mha-course student`, tools/student.py): writing them, Run All, never losing work.

The stubs themselves: test_student_stubs.py; what goes where and what a target holds:
test_student_plan.py; ``--update``: test_student_update.py.

The core tests use a small fixture notebook with two exercises (one inside a function,
one at the top level of a cell). The parametrized tests at the end run over whatever
course notebooks exist under notebooks/: a fresh student copy of each runs top to bottom
with every stub unfinished, each check cell saying "not finished yet" and a summary last.
"""
import ast
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import pytest
from cli_helpers import (
    SOLUTION,
    STUB,
    course_fixture,  # noqa: F401  (the fixture course)
    exercise_cells,
    fixture_notebook,
    one_line_error,
    paste_back,
    paste_solutions,
    read_only,
    run_student_subprocess,
    small_course_fixture,  # noqa: F401  (the fixture small_course)
    student,
)

from mha_course import check
from mha_course.tools import cli
from mha_course.tools import execute as ex
from mha_course.tools import student as st
from mha_course.tools.torch_rule import notebook_needs_torch, torch_skip_reason

ROOT = Path(__file__).resolve().parents[2]
COURSE_NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def execute(nb, cwd):
    """Run nb top to bottom on this interpreter's kernel as `mha-course execute` does; return nb.

    A cell that raises (other than one tagged raises-exception) fails the test, naming the cell.
    """
    try:
        ex.run_client(nb, Path(cwd) / "student-copy.ipynb", timeout=120)
    except ex.NotebookRunError as err:
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


# ---------------------------------------------------------------- execution of student copies
def test_a_fresh_student_copy_runs_all_and_the_summary_counts(course):
    original = nbformat.read(course, as_version=4)
    student = st.student_notebook(original)
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
        st.student_notebook(nbformat.read(course, as_version=4)))
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
_NO_TORCH = torch_skip_reason("this notebook's student copy")
# notebooks that import torch: their student copies skip, with the reason, without torch (the torch rule)
SKIPPED = [p for p in COURSE_NOTEBOOKS if _NO_TORCH and notebook_needs_torch(p)]
RUN_ALL_PARAMS = [pytest.param(p, id=p.name, marks=[pytest.mark.skip(reason=_NO_TORCH)] if p in SKIPPED else [])
                  for p in COURSE_NOTEBOOKS]


@needs_notebooks
@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=[p.name for p in COURSE_NOTEBOOKS])
def test_course_notebook_is_stubbed_and_nothing_else_changes(path):
    original = nbformat.read(path, as_version=4)
    student = st.student_notebook(original)
    code = [c for c in original.cells if c.cell_type == "code"]
    n_blocks = sum(len(SOLUTION.findall(c.source)) for c in code)
    assert not [c for c in student.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert sum(len(STUB.findall(c.source)) for c in student.cells if c.cell_type == "code") == n_blocks
    restored = paste_solutions(student, original, upto=10 ** 6)
    for o, r in zip(original.cells, restored.cells):
        assert r.source in (o.source, st.soften_check(o.source))  # only stubs and check asserts differ
    assert len(student.cells) == len(original.cells) + bool(n_blocks)  # + the summary cell
    for o, s in zip(original.cells, student.cells):
        if s.source == o.source and s.get("outputs") != []:
            assert s == o  # untouched cells are kept exactly
    for c in code:
        if "### BEGIN SOLUTION" in c.source:
            assert st.exercise_label(c.source) != "Exercise", f"exercise cell without '# Exercise N.k:'\n{c.source}"


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
    nb = run_all_cells(original, st.student_notebook(original))
    try:
        ex.run_client(nb, path, timeout=300)
    except ex.NotebookRunError as err:
        return path, str(err)
    return path, nbformat.writes(nb)


@pytest.fixture(scope="module")
def executed_student_copies():
    """Every course notebook's fresh student copy, executed top to bottom, two at a time.

    In two processes, not threads: two nbclient clients in threads of one process share
    zmq and event-loop state, and a widget cell then waited for the whole cell timeout.
    """
    with ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = dict(pool.map(run_student_copy, [p for p in COURSE_NOTEBOOKS if p not in SKIPPED]))
    return {p: nbformat.reads(r, as_version=4) if r and r.startswith("{") else r for p, r in done.items()}


@needs_notebooks
@pytest.mark.parametrize("path", RUN_ALL_PARAMS)
def test_course_student_copy_runs_all_with_every_stub_unfinished(path, executed_student_copies):
    original = nbformat.read(path, as_version=4)
    ran = executed_student_copies[path]
    if ran is None:
        assert st.student_notebook(original) == original
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


# ================================================================ under attack: no learner work lost
# ---------------------------------------------------------------- never lose a learner's work


def test_a_backup_is_never_overwritten(small_course, tmp_path, capsys, monkeypatch):
    out = tmp_path / "student"
    student(out, "--notebooks", small_course[0])
    copy = out / "notebooks" / small_course[0].name
    monkeypatch.setattr(st.time, "strftime", lambda fmt: "20260101-000000")  # every run in one second
    kept = []
    for note in ("FIRST", "SECOND", "THIRD"):
        copy.write_text(copy.read_text().replace("# Small", f"# Small {note}"))
        kept.append(copy.read_bytes())
        assert student(out, "--notebooks", small_course[0], "--overwrite") == 0
    backups = sorted((out / "backups").rglob(small_course[0].name))
    assert sorted(p.read_bytes() for p in backups) == sorted(kept)


# ---------------------------------------------------------------- interrupted writes
KILL_AT_REPLACE = "os.replace = os.link = lambda a, b: os.kill(os.getpid(), signal.SIGKILL)"
KILL_AT_FSYNC = "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)"
INTERRUPT_SECOND_REPLACE = """
_n = [0]
def _once(real):
    def put(a, b):
        _n[0] += 1
        if _n[0] == 2:
            raise KeyboardInterrupt
        real(a, b)
    return put
os.replace, os.link = _once(os.replace), _once(os.link)
"""


def assert_whole(out: Path, allowed: dict):
    """Every notebook under OUTDIR/notebooks is one of the ``allowed`` texts (never cut short)."""
    for p in (out / "notebooks").glob("*.ipynb"):
        assert p.read_bytes() in allowed[p.name], p
        json.loads(p.read_bytes())


def fresh_copies(small_course):
    return {p.name: (nbformat.writes(st.student_notebook(nbformat.read(p, as_version=4))) + "\n").encode()
            for p in small_course}


@pytest.mark.parametrize("prelude", [KILL_AT_REPLACE, KILL_AT_FSYNC, INTERRUPT_SECOND_REPLACE],
                         ids=["sigkill-before-replace", "sigkill-mid-write", "sigint-between-files"])
def test_an_interrupted_overwrite_leaves_every_file_whole(small_course, tmp_path, prelude):
    out = tmp_path / "student"
    assert student(out, "--notebooks", *small_course) == 0
    edited = {}
    for p in (out / "notebooks").glob("*.ipynb"):
        p.write_text(p.read_text().replace("# Small", "# Small EDIT"))
        edited[p.name] = p.read_bytes()
    run = run_student_subprocess([out, "--notebooks", *small_course, "--overwrite"], prelude)
    assert run.returncode == (130 if "KeyboardInterrupt" in prelude else -9), run.stderr
    fresh = fresh_copies(small_course)
    assert_whole(out, {n: {edited[n], fresh[n]} for n in fresh})
    # no learner edit is lost: each is either still in place or in a backup
    backups = {p.read_bytes() for p in (out / "backups").rglob("*.ipynb")} if (out / "backups").exists() else set()
    for p in (out / "notebooks").glob("*.ipynb"):
        assert p.read_bytes() == edited[p.name] or edited[p.name] in backups


def test_a_killed_fresh_write_leaves_nothing_a_rerun_mistakes_for_work(small_course, tmp_path, capsys):
    out = tmp_path / "student"
    run = run_student_subprocess([out, "--notebooks", *small_course], KILL_AT_REPLACE)
    assert run.returncode == -9
    assert not list((out / "notebooks").glob("*.ipynb"))
    assert student(out, "--notebooks", *small_course) == 0  # no --overwrite needed
    assert_whole(out, {n: {t} for n, t in fresh_copies(small_course).items()})


@pytest.mark.parametrize("broken", [b"", b'{"cells": [', b'{"not": "a notebook"}'],
                         ids=["empty", "truncated", "other-json"])
def test_a_copy_that_is_not_a_notebook_is_not_learner_work(small_course, tmp_path, capsys, broken):
    out = tmp_path / "student"
    (out / "notebooks").mkdir(parents=True)
    (out / "notebooks" / small_course[0].name).write_bytes(broken)  # what an old interrupted write left
    assert student(out, "--notebooks", small_course[0]) == 0
    said = capsys.readouterr().out
    assert "not a valid notebook" in said and "not learner work" in said
    assert_whole(out, {n: {t} for n, t in fresh_copies(small_course).items()})
    assert [p.read_bytes() for p in (out / "backups").rglob("*.ipynb")] == [broken]


def test_a_full_disk_leaves_nothing_half_written(small_course, tmp_path):
    out = tmp_path / "student"
    size = len(fresh_copies(small_course)[small_course[0].name])
    run = run_student_subprocess([out, "--notebooks", *small_course], limit_bytes=size // 2)
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "disk space" in run.stderr, run.stderr
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_a_full_disk_during_overwrite_keeps_the_learners_copy(small_course, tmp_path):
    out = tmp_path / "student"
    student(out, "--notebooks", small_course[0])
    copy = out / "notebooks" / small_course[0].name
    copy.write_text(copy.read_text().replace("# Small", "# Small EDIT"))
    edited = copy.read_bytes()
    run = run_student_subprocess([out, "--notebooks", small_course[0], "--overwrite"], limit_bytes=len(edited) // 2)
    assert run.returncode == 2 and "disk space" in run.stderr, run.stderr
    assert copy.read_bytes() == edited
    assert not list((out / "notebooks").glob(".*"))  # no temporary file left behind


# ---------------------------------------------------------------- one line instead of a traceback
def test_a_read_only_outdir_is_one_line(small_course, tmp_path, capsys):
    folder = tmp_path / "read-only"
    folder.mkdir()
    read_only(folder, True)
    try:
        assert student(folder / "student", "--notebooks", small_course[0]) == 2
        err = one_line_error(capsys, folder, "write to")
        assert os.listdir(folder) == []
        read_only(folder, False)
        (folder / "student").mkdir()
        read_only(folder / "student", True)
        assert student(folder / "student", "--notebooks", small_course[0]) == 2
        one_line_error(capsys, folder / "student", "write to")
    finally:
        for f in (folder / "student", folder):
            if f.exists():
                read_only(f, False)
    assert "Traceback" not in err


# ---------------------------------------------------------------- paths, leftovers, races, modes
@pytest.mark.parametrize("outdir", ["", "  "], ids=["empty", "blank"])
def test_an_empty_outdir_is_refused_and_nothing_lands_in_the_current_folder(small_course, tmp_path, monkeypatch,
                                                                             capsys, outdir):
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir(tmp_path))
    assert student(outdir, "--notebooks", *small_course) == 2
    one_line_error(capsys, "OUTDIR is empty")
    assert sorted(os.listdir(tmp_path)) == before


def hidden_files(folder: Path) -> list:
    return sorted(p.name for p in folder.rglob(".*") if p.is_file())


def test_temporaries_of_killed_runs_are_removed_by_the_next_run(small_course, tmp_path):
    out = tmp_path / "student"
    for _ in range(3):  # killed while writing each time: each run leaves its temporaries
        run = run_student_subprocess([out, "--notebooks", *small_course], KILL_AT_FSYNC)
        assert run.returncode == -9
    assert hidden_files(out)
    assert student(out, "--notebooks", *small_course) == 0
    assert hidden_files(out) == []


SAVE_IN_THE_GAP = """
import itertools
_count = itertools.count()
def _saving(real):
    def put(a, b):
        if next(_count) == 0:  # the learner's JupyterLab saves right before the copy goes in
            with open(b, "w") as f:
                f.write('{{"cells": [], "metadata": {{}}, "nbformat": 4, "nbformat_minor": 5, "note": "SAVE 484"}}')
        real(a, b)
    return put
os.replace, os.link = _saving(os.replace), _saving(os.link)
"""


def test_a_save_that_lands_while_overwriting_is_kept(small_course, tmp_path):
    out = tmp_path / "student"
    assert student(out, "--notebooks", small_course[0]) == 0
    copy = out / "notebooks" / small_course[0].name
    copy.write_text(copy.read_text().replace("# Small", "# Small SAVE 483"))
    run = run_student_subprocess([out, "--notebooks", small_course[0], "--overwrite"], SAVE_IN_THE_GAP.format())
    assert run.returncode == 0, run.stderr
    kept = [p.read_text() for p in (out / "backups").rglob("*.ipynb")] + [copy.read_text()]
    assert any("SAVE 483" in k for k in kept) and any("SAVE 484" in k for k in kept), kept


SAVER = """
import json, os, sys, time
path, n = sys.argv[1], 0
with open(path + ".log", "w") as log:
    while not os.path.exists(path + ".stop"):
        try:
            with open(path) as f:
                found = json.load(f).get("metadata", {}).get("save")
        except (OSError, ValueError):
            found = "gone"
        if found is None and n:  # the student copy is there: it replaced save n (or a later one)
            log.write(f"copy-after {n}\\n")
        n += 1
        with open(path + ".saving", "w") as f:
            json.dump({"cells": [], "metadata": {"save": n}, "nbformat": 4, "nbformat_minor": 5}, f)
        os.replace(path + ".saving", path)  # JupyterLab's atomic save
        time.sleep(0.003)
"""


def test_saves_every_3_ms_during_overwrite_lose_nothing(small_course, tmp_path):
    """A learner saving every 3 ms while `student --overwrite` runs 8 times: each save the copy replaced is kept."""
    out = tmp_path / "student"
    assert student(out, "--notebooks", small_course[0]) == 0
    copy = out / "notebooks" / small_course[0].name
    saver = subprocess.Popen([sys.executable, "-c", SAVER, str(copy)])
    try:
        time.sleep(0.2)
        for _ in range(8):
            run = run_student_subprocess([out, "--notebooks", small_course[0], "--overwrite"])
            assert run.returncode == 0, run.stderr
    finally:
        Path(f"{copy}.stop").write_text("")
        saver.wait(timeout=60)
    backed_up = {json.loads(p.read_text()).get("metadata", {}).get("save") for p in (out / "backups").rglob("*.ipynb")}
    replaced = [int(line.split()[1]) for line in Path(f"{copy}.log").read_text().splitlines()]
    assert replaced, "the student copy never replaced a save: the test did not race"
    lost = [n for n in replaced if n not in backed_up]
    assert not lost, f"saves replaced by the student copy and in no backup: {lost}"


def nbformat3_notebook() -> str:
    from nbformat import v3
    nb = v3.new_notebook(worksheets=[v3.new_worksheet(cells=[v3.new_code_cell(input="x = 1 # my work")])])
    return v3.nbjson.writes(nb)


def test_an_nbformat_3_notebook_is_learner_work(small_course, tmp_path, capsys):
    out = tmp_path / "student"
    (out / "notebooks").mkdir(parents=True)
    target = out / "notebooks" / small_course[0].name
    target.write_text(nbformat3_notebook())
    before = target.read_bytes()
    assert student(out, "--notebooks", small_course[0]) == 1  # refused without --overwrite
    assert target.read_bytes() == before and not (out / "backups").exists()
    assert str(target) in capsys.readouterr().err
    assert student(out, "--notebooks", small_course[0], "--overwrite") == 0
    assert [p.read_bytes() for p in (out / "backups").rglob("*.ipynb")] == [before]
    assert "not learner work" not in capsys.readouterr().out


def test_student_copies_keep_0644_or_the_old_mode(small_course, tmp_path):
    out = tmp_path / "student"
    old = os.umask(0o022)
    try:
        assert student(out, "--notebooks", *small_course) == 0
        copies = [out / "notebooks" / p.name for p in small_course]
        assert [os.stat(p).st_mode & 0o777 for p in copies] == [0o644, 0o644]
        copies[0].write_text(copies[0].read_text().replace("# Small", "# Small EDIT"))
        os.chmod(copies[0], 0o664)  # a shared workshop folder
        assert student(out, "--notebooks", *small_course, "--overwrite") == 0
        assert os.stat(copies[0]).st_mode & 0o777 == 0o664
        backup = next((out / "backups").rglob(small_course[0].name))
        assert os.stat(backup).st_mode & 0o777 == 0o664
    finally:
        os.umask(old)


