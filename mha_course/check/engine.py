"""The checker engine: run a learner's function on seeded cases, compare, name the mistake.

Every checker of ``mha_course.check`` is an :class:`Exercise` (a function to check) or a
:class:`ShapeExercise` (a dict of predicted shapes); both register themselves in
:func:`catalogue`, which the tests read. A checker prints a few lines and returns a plain bool:

- ``✔ name: all N cases match``: right on every case.
- ``✘ name: case i of N failed``: the call, what differs (output, shape or values), then
  ``Looks like: <mistake>. Fix: <fix>`` when the learner's results equal a catalogued mistake's
  on **every** case, and otherwise where the difference lies (which output, axis, heads, rows or
  columns) and how (scaled, shifted, permuted, averaged, transposed).
- ``⋯ name: not finished yet — <what to do>``: the function raised ``NotImplementedError`` or the
  value is ``...``/``NotImplemented`` (a stub). Never raises, so a student copy runs top to bottom.

Each learner call runs under a time limit of ``TIME_LIMIT`` seconds (``signal.setitimer`` in the
main thread, as in a Jupyter kernel; a waiting thread elsewhere), its printing is captured and at
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
  other mistake on some case: ``tests/test_check_rules.py`` checks that (a confusion matrix that is
  its diagonal) for every registered checker.
- ``outputs=("out", "weights")`` names the outputs of a reference returning a tuple (the learner
  must return a tuple too); ``axes={"weights": ("query", "key")}`` names the trailing axes of an
  output in the localisation (default: "row", "column").
- A reference may return a dict of arrays (compared key by key, each key named as an output).
- A reference returning an int needs an int (``2.0`` is reported), a boolean array needs a boolean one.
- The reference has the learner's signature and is itself a right answer: the rules tests pass it
  (and variants of it) to the checker as a learner would.
- An Exercise computes its cases, the reference's values and each mistake's outcomes once and keeps
  them: cases must be seeded and must not depend on anything that changes.
- A shape exercise: ``ShapeExercise(name, reference(sizes) -> {stage: shape}, cases() -> [Sizes],
  (ShapeMistake(name, fix, stages, wrong(stage, true shape, sizes) -> wrong shape), ...))``; the
  learner's ``fn(*sizes)`` returns the dict (``check_value`` checks one dict the learner wrote).
- The time limit is never applied halfway through an import (it waits for the import to end).
  Tests may shorten it with ``monkeypatch.setattr(engine, "TIME_LIMIT", 0.3)``; ``forget_results()``
  empties what :func:`summary` reports.
- :func:`matches` does the same for a one-off function without registering it.
"""
from __future__ import annotations

import contextlib
import copy
import inspect
import io
import os
import re
import signal
import sys
import sysconfig
import tempfile
import threading
import time
import traceback
import types
import warnings
from dataclasses import dataclass
from itertools import combinations, permutations
from typing import Callable, NamedTuple

import numpy

from ..mha import MHAParams

# Private references to everything the checker compares with: a learner who replaces np.isclose
# (or np.asarray, np.all, ...) changes the numpy module, not this snapshot of it.
_NUMPY_ORIGINALS = dict(vars(numpy))
np = types.SimpleNamespace(**_NUMPY_ORIGINALS)


@contextlib.contextmanager
def _pristine_numpy():
    """numpy's own functions back in the numpy module while the references run (a learner's
    replacements are put back afterwards)."""
    changed = {k: v for k, v in vars(numpy).items() if k in _NUMPY_ORIGINALS and v is not _NUMPY_ORIGINALS[k]}
    vars(numpy).update({k: _NUMPY_ORIGINALS[k] for k in changed})
    try:
        yield
    finally:
        vars(numpy).update(changed)

__all__ = ["Case", "Mistake", "Exercise", "ShapeMistake", "ShapeExercise", "Sizes", "matches",
           "catalogue", "summary", "forget_results", "TIME_LIMIT", "call_learner", "LearnerFailed", "Forbid",
           "Returns"]

RTOL, ATOL = 1e-5, 1e-6
TIME_LIMIT = 5.0  # seconds for each checked call of a learner's function
PRINT_LINES, PRINT_CHARS = 8, 800  # the most of a learner's printing shown in the feedback
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) for k in ("stdlib", "purelib", "platlib")})
_CATALOGUE: dict = {}
_RESULTS: dict = {}  # checker name -> "done" | "unfinished" | "wrong", in the order first called
_NOT_DIAGNOSED = "\x00"  # prefix of a problem whose message says it all (no localisation)


class Mistake(NamedTuple):
    """A known wrong variant: its name, how to fix it, and a function computing its result.

    ``fn`` takes the reference's arguments and returns what that mistake returns (or raises what
    it raises) on every case.
    """
    name: str
    fix: str
    fn: Callable


class Case(NamedTuple):
    """The positional arguments of one checked call, and a note shown when it fails."""
    args: tuple
    note: str = ""


class _Outcome(NamedTuple):
    """What one call gave: a value, or an exception (``error``), or nothing (``lines`` say why)."""
    value: object = None
    error: BaseException | None = None
    lines: tuple = ()


@dataclass(frozen=True)
class _Spec:
    """A checker that is not registered (what :func:`matches` runs)."""
    name: str
    reference: Callable
    cases: Callable  # () -> list of Case (or of argument tuples)
    mistakes: tuple = ()
    outputs: tuple | None = None
    axes: dict | None = None
    sizes: Callable | None = None  # (*case args) -> {symbol: size}, e.g. {"d_k": Q.shape[-1], "h": h}
    strict_types: bool = False  # True when the type is the point (then 4.0 for 4, a list for a tuple fail)
    rules: tuple = ()  # the exercise's stated rules: Forbid(...), Returns(...)

    def __post_init__(self):
        """Nothing to do: a _Spec is not registered."""

    def check(self, fn) -> bool:
        """Run ``fn`` on every case, print the feedback, record and return True if all match."""
        _restore_engine()
        if _unfinished_value(fn) or not callable(fn):
            return _report_value(self.name, fn)
        runs, printed = _run_all(self, fn)
        return _finish(self.name, _verdict(self, fn, runs), printed)

    def recognise(self, fn) -> list:
        """The catalogued mistakes whose results equal ``fn``'s on every case (for tests)."""
        return _fitting(self, _run_all(self, fn)[0])

    def prepared(self) -> list:
        """[(case, the reference's value)] for every case."""
        with _pristine_numpy():
            return [(c, _quiet(self.reference, c.args).value) for c in _as_cases(self.cases())]

    def outcome(self, i, mistake) -> _Outcome:
        """What ``mistake`` gives on case i."""
        args = self.prepared()[i][0].args
        with _pristine_numpy():
            return _quiet(mistake.fn, args)


