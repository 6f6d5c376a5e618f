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
        controls.sliders["h"].value = h  # as a user dragging the h slider
        assert controls.values["h"] % controls.values["h_kv"] == 0
        assert list(controls.sliders["h_kv"].options) == mc.valid_kv_heads(h)
        controls.set(h_kv=h_kv)  # as code asking for any h_kv
        assert controls.values["h_kv"] == mc.nearest_valid_h(h, h_kv)
    assert all(v["h"] % v["h_kv"] == 0 for v in seen), "a callback saw an invalid h_kv"


def test_one_callback_per_change():
    controls = wg.KVControls(h=8, h_kv=8, h_options=H_OPTIONS)
    seen = []
    controls.on_change(lambda **v: seen.append((v["h"], v["h_kv"])))
    controls.sliders["h"].value = 6   # h_kv 8 -> 6: still one redraw
    controls.sliders["h_kv"].value = 3
    controls.set(h=16, h_kv=4)
    assert seen == [(6, 6), (6, 3), (16, 4)]
    with pytest.raises(ValueError, match="seq_len=3 is not one of this control's options"):
        controls.set(seq_len=3)


def test_live_views_redraw_what_the_static_functions_draw():
    view = wg.cache_live_view()
    view.controls.set(h=16, h_kv=16, seq_len=1024)
    fig = view.redraw()
    want = [r.total_bytes[0] / 2**30 for r in mc.kv_cache_table(32, 4096, 16, 16, [1024])]
    assert np.allclose([p.get_width() for p in fig.axes[0].patches], want)
    grouping = wg.grouping_live_view(8, 2)
    grouping.controls.set(h=12)  # h_kv stays 2: a divisor of 12
    assert "h = 12, h_kv = 2" in grouping.redraw().axes[0].get_title()
