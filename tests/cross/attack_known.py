"""The contract breaks the attack generator still finds, one line each: the open work of each callable's owner.

``test_attack_surface`` marks each callable here as an expected failure, *strict*: a callable that
stops breaking fails the run until its line is removed, and a callable that is not listed fails
as soon as it breaks. So this file can only shrink. Each line is the first break the default
profile found (regenerate: ``pytest tests/cross/test_attack_surface.py --junitxml=...``; the
reproducer of one is ``pytest "tests/cross/test_attack_surface.py::test_attack[<name>]"``).
"""

BREAKS: dict[str, str] = {
    'mha_course.backward.mha_backward':
        'mha_course.backward.mha_backward(mask=<non-contiguous view>) returned a different result for the same numbers in another container',
    'mha_course.efficient.check_n_splits':
        "mha_course.efficient.check_n_splits(S=<None>) raised without naming 'S': TypeError: '>' not supported between instances of 'int' and 'NoneType'",
    'mha_course.efficient.longformer_mask':
        "mha_course.efficient.longformer_mask(global_tokens=<string>) raised without naming 'global_tokens': ValueError: token positions must be whole numbers, got ['spa",
    'mha_course.efficient.online_softmax_result':
        "mha_course.efficient.online_softmax_result(state=<None>) raised AttributeError: 'NoneType' object has no attribute 'acc'; want ValueError/TypeError naming 'stat",
    'mha_course.efficient.online_softmax_start':
        "mha_course.efficient.online_softmax_start(batch=<int>) raised without naming 'batch': TypeError: Value after * must be an iterable, not int",
    'mha_course.efficient.sliding_window_mask':
        "mha_course.efficient.sliding_window_mask(window=<None>) was accepted silently (returned ndarray); want a ValueError naming 'window'",
    'mha_course.gqa.RollingKVCache':
        "ValueError: could not convert string to float: np.str_('absolute')",
    'mha_course.gqa.gqa_from_mha':
        "mha_course.gqa.gqa_from_mha(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'W_q'; want ValueError/TypeError naming 'params'",
    'mha_course.gqa.grouped_query_attention':
        'mha_course.gqa.grouped_query_attention(context=<read-only broadcast view>) returned a different result for the same numbers in another container',
    'mha_course.gqa.kv_cache_table':
        "mha_course.gqa.kv_cache_table(seq_lens=<string>) raised without naming 'seq_lens': ValueError: seq_len='s' must be a positive integer (got str); pass a whole nu",
    'mha_course.gqa.kv_heads':
        "mha_course.gqa.kv_heads(h=<None>) raised an internal message: TypeError: unsupported operand type(s) for %: 'NoneType' and 'int'",
    'mha_course.gqa.mla_to_mha':
        "mha_course.gqa.mla_to_mha(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'W_q'; want ValueError/TypeError naming 'params'",
    'mha_course.lessons.checkpoints.checkpoint_arrays':
        "mha_course.lessons.checkpoints.checkpoint_arrays(history=<int>) raised an internal message: TypeError: 'int' object is not iterable",
    'mha_course.lessons.checkpoints.checkpoint_bytes':
        "mha_course.lessons.checkpoints.checkpoint_bytes(history=<int>) raised an internal message: TypeError: 'int' object is not iterable",
    'mha_course.lessons.checkpoints.load_checkpoint':
        "mha_course.lessons.checkpoints.load_checkpoint(path=<None>) raised without naming 'path': TypeError: expected str, bytes or os.PathLike object, not NoneType",
    'mha_course.lessons.checkpoints.npz_bytes':
        "mha_course.lessons.checkpoints.npz_bytes(arrays=<None>) raised without naming 'arrays': TypeError: numpy.savez_compressed() argument after ** must be a mapping,",
    'mha_course.lessons.checkpoints.read_npz':
        "mha_course.lessons.checkpoints.read_npz(path=<None>) raised without naming 'path': TypeError: expected str, bytes or os.PathLike object, not NoneType",
    'mha_course.lessons.circuits.ablation_losses':
        "mha_course.lessons.circuits.ablation_losses(heads_sets=<int>) raised an internal message: TypeError: 'int' object is not iterable",
    'mha_course.lessons.circuits.direct_logit_attribution':
        "mha_course.lessons.circuits.direct_logit_attribution(batch=<None>) raised AttributeError: 'NoneType' object has no attribute 'tokens'; want ValueError/TypeError",
    'mha_course.lessons.circuits.duplicate_token_score':
        "mha_course.lessons.circuits.duplicate_token_score(tokens=<token -1>) was accepted silently (returned ndarray); want a ValueError naming 'tokens'",
    'mha_course.lessons.circuits.formation_step':
        "mha_course.lessons.circuits.formation_step(threshold=<NaN>) was accepted silently (returned NoneType); want a ValueError naming 'threshold'",
    'mha_course.lessons.circuits.head_scores':
        "mha_course.lessons.circuits.head_scores(tokens=<bool tokens>) was accepted silently (returned dict); want a ValueError naming 'tokens'",
    'mha_course.lessons.circuits.key_occlusion':
        "mha_course.lessons.circuits.key_occlusion(pair=<None>) raised AttributeError: 'NoneType' object has no attribute 'clean'; want ValueError/TypeError naming 'pair",
    'mha_course.lessons.circuits.logit_difference':
        'mha_course.lessons.circuits.logit_difference(logits=<None>) raised IndexError: too many indices for array: array is 0-dimensional, but 2 were indexed; want Valu',
    'mha_course.lessons.circuits.make_pair':
        "mha_course.lessons.circuits.make_pair(config=<None>) raised AttributeError: 'NoneType' object has no attribute 'seq_len'; want ValueError/TypeError naming 'conf",
    'mha_course.lessons.circuits.patching_effect':
        'mha_course.lessons.circuits.patching_effect(positions=<nested list>) returned a different result for the same numbers in another container',
    'mha_course.lessons.circuits.prefix_matching_score':
        "mha_course.lessons.circuits.prefix_matching_score(tokens=<token -1>) was accepted silently (returned ndarray); want a ValueError naming 'tokens'",
    'mha_course.lessons.complexity.format_bytes':
        "mha_course.lessons.complexity.format_bytes(n=<negative>) was accepted silently (returned str); want a ValueError naming 'n'",
    'mha_course.lessons.complexity.format_count':
        "mha_course.lessons.complexity.format_count(n=<negative>) was accepted silently (returned str); want a ValueError naming 'n'",
    'mha_course.lessons.gqa.forward_cached':
        "mha_course.lessons.gqa.forward_cached(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'embed'; want ValueError/TypeError naming 'params",
    'mha_course.lessons.gqa.generate':
        "mha_course.lessons.gqa.generate(config=<int>) raised AttributeError: 'int' object has no attribute 'vocab'; want ValueError/TypeError naming 'config'",
    'mha_course.lessons.gqa.greedy_steps':
        "mha_course.lessons.gqa.greedy_steps(config=<int>) was accepted silently (returned generator); want a ValueError naming 'config'",
    'mha_course.lessons.gqa.max_positions':
        "mha_course.lessons.gqa.max_positions(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'pos'; want ValueError/TypeError naming 'params'",
    'mha_course.lessons.gqa.new_caches':
        "mha_course.lessons.gqa.new_caches(config=<string>) raised AttributeError: 'str' object has no attribute 'h_kv'; want ValueError/TypeError naming 'config'",
    'mha_course.lessons.gqa.timing_model':
        "mha_course.lessons.gqa.timing_model(config=<None>) raised AttributeError: 'NoneType' object has no attribute '_replace'; want ValueError/TypeError naming 'confi",
    'mha_course.lessons.gqa.to_gqa':
        "mha_course.lessons.gqa.to_gqa(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'layers'; want ValueError/TypeError naming 'params'",
    'mha_course.lessons.long_context.PagedSequence':
        "mha_course.lessons.long_context.PagedSequence(seq=<None>) raised without naming 'seq': ValueError: the pool holds no sequence None (it holds: 0); it was release",
    'mha_course.lessons.long_context.at_length':
        "mha_course.lessons.long_context.at_length(config=<None>) raised AttributeError: 'NoneType' object has no attribute '_replace'; want ValueError/TypeError naming ",
    'mha_course.lessons.long_context.evaluate_at':
        "mha_course.lessons.long_context.evaluate_at(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'pos'; want ValueError/TypeError naming 'pa",
    'mha_course.lessons.long_context.extrapolation_table':
        "mha_course.lessons.long_context.extrapolation_table(models=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.lessons.long_context.format_table':
        "mha_course.lessons.long_context.format_table(lengths=<string>) raised an internal message: TypeError: unsupported operand type(s) for //: 'str' and 'int'",
    'mha_course.lessons.long_context.load_scheme':
        "mha_course.lessons.long_context.load_scheme(name=<None>) raised without naming 'name': ValueError: no shipped checkpoint for task='long_None'; shipped: ['induct",
    'mha_course.lessons.long_context.quantized_metrics':
        "mha_course.lessons.long_context.quantized_metrics(batch=<string>) raised AttributeError: 'str' object has no attribute 'tokens'; want ValueError/TypeError namin",
    'mha_course.lessons.long_context.rope_variants':
        "mha_course.lessons.long_context.rope_variants(config=<None>) raised AttributeError: 'NoneType' object has no attribute '_replace'; want ValueError/TypeError nam",
    'mha_course.lessons.long_context.serve':
        "mha_course.lessons.long_context.serve(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'layers'; want ValueError/TypeError naming 'param",
    'mha_course.lessons.long_context.shifted_batch':
        "mha_course.lessons.long_context.shifted_batch(config=<None>) raised AttributeError: 'NoneType' object has no attribute 'seq_len'; want ValueError/TypeError nami",
    'mha_course.lessons.long_context.sink_weight':
        "mha_course.lessons.long_context.sink_weight(batch=<None>) raised AttributeError: 'NoneType' object has no attribute 'tokens'; want ValueError/TypeError naming '",
    'mha_course.lessons.long_context.stream_batch':
        "mha_course.lessons.long_context.stream_batch(rng=<None>) raised AttributeError: 'NoneType' object has no attribute 'integers'; want ValueError/TypeError naming ",
    'mha_course.lessons.long_context.stream_position_losses':
        "ValueError: could not convert string to float: np.str_('absolute')",
    'mha_course.lessons.long_context.stretched_batch':
        "mha_course.lessons.long_context.stretched_batch(config=<None>) raised AttributeError: 'NoneType' object has no attribute '_replace'; want ValueError/TypeError n",
    'mha_course.lessons.long_context.weight_by_distance':
        "mha_course.lessons.long_context.weight_by_distance(batch=<int>) raised AttributeError: 'int' object has no attribute 'tokens'; want ValueError/TypeError naming ",
    'mha_course.lessons.misconceptions.ablated_metrics':
        "mha_course.lessons.misconceptions.ablated_metrics(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'layers'; want ValueError/TypeError n",
    'mha_course.lessons.misconceptions.ensemble_metrics':
        "mha_course.lessons.misconceptions.ensemble_metrics(members=<None>) raised an internal message: TypeError: 'NoneType' object is not subscriptable",
    'mha_course.lessons.misconceptions.head_attribution':
        "mha_course.lessons.misconceptions.head_attribution(n=<negative>) raised without naming 'n': ValueError: batch=-1 must be >= 1; pass a positive whole number",
    'mha_course.lessons.misconceptions.head_contributions':
        "mha_course.lessons.misconceptions.head_contributions(W_o=<None>) raised AttributeError: 'NoneType' object has no attribute 'reshape'; want ValueError/TypeError ",
    'mha_course.lessons.misconceptions.keep_only':
        "mha_course.lessons.misconceptions.keep_only(config=<None>) raised AttributeError: 'NoneType' object has no attribute 'h'; want ValueError/TypeError naming 'conf",
    'mha_course.lessons.misconceptions.key_attribution':
        "mha_course.lessons.misconceptions.key_attribution(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'embed'; want ValueError/TypeError na",
    'mha_course.lessons.misconceptions.rank_correlation':
        "mha_course.lessons.misconceptions.rank_correlation(a=<None>) was accepted silently (returned float64); want a ValueError naming 'a'",
    'mha_course.lessons.misconceptions.residual_stream':
        "mha_course.lessons.misconceptions.residual_stream(batch=<None>) raised AttributeError: 'NoneType' object has no attribute 'tokens'; want ValueError/TypeError na",
    'mha_course.lessons.misconceptions.rnn_scan':
        'mha_course.lessons.misconceptions.rnn_scan(x=<None>) raised an internal message: ValueError: not enough values to unpack (expected 3, got 0)',
    'mha_course.lessons.misconceptions.sequential_steps':
        "mha_course.lessons.misconceptions.sequential_steps(T=<None>) raised an internal message: TypeError: 'NoneType' object cannot be interpreted as an integer",
    'mha_course.lessons.model.ablate_head':
        "mha_course.lessons.model.ablate_head(layer=<bool>) was accepted silently (returned Model); want a ValueError naming 'layer'",
    'mha_course.lessons.model.cached_layer_params':
        "mha_course.lessons.model.cached_layer_params(layer=<None>) raised without naming 'layer': TypeError: tuple indices must be integers or slices, not NoneType",
    'mha_course.lessons.model.compact_grads':
        "mha_course.lessons.model.compact_grads(config=<None>) raised AttributeError: 'NoneType' object has no attribute 'h'; want ValueError/TypeError naming 'config'",
    'mha_course.lessons.model.embed':
        "mha_course.lessons.model.embed(config=<None>) raised AttributeError: 'NoneType' object has no attribute 'positions'; want ValueError/TypeError naming 'config'",
    'mha_course.lessons.model.forward':
        "mha_course.lessons.model.forward(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'embed'; want ValueError/TypeError naming 'params'",
    'mha_course.lessons.model.induction_score':
        "mha_course.lessons.model.induction_score(batch=<int>) raised AttributeError: 'int' object has no attribute 'tokens'; want ValueError/TypeError naming 'batch'",
    'mha_course.lessons.model.init_model':
        "mha_course.lessons.model.init_model(rng=<int>) raised AttributeError: 'int' object has no attribute 'normal'; want ValueError/TypeError naming 'rng'",
    'mha_course.lessons.model.layer_params':
        "mha_course.lessons.model.layer_params(layer=<None>) raised without naming 'layer': TypeError: tuple indices must be integers or slices, not NoneType",
    'mha_course.lessons.model.make_batch':
        'mha_course.lessons.model.make_batch(batch=<numpy int>) returned a different result for the same numbers in another container',
    'mha_course.lessons.model.norm':
        "mha_course.lessons.model.norm(config=<int>) raised AttributeError: 'int' object has no attribute 'layer_norm'; want ValueError/TypeError naming 'config'",
    'mha_course.lessons.model.scored_metrics':
        "mha_course.lessons.model.scored_metrics(batch=<int>) raised AttributeError: 'int' object has no attribute 'targets'; want ValueError/TypeError naming 'batch'",
    'mha_course.lessons.qkv.blend_params':
        "mha_course.lessons.qkv.blend_params(params=<None>) raised AttributeError: 'NoneType' object has no attribute 'd_model'; want ValueError/TypeError naming 'params",
    'mha_course.lessons.qkv.diagonal_curve':
        "mha_course.lessons.qkv.diagonal_curve(X=<None>) raised without naming 'X': ValueError: x must be a numeric array, got NoneType with dtype object; pass a numpy a",
    'mha_course.lessons.qkv.embed':
        "mha_course.lessons.qkv.embed(table=<string>) raised IndexError: tuple index out of range; want ValueError/TypeError naming 'table'",
    'mha_course.lessons.qkv.sentence_trace':
        "mha_course.lessons.qkv.sentence_trace(tokens=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.lessons.qkv.vocabulary':
        "mha_course.lessons.qkv.vocabulary(tokens=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.lessons.quiz.choice_index':
        "mha_course.lessons.quiz.choice_index(choice=<one past the end>) was accepted silently (returned int); want a ValueError naming 'choice'",
    'mha_course.lessons.quiz.choice_value':
        "mha_course.lessons.quiz.choice_value(choice=<None>) raised without naming 'choice': TypeError: argument of type 'NoneType' is not iterable",
    'mha_course.lessons.quiz.format_value':
        "mha_course.lessons.quiz.format_value(value=<None>) was accepted silently (returned str); want a ValueError naming 'value'",
    'mha_course.lessons.quiz.grade':
        "mha_course.lessons.quiz.grade(choice=<one past the end>) was accepted silently (returned Feedback); want a ValueError naming 'choice'",
    'mha_course.lessons.quiz.render_text':
        "mha_course.lessons.quiz.render_text(questions=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.lessons.quiz.score':
        "mha_course.lessons.quiz.score(answers=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.lessons.quiz.verify':
        "mha_course.lessons.quiz.verify(question=<None>) raised AttributeError: 'NoneType' object has no attribute 'verify'; want ValueError/TypeError naming 'question'",
    'mha_course.lessons.scaling.jacobian_norm':
        'mha_course.lessons.scaling.jacobian_norm(p=<None>) raised IndexError: too many indices for array: array is 0-dimensional, but 1 were indexed; want ValueError/Ty',
    'mha_course.lessons.scaling.softmax_jacobian':
        'mha_course.lessons.scaling.softmax_jacobian(p=<None>) raised IndexError: too many indices for array: array is 0-dimensional, but 1 were indexed; want ValueError',
    'mha_course.lessons.seeds.separated':
        "mha_course.lessons.seeds.separated(a=<far out>) was accepted silently (returned bool); want a ValueError naming 'a'",
    'mha_course.lessons.training.adam_init':
        "mha_course.lessons.training.adam_init(params=<None>) was accepted silently (returned AdamState); want a ValueError naming 'params'",
    'mha_course.lessons.training.adam_step':
        "mha_course.lessons.training.adam_step(b1=<NaN>) was accepted silently (returned tuple); want a ValueError naming 'b1'",
    'mha_course.lessons.training.backward':
        "mha_course.lessons.training.backward(batch=<int>) raised AttributeError: 'int' object has no attribute 'tokens'; want ValueError/TypeError naming 'batch'",
    'mha_course.lessons.training.cross_entropy':
        "mha_course.lessons.training.cross_entropy(batch=<int>) raised AttributeError: 'int' object has no attribute 'targets'; want ValueError/TypeError naming 'batch'",
    'mha_course.lessons.training.evaluate':
        "mha_course.lessons.training.evaluate(n=<negative>) raised without naming 'n': ValueError: batch=-1 must be >= 1; pass a positive whole number",
    'mha_course.lessons.training.loss_and_grads':
        "mha_course.lessons.training.loss_and_grads(batch=<int>) raised AttributeError: 'int' object has no attribute 'tokens'; want ValueError/TypeError naming 'batch'",
    'mha_course.lessons.training.metrics':
        "mha_course.lessons.training.metrics(batch=<int>) raised AttributeError: 'int' object has no attribute 'tokens'; want ValueError/TypeError naming 'batch'",
    'mha_course.lessons.why_heads.blend_error':
        "mha_course.lessons.why_heads.blend_error(x=<None>) raised AttributeError: 'NoneType' object has no attribute 'shape'; want ValueError/TypeError naming 'x'",
    'mha_course.lessons.why_heads.fit_output_projection':
        "mha_course.lessons.why_heads.fit_output_projection(concat=<None>) raised AttributeError: 'NoneType' object has no attribute 'reshape'; want ValueError/TypeError",
    'mha_course.lessons.why_heads.gather_inputs':
        "mha_course.lessons.why_heads.gather_inputs(n=<None>) raised an internal message: TypeError: 'NoneType' object cannot be interpreted as an integer",
    'mha_course.lessons.why_heads.gather_output_projection':
        "mha_course.lessons.why_heads.gather_output_projection(content=<float>) raised without naming 'content': ValueError: T=8.5 must be a positive integer (got float)",
    'mha_course.lessons.why_heads.gather_target':
        "mha_course.lessons.why_heads.gather_target(a=<bool>) raised without naming 'a': ValueError: could not broadcast input array from shape (3,1,4,16) into shape (3,",
    'mha_course.lessons.why_heads.head_errors':
        "mha_course.lessons.why_heads.head_errors(a=<None>) raised without naming 'a': TypeError: '<=' not supported between instances of 'int' and 'NoneType'",
    'mha_course.lessons.why_heads.one_head_params':
        "mha_course.lessons.why_heads.one_head_params(a=<None>) raised without naming 'a': TypeError: '<=' not supported between instances of 'int' and 'NoneType'",
    'mha_course.lessons.why_heads.relative_error':
        "mha_course.lessons.why_heads.relative_error(out=<None>) raised an internal message: TypeError: unsupported operand type(s) for -: 'NoneType' and 'float'",
    'mha_course.lessons.why_heads.two_head_params':
        "mha_course.lessons.why_heads.two_head_params(b=<None>) raised without naming 'b': TypeError: '<=' not supported between instances of 'int' and 'NoneType'",
    'mha_course.masks.causal_mask':
        'mha_course.masks.causal_mask(window=<numpy int>) returned a different result for the same numbers in another container',
    'mha_course.masks.document_mask':
        "mha_course.masks.document_mask(causal=<int 2>) was accepted silently (returned ndarray); want a ValueError naming 'causal'",
    'mha_course.masks.fully_masked_rows':
        "mha_course.masks.fully_masked_rows(mask=<wrong shape>) was accepted silently (returned ndarray); want a ValueError naming 'mask'",
    'mha_course.masks.leak_probe':
        "mha_course.masks.leak_probe(rng=<None>) raised AttributeError: 'NoneType' object has no attribute 'normal'; want ValueError/TypeError naming 'rng'",
    'mha_course.mha.Trace':
        "mha_course.mha.Trace(h=<bool>) was accepted silently (returned Trace); want a ValueError naming 'h'",
    'mha_course.mha.count_params':
        "mha_course.mha.count_params(params=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.positions.check_rope':
        "mha_course.positions.check_rope(rope_base=<None>) was accepted silently (returned NoneType); want a ValueError naming 'rope_base'",
    'mha_course.positions.rope_attention_factor':
        "mha_course.positions.rope_attention_factor(scaling=<None>) was accepted silently (returned float); want a ValueError naming 'scaling'",
    'mha_course.views.attention.flop_curves':
        "mha_course.views.attention.flop_curves(seq_lens=<None>) raised without naming 'seq_lens': ValueError: x and y must have same first dimension, but have shapes (1",
    'mha_course.views.attention.head_heatmaps':
        "mha_course.views.attention.head_heatmaps(tokens=<string>) was accepted silently (returned ndarray); want a ValueError naming 'tokens'",
    'mha_course.views.attention.head_split_sources':
        "mha_course.views.attention.head_split_sources(T=<None>) raised an internal message: TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'",
    'mha_course.views.attention.matrix_heatmap':
        "mha_course.views.attention.matrix_heatmap(values=<None>) raised without naming 'values': ValueError: matrix_heatmap needs a 2-D array, got shape ()",
    'mha_course.views.attention.param_blocks':
        "mha_course.views.attention.param_blocks(d_model=<None>) raised an internal message: TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'",
    'mha_course.views.attention.params_figure':
        "mha_course.views.attention.params_figure(d_model=<None>) raised an internal message: TypeError: unsupported operand type(s) for -: 'NoneType' and 'int'",
    'mha_course.views.attention.qkv_comparison_figure':
        "mha_course.views.attention.qkv_comparison_figure(seq_len=<float>) raised without naming 'seq_len': TypeError: slice indices must be integers or None or have an ",
    'mha_course.views.attention.qkv_matrices_figure':
        "mha_course.views.attention.qkv_matrices_figure(tokens=<string>) was accepted silently (returned Figure); want a ValueError naming 'tokens'",
    'mha_course.views.attention.scaling_curves':
        "mha_course.views.attention.scaling_curves(d_k=<float>) was accepted silently (returned ndarray); want a ValueError naming 'd_k'",
    'mha_course.views.attention.scaling_figure':
        "mha_course.views.attention.scaling_figure(result=<None>) raised AttributeError: 'NoneType' object has no attribute 'row'; want ValueError/TypeError naming 'resu",
    'mha_course.views.attention.score_memory_bars':
        "mha_course.views.attention.score_memory_bars(hs=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.views.attention.sentence_heads_figure':
        "mha_course.views.attention.sentence_heads_figure(seq_len=<None>) raised an internal message: TypeError: 'NoneType' object cannot be interpreted as an integer",
    'mha_course.views.attention.split_bug_figure':
        "mha_course.views.attention.split_bug_figure(T=<None>) raised an internal message: TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'",
    'mha_course.views.attention.split_sources_heatmaps':
        'mha_course.views.attention.split_sources_heatmaps(features=<empty axis>) raised IndexError: index 0 is out of bounds for axis 2 with size 0; want ValueError/Typ',
    'mha_course.views.attention.stage_flow':
        "mha_course.views.attention.stage_flow(trace=<None>) raised AttributeError: 'NoneType' object has no attribute 'shapes'; want ValueError/TypeError naming 'trace'",
    'mha_course.views.attention.timing_loglog':
        "mha_course.views.attention.timing_loglog(seq_lens=<None>) raised without naming 'seq_lens': ValueError: x and y must have same first dimension, but have shapes ",
    'mha_course.views.attention.token_color':
        "mha_course.views.attention.token_color(t=<None>) raised an internal message: TypeError: unsupported operand type(s) for %: 'NoneType' and 'int'",
    'mha_course.views.attention.tokens_for':
        "mha_course.views.attention.tokens_for(n=<None>) raised an internal message: TypeError: 'NoneType' object cannot be interpreted as an integer",
    'mha_course.views.attention.weights_bars':
        "mha_course.views.attention.weights_bars(raw=<None>) raised without naming 'raw': ValueError: weights_bars needs two (S,) rows of equal length, got () and (4,)",
    'mha_course.views.bridge.averaged_weights_figure':
        "mha_course.views.bridge.averaged_weights_figure(seq_len=<None>) raised an internal message: TypeError: 'NoneType' object cannot be interpreted as an integer",
    'mha_course.views.diagram.box_params':
        "mha_course.views.diagram.box_params(d_model=<None>) raised an internal message: TypeError: unsupported operand type(s) for *: 'NoneType' and 'NoneType'",
    'mha_course.views.diagram.diagram_labels':
        "mha_course.views.diagram.diagram_labels(trace=<None>) raised AttributeError: 'NoneType' object has no attribute 'shapes'; want ValueError/TypeError naming 'trac",
    'mha_course.views.diagram.lit':
        "mha_course.views.diagram.lit(stage=<None>) was accepted silently (returned tuple); want a ValueError naming 'stage'",
    'mha_course.views.diagram.shape_text':
        "mha_course.views.diagram.shape_text(shape=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.views.model.LiveLossPlot':
        "mha_course.views.model.LiveLossPlot(every=<bool>) was accepted silently (returned LiveLossPlot); want a ValueError naming 'every'",
    'mha_course.views.model.ablation_figure':
        "mha_course.views.model.ablation_figure(loss_increase=<None>) raised without naming 'loss_increase': ValueError: x and y must be the same size",
    'mha_course.views.model.before_after_figure':
        "mha_course.views.model.before_after_figure(before=<None>) raised an internal message: TypeError: object of type 'NoneType' has no len()",
    'mha_course.views.model.h_sweep_figure':
        "mha_course.views.model.h_sweep_figure(h=<float>) raised without naming 'h': ValueError: 2.5 is not in list",
    'mha_course.views.model.loss_curves':
        "mha_course.views.model.loss_curves(curves=<None>) raised AttributeError: 'NoneType' object has no attribute 'items'; want ValueError/TypeError naming 'curves'",
    'mha_course.views.model.model_heatmaps':
        "mha_course.views.model.model_heatmaps(tokens=<token out of range>) was accepted silently (returned ndarray); want a ValueError naming 'tokens'",
    'mha_course.views.model.smooth':
        "mha_course.views.model.smooth(values=<None>) raised without naming 'values': TypeError: len() of unsized object",
    'mha_course.views.model.snapshot_figure':
        "mha_course.views.model.snapshot_figure(history=<None>) raised AttributeError: 'NoneType' object has no attribute 'snapshot_steps'; want ValueError/TypeError nam",
    'mha_course.views.stages.flow_inputs':
        "mha_course.views.stages.flow_inputs(name=<None>) raised KeyError: None; want ValueError/TypeError naming 'name'",
    'mha_course.views.stages.present_stages':
        "mha_course.views.stages.present_stages(names=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.views.style.head_color':
        "mha_course.views.style.head_color(i=<None>) raised an internal message: TypeError: unsupported operand type(s) for %: 'NoneType' and 'int'",
    'mha_course.views.style.head_grid':
        "mha_course.views.style.head_grid(h=<None>) raised without naming 'h': TypeError: '<' not supported between instances of 'int' and 'NoneType'",
    'mha_course.views.style.label_axes':
        "mha_course.views.style.label_axes(ax=<None>) raised AttributeError: 'NoneType' object has no attribute 'set_yticks'; want ValueError/TypeError naming 'ax'",
    'mha_course.widgets.controls.LiveView':
        "mha_course.widgets.controls.LiveView(controls=<None>) raised AttributeError: 'NoneType' object has no attribute 'box'; want ValueError/TypeError naming 'control",
    'mha_course.widgets.controls.OptionControls':
        "mha_course.widgets.controls.OptionControls(options=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.widgets.controls.option_live_view':
        "mha_course.widgets.controls.option_live_view(options=<None>) raised an internal message: TypeError: 'NoneType' object is not iterable",
    'mha_course.widgets.quiz.QuizWidget':
        "mha_course.widgets.quiz.QuizWidget(questions=<int>) raised an internal message: TypeError: 'int' object is not iterable",
}

