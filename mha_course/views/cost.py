"""Views of 04 and 05: the heads in the output (which columns of W_O each head owns, how a change spreads),
the parameter blocks, the FLOP and memory curves and the cost ledger.

Colours follow the conventions of :mod:`.attention` (head i in ``HEAD_COLORS[i]``); helpers take
``ax=None`` (or ``axes=None``) and return what they drew on.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colors as mcolors

from .. import _validate
from ..heads import valid_heads
from ..lessons import complexity as _cx
from .style import HEAD_COLORS, finite_values, head_color, label_axes, log_values, new_ax, tokens_for

__all__ = ["DELTA_CMAP", "head_change_heatmap", "param_blocks", "flop_curves",
           "score_memory_bars", "timing_loglog", "params_figure", "ledger_figure"]


DELTA_CMAP = "Oranges"  # |change| maps (non-negative); never used for attention weights


def _head_cmap(h: int):
    return mcolors.ListedColormap([head_color(i) for i in range(h)])


def _head_of_column(d_model: int, h: int) -> np.ndarray:
    """(d_model,) head index of every feature column: column j belongs to head j // d_k."""
    d_model = _validate.positive_int(d_model, "d_model")
    return np.arange(d_model) // (d_model // _validate.heads(d_model, h))


def head_change_heatmap(delta, h: int, row_labels=None, ax=None, title=None, vmax=None):
    """delta (T, d_model) -> ax: |delta| by position and output column, columns banded by head.

    A strip above the map colours column j by its head (j // d_k), so one sees whose slice
    of the output changed. ``vmax`` fixes the colour scale (share it between panels).
    """
    d = np.abs(_validate.float_array(delta, "delta").astype(float))
    if d.ndim != 2 or 0 in d.shape:
        raise ValueError(f"head_change_heatmap needs a non-empty delta of shape (T, d_model), got shape {d.shape}; "
                         "pick one batch element, e.g. delta[0]")
    finite_values(d, "delta")
    vmax = None if vmax is None else _validate.number(vmax, "vmax", 0, low_open=True)
    owner = _head_of_column(d.shape[1], h)
    ax = new_ax(ax, figsize=(5, 3.5))
    top = vmax if vmax is not None else (float(d.max()) or 1.0)
    img = ax.imshow(d, cmap=DELTA_CMAP, vmin=0.0, vmax=top, aspect="auto", interpolation="nearest")
    label_axes(ax, tokens_for(d.shape[0], row_labels), None, "position", "output column")
    for j in np.flatnonzero(np.diff(owner)):
        ax.axvline(j + 0.5, color="black", lw=0.8)
    strip = ax.inset_axes([0.0, 1.02, 1.0, 0.08])
    strip.imshow(owner[None, :], cmap=_head_cmap(h), vmin=-0.5, vmax=h - 0.5, aspect="auto")
    strip.set_axis_off()
    if h <= 8:
        d_k = d.shape[1] // h
        for i in range(h):
            strip.text((i + 0.5) * d_k - 0.5, 0, f"head {i}", ha="center", va="center",
                       fontsize=7, color="white", fontweight="bold")
    ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.04, label="|change|")
    if title:
        ax.set_title(title, pad=16)
    return ax


def param_blocks(d_model: int, h: int, axes=None):
    """d_model, h -> axes (4,): W_Q, W_K, W_V, W_O as (d_model, d_model) grids coloured by head.

    Head i uses columns i·d_k..(i+1)·d_k-1 of W_Q, W_K, W_V and the same rows of W_O:
    the heads slice four fixed matrices, so there are 4·d_model² weights whatever h is.
    """
    d_model = _validate.positive_int(d_model, "d_model")
    owner = np.broadcast_to(_head_of_column(d_model, h), (d_model, d_model))  # (D, D)
    if axes is None:
        _, axes = plt.subplots(1, 4, figsize=(10, 2.9), layout="constrained")
    for ax, name in zip(axes, ("Q", "K", "V", "O")):
        grid = owner.T if name == "O" else owner  # W_O: rows belong to heads
        ax.imshow(grid, cmap=_head_cmap(h), vmin=-0.5, vmax=h - 0.5, interpolation="nearest")
        if d_model <= 32:  # one cell per weight
            ax.set_xticks(np.arange(d_model + 1) - 0.5, minor=True)
            ax.set_yticks(np.arange(d_model + 1) - 0.5, minor=True)
            ax.grid(which="minor", color="white", lw=0.4)
            ax.tick_params(which="minor", length=0)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"$W_{name}$  ({d_model}×{d_model})", fontsize=10)
        ax.set_xlabel("rows = heads' slices" if name == "O" else "columns = heads' slices",
                      fontsize=8)
    return axes


