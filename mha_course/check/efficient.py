"""Checkers for notebook 10: one online-softmax update, the tiled loop, the sliding-window mask, linear attention.

``tiled_attention`` and ``linear_attention`` also measure, with tracemalloc, the memory the
learner's function takes at T = S = 2000: the right numbers computed through a T x S matrix
are correct but quadratic, so that is reported as the mistake it is.

The cases separate every catalogued mistake: the online-softmax cases include a second block
whose max is *below* the running max (a new max taken from the block alone is then wrong), the
window cases a window of 1 and one wider than T, the tiled cases a key count that is not a
multiple of the block size and a block wider than all the keys.
"""
from __future__ import annotations

import contextlib
import functools
import io
import tracemalloc

import numpy as np

from ..attention import softmax as _softmax
from ..efficient import SoftmaxState
from ..efficient import elu_feature_map as _phi
from ..efficient import linear_attention as _linear_attention
from ..efficient import online_softmax_result as _result
from ..efficient import online_softmax_start as _start
from ..efficient import online_softmax_update as _update
from ..efficient import sliding_window_mask as _sliding_window_mask
from ..efficient import tiled_attention as _tiled_attention
from . import engine
from .engine import Case, Exercise, Mistake
from .vocabulary import TWICE_D_K

__all__ = ["online_softmax_update", "tiled_attention", "sliding_window_mask", "linear_attention",
           "ONLINE_SOFTMAX_UPDATE", "TILED_ATTENTION", "SLIDING_WINDOW_MASK", "LINEAR_ATTENTION", "QuadraticMemory"]


class QuadraticMemory(Exception):
    """The learner's numbers are right, but they were computed through a T x S matrix."""


# ---------------------------------------------------------------------------------------
# one online-softmax update
# ---------------------------------------------------------------------------------------

def _update_with(rescale_l=True, rescale_acc=True, guard=True, inverted=False, block_max_only=False,
                 old_max_terms=False, keep_old_l=True, normalise=False, keepdims=True, one_max=False,
                 no_shift=False, keep_old_m=False, inf_to_zero=False):
    """One online-softmax update written the way a learner might (the defaults are the right one)."""
    def update(state, s, V):
        block_max = np.full_like(state.m, s.max()) if one_max else s.max(axis=-1, keepdims=True)
        m_new = block_max if block_max_only else np.maximum(state.m, block_max)
        shift = np.where(np.isneginf(m_new), 0, m_new) if guard else m_new
        old = np.where(np.isneginf(state.m), 0, state.m)
        p = np.exp(s - (old if old_max_terms else 0 if no_shift else shift))
        alpha = 1.0 if no_shift else np.exp(shift - state.m) if inverted else np.exp(state.m - shift)
        alpha = np.where(np.isinf(alpha), 0.0, alpha) if inf_to_zero else alpha  # a guard against exp(+inf)
        l_old = (alpha * state.l if rescale_l else state.l) if keep_old_l else 0
        acc_old = alpha * state.acc if rescale_acc else state.acc
        l_new, acc_new = l_old + p.sum(axis=-1, keepdims=keepdims), acc_old + p @ V
        if normalise:
            acc_new = acc_new / np.where(l_new == 0, 1, l_new)
        return SoftmaxState(state.m if keep_old_m else m_new, l_new, acc_new)
    return update


