"""Checkers for the learner's own implementations: ``check.<exercise>(my_function)``.

Each checker runs the learner's function on seeded cases that vary every size, prints short
feedback and returns True or False; when the result is wrong it names the mistake and its fix
by running known wrong variants on the same cases (the learner's source is never read). An
unfinished stub is reported as "not finished yet" and never raises; ``check.summary()`` lists
the state of every checker called in this kernel. The engine and how to write a checker:
``mha_course/check/engine.py``; one module per concept holds the checkers and their catalogues.

    >>> from mha_course import check
    >>> import mha_course as mc
    >>> check.causal_mask(mc.causal_mask)
    ✔ causal_mask: all 4 cases match
    True
"""
from . import engine
from .attention import causal_mask, padding_mask, scaled_dot_product_attention, softmax
from .backward import (
                       adam_step,
                       matmul_backward,
                       scale_backward,
                       shared_input_backward,
                       softmax_backward,
                       split_heads_backward,
)
from .block import layer_norm
from .bridge import torch_attention, torch_attn_mask, torch_state_dict
from .circuits import composition_score, copying_score, patched_heads, prefix_matching_score
from .complexity import crossover_seq_len, flops, max_seq_len, score_bytes
from .efficient import linear_attention, online_softmax_update, sliding_window_mask, tiled_attention
from .engine import Case, Exercise, Mistake, catalogue, matches, summary
from .gqa import kv_append, kv_bytes_per_token, kv_head_index, offset_causal_mask
from .heads import bug_source_position, combine_heads, head_queries, split_heads
from .long_context import alibi_slopes, interpolated_inv_freq, lse_merge
from .masks import causal_self_attention, cross_attention, document_mask, mask_as
from .mha import causal_multi_head_attention, multi_head_attention, param_count
from .misconceptions import head_params, score_std, work_growth
from .positions import apply_rope, rope_scores, sinusoidal_positions
from .qkv import no_projection_weights, project_qkv, qkv_param_count
from .shape_exercise import ShapeExercise, ShapeMistake
from .shapes import cross_attention_shapes, stage_shapes
from .why_heads import gather_output_projection

__all__ = ["Case", "Exercise", "Mistake", "ShapeExercise", "ShapeMistake", "catalogue", "matches", "summary",
           "softmax", "scaled_dot_product_attention", "causal_mask", "padding_mask",
           "split_heads", "combine_heads", "head_queries", "bug_source_position",
           "multi_head_attention", "causal_multi_head_attention", "param_count",
           "project_qkv", "qkv_param_count", "no_projection_weights", "layer_norm",
           "flops", "crossover_seq_len", "score_bytes", "max_seq_len",
           "stage_shapes", "cross_attention_shapes", "gather_output_projection",
           "kv_append", "offset_causal_mask", "kv_bytes_per_token", "kv_head_index", "cross_attention",
           "softmax_backward", "scale_backward", "split_heads_backward", "matmul_backward",
           "shared_input_backward", "adam_step",
           "torch_state_dict", "torch_attn_mask", "torch_attention",
           "online_softmax_update", "tiled_attention", "sliding_window_mask", "linear_attention",
           "mask_as", "causal_self_attention", "sinusoidal_positions", "apply_rope",
           "document_mask", "rope_scores", "head_params", "score_std", "work_growth",
           "prefix_matching_score", "composition_score", "patched_heads", "copying_score",
           "alibi_slopes", "interpolated_inv_freq", "lse_merge"]

engine.seal()  # the catalogue so far is the course's: an author's Exercise cannot replace one of them
