"""lessons.long_serving: paged serving equals contiguous serving, token for token and bit for bit, and
wastes less than a block per sequence; the pool's block tables and release; a PagedSequence has a
KVCache's interface; split_kv_threaded equals split_kv_attention and refuses what it refuses.
"""
from __future__ import annotations

import numpy as np
import pytest

import mha_course as mc
from mha_course.lessons import long_serving as ls


@pytest.fixture(scope="module")
def rope(long_context_models):
    return long_context_models["rope"]


def test_paged_serving_equals_contiguous_serving(rope):
    config, params = rope
    prompts = [np.random.default_rng(i).integers(0, 32, size=n) for i, n in enumerate((3, 17, 9, 30))]
    a = ls.serve(params, config, prompts, 5, max_len=40)
    b = ls.serve(params, config, prompts, 5, max_len=40, block_size=4)
    assert all(np.array_equal(x, y) for x, y in zip(a.tokens, b.tokens))
    assert all(np.array_equal(x, y) for x, y in zip(a.logits, b.logits))
    assert a.reserved_slots == 4 * 40 and a.filled_slots == b.filled_slots == sum(n + 4 for n in (3, 17, 9, 30))
    assert b.filled_slots <= b.reserved_slots < b.filled_slots + 4 * 4  # less than a block wasted per sequence


def test_paged_pool_block_tables_and_release():
    pool = ls.PagedKVCache(n_blocks=4, block_size=2, h_kv=1, d_k=1)
    K = np.arange(5.0).reshape(1, 1, 5, 1)
    K_all, _ = pool.sequence("a").append(K, K)
    assert pool.tables["a"] == [0, 1, 2] and np.array_equal(K_all, K)
    pool.release("a")
    assert pool.free == [3, 0, 1, 2] and pool.used_slots == 0
    with pytest.raises(ValueError, match="all in use"):
        pool.sequence("b").append(np.zeros((1, 1, 9, 1)), np.zeros((1, 1, 9, 1)))


def test_split_kv_threaded_equals_split_kv_attention():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(1, 8)), rng.normal(size=(101, 8)), rng.normal(size=(101, 3))
    assert np.abs(ls.split_kv_threaded(Q, K, V, 4, 2) - mc.split_kv_attention(Q, K, V, 4)).max() < 1e-12