def _update_cases():
    rng = np.random.default_rng(20241010)
    cases = []
    for T, c, d_v in ((3, 4, 2), (5, 2, 3), (2, 6, 1), (4, 3, 4)):
        seen = _update(_start(T, d_v), rng.normal(size=(T, c)), rng.normal(size=(c, d_v)))
        cases.append(Case((seen, rng.normal(size=(T, c + 1)) * 2 + 1.5, rng.normal(size=(c + 1, d_v))),
                          f"a second block of {c + 1} keys (higher scores), T={T}, d_v={d_v}"))
    seen = _update(_start(3, 2), rng.normal(size=(3, 4)) + 3, rng.normal(size=(4, 2)))
    cases.append(Case((seen, rng.normal(size=(3, 2)) - 3, rng.normal(size=(2, 2))),
                      "a second block whose scores are all LOWER than the running max"))
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
            _update_with(inverted=True)),
    Mistake("the rescale factor is upside down: exp(m' - m) instead of exp(m - m') (its infinities set to 0)",
            "alpha = np.exp(m - m_new): the old terms shrink when the max grows",
            _update_with(inverted=True, inf_to_zero=True)),
    Mistake("no guard for rows that have seen no allowed key: exp(-inf - (-inf)) is NaN",
            "shift = np.where(np.isneginf(m_new), 0, m_new), and use shift in both exps",
            _update_with(guard=False)),
    Mistake("the new max is the block's max only: when a block's scores are all below the running max, "
            "m goes down and the old terms are scaled UP",
            "m' = np.maximum(m, scores_block.max(axis=-1, keepdims=True)): the max over everything seen",
            _update_with(block_max_only=True)),
    Mistake("the block's terms are exp(s - m) with the OLD max, not exp(s - m')",
            "every term of the new state is under the new max: p = np.exp(scores_block - m_new)",
            _update_with(old_max_terms=True)),
    Mistake("the old sum is dropped: l' holds only this block's terms",
            "l' = alpha * l + p.sum(axis=-1, keepdims=True): carry the old sum, rescaled",
            _update_with(keep_old_l=False)),
    Mistake("the result is normalised inside the update: acc' / l' is an output, not an accumulator "
            "(the next update rescales it as if it were a sum)",
            "keep acc unnormalised (alpha * acc + p @ V_block) and divide by l only once, after the last block "
            "(mc.online_softmax_result)",
            _update_with(normalise=True)),
    Mistake("l' has shape (T, T): p.sum(axis=-1) without keepdims=True is (T,), which broadcasts against l (T, 1)",
            "p.sum(axis=-1, keepdims=True): one sum per query row, shape (T, 1)", _update_with(keepdims=False)),
    Mistake("one max for the whole block (scores_block.max() without axis): every row is shifted by the "
            "largest score of any row", "one max per query row: scores_block.max(axis=-1, keepdims=True)",
            _update_with(one_max=True)),
    Mistake("no shift at all: exp(s) of the raw scores, summed as they come (it overflows for large scores)",
            "subtract the running max: p = exp(s - m'), and rescale the old sums by exp(m - m')",
            _update_with(no_shift=True)),
    Mistake("the max is not carried: the state keeps the OLD m, so the next block rescales from the wrong max",
            "return the new max m' = np.maximum(m, scores_block.max(axis=-1, keepdims=True)) with l' and acc'",
            _update_with(keep_old_m=True)),
)
ONLINE_SOFTMAX_UPDATE = Exercise("online_softmax_update", _update, _update_cases, _UPDATE_MISTAKES,
                                 outputs=("m", "l", "acc"), edges=('c',))


def _as_state(fn):
    """fn whose (m, l, acc) comes back as a tuple whether it returned a tuple, a list or a SoftmaxState."""
    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def as_tuple(*args):
        out = fn(*args)
        return tuple(out) if isinstance(out, list) and len(out) == 3 else out
    return as_tuple


def online_softmax_update(fn) -> bool:
    """Check ``fn(state, scores_block, V_block) -> (m, l, acc)``, the state after one more key block.

    >>> import mha_course as mc
    >>> online_softmax_update(mc.online_softmax_update)
    ✔ online_softmax_update: all 8 cases match
    True
    """
    return ONLINE_SOFTMAX_UPDATE.check(_as_state(fn))


# ---------------------------------------------------------------------------------------
# the tiled loop: exact attention, one key block at a time
# ---------------------------------------------------------------------------------------

def _tiled_ref(Q, K, V, block_size):
    """Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v), in key blocks of block_size."""
    return _tiled_attention(Q, K, V, None, block_size)


