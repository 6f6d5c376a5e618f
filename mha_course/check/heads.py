"""Checkers for notebooks 03 and 04: ``split_heads``, ``combine_heads``, ``head_queries``, ``bug_source_position``.

Every case has another B, T, d_model and h (so another d_k): a hard-coded size cannot fit.
"""
from __future__ import annotations

from functools import partial
from itertools import permutations

import numpy as np

from ..heads import combine_heads as _combine_heads
from ..heads import split_heads as _split_heads
from . import engine
from .engine import Case, Exercise, Forbid, Mistake

__all__ = ["split_heads", "combine_heads", "head_queries", "bug_source_position", "SPLIT_HEADS",
           "COMBINE_HEADS", "HEAD_QUERIES", "BUG_SOURCE_POSITION", "split_no_transpose",
           "combine_no_transpose", "FIX_SPLIT", "FIX_COMBINE"]


def split_no_transpose(x, h):
    """The classic bug: x (B, T, D) reshaped straight to (B, h, T, d_k)."""
    B, T, D = x.shape
    return x.reshape(B, h, T, D // h)  # mixes positions into heads


def _split_true_division(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, h, D / h).transpose(0, 2, 1, 3)  # raises: a float size


def _split_dk_first(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, D // h, h).transpose(0, 3, 1, 2)  # (B, h, T, d_k), features strided


def _split_perm(perm, x, h):
    B, T, D = x.shape
    return x.reshape(B, T, h, D // h).transpose(perm)  # (B, T, h, d_k) -> wrong order


def _split_tokens(x, h):
    """The positions split into h groups: (B, h, T/h, D); a ValueError when h does not divide T."""
    return np.stack(np.split(x, h, axis=1), axis=1)  # (B, T, D) -> h x (B, T/h, D) -> (B, h, T/h, D)


FIX_SPLIT = "x.reshape(B, T, h, d_k).transpose(0, 2, 1, 3) gives (B, h, T, d_k)"
_SPLIT_MISTAKES = (
    Mistake("reshape straight to (B, h, T, d_k) without a transpose (positions get mixed into heads)",
            FIX_SPLIT, split_no_transpose),
    Mistake("d_model / h is a float (true division): a shape needs whole numbers",
            "d_k = d_model // h (floor division)", _split_true_division),
    Mistake("reshape to (B, T, d_k, h): head i gets every h-th feature, not a contiguous slice",
            FIX_SPLIT, _split_dk_first, also="a reshape in column-major order (order='F'): numpy's reshape reads the "
                                             "last axis fastest (order='C')"),
    *(Mistake(f"a wrong transpose order {p} after reshape(B, T, h, d_k)", FIX_SPLIT, partial(_split_perm, p))
      for p in permutations(range(4)) if p != (0, 2, 1, 3)),
    Mistake("the token axis split into h groups (np.split(x, h, axis=1)) instead of the features: a head "
            "holds T/h whole tokens, not d_k features of every token", FIX_SPLIT, _split_tokens),
)


def _random_sizes(rng, n):
    """n seeded (B, T, h, d_k): every size varies from case to case, none is readable from a docstring."""
    sizes = [(2, 5, 3, 4), (3, 4, 2, 5)]  # two with every size > 1 first, then random ones (1 included)
    while len(sizes) < n:
        sizes.append(tuple(int(v) for v in (rng.integers(1, 5), rng.integers(1, 8), rng.integers(1, 7),
                                            rng.integers(1, 6))))
    return sizes


def _split_cases():
    rng = np.random.default_rng(20240503)
    return [Case((rng.normal(size=(B, T, h * d_k)), h)) for B, T, h, d_k in _random_sizes(rng, 10)]


SPLIT_HEADS = Exercise("split_heads", _split_heads, _split_cases, _SPLIT_MISTAKES,
                       axes={"result": ("batch", "head", "position", "feature")}, edges=('B', 'T', 'h'))


def split_heads(fn) -> bool:
    """Check ``fn(x, h)``: x (B, T, d_model) -> (B, h, T, d_k) with d_k = d_model // h.

    >>> import mha_course as mc
    >>> split_heads(mc.split_heads)
    ✔ split_heads: all 11 cases match
    True

    Cases: ten seeded sizes; B, T, h and d_k all vary.
    """
    return SPLIT_HEADS.check(fn)


def combine_no_transpose(x):
    """The classic bug: x (B, h, T, d_k) reshaped straight to (B, T, h * d_k)."""
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)  # mixes heads into positions


def _combine_perm(perm, x):
    B, h, T, d_k = x.shape
    return x.transpose(perm).reshape(B, T, h * d_k)


def _concat_heads(axis, x):
    return np.concatenate([x[:, i] for i in range(x.shape[1])], axis=axis)  # h arrays (B, T, d_k)


FIX_COMBINE = "x.transpose(0, 2, 1, 3).reshape(B, T, h * d_k): (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, D)"
_F_ORDER = ("the right transpose, then a reshape in column-major order (order='F'): numpy's reshape reads the last "
            "axis fastest (order='C')")
_COMBINE_MISTAKES = (
    Mistake("combine_heads without the transpose back (heads get mixed into positions)",
            FIX_COMBINE, combine_no_transpose),
    Mistake("heads averaged instead of concatenated", FIX_COMBINE, lambda x: x.mean(axis=1)),
    Mistake("heads summed instead of concatenated", FIX_COMBINE, lambda x: x.sum(axis=1)),
    Mistake("heads averaged, and the mean repeated h times to width h·d_k (np.tile): every head's slot holds "
            "the same mean, not its own head", FIX_COMBINE, lambda x: np.tile(x.mean(axis=1), (1, 1, x.shape[1]))),
    Mistake("heads summed, and the sum repeated h times to width h·d_k (np.tile): every head's slot holds the "
            "same sum, not its own head", FIX_COMBINE, lambda x: np.tile(x.sum(axis=1), (1, 1, x.shape[1]))),
    Mistake("one head (head 0) repeated h times instead of every head in its own slot", FIX_COMBINE,
            lambda x: np.tile(x[:, 0], (1, 1, x.shape[1]))),
    Mistake("the heads concatenated over the batch axis (axis 0) instead of the features",
            "np.concatenate([x[:, i] for i in range(h)], axis=-1), or " + FIX_COMBINE, partial(_concat_heads, 0)),
    Mistake("np.concatenate(x, axis=-1) joins the items of x's first axis, the batch, not the heads: it gives "
            "(h, T, B·d_k)", "np.concatenate([x[:, i] for i in range(h)], axis=-1), or " + FIX_COMBINE,
            lambda x: np.concatenate(list(x), axis=-1)),
    Mistake("np.concatenate(x, axis=...) joins the items of x's first axis, the batch, not the heads",
            "np.concatenate([x[:, i] for i in range(h)], axis=-1), or " + FIX_COMBINE,
            lambda x: np.concatenate(list(x), axis=1)),
    Mistake("the heads concatenated over the positions (axis 1) instead of the features",
            "np.concatenate([x[:, i] for i in range(h)], axis=-1), or " + FIX_COMBINE, partial(_concat_heads, 1)),
    Mistake("a reshape in column-major order (order='F') and no transpose: numpy's reshape reads the last axis "
            "fastest (order='C')", FIX_COMBINE, lambda x: x.reshape(x.shape[0], x.shape[2], -1, order="F")),
    *(Mistake(f"a wrong transpose order {p} before the reshape", FIX_COMBINE, partial(_combine_perm, p),
              also=_F_ORDER if p == (0, 2, 3, 1) else "")
      for p in permutations(range(4)) if p not in ((0, 2, 1, 3), (0, 1, 2, 3))),
)


def _combine_cases():
    rng = np.random.default_rng(20240504)
    return [Case((rng.normal(size=(B, h, T, d_k)),)) for B, T, h, d_k in _random_sizes(rng, 10)]


COMBINE_HEADS = Exercise("combine_heads", _combine_heads, _combine_cases, _COMBINE_MISTAKES,
                         axes={"result": ("batch", "position", "feature")}, edges=('B', 'h', 'T'))


def combine_heads(fn) -> bool:
    """Check ``fn(x)``: x (B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads.

    >>> import mha_course as mc
    >>> combine_heads(mc.combine_heads)
    ✔ combine_heads: all 10 cases match
    True

    Cases: ten seeded sizes; B, h, T and d_k all vary.
    """
    return COMBINE_HEADS.check(fn)


def _head_queries_ref(X, W_q, h, i):
    """X (B, T, d_model), W_q (d_model, d_model) -> Q_i (B, T, d_k): head i's queries from its column block."""
    d_k = W_q.shape[1] // h
    return X @ W_q[:, i * d_k:(i + 1) * d_k]  # (B, T, D) x (D, d_k) -> (B, T, d_k): head i's own block


def _head_queries_cols(cols):
    """head_queries with the columns cols(d_k, h, i) of W_q (a wrong slice)."""
    return lambda X, W_q, h, i: np.matmul(X, W_q[:, cols(W_q.shape[1] // h, h, i)])  # -> (B, T, d_k)


def _own_block(X, W_q, h, i):
    """X's block of features times W_q's diagonal block: (B, T, d_k) x (d_k, d_k) -> (B, T, d_k)."""
    block = slice(i * (W_q.shape[1] // h), (i + 1) * (W_q.shape[1] // h))
    return X[..., block] @ W_q[block, block]


def _head_queries_cases():
    rng = np.random.default_rng(20240508)
    X, W = rng.normal(size=(2, 5, 12)), rng.normal(size=(12, 12))
    return [Case((X, W, 3, 2)), Case((X, W, 4, 1)),
            Case((rng.normal(size=(3, 4, 8)), rng.normal(size=(8, 8)), 2, 1)),
            Case((rng.normal(size=(4, 3, 10)), rng.normal(size=(10, 10)), 5, 3))]


_FIX_HEAD = "head i owns the columns i*d_k:(i+1)*d_k of W_q: X @ W_q[:, i*d_k:(i+1)*d_k]"
_NO_SPLIT = Forbid("split_heads", "mha_course.heads", "split_heads",
                   "project with head i's own block of columns, X @ W_q[:, i*d_k:(i+1)*d_k] (no split)")
HEAD_QUERIES = Exercise("head_queries", _head_queries_ref, _head_queries_cases, (
    Mistake("rows of W_q instead of columns", _FIX_HEAD,
            lambda X, W_q, h, i: np.matmul(X, W_q[i * (len(W_q) // h):(i + 1) * (len(W_q) // h)].T)),
    Mistake("every h-th column (W_q[:, i::h]) instead of a block of d_k columns", _FIX_HEAD,
            _head_queries_cols(lambda d_k, h, i: slice(i, None, h))),
    Mistake("the first block of columns for every head (the offset i*d_k is missing)", _FIX_HEAD,
            _head_queries_cols(lambda d_k, h, i: slice(0, d_k))),
    Mistake("a block of h columns (W_q[:, i*h:(i+1)*h]): h where d_k belongs", _FIX_HEAD,
            _head_queries_cols(lambda d_k, h, i: slice(i * h, (i + 1) * h))),
    Mistake("the block of head i+1 (a 1-based head index: the last head wraps to block 0)", _FIX_HEAD,
            _head_queries_cols(lambda d_k, h, i: slice((i + 1) % h * d_k, ((i + 1) % h + 1) * d_k))),
    Mistake("the block of head i+1 (a 1-based head index)", _FIX_HEAD,
            _head_queries_cols(lambda d_k, h, i: slice((i + 1) * d_k, (i + 2) * d_k))),
    Mistake("the block of head i-1 (the head index off by one)", _FIX_HEAD,
            _head_queries_cols(lambda d_k, h, i: slice((i - 1) * d_k, i * d_k))),
    Mistake("only head i's own input features used (X[..., block] @ W_q[block, block], as if W_q were "
            "block-diagonal): each head reads all d_model features of x", _FIX_HEAD,
            lambda X, W_q, h, i: _own_block(X, W_q, h, i)),
    Mistake("d_k = d_model / h is a float (true division): slice bounds need whole numbers",
            "d_k = W_q.shape[1] // h (floor division)",
            lambda X, W_q, h, i: X @ W_q[:, i * (W_q.shape[1] / h):(i + 1) * (W_q.shape[1] / h)]),
    Mistake("X @ W_q reshaped straight to (B, h, T, d_k) with no transpose: head i's rows then mix positions "
            "and heads (notebook 03's bug)", _FIX_HEAD,
            lambda X, W_q, h, i: (X @ W_q).reshape(X.shape[0], h, X.shape[1], -1)[:, i])),
    axes={"result": ("batch", "position", "feature")}, rules=(_NO_SPLIT,), edges=('B', 'T'))


class _Watched(np.ndarray):
    """W_q that notes every product taken with all of its d_model columns (a full projection).

    A view of it (a block of columns, a transpose) is watched too; ``full`` is shared by the views.
    """

    def __array_finalize__(self, obj):
        self.full = getattr(obj, "full", None)
        self.width = getattr(obj, "width", None)

    def _note(self, operands):
        for a in operands:
            if isinstance(a, _Watched) and a.ndim == 2 and a.width in a.shape and a.shape[0] == a.shape[1]:
                a.full.append(True)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc is np.matmul:
            self._note(inputs)
        plain = [np.asarray(a) if isinstance(a, _Watched) else a for a in inputs]
        return getattr(ufunc, method)(*plain, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if func in (np.dot, np.matmul, np.einsum, np.tensordot, np.inner, np.vdot):
            self._note(args)
        unwrap = (lambda a: np.asarray(a) if isinstance(a, _Watched) else
                  type(a)(unwrap(x) for x in a) if isinstance(a, (tuple, list)) else a)
        return func(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()})


def _full_projection(fn) -> tuple:
    """(fn projects X with all of W_q, then slices; its output is the reference's) on the probe
    B, T, D, h, i = 2, 3, 8, 4, 2."""
    rng = np.random.default_rng(0)
    X, W = rng.normal(size=(2, 3, 8)), rng.normal(size=(8, 8))
    watched = W.copy().view(_Watched)
    watched.full, watched.width = [], 8
    try:
        got = engine.call_learner(fn, X, watched, 4, 2)
    except engine.LearnerFailed:
        return False, False
    try:
        right = np.allclose(np.asarray(got, dtype=float), _head_queries_ref(X, W, 4, 2))
    except (TypeError, ValueError):  # a result of another shape or kind: not right
        right = False
    return bool(watched.full), bool(right)


def head_queries(fn) -> bool:
    """Check ``fn(X, W_q, h, i)``: X (B, T, d_model), W_q (d_model, d_model) -> (B, T, d_k),
    head i's queries from its own block of columns of W_q: no full projection ``X @ W_q``, no
    ``split_heads`` (the result equals ``split_heads(X @ W_q, h)[:, i]``).

    >>> head_queries(lambda X, W_q, h, i: X @ W_q[:, i * (len(W_q) // h):(i + 1) * (len(W_q) // h)])
    ✔ head_queries: all 6 cases match
    True
    """
    full, right = _full_projection(fn) if callable(fn) else (False, False)
    if full and right:
        return engine.report("head_queries", "wrong", [
            "✘ head_queries: the values are right, but your function multiplies X by all of W_q (a full "
            "projection, X @ W_q) and then takes head i's columns, which this exercise asks you not to do.",
            f"  Fix: {_FIX_HEAD} (d_model x d_k numbers per head, not d_model x d_model)"])
    if full:  # a full projection AND wrong values: say both, the values' diagnosis from the cases
        print("✘ head_queries: your function multiplies X by all of W_q (a full projection, X @ W_q), which this "
              "exercise asks you not to do, and its values are wrong too:")
        HEAD_QUERIES.check(fn)
        return False
    return HEAD_QUERIES.check(fn)


def _bug_position_ref(i, t, T, h) -> int:
    """i, t, T, h -> the position whose features fill row t of head i after the buggy reshape.

    Written as the formula a learner writes, so that its mutants are a learner's slips: row t of head
    i is flat row i·T + t of the (T·h, d_k) memory, and one position holds h such rows. That this is
    what ``split_no_transpose`` does is a test's (tests/check/test_heads.py)."""
    return (i * T + t) // h


def _bug_cases():
    sizes = [(6, 4), (5, 3), (4, 6), (7, 2), (9, 5)]
    return [Case((i, t, T, h)) for T, h in sizes for i in reversed(range(h)) for t in range(T)]  # i > 0 first


_FIX_BUG = "row t of head i starts at flat entry (i*T + t)*d_k; a position holds d_model = h*d_k entries"
BUG_SOURCE_POSITION = Exercise("bug_source_position", _bug_position_ref, _bug_cases, (
    Mistake("the position of the correct split (t): the bug mixes positions", _FIX_BUG, lambda i, t, T, h: t),
    Mistake("the flat row index i*T + t, not divided by h", _FIX_BUG, lambda i, t, T, h: i * T + t),
    Mistake("divided by T instead of h", _FIX_BUG, lambda i, t, T, h: (i * T + t) // T),
    Mistake("true division (i*T + t) / h gives a float, and a fraction between two positions",
            "floor division: (i*T + t) // h", lambda i, t, T, h: (i * T + t) / h),
    Mistake("i*T // h + t: only the head's offset is divided by h", _FIX_BUG, lambda i, t, T, h: i * T // h + t),
    Mistake("i*T + t // h: only t is divided by h (// binds tighter than +)", "brackets: (i*T + t) // h",
            lambda i, t, T, h: i * T + t // h),
    Mistake("the remainder (i*T + t) % h instead of the quotient: % gives the feature block within a position, "
            "// the position", "(i*T + t) // h", lambda i, t, T, h: (i * T + t) % h),
    Mistake("rounded up (ceil) instead of down: the flat row's position is its floor", "(i*T + t) // h",
            lambda i, t, T, h: -(-(i * T + t) // h)),
    Mistake("rounded to the nearest instead of down: the flat row's position is its floor", "(i*T + t) // h",
            lambda i, t, T, h: int(round((i * T + t) / h))),
    Mistake("t // h: the rows of the heads before head i (i*T of them) are forgotten", _FIX_BUG,
            lambda i, t, T, h: t // h),
    Mistake("T and h swapped: (i*h + t) // T", _FIX_BUG, lambda i, t, T, h: (i * h + t) // T),
    Mistake("off by one: (i*T + t + 1) // h (the flat row index counts from 0)", _FIX_BUG,
            lambda i, t, T, h: (i * T + t + 1) // h),
    Mistake("off by one: (i*T + t - 1) // h (the flat row index counts from 0)", _FIX_BUG,
            lambda i, t, T, h: (i * T + t - 1) // h),
), edges=('T',))


def bug_source_position(fn) -> bool:
    """Check ``fn(i, t, T, h) -> int``: the position whose features fill row t of head i
    after the buggy ``x.reshape(B, h, T, d_k)``; every head and row for 5 sizes.

    >>> bug_source_position(lambda i, t, T, h: (i * T + t) // h)
    ✔ bug_source_position: all 123 cases match
    True
    """
    return BUG_SOURCE_POSITION.check(fn)
