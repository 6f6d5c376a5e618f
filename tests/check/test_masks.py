"""The checkers of notebook 06 (causal self-attention, mask_as, document_mask, cross_attention).

For each exercise: correct answers written differently from the answer key are accepted, every
catalogued mistake is named as itself (and learner-written versions of the ones the issue lists),
and mistakes nobody catalogued get a closer look in the exercise's own terms.
"""
import numpy as np
import pytest

import mha_course as mc
from mha_course.check import masks as cm


def run(capsys, checker, fn):
    ok = checker(fn)
    return ok, capsys.readouterr().out


def named(exercise, capsys, checker, fn, mistake_name):
    ok, out = run(capsys, checker, fn)
    assert ok is False and f"Looks like: {mistake_name}" in out, out


# ---------------------------------------------------------------- 6.1 causal self-attention
def csa_loops(x):
    """Query by query, key by key, as a loop."""
    T, d = x.shape[-2], x.shape[-1]
    out = np.zeros(x.shape)  # floats: np.zeros_like(x) would truncate an integer x's averages
    for t in range(T):
        s = (x[..., t:t + 1, :] * x[..., :t + 1, :]).sum(-1) / d ** 0.5   # (..., t + 1)
        w = np.exp(s - s.max(-1, keepdims=True))
        out[..., t, :] = ((w / w.sum(-1, keepdims=True))[..., None] * x[..., :t + 1, :]).sum(-2)
    return out


def csa_package(x):
    return mc.scaled_dot_product_attention(x, x, x, mc.causal_mask(x.shape[-2]))[0]


def csa_scaled_inputs(x):
    q = x / x.shape[-1] ** 0.25                          # split the scale over Q and K
    T = x.shape[-2]
    s = np.where(np.tril(np.ones((T, T))) == 1, q @ np.swapaxes(q, -1, -2), -np.inf)
    return mc.softmax(s, axis=-1) @ x


@pytest.mark.parametrize("fn", [csa_loops, csa_package, csa_scaled_inputs])
def test_causal_self_attention_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cm.causal_self_attention, fn)
    assert ok, out


def csa_times_mask(x):
    T, d = x.shape[-2:]
    s = x @ np.swapaxes(x, -1, -2) / np.sqrt(d)
    return mc.softmax(s * np.tril(np.ones((T, T)))) @ x  # the future's scores become 0, not -inf


def csa_no_scale(x):
    T = x.shape[-2]
    return mc.softmax(np.where(np.tri(T, dtype=bool), x @ np.swapaxes(x, -1, -2), -np.inf)) @ x


def csa_mask_minus_one(x):
    T, d = x.shape[-2:]
    m = np.tril(np.ones((T, T)))
    return mc.softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(d) + (m - 1)) @ x


def csa_wrong_axis(x):
    T, d = x.shape[-2:]
    s = np.where(np.tri(T, dtype=bool), x @ np.swapaxes(x, -1, -2) / np.sqrt(d), -np.inf)
    return mc.softmax(s, axis=-2) @ x


@pytest.mark.parametrize("fn, name", [
    (csa_times_mask, "the future's scores set to 0 instead of -inf"),
    (csa_no_scale, "the scores are not divided by sqrt(d)"),
    (csa_mask_minus_one, "an additive mask built as mask - 1"),
    (csa_wrong_axis, "the softmax runs over the queries"),
])
def test_causal_self_attention_names_learner_mistakes(capsys, fn, name):
    named(cm.CAUSAL_SELF_ATTENTION, capsys, cm.causal_self_attention, fn, name)


@pytest.mark.parametrize("i", range(len(cm.CAUSAL_SELF_ATTENTION.mistakes)))
def test_causal_self_attention_names_every_catalogued_mistake(capsys, i):
    m = cm.CAUSAL_SELF_ATTENTION.mistakes[i]
    named(cm.CAUSAL_SELF_ATTENTION, capsys, cm.causal_self_attention, m.fn, m.name)


def test_the_leak_probe_shows_the_leak_of_a_named_mistake(capsys):
    ok, out = run(capsys, cm.causal_self_attention, cm.CAUSAL_SELF_ATTENTION.mistakes[0].fn)
    assert "leak probe (T=6):" in out and "output 0 moved when token 1 changed" in out, out


