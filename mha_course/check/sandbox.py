"""The checker's sandbox: the time-limited call of a learner's code, its captured printing, the
spies of an exercise's rules, and the checker's private numpy.

:func:`guarded` runs ``call()`` under a time limit the learner's code cannot switch off (SIGALRM
in the main thread, an exception raised asynchronously by a watchdog thread, line tracing where
a bare ``except:`` catches it), with what it prints (``sys.stdout``, ``sys.stderr``, file
descriptors 1 and 2) kept to a cap; it never raises. The checker compares with ``np``, a
read-only snapshot of numpy taken when the checker loads, and runs references inside
:func:`pristine_numpy` (numpy's own functions back in numpy and its submodules, ``np.linalg``
included). :func:`protect` and :func:`restore` put back whatever learner code replaced in the
checker's own modules.

Limits (see docs/instructor.md): what runs in the learner's kernel can always reach the checker
(``gc``, closures); ``os._exit`` ends the kernel; bytes another thread writes to file descriptor
1 or 2 during a check are counted as the learner's (``sys.stdout`` writes are told apart).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import select
import signal
import sys
import sysconfig
import threading
import time
import traceback
import types
from typing import NamedTuple

import numpy

from ..runtime import serial_jobs

PRINT_LINES, PRINT_CHARS = 8, 800  # the most of a learner's printing shown in the feedback
_SPILL_BYTES = 4 * PRINT_CHARS  # bytes written to fd 1 and 2 that are kept (the rest only counted)


class _ReadOnly:
    """A module's names as they were when the checker loaded, read-only (``np.isclose = ...`` fails)."""

    __slots__ = ("_names",)

    def __init__(self, names):
        object.__setattr__(self, "_names", types.MappingProxyType(dict(names)))

    def __getattr__(self, key):
        try:
            return self._names[key]
        except KeyError:
            raise AttributeError(f"numpy has no attribute {key!r}") from None

    def __setattr__(self, key, value):
        raise AttributeError("the checker's numpy is read-only")

    __delattr__ = __setattr__


def _numpy_modules() -> dict:
    """{module: its names now} for numpy and its loaded submodules (np.linalg, np.fft, np.random, ...)."""
    mods = [m for name, m in list(sys.modules.items()) if (name == "numpy" or name.startswith("numpy."))
            and isinstance(m, types.ModuleType)]
    return {m: types.MappingProxyType(dict(vars(m))) for m in mods}


_NUMPY_ORIGINALS = _numpy_modules()
np = _ReadOnly(_NUMPY_ORIGINALS[numpy])


@contextlib.contextmanager
def pristine_numpy():
    """numpy's own functions back in numpy and its submodules while a reference runs (a learner's
    replacements are put back afterwards); numpy's warnings silenced and errors ignored."""
    changed = []
    for module, names in _NUMPY_ORIGINALS.items():
        space = vars(module)
        diff = {k: v for k, v in list(space.items()) if k in names and v is not names[k]}
        if diff:
            space.update({k: names[k] for k in diff})
            changed.append((space, diff))
    try:
        with quiet_numpy():
            yield
    finally:
        for space, diff in changed:
            space.update(diff)


@contextlib.contextmanager
def quiet_numpy():
    """numpy's floating-point errors ignored and its warnings silenced (np.seterr(all='raise') too)."""
    import warnings
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# ---------------------------------------------------------------------------------------
# the checker's own modules: what learner code replaces is put back
# ---------------------------------------------------------------------------------------

_PROTECTED: list = []  # [(module globals, {name: original})]
_KEEP = frozenset({"TIME_LIMIT"})  # settings a test may change on purpose


def protect(space: dict) -> None:
    """Remember every name of a module's globals ``space`` so that :func:`restore` puts it back."""
    _PROTECTED.append((space, types.MappingProxyType({k: v for k, v in space.items()
                                                      if not k.startswith("__") and k not in _KEEP})))


def restore() -> None:
    """Put back every function and constant of the checker's modules that was replaced or deleted."""
    for space, originals in _PROTECTED:
        for name, value in originals.items():
            if space.get(name) is not value:
                space[name] = value


# ---------------------------------------------------------------------------------------
# the time limit: a watchdog that re-arms until the learner's code is left
# ---------------------------------------------------------------------------------------

class Guarded(NamedTuple):
    """What a guarded call gave: its value, or what it raised (described), or a time-out."""
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
        if not _importing(frame) and frame is not None and frame.f_code not in _OWN_CODE:
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
        # never at an 'exception' event: the frame is still inside the try body that raised, so what
        # we raise there is caught as well, and it switches tracing off (see the tests)
        if event != "exception" and _ASYNC is not None and not _importing(frame):
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


def _live_guard():
    """This thread's running guard, or None. A guard that ended without leaving _GUARDS is dropped:
    it must never stand in for a limit (the call would run with none)."""
    guard = _GUARDS.get(threading.get_ident())
    if guard is not None and guard.done:
        _GUARDS.pop(threading.get_ident(), None)
        return None
    return guard


