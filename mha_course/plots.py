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
