"""Views of 00-05 (a Trace, the course sentence, the sqrt(d_k) experiment, the heads, the ledger).

Conventions for every plot of the course:
- attention weights always use ``WEIGHTS_CMAP`` on a fixed 0..1 scale, so colours mean
  the same thing in every notebook; masked entries are drawn in ``MASKED_COLOR``;
- other tensors (X, Q, K, V, scores) use the diverging ``VALUES_CMAP`` centred on 0;
- head i is always drawn in ``HEAD_COLORS[i % len(HEAD_COLORS)]``;
- helpers take ``ax=None`` (or ``axes=None``) and return what they drew on; they never
  touch global matplotlib state (no pyplot style changes, no ``plt.show()``).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colors as mcolors

from .. import _validate
from ..heads import split_heads
from ..lessons.qkv import diagonal_curve, identity_params, mean_diagonal_weight, sentence_inputs, sentence_trace
from ..lessons.scaling import ScalingResult
from ..mha import trace as _trace
from .cost import (  # 04_concat_output's and 05_complexity's views, re-exported: notebooks 04 and 05 call them here
    DELTA_CMAP,
    flop_curves,
    head_change_heatmap,
    ledger_figure,
    param_blocks,
    params_figure,
    score_memory_bars,
    timing_loglog,
)
from .stages import check_trace, flow_inputs, present_stages
from .style import (
    DEFAULT_TOKENS,
    HEAD_COLORS,
    MASKED_COLOR,
    VALUES_CMAP,
    WEIGHTS_CMAP,
    finite_values,
    finite_vector,
    head_color,
    head_grid,
    label_axes,
    new_ax,
    tokens_for,
)

__all__ = ["WEIGHTS_CMAP", "VALUES_CMAP", "MASKED_COLOR", "HEAD_COLORS", "DEFAULT_TOKENS",
           "tokens_for", "head_color", "attention_heatmap", "matrix_heatmap", "head_heatmaps",
           # 02_scaled_dot_product and 03_multi_head_split
           "RAW_COLOR", "SCALED_COLOR", "scaling_curves", "weights_bars", "scaling_figure",
           "TOKEN_COLORS", "token_color", "head_split_sources", "split_sources_heatmaps",
           "split_bug_figure", "LABEL_FLOOR",
           # 00_overview and 01_qkv: views of the course sentence
           "stage_flow", "sentence_tokens", "sentence_heads_figure", "qkv_matrices_figure", "qkv_comparison_figure",
           # 04_concat_output and 05_complexity
           "DELTA_CMAP", "head_change_heatmap", "param_blocks", "flop_curves",
           "score_memory_bars", "timing_loglog", "params_figure", "ledger_figure"]

LABEL_FLOOR = 7.0  # points: the smallest text the views of 00-05 write (tests/views/test_attention.py holds it)


def attention_heatmap(weights, q_tokens=None, k_tokens=None, ax=None, title=None,
                      annotate: bool | None = None, colorbar: bool = True):
    """weights (T, S) -> ax: queries down the rows, keys along the columns, 0..1 colour scale.

    Entries that are exactly 0 in a row that a mask cut (NaN or -inf in ``weights``, or
    a fully-masked row) are drawn grey. ``annotate`` writes the values into the cells
    (default: when T and S are both <= 8) at the largest size that fits a cell, and not at all
    below LABEL_FLOOR points; the tick labels are sized to the cells too.
    """
    w = _validate.float_array(weights, "weights").astype(float)
    annotate = None if annotate is None else _validate.flag(annotate, "annotate")
    colorbar = _validate.flag(colorbar, "colorbar")
    if w.ndim != 2:
        raise ValueError(f"attention_heatmap needs weights of shape (T, S), got shape {w.shape}; "
                         "pick one batch element and head, e.g. weights[0, head]")
    T, S = w.shape
    ax = _weights_image(w, tokens_for(T, q_tokens), tokens_for(S, k_tokens), new_ax(ax))
    if colorbar:
        ax.figure.colorbar(ax.images[0], ax=ax, fraction=0.046, pad=0.04, label="weight")
    if title:
        ax.set_title(title)
    _fit_heatmap_text([ax], [w], annotate if annotate is not None else max(T, S) <= 8)
    return ax


def _weights_image(w, q_tokens, k_tokens, ax):
    """w (T, S) -> ax with the weights drawn on the 0..1 scale (NaN grey) and the tokens as ticks."""
    cmap = plt.get_cmap(WEIGHTS_CMAP).with_extremes(bad=MASKED_COLOR)
    ax.imshow(np.ma.masked_invalid(w), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    label_axes(ax, q_tokens, k_tokens, "query", "key")
    return ax


def _fit_heatmap_text(axes, weights, annotate: bool) -> None:
    """Lay the figure out once, then size each ax's tick labels to its (T, S) grid of cells and, with
    ``annotate``, write each finite weight into its cell at the largest size that fits (none below
    LABEL_FLOOR). Call it after the last panel and colour bar of the figure are added."""
    axes[0].get_figure(root=True).draw_without_rendering()
    for ax, w in zip(axes, weights):
        T, S = np.shape(w)
        box, points = ax.get_window_extent(), 72 / ax.get_figure(root=True).dpi
        _fit_ticks(ax.yaxis, 0.72 * box.height * points / T)
        _fit_ticks(ax.xaxis, (0.72 if S > 8 else 0.5) * box.width * points / S)  # > 8 keys are upright
        size = _cell_fontsize(ax, T, S, chars=4, lines=1, largest=8.0) if annotate else 0.0
        for (i, j), v in np.ndenumerate(w if size else np.empty((0, 0))):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=size,
                        color="white" if v > 0.6 else "black")


def _fit_ticks(axis, room: float, largest: float = 10.0) -> None:
    """Tick labels of axis at min(largest, room) points, never below LABEL_FLOOR: a figure whose cells
    are smaller than that must be drawn larger (``sentence_heads_figure`` sizes its rows by T)."""
    for label in axis.get_ticklabels():
        label.set_fontsize(max(min(largest, room), LABEL_FLOOR))


def matrix_heatmap(values, row_labels=None, ax=None, title=None, col_label="feature",
                   row_label="position", vlim=None, colorbar: bool = True):
    """values (N, F) -> ax: a diverging heatmap centred on 0 (X, Q, K, V, scores, outputs).

    ``-inf`` entries (masked scores) are drawn grey; NaN and +inf are refused. ``vlim`` (> 0) fixes the
    symmetric range -vlim..vlim.
    """
    v = _validate.float_array(values, "values").astype(float)
    if v.ndim != 2:
        raise ValueError(f"matrix_heatmap needs values of shape (N, F), got shape {v.shape}; "
                         "pick one batch element, e.g. values[0]")
    finite_values(np.where(np.isneginf(v), 0.0, v), "values")  # -inf is a masked score; NaN, +inf are faults
    vlim = None if vlim is None else _validate.number(vlim, "vlim", 0, low_open=True)
    colorbar = _validate.flag(colorbar, "colorbar")
    ax = new_ax(ax)
    finite = v[np.isfinite(v)]
    lim = vlim if vlim is not None else (float(np.abs(finite).max()) if finite.size else 1.0) or 1.0
    cmap = plt.get_cmap(VALUES_CMAP).with_extremes(bad=MASKED_COLOR)
    img = ax.imshow(np.ma.masked_invalid(v), cmap=cmap, norm=mcolors.Normalize(-lim, lim),
                    aspect="auto", interpolation="nearest")
    rows = None if row_labels is None else list(row_labels)
    label_axes(ax, rows, None, row_label, col_label)
    if colorbar:
        ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.04)
    if title:
        ax.set_title(title)
    return ax


def head_heatmaps(trace, tokens=None, batch: int = 0, axes=None, context_tokens=None):
    """Trace -> axes (h,): one weights heatmap per head, side by side, titles in head colours.

    ``tokens`` label the queries; ``context_tokens`` the keys (default: ``tokens``).
    """
    w = check_trace(trace)["weights"]  # (B, h, T, S)
    batch = _validate.index(batch, w.shape[0], "batch", "sequences in the trace")
    w = w[batch]  # (h, T, S)
    h, T, S = w.shape
    tokens_for(T, tokens)  # checked before anything is drawn
    if context_tokens is not None:
        tokens_for(S, context_tokens)
    if axes is None:
        _, axes = plt.subplots(1, h, figsize=(min(3.0 * h, 16), 3.2), layout="constrained",
                               squeeze=False)
        axes = axes[0]
    if len(axes) != h:
        raise ValueError(f"got {len(axes)} axes for h={h} heads; pass one axis per head")
    k_tokens = context_tokens if context_tokens is not None else (tokens if S == T else None)
    masked = np.where(np.isneginf(trace["scores"][batch]), np.nan, w)      # (h, T, S)
    for i, ax in enumerate(axes):
        _weights_image(masked[i], tokens_for(T, tokens), tokens_for(S, k_tokens), ax)
        ax.set_title(f"head {i}", color=head_color(i), fontweight="bold")
        if i:
            ax.set_ylabel("")
    # one colour bar for all heads, so every heatmap keeps the same width
    axes[-1].figure.colorbar(axes[-1].images[0], ax=list(axes), fraction=0.046 / min(h, 4) ** 0.5,
                             pad=0.02, label="weight")
    _fit_heatmap_text(list(axes), list(masked), max(T, S) <= 8)              # sized to the final layout
    return axes


# --- 02_scaled_dot_product: the sqrt(d_k) experiment ------------------------------------
RAW_COLOR = "#e6550d"      # scores q . k, not scaled
SCALED_COLOR = "#3182bd"   # scores q . k / sqrt(d_k)


def scaling_curves(result, d_k=None, axes=None):
    """ScalingResult -> axes (3,): Var(q . k), entropy of the weights and softmax-Jacobian
    norm against d_k, without (orange) and with (blue) scaling; a dotted line marks ``d_k``."""
    _check_result(result)
    if d_k is not None:
        _validate.positive_int(d_k, "d_k")
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(12, 3.4), layout="constrained")
    if len(axes) != 3:
        raise ValueError(f"scaling_curves draws 3 panels, got {len(axes)} axes")
    x = result.d_k
    panels = [("variance of the scores", result.var_raw, result.var_scaled, "Var(score)"),
              ("entropy of the weights", result.entropy_raw, result.entropy_scaled, "entropy (nats)"),
              ("softmax Jacobian norm", result.grad_raw, result.grad_scaled, "mean ‖∂p/∂s‖")]
    for ax, (title, raw, scaled, ylabel) in zip(axes, panels):
        ax.plot(x, raw, "o-", color=RAW_COLOR, label="q·k (no scaling)")
        ax.plot(x, scaled, "s-", color=SCALED_COLOR, label="q·k / √d_k")
        ax.set_xscale("log", base=2)
        ax.set(title=title, xlabel="d_k", ylabel=ylabel)
        if d_k is not None:
            ax.axvline(d_k, color="0.3", linestyle=":", linewidth=1.2)
    axes[0].set_yscale("log", base=2)
    axes[0].plot(x, x, "--", color="0.6", linewidth=1, label="d_k (theory)")
    axes[1].axhline(np.log(result.n_keys), color="0.6", linestyle="--", linewidth=1,
                    label=f"log S (uniform, S={result.n_keys})")
    axes[1].set_ylim(bottom=0)
    axes[2].set_ylim(bottom=0)
    for ax in axes[:2]:
        ax.legend(fontsize=8, loc="best")
    return axes


def _check_result(result) -> ScalingResult:
    return _validate.instance(result, ScalingResult, "result",
                              "make one with lessons.scaling.scaling_experiment(rng)")


def weights_bars(raw, scaled, ax=None, title=None):
    """raw, scaled (S,) softmax weights of one query -> ax: side-by-side bars per key, 0..1."""
    raw = finite_vector(raw, "raw")
    scaled = finite_vector(scaled, "scaled", raw.size)
    ax = new_ax(ax)
    keys = np.arange(raw.size)
    ax.bar(keys - 0.2, raw, width=0.4, color=RAW_COLOR, label="no scaling")
    ax.bar(keys + 0.2, scaled, width=0.4, color=SCALED_COLOR, label="scaled by 1/√d_k")
    ax.set(ylim=(0, 1.25), yticks=np.linspace(0, 1, 6), xlabel="key", ylabel="weight",
           xticks=keys)
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=8, loc="upper center", ncol=2)
    if title:
        ax.set_title(title)
    return ax


def scaling_figure(result, d_k):
    """ScalingResult, one of its d_k -> Figure (2 x 2): the three curves with ``d_k`` marked,
    and a typical query's weights at that d_k without and with scaling (the d_k slider's view)."""
    i = _check_result(result).row(_validate.positive_int(d_k, "d_k"))
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.6), layout="constrained")
    scaling_curves(result, d_k=d_k, axes=[axes[0, 0], axes[0, 1], axes[1, 0]])
    weights_bars(result.example_raw[i], result.example_scaled[i], ax=axes[1, 1],
                 title=f"a typical query's weights over {result.n_keys} keys, d_k={d_k}")
    return fig


# --- 03_multi_head_split: where each entry of a head comes from ---------------------------
TOKEN_COLORS = ("#66c2a5", "#fc8d62", "#8da0cb", "#e78ac3", "#a6d854", "#ffd92f",
                "#e5c494", "#80b1d3", "#fb8072", "#bebada")


def token_color(t: int) -> str:
    """Position t >= 0 -> its colour in the split views (a palette apart from the head colours, repeating
    after 10 positions)."""
    return TOKEN_COLORS[_validate.count(t, "t") % len(TOKEN_COLORS)]


def head_split_sources(T: int, d_model: int, h: int, buggy: bool = False):
    """T, d_model, h -> (positions, features), each (h, T, d_k) ints: for every entry of
    ``split_heads(x, h)[0]``, the position and the feature of x (1, T, d_model) it came from.

    ``buggy=True`` shows the classic mistake ``x.reshape(1, h, T, d_k)`` (no transpose).

    >>> pos, feat = head_split_sources(T=2, d_model=4, h=2, buggy=True)
    >>> pos[0].tolist()  # head 0, row 1 holds position 0's second half: positions mix
    [[0, 0], [0, 0]]
    """
    T, d_model = _validate.positive_int(T, "T"), _validate.positive_int(d_model, "d_model")
    h, buggy = _validate.heads(d_model, h), _validate.flag(buggy, "buggy")
    codes = np.arange(T * d_model).reshape(1, T, d_model)  # entry (t, f) holds t * d_model + f
    if buggy:
        heads = codes.reshape(1, h, T, d_model // h)  # (1, h, T, d_k) WRONG: no transpose
    else:
        heads = split_heads(codes, h)  # (1, h, T, d_k)
    heads = heads[0].astype(int)  # (h, T, d_k)
    return heads // d_model, heads % d_model


def split_sources_heatmaps(positions, features, tokens=None, axes=None, label=None):
    """positions, features (h, T, d_k) -> axes (h,): one T x d_k grid per head, each cell
    coloured by the token it came from and labelled with that token and its feature index.
    A correct split has one colour per row; the bug mixes colours within a head's rows."""
    positions, features = _source_grid(positions, "positions"), _source_grid(features, "features")
    h, T, d_k = positions.shape
    if features.shape != positions.shape:
        raise ValueError(f"features has shape {features.shape} but positions has {positions.shape}; "
                         "give both as head_split_sources returns them")
    if positions.max() >= T:
        raise ValueError(f"positions holds {positions.max()}, but there are only T={T} positions; "
                         "give positions as head_split_sources returns them")
    toks = tokens_for(T, tokens)
    if axes is None:
        _, axes = plt.subplots(1, h, figsize=(min(0.6 * d_k * h + 1.2 * h, 16), 0.45 * T + 1.2),
                               layout="constrained", squeeze=False)
        axes = axes[0]
    if len(axes) != h:
        raise ValueError(f"got {len(axes)} axes for h={h} heads; pass one axis per head")
    cmap = mcolors.ListedColormap([token_color(t) for t in range(T)])
    for i, ax in enumerate(axes):
        ax.imshow(positions[i], cmap=cmap, vmin=-0.5, vmax=T - 0.5, aspect="auto")
        ax.set_xticks(range(d_k))
        ax.set_yticks(range(T), toks if i == 0 else [""] * T)
        ax.set_xlabel("d_k slot")
        ax.set_title(f"head {i}", color=head_color(i), fontweight="bold", fontsize=10)
    axes[0].set_ylabel(label or "row (should be this token)")
    _label_cells(axes, [[f"{toks[p]}\nf{f}" for p, f in zip(positions[i].ravel(), features[i].ravel())]
                        for i in range(h)], T, d_k)
    return axes


