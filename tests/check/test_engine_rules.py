"""Rules that hold for EVERY registered checker, read from ``check.catalogue()`` (nothing typed again).

(a) each catalogued mistake is recognised as itself and as no other on the checker's cases
    (the confusion matrix is its diagonal), and the feedback names it;
(b) a mistake the catalogue does not know is still localised: which output, which axis and
    which indices differ, and how (scaled, shifted, reordered, averaged, transposed);
and the engine's guarantees: the reference passes, a stub is "not finished yet" without raising,
a learner's endless loop is stopped, its printing is capped, an exception whose ``__str__``
raises is reported, ``check.summary()`` lists the latest results.
"""
import sys
import threading
import time

import numpy as np
import pytest

from mha_course import check
from mha_course.check import engine, shape_exercise
from mha_course.tools.torch_rule import torch_skip_reason

CATALOGUE = check.catalogue()
FUNCTION_CHECKERS = {n: e for n, e in CATALOGUE.items() if isinstance(e, check.Exercise)}
SHAPE_CHECKERS = {n: e for n, e in CATALOGUE.items() if isinstance(e, check.ShapeExercise)}
PAIRS = [(n, i) for n, e in CATALOGUE.items() for i in range(len(e.mistakes))]
# the checkers that run the learner's PyTorch code: skipped without torch (unless MHA_COURSE_REQUIRE_TORCH=1)
NEEDS_TORCH = {"torch_attn_mask", "torch_attention"}
_NO_TORCH = torch_skip_reason("this PyTorch checker")


def names(checkers):
    """pytest params of checker names; those in NEEDS_TORCH skip with the reason when torch is absent."""
    return [pytest.param(n, marks=pytest.mark.skip(reason=_NO_TORCH)) if _NO_TORCH and n in NEEDS_TORCH else n
            for n in checkers]


def pairs(items):
    return [pytest.param(n, i, id=f"{n}-{i}", marks=pytest.mark.skip(reason=_NO_TORCH))
            if _NO_TORCH and n in NEEDS_TORCH else pytest.param(n, i, id=f"{n}-{i}") for n, i in items]


def run(capsys, name, fn):
    """(result, printed text) of check.<name>(fn)."""
    ok = getattr(check, name)(fn)
    return ok, capsys.readouterr().out


def shape_learner(exercise, mistake=None):
    """A learner's fn(*sizes) -> dict: the true shapes, or those ``mistake`` predicts."""
    def predict(*sizes):
        z = shape_exercise.Sizes(*sizes)
        return exercise.reference(z) if mistake is None else exercise.predicted(mistake, z)
    return predict


def test_every_public_checker_is_catalogued():
    public = {n for n in check.__all__ if n not in engine.__all__ and n not in shape_exercise.__all__}
    assert public == set(CATALOGUE), public ^ set(CATALOGUE)


def test_every_checker_has_mistakes():
    assert all(e.mistakes for e in CATALOGUE.values()), [n for n, e in CATALOGUE.items() if not e.mistakes]


@pytest.mark.parametrize("name", names(FUNCTION_CHECKERS))
def test_reference_passes(capsys, name):
    ok, out = run(capsys, name, FUNCTION_CHECKERS[name].reference)
    assert ok is True and out.startswith(f"✔ {name}: "), out


@pytest.mark.parametrize("name", SHAPE_CHECKERS)
def test_true_shapes_pass(capsys, name):
    assert SHAPE_CHECKERS[name].check(shape_learner(SHAPE_CHECKERS[name])), capsys.readouterr().out


# ---------------------------------------------------------------- (a) the confusion matrix
@pytest.mark.parametrize("name, i", pairs(PAIRS))
def test_mistake_is_recognised_as_itself_and_no_other(capsys, name, i):
    exercise = CATALOGUE[name]
    mistake = exercise.mistakes[i]
    learner = shape_learner(exercise, mistake) if name in SHAPE_CHECKERS else mistake.fn
    found = exercise.recognise(learner)
    capsys.readouterr()
    assert [id(m) for m in found] == [id(mistake)], [m.name for m in found]
    assert exercise.check(learner) is False
    out = capsys.readouterr().out
    assert f"Looks like: {mistake.name}. Fix: {mistake.fix}" in out, out


