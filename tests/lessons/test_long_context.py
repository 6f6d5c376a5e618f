"""Notebook 13's experiments (mha_course.lessons.long_context), its views and sliders, its checkpoints.

- the evaluations: learned tables extended with untrained rows, the shifted task keeps the training
  task at later positions, per-position losses agree with training.metrics;
- the shipped long_* checkpoints: the configs of checkpoints.CHECKPOINT_CONFIGS, their first training
  losses re-made by training again (the fine-tunes from their parent), their accuracy at 1x;
- rolling-cache decoding of the model with a window >= T equals full attention; the quantised cache at 16 and 8 bits
  changes the model's loss by little, at 2 bits by a lot; the bytes per token formula;
- the views return their axes / figures and the sliders redraw (Agg backend).
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.lessons import checkpoints, training
from mha_course.lessons import long_context as lc  # noqa: E402
from mha_course.lessons import model as train  # noqa: E402


@pytest.fixture(scope="module")
def rope(long_context_models):
    return long_context_models["rope"]


# ----------------------------------------------------------------------------- evaluations
def test_at_length_extends_only_learned_tables(long_context_models):
    config, params = long_context_models["learned"]
    cfg, p = lc.at_length(params, config, 40, np.random.default_rng(0))
    assert cfg.seq_len == 40 and p.pos.shape == (40, 32) and np.array_equal(p.pos[:16], params.pos)
    assert abs(p.pos[16:].std() - 1) < 0.1  # N(0, 1) rows, as init_model draws them
    cfg, p = lc.at_length(long_context_models["rope"][1], long_context_models["rope"][0], 40)
    assert p is long_context_models["rope"][1] and cfg.seq_len == 40


def test_shifted_batch_is_the_training_task_after_noise(rope):
    config, _ = rope
    b = lc.shifted_batch(config, 48, np.random.default_rng(3), 20)
    ref = train.make_batch(config, np.random.default_rng(3), 20)
    assert b.tokens.shape == (20, 48) and not b.scored[:, :32].any()
    assert np.array_equal(b.tokens[:, 32:], ref.tokens) and np.array_equal(b.scored[:, 32:], ref.scored)
    with pytest.raises(ValueError, match="shorter"):
        lc.shifted_batch(config, 8, np.random.default_rng(0))


def test_evaluate_at_agrees_with_train_metrics(rope):
    config, params = rope
    metrics, per_position = lc.evaluate_at(params, config, 32, "stretched", seed=4, n=64)
    batch = lc.stretched_batch(config, 32, np.random.default_rng(4), 64)
    ref = training.metrics(params, batch, config._replace(seq_len=32))
    assert metrics.loss == pytest.approx(ref.loss, rel=1e-10) and metrics.accuracy == ref.accuracy
    assert per_position.shape == (32,) and np.isnan(per_position[:16]).all() and np.isfinite(per_position[16:31]).all()


def test_token_losses_are_cross_entropy():
    logits = np.random.default_rng(0).normal(size=(2, 3, 5))
    targets = np.array([[0, 1, 4], [2, 2, 3]])
    p = mc.softmax(logits)
    assert np.allclose(lc.token_losses(logits, targets), -np.log(np.take_along_axis(p, targets[..., None], -1)[..., 0]))


def test_extrapolation_table_and_format(long_context_models):
    small = {k: long_context_models[k] for k in ("rope", "alibi")}
    table = lc.extrapolation_table(small, lengths=(16, 32), n=32)
    assert list(table) == ["rope", "alibi"] and len(table["rope"]) == 2
    text = lc.format_table(table, lengths=(16, 32))
    assert "1x = 16 tokens" in text and "2x = 32 tokens" in text and text.count("\n") == 3
    with pytest.raises(ValueError, match="stretched"):
        lc.evaluate_at(*long_context_models["rope"][::-1], 16, kind="sideways")


def test_weight_by_distance_sums_to_one(rope):
    config, params = rope
    w = lc.weight_by_distance(params, config, lc.shifted_batch(config, 24, np.random.default_rng(0), 16))
    assert w.shape == (4, 24) and np.allclose(w.sum(1), 1)


# ----------------------------------------------------------------------------- checkpoints
def test_checkpoint_configs_cover_every_scheme_and_fine_tune():
    names = {n for n in checkpoints.CHECKPOINT_CONFIGS if n.startswith("long_")}
    assert names == ({f"long_{p}" for p in lc.SCHEMES} | {"long_rope_tuned", "long_rope_linear_tuned",
                                                          "long_rope_ntk_tuned", "long_rope_yarn_tuned"}
                     | {f"long_{p}_len{L}" for p in ("learned", "rope", "alibi") for L in (8, 32)})
    for name in names:
        config, _, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path(name))
        assert config == checkpoints.CHECKPOINT_CONFIGS[name]
    total = sum(checkpoints.checkpoint_path(n).stat().st_size for n in names)
    assert total < 2 * 2 ** 20, f"notebook 13's checkpoints take {total} bytes"


@pytest.mark.parametrize("name", ["long_alibi", "long_rope_yarn_tuned"])
def test_shipped_checkpoint_first_losses_are_reproduced(name):
    config, _, history = checkpoints.load_checkpoint(checkpoints.checkpoint_path(name))
    parent = checkpoints.CHECKPOINT_PARENTS.get(name)
    start = None if parent is None else checkpoints.load_checkpoint(checkpoints.checkpoint_path(parent))[1]
    _, again = training.train(config._replace(steps=20), params=start)
    assert np.allclose(again.losses, history.losses[:20], rtol=1e-9, atol=1e-12)


def test_trained_models_solve_the_task_at_the_training_length(long_context_models):
    for name in ("learned", "sinusoidal", "rope"):
        config, params = long_context_models[name]
        assert lc.evaluate_at(params, config, 16, n=128)[0].accuracy > 0.95, name


def test_train_command_offers_long_context():
    import argparse

    from mha_course.tools import train as train_command
    parser = argparse.ArgumentParser()
    train_command.add_train_command(parser.add_subparsers())
    assert parser.parse_args(["train", "long_context"]).task == "long_context"
    assert parser.parse_args(["train", "long_rope_ntk_tuned"]).task == "long_rope_ntk_tuned"


# ----------------------------------------------------------------------------- caches
def test_rolling_decoding_with_a_window_covering_everything_equals_full_attention(rope):
    config, params = rope
    stream = lc.stream_batch(config, 2, np.random.default_rng(0), 8)
    full, m_full = lc.stream_position_losses(params, config, stream)
    rolled, m_rolled = lc.stream_position_losses(params, config, stream, window=32, chunk=5)
    assert np.allclose(full, rolled, equal_nan=True, atol=1e-10) and m_full.accuracy == m_rolled.accuracy


def test_rolling_decoding_of_the_model_equals_its_masked_forward(rope):
    """The model's rolling-cache decoding, chunk by chunk, equals token by token."""
    config, params = rope
    stream = lc.stream_batch(config, 3, np.random.default_rng(1), 4)
    a, _ = lc.stream_position_losses(params, config, stream, window=7, sinks=2, chunk=1)
    b, _ = lc.stream_position_losses(params, config, stream, window=7, sinks=2, chunk=11)
    assert np.allclose(a, b, equal_nan=True, atol=1e-10)


