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
from mha_course.check import compare, engine

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
           loops_in_finally, sleeps, lambda x, axis=-1: LoopingArray(), raise_looping_text]


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda f: f.__name__)
def test_learner_code_cannot_outlast_the_limit(capsys, short_limit, attack):
    handler = signal.getsignal(signal.SIGALRM)
    ok, out, took = timed(capsys, check.softmax, attack)
    # the verdict says the limit stopped it; the bound only tells "returned" from "hung" (a busy machine's
    # scheduling never takes a minute), it measures no speed
    assert ok is False and took < LIMIT + 60, (took, out)
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
    compare.close = lambda a, b: True
    compare.compare = engine.compare = lambda *a, **k: []
    engine.RTOL = engine.ATOL = compare.ATOL = 1e9
    assert check.softmax(_wrong_softmax) is False
    assert compare.close(np.zeros(2), np.ones(2)) is False and engine.ATOL == compare.ATOL == 1e-6
    capsys.readouterr()


def test_a_reference_is_computed_with_numpys_own_functions(capsys, monkeypatch):
    check.catalogue()["softmax"].forget()
    monkeypatch.setattr(np, "exp", lambda x: np.ones_like(x))  # a learner's np.exp
    assert check.softmax(lambda x, axis=-1: np.ones_like(x) / x.shape[axis]) is False
    monkeypatch.undo()
    check.catalogue()["softmax"].forget()
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


# ---------------------------------------------------------------------------------------
# rule (c): mistakes nobody catalogued, said in the exercise's terms
# ---------------------------------------------------------------------------------------

def _pooled(Q, h):
    """A toy exercise: Q (T, d_k), h -> (T, T) scores / sqrt(d_k) times h."""
    return h * (Q @ Q.T) / np.sqrt(Q.shape[-1])


def _toy_cases():
    rng = np.random.default_rng(5)
    return [engine.Case((rng.normal(size=(T, d)), h)) for T, d, h in ((3, 4, 2), (4, 9, 3), (2, 16, 5), (5, 25, 4))]


TOY = engine.Exercise("toy", _pooled, _toy_cases, sizes=lambda Q, h: {"d_k": Q.shape[-1], "h": h}, register=False)


def toy(capsys, fn, spec=TOY):
    ok = spec.check(fn)
    return ok, capsys.readouterr().out


@pytest.mark.parametrize("fn, words", [
    (lambda Q, h: h * (Q @ Q.T) / Q.shape[-1], "every value of result is 1/sqrt(d_k) ("),
    (lambda Q, h: (Q @ Q.T) / np.sqrt(Q.shape[-1]), "every value of result is 1/h ("),
    (lambda Q, h: h * h * (Q @ Q.T) / np.sqrt(Q.shape[-1]), "every value of result is h ("),
    (lambda Q, h: h * (Q @ Q.T), "every value of result is sqrt(d_k) ("),
    (lambda Q, h: 2 * _pooled(Q, h), "every value of result is 2 times the expected one"),
    (lambda Q, h: -_pooled(Q, h) + 0 * Q[:1, :1], "Found: result has the opposite sign"),
])
def test_a_factor_or_sign_is_named_in_the_exercises_terms(capsys, fn, words):
    ok, out = toy(capsys, fn)
    assert ok is False and words in out, out
    assert "-8.6" not in out and "e-17 times" not in out and "not one of the mistakes" not in out


@pytest.mark.parametrize("fn, words", [
    (lambda Q, h: 1.37 * _pooled(Q, h), "every value is 1.37 times the expected one"),
    (lambda Q, h: 0 * _pooled(Q, h), "every value is 0 (an all-zero result)"),
])
def test_an_unnamed_factor_or_zero_is_localised(capsys, fn, words):
    ok, out = toy(capsys, fn)
    assert ok is False and words in out and "not one of the mistakes I know" in out, out
    assert "Every shape is right" in out and "Print the shape" not in out, out


def test_shape_advice_only_when_a_shape_is_wrong(capsys):
    ok, out = toy(capsys, lambda Q, h: _pooled(Q, h)[:, :-1])
    assert ok is False and "Print the shape of each step" in out, out


def test_a_permutation_is_named_only_when_it_is_one(capsys):
    spec = engine.Exercise("rows", lambda x: x, lambda: [engine.Case((np.arange(12.0).reshape(4, 3) ** 2,))], register=False)
    ok, out = toy(capsys, lambda x: x[[2, 0, 3, 1]], spec)
    assert ok is False and "rows (axis 0) are reordered (a permutation): yours in order 2, 0, 3, 1" in out, out
    ok, out = toy(capsys, lambda x: x[[2, 2, 3, 1]], spec)
    assert ok is False and "reordered" not in out, out


