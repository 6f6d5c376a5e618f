"""widgets/long_context.py: notebook 13's sliders redraw their pure views."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mha_course.lessons import long_context as lc  # noqa: E402


# ----------------------------------------------------------------------------- evaluations
def test_sliders_redraw(long_context_models):
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    box = lw.length_live_view({(k, 16): long_context_models[k] for k in ("rope", "alibi")}, scheme="rope", eval_len=16)
    slider = box.children[0].children[2]
    slider.value = 20  # the observer redraws; no exception
    box.children[0].children[0].value = "alibi"
    assert [c.description for c in box.children[0].children] == ["scheme", "train_len", "eval_len"]
    config, params = long_context_models["rope"]
    box = lw.window_live_view(config, params, lc.stream_batch(config, 2, np.random.default_rng(0), 4))
    box.children[0].children[1].value = 2
    assert [c.description for c in box.children[0].children] == ["window", "sinks"]
    plt.close("all")


@pytest.mark.parametrize("kwargs", [{"scheme": "nope"}, {"train_len": 12}, {"eval_len": 0}, {"eval_len": 66}])
def test_length_live_view_refuses_values_off_its_sliders(long_context_models, kwargs):
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        lw.length_live_view({("rope", 16): long_context_models["rope"]}, **kwargs)


@pytest.mark.parametrize("kwargs", [{"window": 0}, {"window": 33}, {"sinks": -1}, {"sinks": 5}, {"window": 2.5}])
def test_window_live_view_refuses_instead_of_clamping(long_context_models, kwargs):
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    config, params = long_context_models["rope"]
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        lw.window_live_view(config, params, lc.stream_batch(config, 2, np.random.default_rng(0), 4), **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"train_len": 16.0}, "train_len=16.0"), ({"train_len": True}, "train_len=True"), ({"scheme": "RoPE"}, "scheme="),
    ({"eval_len": 4}, "eval_len=4"), ({"eval_len": True}, "eval_len"), ({"show": ("scheme", "evallen")}, "evallen"),
    ({"show": "scheme"}, "show="), ({"models": {}}, "models"), ({"models": [1, 2]}, "models"),
    ({"models": {"rope": None}}, "models"), ({"models": {("rope", 16): None}}, "models")])
def test_length_live_view_refuses_before_building_widgets(long_context_models, kwargs, match):
    """train_len=16.0 was accepted, a misspelled show name was a KeyError, eval_len=4 drew a traceback."""
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    args = {"models": {("rope", 16): long_context_models["rope"]}, **kwargs}
    with pytest.raises(ValueError, match=match):
        lw.length_live_view(**args)


def test_length_live_view_takes_numpy_ints(long_context_models):
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    box = lw.length_live_view({("rope", 16): long_context_models["rope"]}, train_len=np.int64(16), eval_len=np.int64(24))
    assert box.children[0].children[2].value == 24
    plt.close("all")


@pytest.mark.parametrize("kwargs, match", [({"factor": True}, "factor=True"), ({"factor": 5.0}, "factor=5.0"),
                                           ({"show": ("factr",)}, "factr"), ({"scheme": "alibi"}, "positions='alibi'"),
                                           ({"config": None}, "config")])
def test_scaling_live_view_refuses_bad_input_and_an_alibi_model(long_context_models, kwargs, match):
    """factor=True was read as 1.0; an ALiBi model was offered RoPE scalings it has no rotation for."""
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    config, params = long_context_models[kwargs.pop("scheme", "rope")]
    args = {"config": config, "params": params, **kwargs}
    with pytest.raises(ValueError, match=match):
        lw.scaling_live_view(**args)


@pytest.mark.parametrize("batch, kwargs, match", [(None, {}, "batch"), ("abc", {}, "batch"),
                                                  ("stream", {"show": ("windw",)}, "windw"),
                                                  ("stream", {"window": np.int64(40)}, "window=")])
def test_window_live_view_refuses_what_is_no_stream(long_context_models, batch, kwargs, match):
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    config, params = long_context_models["rope"]
    batch = lc.stream_batch(config, 2, np.random.default_rng(0), 2) if batch == "stream" else batch
    with pytest.raises(ValueError, match=match):
        lw.window_live_view(config, params, batch, **kwargs)


def test_the_sliders_are_moved_from_code_through_controls_and_checked(long_context_models):
    """box.controls was missing (an AttributeError): now set() checks every name and value before one redraw."""
    pytest.importorskip("ipywidgets")
    from mha_course.widgets import long_context as lw
    box = lw.length_live_view({(k, 16): long_context_models[k] for k in ("rope", "alibi")}, eval_len=16)
    drawn = []
    box.controls.on_change(lambda **values: drawn.append(values))
    box.controls.set(scheme="alibi", eval_len=24)
    assert drawn == [{"scheme": "alibi", "train_len": 16, "eval_len": 24}]
    assert box.children[0].children[2].value == 24
    for bad, match in (({"eval_len": 7}, "eval_len=7"), ({"eval_len": 100}, "eval_len=100"),
                       ({"evallen": 8}, "evallen"), ({"scheme": "nope"}, "scheme='nope'")):
        with pytest.raises(ValueError, match=match):
            box.controls.set(**bad)
    assert box.controls.values == {"scheme": "alibi", "train_len": 16, "eval_len": 24} and len(drawn) == 1
    plt.close("all")
