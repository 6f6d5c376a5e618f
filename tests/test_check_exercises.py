"""The checkers of the non-core exercises: the notebook's solution passes, each typical
mistake is rejected AND named, and a learner's exception is reported, never raised.

The solutions and the wrong answers are written here the way a learner writes them (independent
of the checkers' own catalogues, which test_check_rules.py reads and runs for every checker).
"""
import math

import numpy as np
import pytest

from mha_course import check
from mha_course.block import layer_norm as package_layer_norm


def run(capsys, checker, fn):
    """(result, printed text) of check.<checker>(fn)."""
    ok = getattr(check, checker)(fn)
    return ok, capsys.readouterr().out


# ---------------------------------------------------------------- the notebooks' solutions
def param_count(d_model, h, bias=False):
    return 4 * d_model * d_model + (4 * d_model if bias else 0)


def qkv_param_count(d_model, h, bias=False):
    return 3 * d_model * d_model + (3 * d_model if bias else 0)


def project_qkv(x, params, transpose=False, bias=True):
    def linear(W, b):
        W = W.T if transpose else W
        return x @ W if b is None or not bias else x @ W + b
    return linear(params.W_q, params.b_q), linear(params.W_k, params.b_k), linear(params.W_v, params.b_v)


def layer_norm(x, eps=1e-5, ddof=0, axis=-1, use_eps=True):
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).sum(axis=axis, keepdims=True) / (np.size(x) / np.size(mean) - ddof)
    return (x - mean) / np.sqrt(var + eps) if use_eps else (x - mean) / np.sqrt(var)


def flops(T, d_model, flops_per_mac=2, projections=4, matmuls=2):
    return projections * (flops_per_mac * T * d_model * d_model), matmuls * (flops_per_mac * T * T * d_model)


def crossover(d_model, **kwargs):
    T = 1
    while flops(T, d_model, **kwargs)[1] < flops(T, d_model, **kwargs)[0]:
        T += 1
    return T


def score_bytes(B, h, T, bytes_per_number=4):
    return B * h * T * T * bytes_per_number


