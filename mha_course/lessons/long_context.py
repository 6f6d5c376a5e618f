"""Notebook 13's experiments: attention past its training length, and the caches that serve it (numpy).

Shapes: ``B`` batch, ``T`` positions, ``V`` vocabulary, ``L`` the training length, ``h`` heads,
``h_kv`` key/value heads, ``d_k`` head size.

- **Extrapolation**: the induction model of notebook 08, trained at L = 16 positions with each
  position scheme (``SCHEMES``; the shipped ``long_<scheme>`` checkpoints, re-made by
  ``mha-course train long_context``), evaluated at 1x, 2x and 4x L. Two evaluations:
  ``stretched_batch`` (the task itself at k·L tokens: the copies are k times longer, so the
  distances the induction head must look back grow past any seen in training) and
  ``shifted_batch`` (the training task after (k - 1)·L tokens of noise: the same distances at
  positions never seen). A learned table has no rows past L: ``at_length`` gives it rows drawn
  as at initialisation, which is what rows that no gradient ever reached would hold.
- **RoPE's fixes** without retraining (``config._replace(rope_scaling=...)``, see
  ``mha_course.rope_inv_freq``) and after a short fine-tune (the ``long_rope_*_tuned`` checkpoints).
- **Attention sinks and rolling caches**: ``sink_weight`` (the weight each head puts on the first
  token), ``stream_batch`` (episodes of the task one after another) and ``stream_position_losses``
  (the loss per position, decoding through ``RollingKVCache`` caches with or without sinks).
- **PagedAttention** (Kwon et al. 2023) and **split-KV decoding**: ``PagedKVCache``, ``serve`` and
  ``split_kv_threaded`` live in ``lessons.long_serving`` and are re-exported here.
- **KV quantisation**: ``QuantizedKVCache`` (what a quantised cache gives back) and
  ``quantized_kv_bytes_per_token``.

Taught in 13_long_context.ipynb.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _validate
from ..gqa import ROLLING_POSITIONS, KVCache, RollingKVCache, dequantize_kv, quantize_kv
from . import _args, checkpoints
from . import gqa as decode
from . import model as train
from .long_serving import PagedKVCache, PagedSequence, ServeResult, serve, split_kv_threaded
from .model import token_losses  # the one cross-entropy; still read as long_context.token_losses

__all__ = ["SCHEMES", "TRAIN_LEN", "LENGTHS", "load_scheme", "length_models", "at_length", "stretched_batch", "shifted_batch",
           "token_losses", "evaluate_at", "extrapolation_table", "format_table",
           "rope_variants", "tuned_variants", "sink_weight", "stream_batch", "stream_position_losses",
           "PagedKVCache", "PagedSequence", "ServeResult", "serve", "split_kv_threaded",
           "QuantizedKVCache", "quantized_metrics", "quantized_kv_bytes_per_token", "uniform_share",
           "weight_by_distance"]

SCHEMES = ("learned", "sinusoidal", "rope", "alibi", "none")
TRAIN_LEN = checkpoints.LONG_CONTEXT.seq_len  # 16
LENGTHS = (TRAIN_LEN, 2 * TRAIN_LEN, 4 * TRAIN_LEN)


# ----------------------------------------------------------------------------- the trained models
def load_scheme(name: str) -> tuple:
    """name ("rope", "rope_yarn_tuned", ...) -> (Config, Model) of the shipped ``long_<name>`` checkpoint."""
    names = sorted(k[len("long_"):] for k in checkpoints.CHECKPOINT_CONFIGS if k.startswith("long_"))
    if not isinstance(name, str) or name not in names:
        raise ValueError(f"name={name!r} is no shipped long-context model; choose one of {names}")
    config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path(f"long_{name}"))
    return config, params


def length_models() -> dict:
    """{(scheme, training length): (Config, Model)}: every scheme at 16, and learned, RoPE and ALiBi
    also trained at 8 and 32 (the ``long_<scheme>_len<L>`` checkpoints), for the train_len slider."""
    out = {(name, TRAIN_LEN): load_scheme(name) for name in SCHEMES}
    for name in ("learned", "rope", "alibi"):
        for L in (8, 32):
            out[(name, L)] = load_scheme(f"{name}_len{L}")
    return out


def at_length(params, config, T: int, rng: Optional[np.random.Generator] = None) -> tuple:
    """(Model, Config), T -> (Config for T positions, Model that can read them).

    A learned table shorter than T gets rows drawn as ``init_model`` draws them (N(0, 1), from
    ``rng``, default seeded by T): rows a model allocated but never trained hold just that,
    because no gradient reaches a position no training sequence had. Other schemes need nothing.

    >>> cfg, m = at_length(train.init_model(checkpoints.LONG_CONTEXT), checkpoints.LONG_CONTEXT, 64)
    >>> cfg.seq_len, m.pos.shape
    (64, (64, 32))
    """
    config = _args.model(params, config)
    T = _validate.positive_int(T, "T")
    rng = None if rng is None else _args.generator(rng)
    config = config._replace(seq_len=T)
    if params.pos is None or params.pos.shape[0] >= T:
        return config, params
    rng = np.random.default_rng(T) if rng is None else rng
    extra = rng.normal(size=(T - params.pos.shape[0], params.pos.shape[1]))  # (T - L, D), untrained
    return config, params._replace(pos=np.concatenate([params.pos, extra]))


def stretched_batch(config, T: int, rng: np.random.Generator, n: int = 256):
    """The induction task at T tokens: [noise][A][A], |A| from T/4 to T/2 (train.make_batch at seq_len T).

    >>> stretched_batch(checkpoints.LONG_CONTEXT, 64, np.random.default_rng(0), 2).tokens.shape
    (2, 64)
    """
    config, T, rng, n = _batch_args(config, T, rng, n)
    return train.make_batch(config._replace(seq_len=T), rng, n)


def _batch_args(config, T, rng, n) -> tuple:
    """The arguments every batch maker takes: a Config, a length T, a Generator, n sequences, all checked."""
    return (_args.config(config), _validate.positive_int(T, "T"), _args.generator(rng),
            _validate.positive_int(n, "n"))


def shifted_batch(config, T: int, rng: np.random.Generator, n: int = 256):
    """The training task (config.seq_len tokens) after T - seq_len noise tokens: Batch (n, T).

    The same copies and distances as in training, at positions seq_len .. T - 1 that training never had.

    >>> b = shifted_batch(checkpoints.LONG_CONTEXT, 48, np.random.default_rng(0), 2)
    >>> b.tokens.shape, bool(b.scored[:, :32].any())
    ((2, 48), False)
    """
    config, T, rng, n = _batch_args(config, T, rng, n)
    if T < config.seq_len:
        raise ValueError(f"T={T} is shorter than the training task's {config.seq_len} tokens; give T >= {config.seq_len}")
    b = train.make_batch(config, rng, n)
    noise = rng.integers(0, config.vocab, size=(n, T - config.seq_len))  # (n, T - L), never scored
    return train.Batch(np.concatenate([noise, b.tokens], 1), np.concatenate([noise, b.targets], 1),
                       np.concatenate([np.zeros(noise.shape, bool), b.scored], 1))


def _scored_losses(logits, batch) -> tuple:
    """logits (B, T, V), Batch -> (Metrics over the scored positions, mean loss per position (T,)):
    the model's one cross-entropy (``model.token_losses``, ``model.scored_metrics``)."""
    losses = token_losses(logits, batch.targets)  # (B, T)
    return train.scored_metrics(logits, batch, losses), _mean_per_position(losses, batch.scored)


