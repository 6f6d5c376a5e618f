"""Every exercise whose reference takes a softmax has a case a softmax without its row maximum subtracted fails.

The reference is run with the package's ``softmax`` replaced, wherever a module of the package holds it, by
the textbook ``exp(x) / sum(exp(x))``: a learner's unstable softmax. Where that reference calls the softmax,
its checker must refuse it (a case with scores large enough for ``exp`` to overflow), else an unstable
answer is accepted.
"""
import contextlib
import io
import sys

import numpy as np
import pytest

import mha_course.check  # noqa: F401 -- every checker registered
from mha_course import attention, fast
from mha_course.check import engine

STABLE = attention.softmax
FAST = fast.attend  # its own softmax: replaced by the textbook kernel, whose softmax is replaced


def _naive(x, axis=-1):
    calls.append(1)
    with np.errstate(all="ignore"):
        e = np.exp(np.asarray(x, dtype=float))
        return e / e.sum(axis=axis, keepdims=True)


calls = []


@contextlib.contextmanager
def unstable_softmax():
    holders = [(m, k) for name, m in list(sys.modules.items()) if name.startswith("mha_course") and m is not None
               for k, v in list(vars(m).items()) if v is STABLE or v is FAST]  # and every alias (_softmax)
    for m, k in holders:
        setattr(m, k, _naive if getattr(m, k) is STABLE else attention.attend)
    try:
        yield
    finally:
        for m, k in holders:
            setattr(m, k, STABLE if getattr(m, k) is _naive else FAST)


def _scaled(v):
    return 100.0 * v if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v


def _outcome(spec, args):
    with contextlib.redirect_stdout(io.StringIO()), np.errstate(all="ignore"):
        try:
            return spec.reference(*args)
        except Exception as e:  # noqa: BLE001
            return type(e)


def _softmax_reaches_the_result(spec) -> bool:
    """The reference's result on the cases' inputs × 100 changes when its softmax is the unstable one."""
    from mha_course.check.compare import same
    for case, _ in spec.expected():
        args = tuple(_scaled(a) for a in case.args)
        stable = _outcome(spec, args)
        calls.clear()
        with unstable_softmax():
            unstable = _outcome(spec, args)
        if calls and not (stable is unstable or (not isinstance(stable, type) and not isinstance(unstable, type)
                                                 and same(unstable, stable))):
            return True
    return False


EXERCISES = sorted(n for n, s in engine.catalogue().items() if hasattr(s, "expected") and hasattr(s, "reference"))


@pytest.mark.parametrize("name", EXERCISES)
def test_an_unstable_softmax_in_the_reference_is_refused(name):
    spec = engine.catalogue()[name]
    spec.expected()  # the expected values come from the stable reference
    if not _softmax_reaches_the_result(spec):
        pytest.skip("the reference takes no softmax, or none that reaches its result")

    def unstable(*args, **kwargs):
        with unstable_softmax():
            return spec.reference(*args, **kwargs)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        accepted = spec.check(unstable)
    assert accepted is False, f"{name}: no case has scores large enough to overflow exp without the row max " \
                              f"subtracted, so an unstable softmax is accepted\n{out.getvalue()}"
