"""Reading what trained heads do: head scores, QK and OV circuits, composition, direct logit
attribution, activation and path patching, ablations, attention rollout, and the induction
phase change, on the tiny attention-only models of notebook 08 (numpy only).

Shapes: ``B`` batch, ``T`` queries, ``S`` keys (``S = T`` here), ``V`` vocabulary,
``D = d_model``, ``h`` heads, ``d_k = D // h``, ``L`` layers. Layers and heads count from 0
in code (the notebook calls layer 0 "layer 1").

Row-vector convention, as everywhere in the course (``x @ W``). For head ``h`` of a layer:

    QK^h = W_Q^h (W_K^h)^T / sqrt(d_k)   (D, D): score(t, s) = x_t QK^h x_s^T
    OV^h = W_V^h W_O^h                   (D, D): what the head writes, per unit of attention

The circuits over the vocabulary (Elhage et al. 2021, "A Mathematical Framework for Transformer
Circuits") are ``W_E QK^h W_E^T`` and ``W_E OV^h W_U``; composition of a layer-0 head A with a
layer-1 head B reads ``composition_score(OV^A, M)`` with M = QK^B (Q), (QK^B)^T (K), OV^B (V).

Interventions run the model with ``train.forward(..., patch=hook)``: the hook gets each layer's
``mha.Trace`` and returns what the layer adds to the residual stream (one forward pass, never
a copy). They need ``config.layer_norm`` False (the models of notebook 08), so that the residual
stream is an exact sum of the embedding and every head's output.

    >>> import numpy as np
    >>> w = np.eye(4, k=-1)[None]; w[0, 0, 0] = 1.0          # (h=1, T=4, S=4): the previous token
    >>> previous_token_score(w)
    array([1.])
    >>> copying_score(np.eye(3)), round(composition_score(np.eye(2), np.eye(2)), 4)   # 1 / sqrt(2)
    (1.0, 0.7071)

Taught in 14_circuits.ipynb.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, NamedTuple, Optional

import numpy as np

from .. import _validate
from ..attention import causal_mask
from ..mha import trace
from . import checkpoints, misconceptions, training
from . import model as train

__all__ = ["trajectory_arrays", "previous_token_score", "duplicate_token_score", "prefix_matching_score", "head_scores",
           "SCORE_NAMES", "copying_score", "composition_score", "qk_matrix", "ov_matrix", "qk_circuit",
           "positional_qk_circuit", "ov_circuit", "composition_scores", "composition_baseline",
           "composition_baseline_scores", "ov_spectrum", "repeated_tokens", "repeat_induction_score",
           "attribution_patching", "SEEDS", "seed_results", "load_seed_results",
           "seed_results_path", "formed", "seed_summary", "compare_over_seeds",
           "run_with_cache", "LogitAttribution", "direct_logit_attribution", "PatchPair", "make_pair",
           "logit_difference", "patch_heads", "patching_effect", "head_patching", "position_patching",
           "path_patching", "ABLATIONS", "ablate_heads", "ablation_losses", "attention_rollout",
           "key_occlusion", "Trajectory", "PHASE_CHANGE_CONFIGS", "PHASE_CHANGE_EVERY", "train_trajectory",
           "formation_step", "save_trajectories", "load_trajectories", "trajectory_path"]

SCORE_NAMES = ("previous_token", "duplicate_token", "prefix_matching")


# ----------------------------------------------------------------------------- head scores
def _weights(weights) -> np.ndarray:
    """weights (B, h, T, T) or (h, T, T) -> (B, h, T, T) floats; a ValueError names the layout."""
    w = np.asarray(weights, dtype=float)
    if w.ndim == 3:
        w = w[None]
    if w.ndim != 4 or w.shape[-1] != w.shape[-2] or w.shape[-1] < 2:
        raise ValueError(f"weights has shape {np.shape(weights)}; expected self-attention weights "
                         "(B, h, T, T) or (h, T, T) with T >= 2 (one layer's weights from train.forward)")
    return w


def _tokens(tokens, w: np.ndarray) -> np.ndarray:
    """tokens (B, T) or (T,) -> (B, T) ints matching weights (B, h, T, T)."""
    tok = np.asarray(tokens)
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


def duplicate_token_score(weights, tokens) -> np.ndarray:
    """weights (B, h, T, T) or (h, T, T), tokens (B, T) or (T,) -> (h,): for each query t whose token
    occurred before (at s < t), the attention summed over those s; the mean over such queries
    (and the batch).

    >>> w = np.eye(3)[None]; w[0, 2] = [1, 0, 0]             # query 2 looks back at key 0
    >>> float(duplicate_token_score(w, [5, 6, 5])[0])         # token 5 repeats at position 2
    1.0
    """
    w = _weights(weights)
    earlier = _earlier(_tokens(tokens, w))
    return _mean_over_repeats(w, earlier, earlier)


def prefix_matching_score(weights, tokens) -> np.ndarray:
    """weights (B, h, T, T) or (h, T, T), tokens (B, T) or (T,) -> (h,): for each query t whose token
    occurred before (at s < t), the attention summed over the positions s + 1 just after those
    occurrences (what came next last time: the induction target); the mean over such queries
    (and the batch).

    >>> w = np.eye(3)[None]; w[0, 2] = [0, 1, 0]             # query 2 looks at key 1, after the earlier 5
    >>> float(prefix_matching_score(w, [5, 6, 5])[0])
    1.0
    """
    w = _weights(weights)
    earlier = _earlier(_tokens(tokens, w))
    after = np.zeros_like(earlier)
    after[..., 1:] = earlier[..., :-1]  # (B, T, S): key s + 1 for every earlier occurrence s
    return _mean_over_repeats(w, after, earlier)


def head_scores(weights_by_layer, tokens) -> dict:
    """[weights (B, h, T, T)] * L, tokens (B, T) -> {score name: (L, h)}: the head detector.

    >>> w = [np.full((1, 2, 3, 3), 1 / 3)]
    >>> head_scores(w, [1, 2, 1])["prefix_matching"].round(4)
    array([[0.3333, 0.3333]])
    """
    return {"previous_token": np.stack([previous_token_score(w) for w in weights_by_layer]),
            "duplicate_token": np.stack([duplicate_token_score(w, tokens) for w in weights_by_layer]),
            "prefix_matching": np.stack([prefix_matching_score(w, tokens) for w in weights_by_layer])}


def repeated_tokens(vocab: int, half: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """-> tokens (n, 2 * half): ``half`` uniformly random tokens, then the same ``half`` again: the
    standard induction probe (Olsson et al. 2022; TransformerLens's and ARENA's repeated random tokens).

    >>> t = repeated_tokens(16, 4, 2, np.random.default_rng(0))
    >>> t.shape, bool((t[:, :4] == t[:, 4:]).all())
    ((2, 8), True)
    """
    vocab, half, n = (_validate.positive_int(v, k) for v, k in ((vocab, "vocab"), (half, "half"), (n, "n")))
    if half < 2:
        raise ValueError(f"half={half}: the repeated block needs at least 2 tokens")
    block = rng.integers(0, vocab, size=(n, half))  # (n, half)
    return np.concatenate([block, block], axis=1)  # (n, 2 * half)


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
    a = np.asarray(W, dtype=float)
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
    a, b = a / sa, b / sb  # the score does not change with scale; this keeps every norm finite and nonzero
    return float(np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# ----------------------------------------------------------------------------- circuits of a model
def _head_slices(params, config, layer: int, head: int):
    """-> W_Q^h, W_K^h, W_V^h (D, d_k), W_O^h (d_k, D) of the (D, D) layer that forward runs."""
    if not (0 <= layer < config.n_layers and 0 <= head < config.h):
        raise ValueError(f"layer={layer}, head={head} out of range: layers 0..{config.n_layers - 1}, "
                         f"heads 0..{config.h - 1}")
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

    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> qk_circuit(params, config, 1, 0).shape
    (16, 16)
    """
    return params.embed @ qk_matrix(params, config, layer, head) @ params.embed.T


