"""The checkers of notebook 10 (Exercises 10.1-10.4): right answers written in a learner's own words
pass, each catalogued mistake written as a learner writes it is named as itself, and mistakes the
catalogue does not know get a message in the exercise's terms (never "accepted")."""
import math

import numpy as np
import pytest

import mha_course as mc
from mha_course.check import efficient as ce

from .verdicts import catalogue, named_as_itself


def run(capsys, checker, fn):
    ok = getattr(ce, checker)(fn)
    return ok, capsys.readouterr().out


def named(out, mistake):
    return f"Looks like: {mistake.name}. Fix: {mistake.fix}" in out


# ----------------------------------------------------------------------------- 10.1 online softmax update
def update_a(state, scores_block, V_block):          # the fields by name, np.where guard
    m_new = np.maximum(state.m, scores_block.max(-1, keepdims=True))
    ref = np.where(np.isinf(m_new), 0.0, m_new)
    p = np.exp(scores_block - ref)
    a = np.exp(state.m - ref)
    return m_new, a * state.l + p.sum(-1, keepdims=True), a * state.acc + p @ V_block


def update_b(state, scores_block, V_block):          # a loop over rows, math.exp
    m, l, acc = (np.array(x, dtype=float) for x in state)
    T = scores_block.shape[0]
    m2, l2, acc2 = m.copy(), l.copy(), acc.copy()
    for t in range(T):
        new = max(m[t, 0], scores_block[t].max())
        if new == -math.inf:
            continue
        alpha = math.exp(m[t, 0] - new)
        p = np.exp(scores_block[t] - new)
        m2[t, 0], l2[t, 0], acc2[t] = new, alpha * l[t, 0] + p.sum(), alpha * acc[t] + p @ V_block
    return mc.SoftmaxState(m2, l2, acc2) if hasattr(mc, "SoftmaxState") else (m2, l2, acc2)


def update_c(state, scores_block, V_block):          # errstate + nan_to_num instead of a guard
    m, l, acc = state
    m_new = np.fmax(m, np.max(scores_block, axis=1)[:, None])
    with np.errstate(invalid="ignore"):
        alpha = np.nan_to_num(np.exp(m - m_new))
        p = np.nan_to_num(np.exp(scores_block - m_new))
    return [m_new, l * alpha + np.sum(p, axis=1, keepdims=True), acc * alpha + np.einsum("tc,cd->td", p, V_block)]


def update_d(state, scores_block, V_block):          # the package's own update
    return mc.online_softmax_update(state, scores_block, V_block)


@pytest.mark.parametrize("fn", [update_a, update_b, update_c, update_d])
def test_update_variants_pass(capsys, fn):
    ok, out = run(capsys, "online_softmax_update", fn)
    assert ok, out


def update_block_max_only(state, scores_block, V_block):
    m, l, acc = state
    m_new = scores_block.max(axis=-1, keepdims=True)              # forgot the running max
    shift = np.where(np.isneginf(m_new), 0, m_new)
    p, alpha = np.exp(scores_block - shift), np.exp(m - shift)
    return m_new, alpha * l + p.sum(-1, keepdims=True), alpha * acc + p @ V_block


def update_inverted(state, scores_block, V_block):
    m, l, acc = state
    m_new = np.maximum(m, scores_block.max(axis=-1, keepdims=True))
    shift = np.where(np.isneginf(m_new), 0, m_new)
    p, alpha = np.exp(scores_block - shift), np.exp(shift - m)    # upside down
    return m_new, alpha * l + p.sum(-1, keepdims=True), alpha * acc + p @ V_block


def update_normalised(state, scores_block, V_block):
    m, l, acc = state
    m_new = np.maximum(m, scores_block.max(axis=-1, keepdims=True))
    shift = np.where(np.isneginf(m_new), 0, m_new)
    p, alpha = np.exp(scores_block - shift), np.exp(m - shift)
    l_new = alpha * l + p.sum(-1, keepdims=True)
    out = (alpha * acc + p @ V_block) / np.where(l_new == 0, 1, l_new)   # normalised inside
    return m_new, l_new, out


@pytest.mark.parametrize("fn, index", [(update_block_max_only, 6), (update_inverted, 3), (update_normalised, 9)])
def test_update_learner_mistakes_are_named(capsys, fn, index):
    ok, out = run(capsys, "online_softmax_update", fn)
    assert not ok and named(out, ce.ONLINE_SOFTMAX_UPDATE.mistakes[index]), out


