"""The checker engine: run a learner's function on seeded cases, compare, name the mistake.

Every checker of ``mha_course.check`` is an :class:`Exercise` (a function to check) or a
:class:`ShapeExercise` (a dict of predicted shapes); both register themselves in
:func:`catalogue`, which the tests read. A checker prints a few lines and returns a plain bool:

- ``✔ name: all N cases match``: right on every case.
- ``✘ name: case i of N failed``: the call, what differs (output, shape or values), then
  ``Looks like: <mistake>. Fix: <fix>`` when the learner's results equal a catalogued mistake's
  on **every** case, and otherwise where the difference lies (which output, axis, heads, rows or
  columns) and how (scaled, shifted, permuted, averaged, transposed).
- ``✘ name: all N cases match, but not <input>``: right on every case, wrong on a probe, an input
  derived from the cases that a right function treats like any other (a size of 1, one bias alone,
  integer or column-major copies, a longer sequence, huge sizes, a second call; see probes.py),
  with what that kind of difference means.
- ``⋯ name: not finished yet — <what to do>``: the function raised ``NotImplementedError`` or the
  value is ``...``/``NotImplemented`` (a stub). Never raises, so a student copy runs top to bottom.

Each learner call runs under a time limit of ``TIME_LIMIT`` seconds (a probe's under ``PROBE_LIMIT``:
one that runs out ends the probing and refuses nothing; ``signal.setitimer`` in the main thread, as in
a Jupyter kernel; a waiting thread elsewhere), its printing is captured and at
most ``PRINT_LINES`` lines are shown, its exceptions are reported (even one whose ``__str__``
raises), and each checker's latest result is kept for :func:`summary`.

How to write a checker (one function in one module ``mha_course/check/<topic>.py``, one re-export
line in ``check/__init__.py``)::

    import numpy as np
    from .engine import Case, Exercise, Mistake
    from ..attention import softmax as _softmax

    def _cases():          # seeded; vary EVERY size from case to case, so no constant fits
        rng = np.random.default_rng(20240501)
        return [Case((rng.normal(size=(3, 5)),)),
                Case((rng.normal(size=(2, 4, 6)) + 1000,), "logits near 1000")]

    _MISTAKES = (          # each: what a learner writes, as a total function of the same arguments
        Mistake("softmax without subtracting the maximum", "z = x - x.max(axis=axis, keepdims=True)",
                lambda x, axis=-1: np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)),
    )
    SOFTMAX = Exercise("softmax", _softmax, _cases, _MISTAKES)

    def softmax(fn) -> bool:
        '''Check ``fn(x, axis=-1)``: x (...) -> same shape (a doctest that passes the package's).'''
        return SOFTMAX.check(fn)

Notes for checker authors:

- A mistake is named only when its results equal the learner's on every case (same value, or an
  exception of the same type), so each mistake must differ from the reference and from every
  other mistake on some case: ``tests/check/test_engine_rules.py`` checks that (a confusion matrix
  that is its diagonal) for every registered checker. ``also=`` names another mistake that gives
  the same numbers on every input (both are then named).
- No catalogued mistake fits: one is derived from the exercise (:mod:`.derive`, "Found: ..."),
  from ``axes={"weights": ("query", "key")}`` (an output's trailing axes; default: the reference
  docstring's shape line ``-> weights (..., T, S)``) and ``sizes=lambda Q, h: {"d_k": ..., "h": h}``
  (default: that line's symbols, the whole-number arguments, ``d_k = d_model / h``).
- ``outputs=("out", "weights")`` names the outputs of a reference returning a tuple (the learner
  must return a tuple too).
- A reference may return a dict of arrays (compared key by key, each key named as an output).
- The learner returns what the reference returns: an int for an int (``2.0`` for 2 is named), a
  numpy array for an array (a list or a torch tensor is named), a tuple for a tuple, a number for a
  number (not a 0-d array), int indices for int ones, a boolean array for a boolean one, float64 for
  float64; a complex, an object array or an unstacked list of arrays is named as such. A ``Returns``
  rule states the type instead.
- The reference has the learner's signature and is itself a right answer: the rules tests pass it
  (and variants of it) to the checker as a learner would.
- An Exercise computes its cases, the reference's values and each mistake's outcomes once and keeps
  them: cases must be seeded and must not depend on anything that changes.
- A shape exercise (:mod:`.shape_exercise`): ``ShapeExercise(name, reference(sizes) -> {stage: shape}, cases() -> [Sizes],
  (ShapeMistake(name, fix, stages, wrong(stage, true shape, sizes) -> wrong shape), ...))``; the
  learner's ``fn(*sizes)`` returns the dict (``check_value`` checks one dict the learner wrote).
- The time limit is never applied halfway through an import (it waits for the import to end).
  Tests may shorten it with ``monkeypatch.setattr(engine, "TIME_LIMIT", 0.3)``; ``forget_results()``
  empties what :func:`summary` reports.
- :func:`matches` does the same for a one-off function without registering it.
- The testing hook: ``Exercise(..., register=False)`` is an exercise that :func:`catalogue` does not
  list (a test's toy exercise), and ``exercise.forget()`` drops what it memoised.

The engine's jobs live in four rooms: :mod:`.sandbox` (the time-limited call, the guard, the
captured printing, the private numpy), :mod:`.compare` (how a result differs), :mod:`.diagnose`
and :mod:`.derive` (which mistake gives the learner's numbers; one vocabulary,
:mod:`.vocabulary`), :mod:`.report` (verdicts, the summary, progress). This module keeps the
exercise API and runs the cases.
"""
from __future__ import annotations

