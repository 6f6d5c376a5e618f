"""The tiny model (lessons/model.py): its tasks, head ablation and the config's checks.

- previous_token: learned with positions, near chance (on late positions) without.
- induction batches repeat a random block and score its second copy.
- A bad config is refused with a ValueError naming the fix.
"""

import numpy as np
import pytest

from mha_course.lessons import checkpoints, training
from mha_course.lessons import model as tr

TINY = tr.Config(task="induction", vocab=6, seq_len=6, d_model=4, h=2, n_layers=2, batch=3, steps=3)


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
    with_pos, _ = training.train(config)
    assert training.evaluate(with_pos, config, np.random.default_rng(5)).accuracy > 0.95
    nopos_config = config._replace(positions="none")
    without, _ = training.train(nopos_config)
    late = tr.make_batch(nopos_config, np.random.default_rng(5), 256)
    late = late._replace(scored=late.scored & (np.arange(16) >= 8))  # many candidates, no position
    logits, _ = tr.forward(without, late.tokens, nopos_config)
    accuracy = (logits.argmax(-1) == late.targets)[late.scored].mean()
    assert accuracy < 0.25  # chance is 1/16; a few tokens can be ruled out, not more


# ----------------------------------------------------------------------------- reproducibility
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
        checkpoints.load_checkpoint("/nonexistent/x.npz")


