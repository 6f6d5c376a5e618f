"""Probes: inputs derived from an exercise's cases that a right function treats like any other input.

Once every case matches, the checker tries the fullest case (the one that gives the most biases)
changed in one way at a time, each a valid input on which the reference runs and gives a finite,
non-empty result:

- each size of the reference's shape line (and each whole-number argument) cut to 1;
- each optional bias given alone, and each left out alone;
- each array argument all zeros;
- the float arrays as integers (the same kind of numbers, rounded);
- the arrays in column-major memory order (the same values, other strides);
- the first float array 1000 times larger;
- the integer arrays shifted by 40000, and whole-number lengths 40000 longer (kept small);
- every whole-number size 10**6, then 10**17 times larger (for a function that returns numbers);
- the same call a second time, after the first result was changed in place.

The first probe whose result differs is said, with the likely causes of that kind of difference
(a branch for a size of 1, an array made with an integer input's dtype, a narrow dtype, a cache).
Probes are not cases: "all n cases match" counts the exercise's own cases; a probe only refuses.

>>> import numpy as np
>>> from mha_course.check.engine import Case, Exercise
>>> def ref(x):
...     '''x (..., n) -> (..., n).'''
...     e = np.exp(x - x.max(axis=-1, keepdims=True))
...     return e / e.sum(axis=-1, keepdims=True)
>>> ex = Exercise("toy", ref, lambda: [Case((np.linspace(-2, 2, 6).reshape(2, 3),))], register=False)
>>> [p.what for p in probes(ex)]
['n = 1', 'x all zeros', 'integer x', 'x in column-major memory order', 'x × 1000']
"""
from __future__ import annotations

import copy
from typing import NamedTuple

from .compare import NOT_DIAGNOSED, Outcome, compare, identical, states_int
from .edges import cut_to_one, given_fields
from .language import say
from .sandbox import arg_names, np, pristine_numpy, protect, quiet_numpy

__all__ = ["Probe", "probes", "first_failure", "SHIFT", "HUGE", "LARGE"]

SHIFT = 40000  # added to integer arrays (ids, positions) and to lengths: past int16, a max_len of 5000, float16
HUGE = (10 ** 6, 10 ** 17)  # whole-number sizes times these: their products past 2**63 (int64), each past 2**53
LARGE = 1000.0  # the first float array times this: exp of unshifted scores overflows, -1e4 no longer masks
MAX_SIZE = 4_000_000  # a probe's result holds at most this many numbers (a length probe is skipped beyond it)


class Probe(NamedTuple):
    """One derived input: its arguments, the reference's value, what was changed, and what such a difference means."""
    args: tuple
    want: object
    what: str
    hint: str
    values_only: bool = False  # integer inputs: a float result of the same values is right


def probes(spec) -> list:
    """The exercise's probes (memoised on ``spec``): see the module docstring."""
    return spec.memoised("probes", lambda: _build(spec))


def _build(spec) -> list:
    expected = spec.expected()
    if not expected:
        return []
    base = max((c.args for c, _ in expected), key=lambda a: given_fields(a))
    keeps = _relations([c.args for c, _ in expected])
    out = []
    for make in (_at_one, _each_alone, _zeros, _integer, _other_order, _large, _shifted, _huge):
        for args, what, hint, values_only in make(spec, base):
            if any(_same_input(args, c.args) for c, _ in expected) or any(_same_input(args, p.args) for p in out) \
                    or not keeps(args):
                continue
            want = _valid(spec.reference, args)
            if want is not _INVALID:
                out.append(Probe(args, want, what, hint, values_only))
    return out


_INVALID = object()


def _sizes(args) -> dict:
    """{(argument, axis from the end) or (argument,): size} of one case's whole numbers and array axes."""
    out = {}
    for i, v in enumerate(args):
        if _whole(v):
            out[(i,)] = int(v)
        elif isinstance(v, np.ndarray):
            out.update({(i, k - v.ndim): n for k, n in enumerate(v.shape)})
    return out


