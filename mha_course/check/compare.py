"""The checker's comparison: how a learner's result differs from the expected one, in words.

:func:`compare` gives the feedback lines for one result (``[]`` when it matches): a tuple, a list
or a dict of outputs, a wrong shape, wrong values, the right values of the wrong kind (a float
mask, a float count, a complex or an object array, an unstacked list of arrays). :func:`localise`
says where and how a same-shape result differs (which axis, rows or heads; scaled, shifted,
permuted, averaged, transposed) for a mistake that nothing else explains. ``close`` and ``same``
are the checker's equality (rtol=1e-5, atol=1e-6, nan equal to nan).
"""
from __future__ import annotations

from itertools import combinations, permutations
from typing import NamedTuple

from .language import say
from .sandbox import FromTorch, Opaque, np, protect, safe_repr

RTOL, ATOL = 1e-5, 1e-6
NOT_DIAGNOSED = "\x00"  # prefix of a problem whose message says it all (no localisation)


class Outcome(NamedTuple):
    """What one call gave: a value, or an exception (``error``), or nothing (``lines`` say why)."""
    value: object = None
    error: BaseException | None = None
    lines: tuple = ()


def states_int(reference) -> bool:
    """The reference's signature says ``-> int`` (its annotation, or its docstring's shape line)."""
    import inspect
    import re
    try:
        if inspect.signature(reference).return_annotation in (int, "int"):
            return True
    except (TypeError, ValueError):
        return False
    line = (inspect.getdoc(reference) or "").split("\n")[0]
    return bool(re.search(r"->\s*int\b", line))


def same_outcome(a: Outcome, b: Outcome) -> bool:
    """Two outcomes agree: the same exception type, or the same values of the same kind."""
    if a.error is not None or b.error is not None:
        return type(a.error) is type(b.error)  # the messages may differ: numpy's, or the package's
    return same(a.value, b.value)


def has_nan(value) -> bool:
    """A NaN anywhere in a float array, a float, or a tuple or list of them."""
    if isinstance(value, (tuple, list)):
        return any(has_nan(v) for v in value)
    try:
        v = np.asarray(value)
        return v.dtype.kind in "fc" and bool(np.isnan(v).any())
    except (TypeError, ValueError):
        return False


def nan_free(a: Outcome, got: Outcome) -> bool:
    """``a`` agrees with ``got`` once ``a`` has NaN where ``got`` has (``got``'s NaN, where ``a`` has numbers,
    being a second slip: an unguarded exp(-inf - (-inf)) or 0/0)."""
    if a.error is not None or got.error is not None:
        return same_outcome(a, got)
    return same(_nan_where(a.value, got.value), got.value)


def _nan_where(value, like):
    if isinstance(value, tuple) and isinstance(like, (tuple, list)) and len(value) == len(like):
        return tuple(_nan_where(v, w) for v, w in zip(value, like))
    if isinstance(value, np.ndarray) and isinstance(like, np.ndarray) and value.shape == like.shape and \
            value.dtype.kind == "f" and like.dtype.kind == "f":
        return np.where(np.isnan(like), np.nan, value)
    return value


# ---------------------------------------------------------------------------------------
# comparing results
# ---------------------------------------------------------------------------------------

def compare(got, want, outputs, strict=False, containers=True) -> list:
    """Feedback lines on how ``got`` differs from ``want`` ([] if it matches); ``containers``: right
    values in another container than the reference's (a list, a torch tensor) are refused too."""
    if isinstance(want, dict):
        return _compare_dict(got, want)
    if isinstance(want, tuple):
        names = outputs or [f"output {i}" for i in range(len(want))]
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return [NOT_DIAGNOSED + _wrong_return(got, names)]
        for nm, g, w in zip(names, got, want):
            problem = _compare_array(g, w, nm, strict, containers)
            if problem:
                return problem
        return [NOT_DIAGNOSED + _wrong_return(got, names)] if isinstance(got, list) and containers else []
    return _compare_array(got, want, "result", strict, containers)


