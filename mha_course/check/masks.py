"""Checkers for notebook 06: causal self-attention (with the leak probe), ``mask_as``, ``document_mask``
and ``cross_attention``.

Each catalogue holds the slips a learner who half-remembers the formula makes (an axis, a
transpose, a sign, an off-by-one, a scale, a polarity, an order); a mistake nobody catalogued
gets a closer look in the exercise's own terms: the leak probe for causal attention, the
convention that is wrong for ``mask_as``, the pairs of tokens wrongly allowed or blocked for
``document_mask``, which output and which keys for ``cross_attention``.

Two helpers are shared by the checkers of notebooks 06-09: :func:`natural_types` (a list for a
tuple, ``4.0`` for ``4``, for a catalogued mistake written in those types) and
:func:`check_with_closer_look`. A learner's result is not converted: the comparison names a list
for a tuple and a float for an int.
"""
from __future__ import annotations

import contextlib
import functools
import io
from typing import Callable

import numpy as np

from ..attention import causal_mask as _causal_mask
from ..attention import scaled_dot_product_attention as _sdpa
from ..attention import softmax as _softmax
from ..masks import document_mask as _document_mask
from ..masks import leak_probe as _leak_probe
from ..masks import mask_as as _mask_as
from . import engine
from .engine import Case, Exercise, Fresh, Mistake, Part
from .language import say
from .report import results
from .vocabulary import TWICE_D

__all__ = ["mask_as", "causal_self_attention", "document_mask", "cross_attention", "natural_types",
           "check_with_closer_look", "call_timed", "MASK_AS", "CAUSAL_SELF_ATTENTION", "DOCUMENT_MASK", "CROSS_ATTENTION",
           "MASK_AS_UNKNOWN"]


# ---------------------------------------------------------------------------------------
# shared by the checkers of 06-09
# ---------------------------------------------------------------------------------------

