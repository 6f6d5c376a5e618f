"""views.bridge: the per-head weights beside nn.MultiheadAttention's default average (notebook 12)."""


def test_averaged_weights_figure_draws_the_heads_and_their_mean():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mha_course.views.bridge import MAX_HEADS_SHOWN, averaged_weights_figure
    for h in (1, 3, 8):
        fig = averaged_weights_figure(24, h, 7)
        titles = [ax.get_title().splitlines()[0] for ax in fig.axes if ax.get_title()]
        assert titles == [f"head {i}" for i in range(min(h, MAX_HEADS_SHOWN))] + [f"mean of {h} heads"]
        assert ("not drawn" in fig._suptitle.get_text()) == (h > MAX_HEADS_SHOWN)
        plt.close(fig)


def test_averaged_weights_figure_refuses_a_bad_size_or_seed_naming_it():
    import pytest

    from mha_course.views.bridge import averaged_weights_figure
    for kwargs, name in ((dict(seq_len=0), "seq_len=0"), (dict(seq_len=4.5), "seq_len=4.5"),
                         (dict(seed=-1), "seed=-1"), (dict(seed=True), "seed=True")):
        with pytest.raises(ValueError, match=name):
            averaged_weights_figure(**{"d_model": 8, "h": 2, "seq_len": 5, **kwargs})
