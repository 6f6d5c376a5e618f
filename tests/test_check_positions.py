"""The checkers of 06 and 07 (mask_as, causal_self_attention, sinusoidal_positions, apply_rope):
the notebooks' solutions pass, each typical mistake is rejected AND named, a stub is "not finished".

The solutions and the wrong answers are typed here the way a learner writes them.
"""
import numpy as np
import pytest

from mha_course.check import masks as check_masks
from mha_course.check import positions as check_positions


def run(capsys, checker, fn):
    """(result, printed text) of check.<checker>(fn) (looked up in its own module)."""
    ok = getattr(check_positions if hasattr(check_positions, checker) else check_masks, checker)(fn)
    return ok, capsys.readouterr().out


# ---------------------------------------------------------------- sinusoidal positions
def sinusoids(T, d_model, swap=False, exponent=2, start=0, concat=False):
    pos = np.arange(start, T + start)[:, None]
    i = np.arange(0, d_model, 2) // 2
    angle = pos / np.power(10000, exponent * i / d_model)
    s, c = (np.cos(angle), np.sin(angle)) if swap else (np.sin(angle), np.cos(angle))
    if concat:
        return np.concatenate([s, c], axis=1)
    pe = np.zeros((T, d_model))
    pe[:, 0::2] = s
    pe[:, 1::2] = c
    return pe


@pytest.mark.parametrize("kwargs, named", [
    ({"swap": True}, "sine and cosine swapped"),
    ({"exponent": 1}, "off by a factor of 2"),
    ({"start": 1}, "positions start at 1"),
    ({"concat": True}, "concatenated halves"),
])
def test_sinusoidal_positions_names_each_typical_mistake(capsys, kwargs, named):
    ok, out = run(capsys, "sinusoidal_positions", lambda T, d_model: sinusoids(T, d_model, **kwargs))
    assert not ok and named in out


def test_sinusoidal_positions_solution_passes_and_stub_is_unfinished(capsys):
    ok, out = run(capsys, "sinusoidal_positions", sinusoids)
    assert ok and "✔" in out

    def stub(T, d_model):
        raise NotImplementedError
    ok, out = run(capsys, "sinusoidal_positions", stub)
    assert not ok and "not finished" in out