def _natural(value):
    """A list where a tuple is expected is a tuple; a whole float (or numpy scalar) is an int."""
    if isinstance(value, list) and len(value) in (2, 3) and all(np.ndim(v) >= 1 for v in value):
        return tuple(value)
    if isinstance(value, (float, np.floating)) and np.isfinite(value) and float(value).is_integer():
        return int(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def natural_types(fn: Callable) -> Callable:
    """fn with its results in natural types: a list of arrays as a tuple, 4.0 (or np.int64(4)) as 4.

    >>> natural_types(lambda: [np.zeros(1), np.ones(1)])()
    (array([0.]), array([1.]))
    >>> natural_types(lambda: 4.0)()
    4
    """
    if not callable(fn):
        return fn

    @functools.wraps(fn)
    def wrapped(*args):
        out = fn(*args)
        return out if out is Ellipsis or out is NotImplemented else _natural(out)
    return wrapped


def check_with_closer_look(exercise, fn, closer_look=None, always=False) -> bool:
    """exercise.check(fn); when no catalogued mistake fits, closer_look(fn) -> lines.

    The closer look speaks in the exercise's terms (which convention, which pair of features,
    which tokens); it is printed only for a wrong result that is not a known mistake, an error,
    a time-out or a stub (``always``: also after a catalogued mistake). Wrong is the status the
    check recorded; a known mistake is the verdict's "Looks like:" in the course's language.
    """
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        ok = exercise.check(fn)
    out = text.getvalue()
    print(out, end="")
    if ok or closer_look is None or not callable(fn) or results().get(exercise.name) != "wrong":
        return ok
    if (_looks_like() in out and not always) or any(s in out for s in ("it raised", "did not finish",
                                                                       "returned None")):
        return ok
    try:
        with np.errstate(all="ignore"):
            lines = closer_look(fn)
    except Exception:  # the learner's function failed on the closer look's input: the check said enough
        return ok
    if lines:
        print("\n".join([say("  A closer look:")] + [f"    {ln}" for ln in lines]))
    return ok


def _looks_like() -> str:
    """How a verdict that names a catalogued mistake begins it, in the course's language ("Looks like: ")."""
    return say("Looks like: {mistake}. Fix: {fix}", mistake="\0", fix="").split("\0")[0]


def call_timed(fn, *args):
    """fn(*args) under the engine's time limit (:func:`~.engine.call_learner`)."""
    return engine.call_learner(fn, *args)


# ---------------------------------------------------------------------------------------
# mask_as
# ---------------------------------------------------------------------------------------

def _mask_as_with(keep=None, block=None, additive=None):
    """A mask_as whose branches are the right ones except those given (functions of the keep-mask)."""
    branches = {"keep": keep or (lambda m: m.copy()), "block": block or (lambda m: ~m),
                "additive": additive or (lambda m: np.where(m, 0.0, -np.inf))}

    def convert(mask, convention):
        return branches[convention](np.asarray(mask, dtype=bool))
    return convert


def _mask_cases():
    rng = np.random.default_rng(20240606)
    shapes = ((4, 4), (3, 5), (2, 1, 3, 6), (2, 1, 1, 7), (5, 2))
    return [Case((rng.random(s) < 0.6, c), f"a {s} mask to {c!r}")
            for s, c in zip(shapes * 3, ("keep", "block", "additive") * 5)]


_FIX_ADDITIVE = "np.where(mask, 0.0, -np.inf): 0 keeps a score, -inf removes it"
_MASK_MISTAKES = (
    Mistake("'block' returns the keep-mask unchanged: nn.MultiheadAttention reads True as blocked",
            "'block' is the opposite polarity: return ~mask", _mask_as_with(block=lambda m: m.copy())),
    Mistake("'keep' and 'block' swapped: 'keep' returns ~mask and 'block' the mask itself",
            "'keep' is our own convention (True = may attend): return mask; 'block' returns ~mask",
            _mask_as_with(keep=lambda m: ~m, block=lambda m: m.copy())),
    Mistake("'block' returned as floats 1.0 / 0.0: nn.MultiheadAttention ADDS a float mask to the scores "
            "(+1 on blocked, +0 on kept keys), so it blocks nothing",
            "return a boolean mask: ~mask (dtype bool), True = blocked",
            _mask_as_with(block=lambda m: (~m).astype(float))),
    Mistake("'additive' has the polarity flipped: -inf where attending is allowed, 0 where it is not",
            _FIX_ADDITIVE, _mask_as_with(additive=lambda m: np.where(m, -np.inf, 0.0))),
    Mistake("'additive' returns the mask as 1.0 / 0.0: adding 1 or 0 to a score blocks nothing",
            _FIX_ADDITIVE, _mask_as_with(additive=lambda m: m.astype(float))),
    Mistake("'additive' built as mask - 1: 0 where kept, but only -1 where blocked, which barely lowers a score",
            _FIX_ADDITIVE, _mask_as_with(additive=lambda m: m.astype(float) - 1.0)),
    Mistake("'additive' built as (1 - mask) * -inf: 0 * -inf is nan, so every kept score becomes nan",
            _FIX_ADDITIVE + " (never multiply -inf by 0)",
            _mask_as_with(additive=lambda m: (1.0 - m) * -np.inf)),
    Mistake("'additive' uses a large finite number (-1e9) instead of -inf",
            "use -np.inf: then a blocked key gets weight exactly 0 in any dtype",
            _mask_as_with(additive=lambda m: np.where(m, 0.0, -1e9))),
)
MASK_AS = Exercise("mask_as", _mask_as, _mask_cases, _MASK_MISTAKES, rules=(
    Fresh("return a copy for 'keep' too: np.array(mask, dtype=bool) (np.asarray and mask itself return the "
          "caller's array)"),))


def _unknown_outcome(f):
    """What f(mask, convention) does for an unknown convention, as a sentence (the value compared)."""
    @functools.wraps(f)
    def outcome(mask, convention):
        try:
            got = f(mask, convention)
        except Exception:
            return "it raises an error that names the valid conventions"
        if got is None:
            return "it returns None"
        return f"it returns a {type(got).__name__}" + (f" of shape {np.shape(got)}" if np.ndim(got) else "")
    return outcome


def _unknown_cases():
    rng = np.random.default_rng(20240607)
    return [(rng.random((3, 4)) < 0.5, c) for c in ("Block", "bool", "causal", "")]


_FIX_UNKNOWN = ("end with raise ValueError(f\"unknown convention {convention!r}; valid: 'keep', 'block', "
                "'additive'\"): a typo must fail loudly, not hand back a mask nobody asked for")
MASK_AS_UNKNOWN = (
    Mistake("an unknown convention returns None: a typo such as 'Block' gives no mask and no error",
            _FIX_UNKNOWN, _unknown_outcome(lambda mask, convention: None)),
    Mistake("an unknown convention returns the mask unchanged (an else branch that falls back to 'keep')",
            _FIX_UNKNOWN, _unknown_outcome(lambda mask, convention: np.asarray(mask, dtype=bool))),
)


def _mask_as_closer_look(fn) -> list:
    keep = np.array([[True, True, False]])
    lines = []
    for convention in ("keep", "block", "additive"):
        want, got = _mask_as(keep, convention), call_timed(fn, keep.copy(), convention)
        if np.shape(got) != want.shape or not np.allclose(np.asarray(got, dtype=float), want, equal_nan=True):
            lines.append(f"'{convention}' is wrong: for the keep-mask [True, True, False] it gives "
                         f"{np.asarray(got).tolist()}, expected {want.tolist()}")
    return lines or ["every convention is right on [True, True, False]: look at the case above "
                     "(its shape, its dtype)"]


def mask_as(fn) -> bool:
    """Check a learner's ``mask_as(mask, convention)``: our keep-mask -> "keep" / "block" / "additive".

    An unknown convention must raise (a ValueError naming the valid ones).

    >>> import mha_course as mc
    >>> mask_as(mc.mask_as)
    ✔ mask_as: all 15 cases match, and an unknown convention raises
    True
    """
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        ok = check_with_closer_look(MASK_AS, fn, _mask_as_closer_look)
    if not ok:
        print(text.getvalue(), end="")
        return False
    with contextlib.redirect_stdout(io.StringIO()) as second:
        ok = engine.matches(_unknown_outcome(fn), _unknown_outcome(_mask_as), _unknown_cases(), name="mask_as",
                            mistakes=MASK_AS_UNKNOWN, notes=["an unknown convention"] * 4)
    if ok:
        print(say("{verdict}, and an unknown convention raises", verdict=text.getvalue().rstrip("\n")))
    else:
        print(second.getvalue(), end="")
    return ok


# ---------------------------------------------------------------------------------------
# causal self-attention, with the leak probe
# ---------------------------------------------------------------------------------------

def _attend_with(keep_of):
    """x (..., T, d) -> out: self-attention (Q = K = V = x) under the mask keep_of(T)."""
    def attend(x):
        """x (..., T, d) -> out (..., T, d): self-attention under the mask keep_of(T)."""
        return _sdpa(x, x, x, keep_of(x.shape[-2]))[0]
    return attend


def _attend_with_step(step):
    """x (..., T, d) -> out (..., T, d): causal self-attention with ``step`` as its attention (Q = K = V = x)."""
    def attend(x):
        return step(x, x, x, _causal_mask(x.shape[-2]))[0]
    return attend


def _self_attention(scale=None, fill=None, axis=-1, transpose_weights=False, after_softmax=False):
    """A configurable causal self-attention: the reference and its typical wrong twins.

    ``scale(d)`` divides the scores (default sqrt(d)); ``fill(scores, keep)`` masks them
    (default -inf where blocked); ``axis`` is the softmax's axis; ``transpose_weights`` uses
    the weights transposed; ``after_softmax`` multiplies the weights by the mask after it.
    """
    def attend(x):
        T, d = x.shape[-2], x.shape[-1]
        keep = _causal_mask(T)
        scores = x @ np.swapaxes(x, -1, -2) / (np.sqrt(d) if scale is None else scale(d))  # (..., T, T)
        if after_softmax:
            return (_softmax(scores) * keep) @ x
        scores = np.where(keep, scores, -np.inf) if fill is None else fill(scores, keep)
        weights = _softmax(scores, axis=axis)
        return (np.swapaxes(weights, -1, -2) if transpose_weights else weights) @ x
    return attend


def _self_attention_cases():
    rng = np.random.default_rng(20240808)
    return [Case((rng.normal(size=(5, 4)),), "x (T=5, d=4)"), Case((rng.normal(size=(2, 7, 3)),), "x (B=2, T=7, d=3)"),
            Case((rng.normal(size=(1, 6)),), "x (T=1, d=6)"), Case((rng.normal(size=(3, 4, 9)),), "x (B=3, T=4, d=9)"),
            Case((30 * rng.normal(size=(2, 6, 2)),), "x (B=2, T=6, d=2), large entries: scores above 700, "
                 "where exp overflows unless the row's max is subtracted first")]


_FIX_CAUSAL = "keep = np.tril(np.ones((T, T), bool)): key s is allowed for query t when s <= t"


def _batch_as_tokens(x):
    """x (B, T, d) read as (T, B, d): the causal attention runs over the batch axis (2-D x is right)."""
    attend = _attend_with(_causal_mask)
    return attend(x) if x.ndim < 3 else np.swapaxes(attend(np.swapaxes(x, 0, -2)), 0, -2)
_FIX_SCALE = "divide the scores x xᵀ by np.sqrt(d), d = x.shape[-1]"
_FIX_FILL = "scores = np.where(keep, scores, -np.inf) before the softmax"
_SELF_ATTENTION_MISTAKES = (
    Mistake("no mask: every token reads the future", "pass mask=causal_mask(T) (True on and below the diagonal)",
            _attend_with(lambda T: None)),
    Mistake("the causal mask built from x.shape[0] (the batch size B for a batch) instead of T = x.shape[-2]",
            "T = x.shape[-2]: x is (..., T, d)", lambda x: _sdpa(x, x, x, _causal_mask(x.shape[0]))[0]),
    Mistake("the batch and token axes swapped on a batch (x.shape[0] taken as T): the causal attention runs "
            "over the sequences, not over the tokens of each", "x is (..., T, d): T = x.shape[-2], and the "
            "scores x @ np.swapaxes(x, -1, -2) are (..., T, T)", _batch_as_tokens),
    Mistake("the mask's polarity is flipped (a True-means-blocked triu(k=1) used as a keep-mask): "
            "each token reads only the future", _FIX_CAUSAL,
            _attend_with(lambda T: np.triu(np.ones((T, T), bool), 1))),
    Mistake("np.triu instead of np.tril: each token reads itself and the future, not the past", _FIX_CAUSAL,
            _attend_with(lambda T: np.triu(np.ones((T, T), bool)))),
    Mistake("off by one: np.tril(..., k=1) lets each token read the next one",
            "np.tril(np.ones((T, T), bool)) with k=0: key j is allowed for query t when j <= t",
            _attend_with(lambda T: np.tril(np.ones((T, T), bool), 1))),
    Mistake("the diagonal is masked too (k=-1): a token may not read itself, and row 0 sees nothing",
            "np.tril(np.ones((T, T), bool)) with k=0", _attend_with(lambda T: np.tril(np.ones((T, T), bool), -1))),
    Mistake("the mask is applied after the softmax: the weights no longer sum to 1, and the future "
            "still leaks in through the softmax's row sums",
            "set the forbidden scores to -inf before the softmax", _self_attention(after_softmax=True)),
    Mistake("the future's scores set to 0 instead of -inf (scores * mask, or np.tril(scores)): "
            "a score of 0 still gets weight e^0 / sum", _FIX_FILL,
            _self_attention(fill=lambda s, keep: s * keep)),
    Mistake("an additive mask built as mask - 1: the future's scores are lowered by only 1",
            _FIX_FILL + " (or add np.where(keep, 0.0, -np.inf))",
            _self_attention(fill=lambda s, keep: s + (keep - 1.0))),
    Mistake("an additive mask built as (1 - mask) * -inf: 0 * -inf is nan, so every output is nan",
            _FIX_FILL + " (never multiply -inf by 0)",
            _self_attention(fill=lambda s, keep: s + (1.0 - keep) * -np.inf)),
    Mistake("the scores are not divided by sqrt(d): the softmax is too sharp", _FIX_SCALE,
            _self_attention(scale=lambda d: 1.0)),
    Mistake("the scores are divided by d instead of sqrt(d)", _FIX_SCALE, _self_attention(scale=lambda d: d),
            also=TWICE_D),
    Mistake("the scores are multiplied by sqrt(d) instead of divided", _FIX_SCALE,
            _self_attention(scale=lambda d: 1 / np.sqrt(d))),
    Mistake("the softmax runs over the queries (axis=-2), not over the keys: columns sum to 1, rows do not",
            "mc.softmax(scores, axis=-1): each query's weights over the keys sum to 1",
            _self_attention(axis=-2)),
    Mistake("the weights are transposed before multiplying V (weightsᵀ @ x): key s collects from query t",
            "out = weights @ x, weights (..., T_query, T_key)", _self_attention(transpose_weights=True)),
)
CAUSAL_SELF_ATTENTION = Exercise("causal_self_attention", _attend_with(_causal_mask), _self_attention_cases,
                                 _SELF_ATTENTION_MISTAKES, axes={"result": ("query", "feature")},
                                 sizes=lambda x: {"T": x.shape[-2], "d_k": x.shape[-1]}, edges=("T",),
                                 parts=(Part("scaled_dot_product_attention", _attend_with_step,
                                             say("in the attention (exercise 2.4's step)")),))


def _leak_closer_look(fn) -> list:
    report = _leak_probe(fn, 6, rng=np.random.default_rng(0), d=4, call=call_timed)
    lines = [f"leak probe (T=6): {ln}" if i == 0 else ln for i, ln in enumerate(report.describe(most=3).splitlines())]
    if report.ok:
        lines.append("no leak: no output reads a later token. So the mask lets nothing through from the future, but "
                     "it may still block earlier keys it must allow (a mask built for another length than "
                     "T = x.shape[-2]?); else the difference is in the scores (the scale 1/sqrt(d)), the softmax "
                     "(its axis) or what the weights multiply (x itself)")
    return lines


def causal_self_attention(fn) -> bool:
    """Check a learner's ``causal_self_attention(x)``: x (..., T, d) -> out (..., T, d), Q = K = V = x.

    When the result is wrong, the leak probe also reports which outputs see the future.

    >>> import mha_course as mc
    >>> causal_self_attention(lambda x: mc.scaled_dot_product_attention(x, x, x, mc.causal_mask(x.shape[-2]))[0])
    ✔ causal_self_attention: all 5 cases match
    True
    """
    return check_with_closer_look(CAUSAL_SELF_ATTENTION, fn, _leak_closer_look, always=True)


# ---------------------------------------------------------------------------------------
# document mask (packed sequences)
# ---------------------------------------------------------------------------------------

def _document_with(same_of=None, causal_of=None, combine=np.logical_and, causal_always=None):
    """A document_mask(doc_ids, causal=False) with its parts replaced: the 'same document' test
    same_of(ids), the causal part causal_of(T), how they combine, or causal forced on/off."""
    def mask(doc_ids, causal=False):
        ids = np.asarray(doc_ids)
        T = len(ids)
        same = ids[:, None] == ids[None, :] if same_of is None else same_of(ids)  # (T, T)
        on = causal if causal_always is None else causal_always
        if not on:
            return same
        return combine(same, np.tril(np.ones((T, T), bool)) if causal_of is None else causal_of(T))
    return mask


def _document_cases():
    rng = np.random.default_rng(20240909)
    cases = []
    for n_docs, causal, first in ((3, False, 0), (2, True, 0), (4, True, 5), (1, False, 0), (5, False, 2),
                                  (3, True, 1), (2, True, 7)):
        lengths = rng.integers(1, 4, size=n_docs)
        ids = np.repeat(first + np.arange(n_docs), lengths)  # (T,): 0 0 1 1 1 2 ... or 5 5 6 ...
        if n_docs == 2 and first == 7:
            ids = np.repeat([7, 3], [3, 2])  # ids are labels: they need not grow
        cases.append(Case((ids, causal), f"doc_ids {ids.tolist()}, causal={causal}"))
    for ids, causal in (([2, 2, 6, 6, 6, 2], False), ([1, 0, 0, 1, 1], True)):  # an id that comes back: equal ids, one document
        cases.append(Case((np.array(ids), causal), f"doc_ids {ids}, causal={causal} (id {ids[0]} comes back)"))
    return cases


def _same_run(ids):
    """(T,) -> (T, T): True where two tokens lie in one run of equal ids (a new document wherever the id changes)."""
    runs = np.concatenate([[0], np.cumsum(ids[1:] != ids[:-1])])  # (T,): 0, 0, 1, 1, 2 ...
    return runs[:, None] == runs[None, :]


_FIX_DOC = "allow query t and key s only when doc_ids[t] == doc_ids[s]"
_FIX_DOC_CAUSAL = "when causal, also require key <= query: same & np.tril(np.ones((T, T), bool))"
_DOCUMENT_MISTAKES = (
    Mistake("causal=True is ignored: tokens read the future inside their document", _FIX_DOC_CAUSAL,
            _document_with(causal_always=False)),
    Mistake("always causal, even when causal=False", "apply the causal part only when causal=True",
            _document_with(causal_always=True)),
    Mistake("the documents are not separated: the mask ignores doc_ids", _FIX_DOC,
            _document_with(same_of=lambda ids: np.ones((len(ids), len(ids)), bool))),
    Mistake("doc_ids compared with >=: later documents read the earlier ones",
            "use ==: a document never reads another, earlier or later",
            _document_with(same_of=lambda ids: ids[:, None] >= ids[None, :])),
    Mistake("doc_ids compared with <=: earlier documents read the later ones",
            "use ==: a document never reads another, earlier or later",
            _document_with(same_of=lambda ids: ids[:, None] <= ids[None, :])),
    Mistake("the causal part is transposed (np.triu): inside a document each token reads the future, not the past",
            _FIX_DOC_CAUSAL, _document_with(causal_of=lambda T: np.triu(np.ones((T, T), bool)))),
    Mistake("the causal part has no diagonal (k=-1): a token may not read itself", _FIX_DOC_CAUSAL + " (k=0)",
            _document_with(causal_of=lambda T: np.tril(np.ones((T, T), bool), -1))),
    Mistake("the causal part is off by one (k=1): each token also reads the next one", _FIX_DOC_CAUSAL + " (k=0)",
            _document_with(causal_of=lambda T: np.tril(np.ones((T, T), bool), 1))),
    Mistake("with causal=True only the causal part: the documents are no longer separated",
            "both must hold: same & np.tril(np.ones((T, T), bool))", _document_with(combine=lambda same, c: c)),
    Mistake("the two parts combined with | (or): with causal=True a token reads every earlier token of "
            "every document", "both must hold: same & causal", _document_with(combine=np.logical_or)),
    Mistake("documents found where the id changes (runs of equal ids): a document whose id comes back later "
            "is split in two, but the mask must follow the ids", _FIX_DOC + ": ids[:, None] == ids[None, :], "
            "wherever the two tokens are", _document_with(same_of=_same_run)),
    Mistake("the polarity is flipped (True = blocked, as nn.MultiheadAttention wants it)",
            "the course's masks say True = may attend; convert with mask_as(mask, 'block') at the PyTorch call",
            lambda doc_ids, causal=False: ~_document_mask(doc_ids, causal)),
)
DOCUMENT_MASK = Exercise("document_mask", lambda doc_ids, causal=False: _document_mask(doc_ids, causal),
                         _document_cases, _DOCUMENT_MISTAKES, axes={"result": ("query", "key")})


def _document_closer_look(fn) -> list:
    ids = np.array([4, 4, 4, 9, 9])
    lines = []
    for causal in (False, True):
        want, got = _document_mask(ids, causal), np.asarray(call_timed(fn, ids.copy(), causal)).astype(bool)
        if got.shape != want.shape:
            lines.append(f"causal={causal}: shape {got.shape}, expected {want.shape} (one row per query, "
                         "one column per key)" + (
                             ": a 1-D comparison such as ids == ids.T (on a 1-D array .T does nothing, so each id "
                             "meets only itself); compare every pair: ids[:, None] == ids[None, :]"
                             if got.shape == ids.shape else ""))
            continue
        extra, missing = [(int(t), int(s)) for t, s in zip(*np.nonzero(got & ~want))], \
                         [(int(t), int(s)) for t, s in zip(*np.nonzero(want & ~got))]
        if extra or missing:
            lines.append(f"doc_ids [4, 4, 4, 9, 9], causal={causal}: " + "; ".join(
                p for p in (f"(query, key) pairs wrongly allowed {extra[:4]}" if extra else "",
                            f"wrongly blocked {missing[:4]}" if missing else "") if p))
        else:
            lines.append(f"doc_ids [4, 4, 4, 9, 9], causal={causal}: right")
    return lines


def document_mask(fn) -> bool:
    """Check a learner's ``document_mask(doc_ids, causal=False)``: doc_ids (T,) -> (T, T) bool.

    >>> import mha_course as mc
    >>> document_mask(mc.document_mask)
    ✔ document_mask: all 9 cases match
    True
    """
    return check_with_closer_look(DOCUMENT_MASK, fn, _document_closer_look)


# ---------------------------------------------------------------------------------------
# cross-attention: queries from the target, keys and values from the source
# ---------------------------------------------------------------------------------------

def _cross(x, context, W_q, W_k, W_v, keep, *, kv_from=None, q_from=None, mask_of=None, scale=None,
           axis=-1, swap_outputs=False, transpose_weights=False, d_model=False):
    """The reference cross-attention and its configurable twins (see the catalogue)."""
    Q = (x if q_from is None else q_from(x, context)) @ W_q                  # (B, T, d)
    K = (context if kv_from is None else kv_from(x, context)[0]) @ W_k     # (B, S, d)
    V = (context if kv_from is None else kv_from(x, context)[1]) @ W_v     # (B, S, d_v)
    d = x.shape[-1] if d_model else Q.shape[-1]  # d_model: the slip of scaling by the inputs' width
    scores = Q @ np.swapaxes(K, -1, -2) / (np.sqrt(d) if scale is None else scale(d))  # (B, T, S)
    allowed = keep[:, None, :] if mask_of is None else mask_of(keep, scores.shape)      # (B, 1, S)
    weights = _softmax(np.where(allowed, scores, -np.inf), axis=axis)
    out = weights @ V                                                           # (B, T, d_v)
    weights = np.swapaxes(weights, -1, -2) if transpose_weights else weights
    return (weights, out) if swap_outputs else (out, weights)


def _cross_values_zeroed(x, context, W_q, W_k, W_v, keep):
    """The padded source tokens' values zeroed (V * keep) and the scores left unmasked."""
    Q, K, V = x @ W_q, context @ W_k, (context @ W_v) * np.asarray(keep, bool)[:, :, None]
    weights = _softmax(Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]), axis=-1)
    return weights @ V, weights


