"""lessons.circuits: the head scores on hand-built patterns (exact values), the copying score on matrices
with known eigenvalues, the composition score's invariances (Hypothesis), the hooks (patching, ablation,
attribution) against the plain forward pass, and the shipped phase-change trajectories.
"""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import mha_course as mc
from mha_course.lessons import checkpoints
from mha_course.lessons import circuits as ci
from mha_course.lessons import model as train

CONFIG, PARAMS, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
ALL_HEADS = [(layer, head) for layer in range(2) for head in range(2)]


def uniform_causal(T):
    """(T, T): query t attends uniformly to keys 0..t."""
    w = np.tril(np.ones((T, T)))
    return w / w.sum(1, keepdims=True)


# ----------------------------------------------------------------------------- head scores
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
    scores = ci.head_scores([two, two[::-1]], tokens)
    assert set(scores) == set(ci.SCORE_NAMES) and scores["prefix_matching"].shape == (2, 2)
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


# ----------------------------------------------------------------------------- copying score
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
        assert mc.copying_score(ci.ov_circuit(PARAMS, CONFIG, layer, head)) > 0.9


# ----------------------------------------------------------------------------- composition score (Hypothesis)
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
    scores = ci.composition_scores(PARAMS, CONFIG)
    baseline = ci.composition_baseline(32, 16, np.random.default_rng(0))
    assert np.unravel_index(scores["K"].argmax(), (2, 2)) == (1, 1)
    assert scores["K"][1, 1] > baseline + 0.05
    assert scores["Q"][1, 1] < baseline and scores["V"][1, 1] < baseline


# ----------------------------------------------------------------------------- the hooks
def test_a_patch_that_returns_the_output_changes_nothing():
    tokens = train.make_batch(CONFIG, np.random.default_rng(1), 4).tokens
    plain, w_plain = train.forward(PARAMS, tokens, CONFIG)
    hooked, w_hooked = train.forward(PARAMS, tokens, CONFIG, patch=lambda layer, tr: tr.output)
    np.testing.assert_allclose(hooked, plain, atol=1e-12)
    np.testing.assert_allclose(w_hooked[1], w_plain[1], atol=1e-12)
    logits, cache = ci.run_with_cache(PARAMS, tokens, CONFIG)
    np.testing.assert_allclose(logits, plain, atol=1e-12)
    stream = train.embed(PARAMS, tokens, CONFIG) + sum(c.sum(1) for c in cache)  # (B, T, D)
    np.testing.assert_allclose(stream @ PARAMS.unembed, plain, atol=1e-10)


def test_direct_logit_attribution_adds_up_to_the_centred_target_logit():
    batch = train.make_batch(CONFIG, np.random.default_rng(2), 32)
    dla = ci.direct_logit_attribution(PARAMS, CONFIG, batch)
    logits, _ = train.forward(PARAMS, batch.tokens, CONFIG)
    centred = logits - logits.mean(-1, keepdims=True)
    target = np.take_along_axis(centred, batch.targets[..., None], -1)[..., 0][batch.scored].mean()
    assert dla.total == pytest.approx(target)
    assert dla.heads.shape == (2, 2) and dla.heads.argmax() == 3  # L2 H1 writes most of the answer


@pytest.mark.parametrize("corrupt", ["key", "value"])
def test_patching_everything_restores_fully_and_nothing_not_at_all(corrupt):
    pair = ci.make_pair(CONFIG, np.random.default_rng(3), 32, corrupt)
    assert (pair.clean != pair.corrupt).sum(1).tolist() == [1] * 32
    assert ci.patching_effect(PARAMS, CONFIG, pair, ALL_HEADS) == pytest.approx(1.0, abs=1e-9)
    assert ci.patching_effect(PARAMS, CONFIG, pair, []) == pytest.approx(0.0, abs=1e-9)
    # patching at every position is patching the head; at no position is patching nothing
    assert ci.patching_effect(PARAMS, CONFIG, pair, [(1, 1)], positions=range(24)) == pytest.approx(
        ci.patching_effect(PARAMS, CONFIG, pair, [(1, 1)]))
    assert ci.patching_effect(PARAMS, CONFIG, pair, ALL_HEADS, positions=[]) == pytest.approx(0.0, abs=1e-9)


def test_patching_a_run_into_itself_changes_nothing():
    tokens = train.make_batch(CONFIG, np.random.default_rng(4), 4).tokens
    np.testing.assert_allclose(ci.patch_heads(PARAMS, CONFIG, tokens, tokens, ALL_HEADS),
                               train.forward(PARAMS, tokens, CONFIG)[0], atol=1e-12)