def test_the_catalogue_is_big_enough():
    """The confusion matrix above has one row per catalogued mistake."""
    assert len(PAIRS) >= 150 and len(CATALOGUE) >= 21


# ---------------------------------------------------------------- (b) localisation of unknown mistakes
def _perturbed(reference, change, index=-1):
    """The reference with ``change`` applied to one output (the last one of a tuple)."""
    def learner(*args):
        out = reference(*args)
        if isinstance(out, dict):  # a dict of outputs: change its last entry
            key = list(out)[index]
            return {**out, key: change(np.asarray(out[key]))}
        if not isinstance(out, tuple):
            return change(np.asarray(out))
        out = list(out)
        out[index] = change(np.asarray(out[index]))
        return tuple(out)
    return learner


def _scale(a):
    return a * 3 if a.dtype.kind in "iu" else a * 1.37


def _last_entry_changed(a):
    a = a.copy()
    a[..., -1, -1] = ~a[..., -1, -1] if a.dtype == bool else a[..., -1, -1] + 0.5
    return a


def _first_value(exercise):
    return exercise.reference(*exercise.prepared()[0][0].args)


def _output_name(exercise):
    out = _first_value(exercise)
    if isinstance(out, dict):
        return list(out)[-1]
    return exercise.outputs[-1] if exercise.outputs else "result"


def _last_output(exercise):
    out = _first_value(exercise)
    if isinstance(out, dict):
        return np.asarray(list(out.values())[-1])
    return np.asarray(out[-1] if exercise.outputs else out)


@pytest.mark.parametrize("name", names(n for n, e in FUNCTION_CHECKERS.items() if _last_output(e).dtype != bool))
def test_unknown_scaling_is_localised(capsys, name):
    exercise = FUNCTION_CHECKERS[name]
    ok, out = run(capsys, name, _perturbed(exercise.reference, _scale))
    assert ok is False and "not one of the mistakes I know" in out, out
    factor = "3" if _last_output(exercise).dtype.kind in "iu" else "1.37"
    assert f"- {_output_name(exercise)}: every value is {factor} times the expected one" in out, out


@pytest.mark.parametrize("name", names(n for n, e in FUNCTION_CHECKERS.items() if _last_output(e).ndim >= 2))
def test_unknown_change_of_one_entry_is_localised(capsys, name):
    exercise = FUNCTION_CHECKERS[name]
    ok, out = run(capsys, name, _perturbed(exercise.reference, _last_entry_changed))
    assert ok is False and "not one of the mistakes I know" in out, out
    assert f"- {_output_name(exercise)}: differences only at " in out, out


@pytest.mark.parametrize("change, how", [
    (lambda w: w[:, ::-1], "Found: weights is in reverse order along its head axis"),
    (lambda w: np.swapaxes(w, -1, -2), "Found: weights has its query and key axes swapped"),
    (lambda w: np.broadcast_to(w.mean(axis=1, keepdims=True), w.shape), "averaged over the head axis"),
    (lambda w: w + 0.25, "shifted by +0.25"),
    (lambda w: np.where(w > 0.3, np.nan, w), "nan or inf where"),
])
def test_how_the_weights_differ_is_named(capsys, change, how):
    exercise = FUNCTION_CHECKERS["causal_multi_head_attention"]
    ok, out = run(capsys, "causal_multi_head_attention", _perturbed(exercise.reference, change))
    assert ok is False and ("- weights: " in out or "Found: weights" in out) and how in out, out


@pytest.mark.parametrize("change, how", [
    (lambda w: w.reshape(w.shape[0], w.shape[1], -1), "the right values with axes query and key merged into one axis of length 25"),
    (lambda w: w.transpose(0, 2, 1, 3), "Found: weights has its query and head axes swapped"),
    (lambda w: w[:, :-1], "axis 1 (head) has length 2, expected 3"),
])
def test_a_wrong_shape_is_described_axis_by_axis(capsys, change, how):
    exercise = FUNCTION_CHECKERS["causal_multi_head_attention"]
    ok, out = run(capsys, "causal_multi_head_attention", _perturbed(exercise.reference, change))
    assert ok is False and how in out, out


