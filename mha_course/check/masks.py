"""Checkers for notebook 06: ``mask_as`` (mask polarity) and ``causal_self_attention`` (with the leak probe).

``causal_self_attention`` first compares the learner's function with the reference on seeded
cases; when it differs it also runs ``masks.leak_probe`` on it and prints which outputs see
tokens they must not (the future), so an off-by-one or a flipped mask shows as the leak it is.
"""
from __future__ import annotations

import numpy as np

from ..attention import causal_mask as _causal_mask
from ..attention import scaled_dot_product_attention as _sdpa
from ..attention import softmax as _softmax
from ..masks import leak_probe as _leak_probe
from ..masks import mask_as as _mask_as
from .engine import Case, Exercise, Mistake

__all__ = ["mask_as", "causal_self_attention", "MASK_AS", "CAUSAL_SELF_ATTENTION", "document_mask", "DOCUMENT_MASK"]


# ---------------------------------------------------------------------------------------
# mask_as
# ---------------------------------------------------------------------------------------

def _mask_as_with(block, additive):
    """A mask_as whose 'block' and 'additive' branches are ``block(keep)`` and ``additive(keep)``."""
    def convert(mask, convention):
        keep = np.asarray(mask, dtype=bool)
        return {"keep": lambda m: m.copy(), "block": block, "additive": additive}[convention](keep)
    return convert


def _mask_cases():
    rng = np.random.default_rng(20240606)
    shapes = ((4, 4), (3, 5), (2, 1, 3, 6), (2, 1, 1, 7), (5, 2))
    return [Case((rng.random(s) < 0.6, c), f"a {s} mask to {c!r}")
            for s in shapes for c in ("keep", "block", "additive")]


def _reference_additive(keep):
    return np.where(keep, 0.0, -np.inf)


_MASK_MISTAKES = (
    Mistake("'block' returns the keep-mask unchanged: nn.MultiheadAttention reads True as blocked",
            "'block' is the opposite polarity: return ~mask",
            _mask_as_with(lambda m: m.copy(), _reference_additive)),
    Mistake("'additive' has the polarity flipped: -inf where attending is allowed, 0 where it is not",
            "np.where(mask, 0.0, -np.inf): 0 keeps a score, -inf removes it",
            _mask_as_with(lambda m: ~m, lambda m: np.where(m, -np.inf, 0.0))),
    Mistake("'additive' returns the mask as 1.0 / 0.0: adding 1 or 0 to a score blocks nothing",
            "np.where(mask, 0.0, -np.inf)",
            _mask_as_with(lambda m: ~m, lambda m: m.astype(float))),
    Mistake("'additive' uses a large finite number (-1e9) instead of -inf",
            "use -np.inf: then a blocked key gets weight exactly 0 in any dtype",
            _mask_as_with(lambda m: ~m, lambda m: np.where(m, 0.0, -1e9))),
)
MASK_AS = Exercise("mask_as", _mask_as, _mask_cases, _MASK_MISTAKES)


def mask_as(fn) -> bool:
    """Check a learner's ``mask_as(mask, convention)``: our keep-mask -> "keep" / "block" / "additive".

    >>> import mha_course as mc
    >>> mask_as(mc.mask_as)
    ✔ mask_as: all 15 cases match
    True
    """
    return MASK_AS.check(fn)


# ---------------------------------------------------------------------------------------
# causal self-attention, with the leak probe
# ---------------------------------------------------------------------------------------

def _attend_with(keep_of):
    """x (..., T, d) -> out: self-attention (Q = K = V = x) under the mask keep_of(T)."""
    return lambda x: _sdpa(x, x, x, keep_of(x.shape[-2]))[0]


def _mask_after_softmax(x):
    T, d = x.shape[-2], x.shape[-1]
    weights = _softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(d)) * _causal_mask(T)  # no renormalising
    return weights @ x


def _self_attention_cases():
    rng = np.random.default_rng(20240808)
    return [Case((rng.normal(size=(5, 4)),), "x (T=5, d=4)"), Case((rng.normal(size=(2, 7, 3)),), "x (B=2, T=7, d=3)"),
            Case((rng.normal(size=(1, 6)),), "x (T=1, d=6)"), Case((rng.normal(size=(3, 4, 8)),), "x (B=3, T=4, d=8)")]


