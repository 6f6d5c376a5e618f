"""The views and controls of notebook 09: h_kv always divides h, one redraw per change, and the
live views draw what the static functions draw."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import mha_course as mc  # noqa: E402
from mha_course.widgets import gqa as wg  # noqa: E402

H_OPTIONS = (1, 2, 4, 6, 8, 12, 16)


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.sampled_from(H_OPTIONS), st.integers(1, 16)), min_size=1, max_size=6))
def test_h_kv_always_divides_h(changes):
    controls = wg.KVControls(h=8, h_kv=2, h_options=H_OPTIONS)
    seen = []
    controls.on_change(lambda **v: seen.append(v))
    for h, h_kv in changes:
        controls.sliders["h"].value = h  # as a user dragging the h slider: h_kv follows to a divisor
        assert controls.values["h"] % controls.values["h_kv"] == 0
        assert list(controls.sliders["h_kv"].options) == mc.valid_kv_heads(h)
        before = controls.values
        if h % h_kv:  # as code asking for an h_kv that does not divide h: refused, nothing changed
            with pytest.raises(ValueError, match=f"h={h} is not divisible by h_kv={h_kv}"):
                controls.set(h_kv=h_kv)
            assert controls.values == before
        else:
            controls.set(h_kv=h_kv)
            assert controls.values["h_kv"] == h_kv
    assert all(v["h"] % v["h_kv"] == 0 for v in seen), "a callback saw an invalid h_kv"


def test_one_callback_per_change():
    controls = wg.KVControls(h=8, h_kv=8, h_options=H_OPTIONS)
    seen = []
    controls.on_change(lambda **v: seen.append((v["h"], v["h_kv"])))
    controls.sliders["h"].value = 6   # h_kv 8 -> 6: still one redraw
    controls.sliders["h_kv"].value = 3
    controls.set(h=16, h_kv=4)
    assert seen == [(6, 6), (6, 3), (16, 4)]
    with pytest.raises(ValueError, match="seq_len=3 is not one of the valid choices: 256, 512"):
        controls.set(seq_len=3)
    with pytest.raises(ValueError, match="h=16 is not divisible by h_kv=3"):
        controls.set(h=16, h_kv=3)  # checked as a whole first: h did not move either
    assert controls.values["h"] == 16 and seen[-1] == (16, 4)


@pytest.mark.parametrize("kwargs, match", [
    ({"h": 8, "h_kv": 3}, "h=8 is not divisible by h_kv=3; valid h_kv: 1, 2, 4, 8"),
    ({"h": 7, "h_kv": 1}, "h=7 is not one of the valid choices"),
    ({"h": 0, "h_kv": 1}, "h=0"), ({"h": -1, "h_kv": 1}, "h=-1"), ({"h": 8.0, "h_kv": 1}, "h=8.0"),
    ({"h": True, "h_kv": True}, "h=True"), ({"h": 8, "h_kv": 2.5}, "h_kv=2.5"), ({"h": 8, "h_kv": "2"}, "h_kv='2'"),
    ({"h": 8, "h_kv": 2, "show": ("h", "hkv")}, "hkv"), ({"h": 8, "h_kv": 2, "show": "h"}, "show=")])
def test_grouping_live_view_refuses_sizes_before_building_widgets(kwargs, match):
    """(8, 3) drew h_kv=2 silently, and h=7 (not on the slider) was a traitlets TraitError."""
    with pytest.raises(ValueError, match=match) as info:
        wg.grouping_live_view(**kwargs)
    assert type(info.value) is ValueError


@pytest.mark.parametrize("sizes, match", [
    ({"h": 8, "h_kv": 3}, "h_kv=3"), ({"layers": -1}, "layers=-1"), ({"seq_len": 4096.5}, "seq_len=4096.5"),
    ({"layers": True}, "layers=True"), ({"d_model": 1000}, "d_model=1000"), ({"seqlen": 4096}, "seqlen"),
    ({"h": 64, "h_kv": 8, "d_model": 512, "h_options": (6, 64)}, None)])
def test_cache_live_view_refuses_sizes_off_its_sliders(sizes, match):
    if match is None:  # a valid call (512 / 64 = 8) draws
        assert wg.cache_live_view(**sizes).controls.values["d_model"] == 512
        return
    with pytest.raises(ValueError, match=match):
        wg.cache_live_view(**sizes)


def test_cache_live_view_refuses_an_h_that_does_not_divide_d_model():
    with pytest.raises(ValueError, match="d_model=4096 is not divisible by h=6"):
        wg.cache_live_view(h=6, h_kv=1, h_options=(6, 8))


def test_live_views_redraw_what_the_static_functions_draw():
    view = wg.cache_live_view()
    view.controls.set(h=16, h_kv=16, seq_len=1024)
    fig = view.redraw()
    want = [r.total_bytes[0] / 2**30 for r in mc.kv_cache_table(32, 4096, 16, 16, [1024])]
    assert np.allclose([p.get_width() for p in fig.axes[0].patches], want)
    grouping = wg.grouping_live_view(8, 2)
    grouping.controls.set(h=12)  # h_kv stays 2: a divisor of 12
    assert "h = 12, h_kv = 2" in grouping.redraw().axes[0].get_title()


def test_an_h_option_given_twice_is_refused():
    with pytest.raises(ValueError, match=r"h_options=\[4, 8, 4\] holds 4 twice"):
        wg.KVControls(h=8, h_kv=2, h_options=(4, 8, 4))
