"""The course sentence as numbers, and the Q = K = V = X experiment (numpy only).

A token becomes a row of an embedding table; in a trained model that table is learned,
here a seeded random table stands in for it. ``identity_params`` removes the three
projections (Q = K = V = X), ``blend_params`` slides between that and real projections,
and ``mean_diagonal_weight`` measures how much each token attends to its own position.

Shapes: ``T`` tokens, ``V`` vocabulary size, ``D = d_model``.

Taught in 00_overview.ipynb and 01_qkv.ipynb.
"""
from __future__ import annotations

import numpy as np

from .. import _validate
from ..mha import MHAParams, Trace, init_params, trace

__all__ = ["SENTENCE", "vocabulary", "embedding_table", "embed", "sentence_trace",
           "identity_params", "blend_params", "mean_diagonal_weight", "diagonal_curve"]

SENTENCE = ("the", "cat", "sat", "on", "the", "mat")
_MAKE_PARAMS = "make them with mha_course.init_params(d_model, rng=np.random.default_rng(0))"


def _words(tokens, name: str) -> list[str]:
    """tokens (T,): a list (tuple, 1-D array) of words, each a string; a TypeError names ``name`` otherwise."""
    words = _validate.items(tokens, name, "['the', 'cat']")
    odd = [w for w in words if not isinstance(w, str)]
    if odd:
        raise TypeError(f"{name} holds {odd[0]!r} ({type(odd[0]).__name__}); every token is a word, a string: "
                        f"pass e.g. {name}=['the', 'cat']")
    return words


def vocabulary(tokens) -> list[str]:
    """tokens (T,) -> the distinct tokens in first-seen order (V,): row i of the table is word i.

    >>> vocabulary(["the", "cat", "sat", "on", "the", "mat"])
    ['the', 'cat', 'sat', 'on', 'mat']
    """
    tokens = _words(tokens, "tokens")
    if not tokens:
        raise ValueError("tokens is empty; give at least one token, e.g. ['the', 'cat']")
    return list(dict.fromkeys(tokens))


def embedding_table(vocab_size: int, d_model: int, *, rng: np.random.Generator) -> np.ndarray:
    """vocab_size V, d_model D -> table (V, D) with N(0, 1) entries, a stand-in for learned ones.

    Rows are drawn in order, so for one seed and d_model the first rows do not change when
    the vocabulary grows.

    >>> embedding_table(5, 8, rng=np.random.default_rng(0)).shape
    (5, 8)
    """
    V = _validate.positive_int(vocab_size, "vocab_size")
    D = _validate.positive_int(d_model, "d_model")
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy Generator, got {type(rng).__name__}; "
                         "pass rng=np.random.default_rng(0)")
    _validate.allocation(8 * V * D, f"an embedding table (vocab_size, d_model) = ({V}, {D})",
                         "choose a smaller vocabulary or d_model")
    return rng.normal(0.0, 1.0, size=(V, D))


def embed(tokens, table: np.ndarray, vocab) -> np.ndarray:
    """tokens (T,), table (V, D), vocab (V,) -> X (1, T, D): one table row per token.

    The same word always gets the same row: X says nothing about word order.

    >>> vocab = vocabulary(SENTENCE)
    >>> X = embed(SENTENCE, embedding_table(len(vocab), 4, rng=np.random.default_rng(0)), vocab)
    >>> X.shape, bool(np.array_equal(X[0, 0], X[0, 4]))  # both "the"
    ((1, 6, 4), True)
    """
    tokens, vocab = _words(tokens, "tokens"), _words(vocab, "vocab")
    if len(set(vocab)) != len(vocab):
        raise ValueError(f"vocab {vocab} names a word twice; build it with vocabulary(tokens)")
    table = _validate.finite_array(table, "table")
    index = {word: i for i, word in enumerate(vocab)}
    missing = [t for t in tokens if t not in index]
    if missing:
        raise ValueError(f"tokens {missing} are not in the vocabulary {list(vocab)}; "
                         "build it with vocabulary(tokens)")
    if table.ndim != 2 or table.shape[0] != len(index) or table.shape[1] == 0:
        raise ValueError(f"table has {table.shape[0] if table.ndim else 0} rows (shape {table.shape}) but the "
                         f"vocabulary has {len(index)} words: give one row "
                         "of d_model >= 1 numbers per word; make it with embedding_table(len(vocab), d_model, rng=...)")
    if not tokens:
        raise ValueError("tokens is empty; give at least one token, e.g. ['the', 'cat']")
    ids = np.array([index[t] for t in tokens])  # (T,)
    return table[ids][None]  # (T, D) -> (1, T, D)


