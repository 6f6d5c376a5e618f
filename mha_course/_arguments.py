"""The recurring scalar and container kinds of the package's arguments (numpy only).

A size, a count, an index, a choice, a number, a flag, a Generator, a type, a sequence, a mapping;
a file path and an allocation (what the machine allows an array). Each refuses with a message
that names the argument and the fix: ``ValueError`` (``TypeError`` from ``instance`` and
``items``). ``_validate`` re-exports every name, so the package's callers write ``_validate.index``.

>>> index(1, 2, "head", "heads"), count(0, "seed"), choice("rope", ("learned", "rope"), "positions")
(1, 0, 'rope')
"""
from __future__ import annotations

import math
import numbers
import os

import numpy as np

__all__ = ["positive_int", "positive_ints", "is_whole", "count", "index", "choice", "names", "number", "flag",
           "generator", "instance", "named_tuple", "items", "items_of", "mapping", "path", "MAX_BYTES",
           "physical_memory", "binary_size", "allocation"]


def positive_int(value, name: str) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= 1."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise ValueError(
            f"{name}={value!r} must be a positive integer (got {type(value).__name__}); "
            f"pass a whole number such as {name}=4"
        )
    if value < 1:
        raise ValueError(f"{name}={value} must be >= 1; pass a positive whole number")
    return int(value)


def positive_ints(value, name: str):
    """``value`` as an int (a scalar) or an int64 array (an array of sizes), or raise if any is not an integer >= 1."""
    arr = np.asarray(value) if isinstance(value, (list, tuple, np.ndarray)) else None
    if arr is None or arr.ndim == 0:
        return positive_int(value.item() if isinstance(value, np.ndarray) else value, name)
    if arr.dtype.kind not in "iu" or arr.size == 0 or (arr < 1).any():
        raise ValueError(f"{name}={value!r} must be positive whole numbers (got dtype {arr.dtype}, shape {arr.shape}); "
                         f"pass sizes such as {name}=[128, 256]")
    return arr.astype(np.int64)


