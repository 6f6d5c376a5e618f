"""`mha-course student` and `mha-course execute` under attack (issue 9): no learner work lost,
no hang, one line naming the path instead of a traceback.

Interruptions are made deterministic by running the command in a subprocess whose
``os.replace`` (or ``os.fsync``) sends the process SIGKILL or raises KeyboardInterrupt, and
a full disk by ``resource.setrlimit(RLIMIT_FSIZE)`` in the subprocess.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from mha_course.tools import cli

ROOT = Path(__file__).resolve().parents[1]


def small_notebook(note="one"):
    """An exercise, its check cell and a markdown cell: enough to be a course notebook."""
    nb = new_notebook(cells=[
        new_markdown_cell(f"# Small {note}"),
        new_code_cell("# Exercise 9.1: double\ndef my_double(x):\n    ### BEGIN SOLUTION\n"
                      "    return 2 * x\n    ### END SOLUTION"),
        new_code_cell("assert my_double(2) == 4"),
    ])
    nb.metadata["kernelspec"] = dict(cli.KERNELSPEC)
    return nb


@pytest.fixture
def course(tmp_path):
    folder = tmp_path / "course" / "notebooks"
    folder.mkdir(parents=True)
    paths = [folder / "01_a.ipynb", folder / "02_b.ipynb"]
    for p in paths:
        nbformat.write(small_notebook(p.stem), p)
    return paths


def student(*args):
    return cli.main(["student", *map(str, args)])


def files_under(folder: Path) -> dict:
    """{relative path: bytes} of every file under ``folder`` (hidden ones too)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert str(needle) in err, (needle, err)
    return err


def run_student_subprocess(args, prelude="", limit_bytes=None):
    """`mha-course student ARGS` in a fresh interpreter, after running ``prelude`` in it."""
    code = f"import os, signal, sys\nfrom mha_course.tools import cli\n{prelude}\nsys.exit(cli.main({['student', *map(str, args)]!r}))"

    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, preexec_fn=limit if limit_bytes else None)


# ---------------------------------------------------------------- never lose a learner's work
def test_the_same_notebook_named_twice_is_refused_and_the_learners_edit_survives(course, tmp_path, capsys):
    out = tmp_path / "student"
    assert student(out, "--notebooks", course[0]) == 0
    copy = out / "notebooks" / course[0].name
    copy.write_text(copy.read_text().replace("# Small", "# Small MY EDIT"))
    before = files_under(out)
    capsys.readouterr()
    assert student(out, "--notebooks", course[0], course[0], "--overwrite") == 2
    one_line_error(capsys, course[0], "twice")
    assert files_under(out) == before


def test_two_sources_with_the_same_file_name_are_refused(course, tmp_path, capsys):
    other = tmp_path / "elsewhere" / course[0].name
    other.parent.mkdir()
    nbformat.write(small_notebook("other"), other)
    out = tmp_path / "student"
    assert student(out, "--notebooks", course[0], other) == 2
    one_line_error(capsys, other, course[0])
    assert not out.exists()


def test_a_backup_is_never_overwritten(course, tmp_path, capsys, monkeypatch):
    out = tmp_path / "student"
    student(out, "--notebooks", course[0])
    copy = out / "notebooks" / course[0].name
    monkeypatch.setattr(cli.time, "strftime", lambda fmt: "20260101-000000")  # every run in one second
    kept = []
    for note in ("FIRST", "SECOND", "THIRD"):
        copy.write_text(copy.read_text().replace("# Small", f"# Small {note}"))
        kept.append(copy.read_bytes())
        assert student(out, "--notebooks", course[0], "--overwrite") == 0
    backups = sorted((out / "backups").rglob(course[0].name))
    assert sorted(p.read_bytes() for p in backups) == sorted(kept)


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]], ids=["plain", "overwrite"])
def test_the_answer_keys_are_never_targets(course, capsys, overwrite):
    root = course[0].parents[1]  # `mha-course student .` from the course root
    before = files_under(root)
    assert student(root, "--notebooks", *course, *overwrite) == 2
    one_line_error(capsys, course[0], "source")
    assert files_under(root) == before