@pytest.mark.parametrize("fn, says", [
    (lambda x: csa_package(x) + x, "no leak: no output reads a later token"),                      # a residual added
    (lambda x: mc.scaled_dot_product_attention(x, x, x, np.tril(np.ones((x.shape[-2],) * 2, bool), 2))[0],
     "output 0 moved when token 2 changed"),                                                # off by two
])
def test_causal_self_attention_unknown_mistakes_get_a_closer_look(capsys, fn, says):
    ok, out = run(capsys, cm.causal_self_attention, fn)
    assert ok is False and "Looks like" not in out and "A closer look:" in out and says in out, out


# ---------------------------------------------------------------- 6.2 mask_as
def mask_as_dict(mask, convention):
    m = np.asarray(mask, dtype=bool)
    table = {"keep": lambda: m.copy(), "block": lambda: np.logical_not(m), "additive": lambda: np.where(m, 0, -np.inf)}
    return table[convention]()            # an unknown convention raises KeyError: loud, so right


def mask_as_if(mask, convention):
    if convention == "keep":
        return np.array(mask, dtype=bool)
    elif convention == "block":
        return ~np.array(mask, dtype=bool)
    elif convention == "additive":
        out = np.zeros(np.shape(mask))
        out[~np.asarray(mask, bool)] = float("-inf")
        return out
    raise ValueError(convention)


def mask_as_match(mask, convention):
    keep = np.asarray(mask).astype(bool)
    match convention:
        case "keep":
            return keep.copy()
        case "block":
            return keep == False  # noqa: E712 (a learner's spelling)
        case "additive":
            return np.log(keep.astype(float))   # log 1 = 0, log 0 = -inf
        case _:
            raise KeyError(convention)


def mask_as_assert(mask, convention):
    assert convention in ("keep", "block", "additive"), convention
    keep = np.asarray(mask, bool)
    return {"keep": keep.copy(), "block": ~keep, "additive": np.where(keep, 0.0, -np.inf)}[convention]


@pytest.mark.parametrize("fn", [mask_as_dict, mask_as_if, mask_as_match, mask_as_assert, mc.mask_as])
def test_mask_as_accepts_right_answers(capsys, fn):
    with np.errstate(divide="ignore"):
        ok, out = run(capsys, cm.mask_as, fn)
    assert ok and "an unknown convention raises" in out, out


def mask_as_none(mask, convention):
    keep = np.array(mask, bool)
    if convention == "keep":
        return keep
    if convention == "block":
        return ~keep
    if convention == "additive":
        return np.where(keep, 0.0, -np.inf)          # falls off the end: None for anything else


def mask_as_else(mask, convention):
    keep = np.array(mask, bool)
    if convention == "block":
        return ~keep
    if convention == "additive":
        return np.where(keep, 0.0, -np.inf)
    return keep                                      # else: 'keep', and every typo too


def mask_as_float_block(mask, convention):
    keep = np.array(mask, bool)
    return {"keep": keep, "block": (~keep).astype(np.float32) * 1.0, "additive": np.where(keep, 0.0, -np.inf)}[
        convention]


def mask_as_minus_one(mask, convention):
    keep = np.array(mask, bool)
    return {"keep": keep, "block": ~keep, "additive": keep.astype(float) - 1}[convention]


@pytest.mark.parametrize("fn, name", [
    (mask_as_none, "an unknown convention returns None"),
    (mask_as_else, "an unknown convention returns the mask unchanged"),
    (mask_as_float_block, "'block' returned as floats 1.0 / 0.0: nn.MultiheadAttention ADDS a float mask"),
    (mask_as_minus_one, "'additive' built as mask - 1"),
])
def test_mask_as_names_learner_mistakes(capsys, fn, name):
    named(cm.MASK_AS, capsys, cm.mask_as, fn, name)


