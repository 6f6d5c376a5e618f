"""Reading trained heads from their weights and their attention: the head detector (previous-token,
duplicate-token, prefix-matching and repeated-token induction scores), the copying and composition
scores, the QK and OV circuits of a model, and attention rollout (numpy only).

Shapes: ``B`` batch, ``T`` queries, ``S`` keys (``S = T`` here), ``V`` vocabulary, ``D = d_model``,
``h`` heads, ``d_k = D // h``, ``L`` layers. Layers and heads count from 0 in code.

Row-vector convention, as everywhere in the course (``x @ W``). For head ``h`` of a layer:

    QK^h = W_Q^h (W_K^h)^T / sqrt(d_k)   (D, D): score(t, s) = x_t QK^h x_s^T
    OV^h = W_V^h W_O^h                   (D, D): what the head writes, per unit of attention

The circuits over the vocabulary (Elhage et al. 2021, "A Mathematical Framework for Transformer
Circuits") are ``W_E QK^h W_E^T`` and ``W_E OV^h W_U``; composition of a layer-0 head A with a
layer-1 head B reads ``composition_score(OV^A, M)`` with M = QK^B (Q), (QK^B)^T (K), OV^B (V).

    >>> import numpy as np
    >>> w = np.eye(4, k=-1)[None]; w[0, 0, 0] = 1.0          # (h=1, T=4, S=4): the previous token
    >>> previous_token_score(w)
    array([1.])
    >>> copying_score(np.eye(3)), round(composition_score(np.eye(2), np.eye(2)), 4)   # 1 / sqrt(2)
    (1.0, 0.7071)

Taught in 14_circuits.ipynb (re-exported by ``lessons.circuits``).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .. import _validate
from ..attention import causal_mask
from . import _args
from . import model as train

__all__ = ["SCORE_NAMES", "previous_token_score", "duplicate_token_score", "prefix_matching_score", "head_scores",
           "repeat_induction_score", "copying_score", "composition_score", "qk_matrix", "ov_matrix", "qk_circuit",
           "positional_qk_circuit", "ov_circuit", "composition_scores", "composition_baseline_scores",
           "composition_baseline", "ov_spectrum", "attention_rollout"]

SCORE_NAMES = ("previous_token", "duplicate_token", "prefix_matching")


# ----------------------------------------------------------------------------- head scores
def _weights(weights) -> np.ndarray:
    """weights (B, h, T, T) or (h, T, T) -> (B, h, T, T) floats, each row a distribution (``_args.weights``)."""
    return _args.weights(weights, "weights")


def _tokens(tokens, w: np.ndarray, vocab) -> np.ndarray:
    """tokens (B, T) or (T,) -> (B, T) int ids (below ``vocab`` when given) matching weights (B, h, T, T)."""
    tok = _args.token_ids(tokens, vocab, "tokens")
    if tok.ndim == 1:
        tok = tok[None]
    B, _, T, _ = w.shape
    if tok.ndim != 2 or tok.shape[1] != T or tok.shape[0] not in (1, B):
        raise ValueError(f"tokens has shape {np.shape(tokens)} but weights has shape {w.shape}; "
                         f"tokens must be (B={B}, T={T}) or (T={T},)")
    return np.broadcast_to(tok, (B, T))


def _earlier(tok: np.ndarray) -> np.ndarray:
    """tokens (B, T) -> (B, T, S) bool: key s < t holds the query t's token."""
    T = tok.shape[1]
    before = causal_mask(T) & ~np.eye(T, dtype=bool)  # (T, S): s < t (causal, not itself)
    return (tok[:, :, None] == tok[:, None, :]) & before  # (B, T, S)