def flop_curves(seq_lens, projection, attention, crossover=None, ax=None):
    """seq_lens (N,), projection (N,), attention (N,) FLOPs -> ax: both on log-log axes.

    ``crossover`` (a seq_len) draws a dashed line where the two parts cost the same.
    """
    T = log_values(seq_lens, "seq_lens")
    projection = log_values(projection, "projection", T.size)
    attention = log_values(attention, "attention", T.size)
    if crossover is not None:
        _validate.number(crossover, "crossover", 0, low_open=True)  # drawn at its value, 32 not 32.0
    ax = new_ax(ax, figsize=(5.5, 3.8))
    ax.loglog(T, projection, "-", color=HEAD_COLORS[0], lw=2,
              label="projections  8·T·d_model²  (∝ T)")
    ax.loglog(T, attention, "-", color=HEAD_COLORS[1], lw=2,
              label="attention  4·T²·d_model  (∝ T²)")
    if crossover is not None:
        ax.axvline(crossover, color="black", ls="--", lw=1)
        ax.annotate(f"crossover\nT = 2·d_model = {crossover}", (crossover, 0.04),
                    xycoords=("data", "axes fraction"), xytext=(5, 0),
                    textcoords="offset points", fontsize=8)
    ax.set_xlabel("seq_len T (log scale)")
    ax.set_ylabel("FLOPs (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return ax


def score_memory_bars(hs, nbytes, current_h=None, ax=None):
    """hs (n,) head counts, nbytes (n,) score-matrix bytes -> ax: one bar per h (log scale).

    The bar of ``current_h`` (one of ``hs``, or None) is drawn in the first head colour, the others in grey.
    """
    hs = [int(v) for v in np.atleast_1d(_validate.positive_ints(hs, "hs"))]
    mib = log_values(nbytes, "nbytes", len(hs)) / 2**20
    if current_h is not None:
        current_h = _validate.choice(current_h, hs, "current_h")  # a bar that is not drawn is no mark
    ax = new_ax(ax, figsize=(4.5, 3.5))
    colors = [HEAD_COLORS[0] if h == current_h else "#bbbbbb" for h in hs]
    ax.bar([str(h) for h in hs], mib, color=colors)
    ax.set_yscale("log")
    if current_h in list(hs):
        k = list(hs).index(current_h)
        ax.annotate(f"{mib[k]:,.2f} MiB", (k, mib[k]), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8, color=HEAD_COLORS[0])
    ax.set_xlabel("h (divisors of d_model)")
    ax.set_ylabel("score matrix (MiB, log scale)")
    ax.tick_params(axis="x", labelsize=7 if len(hs) > 10 else 9)
    return ax


def timing_loglog(seq_lens, seconds, slope=None, ax=None):
    """seq_lens (N,), seconds (N,) -> ax: measured times on log-log axes with slope-1 and
    slope-2 guide lines through the last point (and the fitted ``slope`` in the legend)."""
    T = log_values(seq_lens, "seq_lens")
    t = log_values(seconds, "seconds", T.size)
    slope = None if slope is None else _validate.number(slope, "slope")
    ax = new_ax(ax, figsize=(5.5, 3.8))
    label = "measured" + (f" (fitted slope {slope:.2f})" if slope is not None else "")
    ax.loglog(T, t, "o-", color=HEAD_COLORS[0], lw=2, label=label)
    for p, style in ((1, ":"), (2, "--")):
        ax.loglog(T, t[-1] * (T / T[-1]) ** p, style, color="grey", label=f"slope {p} (∝ T^{p})")
    ax.set_xlabel("seq_len T (log scale)")
    ax.set_ylabel("seconds per forward pass (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return ax


# ---------------------------------------------------------------------------------------
# Whole views behind the sliders of 04 and 05 (pure functions of the sizes)
# ---------------------------------------------------------------------------------------


def params_figure(d_model: int, h: int):
    """d_model, h -> Figure: W_Q, W_K, W_V, W_O coloured by head, titled with the parameter count.

    The view of 04_concat_output's sliders: the count is 4·d_model² whatever h is.
    """
    d_model = _validate.positive_int(d_model, "d_model")
    h = _validate.heads(d_model, h)
    fig, axes = plt.subplots(1, 4, figsize=(10, 2.9), layout="constrained")
    param_blocks(d_model, h, axes=axes)
    fig.suptitle(f"d_model={d_model}, h={h}, d_k={d_model // h}:  4·{d_model}² = "
                 f"{_cx.param_count(d_model):,} parameters (+{4 * d_model} with biases)")
    return fig


def ledger_figure(d_model: int, h: int, seq_len: int):
    """d_model, h, seq_len -> Figure: FLOP curves with seq_len marked, score memory for every
    valid h, and the cost ledger as text. The view of 05_complexity's sliders.
    """
    led = _cx.ledger(d_model, h, seq_len)
    fig = plt.figure(figsize=(11, 5), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[3, 1])
    ax_flops, ax_mem = top.subplots(1, 2, width_ratios=[3, 2])
    Ts = np.unique(np.geomspace(16, 16384, 50).astype(np.int64))
    flop_curves(Ts, _cx.projection_flops(Ts, d_model), _cx.attention_flops(Ts, d_model),
                crossover=_cx.crossover_seq_len(d_model), ax=ax_flops)
    ax_flops.axvline(seq_len, color=head_color(2), lw=2)
    _ = ax_flops.plot([seq_len] * 2, [led.projection_flops, led.attention_flops], "ko", ms=5)
    ax_flops.set_title(f"FLOPs, d_model={d_model}; green line: seq_len={seq_len}", fontsize=10)
    hs = valid_heads(d_model)
    score_memory_bars(hs, [_cx.score_memory_bytes(1, h_, seq_len) for h_ in hs], h, ax=ax_mem)
    ax_mem.set_title(f"score memory at seq_len={seq_len}\n(the FLOPs are the same for every h)",
                     fontsize=10)
    ax_text = bottom.subplots()
    ax_text.set_axis_off()
    ax_text.text(0.0, 1.0, led.table(), family="monospace", va="top", fontsize=9)
    return fig