def test_transposed_is_named(capsys):
    ok, out = toy(capsys, lambda Q, h: _pooled(Q, h).T + np.triu(np.ones((len(Q), len(Q))), 1) * 0)
    assert ok is True  # symmetric: a transpose of Q Q^T is the same matrix (right)
    spec = engine.Exercise("square", lambda x: x @ np.diag(np.arange(1.0, len(x) + 1)),
                        lambda: [engine.Case((np.arange(9.0).reshape(3, 3) + 1,))], register=False)
    ok, out = toy(capsys, lambda x: (x @ np.diag(np.arange(1.0, len(x) + 1))).T, spec)
    assert ok is False and "Found: result has its row and column axes swapped" in out, out


def test_one_dimensional_results_say_entries(capsys):
    spec = engine.Exercise("vec", lambda x: x * 2, lambda: [engine.Case((np.arange(1.0, 6.0),))], register=False)
    ok, out = toy(capsys, lambda x: (x * 2)[[1, 0, 2, 3, 4]], spec)
    assert ok is False and "entries (axis 0)" in out and "entrys" not in out, out


def test_no_runtime_warning_from_nan_results_reaches_the_learner(capsys):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok, out = toy(capsys, lambda Q, h: np.where(_pooled(Q, h) > 0, np.nan, _pooled(Q, h)))
    assert ok is False and "nan or inf" in out, out


# ---------------------------------------------------------------------------------------
# natural types
# ---------------------------------------------------------------------------------------

