"""``mha-course student --update`` (tools/student_update.py), the nbgitpuller rule: an untouched copy follows
the course, an edited one is never touched (the new version lands beside it), a save that lands while a
copy is replaced is kept.
"""
import os
from pathlib import Path

import nbformat
import pytest
from cli_helpers import (
    files_under,
    one_line_error,
    small_course_fixture,  # noqa: F401  (the fixture small_course)
    small_notebook,
    student,
)

from mha_course.tools import student as st


def _changed_course(paths, note="two"):
    """The course after a fix: both notebooks changed, and a third one new."""
    for p in paths:
        nbformat.write(small_notebook(f"{p.stem} {note}"), p)
    new = paths[0].with_name("03_c.ipynb")
    nbformat.write(small_notebook("c"), new)
    return paths + [new]


def test_update_replaces_untouched_copies_and_never_an_edited_one(small_course, tmp_path, capsys):
    out = tmp_path / "learner"
    assert student(out, "--notebooks", *small_course) == 0
    edited = out / "notebooks" / "02_b.ipynb"
    nb = nbformat.read(edited, as_version=4)
    nb.cells[1].source = nb.cells[1].source.replace("raise NotImplementedError", "return 2 * x  #")
    nbformat.write(nb, edited)
    mine = edited.read_bytes()
    (out / "notebooks" / "01_a.ipynb").unlink()  # a deleted notebook comes back, as with nbgitpuller
    sources = _changed_course(small_course)
    capsys.readouterr()
    assert student(out, "--update", "--notebooks", *sources) == 0
    assert "2 new, 0 updated, 1 beside an edited notebook, 0 unchanged" in capsys.readouterr().out
    assert edited.read_bytes() == mine  # never touched
    beside = nbformat.read(out / "notebooks" / "02_b.updated.ipynb", as_version=4)
    assert "Course update" in beside.cells[0].source and "02_b.ipynb" in beside.cells[0].source
    assert beside.cells[1].source == "# Small 02_b two"
    assert nbformat.read(out / "notebooks" / "01_a.ipynb", as_version=4).cells[0].source == "# Small 01_a two"
    assert (out / "notebooks" / "03_c.ipynb").exists()
    # the course changes again: the untouched copies follow, the edited one still never
    for p in sources:
        nbformat.write(small_notebook(f"{p.stem} three"), p)
    capsys.readouterr()
    assert student(out, "--update", "--notebooks", *sources) == 0
    assert "0 new, 2 updated, 1 beside an edited notebook, 0 unchanged" in capsys.readouterr().out
    assert edited.read_bytes() == mine
    assert nbformat.read(out / "notebooks" / "02_b.updated.ipynb", as_version=4).cells[1].source == "# Small 02_b three"
    assert nbformat.read(out / "notebooks" / "03_c.ipynb", as_version=4).cells[0].source == "# Small 03_c three"
    # nothing new: nothing written
    before = files_under(out)
    assert student(out, "--update", "--notebooks", *sources) == 0
    assert files_under(out) == before
    assert not list(out.rglob("*.tmp")) and not (out / "backups").exists()


def test_update_of_an_edited_beside_copy_makes_another(small_course, tmp_path):
    out = tmp_path / "learner"
    student(out, "--notebooks", *small_course)
    edited = out / "notebooks" / "01_a.ipynb"
    edited.write_text(edited.read_text().replace("Small 01_a", "my notes"))
    _changed_course(small_course)
    student(out, "--update", "--notebooks", *small_course)
    beside = out / "notebooks" / "01_a.updated.ipynb"
    beside.write_text(beside.read_text().replace("Small 01_a two", "notes here too"))
    mine = beside.read_bytes()
    _changed_course(small_course, "three")
    student(out, "--update", "--notebooks", *small_course)
    assert beside.read_bytes() == mine
    assert "three" in (out / "notebooks" / "01_a.updated-2.ipynb").read_text()


def test_a_copy_older_than_the_record_counts_as_edited(small_course, tmp_path):
    out = tmp_path / "learner"
    student(out, "--notebooks", *small_course)
    (out / ".mha-course" / st.MANIFEST).unlink()  # a copy made before the record existed
    old = (out / "notebooks" / "01_a.ipynb").read_bytes()
    _changed_course(small_course)
    assert student(out, "--update", "--notebooks", *small_course) == 0
    assert (out / "notebooks" / "01_a.ipynb").read_bytes() == old
    assert (out / "notebooks" / "01_a.updated.ipynb").exists()


@pytest.mark.parametrize("when", ["after the move", "before the move"])
def test_a_save_that_lands_while_a_copy_is_updated_is_kept(small_course, tmp_path, monkeypatch, when):
    out = tmp_path / "learner"
    student(out, "--notebooks", *small_course)
    target = out / "notebooks" / "01_a.ipynb"
    save = nbformat.writes(small_notebook("the learner's save")).encode()
    real_rename = os.rename

    def rename(src, dst, *args, **kwargs):
        if Path(src) == target and ".updating-" in str(dst):
            if when == "before the move":
                target.write_bytes(save)
            real_rename(src, dst, *args, **kwargs)
            if when == "after the move":
                target.write_bytes(save)
            return
        real_rename(src, dst, *args, **kwargs)
    monkeypatch.setattr(os, "rename", rename)
    _changed_course(small_course)
    assert student(out, "--update", "--notebooks", *small_course) == 0
    assert target.read_bytes() == save
    assert "Small 01_a two" in (out / "notebooks" / "01_a.updated.ipynb").read_text()
    assert not list((out / ".mha-course").glob(".updating-*"))


def test_update_without_a_copy_says_how_to_make_one(small_course, tmp_path, capsys):
    assert student(tmp_path / "nothing", "--update", "--notebooks", *small_course) == 2
    one_line_error(capsys, "holds no student copy", "mha-course student")
    assert not (tmp_path / "nothing").exists()
