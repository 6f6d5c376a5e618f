"""Linked h / d_model / seq_len controls and a live view around a pure draw function.

The rule the controls keep: h only ever takes values that divide d_model. When d_model
changes, h's options become the divisors of the new d_model and h moves to the nearest
one (``nearest_valid_h``), in one step, so a view redraws once, never with an invalid h.

Every live view wraps a pure function ``draw(**sizes) -> Figure`` that the notebook also
calls once directly (the static view that GitHub shows and nbval checks).
"""
from __future__ import annotations

from typing import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
from IPython.display import display

from ..heads import nearest_valid_h, valid_heads

__all__ = ["Controls", "SizeControls", "LiveView", "live_view", "OptionControls", "option_live_view"]

_STYLE = {"description_width": "70px"}
_LAYOUT = W.Layout(width="330px")


class Controls:
    """What every set of controls shares: ``on_change(fn)`` callbacks called with ``**values`` after a
    change, none while ``_busy`` (several widgets changing as one), and display of ``.box``."""
    _busy = False

    def on_change(self, fn: Callable) -> None:
        """Call ``fn(**values)`` after every change."""
        self._callbacks.append(fn)

    def _fire(self, change=None) -> None:
        if not self._busy:
            for fn in self._callbacks:
                fn(**self.values)

    def _ipython_display_(self):
        display(self.box)


class SizeControls(Controls):
    """Sliders for the sizes a lesson needs: any of ``d_model``, ``h``, ``seq_len``.

    ``controls.values`` is a dict of the current sizes; ``controls.on_change(fn)`` calls
    ``fn(**values)`` once per user change. ``controls.set(d_model=24)`` changes sizes from
    code (as a test or a notebook cell would), keeping h valid.

    >>> c = SizeControls(d_model=12, h=4)
    >>> c.set(d_model=10); c.values
    {'d_model': 10, 'h': 5, 'seq_len': 6}
    """

    def __init__(self, d_model: int = 16, h: int = 4, seq_len: int = 6,
                 d_model_options=(4, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64),
                 seq_len_range=(1, 16), show=("d_model", "h", "seq_len")):
        if d_model not in d_model_options:
            d_model_options = tuple(sorted({*d_model_options, d_model}))
        h = nearest_valid_h(d_model, h)
        self.d_model = W.SelectionSlider(options=list(d_model_options), value=d_model,
                                         description="d_model", continuous_update=False,
                                         style=_STYLE, layout=_LAYOUT)
        self.h = W.SelectionSlider(options=valid_heads(d_model), value=h, description="h",
                                   continuous_update=False, style=_STYLE, layout=_LAYOUT)
        self.seq_len = W.IntSlider(value=seq_len, min=seq_len_range[0], max=seq_len_range[1],
                                   description="seq_len", continuous_update=False,
                                   style=_STYLE, layout=_LAYOUT)
        self.shown = tuple(show)
        self._callbacks: list[Callable] = []
        self._busy = False
        self.d_model.observe(self._on_d_model, "value")
        self.h.observe(self._fire, "value")
        self.seq_len.observe(self._fire, "value")
        self.box = W.HBox([getattr(self, name) for name in self.shown])

    @property
    def values(self) -> dict:
        """The current sizes, e.g. ``{'d_model': 16, 'h': 4, 'seq_len': 6}``."""
        return {"d_model": self.d_model.value, "h": self.h.value, "seq_len": self.seq_len.value}

    def set(self, **sizes) -> None:
        """Change sizes from code; h snaps to the nearest divisor of d_model. One redraw."""
        self._busy = True
        try:
            if "d_model" in sizes:
                if sizes["d_model"] not in self.d_model.options:
                    raise ValueError(f"d_model={sizes['d_model']} is not one of this control's "
                                     f"options {list(self.d_model.options)}")
                self.d_model.value = sizes["d_model"]
            if "h" in sizes:
                self.h.value = nearest_valid_h(self.d_model.value, sizes["h"])
            if "seq_len" in sizes:
                self.seq_len.value = sizes["seq_len"]
        finally:
            self._busy = False
        self._fire()

    def _on_d_model(self, change) -> None:
        was_busy, self._busy = self._busy, True
        try:
            new_h = nearest_valid_h(change["new"], self.h.value)
            self.h.options = valid_heads(change["new"])
            self.h.value = new_h
        finally:
            self._busy = was_busy
        self._fire()


class LiveView:
    """Controls above an Output area that ``draw(**sizes)`` redraws on every change.

    ``draw`` is the same pure function the notebook calls for its static figure; it returns
    a matplotlib Figure (or anything displayable). ``view.redraw()`` draws for the current
    sizes and returns what ``draw`` returned.
    """

    def __init__(self, draw: Callable, controls: SizeControls):
        self.draw = draw
        self.controls = controls
        self.output = W.Output()
        self.widget = W.VBox([controls.box, self.output])
        controls.on_change(lambda **_: self.redraw())

    def redraw(self):
        result = self.draw(**{k: self.controls.values[k] for k in self.controls.shown})
        with self.output:
            self.output.clear_output(wait=True)
            display(result)
        if isinstance(result, plt.Figure):
            plt.close(result)
        return result

    def _ipython_display_(self):
        self.redraw()
        display(self.widget)


def live_view(draw: Callable, **control_kwargs) -> LiveView:
    """draw(**sizes) -> Figure, plus SizeControls options -> a LiveView to display.

    >>> view = live_view(lambda d_model, h: None, d_model=8, h=2, show=("d_model", "h"))
    >>> view.controls.values["h"]
    2
    """
    return LiveView(draw, SizeControls(**control_kwargs))


class OptionControls(Controls):
    """One slider over a fixed list of options (e.g. d_k = 1, 2, 4, ..., 512), with the same
    interface as SizeControls (``.values``, ``.on_change``, ``.set``, ``.box``, ``.shown``),
    so a LiveView can wrap it.

    >>> c = OptionControls("d_k", [1, 2, 4, 8], value=4)
    >>> c.set(d_k=8); c.values
    {'d_k': 8}
    """

    def __init__(self, name: str, options, value=None):
        options = list(options)
        if not options:
            raise ValueError(f"OptionControls({name!r}) needs at least one option")
        value = options[0] if value is None else value
        if value not in options:
            raise ValueError(f"{name}={value!r} is not one of the options {options}")
        self.name = name
        self.slider = W.SelectionSlider(options=options, value=value, description=name,
                                        continuous_update=False, style=_STYLE, layout=_LAYOUT)
        self.shown = (name,)
        self._callbacks: list[Callable] = []
        self.slider.observe(lambda change: self._fire(), "value")
        self.box = W.HBox([self.slider])

    @property
    def values(self) -> dict:
        """``{name: current option}``."""
        return {self.name: self.slider.value}

    def set(self, **value) -> None:
        """Change the option from code, e.g. ``controls.set(d_k=64)``."""
        if set(value) != {self.name}:
            raise ValueError(f"set() takes only {self.name}=..., got {sorted(value)}")
        new = value[self.name]
        if new not in self.slider.options:
            raise ValueError(f"{self.name}={new!r} is not one of the options "
                             f"{list(self.slider.options)}")
        self.slider.value = new


def option_live_view(draw: Callable, name: str, options, value=None) -> LiveView:
    """draw(**{name: option}) -> Figure, one slider over ``options`` -> a LiveView to display.

    >>> view = option_live_view(lambda d_k: None, "d_k", [1, 2, 4], value=2)
    >>> view.controls.values
    {'d_k': 2}
    """
    return LiveView(draw, OptionControls(name, options, value))

