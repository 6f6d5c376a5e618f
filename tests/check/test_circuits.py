"""The checkers of notebook 14 (prefix_matching_score, composition_score, patched_heads, copying_score): right
answers written in other ways pass, each typical mistake, typed the way a learner writes it, is named as
itself and as no other, and a stub is "not finished".
"""
import numpy as np
import pytest

from mha_course import check


def run(capsys, name, fn):
    ok = getattr(check, name)(fn)
    return ok, capsys.readouterr().out


# ---------------------------------------------------------------- right answers, written differently
def prefix_loops(weights, tokens):
    B, h, T, _ = weights.shape
    total, count = np.zeros(h), 0
    for b in range(B):
        for t in range(T):
            earlier = [s for s in range(t) if tokens[b, s] == tokens[b, t]]
            if earlier:
                total += sum(weights[b, :, t, s + 1] for s in earlier)
                count += 1
    return total / count


def prefix_per_sequence(weights, tokens):
    """Mean per sequence, then over the batch: wrong when the sequences repeat different numbers of tokens."""
    scores = []
    for w, tok in zip(weights, tokens):
        T = len(tok)
        same = (tok[:, None] == tok[None, :]) & (np.arange(T)[None, :] < np.arange(T)[:, None])
        target = np.roll(same, 1, axis=1)
        target[:, 0] = False
        rows = same.any(1)
        scores.append((w * target).sum(-1)[:, rows].mean(-1))
    return np.mean(scores, axis=0)


def composition_einsum(W_A, W_B):
    P = np.einsum("ij,jk->ik", W_A, W_B)
    return float(np.sqrt((P ** 2).sum() / ((W_A ** 2).sum() * (W_B ** 2).sum())))


def composition_trace(W_A, W_B):
    P = W_A @ W_B
    return np.sqrt(np.trace(P.T @ P)) / np.sqrt(np.trace(W_A.T @ W_A) * np.trace(W_B.T @ W_B))


def patched_where(corrupt, clean, head):
    pick = (np.arange(corrupt.shape[1]) == head)[None, :, None, None]
    return np.where(pick, clean, corrupt)


def patched_concat(corrupt, clean, head):
    return np.concatenate([corrupt[:, :head], clean[:, head:head + 1], corrupt[:, head + 1:]], axis=1)


def copying_trace(W):
    lam = np.linalg.eigvals(W)
    return float(np.trace(W) / np.abs(lam).sum())  # the trace is the sum of the eigenvalues


@pytest.mark.parametrize("name, fn", [
    ("prefix_matching_score", prefix_loops),
    ("composition_score", composition_einsum),
    ("composition_score", composition_trace),
    ("patched_heads", patched_where),
    ("patched_heads", patched_concat),
    ("copying_score", copying_trace),
])
def test_right_answers_written_differently_pass(capsys, name, fn):
    ok, out = run(capsys, name, fn)
    assert ok, out


# ---------------------------------------------------------------- typical mistakes, as a learner types them
def prefix_off_by_one(weights, tokens):  # sums over the earlier occurrences s, not s + 1
    B, h, T, _ = weights.shape
    total, count = np.zeros(h), 0
    for b in range(B):
        for t in range(T):
            earlier = [s for s in range(t) if tokens[b, s] == tokens[b, t]]
            if earlier:
                total += sum(weights[b, :, t, s] for s in earlier)
                count += 1
    return total / count


def prefix_every_query(weights, tokens):
    B, h, T, _ = weights.shape
    total = np.zeros(h)
    for b in range(B):
        for t in range(T):
            total += sum(weights[b, :, t, s + 1] for s in range(t) if tokens[b, s] == tokens[b, t])
    return total / (B * T)


def prefix_before(weights, tokens):
    B, h, T, _ = weights.shape
    total, count = np.zeros(h), 0
    for b in range(B):
        for t in range(T):
            earlier = [s for s in range(t) if tokens[b, s] == tokens[b, t]]
            if earlier:
                total += sum(weights[b, :, t, s - 1] if s > 0 else 0 for s in earlier)
                count += 1
    return total / count


def prefix_one_occurrence(weights, tokens, last=False):
    """Only the first (or last) earlier occurrence of the query's token: wrong when it occurs 3+ times."""
    B, h, T, _ = weights.shape
    total, count = np.zeros(h), 0
    for b in range(B):
        for t in range(T):
            earlier = [s for s in range(t) if tokens[b, s] == tokens[b, t]]
            if earlier:
                s = earlier[-1] if last else earlier[0]
                total += weights[b, :, t, s + 1]
                count += 1
    return total / count


def composition_no_norms(W_A, W_B):
    return float(np.linalg.norm(W_A @ W_B))


def composition_wrong_order(W_A, W_B):
    return float(np.linalg.norm(W_B @ W_A) / (np.linalg.norm(W_A) * np.linalg.norm(W_B)))


def composition_spectral(W_A, W_B):
    return float(np.linalg.norm(W_A @ W_B, ord=2) / (np.linalg.norm(W_A, ord=2) * np.linalg.norm(W_B, ord=2)))


def patched_backwards(corrupt, clean, head):  # patches corrupted activations into the clean run
    out = clean.copy()
    out[:, head] = corrupt[:, head]
    return out


