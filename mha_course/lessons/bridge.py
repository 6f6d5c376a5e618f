"""From numpy to PyTorch: our MHAParams under ``torch.nn.MultiheadAttention``'s names (numpy only).

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

from .. import _validate
from ..mha import MHAParams

__all__ = ["torch_state_dict", "params_from_torch_state", "mean_peak_weight", "STATE_KEYS",
           "FAST_PATH_CONDITIONS", "fast_path_rules"]

STATE_KEYS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")

# When nn.MultiheadAttention takes its inference fast path (torch._native_multi_head_attention):
# every condition must hold (torch 2.13, torch/nn/modules/activation.py, MultiheadAttention.forward).
# Each pair is (the condition, in the course's words; the reason torch's code records when it fails).
# The one statement of these rules: notebooks 02, 06, 12 and the glossary print or quote it, and a
# test reads torch's source for every reason. `need_weights` is not among them.
FAST_PATH_CONDITIONS = (
    ("evaluation mode: module.eval()", "training is enabled"),
    ("no autograd: under torch.no_grad(), or no input or weight requires grad",
     "grad is enabled and at least one of query or the"),
    ("self-attention: the same tensor passed as query, key and value",
     "non-self attention was used"),
    ("batched input, (B, T, D), with batch_first=True", "batch_first was not True"),
    ("an even number of heads", "self.num_heads is not even"),
    ("biases present (bias=True, the default), no add_bias_kv, no add_zero_attn",
     "add_zero_attn was enabled"),
    ("kdim = vdim = embed_dim", "_qkv_same_embed_dim was not True"),
    ("no floating-point mask", "floating-point masks are not supported for fast path."),
    ("no autocast", "autocast is enabled"),
)


def fast_path_rules() -> str:
    """-> the fast-path conditions of ``nn.MultiheadAttention`` as one numbered text block.

    >>> print(fast_path_rules().splitlines()[0])
    nn.MultiheadAttention's fast path (torch 2.13) runs only when all of these hold:
    """
    lines = ["nn.MultiheadAttention's fast path (torch 2.13) runs only when all of these hold:"]
    lines += [f"  {i}. {condition}" for i, (condition, _) in enumerate(FAST_PATH_CONDITIONS, 1)]
    lines.append("  (need_weights=True does not prevent it)")
    return "\n".join(lines)


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
    params = _checked(params)
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


def _checked(params: MHAParams) -> MHAParams:
    """params with every array checked: W (D, D) and biases (D,) of finite floats (what crosses to torch)."""
    shape = np.shape(params.W_q)
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] == 0:
        raise ValueError(f"params.W_q has shape {shape}; expected a square (d_model, d_model) matrix: make params "
                         "with mc.init_params(d_model, rng=rng)")
    dtype = np.result_type(np.asarray(params.W_q).dtype, np.float32)  # float32 stays, anything else is float64
    return _validate.projection_params(params, shape[0], shape[0], dtype, f"d_model={shape[0]}",
                                       "mc.init_params(d_model, rng=rng)")


def _as_array(value, key: str, shape: tuple) -> np.ndarray:
    """A numpy array of ``shape`` from a numpy array or a torch tensor (without importing torch)."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.kind != "f":
        raise ValueError(f"state[{key!r}] has dtype {array.dtype}; expected floating-point numbers")
    if not np.isfinite(array).all():
        raise ValueError(f"state[{key!r}] holds NaN or inf; a model with them gives NaN everywhere: "
                         "pass the state of a model with finite weights")
    if array.shape != shape:
        raise ValueError(f"state[{key!r}] has shape {array.shape}; expected {shape}, as in_proj_weight's "
                         "(3·D, D) says: pass the state_dict() of one nn.MultiheadAttention(D, num_heads), unchanged")
    return array


_NOT_CONVERTED = {
    "bias_k": "nn.MultiheadAttention(..., add_bias_kv=True) appends a learned key and value row to every "
              "sequence; MHAParams has no such rows: build the module without add_bias_kv",
    "bias_v": "nn.MultiheadAttention(..., add_bias_kv=True) appends a learned key and value row to every "
              "sequence; MHAParams has no such rows: build the module without add_bias_kv",
    "q_proj_weight": "a module with kdim or vdim other than embed_dim keeps separate q/k/v_proj_weight "
                     "matrices; MHAParams needs kdim = vdim = embed_dim (one in_proj_weight)",
    "k_proj_weight": "a module with kdim or vdim other than embed_dim keeps separate q/k/v_proj_weight "
                     "matrices; MHAParams needs kdim = vdim = embed_dim (one in_proj_weight)",
    "v_proj_weight": "a module with kdim or vdim other than embed_dim keeps separate q/k/v_proj_weight "
                     "matrices; MHAParams needs kdim = vdim = embed_dim (one in_proj_weight)",
}


