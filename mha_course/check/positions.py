"""Checkers for notebook 07: ``sinusoidal_positions``, ``apply_rope`` (interleaved layout), ``rope_scores``.

The cases vary T, d_model / d_k, the batch axes, the positions (not always 0..T-1) and the base,
so no table of constants fits. The catalogues hold what a learner who half-remembers the
formulas writes: sine and cosine swapped, a frequency exponent off by a factor, the cos column
given its own frequency, positions that start at 1 or are ignored, one frequency per feature
instead of per pair, a sign slip in one rotation term, the two layouts mixed up, the scores
transposed or a query off by one position. A mistake outside the catalogue gets a closer
look: which columns (sinusoids) or which pairs of features (RoPE) are wrong, and by what angle.
"""
from __future__ import annotations

import numpy as np

from ..positions import apply_rope as _apply_rope
from ..positions import sinusoidal_positions as _sinusoidal_positions
from .engine import Case, Exercise, Mistake
from .masks import call_timed, check_with_closer_look
from .vocabulary import TWICE_D_K

__all__ = ["sinusoidal_positions", "apply_rope", "rope_scores", "SINUSOIDAL_POSITIONS", "APPLY_ROPE",
           "ROPE_SCORES"]


# ---------------------------------------------------------------------------------------
# sinusoidal positions
# ---------------------------------------------------------------------------------------

