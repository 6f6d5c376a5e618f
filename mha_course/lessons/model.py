"""A tiny attention-only transformer, trained in numpy: heads that learn (numpy only).

Shapes: ``B`` batch, ``T`` positions, ``V`` vocabulary, ``D = d_model``, ``h`` heads,
``d_k = D // h``, ``L`` layers. The model, for tokens (B, T):

    x = embed[tokens] (+ pos[:T])                      (B, T, D)   learned positions, RoPE, or none
    x = x + multi_head_attention(norm(x), layer_l, h, causal mask [, rope_base])   for l = 1 .. L
    logits = norm(x) @ unembed                         (B, T, V)   norm: layer_norm or nothing

trained with cross-entropy on the positions a task scores, and Adam. The forward pass is the
package's ``multi_head_attention``; the backward pass is ``mha_course.backward.mha_vjp``.

Positions (``Config.positions``): ``"learned"`` (a table added to the embeddings),
``"sinusoidal"`` (Vaswani et al.'s fixed table, added), ``"rope"`` (``multi_head_attention(...,
rope_base=config.rope_base, rope_scaling=config.rope_scaling)``), ``"alibi"`` (Press et al.'s
distance penalty, ``bias=positions.alibi_bias(h, T)``) or ``"none"`` (only the causal mask).

Tasks (``make_batch``): ``"previous_token"`` (predict the token one position back: one layer
with positions learns it, without positions it stays near chance) and ``"induction"``
([noise][A B C ...][A B C ...] with a random length; predict the second copy: a layer-1
previous-token head and a layer-2 induction head, so it needs two layers).

Using a trained model (the shipped checkpoints, or your own)::

    from mha_course.lessons import model as train
    config, params, history = train.load_checkpoint(train.checkpoint_path("induction"))
    batch = train.make_batch(config, np.random.default_rng(0))        # Batch(tokens, targets, scored)
    logits, weights = train.forward(params, batch.tokens, config)      # (B, T, V), [(B, h, T, T)] * L
    print(train.evaluate(params, config, np.random.default_rng(1)))    # Metrics(loss, accuracy)
    train.metrics(params, batch, config, ablate=[(1, 0)])              # the same batch, one head cut
    experiments = train.load_experiments()      # the h sweep, dropout and scale runs of notebook 08
    lp = train.layer_params(params, config, 1)  # the MHAParams layer 1 runs: W_k/W_v expanded for
    # h_kv < h and W_q multiplied by sqrt(d_k) when config.scale is False
    train.embed(params, tokens, config)          # the residual stream's input (B, T, D)
    train.ablate_head(params, config, layer=1, head=0)  # same params, head 0 of layer 1 silenced

Everything is a pure function over explicit NamedTuples (``Config``, ``Model``, ``AdamState``);
randomness comes only from ``rng`` arguments or ``config.seed``.

Taught in 08_heads_that_learn.ipynb.
"""
from __future__ import annotations

import io
import json
import math
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import numpy as np

from .. import _validate
from ..backward import linear_backward, mha_vjp
from ..block import layer_norm
from ..fast import blas_on_one_thread
from ..gqa import GQAParams, cached_causal_mask, grouped_query_attention
from ..heads import combine_heads, split_heads
from ..mha import MHAParams, linear, multi_head_attention, rope_heads, trace
from ..positions import alibi_bias, rope_attention_factor, rope_inv_freq, sinusoidal_positions

__all__ = ["Config", "Model", "Batch", "Metrics", "AdamState", "History", "TASKS", "POSITIONS",
           "make_batch", "init_model", "embed", "layer_params", "cached_layer_params", "forward", "backward",
           "loss_and_grads", "metrics",
           "adam_init", "adam_step", "train", "evaluate", "ablate_head", "layer_norm_backward",
           "save_checkpoint", "load_checkpoint", "checkpoint_path", "make_checkpoint", "CHECKPOINT_CONFIGS",
           "CHECKPOINT_PARENTS", "LONG_CONTEXT", "LONG_SCALINGS", "LONG_FINE_TUNE",
           "train_checkpoint", "checkpoint_arrays", "checkpoint_bytes", "npz_bytes", "read_npz", "MAX_NPZ_BYTES",
           "induction_score", "run_experiments", "save_experiments",
           "load_experiments"]

TASKS = ("previous_token", "induction")
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")
_LN_EPS = 1e-5


class Config(NamedTuple):
    """Every choice of one training run; ``h_kv`` (None = h) shares key/value heads (GQA/MQA)."""
    task: str = "induction"
    vocab: int = 16
    seq_len: int = 16
    d_model: int = 32
    h: int = 2
    h_kv: Optional[int] = None
    n_layers: int = 2
    positions: str = "learned"
    rope_base: float = 10000.0
    layer_norm: bool = False
    scale: bool = True
    dropout: float = 0.0
    batch: int = 32
    steps: int = 1000
    lr: float = 3e-3
    seed: int = 0
    rope_scaling: Optional[dict] = None  # positions="rope" only: see positions.rope_inv_freq (notebook 13)


class Model(NamedTuple):
    """embed (V, D), pos (T, D) or None, layers (one MHAParams per layer; W_k, W_v, b_k, b_v
    have h_kv * d_k columns), unembed (D, V)."""
    embed: np.ndarray
    pos: Optional[np.ndarray]
    layers: tuple
    unembed: np.ndarray


