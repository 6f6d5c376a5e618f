"""Where a token is: sinusoidal position encodings and rotary embeddings (numpy only).

Attention alone does not know the order of its tokens (shuffle them and the outputs shuffle
the same way). Two ways to tell it:

- ``sinusoidal_positions``: the encoding of Vaswani et al. (2017), *added* to X once;
- ``apply_rope``: rotary position embedding (Su et al., RoFormer, 2021), a rotation of
  every query and key, after the projections, by an angle proportional to its position.
  The score of a rotated query and key then depends only on their offset.

Shapes: ``T`` positions, ``d_model`` model width, ``d_k`` head size, ``...`` any batch axes
(for example ``(B, h)``).

Taught in 07_positions_and_rope.ipynb.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import _validate

__all__ = ["sinusoidal_positions", "apply_rope", "rope_angles", "rope_score_grid", "patchify", "ROPE_LAYOUTS"]

# Which features form a rotated pair: (2i, 2i+1) as in the RoFormer paper and Meta's own Llama
# code (complex numbers), or (i, i + d_k/2) as in GPT-NeoX and Hugging Face's Llama ("rotate_half",
# whose conversion script permutes the output features of W_Q and W_K to match: the rows of a
# PyTorch nn.Linear weight, which is (out, in); the columns of the course's W_Q, as Q = X W_Q).
ROPE_LAYOUTS = ("interleaved", "halves")


def sinusoidal_positions(T: int, d_model: int) -> np.ndarray:
    """T, d_model -> PE (T, d_model) float64: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...).

    Column pair (2i, 2i+1) is one frequency; the frequencies fall geometrically from 1
    (wavelength 2 pi) to about 1/10000. Positions start at 0, so row 0 is [0, 1, 0, 1, ...].
    Odd ``d_model``: the last column is the sine of a frequency whose cosine partner would
    be column ``d_model`` (the formula, cut at ``d_model`` columns); nothing is padded.

    >>> pe = sinusoidal_positions(4, 6)
    >>> pe.shape, pe[0].tolist()
    ((4, 6), [0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    >>> sinusoidal_positions(3, 5)[:, -1].round(4)  # odd d_model: a lone sine column
    array([0.    , 0.0006, 0.0013])
    """
    T = _validate.positive_int(T, "T")
    d_model = _validate.positive_int(d_model, "d_model")
    two_i = np.arange(d_model) // 2 * 2  # (d_model,): 0, 0, 2, 2, 4, 4, ...
    angles = np.arange(T)[:, None] / 10000.0 ** (two_i / d_model)  # (T, 1) / (d_model,) -> (T, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))


def rope_angles(positions, d_k: int, base: float = 10000.0) -> np.ndarray:
    """positions (T,) ints, d_k even -> angles (T, d_k // 2): positions[t] * base^(-2i/d_k).

    Column i is the angle that pair i of the features at position t is rotated by: pair 0
    turns one radian per position, the last pair barely turns at all.

    >>> rope_angles([0, 1, 2], 4, base=100.0).tolist()
    [[0.0, 0.0], [1.0, 0.1], [2.0, 0.2]]
    """
    positions = _positions(positions)
    d_k = _even_d_k(d_k)
    base = _base(base)
    inv_freq = base ** (-np.arange(0, d_k, 2) / d_k)  # (d_k/2,): base^(-2i/d_k)
    return positions[:, None] * inv_freq  # (T, 1) x (d_k/2,) -> (T, d_k/2)


def apply_rope(x, positions, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """x (..., T, d_k), positions (T,) ints -> x rotated (..., T, d_k), same dtype.

    Feature pair i of position t is rotated by the angle ``positions[t] * base^(-2i/d_k)``
    (see ``rope_angles``). ``layout="interleaved"`` pairs features (2i, 2i+1), as in the
    RoFormer paper and in Meta's Llama code; ``layout="halves"`` pairs (i, i + d_k/2), as in
    GPT-NeoX and Hugging Face's Llama (``rotate_half``).
    Rotations keep norms, and (R_m q) . (R_n k) depends on m - n only. Apply it to the
    queries and keys of each head (d_k = d_model // h), never to the values.

    >>> q = np.ones((3, 4))
    >>> r = apply_rope(q, np.arange(3), base=100.0)
    >>> r.round(3)[1]  # pair 0 turned by 1 radian, pair 1 by 0.1
    array([-0.301,  1.382,  0.895,  1.095])
    >>> bool(np.allclose(np.linalg.norm(r, axis=-1), 2.0))
    True
    """
    x = _validate.float_array(x, "x")
    if x.ndim < 2:
        raise ValueError(f"x must be at least 2-D (..., T, d_k), got shape {x.shape}; "
                         "a single vector is x[None]")
    _check_layout(layout)
    angles = rope_angles(positions, x.shape[-1], base)  # (T, d_k/2)
    if angles.shape[0] != x.shape[-2]:
        raise ValueError(f"positions has {angles.shape[0]} entries but x has T={x.shape[-2]} "
                         f"positions (axis -2 of shape {x.shape}); give one position per token")
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    a, b = _pair_views(x, layout)  # the two members of every pair, (..., T, d_k/2) each
    out = np.empty_like(x)
    out_a, out_b = _pair_views(out, layout)
    out_a[...] = a * cos - b * sin  # a 2-D rotation of (a, b) by the angle
    out_b[...] = a * sin + b * cos
    return out


def rope_score_grid(q, k, T: int, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """q (d_k,), k (d_k,), T -> scores (T, T): scores[m, n] = (q rotated to position m) . (k rotated to n).

    With RoPE every diagonal (constant m - n) holds one value: the score depends on the
    offset only. Drawn as a heatmap in 07_positions_and_rope.ipynb.

    >>> g = rope_score_grid(np.ones(4), np.ones(4), 5)
    >>> bool(np.allclose(np.diag(g, 1), g[0, 1])), float(g[2, 2])
    (True, 4.0)
    """
    q, k = _validate.float_array(q, "q"), _validate.float_array(k, "k")
    if q.ndim != 1 or q.shape != k.shape:
        raise ValueError(f"q and k must be two vectors of the same size d_k, got shapes {q.shape} and {k.shape}")
    positions = np.arange(_validate.positive_int(T, "T"))
    Qr = apply_rope(np.broadcast_to(q, (T, q.size)), positions, base, layout)  # (T, d_k): q at 0..T-1
    Kr = apply_rope(np.broadcast_to(k, (T, k.size)), positions, base, layout)  # (T, d_k)
    return Qr @ Kr.T  # (T, d_k) x (d_k, T) -> (T, T)


def patchify(image, patch: int) -> np.ndarray:
    """image (H, W, C), patch p -> tokens (H/p * W/p, p*p*C): ViT's "16x16 words", row by row.

    Token n is patch (n // (W/p), n % (W/p)) of the image, its pixels flattened. Like words,
    the patches carry no position of their own: ViT adds a position embedding to each.

    >>> patchify(np.zeros((8, 12, 3)), 4).shape
    (6, 48)
    """
    img = _validate.float_array(image, "image")
    p = _validate.positive_int(patch, "patch")
    if img.ndim != 3 or img.shape[0] % p or img.shape[1] % p:
        raise ValueError(f"image must be (H, W, C) with H and W divisible by patch={p}, got shape {img.shape}; "
                         "crop or pad the image, or choose a patch size that divides both")
    H, W, C = img.shape
    grid = img.reshape(H // p, p, W // p, p, C).transpose(0, 2, 1, 3, 4)  # (H/p, W/p, p, p, C)
    return grid.reshape(H // p * (W // p), p * p * C)  # (N, p*p*C)


def _pair_views(x: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The first and second member of each rotated pair, as views of x: (..., d_k/2) each."""
    if layout == "interleaved":
        return x[..., 0::2], x[..., 1::2]
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]


def _check_layout(layout) -> None:
    if layout not in ROPE_LAYOUTS:
        valid = ", ".join(repr(n) for n in ROPE_LAYOUTS)
        raise ValueError(f"layout={layout!r} is not a RoPE layout; valid layouts: {valid} "
                         "('interleaved' pairs features (2i, 2i+1), 'halves' pairs (i, i + d_k/2))")


def _even_d_k(d_k) -> int:
    d_k = _validate.positive_int(d_k, "d_k")
    if d_k % 2:
        raise ValueError(f"d_k={d_k} is odd; RoPE rotates features in pairs, so d_k must be even "
                         f"(for example {d_k - 1} or {d_k + 1}: choose d_model and h so that d_model // h is even)")
    return d_k


def _base(base) -> float:
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real) or not np.isfinite(base) \
            or base <= 0:
        raise ValueError(f"base={base!r} must be a positive finite number; the usual value is 10000.0")
    return float(base)


def _positions(positions) -> np.ndarray:
    """positions as a 1-D int64 array; whole-number floats are accepted, anything else raises."""
    arr = np.asarray(positions)
    whole = np.issubdtype(arr.dtype, np.integer) or (
        arr.dtype.kind == "f" and bool(np.all(np.isfinite(arr))) and bool(np.all(arr == np.round(arr))))
    if arr.ndim != 1 or arr.size == 0 or not whole or arr.dtype == np.bool_:
        raise ValueError(f"positions must be a non-empty 1-D array of whole numbers, one per token "
                         f"(T,); got {arr.tolist()!r} with shape {arr.shape}; "
                         "use np.arange(T), or np.arange(T) + offset")
    return arr.astype(np.int64)