def test_patching_finds_the_circuit():
    pair = ci.make_pair(CONFIG, np.random.default_rng(1), 64, "key")
    heads = ci.head_patching(PARAMS, CONFIG, pair)
    assert heads[0, 1] > 0.9 and heads[1, 1] > 0.7 and abs(heads[0, 0]) < 0.05
    positions = ci.position_patching(PARAMS, CONFIG, pair)
    assert positions[0, 1].argmax() == pair.changed + 1  # the previous-token head, just after the change
    assert positions[1, 1].argmax() == pair.position     # the induction head, at the query
    assert ci.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), "kv") > 0.7
    assert abs(ci.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), "q")) < 0.05
    both = ci.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 0), "qkv") + \
        ci.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), "qkv")
    assert both == pytest.approx(heads[0, 1], abs=0.05)  # through the two induction heads, nearly all of it


def test_path_patching_checks_its_arguments():
    pair = ci.make_pair(CONFIG, np.random.default_rng(1), 4)
    with pytest.raises(ValueError):
        ci.path_patching(PARAMS, CONFIG, pair, (1, 0), (0, 1))
    with pytest.raises(ValueError):
        ci.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), via="k")


# ----------------------------------------------------------------------------- ablation
def test_zero_ablation_is_train_ablate_head():
    batch = train.make_batch(CONFIG, np.random.default_rng(6), 16)
    hook = ci.ablate_heads(PARAMS, CONFIG, batch.tokens, [(0, 1)], "zero")
    np.testing.assert_allclose(train.forward(PARAMS, batch.tokens, CONFIG, patch=hook)[0],
                               train.forward(PARAMS, batch.tokens, CONFIG, ablate=[(0, 1)])[0], atol=1e-10)


def test_resample_from_itself_is_no_ablation_and_mean_writes_the_mean():
    tokens = train.make_batch(CONFIG, np.random.default_rng(7), 8).tokens
    plain = train.forward(PARAMS, tokens, CONFIG)[0]
    hook = ci.ablate_heads(PARAMS, CONFIG, tokens, ALL_HEADS, "resample", reference=tokens)
    np.testing.assert_allclose(train.forward(PARAMS, tokens, CONFIG, patch=hook)[0], plain, atol=1e-10)
    one = tokens[:1]  # a reference of one sequence: its mean is itself
    hook = ci.ablate_heads(PARAMS, CONFIG, one, ALL_HEADS, "mean", reference=one)
    np.testing.assert_allclose(train.forward(PARAMS, one, CONFIG, patch=hook)[0], plain[:1], atol=1e-10)


def test_ablation_kinds_and_the_redundant_pair():
    batch = train.make_batch(CONFIG, np.random.default_rng(8), 128)
    reference = train.make_batch(CONFIG, np.random.default_rng(9), 128).tokens
    losses = ci.ablation_losses(PARAMS, CONFIG, batch, reference, [[(1, 0)], [(1, 1)], [(1, 0), (1, 1)]])
    assert set(losses) == set(ci.ABLATIONS)
    for kind, (alone0, alone1, both) in losses.items():
        assert both > alone0 + alone1, kind  # one at a time understates the pair
    with pytest.raises(ValueError):
        ci.ablate_heads(PARAMS, CONFIG, batch.tokens, [(0, 0)], "mean")
    with pytest.raises(ValueError):
        ci.ablate_heads(PARAMS, CONFIG, batch.tokens, [(0, 0)], "shuffle")


# ----------------------------------------------------------------------------- rollout and occlusion
def test_rollout_rows_sum_to_one_and_identity_layers_change_nothing():
    w = [np.stack([uniform_causal(5)] * 2)[None], np.stack([np.eye(5), uniform_causal(5)])[None]]
    r = ci.attention_rollout(w)
    np.testing.assert_allclose(r.sum(-1), 1.0)
    eye = [np.eye(4)[None, None]] * 3
    np.testing.assert_allclose(ci.attention_rollout(eye)[0], np.eye(4))


def test_occlusion_finds_the_copied_token():
    pair = ci.make_pair(CONFIG, np.random.default_rng(2), 32)
    drop = ci.key_occlusion(PARAMS, CONFIG, pair, np.random.default_rng(0))
    assert drop.argmax() in (pair.position - 8, pair.position - 7)  # the earlier occurrence or the token after it


# ----------------------------------------------------------------------------- the phase change
def test_the_shipped_trajectories():
    runs = ci.load_trajectories()
    two, one = runs["two_layer"], runs["one_layer"]
    assert ci.formation_step(two) == 375 and ci.formation_step(one) is None
    assert two.steps[-1] == 800 and len(two.losses) == 800
    assert two.probe_loss[-1] < 0.05 < 1.5 < one.probe_loss[-1]
    assert two.weights.dtype == np.float32