def _relations(cases):
    """What every case of the exercise keeps, as a test of a probe's arguments: each size a multiple of its
    common divisor over the cases (d_model even), each whole-number argument a multiple of another where every
    case has it so (h of h_kv), and arrays of one shape in every case of one shape still."""
    import math
    sizes = [_sizes(a) for a in cases]
    keys = set.intersection(*(set(s) for s in sizes))
    divisor = {k: math.gcd(*(s[k] for s in sizes)) for k in keys}
    whole = [k for k in keys if len(k) == 1]
    multiple = [(a, b) for a in whole for b in whole if a != b and all(s[b] and s[a] % s[b] == 0 for s in sizes)
                and any(s[b] > 1 for s in sizes)]
    n = min(len(a) for a in cases)
    shape = (lambda v: getattr(v, "shape", None))
    twins = [(i, j) for i in range(n) for j in range(i + 1, n) if all(
        shape(a[i]) is not None and shape(a[i]) == shape(a[j]) for a in cases)]

    def keeps(args) -> bool:
        mine = _sizes(args)
        return (all(mine.get(k, 0) % d == 0 for k, d in divisor.items() if d > 1 and k in mine) and
                all(mine[b] and mine[a] % mine[b] == 0 for a, b in multiple if a in mine and b in mine) and
                all(shape(args[i]) == shape(args[j]) for i, j in twins))
    return keeps


def _same_input(a, b) -> bool:
    """The same values in the same memory order (a column-major copy is another input)."""
    layout = (lambda args: [v.flags.c_contiguous for v in args if isinstance(v, np.ndarray)])
    return identical(a, b) and layout(a) == layout(b)


def _valid(reference, args):
    """The reference's value on ``args``, or _INVALID where it raises, is empty, not finite or too big."""
    try:
        with pristine_numpy(), quiet_numpy():
            value = reference(*copy.deepcopy(args))
    except Exception:  # noqa: BLE001 -- not a valid input of this exercise
        return _INVALID
    for v in value if isinstance(value, tuple) else (value,):
        if isinstance(v, (np.ndarray, np.number, int, float)) and not isinstance(v, bool):
            a = np.asarray(v)
            if a.size == 0 or a.size > MAX_SIZE or (a.dtype.kind in "fc" and not np.all(np.isfinite(a))):
                return _INVALID
    return value


def _names(spec, args) -> list:
    return arg_names(spec.reference, args)


def _at_one(spec, base):
    """Each size of the shape line, and each whole-number argument, at 1."""
    from .derive import shape_line
    dims_of, _ = shape_line(spec.reference)
    symbols = [d for dims in dims_of.values() for d in dims if d.isidentifier()]
    symbols += [n for n, v in zip(_names(spec, base), base) if _whole(v)]
    for symbol in dict.fromkeys(symbols):
        args = cut_to_one(spec.reference, base, symbol)
        if args is not None:
            yield args, say("{symbol} = 1", symbol=symbol), say(
                "Right for every other {symbol}: a special case for {symbol} = 1 (an if-branch, a squeeze, an index "
                "that drops the axis) gives this. Fix: one code path for every {symbol}", symbol=symbol), False


