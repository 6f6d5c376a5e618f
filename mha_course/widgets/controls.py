"""Linked h / d_model / seq_len controls and a live view around a pure draw function.

The rule the controls keep: h only ever takes values that divide d_model. When d_model
changes, h's options become the divisors of the new d_model and h moves to the nearest
one (``nearest_valid_h``), in one step, so a view redraws once, never with an invalid h.
Sizes given to a constructor are checked before any widget is built: an h that does not
divide d_model, a seq_len outside its range or an unknown name in ``show`` is refused
with a ValueError that names the values and the valid ones (never a traitlets TraitError).

Every live view wraps a pure function ``draw(**sizes) -> Figure`` that the notebook also
calls once directly (the static view that GitHub shows and nbval checks).
"""
from __future__ import annotations

import inspect
from typing import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from .. import _validate
from ..heads import nearest_valid_h, valid_heads

__all__ = ["Controls", "SizeControls", "LiveView", "live_view", "OptionControls", "option_live_view",
           "distinct_options"]

_STYLE = {"description_width": "70px"}
_LAYOUT = W.Layout(width="330px")


class Controls:
    """What every set of controls shares: ``on_change(fn)`` callbacks called with ``**values`` after a
    change, none while ``_busy`` (several widgets changing as one), and display of ``.box``."""
    _busy = False

    def on_change(self, fn: Callable) -> None:
        """Call ``fn(**values)`` after every change (``fn`` checked now, not at the first change)."""
        if not callable(fn):
            raise TypeError(f"on_change needs a function fn(**values), got {type(fn).__name__} ({fn!r:.40}); "
                            "pass e.g. lambda **values: print(values)")
        self._callbacks.append(fn)

    def _fire(self, change=None) -> None:
        if not self._busy:
            for fn in self._callbacks:
                fn(**self.values)

    def _ipython_display_(self):
        display(self.box)


SIZES = ("d_model", "h", "seq_len")  # the sizes SizeControls can show
SIZE_CONTROLS_ARGS = (*SIZES, "d_model_options", "seq_len_range", "show")  # what live_view passes on


def distinct_options(options, name: str) -> list:
    """A slider's options (a list, tuple, range or 1-D array) -> a list, refused when one appears twice
    (two stops of one value); ``name`` is the argument that holds them.

    >>> distinct_options([1, 2, 4], "options")
    [1, 2, 4]
    """
    options = _validate.items(list(options) if isinstance(options, range) else options, name, "[1, 2, 4]")
    for i, o in enumerate(options):
        if any(_same(o, p) for p in options[:i]):
            raise ValueError(f"{name}={options!r:.80} holds {o!r} twice; give each option once")
    return options


def _same(a, b) -> bool:
    """Two options are one stop: equal and both whole numbers or both not (an option that cannot be
    compared, an array say, is no stop of another)."""
    try:
        return _validate.is_whole(a) == _validate.is_whole(b) and bool(a == b)
    except (TypeError, ValueError):
        return False


def seq_len_bounds(seq_len_range) -> tuple[int, int]:
    """seq_len_range (lo, hi) -> (lo, hi), checked: whole numbers with 1 <= lo <= hi.

    >>> seq_len_bounds((1, 16))
    (1, 16)
    """
    if isinstance(seq_len_range, (str, bytes)) or not isinstance(seq_len_range, (list, tuple)) or len(seq_len_range) != 2:
        raise ValueError(f"seq_len_range={seq_len_range!r} must be a pair (lo, hi), e.g. seq_len_range=(1, 16)")
    lo, hi = (_validate.positive_int(v, "seq_len_range") for v in seq_len_range)
    if lo > hi:
        raise ValueError(f"seq_len_range={seq_len_range!r} has lo > hi; pass (lo, hi) with lo <= hi")
    return lo, hi


def in_range(seq_len, lo: int, hi: int) -> int:
    """seq_len as an int in lo..hi (the slider's range), refused outside it (a slider would clamp it)."""
    seq_len = _validate.positive_int(seq_len, "seq_len")
    if not lo <= seq_len <= hi:
        raise ValueError(f"seq_len={seq_len} is outside the slider's range {lo}..{hi}; pass a seq_len in it "
                         f"or widen seq_len_range")
    return seq_len