def test_quantized_cache_accuracy_falls_with_the_bits(rope):
    config, params = rope
    batch = train.make_batch(config, np.random.default_rng(5), 64)
    exact = lc.quantized_metrics(params, config, batch, None)
    assert exact.loss == pytest.approx(training.metrics(params, batch, config).loss, rel=1e-10)
    assert abs(lc.quantized_metrics(params, config, batch, 8).loss - exact.loss) < 0.01
    assert lc.quantized_metrics(params, config, batch, 2).loss > exact.loss + 1
    with pytest.raises(ValueError, match="bits"):
        lc.QuantizedKVCache(1, 1, 2, 4, bits=20)


def test_quantized_bytes_per_token():
    assert lc.quantized_kv_bytes_per_token(32, 8, 128, 16) == mc.kv_cache_bytes_per_token(32, 8, 128, 2)
    assert lc.quantized_kv_bytes_per_token(1, 1, 64, 8) == 2 * (64 + 2)
    assert lc.quantized_kv_bytes_per_token(1, 1, 64, 4, scale_bytes=4) == 2 * (32 + 4)


def test_sink_weight_and_uniform_share(rope):
    config, params = rope
    w = lc.sink_weight(params, config, train.make_batch(config, np.random.default_rng(0), 32))
    assert w.shape == (2, 4) and (w >= 0).all() and (w <= 1).all()
    assert lc.uniform_share(3) == pytest.approx((1 / 2 + 1 / 3) / 2)
