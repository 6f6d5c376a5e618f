"""Checkers for notebook 10: one online-softmax update, the sliding-window mask, linear attention.

``linear_attention`` also measures, with tracemalloc, the memory the learner's function takes
at T = S = 2000: the right numbers computed as (phi(Q) phi(K)^T) V make a T x S matrix, which
is correct but quadratic, so it is reported as the mistake it is.
"""
from __future__ import annotations

import tracemalloc

import numpy as np

from ..efficient import SoftmaxState
from ..efficient import elu_feature_map as _phi
from ..efficient import linear_attention as _linear_attention
from ..efficient import online_softmax_start as _start
from ..efficient import online_softmax_update as _update
from ..efficient import sliding_window_mask as _sliding_window_mask
from .engine import Case, Exercise, Mistake, _finish

__all__ = ["online_softmax_update", "sliding_window_mask", "linear_attention",
           "ONLINE_SOFTMAX_UPDATE", "SLIDING_WINDOW_MASK", "LINEAR_ATTENTION"]


# ---------------------------------------------------------------------------------------
# one online-softmax update
# ---------------------------------------------------------------------------------------

def _update_with(rescale_l: bool, rescale_acc: bool, guard: bool = True, inverted: bool = False):
    """An update that rescales l and/or acc (by exp(m - m'), or its inverse), with or without the -inf guard."""
    def update(state, s, V):
        m_new = np.maximum(state.m, s.max(axis=-1, keepdims=True))
        shift = np.where(np.isneginf(m_new), 0, m_new) if guard else m_new
        p = np.exp(s - shift)
        alpha = np.exp(shift - state.m) if inverted else np.exp(state.m - shift)
        l_old, acc_old = (alpha * state.l if rescale_l else state.l), (alpha * state.acc if rescale_acc else state.acc)
        return SoftmaxState(m_new, l_old + p.sum(axis=-1, keepdims=True), acc_old + p @ V)
    return update


def _update_cases():
    rng = np.random.default_rng(20241010)
    cases = []
    for T, c, d_v in ((3, 4, 2), (5, 2, 3), (2, 6, 1), (4, 3, 4)):
        seen = _update(_start(T, d_v), rng.normal(size=(T, c)), rng.normal(size=(c, d_v)))
        cases.append(Case((seen, rng.normal(size=(T, c + 1)) * 2 + 1.5, rng.normal(size=(c + 1, d_v))),
                          f"a second block of {c + 1} keys (higher scores), T={T}, d_v={d_v}"))
    cases.append(Case((_start(3, 2), rng.normal(size=(3, 5)), rng.normal(size=(5, 2))), "the first block (m = -inf)"))
    s = rng.normal(size=(2, 3))
    s[1] = -np.inf
    cases.append(Case((_start(2, 2), s, rng.normal(size=(3, 2))), "the first block, row 1 fully masked (-inf)"))
    return cases


_UPDATE_MISTAKES = (
    Mistake("nothing is rescaled: l and acc were summed under the old max m, the new terms under m'",
            "multiply both l and acc by alpha = exp(m - m') before adding the block's terms",
            _update_with(False, False)),
    Mistake("the sum l is rescaled but the accumulator acc is not: the output mixes two scales",
            "acc' = alpha * acc + p @ V_block, with the same alpha = exp(m - m') as l",
            _update_with(True, False)),
    Mistake("the accumulator acc is rescaled but the sum l is not", "l' = alpha * l + p.sum(-1, keepdims=True)",
            _update_with(False, True)),
    Mistake("the rescale factor is upside down: exp(m' - m) instead of exp(m - m')",
            "alpha = np.exp(m - m_new): the old terms shrink when the max grows",
            _update_with(True, True, inverted=True)),
    Mistake("no guard for rows that have seen no allowed key: exp(-inf - (-inf)) is NaN",
            "shift = np.where(np.isneginf(m_new), 0, m_new), and use shift in both exps",
            _update_with(True, True, guard=False)),
)
ONLINE_SOFTMAX_UPDATE = Exercise("online_softmax_update", _update, _update_cases, _UPDATE_MISTAKES,
                                 outputs=("m", "l", "acc"))


def online_softmax_update(fn) -> bool:
    """Check ``fn(state, scores_block, V_block) -> (m, l, acc)``, the state after one more key block.

    >>> import mha_course as mc
    >>> online_softmax_update(mc.online_softmax_update)
    ✔ online_softmax_update: all 6 cases match
    True
    """
    return ONLINE_SOFTMAX_UPDATE.check(fn)


# ---------------------------------------------------------------------------------------
# the sliding-window mask
# ---------------------------------------------------------------------------------------

def _window_with(keep):
    """A mask fn(T, window) from keep(d, window), d = t - s."""
    return lambda T, window: keep(np.arange(T)[:, None] - np.arange(T)[None, :], window)


