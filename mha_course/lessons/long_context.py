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
- **PagedAttention** (Kwon et al. 2023): ``PagedKVCache``, fixed-size blocks and a block table per
  sequence; ``serve`` decodes requests of different lengths with it or with contiguous caches.
- **Split-KV decoding**: ``split_kv_threaded`` runs ``split_kv_partials`` chunk by chunk on threads.
- **KV quantisation**: ``QuantizedKVCache`` (what a quantised cache gives back) and
  ``quantized_kv_bytes_per_token``.

Taught in 13_long_context.ipynb.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from .. import _validate
from ..efficient import check_attention_inputs, check_n_splits, merge_attention_partials, split_kv_partials
from ..gqa import KVCache, RollingKVCache, cached_causal_mask, dequantize_kv, quantize_kv
from ..runtime import run_jobs
from . import checkpoints
from . import gqa as decode
from . import model as train
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
    T = _validate.positive_int(T, "T")
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
    return train.make_batch(config._replace(seq_len=_validate.positive_int(T, "T")), rng, n)


def shifted_batch(config, T: int, rng: np.random.Generator, n: int = 256):
    """The training task (config.seq_len tokens) after T - seq_len noise tokens: Batch (n, T).

    The same copies and distances as in training, at positions seq_len .. T - 1 that training never had.

    >>> b = shifted_batch(checkpoints.LONG_CONTEXT, 48, np.random.default_rng(0), 2)
    >>> b.tokens.shape, bool(b.scored[:, :32].any())
    ((2, 48), False)
    """
    T = _validate.positive_int(T, "T")
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
    if kind not in ("stretched", "shifted"):
        raise ValueError(f"kind={kind!r}: choose 'stretched' or 'shifted'")
    rng = np.random.default_rng(seed)
    make = stretched_batch if kind == "stretched" else shifted_batch
    batch = make(config, T, rng, n)
    cfg, p = at_length(params, config, T)
    return _scored_losses(train.forward(p, batch.tokens, cfg)[0], batch)


def extrapolation_table(models: dict, lengths=LENGTHS, kind: str = "stretched", n: int = 256,
                        progress: bool = False) -> dict:
    """{name: (Config, Model)} -> {name: [(Metrics, position losses) for each length]}; a tqdm bar."""
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
    head = f"{'':<22}" + "".join(f"{f'{T // train_len}x = {T} tokens':>22}" for T in lengths)
    sub = f"{'':<22}" + "".join(f"{'accuracy':>12}{'loss':>10}" for _ in lengths)
    rows = [f"{name:<22}" + "".join(f"{m.accuracy:>12.3f}{m.loss:>10.3f}" for m, _ in runs)
            for name, runs in table.items()]
    return "\n".join([head, sub, *rows])


def rope_variants(config, params) -> dict:
    """The trained RoPE model -> {name: (Config, Model)}: unchanged, and with each scaling of
    checkpoints.LONG_SCALINGS (factor 4), the same weights (no retraining)."""
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
    scored queries t; column 1 is a previous-token head's target."""
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
    _, weights = train.forward(params, batch.tokens, config)  # [(B, h, T, T)] * L
    return np.stack([w[:, :, 1:, 0].mean(axis=(0, 2)) for w in weights])  # (L, h)


def stream_batch(config, episodes: int, rng: np.random.Generator, n: int = 64):
    """``episodes`` sequences of the training task, one after another: Batch (n, episodes · seq_len).

    A stream longer than training, in which every part is the task the model knows.

    >>> stream_batch(checkpoints.LONG_CONTEXT, 8, np.random.default_rng(0), 3).tokens.shape
    (3, 128)
    """
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


