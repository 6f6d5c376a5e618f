"""Training the tiny model (lessons/training.py): gradients, Adam, reproducibility.

- loss_and_grads against central finite differences of the loss, for every parameter of tiny
  models (layer norm on/off, learned/no positions, h_kv < h, no 1/sqrt(d_k), dropout).
- adam_step against torch.optim.Adam, and a twin without bias correction that the check catches.
- Reproducibility: the same seed gives the same losses, another seed others.
"""

import numpy as np
import pytest

from _mha_checks import require_torch
from mha_course.lessons import model as tr
from mha_course.lessons import training

TINY = tr.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, steps=3)


def _loss(params, batch, config, seed):
    return training.loss_and_grads(params, batch, config, np.random.default_rng(seed))[0].loss


def _leaves(tree):
    if tree is None:
        return []
    if isinstance(tree, tuple):
        return [leaf for part in tree for leaf in _leaves(part)]
    return [tree]


def assert_grads_match_fd(config, eps=1e-6, tol=1e-6):
    params = tr.init_model(config, np.random.default_rng(1))
    batch = tr.make_batch(config, np.random.default_rng(2))
    _, grads = training.loss_and_grads(params, batch, config, np.random.default_rng(3))
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
    ours, state = params, training.adam_init(params)
    for grads in grads_seq:
        ours, state = adam_step(ours, grads, state, 0.01)
    for a, b in zip(ours, adam_reference(torch, params, grads_seq, 0.01)):
        assert np.abs(a - b).max() <= 1e-12


def test_adam_matches_torch_optim_adam():
    assert_adam_matches_torch(training.adam_step)


def test_adam_without_bias_correction_is_caught():
    def no_correction(params, grads, state, lr, b1=0.9, b2=0.999, eps=1e-8):
        new, st = training.adam_step(params, grads, state, lr, b1, b2, eps)
        m, v = st.m, st.v
        wrong = training._tree_map(lambda p, m, v: p - lr * m / (np.sqrt(v) + eps), params, m, v)
        return wrong, st
    with pytest.raises(AssertionError):
        assert_adam_matches_torch(no_correction)


# ----------------------------------------------------------------------------- tasks
def test_same_seed_same_losses_and_other_seed_differs():
    a = training.train(TINY._replace(steps=4))[1].losses
    assert np.array_equal(a, training.train(TINY._replace(steps=4))[1].losses)
    assert not np.array_equal(a, training.train(TINY._replace(steps=4, seed=1))[1].losses)


