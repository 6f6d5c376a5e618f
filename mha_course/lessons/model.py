"""The tiny attention-only transformer of notebook 08: its tasks, its one forward pass, its loss.

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

The tiny transformer is four modules, one job each: ``lessons.model_config`` (the records
``Config``, ``Model``, ``Batch``, ``Metrics`` and their checks, all re-exported here), this one (the
model and its one forward pass), ``lessons.training`` (the backward pass, Adam, ``train``,
``evaluate``) and ``lessons.checkpoints`` (the shipped checkpoints, saving and loading)::

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
from typing import Optional

import numpy as np

from .. import _validate
from ..backward import mha_vjp
from ..block import layer_norm
from ..gqa import GQAParams, cached_causal_mask, grouped_query_attention
from ..mha import MHAParams, multi_head_attention, trace
from ..positions import alibi_bias, rope_attention_factor, sinusoidal_positions
from .model_config import (  # re-exported (in __all__): train.Config, train.check_config, ...
    POSITIONS,
    TASKS,
    Batch,
    Config,
    Metrics,
    Model,
    check_batch,
    check_config,
    check_logits,
    check_model,
    check_tokens,
)

__all__ = ["Config", "Model", "Batch", "Metrics", "TASKS", "POSITIONS", "LN_EPS", "check_config",
           "check_model", "check_tokens", "check_batch", "check_logits",
           "make_batch", "init_model", "embed", "layer_params", "compact_grads", "cached_layer_params", "norm",
           "forward", "ablate_head", "induction_score", "token_losses", "scored_metrics"]

LN_EPS = 1e-5


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
    rng = _validate.generator(rng)
    B = config.batch if batch is None else _validate.positive_int(batch, "batch")  # 0 is no default
    T, V = config.seq_len, config.vocab
    _validate.allocation(8 * B * max(T, V), f"a batch of {B} sequences of {T} tokens (vocab {V})",
                         "ask for fewer sequences (batch=...)")
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
    rng = np.random.default_rng(config.seed) if _validate.generator(rng, optional=True) is None else rng
    V, D, T = config.vocab, config.d_model, config.seq_len
    kv = D // config.h * config.h_kv
    table = V * D + (T * D if config.positions == "learned" else 0)
    _validate.allocation(8 * max(table, config.n_layers * 2 * D * (D + kv)),
                         f"a model of vocab={V}, seq_len={T}, d_model={D}, n_layers={config.n_layers}",
                         "choose smaller sizes in the config")
    embedding = rng.normal(size=(V, D))
    pos = rng.normal(size=(T, D)) if config.positions == "learned" else None
    sizes = ((D, D), (D, kv), (D, kv), (D, D))
    layers = tuple(MHAParams(*(rng.normal(0, 1 / math.sqrt(D), size=s) for s in sizes))
                   for _ in range(config.n_layers))
    return Model(embedding, pos, layers, rng.normal(0, 1 / math.sqrt(D), size=(D, V)))


def embed(params: Model, tokens, config: Config, start: int = 0) -> np.ndarray:
    """tokens (B, T) ints at positions start .. start + T - 1 -> x (B, T, D): token embeddings
    (+ learned or sinusoidal positions). Token ids outside 0..V-1 (-1 included) are a ValueError."""
    config = check_config(config)
    params = check_model(params, config)
    return _embed(params, check_tokens(tokens, config), config, _validate.count(start, "start"))


def _embed(params: Model, tokens: np.ndarray, config: Config, start: int) -> np.ndarray:
    x = params.embed[tokens]  # (B, T) -> (B, T, D)
    if config.positions == "sinusoidal":
        _validate.allocation(8 * (start + tokens.shape[1]) * config.d_model, f"the sinusoidal table of start={start} + "
                             f"{tokens.shape[1]} positions", "start closer to 0")
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
    config = check_config(config)
    params = check_model(params, config)
    return _layer_params(params, config, _validate.index(layer, config.n_layers, "layer", "layers"))


def _layer_params(params: Model, config: Config, layer: int) -> MHAParams:
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
    config = check_config(config)
    x = _validate.finite_array(x, "x")
    if x.ndim == 0 or x.shape[-1] != config.d_model:
        raise ValueError(f"x has shape {x.shape}, but the model's width is config.d_model={config.d_model}; "
                         f"give x (..., {config.d_model}): the residual stream")
    return _norm(x, config)


def _norm(x: np.ndarray, config: Config) -> np.ndarray:
    return layer_norm(x, LN_EPS) if config.layer_norm else x



def compact_grads(g: MHAParams, config: Config) -> MHAParams:
    """g: MHAParams (W (D, D), b (D,)), the gradient of layer_params' output -> MHAParams of the stored
    shapes (W_k, W_v (D, h_kv * d_k)): the gradient taken back to the stored parameters."""
    config = check_config(config)
    D = config.d_model
    if not isinstance(g, MHAParams):
        raise ValueError(f"g must be an MHAParams of gradients (what layer_params' output gets), got "
                         f"{type(g).__name__}; pass the g_p of a layer's pullback")
    for field, a in zip(MHAParams._fields, g):
        want = (D, D) if field.startswith("W") else (D,)
        if (a is not None or field.startswith("W")) and np.shape(a) != want:
            raise ValueError(f"g.{field} has shape {np.shape(a)}; the gradient of layer_params' output is "
                             f"{want} for config.d_model={D}")
    return _compact_grads(MHAParams(*(None if a is None else _validate.float_array(a, f"g.{f}")
                                      for f, a in zip(MHAParams._fields, g))), config)


def _compact_grads(g: MHAParams, config: Config) -> MHAParams:
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
    config = check_config(config)
    params = check_model(params, config)
    return _cached_layer_params(params, config, _validate.index(layer, config.n_layers, "layer", "layers"))


def _cached_layer_params(params: Model, config: Config, layer: int) -> GQAParams:
    run, p = _layer_params(params, config, layer), params.layers[layer]
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
    One mode at a time: ``caches``, ``core``, ``tape`` and ``traces``/``patch`` cannot be combined (a
    ValueError names them); ``ablate`` goes with any of them.

    >>> config = Config(vocab=8, seq_len=6, d_model=8, h=2, n_layers=2)
    >>> logits, weights = forward(init_model(config), np.zeros((3, 6), int), config)
    >>> logits.shape, len(weights), weights[0].shape
    ((3, 6, 8), 2, (3, 2, 6, 6))
    """
    config = check_config(config)
    params = check_model(params, config)
    tokens = check_tokens(tokens, config)
    _one_mode(caches=caches, core=core, tape=tape, traces=traces, patch=patch)
    rng = _check_dropout_rng(rng, tape, config)
    _check_modes(core, traces, tape, patch)
    for layer, head in _ablate_pairs(ablate):
        params = ablate_head(params, config, layer, head)
    start = 0 if caches is None else _check_caches(caches, config)
    x = embed(params, tokens, config, start)      # (B, T, D)
    B, T, D = x.shape
    mask = cached_causal_mask(T, start)           # (T, start + T): causal over every cached token
    h, weights = config.h, []
    pos = _position_args(config, T, start + T)  # rope_base, rope_scaling, bias
    for layer in range(config.n_layers):
        a, p = _norm(x, config), _layer_params(params, config, layer)  # the layer's input, its (D, D) params
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
            out, w = (t.output if patch is None else _patched(patch(layer, t), x.shape, layer)), t.weights
        else:
            out, w = multi_head_attention(a, p, h, mask, **pos)  # (B, T, D), (B, h, T, S)
        x = x + out                               # the residual stream
        weights.append(w)
    if tape is not None:
        tape.append((x, None))
    return _norm(x, config) @ params.unembed, weights  # (B, T, D) x (D, V) -> (B, T, V)