def test_a_short_run_reproduces_the_shipped_trajectory():
    runs = ci.load_trajectories()
    short = ci.train_trajectory(ci.PHASE_CHANGE_CONFIGS["two_layer"]._replace(steps=20), every=5)
    np.testing.assert_allclose(short.losses, runs["two_layer"].losses[:20], rtol=1e-5)
    np.testing.assert_allclose(short.scores, runs["two_layer"].scores[:5], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(short.steps, [0, 5, 10, 15, 20])


# ----------------------------------------------------------------------------- the public names
def test_lazy_top_level_names():
    code = ("import sys, mha_course as mc; assert not any('lessons' in m for m in sys.modules); "
            "f = mc.prefix_matching_score; assert 'mha_course.lessons.circuits' in sys.modules; "
            "assert 'composition_score' in dir(mc) and 'copying_score' in mc.__all__; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "mha_course.lessons.circuits"
    with pytest.raises(AttributeError):
        mc.no_such_name  # noqa: B018


# ----------------------------------------------------------------------------- attacks on the public functions
@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_composition_score_does_not_care_about_scale(scale):
    a = np.random.default_rng(0).normal(size=(4, 4))
    b = np.random.default_rng(1).normal(size=(4, 4))
    assert ci.composition_score(scale * a, b) == pytest.approx(ci.composition_score(a, b), rel=1e-9)
    assert ci.composition_score(a, scale * b) == pytest.approx(ci.composition_score(a, b), rel=1e-9)


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_copying_score_does_not_care_about_scale(scale):
    assert ci.copying_score(scale * np.diag([2.0, -1.0])) == pytest.approx(1 / 3)


def test_copying_score_of_a_nilpotent_matrix_says_so():
    with pytest.raises(ValueError, match="nilpotent"):
        ci.copying_score(np.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="W is zero"):
        ci.copying_score(np.zeros((2, 2)))


@pytest.mark.parametrize("heads", [[(5, 0)], [(0, 2)], [(-1, 0)], [(0.5, 0)], [(True, 0)], [0], "ab"])
def test_heads_that_do_not_exist_are_refused(heads):
    tokens = train.make_batch(CONFIG, np.random.default_rng(0), 2).tokens
    with pytest.raises(ValueError, match="heads|pairs"):
        ci.patch_heads(PARAMS, CONFIG, tokens, tokens, heads)
    with pytest.raises(ValueError, match="heads|pairs"):
        ci.ablate_heads(PARAMS, CONFIG, tokens, heads)


@pytest.mark.parametrize("positions", [[-1], [99], [1.5], [[0]]])
def test_positions_out_of_range_are_refused(positions):
    tokens = train.make_batch(CONFIG, np.random.default_rng(0), 2).tokens
    with pytest.raises(ValueError, match="positions"):
        ci.patch_heads(PARAMS, CONFIG, tokens, tokens, [(0, 1)], positions)


def test_source_and_target_of_other_lengths_are_refused():
    tokens = train.make_batch(CONFIG, np.random.default_rng(0), 2).tokens
    with pytest.raises(ValueError, match="same"):
        ci.patch_heads(PARAMS, CONFIG, tokens, tokens[:, :10], [(0, 1)])


def test_patching_identical_runs_is_a_value_error_not_a_zero_division():
    pair = ci.make_pair(CONFIG, np.random.default_rng(0), 4)
    same = pair._replace(corrupt=pair.clean)
    for call in (lambda: ci.patching_effect(PARAMS, CONFIG, same, [(0, 1)]),
                 lambda: ci.head_patching(PARAMS, CONFIG, same),
                 lambda: ci.path_patching(PARAMS, CONFIG, same, (0, 1), (1, 1)),
                 lambda: ci.attribution_patching(PARAMS, CONFIG, same)):
        with pytest.raises(ValueError, match="nothing to restore"):
            call()


@pytest.mark.parametrize("sender,receiver", [((0, 7), (1, 1)), ((0, 1), (1, 7)), ((0, -1), (1, 0))])
def test_path_patching_refuses_heads_that_do_not_exist(sender, receiver):
    pair = ci.make_pair(CONFIG, np.random.default_rng(0), 4)
    with pytest.raises(ValueError, match="do not exist"):
        ci.path_patching(PARAMS, CONFIG, pair, sender, receiver)


def test_rollout_of_no_layers_or_mixed_shapes_is_refused():
    with pytest.raises(ValueError, match="empty"):
        ci.attention_rollout([])
    with pytest.raises(ValueError, match="shape"):
        ci.attention_rollout([np.full((1, 1, 2, 2), 0.5), np.full((1, 1, 3, 3), 1 / 3)])


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"d_k": 0}, {"d_model": 8, "d_k": 16}, {"n": 2.5}])
def test_composition_baseline_refuses_empty_or_impossible_sizes(kwargs):
    args = {"d_model": 32, "d_k": 16, "n": 10, **kwargs}
    with pytest.raises(ValueError):
        ci.composition_baseline(args["d_model"], args["d_k"], np.random.default_rng(0), args["n"])