def _label_cells(axes, labels, rows: int, cols: int) -> None:
    """Write labels[i][k] into cell (k // cols, k % cols) of axes[i], at the largest size that fits the
    cell (at most 9.5 pt); when even LABEL_FLOOR does not fit, write none and say so under each grid."""
    chars = max(len(line) for head in labels for text in head for line in text.split("\n"))
    axes[0].get_figure(root=True).draw_without_rendering()   # lay the figure out: the axes get their sizes
    size = _cell_fontsize(axes[0], rows, cols, chars)
    for ax, head in zip(axes, labels):
        for k, text in enumerate(head if size else ()):
            ax.text(k % cols, k // cols, text, ha="center", va="center", fontsize=size, linespacing=0.95)
        if not size:
            ax.set_xlabel(f"{ax.get_xlabel()} (cells too small to label: colour = token)")


def _cell_fontsize(ax, rows: int, cols: int, chars: int, lines: int = 2, largest: float = 9.5) -> float:
    """The font size (points) at which ``lines`` lines of ``chars`` characters fit one cell of ax's
    rows x cols grid (as the figure is laid out now), at most ``largest``; 0.0 below LABEL_FLOOR (write none)."""
    box = ax.get_window_extent()
    points = 72 / ax.get_figure(root=True).dpi
    width, height = box.width * points / cols, box.height * points / rows
    size = min(largest, 0.9 * width / (0.62 * max(chars, 1)), 0.85 * height / (1.2 * lines))
    return float(size) if size >= LABEL_FLOOR else 0.0


def _source_grid(a, name: str) -> np.ndarray:
    """An (h, T, d_k) array of whole numbers >= 0 (positions or features), or raise naming it."""
    arr = np.asarray(a) if isinstance(a, (list, tuple, np.ndarray)) else None
    if arr is None or arr.dtype.kind not in "iu" or arr.ndim != 3 or 0 in arr.shape or arr.min() < 0:
        raise ValueError(f"{name} must be a non-empty (h, T, d_k) array of whole numbers >= 0, got "
                         f"{type(a).__name__} {getattr(arr, 'dtype', '')} {getattr(arr, 'shape', '')}; "
                         "give it as head_split_sources(T, d_model, h) returns it")
    return arr


def split_bug_figure(T: int, d_model: int, h: int, tokens=None):
    """T, d_model, h -> Figure: the correct split (top row) and the reshape-only bug (bottom)."""
    sources = [head_split_sources(T, d_model, h, buggy=buggy) for buggy in (False, True)]  # checks the sizes
    tokens_for(T, tokens)
    fig, axes = plt.subplots(2, h, figsize=(min(0.95 * d_model + 1.2 * h + 0.6, 16), 1.05 * T + 2),
                             layout="constrained", squeeze=False)
    for row, (pos, feat), label in zip((0, 1), sources, ("split_heads\n(reshape + transpose)",
                                                         "reshape only (bug)")):
        split_sources_heatmaps(pos, feat, tokens, axes=axes[row], label=label)
    return fig


# --- Views of the course sentence: 00_overview.ipynb and 01_qkv.ipynb -------------------
def _flow_positions(names) -> dict:
    """Stage names of a Trace -> {name: (x, y)} in stage_flow: one column per distinct
    ``column`` of the stage table among them, so optional stages get a column only when present."""
    views = present_stages(names)
    columns = {c: x for x, c in enumerate(sorted({v.column for v in views.values()}))}
    return {name: (columns[v.column], v.row) for name, v in views.items()}


def stage_flow(trace, ax=None):
    """Trace -> ax: every stage of the Trace as a box with its concrete shape, arrows in
    computation order (read from ``stages.STAGE_TABLE``).

    Boxes of per-head stages (h, ...) are outlined in head 0's colour.
    """
    check_trace(trace)
    ax = new_ax(ax, figsize=(13, 3.6))
    shapes, where = trace.shapes, _flow_positions(trace.names)
    for name, (xb, yb) in where.items():
        for source in flow_inputs(name, where):
            xa, ya = where[source]
            ax.annotate("", xy=(xb - 0.42, -yb), xytext=(xa + 0.42, -ya),
                        arrowprops=dict(arrowstyle="->", color="0.45", lw=1.0))
    for name, view in present_stages(where).items():
        x, y = where[name]
        per_head = len(shapes[name]) == 4
        ax.text(x, -y, f"{name}\n{shapes[name]}", ha="center", va="center", fontsize=8.5,
                bbox=dict(boxstyle="round,pad=0.35", fc="white",
                          ec=head_color(0) if per_head else "0.3", lw=1.6 if per_head else 1.0))
        if view.op:
            ax.text(x, -y + 0.36, view.op, ha="center", va="bottom", fontsize=9.5, color="0.15")
    ax.set_xlim(-0.6, max(x for x, _ in where.values()) + 0.6)
    ax.set_ylim(-2.5, 0.55)
    ax.set_axis_off()
    ax.set_title(f"one forward pass: h={trace.h}, d_model={trace.d_model}, d_k={trace.d_k}")
    return ax


def sentence_heads_figure(d_model: int, h: int, seq_len: int, seed: int = 0):
    """Sizes -> Figure: one weights heatmap per head for the course sentence cut or extended to seq_len.

    The trace is ``qkv.sentence_trace(tokens_for(seq_len), d_model, h, seed)``; the view of
    the live sliders in 00_overview.ipynb.
    """
    tokens = sentence_tokens(seq_len, seed)
    t = sentence_trace(tokens, d_model, h, seed)
    fig, axes = head_grid(h)
    title = fig.suptitle(f"d_model={d_model}, h={h}, d_k={t.d_k}, seq_len={seq_len}: "
                         f"weights {t.shapes['weights']}")
    width, height = fig.get_size_inches()
    rows = -(-h // 4)                                                              # head_grid's rows of 4
    needed = title.get_window_extent(fig.canvas.get_renderer()).width / fig.dpi + 0.3  # inches: no title cut off
    fig.set_size_inches(max(width, needed), max(height, rows * (1.6 + seq_len * 10.5 / 72) + 0.4))  # 10.5 pt a row
    head_heatmaps(t, tokens, axes=axes)
    return fig


def qkv_matrices_figure(trace, tokens=None, batch: int = 0):
    """Trace -> Figure: X, Q, K, V side by side (rows = tokens, columns = features), one colour scale."""
    names = ("X", "Q", "K", "V")
    batch = _validate.index(batch, check_trace(trace)["X"].shape[0], "batch", "sequences in the trace")
    arrays = [trace[n][batch] for n in names]  # each (T, d_model)
    rows = tokens_for(arrays[0].shape[0], tokens)
    lim = float(max(np.abs(a).max() for a in arrays)) or 1.0
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.2), layout="constrained", sharey=True)
    for i, (ax, name, a) in enumerate(zip(axes, names, arrays)):
        matrix_heatmap(a, rows, ax=ax, vlim=lim, colorbar=(i == 3),
                       title=f"{name} {trace.shapes[name]}")
        if i:
            ax.set_ylabel("")
    return fig


