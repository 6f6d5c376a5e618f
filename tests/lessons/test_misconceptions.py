"""The experiments of notebook 11 (mha_course.misconceptions) measure what they claim.

- gradient x input per head is the first-order change of the loss: scaling a head's output by
  (1 - eps) changes the loss by eps * grad_x_input (through layer 2's ``mha_backward`` for layer 1);
- head contributions add up to the block's output; key attributions are causal;
- ablation: keep_only silences the right heads; an ensemble of one member is that member;
- rank_correlation against a hand-written Spearman; the RNN's steps depend on each other;
- the shipped single-head members are the ENSEMBLE_CONFIG runs and solve the task.
"""
from __future__ import annotations

import numpy as np
import pytest

import mha_course as mc
from mha_course import check
from mha_course.lessons import checkpoints, training
from mha_course.lessons import misconceptions as mi
from mha_course.lessons import model as train


@pytest.fixture(scope="module")
def induction():
    config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    return config, params


def _scaled_head(params, layer, head, factor, config):
    d_k = config.d_model // config.h
    W_o = params.layers[layer].W_o.copy()
    W_o[head * d_k:(head + 1) * d_k] *= factor
    layers = list(params.layers)
    layers[layer] = layers[layer]._replace(W_o=W_o)
    return params._replace(layers=tuple(layers))


@pytest.mark.parametrize("layer, head", [(0, 0), (0, 1), (1, 1)])
def test_grad_x_input_is_the_first_order_change_of_the_loss(induction, layer, head):
    config, params = induction
    a = mi.head_attribution(params, config, seed=3, n=32)
    eps = 1e-4
    moved = [training.evaluate(_scaled_head(params, layer, head, 1 - s * eps, config), config,
                            np.random.default_rng(3), 32).loss for s in (1, -1)]
    assert (moved[0] - moved[1]) / 2 == pytest.approx(eps * a["grad_x_input"][layer, head], rel=1e-3, abs=1e-12)


def test_ablation_column_is_the_loss_increase(induction):
    config, params = induction
    a = mi.head_attribution(params, config, seed=4, n=32)
    base = training.evaluate(params, config, np.random.default_rng(4), 32).loss
    silenced = training.evaluate(train.ablate_head(params, config, 1, 0), config, np.random.default_rng(4), 32).loss
    assert a["ablation"][1, 0] == pytest.approx(silenced - base)
    assert a["max_weight"].shape == (2, 2) and np.all((a["max_weight"] > 0) & (a["max_weight"] <= 1))


def test_head_contributions_add_up_to_the_output():
    rng = np.random.default_rng(0)
    p = mc.init_params(12, rng=rng)
    t = mc.trace(rng.normal(size=(2, 5, 12)), p, 3)
    c = mi.head_contributions(t, p.W_o)
    assert c.shape == (2, 3, 5, 12) and np.allclose(c.sum(1), t.output)


def test_key_attribution_is_causal_and_sized_like_the_weights(induction):
    config, params = induction
    w, attr, batch = mi.key_attribution(params, config, 1, n=4)
    T = config.seq_len
    assert w.shape == attr.shape == (4, config.h, T, T)
    assert np.all(attr[..., ~mc.causal_mask(T)] == 0) and np.all(attr >= 0)


def test_keep_only_and_ensemble_of_one(induction):
    config, params = induction
    assert mi.keep_only(config, {0: 1, 1: 0}) == [(0, 0), (1, 1)]
    one = mi.ensemble_metrics([(config, params)], seed=2, n=64)
    ref = training.evaluate(params, config, np.random.default_rng(2), 64)
    assert one.accuracy == pytest.approx(ref.accuracy) and one.loss == pytest.approx(ref.loss)


def test_shipped_members_are_the_ensemble_config_and_solve_the_task():
    members = mi.load_ensemble()
    assert [c for c, _ in members] == [mi.ENSEMBLE_CONFIG._replace(seed=s) for s in mi.ENSEMBLE_SEEDS]
    for config, params in members:
        assert training.evaluate(params, config, np.random.default_rng(9), 128).accuracy > 0.95


def test_rank_correlation_is_spearman():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 7)), rng.normal(size=(3, 7))
    ranks = lambda x: np.argsort(np.argsort(x))  # noqa: E731
    want = [np.corrcoef(ranks(x), ranks(y))[0, 1] for x, y in zip(a, b)]
    assert np.allclose(mi.rank_correlation(a, b), want)
    assert mi.rank_correlation(a[0], a[0]) == pytest.approx(1) and mi.rank_correlation(a[0], -a[0]) == pytest.approx(-1)


@pytest.mark.parametrize("T", [1, 7, 64])
def test_rnn_steps_are_sequential_and_attention_is_one_call(T):
    assert mi.sequential_steps(T) == (T, 1)
    rng = np.random.default_rng(T)
    x, W = rng.normal(size=(1, T, 3)), rng.normal(size=(3, 3))
    s, _ = mi.rnn_scan(x, W, W)
    x2 = x.copy()
    x2[0, 0] += 1.0
    s2, _ = mi.rnn_scan(x2, W, W)
    assert np.all(np.abs(s2 - s)[:, :5].sum(-1) > 0)  # step 0 reaches later steps: each needs the one before


