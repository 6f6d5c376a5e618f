"""mha_course.qkv (the course sentence, Q = K = V = X) and the views of 00_overview / 01_qkv."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

import mha_course as mc
from mha_course.lessons import qkv

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mha_course.views import attention as plots  # noqa: E402


def test_sentence_trace_equals_the_notebook_steps():
    """00_overview builds X step by step with one rng; the live view must draw that same trace."""
    rng = np.random.default_rng(3)
    params = mc.init_params(12, rng=rng)
    vocab = qkv.vocabulary(qkv.SENTENCE)
    X = qkv.embed(qkv.SENTENCE, qkv.embedding_table(len(vocab), 12, rng=rng), vocab)
    by_hand = mc.trace(X, params, h=3)
    view = qkv.sentence_trace(qkv.SENTENCE, 12, 3, seed=3)
    for name in by_hand.names:
        np.testing.assert_array_equal(view[name], by_hand[name])


def test_embed_repeats_rows_for_repeated_tokens_and_keeps_prefix_rows():
    small = qkv.embedding_table(4, 8, rng=np.random.default_rng(1))
    large = qkv.embedding_table(9, 8, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(small, large[:4])
    X = qkv.embed(["b", "a", "b"], small[:2], ["b", "a"])
    assert X.shape == (1, 3, 8)
    np.testing.assert_array_equal(X[0, 0], X[0, 2])
    assert not np.array_equal(X[0, 0], X[0, 1])


@pytest.mark.parametrize("call, words", [
    (lambda: qkv.embed(["dog"], np.zeros((1, 4)), ["cat"]), ["dog", "vocabulary"]),
    (lambda: qkv.embed(["cat"], np.zeros((2, 4)), ["cat"]), ["2 rows", "1 words"]),
    (lambda: qkv.vocabulary([]), ["empty"]),
    (lambda: qkv.blend_params(qkv.identity_params(2), 1.5), ["strength=1.5"]),
    (lambda: qkv.mean_diagonal_weight(np.ones((2, 3))), ["(2, 3)"]),
])
def test_bad_input_raises_a_clear_value_error(call, words):
    with pytest.raises(ValueError) as err:
        call()
    for word in words:
        assert word in str(err.value)


def test_identity_params_make_q_k_v_equal_x_and_output_the_concat():
    X = np.random.default_rng(0).normal(size=(2, 5, 8))
    t = mc.trace(X, qkv.identity_params(8), h=2)
    for name in ("Q", "K", "V"):
        np.testing.assert_array_equal(t[name], X)
    np.testing.assert_allclose(t.output, t["concat"])


def test_blend_params_is_linear_between_identity_and_params():
    p = mc.init_params(6, rng=np.random.default_rng(0), bias=True)
    half = qkv.blend_params(p, 0.5)
    for W, W_half in zip(p[:4], half[:4]):
        np.testing.assert_allclose(W_half, 0.5 * np.eye(6) + 0.5 * W)
    np.testing.assert_allclose(half.b_q, 0.5 * p.b_q)
    assert qkv.blend_params(p, 0.0).b_v is not None


def test_mean_diagonal_weight_reads_the_diagonal_only():
    w = np.zeros((2, 3, 4, 4))
    w[..., 0, 0] = 1.0
    w[..., 1, 2] = 1.0
    assert qkv.mean_diagonal_weight(w) == pytest.approx(0.25)


def test_without_projections_each_token_matches_itself():
    """The lesson of 01_qkv, over many seeds: Q = K = V = X puts most weight on the diagonal,
    independent random projections do not."""
    none, proj = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(1, 6, 16))
        params = mc.init_params(16, rng=rng)
        w_none = mc.trace(X, qkv.identity_params(16), h=1)["weights"]
        assert np.all(w_none[0, 0].argmax(axis=-1) == np.arange(6))
        none.append(qkv.mean_diagonal_weight(w_none))
        proj.append(qkv.mean_diagonal_weight(mc.trace(X, params, h=1)["weights"]))
    assert np.mean(none) > 0.75
    assert np.mean(proj) < 0.3


def test_diagonal_curve_runs_from_no_projections_to_full():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(1, 6, 16))
    p = mc.init_params(16, rng=rng)
    curve = qkv.diagonal_curve(X, p, [0.0, 1.0])
    assert curve[0] == pytest.approx(qkv.mean_diagonal_weight(
        mc.trace(X, qkv.identity_params(16), 1)["weights"]))
    assert curve[1] == pytest.approx(qkv.mean_diagonal_weight(mc.trace(X, p, 1)["weights"]))


def test_stage_flow_draws_every_stage_with_its_shape():
    t = qkv.sentence_trace(qkv.SENTENCE, 8, 2)
    ax = plots.stage_flow(t)
    texts = [x.get_text() for x in ax.texts]
    for name, shape in t.shapes.items():
        assert f"{name}\n{shape}" in texts
    plt.close(ax.figure)


@pytest.mark.parametrize("d_model, h, seq_len", [(16, 4, 6), (12, 6, 3), (8, 1, 10)])
def test_sentence_heads_figure_draws_one_heatmap_per_head(d_model, h, seq_len):
    fig = plots.sentence_heads_figure(d_model, h, seq_len)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title().startswith("head")]
    assert titles == [f"head {i}" for i in range(h)]
    first = next(ax for ax in fig.axes if ax.get_title() == "head 0")
    assert [t.get_text() for t in first.get_yticklabels()] == plots.tokens_for(seq_len)
    plt.close(fig)


def test_qkv_comparison_figure_reports_both_diagonals():
    fig = plots.qkv_comparison_figure(16, 6)
    t = qkv.sentence_trace(list(qkv.SENTENCE), 16, 1)
    t_none = mc.trace(t["X"], qkv.identity_params(16), 1)
    left, middle = fig.axes[0].get_title(), fig.axes[1].get_title()
    assert f"{qkv.mean_diagonal_weight(t_none['weights']):.2f}" in left
    assert f"{qkv.mean_diagonal_weight(t['weights']):.2f}" in middle
    plt.close(fig)


@pytest.mark.parametrize("call, word", [
    (lambda: qkv.vocabulary("the cat"), "tokens must be a list"),
    (lambda: qkv.vocabulary(["the", 3]), "tokens holds 3"),
    (lambda: qkv.sentence_trace(["the"], 8, 2, seed=True), "seed"),
    (lambda: qkv.blend_params(None, 0.5), "params"),
    (lambda: qkv.blend_params(mc.init_params(4, rng=np.random.default_rng(0)), np.nan), "strength"),
    (lambda: qkv.embed(["the"], "spam", ["the"]), "table"),
])
def test_bad_arguments_are_named_at_the_entry(call, word):
    with pytest.raises((ValueError, TypeError), match=word):
        call()


def test_embedding_table_refuses_a_table_past_the_course_limit():
    with pytest.raises(ValueError, match=r"embedding table \(vocab_size, d_model\) = \(3000000, 512\)"):
        qkv.embedding_table(3_000_000, 512, rng=np.random.default_rng(2))


def test_identity_params_refuses_a_d_model_past_the_course_limit():
    with pytest.raises(ValueError, match=r"identity matrices \(d_model, d_model\) = \(60000, 60000\)"):
        qkv.identity_params(60_000)