def _compare_dict(got, want) -> list:
    """A dict of outputs: the same keys, then each value compared as an output named by its key."""
    if not isinstance(got, dict):
        return [f"{NOT_DIAGNOSED}expected a dict with the keys {', '.join(map(str, want))}, "
                f"got a {type(got).__name__}"]
    if set(got) != set(want):
        return [f"{NOT_DIAGNOSED}expected the keys {', '.join(map(str, want))}, got {', '.join(map(str, got))}"]
    return next((p for p in (_compare_array(got[k], w, str(k)) for k, w in want.items()) if p), [])


def _wrong_return(got, names) -> str:
    expected, fix = f"a tuple ({', '.join(names)})", f"Fix: return {', '.join(names)}"
    if got is None:
        return f"it returned None, expected {expected}: is a `return` missing, or does a loop end without reaching it?"
    if isinstance(got, np.ndarray):
        return f"it returned one array of shape {got.shape}, expected {expected}. {fix}"
    size = f" of {len(got)} values" if isinstance(got, (tuple, list)) else ""
    return f"it returned a {type(got).__name__}{size}, expected {expected}." + (
        f" {fix} (a tuple)" if isinstance(got, list) else "")


def _compare_array(got, want, nm, strict=False, containers=True) -> list:
    """Shape, value and kind (bool, int) comparison of one output, as feedback lines."""
    if got is None:
        return [f"{NOT_DIAGNOSED}{nm}: it returned None: is a `return` missing, or does a loop end without reaching "
                "it (check the loop's range: range(a, b) stops at b - 1)?"]
    if isinstance(got, Opaque):
        if got.name.startswith("numpy array of dtype object"):
            kind = np.asarray(want).dtype
            return [f"{NOT_DIAGNOSED}{nm}: an array of dtype object (Python objects, not numbers). "
                    f"Fix: build it with dtype={kind} (or add .astype({kind}))"]
        return [f"{NOT_DIAGNOSED}{nm}: expected an array of numbers, got a value of type {got.name}."]
    w = np.asarray(want)
    try:
        g = np.asarray(got)
    except Exception:
        g = None
    if g is None or g.shape != w.shape or g.dtype == object:
        parts = _unstacked(got, w, nm)
        if parts:
            return parts
    if g is None:
        return [f"{NOT_DIAGNOSED}{nm}: expected an array, got a value of type {type(got).__name__}."]
    if g.dtype == object and w.dtype != object:
        return [f"{NOT_DIAGNOSED}{nm}: expected an array of numbers, got a value of type {type(got).__name__}."]
    if g.dtype.kind == "c" and w.dtype.kind != "c":
        return _complex(g, w, nm)
    if g.shape != w.shape:
        return [f"{nm}: expected shape {w.shape}, got {g.shape}"]
    if not close(g, w):
        return _show_difference(g, w, nm)
    whole = isinstance(want, (int, np.integer)) and not isinstance(want, (bool, np.bool_))
    return _kind_problem(g, w, nm, strict or whole) or (_container_problem(got, want, nm) if containers else [])


def _container_problem(got, want, nm) -> list:
    """Right values in another container than the one the exercise states (the reference's): a torch
    tensor or a list for a numpy array, a list for a tuple, a 0-d array for a number."""
    if callable(getattr(want, "detach", None)):  # the exercise asks for a torch tensor
        return []
    if isinstance(got, FromTorch):
        said = say("{name}: the values are right but it is a torch tensor where a numpy array is expected. "
                   "Fix: convert it with .detach().numpy()", name=nm)
    elif isinstance(want, np.ndarray) and isinstance(got, (list, tuple)):
        said = say("{name}: the values are right but it is a {kind} where a numpy array of shape {shape} is "
                   "expected. Fix: return np.array(...) of it", name=nm, kind=type(got).__name__, shape=want.shape)
    elif isinstance(want, tuple) and isinstance(got, list):
        said = say("{name}: the values are right but it is a list where a tuple is expected. "
                   "Fix: return tuple(...) of it", name=nm)
    elif isinstance(want, (float, int, np.number)) and isinstance(got, np.ndarray):
        said = say("{name}: the value is right but it is a numpy array of shape {shape} where a number ({kind}) "
                   "is expected. Fix: return {kind}(...) of it", name=nm, shape=got.shape,
                   kind="float" if isinstance(want, (float, np.floating)) else "int")
    else:
        return []
    return [NOT_DIAGNOSED + said]


