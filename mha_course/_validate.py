"""Argument checks shared by the public functions (numpy only).

Every check raises ``ValueError`` whose message names the offending values
and says how to fix them. The public functions call these at their boundary;
nothing inside the computation re-checks.

Here: the checks of arrays, masks and attention calls (``finite_array``, ``bool_mask``,
``attention_call`` ...). The recurring scalar and container kinds (a count, an index, a choice, a
number, a flag, a Generator, a path, an allocation ...) live in ``_arguments``; every one of its
names is re-exported here, so ``_validate.index`` is ``_arguments.index``.
"""
from __future__ import annotations

import inspect
import math

import numpy as np

from ._arguments import (  # noqa: F401 (re-exported: _validate.X for every check)
    MAX_BYTES,
    allocation,
    binary_size,
    choice,
    count,
    flag,
    generator,
    index,
    instance,
    is_whole,
    items,
    items_of,
    mapping,
    named_tuple,
    names,
    number,
    path,
    physical_memory,
    positive_int,
    positive_ints,
)

MAX_D_MODEL = 2 ** 40  # divisors tries up to sqrt(n) = 2**20 numbers: a fraction of a second


def divisors(n: int, name: str = "n") -> list[int]:
    """All positive divisors of ``n`` in increasing order: they pair up as (d, n // d) with d <= sqrt(n),
    so sqrt(n) trials (the one divisor search). An ``n`` above ``MAX_D_MODEL`` (2**40, far past any model
    width) is refused, naming it as ``name``, rather than searched.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    if n > MAX_D_MODEL:
        raise ValueError(f"{name}={n} is more than MAX_D_MODEL = 2**40; a model width is a few thousand at most: "
                         f"give the {name} of the attention")
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]  # the divisors up to sqrt(n)
    return small + [n // d for d in reversed(small) if d * d != n]  # and their partners, increasing


def heads(d_model: int, h) -> int:
    """Check that ``h`` is a positive integer dividing ``d_model``; return it as int."""
    h = positive_int(h, "h")
    if d_model % h:
        valid = ", ".join(str(d) for d in divisors(d_model))
        raise ValueError(f"d_model={d_model} is not divisible by h={h}; valid h: {valid}")
    return h


def float_array(x, name: str) -> np.ndarray:
    """``x`` as a floating-point array: float32/float64 kept; float16 computed in float32 (its
    sums overflow past 65504, so a softmax over 70,000 zeros would be all zeros); anything
    else (ints, bools, longdouble) -> float64. Complex and non-numeric input are refused.

    >>> float_array(np.zeros(2, np.float16), "x").dtype, float_array([1, 2], "x").dtype
    (dtype('float32'), dtype('float64'))
    """
    try:
        arr = np.asarray(x)
    except ValueError:
        raise ValueError(f"{name} is not a rectangular array (ragged nested lists?); "
                         "give every row the same length") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__} with dtype {arr.dtype}; "
                         "pass a numpy array of floats")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{name} must be real, got dtype {arr.dtype}")
    if arr.dtype == np.float16:
        return arr.astype(np.float32)
    if arr.dtype not in (np.float32, np.float64):
        arr = arr.astype(np.float64)
    return arr


def finite(arr: np.ndarray, name: str) -> np.ndarray:
    """Return ``arr`` if every entry is finite, else raise naming where the first NaN or inf is.

    For the inputs of attention: it mixes every value into every output, and 0 * NaN = NaN,
    so one NaN, even at a masked key or a padding position, would spread to every query.

    >>> finite(np.array([[1.0, np.nan]]), "x")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: x has 1 non-finite value (the first: x[0, 1] = nan); attention mixes every key ...
    """
    if arr.dtype.kind == "f" and arr.flags.c_contiguous:
        flat = arr.reshape(-1)
        with np.errstate(over="ignore", invalid="ignore"):
            square_sum = np.dot(flat, flat)  # one BLAS pass, nothing allocated
        if np.isfinite(square_sum):  # a NaN or inf (or a sum past the float range): the full search
            return arr
    elif np.isfinite(arr).all():
        return arr
    bad = ~np.isfinite(arr)
    if bad.any():
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        n = int(bad.sum())
        raise ValueError(
            f"{name} has {n} non-finite value{'s' if n > 1 else ''} (the first: {name}{list(first)} = "
            f"{arr[first]}); attention mixes every key into every output, so a NaN or inf, even at a "
            f"masked or padding position, would spread: replace them, e.g. with np.nan_to_num({name}) "
            "or zeros at the padding positions")
    return arr


def finite_array(x, name: str) -> np.ndarray:
    """``float_array`` then ``finite``: the check for Q, K, V, x, context and weights of attention."""
    return finite(float_array(x, name), name)


def cast(arr: np.ndarray, dtype, name: str, fix: str) -> np.ndarray:
    """A finite float ``arr`` cast to the float ``dtype``, refused (naming ``fix``) when an entry does not
    fit: a float16 cache would store 1e5 as inf, and attention over an inf key gives NaN.

    >>> cast(np.array([1e5]), np.float16, "K", "make the cache with dtype=np.float32")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: K holds 1e+05, more than float16 can hold (its largest is 6.55e+04): ...
    """
    dtype = np.dtype(dtype)
    if arr.dtype == dtype:
        return arr
    with np.errstate(over="ignore"):
        out = arr.astype(dtype)
    if dtype.kind == "f" and out.size and not np.isfinite(out).all():
        big = float(np.abs(arr).max())
        raise ValueError(f"{name} holds {big:.3g}, more than {dtype} can hold (its largest is "
                         f"{float(np.finfo(dtype).max):.3g}): it would become inf; {fix}")
    return out


def token_ids(tokens, vocab: int | None, name: str = "tokens") -> np.ndarray:
    """``tokens`` as an int64 array of ids in 0 .. vocab - 1 (``vocab=None``: any id >= 0); floats, bools
    and ids out of range refused (numpy would read -1 as the last token, and 2.5 cannot index a table).

    >>> token_ids([[3, 0]], vocab=4).dtype
    dtype('int64')
    """
    span = f"in 0..{vocab - 1}" if vocab is not None else ">= 0"
    try:
        arr = np.asarray(tokens)
    except ValueError:
        raise ValueError(f"{name} is not a rectangular array (ragged nested lists?); give every row the same "
                         "length") from None
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be whole-number token ids {span}, got dtype {arr.dtype}; "
                         f"pass an int array, e.g. np.asarray({name}, dtype=int) if they are whole numbers")
    if arr.size and (arr.min() < 0 or (vocab is not None and arr.max() >= vocab)):
        bad = arr.min() if arr.min() < 0 else arr.max()
        where = f"outside 0..{vocab - 1} (vocab={vocab})" if vocab is not None else "below 0 (token ids are >= 0)"
        raise ValueError(f"{name} holds the id {bad}, {where}; numpy would read "
                         f"a negative id from the end" + (f": give ids below {vocab}" if vocab is not None else ""))
    return arr.astype(np.int64, copy=False)


def axis(value, shape: tuple, name: str = "axis") -> int:
    """Check that ``value`` is an integer axis of an array of ``shape``; return it as an int.

    >>> axis(-1, (3, 4))
    -1
    >>> axis(1.0, (3, 4))
    Traceback (most recent call last):
    ...
    ValueError: axis=1.0 must be a whole number naming an axis (got float); pass e.g. axis=-1 for the last axis
    """
    if not is_whole(value):
        raise ValueError(f"{name}={value!r} must be a whole number naming an axis (got "
                         f"{type(value).__name__}); pass e.g. {name}=-1 for the last axis")
    n = len(shape)
    if not -n <= value < n:
        raise ValueError(f"{name}={value} is out of range for an array of shape {tuple(shape)}; "
                         f"use an axis in {-n}..{n - 1}")
    return int(value)


def ndim(arr: np.ndarray, name: str, n: int, layout: str) -> None:
    """Raise unless ``arr`` has exactly ``n`` dimensions (``layout`` names them)."""
    if arr.ndim != n:
        raise ValueError(
            f"{name} must be {n}-D {layout}, got shape {arr.shape}; "
            + (f"add a batch axis with {name}[None]" if arr.ndim == n - 1 else f"reshape it to {layout}")
        )


def nonempty(arr: np.ndarray, name: str, axes: str) -> None:
    """Raise if any axis of ``arr`` has length 0."""
    if 0 in arr.shape:
        raise ValueError(
            f"{name} has an empty axis, shape {arr.shape} {axes}; "
            "attention needs at least one query, one key and one feature"
        )


def bool_mask(mask, target: tuple[int, ...], target_names: str) -> np.ndarray:
    """Check that ``mask`` is boolean and fits ``target`` without ambiguity; return it as an array.

    Convention of the whole course: True = may attend. Accepted: (S,), (T, S), or one axis per
    axis of the scores, each 1 or the scores' length. Refused: a mask with fewer axes than the
    scores but more than 2, which numpy would line up from the right (a (B, T, S) mask on
    (B, h, T, S) scores with B == h would silently go per head). A 2-D mask is always read as
    (T, S), the same for every sequence: a padding mask must be (B, 1, 1, S) (as
    ``padding_mask`` makes it); a (B, S) one is refused when B != T and, when B == T, cannot be
    told from a (T, S) mask (refusing it would refuse every causal mask whenever B == T).
    """
    arr = np.asarray(mask)
    if arr.dtype != np.bool_:
        raise ValueError(f"mask must be boolean (True = may attend), got dtype {arr.dtype} with shape "
                         f"{arr.shape}; {_mask_fix(arr)}")
    target, accepted = tuple(target), _accepted_masks(target, target_names)
    if not _broadcasts_to(arr.shape, target):
        raise ValueError(f"mask of shape {arr.shape} does not broadcast to the scores' shape {target} "
                         f"{target_names}; give it shape {accepted}")
    if 2 < arr.ndim < len(target):
        raise ValueError(f"mask of shape {arr.shape} has {arr.ndim} axes but the scores {target_names} = "
                         f"{target} have {len(target)}: numpy would line them up from the right, so "
                         f"its first axis would not mean what you think; give it shape {accepted}, "
                         "e.g. mask[:, None] for a (B, T, S) mask")
    return arr


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _accepted_masks(target: tuple, target_names: str) -> str:
    """The mask shapes that fit scores ``target`` named ``target_names``, as a sentence."""
    if target_names.startswith("(B, h,"):
        return ("(T, S) (the same for every sequence), (B, 1, 1, S) (padding, as padding_mask(lengths, S) "
                "makes it), (B, 1, T, S), (1, h, T, S) or (B, h, T, S)")
    if len(target) <= 2:
        return "(T, S) or (S,)"
    ones = ", ".join(["1"] * (len(target) - 2))
    return f"(T, S), or {len(target)} axes such as ({ones}, T, S) or the full {tuple(target)}"


def _mask_fix(arr: np.ndarray) -> str:
    """How to turn a non-boolean mask into a True = may-attend one, by what its values say."""
    try:
        values = np.unique(arr)
    except TypeError:
        values = np.array([])
    if values.dtype.kind not in "iuf" or values.size == 0:
        return "build it with causal_mask / padding_mask, or compare it, e.g. mask == 0"
    if values.dtype.kind == "f" and (np.isneginf(values).any() or values.min() < -1):
        return ("it looks additive (0 = may attend, a large negative or -inf = blocked): "
                "convert it with mask == 0 (not mask.astype(bool), which would block exactly the allowed keys)")
    if set(values.tolist()) <= {0, 1}:
        return ("if 1 means may attend (like Hugging Face's attention_mask) convert it with mask == 1; "
                "if 1 means blocked (like torch.nn.MultiheadAttention's attn_mask), with mask == 0")
    return ("if it is additive (0 = may attend, negative = blocked) convert it with mask == 0; "
            "else build a boolean one with causal_mask / padding_mask")


def attention_call(x, params, h, h_kv, mask, context, params_type, rope_base=None, S=None):
    """The one check of a multi-head (h_kv None) or grouped-query attention call.

    -> x (B, T, D), context (x itself in self-attention), params as ``params_type`` in x's dtype,
    h, h_kv (h when None), mask (bool, broadcastable to (B, h, T, S), or None). ``S`` overrides
    the number of keys the mask must cover (a KV cache adds the cached ones). Every array is
    checked once: numeric, real, finite, with the shapes d_model, h and h_kv call for.
    """
    x = finite_array(x, "x")  # a NaN, even at a padding position, would spread
    ndim(x, "x", 3, "(B, T, d_model)")
    nonempty(x, "x", "(B, T, d_model)")
    B, T, D = x.shape
    make = "init_params(d_model, rng=np.random.default_rng(0))" if h_kv is None else \
        "init_gqa_params(d_model, h, h_kv, rng=np.random.default_rng(0))"
    if not isinstance(params, params_type):
        name = params_type.__name__
        article = "an" if name[0] in "AEFHILMNORSX" else "a"  # an MHAParams, a GQAParams
        raise ValueError(f"params must be {article} {name}, got {type(params).__name__}; make one with {make}")
    W_q = np.asarray(params.W_q) if params.W_q is not None else None
    if W_q is None or W_q.ndim != 2 or W_q.shape[0] != W_q.shape[1]:
        raise ValueError(f"params.W_q has shape {np.shape(params.W_q)}, expected a square (d_model, d_model) "
                         f"matrix; make params with {make}")
    if W_q.shape[0] != D and h_kv is None:
        raise ValueError(f"x has last dim {D} but params were made for d_model={W_q.shape[0]}; "
                         f"use init_params({D}, rng=...) or give x shape (B, T, {W_q.shape[0]})")
    if W_q.shape[0] != D:
        raise ValueError(f"x has last dim {D} but params.W_q has shape {W_q.shape}; use "
                         f"init_gqa_params({D}, {h}, {h_kv}, rng=...) or give x the params' d_model")
    h = heads(D, h)
    if h_kv is None:
        g = 1
    else:
        h_kv = kv_heads(h, h_kv)
        g = h // h_kv
    what = f"d_model={D}" if h_kv is None else f"d_model={D}, h={h}, h_kv={h_kv}"
    params = projection_params(params, D, D // g, x.dtype, what, make)
    ctx = x if context is None else context_array(context, x)
    if rope_base is not None and (D // h) % 2:
        good = ", ".join(str(k) for k in divisors(D) if (D // k) % 2 == 0) or "none"
        raise ValueError(f"rope_base needs an even d_k, but d_model={D} with h={h} gives d_k={D // h}; "
                         f"h with an even d_k: {good} (or use rope_base=None)")
    if mask is not None:
        mask = bool_mask(mask, (B, h, T, ctx.shape[1] if S is None else S), "(B, h, T, S)")
    return x, ctx, params, h, (h if h_kv is None else h_kv), mask


def projection_params(params, D: int, width: int, dtype, what: str, make: str):
    """params (W_q, W_k, W_v, W_o, b_q, b_k, b_v, b_o) -> the same type, each array checked (real,
    finite, its shape: W_q, W_o (D, D), W_k, W_v (D, width), biases to match) and cast to ``dtype``."""
    wants = [(D, D), (D, width), (D, width), (D, D), (D,), (width,), (width,), (D,)]
    checked = []
    for name, p, want in zip(params._fields, params, wants):
        if p is not None:
            p = finite_array(p, f"params.{name}")
            if p.shape != want:
                raise ValueError(f"params.{name} has shape {p.shape}, expected {want} for {what}; "
                                 f"make params with {make}")
            p = cast(p, dtype, f"params.{name}", f"give x as float64, or params of at most {np.finfo(dtype).max:.3g}")
        checked.append(p)
    return type(params)(*checked)


def context_array(context, x: np.ndarray) -> np.ndarray:
    """context (B, S, d_model) of cross-attention, checked against x (B, T, d_model), in x's dtype."""
    ctx = cast(finite_array(context, "context"), x.dtype, "context", f"give x and context the same dtype ({x.dtype})")
    ndim(ctx, "context", 3, "(B, S, d_model)")
    nonempty(ctx, "context", "(B, S, d_model)")
    if ctx.shape[0] != x.shape[0] or ctx.shape[2] != x.shape[2]:
        raise ValueError(f"context has shape {ctx.shape} but x has shape {x.shape}; context must be "
                         f"(B={x.shape[0]}, S, d_model={x.shape[2]}): same batch and width as x")
    return ctx


