"""The contract breaks the attack generator still finds, one line each: the open work of each callable's owner.

``test_attack_surface`` marks each callable here as an expected failure, *strict*: a callable that
stops breaking fails the run until its line is removed, and a callable that is not listed fails
as soon as it breaks. So this file can only shrink. Each line is the first break the default
profile found (regenerate: ``pytest tests/cross/test_attack_surface.py --junitxml=...``; the
reproducer of one is ``pytest "tests/cross/test_attack_surface.py::test_attack[<name>]"``).
"""

BREAKS: dict[str, str] = {
    'mha_course.views.circuits.ablation_figure':
        "mha_course.views.circuits.ablation_figure(losses=<None>) raised an internal message: TypeError: object of type 'NoneType' has no len()",
    'mha_course.views.circuits.circuit_heatmap':
        "mha_course.views.circuits.circuit_heatmap(matrix=<None>) raised without naming 'matrix': TypeError: Invalid shape () for image data",
    'mha_course.views.circuits.composition_figure':
        "mha_course.views.circuits.composition_figure(baseline=<NaN>) was accepted silently (returned ndarray); want a ValueError naming 'baseline'",
    'mha_course.views.circuits.head_bars':
        "mha_course.views.circuits.head_bars(values=<None>) raised an internal message: TypeError: head_labels() missing 2 required positional arguments: 'n_layers' and ",
    'mha_course.views.circuits.head_labels':
        "mha_course.views.circuits.head_labels(h=<None>) raised an internal message: TypeError: 'NoneType' object cannot be interpreted as an integer",
    'mha_course.views.circuits.phase_change_figure':
        "mha_course.views.circuits.phase_change_figure(step=<far out>) was accepted silently (returned ndarray); want a ValueError naming 'step'",
    'mha_course.views.circuits.position_patching_figure':
        'mha_course.views.circuits.position_patching_figure(effects=<None>) raised an internal message: ValueError: not enough values to unpack (expected 3, got 0)',
    'mha_course.views.circuits.ranking_table':
        "mha_course.views.circuits.ranking_table(measures=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.views.circuits.rollout_figure':
        'mha_course.views.circuits.rollout_figure(rollout_row=<None>) raised IndexError: too many indices for array: array is 0-dimensional, but 1 were indexed; want Val',
    'mha_course.views.circuits.step_figure':
        "mha_course.views.circuits.step_figure(step=<one past the end>) was accepted silently (returned Figure); want a ValueError naming 'step'",
    'mha_course.views.circuits.token_text':
        "mha_course.views.circuits.token_text(tokens=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.views.efficient.io_bytes_curves':
        "mha_course.views.efficient.io_bytes_curves(seq_lens=<None>) raised without naming 'seq_lens': TypeError: int() argument must be a string, a bytes-like object or",
    'mha_course.views.efficient.measured_curves':
        "mha_course.views.efficient.measured_curves(xs=<None>) raised without naming 'xs': ValueError: x, y, and format string must not be None",
    'mha_course.views.efficient.score_tiles':
        "mha_course.views.efficient.score_tiles(block_size=<negative>) was accepted silently (returned Axes); want a ValueError naming 'block_size'",
    'mha_course.views.gqa.decode_times_figure':
        "mha_course.views.gqa.decode_times_figure(positions=<None>) raised without naming 'positions': ValueError: x and y must have same first dimension, but have shape",
    'mha_course.views.long_context.accuracy_vs_length':
        "mha_course.views.long_context.accuracy_vs_length(table=<None>) raised AttributeError: 'NoneType' object has no attribute 'items'; want ValueError/TypeError nami",
    'mha_course.views.long_context.extrapolation_figure':
        "mha_course.views.long_context.extrapolation_figure(table=<None>) raised AttributeError: 'NoneType' object has no attribute 'items'; want ValueError/TypeError na",
    'mha_course.views.long_context.length_view':
        "mha_course.views.long_context.length_view(eval_len=<string>) raised without naming 'eval_len': TypeError: SeedSequence expects int or sequence of ints for entro",
    'mha_course.views.long_context.position_loss_curves':
        "mha_course.views.long_context.position_loss_curves(table=<None>) raised AttributeError: 'NoneType' object has no attribute 'items'; want ValueError/TypeError na",
    'mha_course.views.long_context.rope_turns_figure':
        "mha_course.views.long_context.rope_turns_figure(d_k=<None>) raised an internal message: TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'",
    'mha_course.views.long_context.scaling_view':
        "mha_course.views.long_context.scaling_view(config=<None>) raised AttributeError: 'NoneType' object has no attribute 'seq_len'; want ValueError/TypeError naming ",
    'mha_course.views.long_context.sink_weight_bars':
        "mha_course.views.long_context.sink_weight_bars(uniform=<NaN>) was accepted silently (returned Axes); want a ValueError naming 'uniform'",
    'mha_course.views.long_context.stream_loss_curves':
        "mha_course.views.long_context.stream_loss_curves(curves=<None>) raised AttributeError: 'NoneType' object has no attribute 'values'; want ValueError/TypeError na",
    'mha_course.views.long_context.window_mask':
        "mha_course.views.long_context.window_mask(mask=<None>) raised IndexError: tuple index out of range; want ValueError/TypeError naming 'mask'",
    'mha_course.views.positions.leak_heatmap':
        "mha_course.views.positions.leak_heatmap(report=<None>) raised AttributeError: 'NoneType' object has no attribute 'moved'; want ValueError/TypeError naming 'repo",
    'mha_course.views.positions.mask_gallery':
        "mha_course.views.positions.mask_gallery(masks=<None>) raised an internal message: TypeError: object of type 'NoneType' has no len()",
    'mha_course.views.positions.mask_heatmap':
        "mha_course.views.positions.mask_heatmap(mask=<wrong shape>) was accepted silently (returned Axes); want a ValueError naming 'mask'",
    'mha_course.views.positions.patch_attention':
        'mha_course.views.positions.patch_attention(image=<None>) raised an internal message: ValueError: not enough values to unpack (expected 2, got 0)',
    'mha_course.views.positions.patch_grid':
        'mha_course.views.positions.patch_grid(image=<None>) raised an internal message: ValueError: not enough values to unpack (expected 2, got 0)',
    'mha_course.views.positions.rope_heads_figure':
        "mha_course.views.positions.rope_heads_figure(seq_len=<negative>) was accepted silently (returned Figure); want a ValueError naming 'seq_len'",
    'mha_course.views.positions.rope_layout_pairs':
        "mha_course.views.positions.rope_layout_pairs(d_k=<None>) raised an internal message: TypeError: unsupported operand type(s) for //: 'NoneType' and 'int'",
    'mha_course.views.positions.score_offset_heatmap':
        "mha_course.views.positions.score_offset_heatmap(grid=<None>) raised AttributeError: 'NoneType' object has no attribute 'shape'; want ValueError/TypeError naming",
    'mha_course.views.positions.sinusoid_figure':
        "mha_course.views.positions.sinusoid_figure(seq_len=<None>) raised without naming 'seq_len': ValueError: T=None must be a positive integer (got NoneType); pass a",
    'mha_course.widgets.circuits.PatternControls':
        "mha_course.widgets.circuits.PatternControls(n_layers=<None>) raised an internal message: TypeError: 'NoneType' object cannot be interpreted as an integer",
    'mha_course.widgets.circuits.pattern_live_view':
        "mha_course.widgets.circuits.pattern_live_view(head=<string>) raised without naming 'head': TypeError: not all arguments converted during string formatting",
    'mha_course.widgets.circuits.step_live_view':
        "mha_course.widgets.circuits.step_live_view(trajectories=<None>) raised an internal message: TypeError: 'NoneType' object is not subscriptable",
    'mha_course.widgets.gqa.KVControls':
        "mha_course.widgets.gqa.KVControls(h=<zero>) raised TraitError: Invalid selection: value not found; want ValueError/TypeError naming 'h'",
    'mha_course.widgets.gqa.grouping_live_view':
        "mha_course.widgets.gqa.grouping_live_view(h=<zero>) raised TraitError: Invalid selection: value not found; want ValueError/TypeError naming 'h'",
    'mha_course.widgets.long_context.length_live_view':
        "mha_course.widgets.long_context.length_live_view(models=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.widgets.long_context.scaling_live_view':
        "mha_course.widgets.long_context.scaling_live_view(config=<None>) raised AttributeError: 'NoneType' object has no attribute 'seq_len'; want ValueError/TypeError ",
}

# Callables whose valid call the table cannot yet build (no Spec for a parameter, or a call that raises).
UNBUILT: dict[str, str] = {
    'mha_course.views.circuits.pattern_figure':
        "its valid call raised ValueError: weights has shape (2, 2, 8, 8) and tokens (8,): give one layer's weights on one sequence (h, T, T) a",
    'mha_course.views.circuits.text_color':
        "no Spec for ['rgba']",
}
