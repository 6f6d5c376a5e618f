"""views/style.py: one colour map for weights, one colour per head, axes made only when asked."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mha_course.views import style  # noqa: E402


def test_head_colours_are_stable_and_cycle():
    assert style.head_color(0) == style.HEAD_COLORS[0]
    assert style.head_color(len(style.HEAD_COLORS)) == style.head_color(0)
    assert len(set(style.HEAD_COLORS)) == len(style.HEAD_COLORS)


def test_new_ax_reuses_the_axes_it_is_given_and_leaves_global_state_alone():
    before = dict(plt.rcParams)
    fig, ax = plt.subplots()
    assert style.new_ax(ax) is ax
    made = style.new_ax(None, figsize=(2, 1))
    assert made is not ax and tuple(made.figure.get_size_inches()) == (2.0, 1.0)
    assert dict(plt.rcParams) == before
    plt.close("all")


def test_head_grid_and_labels():
    fig, axes = style.head_grid(5, ncols=4)
    assert len(axes) == 5 and sum(a.axison for a in fig.axes) == 5  # the 3 spare cells are switched off
    style.label_axes(axes[0], ["a", "b"], ["x", "y", "z"], "query", "key")
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["x", "y", "z"]
    assert axes[0].get_ylabel() == "query" and axes[0].get_xlabel() == "key"
    plt.close("all")


def test_many_column_labels_stand_upright_under_their_columns():
    """More than 8 key labels at 45 degrees run into each other (00's live heatmap at seq_len 13)."""
    import matplotlib.pyplot as plt

    from mha_course.views.style import label_axes
    for n, rotation in ((6, 45.0), (8, 45.0), (9, 90.0), (13, 90.0)):
        fig, ax = plt.subplots()
        label_axes(ax, None, [f"tok{i}" for i in range(n)], "query", "key")
        labels = ax.get_xticklabels()
        assert [lab.get_rotation() for lab in labels] == [rotation] * n, n
        assert all(lab.get_ha() == ("center" if n > 8 else "right") for lab in labels)
        plt.close(fig)


# --- hostile arguments: indices and sizes are whole numbers; ax is an Axes
def test_head_colours_grids_and_labels_refuse_what_they_cannot_draw():
    import pytest
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="i="):
            style.head_color(bad)  # -1 was read as the last colour
    for h, ncols in ((0, 4), (3, 0), (2.0, 4), (3, -1)):
        with pytest.raises(ValueError, match="h=|ncols="):
            style.head_grid(h, ncols)  # was ZeroDivisionError or matplotlib's "figure size must be positive"
    with pytest.raises(TypeError, match="ax must be an Axes, got NoneType"):
        style.label_axes(None, ["a"], ["b"], "query", "key")  # was AttributeError


# --- issue 32, round 4: what a log axis can draw, and dict keys that must be known
import numpy as np  # noqa: E402
import pytest  # noqa: E402


@pytest.mark.parametrize("bad, match", [([1.0, 0.0], "holds 0, drawn on a log axis"),
                                        ([-2.0, 1.0], "holds -2, drawn on a log axis"),
                                        ([1.0, np.nan], "= nan"), ([np.inf], "= inf")])
def test_log_values_refuse_what_a_log_axis_cannot_show(bad, match):
    with pytest.raises(ValueError, match=match):
        style.log_values(bad, "seconds")
    assert style.log_values([3e-9, 2.0], "seconds").tolist() == [3e-9, 2.0]


def test_known_keys_name_the_unknown_and_the_missing():
    with pytest.raises(ValueError, match=r"scores has the unknown keys \['q'\]; its keys are 'Q', 'K'"):
        style.known_keys({"q": 1}, ("Q", "K"), "scores")
    with pytest.raises(ValueError, match=r"lacks the keys \['K'\]"):
        style.known_keys({"Q": 1}, ("Q", "K"), "scores", required=("Q", "K"))
    assert style.known_keys({"K": 2}, ("Q", "K"), "scores") == {"K": 2}


def test_finite_values_name_the_first_nan_in_words_about_a_plot():
    with pytest.raises(ValueError, match=r"values has 2 non-finite value\(s\) \(the first: values\[0, 1\] = nan\); a view"):
        style.finite_values([[1.0, np.nan], [np.inf, 0.0]], "values")