def score_bias(bias, target: tuple, dtype) -> np.ndarray:
    """An additive score bias (ALiBi's), checked: real, finite, broadcastable to ``target`` (..., T, S)."""
    b = finite_array(bias, "bias")
    if not _broadcasts_to(b.shape, tuple(target)):
        raise ValueError(f"bias has shape {b.shape}, which does not broadcast to the scores' shape {tuple(target)}; "
                         "give one number per (head, query, key), e.g. positions.alibi_bias(h, T, S)")
    return b.astype(dtype, copy=False)


def kv_heads(h: int, h_kv) -> int:
    """``h_kv`` as an int dividing ``h`` (every key/value head serves h / h_kv query heads), or raise
    naming both and the valid h_kv.

    >>> kv_heads(8, 3)
    Traceback (most recent call last):
    ...
    ValueError: h=8 is not divisible by h_kv=3; valid h_kv: 1, 2, 4, 8
    """
    h_kv = positive_int(h_kv, "h_kv")
    if h % h_kv:
        raise ValueError(f"h={h} is not divisible by h_kv={h_kv}; valid h_kv: " + ", ".join(str(d) for d in divisors(h)))
    return h_kv


def vector(x, name: str, n: int | None = None) -> np.ndarray:
    """``x`` as a non-empty 1-D float array (of length ``n`` when given): one number per point of a curve."""
    arr = float_array(x, name)
    if arr.ndim != 1 or arr.size == 0 or (n is not None and arr.size != n):
        want = f"({n},)" if n is not None else "(N,) with N >= 1"
        raise ValueError(f"{name} must be a 1-D array of shape {want}, got shape {arr.shape}; "
                         "give one number per point")
    return arr


