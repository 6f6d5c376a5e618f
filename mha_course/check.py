"""Checkers for the learner's own implementations (floor 2, numpy only).

One checker per core function, named after it: ``check.softmax(my_softmax)``,
``check.scaled_dot_product_attention(my_sdpa)``, ``check.split_heads``,
``check.combine_heads``, ``check.causal_mask``, ``check.padding_mask`` and
``check.multi_head_attention``. Each takes the learner's function (same signature as the
package's), runs it on a few seeded inputs chosen so that mistakes cannot hide
(T != S, B > 1, h > 1, d_k != T, large logits, fully masked rows), prints short feedback
and returns True or False.

When the result is wrong, the checker runs known *wrong variants* (small private
functions below, built from the package) on the same input; if the learner's result
equals one of them, the message names that mistake and its fix. The learner's source code
is never read. An exception inside the learner's function is reported, never raised.

    >>> from mha_course import check
    >>> import mha_course as mc
    >>> check.causal_mask(mc.causal_mask)
    ✔ causal_mask: all 3 cases match
    True

``check.matches(fn, reference, cases)`` does the same for any other function.
"""
from __future__ import annotations

import copy
import inspect
import math
import os
import re
import sysconfig
import traceback
import warnings
from functools import partial
from itertools import permutations
from typing import Callable, NamedTuple

import numpy as np

from .attention import causal_mask as _causal_mask
from .attention import padding_mask as _padding_mask
from .attention import scaled_dot_product_attention as _sdpa
from .attention import softmax as _softmax
from .heads import combine_heads as _combine_heads
from .heads import split_heads as _split_heads
from .mha import MHAParams, init_params
from .mha import multi_head_attention as _mha
from .mha import trace as _trace

__all__ = ["Mistake", "matches", "softmax", "scaled_dot_product_attention", "split_heads",
           "combine_heads", "causal_mask", "padding_mask", "multi_head_attention"]

RTOL, ATOL = 1e-5, 1e-6
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_LIBRARY_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) for k in ("stdlib", "purelib", "platlib")})


class Mistake(NamedTuple):
    """A known wrong variant: its name, how to fix it, and a function computing its result.

    ``fn`` takes the same arguments as the reference; if it raises on a case, or gives the
    same result as the reference there, it is not used to diagnose that case.
    """
    name: str
    fix: str
    fn: Callable


# ---------------------------------------------------------------------------------------
# The generic machinery
# ---------------------------------------------------------------------------------------

def matches(fn, reference, cases, name=None, mistakes=(), outputs=None, notes=None) -> bool:
    """Run ``fn`` and ``reference`` on every case; print feedback; True if all agree.

    Parameters
    ----------
    fn : callable
        The learner's function.
    reference : callable
        The correct function (usually the package's).
    cases : sequence of tuple
        Positional arguments of each call, e.g. ``[(x1,), (x2, 0)]``; arrays of any shape.
    name : str, optional
        Name shown in the feedback (default: ``reference.__name__``).
    mistakes : sequence of Mistake
        Known wrong variants used to name the mistake.
    outputs : sequence of str, optional
        Names of the reference's outputs when it returns a tuple, e.g. ``("out", "weights")``.
    notes : sequence of str, optional
        One short note per case, shown when that case fails (e.g. ``"logits near 1000"``).

    Returns
    -------
    bool
        True when every output has the reference's shape and values (rtol=1e-5, atol=1e-6);
        a boolean reference (a mask) needs a boolean result.

    Examples
    --------
    >>> matches(lambda n: n * n, lambda n: n ** 2, [(2,), (3,)], name="square")
    ✔ square: all 2 cases match
    True
    """
    name = name or getattr(reference, "__name__", "function")
    if not callable(fn):
        print(f"✘ {name}: expected a function, got a value of type {type(fn).__name__}. "
              f"Pass the function itself (my_fn), not its result (my_fn(x)).")
        return False
    notes = list(notes or []) + [""] * len(cases)
    for i, args in enumerate(cases, 1):
        problem = _check_case(fn, reference, tuple(args), mistakes, outputs, notes[i - 1])
        if problem:
            print(f"✘ {name}: case {i} of {len(cases)} failed")
            print("\n".join("  " + line for line in problem))
            return False
    print(f"✔ {name}: all {len(cases)} cases match" if len(cases) > 1 else f"✔ {name}: the case matches")
    return True


_NOT_DIAGNOSED = "\x00"  # prefix of a problem that needs no mistake diagnosis (its message says it all)