_SELF_ATTENTION_MISTAKES = (
    Mistake("no mask: every token reads the future", "pass mask=causal_mask(T) (True on and below the diagonal)",
            _attend_with(lambda T: None)),
    Mistake("the mask's polarity is flipped (a True-means-blocked triu used as a keep-mask): "
            "each token reads only the future", "keep = np.tril(np.ones((T, T), bool)); True = may attend",
            _attend_with(lambda T: np.triu(np.ones((T, T), bool), 1))),
    Mistake("off by one: np.tril(..., k=1) lets each token read the next one",
            "np.tril(np.ones((T, T), bool)) with k=0: key j is allowed for query t when j <= t",
            _attend_with(lambda T: np.tril(np.ones((T, T), bool), 1))),
    Mistake("the diagonal is masked too (k=-1): a token may not read itself, and row 0 sees nothing",
            "np.tril(np.ones((T, T), bool)) with k=0", _attend_with(lambda T: np.tril(np.ones((T, T), bool), -1))),
    Mistake("the mask is applied after the softmax: the weights no longer sum to 1, and the future "
            "still leaks in through the softmax's row sums",
            "set the forbidden scores to -inf before the softmax", _mask_after_softmax),
)
CAUSAL_SELF_ATTENTION = Exercise("causal_self_attention", _attend_with(_causal_mask), _self_attention_cases,
                                 _SELF_ATTENTION_MISTAKES)


def causal_self_attention(fn) -> bool:
    """Check a learner's ``causal_self_attention(x)``: x (..., T, d) -> out (..., T, d), Q = K = V = x.

    When the results differ, the leak probe also reports which outputs see the future.

    >>> import mha_course as mc
    >>> causal_self_attention(lambda x: mc.scaled_dot_product_attention(x, x, x, mc.causal_mask(x.shape[-2]))[0])
    ✔ causal_self_attention: all 4 cases match
    True
    """
    if CAUSAL_SELF_ATTENTION.check(fn):
        return True
    try:
        report = _leak_probe(fn, 6, rng=np.random.default_rng(0), d=4)
    except Exception:  # a learner's function that fails on the probe's input: the check said why
        return False
    print("  leak probe (T=6): " + report.describe(most=3).replace("\n", "\n  "))
    return False


# ---------------------------------------------------------------------------------------
# document mask (packed sequences)
# ---------------------------------------------------------------------------------------

def _document_with(same_of):
    """A document_mask(doc_ids, causal=False) whose 'same document' test is same_of(ids) (T, T)."""
    def mask(doc_ids, causal=False):
        ids = np.asarray(doc_ids)
        same = same_of(ids)
        return same & _causal_mask(len(ids)) if causal else same
    return mask


def _document_cases():
    rng = np.random.default_rng(20240909)
    cases = []
    for n_docs, causal in ((3, False), (2, True), (4, True), (1, False), (5, False), (3, True)):
        ids = np.repeat(np.arange(n_docs), rng.integers(1, 4, size=n_docs))  # (T,): 0 0 1 1 1 2 ...
        cases.append(Case((ids, causal), f"{n_docs} packed documents, T={len(ids)}, causal={causal}"))
    return cases


_SAME = _document_with(lambda ids: ids[:, None] == ids[None, :])
_DOCUMENT_MISTAKES = (
    Mistake("causal=True is ignored: tokens read the future inside their document",
            "when causal, also require key <= query: same & np.tril(np.ones((T, T), bool))",
            lambda doc_ids, causal=False: _SAME(doc_ids, False)),
    Mistake("always causal, even when causal=False",
            "apply the causal part only when causal=True", lambda doc_ids, causal=False: _SAME(doc_ids, True)),
    Mistake("the documents are not separated: the mask ignores doc_ids",
            "allow query t and key s only when doc_ids[t] == doc_ids[s]",
            _document_with(lambda ids: np.ones((len(ids), len(ids)), bool))),
    Mistake("doc_ids compared with >=: later documents read the earlier ones",
            "use ==: a document never reads another, earlier or later",
            _document_with(lambda ids: ids[:, None] >= ids[None, :])),
)
DOCUMENT_MASK = Exercise("document_mask", lambda doc_ids, causal=False: _SAME(doc_ids, causal),
                         _document_cases, _DOCUMENT_MISTAKES)


def document_mask(fn) -> bool:
    """Check a learner's ``document_mask(doc_ids, causal=False)``: doc_ids (T,) -> (T, T) bool.

    >>> import mha_course as mc
    >>> document_mask(mc.document_mask)
    ✔ document_mask: all 6 cases match
    True
    """
    return DOCUMENT_MASK.check(fn)


