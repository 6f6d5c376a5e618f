"""The views of notebook 09: head grouping, cache cost, time per token (matplotlib).

Each view is a pure function that takes ``ax=None`` and returns the Axes; ``widgets.gqa``'s
sliders redraw the first two, and the notebook calls each once directly (the static figure).

Taught in 09_kv_cache_and_gqa.ipynb.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .. import _validate
from ..gqa import kv_cache_table, kv_heads
from ..lessons.complexity import format_bytes
from .attention import head_color
from .style import finite_vector, log_values

__all__ = ["grouping_figure", "cache_cost_figure", "decode_times_figure", "VARIANT_COLORS"]

VARIANT_COLORS = {"MHA": "#7f7f7f", "GQA": head_color(0), "MQA": head_color(1), "MLA": head_color(2)}


# ----------------------------------------------------------------------------- pure views
def grouping_figure(h: int, h_kv: int, ax=None):
    """h query heads above h_kv key/value heads, a line from query head i to key/value head i // g.

    >>> ax = grouping_figure(8, 2); len(ax.lines)
    8
    """
    h = _validate.positive_int(h, "h")
    h_kv = kv_heads(h, h_kv)  # "h=8 is not divisible by h_kv=3; valid h_kv: 1, 2, 4, 8"
    g = h // h_kv
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

    Dots are single tokens; the lines are running medians over ``window`` tokens, or over all of
    them when there are fewer (a loaded machine makes single timings jump). Timings are finite and > 0
    (a log axis).

    >>> ax = decode_times_figure([5, 6], [1e-3, 1e-3], [1e-3, 2e-3]); len(ax.lines)
    4
    """
    positions = finite_vector(positions, "positions")
    series = {name: _validate.array(v, name, 1, "(N,) seconds") for name, v in
              (("with_cache", with_cache), ("without_cache", without_cache))}
    for name, v in series.items():
        if v.shape != positions.shape:
            raise ValueError(f"{name} has {v.shape[0]} timings for {positions.shape[0]} positions; give one per position")
        log_values(v, name)  # drawn on a log axis: NaN, inf, 0 and negative times refused
    window = _validate.positive_int(window, "window")
    ax = ax or plt.subplots(figsize=(6.4, 3.2))[1]
    for seconds, color, label in ((series["without_cache"], head_color(3), "without cache"),
                                  (series["with_cache"], head_color(0), "with KV cache")):
        ms = seconds * 1e3
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
