"""lessons.circuits_patching: the hooks (caching, patching, ablation, attribution) against the plain
forward pass, on the shipped induction model, and their refusals.
"""
import numpy as np
import pytest

from mha_course.lessons import checkpoints
from mha_course.lessons import circuits_data as cdata
from mha_course.lessons import circuits_patching as cp
from mha_course.lessons import model as train

CONFIG, PARAMS, _ = checkpoints.load_checkpoint(checkpoints.checkpoint_path("induction"))
ALL_HEADS = [(layer, head) for layer in range(2) for head in range(2)]


def test_a_patch_that_returns_the_output_changes_nothing():
    tokens = train.make_batch(CONFIG, np.random.default_rng(1), 4).tokens
    plain, w_plain = train.forward(PARAMS, tokens, CONFIG)
    hooked, w_hooked = train.forward(PARAMS, tokens, CONFIG, patch=lambda layer, tr: tr.output)
    np.testing.assert_allclose(hooked, plain, atol=1e-12)
    np.testing.assert_allclose(w_hooked[1], w_plain[1], atol=1e-12)
    logits, cache = cp.run_with_cache(PARAMS, tokens, CONFIG)
    np.testing.assert_allclose(logits, plain, atol=1e-12)
    stream = train.embed(PARAMS, tokens, CONFIG) + sum(c.sum(1) for c in cache)  # (B, T, D)
    np.testing.assert_allclose(stream @ PARAMS.unembed, plain, atol=1e-10)


def test_direct_logit_attribution_adds_up_to_the_centred_target_logit():
    batch = train.make_batch(CONFIG, np.random.default_rng(2), 32)
    dla = cp.direct_logit_attribution(PARAMS, CONFIG, batch)
    logits, _ = train.forward(PARAMS, batch.tokens, CONFIG)
    centred = logits - logits.mean(-1, keepdims=True)
    target = np.take_along_axis(centred, batch.targets[..., None], -1)[..., 0][batch.scored].mean()
    assert dla.total == pytest.approx(target)
    assert dla.heads.shape == (2, 2) and dla.heads.argmax() == 3  # L2 H1 writes most of the answer


@pytest.mark.parametrize("corrupt", ["key", "value"])
def test_patching_everything_restores_fully_and_nothing_not_at_all(corrupt):
    pair = cdata.make_pair(CONFIG, np.random.default_rng(3), 32, corrupt)
    assert (pair.clean != pair.corrupt).sum(1).tolist() == [1] * 32
    assert cp.patching_effect(PARAMS, CONFIG, pair, ALL_HEADS) == pytest.approx(1.0, abs=1e-9)
    assert cp.patching_effect(PARAMS, CONFIG, pair, []) == pytest.approx(0.0, abs=1e-9)
    # patching at every position is patching the head; at no position is patching nothing
    assert cp.patching_effect(PARAMS, CONFIG, pair, [(1, 1)], positions=range(24)) == pytest.approx(
        cp.patching_effect(PARAMS, CONFIG, pair, [(1, 1)]))
    assert cp.patching_effect(PARAMS, CONFIG, pair, ALL_HEADS, positions=[]) == pytest.approx(0.0, abs=1e-9)


def test_patching_a_run_into_itself_changes_nothing():
    tokens = train.make_batch(CONFIG, np.random.default_rng(4), 4).tokens
    np.testing.assert_allclose(cp.patch_heads(PARAMS, CONFIG, tokens, tokens, ALL_HEADS),
                               train.forward(PARAMS, tokens, CONFIG)[0], atol=1e-12)


def test_patching_finds_the_circuit():
    pair = cdata.make_pair(CONFIG, np.random.default_rng(1), 64, "key")
    heads = cp.head_patching(PARAMS, CONFIG, pair)
    assert heads[0, 1] > 0.9 and heads[1, 1] > 0.7 and abs(heads[0, 0]) < 0.05
    positions = cp.position_patching(PARAMS, CONFIG, pair)
    assert positions[0, 1].argmax() == pair.changed + 1  # the previous-token head, just after the change
    assert positions[1, 1].argmax() == pair.position     # the induction head, at the query
    assert cp.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), "kv") > 0.7
    assert abs(cp.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), "q")) < 0.05
    both = cp.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 0), "qkv") + \
        cp.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), "qkv")
    assert both == pytest.approx(heads[0, 1], abs=0.05)  # through the two induction heads, nearly all of it