def is_whole(value) -> bool:
    """True for a whole number (an int or a numpy integer; a bool is no number here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def count(value, name: str) -> int:
    """``value`` as an int >= 0 (a seed, an offset, a number of cached tokens), or raise naming it.

    >>> count(0, "seed")
    0
    >>> count(-1, "seed")
    Traceback (most recent call last):
    ...
    ValueError: seed=-1 must be >= 0; pass a whole number such as seed=0
    """
    if not is_whole(value):
        raise ValueError(f"{name}={value!r} must be a whole number >= 0 (got {type(value).__name__}); "
                         f"pass e.g. {name}=0")
    if value < 0:
        raise ValueError(f"{name}={value} must be >= 0; pass a whole number such as {name}=0")
    return int(value)


def index(value, n: int, name: str, what: str = "") -> int:
    """``value`` as an int in 0 .. n - 1 indexing one of the ``n`` ``what`` (heads, tokens, layers ...).

    -1 is refused, not read as the last one (numpy would): an index from the end hides an off-by-one;
    so are bools (True is not 1) and floats.

    >>> index(1, 2, "head", "heads")
    1
    >>> index(-1, 2, "head", "heads")
    Traceback (most recent call last):
    ...
    ValueError: head=-1 is out of range: there are 2 heads; pass head in 0..1 (-1 is not read as the last)
    """
    there = f"there are {n} {what}; " if what else ""
    if not is_whole(value):
        raise ValueError(f"{name}={value!r} must be a whole number in 0..{n - 1} (got {type(value).__name__}); "
                         f"{there}pass e.g. {name}=0")
    if not 0 <= value < n:
        raise ValueError(f"{name}={value} is out of range: {there}pass {name} in 0..{n - 1}"
                         + (" (-1 is not read as the last)" if value < 0 else ""))
    return int(value)


def _same_kind(option, value) -> bool:
    """``value`` can name ``option``: both strings, both bools, or both numbers (True is not 1), and a whole
    number for a whole-number option (16.0 is no length; 4 names the factor 4.0)."""
    kinds = [(isinstance(v, str), isinstance(v, (bool, np.bool_)), isinstance(v, numbers.Number)) for v in (option, value)]
    return kinds[0] == kinds[1] and (is_whole(value) or not is_whole(option))


def choice(value, valid, name: str):
    """The member of ``valid`` that ``value`` names, or raise listing them (exact: 'RoPE' is not 'rope',
    True is not 1; 4 names 4.0, 16.0 names no whole-number option).

    >>> choice("scores", ("scores", "weights"), "stage")
    'scores'
    >>> choice("score", ("scores", "weights"), "stage")
    Traceback (most recent call last):
    ...
    ValueError: stage='score' is not one of the valid choices: 'scores', 'weights'; pass one of them
    """
    valid = tuple(valid)
    if not isinstance(value, np.ndarray):
        for o in valid:
            try:
                if _same_kind(o, value) and bool(o == value):
                    return o
            except (TypeError, ValueError):  # values that cannot be compared name no choice
                pass
    shown = ", ".join(repr(o) for o in valid[:12]) + (f", ... ({len(valid)} in all)" if len(valid) > 12 else "")
    raise ValueError(f"{name}={value!r:.60} is not one of the valid choices: {shown}; pass one of them")


def names(value, valid, name: str = "show") -> tuple:
    """A list or tuple of names, each one of ``valid`` -> a tuple; a bare string is refused
    (``show="h"`` would read as ``("h",)``: pass ``show=("h",)``).

    >>> names(["d_model", "h"], ("d_model", "h", "seq_len"), "show")
    ('d_model', 'h')
    """
    valid = tuple(valid)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(f"{name}={value!r} must be a list or tuple of names from "
                         + ", ".join(repr(v) for v in valid) + f"; pass e.g. {name}=({valid[0]!r},)")
    return tuple(choice(v, valid, name) for v in value)


def number(value, name: str, low=None, high=None, *, low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite float within [low, high] (``low_open``/``high_open``: that end excluded);
    NaN, inf, bools, strings and None refused.

    >>> number(0.9, "b1", 0, 1, high_open=True)
    0.9
    >>> number(float("nan"), "sharpness")
    Traceback (most recent call last):
    ...
    ValueError: sharpness=nan must be a finite number (got float); pass e.g. sharpness=1.0
    """
    finite_value = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    if finite_value:
        try:
            finite_value = math.isfinite(value)
        except OverflowError:  # an int too large for a float
            finite_value = False
    if not finite_value:
        raise ValueError(f"{name}={value!r:.40} must be a finite number (got {type(value).__name__}); "
                         f"pass e.g. {name}={_example(low, high, low_open)}")
    value = float(value)
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        span = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ValueError(f"{name}={value} is outside {span}; pass e.g. {name}={_example(low, high, low_open)}")
    return value


def _example(low, high, low_open: bool):
    if low is not None and high is not None:
        return (low + high) / 2
    if low is not None:
        return low + 1 if low_open else low
    return 1.0 if high is None else high - 1


def flag(value, name: str) -> bool:
    """``value`` as a bool: True/False only (numpy's too); ``buggy="no"`` or 2 would read as True.

    >>> flag(np.True_, "causal")
    True
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={value!r} must be True or False (got {type(value).__name__})")
    return bool(value)


def generator(rng, name: str = "rng", optional: bool = False):
    """``rng`` if it is a numpy Generator (or None when ``optional``), else a ValueError with the fix."""
    if rng is None and optional:
        return None
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"{name} must be a numpy Generator, got {type(rng).__name__}; "
                         f"pass {name}=np.random.default_rng(0)")
    return rng


def instance(value, kind, name: str, make: str):
    """``value`` if it is a ``kind`` (a class or a tuple of them), else a TypeError naming ``name``, what
    it got and how to ``make`` one.

    >>> instance("x", int, "n", "pass n=4")
    Traceback (most recent call last):
    ...
    TypeError: n must be an int, got str ('x'); pass n=4
    """
    if not isinstance(value, kind):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        wanted = " or ".join(k.__name__ for k in kinds)
        article = "an" if wanted[0].lower() in "aeiou" else "a"
        raise TypeError(f"{name} must be {article} {wanted}, got {type(value).__name__} ({value!r:.40}); {make}")
    return value


def named_tuple(value, name: str, fix: str = "make them with init_params(d_model, rng=np.random.default_rng(0))"):
    """``value`` if it is a NamedTuple (the parameter tuples of the package), else a ValueError naming ``name``."""
    if not isinstance(value, tuple) or not hasattr(value, "_fields"):
        raise ValueError(f"{name} must be a parameter tuple (MHAParams, GQAParams, ...), got {type(value).__name__}; "
                         f"{fix}")
    return value


def items(value, name: str, example: str) -> list:
    """``value`` (a list, a tuple or a 1-D array: not a string, a dict or a lone number) as a list, else a TypeError
    naming ``name`` and an ``example``.

    >>> items(("a", "b"), "tokens", "['the', 'cat']")
    ['a', 'b']
    """
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return value.tolist()
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list, got {type(value).__name__} ({value!r:.40}); pass e.g. "
                        f"{name}={example}")
    return list(value)


def items_of(value, kind: type, name: str, fix: str) -> tuple:
    """``value`` (a list or tuple) as a tuple whose items are all ``kind``, else a ValueError naming ``name``."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, kind) for v in value):
        raise ValueError(f"{name} must be a sequence of {kind.__name__}, got {type(value).__name__}; {fix}")
    return tuple(value)


