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