class SizeControls(Controls):
    """Sliders for the sizes a lesson needs: any of ``d_model``, ``h``, ``seq_len``.

    ``controls.values`` is a dict of the current sizes; ``controls.on_change(fn)`` calls
    ``fn(**values)`` once per user change. ``controls.set(d_model=24)`` changes sizes from
    code (as a test or a notebook cell would): h follows d_model to its nearest divisor, as the
    sliders do; an h asked for that does not divide d_model is refused, naming the valid h.

    >>> c = SizeControls(d_model=12, h=4)
    >>> c.set(d_model=10); c.values
    {'d_model': 10, 'h': 5, 'seq_len': 6}
    """

    def __init__(self, d_model: int = 16, h: int = 4, seq_len: int = 6,
                 d_model_options=(4, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64),
                 seq_len_range=(1, 16), show=("d_model", "h", "seq_len")):
        # every size checked before a widget is built
        d_model = _validate.positive_int(d_model, "d_model")
        if isinstance(d_model_options, (str, bytes)) or not isinstance(d_model_options, (list, tuple)):
            raise ValueError(f"d_model_options={d_model_options!r} must be a list of sizes, e.g. (8, 16, 32)")
        d_model_options = distinct_options([int(v) for v in np.atleast_1d(
            _validate.positive_ints(list(d_model_options), "d_model_options"))], "d_model_options")
        if d_model not in d_model_options:
            d_model_options = sorted({*d_model_options, d_model})
        h = _validate.heads(d_model, h)
        lo, hi = seq_len_bounds(seq_len_range)
        seq_len = in_range(seq_len, lo, hi)
        shown = _validate.names(show, SIZES, "show")
        self.d_model = W.SelectionSlider(options=list(d_model_options), value=d_model,
                                         description="d_model", continuous_update=False,
                                         style=_STYLE, layout=_LAYOUT)
        self.h = W.SelectionSlider(options=valid_heads(d_model), value=h, description="h",
                                   continuous_update=False, style=_STYLE, layout=_LAYOUT)
        self.seq_len = W.IntSlider(value=seq_len, min=seq_len_range[0], max=seq_len_range[1],
                                   description="seq_len", continuous_update=False,
                                   style=_STYLE, layout=_LAYOUT)
        self.shown = shown
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
        """Change sizes from code, as the sliders would. Every size is checked before any slider moves, and
        a value no slider offers is refused (never snapped): d_model one of its options, h a divisor of the
        d_model (the new one when both are given), seq_len in the slider's range. A d_model given without
        h moves h to the divisor nearest its value (the h slider's rule). One redraw."""
        _validate.names(list(sizes), SIZES, "set()")
        if "d_model" in sizes and (isinstance(sizes["d_model"], bool) or sizes["d_model"] not in self.d_model.options):
            raise ValueError(f"d_model={sizes['d_model']!r} is not one of this control's "
                             f"options {list(self.d_model.options)}")
        d_model = int(sizes.get("d_model", self.d_model.value))
        h = _validate.heads(d_model, sizes["h"]) if "h" in sizes else None  # "... valid h: 1, 2, 4, 8, 16"
        seq_len = in_range(sizes["seq_len"], self.seq_len.min, self.seq_len.max) if "seq_len" in sizes else None
        self._busy = True
        try:
            if "d_model" in sizes:
                self.d_model.value = d_model
            if h is not None:
                self.h.value = h
            if seq_len is not None:
                self.seq_len.value = seq_len
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
        if not callable(draw):
            raise TypeError(f"draw must be a function draw(**sizes) -> Figure, got {type(draw).__name__}")
        _validate.instance(controls, Controls, "controls", "pass e.g. SizeControls(d_model=16, h=4)")
        try:
            inspect.signature(draw).bind(**{k: controls.values[k] for k in controls.shown})
        except TypeError:  # found now, not as Python's "unexpected keyword argument" at the first redraw
            raise TypeError(f"draw{inspect.signature(draw)} cannot take the shown sizes {', '.join(controls.shown)}; "
                            f"write draw({', '.join(controls.shown)}) or pass show= with its arguments") from None
        except ValueError:  # no signature to read (a builtin): it is called as it is
            pass
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

    A name that is not one of SizeControls' arguments is refused, listing them.

    >>> view = live_view(lambda d_model, h: None, d_model=8, h=2, show=("d_model", "h"))
    >>> view.controls.values["h"]
    2
    """
    _validate.names(list(control_kwargs), SIZE_CONTROLS_ARGS, "live_view()")
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
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"name={name!r} must be the draw function's argument name, e.g. 'd_k'")
        if not isinstance(options, (list, tuple, range, np.ndarray)):
            raise ValueError(f"options={options!r} must be a list of the slider's values, e.g. [1, 2, 4, 8]")
        options = distinct_options(options, "options")
        if not options:
            raise ValueError(f"OptionControls({name!r}) needs at least one option")
        value = options[0] if value is None else _validate.choice(value, options, name)
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
        """Change the option from code, e.g. ``controls.set(d_k=64)``; a value off the slider is refused."""
        if set(value) != {self.name}:
            raise ValueError(f"set() takes only {self.name}=..., got {sorted(value)}; pass e.g. "
                             f"{self.name}={self.slider.value!r}")
        self.slider.value = _validate.choice(value[self.name], self.slider.options, self.name)


def option_live_view(draw: Callable, name: str, options, value=None) -> LiveView:
    """draw(**{name: option}) -> Figure, one slider over ``options`` -> a LiveView to display.

    >>> view = option_live_view(lambda d_k: None, "d_k", [1, 2, 4], value=2)
    >>> view.controls.values
    {'d_k': 2}
    """
    return LiveView(draw, OptionControls(name, options, value))

