"""Decoding the notebook-08 model (mha_course.decode): the cache changes the cost, never the tokens.

- forward_cached (prefill, then any chunks) gives train.forward's logits, for MHA, GQA and MQA
  models, with and without layer norm, positions and the 1/sqrt(d_k) scale;
- generate with and without the cache picks identical tokens (random models and the shipped
  induction checkpoint, which continues a repeated pattern);
- a wrong cached decoder (positions restarted at 0 on every step) is caught by the same checks;
- bad input. No timed assertions: timings only have to be there and be positive.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from mha_course.lessons import checkpoints
from mha_course.lessons import gqa as decode
from mha_course.lessons import model as train

E = re.escape
CONFIGS = {
    "mha": train.Config(task="previous_token", vocab=11, seq_len=20, d_model=16, h=4, n_layers=2),
    "gqa-ln": train.Config(task="previous_token", vocab=11, seq_len=20, d_model=16, h=4, h_kv=2,
                           n_layers=2, layer_norm=True),
    "mqa-noscale": train.Config(task="previous_token", vocab=11, seq_len=20, d_model=16, h=4, h_kv=1,
                                n_layers=1, scale=False),
    "nopos-3layers": train.Config(task="previous_token", vocab=7, seq_len=20, d_model=8, h=2, n_layers=3,
                                  positions="none"),
}


@pytest.fixture(params=list(CONFIGS))
def model(request):
    config = CONFIGS[request.param]
    return config, train.init_model(config, np.random.default_rng(len(request.param)))


def _cached_logits(params, config, tokens, cuts):
    caches = decode.new_caches(params, config, tokens.shape[0], tokens.shape[1])
    return np.concatenate([decode.forward_cached(params, chunk, config, caches)
                           for chunk in np.split(tokens, cuts, axis=1)], axis=1)


@pytest.mark.parametrize("cuts", [[], [5], [1, 2, 3, 9], list(range(1, 20))], ids=["prefill", "2", "5", "tokens"])
def test_cached_forward_gives_train_forwards_logits(model, cuts):
    config, params = model
    tokens = np.random.default_rng(1).integers(0, config.vocab, size=(3, 20))
    full, _ = train.forward(params, tokens, config)
    assert np.abs(_cached_logits(params, config, tokens, cuts) - full).max() <= 1e-10


def test_generate_same_tokens_with_and_without_cache(model):
    config, params = model
    prompt = np.random.default_rng(2).integers(0, config.vocab, size=(2, 4))
    with_cache = decode.generate(params, config, prompt, 16, use_cache=True)
    without = decode.generate(params, config, prompt, 16, use_cache=False)
    assert with_cache.shape == (2, 20) and np.array_equal(with_cache[:, :4], prompt)
    assert np.array_equal(with_cache, without)


def test_the_cache_holds_h_kv_heads_not_h():
    config = CONFIGS["mqa-noscale"]
    params = train.init_model(config)
    caches = decode.new_caches(params, config, 2, 10)
    decode.forward_cached(params, np.zeros((2, 3), int), config, caches)
    assert [c.keys.shape for c in caches] == [(2, 1, 3, 4)]


def test_a_decoder_that_restarts_positions_is_caught(monkeypatch):
    """The learned-position twin of the RoPE bug: every new chunk embedded from position 0."""
    config = CONFIGS["mha"]
    params = train.init_model(config)
    tokens = np.random.default_rng(3).integers(0, config.vocab, size=(2, 12))
    full, _ = train.forward(params, tokens, config)
    assert np.abs(_cached_logits(params, config, tokens, [4, 5, 6]) - full).max() <= 1e-10
    real = train.embed
    monkeypatch.setattr(train, "embed", lambda params, tokens, config, start=0: real(params, tokens, config, 0))
    assert np.abs(_cached_logits(params, config, tokens, [4, 5, 6]) - full).max() > 1e-3
    assert np.abs(_cached_logits(params, config, tokens, []) - full).max() <= 1e-10  # a prefill hides it


# ----------------------------------------------------------------------------- the trained model
def _checkpoint():
    path = checkpoints.checkpoint_path("induction")
    if not path.exists():
        pytest.skip(f"no shipped checkpoint at {path} yet")
    config, params, _ = checkpoints.load_checkpoint(path)
    return config, params


def test_trained_induction_model_decodes_the_same_with_and_without_cache():
    config, params = _checkpoint()
    batch = train.make_batch(config, np.random.default_rng(5), 16)
    prompt = batch.tokens[:, : config.seq_len - 6]
    a = decode.generate(params, config, prompt, 6, use_cache=True)
    b = decode.generate(params, config, prompt, 6, use_cache=False)
    assert np.array_equal(a, b)
    right = (a[:, -6:] == batch.tokens[:, -6:]).mean()
    assert right >= 0.9, f"the induction model continued only {right:.0%} of the repeated tokens"


# ----------------------------------------------------------------------------- timings and the bar
def test_timings_are_one_positive_number_per_token():
    config = CONFIGS["gqa-ln"]
    params = train.init_model(config)
    for use_cache in (True, False):
        s = decode.seconds_per_token(params, config, [[1, 2]], 5, use_cache=use_cache)
        assert s.shape == (5,) and (s > 0).all()
        assert decode.step_seconds(params, config, 7, use_cache=use_cache, repeats=2,
                                   rng=np.random.default_rng(0)) > 0


def test_progress_bar(capsys):
    config = CONFIGS["mha"]
    tokens = decode.generate(train.init_model(config), config, [[1]], 3, progress=True)
    assert tokens.shape == (1, 4) and "decoding with cache" in capsys.readouterr().err


def test_forward_cached_refuses_positions_the_model_never_learned():
    config = CONFIGS["mha"]
    params = train.init_model(config)
    caches = decode.new_caches(params, config, 1, 30)
    decode.forward_cached(params, np.zeros((1, 18), int), config, caches)
    with pytest.raises(ValueError, match=E("learned positions for 20 tokens; 18 cached + 3 new = 21 is too long")):
        decode.forward_cached(params, np.zeros((1, 3), int), config, caches)
    assert caches[0].length == 18


def test_timing_model_has_the_structure_and_the_length():
    config = checkpoints.CHECKPOINT_CONFIGS["induction"]
    cfg, params = decode.timing_model(config, 300)
    assert decode.max_positions(params) == 300 and cfg.d_model == config.d_model
    assert len(params.layers) == config.n_layers and cfg.h == config.h


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("prompt, n_new, pattern", [
    ([1, 2], 3, E("prompt must be a (B, P) array of token ids with P >= 1, got shape (2,)")),
    ([[1.5]], 3, E("prompt must be a (B, P) array of token ids")),
    ([[1, 11]], 3, E("prompt holds token ids 1..11 but the vocabulary is 0..10")),
    ([[1, 2]], 0, E("n_new=0 must be >= 1")),
    ([[1, 2]], 20, E("a prompt of 2 tokens + n_new=20 needs positions for 21 tokens but the model has learned "
                     "20; ask for n_new <= 19")),
])
def test_bad_input(prompt, n_new, pattern):
    config = CONFIGS["mha"]
    with pytest.raises(ValueError, match=pattern):
        decode.generate(train.init_model(config), config, prompt, n_new)


# ----------------------------------------------------------------------------- GQA from a trained MHA model
def test_to_gqa_with_h_kv_equal_h_changes_nothing_and_pools_otherwise():
    config = CONFIGS["mha"]
    params = train.init_model(config)
    same_config, same = decode.to_gqa(params, config, config.h)
    tokens = np.random.default_rng(0).integers(0, config.vocab, size=(2, 9))
    assert np.array_equal(train.forward(same, tokens, same_config)[0], train.forward(params, tokens, config)[0])
    mqa_config, mqa = decode.to_gqa(params, config, 1)
    assert mqa_config.h_kv == 1 and mqa.layers[1].W_v.shape == (16, 4)
    assert np.allclose(mqa.layers[1].W_v, params.layers[1].W_v.reshape(16, 4, 4).mean(axis=1))
    assert np.array_equal(decode.generate(mqa, mqa_config, tokens[:, :3], 5),
                          decode.generate(mqa, mqa_config, tokens[:, :3], 5, use_cache=False))
    with pytest.raises(ValueError, match=E("to_gqa starts from a model with h_kv = h = 4; this one has h_kv=1")):
        decode.to_gqa(mqa, mqa_config, 1)


# ----------------------------------------------------------------------------- the benchmark script
def test_benchmark_prints_its_command_and_table(capsys):
    """benchmarks/bench_decode.py on tiny positions: the command line, then one row per position."""
    import runpy
    from pathlib import Path
    bench = runpy.run_path(str(Path(__file__).resolve().parents[2] / "benchmarks" / "bench_decode.py"))
    assert bench["main"](["--positions", "8", "16", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("$ python benchmarks/bench_decode.py --positions 8 16 --repeats 1")
    rows = [line for line in out.splitlines() if line.startswith("| 8 |") or line.startswith("| 16 |")]
    assert len(rows) == 2 and all(row.rstrip().endswith("KiB |") for row in rows)


# ----------------------------------------------------------------------------- every entry checks
def test_greedy_steps_checks_everything_when_called_not_when_first_read():
    """It was a generator: a bad prompt, n_new or config passed silently until the first next()."""
    config = CONFIGS["mha"]
    params = train.init_model(config)
    for kwargs, named in (({"prompt": [[1, -1]]}, "prompt"), ({"n_new": -1}, "n_new"), ({"n_new": 2.5}, "n_new"),
                          ({"config": 3}, "config"), ({"params": None}, "params"), ({"use_cache": "yes"}, "use_cache"),
                          ({"use_cache": 2}, "use_cache")):
        call = {"params": params, "config": config, "prompt": [[1, 2]], "n_new": 3, **kwargs}
        use_cache = call.pop("use_cache", True)
        with pytest.raises(ValueError, match=named):
            decode.greedy_steps(call["params"], call["config"], call["prompt"], call["n_new"], use_cache=use_cache)
    with pytest.raises(ValueError, match="progress=2 must be True or False"):
        decode.generate(params, config, [[1, 2]], 3, progress=2)


@pytest.mark.parametrize("fn, takes", [
    (lambda p, c: decode.max_positions(p), "params"), (lambda p, c: decode.new_caches(p, c, 1, 8), "both"),
    (lambda p, c: decode.to_gqa(p, c, 1), "both"), (lambda p, c: decode.forward_cached(p, np.zeros((1, 2), int), c, []), "both"),
    (lambda p, c: decode.generate(p, c, [[1, 2]], 2), "both"), (lambda p, c: decode.timing_model(c, 8), "config"),
])
def test_decoding_refuses_a_non_model_and_a_non_config_by_name(fn, takes):
    """Each was an AttributeError ('NoneType' object has no attribute 'pos', 'vocab', '_replace')."""
    config = CONFIGS["mha"]
    params = train.init_model(config)
    for bad in (None, "model", 3):
        if takes in ("config", "both"):
            with pytest.raises(ValueError, match="config must be a train.Config"):
                fn(params, bad)
        if takes in ("params", "both"):
            with pytest.raises(ValueError, match="params must be a train.Model"):
                fn(bad, config)


@pytest.mark.parametrize("seed", [-1, 0.5, True, "0"])
def test_timing_model_checks_its_seed(seed):
    """A negative seed was numpy's 'expected non-negative integer'; True was read as 1."""
    with pytest.raises(ValueError, match="seed="):
        decode.timing_model(CONFIGS["mha"], 10, seed)