def guarded(call, limit, printed, reference=None) -> Guarded:
    """call() time-limited, with its printing going to ``printed`` (a :class:`CappedText`): never
    raises, never hangs past the limit except inside one long C call (sum(range(10**9)) runs to its end).

    What it raised is described (type, message, the learner's line) inside the limit too, since a
    learner's exception may have a ``__str__`` that loops. Nested calls share the outer limit.
    """
    if _live_guard() is not None:  # inside a guarded call already: its limit holds
        try:
            return Guarded(call())
        except _TimeUp:
            raise
        except BaseException as exc:  # noqa: B036 -- the learner's code may raise anything
            return Guarded(error=exc, described=describe_error(exc, reference))
    guard, capture = _Guard(limit, sys._getframe()), _Capture(printed)
    value = error = None
    described = []
    serial = serial_jobs(True)  # never the package's pool under the limit: a stop inside it leaves its locks held
    capture.start()
    try:
        try:
            guard.begin()
            try:
                value = call()
            except _TimeUp:
                guard.expired = True
            except BaseException as exc:  # noqa: B036 -- report, never raise
                error = exc
                described = describe_error(exc, reference)
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
            serial_jobs(serial)
    finally:
        capture.stop()
    if guard.expired:
        return Guarded(timed_out=True)
    return Guarded(value, error, described or ([] if error is None else [f"it raised {type(error).__name__}"]))


# ---------------------------------------------------------------------------------------
# captured printing
# ---------------------------------------------------------------------------------------

class CappedText(io.TextIOBase):
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


class _Routed(io.TextIOBase):
    """sys.stdout or sys.stderr during a check: the checked thread's writes (and those of threads it
    started) go to the capture; other threads' writes go where they went before."""

    def __init__(self, mine, before, other, fd_copy):
        self.mine, self.before, self.other, self.fd_copy = mine, before, other, fd_copy

    def writable(self) -> bool:
        return True

    def _is_mine(self) -> bool:
        return threading.get_ident() not in self.before

    def write(self, text) -> int:
        if self._is_mine():
            return self.mine.write(text)
        if self.fd_copy is not None:  # the old stream writes to a file descriptor we redirected
            with contextlib.suppress(Exception):
                self.other.flush()
                os.write(self.fd_copy, str(text).encode("utf-8", "replace"))
            return len(text)
        return self.other.write(text)

    def flush(self):
        if not self._is_mine():
            with contextlib.suppress(Exception):
                self.other.flush()


