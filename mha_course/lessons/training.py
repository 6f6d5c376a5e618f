"""Training the tiny transformer of notebook 08: cross-entropy, the backward pass, Adam, ``train``.

Trained with cross-entropy on the positions a task scores, and Adam. The forward pass is
``lessons.model.forward`` (the package's ``multi_head_attention``); the backward pass is
``mha_course.backward.mha_vjp``, layer by layer from ``forward``'s tape::

    from mha_course.lessons import model, training
    params, history = training.train(model.Config(task="induction"))    # (Model, History)
    print(training.evaluate(params, config, np.random.default_rng(1)))   # Metrics(loss, accuracy)

Pure functions over explicit NamedTuples (``AdamState``, ``History``); randomness comes only
from ``rng`` arguments or ``config.seed``.

Taught in 08_heads_that_learn.ipynb.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from .. import _validate
from ..attention import softmax
from ..backward import linear_backward
from ..block import layer_norm
from ..runtime import blas_on_one_thread
from .model import (
    LN_EPS,
    Batch,
    Config,
    Metrics,
    Model,
    check_config,
    compact_grads,
    forward,
    init_model,
    make_batch,
    norm,
    scored_metrics,
)

__all__ = ["AdamState", "History", "cross_entropy", "layer_norm_backward", "loss_and_grads", "backward",
           "adam_init", "adam_step", "metrics", "evaluate", "train"]

class AdamState(NamedTuple):
    """First and second moment estimates (trees shaped like the Model) and the step count."""
    m: Model
    v: Model
    step: int


class History(NamedTuple):
    """losses (steps,), and snapshots: the steps and each layer's weights on one probe batch."""
    losses: np.ndarray
    snapshot_steps: np.ndarray
    snapshot_weights: np.ndarray  # (n_snapshots, L, h, T, T) on probe sequence 0



def layer_norm_backward(x, grad_y, eps: float = LN_EPS) -> np.ndarray:
    """x (..., D), grad_y (..., D) -> grad_x (..., D), for y = layer_norm(x, eps) (no gamma, beta).

    grad_x = (g - mean(g) - y * mean(g * y)) / sqrt(var + eps), means over the last axis.

    >>> float(np.abs(layer_norm_backward(np.arange(4.0), np.ones(4))).max())  # shifts are invisible
    0.0
    """
    x, g = _validate.float_array(x, "x"), _validate.float_array(grad_y, "grad_y")
    y = layer_norm(x, eps)
    inv = 1 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    return inv * (g - g.mean(-1, keepdims=True) - y * (g * y).mean(-1, keepdims=True))


def cross_entropy(logits, batch: Batch) -> tuple[Metrics, np.ndarray]:
    """logits (B, T, V), Batch -> (Metrics over the scored positions, d loss / d logits (B, T, V)).

    The loss is ``model.scored_metrics``' (the one cross-entropy); its gradient is
    (softmax(logits) - onehot(target)) / n on the n scored positions, 0 elsewhere.
    """
    grad = softmax(logits)  # (B, T, V)
    np.put_along_axis(grad, batch.targets[..., None], np.take_along_axis(grad, batch.targets[..., None], -1) - 1,
                      -1)  # p - onehot
    grad *= batch.scored[..., None] / max(int(batch.scored.sum()), 1)
    return scored_metrics(logits, batch), grad


def loss_and_grads(params: Model, batch: Batch, config: Config, rng=None):
    """Model, Batch -> (Metrics, grads: a Model of gradients). ``rng`` draws the dropout masks."""
    metrics_, grads, _ = backward(params, batch, config, rng)
    return metrics_, grads


def backward(params: Model, batch: Batch, config: Config, rng=None):
    """Model, Batch -> (Metrics, grads (a Model), [d loss / d output of layer l, (B, T, D)] * L).

    ``forward`` with a tape, then each layer's pullback in reverse: the residual stream adds
    the gradient that comes through a layer to the one that skips it.
    """
    config = check_config(config)
    tape = []
    logits, _ = forward(params, batch.tokens, config, tape=tape, rng=rng)
    x = tape.pop()[0]                                          # the last residual stream (B, T, D)
    metrics_, g_logits = cross_entropy(logits, batch)
    g_x, g_unembed, _ = linear_backward(norm(x, config), params.unembed, g_logits)
    g_x = layer_norm_backward(x, g_x) if config.layer_norm else g_x
    g_layers, g_outputs = [], []
    for layer in reversed(range(config.n_layers)):
        x_in, pullback = tape[layer]
        g_outputs.insert(0, g_x)                               # d loss / d (this layer's output)
        g_in, g_p, _ = pullback(g_x)
        g_x = g_x + (layer_norm_backward(x_in, g_in) if config.layer_norm else g_in)
        g_layers.insert(0, compact_grads(g_p, config))
    B, T = batch.tokens.shape
    g_embed = np.zeros_like(params.embed)
    np.add.at(g_embed, batch.tokens, g_x)  # rows of embed used several times add up
    g_pos = None if params.pos is None else np.pad(g_x.sum(0), ((0, params.pos.shape[0] - T), (0, 0)))
    return metrics_, Model(g_embed, g_pos, tuple(g_layers), g_unembed), g_outputs


