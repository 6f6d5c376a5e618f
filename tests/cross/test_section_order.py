"""Each notebook's numbered headings run in order: a section never sits inside another one.

A heading ``## 5. What attention explains`` followed by ``### 4.5 ...`` reads, to a learner, as
section 4.5 inside section 5 (and the table of contents says so too). The numbers of the ``##``,
``###`` and ``####`` headings of a notebook, read as tuples (``4.5`` -> (4, 5)), must strictly increase.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
HEADING = re.compile(r"^#{2,4}\s+(\d+(?:\.\d+)*)[.\s·]")


def section_numbers(markdown_cells: list[str]) -> list[tuple[int, ...]]:
    """The markdown cells' sources -> the numbers of their numbered headings, in order."""
    out = []
    for source in markdown_cells:
        for line in source.splitlines():
            m = HEADING.match(line)
            if m:
                out.append(tuple(int(x) for x in m.group(1).split(".")))
    return out


def out_of_order(numbers: list[tuple[int, ...]]) -> list[tuple]:
    """Pairs of consecutive headings whose numbers do not increase."""
    return [(a, b) for a, b in zip(numbers, numbers[1:]) if b <= a]


def test_the_check_sees_a_subsection_inside_the_next_section():
    cells = ["## 4. Attribution\n### 4.4 Ablation", "## 5. What attention explains", "### 4.5 Over seeds\ntext",
             "## 6 · The pattern viewer"]
    assert section_numbers(cells) == [(4,), (4, 4), (5,), (4, 5), (6,)]
    assert out_of_order(section_numbers(cells)) == [((5,), (4, 5))]
    assert out_of_order(section_numbers([cells[0], cells[2], cells[1], cells[3]])) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_numbered_headings_increase(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    numbers = section_numbers(["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"])
    assert not out_of_order(numbers), f"{path.name}: headings out of order {out_of_order(numbers)}"