# Callables whose valid call the table cannot yet build (no Spec for a parameter, or a call that raises).
UNBUILT: dict[str, str] = {
    'mha_course.lessons.checkpoints.write_npz':
        "no Spec for ['arrays']",
    'mha_course.lessons.circuits.compare_over_seeds':
        'its valid call raised ValueError: a has shape () and b (); give one finite value per seed for each (the same seeds, at least 2)',
    'mha_course.lessons.circuits.formed':
        "no Spec for ['results']",
    'mha_course.lessons.circuits.repeat_induction_score':
        "no Spec for ['half']",
    'mha_course.lessons.circuits.repeated_tokens':
        "no Spec for ['vocab', 'half']",
    'mha_course.lessons.long_seeds.at_length_scaling':
        "no Spec for ['name']",
    'mha_course.lessons.long_seeds.format_summary':
        "no Spec for ['names']",
    'mha_course.lessons.misconceptions.ensemble_verdict':
        "no Spec for ['joint', 'members']",
    'mha_course.lessons.quiz.interview_markdown':
        "no Spec for ['notebooks_dir']",
    'mha_course.lessons.quiz.section_anchor':
        "no Spec for ['notebook', 'section']",
    'mha_course.lessons.seeds.format_values':
        "no Spec for ['names', 'header']",
    'mha_course.lessons.why_heads.head_writes':
        'its valid call raised ValueError: x has d_model=16 but params have d_model=8; pass matching sizes',
    'mha_course.positions.dynamic_rope_scaling':
        "its valid call raised ValueError: scaling={'kind': 'linear', 'factor': 2.0} must be None or a dict with type in ('linear', 'ntk', 'yar",
    'mha_course.positions.rotate':
        "no Spec for ['angles']",
}
