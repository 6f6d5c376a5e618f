"""What notebooks 10-12 claim, held by tests: each claim a compared cell or the
prose makes is recomputed here by another route, and the notebooks' own shape is checked (no compared
cell depends on time, no True/False scaffolding, no path outside the repository, exercises in order)."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import mha_course as mc
from mha_course import efficient
from mha_course.lessons import checkpoints, quiz
from mha_course.lessons import complexity as cx
from mha_course.lessons import model as train

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {n: ROOT / "notebooks" / f for n, f in (
    (10, "10_efficient_attention.ipynb"), (11, "11_misconceptions_and_interview.ipynb"),
    (12, "12_from_numpy_to_pytorch.ipynb"))}


def cells(n, kind=None):
    nb = json.loads(NOTEBOOKS[n].read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if kind is None or c["cell_type"] == kind]


def source(c):
    return "".join(c["source"])


def prose(n):
    """The markdown of notebook n, its line breaks and runs of spaces made single spaces."""
    return " ".join("\n".join(source(c) for c in cells(n, "markdown")).split())


def compared(c):
    return c["cell_type"] == "code" and not source(c).lstrip().startswith("# NBVAL_IGNORE_OUTPUT")


def printed(c):
    return "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                   for o in c.get("outputs", []))


# ----------------------------------------------------------------------------- no compared output depends on time
TIMERS = ("process_time", "perf_counter", "time.time(", "best_seconds(", "best_time(", "timeit")


@pytest.mark.parametrize("n", NOTEBOOKS)
def test_every_cell_that_times_something_is_not_compared(n):
    timing = [source(c).splitlines()[0] for c in cells(n, "code") if compared(c)
              and any(t in source(c) for t in TIMERS)]
    assert not timing, f"notebook {n}: compared cells that time something: {timing}"


@pytest.mark.parametrize("n", NOTEBOOKS)
def test_no_compared_cell_prints_true_false_scaffolding(n):
    verdict = re.compile(r"(:\s*(True|False)\b)|(\b(True|False)\s*$)|^(True|False)\b", re.M)
    bad = [source(c).splitlines()[0] for c in cells(n, "code") if compared(c) and verdict.search(printed(c))]
    assert not bad, f"notebook {n}: cells printing True/False: {bad}"


@pytest.mark.parametrize("n", NOTEBOOKS)
def test_no_acceptance_target_or_checked_above_claim_in_the_prose(n):
    text = prose(n)
    for phrase in ("(checked above)", "targets of the course", "What must hold", "The verdict, checked"):
        assert phrase not in text, f"notebook {n}: {phrase!r}"
    assert not any("What must hold" in source(c) for c in cells(n, "code"))


def test_notebook_10_types_no_benchmark_table():
    code = "\n".join(source(c) for c in cells(10, "code"))
    assert "BENCH = {" not in code and "benchmarks/results/bench_efficient.json" in code


@pytest.mark.parametrize("n", NOTEBOOKS)
def test_no_path_outside_the_repository(n):
    text = "\n".join(source(c) for c in cells(n))
    assert "shared/seeds" not in text and "section 8" not in text


# ----------------------------------------------------------------------------- exercises
def test_exercises_are_numbered_in_order():
    for n, expected in ((10, ["10.1", "10.2", "10.3", "10.4"]), (11, ["11.1", "11.2", "11.3"]),
                        (12, ["12.1", "12.2", "12.3"])):
        stubs = [m for c in cells(n, "code") for m in re.findall(r"^# Exercise (\d+\.\d+)", source(c), re.M)]
        assert stubs == expected, (n, stubs)


def test_notebook_10_uses_the_models_one_forward_pass():
    code = "\n".join(source(c) for c in cells(10, "code"))
    assert "def forward_with" not in code and "core=core" in code


# ----------------------------------------------------------------------------- notebook 10
def test_tiled_traffic_is_still_quadratic_in_T():
    """ceil(T / B_r) S (d_k + d_v) grows as T^2 for S = T (x4 T -> about x16 bytes)."""
    for rows in (64, 128, 1024):
        small, big = (efficient.tiled_attention_bytes(T, T, 64, 64, rows) for T in (16384, 65536))
        assert 14 < big / small <= 16
    doc = efficient.tiled_attention_bytes.__doc__
    assert "no T x S term" not in doc and "quadratic" in doc and "Theorem 2" in doc
    cell = " ".join(next(source(c) for c in cells(10, "markdown") if "### The IO argument" in source(c)).split())
    assert "no $T S$ term" not in cell and "Theorem 2" in cell and "quadratic" in cell


def test_the_byte_ratio_is_not_called_the_speed_up():
    """blocks of 64-128 rows give a few times fewer bytes; the paper's measured speed-ups are cited."""
    ratio = mc.naive_attention_bytes(16384, 16384, 64, 64) / mc.tiled_attention_bytes(16384, 16384, 64, 64, 128)
    assert 3.5 < ratio < 4.5
    text = prose(10)
    assert "that ratio is the speed-up" not in text
    for fact in ("7.6x", "3x", "15%", "Dao et al. 2022"):
        assert fact in text


