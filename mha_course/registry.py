"""Which helpers each notebook uses: one table, read by the tests that keep the map in step.

``NOTEBOOKS[stem]`` is a ``Lesson``: the core modules it teaches, the modules of the folders above
(``lessons.x``, ``views.x``, ``widgets.x``, ``explorer``), the ``mha_course.check`` exercises it
marks, and its section of the quiz (``lessons/quiz.py``'s questions name their notebook). The
table of ``mha_course/__init__.py``, the README's course map and ``check/__init__.py`` are tested
against it (tests/core/test_registry.py). A new notebook adds its stem files and one row here.

Data only: it imports nothing, so every layer may read it.

>>> NOTEBOOKS["09_kv_cache_and_gqa"].checkers[0]
'kv_append'
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["Lesson", "NOTEBOOKS", "table"]


class Lesson(NamedTuple):
    """One notebook's helpers: core modules, the modules above them, its checkers, its quiz section."""
    core: tuple
    modules: tuple
    checkers: tuple
    quiz: str


def _lesson(core, modules, checkers, quiz) -> Lesson:
    return Lesson(tuple(core.split()), tuple(modules.split()), tuple(checkers.split()), quiz)


NOTEBOOKS = {
    "00_overview": _lesson("mha", "lessons.qkv views.attention views.diagram widgets.controls explorer",
                           "stage_shapes cross_attention_shapes param_count", "00_overview"),
    "01_qkv": _lesson("mha", "lessons.qkv views.attention widgets.controls",
                      "project_qkv qkv_param_count no_projection_weights", "01_qkv"),
    "02_scaled_dot_product": _lesson("attention", "lessons.scaling lessons.bridge views.attention widgets.controls",
                                     "softmax scaled_dot_product_attention causal_mask padding_mask",
                                     "02_scaled_dot_product"),
    "03_multi_head_split": _lesson("heads mha", "lessons.qkv lessons.why_heads views.attention widgets.controls",
                                   "split_heads combine_heads head_queries bug_source_position",
                                   "03_multi_head_split"),
    "04_concat_output": _lesson("mha block", "lessons.complexity lessons.why_heads views.attention views.cost widgets.controls",
                                "multi_head_attention causal_multi_head_attention layer_norm gather_output_projection",
                                "04_concat_output"),
    "05_complexity": _lesson("mha", "lessons.complexity views.attention views.cost widgets.controls",
                             "flops score_bytes crossover_seq_len max_seq_len", "05_complexity"),
    "06_masks_and_cross_attention": _lesson("masks attention", "views.attention views.positions widgets.controls",
                                            "mask_as causal_self_attention cross_attention document_mask",
                                            "06_masks_and_cross_attention"),
    "07_positions_and_rope": _lesson("positions", "lessons.qkv views.attention views.positions widgets.controls",
                                     "sinusoidal_positions apply_rope rope_scores", "07_positions_and_rope"),
    "08_heads_that_learn": _lesson("backward", "lessons.model lessons.training lessons.checkpoints lessons.seeds "
                                   "views.model widgets.controls",
                                   "softmax_backward scale_backward matmul_backward split_heads_backward "
                                   "shared_input_backward adam_step", "08_heads_that_learn"),
    "09_kv_cache_and_gqa": _lesson("gqa kvcache", "lessons.gqa lessons.model lessons.training lessons.checkpoints "
                                   "lessons.complexity "
                                   "views.gqa widgets.gqa",
                                   "kv_append kv_bytes_per_token kv_head_index offset_causal_mask",
                                   "09_kv_cache_and_gqa"),
    "10_efficient_attention": _lesson("efficient subquadratic fast", "lessons.model lessons.checkpoints lessons.complexity "
                                      "views.efficient views.positions",
                                      "online_softmax_update tiled_attention sliding_window_mask linear_attention",
                                      "10_efficient_attention"),
    "11_misconceptions_and_interview": _lesson("mha", "lessons.misconceptions lessons.quiz lessons.model "
                                               "lessons.training lessons.checkpoints lessons.complexity "
                                               "lessons.scaling views.attention views.model widgets.controls "
                                               "widgets.quiz",
                                               "head_params score_std work_growth", "11_misconceptions_and_interview"),
    "12_from_numpy_to_pytorch": _lesson("mha masks", "lessons.bridge lessons.qkv views.attention views.bridge "
                                        "widgets.controls",
                                        "torch_state_dict torch_attn_mask torch_attention", "12_from_numpy_to_pytorch"),
    "13_long_context": _lesson("positions gqa kvcache efficient", "lessons.long_context lessons.long_seeds lessons.model "
                               "lessons.checkpoints views.long_context widgets.long_context",
                               "alibi_slopes interpolated_inv_freq lse_merge", "13_long_context"),
    "14_circuits": _lesson("mha", "lessons.circuits lessons.misconceptions lessons.model lessons.training "
                           "lessons.checkpoints views.circuits views.model widgets.circuits",
                           "prefix_matching_score copying_score composition_score patched_heads", "14_circuits"),
}


def table() -> str:
    """The markdown table of ``mha_course/__init__.py``: notebook | the core | lessons, views, widgets, checkers.

    >>> table().splitlines()[0]
    '| notebook | the core | lessons, views, widgets, checkers |'
    """
    rows = ["| notebook | the core | lessons, views, widgets, checkers |", "|---|---|---|"]
    for stem, lesson in NOTEBOOKS.items():
        checks = ", ".join(f"check.{name}" for name in lesson.checkers)
        rows.append(f"| {stem} | {', '.join(lesson.core)} | {', '.join(lesson.modules)}; {checks} |")
    return "\n".join(rows)