def _mean_over_repeats(w: np.ndarray, target: np.ndarray, earlier: np.ndarray) -> np.ndarray:
    """w (B, h, T, S), target (B, T, S) bool -> (h,): attention on target, mean over queries with a repeat."""
    has = earlier.any(-1)  # (B, T): the query's token occurred before
    if not has.any():
        raise ValueError("no query's token occurs earlier in its sequence, so there is nothing to score; "
                         "give sequences with repeated tokens (e.g. train.make_batch on the induction task)")
    on_target = (w * target[:, None]).sum(-1)  # (B, h, T, S) -> (B, h, T)
    return on_target.transpose(1, 0, 2)[:, has].mean(-1)  # (h, N) -> (h,)


def previous_token_score(weights) -> np.ndarray:
    """weights (B, h, T, T) or (h, T, T) -> (h,): the mean over queries t >= 1 (and the batch) of
    weights[..., h, t, t - 1], the attention on the key just before the query.

    >>> w = np.full((1, 3, 3), 1 / 3)                       # one head attending uniformly
    >>> previous_token_score(w).round(4)
    array([0.3333])
    """
    w = _weights(weights)
    T = w.shape[-1]
    return w[..., np.arange(1, T), np.arange(T - 1)].mean(axis=(0, 2))  # (B, h, T-1) -> (h,)


def duplicate_token_score(weights, tokens, vocab: Optional[int] = None) -> np.ndarray:
    """weights (B, h, T, T) or (h, T, T), tokens (B, T) or (T,) -> (h,): for each query t whose token
    occurred before (at s < t), the attention summed over those s; the mean over such queries
    (and the batch). Each row of weights is a distribution over keys; tokens are ids >= 0, below
    ``vocab`` when it is given (the model's vocabulary: config.vocab).

    >>> w = np.eye(3)[None]; w[0, 2] = [1, 0, 0]             # query 2 looks back at key 0
    >>> float(duplicate_token_score(w, [5, 6, 5])[0])         # token 5 repeats at position 2
    1.0
    """
    w = _weights(weights)
    earlier = _earlier(_tokens(tokens, w, vocab))
    return _mean_over_repeats(w, earlier, earlier)


def prefix_matching_score(weights, tokens, vocab: Optional[int] = None) -> np.ndarray:
    """weights (B, h, T, T) or (h, T, T), tokens (B, T) or (T,) -> (h,): for each query t whose token
    occurred before (at s < t), the attention summed over the positions s + 1 just after those
    occurrences (what came next last time: the induction target); the mean over such queries
    (and the batch). Weights and tokens are checked as by ``duplicate_token_score``.

    >>> w = np.eye(3)[None]; w[0, 2] = [0, 1, 0]             # query 2 looks at key 1, after the earlier 5
    >>> float(prefix_matching_score(w, [5, 6, 5])[0])
    1.0
    """
    w = _weights(weights)
    earlier = _earlier(_tokens(tokens, w, vocab))
    after = np.zeros_like(earlier)
    after[..., 1:] = earlier[..., :-1]  # (B, T, S): key s + 1 for every earlier occurrence s
    return _mean_over_repeats(w, after, earlier)


def head_scores(weights_by_layer, tokens, vocab: Optional[int] = None) -> dict:
    """[weights (B, h, T, T)] * L, tokens (B, T) -> {score name: (L, h)}: the head detector (tokens below
    ``vocab`` when it is given).

    >>> w = [np.full((1, 2, 3, 3), 1 / 3)]
    >>> head_scores(w, [1, 2, 1])["prefix_matching"].round(4)
    array([[0.3333, 0.3333]])
    """
    layers = _layer_weights(weights_by_layer)
    return {"previous_token": np.stack([previous_token_score(w) for w in layers]),
            "duplicate_token": np.stack([duplicate_token_score(w, tokens, vocab) for w in layers]),
            "prefix_matching": np.stack([prefix_matching_score(w, tokens, vocab) for w in layers])}