def _mean_per_position(losses, scored) -> np.ndarray:
    count = scored.sum(0)  # (T,)
    with np.errstate(invalid="ignore"):
        return np.where(count > 0, np.where(scored, losses, 0).sum(0) / np.maximum(count, 1), np.nan)


def evaluate_at(params, config, T: int, kind: str = "stretched", seed: int = 0, n: int = 256):
    """Model, Config, T -> (Metrics, position losses (T,)) on ``n`` sequences of length T.

    ``kind``: "stretched" (the task at T tokens) or "shifted" (the training task after noise).
    """
    config = _args.model(params, config)
    if kind not in ("stretched", "shifted"):
        raise ValueError(f"kind={kind!r}: choose 'stretched' or 'shifted'")
    rng = np.random.default_rng(_args.whole(seed, "seed", 0, 2 ** 63 - 1, "a seed is a whole number >= 0"))
    make = stretched_batch if kind == "stretched" else shifted_batch
    batch = make(config, T, rng, n)
    cfg, p = at_length(params, config, T)
    return _scored_losses(train.forward(p, batch.tokens, cfg)[0], batch)


def extrapolation_table(models: dict, lengths=LENGTHS, kind: str = "stretched", n: int = 256,
                        progress: bool = False) -> dict:
    """{name: (Config, Model)} -> {name: [(Metrics, position losses) for each length]}; a tqdm bar."""
    models, lengths = _args.models(models), np.atleast_1d(_validate.positive_ints(lengths, "lengths")).tolist()
    n, progress = _validate.positive_int(n, "n"), _args.flag(progress, "progress")
    if kind not in ("stretched", "shifted"):
        raise ValueError(f"kind={kind!r}: choose 'stretched' or 'shifted'")
    jobs = [(name, T) for name in models for T in lengths]
    bar = _bar(len(jobs), f"evaluating ({kind})", progress)
    out = {name: [] for name in models}
    for name, T in jobs:
        config, params = models[name]
        out[name].append(evaluate_at(params, config, T, kind, seed=T, n=n))
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


