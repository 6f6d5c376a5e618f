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

The other exercises have small checkers of the same kind, named after the exercise's function:
``stage_shapes`` (a dict of predicted shapes), ``param_count``, ``qkv_param_count``,
``project_qkv``, ``layer_norm``, ``flops``, ``crossover_seq_len``, ``score_bytes``,
``max_seq_len``, ``head_queries``, ``bug_source_position``, ``no_projection_weights``.
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
           "combine_heads", "causal_mask", "padding_mask", "multi_head_attention",
           "stage_shapes", "param_count", "qkv_param_count", "project_qkv", "layer_norm", "flops",
           "crossover_seq_len", "score_bytes", "max_seq_len", "head_queries",
           "bug_source_position", "no_projection_weights"]

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


# ---------------------------------------------------------------------------------------
# The other exercises: stage shapes, parameter counts, projections, layer norm, costs
# ---------------------------------------------------------------------------------------

def _stage_mistakes(B, T, D, H):
    """Wrong shapes a learner predicts for a stage: (name, fix, true shape -> wrong shape)."""
    d_k = D // H
    return (
        Mistake("a head with all d_model features", f"d_k = d_model // h = {d_k}",
                lambda s: s[:-1] + (D,) if len(s) == 4 and s[-1] == d_k else None),
        Mistake("the head axis after the positions (the reshape without the transpose)",
                "split_heads gives (B, h, T, d_k): heads come before positions",
                lambda s: (s[0], s[2], s[1], s[3]) if len(s) == 4 else None),
        Mistake("scores of shape (T, d_k)", "one score per query and key: (B, h, T, S)",
                lambda s: s[:-1] + (d_k,) if len(s) == 4 and s[-1] == T else None),
        Mistake("the batch axis forgotten", f"every stage starts with B = {B}", lambda s: s[1:]),
    )


def _stage_problem(name, mine, want, mistakes) -> str:
    """One feedback line for a stage whose predicted shape is wrong ('' if it is right)."""
    try:
        mine = tuple(int(n) for n in mine)
    except Exception:
        return f"{name}: expected a tuple of ints such as {want}, got {mine!r}"
    if mine == want:
        return ""
    named = [f" Looks like: {m.name}. Fix: {m.fix}" for m in mistakes if m.fn(want) == mine]
    return f"{name}: expected {want}, got {mine}." + (named[0] if named else "")


def stage_shapes(my_shapes, B, T, D, H) -> bool:
    """Check a dict {stage name: predicted shape} against a real trace of sizes B, T, D, H.

    Stages are those of ``mc.trace`` (X, Q, ..., output); prints each wrong stage.

    >>> stage_shapes({"X": (1, 2, 4)}, 1, 2, 4, 2)
    ✘ stage_shapes: give one shape for each stage
      missing: Q, K, V, Q_heads, K_heads, V_heads, scores, weights, head_outputs, concat, output
    False
    """
    rng = np.random.default_rng(0)
    want = _trace(rng.normal(size=(B, T, D)), init_params(D, rng=rng), H).shapes
    if not isinstance(my_shapes, dict):
        print(f"✘ stage_shapes: expected a dict {{stage name: shape}}, got a {type(my_shapes).__name__}")
        return False
    missing, extra = [n for n in want if n not in my_shapes], [n for n in my_shapes if n not in want]
    if missing or extra:
        print("✘ stage_shapes: give one shape for each stage")
        print("\n".join(f"  {k}: {', '.join(map(str, v))}" for k, v in
                        (("missing", missing), ("unknown", extra)) if v))
        return False
    mistakes = _stage_mistakes(B, T, D, H)
    problems = [p for p in (_stage_problem(n, my_shapes[n], want[n], mistakes) for n in want) if p]
    if problems:
        print(f"✘ stage_shapes: {len(problems)} of {len(want)} stages wrong")
        print("\n".join("  " + p for p in problems))
        return False
    print(f"✔ stage_shapes: all {len(want)} shapes right")
    return True


def _block_params(d_model, bias, fields):
    """Number of scalars in the named fields of real MHAParams (fields like 'W_q', 'b_q')."""
    p = init_params(d_model, rng=np.random.default_rng(0), bias=bias)
    return int(sum(np.size(getattr(p, f)) for f in fields if getattr(p, f) is not None))


