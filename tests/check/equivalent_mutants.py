"""The equivalent mutants of every exercise's reference, each with the reason it is equivalent.

A mutant is listed here when the checker accepts it and it equals the reference on every case and
on the cases redrawn with other seeds (``tests/check/mutation_run.py``). A key is a mutation's id
(``function+offset category: before -> after``) or ``function+offset *``: every mutant of that
line (the line's code cannot change a result on this exercise's valid inputs, whatever the change).
A mutant that changes a result is never excused here: it is a survivor, and test_mutants fails.
"""
from __future__ import annotations

# reasons said once, used by several exercises
CHECKS = "argument checking and conversion: on this exercise's valid inputs it returns its inputs unchanged"
ALLOC = ("the size check (_validate.allocation) refuses only arrays past 4 GiB or this machine's memory: the "
         "exercise's arrays are small, so no variant of it changes a result")
ORDER = "the two statements are independent (neither reads what the other writes)"
UNUSED_BIAS = "the bias branch: this exercise's function has no bias argument (always None)"
TWO_D = "the exercise's arrays are 2-d (as its text states), so axis 0 is axis -2 and axis 1 is axis -1"
NO_KEY = ("the shift used only for rows that saw no key (m = -inf): exp(-inf - c) is 0 for any finite c, so any "
          "finite shift gives the same zeros")
SYMMETRIC = "a symmetric function: its arguments may come in any order"
SCALE_FREE = ("the score is scale-invariant (a ratio of norms or of eigenvalue sums): the rescaling (or the "
              "test for it) only guards extreme matrices against overflow and underflow, and any positive "
              "scale, or none, gives the same score")
SWAPAXES = "np.swapaxes(a, -1, -2) and np.swapaxes(a, -2, -1) are the same transpose"
ASARRAY = "the arguments are numpy arrays already (the exercise passes arrays), so np.asarray changes nothing"
FLOAT_OK = ("a whole float for an int: this exercise's signature does not say -> int, and 64.0 for 64 is a right "
            "answer there")
S_NONE = "the check of S: S is None in every case of this exercise (self-attention), so it never runs"
ROPE_OFF = "the RoPE branch: this exercise's function takes no rope_base (always None)"
STAGES = "the recording of intermediate stages (stages is None here): the returned values do not depend on it"
THREADS = ("how the work is spread over threads (run_jobs): the same jobs run, in the same order of results, "
           "whatever the number of workers")
CAUSAL_OFF = "the causal branch: this exercise's linear attention is non-causal (causal=False always)"
PLUS_INF = ("the +inf branch: a row with +inf logits; the exercise's inputs are finite logits (or -inf for "
            "masked keys), as its text states")
SCALING = ("another scaling type's branch (NTK, YaRN) or its parameters: this exercise is position "
           "interpolation ('linear') only")
FACTORY = ("the reference is the mistakes' factory at its neutral defaults (base_power=1, q_start=0, k_sign=1, "
           "scale='sqrt', softmax=False, transpose=False): this changes how a default is used, not the result")


def _lines(function: str, offsets, why: str) -> dict:
    """{``function+offset *``: why} for each offset."""
    return {f"{function}+{o} *": why for o in offsets}


