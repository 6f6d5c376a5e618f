"""Checkers for notebook 13: ALiBi's slopes, position interpolation's frequencies, the log-sum-exp merge.

The cases vary h (powers of two and not), d_k, the base and the factor, the number of chunks,
the rows and the size of the log-sum-exps (with chunks and whole rows that saw no key), so no
table of constants fits. The mistakes are the ones learners make: one geometric rule for every h,
slopes starting at 1, the wrong half of the next power's slopes; multiplying by the factor, or
changing the base (that is NTK), or halving the exponent; averaging the partial outputs,
forgetting the max shift or the normalisation, or the guard for rows that saw nothing.
"""
from __future__ import annotations

import math

import numpy as np

from ..efficient import merge_attention_partials as _merge
from ..positions import alibi_slopes as _alibi_slopes
from ..positions import rope_inv_freq as _rope_inv_freq
from .engine import Case, Exercise, Mistake

__all__ = ["alibi_slopes", "interpolated_inv_freq", "lse_merge", "ALIBI_SLOPES", "INTERPOLATED_INV_FREQ",
           "LSE_MERGE"]


# ---------------------------------------------------------------------------------------
# ALiBi's slopes
# ---------------------------------------------------------------------------------------

def _geometric(n, first=1, base=2.0):
    """2^(-8k/n) for k = first .. first + n - 1 (``base`` for 2: a learner's e)."""
    return base ** (-8.0 * np.arange(first, first + n) / n)


def _nearest_power_rounded(h):
    """n = 2^round(log2 h), which can exceed h: then the first h slopes of n."""
    n = 2 ** int(round(math.log2(h)))
    if n >= h:
        return _geometric(n)[:h]
    return np.concatenate([_geometric(n), _geometric(2 * n)[0::2][:h - n]])


def _slopes_with(rest, first: int = 1):
    """The paper's rule with geometric sequences from k = ``first``; ``rest(n, h)`` -> the slopes of the
    h - n extra heads (default: the paper's every other slope of 2n)."""
    rest = rest or (lambda n, h: _geometric(2 * n, first)[0::2][:h - n])

    def slopes(h):
        n = 2 ** int(math.floor(math.log2(h)))
        return _geometric(h, first) if n == h else np.concatenate([_geometric(n, first), rest(n, h)])
    return slopes


def _e_slopes(h):
    """The paper's rule with e for 2 everywhere."""
    n = 2 ** int(math.floor(math.log2(h)))
    e = math.e
    return _geometric(h, base=e) if n == h else np.concatenate([_geometric(n, base=e),
                                                                _geometric(2 * n, base=e)[0::2][:h - n]])


_ALIBI_MISTAKES = (
    Mistake("the geometric rule 2^(-8k/h) for every h: the paper uses it only when h is a power of two",
            "for other h take the slopes of the nearest lower power of two n, then every other slope of 2n "
            "(geometric(2n)[0::2]) for the h - n heads left",
            lambda h: _geometric(h)),
    Mistake("the slopes start at 2^0 = 1: k runs 0 .. h-1 instead of 1 .. h",
            "the first slope is 2^(-8/h) (1/2 for h = 8): use k = 1 .. h",
            _slopes_with(None, first=0)),
    Mistake("the extra heads take the slopes of 2n that the first n heads already have ([1::2])",
            "take geometric(2n)[0::2] (every other slope starting with the first), which interleave with "
            "the n slopes already used",
            _slopes_with(lambda n, h: _geometric(2 * n)[1::2][:h - n])),
    Mistake("for h not a power of two, the first h slopes of the next power of two 2n",
            "the paper keeps the n slopes of the lower power of two, then adds every other slope of 2n",
            lambda h: _geometric(2 ** math.ceil(math.log2(h)))[:h]),
    Mistake("the extra heads take the FIRST h - n slopes of 2n, not every other one",
            "take geometric(2n)[0::2][:h - n]: every other slope of 2n, starting with the first",
            _slopes_with(lambda n, h: _geometric(2 * n)[:h - n])),
    Mistake("e^(-8k/n) instead of 2^(-8k/n): the base of the geometric sequence is 2",
            "slopes 2 ** (-8 * k / n): 1/2, 1/4, ... for n = 8", _e_slopes),
    Mistake("the power of two n rounded to the nearest (round(log2 h)) instead of down: n can exceed h",
            "n = 2 ** floor(log2 h), the largest power of two <= h", _nearest_power_rounded),
    Mistake("the right slopes in another order (sorted): head i must get the paper's i-th slope",
            "keep the paper's order: the n slopes of the lower power of two first, then the extra ones",
            lambda h: np.sort(_alibi_slopes(h))[::-1]),
)


def _alibi_cases():
    # powers of two and not, up to 48 heads: a table of the slopes for h <= 16 (or for powers of two) does not fit
    return [Case((h,), f"h={h}") for h in (8, 6, 1, 12, 4, 3, 16, 5, 20, 32, 7, 24, 33, 48)]


