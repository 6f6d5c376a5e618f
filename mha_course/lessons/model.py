"""The tiny attention-only transformer of notebook 08: its config, its tasks, its one forward pass.

Shapes: ``B`` batch, ``T`` positions, ``V`` vocabulary, ``D = d_model``, ``h`` heads,
``d_k = D // h``, ``L`` layers. The model, for tokens (B, T):

    x = embed[tokens] (+ pos[:T])                      (B, T, D)   learned positions, RoPE, or none
    x = x + multi_head_attention(norm(x), layer_l, h, causal mask [, rope_base])   for l = 1 .. L
    logits = norm(x) @ unembed                         (B, T, V)   norm: layer_norm or nothing

Positions (``Config.positions``): ``"learned"`` (a table added to the embeddings),
``"sinusoidal"`` (Vaswani et al.'s fixed table, added), ``"rope"`` (``multi_head_attention(...,
rope_base=config.rope_base, rope_scaling=config.rope_scaling)``), ``"alibi"`` (Press et al.'s
distance penalty, ``bias=positions.alibi_bias(h, T)``) or ``"none"`` (only the causal mask).

Tasks (``make_batch``): ``"previous_token"`` (predict the token one position back: one layer
with positions learns it, without positions it stays near chance) and ``"induction"``
([noise][A B C ...][A B C ...] with a random length; predict the second copy: a layer-1
previous-token head and a layer-2 induction head, so it needs two layers).

The tiny transformer is three modules, one job each: this one (the model and its one forward
pass), ``lessons.training`` (cross-entropy, the backward pass, Adam, ``train``, ``evaluate``) and
``lessons.checkpoints`` (the shipped checkpoints, saving and loading)::

    from mha_course.lessons import checkpoints, training
    from mha_course.lessons import model as train
    config, params, history = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    batch = train.make_batch(config, np.random.default_rng(0))        # Batch(tokens, targets, scored)
    logits, weights = train.forward(params, batch.tokens, config)      # (B, T, V), [(B, h, T, T)] * L
    print(training.evaluate(params, config, np.random.default_rng(1)))  # Metrics(loss, accuracy)
    training.metrics(params, batch, config, ablate=[(1, 0)])           # the same batch, one head cut
    lp = train.layer_params(params, config, 1)  # the MHAParams layer 1 runs: W_k/W_v expanded for
    # h_kv < h and W_q multiplied by sqrt(d_k) when config.scale is False
    train.embed(params, tokens, config)          # the residual stream's input (B, T, D)
    train.ablate_head(params, config, layer=1, head=0)  # same params, head 0 of layer 1 silenced

Everything is a pure function over explicit NamedTuples (``Config``, ``Model``, ``Batch``);
randomness comes only from ``rng`` arguments or ``config.seed``.

Taught in 08_heads_that_learn.ipynb.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from .. import _validate
from ..backward import mha_vjp
from ..block import layer_norm
from ..gqa import GQAParams, cached_causal_mask, grouped_query_attention
from ..heads import combine_heads, split_heads
from ..mha import MHAParams, linear, multi_head_attention, rope_heads, trace
from ..positions import alibi_bias, rope_attention_factor, rope_inv_freq, sinusoidal_positions

__all__ = ["Config", "Model", "Batch", "Metrics", "TASKS", "POSITIONS", "LN_EPS", "check_config",
           "make_batch", "init_model", "embed", "layer_params", "compact_grads", "cached_layer_params", "norm",
           "forward", "ablate_head", "induction_score", "token_losses", "scored_metrics"]

TASKS = ("previous_token", "induction")
POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "none")
LN_EPS = 1e-5


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



# ----------------------------------------------------------------------------- config
def check_config(config) -> Config:
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
    config = check_config(config)
    B = config.batch if batch is None else _validate.positive_int(batch, "batch")  # 0 is no default
    T, V = config.seq_len, config.vocab
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
    config = check_config(config)
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
    (+ learned or sinusoidal positions). Token ids outside 0..V-1 (-1 included) are a ValueError."""
    tokens = _validate.token_ids(tokens, params.embed.shape[0], "tokens")
    if tokens.ndim != 2 or tokens.shape[1] == 0:
        raise ValueError(f"tokens has shape {tokens.shape}; give (B, T) token ids with T >= 1 "
                         "(one sequence: tokens[None])")
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


def norm(x: np.ndarray, config: Config) -> np.ndarray:
    """x (..., D) -> layer_norm(x) when config.layer_norm, else x itself (the model's one norm)."""
    return layer_norm(x, LN_EPS) if config.layer_norm else x



