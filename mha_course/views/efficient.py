"""The views of 10_efficient_attention: the tile-by-tile step-through, bytes moved, curves.

Each helper draws what the package computes (``efficient.tiled_attention_steps``, the byte
counts ``efficient.naive_attention_bytes`` / ``tiled_attention_bytes``) and never recomputes
attention its own way. Helpers take ``ax=None`` (or ``fig=None``) and return what they drew on.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from .. import _validate
from ..attention import scaled_dot_product_attention
from ..efficient import naive_attention_bytes, online_softmax_result, tiled_attention_bytes, tiled_attention_steps
from ..lessons.complexity import format_bytes
from . import attention as plots
from .style import finite_vector, head_color, log_values

__all__ = ["tiling_step_figure", "score_tiles", "io_bytes_curves", "measured_curves", "step_bytes"]

NAIVE_COLOR, TILED_COLOR = head_color(3), plots.HEAD_COLORS[0]


def new_ax(ax, figsize):
    """ax, or a new one on a figure with fixed margins (faster to draw than a constrained layout)."""
    if ax is None:
        fig = plt.figure(figsize=figsize)
        ax = fig.add_axes((0.14, 0.15, 0.82, 0.74))
    return ax


def step_bytes(T: int, S: int, d_k: int, d_v: int, block_size: int, step: int, itemsize: int = 8) -> tuple:
    """(naive, tiled) bytes moved to and from main memory once ``step`` key blocks (1-based) are done.

    The naive version on the keys seen so far against the tiled one (one block of all T rows).

    >>> step_bytes(4, 4, 2, 2, 2, 2) == step_bytes(4, 4, 2, 2, 4, 1)  # all keys seen either way
    True
    """
    T, S, d_k, d_v, block_size, itemsize = (_validate.positive_int(v, n) for v, n in (
        (T, "T"), (S, "S"), (d_k, "d_k"), (d_v, "d_v"), (block_size, "block_size"), (itemsize, "itemsize")))
    step = _step(step, S, block_size)
    seen = min(S, step * block_size)
    return (naive_attention_bytes(T, seen, d_k, d_v, itemsize),
            tiled_attention_bytes(T, seen, d_k, d_v, block_rows=T, itemsize=itemsize))


def _step(step, S: int, block_size: int) -> int:
    """The 1-based step checked: one step per key block of ``block_size``, 1 .. ceil(S / block_size)."""
    n = -(-S // block_size)
    if not (_validate.is_whole(step) and 1 <= step <= n):
        raise ValueError(f"step={step!r} must be a whole number in 1..{n}: one step per key block of {block_size} "
                         f"over {S} keys (steps count from 1)")
    return int(step)


def score_tiles(scores, block_size: int, step: int, ax=None):
    """scores (T, S), the 1-based step -> ax: the scores, tiles done in full colour, the current one outlined.

    Tiles not reached yet are faded: the tiled computation has not made them.
    """
    s = _validate.array(scores, "scores", 2, "(T, S)")
    T, S = s.shape
    block_size = _validate.positive_int(block_size, "block_size")
    step = _step(step, S, block_size)
    ax = new_ax(ax, figsize=(6, 2.4))
    done = min(S, step * block_size)
    shown = np.ma.masked_where(np.broadcast_to(np.arange(S) >= done, s.shape), s)
    lim = float(np.nanmax(np.abs(s))) if np.isfinite(s).any() else 1.0
    lim = lim if 0 < lim < np.inf else 1.0
    ax.imshow(s, cmap=plots.VALUES_CMAP, vmin=-lim, vmax=lim, aspect="auto", alpha=0.2)
    ax.imshow(shown, cmap=plots.VALUES_CMAP, vmin=-lim, vmax=lim, aspect="auto")
    for c in range(0, S, block_size):
        current = c // block_size + 1 == step
        ax.add_patch(Rectangle((c - 0.5, -0.5), min(block_size, S - c), T, fill=False,
                               lw=2.5 if current else 0.6, ec="black" if current else "0.5"))
    ax.set_xticks(range(0, S, block_size))
    ax.set_xlabel(f"key s (blocks of {block_size})")
    ax.set_ylabel("query t")
    ax.set_title(f"scores, key block {step} of {-(-S // block_size)} (faded: not computed yet)")
    return ax


def tiling_step_figure(Q, K, V, block_size: int, step: int, query: int = 0, fig=None):
    """Q (T, d_k), K (S, d_k), V (S, d_v), block_size, the 1-based step -> Figure of the online softmax.

    Top: the score tiles; query ``query``'s partial output after this step against the exact
    one; the largest error of the partial outputs step by step. Bottom: every query's running
    max m and running sum l step by step; the bytes the naive and the tiled versions have moved.
    The view of the step-through slider in 10_efficient_attention.
    """
    steps = tiled_attention_steps(Q, K, V, block_size)
    (T, d_k), (S, d_v) = np.shape(Q), np.shape(V)
    step = _step(step, S, block_size)
    query = _validate.index(query, T, "query", "queries")
    exact = scaled_dot_product_attention(Q, K, V)[0]  # (T, d_v)
    fig = fig or plt.figure(figsize=(13, 5.6))
    grid = fig.add_gridspec(2, 4, left=0.05, right=0.97, top=0.93, bottom=0.1, hspace=0.45, wspace=0.3)
    score_tiles(np.asarray(Q) @ np.asarray(K).T / np.sqrt(d_k), block_size, step, ax=fig.add_subplot(grid[0, :2]))
    _partial_bars(online_softmax_result(steps[step - 1])[query], exact[query], query, fig.add_subplot(grid[0, 2]))
    errors = [max(float(np.abs(online_softmax_result(s) - exact).max()), 1e-17) for s in steps]  # log scale: no 0
    _step_lines(np.array(errors)[:, None], step, "max |partial − exact|", fig.add_subplot(grid[0, 3]), log=True)
    _step_lines(np.hstack([s.m for s in steps]).T, step, "running max m", fig.add_subplot(grid[1, 0]))
    _step_lines(np.hstack([s.l for s in steps]).T, step, "running sum l", fig.add_subplot(grid[1, 1]))
    fig.axes[-1].legend([f"query {t}" for t in range(T)], fontsize=7, loc="upper left")
    _bytes_bars(step_bytes(T, S, d_k, d_v, block_size, step), fig.add_subplot(grid[1, 2:]))
    return fig


def _partial_bars(partial, exact, query: int, ax):
    """Bars of the partial output of one query, dots at the exact output."""
    x = np.arange(len(exact))
    ax.bar(x, partial, color=TILED_COLOR, alpha=0.7, label="partial acc / l")
    ax.plot(x, exact, "o", color="black", label="exact")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xlabel("output feature")
    ax.set_title(f"query {query}: partial vs exact")
    ax.legend(fontsize=7, loc="best")


def _step_lines(values, step: int, title: str, ax, log: bool = False):
    """values (n_steps, rows): one line per row against the 1-based step, the current step marked."""
    n = values.shape[0]
    ax.plot(np.arange(1, n + 1), values, "o-", ms=3, lw=1.2)
    ax.axvline(step, color="black", lw=1, ls="--")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("key blocks done")
    ax.set_title(title)
    ax.set_xticks(np.arange(1, n + 1))


def _bytes_bars(counts: tuple, ax):
    """(naive, tiled) bytes -> horizontal bars labelled with the sizes and their ratio."""
    naive, tiled = counts
    ax.barh([1, 0], [naive, tiled], color=[NAIVE_COLOR, TILED_COLOR])
    ax.set_yticks([1, 0], ["naive", "tiled"])
    for y, n in ((1, naive), (0, tiled)):
        ax.text(n, y, f" {format_bytes(n)}", va="center", fontsize=8)
    ax.set_xlim(0, naive * 1.3)
    ax.set_xlabel("bytes to and from main memory so far, float64 (naive: scores and weights too)")
    ax.set_title(f"memory traffic: naive / tiled = {naive / tiled:.1f}×")


def io_bytes_curves(seq_lens, d_k: int, block_rows: int, itemsize: int = 4, mark=None, ax=None):
    """seq_lens, d_k, block_rows -> ax: bytes moved by naive and tiled attention (one head) against T, log-log."""
    T = np.atleast_1d(_validate.positive_ints(seq_lens, "seq_lens"))
    d_k, block_rows = _validate.positive_int(d_k, "d_k"), _validate.positive_int(block_rows, "block_rows")
    itemsize = _validate.positive_int(itemsize, "itemsize")
    mark = None if mark is None else _validate.positive_int(mark, "mark")
    naive = [naive_attention_bytes(int(t), int(t), d_k, d_k, itemsize) for t in T]
    tiled = [tiled_attention_bytes(int(t), int(t), d_k, d_k, block_rows, itemsize) for t in T]
    ax = new_ax(ax, figsize=(5.5, 3.6))
    ax.loglog(T, naive, "o-", color=NAIVE_COLOR, label="naive: 4·T² + 4·T·d_k numbers")
    ax.loglog(T, tiled, "s-", color=TILED_COLOR, label=f"tiled, {block_rows} query rows per block")
    if mark is not None:
        ax.axvline(mark, color="black", ls="--", lw=1)
        n, t = (f(int(mark), int(mark), d_k, d_k, *a) for f, a in
                ((naive_attention_bytes, (itemsize,)), (tiled_attention_bytes, (block_rows, itemsize))))
        ax.set_title(f"T = {mark}: naive {format_bytes(n)}, tiled {format_bytes(t)} ({n / t:.0f}×)", fontsize=9)
    ax.set_xlabel("seq_len T (log scale)")
    ax.set_ylabel(f"bytes per head, d_k = {d_k} (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return ax


def measured_curves(xs, series: dict, xlabel: str, ylabel: str = "seconds (log scale)", log_x: bool = True,
                    ax=None):
    """xs (N,), {name: values (N,)} -> ax: one marked line per series, log y (and log x by default).

    A log axis shows only values > 0: a zero, negative or non-finite value on one is refused, naming it."""
    log_x = _validate.flag(log_x, "log_x")
    xs = (log_values if log_x else finite_vector)(xs, "xs")
    series = _validate.mapping(series, "series", "{name: values (len(xs),)}")
    series = {name: _validate.array(ys, f"series[{name!r}]", 1, "(N,)") for name, ys in series.items()}
    for name, ys in series.items():
        if ys.shape != xs.shape:
            raise ValueError(f"series[{name!r}] has {ys.shape[0]} values for {xs.shape[0]} xs; give one value per x")
        log_values(ys, f"series[{name!r}]")
    ax = new_ax(ax, figsize=(5.5, 3.6))
    for i, (name, ys) in enumerate(series.items()):
        ax.plot(xs, ys, "o-", color=plots.head_color(i), label=name)
    ax.set_yscale("log")
    if log_x:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return ax