def _unstacked(got, w, nm) -> list:
    """A list (or tuple) of arrays where one array is expected: named, with the stacking that fixes it."""
    if not isinstance(got, (list, tuple)) or not got or w.ndim == 0 or not all(
            isinstance(p, np.ndarray) and p.ndim >= 1 for p in got):
        return []
    right = [i for i, p in enumerate(got) if close(p, w)]
    if right and len(got) > 1:
        return [NOT_DIAGNOSED + say("{name}: it returned a {kind} of {n} values where one array of shape {shape} is "
                                    "expected; value {i} of the {n} is the right one. Fix: return only that one "
                                    "(not the other values with it)", name=nm, kind=type(got).__name__, n=len(got),
                                    shape=w.shape, i=right[0] + 1)]
    shapes = {p.shape for p in got}
    said = (f"{NOT_DIAGNOSED}{nm}: a {type(got).__name__} of {len(got)} arrays"
            + (f" of shape {next(iter(shapes))}" if len(shapes) == 1 else "") + f" where one array of shape "
            f"{w.shape} is expected (an unstacked list, e.g. one per head)")
    for how, join in (("np.stack", np.stack), ("np.concatenate", np.concatenate)):
        for axis in range(-w.ndim, 0):
            try:
                if close(join(got, axis=axis), w):
                    return [f"{said}. Fix: {how}(parts, axis={axis + w.ndim})"]
            except Exception:
                continue
    return [f"{said}. Fix: combine them into one array (np.stack or np.concatenate)"]


def _complex(g, w, nm) -> list:
    """A complex result where real numbers are expected (a +0j, an eigenvalue's type)."""
    right = g.shape == w.shape and close(g.real, w) and bool(np.all(np.abs(g.imag) <= ATOL))
    return [f"{NOT_DIAGNOSED}{nm}: {'the values are right but ' if right else ''}complex ({g.dtype}) where real "
            "numbers are expected (np.linalg.eigvals and np.fft give complex values). Fix: take the real part "
            "(.real) of a result you know is real"]


def _kind_problem(g, w, nm, strict=False) -> list:
    """Right values of the wrong kind: a float mask; float indices; a float count when the type is
    the point (``strict``, or the signature says ``-> int``; otherwise 4.0 for 4 is right when it
    is exactly the whole number)."""
    if w.dtype == np.bool_ and g.dtype != np.bool_:
        return [f"{NOT_DIAGNOSED}{nm}: the values are right but the dtype is {g.dtype}; masks are boolean. "
                "Fix: build it with dtype=bool or add .astype(bool)"]
    if w.ndim >= 1 and w.dtype.kind in "iu" and g.dtype.kind not in "iu":
        return [f"{NOT_DIAGNOSED}{nm}: the values are right but the dtype is {g.dtype}; indices are whole "
                "numbers (int). Fix: use // (floor division), or add .astype(int)"]
    if w.dtype.kind == "f" and g.dtype.kind == "f" and g.dtype.itemsize < w.dtype.itemsize:
        return [f"{NOT_DIAGNOSED}{nm}: the values are right to {g.dtype}'s precision, but the dtype is {g.dtype} where "
                f"the inputs are {w.dtype} (a .float() or a float32 tensor on the way). Fix: keep the inputs' dtype"]
    if w.ndim >= 1 and w.dtype == np.float32 and g.dtype == np.float64:
        return [NOT_DIAGNOSED + say("{name}: the values are right but the dtype is float64 where the inputs are "
                                    "float32: a float64 array on the way doubles the memory (np.zeros without "
                                    "dtype=, np.array(..., dtype=float)). Fix: keep the inputs' dtype "
                                    "(dtype=x.dtype, or np.concatenate of the inputs themselves)", name=nm)]
    whole = g.dtype.kind in "iu" or (g.dtype.kind == "f" and bool(np.all(g == w)))
    if w.ndim == 0 and w.dtype.kind in "iu" and (g.dtype.kind not in "iu" if strict else not whole):
        return [f"{NOT_DIAGNOSED}{nm}: the value is right but it is a {type(g.item()).__name__} "
                f"({safe_repr(g.item())}), expected a whole number (int). Fix: use // for division, or int(...)"]
    return []


