"""No number in prose that no checked cell prints.

For every notebook in notebooks/, every number in a markdown cell must appear in the source or
the stored output of a code cell whose output nbval compares (not ``NBVAL_IGNORE_OUTPUT``, not
skipped) near it: in the same section (between two ``#``/``##`` headings) or within WINDOW cells.
A claim is backed by the cell that prints it, not by the same digits printed anywhere else.
Small whole numbers (below 20: sizes, counts, "two heads") may be backed anywhere in the notebook. Decimals match a printed number that rounds to them (prose "2.4" matches a printed
2.430); whole numbers must appear exactly. A number that varies by machine belongs in prose
only as a range that a compared cell checks (``slope in [1.7, 2.3]: True``).

Numbers that are not claims are skipped by the rules below (section and exercise numbers,
years, library versions, minutes, which test_notebook_structure checks) or listed in ALLOWED
with the reason.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))

# (notebook stem, number as written) -> why it needs no printing cell
ALLOWED: dict = {
    # ("01_qkv", "0.83"): "why this number needs no printing cell",
    ("02_scaled_dot_product", "709.78"): "a constant of IEEE floats: np.log(np.finfo(np.float64).max)",
    ("02_scaled_dot_product", "11.1"): "a constant of IEEE floats: np.log(np.finfo(np.float16).max)",
    ("13_long_context", "1000"): "Chen et al. 2023 fine-tune LLaMA for 1000 steps: the paper's number, cited",
    ("13_long_context", "128"): "LLaMA's d_k = 128 in Chen et al. 2023: the paper's number, cited",
    # a timing is never compared; the prose gives the measured range and says that it is not checked
}

NUMBER = re.compile(r"(?<![\w.^])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
SKIP_CONTEXT = [
    r"https?://\S+",                                    # links
    r"\[\d\d\](?=\()",                                    # [06](06_masks...): a notebook's number as link text
    r"\]\([^)]*\)",                                     # markdown link targets
    r"\b\d\d_[a-z_]+(\.ipynb)?",                        # notebook file names
    r"(?i)\b(notebooks?|exercises?|ex|sections?|§|steps?|chapter)\s*\d+(\.\d+)?"
    r"((\s*(,|and|to|or|-|–)\s*)\d+(\.\d+)?)*",         # references to parts of the course
    r"(?i)\b(torch|pytorch|python|numpy|version|matplotlib|ipywidgets)\s+\d+(\.\d+)+\+?\w*",
    r"\b\d+\.\d+\.\d+\w*",                              # dotted versions
    r"(?i)\b\d+\s*(-\s*)?(minutes?|hours?|min)\b",      # time budgets: test_notebook_structure
    r"(?i)\b\d+\s+(to read and run|for the(\s+\w+)?\s+exercises)",
    r"\b(19|20)\d\d\b",                                 # years
    r"(?m)^#+\s*\d+(\.\d+)*\s*[.·]?",                   # heading numbers
    r"(?m)^\s*(\*\*)?\d+\.(\*\*)?\s",                   # numbered list items / interview questions
    r"\b\d+x\d+\b",                                     # "16x16" in paper titles
]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _compared(cell: dict) -> bool:
    first = _source(cell).lstrip().splitlines()[:1]
    tags = cell.get("metadata", {}).get("tags", [])
    return not (first and re.fullmatch(r"#\s*NBVAL_(IGNORE_OUTPUT|SKIP)", first[0].strip())) \
        and "nbval-skip" not in tags and "nbval-ignore-output" not in tags


def _output_text(cell: dict) -> str:
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append("".join(o["text"]))
        elif "data" in o and "text/plain" in o["data"]:
            parts.append("".join(o["data"]["text/plain"]))
        elif o.get("output_type") == "error":
            parts.append(o.get("evalue", ""))
    return "\n".join(parts)


def _latex_plain(text: str) -> str:
    text = re.sub(r"(\d)\{,\}(\d)", r"\1,\2", text)          # 1{,}024
    text = re.sub(r"(\d)\\[,;! ](\d{3})", r"\1,\2", text)    # 16\,384
    return text


def numbers_in(text: str) -> list[str]:
    """The numbers of a text as written, minus thousands separators ('1,024' -> '1024')."""
    return [m.group(0).replace(",", "") for m in NUMBER.finditer(_latex_plain(text))]


def prose_numbers(text: str) -> list[str]:
    text = _latex_plain(text)
    for pattern in SKIP_CONTEXT:
        text = re.sub(pattern, " ", text)
    return numbers_in(text)


def _matches(written: str, known: set[float]) -> bool:
    value = float(written)
    mantissa = written.split("e")[0].split("E")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    if "e" in written.lower() or decimals:
        tol = 0.5 * 10 ** -decimals + 1e-9 if decimals else abs(value) * 0.05
        return any(abs(k - value) <= tol for k in known)
    return value in known


WINDOW = 8


def _sections(cells: list) -> list[int]:
    """The section index of every cell: a markdown cell opening with a # or ## heading starts one."""
    out, current = [], 0
    for c in cells:
        if c["cell_type"] == "markdown" and re.match(r"#{1,2}\s", _source(c).lstrip()):
            current += 1
        out.append(current)
    return out