def _sinusoids(T, d_model, *, divisor=None, start=0, swap=False, halves=False, own_index=False, sines_only=False,
               multiply=False):
    """A configurable sinusoid table (T, d_model): the reference and its typical wrong twins.

    ``divisor(i, d_model, T)`` is what pos is divided by for pair i (default 10000^(2i/d_model)).
    """
    pos = np.arange(start, start + T)[:, None]  # (T, 1)
    i = np.arange(d_model // 2)  # (d_model/2,): the pair index
    div = 10000.0 ** (2 * i / d_model) if divisor is None else divisor(i, d_model, T)
    angles = pos * div if multiply else pos / div  # (T, d_model/2)
    first, second = (np.cos, np.sin) if swap else (np.sin, np.cos)
    if halves:
        return np.concatenate([first(angles), second(angles)], axis=-1)  # sin block, then cos block
    out = np.empty((T, d_model))
    out[:, 0::2] = first(angles)
    if own_index:  # column 2i+1 given the frequency of its own index: 10000^((2i+1)/d_model)
        out[:, 1::2] = second(pos / 10000.0 ** ((2 * i + 1) / d_model))
    else:
        out[:, 1::2] = first(angles) if sines_only else second(angles)
    return out


def _sinusoid_cases():
    return [Case((T, d), f"T={T}, d_model={d}") for T, d in ((5, 4), (7, 10), (3, 16), (12, 6), (1, 2), (9, 8),
                                                             (20, 12))]


def _sin_mistake(name, fix, **how):
    return Mistake(name, fix, lambda T, d_model: _sinusoids(T, d_model, **how))


_FIX_EXP = "with i the pair index 0..d_model/2-1, divide pos by 10000 ** (2 * i / d_model)"
_SINUSOID_MISTAKES = (
    _sin_mistake("sine and cosine swapped (cos in the even columns 2i, sin in the odd ones)",
                 "PE[:, 0::2] = sin(angles), PE[:, 1::2] = cos(angles)", swap=True),
    _sin_mistake("the frequency exponent is off by a factor of 2: 10000^(i/d_model) instead of 10000^(2i/d_model)",
                 _FIX_EXP, divisor=lambda i, d, T: 10000.0 ** (i / d)),
    _sin_mistake("the 2 applied twice: 10000^(4i/d_model) (i was already the even column index 2i)",
                 "use the pair index i = 0, 1, 2, ... with 2 * i, or the even column index 2i alone",
                 divisor=lambda i, d, T: 10000.0 ** (4 * i / d)),
    _sin_mistake("the exponent divided by T instead of d_model: 10000^(2i/T)", _FIX_EXP, divisor=lambda i, d, T: 10000.0 ** (2 * i / T)),
    _sin_mistake("the cos column 2i+1 given the frequency of its own index, 10000^((2i+1)/d_model): a pair shares "
                 "one frequency", "column 2i+1 uses the same angle as column 2i: cos(pos / 10000 ** (2i / d_model))",
                 own_index=True),
    _sin_mistake("pos multiplied by 10000^(2i/d_model) instead of divided (a positive exponent)",
                 "angle = pos / 10000 ** (2i / d_model) = pos * 10000 ** (-2i / d_model)", multiply=True),
    _sin_mistake("10000 ** 2 * i / d_model: without brackets the power applies to 2 only", _FIX_EXP + " (brackets)",
                 divisor=lambda i, d, T: 10000.0 ** 2 * i / d),
    _sin_mistake("only sines: the odd columns are sines too", "PE[:, 1::2] = cos(angles)", sines_only=True),
    Mistake("the column index j used as the pair index: column j turns at 10000^(-2j/d_model), so the "
            "frequencies fall twice as fast and a sin/cos pair no longer shares one", _FIX_EXP,
            lambda T, d_model: np.where(np.arange(d_model) % 2 == 0,
                                        np.sin(np.arange(T)[:, None] / 10000.0 ** (2 * np.arange(d_model) / d_model)),
                                        np.cos(np.arange(T)[:, None] / 10000.0 ** (2 * np.arange(d_model) / d_model)))),
    _sin_mistake("positions start at 1 instead of 0",
                 "use pos = np.arange(T): the first token is position 0, whose row is [0, 1, 0, 1, ...]", start=1),
    _sin_mistake("all sines first, then all cosines (concatenated halves) instead of interleaved columns",
                 "interleave: column 2i is the sine of frequency i, column 2i+1 its cosine", halves=True),
    Mistake("the table transposed: (d_model, T), one row per feature", "return PE of shape (T, d_model)",
            lambda T, d_model: _sinusoidal_positions(T, d_model).T),
)
SINUSOIDAL_POSITIONS = Exercise("sinusoidal_positions", _sinusoidal_positions, _sinusoid_cases, _SINUSOID_MISTAKES,
                                axes={"result": ("position", "column")})


def _column_closer_look(fn) -> list:
    T, d_model = 11, 8
    want, got = _sinusoidal_positions(T, d_model), np.asarray(call_timed(fn, T, d_model), dtype=float)
    if got.shape != want.shape:
        return [f"for T={T}, d_model={d_model} the table has shape {got.shape}, expected {want.shape}"]
    pos = np.arange(T)[:, None]
    omegas = 10000.0 ** (-np.arange(0, d_model) / d_model)  # every exponent j / d_model, j = 0..d_model-1
    lines = []
    for col in range(d_model):
        if np.allclose(got[:, col], want[:, col], atol=1e-6):
            continue
        kind = "sin" if col % 2 == 0 else "cos"
        fits = [f"{name}(pos / 10000^({j}/{d_model}))" for j, w in enumerate(omegas)
                for name, f in (("sin", np.sin), ("cos", np.cos)) if np.allclose(got[:, col], f(pos[:, 0] * w))]
        lines.append(f"column {col} (pair {col // 2}, the {kind}): " +
                     (f"yours is {fits[0]}; expected {kind}(pos / 10000^({col // 2 * 2}/{d_model}))" if fits
                      else f"not a {kind} of any of the table's frequencies; row 1 gives {got[1, col]:.4f}, "
                           f"expected {want[1, col]:.4f}"))
        if len(lines) == 3:
            break
    return [f"T={T}, d_model={d_model}:"] + lines if lines else []


def sinusoidal_positions(fn) -> bool:
    """Check a learner's ``sinusoidal_positions(T, d_model)``: -> PE (T, d_model), even d_model.

    >>> import mha_course as mc
    >>> sinusoidal_positions(mc.sinusoidal_positions)
    ✔ sinusoidal_positions: all 7 cases match
    True
    """
    return check_with_closer_look(SINUSOIDAL_POSITIONS, fn, _column_closer_look)


# ---------------------------------------------------------------------------------------
# RoPE
# ---------------------------------------------------------------------------------------

def _rope_reference(x, positions, base=10000.0):
    """x (..., T, d_k), positions (T) -> rotated (..., T, d_k), interleaved pairs."""
    return _apply_rope(x, positions, base, "interleaved")


def _rope_variant(x, positions, base=10000.0, *, theta_of=None, sign_a=-1.0, sign_b=1.0, swap_trig=False,
                  write_halves=False, per_feature=False, divide=False, in_place=False):
    """A configurable interleaved RoPE: the reference and its typical wrong twins.

    ``theta_of(d_k, base)`` gives the pair frequencies (default base^(-2i/d_k)); ``sign_a``
    and ``sign_b`` are the signs of the sin terms of new a and new b; ``swap_trig`` swaps cos
    and sin; ``write_halves`` writes the pairs back as two halves; ``per_feature`` gives each
    feature its own frequency base^(-j/d_k); ``divide`` divides the position by theta;
    ``in_place`` computes new b from the already rotated a (x[..., 0::2] overwritten first).
    """
    x, positions = np.asarray(x, dtype=float), np.asarray(positions, dtype=float)
    d_k = x.shape[-1]
    theta = base ** (-np.arange(0, d_k, 2) / d_k) if theta_of is None else theta_of(d_k, base)  # (d_k/2,)
    angles = positions[:, None] / theta if divide else positions[:, None] * theta  # (T, d_k/2)
    a, b = x[..., 0::2], x[..., 1::2]
    if per_feature:
        every = base ** (-np.arange(d_k) / d_k)  # (d_k,): one frequency per feature
        ang_a, ang_b = positions[:, None] * every[0::2], positions[:, None] * every[1::2]
    else:
        ang_a = ang_b = angles
    cos_a, sin_a, cos_b, sin_b = np.cos(ang_a), np.sin(ang_a), np.cos(ang_b), np.sin(ang_b)
    if swap_trig:
        cos_a, sin_a, cos_b, sin_b = sin_a, cos_a, sin_b, cos_b
    new_a = a * cos_a + sign_a * b * sin_a
    new_b = sign_b * (new_a if in_place else a) * sin_b + b * cos_b
    if write_halves:
        return np.concatenate([new_a, new_b], axis=-1)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = new_a, new_b
    return out


def _rope_mistake(name, fix, **how):
    return Mistake(name, fix, lambda x, positions, base=10000.0: _rope_variant(x, positions, base, **how))


def _rope_cases():
    rng = np.random.default_rng(20240707)
    return [Case((rng.normal(size=(5, 4)), np.arange(5)), "x (T=5, d_k=4), positions 0..4"),
            Case((rng.normal(size=(2, 3, 6, 8)), np.arange(6), 100.0), "x (B=2, h=3, T=6, d_k=8), base=100"),
            Case((rng.normal(size=(4, 6)), np.array([3, 9, 10, 20])), "positions 3, 9, 10, 20 (not 0..T-1)"),
            Case((rng.normal(size=(3, 7, 16)), np.arange(7) + 40, 500.0), "x (3, T=7, d_k=16), positions 40..46"),
            Case((rng.normal(size=(1, 2)), np.array([1])), "one token, d_k=2, position 1"),
            Case((rng.normal(size=(2, 3, 10)), np.array([7, 2, 5]), 30.0), "d_k=10, positions 7, 2, 5, base=30")]


_FIX_ROT = "new a = a cos - b sin, new b = a sin + b cos, with (a, b) = (x[..., 0::2], x[..., 1::2])"
_FIX_THETA = "with i the pair index 0..d_k/2-1, theta_i = base ** (-2 * i / d_k)"
_ROPE_MISTAKES = (
    Mistake("the halves layout (pairs i, i + d_k/2, GPT-NeoX / Hugging Face Llama) instead of interleaved (2i, 2i+1)",
            "rotate pairs (x[..., 0::2], x[..., 1::2]), as in the RoFormer paper",
            lambda x, positions, base=10000.0: _apply_rope(x, positions, base, "halves")),
    _rope_mistake("the frequency exponent is off by a factor of 2: base^(-i/d_k) instead of base^(-2i/d_k)",
                  _FIX_THETA, theta_of=lambda d, b: b ** (-np.arange(d // 2) / d)),
    _rope_mistake("the 2 applied twice: base^(-4i/d_k) (np.arange(0, d_k, 2) is already 2i)", _FIX_THETA,
                  theta_of=lambda d, b: b ** (-2 * np.arange(0, d, 2) / d)),
    _rope_mistake("a positive exponent: the angle is position / theta_i, so the slow pairs turn fastest",
                  "angle = positions[t] * theta_i with theta_i = base ** (-2i / d_k)", divide=True),
    _rope_mistake("one frequency per feature (base^(-j/d_k) for feature j) instead of one per pair: "
                  "a and b of a pair turn at different speeds, and norms change",
                  "compute theta for the d_k/2 pairs and use the same angle for both members of a pair",
                  per_feature=True),
    Mistake("positions start at 1 instead of 0 (or 1 was added to the given positions)",
            "rotate by the positions you are given: angle = positions[t] * theta_i",
            lambda x, positions, base=10000.0: _rope_reference(x, np.asarray(positions) + 1, base)),
    Mistake("the positions argument is ignored: np.arange(T) is used instead",
            "rotate token t by positions[t] (a decode step sits at position cache.length, not 0)",
            lambda x, positions, base=10000.0: _rope_reference(x, np.arange(np.shape(x)[-2]), base)),
    _rope_mistake("rotation the wrong way round (the sign of both sin terms flipped)", _FIX_ROT,
                  sign_a=1.0, sign_b=-1.0),
    _rope_mistake("a sign slip in new a: a cos + b sin (new b is right), which is not a rotation", _FIX_ROT,
                  sign_a=1.0),
    _rope_mistake("a sign slip in new b: -a sin + b cos (new a is right), which is not a rotation", _FIX_ROT,
                  sign_b=-1.0),
    _rope_mistake("cos and sin swapped in the rotation", _FIX_ROT, swap_trig=True),
    _rope_mistake("the rotated pairs written back as two halves [new a | new b] instead of interleaved",
                  "write new a into out[..., 0::2] and new b into out[..., 1::2]", write_halves=True),
    _rope_mistake("new b computed from the already rotated a (x[..., 0::2] overwritten in place first)",
                  "compute new a and new b from the old a and b: keep copies (a, b = x[..., 0::2].copy(), "
                  "x[..., 1::2].copy()) before writing", in_place=True),
    Mistake("the base argument ignored: 10000 written in", "use the base you are given: theta_i = base ** (-2i / d_k)",
            lambda x, positions, base=10000.0: _rope_reference(x, positions, 10000.0)),
)
APPLY_ROPE = Exercise("apply_rope", _rope_reference, _rope_cases, _ROPE_MISTAKES,
                      axes={"result": ("token", "feature")}, edges=('T',))


def _pair_closer_look(fn) -> list:
    """Which pairs (2i, 2i+1) are wrong, whether their norm is kept, and the angle per position they turn."""
    d_k, positions = 8, np.array([0, 1, 2, 5])
    x = np.tile(np.array([1.0, 0.5, -0.3, 1.2, 0.8, -1.0, 0.4, 0.9]), (len(positions), 1))  # (T, d_k)
    want, got = _rope_reference(x, positions), np.asarray(call_timed(fn, x.copy(), positions.copy()), dtype=float)
    if got.shape != want.shape:
        return [f"x (T=4, d_k=8) came back with shape {got.shape}"]
    lines = []
    for i in range(d_k // 2):
        a, b = got[:, 2 * i], got[:, 2 * i + 1]
        if np.allclose(a, want[:, 2 * i]) and np.allclose(b, want[:, 2 * i + 1]):
            lines.append(f"pair {i} (features {2 * i}, {2 * i + 1}): right")
            continue
        r0 = np.hypot(x[0, 2 * i], x[0, 2 * i + 1])
        kept = np.allclose(np.hypot(a, b), r0)
        turned = np.angle((a + 1j * b) / (x[0, 2 * i] + 1j * x[0, 2 * i + 1]))  # (T,)
        theta = 10000.0 ** (-2 * i / d_k)
        per_pos = turned[1] if kept else np.nan
        lines.append(f"pair {i} (features {2 * i}, {2 * i + 1}): " + (
            f"norm kept, turned by {per_pos:+.4g} rad at position 1 (expected theta_{i} = {theta:.4g})"
            if kept else "its norm changed: this is not a rotation of the pair"))
    return ["x = one vector at positions [0, 1, 2, 5], d_k = 8:"] + lines


def apply_rope(fn) -> bool:
    """Check a learner's ``apply_rope(x, positions, base=10000.0)``: x (..., T, d_k) -> rotated, interleaved pairs.

    >>> import mha_course as mc
    >>> apply_rope(mc.apply_rope)
    ✔ apply_rope: all 6 cases match
    True
    """
    return check_with_closer_look(APPLY_ROPE, fn, _pair_closer_look)


# ---------------------------------------------------------------------------------------
# RoPE scores: both queries and keys rotated, then scaled
# ---------------------------------------------------------------------------------------

def _rope_scores_with(rotate_q=True, rotate_k=True, scale="sqrt", layout="interleaved", q_start=0, k_sign=1,
                      transpose=False, softmax=False, base_power=1.0, base_ignored=False, keys_at_end=False,
                      q_reversed=False):
    """Q (..., T, d_k), K (..., S, d_k) -> scores (..., T, S) with the chosen parts of RoPE."""
    def scores(Q, K, base=10000.0):
        """Q (..., T, d_k), K (..., S, d_k) -> scores (..., T, S) with the chosen parts of RoPE."""
        T, S, d_k = Q.shape[-2], K.shape[-2], Q.shape[-1]
        b = (10000.0 if base_ignored else base) ** base_power
        q_pos = np.arange(T)[::-1] if q_reversed else np.arange(T) + q_start
        k_pos = np.arange(T - S, T) if keys_at_end else k_sign * np.arange(S)
        q = _apply_rope(Q, q_pos, b, layout) if rotate_q else Q
        k = _apply_rope(K, k_pos, b, layout) if rotate_k else K
        div = {"sqrt": np.sqrt(d_k), "none": 1.0, "d": d_k}[scale]
        s = q @ np.swapaxes(k, -1, -2) / div  # (..., T, d_k) x (..., d_k, S)
        if softmax:
            e = np.exp(s - s.max(-1, keepdims=True))
            s = e / e.sum(-1, keepdims=True)
        return np.swapaxes(s, -1, -2) if transpose else s
    return scores


def _rope_scores_cases():
    rng = np.random.default_rng(20240710)
    return [Case((rng.normal(size=(5, 4)), rng.normal(size=(5, 4))), "Q, K (T=S=5, d_k=4)"),
            Case((rng.normal(size=(2, 3, 4, 8)), rng.normal(size=(2, 3, 6, 8)), 100.0),
                 "Q (B=2, h=3, T=4, d_k=8), K (S=6), base=100"),
            Case((rng.normal(size=(7, 6)), rng.normal(size=(3, 6))), "T=7 queries, S=3 keys"),
            Case((rng.normal(size=(1, 2, 9, 16)), rng.normal(size=(1, 2, 9, 16)), 500.0), "d_k=16, base=500"),
            Case((rng.normal(size=(4, 2)), rng.normal(size=(4, 2)), 20.0), "d_k=2, T=S=4, base=20")]


_ROPE_SCORES_MISTAKES = (
    Mistake("only the queries are rotated: the score is no longer relative",
            "rotate both: apply_rope(Q, np.arange(T)) and apply_rope(K, np.arange(S))",
            _rope_scores_with(rotate_k=False)),
    Mistake("only the keys are rotated", "rotate the queries too: apply_rope(Q, np.arange(T))",
            _rope_scores_with(rotate_q=False)),
    Mistake("RoPE is not applied at all: plain Q Kᵀ / sqrt(d_k)", "rotate Q at 0..T-1 and K at 0..S-1 first",
            _rope_scores_with(rotate_q=False, rotate_k=False)),
    Mistake("the scores are not divided by sqrt(d_k)", "divide Q Kᵀ by np.sqrt(d_k) as always",
            _rope_scores_with(scale="none")),
    Mistake("the scores are divided by d_k instead of sqrt(d_k)", "divide by np.sqrt(d_k)",
            _rope_scores_with(scale="d"),
            also=TWICE_D_K),
    Mistake("the halves layout instead of interleaved", "use layout='interleaved' (the default)",
            _rope_scores_with(layout="halves")),
    Mistake("the queries are off by one position (rotated at 1..T while the keys start at 0)",
            "rotate query t at position t and key s at position s, both from 0 (or both from the same start)",
            _rope_scores_with(q_start=1)),
    Mistake("the keys rotated by minus their positions: the score then depends on m + n, not on m - n",
            "apply_rope(K, np.arange(S)): the same direction as the queries", _rope_scores_with(k_sign=-1)),
    Mistake("the scores transposed: K Qᵀ, (S, T), one row per key", "scores = q @ swapaxes(k, -1, -2): (..., T, S)",
            _rope_scores_with(transpose=True)),
    Mistake("a softmax applied: these are the weights, the exercise asks for the scores",
            "return q kᵀ / sqrt(d_k) itself; the softmax comes after", _rope_scores_with(softmax=True)),
    Mistake("the base's exponent off by a factor of 2 inside apply_rope (base^(-i/d_k))",
            "theta_i = base ** (-2 * i / d_k)", _rope_scores_with(base_power=0.5)),
    Mistake("the base not passed on to apply_rope: its default 10000 is used", "apply_rope(Q, positions, base) "
            "and apply_rope(K, positions, base)", _rope_scores_with(base_ignored=True)),
    Mistake("the keys placed at the end of the queries' positions (T - S .. T - 1, as after a cache): here "
            "both start at 0", "rotate query t at position t and key s at position s: np.arange(T), np.arange(S)",
            _rope_scores_with(keys_at_end=True)),
    Mistake("the queries rotated at reversed positions T - 1 .. 0", "rotate query t at position t: np.arange(T)",
            _rope_scores_with(q_reversed=True)),
)
ROPE_SCORES = Exercise("rope_scores", _rope_scores_with(), _rope_scores_cases, _ROPE_SCORES_MISTAKES,
                       axes={"result": ("query", "key")},
                       sizes=lambda Q, K, base=10000.0: {"T": Q.shape[-2], "S": K.shape[-2], "d_k": Q.shape[-1]}, edges=('T', 'S'))


def _offset_closer_look(fn) -> list:
    """Are the learner's scores relative? (one q and one k at every position: constant diagonals)"""
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=4), rng.normal(size=4)
    T = 6
    got = np.asarray(call_timed(fn, np.tile(q, (T, 1)), np.tile(k, (T, 1))), dtype=float)
    if got.shape != (T, T):
        return [f"the same query and key at {T} positions give shape {got.shape}, expected ({T}, {T})"]
    spread = max(float(np.ptp(np.diag(got, o))) for o in range(-T + 1, T))
    want = _rope_scores_with()(np.tile(q, (T, 1)), np.tile(k, (T, 1)))
    rel = "they depend on m - n only (constant diagonals)" if spread < 1e-9 else \
        f"they are not relative: one diagonal (fixed m - n) spreads by {spread:.3g}"
    return [f"the same q and k at positions 0..{T - 1}: {rel}"] + (
        [f"score at m = n: {got[0, 0]:.4f}, expected {want[0, 0]:.4f} (q . k / sqrt(d_k))"]
        if spread < 1e-9 else [])


def rope_scores(fn) -> bool:
    """Check a learner's ``rope_scores(Q, K, base=10000.0)``: Q (..., T, d_k), K (..., S, d_k) -> (..., T, S).

    >>> import mha_course as mc, numpy as np
    >>> rope_scores(lambda Q, K, base=10000.0: mc.apply_rope(Q, np.arange(Q.shape[-2]), base)
    ...             @ np.swapaxes(mc.apply_rope(K, np.arange(K.shape[-2]), base), -1, -2) / np.sqrt(Q.shape[-1]))
    ✔ rope_scores: all 7 cases match
    True
    """
    return check_with_closer_look(ROPE_SCORES, fn, _offset_closer_look)
