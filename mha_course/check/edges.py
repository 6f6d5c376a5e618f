"""Edge cases derived from an exercise's declared sizes: each size named in ``edges`` made 1.

An exercise that declares ``edges=("T", "S")`` gets, after its own cases, one more case per size
that none of its cases has at 1: a case cut to that size 1 (every array axis that the reference's
docstring shape line names with the symbol, sliced to its first entry; a whole-number argument of
that name set to 1), taken from the case that gives the most biases (the first of those), on which
the reference runs and gives a non-empty result. A branch a learner wrote for one query, one key,
one batch item or one head is then tried, whatever the exercise's own cases are.

>>> import numpy as np
>>> from mha_course.check.engine import Case, Exercise
>>> def ref(Q, K):
...     '''Q (..., T, d), K (..., S, d) -> scores (..., T, S).'''
...     return Q @ np.swapaxes(K, -1, -2)
>>> ex = Exercise("toy", ref, lambda: [Case((np.ones((3, 2)), np.ones((4, 2))))], register=False)
>>> [(c.note, [a.shape for a in c.args]) for c in edge_cases(ex, ex.cases(), ("T", "S"))]
[('T = 1: case 1 cut to one query', [(1, 2), (4, 2)]), ('S = 1: case 1 cut to one key', [(3, 2), (1, 2)])]
"""
from __future__ import annotations

from .language import say
from .sandbox import arg_names, np, protect

__all__ = ["edge_cases", "cut_to_one", "given_fields"]


def _word(symbol) -> str:
    """What one of ``symbol`` is, in the course's words (the symbol itself for another)."""
    words = {"T": say("query"), "S": say("key"), "B": say("batch item"), "h": say("head"), "c": say("chunk")}
    return words.get(symbol, symbol)


def cut_to_one(reference, args, symbol):
    """``args`` with every axis the docstring names ``symbol`` cut to its first entry and an int argument
    named ``symbol`` set to 1; None when nothing has that size or it is 1 already."""
    out, changed = [], False
    for name, v, axes in _axes_of(reference, args, symbol):
        if axes and any(v.shape[a] > 1 for a in axes):
            for a in axes:
                v = np.take(v, [0], axis=a)
            changed = True
        elif not axes and name == symbol and isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 1:
            v, changed = 1, True
        out.append(v)
    return tuple(out) if changed else None


def _axes_of(reference, args, symbol) -> list:
    """[(argument name, value, the axes the docstring's shape line names ``symbol``)] for every argument."""
    from .derive import shape_line
    dims_of, _ = shape_line(reference)
    out = []
    for name, v in zip(arg_names(reference, args), args):
        dims = [d for d in dims_of.get(name, []) if d != "..."]
        ok = isinstance(v, np.ndarray) and 0 < len(dims) <= v.ndim
        out.append((name, v, [v.ndim - len(dims) + j for j, d in enumerate(dims) if d == symbol] if ok else []))
    return out


def _has_one(reference, args, symbol) -> bool:
    """Some argument already has ``symbol`` = 1 (an axis of length 1, or an int argument of that name)."""
    return any((axes and all(v.shape[a] == 1 for a in axes)) or (not axes and name == symbol and
               isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v == 1)
               for name, v, axes in _axes_of(reference, args, symbol))


def given_fields(case) -> int:
    """How much of a parameters argument a case gives: its fields (the biases) that are not None."""
    args = tuple(getattr(case, "args", case))
    return sum(getattr(a, f) is not None for a in args if hasattr(a, "_fields") for f in a._fields)


def edge_cases(spec, cases, edges) -> list:
    """One Case per symbol of ``edges`` that no case has at 1: a case cut to that size 1 (the one with the most
    biases first) on which the reference runs and gives a non-empty result."""
    from .engine import Case
    out = []
    for symbol in edges:
        if any(_has_one(spec.reference, tuple(getattr(c, "args", c)), symbol) for c in cases):
            continue  # the exercise's own cases have it
        for k, case in sorted(enumerate(cases, 1), key=lambda kc: -given_fields(kc[1])):  # the case with the most biases first
            args = cut_to_one(spec.reference, tuple(getattr(case, "args", case)), symbol)
            if args is None:
                continue
            try:
                value = spec.reference(*args)
            except Exception:  # noqa: BLE001 -- not a valid input of this exercise: try the next case
                continue
            if any(isinstance(v, np.ndarray) and v.size == 0 for v in (value if isinstance(value, tuple) else (value,))):
                continue  # an empty result: an index argument past the cut size (head i of one head)
            out.append(Case(args, say("{symbol} = 1: case {k} cut to one {what}", symbol=symbol, k=k,
                                      what=_word(symbol))))
            break
    return out


protect(globals())
