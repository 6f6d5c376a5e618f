"""The inputs the probes try (check/probe_inputs.py): each builder changes the case in its one way, and the
relations every case keeps reject an input outside the exercise."""
import numpy as np

from mha_course.check import probe_inputs as pi


def _scores(Q, K):
    """Q (..., T, d), K (..., S, d) -> scores (..., T, S)."""
    return Q @ np.swapaxes(K, -1, -2)


def _given(*cases):
    return pi.Given(_scores, cases[0], list(cases))


def test_valid_refuses_what_the_reference_refuses_and_results_it_cannot_use():
    assert pi.valid(_scores, (np.ones((2, 3)), np.ones((4, 2)))) is pi.INVALID  # a shape mismatch raises
    assert pi.valid(lambda x: np.array([]), (1,)) is pi.INVALID  # empty
    assert pi.valid(lambda x: np.array([np.nan]), (1,)) is pi.INVALID
    assert pi.valid(lambda x: np.array([np.inf]), (1,), finite=True) is pi.INVALID
    assert pi.valid(lambda x: np.array([np.inf]), (1,)) is not pi.INVALID  # a masked score may be -inf


def test_the_relations_every_case_keeps_reject_a_probe_that_breaks_them():
    cases = [(8, 2), (12, 4), (16, 8)]  # d_model, h: h divides d_model, d_model a multiple of 4
    keeps = pi.relations(cases)
    assert keeps((20, 4)) and keeps((16, 16))
    assert not keeps((6, 3))  # d_model not a multiple of 4
    assert not keeps((16, 3))  # h does not divide d_model
    twins = pi.relations([(np.ones((2, 3)), np.ones((2, 3))), (np.ones((4, 1)), np.ones((4, 1)))])
    assert not twins((np.ones((2, 3)), np.ones((1, 3))))  # two arrays of one shape in every case stay so


def test_a_divisor_is_kept_only_where_three_cases_show_it():
    assert pi.relations([(8,), (16,)])((3,))
    assert not pi.relations([(8,), (16,), (24,)])((3,))


def test_each_size_of_the_shape_line_is_cut_and_then_all_together():
    g = _given((np.ones((2, 3, 4)), np.ones((2, 5, 4))))
    made = {what: [a.shape for a in args] for args, what, _, _ in pi.each_at_one(g)}
    assert made["T = 1"] == [(2, 1, 4), (2, 5, 4)] and made["S = 1"] == [(2, 3, 4), (2, 1, 4)]
    assert made["every size at its smallest"] == [(2, 1, 1), (2, 1, 1)]


def test_an_index_below_a_count_is_tried_at_zero_and_a_count_is_not():
    g = pi.Given(lambda i, h: i, (1, 4), [(1, 4), (2, 4), (3, 8)])
    whats = [what for _, what, _, _ in pi.each_at_one(g)]
    assert "i = 0" in whats and "h = 0" not in whats


def test_a_longer_input_repeats_the_entries_along_the_named_axis():
    Q = np.arange(6.0).reshape(3, 2)
    g = _given((Q, np.ones((5, 2))))
    longer = {what: args for args, what, _, _ in pi.each_longer(g)}
    Q64 = longer["T = 64 (the entries repeated)"][0]
    assert Q64.shape == (64, 2) and np.array_equal(Q64[3:6], Q)


def test_integers_are_derived_only_from_finite_arrays_and_all_at_once():
    g = _given((np.array([[0.4, -1.3], [2.2, 0.1]]), np.array([[-np.inf, 1.5]])), (np.ones((1, 2)) * 3, np.ones((1, 2)) * -2))
    (args, what, _, lenient), = pi.integer(g)
    assert what == "integer Q, K" and lenient and all(a.dtype.kind == "i" for a in args)
    assert np.array_equal(args[0], [[6, 6]])  # the second case: the first holds -inf


def test_every_pattern_of_a_mask_is_tried():
    g = pi.Given(lambda keep: keep, (np.array([[True, False], [True, True]]),), [])
    assert [w for _, w, _, _ in pi.masks(g)] == ["keep all True", "keep all False", "keep reversed along its last axis",
                                               "keep with its first row all False"]


def test_tied_arguments_are_the_same_object():
    W = np.ones((2, 2))
    args, what, _, _ = next(pi.twins(pi.Given(lambda a, b: a + b, (W, W.copy()), [])))
    assert args[1] is args[0] and what == "b the same array as a"


def test_huge_sizes_are_only_for_functions_of_numbers_and_refuse_only_wrong_numbers():
    assert list(pi.huge(_given((np.ones((2, 3)), np.ones((4, 3)))))) == []
    made = list(pi.huge(pi.Given(lambda T, d: T * d, (3, 4), [(3, 4)])))
    assert made[0][0] == (3 * (10 ** 6 + 1), 4 * (10 ** 6 + 1)) and all(lenient for *_, lenient in made)


def test_the_size_one_sentence_is_one_sentence_for_every_exercise():
    assert "special case for h = 1" in pi.at_one_hint("h") and "special case for T = 1" in pi.at_one_hint("T")
