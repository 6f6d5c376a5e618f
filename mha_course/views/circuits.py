"""Views of notebook 14: the head detector, the phase change, QK/OV circuits, composition,
attribution, patching, ablation and the attention pattern viewer (matplotlib only here).

Every helper takes ``ax=None`` (or ``axes=None`` / makes its own figure) and returns what it drew
on; attention weights use the course's one colour map (``plots.WEIGHTS_CMAP`` on 0..1), signed
values ``plots.VALUES_CMAP`` centred on 0; head i of a layer is drawn in ``plots.head_color(i)``.
Tokens 0..15 are shown as the letters a..p (``token_text``). Taught in 14_circuits.ipynb.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import colors as mcolors

from .. import _validate
from ..lessons import circuits as ci
from .attention import attention_heatmap
from .model import smooth
from .style import MASKED_COLOR, VALUES_CMAP, WEIGHTS_CMAP, finite_values, head_color, known_keys

__all__ = ["LETTERS", "token_text", "checked_runs", "head_labels", "text_color", "scores_table", "phase_change_figure", "step_figure", "circuit_heatmap",
           "circuits_figure", "composition_figure", "head_bars", "position_patching_figure", "ablation_figure",
           "ranking_table", "pattern_figure", "rollout_figure"]

LETTERS = 26  # token ids 0..25 are drawn as the letters a..z
_SCORE_TITLES = {"previous_token": "previous token", "duplicate_token": "duplicate token",
                 "prefix_matching": "prefix matching"}


def token_text(tokens) -> list[str]:
    """tokens (T,) ids in 0..25 -> labels: 0 -> 'a', 1 -> 'b', ..., 25 -> 'z'.

    >>> token_text([0, 1, 15])
    ['a', 'b', 'p']
    """
    return [chr(ord("a") + t) for t in _token_ids(tokens).tolist()]


def _token_ids(tokens, T=None) -> np.ndarray:
    """tokens (T,) checked: whole numbers 0..25 (a letter each), one per position (``T`` of the weights)."""
    t = _validate.token_ids(tokens, LETTERS, "tokens")  # -1 would read as 'z', 2.5 has no letter
    if t.ndim != 1 or (T is not None and t.shape != (T,)):
        want = "(T,)" if T is None else f"({T},), one per position of the weights"
        raise ValueError(f"tokens has shape {t.shape}; give one sequence's tokens {want}")
    return t


def checked_runs(trajectories) -> dict:
    """{"two_layer": Trajectory, "one_layer": Trajectory} (``circuits.load_trajectories()``) checked -> the same.

    >>> sorted(checked_runs(ci.load_trajectories()))
    ['one_layer', 'two_layer']
    """
    ok = isinstance(trajectories, dict) and all(isinstance(trajectories.get(k), ci.Trajectory)
                                                for k in ("two_layer", "one_layer"))
    if not ok:
        got = sorted(trajectories) if isinstance(trajectories, dict) else type(trajectories).__name__
        raise ValueError(f"trajectories must be {{'two_layer': Trajectory, 'one_layer': Trajectory}}, got {got}; "
                         "pass circuits.load_trajectories()")
    return trajectories


def _checkpoint(two, step) -> int:
    """The index of ``step`` among the two-layer run's checkpoint steps; any other step is refused (no snapping)."""
    steps = [int(s) for s in two.steps]
    if not (_validate.is_whole(step) and int(step) in steps):
        every = f" (every {steps[1] - steps[0]})" if len(steps) > 1 else ""
        raise ValueError(f"step={step!r} is not a checkpoint of the runs: they were seen at steps {steps[0]}, "
                         f"{', '.join(map(str, steps[1:3]))}, ..., {steps[-1]}{every}; pass one of them")
    return steps.index(int(step))