class Exercise(_Spec):
    """A registered checker of a learner's function; see the module docstring.

    Its cases, the reference's values and the mistakes' outcomes are computed once and kept.
    """

    def __post_init__(self):
        _CATALOGUE[self.name] = self
        object.__setattr__(self, "_memo", {})

    def prepared(self) -> list:
        if "cases" not in self._memo:
            self._memo["cases"] = super().prepared()
        return self._memo["cases"]

    def outcome(self, i, mistake) -> _Outcome:
        key = (i, id(mistake))
        if key not in self._memo:
            self._memo[key] = super().outcome(i, mistake)
        return self._memo[key]


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
    notes = list(notes or []) + [""] * len(cases)
    listed = [Case(tuple(a), n) for a, n in zip(cases, notes)]
    spec = _Spec(name or getattr(reference, "__name__", "function"), reference, lambda: listed,
                 tuple(mistakes), outputs)
    return spec.check(fn)


def catalogue() -> dict:
    """Every registered checker by name: :class:`Exercise` and :class:`ShapeExercise` objects."""
    return dict(_CATALOGUE)


# ---------------------------------------------------------------------------------------
# running the learner's function
# ---------------------------------------------------------------------------------------

class _Run(NamedTuple):
    case: Case
    want: object
    got: _Outcome
    problem: list  # [] when the learner's result is right


def _run_all(spec, fn):
    """One _Run per case (stopping after a time-out, an interruption or a stub), and the captured printing."""
    printed, runs = _CappedText(), []
    for case, want in spec.prepared():
        got = _call_learner(fn, spec.reference, case.args, printed, spec)
        problem = list(got.lines) if got.lines or got.error else _quiet_compare(got.value, want, spec)
        runs.append(_Run(case, want, got, problem))
        if _is_unfinished(got) or (got.lines and got.error is None) or isinstance(got.error, KeyboardInterrupt):
            break
    return runs, printed


def _quiet(f, args) -> _Outcome:
    """f(*copies of args) with numpy's warnings silenced, as an outcome (never raises)."""
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _Outcome(f(*copy.deepcopy(args)))
    except Exception as exc:
        return _Outcome(error=exc)


def _quiet_compare(got, want, spec) -> list:
    """_compare with numpy's warnings (NaN comparisons) silenced."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _compare(got, want, spec.outputs, getattr(spec, "strict_types", False))


_TIME_UP_LINE = ("it did not finish within {:g} s (the checker's limit for one call): is there a loop that "
                 "never ends?")


def _call_learner(fn, reference, args, printed, spec=None) -> _Outcome:
    """The learner's outcome on one case: time-limited (the call, converting what it returned and
    describing what it raised), printing captured, purity checked, the exercise's rules applied."""
    mine = copy.deepcopy(args)
    rules = getattr(spec, "rules", ()) or ()

    def run():
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with _spying(rules, fn) as calls:
                value = fn(*mine)
        broken = [r.message_for(value) if isinstance(r, Returns) else r.message
                  for r in rules if r.broken(value, calls)]
        return _settle(value), broken
    result = _guarded(run, TIME_LIMIT, printed, reference)
    if result.timed_out:
        return _Outcome(lines=(_TIME_UP_LINE.format(TIME_LIMIT),))
    if result.error is not None:
        if isinstance(result.error, KeyboardInterrupt):
            return _Outcome(error=result.error, lines=("it was interrupted (KeyboardInterrupt); the other cases "
                                                       "were not run",))
        return _Outcome(error=result.error, lines=tuple(result.described))
    value, broken = result.value
    if broken:
        return _Outcome(value, lines=(_NOT_DIAGNOSED + broken[0],))
    return _Outcome(value, lines=tuple(_changed_argument(fn, reference, args, mine)))


def _changed_argument(fn, reference, before, after) -> list:
    for arg_name, b, a in zip(_arg_names(reference, before), before, after):
        if not _identical(b, a):
            return [f"{_fn_name(fn)} changed its argument {arg_name} in place; the course's functions are pure.",
                    f"Fix: compute into a new array (z = {arg_name} - m) instead of modifying "
                    f"{arg_name} ({arg_name} -= m)."]
    return []


# ---------------------------------------------------------------------------------------
# the time limit: a watchdog that re-arms until the learner's code is left
# ---------------------------------------------------------------------------------------

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
    :func:`_guarded`); what it prints (sys.stdout, sys.stderr, file descriptors 1 and 2) is
    dropped. Raises :class:`LearnerFailed` (an ``Exception``) when fn raised anything or ran out
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
    result = _guarded(lambda: fn(*args, **kwargs), limit, _CappedText(), fn)
    if result.timed_out:
        raise LearnerFailed([_TIME_UP_LINE.format(limit)], timed_out=True)
    if result.error is not None:
        raise LearnerFailed(result.described, error=result.error)
    return result.value


class _Guarded(NamedTuple):
    value: object = None
    error: BaseException | None = None
    described: list = []
    timed_out: bool = False


class _TimeUp(BaseException):
    """Raised inside the learner's code when its time is up (not an Exception: `except Exception` misses it).

    A learner's bare ``except:`` catches it; creating it (which CPython does where it is caught)
    turns on line tracing in that thread, so every further line of the learner's code raises it
    again until the guarded call is left.
    """

    def __init__(self, *args):
        super().__init__(*args)
        guard = _GUARDS.get(threading.get_ident())
        if guard is not None and guard.expired and not guard.done:
            guard.trace_from(sys._getframe(1))


_GUARDS: dict = {}  # thread id -> its running _Guard