def test_load_trajectories_names_the_file_and_the_fix(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(ValueError, match="phase_change"):
        ci.load_trajectories(bad)
    with pytest.raises(ValueError, match="not a trajectory file"):
        ci.load_trajectories(checkpoints.checkpoint_path("induction"))


# ----------------------------------------------------------------------------- what 14 adds
def test_composition_baseline_spread_and_width():
    s = ci.composition_baseline_scores(32, 16, np.random.default_rng(0))
    assert s.shape == (200,) and 0.005 < s.std() < 0.05
    assert ci.composition_baseline(32, 16, np.random.default_rng(0)) == pytest.approx(s.mean())
    wide = ci.composition_baseline(128, 64, np.random.default_rng(0))
    assert 1.7 < s.mean() / wide < 2.3  # about 1 / sqrt(D): 4x the width, half the score


def test_repeated_tokens_and_the_induction_score_on_a_perfect_stripe():
    tok = ci.repeated_tokens(16, 5, 3, np.random.default_rng(0))
    assert tok.shape == (3, 10) and (tok[:, :5] == tok[:, 5:]).all()
    T, half = 10, 5
    w = np.zeros((2, T, T))
    w[0, np.arange(T), np.maximum(np.arange(T) - half + 1, 0)] = 1.0  # the induction stripe
    w[1] = uniform_causal(T)
    got = ci.repeat_induction_score(w, half)
    assert got[0] == 1.0 and got[1] == pytest.approx(np.mean(1 / (np.arange(half, T) + 1)))
    with pytest.raises(ValueError, match="half"):
        ci.repeat_induction_score(w, 4)


def test_the_trained_induction_head_scores_high_on_repeated_random_tokens():
    tok = ci.repeated_tokens(CONFIG.vocab, CONFIG.seq_len // 2, 128, np.random.default_rng(1404))
    w = train.forward(PARAMS, tok, CONFIG)[1]
    assert ci.repeat_induction_score(w[1], 12).max() > 0.5 > ci.repeat_induction_score(w[0], 12).max()


def test_ov_spectrum_has_at_most_d_k_nonzero_values_and_matches_the_circuit():
    s = ci.ov_spectrum(PARAMS, CONFIG, 1, 1)
    m = ci.ov_circuit(PARAMS, CONFIG, 1, 1)
    assert (np.diff(s) <= 1e-9).all() and s[0] == pytest.approx(np.linalg.norm(m, 2))
    assert (s ** 2).sum() == pytest.approx((m ** 2).sum())
    assert np.linalg.matrix_rank(m) <= CONFIG.d_model // CONFIG.h


def test_attribution_patching_agrees_with_activation_patching():
    """Exact for the last layer (linear in its heads' outputs); for layer 1 the same order and the same winner."""
    pair = ci.make_pair(CONFIG, np.random.default_rng(1401), 128)
    attr, act = ci.attribution_patching(PARAMS, CONFIG, pair), ci.head_patching(PARAMS, CONFIG, pair)
    np.testing.assert_allclose(attr[1], act[1], atol=1e-9)
    assert np.argmax(attr[0]) == np.argmax(act[0]) == 1
    assert 0.3 < attr[0, 1] < act[0, 1]  # the linear estimate falls short through layer 2's saturated softmax


def test_attribution_patching_is_the_derivative_of_interpolated_patching():
    """d/dε of LD with head (0, 0)'s output moved ε of the way from corrupt to clean, at ε = 0."""
    pair = ci.make_pair(CONFIG, np.random.default_rng(3), 16)
    _, clean = ci.run_with_cache(PARAMS, pair.clean, CONFIG)
    _, bad = ci.run_with_cache(PARAMS, pair.corrupt, CONFIG)
    from mha_course.lessons import misconceptions as mi

    def ld(eps, layer, head):
        def hook(lay, tr):
            c = mi.head_contributions(tr, PARAMS.layers[lay].W_o)
            if lay == layer:
                c[:, head] = c[:, head] + eps * (clean[layer][:, head] - bad[layer][:, head])
            return c.sum(1)
        return ci.logit_difference(train.forward(PARAMS, pair.corrupt, CONFIG, patch=hook)[0], pair)
    attr = ci.attribution_patching(PARAMS, CONFIG, pair)
    full = ld(1.0, 0, 0) - ld(0.0, 0, 0)
    for layer, head in [(0, 0), (0, 1), (1, 0)]:
        eps = 1e-4
        slope = (ld(eps, layer, head) - ld(-eps, layer, head)) / (2 * eps)
        lds = ci.logit_difference(train.forward(PARAMS, pair.clean, CONFIG)[0], pair)
        lde = ci.logit_difference(train.forward(PARAMS, pair.corrupt, CONFIG)[0], pair)
        assert attr[layer, head] == pytest.approx(slope / (lds - lde), abs=1e-5)
    assert np.isfinite(full)


# ----------------------------------------------------------------------------- the claims of 14 over seeds
SEEDS = ci.load_seed_results()
OK = np.isfinite(SEEDS["formation_step"])  # recomputed here: the seeds whose induction head formed


def _f(name):
    return np.asarray(SEEDS[name])[OK]


def _holds(a, b):
    """a > b in every formed seed, by more than the spread of the per-seed differences (recomputed here)."""
    d = np.asarray(a) - np.asarray(b)
    return bool((d > 0).all() and d.mean() > d.std(ddof=1))


def _mixed(a, b):
    """The difference changes sign between seeds: no conclusion may be drawn from it."""
    d = np.asarray(a) - np.asarray(b)
    return bool((d > 0).any() and (d < 0).any())


def test_the_shipped_results_cover_at_least_three_formed_seeds_and_seed_0_is_the_checkpoint():
    assert len(SEEDS["seeds"]) >= 3 and OK.sum() >= 3 and SEEDS["seeds"][0] == 0
    assert (ci.formed(SEEDS) == OK).all()
    pair = ci.make_pair(CONFIG, np.random.default_rng(1401), 128)
    assert SEEDS["patch_prev"][0] == pytest.approx(ci.head_patching(PARAMS, CONFIG, pair)[0, 1], abs=1e-6)


def test_claim_the_circuit_forms_and_one_layer_never_does():
    assert (SEEDS["one_layer_prefix"] < 0.3).all()
    assert _holds(_f("one_layer_loss"), _f("final_loss"))
    assert (SEEDS["final_loss"][~OK] > 10 * _f("final_loss").max()).all()  # a seed without it ends far higher


def test_claim_k_composition_is_above_the_random_baseline_and_q_v_are_not():
    base = SEEDS["baseline"]
    assert (_f("k_comp_ind") > base.mean() + 3 * base.std()).all()
    assert _holds(_f("k_comp_ind"), _f("q_comp_ind")) and _holds(_f("k_comp_ind"), _f("v_comp_ind"))


def test_claim_key_corruption_runs_through_the_previous_token_head_and_its_kv_path():
    assert _holds(_f("patch_prev"), _f("patch_other"))
    assert _holds(_f("path_kv"), _f("path_q"))
    assert _holds(_f("patch_prev"), _f("patch_value_prev"))  # each corruption asks its own question


def test_claim_resample_is_harshest_and_zero_mean_are_within_the_noise():
    assert _holds(_f("resample_prev"), _f("zero_prev"))
    assert _mixed(_f("zero_prev"), _f("mean_prev"))


def test_claim_both_l2_heads_cost_more_than_the_two_removals():
    assert _holds(_f("zero_both"), _f("zero_ind") + _f("zero_backup"))


def test_claim_dla_misses_the_previous_token_head_and_its_rank_against_the_induction_head_is_noise():
    assert (np.abs(_f("dla_prev")) < 0.05 * _f("dla_ind")).all() and (_f("patch_prev") > 0.8).all()
    assert _mixed(_f("zero_prev"), _f("zero_ind"))   # which of the two matters more: within the noise
    assert _holds(_f("top_weight_ind"), _f("top_weight_prev"))  # while the induction head always looks sharper


def test_compare_over_seeds_says_within_the_noise():
    assert ci.compare_over_seeds([1.0, 1.1, 0.9], [1.0, 1.0, 1.0]) == "within the noise"
    assert ci.compare_over_seeds([3.0, 3.1, 2.9], [1.0, 1.0, 1.1]) == "a > b"
    assert ci.compare_over_seeds([0.0, 0.1, 0.0], [1.0, 1.0, 1.1]) == "a < b"
    with pytest.raises(ValueError):
        ci.compare_over_seeds([1.0], [2.0])