def head_labels(n_layers: int, h: int) -> list[str]:
    """-> ['L1 H0', 'L1 H1', 'L2 H0', ...]: layers counted from 1 (as the notebook does), heads from 0.

    >>> head_labels(1, 2)
    ['L1 H0', 'L1 H1']
    """
    n_layers, h = _validate.positive_int(n_layers, "n_layers"), _validate.positive_int(h, "h")
    return [f"L{layer + 1} H{head}" for layer in range(n_layers) for head in range(h)]


def text_color(rgba) -> str:
    """A cell's colour (r, g, b[, a]) in 0..1 -> "white" or "black", whichever reads on it (relative luminance).

    >>> text_color((0.0, 0.0, 0.3)), text_color((1.0, 1.0, 0.8))
    ('white', 'black')
    """
    c = _validate.float_array(rgba, "rgba")
    if c.shape not in ((3,), (4,)) or not (np.isfinite(c).all() and (c >= 0).all() and (c <= 1).all()):
        raise ValueError(f"rgba={np.asarray(rgba).tolist()!r} must be (r, g, b) or (r, g, b, a) in 0..1; "
                         "pass e.g. img.cmap(img.norm(value))")
    r, g, b = (v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c[:3].astype(float))
    return "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.18 else "black"


def _tables(tables, name: str, layout: str, n: int = 2) -> dict:
    """{name: array} with every array ``n``-D, finite, of one shape, -> {name: float array}; else a ValueError naming
    ``name``."""
    tables = _validate.mapping(tables, name, "{" + f"name: {layout}" + "}")
    out = {k: finite_values(_validate.array(v, f"{name}[{k!r}]", n, layout), f"{name}[{k!r}]") for k, v in tables.items()}
    shapes = {v.shape for v in out.values()}
    if len(shapes) != 1:
        raise ValueError(f"{name} holds arrays of shapes {sorted(shapes)}; give every entry the same shape {layout}")
    return out


def _write_values(ax, img, table, fmt, fontsize) -> None:
    """Write each value of ``table`` (N, M) on its cell of the image ``img``, in the colour that reads on it."""
    for (i, j), v in np.ndenumerate(table):
        ax.text(j, i, fmt(i, j, v), ha="center", va="center", fontsize=fontsize,
                color=text_color(img.cmap(img.norm(v))))


TICK_SIZE = 7  # points: the smallest tick label a figure of notebook 14 uses


def _ax(ax, figsize):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def scores_table(scores: dict, ax=None, title="head detector"):
    """{score name: (L, h)} -> ax: a table of heads (rows) by score (columns), 0..1 colours, values written.

    The names are those of ``circuits.SCORE_NAMES`` (what ``circuits.head_scores`` returns); a misspelled one
    is refused, not drawn as a column of its own."""
    known_keys(scores, ci.SCORE_NAMES, "scores")
    scores = _tables(scores, "scores", "(L, h)")  # e.g. circuits.head_scores(...)
    names = list(scores)
    L, h = scores[names[0]].shape
    table = np.stack([scores[n].reshape(-1) for n in names], axis=1)  # (L h, n_scores)
    ax = _ax(ax, (1.3 * len(names) + 1.5, 0.45 * L * h + 1.2))
    img = ax.imshow(table, cmap=WEIGHTS_CMAP, vmin=0, vmax=1, aspect="auto")
    _write_values(ax, img, table, lambda i, j, v: f"{v:.2f}", 9)
    ax.set_xticks(range(len(names)), [_SCORE_TITLES.get(n, n) for n in names], fontsize=8)
    ax.set_yticks(range(L * h), head_labels(L, h))
    ax.set_title(title)
    return ax


def _best(trajectory, name: str, layer: int) -> np.ndarray:
    return trajectory.scores[:, ci.SCORE_NAMES.index(name), layer].max(-1)  # (n,): the best head's score