def max_seq_len(budget_bytes, B, h, bytes_per_number=4):
    return math.isqrt(budget_bytes // (B * h * bytes_per_number))


def head_queries(X, W_q, h, i):
    d_k = W_q.shape[1] // h
    return X @ W_q[:, i * d_k:(i + 1) * d_k]


def bug_source_position(i, t, T, h):
    return (i * T + t) // h


def no_projection_weights(x, scale=True):
    s = x @ np.swapaxes(x, -1, -2) / (np.sqrt(x.shape[-1]) if scale else 1.0)  # (B, T, T)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def stage_shapes(B, T, D, H):
    d_k = D // H
    return {"X": (B, T, D), "Q": (B, T, D), "K": (B, T, D), "V": (B, T, D),
            "Q_heads": (B, H, T, d_k), "K_heads": (B, H, T, d_k), "V_heads": (B, H, T, d_k),
            "scores": (B, H, T, T), "weights": (B, H, T, T), "head_outputs": (B, H, T, d_k),
            "concat": (B, T, D), "output": (B, T, D)}


SOLUTIONS = [("param_count", param_count), ("qkv_param_count", qkv_param_count),
             ("project_qkv", project_qkv), ("layer_norm", layer_norm), ("flops", flops),
             ("crossover_seq_len", crossover), ("score_bytes", score_bytes),
             ("max_seq_len", max_seq_len), ("head_queries", head_queries),
             ("bug_source_position", bug_source_position),
             ("no_projection_weights", no_projection_weights)]


@pytest.mark.parametrize("name, fn", SOLUTIONS)
def test_solution_passes(capsys, name, fn):
    ok, out = run(capsys, name, fn)
    assert ok, out
    assert out.startswith(f"✔ {name}: all ")


def test_layer_norm_checker_accepts_the_package(capsys):
    assert run(capsys, "layer_norm", package_layer_norm)[0]


MISTAKES = [
    ("param_count", lambda d, h, bias=False: 4 * d * d, "biases are forgotten"),
    ("param_count", lambda d, h, bias=False: 3 * d * d + (3 * d if bias else 0), "W_o is not counted"),
    ("param_count", lambda d, h, bias=False: h * param_count(d, h, bias), "each head counted with full-size"),
    ("qkv_param_count", lambda d, h, bias=False: 3 * d * d, "biases are forgotten"),
    ("qkv_param_count", param_count, "W_o counted too"),
    ("qkv_param_count", lambda d, h, bias=False: h * qkv_param_count(d, h, bias), "each head counted"),
    ("project_qkv", lambda x, p: project_qkv(x, p, bias=False), "biases are forgotten"),
    ("project_qkv", lambda x, p: project_qkv(x, p, transpose=True), "weight matrices are transposed"),
    ("layer_norm", lambda x, eps=1e-5: layer_norm(x, eps, ddof=1), "unbiased variance"),
    ("layer_norm", lambda x, eps=1e-5: layer_norm(x, eps, axis=0), "wrong axis"),
    ("layer_norm", lambda x, eps=1e-5: (x - x.mean()) / np.sqrt(x.var() + eps), "whole array"),
    ("layer_norm", lambda x, eps=1e-5: layer_norm(x, eps, use_eps=False), "eps is forgotten"),
    ("flops", lambda T, d: flops(T, d, flops_per_mac=1), "multiply-add counted as 1 FLOP"),
    ("flops", lambda T, d: flops(T, d, projections=2), "K and V projections are forgotten"),
    ("flops", lambda T, d: flops(T, d, projections=3), "output projection is forgotten"),
    ("flops", lambda T, d: flops(T, d, matmuls=1), "only Q Kᵀ counted"),
    ("crossover_seq_len", lambda d: crossover(d, projections=3), "output projection is forgotten"),
    ("crossover_seq_len", lambda d: crossover(d) - 1, "off by one"),
    ("crossover_seq_len", lambda d: crossover(d, matmuls=1), "only Q Kᵀ counted"),
    ("score_bytes", lambda B, h, T, b=4: B * T * T * b, "h is forgotten"),
    ("score_bytes", lambda B, h, T, b=4: h * T * T * b, "B is forgotten"),
    ("score_bytes", lambda B, h, T, b=4: B * h * T * b, "T instead of T²"),
    ("max_seq_len", lambda n, B, h, b=4: math.isqrt(n // (B * b)), "h is forgotten"),
    ("max_seq_len", lambda n, B, h, b=4: n // (B * h * b), "square root is forgotten"),
    ("max_seq_len", lambda n, B, h, b=4: round(math.sqrt(n / (B * h * b)) + 0.5), "rounded up"),
    ("head_queries", lambda X, W, h, i: X @ W[i * (len(W) // h):(i + 1) * (len(W) // h), :].T,
     "rows of W_q instead of columns"),
    ("head_queries", lambda X, W, h, i: X @ W[:, i::h], "every h-th column"),
    ("head_queries", lambda X, W, h, i: X @ W[:, :W.shape[1] // h], "offset i*d_k is missing"),
    ("bug_source_position", lambda i, t, T, h: t, "the bug mixes positions"),
    ("bug_source_position", lambda i, t, T, h: i * T + t, "not divided by h"),
    ("no_projection_weights", lambda x: no_projection_weights(x, scale=False), "not divided by √d"),
    ("no_projection_weights", lambda x: x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1]), "no softmax"),
    # mistakes that were "not one of the mistakes I know"
    ("layer_norm", lambda x, eps=1e-5: (x - x.mean(-1, keepdims=True)) / (x.std(-1, keepdims=True) + eps),
     "eps added outside the square root"),
    ("layer_norm", lambda x, eps=1e-5: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.std(-1, keepdims=True) + eps),
     "the standard deviation used as the variance"),
    ("param_count", lambda d, h, bias=False: 4 * d * (d // h) + (4 * d if bias else 0), "the ×h is forgotten"),
    ("param_count", lambda d, h, bias=False: 4 * d * d + (4 * d * d if bias else 0), "a bias counted as d_model²"),
    ("project_qkv", lambda x, p: tuple(project_qkv(x, p)[i] for i in (0, 2, 1)), "the order (Q, V, K)"),
    ("no_projection_weights", lambda x: no_projection_weights(x) @ x, "the output is returned instead"),
    ("no_projection_weights", lambda x: (lambda e: e / e.sum(axis=-2, keepdims=True))(  # stable: the max first
        (lambda s: np.exp(s - s.max(axis=-2, keepdims=True)))(x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1]))),
     "softmax over axis -2"),
    ("head_queries", lambda X, W, h, i: X @ W[:, i * (W.shape[1] / h):(i + 1) * (W.shape[1] / h)],
     "true division"),
    ("bug_source_position", lambda i, t, T, h: (i * T + t) / h, "true division"),
    ("bug_source_position", lambda i, t, T, h: i * T // h + t, "only the head's offset is divided by h"),
    ("flops", lambda T, d: flops(T, d)[::-1], "the tuple in the swapped order"),
    ("crossover_seq_len", lambda d: d, "d_model returned"),
    ("crossover_seq_len", lambda d: crossover_le(d), "one step past the crossover"),
    ("score_bytes", lambda B, h, T, bytes_per_number=4: B * h * T * T * 4, "bytes hard-coded to 4"),
]


def crossover_le(d_model):
    T = 1
    while flops(T, d_model)[1] <= flops(T, d_model)[0]:  # <= instead of <
        T += 1
    return T


def test_a_list_for_a_tuple_is_named(capsys):
    """The signature says a tuple (projections, attention): a list of the right values is named, with its fix."""
    ok, out = run(capsys, "flops", lambda T, d: list(flops(T, d)))
    assert not ok and "it returned a list of 2 values, expected a tuple (projections, attention)" in out, out


@pytest.mark.parametrize("name, fn", [
    ("crossover_seq_len", lambda d: float(crossover(d))),
    ("max_seq_len", lambda n, B, h, b=4: float(math.isqrt(n // (B * h * b)))),
    ("max_seq_len", lambda n, B, h, b=4: math.floor(math.sqrt(n / (B * h * b))) * 1.0),
    ("bug_source_position", lambda i, t, T, h: float((i * T + t) // h)),
    ("score_bytes", lambda B, h, T, bytes_per_number=4: B * h * T * T * bytes_per_number / 1),
])
def test_a_float_where_the_signature_says_int_is_refused(capsys, name, fn):
    """Issue 31 (5.4's accepted answer): ``-> int`` is enforced, 4.0 for 4 included, with a message that says so."""
    ok, out = run(capsys, name, fn)
    assert not ok and "expected a whole number (int)" in out, out


@pytest.mark.parametrize("name, fn, message", [
    ("crossover_seq_len", lambda d: float(crossover(d)) + 0.5, "crossover_seq_len: case 1 of"),
    ("bug_source_position", lambda i, t, T, h: (i * T + t) / h + 0.25, "bug_source_position: case 1 of"),
])
def test_a_count_that_is_not_whole_is_rejected(capsys, name, fn, message):
    ok, out = run(capsys, name, fn)
    assert not ok and message in out, out


# ---------------------------------------------------------------- the two new core exercises
def causal_mha(x, params, h, mask_of=lambda T: np.tril(np.ones((T, T), dtype=bool)), after=False, project=True):
    """A learner's causal multi-head attention; the defaults give a right one."""
    B, T, D = x.shape
    d_k = D // h
    Q, K, V = ((x @ W + (0 if b is None else b)).reshape(B, T, h, d_k).transpose(0, 2, 1, 3)
               for W, b in ((params.W_q, params.b_q), (params.W_k, params.b_k), (params.W_v, params.b_v)))
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(d_k)  # (B, h, T, T)
    mask = mask_of(T)
    s = s if after or mask is None else np.where(mask, s, -np.inf)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w = w / w.sum(axis=-1, keepdims=True)
    w = w * mask if after else w
    concat = (w @ V).transpose(0, 2, 1, 3).reshape(B, T, D)
    return (concat @ params.W_o + (0 if params.b_o is None else params.b_o) if project else concat), w


def test_causal_multi_head_attention_accepts_a_right_answer(capsys):
    ok, out = run(capsys, "causal_multi_head_attention", causal_mha)
    assert ok, out


@pytest.mark.parametrize("fn, diagnosis", [
    (lambda x, p, h: causal_mha(x, p, h, mask_of=lambda T: None), "the causal mask is not applied"),
    (lambda x, p, h: causal_mha(x, p, h, mask_of=lambda T: np.triu(np.ones((T, T), dtype=bool))),
     "the mask is transposed"),
    (lambda x, p, h: causal_mha(x, p, h, after=True), "the mask is applied after the softmax"),
    (lambda x, p, h: causal_mha(x, p, h, project=False), "the output projection W_o is forgotten"),
], ids=["no mask", "mask transposed", "mask after softmax", "no W_o"])
def test_causal_multi_head_attention_names_each_mistake(capsys, fn, diagnosis):
    ok, out = run(capsys, "causal_multi_head_attention", fn)
    assert not ok and f"Looks like: {diagnosis}" in out, out


def cross_shapes(B, T, S, d_model, h, swap=False, keys_T=False, heads_d_model=False):
    """A learner's shape predictions for cross-attention; the defaults give right ones."""
    d_k, n = (d_model if heads_d_model else d_model // h), (T if keys_T else S)
    scores = (B, h, n, T) if swap else (B, h, T, n)
    return {"Q": (B, T, d_model), "K": (B, n, d_model), "V": (B, n, d_model),
            "Q_heads": (B, h, T, d_k), "K_heads": (B, h, n, d_k), "V_heads": (B, h, n, d_k),
            "scores": scores, "weights": scores, "head_outputs": (B, h, T, d_k),
            "concat": (B, T, d_model), "output": (B, T, d_model)}


def test_cross_attention_shapes_accepts_a_right_answer(capsys):
    ok, out = run(capsys, "cross_attention_shapes", cross_shapes)
    assert ok and out == "✔ cross_attention_shapes: all 11 shapes right in all 3 cases\n", out


@pytest.mark.parametrize("kwargs, stage, diagnosis", [
    ({"swap": True}, "scores", "T and S swapped on the scores and weights"),
    ({"keys_T": True}, "K_heads", "the keys and values given length T"),
    ({"heads_d_model": True}, "Q_heads", "d_model where d_k belongs"),
])
def test_cross_attention_shapes_names_each_mistake(capsys, kwargs, stage, diagnosis):
    ok, out = run(capsys, "cross_attention_shapes", lambda *sizes: cross_shapes(*sizes, **kwargs))
    assert not ok and f"  {stage}: expected" in out and f"Looks like: {diagnosis}" in out, out


@pytest.mark.parametrize("name, fn, diagnosis", MISTAKES, ids=[f"{m[0]}-{m[2]}" for m in MISTAKES])
def test_mistake_is_rejected_and_named(capsys, name, fn, diagnosis):
    ok, out = run(capsys, name, fn)
    assert not ok
    assert f"✘ {name}" in out
    assert "Looks like:" in out and diagnosis in out.split("Looks like:")[1], out


def test_stage_shapes_accepts_the_right_dict(capsys):
    assert check.stage_shapes(stage_shapes(2, 5, 12, 3), 2, 5, 12, 3)
    assert capsys.readouterr().out == "✔ stage_shapes: all 12 shapes right\n"


@pytest.mark.parametrize("stage, wrong, diagnosis", [
    ("Q_heads", (2, 3, 5, 12), "d_model where d_k belongs"),
    ("K_heads", (2, 5, 3, 4), "the head axis after the positions"),
    ("scores", (2, 3, 5, 4), "scores of shape (T, d_k)"),
    ("concat", (5, 12), "the batch axis forgotten"),
])
def test_stage_shapes_names_each_wrong_stage(capsys, stage, wrong, diagnosis):
    shapes = stage_shapes(2, 5, 12, 3)
    shapes[stage] = wrong
    assert not check.stage_shapes(shapes, 2, 5, 12, 3)
    out = capsys.readouterr().out
    assert "1 of 12 stages wrong" in out
    assert f"{stage}: expected {stage_shapes(2, 5, 12, 3)[stage]}, got {wrong}. Looks like: {diagnosis}" in out


@pytest.mark.parametrize("value, message", [
    ([], "expected a dict"),
    ({"X": (2, 5, 12)}, "missing: Q, K"),
    ({**stage_shapes(2, 5, 12, 3), "Z": (1,)}, "unknown: Z"),
    ({**stage_shapes(2, 5, 12, 3), "Q": "B, T, D"}, "Q: expected a tuple of ints"),
])
def test_stage_shapes_bad_values_are_reported(capsys, value, message):
    assert not check.stage_shapes(value, 2, 5, 12, 3)
    assert message in capsys.readouterr().out


# ---------------------------------------------------------------- the stated rules of every exercise
def _head_queries_full(X, W_q, h, i):
    d_k = W_q.shape[1] // h
    return (X @ W_q)[..., i * d_k:(i + 1) * d_k]  # right values through the full projection


def _head_queries_split(X, W_q, h, i):
    import mha_course as mc
    d_k = W_q.shape[1] // h
    return mc.split_heads(X @ W_q[:, :(i + 1) * d_k], i + 1)[:, i]  # no full projection, but a split


def _linear_quadratic(Q, K, V):
    import mha_course as mc
    a = mc.elu_feature_map(Q) @ np.swapaxes(mc.elu_feature_map(K), -1, -2)  # (..., T, S): what 10.4 forbids
    return a @ V / a.sum(-1, keepdims=True)


def _tiled_whole(Q, K, V, block_size):
    import mha_course as mc
    return mc.scaled_dot_product_attention(Q, K, V)[0]  # right values through the whole (T, S) scores


def _torch_sdpa(q, k, v, mask=None):
    import torch
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return torch.nan_to_num(out)


# (notebook, the rule as its text says it) -> (checker, [(an answer with the right values that breaks the rule,
# what the refusal says)]): the spy behind each rule, shown to work
STATED_RULES = {
    ("03_multi_head_split", "no full projection, no split"): (
        "head_queries", [(_head_queries_full, "a full projection"), (_head_queries_split, "calls split_heads")]),
    ("10_efficient_attention", "Never make the whole $T \\times S$ matrix"): ("tiled_attention", [(_tiled_whole, "T x S")]),
    ("10_efficient_attention", "without** making a $T \\times S$ matrix"): (
        "linear_attention", [(_linear_quadratic, "T x S")]),
    ("12_from_numpy_to_pytorch", "without* calling `F.scaled_dot_product_attention`"): (
        "torch_attention", [(_torch_sdpa, "F.scaled_dot_product_attention")]),
}
_RULE_WORDS = (r"(do not|don't|never|must not) (use|call|make|build)|without\W+(calling|using|making|building)|"
               r"no full projection|no split|not allowed to (use|call)")


def _rule_sentences() -> list:
    """(notebook, line) of every line of an exercise's text (markdown or code) that states a rule."""
    import json
    import re
    from pathlib import Path
    found = []
    for path in sorted(Path(__file__).parents[1].joinpath("notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            text = "".join(cell["source"])
            for line in text.splitlines():
                if re.search(_RULE_WORDS, line, re.I) and (re.search(r"[Ee]xercise \d+\.\d", text)):
                    found.append((path.stem, line.strip()))
    return found


def test_every_stated_rule_in_the_notebooks_has_its_spy():
    """Each 'do not use X' (without calling, no full projection, ...) of an exercise's text is listed in
    STATED_RULES with its checker; a sentence without a rule fails here."""
    found = _rule_sentences()
    assert found, "no rule sentence found: the notebooks moved?"
    for notebook, line in found:
        assert any(nb == notebook and phrase in line for nb, phrase in STATED_RULES), (notebook, line)
    for notebook, phrase in STATED_RULES:  # and each listed rule is still in its notebook
        assert any(nb == notebook and phrase in line for nb, line in found), (notebook, phrase)


@pytest.mark.parametrize("rule", list(STATED_RULES), ids=[nb for nb, _ in STATED_RULES])
def test_each_stated_rule_is_enforced(capsys, rule):
    name, breakers = STATED_RULES[rule]
    if name == "torch_attention":
        pytest.importorskip("torch")
    for fn, says in breakers:
        ok, out = run(capsys, name, fn)
        assert not ok and says in out, out
