"""lessons/long_seeds.py: notebook 13's tables over seeds, and every claim its prose draws from them.

The shipped results (``long_seeds.RESULTS_PATH``, made by ``mha-course train long_seeds``) hold
each table for seeds 0, 1 and 2. Each ``test_claim_*`` recomputes one sentence of the notebook
from them: a difference the notebook reads as a result must hold on every seed (``separated``),
and one it calls "within the noise" must not.
"""
from __future__ import annotations

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


def test_load_results_refuses_other_files(tmp_path):
    other = tmp_path / "x.npz"
    other.write_bytes(checkpoints.npz_bytes({"a": np.zeros(2)}))
    with pytest.raises(ValueError, match="long_seeds"):
        ls.load_results(other)
    with pytest.raises(ValueError, match="long_seeds"):
        ls.load_results(tmp_path / "missing.npz")


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
