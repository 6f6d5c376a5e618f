"""mha_course: multi-head attention from first principles, in numpy.

``import mha_course as mc`` loads the numpy core: the top-level modules below. The course's
machinery lives in one folder per layer, each adding one dependency: ``lessons/`` (the
notebooks' numpy experiments), ``views/`` (matplotlib), ``widgets/`` (ipywidgets),
``explorer/`` (the four-mode explorer), ``check/`` (the exercise checkers) and ``tools/``
(the ``mha-course`` command line). One topic keeps one stem across them.

Mask convention everywhere: boolean, **True = may attend**.

| notebook | the core | lessons, views, widgets, checkers |
|---|---|---|
| 00_overview | mha (trace, Trace) | lessons.qkv, views.attention, views.diagram, explorer |
| 01_qkv | mha | lessons.qkv, views.attention, check.qkv |
| 02_scaled_dot_product | attention | lessons.scaling, views.attention, check.attention |
| 03_multi_head_split | heads, mha | lessons.why_heads, views.attention, widgets.controls, check.heads |
| 04_concat_output | mha, block | views.attention, check.mha, check.block |
| 05_complexity | mha | lessons.complexity, views.attention, check.complexity |
| 06_masks_and_cross_attention | masks, attention | views.positions, check.masks |
| 07_positions_and_rope | positions | views.positions, check.positions |
| 08_heads_that_learn | backward | lessons.model, lessons.training, lessons.checkpoints, views.model, check.backward |
| 09_kv_cache_and_gqa | gqa | lessons.gqa, lessons.model, views.gqa, widgets.gqa, check.gqa |
| 10_efficient_attention | efficient, fast | lessons.model, views.efficient, check.efficient |
| 11_misconceptions_and_interview | mha | lessons.misconceptions, lessons.quiz, widgets.quiz, check.misconceptions |
| 12_from_numpy_to_pytorch | mha, masks | lessons.bridge, views.bridge, check.bridge |
| 14_circuits | mha | lessons.circuits (on lessons.model), views.circuits, widgets.circuits, check.circuits |
"""
from .attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from .backward import mha_backward
from .efficient import (
    SoftmaxState,
    bigbird_mask,
    dilated_window_mask,
    elu_feature_map,
    linear_attention,
    linear_attention_quadratic,
    longformer_mask,
    naive_attention_bytes,
    online_softmax_result,
    online_softmax_start,
    online_softmax_update,
    sliding_window_attention,
    sliding_window_mask,
    split_kv_attention,
    tiled_attention,
    tiled_attention_bytes,
    tiled_attention_steps,
)
from .fast import fast_attention
from .gqa import (
    CacheCost,
    GQAParams,
    KVCache,
    LatentCache,
    MLAParams,
    RollingKVCache,
    cached_causal_mask,
    dequantize_kv,
    gqa_from_mha,
    grouped_query_attention,
    init_gqa_params,
    init_mla_params,
    kv_cache_bytes_per_token,
    kv_cache_table,
    mla_attention,
    mla_cache_bytes_per_token,
    mla_to_mha,
    quantize_kv,
    valid_kv_heads,
)
from .heads import combine_heads, nearest_valid_h, split_heads, valid_heads
from .masks import LeakReport, document_mask, fully_masked_rows, leak_probe, mask_as, prefix_lm_mask
from .mha import STAGES, MHAParams, Stage, Trace, count_params, init_params, multi_head_attention, trace
from .positions import alibi_bias, alibi_slopes, apply_rope, rope_attention_factor, rope_inv_freq, sinusoidal_positions

__version__ = "0.1.0"

__all__ = [
    "softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask", "fast_attention",
    "split_heads", "combine_heads", "valid_heads", "nearest_valid_h",
    "MHAParams", "init_params", "count_params", "multi_head_attention", "trace",
    "Trace", "Stage", "STAGES",
    "sinusoidal_positions", "apply_rope",
    "mask_as", "prefix_lm_mask", "document_mask", "fully_masked_rows", "leak_probe", "LeakReport",
    "mha_backward",
    "GQAParams", "init_gqa_params", "gqa_from_mha", "valid_kv_heads", "KVCache", "cached_causal_mask",
    "grouped_query_attention", "MLAParams", "init_mla_params", "mla_to_mha", "LatentCache",
    "mla_attention", "kv_cache_bytes_per_token", "mla_cache_bytes_per_token", "CacheCost", "kv_cache_table",
    "SoftmaxState", "online_softmax_start", "online_softmax_update", "online_softmax_result",
    "tiled_attention", "tiled_attention_steps", "naive_attention_bytes", "tiled_attention_bytes",
    "sliding_window_mask", "sliding_window_attention", "longformer_mask", "dilated_window_mask",
    "bigbird_mask", "elu_feature_map", "linear_attention", "linear_attention_quadratic",
    "alibi_slopes", "alibi_bias", "rope_inv_freq", "rope_attention_factor", "RollingKVCache",
    "quantize_kv", "dequantize_kv", "split_kv_attention",
    # notebook 14's head scores, loaded on first use (lessons.circuits imports the trained model)
    "previous_token_score", "duplicate_token_score", "prefix_matching_score", "copying_score",
    "composition_score",
]

# Names served lazily from a lesson module: ``import mha_course`` still loads the numpy core only.
_LAZY = {name: "lessons.circuits" for name in ("previous_token_score", "duplicate_token_score",
                                               "prefix_matching_score", "copying_score", "composition_score")}


def __getattr__(name: str):
    """``mc.previous_token_score`` etc.: imported from ``mha_course.lessons.circuits`` on first use."""
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