import contextlib
import copy
import sys
import types
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

from . import sandbox
from .compare import ATOL, NOT_DIAGNOSED, RTOL, Outcome, compare, identical, states_int
from .diagnose import explain
from .edges import edge_cases
from .language import say
from .probes import first_failure
from .report import (
    describe_call,
    finish,
    fn_name,
    forget_results,
    is_unfinished,
    report,
    report_value,
    summary,
    unfinished_value,
    verdict,
)
from .sandbox import PRINT_CHARS, PRINT_LINES, CappedText, np, pristine_numpy, quiet_numpy, restore, safe_repr

__all__ = ["Case", "Mistake", "Exercise", "Part", "matches",
           "catalogue", "summary", "forget_results", "TIME_LIMIT", "call_learner", "LearnerFailed", "Forbid",
           "Returns", "Fresh", "register", "seal", "learner_outcome"]

TIME_LIMIT = 5.0  # seconds for each checked call of a learner's function
PROBE_LIMIT = 1.0  # seconds for a probe's call (probes.py): one that runs out ends the probing, refusing nothing
_CATALOGUE: dict = {}
_SEALED: set = set()  # the course's own checker names (seal)
_KEPT = (RTOL, ATOL, PRINT_CHARS, PRINT_LINES, report, safe_repr)  # re-exported for checker authors and tests


class Mistake(NamedTuple):
    """A known wrong variant: its name, how to fix it, and a function computing its result.

    ``fn`` takes the reference's arguments and returns what that mistake returns (or raises what
    it raises) on every case. ``also`` names another mistake that gives the same numbers on every
    input (the message then names both, never asserting one): "halving for a causal mask".
    """
    name: str
    fix: str
    fn: Callable
    also: str = ""


class Case(NamedTuple):
    """The positional arguments of one checked call, and a note shown when it fails."""
    args: tuple
    note: str = ""


class Part(NamedTuple):
    """A step of an exercise that is another exercise (each head's attention in MHA is
    scaled_dot_product_attention): ``wrap(step_fn)`` is the whole exercise with ``step_fn`` as that
    step, so each catalogued mistake of ``exercise`` is named here too, in the same words, after
    ``where`` ("in each head's attention")."""
    exercise: str
    wrap: Callable
    where: str