def _tiled_with(scale=lambda d: np.sqrt(d), divide=True, stop=lambda S, b: S, extra=0, restart=False,
                average_blocks=False, first_only=False, scale_by_S=False, root_of=None):
    """The tiled loop written the way a learner might (the defaults are the right one)."""
    def tiled(Q, K, V, block_size):
        T, S = Q.shape[0], K.shape[0]
        state, outs = _start(T, V.shape[-1]), []
        for c in range(0, min(stop(S, block_size), block_size) if first_only else stop(S, block_size), block_size):
            k, v = K[c:c + block_size + extra], V[c:c + block_size + extra]
            d = root_of(Q, K, V) if root_of else S if scale_by_S else None  # a size other than d_k under the root
            s = Q @ k.T / (np.sqrt(d) if d else scale(Q.shape[-1]))  # (T, c) one tile of scores
            if average_blocks:
                outs.append(_softmax(s) @ v)
                continue
            state = _update(_start(T, V.shape[-1]) if restart else state, s, v)
        if average_blocks:
            return np.mean(outs, axis=0)
        return _result(state) if divide else state.acc
    return tiled


def _tiled_blocks_scaled(Q, K, V, block_size):
    """The tiled loop with each tile divided by sqrt(its number of keys)."""
    state = _start(Q.shape[0], V.shape[-1])
    for c in range(0, K.shape[0], block_size):
        k, v = K[c:c + block_size], V[c:c + block_size]
        state = _update(state, Q @ k.T / np.sqrt(k.shape[0]), v)
    return _result(state)


def _tiled_cases():
    rng = np.random.default_rng(20241015)
    sizes = ((4, 10, 3, 2, 4), (3, 7, 2, 3, 3), (5, 6, 4, 1, 2), (2, 5, 3, 2, 8), (6, 9, 2, 4, 1))
    return [Case((rng.normal(size=(T, d)) * 1.5, rng.normal(size=(S, d)) * 1.5, rng.normal(size=(S, d_v)), b),
                 f"T={T}, S={S} keys in blocks of {b}" + (" (the last block is shorter)" if S % b else "")
                 + (" (one block holds every key)" if b >= S else ""))
            for T, S, d, d_v, b in sizes]


_TILED_MISTAKES = (
    Mistake("the accumulator is returned without dividing by the running sum l",
            "return state.acc / state.l (mc.online_softmax_result(state)) after the last block",
            _tiled_with(divide=False)),
    Mistake("the last, shorter block of keys is left out (the loop stops at S - S % block_size)",
            "range(0, S, block_size): the slice K[c:c + block_size] simply ends early on the last block",
            _tiled_with(stop=lambda S, b: S - S % b)),
    Mistake("the last block of keys is left out (the loop stops at S - block_size)",
            "range(0, S, block_size): the slice K[c:c + block_size] simply ends early on the last block",
            _tiled_with(stop=lambda S, b: max(S - b, 1))),
    Mistake("the tile of scores divided by √S (K.shape[0], the number of keys) instead of √d_k",
            "s = Q @ K_block.T / np.sqrt(d_k), d_k = Q.shape[-1]", _tiled_with(scale_by_S=True)),
    Mistake("the tile of scores divided by √T (Q.shape[0], the number of queries) instead of √d_k",
            "s = Q @ K_block.T / np.sqrt(d_k), d_k = Q.shape[-1]", _tiled_with(root_of=lambda Q, K, V: Q.shape[0])),
    Mistake("the tile of scores divided by √d_v (V.shape[-1], the width of V) instead of √d_k (the width of Q and K)",
            "s = Q @ K_block.T / np.sqrt(d_k), d_k = Q.shape[-1]", _tiled_with(root_of=lambda Q, K, V: V.shape[-1])),
    Mistake("the tile of scores divided by √block_size (the keys of one block) instead of √d_k",
            "s = Q @ K_block.T / np.sqrt(d_k), d_k = Q.shape[-1]", _tiled_blocks_scaled),
    Mistake("the tile of scores is not scaled by 1/sqrt(d_k)", "s = Q @ K_block.T / np.sqrt(d_k)",
            _tiled_with(scale=lambda d: 1.0)),
    Mistake("the tile of scores is divided by d_k instead of sqrt(d_k)", "s = Q @ K_block.T / np.sqrt(d_k)",
            _tiled_with(scale=lambda d: d),
            also=TWICE_D_K),
    Mistake("the state is started again for every block: only the last block's keys count",
            "start the state once, before the loop (mc.online_softmax_start(T, d_v)), and carry it",
            _tiled_with(restart=True)),
    Mistake("each block's own softmax output averaged over the blocks: blocks with small scores weigh as much "
            "as blocks with large ones", "carry a running max, sum and accumulator (mc.online_softmax_update)",
            _tiled_with(average_blocks=True)),
    Mistake("each block reads one key too many (K[c:c + block_size + 1]): the key at each block boundary "
            "counts twice", "K[c:c + block_size] and V[c:c + block_size]: the end of a slice is excluded",
            _tiled_with(extra=1)),
    Mistake("the return is inside the loop: only the first block of keys counts",
            "return after the loop, once every block has been folded into the state", _tiled_with(first_only=True)),
    Mistake("the right numbers, but through the whole T x S matrix of scores, which tiling exists to avoid",
            "compute one tile Q @ K[c:c + block_size].T at a time inside the loop, never Q @ K.T",
            lambda Q, K, V, block_size: _raise_quadratic()),
)
TILED_ATTENTION = Exercise("tiled_attention", _tiled_ref, _tiled_cases, _TILED_MISTAKES,
                           axes={"result": ("query", "feature")},
                           sizes=lambda Q, K, V, b: {"T": Q.shape[-2], "S": K.shape[-2], "d_k": Q.shape[-1],
                                                     "d_v": V.shape[-1], "block_size": b}, edges=('T', 'S'))


