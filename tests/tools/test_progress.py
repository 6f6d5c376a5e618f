"""`mha-course progress DIR...`: learners x exercises from each course folder's .mha-course/progress.json.

Two learners in the hub's layout (/home/<name>/mha-course): one finished an exercise, one made a
named mistake; the text, CSV, JSON and HTML all show both, an exercise nobody touched is "not
started", a corrupt file is named for that learner only, and a DIR without course folders is
one line with the fix.
"""
import csv
import io
import json
from pathlib import Path

import pytest
from cli_helpers import small_course_fixture  # noqa: F401  (the fixture small_course)

from mha_course.check import progress as recorder
from mha_course.tools import cli
from mha_course.tools import progress as pr


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """/home-like: ada finished softmax, bob made a named mistake in it, cy never checked anything."""
    for name in ("ada", "bob", "cy"):
        (tmp_path / name / "mha-course" / ".mha-course").mkdir(parents=True)
    monkeypatch.setenv(recorder.ENV, str(tmp_path / "ada" / "mha-course"))
    recorder.record("softmax", notebook="02_scaled_dot_product.ipynb", passed=False, mistake="no max subtraction")
    recorder.record("softmax", notebook="02_scaled_dot_product.ipynb", passed=True)
    monkeypatch.setenv(recorder.ENV, str(tmp_path / "bob" / "mha-course"))
    recorder.record("softmax", notebook="02_scaled_dot_product.ipynb", passed=False, mistake="no max subtraction")
    monkeypatch.delenv(recorder.ENV)
    return tmp_path


NOTEBOOK_02 = str(Path(__file__).resolve().parents[2] / "notebooks" / "02_scaled_dot_product.ipynb")
NOTEBOOKS = ["--notebooks", NOTEBOOK_02]


def run(capsys, *args):
    code = cli.main(["progress", *map(str, args), *NOTEBOOKS])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_text_table_shows_done_tried_with_the_mistake_and_not_started(homes, capsys):
    code, out, _ = run(capsys, homes)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("ada") and "1 done, 0 tried" in lines[0]
    assert lines[1].startswith("bob") and "0 done, 1 tried" in lines[1]
    assert lines[2].startswith("cy") and "0 done, 0 tried" in lines[2]
    grid = out.split("02_scaled_dot_product.ipynb", 1)[1]
    assert "done" in next(ln for ln in grid.splitlines() if "ada" in ln)
    assert "tried: no max subtraction" in next(ln for ln in grid.splitlines() if "bob" in ln)


def test_csv_and_json_have_one_row_per_learner_and_exercise(homes, capsys):
    exercises = pr.course_exercises([NOTEBOOK_02])
    assert ("02_scaled_dot_product.ipynb", "softmax") in exercises and len(exercises) >= 3
    _, out, _ = run(capsys, homes, "--csv")
    table = list(csv.DictReader(io.StringIO(out)))
    assert len(table) == 3 * len(exercises)
    got = {(r["learner"], r["exercise"]): r for r in table}
    assert got["ada", "softmax"]["state"] == "done" and got["ada", "softmax"]["tries"] == "2"
    assert (got["bob", "softmax"]["state"], got["bob", "softmax"]["mistake"]) == ("tried", "no max subtraction")
    other = next(e for _, e in exercises if e != "softmax")
    assert got["ada", other]["state"] == "not started"
    _, out, _ = run(capsys, homes, "--json")
    data = json.loads(out)
    assert data["learners"]["cy"]["not started"] == len(exercises)
    assert {(r["learner"], r["exercise"], r["state"]) for r in data["rows"]} >= {
        ("ada", "softmax", "done"), ("bob", "softmax", "tried")}


def test_one_learners_folder_and_the_html_page(homes):
    folders = pr.course_folders([homes / "bob" / "mha-course"])
    assert folders == [("bob", (homes / "bob" / "mha-course").resolve())]
    page = pr.as_html(pr.rows(pr.gather(pr.course_folders([homes]))), refresh_s=5, when="now")
    assert '<meta http-equiv="refresh" content="5">' in page
    assert "<td class='done'" in page and "tried: no max subtraction" in page and ">cy<" in page


def test_the_page_lists_the_class_who_have_not_logged_in_yet(homes):
    """The hub knows a learners file's names before their first login: the page lists them, once each."""
    table = pr.rows(pr.gather(pr.course_folders([homes])))
    page = pr.as_html(table, refresh_s=None, absent=["zoe", "ada"])
    assert "<tr><td>zoe</td><td colspan=3 class='none'>not logged in yet</td></tr>" in page
    assert page.count("<tr><td>ada</td>") == 2  # her counts and her row of 02's grid: not also "not logged in"
    assert "not logged in yet" not in pr.as_html(table, refresh_s=None)
    assert "No learner has logged in yet" not in pr.as_html([], refresh_s=None, absent=["zoe"])
    assert "No learner has logged in yet" in pr.as_html([], refresh_s=None)


def test_a_corrupt_progress_file_is_named_for_that_learner_only(homes, capsys):
    (homes / "cy" / "mha-course" / ".mha-course" / "progress.json").write_text("{")
    code, out, _ = run(capsys, homes)
    assert code == 0
    assert "cy" in out and "unreadable progress file" in out and "1 done" in out


@pytest.mark.parametrize("arg", ["", "nowhere"])
def test_a_dir_without_course_folders_is_one_line_with_the_fix(tmp_path, capsys, arg):
    code, _, err = run(capsys, tmp_path / arg if arg else "")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "mha-course progress:" in err


@pytest.mark.parametrize("refresh", [-5, 0, True, 2.5, "10"])
def test_the_page_refuses_a_reload_that_is_not_a_positive_whole_number(refresh):
    with pytest.raises(ValueError, match="refresh_s"):
        pr.as_html([], refresh_s=refresh)
    assert "http-equiv" not in pr.as_html([], refresh_s=None)


def test_a_corrupt_notebook_is_named_not_skipped(tmp_path, homes, capsys):
    bad = tmp_path / "bad.ipynb"
    bad.write_text("not json", encoding="utf-8")
    with pytest.raises(pr.ProgressError, match="bad.ipynb: not a readable notebook"):
        pr.course_exercises([bad])
    assert cli.main(["progress", str(homes), "--notebooks", str(bad)]) == 2
    assert "bad.ipynb" in capsys.readouterr().err
    with pytest.raises(TypeError, match="progress must be the dict gather"):
        pr.rows("abc")
