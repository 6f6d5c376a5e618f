"""The sliders of notebook 13 (ipywidgets) over the pure views of ``views.long_context``.

``length_live_view`` (scheme, training length, evaluation length), ``scaling_live_view`` (RoPE's scaling factor)
and ``window_live_view`` (a rolling cache's window and sinks). Each redraws one figure on
release of a slider; the notebook draws the same view once statically below it.

Taught in 13_long_context.ipynb.
"""
from __future__ import annotations

import ipywidgets as W
import matplotlib.pyplot as plt
from IPython.display import display

from .. import _validate
from ..views import long_context as lv
from .controls import Controls

__all__ = ["length_live_view", "scaling_live_view", "window_live_view"]

_STYLE = {"description_width": "80px"}
_LAYOUT = W.Layout(width="340px")


class _SliderControls(Controls):
    """The sliders of one view by name, with the interface every live view's controls have: ``values``,
    ``set(**values)`` (all checked before any slider moves: a name that is no slider, or a value off
    its slider, is a ValueError; one redraw), ``on_change(fn)``, ``box``, ``shown``."""

    def __init__(self, sliders: dict, show):
        self.sliders, self.shown = sliders, tuple(show)
        self._callbacks: list = []
        self._busy = False
        for s in sliders.values():
            s.observe(self._fire, "value")
        self.box = W.HBox([sliders[name] for name in self.shown])

    @property
    def values(self) -> dict:
        return {name: s.value for name, s in self.sliders.items()}

    def set(self, **values) -> None:
        """Move sliders from code, e.g. ``box.controls.set(eval_len=48)``."""
        _validate.names(list(values), tuple(self.sliders), "set()'s names")
        checked = {name: _on_slider(self.sliders[name], v, name) for name, v in values.items()}
        self._busy = True
        try:
            for name, v in checked.items():
                self.sliders[name].value = v
        finally:
            self._busy = False
        self._fire()


def _on_slider(slider, value, name: str):
    """``value`` if ``slider`` can show it (an option of a SelectionSlider; min..max in steps of an IntSlider)."""
    if isinstance(slider, W.SelectionSlider):
        return _validate.choice(value, slider.options, name)
    lo, hi, step = slider.min, slider.max, slider.step
    if not (_validate.is_whole(value) and lo <= value <= hi and (value - lo) % step == 0):
        raise ValueError(f"{name}={value!r} is not on its slider: whole numbers {lo}..{hi} in steps of {step}")
    return int(value)


def _live(draw, sliders: dict, show) -> W.VBox:
    """Sliders (name -> widget), the names shown -> a box that redraws ``draw(**values)`` on every change;
    ``box.controls`` moves the sliders from code (``set``) and reads them (``values``)."""
    controls = _SliderControls(sliders, show)
    out = W.Output()

    def redraw(**values):
        with out:
            out.clear_output(wait=True)
            fig = draw(**values)
            display(fig)
            plt.close(fig)

    controls.on_change(redraw)
    redraw(**controls.values)
    box = W.VBox([controls.box, out])
    box.controls = controls
    return box


def length_live_view(models: dict, show=("scheme", "train_len", "eval_len"), scheme: str = "rope",
                     train_len: int = 16, eval_len: int = 32):
    """{(scheme, training length): (Config, Model)} -> sliders for the scheme, the training length
    and the evaluation length (8 .. 64, the task needs 6 tokens or more); a pair that was not trained shows
    its nearest length."""
    models = _validate.mapping(models, "models", "{(scheme, training length): (Config, Model)}")
    for key, model in models.items():
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str) and _validate.is_whole(key[1])):
            raise ValueError(f"models has the key {key!r}; key each model by (scheme, training length), e.g. ('rope', 16)")
        if not isinstance(model, tuple) or len(model) != 2:
            raise ValueError(f"models[{key!r}] must be a (Config, Model), got {type(model).__name__}; "
                             "pass long_context.load_scheme(name)")
        lv.checked_model(*model)
    show = _validate.names(show, ("scheme", "train_len", "eval_len"))
    schemes = list(dict.fromkeys(s for s, _ in models))
    lengths = sorted({int(L) for _, L in models})
    scheme = _validate.choice(scheme, schemes, "scheme")  # a scheme with no model here is refused
    train_len = _validate.choice(train_len, lengths, "train_len")
    if not (_validate.is_whole(eval_len) and 8 <= eval_len <= 64 and eval_len % 4 == 0):
        raise ValueError(f"eval_len={eval_len!r} must be a multiple of 4 from 8 to 64 (the slider's values)")
    eval_len = int(eval_len)
    controls = {"scheme": W.SelectionSlider(options=schemes, value=scheme, description="scheme",
                                            continuous_update=False, style=_STYLE, layout=_LAYOUT),
                "train_len": W.SelectionSlider(options=lengths, value=train_len, description="train_len",
                                               continuous_update=False, style=_STYLE, layout=_LAYOUT),
                "eval_len": W.IntSlider(value=eval_len, min=8, max=64, step=4, description="eval_len",
                                        continuous_update=False, style=_STYLE, layout=_LAYOUT)}

    def draw(scheme, train_len, eval_len):
        trained = [L for s, L in models if s == scheme]
        L = min(trained, key=lambda x: abs(x - train_len))
        return lv.length_view(models[(scheme, L)], eval_len)
    return _live(draw, controls, show)


def scaling_live_view(config, params, show=("factor",), factor: float = 4.0):
    """The trained RoPE model -> a slider for the scaling factor s (1 .. 4: up to 64 tokens)."""
    config, params = lv.rope_model(config, params)  # an ALiBi model has no rotation to rescale
    show = _validate.names(show, ("factor",))
    options = [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
    factor = _validate.choice(factor, options, "factor")  # on the slider
    controls = {"factor": W.SelectionSlider(options=options, value=factor,
                                            description="factor", continuous_update=False, style=_STYLE,
                                            layout=_LAYOUT)}
    return _live(lambda factor: lv.scaling_view(config, params, factor), controls, show)


def window_live_view(config, params, batch, show=("window", "sinks"), window: int = 16, sinks: int = 0):
    """The trained RoPE model and a stream -> sliders for the rolling cache's window (2 .. 32) and sinks (0 .. 4)."""
    config, params = lv.checked_model(config, params)
    batch = lv.checked_batch(config, batch)
    show = _validate.names(show, ("window", "sinks"))
    for value, name, lo, hi in ((window, "window", 2, 32), (sinks, "sinks", 0, 4)):
        if not (_validate.is_whole(value) and lo <= value <= hi):
            raise ValueError(f"{name}={value!r} must be a whole number from {lo} to {hi} (the slider's range)")
    window, sinks = int(window), int(sinks)
    controls = {"window": W.IntSlider(value=window, min=2, max=32, description="window",
                                      continuous_update=False, style=_STYLE, layout=_LAYOUT),
                "sinks": W.IntSlider(value=sinks, min=0, max=4, description="sinks",
                                     continuous_update=False, style=_STYLE, layout=_LAYOUT)}
    return _live(lambda window, sinks: lv.window_view(config, params, batch, window, sinks), controls, show)
