"""Why several heads: a query that must gather from two positions at once (numpy only).

Every token is ``x_t = [u_t | e_t | 0]``: ``content`` random features ``u_t``, then a one-hot
position ``e_t`` of length T, then zeros up to d_model. The task: every query must return the
first half of ``u_a`` next to the second half of ``u_b`` (two facts from two files at once).

One head has one softmax per query: whatever its weights ``p``, its output is a linear map of
the blend ``sum_s p_s x_s``, and no linear map can undo the blend. The best one explains only
half of the target (relative error 0.5 on unit-variance content). Two heads each attend sharply
to one position, and W_O puts the two halves side by side: the error falls towards 0 as the
scores get sharper.

Shapes: ``n`` examples, ``T`` positions, ``D = d_model``.

The per-head maps at the end (``head_qk_maps``, ``head_ov_maps``, ``head_writes``) read any
MHAParams: each head's score form W_Q^(i) W_K^(i)ᵀ and its write W_V^(i) W_O^(i), both
(D, D) of rank at most d_k (notebooks 03 and 04).

Taught in 03_multi_head_split.ipynb and 04_concat_output.ipynb.
"""
from __future__ import annotations

import numpy as np

from .. import _validate
from ..mha import MHAParams, multi_head_attention

__all__ = ["gather_inputs", "gather_target", "gather_output_projection", "two_head_params", "one_head_params",
           "fit_output_projection", "relative_error", "blend_error", "head_errors",
           "head_qk_maps", "head_ov_maps", "head_writes"]


def _sizes(d_model: int, T, content: int, a=None, b=None, positions: bool = True) -> None:
    """The sizes of the task and its two positions a != b (``positions=False``: no T, as for W_o alone)."""
    T = T if positions else None
    sizes = (("d_model", d_model), ("content", content)) + ((("T", T),) if positions else ())
    for name, v in sizes:
        _validate.positive_int(v, name)
    if content % 2:
        raise ValueError(f"content={content} must be even (half from each position); use content={content + 1}")
    need = content if T is None else max(T, content)
    if d_model % 2 or d_model // 2 < need:
        raise ValueError(f"d_model={d_model} is too small for two heads over T={T} positions with "
                         f"content={content}: each head needs d_k >= {need}; use d_model >= {2 * need} (even)")
    if T is not None:
        _validate.index(a, T, "a", "token positions")
        _validate.index(b, T, "b", "token positions")
        if a == b:
            raise ValueError(f"a={a}, b={b} must be two different positions in 0..{T - 1}")
    _validate.allocation(4 * 8 * d_model * d_model, f"four (d_model, d_model) = ({d_model}, {d_model}) matrices",
                         "choose a smaller d_model")


def _task_arrays(x, y=None) -> tuple:
    """x (n, T, D) and y (its shape) of the task, checked: finite, 3-D, non-empty, the same shape."""
    x = _validate.finite_array(x, "x")
    _validate.ndim(x, "x", 3, "(n, T, d_model)")
    _validate.nonempty(x, "x", "(n, T, d_model)")
    if y is None:
        return x, None
    y = _validate.finite_array(y, "y")
    if y.shape != x.shape:
        raise ValueError(f"y has shape {y.shape} but x {x.shape}; give the target of this x, gather_target(x, a, b)")
    return x, y


def gather_inputs(n: int, T: int = 6, content: int = 8, d_model: int = 16, *,
                  rng: np.random.Generator) -> np.ndarray:
    """n, T, content, d_model -> x (n, T, d_model): N(0, 1) content, a one-hot position, zeros.

    >>> x = gather_inputs(3, rng=np.random.default_rng(0))
    >>> x.shape, x[0, 2, 8:14].tolist()
    ((3, 6, 16), [0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    """
    n = _validate.positive_int(n, "n")
    _sizes(d_model, T, content, 0, 1)
    _validate.instance(rng, np.random.Generator, "rng", "pass rng=np.random.default_rng(0)")
    _validate.allocation(2 * 8 * n * T * d_model, f"inputs (n, T, d_model) = ({n}, {T}, {d_model})",
                         "ask for fewer sequences n")
    x = np.zeros((n, T, d_model))
    x[..., :content] = rng.normal(size=(n, T, content))       # (n, T, content)
    x[:, np.arange(T), content + np.arange(T)] = 1.0           # one-hot positions
    return x


