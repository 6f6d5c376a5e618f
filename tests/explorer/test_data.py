"""The Data mode (explorer/data.py): the heads side by side, read from the one Trace."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course import explorer as ex  # noqa: E402
from mha_course.views import attention as plots  # noqa: E402

from .helpers import shown as shown_of  # noqa: E402


def test_data_mode_shows_the_one_trace(explorer):
    explorer.controls.set(h=2, seq_len=5)
    explorer.mode.value = "Data"
    view, t = explorer._views["Data"], explorer.trace
    for name, matrix in view.top.items():
        np.testing.assert_array_equal(shown_of(matrix), t[name][0], err_msg=name)
    np.testing.assert_array_equal(shown_of(view.weights.matrix), ex.heads_side_by_side(t["weights"][0]))
    np.testing.assert_array_equal(shown_of(view.scores.matrix), ex.heads_side_by_side(t["scores"][0]))
    np.testing.assert_array_equal(shown_of(view.concat.matrix), t["concat"][0])
    assert view.weights.matrix.image.get_clim() == (0.0, 1.0)
    assert view.weights.matrix.image.get_cmap().name.startswith(plots.WEIGHTS_CMAP)


# ---- labels: every token or none, a colour bar on every scores panel ----

import matplotlib

matplotlib.use("Agg")


from mha_course.explorer import Explorer  # noqa: E402
from mha_course.explorer.app import FIGSIZE  # noqa: E402
from mha_course.explorer.data import DataView  # noqa: E402
from mha_course.explorer.state import StateView  # noqa: E402
from mha_course.lessons.qkv import SENTENCE  # noqa: E402
from mha_course.views.attention import tokens_for  # noqa: E402


def _labels(pool):
    return [t.get_text() for t in pool.texts if t.get_visible() and t.get_text()]


def _view(View, explorer):
    """A static view of the explorer's current scene (what ``explorer.render`` draws)."""
    view = View(plt.figure(figsize=FIGSIZE))
    view.update(explorer.scene())
    return view


def _all_or_none(labels, tokens):
    n = len(tokens)
    return not labels or (len(labels) % n == 0 and labels == list(tokens) * (len(labels) // n))


@pytest.fixture(scope="module")
def explorer():
    return Explorer(d_model=16, h=4, seq_len=6)


@pytest.mark.parametrize("sizes", [dict(h=4, seq_len=6), dict(h=8, seq_len=6), dict(h=2, seq_len=16),
                                   dict(h=1, seq_len=16), dict(h=16, seq_len=12)])
def test_data_mode_labels_every_token_or_none(explorer, sizes):
    plt.close("all")
    explorer.controls.set(**sizes)
    view, tokens = _view(DataView, explorer), tokens_for(sizes["seq_len"])
    for panel in (view.scores, view.weights):
        assert _all_or_none(_labels(panel.matrix.keys), tokens), _labels(panel.matrix.keys)
    for matrix in (view.top["X"], view.scores.matrix, view.outputs.matrix):
        assert _all_or_none(_labels(matrix.rows), tokens), _labels(matrix.rows)


def test_the_course_sentence_is_labelled_in_full(explorer):
    explorer.controls.set(h=4, seq_len=6)
    keys = _labels(_view(DataView, explorer).scores.matrix.keys)
    assert keys[:6] == list(SENTENCE)


@pytest.mark.parametrize("stage", ["scores", "weights", "X"])
def test_state_mode_labels_every_token_or_none_and_has_a_colour_bar(explorer, stage):
    explorer.controls.set(h=4, seq_len=6)
    explorer.stage.value = explorer.trace.names.index(stage)
    view = _view(StateView, explorer)
    assert _all_or_none(_labels(view.tensor.matrix.rows), list(SENTENCE))
    assert _all_or_none(_labels(view.tensor.matrix.keys), list(SENTENCE))
    assert view.cbar.mappable is view.tensor.matrix.image


def test_data_scores_colour_bar_follows_the_scores(explorer):
    explorer.controls.set(h=4, seq_len=6)
    view = _view(DataView, explorer)
    lo, hi = view.scores.matrix.image.get_clim()
    assert view.scores_cbar.mappable is view.scores.matrix.image
    assert np.isclose(hi, np.abs(explorer.trace["scores"][0]).max()) and np.isclose(lo, -hi)


# ---- heads told apart: a divider in every gap, a title over every head, keys under every head ----
@pytest.mark.parametrize("h", [2, 4, 8])
def test_every_per_head_panel_divides_and_titles_its_heads(explorer, h):
    explorer.controls.set(d_model=16, h=h, seq_len=6)
    explorer.mode.value = "Data"
    view = explorer._views["Data"]
    for name in ("scores", "weights"):
        panel = getattr(view, name)
        spans = ex.head_spans(h, 6)
        assert [line.get_xdata()[0] for line in panel.dividers] == [stop for _, stop in spans[:-1]], name
        titles = [t.get_text() for t in panel.titles if t.get_visible()]
        assert len(titles) == h, (name, titles)
        keys = [t.get_text() for t in panel.matrix.keys.texts if t.get_visible()]
        assert keys == ex.sentence_tokens(ex.DEFAULT_SENTENCE, 6) * h, (name, keys)


def test_hidden_heads_are_said_in_every_mode(explorer):
    explorer.controls.set(d_model=24, h=12, seq_len=6)
    note = ex.hidden_heads_note(12)
    assert note == f"heads 0-{ex.MAX_HEADS_SHOWN - 1} of 12 drawn, {12 - ex.MAX_HEADS_SHOWN} not shown"
    explorer.mode.value = "Data"
    view = explorer._views["Data"]
    assert note in view.titles["scores"].get_text() and note in view.titles["weights"].get_text()
    texts = [t.get_text() for t in explorer.render("architecture").findobj(matplotlib.text.Text)]
    assert f"{ex.MAX_HEADS_SHOWN} of 12 heads drawn" in texts
    plt.close("all")
    explorer.controls.set(h=4)
    assert ex.hidden_heads_note(4) == ""
    texts = [t.get_text() for t in explorer.render("architecture").findobj(matplotlib.text.Text)]
    assert not any("heads drawn" in t for t in texts)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_hidden_heads_note_refuses_what_is_not_a_head_count(bad):
    with pytest.raises(ValueError, match="h=.* must be"):
        ex.hidden_heads_note(bad)