def _show_difference(g, w, nm) -> list:
    """Expected and received values of the first row (last axis) where they differ."""
    if g.dtype.kind not in "biuf" or w.ndim == 0:
        return [f"{nm}: expected {fmt(w)}, got {fmt(g)}"]
    idx = tuple(int(i) for i in np.argwhere(~isclose(g, w))[0])
    start = max(0, min(idx[-1] - 2, w.shape[-1] - 6))
    sl = (*idx[:-1], slice(start, start + 6))
    where = ", ".join([str(i) for i in idx[:-1]] + [f"{start}:{start + 6}" if w.shape[-1] > 6 else ":"])
    label = f"{nm}[{where}]"
    return [f"{label} expected {fmt(w[sl])}", f"{' ' * len(label)} got      {fmt(g[sl])}"]


def fmt(a) -> str:
    a = np.asarray(a)
    if a.dtype == np.bool_:
        return np.array2string(a.astype(int), separator=" ")
    if a.dtype.kind in "iu":
        return np.array2string(a, separator=" ")
    if a.dtype.kind == "f":
        return np.array2string(a, precision=4, floatmode="fixed", suppress_small=True,
                               max_line_width=200, separator=" ")
    return safe_repr(a.tolist() if a.ndim else a.item())


def num(a):
    a = np.asarray(a)
    return a.astype(float) if a.dtype == np.bool_ else a


def isclose(g, w):
    g, w = num(g), num(w)
    if g.dtype.kind in "iu" and w.dtype.kind in "iu":
        return np.equal(g, w)  # whole numbers exactly: 2**27 is not 2**27 - 1, however large
    return np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)


def close(a, b) -> bool:
    """Same shape and values (rtol=1e-5, atol=1e-6, nan equal to nan)."""
    try:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
            return bool(np.all(isclose(a, b)))
        return bool(np.all(a == b))
    except Exception:
        return False


def same(a, b) -> bool:
    """Like close, element by element for tuples and lists of outputs, and of the same kind."""
    if isinstance(b, dict):
        return isinstance(a, dict) and set(a) == set(b) and all(same(a[k], b[k]) for k in b)
    if isinstance(b, tuple) or (isinstance(a, tuple) and isinstance(b, list)):  # a list for a tuple: its own message
        return isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b) and all(
            map(same, a, b))
    if isinstance(a, (tuple, Opaque)) or isinstance(a, float) != isinstance(b, float):
        return False
    if _list_of_arrays(a) != _list_of_arrays(b):
        return False  # an unstacked list of arrays is its own mistake, whatever its stacking equals
    if None not in (_floats(a), _floats(b)) and _floats(a) != _floats(b):
        return False  # a float array is not an int or bool one with the same values (1.0 / 0.0 for 1 / 0)
    return close(a, b)


def _floats(v):
    """True for a float array, False for an int or bool one, None for anything else (a scalar, a list)."""
    if isinstance(v, np.ndarray) and v.ndim >= 1 and v.dtype.kind in "biuf":
        return v.dtype.kind == "f"
    return None


def _list_of_arrays(v) -> bool:
    return isinstance(v, list) and any(isinstance(x, np.ndarray) for x in v)