def test_path_patching_checks_its_arguments():
    pair = cdata.make_pair(CONFIG, np.random.default_rng(1), 4)
    with pytest.raises(ValueError):
        cp.path_patching(PARAMS, CONFIG, pair, (1, 0), (0, 1))
    with pytest.raises(ValueError):
        cp.path_patching(PARAMS, CONFIG, pair, (0, 1), (1, 1), via="k")


def test_zero_ablation_is_train_ablate_head():
    batch = train.make_batch(CONFIG, np.random.default_rng(6), 16)
    hook = cp.ablate_heads(PARAMS, CONFIG, batch.tokens, [(0, 1)], "zero")
    np.testing.assert_allclose(train.forward(PARAMS, batch.tokens, CONFIG, patch=hook)[0],
                               train.forward(PARAMS, batch.tokens, CONFIG, ablate=[(0, 1)])[0], atol=1e-10)


def test_resample_from_itself_is_no_ablation_and_mean_writes_the_mean():
    tokens = train.make_batch(CONFIG, np.random.default_rng(7), 8).tokens
    plain = train.forward(PARAMS, tokens, CONFIG)[0]
    hook = cp.ablate_heads(PARAMS, CONFIG, tokens, ALL_HEADS, "resample", reference=tokens)
    np.testing.assert_allclose(train.forward(PARAMS, tokens, CONFIG, patch=hook)[0], plain, atol=1e-10)
    one = tokens[:1]  # a reference of one sequence: its mean is itself
    hook = cp.ablate_heads(PARAMS, CONFIG, one, ALL_HEADS, "mean", reference=one)
    np.testing.assert_allclose(train.forward(PARAMS, one, CONFIG, patch=hook)[0], plain[:1], atol=1e-10)


def test_ablation_kinds_and_the_redundant_pair():
    batch = train.make_batch(CONFIG, np.random.default_rng(8), 128)
    reference = train.make_batch(CONFIG, np.random.default_rng(9), 128).tokens
    losses = cp.ablation_losses(PARAMS, CONFIG, batch, reference, [[(1, 0)], [(1, 1)], [(1, 0), (1, 1)]])
    assert set(losses) == set(cp.ABLATIONS)
    for kind, (alone0, alone1, both) in losses.items():
        assert both > alone0 + alone1, kind  # one at a time understates the pair
    with pytest.raises(ValueError):
        cp.ablate_heads(PARAMS, CONFIG, batch.tokens, [(0, 0)], "mean")
    with pytest.raises(ValueError):
        cp.ablate_heads(PARAMS, CONFIG, batch.tokens, [(0, 0)], "shuffle")


def test_occlusion_finds_the_copied_token():
    pair = cdata.make_pair(CONFIG, np.random.default_rng(2), 32)
    drop = cp.key_occlusion(PARAMS, CONFIG, pair, np.random.default_rng(0))
    assert drop.argmax() in (pair.position - 8, pair.position - 7)  # the earlier occurrence or the token after it


@pytest.mark.parametrize("heads", [[(5, 0)], [(0, 2)], [(-1, 0)], [(0.5, 0)], [(True, 0)], [0], "ab"])
def test_heads_that_do_not_exist_are_refused(heads):
    tokens = train.make_batch(CONFIG, np.random.default_rng(0), 2).tokens
    with pytest.raises(ValueError, match="heads|pairs"):
        cp.patch_heads(PARAMS, CONFIG, tokens, tokens, heads)
    with pytest.raises(ValueError, match="heads|pairs"):
        cp.ablate_heads(PARAMS, CONFIG, tokens, heads)