class Batch(NamedTuple):
    """tokens (B, T) ints, targets (B, T) ints, scored (B, T) bool: the positions the loss counts."""
    tokens: np.ndarray
    targets: np.ndarray
    scored: np.ndarray


class Metrics(NamedTuple):
    """Mean cross-entropy (nats) and accuracy over the scored positions."""
    loss: float
    accuracy: float


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


# ----------------------------------------------------------------------------- config
def _check_config(config) -> Config:
    """config, validated, with h_kv filled in (None -> h); a ValueError names what to change."""
    if not isinstance(config, Config):
        raise ValueError(f"config must be a train.Config, got {type(config).__name__}; "
                         "use train.Config(task='induction')")
    for name in ("vocab", "seq_len", "d_model", "h", "n_layers", "batch", "steps"):
        _validate.positive_int(getattr(config, name), name)
    if config.task not in TASKS or config.positions not in POSITIONS:
        raise ValueError(f"task={config.task!r}, positions={config.positions!r}: "
                         f"valid tasks {TASKS}, valid positions {POSITIONS}")
    h = _validate.heads(config.d_model, config.h)
    h_kv = h if config.h_kv is None else _validate.positive_int(config.h_kv, "h_kv")
    if h % h_kv:
        raise ValueError(f"h={h} is not divisible by h_kv={h_kv}; valid h_kv: "
                         + ", ".join(map(str, _validate.divisors(h))))
    _check_sizes(config)
    return config._replace(h_kv=h_kv)


