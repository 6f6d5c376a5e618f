"""The checker's report: the verdict a learner reads, the results kept for the summary, progress.

A verdict is "done" (✔), "unfinished" (⋯, a stub) or "wrong" (✘) with a few lines that say why.
:func:`finish` prints it, keeps the latest status of each checker for :func:`summary` and tells
:func:`mha_course.check.progress.record` (the workshop hub's progress; it never raises).
The results are kept where learner code cannot write them by name: :func:`results` gives a copy.
"""
from __future__ import annotations

from ..mha import MHAParams
from .language import say
from .sandbox import arg_names, np, protect, safe_repr

# each status and how the summary line shows an exercise in it (a fixed phrase, so through say())
SYMBOLS = {"done": lambda name: say("{name} ✔", name=name),
           "unfinished": lambda name: say("{name} ⋯ not finished", name=name),
           "wrong": lambda name: say("{name} ✘", name=name)}


def _results_store():
    """(record(name, status), a copy of {name: status}, forget()) over one dict held in a closure."""
    kept: dict = {}

    def record(name, status):
        kept[name] = status

    def read():
        return dict(kept)

    return record, read, kept.clear


_record, results, _forget = _results_store()


def unfinished_value(value) -> bool:
    """The value of a stub: ``...`` or ``NotImplemented``."""
    return value is Ellipsis or value is NotImplemented


def is_unfinished(got) -> bool:
    """An outcome of a stub: it raised NotImplementedError or returned ``...``."""
    return isinstance(got.error, NotImplementedError) or (got.error is None and unfinished_value(got.value))


def fn_name(fn) -> str:
    """The name a learner gave their function (its type's name for a callable object)."""
    name = getattr(fn, "__name__", None)
    return name if isinstance(name, str) else type(fn).__name__


def report_value(name, value) -> bool:
    """The verdict on something that is not a function: a stub's ``...``, or a value passed by mistake."""
    if unfinished_value(value):
        return finish(name, ("unfinished", [say("⋯ {name}: not finished yet — replace the `...` with your "
                                                 "answer, then run this cell again", name=name)]))
    return finish(name, ("wrong", [say("✘ {name}: expected a function, got a value of type {kind}. Pass the "
                                       "function itself (my_fn), not its result (my_fn(x)).",
                                       name=name, kind=type(value).__name__)]))


def verdict(name, fn, reference, runs, explain) -> tuple:
    """(status, feedback lines) for the runs of one checker; ``explain(run)`` gives the lines of a failing run."""
    if is_unfinished(runs[-1].got):
        return "unfinished", [say("⋯ {name}: not finished yet — write the body of {fn} (replace its "
                                  "`raise NotImplementedError` line), then run both cells again",
                                  name=name, fn=fn_name(fn))]
    failed = [i for i, r in enumerate(runs) if r.problem]
    n = len(runs)
    if not failed:
        return "done", [say("✔ {name}: all {n} cases match", name=name, n=n) if n > 1
                        else say("✔ {name}: the case matches", name=name)]
    if len(failed) < n and all(_out_of_memory_on_a_count(runs[i]) for i in failed):
        i = failed[0]
        return "done", [say("✔ {name}: the {m} other cases match; case {i} ({call}) needs more memory than there is "
                            "in your version: it builds arrays to count what arithmetic gives (so it was left out)",
                            name=name, m=n - len(failed), i=i + 1,
                            call=describe_call(fn, reference, runs[i].case.args))]
    run = runs[failed[0]]
    note = f"  # {run.case.note}" if run.case.note else ""
    head = [say("✘ {name}: case {i} of {n} failed", name=name, i=failed[0] + 1, n=n),
            say("  called {call}", call=describe_call(fn, reference, run.case.args)) + note]
    return "wrong", head + ["  " + ln for ln in explain(run)]


def _out_of_memory_on_a_count(run) -> bool:
    """A case of numbers only (a count of huge sizes) on which the learner's function ran out of memory."""
    return (isinstance(run.got.error, MemoryError) and
            all(isinstance(a, (int, float, np.integer, np.floating)) for a in run.case.args))


def finish(name, verdict, printed=None, mistake=None) -> bool:
    """Print a verdict, record its status for :func:`summary` and the progress; True for "done"."""
    status, lines = verdict
    _record(name, status)
    print("\n".join(lines + ["  " + ln for ln in (printed.lines() if printed else [])]))
    _progress(name, status, mistake)
    return status == "done"


def _progress(name, status, mistake):
    """Tell the hub's progress record (:func:`mha_course.check.progress.record` never raises; the
    notebook is the one this kernel runs, from JPY_SESSION_NAME)."""
    if status == "unfinished":  # a stub is not an attempt: Run All on a fresh copy leaves every exercise "not started"
        return
    from . import progress  # here, not at import: `from mha_course import check` stays light
    progress.record(name, passed=status == "done", mistake=None if status == "done" else mistake)


def report(name: str, status: str, lines) -> bool:
    """Print ``lines`` as checker ``name``'s verdict and record ``status`` ("done", "unfinished" or
    "wrong") for ``summary()``: for a checker that decides without running the learner's code
    (the torch checkers when torch is missing). Returns True only for "done"."""
    if status not in SYMBOLS:
        raise ValueError(f"status={status!r}; use one of {', '.join(SYMBOLS)}")
    return finish(name, (status, list(lines)))


def summary() -> None:
    """Print how many of the checkers called in this kernel passed last time, and each one's state.

    >>> forget_results(); summary()
    no exercise checked yet in this kernel
    """
    kept = results()
    if not kept:
        print(say("no exercise checked yet in this kernel"))
        return
    done = sum(s == "done" for s in kept.values())
    states = say(", ").join(SYMBOLS[s](n) for n, s in kept.items())
    print(say("{done} of {total} exercises done: {states}", done=done, total=len(kept), states=states) if len(kept) > 1
          else say("{done} of 1 exercise done: {states}", done=done, states=states))


def forget_results() -> None:
    """Forget every recorded result (a fresh start for :func:`summary`)."""
    _forget()


def describe_call(fn, reference, args) -> str:
    """``my_fn(Q (2, 3, 4), h=2)``: the call of one case, the arrays by shape."""
    parts = [f"{n}{' ' if isinstance(v, (np.ndarray, MHAParams)) else '='}{_describe_value(v)}"
             for n, v in zip(arg_names(reference, args), args)]
    return f"{fn_name(fn)}({', '.join(parts)})"


def _describe_value(v) -> str:
    if isinstance(v, MHAParams):
        present = [n for n in ("b_q", "b_k", "b_v", "b_o") if getattr(v, n) is not None]
        biases = "no biases" if not present else "with biases" if len(present) == 4 else "with " + ", ".join(present)
        return f"(d_model={v.d_model}, {biases})"
    if isinstance(v, np.ndarray):
        if v.ndim > 1 or v.size > 8:
            return str(v.shape)
        return "[" + ", ".join(f"{x:.4g}" for x in v.tolist()) + "]" if v.dtype.kind == "f" else repr(v.tolist())
    if isinstance(v, (list, tuple)) and v and all(isinstance(a, np.ndarray) and (a.ndim > 1 or a.size > 8) for a in v):
        shapes = list(dict.fromkeys(a.shape for a in v))  # a list of arrays: how many, and their shapes
        return f"[{len(v)} arrays {shapes[0]}]" if len(shapes) == 1 else "[" + ", ".join(str(a.shape) for a in v) + "]"
    return safe_repr(v)


protect(globals())