def _check_case(fn, reference, args, mistakes, outputs, note="") -> list:
    """The feedback lines for one case ([] when the learner's result is right)."""
    want = _quiet(reference, args)
    call = [f"called {_describe_call(fn, reference, args)}" + (f"  # {note}" if note else "")]
    got, error = _call_learner(fn, reference, args)
    if error:
        return call + error
    problem = _compare(got, want, outputs)
    if not problem:
        return []
    if problem[0].startswith(_NOT_DIAGNOSED):
        return call + [problem[0][len(_NOT_DIAGNOSED):]]
    return call + problem + [_diagnose(got, want, args, mistakes)]


def _quiet(f, args):
    """f(*copies of args) with numpy's overflow/invalid warnings silenced."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*copy.deepcopy(args))


def _call_learner(fn, reference, args):
    """(result, None), or (None, feedback lines) if fn raised or changed its arguments."""
    mine = copy.deepcopy(args)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*mine)
    except Exception as exc:  # the learner's code may raise anything: report it, never raise
        return None, _describe_error(exc, reference)
    for arg_name, before, after in zip(_arg_names(reference, args), args, mine):
        if not _identical(before, after):
            return None, [f"{_fn_name(fn)} changed its argument {arg_name} in place; "
                          "the course's functions are pure.",
                          f"Fix: compute into a new array (z = {arg_name} - m) "
                          f"instead of modifying {arg_name} ({arg_name} -= m)."]
    return result, None


def _describe_error(exc, reference) -> list:
    """Type, message and the learner's line of an exception raised inside their function."""
    msg = re.sub(r"0x[0-9a-fA-F]+", "0x...", str(exc)).strip()
    msg = msg if len(msg) <= 200 else msg[:197] + "..."
    if isinstance(exc, NotImplementedError):
        return [f"not written yet: it raised NotImplementedError: {msg}",
                "Replace the `raise NotImplementedError(...)` line with your code, "
                "then run both cells again."]
    lines = [f"it raised {type(exc).__name__}: {msg}"]
    frame = _learner_frame(exc.__traceback__)
    if frame is not None:
        code = (frame.line or "").strip()
        lines.append(f"at line {frame.lineno} of {frame.name}" + (f": {code}" if code else ""))
    hint = _error_hint(exc, reference)
    return lines + ([hint] if hint else [])


def _learner_frame(tb):
    """The last traceback frame that is neither in mha_course nor in an installed library."""
    def is_learner(frame):
        path = os.path.abspath(frame.filename)
        inside = path.startswith(_PACKAGE_DIR + os.sep) or path.startswith(_LIBRARY_DIRS)
        return not inside and not frame.filename.startswith(("<frozen", "<__array_function__"))
    frames = [f for f in traceback.extract_tb(tb) if is_learner(f)]
    return frames[-1] if frames else None


def _error_hint(exc, reference) -> str:
    """A short hint for the errors learners meet most often ('' if none applies)."""
    text = str(exc)
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return f"Hint: your function should take the same arguments as mc.{reference.__name__}" \
               f"({_signature(reference)})."
    if "could not be broadcast" in text:
        return ("Hint: print the shapes of both operands; a reduction such as x.max(axis=...) "
                "may need keepdims=True.")
    if ("matmul" in text and "mismatch" in text) or "axes don't match" in text:
        return ("Hint: print the shapes of both operands of @; on a batched array K.T reverses "
                "every axis: use np.swapaxes(K, -1, -2) to transpose the last two.")
    return ""


def _compare(got, want, outputs) -> list:
    """Feedback lines on how ``got`` differs from ``want`` ([] if it matches)."""
    if isinstance(want, tuple):
        names = outputs or [f"output {i}" for i in range(len(want))]
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return [_NOT_DIAGNOSED + _wrong_return(got, names)]
        for nm, g, w in zip(names, got, want):
            problem = _compare_array(g, w, nm)
            if problem:
                return problem
        return []
    return _compare_array(got, want, "result")


def _wrong_return(got, names) -> str:
    expected = f"a tuple ({', '.join(names)})"
    if got is None:
        return f"it returned None, expected {expected}: is a `return` missing?"
    if isinstance(got, np.ndarray):
        return (f"it returned one array of shape {got.shape}, expected {expected}. "
                f"Fix: return {', '.join(names)}")
    size = f" of {len(got)} values" if isinstance(got, (tuple, list)) else ""
    return f"it returned a {type(got).__name__}{size}, expected {expected}."