# ----------------------------------------------------------------------------- the checkers of notebook 11
@pytest.mark.parametrize("checker, wrong, named", [
    (check.head_params, lambda d, h: (4 * d * d, 4 * h * d * d), "each head owns full"),
    (check.head_params, lambda d, h: (3 * d * (d // h), 3 * d * d), "W_o is forgotten"),
    (check.head_params, lambda d, h: (4 * (d // h) ** 2, 4 * h * (d // h) ** 2), "d_k x d_k"),
    (check.score_std, lambda d_k: (float(d_k), 1.0), "the variance d_k"),
    (check.score_std, lambda d_k: (1.0, d_k ** -0.5), "std 1"),
    (check.work_growth, lambda T, d: 4.0, "only the T² part"),
    (check.work_growth, lambda T, d: 2.0 ** T, "exponential"),
])
def test_checkers_name_the_mistake(checker, wrong, named, capsys):
    assert checker(wrong) is False
    assert named in capsys.readouterr().out


def test_checkers_pass_right_answers(capsys):
    assert check.head_params(lambda d, h: (4 * d * (d // h), 4 * d * d))
    assert check.score_std(lambda d_k: (np.sqrt(d_k), 1.0))
    assert check.work_growth(lambda T, d: (16 * T * T * d + 16 * T * d * d) / (4 * T * T * d + 8 * T * d * d))
    assert not check.work_growth(lambda T, d: 3.0)  # a constant cannot fit every case


# ----------------------------------------------------------------------------- section 2 over seeds
def test_the_ensemble_verdict_holds_for_every_shipped_seed():
    """11 §2: every jointly trained model, without its most needed head, is below every ensemble member alone."""
    from mha_course.lessons import misconceptions as mi
    joint, members = mi.load_joint_models(), mi.load_ensemble()
    assert len(joint) == len(mi.JOINT_SEEDS) >= 3 and len(members) == len(mi.ENSEMBLE_SEEDS) >= 3
    assert [c.seed for c, _ in joint] == list(mi.JOINT_SEEDS)
    assert len({c.seed for c, _ in members}) == len(members)
    v = mi.ensemble_verdict(joint, members)
    assert v.worst_ablation.max() < 0.5 < 0.9 < v.member.min()
    assert v.intact.min() > 0.9 and v.ensemble >= v.member.min()


def test_the_ensemble_verdict_refuses_empty_lists():
    from mha_course.lessons import misconceptions as mi
    with pytest.raises(ValueError, match="at least one"):
        mi.ensemble_verdict([], mi.load_ensemble())


def test_the_h_sweep_claims_of_11_hold_for_every_shipped_seed():
    """11 §1: over >= 3 seeds, every run with d_k <= 4 is below every run with d_k >= 16; h = 1 and 2 overlap."""
    from mha_course.lessons import checkpoints
    e = checkpoints.load_experiments()
    acc, d_k = e["h_sweep_accuracy"], 32 // e["h_sweep_hs"]
    assert acc.shape[0] >= 3
    assert acc[:, d_k >= 16].min() > acc[:, d_k <= 4].max()
    assert acc[:, 0].min() <= acc[:, 1].max() and acc[:, 1].min() <= acc[:, 0].max()  # within the noise: no ranking


@pytest.mark.parametrize("call, word", [
    (lambda c, p: mi.ablated_metrics(None, c, []), "params"),
    (lambda c, p: mi.ablated_metrics(p, c, [(0, 9)]), r"heads\[0\] head"),
    (lambda c, p: mi.ablated_metrics(p, c, [], seed=-1), "seed"),
    (lambda c, p: mi.ablated_metrics(p, c, [], n=0), "n="),
    (lambda c, p: mi.key_attribution(p, c, layer=-1), "layer"),
    (lambda c, p: mi.keep_only(c, {5: 0}), r"keep\[0\] layer"),
    (lambda c, p: mi.ensemble_metrics([], n=4), "members is empty"),
    (lambda c, p: mi.rank_correlation([1.0, np.nan], [1.0, 2.0]), "a has 1 non-finite"),
    (lambda c, p: mi.rnn_scan(np.ones((1, 2, 3)), np.eye(2), np.eye(3)), "W_x"),
    (lambda c, p: mi.sequential_steps(0), "T=0"),
])
def test_bad_arguments_are_named_at_the_entry(induction, call, word):
    config, params = induction
    with pytest.raises((ValueError, TypeError), match=word):
        call(config, params)


def test_rank_correlation_is_refused_for_a_constant_input():
    """Every rank order fits a constant input: the correlation is undefined, not 1.0."""
    with pytest.raises(ValueError, match="a is constant.*undefined"):
        mi.rank_correlation(np.array([[2.0, 2.0, 2.0, 2.0], [1.0, 2.0, 3.0, 4.0]]),
                            np.array([[1.0, 3.0, 2.0, 4.0], [4.0, 3.0, 2.0, 1.0]]))
    with pytest.raises(ValueError, match="b is constant"):
        mi.rank_correlation([3.0, 1.0], [-7.0, -7.0])
    assert float(mi.rank_correlation([3.0, 1.0, 2.0], [30.0, 10.0, 20.0])) == pytest.approx(1.0)


def test_sequential_steps_refuses_a_length_whose_weights_do_not_fit():
    with pytest.raises(ValueError, match=r"attention over T=300000 tokens .*ask for fewer"):
        mi.sequential_steps(300_000)