def phase_change_figure(trajectories: dict, step=None, axes=None):
    """{name: Trajectory} ("two_layer", "one_layer") -> axes (2,): the loss (log scale) and the best heads'
    previous-token and prefix-matching scores over training; a dashed line where the induction head
    forms (``circuits.formation_step``), a grey one at ``step`` (a checkpoint step, or None)."""
    two, one = checked_runs(trajectories)["two_layer"], trajectories["one_layer"]
    step = None if step is None else int(two.steps[_checkpoint(two, step)])
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    ax = axes[0]
    ax.plot(smooth(two.losses, 10), color=head_color(0), label="two layers")
    ax.plot(smooth(one.losses, 10), color=head_color(1), label="one layer")
    ax.set_yscale("log")
    ax.set(xlabel="training step", ylabel="training loss (nats, smoothed)", title="loss")
    ax = axes[1]
    ax.plot(two.steps, _best(two, "previous_token", 0), color=head_color(0), ls="--",
            label="two layers: previous token (best layer-1 head)")
    ax.plot(two.steps, _best(two, "prefix_matching", 1), color=head_color(0),
            label="two layers: prefix matching (best layer-2 head)")
    ax.plot(one.steps, _best(one, "prefix_matching", 0), color=head_color(1),
            label="one layer: prefix matching (best head)")
    ax.set(xlabel="training step", ylabel="score", ylim=(0, 1), title="head scores on a probe batch")
    ax.legend(fontsize=7, loc="upper left")
    formed = ci.formation_step(two)
    for a in axes:
        if formed is not None:
            a.axvline(formed, color="black", ls=":", lw=1)
        if step is not None:
            a.axvline(step, color="grey", lw=2, alpha=0.5)
    axes[0].legend(fontsize=8)
    return axes


def step_figure(trajectories: dict, step: int):
    """-> Figure: the phase-change plots with a marker at ``step``, and the two-layer model's four heads
    on the probe sequence at that checkpoint (what the training-step slider redraws). ``step``: one of
    the checkpoint steps ``trajectories["two_layer"].steps``."""
    two = checked_runs(trajectories)["two_layer"]
    i = _checkpoint(two, step)
    fig = plt.figure(figsize=(10, 5.2), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1.15])
    phase_change_figure(trajectories, int(two.steps[i]), axes=top.subplots(1, 2))
    L, h = two.weights.shape[1:3]
    labels = token_text(two.tokens)
    future = np.triu(np.ones((len(labels),) * 2, dtype=bool), k=1)
    for k, ax in enumerate(bottom.subplots(1, L * h)):
        layer, head = divmod(k, h)
        attention_heatmap(np.where(future, np.nan, two.weights[i, layer, head]), labels, labels, ax=ax,
                          colorbar=False, annotate=False)
        ax.set_title(f"L{layer + 1} H{head} at step {int(two.steps[i])}", color=head_color(head), fontsize=9)
        ax.tick_params(labelsize=TICK_SIZE)
        ax.set_xticks(range(0, len(labels), 2), labels[::2])  # every other key: 24 letters fit at 7 pt
    return fig


