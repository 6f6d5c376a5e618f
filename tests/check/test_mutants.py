"""mha_course.check.mutants: the generator itself (what it changes, what it leaves alone)."""
import os
import time

import numpy as np
import pytest

from mha_course.check import mutants as mutants_module
from mha_course.check.mutants import CATEGORIES, mutants


def _attention(Q, K, V, mask):
    """The textbook attention, written as a learner would: the mutants' playground."""
    d_k = Q.shape[-1]
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(d_k)
    scores = np.where(mask, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = e / e.sum(axis=-1, keepdims=True)
    return weights @ V


def _checked(x, h):
    if x.ndim != 2:
        raise ValueError(f"x must be 2-d, got {x.ndim}")
    assert h > 0, "h must be positive"
    return x[:, :h]


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 3))
    return Q, K, V, np.tril(np.ones((3, 5), dtype=bool), k=2)


def test_every_category_named_is_in_the_vocabulary_and_the_list_is_deterministic():
    first, second = mutants(_attention), mutants(_attention)
    assert [m.mutation for m in first] == [m.mutation for m in second]
    assert {m.mutation.category for m in first} <= set(CATEGORIES)
    assert len({m.mutation.id for m in first}) == len(first)  # ids are table keys


def test_the_mistakes_a_learner_makes_are_among_the_mutants():
    got = {(m.mutation.category, m.mutation.before, m.mutation.after) for m in mutants(_attention)}
    for expected in [("axis", "scores.max(axis=-1, keepdims=True)", "scores.max(axis=-2, keepdims=True)"),
                     ("sqrt", "np.sqrt(d_k)", "d_k"),
                     ("transpose", "K.swapaxes(-1, -2)", "K"),
                     ("mask-polarity", "np.where(mask, scores, -np.inf)", "np.where(mask, -np.inf, scores)"),
                     ("keepdims", "True", "False")]:
        assert any(g[0] == expected[0] and expected[1] in g[1] and expected[2] in g[2] for g in got), expected


def test_a_mutant_runs_with_the_references_globals_and_differs_from_it():
    args = _inputs()
    want = _attention(*args)
    m = next(m for m in mutants(_attention) if m.mutation.category == "sqrt" and m.mutation.params_dict().get("dropped"))
    assert m.fn.__name__ == "_attention"
    got = m.fn(*args)
    assert got.shape == want.shape and not np.allclose(got, want)
    assert mutants_module.mutants(_attention)[0].fn(*args) is not None


def test_statement_swaps_with_a_softmax_and_a_mask_are_named_mask_after_softmax():
    def masked_late(scores, mask):
        weights = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)  # the softmax
        weights = np.where(mask, weights, 0.0)
        return weights

    def ref(scores, mask):
        scores = np.where(mask, scores, -np.inf)
        weights = softmax(scores)
        return weights
    softmax = masked_late  # noqa: F841 (a free variable of ref)
    cats = [m.mutation.category for m in mutants(ref)]
    assert "mask-after-softmax" in cats


def test_argument_checks_docstrings_and_messages_are_not_mutated():
    lines = {m.mutation.offset for m in mutants(_checked)}
    assert lines == {4}  # only the return line: the raise, its if and the assert are left alone


def test_closures_keep_their_cells():
    scale = 3.0

    def ref(x):
        return x * scale
    outs = {float(m.fn(np.float64(2.0))) for m in mutants(ref)}
    assert 6.0 not in outs and {2.0, 2.0 / 3.0} <= outs  # dropped factor, * -> /


def test_a_lambda_among_others_on_one_line_is_found():
    pair = (lambda x: x + 1, lambda y: y * 2)
    assert {m.mutation.after for m in mutants(pair[1])} >= {"y / 2", "y * 3"}
    assert all("x" not in m.mutation.before for m in mutants(pair[1]))


def test_first_and_last_occurrence_of_nonzero():
    def ref(tokens, t):
        return np.nonzero(tokens[:t] == tokens[t])[0]
    by = {m.mutation.category: m.fn for m in mutants(ref)}
    tokens = np.array([5, 1, 5, 2, 5, 5])
    assert by["first-occurrence"](tokens, 5).tolist() == [0]
    assert by["last-occurrence"](tokens, 5).tolist() == [4]


def test_helpers_are_mutated_through_a_copy_of_the_globals_at_depth_1():
    from mha_course.lessons.circuits import prefix_matching_score
    shallow, deep = mutants(prefix_matching_score), mutants(prefix_matching_score, depth=1)
    assert len(deep) > len(shallow)
    assert any(">" in m.mutation.function for m in deep)
    w = np.full((1, 2, 4, 4), 0.25)
    tokens = np.array([[3, 1, 3, 1]])
    want = prefix_matching_score(w, tokens)
    for m in deep[:20]:
        try:
            m.fn(w, tokens)
        except Exception:  # noqa: BLE001 -- a mutant may raise; the reference must not change
            pass
    assert np.array_equal(prefix_matching_score(w, tokens), want)


@pytest.mark.parametrize("bad, error", [(dict(depth=-1), ValueError), (dict(categories=["nope"]), ValueError)])
def test_bad_arguments_are_named(bad, error):
    with pytest.raises(error, match="depth|categories"):
        mutants(_attention, **bad)


def test_a_builtin_is_refused_with_a_type_error():
    with pytest.raises(TypeError, match="Python function"):
        mutants(np.sum)


def test_hundreds_of_mutants_of_a_short_function_take_a_fraction_of_a_second():
    start = time.process_time()
    found = mutants(_attention)
    spent = time.process_time() - start
    assert len(found) > 60
    print(f"{len(found)} mutants in {spent:.3f} s of CPU")  # measured, not asserted (a busy machine)


# ---------------------------------------------------------------------------------------
# mutation testing of every exercise: no mutant that changes the result is accepted
# ---------------------------------------------------------------------------------------
from mha_course.check import derive  # noqa: E402 -- the exercise half of this module
from tests.check import mutation_run  # noqa: E402
from tests.check.equivalent_mutants import EQUIVALENT, reason  # noqa: E402

SAMPLE = None if os.environ.get("MHA_MUTANTS") == "all" else (0, 4)  # make test: every 4th mutant; CI: all


@pytest.fixture
def fast_checker(monkeypatch):
    """A refusal is not diagnosed (only the verdict counts). The time limit stays the checker's own: a shorter one
    would refuse slow right answers on a busy machine (the memory probes at T = 2000)."""
    monkeypatch.setattr(derive, "CALLS", 0)


@pytest.mark.parametrize("name", sorted(mutation_run.exercises()))
def test_every_mutant_that_changes_the_result_is_refused(fast_checker, name):
    """The reference's mutants, given to the checker as a learner's function: each is refused, or it is
    equal to the reference on every case and on the cases redrawn with other seeds, and listed in
    EQUIVALENT with the reason (tests/check/equivalent_mutants.py)."""
    result = mutation_run.run(name, sample=SAMPLE)
    assert not result["survivors"], [m.id for m in result["survivors"]]
    unlisted = [m.id for m in result["equivalent"] + result["unreached"] if reason(name, m) is None]
    assert not unlisted, unlisted


def test_the_equivalent_table_names_exercises_that_exist():
    assert set(EQUIVALENT) <= set(mutation_run.exercises())
    assert all(r.strip() for table in EQUIVALENT.values() for r in table.values())
