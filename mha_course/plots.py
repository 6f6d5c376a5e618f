"""Static views of a Trace with matplotlib (floor 2).

Conventions for every plot of the course:
- attention weights always use ``WEIGHTS_CMAP`` on a fixed 0..1 scale, so colours mean
  the same thing in every notebook; masked entries are drawn in ``MASKED_COLOR``;
- other tensors (X, Q, K, V, scores) use the diverging ``VALUES_CMAP`` centred on 0;
- head i is always drawn in ``HEAD_COLORS[i % len(HEAD_COLORS)]``;
- helpers take ``ax=None`` (or ``axes=None``) and return what they drew on; they never
  touch global matplotlib state (no pyplot style changes, no ``plt.show()``).
"""
from __future__ import annotations

import numpy as np
import matplotlib.pyplot as plt
from matplotlib import colors as mcolors

__all__ = ["WEIGHTS_CMAP", "VALUES_CMAP", "MASKED_COLOR", "HEAD_COLORS", "DEFAULT_TOKENS",
           "tokens_for", "head_color", "attention_heatmap", "matrix_heatmap", "head_heatmaps"]

WEIGHTS_CMAP = "Blues"
VALUES_CMAP = "RdBu_r"
MASKED_COLOR = "#d9d9d9"
HEAD_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
               "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
DEFAULT_TOKENS = ("the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "warm",
                  "and", "soft", "under", "the", "old", "lamp")


def tokens_for(n: int, tokens=None) -> list[str]:
    """n -> n token labels: ``tokens`` if given (and long enough), else the course sentence,
    extended with ``tok16, tok17, ...`` past its end.

    >>> tokens_for(3)
    ['the', 'cat', 'sat']
    """
    source = list(DEFAULT_TOKENS if tokens is None else tokens)
    if tokens is not None and len(source) != n:
        raise ValueError(f"got {len(source)} tokens for a sequence of length {n}; "
                         "give one token per position")
    return source[:n] + [f"tok{i}" for i in range(len(source), n)]


def head_color(i: int) -> str:
    """Head index -> its colour, the same in every plot of the course."""
    return HEAD_COLORS[i % len(HEAD_COLORS)]