def circuit_heatmap(matrix, row_labels, col_labels, ax=None, title=None, row_label="query token",
                    col_label="key token", colorbar: bool = True):
    """matrix (N, M) -> ax: a signed circuit (QK or OV) as a heatmap centred on 0, rows and columns labelled;
    NaN entries (what a causal mask hides) are drawn grey, an inf is refused."""
    m = _validate.array(matrix, "matrix", 2, "(N, M)")
    finite_values(np.nan_to_num(m, nan=0.0, posinf=np.inf, neginf=-np.inf), "matrix")  # NaN: a masked entry; inf: a fault
    colorbar = _validate.flag(colorbar, "colorbar")
    ax = _ax(ax, (4, 3.6))
    shown = np.abs(m[np.isfinite(m)])  # NaN: entries the causal mask hides
    lim = float(shown.max()) if shown.size and shown.max() > 0 else 1.0
    img = ax.imshow(m, cmap=plt.get_cmap(VALUES_CMAP).with_extremes(bad=MASKED_COLOR),
                    norm=mcolors.Normalize(-lim, lim), aspect="auto", interpolation="nearest")
    step = 2 if m.shape[1] > 16 else 1  # more than 16 columns: every other label, at a readable size
    ax.set_xticks(range(0, m.shape[1], step), list(col_labels)[::step], fontsize=TICK_SIZE)
    ax.set_yticks(range(0, m.shape[0], step), list(row_labels)[::step], fontsize=TICK_SIZE)
    ax.set(xlabel=col_label, ylabel=row_label)
    if colorbar:
        ax.figure.colorbar(img, ax=ax, fraction=0.046, pad=0.04)
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def circuits_figure(params, config, kind: str = "ov"):
    """-> Figure: one heatmap per head of the OV circuits ("ov", source token x output token), the token QK
    circuits ("qk") or the positional QK circuits ("pos", query position x key position)."""
    kinds = {"ov": ci.ov_circuit, "qk": ci.qk_circuit, "pos": ci.positional_qk_circuit}
    fn = kinds[_validate.choice(kind, kinds, "kind")]  # 'ov' (OV), 'qk' (token QK), 'pos' (positional QK)
    fn(params, config, 0, 0)  # a TypeError names a params or config that is not a model's
    L, h = config.n_layers, config.h
    fig, axes = plt.subplots(1, L * h, figsize=(3.4 * L * h, 3.3), layout="constrained", squeeze=False)
    vocab = token_text(range(config.vocab))
    labels = [str(t) for t in range(config.seq_len)] if kind == "pos" else vocab
    rows, cols = {"ov": ("attended token", "logit of token"), "qk": ("query token", "key token"),
                  "pos": ("query position", "key position")}[kind]
    for k, ax in enumerate(axes[0]):
        layer, head = divmod(k, h)
        m = fn(params, config, layer, head)
        title = f"L{layer + 1} H{head}"
        if kind != "pos":
            title += f"  (copying score {ci.copying_score(m):+.2f})"
        else:
            m = np.where(np.triu(np.ones_like(m, dtype=bool), k=1), np.nan, m)  # the causal mask hides s > t
            m = m - np.nanmean(m, axis=1, keepdims=True)  # each row centred: softmax ignores a row's shift
        circuit_heatmap(m, labels, labels, ax=ax, title=title, row_label=rows, col_label=cols,
                        colorbar=k == L * h - 1)
    return fig


def composition_figure(scores: dict, baseline: float, axes=None):
    """{"Q", "K", "V": (h, h)} -> axes (3,): each kind's scores, layer-1 heads (rows) x layer-2 heads (columns),
    one colour scale; the random baseline in the titles. All three kinds are required."""
    known_keys(scores, ("Q", "K", "V"), "scores", required=("Q", "K", "V"))
    scores = _tables(scores, "scores", "(h, h)")  # e.g. circuits.composition_scores(params, config)
    baseline = _validate.number(baseline, "baseline")
    if axes is None:
        _, axes = plt.subplots(1, len(scores), figsize=(3 * len(scores), 2.8), layout="constrained", squeeze=False)
        axes = axes[0]
    top = max(float(np.max(v)) for v in scores.values())
    low = min(float(np.min(v)) for v in scores.values())
    for ax, (kind, s) in zip(axes, scores.items()):
        img = ax.imshow(s, cmap=WEIGHTS_CMAP, vmin=low, vmax=top, aspect="auto")
        _write_values(ax, img, s, lambda i, j, v: f"{v:.3f}", 9)
        ax.set_xticks(range(s.shape[1]), [f"L2 H{b}" for b in range(s.shape[1])])
        ax.set_yticks(range(s.shape[0]), [f"L1 H{a}" for a in range(s.shape[0])])
        ax.set_title(f"{kind}-composition (random: {baseline:.3f})", fontsize=9)
    return axes


