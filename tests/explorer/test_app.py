"""The explorer widget (explorer/app.py): one Trace per change, only the visible mode redrawn."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course import explorer as ex  # noqa: E402

from .helpers import pixels  # noqa: E402


def test_one_trace_per_change_and_none_per_mode_switch(explorer, monkeypatch):
    calls = []
    real = ex.logic.trace
    monkeypatch.setattr(ex.logic, "trace", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    explorer.controls.set(h=2)
    assert calls == [2]
    for mode in ex.MODES:
        explorer.mode.value = mode
    explorer.step(+1)
    assert calls == [2], "switching modes or stages must not recompute attention"


def test_only_the_visible_mode_is_redrawn(explorer, monkeypatch):
    for mode in ex.MODES:  # build every view once
        explorer.mode.value = mode
    explorer.mode.value = "Data"
    drawn = []
    for mode, view in explorer._views.items():
        monkeypatch.setattr(view, "update", lambda scene, m=mode, f=view.update: drawn.append(m) or f(scene))
    explorer.controls.set(h=8)
    assert drawn == ["Data"]
    explorer.mode.value = "Architecture"  # stale: redrawn once when it becomes visible
    explorer.mode.value = "Data"          # up to date: not redrawn
    assert drawn == ["Data", "Architecture"]


def test_h_slider_changes_the_shapes_and_the_picture(explorer):
    before_png, before_caption = explorer.image.value, explorer.caption.value
    explorer.controls.h.value = 2  # as the browser's slider does
    assert "Q_heads (1, 2, 6, 8)" in explorer.caption.value
    assert explorer.caption.value != before_caption and explorer.image.value != before_png
    assert explorer.trace.h == 2 and explorer.controls.values["h"] == 2


def test_d_model_change_keeps_h_a_divisor(explorer):
    explorer.controls.set(d_model=10)
    assert explorer.trace.d_model == 10 and 10 % explorer.trace.h == 0


def test_sentence_and_seed_feed_the_trace(explorer):
    X0 = explorer.trace["X"].copy()
    explorer.sentence.value = "a dog barked at the moon tonight"
    assert explorer.tokens == ["a", "dog", "barked", "at", "the", "moon"]
    X1 = explorer.trace["X"].copy()
    explorer.seed.value = 7
    assert not np.array_equal(X0, X1) and not np.array_equal(X1, explorer.trace["X"])


@pytest.mark.parametrize("changes", [[dict(h=2), dict(seq_len=9), dict(h=8)],
                                     [dict(d_model=12), dict(h=3), dict(seq_len=1)]])
def test_reused_figures_draw_what_a_fresh_figure_draws(explorer, changes):
    """The live path (artists updated in place, static layer cached) must show exactly what
    a figure built from scratch for the same Trace shows."""
    for change in changes:
        explorer.controls.set(**change)
        for mode in ex.MODES:
            explorer.mode.value = mode
            live = pixels(explorer.image.value)
            fig = matplotlib.figure.Figure(figsize=ex.FIGSIZE, dpi=ex.DPI)
            matplotlib.backends.backend_agg.FigureCanvasAgg(fig)
            fresh = pixels(ex.find_mode(mode).View(fig, blit=False).png(explorer.scene()))
            differ = (np.abs(live - fresh).max(axis=-1) > 40).mean()
            assert differ < 1e-4, f"{mode} after {change}: {differ:.2%} of pixels differ"


def test_the_widget_is_built_from_the_list_of_modes(explorer):
    """Buttons, views, mode-only control rows and caption hints all come from MODE_LIST."""
    assert explorer.mode.options == ex.MODES == tuple(m.name for m in ex.MODE_LIST)
    for mode in ex.MODE_LIST:
        assert isinstance(mode, ex.Mode) and issubclass(mode.View, ex.View) and mode.hint
        explorer.mode.value = mode.name
        assert mode.hint in explorer.caption.value
        assert isinstance(explorer._views[mode.name], mode.View)
        for name, box in explorer.mode_boxes.items():  # a mode's controls show in that mode only
            assert box.layout.display == (None if name == mode.name else "none"), (mode.name, name)
        assert box in explorer.widget.children
    assert set(explorer.mode_boxes) == {"State", "Performance"}


# --- issue 32, round 4: an unknown mode or a fractional step is refused, not ignored or truncated
def test_touch_refuses_an_unknown_mode(explorer):
    with pytest.raises(ValueError, match="mode='nope' is not one of Architecture, Data, State, Performance"):
        explorer.touch("nope")
    explorer.touch("state")  # any case, as find_mode reads it
    assert "State" in explorer._stale


@pytest.mark.parametrize("bad", [1.5, True, "1", None])
def test_step_takes_whole_numbers_only(explorer, bad):
    explorer.step(2)
    with pytest.raises(ValueError, match=r"delta=.* must be a whole number of stages"):
        explorer.step(bad)
    assert explorer.stage.value == 2


@pytest.mark.parametrize("kwargs, match", [({"max_len": 0}, "max_len=0 must be >= 1"),
                                           ({"max_len": 4}, "max_len=4 is outside 8..16384"),
                                           ({"repeats": 0}, "repeats=0 must be >= 1")])
def test_measure_refuses_bad_sizes_before_the_progress_bar_moves(explorer, kwargs, match):
    before = (explorer.progress.max, explorer.progress.value, explorer.sweep)
    with pytest.raises(ValueError, match=match):  # max_len=0 was an OverflowError from log2(0)
        explorer.measure(**kwargs)
    assert (explorer.progress.max, explorer.progress.value, explorer.sweep) == before


@pytest.mark.parametrize("kwargs, match", [({"seed": 10**7}, "seed=10000000 is past the seed box's 999,999"),
                                           ({"seed": -1}, "seed=-1 must be >= 0"),
                                           ({"seed": 1.5}, "seed=1.5 must be a whole number"),
                                           ({"sentence": 5}, "sentence=5 must be a string")])
def test_a_seed_or_sentence_the_boxes_cannot_hold_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):  # the seed was clamped to 0..999999, 1.5 truncated
        ex.Explorer(**kwargs)
