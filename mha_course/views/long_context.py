"""Views of notebook 13 (matplotlib): extrapolation, RoPE scaling, windows and sinks, paged memory.

Every helper takes ``ax=None`` (a new figure) and returns the axes it drew on; it never calls
``plt.show()``. Masks are drawn by ``plots_positions.mask_heatmap`` (the course's mask colours);
curves use one colour per position scheme (``SCHEME_COLORS``).

Taught in 13_long_context.ipynb.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from .. import _validate
from ..gqa import RollingKVCache
from ..lessons import long_context as lc
from ..lessons import model as train
from ..positions import rope_inv_freq
from .positions import mask_heatmap
from .style import finite_values, head_color

__all__ = ["SCHEME_COLORS", "checked_model", "rope_model", "checked_batch", "checked_table", "accuracy_vs_length", "position_loss_curves", "rope_turns_figure",
           "window_mask", "stream_loss_curves", "sink_weight_bars", "paged_memory_bars", "extrapolation_figure",
           "length_view", "scaling_view", "window_view"]

SCHEME_COLORS = {"learned": "#7f7f7f", "sinusoidal": head_color(4), "rope": head_color(0), "alibi": head_color(2),
                 "none": head_color(1)}


def _ax(ax, figsize=(5.6, 3.4)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
    return ax


def _color(name: str, i: int) -> str:
    return SCHEME_COLORS.get(str(name).split(" ")[0].split(",")[0], head_color(i))  # a label: any key


# ----------------------------------------------------------------------------- the arguments, checked once
def checked_model(config, params) -> tuple:
    """A trained model (Config, Model) checked (``lc.load_scheme(name)`` returns one) -> (config, params).

    >>> config, params = checked_model(*lc.load_scheme("alibi")); config.positions
    'alibi'
    """
    if not isinstance(config, train.Config):
        raise ValueError(f"config must be a Config, got {type(config).__name__}; pass the config of "
                         "long_context.load_scheme(name)")
    if not isinstance(params, train.Model):
        raise ValueError(f"params must be a Model, got {type(params).__name__}; pass the params of "
                         "long_context.load_scheme(name)")
    train.check_config(config)
    if np.shape(params.embed) != (config.vocab, config.d_model) or len(params.layers) != config.n_layers:
        raise ValueError(f"params (embed {np.shape(params.embed)}, {len(params.layers)} layers) were not made for "
                         f"config (vocab={config.vocab}, d_model={config.d_model}, n_layers={config.n_layers}); "
                         "pass the config and params of one long_context.load_scheme(name)")
    return config, params


def rope_model(config, params) -> tuple:
    """``checked_model`` for a view of RoPE's scalings: a model with other positions (ALiBi's, learned
    ones) has no rotation to rescale, so it is refused.

    >>> rope_model(*lc.load_scheme("rope"))[0].positions
    'rope'
    """
    config, params = checked_model(config, params)
    if config.positions != "rope":
        raise ValueError(f"config has positions={config.positions!r}: RoPE scalings rescale rotations this model "
                         "does not have; pass the RoPE model, long_context.load_scheme('rope')")
    return config, params


def checked_batch(config, batch):
    """A Batch of the model's tokens (``lc.stream_batch(config, episodes, rng, n)``) checked -> batch.

    >>> config = lc.load_scheme("rope")[0]
    >>> checked_batch(config, lc.stream_batch(config, 2, np.random.default_rng(0), 1)).tokens.shape
    (1, 32)
    """
    config = train.check_config(config)
    if not isinstance(batch, train.Batch):
        raise ValueError(f"batch must be a Batch, got {type(batch).__name__}; pass long_context.stream_batch(config, "
                         "episodes, rng, n)")
    tokens = _validate.token_ids(batch.tokens, config.vocab, "batch.tokens")
    if tokens.ndim != 2 or 0 in tokens.shape:
        raise ValueError(f"batch.tokens has shape {tokens.shape}; a stream batch is (B, T), B and T >= 1")
    return batch


def checked_table(table, lengths, train_len: int) -> tuple:
    """{name: [(Metrics, position losses (T,)) per length]} (``lc.extrapolation_table``), the lengths it was
    evaluated at and the training length, checked -> (table, lengths as ints, train_len).

    >>> from mha_course.lessons.model import Metrics
    >>> checked_table({"rope": [(Metrics(0.1, 0.9), None)]}, [16], 16)[1].tolist()
    [16]
    """
    lengths = np.atleast_1d(_validate.positive_ints(lengths, "lengths"))
    if lengths.ndim != 1:
        raise ValueError(f"lengths has shape {lengths.shape}; give the evaluation lengths as a list, e.g. [16, 32, 64]")
    train_len = _validate.positive_int(train_len, "train_len")
    table = _validate.mapping(table, "table", "{name: [(Metrics, position losses (T,)) per length]}")
    for name, runs in table.items():
        ok = isinstance(runs, (list, tuple)) and len(runs) == len(lengths) and all(
            isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], train.Metrics) for r in runs)
        if not ok:
            raise ValueError(f"table[{name!r}] must be one (Metrics, position losses) per length ({len(lengths)} for "
                             f"lengths={lengths.tolist()}); pass long_context.extrapolation_table(models, lengths)")
        for T, (_, losses) in zip(lengths, runs):
            if losses is not None and np.shape(losses) != (T,):
                raise ValueError(f"table[{name!r}] has position losses of shape {np.shape(losses)} at length {T}: "
                                 f"give lengths in the order the table was evaluated at, one loss per position")
    return table, lengths, train_len


def _losses(losses, name: str) -> np.ndarray:
    """Position losses (T,), NaN where nothing is scored, checked: a NaN row has nothing to draw."""
    out = _validate.array(losses, name, 1, "(T,), NaN where a position is not scored")
    if not np.isfinite(out).any():
        raise ValueError(f"{name} has no finite loss; nothing was scored")
    return out


def accuracy_vs_length(table: dict, lengths, train_len: int, ax=None, title=None):
    """{name: [(Metrics, position losses) per length]} -> ax: accuracy against evaluation length.

    >>> from mha_course.lessons.model import Metrics
    >>> ax = accuracy_vs_length({"rope": [(Metrics(0.1, 0.9), None), (Metrics(1.0, 0.5), None)]}, [16, 32], 16)
    >>> len(ax.lines)
    2
    """
    table, lengths, train_len = checked_table(table, lengths, train_len)
    ax = _ax(ax)
    for i, (name, runs) in enumerate(table.items()):
        ax.plot(lengths, [m.accuracy for m, _ in runs], "o-", color=_color(name, i), label=name, lw=1.8)
    ax.axvline(train_len, color="k", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(lengths), [f"{T}\n({T // train_len}x)" for T in lengths])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("evaluation length (tokens); dotted: the training length")
    ax.set_ylabel("accuracy on the second copy")
    ax.set_title(title or "Accuracy past the training length")
    ax.legend(fontsize=8, loc="lower left")
    return ax


def position_loss_curves(table: dict, lengths, train_len: int, ax=None, title=None, length_index: int = 0):
    """{name: [(Metrics, position losses (T,)) per length]} -> ax: loss at each scored position of the
    evaluation at ``lengths[length_index]`` (the stretched task scores its second copy, T/2 .. T-2)."""
    table, lengths, train_len = checked_table(table, lengths, train_len)
    length_index = _validate.index(length_index, len(lengths), "length_index", "lengths")
    ax = _ax(ax)
    T = int(lengths[length_index])
    for i, (name, runs) in enumerate(table.items()):
        losses = _losses(runs[length_index][1], f"table[{name!r}][{length_index}] losses")
        ok = np.flatnonzero(np.isfinite(losses))
        ax.plot(ok, losses[ok], color=_color(name, i), label=name, lw=1.6)
    if train_len < T:
        ax.axvline(train_len - 0.5, color="k", ls=":", lw=1, label="training length")
    ax.set_xlim(-0.5, T - 0.5)
    ax.set_xlabel(f"query position (of {T})")
    ax.set_title(title or f"{T} tokens ({T // train_len}x)", fontsize=10)
    return ax


def extrapolation_figure(table: dict, lengths, train_len: int, title: str = ""):
    """Accuracy against length (left), then the loss at each position, one panel per evaluation length
    (each is a sequence of its own; left of its second copy nothing is scored). -> the axes."""
    table, lengths, train_len = checked_table(table, lengths, train_len)
    fig, axes = plt.subplots(1, 1 + len(lengths), figsize=(13, 3.6), layout="constrained",
                             width_ratios=[1.3] + [1] * len(lengths))
    accuracy_vs_length(table, lengths, train_len, ax=axes[0], title=f"Accuracy {title}".strip())
    top = max(float(np.nanmax(_losses(losses, f"table[{name!r}] losses"))) for name, runs in table.items()
              for _, losses in runs)
    for k in range(len(lengths)):
        position_loss_curves(table, lengths, train_len, ax=axes[1 + k], length_index=k)
        axes[1 + k].set_ylim(0, top * 1.05)  # one scale for the three sequences
    axes[1].set_ylabel("cross-entropy (nats)")
    fig.suptitle(f"Loss at each scored query (the second copy) {title}".strip(), x=0.62, fontsize=10)
    return axes


def rope_turns_figure(d_k: int, factor: float, train_len: int, base: float = 10000.0,
                      beta_fast: float = 32.0, beta_slow: float = 1.0, ax=None):
    """How many turns each RoPE pair makes (log scale): unscaled over the training length L (what
    YaRN's beta_fast and beta_slow are defined on: horizontal lines), and each scaling's frequencies
    over the new length s·L (a scaled pair that turns over s·L as the unscaled one did over L meets
    no new angle).

    >>> ax = rope_turns_figure(16, 4.0, 16); len(ax.lines)
    8
    """
    d_k, train_len = _validate.positive_int(d_k, "d_k"), _validate.positive_int(train_len, "train_len")
    if d_k % 2:
        raise ValueError(f"d_k={d_k} is odd: RoPE turns pairs of features; pass an even d_k such as {d_k + 1}")
    factor, base = _validate.number(factor, "factor", 0, low_open=True), _validate.number(base, "base")
    beta_fast = _validate.number(beta_fast, "beta_fast", 0, low_open=True)
    beta_slow = _validate.number(beta_slow, "beta_slow", 0, low_open=True)
    ax = _ax(ax)
    j = np.arange(d_k // 2)
    yarn = {"type": "yarn", "factor": factor, "original_max_position": train_len,
            "beta_fast": beta_fast, "beta_slow": beta_slow}
    variants = {"linear (PI)": {"type": "linear", "factor": factor}, "NTK-aware": {"type": "ntk", "factor": factor},
                "YaRN (reference ramp)": yarn, "YaRN (paper ramp)": {**yarn, "ramp": "paper"}}
    styles = {"linear (PI)": (head_color(3), "s--"), "NTK-aware": (head_color(2), "^-"),
              "YaRN (reference ramp)": (head_color(0), "D-"), "YaRN (paper ramp)": (head_color(5), "v:")}
    L, sL = train_len, factor * train_len
    ax.plot(j, L * rope_inv_freq(d_k, base) / (2 * math.pi), "o-", color="k", lw=2.2, ms=6,
            label=f"unscaled, over L = {L:g}")
    ax.plot(j, sL * rope_inv_freq(d_k, base) / (2 * math.pi), "o:", color="0.55", lw=1, ms=3,
            label=f"unscaled, over s·L = {sL:g}")
    for name, scaling in variants.items():
        color, style = styles[name]
        ax.plot(j, sL * rope_inv_freq(d_k, base, scaling) / (2 * math.pi), style, color=color,
                label=f"{name}, over s·L", ms=4, lw=1.4)
    for beta, label in ((beta_fast, "beta_fast"), (beta_slow, "beta_slow")):
        ax.axhline(beta, color="0.6", ls=":", lw=1)
        ax.text(j[-1], beta, f" {label} = {beta:g} turns over L", fontsize=8, va="bottom", ha="right", color="0.4")
    ax.set_yscale("log")
    ax.set_xticks(j)
    ax.set_xlabel("pair j (0: the fastest)")
    ax.set_ylabel("turns")
    ax.set_title(f"RoPE pairs: turns over L = {L:g} and over s·L = {sL:g}, d_k = {d_k}", fontsize=10)
    ax.legend(fontsize=7, loc="lower left")
    return ax


def window_mask(mask, window: int, sinks: int, ax=None):
    """The rolling cache's mask (T, T) (key within the window or a sink), drawn as a mask, titled with
    ``window`` and ``sinks`` (0..T); every fourth key and query labelled (24 labels side by side run together)."""
    m = np.asarray(mask)
    if m.dtype != np.bool_ or m.ndim != 2 or 0 in m.shape or m.shape[0] != m.shape[1]:
        raise ValueError(f"mask must be a square bool (T, T) mask (True = may attend), got shape {m.shape} of "
                         f"{m.dtype}; pass RollingKVCache(1, 1, 2, window, sinks).next_mask(T)")
    window, sinks = _validate.positive_int(window, "window"), _validate.count(sinks, "sinks")
    if sinks > m.shape[0]:  # the title would name sinks that no key of this mask can be
        raise ValueError(f"sinks={sinks} is more than the mask's T={m.shape[0]} keys; pass sinks in 0..{m.shape[0]}, "
                         "the sinks the mask was built with")
    labels = [str(i) if i % 4 == 0 else "" for i in range(np.shape(mask)[-1])]
    ax = mask_heatmap(mask, labels[:np.shape(mask)[0]], labels, ax=_ax(ax, (3.8, 3.6)),
                      title=f"window {window}, sinks {sinks}: {int(np.asarray(mask).sum())} keys attended")
    return ax


def stream_loss_curves(curves: dict, episode_len: int, ax=None, title=None):
    """{label: position losses (T,)} -> ax: the loss along a long stream, episode boundaries dotted."""
    curves = _validate.mapping(curves, "curves", "{label: position losses (T,)}")
    curves = {k: _validate.array(v, f"curves[{k!r}]", 1, "(T,)") for k, v in curves.items()}
    if len({v.shape for v in curves.values()}) != 1:
        raise ValueError(f"curves hold losses of lengths {[len(v) for v in curves.values()]}; give every curve "
                         "the same stream's positions")
    episode_len = _validate.positive_int(episode_len, "episode_len")
    ax = _ax(ax, (7.5, 3.2))
    T = len(next(iter(curves.values())))
    for b in range(episode_len, T, episode_len):
        ax.axvline(b - 0.5, color="0.85", lw=0.8)
    styles = ["-", "--", "-.", ":"]
    n = len(curves)
    for i, (label, losses) in enumerate(curves.items()):  # the first widest: later, thinner lines stay visible on it
        ax.plot(np.arange(T), losses, styles[i % 4], label=label, color=head_color(i),
                lw=1.0 + 1.6 * (n - 1 - i) / max(n - 1, 1), alpha=0.9, zorder=2 + i)
    ax.set_xlabel("position in the stream (grey: a new episode starts)")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(title or "Loss along a stream longer than training")
    ax.legend(fontsize=8, loc="upper left")
    return ax


def sink_weight_bars(weights: dict, uniform: float, ax=None):
    """{scheme: (n_layers, h) weight on position 0} -> ax: one bar per head, the uniform share dashed."""
    weights = _validate.mapping(weights, "weights", "{scheme: (n_layers, h)}")
    weights = {k: finite_values(_validate.array(v, f"weights[{k!r}]", 2, "(n_layers, h)"), f"weights[{k!r}]")
               for k, v in weights.items()}
    if len({v.shape for v in weights.values()}) != 1:
        raise ValueError(f"weights hold shapes {[v.shape for v in weights.values()]}; give every scheme (n_layers, h)")
    uniform = _validate.number(uniform, "uniform")
    if not 0 < uniform <= 1:
        raise ValueError(f"uniform={uniform} is a share of the weight: pass 1 / (number of keys), in (0, 1]")
    ax = _ax(ax, (7.5, 3.0))
    names = list(weights)
    L, h = weights[names[0]].shape
    width = 0.8 / (L * h)
    for i, name in enumerate(names):
        w = weights[name].ravel()  # (L * h,) layer-major
        xs = i + (np.arange(L * h) - (L * h - 1) / 2) * width
        ax.bar(xs, w, width * 0.9, color=_color(name, i),
               edgecolor=["k" if k >= h else "none" for k in range(L * h)], linewidth=0.6)
    ax.axhline(uniform, color="k", ls="--", lw=1)
    ax.text(len(names) - 0.5, uniform, " uniform share", fontsize=8, va="bottom", ha="right")
    ax.set_xticks(range(len(names)), names)
    ax.set_ylabel("mean weight on token 0")
    ax.set_title(f"Weight on the first token, {L} layers x {h} heads per scheme (outlined: layer 2)")
    return ax


def paged_memory_bars(lengths, max_len: int, block_size: int, ax=None):
    """Requests' lengths -> ax: per request, the slots a contiguous cache reserves (max_len), those a
    paged cache holds (whole blocks) and those filled.

    >>> ax = paged_memory_bars([5, 30, 12], 64, 8); len(ax.patches)
    9
    """
    max_len, block_size = _validate.positive_int(max_len, "max_len"), _validate.positive_int(block_size, "block_size")
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size == 0 or not np.issubdtype(lengths.dtype, np.integer) or lengths.min() < 0 \
            or lengths.max() > max_len:
        raise ValueError(f"lengths must be a non-empty list of whole numbers 0 .. max_len={max_len}, one per "
                         f"request; got {lengths.tolist()!r}")
    ax = _ax(ax, (7.0, 3.0))
    paged = -(-lengths // block_size) * block_size  # whole blocks
    x = np.arange(len(lengths))
    ax.bar(x - 0.27, np.full(len(lengths), max_len), 0.26, color="0.75", label=f"contiguous: max_len = {max_len}")
    ax.bar(x, paged, 0.26, color=head_color(0), label=f"paged: blocks of {block_size}")
    ax.bar(x + 0.27, lengths, 0.26, color=head_color(2), label="tokens held")
    ax.set_xticks(x, [f"request {i}" for i in x])
    ax.set_ylabel("token slots per layer")
    contiguous, used = len(lengths) * max_len, int(paged.sum())
    ax.set_title(f"Slots reserved: contiguous {contiguous}, paged {used}, tokens {int(lengths.sum())}")
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    ax.set_ylim(0, max_len * 1.3)
    return ax


# ----------------------------------------------------------------------------- the views the sliders redraw
def length_view(model: tuple, eval_len: int, n: int = 64):
    """A trained (Config, Model) evaluated at ``eval_len`` tokens (the stretched task) -> Figure: its
    loss at each scored position, its training length dotted, the accuracy in the title."""
    if not isinstance(model, tuple) or len(model) != 2:
        raise ValueError(f"model must be a trained (Config, Model), got {type(model).__name__}; "
                         "pass long_context.load_scheme(name)")
    config, params = checked_model(*model)
    eval_len, n = _validate.positive_int(eval_len, "eval_len"), _validate.positive_int(n, "n")
    try:
        metrics, losses = lc.evaluate_at(params, config, eval_len, "stretched", seed=eval_len, n=n)
    except ValueError as e:  # the task's own limits (at least 6 tokens, a learned table's length): name eval_len
        raise ValueError(f"eval_len={eval_len} cannot be evaluated: {e}") from None
    fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
    ok = np.isfinite(losses)
    top = max(4.0, float(np.nanmax(losses)) * 1.1)
    first = int(np.flatnonzero(ok)[0])
    ax.axvspan(-0.5, first - 0.5, color="0.93", zorder=0)
    ax.text((first - 1) / 2, top * 0.5, "not scored:\nnoise and the first copy\n(nothing to predict yet)",
            ha="center", va="center", fontsize=8, color="0.35")
    ax.plot(np.flatnonzero(ok), losses[ok], "o-", color=_color(config.positions, 0), ms=3)
    ax.axvline(config.seq_len - 0.5, color="k", ls=":", lw=1)
    ax.set_xlim(-0.5, eval_len - 0.5)
    ax.set_ylim(0, top)
    ax.set_xlabel(f"position of the query (trained on {config.seq_len}: dotted line)")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(f"{config.positions}, trained on {config.seq_len}, read at {eval_len} tokens "
                 f"({eval_len / config.seq_len:.2g}x): accuracy {metrics.accuracy:.2f}, loss {metrics.loss:.2f}",
                 fontsize=10)
    return fig


def scaling_view(config, params, factor: float, n: int = 64):
    """The RoPE model read at factor x its training length with each scaling -> Figure: the turns
    of each pair (left) and the accuracy on the stretched task without retraining (right)."""
    config, params = rope_model(config, params)
    factor, n = _validate.number(factor, "factor"), _validate.positive_int(n, "n")
    if factor < 1:
        raise ValueError(f"factor={factor} < 1 would read the model at fewer tokens than it was trained on; "
                         "pass factor >= 1 (the slider: 1 .. 4)")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained", width_ratios=[1.4, 1])
    L, d_k = config.seq_len, config.d_model // config.h
    rope_turns_figure(d_k, factor, L, config.rope_base, ax=axes[0])
    T = int(round(factor * L))
    yarn = {"type": "yarn", "factor": factor, "original_max_position": L}
    variants = {"unscaled": None, "linear (PI)": {"type": "linear", "factor": factor},
                "NTK-aware": {"type": "ntk", "factor": factor}, "YaRN": yarn}
    accs = [lc.evaluate_at(params, config._replace(rope_scaling=sc if factor != 1 else None), T, seed=T, n=n)[0].accuracy
            for sc in variants.values()]
    axes[1].bar(range(4), accs, color=["k", head_color(3), head_color(2), head_color(0)])
    axes[1].set_xticks(range(4), list(variants), fontsize=8)
    axes[1].set_ylim(0, 1.05)
    axes[1].set_ylabel("accuracy, no retraining")
    axes[1].set_title(f"the RoPE model at {T} tokens")
    for i, a in enumerate(accs):
        axes[1].text(i, a, f"{a:.2f}", ha="center", va="bottom", fontsize=8)
    return fig


def window_view(config, params, batch, window: int, sinks: int):
    """A rolling cache of ``window`` tokens and ``sinks`` sinks -> Figure: its mask over the first
    24 positions (left) and the loss along the stream, against full attention (right)."""
    config, params = checked_model(config, params)
    batch = checked_batch(config, batch)
    window, sinks = _validate.positive_int(window, "window"), _validate.count(sinks, "sinks")
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4), layout="constrained", width_ratios=[1, 2.2])
    window_mask(RollingKVCache(1, 1, 2, window, sinks).next_mask(24), window, sinks, ax=axes[0])
    full, m_full = lc.stream_position_losses(params, config, batch)
    rolled, m_rolled = lc.stream_position_losses(params, config, batch, window, sinks)
    stream_loss_curves({f"full attention: accuracy {m_full.accuracy:.2f}": full,
                        f"window {window}, sinks {sinks}: accuracy {m_rolled.accuracy:.2f}": rolled},
                       config.seq_len, ax=axes[1])
    return fig