@pytest.mark.parametrize("i", range(len(cm.MASK_AS.mistakes) + len(cm.MASK_AS_UNKNOWN)))
def test_mask_as_names_every_catalogued_mistake(capsys, i):
    if i < len(cm.MASK_AS.mistakes):
        m = cm.MASK_AS.mistakes[i]
        fn = m.fn
    else:  # an unknown-convention mistake: right on the three conventions, wrong on the rest
        m = cm.MASK_AS_UNKNOWN[i - len(cm.MASK_AS.mistakes)]
        fn = mask_as_none if "None" in m.name else mask_as_else
    named(cm.MASK_AS, capsys, cm.mask_as, fn, m.name)


def test_the_unknown_convention_mistakes_are_told_apart():
    outs = {m.name: [m.fn(*c) for c in cm._unknown_cases()] for m in cm.MASK_AS_UNKNOWN}
    assert len({tuple(v) for v in outs.values()}) == len(outs)


@pytest.mark.parametrize("fn, says", [
    (lambda mask, c: {"keep": np.array(mask, bool), "block": ~np.asarray(mask, bool),
                      "additive": np.where(mask, 0.0, -10.0)}[c], "'additive' is wrong"),
    (lambda mask, c: {"keep": np.asarray(mask, bool)[..., ::-1], "block": ~np.asarray(mask, bool),
                      "additive": np.where(mask, 0.0, -np.inf)}[c], "'keep' is wrong"),
])
def test_mask_as_unknown_mistakes_name_the_convention(capsys, fn, says):
    ok, out = run(capsys, cm.mask_as, fn)
    assert ok is False and "Looks like" not in out and says in out, out


@pytest.mark.parametrize("keep", [lambda mask: mask, lambda mask: np.asarray(mask, dtype=bool),
                                  lambda mask: mask[...], lambda mask: mask.view()])
def test_mask_as_refuses_the_callers_own_array_for_keep(capsys, keep):
    def aliased(mask, convention):
        m = np.asarray(mask, dtype=bool)
        return {"keep": keep(mask), "block": ~m, "additive": np.where(m, 0.0, -np.inf)}[convention]
    ok, out = run(capsys, cm.mask_as, aliased)
    assert ok is False and "the caller's own array" in out and "Fix: return a copy" in out, out


# ---------------------------------------------------------------- 6.3 document mask
def doc_loops(doc_ids, causal=False):
    T = len(doc_ids)
    out = np.zeros((T, T), dtype=bool)
    for t in range(T):
        for s in range(T):
            out[t, s] = doc_ids[t] == doc_ids[s] and (not causal or s <= t)
    return out


def doc_equal_outer(doc_ids, causal=False):
    ids = np.asarray(doc_ids)
    m = np.equal.outer(ids, ids)
    return m & mc.causal_mask(len(ids)) if causal else m


def doc_tri(doc_ids, causal=False):
    ids = np.array(doc_ids)
    same = (ids.reshape(-1, 1) - ids.reshape(1, -1)) == 0
    return np.logical_and(same, np.tri(len(ids), dtype=bool)) if causal else same


def doc_indices(doc_ids, causal=False):
    ids = np.asarray(doc_ids)
    t, s = np.indices((len(ids), len(ids)))
    return (ids[t] == ids[s]) & ((s <= t) | (not causal))


@pytest.mark.parametrize("fn", [doc_loops, doc_equal_outer, doc_tri, doc_indices, mc.document_mask])
def test_document_mask_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cm.document_mask, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda ids, causal=False: doc_equal_outer(ids) & (np.triu(np.ones((len(ids),) * 2, bool)) if causal else True),
     "the causal part is transposed"),
    (lambda ids, causal=False: doc_equal_outer(ids) & (np.tri(len(ids), k=-1, dtype=bool) if causal else True),
     "the causal part has no diagonal"),
    (lambda ids, causal=False: doc_equal_outer(ids) | (np.tri(len(ids), dtype=bool) if causal else False),
     "the two parts combined with | (or)"),
    (lambda ids, causal=False: ~doc_loops(ids, causal), "the polarity is flipped"),
])
def test_document_mask_names_learner_mistakes(capsys, fn, name):
    named(cm.DOCUMENT_MASK, capsys, cm.document_mask, fn, name)


@pytest.mark.parametrize("i", range(len(cm.DOCUMENT_MASK.mistakes)))
def test_document_mask_names_every_catalogued_mistake(capsys, i):
    m = cm.DOCUMENT_MASK.mistakes[i]
    named(cm.DOCUMENT_MASK, capsys, cm.document_mask, m.fn, m.name)