def head_bars(values, ax=None, title=None, ylabel="", labels=None):
    """values (L, h) (or (n,) with ``labels``) -> ax: one bar per head, in its head colour."""
    v = finite_values(values, "values")
    if labels is None:
        if v.ndim != 2 or 0 in v.shape:
            raise ValueError(f"values has shape {v.shape}; give one value per head (L, h), or (n,) with labels=")
        labels = head_labels(*v.shape)
        colors = [head_color(j) for _ in range(v.shape[0]) for j in range(v.shape[1])]
    else:
        labels = list(labels)
        if v.shape != (len(labels),):
            raise ValueError(f"values has shape {v.shape} but there are {len(labels)} labels; give one value per label")
        colors = [head_color(0)] * len(labels)
    ax = _ax(ax, (3.6, 2.8))
    flat = v.reshape(-1)
    ax.bar(range(len(flat)), flat, color=colors)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(flat)), labels, fontsize=8)
    ax.set_ylabel(ylabel)
    for i, x in enumerate(flat):
        ax.text(i, x, f"{x:.2f}", ha="center", va="bottom" if x >= 0 else "top", fontsize=8)
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def position_patching_figure(effects, tokens, ax=None, title=None):
    """effects (L, h, T), tokens (T,) -> ax: the share restored by patching one head at one position."""
    e = _validate.array(effects, "effects", 3, "(L, h, T)")
    L, h, T = e.shape
    tokens = _token_ids(tokens, T)
    ax = _ax(ax, (9, 2.2))
    lim = float(np.nanmax(np.abs(e))) if np.isfinite(e).any() else 1.0
    lim = lim if lim > 0 else 1.0
    img = ax.imshow(e.reshape(L * h, T), cmap=VALUES_CMAP, norm=mcolors.Normalize(-lim, lim), aspect="auto")
    ax.set_xticks(range(T), [f"{t}\n{s}" for t, s in enumerate(token_text(tokens))], fontsize=TICK_SIZE)
    ax.set_yticks(range(L * h), head_labels(L, h))
    ax.set_xlabel("position (and its token in sequence 0)")
    _write_values(ax, img, e.reshape(L * h, T), lambda i, j, v: f"{v:.2f}" if abs(v) >= 0.05 else "", 7)
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def ablation_figure(losses: dict, labels, ax=None):
    """{kind: (n,)} loss increases, labels (n,) -> ax: grouped bars, one group per set of heads."""
    losses = _tables(losses, "losses", "(n,)", 1)
    labels = list(labels)
    n, k = len(labels), len(losses)
    if next(iter(losses.values())).shape != (n,):
        raise ValueError(f"losses hold {next(iter(losses.values())).shape} values but there are {n} labels; "
                         "give one loss increase per label")
    ax = _ax(ax, (8, 3))
    width = 0.8 / k
    for i, (kind, v) in enumerate(losses.items()):
        x = np.arange(n) + (i - (k - 1) / 2) * width
        ax.bar(x, v, width, label=f"{kind} ablation", color=head_color(i))
        for xi, vi in zip(x, v):
            ax.text(xi, vi, f"{vi:.2f}", ha="center", va="bottom", fontsize=TICK_SIZE)
    ax.set_xticks(range(n), labels, fontsize=8)
    ax.set_ylabel("loss increase (nats)")
    ax.legend(fontsize=8)
    return ax


def ranking_table(measures: dict, ax=None):
    """{measure: (L, h)} -> ax: each measure's rank of every head (1 = most important), values written."""
    measures = _tables(measures, "measures", "(L, h)")
    names = list(measures)
    vals = np.stack([measures[n].reshape(-1) for n in names], axis=1)  # (L h, m)
    ranks = (-vals).argsort(0).argsort(0) + 1  # 1 = largest
    L, h = measures[names[0]].shape
    ax = _ax(ax, (1.4 * len(names) + 1.5, 0.5 * L * h + 1.2))
    img = ax.imshow(ranks, cmap=WEIGHTS_CMAP + "_r", vmin=1, vmax=L * h + 1, aspect="auto")
    _write_values(ax, img, ranks, lambda i, j, r: f"{r}  ({vals[i, j]:.2f})", 8)
    ax.set_xticks(range(len(names)), names, fontsize=8)
    ax.set_yticks(range(L * h), head_labels(L, h))
    ax.set_title("rank of each head (1 = most important), value in brackets", fontsize=9)
    return ax