def _layer_weights(weights_by_layer) -> list:
    """[weights (B, h, T, T) or (h, T, T)] * L, L >= 1, of one shape -> [(B, h, T, T)] * L (``_args.weights``)."""
    if isinstance(weights_by_layer, (str, bytes, np.ndarray)) or not hasattr(weights_by_layer, "__iter__"):
        raise ValueError(f"weights_by_layer={weights_by_layer!r:.60}: give a list of each layer's weights "
                         "(B, h, T, T), e.g. train.forward(params, tokens, config)[1]")
    layers = [_args.weights(w, f"weights_by_layer[{n}]") for n, w in enumerate(weights_by_layer)]
    if not layers:
        raise ValueError("weights_by_layer is empty; give one layer's weights (B, h, T, T) or more")
    for n, w in enumerate(layers):
        if w.shape != layers[0].shape:
            raise ValueError(f"weights_by_layer[{n}] has shape {w.shape}; every layer's self-attention weights "
                             f"must have one shape (B, h, T, T) (layer 0: {layers[0].shape})")
    return layers



def repeat_induction_score(weights, half: int) -> np.ndarray:
    """weights (B, h, 2 half, 2 half) or (h, ...) on ``repeated_tokens`` -> (h,): the induction score, the
    mean over the second copy's queries t (and the batch) of weights[t, t - half + 1], the key just
    after the query's earlier occurrence: the diagonal stripe half - 1 below the main one.

    >>> w = np.zeros((1, 6, 6)); w[0, np.arange(6), np.maximum(np.arange(6) - 2, 0)] = 1   # half = 3
    >>> repeat_induction_score(w, 3)
    array([1.])
    """
    w = _weights(weights)
    half = _validate.positive_int(half, "half")
    if w.shape[-1] != 2 * half or half < 2:
        raise ValueError(f"weights have T = {w.shape[-1]} but half={half}: give the weights on repeated_tokens "
                         f"(T = 2 * half, half >= 2)")
    t = np.arange(half, 2 * half)  # the second copy's queries
    return w[..., t, t - half + 1].mean(axis=(0, 2))  # (B, h, half) -> (h,)


# ----------------------------------------------------------------------------- matrix scores
def _matrix(W, name: str) -> np.ndarray:
    try:
        a = np.asarray(W, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={W!r:.60} is not a matrix of numbers; give a 2-D float array") from None
    if a.ndim != 2 or not np.isfinite(a).all():
        raise ValueError(f"{name} has shape {np.shape(W)}; expected a finite 2-D matrix")
    return a


def copying_score(W) -> float:
    """W (n, n) -> float: sum(λ) / sum(|λ|) over its eigenvalues λ; 1 when every eigenvalue is
    positive (a copying head: OV maps a token to itself), -1 when all are negative (anti-copying).

    >>> copying_score(np.diag([2.0, 1.0])), copying_score(-np.eye(2))
    (1.0, -1.0)
    """
    a = _matrix(W, "W")
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"W has shape {a.shape}; the copying score needs a square matrix, e.g. the "
                         "OV circuit W_E W_V W_O W_U (V, V)")
    scale = np.abs(a).max() if a.size else 0.0
    if scale == 0:
        raise ValueError("W is zero (every eigenvalue is 0), so sum(λ) / sum(|λ|) is undefined")
    lam = np.linalg.eigvals(a / scale)  # (n,) complex in general; scaled so that no size under- or overflows
    total = np.abs(lam).sum()
    if total <= 1e-9 * a.shape[0]:  # eigvals of a nilpotent matrix are 0 up to rounding
        raise ValueError(f"every eigenvalue of W (shape {a.shape}) is 0 although W is not zero (W is nilpotent, "
                         "e.g. [[0, 1], [0, 0]]), so sum(λ) / sum(|λ|) is undefined; the copying score "
                         "needs a matrix with some nonzero eigenvalue")
    return float(lam.sum().real / total)