def _new_ax(ax, figsize=(4, 3.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def attention_heatmap(weights, q_tokens=None, k_tokens=None, ax=None, title=None,
                      annotate: bool | None = None, colorbar: bool = True):
    """weights (T, S) -> ax: queries down the rows, keys along the columns, 0..1 colour scale.

    Entries that are exactly 0 in a row that a mask cut (NaN or -inf in ``weights``, or
    a fully-masked row) are drawn grey. ``annotate`` writes the values into the cells
    (default: when T and S are both <= 8).
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 2:
        raise ValueError(f"attention_heatmap needs a (T, S) matrix, got shape {w.shape}; "
                         "pick one batch element and head, e.g. weights[0, head]")
    T, S = w.shape
    ax = _new_ax(ax)
    cmap = plt.get_cmap(WEIGHTS_CMAP).with_extremes(bad=MASKED_COLOR)
    img = ax.imshow(np.ma.masked_invalid(w), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    _label_axes(ax, tokens_for(T, q_tokens), tokens_for(S, k_tokens), "query", "key")
    if annotate if annotate is not None else max(T, S) <= 8:
        for (i, j), v in np.ndenumerate(w):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if v > 0.6 else "black")
    if colorbar:
        ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.04, label="weight")
    if title:
        ax.set_title(title)
    return ax


def matrix_heatmap(values, row_labels=None, ax=None, title=None, col_label="feature",
                   row_label="position", vlim=None, colorbar: bool = True):
    """values (N, F) -> ax: a diverging heatmap centred on 0 (X, Q, K, V, scores, outputs).

    ``-inf`` entries (masked scores) are drawn grey. ``vlim`` fixes the symmetric range.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise ValueError(f"matrix_heatmap needs a 2-D array, got shape {v.shape}")
    ax = _new_ax(ax)
    finite = v[np.isfinite(v)]
    lim = vlim if vlim is not None else (float(np.abs(finite).max()) if finite.size else 1.0) or 1.0
    cmap = plt.get_cmap(VALUES_CMAP).with_extremes(bad=MASKED_COLOR)
    img = ax.imshow(np.ma.masked_invalid(v), cmap=cmap, norm=mcolors.Normalize(-lim, lim),
                    aspect="auto", interpolation="nearest")
    rows = None if row_labels is None else list(row_labels)
    _label_axes(ax, rows, None, row_label, col_label)
    if colorbar:
        ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.04)
    if title:
        ax.set_title(title)
    return ax


def head_heatmaps(trace, tokens=None, batch: int = 0, axes=None, context_tokens=None):
    """Trace -> axes (h,): one weights heatmap per head, side by side, titles in head colours.

    ``tokens`` label the queries; ``context_tokens`` the keys (default: ``tokens``).
    """
    w = trace["weights"][batch]  # (h, T, S)
    h, T, S = w.shape
    if axes is None:
        _, axes = plt.subplots(1, h, figsize=(min(3.0 * h, 16), 3.2), layout="constrained",
                               squeeze=False)
        axes = axes[0]
    if len(axes) != h:
        raise ValueError(f"got {len(axes)} axes for h={h} heads; pass one axis per head")
    k_tokens = context_tokens if context_tokens is not None else (tokens if S == T else None)
    for i, ax in enumerate(axes):
        masked = np.where(np.isneginf(trace["scores"][batch, i]), np.nan, w[i])
        attention_heatmap(masked, tokens, k_tokens, ax=ax, colorbar=(i == h - 1))
        ax.set_title(f"head {i}", color=head_color(i), fontweight="bold")
        if i:
            ax.set_ylabel("")
    return axes


def _label_axes(ax, rows, cols, row_label, col_label):
    if rows is not None:
        ax.set_yticks(range(len(rows)), rows)
    if cols is not None:
        ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right")
    ax.set_ylabel(row_label)
    ax.set_xlabel(col_label)


# --- Views of the course sentence: 00_overview.ipynb and 01_qkv.ipynb -------------------
from .mha import init_params, trace as _trace  # noqa: E402
from .qkv import (diagonal_curve, identity_params, mean_diagonal_weight,  # noqa: E402
                  sentence_trace)

__all__ += ["stage_flow", "sentence_heads_figure", "qkv_matrices_figure", "qkv_comparison_figure"]

# (column, row, operation that produced it) of each stage in the stage_flow diagram
_FLOW = {"X": (0, 1, ""), "Q": (1, 0, "X W_Q"), "K": (1, 1, "X W_K"), "V": (1, 2, "X W_V"),
         "Q_heads": (2, 0, "split"), "K_heads": (2, 1, "split"), "V_heads": (2, 2, "split"),
         "scores": (3, 0.5, "Q Kᵀ/√d_k"), "weights": (4, 0.5, "softmax"),
         "head_outputs": (5, 1.25, "weights V"), "concat": (6, 1.25, "concat"),
         "output": (7, 1.25, "concat W_O")}
_FLOW_EDGES = [("X", "Q"), ("X", "K"), ("X", "V"), ("Q", "Q_heads"), ("K", "K_heads"),
               ("V", "V_heads"), ("Q_heads", "scores"), ("K_heads", "scores"),
               ("scores", "weights"), ("weights", "head_outputs"), ("V_heads", "head_outputs"),
               ("head_outputs", "concat"), ("concat", "output")]


def stage_flow(trace, ax=None):
    """Trace -> ax: every stage as a box with its concrete shape, arrows in computation order.

    Boxes of per-head stages (h, ...) are outlined in head 0's colour.
    """
    ax = _new_ax(ax, figsize=(13, 3.6))
    shapes = trace.shapes
    for a, b in _FLOW_EDGES:
        (xa, ya, _), (xb, yb, _) = _FLOW[a], _FLOW[b]
        ax.annotate("", xy=(xb - 0.42, -yb), xytext=(xa + 0.42, -ya),
                    arrowprops=dict(arrowstyle="->", color="0.45", lw=1.0))
    for name, (x, y, op) in _FLOW.items():
        per_head = len(shapes[name]) == 4
        ax.text(x, -y, f"{name}\n{shapes[name]}", ha="center", va="center", fontsize=8.5,
                bbox=dict(boxstyle="round,pad=0.35", fc="white",
                          ec=head_color(0) if per_head else "0.3", lw=1.6 if per_head else 1.0))
        if op:
            ax.text(x, -y + 0.36, op, ha="center", va="bottom", fontsize=7.5, color="0.35",
                    style="italic")
    ax.set_xlim(-0.6, 7.6)
    ax.set_ylim(-2.5, 0.55)
    ax.set_axis_off()
    ax.set_title(f"one forward pass: h={trace.h}, d_model={trace.d_model}, d_k={trace.d_k}")
    return ax


def _head_grid(h: int, ncols: int = 4):
    """h -> (Figure, h axes) laid out in rows of at most ``ncols`` heatmaps."""
    ncols = min(h, ncols)
    nrows = -(-h // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 3.0 * nrows + 0.4),
                             layout="constrained", squeeze=False)
    for ax in axes.flat[h:]:
        ax.set_axis_off()
    return fig, list(axes.flat[:h])


def sentence_heads_figure(d_model: int, h: int, seq_len: int, seed: int = 0):
    """Sizes -> Figure: one weights heatmap per head for the course sentence cut or extended to seq_len.

    The trace is ``qkv.sentence_trace(tokens_for(seq_len), d_model, h, seed)``; the view of
    the live sliders in 00_overview.ipynb.
    """
    tokens = tokens_for(seq_len)
    t = sentence_trace(tokens, d_model, h, seed)
    fig, axes = _head_grid(h)
    head_heatmaps(t, tokens, axes=axes)
    fig.suptitle(f"d_model={d_model}, h={h}, d_k={t.d_k}, seq_len={seq_len}: "
                 f"weights {t.shapes['weights']}")
    return fig


def qkv_matrices_figure(trace, tokens=None, batch: int = 0):
    """Trace -> Figure: X, Q, K, V side by side (rows = tokens, columns = features), one colour scale."""
    names = ("X", "Q", "K", "V")
    arrays = [trace[n][batch] for n in names]  # each (T, d_model)
    lim = float(max(np.abs(a).max() for a in arrays)) or 1.0
    fig, axes = plt.subplots(1, 4, figsize=(13, 3.2), layout="constrained", sharey=True)
    rows = tokens_for(arrays[0].shape[0], tokens)
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
    tokens = tokens_for(seq_len)
    t = sentence_trace(tokens, d_model, 1, seed)
    X = t["X"]  # (1, T, d_model)
    params = init_params(d_model, rng=np.random.default_rng(seed))  # sentence_trace's params
    t_id = _trace(X, identity_params(d_model), 1)
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
