"""lessons/long_seeds.py: notebook 13's tables over seeds, and every claim its prose draws from them.

The shipped results (``long_seeds.RESULTS_PATH``, made by ``mha-course train long_seeds``) hold
each table for seeds 0, 1 and 2. Each ``test_claim_*`` recomputes one sentence of the notebook
from them: a difference the notebook reads as a result must hold on every seed (``separated``),
and one it calls "within the noise" must not.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from mha_course.lessons import checkpoints
from mha_course.lessons import long_context as lc
from mha_course.lessons import long_seeds as ls
from mha_course.lessons import model as train


@pytest.fixture(scope="module")
def runs():
    return ls.load_results()


def test_the_results_hold_three_seeds_of_every_table(runs):
    assert runs["seeds"].tolist() == list(ls.SEEDS) and len(ls.SEEDS) >= 3
    S = len(ls.SEEDS)
    assert runs["stretched"].shape == runs["shifted"].shape == (S, len(ls.SCHEMES), len(lc.LENGTHS), 2)
    assert runs["fixes_stretched"].shape == (S, len(ls.FIXES), len(lc.LENGTHS), 2)
    assert runs["tuned_stretched"].shape == runs["tuned_shifted"].shape == (S, len(ls.TUNED), len(lc.LENGTHS), 2)
    assert runs["tuned_steps"].shape == (S, len(ls.TUNED)) and runs["streams"].shape == (S, len(ls.STREAMS), 2)
    acc = runs["stretched"][..., 0]
    assert np.all((0 <= acc) & (acc <= 1)) and np.all(np.isfinite(runs["stretched"]))


def test_seed_0_is_the_shipped_checkpoints(runs):
    """Seed 0's row of table 1a is what the shipped models score now (the notebook's live figure)."""
    config, params = lc.load_scheme("rope")
    m, _ = lc.evaluate_at(params, config, 32, "stretched", seed=32)
    assert runs["stretched"][0, ls.SCHEMES.index("rope"), 1, 0] == pytest.approx(m.accuracy, abs=1e-12)


def test_format_summary_prints_mean_and_range_per_length():
    table = np.zeros((3, 1, 3, 2))
    table[:, 0, 1, 0] = [0.5, 0.6, 0.7]
    text = ls.format_summary(table, ["rope"])
    assert "rope" in text and "0.600 (0.500-0.700)" in text and "2x = 32" in text


@pytest.mark.parametrize("load, task", [(ls.load_results, "long_seeds"), (ls.load_rope_seeds, "long_rope_seeds")])
def test_the_results_loaders_refuse_other_files_naming_their_task(tmp_path, load, task):
    other = tmp_path / "x.npz"
    other.write_bytes(checkpoints.npz_bytes({"seeds": np.zeros(2)}))
    with pytest.raises(ValueError, match=task):
        load(other)
    with pytest.raises(ValueError, match=task):
        load(tmp_path / "missing.npz")


def test_base_config_is_long_context_with_the_seed():
    assert ls.base_config("alibi", 2) == checkpoints.LONG_CONTEXT._replace(positions="alibi", seed=2)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed"):
            ls.base_config("rope", bad)
    with pytest.raises(ValueError, match="scheme"):
        ls.base_config("rotary", 1)


def test_fine_tune_stops_at_the_loss_criterion(monkeypatch):
    config = checkpoints.LONG_CONTEXT._replace(positions="rope", steps=1)
    params = train.init_model(config)
    monkeypatch.setitem(ls.FINE_TUNE, "seq_len", 16)
    monkeypatch.setitem(ls.FINE_TUNE, "max_steps", 6)
    monkeypatch.setitem(ls.FINE_TUNE, "window", 2)
    monkeypatch.setitem(ls.FINE_TUNE, "target_loss", 100.0)  # met as soon as there are 2 losses
    _, steps, final = ls.fine_tune(config, params, None, 0)
    assert steps == 2 and final < 100.0
    monkeypatch.setitem(ls.FINE_TUNE, "target_loss", 0.0)  # never met: the cap
    _, steps, _ = ls.fine_tune(config, params, None, 0)
    assert steps == 6


def test_dynamic_fixes_read_the_training_length_unscaled():
    config, params = lc.load_scheme("rope")
    models = ls.fix_models((config, params))
    for name in ls.DYNAMIC:
        assert ls.at_length_scaling(models[name][0], name, lc.TRAIN_LEN).rope_scaling is None
        assert ls.at_length_scaling(models[name][0], name, 4 * lc.TRAIN_LEN).rope_scaling["factor"] == 4.0


# ----------------------------------------------------------------------------- the notebook's claims
def _acc(runs, table, names, name, k, column=0):
    """(seeds,) of one entry: the accuracy (or loss) of ``name`` at length index k."""
    return runs[table][:, list(names).index(name), k, column]


def test_claim_rope_and_alibi_at_2x_are_within_the_noise(runs):
    rope, alibi = (_acc(runs, "stretched", ls.SCHEMES, n, 1) for n in ("rope", "alibi"))
    assert not ls.separated(rope, alibi)


def test_claim_rope_breaks_later_than_the_absolute_schemes(runs):
    rope = _acc(runs, "stretched", ls.SCHEMES, "rope", 1)
    for other in ("learned", "sinusoidal"):
        other_acc = _acc(runs, "stretched", ls.SCHEMES, other, 1)
        assert ls.separated(rope, other_acc) and rope.min() > other_acc.max()
        shifted = _acc(runs, "shifted", ls.SCHEMES, other, 1)
        assert _acc(runs, "shifted", ls.SCHEMES, "rope", 1).min() > shifted.max()  # new positions, trained distances


def test_claim_at_4x_rope_fails_like_the_absolute_schemes_and_only_alibi_degrades_smoothly(runs):
    at4 = {n: _acc(runs, "stretched", ls.SCHEMES, n, 2) for n in ls.SCHEMES}
    assert max(at4[n].max() for n in ("rope", "learned", "sinusoidal")) < 0.12
    assert all(at4["alibi"].min() > at4[n].max() for n in ls.SCHEMES if n != "alibi")
    assert _acc(runs, "shifted", ls.SCHEMES, "rope", 2).max() < 0.1  # fails in both tables


def test_claim_alibi_pays_at_1x_and_nope_learns_only_in_part(runs):
    rope1, alibi1 = _acc(runs, "stretched", ls.SCHEMES, "rope", 0), _acc(runs, "stretched", ls.SCHEMES, "alibi", 0)
    assert ls.separated(rope1, alibi1) and rope1.min() > alibi1.max()
    assert _acc(runs, "stretched", ls.SCHEMES, "none", 0).max() < 0.5


def test_claim_without_retraining_keeping_pair_0_is_what_works(runs):
    fx = {n: runs["fixes_stretched"][:, i, :, 0] for i, n in enumerate(ls.FIXES)}
    assert ls.separated(fx["rope + yarn"][:, 2], fx["rope + ntk"][:, 2]) and fx["rope + yarn"][:, 2].min() > fx[
        "rope + ntk"][:, 2].max()
    # the paper's ramp interpolates pair 0: as broken as PI at every length, within the noise of it at 4x
    assert fx["rope + yarn (paper ramp)"].max() < 0.1 and fx["rope + linear"].max() < 0.1
    assert not ls.separated(fx["rope + yarn (paper ramp)"][:, 2], fx["rope + linear"][:, 2])


def test_claim_dynamic_yarn_removes_the_drop_at_1x(runs):
    fx = {n: runs["fixes_stretched"][:, i, :, 0] for i, n in enumerate(ls.FIXES)}
    assert fx["rope + dynamic yarn"][:, 0].min() > fx["rope + yarn"][:, 0].max()
    assert np.array_equal(fx["rope + dynamic yarn"][:, 0], fx["rope"][:, 0])  # nothing is scaled at L
    assert np.array_equal(fx["rope + dynamic yarn"][:, 2], fx["rope + yarn"][:, 2])  # factor 4 at 4x, as the static one


def test_claim_every_fine_tune_meets_the_criterion_pi_below_uniform(runs):
    final = runs["tuned_final_loss"]
    assert np.all(final <= ls.FINE_TUNE["target_loss"]) and np.all(runs["tuned_steps"] < ls.FINE_TUNE["max_steps"])
    pi = list(ls.TUNED).index("rope + linear, tuned")
    assert final[:, pi].max() < math.log(32) and runs["tuned_stretched"][:, pi, 2, 1].max() < math.log(32)


def test_claim_pi_needs_the_most_steps_about_eight_times_ntk_and_yarn(runs):
    steps = {n: runs["tuned_steps"][:, i] for i, n in enumerate(ls.TUNED)}
    pi = steps["rope + linear, tuned"]
    for n in ("rope, tuned", "rope + ntk, tuned", "rope + yarn, tuned"):
        assert pi.min() > steps[n].max()
    for n in ("rope + ntk, tuned", "rope + yarn, tuned"):
        assert 7 < pi.mean() / steps[n].mean() < 10


def test_claim_yarn_fine_tune_is_best_at_4x_and_alone_on_the_shifted_task(runs):
    tu = {n: runs["tuned_stretched"][:, i, 2, 0] for i, n in enumerate(ls.TUNED)}
    tus = {n: runs["tuned_shifted"][:, i, 2, 0] for i, n in enumerate(ls.TUNED)}
    best = "rope + yarn, tuned"
    assert all(tu[best].min() > tu[n].max() for n in ls.TUNED if n != best)
    assert all(tus[best].min() > tus[n].max() for n in ls.TUNED if n != best)
    assert tus["rope, tuned"].max() < 0.1  # the control learned the lengths, not the positions


def test_claim_no_head_is_a_sink(runs):
    assert runs["sink_max"].max() < 1.1 * lc.uniform_share(16)


def test_claim_sinks_hurt_at_absolute_positions_and_do_nothing_inside_the_cache(runs):
    sw = {n: runs["streams"][:, i, 0] for i, n in enumerate(ls.STREAMS)}
    window = sw["window 16"]
    assert sw["full attention"].max() < 0.5 and window.min() > 0.95
    for n in ("window 16 + 1 sink", "window 16 + 4 sinks"):
        assert window.min() > sw[n].max()  # harm, on every seed
        cache = sw[n + ", cache positions"]
        assert cache.min() > sw[n].max() and not ls.separated(cache, window)  # no harm, no help


def test_blind_findings_an_unknown_fix_name_and_a_table_of_the_wrong_shape_are_refused():
    """ls_at_length_scaling_bad returned the config silently; ls_format_summary_mismatch was an IndexError."""
    config = ls.base_config("rope", 0)
    with pytest.raises(ValueError, match="name='bogus'.*FIXES"):
        ls.at_length_scaling(config, "bogus", 32)
    with pytest.raises(ValueError, match=r"table has shape \(3, 2, 5\)"):
        ls.format_summary(np.ones((3, 2, 5)), ["a", "b", "c"])
    with pytest.raises(ValueError, match="column"):
        ls.format_summary(np.ones((3, 1, len(lc.LENGTHS), 2)), ["a"], column=2)


# ---- sections 2 and 7 on each seed's RoPE model (``long_seeds.ROPE_SEEDS_PATH``, ``mha-course train long_rope_seeds``)
@pytest.fixture(scope="module")
def quant():
    return ls.load_rope_seeds()


def test_the_rope_seeds_file_holds_three_seeds_and_seed_0_is_the_shipped_model(quant):
    S, rope = len(ls.SEEDS), lc.load_scheme("rope")
    assert quant["seeds"].tolist() == list(ls.SEEDS) and quant["quantized"].shape == (S, len(ls.QUANT_BITS), 2)
    assert quant["bits"].tolist() == [0 if b is None else b for b in ls.QUANT_BITS]
    assert quant["head_distance"].shape == (S, len(lc.LENGTHS), 2)
    np.testing.assert_allclose(quant["quantized"][0], ls.evaluate_quantized(rope), atol=1e-12)
    np.testing.assert_allclose(quant["head_distance"][0], ls.evaluate_head_distance(rope), atol=1e-12)


def test_claim_the_previous_token_head_holds_to_2x_and_is_drawn_to_far_keys_at_4x(quant):
    on_prev, far = quant["head_distance"][..., 0], quant["head_distance"][..., 1]  # (seeds, lengths)
    assert (on_prev[:, :2] > 0.9).all() and (far[:, :2] < 0.1).all()  # 1x and 2x: a clean previous-token head
    assert (on_prev[:, 2] < 0.1).all() and (far[:, 2] > 0.9).all()  # 4x: nearly all on keys 16 or more back


def test_evaluate_head_distance_picks_the_previous_token_head_by_its_weights():
    config, params = lc.load_scheme("rope")
    w16 = lc.weight_by_distance(params, config, lc.shifted_batch(config, 16, np.random.default_rng(16), 128), layer=0)
    got = ls.evaluate_head_distance((config, params))
    assert got[0, 0] == pytest.approx(w16[:, 1].max(), abs=1e-12)


def test_claim_8_bits_change_nothing_4_bits_a_little_3_more_and_2_bits_break_the_model(quant):
    acc, loss = quant["quantized"][..., 0], quant["quantized"][..., 1]  # (seeds, precisions)
    bits = list(ls.QUANT_BITS)
    moved = loss - loss[:, :1]  # against float64, per seed
    assert np.abs(moved[:, [bits.index(16), bits.index(8)]]).max() < 5e-4  # prints 0.000
    four, three, two = (moved[:, bits.index(b)] for b in (4, 3, 2))
    assert (four > 0).all() and four.max() < 0.05  # a little, on every seed
    assert three.min() > four.max() and ls.separated(loss[:, bits.index(3)], loss[:, bits.index(4)])
    assert acc[:, bits.index(2)].max() < 0.6 < 0.9 < acc[:, bits.index(3)].min()  # 2 bits: the model falls apart