def pattern_figure(weights, tokens, head: int, token: int, title: str = "", key=None):
    """weights (h, T, T) of one layer on one sequence, tokens (T,) -> Figure: head ``head``'s pattern over
    the token text, with what the query ``token`` attends to (its row) and what attends to the key
    ``key`` (its column; None: the same position as ``token``)."""
    w_all = _validate.array(weights, "weights", 3, "(h, T, T): one layer's weights on one sequence")
    finite_values(w_all, "weights")  # the future is masked here, not in the input
    h, T = w_all.shape[:2]
    if w_all.shape[2] != T:
        raise ValueError(f"weights has shape {w_all.shape}: give one layer's weights on one sequence (h, T, T)")
    tokens = _token_ids(tokens, T)
    head = _validate.index(head, h, "head", "heads in this layer")
    token = _validate.index(token, T, "token")
    key = token if key is None else _validate.index(key, T, "key")
    w = w_all[head]
    labels = token_text(tokens)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8), layout="constrained", width_ratios=[1.2, 1, 1])
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    attention_heatmap(np.where(future, np.nan, w), labels, labels, ax=axes[0], annotate=False, colorbar=False,
                      title=f"{title}head {head}")
    axes[0].tick_params(labelsize=TICK_SIZE)
    axes[0].set_xticks(range(0, T, 2), labels[::2])
    axes[0].add_patch(plt.Rectangle((-0.5, token - 0.5), T, 1, fill=False, ec=head_color(1), lw=1.5))
    axes[0].add_patch(plt.Rectangle((key - 0.5, -0.5), 1, T, fill=False, ec=head_color(2), lw=1.5))
    ticks = [f"{t}\n{s}" for t, s in enumerate(labels)]
    for ax, values, color, where, what in (
            (axes[1], w[token], head_color(1), token, f"query {token} ('{labels[token]}') attends to"),
            (axes[2], w[:, key], head_color(2), key, f"what attends to key {key} ('{labels[key]}')")):
        ax.bar(range(T), values, color=color)
        ax.set_xticks(range(0, T, 2), ticks[::2], fontsize=TICK_SIZE)
        ax.set(ylim=(0, 1), ylabel="weight", title=what)
        for s in np.flatnonzero(np.asarray(tokens) == tokens[where]):
            ax.axvline(s, color="grey", lw=0.6, ls=":")
    axes[1].set_xlabel("key position (dotted: the same token)")
    axes[2].set_xlabel("query position (dotted: the same token)")
    return fig


def rollout_figure(rollout_row, last_layer_row, occlusion, tokens, position: int, axes=None):
    """rollout_row (T,), last_layer_row (T,), occlusion (T,) -> axes (3,): three answers to "which input
    positions matter for the query at ``position``": rollout, the last layer's raw weights, occlusion."""
    tokens = _token_ids(tokens)
    T = len(tokens)
    rows = {name: finite_values(_validate.array(v, name, 1, "(T,)"), name) for name, v in
            (("rollout_row", rollout_row), ("last_layer_row", last_layer_row), ("occlusion", occlusion))}
    for name, v in rows.items():
        if v.shape != (T,):
            raise ValueError(f"{name} has shape {v.shape} but tokens has {T}: give one value per position ({T},)")
    position = _validate.index(position, T, "position")
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(12, 2.8), layout="constrained", sharex=True)
    ticks = [f"{t}\n{s}" for t, s in enumerate(token_text(tokens))]
    for ax, v, title in ((axes[0], rows["rollout_row"], "attention rollout"),
                         (axes[1], rows["last_layer_row"], "last layer's weights (heads averaged)"),
                         (axes[2], rows["occlusion"], "occlusion: drop of the answer's logit")):
        v = v[: position + 1]
        ax.bar(range(len(v)), v, color=head_color(0))
        ax.set_xticks(range(0, len(v), 2), ticks[: position + 1: 2], fontsize=TICK_SIZE)
        ax.set_title(f"{title} (query {position})", fontsize=9)
    return axes