def test_a_block_below_the_running_max_is_a_case():
    """The block-max-only mistake needs a case whose block max is below the running max."""
    lower = [c for c in ce.ONLINE_SOFTMAX_UPDATE.cases()
             if np.all(c.args[1].max(-1, keepdims=True) < c.args[0].m)]
    assert lower


# ----------------------------------------------------------------------------- 10.2 the tiled loop
def tiled_a(Q, K, V, block_size):                   # the package's update and result
    state = mc.online_softmax_start(Q.shape[0], V.shape[1])
    for c in range(0, K.shape[0], block_size):
        s = Q @ K[c:c + block_size].T / np.sqrt(Q.shape[1])
        state = mc.online_softmax_update(state, s, V[c:c + block_size])
    return mc.online_softmax_result(state)


def tiled_b(Q, K, V, block_size):                   # the update written inline, the blocks by count
    T, d = Q.shape
    m, l, acc = np.full((T, 1), -np.inf), np.zeros((T, 1)), np.zeros((T, V.shape[1]))
    n_blocks = math.ceil(K.shape[0] / block_size)
    for i in range(n_blocks):
        k, v = K[i * block_size:(i + 1) * block_size], V[i * block_size:(i + 1) * block_size]
        s = (Q / math.sqrt(d)) @ k.T
        m_new = np.maximum(m, s.max(1, keepdims=True))
        p, alpha = np.exp(s - m_new), np.exp(m - m_new)
        m, l, acc = m_new, alpha * l + p.sum(1, keepdims=True), alpha * acc + p @ v
    return acc / l