def _check_dropout_rng(rng, tape, config: Config):
    """forward's rng: a Generator that draws training's dropout masks (tape given), else None."""
    rng = _validate.generator(rng, optional=True)
    if rng is not None and tape is None:
        raise ValueError("rng draws the dropout masks of a training pass (tape=[...]); without tape it would be "
                         "ignored: drop rng, or pass tape")
    if tape is not None and config.dropout and rng is None:
        raise ValueError(f"config.dropout={config.dropout} draws dropout masks: pass rng=np.random.default_rng(0) "
                         "with tape")
    return rng


def _check_modes(core, traces, tape, patch) -> None:
    """forward's mode arguments: core and patch functions, traces a list, tape an empty list."""
    for name, fn in (("core", core), ("patch", patch)):
        if fn is not None and not callable(fn):
            raise ValueError(f"{name}={fn!r} must be a function (see forward's docstring), or None")
    if traces is not None and not isinstance(traces, list):
        raise ValueError(f"traces={traces!r} must be a list that receives each layer's Trace: pass traces=[]")
    if tape is not None and (not isinstance(tape, list) or tape):
        raise ValueError(f"tape must be an empty list that receives each layer's pullback, got {type(tape).__name__} "
                         f"of {len(tape) if isinstance(tape, list) else 'no'} items: pass tape=[]")


