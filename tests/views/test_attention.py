"""views/attention.py: the heatmaps of 00-05 show what the Trace holds, on a fixed 0..1 scale."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.views import attention as plots  # noqa: E402


def test_attention_heatmap_draws_the_weights_on_a_fixed_scale_with_token_labels():
    w = mc.softmax(np.random.default_rng(0).normal(size=(3, 4)))
    ax = plots.attention_heatmap(w, ["a", "b", "c"], ["w", "x", "y", "z"])
    image = ax.images[0]
    assert np.allclose(np.asarray(image.get_array()), w) and image.get_clim() == (0.0, 1.0)
    assert image.get_cmap().name == plots.WEIGHTS_CMAP
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    plt.close("all")


def test_head_heatmaps_one_panel_per_head_from_the_trace():
    rng = np.random.default_rng(1)
    t = mc.trace(rng.normal(size=(1, 5, 8)), mc.init_params(8, rng=rng), 4)
    axes = plots.head_heatmaps(t)
    assert len(axes) == 4
    for i, ax in enumerate(axes):
        assert np.allclose(np.asarray(ax.images[0].get_array()), t.weights[0, i])
    plt.close("all")


def test_tokens_for_extends_the_course_sentence_and_refuses_a_wrong_count():
    assert plots.tokens_for(2) == ["the", "cat"]
    assert plots.tokens_for(18)[-1] == "tok17"
    with pytest.raises(ValueError, match="one token per position"):
        plots.tokens_for(3, ["a", "b"])


def test_the_split_bug_figure_shows_positions_mixed_into_heads():
    right = plots.head_split_sources(4, 8, 2)
    wrong = plots.head_split_sources(4, 8, 2, buggy=True)
    assert not np.array_equal(np.asarray(right[0]), np.asarray(wrong[0]))
    plt.close("all")
