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

import math
import numbers

import numpy as np

from . import _validate

__all__ = ["sinusoidal_positions", "apply_rope", "rope_angles", "rope_score_grid", "patchify", "ROPE_LAYOUTS",
           "rope_inv_freq", "rope_attention_factor", "dynamic_rope_scaling", "alibi_slopes", "alibi_bias",
           "ROPE_SCALINGS", "YARN_RAMPS", "MAX_POSITION", "rotate", "check_rope"]

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
    _validate.allocation(3 * 8 * T * d_model, f"a sinusoidal table (T, d_model) = ({T}, {d_model})",
                         "ask for fewer positions T or a narrower d_model")
    two_i = np.arange(d_model) // 2 * 2  # (d_model,): 0, 0, 2, 2, 4, 4, ...
    angles = np.arange(T)[:, None] / 10000.0 ** (two_i / d_model)  # (T, 1) / (d_model,) -> (T, d_model)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))


def rope_angles(positions, d_k: int, base: float = 10000.0, scaling=None) -> np.ndarray:
    """positions (T,) ints, d_k even -> angles (T, d_k // 2): positions[t] * base^(-2i/d_k).

    Column i is the angle that pair i of the features at position t is rotated by: pair 0
    turns one radian per position, the last pair barely turns at all. ``scaling``: the
    frequencies of ``rope_inv_freq(d_k, base, scaling)`` instead (position interpolation, NTK, YaRN).

    >>> rope_angles([0, 1, 2], 4, base=100.0).tolist()
    [[0.0, 0.0], [1.0, 0.1], [2.0, 0.2]]
    """
    positions = _positions(positions)
    inv_freq = rope_inv_freq(d_k, base, scaling)  # (d_k/2,): base^(-2i/d_k), maybe scaled
    _validate.allocation(8 * positions.size * (d_k // 2), f"RoPE angles (T, d_k // 2) = ({positions.size}, {d_k // 2})",
                         "rotate fewer positions or a smaller d_k")
    return positions[:, None] * inv_freq  # (T, 1) x (d_k/2,) -> (T, d_k/2)


def apply_rope(x, positions, base: float = 10000.0, layout: str = "interleaved", scaling=None) -> np.ndarray:
    """x (..., T, d_k), positions (T,) ints -> x rotated (..., T, d_k), same dtype (float16 rotated in float32).

    Feature pair i of position t is rotated by the angle ``positions[t] * base^(-2i/d_k)``
    (see ``rope_angles``). ``layout="interleaved"`` pairs features (2i, 2i+1), as in the
    RoFormer paper and in Meta's Llama code; ``layout="halves"`` pairs (i, i + d_k/2), as in
    GPT-NeoX and Hugging Face's Llama (``rotate_half``).
    Rotations keep norms, and (R_m q) . (R_n k) depends on m - n only. Apply it to the
    queries and keys of each head (d_k = d_model // h), never to the values. ``scaling``
    (None or a dict, see ``rope_inv_freq``) stretches the frequencies for contexts longer than
    training; it only rotates: YaRN's ``rope_attention_factor`` is the caller's to apply.

    >>> q = np.ones((3, 4))
    >>> r = apply_rope(q, np.arange(3), base=100.0)
    >>> r.round(3)[1]  # pair 0 turned by 1 radian, pair 1 by 0.1
    array([-0.301,  1.382,  0.895,  1.095])
    >>> bool(np.allclose(np.linalg.norm(r, axis=-1), 2.0))
    True
    """
    dtype = np.asarray(x).dtype  # float16 is rotated in float32 and given back as float16
    x = _validate.finite_array(x, "x")  # a NaN or inf feature would be rotated into its pair partner
    if x.ndim < 2:
        raise ValueError(f"x must be at least 2-D (..., T, d_k), got shape {x.shape}; "
                         "a single vector is x[None]")
    _check_layout(layout)
    angles = rope_angles(positions, x.shape[-1], base, scaling)  # (T, d_k/2)
    if angles.shape[0] != x.shape[-2]:
        raise ValueError(f"positions has {angles.shape[0]} entries but x has T={x.shape[-2]} "
                         f"positions (axis -2 of shape {x.shape}); give one position per token")
    out = rotate(x, angles, layout)
    return out.astype(np.float16) if dtype == np.float16 else out


def check_rope(d_k: int, rope_base=None, rope_scaling=None) -> None:
    """d_k, rope_base, rope_scaling of an attention call -> None, or a ValueError naming the bad one.

    ``rope_base=None`` is no RoPE; a ``rope_scaling`` without ``rope_base`` is refused (it would be
    ignored). The one check of the pair, made once at the entry of an attention call.

    >>> check_rope(4, 10000.0, {"type": "linear", "factor": 2.0}) is None
    True
    """
    d_k = _validate.positive_int(d_k, "d_k")
    if rope_scaling is not None and rope_base is None:
        raise ValueError(f"rope_scaling={rope_scaling!r} needs rope_base: the scaling stretches RoPE's rotations, "
                         "and without rope_base there are none; pass rope_base=10000.0 too, or drop rope_scaling")
    if rope_base is not None:
        _base(rope_base, "rope_base")
        _scaling(rope_scaling, name="rope_scaling")
        rope_inv_freq(d_k, rope_base, rope_scaling)  # a ValueError naming an odd d_k


def rotate(x: np.ndarray, angles: np.ndarray, layout: str = "interleaved") -> np.ndarray:
    """x (..., T, d_k) float, angles (T, d_k // 2) -> x rotated (..., T, d_k): ``apply_rope`` with the angles given.

    The pipeline's path (``mha.rope_heads``): pair i of position t turns by ``angles[t, i]``. Only the
    types and shapes of x are checked here (no pass over its values); a NaN or inf angle is refused.

    >>> rotate(np.array([[1.0, 0.0]]), np.array([[np.pi / 2]])).round(6).tolist()
    [[0.0, 1.0]]
    """
    x, angles = _rotation_inputs(x, angles, layout)
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    a, b = _pair_views(x, layout)  # the two members of every pair, (..., T, d_k/2) each
    out = np.empty_like(x)
    out_a, out_b = _pair_views(out, layout)
    out_a[...] = a * cos - b * sin  # a 2-D rotation of (a, b) by the angle
    out_b[...] = a * sin + b * cos
    return out


def _rotation_inputs(x, angles, layout):
    """rotate's checks: x a float array (..., T, d_k), d_k even, angles (T, d_k // 2) real, a known layout."""
    if not (isinstance(x, np.ndarray) and x.dtype.kind == "f"):
        x = _validate.float_array(x, "x")
    if x.ndim < 2 or x.shape[-1] % 2:
        raise ValueError(f"x has shape {x.shape}; rotate needs (..., T, d_k) with d_k even (features turn in pairs)")
    angles = _validate.finite_array(angles, "angles")  # (T, d_k/2): one cheap pass; a NaN angle would spread
    want = (x.shape[-2], x.shape[-1] // 2)
    if angles.shape != want:
        raise ValueError(f"angles has shape {angles.shape} but x {x.shape} needs {want}: one angle per position "
                         "and feature pair, as rope_angles(positions, d_k) makes them")
    _check_layout(layout)
    return x, angles


def rope_score_grid(q, k, T: int, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """q (d_k,), k (d_k,), T -> scores (T, T): scores[m, n] = (q rotated to position m) . (k rotated to n).

    With RoPE every diagonal (constant m - n) holds one value: the score depends on the
    offset only. Drawn as a heatmap in 07_positions_and_rope.ipynb.

    >>> g = rope_score_grid(np.ones(4), np.ones(4), 5)
    >>> bool(np.allclose(np.diag(g, 1), g[0, 1])), float(g[2, 2])
    (True, 4.0)
    """
    q, k = _validate.finite_array(q, "q"), _validate.finite_array(k, "k")
    if q.ndim != 1 or q.shape != k.shape:
        raise ValueError(f"q and k must be two vectors of the same size d_k, got shapes {q.shape} and {k.shape}")
    _validate.allocation(8 * _validate.positive_int(T, "T") * (T + 4 * q.size), f"a RoPE score grid of T={T} positions",
                         "ask for fewer positions T")
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


def _base(base, name: str = "base") -> float:
    if isinstance(base, (bool, np.bool_)) or not isinstance(base, numbers.Real) or not np.isfinite(base) \
            or base <= 1:
        raise ValueError(f"{name}={base!r} must be a finite number > 1 (base^(-2j/d_k) must fall with j, and "
                         "base = 1 turns every pair alike); the usual value is 10000.0")
    return float(base)


MAX_POSITION = 2 ** 53  # beyond it float64 angles (and whole-number floats) are no longer exact


def _positions(positions) -> np.ndarray:
    """positions as a 1-D int64 array; whole-number floats are accepted, anything else raises
    (bools, even inside a list of ints, and magnitudes of MAX_POSITION or more)."""
    arr = np.asarray(positions)
    has_bool = arr.dtype == np.bool_ or (not isinstance(positions, np.ndarray) and arr.ndim == 1 and any(
        isinstance(v, (bool, np.bool_)) for v in np.asarray(positions, dtype=object)))
    whole = np.issubdtype(arr.dtype, np.integer) or (
        arr.dtype.kind == "f" and bool(np.all(np.isfinite(arr))) and bool(np.all(arr == np.round(arr))))
    if whole and arr.size and arr.dtype != np.bool_ and (
            arr.max() >= MAX_POSITION or (arr.dtype.kind != "u" and arr.min() <= -MAX_POSITION)):
        raise ValueError(f"positions must lie within +-2**53 (exact in float64), got a range "
                         f"{arr.min()!r} .. {arr.max()!r}; use np.arange(T), or np.arange(T) + offset")
    if arr.ndim != 1 or arr.size == 0 or not whole or has_bool:
        raise ValueError(f"positions must be a non-empty 1-D array of whole numbers, one per token "
                         f"(T,); got {arr.tolist()!r} with shape {arr.shape}; "
                         "use np.arange(T), or np.arange(T) + offset")
    return arr.astype(np.int64)


# ---- Past the training length (taught in 13_long_context.ipynb) ----

# The scalings rope_inv_freq knows: position interpolation (Chen et al. 2023), NTK-aware
# scaling (bloc97, 2023) and YaRN (Peng et al. 2023); YaRN's two ramps.
ROPE_SCALINGS = ("linear", "ntk", "yarn")
YARN_RAMPS = ("reference", "paper")
_SCALING_KEYS = {"linear": ("type", "factor"), "ntk": ("type", "factor"),
                 "yarn": ("type", "factor", "original_max_position", "beta_fast", "beta_slow", "ramp")}


def rope_inv_freq(d_k: int, base: float = 10000.0, scaling=None) -> np.ndarray:
    """d_k even [, scaling] -> inv_freq (d_k // 2,): base^(-2j/d_k), the angle per position of pair j.

    ``scaling`` stretches the frequencies so that a model trained on L positions reads s·L:

    - None: base^(-2j/d_k) (RoFormer);
    - ``{"type": "linear", "factor": s}``: position interpolation (Chen et al. 2023), every
      frequency divided by s, so position s·L turns like position L did;
    - ``{"type": "ntk", "factor": s}``: NTK-aware scaling, the base becomes base · s^(d_k/(d_k-2)),
      so the lowest frequency is divided by s and the highest is kept;
    - ``{"type": "yarn", "factor": s, "original_max_position": L, "beta_fast": 32.0,
      "beta_slow": 1.0, "ramp": "reference"}``: YaRN (Peng et al. 2023, "NTK-by-parts"). Pair j
      turns r_j = L / (2 pi base^(2j/d_k)) times over L positions; pairs that turn more than
      beta_fast times keep their frequency, those that turn fewer than beta_slow times are
      interpolated (divided by s), and a ramp mixes the two in between. ``ramp="paper"`` is the
      paper's (§3.2): gamma(r) = (r - beta_slow) / (beta_fast - beta_slow), clipped to [0, 1],
      linear in the turns r. ``ramp="reference"`` (the default) is the authors' code and Hugging
      Face's ``_compute_yarn_parameters``: the pair indices where r = beta_fast and r = beta_slow,
      rounded down and up and clamped to [0, d_k - 1], with a ramp linear in the pair index j between.
      On a large model (L in the thousands) the two keep and interpolate the same pairs at the ends and differ
      only between (linear in r against linear in j); at L = 16 the index of beta_fast is negative, its floor is
      clamped to 0, and pair 0 (2.5 turns) is kept by the code where the paper's gamma = 0.05 interpolates it 95%;
      at L = 1 the paper interpolates every pair and the code still keeps pair 0; at L ~ 1e12 (d_k = 8, every pair
      turning more than beta_fast times) the paper keeps every pair and the code's clamps interpolate them all.
    Dynamic scaling (§3.3) is ``dynamic_rope_scaling(scaling, seq_len)``: s set from the length read.

    >>> rope_inv_freq(4, base=100.0).tolist()
    [1.0, 0.1]
    >>> rope_inv_freq(4, base=100.0, scaling={"type": "linear", "factor": 2}).tolist()
    [0.5, 0.05]
    >>> rope_inv_freq(4, base=100.0, scaling={"type": "ntk", "factor": 4}).round(4).tolist()
    [1.0, 0.025]
    >>> yarn = {"type": "yarn", "factor": 4, "original_max_position": 16}
    >>> rope_inv_freq(8, scaling=yarn).round(5).tolist()  # pair 0 kept: floor(dim(32)) = floor(-1.1) -> 0
    [1.0, 0.025, 0.0025, 0.00025]
    >>> rope_inv_freq(8, scaling={**yarn, "ramp": "paper"}).round(5).tolist()  # pair 0 turns 2.5 times: 95% divided
    [0.28741, 0.025, 0.0025, 0.00025]
    """
    d_k = _even_d_k(d_k)
    base = _base(base)
    _validate.allocation(4 * 8 * (d_k // 2), f"the RoPE frequencies of d_k={d_k} ({d_k // 2} pairs)",
                         "give the head size d_k of the attention (d_model // h), a few hundred at most in practice")
    j = np.arange(d_k // 2)  # (d_k/2,): the pair index
    plain = base ** (-2.0 * j / d_k)  # (d_k/2,)
    kind, s = _scaling(scaling)
    if kind is None:
        return plain
    if kind == "linear":
        return plain / s
    if kind == "ntk":  # (base · s^(d_k/(d_k-2)))^(-2j/d_k), in logs: no overflow for a huge s
        return np.exp(-2.0 * j / d_k * (math.log(base) + d_k / (d_k - 2) * math.log(s))) if d_k > 2 else plain / s
    L = float(scaling["original_max_position"])
    fast, slow = float(scaling.get("beta_fast", 32.0)), float(scaling.get("beta_slow", 1.0))

    def dim(turns):  # the (fractional) pair index that turns ``turns`` times over L positions (in logs: no 0 or inf)
        return d_k * (math.log(L) - math.log(turns) - math.log(2 * math.pi)) / (2 * math.log(base))
    if scaling.get("ramp", "reference") == "paper":
        turns = L * plain / (2 * math.pi)  # (d_k/2,): r_j, the turns of pair j over L positions
        keep = np.clip((turns - slow) / (fast - slow), 0.0, 1.0)  # gamma(r): 1 keep .. 0 interpolate
        return plain * keep + plain / s * (1 - keep)
    low = max(math.floor(dim(fast)), 0)
    high = min(math.ceil(dim(slow)), d_k - 1)  # the paper's code and Hugging Face clamp to dim - 1
    if low == high:
        high += 0.001  # as theirs: no division by zero
    ramp = np.clip((j - low) / (high - low), 0.0, 1.0)  # (d_k/2,): 0 keep .. 1 interpolate
    return plain * (1 - ramp) + plain / s * ramp


def dynamic_rope_scaling(scaling, seq_len: int):
    """scaling (an NTK or YaRN dict, with ``original_max_position`` L), seq_len -> the static scaling
    for a sequence of seq_len tokens: factor max(1, seq_len / L) (Peng et al. 2023 §3.3, "Dynamic NTK"
    / dynamic YaRN). Up to L tokens nothing is scaled (None): the model reads what it was trained on.

    A model that decodes token by token recomputes the factor as the sequence grows; a forward
    pass over seq_len tokens uses the factor of its length.

    >>> dynamic_rope_scaling({"type": "yarn", "factor": 4.0, "original_max_position": 16}, 16) is None
    True
    >>> dynamic_rope_scaling({"type": "ntk", "factor": 4.0, "original_max_position": 16}, 40)
    {'type': 'ntk', 'factor': 2.5}
    """
    kind, _ = _scaling(scaling, dynamic=True)
    seq_len = _validate.positive_int(seq_len, "seq_len")
    if seq_len >= MAX_POSITION:
        raise ValueError(f"seq_len={seq_len} is 2**53 or more: no position that far is exact in float64; "
                         "give the length of the sequence read, below 2**53")
    L = float(scaling["original_max_position"])
    if seq_len <= L:
        return None
    static = {k: v for k, v in scaling.items() if k in _SCALING_KEYS[kind]}
    return {**static, "factor": seq_len / L}


def rope_attention_factor(scaling=None) -> float:
    """scaling (None or a dict of ``rope_inv_freq``) -> the factor queries and keys are multiplied by.

    1.0, except for YaRN: 0.1 · ln(s) + 1 (Peng et al. 2023; 1.0 for s <= 1). Multiplying q and k
    by it multiplies every score by its square, sharpening the softmax that more keys flatten.

    >>> rope_attention_factor(None), round(rope_attention_factor({"type": "yarn", "factor": 4.0,
    ...                                                           "original_max_position": 16}), 4)
    (1.0, 1.1386)
    """
    kind, s = _scaling(scaling)
    return 0.1 * math.log(s) + 1.0 if kind == "yarn" and s > 1 else 1.0


def _real(v) -> bool:
    return not isinstance(v, (bool, np.bool_)) and isinstance(v, numbers.Real) and bool(np.isfinite(v))


def _scaling(scaling, dynamic: bool = False, name: str = "scaling") -> tuple:
    """(type or None, factor) of a checked scaling dict; a ValueError names it (as ``name``) and a valid one.

    ``dynamic``: the dict of ``dynamic_rope_scaling`` (NTK or YaRN, ``original_max_position`` required)."""
    if scaling is None and not dynamic:
        return None, 1.0
    example = ('{"type": "linear", "factor": 2.0} or {"type": "yarn", "factor": 2.0, '
               '"original_max_position": 16}')
    if not isinstance(scaling, dict) or scaling.get("type") not in ROPE_SCALINGS:
        raise ValueError(f"{name}={scaling!r} must be None or a dict with type in {ROPE_SCALINGS}, "
                         f"for example {example}")
    kind = scaling["type"]
    if dynamic and kind == "linear":
        raise ValueError(f"{name}: dynamic scaling is NTK's or YaRN's (Peng et al. 2023 §3.3); got type 'linear': "
                         "use {'type': 'ntk', 'original_max_position': L} or a 'yarn' dict")
    allowed = _SCALING_KEYS[kind] + (("original_max_position",) if dynamic else ())
    unknown = sorted(str(k) for k in scaling if k not in allowed)
    if unknown:
        raise ValueError(f"{name} has unknown key(s) {unknown} for type {kind!r}; valid keys: {list(allowed)}")
    s = scaling.get("factor", 1.0 if dynamic else None)
    if not _real(s) or s <= 0:
        raise ValueError(f"{name} factor={s!r} must be a positive finite number (the length ratio new / "
                         f"trained); for example {example}")
    if s < np.finfo(np.float64).tiny:  # 1 / s would overflow: every frequency inf
        raise ValueError(f"{name} factor={s!r} is below {np.finfo(np.float64).tiny:.3g} (a subnormal number): "
                         f"dividing the frequencies by it overflows to inf; a factor is a length ratio, e.g. 2.0")
    if kind == "yarn" or dynamic:
        L = scaling.get("original_max_position")
        if not _real(L) or not L > 0:
            raise ValueError(f"{name} of type {kind!r} needs original_max_position (the training length L) > 0 and finite, "
                             f"got {L!r}; for example {example}")
    if kind == "yarn":
        fast, slow = scaling.get("beta_fast", 32.0), scaling.get("beta_slow", 1.0)
        if not (_real(fast) and _real(slow) and fast > slow > 0):
            raise ValueError(f"{name}: yarn needs finite beta_fast > beta_slow > 0, got beta_fast={fast!r}, "
                             f"beta_slow={slow!r}; the paper's values are 32 and 1")
        if scaling.get("ramp", "reference") not in YARN_RAMPS:
            raise ValueError(f"{name}: yarn ramp={scaling.get('ramp')!r} is not one of {YARN_RAMPS} ('reference': the "
                             "authors' and Hugging Face's code, 'paper': gamma(r) of Peng et al. §3.2)")
    return kind, float(s)


def alibi_slopes(h: int) -> np.ndarray:
    """h -> slopes (h,): ALiBi's head-specific slopes m_i (Press et al. 2022).

    For h a power of two the geometric sequence 2^(-8/h), 2^(-16/h), ..., 2^(-8); otherwise the
    paper's rule: the slopes of the nearest lower power of two n, then every other slope of 2n,
    the first h - n of them (in that order). That rule is the authors' code (``get_slopes`` in
    github.com/ofirpress/attention_with_linear_biases), which §3 of the paper only sketches.

    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> alibi_slopes(6).tolist()  # the 4 of h = 4, then slopes 1 and 3 of h = 8
    [0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125]
    """
    h = _validate.positive_int(h, "h")
    _validate.allocation(4 * 8 * h, f"ALiBi slopes for h={h} heads", "give the number of heads of the attention")

    def geometric(n):  # 2^(-8/n), 2^(-16/n), ..., 2^(-8)
        return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)
    n = 2 ** int(math.floor(math.log2(h)))
    if n == h:
        return geometric(h)
    return np.concatenate([geometric(n), geometric(2 * n)[0::2][:h - n]])


def alibi_bias(h: int, T: int, S=None) -> np.ndarray:
    """h, T [, S] -> bias (h, T, S): bias[i, t, s] = -m_i · |(S - T + t) - s|, m = alibi_slopes(h).

    Added to the scores Q K^T / sqrt(d_k) before the softmax, in place of any position encoding.
    The T queries are the last T of the S positions (as in decoding); S defaults to T. Use it with
    a causal mask: ALiBi penalises distance, it does not hide the future.

    >>> alibi_bias(1, 3)[0].round(4)
    array([[ 0.    , -0.0039, -0.0078],
           [-0.0039,  0.    , -0.0039],
           [-0.0078, -0.0039,  0.    ]])
    """
    m = alibi_slopes(h)
    T = _validate.positive_int(T, "T")
    S = T if S is None else _validate.positive_int(S, "S")
    if S < T:
        raise ValueError(f"S={S} < T={T}: the T queries are the last T of the S positions; give S >= T")
    _validate.allocation(8 * T * S * (h + 2), f"an ALiBi bias (h, T, S) = ({h}, {T}, {S})",
                         "ask for fewer queries T or keys S")
    distance = np.abs((S - T + np.arange(T))[:, None] - np.arange(S)[None, :])  # (T, S)
    return -m[:, None, None] * distance + 0.0  # (h, 1, 1) x (T, S) -> (h, T, S); + 0.0: no -0.0