def array(x, name: str, n: int, layout: str) -> np.ndarray:
    """``x`` as a float array (``float_array``) of exactly ``n`` dimensions ``layout``, none of them empty.

    >>> array([[1, 2]], "matrix", 2, "(N, M)").shape
    (1, 2)
    """
    arr = float_array(x, name)
    if arr.ndim != n:
        raise ValueError(f"{name} must be {n}-D {layout}, got shape {arr.shape}; pass an array of that layout")
    if 0 in arr.shape:
        raise ValueError(f"{name} has an empty axis, shape {arr.shape} {layout}; there is nothing to draw")
    return arr


# --- the checks of a multi-head attention call beyond its arrays' shapes: their sizes, a caller's kernel
def no_bool_array(value, name: str) -> None:
    """Refuse a bool array where numbers are meant (True would be read as 1.0: a bool array is a mask)."""
    try:
        kind = np.asarray(value).dtype
    except (TypeError, ValueError):  # ragged or no array at all: float_array names it next
        return
    if kind == np.bool_:
        raise ValueError(f"{name} is a bool array (shape {np.shape(value)}); give it as floats (B, T, d_model), "
                         f"e.g. {name}.astype(float) if you mean 0/1 features")


def magnitudes(x: np.ndarray, context: np.ndarray, p, h: int, bias) -> None:
    """Refuse x (or context) so large that a projection, a score or the output could overflow x's dtype.

    Bounds, in Python floats (an overflow there is inf, with no numpy warning): a projection entry is at
    most D · max|x| · max|W| + max|b|, a score (RoPE's rotation at most doubles an entry) at most
    d_k · 4 · max|Q| · max|K| (+ max|bias|), an output entry D · max|V| · max|W_o| + max|b_o|."""
    D, limit = x.shape[-1], float(np.finfo(x.dtype).max)

    def top(a) -> float:
        return 0.0 if a is None or np.size(a) == 0 else max(float(np.max(a)), -float(np.min(a)))  # no |a| copy

    q = D * top(x) * top(p.W_q) + top(p.b_q)
    k = D * top(context) * top(p.W_k) + top(p.b_k)
    v = D * top(context) * top(p.W_v) + top(p.b_v)
    score = (D // h) * 4.0 * q * k + top(bias)
    out = D * v * top(p.W_o) + top(p.b_o)
    if not max(q, k, v, score, out) < limit:
        raise ValueError(f"x (max |x| = {top(x):.3g}) and context (max {top(context):.3g}) are too large for "
                         f"{x.dtype}: a projection, score or output could reach {max(q, k, v, score, out):.3g}, past "
                         f"the largest {x.dtype} ({limit:.3g}); scale x down (a layer_norm keeps it near 1)")


KERNEL_SIGNATURE = "attend(Q, K, V, mask, bias=None, scores=None) -> (out (B, h, T, d_k), weights (B, h, T, S) or None)"


def kernel(attend):
    """A caller's kernel, its signature checked now and what it returns checked at each call: out of the
    heads' shape and finite, weights None or (B, h, T, S) and finite (else a ValueError naming attend)."""
    if not callable(attend):
        raise TypeError(f"attend must be a function {KERNEL_SIGNATURE}, got {type(attend).__name__}; "
                        "leave it None for the package's fast kernel")
    try:
        signature = inspect.signature(attend)
        signature.bind(None, None, None, None, bias=None, scores=None)
    except TypeError:
        raise TypeError(f"attend{signature} cannot be called as {KERNEL_SIGNATURE}; give it that signature, "
                        "e.g. lambda Q, K, V, mask, bias=None, scores=None: ...") from None
    except ValueError:  # a builtin without a signature: checked by what it returns
        pass

    def checked(Q, K, V, mask, bias=None, scores=None):
        result = attend(Q, K, V, mask, bias=bias, scores=scores)
        if not (isinstance(result, tuple) and len(result) == 2):
            raise ValueError(f"attend returned {type(result).__name__}; a kernel returns the pair {KERNEL_SIGNATURE}")
        out, weights = result
        want = {"out": (*Q.shape[:-1], V.shape[-1]), "weights": (*Q.shape[:-1], K.shape[-2])}
        for name, value in (("out", out), ("weights", weights)):
            if value is None and name == "weights":
                continue
            arr = np.asarray(value)
            if arr.shape != want[name] or arr.dtype.kind not in "fiu" or not np.isfinite(arr).all():
                raise ValueError(f"attend returned {name} of shape {arr.shape} (dtype {arr.dtype}, "
                                 f"{'finite' if arr.dtype.kind in 'fiu' and np.isfinite(arr).all() else 'not finite'}); "
                                 f"this call needs {name} {want[name]}, finite: {KERNEL_SIGNATURE}")
        return out, weights
    return checked


def float_dtype(dtype) -> np.dtype:
    """``dtype`` as np.float32 or np.float64 (the dtypes the parameters are made in), or a ValueError."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        dtype = repr(dtype)
    if dtype not in (np.float32, np.float64):
        raise ValueError(f"dtype={dtype} is not supported; use np.float32 or np.float64")
    return dtype


def no_nan(arr: np.ndarray, name: str, fix: str) -> np.ndarray:
    """``arr`` if it holds no NaN, else a ValueError naming ``name``, the first NaN's index and ``fix``."""
    if np.isnan(arr).any():
        where = tuple(int(i) for i in np.argwhere(np.isnan(arr))[0])
        raise ValueError(f"{name} holds NaN (first at index {where}); {fix}")
    return arr


# --- the argument checks of attention.softmax and attention.padding_mask, and the Trace's error
def logits(x, along: int) -> np.ndarray:
    """softmax's argument checks: x as a float array with a non-empty axis ``along``."""
    arr = float_array(x, "x")
    no_nan(arr, "x", "softmax takes finite logits or +-inf (-inf: a masked key), never NaN: find where "
           "the NaN came from, or mask that entry with -inf")  # +-inf are logits; NaN is none
    if arr.ndim == 0:
        raise ValueError("softmax needs at least a 1-D array, got a scalar; wrap it as [x]")
    along = axis(along, arr.shape)
    if arr.shape[along] == 0:
        raise ValueError(f"softmax over an empty axis: x has shape {arr.shape} and axis={along} has "
                         "length 0; give it at least one logit per row")
    return arr


def lengths(lengths, S: int) -> np.ndarray:
    """``lengths`` (B,) of a padding mask over S keys: whole numbers in 0..S (no bool), and the mask's bytes
    allowed -> an array."""
    arr = np.asarray(lengths)
    if arr.dtype == np.bool_ or (arr.dtype.kind in "iuO" and any(  # True is no length, even in [True, 2]
            isinstance(n, (bool, np.bool_)) for n in np.asarray(lengths, dtype=object).reshape(-1))):
        raise ValueError(f"lengths={np.asarray(lengths, dtype=object).tolist()!r} holds a bool: True is not a length; "
                         "give whole numbers of real tokens, one per sequence, e.g. lengths=[3, 5]")
    if arr.ndim != 1 or arr.size == 0 or not (np.issubdtype(arr.dtype, np.integer)
                                              or (arr.dtype.kind == "f" and np.all(arr == np.round(arr)))):
        raise ValueError(f"lengths must be a non-empty 1-D list of whole numbers, one per sequence; "
                         f"got {np.asarray(lengths).tolist()!r}")
    bad = arr[(arr < 0) | (arr > S)]
    if bad.size:
        raise ValueError(f"lengths {arr.tolist()} must lie in 0..S=0..{S}; {bad.tolist()} do not. "
                         "A length counts the real tokens of a sequence padded to S")
    allocation((8 + arr.size) * S, f"a padding mask of {arr.size} sequences of S={S} keys",
               "pad the sequences to fewer keys S")
    return arr


class StageError(ValueError, KeyError):
    """A stage name a Trace does not hold: a ValueError (the course's bad-argument error) that is also a
    KeyError, so ``except KeyError`` and dict habits keep working. Its message names the stages."""

    def __str__(self) -> str:  # KeyError would show the message in quotes
        return str(self.args[0]) if self.args else ""
