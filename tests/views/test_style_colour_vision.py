"""views/style.py's colours, read as greyscale and as colour-blind readers see them.

Every figure of the course (and of the web book) takes its colours from views/style.py:
- the sequential maps (attention weights, |change|) must get darker steadily (CIE L*), so that a
  greyscale print and every colour-vision type read them;
- the diverging map is light at 0 and equally dark at both ends (magnitude in lightness, the sign in
  blue against red, which protan and deutan readers tell apart);
- the head colours (one per head, in every plot) must stay apart for protan, deutan and tritan readers
  (the dichromat simulation of Machado, Oliveira & Fernandes 2009, IEEE TVCG 15(6), severity 1.0),
  not only for the trichromat who chose them.
"""
import itertools

import matplotlib
import matplotlib.colors as mcolors
import numpy as np
import pytest

from mha_course.views import style
from mha_course.views.cost import DELTA_CMAP

# linear-RGB matrices of Machado et al. (2009) at severity 1.0 (full dichromacy)
DICHROMATS = {
    "protan": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216],
                        [-0.003882, -0.048116, 1.051998]]),
    "deutan": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413],
                        [-0.011820, 0.042940, 0.968881]]),
    "tritan": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602],
                        [0.004733, 0.691367, 0.303900]]),
}
VISION = {"trichromat": np.eye(3), **DICHROMATS}
# CIE76 distance two colours must keep: about 2 is the least a viewer notices side by side; lines and
# small legend patches need far more. tab10's orange and green are 4.6 apart for a protan reader.
APART = 15.0


def linear(rgb):
    rgb = np.asarray(rgb, dtype=float)
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def cielab(rgb, vision="trichromat"):
    """(N, 3) sRGB in 0..1 -> (N, 3) CIE L*a*b* (D65) as a reader with ``vision`` sees it."""
    seen = np.clip(linear(rgb) @ VISION[vision].T, 0, 1)
    xyz = seen @ np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]).T
    f = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(f > 0.008856, np.cbrt(f), 7.787 * f + 16 / 116)
    return np.stack([116 * f[:, 1] - 16, 500 * (f[:, 0] - f[:, 1]), 200 * (f[:, 1] - f[:, 2])], axis=1)


def closest_pair(colours, vision):
    """(distance, i, j) of the two colours a reader with ``vision`` finds most alike."""
    lab = cielab(np.array([mcolors.to_rgb(c) for c in colours]), vision)
    return min((float(np.linalg.norm(lab[i] - lab[j])), i, j) for i, j in itertools.combinations(range(len(lab)), 2))


def lightness(cmap_name, n=21):
    rgb = matplotlib.colormaps[cmap_name](np.linspace(0, 1, n))[:, :3]
    return cielab(rgb)[:, 0]


def test_the_simulation_finds_what_colour_blind_readers_are_known_to_confuse():
    """The check itself: red and green, far apart for a trichromat, close for a deutan reader (the
    red-green confusion); orange and green close for a protan reader (tab10's heads 1 and 2, the course's
    colours before); the same pairs stay apart for a tritan reader."""
    red_green, orange_green = ["#d62728", "#2ca02c"], ["#ff7f0e", "#2ca02c"]
    assert closest_pair(red_green, "trichromat")[0] > 60 and closest_pair(orange_green, "trichromat")[0] > 60
    assert closest_pair(red_green, "deutan")[0] < APART and closest_pair(orange_green, "protan")[0] < APART
    assert closest_pair(red_green, "tritan")[0] > APART and closest_pair(orange_green, "tritan")[0] > APART


@pytest.mark.parametrize("vision", sorted(VISION))
def test_every_two_head_colours_stay_apart_for_every_colour_vision(vision):
    distance, i, j = closest_pair(style.HEAD_COLORS, vision)
    assert distance >= APART, (f"{vision}: heads {i} ({style.HEAD_COLORS[i]}) and {j} ({style.HEAD_COLORS[j]}) "
                               f"are {distance:.1f} apart (CIE76), below {APART}")


def test_head_colours_read_as_lines_on_a_white_page():
    """No head colour is so light that its line or title fades into the white axes (L* at most 75)."""
    values = cielab(np.array([mcolors.to_rgb(c) for c in style.HEAD_COLORS]))[:, 0]
    assert values.max() <= 75, dict(zip(style.HEAD_COLORS, values.round(1)))
    assert len(style.HEAD_COLORS) >= 8, "h = 8, the course's largest common head count, needs 8 colours"


@pytest.mark.parametrize("name", [style.WEIGHTS_CMAP, DELTA_CMAP])
def test_the_sequential_maps_get_darker_steadily(name):
    steps = np.diff(lightness(name))
    assert (steps < 0).all() and -steps.sum() > 60, f"{name}: lightness must fall steadily ({steps})"


def test_the_diverging_map_is_light_at_zero_and_blue_against_red_at_its_ends():
    values = lightness(style.VALUES_CMAP)
    assert values.argmax() == len(values) // 2 and np.diff(values[: len(values) // 2 + 1]).min() > 0
    assert abs(values[0] - values[-1]) < 5 and values.max() - values[0] > 60, values
    ends = [matplotlib.colormaps[style.VALUES_CMAP](x)[:3] for x in (0.0, 1.0)]
    for vision in DICHROMATS:
        assert closest_pair(ends, vision)[0] >= APART, f"{vision}: the two signs look alike"
