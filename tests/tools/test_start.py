"""tools/start.py: `mha-course start DIR` writes the student copies once, then reopens them; JupyterLab's root is DIR.

The fresh-machine route (a wheel in a new venv, JupyterLab in Chromium) is
tests/cross/test_browser.py::test_the_wheel_in_a_fresh_venv_runs_01_in_jupyterlab (.ci/run's learner step).
"""
import subprocess

import nbformat
import pytest
from cli_helpers import small_course_fixture, small_notebook  # noqa: F401  (the fixture small_course)

from mha_course.tools import cli, start, student


def test_the_first_run_writes_every_copy_and_the_linked_files(tmp_path):
    notebooks = student.course_notebooks()
    assert [p.name for p in notebooks][:1] == ["00_overview.ipynb"], notebooks
    out = start.prepare(tmp_path / "course", notebooks, log=lambda line: None)
    assert sorted(p.name for p in (out / "notebooks").glob("*.ipynb")) == sorted(p.name for p in notebooks)
    assert (out / "docs" / "glossary.md").is_file(), "the notebooks' ../docs/glossary.md link must open"
    assert (out / start.FIRST_NOTEBOOK).is_file()


def test_a_second_run_writes_nothing_and_keeps_the_learners_work(small_course, tmp_path):
    notebooks = sorted(small_course)
    out = tmp_path / "mine"
    start.prepare(out, notebooks, log=lambda line: None)
    mine = out / "notebooks" / notebooks[0].name
    edited = nbformat.read(mine, 4)
    edited.cells[1].source = "def my_double(x):\n    return x + x  # my answer"
    nbformat.write(edited, mine)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    lines = []
    start.prepare(out, notebooks, log=lines.append)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert len(lines) == 1 and "nothing was written" in lines[0]


def test_a_notebook_added_later_is_written_and_the_others_are_left(small_course, tmp_path):
    first, second = sorted(small_course)
    out = tmp_path / "mine"
    start.prepare(out, [first], log=lambda line: None)
    (out / "notebooks" / first.name).write_text("my own text, not even a notebook")
    start.prepare(out, [first, second], log=lambda line: None)
    assert (out / "notebooks" / first.name).read_text() == "my own text, not even a notebook"
    assert (out / "notebooks" / second.name).is_file()


def test_jupyterlab_gets_dir_as_its_root_and_opens_00(tmp_path):
    cmd = start.lab_command(tmp_path, ["--no-browser"])
    assert f"--ServerApp.root_dir={tmp_path.resolve()}" in cmd
    assert "--LabApp.default_url=/lab/tree/notebooks/00_overview.ipynb" in cmd
    assert cmd[-1] == "--no-browser" and cmd[1:3] == ["-m", "jupyterlab"]


def test_start_runs_jupyterlab_in_dir_with_the_arguments_after_the_dashes(monkeypatch, tmp_path, capsys):
    calls = []
    monkeypatch.setattr(start, "course_notebooks", lambda: [_one_notebook(tmp_path)])
    monkeypatch.setattr(subprocess, "call", lambda cmd, cwd: calls.append((cmd, cwd)) or 0)
    assert cli.main(["start", str(tmp_path / "c"), "--", "--no-browser", "--port=8899"]) == 0
    (cmd, cwd), = calls
    assert cwd == tmp_path / "c" and cmd[-2:] == ["--no-browser", "--port=8899"]
    assert "opening JupyterLab" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ["", "   "])
def test_an_empty_dir_is_one_line_and_exit_2(bad, capsys):
    assert cli.main(["start", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mha-course start: DIR is empty") and "\n" not in err


def test_a_dir_that_is_a_file_is_refused_before_jupyterlab(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(start, "course_notebooks", lambda: [_one_notebook(tmp_path)])
    monkeypatch.setattr(subprocess, "call", lambda *a, **k: pytest.fail("JupyterLab must not start"))
    (tmp_path / "file").write_text("x")
    assert cli.main(["start", str(tmp_path / "file")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def _one_notebook(tmp_path):
    path = tmp_path / "src" / "00_overview.ipynb"
    path.parent.mkdir(exist_ok=True)
    nbformat.write(small_notebook(), path)
    return path