@pytest.mark.parametrize("name", SHAPE_CHECKERS)
def test_an_unknown_wrong_stage_is_named_with_both_shapes(capsys, name):
    exercise = SHAPE_CHECKERS[name]

    def learner(*sizes):
        return {**exercise.reference(shape_exercise.Sizes(*sizes)), "scores": (1, 2, 3)}
    assert exercise.check(learner) is False
    out = capsys.readouterr().out
    assert "1 of 11 stages wrong" in out or "1 of 12 stages wrong" in out, out
    assert "scores: expected (" in out and "got (1, 2, 3)" in out, out


# ---------------------------------------------------------------- exceptions, stubs and the summary
def broken(*args):
    return [1, 2][5]  # IndexError inside the learner's code


@pytest.mark.parametrize("name", names(FUNCTION_CHECKERS))
def test_an_exception_is_reported_with_its_line_not_raised(capsys, name):
    ok, out = run(capsys, name, broken)
    assert ok is False and "it raised IndexError" in out and "of broken: return [1, 2][5]" in out, out

def stub(*args):
    raise NotImplementedError("write this")


@pytest.mark.parametrize("name", names(FUNCTION_CHECKERS))
def test_a_stub_is_not_finished_and_does_not_raise(capsys, name):
    ok, out = run(capsys, name, stub)
    assert ok is False
    assert out == (f"⋯ {name}: not finished yet — write the body of stub (replace its "
                   "`raise NotImplementedError` line), then run both cells again\n")


@pytest.mark.parametrize("value", [..., NotImplemented])
def test_an_ellipsis_value_is_not_finished(capsys, value):
    assert check.softmax(value) is False
    assert capsys.readouterr().out.startswith("⋯ softmax: not finished yet — replace the `...`")
    assert check.stage_shapes(value, 2, 5, 12, 3) is False
    assert capsys.readouterr().out.startswith("⋯ stage_shapes: not finished yet")


def test_a_function_returning_ellipsis_is_not_finished(capsys):
    ok, out = run(capsys, "flops", lambda T, d_model: ...)
    assert ok is False and out.startswith("⋯ flops: not finished yet")
    ok, out = run(capsys, "cross_attention_shapes", stub)
    assert ok is False and out.startswith("⋯ cross_attention_shapes: not finished yet")


def test_summary_lists_the_latest_result_of_each_checker_called(capsys):
    engine.forget_results()
    check.softmax(FUNCTION_CHECKERS["softmax"].reference)
    check.causal_mask(stub)
    check.padding_mask(lambda lengths, S: ~FUNCTION_CHECKERS["padding_mask"].reference(lengths, S))
    check.scaled_dot_product_attention(stub)
    check.scaled_dot_product_attention(FUNCTION_CHECKERS["scaled_dot_product_attention"].reference)
    capsys.readouterr()
    check.summary()
    assert capsys.readouterr().out == ("2 of 4 exercises done: softmax ✔, causal_mask ⋯ not finished, "
                                       "padding_mask ✘, scaled_dot_product_attention ✔\n")
    engine.forget_results()
    check.summary()
    assert capsys.readouterr().out == "no exercise checked yet in this kernel\n"


# ---------------------------------------------------------------- time limit, printing, odd exceptions
def endless(x, axis=-1):
    while True:
        pass


def test_an_endless_loop_is_stopped_in_the_main_thread(capsys, monkeypatch):
    monkeypatch.setattr(engine, "TIME_LIMIT", 0.3)
    start = time.monotonic()
    ok, out = run(capsys, "softmax", endless)
    assert ok is False and time.monotonic() - start < 5
    assert "it did not finish within 0.3 s (the checker's limit for one call)" in out, out


def test_an_endless_loop_is_given_up_outside_the_main_thread(monkeypatch):
    monkeypatch.setattr(engine, "TIME_LIMIT", 0.3)
    stop, box = threading.Event(), {}

    def spinning(x, axis=-1):
        while not stop.is_set():
            time.sleep(0.01)

    def worker():
        box["ok"] = check.softmax(spinning)
    t = threading.Thread(target=worker)
    t.start()
    t.join(10)
    stop.set()
    assert box == {"ok": False}