def _printed(cells: list, keep) -> set:
    """The numbers in the source and output of the compared code cells whose index passes ``keep``."""
    return {float(n) for j, c in enumerate(cells) if keep(j) and c["cell_type"] == "code" and _compared(c)
            for n in numbers_in(_source(c) + "\n" + _output_text(c))}


def _unprinted(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    anywhere, section = _printed(cells, lambda j: True), _sections(cells)
    missing = []
    for i, c in enumerate(cells):
        src = _source(c)
        if c["cell_type"] != "markdown" or src.lstrip().startswith("## The course map"):
            continue
        near = None
        for n in prose_numbers(src):
            if (path.stem, n) in ALLOWED:
                continue
            if "." not in n and "e" not in n.lower() and float(n) < 20:
                ok = _matches(n, anywhere)
            else:
                near = near if near is not None else _printed(
                    cells, lambda j: abs(j - i) <= WINDOW or section[j] == section[i])
                ok = _matches(n, near)
            if not ok:
                missing.append(f"markdown cell {i} ({c.get('id')}): {n}")
    return missing


def test_a_number_printed_far_away_does_not_back_a_claim(tmp_path):
    md = lambda s: {"cell_type": "markdown", "source": s, "metadata": {}}  # noqa: E731
    code = lambda s, out: {"cell_type": "code", "source": s, "metadata": {}, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": out}]}  # noqa: E731
    cells = [md("# One"), code("x = 1", "accuracy 0.824\n"), *[md("filler") for _ in range(WINDOW + 2)],
             md("# Two"), md("The accuracy is 0.824."), code("y = 2", "loss 1.5\n")]
    path = tmp_path / "99_probe.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert _unprinted(path) == [f"markdown cell {len(cells) - 2} (None): 0.824"]
    cells[-1] = code("y = 2", "accuracy 0.824\n")
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert _unprinted(path) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_number_in_prose_is_printed_by_a_compared_cell(path):
    missing = _unprinted(path)
    assert not missing, (f"{path.name}: numbers in prose that no compared cell prints or uses "
                         "(print them in a checked cell, give a checked range, or drop them):\n  "
                         + "\n  ".join(missing))


@pytest.mark.parametrize("text, expected", [
    ("weights 0.19 and 1,024 params, $1{,}056$ and $16\\,384$", ["0.19", "1024", "1056", "16384"]),
    ("see notebook 05 and Exercise 3.3, torch 2.13.0, about 25 minutes, in 2017, [06](06_masks.ipynb)", []),
    ("## 3. Heads\nd_k = 64, W_O^{(2)}, float32, tok16, e^{23}", ["64", "2", "23"]),
])
def test_prose_numbers_reads_numbers_as_a_reader_would(text, expected):
    assert prose_numbers(text) == expected


def test_matching_rounds_decimals_and_is_exact_for_whole_numbers():
    known = {2.430, 1024.0, 0.1437}
    assert _matches("2.4", known) and _matches("2.43", known) and _matches("0.14", known)
    assert _matches("1024", known) and not _matches("1023", known) and not _matches("2.5", known)