_ALL_FIELDS = ("W_q", "W_k", "W_v", "W_o", "b_q", "b_k", "b_v", "b_o")
_QKV_FIELDS = ("W_q", "W_k", "W_v", "b_q", "b_k", "b_v")
_COUNT_CASES = [(12, 3, False), (12, 4, True), (8, 8, True), (64, 16, False), (64, 2, True)]
_FIX_HEADS = "h does not change the count: the heads are slices of one d_model x d_model matrix"


def _check_count(fn, name, fields, other) -> bool:
    """Check a parameter count ``fn(d_model, h, bias=False)`` over the given MHAParams fields;
    ``other`` = (name, fix, number of matrices) of the wrong-matrix-count mistake."""
    n = sum(f.startswith("W") for f in fields)
    def with_bias(k):
        return lambda d_model, h, bias=False: k * d_model * d_model + (k * d_model if bias else 0)
    mistakes = (Mistake("the biases are forgotten", "add d_model per bias vector when bias=True",
                        lambda d_model, h, bias=False: n * d_model * d_model),
                Mistake(other[0], other[1], with_bias(other[2])),
                Mistake("each head counted with full-size d_model x d_model matrices", _FIX_HEADS,
                        lambda d_model, h, bias=False: h * with_bias(n)(d_model, h, bias)))
    def reference(d_model, h, bias=False):
        return _block_params(d_model, bias, fields)
    return matches(fn, reference, _COUNT_CASES, name, mistakes)


def param_count(fn) -> bool:
    """Check ``fn(d_model, h, bias=False) -> int``: the scalars of W_q, W_k, W_v, W_o (and biases).

    Cases: d_model 12, 8 and 64, with h from 2 to 16, with and without biases; the count
    never depends on h. Exercises 0.3 and 4.4 use this checker.

    >>> param_count(lambda d_model, h, bias=False: 4 * d_model * d_model + (4 * d_model if bias else 0))
    ✔ param_count: all 5 cases match
    True
    """
    return _check_count(fn, "param_count", _ALL_FIELDS,
                        ("W_o is not counted (3·d_model²)", "count W_o too: 4 matrices", 3))


def qkv_param_count(fn) -> bool:
    """Check ``fn(d_model, h, bias=False) -> int``: the scalars of W_q, W_k, W_v (and their biases).

    >>> qkv_param_count(lambda d_model, h, bias=False: 3 * d_model * d_model + (3 * d_model if bias else 0))
    ✔ qkv_param_count: all 5 cases match
    True
    """
    return _check_count(fn, "qkv_param_count", _QKV_FIELDS,
                        ("W_o counted too (4·d_model²)", "only W_q, W_k, W_v: 3 matrices", 4))


def _qkv_of(x, params):
    t = _trace(x, params, 1)
    return tuple(np.array(t[n]) for n in "QKV")  # each (B, T, d_model)


def project_qkv(fn) -> bool:
    """Check ``fn(x, params) -> (Q, K, V)``: x (B, T, d_model) -> each (B, T, d_model).

    Cases: B=2, T=5, d_model=12 without and with biases; B=3, T=4, d_model=8 with biases.

    >>> import mha_course as mc
    >>> project_qkv(lambda x, p: tuple(mc.trace(x, p, h=1)[n] for n in "QKV"))
    ✔ project_qkv: all 3 cases match
    True
    """
    rng = np.random.default_rng(20240506)
    cases = [(rng.normal(size=(2, 5, 12)), init_params(12, rng=rng)),
             (rng.normal(size=(2, 5, 12)), init_params(12, rng=rng, bias=True)),
             (rng.normal(size=(3, 4, 8)), init_params(8, rng=rng, bias=True))]
    mistakes = (Mistake("the biases are forgotten", "add b_q, b_k, b_v when they are not None",
                        lambda x, p: _qkv_of(x, _no_bias(p))),
                Mistake("the weight matrices are transposed (x @ W.T, PyTorch's nn.Linear convention)",
                        "this course uses x @ W: Q = x @ params.W_q",
                        lambda x, p: _qkv_of(x, p._replace(W_q=p.W_q.T, W_k=p.W_k.T, W_v=p.W_v.T))))
    return matches(fn, _qkv_of, cases, "project_qkv", mistakes, outputs=("Q", "K", "V"),
                   notes=["", "with biases", "with biases"])


