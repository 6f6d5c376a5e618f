"""The checker engine itself: the time limit the learner's code cannot switch off, capped output,
private comparisons, the messages for mistakes nobody catalogued (rule c), natural types, the
exercise's own rules (a forbidden function, a wrong return type).

Each behaviour is tested with wrong implementations the engine must catch and right ones it
must accept.
"""
import os
import signal
import sys
import time

import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.check import engine

LIMIT = 0.3


@pytest.fixture
def short_limit(monkeypatch):
    monkeypatch.setattr(engine, "TIME_LIMIT", LIMIT)


def timed(capsys, checker, fn):
    start = time.monotonic()
    ok = checker(fn)
    return ok, capsys.readouterr().out, time.monotonic() - start


# ---------------------------------------------------------------------------------------
# the time limit
# ---------------------------------------------------------------------------------------

def endless(x, axis=-1):
    while True:
        pass


def bare_except_retry(x, axis=-1):
    while True:
        try:
            while True:
                pass
        except:  # noqa: E722 -- the attack
            pass


def ignores_sigalrm(x, axis=-1):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass


def resets_the_timer(x, axis=-1):
    while True:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.alarm(0)
        try:
            total = 0
            for i in range(10 ** 5):
                total += i
        except BaseException:
            pass


def switches_tracing_off(x, axis=-1):
    while True:
        try:
            sys.settrace(None)
            while True:
                pass
        except BaseException:
            sys.settrace(None)


def loops_in_finally(x, axis=-1):
    try:
        while True:
            pass
    finally:
        while True:
            pass


def sleeps(x, axis=-1):
    time.sleep(60)


def retries_in_the_caller(x, axis=-1):
    def inner():
        while True:
            pass
    while True:
        try:
            return inner()
        except:  # noqa: E722
            pass


class LoopingArray:
    def __array__(self, dtype=None, copy=None):
        while True:
            pass


class LoopingText(Exception):
    def __str__(self):
        while True:
            pass


def raise_looping_text(x, axis=-1):
    raise LoopingText()


ATTACKS = [endless, bare_except_retry, ignores_sigalrm, resets_the_timer, switches_tracing_off,
           loops_in_finally, sleeps, retries_in_the_caller, lambda x, axis=-1: LoopingArray(), raise_looping_text]


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda f: f.__name__)
def test_learner_code_cannot_outlast_the_limit(capsys, short_limit, attack):
    handler = signal.getsignal(signal.SIGALRM)
    ok, out, took = timed(capsys, check.softmax, attack)
    assert ok is False and took < LIMIT + 3, (took, out)
    assert f"it did not finish within {LIMIT:g} s" in out, out
    assert signal.getsignal(signal.SIGALRM) == handler and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert sys.gettrace() is None or sys.gettrace() is not None and "Guard" not in repr(sys.gettrace())


def test_after_a_time_out_the_next_check_runs_normally(capsys, short_limit):
    timed(capsys, check.softmax, bare_except_retry)
    ok, out, took = timed(capsys, check.softmax, mc.softmax)
    assert ok is True and out.startswith("✔ softmax"), out
    total = 0
    for i in range(1000):  # no exception lands later in the test's own code
        total += i
    assert total == 499500


@pytest.mark.parametrize("raise_it, name", [
    (lambda: (_ for _ in ()).throw(GeneratorExit), "GeneratorExit"),
    (lambda: sys.exit(3), "SystemExit"),
    (lambda: exec("raise KeyboardInterrupt"), "KeyboardInterrupt"),
])
def test_exits_and_interrupts_are_reported_not_raised(capsys, raise_it, name):
    ok, out, _ = timed(capsys, check.softmax, lambda x, axis=-1: raise_it())
    assert ok is False and name in out, out


def test_call_learner_returns_or_raises_learner_failed():
    assert engine.call_learner(lambda a, b=1: a + b, 2, b=3) == 5
    with pytest.raises(engine.LearnerFailed) as failed:
        engine.call_learner(bare_except_retry, None, timeout=0.2)
    assert failed.value.timed_out and "did not finish within 0.2 s" in failed.value.lines[0]
    for exc in (SystemExit(2), GeneratorExit(), KeyboardInterrupt(), ValueError("no")):
        def raiser(exc=exc):
            raise exc
        with pytest.raises(engine.LearnerFailed) as failed:
            engine.call_learner(raiser)
        assert failed.value.error is exc and not failed.value.timed_out
    assert isinstance(engine.LearnerFailed(["x"]), Exception)


def test_call_learner_works_outside_the_main_thread():
    import threading
    box = {}

    def worker():
        try:
            engine.call_learner(bare_except_retry, None, timeout=0.2)
        except engine.LearnerFailed as failed:
            box["timed_out"] = failed.timed_out
    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    assert box == {"timed_out": True}


def test_a_loop_inside_a_probe_is_stopped():
    """A probe (the leak probe, the memory probe) wraps its whole run in call_learner."""
    def probe(fn):
        return np.asarray(fn(np.zeros(3)))
    with pytest.raises(engine.LearnerFailed):
        engine.call_learner(probe, lambda x: LoopingArray(), timeout=0.2)