def _check_sizes(config: Config) -> None:
    d_k = config.d_model // config.h
    if config.positions == "rope" and d_k % 2:
        raise ValueError(f"positions='rope' needs an even d_k, but d_model={config.d_model} with "
                         f"h={config.h} gives d_k={d_k}; choose h so that d_k is even")
    if config.task == "induction" and (config.seq_len < 6 or config.vocab < config.seq_len // 2):
        raise ValueError(f"induction needs seq_len >= 6 and vocab >= seq_len // 2 (distinct tokens in "
                         f"a copy); got seq_len={config.seq_len}, vocab={config.vocab}")
    if not 0 <= config.dropout < 1:
        raise ValueError(f"dropout={config.dropout} must be in [0, 1); 0 turns it off")
    if config.rope_scaling is not None:  # notebook 13: checked by the function that uses it
        if config.positions != "rope":
            raise ValueError(f"rope_scaling={config.rope_scaling!r} needs positions='rope', got "
                             f"positions={config.positions!r}; set rope_scaling=None")
        rope_inv_freq(d_k, config.rope_base, config.rope_scaling)


# ----------------------------------------------------------------------------- tasks
def make_batch(config: Config, rng: np.random.Generator, batch: Optional[int] = None) -> Batch:
    """config, rng -> Batch of ``batch`` (default config.batch) sequences of length seq_len.

    previous_token: random tokens, target[t] = token[t - 1], scored for t >= 1.
    induction: [noise][A (n)][A (n)], n random in seq_len/4 .. seq_len/2, A distinct tokens;
    target[t] = token[t + 1], scored on the second copy (where the next token has been seen).

    >>> b = make_batch(Config(task="previous_token", vocab=5, seq_len=4), np.random.default_rng(0), 1)
    >>> bool((b.targets[0, 1:] == b.tokens[0, :-1]).all()), b.scored[0].tolist()
    (True, [False, True, True, True])
    """
    config = _check_config(config)
    B, T, V = batch or config.batch, config.seq_len, config.vocab
    tokens = rng.integers(0, V, size=(B, T))
    if config.task == "previous_token":
        targets = np.roll(tokens, 1, axis=1)
        scored = np.broadcast_to(np.arange(T) >= 1, (B, T)).copy()
        return Batch(tokens, targets, scored)
    n = rng.integers(max(2, T // 4), T // 2 + 1, size=B)  # (B,) length of the repeated part
    distinct = np.argsort(rng.random((B, V)), axis=1)  # (B, V): a random permutation per row
    t = np.arange(T)
    start = T - 2 * n[:, None]  # (B, 1): where the first copy begins
    inside = t >= start
    idx = np.where(inside, (t - start) % n[:, None], 0)  # (B, T): index into A
    tokens = np.where(inside, np.take_along_axis(distinct, idx, axis=1), tokens)
    targets = np.concatenate([tokens[:, 1:], tokens[:, :1]], axis=1)
    scored = (t >= T - n[:, None]) & (t < T - 1)
    return Batch(tokens, targets, scored)


# ----------------------------------------------------------------------------- the model
def init_model(config: Config, rng: Optional[np.random.Generator] = None) -> Model:
    """config [, rng] -> Model; embeddings ~ N(0, 1), matrices ~ N(0, 1/D); rng defaults to config.seed.

    >>> m = init_model(Config(vocab=10, d_model=8, h=2, h_kv=1))
    >>> m.embed.shape, m.layers[0].W_k.shape, m.unembed.shape
    ((10, 8), (8, 4), (8, 10))
    """
    config = _check_config(config)
    rng = np.random.default_rng(config.seed) if rng is None else rng
    V, D, T = config.vocab, config.d_model, config.seq_len
    kv = D // config.h * config.h_kv
    embedding = rng.normal(size=(V, D))
    pos = rng.normal(size=(T, D)) if config.positions == "learned" else None
    sizes = ((D, D), (D, kv), (D, kv), (D, D))
    layers = tuple(MHAParams(*(rng.normal(0, 1 / math.sqrt(D), size=s) for s in sizes))
                   for _ in range(config.n_layers))
    return Model(embedding, pos, layers, rng.normal(0, 1 / math.sqrt(D), size=(D, V)))


def embed(params: Model, tokens, config: Config, start: int = 0) -> np.ndarray:
    """tokens (B, T) ints at positions start .. start + T - 1 -> x (B, T, D): token embeddings
    (+ learned or sinusoidal positions)."""
    tokens = np.asarray(tokens)
    x = params.embed[tokens]  # (B, T) -> (B, T, D)
    if config.positions == "sinusoidal":
        return x + sinusoidal_positions(start + tokens.shape[1], config.d_model)[start:]  # (B, T, D) + (T, D)
    if params.pos is None:
        return x
    if start + tokens.shape[1] > params.pos.shape[0]:
        raise ValueError(f"the model has learned positions for {params.pos.shape[0]} tokens; {start} cached + "
                         f"{tokens.shape[1]} new = {start + tokens.shape[1]} is too long; keep the sequence "
                         f"<= {params.pos.shape[0]} tokens")
    return x + params.pos[start:start + tokens.shape[1]]


def layer_params(params: Model, config: Config, layer: int) -> MHAParams:
    """Model, config, layer -> the (D, D) MHAParams that multi_head_attention runs for that layer.

    K/V heads are repeated h // h_kv times (query head i reads key/value head i // g); with
    ``config.scale`` False, W_q is multiplied by sqrt(d_k), which cancels the 1/sqrt(d_k).
    """
    p, h, h_kv = params.layers[layer], config.h, config.h_kv or config.h
    g, d_k = h // h_kv, config.d_model // h
    q_factor = _q_factor(config)

    def repeat(a):  # (..., h_kv * d_k) -> (..., h * d_k)
        if a is None or g == 1:
            return a
        return np.repeat(a.reshape(*a.shape[:-1], h_kv, d_k), g, axis=-2).reshape(*a.shape[:-1], -1)
    scale = (lambda a: None if a is None else a * q_factor)
    return MHAParams(scale(p.W_q), repeat(p.W_k), repeat(p.W_v), p.W_o, scale(p.b_q), repeat(p.b_k),
                     repeat(p.b_v), p.b_o)


def _compact_grads(g: MHAParams, config: Config) -> MHAParams:
    """The gradient of layer_params' (D, D) output, taken back to the stored parameters."""
    h, h_kv, d_k = config.h, config.h_kv or config.h, config.d_model // config.h
    q_factor = _q_factor(config)

    def pool(a):  # (..., h * d_k) -> (..., h_kv * d_k): the repeated copies' gradients add up
        return None if a is None else a.reshape(*a.shape[:-1], h_kv, h // h_kv, d_k).sum(-2).reshape(
            *a.shape[:-1], -1)
    scale = (lambda a: None if a is None else a * q_factor)
    return MHAParams(scale(g.W_q), pool(g.W_k), pool(g.W_v), g.W_o, scale(g.b_q), pool(g.b_k),
                     pool(g.b_v), g.b_o)


def _q_factor(config: Config) -> float:
    """What W_q is multiplied by: sqrt(d_k) without the scale, times YaRN's factor squared (the
    factor multiplies queries and keys, so the scores by its square; rotations commute with it)."""
    factor = 1.0 if config.scale else math.sqrt(config.d_model // config.h)
    return factor * rope_attention_factor(config.rope_scaling) ** 2


def _position_args(config: Config, T: int, S: int) -> dict:
    """The position keywords of every attention call of the model: RoPE's base and scaling, or
    ALiBi's bias (h, T, S) for T queries that are the last of S positions."""
    bias = alibi_bias(config.h, T, S) if config.positions == "alibi" else None
    return {"rope_base": _rope_base(config), "rope_scaling": config.rope_scaling, "bias": bias}


def _rope_base(config: Config):
    """RoPE's base when the config asks for rotary positions, else None (no rotation)."""
    return config.rope_base if config.positions == "rope" else None


def _norm(x: np.ndarray, config: Config) -> np.ndarray:
    return layer_norm(x, _LN_EPS) if config.layer_norm else x


def layer_norm_backward(x, grad_y, eps: float = _LN_EPS) -> np.ndarray:
    """x (..., D), grad_y (..., D) -> grad_x (..., D), for y = layer_norm(x, eps) (no gamma, beta).

    grad_x = (g - mean(g) - y * mean(g * y)) / sqrt(var + eps), means over the last axis.

    >>> float(np.abs(layer_norm_backward(np.arange(4.0), np.ones(4))).max())  # shifts are invisible
    0.0
    """
    x, g = _validate.float_array(x, "x"), _validate.float_array(grad_y, "grad_y")
    y = layer_norm(x, eps)
    inv = 1 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)  # (..., 1)
    return inv * (g - g.mean(-1, keepdims=True) - y * (g * y).mean(-1, keepdims=True))


def cached_layer_params(params: Model, config: Config, layer: int) -> GQAParams:
    """Model, config, layer -> GQAParams for ``grouped_query_attention`` with a KV cache: the W_q that
    the model runs (``layer_params`` folds in the scale choice) and the stored h_kv-head W_k, W_v."""
    run, p = layer_params(params, config, layer), params.layers[layer]
    return GQAParams(run.W_q, p.W_k, p.W_v, p.W_o, run.b_q, p.b_k, p.b_v, p.b_o)


def forward(params: Model, tokens, config: Config, ablate=(), *, core=None, caches=None, traces=None,
            tape=None, rng=None, patch=None) -> tuple[np.ndarray, list]:
    """tokens (B, T) -> logits (B, T, V), [weights (B, h, T, S) for each layer].

    The one forward pass of the tiny model; training, decoding and the notebooks' experiments all run it.
    ``ablate``: (layer, head) pairs whose head output is zeroed (see ``ablate_head``).
    ``core``: fn(Q, K, V, mask) -> out (B, h, T, d_k) in place of softmax attention (e.g. linear
    attention, notebook 10); its layers' weights are None.
    ``caches``: one KVCache per layer, **appended in place**: the tokens follow the caches[0].length
    already cached (decoding, notebook 09). ``traces``: a list that receives each layer's Trace.
    ``tape``: a list that receives, per layer, (its input, its pullback), then (the last residual
    stream, None): what ``loss_and_grads`` runs backwards; ``rng`` draws the dropout masks there.
    ``patch``: fn(layer, trace) -> out (B, T, D), what the layer adds to the residual stream instead
    of ``trace.output`` (notebook 14's interventions: patching, ablation, attribution); the trace is
    the layer's own (``trace["X"]`` its normed input).

    >>> config = Config(vocab=8, seq_len=6, d_model=8, h=2, n_layers=2)
    >>> logits, weights = forward(init_model(config), np.zeros((3, 6), int), config)
    >>> logits.shape, len(weights), weights[0].shape
    ((3, 6, 8), 2, (3, 2, 6, 6))
    """
    config = _check_config(config)
    for layer, head in ablate:
        params = ablate_head(params, config, layer, head)
    start = 0 if caches is None else caches[0].length
    x = embed(params, tokens, config, start)      # (B, T, D)
    B, T, D = x.shape
    mask = cached_causal_mask(T, start)           # (T, start + T): causal over every cached token
    h, weights = config.h, []
    pos = _position_args(config, T, start + T)  # rope_base, rope_scaling, bias
    for layer in range(config.n_layers):
        a, p = _norm(x, config), layer_params(params, config, layer)  # the layer's input, its (D, D) params
        if caches is not None:                    # decoding: keys and values appended to the cache
            out, w = _cached_layer(a, params, config, layer, caches[layer], pos)
        elif core is not None:                    # another attention core on the same projections
            out, w = _core_layer(a, p, h, core, mask, pos), None
        elif tape is not None:                    # training: keep the pullback for the backward pass
            keep = _dropout_keep(rng, (B, h, T, T), config.dropout) if config.dropout else None
            out, w, pullback = mha_vjp(a, p, h, mask, keep=keep, **pos)
            tape.append((x, pullback))
        elif traces is not None or patch is not None:  # every intermediate: views, experiments, interventions
            t = trace(a, p, h, mask, **pos)
            if traces is not None:
                traces.append(t)
            out, w = (t.output if patch is None else patch(layer, t)), t.weights
        else:
            out, w = multi_head_attention(a, p, h, mask, **pos)  # (B, T, D), (B, h, T, S)
        x = x + out                               # the residual stream
        weights.append(w)
    if tape is not None:
        tape.append((x, None))
    return _norm(x, config) @ params.unembed, weights  # (B, T, D) x (D, V) -> (B, T, V)


def _cached_layer(a, params: Model, config: Config, layer: int, cache, pos: dict):
    """One layer of cached decoding: grouped_query_attention appends its keys and values to ``cache``."""
    if pos["bias"] is not None or pos["rope_scaling"] is not None:
        raise ValueError(f"cached decoding runs learned, sinusoidal, rope (unscaled) or no positions; this model "
                         f"has positions={config.positions!r}, rope_scaling={config.rope_scaling!r}: decode without caches")
    return grouped_query_attention(a, cached_layer_params(params, config, layer), config.h, config.h_kv,
                                   cache=cache, rope_base=pos["rope_base"])


def _core_layer(a, p: MHAParams, h: int, core, mask, pos: dict) -> np.ndarray:
    """One layer with ``core(Q, K, V, mask) -> heads`` in place of softmax attention, on the same projections."""
    if pos["bias"] is not None:
        raise ValueError("core= swaps the attention on the same projections; it takes no ALiBi bias: "
                         "use a model with positions other than 'alibi'")
    Qh, Kh, Vh = (split_heads(linear(a, W, b), h) for W, b in ((p.W_q, p.b_q), (p.W_k, p.b_k), (p.W_v, p.b_v)))
    Qh, Kh = (rope_heads(q, pos["rope_base"], 0, pos["rope_scaling"]) for q in (Qh, Kh))  # (B, h, T|S, d_k)
    return linear(combine_heads(core(Qh, Kh, Vh, mask)), p.W_o, p.b_o)  # (B, T, D)


def ablate_head(params: Model, config: Config, layer: int, head: int) -> Model:
    """Model -> Model with head ``head`` of layer ``layer`` silenced: its rows of W_o set to 0.

    concat @ W_o adds up d_k rows of W_o per head, so zero rows = a zero head output.
    """
    config = _check_config(config)
    if not (0 <= layer < config.n_layers and 0 <= head < config.h):
        raise ValueError(f"layer={layer}, head={head} out of range: layers 0..{config.n_layers - 1}, "
                         f"heads 0..{config.h - 1}")
    d_k = config.d_model // config.h
    W_o = params.layers[layer].W_o.copy()
    W_o[head * d_k:(head + 1) * d_k] = 0  # (D, D): the rows that head's output multiplies
    layers = list(params.layers)
    layers[layer] = layers[layer]._replace(W_o=W_o)
    return params._replace(layers=tuple(layers))


# ----------------------------------------------------------------------------- loss and gradients
def induction_score(weights, batch: Batch) -> np.ndarray:
    """weights (B, h, T, T), induction Batch -> (h,): mean weight, over the scored queries, on the key
    that FOLLOWED the query's token in the first copy (position t - n + 1: what comes next)."""
    w = _validate.float_array(weights, "weights")
    B, T = batch.tokens.shape
    n = T - np.argmax(batch.scored, axis=1)  # (B,): the scored part starts at T - n
    b, t = np.nonzero(batch.scored)  # (N,), (N,): every scored query
    return w[b, :, t, t - n[b] + 1].mean(axis=0)  # (N, h) -> (h,)


def _cross_entropy(logits, targets, scored):
    """logits (B, T, V) -> mean loss over scored positions, its gradient, and the accuracy."""
    z = logits - logits.max(-1, keepdims=True)
    probs = np.exp(z)
    probs /= probs.sum(-1, keepdims=True)  # (B, T, V)
    picked = np.take_along_axis(probs, targets[..., None], -1)[..., 0]  # (B, T)
    n = max(int(scored.sum()), 1)
    loss = -np.log(np.maximum(picked[scored], 1e-300)).sum() / n
    grad = probs
    np.put_along_axis(grad, targets[..., None], picked[..., None] - 1, -1)  # p - onehot
    grad *= scored[..., None] / n
    accuracy = float((logits.argmax(-1) == targets)[scored].mean()) if scored.any() else 0.0
    return float(loss), grad, accuracy


def _dropout_keep(rng, shape, p: float):
    return (rng.random(shape) >= p) / (1 - p)  # 0 or 1/(1-p): the expected weight is unchanged


def loss_and_grads(params: Model, batch: Batch, config: Config, rng=None):
    """Model, Batch -> (Metrics, grads: a Model of gradients). ``rng`` draws the dropout masks."""
    metrics_, grads, _ = backward(params, batch, config, rng)
    return metrics_, grads


def backward(params: Model, batch: Batch, config: Config, rng=None):
    """Model, Batch -> (Metrics, grads (a Model), [d loss / d output of layer l, (B, T, D)] * L).

    ``forward`` with a tape, then each layer's pullback in reverse: the residual stream adds
    the gradient that comes through a layer to the one that skips it.
    """
    config = _check_config(config)
    tape = []
    logits, _ = forward(params, batch.tokens, config, tape=tape, rng=rng)
    x = tape.pop()[0]                                          # the last residual stream (B, T, D)
    loss, g_logits, accuracy = _cross_entropy(logits, batch.targets, batch.scored)
    g_x, g_unembed, _ = linear_backward(_norm(x, config), params.unembed, g_logits)
    g_x = layer_norm_backward(x, g_x) if config.layer_norm else g_x
    g_layers, g_outputs = [], []
    for layer in reversed(range(config.n_layers)):
        x_in, pullback = tape[layer]
        g_outputs.insert(0, g_x)                               # d loss / d (this layer's output)
        g_in, g_p, _ = pullback(g_x)
        g_x = g_x + (layer_norm_backward(x_in, g_in) if config.layer_norm else g_in)
        g_layers.insert(0, _compact_grads(g_p, config))
    B, T = batch.tokens.shape
    g_embed = np.zeros_like(params.embed)
    np.add.at(g_embed, batch.tokens, g_x)  # rows of embed used several times add up
    g_pos = None if params.pos is None else np.pad(g_x.sum(0), ((0, params.pos.shape[0] - T), (0, 0)))
    return Metrics(loss, accuracy), Model(g_embed, g_pos, tuple(g_layers), g_unembed), g_outputs


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
    loss, _, accuracy = _cross_entropy(logits, batch.targets, batch.scored)
    return Metrics(loss, accuracy)


def evaluate(params: Model, config: Config, rng: np.random.Generator, n: int = 256) -> Metrics:
    """Model -> Metrics on ``n`` fresh sequences drawn with ``rng`` (no dropout)."""
    return metrics(params, make_batch(_check_config(config), rng, n), config)


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
    config = _check_config(config)
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


# ----------------------------------------------------------------------------- checkpoints
CHECKPOINT_DIR = Path(__file__).resolve().parent.parent / "checkpoints"
# The configs of the shipped checkpoints (`mha-course train TASK` re-makes them).
CHECKPOINT_CONFIGS = {
    "previous_token": Config(task="previous_token", vocab=16, seq_len=16, d_model=16, h=2, n_layers=1,
                             batch=32, steps=200, lr=1e-2, seed=0),
    "induction": Config(task="induction", vocab=16, seq_len=24, d_model=32, h=2, n_layers=2,
                        batch=32, steps=800, lr=3e-3, seed=0),
}


# Notebook 13 (long context): the induction model trained at 16 positions with each position scheme
# (vocab 32: distinct copies up to 4x that length; h 4: ALiBi's steepest slope 1/4, not h = 2's 1/16),
# then RoPE fine-tuned for a few steps at 4x with each scaling (the parent checkpoint's weights first).
LONG_CONTEXT = Config(task="induction", vocab=32, seq_len=16, d_model=32, h=4, n_layers=2, batch=32,
                      steps=3000, lr=3e-3, seed=0)
LONG_FINE_TUNE = dict(seq_len=64, steps=150, lr=1e-3, seed=1)
LONG_SCALINGS = {"linear": {"type": "linear", "factor": 4.0}, "ntk": {"type": "ntk", "factor": 4.0},
                 "yarn": {"type": "yarn", "factor": 4.0, "original_max_position": 16}}
CHECKPOINT_CONFIGS.update({f"long_{p}": LONG_CONTEXT._replace(positions=p) for p in POSITIONS})
CHECKPOINT_CONFIGS["long_rope_tuned"] = LONG_CONTEXT._replace(positions="rope", **LONG_FINE_TUNE)
CHECKPOINT_CONFIGS.update({f"long_rope_{name}_tuned": LONG_CONTEXT._replace(positions="rope", rope_scaling=sc,
                                                                           **LONG_FINE_TUNE)
                           for name, sc in LONG_SCALINGS.items()})
CHECKPOINT_CONFIGS.update({f"long_{p}_len{L}": LONG_CONTEXT._replace(positions=p, seq_len=L)
                           for p in ("learned", "rope", "alibi") for L in (8, 32)})  # 13's train_len slider
CHECKPOINT_PARENTS = {name: "long_rope" for name in CHECKPOINT_CONFIGS if name.endswith("_tuned")}


def train_checkpoint(task: str, progress: bool = False, parent: Optional[Model] = None
                     ) -> tuple[Config, Model, History, Metrics]:
    """task -> (config, trained Model, History, Metrics on fresh data): CHECKPOINT_CONFIGS[task] trained.

    What ``mha-course train TASK`` runs before it writes the checkpoint (``checkpoint_bytes``).
    """
    if task not in CHECKPOINT_CONFIGS:
        raise ValueError(f"unknown task {task!r}; choose one of {sorted(CHECKPOINT_CONFIGS)}")
    config = CHECKPOINT_CONFIGS[task]
    if parent is None and task in CHECKPOINT_PARENTS:  # a fine-tune starts from its parent's weights (13)
        parent = load_checkpoint(checkpoint_path(CHECKPOINT_PARENTS[task]))[1]
    snaps = 0 if task.startswith("long_") else max(1, config.steps // 16)  # 13 needs no snapshots: small files
    params, history = train(config, progress=progress, snapshot_every=snaps, params=parent)
    return config, params, history, evaluate(params, config, np.random.default_rng(config.seed + 2))


def make_checkpoint(task: str, path, progress: bool = False) -> tuple[Path, Metrics]:
    """task, path -> (path written, Metrics on fresh data): trains CHECKPOINT_CONFIGS[task] and saves it."""
    config, params, history, metrics = train_checkpoint(task, progress)
    return save_checkpoint(path, params, config, history), metrics


# The experiments of notebook 08 section 5, too slow to run live: `mha-course train experiments`.
SWEEP_HS = (1, 2, 4, 8, 16, 32)
SWEEP_STEPS = 600
SCALE_CONFIG = Config(task="previous_token", vocab=16, seq_len=16, d_model=128, h=1, n_layers=1,
                      batch=32, steps=300, lr=3e-3)


def _final(config: Config, seed: int = 0) -> tuple[np.ndarray, Metrics]:
    """Train ``config`` with ``seed``: its loss curve and Metrics on fresh sequences."""
    config = config._replace(seed=seed)
    params, history = train(config)
    return history.losses, evaluate(params, config, np.random.default_rng(1000 + seed), 512)


def run_experiments(seeds=(0, 1, 2)) -> dict:
    """-> name -> array: the h sweep, one layer vs two, dropout, and the 1/sqrt(d_k) scale, over ``seeds``.

    h_sweep_losses (len(seeds), len(SWEEP_HS), SWEEP_STEPS) and h_sweep_final (seeds, hs) on
    induction at d_model=32; one_layer_accuracy; dropout_{0,10}_losses; scale_{on,off}_losses
    (seed 0's run, as notebook 08 draws them); and the same runs for every seed, ``<name>_seeds``
    with a first axis of len(seeds) (dropout 0 is the two-layer model of one_layer's comparison).
    """
    base, out = CHECKPOINT_CONFIGS["induction"], {"seeds": np.array(seeds)}
    runs = [[_final(base._replace(h=h, steps=SWEEP_STEPS), s) for h in SWEEP_HS] for s in seeds]
    out["h_sweep_hs"] = np.array(SWEEP_HS)
    out["h_sweep_losses"] = np.array([[r[0] for r in row] for row in runs])
    out["h_sweep_final"] = np.array([[r[1].loss for r in row] for row in runs])
    out["h_sweep_accuracy"] = np.array([[r[1].accuracy for r in row] for row in runs])
    configs = {"one_layer": base._replace(n_layers=1), "dropout_0": base._replace(dropout=0.0),
               "dropout_10": base._replace(dropout=0.1)}
    for name, config in configs.items():
        per_seed = [_final(config, s) for s in seeds]
        out[f"{name}_losses_seeds"] = np.array([losses for losses, _ in per_seed])
        out[f"{name}_accuracy_seeds"] = np.array([m.accuracy for _, m in per_seed])
        out[f"{name}_accuracy"] = np.array(per_seed[0][1].accuracy)
        if name != "one_layer":
            out[f"{name}_losses"] = per_seed[0][0]
    out["one_layer_losses"] = out["one_layer_losses_seeds"][0]
    for name, scale in (("on", True), ("off", False)):
        out[f"scale_{name}_losses_seeds"] = np.array([_final(SCALE_CONFIG._replace(scale=scale), s)[0] for s in seeds])
        out[f"scale_{name}_losses"] = out[f"scale_{name}_losses_seeds"][0]
    return out


def save_experiments(path) -> Path:
    """Run ``run_experiments`` and write the arrays to ``path`` (``mha-course train experiments`` writes
    ./checkpoints/experiments.npz; the shipped file is ``CHECKPOINT_DIR / "experiments.npz"``)."""
    return _write_npz(path, run_experiments())


def load_experiments(path=None) -> dict:
    """-> the arrays that ``save_experiments`` wrote (default: the shipped experiments.npz).

    A file that is not such an .npz (text, cut short, damaged, an array of Python objects, a
    header that claims more data than the file holds) is one ValueError naming the path.
    """
    path = Path(CHECKPOINT_DIR / "experiments.npz" if path is None else path)
    arrays = read_npz(path, "experiments file", "make it again with `mha-course train experiments`")
    for key, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise ValueError(f"{path}: not an .npz experiments file ({key!r} holds {a.dtype} values, not "
                             "numbers); make it again with `mha-course train experiments`")
    return arrays


def npz_bytes(arrays: dict) -> bytes:
    """{name: array} -> the bytes of a compressed .npz holding them (no Python objects).

    >>> len(npz_bytes({"a": np.zeros(3)})) > 0
    True
    """
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def _write_npz(path, arrays: dict) -> Path:
    """Write ``arrays`` to ``path`` atomically: a temp file in the same folder, then os.replace.

    The library's writer (notebooks, ``misconceptions.make_ensemble``); the command line writes
    with ``mha_course.tools.files.atomic_write``, which this folder may not import (layers).
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # write through the link
    mode = (os.stat(path).st_mode & 0o777) if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.pid{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(npz_bytes(arrays))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it private; a checkpoint is ordinary data
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


def checkpoint_path(task: str) -> Path:
    """task -> the path of its shipped checkpoint (``mha_course/checkpoints/TASK.npz``)."""
    if task not in CHECKPOINT_CONFIGS:
        raise ValueError(f"no shipped checkpoint for task={task!r}; shipped: {sorted(CHECKPOINT_CONFIGS)}")
    return CHECKPOINT_DIR / f"{task}.npz"


def _flatten(params: Model) -> dict:
    arrays = {"embed": params.embed, "unembed": params.unembed}
    if params.pos is not None:
        arrays["pos"] = params.pos
    for i, layer in enumerate(params.layers):
        arrays.update({f"layer{i}.{n}": a for n, a in zip(MHAParams._fields, layer) if a is not None})
    return arrays


def checkpoint_arrays(params: Model, config: Config, history: Optional[History] = None) -> dict:
    """Model, Config [, History] -> {name: array}: what a checkpoint .npz holds (config as JSON text)."""
    _check_config(config)
    arrays = _flatten(params)
    if history is not None:
        arrays.update({f"history.{n}": np.asarray(a) for n, a in zip(History._fields, history)})
    arrays["config"] = np.array(json.dumps(config._asdict()))
    return arrays


def checkpoint_bytes(params: Model, config: Config, history: Optional[History] = None) -> bytes:
    """Model, Config [, History] -> the bytes of its checkpoint .npz (what ``load_checkpoint`` reads)."""
    return npz_bytes(checkpoint_arrays(params, config, history))


def save_checkpoint(path, params: Model, config: Config, history: Optional[History] = None) -> Path:
    """Write config, params (and history) to ``path`` (.npz), atomically: a temp file, then os.replace."""
    return _write_npz(path, checkpoint_arrays(params, config, history))


MAX_NPZ_BYTES = 1 << 30  # what one .npz may hold once unpacked (the shipped ones hold < 2 MB)


def read_npz(path, what: str = "checkpoint", fix: str = "make it again with `mha-course train TASK`") -> dict:
    """path -> {name: array} of an .npz, every array checked before it is read; ValueError otherwise.

    Refused, each with one ValueError naming ``path`` and ``fix``: a missing path or a folder,
    a file that is no zip archive (text, a notebook), one cut short or damaged, a member that
    is no .npy array or holds Python objects (never unpickled), and a header that claims more
    data than the member holds or more than MAX_NPZ_BYTES in all (nothing that size is allocated).
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"no {what} at {path}; {fix}")
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not an .npz {what}; give the path of the .npz file")

    def bad(why):
        return ValueError(f"{path}: not an .npz {what} ({why}); {fix}")

    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        raise bad("it is no zip archive: a text file, another format, or a file cut short") from None
    arrays, budget = {}, [MAX_NPZ_BYTES]
    with archive:
        for info in archive.infolist():
            name = info.filename
            if not name.endswith(".npy") or name[:-4] in arrays:
                raise bad(f"it holds {name!r}, which is no array of its own")
            try:
                arrays[name[:-4]] = _read_member(archive, info, bad, budget)
            except ValueError as err:
                if str(err).startswith(str(path)):
                    raise
                raise bad(f"{name!r} is damaged: {str(err)[:80]}") from None
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as err:
                raise bad(f"{name!r} is cut short or damaged: {str(err)[:80]}") from None
    return arrays


def _read_member(archive, info, bad, budget: list) -> np.ndarray:
    """One .npy member of an .npz: its header checked against its size and the budget left, then its data."""
    name = info.filename
    with archive.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version not in ((1, 0), (2, 0)):
            raise bad(f"{name!r} has .npy format {version}, which is not read here")
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
        if dtype.hasobject:
            raise bad(f"{name!r} holds Python objects, which a checkpoint never does")
        nbytes, held = math.prod(shape) * dtype.itemsize, max(info.file_size - f.tell(), 0)
        budget[0] -= nbytes
        if nbytes != held or budget[0] < 0:
            raise bad(f"{name!r} claims shape {shape} ({nbytes:,} bytes) but holds {held:,}")
        data = f.read(nbytes)
    if len(data) != nbytes:
        raise bad(f"{name!r} is cut short")
    return np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C").copy()


def _read_config(arrays: dict, bad) -> Config:
    """The validated Config of a checkpoint's arrays (the "config" entry: JSON text)."""
    if "config" not in arrays:
        raise bad("it has no config")
    raw = arrays.pop("config")
    if raw.shape != () or raw.dtype.kind != "U":
        raise bad(f"its config is {raw.dtype} {raw.shape}, not JSON text")
    try:
        fields = json.loads(str(raw))
    except json.JSONDecodeError as err:
        raise bad(f"its config is not JSON ({err.msg})") from None
    if not isinstance(fields, dict):
        raise bad(f"its config is a JSON {type(fields).__name__}, not an object of Config fields")
    unknown = sorted(set(fields) - set(Config._fields))
    if unknown:
        raise bad(f"its config has fields Config does not know: {unknown}")
    try:
        config = Config(**fields)
        _check_config(config)  # validated; returned as stored (h_kv None stays None)
    except (TypeError, ValueError) as err:
        raise bad(f"its config is not valid: {err}") from None
    return config


def load_checkpoint(path) -> tuple[Config, Model, Optional[History]]:
    """path (.npz from save_checkpoint) -> (Config, Model, History or None), checked whole at load.

    The config must be valid, and the arrays exactly those a model of that config has (names,
    shapes, finite floats: an ``n_layers=3`` config with one layer stored is refused), with a
    history whole or absent. Anything else is one ValueError naming the path (see ``read_npz``).
    """
    path = Path(path)
    fix = "make one with `mha-course train TASK` or train.save_checkpoint(path, params, config)"
    arrays = read_npz(path, "checkpoint", fix)

    def bad(why):
        return ValueError(f"{path}: not a usable checkpoint ({why}); {fix}")

    config = _read_config(arrays, bad)
    history_keys = [f"history.{n}" for n in History._fields]
    stored = {k: arrays.pop(k) for k in history_keys if k in arrays}
    expected = {k: a.shape for k, a in _flatten(init_model(config, np.random.default_rng(0))).items()}
    config_line = f"n_layers={config.n_layers}, positions={config.positions!r}"
    missing, extra = sorted(expected.keys() - arrays.keys()), sorted(arrays.keys() - expected.keys())
    if missing or extra:
        raise bad(f"a model of its config ({config_line}) has "
                  f"{len(expected)} arrays; missing {missing[:6]}, not expected {extra[:6]}")
    for key, shape in expected.items():
        a = arrays[key]
        if a.shape != shape or a.dtype.kind != "f" or not np.isfinite(a).all():
            raise bad(f"{key!r} is {a.dtype} {a.shape}, expected finite floats of shape {shape}")
    layers = tuple(MHAParams(*(arrays.get(f"layer{i}.{n}") for n in MHAParams._fields))
                   for i in range(config.n_layers))
    params = Model(arrays["embed"], arrays.get("pos"), layers, arrays["unembed"])
    history = None
    if stored:
        if len(stored) != len(history_keys):
            raise bad(f"its history is partial: it has {sorted(stored)}, a history has all of {history_keys}")
        history = History(*(stored[k] for k in history_keys))
        n = len(history.snapshot_steps)
        if history.losses.ndim != 1 or history.snapshot_steps.ndim != 1 or \
                history.snapshot_weights.shape[:3] != (n, config.n_layers, config.h):
            raise bad(f"its history has shapes {[np.shape(a) for a in history]}, expected (steps,), (n,) and "
                      f"(n, {config.n_layers}, {config.h}, T, T)")
    return config, params, history