def _cross_reference(x, context, W_q, W_k, W_v, keep):
    """x (B, T, d_model), context (B, S, d_model), W_q (d_model, d_k), W_v (d_model, d_v), keep (B, S) -> out (B, T, d_v), weights (B, T, S)."""  # noqa: E501 -- the shape line is one line
    out, weights = _sdpa(x @ W_q, context @ W_k, context @ W_v, np.asarray(keep, bool)[:, None, :])
    return out, weights


def _cross_cases():
    rng = np.random.default_rng(20240610)
    cases = []
    for B, T, S, D, d, d_v, lengths in ((1, 3, 6, 8, 4, 5, [4]), (2, 4, 4, 6, 3, 3, [2, 4]),
                                        (3, 2, 5, 4, 6, 2, [5, 0, 3]), (2, 5, 3, 3, 2, 4, [3, 2])):  # 0: all padding
        keep = np.arange(S)[None, :] < np.array(lengths)[:, None]  # (B, S): True = a real source token
        cases.append(Case((rng.normal(size=(B, T, D)), rng.normal(size=(B, S, D)), rng.normal(size=(D, d)),
                           rng.normal(size=(D, d)), rng.normal(size=(D, d_v)), keep),
                          f"B={B}, T={T} target, S={S} source tokens ({lengths} real), D={D}, d={d}, d_v={d_v}"))
    return cases