def positional_qk_circuit(params, config, layer: int, head: int) -> np.ndarray:
    """-> (T, T): W_pos QK^h W_pos^T, the score of query position t for key position s (learned positions)."""
    if params.pos is None:
        raise ValueError(f"config.positions={config.positions!r} has no position table; the positional "
                         "QK circuit needs positions='learned'")
    return params.pos @ qk_matrix(params, config, layer, head) @ params.pos.T


def ov_circuit(params, config, layer: int, head: int) -> np.ndarray:
    """-> (V, V): W_E OV^h W_U, the logits the head adds for output token j per unit of attention on token i."""
    return params.embed @ ov_matrix(params, config, layer, head) @ params.unembed


def composition_scores(params, config, source: int = 0, reader: int = 1) -> dict:
    """-> {"Q", "K", "V": (h, h)}: [a, b] = the composition of head a of layer ``source`` with head b
    of layer ``reader``: composition_score(OV^a, QK^b), (OV^a, (QK^b)^T), (OV^a, OV^b)."""
    if not 0 <= source < reader < config.n_layers:
        raise ValueError(f"source={source}, reader={reader}: need 0 <= source < reader < n_layers={config.n_layers}")
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
    if d_k > d_model:
        raise ValueError(f"d_k={d_k} > d_model={d_model}: a head's rank is at most d_model (d_k = d_model // h)")

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

    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> ov_spectrum(params, config, 1, 1).shape
    (16,)
    """
    return np.linalg.svd(ov_circuit(params, config, layer, head), compute_uv=False)


# ----------------------------------------------------------------------------- running with hooks
def _check_no_norm(config) -> None:
    if config.layer_norm:
        raise ValueError("config.layer_norm=True: the residual stream is no longer a sum of head outputs; "
                         "these tools need a model without layer norm (notebook 08's models)")


def _layer_out(params, layer: int, contributions: np.ndarray) -> np.ndarray:
    """contributions (B, h, T, D) -> the layer's output (B, T, D): their sum (+ b_o)."""
    b_o = params.layers[layer].b_o
    return contributions.sum(1) + (0 if b_o is None else b_o)