def test_an_import_is_waited_for(capsys, short_limit, tmp_path, monkeypatch):
    (tmp_path / "slow_module_for_engine.py").write_text("import time\ntime.sleep(0.6)\nVALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(engine.LearnerFailed):
            engine.call_learner(lambda: __import__("slow_module_for_engine") and endless(None))
        assert sys.modules["slow_module_for_engine"].VALUE == 3
    finally:
        sys.modules.pop("slow_module_for_engine", None)


# ---------------------------------------------------------------------------------------
# printing is capped at every level
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("write", [
    lambda: sys.stderr.write("e" * 10 ** 7),
    lambda: os.write(1, b"o" * 10 ** 7),
    lambda: os.write(2, b"r" * 10 ** 7),
    lambda: print("p" * 10 ** 7),
], ids=["stderr", "fd 1", "fd 2", "print"])
def test_output_of_every_kind_is_capped(capfd, write):
    def chatty(x, axis=-1):
        write()
        return mc.softmax(x, axis)
    assert check.softmax(chatty) is True
    out, err = capfd.readouterr()
    assert len(out) + len(err) < 4 * engine.PRINT_CHARS and "the checker shows at most" in out, (len(out), len(err))


def test_output_inside_call_learner_is_dropped(capfd):
    engine.call_learner(lambda: (print("x" * 10 ** 6), os.write(1, b"y" * 10 ** 6)))
    out, err = capfd.readouterr()
    assert out == "" and err == ""


# ---------------------------------------------------------------------------------------
# private references, cases not readable from a docstring, shapes of whole numbers
# ---------------------------------------------------------------------------------------

def _wrong_softmax(x, axis=-1):
    return np.exp(x)


def test_replacing_np_isclose_or_the_engines_close_does_not_pass(capsys, monkeypatch):
    monkeypatch.setattr(np, "isclose", lambda *a, **k: np.ones(np.broadcast(*a[:2]).shape, bool))
    monkeypatch.setattr(np, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(np, "all", lambda *a, **k: True)
    assert check.softmax(_wrong_softmax) is False
    engine._close = lambda a, b: True
    engine._compare = lambda *a, **k: []
    engine.RTOL = engine.ATOL = 1e9
    assert check.softmax(_wrong_softmax) is False
    assert engine._close(np.zeros(2), np.ones(2)) is False and engine.ATOL == 1e-6
    capsys.readouterr()


def test_a_reference_is_computed_with_numpys_own_functions(capsys, monkeypatch):
    check.catalogue()["softmax"]._memo.clear()
    monkeypatch.setattr(np, "exp", lambda x: np.ones_like(x))  # a learner's np.exp
    assert check.softmax(lambda x, axis=-1: np.ones_like(x) / x.shape[axis]) is False
    monkeypatch.undo()
    check.catalogue()["softmax"]._memo.clear()
    capsys.readouterr()


_DOCSTRING_SIZES = {((2, 5, 12), 3), ((3, 4, 10), 2), ((4, 3, 18), 6), ((2, 7, 8), 4)}


def split_heads_for_listed_shapes(x, h):
    """Right for the four shapes the old docstring listed, wrong elsewhere."""
    B, T, D = x.shape
    out = x.reshape(B, T, h, D // h).transpose(0, 2, 1, 3)
    return out if (x.shape, h) in _DOCSTRING_SIZES else out * 0


def test_a_split_heads_fitted_to_the_docstrings_shapes_fails(capsys):
    assert check.split_heads(split_heads_for_listed_shapes) is False
    assert check.split_heads(mc.split_heads) is True
    cases = check.catalogue()["split_heads"].cases()
    assert len(cases) >= 8 and all(len({c.args[0].shape[i] for c in cases}) >= 3 for i in range(3))
    assert len({c.args[1] for c in cases}) >= 3
    capsys.readouterr()


def test_cross_attention_shapes_refuses_a_float_d_k(capsys):
    def true_division(B, T, S, d_model, h):
        d_k = d_model / h
        return {"Q": (B, T, d_model), "K": (B, S, d_model), "V": (B, S, d_model),
                "Q_heads": (B, h, T, d_k), "K_heads": (B, h, S, d_k), "V_heads": (B, h, S, d_k),
                "scores": (B, h, T, S), "weights": (B, h, T, S), "head_outputs": (B, h, T, d_k),
                "concat": (B, T, d_model), "output": (B, T, d_model)}
    assert check.cross_attention_shapes(true_division) is False
    out = capsys.readouterr().out
    assert "is a float, and a shape holds whole numbers" in out and "d_k = d_model // h" in out, out

    def whole(B, T, S, d_model, h):
        return {k: tuple(int(n) for n in v) for k, v in true_division(B, T, S, d_model, h).items()}
    assert check.cross_attention_shapes(whole) is True
    capsys.readouterr()
