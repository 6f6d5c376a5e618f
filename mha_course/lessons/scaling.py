"""Why scores are divided by sqrt(d_k): a small numerical experiment (numpy only).

For queries and keys with independent unit-variance entries, the dot product q . k has
variance d_k. Without the 1/sqrt(d_k) factor the scores spread out as d_k grows, the
softmax saturates (one weight near 1, the rest near 0), the entropy of the weights falls
and the softmax Jacobian, through which every gradient flows back, shrinks towards 0.

Shapes: ``N`` sampled queries, ``S`` keys per query, ``d_k`` query/key size,
``n`` the number of d_k values tried.

Taught in 02_scaled_dot_product.ipynb.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _validate
from ..attention import softmax

__all__ = ["sample_scores", "entropy", "softmax_jacobian", "jacobian_norm",
           "ScalingResult", "scaling_experiment", "POWERS_OF_TWO"]

POWERS_OF_TWO = tuple(2 ** i for i in range(10))  # d_k = 1, 2, 4, ..., 512


def sample_scores(rng: np.random.Generator, d_k: int, n_queries: int = 400,
                  n_keys: int = 16) -> np.ndarray:
    """rng, d_k -> raw scores q . k (N, S) for unit-variance Gaussian q (N, d_k), k (N, S, d_k).

    Not scaled: divide by sqrt(d_k) for the scores attention actually uses. The sum runs
    in numpy (no BLAS), so the result does not depend on the number of BLAS threads.

    >>> s = sample_scores(np.random.default_rng(0), d_k=64, n_queries=3, n_keys=5)
    >>> s.shape
    (3, 5)
    """
    _check_rng(rng)
    d_k = _validate.positive_int(d_k, "d_k")
    N = _validate.positive_int(n_queries, "n_queries")
    S = _validate.positive_int(n_keys, "n_keys")
    _validate.allocation(2 * 8 * N * S * d_k, f"sampled keys (n_queries, n_keys, d_k) = ({N}, {S}, {d_k})",
                         "ask for fewer queries, keys or a smaller d_k")
    q = rng.standard_normal((N, 1, d_k))  # (N, 1, d_k): one query, broadcast over its keys
    k = rng.standard_normal((N, S, d_k))  # (N, S, d_k)
    return (q * k).sum(axis=-1)  # (N, S, d_k) -> (N, S)


def entropy(weights, axis: int = -1) -> np.ndarray:
    """weights (..., S), rows summing to 1 -> entropy in nats (...), with 0 log 0 = 0.

    log(S) for uniform weights, 0 for a one-hot row.

    >>> entropy(np.array([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0]])).round(4)
    array([1.3863, 0.    ])
    """
    p = _weights(weights, "weights")
    axis = _validate.axis(axis, p.shape)
    logp = np.log(np.where(p > 0, p, 1.0))  # log 1 = 0 where p = 0
    return 0.0 - (p * logp).sum(axis=axis)  # 0.0 - x turns -0.0 into +0.0


def softmax_jacobian(p) -> np.ndarray:
    """softmax weights p (..., S) -> Jacobian d p / d scores (..., S, S) = diag(p) - p p^T.

    >>> softmax_jacobian(np.array([0.5, 0.5]))
    array([[ 0.25, -0.25],
           [-0.25,  0.25]])
    """
    p = _weights(p, "p")
    outer = p[..., :, None] * p[..., None, :]  # (..., S, 1) * (..., 1, S) -> (..., S, S)
    return np.eye(p.shape[-1]) * p[..., None, :] - outer


def jacobian_norm(p) -> np.ndarray:
    """softmax weights p (..., S) -> Frobenius norm of the softmax Jacobian (...).

    Largest for spread-out weights, 0 for a one-hot row: a saturated softmax passes
    (almost) no gradient back to its scores.

    >>> jacobian_norm(np.array([[0.5, 0.5], [1.0, 0.0]])).round(4)
    array([0.5, 0. ])
    """
    J = softmax_jacobian(p)  # (..., S, S)
    return np.sqrt((J ** 2).sum(axis=(-2, -1)))


class ScalingResult(NamedTuple):
    """One row per d_k value: ``d_k`` (n,); statistics (n,) without scaling (``*_raw``,
    scores q . k) and with it (``*_scaled``, scores q . k / sqrt(d_k)); ``example_*`` (n, S)
    the weights of one typical query at each d_k (the median of the unscaled entropies)."""
    d_k: np.ndarray
    var_raw: np.ndarray
    var_scaled: np.ndarray
    entropy_raw: np.ndarray
    entropy_scaled: np.ndarray
    grad_raw: np.ndarray
    grad_scaled: np.ndarray
    example_raw: np.ndarray
    example_scaled: np.ndarray

    @property
    def n_keys(self) -> int:
        """S, the number of keys each query was compared with."""
        return self.example_raw.shape[-1]

    def row(self, d_k: int) -> int:
        """The index of ``d_k`` in ``self.d_k``; ValueError naming the tried values if absent."""
        hits = np.flatnonzero(self.d_k == _validate.positive_int(d_k, "d_k"))
        if hits.size == 0:
            raise ValueError(f"d_k={d_k} was not part of the experiment; "
                             f"pick one of {self.d_k.tolist()}")
        return int(hits[0])

    def table(self) -> str:
        """A text table, one line per d_k, every number with a fixed format."""
        lines = [f"{'d_k':>5} {'Var raw':>9} {'Var scaled':>10} {'H raw':>7} {'H scaled':>8}"
                 f" {'|J| raw':>8} {'|J| scaled':>10}"]
        for i, d in enumerate(self.d_k):
            lines.append(f"{d:>5d} {self.var_raw[i]:>9.2f} {self.var_scaled[i]:>10.2f}"
                         f" {self.entropy_raw[i]:>7.3f} {self.entropy_scaled[i]:>8.3f}"
                         f" {self.grad_raw[i]:>8.4f} {self.grad_scaled[i]:>10.4f}")
        return "\n".join(lines)


def scaling_experiment(rng: np.random.Generator, d_k_values=POWERS_OF_TWO,
                       n_queries: int = 400, n_keys: int = 16) -> ScalingResult:
    """rng, d_k values (n,) -> ScalingResult: score variance, weight entropy (nats) and mean
    softmax-Jacobian norm, each (n,), without and with the 1/sqrt(d_k) scaling.

    >>> r = scaling_experiment(np.random.default_rng(0), d_k_values=[1, 256], n_queries=200)
    >>> bool(r.var_raw[1] > 100 * r.var_raw[0]), bool(r.entropy_raw[1] < r.entropy_scaled[1])
    (True, True)
    """
    _check_rng(rng)
    if not isinstance(d_k_values, (list, tuple, np.ndarray)):
        raise ValueError(f"d_k_values={d_k_values!r} must be a list of sizes, e.g. d_k_values=[1, 2, 4, 8]")
    d_ks = [_validate.positive_int(d.item() if isinstance(d, np.generic) else d, "d_k") for d in d_k_values]
    if not d_ks or len(set(d_ks)) != len(d_ks):
        raise ValueError(f"d_k_values={list(d_ks)} must be distinct sizes, at least one (row(d_k) finds each once), "
                         "e.g. [1, 2, 4, 8]")
    stats = {name: [] for name in ScalingResult._fields[1:]}
    for d_k in d_ks:
        raw = sample_scores(rng, d_k, n_queries, n_keys)  # (N, S)
        typical = None
        for kind, scores in (("raw", raw), ("scaled", raw / math.sqrt(d_k))):
            w = softmax(scores)  # (N, S)
            H = entropy(w)  # (N,)
            typical = np.argsort(H)[len(H) // 2] if typical is None else typical
            stats[f"var_{kind}"].append(scores.var())
            stats[f"entropy_{kind}"].append(H.mean())
            stats[f"grad_{kind}"].append(jacobian_norm(w).mean())
            stats[f"example_{kind}"].append(w[typical])
    return ScalingResult(np.array(d_ks), *(np.array(v) for v in stats.values()))


def _weights(p, name: str) -> np.ndarray:
    """Softmax weights (..., S): finite, each in [0, 1], each row summing to 1 (a masked row may be all 0)."""
    p = _validate.finite_array(p, name)
    if p.ndim == 0:
        raise ValueError(f"{name} has shape {p.shape}; give softmax weights (..., S), one row per query")
    if p.size and (p.min() < 0 or p.max() > 1):
        raise ValueError(f"{name} holds {float(p.min()):.3g}..{float(p.max()):.3g}, but softmax weights lie in [0, 1]; "
                         f"pass softmax(scores), not the scores")
    sums = p.sum(axis=-1)  # (...,): 1 for a softmax row, 0 for an all-masked one
    tol = max(1e-6, 10 * p.shape[-1] * float(np.finfo(p.dtype).eps))
    off = ~((np.abs(sums - 1) <= tol) | (sums == 0))
    if off.any():
        raise ValueError(f"{name} has rows summing to {np.unique(sums[off].round(6))[:5].tolist()}, but a row of softmax "
                         "weights sums to 1 (or 0 when every key is masked); pass softmax(scores) along the last axis")
    return p


def _check_rng(rng) -> None:
    _validate.generator(rng)
