"""Split-KV decoding (FlashDecoding, Dao et al. 2023): attention over chunks of the keys, merged exactly.

Each chunk of the keys gives a partial output and its log-sum-exp (``split_kv_partials``); the
partials are merged by their shares of the softmax's denominator (``merge_attention_partials``).
The result is ``scaled_dot_product_attention``'s output for any 1 <= n_splits <= S. It helps when
B · h is small and S long: one query per head leaves the other cores idle unless the keys are split
too. Importable from ``mha_course.efficient`` too.

Shapes: ``...`` batch axes, ``T`` queries, ``S`` keys, ``d_k`` query/key size, ``d_v`` value size.

Taught in 13_long_context.ipynb.
"""
from __future__ import annotations

import math

import numpy as np

from . import _validate
from .attention import check_attention_inputs

__all__ = ["check_n_splits", "split_kv_partials", "merge_attention_partials", "split_kv_attention"]


def check_n_splits(n_splits, S: int) -> int:
    """n_splits, S keys -> n_splits as an int in 1 .. S; a ValueError otherwise (a chunk needs a key:
    no silent cap, and no work that grows with n_splits beyond S).

    >>> check_n_splits(3, 7)
    3
    """
    n_splits, S = _validate.positive_int(n_splits, "n_splits"), _validate.positive_int(S, "S")
    if n_splits > S:
        raise ValueError(f"n_splits={n_splits} is more than the S={S} keys: every chunk needs at least one key; "
                         f"give 1 <= n_splits <= {S}")
    return n_splits


