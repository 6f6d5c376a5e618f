"""The linked size controls keep h a divisor of d_model, and the shared plot helpers behave."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.views import attention as plots  # noqa: E402
from mha_course.widgets import LiveView, OptionControls, SizeControls, live_view, option_live_view  # noqa: E402

OPTIONS = (4, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64)


@pytest.mark.parametrize("d_model, h, expected", [(12, 5, 6), (16, 3, 4), (10, 4, 5), (7, 3, 1),
                                                  (64, 64, 64), (64, 100, 64), (9, 2, 3)])
def test_nearest_valid_h(d_model, h, expected):
    assert mc.nearest_valid_h(d_model, h) == expected


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(OPTIONS), st.integers(1, 64)), min_size=1, max_size=6))
def test_h_always_divides_d_model(changes):
    controls = SizeControls(d_model=12, h=4)
    calls = []
    controls.on_change(lambda **v: calls.append(v))
    for d_model, h in changes:
        controls.d_model.value = d_model  # as a user dragging the d_model slider
        assert controls.values["d_model"] % controls.values["h"] == 0
        assert list(controls.h.options) == mc.valid_heads(d_model)
        before = controls.values
        if d_model % h:  # an h that is no stop of the h slider: refused, nothing moves
            with pytest.raises(ValueError, match=f"d_model={d_model} is not divisible by h={h}; valid h: "):
                controls.set(h=h)
            assert controls.values == before
        else:
            controls.set(h=h)  # as code asking for a valid h
            assert controls.values["h"] == h
    assert all(v["d_model"] % v["h"] == 0 for v in calls), "a callback saw an invalid h"


def test_one_callback_per_change():
    controls = SizeControls(d_model=12, h=4)
    calls = []
    controls.on_change(lambda **v: calls.append(v))
    controls.d_model.value = 10   # h options change and h moves: still one redraw
    controls.h.value = 2
    controls.seq_len.value = 9
    controls.set(d_model=16, h=8, seq_len=3)
    assert calls == [{"d_model": 10, "h": 5, "seq_len": 6}, {"d_model": 10, "h": 2, "seq_len": 6},
                     {"d_model": 10, "h": 2, "seq_len": 9}, {"d_model": 16, "h": 8, "seq_len": 3}]


def test_set_rejects_unknown_d_model():
    with pytest.raises(ValueError, match="d_model=13 is not one of"):
        SizeControls().set(d_model=13)


@pytest.fixture
def built(monkeypatch):
    """The ipywidgets built during a test (a refused size must build none)."""
    import ipywidgets as W
    made = []
    monkeypatch.setattr(W.Widget, "_widget_construction_callback", made.append)
    return made


@pytest.mark.parametrize("kwargs, message", [
    (dict(d_model=8, h=3), "d_model=8 is not divisible by h=3; valid h: 1, 2, 4, 8"),  # was snapped to 4
    (dict(d_model=12, h=0), "h=0 must be >= 1"),
    (dict(d_model=8.0), "d_model=8.0 must be a positive integer"),
    (dict(d_model="8"), "d_model='8' must be a positive integer"),  # was: '<' not supported ... 'str'
])
def test_a_size_that_does_not_fit_is_refused_naming_both_before_any_widget(built, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        SizeControls(**kwargs)
    with pytest.raises(ValueError, match=re.escape(message)):
        live_view(lambda **_: None, **kwargs)
    assert built == [], "a widget was built before the sizes were checked"
    SizeControls(d_model=8, h=4)
    assert built, "the fixture sees widgets being built"


@pytest.mark.parametrize("seq_len", [0, 17, 4.5, True])
def test_a_seq_len_outside_the_slider_is_refused_not_clamped(built, seq_len):
    with pytest.raises(ValueError, match="seq_len"):
        SizeControls(seq_len=seq_len, seq_len_range=(1, 16))  # the IntSlider would clamp 17 to 16
    assert built == []
    controls = SizeControls(seq_len=6)
    with pytest.raises(ValueError, match="seq_len"):
        controls.set(seq_len=seq_len)
    assert controls.values["seq_len"] == 6
    for bad in ((4, 2), (0, 3), "1-16", (1, 2, 3)):
        with pytest.raises(ValueError, match="seq_len_range"):
            SizeControls(seq_len_range=bad)


def test_a_misspelled_show_name_is_refused_listing_the_valid_ones(built):
    with pytest.raises(ValueError, match="show='hh' is not one of the valid choices: 'd_model', 'h', 'seq_len'"):
        live_view(lambda d_model, h: None, d_model=8, h=2, show=("d_model", "hh"))  # was AttributeError: 'hh'
    with pytest.raises(ValueError, match="show='h' must be a list or tuple"):
        SizeControls(show="h")
    assert built == []
    with pytest.raises(ValueError, match=re.escape("set()='hh' is not one of the valid choices")):
        SizeControls().set(hh=2)  # was ignored silently


def test_set_checks_every_size_before_moving_a_slider():
    controls = SizeControls(d_model=12, h=4)
    calls = []
    controls.on_change(lambda **v: calls.append(v))
    with pytest.raises(ValueError, match="h=2.5 must be a positive integer"):
        controls.set(d_model=16, h=2.5)
    with pytest.raises(ValueError, match="d_model=True is not one of"):
        controls.set(d_model=True)
    assert controls.values == {"d_model": 12, "h": 4, "seq_len": 6} and calls == []


def test_live_view_and_option_controls_refuse_what_they_cannot_use():
    with pytest.raises(TypeError, match="controls must be a Controls, got NoneType"):
        LiveView(lambda **_: None, None)  # was AttributeError: 'NoneType' object has no attribute 'box'
    with pytest.raises(TypeError, match="draw must be a function"):
        LiveView("draw", SizeControls())
    for options in ("124", None, 3):
        with pytest.raises(ValueError, match="options="):
            option_live_view(lambda d_k: None, "d_k", options)
    with pytest.raises(ValueError, match="d_k=True is not one of the valid choices: 1, 2"):
        OptionControls("d_k", [1, 2], value=True)
    with pytest.raises(ValueError, match="d_k=3 is not one of the valid choices: 1, 2"):
        OptionControls("d_k", [1, 2]).set(d_k=3)


def test_live_view_redraws_with_the_shown_sizes():
    seen = []

    def draw(d_model, h):
        seen.append((d_model, h))
        fig, _ = plt.subplots()
        return fig

    view = live_view(draw, d_model=8, h=2, show=("d_model", "h"))
    view.controls.set(d_model=24, h=6)
    assert seen == [(24, 6)]
    assert isinstance(view.redraw(), plt.Figure)
    assert seen[-1] == (24, 6)


def test_head_heatmaps_one_axis_per_head_masked_cells_grey():
    rng = np.random.default_rng(0)
    t = mc.trace(rng.normal(size=(1, 5, 12)), mc.init_params(12, rng=rng), 3, mask=mc.causal_mask(5))
    axes = plots.head_heatmaps(t, tokens=plots.tokens_for(5))
    assert [ax.get_title() for ax in axes] == ["head 0", "head 1", "head 2"]
    assert [tick.get_text() for tick in axes[0].get_yticklabels()] == ["the", "cat", "sat", "on", "the"]
    shown = axes[0].images[0].get_array()
    assert shown.mask[0, 1] and not shown.mask[1, 0], "future keys should be masked (grey)"
    assert axes[0].images[0].get_cmap().name.startswith(plots.WEIGHTS_CMAP)
    plt.close("all")


def test_plot_helpers_reject_wrong_shapes_and_token_counts():
    with pytest.raises(ValueError, match="weights\\[0, head\\]"):
        plots.attention_heatmap(np.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match="got 2 tokens for a sequence of length 3"):
        plots.tokens_for(3, ["a", "b"])
    assert plots.tokens_for(18)[-2:] == ["tok16", "tok17"]


@pytest.mark.parametrize("d_model, h", [(16, 4), (12, 3), (8, 8)])
def test_params_figure_counts_4_d_model_squared_for_any_h(d_model, h):
    fig = plots.params_figure(d_model, h)
    title = fig._suptitle.get_text()
    assert f"{4 * d_model * d_model:,} parameters" in title and f"h={h}" in title
    assert len(fig.axes) == 4
    plt.close(fig)


@pytest.mark.parametrize("d_model, h, seq_len", [(512, 8, 1024), (64, 16, 16)])
def test_ledger_figure_shows_the_ledger_and_every_valid_h(d_model, h, seq_len):
    fig = plots.ledger_figure(d_model, h, seq_len)
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    from mha_course.lessons.complexity import ledger
    assert ledger(d_model, h, seq_len).table() in texts
    bars = [ax for ax in fig.axes if ax.patches]
    assert len(bars) == 1 and len(bars[0].patches) == len(mc.valid_heads(d_model))
    plt.close(fig)


# --- issue 32, round 4: a refused set() changes nothing; a value off a slider is refused, never snapped
@pytest.mark.parametrize("sizes, match", [
    ({"seq_len": 9, "h": 5}, r"d_model=24 is not divisible by h=5; valid h: 1, 2, 3, 4, 6, 8, 12, 24"),
    ({"h": 5}, r"valid h: 1, 2, 3, 4, 6, 8, 12, 24"),
    ({"d_model": 20, "h": 6}, r"d_model=20 is not divisible by h=6; valid h: 1, 2, 4, 5, 10, 20"),
    ({"seq_len": 3, "d_model": 13}, "d_model=13 is not one of"),
    ({"h": 2, "seq_len": 99}, "seq_len=99 is outside the slider's range"),
])
def test_a_refused_set_changes_nothing_and_redraws_nothing(sizes, match):
    calls = []
    view = live_view(lambda **s: calls.append(s), d_model=24, h=3, seq_len=5)
    before = view.controls.values
    with pytest.raises(ValueError, match=match):
        view.controls.set(**sizes)
    assert view.controls.values == before and calls == []


def test_a_misspelled_name_gets_the_message_set_gives():
    with pytest.raises(ValueError, match=re.escape("set()='heads' is not one of the valid choices: 'd_model', 'h'")):
        SizeControls().set(heads=2)
    with pytest.raises(ValueError, match=re.escape("live_view()='heads' is not one of the valid choices: 'd_model'")):
        live_view(lambda **s: None, heads=2)  # was Python's "unexpected keyword argument"
    with pytest.raises(ValueError, match=re.escape("set() takes only d_k=..., got ['dk']; pass e.g. d_k=1")):
        OptionControls("d_k", [1, 2]).set(dk=2)


@pytest.mark.parametrize("make", [lambda: OptionControls("h", [2, 4, 2]),
                                  lambda: OptionControls("scale", [1.0, 0.5, 1.0]),
                                  lambda: SizeControls(d_model=8, d_model_options=(8, 16, 16))])
def test_an_option_given_twice_is_refused(make):
    with pytest.raises(ValueError, match="twice; give each option once"):
        make()


def test_on_change_refuses_what_it_could_not_call():
    controls = SizeControls()
    with pytest.raises(TypeError, match="on_change needs a function"):
        controls.on_change("redraw")  # was accepted, then a raw TypeError at the first change
    controls.set(h=2)  # nothing was registered: the change runs


def test_a_draw_that_cannot_take_the_shown_sizes_is_refused_at_once():
    with pytest.raises(TypeError, match=r"draw\(d_model\) cannot take the shown sizes d_model, h, seq_len"):
        live_view(lambda d_model: None)  # was Python's "unexpected keyword argument 'h'" at the first redraw
    assert live_view(lambda d_model: None, show=("d_model",)).controls.shown == ("d_model",)