def identical(a, b) -> bool:
    """Exact equality of two (nested) arguments: arrays, tuples such as MHAParams, scalars."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(map(identical, a, b))
    if callable(getattr(a, "detach", None)) and callable(getattr(a, "numpy", None)):  # torch tensors
        try:
            return identical(a.detach().cpu().numpy(), b.detach().cpu().numpy())
        except Exception:
            return False
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


# ---------------------------------------------------------------------------------------
# where and how a same-shape result differs
# ---------------------------------------------------------------------------------------

def where_and_how(g, w, labels, factor=None) -> list:
    if g.shape != w.shape:
        return _how_shapes_differ(g, w, labels)
    how, where = _how_values_differ(g, w, labels, factor), _where_values_differ(g, w, labels)
    if not how and where and not where[0].endswith("every axis"):
        how = _scaled_where(g, w, factor)
    return ([] if how and where and where[0].endswith("every axis") else where) + how


def _scaled_where(g, w, factor=None) -> list:
    """Where only some values differ: those values all one factor times the expected ones (an entry left unscaled)."""
    if g.dtype.kind not in "biuf" or w.dtype.kind not in "biuf":
        return []
    bad = ~isclose(g, w)
    if bad.any() and np.all(num(g[bad]) == 0) and np.all(np.isfinite(w[bad])) and np.all(w[bad] != 0) and \
            np.all(np.abs(w[bad]) <= 1e-2 * np.abs(w).max()):  # only small expected values: where it lands
        return [say("where they differ, yours are 0 and the expected values are not: does an intermediate over- or "
                    "underflow (a power or an exp of a large number, taken before it is divided back down)?")]
    c = ratio(num(g[bad]), num(w[bad])) if bad.any() and np.all(np.abs(num(w[bad])) > ATOL) else None
    if not c or f"{c:.4g}" == "1":
        return []
    named = factor.name(c) if factor is not None else ""
    return [say("where they differ, yours are {c} times the expected values (the rest match): a factor applied to "
                "them, or left off them, that the others have", c=named or f"{c:.4g}")]


def differences(got, want, outputs) -> list:
    """[(name, got array, expected array)] of every output that differs."""
    if isinstance(want, dict):
        return differences(tuple(got[k] for k in want), tuple(want.values()), tuple(map(str, want)))
    if not isinstance(want, tuple):
        return [("result", np.asarray(got), np.asarray(want))]
    names = outputs or [f"output {i}" for i in range(len(want))]
    return [(nm, np.asarray(g), np.asarray(w)) for nm, g, w in zip(names, got, want) if not close(g, w)]


def axis_labels(ndim, trailing) -> list:
    trailing = tuple(trailing) or (("row", "column") if ndim >= 2 else ("entry",))
    trailing = trailing[-ndim:] if ndim else ()
    return [f"axis {i}" for i in range(ndim - len(trailing))] + list(trailing)


def _where_values_differ(g, w, labels) -> list:
    """Which indices of each axis hold a difference, for the axes where not all of them do."""
    bad = ~isclose(g, w)
    if w.ndim == 0:
        return []
    out = []
    for ax, label in enumerate(labels):
        hit = np.flatnonzero(bad.any(axis=tuple(a for a in range(w.ndim) if a != ax)))
        if len(hit) < w.shape[ax]:
            at = (f"index {index_list(hit)} of {w.shape[ax]} along {label}" if label == f"axis {ax}" else
                  f"{label} {index_list(hit)} of {w.shape[ax]} (axis {ax})")
            out.append(f"differences only at {at}" + _end_only(hit, w.shape[ax]))
    return out or [f"{int(bad.sum())} of {bad.size} values differ, spread over every axis"]


def _end_only(hit, n) -> str:
    """The hint for differences at the first (or the last) index of an axis alone: a range's end."""
    if n > 2 and list(hit) == [0]:
        return say(": the first only (a loop or range that starts one late, or the first handled on its own?)")
    if n > 2 and list(hit) == [n - 1]:
        return say(": the last only (a loop or range that stops one early, or the last handled on its own?)")
    return ""


def index_list(idx) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:8])
    return shown + (", ..." if len(idx) > 8 else "")