def _cross_with(**how):
    return lambda x, context, W_q, W_k, W_v, keep: _cross(x, context, W_q, W_k, W_v, np.asarray(keep, bool), **how)


_FIX_ROLES = "Q = x @ W_q (the target asks), K = context @ W_k and V = context @ W_v (the source answers)"
_FIX_PAD = "mask the scores with keep[:, None, :] (B, 1, S): True = a real source token, broadcast over the queries"
_CROSS_MISTAKES = (
    Mistake("the roles swapped: the queries come from the context and the keys and values from x", _FIX_ROLES,
            _cross_with(q_from=lambda x, c: c, kv_from=lambda x, c: (x, x),
                        mask_of=lambda keep, shape: np.ones(shape, bool))),
    Mistake("the queries come from the context and the keys from x (the roles of x and context swapped, V from "
            "the context)", _FIX_ROLES, _cross_with(q_from=lambda x, c: c, kv_from=lambda x, c: (x, c),
                                                    mask_of=lambda keep, shape: np.ones(shape, bool))),
    Mistake("the padding zeroed in V (V * keep) instead of masked in the scores: the padded tokens still take "
            "their share of the softmax, so the real ones get too little weight", _FIX_PAD, _cross_values_zeroed),
    Mistake("the queries come from the context (Q = context @ W_q): queries come from x, the tokens being updated",
            _FIX_ROLES, _cross_with(q_from=lambda x, c: c)),
    Mistake("the keys come from x (the target) instead of the context", _FIX_ROLES,
            _cross_with(kv_from=lambda x, c: (x, c))),
    Mistake("the values come from x (the target) instead of the context", _FIX_ROLES,
            _cross_with(kv_from=lambda x, c: (c, x))),
    Mistake("the source padding mask is ignored: the target reads the padded source tokens", _FIX_PAD,
            _cross_with(mask_of=lambda keep, shape: np.ones(shape, bool))),
    Mistake("the padding mask's polarity is flipped: only the pads are read", _FIX_PAD,
            _cross_with(mask_of=lambda keep, shape: ~keep[:, None, :])),
    Mistake("a causal mask added: cross-attention has none, the whole source is known before decoding starts",
            _FIX_PAD + "; no tril", _cross_with(mask_of=lambda keep, shape: keep[:, None, :] &
                                                np.tril(np.ones(shape[-2:], bool)))),
    Mistake("the scores are not divided by sqrt(d)", "divide Q Kᵀ by np.sqrt(d), d = W_q.shape[1]",
            _cross_with(scale=lambda d: 1.0)),
    Mistake("the scores are divided by d instead of sqrt(d)", "divide Q Kᵀ by np.sqrt(d)",
            _cross_with(scale=lambda d: d),
            also=TWICE_D),
    Mistake("the scores divided by sqrt(D), the width of the inputs, instead of sqrt(d), the width of Q and K",
            "scale by the size the dot product runs over: np.sqrt(W_q.shape[1])", _cross_with(scale=None, d_model=True)),
    Mistake("the padding mask put along the queries (keep[:, :, None]) instead of along the source keys",
            _FIX_PAD, _cross_with(mask_of=lambda keep, shape: keep[:, :, None])),
    Mistake("the softmax runs over the target queries (axis=-2), not over the source keys",
            "mc.softmax(scores, axis=-1): each query's weights over the S source tokens sum to 1",
            _cross_with(axis=-2)),
    Mistake("the weights returned transposed, (B, S, T): one row per query, one column per source key",
            "return weights of shape (B, T, S)", _cross_with(transpose_weights=True)),
    Mistake("the outputs in the wrong order (weights, out)", "return out, weights", _cross_with(swap_outputs=True)),
)


