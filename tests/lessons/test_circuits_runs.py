"""lessons.circuits_runs: the shipped phase-change trajectories, a short run that reproduces them, and
the claims of notebook 14 over seeds (on the shipped results).
"""
import numpy as np
import pytest

from mha_course.lessons import checkpoints
from mha_course.lessons import circuits_data as cdata
from mha_course.lessons import circuits_patching as cp
from mha_course.lessons import circuits_runs as cr
from mha_course.lessons import circuits_scores as cs
from mha_course.lessons import model as train

CONFIG, PARAMS, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))


def test_the_shipped_trajectories():
    runs = cr.load_trajectories()
    two, one = runs["two_layer"], runs["one_layer"]
    assert cr.formation_step(two) == 375 and cr.formation_step(one) is None
    assert two.steps[-1] == 800 and len(two.losses) == 800
    assert two.probe_loss[-1] < 0.05 < 1.5 < one.probe_loss[-1]
    assert two.weights.dtype == np.float32


def test_a_short_run_reproduces_the_shipped_trajectory():
    runs = cr.load_trajectories()
    short = cr.train_trajectory(cr.PHASE_CHANGE_CONFIGS["two_layer"]._replace(steps=20), every=5)
    np.testing.assert_allclose(short.losses, runs["two_layer"].losses[:20], rtol=1e-5)
    np.testing.assert_allclose(short.scores, runs["two_layer"].scores[:5], rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(short.steps, [0, 5, 10, 15, 20])


def test_load_trajectories_names_the_file_and_the_fix(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    with pytest.raises(ValueError, match="phase_change"):
        cr.load_trajectories(bad)
    with pytest.raises(ValueError, match="not a trajectory file"):
        cr.load_trajectories(checkpoints.checkpoint_path("induction"))


SEEDS = cr.load_seed_results()


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
    assert (cr.formed(SEEDS) == OK).all()
    pair = cdata.make_pair(CONFIG, np.random.default_rng(1401), 128)
    assert SEEDS["patch_prev"][0] == pytest.approx(cp.head_patching(PARAMS, CONFIG, pair)[0, 1], abs=1e-6)


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
    assert cr.compare_over_seeds([1.0, 1.1, 0.9], [1.0, 1.0, 1.0]) == "within the noise"
    assert cr.compare_over_seeds([3.0, 3.1, 2.9], [1.0, 1.0, 1.1]) == "a > b"
    assert cr.compare_over_seeds([0.0, 0.1, 0.0], [1.0, 1.0, 1.1]) == "a < b"
    with pytest.raises(ValueError):
        cr.compare_over_seeds([1.0], [2.0])


def test_claim_the_weight_readings_repeat_over_the_seeds():
    # the repeated-token induction score: the induction head above its backup, the previous-token head near 0
    assert (_f("repeat_ind") > 0.6).all() and _holds(_f("repeat_ind"), _f("repeat_backup"))
    assert (_f("repeat_prev") < 0.1).all() and (_f("repeat_other") < 0.1).all()
    # the backup scores like an induction head only where its prefix matching says it is one
    assert ((_f("repeat_backup") > 0.3) == (_f("prefix_backup") > 0.3)).all()
    # no head's OV circuit is low-rank: the top singular value carries well under half the squared norm
    for role in ("prev", "other", "ind", "backup"):
        assert (_f(f"ov_top_share_{role}") < 0.4).all(), role
    # rollout finds occlusion's three positions in every formed seed, the last layer's raw weights in none
    assert (_f("rollout_finds_occlusion") == 1).all() and (_f("last_layer_finds_occlusion") == 0).all()


def test_the_seed_readings_of_seed_0_are_the_checkpoints():
    """Seed 0's new readings, recomputed on the shipped checkpoint (prev = L1 H1, ind = L2 H1, backup = L2 H0)."""
    rep = cdata.repeated_tokens(CONFIG.vocab, CONFIG.seq_len // 2, 256, np.random.default_rng(1404))
    weights = train.forward(PARAMS, rep, CONFIG)[1]
    assert SEEDS["repeat_ind"][0] == pytest.approx(cs.repeat_induction_score(weights[1], 12)[1], abs=1e-9)
    assert SEEDS["repeat_backup"][0] == pytest.approx(cs.repeat_induction_score(weights[1], 12)[0], abs=1e-9)
    s = cs.ov_spectrum(PARAMS, CONFIG, 1, 0)
    assert SEEDS["ov_top_share_backup"][0] == pytest.approx(s[0] ** 2 / (s ** 2).sum(), abs=1e-9)
    pair = cdata.make_pair(CONFIG, np.random.default_rng(1401), 128)
    found = np.argsort(-cp.key_occlusion(PARAMS, CONFIG, pair, np.random.default_rng(1403))[:pair.position + 1])[:3]
    roll = cs.attention_rollout(train.forward(PARAMS, pair.clean, CONFIG)[1])[:, pair.position].mean(0)
    assert set(np.argsort(-roll[:pair.position + 1])[:3]) == set(found) and SEEDS["rollout_finds_occlusion"][0] == 1
