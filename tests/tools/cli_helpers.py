"""Helpers shared by the tests of ``mha-course`` (tests/tools/): small notebooks, one-line errors, subprocesses.

Interruptions are made deterministic by running the command in a subprocess whose
``os.replace``/``os.link`` (or ``os.fsync``) sends the process SIGKILL or raises
KeyboardInterrupt, and a full disk by ``resource.setrlimit(RLIMIT_FSIZE)`` in the subprocess.
"""
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from mha_course.tools import cli, execute

ROOT = Path(__file__).resolve().parents[2]


def small_notebook(note="one"):
    """An exercise, its check cell and a markdown cell: enough to be a course notebook."""
    nb = new_notebook(cells=[
        new_markdown_cell(f"# Small {note}"),
        new_code_cell("# Exercise 9.1: double\ndef my_double(x):\n    ### BEGIN SOLUTION\n"
                      "    return 2 * x\n    ### END SOLUTION"),
        new_code_cell("assert my_double(2) == 4"),
    ])
    nb.metadata["kernelspec"] = dict(execute.KERNELSPEC)
    return nb


@pytest.fixture(name="small_course")
def small_course_fixture(tmp_path):
    """Fixture ``small_course``: two small course notebooks (one exercise each) in tmp_path/course/notebooks/.

    A test file imports ``small_course_fixture`` to use it (one conftest.py per folder would clash
    with notebooks/conftest.py: neither folder is a package).
    """
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


def run_subprocess(command, args, prelude="", limit_bytes=None, timeout=120, cwd=ROOT):
    """`mha-course COMMAND ARGS` in a fresh interpreter, after running ``prelude`` in it."""
    code = (f"import os, signal, sys\nfrom mha_course.tools import cli\n{prelude}\n"
            f"sys.exit(cli.main({[command, *map(str, args)]!r}))")

    def limit():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=env, preexec_fn=limit if limit_bytes else None)


def run_student_subprocess(args, prelude="", limit_bytes=None):
    """`mha-course student ARGS` in a fresh interpreter, after running ``prelude`` in it."""
    return run_subprocess("student", args, prelude, limit_bytes)


def read_only(folder: Path, on: bool) -> None:
    """Make ``folder`` unwritable: chmod for a user; root writes anywhere, so ``chattr +i`` then."""
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i" if on else "-i", str(folder)], check=True)
    else:
        os.chmod(folder, 0o555 if on else 0o755)
