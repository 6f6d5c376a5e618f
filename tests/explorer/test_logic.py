"""The explorer's pure logic (explorer/logic.py): tokens, the one Trace, stage stories, head spans, the ledger."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from matplotlib import colors as mcolors  # noqa: E402
from matplotlib import mathtext  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course import explorer as ex  # noqa: E402
from mha_course.block import layer_norm  # noqa: E402
from mha_course.lessons import complexity  # noqa: E402
from mha_course.lessons.qkv import sentence_trace  # noqa: E402
from mha_course.views.attention import head_color  # noqa: E402

from .helpers import SIZES  # noqa: E402
from .helpers import explorer_trace as _trace  # noqa: E402


def test_sentence_tokens_cut_pad_and_normalise():
    assert ex.sentence_tokens("The cat, sat!", 2) == ["the", "cat"]
    assert ex.sentence_tokens("It's warm", 4) == ["it's", "warm", "tok2", "tok3"]
    assert ex.sentence_tokens("  ?! ", 3) == ex.DEFAULT_SENTENCE.split()[:3]


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_sentence_tokens_rejects_bad_seq_len(bad):
    with pytest.raises(ValueError, match="seq_len"):
        ex.sentence_tokens("the cat", bad)


@settings(max_examples=15, deadline=None, derandomize=True)
@given(SIZES, st.integers(0, 5))
def test_explorer_trace_is_the_course_sentence_trace(sizes, seed):
    d_model, h, seq_len = sizes
    tokens = ex.sentence_tokens(ex.DEFAULT_SENTENCE, seq_len)
    mine, course = ex.explorer_trace(tokens, d_model, h, seed), sentence_trace(tokens, d_model, h, seed)
    assert mine.names == course.names
    for name in mine.names:
        np.testing.assert_array_equal(mine[name], course[name], err_msg=name)


def test_block_output_is_post_norm_residual():
    t = _trace()
    y = ex.block_output(t)
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-3)
    np.testing.assert_allclose(y, layer_norm(t["X"] + t["output"]))


def test_stage_info_follows_the_trace_in_order():
    t = _trace(12, 3, 5)
    infos = [ex.stage_info(t, i) for i in range(len(t))]
    assert [i.name for i in infos] == t.names
    assert [i.shape for i in infos] == [t.shapes[n] for n in t.names]
    assert len({i.story for i in infos}) == len(infos), "every stage needs its own sentence"
    for info in infos:
        mathtext.math_to_image(info.formula, io.BytesIO(), format="png")  # valid mathtext
        assert info.story.endswith(".") and len(info.story) < 200


@pytest.mark.parametrize("bad", [-1, "len", 1.0])
def test_stage_info_rejects_bad_index(bad):
    t = _trace()
    with pytest.raises(ValueError, match=r"i=.*(out of range|whole number).* stages \(X \.\. output\)"):
        ex.stage_info(t, len(t) if bad == "len" else bad)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(SIZES)
def test_heads_without_gaps_are_the_concat_stage(sizes):
    d_model, h, seq_len = sizes
    t = _trace(d_model, h, seq_len)
    side = ex.heads_side_by_side(t["head_outputs"][0], max_heads=h, gap=0)
    np.testing.assert_array_equal(side, t["concat"][0])


def test_heads_side_by_side_puts_each_head_in_its_span():
    a = np.random.default_rng(0).normal(size=(5, 3, 2))
    side = ex.heads_side_by_side(a, max_heads=4)
    spans = ex.head_spans(4, 2)
    assert side.shape == (3, 4 * 2 + 3)
    for i, (start, stop) in enumerate(spans):
        np.testing.assert_array_equal(side[:, start:stop], a[i])
    gaps = [c for c in range(side.shape[1]) if not any(s <= c < e for s, e in spans)]
    assert np.isnan(side[:, gaps]).all() and not np.isnan(np.delete(side, gaps, axis=1)).any()


def test_head_strip_colours_each_head_columns():
    strip = ex.head_strip(3, 4, gap=1)
    for i, (start, stop) in enumerate(ex.head_spans(3, 4, 1)):
        assert np.allclose(strip[0, start:stop], mcolors.to_rgba(head_color(i)))
    assert np.allclose(strip[0, 4], mcolors.to_rgba("white"))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 300), st.integers(1, 20))
def test_tick_positions_are_even_and_bounded(n, max_ticks):
    pos = ex.tick_positions(n, max_ticks)
    assert pos[0] == 0 and len(pos) <= max_ticks and pos[-1] < n
    assert len(set(np.diff(pos))) <= 1
    if n <= max_ticks:
        assert pos == list(range(n))


def test_ledger_rows_read_the_complexity_ledger():
    rows = dict((q, v) for q, v, _ in ex.ledger_rows(64, 8, 16))
    L = complexity.ledger(64, 8, 16)
    assert rows["projections"] == f"{complexity.format_count(L.projection_flops)}FLOP"
    assert rows["attention"] == f"{complexity.format_count(L.attention_flops)}FLOP"
    assert rows["score matrix"] == complexity.format_bytes(8 * 16 * 16 * 4)
    assert rows["parameters"] == f"{4 * 64 * 64:,}"


def test_only_the_score_matrix_row_depends_on_h():
    by_h = {h: ex.ledger_rows(16, h, 10) for h in mc.valid_heads(16)}
    changed = {row[0] for h in by_h for row, base in zip(by_h[h], by_h[1]) if row != base}
    assert changed == {"score matrix"}


def test_sweep_lengths_include_the_current_seq_len():
    lens = ex.sweep_seq_lens(12, 256)
    assert lens == sorted(set(lens)) and 12 in lens and lens[-1] == 256 and 64 in lens


def test_guide_lines_have_slopes_one_and_two_through_the_last_point():
    T, t = [8, 16, 64, 256], [1e-4, 3e-4, 2e-3, 4e-2]
    g = ex.guide_lines(T, t)
    assert complexity.loglog_slope(T, g["O(T)"]) == pytest.approx(1.0)
    assert complexity.loglog_slope(T, g["O(T²)"]) == pytest.approx(2.0)
    assert g["O(T)"][-1] == g["O(T²)"][-1] == t[-1]
    with pytest.raises(ValueError):
        ex.guide_lines([1, 2], [1.0])


@pytest.mark.parametrize("x, label", [(1e-6, "1 µs"), (2.5e-4, "250 µs"), (0.01, "10 ms"),
                                      (3.0, "3 s"), (5e-9, "5 ns")])
def test_format_seconds(x, label):
    assert ex.format_seconds(x) == label


# --- issue 32, round 4: sizes of the layout helpers checked; NaN is no time
def test_layout_helpers_refuse_sizes_that_break_the_layout():
    with pytest.raises(ValueError, match="gap=-1 must be >= 0"):
        ex.head_spans(2, 3, gap=-1)  # was [(0, 3), (2, 5)]: overlapping heads
    with pytest.raises(ValueError, match="max_ticks=0 must be >= 1"):
        ex.tick_positions(10, max_ticks=0)  # was ZeroDivisionError
    with pytest.raises(ValueError, match="max_heads=0 must be >= 1"):
        ex.heads_side_by_side(np.ones((2, 3, 3)), max_heads=0)
    with pytest.raises(ValueError, match="d_model=8.5"):
        ex.explorer_trace(["a", "b"], 8.5, 2, 0)  # was truncated to 8
    assert ex.head_spans(0, 3) == [] and ex.tick_positions(0) == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "1 s", None])
def test_format_seconds_refuses_what_is_no_time(bad):
    with pytest.raises(ValueError, match="x=.* must be a finite number"):
        ex.format_seconds(bad)


def test_guide_lines_refuse_what_log_log_axes_cannot_draw():
    with pytest.raises(ValueError, match="seconds holds 0"):
        ex.guide_lines([8, 16], [0.0, 1e-3])


def test_helpers_refuse_what_is_no_trace_no_sentence_or_no_sweep():
    for fn in (ex.shape_summary, ex.block_output):
        with pytest.raises(TypeError, match="trace must be a Trace"):  # was AttributeError / KeyError
            fn({"X": np.ones((1, 2, 4))})
    with pytest.raises(ValueError, match="sentence=5 must be a string"):
        ex.sentence_tokens(5, 3)  # was ['5', 'tok1', 'tok2']
    with pytest.raises(ValueError, match=r"max_len=.* is outside 8\.\.16384"):
        ex.sweep_seq_lens(6, 10**30)  # was a numpy-internal TypeError from log2
    assert ex.sweep_seq_lens(6, 16) == [6, 8, 16] and ex.sweep_seq_lens(6, 31) == [6, 8, 16]
    assert ex.sentence_tokens(None, 2) == ["the", "cat"]
