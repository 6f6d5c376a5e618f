"""The tiny model and its training (mha_course.train): gradients, Adam, tasks, checkpoints.

- loss_and_grads against central finite differences of the loss, for every parameter of tiny
  models (layer norm on/off, learned/no positions, h_kv < h, no 1/sqrt(d_k), dropout).
- adam_step against torch.optim.Adam, and a twin without bias correction that the check catches.
- Reproducibility: the same seed gives the same losses; the shipped checkpoints' first losses are
  re-made by training again, and their accuracy and head scores pass thresholds.
- previous_token: learned with positions, near chance (on late positions) without.
"""
import argparse
from unittest import mock

import numpy as np
import pytest

import mha_course as mc
from _mha_checks import require_torch
from mha_course.lessons import model as tr
from mha_course.tools import train as train_command

TINY = tr.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, steps=3)


def _loss(params, batch, config, seed):
    return tr.loss_and_grads(params, batch, config, np.random.default_rng(seed))[0].loss


def _leaves(tree):
    if tree is None:
        return []
    if isinstance(tree, tuple):
        return [leaf for part in tree for leaf in _leaves(part)]
    return [tree]


def assert_grads_match_fd(config, eps=1e-6, tol=1e-6):
    params = tr.init_model(config, np.random.default_rng(1))
    batch = tr.make_batch(config, np.random.default_rng(2))
    _, grads = tr.loss_and_grads(params, batch, config, np.random.default_rng(3))
    for p, g in zip(_leaves(params), _leaves(grads)):
        assert p.shape == g.shape
        for i in np.ndindex(p.shape):
            old = p[i]
            p[i] = old + eps
            up = _loss(params, batch, config, 3)  # the same seed: the same dropout masks
            p[i] = old - eps
            down = _loss(params, batch, config, 3)
            p[i] = old
            assert abs((up - down) / (2 * eps) - g[i]) <= tol, f"entry {i} of a {p.shape} parameter"


@pytest.mark.parametrize("change", [
    {}, {"layer_norm": True}, {"positions": "none"}, {"h_kv": 1}, {"scale": False},
    {"dropout": 0.3}, {"task": "previous_token", "n_layers": 1, "h": 1}, {"positions": "rope"},
])
def test_gradients_match_finite_differences(change):
    assert_grads_match_fd(TINY._replace(**change))


def test_gqa_model_runs_repeated_kv_heads():
    config = TINY._replace(h=4, d_model=8, h_kv=2)
    params = tr.init_model(config)
    lp = tr.layer_params(params, config, 0)
    assert params.layers[0].W_k.shape == (8, 4) and lp.W_k.shape == (8, 8)
    # query heads 0 and 1 read key head 0: their (D, d_k) blocks are the same columns
    assert np.array_equal(lp.W_k[:, 0:2], lp.W_k[:, 2:4]) and np.array_equal(lp.W_k[:, 0:2], params.layers[0].W_k[:, 0:2])


# ----------------------------------------------------------------------------- Adam
def adam_reference(torch, params, grads_seq, lr):
    t = [torch.tensor(p.copy(), requires_grad=True) for p in params]
    opt = torch.optim.Adam(t, lr=lr, betas=(0.9, 0.999), eps=1e-8)
    for grads in grads_seq:
        for tp, g in zip(t, grads):
            tp.grad = torch.tensor(g)
        opt.step()
    return [tp.detach().numpy() for tp in t]


def assert_adam_matches_torch(adam_step, steps=4):
    torch = require_torch()
    rng = np.random.default_rng(0)
    params = (rng.normal(size=(3, 2)), rng.normal(size=4))
    grads_seq = [(rng.normal(size=(3, 2)), rng.normal(size=4)) for _ in range(steps)]
    ours, state = params, tr.adam_init(params)
    for grads in grads_seq:
        ours, state = adam_step(ours, grads, state, 0.01)
    for a, b in zip(ours, adam_reference(torch, params, grads_seq, 0.01)):
        assert np.abs(a - b).max() <= 1e-12