def _async_raiser():
    """(raise _TimeUp in thread tid, clear what is pending in tid), or None where ctypes cannot."""
    try:
        import ctypes
        raise_in = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.py_object)(
            ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
        clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
            ("PyThreadState_SetAsyncExc", ctypes.pythonapi))
    except (ImportError, AttributeError, OSError):
        return None
    return (lambda tid: raise_in(tid, _TimeUp)), (lambda tid: clear(tid, None))


_ASYNC = _async_raiser()


def _importing(frame) -> bool:
    """True when frame is inside an import (a half-imported module would stay broken in sys.modules)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class _Guard:
    """The time limit of one guarded call, in the thread that makes it.

    After ``limit`` seconds, three things stop the learner's code, each repeated until the call
    is left: SIGALRM every 50 ms (main thread; it also ends a time.sleep), an exception raised
    asynchronously in the thread every 20 ms by a watchdog thread (works when the learner ignores
    SIGALRM or resets the timer), and line tracing turned on where that exception is caught, so
    that every line of a bare ``except:`` retry loop raises it again.
    """

    def __init__(self, limit, base):
        self.limit, self.base, self.tid = limit, base, threading.get_ident()
        self.expired = self.done = False
        self.event = threading.Event()
        self.main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        self.old_trace, self.old_handler, self.old_timer, self.start = sys.gettrace(), None, (0.0, 0.0), 0.0

    def begin(self):
        _GUARDS[self.tid] = self
        if self.main:
            self.old_handler = signal.signal(signal.SIGALRM, self.on_alarm)
            self.start = time.monotonic()
            self.old_timer = signal.setitimer(signal.ITIMER_REAL, self.limit, 0.05)
        self.dog = threading.Thread(target=self.watch, daemon=True, name="mha-course time limit")
        self.dog.start()

    def on_alarm(self, signum, frame):
        if self.done:
            return
        self.expired = True
        if not _importing(frame):
            raise _TimeUp

    def watch(self):
        """The watchdog thread: wait for the limit, then raise _TimeUp in the guarded thread every 20 ms."""
        if self.event.wait(self.limit):
            return
        self.expired = True
        while not self.done:
            top = sys._current_frames().get(self.tid)
            if _ASYNC is not None and top is not None and top.f_code not in _OWN_CODE and not _importing(top):
                _ASYNC[0](self.tid)
            if self.event.wait(0.02):
                return

    def trace_from(self, frame):
        """In the guarded thread: trace every line of the frames between ``frame`` and the guard."""
        sys.settrace(self.new_frame)
        while frame is not None and frame is not self.base:
            if frame.f_code not in _OWN_CODE:
                frame.f_trace, frame.f_trace_lines = self.line, True
            frame = frame.f_back

    def new_frame(self, frame, event, arg):
        return None if self.done or frame.f_code in _OWN_CODE else self.line

    def line(self, frame, event, arg):
        if self.done:
            return None
        if _ASYNC is not None and not _importing(frame):
            _ASYNC[0](self.tid)
        return self.line

    def end(self):
        """Stop every mechanism (each step may be repeated: an exception may land while we stop)."""
        self.done = True
        self.event.set()
        self.dog.join()
        sys.settrace(self.old_trace)  # before touching signals: see the tests
        if _ASYNC is not None:
            _ASYNC[1](self.tid)
        if self.main and self.old_handler is not None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old_handler)
            delay, interval = self.old_timer
            if delay:  # someone else's timer was running: give it back what is left of it
                signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - self.start), 1e-3), interval)
        _GUARDS.pop(self.tid, None)


def _guarded(call, limit, printed, reference=None) -> _Guarded:
    """call() time-limited, with its printing going to ``printed``: never raises, never hangs past
    the limit except inside one long C call (sum(range(10**9)) runs to its end).

    What it raised is described (type, message, the learner's line) inside the limit too, since a
    learner's exception may have a ``__str__`` that loops. Nested calls share the outer limit.
    """
    if threading.get_ident() in _GUARDS:  # inside a guarded call already: its limit holds
        try:
            return _Guarded(call())
        except _TimeUp:
            raise
        except BaseException as exc:  # noqa: B036 -- the learner's code may raise anything
            return _Guarded(error=exc, described=_describe_error(exc, reference))
    guard = _Guard(limit, sys._getframe())
    value = error = None
    described = []
    try:
        with _captured_output(printed):
            guard.begin()
            try:
                value = call()
            except _TimeUp:
                guard.expired = True
            except BaseException as exc:  # noqa: B036 -- report, never raise
                error = exc
                described = _describe_error(exc, reference)
    except _TimeUp:
        guard.expired = True
    except BaseException as exc:  # noqa: B036 -- a _TimeUp that lands in our own code, or worse
        error = error or exc
    finally:
        for _ in range(1000):  # inline: a _TimeUp may still land while the guard stops
            try:
                guard.end()
                break
            except BaseException:  # noqa: B036
                guard.expired = True
    if guard.expired:
        return _Guarded(timed_out=True)
    return _Guarded(value, error, described or ([] if error is None else [f"it raised {type(error).__name__}"]))


@contextlib.contextmanager
def _captured_output(printed):
    """sys.stdout, sys.stderr and file descriptors 1 and 2 go to ``printed`` (kept to its cap)."""
    saved, spill = [], None
    try:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()
        spill = tempfile.TemporaryFile()
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                saved.append((fd, os.dup(fd)))
                os.dup2(spill.fileno(), fd)
    except OSError:
        pass
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            yield
    finally:
        for stream in (sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, copy_of in saved:
            with contextlib.suppress(OSError):
                os.dup2(copy_of, fd)
                os.close(copy_of)
        if spill is not None:
            with contextlib.suppress(OSError, ValueError):
                size = os.fstat(spill.fileno()).st_size
                spill.seek(0)
                head = spill.read(PRINT_CHARS * 4).decode("utf-8", "replace")
                printed.write(head)
                printed.total += max(size - len(head.encode("utf-8", "replace")), 0)
                spill.close()


def _settle(value, depth=0):
    """What the learner returned, as plain Python and numpy values (its __array__, __float__ or
    __len__ run here, inside the time limit); anything else becomes an :class:`_Opaque`."""
    kind = type(value)
    if value is None or value is Ellipsis or value is NotImplemented or kind in (bool, int, float, complex, str):
        return value
    if depth > 20:
        return _Opaque("deeply nested value")
    if kind is np.ndarray and value.dtype != object:
        return value
    if isinstance(value, np.generic) and kind.__module__ == "numpy" and value.dtype != object:
        return value
    if isinstance(value, tuple):
        return tuple(_settle(v, depth + 1) for v in tuple.__iter__(value))
    if isinstance(value, list):
        return [_settle(v, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, dict):
        return {(k if type(k) in (str, int) else _safe_str(k)): _settle(v, depth + 1) for k, v in dict.items(value)}
    name = kind.__name__ if isinstance(getattr(kind, "__name__", None), str) else "object"
    try:
        if callable(getattr(value, "detach", None)) and callable(getattr(value, "numpy", None)):
            arr = np.array(value.detach().cpu().numpy())  # a torch tensor
        else:
            arr = np.array(value)
    except Exception:
        return _Opaque(name)
    return _Opaque(name) if arr.dtype == object else arr


_OWN_CODE = frozenset(f.__code__ for f in (
    _guarded, _Guard.begin, _Guard.end, _Guard.watch, _Guard.trace_from, _Guard.new_frame, _Guard.line,
    _Guard.on_alarm, _TimeUp.__init__, _importing, *(_ASYNC or ())))


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


@contextlib.contextmanager
def _spying(rules, fn=None):
    """While the learner's code runs: the names of the forbidden functions it called. Each is
    replaced by a spy (that records the call, then makes it) wherever a loaded module holds it
    under its name, and in the learner's globals under any name (an alias imported earlier)."""
    forbidden, calls, undo = [r for r in rules if isinstance(r, Forbid)], [], []
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


class _Opaque:
    """A returned value the checker does not look into (its type's name is all that is kept)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<a {self.name}>"


class _CappedText(io.TextIOBase):
    """A stdout that keeps the first PRINT_CHARS characters of what is printed and counts the rest."""

    def __init__(self):
        self.kept, self.total = [], 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        room = PRINT_CHARS - sum(map(len, self.kept))
        if room > 0:
            self.kept.append(text[:room])
        self.total += len(text)
        return len(text)

    def lines(self) -> list:
        """The feedback lines showing what the learner's function printed ([] if nothing)."""
        text = "".join(self.kept)
        if not self.total:
            return []
        shown = text.splitlines()[:PRINT_LINES]
        cut = self.total > len(text) or len(text.splitlines()) > PRINT_LINES
        return ([f"your function printed{' (the start of it)' if cut else ''}:"] + [f"  | {ln}" for ln in shown]
                + ([f"  (the checker shows at most {PRINT_LINES} lines of {PRINT_CHARS} characters; "
                    f"{self.total} were printed)"] if cut else []))


# ---------------------------------------------------------------------------------------
# stubs, verdicts, the summary
# ---------------------------------------------------------------------------------------

def _unfinished_value(value) -> bool:
    return value is Ellipsis or value is NotImplemented


def _is_unfinished(got: _Outcome) -> bool:
    return isinstance(got.error, NotImplementedError) or (got.error is None and _unfinished_value(got.value))


def _report_value(name, value) -> bool:
    if _unfinished_value(value):
        return _finish(name, ("unfinished", [f"⋯ {name}: not finished yet — replace the `...` with your "
                                              "answer, then run this cell again"]))
    return _finish(name, ("wrong", [f"✘ {name}: expected a function, got a value of type "
                                    f"{type(value).__name__}. Pass the function itself (my_fn), "
                                    "not its result (my_fn(x))."]))


def _verdict(spec, fn, runs) -> tuple:
    """(status, feedback lines) for the runs of one checker."""
    if _is_unfinished(runs[-1].got):
        return "unfinished", [f"⋯ {spec.name}: not finished yet — write the body of {_fn_name(fn)} "
                              "(replace its `raise NotImplementedError` line), then run both cells again"]
    failed = [i for i, r in enumerate(runs) if r.problem]
    n = len(runs)
    if not failed:
        return "done", [f"✔ {spec.name}: all {n} cases match" if n > 1 else f"✔ {spec.name}: the case matches"]
    run = runs[failed[0]]
    note = f"  # {run.case.note}" if run.case.note else ""
    head = [f"✘ {spec.name}: case {failed[0] + 1} of {n} failed",
            f"  called {_describe_call(fn, spec.reference, run.case.args)}{note}"]
    return "wrong", head + ["  " + ln for ln in _explain(spec, runs, run)]


def _finish(name, verdict, printed=None) -> bool:
    status, lines = verdict
    _RESULTS[name] = status
    print("\n".join(lines + ["  " + ln for ln in (printed.lines() if printed else [])]))
    return status == "done"


def report(name: str, status: str, lines) -> bool:
    """Print ``lines`` as checker ``name``'s verdict and record ``status`` ("done", "unfinished" or
    "wrong") for ``summary()``: for a checker that decides without running the learner's code
    (the torch checkers when torch is missing). Returns True only for "done"."""
    if status not in _SYMBOLS:
        raise ValueError(f"status={status!r}; use one of {', '.join(_SYMBOLS)}")
    return _finish(name, (status, list(lines)))


_SYMBOLS = {"done": "✔", "unfinished": "⋯ not finished", "wrong": "✘"}


def summary() -> None:
    """Print how many of the checkers called in this kernel passed last time, and each one's state.

    >>> forget_results(); summary()
    no exercise checked yet in this kernel
    """
    if not _RESULTS:
        print("no exercise checked yet in this kernel")
        return
    done = sum(s == "done" for s in _RESULTS.values())
    states = ", ".join(f"{n} {_SYMBOLS[s]}" for n, s in _RESULTS.items())
    print(f"{done} of {len(_RESULTS)} exercise{'s' if len(_RESULTS) > 1 else ''} done: {states}")


def forget_results() -> None:
    """Forget every recorded result (a fresh start for :func:`summary`)."""
    _RESULTS.clear()


# ---------------------------------------------------------------------------------------
# diagnosis: a catalogued mistake, or where and how the result differs
# ---------------------------------------------------------------------------------------

def _fitting(spec, runs) -> list:
    """The mistakes whose outcome equals the learner's on every case that ran."""
    if not any(r.problem for r in runs) or any(r.got.lines and r.got.error is None for r in runs):
        return []
    return [m for m in spec.mistakes if all(_same_outcome(spec.outcome(i, m), r.got) for i, r in enumerate(runs))]


def _same_outcome(a: _Outcome, b: _Outcome) -> bool:
    if a.error is not None or b.error is not None:
        return type(a.error) is type(b.error)  # the messages may differ: numpy's, or the package's
    return _same(a.value, b.value)


def _explain(spec, runs, run) -> list:
    """The problem lines of the failing run, then the diagnosis."""
    fits = _fitting(spec, runs)
    lines = [ln.removeprefix(_NOT_DIAGNOSED) for ln in run.problem]
    if fits:
        return lines + [f"Looks like: {fits[0].name}. Fix: {fits[0].fix}"]
    if run.got.lines or run.problem[0].startswith(_NOT_DIAGNOSED):  # an error, a time-out, a stub
        return lines
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NaN comparisons in the learner's result warn nothing
        return lines + _localise(spec, runs, run)


def _localise(spec, runs, run) -> list:
    """Where and how each differing output differs, for a mistake the catalogue does not know (rule c):
    in the exercise's terms (a factor named by its sizes: sqrt(d_k), 1/h, ...), and shape advice
    only when a shape is wrong."""
    axes, lines, shape_wrong = spec.axes or {}, [], False
    for name, g, w in _differences(run.got.value, run.want, spec.outputs):
        shape_wrong |= g.shape != w.shape
        labels = _axis_labels(np.ndim(w), axes.get(name, ()))
        lines += [f"- {name}: {s}" for s in _where_and_how(g, w, labels, _Factor(spec, runs, name))]
    advice = ("Print the shape of each step and compare it with the formula in the notebook." if shape_wrong
              else "Every shape is right: compare each step's values with the formula in the notebook.")
    return ["This is not one of the mistakes I know; here is where your result differs:"] + lines + [advice]


def _where_and_how(g, w, labels, factor=None) -> list:
    if g.shape != w.shape:
        return _how_shapes_differ(g, w, labels)
    how, where = _how_values_differ(g, w, labels, factor), _where_values_differ(g, w, labels)
    return ([] if how and where and where[0].endswith("every axis") else where) + how


def _differences(got, want, outputs) -> list:
    """[(name, got array, expected array)] of every output that differs."""
    if isinstance(want, dict):
        return _differences(tuple(got[k] for k in want), tuple(want.values()), tuple(map(str, want)))
    if not isinstance(want, tuple):
        return [("result", np.asarray(got), np.asarray(want))]
    names = outputs or [f"output {i}" for i in range(len(want))]
    return [(nm, np.asarray(g), np.asarray(w)) for nm, g, w in zip(names, got, want) if not _close(g, w)]


def _axis_labels(ndim, trailing) -> list:
    trailing = tuple(trailing) or (("row", "column") if ndim >= 2 else ("entry",))
    trailing = trailing[-ndim:] if ndim else ()
    return [f"axis {i}" for i in range(ndim - len(trailing))] + list(trailing)


def _where_values_differ(g, w, labels) -> list:
    """Which indices of each axis hold a difference, for the axes where not all of them do."""
    bad = ~_isclose(g, w)
    if w.ndim == 0:
        return []
    out = []
    for ax, label in enumerate(labels):
        hit = np.flatnonzero(bad.any(axis=tuple(a for a in range(w.ndim) if a != ax)))
        if len(hit) < w.shape[ax]:
            out.append(f"differences only at {label} {_index_list(hit)} of {w.shape[ax]} (axis {ax})")
    return out or [f"{int(bad.sum())} of {bad.size} values differ, spread over every axis"]


def _index_list(idx) -> str:
    shown = ", ".join(str(int(i)) for i in idx[:8])
    return shown + (", ..." if len(idx) > 8 else "")


def _how_values_differ(g, w, labels, factor=None) -> list:
    """How a same-shape result relates to the expected one: non-finite, all zero, sign-flipped,
    scaled (by a named size when one fits), shifted, transposed, permuted, reduced, unnormalised."""
    if g.dtype.kind not in "biuf" or w.dtype.kind not in "biuf":
        return []
    g, w = _num(g), _num(w)
    bad = ~np.isfinite(g) & np.isfinite(w)
    if bad.any():
        return [f"{int(bad.sum())} values are nan or inf where finite values were expected "
                f"(the first at {tuple(int(i) for i in np.argwhere(bad)[0])})"]
    if w.size and bool(np.all(np.abs(g) <= ATOL)):
        return ["every value is 0 (an all-zero result): is a step multiplied by a zero mask, or a sum "
                "never added to?"]
    if w.size and bool(np.any(np.abs(w) > ATOL)) and _close(g, -w):
        return ["the sign is flipped: every value is minus the expected one (a subtraction the wrong way "
                "round?)"]
    found = _scaled(g, w, labels, factor)
    if found:
        return [found]
    for test in (_shifted, _swapped, _permuted, _reduced, _unnormalised):
        found = test(g, w, labels)
        if found:
            return [found]
    return []


def _ratio(g, w) -> float:
    """The c with g = c * w (0.0 when there is none)."""
    ww = float(np.vdot(w, w)) if w.size else 0.0
    c = float(np.vdot(g, w)) / ww if ww else 0.0
    return c if c and np.isfinite(c) and not np.isclose(c, 1) and _close(g, c * w) else 0.0


def _scaled(g, w, labels, factor=None) -> str:
    c = _ratio(_num(g), _num(w))
    if not c:
        return ""
    named = factor.name(c) if factor is not None else ""
    if named:
        return f"every value is {named} times the expected one"
    return f"every value is {c:.4g} times the expected one (got / expected = {c:.4g})"


class _Factor:
    """Names a constant factor by the exercise's sizes: the symbol whose value is the factor on
    every failing case (sqrt(d_k), 1/h, 2, ...)."""

    def __init__(self, spec, runs, output):
        self.spec, self.runs, self.output = spec, runs, output

    def name(self, c) -> str:
        ratios, symbols = [], None
        for r in self.runs:
            if not r.problem or r.got.lines or r.got.error is not None:
                continue
            pair = next(((g, w) for nm, g, w in _differences(r.got.value, r.want, self.spec.outputs)
                         if nm == self.output and g.shape == w.shape), None)
            ratio = _ratio(_num(pair[0]), _num(pair[1])) if pair else 0.0
            if not ratio:
                return ""
            candidates = _candidates(_case_sizes(self.spec, r.case.args))
            fits = {k for k, v in candidates.items() if np.isclose(v, ratio, rtol=1e-6, atol=0)}
            symbols = fits if symbols is None else symbols & fits
            ratios.append((ratio, candidates))
        if not symbols:
            return ""
        varying = [k for k in symbols if len({round(cands[k], 9) for _, cands in ratios}) > 1]
        best = min(varying or symbols, key=lambda k: (k not in varying, len(k)))
        here = ratios[0][0]
        return f"{best} ({here:.4g} in this case)" if best not in ("2", "1/2", "-2", "-1/2") else best


def _case_sizes(spec, args) -> dict:
    """{symbol: size} of one case: the exercise's own (``sizes``), else its whole-number arguments by
    name and the last axis of each array argument."""
    if spec.sizes is not None:
        try:
            return {str(k): float(v) for k, v in dict(spec.sizes(*args)).items()}
        except Exception:
            return {}
    out = {}
    for name, v in zip(_arg_names(spec.reference, args), args):
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v > 1:
            out[name] = float(v)
        elif isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[-1] > 1:
            out[f"{name}.shape[-1]"] = float(v.shape[-1])
    return out


def _candidates(sizes) -> dict:
    """Factors a learner's slip produces, by name: n, sqrt(n), 1/n, 1/sqrt(n), their negatives, 2 and 1/2."""
    out = {"2": 2.0, "1/2": 0.5, "-2": -2.0, "-1/2": -0.5}
    for k, v in sizes.items():
        if v > 0:
            for name, value in ((k, v), (f"sqrt({k})", v ** 0.5), (f"1/{k}", 1 / v), (f"1/sqrt({k})", v ** -0.5),
                                (f"{k}**2", v * v)):
                out.setdefault(name, value)
                out.setdefault(f"-{name}", -value)
    return out


def _shifted(g, w, labels) -> str:
    d = float(np.mean(g - w))
    if w.ndim and _close(g, w + d):
        return f"every value is shifted by {d:+.4g}"
    return ""


def _swapped(g, w, labels) -> str:
    for a, b in combinations(range(w.ndim), 2):
        if w.shape[a] == w.shape[b] and _close(g, np.swapaxes(w, a, b)):
            return f"transposed: the {labels[a]} and {labels[b]} axes ({a} and {b}) are swapped"
    return ""


def _permuted(g, w, labels) -> str:
    for ax in range(w.ndim):
        gs, ws = np.moveaxis(g, ax, 0), np.moveaxis(w, ax, 0)
        perm = [next((j for j in range(len(ws)) if _close(gs[i], ws[j])), None) for i in range(len(gs))]
        if None not in perm and sorted(perm) == list(range(len(ws))) and perm != list(range(len(ws))):
            return (f"the {_plural(labels[ax])} (axis {ax}) are reordered (a permutation): yours in order "
                    f"{_index_list(perm)} are the expected ones")
    return ""


def _plural(label) -> str:
    return label[:-1] + "ies" if label.endswith("y") else label + "s"


def _reduced(g, w, labels) -> str:
    for ax in range(w.ndim):
        for how, f in (("averaged", np.mean), ("summed", np.sum)):
            if w.shape[ax] > 1 and _close(g, np.broadcast_to(f(w, axis=ax, keepdims=True), w.shape)):
                return f"each value is the expected values {how} over the {labels[ax]} axis (axis {ax})"
    return ""


def _unnormalised(g, w, labels) -> str:
    """Weights whose rows summed to 1 (or 0, all masked) and no longer do."""
    if w.ndim == 0 or w.min() < 0 or not np.all(np.isclose(w.sum(-1), 1) | np.isclose(w.sum(-1), 0)):
        return ""
    sums = g.sum(-1)[~np.isclose(g.sum(-1), w.sum(-1))]
    return (f"the sums over the {labels[-1]} axis are {sums.min():.4g}..{sums.max():.4g} where they "
            "should be 1 (a softmax over the wrong axis, or weights changed after it?)") if sums.size else ""


def _how_shapes_differ(g, w, labels) -> list:
    """Axis by axis, how a result of another shape relates to the expected shape."""
    if g.size == w.size and _close(g.reshape(w.shape), w):
        return [f"the right values in the wrong shape: expected {w.shape}, got {g.shape}; reshape "
                f"(e.g. with .reshape or [:, None] axes)"]
    if g.ndim == w.ndim and sorted(g.shape) == sorted(w.shape):
        for perm in _axis_orders(w.shape, g.shape):
            if _close(np.transpose(w, perm), g):
                return [f"the right values with the axes in the order {perm}: a transpose too many or too few"]
    if g.ndim != w.ndim:
        return [f"{g.ndim} axes where {w.ndim} were expected ({g.shape} instead of {w.shape})"]
    return [f"axis {a} ({labels[a]}) has length {n}, expected {m}" + (f" ({n / m:.3g} times)" if m else "")
            for a, (n, m) in enumerate(zip(g.shape, w.shape)) if n != m]


def _axis_orders(want_shape, got_shape):
    return [p for p in permutations(range(len(want_shape))) if tuple(want_shape[i] for i in p) == got_shape]


# ---------------------------------------------------------------------------------------
# comparing results
# ---------------------------------------------------------------------------------------

def _compare(got, want, outputs, strict=False) -> list:
    """Feedback lines on how ``got`` differs from ``want`` ([] if it matches)."""
    if isinstance(want, dict):
        return _compare_dict(got, want)
    if isinstance(want, tuple):
        names = outputs or [f"output {i}" for i in range(len(want))]
        natural = isinstance(got, list) and not strict  # a list for a tuple: the same outputs
        if not (isinstance(got, tuple) or natural) or len(got) != len(want):
            return [_NOT_DIAGNOSED + _wrong_return(got, names)]
        for nm, g, w in zip(names, got, want):
            problem = _compare_array(g, w, nm, strict)
            if problem:
                return problem
        return []
    return _compare_array(got, want, "result", strict)


def _compare_dict(got, want) -> list:
    """A dict of outputs: the same keys, then each value compared as an output named by its key."""
    if not isinstance(got, dict):
        return [f"{_NOT_DIAGNOSED}expected a dict with the keys {', '.join(map(str, want))}, "
                f"got a {type(got).__name__}"]
    if set(got) != set(want):
        return [f"{_NOT_DIAGNOSED}expected the keys {', '.join(map(str, want))}, got {', '.join(map(str, got))}"]
    return next((p for p in (_compare_array(got[k], w, str(k)) for k, w in want.items()) if p), [])


def _wrong_return(got, names) -> str:
    expected, fix = f"a tuple ({', '.join(names)})", f"Fix: return {', '.join(names)}"
    if got is None:
        return f"it returned None, expected {expected}: is a `return` missing?"
    if isinstance(got, np.ndarray):
        return f"it returned one array of shape {got.shape}, expected {expected}. {fix}"
    size = f" of {len(got)} values" if isinstance(got, (tuple, list)) else ""
    return f"it returned a {type(got).__name__}{size}, expected {expected}." + (
        f" {fix} (a tuple)" if isinstance(got, list) else "")


def _compare_array(got, want, nm, strict=False) -> list:
    """Shape, value and kind (bool, int) comparison of one output, as feedback lines."""
    if got is None:
        return [f"{_NOT_DIAGNOSED}{nm}: it returned None: is a `return` missing?"]
    if isinstance(got, _Opaque):
        return [f"{_NOT_DIAGNOSED}{nm}: expected an array of numbers, got a value of type {got.name}."]
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
    return _kind_problem(g, w, nm, strict)


def _kind_problem(g, w, nm, strict=False) -> list:
    """Right values of the wrong kind: a float mask; a float count when the type is the point
    (``strict``; otherwise 4.0 for 4 is right when it is exactly the whole number)."""
    if w.dtype == np.bool_ and g.dtype != np.bool_:
        return [f"{_NOT_DIAGNOSED}{nm}: the values are right but the dtype is {g.dtype}; masks are boolean. "
                "Fix: build it with dtype=bool or add .astype(bool)"]
    whole = g.dtype.kind in "iu" or (g.dtype.kind == "f" and bool(np.all(g == w)))
    if w.ndim == 0 and w.dtype.kind in "iu" and (g.dtype.kind not in "iu" if strict else not whole):
        return [f"{_NOT_DIAGNOSED}{nm}: the value is right but it is a {type(g.item()).__name__} "
                f"({_safe_repr(g.item())}), expected a whole number (int). Fix: use // for division, or int(...)"]
    return []


def _show_difference(g, w, nm) -> list:
    """Expected and received values of the first row (last axis) where they differ."""
    if g.dtype.kind not in "biuf" or w.ndim == 0:
        return [f"{nm}: expected {_fmt(w)}, got {_fmt(g)}"]
    idx = tuple(int(i) for i in np.argwhere(~_isclose(g, w))[0])
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
    return _safe_repr(a.tolist() if a.ndim else a.item())


def _num(a):
    a = np.asarray(a)
    return a.astype(float) if a.dtype == np.bool_ else a


def _isclose(g, w):
    return np.isclose(_num(g), _num(w), rtol=RTOL, atol=ATOL, equal_nan=True)


def _close(a, b) -> bool:
    """Same shape and values (rtol=1e-5, atol=1e-6, nan equal to nan)."""
    try:
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return False
        if a.dtype.kind in "biuf" and b.dtype.kind in "biuf":
            return bool(np.all(_isclose(a, b)))
        return bool(np.all(a == b))
    except Exception:
        return False


def _same(a, b) -> bool:
    """Like _close, element by element for tuples and lists of outputs, and of the same kind."""
    if isinstance(b, dict):
        return isinstance(a, dict) and set(a) == set(b) and all(_same(a[k], b[k]) for k in b)
    if isinstance(b, tuple):
        return isinstance(a, (tuple, list)) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, (tuple, _Opaque)) or isinstance(a, float) != isinstance(b, float):
        return False
    return _close(a, b)


