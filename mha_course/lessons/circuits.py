"""Reading what trained heads do, notebook 14's helpers in one namespace: ``from mha_course.lessons
import circuits as ci`` gives every name of the four modules that hold them, one job each:

- ``circuits_data``: the inputs (repeated random tokens, the clean/corrupted pairs of patching);
- ``circuits_scores``: what weights and attention patterns say (the head detector, the copying and
  composition scores, the QK and OV circuits, attention rollout);
- ``circuits_patching``: interventions on a forward pass (run_with_cache, direct logit attribution,
  activation, path and attribution patching, ablations, occlusion);
- ``circuits_runs``: training runs watched (the induction phase change, every experiment over seeds).

They run on the tiny attention-only models of notebook 08 (numpy only). Layers and heads count from 0
in code (the notebook calls layer 0 "layer 1").

    >>> import numpy as np
    >>> w = np.eye(4, k=-1)[None]; w[0, 0, 0] = 1.0          # (h=1, T=4, S=4): the previous token
    >>> previous_token_score(w)
    array([1.])

Taught in 14_circuits.ipynb.
"""
from __future__ import annotations

from .circuits_data import PatchPair, make_pair, repeated_tokens
from .circuits_patching import (
    ABLATIONS,
    LogitAttribution,
    ablate_heads,
    ablation_losses,
    attribution_patching,
    direct_logit_attribution,
    head_patching,
    key_occlusion,
    logit_difference,
    patch_heads,
    patching_effect,
    path_patching,
    position_patching,
    run_with_cache,
)
from .circuits_runs import (
    PHASE_CHANGE_CONFIGS,
    PHASE_CHANGE_EVERY,
    SEEDS,
    Trajectory,
    compare_over_seeds,
    formation_step,
    formed,
    load_seed_results,
    load_trajectories,
    save_trajectories,
    seed_results,
    seed_results_path,
    seed_summary,
    train_trajectory,
    trajectory_arrays,
    trajectory_path,
)
from .circuits_scores import (
    SCORE_NAMES,
    attention_rollout,
    composition_baseline,
    composition_baseline_scores,
    composition_score,
    composition_scores,
    copying_score,
    duplicate_token_score,
    head_scores,
    ov_circuit,
    ov_matrix,
    ov_spectrum,
    positional_qk_circuit,
    prefix_matching_score,
    previous_token_score,
    qk_circuit,
    qk_matrix,
    repeat_induction_score,
)

__all__ = [
    # circuits_data
    "repeated_tokens", "PatchPair", "make_pair",
    # circuits_scores
    "SCORE_NAMES", "previous_token_score", "duplicate_token_score", "prefix_matching_score",
    "head_scores", "repeat_induction_score", "copying_score", "composition_score", "qk_matrix",
    "ov_matrix", "qk_circuit", "positional_qk_circuit", "ov_circuit", "composition_scores",
    "composition_baseline_scores", "composition_baseline", "ov_spectrum", "attention_rollout",
    # circuits_patching
    "run_with_cache", "LogitAttribution", "direct_logit_attribution", "logit_difference", "patch_heads",
    "patching_effect", "head_patching", "position_patching", "path_patching", "attribution_patching",
    "ABLATIONS", "ablate_heads", "ablation_losses", "key_occlusion",
    # circuits_runs
    "Trajectory", "PHASE_CHANGE_CONFIGS", "PHASE_CHANGE_EVERY", "train_trajectory", "formation_step",
    "trajectory_path", "trajectory_arrays", "save_trajectories", "load_trajectories", "SEEDS",
    "seed_results", "seed_results_path", "load_seed_results", "formed", "seed_summary",
    "compare_over_seeds",
]
