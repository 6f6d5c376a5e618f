"""Probes: inputs derived from an exercise's cases that a right function treats like any other input.

Once every case matches, the checker tries the fullest case (the most biases given, the most arrays
that are not empty, the most flags set) of each choice of its strings and flags, changed in one way at a time (check/probe_inputs.py): each
size at its smallest, each optional bias alone, zeros, integer, negated, column-major and larger
copies, every mask pattern, ids and positions far apart, an extra leading axis, tied arguments,
strings built at run time, longer lengths and huge sizes; then the same call a second time, after
the first result was changed in place. A probe is kept only where the reference runs on it and gives
a finite, non-empty result, and where the relations every case keeps still hold (d_model even, h a
divisor of d_model, K and V of one shape): an input outside what the exercise allows is never tried.

The first probe whose result differs is said, with what that kind of difference means (a branch for
a size of 1, an array made with an integer input's dtype, a narrow dtype, a cache). Probes are not
cases: "all n cases match" counts the exercise's own cases; a probe only refuses.

>>> import numpy as np
>>> from mha_course.check.engine import Case, Exercise
>>> def ref(x):
...     '''x (..., n) -> (..., n).'''
...     e = np.exp(x - x.max(axis=-1, keepdims=True))
...     return e / e.sum(axis=-1, keepdims=True)
>>> ex = Exercise("toy", ref, lambda: [Case((np.linspace(-2, 2, 6).reshape(2, 3),))], register=False)
>>> [p.what for p in probes(ex)]  # doctest: +NORMALIZE_WHITESPACE
['n = 1', 'x all zeros', 'integer x', 'x in column-major memory order', 'x negated', 'x × 1000',
 'x × 1e-6', 'n = 64 (the entries repeated)']
"""
from __future__ import annotations

from typing import NamedTuple

from .compare import NOT_DIAGNOSED, Outcome, identical
from .edges import given_fields
from .language import say
from .probe_inputs import BUILDERS, INVALID, Given, relations, valid
from .sandbox import np, protect, quiet_numpy

__all__ = ["Probe", "probes", "first_failure"]


class Probe(NamedTuple):
    """One derived input: its arguments, the reference's value, what was changed, and what such a difference means."""
    args: tuple
    want: object
    what: str
    hint: str
    lenient: bool = False  # only wrong values refuse: a float result of the same values and an error are accepted
    relative: bool = False  # compared relative to the expected values' size (tiny results: the tolerance is absolute)


def probes(spec) -> list:
    """The exercise's probes (memoised on ``spec``): see the module docstring."""
    return spec.memoised("probes", lambda: _build(spec))


def _fullest(args) -> tuple:
    """How full a case is: its biases given, its arrays that are not empty, its flags set, its axes."""
    return (given_fields(args), sum(isinstance(v, np.ndarray) and v.size > 0 for v in args),
            sum(v is True for v in args), sum(np.ndim(v) for v in args if isinstance(v, np.ndarray)))


def _bases(cases) -> list:
    """The fullest case for each choice of the exercise's strings and flags (a convention, causal=True): the cases
    the probes change."""
    choice = (lambda args: tuple(v for v in args if isinstance(v, (str, bool, np.bool_))))
    return [max((a for a in cases if choice(a) == c), key=_fullest) for c in dict.fromkeys(map(choice, cases))]


def _build(spec) -> list:
    cases = [c.args for c, _ in spec.expected()]
    if not cases:
        return []
    keeps, out = relations(cases), []
    finite = not any(_has_inf(want) for _, want in spec.expected())
    for build, given in ((b, Given(spec.reference, base, cases)) for base in _bases(cases) for b in BUILDERS):
        for args, what, hint, lenient, *relative in build(given):
            if any(_same_input(args, c) for c in cases) or any(_same_input(args, p.args) for p in out) \
                    or not keeps(args):
                continue
            want = valid(spec.reference, args, finite)
            if want is not INVALID:
                out.append(Probe(args, want, what, hint, lenient, bool(relative and relative[0])))
    return out


def _has_inf(value) -> bool:
    return any(isinstance(v, np.ndarray) and v.dtype.kind == "f" and bool(np.isinf(v).any())
               for v in (value if isinstance(value, tuple) else (value,)))


