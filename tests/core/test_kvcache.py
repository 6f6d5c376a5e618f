"""The KV caches (mha_course/kvcache.py): what they hold, what they refuse before changing, what they cost.

KVCache, RollingKVCache and LatentCache inside attention are tested in test_gqa.py (grouped_query_attention
and mla_attention with cache=), their state under refused calls in tests/cross/test_cache_states.py.
"""
import numpy as np
import pytest

import mha_course as mc
from mha_course import gqa, kvcache


def test_the_names_stay_importable_from_gqa_and_the_package():
    for name in kvcache.__all__:
        assert getattr(gqa, name) is getattr(kvcache, name)
    assert mc.KVCache is kvcache.KVCache and mc.quantize_kv is kvcache.quantize_kv


def test_a_kv_cache_appends_in_place_and_hands_out_read_only_views():
    cache = kvcache.KVCache(1, 2, 4, max_len=5)
    K, V = np.ones((1, 2, 3, 4)), np.zeros((1, 2, 3, 4))
    K_all, V_all = cache.append(K, V)
    assert cache.length == 3 and K_all.shape == (1, 2, 3, 4) and not K_all.flags.writeable
    with pytest.raises(ValueError, match="cannot take 3 more"):
        cache.append(K, V)
    assert cache.length == 3  # refused: nothing changed
    np.testing.assert_array_equal(cache.next_mask(2), kvcache.cached_causal_mask(2, 3))


def test_quantized_keys_come_back_within_half_a_step():
    x = np.random.default_rng(0).normal(size=(2, 3, 8))
    q, scale = kvcache.quantize_kv(x, bits=8)
    assert q.dtype == np.int8 and np.abs(kvcache.dequantize_kv(q, scale) - x).max() <= scale.max() / 2 + 1e-12
    assert kvcache.quantize_kv(x, bits=16)[0].dtype == np.int16  # 9 to 16 bits: int16, as documented


@pytest.mark.parametrize("make", [lambda n: mc.KVCache(1, 1, 2, n), lambda n: mc.LatentCache(1, 4, n)])
def test_a_cache_larger_than_the_machine_is_refused_naming_its_size(make):
    with pytest.raises(ValueError, match=r"max_len=1000000000000000 would take .* more than"):
        make(10 ** 15)
    assert make(16).length == 0


def test_rolling_cache_names_rope_base_and_refuses_a_query_before_its_keys():
    with pytest.raises(ValueError, match="rope_base='abc'"):
        mc.RollingKVCache(1, 1, 2, window=2, rope_base="abc")
    cache = mc.RollingKVCache(1, 1, 2, window=2, sinks=1, positions="cache", rope_base=1e4)
    for _ in range(4):
        cache.append(np.ones((1, 1, 1, 2)), np.ones((1, 1, 1, 2)))
    assert cache.positions.tolist() == [0, 2, 3] and cache.cache_positions(3).tolist() == [0, 1, 2]
    for bad in (-5, 2, 3.0, True, None):
        with pytest.raises(ValueError, match="t="):
            cache.cache_positions(bad)


# ---- a refused call changes nothing; what append returned never changes

def test_next_mask_refuses_tokens_past_max_len_and_leaves_the_cache_as_it_was():
    cache = kvcache.KVCache(2, 1, 2, max_len=5)
    cache.append(np.ones((2, 1, 3, 2)), np.ones((2, 1, 3, 2)))
    with pytest.raises(ValueError, match=r"holds 3 of max_len=5 tokens and cannot take 3 more; .*max_len >= 6"):
        cache.next_mask(3)
    assert cache.length == 3 and cache.next_mask(2).shape == (2, 5)


def test_arrays_returned_by_append_keep_their_tokens_after_reset_and_new_appends():
    cache = kvcache.KVCache(1, 2, 3, max_len=4)
    K_old, V_old = cache.append(np.full((1, 2, 2, 3), 7.0), np.full((1, 2, 2, 3), -7.0))
    keys_old = cache.keys
    cache.reset()
    cache.append(np.zeros((1, 2, 4, 3)), np.zeros((1, 2, 4, 3)))
    assert (K_old == 7.0).all() and (V_old == -7.0).all() and (keys_old == 7.0).all()
    assert (cache.keys == 0).all() and not K_old.flags.writeable
