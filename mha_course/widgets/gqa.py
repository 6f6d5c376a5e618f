"""The views and sliders of notebook 09: head grouping, cache cost, time per token.

Each view is a pure function ``draw(**sizes) -> Figure`` that the notebook also calls once
directly (the static figure); the sliders wrap it with ``widgets.LiveView``. The h_kv slider
only offers divisors of h: when h changes, h_kv moves to the nearest divisor of the new h
(``nearest_valid_h``), in one step, so a view never redraws with an invalid pair.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from ..gqa import kv_cache_table, kv_heads, valid_kv_heads
from ..heads import nearest_valid_h
from ..lessons.complexity import format_bytes
from ..views.attention import head_color
from .controls import Controls, LiveView

__all__ = ["grouping_figure", "cache_cost_figure", "decode_times_figure", "KVControls",
           "grouping_live_view", "cache_live_view", "VARIANT_COLORS"]

VARIANT_COLORS = {"MHA": "#7f7f7f", "GQA": "#1f77b4", "MQA": "#ff7f0e", "MLA": "#2ca02c"}
_STYLE = {"description_width": "70px"}
_LAYOUT = W.Layout(width="330px")


# ----------------------------------------------------------------------------- pure views
def grouping_figure(h: int, h_kv: int, ax=None):
    """h query heads above h_kv key/value heads, a line from query head i to key/value head i // g.

    >>> ax = grouping_figure(8, 2); len(ax.lines)
    8
    """
    g = h // kv_heads(h, h_kv)  # a ValueError naming the valid h_kv
    ax = ax or plt.subplots(figsize=(6.4, 2.2))[1]
    q_x, kv_x = np.arange(h), (np.arange(h_kv) + 0.5) * g - 0.5  # each kv head centred under its group
    for i in range(h):
        ax.plot([q_x[i], kv_x[i // g]], [1, 0], color=head_color(i // g), lw=1.5, zorder=1)
    ax.scatter(q_x, np.ones(h), s=260, marker="s", c=[head_color(i // g) for i in range(h)], zorder=2)
    ax.scatter(kv_x, np.zeros(h_kv), s=420, marker="D", c=[head_color(j) for j in range(h_kv)], zorder=2)
    ax.set_yticks([0, 1], [f"K/V heads ({h_kv})", f"query heads ({h})"])
    ax.set_xticks(q_x, [str(i) for i in q_x])
    ax.set_xlabel("query head i (reads K/V head i // g)")
    ax.set_ylim(-0.4, 1.4)
    ax.set_xlim(-0.8, h - 0.2)
    name = "MHA" if h_kv == h else "MQA" if h_kv == 1 else "GQA"
    ax.set_title(f"{name}: h = {h}, h_kv = {h_kv}, {g} query head{'s' * (g > 1)} per K/V head")
    ax.spines[["top", "right", "left"]].set_visible(False)
    return ax


def cache_cost_figure(layers: int, d_model: int, h: int, h_kv: int, seq_len: int,
                      bytes_per_number: int = 2, ax=None):
    """Bars: the KV cache of one sequence of seq_len tokens for MHA, GQA (h_kv), MQA and MLA.

    >>> ax = cache_cost_figure(32, 4096, 32, 8, 4096); [t.get_text() for t in ax.get_yticklabels()]
    ['MHA', 'GQA', 'MQA', 'MLA']
    """
    rows = kv_cache_table(layers, d_model, h, h_kv, [seq_len], bytes_per_number)
    ax = ax or plt.subplots(figsize=(6.4, 2.6))[1]
    gib = [r.total_bytes[0] / 2**30 for r in rows]
    ax.barh(range(len(rows)), gib, color=[VARIANT_COLORS[r.name] for r in rows])
    ax.set_yticks(range(len(rows)), [r.name for r in rows])
    ax.invert_yaxis()
    for i, r in enumerate(rows):
        ax.text(gib[i], i, f" {format_bytes(r.total_bytes[0])}  ({r.cached} per layer)", va="center", fontsize=8)
    ax.set_xlim(0, max(gib) * 1.9)
    ax.set_xlabel(f"KV cache of one sequence (GiB), {bytes_per_number} bytes per number")
    ax.set_title(f"{layers} layers, d_model {d_model}, h {h}, h_kv {h_kv}, {seq_len:,} tokens")
    return ax


def decode_times_figure(positions, with_cache, without_cache, ax=None, window: int = 15):
    """Time per generated token (ms, log scale) against its position, with and without the cache.

    Dots are single tokens; the lines are running medians over ``window`` tokens (a loaded
    machine makes single timings jump).

    >>> ax = decode_times_figure([5, 6], [1e-3, 1e-3], [1e-3, 2e-3]); len(ax.lines)
    4
    """
    ax = ax or plt.subplots(figsize=(6.4, 3.2))[1]
    positions = np.asarray(positions)
    for seconds, color, label in ((without_cache, "#d62728", "without cache"),
                                  (with_cache, "#1f77b4", "with KV cache")):
        ms = np.asarray(seconds) * 1e3
        ax.plot(positions, ms, ".", ms=3, color=color, alpha=0.5)
        w = min(window, len(ms))
        medians = np.median(np.lib.stride_tricks.sliding_window_view(ms, w), axis=-1)  # (N - w + 1,)
        ax.plot(positions[w // 2: w // 2 + len(medians)], medians, color=color, lw=2, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("position of the generated token (tokens already seen)")
    ax.set_ylabel("time per token (ms)")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3, which="both")
    return ax


# ----------------------------------------------------------------------------- controls
class KVControls(Controls):
    """Sliders for h, h_kv (only divisors of h) and optionally layers, seq_len, d_model.

    The same interface as ``widgets.SizeControls`` (``values``, ``on_change``, ``set``, ``box``,
    ``shown``), so a ``widgets.LiveView`` wraps it.

    >>> c = KVControls(h=8, h_kv=8, h_options=(4, 6, 8))
    >>> c.set(h=6); c.values["h_kv"]  # 8 is no divisor of 6: the nearest one, 6
    6
    """

    def __init__(self, h: int = 32, h_kv: int = 8, layers: int = 32, seq_len: int = 4096, d_model: int = 4096,
                 h_options=(1, 2, 4, 8, 16, 32, 64), show=("h", "h_kv")):
        self.sliders = {
            "h": W.SelectionSlider(options=list(h_options), value=h, description="h"),
            "h_kv": W.SelectionSlider(options=valid_kv_heads(h), value=nearest_valid_h(h, h_kv), description="h_kv"),
            "layers": W.SelectionSlider(options=[1, 2, 4, 12, 24, 32, 48, 64, 80], value=layers, description="layers"),
            "seq_len": W.SelectionSlider(options=[2**k for k in range(8, 21)], value=seq_len, description="seq_len"),
            "d_model": W.SelectionSlider(options=[512, 1024, 2048, 4096, 8192], value=d_model, description="d_model")}
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
        """Change sizes from code; h_kv snaps to the nearest divisor of h. One redraw."""
        with self._one_redraw():
            for name in (n for n in self.sliders if n in sizes):
                value = nearest_valid_h(self.sliders["h"].value, sizes[name]) if name == "h_kv" else sizes[name]
                if value not in self.sliders[name].options:
                    raise ValueError(f"{name}={value} is not one of this control's options "
                                     f"{list(self.sliders[name].options)}")
                self.sliders[name].value = value

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
    controls = KVControls(**sizes, show=show)
    return LiveView(_figure_of(cache_cost_figure), controls)
