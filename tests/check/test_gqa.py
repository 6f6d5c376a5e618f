"""The checkers of notebook 09 (kv_append, offset_causal_mask, kv_bytes_per_token, kv_head_index):
right answers in natural types accepted (a list for the tuple, 4.0 for 4), every catalogued mistake
named as itself, the issue's slips written by hand named, uncatalogued ones given a closer look."""
import numpy as np
import pytest

import mha_course as mc
from mha_course.check import gqa as cg

from .verdicts import closer, named, run

EXERCISES = [(cg.kv_append, cg.KV_APPEND), (cg.offset_causal_mask, cg.OFFSET_CAUSAL_MASK),
             (cg.kv_bytes_per_token, cg.KV_BYTES_PER_TOKEN), (cg.kv_head_index, cg.KV_HEAD_INDEX)]
CATALOGUED = [(c, e, i) for c, e in EXERCISES for i in range(len(e.mistakes))]


@pytest.mark.parametrize("checker, exercise, i", CATALOGUED, ids=[f"{e.name}-{i}" for _, e, i in CATALOGUED])
def test_every_catalogued_mistake_is_named_as_itself(capsys, checker, exercise, i):
    named(capsys, checker, exercise.mistakes[i].fn, exercise.mistakes[i].name)


# ---------------------------------------------------------------- 9.1 the cache append
@pytest.mark.parametrize("fn", [
    lambda Kc, Vc, K, V: (np.concatenate([Kc, K], axis=2), np.concatenate([Vc, V], axis=2)),
    lambda Kc, Vc, K, V: (np.concatenate((Kc, K), axis=-2), np.concatenate((Vc, V), axis=-2)),
    lambda Kc, Vc, K, V: tuple(np.append(c, n, axis=2) for c, n in ((Kc, K), (Vc, V))),
    lambda Kc, Vc, K, V: (np.hstack([Kc.swapaxes(1, 2), K.swapaxes(1, 2)]).swapaxes(1, 2),
                          np.hstack([Vc.swapaxes(1, 2), V.swapaxes(1, 2)]).swapaxes(1, 2)),
])
def test_kv_append_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cg.kv_append, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda Kc, Vc, K, V: (np.concatenate([Kc, K]), np.concatenate([Vc, V])), "appended along the batch axis"),
    (lambda Kc, Vc, K, V: (Kc, Vc), "the old cache returned"),
    (lambda Kc, Vc, K, V: (np.concatenate([K, Kc], 2), np.concatenate([V, Vc], 2)), "the new tokens put before"),
    (lambda Kc, Vc, K, V: [np.concatenate([Vc, V], 2), np.concatenate([Kc, K], 2)], "keys and values swapped"),
])
def test_kv_append_names_learner_mistakes(capsys, fn, name):
    named(capsys, cg.kv_append, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 2)[:, :, 1:], np.concatenate([Vc, V], 2)[:, :, 1:]),
     "your K_all has shape (1, 2, 3, 4)"),
    (lambda Kc, Vc, K, V: (np.concatenate([Kc, K], 2), np.concatenate([Vc, V], 2) * 2), "V_all 1, 1, 1, 3"),
])
def test_kv_append_unknown_mistakes_get_a_closer_look(capsys, fn, says):
    closer(capsys, cg.kv_append, fn, says)


# ---------------------------------------------------------------- 9.2 the offset causal mask
@pytest.mark.parametrize("fn", [
    lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=offset),
    lambda T, offset: mc.causal_mask(offset + T)[-T:],
    lambda T, offset: np.arange(offset + T)[None, :] - np.arange(T)[:, None] <= offset,
    lambda T, offset: np.array([[s <= offset + t for s in range(offset + T)] for t in range(T)]),
    mc.cached_causal_mask,
])
def test_offset_mask_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cg.offset_causal_mask, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=offset + 1), "off by one the other way"),
    (lambda T, offset: np.tril(np.ones((T, offset + T)), k=offset), "floats 1.0 / 0.0 instead of booleans"),
    (lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool)), "the mask is not offset by the cache length"),
    (lambda T, offset: mc.causal_mask(offset + T), "the whole (offset + T) square causal mask"),
])
def test_offset_mask_names_learner_mistakes(capsys, fn, name):
    named(capsys, cg.offset_causal_mask, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=offset + 2), "expected [[1, 1, 1, 1, 0]"),
    (lambda T, offset: np.tril(np.ones((T, offset + T), dtype=bool), k=max(offset - 2, 0)),
     "query t sits at position 3 + t"),
])
def test_offset_mask_unknown_mistakes_get_a_closer_look(capsys, fn, says):
    closer(capsys, cg.offset_causal_mask, fn, says)


