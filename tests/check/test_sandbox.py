"""The checker's sandbox: numpy errors raised globally, numpy patched in its submodules, the
checker's own functions replaced, printing from fd 1 and from other threads (each found by an attack on the engine).

The time limit's attacks are in test_engine.py (they run through a checker).
"""
import os
import tempfile
import threading
import time

import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.check import compare, engine, sandbox


def test_every_checker_runs_under_seterr_raise(capsys):
    """lse_merge built its cases outside errstate and raised FloatingPointError."""
    old = np.seterr(all="raise")
    try:
        for name in ("lse_merge", "softmax", "scaled_dot_product_attention", "copying_score"):
            exercise = check.catalogue()[name]
            exercise.forget()
            assert exercise.check(exercise.reference) is True, capsys.readouterr().out
        assert check.softmax(lambda x, axis=-1: np.exp(x)) is False
    finally:
        np.seterr(**old)
    capsys.readouterr()


def test_a_patch_of_np_linalg_does_not_poison_the_expected_values(capsys, monkeypatch):
    """np.linalg.eigvals patched before the first check: the wrong 1.0 passed, later the right answer failed."""
    exercise = check.catalogue()["copying_score"]
    exercise.forget()
    monkeypatch.setattr(np.linalg, "eigvals", lambda W: np.ones(len(W)))
    assert check.copying_score(lambda W: 1.0) is False
    monkeypatch.undo()
    assert check.copying_score(exercise.reference) is True
    capsys.readouterr()


def test_the_checkers_numpy_is_read_only():
    with pytest.raises(AttributeError, match="read-only"):
        sandbox.np.isclose = lambda *a, **k: True
    assert sandbox.np.isclose(1.0, 2.0) is np.False_


def test_the_checkers_functions_replaced_from_inside_the_learners_call_are_put_back(capsys):
    def sneaky(x, axis=-1):
        compare.compare = engine.compare = lambda *a, **k: []
        compare.close = lambda a, b: True
        return np.exp(x)
    assert check.softmax(sneaky) is False
    assert compare.close(np.zeros(2), np.ones(2)) is False
    capsys.readouterr()


def test_the_memoised_values_cannot_be_changed_through_prepared(capsys):
    exercise = check.catalogue()["lse_merge"]
    for case, value in exercise.prepared():
        value[...] = 0
    assert exercise.check(exercise.reference) is True
    assert exercise.check(lambda outs, lses: np.zeros_like(outs[0])) is False
    with pytest.raises(ValueError):
        exercise.expected()[0][1][...] = 0  # the kept arrays are read-only
    capsys.readouterr()


def test_the_fd_spill_never_touches_the_disk(capsys, monkeypatch):
    def no_file(*a, **k):
        raise AssertionError("a temporary file was made")
    monkeypatch.setattr(tempfile, "TemporaryFile", no_file)

    def floods(x, axis=-1):
        for _ in range(50):
            os.write(1, b"z" * 10 ** 6)
        return mc.softmax(x, axis)
    assert check.softmax(floods) is True
    out = capsys.readouterr().out
    assert "the checker shows at most" in out and len(out) < 4 * sandbox.PRINT_CHARS, len(out)


def test_another_threads_printing_is_not_the_learners(capsys):
    stop = threading.Event()

    def background():
        while not stop.is_set():
            print("from the background thread")
            time.sleep(0.005)
    t = threading.Thread(target=background, daemon=True)
    t.start()
    try:
        def slow(x, axis=-1):
            time.sleep(0.05)
            return mc.softmax(x, axis)
        assert check.softmax(slow) is True
    finally:
        stop.set()
        t.join()
    out = capsys.readouterr().out
    assert "your function printed" not in out, out


def test_a_thread_the_learner_starts_prints_as_the_learner(capsys):
    def spawns(x, axis=-1):
        t = threading.Thread(target=print, args=("from my thread",))
        t.start()
        t.join()
        return mc.softmax(x, axis)
    assert check.softmax(spawns) is True
    assert "your function printed" in capsys.readouterr().out