def format_table(table: dict, lengths=LENGTHS, train_len: int = TRAIN_LEN) -> str:
    """The table of ``extrapolation_table`` as text: accuracy and loss at each length."""
    lengths = np.atleast_1d(_validate.positive_ints(lengths, "lengths")).tolist()
    train_len = _validate.positive_int(train_len, "train_len")
    if not isinstance(table, dict) or not table:
        raise ValueError(f"table={table!r:.60}: give the non-empty dict that extrapolation_table returns")
    for name, runs in table.items():
        if not isinstance(runs, (list, tuple)) or len(runs) != len(lengths) or \
                not all(isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], train.Metrics) for r in runs):
            raise ValueError(f"table[{name!r}] is not one (Metrics, position losses) per length ({len(lengths)} "
                             "lengths); give extrapolation_table(models, lengths) with the same lengths")
    head = f"{'':<22}" + "".join(f"{f'{T // train_len}x = {T} tokens':>22}" for T in lengths)
    sub = f"{'':<22}" + "".join(f"{'accuracy':>12}{'loss':>10}" for _ in lengths)
    rows = [f"{name:<22}" + "".join(f"{m.accuracy:>12.3f}{m.loss:>10.3f}" for m, _ in runs)
            for name, runs in table.items()]
    return "\n".join([head, sub, *rows])


def rope_variants(config, params) -> dict:
    """The trained RoPE model -> {name: (Config, Model)}: unchanged, and with each scaling of
    checkpoints.LONG_SCALINGS (factor 4), the same weights (no retraining)."""
    config = _args.model(params, config)
    if config.positions != "rope" or config.rope_scaling is not None:
        raise ValueError(f"config has positions={config.positions!r}, rope_scaling={config.rope_scaling!r}: the "
                         "scalings rescale RoPE's frequencies, so give an unscaled RoPE model (load_scheme('rope'))")
    out = {"rope": (config, params)}
    for name, scaling in checkpoints.LONG_SCALINGS.items():
        out[f"rope + {name}"] = (config._replace(rope_scaling=scaling), params)
    return out


def tuned_variants() -> dict:
    """The shipped fine-tunes at 4x: {name: (Config at the TRAINING length, Model)}.

    The config's seq_len is set back to 16 so that ``evaluate_at`` builds the same batches as for
    the other models (the fine-tune itself ran at 64 tokens).
    """
    out = {}
    for name in ("rope", *checkpoints.LONG_SCALINGS):
        tag = "rope_tuned" if name == "rope" else f"rope_{name}_tuned"
        config, params = load_scheme(tag)
        out["rope, tuned" if name == "rope" else f"rope + {name}, tuned"] = (config._replace(seq_len=TRAIN_LEN), params)
    return out