def _how_values_differ(g, w, labels, factor=None) -> list:
    """How a same-shape result relates to the expected one: non-finite, all zero, sign-flipped,
    scaled (by a named size when one fits), shifted, transposed, permuted, reduced, unnormalised."""
    if g.dtype.kind not in "biuf" or w.dtype.kind not in "biuf":
        return []
    flipped = _two_values_swapped(g, w)
    if flipped:
        return [flipped]
    g, w = num(g), num(w)
    stand_in = np.isinf(w) & np.isfinite(g) & (np.abs(g) >= 1e4)
    if stand_in.any() and bool(np.all(np.isfinite(g) | np.isinf(w))):
        v = float(g[stand_in][0])
        return [say("a large finite number ({v}) where {inf} belongs: a stand-in such as -1e9 or np.finfo(float).min "
                    "is not infinity; use {inf} itself", v=f"{v:.4g}", inf="-np.inf" if v < 0 else "np.inf")]
    bad = ~np.isfinite(g) & np.isfinite(w)
    if bad.any():
        return [f"{int(bad.sum())} values are nan or inf where finite values were expected "
                f"(the first at {tuple(int(i) for i in np.argwhere(bad)[0])})"]
    if w.size and bool(np.all(np.abs(g) <= ATOL)):
        return ["every value is 0 (an all-zero result). Zeros come from a factor that is 0 (a zero mask, or a size "
                "minus one where the size is 1), a sum never added to, or an array left at its np.zeros start"]
    if w.size and bool(np.any(np.abs(w) > ATOL)) and close(g, -w):
        return ["the sign is flipped: every value is minus the expected one (a subtraction the wrong way "
                "round?)"]
    found = (rounded_form(g, w) if w.size > 1 else "") or _scaled(g, w, labels, factor)  # one number rounded: chance
    if found:
        return [found]
    for test in (_shifted, _swapped, _permuted, _reduced, _unnormalised, _flat_along):
        found = test(g, w, labels)
        if found:
            return [found]
    return []


def _flat_along(g, w, labels) -> str:
    """The result the same at every index of an axis along which the expected values change (a term of
    that index missing, or rounded to one value: 2j // d_k is 0 for every pair j)."""
    for ax, label in enumerate(labels):
        def first(a):
            return np.broadcast_to(a.take([0], axis=ax), a.shape)
        if w.shape[ax] > 1 and not close(w, first(w)) and close(g, first(g)):
            return say("the values do not change along the {label} axis (axis {ax}), where the expected ones "
                       "do: is a term of that index missing, or rounded to one value for every index (an integer "
                       "division?)", label=label, ax=ax)
    return ""


def _two_values_swapped(g, w) -> str:
    """A result of two values (a mask: True/False, 1/0, 0/-inf) with each one where the other belongs."""
    kinds = np.unique(w)
    if w.size < 2 or len(kinds) != 2:
        return ""
    a, b = kinds
    if not bool(np.all(np.where(w == a, g == b, g == a))):
        return ""
    def text(v):
        return str(bool(v)) if w.dtype == np.bool_ else str(int(v)) if float(v).is_integer() else str(float(v))
    return say("every {a} is {b} and every {b} is {a}: the two values swapped everywhere (a mask's polarity "
               "reversed: which value means may attend?)", a=text(a), b=text(b))


def ratio(g, w) -> float:
    """The c with g = c * w (0.0 when there is none)."""
    ww = float(np.vdot(w, w)) if w.size else 0.0
    c = float(np.vdot(g, w)) / ww if ww else 0.0
    return c if c and np.isfinite(c) and not np.isclose(c, 1) and close(g, c * w) else 0.0


_ROUNDINGS = (("rounded down (int(), // or math.isqrt)", np.floor), ("rounded to the nearest (round())", np.round),
              ("rounded up (math.ceil)", np.ceil))


def rounding_of(g, w) -> str:
    """How the expected real values ``w`` were made the whole numbers ``g`` ('rounded down (int(), ...)', ...), or
    '' when they were not; a result of only 0 and 1 is not read as a rounding (for a ratio, too often a coincidence)."""
    g, w = np.asarray(g), np.asarray(w)
    if not w.size or w.dtype.kind not in "iuf" or g.shape != w.shape or np.array_equal(w, np.round(w)):
        return ""
    return next((how for how, f in _ROUNDINGS if np.array_equal(g, f(w)) and np.any(np.abs(f(w)) > 1)), "")


def rounded_form(g, w) -> str:
    """The expected real values made whole numbers, or rounded to a few decimals, said in a line: '' otherwise."""
    how = rounding_of(g, w)
    if how:
        said = {_ROUNDINGS[0][0]: lambda: say("rounded down (int(), // or math.isqrt)"),  # literal: the catalogue
                _ROUNDINGS[1][0]: lambda: say("rounded to the nearest (round())"),      # extracts each one
                _ROUNDINGS[2][0]: lambda: say("rounded up (math.ceil)")}[how]()
        return say("every value is the expected one {how}: the fraction is lost", how=said)
    g, w = np.asarray(g), np.asarray(w)
    for digits in (1, 2, 3, 4):  # round(x, 2): a printout's rounding kept in the result
        if w.dtype.kind == "f" and g.shape == w.shape and np.allclose(g, np.round(w, digits), rtol=0, atol=1e-12) \
                and not np.allclose(g, w):
            return say("every value is the expected one rounded to {n} decimals (round(x, {n})): return the full "
                       "number, and round only what you print", n=digits)
    return say("every value is the expected one at float16 precision (about 3 significant digits): is a step cast to "
               "np.float16? Compute in the inputs' dtype") if _half_precision(g, w) else ""


