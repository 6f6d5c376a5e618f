"""Mutation testing of the checkers: every exercise's reference, mutated, given to its checker.

For each exercise of ``engine.catalogue()``: the reference's mutants (``check.mutants``, depth 1),
each run by the checker a learner calls (``mha_course.check.<name>``) as the learner's function.
A mutant the checker accepts must be *equivalent*: equal to the reference (at the checker's
tolerance, with the same types) on every case and on the extra inputs made from them (every
float array redrawn with other seeds, at its own scale), and listed in ``EQUIVALENT`` of
``tests/check/equivalent_mutants.py`` with the reason. ``python -m tests.check.mutation_run`` writes the
per-exercise table to ``tests/check/mutation_report.md``.
"""
from __future__ import annotations

import contextlib
import copy
import io
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import mha_course.check as check
from mha_course.check import engine, shape_exercise
from mha_course.check.mutants import mutants

REPORT = Path(__file__).with_name("mutation_report.md")
EXTRA_SEEDS = (1, 2, 3)


def exercises() -> dict:
    """{name: exercise} of every registered checker."""
    return engine.catalogue()


def checker(name):
    """The function a learner calls: ``check.<name>`` (it may probe more than the cases)."""
    return getattr(check, name, None) or engine.catalogue()[name].check


def cases_of(exercise) -> list:
    """The argument tuples of the exercise's cases (the derived edge cases too: what the checker runs)."""
    if isinstance(exercise, shape_exercise.ShapeExercise):
        return [tuple(s) for s in exercise.cases()]
    return [c.args for c, _ in exercise.expected()]


def _redrawn(value, rng):
    """``value`` with every float array (and float) redrawn at its scale; the rest kept."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.size:
        finite = value[np.isfinite(value)]
        scale = float(np.abs(finite).mean()) if finite.size else 1.0
        new = rng.normal(0, scale or 1.0, size=value.shape).astype(value.dtype)
        if finite.size and finite.min() >= 0:
            new = np.abs(new)
            if np.allclose(value.sum(-1), 1) and value.ndim:  # rows of weights: keep them rows of weights
                new = np.where(value > 0, new, 0)
                new = new / np.where(new.sum(-1, keepdims=True) == 0, 1, new.sum(-1, keepdims=True))
        return np.where(np.isfinite(value), new, value)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_redrawn(v, rng) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_redrawn(v, rng) for v in value)
    if isinstance(value, dict):
        return {k: _redrawn(v, rng) for k, v in value.items()}
    return value


def extra_inputs(exercise) -> list:
    """Argument tuples beyond the cases: each case with its float arrays redrawn (seeds EXTRA_SEEDS),
    and the exercise's own ``more_cases`` when its module defines one for it."""
    base = cases_of(exercise)
    out = [_redrawn(args, np.random.default_rng(s * 1000 + i)) for s in EXTRA_SEEDS for i, args in enumerate(base)]
    module = sys.modules.get(getattr(exercise.cases, "__module__", ""), None)
    more = getattr(module, "MORE_CASES", {}) or {}
    if exercise.name in more:
        out += [c.args if isinstance(c, engine.Case) else tuple(c) for c in more[exercise.name]()]
    return out


class _Clear(BaseException):
    """Raised in our own thread to take the checker's leftover 'asynchronous exception pending' flag."""


def _clear_pending_async():
    """The checker's time limit clears its asynchronous exception with PyThreadState_SetAsyncExc(tid, NULL),
    which on CPython 3.11 leaves the eval loop's 'async exception' flag set: sys.settrace then hangs
    the next traced call. Raising (and catching) one asynchronous exception of our own takes it down."""
    import ctypes
    import threading
    try:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(threading.get_ident()), ctypes.py_object(_Clear))
        for _ in range(100):
            pass
    except _Clear:
        pass


def reached_lines(reference, inputs) -> set:
    """{(filename, line)} of the package's lines that run when ``reference`` runs on ``inputs``."""
    _clear_pending_async()
    lines = set()

    def tracer(frame, event, arg):
        if event in ("call", "line"):
            lines.add((frame.f_code.co_filename, frame.f_lineno))
        return tracer
    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        for args in inputs:
            _outcome(reference, args)
    finally:
        sys.settrace(old)
    return lines


def _outcome(fn, args):
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("value", fn(*copy.deepcopy(args)))
    except Exception as exc:  # noqa: BLE001 -- a mutant may raise anything
        return ("error", type(exc))


def _kind(v) -> str:
    """'int', 'float', 'bool', 'complex' for a Python or numpy scalar; the type's name otherwise."""
    for kind, types_ in (("bool", (bool, np.bool_)), ("int", (int, np.integer)), ("float", (float, np.floating)),
                         ("complex", (complex, np.complexfloating))):
        if isinstance(v, types_):
            return kind
    return type(v).__name__