def _patched(out, shape: tuple, layer: int) -> np.ndarray:
    """What forward's ``patch`` returned for one layer: a finite (B, T, D) array, never broadcast."""
    out = _validate.finite_array(out, f"patch's output at layer {layer}")
    if out.shape != shape:
        raise ValueError(f"patch returned shape {out.shape} at layer {layer}; it must return what the layer adds to "
                         f"the residual stream, {shape} (B, T, D), e.g. trace.output")
    return out


def _ablate_pairs(ablate) -> list:
    """forward's ablate: (layer, head) pairs (ablate_head checks each one's range)."""
    try:
        pairs = [tuple(pair) for pair in ablate]
    except TypeError:
        raise ValueError(f"ablate={ablate!r} must be a list of (layer, head) pairs, e.g. ablate=[(1, 0)]") from None
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"ablate={ablate!r} must be a list of (layer, head) pairs, e.g. ablate=[(1, 0)]")
    return pairs


def _check_caches(caches, config: Config) -> int:
    """forward's caches: one per layer, all holding the same number of tokens -> that number."""
    if not isinstance(caches, (list, tuple)) or len(caches) != config.n_layers or \
            not all(hasattr(c, "length") for c in caches):
        raise ValueError(f"caches must be a list of one KV cache per layer ({config.n_layers}); make them with "
                         "lessons.gqa.new_caches(params, config, batch, max_len)")
    lengths = {c.length for c in caches}
    if len(lengths) != 1:
        raise ValueError(f"caches hold different numbers of tokens ({sorted(lengths)}); every layer's cache must "
                         "hold the same tokens: make fresh ones with lessons.gqa.new_caches")
    return caches[0].length


def _one_mode(**modes) -> None:
    """Refuse modes of ``forward`` that would be silently ignored together (traces and patch go together)."""
    given = [name for name, value in modes.items() if value is not None]
    groups = {"traces": "traces/patch", "patch": "traces/patch"}
    if len({groups.get(name, name) for name in given}) > 1:
        raise ValueError(f"forward runs one mode at a time, but {', '.join(f'{n}=' for n in given)} were given "
                         "together: caches (decoding), core (another attention), tape (training) and "
                         "traces/patch (every stage) cannot be combined; make one call per mode")


