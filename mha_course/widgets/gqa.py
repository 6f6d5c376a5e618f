"""The sliders of notebook 09 over its views (``views.gqa``): head grouping and cache cost.

Each view is a pure function ``draw(**sizes) -> Axes`` in ``views/gqa.py`` that the notebook also
calls once directly (the static figure); the sliders wrap it with ``widgets.LiveView``. The h_kv slider
only offers divisors of h: when h changes, h_kv moves to the nearest divisor of the new h
(``nearest_valid_h``), in one step, so a view never redraws with an invalid pair. A size asked for in
code (the constructor, ``set``) that is not on its slider, or an h_kv that does not divide h, is refused
with a ValueError before any widget is built or changed.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import ipywidgets as W

from .. import _validate
from ..gqa import kv_heads, valid_kv_heads
from ..heads import nearest_valid_h
from ..views.gqa import cache_cost_figure, grouping_figure
from .controls import Controls, LiveView, distinct_options

__all__ = ["KVControls", "grouping_live_view", "cache_live_view"]

_STYLE = {"description_width": "70px"}
_LAYOUT = W.Layout(width="330px")
SLIDER_OPTIONS = {"layers": [1, 2, 4, 12, 24, 32, 48, 64, 80], "seq_len": [2**k for k in range(8, 21)],
                  "d_model": [512, 1024, 2048, 4096, 8192]}  # and h: h_options; h_kv: the divisors of h


# ----------------------------------------------------------------------------- controls
class KVControls(Controls):
    """Sliders for h, h_kv (only divisors of h) and optionally layers, seq_len, d_model.

    The same interface as ``widgets.SizeControls`` (``values``, ``on_change``, ``set``, ``box``,
    ``shown``), so a ``widgets.LiveView`` wraps it.

    >>> c = KVControls(h=8, h_kv=8, h_options=(4, 6, 8))
    >>> c.set(h=6); c.values["h_kv"]  # the h slider moved: 8 is no divisor of 6, h_kv follows to 6
    6
    """

    def __init__(self, h: int = 32, h_kv: int = 8, layers: int = 32, seq_len: int = 4096, d_model: int = 4096,
                 h_options=(1, 2, 4, 8, 16, 32, 64), show=("h", "h_kv")):
        h_options = distinct_options(_validate.positive_ints(list(h_options), "h_options").tolist(), "h_options")
        options = {"h": h_options, **SLIDER_OPTIONS}
        values = {name: _validate.choice(v, options[name], name)  # a value off its slider: refused, not a TraitError
                  for name, v in (("h", h), ("layers", layers), ("seq_len", seq_len), ("d_model", d_model))}
        h = values["h"]
        h_kv = kv_heads(h, h_kv)  # "h=8 is not divisible by h_kv=3; valid h_kv: 1, 2, 4, 8"
        show = _validate.names(show, ("h", "h_kv", "layers", "seq_len", "d_model"))
        self.sliders = {
            "h": W.SelectionSlider(options=h_options, value=h, description="h"),
            "h_kv": W.SelectionSlider(options=valid_kv_heads(h), value=h_kv, description="h_kv"),
            **{name: W.SelectionSlider(options=options[name], value=values[name], description=name)
               for name in ("layers", "seq_len", "d_model")}}
        for s in self.sliders.values():
            s.continuous_update, s.style, s.layout = False, _STYLE, _LAYOUT
        self.shown = tuple(show)
        self._callbacks: list[Callable] = []
        self._busy = False
        for name, s in self.sliders.items():
            s.observe(self._on_h if name == "h" else self._fire, "value")
        self.box = W.VBox([self.sliders[n] for n in self.shown])

    @property
    def values(self) -> dict:
        """The current sizes, e.g. ``{'h': 32, 'h_kv': 8, 'layers': 32, ...}``."""
        return {name: s.value for name, s in self.sliders.items()}

    @contextlib.contextmanager
    def _one_redraw(self):
        """Changes made inside run no callback; the outermost block fires once at its end."""
        outer, self._busy = not self._busy, True
        try:
            yield
        finally:
            self._busy = not outer and self._busy
        if outer:
            self._fire()

    def set(self, **sizes) -> None:
        """Change sizes from code, all checked before any changes: each must be on its slider, and h_kv
        must divide h (the new h when both are given). One redraw."""
        _validate.names(list(sizes), tuple(self.sliders), "sizes")
        checked = {name: _validate.choice(v, self.sliders[name].options, name)
                   for name, v in sizes.items() if name != "h_kv"}
        if "h_kv" in sizes:
            checked["h_kv"] = kv_heads(checked.get("h", self.sliders["h"].value), sizes["h_kv"])
        with self._one_redraw():
            for name in (n for n in self.sliders if n in checked):
                self.sliders[name].value = checked[name]

    def _on_h(self, change) -> None:
        """h moved: h_kv's options become the divisors of the new h, h_kv the nearest of them."""
        with self._one_redraw():
            kv = self.sliders["h_kv"]
            new_kv = nearest_valid_h(change["new"], kv.value)
            kv.options, kv.value = valid_kv_heads(change["new"]), new_kv



def _figure_of(draw_ax):
    """A draw function returning an Axes -> one returning its Figure (what LiveView displays)."""
    return lambda **sizes: draw_ax(**sizes).figure


def grouping_live_view(h: int = 8, h_kv: int = 2, show=("h", "h_kv")) -> LiveView:
    """Sliders for h and h_kv over ``grouping_figure``.

    >>> grouping_live_view(8, 2).controls.values["h_kv"]
    2
    """
    controls = KVControls(h=h, h_kv=h_kv, h_options=(1, 2, 4, 6, 8, 12, 16), show=show)
    return LiveView(_figure_of(grouping_figure), controls)


def cache_live_view(show=("layers", "d_model", "h", "h_kv", "seq_len"), **sizes) -> LiveView:
    """Sliders (by default layers, d_model, h, h_kv, seq_len) over ``cache_cost_figure`` (fp16).

    >>> cache_live_view().controls.values["seq_len"]
    4096
    """
    _validate.names(list(sizes), ("layers", "d_model", "h", "h_kv", "seq_len", "h_options"), "sizes")
    d_model = _validate.choice(sizes.get("d_model", 4096), SLIDER_OPTIONS["d_model"], "d_model")
    _validate.heads(d_model, _validate.positive_int(sizes.get("h", 32), "h"))  # d_model=4096, h=6: both named
    controls = KVControls(**sizes, show=show)
    return LiveView(_figure_of(cache_cost_figure), controls)