# ---------------------------------------------------------------- interrupted writes
KILL_AT_REPLACE = "os.replace = lambda a, b: os.kill(os.getpid(), signal.SIGKILL)"
KILL_AT_FSYNC = "os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)"
INTERRUPT_SECOND_REPLACE = """
_real, _n = os.replace, [0]
def _replace(a, b):
    _n[0] += 1
    if _n[0] == 2:
        raise KeyboardInterrupt
    _real(a, b)
os.replace = _replace
"""


def assert_whole(out: Path, allowed: dict):
    """Every notebook under OUTDIR/notebooks is one of the ``allowed`` texts (never cut short)."""
    for p in (out / "notebooks").glob("*.ipynb"):
        assert p.read_bytes() in allowed[p.name], p
        json.loads(p.read_bytes())


def fresh_copies(course):
    return {p.name: (nbformat.writes(cli.student_notebook(nbformat.read(p, as_version=4))) + "\n").encode()
            for p in course}


@pytest.mark.parametrize("prelude", [KILL_AT_REPLACE, KILL_AT_FSYNC, INTERRUPT_SECOND_REPLACE],
                         ids=["sigkill-before-replace", "sigkill-mid-write", "sigint-between-files"])
def test_an_interrupted_overwrite_leaves_every_file_whole(course, tmp_path, prelude):
    out = tmp_path / "student"
    assert student(out, "--notebooks", *course) == 0
    edited = {}
    for p in (out / "notebooks").glob("*.ipynb"):
        p.write_text(p.read_text().replace("# Small", "# Small EDIT"))
        edited[p.name] = p.read_bytes()
    run = run_student_subprocess([out, "--notebooks", *course, "--overwrite"], prelude)
    assert run.returncode == (130 if "KeyboardInterrupt" in prelude else -9), run.stderr
    fresh = fresh_copies(course)
    assert_whole(out, {n: {edited[n], fresh[n]} for n in fresh})
    # no learner edit is lost: each is either still in place or in a backup
    backups = {p.read_bytes() for p in (out / "backups").rglob("*.ipynb")} if (out / "backups").exists() else set()
    for p in (out / "notebooks").glob("*.ipynb"):
        assert p.read_bytes() == edited[p.name] or edited[p.name] in backups


def test_a_killed_fresh_write_leaves_nothing_a_rerun_mistakes_for_work(course, tmp_path, capsys):
    out = tmp_path / "student"
    run = run_student_subprocess([out, "--notebooks", *course], KILL_AT_REPLACE)
    assert run.returncode == -9
    assert not list((out / "notebooks").glob("*.ipynb"))
    assert student(out, "--notebooks", *course) == 0  # no --overwrite needed
    assert_whole(out, {n: {t} for n, t in fresh_copies(course).items()})


@pytest.mark.parametrize("broken", [b"", b'{"cells": [', b'{"not": "a notebook"}'],
                         ids=["empty", "truncated", "other-json"])
def test_a_copy_that_is_not_a_notebook_is_not_learner_work(course, tmp_path, capsys, broken):
    out = tmp_path / "student"
    (out / "notebooks").mkdir(parents=True)
    (out / "notebooks" / course[0].name).write_bytes(broken)  # what an old interrupted write left
    assert student(out, "--notebooks", course[0]) == 0
    said = capsys.readouterr().out
    assert "not a valid notebook" in said and "not learner work" in said
    assert_whole(out, {n: {t} for n, t in fresh_copies(course).items()})
    assert [p.read_bytes() for p in (out / "backups").rglob("*.ipynb")] == [broken]