def _cached_layer(a, params: Model, config: Config, layer: int, cache, pos: dict):
    """One layer of cached decoding: grouped_query_attention appends its keys and values to ``cache``."""
    if pos["bias"] is not None or pos["rope_scaling"] is not None:
        raise ValueError(f"cached decoding runs learned, sinusoidal, rope (unscaled) or no positions; this model "
                         f"has positions={config.positions!r}, rope_scaling={config.rope_scaling!r}: decode without caches")
    return grouped_query_attention(a, _cached_layer_params(params, config, layer), config.h, config.h_kv,
                                   cache=cache, rope_base=pos["rope_base"])


def _core_layer(a, p: MHAParams, h: int, core, mask, pos: dict) -> np.ndarray:
    """One layer with ``core(Q, K, V, mask) -> heads`` in place of softmax attention: the same pipeline
    (``multi_head_attention``'s projections, heads, RoPE), the kernel passed in."""
    if pos["bias"] is not None:
        raise ValueError("core= swaps the attention on the same projections; it takes no ALiBi bias: "
                         "use a model with positions other than 'alibi'")

    def swapped(Q, K, V, mask, bias=None, scores=None):  # the kernel interface: (heads out, weights)
        out = _validate.finite_array(core(Q, K, V, mask), "core's output")
        if out.shape != V.shape:
            raise ValueError(f"core returned shape {out.shape}; it must return one output per query and head, "
                             f"{V.shape} (B, h, T, d_k), as softmax attention does")
        return out, None
    return multi_head_attention(a, p, h, mask, attend=swapped, **pos)[0]  # (B, T, D)


def ablate_head(params: Model, config: Config, layer: int, head: int) -> Model:
    """Model -> Model with head ``head`` of layer ``layer`` silenced: its rows of W_o set to 0.

    concat @ W_o adds up d_k rows of W_o per head, so zero rows = a zero head output.
    """
    config = check_config(config)
    params = check_model(params, config)
    layer = _validate.index(layer, config.n_layers, "layer", "layers")
    head = _validate.index(head, config.h, "head", "heads")
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
    w = _validate.finite_array(weights, "weights")
    batch = check_batch(batch)
    B, T = batch.tokens.shape
    if w.ndim != 4 or w.shape[0] != B or w.shape[2:] != (T, T) or w.shape[1] == 0:
        raise ValueError(f"weights has shape {w.shape}, but the batch is (B, T) = {(B, T)}; give one layer's "
                         f"weights (B, h, T, T) = ({B}, h, {T}, {T}) of the forward pass over batch.tokens")
    n = T - np.argmax(batch.scored, axis=1)  # (B,): the scored part starts at T - n
    b, t = np.nonzero(batch.scored)  # (N,), (N,): every scored query
    if t.size == 0 or (t - n[b] + 1 < 0).any():
        raise ValueError("batch is no induction batch: its scored positions must be the second copy of a repeat "
                         "(at most half the sequence, and at least one); make it with "
                         "train.make_batch(Config(task='induction', ...), rng)")
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
    with np.errstate(over="ignore"):
        z = logits - np.max(logits, axis=-1, keepdims=True)  # (B, T, V)
    if not np.all(np.isfinite(z)):
        raise ValueError(f"logits spread over more than the largest {logits.dtype} (max - min > "
                         f"{float(np.finfo(logits.dtype).max):.3g} in a row), so a loss would be inf; give logits of a "
                         "model's scale (scale them down)")
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
    logits, batch = check_logits(logits, batch)
    if losses is None:
        losses = token_losses(logits, batch.targets)  # (B, T)
    else:
        losses = _validate.finite_array(losses, "losses")
        if losses.shape != batch.tokens.shape:
            raise ValueError(f"losses has shape {losses.shape}; give token_losses(logits, batch.targets), "
                             f"{batch.tokens.shape}")
    scored = batch.scored
    if not scored.any():
        return Metrics(0.0, 0.0)
    correct = logits.argmax(-1) == batch.targets  # (B, T)
    return Metrics(float(losses[scored].mean()), float(correct[scored].mean()))