def gather_target(x: np.ndarray, a: int, b: int, content: int = 8) -> np.ndarray:
    """x (n, T, D) -> y (n, T, D): every query wants u_a[:content/2] beside u_b[content/2:].

    >>> x = gather_inputs(2, rng=np.random.default_rng(0))
    >>> y = gather_target(x, a=1, b=5)
    >>> bool(np.array_equal(y[:, 3, :4], x[:, 1, :4])), bool(np.array_equal(y[:, 3, 4:8], x[:, 5, 4:8]))
    (True, True)
    """
    x, _ = _task_arrays(x)
    n, T, d_model = x.shape
    _sizes(d_model, T, content, a, b)
    half = content // 2
    row = np.zeros((n, d_model))
    row[:, :half] = x[:, a, :half]                 # the first fact, from position a
    row[:, half:content] = x[:, b, half:content]   # the second fact, from position b
    return np.broadcast_to(row[:, None, :], x.shape).copy()  # (n, D) -> (n, T, D)


def _head_block(d_model: int, T: int, content: int, start: int, width: int,
                targets, sharpness: float):
    """W_q, W_k, W_v columns start..start+width of one head that looks for ``targets``."""
    W_q, W_k, W_v = (np.zeros((d_model, d_model)) for _ in range(3))
    positions = content + np.arange(T)
    W_k[positions, start + np.arange(T)] = 1.0                       # key = one-hot position
    for target in targets:                                           # every query asks for target
        W_q[positions, start + target] = sharpness * np.sqrt(width)  # score = sharpness
    W_v[np.arange(content), start + np.arange(content)] = 1.0        # value = content
    return W_q, W_k, W_v


def two_head_params(d_model: int, T: int, a: int, b: int, *, content: int = 8,
                    sharpness: float = 8.0) -> MHAParams:
    """Sizes -> MHAParams for h = 2: head 0 reads position a, head 1 position b; W_O joins halves.

    >>> rng = np.random.default_rng(0)
    >>> x = gather_inputs(200, rng=rng)
    >>> out, w = multi_head_attention(x, two_head_params(16, 6, 1, 5), h=2)
    >>> relative_error(out, gather_target(x, 1, 5)) < 1e-4, w[0, :, 0].argmax(axis=-1).tolist()
    (True, [1, 5])
    """
    _sizes(d_model, T, content, a, b)
    sharpness = _validate.number(sharpness, "sharpness")
    d_k = d_model // 2
    blocks = [_head_block(d_model, T, content, i * d_k, d_k, [p], sharpness)
              for i, p in enumerate((a, b))]
    W_q, W_k, W_v = (sum(parts) for parts in zip(*blocks))
    return MHAParams(W_q, W_k, W_v, gather_output_projection(d_model, content))


def gather_output_projection(d_model: int, content: int = 8) -> np.ndarray:
    """d_model, content -> W_o (d_model, d_model) of the two heads: the chief's merge.

    Head 0's report (concat columns 0..d_k-1) holds u_a, head 1's (columns d_k..) holds u_b.
    Row strip i of W_o is what head i contributes: output feature f < content/2 comes from
    head 0's feature f, output feature content/2 <= f < content from head 1's feature f.

    >>> W = gather_output_projection(8, content=4)
    >>> np.argwhere(W).tolist()   # (concat column, output feature)
    [[0, 0], [1, 1], [6, 2], [7, 3]]
    """
    _sizes(d_model, None, content, positions=False)
    d_k, half = d_model // 2, content // 2
    W_o = np.zeros((d_model, d_model))
    W_o[np.arange(half), np.arange(half)] = 1.0                           # head 0: first half of u_a
    W_o[d_k + np.arange(half, content), np.arange(half, content)] = 1.0   # head 1: second half of u_b
    return W_o


def fit_output_projection(concat: np.ndarray, y: np.ndarray) -> np.ndarray:
    """concat (n, T, D), y (n, T, D) -> W_o (D, D), the least-squares best ``concat @ W_o``.

    >>> c = np.random.default_rng(0).normal(size=(4, 3, 2))
    >>> bool(np.allclose(c @ fit_output_projection(c, 2 * c), 2 * c))
    True
    """
    concat = _validate.finite_array(concat, "concat")
    _validate.ndim(concat, "concat", 3, "(n, T, D)")
    _validate.nonempty(concat, "concat", "(n, T, D)")
    y = _validate.finite_array(y, "y")
    if y.ndim != 3 or y.shape[:2] != concat.shape[:2] or y.shape[2] == 0:
        raise ValueError(f"y has shape {y.shape} but concat {concat.shape}; give one target row per row of "
                         "concat: y (n, T, D) with concat's n and T")
    A, Y = concat.reshape(-1, concat.shape[-1]), y.reshape(-1, y.shape[-1])  # (n*T, D) each
    W_o = np.linalg.lstsq(A, Y, rcond=None)[0]
    if not np.isfinite(W_o).all():  # y / concat past float64's range, e.g. concat of 1e-310
        raise ValueError(f"the best W_o does not fit in float64: concat (largest {np.abs(A).max():.3g}) is too "
                         f"small beside y (largest {np.abs(Y).max():.3g}); rescale concat or y")
    return W_o