def test_pristine_numpy_puts_a_learners_patch_back_afterwards(monkeypatch):
    mine = lambda x: x  # noqa: E731 -- the learner's np.exp
    monkeypatch.setattr(np, "exp", mine)
    with sandbox.pristine_numpy():
        assert np.exp(0.0) == 1.0
    assert np.exp is mine


def _bare_except_loop(rescued):
    """A learner's softmax that retries for ever, catching everything (``except: pass``), until ``rescued``."""
    def bare_except_loop(x, axis=-1):
        while not rescued.is_set():
            try:
                time.sleep(0.01)
            except:  # noqa: E722 -- the attack
                pass
        return mc.softmax(x, axis)
    return bare_except_loop


def test_a_bare_except_loop_ends_at_the_limit_even_beside_a_stale_guard(capsys, monkeypatch):
    """A guard that ended without leaving the table of running guards must not stand in for the
    limit (the call would run with none: a check once ran past its limit for ever in a full run).

    The learner's loop catches everything (``except: pass``); a rescue timer, far beyond the
    limit, only turns a hang into a failure of this test: it never measures a duration."""
    monkeypatch.setattr(engine, "TIME_LIMIT", 0.3)
    stale = sandbox._Guard(0.3, None)
    stale.done = True  # ended, but still listed for this thread
    monkeypatch.setitem(sandbox._GUARDS, threading.get_ident(), stale)
    rescued = threading.Event()
    rescue = threading.Timer(120, rescued.set)
    rescue.start()

    bare_except_loop = _bare_except_loop(rescued)
    try:
        assert check.softmax(bare_except_loop) is False
    finally:
        rescue.cancel()
    out = capsys.readouterr().out
    assert not rescued.is_set(), "the loop ran until the test's rescue: no limit held"
    assert "it did not finish within 0.3 s" in out, out
    assert threading.get_ident() not in sandbox._GUARDS


@pytest.mark.parametrize("handled", [ValueError, sandbox._TimeUp], ids=["ValueError", "an old time-out"])
def test_a_check_called_inside_an_except_block_still_ends_a_bare_except_loop(capsys, monkeypatch, handled):
    """A learner who calls a check inside ``except ...:`` (or a run left handling an old time-out):
    while an exception is being handled, a new one is made where it is raised, so tracing was
    turned on and then off again by the exception it raised at an 'exception' event, caught inside
    the try body. The rescue timer only turns a hang into a failure; it measures no duration."""
    monkeypatch.setattr(engine, "TIME_LIMIT", 0.3)
    rescued = threading.Event()
    rescue = threading.Timer(120, rescued.set)
    rescue.start()

    bare_except_loop = _bare_except_loop(rescued)
    try:
        try:
            raise handled()
        except BaseException:  # noqa: B036 -- the learner's except block
            verdict = check.softmax(bare_except_loop)
    finally:
        rescue.cancel()
    out = capsys.readouterr().out
    assert not rescued.is_set(), "the loop ran until the test's rescue: no limit held"
    assert verdict is False and "it did not finish within 0.3 s" in out, out


def test_a_learners_function_under_the_limit_never_runs_on_the_packages_pool():
    """Stopped inside the pool's submit, a call would leave the pool's locks held, and the next
    run_jobs (or the process's exit) would wait for ever: under the limit, run_jobs runs serially."""
    import concurrent.futures.thread as cft

    from mha_course import runtime
    threads = set()

    def jobs():
        runtime.run_jobs(lambda job: threads.add(threading.current_thread().name), list(range(8)))
        return 1
    assert sandbox.guarded(jobs, 5.0, sandbox.CappedText()).value == 1
    assert threads == {threading.current_thread().name}, threads

    def spinning():  # stopped by the limit somewhere inside run_jobs, many times over
        while True:
            runtime.run_jobs(lambda job: None, list(range(8)))
    for _ in range(10):
        assert sandbox.guarded(spinning, 0.05, sandbox.CappedText()).timed_out
        assert cft._global_shutdown_lock.acquire(blocking=False), "a stop left concurrent.futures' lock held"
        cft._global_shutdown_lock.release()
    seen = []
    runtime.run_jobs(seen.append, list(range(8)))  # and the pool still works outside the limit
    assert sorted(seen) == list(range(8))