def _identical(a, b) -> bool:
    """Exact equality of two (nested) arguments: arrays, tuples such as MHAParams, scalars."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(map(_identical, a, b))
    if callable(getattr(a, "detach", None)) and callable(getattr(a, "numpy", None)):  # torch tensors
        try:
            return _identical(a.detach().cpu().numpy(), b.detach().cpu().numpy())
        except Exception:
            return False
    try:
        return a is b or bool(a == b)
    except Exception:
        return False


# ---------------------------------------------------------------------------------------
# describing calls and errors
# ---------------------------------------------------------------------------------------

def _safe_str(obj) -> str:
    """str(obj), or a placeholder when its __str__ raises (a learner's exception may)."""
    try:
        return str(obj)
    except Exception:
        return f"<a {type(obj).__name__} whose message cannot be shown>"


def _safe_repr(obj) -> str:
    try:
        return repr(obj)
    except Exception:
        return f"<a {type(obj).__name__} that cannot be shown>"


def _describe_error(exc, reference) -> list:
    """Type, message and the learner's line of an exception raised inside their function."""
    msg = re.sub(r"0x[0-9a-fA-F]+", "0x...", _safe_str(exc)).strip()
    msg = msg if len(msg) <= 200 else msg[:197] + "..."
    lines = [f"it raised {type(exc).__name__}" + (f": {msg}" if msg else "")]
    frame = _learner_frame(exc.__traceback__)
    if frame is not None:
        code = (frame.line or "").strip()
        lines.append(f"at line {frame.lineno} of {frame.name}" + (f": {code}" if code else ""))
    hint = _error_hint(exc, reference) if reference is not None else ""
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
    text = _safe_str(exc)
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


def _arg_names(reference, args) -> list:
    try:
        return list(inspect.signature(reference).bind_partial(*args).arguments)
    except (TypeError, ValueError):
        return [f"argument {i}" for i in range(1, len(args) + 1)]


def _signature(reference) -> str:
    try:
        params = inspect.signature(reference).parameters.values()
    except (TypeError, ValueError):
        return "..."
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
    return _safe_repr(v)


def _fn_name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


# ---------------------------------------------------------------------------------------
# shape exercises: a dict {stage: shape}, mistakes that map a true shape to a wrong one
# ---------------------------------------------------------------------------------------

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
    """A wrong shape prediction: on each stage of ``stages``, ``wrong(stage, true shape, sizes)`` is predicted."""
    name: str
    fix: str
    stages: tuple
    wrong: Callable


@dataclass(frozen=True)
class ShapeExercise:
    """A registered checker of predicted stage shapes: ``reference(sizes)`` gives the true dict."""
    name: str
    reference: Callable
    cases: Callable  # () -> list of Sizes
    mistakes: tuple = ()

    def __post_init__(self):
        _CATALOGUE[self.name] = self

    def predicted(self, mistake, sizes) -> dict:
        """The dict a learner making ``mistake`` predicts for ``sizes``."""
        want = self.reference(sizes)
        return {k: mistake.wrong(k, s, sizes) if k in mistake.stages else s for k, s in want.items()}

    def check(self, fn, cases=None, call=None) -> bool:
        """Check ``fn(*sizes) -> dict`` on every case (or ``cases``); print, record, return the bool."""
        _restore_engine()
        if _unfinished_value(fn) or not callable(fn):
            return _report_value(self.name, fn)
        verdict, printed = _shape_verdict(self, fn, cases or self.cases(), call)
        return _finish(self.name, verdict, printed)

    def check_value(self, value, sizes, call) -> bool:
        """Check one predicted dict ``value`` for ``sizes``; ``call`` says where it came from."""
        if _unfinished_value(value):
            return _report_value(self.name, value)
        return self.check(lambda *_: value, [sizes], call)

    def recognise(self, fn, cases=None) -> list:
        """The catalogued mistakes named on any stage of the first failing case (for tests)."""
        for sizes in cases or self.cases():
            got, want = fn(*sizes), self.reference(sizes)
            if got != want:
                found = [m for k in want for m in _stage_matches(self, k, tuple(got[k]), want[k], sizes)]
                return list(dict.fromkeys(found))
        return []


def _stage_matches(spec, stage, mine, want, sizes) -> list:
    return [m for m in spec.mistakes if mine != want and stage in m.stages and m.wrong(stage, want, sizes) == mine]


def _shape_verdict(spec, fn, cases, call):
    """(status, lines) of a shape checker over its cases, and the captured printing."""
    printed = _CappedText()
    for i, sizes in enumerate(cases):
        got = _call_learner(fn, fn, tuple(sizes), printed)
        if _is_unfinished(got):
            return _verdict(spec, fn, [_Run(Case(tuple(sizes)), None, got, ["stub"])]), printed
        lines = list(got.lines) or _shape_problems(spec, got.value, sizes)
        if lines:
            head = f"✘ {spec.name}" + (f": case {i + 1} of {len(cases)} failed" if len(cases) > 1 else "")
            where = call or f"called {_fn_name(fn)}({_sizes_text(sizes)})"
            return ("wrong", [head, f"  {where}"] + ["  " + ln for ln in lines]), printed
    n = len(spec.reference(cases[0]))
    return ("done", [f"✔ {spec.name}: all {n} shapes right" + (f" in all {len(cases)} cases" if len(cases) > 1
                                                               else "")]), printed


def _sizes_text(sizes) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes._asdict().items())