def _half_precision(g, w) -> bool:
    """``g`` holds only float16 numbers, within float16's rounding of ``w`` (which does not)."""
    if g.dtype.kind != "f" or w.dtype.kind != "f" or g.shape != w.shape or not g.size or not np.all(np.isfinite(g)):
        return False
    def half(a):
        return a.astype(np.float16).astype(a.dtype)
    with np.errstate(all="ignore"):
        return bool(np.array_equal(half(g), g) and not np.array_equal(half(w), w)
                    and np.allclose(g, w, rtol=2e-3, atol=1e-4) and not np.allclose(g, w))


def _scaled(g, w, labels, factor=None) -> str:
    c = ratio(num(g), num(w))
    if not c or f"{c:.4g}" == "1":  # "1 times the expected one" says nothing: the shift or the count says more
        return ""
    named = factor.name(c) if factor is not None else ""
    if named:
        return f"every value is {named} times the expected one"
    return f"every value is {c:.4g} times the expected one (got / expected = {c:.4g})"


def _shifted(g, w, labels) -> str:
    d = float(np.mean(g - w))
    if w.ndim and close(g, w + d):
        return f"every value is shifted by {d:+.4g}"
    return ""


def _swapped(g, w, labels) -> str:
    for a, b in combinations(range(w.ndim), 2):
        if w.shape[a] == w.shape[b] and close(g, np.swapaxes(w, a, b)):
            return f"transposed: the {labels[a]} and {labels[b]} axes ({a} and {b}) are swapped"
    return ""


def _permuted(g, w, labels) -> str:
    for ax in range(w.ndim):
        gs, ws = np.moveaxis(g, ax, 0), np.moveaxis(w, ax, 0)
        perm = [next((j for j in range(len(ws)) if close(gs[i], ws[j])), None) for i in range(len(gs))]
        if None not in perm and sorted(perm) == list(range(len(ws))) and perm != list(range(len(ws))):
            return (f"the {plural(labels[ax])} (axis {ax}) are reordered (a permutation): yours in order "
                    f"{index_list(perm)} are the expected ones")
    return ""


def plural(label) -> str:
    return label[:-1] + "ies" if label.endswith("y") else label + "s"


def _reduced(g, w, labels) -> str:
    for ax in range(w.ndim):
        for how, f in (("averaged", np.mean), ("summed", np.sum)):
            if w.shape[ax] > 1 and close(g, np.broadcast_to(f(w, axis=ax, keepdims=True), w.shape)):
                return f"each value is the expected values {how} over the {labels[ax]} axis (axis {ax})"
    return ""


def _unnormalised(g, w, labels) -> str:
    """Weights whose rows summed to 1 (or 0, all masked) and no longer do."""
    if w.ndim == 0 or w.min() < 0 or not np.all(np.isclose(w.sum(-1), 1) | np.isclose(w.sum(-1), 0)) or \
            np.all(np.isin(w, (0, 1))):  # a 0/1 selection matrix is not a softmax's weights
        return ""
    sums = g.sum(-1)[~np.isclose(g.sum(-1), w.sum(-1))]
    return (f"the sums over the {labels[-1]} axis are {sums.min():.6g}..{sums.max():.6g} where they "
            "should be 1 (a softmax over the wrong axis, or weights changed after it?)") if sums.size else ""


