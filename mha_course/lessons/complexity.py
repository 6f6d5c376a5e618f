"""The cost ledger of multi-head attention: FLOPs, memory, parameters (numpy only).

One multiply-add counts as 2 FLOPs. With ``T`` queries, ``S`` keys, ``D = d_model``:

- projections: Q and the output  2·T·D² each, K and V  2·S·D² each  (self-attention: 8·T·D²)
- attention:   Q Kᵀ  2·T·S·D,  weights · V  2·T·S·D                   (self-attention: 4·T²·D)

Neither depends on h: h heads of width d_k = D/h do h·(2·T·S·d_k) = 2·T·S·D work in total.
In self-attention the two parts are equal at T = 2·D. The score matrix holds B·h·T·S numbers.

Taught in 05_complexity.ipynb.
"""
from __future__ import annotations

import math
import numbers
import time
from typing import Callable, NamedTuple, Optional

import numpy as np

from .. import _validate
from ..mha import init_params, multi_head_attention

__all__ = ["Ledger", "ledger", "projection_flops", "attention_flops", "crossover_seq_len",
           "ffn_flops", "layer_crossover_seq_len", "causal_attention_flops", "decode_intensity",
           "score_memory_bytes", "param_count", "format_count", "format_bytes",
           "time_sweep", "loglog_slope"]


def projection_flops(T: int, d_model: int, S: int | None = None) -> int:
    """FLOPs of the four projections: 2·T·D² (Q) + 2·S·D² (K) + 2·S·D² (V) + 2·T·D² (out).

    >>> projection_flops(10, 4)  # 8·T·D² for self-attention
    1280
    """
    T, d_model = _validate.positive_ints(T, "T"), _validate.positive_ints(d_model, "d_model")
    S = T if S is None else _validate.positive_ints(S, "S")
    return _exact(lambda T, S, d_model: 4 * (T + S) * d_model * d_model, T=T, S=S, d_model=d_model)


def attention_flops(T: int, d_model: int, S: int | None = None) -> int:
    """FLOPs of Q Kᵀ and weights · V over all heads: 4·T·S·D (independent of h).

    >>> attention_flops(10, 4)  # 4·T²·D for self-attention
    1600
    """
    T, d_model = _validate.positive_ints(T, "T"), _validate.positive_ints(d_model, "d_model")
    S = T if S is None else _validate.positive_ints(S, "S")
    return _exact(lambda T, S, d_model: 4 * T * S * d_model, T=T, S=S, d_model=d_model)


def _exact(formula, **sizes):
    """formula(**sizes) exactly: Python ints for scalar sizes (no limit); for arrays of sizes, int64 after
    checking that they broadcast together and that no entry passes 2**63 (numpy would wrap it round)."""
    arrays = {k: v for k, v in sizes.items() if isinstance(v, np.ndarray)}
    if not arrays:
        return formula(**sizes)
    try:
        np.broadcast_shapes(*(a.shape for a in arrays.values()))
    except ValueError:
        raise ValueError("the arrays of sizes " + ", ".join(f"{k} {a.shape}" for k, a in arrays.items())
                         + " do not broadcast together; give them one length, or one of them as a single size") from None
    if float(np.max(formula(**{k: np.asarray(v, dtype=float) for k, v in sizes.items()}))) >= 2.0 ** 63:
        raise ValueError(f"the result for {', '.join(f'{k}={v}' for k, v in sizes.items())} passes int64's 2**63; "
                         "give each size as a Python int for an exact count")
    return formula(**sizes)


def crossover_seq_len(d_model: int) -> int:
    """The seq_len where attention FLOPs equal projection FLOPs in self-attention: 2·d_model."""
    return 2 * _validate.positive_ints(d_model, "d_model")


def ffn_flops(T: int, d_model: int, expansion: int = 4) -> int:
    """FLOPs of the feed-forward sub-layer beside attention: (T, D)(D, e·D), then (T, e·D)(e·D, D).

    2·T·D·(e·D) per product, two products: 4·e·T·D², i.e. 16·T·D² for the usual e = 4.

    >>> ffn_flops(10, 4)
    2560
    """
    T = _validate.positive_int(T, "T")
    d_model = _validate.positive_int(d_model, "d_model")
    expansion = _validate.positive_int(expansion, "expansion")
    return 4 * expansion * T * d_model * d_model


