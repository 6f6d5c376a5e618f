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
from .model import LN_EPS, compact_grads, forward, init_model, make_batch, norm, scored_metrics
from .model_config import Batch, Config, Metrics, Model, check_batch, check_config, check_logits, check_model

__all__ = ["AdamState", "History", "check_history", "cross_entropy", "layer_norm_backward", "loss_and_grads", "backward",
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


def check_history(history, config: Config, name: str = "history") -> History:
    """history, validated against ``config``: a History of finite losses (steps,), whole-number snapshot
    steps (n,) and snapshot weights (n, L, h, T, T); a ValueError names the fix."""
    config = check_config(config)
    if not isinstance(history, History):
        raise ValueError(f"{name} must be a training.History (losses, snapshot_steps, snapshot_weights), got "
                         f"{type(history).__name__}; pass the History that training.train returned, or None")
    losses = _validate.finite_array(history.losses, f"{name}.losses")
    steps = np.asarray(history.snapshot_steps)
    weights = _validate.finite_array(history.snapshot_weights, f"{name}.snapshot_weights")
    n, L, h = len(steps) if steps.ndim == 1 else -1, config.n_layers, config.h
    if losses.ndim != 1 or steps.ndim != 1 or steps.dtype.kind not in "iu" or weights.ndim != 5 \
            or weights.shape[:3] != (n, L, h) or weights.shape[3] != weights.shape[4]:
        raise ValueError(f"{name} has shapes {[np.shape(a) for a in history]} (snapshot_steps {steps.dtype}), "
                         f"expected (steps,), (n,) whole numbers and (n, {L}, {h}, T, T): the History of a "
                         "training run of this config")
    return History(losses, steps, weights)



def layer_norm_backward(x, grad_y, eps: float = LN_EPS) -> np.ndarray:
    """x (..., D), grad_y (..., D) -> grad_x (..., D), for y = layer_norm(x, eps) (no gamma, beta).

    grad_x = (g - mean(g) - y * mean(g * y)) / sqrt(var + eps), means over the last axis.

    >>> float(np.abs(layer_norm_backward(np.arange(4.0), np.ones(4))).max())  # shifts are invisible
    0.0
    """
    x, g = _validate.float_array(x, "x"), _validate.float_array(grad_y, "grad_y")
    if g.shape != x.shape:
        raise ValueError(f"grad_y has shape {g.shape} but x {x.shape}; give one gradient per entry of "
                         "layer_norm(x): the same shape as x")
    eps = _validate.number(eps, "eps", 0, low_open=True)
    y = layer_norm(x, eps)
    inv = 1 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    return inv * (g - g.mean(-1, keepdims=True) - y * (g * y).mean(-1, keepdims=True))


def cross_entropy(logits, batch: Batch) -> tuple[Metrics, np.ndarray]:
    """logits (B, T, V), Batch -> (Metrics over the scored positions, d loss / d logits (B, T, V)).

    The loss is ``model.scored_metrics``' (the one cross-entropy); its gradient is
    (softmax(logits) - onehot(target)) / n on the n scored positions, 0 elsewhere.
    """
    logits, batch = check_logits(logits, batch)
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
    params, batch = check_model(params, config), check_batch(batch, config.vocab)
    rng = _validate.generator(rng, optional=True)
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


def _check_tree(tree, name: str, like=None, like_name: str = "params"):
    """``tree`` (tuples and NamedTuples of finite float arrays, None leaves inside) checked, and of the
    structure and shapes of ``like`` when given; returned with every leaf a checked float array."""
    fix = (f"{name} must have {like_name}'s structure and shapes" if like is not None else
           f"{name} must be a float array or a tree of them (a Model, a tuple), e.g. train.init_model(config)")

    def refuse(t, where, want):
        got = f"an array {t.dtype} {t.shape}" if isinstance(t, np.ndarray) else type(t).__name__
        return ValueError(f"{where} is {got}, expected {want}; {fix}")

    def walk(t, ref, where):
        if isinstance(t, tuple) and (like is None or isinstance(ref, tuple)):
            if like is not None and (type(t) is not type(ref) or len(t) != len(ref)):
                raise refuse(t, where, f"a {type(ref).__name__} of {len(ref)}")
            names = getattr(t, "_fields", None) or [f"[{i}]" for i in range(len(t))]
            refs = ref if like is not None else [None] * len(t)
            parts = [walk(a, r, f"{where}.{n}" if n[0] != "[" else f"{where}{n}") for a, r, n in zip(t, refs, names)]
            return type(t)(*parts) if hasattr(t, "_fields") else tuple(parts)
        if isinstance(ref, tuple):
            raise refuse(t, where, f"a {type(ref).__name__} of {len(ref)}")
        if like is not None and ref is None:
            if t is not None:
                raise refuse(t, where, "None")
            return None
        if t is None and like is None and where != name:
            return None
        want = f"a float array of shape {ref.shape}" if isinstance(ref, np.ndarray) else "a float array"
        if not isinstance(t, np.ndarray) or t.dtype.kind != "f" or (isinstance(ref, np.ndarray) and t.shape != ref.shape):
            raise refuse(t, where, want)
        return _validate.finite(t, where)
    return walk(tree, like, name)


def _squares_fit(grads) -> None:
    """Adam squares every gradient: refuse one whose square would be inf (v = inf, silently frozen steps)."""
    leaves = []
    _tree_map(lambda g: leaves.append((float(np.abs(g).max(initial=0.0)), g.dtype)), grads)
    for big, dtype in leaves:
        if big > np.sqrt(np.finfo(dtype).max):
            raise ValueError(f"grads hold {big:.3g}, whose square overflows {dtype} (Adam keeps g**2): the training "
                             "has diverged; lower lr, or clip the gradients first")


def adam_init(params) -> AdamState:
    """params (any tree of float arrays: a Model, a tuple, an array) -> AdamState with zero moments, step 0."""
    params = _check_tree(params, "params")
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
    params = _check_tree(params, "params")
    grads = _check_tree(grads, "grads", params)
    _squares_fit(grads)
    if not isinstance(state, AdamState):
        raise ValueError(f"state must be an AdamState, got {type(state).__name__}; start with "
                         "state = training.adam_init(params), then pass the state each step returns")
    state = AdamState(_check_tree(state.m, "state.m", params), _check_tree(state.v, "state.v", params),
                      _validate.count(state.step, "state.step"))
    lr = _validate.number(lr, "lr", 0, low_open=True)
    b1, b2 = (_validate.number(b, n, 0, 1, high_open=True) for b, n in ((b1, "b1"), (b2, "b2")))
    eps = _validate.number(eps, "eps", 0, low_open=True)
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
    config = check_config(config)
    params, batch = check_model(params, config), check_batch(batch, config.vocab)
    logits, _ = forward(params, batch.tokens, config, ablate, patch=patch)
    return scored_metrics(logits, batch)


def evaluate(params: Model, config: Config, rng: np.random.Generator, n: int = 256) -> Metrics:
    """Model -> Metrics on ``n`` fresh sequences drawn with ``rng`` (no dropout)."""
    config = check_config(config)
    params, rng, n = check_model(params, config), _validate.generator(rng), _validate.positive_int(n, "n")
    return metrics(params, make_batch(config, rng, n), config)


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
    if callback is not None and not callable(callback):
        raise ValueError(f"callback={callback!r} must be a function callback(step, metrics, params), or None")
    progress, snapshot_every = _validate.flag(progress, "progress"), _validate.count(snapshot_every, "snapshot_every")
    rng = np.random.default_rng(config.seed)
    params = init_model(config, rng) if params is None else check_model(params, config)
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
