"""A shape read in the exercise's symbols: (2, 3, 20) is (B, h, T·d_k) when B = 2, h = 3, T = 5, d_k = 4.

A wrong shape says what the learner built only when its numbers are read back as sizes: 36 where
d_k = 4 belongs is d_model·h, a division the wrong way round; (B, h, T·d_k) is a concatenation
that forgot to move the heads back beside their features. :func:`spell_shape` reads each length
as one symbol, else a product or a quotient of two, else a symbol ± 1 or twice one; a length that
several symbols have is said with all of them ("T or S").
"""
from __future__ import annotations

import re
from itertools import permutations

from .sandbox import protect

__all__ = ["readings", "spell_length", "spell_shape", "LENGTHS"]
# lengths of sequences: only these add up (a cache, then new tokens)
LENGTHS = frozenset({"T", "S", "offset", "window"})


def _symbols(sizes) -> list:
    """[(symbol, whole size)] for the whole sizes of at least 1 (a size of 1 counts only in a sum: S + T)."""
    out = []
    for k, v in dict(sizes).items():
        try:
            n = float(v)
        except (TypeError, ValueError):
            continue
        if n >= 1 and n == int(n) and "." not in str(k) and "[" not in str(k):
            out.append((str(k), int(n)))
    return out


def readings(n, sizes) -> list:
    """Every reading of the axis length ``n`` in the symbols of ``sizes`` ({symbol: size}), simplest
    first: "T", then "T·d_k", "d_model/h", "S + T", "T + 1", "2·T", "T²" ([] when none has this value)."""
    ones = _symbols(sizes)
    syms = [(k, v) for k, v in ones if v > 1]
    return list(dict.fromkeys(
        [k for k, v in syms if v == n]
        + [f"{a}·{b}" for (a, u), (b, v) in permutations(syms, 2) if a < b and u * v == n]
        + [f"{a}/{b}" for (a, u), (b, v) in permutations(syms, 2) if u == n * v]
        + [f"{a} + {b}" for (a, u), (b, v) in permutations(ones, 2) if a < b and u + v == n and {a, b} <= LENGTHS]
        + [f"{k} + 1" for k, v in syms if v + 1 == n] + [f"{k} - 1" for k, v in syms if v - 1 == n]
        + [f"2·{k}" for k, v in syms if 2 * v == n] + [f"{k}/2" for k, v in syms if v == 2 * n]
        + [f"{k}²" for k, v in syms if v * v == n]))


def spell_length(n, sizes, others=()) -> str:
    """The length ``n`` said in symbols: its simplest reading that also holds on every
    (length, sizes) of ``others`` (the same axis on other cases), several joined by "or" when the
    simplest are tied; "" when no reading holds."""
    found = readings(n, sizes)
    for m, other in others:
        if m > 1:  # a length of 1 reads as no symbol, and says nothing against one
            found = [r for r in found if r in readings(m, other)]
    if not found:
        return ""
    tier = _tier(found[0])
    return " or ".join([r for r in found if _tier(r) == tier][:3])


def _tier(reading) -> int:
    if re.fullmatch(r"[A-Za-z_]\w*", reading, re.ASCII):
        return 0
    return 2 if re.search(r"\d", reading) else 1  # two symbols (T·d_k, S + T) before a constant (T + 1, 2·h)


def spell_shape(shape, sizes, others=()) -> str:
    """``shape`` (a tuple of whole lengths) with each length read as symbols: "(B, h, T·d_k)";
    ``others``: [(the same output's shape, sizes)] on other cases, to choose between readings. A
    length no reading fits stays a number, 1 stays 1, and tied readings are bracketed: [T or h]."""
    others = [(tuple(s), z) for s, z in others if len(tuple(s)) == len(tuple(shape))]
    parts = []
    for j, n in enumerate(tuple(shape)):
        word = spell_length(int(n), sizes, [(int(s[j]), z) for s, z in others]) if int(n) > 1 else ""
        parts.append(f"[{word}]" if " or " in word else (word or str(int(n))))
    return "(" + ", ".join(parts) + (",)" if len(parts) == 1 else ")")


protect(globals())