def _cross_attending(attend):
    """Cross-attention whose attention step is ``attend(Q, K, V, mask)`` (a mistake of exercise 2.4)."""
    return lambda x, context, W_q, W_k, W_v, keep: attend(x @ W_q, context @ W_k, context @ W_v,
                                                          np.asarray(keep, bool)[:, None, :])


CROSS_ATTENTION = Exercise("cross_attention", _cross_reference, _cross_cases, _CROSS_MISTAKES,
                           outputs=("out", "weights"), axes={"weights": ("query", "source key")},
                           parts=(Part("scaled_dot_product_attention", _cross_attending,
                                       "in the attention step (exercise 2.4's)"),), edges=('B', 'T'))


def _cross_closer_look(fn) -> list:
    case = _cross_cases()[0]
    want_out, want_w = _cross_reference(*case.args)
    got = call_timed(fn, *[np.copy(a) for a in case.args])
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return []
    out, w = (np.asarray(g, dtype=float) for g in got)
    lines = []
    if w.shape == want_w.shape:
        keep = case.args[-1][:, None, :]
        lines.append(f"weights on padded source tokens: largest {np.abs(np.where(keep, 0, w)).max():.3g} "
                     "(expected 0)")
        lines.append(f"weights of each query sum to {w.sum(-1).min():.4g}..{w.sum(-1).max():.4g} (expected 1)")
        if np.allclose(w, want_w):
            lines.append("the weights are right: the difference is in what they multiply (V = context @ W_v)")
    return lines


def cross_attention(fn) -> bool:
    """Check ``fn(x, context, W_q, W_k, W_v, keep)`` -> (out (B, T, d_v), weights (B, T, S)).

    x (B, T, D) the target, context (B, S, D) the source, W_q and W_k (D, d), W_v (D, d_v),
    keep (B, S) bool: True = a real source token (False = padding).

    >>> import mha_course as mc
    >>> cross_attention(lambda x, c, W_q, W_k, W_v, keep: mc.scaled_dot_product_attention(
    ...     x @ W_q, c @ W_k, c @ W_v, keep[:, None, :]))
    ✔ cross_attention: all 5 cases match
    True
    """
    return check_with_closer_look(CROSS_ATTENTION, fn, _cross_closer_look)