def one_head_params(x: np.ndarray, y: np.ndarray, a: int, b: int, *, content: int = 8,
                    sharpness: float = 8.0) -> MHAParams:
    """x, y (n, T, D) -> MHAParams for h = 1: one softmax over a and b, W_O fitted to y.

    >>> rng = np.random.default_rng(0)
    >>> x = gather_inputs(200, rng=rng)
    >>> y = gather_target(x, 1, 5)
    >>> out, w = multi_head_attention(x, one_head_params(x, y, 1, 5), h=1)
    >>> f"{relative_error(out, y):.2f}", np.round(w[0, 0, 0], 2).tolist()
    ('0.49', [0.0, 0.5, 0.0, 0.0, 0.0, 0.5])
    """
    x, y = _task_arrays(x, y)
    n, T, d_model = x.shape
    _sizes(d_model, T, content, a, b)
    sharpness = _validate.number(sharpness, "sharpness")
    W_q, W_k, W_v = _head_block(d_model, T, content, 0, d_model, [a, b], sharpness)
    no_out = MHAParams(W_q, W_k, W_v, np.eye(d_model))
    concat, _ = multi_head_attention(x, no_out, h=1)                      # (n, T, D)
    return no_out._replace(W_o=fit_output_projection(concat, y))


def relative_error(out: np.ndarray, y: np.ndarray) -> float:
    """out, y (same shape) -> ||out - y||^2 / ||y||^2: 0 is perfect, 1 is as bad as returning 0.

    >>> relative_error(np.zeros(3), np.ones(3)), relative_error(np.ones(3), np.ones(3))
    (1.0, 0.0)
    """
    out, y = _validate.finite_array(out, "out"), _validate.finite_array(y, "y")
    if out.shape != y.shape or out.size == 0:
        raise ValueError(f"out has shape {out.shape} and y {y.shape}; give two non-empty arrays of one shape")
    scale = float(np.abs(y).max())  # (out - y) / scale and y / scale: no square under- or overflows
    if scale == 0:
        raise ValueError("y is all zeros: an error relative to it is undefined; give a non-zero target")
    with np.errstate(over="ignore"):
        error = float(np.sum(((out - y) / scale) ** 2) / np.sum((y / scale) ** 2))
    if not np.isfinite(error):
        raise ValueError(f"out (largest {np.abs(out).max():.3g}) is more than 1e150 times y (largest {scale:.3g}): "
                         "its relative error does not fit in float64; rescale them")
    return error


def blend_error(x: np.ndarray, y: np.ndarray, p) -> float:
    """x, y (n, T, D), p (T,) one head's weights -> relative error of the best W_O on that blend.

    Whatever the split of p, one head cannot separate the two facts: about 0.5.

    >>> rng = np.random.default_rng(0)
    >>> x = gather_inputs(400, rng=rng)
    >>> y = gather_target(x, 1, 5)
    >>> [f"{blend_error(x, y, p):.2f}" for p in ([0, 1, 0, 0, 0, 0], [0, .5, 0, 0, 0, .5])]
    ['0.51', '0.49']
    """
    x, y = _task_arrays(x, y)
    p = _validate.float_array(p, "p")
    if p.shape != (x.shape[1],) or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError(f"p must be {x.shape[1]} non-negative weights summing to 1, got {p.tolist()}")
    blend = np.broadcast_to(np.einsum("s,nsd->nd", p, x)[:, None, :], x.shape)  # (n, T, D)
    return relative_error(blend @ fit_output_projection(blend, y), y)


def head_errors(x: np.ndarray, y: np.ndarray, a: int, b: int, *, content: int = 8,
                sharpness: float = 8.0) -> dict:
    """x, y (n, T, D) -> {1: error of the best single head, 2: error of the two heads}.

    >>> rng = np.random.default_rng(0)
    >>> x = gather_inputs(200, rng=rng)
    >>> {h: f"{e:.2f}" for h, e in head_errors(x, gather_target(x, 1, 5), 1, 5).items()}
    {1: '0.49', 2: '0.00'}
    """
    x, y = _task_arrays(x, y)
    d_model = x.shape[-1]
    one = one_head_params(x, y, a, b, content=content, sharpness=sharpness)
    two = two_head_params(d_model, x.shape[1], a, b, content=content, sharpness=sharpness)
    return {1: relative_error(multi_head_attention(x, one, h=1)[0], y),
            2: relative_error(multi_head_attention(x, two, h=2)[0], y)}


