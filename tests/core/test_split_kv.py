"""Split-KV decoding (mha_course/split_kv.py): its checks. The equality with scaled_dot_product_attention,
the partials' log-sum-exps and the memory bound are tested in test_long_context_core.py (notebook 13's core).
"""
import numpy as np
import pytest

import mha_course as mc
from mha_course import efficient, split_kv


def test_the_names_stay_importable_from_efficient():
    for name in split_kv.__all__:
        assert getattr(efficient, name) is getattr(split_kv, name)


def test_split_kv_attention_is_the_merge_of_its_partials():
    rng = np.random.default_rng(0)
    Q, K, V = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 7, 4)), rng.normal(size=(2, 7, 3))
    outs, lses = split_kv.split_kv_partials(Q, K, V, 3)
    np.testing.assert_allclose(split_kv.merge_attention_partials(outs, lses), mc.split_kv_attention(Q, K, V, 3))
    np.testing.assert_allclose(mc.split_kv_attention(Q, K, V, 3), mc.scaled_dot_product_attention(Q, K, V)[0],
                               atol=1e-12)


def test_check_n_splits_names_a_bad_number_of_keys():
    assert split_kv.check_n_splits(3, np.int64(7)) == 3
    for bad in (None, 7.5, "7", 0):
        with pytest.raises(ValueError, match="S="):
            split_kv.check_n_splits(3, bad)


def test_merge_refuses_boolean_partials():
    with pytest.raises(ValueError, match=r"lses\[0\] is boolean"):
        split_kv.merge_attention_partials([np.array([[1.0]])], [np.array([[True]])])
    with pytest.raises(ValueError, match=r"outs\[0\] is boolean"):
        split_kv.merge_attention_partials([np.array([[True]])], [np.array([[0.0]])])