# ----------------------------------------------------------------------------- PagedAttention
class PagedKVCache:
    """A pool of ``n_blocks`` blocks of ``block_size`` tokens' keys and values, shared by sequences.

    Each sequence owns a **block table** (the ids of its blocks, in order); a block is taken from
    the free list only when the previous one is full, so a sequence wastes at most block_size - 1
    slots (Kwon et al. 2023, vLLM). ``sequence(i)`` returns the object that
    ``grouped_query_attention(..., cache=...)`` fills for sequence i. ``release(i)`` gives its blocks back.

    >>> pool = PagedKVCache(n_blocks=8, block_size=4, h_kv=1, d_k=2)
    >>> s = pool.sequence(0)
    >>> _ = s.append(np.ones((1, 1, 6, 2)), np.ones((1, 1, 6, 2)))
    >>> pool.tables[0], pool.used_slots, pool.filled_slots
    ([0, 1], 8, 6)
    """

    def __init__(self, n_blocks: int, block_size: int, h_kv: int, d_k: int, dtype=np.float64):
        n_blocks, self.block_size, self.h_kv, self.d_k = (
            _validate.positive_int(v, n) for v, n in
            ((n_blocks, "n_blocks"), (block_size, "block_size"), (h_kv, "h_kv"), (d_k, "d_k")))
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind != "f":
            raise ValueError(f"dtype={dtype} is not a float type; use np.float32 or np.float64")
        self.keys = np.zeros((n_blocks, self.h_kv, self.block_size, self.d_k), dtype)  # the pool
        self.values = np.zeros_like(self.keys)
        self.free = list(range(n_blocks))
        self.tables: dict = {}   # sequence id -> [block ids]
        self.lengths: dict = {}  # sequence id -> tokens held

    def sequence(self, seq) -> "PagedSequence":
        """The cache of sequence ``seq`` (created empty on first use)."""
        try:
            hash(seq)
        except TypeError:
            raise TypeError(f"seq={seq!r} must be a hashable id, such as the request's number") from None
        self.tables.setdefault(seq, [])
        self.lengths.setdefault(seq, 0)
        return PagedSequence(self, seq)

    def held(self, seq) -> tuple:
        """(block table, length) of sequence ``seq``; a ValueError if the pool does not hold it."""
        if seq not in self.tables:
            known = ", ".join(repr(k) for k in self.tables) or "none"
            raise ValueError(f"the pool holds no sequence {seq!r} (it holds: {known}); it was released or never "
                             f"made: call pool.sequence({seq!r}) for a new, empty one")
        return self.tables[seq], self.lengths[seq]

    def _checked(self, a, name: str) -> np.ndarray:
        """K or V: real, finite, (1, h_kv, T >= 1, d_k), values that fit the pool's dtype."""
        a = _validate.finite_array(a, name)
        want = f"(1, h_kv={self.h_kv}, T >= 1, d_k={self.d_k})"
        if a.ndim != 4 or a.shape[0] != 1 or a.shape[1] != self.h_kv or a.shape[3] != self.d_k or a.shape[2] < 1:
            fix = ("a PagedKVCache sequence holds one row: append each row to its own pool.sequence(i)"
                   if a.ndim == 4 and a.shape[0] > 1 else "make the pool with the sizes of your keys")
            raise ValueError(f"{name} has shape {a.shape}; a sequence of this pool takes {want}: {fix}")
        return _validate.cast(a, self.keys.dtype, name, "make the PagedKVCache with dtype=np.float32 (or np.float64)")

    def append(self, seq, K, V) -> tuple:
        """K, V (1, h_kv, T, d_k) of sequence ``seq`` -> all its keys and values (1, h_kv, length, d_k).

        Everything is checked before anything changes: a refused append leaves the pool as it was.
        """
        table, n = self.held(seq)
        K, V = self._checked(K, "K"), self._checked(V, "V")
        if K.shape != V.shape:
            raise ValueError(f"K has shape {K.shape} but V has shape {V.shape}; give one value per key")
        T = K.shape[2]
        need = -(-(n + T) // self.block_size) - len(table)  # new blocks for the T tokens
        if need > len(self.free):
            raise ValueError(f"sequence {seq!r} needs {need} more blocks of {self.block_size} for {T} tokens, but "
                             f"only {len(self.free)} of the pool's {self.keys.shape[0]} are free (the rest are all in use); make a bigger "
                             "PagedKVCache or release finished sequences")
        table.extend(self.free.pop(0) for _ in range(need))  # a new block only when the last one is full
        for i in range(T):
            pos = n + i
            block, slot = table[pos // self.block_size], pos % self.block_size
            self.keys[block, :, slot], self.values[block, :, slot] = K[0, :, i], V[0, :, i]
        self.lengths[seq] = n + T
        return self.gather(seq)

    def gather(self, seq) -> tuple:
        """Sequence ``seq``'s keys and values in order, read through its block table: (1, h_kv, length, d_k)."""
        table, n = self.held(seq)
        K = self.keys[table].transpose(1, 0, 2, 3).reshape(self.h_kv, -1, self.d_k)[:, :n]  # (h_kv, n, d_k)
        V = self.values[table].transpose(1, 0, 2, 3).reshape(self.h_kv, -1, self.d_k)[:, :n]
        return K[None], V[None]

    def release(self, seq) -> None:
        """Give sequence ``seq``'s blocks back to the free list."""
        table, _ = self.held(seq)
        self.free.extend(table)
        del self.tables[seq], self.lengths[seq]

    @property
    def used_slots(self) -> int:
        """Token slots in blocks that belong to some sequence."""
        return sum(len(t) for t in self.tables.values()) * self.block_size

    @property
    def filled_slots(self) -> int:
        """Token slots that hold a token."""
        return sum(self.lengths.values())


class PagedSequence:
    """One sequence of a PagedKVCache, with KVCache's interface for grouped_query_attention."""

    def __init__(self, pool: PagedKVCache, seq):
        if not isinstance(pool, PagedKVCache):
            raise TypeError(f"pool must be a PagedKVCache, got {type(pool).__name__}; use pool.sequence(i)")
        pool.held(seq)
        self.pool, self.seq = pool, seq
        self.shape = (1, pool.h_kv, pool.d_k)

    @property
    def length(self) -> int:
        return self.pool.held(self.seq)[1]

    def next_mask(self, T: int) -> np.ndarray:
        """T new queries -> (T, length + T) bool, causal (as KVCache.next_mask)."""
        return cached_causal_mask(T, self.length)

    def append(self, K, V) -> tuple:
        return self.pool.append(self.seq, K, V)


class ServeResult(NamedTuple):
    """What ``serve`` gives back: the tokens and last logits of each request, and the slots."""
    tokens: list          # per request: prompt + new tokens (1-D ints)
    logits: list          # per request: (n_new, V) the logits each new token was picked from
    reserved_slots: int   # token slots the caches set aside (per layer)
    filled_slots: int     # token slots that hold a token (per layer)


def serve(params, config, prompts, n_new: int, *, max_len: int, block_size: Optional[int] = None) -> ServeResult:
    """Greedy decoding of several prompts of different lengths, each with its own cache per layer.

    ``block_size`` None: contiguous KVCache(1, ..., max_len) per request (what a server that
    reserves max_len per request holds); otherwise one PagedKVCache per layer shared by all
    requests. Both run decode.forward_cached, so the tokens and logits are the same.
    """
    n_new = _validate.positive_int(n_new, "n_new")
    max_len = _validate.positive_int(max_len, "max_len")
    if block_size is not None:
        block_size = _validate.positive_int(block_size, "block_size")
    if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__len__") or len(prompts) == 0:
        raise ValueError(f"prompts must be a non-empty list of prompts (1-D token ids), got {type(prompts).__name__}"
                         f"{'' if not hasattr(prompts, '__len__') else ' of length ' + str(len(prompts))}; "
                         "give at least one, e.g. [np.array([1, 2, 3])]")
    prompts = [_validate.token_ids(p, config.vocab, f"prompts[{i}]") for i, p in enumerate(prompts)]
    for i, p in enumerate(prompts):
        if p.ndim != 1 or p.size == 0:
            raise ValueError(f"prompts[{i}] has shape {p.shape}; each prompt is 1-D with at least one token")
        if p.size + n_new > max_len:
            raise ValueError(f"prompts[{i}] has {p.size} tokens and n_new={n_new}: {p.size + n_new} > "
                             f"max_len={max_len}; give max_len >= {p.size + n_new}")
    h_kv, d_k = config.h_kv or config.h, config.d_model // config.h
    if block_size is None:
        caches = [[KVCache(1, h_kv, d_k, max_len) for _ in params.layers] for _ in prompts]
        reserved = len(prompts) * max_len
    else:
        n_blocks = sum(-(-(len(p) + n_new) // block_size) for p in prompts)
        pools = [PagedKVCache(n_blocks, block_size, h_kv, d_k) for _ in params.layers]
        caches = [[pool.sequence(i) for pool in pools] for i in range(len(prompts))]
    runs = [_greedy(params, config, prompt, n_new, cache) for prompt, cache in zip(prompts, caches)]
    tokens, logits = [r[0] for r in runs], [r[1] for r in runs]
    filled = sum(len(p) + n_new - 1 for p in prompts)  # the last new token is never fed back
    if block_size is not None:
        reserved = pools[0].used_slots
    return ServeResult(tokens, logits, reserved, filled)


def _greedy(params, config, prompt, n_new: int, caches) -> tuple:
    """One request: ``gqa.greedy_steps`` on its paged caches -> (tokens (P + n_new,), logits (n_new, V))."""
    prompt = np.asarray(prompt)
    steps = list(decode.greedy_steps(params, config, prompt[None], n_new, caches=caches))  # [((1,), (1, V))]
    return np.concatenate([prompt, [int(t[0]) for t, _ in steps]]), np.stack([logits[0] for _, logits in steps])


# ----------------------------------------------------------------------------- split-KV, timed
def split_kv_threaded(Q, K, V, n_splits: int, workers: int, mask=None) -> np.ndarray:
    """``split_kv_attention`` (the same inputs, the same numbers) with its chunks computed in parallel
    (``workers`` > 1: the package's one pool of a thread per core, BLAS on one thread inside it,
    ``fast.run_jobs``), then merged; for timing. n_splits > S is refused, as by split_kv_attention."""
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    workers = _validate.positive_int(workers, "workers")
    S = K.shape[-2]
    n_splits = check_n_splits(n_splits, S)
    if mask is not None:
        mask = np.broadcast_to(mask, mask.shape[:-1] + (S,))  # (..., T|1, S): sliced per chunk
    chunks = np.array_split(np.arange(S), n_splits)
    parts = [None] * len(chunks)

    def part(i):
        c = chunks[i]
        parts[i] = split_kv_partials(Q, K[..., c, :], V[..., c, :], 1, None if mask is None else mask[..., c])

    run_jobs(part, list(range(len(chunks))), parallel=workers > 1)
    return merge_attention_partials([o[0] for o, _ in parts], [lse[0] for _, lse in parts])


# ----------------------------------------------------------------------------- KV quantisation
class QuantizedKVCache(KVCache):
    """A KVCache that holds what a ``bits``-bit cache gives back: keys and values round-tripped
    through ``quantize_kv`` / ``dequantize_kv`` (bits 2-15), or through float16 (bits 16, the
    usual unquantised cache)."""

    def __init__(self, batch: int, h_kv: int, d_k: int, max_len: int, bits: int):
        super().__init__(batch, h_kv, d_k, max_len)
        if bits != 16:
            quantize_kv(np.zeros((1, 1)), bits)  # a ValueError for a bad ``bits``
        self.bits = bits

    def append(self, K, V):
        if self.bits == 16:
            K, V = (np.asarray(a).astype(np.float16).astype(np.float64) for a in (K, V))
        else:
            K, V = (dequantize_kv(*quantize_kv(a, self.bits)) for a in (K, V))
        return super().append(K, V)


def quantized_metrics(params, config, batch, bits: Optional[int]):
    """Model, Batch -> Metrics with every layer's keys and values stored at ``bits`` (None: float64)."""
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