def mapping(value, name: str, layout: str) -> dict:
    """``value`` if it is a non-empty dict, else raise showing the ``layout`` expected.

    >>> mapping({"a": 1}, "curves", "{label: losses (T,)}")
    {'a': 1}
    """
    if not isinstance(value, dict) or not value:
        got = "an empty dict" if isinstance(value, dict) else type(value).__name__
        raise ValueError(f"{name} must be a non-empty dict {layout}, got {got}; pass one entry or more")
    return value


def path(value, name: str = "path", for_writing: bool = False):
    """``value`` as a pathlib.Path: a str or os.PathLike, not empty; None, numbers and bytes refused.
    ``for_writing``: also refused when it is a folder or its folder does not exist (before anything is written)."""
    from pathlib import Path

    if not isinstance(value, (str, os.PathLike)) or (isinstance(value, str) and not value) \
            or not isinstance(os.fspath(value), str):
        raise ValueError(f"{name}={value!r} must be a file path (a str or pathlib.Path, got {type(value).__name__}); "
                         f"pass e.g. {name}='checkpoints/model.npz'")
    value = Path(value)
    if for_writing and value.is_dir():
        raise ValueError(f"{name}={str(value)!r} is a folder; give the path of a file in it, e.g. "
                         f"{name}={str(value / 'model.npz')!r}")
    if for_writing and not value.absolute().parent.is_dir():
        raise ValueError(f"{name}={str(value)!r}: its folder {str(value.absolute().parent)!r} does not exist; "
                         "create it first (mkdir -p) or choose another path")
    return value


MAX_BYTES = 1 << 32  # 4 GiB: more than any array of the course needs (its largest are a few hundred MB)


def physical_memory() -> int | None:
    """Bytes of memory of this machine, or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def binary_size(n: float) -> str:
    """``n`` bytes in binary units, e.g. ``binary_size(3 * 2**30) == '3 GiB'``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024


def allocation(n_bytes: int, what: str, fix: str) -> int:
    """``n_bytes`` if an array that size may be allocated (at most MAX_BYTES, and at most this machine's
    memory), else a ValueError naming ``what`` holds it and ``fix``: a clear refusal instead of a
    MemoryError (or minutes of swapping).

    >>> allocation(8 * 10**12, "tokens (10**12, 1)", "ask for fewer sequences")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: tokens (10**12, 1) would take 7.28 TiB, more than the 4 GiB this course allows one array; ...
    """
    memory = physical_memory()
    if memory is not None and memory < MAX_BYTES and n_bytes > memory:
        raise ValueError(f"{what} would take {binary_size(n_bytes)}, more than this machine's {binary_size(memory)} "
                         f"of memory; {fix}")
    if n_bytes > MAX_BYTES:
        raise ValueError(f"{what} would take {binary_size(n_bytes)}, more than the {MAX_BYTES >> 30} GiB this course "
                         f"allows one array; {fix}")
    return int(n_bytes)
