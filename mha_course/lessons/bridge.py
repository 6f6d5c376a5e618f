"""From numpy to PyTorch: our MHAParams under ``torch.nn.MultiheadAttention``'s names (floor 3, numpy only).

``nn.Linear`` stores its weight as (out_features, in_features) and computes ``x @ weight.T + bias``;
we store W as (in, out) and compute ``x @ W + b``. So every matrix crosses the bridge transposed.
``nn.MultiheadAttention`` also stacks the three input projections into one ``in_proj_weight``
(3·D, D), in the order Q, K, V, and keeps the output projection in ``out_proj``.

This module never imports torch: it gives and takes plain arrays under torch's names, so that
``module.load_state_dict({k: torch.from_numpy(v) for k, v in torch_state_dict(p).items()})`` works.
Any object with ``.detach()`` and ``.numpy()`` (a torch tensor) is accepted on the way back.

Taught in 12_from_numpy_to_pytorch.ipynb.
"""
from __future__ import annotations

import numpy as np

from ..mha import MHAParams

__all__ = ["torch_state_dict", "params_from_torch_state", "mean_peak_weight", "STATE_KEYS"]

STATE_KEYS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")


def torch_state_dict(params: MHAParams) -> dict:
    """MHAParams (W (D, D), b (D,)) -> {"in_proj_weight": (3D, D), "out_proj.weight": (D, D), ...}.

    The biases ``in_proj_bias`` (3D,) and ``out_proj.bias`` (D,) are present only when
    ``params`` has biases (all four, as ``nn.MultiheadAttention(bias=True)`` has).

    >>> import mha_course as mc
    >>> p = mc.init_params(4, rng=np.random.default_rng(0), bias=True)
    >>> {k: v.shape for k, v in torch_state_dict(p).items()}
    {'in_proj_weight': (12, 4), 'in_proj_bias': (12,), 'out_proj.weight': (4, 4), 'out_proj.bias': (4,)}
    >>> bool(np.array_equal(torch_state_dict(p)["in_proj_weight"][4:8], p.W_k.T))
    True
    """
    if not isinstance(params, MHAParams):
        raise ValueError(f"params must be an MHAParams, got {type(params).__name__}; "
                         "make one with mc.init_params(d_model, rng=rng)")
    biases = (params.b_q, params.b_k, params.b_v, params.b_o)
    if any(b is None for b in biases) and any(b is not None for b in biases):
        raise ValueError("nn.MultiheadAttention has either all four biases or none; "
                         "these params have only some: pass bias=True or bias=False to init_params")
    state = {"in_proj_weight": np.concatenate([params.W_q.T, params.W_k.T, params.W_v.T])}
    if params.b_q is not None:
        state["in_proj_bias"] = np.concatenate([params.b_q, params.b_k, params.b_v])
    state["out_proj.weight"] = params.W_o.T.copy()
    if params.b_o is not None:
        state["out_proj.bias"] = params.b_o.copy()
    return state


def _as_array(value, key: str) -> np.ndarray:
    """A numpy array from a numpy array or a torch tensor (without importing torch)."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise ValueError(f"state[{key!r}] has dtype {array.dtype}; expected floating-point numbers")
    return array


def params_from_torch_state(state) -> MHAParams:
    """{"in_proj_weight": (3D, D), "out_proj.weight": (D, D), biases...} -> MHAParams (W (D, D)).

    The inverse of ``torch_state_dict``; takes ``module.state_dict()`` of an
    ``nn.MultiheadAttention`` whose query, key and value widths are all D (``kdim = vdim = D``).

    >>> import mha_course as mc
    >>> p = mc.init_params(6, rng=np.random.default_rng(1))
    >>> back = params_from_torch_state(torch_state_dict(p))
    >>> all(np.array_equal(a, b) for a, b in zip(p, back))
    True
    """
    missing = [k for k in ("in_proj_weight", "out_proj.weight") if k not in state]
    if missing:
        raise ValueError(f"state has no {missing}; pass nn.MultiheadAttention(...).state_dict() "
                         "(one with kdim = vdim = embed_dim, which stacks Q, K, V in in_proj_weight)")
    W_in = _as_array(state["in_proj_weight"], "in_proj_weight")
    D = W_in.shape[-1]
    if W_in.shape != (3 * D, D):
        raise ValueError(f"in_proj_weight has shape {W_in.shape}; expected (3·D, D) = ({3 * D}, {D})")
    W_q, W_k, W_v = (w.T.copy() for w in np.split(W_in, 3))  # (D, D) each, as x @ W
    W_o = _as_array(state["out_proj.weight"], "out_proj.weight").T.copy()
    biases = (None,) * 4
    if state.get("in_proj_bias") is not None:
        b_in = _as_array(state["in_proj_bias"], "in_proj_bias")
        b_o = _as_array(state["out_proj.bias"], "out_proj.bias").copy()
        biases = (*np.split(b_in.copy(), 3), b_o)
    return MHAParams(W_q, W_k, W_v, W_o, *biases)


def mean_peak_weight(weights) -> float:
    """weights (..., T, S) -> the largest weight of each query row, averaged over all rows.

    1.0 means every query reads one key only; 1/S means every query spreads its weight evenly.
    ``nn.MultiheadAttention``'s default weights are the mean over heads, whose peaks are lower
    than the heads' own: averaging blurs.

    >>> mean_peak_weight(np.array([[1.0, 0.0], [0.5, 0.5]]))
    0.75
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim < 2 or w.shape[-1] == 0:
        raise ValueError(f"weights must have shape (..., T, S) with S >= 1, got {w.shape}")
    return float(w.max(axis=-1).mean())