_WINDOW_MISTAKES = (
    Mistake("off by one: window + 1 keys (t - window <= s)", "keep s with t - window < s <= t: 0 <= t - s < window",
            _window_with(lambda d, w: (d >= 0) & (d <= w))),
    Mistake("off by one: window - 1 keys (the window counts the query itself)",
            "the query's own key is one of the window keys: 0 <= t - s < window",
            _window_with(lambda d, w: (d >= 0) & (d < w - 1))),
    Mistake("the window reaches into the future too (|t - s| < window)", "add s <= t: 0 <= t - s < window",
            _window_with(lambda d, w: np.abs(d) < w)),
    Mistake("the window looks forward (t <= s < t + window)", "keys before the query: t - window < s <= t",
            _window_with(lambda d, w: (d <= 0) & (d > -w))),
    Mistake("the polarity is flipped: True where the key is blocked", "our masks are True = may attend",
            _window_with(lambda d, w: ~((d >= 0) & (d < w)))),
)


def _window_cases():
    return [Case((T, w), f"T={T}, window={w}") for T, w in ((6, 2), (5, 1), (7, 3), (4, 9), (8, 4), (3, 3))]


SLIDING_WINDOW_MASK = Exercise("sliding_window_mask", _sliding_window_mask, _window_cases, _WINDOW_MISTAKES)


def sliding_window_mask(fn) -> bool:
    """Check ``fn(T, window) -> (T, T) bool``: query t may attend keys s with t - window < s <= t.

    >>> import mha_course as mc
    >>> sliding_window_mask(mc.sliding_window_mask)
    ✔ sliding_window_mask: all 6 cases match
    True
    """
    return SLIDING_WINDOW_MASK.check(fn)


# ---------------------------------------------------------------------------------------
# linear attention: the reassociation
# ---------------------------------------------------------------------------------------

def _linear_cases():
    rng = np.random.default_rng(20241111)
    sizes = (((), 4, 6, 3, 2), ((), 7, 7, 2, 5), ((), 1, 9, 4, 1), ((2,), 3, 5, 3, 4))
    return [Case((rng.normal(size=(*b, T, d)), rng.normal(size=(*b, S, d)), rng.normal(size=(*b, S, d_v))),
                 f"batch {b}, T={T}, S={S}, d_k={d}, d_v={d_v}") for b, T, S, d, d_v in sizes]


_LINEAR_MISTAKES = (
    Mistake("the normaliser is missing: phi(Q) (phi(K)^T V) alone",
            "divide by phi(Q) @ phi(K).sum(axis=-2)[..., None], one number per query",
            lambda Q, K, V: _phi(Q) @ (np.swapaxes(_phi(K), -1, -2) @ V)),
    Mistake("no feature map: raw Q and K, whose dot products can be negative and the normaliser 0",
            "apply phi(x) = elu(x) + 1 (mc.elu_feature_map) to Q and K first",
            lambda Q, K, V: (Q @ (np.swapaxes(K, -1, -2) @ V)) / (Q @ K.sum(axis=-2)[..., None])),
    Mistake("divided by the number of keys S instead of phi(q) . sum of phi(k)",
            "the normaliser is phi(Q) @ phi(K).sum(axis=-2)[..., None], not S",
            lambda Q, K, V: _phi(Q) @ (np.swapaxes(_phi(K), -1, -2) @ V) / K.shape[-2]),
)
LINEAR_ATTENTION = Exercise("linear_attention", _linear_attention, _linear_cases, _LINEAR_MISTAKES)

_PROBE_T, _PROBE_D = 2000, 4


def _quadratic_peak(fn):
    """Peak bytes of fn on a T = S = 2000 probe when its result is right, else None (or if it fails)."""
    rng = np.random.default_rng(7)
    Q, K, V = (rng.normal(size=(_PROBE_T, _PROBE_D)) for _ in range(3))
    tracemalloc.start()
    try:
        out = fn(Q, K, V)
        peak = tracemalloc.get_traced_memory()[1]
    except Exception:
        return None
    finally:
        tracemalloc.stop()
    right = np.shape(out) == (_PROBE_T, _PROBE_D) and np.allclose(out, _linear_attention(Q, K, V))
    return peak if right else None


def linear_attention(fn) -> bool:
    """Check ``fn(Q, K, V) -> out``: non-causal linear attention, phi = elu + 1, in O(T) memory.

    >>> import mha_course as mc
    >>> linear_attention(mc.linear_attention)
    ✔ linear_attention: all 4 cases match
    True
    """
    peak = _quadratic_peak(fn)
    if peak is not None and peak >= _PROBE_T * _PROBE_T * 8 / 2:
        return _finish("linear_attention", ("wrong", [
            f"✘ linear_attention: the numbers are right, but at T = S = {_PROBE_T} it took {peak / 2**20:.0f} MiB: "
            "it makes the T x S matrix phi(Q) phi(K)^T, quadratic like softmax attention.",
            "  Fix: reassociate, phi(Q) @ (phi(K)^T @ V): a (d_k, d_v) matrix, whatever T and S are"]))
    return LINEAR_ATTENTION.check(fn)