def weight_by_distance(params, config, batch, layer: int = 0) -> np.ndarray:
    """Model, Batch -> (h, T): each head's mean weight at distance d = t - s (column d), over the
    scored queries t; column 1 is a previous-token head's target. ``layer`` counts from 0 (-1 refused)."""
    config = _args.model(params, config)
    batch, layer = _args.batch(config, batch), _args.layer(config, layer)
    T = batch.tokens.shape[1]
    _, weights = train.forward(params, batch.tokens, config._replace(seq_len=T))
    b, t = np.nonzero(batch.scored)  # (N,), (N,)
    w = weights[layer][b, :, t]  # (N, h, T): each scored query's weights
    d = t[:, None] - np.arange(T)[None, :]  # (N, T) distance of each key
    out = np.zeros((config.h, T))
    for dist in range(T):
        rows, cols = np.nonzero(d == dist)
        if rows.size:
            out[:, dist] = w[rows, :, cols].sum(0) / len(t)  # mean over queries (0 where none has it)
    return out


def _bar(total: int, desc: str, progress: bool):
    if not progress:
        return None
    from tqdm.auto import tqdm  # imported only when a bar is wanted
    return tqdm(total=total, desc=desc, leave=False, mininterval=0.5)


# ----------------------------------------------------------------------------- sinks and rolling caches
def sink_weight(params, config, batch) -> np.ndarray:
    """Model, Batch -> (n_layers, h): each head's mean weight on position 0, over queries t >= 1.

    A head that ignored position would give it 1 / (t + 1) on average (see ``uniform_share``).
    """
    config = _args.model(params, config)
    batch = _args.batch(config, batch)
    if batch.tokens.shape[1] < 2:
        raise ValueError("batch has 1 position; the sink weight is over queries t >= 1: give T >= 2")
    _, weights = train.forward(params, batch.tokens, config)  # [(B, h, T, T)] * L
    return np.stack([w[:, :, 1:, 0].mean(axis=(0, 2)) for w in weights])  # (L, h)


def stream_batch(config, episodes: int, rng: np.random.Generator, n: int = 64):
    """``episodes`` sequences of the training task, one after another: Batch (n, episodes · seq_len).

    A stream longer than training, in which every part is the task the model knows.

    >>> stream_batch(checkpoints.LONG_CONTEXT, 8, np.random.default_rng(0), 3).tokens.shape
    (3, 128)
    """
    config, rng, n = _args.config(config), _args.generator(rng), _validate.positive_int(n, "n")
    parts = [train.make_batch(config, rng, n) for _ in range(_validate.positive_int(episodes, "episodes"))]
    return train.Batch(*(np.concatenate([getattr(p, f) for p in parts], axis=1) for f in train.Batch._fields))


def stream_position_losses(params, config, batch, window: Optional[int] = None, sinks: int = 0,
                           chunk: Optional[int] = None, positions: str = "absolute") -> tuple:
    """Model, Batch -> (position losses (T,), Metrics): full attention (``window`` None), or decoding
    through one ``RollingKVCache(window, sinks, positions=positions)`` per layer, ``chunk`` tokens per
    call (default: window; one token with ``positions="cache"``, StreamingLLM's, RoPE models only).

    Each call attends over what the caches hold, exactly as token-by-token decoding would
    (tests/core/test_long_context_core.py checks that against the masked full attention).
    """
    config = _args.model(params, config)
    batch = _args.batch(config, batch)
    if positions not in ROLLING_POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {ROLLING_POSITIONS}")
    if window is not None:
        window = _validate.positive_int(window, "window")
    sinks = _args.whole(sinks, "sinks", 0, 2 ** 31, "sinks counts the first tokens a rolling cache keeps (0: none)")
    if positions == "cache" and config.positions != "rope":
        raise ValueError(f"positions='cache' moves RoPE rotations inside the cache; this model has "
                         f"positions={config.positions!r}: use positions='absolute'")
    if window is None:
        if chunk is not None or sinks:
            raise ValueError(f"chunk={chunk!r} and sinks={sinks!r} apply to a rolling cache: give window= too "
                             "(window=None is full attention, in one call)")
        logits, _ = train.forward(params, batch.tokens, config)
    else:
        B, T = batch.tokens.shape
        h_kv, d_k = config.h_kv or config.h, config.d_model // config.h
        rope_base = config.rope_base if positions == "cache" else None
        caches = [RollingKVCache(B, h_kv, d_k, window, sinks, positions=positions, rope_base=rope_base)
                  for _ in params.layers]
        step = 1 if positions == "cache" else window if chunk is None else _validate.positive_int(chunk, "chunk")
        logits = np.concatenate([decode.forward_cached(params, batch.tokens[:, t:t + step], config, caches)
                                 for t in range(0, T, step)], axis=1)  # (B, T, V)
    metrics, per_position = _scored_losses(logits, batch)
    return per_position, metrics