def test_adam_matches_torch_optim_adam():
    assert_adam_matches_torch(tr.adam_step)


def test_adam_without_bias_correction_is_caught():
    def no_correction(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8):
        new, st = tr.adam_step(params, grads, state, lr, b1, b2, eps)
        m, v = st.m, st.v
        wrong = tr._tree_map(lambda p, m, v: p - lr * m / (np.sqrt(v) + eps), params, m, v)
        return wrong, st
    with pytest.raises(AssertionError):
        assert_adam_matches_torch(no_correction)


# ----------------------------------------------------------------------------- tasks
def test_induction_batch_repeats_and_scores_the_second_copy():
    config = tr.Config(task="induction", vocab=16, seq_len=24)
    b = tr.make_batch(config, np.random.default_rng(0), 50)
    T = b.tokens.shape[1]
    n = T - np.argmax(b.scored, axis=1)
    assert set(n) <= set(range(6, 13)) and len(set(n)) > 3  # the copy length varies
    for row, k in zip(range(50), n):
        first, second = b.tokens[row, T - 2 * k:T - k], b.tokens[row, T - k:]
        assert np.array_equal(first, second) and len(set(first)) == k  # distinct tokens, repeated
        t = np.nonzero(b.scored[row])[0]
        assert np.array_equal(b.targets[row, t], b.tokens[row, t + 1]) and t.max() == T - 2


def test_previous_token_needs_positions():
    config = tr.Config(task="previous_token", vocab=16, seq_len=16, d_model=16, h=2, n_layers=1,
                       batch=32, steps=150, lr=1e-2)
    with_pos, _ = tr.train(config)
    assert tr.evaluate(with_pos, config, np.random.default_rng(5)).accuracy > 0.95
    nopos_config = config._replace(positions="none")
    without, _ = tr.train(nopos_config)
    late = tr.make_batch(nopos_config, np.random.default_rng(5), 256)
    late = late._replace(scored=late.scored & (np.arange(16) >= 8))  # many candidates, no position
    logits, _ = tr.forward(without, late.tokens, nopos_config)
    accuracy = (logits.argmax(-1) == late.targets)[late.scored].mean()
    assert accuracy < 0.25  # chance is 1/16; a few tokens can be ruled out, not more


# ----------------------------------------------------------------------------- reproducibility
def test_same_seed_same_losses_and_other_seed_differs():
    a = tr.train(TINY._replace(steps=4))[1].losses
    assert np.array_equal(a, tr.train(TINY._replace(steps=4))[1].losses)
    assert not np.array_equal(a, tr.train(TINY._replace(steps=4, seed=1))[1].losses)


@pytest.mark.parametrize("task", sorted(t for t in tr.CHECKPOINT_CONFIGS if not t.startswith("long_")))
def test_shipped_checkpoint_is_reproducible_and_trained(task):  # notebook 13's long_*: tests/lessons/test_long_context.py
    config, params, history = tr.load_checkpoint(tr.checkpoint_path(task))
    assert config == tr.CHECKPOINT_CONFIGS[task]
    _, again = tr.train(config._replace(steps=5))
    assert np.allclose(again.losses, history.losses[:5], rtol=0, atol=1e-9)
    metrics = tr.evaluate(params, config, np.random.default_rng(99))
    assert metrics.accuracy >= 0.95
    batch = tr.make_batch(config, np.random.default_rng(7), 64)
    _, weights = tr.forward(params, batch.tokens, config)
    assert mc.previous_token_score(weights[0]).max() > 0.5  # a previous-token head in layer 1
    if task == "induction":
        assert tr.induction_score(weights[1], batch).max() > 0.5  # an induction head in layer 2
    assert tr.checkpoint_path(task).stat().st_size < 300_000