def test_linear_attentions_kernel_matrix_has_rank_at_most_its_features():
    """phi(Q) phi(K)^T has rank <= d_k; softmax weights of the same Q, K are full rank."""
    rng = np.random.default_rng(3)
    Q, K = rng.normal(size=(24, 4)), rng.normal(size=(24, 4))
    kernel = mc.elu_feature_map(Q) @ mc.elu_feature_map(K).T
    weights = mc.scaled_dot_product_attention(Q, K, np.eye(24))[1]
    assert np.linalg.matrix_rank(kernel) == 4 and np.linalg.matrix_rank(weights) == 24
    assert "Performer" in prose(10) and "rank" in prose(10)
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    row = next(ln for ln in glossary.splitlines() if ln.startswith("| linear attention |"))
    assert "not an approximation that converges" not in row and "rank" in row and "Performer" in row


def test_the_reason_softmax_cannot_be_reassociated():
    """not the normaliser (linear attention has one), but exp(q.k) has no finite feature map."""
    text = prose(10)
    assert "its normaliser couples all keys" not in text and "infinite-dimensional" in text


def test_the_seed_claim_of_a_sparse_and_linear_mainstream_is_answered_with_sources():
    text = prose(10)
    for source_ in ("Grattafiori et al. 2024", "DeepSeek-AI 2024", "Jiang et al. 2023", "Gemma Team 2024",
                    "Lieber et al. 2024", "MiniMax 2025"):
        assert source_ in text


def test_what_the_toy_models_lose_with_linear_attention():
    """Notebook 10 §7: the previous-token model stays perfect with softmax and falls with linear attention."""
    config, params = checkpoints.load_checkpoint(checkpoints.checkpoint_path("previous_token"))[:2]
    batch = train.make_batch(config, np.random.default_rng(0), 256)

    def accuracy(core):
        logits = train.forward(params, batch.tokens, config, core=core)[0]
        return ((logits.argmax(-1) == batch.targets)[batch.scored]).mean()
    assert accuracy(None) > 0.99 and accuracy(lambda Q, K, V, mask: mc.linear_attention(Q, K, V, causal=True)) < 0.5


def test_tracemalloc_memory_claims_of_notebook_10():
    """The memory the prose states (what load does not change): textbook x4 per doubling, tiled a tenth."""
    import tracemalloc

    def peak(fn):
        tracemalloc.start()
        fn()
        p = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return p
    rng = np.random.default_rng(0)
    Q, K, V = ({T: rng.standard_normal((1, 4, T, 64), dtype=np.float32) for T in (512, 1024)} for _ in range(3))
    text = {T: peak(lambda: mc.scaled_dot_product_attention(Q[T], K[T], V[T])) for T in (512, 1024)}
    tiled = peak(lambda: mc.tiled_attention(Q[1024], K[1024], V[1024]))
    assert 3.5 < text[1024] / text[512] < 4.5 and tiled < text[1024] / 4


# ----------------------------------------------------------------------------- notebook 11
def test_a_two_dimensional_query_singles_out_any_key_on_a_circle():
    """d_k = 2 is not too small to pick one of 24 keys."""
    angles = 2 * np.pi * np.arange(24) / 24
    keys = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    for target in range(24):
        assert mc.softmax(200 * keys @ keys[target])[target] > 0.99
    text = prose(11)
    assert "too little room to single out" not in text and "more slowly" in text


def test_gradient_x_input_has_the_opposite_sign_for_three_of_four_heads():
    """the notebook says 3 of the 4 heads; recomputed here."""
    from mha_course.lessons import misconceptions as mi
    config, params = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))[:2]
    attr = mi.head_attribution(params, config)
    assert int((np.sign(attr["grad_x_input"]) != np.sign(attr["ablation"])).sum()) == 3
    text = prose(11)
    for phrase in ("3 of the 4 heads", "Jain & Wallace (2019", "Wiegreffe & Pinter (2019", "mean ablation"):
        assert phrase in text