def test_a_full_disk_leaves_nothing_half_written(course, tmp_path):
    out = tmp_path / "student"
    size = len(fresh_copies(course)[course[0].name])
    run = run_student_subprocess([out, "--notebooks", *course], limit_bytes=size // 2)
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "disk space" in run.stderr, run.stderr
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_a_full_disk_during_overwrite_keeps_the_learners_copy(course, tmp_path):
    out = tmp_path / "student"
    student(out, "--notebooks", course[0])
    copy = out / "notebooks" / course[0].name
    copy.write_text(copy.read_text().replace("# Small", "# Small EDIT"))
    edited = copy.read_bytes()
    run = run_student_subprocess([out, "--notebooks", course[0], "--overwrite"], limit_bytes=len(edited) // 2)
    assert run.returncode == 2 and "disk space" in run.stderr, run.stderr
    assert copy.read_bytes() == edited
    assert not list((out / "notebooks").glob(".*"))  # no temporary file left behind


# ---------------------------------------------------------------- one line instead of a traceback
def read_only(folder: Path, on: bool) -> None:
    """Make ``folder`` unwritable: chmod for a user; root writes anywhere, so ``chattr +i`` then."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i" if on else "-i", str(folder)], check=True)
    else:
        os.chmod(folder, 0o555 if on else 0o755)


def test_a_read_only_outdir_is_one_line(course, tmp_path, capsys):
    folder = tmp_path / "read-only"
    folder.mkdir()
    read_only(folder, True)
    try:
        assert student(folder / "student", "--notebooks", course[0]) == 2
        err = one_line_error(capsys, folder, "write to")
        assert os.listdir(folder) == []
        read_only(folder, False)
        (folder / "student").mkdir()
        read_only(folder / "student", True)
        assert student(folder / "student", "--notebooks", course[0]) == 2
        one_line_error(capsys, folder / "student", "write to")
    finally:
        for f in (folder / "student", folder):
            if f.exists():
                read_only(f, False)
    assert "Traceback" not in err


def test_outdir_that_is_a_file(course, tmp_path, capsys):
    out = tmp_path / "a-file"
    out.write_text("x")
    assert student(out, "--notebooks", course[0]) == 2
    one_line_error(capsys, out, "not a folder")


def test_a_target_that_is_a_folder(course, tmp_path, capsys):
    out = tmp_path / "student"
    (out / "notebooks" / course[0].name).mkdir(parents=True)
    assert student(out, "--notebooks", *course) == 2
    one_line_error(capsys, out / "notebooks" / course[0].name, "folder")
    assert not (out / "notebooks" / course[1].name).exists()


def test_a_learner_copy_with_invalid_utf8(course, tmp_path, capsys):
    out = tmp_path / "student"
    (out / "notebooks").mkdir(parents=True)
    target = out / "notebooks" / course[0].name
    target.write_bytes(b'{"cells": [], "note": "caf\xe9"}')
    for extra in ([], ["--overwrite"]):
        assert student(out, "--notebooks", *course, *extra) == 2
        one_line_error(capsys, target, "UTF-8")
    assert target.read_bytes() == b'{"cells": [], "note": "caf\xe9"}'
    assert not (out / "notebooks" / course[1].name).exists()


@pytest.mark.parametrize("content,needle", [(None, "does not exist"), (b'{"cells": [{"cell_t', "not a readable"),
                                            (b'{"a": 1}', "not a readable"), (b"\xff\xfe", "not a readable")],
                         ids=["missing", "truncated", "not-a-notebook", "binary"])
def test_a_bad_source_is_one_line_and_nothing_is_written(course, tmp_path, capsys, content, needle):
    bad = course[0].with_name("03_bad.ipynb")
    if content is not None:
        bad.write_bytes(content)
    out = tmp_path / "student"
    assert student(out, "--notebooks", course[1], bad) == 2
    one_line_error(capsys, bad, needle)
    assert not out.exists()


def test_a_source_with_broken_markers_is_one_line(course, tmp_path, capsys):
    nb = small_notebook()
    nb.cells[1].source = nb.cells[1].source.replace("    ### END SOLUTION", "")
    nbformat.write(nb, course[0])
    assert student(tmp_path / "student", "--notebooks", course[0]) == 2
    one_line_error(capsys, course[0], "BEGIN SOLUTION")


# ---------------------------------------------------------------- mha-course execute
def test_atomic_write_replaces_whole_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "x.ipynb"
    target.write_bytes(b"old")
    cli.atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["x.ipynb"]


CELLS = {"loop": "while True: pass", "sleep": "import time\ntime.sleep(30)",
         "die": "import os\nos._exit(1)", "raise": "raise ValueError('my bad cell')", "ok": "print(6 * 7)"}


def test_execute_stops_at_timeouts_and_dead_kernels_and_names_notebook_and_cell(tmp_path):
    paths = {}
    for name, src in CELLS.items():
        paths[name] = tmp_path / f"{name}.ipynb"
        nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), new_code_cell(f"# {name} cell\n{src}")]),
                       paths[name])
    (tmp_path / "corrupt.ipynb").write_text('{"cells": [')
    before = {n: p.read_bytes() for n, p in paths.items()}
    args = [*paths.values(), tmp_path / "corrupt.ipynb", tmp_path / "missing.ipynb", "--timeout", "3"]
    run = subprocess.run([sys.executable, "-m", "mha_course.tools.cli", "execute", *map(str, args)],
                         capture_output=True, text=True, timeout=240)  # a hang guard, not a timing
    assert run.returncode == 1, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("mha-course execute:")]
    expected = {"loop": "cell 1 (`# loop cell`) did not finish within --timeout 3 s",
                "sleep": "cell 1 (`# sleep cell`) did not finish within --timeout 3 s",
                "die": "the kernel died in cell 1 (`# die cell`)",
                "raise": "cell 1 (`# raise cell`) raised ValueError: my bad cell",
                "corrupt": "not a readable notebook", "missing": "the notebook does not exist"}
    for name, message in expected.items():
        assert any(f"{name}.ipynb: {message}" in ln for ln in lines), (name, run.stderr)
    assert f"1 of 7 notebook(s) executed; passed: {paths['ok']}; failed: " in run.stderr
    for name in ("loop", "sleep", "die", "raise"):
        assert paths[name].read_bytes() == before[name]  # a failed notebook is left as it was
    done = nbformat.read(paths["ok"], as_version=4)
    assert done.cells[1].outputs[0].text == "42\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# ---------------------------------------------------------------- BLAS threads are a choice
def test_blas_threads_follow_the_environment():
    assert os.environ["OMP_NUM_THREADS"] == os.environ.get("MHA_COURSE_THREADS", "1").strip()
    assert os.environ["OPENBLAS_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == os.environ["OMP_NUM_THREADS"]


def test_mha_course_threads_reaches_pytest_and_execute(monkeypatch):
    env = {**os.environ, "MHA_COURSE_THREADS": "2"}
    run = subprocess.run([sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:randomly",
                          "-k", "test_blas_threads_follow_the_environment"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr
    monkeypatch.setenv("MHA_COURSE_THREADS", "2")
    assert cli.thread_env() == {v: "2" for v in cli.THREAD_VARS}
    monkeypatch.setenv("MHA_COURSE_THREADS", "many")
    with pytest.raises(ValueError, match="MHA_COURSE_THREADS='many' must be a whole number"):
        cli.thread_env()
    monkeypatch.delenv("MHA_COURSE_THREADS")
    assert cli.thread_env()["OMP_NUM_THREADS"] == "1"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_execute_stops_on_a_signal_and_leaves_the_notebook_as_it_was(tmp_path, sig):
    path = tmp_path / "loop.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("while True: pass")]), path)
    before = path.read_bytes()
    proc = subprocess.Popen([sys.executable, "-m", "mha_course.tools.cli", "execute", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    for _ in range(600):  # until the kernel runs (at most a minute), then a little more
        if proc.poll() is not None or (children.exists() and children.read_text().strip()):
            break
        time.sleep(0.1)
    time.sleep(2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)  # a hang guard, not a timing
    assert proc.returncode == 130 and "interrupted" in err, err
    assert path.read_bytes() == before