def test_caches_too_big_to_allocate_are_refused_with_the_fix():
    config = CONFIGS["mha"]
    with pytest.raises(ValueError, match="max_len = prompt"):
        decode.new_caches(train.init_model(config), config, 1, 10**15)
    with pytest.raises(ValueError, match="max_len=0 must be >= 1"):
        decode.new_caches(train.init_model(config), config, 1, 0)


# ---- a refused call leaves the caches as they were

def test_greedy_steps_refuses_caches_that_already_hold_a_sequence():
    """Filled caches would put the prompt after their tokens: a silent different answer, so refused."""
    config = CONFIGS["gqa-ln"]
    params = train.init_model(config)
    caches = decode.new_caches(params, config, 1, 12)
    fresh = [int(t[0]) for t, _ in decode.greedy_steps(params, config, [[2, 5, 1]], 2, caches=caches)]
    held = [(c.length, c.keys.copy()) for c in caches]
    with pytest.raises(ValueError, match=r"caches hold \[4, 4\] tokens already.*reset\(\)"):
        decode.greedy_steps(params, config, [[2, 5, 1]], 2, caches=caches)
    assert all(c.length == n and np.array_equal(c.keys, k) for c, (n, k) in zip(caches, held))
    for c in caches:
        c.reset()
    again = [int(t[0]) for t, _ in decode.greedy_steps(params, config, [[2, 5, 1]], 2, caches=caches)]
    assert again == fresh
