"""Shape exercises: a learner predicts the shape of every stage as a dict {stage: shape}.

A :class:`ShapeExercise` holds the true dict (``reference(sizes)``), its cases (:class:`Sizes`) and
the :class:`ShapeMistake` s that map a true shape to the wrong one a learner predicts; the
feedback names the stage and the mistake (notebook 00's exercises, ``check/shapes.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from . import sandbox
from .engine import Case, Run, learner_outcome, register
from .language import say
from .report import finish, fn_name, is_unfinished, report_value, unfinished_value, verdict
from .sandbox import CappedText, np, quiet_numpy, restore, safe_repr
from .symbols import spell_shape

__all__ = ["Sizes", "ShapeMistake", "ShapeExercise"]


class Sizes(NamedTuple):
    """The sizes of a shape exercise: batch, queries, keys, d_model, heads (S = T for self-attention)."""
    B: int
    T: int
    S: int
    d_model: int
    h: int

    @property
    def d_k(self) -> int:
        return self.d_model // self.h


class ShapeMistake(NamedTuple):
    """A wrong shape prediction: on each stage of ``stages``, ``wrong(stage, true shape, sizes)`` is predicted.

    ``together``: the stages follow from one cause (K and V of length T make the scores (T, T) too), so
    a prediction right on most of them is not this mistake; otherwise each stage is a slip of its own."""
    name: str
    fix: str
    stages: tuple
    wrong: Callable
    together: bool = False


@dataclass(frozen=True)
class ShapeExercise:
    """A registered checker of predicted stage shapes: ``reference(sizes)`` gives the true dict."""
    name: str
    reference: Callable
    cases: Callable  # () -> list of Sizes
    mistakes: tuple = ()
    register: bool = True  # False: kept out of catalogue() (a test's toy exercise, as for Exercise)

    def __post_init__(self):
        if self.register:
            register(self)

    def predicted(self, mistake, sizes) -> dict:
        """The dict a learner making ``mistake`` predicts for ``sizes``."""
        want = self.reference(sizes)
        return {k: mistake.wrong(k, s, sizes) if k in mistake.stages else s for k, s in want.items()}

    def check(self, fn, cases=None, call=None) -> bool:
        """Check ``fn(*sizes) -> dict`` on every case (or ``cases``); print, record, return the bool."""
        restore()
        if unfinished_value(fn) or not callable(fn):
            return report_value(self.name, fn)
        with quiet_numpy():
            result, printed = _shape_verdict(self, fn, cases or self.cases(), call)
        return finish(self.name, result, printed)

    def check_value(self, value, sizes, call) -> bool:
        """Check one predicted dict ``value`` for ``sizes``; ``call`` says where it came from."""
        if unfinished_value(value):
            return report_value(self.name, value)
        return self.check(lambda *_: value, [sizes], call)

    def recognise(self, fn, cases=None) -> list:
        """The catalogued mistakes named on any stage of the first failing case (for tests)."""
        for sizes in cases or self.cases():
            got, want = fn(*sizes), self.reference(sizes)
            if got != want:
                found = [m for k in want for m in _stage_matches(self, k, tuple(got[k]), want[k], sizes)]
                return list(dict.fromkeys(found))
        return []


def _stage_matches(spec, stage, mine, want, sizes, ruled_out=frozenset()) -> list:
    return [m for m in spec.mistakes if mine != want and stage in m.stages and m.wrong(stage, want, sizes) == mine
            and m.name not in ruled_out]


def _ruled_out(spec, mine, want, sizes) -> set:
    """The mistakes of one cause (``together``) the prediction does not bear out: right on more than half
    of the stages they change (weights (B, h, T, T) alone is not "K and V of length T" when K, V and the
    scores are right)."""
    out = set()
    for m in (m for m in spec.mistakes if m.together):
        changed = [k for k in m.stages if k in want and m.wrong(k, want[k], sizes) != want[k]]
        right = [k for k in changed if _as_shape(mine.get(k)) == want[k]]
        if changed and 2 * len(right) > len(changed):
            out.add(m.name)
    return out


def _one_symbol_apart(spelled, spelled_want):
    """("T", "S") when two spelled shapes, "(B, h, T, T)" and "(B, h, T, S)", differ in one symbol only."""
    mine, want = (x.strip("()").split(", ") for x in (spelled, spelled_want))
    apart = [(a, b) for a, b in zip(mine, want) if a != b]
    return apart[0] if len(mine) == len(want) and len(apart) == 1 and not apart[0][0].isdigit() else None


def _reordered(spelled, spelled_want) -> str:
    """" The right axes in another order: S and d_k swapped." when a shape holds the expected symbols in
    another order ('' otherwise)."""
    mine, want = (x.strip("()").split(", ") for x in (spelled, spelled_want))
    if len(mine) != len(want) or sorted(mine) != sorted(want) or mine == want:
        return ""
    apart = [(a, b) for a, b in zip(mine, want) if a != b]
    if len(apart) == 2:
        return " " + say("The right axes in another order: {a} and {b} swapped.", a=apart[1][0], b=apart[0][0])
    return " " + say("The right axes in another order.")


def _as_shape(value):
    try:
        return tuple(int(n) for n in value)
    except Exception:
        return None


def _shape_verdict(spec, fn, cases, call):
    """(status, lines) of a shape checker over its cases, and the captured printing."""
    printed = CappedText()
    for i, sizes in enumerate(cases):
        got = learner_outcome(fn, sizes, printed)
        if is_unfinished(got):
            status, lines = verdict(spec.name, fn, fn, [Run(Case(tuple(sizes)), None, got, ["stub"])], list)
            return (status, lines), printed
        lines = list(got.lines) or _shape_problems(spec, got.value, sizes, _other_cases(fn, cases, i, printed))
        if lines:
            head = (say("✘ {name}: case {i} of {n} failed", name=spec.name, i=i + 1, n=len(cases)) if len(cases) > 1
                    else say("✘ {name}", name=spec.name))
            where = f"  {call}" if call else say("  called {call}", call=f"{fn_name(fn)}({_sizes_text(sizes)})")
            return ("wrong", [head, where] + ["  " + ln for ln in lines]), printed
    n = len(spec.reference(cases[0]))
    return ("done", [say("✔ {name}: all {n} shapes right in all {cases} cases", name=spec.name, n=n, cases=len(cases))
                     if len(cases) > 1 else say("✔ {name}: all {n} shapes right", name=spec.name, n=n)]), printed


def _other_cases(fn, cases, i, printed) -> list:
    """[(the learner's dict, sizes)] on the cases after case ``i`` (run under the same limit), which
    choose between readings of a length: 3 is T or h on one case, only h on the next."""
    out = []
    for sizes in cases[i + 1:]:
        got = learner_outcome(fn, sizes, printed)
        if not got.lines and isinstance(got.value, dict):
            out.append((got.value, sizes))
    return out


def symbols_of(sizes) -> dict:
    """{symbol: size} of a case, d_k included; S is left out when it equals T (self-attention)."""
    out = dict(sizes._asdict(), d_k=sizes.d_k)
    if out["S"] == out["T"]:
        del out["S"]
    return out


def _spelled(shape, sizes, stage, others) -> str:
    """``shape`` in the case's symbols, read consistently with the same stage on the other cases."""
    same = [(g[stage], symbols_of(z)) for g, z in others
            if isinstance(g.get(stage), tuple) and all(isinstance(n, (int, np.integer)) for n in g[stage])]
    return spell_shape(shape, symbols_of(sizes), same)


def _sizes_text(sizes) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes._asdict().items())


def _shape_problems(spec, mine, sizes, others=()) -> list:
    """Feedback lines for a predicted dict ([] when every stage is right)."""
    want = spec.reference(sizes)
    if not isinstance(mine, dict):
        return [say("expected a dict {{stage name: shape}}, got a {kind}", kind=type(mine).__name__)]
    missing, extra = [n for n in want if n not in mine], [n for n in mine if n not in want]
    if missing or extra:
        return [say("give one shape for each stage")] + \
            ([say("  missing: {stages}", stages=", ".join(map(str, missing)))] if missing else []) + \
            ([say("  unknown: {stages}", stages=", ".join(map(str, extra)))] if extra else [])
    named = set()  # a mistake is explained at its first stage, then only referred to
    ruled_out = _ruled_out(spec, mine, want, sizes)
    problems = [p for p in (_stage_problem(spec, n, mine[n], want[n], sizes, named, others, ruled_out)
                            for n in want) if p]
    listed = [n for n in want if not isinstance(mine[n], tuple) and _as_shape(mine[n]) == want[n]]
    if listed:  # the right numbers in a list (or an array): one line for all of them
        kind = type(mine[listed[0]]).__name__
        problems.append(say("  {stages}: the numbers are right but written as a {kind}; a shape is a tuple such as "
                            "{want}. Fix: round brackets, {want}", stages=", ".join(map(str, listed)), kind=kind,
                            want=want[listed[0]]))
    wrong = len(problems) - 1 + len(listed) if listed else len(problems)
    return [say("{wrong} of {n} stages wrong", wrong=wrong, n=len(want))] + problems if problems else []


def _stage_problem(spec, stage, mine, want, sizes, named, others=(), ruled_out=frozenset()) -> str:
    """One feedback line for a stage whose predicted shape is wrong ('' if it is right)."""
    try:
        given = tuple(mine)
    except Exception:
        return say("  {stage}: expected a tuple of ints such as {want}, got {got}", stage=stage, want=want,
                   got=safe_repr(mine))
    floats = [n for n in given if isinstance(n, (float, np.floating))]
    if floats:
        return say("  {stage}: expected {want}, got {got}: {value} is a float, and a shape holds whole numbers. "
                   "Looks like: d_model / h (true division). Fix: d_k = d_model // h",
                   stage=stage, want=want, got=safe_repr(given), value=repr(floats[0]))
    if any(isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) for n in given):
        return say("  {stage}: expected a tuple of ints such as {want}, got {got}", stage=stage, want=want,
                   got=safe_repr(given))
    mine = tuple(int(n) for n in given)
    if mine == want:
        return ""
    found = _stage_matches(spec, stage, mine, want, sizes, ruled_out)[:1]
    if not found:
        expected_others = [(spec.reference(z), z) for _, z in others]  # the true shapes choose their readings too
        spelled_want, spelled = _spelled(want, sizes, stage, expected_others), _spelled(mine, sizes, stage, others)
        line = say("  {stage}: expected {want} = {spelled_want}, got {got} = {spelled}.", stage=stage, want=want,
                   got=mine, spelled_want=spelled_want, spelled=spelled)
        one = _one_symbol_apart(spelled, spelled_want)
        return line + (" " + say("{got} where {want} belongs.", got=one[0], want=one[1]) if one else
                       _reordered(spelled, spelled_want))
    if found[0].name in named:
        return say("  {stage}: expected {want}, got {got}. The same mistake.", stage=stage, want=want, got=mine)
    named.add(found[0].name)
    return say("  {stage}: expected {want}, got {got}. Looks like: {mistake}. Fix: {fix}", stage=stage, want=want,
               got=mine, mistake=found[0].name, fix=found[0].fix)



sandbox.protect(globals())
