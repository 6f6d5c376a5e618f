"""Attention over fewer pairs, or through a cheaper kernel: sparse patterns and linear attention (numpy only).

- The sparse patterns, as masks (True = may attend): a sliding window (``sliding_window_mask``; its
  banded kernel is ``efficient.sliding_window_attention``), Longformer's window with global tokens and
  dilated windows, BigBird's window, global and random keys.
- Linear attention (Katharopoulos et al., 2020): out_t = phi(q_t) (phi(K)^T V) / (phi(q_t) phi(K)^T 1)
  with phi = elu + 1, never forming the T x S matrix (``linear_attention``, O(T); its O(T S) form
  ``linear_attention_quadratic``). Not softmax attention: a different kernel.

Everything here is importable from ``mha_course.efficient`` too (the names of notebook 10).
Shapes: ``...`` batch axes, ``T`` queries, ``S`` keys, ``d_k`` query/key size, ``d_v`` value size.

Taught in 10_efficient_attention.ipynb.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from . import _validate
from .attention import check_attention_inputs
from .masks import causal_mask
from .runtime import run_jobs

__all__ = ["sliding_window_mask", "longformer_mask", "dilated_window_mask", "bigbird_mask",
           "elu_feature_map", "linear_attention", "linear_attention_quadratic"]


# ---- Sliding windows and sparse patterns (Longformer, BigBird). Taught in 10. ----

def _offsets(T: int) -> np.ndarray:
    """T -> (T, T) ints t - s (query t, key s): how far back key s lies from query t."""
    T = _validate.positive_int(T, "T")
    _validate.allocation(3 * 8 * T * T, f"a ({T}, {T}) mask", "ask for fewer tokens T")
    return np.arange(T)[:, None] - np.arange(T)[None, :]


def sliding_window_mask(T: int, window: int) -> np.ndarray:
    """T, window -> (T, T) bool: query t may attend keys s with t - window < s <= t.

    Each query sees itself and the window - 1 keys before it; window >= T is the causal mask.

    >>> sliding_window_mask(4, 2).astype(int)
    array([[1, 0, 0, 0],
           [1, 1, 0, 0],
           [0, 1, 1, 0],
           [0, 0, 1, 1]])
    """
    return causal_mask(T, window=_validate.positive_int(window, "window"))  # (T, T): the one builder (masks.py)


def longformer_mask(T: int, window: int, global_tokens) -> np.ndarray:
    """T, window, global_tokens (indices) -> (T, T) bool: a symmetric window |t - s| < window,
    plus global tokens that attend every position and that every position attends (Longformer).

    >>> longformer_mask(5, 1, [0]).astype(int)
    array([[1, 1, 1, 1, 1],
           [1, 1, 0, 0, 0],
           [1, 0, 1, 0, 0],
           [1, 0, 0, 1, 0],
           [1, 0, 0, 0, 1]])
    """
    mask = np.abs(_offsets(T)) < _validate.positive_int(window, "window")
    g = _token_indices(global_tokens, T, "global_tokens")
    mask[g, :] = True  # global tokens see everything
    mask[:, g] = True  # and everything sees them
    return mask


def _token_indices(tokens, T: int, name: str) -> np.ndarray:
    """tokens -> 1-D int array of positions in 0..T-1, or a ValueError naming the bad ones.

    Whole numbers only: True is not position 1, and 1.7 is no position at all.
    """
    arr = np.asarray(tokens).reshape(-1)
    has_bool = arr.dtype == np.bool_ or (arr.dtype.kind in "iuO" and any(
        isinstance(t, (bool, np.bool_)) for t in np.asarray(tokens, dtype=object).reshape(-1)))  # [0, True]
    if has_bool or not (np.issubdtype(arr.dtype, np.integer) or (
            np.issubdtype(arr.dtype, np.floating) and np.isfinite(arr).all() and (arr == np.round(arr)).all())):
        raise ValueError(f"{name} must be whole-number token positions, got {arr.tolist()!r} (dtype {arr.dtype}); "
                         "give indices of the sequence such as [0, 5]")
    idx = arr.astype(int)
    bad = arr[(arr < 0) | (arr >= T)]
    if bad.size:
        raise ValueError(f"{name} holds positions {bad.tolist()} outside 0..T-1 = 0..{T - 1}; "
                         "give positions of the sequence")
    return idx


def dilated_window_mask(T: int, window: int, dilation: int) -> np.ndarray:
    """T, window, dilation -> (T, T) bool: query t sees keys t, t - dilation, ..., t - (window - 1) dilation.

    The same number of keys as a sliding window, spread over (window - 1) * dilation + 1 positions
    (Longformer's dilated windows; dilation=1 is ``sliding_window_mask``).

    >>> dilated_window_mask(5, 2, 2).astype(int)
    array([[1, 0, 0, 0, 0],
           [0, 1, 0, 0, 0],
           [1, 0, 1, 0, 0],
           [0, 1, 0, 1, 0],
           [0, 0, 1, 0, 1]])
    """
    d, dilation = _offsets(T), _validate.positive_int(dilation, "dilation")
    return (d >= 0) & (d % dilation == 0) & (d // dilation < _validate.positive_int(window, "window"))


def bigbird_mask(T: int, window: int, n_global: int, n_random: int, *, rng: np.random.Generator) -> np.ndarray:
    """T, window, n_global, n_random -> (T, T) bool: BigBird's sparse pattern.

    A symmetric window |t - s| < window, the first ``n_global`` tokens global (see
    ``longformer_mask``), and ``n_random`` keys drawn at random for every query.

    >>> m = bigbird_mask(8, 2, 1, 2, rng=np.random.default_rng(0))
    >>> m.shape, bool(m[:, 0].all()), bool(m[0].all())
    ((8, 8), True, True)
    """
    T = _validate.positive_int(T, "T")
    rng = _validate.generator(rng, "rng")
    _validate.allocation(3 * 8 * T * T, f"BigBird's ({T}, {T}) random draws", "ask for fewer tokens T")
    if not all(isinstance(n, numbers.Integral) and not isinstance(n, (bool, np.bool_)) and 0 <= n <= T
               for n in (n_global, n_random)):
        raise ValueError(f"n_global={n_global!r} and n_random={n_random!r} must be whole numbers in 0..T={T}")
    mask = longformer_mask(T, window, np.arange(n_global))
    picks = np.argsort(rng.random((T, T)), axis=-1)[:, :n_random]  # (T, n_random) distinct keys per query
    mask[np.arange(T)[:, None], picks] = True
    return mask


# ---- Linear attention (Katharopoulos et al., 2020). Taught in 10. ----

# Queries per chunk in causal linear_attention: exact causal sums inside a chunk, prefix sums between.
_CHUNK = 64
# Work (batch items x (T + S) x d_k) past which the batch items run on every core (fast.run_jobs).
_PARALLEL_WORK = 1 << 18


def elu_feature_map(x) -> np.ndarray:
    """x (...) -> phi(x) = elu(x) + 1, same shape: x + 1 for x > 0, exp(x) otherwise.

    Positive in exact arithmetic; in floating point exp(x) underflows to 0 below about -745 (float64),
    never to a negative number. x must be finite (phi(inf) = inf would give inf / inf in linear attention).

    >>> elu_feature_map(np.array([-1.0, 0.0, 2.0])).round(4)
    array([0.3679, 1.    , 3.    ])
    """
    x = _validate.finite_array(x, "x")
    return np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))


def _scaled_features(x, axes) -> np.ndarray:
    """x (...) -> phi(x) / max phi(x) over ``axes``: entries in (0, 1], the largest exactly 1.

    Linear attention does not change when phi(q_t) is multiplied by a positive number (it
    stands in the numerator and the denominator), nor when all of phi(K) is: dividing by the
    max keeps Q - 800 from underflowing to 0 / 0 and large entries from overflowing.
    """
    top = x.max(axis=axes, keepdims=True)  # phi is increasing: the max of phi(x) is phi(max x)
    positive = top > 0
    log_top = np.where(positive, np.log1p(np.maximum(top, 0)), top)  # log phi(max x)
    return np.where(x > 0, (x + 1) / np.where(positive, top + 1, 1), np.exp(np.minimum(x, 0) - log_top))


def _features(Q, K):
    """phi(Q) scaled per query row, phi(K) scaled per batch item: the same linear attention, in range."""
    return _scaled_features(Q, -1), _scaled_features(K, (-2, -1))


def _ratio(num, den, dtype) -> np.ndarray:
    """num / den of linear attention, or a ValueError when the features cannot represent it."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = num / den
    if not np.isfinite(out).all():
        raise ValueError(f"linear attention cannot be computed in {np.dtype(dtype)} for these inputs: for some "
                         "queries phi(q) . phi(k) underflows to 0 for every key, or phi(K)^T V overflows; "
                         "compute in float64 (Q.astype(np.float64), ...) or bring Q, K and V to a smaller scale")
    return out.astype(dtype, copy=False)


def linear_attention(Q, K, V, causal: bool = False) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), in O(T) time and memory.

    Attention with the kernel phi(q) . phi(k) (phi = ``elu_feature_map``) in place of
    exp(q . k / sqrt(d_k)): out_t = phi(q_t) (phi(K)^T V) / (phi(q_t) phi(K)^T 1). Multiplying
    phi(K)^T V first, a (d_k, d_v) matrix, reassociates the quadratic (phi(Q) phi(K)^T) V and
    never forms the T x S matrix. ``causal``: query t sums keys s <= S - T + t only (bottom-right
    aligned, as everywhere in the package: with T = S, keys s <= t), through prefix sums of
    phi(k_s) v_s^T carried from chunk to chunk; a query that sees no key gives zeros. Equal to
    ``linear_attention_quadratic``; not equal to softmax attention (a different kernel).
    Batch items (heads) run on the pool of ``fast.run_jobs``. phi(q_t) and phi(K) are divided by their largest entry first (which changes nothing) so that
    far-off inputs neither underflow nor overflow; what still cannot be represented raises ValueError.

    >>> rng = np.random.default_rng(0)
    >>> Q, K, V = rng.normal(size=(5, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    >>> bool(np.allclose(linear_attention(Q, K, V, causal=True), linear_attention_quadratic(Q, K, V, causal=True)))
    True
    """
    Q, K, V, _ = check_attention_inputs(Q, K, V)
    causal = _validate.flag(causal, "causal")
    batch, (T, d_k), (S, d_v) = Q.shape[:-2], Q.shape[-2:], V.shape[-2:]
    K, V = np.broadcast_to(K, (*batch, S, d_k)), np.broadcast_to(V, (*batch, S, d_v))  # views
    out = np.empty((*batch, T, d_v), dtype=Q.dtype)

    def run(b):  # one batch item (one head): its own features, its (d_k, d_v) sums
        out[b] = _linear_one(Q[b], K[b], V[b], causal)

    run_jobs(run, list(np.ndindex(*batch)), parallel=math.prod(batch) * (T + S) * d_k > _PARALLEL_WORK)
    return out


def _linear_one(q, k, v, causal: bool) -> np.ndarray:
    """q (T, d_k), k (S, d_k), v (S, d_v) of one batch item -> its linear attention (T, d_v)."""
    fq, fk = _features(q, k)  # (T, d_k), (S, d_k)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported by _ratio
        if causal:
            T, S = len(q), len(k)
            out = np.zeros((T, v.shape[-1]), q.dtype)
            if T > S:  # bottom-right: the first T - S queries see no key
                out[T - S:] = _causal_linear(fq[T - S:], fk, v)
                return out
            kv0, z0 = fk[:S - T].T @ v[:S - T], fk[:S - T].sum(axis=0)[:, None]  # the keys every query sees
            return _causal_linear(fq, fk[S - T:], v[S - T:], kv0, z0)
        kv = fk.T @ v  # (d_k, S) x (S, d_v) -> (d_k, d_v)
        z = fk.sum(axis=0)[:, None]  # (d_k, 1): the normaliser's sum of phi(k)
        return _ratio(fq @ kv, fq @ z, q.dtype)  # (T, d_v) / (T, 1)


def _causal_linear(fQ, fK, V, kv=None, z=None) -> np.ndarray:
    """phi(Q), phi(K) (..., T, d_k), V (..., T, d_v) -> causal linear attention, chunk by chunk;
    ``kv`` (d_k, d_v), ``z`` (d_k, 1): the sums of keys every query sees before these (None: none)."""
    batch, (T, d_k), d_v = fQ.shape[:-2], fK.shape[-2:], V.shape[-1]
    dtype = fQ.dtype
    if kv is None:
        kv = np.zeros((*np.broadcast_shapes(fK.shape[:-2], V.shape[:-2]), d_k, d_v), dtype)  # prefix sum of phi(k) v^T
        z = np.zeros((*fK.shape[:-2], d_k, 1), dtype)  # prefix sum of phi(k)
    num, den = np.empty((*batch, T, d_v), dtype), np.empty((*batch, T, 1), dtype)
    within = causal_mask(_CHUNK)
    for c in range(0, T, _CHUNK):
        q, k, v = fQ[..., c:c + _CHUNK, :], fK[..., c:c + _CHUNK, :], V[..., c:c + _CHUNK, :]
        n = q.shape[-2]
        a = np.where(within[:n, :n], q @ np.swapaxes(k, -1, -2), 0)  # (..., n, n) causal inside the chunk
        num[..., c:c + n, :] = q @ kv + a @ v  # earlier chunks through the prefix sums, this chunk exactly
        den[..., c:c + n, :] = q @ z + a.sum(axis=-1, keepdims=True)
        kv = kv + np.swapaxes(k, -1, -2) @ v  # (..., d_k, n) x (..., n, d_v)
        z = z + k.sum(axis=-2)[..., :, None]
    return _ratio(num, den, dtype)


def linear_attention_quadratic(Q, K, V, causal: bool = False) -> np.ndarray:
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v): linear attention the slow way.

    A = phi(Q) phi(K)^T, a (..., T, S) matrix (if ``causal``: zero where s > S - T + t), then
    out = A V / A 1: the same numbers as ``linear_attention`` in O(T S) time and memory,
    the form it is tested against.

    >>> linear_attention_quadratic(np.zeros((1, 2)), np.zeros((3, 2)), np.arange(3.0)[:, None])
    array([[1.]])
    """
    Q, K, V, _ = check_attention_inputs(Q, K, V)
    fQ, fK = _features(Q, K)
    A = fQ @ np.swapaxes(fK, -1, -2)  # (..., T, S), all >= 0
    T, S = Q.shape[-2], K.shape[-2]
    causal = _validate.flag(causal, "causal")
    seen = slice(max(0, T - S) if causal else 0, T)  # causal, bottom-right: only the last min(T, S) queries see keys
    if causal:
        n = T - seen.start                                      # the queries that see a key: the last min(T, S)
        allowed = np.zeros((T, S), bool)
        allowed[seen] = causal_mask(n, offset=S - n)            # query t sees keys s <= S - T + t (bottom-right)
        A = np.where(allowed, A, 0)
    out = np.zeros(np.broadcast_shapes(A.shape[:-1], V.shape[:-2] + (T,)) + (V.shape[-1],), Q.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is reported by _ratio
        a = A[..., seen, :]
        out[..., seen, :] = _ratio(a @ V, a.sum(axis=-1, keepdims=True), Q.dtype)  # (..., T, S) x (..., S, d_v)
    return out