@pytest.mark.parametrize("fn, says", [
    (lambda ids, causal=False: doc_loops(ids, causal) | np.eye(len(ids), k=1, dtype=bool),
     "wrongly allowed [(0, 1), (1, 2), (2, 3)"),
    (lambda ids, causal=False: doc_loops(ids, causal) & ~np.eye(len(ids), dtype=bool),
     "wrongly blocked [(0, 0), (1, 1)"),
])
def test_document_mask_unknown_mistakes_name_the_pairs(capsys, fn, says):
    ok, out = run(capsys, cm.document_mask, fn)
    assert ok is False and "Looks like" not in out and says in out, out


# ---------------------------------------------------------------- 6.4 cross-attention
def cross_einsum(x, context, W_q, W_k, W_v, keep):
    Q, K, V = x @ W_q, context @ W_k, context @ W_v
    s = np.einsum("btd,bsd->bts", Q, K) / np.sqrt(Q.shape[-1])
    s = np.where(keep[:, None, :], s, -np.inf)
    m = s.max(-1, keepdims=True)
    w = np.exp(s - np.where(np.isfinite(m), m, 0.0))  # a sequence of padding only: every score -inf, weights 0
    w = w / np.where(w.sum(-1, keepdims=True) > 0, w.sum(-1, keepdims=True), 1.0)
    return w @ V, w


def cross_package(x, context, W_q, W_k, W_v, keep):
    return mc.scaled_dot_product_attention(x @ W_q, context @ W_k, context @ W_v, keep[:, None, :])


def cross_additive(x, context, W_q, W_k, W_v, keep):
    scores = (x @ W_q) @ (context @ W_k).transpose(0, 2, 1) / W_q.shape[1] ** 0.5
    weights = mc.softmax(scores + mc.mask_as(keep[:, None, :], "additive"))
    return weights @ (context @ W_v), weights


def cross_loop(x, context, W_q, W_k, W_v, keep):
    outs, ws = [], []
    for b in range(x.shape[0]):
        K, V = context[b][keep[b]] @ W_k, context[b][keep[b]] @ W_v    # only the real source tokens
        if not keep[b].any():  # padding only: nothing to attend, zero weights and a zero output
            outs.append(np.zeros((x.shape[1], W_v.shape[1])))
            ws.append(np.zeros((x.shape[1], context.shape[1])))
            continue
        w_real = mc.softmax((x[b] @ W_q) @ K.T / np.sqrt(W_k.shape[1]))
        w = np.zeros((x.shape[1], context.shape[1]))
        w[:, keep[b]] = w_real
        outs.append(w_real @ V)
        ws.append(w)
    return np.stack(outs), np.stack(ws)


@pytest.mark.parametrize("fn", [cross_einsum, cross_package, cross_additive, cross_loop])
def test_cross_attention_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cm.cross_attention, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda x, c, Wq, Wk, Wv, keep: mc.scaled_dot_product_attention(x @ Wq, c @ Wk, c @ Wv), "the source padding mask is ignored"),
    (lambda x, c, Wq, Wk, Wv, keep: mc.scaled_dot_product_attention(x @ Wq, c @ Wk, c @ Wv, ~keep[:, None, :]),
     "the padding mask's polarity is flipped"),
    (lambda x, c, Wq, Wk, Wv, keep: mc.scaled_dot_product_attention(
        x @ Wq, c @ Wk, c @ Wv, keep[:, None, :] & np.tri(x.shape[1], c.shape[1], dtype=bool)), "a causal mask added"),
    (lambda x, c, Wq, Wk, Wv, keep: cross_package(x, c, Wq, Wk, Wv, keep)[::-1], "the outputs in the wrong order"),
])
def test_cross_attention_names_learner_mistakes(capsys, fn, name):
    named(cm.CROSS_ATTENTION, capsys, cm.cross_attention, fn, name)


@pytest.mark.parametrize("i", range(len(cm.CROSS_ATTENTION.mistakes)))
def test_cross_attention_names_every_catalogued_mistake(capsys, i):
    m = cm.CROSS_ATTENTION.mistakes[i]
    named(cm.CROSS_ATTENTION, capsys, cm.cross_attention, m.fn, m.name)


