"""Views of notebook 08: loss curves, heads before and after training, the h sweep, ablations.

Each helper takes ``ax=None`` (or ``axes``) and returns what it drew on; weights use the
course's one colour map (``plots.WEIGHTS_CMAP``, via ``plots.attention_heatmap``); keys a
causal mask hides are grey. Taught in 08_heads_that_learn.ipynb.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .. import _validate
from ..lessons.training import History
from .attention import attention_heatmap
from .style import finite_values, finite_vector, head_color, log_values, new_ax

__all__ = ["smooth", "loss_curves", "layer_weights", "token_labels", "model_heatmaps", "before_after_figure", "snapshot_figure", "h_sweep_figure",
           "ablation_figure", "LiveLossPlot"]


def smooth(values, window: int) -> np.ndarray:
    """values (steps,) -> (steps,): the running mean over ``window`` steps (shorter at the start).

    >>> smooth([1.0, 3.0, 5.0, 7.0], 2)
    array([1., 2., 4., 6.])
    """
    v = _validate.float_array(values, "values").astype(float)
    if v.ndim != 1:
        raise ValueError(f"values must be a 1-D array of shape (steps,), got shape {v.shape}")
    finite_values(v, "values")  # a NaN would spread over the next ``window`` means
    window = _validate.positive_int(window, "window")
    c = np.cumsum(np.insert(v, 0, 0.0))
    n = np.minimum(np.arange(1, len(v) + 1), window)
    return (c[1:] - c[np.arange(1, len(v) + 1) - n]) / n


def loss_curves(curves: dict, ax=None, window: int = 10, title=None):
    """{label: losses (steps,)} -> ax: each curve smoothed over ``window`` steps, loss on a log axis."""
    _validate.instance(curves, dict, "curves", "pass {label: losses}, e.g. {'loss': history.losses}")
    if not curves:
        raise ValueError("curves is empty; pass at least one {label: losses}")
    smoothed = {}
    for label, losses in curves.items():
        smoothed[label] = smooth(log_values(losses, f"curves[{label!r}]"), window)  # drawn on a log axis
    ax = new_ax(ax, (5, 3.2))
    for i, (label, losses) in enumerate(smoothed.items()):
        ax.plot(losses, label=label, color=head_color(i))
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("cross-entropy (nats)")
    if len(curves) > 1:
        ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def layer_weights(weights, name: str = "weights") -> list[np.ndarray]:
    """weights [(h, T, T)] * L of one sequence (a list or an (L, h, T, T) array) -> L checked float arrays.

    >>> [w.shape for w in layer_weights([np.full((2, 3, 3), 1 / 3)] * 2)]
    [(2, 3, 3), (2, 3, 3)]
    """
    if isinstance(weights, (str, bytes)) or not isinstance(weights, (list, tuple, np.ndarray)) or len(weights) == 0:
        raise ValueError(f"{name} must be a non-empty list of (h, T, T) arrays, one per layer, got "
                         f"{type(weights).__name__}; pass e.g. [w[0] for w in weights_by_layer]")
    layers = [finite_values(w, f"{name}[{i}]") for i, w in enumerate(weights)]  # the causal mask is drawn here
    first = layers[0].shape
    if len(first) != 3 or first[1] != first[2] or 0 in first or any(w.shape != first for w in layers):
        raise ValueError(f"{name} must hold one (h, T, T) array per layer, all of one shape, got shapes "
                         f"{[w.shape for w in layers]}; pick one sequence, e.g. [w[0] for w in weights_by_layer]")
    return layers


def token_labels(tokens, T: int, vocab=None) -> list[str]:
    """tokens (T,) whole-number ids >= 0 (below ``vocab`` when given) -> their labels ['3', '0', ...].

    >>> token_labels([3, 0], 2, vocab=4)
    ['3', '0']
    """
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, (list, tuple, np.ndarray)):
        raise ValueError(f"tokens must be the (T,) token ids of the sequence, got {type(tokens).__name__}; "
                         "pass e.g. batch.tokens[0]")
    vocab = None if vocab is None else _validate.positive_int(vocab, "vocab")  # None: any id >= 0 labels a position
    ids = _validate.token_ids(tokens, vocab)
    if ids.shape != (T,):
        raise ValueError(f"tokens has shape {ids.shape} but the weights are for T={T} positions; "
                         "give the ids of that one sequence, e.g. batch.tokens[0]")
    return [str(int(t)) for t in ids]


def model_heatmaps(weights, tokens, axes=None, title: str = "", copy_start=None, vocab=None):
    """weights [(h, T, T)] * L of one sequence, tokens (T,) -> axes (L, h): one heatmap per head.

    Keys in the query's future (the causal mask) are grey. Tokens label the left column's
    queries and the bottom row's keys only (one label per position is plenty for the grid).
    ``copy_start`` (a position) draws where the second copy of an induction sequence starts:
    a line under the row of its first query and beside the column of its first key.
    ``vocab`` (the model's): when given, every id must be below it.
    """
    weights = layer_weights(weights)
    L, (h, T, _) = len(weights), weights[0].shape
    labels = token_labels(tokens, T, vocab)
    if copy_start is not None:
        _validate.index(copy_start, T, "copy_start", "positions")
    if axes is None:
        _, axes = _grid(L, h, 3.0, 2.9)
    future = np.triu(np.ones((len(labels),) * 2, dtype=bool), k=1)
    for layer, w in enumerate(weights):
        for head in range(h):
            ax = axes[layer][head]
            attention_heatmap(np.where(future, np.nan, w[head]), labels, labels, ax=ax, colorbar=False,
                              annotate=False)
            ax.set_title(f"{title}layer {layer + 1}, head {head}", color=head_color(head), fontsize=9)
            ax.tick_params(labelsize=7, length=2, pad=1)
            if copy_start is not None:
                ax.axhline(copy_start - 0.5, color=COPY_COLOR, lw=1.2)
                ax.axvline(copy_start - 0.5, color=COPY_COLOR, lw=1.2, ls="--")
            _outer_labels_only(ax, layer == L - 1, head == 0)
    return axes


COPY_COLOR = head_color(3)  # the line that marks where the second copy starts


def _grid(rows: int, cols: int, width: float, height: float):
    """A figure of rows x cols axes with fixed margins (a constrained layout of many ticks is slow)."""
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    fig.subplots_adjust(left=0.06, right=0.9, bottom=0.1, top=0.9, wspace=0.25, hspace=0.35)
    return fig, axes


def _outer_labels_only(ax, bottom: bool, left: bool) -> None:
    if not bottom:
        ax.set_xticks([])
        ax.set_xlabel("")
    if not left:
        ax.set_yticks([])
        ax.set_ylabel("")


def before_after_figure(before, after, tokens, copy_start=None, vocab=None):
    """weights before and after training ([(h, T, T)] * L each) -> Figure: L rows, 2h columns.

    ``copy_start``: the position where the repeated part starts, marked in red on every heatmap.
    ``vocab`` (the model's): when given, every id must be below it.
    """
    before, after = layer_weights(before, "before"), layer_weights(after, "after")
    if len(after) != len(before) or after[0].shape != before[0].shape:
        raise ValueError(f"after has {len(after)} layers of {after[0].shape} but before has {len(before)} of "
                         f"{before[0].shape}; give the same model's weights on the same sequence")
    L, (h, T, _) = len(before), before[0].shape
    token_labels(tokens, T, vocab)
    if copy_start is not None:
        _validate.index(copy_start, T, "copy_start", "positions")
    fig, axes = _grid(L, 2 * h, 3.3, 3.3)
    model_heatmaps(before, tokens, axes=[row[:h] for row in axes], title="before: ", copy_start=copy_start,
                   vocab=vocab)
    model_heatmaps(after, tokens, axes=[row[h:] for row in axes], title="after: ", copy_start=copy_start,
                   vocab=vocab)
    fig.colorbar(axes[0][-1].images[0], ax=axes[:, -1].tolist(), fraction=0.05, label="weight")
    if copy_start is not None:
        fig.text(0.5, 0.01, f"red lines: the second copy starts at position {copy_start} (solid: its first query, "
                 "dashed: its first key)", ha="center", color=COPY_COLOR, fontsize=9)
    return fig


def snapshot_figure(history, tokens, step: int, vocab=None):
    """History with snapshots, tokens (T,), a snapshot step -> Figure of every head at that step.

    ``vocab`` (the model's): when given, every id must be below it.
    """
    _validate.instance(history, History, "history", "pass the History that training.train(...) returned")
    steps = [int(s) for s in history.snapshot_steps]
    if not steps:
        raise ValueError("history has no snapshots; train with snapshot_every > 0")
    if isinstance(step, (bool, np.bool_)) or step not in steps:
        raise ValueError(f"no snapshot at step {step!r}; snapshots were kept at steps {steps}")
    w = history.snapshot_weights[steps.index(step)]  # (L, h, T, T)
    token_labels(tokens, w.shape[-1], vocab)
    fig, axes = _grid(w.shape[0], w.shape[1], 2.8, 2.7)
    model_heatmaps(list(w), tokens, axes=axes, vocab=vocab)
    fig.colorbar(axes[0][-1].images[0], ax=axes[:, -1].tolist(), fraction=0.05, label="weight")
    fig.suptitle(f"attention on one sequence at training step {step}")
    return fig


def h_sweep_figure(results: dict, h=None):
    """run_experiments' arrays, the h to highlight -> Figure: loss curves by h, final loss against h."""
    keys = ("h_sweep_hs", "h_sweep_losses", "h_sweep_final")
    if not hasattr(results, "keys") or not set(keys) <= set(results.keys()):
        raise ValueError(f"results must hold {', '.join(keys)} (as checkpoints.load_experiments() returns), "
                         f"got {type(results).__name__}" + (f" with {sorted(results.keys())}" if hasattr(results, "keys")
                                                             else ""))
    hs, curves, final = results["h_sweep_hs"], results["h_sweep_losses"], results["h_sweep_final"]
    if h is not None:
        _validate.choice(h, [int(v) for v in hs], "h")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2), layout="constrained")
    styles = ("-", "--", "-.", ":")
    for i, hh in enumerate(hs):  # every h its own colour and dash; the chosen one drawn thick and on top
        chosen = h is None or hh == h
        left.plot(smooth(curves[:, i].mean(0), 20), color=head_color(i), ls=styles[i % len(styles)],
                  lw=2.4 if chosen and h is not None else 1.2, alpha=1.0 if chosen else 0.75,
                  label=f"h={hh}", zorder=3 if chosen else 2)
    left.set(yscale="log", xlabel="training step", ylabel="training loss (nats)",
             title="d_model = 32, mean of the seeds")
    left.legend(fontsize=7, ncol=2)
    right.plot(hs, final.mean(0), "o-", color="#555555")
    for s in range(final.shape[0]):
        right.plot(hs, final[s], ".", color="#999999")
    if h is not None:
        right.plot([h], [final.mean(0)[list(hs).index(h)]], "o", color=head_color(3), ms=10)
    right.set(xscale="log", yscale="log", xlabel="h (d_k = 32 / h)", ylabel="held-out loss after the budget",
              title="one budget for every h")
    right.set_xticks(hs, [str(v) for v in hs])
    return fig


def ablation_figure(labels, loss_increase, sharpness, ax=None):
    """(n,) labels, loss increases (nats), mean max weights -> ax: a scatter of importance vs looks."""
    loss_increase = finite_vector(loss_increase, "loss_increase")
    sharpness = finite_vector(sharpness, "sharpness", loss_increase.size)
    if not isinstance(labels, (list, tuple, np.ndarray)) or len(labels) != loss_increase.size:
        raise ValueError(f"labels must hold one label per head ({loss_increase.size}), got {labels!r:.80}")
    ax = new_ax(ax, (5, 3.4))
    ax.scatter(sharpness, loss_increase, color=head_color(0), zorder=3)
    for x, y, label in zip(sharpness, loss_increase, labels):
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=8)
    ax.set(xlabel="how sharp its weights look (mean of each query's largest weight)",
           ylabel="loss increase when the head is zeroed (nats)")
    ax.axhline(0, color="#999999", lw=0.8)
    ax.margins(x=0.2, y=0.1)
    return ax


class LiveLossPlot:
    """A training callback ``(step, metrics, params)`` that redraws the loss curve every ``every`` steps.

    In a notebook the figure is shown once and updated in place (``IPython.display`` handle);
    outside one, nothing is drawn. ``losses`` keeps every step's loss.
    """

    def __init__(self, every: int = 25, title: str = "training loss"):
        every = _validate.positive_int(every, "every")
        self.every, self.title, self.losses, self._handle = every, title, [], None

    def figure(self):
        fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
        loss_curves({"loss": self.losses}, ax=ax, title=f"{self.title} (step {len(self.losses)})")
        return fig

    def __call__(self, step, metrics, params=None) -> bool:
        self.losses.append(metrics.loss)
        if step % self.every == 0:
            from IPython.display import display
            fig = self.figure()
            if self._handle is None:
                self._handle = display(fig, display_id=True)
            else:
                self._handle.update(fig)
            plt.close(fig)
        return False
