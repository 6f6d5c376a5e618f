"""mha_course: multi-head attention from first principles, in numpy.

``import mha_course`` loads the numpy core only (floors 0-2); plots, widgets, checkers and
the explorer live in their own modules (``mha_course.plots``, ``mha_course.widgets``, ...).

Mask convention everywhere: boolean, **True = may attend**.
"""
from .attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from .backward import mha_backward
from .efficient import (
    SoftmaxState,
    bigbird_mask,
    dilated_window_mask,
    elu_feature_map,
    fast_attention,
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
]