def tiled_c(Q, K, V, block_size):                   # blocks from np.array_split, einsum
    n = -(-K.shape[0] // block_size)
    state = mc.online_softmax_start(len(Q), V.shape[-1])
    for k, v in zip(np.array_split(K, np.cumsum([block_size] * (n - 1))),
                    np.array_split(V, np.cumsum([block_size] * (n - 1)))):
        state = mc.online_softmax_update(state, np.einsum("td,sd->ts", Q, k) * Q.shape[-1] ** -0.5, v)
    return state.acc / state.l


def tiled_d(Q, K, V, block_size):                   # the package's kernel
    return mc.tiled_attention(Q, K, V, block_size=block_size)


@pytest.mark.parametrize("fn", [tiled_a, tiled_b, tiled_c, tiled_d])
def test_tiled_variants_pass(capsys, fn):
    ok, out = run(capsys, "tiled_attention", fn)
    assert ok, out


def tiled_no_divide(Q, K, V, block_size):
    state = mc.online_softmax_start(Q.shape[0], V.shape[1])
    for c in range(0, K.shape[0], block_size):
        state = mc.online_softmax_update(state, Q @ K[c:c + block_size].T / np.sqrt(Q.shape[1]), V[c:c + block_size])
    return state.acc


def tiled_tail_dropped(Q, K, V, block_size):
    state = mc.online_softmax_start(Q.shape[0], V.shape[1])
    for i in range(K.shape[0] // block_size):
        k, v = K[i * block_size:(i + 1) * block_size], V[i * block_size:(i + 1) * block_size]
        state = mc.online_softmax_update(state, Q @ k.T / np.sqrt(Q.shape[1]), v)
    return mc.online_softmax_result(state)


def tiled_full_scores(Q, K, V, block_size):         # right numbers, but the whole T x S matrix
    S = Q @ K.T / np.sqrt(Q.shape[1])
    state = mc.online_softmax_start(Q.shape[0], V.shape[1])
    for c in range(0, K.shape[0], block_size):
        state = mc.online_softmax_update(state, S[:, c:c + block_size], V[c:c + block_size])
    return mc.online_softmax_result(state)


@pytest.mark.parametrize("fn, index", [(tiled_no_divide, 0), (tiled_tail_dropped, 1)])
def test_tiled_learner_mistakes_are_named(capsys, fn, index):
    ok, out = run(capsys, "tiled_attention", fn)
    assert not ok and named(out, ce.TILED_ATTENTION.mistakes[index]), out


def test_tiled_with_the_whole_score_matrix_is_named_by_its_memory(capsys):
    ok, out = run(capsys, "tiled_attention", tiled_full_scores)
    assert not ok and named(out, ce.TILED_ATTENTION.mistakes[-1]) and "MiB" in out, out


# ----------------------------------------------------------------------------- 10.3 sliding window
@pytest.mark.parametrize("fn", [
    lambda T, window: np.tril(np.triu(np.ones((T, T), dtype=bool), -(window - 1))),
    lambda T, window: np.array([[t - window < s <= t for s in range(T)] for t in range(T)]),
    lambda T, window: (np.subtract.outer(np.arange(T), np.arange(T)) >= 0)
    & (np.subtract.outer(np.arange(T), np.arange(T)) < window),
    lambda T, window: mc.causal_mask(T) & ~np.tril(np.ones((T, T), bool), -window),
])
def test_window_variants_pass(capsys, fn):
    ok, out = run(capsys, "sliding_window_mask", fn)
    assert ok, out


@pytest.mark.parametrize("fn, index", [
    (lambda T, w: np.array([[abs(t - s) < w for s in range(T)] for t in range(T)]), 2),
    (lambda T, w: np.array([[t - w < s for s in range(T)] for t in range(T)]), 5),
    (lambda T, w: np.array([[t - w < s < t for s in range(T)] for t in range(T)]), 6),
    (lambda T, w: np.array([[t - w <= s < t for s in range(T)] for t in range(T)]), 7),
])
def test_window_learner_mistakes_are_named(capsys, fn, index):
    ok, out = run(capsys, "sliding_window_mask", fn)
    assert not ok and named(out, ce.SLIDING_WINDOW_MASK.mistakes[index]), out


# ----------------------------------------------------------------------------- 10.4 linear attention
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(x))


@pytest.mark.parametrize("fn", [
    lambda Q, K, V: (phi(Q) @ (phi(K).swapaxes(-1, -2) @ V)) / (phi(Q) @ phi(K).sum(-2, keepdims=True).swapaxes(-1, -2)),
    lambda Q, K, V: np.einsum("...td,...de->...te", phi(Q), np.einsum("...sd,...se->...de", phi(K), V))
    / np.einsum("...td,...d->...t", phi(Q), phi(K).sum(-2))[..., None],
    lambda Q, K, V: mc.linear_attention(Q, K, V),
    lambda Q, K, V: (lambda fq, fk: (fq @ np.swapaxes(fk, -1, -2) @ V if False else fq @ (np.swapaxes(fk, -1, -2) @ V))
                     / (fq * fk.sum(-2)[..., None, :]).sum(-1, keepdims=True))(mc.elu_feature_map(Q),
                                                                              mc.elu_feature_map(K)),
])
def test_linear_variants_pass(capsys, fn):
    ok, out = run(capsys, "linear_attention", fn)
    assert ok, out


@pytest.mark.parametrize("fn, index", [
    (lambda Q, K, V: (np.maximum(Q, 0) @ (np.maximum(K, 0).swapaxes(-1, -2) @ V))
     / (np.maximum(Q, 0) @ np.maximum(K, 0).sum(-2)[..., None]), 3),
    (lambda Q, K, V: (phi(Q) @ (phi(K).swapaxes(-1, -2) @ phi(V))) / (phi(Q) @ phi(K).sum(-2)[..., None]), 7),
])
def test_linear_learner_mistakes_are_named(capsys, fn, index):
    ok, out = run(capsys, "linear_attention", fn)
    assert not ok and named(out, ce.LINEAR_ATTENTION.mistakes[index]), out


def test_linear_quadratic_form_is_right_but_reported(capsys):
    ok, out = run(capsys, "linear_attention", lambda Q, K, V: mc.linear_attention_quadratic(Q, K, V))
    assert not ok and named(out, ce.LINEAR_ATTENTION.mistakes[-1]) and "MiB" in out, out


def test_the_memory_probe_runs_under_the_time_limit(capsys, monkeypatch):
    from mha_course.check import engine
    monkeypatch.setattr(engine, "TIME_LIMIT", 0.5)

    def endless(Q, K, V):
        while True:
            pass
    ok, out = run(capsys, "linear_attention", endless)
    assert not ok and "did not finish" in out, out


# ----------------------------------------------------------------------------- every catalogued mistake
EXERCISES, PAIRS = catalogue(ce.ONLINE_SOFTMAX_UPDATE, ce.TILED_ATTENTION, ce.SLIDING_WINDOW_MASK,
                                 ce.LINEAR_ATTENTION)


@pytest.mark.parametrize("name, i", PAIRS, ids=[f"{n}-{i}" for n, i in PAIRS])
def test_each_catalogued_mistake_is_named_as_itself(capsys, name, i):
    named_as_itself(capsys, EXERCISES[name], i, check=getattr(ce, name))


# ----------------------------------------------------------------------------- rule (c): not catalogued
UNKNOWN = [
    ("online_softmax_update", lambda st, s, V: (lambda r: (r.m, r.l * 2, r.acc))(mc.online_softmax_update(st, s, V))),
    ("online_softmax_update", lambda st, s, V: (lambda r: (r.m, r.l, -r.acc))(mc.online_softmax_update(st, s, V))),
    ("tiled_attention", lambda Q, K, V, b: 0.5 * mc.tiled_attention(Q, K, V, block_size=b)),
    ("tiled_attention", lambda Q, K, V, b: np.zeros((Q.shape[0], V.shape[1]))),
    ("sliding_window_mask", lambda T, w: np.ones((T, T), dtype=bool)),
    ("sliding_window_mask", lambda T, w: mc.sliding_window_mask(T, w + 2)),
    ("linear_attention", lambda Q, K, V: 2 * mc.linear_attention(Q, K, V)),
    ("linear_attention", lambda Q, K, V: mc.linear_attention(Q, K, V)[..., ::-1, :]),
]


@pytest.mark.parametrize("name, fn", UNKNOWN, ids=[f"{n}-{i}" for i, (n, _) in enumerate(UNKNOWN)])
def test_an_uncatalogued_mistake_is_refused_with_a_located_message(capsys, name, fn):
    ok, out = run(capsys, name, fn)
    assert not ok and "Looks like" not in out, out
    assert "case" in out and ("differ" in out or "expected" in out), out


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def test_an_inverted_rescale_with_its_infinities_zeroed_is_named(capsys):
    def learner(state, s, V):
        m_new = np.maximum(state.m, s.max(-1, keepdims=True))
        shift = np.where(np.isfinite(m_new), m_new, 0.0)
        alpha = np.exp(shift - state.m)  # upside down
        alpha[~np.isfinite(alpha)] = 0.0
        p = np.exp(s - shift)
        return mc.SoftmaxState(m_new, alpha * state.l + p.sum(-1, keepdims=True), alpha * state.acc + p @ V)
    _says(capsys, _check.online_softmax_update, learner, "the rescale factor is upside down: exp(m' - m) "
          "instead of exp(m - m') (its infinities set to 0)")


@pytest.mark.parametrize("stop, scale, said", [
    (lambda S, b: max(S - b, 1), lambda Q, K: math.sqrt(Q.shape[-1]), "the last block of keys is left out"),
    (lambda S, b: S, lambda Q, K: math.sqrt(len(K)), "the tile of scores divided by √S"),
])
def test_tiled_loop_slips_are_named(capsys, stop, scale, said):
    def learner(Q, K, V, block_size):
        state = mc.online_softmax_start(Q.shape[0], V.shape[-1])
        for c in range(0, stop(len(K), block_size), block_size):
            state = mc.online_softmax_update(state, Q @ K[c:c + block_size].T / scale(Q, K), V[c:c + block_size])
        return mc.online_softmax_result(state)
    _says(capsys, _check.tiled_attention, learner, said)


def test_window_slips_are_named(capsys):
    def first_keys(T, window):
        rows, cols = np.indices((T, T))
        return (cols <= rows) & (cols < window)
    _says(capsys, _check.sliding_window_mask, first_keys, "the window holds the FIRST `window` keys")

    def subtracted(T, window):
        causal = np.tril(np.ones((T, T), dtype=bool))
        return causal - np.tril(causal, -window)  # TypeError on booleans
    _says(capsys, _check.sliding_window_mask, subtracted, "two boolean masks subtracted with `-`")


def _phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0)))


@pytest.mark.parametrize("fq, fk, said", [
    (_phi, lambda k: k, "the feature map applied to Q only"),
    (lambda q: q, _phi, "the feature map applied to K only"),
    (lambda q: np.clip(q, 0, None) + 1e-6, lambda k: np.clip(k, 0, None) + 1e-6, "ReLU features kept positive"),
    (lambda q: _phi(q * q.shape[-1] ** -0.25), lambda k: _phi(k * k.shape[-1] ** -0.25),
     "softmax's 1/sqrt(d_k) split over Q and K"),
])
def test_feature_map_slips_are_named(capsys, fq, fk, said):
    def learner(Q, K, V):
        q, k = fq(Q), fk(K)
        kv = np.einsum("...sd,...se->...de", k, V)
        return np.einsum("...td,...de->...te", q, kv) / np.einsum("...td,...d->...t", q, k.sum(-2))[..., None]
    _says(capsys, _check.linear_attention, learner, said)