def tiled_attention(fn) -> bool:
    """Check ``fn(Q, K, V, block_size) -> out``: Q (T, d_k), K (S, d_k), V (S, d_v) -> (T, d_v),
    exact attention computed one block of keys at a time, never the whole T x S matrix.

    >>> import mha_course as mc
    >>> tiled_attention(lambda Q, K, V, block_size: mc.tiled_attention(Q, K, V, None, block_size))
    ✔ tiled_attention: all 7 cases match
    True
    """
    return _checked_at_length(TILED_ATTENTION, fn, lambda Q, K, V: fn(Q, K, V, 140),  # 140: two chunks of rows
                              lambda Q, K, V: _tiled_ref(Q, K, V, 140))


# ---------------------------------------------------------------------------------------
# the sliding-window mask
# ---------------------------------------------------------------------------------------

def _bool_subtract(T, window):
    """np.tril(ones) - np.tril(ones, -window) on boolean arrays: numpy raises a TypeError."""
    ones = np.ones((T, T), dtype=bool)
    return np.subtract(np.tril(ones), np.tril(ones, -window))


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
    Mistake("not causal: every future key is allowed (only t - s < window is tested)",
            "add the causal half: s <= t, i.e. 0 <= t - s < window", _window_with(lambda d, w: d < w)),
    Mistake("the diagonal is excluded: the window holds the keys before t but not t itself (0 < t - s < window)",
            "the query's own key counts: 0 <= t - s < window", _window_with(lambda d, w: (d > 0) & (d < w))),
    Mistake("the diagonal is excluded and the window shifted back: the window keys before t (0 < t - s <= window)",
            "the window ends on the query itself: 0 <= t - s < window", _window_with(lambda d, w: (d > 0) & (d <= w))),
    Mistake("the window is ignored: a plain causal mask", "keep only the last `window` keys: 0 <= t - s < window",
            _window_with(lambda d, w: d >= 0)),
    Mistake("the window inverted: the keys at least `window` back (np.tril(ones, -window)), not the last `window`",
            "the window is the band next to the diagonal: 0 <= t - s < window", _window_with(lambda d, w: d >= w)),
    Mistake("the window holds the FIRST `window` keys (s < window), not the last `window` before the query",
            "the window moves with the query: t - window < s <= t", lambda T, window: np.tril(
                np.ones((T, T), bool)) & (np.arange(T)[None, :] < window)),
    Mistake("two boolean masks subtracted with `-`: numpy refuses `-` on booleans (TypeError)",
            "combine boolean masks with & and ~: np.tril(ones) & ~np.tril(ones, -window)", _bool_subtract),
)


def _window_cases():
    return [Case((T, w), f"T={T}, window={w}") for T, w in ((6, 2), (5, 1), (7, 3), (4, 9), (8, 4), (3, 3), (9, 5))]


SLIDING_WINDOW_MASK = Exercise("sliding_window_mask", _sliding_window_mask, _window_cases, _WINDOW_MISTAKES)