def _same_input(a, b) -> bool:
    """The same values in the same memory order (a column-major copy is another input), the same arrays tied, the
    same strings interned."""
    import sys
    layout = (lambda args: [(v.flags.c_contiguous, [w is v for w in args]) for v in args if isinstance(v, np.ndarray)]
              + [sys.intern(v) is v for v in args if isinstance(v, str)]  # a string built at run time is another
              + [type(v) for v in args if isinstance(v, (bool, np.bool_))])  # and np.True_ another flag than True
    return identical(a, b) and layout(a) == layout(b)


def _changed_in_place(value):
    """``value`` with each writeable array in it changed in place (+1, or inverted for a mask)."""
    for v in value if isinstance(value, (tuple, list)) else (value,):
        if isinstance(v, np.ndarray) and v.flags.writeable and v.size:
            with quiet_numpy():
                if v.dtype == np.bool_:
                    np.logical_not(v, out=v)
                elif v.dtype.kind in "iufc":
                    v += 1


def first_failure(spec, call, problem_of, describe) -> list:
    """The feedback lines of the first probe on which the learner's function differs from the reference ([] if
    none does). ``call(args)`` runs it (an Outcome, or None when it ran out of time: slow on that input is not
    wrong, and the probing ends there), ``problem_of(value, want)`` compares as the exercise's cases are
    compared, ``describe(args)`` says the call."""
    for p in probes(spec):
        got = call(p.args)
        if got is None:
            return []
        problem = _problem(got, p, problem_of)
        if problem:
            return _said(spec, p.what, p.hint, describe(p.args), problem)
    expected = spec.expected()
    case, want = max(expected, key=lambda cw: _fullest(cw[0].args))
    first = call(case.args)
    if first is not None and first.error is None and not first.lines:
        _changed_in_place(first.value)
        again = call(case.args)
        problem = [] if again is None else _problem(again, Probe(case.args, want, "", ""), problem_of)
        if problem:
            return _said(spec, say("the same call again, after its first result was changed in place"), say(
                "A second call gives other numbers: does the function keep its result between calls (a cache "
                "returned itself, or changed in place)? Fix: return a new array on every call"),
                describe(case.args), problem)
    return []


_RESOURCES = (MemoryError, OverflowError, RecursionError)  # a function that runs out of room is not wrong


def _casting(error) -> bool:
    """numpy refusing to write floats into an integer array in place (x /= 2 on an int x): the mistake itself."""
    return any(c.__name__ == "UFuncTypeError" for c in type(error).__mro__)


def _problem(got: Outcome, p: Probe, problem_of) -> list:
    if got.error is not None and (isinstance(got.error, _RESOURCES) or (p.lenient and not _casting(got.error))):
        return []  # refusing such an input (or torch not promoting integers) is not the mistake looked for
    if got.lines or got.error is not None:
        return list(got.lines) or [repr(got.error)]
    value, want = got.value, p.want
    if p.relative:
        value, want = _rescaled(value, want)
    if p.lenient and isinstance(want, np.ndarray) and want.dtype.kind in "iu":
        want = want.astype(float)
        value = np.asarray(value, dtype=float) if isinstance(value, np.ndarray) and value.dtype.kind in "iuf" else value
    return problem_of(value, want)


def _rescaled(value, want):
    """``value`` and ``want`` divided by the largest magnitude in ``want`` (each output of a tuple by its own)."""
    if isinstance(want, tuple) and isinstance(value, tuple) and len(value) == len(want):
        return tuple(zip(*(_rescaled(v, w) for v, w in zip(value, want))))
    w = np.asarray(want) if isinstance(want, (np.ndarray, float, np.floating)) else None
    if w is None or w.dtype.kind != "f" or not np.isfinite(w).all() or not np.abs(w).max() > 0:
        return value, want
    s = float(np.abs(w).max())
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        return value / s, want / s
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return float(value) / s, want / s
    return value, want  # another kind of value: compared as it is, and said as such


def _said(spec, what, hint, call_text, problem) -> list:
    n = len(spec.expected())
    lines = [line[len(NOT_DIAGNOSED):] if line.startswith(NOT_DIAGNOSED) else line for line in problem][:3]
    return [say("✘ {name}: all {n} cases match, but not {what}", name=spec.name, n=n, what=what),
            say("  called {call}", call=call_text)] + ["  " + line for line in lines] + ["  " + hint]


protect(globals())