class _Capture:
    """sys.stdout, sys.stderr and file descriptors 1 and 2 go to ``printed`` while a call runs.

    The descriptors write into a pipe that a reader thread drains: the first bytes are kept and
    the rest only counted, so nothing grows on disk or in memory however much is written.
    """

    def __init__(self, printed):
        self.printed, self.saved, self.pipe, self.reader, self.streams = printed, [], None, None, None
        self.head, self.size, self.stop_reading = bytearray(), 0, threading.Event()

    def start(self):
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()
        with contextlib.suppress(OSError):
            self.pipe = os.pipe()
            for fd in (1, 2):
                with contextlib.suppress(OSError):
                    copy_of = os.dup(fd)
                    os.dup2(self.pipe[1], fd)
                    self.saved.append((fd, copy_of))
            self.reader = threading.Thread(target=self.drain, daemon=True, name="mha-course output")
            self.reader.start()
        copies = dict(self.saved)
        before = {t.ident for t in threading.enumerate()} - {threading.get_ident()}
        self.streams = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = (_Routed(self.printed, before, s, copies.get(_fileno(s)))
                                  for s in self.streams)

    def drain(self):
        r = self.pipe[0]
        while True:
            ready = select.select([r], [], [], 0.05)[0]
            if not ready:
                if self.stop_reading.is_set():
                    return
                continue
            try:
                chunk = os.read(r, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.size += len(chunk)
            if len(self.head) < _SPILL_BYTES:
                self.head += chunk[:_SPILL_BYTES - len(self.head)]

    def stop(self):
        if self.streams is not None:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            sys.stdout, sys.stderr = self.streams
        for stream in (sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, copy_of in self.saved:
            with contextlib.suppress(OSError):
                os.dup2(copy_of, fd)
                os.close(copy_of)
        if self.pipe is None:
            return
        with contextlib.suppress(OSError):
            os.close(self.pipe[1])
        self.stop_reading.set()
        if self.reader is not None:
            self.reader.join(1.0)
        if self.reader is None or not self.reader.is_alive():  # else a child process holds the pipe open
            with contextlib.suppress(OSError):
                os.close(self.pipe[0])
        head = bytes(self.head).decode("utf-8", "replace")
        self.printed.write(head)
        self.printed.total += max(self.size - len(bytes(self.head)), 0)


def _fileno(stream):
    try:
        return stream.fileno()
    except Exception:
        return None


# ---------------------------------------------------------------------------------------
# what the learner returned
# ---------------------------------------------------------------------------------------

class FromTorch(numpy.ndarray):
    """A torch tensor the learner returned, as a numpy array: it compares as its values do, and the
    comparison names the tensor where the exercise asks for a numpy array."""


class Opaque:
    """A returned value the checker does not look into (its type's name is all that is kept)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"<a {self.name}>"


def settle(value, depth=0):
    """What the learner returned, as plain Python and numpy values (its __array__, __float__ or
    __len__ run here, inside the time limit); anything else becomes an :class:`Opaque`.

    An object-dtype array stays one (the comparison names it); a list of arrays stays a list; a
    torch tensor becomes a :class:`FromTorch` array.
    """
    kind = type(value)
    if value is None or value is Ellipsis or value is NotImplemented or kind in (bool, int, float, complex, str):
        return value
    if depth > 20:
        return Opaque("deeply nested value")
    if kind is np.ndarray:
        return value if value.dtype != object else Opaque("numpy array of dtype object (Python objects, "
                                                          "not numbers)")
    if isinstance(value, np.generic) and kind.__module__ == "numpy" and value.dtype != object:
        return value
    if isinstance(value, tuple):
        return tuple(settle(v, depth + 1) for v in tuple.__iter__(value))
    if isinstance(value, list):
        return [settle(v, depth + 1) for v in list.__iter__(value)]
    if isinstance(value, dict):
        return {(k if type(k) in (str, int) else safe_str(k)): settle(v, depth + 1) for k, v in dict.items(value)}
    name = kind.__name__ if isinstance(getattr(kind, "__name__", None), str) else "object"
    try:
        if callable(getattr(value, "detach", None)) and callable(getattr(value, "numpy", None)):
            arr = np.array(value.detach().cpu().numpy()).view(FromTorch)  # a torch tensor
        else:
            arr = np.array(value)
    except Exception:
        return Opaque(name)
    return Opaque(name) if arr.dtype == object else arr


# ---------------------------------------------------------------------------------------
# describing errors
# ---------------------------------------------------------------------------------------

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) for k in ("stdlib", "purelib", "platlib")})


def safe_str(obj) -> str:
    """str(obj), or a placeholder when its __str__ raises (a learner's exception may)."""
    try:
        return str(obj)
    except Exception:
        return f"<a {type(obj).__name__} whose message cannot be shown>"


def safe_repr(obj) -> str:
    """repr(obj), or a placeholder when its __repr__ raises."""
    try:
        return repr(obj)
    except Exception:
        return f"<a {type(obj).__name__} that cannot be shown>"


def describe_error(exc, reference) -> list:
    """Type, message and the learner's line of an exception raised inside their function."""
    msg = re.sub(r"0x[0-9a-fA-F]+", "0x...", safe_str(exc)).strip()
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
    text = safe_str(exc)
    if isinstance(exc, TypeError) and ("argument" in text or "positional" in text):
        return f"Hint: your function should take the same arguments as mc.{reference.__name__}" \
               f"({signature_text(reference)})."
    if "could not be broadcast" in text:
        return ("Hint: print the shapes of both operands; a reduction such as x.max(axis=...) "
                "may need keepdims=True.")
    if "axes don't match" in text:
        return ("Hint: numpy's x.transpose(...) takes every axis in its new order (x.transpose(0, 2, 1, 3)); "
                "PyTorch's x.transpose(a, b) swaps two of them, which numpy writes np.swapaxes(x, a, b).")
    if "matmul" in text and "mismatch" in text:
        return ("Hint: print the shapes of both operands of @; on a batched array K.T reverses "
                "every axis: use np.swapaxes(K, -1, -2) to transpose the last two.")
    return ""


def arg_names(reference, args) -> list:
    """The names of ``reference``'s parameters that ``args`` bind ("argument 1", ... if it has none)."""
    import inspect
    try:
        return list(inspect.signature(reference).bind_partial(*args).arguments)
    except (TypeError, ValueError):
        return [f"argument {i}" for i in range(1, len(args) + 1)]


def signature_text(reference) -> str:
    """The parameters of ``reference`` as a learner writes them: "Q, K, V, mask=None"."""
    import inspect
    try:
        params = inspect.signature(reference).parameters.values()
    except (TypeError, ValueError):
        return "..."
    return ", ".join(p.name if p.default is p.empty else f"{p.name}={p.default!r}" for p in params)


_OWN_CODE = frozenset(f.__code__ for f in (
    guarded, _live_guard, _Guard.begin, _Guard.end, _Guard.watch, _Guard.trace_from, _Guard.new_frame, _Guard.line,
    _Guard.on_alarm, _TimeUp.__init__, _importing, _Capture.start, _Capture.stop, _Routed.write,
    _Routed.flush, _Routed._is_mine, *(_ASYNC or ())))

protect(globals())