def patched_positions(corrupt, clean, head):
    out = corrupt.copy()
    out[:, :, head] = clean[:, :, head]
    return out


def patched_added(corrupt, clean, head):
    out = corrupt.copy()
    out[:, head] += clean[:, head]
    return out


def copying_svd(W):
    s = np.linalg.svd(W, compute_uv=False)
    return float(s.sum() / np.abs(s).sum())


def copying_abs_numerator(W):
    lam = np.linalg.eigvals(W)
    return float(np.abs(lam).sum() / np.abs(lam).sum())


def copying_nuclear(W):
    return float(np.linalg.eigvals(W).sum().real / np.linalg.norm(W, "nuc"))


def copying_symmetric(W):
    lam = np.linalg.eigh(W)[0]
    return float(lam.sum() / np.abs(lam).sum())


@pytest.mark.parametrize("name, fn, named", [
    ("prefix_matching_score", prefix_off_by_one, "off by one: the attention on the earlier occurrences themselves"),
    ("prefix_matching_score", prefix_every_query, "averaged over every query"),
    ("prefix_matching_score", prefix_before, "off by one the other way"),
    ("prefix_matching_score", prefix_per_sequence, "the mean of per-sequence means"),
    ("prefix_matching_score", prefix_one_occurrence, "only the FIRST earlier occurrence"),
    ("prefix_matching_score", lambda w, t: prefix_one_occurrence(w, t, last=True), "only the LAST earlier occurrence"),
    ("composition_score", composition_no_norms, "the composition score without the norms"),
    ("composition_score", composition_wrong_order, "the product in the wrong order"),
    ("composition_score", composition_spectral, "spectral norms"),
    ("patched_heads", patched_backwards, "patching the wrong direction"),
    ("patched_heads", patched_positions, "on the positions axis"),
    ("patched_heads", patched_added, "added to the corrupted one"),
    ("copying_score", copying_svd, "a numerator without signs"),
    ("copying_score", copying_abs_numerator, "a numerator without signs"),
    ("copying_score", copying_nuclear, "singular values in the denominator"),
    ("copying_score", copying_symmetric, "np.linalg.eigvalsh"),
])
def test_each_typical_mistake_is_named_as_itself_only(capsys, name, fn, named):
    ok, out = run(capsys, name, fn)
    assert not ok and named in out, out
    mistakes = check.catalogue()[name].mistakes
    assert not any(m.name in out for m in mistakes if named not in m.name), out


@pytest.mark.parametrize("name", ["prefix_matching_score", "composition_score", "patched_heads", "copying_score"])
def test_a_stub_is_not_finished(capsys, name):
    def stub(*args):
        raise NotImplementedError("Exercise 14")
    ok, out = run(capsys, name, stub)
    assert not ok and "not finished" in out


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def _prefix_loop(weights, tokens, *, itself=False, transpose=False, first_row=False):
    """A loop over batch, query and earlier key, with one slip at a time."""
    B, h, T, _ = weights.shape
    total, n = np.zeros(h), 0
    for b in range(B):
        toks = tokens[0] if first_row else tokens[b]
        for t in range(T):
            earlier = [s for s in range(t + 1 if itself else t) if toks[s] == toks[t]]
            if not earlier:
                continue
            keys = [s + 1 for s in earlier if s + 1 < T]
            w = weights[b, :, keys, t] if transpose else weights[b, :, t, keys]
            total, n = total + (w.sum(0) if keys else 0.0), n + 1
    return total / n


@pytest.mark.parametrize("how, said", [
    (dict(itself=True), "the query counted as its own earlier occurrence (s <= t"),
    (dict(transpose=True), "the weights read as (key, query)"),
    (dict(first_row=True), "the first sequence's tokens used for every sequence"),
])
def test_prefix_matching_slips_are_named(capsys, how, said):
    _says(capsys, _check.prefix_matching_score, lambda w, t: _prefix_loop(w, t, **how), said)


@pytest.mark.parametrize("fn, said", [
    (lambda a, b: float(np.sqrt(((a @ b) ** 2).sum()) / (np.sqrt((a ** 2).sum()) + np.sqrt((b ** 2).sum()))),
     "the sum of the norms in the denominator"),
    (lambda a, b: float(np.linalg.svd(a @ b, compute_uv=False).sum()
                        / (np.linalg.svd(a, compute_uv=False).sum() * np.linalg.svd(b, compute_uv=False).sum())),
     "nuclear norms"),
    (lambda a, b: float(np.linalg.norm(np.multiply(a, b)) / np.linalg.norm(a) / np.linalg.norm(b)),
     "the elementwise product W_A * W_B"),
])
def test_composition_slips_are_named(capsys, fn, said):
    _says(capsys, _check.composition_score, fn, said)


@pytest.mark.parametrize("fn, said", [
    (lambda corrupt, clean, head: clean[:, head].copy(), "only the patched head's outputs returned"),
    (lambda corrupt, clean, head: np.where((np.arange(corrupt.shape[1]) == (head + 1) % corrupt.shape[1])
                                           [None, :, None, None], clean, corrupt), "head + 1 patched"),
])
def test_patching_slips_are_named(capsys, fn, said):
    _says(capsys, _check.patched_heads, fn, said)
