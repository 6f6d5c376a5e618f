"""A second corpus of wrong answers, of the classes a blind learner's unnamed mistakes belong to,
on other exercises than the ones the learner wrote them for (so the diagnosis covers the class,
not the instance): a term used for another, an input or a field used for another, a matrix
transposed, a whole number off by one (head i + 1, offset + 1, window + 1), a boundary moved by
one, the opposite test, a float for an int, another rounding, two outputs swapped, a factor of
the sizes, a reversal, a term left out, an additive mask for a boolean one, nan where finite.

Each entry: (checker name, the learner's function, the words a right diagnosis contains: any of
them, in lower case). ``python -m tests.check.derived_corpus`` prints the tally.
"""
import contextlib
import io
import math

import numpy as np

import mha_course as mc
from mha_course import check


def _lin(x, W, b):
    return x @ W if b is None else x @ W + b


def _mha(x, p, h, mask=None, context=None, W_v=None, scale=None):
    c = x if context is None else context
    Q = mc.split_heads(_lin(x, p.W_q, p.b_q), h)
    K = mc.split_heads(_lin(c, p.W_k, p.b_k), h)
    V = mc.split_heads(_lin(c, p.W_v if W_v is None else W_v, p.b_v), h)
    s = Q @ np.swapaxes(K, -1, -2) / (math.sqrt(Q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = mc.softmax(s)
    return _lin(mc.combine_heads(w @ V), p.W_o, p.b_o), w


def _sdpa(Q, K, V, mask=None, scale=None):
    s = Q @ np.swapaxes(K, -1, -2) / (math.sqrt(Q.shape[-1]) if scale is None else scale)
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    w = mc.softmax(s)
    return w @ V, w


def _window(T, window, extra=0):
    t, s = np.arange(T)[:, None], np.arange(T)[None, :]
    return (s <= t) & (s > t - window - extra)


def _offset_mask(T, offset):
    return np.arange(offset + T)[None, :] <= offset + np.arange(T)[:, None]


def _doc_mask(ids, causal=False, k=0):
    ids = np.asarray(ids)
    same = ids[:, None] == ids[None, :]
    return same & np.tril(np.ones((len(ids),) * 2, bool), k) if causal else same


def _alibi(h):
    return np.array([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)]) if h & (h - 1) == 0 else mc.alibi_slopes(h)


CORPUS = [
    # 01
    ("project_qkv", lambda x, p: (_lin(x, p.W_q, p.b_q), _lin(x, p.W_k, p.b_k), _lin(x, p.W_k, p.b_k)),
     ["v: the expected k", "w_k used where"]),
    ("project_qkv", lambda x, p: (_lin(x, p.W_q.T, p.b_q), _lin(x, p.W_k, p.b_k), _lin(x, p.W_v, p.b_v)),
     ["transposed"]),
    ("qkv_param_count", lambda d, h, bias=False: 3 * d * d + (3 * d if bias else 0) + 1, ["one more"]),
    # 02
    ("causal_mask", lambda T: np.where(np.tril(np.ones((T, T), bool)), -np.inf, 0.0), ["polarity reversed"]),
    ("padding_mask", lambda L, S: (np.arange(S)[None, :] <= np.asarray(L)[:, None])[:, None, None, :],
     ["boundary", "<="]),
    ("softmax", lambda x, axis=-1: 2 * mc.softmax(x, axis), ["2 times"]),
    # 03
    ("head_queries", lambda X, W, h, i: X @ W[:, ((i - 1) % h) * (W.shape[1] // h):((i - 1) % h + 1) * (W.shape[1] // h)],
     ["i - 1"]),
    ("bug_source_position", lambda i, t, T, h: (i * T + t) // h + 1, ["one more"]),
    ("combine_heads", lambda x: mc.combine_heads(x[:, ::-1]), ["reverse"]),
    # 04
    ("multi_head_attention", lambda x, p, h, mask=None, context=None: _mha(x, p, h, mask, context, W_v=p.W_k),
     ["w_k used where params.w_v"]),
    ("causal_multi_head_attention",
     lambda x, p, h: _mha(x, p, h, np.tril(np.ones((x.shape[1],) * 2, bool), -1)), ["<", "boundary"]),
    ("layer_norm", lambda x, eps=1e-5: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True)),
     ["left out", "eps"]),
    ("param_count", lambda d, h, bias=False: 4 * d * d + (4 * d if bias else 0) - 1, ["one less"]),
    # 05
    ("flops", lambda T, d: (4 * T * T * d, 8 * T * d * d), ["swapped"]),
    ("crossover_seq_len", lambda d: d, ["1/2", "d_model returned"]),
    ("crossover_seq_len", lambda d: (2 * d) ** 2, ["square"]),
    ("max_seq_len", lambda b, B, h, bytes_per_number=4: math.ceil((b / (B * h * bytes_per_number)) ** 0.5),
     ["ceil", "rounded up"]),
    ("score_bytes", lambda B, h, T, bytes_per_number=4: h * h * T * T * bytes_per_number, ["h used where b"]),
    # 06
    ("document_mask", lambda ids, causal=False: _doc_mask(ids, causal, k=1), ["boundary", "<"]),
    ("cross_attention", lambda x, c, Wq, Wk, Wv, keep: _sdpa(x @ Wq, c @ Wq, c @ Wv, np.asarray(keep)[:, None, :]),
     ["w_q used where w_k"]),
    ("cross_attention", lambda x, c, Wq, Wk, Wv, keep: _sdpa(x[:, ::-1] @ Wq, c @ Wk, c @ Wv, np.asarray(keep)[:, None, :]),
     ["reverse"]),
    # 07
    ("sinusoidal_positions", lambda T, d: mc.sinusoidal_positions(T + 1, d)[1:], ["shifted", "t + 1", "start at 1"]),
    ("rope_scores", lambda Q, K, base=10000.0: check.catalogue()["rope_scores"].reference(Q, K, base) * math.sqrt(
        Q.shape[-1]), ["sqrt(d_k)"]),
    ("apply_rope", lambda x, positions, base=10000.0: mc.apply_rope(x, np.asarray(positions)[::-1], base),
     ["reverse"]),
    # 08
    ("scale_backward", lambda g, d: g * math.sqrt(d), ["d_k"]),
    ("split_heads_backward", lambda g: mc.combine_heads(g[:, ::-1]), ["reverse"]),
    ("shared_input_backward", lambda c, W_k, W_v, gK, gV: gK @ W_k.T, ["left out", "only the k path"]),
    ("softmax_backward", lambda weights, grad_weights: np.array(grad_weights), ["argument grad_weights, unchanged"]),
    ("shared_input_backward", lambda c, W_k, W_v, gK, gV: np.abs(gK @ W_k.T + gV @ W_v.T), ["absolute"]),
    ("matmul_backward", lambda a, b, g: (g @ b.T, a.T @ g / a.shape[0]), ["shape[0]", "1/n "]),
    # 09
    ("offset_causal_mask", lambda T, o: np.arange(o + T)[None, :] <= o + 1 + np.arange(T)[:, None],
     ["offset + 1", "boundary"]),
    ("kv_bytes_per_token", lambda L, h, hk, d, b: 2 * L * h * d * b, ["h used where h_kv", "instead of h_kv"]),
    ("kv_head_index", lambda h, hk: np.arange(h) // (h // hk) + 1, ["one more", "counted from 1"]),
    # 10
    ("sliding_window_mask", lambda T, w: _window(T, w, 1), ["window + 1", "boundary"]),
    ("tiled_attention", lambda Q, K, V, b: _sdpa(Q, K, V, scale=1.0)[0], ["sqrt(d_k)", "scale"]),
    ("sliding_window_mask", lambda T, w: _window(T, w).T, ["swapped", "transpose"]),
    # 11
    ("head_params", lambda d, h: (4 * d * d, 4 * d * (d // h)), ["swapped"]),
    ("score_std", lambda d: (math.sqrt(d), 1 / math.sqrt(d)), ["1/sqrt"]),
    ("head_params", lambda d, h: (4 * d * d / h, 4 * d * d), ["float", "whole number"]),
    # 12
    ("padding_mask", lambda L, S: np.where(np.arange(S)[None, :] < np.asarray(L)[:, None], 0.0, -np.inf)[
        :, None, None, :], ["additive"]),
    ("torch_state_dict", lambda p: {**check.catalogue()["torch_state_dict"].reference(p),
                                     "out_proj.weight": np.array(p.W_o)}, ["swapped", "transpose"]),
    ("torch_attn_mask", lambda keep: ~np.asarray(keep)[..., ::-1], ["reverse"]),
    # 13
    ("alibi_slopes", lambda h: _alibi(h)[::-1], ["reverse"]),
    ("interpolated_inv_freq", lambda d, b, f: b ** (-np.arange(0, d, 2) / d) / (2 * f), ["1/2"]),
    ("lse_merge", lambda outs, lses: sum(np.exp(l_ - np.logaddexp.reduce(np.stack(lses), 0)) * o
                                         for o, l_ in zip(outs, lses)), ["nan"]),
    ("interpolated_inv_freq", lambda d, b, f: check.catalogue()["interpolated_inv_freq"].reference(d, 2 * b, f),
     ["base * 2"]),
    ("alibi_slopes", lambda h: np.log(mc.alibi_slopes(h)), ["log"]),
    # 14
    ("patched_heads", lambda c, k, hd: (lambda o: (o.__setitem__((slice(None), hd - 1), k[:, hd - 1]), o)[1])(
        np.array(c, float)), ["head - 1"]),
    ("copying_score", lambda W: -check.catalogue()["copying_score"].reference(W), ["opposite sign"]),
    ("composition_score", lambda A, B: 1 / check.catalogue()["composition_score"].reference(A, B), ["1 /"]),
]


def verdict(name, fn) -> tuple:
    """(what the checker returned, what it printed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ok = getattr(check, name)(fn)
    return ok, out.getvalue()


def tally() -> dict:
    counts = {"named": [], "not named": [], "accepted": []}
    for name, fn, words in CORPUS:
        ok, said = verdict(name, fn)
        key = "accepted" if ok else "named" if any(w in said.lower() for w in words) else "not named"
        counts[key].append((name, said.strip().splitlines()[-1][:200]))
    return counts


if __name__ == "__main__":
    for key, rows in tally().items():
        print(f"{key}: {len(rows)}")
        for name, last in rows if key != "named" else ():
            print(f"   {name}: {last}")