def split_kv_partials(Q, K, V, n_splits: int, mask=None) -> tuple[list, list]:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> n_splits partial outputs (..., T, d_v)
    and their log-sum-exps (..., T, 1), one per chunk of the keys.

    Chunk c holds keys ``np.array_split(range(S), n_splits)[c]`` (contiguous, sizes differ by at
    most one; ``1 <= n_splits <= S``, so no chunk is empty). As in Flash-Decoding, each chunk's
    scores are computed inside the chunk, from its own keys: at most (..., T, S / n_splits) scores
    live at once (never the whole T x S matrix), plus the n_splits outputs. Its output is the
    softmax-weighted mean of its values alone, and lse = log sum exp(scores of the chunk); a chunk
    the mask blocks entirely gives lse = -inf and a zero output. Each chunk is independent: on a
    GPU, one block of threads each.

    >>> rng = np.random.default_rng(0)
    >>> outs, lses = split_kv_partials(rng.normal(size=(1, 4)), rng.normal(size=(5, 4)), np.eye(5), 2)
    >>> [o.shape for o in outs], [l.shape for l in lses]
    ([(1, 5), (1, 5)], [(1, 1), (1, 1)])
    """
    Q, K, V, mask = check_attention_inputs(Q, K, V, mask)
    S = K.shape[-2]
    n_splits = check_n_splits(n_splits, S)
    if mask is not None:
        mask = np.broadcast_to(mask, (*Q.shape[:-1], S))  # (..., T, S), a view: its chunks are slices
    bounds = np.cumsum([0] + [len(c) for c in np.array_split(np.arange(S), n_splits)])  # (n_splits + 1,)
    outs, lses = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):  # chunk c: keys lo .. hi - 1
        k, v = K[..., lo:hi, :], V[..., lo:hi, :]  # (..., c, d_k), (..., c, d_v): views
        s = Q @ np.swapaxes(k, -1, -2)  # (..., T, d_k) x (..., d_k, c) -> (..., T, c), the chunk's scores
        s /= math.sqrt(Q.shape[-1])  # in place, as every step below: one (..., T, c) array per chunk
        if mask is not None:
            s[~mask[..., lo:hi]] = -np.inf  # True = may attend
        m = s.max(axis=-1, keepdims=True)  # (..., T, 1); -inf: nothing allowed
        shift = np.where(np.isfinite(m), m, 0.0)
        s -= shift
        p = np.exp(s, out=s)  # (..., T, c)
        total = p.sum(axis=-1, keepdims=True)  # (..., T, 1)
        outs.append((p @ v) / np.where(total > 0, total, 1.0))  # (..., T, c) x (..., c, d_v) -> (..., T, d_v)
        with np.errstate(divide="ignore"):
            lses.append(np.where(total > 0, shift + np.log(total), -np.inf))  # (..., T, 1)
        del s, p  # freed before the next chunk's scores are made
    return outs, lses


def _partials(outs, lses) -> tuple[list, list]:
    """The checks of merge_attention_partials: as many lses as outputs (at least one), every output
    (..., T, d_v) finite and of one shape, every lse (..., T, 1) finite or -inf (a chunk with no key)."""
    for value, name in ((outs, "outs"), (lses, "lses")):
        if isinstance(value, np.ndarray) or not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} must be a list (one entry per chunk), got {type(value).__name__}; "
                            "pass the two lists split_kv_partials returns")
    if not outs or len(outs) != len(lses):
        raise ValueError(f"outs has {len(outs)} partial outputs and lses {len(lses)} log-sum-exps; give one lse per "
                         "output, at least one of each (as split_kv_partials returns them)")
    for value, name in ((outs, "outs"), (lses, "lses")):
        kinds = [np.asarray(v).dtype.kind for v in value]
        if "b" in kinds:
            raise ValueError(f"{name}[{kinds.index('b')}] is boolean; {name} hold numbers (partial outputs and their "
                             "log-sum-exps, as split_kv_partials returns them), not masks")
    outs = [_validate.finite_array(o, f"outs[{i}]") for i, o in enumerate(outs)]
    lses = [_validate.float_array(l, f"lses[{i}]") for i, l in enumerate(lses)]
    for i, (o, l) in enumerate(zip(outs, lses)):
        if o.ndim < 2 or o.shape != outs[0].shape:
            raise ValueError(f"outs[{i}] has shape {o.shape}; every partial output is (..., T, d_v) of one shape "
                             f"({outs[0].shape})")
        if l.shape != o.shape[:-1] + (1,):
            raise ValueError(f"lses[{i}] has shape {l.shape} but outs[{i}] {o.shape}; an lse is (..., T, 1): "
                             f"{o.shape[:-1] + (1,)}, one per query row (keepdims=True)")
        if np.isnan(l).any() or (l == np.inf).any():
            raise ValueError(f"lses[{i}] holds NaN or +inf; a log-sum-exp is finite, or -inf for a chunk whose keys "
                             "are all masked")
    return outs, lses


def merge_attention_partials(outs, lses) -> np.ndarray:
    """n partial outputs (..., T, d_v) and their lses (..., T, 1) -> out (..., T, d_v), exactly.

    lse = log sum_c exp(lse_c) and out = sum_c exp(lse_c - lse) · out_c: each chunk's output
    weighted by its share of the softmax's denominator. Chunks with lse_c = -inf weigh 0; a
    row whose chunks are all -inf (every key masked) gives zeros, as in scaled_dot_product_attention.

    >>> merge_attention_partials([np.array([[1.0]]), np.array([[3.0]])], [np.zeros((1, 1))] * 2)
    array([[2.]])
    """
    outs, lses = _partials(outs, lses)
    lse_all = np.stack(lses)  # (n, ..., T, 1)
    m = lse_all.max(axis=0)  # (..., T, 1)
    shift = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(lse_all - shift)  # (n, ..., T, 1): exp(lse_c - max)
    total = w.sum(axis=0)  # (..., T, 1)
    merged = sum(w_c * o for w_c, o in zip(w, outs))  # (..., T, d_v)
    return (merged / np.where(total > 0, total, 1.0)).astype(np.result_type(*outs), copy=False)


def split_kv_attention(Q, K, V, n_splits: int, mask=None) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v), n_splits -> out (..., T, d_v).

    FlashDecoding's split-KV attention (Dao et al. 2023): the keys are cut into n_splits chunks
    (``split_kv_partials``: a partial output and its log-sum-exp per chunk, computed in
    parallel), then merged exactly (``merge_attention_partials``). The result equals
    ``scaled_dot_product_attention``'s output for any 1 <= n_splits <= S, whether or not it divides S
    (more splits than keys is a ValueError: a chunk needs a key).
    It helps when B · h is small and S long: one query per head leaves the other cores idle
    unless the keys are split too.

    >>> from mha_course.attention import scaled_dot_product_attention
    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(2, 1, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    >>> bool(np.allclose(split_kv_attention(Q, K, V, 3), scaled_dot_product_attention(Q, K, V)[0]))
    True
    """
    return merge_attention_partials(*split_kv_partials(Q, K, V, n_splits, mask))
