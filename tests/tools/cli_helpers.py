"""Helpers shared by the tests of ``mha-course`` (tests/tools/): small notebooks, one-line errors, subprocesses,
and the student-copy fixture notebook with the stub <-> solution round trip (``paste_solutions``).

Interruptions are made deterministic by running the command in a subprocess whose
``os.replace``/``os.link`` (or ``os.fsync``) sends the process SIGKILL or raises
KeyboardInterrupt, and a full disk by ``resource.setrlimit(RLIMIT_FSIZE)`` in the subprocess.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

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


# ---------------------------------------------------------------- the student-copy fixture and its round trip
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
    nb.metadata["kernelspec"] = dict(execute.KERNELSPEC)
    return nb


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


@pytest.fixture(name="course")
def course_fixture(tmp_path):
    """Fixture ``course``: a tiny course folder, notebooks/09_fixture.ipynb and docs/glossary.md."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "glossary.md").write_text("# Glossary\n")
    (tmp_path / "notebooks").mkdir()
    path = tmp_path / "notebooks" / "09_fixture.ipynb"
    nbformat.write(fixture_notebook(), path)
    return path