def _how_shapes_differ(g, w, labels) -> list:
    """Axis by axis, how a result of another shape relates to the expected shape."""
    if g.size == w.size and close(g.reshape(w.shape), w):
        dropped = [a for a in range(w.ndim) if w.shape[a] == 1 and g.shape == w.shape[:a] + w.shape[a + 1:]]
        if dropped:
            return [say("the right values with the {axis} axis of length 1 left out (a squeeze, an index [..., 0], or "
                        "a branch for a size of 1): keep it, {want}", axis=labels[dropped[0]], want=w.shape)]
        extra = [a for a in range(g.ndim) if g.shape[a] == 1 and w.shape == g.shape[:a] + g.shape[a + 1:]]
        if extra:
            return [say("the right values with an extra axis of length 1 at axis {a} (np.stack of one part, a [None], "
                        "a reshape with a 1): leave it out, {want}", a=extra[0], want=w.shape)]
        merged = [a for a in range(w.ndim - 1) if g.shape == w.shape[:a] + (w.shape[a] * w.shape[a + 1],) + w.shape[a + 2:]]
        if merged:
            a = merged[0]
            return [say("the right values with axes {a} and {b} merged into one axis of length {n}: keep them as "
                        "two axes, {want}", a=labels[a], b=labels[a + 1], n=g.shape[a], want=w.shape)]
        split = [a for a in range(g.ndim - 1) if w.shape == g.shape[:a] + (g.shape[a] * g.shape[a + 1],) + g.shape[a + 2:]]
        if split:
            return [say("the right values with the {axis} axis split in two, {got}: parts stacked on a new axis "
                        "(np.stack) where they belong joined along that axis (np.concatenate), {want}",
                        axis=labels[split[0]], got=g.shape, want=w.shape)]
        return [f"the right values in the wrong shape: expected {w.shape}, got {g.shape}; reshape "
                f"(e.g. with .reshape or [:, None] axes)"]
    reduced = _reduced_over(g, w) if g.ndim == w.ndim - 1 else _reduced_kept(g, w) if g.ndim == w.ndim else None
    if reduced:
        label = labels[reduced[1]]
        return [say("your result is the expected one {how} over {axis}: that axis should stay, not be reduced",
                    how=say(reduced[0]), axis=label if label.startswith("axis") else say("the {name} axis", name=label))]
    if g.ndim == w.ndim and sorted(g.shape) == sorted(w.shape):
        for perm in _axis_orders(w.shape, g.shape):
            if close(np.transpose(w, perm), g):
                moved = [a for a in range(w.ndim) if perm[a] != a]
                joined = any(w.shape[a] == 1 or g.shape[a] == 1 for a in moved)  # a length-1 axis moved: or joined
                return [f"the right values with the axes in the order {perm}: a transpose too many or too few" + (
                    say(", or the parts joined along another axis (np.concatenate's axis chosen by a length that "
                        "equals another here)") if joined else "")]
    if g.ndim != w.ndim:
        return [f"{g.ndim} axes where {w.ndim} were expected ({g.shape} instead of {w.shape})"]
    return [f"axis {a} ({labels[a]}) has length {n}, expected {m}" + (f" ({n / m:.3g} times)" if m else "")
            for a, (n, m) in enumerate(zip(g.shape, w.shape)) if n != m]


def _reduced_over(g, w):
    """(how, axis) when g is w summed, averaged, maxed or taken at its first or last entry over one axis."""
    hows = (("summed", np.sum), ("averaged", np.mean), ("maxed", np.max), ("at its first entry", lambda x, axis:
            np.take(x, 0, axis)), ("at its last entry", lambda x, axis: np.take(x, -1, axis)))
    for axis in range(w.ndim):
        if w.shape[axis] > 1 and w.shape[:axis] + w.shape[axis + 1:] == g.shape:
            for how, fn in hows:
                if close(fn(w, axis=axis), g):
                    return how, axis
    return None


def _reduced_kept(g, w):
    """(how, axis) when g is w reduced over one axis, kept with length 1 (keepdims=True, or a sum over the batch)."""
    for axis in range(w.ndim):
        if g.shape[axis] == 1 < w.shape[axis] and g.shape[:axis] + g.shape[axis + 1:] == w.shape[:axis] + w.shape[axis + 1:]:
            found = _reduced_over(np.squeeze(g, axis), w)
            if found and found[1] == axis:
                return found
    return None


def _axis_orders(want_shape, got_shape):
    return [p for p in permutations(range(len(want_shape))) if tuple(want_shape[i] for i in p) == got_shape]



protect(globals())