def _shape_problems(spec, mine, sizes) -> list:
    """Feedback lines for a predicted dict ([] when every stage is right)."""
    want = spec.reference(sizes)
    if not isinstance(mine, dict):
        return [f"expected a dict {{stage name: shape}}, got a {type(mine).__name__}"]
    missing, extra = [n for n in want if n not in mine], [n for n in mine if n not in want]
    if missing or extra:
        return ["give one shape for each stage"] + [f"  {k}: {', '.join(map(str, v))}" for k, v in
                                                    (("missing", missing), ("unknown", extra)) if v]
    named = set()  # a mistake is explained at its first stage, then only referred to
    problems = [p for p in (_stage_problem(spec, n, mine[n], want[n], sizes, named) for n in want) if p]
    return [f"{len(problems)} of {len(want)} stages wrong"] + problems if problems else []


def _stage_problem(spec, stage, mine, want, sizes, named) -> str:
    """One feedback line for a stage whose predicted shape is wrong ('' if it is right)."""
    try:
        given = tuple(mine)
    except Exception:
        return f"  {stage}: expected a tuple of ints such as {want}, got {_safe_repr(mine)}"
    floats = [n for n in given if isinstance(n, (float, np.floating))]
    if floats:
        return (f"  {stage}: expected {want}, got {_safe_repr(given)}: {floats[0]!r} is a float, and a shape "
                "holds whole numbers. Looks like: d_model / h (true division). Fix: d_k = d_model // h")
    if any(isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) for n in given):
        return f"  {stage}: expected a tuple of ints such as {want}, got {_safe_repr(given)}"
    mine = tuple(int(n) for n in given)
    if mine == want:
        return ""
    found = _stage_matches(spec, stage, mine, want, sizes)[:1]
    said = [" The same mistake." if m.name in named else f" Looks like: {m.name}. Fix: {m.fix}" for m in found]
    named.update(m.name for m in found)
    return f"  {stage}: expected {want}, got {mine}." + "".join(said)


# ---------------------------------------------------------------------------------------
# private references: what a learner replaces in this module is put back before each check
# ---------------------------------------------------------------------------------------

_ENGINE_ORIGINALS = {k: v for k, v in globals().items()
                     if not k.startswith("__") and k not in ("TIME_LIMIT", "PRINT_LINES", "PRINT_CHARS")}


def _restore_engine(originals=_ENGINE_ORIGINALS, space=globals()) -> None:  # noqa: B008 -- bound once, on purpose
    """Put back every function and constant of this module that was replaced (engine._close = ...)."""
    for name, value in originals.items():
        if space.get(name) is not value:
            space[name] = value


_ENGINE_ORIGINALS["_restore_engine"] = _restore_engine