def _layer_norm_over(axis, ddof=0, eps_used=True):
    """A layer norm with one knob turned: reduction axis, variance ddof, eps used or not."""
    def norm(x, eps=1e-5):
        mean = x.mean(axis=axis, keepdims=True)
        var = x.var(axis=axis, ddof=ddof, keepdims=True)
        return (x - mean) / np.sqrt(var + (eps if eps_used else 0.0))
    return norm


def layer_norm(fn) -> bool:
    """Check ``fn(x, eps=1e-5)``: x (..., D) -> (..., D), each row to mean 0 and variance 1.

    Cases: (2, 4, 8) with mean 3 and std 5; a row with an outlier; rows of tiny variance
    (where eps matters); a constant row.

    >>> from mha_course.block import layer_norm as ln
    >>> layer_norm(ln)
    ✔ layer_norm: all 4 cases match
    True
    """
    from .block import layer_norm as reference
    rng = np.random.default_rng(20240507)
    cases = [(rng.normal(3.0, 5.0, size=(2, 4, 8)),), (np.array([[1.0, 2.0, 3.0, 10.0]]),),
             (rng.normal(size=(3, 6)) * 1e-3,), (np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]),)]
    mistakes = (
        Mistake("the unbiased variance (ddof=1); layer norm divides by D, not D - 1",
                "x.var(axis=-1, keepdims=True), or ((x - mean) ** 2).mean(axis=-1, keepdims=True)",
                _layer_norm_over(-1, ddof=1)),
        Mistake("eps is forgotten (a constant row gives 0 / 0 = nan)", "divide by np.sqrt(var + eps)",
                _layer_norm_over(-1, eps_used=False)),
        *(Mistake("normalised over the wrong axis", "mean and variance over the last axis, "
                  "with keepdims=True: x.mean(axis=-1, keepdims=True)", _layer_norm_over(a))
          for a in (0, None)))
    notes = ["mean 3, std 5", "one outlier", "rows of variance ~1e-6: eps matters", "a constant row"]
    return matches(fn, reference, cases, "layer_norm", mistakes, notes=notes)


def _flops_ref(T, d_model):
    from . import complexity
    return complexity.projection_flops(T, d_model), complexity.attention_flops(T, d_model)


def _flops_scaled(proj, att):
    return lambda T, d_model: tuple(int(f * n) for f, n in zip((proj, att), _flops_ref(T, d_model)))


def flops(fn) -> bool:
    """Check ``fn(T, d_model) -> (projections, attention)``: the FLOPs of self-attention.

    One multiply-add counts as 2 FLOPs: projections 8·T·d_model², attention 4·T²·d_model.

    >>> flops(lambda T, d_model: (8 * T * d_model ** 2, 4 * T * T * d_model))
    ✔ flops: all 4 cases match
    True
    """
    mistakes = (
        Mistake("a multiply-add counted as 1 FLOP", "a multiply-add is 2 FLOPs: (T, D) x (D, D) "
                "costs 2·T·D²", _flops_scaled(0.5, 0.5)),
        Mistake("the K and V projections are forgotten", "four projections: Q, K, V and the output",
                _flops_scaled(0.5, 1)),
        Mistake("the output projection is forgotten", "four projections: Q, K, V and the output",
                _flops_scaled(0.75, 1)),
        Mistake("only Q Kᵀ counted, not weights · V", "two matmuls of 2·T²·d_model each",
                _flops_scaled(1, 0.5)))
    cases = [(10, 16), (333, 96), (1024, 512), (4096, 768)]
    return matches(fn, _flops_ref, cases, "flops", mistakes, outputs=("projections", "attention"))


