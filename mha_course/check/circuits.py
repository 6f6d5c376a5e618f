"""Checkers for notebook 14: ``prefix_matching_score``, ``composition_score``, ``patched_heads``,
``copying_score``.

Every case has other sizes (B, h, T, D) and other numbers, so no constant fits. The prefix-matching
cases give every sequence the same number of repeated tokens, so averaging per sequence first or
over all queries at once are both right.
"""
from __future__ import annotations

import numpy as np

from ..lessons.circuits import composition_score as _composition
from ..lessons.circuits import copying_score as _copying
from ..lessons.circuits import duplicate_token_score as _duplicate
from ..lessons.circuits import prefix_matching_score as _prefix
from .engine import Case, Exercise, Mistake

__all__ = ["prefix_matching_score", "composition_score", "patched_heads", "copying_score",
           "PREFIX_MATCHING_SCORE", "COMPOSITION_SCORE", "PATCHED_HEADS", "COPYING_SCORE"]


# ----------------------------------------------------------------------------- 14.1 prefix matching
def _causal_weights(rng, B, h, T) -> np.ndarray:
    """Random causal attention weights (B, h, T, T): each row sums to 1 over keys s <= t."""
    scores = rng.normal(0, 2, size=(B, h, T, T))
    scores[..., np.triu(np.ones((T, T), dtype=bool), k=1)] = -np.inf
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return w / w.sum(-1, keepdims=True)


def _repeating_tokens(rng, B, n, m, vocab) -> np.ndarray:
    """(B, n + m): n distinct tokens, then the first m of them again (m repeated queries per row)."""
    first = np.argsort(rng.random((B, vocab)), axis=1)[:, :n]  # (B, n) distinct
    return np.concatenate([first, first[:, :m]], axis=1)


def _prefix_cases():
    rng = np.random.default_rng(1414)
    sizes = ((2, 2, 5, 3, 8), (3, 1, 6, 4, 10), (1, 3, 4, 4, 6), (4, 2, 7, 2, 12))  # B, h, n, m, vocab
    return [Case((_causal_weights(rng, B, h, n + m), _repeating_tokens(rng, B, n, m, V)),
                 f"B={B}, h={h}, T={n + m}: {m} tokens repeat") for B, h, n, m, V in sizes]


def _earlier(tokens):
    T = tokens.shape[1]
    return (tokens[:, :, None] == tokens[:, None, :]) & np.tril(np.ones((T, T), dtype=bool), k=-1)


def _shifted(weights, tokens, shift: int, all_queries: bool = False):
    """The attention on keys s + shift of the earlier occurrences s (shift -1, 0, 1), mean over queries."""
    e = _earlier(tokens)  # (B, T, S)
    target = np.zeros_like(e)
    if shift >= 0:
        target[..., shift:] = e[..., : e.shape[-1] - shift]
    else:
        target[..., :shift] = e[..., -shift:]
    on = (weights * target[:, None]).sum(-1)  # (B, h, T)
    if all_queries:
        return on.mean(axis=(0, 2))
    return on.transpose(1, 0, 2)[:, e.any(-1)].mean(-1)


def _all_later(weights, tokens):
    """Everything after the first earlier occurrence, up to the query."""
    e = _earlier(tokens)
    after = np.cumsum(e, axis=-1) > 0  # (B, T, S): s' >= an earlier occurrence
    after[..., 1:], after[..., 0] = after[..., :-1].copy(), False  # s' > that occurrence
    on = (weights * after[:, None]).sum(-1)
    return on.transpose(1, 0, 2)[:, e.any(-1)].mean(-1)


_PREFIX_FIX = ("for each earlier occurrence s of the query's token, take the key s + 1 (what came next): "
               "target[..., 1:] = earlier[..., :-1]")
PREFIX_MATCHING_SCORE = Exercise("prefix_matching_score", _prefix, _prefix_cases, (
    Mistake("off by one: the attention on the earlier occurrences themselves (the duplicate-token score)",
            _PREFIX_FIX, _duplicate),
    Mistake("off by one the other way: the keys s - 1 before the earlier occurrences", _PREFIX_FIX,
            lambda w, t: _shifted(w, t, -1)),
    Mistake("averaged over every query, also those whose token never occurred before",
            "average only over the queries with at least one earlier occurrence: "
            "on_target[:, has_repeat].mean()", lambda w, t: _shifted(w, t, 1, all_queries=True)),
    Mistake("summed over every key after the earlier occurrence, not just the one right after it",
            _PREFIX_FIX, _all_later),
), axes={"result": ("head",)})


def prefix_matching_score(fn) -> bool:
    """Check ``fn(weights (B, h, T, T), tokens (B, T)) -> (h,)``, the prefix-matching (induction) score.

    >>> from mha_course.lessons import circuits
    >>> prefix_matching_score(circuits.prefix_matching_score)
    ✔ prefix_matching_score: all 4 cases match
    True
    """
    return PREFIX_MATCHING_SCORE.check(fn)


# ----------------------------------------------------------------------------- 14.2 composition
def _low_rank(rng, D, r):
    return rng.normal(size=(D, r)) @ rng.normal(size=(r, D)) / D


def _composition_cases():
    rng = np.random.default_rng(2021)
    return [Case((_low_rank(rng, D, r), _low_rank(rng, D, r) * s), f"D={D}, rank {r}")
            for D, r, s in ((8, 4, 1.0), (12, 3, 5.0), (6, 6, 0.1), (16, 8, 2.0))]


