"""The one style of the course's plots: colour maps, head colours, new axes, labelled grids.

- attention weights always use ``WEIGHTS_CMAP`` on a fixed 0..1 scale, so colours mean the same
  thing in every notebook; masked entries are drawn in ``MASKED_COLOR``;
- other tensors (X, Q, K, V, scores) use the diverging ``VALUES_CMAP`` centred on 0;
- head i is always drawn in ``head_color(i)``, from a palette that colour-blind readers tell apart;
- helpers take ``ax=None`` and return what they drew on; no global matplotlib state is touched.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes

from .. import _validate

__all__ = ["WEIGHTS_CMAP", "VALUES_CMAP", "MASKED_COLOR", "HEAD_COLORS", "head_color", "new_ax", "finite_values", "finite_vector", "log_values", "known_keys",
           "label_axes", "head_grid",
           "DEFAULT_TOKENS", "tokens_for"]

WEIGHTS_CMAP = "Blues"
VALUES_CMAP = "RdBu_r"
MASKED_COLOR = "#d9d9d9"
# Okabe & Ito's colour-universal-design palette (jfly.uni-koeln.de/color, 2008) without its yellow, which is
# too light for a line on white, and Paul Tol's wine (personal.sron.nl/~pault) as the eighth: every two of the
# eight stay apart for protan, deutan and tritan readers too (tests/views/test_style_colour_vision.py).
HEAD_COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#882255")


def head_color(i: int) -> str:
    """Head index i >= 0 -> its colour, the same in every plot of the course (they repeat after 8 heads).

    >>> head_color(0) == head_color(8)
    True
    """
    return HEAD_COLORS[_validate.count(i, "i") % len(HEAD_COLORS)]


def new_ax(ax, figsize=(4, 3.5)):
    """ax -> ax, or a new (figsize) axes in its own constrained-layout figure when ax is None."""
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def label_axes(ax, rows, cols, row_label, col_label):
    """Tick labels ``rows`` (y) and ``cols`` (x) and the two axis labels.

    Up to 8 column labels are turned 45 degrees; more are turned upright (90 degrees), each
    under its own column, so that long token lists do not run into each other."""
    _validate.instance(ax, Axes, "ax", "pass a matplotlib Axes, e.g. the second value of plt.subplots()")
    if rows is not None:
        ax.set_yticks(range(len(rows)), rows)
    if cols is not None:
        if len(cols) > 8:
            ax.set_xticks(range(len(cols)), cols, rotation=90, ha="center")
        else:
            ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right")
    ax.set_ylabel(row_label)
    ax.set_xlabel(col_label)


def head_grid(h: int, ncols: int = 4):
    """h -> (Figure, h axes) laid out in rows of at most ``ncols`` heatmaps."""
    h, ncols = _validate.positive_int(h, "h"), _validate.positive_int(ncols, "ncols")
    ncols = min(h, ncols)
    nrows = -(-h // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 3.0 * nrows + 0.4),
                             layout="constrained", squeeze=False)
    for ax in axes.flat[h:]:
        ax.set_axis_off()
    return fig, list(axes.flat[:h])


def finite_values(arr, name: str):
    """arr (any shape) -> the same float array if every entry is finite, else a ValueError naming ``name`` and
    where its first NaN or inf is (a plot would leave a hole, or draw a line off its axis).

    >>> finite_values([[1.0, 2.0]], "values").shape
    (1, 2)
    """
    arr = _validate.float_array(arr, name)
    bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} has {int(bad.sum())} non-finite value(s) (the first: {name}{list(first)} = "
                         f"{arr[first]}); a view draws finite numbers only: drop or replace them")
    return arr


def finite_vector(x, name: str, n: int | None = None):
    """x -> a non-empty 1-D float array (n,) with every entry finite, or a ValueError naming ``name``.

    >>> finite_vector([1, 2], "losses").tolist()
    [1.0, 2.0]
    """
    return finite_values(_validate.vector(x, name, n), name)


def log_values(x, name: str, n: int | None = None):
    """x -> a non-empty 1-D float array (n,) of finite values > 0: what a log axis can draw.

    >>> log_values([0.5, 2], "seconds").tolist()
    [0.5, 2.0]
    """
    v = finite_vector(x, name, n)
    if (v <= 0).any():
        bad = float(v[v <= 0][0])
        raise ValueError(f"{name} holds {bad:g}, drawn on a log axis that shows only values > 0; "
                         f"pass {name} with every entry > 0")
    return v


def known_keys(value, valid, name: str, required=()) -> dict:
    """A non-empty dict whose keys are all among ``valid`` (and include every ``required``), or a ValueError
    naming the unknown or missing keys and the known ones (a misspelled key is not drawn as a new entry).

    >>> list(known_keys({"Q": 1}, ("Q", "K"), "scores"))
    ['Q']
    """
    valid = tuple(valid)
    value = _validate.mapping(value, name, "{" + " | ".join(repr(v) for v in valid) + ": ...}")
    unknown = [k for k in value if k not in valid]
    missing = [k for k in required if k not in value]
    if unknown or missing:
        what = (f"has the unknown keys {unknown}" if unknown else "") + (" and " if unknown and missing else "") + \
               (f"lacks the keys {missing}" if missing else "")
        raise ValueError(f"{name} {what}; its keys are " + ", ".join(repr(v) for v in valid)
                         + (" (all of them)" if required else "") + ": fix the spelling or give the missing ones")
    return value


DEFAULT_TOKENS = ("the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "warm",
                  "and", "soft", "under", "the", "old", "lamp")


def tokens_for(n: int, tokens=None) -> list[str]:
    """n -> n token labels: ``tokens`` if given (and long enough), else the course sentence,
    extended with ``tok16, tok17, ...`` past its end.

    >>> tokens_for(3)
    ['the', 'cat', 'sat']
    """
    n = _validate.positive_int(n, "n")
    if tokens is not None and (isinstance(tokens, (str, bytes)) or not isinstance(tokens, (list, tuple, np.ndarray))
                               or np.ndim(tokens) != 1):
        raise ValueError(f"tokens must be a list of labels, one per position, got {type(tokens).__name__} "
                         f"{tokens!r:.60}; pass e.g. 'the cat sat'.split()")
    source = list(DEFAULT_TOKENS if tokens is None else tokens)
    if tokens is not None and len(source) != n:
        raise ValueError(f"got {len(source)} tokens for a sequence of length {n}; "
                         "give one token per position")
    return source[:n] + [f"tok{i}" for i in range(len(source), n)]