def _compare_array(got, want, nm) -> list:
    """Shape, value and dtype-kind comparison of one output, as feedback lines."""
    if got is None:
        return [f"{_NOT_DIAGNOSED}{nm}: it returned None: is a `return` missing?"]
    try:
        g = np.asarray(got)
    except Exception:
        return [f"{_NOT_DIAGNOSED}{nm}: expected an array, got a value of type {type(got).__name__}."]
    w = np.asarray(want)
    if g.dtype == object and w.dtype != object:
        return [f"{_NOT_DIAGNOSED}{nm}: expected an array of numbers, got a value of type {type(got).__name__}."]
    if g.shape != w.shape:
        return [f"{nm}: expected shape {w.shape}, got {g.shape}"]
    if not _close(g, w):
        return _show_difference(g, w, nm)
    if w.dtype == np.bool_ and g.dtype != np.bool_:
        return [f"{_NOT_DIAGNOSED}{nm}: the values are right but the dtype is {g.dtype}; masks are boolean. "
                "Fix: build it with dtype=bool or add .astype(bool)"]
    return []


def _show_difference(g, w, nm) -> list:
    """Expected and received values of the first row (last axis) where they differ."""
    if g.dtype.kind not in "biuf" or w.ndim == 0:
        return [f"{nm}: expected {_fmt(w)}, got {_fmt(g)}"]
    bad = np.argwhere(~np.isclose(_num(g), _num(w), rtol=RTOL, atol=ATOL, equal_nan=True))
    idx = tuple(int(i) for i in bad[0])
    start = max(0, min(idx[-1] - 2, w.shape[-1] - 6))
    sl = (*idx[:-1], slice(start, start + 6))
    where = ", ".join([str(i) for i in idx[:-1]] + [f"{start}:{start + 6}" if w.shape[-1] > 6 else ":"])
    label = f"{nm}[{where}]"
    return [f"{label} expected {_fmt(w[sl])}", f"{' ' * len(label)} got      {_fmt(g[sl])}"]


def _fmt(a) -> str:
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return np.array2string(a.astype(int), separator=" ")
    if a.dtype.kind in "iu":
        return np.array2string(a, separator=" ")
    if a.dtype.kind == "f":
        return np.array2string(a, precision=4, floatmode="fixed", suppress_small=True,
                               max_line_width=200, separator=" ")
    return repr(a.tolist()) if a.ndim else repr(a.item())


def _diagnose(got, want, args, mistakes) -> str:
    """Name the first known mistake whose result equals the learner's on this case."""
    for m in mistakes:
        try:
            wrong = _quiet(m.fn, args)
        except Exception:
            continue
        if not _same(wrong, want) and _same(got, wrong):
            return f"Looks like: {m.name}. Fix: {m.fix}"
    if not isinstance(want, tuple) and _same_values_other_shape(got, want):
        return (f"Looks like: the right values in the wrong shape. "
                f"Fix: return shape {np.shape(want)}, e.g. with .reshape or [:, None] axes.")
    return ("This is not one of the mistakes I know; print the shape of each step "
            "and compare it with the formula in the notebook.")


def _same_values_other_shape(got, want) -> bool:
    try:
        g, w = np.asarray(got), np.asarray(want)
        return g.size == w.size and g.shape != w.shape and _close(g.reshape(w.shape), w)
    except Exception:
        return False


def _num(a):
    return np.asarray(a).astype(float) if np.asarray(a).dtype == np.bool_ else np.asarray(a)


def _close(a, b) -> bool:
    """Same shape and values (rtol=1e-5, atol=1e-6, nan equal to nan)."""
    try:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
            return bool(np.allclose(_num(a), _num(b), rtol=RTOL, atol=ATOL, equal_nan=True))
        return bool(np.all(a == b))
    except Exception:
        return False


def _same(a, b) -> bool:
    """Like _close, element by element for tuples and lists of outputs."""
    if isinstance(b, tuple):
        return isinstance(a, (tuple, list)) and len(a) == len(b) and all(map(_same, a, b))
    return not isinstance(a, tuple) and _close(a, b)


