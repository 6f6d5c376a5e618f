"""The tiny model (lessons/model.py): its tasks, head ablation, the checks of forward's arguments.

- previous_token: learned with positions, near chance (on late positions) without.
- induction batches repeat a random block and score its second copy.
- Indices, modes, patch and core outputs are refused with a ValueError naming the fix (the checks of
  the Config, Model, tokens and Batch themselves: tests/lessons/test_model_config.py).
"""

import re

import numpy as np
import pytest

import mha_course as mc
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


# ----------------------------------------------------------------------------- one loss, one greedy loop
def _lesson_sources():
    import ast
    from pathlib import Path
    folder = Path(tr.__file__).parent
    return {p.name: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.py"))}


def _functions_calling(attr: str, method_on_last_axis: bool = False) -> set:
    """'module.py:function' for every function of the lessons whose body calls ``<x>.attr(...)``
    (``method_on_last_axis``: only ``array.attr(-1)``, over the vocabulary axis, not ``np.attr(...)``)."""
    import ast

    def hit(c):
        if not (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == attr):
            return False
        if not method_on_last_axis:
            return True
        on_np = isinstance(c.func.value, ast.Name) and c.func.value.id == "np"
        return not on_np and len(c.args) == 1 and ast.unparse(c.args[0]) == "-1"
    found = set()
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for name, tree in _lesson_sources().items():
        functions = [n for n in ast.walk(tree) if isinstance(n, defs)]
        nested = {id(inner) for fn in functions for inner in ast.walk(fn) if inner is not fn and isinstance(inner, defs)}
        for fn in (f for f in functions if id(f) not in nested):  # a nested loop counts as its outer function's
            if any(hit(c) for c in ast.walk(fn)):
                found.add(f"{name}:{fn.name}")
    return found


def test_one_cross_entropy_and_one_greedy_loop_in_the_lessons():
    """The loss (log-sum-exp minus the target's logit) is model.token_losses; the accuracy and the greedy
    next token (argmax over the vocabulary) are model.scored_metrics and gqa.greedy_steps; the gradient
    (softmax - onehot) is training.cross_entropy's. Nothing else in the lessons writes them again."""
    assert _functions_calling("take_along_axis") <= {"model.py:token_losses", "model.py:make_batch",
                                                     "training.py:cross_entropy"}
    assert _functions_calling("argmax", method_on_last_axis=True) == {"model.py:scored_metrics", "gqa.py:greedy_steps"}


def test_every_loss_of_the_lessons_is_the_one_cross_entropy():
    """training.metrics, long_context.evaluate_at and misconceptions.ensemble_metrics (one member) give the
    numbers of model.scored_metrics on the same logits; token_losses is -log softmax at the target."""
    from mha_course.lessons import long_context as lc
    from mha_course.lessons import misconceptions as mi
    config = TINY._replace(seq_len=6)
    params = tr.init_model(config)
    batch = tr.make_batch(config, np.random.default_rng(3), 16)
    logits, _ = tr.forward(params, batch.tokens, config)
    want = tr.scored_metrics(logits, batch)
    p = mc.softmax(logits)
    loss = -np.log(np.take_along_axis(p, batch.targets[..., None], -1)[..., 0])[batch.scored].mean()
    assert want.loss == pytest.approx(loss, rel=1e-12)
    assert want.accuracy == (p.argmax(-1) == batch.targets)[batch.scored].mean()
    assert training.metrics(params, batch, config) == want
    metrics, _ = lc.evaluate_at(params, config, config.seq_len, "stretched", seed=3, n=16)
    assert metrics == want  # evaluate_at draws the same batch from seed 3
    one = mi.ensemble_metrics([(config, params)], seed=3, n=16)
    assert one.loss == pytest.approx(want.loss, rel=1e-9) and one.accuracy == want.accuracy


def test_forward_refuses_out_of_range_tokens():
    params = tr.init_model(TINY)
    for bad in ([[0, -1, 2]], [[0, TINY.vocab, 1]], [[0.5, 1.0, 2.0]]):
        with pytest.raises(ValueError, match="tokens"):
            tr.forward(params, np.array(bad), TINY)


@pytest.mark.parametrize("modes", [
    {"caches": "caches", "traces": []}, {"caches": "caches", "patch": lambda layer, t: t.output},
    {"core": lambda Q, K, V, mask: V, "tape": []}, {"tape": [], "traces": []},
])
def test_forward_refuses_modes_it_cannot_combine(modes):
    from mha_course.lessons import gqa as decode
    params = tr.init_model(TINY)
    if "caches" in modes:
        modes = {**modes, "caches": decode.new_caches(params, TINY, 1, TINY.seq_len)}
    with pytest.raises(ValueError, match="one mode at a time") as err:
        tr.forward(params, np.zeros((1, 4), int), TINY, **modes)
    assert all(f"{name}=" in str(err.value) for name in modes)


def test_traces_and_patch_go_together_and_make_batch_refuses_zero():
    params, traces = tr.init_model(TINY), []
    logits, _ = tr.forward(params, np.zeros((1, 4), int), TINY, traces=traces, patch=lambda layer, t: 0 * t.output)
    assert len(traces) == TINY.n_layers  # both ran: the traces were kept and the patch applied
    tokens = np.zeros((1, 4), int)  # every layer patched to add nothing: the logits of the embeddings alone
    assert np.allclose(logits, tr.norm(tr.embed(params, tokens, TINY), TINY) @ params.unembed)
    with pytest.raises(ValueError, match="batch=0"):
        tr.make_batch(TINY, np.random.default_rng(0), 0)


# ----------------------------------------------------------------------------- every entry checks
def _tiny():
    params = tr.init_model(TINY)
    return params, tr.make_batch(TINY, np.random.default_rng(0))


@pytest.mark.parametrize("fn", [
    lambda p, b: tr.forward(p, b.tokens, TINY), lambda p, b: tr.embed(p, b.tokens, TINY),
    lambda p, b: tr.layer_params(p, TINY, 0), lambda p, b: tr.cached_layer_params(p, TINY, 0),
    lambda p, b: tr.ablate_head(p, TINY, 0, 0), lambda p, b: training.metrics(p, b, TINY),
    lambda p, b: training.loss_and_grads(p, b, TINY), lambda p, b: training.evaluate(p, TINY, np.random.default_rng(0)),
    lambda p, b: checkpoints.checkpoint_arrays(p, TINY),
])
@pytest.mark.parametrize("bad", [None, "model", 3])
def test_every_function_taking_a_model_refuses_a_non_model_by_name(fn, bad):
    """One check (check_model) behind every function that takes params: never an AttributeError."""
    _, batch = _tiny()
    with pytest.raises(ValueError, match=r"params must be a train\.Model, got"):
        fn(bad, batch)


@pytest.mark.parametrize("layer, message", [
    (-1, "layer=-1 is out of range: there are 2 layers"), (2, "layer=2 is out of range"),
    (True, "layer=True must be a whole number"), (0.0, "layer=0.0 must be a whole number"),
    (None, "layer=None must be a whole number"),
])
def test_layer_and_head_indices_are_checked_and_minus_one_is_not_the_last(layer, message):
    """numpy would read layer -1 as the last layer and True as 1: both are refused, as is a float."""
    params, _ = _tiny()
    for call in (lambda: tr.layer_params(params, TINY, layer), lambda: tr.cached_layer_params(params, TINY, layer),
                 lambda: tr.ablate_head(params, TINY, layer, 0)):
        with pytest.raises(ValueError, match=re.escape(message)):
            call()
    with pytest.raises(ValueError, match=re.escape(message.replace("layer", "head").replace("2 heads", "2 heads"))):
        tr.ablate_head(params, TINY, 0, layer)


def test_induction_score_refuses_weights_of_another_batch_and_a_batch_that_is_no_induction():
    """An empty key axis was an IndexError; a previous-token batch silently read keys from the end."""
    params, batch = _tiny()
    w = tr.forward(params, batch.tokens, TINY)[1][1]  # (B, h, T, T)
    assert tr.induction_score(w, batch).shape == (TINY.h,)
    with pytest.raises(ValueError, match="weights has shape"):
        tr.induction_score(w[..., :0], batch)
    prev = tr.make_batch(TINY._replace(task="previous_token"), np.random.default_rng(0))
    with pytest.raises(ValueError, match="no induction batch"):
        tr.induction_score(w, prev)


def test_start_rng_ablate_and_caches_of_forward_are_checked_not_ignored():
    params, batch = _tiny()
    for start in (-1, 0.5, True, "0"):
        with pytest.raises(ValueError, match="start="):
            tr.embed(params, batch.tokens[:, :2], TINY, start)
    with pytest.raises(ValueError, match="without tape it would be ignored"):
        tr.forward(params, batch.tokens, TINY, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="rng must be a numpy Generator"):
        tr.forward(params, batch.tokens, TINY, tape=[], rng=3)
    with pytest.raises(ValueError, match="config.dropout=0.5 draws dropout masks"):
        tr.forward(params, batch.tokens, TINY._replace(dropout=0.5), tape=[])
    with pytest.raises(ValueError, match=r"ablate=5 must be a list of \(layer, head\) pairs"):
        tr.forward(params, batch.tokens, TINY, ablate=5)
    with pytest.raises(ValueError, match="head=7 is out of range"):
        tr.forward(params, batch.tokens, TINY, ablate=[(0, 7)])
    with pytest.raises(ValueError, match="one KV cache per layer"):
        tr.forward(params, batch.tokens, TINY, caches=[mc.KVCache(3, 2, 2, 8)])


def test_norm_checks_its_input_and_rng_arguments_are_generators():
    params, _ = _tiny()
    for bad in (None, "x", np.zeros((2, 3))):
        with pytest.raises(ValueError, match="x "):
            tr.norm(bad, TINY)
    assert isinstance(tr.norm([[0.0] * 4], TINY), np.ndarray)  # a list is the same numbers, as an array
    for bad in (None, 3, "rng"):
        with pytest.raises(ValueError, match="rng must be a numpy Generator"):
            tr.make_batch(TINY, bad)
    with pytest.raises(ValueError, match="rng must be a numpy Generator"):
        tr.init_model(TINY, 3)


def test_compact_grads_refuses_what_is_no_gradient_of_layer_params():
    with pytest.raises(ValueError, match="g must be an MHAParams"):
        tr.compact_grads(None, TINY)
    g = mc.init_params(4, rng=np.random.default_rng(0))
    assert tr.compact_grads(g, TINY).W_k.shape == (4, 4)
    with pytest.raises(ValueError, match=re.escape("g.W_k has shape (4, 2)")):
        tr.compact_grads(g._replace(W_k=g.W_k[:, :2]), TINY)


def test_what_patch_and_core_return_is_checked_never_broadcast():
    """A patch returning (D,) was broadcast over every position without a word; a core of the wrong shape
    was a matmul error from numpy's insides."""
    params, batch = _tiny()
    with pytest.raises(ValueError, match=re.escape("patch returned shape (4,) at layer 0")):
        tr.forward(params, batch.tokens, TINY, patch=lambda layer, t: np.zeros(4))
    with pytest.raises(ValueError, match="patch's output at layer 0 has"):
        tr.forward(params, batch.tokens, TINY, patch=lambda layer, t: t.output * np.nan)
    with pytest.raises(ValueError, match=re.escape("core returned shape (3, 2, 6, 1)")):
        tr.forward(params, batch.tokens, TINY, core=lambda Q, K, V, mask: Q[..., :1])
    for kwargs, named in (({"patch": 3}, "patch=3 must be a function"), ({"core": 3}, "core=3 must be a function"),
                          ({"traces": 3}, "traces=3 must be a list"), ({"tape": [1]}, "tape must be an empty list")):
        with pytest.raises(ValueError, match=re.escape(named)):
            tr.forward(params, batch.tokens, TINY, **kwargs)
    same = tr.forward(params, batch.tokens, TINY, patch=lambda layer, t: t.output)[0]
    assert np.allclose(same, tr.forward(params, batch.tokens, TINY)[0], rtol=0, atol=1e-12)


def test_sizes_that_would_not_fit_in_memory_are_refused_before_allocating():
    """A MemoryError (or minutes of swapping) became one line naming the sizes."""
    with pytest.raises(ValueError, match="more than the 4 GiB this course allows one array"):
        tr.init_model(TINY._replace(vocab=10**12, task="previous_token"))
    with pytest.raises(ValueError, match="ask for fewer sequences"):
        tr.make_batch(TINY, np.random.default_rng(0), 10**12)
    sinus = TINY._replace(positions="sinusoidal")
    with pytest.raises(ValueError, match="start closer to 0"):
        tr.embed(tr.init_model(sinus), np.zeros((1, 2), int), sinus, 10**12)


def test_token_losses_refuse_logits_whose_spread_overflows_instead_of_returning_inf():
    from mha_course.lessons import model
    with pytest.raises(ValueError, match="logits spread over more than the largest float64"):
        model.token_losses(np.array([[[1e308, -1e308]]]), np.array([[1]]))
    assert np.isfinite(model.token_losses(np.array([[[1e300, -1e300]]]), np.array([[1]]))).all()