def sliding_window_mask(fn) -> bool:
    """Check ``fn(T, window) -> (T, T) bool``: query t may attend keys s with t - window < s <= t.

    >>> import mha_course as mc
    >>> sliding_window_mask(mc.sliding_window_mask)
    ✔ sliding_window_mask: all 7 cases match
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
    Mistake("ReLU features: max(x, 0) can be 0 for every component, and a query whose features are all 0 "
            "gets 0 / 0", "phi(x) = elu(x) + 1 = mc.elu_feature_map(x), positive everywhere",
            lambda Q, K, V: _with_features(lambda x: np.maximum(x, 0), Q, K, V)),
    Mistake("exp as the feature map: exp(q) . exp(k) is not exp(q . k), and it is not the course's kernel",
            "phi(x) = elu(x) + 1 = mc.elu_feature_map(x)", lambda Q, K, V: _with_features(np.exp, Q, K, V)),
    Mistake("max(x, 0) + 1 (ReLU shifted by 1) as the feature map: elu(x) + 1 is exp(x) for x < 0, not 1",
            "phi = mc.elu_feature_map: elu(x) + 1, which is x + 1 for x > 0 and exp(x) for x <= 0",
            lambda Q, K, V: _with_features(lambda x: np.maximum(x, 0.0) + 1.0, Q, K, V)),
    Mistake("elu(x) without the + 1: the features can be negative, and so can the normaliser",
            "phi(x) = elu(x) + 1 (mc.elu_feature_map) is positive",
            lambda Q, K, V: _with_features(lambda x: _phi(x) - 1, Q, K, V)),
    Mistake("phi applied to V as well: the values are read as they are, only queries and keys go through phi",
            "kv = phi(K)^T @ V, with V itself", lambda Q, K, V: _with_features(_phi, Q, K, _phi(V))),
    Mistake("the normaliser sums the query's own features (phi(q).sum()), not phi(q) . sum of phi(k)",
            "normaliser = phi(Q) @ phi(K).sum(axis=-2)[..., None]: the same products as the numerator, with v = 1",
            lambda Q, K, V: (_phi(Q) @ (np.swapaxes(_phi(K), -1, -2) @ V)) / _phi(Q).sum(axis=-1, keepdims=True)),
    Mistake("the scores scaled by 1/sqrt(d_k) as in softmax attention: phi(Q / sqrt(d_k)) changes the kernel",
            "linear attention has no 1/sqrt(d_k): phi(Q) and phi(K) as they are",
            lambda Q, K, V: _with_features(_phi, Q / np.sqrt(Q.shape[-1]), K, V)),
    Mistake("softmax's 1/sqrt(d_k) split over Q and K (phi(Q / d_k^(1/4)), phi(K / d_k^(1/4))): linear "
            "attention has no such scale, and inside phi it changes the kernel",
            "phi(Q) and phi(K) as they are", lambda Q, K, V: _with_features(_phi, Q / Q.shape[-1] ** 0.25,
                                                                           K / K.shape[-1] ** 0.25, V)),
    Mistake("the feature map applied to Q only: K is used raw, so the kernel phi(q) . k can be negative",
            "apply phi to both: phi(Q) and phi(K) (mc.elu_feature_map)",
            lambda Q, K, V: (_phi(Q) @ (np.swapaxes(K, -1, -2) @ V)) / (_phi(Q) @ K.sum(axis=-2)[..., None])),
    Mistake("the feature map applied to K only: Q is used raw, so the kernel q . phi(k) can be negative",
            "apply phi to both: phi(Q) and phi(K) (mc.elu_feature_map)",
            lambda Q, K, V: (Q @ (np.swapaxes(_phi(K), -1, -2) @ V)) / (Q @ _phi(K).sum(axis=-2)[..., None])),
    Mistake("ReLU features kept positive by a small epsilon (max(x, 0) + eps): not the course's elu + 1",
            "phi(x) = elu(x) + 1 = mc.elu_feature_map(x), positive everywhere",
            lambda Q, K, V: _with_features(lambda x: np.maximum(x, 0) + 1e-6, Q, K, V)),
    Mistake("the right numbers, but through the T x S matrix phi(Q) phi(K)^T: quadratic like softmax attention",
            "reassociate, phi(Q) @ (phi(K)^T @ V): a (d_k, d_v) matrix, whatever T and S are",
            lambda Q, K, V: _raise_quadratic()),
)


def _with_features(phi, Q, K, V):
    """Non-causal linear attention with the feature map ``phi`` (the reference has phi = elu + 1)."""
    fQ, fK = phi(Q), phi(K)
    return (fQ @ (np.swapaxes(fK, -1, -2) @ V)) / (fQ @ fK.sum(axis=-2)[..., None])


LINEAR_ATTENTION = Exercise("linear_attention", _linear_attention, _linear_cases, _LINEAR_MISTAKES,
                            axes={"result": ("query", "feature")}, edges=('T', 'S'))

_PROBE_T, _PROBE_D = 2000, 4


def _quadratic_peak(fn, call=None, reference=_linear_attention):
    """Peak bytes of call(Q, K, V) (default fn(Q, K, V)) on a T = S = 2000 probe when its result is
    right; "wrong" when it returned a wrong result there; else None (it failed, is a stub or is not
    a function: the cases report those)."""
    if not callable(fn):
        return None
    rng = np.random.default_rng(7)
    Q, K, V = (rng.normal(size=(_PROBE_T, _PROBE_D)) for _ in range(3))
    tracemalloc.start()
    try:
        with np.errstate(all="ignore"), contextlib.redirect_stdout(io.StringIO()):
            out = (call or fn)(Q, K, V)
        peak = tracemalloc.get_traced_memory()[1]
    except Exception:
        return None
    finally:
        tracemalloc.stop()
    try:
        right = np.shape(out) == (_PROBE_T, _PROBE_D) and bool(np.allclose(out, reference(Q, K, V)))
    except Exception:
        return None
    return peak if right else "wrong"


def _checked_at_length(exercise, fn, call=None, reference=_linear_attention) -> bool:
    """exercise.check of fn through the memory probe; a function right on every case but wrong on the
    T = S = 2000 probe is refused too (a size, a block or a chunk of rows that assumes short sequences)."""
    probe = {}
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        ok = exercise.check(_memory_checked(fn, call, reference, probe))
    if ok and probe.get("peak") == "wrong":
        return engine.report(exercise.name, "wrong", [
            f"✘ {exercise.name}: right on every case, but wrong at T = S = {_PROBE_T} (the memory probe, "
            f"{_PROBE_D} features): does a size, a block or a chunk of rows assume short sequences?"])
    print(text.getvalue(), end="")
    return ok


def _raise_quadratic():
    raise QuadraticMemory("the numbers are right, but they went through a T x S matrix")


def _memory_checked(fn, call=None, reference=_linear_attention, probe=None):
    """fn that first measures, once, its memory on the T = S = 2000 probe (inside the checked, time-limited
    call): right numbers through a T x S matrix raise QuadraticMemory, named by the catalogue; a wrong
    result there is noted in ``probe["peak"]`` ("wrong") for :func:`_checked_at_length`."""
    if not callable(fn):
        return fn
    probe = {} if probe is None else probe

    @functools.wraps(fn)
    def checked(*args):
        if "peak" not in probe:
            probe["peak"] = _quadratic_peak(fn, call, reference)
        if isinstance(probe["peak"], int) and probe["peak"] >= _PROBE_T * _PROBE_T * 8 / 2:
            raise QuadraticMemory(f"the numbers are right, but at T = S = {_PROBE_T} it took "
                                  f"{probe['peak'] / 2**20:.0f} MiB (one T x S float64 matrix is "
                                  f"{_PROBE_T * _PROBE_T * 8 / 2**20:.0f} MiB)")
        return fn(*args)
    return checked


def linear_attention(fn) -> bool:
    """Check ``fn(Q, K, V) -> out``: non-causal linear attention, phi = elu + 1, in O(T) memory.

    >>> import mha_course as mc
    >>> linear_attention(mc.linear_attention)
    ✔ linear_attention: all 5 cases match
    True
    """
    return _checked_at_length(LINEAR_ATTENTION, fn)
