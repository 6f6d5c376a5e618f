"""A corpus of fresh learner answers for the checker engine's diagnosis (written for this test,
not taken from the checkers' catalogues): wrong answers of each family (an axis, a factor, a
transpose, a reversal, an off-by-one, the mask after the softmax or reversed, a list where one
array is expected, a complex or an object result, a float where an int is stated), and right
answers in unusual forms.

Each entry: (checker name, the learner's function, the words a right diagnosis contains: any of
them, in lower case; ``None`` for a right answer). ``python tests/check/engine_corpus.py`` prints
the tally: named / not named / misnamed / wrong accepted, and right accepted / refused.
Runs on any version of the package (it only calls ``mha_course.check.<name>``).
"""
import contextlib
import io
import math

import numpy as np

import mha_course as mc
from mha_course import check

RIGHT = None


def _sdpa(Q, K, V, mask=None, scale=None, after=False, flip=False):
    s = Q @ np.swapaxes(K, -1, -2) / (np.sqrt(Q.shape[-1]) if scale is None else scale(Q, K))
    if mask is not None and not after:
        s = np.where(~mask if flip else mask, s, -np.inf)
    w = mc.softmax(s)
    if mask is not None and after:
        w = np.where(mask, w, 0.0)
    return w @ V, w


def _loop_softmax(x, axis=-1):
    x = np.moveaxis(np.asarray(x, float), axis, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = x[idx]
        m = row.max()
        e = np.exp(row - (m if np.isfinite(m) else 0.0))
        out[idx] = e / e.sum() if e.sum() else e
    return np.moveaxis(out, -1, axis)


def _mha_from(fn_weights):
    """A learner's multi-head attention whose weights come from ``fn_weights(Q, K, mask)``."""
    def mha(x, params, h, mask=None, context=None):
        c = x if context is None else context
        p = params
        Q = mc.split_heads(x @ p.W_q + (0 if p.b_q is None else p.b_q), h)
        K = mc.split_heads(c @ p.W_k + (0 if p.b_k is None else p.b_k), h)
        V = mc.split_heads(c @ p.W_v + (0 if p.b_v is None else p.b_v), h)
        w = fn_weights(Q, K, mask)
        out = mc.combine_heads(w @ V) @ p.W_o + (0 if p.b_o is None else p.b_o)
        return out, w
    return mha


def _weights(Q, K, mask, after=False, scale=None):
    return _sdpa(Q, K, K[..., :1], mask, scale=scale, after=after)[1]


def _alibi(h, top=8.0):
    def geometric(n):
        return np.array([2.0 ** (-top * (k + 1) / n) for k in range(n)])
    n = 1 << (h.bit_length() - 1)
    return geometric(h) if n == h else np.concatenate([geometric(n), geometric(2 * n)[::2][:h - n]])


def _cross(x, context, W_q, W_k, W_v, keep, after=False, from_x=False):
    Q, K, V = x @ W_q, (x if from_x else context) @ W_k, context @ W_v
    s = Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1])
    m = np.asarray(keep, bool)[:, None, :]
    w = mc.softmax(s if after else np.where(m, s, -np.inf))
    w = np.where(m, w, 0.0) if after else w
    return w @ V, w


