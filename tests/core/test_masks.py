"""mask_as against PyTorch's conventions, the gallery masks, fully masked rows and the leak probe.

Our masks: boolean, True = may attend. Shapes: ``B`` batch, ``h`` heads, ``T`` queries,
``S`` keys, ``D`` d_model.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mha_course as mc
from _mha_checks import random_allowed, require_torch
from mha_course.masks import MASK_CONVENTIONS, document_mask, fully_masked_rows, leak_probe, mask_as, prefix_lm_mask

from .test_properties import PROFILE

SEEDS = st.integers(0, 2**32 - 1)


def identity_params(D):
    """MHAParams whose projections are all the identity: multi-head attention of x itself."""
    eye = np.eye(D)
    return mc.MHAParams(eye, eye, eye, eye)


def torch_identity_mha(torch, D, h):
    """nn.MultiheadAttention with identity projections and no bias, float64, batch_first."""
    m = torch.nn.MultiheadAttention(D, h, bias=False, batch_first=True, dtype=torch.float64).eval()
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.eye(D, dtype=torch.float64).repeat(3, 1))  # (3D, D)
        m.out_proj.weight.copy_(torch.eye(D, dtype=torch.float64))
    return m


# ----------------------------------------------------------------------------- mask_as
@PROFILE
@given(st.integers(1, 5), st.integers(1, 5), SEEDS)
def test_the_three_conventions_say_the_same_thing(T, S, seed):
    keep = np.random.default_rng(seed).random((T, S)) < 0.5
    np.testing.assert_array_equal(mask_as(keep, "keep"), keep)
    np.testing.assert_array_equal(mask_as(keep, "block"), ~keep)
    additive = mask_as(keep, "additive")
    assert additive.dtype == np.float64
    np.testing.assert_array_equal(additive[keep], 0.0)
    assert np.all(np.isneginf(additive[~keep]))


@PROFILE
@given(st.integers(1, 5), st.integers(1, 5), SEEDS)
def test_adding_the_additive_mask_to_the_scores_is_our_masked_softmax(T, S, seed):
    rng = np.random.default_rng(seed)
    keep = random_allowed(rng, (T, S), keep_one=False)
    scores = rng.normal(size=(T, S))
    # Q = scores, K = sqrt(S) I, V = I: then Q K^T / sqrt(d_k) = scores and out = weights
    _, weights = mc.scaled_dot_product_attention(scores, np.sqrt(S) * np.eye(S), np.eye(S), keep)
    np.testing.assert_allclose(mc.softmax(scores + mask_as(keep, "additive")), weights, atol=1e-12)


def test_mask_as_rejects_unknown_conventions_and_non_boolean_masks():
    with pytest.raises(ValueError, match=r"convention='causal'.*'keep'.*'block'.*'additive'"):
        mask_as(mc.causal_mask(3), "causal")
    with pytest.raises(ValueError, match="mask must be boolean"):
        mask_as(np.tril(np.ones((3, 3))), "block")
    assert set(MASK_CONVENTIONS) == {"keep", "block", "additive"}


@pytest.mark.parametrize("convention", ["keep", "additive"])
@pytest.mark.parametrize("seed", range(4))
def test_mask_as_gives_sdpa_the_same_attention_as_ours(convention, seed):
    torch = require_torch()
    rng = np.random.default_rng(seed)
    B, h, T, S, d = 2, 3, 5, 6, 4
    Q, K, V = rng.normal(size=(B, h, T, d)), rng.normal(size=(B, h, S, d)), rng.normal(size=(B, h, S, d))
    keep = random_allowed(rng, [(T, S), (B, 1, T, S), (B, h, T, S)][seed % 3], keep_one=True)
    ours, _ = mc.scaled_dot_product_attention(Q, K, V, keep)
    theirs = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a) for a in (Q, K, V)), attn_mask=torch.from_numpy(mask_as(keep, convention)))
    np.testing.assert_allclose(theirs.numpy(), ours, atol=1e-12)


@pytest.mark.parametrize("convention", ["block", "additive"])
@pytest.mark.parametrize("seed", range(4))
def test_mask_as_gives_nn_multihead_attention_attn_mask_the_same_attention_as_ours(convention, seed):
    torch = require_torch()
    rng = np.random.default_rng(seed)
    B, h, T, D = 2, 2, 5, 8
    x = rng.normal(size=(B, T, D))
    keep = random_allowed(rng, [(T, T), (B, h, T, T)][seed % 2], keep_one=True)
    ours, ours_w = mc.multi_head_attention(x, identity_params(D), h, mask=keep)
    attn_mask = np.array(np.broadcast_to(mask_as(keep, convention), (B, h, T, T))).reshape(B * h, T, T)  # (B*h, T, S)
    with torch.no_grad():
        out, w = torch_identity_mha(torch, D, h)(*[torch.from_numpy(x)] * 3, attn_mask=torch.from_numpy(attn_mask),
                                                 need_weights=True, average_attn_weights=False)
    np.testing.assert_allclose(out.numpy(), ours, atol=1e-12)
    np.testing.assert_allclose(w.numpy(), ours_w, atol=1e-12)


def test_mask_as_gives_nn_multihead_attention_key_padding_mask_the_same_attention_as_ours():
    torch = require_torch()
    rng = np.random.default_rng(7)
    B, h, T, D = 3, 2, 6, 8
    x = rng.normal(size=(B, T, D))
    keep = mc.padding_mask([6, 3, 1], T)  # (B, 1, 1, S)
    ours, _ = mc.multi_head_attention(x, identity_params(D), h, mask=keep)
    key_padding_mask = mask_as(keep, "block")[:, 0, 0, :]  # (B, S): torch's own layout, True = padding
    with torch.no_grad():
        out, _ = torch_identity_mha(torch, D, h)(*[torch.from_numpy(x)] * 3,
                                                 key_padding_mask=torch.from_numpy(key_padding_mask))
    np.testing.assert_allclose(out.numpy(), ours, atol=1e-12)


def test_the_flipped_polarity_given_to_sdpa_leaks_the_future_and_the_probe_sees_it():
    """The LLMs-from-scratch bonus-notebook bug: a True-means-blocked triu handed to SDPA."""
    torch = require_torch()
    T = 6
    wrong = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)  # nn.MultiheadAttention's polarity

    def sdpa(mask):
        def attend(x):
            t = torch.from_numpy(x)
            return torch.nn.functional.scaled_dot_product_attention(t, t, t, attn_mask=mask).numpy()
        return attend

    right = leak_probe(sdpa(torch.from_numpy(mask_as(mc.causal_mask(T), "keep"))), T, rng=np.random.default_rng(0))
    flipped = leak_probe(sdpa(wrong), T, rng=np.random.default_rng(0))
    assert right.ok and right.moved.sum() == T * (T + 1) // 2
    assert not flipped.ok
    assert set(flipped.leaks) == {(t, s) for t in range(T) for s in range(t + 1, T)}  # every future token


# ----------------------------------------------------------------------------- fully masked rows
def test_fully_masked_rows_are_zero_in_ours_and_sdpa_but_nan_in_multihead_attention_with_weights():
    torch = require_torch()
    rng = np.random.default_rng(2)
    B, h, T, D = 2, 1, 4, 4
    x = rng.normal(size=(B, T, D))
    keep = mc.padding_mask([4, 0], T)  # the second sequence is all padding: its rows see no key
    assert fully_masked_rows(np.broadcast_to(keep, (B, 1, T, T)))[1].all()
    ours, _ = mc.multi_head_attention(x, identity_params(D), h, mask=keep)
    assert np.all(ours[1] == 0)
    t = torch.from_numpy(x)
    sdpa = torch.nn.functional.scaled_dot_product_attention(t, t, t, attn_mask=torch.from_numpy(keep[:, 0]))
    np.testing.assert_array_equal(sdpa.numpy()[1], 0.0)
    m = torch_identity_mha(torch, D, h)
    kpm = torch.from_numpy(mask_as(keep, "block")[:, 0, 0, :])
    with torch.no_grad():
        with_weights, _ = m(t, t, t, key_padding_mask=kpm, need_weights=True)
        without, _ = m(t, t, t, key_padding_mask=kpm, need_weights=False)
    assert torch.isnan(with_weights[1]).all() and not torch.isnan(with_weights[0]).any()
    np.testing.assert_allclose(with_weights.numpy()[0], ours[0], atol=1e-12)
    assert not torch.isnan(without).any()


@pytest.mark.parametrize("h, fast_path_nan", [(1, False), (2, True), (4, True)])
def test_multihead_attention_fast_path_gives_nan_on_a_fully_masked_row(h, fast_path_nan):
    """Notebooks 06 and 12: eval + no_grad + need_weights=False takes the fused fast path (even h), NaN there."""
    torch = require_torch()
    x = torch.from_numpy(np.random.default_rng(3).normal(size=(2, 3, 4)))
    kpm = torch.tensor([[False, False, False], [True, True, True]])  # sequence 1 is all padding
    m = torch.nn.MultiheadAttention(4, h, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        train_out, _ = m.train()(x, x, x, key_padding_mask=kpm, need_weights=False)
        eval_out, _ = m.eval()(x, x, x, key_padding_mask=kpm, need_weights=False)
    assert not torch.isnan(train_out).any()
    assert bool(torch.isnan(eval_out[1]).all()) == fast_path_nan
    assert not torch.isnan(eval_out[0]).any()


# ----------------------------------------------------------------------------- gallery
@PROFILE
@given(st.integers(1, 8), st.data())
def test_prefix_lm_mask_is_causal_plus_a_visible_prefix(T, data):
    prefix = data.draw(st.integers(0, T))
    m = prefix_lm_mask(T, prefix)
    np.testing.assert_array_equal(m[:, prefix:], mc.causal_mask(T)[:, prefix:])
    assert m[:, :prefix].all()
    assert not fully_masked_rows(m).any()


def test_prefix_lm_mask_ends_are_causal_and_full():
    np.testing.assert_array_equal(prefix_lm_mask(5, 0), mc.causal_mask(5))
    assert prefix_lm_mask(5, 5).all()
    with pytest.raises(ValueError, match="prefix=6 must be a whole number in 0..T=0..5"):
        prefix_lm_mask(5, 6)


@PROFILE
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.booleans())
def test_document_mask_is_block_diagonal_over_packed_documents(lengths, causal):
    ids = np.repeat(np.arange(len(lengths)), lengths)  # (T,): 0 0 1 1 1 2 ...
    m = document_mask(ids, causal=causal)
    T = len(ids)
    assert m.shape == (T, T)
    assert m.sum() == sum(n * (n + 1) // 2 if causal else n * n for n in lengths)
    if causal:
        assert not (m & ~mc.causal_mask(T)).any()
    else:
        np.testing.assert_array_equal(m, m.T)
    start = 0
    for n in lengths:  # each document's own block is all allowed (or causal)
        block = m[start:start + n, start:start + n]
        np.testing.assert_array_equal(block, mc.causal_mask(n) if causal else np.ones((n, n), bool))
        start += n


def test_document_mask_batched_broadcasts_to_heads_and_rejects_floats():
    m = document_mask([[0, 0, 1], [0, 1, 1]])
    assert m.shape == (2, 1, 3, 3)
    with pytest.raises(ValueError, match="integer document ids"):
        document_mask([0.0, 1.0])


def test_left_padding_with_causal_masks_the_first_rows_fully():
    T = 5
    left_padded = mc.padding_mask([3], T)[..., ::-1]  # (1, 1, 1, S): the last 3 keys are real
    combined = mc.causal_mask(T) & left_padded  # (1, 1, T, T)
    np.testing.assert_array_equal(fully_masked_rows(combined)[0, 0], [True, True, False, False, False])


# ----------------------------------------------------------------------------- leak probe
def _causal_attention(x):
    return mc.scaled_dot_product_attention(x, x, x, mc.causal_mask(x.shape[-2]))


@PROFILE
@given(st.integers(1, 7), st.integers(1, 6), SEEDS)
def test_leak_probe_finds_no_leak_in_causal_attention_and_every_leak_without_a_mask(T, d, seed):
    ok = leak_probe(_causal_attention, T, rng=np.random.default_rng(seed), d=d)
    assert ok.ok and ok.leaks == []
    np.testing.assert_array_equal(ok.moved, mc.causal_mask(T))
    leaky = leak_probe(lambda x: mc.scaled_dot_product_attention(x, x, x), T, rng=np.random.default_rng(seed), d=d)
    assert leaky.leaks == [(t, s) for t in range(T) for s in range(t + 1, T)]
    assert leaky.ok == (T == 1)


def test_leak_probe_with_a_key_padding_mask_and_a_batched_multi_head_function():
    T, D = 6, 8
    params = mc.init_params(D, rng=np.random.default_rng(0))
    keep = mc.padding_mask([4], T)  # one sequence of 4 real tokens and 2 pads

    def mha(x):  # x (B, T, D)
        return mc.multi_head_attention(x, params, 2, mask=keep)  # a tuple: the probe takes the output

    report = leak_probe(mha, T, rng=np.random.default_rng(1), d=D, mask=keep, batch=2)
    assert report.ok, report.describe()
    assert not report.moved[:4, 4:].any()  # real tokens never depend on the pads
    leaky = leak_probe(lambda x: mc.multi_head_attention(x, params, 2), T, rng=np.random.default_rng(1),
                       d=D, mask=keep, batch=2)
    assert {s for _, s in leaky.leaks} == {4, 5}
    assert "output 0 moved when token 4 changed" in leaky.describe()


def test_leak_probe_tells_a_caller_whose_function_has_the_wrong_shape():
    with pytest.raises(ValueError, match=r"attn_fn returned shape \(4,\); leak_probe needs"):
        leak_probe(lambda x: x.sum(-1), 4, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 1, 1, 4\) does not describe one"):
        leak_probe(_causal_attention, 4, rng=np.random.default_rng(0), mask=mc.padding_mask([1, 2], 4))


@pytest.mark.parametrize("T", [1, 3, 8, 10])
def test_gallery_has_fully_masked_rows_only_for_the_left_padded_queries(T):
    masks = mc.masks.gallery(T)
    assert list(masks) == ["causal", "key padding", "left padding & causal", "prefix-LM", "documents"]
    for name, m in masks.items():
        assert m.shape == (T, T) and m.dtype == bool
        expected = np.arange(T) < T // 3 if name == "left padding & causal" else np.zeros(T, bool)
        np.testing.assert_array_equal(fully_masked_rows(m), expected, err_msg=name)


# ----------------------------------------------------------------------------- one builder of causal masks
def _calls_of(function) -> set:
    """The names a function's body calls (``f(...)`` and ``obj.f(...)``)."""
    import ast
    import inspect
    import textwrap
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}