# ----------------------------------------------------------------------------- per-head maps
def _head_params(params, h) -> tuple[int, int]:
    """params, h -> (d_model, d_k), after checking that params is an MHAParams and h divides d_model."""
    if not isinstance(params, MHAParams):
        raise ValueError(f"params must be an MHAParams, got {type(params).__name__}; "
                         "make one with mc.init_params(d_model, rng=rng)")
    D = params.W_q.shape[0]
    h = _validate.heads(D, h)
    return D, D // h


def head_qk_maps(params: MHAParams, h: int) -> np.ndarray:
    """params, h -> M (h, D, D): M[i] = W_Q^(i) W_K^(i)ᵀ, so head i's raw score is x_t M[i] x_sᵀ.

    W_Q^(i) and W_K^(i) are the (D, d_k) column slices of head i, so each M[i] has rank at most
    d_k = D / h (Bhojanapalli et al. 2020 call this the low-rank bottleneck of narrow heads).
    The scaled score of the forward pass is x_t M[i] x_sᵀ / √d_k (without biases).

    >>> from mha_course import init_params
    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> M = head_qk_maps(p, 4)
    >>> M.shape, [int(np.linalg.matrix_rank(m)) for m in M]
    ((4, 8, 8), [2, 2, 2, 2])
    """
    D, d_k = _head_params(params, h)
    W_q = params.W_q.reshape(D, h, d_k).transpose(1, 0, 2)  # (D, D) -> (h, D, d_k)
    W_k = params.W_k.reshape(D, h, d_k).transpose(1, 0, 2)  # (D, D) -> (h, D, d_k)
    return W_q @ W_k.transpose(0, 2, 1)                      # (h, D, d_k) x (h, d_k, D) -> (h, D, D)


def head_ov_maps(params: MHAParams, h: int) -> np.ndarray:
    """params, h -> OV (h, D, D): OV[i] = W_V^(i) W_O^(i), what head i writes per unit of attention.

    W_V^(i) is head i's (D, d_k) column slice of W_V and W_O^(i) its (d_k, D) row strip of
    W_O, so each OV[i] has rank at most d_k. Without biases the block's output is exactly
    ``sum_i weights_i @ X @ OV[i]``: each head writes its own low-rank map of what it reads
    into the residual stream, and the writes add (Elhage et al. 2021).

    >>> from mha_course import init_params
    >>> p = init_params(8, rng=np.random.default_rng(0))
    >>> OV = head_ov_maps(p, 2)
    >>> OV.shape, bool(np.allclose(OV.sum(axis=0), p.W_v @ p.W_o))
    ((2, 8, 8), True)
    """
    D, d_k = _head_params(params, h)
    W_v = params.W_v.reshape(D, h, d_k).transpose(1, 0, 2)  # (D, D) -> (h, D, d_k)
    W_o = params.W_o.reshape(h, d_k, D)                     # (D, D) -> (h, d_k, D): row strips
    return W_v @ W_o                                         # (h, D, d_k) x (h, d_k, D) -> (h, D, D)


def head_writes(x, params: MHAParams, h: int, weights) -> np.ndarray:
    """x (B, T, D), params, h, weights (B, h, T, T) -> writes (B, h, T, D): what each head adds.

    writes[:, i] = weights_i @ (x W_V^(i) + b_V^(i)) W_O^(i). Their sum over the head axis,
    plus b_O, is the output of ``multi_head_attention(x, params, h)`` for self-attention:
    the heads never meet inside the layer, they only add their writes.

    >>> from mha_course import init_params
    >>> rng = np.random.default_rng(0)
    >>> p, x = init_params(8, rng=rng), rng.normal(size=(1, 5, 8))
    >>> out, w = multi_head_attention(x, p, 2)
    >>> bool(np.allclose(head_writes(x, p, 2, w).sum(axis=1), out))
    True
    """
    D, d_k = _head_params(params, h)
    x = _validate.finite_array(x, "x")
    _validate.ndim(x, "x", 3, "(B, T, d_model)")
    if x.shape[-1] != D:
        raise ValueError(f"x has d_model={x.shape[-1]} but params have d_model={D}; pass matching sizes")
    B, T, _ = x.shape
    w = _validate.finite_array(weights, "weights")
    if w.shape != (B, h, T, T):
        raise ValueError(f"weights must have shape (B, h, T, T) = {(B, h, T, T)}, got {w.shape}; "
                         "pass the weights multi_head_attention returned for this x")
    V = x @ params.W_v + (0 if params.b_v is None else params.b_v)  # (B, T, D)
    V_heads = V.reshape(B, T, h, d_k).transpose(0, 2, 1, 3)       # (B, T, D) -> (B, h, T, d_k)
    W_o = params.W_o.reshape(h, d_k, D)                           # (D, D) -> (h, d_k, D)
    return (w @ V_heads) @ W_o[None]                               # (B, h, T, d_k) x (1, h, d_k, D) -> (B, h, T, D)