@pytest.mark.parametrize("fn, says", [
    (lambda x, c, Wq, Wk, Wv, keep: (cross_package(x, c, Wq, Wk, Wv, keep)[0] * 2, cross_package(x, c, Wq, Wk, Wv,
                                                                                                  keep)[1]),
     "the weights are right: the difference is in what they multiply"),
    (lambda x, c, Wq, Wk, Wv, keep: mc.scaled_dot_product_attention(x @ Wq, c @ Wk, c @ Wv,
                                                                    np.ones_like(keep)[:, None, :] & keep[:1, None, :]),
     "weights on padded source tokens: largest"),
])
def test_cross_attention_unknown_mistakes_get_a_closer_look(capsys, fn, says):
    ok, out = run(capsys, cm.cross_attention, fn)
    assert ok is False and "Looks like" not in out and says in out, out


def test_natural_types_turn_a_list_into_a_tuple_and_a_whole_float_into_an_int():
    assert cm.natural_types(lambda: [np.zeros(2), np.ones(2)])().__class__ is tuple
    assert cm.natural_types(lambda: 4.0)() == 4 and isinstance(cm.natural_types(lambda: 4.0)(), int)
    assert cm.natural_types(lambda: 4.5)() == 4.5


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def test_the_batch_taken_as_the_token_axis_is_named(capsys):
    def causal(x):  # x (T, d) as written for one sequence
        T = x.shape[0]
        s = x @ x.T / np.sqrt(x.shape[-1])
        w = mc.softmax(np.where(np.tril(np.ones((T, T), bool)), s, -np.inf))
        return w @ x
    def learner(x):
        return causal(x) if x.ndim == 2 else np.stack([causal(x[:, t]) for t in range(x.shape[1])], axis=1)
    _says(capsys, _check.causal_self_attention, learner, "the batch and token axes swapped on a batch")


def test_only_the_causal_part_with_causal_true_is_named(capsys):
    def learner(doc_ids, causal=False):
        ids = np.asarray(doc_ids)
        return np.tril(np.ones((ids.size, ids.size), bool)) if causal else np.equal.outer(ids, ids)
    _says(capsys, _check.document_mask, learner, "with causal=True only the causal part")


def test_a_one_dimensional_id_comparison_gets_its_closer_look(capsys):
    def learner(doc_ids, causal=False):
        ids = np.asarray(doc_ids)
        return ids == ids.T
    assert _check.document_mask(learner) is False
    assert "ids == ids.T (on a 1-D array .T does nothing" in capsys.readouterr().out


@pytest.mark.parametrize("q_from, k_from, said", [
    ("c", "x", "the queries come from the context and the keys from x"),
    ("c", "c", "the queries come from the context (Q = context @ W_q)"),
])
def test_queries_from_the_context_are_named(capsys, q_from, k_from, said):
    def learner(x, context, W_q, W_k, W_v, keep):
        src = {"x": x, "c": context}
        Q, K, V = src[q_from] @ W_q, src[k_from] @ W_k, context @ W_v
        s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(W_q.shape[1])
        if k_from == "c":
            s = np.where(keep[:, None, :], s, -np.inf)
        w = mc.softmax(s)
        return w @ V, w
    _says(capsys, _check.cross_attention, learner, said)


def test_a_causal_mask_from_the_first_axis_is_named(capsys):
    def learner(x):
        keep = np.tril(np.ones((len(x), len(x)), dtype=bool))  # len(x) is B for a batch
        return mc.scaled_dot_product_attention(x, x, x, keep)[0]
    _says(capsys, _check.causal_self_attention, learner, "the causal mask built from x.shape[0]")


def test_a_wrong_value_on_another_convention_is_said_before_the_missing_copy(capsys):
    def aliased_and_int(mask, convention):
        m = np.asarray(mask, dtype=bool)
        return {"keep": mask, "block": (~m).astype(int), "additive": np.where(m, 0.0, -np.inf)}[convention]
    ok, out = run(capsys, cm.mask_as, aliased_and_int)
    assert ok is False and "masks are boolean" in out and "the caller's own array" not in out, out