@pytest.mark.parametrize("T", [1, 2, 5, 9])
def test_every_causal_mask_is_the_one_builder(T):
    """causal_mask(T), cached_causal_mask(T, 0), sliding_window_mask(T, T) and prefix_lm_mask(T, 0) are
    one mask, and each is made by masks.causal_mask (its body calls it; none builds its own)."""
    from mha_course import attention, efficient, gqa, masks
    want = masks.causal_mask(T)
    assert attention.causal_mask is masks.causal_mask
    for made in (gqa.cached_causal_mask(T, 0), efficient.sliding_window_mask(T, T), masks.prefix_lm_mask(T, 0)):
        assert made.dtype == bool and np.array_equal(made, want)
    for function in (gqa.cached_causal_mask, efficient.sliding_window_mask, masks.prefix_lm_mask):
        assert "causal_mask" in _calls_of(function), function.__name__
        assert not {"tril", "triu", "tri"} & _calls_of(function), function.__name__


def test_no_module_of_the_core_or_the_lessons_builds_a_triangle_of_its_own():
    """np.tril / np.triu / np.tri appear only in masks.py among the core and the lessons (the checkers
    write wrong masks by hand on purpose; the views shade the future cells of a plot)."""
    import ast
    from pathlib import Path
    package = Path(mc.__file__).parent
    found = []
    for path in sorted([*package.glob("*.py"), *(package / "lessons").glob("*.py")]):
        if path.name == "masks.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("tril", "triu", "tri"):
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == []


@pytest.mark.parametrize("T, offset, window", [(1, 0, None), (3, 2, None), (4, 0, 2), (2, 3, 2), (5, 1, 9)])
def test_causal_mask_with_offset_and_window_is_its_definition(T, offset, window):
    t = offset + np.arange(T)[:, None]
    s = np.arange(offset + T)[None, :]
    want = (s <= t) & ((t - s) < (window if window is not None else offset + T))
    assert np.array_equal(mc.masks.causal_mask(T, offset, window), want)


@pytest.mark.parametrize("kwargs, message", [({"T": 0}, "T=0"), ({"T": 2, "offset": -1}, "offset=-1"),
                                             ({"T": 2, "offset": 1.5}, "offset=1.5"),
                                             ({"T": 2, "window": 0}, "window=0")])
def test_causal_mask_refuses_bad_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mc.masks.causal_mask(**kwargs)


# ---- the third round of attacks: the attack generator's findings
def test_document_mask_refuses_a_causal_that_is_no_flag_and_negative_ids():
    for bad in (2, "yes", None):
        with pytest.raises(ValueError, match="causal="):
            document_mask([0, 0, 1], causal=bad)
    with pytest.raises(ValueError, match="doc_ids holds -1"):
        document_mask([0, -1, -1])
    np.testing.assert_array_equal(document_mask([4, 4, 9]), document_mask([0, 0, 1]))  # labels, not positions


