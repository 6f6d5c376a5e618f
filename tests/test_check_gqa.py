"""The checkers of notebook 09 (kv_append, offset_causal_mask, kv_bytes_per_token): the notebook's
solution passes, each typical mistake is rejected AND named, a stub is "not finished".

The solutions and the wrong answers are typed here the way a learner writes them.
"""
import numpy as np
import pytest

from mha_course import check


def run(capsys, checker, fn):
    ok = getattr(check, checker)(fn)
    return ok, capsys.readouterr().out


# ---------------------------------------------------------------- the cache append
def append(K_cache, V_cache, K_new, V_new, axis=2, prepend=False, forget=False, swap=False):
    if forget:
        return K_new, V_new
    pairs = [(K_new, K_cache), (V_new, V_cache)] if prepend else [(K_cache, K_new), (V_cache, V_new)]
    K_all, V_all = (np.concatenate(p, axis=axis) for p in pairs)
    return (V_all, K_all) if swap else (K_all, V_all)


@pytest.mark.parametrize("kwargs, named", [
    ({"prepend": True}, "put before the cached ones"),
    ({"axis": 1}, "along the head axis"),
    ({"axis": -1}, "along the feature axis"),
    ({"forget": True}, "the cache is forgotten"),
    ({"swap": True}, "keys and values swapped"),
])
def test_kv_append_names_each_typical_mistake(capsys, kwargs, named):
    ok, out = run(capsys, "kv_append", lambda Kc, Vc, K, V: append(Kc, Vc, K, V, **kwargs))
    assert not ok and named in out


def test_kv_append_solution_passes(capsys):
    ok, out = run(capsys, "kv_append", append)
    assert ok and "✔" in out


def test_kv_append_in_place_write_into_a_buffer_is_reported(capsys):
    """A learner who writes into the cached arrays is told the course's functions are pure."""
    def in_place(K_cache, V_cache, K_new, V_new):
        K_cache[...] = 0
        return append(K_cache, V_cache, K_new, V_new)
    ok, out = run(capsys, "kv_append", in_place)
    assert not ok and "in place" in out


# ---------------------------------------------------------------- the offset mask
def offset_mask(T, offset, k=None, square=False, as_int=False):
    S = T if square else offset + T
    m = np.tril(np.ones((T, S), dtype=bool), k=offset if k is None else k)
    return m.astype(int) if as_int else m


MASK_MISTAKES = [
    (lambda T, offset: offset_mask(T, offset, k=0), "not offset by the cache length"),
    (lambda T, offset: offset_mask(T, offset, k=offset - 1), "the diagonal is missing"),
    (lambda T, offset: offset_mask(T, offset, k=0, square=True), "a square (T, T) causal mask"),
    (lambda T, offset: np.ones((T, offset + T), dtype=bool), "everything allowed"),
    (lambda T, offset: ~offset_mask(T, offset), "True and False swapped"),
]


def test_offset_causal_mask_solution_passes_and_ints_are_refused(capsys):
    ok, out = run(capsys, "offset_causal_mask", offset_mask)
    assert ok and "✔" in out
    ok, out = run(capsys, "offset_causal_mask", lambda T, offset: offset_mask(T, offset, as_int=True))
    assert not ok


# ---------------------------------------------------------------- bytes per token
def kv_bytes(layers, h, h_kv, d_k, bytes_per_number):
    return 2 * layers * h_kv * d_k * bytes_per_number


BYTES_MISTAKES = [
    (lambda L, h, kv, d, b: L * kv * d * b, "only the keys are counted"),
    (lambda L, h, kv, d, b: 2 * L * h * d * b, "h (query heads) instead of h_kv"),
    (lambda L, h, kv, d, b: 2 * kv * d * b, "layers forgotten"),
    (lambda L, h, kv, d, b: 2 * L * kv * d, "numbers counted, not bytes"),
    (lambda L, h, kv, d, b: 2 * L * kv * d * b * 8, "bits, not bytes"),
]


@pytest.mark.parametrize("checker, fn, named", [("offset_causal_mask", *m) for m in MASK_MISTAKES]
                         + [("kv_bytes_per_token", *m) for m in BYTES_MISTAKES])
def test_mask_and_bytes_checkers_name_each_typical_mistake(capsys, checker, fn, named):
    ok, out = run(capsys, checker, fn)
    assert not ok and named in out


def test_kv_bytes_solution_passes_and_stub_is_unfinished(capsys):
    ok, out = run(capsys, "kv_bytes_per_token", kv_bytes)
    assert ok and "✔" in out

    def stub(layers, h, h_kv, d_k, bytes_per_number):
        raise NotImplementedError
    ok, out = run(capsys, "kv_bytes_per_token", stub)
    assert not ok and "not finished" in out
    ok, out = run(capsys, "kv_bytes_per_token", lambda L, h, kv, d, b: float(kv_bytes(L, h, kv, d, b)))
    assert not ok