@dataclass(frozen=True)
class Exercise:
    """A checker of a learner's function; see the module docstring.

    Its cases, the reference's values and the mistakes' outcomes are computed once and kept
    (:meth:`forget` drops them). ``register=False`` keeps it out of :func:`catalogue` (a test's
    toy exercise: the documented testing hook).
    """
    name: str
    reference: Callable
    cases: Callable  # () -> list of Case (or of argument tuples)
    mistakes: tuple = ()
    outputs: tuple | None = None
    axes: dict | None = None
    sizes: Callable | None = None  # (*case args) -> {symbol: size}, e.g. {"d_k": Q.shape[-1], "h": h}
    strict_types: bool = False  # True when the type is the point (then 4.0 for 4, a list for a tuple fail)
    rules: tuple = ()  # the exercise's stated rules: Forbid(...), Returns(...)
    register: bool = True
    parts: tuple = ()  # Part(exercise, wrap, where): a step that is another exercise, whose mistakes are named here too
    edges: tuple = ()  # sizes ("T", "S", ...) that may be 1: a case cut to each is added (edges.edge_cases)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.strip()) or not callable(self.reference) \
                or not callable(self.cases):
            raise ValueError(f"Exercise({self.name!r}, reference, cases) needs a name (a non-empty string), a "
                             "callable reference and cases as a function () -> list of Case (not the list itself)")
        if self.outputs is not None and not (isinstance(self.outputs, (tuple, list))
                                             and all(isinstance(o, str) for o in self.outputs)):
            raise ValueError(f"outputs={self.outputs!r} must name a tuple's outputs, e.g. outputs=('out', 'weights')")
        if self.register:
            register(self)

    def check(self, fn) -> bool:
        """Run ``fn`` on every case, print the feedback, record and return True if all match."""
        restore()
        with quiet_numpy():
            if unfinished_value(fn) or not callable(fn):
                return report_value(self.name, fn)
            runs, printed = _run_all(self, fn)
            named = []

            def explained(run):
                lines, names = explain(self, runs, run)
                named.extend(names)
                return lines
            status, lines = verdict(self.name, fn, self.reference, runs, explained)
            if status == "done":  # every case matches: the probes derived from them (probes.py) may still refuse
                failed = first_failure(self, lambda args: _call_learner(fn, self.reference, args, printed, self,
                                                                         min(TIME_LIMIT, PROBE_LIMIT)),
                                       lambda value, want: _value_problem(self, value, want),
                                       lambda args: describe_call(fn, self.reference, args))
                status, lines = ("wrong", failed) if failed else (status, lines)
                named += [failed[0].strip()] if failed else []  # the hub's progress says which input
            return finish(self.name, (status, lines), printed, mistake="; ".join(named) or None)

    def recognise(self, fn) -> list:
        """The catalogued mistakes whose results equal ``fn``'s on every case (for tests)."""
        from .diagnose import fitting
        with quiet_numpy():
            return fitting(self, _run_all(self, fn)[0])

    def prepared(self) -> list:
        """[(case, the reference's value)] for every case (a copy: changing it changes nothing here)."""
        return copy.deepcopy(self.expected())

    def expected(self) -> list:
        """The memoised [(case, the reference's value)]: built once with numpy's own functions
        (:func:`~.sandbox.pristine_numpy`) under ``np.errstate(all="ignore")``, its arrays read-only."""
        if "cases" not in self._memo:
            with pristine_numpy():
                cases = _as_cases(self.cases())
                cases += edge_cases(self, cases, self.edges)
                values = [_quiet(self.reference, c.args).value for c in cases]
            self._memo["cases"] = [(_frozen(c), _frozen(v)) for c, v in zip(cases, values)]
        return self._memo["cases"]

    def outcome(self, i, mistake) -> Outcome:
        """What ``mistake`` (a Mistake, a mutant: anything with ``fn``) gives on case i (memoised)."""
        key = (i, id(mistake))
        if key not in self._memo:
            args = self.expected()[i][0].args
            with pristine_numpy():
                self._memo[key] = (_quiet(getattr(mistake, "fn", mistake), args), mistake)
        return self._memo[key][0]

    def memoised(self, key: str, build):
        """``build()`` the first time ``key`` is asked for, the kept value afterwards (the diagnosis
        keeps the reference's mutants here)."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def forget(self) -> None:
        """Drop the memoised cases, values and outcomes (they are built again on the next check)."""
        self._memo.clear()


def _frozen(value):
    """``value`` with every array in it made read-only (a learner's function gets deep copies)."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, (tuple, list)):
        for v in value:
            _frozen(v)
    elif isinstance(value, dict):
        for v in value.values():
            _frozen(v)
    return value


def _as_cases(cases) -> list:
    return [c if isinstance(c, Case) else Case(tuple(c)) for c in cases]


def matches(fn, reference, cases, name=None, mistakes=(), outputs=None, notes=None) -> bool:
    """Run ``fn`` and ``reference`` on every case (argument tuples); print feedback; True if all agree.

    ``mistakes`` are :class:`Mistake` s used to name what went wrong, ``outputs`` names a tuple's
    outputs, ``notes`` gives one note per case.

    >>> matches(lambda n: n * n, lambda n: n ** 2, [(2,), (3,)], name="square")
    ✔ square: all 2 cases match
    True
    """
    cases = list(cases)
    if not cases or (notes is not None and len(notes) != len(cases)):
        raise ValueError(f"matches needs one argument tuple or more in cases (got {len(cases)}), and one note per "
                         f"case when notes are given (got {'no' if notes is None else len(notes)}); pass e.g. [(2,)]")
    notes = list(notes or []) + [""] * len(cases)
    listed = [Case(tuple(a), n) for a, n in zip(cases, notes)]
    spec = Exercise(name or getattr(reference, "__name__", "function"), reference, lambda: listed,
                    tuple(mistakes), outputs, register=False)
    return spec.check(fn)


def register(spec) -> None:
    """Add ``spec`` (an :class:`Exercise`, or another kind with a ``name`` and ``check``) to :func:`catalogue`;
    a name of the course's own checkers (``seal``) is refused: ``check.<name>`` would still run the course's."""
    if spec.name in _SEALED and _CATALOGUE.get(spec.name) is not spec:
        raise ValueError(f"{spec.name!r} is one of the course's checkers (check.{spec.name}); give your exercise "
                         "another name, or register=False to keep it out of the catalogue")
    _CATALOGUE[spec.name] = spec


def seal() -> None:
    """Mark every checker registered so far as the course's own (called once, at the end of check/__init__)."""
    _SEALED.update(_CATALOGUE)


def learner_outcome(fn, args, printed) -> Outcome:
    """``fn(*args)`` called as a learner's function is (limited in time, its printing into ``printed``)."""
    return _call_learner(fn, fn, tuple(args), printed)


def catalogue() -> dict:
    """Every registered checker by name: :class:`Exercise` and :class:`ShapeExercise` objects."""
    return dict(_CATALOGUE)


# ---------------------------------------------------------------------------------------
# running the learner's function
# ---------------------------------------------------------------------------------------

class Run(NamedTuple):
    """One case of a check: the case, the expected value, the learner's outcome and what differs."""
    case: Case
    want: object
    got: Outcome
    problem: list  # [] when the learner's result is right


def _run_all(spec, fn):
    """One Run per case (stopping after a time-out, an interruption or a stub), and the captured printing."""
    printed, runs, fresh = CappedText(), [], _fresh_lines(spec)
    for case, want in spec.expected():
        got = _call_learner(fn, spec.reference, case.args, printed, spec)
        restore()  # what the learner's call replaced in the checker is put back before comparing
        problem = list(got.lines) if got.lines or got.error else _value_problem(spec, got.value, want)
        runs.append(Run(case, want, got, problem))
        if is_unfinished(got) or (got.lines and got.error is None and got.lines[0] not in fresh) \
                or isinstance(got.error, KeyboardInterrupt):
            break
    return _values_before_copying(spec, runs), printed


def _value_problem(spec, value, want) -> list:
    """What differs between the learner's value and the expected one, as the exercise compares them."""
    return compare(value, want, spec.outputs, spec.strict_types or states_int(spec.reference),
                   containers=not any(isinstance(r, Returns) for r in getattr(spec, "rules", ()) or ()))


def _fresh_lines(spec) -> set:
    return {NOT_DIAGNOSED + r.message for r in getattr(spec, "rules", ()) or () if isinstance(r, Fresh)}


def _values_before_copying(spec, runs) -> list:
    """A result aliased to an argument (a broken :class:`Fresh` rule) on some case and wrong in its values on
    another: the values are said first, as the bigger mistake (the copy is said once they are right)."""
    fresh = _fresh_lines(spec)
    aliased = [r.got.error is None and r.got.lines and r.got.lines[0] in fresh for r in runs]
    if not any(aliased) or not any(r.problem and not a for r, a in zip(runs, aliased)):
        return runs
    return [r._replace(got=r.got._replace(lines=()), problem=_value_problem(spec, r.got.value, r.want))
            if a else r for r, a in zip(runs, aliased)]


def _quiet(f, args) -> Outcome:
    """f(*copies of args) with numpy's warnings silenced, as an outcome (never raises)."""
    try:
        with quiet_numpy():
            return Outcome(f(*copy.deepcopy(args)))
    except Exception as exc:
        return Outcome(error=exc)


_TIME_UP_LINE = ("it did not finish within {:g} s (the checker's limit for one call): is there a loop that "
                 "never ends?")


def _call_learner(fn, reference, args, printed, spec=None, limit=None) -> Outcome | None:
    """The learner's outcome on one case: time-limited (the call, converting what it returned and
    describing what it raised), printing captured, purity checked, the exercise's rules applied.
    With a ``limit`` of its own (a probe's), a call that runs out of time gives None."""
    mine = copy.deepcopy(args)
    rules = getattr(spec, "rules", ()) or ()

    def run():
        with quiet_numpy(), _spying(rules, fn) as calls:
            value = fn(*mine)
        broken = [r.message_for(value) if isinstance(r, Returns) else r.message for r in rules
                  if (r.aliased(value, mine) if isinstance(r, Fresh) else r.broken(value, calls))]
        return sandbox.settle(value), broken
    result = sandbox.guarded(run, TIME_LIMIT if limit is None else limit, printed, reference)
    if result.timed_out:
        return None if limit is not None else Outcome(lines=(_TIME_UP_LINE.format(TIME_LIMIT),))
    if result.error is not None:
        if isinstance(result.error, KeyboardInterrupt):
            return Outcome(error=result.error, lines=("it was interrupted (KeyboardInterrupt); the other cases "
                                                      "were not run",))
        return Outcome(error=result.error, lines=tuple(result.described))
    value, broken = result.value
    if broken:
        return Outcome(value, lines=(NOT_DIAGNOSED + broken[0],))
    return Outcome(value, lines=tuple(_changed_argument(fn, reference, args, mine) or _other_default(fn, reference)))


def _other_default(fn, reference) -> list:
    """The learner's signature gives a parameter another default than the exercise's (``bias=True``
    where it says ``bias=False``): a call that leaves it out would run the wrong case."""
    import inspect
    try:
        ref = inspect.signature(reference).parameters
        own = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return []
    for name, p in ref.items():
        mine = own.get(name)
        if p.default is inspect.Parameter.empty or mine is None or mine.default is inspect.Parameter.empty:
            continue
        if not identical(mine.default, p.default):
            return [NOT_DIAGNOSED + say("your {fn} has {name}={mine} as its default, the exercise's signature has "
                                        "{name}={theirs}: a call without {name} would run another case. Fix: "
                                        "def {fn}(..., {name}={theirs})", fn=fn_name(fn), name=name,
                                        mine=safe_repr(mine.default), theirs=safe_repr(p.default))]
    return []


def _changed_argument(fn, reference, before, after) -> list:
    for arg_name, b, a in zip(sandbox.arg_names(reference, before), before, after):
        if not identical(b, a):
            return [f"{fn_name(fn)} changed its argument {arg_name} in place; the course's functions are pure.",
                    f"Fix: compute into a new array (z = {arg_name} - m) instead of modifying "
                    f"{arg_name} ({arg_name} -= m)."]
    return []


class LearnerFailed(Exception):
    """What :func:`call_learner` raises when the learner's code did not return a value.

    ``timed_out`` is True after the time limit; otherwise ``error`` is what it raised (any
    BaseException: SystemExit, GeneratorExit, KeyboardInterrupt included). ``lines`` say it in
    the checker's words (a time-out, or the exception with the learner's line).
    """

    def __init__(self, lines, error=None, timed_out=False):
        super().__init__("\n".join(lines))
        self.lines, self.error, self.timed_out = list(lines), error, timed_out


def call_learner(fn, *args, timeout=None, **kwargs):
    """fn(*args, **kwargs) under the checker's time limit, its printing captured; -> what it returned.

    Use it for every call of learner code outside :meth:`Exercise.check` (a probe that runs the
    learner's function, converting what it returned with np.asarray): the limit is ``timeout``
    seconds (default ``TIME_LIMIT``) and cannot be switched off by the learner's code (see
    :func:`~.sandbox.guarded`); what it prints (sys.stdout, sys.stderr, file descriptors 1 and 2)
    is dropped. Raises :class:`LearnerFailed` (an ``Exception``) when fn raised anything or ran out
    of time, so ``except Exception`` is enough around it.

    >>> call_learner(lambda x: 2 * x, 21)
    42
    >>> try:
    ...     call_learner(lambda: exit(3))
    ... except LearnerFailed as failed:
    ...     print(failed.lines[0], failed.timed_out)
    it raised SystemExit: 3 False
    """
    limit = TIME_LIMIT if timeout is None else float(timeout)
    result = sandbox.guarded(lambda: fn(*args, **kwargs), limit, CappedText(), fn)
    restore()
    if result.timed_out:
        raise LearnerFailed([_TIME_UP_LINE.format(limit)], timed_out=True)
    if result.error is not None:
        raise LearnerFailed(result.described, error=result.error)
    return result.value


# ---------------------------------------------------------------------------------------
# the exercise's stated rules
# ---------------------------------------------------------------------------------------

class Forbid(NamedTuple):
    """A rule the exercise states: the learner's code must not call ``module.attribute``.

    While the learner's code runs, ``module.attribute`` is a spy that records the call and makes
    it, so the case fails with ``message`` even when the values are right; the spy replaces it in
    every loaded module that holds it under its name and in the learner's globals under any name.

    >>> Forbid("F.scaled_dot_product_attention", "torch.nn.functional", "scaled_dot_product_attention",
    ...        "compute the scores, the mask and the softmax yourself").message.split(",")[0]
    'your function calls F.scaled_dot_product_attention'
    """
    name: str
    module: str
    attribute: str
    fix: str

    @property
    def message(self) -> str:
        return f"your function calls {self.name}, which this exercise asks you not to use. Fix: {self.fix}"

    def broken(self, value, calls) -> bool:
        return self.name in calls


class Returns(NamedTuple):
    """A rule the exercise states: the result (each output of a tuple) is a ``type_name``
    (``"torch.Tensor"``); anything else fails with a message naming both types and ``fix``.

    >>> Returns("torch.Tensor", "torch.from_numpy(a)").broken(np.zeros(2), [])
    True
    """
    type_name: str
    fix: str

    def _is(self, v) -> bool:
        return any(f"{c.__module__}.{c.__qualname__}" == self.type_name or
                   (c.__module__.split(".")[0] + "." + c.__qualname__) == self.type_name for c in type(v).__mro__)

    def broken(self, value, calls) -> bool:
        values = value if isinstance(value, tuple) else (value,)
        return value is not None and not all(self._is(v) for v in values)

    def message_for(self, value) -> str:
        values = value if isinstance(value, tuple) else (value,)
        bad = next(v for v in values if not self._is(v))
        kind = type(bad)
        return (f"it returned a {kind.__module__.split('.')[0]}.{kind.__qualname__}, expected a {self.type_name}. "
                f"Fix: {self.fix}")


class Fresh(NamedTuple):
    """A rule the exercise states: the result is a new array, never an argument or a view of one.

    >>> x = np.zeros(3); Fresh().aliased(x, (x,)), Fresh().aliased(x.copy(), (x,))
    (True, False)
    """
    fix: str = "return a copy: np.array(x, dtype=bool) or x.copy(), not x itself"

    def aliased(self, value, args) -> bool:
        return any(isinstance(v, np.ndarray) and isinstance(a, np.ndarray) and np.shares_memory(v, a)
                   for v in (value if isinstance(value, tuple) else (value,)) for a in args)

    @property
    def message(self) -> str:
        return ("it returned the caller's own array (or a view of it), not a new one: writing into the result "
                f"changes the argument. Fix: {self.fix}")


@contextlib.contextmanager
def _spying(rules, fn=None):
    """While the learner's code runs: the names of the forbidden functions it called. Each
    :class:`Forbid` rule's function is replaced by a spy (that records the call, then
    makes it) wherever a loaded module holds it under its name, and in the learner's globals under
    any name (an alias imported earlier)."""
    forbidden = [r for r in rules if isinstance(r, Forbid)]
    calls, undo = [], []
    learner_globals = getattr(fn, "__globals__", None)
    for rule in forbidden:
        target = getattr(sys.modules.get(rule.module), rule.attribute, None)
        if target is None:
            continue

        def spy(*args, _rule=rule, _target=target, **kwargs):
            if _rule.name not in calls:
                calls.append(_rule.name)
            return _target(*args, **kwargs)
        places = [(vars(m), rule.attribute) for m in list(sys.modules.values())
                  if isinstance(m, types.ModuleType) and vars(m).get(rule.attribute) is target]
        if isinstance(learner_globals, dict):
            places += [(learner_globals, k) for k, v in list(learner_globals.items()) if v is target]
        for space, name in places:
            with contextlib.suppress(Exception):
                space[name] = spy
                undo.append((space, name, target))
    try:
        yield calls
    finally:
        for space, name, target in reversed(undo):
            space[name] = target


sandbox.protect(globals())