def crossover_seq_len(fn) -> bool:
    """Check ``fn(d_model) -> int``: the smallest T whose attention FLOPs reach the projections'.

    >>> crossover_seq_len(lambda d_model: 2 * d_model)
    ✔ crossover_seq_len: all 4 cases match
    True
    """
    from .complexity import crossover_seq_len as reference
    mistakes = (
        Mistake("off by one: the last T where attention is still cheaper", "the first T with "
                "attention FLOPs >= projection FLOPs", lambda d_model: 2 * d_model - 1),
        Mistake("the output projection is forgotten (3 projections, not 4)", "count Q, K, V "
                "and the output projection", lambda d_model: -(-3 * d_model // 2)),
        Mistake("only Q Kᵀ counted in the attention, not weights · V", "two matmuls of "
                "2·T²·d_model each", lambda d_model: 4 * d_model))
    return matches(fn, reference, [(1,), (8,), (64,), (768,)], "crossover_seq_len", mistakes)


def _score_bytes_ref(B, h, T, bytes_per_number=4):
    from .complexity import score_memory_bytes
    return score_memory_bytes(B, h, T, dtype=np.dtype(f"f{bytes_per_number}"))


def score_bytes(fn) -> bool:
    """Check ``fn(B, h, T, bytes_per_number=4) -> int``: the bytes of the (B, h, T, T) scores.

    >>> score_bytes(lambda B, h, T, bytes_per_number=4: B * h * T * T * bytes_per_number)
    ✔ score_bytes: all 4 cases match
    True
    """
    mistakes = (
        Mistake("h is forgotten: every head has its own T x T scores", "B * h * T * T * bytes_per_number",
                lambda B, h, T, b=4: B * T * T * b),
        Mistake("B is forgotten: every sequence has its own scores", "B * h * T * T * bytes_per_number",
                lambda B, h, T, b=4: h * T * T * b),
        Mistake("T instead of T²: one score per query AND key", "B * h * T * T * bytes_per_number",
                lambda B, h, T, b=4: B * h * T * b),
        Mistake("numbers counted, not bytes", "multiply by bytes_per_number",
                lambda B, h, T, b=4: B * h * T * T))
    cases = [(1, 1, 1024), (8, 12, 2048, 2), (2, 32, 4096, 8), (3, 5, 7, 4)]
    return matches(fn, _score_bytes_ref, cases, "score_bytes", mistakes)


def _max_seq_len_ref(budget_bytes, B, h, bytes_per_number=4):
    return math.isqrt(budget_bytes // (B * h * bytes_per_number))  # largest T with B·h·T²·b <= budget


def max_seq_len(fn) -> bool:
    """Check ``fn(budget_bytes, B, h, bytes_per_number=4) -> int``: the largest T whose
    (B, h, T, T) scores fit in the budget.

    >>> max_seq_len(_max_seq_len_ref)
    ✔ max_seq_len: all 4 cases match
    True
    """
    mistakes = (
        Mistake("h is forgotten: every head has its own T x T scores", "budget // (B * h * bytes_per_number)",
                lambda n, B, h, b=4: math.isqrt(n // (B * b))),
        Mistake("the square root is forgotten: the scores grow with T², not T",
                "math.isqrt(budget // (B * h * bytes_per_number))", lambda n, B, h, b=4: n // (B * h * b)),
        Mistake("numbers counted, not bytes", "divide the budget by bytes_per_number too",
                lambda n, B, h, b=4: math.isqrt(n // (B * h))),
        Mistake("rounded up: the scores of that T no longer fit", "round down: math.isqrt, or int(...)",
                lambda n, B, h, b=4: math.ceil(math.sqrt(n / (B * h * b)))))
    cases = [(16 * 2**30, 1, 32), (16 * 2**30, 8, 12), (10**6, 1, 1), (10**6 + 7, 2, 3, 2)]
    return matches(fn, _max_seq_len_ref, cases, "max_seq_len", mistakes)


def _head_queries_ref(X, W_q, h, i):
    return _split_heads(np.matmul(X, W_q), h)[:, i]  # (B, T, D) x (D, D) -> (B, h, T, d_k) -> (B, T, d_k)


def _head_queries_cols(cols):
    """head_queries with the columns cols(d_k, h, i) of W_q (a wrong slice)."""
    return lambda X, W_q, h, i: np.matmul(X, W_q[:, cols(W_q.shape[1] // h, h, i)])  # -> (B, T, d_k)


def head_queries(fn) -> bool:
    """Check ``fn(X, W_q, h, i)``: X (B, T, d_model), W_q (d_model, d_model) -> (B, T, d_k),
    head i's queries, i.e. ``split_heads(X @ W_q, h)[:, i]``.

    >>> import mha_course as mc
    >>> head_queries(lambda X, W_q, h, i: mc.split_heads(X @ W_q, h)[:, i])
    ✔ head_queries: all 4 cases match
    True
    """
    rng = np.random.default_rng(20240508)
    X, W = rng.normal(size=(2, 5, 12)), rng.normal(size=(12, 12))
    cases = [(X, W, 3, 0), (X, W, 3, 2), (X, W, 4, 1), (rng.normal(size=(3, 4, 8)), rng.normal(size=(8, 8)), 2, 1)]
    fix = "head i owns the columns i*d_k:(i+1)*d_k of W_q: X @ W_q[:, i*d_k:(i+1)*d_k]"
    mistakes = (
        Mistake("rows of W_q instead of columns", fix,
                lambda X, W_q, h, i: np.matmul(X, W_q[i * (len(W_q) // h):(i + 1) * (len(W_q) // h)].T)),
        Mistake("every h-th column (W_q[:, i::h]) instead of a block of d_k columns", fix,
                _head_queries_cols(lambda d_k, h, i: slice(i, None, h))),
        Mistake("the first block of columns for every head (the offset i*d_k is missing)", fix,
                _head_queries_cols(lambda d_k, h, i: slice(0, d_k))))
    return matches(fn, _head_queries_ref, cases, "head_queries", mistakes)


def _bug_position_ref(i, t, T, h):
    codes = np.arange(T * h * 2).reshape(1, T, h * 2)  # entry (t, f) holds t * d_model + f, d_k = 2
    return int(_split_no_transpose(codes, h)[0, i, t, 0] // (h * 2))  # (1, h, T, d_k), buggy


def bug_source_position(fn) -> bool:
    """Check ``fn(i, t, T, h) -> int``: the position whose features fill row t of head i
    after the buggy ``x.reshape(B, h, T, d_k)``; every head and row for 4 sizes.

    >>> bug_source_position(lambda i, t, T, h: (i * T + t) // h)
    ✔ bug_source_position: all 58 cases match
    True
    """
    sizes = [(6, 2), (5, 3), (4, 6), (7, 1)]
    cases = [(i, t, T, h) for T, h in sizes for i in reversed(range(h)) for t in range(T)]  # i > 0 first
    fix = "row t of head i starts at flat entry (i*T + t)*d_k; a position holds d_model = h*d_k entries"
    mistakes = (
        Mistake("the position of the correct split (t): the bug mixes positions", fix, lambda i, t, T, h: t),
        Mistake("the flat row index i*T + t, not divided by h", fix, lambda i, t, T, h: i * T + t),
        Mistake("divided by T instead of h", fix, lambda i, t, T, h: (i * T + t) // T))
    return matches(fn, _bug_position_ref, cases, "bug_source_position", mistakes)


def no_projection_weights(fn) -> bool:
    """Check ``fn(x)``: x (B, T, d_model) -> weights (B, T, T) of attention with Q = K = V = x.

    >>> import mha_course as mc
    >>> no_projection_weights(lambda x: mc.scaled_dot_product_attention(x, x, x)[1])
    ✔ no_projection_weights: all 3 cases match
    True
    """
    rng = np.random.default_rng(20240509)
    cases = [(rng.normal(size=(2, 8, 64)),), (rng.normal(size=(1, 5, 16)),), (rng.normal(size=(3, 4, 6)),)]
    mistakes = (
        Mistake("the scores are not divided by √d", "divide x @ xᵀ by np.sqrt(d_model)",
                lambda x: _sdpa_scaled(lambda d: 1.0, x, x, x)[1]),
        Mistake("the scores are divided by d instead of √d", "divide x @ xᵀ by np.sqrt(d_model)",
                lambda x: _sdpa_scaled(lambda d: 1.0 / d, x, x, x)[1]),
        Mistake("the scores are returned, not the weights (no softmax)", "apply mc.softmax over the last axis",
                lambda x: _scores(x, x, 1 / math.sqrt(x.shape[-1]))))
    return matches(fn, lambda x: _sdpa(x, x, x)[1], cases, "no_projection_weights", mistakes)