def test_an_earlier_alarm_is_given_back(monkeypatch):
    import signal
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        check.softmax(FUNCTION_CHECKERS["softmax"].reference)
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 20 < left <= 30 and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def test_what_a_learner_prints_is_capped(capsys):
    def chatty(T):
        for i in range(1000):
            print(f"debug line {i}", "x" * 50)
        return np.tril(np.ones((T, T), dtype=bool))
    ok, out = run(capsys, "causal_mask", chatty)
    assert ok is True
    assert out.count("debug line") <= engine.PRINT_LINES and len(out) < 2 * engine.PRINT_CHARS
    assert "your function printed (the start of it):" in out and "the checker shows at most" in out


def test_a_little_printing_is_shown_whole(capsys):
    def talk(T):
        print("T is", T)
        return np.tril(np.ones((T, T), dtype=bool))
    ok, out = run(capsys, "causal_mask", talk)
    assert ok and "your function printed:\n    | T is 6\n    | T is 1" in out and "at most" not in out


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no")


def test_an_exception_whose_str_raises_is_reported(capsys):
    def bad(x, axis=-1):
        raise Unprintable()
    ok, out = run(capsys, "softmax", bad)
    assert ok is False and "it raised Unprintable: <a Unprintable whose message cannot be shown>" in out


def test_a_returned_value_whose_repr_raises_is_reported(capsys):
    class Odd:
        def __repr__(self):
            raise RuntimeError("no")
    ok, out = run(capsys, "crossover_seq_len", lambda d_model: Odd())
    assert ok is False and "✘ crossover_seq_len: case 1" in out


def test_the_time_limit_works_inside_a_jupyter_kernel(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    code = ("from mha_course import check\nfrom mha_course.check import engine\nengine.TIME_LIMIT = 0.5\n"
            "def my_softmax(x, axis=-1):\n    while True:\n        pass\nprint(check.softmax(my_softmax))")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nbclient.NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    text = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert "it did not finish within 0.5 s" in text and text.rstrip().endswith("False"), text


def test_each_differing_output_is_localised_and_unnormalised_weights_are_named(capsys):
    """One head's weights squared: out differs everywhere, weights only in that head, rows no longer sum to 1."""
    reference = FUNCTION_CHECKERS["multi_head_attention"].reference

    def one_head_squared(x, params, h, mask=None, context=None):
        out, w = reference(x, params, h, mask, context)
        w = w.copy()
        w[:, 1] = w[:, 1] ** 2
        return out + 1.0, w
    ok, out = run(capsys, "multi_head_attention", one_head_squared)
    assert ok is False and "- out: every value is shifted by +1" in out, out
    assert "- weights: differences only at head 1 of 3 (axis 1)" in out, out
    assert "- weights: the sums over the key axis are " in out and "where they should be 1" in out, out


def test_an_import_is_not_cut_in_half_by_the_time_limit(capsys, monkeypatch, tmp_path):
    """A module that takes longer to import than the limit is imported whole (no broken sys.modules)."""
    import sys
    (tmp_path / "slow_module_for_check.py").write_text("import time\ntime.sleep(0.6)\nVALUE = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(engine, "TIME_LIMIT", 0.2)

    def learner(T):
        import slow_module_for_check
        return np.tril(np.ones((T, T), dtype=bool)) if slow_module_for_check.VALUE == 3 else None
    try:
        ok, out = run(capsys, "causal_mask", learner)
        # the import always ends whole; the call itself may still be stopped once the import is
        # over (it took longer than the limit), which depends on how loaded the machine is
        assert sys.modules["slow_module_for_check"].VALUE == 3
        assert ok or "did not finish within 0.2 s" in out, out
    finally:
        sys.modules.pop("slow_module_for_check", None)


def test_exit_inside_a_learner_function_is_reported(capsys):
    ok, out = run(capsys, "causal_mask", lambda T: exit(1))
    assert ok is False and "it raised SystemExit: 1" in out


@pytest.mark.parametrize("name", sorted(NEEDS_TORCH))
def test_a_torch_checker_without_torch_says_not_finished_and_does_not_raise(capsys, monkeypatch, name):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` fails, as on a machine without it
    ok, out = run(capsys, name, lambda *args, **kwargs: None)
    assert ok is False and "not finished: this exercise needs PyTorch: pip install torch==2.13.0" in out, out
