"""Training the tiny model (lessons/training.py): gradients, Adam, reproducibility.

- loss_and_grads against central finite differences of the loss, for every parameter of tiny
  models (layer norm on/off, learned/no positions, h_kv < h, no 1/sqrt(d_k), dropout).
- adam_step against torch.optim.Adam, and a twin without bias correction that the check catches.
- Reproducibility: the same seed gives the same losses, another seed others.
"""

import re

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




# ----------------------------------------------------------------------------- every entry checks
@pytest.mark.parametrize("name, value, message", [
    ("lr", float("nan"), "lr=nan must be a finite number"), ("lr", -1e-3, "lr=-0.001 is outside (0"),
    ("b1", 1.0, "b1=1.0 is outside [0, 1)"), ("b2", float("inf"), "b2=inf must be a finite number"),
    ("eps", 0.0, "eps=0.0 is outside (0"), ("lr", "1e-3", "lr='1e-3' must be a finite number"),
])
def test_adam_step_refuses_hyperparameters_that_would_give_nan_or_go_uphill(name, value, message):
    """A NaN b1 made every parameter NaN without a word; a negative lr climbs the loss."""
    p = np.array([1.0])
    kwargs = {**dict(lr=0.1, b1=0.9, b2=0.999, eps=1e-8), name: value}
    with pytest.raises(ValueError, match=re.escape(message)):
        training.adam_step(p, np.array([0.5]), training.adam_init(p), **kwargs)


def test_adam_refuses_trees_that_are_not_params_or_do_not_match():
    params = tr.init_model(TINY)
    for bad in (None, "params", 3, [np.zeros(2)], np.zeros(2, int)):
        with pytest.raises(ValueError, match="params"):
            training.adam_init(bad)
    state = training.adam_init(params)
    with pytest.raises(ValueError, match=re.escape("grads.unembed is an array float64 (4, 5)")):
        training.adam_step(params, params._replace(unembed=params.unembed[:, :5]), state, lr=0.1)
    with pytest.raises(ValueError, match="grads is NoneType"):
        training.adam_step(params, None, state, lr=0.1)
    with pytest.raises(ValueError, match="state must be an AdamState"):
        training.adam_step(params, params, None, lr=0.1)
    with pytest.raises(ValueError, match="state.step=-1 must be >= 0"):
        training.adam_step(params, params, state._replace(step=-1), lr=0.1)
    new, s = training.adam_step(params, params, state, lr=0.1)
    assert s.step == 1 and new.pos is not None and np.isfinite(new.embed).all()


def test_evaluate_cross_entropy_and_layer_norm_backward_name_their_own_arguments():
    """evaluate(n=-1) used to blame 'batch', a helper's argument; cross_entropy(None) blamed 'x'."""
    params = tr.init_model(TINY)
    for n in (-1, 0, 2.5, True, "8"):
        with pytest.raises(ValueError, match=r"\bn="):
            training.evaluate(params, TINY, np.random.default_rng(0), n)
    with pytest.raises(ValueError, match="rng must be a numpy Generator"):
        training.evaluate(params, TINY, None)
    batch = tr.make_batch(TINY, np.random.default_rng(0))
    for bad in (None, "logits", np.zeros((3, 6))):
        with pytest.raises(ValueError, match="logits"):
            training.cross_entropy(bad, batch)
    with pytest.raises(ValueError, match=re.escape("grad_y has shape (2, 0) but x (2, 4)")):
        training.layer_norm_backward(np.ones((2, 4)), np.ones((2, 0)))
    with pytest.raises(ValueError, match="eps=-1.0 is outside"):
        training.layer_norm_backward(np.ones((2, 4)), np.ones((2, 4)), eps=-1.0)


def test_backward_and_train_refuse_arguments_they_would_ignore():
    params = tr.init_model(TINY)
    batch = tr.make_batch(TINY, np.random.default_rng(0))
    for bad in ("rng", 3):
        with pytest.raises(ValueError, match="rng must be a numpy Generator"):
            training.loss_and_grads(params, batch, TINY, bad)
    with pytest.raises(ValueError, match="progress='yes' must be True or False"):
        training.train(TINY, progress="yes")
    with pytest.raises(ValueError, match="snapshot_every=-1 must be >= 0"):
        training.train(TINY, snapshot_every=-1)
    with pytest.raises(ValueError, match="callback=3 must be a function"):
        training.train(TINY, callback=3)
    with pytest.raises(ValueError, match="params must be a train.Model"):
        training.train(TINY, params="model")


def test_check_history_refuses_a_history_of_another_config():
    _, history = training.train(TINY, snapshot_every=1)
    assert training.check_history(history, TINY).snapshot_weights.shape == (3, 2, 2, 6, 6)
    with pytest.raises(ValueError, match="history must be a training.History"):
        training.check_history(3, TINY)
    with pytest.raises(ValueError, match=re.escape("expected (steps,), (n,) whole numbers and (n, 1, 2, T, T)")):
        training.check_history(history, TINY._replace(n_layers=1))
    with pytest.raises(ValueError, match="history.losses has 1 non-finite value"):
        training.check_history(history._replace(losses=np.array([1.0, np.nan])), TINY)


def test_adam_refuses_gradients_whose_square_overflows():
    """v = g**2 became inf and the step silently 0 (m / sqrt(inf))."""
    p = np.zeros(2)
    with pytest.raises(ValueError, match="whose square overflows float64"):
        training.adam_step(p, np.array([1e200, 0.0]), training.adam_init(p), lr=0.1)
    p32 = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match="whose square overflows float32"):
        training.adam_step(p32, np.array([1e20, 0.0], np.float32), training.adam_init(p32), lr=0.1)