def qkv_comparison_figure(d_model: int, seq_len: int, seed: int = 0):
    """Sizes -> Figure: weights with Q = K = V = X, weights with W_Q, W_K, W_V, and the
    mean diagonal weight as the projections are blended in (0 = none, 1 = full); h = 1.

    The view of the live sliders in 01_qkv.ipynb.
    """
    tokens = sentence_tokens(seq_len, seed)
    X, params = sentence_inputs(tokens, d_model, seed)  # X (1, T, d_model): sentence_trace's inputs
    t, t_id = _trace(X, params, 1), _trace(X, identity_params(d_model), 1)
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.9), layout="constrained",
                             gridspec_kw={"width_ratios": [1, 1.2, 1]})
    for ax, tt, label, cbar in ((axes[0], t_id, "Q = K = V = X", False),
                                (axes[1], t, "Q = X W_Q, K = X W_K, V = X W_V", True)):
        attention_heatmap(tt["weights"][0, 0], tokens, tokens, ax=ax, colorbar=cbar,
                          title=f"{label}\nmean diagonal {mean_diagonal_weight(tt['weights']):.2f}")
    axes[1].set_ylabel("")
    _diagonal_curve_ax(X, params, axes[2])
    fig.suptitle(f"d_model={d_model}, seq_len={seq_len}, h=1")
    return fig


def sentence_tokens(seq_len: int, seed: int) -> list[str]:
    """seq_len, seed -> the course sentence cut or extended to seq_len tokens, both checked (the sliders' views
    of the sentence start here).

    >>> sentence_tokens(2, seed=0)
    ['the', 'cat']
    """
    _validate.count(seed, "seed")
    return tokens_for(_validate.positive_int(seq_len, "seq_len"))


def _diagonal_curve_ax(X, params, ax):
    """Mean diagonal weight against projection strength, with the uniform level 1/T."""
    s = np.linspace(0.0, 1.0, 11)
    ax.plot(s, diagonal_curve(X, params, s), "o-", color=head_color(0), label="mean diagonal weight")
    ax.axhline(1.0 / X.shape[1], color="0.5", ls="--", label=f"uniform 1/T = {1.0 / X.shape[1]:.2f}")
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("projection strength s   (W = (1-s) I + s W)")
    ax.set_ylabel("mean diagonal weight")
    ax.set_title("blending the projections in")
    ax.legend(loc="upper right", fontsize=8)
    return ax