def sentence_trace(tokens, d_model: int, h: int, seed: int = 0) -> Trace:
    """tokens (T,), d_model, h -> Trace of self-attention over the embedded tokens.

    One Generator seeded with ``seed`` draws the parameters first, then the embedding
    table, so a notebook that does the same steps with the same rng gets the same Trace.

    >>> t = sentence_trace(SENTENCE, d_model=8, h=2)
    >>> t.shapes["weights"]
    (1, 2, 6, 6)
    """
    X, params = sentence_inputs(tokens, d_model, seed)
    return trace(X, params, h)


def sentence_inputs(tokens, d_model: int, seed: int = 0):
    """tokens (T,), d_model, seed -> X (1, T, d_model), MHAParams; neither depends on h.

    One Generator seeded with ``seed`` draws the parameters first, then the embedding table.

    >>> X, p = sentence_inputs(["the", "cat"], d_model=4)
    >>> X.shape, p.d_model
    ((1, 2, 4), 4)
    """
    rng = np.random.default_rng(_validate.count(seed, "seed"))
    params = init_params(_validate.positive_int(d_model, "d_model"), rng=rng)
    vocab = vocabulary(tokens)
    X = embed(tokens, embedding_table(len(vocab), d_model, rng=rng), vocab)  # (1, T, D)
    return X, params


def identity_params(d_model: int) -> MHAParams:
    """d_model -> MHAParams with every W = I (D, D): then Q = K = V = X and the output is the concat.

    >>> p = identity_params(3)
    >>> bool(np.array_equal(p.W_q, np.eye(3)))
    True
    """
    d_model = _validate.positive_int(d_model, "d_model")
    _validate.allocation(8 * d_model * d_model, f"identity matrices (d_model, d_model) = ({d_model}, {d_model})",
                         "choose a smaller d_model")
    eye = np.eye(d_model)
    return MHAParams(eye, eye.copy(), eye.copy(), eye.copy())


def blend_params(params: MHAParams, strength: float) -> MHAParams:
    """params, strength s in [0, 1] -> each W replaced by (1 - s) I + s W (biases scaled by s).

    s = 0 gives ``identity_params`` (no projections), s = 1 gives ``params`` back.

    >>> p = init_params(4, rng=np.random.default_rng(0))
    >>> bool(np.allclose(blend_params(p, 1.0).W_k, p.W_k)), bool(np.allclose(blend_params(p, 0.0).W_k, np.eye(4)))
    (True, True)
    """
    _validate.instance(params, MHAParams, "params", _MAKE_PARAMS)
    s = _validate.number(strength, "strength")
    if not 0.0 <= s <= 1.0:
        raise ValueError(f"strength={strength} must lie in 0..1 (0 = no projections, 1 = full)")
    eye = np.eye(params.d_model)
    mats = [(1.0 - s) * eye + s * W for W in params[:4]]
    biases = [None if b is None else s * b for b in params[4:]]
    return MHAParams(*mats, *biases)


def mean_diagonal_weight(weights) -> float:
    """weights (..., T, T) -> the mean of w[..., i, i]: how much a token attends to its own position.

    1.0 means every token reads only itself; uniform attention gives 1 / T.

    >>> mean_diagonal_weight(np.eye(3)), mean_diagonal_weight(np.full((4, 4), 0.25))
    (1.0, 0.25)
    """
    w = _validate.finite_array(weights, "weights")
    if w.ndim < 2 or w.shape[-1] != w.shape[-2] or w.size == 0:
        raise ValueError(f"weights must be (..., T, T) for self-attention, got shape {w.shape}")
    return float(np.diagonal(w, axis1=-2, axis2=-1).mean())


def diagonal_curve(X, params: MHAParams, strengths, h: int = 1) -> np.ndarray:
    """X (B, T, D), params, strengths (N,) -> (N,) mean diagonal weight at each projection strength.

    Each point is one ``trace`` of ``blend_params(params, s)``: 0 = Q = K = V = X, 1 = full W.

    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> diagonal_curve(np.random.default_rng(1).normal(size=(1, 5, 8)), p, [0.0, 1.0]).shape
    (2,)
    """
    X = _validate.finite_array(X, "X")
    _validate.instance(params, MHAParams, "params", _MAKE_PARAMS)
    strengths = _validate.float_array(strengths, "strengths")
    if strengths.ndim != 1 or strengths.size == 0:
        raise ValueError(f"strengths has shape {strengths.shape}; give a list of projection strengths in 0..1, "
                         "e.g. strengths=[0.0, 0.5, 1.0]")
    return np.array([mean_diagonal_weight(trace(X, blend_params(params, float(s)), h)["weights"])
                     for s in strengths])
