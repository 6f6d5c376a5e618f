"""The checker's report (check/report.py): each verdict is printed, kept for the summary where
learner code cannot write it by name, and given to the hub's progress record."""
import numpy as np

import mha_course as mc
from mha_course import check
from mha_course.check import progress, report


def test_each_verdict_reaches_the_progress_record(capsys, monkeypatch, tmp_path):
    (tmp_path / progress.MARKER).mkdir()
    monkeypatch.setenv(progress.ENV, str(tmp_path))
    assert check.softmax(lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis, keepdims=True)) is False
    assert check.causal_mask(mc.causal_mask) is True
    capsys.readouterr()
    entries = {e["exercise"]: e for e in progress.read_progress(tmp_path)}
    assert entries["softmax"]["passed"] is False and "maximum" in entries["softmax"]["mistake"]
    assert entries["causal_mask"]["passed"] is True and entries["causal_mask"]["mistake"] is None


def test_the_summary_reads_a_copy_of_the_results(capsys):
    report.forget_results()
    check.causal_mask(mc.causal_mask)
    kept = report.results()
    kept["softmax"] = "done"  # changing the copy changes nothing
    check.summary()
    assert capsys.readouterr().out.splitlines()[-1] == "1 of 1 exercise done: causal_mask ✔"


def test_report_refuses_an_unknown_status():
    import pytest
    with pytest.raises(ValueError, match="use one of done, unfinished, wrong"):
        report.report("x", "passed", [])


def test_a_stub_is_not_recorded_as_tried(tmp_path, monkeypatch, capsys):
    """Run All on a fresh student copy prints "not finished" everywhere and records nothing: not started."""
    from mha_course.check import progress, report
    (tmp_path / progress.MARKER).mkdir()
    monkeypatch.setenv(progress.ENV, str(tmp_path))
    report.report("softmax", "unfinished", ["⋯ softmax: not finished yet"])
    assert progress.read_progress(tmp_path) == []
    report.report("softmax", "wrong", ["✘ softmax: case 1 of 3 failed"])
    assert [e["exercise"] for e in progress.read_progress(tmp_path)] == ["softmax"]


def test_a_list_of_arrays_in_a_call_is_said_by_count_and_shape():
    said = report.describe_call(lambda outs, lses: None, mc.efficient.merge_attention_partials,
                                ([np.zeros((3, 2))] * 2, [np.zeros((3, 1)), np.zeros((4, 1))]))
    assert said.endswith("(outs=[2 arrays (3, 2)], lses=[(3, 1), (4, 1)])"), said


def test_a_count_that_runs_out_of_memory_only_on_huge_sizes_is_right_with_a_note(capsys):
    def counted_with_arrays(d_model, h):  # right, but it allocates d_model x d_model bytes
        W = np.empty((d_model, d_model), dtype=np.int8)
        per_head = 3 * W[:, :d_model // h].size + W[:d_model // h].size
        return per_head, h * per_head
    assert check.head_params(counted_with_arrays) is True
    assert "needs more memory than there is" in capsys.readouterr().out
    def wrong_total(d_model, h):
        return counted_with_arrays(d_model, h)[0], counted_with_arrays(d_model, h)[0]
    assert check.head_params(wrong_total) is False