def test_ablating_a_head_zeroes_its_output():
    config = TINY
    params = tr.init_model(config)
    cut = tr.ablate_head(params, config, layer=0, head=1)
    d_k = config.d_model // config.h
    assert np.all(cut.layers[0].W_o[d_k:] == 0) and np.array_equal(cut.layers[0].W_o[:d_k], params.layers[0].W_o[:d_k])
    tokens = tr.make_batch(config, np.random.default_rng(0)).tokens
    assert np.array_equal(tr.forward(params, tokens, config, ablate=[(0, 1)])[0], tr.forward(cut, tokens, config)[0])
    with pytest.raises(ValueError, match="out of range"):
        tr.ablate_head(params, config, layer=2, head=0)


# ----------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_and_atomic_write(tmp_path):
    params, history = tr.train(TINY._replace(h_kv=1), snapshot_every=1)
    path = tr.save_checkpoint(tmp_path / "m.npz", params, TINY._replace(h_kv=1), history)
    config, loaded, hist = tr.load_checkpoint(path)
    assert config == TINY._replace(h_kv=1) and hist.snapshot_weights.shape == (3, 2, 2, 6, 6)
    for a, b in zip(_leaves(params), _leaves(loaded)):
        assert np.array_equal(a, b)
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]  # no temp file left behind
    with mock.patch.object(tr.np, "savez_compressed", side_effect=OSError("disk full")):
        with pytest.raises(OSError):
            tr.save_checkpoint(path, params, TINY, history)
    assert tr.load_checkpoint(path)[0] == TINY._replace(h_kv=1)  # the old file is whole
    assert [p.name for p in tmp_path.iterdir()] == ["m.npz"]


def test_train_command_writes_a_checkpoint(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    train_command.add_train_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", "previous_token", "--out", str(tmp_path / "p.npz")])
    small = {"previous_token": TINY._replace(task="previous_token", n_layers=1)}
    with mock.patch.object(tr, "CHECKPOINT_CONFIGS", small):
        assert args.func(args) == 0
    assert "saved" in capsys.readouterr().out and tr.load_checkpoint(tmp_path / "p.npz")[0].n_layers == 1


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("change, message", [
    ({"h": 3}, "not divisible by h=3"), ({"h_kv": 3}, "h=2 is not divisible by h_kv=3"),
    ({"task": "sorting"}, "valid tasks"), ({"dropout": 1.0}, "dropout=1.0"),
    ({"vocab": 2}, "vocab >= seq_len // 2"), ({"positions": "rope", "h": 4}, "even d_k"),
])
def test_bad_config_names_the_fix(change, message):
    with pytest.raises(ValueError, match=message):
        tr.init_model(TINY._replace(**change))
    with pytest.raises(ValueError, match="no checkpoint at"):
        tr.load_checkpoint("/nonexistent/x.npz")


def test_shipped_experiments_are_reproducible():
    exp = tr.load_experiments()
    assert list(exp["h_sweep_hs"]) == list(tr.SWEEP_HS)
    assert exp["h_sweep_losses"].shape == (2, len(tr.SWEEP_HS), tr.SWEEP_STEPS)
    base = tr.CHECKPOINT_CONFIGS["induction"]
    again = tr.train(base._replace(h=2, steps=3, seed=1))[1].losses  # seed 1, h = 2: row 1, column 1
    assert np.allclose(again, exp["h_sweep_losses"][1, 1, :3], rtol=0, atol=1e-9)
    again = tr.train(tr.SCALE_CONFIG._replace(scale=False, steps=3))[1].losses
    assert np.allclose(again, exp["scale_off_losses"][:3], rtol=0, atol=1e-9)
    assert float(exp["one_layer_accuracy"]) < 0.5 < float(exp["dropout_0_accuracy"])
    with pytest.raises(ValueError, match="no experiments file"):
        tr.load_experiments("/nonexistent/e.npz")
