"""Every categorical colour of a figure comes from the course's palette (views.style.HEAD_COLORS: Okabe &
Ito's, apart for colour-blind readers; tests/views/test_style_colour_vision.py holds that), never from
matplotlib's tab10, whose orange/green and green/red pairs a protan or deutan reader cannot tell apart."""
import re
from pathlib import Path

import mha_course

TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
PATTERN = re.compile("|".join([*map(re.escape, TAB10), r"[\"']tab:\w+[\"']", r"get_cmap\(\s*[\"']tab(?:10|20)[\"']",
                               r"[\"']C[0-9][\"']"]), re.I)


def test_no_figure_takes_a_colour_outside_the_palette():
    root = Path(mha_course.__file__).parent
    found = [f"{p.relative_to(root)}:{n}: {line.strip()}"
             for folder in ("views", "widgets", "explorer", "lessons")
             for p in sorted((root / folder).glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if PATTERN.search(line)]
    assert not found, "colours outside views.style.HEAD_COLORS:\n" + "\n".join(found)


def test_the_pattern_finds_each_kind_of_tab10_colour():
    for line in ('c = "#1F77B4"', "color='tab:red'", 'plt.get_cmap("tab10")(i)', 'color="C3"'):
        assert PATTERN.search(line), line
    assert not PATTERN.search('color=head_color(3)')