EQUIVALENT = {
    "softmax": {
        **_lines("softmax", (17, 18, 19), PLUS_INF),
        **_lines("softmax", (20,), NO_KEY),
        "softmax+22 constant: np.where(total == 0, 1, total) -> np.where(total == 0, 2, total)":
            "the divisor of an all-zero row: 0 / 1 and 0 / 2 are both 0",
        **_lines("softmax", (0,), "the argument check returns x unchanged for valid logits, so taking the max "
                                  "before or after it gives the same"),
    },
    "scaled_dot_product_attention": {
        **_lines("scaled_dot_product_attention", (0, 17), UNUSED_BIAS),
        "scaled_dot_product_attention>attention_scores+8 swapped-arguments: np.swapaxes(K, -1, -2) -> "
        "np.swapaxes(K, -2, -1)": SWAPAXES,
        **_lines("scaled_dot_product_attention>attention_scores", (9,), UNUSED_BIAS),
    },
    "causal_mask": {
        **_lines("causal_mask", (21, 22), "offset is 0 in this exercise (the learner's causal_mask(T) has no cache): "
                                          "offset + x is x"),
        **_lines("causal_mask", (18,), ALLOC),
        **_lines("causal_mask", (24, 25), "the window branch: this exercise's mask has no window (None)"),
        **_lines("causal_mask", (0,), ORDER + " (the query and key positions)"),
    },
    "padding_mask": {
        "padding_mask+10 dropped-call: np.asarray(lengths) -> lengths":
            "lengths is an int array in every case, and the comparisons below treat a list the same way",
        **_lines("padding_mask", (23,), ALLOC),
        **_lines("padding_mask", (19,), "the check that every length is in 0..S (raises otherwise): valid "
                                        "lengths pass it whatever its form"),
        **_lines("padding_mask", (0,), ORDER),
    },
    "mask_as": {"mask_as>_keep_mask+2 dropped-call: np.asarray(mask) -> mask": ASARRAY},
    "document_mask": {
        "<lambda>>_document_mask+14 dropped-call: np.asarray(doc_ids) -> doc_ids": ASARRAY,
        "<lambda>>_document_mask+26 constant: ids.shape[-1] -> ids.shape[0]":
            "doc_ids is (T,) in this exercise, so axis 0 is axis -1",
        **_lines("<lambda>>_document_mask", (22,), ALLOC),
        **_lines("<lambda>>_document_mask", (0,), ORDER + " (the size check and the comparison)"),
    },
    "cross_attention": {"_cross_reference+2 dropped-call: np.asarray(keep, bool) -> keep":
                        "keep is a boolean array in every case (the exercise passes a bool mask)"},
    "matmul_backward": {
        **_lines("_matmul_ref>_matmul_backward", (13, 14, 21, 22), TWO_D + " (the batch shapes are empty)"),
        **_lines("_matmul_ref>_matmul_backward", (0,), ORDER),
    },
    "adam_step": {**_lines("_adam_reference>_adam_step", (0,), ORDER),
                  **_lines("_adam_reference>_adam_step", (12, 13, 17, 19, 20, 21), CHECKS)},
    "torch_state_dict": {**_lines("torch_state_dict", (0,), "the argument check returns params unchanged for "
                                                            "valid params, so it may run before or after the biases are read"),
                         **_lines("torch_state_dict>_checked", (6, 7), CHECKS)},
    "layer_norm": {
        **_lines("layer_norm", (23, 25), "the gamma and beta branches: this exercise's layer norm has no gamma "
                                         "and no beta (its text says so)"),
        **_lines("layer_norm>_affine", (4, 8), "gamma and beta are None here: their conversion never runs"),
        **_lines("layer_norm", (17, 18), "the size handed to the gamma/beta check, which returns None for None"),
        "layer_norm+20 swapped-arguments: x - mean -> mean - x": "squared: (mean - x)^2 = (x - mean)^2",
        **_lines("layer_norm", (0,), ORDER),
    },
    "prefix_matching_score": {
        "prefix_matching_score>_mean_over_repeats+7 negation: on_target.transpose(1, 0, 2)[:, has].mean(-1) -> "
        "on_target.transpose(1, 0, 2)[:, has].mean(1)": "the array is (h, N), 2-d: axis 1 is axis -1",
        "prefix_matching_score>_tokens+2 dropped-call: np.asarray(tokens) -> tokens": ASARRAY,
        "prefix_matching_score>_tokens+3 constant: tok.ndim == 1 -> tok.ndim == 0":
            "tokens are (B, T) here; a (T,) row would be broadcast to (B, T) by the next line anyway",
        "prefix_matching_score>_tokens+9 negation: np.broadcast_to(tok, (B, T)) -> -np.broadcast_to(tok, (B, T))":
            "tokens are only compared with each other for equality, and -a == -b exactly when a == b",
        "prefix_matching_score>_weights+2 dropped-call: np.asarray(weights, dtype=float) -> weights":
            "weights is a float array in every case",
        "prefix_matching_score>_weights+3 constant: w.ndim == 3 -> w.ndim == 2":
            "the exercise's weights are (B, h, T, T), 4-d: the (h, T, T) convenience form is not its input",
    },
    "composition_score": {
        **_lines("composition_score", (11, 14, 15), SCALE_FREE),
        "composition_score+16 dropped-call: float(np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b)))"
        " -> np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))":
            "a numpy float64 for a Python float: the same number (np.float64 is a float)",
        "composition_score>_matrix+2 dropped-call: np.asarray(W, dtype=float) -> W": "W is a float array in every case",
        "composition_score>_matrix+7 negation: return a -> return -a":
            "both matrices negated: ||(-A)(-B)|| / (||-A|| ||-B||) is the same score",
    },
    "copying_score": {
        **_lines("copying_score", (11, 14), SCALE_FREE),
        "copying_score+20 dropped-call: float(lam.sum().real / total) -> lam.sum().real / total":
            "a numpy float64 for a Python float: the same number (np.float64 is a float)",
        "copying_score>_matrix+2 dropped-call: np.asarray(W, dtype=float) -> W": "W is a float array in every case",
    },
    "score_bytes": {"_score_bytes_ref+1 swapped-arguments: score_memory_bytes(B, h, T, dtype=np.dtype(f'f{bytes_"
                    "per_number}')) -> score_memory_bytes(h, B, T, dtype=np.dtype(f'f{bytes_per_number}'))":
                    "B and h multiply: B * h * T^2 * bytes = h * B * T^2 * bytes",
                    **_lines("_score_bytes_ref>score_memory_bytes", (0,), ORDER + " (argument checks: they return their inputs "
                                                                       "unchanged)"),
                    **_lines("_score_bytes_ref>score_memory_bytes", (3,), S_NONE),
                    },
    "online_softmax_update": {
        "online_softmax_update+14 swapped-arguments: np.maximum(state.m, scores_block.max(axis=-1, keepdims=True))"
        " -> np.maximum(scores_block.max(axis=-1, keepdims=True), state.m)": SYMMETRIC,
        "online_softmax_update+14 negation: scores_block.max(axis=-1, keepdims=True) -> "
        "scores_block.max(axis=1, keepdims=True)": TWO_D,
        "online_softmax_update+18 negation: p.sum(axis=-1, keepdims=True) -> p.sum(axis=1, keepdims=True)": TWO_D,
        **_lines("online_softmax_update", (15,), NO_KEY),
        **_lines("online_softmax_update", (0,), ORDER + " (the check returns its inputs unchanged)"),
    },
    "linear_attention": {
        **_lines("linear_attention>_linear_one", (4, 6, 7, 8, 9, 10, 11), CAUSAL_OFF),
        **_lines("linear_attention>run_jobs", (16, 17, 22, 23, 27), THREADS),
        **_lines("linear_attention>run_jobs", (0,), ORDER + " (the flag's check and the worker count)"),
        **_lines("linear_attention", (27,), "the size above which the rows are split over threads (the same "
                                            "numbers either way)"),
        **_lines("linear_attention", (0,), ORDER),
        "linear_attention>_flag+3 negation: bool(value) -> -bool(value)":
            "causal is False here: -False is 0, as falsy as False",
        "linear_attention>_linear_one+13 axis: fk.sum(axis=0) -> fk.sum(axis=-2)": "fk is (S, d_k): axis 0 is -2",
        "linear_attention>_linear_one+3 statement-order: kv = fk.T @ v; z = fk.sum(axis=0)[:, None] -> "
        "z = fk.sum(axis=0)[:, None]; kv = fk.T @ v": ORDER,
    },
    "tiled_attention": {
        **_lines("_tiled_ref>_tiled_attention", (30,), "Q, K and V are (T, d_k), (S, d_k), (S, d_v) in this exercise: "
                                                       "their batch shape is () however it is sliced"),
        "_tiled_ref>_tiled_attention+31 swapped-arguments: np.multiply(Q, Q.dtype.type(1 / math.sqrt(d_k)), "
        "order='C') -> np.multiply(Q.dtype.type(1 / math.sqrt(d_k)), Q, order='C')": "multiplication commutes",
        **_lines("_tiled_ref>_tiled_attention", (32,), "whether to keep a running max (exp_needs_no_shift): with "
                                                       "or without the shift the same softmax comes out"),
        **_lines("_tiled_ref>_tiled_attention", (35,), "V is (S, d_v), 2-d here: axis 1 is axis -1"),
        **_lines("_tiled_ref>_tiled_attention", (36, 43), "the mask branch: this exercise's function takes no mask "
                                                          "(allowed and band are None)"),
        **_lines("_tiled_ref>_tiled_attention", (38,), "how many query rows one tile holds (a speed and memory "
                                                       "choice; at least 1): every row is computed the same way"),
        **_lines("_tiled_ref>_tiled_attention", (40, 42), CAUSAL_OFF.replace("linear", "tiled")),
        **_lines("_tiled_ref>_tiled_attention", (46,), "chunks of rows that overlap (t + 2 rows): the rows computed "
                                                       "twice get the same values, and every row is covered (the "
                                                       "gaps, t + rows -> rows, are refused at T = 2000)"),
        **_lines("_tiled_ref>_tiled_attention", (47,), THREADS),
        **_lines("_tiled_ref>_tiled_attention", (0,), ORDER + " (argument checks, shapes and buffers prepared "
                                                      "before they are used)"),
    },
    "kv_append": {**_lines("_append_ref", (2,), "the caches are (B, h_kv, S, d_k), 4-d: axis 2 is axis -2")},
    "kv_bytes_per_token": {**_lines("_bytes_ref", (1,), "the four sizes multiply: their order does not matter")},
    "split_heads": {**_lines("split_heads", (0,), ORDER + " (both are argument checks)")},
    "combine_heads": {**_lines("combine_heads", (0,), ORDER + " (both are argument checks)")},
    "head_queries": {"_head_queries_ref+2 constant: W_q.shape[1] -> W_q.shape[0]":
                     "W_q is (d_model, d_model), square, in this exercise"},
    "alibi_slopes": {
        **_lines("alibi_slopes", (14,), ALLOC),
        **_lines("alibi_slopes", (0,), ORDER + " (argument checks)"),
        **_lines("alibi_slopes", (18,), "math.floor returns an int already, and for h >= 1 log2(h) >= 0, where int() "
                                        "(which truncates toward 0) is floor"),
        "alibi_slopes+21 doubled-term: h - n -> h - (n + n)":
            "the n extra slopes are cut with [:h - n]; [:h - 2n] on those n counts from the end and keeps "
            "n + (h - 2n) = h - n of them too (h < 2n)",
    },
    "interpolated_inv_freq": {
        **_lines("_interpolated>_rope_inv_freq", range(46, 66), SCALING),
        **_lines("_interpolated>_rope_inv_freq", (40,), ALLOC),
        "_interpolated>_rope_inv_freq+42 floor-division: d_k // 2 -> d_k / 2":
            "d_k is even (the exercise's d_k): d_k / 2 is a whole float, and np.arange gives the same pairs",
        **_lines("_interpolated>_rope_inv_freq", (0,), ORDER + " (argument checks)"),
    },
    "lse_merge": {
        **_lines("merge_attention_partials", (13,), NO_KEY.replace("m = -inf", "every lse = -inf")),
        **_lines("merge_attention_partials", (17,), "total is 0 (no key) or >= 1 (its largest term is exp(0) = 1): "
                                                    "dividing by total or by 1 where total = 1 is the same"),
        **_lines("merge_attention_partials", (0,), ORDER + " (the check returns its inputs unchanged)"),
        **_lines("merge_attention_partials>_partials", (0,), ORDER + " (argument checks)"),
        "merge_attention_partials>_partials+11 dropped-call: np.asarray(v) -> v": ASARRAY + " (the boolean check "
                                                                                 "reads only v.dtype)",
    },
    "multi_head_attention": {
        **_lines("multi_head_attention>_forward", (7, 8, 16, 18), ROPE_OFF),
        **_lines("multi_head_attention", (20,), ROPE_OFF),
        **_lines("multi_head_attention", (21, 22), UNUSED_BIAS + "; rope_base and rope_scaling are None too"),
        **_lines("multi_head_attention", (0,), ORDER + " (the argument check returns its inputs unchanged)"),
        **_lines("multi_head_attention>_forward", (11, 15), STAGES),
        **_lines("multi_head_attention>_forward", (0,), ORDER + " (the Q, K and V projections)"),
        **_lines("multi_head_attention", (19,), UNUSED_BIAS + "; rope_base and rope_scaling are None too, so their "
                                                "order in the call changes nothing"),
        **_lines("multi_head_attention>_checked", (0, 2, 7), CHECKS),
        **_lines("multi_head_attention>_checked", (5,), ROPE_OFF + ": the check of RoPE's arguments has nothing to check"),
        **_lines("multi_head_attention>_checked", (6,), UNUSED_BIAS),
        **_lines("multi_head_attention>_forward", (9, 10, 17), ROPE_OFF + ": rope_heads returns the heads unchanged "
                                                              "when rope_base is None"),
    },
    "flops": {
        **_lines("_flops_ref>projection_flops", (0,), ORDER + " (argument checks: they return their inputs unchanged)"),
        **_lines("_flops_ref>attention_flops", (0,), ORDER + " (argument checks: they return their inputs unchanged)"),
        **_lines("_flops_ref>projection_flops", (7,), S_NONE),
        **_lines("_flops_ref>attention_flops", (7,), S_NONE),
    },
    "head_params": {"_head_params_ref+1 floor-division: d_model // h -> d_model / h": FLOAT_OK},
    "sinusoidal_positions": {**_lines("sinusoidal_positions", (0,), ORDER + " (argument checks)"),
                             **_lines("sinusoidal_positions", (16,), ALLOC)},
    "apply_rope": {
        "_rope_reference>_apply_rope+19 dropped-call: np.asarray(x) -> x": ASARRAY,
        **_lines("_rope_reference>_apply_rope", (0,), ORDER + " (argument checks and the dtype noted first)"),
    },
    "rope_scores": {
        **_lines("scores", (0, 3, 4, 5, 6, 7, 8, 11, 12, 13), FACTORY),
        "scores+9 swapped-arguments: np.swapaxes(k, -1, -2) -> np.swapaxes(k, -2, -1)": SWAPAXES,
        **_lines("scores", (10,), FACTORY + " (softmax=False: the softmax lines never run)"),
        "scores>_apply_rope+19 dropped-call: np.asarray(x) -> x": ASARRAY,
        "scores>_apply_rope+33 swapped-arguments: a * cos - b * sin -> b * sin - a * cos":
            "both Q and K are rotated the same way: each rotated pair changes sign in both, and the scores "
            "(q . k) are unchanged",
        "scores>_apply_rope+30 negation: out.astype(np.float16) if dtype == np.float16 else out -> "
        "-(out.astype(np.float16) if dtype == np.float16 else out)":
            "both Q and K are negated: q . k = (-q) . (-k)",
        **_lines("scores>_apply_rope", (0,), ORDER + " (argument checks and the dtype noted first)"),
    },
    "project_qkv": {
        "_qkv_of+2 constant: _trace(x, params, 1) -> _trace(x, params, 2)":
            "Q, K and V before the split do not depend on h (the cases' d_model is even)",
        "_qkv_of+3 dropped-call: np.array(t[n]) -> t[n]": "a read-only copy for a copy: the same values",
        **_lines("_qkv_of>_trace", (0, 12, 14, 15, 17), ORDER.split(" (")[0] + "; or rope and bias arguments that "
                                                        "are None here (" + ROPE_OFF + ")"),
        **_lines("_qkv_of>_trace", (16, 18, 19, 20, 21, 22, 23, 24), "how the trace stores its stages (read-only "
                                                                     "copies, their shapes, its h and mask): the values "
                                                                     "read back are the same"),
    },
    "gather_output_projection": {
        **_lines("gather_output_projection", (0, 11), "the size check (_sizes) raises for bad sizes and returns "
                                                      "nothing: its arguments' order and its place do not matter "
                                                      "for valid sizes"),
        **_lines("gather_output_projection>_sizes", range(0, 17), "the size check (_sizes) raises for bad sizes "
                                                                  "and returns nothing: " + CHECKS.split(": ")[1]),
        **_lines("gather_output_projection>_sizes", (17,), ALLOC),
    },
}


def reason(exercise: str, mutation) -> str | None:
    """Why ``mutation`` (a :class:`~mha_course.check.mutants.Mutation`) of ``exercise`` is equivalent, or None."""
    table = EQUIVALENT.get(exercise, {})
    if mutation.id in table:
        return table[mutation.id]
    return table.get(f"{mutation.function}+{mutation.offset} *")