def layer_crossover_seq_len(d_model: int, expansion: int = 4) -> int:
    """The seq_len where attention's 4·T²·D equals the rest of a Transformer layer's FLOPs.

    The rest is the projections' 8·T·D² plus the FFN's 4·e·T·D², so the two are equal at
    T = (2 + e)·D: 6·d_model for e = 4 (against 2·d_model for the attention block alone).

    >>> layer_crossover_seq_len(512)
    3072
    >>> T = layer_crossover_seq_len(64)
    >>> attention_flops(T, 64) == projection_flops(T, 64) + ffn_flops(T, 64)
    True
    """
    d_model = _validate.positive_int(d_model, "d_model")
    expansion = _validate.positive_int(expansion, "expansion")
    return (2 + expansion) * d_model


def causal_attention_flops(T: int, d_model: int) -> int:
    """FLOPs of Q Kᵀ and weights · V when only the T·(T+1)/2 allowed scores are computed.

    A causal kernel that skips the masked blocks does 4·D·T(T+1)/2 = 2·D·T·(T+1): a share of
    (T+1)/(2T) of ``attention_flops(T, D)``, about half for long sequences.

    >>> causal_attention_flops(4, 2), attention_flops(4, 2)
    (80, 128)
    """
    T = _validate.positive_int(T, "T")
    d_model = _validate.positive_int(d_model, "d_model")
    return 2 * d_model * T * (T + 1)


def decode_intensity(T: int, d_model: int, bytes_per_number: int = 2) -> float:
    """FLOPs per byte read when one new token is decoded against a cache of T earlier ones.

    One attention block, one token: the projections do 8·D² FLOPs and read the 4·D² weights;
    attention does 4·T·D FLOPs and reads the 2·T·D cached keys and values. So the ratio is
    (8·D² + 4·T·D) / ((4·D² + 2·T·D)·bytes) = 2 / bytes_per_number, whatever T and D are:
    1 FLOP per byte in 16-bit numbers. Far too little to keep a GPU's arithmetic busy, so
    decoding is limited by memory bandwidth (notebook 09's KV cache).

    >>> decode_intensity(1024, 512), decode_intensity(8, 4096, bytes_per_number=4)
    (1.0, 0.5)
    """
    T = _validate.positive_int(T, "T")
    d_model = _validate.positive_int(d_model, "d_model")
    bytes_per_number = _validate.positive_int(bytes_per_number, "bytes_per_number")
    flops = 8 * d_model * d_model + 4 * T * d_model
    read = (4 * d_model * d_model + 2 * T * d_model) * bytes_per_number
    return flops / read


def score_memory_bytes(B: int, h: int, T: int, S: int | None = None, dtype=np.float32) -> int:
    """Bytes of the (B, h, T, S) score (or weight) matrix: B·h·T·S·itemsize."""
    B, h, T = (_validate.positive_ints(v, n) for v, n in ((B, "B"), (h, "h"), (T, "T")))
    S = T if S is None else _validate.positive_ints(S, "S")
    itemsize = _itemsize(dtype)
    return _exact(lambda B, h, T, S: B * h * T * S * itemsize, B=B, h=h, T=T, S=S)


def _itemsize(dtype) -> int:
    """The bytes of one number of ``dtype`` (a numeric numpy dtype), else a ValueError naming dtype."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.kind not in "biufc":
        raise ValueError(f"dtype={dtype!r} is not a numeric numpy dtype; pass e.g. dtype=np.float32")
    return dt.itemsize


def param_count(d_model: int, bias: bool = False) -> int:
    """4·d_model² weights (+ 4·d_model biases); h does not appear."""
    d_model = _validate.positive_ints(d_model, "d_model")
    if not isinstance(bias, (bool, np.bool_)):
        raise ValueError(f"bias={bias!r} must be True or False")
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


class Ledger(NamedTuple):
    """The cost of one forward pass at given sizes (all exact integers)."""
    d_model: int
    h: int
    seq_len: int
    batch: int
    d_k: int
    projection_flops: int
    attention_flops: int
    total_flops: int
    score_bytes: int
    params: int

    def table(self) -> str:
        """A fixed-format text table (the live widget and nbval both show this)."""
        att = self.attention_flops / self.total_flops
        rows = [
            f"sizes            d_model={self.d_model}, h={self.h}, d_k={self.d_k}, "
            f"seq_len={self.seq_len}, batch={self.batch}",
            f"projections      {format_count(self.projection_flops)}FLOP  (8·T·d_model²)",
            f"attention        {format_count(self.attention_flops)}FLOP  (4·T²·d_model)",
            f"total            {format_count(self.total_flops)}FLOP  (attention share {att:.1%})",
            f"score matrix     {format_bytes(self.score_bytes)}  (B·h·T²·4 bytes, float32)",
            f"parameters       {self.params:,}  (4·d_model², whatever h is)",
        ]
        return "\n".join(rows)


def ledger(d_model: int, h: int, seq_len: int, batch: int = 1, dtype=np.float32) -> Ledger:
    """Sizes -> Ledger of FLOPs, score-matrix bytes and parameter count (self-attention).

    >>> ledger(512, 8, 1024).attention_flops == ledger(512, 1, 1024).attention_flops
    True
    """
    d_model = _validate.positive_int(d_model, "d_model")
    h = _validate.heads(d_model, h)
    T = _validate.positive_int(seq_len, "seq_len")
    B = _validate.positive_int(batch, "batch")
    _itemsize(dtype)
    proj = B * projection_flops(T, d_model)
    att = B * attention_flops(T, d_model)
    return Ledger(d_model, h, T, B, d_model // h, proj, att, proj + att,
                  score_memory_bytes(B, h, T, dtype=dtype), param_count(d_model))


def _whole_number(n, name: str) -> int:
    """A count of FLOPs or bytes: a whole number >= 0 (an int, or a float such as 2.0**30 that is one);
    bools, NaN, inf, negative and fractional values refused (4.5 would print as "4", silently rounded)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, numbers.Real) or \
            (not isinstance(n, numbers.Integral) and not math.isfinite(n)) or n < 0 or n != int(n):
        raise ValueError(f"{name}={n!r} must be a whole number >= 0 (a count of FLOPs or bytes), such as "
                         f"{name}=1024")
    return int(n)