ALIBI_SLOPES = Exercise("alibi_slopes", _alibi_slopes, _alibi_cases, _ALIBI_MISTAKES)


def alibi_slopes(fn) -> bool:
    """Check ``fn(h) -> (h,)``: ALiBi's head slopes (Press et al. 2022), for any h.

    >>> import mha_course as mc
    >>> alibi_slopes(mc.alibi_slopes)
    ✔ alibi_slopes: all 14 cases match
    True
    """
    return ALIBI_SLOPES.check(fn)


# ---------------------------------------------------------------------------------------
# position interpolation's frequencies
# ---------------------------------------------------------------------------------------

def _interpolated(d_k, base, factor):
    return _rope_inv_freq(d_k, base, {"type": "linear", "factor": factor})


def _freqs(d_k, base, exponent=2.0, start=0):
    return base ** (-exponent * np.arange(start, start + d_k // 2) / d_k)


_PI_MISTAKES = (
    Mistake("multiplied by the factor: the angles turn s times FASTER, to positions never seen",
            "position interpolation divides every frequency by s: inv_freq = base^(-2j/d_k) / s",
            lambda d_k, base, factor: _freqs(d_k, base) * factor),
    Mistake("the base was changed (base · s^(d_k/(d_k-2))): that is NTK-aware scaling, not interpolation",
            "keep the base; divide each frequency by s",
            lambda d_k, base, factor: _freqs(d_k, base * factor ** (d_k / (d_k - 2)))),
    Mistake("the exponent is off by a factor of 2: base^(-j/d_k) instead of base^(-2j/d_k)",
            "with j the pair index 0 .. d_k/2 - 1, use base ** (-2 * j / d_k)",
            lambda d_k, base, factor: _freqs(d_k, base, exponent=1.0) / factor),
    Mistake("the pair index starts at 1: the fastest pair (1 radian per position) is missing",
            "j = np.arange(d_k // 2), starting at 0",
            lambda d_k, base, factor: _freqs(d_k, base, start=1) / factor),
    Mistake("the factor was not applied: these are RoPE's plain frequencies",
            "divide by the factor s = new length / trained length",
            lambda d_k, base, factor: _freqs(d_k, base)),
    Mistake("the base divided by the factor ((base / s)^(-2j/d_k)) instead of the frequencies",
            "keep the base; divide each frequency by s: base ** (-2j / d_k) / s",
            lambda d_k, base, factor: _freqs(d_k, base / factor)),
    Mistake("the base multiplied by the factor ((base · s)^(-2j/d_k)) instead of the frequencies divided by it",
            "keep the base; divide each frequency by s: base ** (-2j / d_k) / s",
            lambda d_k, base, factor: _freqs(d_k, base * factor)),
    Mistake("the exponent over d_k - 2 (NTK's d_k / (d_k - 2) from memory): base^(-2j/(d_k-2))",
            "the exponent is -2j / d_k: inv_freq = base ** (-2 * j / d_k) / s",
            lambda d_k, base, factor: base ** (-2.0 * np.arange(d_k // 2) / (d_k - 2)) / factor),
)


def _pi_cases():
    return [Case((d_k, base, s), f"d_k={d_k}, base={base:g}, factor={s:g}")
            for d_k, base, s in ((8, 10000.0, 4.0), (16, 100.0, 2.0), (4, 10000.0, 8.0), (128, 500000.0, 16.0),
                                 (6, 50.0, 0.5))]  # d_k = 128 at Llama 3's base: base ** (d_k - 2) overflows; a factor
    # below 1 (a shorter context) divides all the same


INTERPOLATED_INV_FREQ = Exercise("interpolated_inv_freq", _interpolated, _pi_cases, _PI_MISTAKES)


def interpolated_inv_freq(fn) -> bool:
    """Check ``fn(d_k, base, factor) -> (d_k // 2,)``: RoPE's frequencies under position interpolation.

    >>> import mha_course as mc
    >>> interpolated_inv_freq(lambda d_k, base, s: mc.rope_inv_freq(d_k, base, {"type": "linear", "factor": s}))
    ✔ interpolated_inv_freq: all 5 cases match
    True
    """
    return INTERPOLATED_INV_FREQ.check(fn)


# ---------------------------------------------------------------------------------------
# the log-sum-exp merge of split-KV partials
# ---------------------------------------------------------------------------------------

def _merge_with(shift=True, normalise=True, guard=True, linear=False, chunks=None, zeroed=False):
    def merge(outs, lses):
        outs, lses = (outs, lses) if chunks is None else (outs[:chunks], lses[:chunks])
        lse = np.stack(lses)  # (n, T, 1)
        if linear:
            w = np.where(np.isfinite(lse), lse, 0.0) if zeroed else lse
        else:
            m = lse.max(axis=0)
            s = (np.where(np.isfinite(m), m, 0.0) if guard else m) if shift else 0.0
            w = np.exp(lse - s)
        merged = sum(w_c * o for w_c, o in zip(w, outs))
        if not normalise:
            return merged
        total = w.sum(axis=0)
        return merged / (np.where(total > 0, total, 1.0) if guard else total)
    return merge


def _merge_over_queries(outs, lses):
    """Chunk weights softmaxed over the query axis: each chunk's weights sum to 1 over T."""
    L = np.stack(lses)  # (n, T, 1)
    L = np.where(np.isfinite(L), L, -1e300)
    w = np.exp(L - L.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True) * np.stack(outs)).sum(axis=0)


def _merge_best_chunk(outs, lses):
    """Each row's output from its chunk of largest lse alone (zeros where every chunk is -inf)."""
    L, O = np.stack(lses), np.stack(outs)  # (n, T, 1), (n, T, d_v)
    best = np.take_along_axis(O, np.argmax(L, axis=0)[None], axis=0)[0]
    return np.where(np.isfinite(L.max(axis=0)), best, 0.0)


_MERGE_MISTAKES = (
    Mistake("the partial outputs are averaged: a chunk with one weak key counts as much as one with the best",
            "weigh chunk c by its share of the softmax's denominator, exp(lse_c - lse) with lse = logsumexp(lse_c)",
            lambda outs, lses: sum(outs) / len(outs)),
    Mistake("exp(lse_c) without subtracting the largest lse: it overflows to inf (NaN) for large scores",
            "subtract m = max_c lse_c first: w_c = exp(lse_c - m)",
            _merge_with(shift=False)),
    Mistake("the weights are not normalised: sum_c exp(lse_c - m) · out_c is missing / sum_c exp(lse_c - m)",
            "divide by the sum of the weights (the chunk shares must add up to 1)",
            _merge_with(normalise=False)),
    Mistake("the lse values are used as weights directly instead of exp(lse)",
            "lse is a log: the weight of chunk c is exp(lse_c - m), normalised",
            _merge_with(linear=True)),
    Mistake("the lse values are used as weights directly instead of exp(lse) (an lse of -inf taken as 0)",
            "lse is a log: the weight of chunk c is exp(lse_c - m), normalised", _merge_with(linear=True, zeroed=True)),
    Mistake("only the chunk with the largest lse kept (a hard max): every chunk counts, weighted by its share "
            "exp(lse_c - lse)", "w = exp(L - L.max(0)); out = (w * O).sum(0) / w.sum(0), with L = np.stack(lses)",
            _merge_best_chunk),
    Mistake("only the first two chunks merged: every chunk of the list counts", "loop over (or stack) all the "
            "chunks: np.stack(lses) is (n_chunks, T, 1)", _merge_with(chunks=2)),
    Mistake("the chunk weights normalised over the queries (axis 1) instead of over the chunks (axis 0)",
            "the softmax over chunks: w = exp(L - L.max(0)); w / w.sum(0), with L = np.stack(lses) (n, T, 1)",
            _merge_over_queries),
    Mistake("no guard for rows whose chunks all saw no key (every lse = -inf): exp(-inf - (-inf)) is NaN",
            "shift by 0 where the max is -inf, and divide by 1 where the total is 0: those rows give zeros",
            _merge_with(guard=False)),
)


def _merge_cases():
    from ..efficient import split_kv_partials
    rng = np.random.default_rng(20241313)
    cases = []
    for T, S, d, n, scale, note in ((3, 10, 4, 3, 1.0, "3 chunks"), (2, 9, 2, 4, 3.0, "4 chunks, sharp scores"),
                                     (4, 7, 3, 2, 1.0, "2 chunks of 4 and 3 keys")):
        outs, lses = split_kv_partials(rng.normal(size=(T, d)) * scale, rng.normal(size=(S, d)) * scale,
                                       rng.normal(size=(S, 2)), n)
        cases.append(Case((outs, lses), f"T={T}, S={S}, {note}"))
    mask = np.ones((3, 8), bool)
    mask[:, 0:4] = False  # the first of two chunks blocked for every query
    mask[2] = False       # and query 2 may attend nothing
    outs, lses = split_kv_partials(rng.normal(size=(3, 4)), rng.normal(size=(8, 4)), rng.normal(size=(8, 2)), 2, mask)
    cases.append(Case((outs, lses), "chunk 0 fully masked, row 2 sees no key"))
    outs, lses = split_kv_partials(rng.normal(size=(2, 4)) * 40, rng.normal(size=(6, 4)) * 40,
                                   rng.normal(size=(6, 3)), 3)
    cases.append(Case((outs, [lse + 800.0 for lse in lses]), "log-sum-exps near 800 (exp overflows)"))
    return cases


LSE_MERGE = Exercise("lse_merge", _merge, _merge_cases, _MERGE_MISTAKES)


def lse_merge(fn) -> bool:
    """Check ``fn(outs, lses) -> out (T, d_v)``: the exact merge of split-KV partial outputs.

    >>> import mha_course as mc
    >>> from mha_course.efficient import merge_attention_partials
    >>> lse_merge(merge_attention_partials)
    ✔ lse_merge: all 5 cases match
    True
    """
    return LSE_MERGE.check(fn)