def test_the_type_the_reference_returns_is_enforced(capsys):
    pair = engine.Exercise("pair", lambda a: (a, 2 * a), lambda: [engine.Case((np.ones(3),))], outputs=("a", "b"), register=False)
    assert pair.check(lambda a: (a, 2 * a)) is True
    assert pair.check(lambda a: [a, 2 * a]) is False
    assert "it returned a list of 2 values, expected a tuple (a, b). Fix: return a, b" in capsys.readouterr().out
    assert pair.check(lambda a: (list(a), 2 * a)) is False
    assert "a: the values are right but it is a list where a numpy array of shape (3,)" in capsys.readouterr().out
    count = engine.Exercise("count", lambda n: n // 2, lambda: [engine.Case((8,)), engine.Case((5,))], register=False)
    assert count.check(lambda n: np.int64(n // 2)) is True
    assert count.check(lambda n: float(n // 2)) is False
    assert "expected a whole number (int)" in capsys.readouterr().out
    assert count.check(lambda n: np.array(n // 2)) is False
    assert "numpy array of shape () where a number (int) is expected" in capsys.readouterr().out
    assert count.check(lambda n: n / 2) is False
    ratio = engine.Exercise("ratio", lambda n: n / 2, lambda: [engine.Case((8,))], register=False)
    assert ratio.check(lambda n: np.float64(n / 2)) is True and ratio.check(lambda n: n // 2 if n % 2 == 0 else n / 2)
    assert ratio.check(lambda n: np.array(n / 2)) is False
    assert "where a number (float) is expected. Fix: return float(...)" in capsys.readouterr().out
    single = engine.Exercise("single", lambda a: a * 2, lambda: [engine.Case((np.ones(3),))], register=False)
    assert single.check(lambda a: (a * 2).astype(np.float32)) is False
    assert "the dtype is float32" in capsys.readouterr().out
    strict = engine.Exercise("strict", lambda n: n // 2, lambda: [engine.Case((8,))], strict_types=True, register=False)
    assert strict.check(lambda n: float(n // 2)) is False
    assert "expected a whole number (int)" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------
# the exercise's own rules: a forbidden function (a spy), a wrong return type
# ---------------------------------------------------------------------------------------

from mha_course.attention import softmax as renamed_softmax  # noqa: E402 -- an alias imported before the check


def test_a_forbidden_python_function_is_detected_even_under_an_alias(capsys):
    import mha_course.attention as attention
    spec = engine.Exercise("no_softmax", lambda x: mc.softmax(x), lambda: [engine.Case((np.ones((2, 3)),))],
                           rules=(engine.Forbid("mc.softmax", "mha_course.attention", "softmax",
                                                "write exp(x - max) / sum yourself"),), register=False)
    for fn in (lambda x: attention.softmax(x), lambda x: mc.softmax(x), lambda x: renamed_softmax(x)):
        assert spec.check(fn) is False
        out = capsys.readouterr().out
        assert "your function calls mc.softmax, which this exercise asks you not to use" in out, out

    def own(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    assert spec.check(own) is True


def test_a_forbidden_c_function_is_detected(capsys):
    import math
    spec = engine.Exercise("no_sqrt", lambda x: x ** 0.5, lambda: [engine.Case((4.0,))],
                        rules=(engine.Forbid("math.sqrt", "math", "sqrt", "use x ** 0.5"),), register=False)
    assert spec.check(lambda x: math.sqrt(x)) is False
    assert "your function calls math.sqrt" in capsys.readouterr().out
    assert spec.check(lambda x: x ** 0.5) is True


def test_a_wrong_return_type_is_named(capsys):
    torch = pytest.importorskip("torch")
    spec = engine.Exercise("tensor", lambda x: np.asarray(x) * 2, lambda: [engine.Case((np.ones(3),))],
                        rules=(engine.Returns("torch.Tensor", "torch.as_tensor(result)"),), register=False)
    assert spec.check(lambda x: np.asarray(x) * 2) is False
    out = capsys.readouterr().out
    assert "it returned a numpy.ndarray, expected a torch.Tensor. Fix: torch.as_tensor(result)" in out, out
    assert spec.check(lambda x: torch.as_tensor(x) * 2) is True
    assert spec.check(lambda x: (torch.as_tensor(x) * 2).requires_grad_()) is True


def test_scaled_dot_product_attention_inside_torch_attention_is_caught(capsys):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    rule = engine.Forbid("F.scaled_dot_product_attention", "torch.nn.functional", "scaled_dot_product_attention",
                         "compute the scores, the mask and the softmax yourself")

    def reference(q, k, v):
        s = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
        return torch.softmax(s, dim=-1) @ v
    rng = np.random.default_rng(0)
    spec = engine.Exercise("torch_sdpa", reference,
                           lambda: [engine.Case(tuple(torch.from_numpy(rng.normal(size=(2, 3, 4))) for _ in range(3)))],
                           rules=(rule,), register=False)
    assert spec.check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)) is False
    assert "your function calls F.scaled_dot_product_attention" in capsys.readouterr().out
    assert spec.check(reference) is True


def test_matches_and_exercise_refuse_what_no_checker_can_run():
    """An author's slip (no cases, a note per case missing, a list for the cases function) is named at once."""
    from mha_course.check import engine as eng
    with pytest.raises(ValueError, match="one argument tuple or more in cases"):
        eng.matches(lambda n: n, lambda n: n, [])
    with pytest.raises(ValueError, match="one note per case"):
        eng.matches(lambda n: n, lambda n: n, [(1,), (2,)], notes=["a"])
    with pytest.raises(ValueError, match="cases as a function"):
        eng.Exercise("toy", lambda n: n, [(1,)], register=False)
    with pytest.raises(ValueError, match=r"needs a name \(a non-empty string\)"):
        eng.Exercise("", lambda n: n, lambda: [(1,)], register=False)
    assert eng.matches(lambda n: n * n, lambda n: n ** 2, [(3,)])  # a lambda reference: named '<lambda>'
    with pytest.raises(ValueError, match=r"outputs=5 must name a tuple's outputs"):
        eng.matches(lambda n: n, lambda n: n, [(1,)], outputs=5)


def test_an_authors_exercise_cannot_take_the_name_of_a_course_checker():
    """check.softmax would still run the course's checker while catalogue() said otherwise."""
    from mha_course.check import engine as eng
    with pytest.raises(ValueError, match="'softmax' is one of the course's checkers"):
        eng.Exercise("softmax", lambda x: x, lambda: [eng.Case((1.0,))])
    assert eng.catalogue()["softmax"].name == "softmax" and eng.catalogue()["softmax"].reference is not None
    eng.Exercise("softmax", lambda x: x, lambda: [eng.Case((1.0,))], register=False)  # a toy: fine


def test_a_default_other_than_the_exercises_is_named(capsys):
    spec = engine.Exercise("flagged", lambda n, double=False: 2 * n if double else n,
                           lambda: [engine.Case((3, False)), engine.Case((3, True))], register=False)
    assert spec.check(lambda n, double=False: 2 * n if double else n) is True
    assert spec.check(lambda n, double: 2 * n if double else n) is True  # no default: every call passes it
    capsys.readouterr()
    assert spec.check(lambda n, double=True: 2 * n if double else n) is False
    out = capsys.readouterr().out
    assert "has double=True as its default, the exercise's signature has double=False" in out, out