# ----------------------------------------------------------------------------- KV quantisation
class QuantizedKVCache(KVCache):
    """A KVCache that holds what a ``bits``-bit cache gives back: keys and values round-tripped
    through ``quantize_kv`` / ``dequantize_kv`` (bits 2-15), or through float16 (bits 16, the
    usual unquantised cache)."""

    def __init__(self, batch: int, h_kv: int, d_k: int, max_len: int, bits: int):
        bits = _args.whole(bits, "bits", 2, 16, "bits per stored number: 2-15 quantised, 16 float16")
        super().__init__(batch, h_kv, d_k, max_len)
        self.bits = bits

    def append(self, K, V):
        if self.bits == 16:
            K, V = (np.asarray(a).astype(np.float16).astype(np.float64) for a in (K, V))
        else:
            K, V = (dequantize_kv(*quantize_kv(a, self.bits)) for a in (K, V))
        return super().append(K, V)


def quantized_metrics(params, config, batch, bits: Optional[int] = None):
    """Model, Batch -> Metrics with every layer's keys and values stored at ``bits`` (2-16; None: float64)."""
    config = _args.model(params, config)
    batch = _args.batch(config, batch)
    if bits is not None:
        bits = _args.whole(bits, "bits", 2, 16, "bits per stored number: 2-15 quantised, 16 float16, None float64")
    B, T = batch.tokens.shape
    h_kv, d_k = config.h_kv or config.h, config.d_model // config.h
    if bits is None:
        caches = [KVCache(B, h_kv, d_k, T) for _ in params.layers]
    else:
        caches = [QuantizedKVCache(B, h_kv, d_k, T, bits) for _ in params.layers]
    logits = decode.forward_cached(params, batch.tokens, config, caches)  # (B, T, V)
    return _scored_losses(logits, batch)[0]


def quantized_kv_bytes_per_token(layers: int, h_kv: int, d_k: int, bits: int, scale_bytes: int = 2) -> float:
    """Bytes per token of a KV cache: 2 (K and V) · layers · h_kv · (d_k · bits / 8 + scale_bytes),
    one float16 scale per token and head; 16 bits: plain float16, no scale.

    >>> [quantized_kv_bytes_per_token(32, 8, 128, b) for b in (16, 8, 4)]  # a 7B-class GQA model
    [131072.0, 66560.0, 33792.0]
    """
    layers, h_kv, d_k, scale_bytes = (_validate.positive_int(v, n) for v, n in (
        (layers, "layers"), (h_kv, "h_kv"), (d_k, "d_k"), (scale_bytes, "scale_bytes")))
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 2 <= bits <= 16:
        raise ValueError(f"bits={bits!r} must be a whole number from 2 to 16 (16: float16; 8 and 4 the usual "
                         "quantised caches)")
    if bits == 16:
        return float(2 * layers * h_kv * d_k * 2)
    return float(2 * layers * h_kv * (d_k * bits / 8 + scale_bytes))


def uniform_share(T: int) -> float:
    """The mean over queries t = 1 .. T-1 of 1 / (t + 1): position 0's share if weights were uniform.

    >>> round(uniform_share(3), 4)  # queries 1 and 2 see 2 and 3 keys: (1/2 + 1/3) / 2
    0.4167
    """
    T = _validate.positive_int(T, "T")
    if T < 2:
        raise ValueError(f"T={T}: the share is over queries 1 .. T-1, and T=1 has none; give T >= 2")
    return float(np.mean(1.0 / (np.arange(1, T) + 1)))