# ----------------------------------------------------------------------------- Adam
def _tree_map(f, *trees):
    """Apply f leaf by leaf to trees of the same structure (tuples, NamedTuples, arrays, None)."""
    first = trees[0]
    if first is None:
        return None
    if isinstance(first, tuple):
        mapped = [_tree_map(f, *parts) for parts in zip(*trees)]
        return type(first)(*mapped) if hasattr(first, "_fields") else tuple(mapped)
    return f(*trees)


def adam_init(params) -> AdamState:
    """params (any tree of arrays) -> AdamState with zero moments and step 0."""
    zeros = _tree_map(np.zeros_like, params)
    return AdamState(zeros, _tree_map(np.zeros_like, params), 0)


def adam_step(params, grads, state: AdamState, lr: float, b1: float = 0.9, b2: float = 0.999,
              eps: float = 1e-8):
    """params, grads, AdamState -> (new params, new AdamState): one step of Adam (Kingma & Ba).

    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;  bias-corrected m_hat = m / (1 - b1^t),
    v_hat = v / (1 - b2^t);  params -= lr m_hat / (sqrt(v_hat) + eps).

    >>> p, s = adam_step(np.array([1.0]), np.array([0.5]), adam_init(np.array([1.0])), lr=0.1)
    >>> p, s.step  # the first step moves by lr, whatever the gradient's size
    (array([0.9]), 1)
    """
    t = state.step + 1
    m = _tree_map(lambda m, g: b1 * m + (1 - b1) * g, state.m, grads)
    v = _tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state.v, grads)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    new = _tree_map(lambda p, m, v: p - lr * (m / c1) / (np.sqrt(v / c2) + eps), params, m, v)
    return new, AdamState(m, v, t)


# ----------------------------------------------------------------------------- training
def metrics(params: Model, batch: Batch, config: Config, ablate=(), patch=None) -> Metrics:
    """Model, Batch -> Metrics (loss, accuracy) on its scored positions, no dropout; ``ablate``, ``patch``
    as in forward."""
    logits, _ = forward(params, batch.tokens, config, ablate, patch=patch)
    return scored_metrics(logits, batch)


def evaluate(params: Model, config: Config, rng: np.random.Generator, n: int = 256) -> Metrics:
    """Model -> Metrics on ``n`` fresh sequences drawn with ``rng`` (no dropout)."""
    return metrics(params, make_batch(check_config(config), rng, n), config)


def _progress(steps: int, progress):
    if not progress:
        return None
    from tqdm.auto import tqdm  # imported only when a bar is wanted
    return tqdm(total=steps, desc="training", leave=False, mininterval=0.5)


def train(config: Config, callback: Optional[Callable] = None, progress: bool = False,
          snapshot_every: int = 0, params: Optional[Model] = None) -> tuple[Model, History]:
    """config -> (trained Model, History). Seeded by config.seed: the same config, the same numbers.

    ``callback(step, metrics, params)`` runs after every step (a live loss plot, early stop:
    return True to stop). ``progress`` shows a tqdm bar. ``snapshot_every`` > 0 keeps every
    layer's weights on probe sequence 0 every that many steps (for a training-step slider).

    >>> model, history = train(Config(task="previous_token", vocab=4, seq_len=4, d_model=4, h=1,
    ...                               n_layers=1, batch=4, steps=3))
    >>> history.losses.shape
    (3,)
    """
    config = check_config(config)
    rng = np.random.default_rng(config.seed)
    params = init_model(config, rng) if params is None else params
    probe = make_batch(config, np.random.default_rng(config.seed + 1), 1).tokens
    state, losses, snaps, bar = adam_init(params), [], [], _progress(config.steps, progress)
    # the tiny model's matmuls are small: one BLAS thread beats a threaded BLAS, the more so on a busy
    # machine (benchmarks/bench_threads.py); the package's pool still spreads its own jobs
    with blas_on_one_thread():
        for step in range(config.steps):
            if snapshot_every and step % snapshot_every == 0:
                snaps.append((step, np.stack(forward(params, probe, config)[1])[:, 0].astype(np.float32)))
            metrics, grads = loss_and_grads(params, make_batch(config, rng), config, rng)
            params, state = adam_step(params, grads, state, config.lr)
            losses.append(metrics.loss)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{metrics.loss:.3f}", refresh=False)
            if callback is not None and callback(step, metrics, params):
                break
    if bar is not None:
        bar.close()
    steps = np.array([s for s, _ in snaps], dtype=int)
    weights = np.stack([w for _, w in snaps]) if snaps else np.zeros((0, config.n_layers, config.h, 0, 0))
    return params, History(np.array(losses), steps, weights)