def compact_grads(g: MHAParams, config: Config) -> MHAParams:
    """The gradient of layer_params' (D, D) output, taken back to the stored parameters."""
    h, h_kv, d_k = config.h, config.h_kv or config.h, config.d_model // config.h
    q_factor = _q_factor(config)

    def pool(a):  # (..., h * d_k) -> (..., h_kv * d_k): the repeated copies' gradients add up
        return None if a is None else a.reshape(*a.shape[:-1], h_kv, h // h_kv, d_k).sum(-2).reshape(
            *a.shape[:-1], -1)
    scale = (lambda a: None if a is None else a * q_factor)
    return MHAParams(scale(g.W_q), pool(g.W_k), pool(g.W_v), g.W_o, scale(g.b_q), pool(g.b_k),
                     pool(g.b_v), g.b_o)



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
    config = check_config(config)
    for layer, head in ablate:
        params = ablate_head(params, config, layer, head)
    start = 0 if caches is None else caches[0].length
    x = embed(params, tokens, config, start)      # (B, T, D)
    B, T, D = x.shape
    mask = cached_causal_mask(T, start)           # (T, start + T): causal over every cached token
    h, weights = config.h, []
    pos = _position_args(config, T, start + T)  # rope_base, rope_scaling, bias
    for layer in range(config.n_layers):
        a, p = norm(x, config), layer_params(params, config, layer)  # the layer's input, its (D, D) params
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
    return norm(x, config) @ params.unembed, weights  # (B, T, D) x (D, V) -> (B, T, V)


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
    config = check_config(config)
    if not (0 <= layer < config.n_layers and 0 <= head < config.h):
        raise ValueError(f"layer={layer}, head={head} out of range: layers 0..{config.n_layers - 1}, "
                         f"heads 0..{config.h - 1}")
    d_k = config.d_model // config.h
    W_o = params.layers[layer].W_o.copy()
    W_o[head * d_k:(head + 1) * d_k] = 0  # (D, D): the rows that head's output multiplies
    layers = list(params.layers)
    layers[layer] = layers[layer]._replace(W_o=W_o)
    return params._replace(layers=tuple(layers))


def _dropout_keep(rng, shape, p: float):
    return (rng.random(shape) >= p) / (1 - p)  # 0 or 1/(1-p): the expected weight is unchanged



# ----------------------------------------------------------------------------- reading the weights
def induction_score(weights, batch: Batch) -> np.ndarray:
    """weights (B, h, T, T), induction Batch -> (h,): mean weight, over the scored queries, on the key
    that FOLLOWED the query's token in the first copy (position t - n + 1: what comes next)."""
    w = _validate.float_array(weights, "weights")
    B, T = batch.tokens.shape
    n = T - np.argmax(batch.scored, axis=1)  # (B,): the scored part starts at T - n
    b, t = np.nonzero(batch.scored)  # (N,), (N,): every scored query
    return w[b, :, t, t - n[b] + 1].mean(axis=0)  # (N, h) -> (h,)


# ----------------------------------------------------------------------------- the loss
def token_losses(logits, targets) -> np.ndarray:
    """logits (B, T, V), targets (B, T) -> cross-entropy (B, T) in nats: logsumexp(z) - z[target].

    >>> token_losses(np.zeros((1, 1, 4)), np.array([[2]])).round(4)  # uniform over 4: ln 4
    array([[1.3863]])
    """
    logits = _validate.finite_array(logits, "logits")
    if logits.ndim < 1 or logits.shape[-1] == 0:
        raise ValueError(f"logits has shape {logits.shape}; give (B, T, V) with V >= 1 (one score per token)")
    targets = _validate.token_ids(targets, logits.shape[-1], "targets")
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets has shape {targets.shape} but logits {logits.shape}; targets must be "
                         f"{logits.shape[:-1]}: one target per position")
    z = logits - np.max(logits, axis=-1, keepdims=True)  # (B, T, V)
    lse = np.log(np.exp(z).sum(-1))  # (B, T)
    return lse - np.take_along_axis(z, targets[..., None], -1)[..., 0]


def scored_metrics(logits, batch: Batch, losses=None) -> Metrics:
    """logits (B, T, V), Batch -> Metrics: the mean of ``token_losses`` and the accuracy (argmax = target)
    over the scored positions; 0.0 and 0.0 when none is scored. ``losses`` (B, T): token_losses already
    computed. Training, evaluation, long context and the ensembles all read their loss here.

    >>> b = Batch(np.array([[1, 0]]), np.array([[1, 0]]), np.array([[True, False]]))
    >>> round(scored_metrics(np.log(np.array([[[0.5, 0.5], [0.9, 0.1]]])), b).loss, 4)  # ln 2 at the one scored
    0.6931
    """
    losses = token_losses(logits, batch.targets) if losses is None else losses  # (B, T)
    scored = np.asarray(batch.scored, dtype=bool)
    if not scored.any():
        return Metrics(0.0, 0.0)
    correct = np.asarray(logits).argmax(-1) == batch.targets  # (B, T)
    return Metrics(float(losses[scored].mean()), float(correct[scored].mean()))