_NORMS_FIX = "divide by both sizes: np.linalg.norm(W_A @ W_B) / (np.linalg.norm(W_A) * np.linalg.norm(W_B))"
COMPOSITION_SCORE = Exercise("composition_score", _composition, _composition_cases, (
    Mistake("the composition score without the norms: ||W_A W_B||_F grows with the matrices' sizes", _NORMS_FIX,
            lambda a, b: float(np.linalg.norm(a @ b))),
    Mistake("the product in the wrong order: W_B W_A", "W_A writes into the stream and W_B reads it: "
            "||W_A @ W_B||", lambda a, b: _composition(b, a)),
    Mistake("the squared norms (||W_A W_B||^2 / (||W_A||^2 ||W_B||^2))", "take the norms themselves, not "
            "their squares", lambda a, b: _composition(a, b) ** 2),
    Mistake("spectral norms (the largest singular value) instead of Frobenius norms",
            "np.linalg.norm(M) of a matrix is the Frobenius norm; do not pass ord=2",
            lambda a, b: float(np.linalg.norm(a @ b, 2) / (np.linalg.norm(a, 2) * np.linalg.norm(b, 2)))),
    Mistake("divided by one norm only (||W_A||_F)", _NORMS_FIX,
            lambda a, b: float(np.linalg.norm(a @ b) / np.linalg.norm(a))),
))


def composition_score(fn) -> bool:
    """Check ``fn(W_A (n, m), W_B (m, k)) -> float``: ||W_A W_B||_F / (||W_A||_F ||W_B||_F).

    >>> composition_score(lambda a, b: float(np.linalg.norm(a @ b) / np.linalg.norm(a) / np.linalg.norm(b)))
    ✔ composition_score: all 4 cases match
    True
    """
    return COMPOSITION_SCORE.check(fn)


# ----------------------------------------------------------------------------- 14.3 patching
def _patched_ref(corrupt, clean, head):
    out = np.array(corrupt, dtype=float)  # a copy: the corrupted run is kept as it was
    out[:, head] = clean[:, head]
    return out


def _patch_cases():
    rng = np.random.default_rng(2022)
    return [Case((rng.normal(size=(B, h, T, D)), rng.normal(size=(B, h, T, D)), head), f"B={B}, h={h}, head {head}")
            for B, h, T, D, head in ((2, 2, 3, 4, 1), (1, 4, 5, 3, 2), (3, 3, 4, 2, 0), (2, 4, 6, 5, 3))]


def _wrong_axis(corrupt, clean, head):
    out = np.array(corrupt, dtype=float)
    out[:, :, head] = clean[:, :, head]
    return out


_PATCH_FIX = "start from the corrupted run and copy the clean head in: out = corrupt.copy(); out[:, head] = clean[:, head]"
PATCHED_HEADS = Exercise("patched_heads", _patched_ref, _patch_cases, (
    Mistake("patching the wrong direction: the clean run with the corrupted head (that asks what breaks it, "
            "not what restores it)", _PATCH_FIX, lambda corrupt, clean, head: _patched_ref(clean, corrupt, head)),
    Mistake("the head taken on the positions axis (out[:, :, head])", "heads are axis 1 of (B, h, T, D): "
            "out[:, head] = clean[:, head]", _wrong_axis),
    Mistake("every head patched: the clean run returned", _PATCH_FIX,
            lambda corrupt, clean, head: np.array(clean, dtype=float)),
    Mistake("the clean head added to the corrupted one instead of replacing it", _PATCH_FIX,
            lambda corrupt, clean, head: _patched_ref(corrupt, corrupt + clean, head)),
), axes={"result": ("position", "feature")})


def patched_heads(fn) -> bool:
    """Check ``fn(corrupt (B, h, T, D), clean (B, h, T, D), head) -> (B, h, T, D)``: the corrupted run's head
    outputs with head ``head`` taken from the clean run.

    >>> def patched(corrupt, clean, head):
    ...     out = corrupt.copy(); out[:, head] = clean[:, head]; return out
    >>> patched_heads(patched)
    ✔ patched_heads: all 4 cases match
    True
    """
    return PATCHED_HEADS.check(fn)


# ----------------------------------------------------------------------------- 14.4 copying
def _copying_cases():
    rng = np.random.default_rng(2020)
    cases = []
    for n, shift in ((4, 1.0), (6, -0.5), (5, 0.2), (7, 0.0)):
        Q, _ = np.linalg.qr(rng.normal(size=(n, n)))  # (n, n) orthogonal: complex eigenvalues
        M = rng.normal(size=(n, n)) + shift * n * np.eye(n)
        cases.append(Case((M if n % 2 else Q @ np.diag(rng.normal(size=n)) @ Q.T + M,), f"{n} x {n}"))
    return cases


COPYING_SCORE = Exercise("copying_score", _copying, _copying_cases, (
    Mistake("the real parts in the denominator: sum(λ) / sum(|Re λ|)", "divide by the sizes of the "
            "(complex) eigenvalues: np.abs(lam).sum()",
            lambda W: float(np.linalg.eigvals(W).sum().real / np.abs(np.linalg.eigvals(W).real).sum())),
    Mistake("singular values instead of eigenvalues (always positive: every head looks like a copier)",
            "eigenvalues, np.linalg.eigvals(W): a singular value has no sign",
            lambda W: float(np.linalg.svd(W, compute_uv=False).sum() / np.abs(np.linalg.svd(W, compute_uv=False)).sum())),
    Mistake("the trace over the Frobenius norm", "sum(λ) / sum(|λ|) over the eigenvalues λ",
            lambda W: float(np.trace(W) / np.linalg.norm(W))),
))


def copying_score(fn) -> bool:
    """Check ``fn(W (n, n)) -> float``: sum(λ) / sum(|λ|) over W's eigenvalues.

    >>> copying_score(lambda W: float(np.linalg.eigvals(W).sum().real / np.abs(np.linalg.eigvals(W)).sum()))
    ✔ copying_score: all 4 cases match
    True
    """
    return COPYING_SCORE.check(fn)