def run_with_cache(params, tokens, config) -> tuple[np.ndarray, list]:
    """tokens (B, T) -> logits (B, T, V), [contributions (B, h, T, D)] * L: what each head adds to the stream.

    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> tokens = train.make_batch(config, np.random.default_rng(0), 2).tokens
    >>> logits, heads = run_with_cache(params, tokens, config)
    >>> bool(np.allclose(logits, train.forward(params, tokens, config)[0])), heads[1].shape
    (True, (2, 2, 24, 32))
    """
    _check_no_norm(config)
    cache = []

    def record(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        cache.append(c)
        return _layer_out(params, layer, c)
    logits, _ = train.forward(params, tokens, config, patch=record)
    return logits, cache


class LogitAttribution(NamedTuple):
    """Direct logit attribution of the target token: ``embed`` (the direct path from the embeddings),
    ``heads`` (L, h), and ``total`` = embed + heads.sum(), the mean target logit (centred)."""
    embed: float
    heads: np.ndarray
    total: float


def direct_logit_attribution(params, config, batch) -> LogitAttribution:
    """Batch -> LogitAttribution: each component's share of the target's centred logit (the logit minus
    the mean logit over the vocabulary), averaged over the scored positions. Exact: no layer norm.
    """
    logits, cache = run_with_cache(params, batch.tokens, config)
    U = params.unembed - params.unembed.mean(1, keepdims=True)  # (D, V): centred logits
    direction = U.T[batch.targets]  # (B, T, D): the unembedding of each target

    def share(part):  # part (..., B, T, D) -> (...): mean over scored positions of part . direction
        return (part * direction).sum(-1)[..., batch.scored].mean(-1)
    embed = float(share(train.embed(params, batch.tokens, config)))
    heads = np.stack([share(c.transpose(1, 0, 2, 3)) for c in cache])  # (L, h)
    return LogitAttribution(embed, heads, embed + float(heads.sum()))


# ----------------------------------------------------------------------------- activation patching
class PatchPair(NamedTuple):
    """A clean and a corrupted batch (B, T) that differ at one position; the query ``position`` (one for
    the whole batch), its ``answer`` (B,) (the token after the query's earlier occurrence) and the
    ``distractor`` (B,) (the token the corruption wrote)."""
    clean: np.ndarray
    corrupt: np.ndarray
    position: int
    answer: np.ndarray
    distractor: np.ndarray
    changed: int


def make_pair(config, rng: np.random.Generator, n: int = 64, corrupt: str = "key", repeat: int = 8) -> PatchPair:
    """-> PatchPair of ``n`` induction sequences [noise][A (repeat)][A (repeat)] (the task of notebook 08),
    queried at T - 2 (the last A[repeat - 2], whose answer is A[repeat - 1]).

    ``corrupt="key"``: the earlier A[repeat - 2] is replaced (nothing to match: the induction head's
    query finds no key); ``"value"``: the token after it, A[repeat - 1] (what gets copied), is replaced.
    The new token comes from outside A, so the corrupted model has no right answer to find.

    >>> pair = make_pair(checkpoints.CHECKPOINT_CONFIGS["induction"], np.random.default_rng(0), 2)
    >>> pair.clean.shape, pair.position, pair.changed
    ((2, 24), 22, 14)
    """
    if corrupt not in ("key", "value"):
        raise ValueError(f"corrupt={corrupt!r}; choose 'key' (the earlier occurrence) or 'value' (the token after it)")
    T, V = config.seq_len, config.vocab
    if not (3 <= repeat <= T // 2 and repeat < V):
        raise ValueError(f"repeat={repeat} must be in 3..seq_len // 2 = {T // 2} and below vocab={V}")
    perm = np.argsort(rng.random((n, V)), axis=1)  # (n, V): a random order of the vocabulary per row
    A, outside = perm[:, :repeat], perm[:, repeat]  # (n, repeat) distinct tokens; (n,) one more
    noise = rng.integers(0, V, size=(n, T - 2 * repeat))
    clean = np.concatenate([noise, A, A], axis=1)  # (n, T)
    position = T - 2
    changed = position - repeat + (1 if corrupt == "value" else 0)
    bad = clean.copy()
    bad[:, changed] = outside
    return PatchPair(clean, bad, position, clean[:, position + 1], outside, changed)


def logit_difference(logits, pair: PatchPair) -> float:
    """logits (B, T, V) -> the mean over the batch of logit(answer) - logit(distractor) at the query."""
    at = np.asarray(logits)[:, pair.position]  # (B, V)
    rows = np.arange(at.shape[0])
    return float((at[rows, pair.answer] - at[rows, pair.distractor]).mean())


def _positions_mask(T: int, positions) -> np.ndarray:
    """positions None (all) or a list of ints in 0..T-1 -> (T,) bool; a ValueError names a position out of range."""
    keep = np.zeros(T, dtype=bool)
    if positions is None:
        keep[:] = True
        return keep
    pos = np.asarray(positions)
    if pos.ndim != 1 or (pos.size and pos.dtype.kind not in "iu"):
        raise ValueError(f"positions={positions!r}: give a list of whole positions in 0..{T - 1} (or None: all)")
    bad = [int(p) for p in pos if not 0 <= p < T]
    if bad:
        raise ValueError(f"positions {bad} are outside 0..{T - 1} (T = {T}); negative positions are not "
                         "counted from the end here, give t itself")
    keep[pos.astype(int)] = True
    return keep  # (T,)


def _check_heads(config, heads, name: str = "heads") -> set:
    """[(layer, head)] -> the set of pairs, each checked to exist in the model (a ValueError names any other)."""
    try:
        pairs = [(a, b) for a, b in heads]
    except (TypeError, ValueError):
        raise ValueError(f"{name}={heads!r}: give a list of (layer, head) pairs, e.g. [(0, 1)]") from None
    bad = [p for p in pairs if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in p)
           or not (0 <= p[0] < config.n_layers and 0 <= p[1] < config.h)]
    if bad:
        raise ValueError(f"{name} {bad} do not exist: layers 0..{config.n_layers - 1}, heads 0..{config.h - 1} "
                         "(whole numbers, counted from 0)")
    return {(int(a), int(b)) for a, b in pairs}


def _check_same_tokens(target, source) -> None:
    t, s = np.shape(target), np.shape(source)
    if len(t) != 2 or t != s:
        raise ValueError(f"target has shape {t} and source {s}: patching needs two batches of the same (B, T)")


def patch_heads(params, config, target, source, heads, positions=None) -> np.ndarray:
    """-> logits (B, T, V) of the run on ``target`` tokens in which the heads [(layer, head)] write, at
    ``positions`` (None: all), what they wrote in the run on ``source`` tokens. Later layers see
    the change (they are recomputed). Clean into corrupted (denoising) finds what is sufficient to
    restore the answer; corrupted into clean (noising) finds what is necessary (Heimersheim & Nanda 2024).
    ``target`` and ``source`` are (B, T) of one shape; a head or position that does not exist is a ValueError.
    """
    _check_same_tokens(target, source)
    _check_heads(config, heads)
    _positions_mask(np.shape(target)[1], positions)
    return _patched(params, config, target, run_with_cache(params, source, config)[1], heads, positions)


def _patched(params, config, target, cache, heads, positions) -> np.ndarray:
    """patch_heads with the source run's contributions ``cache`` already computed."""
    chosen = _check_heads(config, heads)
    keep = _positions_mask(np.shape(target)[1], positions)

    def hook(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        for head in range(config.h):
            if (layer, head) in chosen:
                c[:, head, keep] = cache[layer][:, head, keep]
        return _layer_out(params, layer, c)
    return train.forward(params, target, config, patch=hook)[0]


def _restorable(clean: float, bad: float) -> None:
    if not abs(clean - bad) > 1e-9 * max(1.0, abs(clean)):
        raise ValueError(f"the clean and corrupted runs have the same logit difference ({clean:.6g} and {bad:.6g}), "
                         "so there is nothing to restore and the share is undefined; corrupt the input "
                         "(make_pair changes one token)")


def _ends(params, config, pair: PatchPair) -> tuple:
    """-> (LD clean, LD corrupted, the clean run's contributions)."""
    logits, cache = run_with_cache(params, pair.clean, config)
    corrupt = _patched(params, config, pair.corrupt, cache, [], None)  # the same code path as every patched run
    return logit_difference(logits, pair), logit_difference(corrupt, pair), cache


def patching_effect(params, config, pair: PatchPair, heads, positions=None) -> float:
    """-> the share of the logit difference restored by patching ``heads`` (at ``positions``) from the
    clean run into the corrupted one: (LD_patched - LD_corrupt) / (LD_clean - LD_corrupt); 0 = no
    effect, 1 = fully restored.

    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> pair = make_pair(config, np.random.default_rng(0), 16)
    >>> all_heads = [(layer, head) for layer in range(2) for head in range(2)]
    >>> round(patching_effect(params, config, pair, all_heads), 6), round(patching_effect(params, config, pair, []), 6)
    (1.0, 0.0)
    """
    clean, bad, cache = _ends(params, config, pair)
    return _share(params, config, pair, heads, positions, clean, bad, cache)


def _share(params, config, pair, heads, positions, clean, bad, cache) -> float:
    _restorable(clean, bad)
    patched = logit_difference(_patched(params, config, pair.corrupt, cache, heads, positions), pair)
    return (patched - bad) / (clean - bad)


def head_patching(params, config, pair: PatchPair) -> np.ndarray:
    """-> (L, h): ``patching_effect`` of each head alone, at every position."""
    ends = _ends(params, config, pair)
    return np.array([[_share(params, config, pair, [(layer, head)], None, *ends) for head in range(config.h)]
                      for layer in range(config.n_layers)])


def position_patching(params, config, pair: PatchPair) -> np.ndarray:
    """-> (L, h, T): ``patching_effect`` of each head at each single position (0 after the query)."""
    ends, T = _ends(params, config, pair), pair.clean.shape[1]
    return np.array([[[_share(params, config, pair, [(layer, head)], [t], *ends) if t <= pair.position else 0.0
                       for t in range(T)] for head in range(config.h)] for layer in range(config.n_layers)])


def path_patching(params, config, pair: PatchPair, sender, receiver, via: str = "kv") -> float:
    """-> the share of the logit difference restored through one path only: the corrupted run, in which
    the ``receiver`` (layer, head) reads, on its key/value side (``via="kv"``), its query side ("q")
    or both ("qkv"), the residual stream with the ``sender`` (layer, head)'s clean output in place of
    its corrupted one. Every other head reads the corrupted stream; the receiver must be in the last layer.
    """
    if via not in ("q", "kv", "qkv"):
        raise ValueError(f"via={via!r}; choose 'q' (the receiver's queries), 'kv' (its keys and values) or 'qkv'")
    _check_heads(config, [sender], "sender")
    _check_heads(config, [receiver], "receiver")
    (s_layer, s_head), (r_layer, r_head) = sender, receiver
    if not s_layer < r_layer == config.n_layers - 1:
        raise ValueError(f"sender layer {s_layer}, receiver layer {r_layer}: the sender must come first and "
                         f"the receiver be in the last layer ({config.n_layers - 1})")
    _, clean_cache = run_with_cache(params, pair.clean, config)
    _, bad_cache = run_with_cache(params, pair.corrupt, config)
    delta = clean_cache[s_layer][:, s_head] - bad_cache[s_layer][:, s_head]  # (B, T, D)
    lp = train.layer_params(params, config, r_layer)
    rope = config.rope_base if config.positions == "rope" else None

    def hook(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        if layer == r_layer:
            x = tr["X"]  # the receiver layer's (corrupted) input
            x_q = x + delta if "q" in via else x
            x_kv = x + delta if "kv" in via else x
            mixed = trace(x_q, lp, config.h, causal_mask(x.shape[1]), context=x_kv, rope_base=rope)
            c[:, r_head] = misconceptions.head_contributions(mixed, params.layers[layer].W_o)[:, r_head]
        return _layer_out(params, layer, c)
    clean, bad, _ = _ends(params, config, pair)
    _restorable(clean, bad)
    patched = logit_difference(train.forward(params, pair.corrupt, config, patch=hook)[0], pair)
    return (patched - bad) / (clean - bad)


def attribution_patching(params, config, pair: PatchPair) -> np.ndarray:
    """-> (L, h): the first-order estimate of ``head_patching`` from ONE forward and ONE backward pass
    of the corrupted run (attribution patching; Nanda 2023, Syed et al. 2023): each head's share is
    g . (c_clean - c_corrupt) / (LD_clean - LD_corrupt), with g the gradient of the logit difference
    with respect to the head's output c (B, T, D), summed over the batch, positions and D.
    Exact where the model is linear in the head's output (a last-layer head); an approximation
    through later layers' softmax (a layer-1 head read by layer 2).

    >>> config, params, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
    >>> attribution_patching(params, config, make_pair(config, np.random.default_rng(0), 8)).shape
    (2, 2)
    """
    _check_no_norm(config)
    _, clean_cache = run_with_cache(params, pair.clean, config)
    _, bad_cache = run_with_cache(params, pair.corrupt, config)
    tape = []
    logits, _ = train.forward(params, pair.corrupt, config, tape=tape)
    tape.pop()  # the last residual stream
    B = pair.corrupt.shape[0]
    rows = np.arange(B)
    g_logits = np.zeros_like(logits)  # (B, T, V): d LD / d logits
    np.add.at(g_logits, (rows, pair.position, pair.answer), 1 / B)
    np.add.at(g_logits, (rows, pair.position, pair.distractor), -1 / B)
    g_x = g_logits @ params.unembed.T  # (B, T, V) x (V, D) -> (B, T, D): d LD / d the last residual stream
    grads = [None] * config.n_layers
    for layer in reversed(range(config.n_layers)):
        grads[layer] = g_x  # d LD / d (this layer's output), which each head's output adds to
        g_x = g_x + tape[layer][1](g_x)[0]
    clean = logit_difference(train.forward(params, pair.clean, config)[0], pair)
    bad = logit_difference(logits, pair)
    _restorable(clean, bad)
    return np.stack([np.einsum("bhtd,btd->h", clean_cache[layer] - bad_cache[layer], grads[layer])
                     for layer in range(config.n_layers)]) / (clean - bad)  # (L, h)


# ----------------------------------------------------------------------------- ablations
ABLATIONS = ("zero", "mean", "resample")


def ablate_heads(params, config, tokens, heads, kind: str = "zero", reference=None) -> Callable:
    """-> a ``patch`` hook for train.forward / training.metrics that ablates heads [(layer, head)]:
    ``"zero"`` writes nothing; ``"mean"`` writes the head's mean output per position over the
    ``reference`` batch (B', T); ``"resample"`` writes its output on ``reference`` (B, T), another
    batch of the same shape (a different sequence for each row). ``tokens`` only fixes the shape.
    """
    if kind not in ABLATIONS:
        raise ValueError(f"kind={kind!r}; choose one of {ABLATIONS}")
    tokens = np.asarray(tokens)
    if tokens.ndim != 2:
        raise ValueError(f"tokens has shape {tokens.shape}; give the batch's tokens (B, T)")
    chosen = _check_heads(config, heads)
    if kind != "zero":
        if reference is None:
            raise ValueError(f"kind={kind!r} needs reference tokens (B, T): a batch drawn apart from the tokens")
        reference = np.asarray(reference)
        if reference.ndim != 2 or reference.shape[1] != tokens.shape[1] or (kind == "resample" and reference.shape != tokens.shape):
            raise ValueError(f"reference has shape {reference.shape}, tokens {tokens.shape}: mean needs the same T, "
                             "resample the same (B, T)")
        _, cache = run_with_cache(params, reference, config)

    def hook(layer, tr):
        c = misconceptions.head_contributions(tr, params.layers[layer].W_o)  # (B, h, T, D)
        for head in range(config.h):
            if (layer, head) in chosen:
                if kind == "zero":
                    c[:, head] = 0
                elif kind == "mean":
                    c[:, head] = cache[layer][:, head].mean(0)  # (T, D): the mean over the reference batch
                else:
                    c[:, head] = cache[layer][:, head]
        return _layer_out(params, layer, c)
    return hook


def ablation_losses(params, config, batch, reference, heads_sets) -> dict:
    """-> {kind: (len(heads_sets),)}: the loss increase on ``batch`` when each set of heads is ablated
    that way (``reference`` tokens for mean and resample), against the intact model's loss."""
    _check_no_norm(config)
    base = training.metrics(params, batch, config).loss
    return {kind: np.array([training.metrics(params, batch, config,
                                          patch=ablate_heads(params, config, batch.tokens, heads, kind, reference)
                                          ).loss - base for heads in heads_sets])
            for kind in ABLATIONS}


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
    layers = [np.asarray(w, dtype=float) for w in weights_by_layer]
    if not layers:
        raise ValueError("weights_by_layer is empty; give one layer's weights (B, h, T, T) or more")
    for n, w in enumerate(layers):
        if w.ndim != 4 or w.shape[-1] != w.shape[-2] or w.shape != layers[0].shape:
            raise ValueError(f"layer {n}'s weights have shape {w.shape}; rollout needs every layer's self-attention "
                             f"weights (B, h, T, T) of one shape (layer 0: {layers[0].shape})")
    out = None
    for w in layers:
        a = 0.5 * w.mean(1) + 0.5 * np.eye(w.shape[-1])  # (B, T, T): heads averaged, the residual added
        out = a if out is None else a @ out  # (B, T, T) x (B, T, T): the later layer reads the earlier
    return out


def key_occlusion(params, config, pair: PatchPair, rng: np.random.Generator) -> np.ndarray:
    """-> (T,): for each position s <= the query, how much the answer's logit at the query falls when
    the token at s is replaced by a random other token (mean over the batch): an input ablation."""
    tokens, t = pair.clean, pair.position
    rows = np.arange(tokens.shape[0])
    base = train.forward(params, tokens, config)[0][rows, t, pair.answer]  # (B,)
    drop = np.zeros(tokens.shape[1])
    for s in range(t + 1):
        other = tokens.copy()
        other[:, s] = (tokens[:, s] + rng.integers(1, config.vocab, size=len(rows))) % config.vocab
        drop[s] = float((base - train.forward(params, other, config)[0][rows, t, pair.answer]).mean())
    return drop


# ----------------------------------------------------------------------------- the phase change
class Trajectory(NamedTuple):
    """A training run seen every few steps. ``steps`` (n,) updates done; ``losses`` (steps,) the training
    loss of every step; at each checkpoint, on a fixed probe batch: ``probe_loss`` (n,), ``scores``
    (n, 3, L, h) (SCORE_NAMES order), ``k_composition`` (n, h, h) (layer 0 -> layer 1; (n, 0, 0) for one
    layer) and ``weights`` (n, L, h, T, T) on probe sequence 0, whose tokens are ``tokens`` (T,)."""
    config: train.Config
    steps: np.ndarray
    losses: np.ndarray
    probe_loss: np.ndarray
    scores: np.ndarray
    k_composition: np.ndarray
    weights: np.ndarray
    tokens: np.ndarray


# The runs of notebook 14 §2: notebook 08's two-layer induction model, and the same with one layer.
PHASE_CHANGE_CONFIGS = {"two_layer": checkpoints.CHECKPOINT_CONFIGS["induction"],
                        "one_layer": checkpoints.CHECKPOINT_CONFIGS["induction"]._replace(n_layers=1)}
PHASE_CHANGE_EVERY = 5


def _observe(params, config, probe) -> tuple:
    logits, weights = train.forward(params, probe.tokens, config)
    scores = head_scores(weights, probe.tokens)
    comp = (composition_scores(params, config)["K"] if config.n_layers > 1 else np.zeros((0, 0)))
    return (training.metrics(params, probe, config).loss, np.stack([scores[n] for n in SCORE_NAMES]), comp,
            np.stack(weights)[:, 0].astype(np.float32))


def train_trajectory(config, every: int = PHASE_CHANGE_EVERY, progress: bool = False,
                     callback: Optional[Callable] = None, n_probe: int = 64) -> Trajectory:
    """config -> Trajectory: ``training.train(config)`` (the same run, the same numbers), observed at
    step 0 and every ``every`` steps on a probe batch of ``n_probe`` sequences (seed config.seed + 3).
    ``callback(step, metrics, params)`` is passed on to training.train (a live loss plot)."""
    _check_no_norm(config)
    probe = train.make_batch(config, np.random.default_rng(config.seed + 3), n_probe)
    seen = [(0, _observe(train.init_model(config), config, probe))]

    def watch(step, metrics, params):
        if (step + 1) % every == 0:
            seen.append((step + 1, _observe(params, config, probe)))
        return bool(callback(step, metrics, params)) if callback is not None else False
    _, history = training.train(config, callback=watch, progress=progress)
    parts = list(zip(*[obs for _, obs in seen]))
    return Trajectory(config, np.array([s for s, _ in seen]), history.losses, np.array(parts[0]),
                      np.stack(parts[1]), np.stack(parts[2]), np.stack(parts[3]), probe.tokens[0])


def formation_step(trajectory: Trajectory, threshold: float = 0.5) -> Optional[int]:
    """-> the first checkpoint step at which the best last-layer prefix-matching score reaches ``threshold``
    (None if it never does: the one-layer model)."""
    best = trajectory.scores[:, SCORE_NAMES.index("prefix_matching"), -1].max(-1)  # (n,)
    if trajectory.config.n_layers < 2 or not (best >= threshold).any():
        return None
    return int(trajectory.steps[np.argmax(best >= threshold)])


def trajectory_path() -> Path:
    """-> the shipped trajectories (``mha_course/checkpoints/phase_change.npz``)."""
    return checkpoints.CHECKPOINT_DIR / "phase_change.npz"


def trajectory_arrays(progress: bool = False) -> dict:
    """Train every PHASE_CHANGE_CONFIGS run with ``train_trajectory`` -> the arrays of the .npz that
    ``load_trajectories`` reads. What ``mha-course train phase_change`` runs (about 30 s)."""
    arrays = {}
    for name, config in PHASE_CHANGE_CONFIGS.items():
        t = train_trajectory(config, progress=progress)
        arrays[f"{name}.config"] = np.array(json.dumps(config._asdict()))
        for field in Trajectory._fields[1:]:
            a = getattr(t, field)
            arrays[f"{name}.{field}"] = a.astype(np.float32) if a.dtype == np.float64 else a
    return arrays


def save_trajectories(path=None, progress: bool = False) -> Path:
    """``trajectory_arrays`` written to ``path`` (default: the shipped file), atomically."""
    return checkpoints.write_npz(trajectory_path() if path is None else path, trajectory_arrays(progress))


def load_trajectories(path=None) -> dict:
    """-> {name: Trajectory} as ``save_trajectories`` wrote them (default: the shipped file)."""
    path = Path(trajectory_path() if path is None else path)
    fix = "make them with `mha-course train phase_change`"
    z = checkpoints.read_npz(path, "trajectory file", fix)
    out = {}
    for name in PHASE_CHANGE_CONFIGS:
        missing = [f"{name}.{f}" for f in Trajectory._fields if f"{name}.{f}" not in z]
        if missing:
            raise ValueError(f"{path} holds no {', '.join(missing[:3])}: it is not a trajectory file (a checkpoint?); "
                             f"{fix}")
        try:
            config = train.Config(**json.loads(str(z[f"{name}.config"])))
        except (TypeError, ValueError):
            raise ValueError(f"{path}: {name}.config is not a model configuration; {fix}") from None
        out[name] = Trajectory(config, *(z[f"{name}.{f}"] for f in Trajectory._fields[1:]))
    return out


# ----------------------------------------------------------------------------- over seeds
SEEDS = (0, 1, 2, 3, 4)  # seed 0 is the shipped checkpoint's run


def _roles(params, config, probe) -> tuple:
    """-> (previous-token head, the other layer-0 head, induction head, the other layer-1 head) as (layer, head)."""
    scores = head_scores(train.forward(params, probe.tokens, config)[1], probe.tokens)
    prev = int(np.argmax(scores["previous_token"][0]))
    ind = int(np.argmax(scores["prefix_matching"][1]))
    return (0, prev), (0, 1 - prev), (1, ind), (1, 1 - ind)


def _seed_row(params, config, two: Trajectory, one: Trajectory, rng_seed: int = 1400) -> dict:
    """One trained seed -> {quantity: float}, its heads named by role (they differ between seeds)."""
    probe = train.make_batch(config, np.random.default_rng(rng_seed), 256)
    pair = make_pair(config, np.random.default_rng(rng_seed + 1), 128, corrupt="key")
    pair_v = make_pair(config, np.random.default_rng(rng_seed + 1), 128, corrupt="value")
    reference = train.make_batch(config, np.random.default_rng(rng_seed + 2), 256).tokens
    prev, other, ind, backup = roles = _roles(params, config, probe)
    names = ("prev", "other", "ind", "backup")
    scores = head_scores(train.forward(params, probe.tokens, config)[1], probe.tokens)
    comp = composition_scores(params, config)
    dla = direct_logit_attribution(params, config, probe)
    key, value = head_patching(params, config, pair), head_patching(params, config, pair_v)
    attr = attribution_patching(params, config, pair)
    rep = repeated_tokens(config.vocab, config.seq_len // 2, 256, np.random.default_rng(rng_seed + 4))
    rep_w = train.forward(params, rep, config)[1]
    abl = ablation_losses(params, config, probe, reference, [[r] for r in roles] + [[ind, backup]])
    prev_best = two.scores[:, SCORE_NAMES.index("previous_token"), 0].max(-1)  # (n,): the best layer-0 head
    top = [w.max(-1).mean(axis=(0, 2)) for w in train.forward(params, probe.tokens, config)[1]]  # [(h,)] * L
    row = {"formation_step": formation_step(two),  # None (NaN) when no layer-1 head reaches 0.5 in the run
           "final_loss": two.probe_loss[-1],
           "previous_token_step": two.steps[np.argmax(prev_best >= 0.5)] if (prev_best >= 0.5).any() else np.nan,
           "top_weight_prev": top[0][prev[1]], "top_weight_ind": top[1][ind[1]],
           "one_layer_loss": one.probe_loss[-1],
           "one_layer_prefix": one.scores[:, SCORE_NAMES.index("prefix_matching"), -1].max(),
           "previous_token_prev": scores["previous_token"][prev], "prefix_ind": scores["prefix_matching"][ind],
           "prefix_backup": scores["prefix_matching"][backup],
           "repeat_ind": repeat_induction_score(rep_w[1], config.seq_len // 2)[ind[1]]}
    for kind in "QKV":
        row[f"{kind.lower()}_comp_ind"] = comp[kind][prev[1], ind[1]]
        row[f"{kind.lower()}_comp_backup"] = comp[kind][prev[1], backup[1]]
    row["copying_ind"] = copying_score(ov_circuit(params, config, *ind))
    row["copying_prev"] = copying_score(ov_circuit(params, config, *prev))
    row["dla_ind"], row["dla_prev"] = dla.heads[ind], dla.heads[prev]
    for name, r in zip(names, roles):
        row[f"patch_{name}"], row[f"patch_value_{name}"], row[f"attribution_{name}"] = key[r], value[r], attr[r]
    row["path_q"] = path_patching(params, config, pair, prev, ind, "q")
    row["path_kv"] = path_patching(params, config, pair, prev, ind, "kv")
    for kind in ABLATIONS:
        for name, v in zip((*names, "both"), abl[kind]):
            row[f"{kind}_{name}"] = v
    return {k: np.nan if v is None else float(v) for k, v in row.items()}  # None: the head never formed


def seed_results(seeds=SEEDS, progress: bool = False) -> dict:
    """-> {quantity: (len(seeds),)} plus "seeds" and the random composition baseline ("baseline" (200,)):
    notebook 08's induction model and its one-layer twin trained with each seed (``train_trajectory``),
    then every experiment of notebook 14 run on it with its heads named by role (prev, other, ind, backup).
    What ``mha-course train circuit_seeds`` runs (about 20 s of CPU per seed)."""
    rows = []
    for seed in seeds:
        configs = {name: c._replace(seed=int(seed)) for name, c in PHASE_CHANGE_CONFIGS.items()}
        final = {}
        two = train_trajectory(configs["two_layer"], progress=progress,
                               callback=lambda step, m, p: final.update(params=p) or False)
        one = train_trajectory(configs["one_layer"], progress=progress)
        rows.append(_seed_row(final["params"], configs["two_layer"], two, one))
    config = PHASE_CHANGE_CONFIGS["two_layer"]
    out = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    out["seeds"] = np.array(seeds, dtype=np.int64)
    out["baseline"] = composition_baseline_scores(config.d_model, config.d_model // config.h, np.random.default_rng(0))
    return out


def seed_results_path() -> Path:
    """-> the shipped results over seeds (``mha_course/checkpoints/circuit_seeds.npz``)."""
    return checkpoints.CHECKPOINT_DIR / "circuit_seeds.npz"


def load_seed_results(path=None) -> dict:
    """-> {quantity: (n_seeds,)} as ``seed_results`` made them (default: the shipped file)."""
    path = Path(seed_results_path() if path is None else path)
    z = checkpoints.read_npz(path, "results file", "make it with `mha-course train circuit_seeds`")
    if "seeds" not in z or "baseline" not in z:
        raise ValueError(f"{path} holds no 'seeds' or 'baseline': it is not a results file of seed_results; "
                         "make it with `mha-course train circuit_seeds`")
    return z


def formed(results: dict) -> np.ndarray:
    """results of ``seed_results`` -> (n_seeds,) bool: the seeds whose induction head formed within the run."""
    return np.isfinite(np.asarray(results["formation_step"], dtype=float))


def seed_summary(values, decimals: int = 3) -> str:
    """values (n,) over seeds -> "mean ± sd" (the sample standard deviation), to ``decimals`` places.

    >>> seed_summary([1.0, 2.0, 3.0]), seed_summary([375, 540, 505, 385], decimals=0)
    ('2.000 ± 1.000', '451 ± 84')
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2 or not np.isfinite(v).all():
        raise ValueError(f"values has shape {v.shape}; give one finite value per seed, at least 2 seeds")
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)) or not 0 <= decimals <= 12:
        raise ValueError(f"decimals={decimals!r} must be a whole number from 0 to 12")
    return f"{v.mean():.{decimals}f} ± {v.std(ddof=1):.{decimals}f}"


def compare_over_seeds(a, b) -> str:
    """a, b (n,): one value per seed, paired -> "a > b", "a < b" or "within the noise".

    A difference counts when it has the same sign in every seed and its mean is larger than its
    spread (the standard deviation of the per-seed differences); otherwise it is within the noise.

    >>> compare_over_seeds([2.0, 2.1, 1.9], [1.0, 1.0, 1.1]), compare_over_seeds([1.0, 2.0, 1.5], [1.1, 1.0, 1.0])
    ('a > b', 'within the noise')
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2 or not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError(f"a has shape {a.shape} and b {b.shape}; give one finite value per seed for each "
                         "(the same seeds, at least 2)")
    d = a - b
    if abs(d.mean()) > d.std(ddof=1) and (np.all(d > 0) or np.all(d < 0)):
        return "a > b" if d.mean() > 0 else "a < b"
    return "within the noise"
