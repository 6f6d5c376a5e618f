"""check.progress.record: the learner's verdicts in <folder>/.mha-course/progress.json.

Recorded only inside a course folder (marked by .mha-course/), never in the repository's own
notebooks/; one entry per exercise with the last verdict, its named mistake, tries and when it
was first done; the file is replaced in one step (never a part of one, no temporaries left),
and recording never raises: not on a folder it cannot write, not on a corrupt file, not on
arguments of the wrong type; concurrent writers leave a valid file.
"""
import json
import multiprocessing
import os
from datetime import datetime
from pathlib import Path

import pytest

from mha_course.check import progress

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def course(tmp_path, monkeypatch):
    """A learner's course folder (OUTDIR with .mha-course/ and notebooks/), the kernel's cwd in notebooks/."""
    (tmp_path / ".mha-course").mkdir()
    (tmp_path / "notebooks").mkdir()
    monkeypatch.delenv(progress.ENV, raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.chdir(tmp_path / "notebooks")
    return tmp_path


def entries(folder):
    return {(e["notebook"], e["exercise"]): e for e in progress.read_progress(folder)}


def test_a_verdict_is_kept_with_its_mistake_tries_and_times(course):
    progress.record("softmax", notebook="02.ipynb", passed=False, mistake="no max subtraction")
    progress.record("softmax", notebook="02.ipynb", passed=False, mistake="wrong axis")
    got = entries(course)[("02.ipynb", "softmax")]
    assert (got["passed"], got["mistake"], got["tries"], got["done_when"]) == (False, "wrong axis", 2, None)
    assert datetime.fromisoformat(got["when"]).utcoffset().total_seconds() == 0  # UTC
    progress.record("softmax", notebook="02.ipynb", passed=True, mistake="ignored once it passes")
    progress.record("causal_mask", notebook="02.ipynb", passed=True)
    got = entries(course)
    assert got[("02.ipynb", "softmax")]["passed"] and got[("02.ipynb", "softmax")]["mistake"] is None
    assert got[("02.ipynb", "softmax")]["tries"] == 3 and got[("02.ipynb", "softmax")]["done_when"]
    # a later wrong try keeps the time it was first done
    first = got[("02.ipynb", "softmax")]["done_when"]
    progress.record("softmax", notebook="02.ipynb", passed=False, mistake="wrong axis")
    again = entries(course)[("02.ipynb", "softmax")]
    assert (again["passed"], again["done_when"], again["tries"]) == (False, first, 4)


def test_the_notebook_defaults_to_the_kernels_session(course, monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", str(course / "notebooks" / "05_masks.ipynb"))
    progress.record("causal_mask", passed=True)
    assert ("05_masks.ipynb", "causal_mask") in entries(course)


def test_found_from_the_course_folder_itself_and_by_the_override(course, tmp_path_factory, monkeypatch):
    monkeypatch.chdir(course)
    progress.record("a", notebook="n", passed=True)
    assert entries(course)
    other = tmp_path_factory.mktemp("other")
    (other / ".mha-course").mkdir()
    monkeypatch.setenv(progress.ENV, str(other))
    progress.record("b", notebook="n", passed=True)
    assert list(entries(other)) == [("n", "b")]
    monkeypatch.setenv(progress.ENV, "off")
    progress.record("c", notebook="n", passed=True)
    assert ("n", "c") not in entries(other) and ("n", "c") not in entries(course)


def test_nothing_is_recorded_in_the_repositorys_notebooks(monkeypatch, tmp_path):
    monkeypatch.delenv(progress.ENV, raising=False)
    assert progress.course_folder(ROOT / "notebooks") is None
    assert progress.course_folder(tmp_path) is None  # a folder without .mha-course/
    monkeypatch.chdir(tmp_path)
    progress.record("softmax", notebook="02.ipynb", passed=True)
    assert not any(tmp_path.rglob("*"))


def test_the_file_is_replaced_whole_and_no_temporary_is_left(course):
    for i in range(20):
        progress.record(f"ex{i}", notebook="n", passed=bool(i % 2))
    folder = course / ".mha-course"
    assert sorted(p.name for p in folder.iterdir()) == ["progress.json"]
    data = json.loads((folder / "progress.json").read_text())
    assert data["format"] == progress.FORMAT and len(data["entries"]) == 20
    # a temporary left by a writer that was killed (its pid is gone) is removed by the next write
    dead = multiprocessing.Process(target=int)
    dead.start()
    dead.join()
    stale = folder / f".progress.json.pid{dead.pid}.abc.tmp"
    stale.write_text("{")
    progress.record("ex0", notebook="n", passed=True)
    assert not stale.exists()


@pytest.mark.parametrize("how", ["no permission", "a folder in its place", "no space"])
def test_a_folder_it_cannot_write_never_breaks_a_check(course, monkeypatch, how):
    target = course / ".mha-course" / "progress.json"
    if how == "a folder in its place":
        target.mkdir()
    else:
        import errno
        import tempfile

        code = errno.EACCES if how == "no permission" else errno.ENOSPC

        def refuse(*args, **kwargs):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(tempfile, "mkstemp", refuse)  # root writes through chmod 0500, so refuse here
    assert progress.record("softmax", notebook="n", passed=True) is None


def test_read_only_folder_for_a_normal_user(course):
    if os.geteuid() == 0:
        pytest.skip("root writes into a 0500 folder; the refused write is tested by the case above")
    (course / ".mha-course").chmod(0o500)
    try:
        progress.record("softmax", notebook="n", passed=True)
    finally:
        (course / ".mha-course").chmod(0o700)
    assert not (course / ".mha-course" / "progress.json").exists()


@pytest.mark.parametrize("content", [b"{", b"\xff\xfe", b"[1, 2]", b'{"format": "other"}', b""])
def test_a_corrupt_file_is_set_aside_and_recording_goes_on(course, content):
    target = course / ".mha-course" / "progress.json"
    target.write_bytes(content)
    progress.record("softmax", notebook="n", passed=True)
    assert list(entries(course)) == [("n", "softmax")]
    assert (course / ".mha-course" / "progress.json.corrupt").read_bytes() == content


def test_a_second_corrupt_file_never_replaces_the_first_set_aside_copy(course):
    target = course / ".mha-course" / "progress.json"
    for content, exercise in ((b"{FIRST", "softmax"), (b"{SECOND", "causal_mask")):
        target.write_bytes(content)
        progress.record(exercise, notebook="n", passed=True)
    assert (course / ".mha-course" / "progress.json.corrupt").read_bytes() == b"{FIRST"
    assert (course / ".mha-course" / "progress.json.corrupt-2").read_bytes() == b"{SECOND"
    assert list(entries(course)) == [("n", "causal_mask")]


@pytest.mark.parametrize("kwargs", [dict(exercise=3, passed=True), dict(exercise="x", passed="yes"),
                                    dict(exercise="x", passed=False, mistake=["a"]),
                                    dict(exercise="x", notebook=b"n", passed=True), dict(exercise="", passed=True)])
def test_wrong_arguments_record_nothing_and_never_raise(course, kwargs):
    exercise = kwargs.pop("exercise")
    assert progress.record(exercise, **kwargs) is None
    assert entries(course) == {}


def test_long_names_are_cut(course):
    progress.record("x" * 10_000, notebook="n", passed=False, mistake="m" * 10_000)
    (entry,) = progress.read_progress(course)
    assert len(entry["exercise"]) <= 200 and len(entry["mistake"]) <= 200


def _hammer(folder, who, n):
    os.environ[progress.ENV] = folder
    for i in range(n):
        progress.record(f"{who}-{i % 5}", notebook="n", passed=i % 3 == 0, mistake="m")


def test_concurrent_writers_leave_a_valid_file(course):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_hammer, args=(str(course), w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 4
    got = entries(course)  # parses: never a part of a file
    assert got and all(key[1].rsplit("-", 1)[0] in "0123" for key in got)
    assert all(e["tries"] >= 1 for e in got.values())
    assert sorted(p.name for p in (course / ".mha-course").iterdir()) == ["progress.json"]
