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