# ---------------------------------------------------------------- 9.3 bytes per token
@pytest.mark.parametrize("fn", [
    lambda layers, h, h_kv, d_k, b: 2 * layers * h_kv * d_k * b,
    lambda layers, h, h_kv, d_k, b: np.int64(2 * layers * h_kv * d_k * b),          # a numpy integer
    lambda layers, h, h_kv, d_k, b: layers * (h_kv * d_k * b + h_kv * d_k * b),
    lambda layers, h, h_kv, d_k, b: mc.kv_cache_bytes_per_token(layers, h_kv, d_k, b),
])
def test_kv_bytes_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cg.kv_bytes_per_token, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda L, h, kv, d, b: 2 * L * (h / kv) * d * b, "the group size g = h / h_kv instead of h_kv"),
    (lambda L, h, kv, d, b: 2 * L * h * d * b, "h (query heads) instead of h_kv"),
    (lambda L, h, kv, d, b: L * kv * d * b, "only the keys are counted"),
    (lambda L, h, kv, d, b: 2 * L * kv * d * b * 8, "bits, not bytes"),
])
def test_kv_bytes_names_learner_mistakes(capsys, fn, name):
    named(capsys, cg.kv_bytes_per_token, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda L, h, kv, d, b: 3 * L * kv * d * b, "yours 3, expected 2"),
    (lambda L, h, kv, d, b: 2 * L * kv * d * b + 1, "yours 3, expected 2"),
])
def test_kv_bytes_unknown_mistakes_get_a_closer_look(capsys, fn, says):
    closer(capsys, cg.kv_bytes_per_token, fn, says)