def test_leak_probe_names_a_bad_rng_tol_and_mask():
    fn = lambda x: x.cumsum(axis=-2)  # noqa: E731 - causal by construction
    assert leak_probe(fn, 4, rng=np.random.default_rng(0)).ok
    for bad in (None, 0, "spam"):
        with pytest.raises(ValueError, match="rng must be a numpy Generator"):
            leak_probe(fn, 4, rng=bad)
    for bad in (float("nan"), float("inf"), -1.0, "spam", True):
        with pytest.raises(ValueError, match="tol="):
            leak_probe(fn, 4, rng=np.random.default_rng(0), tol=bad)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 3\) does not describe one"):
        leak_probe(fn, 4, rng=np.random.default_rng(0), mask=np.ones((4, 3), bool))


# ---- sizes are checked before anything is allocated; a probed function must return finite outputs

@pytest.mark.parametrize("build, what", [
    (lambda: mc.causal_mask(200_000), r"causal mask of shape \(T, offset \+ T\) = \(200000, 200000\)"),
    (lambda: mc.causal_mask(4, offset=10**10), r"causal mask .* = \(4, 10000000004\)"),
    (lambda: prefix_lm_mask(100_000, 7), r"causal mask"),
    (lambda: document_mask(np.arange(300_000) // 1000), r"document mask for doc_ids of shape \(300000,\)"),
    (lambda: leak_probe(lambda x: x, 10**6, rng=np.random.default_rng(0)), r"leak_probe's tokens"),
])
def test_huge_masks_are_refused_naming_the_size_not_a_memory_error(build, what):
    with pytest.raises(ValueError, match=what + r".* would take"):
        build()


def test_leak_probe_refuses_a_function_whose_output_is_not_finite():
    def broken(x):
        out = x.copy()
        out[..., 2, 0] = np.inf  # finite input, an inf output: it cannot say whether it moved
        return out
    with pytest.raises(ValueError, match=r"attn_fn returned NaN or inf \(first at index \(2, 0\)\)"):
        leak_probe(broken, 5, rng=np.random.default_rng(1))