def _module_state(module) -> dict:
    """An nn.MultiheadAttention's state dict, refusing the options MHAParams cannot express."""
    if getattr(module, "add_zero_attn", False):
        raise ValueError("this nn.MultiheadAttention has add_zero_attn=True (a zero key and value appended to "
                         "every sequence), which MHAParams cannot express: build it with add_zero_attn=False")
    if getattr(module, "_qkv_same_embed_dim", True) is False:
        raise ValueError(f"this nn.MultiheadAttention has kdim={module.kdim}, vdim={module.vdim} but "
                         f"embed_dim={module.embed_dim}; MHAParams needs kdim = vdim = embed_dim")
    return module.state_dict()


def params_from_torch_state(state) -> MHAParams:
    """{"in_proj_weight": (3D, D), "out_proj.weight": (D, D), biases...} -> MHAParams (W (D, D)).

    The inverse of ``torch_state_dict``; takes an ``nn.MultiheadAttention`` or its
    ``state_dict()``, with kdim = vdim = D. Every key is converted or refused: a module with
    ``add_bias_kv``, ``add_zero_attn`` or other kdim/vdim, a missing or extra key, a shape that
    is not (3D, D), (3D,), (D, D), (D,), or only one of the two biases, is a ``ValueError``
    naming the key and the fix (never a silently different model).

    >>> import mha_course as mc
    >>> p = mc.init_params(6, rng=np.random.default_rng(1))
    >>> back = params_from_torch_state(torch_state_dict(p))
    >>> all(np.array_equal(a, b) for a, b in zip(p, back))
    True
    """
    if hasattr(state, "state_dict") and callable(state.state_dict):
        state = _module_state(state)
    if not hasattr(state, "keys") or not hasattr(state, "__getitem__"):
        raise ValueError(f"state must be a dict (nn.MultiheadAttention(...).state_dict()), got {type(state).__name__}")
    for key in state:
        if key in _NOT_CONVERTED:
            raise ValueError(f"state has {key!r}, which MHAParams cannot hold: {_NOT_CONVERTED[key]}")
        if key not in STATE_KEYS:
            raise ValueError(f"state has the key {key!r}, which is not one of nn.MultiheadAttention's "
                             f"{', '.join(STATE_KEYS)}: pass module.state_dict() without other entries")
    missing = [k for k in ("in_proj_weight", "out_proj.weight") if k not in state]
    if missing:
        raise ValueError(f"state has no {missing}; pass nn.MultiheadAttention(...).state_dict() "
                         "(one with kdim = vdim = embed_dim, which stacks Q, K, V in in_proj_weight)")
    has_bias = [k for k in ("in_proj_bias", "out_proj.bias") if state.get(k) is not None]
    if len(has_bias) == 1:
        other = "out_proj.bias" if has_bias == ["in_proj_bias"] else "in_proj_bias"
        raise ValueError(f"state has {has_bias[0]!r} but no {other!r}: nn.MultiheadAttention(bias=True) has "
                         "both and bias=False neither; pass both biases, or neither")
    W_in = state["in_proj_weight"]
    shape = tuple(getattr(W_in, "shape", np.shape(W_in)))
    if len(shape) != 2 or shape[0] != 3 * shape[1] or shape[1] == 0:
        raise ValueError(f"state['in_proj_weight'] has shape {shape}; expected (3·D, D), the Q, K and V "
                         "projections of embed_dim D stacked along the rows")
    D = shape[1]
    W_in = _as_array(W_in, "in_proj_weight", (3 * D, D))
    W_q, W_k, W_v = (w.T.copy() for w in np.split(W_in, 3))  # (D, D) each, as x @ W
    W_o = _as_array(state["out_proj.weight"], "out_proj.weight", (D, D)).T.copy()
    biases = (None,) * 4
    if has_bias:
        b_in = _as_array(state["in_proj_bias"], "in_proj_bias", (3 * D,))
        b_o = _as_array(state["out_proj.bias"], "out_proj.bias", (D,)).copy()
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
    w = _validate.finite_array(weights, "weights")
    if w.ndim < 2 or 0 in w.shape:
        raise ValueError(f"weights must have shape (..., T, S) with T, S >= 1 (and no empty axis), got {w.shape}")
    if w.min() < 0 or w.max() > 1:
        raise ValueError(f"weights hold {float(w.min()):.3g}..{float(w.max()):.3g}, but attention weights lie in "
                         "[0, 1]; pass softmax weights (..., T, S), not scores")
    return float(w.max(axis=-1).mean())
