"""Bad input: every kind of bad input a learner or a caller gives, one table, one test.

Each row is (callable, kwargs, regex). The callable must raise ValueError whose message
matches the regex: the message names the offending values and says how to fix them.
"""
import re

import numpy as np
import pytest

import mha_course as mc
from mha_course import block
from mha_course.lessons import scaling

_rng = np.random.default_rng(0)
P8 = mc.init_params(8, rng=_rng)
P10 = mc.init_params(10, rng=_rng)
X8 = np.zeros((2, 3, 8))            # (B=2, T=3, d_model=8)
X10 = np.zeros((1, 3, 10))
Q, K, V = np.zeros((2, 3, 4)), np.zeros((2, 5, 4)), np.zeros((2, 5, 4))
E = re.escape

mha, trace, sdpa = mc.multi_head_attention, mc.trace, mc.scaled_dot_product_attention
G8 = mc.init_gqa_params(8, 2, 1, rng=_rng)
M8 = mc.init_mla_params(8, 2, 4, rng=_rng)
NAN_K = np.zeros((2, 5, 4))
NAN_K[1, 4, 0] = np.nan             # a NaN in the last key: the one a mask blocks
NAN_X = np.zeros((2, 3, 8))
NAN_X[0, 2, 5] = np.nan             # a NaN at a padding position of sequence 0 (length 2)
entropy, attention_block = scaling.entropy, block.attention_block
CASES = [
    # ---- h not dividing d_model: the message lists the valid h
    (mc.split_heads, dict(x=X10, h=4), "^" + E("d_model=10 is not divisible by h=4; valid h: 1, 2, 5, 10") + "$"),
    (mha, dict(x=X10, params=P10, h=4), "^" + E("d_model=10 is not divisible by h=4; valid h: 1, 2, 5, 10") + "$"),
    (trace, dict(x=X8, params=P8, h=3), E("d_model=8 is not divisible by h=3; valid h: 1, 2, 4, 8")),
    # ---- h < 1
    (mha, dict(x=X8, params=P8, h=0), E("h=0 must be >= 1")),
    (mc.split_heads, dict(x=X8, h=-2), E("h=-2 must be >= 1")),
    (mc.nearest_valid_h, dict(d_model=12, h=0), E("h=0 must be >= 1")),
    # ---- h not an integer
    (mha, dict(x=X8, params=P8, h=2.0), E("h=2.0 must be a positive integer (got float)")),
    (mha, dict(x=X8, params=P8, h="2"), E("h='2' must be a positive integer (got str)")),
    (trace, dict(x=X8, params=P8, h=True), E("h=True must be a positive integer (got bool)")),
    (mc.split_heads, dict(x=X8, h=None), E("h=None must be a positive integer (got NoneType)")),
    # ---- x not 3-D
    (mha, dict(x=np.zeros((3, 8)), params=P8, h=2),
     E("x must be 3-D (B, T, d_model), got shape (3, 8); add a batch axis with x[None]")),
    (trace, dict(x=np.zeros((1, 2, 3, 8)), params=P8, h=2), E("x must be 3-D (B, T, d_model), got shape (1, 2, 3, 8)")),
    (mc.split_heads, dict(x=np.zeros(8), h=2), E("x must be 3-D (B, T, d_model), got shape (8,)")),
    (mc.combine_heads, dict(x=np.zeros((2, 3, 4))), E("x must be 4-D (B, h, T, d_k), got shape (2, 3, 4)")),
    # ---- x's last dim does not match the params
    (mha, dict(x=np.zeros((2, 3, 6)), params=P8, h=2),
     E("x has last dim 6 but params were made for d_model=8; use init_params(6, rng=...) or give x shape (B, T, 8)")),
    # ---- context's last dim or batch does not match
    (mha, dict(x=X8, params=P8, h=2, context=np.zeros((2, 4, 6))),
     E("context has shape (2, 4, 6) but x has shape (2, 3, 8); context must be (B=2, S, d_model=8)")),
    (trace, dict(x=X8, params=P8, h=2, context=np.zeros((3, 4, 8))),
     E("context has shape (3, 4, 8) but x has shape (2, 3, 8); context must be (B=2, S, d_model=8)")),
    (mha, dict(x=X8, params=P8, h=2, context=np.zeros((4, 8))),
     E("context must be 3-D (B, S, d_model), got shape (4, 8); add a batch axis with context[None]")),
    # ---- Q/K/V shapes that do not line up: all three shapes are named
    (sdpa, dict(Q=Q, K=np.zeros((2, 5, 3)), V=V), E("Q and K must share their last dim d_k; got Q (2, 3, 4), K (2, 5, 3), V (2, 5, 4)")),
    (sdpa, dict(Q=Q, K=K, V=np.zeros((2, 6, 4))), E("K and V must have the same number of keys S (axis -2); got Q (2, 3, 4), K (2, 5, 4), V (2, 6, 4)")),
    (sdpa, dict(Q=Q, K=np.zeros((3, 5, 4)), V=np.zeros((3, 5, 4))), E("batch axes of Q, K and V do not broadcast; got Q (2, 3, 4), K (3, 5, 4), V (3, 5, 4)")),
    (sdpa, dict(Q=np.zeros(4), K=K[0], V=V[0]), E("Q, K and V need at least 2 dims (..., seq, features); got Q (4,), K (5, 4), V (5, 4)")),
    # ---- mask not boolean
    (mha, dict(x=X8, params=P8, h=2, mask=np.ones((3, 3), int)), E("mask must be boolean (True = may attend), got dtype int64 with shape (3, 3)")),
    (sdpa, dict(Q=Q, K=K, V=V, mask=np.ones((3, 5))), E("mask must be boolean (True = may attend), got dtype float64") + ".*" + E("mask == 1")),
    # ---- mask not broadcastable: both shapes are named
    (mha, dict(x=X8, params=P8, h=2, mask=np.ones((4, 4), bool)), E("mask of shape (4, 4) does not broadcast to the scores' shape (2, 2, 3, 3) (B, h, T, S)")),
    (trace, dict(x=X8, params=P8, h=2, mask=np.ones((2, 2, 2, 3, 3), bool)), E("mask of shape (2, 2, 2, 3, 3) does not broadcast to the scores' shape (2, 2, 3, 3)")),
    (mha, dict(x=X8, params=P8, h=2, mask=mc.causal_mask(3), context=np.zeros((2, 5, 8))), E("mask of shape (3, 3) does not broadcast to the scores' shape (2, 2, 3, 5)")),
    (sdpa, dict(Q=Q, K=K, V=V, mask=np.ones((5, 3), bool)), E("mask of shape (5, 3) does not broadcast to the scores' shape (2, 3, 5) (..., T, S)")),
    # ---- lengths outside 0..S (and not lengths at all)
    (mc.padding_mask, dict(lengths=[2, 5], S=4), E("lengths [2, 5] must lie in 0..S=0..4; [5] do not")),
    (mc.padding_mask, dict(lengths=[-1, 2], S=4), E("lengths [-1, 2] must lie in 0..S=0..4; [-1] do not")),
    (mc.padding_mask, dict(lengths=[1.5], S=4), E("lengths must be a non-empty 1-D list of whole numbers, one per sequence; got [1.5]")),
    (mc.padding_mask, dict(lengths=[[1, 2]], S=4), E("lengths must be a non-empty 1-D list of whole numbers") + ".*" + E("[[1, 2]]")),
    # ---- empty sequences
    (mha, dict(x=np.zeros((2, 0, 8)), params=P8, h=2), E("x has an empty axis, shape (2, 0, 8) (B, T, d_model)")),
    (mha, dict(x=np.zeros((0, 3, 8)), params=P8, h=2), E("x has an empty axis, shape (0, 3, 8)")),
    (trace, dict(x=X8, params=P8, h=2, context=np.zeros((2, 0, 8))), E("context has an empty axis, shape (2, 0, 8) (B, S, d_model)")),
    (sdpa, dict(Q=np.zeros((0, 4)), K=K[0], V=V[0]), E("Q has an empty axis, shape (0, 4)")),
    (sdpa, dict(Q=Q[0], K=np.zeros((0, 4)), V=np.zeros((0, 4))), E("K has an empty axis, shape (0, 4)")),
    (mc.causal_mask, dict(T=0), E("T=0 must be >= 1")),
    (mc.padding_mask, dict(lengths=[], S=4), E("lengths must be a non-empty 1-D list") + ".*" + E("got []")),
    (mc.padding_mask, dict(lengths=[0], S=0), E("S=0 must be >= 1")),
    (mc.softmax, dict(x=np.zeros((3, 0))), E("softmax over an empty axis: x has shape (3, 0) and axis=-1 has length 0")),
    # ---- softmax arguments
    (mc.softmax, dict(x=1.0), E("softmax needs at least a 1-D array, got a scalar")),
    (mc.softmax, dict(x=np.zeros((3, 4)), axis=2), E("axis=2 is out of range for an array of shape (3, 4); use an axis in -2..1")),
    # ---- init_params: bad d_model, rng, dtype
    (mc.init_params, dict(d_model=0, rng=_rng), E("d_model=0 must be >= 1")),
    (mc.init_params, dict(d_model=2.5, rng=_rng), E("d_model=2.5 must be a positive integer (got float)")),
    (mc.init_params, dict(d_model="8", rng=_rng), E("d_model='8' must be a positive integer (got str)")),
    (mc.init_params, dict(d_model=8, rng=None), E("rng must be a numpy Generator, got NoneType; pass rng=np.random.default_rng(0)")),
    (mc.init_params, dict(d_model=8, rng=0), E("rng must be a numpy Generator, got int")),
    (mc.init_params, dict(d_model=8, rng=np.random.RandomState(0)), E("rng must be a numpy Generator, got RandomState")),
    (mc.init_params, dict(d_model=8, rng=_rng, dtype=int), E("dtype=int64 is not supported; use np.float32 or np.float64")),
    (mc.init_params, dict(d_model=8, rng=_rng, dtype="foo"), E("dtype='foo' is not supported")),
    (mc.valid_heads, dict(d_model=0), E("d_model=0 must be >= 1")),
    # ---- params and arrays that are not what they should be
    (mha, dict(x=X8, params={"W_q": np.eye(8)}, h=2), E("params must be an MHAParams, got dict; make one with init_params(")),
    (mha, dict(x=X8, params=P8._replace(W_o=np.zeros((8, 4))), h=2), E("params.W_o has shape (8, 4), expected (8, 8)")),
    (mha, dict(x=X8, params=P8._replace(W_q=np.zeros(8)), h=2), E("params.W_q has shape (8,), expected a square (d_model, d_model) matrix")),
    (mha, dict(x=[[[1.0, 2.0], [3.0]]], params=P8, h=2), E("x is not a rectangular array (ragged nested lists?)")),
    (mha, dict(x=None, params=P8, h=2), E("x must be a numeric array, got NoneType")),
    (sdpa, dict(Q=Q.astype(complex), K=K, V=V), E("Q must be real, got dtype complex128")),
    # ---- every argument named, every rule applied to every function with that input
    # complex and non-numeric parameters, like a complex or non-numeric x
    (mha, dict(x=X8, params=P8._replace(W_o=P8.W_o * 1j), h=2), E("params.W_o must be real, got dtype complex128")),
    (trace, dict(x=X8, params=P8._replace(b_q=np.zeros(8, complex)), h=2), E("params.b_q must be real, got dtype complex128")),
    (mha, dict(x=X8, params=P8._replace(W_v="abcdefgh"), h=2), E("params.W_v must be a numeric array, got str")),
    (mc.grouped_query_attention, dict(x=X8, params=G8._replace(W_o=G8.W_o * 1j), h=2, h_kv=1),
     E("params.W_o must be real, got dtype complex128")),
    (mc.grouped_query_attention, dict(x=X8, params=G8._replace(W_k="k"), h=2, h_kv=1), E("params.W_k must be a numeric array, got str")),
    # axis arguments that are not whole numbers
    (mc.softmax, dict(x=np.zeros((3, 4)), axis=1.0), E("axis=1.0 must be a whole number naming an axis (got float)")),
    (mc.softmax, dict(x=np.zeros((3, 4)), axis=None), E("axis=None must be a whole number naming an axis (got NoneType)")),
    (mc.softmax, dict(x=np.zeros((3, 4)), axis="-1"), E("axis='-1' must be a whole number naming an axis (got str)")),
    (entropy, dict(weights=np.full((2, 4), 0.25), axis=1.5), E("axis=1.5 must be a whole number naming an axis (got float)")),
    (entropy, dict(weights=np.full((2, 4), 0.25), axis=3), E("axis=3 is out of range for an array of shape (2, 4)")),
    # non-finite inputs of attention: refused where they are, since a NaN would spread from a masked key
    (sdpa, dict(Q=Q, K=NAN_K, V=V, mask=np.arange(5) < 4), E("K has 1 non-finite value (the first: K[1, 4, 0] = nan)") + ".*nan_to_num"),
    (sdpa, dict(Q=Q, K=K, V=NAN_K), E("V has 1 non-finite value (the first: V[1, 4, 0] = nan)")),
    (sdpa, dict(Q=np.full((3, 4), np.inf), K=K[0], V=V[0]), E("Q has 12 non-finite values (the first: Q[0, 0] = inf)")),
    (mc.fast_attention, dict(Q=Q, K=K, V=NAN_K), E("V has 1 non-finite value")),
    (mc.tiled_attention, dict(Q=Q, K=NAN_K, V=V), E("K has 1 non-finite value")),
    (mc.linear_attention, dict(Q=Q, K=K, V=NAN_K), E("V has 1 non-finite value")),
    (mha, dict(x=NAN_X, params=P8, h=2, mask=mc.padding_mask([2, 3], 3)), E("x has 1 non-finite value (the first: x[0, 2, 5] = nan)")),
    (trace, dict(x=X8, params=P8, h=2, context=NAN_X), E("context has 1 non-finite value (the first: context[0, 2, 5] = nan)")),
    (mha, dict(x=X8, params=P8._replace(W_k=np.full((8, 8), np.nan)), h=2), E("params.W_k has 64 non-finite values")),
    (mc.grouped_query_attention, dict(x=NAN_X, params=G8, h=2, h_kv=1), E("x has 1 non-finite value")),
    (mc.mla_attention, dict(x=NAN_X, params=M8, h=2), E("x has 1 non-finite value")),
    (attention_block, dict(x=NAN_X, params=P8, h=2), E("x has 1 non-finite value")),
    # masks: the fix offered must be the right one for each kind of mask
    (mha, dict(x=X8, params=P8, h=2, mask=np.where(mc.causal_mask(3), 0.0, -np.inf)), E("it looks additive") + ".*" + E("convert it with mask == 0")),
    (sdpa, dict(Q=Q, K=K, V=V, mask=np.where(np.tri(3, 5, dtype=bool), 0.0, -1e9)), E("convert it with mask == 0")),
    (mc.grouped_query_attention, dict(x=X8, params=G8, h=2, h_kv=1, mask=np.where(mc.causal_mask(3), 0.0, -np.inf)), E("convert it with mask == 0")),
    (mha, dict(x=X8, params=P8, h=2, mask=np.ones((2, 3), np.int64)), E("if 1 means may attend (like Hugging Face's attention_mask) convert it with mask == 1")),
    # masks with fewer axes than the scores but more than 2 would line up from the right: refused
    (mha, dict(x=X8, params=P8, h=2, mask=np.ones((2, 3, 3), bool)),
     E("mask of shape (2, 3, 3) has 3 axes but the scores (B, h, T, S) = (2, 2, 3, 3) have 4") + ".*" + E("(B, 1, 1, S)")),
    (trace, dict(x=X8, params=P8, h=2, mask=np.ones((1, 3, 3), bool)), E("mask of shape (1, 3, 3) has 3 axes")),
    (mc.grouped_query_attention, dict(x=X8, params=G8, h=2, h_kv=1, mask=np.ones((2, 3, 3), bool)), E("mask of shape (2, 3, 3) has 3 axes")),
    (sdpa, dict(Q=np.zeros((2, 2, 3, 4)), K=np.zeros((2, 2, 5, 4)), V=np.zeros((2, 2, 5, 4)), mask=np.ones((2, 3, 5), bool)),
     E("mask of shape (2, 3, 5) has 3 axes but the scores (..., T, S) = (2, 2, 3, 5) have 4")),
    # a (B, S) padding mask: its message names the accepted padding shape
    (mha, dict(x=X8, params=P8, h=2, mask=np.ones((2, 3), bool), context=np.zeros((2, 3, 8))),
     E("mask of shape (2, 3) does not broadcast") + ".*" + E("(B, 1, 1, S) (padding, as padding_mask(lengths, S) makes it)")),
]


def _id(case):
    fn, kwargs, _ = case
    short = {k: (f"shape{np.shape(v)}" if isinstance(v, np.ndarray) else type(v).__name__
                 if isinstance(v, (mc.MHAParams, dict, np.random.Generator)) else repr(v)[:20])
             for k, v in kwargs.items()}
    return f"{fn.__name__}-" + ",".join(f"{k}={v}" for k, v in short.items())


@pytest.mark.parametrize("fn,kwargs,message", CASES, ids=[_id(c) for c in CASES])
def test_bad_input_raises_a_value_error_that_names_the_values_and_the_fix(fn, kwargs, message):
    with pytest.raises(ValueError, match=message):
        fn(**kwargs)