def test_the_seed_table_quotes_sources_in_words_and_corrects_rows_2_and_4():
    table = next(source(c) for c in cells(11, "markdown") if "## 8. The seed articles" in source(c))
    words = " ".join(table.split())
    assert "《多头注意力机制原理与实现》" in words and "Vaswani et al. (2017)" in words
    row2 = next(ln for ln in table.splitlines() if ln.startswith("| 每个头拥有"))
    assert row2.split("|")[3].strip().startswith("True")
    row4 = next(ln for ln in table.splitlines() if ln.startswith("| 它们并行计算"))
    assert "Within one layer" in row4 and "a later head reads what an earlier one wrote" not in row4
    assert "Ettinger 2020" in words and "稀疏注意力和线性注意力" in words


def test_section_4_agrees_with_its_timing_table():
    """the prose no longer says 'not even always faster' on 'one core'."""
    text = prose(11)
    assert "not even always faster" not in text and "one core" not in text
    ratio = {T: (cx.attention_flops(T, 64) + cx.projection_flops(T, 64)) / (4 * T * 64 * 64) for T in (64, 1024)}
    assert ratio[64] == 3 and ratio[1024] == 18   # T / d_model + 2


def test_the_quiz_answers_of_items_5_and_6_agree_with_the_shipped_runs():
    e = checkpoints.load_experiments()
    by_id = {q.id: q for q in quiz.load_questions()}
    one_layer = float(e["one_layer_accuracy"])
    assert f"{one_layer:.2f}" in by_id["induction-layers"].explanation and "near chance" not in by_id[
        "induction-layers"].explanation
    assert one_layer > 2 / 16                      # well above chance (1/16), below two layers
    more = by_id["more-heads"]
    acc = e["h_sweep_accuracy"].mean(0)
    for a in acc[:3]:
        assert f"{a:.3f}" in more.explanation
    assert "fell once d_k got small" not in more.choices[more.answer]
    assert np.all(np.diff(acc[:5]) < 0)            # "fell steadily" from h = 1 to h = 16


# ----------------------------------------------------------------------------- notebook 12 and the glossary
def test_the_wrong_mask_heatmap_greys_the_fully_masked_row():
    import matplotlib
    matplotlib.use("Agg")
    from mha_course.views import attention as plots
    keep = mc.causal_mask(5)
    scores = np.random.default_rng(0).normal(size=(5, 5))
    wrong = mc.softmax(np.where(~keep, scores, -np.inf), axis=-1)    # the blocked mask read as a keep-mask
    ax = plots.attention_heatmap(np.where(~keep, wrong, np.nan))
    shown = ax.images[0].get_array()
    assert np.ma.getmaskarray(shown)[-1].all()    # the last query may attend nothing: grey, not 0.00
    code = "\n".join(source(c) for c in cells(12, "code"))
    assert "np.where(~keep, w_wrong[0, 0], np.nan)" in code


def test_the_glossary_states_the_fast_path_conditions():
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    row = next(ln for ln in glossary.splitlines() if ln.startswith("| fast path |"))
    for condition in ("need_weights=True", "evaluation mode", "no autograd", "even number of heads", "batch_first=True",
                      "bias=False", "activation.py"):
        assert condition in row, condition


@pytest.mark.parametrize("kwargs, train_mode, grad, taken", [
    ({}, False, False, True), ({"bias": False}, False, False, False), ({}, True, False, False),
    ({}, False, True, False)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_the_fast_path_is_taken_exactly_when_the_glossary_says(monkeypatch, kwargs, train_mode, grad, taken,
                                                               need_weights):
    from _mha_checks import require_torch
    torch = require_torch()
    calls = []
    native = torch._native_multi_head_attention

    def spy(*args, **kw):
        calls.append(1)
        return native(*args, **kw)
    monkeypatch.setattr(torch, "_native_multi_head_attention", spy)
    module = torch.nn.MultiheadAttention(8, 2, batch_first=True, **kwargs).train(train_mode)
    x = torch.randn(1, 3, 8)
    with torch.set_grad_enabled(grad):
        module(x, x, x, need_weights=need_weights)
    assert bool(calls) == taken