@pytest.mark.parametrize("positions", [[-1], [99], [1.5], [[0]]])
def test_positions_out_of_range_are_refused(positions):
    tokens = train.make_batch(CONFIG, np.random.default_rng(0), 2).tokens
    with pytest.raises(ValueError, match="positions"):
        cp.patch_heads(PARAMS, CONFIG, tokens, tokens, [(0, 1)], positions)


def test_source_and_target_of_other_lengths_are_refused():
    tokens = train.make_batch(CONFIG, np.random.default_rng(0), 2).tokens
    with pytest.raises(ValueError, match="same"):
        cp.patch_heads(PARAMS, CONFIG, tokens, tokens[:, :10], [(0, 1)])


def test_patching_identical_runs_is_a_value_error_not_a_zero_division():
    pair = cdata.make_pair(CONFIG, np.random.default_rng(0), 4)
    same = pair._replace(corrupt=pair.clean)
    for call in (lambda: cp.patching_effect(PARAMS, CONFIG, same, [(0, 1)]),
                 lambda: cp.head_patching(PARAMS, CONFIG, same),
                 lambda: cp.path_patching(PARAMS, CONFIG, same, (0, 1), (1, 1)),
                 lambda: cp.attribution_patching(PARAMS, CONFIG, same)):
        with pytest.raises(ValueError, match="nothing to restore"):
            call()


@pytest.mark.parametrize("sender,receiver", [((0, 7), (1, 1)), ((0, 1), (1, 7)), ((0, -1), (1, 0))])
def test_path_patching_refuses_heads_that_do_not_exist(sender, receiver):
    pair = cdata.make_pair(CONFIG, np.random.default_rng(0), 4)
    with pytest.raises(ValueError, match="do not exist"):
        cp.path_patching(PARAMS, CONFIG, pair, sender, receiver)


def test_attribution_patching_agrees_with_activation_patching():
    """Exact for the last layer (linear in its heads' outputs); for layer 1 the same order and the same winner."""
    pair = cdata.make_pair(CONFIG, np.random.default_rng(1401), 128)
    attr, act = cp.attribution_patching(PARAMS, CONFIG, pair), cp.head_patching(PARAMS, CONFIG, pair)
    np.testing.assert_allclose(attr[1], act[1], atol=1e-9)
    assert np.argmax(attr[0]) == np.argmax(act[0]) == 1
    assert 0.3 < attr[0, 1] < act[0, 1]  # the linear estimate falls short through layer 2's saturated softmax


def test_attribution_patching_is_the_derivative_of_interpolated_patching():
    """d/dε of LD with head (0, 0)'s output moved ε of the way from corrupt to clean, at ε = 0."""
    pair = cdata.make_pair(CONFIG, np.random.default_rng(3), 16)
    _, clean = cp.run_with_cache(PARAMS, pair.clean, CONFIG)
    _, bad = cp.run_with_cache(PARAMS, pair.corrupt, CONFIG)
    from mha_course.lessons import misconceptions as mi

    def ld(eps, layer, head):
        def hook(lay, tr):
            c = mi.head_contributions(tr, PARAMS.layers[lay].W_o)
            if lay == layer:
                c[:, head] = c[:, head] + eps * (clean[layer][:, head] - bad[layer][:, head])
            return c.sum(1)
        return cp.logit_difference(train.forward(PARAMS, pair.corrupt, CONFIG, patch=hook)[0], pair)
    attr = cp.attribution_patching(PARAMS, CONFIG, pair)
    full = ld(1.0, 0, 0) - ld(0.0, 0, 0)
    for layer, head in [(0, 0), (0, 1), (1, 0)]:
        eps = 1e-4
        slope = (ld(eps, layer, head) - ld(-eps, layer, head)) / (2 * eps)
        lds = cp.logit_difference(train.forward(PARAMS, pair.clean, CONFIG)[0], pair)
        lde = cp.logit_difference(train.forward(PARAMS, pair.corrupt, CONFIG)[0], pair)
        assert attr[layer, head] == pytest.approx(slope / (lds - lde), abs=1e-5)
    assert np.isfinite(full)