def _same(a, b, strict=True) -> bool:
    """Equal at the checker's tolerance, with the same kinds (a numpy int for a Python int is the
    same; a whole float for an int differs when ``strict``: the exercise states ``-> int``)."""
    kinds = {_kind(a), _kind(b)}
    if len(kinds) > 1 and not (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)):
        if strict or kinds != {"int", "float"} or float(a) != float(b):
            return False
        return True
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], strict) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y, strict) for x, y in zip(a, b))
    if hasattr(a, "detach") and hasattr(b, "detach"):  # torch tensors
        a, b = a.detach().numpy(), b.detach().numpy()
    if isinstance(a, (np.ndarray, np.generic, float, int, complex, bool)):
        if not isinstance(b, (np.ndarray, np.generic, float, int, complex, bool)):
            return False
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            return False
        if a.dtype.kind in "fc":
            return bool(np.allclose(a, b, rtol=engine.RTOL, atol=engine.ATOL, equal_nan=True))
        return bool(np.array_equal(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001
        return False


def differs(mutant, reference, inputs, strict=True) -> bool:
    """True when the mutant's outcome differs from the reference's on some input (``strict``: a
    whole float for an int differs)."""
    for args in inputs:
        want, got = _outcome(reference, args), _outcome(mutant, args)
        if want[0] != got[0] or (want[0] == "error" and want[1] is not got[1]):
            return True
        if want[0] == "value" and not _same(got[1], want[1], strict):
            return True
    return False


def accepted(name, fn) -> bool:
    """Whether the checker a learner calls accepts ``fn`` (its printing swallowed)."""
    exercise = exercises()[name]
    if isinstance(exercise, shape_exercise.ShapeExercise):
        learner = (lambda *sizes: fn(shape_exercise.Sizes(*sizes)))  # the learner's fn(*sizes) -> dict
    else:
        learner = fn
    with contextlib.redirect_stdout(io.StringIO()), np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok = checker(name)(learner) if not isinstance(exercise, shape_exercise.ShapeExercise) else exercise.check(learner)
    engine.forget_results()
    return ok is True


def _states_int(exercise) -> bool:
    """The exercise insists on the type: strict_types, or its reference says ``-> int``."""
    import inspect
    import re
    if getattr(exercise, "strict_types", False):
        return True
    try:
        if inspect.signature(exercise.reference).return_annotation in (int, "int"):
            return True
    except (TypeError, ValueError):
        return False
    return bool(re.search(r"->\s*int\b", (inspect.getdoc(exercise.reference) or "").split("\n")[0]))


def other_references(name) -> list:
    """The references of the other exercises (their code is mutated, and checked, there)."""
    return [e.reference for n, e in exercises().items() if n != name]


def _inputs(exercise) -> list:
    if isinstance(exercise, shape_exercise.ShapeExercise):
        return [(s,) for s in exercise.cases()]
    return cases_of(exercise) + extra_inputs(exercise)


def run(name, sample=None) -> dict:
    """What the checker ``name`` makes of its reference's mutants:
    {"mutants": n, "rejected": [...], "equivalent": [...], "unreached": [...], "survivors": [...], "seconds": s}.

    ``unreached``: mutants on a line that never runs on the cases and the extra inputs (not given to
    the checker: they cannot change what it sees); ``equivalent``: accepted and equal to the
    reference on every input; ``survivors``: accepted although they differ (a wrong answer let
    through). ``sample`` (k, n) keeps every n-th mutant from the k-th (a deterministic share)."""
    start = time.perf_counter()
    exercise = exercises()[name]
    found = mutants(exercise.reference, depth=1, exclude=other_references(name))
    if sample is not None:
        k, n = sample
        found = found[k::n]
    inputs = _inputs(exercise)
    reached = reached_lines(exercise.reference, inputs)
    result = {"mutants": len(found), "rejected": [], "equivalent": [], "unreached": [], "survivors": []}
    for m in found:
        if (m.mutation.filename, m.mutation.line) not in reached:
            result["unreached"].append(m.mutation)
        elif not accepted(name, m.fn):
            result["rejected"].append(m.mutation)
        elif differs(m.fn, exercise.reference, inputs, _states_int(exercise)):
            result["survivors"].append(m.mutation)
        else:
            result["equivalent"].append(m.mutation)
    result["seconds"] = time.perf_counter() - start
    return result


def report(reason, names=None) -> str:
    """The per-exercise table (markdown): mutants, refused, equivalent (with the reason ``reason(name,
    mutation)`` gives), survivors; then every equivalent mutant and its reason."""
    names = list(names or sorted(exercises()))
    rows = ["| exercise | mutants | refused | equivalent | survivors |", "|---|---:|---:|---:|---:|"]
    notes, totals = [], [0, 0, 0, 0]
    for name in names:
        r = run(name)
        eq = r["equivalent"] + r["unreached"]
        counts = (r["mutants"], len(r["rejected"]), len(eq), len(r["survivors"]))
        rows.append(f"| {name} | " + " | ".join(map(str, counts)) + " |")
        totals = [t + c for t, c in zip(totals, counts)]
        notes += [f"- **{name}** `{m.id}`: {reason(name, m) or 'NOT LISTED'}" for m in eq]
        notes += [f"- **{name}** SURVIVOR `{m.id}`" for m in r["survivors"]]
    rows.append(f"| **all {len(names)}** | " + " | ".join(map(str, totals)) + " |")
    return "\n".join([
        "# Mutation testing of the checkers", "",
        "Generated by `python -m tests.check.mutation_run` (checked by tests/check/test_mutants.py; all mutants with "
        "`MHA_MUTANTS=all`, every fourth one in `make test`). Each exercise's reference is mutated "
        "(`mha_course.check.mutants`, depth 1: its own code and the package helpers it calls, not another exercise's "
        "reference nor an argument check) and every mutant is given to the checker a learner calls. *Refused*: the "
        "checker says no. *Equivalent*: accepted, and equal to the reference on every case and on the cases redrawn "
        "with three other seeds; each has its reason (tests/check/equivalent_mutants.py). *Survivors*: accepted "
        "although they differ somewhere (must be 0).", "", *rows, "", "## The equivalent mutants and why", "", *notes,
        ""])


if __name__ == "__main__":
    from mha_course.check import derive
    from tests.check.equivalent_mutants import reason as _reason
    derive.CALLS = 0  # as in the test: a refusal is not diagnosed
    text = report(_reason, sys.argv[1:] or None)
    if not sys.argv[1:]:
        REPORT.write_text(text)
    print(text)