def format_count(n: int) -> str:
    """12_345_678 -> '12.35 M' (SI prefixes, two decimals, trailing space for the unit)."""
    n = _whole_number(n, "n")
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {prefix}"
    return f"{n:.0f} "


def format_bytes(n: int) -> str:
    """1_048_576 -> '1.00 MiB' (binary prefixes)."""
    n = _whole_number(n, "n")
    for factor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}"
    return f"{n:.0f} B"


def time_sweep(seq_lens, d_model: int, h: int, *, rng: np.random.Generator, repeats: int = 3,
               batch: int = 1, progress: Optional[Callable[[int, int], None]] = None) -> np.ndarray:
    """seq_lens (N,) -> median wall-clock seconds (N,) of one multi_head_attention forward pass.

    For each T: x ~ N(0, 1) of shape (batch, T, d_model), one warm-up call, then ``repeats``
    timed calls (``time.perf_counter``); the median resists the noise of a shared machine.
    ``progress(done, total)`` is called after each size (for a progress bar). The numbers
    depend on this machine; only their growth with T is meaningful (see ``loglog_slope``).

    >>> t = time_sweep([4, 8], 8, 2, rng=np.random.default_rng(0), repeats=1)
    >>> t.shape, bool(np.all(t > 0))
    ((2,), True)
    """
    lens = [_validate.positive_int(T, "seq_len") for T in np.atleast_1d(seq_lens).tolist()]
    h = _validate.heads(_validate.positive_int(d_model, "d_model"), h)
    repeats = _validate.positive_int(repeats, "repeats")
    batch = _validate.positive_int(batch, "batch")
    rng = _validate.generator(rng)
    if progress is not None and not callable(progress):
        raise ValueError(f"progress={progress!r} must be a function progress(done, total), or None")
    _validate.allocation(8 * batch * max(lens) * (2 * h * max(lens) + 6 * d_model),
                         f"a forward pass over T={max(lens)} tokens (its (batch, h, T, T) weights)",
                         "time shorter sequences (seq_lens)")
    params = init_params(d_model, rng=rng)
    medians = np.empty(len(lens))
    for i, T in enumerate(lens):
        x = rng.normal(size=(batch, T, d_model))
        multi_head_attention(x, params, h)  # warm-up: first-touch memory, caches
        medians[i] = np.median([_time_once(x, params, h) for _ in range(repeats)])
        if progress is not None:
            progress(i + 1, len(lens))
    return medians


def _time_once(x, params, h) -> float:
    start = time.perf_counter()
    multi_head_attention(x, params, h)
    return time.perf_counter() - start


def loglog_slope(xs, ys) -> float:
    """xs (N,), ys (N,) positive -> slope p of the least-squares line log y = p·log x + c.

    If y grows like x^p, the slope is p: 1 for linear cost, 2 for quadratic.

    >>> print(f"{loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]):.4f}")
    2.0000
    """
    try:
        x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"xs={xs!r} and ys={ys!r} must be numbers; pass two 1-D lists of positive numbers") from None
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"xs and ys must be 1-D of the same length >= 2, got shapes "
                         f"{x.shape} and {y.shape}; pass one y per x")
    if not (np.all(x > 0) and np.all(y > 0) and np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("xs and ys must be positive and finite to take logarithms; "
                         f"got xs={x.tolist()}, ys={y.tolist()}")
    if np.ptp(x) == 0:
        raise ValueError(f"xs are all equal ({x[0]}); a slope needs at least two different x")
    slope, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope)
