"""Views of masks, leaks, image patches, position encodings and RoPE (matplotlib).

The same conventions as ``mha_course.plots``: attention weights use ``plots.WEIGHTS_CMAP``
on a fixed 0..1 scale, forbidden entries are ``plots.MASKED_COLOR``; helpers take
``ax=None`` (or ``axes=None``), return what they drew on and never call ``plt.show()``.

Taught in 06_masks_and_cross_attention.ipynb and 07_positions_and_rope.ipynb.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colors as mcolors
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from .. import _validate
from ..lessons.qkv import sentence_inputs
from ..masks import LeakReport, fully_masked_rows
from ..mha import trace
from ..positions import ROPE_LAYOUTS, rope_angles, rope_score_grid, sinusoidal_positions
from . import attention as plots
from . import style

__all__ = ["FULLY_MASKED_COLOR", "LEAK_COLOR", "mask_heatmap", "mask_gallery", "leak_heatmap",
           "patch_grid", "patch_attention", "sinusoid_figure", "rope_layout_pairs",
           "score_offset_heatmap", "rope_figure", "rope_heads_figure"]

FULLY_MASKED_COLOR = "#b2182b"  # the label of a query row that may attend nothing
LEAK_COLOR = "#d7301f"          # an output that moved although it must not see that token


def _ax(ax, figsize=(4, 3.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _labels(tokens, n: int, name: str, what: str):
    """Token labels checked: None (the course sentence) or one label per position (a string is no list)."""
    if tokens is None:
        return None
    if isinstance(tokens, (str, bytes)) or not hasattr(tokens, "__len__") or np.ndim(tokens) != 1:
        raise ValueError(f"{name} must be a list of {n} labels, one per {what}, got {type(tokens).__name__}; "
                         f"pass e.g. {name}=['t0', 't1', ...] or None")
    if len(tokens) != n:
        raise ValueError(f"{name} has {len(tokens)} labels but there are {n} {what}s; give one label per {what}")
    return list(tokens)


def _mask(mask, name: str = "mask") -> np.ndarray:
    """A (T, S) bool mask, checked: 0/1 ints or floats are refused (which of 1 and 0 means blocked?)."""
    m = np.asarray(mask)
    if m.dtype != np.bool_ or m.ndim != 2 or 0 in m.shape:
        raise ValueError(f"{name} must be a (T, S) bool mask (True = may attend), got shape {m.shape} of {m.dtype}; "
                         f"pick one with {name}[0, 0], or convert it, e.g. {name} == 1 if 1 means may attend")
    return m


def mask_heatmap(mask, q_tokens=None, k_tokens=None, ax=None, title=None):
    """mask (T, S) bool, True = may attend -> ax: allowed cells dark blue, blocked grey.

    Query rows that may attend no key at all are labelled "fully masked" on the right.
    """
    m = _mask(mask)
    T, S = m.shape
    q_tokens = _labels(q_tokens, T, "q_tokens", "query row of the mask")
    k_tokens = _labels(k_tokens, S, "k_tokens", "key column of the mask")
    ax = plots.attention_heatmap(np.where(m, 1.0, np.nan), q_tokens, k_tokens, ax=_ax(ax),
                                 annotate=False, colorbar=False, title=title)
    for t in np.flatnonzero(fully_masked_rows(m)):
        ax.text(-0.4, t, "fully masked", color=FULLY_MASKED_COLOR, va="center", fontsize=8)  # inside the grey row
    return ax


def mask_gallery(masks: dict, tokens=None, axes=None):
    """{name: mask (T, T)} -> axes: one mask_heatmap per mask, side by side, titled by name."""
    masks = {k: _mask(m, f"masks[{k!r}]") for k, m in _validate.mapping(masks, "masks", "{name: mask (T, T)}").items()}
    for k, m in masks.items():
        _labels(tokens, m.shape[1], "tokens", f"position of masks[{k!r}]")
    if axes is None:
        _, axes = plt.subplots(1, len(masks), figsize=(3.4 * len(masks) + 0.6, 3.4),
                               layout="constrained", squeeze=False)
        axes = axes[0]
    if len(axes) != len(masks):
        raise ValueError(f"got {len(axes)} axes for {len(masks)} masks; pass one axis per mask")
    for i, (ax, (name, m)) in enumerate(zip(axes, masks.items())):
        mask_heatmap(m, tokens, tokens, ax=ax, title=name)
        if i:
            ax.set_ylabel("")
    return axes


def leak_heatmap(report: LeakReport, tokens=None, ax=None, title=None):
    """LeakReport -> ax: output position (rows) vs replaced token (columns).

    Blue: moved and allowed; white: did not move; red: a leak (moved, but not allowed).
    """
    if not isinstance(report, LeakReport):
        raise ValueError(f"report must be a LeakReport, got {type(report).__name__}; pass masks.leak_probe(attn_fn, T)")
    moved, allowed = np.asarray(report.moved), np.asarray(report.allowed)
    _labels(tokens, moved.shape[0], "tokens", "position")
    codes = np.where(moved & ~allowed, 2, np.where(moved, 1, 0))  # (T, T): 0 still, 1 allowed, 2 leak
    cmap = mcolors.ListedColormap(["white", plt.get_cmap(plots.WEIGHTS_CMAP)(0.75), LEAK_COLOR])
    ax = _ax(ax)
    ax.imshow(codes, cmap=cmap, vmin=-0.5, vmax=2.5, aspect="auto")
    T = moved.shape[0]
    style.label_axes(ax, plots.tokens_for(T, tokens), plots.tokens_for(T, tokens),
                      "output position t", "replaced token s")
    ax.legend(handles=[Patch(color=cmap(1), label="moved (allowed)"), Patch(color=LEAK_COLOR, label="leak")],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title(title or (f"{len(report.leaks)} leak(s)" if report.leaks else "no leak"))
    return ax


def patch_grid(image, patch: int, ax=None, title=None):
    """image (H, W, C) in 0..1, patch p -> ax: the image with its patch grid and token numbers."""
    img, patch = _image(image, patch)
    H, W = img.shape[:2]
    ax = _ax(ax, (3.6, 3.6))
    ax.imshow(img, extent=(0, W, H, 0), interpolation="nearest")
    for n, (r, c) in enumerate(np.ndindex(H // patch, W // patch)):
        ax.text((c + 0.5) * patch, (r + 0.5) * patch, str(n), ha="center", va="center", fontsize=8,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.7, "linewidth": 0})
    ax.set_xticks(np.arange(0, W + 1, patch))
    ax.set_yticks(np.arange(0, H + 1, patch))
    ax.grid(True, color="white", linewidth=1.2)
    ax.tick_params(labelbottom=False, labelleft=False, length=0)
    ax.set_title(title or f"{H // patch * (W // patch)} patches of {patch}x{patch} px = tokens")
    return ax


def _image(image, patch) -> tuple:
    """image (H, W, C) and patch p checked (H and W divisible by p, as ``positions.patchify`` asks) -> (image, p)."""
    img = _validate.array(image, "image", 3, "(H, W, C)")
    patch = _validate.positive_int(patch, "patch")
    if img.shape[0] % patch or img.shape[1] % patch:
        raise ValueError(f"image of shape {img.shape} does not split into patches of {patch}x{patch}: H and W must "
                         f"be divisible by patch={patch}")
    return img, patch


def patch_attention(image, weights, patch: int, ax=None, title=None, colorbar: bool = True):
    """image (H, W, C), weights (N,) over its N patches -> ax: the weights drawn over the image.

    Same colour scale as every weights plot (0..1); the image shows through where a weight is small.
    """
    img, patch = _image(image, patch)
    w = style.finite_values(weights, "weights")
    colorbar = _validate.flag(colorbar, "colorbar")
    if w.size and not (w.min() >= 0 and w.max() <= 1):  # weights in 0..1, not clamped into it
        raise ValueError(f"weights holds values in {w.min():g}..{w.max():g}, outside 0..1; pass attention weights "
                         "(a softmax row), e.g. weights[0, head, query]")
    H, W = img.shape[:2]
    if w.shape != (H // patch * (W // patch),):
        raise ValueError(f"weights has shape {w.shape}, expected one weight per patch: ({H // patch * (W // patch)},)")
    ax = _ax(ax, (3.6, 3.6))
    ax.imshow(img, extent=(0, W, H, 0), interpolation="nearest")
    cells = w.reshape(H // patch, W // patch)  # (rows of patches, columns of patches)
    shown = plt.cm.ScalarMappable(mcolors.Normalize(0.0, 1.0), plots.WEIGHTS_CMAP)
    rgba = shown.to_rgba(cells)  # (rows, cols, 4): colour by weight ...
    rgba[..., 3] = 0.9 * np.sqrt(cells)  # ... and opaque where the weight is large
    ax.imshow(rgba, extent=(0, W, H, 0), interpolation="nearest")
    for (r, c), v in np.ndenumerate(cells):
        if v >= 0.005:  # the weight itself, written on its patch
            ax.text((c + 0.5) * patch, (r + 0.5) * patch, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if v > 0.5 else "black")
    ax.set_xticks([])
    ax.set_yticks([])
    if colorbar:
        ax.figure.colorbar(shown, ax=ax, fraction=0.046, pad=0.04, label="weight")
    if title:
        ax.set_title(title)
    return ax


def sinusoid_figure(seq_len: int, d_model: int):
    """Sizes -> Figure: PE (seq_len, d_model), a few of its columns as curves, and PE PE^T.

    The view of the d_model / seq_len sliders in 07_positions_and_rope.ipynb.
    """
    seq_len, d_model = _validate.positive_int(seq_len, "seq_len"), _validate.positive_int(d_model, "d_model")
    pe = sinusoidal_positions(seq_len, d_model)  # (T, D)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4), layout="constrained")
    rows = range(seq_len) if seq_len <= 16 else None  # a label per row only while they fit
    plots.matrix_heatmap(pe, rows, ax=axes[0], vlim=1.0, title="PE: rows = positions",
                         col_label="feature (pairs: sin, cos)")
    for j in sorted({0, 2, 2 * (d_model // 4), 2 * ((d_model - 1) // 2)}):  # sine columns, fast to slow
        axes[1].plot(np.arange(seq_len), pe[:, j], marker=".", label=f"column {j}")
    axes[1].set(xlabel="position", ylabel="PE value", title="low columns turn fast, high columns slowly")
    axes[1].legend(fontsize=7, loc="lower left")
    plots.matrix_heatmap(pe @ pe.T, rows, ax=axes[2], title="PE PEᵀ: depends on the offset",
                         col_label="position", row_label="position")
    for ax in (axes[0], axes[2]):  # features and positions are whole numbers: no 2.5, 7.5 ticks
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(f"sinusoidal_positions(seq_len={seq_len}, d_model={d_model})")
    return fig


def rope_layout_pairs(d_k: int, axes=None):
    """d_k -> axes (2,): which features form a rotated pair in each layout, coloured by pair (frequency).

    Interleaved: pair i = features (2i, 2i+1). Halves: pair i = features (i, i + d_k/2).
    """
    d_k = _validate.positive_int(d_k, "d_k")
    if d_k % 2:
        raise ValueError(f"d_k={d_k} is odd: RoPE turns pairs of features; pass an even d_k such as {d_k + 1}")
    half = d_k // 2
    pair_of = {"interleaved": np.arange(d_k) // 2, "halves": np.arange(d_k) % half}
    if axes is None:
        _, axes = plt.subplots(2, 1, figsize=(0.5 * d_k + 1.8, 2.2), layout="constrained")
    cmap = plt.get_cmap("viridis", half)
    for ax, layout in zip(axes, ROPE_LAYOUTS):
        ax.imshow(pair_of[layout][None, :], cmap=cmap, vmin=-0.5, vmax=half - 0.5, aspect="auto")
        for j, i in enumerate(pair_of[layout]):
            ax.text(j, 0, f"p{i}", ha="center", va="center", fontsize=8, color="white" if i < half / 2 else "black")
        ax.set_yticks([0], [layout])
        ax.set_xticks(range(d_k))
    axes[-1].set_xlabel("feature index of a query or key (p_i: the pair it belongs to)")
    return axes


def score_offset_heatmap(grid, ax=None, title=None):
    """scores (T, T), e.g. ``positions.rope_score_grid`` -> ax: query position down, key position across."""
    grid = style.finite_values(_validate.array(grid, "grid", 2, "(T, T)"), "grid")  # named here, not as values
    ax = plots.matrix_heatmap(grid, range(grid.shape[0]), ax=ax, title=title,
                              col_label="key position n", row_label="query position m")
    ax.set_xticks(range(0, grid.shape[1], max(1, grid.shape[1] // 8)))
    return ax


def rope_figure(offset: int, base: float, d_k: int = 8, max_offset: int = 64):
    """offset m - n, base -> Figure: each pair's rotation at that offset, and the score of q = k against the offset.

    The view of the offset and base sliders in 07_positions_and_rope.ipynb. Left: pair i of
    a vector turned by ``offset * base^(-2i/d_k)`` (a clock per pair). Right: for q = k
    (all ones), the RoPE score (R_m q) . (R_n k) as a function of m - n in 0..max_offset, its value at ``offset``
    (0..max_offset) marked.
    """
    offset, max_offset = _validate.count(offset, "offset"), _validate.positive_int(max_offset, "max_offset")
    if offset > max_offset:  # the right panel plots offsets 0..max_offset: a mark off it would widen it silently
        raise ValueError(f"offset={offset} is past the plotted range 0..max_offset={max_offset}; pass an offset "
                         f"in 0..{max_offset}, or max_offset={offset} or more")
    d_k, base = _validate.positive_int(d_k, "d_k"), _validate.number(base, "base")
    fig = plt.figure(figsize=(12, 3.4), layout="constrained")
    left, right = fig.subfigures(1, 2, width_ratios=[1.2, 1])
    angles = rope_angles([offset], d_k, base)[0]  # (d_k/2,)
    clocks = left.subplots(1, d_k // 2, subplot_kw={"projection": "polar"})
    colours = plt.get_cmap("viridis", d_k // 2)  # pair i in the colour of rope_layout_pairs
    for i, (ax, a) in enumerate(zip(np.atleast_1d(clocks), angles)):
        ax.annotate("", xy=(a, 1.0), xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": colours(i), "lw": 2})
        ax.set(ylim=(0, 1.1), yticks=[], xticks=[], title=f"pair {i}\n{a % (2 * np.pi):.2f} rad")
    left.suptitle(f"offset {offset}: each pair turned by offset·base^(-2i/d_k)", fontsize=10)
    grid = rope_score_grid(np.ones(d_k), np.ones(d_k), max_offset + 1, base)  # (T, T)
    ax = right.subplots()
    ax.plot(np.arange(max_offset + 1), grid[:, 0], color=plots.SCALED_COLOR)
    ax.plot([offset], [grid[offset, 0]], "o", color=LEAK_COLOR)
    ax.set(xlabel="offset m - n", ylabel="score (R_m q)·(R_n k)", title=f"q = k = ones({d_k}), base = {base:g}")
    return fig


def rope_heads_figure(d_model: int, h: int, seq_len: int, base: float = 10000.0, seed: int = 0):
    """Sizes -> Figure: each head's weights for the course sentence with RoPE (``trace(..., rope_base=base)``).

    The view of the d_model / h / seq_len sliders in 07_positions_and_rope.ipynb. An h that
    makes d_k odd cannot be rotated in pairs: the figure says so and names the h that work.
    """
    d_model, seq_len = _validate.positive_int(d_model, "d_model"), _validate.positive_int(seq_len, "seq_len")
    h, seed, base = _validate.heads(d_model, h), _validate.count(seed, "seed"), _validate.number(base, "base")
    tokens = plots.tokens_for(seq_len)
    X, params = sentence_inputs(tokens, d_model, seed)
    if (d_model // h) % 2:
        fig, ax = plt.subplots(figsize=(6, 1.2), layout="constrained")
        good = [g for g in range(1, d_model + 1) if d_model % g == 0 and (d_model // g) % 2 == 0]
        ax.text(0.5, 0.5, f"d_k = {d_model // h} is odd: RoPE rotates pairs of features.\nh with an even d_k: {good}",
                ha="center", va="center")
        ax.set_axis_off()
        return fig
    t = trace(X, params, h, mask=None, rope_base=base)
    fig, axes = style.head_grid(h)
    plots.head_heatmaps(t, tokens, axes=axes)
    fig.suptitle(f"RoPE (base {base:g}) in every head: d_model={d_model}, h={h}, d_k={t.d_k}, seq_len={seq_len}")
    return fig