def _whole(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _slots(spec, base) -> list:
    """[(label, read, write)] for every optional input of the case: a parameters field or an argument whose
    default is None, given (not None) in ``base``."""
    import inspect
    try:
        params = inspect.signature(spec.reference).parameters
    except (TypeError, ValueError):
        params = {}
    out = []
    for i, (name, v) in enumerate(zip(_names(spec, base), base)):
        if hasattr(v, "_fields"):
            out += [(f, (lambda a, i=i, f=f: getattr(a[i], f)),
                     (lambda a, x, i=i, f=f: a[:i] + (a[i]._replace(**{f: x}),) + a[i + 1:]))
                    for f in v._fields if getattr(v, f) is not None]
        elif v is not None and name in params and params[name].default is None:
            out.append((name, (lambda a, i=i: a[i]), (lambda a, x, i=i: a[:i] + (x,) + a[i + 1:])))
    return out


def _each_alone(spec, base):
    """Each optional input left out alone, and each given alone (the others that may be None left out)."""
    slots = _slots(spec, base)
    optional = [s for s in slots if _valid(spec.reference, s[2](base, None)) is not _INVALID]
    hint = say("Each optional input is given or left out on its own: does one test (b_q is None) decide for all "
               "of them? Fix: test each one where it is used (if b_k is not None: K = K + b_k)")
    for label, _, write in optional:
        yield write(base, None), say("{name} left out (None), the others given", name=label), hint, False
    if len(optional) > 2:
        for label, _, _ in optional:
            args = base
            for other, _, write in optional:
                args = write(args, None) if other != label else args
            yield args, say("only {name} given of the optional inputs", name=label), hint, False


def _arrays(spec, base, kinds="f", fields=True):
    """[(label, read, write)] for every array argument of ``base`` of a dtype kind in ``kinds``, then (``fields``)
    every array field of a parameters argument and optional array argument not listed already."""
    out = []
    for i, v in enumerate(base):
        if isinstance(v, np.ndarray) and v.dtype.kind in kinds and v.size:
            out.append((_names(spec, base)[i], (lambda a, i=i: a[i]), (lambda a, x, i=i: a[:i] + (x,) + a[i + 1:])))
    listed = {label for label, _, _ in out}
    return out + [s for s in (_slots(spec, base) if fields else []) if s[0] not in listed and
                  isinstance(s[1](base), np.ndarray) and s[1](base).dtype.kind in kinds and s[1](base).size]


def _zeros(spec, base):
    """Each float array all zeros (an ordinary value: not "missing" or "padding")."""
    for label, read, write in _arrays(spec, base):
        yield write(base, np.zeros_like(read(base))), say("{name} all zeros", name=label), say(
            "Zeros are ordinary numbers here: is an array of zeros taken for \"missing\" or \"padding\" (if not "
            "x.any(), a zero bias dropped)? Fix: test for None or for the shape, never for the values"), False


def _integer(spec, base):
    """The float arrays that are not probabilities (values beyond [0, 1]) as integers."""
    changed, args = [], base
    for label, read, write in _arrays(spec, base, fields=False):
        v = read(base)
        if v.min() < 0 or v.max() > 1:
            args, changed = write(args, np.rint(3 * v).astype(np.int64)), changed + [label]
    if changed:
        yield args, say("integer {names}", names=", ".join(changed)), say(
            "Integer inputs give the same numbers as floats of those values: is an array made with the input's "
            "dtype (np.empty_like, np.zeros_like, .astype(x.dtype)) or is an integer array changed in place (/=)? "
            "Fix: compute into a new float array (the expression itself)"), True


def _other_order(spec, base):
    """The arrays of two axes or more with the same values in column-major (Fortran) memory order."""
    args, changed = base, []
    for label, read, write in _arrays(spec, base, "fiub", fields=False):
        if read(base).ndim >= 2:
            args, changed = write(args, np.asfortranarray(read(base))), changed + [label]
    if changed:
        yield args, say("{names} in column-major memory order", names=", ".join(changed)), say(
            "The same values stored with other strides give other numbers: are strides or flat offsets computed by "
            "hand (np.lib.stride_tricks.as_strided, x.data)? Fix: index, reshape and transpose the array itself"), False


def _large(spec, base):
    """The first float array that is not probabilities, LARGE times larger."""
    for label, read, write in _arrays(spec, base, fields=False)[:1]:
        v = read(base)
        if v.min() < 0 or v.max() > 1:
            yield write(base, v * LARGE), say("{name} × {k}", name=label, k=f"{LARGE:g}"), say(
                "Values this large: is exp taken of unshifted values (it overflows to inf), a finite number standing "
                "in for -inf (-1e4 no longer masks), a narrow dtype (float16, float32), or a constant (an eps, a "
                "clip) that matters at this scale? Fix: subtract the max before exp, mask with -inf, stay in "
                "the inputs' dtype"), False


def _shifted(spec, base):
    """The integer arrays (ids, positions, tokens) shifted by SHIFT, then each whole-number length SHIFT longer."""
    hint = say("Integers this large: does a narrow dtype (int8, int16, float16) wrap or round, or a table of a fixed "
               "length (max_len = 5000) run out? Fix: keep the inputs' integers and compute for the lengths asked")
    arrays = _arrays(spec, base, "iu", fields=False)
    if arrays:
        args = base
        for _, read, write in arrays:
            args = write(args, read(base) + SHIFT)
        yield args, say("{names} + {k}", names=", ".join(s[0] for s in arrays), k=SHIFT), hint, False
    for i, (name, v) in enumerate(zip(_names(spec, base), base)):
        if _whole(v) and v >= 1 and _grows_slowly(spec, base, i):
            yield base[:i] + (v + SHIFT,) + base[i + 1:], say("{name} = {n}", name=name, n=v + SHIFT), hint, False


def _grows_slowly(spec, base, i) -> bool:
    """The result at base[i] + SHIFT holds at most MAX_SIZE numbers, judged from its growth from base[i] to base[i] + 1."""
    size = (lambda value: sum(np.asarray(v).size for v in (value if isinstance(value, tuple) else (value,)))
            if value is not _INVALID else None)
    n0, n1 = size(_valid(spec.reference, base)), size(_valid(spec.reference, base[:i] + (base[i] + 1,) + base[i + 1:]))
    if not n0 or not n1 or n1 <= n0:
        return False  # the result does not grow with it (a count, an index): the huge probe covers numbers
    v = base[i]
    power = np.log(n1 / n0) / np.log((v + 1) / v)
    return n0 * ((v + SHIFT) / v) ** power <= MAX_SIZE


def _huge(spec, base):
    """For a function that returns numbers: every whole-number size HUGE times larger (each factor in turn), else
    each one alone."""
    value = _valid(spec.reference, base)
    numbers = value if isinstance(value, tuple) else (value,)
    if not (all(isinstance(v, (int, float, np.number)) for v in numbers) and any(_whole(v) for v in base)):
        return
    hint = say("Numbers this large: fixed-width integers (np.prod, np.square, an int64 or int32 array) overflow, and a "
               "float division (int(a / b), np.ceil(a / b)) rounds past 2**53. Fix: Python ints with // (exact at "
               "any size)")
    for k in HUGE:
        scaled = tuple(v * k if _whole(v) else v for v in base)
        if _valid(spec.reference, scaled) is not _INVALID:
            yield scaled, say("every size × {k}", k=_power(k)), hint, False
            continue
        for i, (name, v) in enumerate(zip(_names(spec, base), base)):
            if _whole(v):
                yield base[:i] + (v * k,) + base[i + 1:], say("{name} × {k}", name=name, k=_power(k)), hint, False


def _power(k) -> str:
    return f"10**{len(str(k)) - 1}"


def _changed_in_place(value):
    """``value`` with each writeable array in it changed in place (+1, or inverted for a mask)."""
    for v in value if isinstance(value, (tuple, list)) else (value,):
        if isinstance(v, np.ndarray) and v.flags.writeable and v.size:
            with quiet_numpy():
                if v.dtype == np.bool_:
                    np.logical_not(v, out=v)
                elif v.dtype.kind in "iufc":
                    v += 1


def first_failure(spec, fn, call, describe) -> list:
    """The feedback lines of the first probe on which ``fn`` differs from the reference ([] if none does);
    ``call(args) -> Outcome`` runs the learner's function, ``describe(args)`` says the call."""
    for p in probes(spec):
        problem = _problem(spec, call(p.args), p)
        if problem:
            return _said(spec, p.what, p.hint, describe(p.args), problem)
    expected = spec.expected()
    case, want = max(expected, key=lambda cw: given_fields(cw[0].args))
    first = call(case.args)
    if first.error is None and not first.lines:
        _changed_in_place(first.value)
        problem = _problem(spec, call(case.args), Probe(case.args, want, "", ""))
        if problem:
            return _said(spec, say("the same call again, after its first result was changed in place"), say(
                "A second call gives other numbers: does the function keep its result between calls (a cache "
                "returned itself, or changed in place)? Fix: return a new array on every call"),
                describe(case.args), problem)
    return []


def _problem(spec, got: Outcome, p: Probe) -> list:
    if p.values_only and got.error is not None:
        return []  # integer inputs only refuse wrong values: torch does not promote them, and that is not the mistake
    if got.lines or got.error is not None:
        return list(got.lines) or [repr(got.error)]
    value, want = got.value, p.want
    if p.values_only and isinstance(want, np.ndarray) and want.dtype.kind in "iu":
        want = want.astype(float)
        value = np.asarray(value, dtype=float) if isinstance(value, np.ndarray) and value.dtype.kind in "iuf" else value
    return compare(value, want, spec.outputs, spec.strict_types or states_int(spec.reference))


def _said(spec, what, hint, call_text, problem) -> list:
    n = len(spec.expected())
    lines = [line[len(NOT_DIAGNOSED):] if line.startswith(NOT_DIAGNOSED) else line for line in problem][:3]
    return [say("✘ {name}: all {n} cases match, but not {what}", name=spec.name, n=n, what=what),
            say("  called {call}", call=call_text)] + ["  " + line for line in lines] + ["  " + hint]


protect(globals())
