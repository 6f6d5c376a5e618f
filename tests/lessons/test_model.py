"""The tiny model (lessons/model.py): its tasks, head ablation and the config's checks.

- previous_token: learned with positions, near chance (on late positions) without.
- induction batches repeat a random block and score its second copy.
- A bad config is refused with a ValueError naming the fix.
"""

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
