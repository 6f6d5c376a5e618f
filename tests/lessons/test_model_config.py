"""The tiny model's records and their checks (lessons/model_config.py): every field of a Config, every
array of a Model, the tokens and the Batch are checked once, at the entry, and refused by name with the fix.
"""
import re

import numpy as np
import pytest

from mha_course.lessons import checkpoints, training
from mha_course.lessons import model as tr
from mha_course.lessons import model_config as cfg

TINY = cfg.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, steps=3)


def _tiny():
    params = tr.init_model(TINY)
    return params, tr.make_batch(TINY, np.random.default_rng(0))


def test_the_model_module_re_exports_every_record_and_check():
    """``train.Config`` (the notebooks' spelling) is the one record, not a copy."""
    assert all(getattr(tr, name) is getattr(cfg, name) for name in cfg.__all__)
    assert set(cfg.__all__) <= set(tr.__all__)


def test_check_config_fills_in_h_kv_and_keeps_every_other_field():
    config = cfg.check_config(TINY)
    assert config.h_kv == TINY.h and config._replace(h_kv=None) == TINY
    assert cfg.check_config(TINY._replace(h_kv=1)).h_kv == 1


def test_check_batch_returns_int64_ids_and_refuses_ids_past_the_vocabulary():
    batch = cfg.Batch(np.array([[1, 2]], np.int32), np.array([[2, 0]], np.int8), np.array([[False, True]]))
    checked = cfg.check_batch(batch, vocab=3)
    assert checked.tokens.dtype == checked.targets.dtype == np.int64 and checked.scored.tolist() == [[False, True]]
    with pytest.raises(ValueError, match=re.escape("batch.tokens holds the id 2, outside 0..1")):
        cfg.check_batch(batch, vocab=2)


@pytest.mark.parametrize("change, message", [
    ({"h": 3}, "not divisible by h=3"), ({"h_kv": 3}, "h=2 is not divisible by h_kv=3"),
    ({"task": "sorting"}, "valid tasks"), ({"dropout": 1.0}, "dropout=1.0"),
    ({"vocab": 2}, "vocab >= seq_len // 2"), ({"positions": "rope", "h": 4}, "even d_k"),
])
def test_bad_config_names_the_fix(change, message):
    with pytest.raises(ValueError, match=message):
        tr.init_model(TINY._replace(**change))
    with pytest.raises(ValueError, match="no checkpoint at"):
        checkpoints.load_checkpoint("/nonexistent/x.npz")


@pytest.mark.parametrize("change, named", [
    ({"vocab": 6.0}, "config.vocab"), ({"n_layers": True}, "config.n_layers"), ({"steps": -1}, "config.steps"),
    ({"seed": -1}, "config.seed"), ({"seed": 0.5}, "config.seed"), ({"lr": float("nan")}, "config.lr"),
    ({"lr": 0.0}, "config.lr"), ({"rope_base": float("inf")}, "config.rope_base"), ({"dropout": "0.1"}, "config.dropout"),
    ({"layer_norm": "no"}, "config.layer_norm"), ({"scale": 1}, "config.scale"), ({"task": ["induction"]}, "config.task"),
])
def test_every_config_field_is_checked_and_named(change, named):
    """A float, bool or negative size, a NaN or zero learning rate, a string flag: each is refused by name,
    never read as truthy or silently rounded."""
    with pytest.raises(ValueError, match=re.escape(named)):
        cfg.check_config(TINY._replace(**change))


def test_a_model_of_another_config_is_refused_with_its_shapes():
    """Weights with one key/value head given with a config of h_kv = h (a checkpoint would store a model
    that its own config cannot rebuild), a missing position table, a missing layer: each names the array."""
    params = tr.init_model(TINY._replace(h_kv=1))
    with pytest.raises(ValueError, match=re.escape("params.layers[0].W_k has shape (4, 2)")):
        cfg.check_model(params, TINY)
    with pytest.raises(ValueError, match=re.escape("params.pos has shape None")):
        cfg.check_model(tr.init_model(TINY)._replace(pos=None), TINY)
    with pytest.raises(ValueError, match="holds 1 layers, but config.n_layers=2"):
        cfg.check_model(params._replace(layers=params.layers[:1]), TINY._replace(h_kv=1))
    assert cfg.check_model(params, TINY._replace(h_kv=1)) is params


@pytest.mark.parametrize("tokens, message", [
    (np.array([[0, -1, 2, 3, 4, 5]]), "the id -1, outside 0..5"), (np.array([[0, 6, 2, 3, 4, 5]]), "the id 6"),
    (np.zeros((1, 6)), "whole-number token ids"), (np.zeros((1, 6), bool), "whole-number token ids"),
    (np.zeros(6, int), "shape (6,)"), (np.zeros((0, 6), int), "shape (0, 6)"), ("spam", "whole-number token ids"),
])
def test_tokens_for_this_config_are_checked_once_for_every_entry(tokens, message):
    params, _ = _tiny()
    for call in (lambda: tr.forward(params, tokens, TINY), lambda: tr.embed(params, tokens, TINY),
                 lambda: cfg.check_tokens(tokens, TINY)):
        with pytest.raises(ValueError, match=re.escape(message)):
            call()


def test_a_batch_is_checked_before_it_is_read():
    """None, a tuple that is no Batch, or mismatched shapes: a ValueError naming batch (never AttributeError)."""
    params, batch = _tiny()
    logits, weights = tr.forward(params, batch.tokens, TINY)
    for bad in (None, 3, tuple(batch), batch._replace(scored=batch.scored[:, 1:]),
                batch._replace(scored=batch.scored.astype(int))):
        for call in (lambda: tr.scored_metrics(logits, bad), lambda: tr.induction_score(weights[1], bad),
                     lambda: training.metrics(params, bad, TINY), lambda: training.cross_entropy(logits, bad),
                     lambda: training.backward(params, bad, TINY)):
            with pytest.raises(ValueError, match="batch"):
                call()
    with pytest.raises(ValueError, match="batch.targets holds the id 6"):
        tr.scored_metrics(logits, batch._replace(targets=np.full_like(batch.targets, 6)))


def test_a_model_holds_finite_float_arrays():
    params, batch = _tiny()
    for bad, named in ((params._replace(unembed=np.full((4, 6), np.nan)), "params.unembed has 24 non-finite"),
                       (params._replace(embed=np.zeros((6, 4), int)), "params.embed is ndarray int64"),
                       (params._replace(embed=np.full((6, 4), "a")), "params.embed is ndarray <U1")):
        with pytest.raises(ValueError, match=re.escape(named)):
            tr.forward(bad, batch.tokens, TINY)


def test_the_losses_check_their_logits_once_and_alike():
    """scored_metrics and training.cross_entropy take the same logits and refuse the same ones, by one check."""
    params, batch = _tiny()
    logits, _ = tr.forward(params, batch.tokens, TINY)
    assert cfg.check_logits(logits, batch)[0] is logits
    for bad, message in ((logits[:, 1:], "batch is (3, 6) but logits (3, 5, 6)"), (logits[0], "logits has shape (6, 6)"),
                         (np.full_like(logits, np.nan), "logits has 108 non-finite values"),
                         (logits[..., :4], "holds the id 4, outside 0..3")):
        for loss in (cfg.check_logits, tr.scored_metrics, training.cross_entropy):
            with pytest.raises(ValueError, match=re.escape(message)):
                loss(bad, batch)
