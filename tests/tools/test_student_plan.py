"""What goes where (tools/student_plan.py): every source is read and checked before anything is written;
a notebook named twice, a target that is a source or a folder, an OUTDIR that is a file, a bad source:
one line naming the path (exit code 2), nothing written. The record of what was copied.
"""
import hashlib

import nbformat
import pytest
from cli_helpers import (
    course_fixture,  # noqa: F401  (the fixture course)
    files_under,
    one_line_error,
    small_course_fixture,  # noqa: F401  (the fixture small_course)
    small_notebook,
    student,
)

from mha_course.tools import student as st
from mha_course.tools import student_plan as sp


def test_the_plan_lists_each_copy_and_the_files_its_markdown_links(course, tmp_path):
    out = tmp_path / "out"
    plan, assets = sp.plan_copies([course], out)
    assert [t for t, _ in plan] == [out / "notebooks" / "09_fixture.ipynb"]
    assert "raise NotImplementedError" in plan[0][1] and "BEGIN SOLUTION" not in plan[0][1]
    # the glossary is linked; the web page and the other notebook (its solutions) are not copied
    assert assets == {out / "docs" / "glossary.md": (tmp_path / "docs" / "glossary.md").resolve()}
    assert not out.exists()  # a plan writes nothing


def test_what_is_at_a_target(tmp_path):
    text = nbformat.writes(small_notebook()) + "\n"
    target = tmp_path / "a.ipynb"
    assert sp.existing_kind(target, text) == "new"
    target.write_text(text)
    assert sp.existing_kind(target, text) == "same"
    target.write_text(nbformat.writes(small_notebook("edited")))
    assert sp.existing_kind(target, text) == "learner"
    for broken in (b"", b'{"cells": [', b'{"not": "a notebook"}'):
        target.write_bytes(broken)
        assert sp.existing_kind(target, text) == "broken"


def test_an_unreadable_record_is_an_empty_one(tmp_path):
    assert sp.read_manifest(tmp_path) == {}
    (tmp_path / ".mha-course").mkdir()
    for bad in ("not json", "[1, 2]", '{"files": {"a": 3, "b": "ok"}}'):
        (tmp_path / ".mha-course" / sp.MANIFEST).write_text(bad)
        assert sp.read_manifest(tmp_path) == ({"b": "ok"} if "ok" in bad else {})
    assert sp.outdir_path(str(tmp_path)) == tmp_path
    with pytest.raises(sp.StudentInputError, match="OUTDIR"):
        sp.outdir_path("")


def test_the_same_notebook_named_twice_is_refused_and_the_learners_edit_survives(small_course, tmp_path, capsys):
    out = tmp_path / "student"
    assert student(out, "--notebooks", small_course[0]) == 0
    copy = out / "notebooks" / small_course[0].name
    copy.write_text(copy.read_text().replace("# Small", "# Small MY EDIT"))
    before = files_under(out)
    capsys.readouterr()
    assert student(out, "--notebooks", small_course[0], small_course[0], "--overwrite") == 2
    one_line_error(capsys, small_course[0], "twice")
    assert files_under(out) == before


def test_two_sources_with_the_same_file_name_are_refused(small_course, tmp_path, capsys):
    other = tmp_path / "elsewhere" / small_course[0].name
    other.parent.mkdir()
    nbformat.write(small_notebook("other"), other)
    out = tmp_path / "student"
    assert student(out, "--notebooks", small_course[0], other) == 2
    one_line_error(capsys, other, small_course[0])
    assert not out.exists()


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]], ids=["plain", "overwrite"])
def test_the_answer_keys_are_never_targets(small_course, capsys, overwrite):
    root = small_course[0].parents[1]  # `mha-small_course student .` from the small_course root
    before = files_under(root)
    assert student(root, "--notebooks", *small_course, *overwrite) == 2
    one_line_error(capsys, small_course[0], "source")
    assert files_under(root) == before


def test_outdir_that_is_a_file(small_course, tmp_path, capsys):
    out = tmp_path / "a-file"
    out.write_text("x")
    assert student(out, "--notebooks", small_course[0]) == 2
    one_line_error(capsys, out, "not a folder")


def test_a_target_that_is_a_folder(small_course, tmp_path, capsys):
    out = tmp_path / "student"
    (out / "notebooks" / small_course[0].name).mkdir(parents=True)
    assert student(out, "--notebooks", *small_course) == 2
    one_line_error(capsys, out / "notebooks" / small_course[0].name, "folder")
    assert not (out / "notebooks" / small_course[1].name).exists()


def test_a_learner_copy_with_invalid_utf8(small_course, tmp_path, capsys):
    out = tmp_path / "student"
    (out / "notebooks").mkdir(parents=True)
    target = out / "notebooks" / small_course[0].name
    target.write_bytes(b'{"cells": [], "note": "caf\xe9"}')
    for extra in ([], ["--overwrite"]):
        assert student(out, "--notebooks", *small_course, *extra) == 2
        one_line_error(capsys, target, "UTF-8")
    assert target.read_bytes() == b'{"cells": [], "note": "caf\xe9"}'
    assert not (out / "notebooks" / small_course[1].name).exists()


@pytest.mark.parametrize("content,needle", [(None, "does not exist"), (b'{"cells": [{"cell_t', "not a readable"),
                                            (b'{"a": 1}', "not a readable"), (b"\xff\xfe", "not a readable")],
                         ids=["missing", "truncated", "not-a-notebook", "binary"])
def test_a_bad_source_is_one_line_and_nothing_is_written(small_course, tmp_path, capsys, content, needle):
    bad = small_course[0].with_name("03_bad.ipynb")
    if content is not None:
        bad.write_bytes(content)
    out = tmp_path / "student"
    assert student(out, "--notebooks", small_course[1], bad) == 2
    one_line_error(capsys, bad, needle)
    assert not out.exists()


def test_a_source_with_broken_markers_is_one_line(small_course, tmp_path, capsys):
    nb = small_notebook()
    nb.cells[1].source = nb.cells[1].source.replace("    ### END SOLUTION", "")
    nbformat.write(nb, small_course[0])
    assert student(tmp_path / "student", "--notebooks", small_course[0]) == 2
    one_line_error(capsys, small_course[0], "BEGIN SOLUTION")


def test_a_copy_is_marked_and_records_what_was_copied(small_course, tmp_path):
    out = tmp_path / "learner"
    assert student(out, "--notebooks", *small_course) == 0
    assert (out / ".mha-course").is_dir()  # the course folder's mark: the checkers record progress here
    manifest = st.read_manifest(out)
    assert set(manifest) == {"notebooks/01_a.ipynb", "notebooks/02_b.ipynb"}
    assert manifest["notebooks/01_a.ipynb"] == hashlib.sha256((out / "notebooks/01_a.ipynb").read_bytes()).hexdigest()