# ---------------------------------------------------------------- 9.4 which key/value head
@pytest.mark.parametrize("fn", [
    lambda h, h_kv: np.repeat(np.arange(h_kv), h // h_kv),
    lambda h, h_kv: np.arange(h) * h_kv // h,
    lambda h, h_kv: np.floor(np.arange(h) / (h / h_kv)).astype(int),
])
def test_kv_head_index_accepts_right_answers(capsys, fn):
    ok, out = run(capsys, cg.kv_head_index, fn)
    assert ok, out


@pytest.mark.parametrize("fn, name", [
    (lambda h, h_kv: np.tile(np.arange(h_kv), h // h_kv), "i % h_kv"),
    (lambda h, h_kv: [i // h_kv for i in range(h)], "i // h_kv"),
    (lambda h, h_kv: np.arange(h) / (h // h_kv), "i / g with true division"),
    (lambda h, h_kv: np.arange(1, h + 1) // (h // h_kv) if False else np.arange(h) // (h // h_kv) + 1, "counted from 1"),
])
def test_kv_head_index_names_learner_mistakes(capsys, fn, name):
    named(capsys, cg.kv_head_index, fn, name)


@pytest.mark.parametrize("fn, says", [
    (lambda h, h_kv: np.arange(h)[::-1] // (h // h_kv), "yours [1, 1, 1, 1, 0, 0, 0, 0]"),
    (lambda h, h_kv: np.minimum(np.arange(h) // (h // h_kv), 0), "heads 0-3 share key/value head 0"),
])
def test_kv_head_index_unknown_mistakes_get_a_closer_look(capsys, fn, says):
    closer(capsys, cg.kv_head_index, fn, says)


def test_kv_append_in_place_write_into_a_buffer_is_reported(capsys):
    """A learner who writes into the cached arrays is told the course's functions are pure."""
    def in_place(K_cache, V_cache, K_new, V_new):
        K_cache[...] = 0
        return np.concatenate([K_cache, K_new], 2), np.concatenate([V_cache, V_new], 2)
    ok, out = run(capsys, cg.kv_append, in_place)
    assert not ok and "in place" in out


def test_an_int_mask_is_refused_it_must_be_boolean(capsys):
    ok, out = run(capsys, cg.offset_causal_mask,
                  lambda T, offset: np.tril(np.ones((T, offset + T), dtype=int), k=offset))
    assert not ok


@pytest.mark.parametrize("checker", [c for c, _ in EXERCISES])
def test_a_stub_is_not_finished(capsys, checker):
    def stub(*args):
        raise NotImplementedError
    ok, out = run(capsys, checker, stub)
    assert not ok and "not finished" in out and "A closer look" not in out


# ---------------------------------------------------------------- notebook 09's claims about real models
# (layers, h, h_kv, d_k) from each model's published config.json (num_hidden_layers, num_attention_heads,
# num_key_value_heads, hidden_size / num_attention_heads)
CONFIGS = {"Llama-2-7B": (32, 32, 32, 128), "Llama-3-8B": (32, 32, 8, 128), "Mistral-7B": (32, 32, 8, 128),
           "Phi-3-mini": (32, 32, 32, 96)}


@pytest.mark.parametrize("name, kib", [("Llama-2-7B", 512), ("Llama-3-8B", 128), ("Mistral-7B", 128),
                                       ("Phi-3-mini", 384)])
def test_the_fp16_cache_per_token_of_the_models_notebook_09_names(name, kib):
    layers, h, h_kv, d_k = CONFIGS[name]
    assert mc.kv_cache_bytes_per_token(layers=layers, h_kv=h_kv, d_k=d_k, bytes_per_number=2) == kib * 1024
    assert (h_kv == h) == (name in ("Llama-2-7B", "Phi-3-mini"))    # MHA; the others GQA with 8 key/value heads


def test_deepseek_v2_caches_512_plus_64_numbers_per_layer_and_token():
    v2 = mc.mla_cache_bytes_per_token(layers=60, d_latent=512, d_rope=64, bytes_per_number=2)
    assert v2 == 60 * (512 + 64) * 2 and v2 / 1024 == 67.5
    assert mc.kv_cache_bytes_per_token(layers=60, h_kv=128, d_k=128, bytes_per_number=2) / v2 == pytest.approx(56.9, 0.01)


def test_a_cached_decode_step_does_t_times_less_attention_block_work():
    """Notebook 09, section 4: without the cache step t runs 8 t d² + 4 t² d per layer, with it 8 d² + 4 t d."""
    from mha_course.lessons import complexity as cx
    d = 32
    for t in (5, 1024, 2048):
        without = cx.projection_flops(t, d) + cx.attention_flops(t, d)
        with_cache = cx.projection_flops(1, d) + 4 * t * d
        assert without == t * with_cache


# ---- learner code written anew, each class named
from mha_course import check as _check  # noqa: E402

from .verdicts import says as _says  # noqa: E402


def test_the_cache_columns_blocked_is_named(capsys):
    def learner(T, offset):
        rows, cols = np.indices((T, offset + T))
        return (cols >= offset) & (cols - offset <= rows)
    _says(capsys, _check.offset_causal_mask, learner, "the cached keys blocked")


@pytest.mark.parametrize("fn, said", [
    (lambda h, h_kv: np.repeat(np.arange(h_kv), h_kv), "each key/value head repeated h_kv times (np.repeat"),
    (lambda h, h_kv: np.array([i for i in range(h_kv) for _ in range(h_kv)][:h]), "each key/value head repeated h_kv times, cut to h"),
])
def test_repeat_by_h_kv_is_named(capsys, fn, said):
    _says(capsys, _check.kv_head_index, fn, said)


@pytest.mark.parametrize("fn, says", [
    (lambda Kc, Vc, K, V: [np.concatenate([Kc, K], axis=2), np.concatenate([Vc, V], axis=2)],
     "it returned a list of 2 values, expected a tuple (K_all, V_all)"),
    (lambda Kc, Vc, K, V: (np.concatenate([Kc, K], axis=2), np.concatenate([Vc, V], axis=2).tolist()),
     "V_all: the values are right but it is a list where a numpy array"),
])
def test_kv_append_in_another_container_is_named(capsys, fn, says):
    ok, out = run(capsys, cg.kv_append, fn)
    assert not ok and says in out, out


def test_kv_bytes_as_a_float_is_named(capsys):
    ok, out = run(capsys, cg.kv_bytes_per_token, lambda layers, h, h_kv, d_k, b: 2.0 * layers * h_kv * d_k * b)
    assert not ok and "expected a whole number (int)" in out, out
