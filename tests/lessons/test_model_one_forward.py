"""The tiny model has one forward pass: every way of running it gives the same logits.

Training (the tape), decoding with KV caches, a swapped attention core, the per-layer Traces of
the experiments of notebook 11 and the plain call are held equal on configs with layer norm on
and off, RoPE, learned and no positions, GQA, one and two layers.
"""
import itertools

import numpy as np
import pytest

import mha_course as mc
from mha_course.lessons import gqa as decode
from mha_course.lessons import misconceptions as mi
from mha_course.lessons import model, training

CONFIGS = [
    model.Config(task=task, vocab=9, seq_len=10, d_model=16, h=4, h_kv=h_kv, n_layers=layers, positions=pos,
                 layer_norm=ln, scale=scale, seed=seed)
    for seed, (task, h_kv, layers, pos, ln, scale) in enumerate(itertools.product(
        ("induction",), (None, 2, 1), (1, 2), ("learned", "rope", "none"), (False, True), (True,)))
] + [model.Config(vocab=9, seq_len=10, d_model=16, h=4, n_layers=2, scale=False, layer_norm=True, seed=99)]


def _params(config):
    params = model.init_model(config)
    # non-zero biases, so that every path must use them
    rng = np.random.default_rng(config.seed)
    layers = tuple(p._replace(b_q=rng.normal(size=p.W_q.shape[1]), b_k=rng.normal(size=p.W_k.shape[1]),
                              b_v=rng.normal(size=p.W_v.shape[1]), b_o=rng.normal(size=p.W_o.shape[1]))
                   for p in params.layers)
    return params._replace(layers=layers)


def _tokens(config, B=3):
    return np.random.default_rng(config.seed + 1).integers(0, config.vocab, size=(B, config.seq_len))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"hkv{c.h_kv}-L{c.n_layers}-{c.positions}-ln{c.layer_norm}")
def test_every_user_of_the_forward_pass_gets_the_same_logits(config):
    params, tokens = _params(config), _tokens(config)
    logits, weights = model.forward(params, tokens, config)

    traces = []
    assert np.allclose(model.forward(params, tokens, config, traces=traces)[0], logits, atol=1e-10)
    assert len(traces) == config.n_layers
    assert all(np.allclose(t.weights, w, atol=1e-12) for t, w in zip(traces, weights))

    tape = []
    assert np.allclose(model.forward(params, tokens, config, tape=tape)[0], logits, atol=1e-10)

    def textbook(Q, K, V, mask):
        return mc.scaled_dot_product_attention(Q, K, V, mask)[0]
    assert np.allclose(model.forward(params, tokens, config, core=textbook)[0], logits, atol=1e-10)

    # decoding: a prefill of 4 tokens, then one token at a time, through the caches
    caches = decode.new_caches(params, config, tokens.shape[0], config.seq_len)
    steps = [decode.forward_cached(params, tokens[:, :4], config, caches)]
    steps += [decode.forward_cached(params, tokens[:, t:t + 1], config, caches) for t in range(4, config.seq_len)]
    assert np.allclose(np.concatenate(steps, axis=1), logits, atol=1e-10)

    # training: the loss that loss_and_grads reports is the loss of these logits
    batch = model.make_batch(config, np.random.default_rng(0), 3)
    assert training.loss_and_grads(params, batch, config)[0].loss == pytest.approx(
        training.metrics(params, batch, config).loss, abs=1e-12)


@pytest.mark.parametrize("config", [c for c in CONFIGS if c.layer_norm and c.n_layers == 2][:3],
                         ids=lambda c: f"hkv{c.h_kv}-{c.positions}")
def test_the_experiments_of_notebook_11_run_the_same_model(config):
    """head_attribution's grad x input is the first-order change of the loss when a head is removed:
    on a layer-norm model it must come from the model's own forward and backward pass."""
    params = _params(config)
    batch = model.make_batch(config, np.random.default_rng(5), 8)
    traces, grads = mi.residual_stream(params, config, batch)
    logits = model.forward(params, batch.tokens, config, traces=[])[0]
    assert np.allclose(model.forward(params, batch.tokens, config)[0], logits)
    # finite differences: scaling a layer's output by (1 + eps) changes the loss by eps * g . out
    layer, eps = 0, 1e-6
    base = training.metrics(params, batch, config).loss
    out = traces[layer].output
    predicted = float(np.sum(grads[layer] * out)) * eps
    W_o = params.layers[layer].W_o * (1 + eps)
    layers = list(params.layers)
    layers[layer] = layers[layer]._replace(W_o=W_o, b_o=params.layers[layer].b_o * (1 + eps))
    moved = training.metrics(params._replace(layers=tuple(layers)), batch, config).loss
    assert moved - base == pytest.approx(predicted, rel=1e-3, abs=1e-12)


def test_the_gradients_are_the_gradients_of_the_forward_pass():
    config = model.Config(vocab=7, seq_len=8, d_model=8, h=2, h_kv=1, n_layers=2, positions="rope", layer_norm=True)
    params, batch = _params(config), model.make_batch(config, np.random.default_rng(3), 4)
    _, grads = training.loss_and_grads(params, batch, config)
    rng = np.random.default_rng(0)
    for layer, name in ((0, "W_q"), (1, "W_k"), (1, "b_v"), (0, "W_o")):
        arr = getattr(params.layers[layer], name)
        idx = tuple(rng.integers(0, n) for n in arr.shape)
        eps = 1e-6

        def loss_at(delta):
            a = arr.copy()
            a[idx] += delta
            layers = list(params.layers)
            layers[layer] = layers[layer]._replace(**{name: a})
            return training.metrics(params._replace(layers=tuple(layers)), batch, config).loss
        numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
        assert getattr(grads.layers[layer], name)[idx] == pytest.approx(numeric, rel=1e-5, abs=1e-8)
