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
from ..heads import split_heads, valid_heads
from ..lessons import complexity as _cx
from ..lessons.qkv import diagonal_curve, identity_params, mean_diagonal_weight, sentence_inputs, sentence_trace
from ..lessons.scaling import ScalingResult
from ..mha import trace as _trace
from .stages import check_trace, flow_inputs, present_stages
from .style import (
    HEAD_COLORS,
    MASKED_COLOR,
    VALUES_CMAP,
    WEIGHTS_CMAP,
    finite_values,
    finite_vector,
    head_color,
    head_grid,
    label_axes,
    log_values,
    new_ax,
)

__all__ = ["WEIGHTS_CMAP", "VALUES_CMAP", "MASKED_COLOR", "HEAD_COLORS", "DEFAULT_TOKENS",
           "tokens_for", "head_color", "attention_heatmap", "matrix_heatmap", "head_heatmaps",
           # 02_scaled_dot_product and 03_multi_head_split
           "RAW_COLOR", "SCALED_COLOR", "scaling_curves", "weights_bars", "scaling_figure",
           "TOKEN_COLORS", "token_color", "head_split_sources", "split_sources_heatmaps",
           "split_bug_figure",
           # 00_overview and 01_qkv: views of the course sentence
           "stage_flow", "sentence_tokens", "sentence_heads_figure", "qkv_matrices_figure", "qkv_comparison_figure",
           # 04_concat_output and 05_complexity
           "DELTA_CMAP", "head_change_heatmap", "param_blocks", "flop_curves",
           "score_memory_bars", "timing_loglog", "params_figure", "ledger_figure"]

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


def attention_heatmap(weights, q_tokens=None, k_tokens=None, ax=None, title=None,
                      annotate: bool | None = None, colorbar: bool = True):
    """weights (T, S) -> ax: queries down the rows, keys along the columns, 0..1 colour scale.

    Entries that are exactly 0 in a row that a mask cut (NaN or -inf in ``weights``, or
    a fully-masked row) are drawn grey. ``annotate`` writes the values into the cells
    (default: when T and S are both <= 8).
    """
    w = _validate.float_array(weights, "weights").astype(float)
    annotate = None if annotate is None else _validate.flag(annotate, "annotate")
    colorbar = _validate.flag(colorbar, "colorbar")
    if w.ndim != 2:
        raise ValueError(f"attention_heatmap needs weights of shape (T, S), got shape {w.shape}; "
                         "pick one batch element and head, e.g. weights[0, head]")
    T, S = w.shape
    ax = new_ax(ax)
    cmap = plt.get_cmap(WEIGHTS_CMAP).with_extremes(bad=MASKED_COLOR)
    img = ax.imshow(np.ma.masked_invalid(w), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    label_axes(ax, tokens_for(T, q_tokens), tokens_for(S, k_tokens), "query", "key")
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
    for i, ax in enumerate(axes):
        masked = np.where(np.isneginf(trace["scores"][batch, i]), np.nan, w[i])
        attention_heatmap(masked, tokens, k_tokens, ax=ax, colorbar=False)
        ax.set_title(f"head {i}", color=head_color(i), fontweight="bold")
        if i:
            ax.set_ylabel("")
    # one colour bar for all heads, so every heatmap keeps the same width
    axes[-1].figure.colorbar(axes[-1].images[0], ax=list(axes), fraction=0.046 / min(h, 4) ** 0.5,
                             pad=0.02, label="weight")
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
        for (r, c), p in np.ndenumerate(positions[i]):
            ax.text(c, r, f"{toks[p]}\nf{features[i, r, c]}", ha="center", va="center",
                    fontsize=9.5, linespacing=0.95)
        ax.set_xticks(range(d_k))
        ax.set_yticks(range(T), toks if i == 0 else [""] * T)
        ax.set_xlabel("d_k slot")
        ax.set_title(f"head {i}", color=head_color(i), fontweight="bold", fontsize=10)
    axes[0].set_ylabel(label or "row (should be this token)")
    return axes


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
    head_heatmaps(t, tokens, axes=axes)
    fig.suptitle(f"d_model={d_model}, h={h}, d_k={t.d_k}, seq_len={seq_len}: "
                 f"weights {t.shapes['weights']}")
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


# ---- 04_concat_output and 05_complexity: heads in the output, parameters, cost ----------

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