def composition_score(W_A, W_B) -> float:
    """W_A (n, m), W_B (m, k) -> float in [0, 1]: ||W_A W_B||_F / (||W_A||_F ||W_B||_F), how much of
    what W_A writes W_B reads (Elhage et al. 2021).

    >>> u = np.array([[1.0], [0.0]])
    >>> composition_score(u @ u.T, u @ u.T), composition_score(u @ u.T, np.array([[0.0, 0], [0, 1]]))
    (1.0, 0.0)
    """
    a, b = _matrix(W_A, "W_A"), _matrix(W_B, "W_B")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"W_A {a.shape} @ W_B {b.shape} does not fit: W_A's columns must equal W_B's rows")
    sa, sb = np.abs(a).max(initial=0.0), np.abs(b).max(initial=0.0)
    if sa == 0 or sb == 0:
        raise ValueError(f"W_{'A' if sa == 0 else 'B'} is zero, so the composition score is undefined")
    if not 1e-50 < min(sa, sb) <= max(sa, sb) < 1e50:  # the score does not change with scale: extreme matrices
        a, b = a / sa, b / sb  # are rescaled, which keeps every norm (and the product's) finite and nonzero
    return float(np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ----------------------------------------------------------------------------- circuits of a model
def _head_slices(params, config, layer: int, head: int):
    """-> W_Q^h, W_K^h, W_V^h (D, d_k), W_O^h (d_k, D) of the (D, D) layer that forward runs."""
    config = _args.model(params, config)
    layer, head = _args.layer(config, layer), _args.head(config, head)
    lp = train.layer_params(params, config, layer)
    d_k = config.d_model // config.h
    cols = slice(head * d_k, (head + 1) * d_k)
    return lp.W_q[:, cols], lp.W_k[:, cols], lp.W_v[:, cols], lp.W_o[cols]


def qk_matrix(params, config, layer: int, head: int) -> np.ndarray:
    """-> QK^h (D, D) = W_Q^h (W_K^h)^T / sqrt(d_k): the head's score is x_t QK^h x_s^T."""
    W_q, W_k, _, _ = _head_slices(params, config, layer, head)
    return W_q @ W_k.T / math.sqrt(W_q.shape[1])  # (D, d_k) x (d_k, D) -> (D, D)


def ov_matrix(params, config, layer: int, head: int) -> np.ndarray:
    """-> OV^h (D, D) = W_V^h W_O^h: what the head adds to the stream for each unit of attention on x_s."""
    _, _, W_v, W_o = _head_slices(params, config, layer, head)
    return W_v @ W_o  # (D, d_k) x (d_k, D) -> (D, D)


def qk_circuit(params, config, layer: int, head: int) -> np.ndarray:
    """-> (V, V): W_E QK^h W_E^T, the score of query token i for key token j (token part only).

    >>> from mha_course.lessons import checkpoints
    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> qk_circuit(params, config, 1, 0).shape
    (16, 16)
    """
    _args.model(params, config)
    return params.embed @ qk_matrix(params, config, layer, head) @ params.embed.T


def positional_qk_circuit(params, config, layer: int, head: int) -> np.ndarray:
    """-> (T, T): W_pos QK^h W_pos^T, the score of query position t for key position s (learned positions)."""
    _args.model(params, config)
    if params.pos is None:
        raise ValueError(f"config.positions={config.positions!r} has no position table; the positional "
                         "QK circuit needs positions='learned'")
    return params.pos @ qk_matrix(params, config, layer, head) @ params.pos.T


def ov_circuit(params, config, layer: int, head: int) -> np.ndarray:
    """-> (V, V): W_E OV^h W_U, the logits the head adds for output token j per unit of attention on token i."""
    _args.model(params, config)
    return params.embed @ ov_matrix(params, config, layer, head) @ params.unembed


def composition_scores(params, config, source: int = 0, reader: int = 1) -> dict:
    """-> {"Q", "K", "V": (h, h)}: [a, b] = the composition of head a of layer ``source`` with head b
    of layer ``reader``: composition_score(OV^a, QK^b), (OV^a, (QK^b)^T), (OV^a, OV^b)."""
    config = _args.model(params, config)
    source, reader = _args.layer(config, source, "source"), _args.layer(config, reader, "reader")
    if not source < reader:
        raise ValueError(f"source={source}, reader={reader}: the reader reads what the source wrote, so it must "
                         f"come later (0 <= source < reader < n_layers={config.n_layers})")
    h = config.h
    ov = [ov_matrix(params, config, source, a) for a in range(h)]
    qk = [qk_matrix(params, config, reader, b) for b in range(h)]
    ov_b = [ov_matrix(params, config, reader, b) for b in range(h)]
    readers = {"Q": qk, "K": [m.T for m in qk], "V": ov_b}
    return {kind: np.array([[composition_score(ov[a], mats[b]) for b in range(h)] for a in range(h)])
            for kind, mats in readers.items()}


def composition_baseline_scores(d_model: int, d_k: int, rng: np.random.Generator, n: int = 200) -> np.ndarray:
    """-> (n,): the composition scores of ``n`` pairs of random rank-d_k (D, D) matrices (Gaussian
    factors): what "no composition" looks like at this size, and how much it varies. The mean falls
    with the width, about like 1/sqrt(D) at fixed D / d_k.

    >>> s = composition_baseline_scores(32, 16, np.random.default_rng(0), 50)
    >>> s.shape, bool(0 < s.min() and s.max() < 1)
    ((50,), True)
    """
    d_model, d_k, n = (_validate.positive_int(v, name) for v, name in ((d_model, "d_model"), (d_k, "d_k"), (n, "n")))
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng={rng!r:.60} is not a numpy Generator; pass np.random.default_rng(seed)")
    if d_k > d_model:
        raise ValueError(f"d_k={d_k} > d_model={d_model}: a head's rank is at most d_model (d_k = d_model // h)")
    _validate.allocation(3 * 8 * d_model * d_model, f"random (d_model, d_model) = ({d_model}, {d_model}) products",
                         "choose a smaller d_model")

    def low_rank():
        return rng.normal(size=(d_model, d_k)) @ rng.normal(size=(d_k, d_model))  # (D, d_k) x (d_k, D)
    return np.array([composition_score(low_rank(), low_rank()) for _ in range(n)])


def composition_baseline(d_model: int, d_k: int, rng: np.random.Generator, n: int = 200) -> float:
    """-> the mean of ``composition_baseline_scores``: the random baseline of a composition score.

    >>> 0 < composition_baseline(32, 16, np.random.default_rng(0)) < 1
    True
    """
    return float(composition_baseline_scores(d_model, d_k, rng, n).mean())


def ov_spectrum(params, config, layer: int, head: int) -> np.ndarray:
    """-> (V,): the singular values of the OV circuit W_E OV^h W_U (V, V), largest first. At most d_k are
    nonzero (OV^h has rank <= d_k); a head that copies many tokens spreads its size over many of them.

    >>> from mha_course.lessons import checkpoints
    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> ov_spectrum(params, config, 1, 1).shape
    (16,)
    """
    return np.linalg.svd(ov_circuit(params, config, layer, head), compute_uv=False)



# ----------------------------------------------------------------------------- what attention explains
def attention_rollout(weights_by_layer) -> np.ndarray:
    """[weights (B, h, T, T)] * L -> (B, T, T): rollout (Abnar & Zuidema 2020): each layer's
    head-averaged weights mixed half and half with the identity (the residual), multiplied
    from the first layer up; row t = how much each input position flows into position t.

    >>> r = attention_rollout([np.full((1, 1, 2, 2), 0.5)])
    >>> r[0]
    array([[0.75, 0.25],
           [0.25, 0.75]])
    """
    layers = _layer_weights(weights_by_layer)  # [(B, h, T, T)] * L
    out = None
    for w in layers:
        a = 0.5 * w.mean(1) + 0.5 * np.eye(w.shape[-1])  # (B, T, T): heads averaged, the residual added
        out = a if out is None else a @ out  # (B, T, T) x (B, T, T): the later layer reads the earlier
    return out


