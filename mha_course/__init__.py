"""mha_course: multi-head attention from first principles, in numpy.

``import mha_course as mc`` loads the numpy core: the top-level modules below. The course's
machinery lives in one folder per layer, each adding one dependency: ``lessons/`` (the
notebooks' numpy experiments), ``views/`` (matplotlib), ``widgets/`` (ipywidgets),
``explorer/`` (the four-mode explorer), ``check/`` (the exercise checkers) and ``tools/``
(the ``mha-course`` command line). One topic keeps one stem across them.

Mask convention everywhere: boolean, **True = may attend**.

| notebook | the core | lessons, views, widgets, checkers |
|---|---|---|
| 00_overview | mha | lessons.qkv, views.attention, views.diagram, widgets.controls, explorer; check.stage_shapes, check.cross_attention_shapes, check.param_count |
| 01_qkv | mha | lessons.qkv, views.attention, widgets.controls; check.project_qkv, check.qkv_param_count, check.no_projection_weights |
| 02_scaled_dot_product | attention | lessons.scaling, lessons.bridge, views.attention, widgets.controls; check.softmax, check.scaled_dot_product_attention, check.causal_mask, check.padding_mask |
| 03_multi_head_split | heads, mha | lessons.qkv, lessons.why_heads, views.attention, widgets.controls; check.split_heads, check.combine_heads, check.head_queries, check.bug_source_position |
| 04_concat_output | mha, block | lessons.complexity, lessons.why_heads, views.attention, views.cost, widgets.controls; check.multi_head_attention, check.causal_multi_head_attention, check.layer_norm, check.gather_output_projection |
| 05_complexity | mha | lessons.complexity, views.attention, views.cost, widgets.controls; check.flops, check.score_bytes, check.crossover_seq_len, check.max_seq_len |
| 06_masks_and_cross_attention | masks, attention | views.attention, views.positions, widgets.controls; check.mask_as, check.causal_self_attention, check.cross_attention, check.document_mask |
| 07_positions_and_rope | positions | lessons.qkv, views.attention, views.positions, widgets.controls; check.sinusoidal_positions, check.apply_rope, check.rope_scores |
| 08_heads_that_learn | backward | lessons.model, lessons.training, lessons.checkpoints, lessons.seeds, views.model, widgets.controls; check.softmax_backward, check.scale_backward, check.matmul_backward, check.split_heads_backward, check.shared_input_backward, check.adam_step |
| 09_kv_cache_and_gqa | gqa, kvcache | lessons.gqa, lessons.model, lessons.training, lessons.checkpoints, lessons.complexity, views.gqa, widgets.gqa; check.kv_append, check.kv_bytes_per_token, check.kv_head_index, check.offset_causal_mask |
| 10_efficient_attention | efficient, subquadratic, fast | lessons.model, lessons.checkpoints, lessons.complexity, views.efficient, views.positions; check.online_softmax_update, check.tiled_attention, check.sliding_window_mask, check.linear_attention |
| 11_misconceptions_and_interview | mha | lessons.misconceptions, lessons.quiz, lessons.model, lessons.training, lessons.checkpoints, lessons.complexity, lessons.scaling, views.attention, views.model, widgets.controls, widgets.quiz; check.head_params, check.score_std, check.work_growth |
| 12_from_numpy_to_pytorch | mha, masks | lessons.bridge, lessons.qkv, views.attention, views.bridge, widgets.controls; check.torch_state_dict, check.torch_attn_mask, check.torch_attention |
| 13_long_context | positions, gqa, kvcache, efficient | lessons.long_context, lessons.long_seeds, lessons.model, lessons.checkpoints, views.long_context, widgets.long_context; check.alibi_slopes, check.interpolated_inv_freq, check.lse_merge |
| 14_circuits | mha | lessons.circuits, lessons.misconceptions, lessons.model, lessons.training, lessons.checkpoints, views.circuits, views.model, widgets.circuits; check.prefix_matching_score, check.copying_score, check.composition_score, check.patched_heads |

The table is ``mha_course.registry.table()`` (tests/core/test_registry.py holds the two equal).
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
_LAZY = ("previous_token_score", "duplicate_token_score", "prefix_matching_score", "copying_score",
         "composition_score")


def __getattr__(name: str):
    """``mc.previous_token_score`` etc.: taken from ``mha_course.lessons.circuits`` on first use (an ordinary
    import statement, here in the function: the import-linter contracts see the arrow)."""
    if name in _LAZY:
        from .lessons import circuits  # the one lazy import of the package: lessons.circuits loads the model
        value = getattr(circuits, name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))