CORPUS = [
    # ---- 02 softmax and attention
    ("softmax", _loop_softmax, RIGHT),
    ("softmax", lambda x, axis=-1: list(mc.softmax(x, axis)), ("list", "numpy array")),
    ("softmax", lambda x, axis=-1: mc.softmax(x, axis)[..., ::-1], ("reverse",)),
    ("softmax", lambda x, axis=-1: mc.softmax(x, axis) + 0j, ("complex",)),
    ("softmax", lambda x, axis=-1: -mc.softmax(x, axis), ("opposite sign", "minus")),
    ("softmax", lambda x, axis=-1: 1 / mc.softmax(x, axis), ("1 /", "reciprocal", "division")),
    ("scaled_dot_product_attention", lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask), RIGHT),
    ("scaled_dot_product_attention", lambda Q, K, V, mask=None: tuple(np.asarray(a, np.float64) for a in
                                                                       _sdpa(Q, K, V, mask)), RIGHT),
    ("scaled_dot_product_attention", lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask, after=True),
     ("after the softmax",)),
    ("scaled_dot_product_attention", lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask, flip=True),
     ("polarity",)),
    ("scaled_dot_product_attention", lambda Q, K, V, mask=None: (_sdpa(Q, K, V, mask)[0],
                                                                 np.swapaxes(_sdpa(Q, K, V, mask)[1], -1, -2)),
     ("swapped", "transpose")),
    ("scaled_dot_product_attention", lambda Q, K, V, mask=None: _sdpa(Q, K, V, mask, scale=lambda Q, K: 1.0),
     ("no scaling", "sqrt(d_k)", "√d_k")),
    ("causal_mask", lambda T: np.arange(T)[:, None] >= np.arange(T)[None, :], RIGHT),
    ("causal_mask", lambda T: [[s <= t for s in range(T)] for t in range(T)], ("list", "numpy array")),
    ("causal_mask", lambda T: np.arange(T)[:, None] > np.arange(T)[None, :], ("diagonal", "off by one", "shifted")),
    ("causal_mask", lambda T: np.tril(np.ones((T, T))), ("dtype", "bool")),
    ("padding_mask", lambda lengths, S: (np.arange(S) < np.asarray(lengths)[:, None])[:, None, None, :], RIGHT),
    ("padding_mask", lambda lengths, S: (np.arange(S) >= np.asarray(lengths)[:, None])[:, None, None, :],
     ("polarity",)),
    # ---- 01 projections, 03 heads
    ("project_qkv", lambda x, p: (x @ p.W_q + (0 if p.b_q is None else p.b_q),
                                  x @ p.W_k + (0 if p.b_k is None else p.b_k),
                                  x @ p.W_v + (0 if p.b_v is None else p.b_v)), RIGHT),
    ("split_heads", lambda x, h: np.stack(np.split(x, h, axis=-1), axis=1), RIGHT),
    ("split_heads", lambda x, h: np.split(x, h, axis=-1), ("list",)),
    ("split_heads", lambda x, h: [x[..., i * (x.shape[-1] // h):(i + 1) * (x.shape[-1] // h)] for i in range(h)],
     ("list",)),
    ("split_heads", lambda x, h: mc.split_heads(x, h)[:, ::-1], ("reverse",)),
    ("combine_heads", lambda x: np.concatenate(list(np.moveaxis(x, 1, 0)), axis=-1), RIGHT),
    ("combine_heads", lambda x: np.concatenate(list(np.moveaxis(x, 1, 0))[::-1], axis=-1), ("reverse", "order")),
    ("head_queries", lambda X, W_q, h, i: X @ W_q[:, i * (W_q.shape[1] // h):(i + 1) * (W_q.shape[1] // h)], RIGHT),
    ("head_queries", lambda X, W_q, h, i: X @ W_q[:, i * (W_q.shape[1] // h):(i + 1) * (W_q.shape[1] // h)]
     / np.sqrt(W_q.shape[1] // h), ("1/sqrt(d_k)",)),
    # ---- 04 multi-head attention
    ("multi_head_attention", _mha_from(lambda Q, K, m: _weights(Q, K, m)), RIGHT),
    ("multi_head_attention", _mha_from(lambda Q, K, m: _weights(Q, K, m, after=True)), ("after the softmax",)),
    ("multi_head_attention", _mha_from(lambda Q, K, m: _weights(Q, K, m, scale=lambda Q, K: Q.shape[-1])),
     ("d_k instead of", "by d_k")),
    ("multi_head_attention", lambda x, params, h, mask=None, context=None: _mha_from(
        lambda Q, K, m: _weights(Q, K, m))(x if context is None else context, params, h, mask, x), ("context",)),
    # ---- 05 complexity
    ("flops", lambda T, d_model: (8 * T * d_model ** 2, 4 * T ** 2 * d_model), RIGHT),
    ("flops", lambda T, d_model: (8 * T * d_model ** 2, 2 * T ** 2 * d_model), ("causal", "only q k")),
    ("score_bytes", lambda B, h, T, bytes_per_number=4: B * h * T * T * bytes_per_number, RIGHT),
    ("score_bytes", lambda B, h, T, bytes_per_number=4: np.int64(B * h * T * T * bytes_per_number), RIGHT),
    ("crossover_seq_len", lambda d_model: 2 * d_model, RIGHT),
    ("crossover_seq_len", lambda d_model: 2.0 * d_model, ("int", "whole")),
    # ---- 06 masks
    ("causal_self_attention", lambda x: _sdpa(x, x, x, np.tril(np.ones((x.shape[-2],) * 2, bool)))[0], RIGHT),
    ("causal_self_attention", lambda x: _sdpa(x, x, x, np.tril(np.ones((x.shape[-2],) * 2, bool)), after=True)[0],
     ("after the softmax",)),
    ("cross_attention", lambda x, context, W_q, W_k, W_v, keep: _cross(x, context, W_q, W_k, W_v, keep), RIGHT),
    ("cross_attention", lambda x, context, W_q, W_k, W_v, keep: _cross(x, context, W_q, W_k, W_v, keep, after=True),
     ("after the softmax",)),
    # ---- 07 positions
    ("sinusoidal_positions", lambda T, d_model: np.array([[math.sin(p / 10000 ** (i / d_model)) if i % 2 == 0
                                                           else math.cos(p / 10000 ** ((i - 1) / d_model))
                                                           for i in range(d_model)] for p in range(T)]), RIGHT),
    ("sinusoidal_positions", lambda T, d_model: np.array([[math.sin(p / 10000 ** (i / d_model)) if i % 2 == 0
                                                           else math.cos(p / 10000 ** ((i - 1) / d_model))
                                                           for i in range(d_model)] for p in range(1, T + 1)]),
     ("shifted", "off by one", "start at 1", "positions")),
    ("alibi_slopes", lambda h: mc.alibi_slopes(h) if hasattr(mc, "alibi_slopes") else None, RIGHT),
    ("alibi_slopes", _alibi, RIGHT),
    ("alibi_slopes", lambda h: _alibi(h, top=4.0), ("8.0", "-8")),
    ("alibi_slopes", lambda h: (mc.alibi_slopes(h) if hasattr(mc, "alibi_slopes") else np.ones(h))[::-1],
     ("reverse", "order")),
    # ---- 08 backward
    ("scale_backward", lambda grad_scaled, d_k: grad_scaled * d_k ** -0.5, RIGHT),
    ("scale_backward", lambda grad_scaled, d_k: grad_scaled / np.sqrt(d_k) / d_k, ("1/d_k ",)),
    ("layer_norm", lambda x, eps=1e-5, gamma=None, beta=None: (x - x.mean(-1, keepdims=True)) / np.sqrt(
        x.var(-1, keepdims=True) + eps) * (1 if gamma is None else gamma) + (0 if beta is None else beta), RIGHT),
    # ---- 09 caches
    ("kv_head_index", lambda h, h_kv: np.arange(h) // (h // h_kv), RIGHT),
    ("kv_head_index", lambda h, h_kv: [i // (h // h_kv) for i in range(h)], ("list", "numpy array")),
    ("kv_head_index", lambda h, h_kv: np.floor(np.arange(h) / (h // h_kv)), ("int",)),
    ("kv_head_index", lambda h, h_kv: (np.arange(h) // (h // h_kv))[::-1], ("reverse",)),
    ("offset_causal_mask", lambda T, offset: np.arange(offset + T)[None, :] <= (offset + np.arange(T))[:, None],
     RIGHT),
    ("offset_causal_mask", lambda T, offset: np.arange(offset + T)[None, :] < (offset + np.arange(T))[:, None],
     ("diagonal", "off by one", "shifted", "comparison")),
    # ---- 10 efficient
    ("sliding_window_mask", lambda T, window: (lambda d: (d >= 0) & (d < window))(
        np.arange(T)[:, None] - np.arange(T)[None, :]), RIGHT),
    ("sliding_window_mask", lambda T, window: ((lambda d: (d >= 0) & (d < window))(
        np.arange(T)[:, None] - np.arange(T)[None, :])).astype(object), ("object",)),
    ("kv_append", lambda K_cache, V_cache, K_new, V_new: [np.concatenate([K_cache, K_new], axis=-2),
                                                          np.concatenate([V_cache, V_new], axis=-2)], ("list", "tuple")),
    ("kv_append", lambda K_cache, V_cache, K_new, V_new: (np.concatenate([K_cache, K_new], axis=-2)[..., ::-1, :],
                                                          np.concatenate([V_cache, V_new], axis=-2)[..., ::-1, :]),
     ("reverse",)),
    ("interpolated_inv_freq", lambda d_k, base, factor: 1.0 / (base ** (np.arange(0, d_k, 2) / d_k) * factor),
     RIGHT),
    ("interpolated_inv_freq", lambda d_k, base, factor: (1.0 / (base ** (np.arange(0, d_k, 2) / d_k) * factor))[::-1],
     ("reverse",)),
    ("qkv_param_count", lambda d_model, h, bias=False: 3 * d_model * d_model + (3 * d_model if bias else 0), RIGHT),
    ("qkv_param_count", lambda d_model, h, bias=False: 3.0 * d_model * d_model + (3 * d_model if bias else 0),
     ("whole number", "int")),
    ("score_std", lambda d_k: (float(np.sqrt(d_k)), 1.0), RIGHT),
    ("score_std", lambda d_k: (float(np.sqrt(d_k)), 1.0 / np.sqrt(d_k)), ("1/sqrt(d_k)",)),
    ("head_params", lambda d_model, h: (4 * d_model * (d_model // h), 4 * d_model * d_model), RIGHT),
    ("document_mask", lambda doc_ids, causal=False: [[a == b and (not causal or j <= i) for j, b in enumerate(doc_ids)]
                                                     for i, a in enumerate(doc_ids)], ("list", "numpy array")),
    ("no_projection_weights", lambda x: mc.softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1])), RIGHT),
    ("no_projection_weights", lambda x: np.swapaxes(mc.softmax(x @ np.swapaxes(x, -1, -2) / np.sqrt(x.shape[-1])),
                                                    -1, -2), ("swapped", "transpose")),
    ("sliding_window_mask", lambda T, window: ~((lambda d: (d >= 0) & (d < window))(
        np.arange(T)[:, None] - np.arange(T)[None, :])), ("polarity",)),
    ("multi_head_attention", _mha_from(lambda Q, K, m: mc.softmax(np.where(True if m is None else m,
                                                                           Q @ np.swapaxes(K, -1, -2)
                                                                           / np.sqrt(Q.shape[-1]), -np.inf),
                                                                  axis=-2)), ("axis -2", "over the queries",
                                                                              "wrong axis", "axis")),
    # ---- 14 circuits
    ("composition_score", lambda W_A, W_B: float(np.linalg.norm(W_A @ W_B) / (np.linalg.norm(W_A)
                                                                             * np.linalg.norm(W_B))), RIGHT),
    ("composition_score", lambda W_A, W_B: complex(np.linalg.norm(W_A @ W_B) / (np.linalg.norm(W_A)
                                                                               * np.linalg.norm(W_B))),
     ("complex",)),
    ("copying_score", lambda W: float(np.sum(np.linalg.eigvals(W)).real / np.sum(np.abs(np.linalg.eigvals(W)))),
     RIGHT),
    ("copying_score", lambda W: np.sum(np.linalg.eigvals(W)) / np.sum(np.abs(np.linalg.eigvals(W))), ("complex",)),
]


def verdict(name, fn, expect) -> str:
    """'accepted' / 'refused' for a right answer; 'named' / 'not named' / 'misnamed' / 'accepted' for a wrong one."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), np.errstate(all="ignore"):
        ok = getattr(check, name)(fn)
    text = out.getvalue().lower()
    if expect is None:
        return ("accepted" if ok else "refused"), text
    if ok:
        return "accepted", text
    said = "\n".join(ln for ln in text.splitlines() if not ln.strip().startswith("called "))
    if any(w.lower() in said for w in expect) and "not one of the mistakes i know" not in said:
        return "named", text
    return ("misnamed" if "looks like" in said or "found" in said else "not named"), text


def tally(verbose=False) -> dict:
    counts = {}
    for name, fn, expect in CORPUS:
        kind = "right" if expect is None else "wrong"
        v, text = verdict(name, fn, expect)
        counts[(kind, v)] = counts.get((kind, v), 0) + 1
        if verbose and (v not in ("named", "accepted") or (kind == "wrong" and v == "accepted")):
            print(f"--- {name} [{kind}: {v}] expect {expect}\n{text}")
    return counts


if __name__ == "__main__":
    import sys
    counts = tally(verbose="-v" in sys.argv)
    wrong = sum(n for (k, _), n in counts.items() if k == "wrong")
    right = sum(n for (k, _), n in counts.items() if k == "right")
    print(f"wrong answers {wrong}: named {counts.get(('wrong', 'named'), 0)}, not named "
          f"{counts.get(('wrong', 'not named'), 0)}, misnamed {counts.get(('wrong', 'misnamed'), 0)}, accepted "
          f"{counts.get(('wrong', 'accepted'), 0)}; right answers {right}: accepted "
          f"{counts.get(('right', 'accepted'), 0)}, refused {counts.get(('right', 'refused'), 0)}")