def _identical(a, b) -> bool:
    """Exact equality of two (nested) arguments: arrays, tuples such as MHAParams, scalars."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(map(_identical, a, b))
    return a is b or a == b


def _arg_names(reference, args) -> list:
    try:
        return list(inspect.signature(reference).bind_partial(*args).arguments)
    except (TypeError, ValueError):
        return [f"argument {i}" for i in range(1, len(args) + 1)]


def _signature(reference) -> str:
    params = inspect.signature(reference).parameters.values()
    return ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)


def _describe_call(fn, reference, args) -> str:
    parts = [f"{n}{' ' if isinstance(v, (np.ndarray, MHAParams)) else '='}{_describe_value(v)}"
             for n, v in zip(_arg_names(reference, args), args)]
    return f"{_fn_name(fn)}({', '.join(parts)})"


def _describe_value(v) -> str:
    if isinstance(v, MHAParams):
        return f"(d_model={v.d_model}, {'with' if v.b_q is not None else 'no'} biases)"
    if isinstance(v, np.ndarray):
        return str(v.shape) if v.ndim > 1 or v.size > 8 else repr(v.tolist())
    return repr(v)


def _fn_name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


# ---------------------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------------------

def _softmax_naive(x, axis=-1):
    e = np.exp(x)  # overflows to inf for logits above ~710
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_global_max(x, axis=-1):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=axis, keepdims=True)


def _softmax_global_sum(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum()


def _softmax_on(k, x, axis=-1):
    if k >= x.ndim or k == axis % x.ndim:
        raise ValueError("not a wrong axis for this input")
    return _softmax(x, axis=k)


_FIX_AXIS = "use the given axis in both x.max(axis=axis, keepdims=True) and e.sum(axis=axis, keepdims=True)"
_SOFTMAX_MISTAKES = (
    Mistake("softmax without subtracting the maximum (exp overflows to inf, giving nan)",
            "subtract each row's maximum first: z = x - x.max(axis=axis, keepdims=True)", _softmax_naive),
    Mistake("subtracting the maximum of the whole array instead of each row's maximum",
            "z = x - x.max(axis=axis, keepdims=True)", _softmax_global_max),
    Mistake("dividing by the sum of the whole array instead of each row's sum",
            "e / e.sum(axis=axis, keepdims=True)", _softmax_global_sum),
    Mistake("the axis argument is ignored (softmax always over the last axis)", _FIX_AXIS,
            lambda x, axis=-1: _softmax(x, axis=-1)),
    *(Mistake("softmax over the wrong axis", _FIX_AXIS, partial(_softmax_on, k)) for k in range(3)),
)


def _softmax_cases():
    rng = np.random.default_rng(20240501)
    x2 = rng.normal(size=(3, 5))
    x3 = rng.normal(size=(2, 3, 4)) * 3
    x3[0, 1, 2] = x3[1, 2, 0] = -np.inf  # masked entries (never a whole row)
    big = rng.normal(size=(3, 6)) + np.array([[1000.0], [0.0], [-1000.0]])  # large logits
    return [(x2,), (x3,), (big,), (rng.normal(size=(4, 3)), 0)]


def softmax(fn) -> bool:
    """Check a learner's ``softmax(x, axis=-1)``: x (...) -> same shape, sums to 1 along axis.

    Cases: (3, 5); (2, 3, 4) with some -inf entries; logits near +1000 and -1000; axis=0.

    ``fn`` has the signature of ``mc.softmax``; returns True when every case matches it
    and prints the feedback.

    >>> import mha_course as mc
    >>> softmax(mc.softmax)
    ✔ softmax: all 4 cases match
    True
    """
    notes = ["", "some entries are -inf (masked keys)", "rows of logits near +1000, 0 and -1000",
             "softmax over axis 0"]
    return matches(fn, _softmax, _softmax_cases(), "softmax", _SOFTMAX_MISTAKES, notes=notes)


# ---------------------------------------------------------------------------------------
# scaled dot-product attention
# ---------------------------------------------------------------------------------------

def _scores(Q, K, scale):
    return np.matmul(Q, np.swapaxes(K, -1, -2)) * scale  # (..., T, d_k) x (..., d_k, S) -> (..., T, S)


def _sdpa_scaled(scale_of, Q, K, V, mask=None):
    """Attention with scores * scale_of(d_k) instead of / sqrt(d_k)."""
    s = _scores(Q, K, scale_of(Q.shape[-1]))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = _softmax(s)
    return np.matmul(w, V), w


def _sdpa_scale_axis(k, Q, K, V, mask=None):
    """Attention scaled by 1 / sqrt(Q.shape[k]) for a wrong axis k."""
    if Q.shape[k] == Q.shape[-1]:
        raise ValueError("this axis has the size of d_k here")
    return _sdpa_scaled(lambda d: 1 / math.sqrt(Q.shape[k]), Q, K, V, mask)


def _sdpa_inverted(Q, K, V, mask=None):
    return _sdpa(Q, K, V, None if mask is None else ~np.asarray(mask))


def _sdpa_mask_after(Q, K, V, mask=None):
    w = _softmax(_scores(Q, K, 1 / math.sqrt(Q.shape[-1])))
    w = w if mask is None else np.where(mask, w, 0.0)  # rows no longer sum to 1
    return np.matmul(w, V), w


def _sdpa_mask_multiplied(Q, K, V, mask=None):
    s = _scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    w = _softmax(s if mask is None else s * mask)  # masked scores become 0, not -inf
    return np.matmul(w, V), w


def _sdpa_finite_fill(Q, K, V, mask=None):
    s = _scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    w = _softmax(s if mask is None else np.where(mask, s, -1e9))
    return np.matmul(w, V), w


def _sdpa_nan_rows(Q, K, V, mask=None):
    out, w = _sdpa(Q, K, V, mask)
    if mask is not None:
        empty = ~np.broadcast_to(mask, w.shape).any(axis=-1)  # queries with every key masked
        out, w = out.copy(), w.copy()
        out[empty], w[empty] = np.nan, np.nan
    return out, w


def _sdpa_query_axis(Q, K, V, mask=None):
    s = _scores(Q, K, 1 / math.sqrt(Q.shape[-1]))
    w = _softmax(s if mask is None else np.where(mask, s, -np.inf), axis=-2)
    return np.matmul(w, V), w


_FIX_SCALE = "divide the scores by np.sqrt(d_k), where d_k = Q.shape[-1]"
_SDPA_MISTAKES = (
    Mistake("no scaling of the scores", _FIX_SCALE, partial(_sdpa_scaled, lambda d: 1.0)),
    Mistake("scaling by d_k instead of √d_k", _FIX_SCALE, partial(_sdpa_scaled, lambda d: 1.0 / d)),
    Mistake("multiplying by √d_k instead of dividing", _FIX_SCALE, partial(_sdpa_scaled, math.sqrt)),
    *(Mistake(f"d_k read from the wrong axis (Q.shape[{k}])", "d_k = Q.shape[-1], the size of the last axis",
              partial(_sdpa_scale_axis, k)) for k in (0, 1, -2)),
    Mistake("mask polarity inverted (the course's masks are True = may attend)",
            "keep the scores where mask is True: np.where(mask, scores, -np.inf)", _sdpa_inverted),
    Mistake("masking after the softmax without renormalising (rows no longer sum to 1)",
            "mask the scores before the softmax: np.where(mask, scores, -np.inf)", _sdpa_mask_after),
    Mistake("multiplying the scores by the mask (masked scores become 0, not -inf, and still get weight)",
            "np.where(mask, scores, -np.inf) before the softmax", _sdpa_mask_multiplied),
    Mistake("masking with a large negative number such as -1e9: a query whose keys are all masked "
            "gets uniform weights instead of zeros",
            "fill with -np.inf and use mc.softmax, which turns an all -inf row into zeros",
            _sdpa_finite_fill),
    Mistake("a query whose keys are all masked gets nan (exp(-inf - (-inf)) = nan)",
            "use mc.softmax, which returns zeros for an all -inf row", _sdpa_nan_rows),
    Mistake("the outputs in the wrong order", "return out, weights (in this order)",
            lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask)[::-1]),
    Mistake("softmax over the queries (axis -2) instead of the keys",
            "normalise each query's scores over the keys: softmax(scores, axis=-1)", _sdpa_query_axis),
)


def _sdpa_cases():
    rng = np.random.default_rng(20240502)
    def n(*shape):
        return rng.normal(size=shape) * 1.5
    T, S, d_k, d_v = 3, 5, 4, 6
    shifted = np.arange(S)[None, :] <= np.arange(T)[:, None] + 1  # (T, S), no row empty
    empty_row = np.ones((2, T, S), dtype=bool)
    empty_row[0, 0, 3:] = empty_row[1, 1, :2] = False
    empty_row[1, 2, :] = False  # query 2 of sequence 1 may attend nothing
    return [(n(T, d_k), n(S, d_k), n(S, d_v)),
            (n(2, T, d_k), n(2, S, d_k), n(2, S, d_v)),
            (n(2, 2, T, d_k), n(2, 2, S, d_k), n(2, 2, S, d_v), shifted),
            (n(2, T, d_k), n(2, S, d_k), n(2, S, d_v), empty_row)]


def scaled_dot_product_attention(fn) -> bool:
    """Check ``fn(Q, K, V, mask=None) -> (out, weights)`` against the package's.

    Shapes: Q (..., T, d_k), K (..., S, d_k), V (..., S, d_v) -> out (..., T, d_v),
    weights (..., T, S). Cases use T=3, S=5, d_k=4, d_v=6, batch axes (2,) and (2, 2),
    a (T, S) mask and a (B, T, S) mask with one query whose keys are all masked.

    ``fn`` has the package function's signature; returns True when every case matches,
    and prints the feedback.

    >>> import mha_course as mc
    >>> scaled_dot_product_attention(mc.scaled_dot_product_attention)
    ✔ scaled_dot_product_attention: all 4 cases match
    True
    """
    notes = ["", "a batch of 2", "a (T, S) mask, True = may attend",
             "query 2 of sequence 1 may attend no key"]
    return matches(fn, _sdpa, _sdpa_cases(), "scaled_dot_product_attention", _SDPA_MISTAKES,
                   outputs=("out", "weights"), notes=notes)


# ---------------------------------------------------------------------------------------
# split_heads and combine_heads
# ---------------------------------------------------------------------------------------

def _split_no_transpose(x, h):
    B, T, D = x.shape
    return x.reshape(B, h, T, D // h)  # mixes positions into heads


def _split_dk_first(x, h):
    B, T, D = x.shape
    return x.reshape(B, T, D // h, h).transpose(0, 3, 1, 2)  # (B, h, T, d_k), features strided


def _split_perm(perm, x, h):
    B, T, D = x.shape
    return x.reshape(B, T, h, D // h).transpose(perm)  # (B, T, h, d_k) -> wrong order


_FIX_SPLIT = "x.reshape(B, T, h, d_k).transpose(0, 2, 1, 3) gives (B, h, T, d_k)"
_SPLIT_MISTAKES = (
    Mistake("reshape straight to (B, h, T, d_k) without a transpose (positions get mixed into heads)",
            _FIX_SPLIT, _split_no_transpose),
    Mistake("reshape to (B, T, d_k, h): head i gets every h-th feature, not a contiguous slice",
            _FIX_SPLIT, _split_dk_first),
    *(Mistake(f"a wrong transpose order {p} after reshape(B, T, h, d_k)", _FIX_SPLIT,
              partial(_split_perm, p)) for p in permutations(range(4)) if p != (0, 2, 1, 3)),
)


def _split_cases():
    rng = np.random.default_rng(20240503)
    return [(rng.normal(size=(2, 5, 12)), 3), (rng.normal(size=(3, 4, 10)), 2),
            (rng.normal(size=(2, 5, 12)), 4)]


def split_heads(fn) -> bool:
    """Check ``fn(x, h)``: x (B, T, d_model) -> (B, h, T, d_k) with d_k = d_model // h.

    Cases: (2, 5, 12) with h=3 and h=4, (3, 4, 10) with h=2.

    ``fn`` has the signature of ``mc.split_heads``; returns True when every case matches it
    and prints the feedback.

    >>> import mha_course as mc
    >>> split_heads(mc.split_heads)
    ✔ split_heads: all 3 cases match
    True
    """
    return matches(fn, _split_heads, _split_cases(), "split_heads", _SPLIT_MISTAKES)


def _combine_no_transpose(x):
    B, h, T, d_k = x.shape
    return x.reshape(B, T, h * d_k)  # mixes heads into positions


def _combine_perm(perm, x):
    B, h, T, d_k = x.shape
    return x.transpose(perm).reshape(B, T, h * d_k)


_FIX_COMBINE = "x.transpose(0, 2, 1, 3).reshape(B, T, h * d_k): (B, h, T, d_k) -> (B, T, h, d_k) -> (B, T, D)"
_COMBINE_MISTAKES = (
    Mistake("combine_heads without the transpose back (heads get mixed into positions)",
            _FIX_COMBINE, _combine_no_transpose),
    Mistake("heads averaged instead of concatenated", _FIX_COMBINE, lambda x: x.mean(axis=1)),
    Mistake("heads summed instead of concatenated", _FIX_COMBINE, lambda x: x.sum(axis=1)),
    *(Mistake(f"a wrong transpose order {p} before the reshape", _FIX_COMBINE, partial(_combine_perm, p))
      for p in permutations(range(4)) if p not in ((0, 2, 1, 3), (0, 1, 2, 3))),
)


def _combine_cases():
    rng = np.random.default_rng(20240504)
    return [(rng.normal(size=(2, 3, 5, 4)),), (rng.normal(size=(3, 2, 4, 5)),),
            (rng.normal(size=(2, 4, 3, 5)),)]


def combine_heads(fn) -> bool:
    """Check ``fn(x)``: x (B, h, T, d_k) -> (B, T, h * d_k), the inverse of split_heads.

    Cases: (2, 3, 5, 4), (3, 2, 4, 5), (2, 4, 3, 5).

    ``fn`` has the signature of ``mc.combine_heads``; returns True when every case matches it
    and prints the feedback.

    >>> import mha_course as mc
    >>> combine_heads(mc.combine_heads)
    ✔ combine_heads: all 3 cases match
    True
    """
    return matches(fn, _combine_heads, _combine_cases(), "combine_heads", _COMBINE_MISTAKES)


# ---------------------------------------------------------------------------------------
# masks
# ---------------------------------------------------------------------------------------

_FIX_CAUSAL = "np.tril(np.ones((T, T), dtype=bool)): True on and below the diagonal"
_CAUSAL_MISTAKES = (
    Mistake("the upper triangle: each query looks at the future, not the past", _FIX_CAUSAL,
            lambda T: np.triu(np.ones((T, T), dtype=bool))),
    Mistake("the diagonal is missing: a token may not attend to itself (the first row is empty)",
            _FIX_CAUSAL, lambda T: np.tril(np.ones((T, T), dtype=bool), k=-1)),
    Mistake("mask polarity inverted (True must mean 'may attend')", _FIX_CAUSAL,
            lambda T: ~np.tril(np.ones((T, T), dtype=bool))),
    Mistake("nothing is masked", _FIX_CAUSAL, lambda T: np.ones((T, T), dtype=bool)),
)


def causal_mask(fn) -> bool:
    """Check ``fn(T)``: T -> (T, T) bool, True on and below the diagonal.

    Cases: T = 4, 7, 1.

    ``fn`` has the package function's signature; returns True when every case matches,
    and prints the feedback.

    >>> import mha_course as mc
    >>> causal_mask(mc.causal_mask)
    ✔ causal_mask: all 3 cases match
    True
    """
    return matches(fn, _causal_mask, [(4,), (7,), (1,)], "causal_mask", _CAUSAL_MISTAKES)


def _padding_shape(shape, lengths, S):
    return (np.arange(S) < np.asarray(lengths)[:, None]).reshape(shape(len(lengths), S))


_FIX_PADDING = "(np.arange(S) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, S)"
_PADDING_MISTAKES = (
    Mistake("mask polarity inverted: True marks the padding, but True must mean 'may attend'",
            _FIX_PADDING, lambda lengths, S: ~_padding_mask(lengths, S)),
    Mistake("off by one: position == length is padding, so compare with < not <=", _FIX_PADDING,
            lambda lengths, S: (np.arange(S) <= np.asarray(lengths)[:, None])[:, None, None, :]),
    Mistake("shape (B, S) without the two broadcast axes for heads and queries", _FIX_PADDING,
            partial(_padding_shape, lambda B, S: (B, S))),
    Mistake("shape (B, 1, S): one broadcast axis is missing (scores are (B, h, T, S))", _FIX_PADDING,
            partial(_padding_shape, lambda B, S: (B, 1, S))),
)


def padding_mask(fn) -> bool:
    """Check ``fn(lengths, S)``: lengths (B,) ints in 0..S -> (B, 1, 1, S) bool, True = real key.

    Cases: lengths [3, 5, 1] with S=5 and [2, 0] with S=4 (a sequence with no real token).

    ``fn`` has the package function's signature; returns True when every case matches,
    and prints the feedback.

    >>> import mha_course as mc
    >>> padding_mask(mc.padding_mask)
    ✔ padding_mask: all 2 cases match
    True
    """
    cases = [(np.array([3, 5, 1]), 5), (np.array([2, 0]), 4)]
    notes = ["", "the second sequence has no real token"]
    return matches(fn, _padding_mask, cases, "padding_mask", _PADDING_MISTAKES, notes=notes)


# ---------------------------------------------------------------------------------------
# multi-head attention
# ---------------------------------------------------------------------------------------

def _out_proj(concat, p):
    out = np.matmul(concat, p.W_o)  # (B, T, D) x (D, D) -> (B, T, D)
    return out if p.b_o is None else out + p.b_o


def _mha_attend(attend, x, params, h, mask=None, context=None):
    """MHA whose per-head attention is ``attend(Qh, Kh, Vh, mask)`` (e.g. a wrong sdpa)."""
    t = _trace(x, params, h, mask, context)
    o, w = attend(t["Q_heads"], t["K_heads"], t["V_heads"], mask)  # (B, h, T, d_k), (B, h, T, S)
    return _out_proj(_combine_heads(o), params), w


def _mha_scale_dmodel(x, params, h, mask=None, context=None):
    D = x.shape[-1]
    return _mha_attend(partial(_sdpa_scaled, lambda d_k: 1 / math.sqrt(D)), x, params, h, mask, context)


def _mha_split_no_transpose(x, params, h, mask=None, context=None):
    t = _trace(x, params, h, mask, context)
    Qh, Kh, Vh = (_split_no_transpose(t[n], h) for n in ("Q", "K", "V"))  # wrong (B, h, T, d_k)
    o, w = _sdpa(Qh, Kh, Vh, mask)
    return _out_proj(_combine_heads(o), params), w


def _mha_from_trace(make_out, x, params, h, mask=None, context=None):
    """(make_out(trace, params), weights): variants that differ after the attention."""
    t = _trace(x, params, h, mask, context)
    return make_out(t, params), np.array(t["weights"])


def _mha_params(change, x, params, h, mask=None, context=None):
    return _mha(x, change(params), h, mask, context)


def _mha_weights_averaged(x, params, h, mask=None, context=None):
    out, w = _mha(x, params, h, mask, context)
    return out, w.mean(axis=1)  # (B, T, S)


def _no_bias(p):
    return p._replace(b_q=None, b_k=None, b_v=None, b_o=None)


_FIX_MHA_SCALE = "divide the scores by np.sqrt(d_k) with d_k = d_model // h, the size of one head"
_MHA_MISTAKES = (
    Mistake("the output projection is forgotten", "multiply the concatenated heads by W_o (and add b_o)",
            partial(_mha_from_trace, lambda t, p: np.array(t["concat"]))),
    Mistake("heads averaged instead of concatenated",
            "concatenate the heads with combine_heads, then project with W_o",
            partial(_mha_from_trace, lambda t, p: _out_proj(np.array(t["concat"]) / t.h, _no_bias(p))
                    + (0 if p.b_o is None else p.b_o))),
    Mistake("heads averaged instead of concatenated (and no output projection)",
            "concatenate the heads with combine_heads, then project with W_o",
            partial(_mha_from_trace, lambda t, p: np.array(t["head_outputs"]).mean(axis=1))),
    Mistake("scaling by √d_model instead of √d_k", _FIX_MHA_SCALE, _mha_scale_dmodel),
    Mistake("no scaling of the scores", _FIX_MHA_SCALE, partial(_mha_attend, _SDPA_MISTAKES[0].fn)),
    Mistake("scaling by d_k instead of √d_k", _FIX_MHA_SCALE, partial(_mha_attend, _SDPA_MISTAKES[1].fn)),
    Mistake("split_heads as a reshape without the transpose", _FIX_SPLIT, _mha_split_no_transpose),
    Mistake("combine_heads without the transpose back", _FIX_COMBINE,
            partial(_mha_from_trace,
                    lambda t, p: _out_proj(_combine_no_transpose(np.array(t["head_outputs"])), p))),
    Mistake("mask polarity inverted (True = may attend)", "keep the scores where mask is True",
            partial(_mha_attend, _sdpa_inverted)),
    Mistake("masking after the softmax without renormalising",
            "mask the scores before the softmax: np.where(mask, scores, -np.inf)",
            partial(_mha_attend, _sdpa_mask_after)),
    Mistake("the biases are ignored", "add b_q, b_k, b_v after the projections and b_o at the end "
            "(when they are not None)", partial(_mha_params, _no_bias)),
    Mistake("the weight matrices are transposed (x @ W.T, PyTorch's nn.Linear convention)",
            "this course uses x @ W: Q = x @ params.W_q",
            partial(_mha_params, lambda p: p._replace(**{f: p[i].T for i, f in enumerate(p._fields[:4])}))),
    Mistake("the context is ignored: keys and values must come from context when it is given",
            "K = context @ W_k, V = context @ W_v (use x only when context is None)",
            lambda x, params, h, mask=None, context=None: _mha(x, params, h, mask)),
    Mistake("the outputs in the wrong order", "return out, weights (in this order)",
            lambda x, params, h, mask=None, context=None: _mha(x, params, h, mask, context)[::-1]),
    Mistake("per-head weights averaged over the heads (PyTorch's average_attn_weights=True)",
            "return the per-head weights, shape (B, h, T, S)", _mha_weights_averaged),
)


def _mha_cases():
    rng = np.random.default_rng(20240505)
    B, T, S, D = 2, 5, 7, 12
    x, ctx = rng.normal(size=(B, T, D)), rng.normal(size=(B, S, D))
    plain = init_params(D, rng=rng)
    biased = init_params(D, rng=rng, bias=True)
    pad = _padding_mask(np.array([S, 3]), S)  # (B, 1, 1, S)
    return [(x, plain, 3), (x, biased, 4, _causal_mask(T)), (x, plain, 2, None, ctx),
            (x, biased, 6, pad, ctx)]


def multi_head_attention(fn) -> bool:
    """Check ``fn(x, params, h, mask=None, context=None) -> (out, weights)``.

    Shapes: x (B, T, d_model), context (B, S, d_model) -> out (B, T, d_model),
    weights (B, h, T, S). Cases: B=2, T=5, S=7, d_model=12 with h = 3, 4, 2, 6; with and
    without biases; a causal mask; cross-attention with and without a padding mask.
    Trailing None arguments are not passed, so ``fn(x, params, h)`` works for the first case.

    ``fn`` has the package function's signature; returns True when every case matches,
    and prints the feedback.

    >>> import mha_course as mc
    >>> multi_head_attention(mc.multi_head_attention)
    ✔ multi_head_attention: all 4 cases match
    True
    """
    notes = ["self-attention", "biases and a causal mask", "cross-attention: K, V from context",
             "cross-attention with a padding mask"]
    return matches(fn, _mha, _mha_cases(), "multi_head_attention", _MHA_MISTAKES,
                   outputs=("out", "weights"), notes=notes)