# ---------------------------------------------------------------- RoPE
def rope(x, positions, base=10000.0, halves=False, exponent=2.0, shift=0, sign=1.0):
    d_k = x.shape[-1]
    theta = base ** (-exponent * np.arange(d_k // 2) / d_k)
    angle = sign * (np.asarray(positions)[:, None] + shift) * theta
    cos, sin = np.cos(angle), np.sin(angle)
    if halves:
        a, b = x[..., : d_k // 2], x[..., d_k // 2:]
    else:
        a, b = x[..., 0::2], x[..., 1::2]
    ra, rb = a * cos - b * sin, a * sin + b * cos
    out = np.empty_like(x)
    if halves:
        out[..., : d_k // 2], out[..., d_k // 2:] = ra, rb
    else:
        out[..., 0::2], out[..., 1::2] = ra, rb
    return out


@pytest.mark.parametrize("kwargs, named", [
    ({"halves": True}, "halves layout"),
    ({"exponent": 1.0}, "off by a factor of 2"),
    ({"shift": 1}, "positions start at 1"),
    ({"sign": -1.0}, "wrong way round"),
])
def test_apply_rope_names_each_typical_mistake(capsys, kwargs, named):
    ok, out = run(capsys, "apply_rope", lambda x, positions, base=10000.0: rope(x, positions, base, **kwargs))
    assert not ok and named in out


def test_apply_rope_solution_passes(capsys):
    ok, out = run(capsys, "apply_rope", rope)
    assert ok, out


# ---------------------------------------------------------------- mask_as
def mask_as(mask, convention, flip_block=False, flip_additive=False, ones=False, finite=False):
    mask = np.asarray(mask, dtype=bool)
    if convention == "keep":
        return mask.copy()
    if convention == "block":
        return mask.copy() if flip_block else ~mask
    if ones:
        return mask.astype(float)
    blocked = -1e9 if finite else -np.inf
    return np.where(mask, blocked, 0.0) if flip_additive else np.where(mask, 0.0, blocked)


@pytest.mark.parametrize("kwargs, named", [
    ({"flip_block": True}, "'block' returns the keep-mask unchanged"),
    ({"flip_additive": True}, "polarity flipped"),
    ({"ones": True}, "1.0 / 0.0"),
    ({"finite": True}, "-1e9"),
])
def test_mask_as_names_each_typical_mistake(capsys, kwargs, named):
    ok, out = run(capsys, "mask_as", lambda m, c: mask_as(m, c, **kwargs))
    assert not ok and named in out


def test_mask_as_solution_passes(capsys):
    assert run(capsys, "mask_as", mask_as)[0]


# ---------------------------------------------------------------- causal self-attention + leak probe
def causal_self_attention(x, k=0, no_mask=False, flipped=False, after=False):
    T, d = x.shape[-2], x.shape[-1]
    scores = x @ np.swapaxes(x, -1, -2) / np.sqrt(d)
    keep = np.triu(np.ones((T, T), bool), 1) if flipped else np.tril(np.ones((T, T), bool), k)
    if not no_mask and not after:
        scores = np.where(keep, scores, -np.inf)
    m = scores.max(-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(m), m, 0))
    total = e.sum(-1, keepdims=True)
    w = e / np.where(total == 0, 1, total)
    if after:
        w = w * keep
    return w @ x


@pytest.mark.parametrize("kwargs, named, leak", [
    ({"no_mask": True}, "no mask", "output 0 moved when token 1 changed"),
    ({"flipped": True}, "polarity is flipped", "output 0 moved when token 1 changed"),
    ({"k": 1}, "off by one", "output 0 moved when token 1 changed"),
    ({"k": -1}, "diagonal is masked too", "no leak"),
    ({"after": True}, "after the softmax", "output 0 moved when token 1 changed"),  # via the row sums
])
def test_causal_self_attention_names_the_mistake_and_the_probe_shows_the_leak(capsys, kwargs, named, leak):
    ok, out = run(capsys, "causal_self_attention", lambda x: causal_self_attention(x, **kwargs))
    assert not ok and named in out and leak in out


def test_causal_self_attention_solution_passes_and_a_stub_is_unfinished(capsys):
    assert run(capsys, "causal_self_attention", causal_self_attention)[0]

    def stub(x):
        raise NotImplementedError
    ok, out = run(capsys, "causal_self_attention", stub)
    assert not ok and "not finished" in out and "leak probe" not in out


# ---------------------------------------------------------------- document mask
def document_mask(doc_ids, causal=False, ignore_causal=False, always_causal=False, no_docs=False, ge=False):
    ids = np.asarray(doc_ids)
    T = len(ids)
    if no_docs:
        same = np.ones((T, T), dtype=bool)
    else:
        same = ids[:, None] >= ids[None, :] if ge else ids[:, None] == ids[None, :]
    if (causal and not ignore_causal) or always_causal:
        same = same & np.tril(np.ones((T, T), dtype=bool))
    return same


@pytest.mark.parametrize("kwargs, named", [
    ({"ignore_causal": True}, "causal=True is ignored"),
    ({"always_causal": True}, "always causal"),
    ({"no_docs": True}, "not separated"),
    ({"ge": True}, "compared with >="),
])
def test_document_mask_names_each_typical_mistake(capsys, kwargs, named):
    ok, out = run(capsys, "document_mask", lambda ids, causal=False: document_mask(ids, causal, **kwargs))
    assert not ok and named in out


def test_document_mask_solution_passes(capsys):
    assert run(capsys, "document_mask", document_mask)[0]


# ---------------------------------------------------------------- RoPE scores
def rope_scores(Q, K, base=10000.0, only_q=False, only_k=False, unscaled=False, halves=False):
    T, S, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]
    q = Q if only_k else rope(Q, np.arange(T), base, halves=halves)
    k = K if only_q else rope(K, np.arange(S), base, halves=halves)
    s = q @ np.swapaxes(k, -1, -2)
    return s if unscaled else s / np.sqrt(d_k)


@pytest.mark.parametrize("kwargs, named", [
    ({"only_q": True}, "only the queries are rotated"),
    ({"only_k": True}, "only the keys are rotated"),
    ({"unscaled": True}, "not divided by sqrt(d_k)"),
    ({"halves": True}, "halves layout"),
])
def test_rope_scores_names_each_typical_mistake(capsys, kwargs, named):
    ok, out = run(capsys, "rope_scores", lambda Q, K, base=10000.0: rope_scores(Q, K, base, **kwargs))
    assert not ok and named in out


def test_rope_scores_solution_passes_even_with_positions_shifted_by_one(capsys):
    """Shifting every position by the same amount changes nothing: the score is relative."""
    def shifted(Q, K, base=10000.0):
        q = rope(Q, np.arange(Q.shape[-2]) + 1, base)
        k = rope(K, np.arange(K.shape[-2]) + 1, base)
        return q @ np.swapaxes(k, -1, -2) / np.sqrt(Q.shape[-1])
    assert run(capsys, "rope_scores", rope_scores)[0]
    assert run(capsys, "rope_scores", shifted)[0]
