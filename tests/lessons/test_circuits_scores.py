"""lessons.circuits_scores: the head scores on hand-built patterns (exact values), the copying score on
matrices with known eigenvalues, the composition score's invariances (Hypothesis), the circuits of the
trained model, the random composition baseline, rollout.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import mha_course as mc
from mha_course.lessons import checkpoints
from mha_course.lessons import circuits_data as cdata
from mha_course.lessons import circuits_scores as cs
from mha_course.lessons import model as train

CONFIG, PARAMS, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))


def uniform_causal(T):
    """(T, T): query t attends uniformly to keys 0..t."""
    w = np.tril(np.ones((T, T)))
    return w / w.sum(1, keepdims=True)


def test_previous_token_score_exact_on_hand_built_heads():
    prev = np.eye(4, k=-1)
    prev[0, 0] = 1.0
    w = np.stack([prev, uniform_causal(4)])  # (h=2, T=4, S=4)
    got = mc.previous_token_score(w)
    assert got.shape == (2,)
    assert got[0] == 1.0
    assert got[1] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)  # mean over t = 1, 2, 3 of 1 / (t + 1)
    np.testing.assert_array_equal(mc.previous_token_score(w[None]), got)  # (B, h, T, S) == (h, T, S)


def test_previous_token_score_means_over_the_batch():
    a, b = np.eye(3, k=-1), np.zeros((3, 3))
    a[0, 0] = b[:, 0] = 1.0  # sequence 0: previous token; sequence 1: always key 0
    got = mc.previous_token_score(np.stack([a, b])[:, None])  # (B=2, h=1, 3, 3)
    assert got[0] == pytest.approx((1 + 1 + 1 + 0) / 4)  # t=1: both 1 (key 0 is t-1); t=2: 1 and 0


def hand_built():
    """tokens a b c a b; queries 3 (a, seen at 0) and 4 (b, seen at 1) repeat; the others do not."""
    tokens = np.array([0, 1, 2, 0, 1])
    w = uniform_causal(5)
    w[3] = [0.5, 0.25, 0.0, 0.25, 0.0]  # on the earlier a: 0.5; on the b after it: 0.25
    w[4] = [0.0, 0.2, 0.7, 0.0, 0.1]    # on the earlier b: 0.2; on the c after it: 0.7
    return w[None], tokens              # (h=1, T, S), (T,)


def test_duplicate_and_prefix_matching_exact():
    w, tokens = hand_built()
    assert mc.duplicate_token_score(w, tokens)[0] == pytest.approx((0.5 + 0.2) / 2)
    assert mc.prefix_matching_score(w, tokens)[0] == pytest.approx((0.25 + 0.7) / 2)


def test_several_earlier_occurrences_add_up_and_s_plus_1_may_be_the_query():
    tokens = np.array([3, 3, 3])
    w = np.array([[1.0, 0, 0], [0.4, 0.6, 0], [0.1, 0.3, 0.6]])[None]
    # query 1: earlier {0}, after {1}; query 2: earlier {0, 1}, after {1, 2}
    assert mc.duplicate_token_score(w, tokens)[0] == pytest.approx((0.4 + 0.4) / 2)
    assert mc.prefix_matching_score(w, tokens)[0] == pytest.approx((0.6 + 0.9) / 2)


def test_scores_pool_the_queries_of_the_batch_and_broadcast_tokens():
    w, tokens = hand_built()
    other = uniform_causal(5)[None]
    both = np.stack([w, other])  # (B=2, h=1, T, S)
    tok2 = np.stack([tokens, np.array([4, 4, 5, 6, 7])])  # sequence 1: only query 1 repeats (weight 1/2)
    assert mc.duplicate_token_score(both, tok2)[0] == pytest.approx((0.5 + 0.2 + 0.5) / 3)
    assert mc.prefix_matching_score(both, tok2)[0] == pytest.approx((0.25 + 0.7 + 0.5) / 3)
    same = np.stack([w, w])
    np.testing.assert_allclose(mc.prefix_matching_score(same, tokens), mc.prefix_matching_score(w, tokens))


def test_scores_per_head_and_the_detector():
    w, tokens = hand_built()
    two = np.concatenate([w, uniform_causal(5)[None]])  # (h=2, T, S)
    scores = cs.head_scores([two, two[::-1]], tokens)
    assert set(scores) == set(cs.SCORE_NAMES) and scores["prefix_matching"].shape == (2, 2)
    assert scores["prefix_matching"][0, 0] == scores["prefix_matching"][1, 1] == pytest.approx(0.475)


@pytest.mark.parametrize("call", [
    lambda: mc.prefix_matching_score(np.ones((2, 3, 4)), [0, 1, 2, 0]),      # T != S
    lambda: mc.duplicate_token_score(uniform_causal(4)[None], [0, 1, 0]),     # tokens too short
    lambda: mc.prefix_matching_score(uniform_causal(4)[None], [0, 1, 2, 3]),  # nothing repeats
    lambda: mc.previous_token_score(np.ones(4)),
])
def test_bad_input_is_a_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_the_trained_model_has_a_previous_token_and_an_induction_head():
    batch = train.make_batch(CONFIG, np.random.default_rng(5), 128)
    _, weights = train.forward(PARAMS, batch.tokens, CONFIG)
    assert mc.previous_token_score(weights[0]).max() > 0.6
    assert mc.prefix_matching_score(weights[1], batch.tokens).max() > 0.85


def rotation(theta):
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


@pytest.mark.parametrize("W, want", [
    (np.eye(5), 1.0),
    (-np.eye(3), -1.0),
    (rotation(np.pi / 3), 0.5),          # eigenvalues e^{+-i pi/3}: sum 2 cos, sizes 2
    (rotation(np.pi / 2), 0.0),
    (np.diag([3.0, -1.0]), 0.5),         # (3 - 1) / (3 + 1)
    (np.array([[2.0, 5.0], [0.0, -2.0]]), 0.0),  # triangular: eigenvalues 2 and -2
])
def test_copying_score_on_known_eigenvalues(W, want):
    assert mc.copying_score(W) == pytest.approx(want, abs=1e-12)


def test_copying_score_is_similarity_and_scale_invariant():
    rng = np.random.default_rng(0)
    S = rng.normal(size=(4, 4))
    W = S @ np.diag([2.0, -1.0, 0.5, 3.0]) @ np.linalg.inv(S)
    assert mc.copying_score(W) == pytest.approx(4.5 / 6.5)
    assert mc.copying_score(7 * W) == pytest.approx(mc.copying_score(W))
    with pytest.raises(ValueError):
        mc.copying_score(np.zeros((2, 2)))
    with pytest.raises(ValueError):
        mc.copying_score(np.ones((2, 3)))


def test_the_induction_heads_copy():
    for layer, head in [(1, 0), (1, 1)]:
        assert mc.copying_score(cs.ov_circuit(PARAMS, CONFIG, layer, head)) > 0.9


finite = st.floats(-10, 10, allow_nan=False, width=64)


mat = arrays(np.float64, (4, 4), elements=finite).filter(lambda m: np.linalg.norm(m) > 1e-3)


scale = st.floats(0.01, 100).flatmap(lambda s: st.sampled_from([s, -s]))


@settings(max_examples=60, deadline=None)
@given(mat, mat, scale, scale)
def test_composition_score_scale_invariant_in_each_argument(A, B, a, b):
    assume_product = np.linalg.norm(A @ B) > 1e-6 * np.linalg.norm(A) * np.linalg.norm(B)
    base = mc.composition_score(A, B)
    assert mc.composition_score(a * A, B) == pytest.approx(base, rel=1e-9, abs=1e-12)
    assert mc.composition_score(A, b * B) == pytest.approx(base, rel=1e-9, abs=1e-12)
    assert 0.0 <= base <= 1.0 + 1e-12
    assert base > 0 or not assume_product


@settings(max_examples=60, deadline=None)
@given(mat, mat, st.integers(0, 2 ** 32 - 1))
def test_composition_score_orthogonal_invariance(A, B, seed):
    Q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(4, 4)))
    base = mc.composition_score(A, B)
    for a, b in ((Q @ A, B), (A, B @ Q), (A @ Q, Q.T @ B)):
        assert mc.composition_score(a, b) == pytest.approx(base, rel=1e-7, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, (3, 5), elements=st.floats(-5, 5, width=64)).filter(
    lambda m: (np.linalg.norm(m, axis=1) > 1e-2).all()))
def test_composition_score_is_one_for_aligned_rank_one(vecs):
    u, v, w = vecs[0, :, None], vecs[1, :, None], vecs[2, :, None]  # (5, 1)
    assert mc.composition_score(u @ v.T, v @ w.T) == pytest.approx(1.0)
    x = np.zeros((5, 1))
    x[0], x[1] = v[1, 0], -v[0, 0]  # orthogonal to v
    if np.linalg.norm(x) > 1e-2:
        assert mc.composition_score(u @ v.T, x @ w.T) == pytest.approx(0.0, abs=1e-12)


def test_composition_score_rejects_misfits():
    with pytest.raises(ValueError):
        mc.composition_score(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError):
        mc.composition_score(np.zeros((2, 2)), np.ones((2, 2)))


def test_k_composition_identifies_the_circuit():
    """The previous-token head L1 H1 feeds the keys of the induction head L2 H1: the largest K score, above
    the random baseline, while its Q and V scores are not."""
    scores = cs.composition_scores(PARAMS, CONFIG)
    baseline = cs.composition_baseline(32, 16, np.random.default_rng(0))
    assert np.unravel_index(scores["K"].argmax(), (2, 2)) == (1, 1)
    assert scores["K"][1, 1] > baseline + 0.05
    assert scores["Q"][1, 1] < baseline and scores["V"][1, 1] < baseline


def test_rollout_rows_sum_to_one_and_identity_layers_change_nothing():
    w = [np.stack([uniform_causal(5)] * 2)[None], np.stack([np.eye(5), uniform_causal(5)])[None]]
    r = cs.attention_rollout(w)
    np.testing.assert_allclose(r.sum(-1), 1.0)
    eye = [np.eye(4)[None, None]] * 3
    np.testing.assert_allclose(cs.attention_rollout(eye)[0], np.eye(4))


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_composition_score_does_not_care_about_scale(scale):
    a = np.random.default_rng(0).normal(size=(4, 4))
    b = np.random.default_rng(1).normal(size=(4, 4))
    assert cs.composition_score(scale * a, b) == pytest.approx(cs.composition_score(a, b), rel=1e-9)
    assert cs.composition_score(a, scale * b) == pytest.approx(cs.composition_score(a, b), rel=1e-9)


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_copying_score_does_not_care_about_scale(scale):
    assert cs.copying_score(scale * np.diag([2.0, -1.0])) == pytest.approx(1 / 3)


def test_copying_score_of_a_nilpotent_matrix_says_so():
    with pytest.raises(ValueError, match="nilpotent"):
        cs.copying_score(np.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="W is zero"):
        cs.copying_score(np.zeros((2, 2)))


def test_rollout_of_no_layers_or_mixed_shapes_is_refused():
    with pytest.raises(ValueError, match="empty"):
        cs.attention_rollout([])
    with pytest.raises(ValueError, match="shape"):
        cs.attention_rollout([np.full((1, 1, 2, 2), 0.5), np.full((1, 1, 3, 3), 1 / 3)])


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"d_k": 0}, {"d_model": 8, "d_k": 16}, {"n": 2.5}])
def test_composition_baseline_refuses_empty_or_impossible_sizes(kwargs):
    args = {"d_model": 32, "d_k": 16, "n": 10, **kwargs}
    with pytest.raises(ValueError):
        cs.composition_baseline(args["d_model"], args["d_k"], np.random.default_rng(0), args["n"])


def test_composition_baseline_spread_and_width():
    s = cs.composition_baseline_scores(32, 16, np.random.default_rng(0))
    assert s.shape == (200,) and 0.005 < s.std() < 0.05
    assert cs.composition_baseline(32, 16, np.random.default_rng(0)) == pytest.approx(s.mean())
    wide = cs.composition_baseline(128, 64, np.random.default_rng(0))
    assert 1.7 < s.mean() / wide < 2.3  # about 1 / sqrt(D): 4x the width, half the score


def test_repeated_tokens_and_the_induction_score_on_a_perfect_stripe():
    tok = cdata.repeated_tokens(16, 5, 3, np.random.default_rng(0))
    assert tok.shape == (3, 10) and (tok[:, :5] == tok[:, 5:]).all()
    T, half = 10, 5
    w = np.zeros((2, T, T))
    w[0, np.arange(T), np.maximum(np.arange(T) - half + 1, 0)] = 1.0  # the induction stripe
    w[1] = uniform_causal(T)
    got = cs.repeat_induction_score(w, half)
    assert got[0] == 1.0 and got[1] == pytest.approx(np.mean(1 / (np.arange(half, T) + 1)))
    with pytest.raises(ValueError, match="half"):
        cs.repeat_induction_score(w, 4)


def test_the_trained_induction_head_scores_high_on_repeated_random_tokens():
    tok = cdata.repeated_tokens(CONFIG.vocab, CONFIG.seq_len // 2, 128, np.random.default_rng(1404))
    w = train.forward(PARAMS, tok, CONFIG)[1]
    assert cs.repeat_induction_score(w[1], 12).max() > 0.5 > cs.repeat_induction_score(w[0], 12).max()


def test_ov_spectrum_has_at_most_d_k_nonzero_values_and_matches_the_circuit():
    s = cs.ov_spectrum(PARAMS, CONFIG, 1, 1)
    m = cs.ov_circuit(PARAMS, CONFIG, 1, 1)
    assert (np.diff(s) <= 1e-9).all() and s[0] == pytest.approx(np.linalg.norm(m, 2))
    assert (s ** 2).sum() == pytest.approx((m ** 2).sum())
    assert np.linalg.matrix_rank(m) <= CONFIG.d_model // CONFIG.h


def test_composition_baseline_refuses_a_d_model_past_the_course_limit():
    with pytest.raises(ValueError, match=r"random \(d_model, d_model\) = \(30000, 30000\) products would take"):
        cs.composition_baseline_scores(30_000, 8, np.random.default_rng(0), 3)
