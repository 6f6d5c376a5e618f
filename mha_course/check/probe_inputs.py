"""The inputs the probes try (check/probes.py), each a change of one of the exercise's cases.

Each builder takes a :class:`Given` (the exercise, the case changed, all cases) and yields
``(args, what, hint, lenient)`` (and a fifth, True, where the values are compared relative to their size): the changed arguments, what was changed in the exercise's names,
what such a difference means and how to fix it (one sentence per kind of input, the same in every
exercise), and whether only wrong values refuse (integer inputs: a float result of the same values is
right, and an error is the function refusing that input, not a wrong result).
A builder never checks validity: the probes keep an input only where the reference runs on it, gives
a finite, non-empty result and the relations every case keeps still hold.

>>> import numpy as np
>>> g = Given(lambda x, h: x, (np.arange(6.0).reshape(2, 3), 2), [(np.ones((2, 3)), 2)])
>>> [what for _, what, _, _ in each_at_one(g)], [what for _, what, _, _ in twins(g)]
(['h = 1', 'every size at its smallest'], [])
"""
from __future__ import annotations

import copy
import inspect
from typing import NamedTuple

from .edges import cut_to_one
from .language import say
from .sandbox import arg_names, np, pristine_numpy, protect, quiet_numpy

__all__ = ["Given", "BUILDERS", "at_one_hint", "INVALID", "valid", "whole", "sizes_of", "relations", "SHIFT", "WRAP", "HUGE", "LARGE", "SMALL", "MAX_SIZE", "LONGER",
           "each_at_one", "each_quotient_at_one", "each_alone", "zeros", "integer", "other_order", "negated",
           "large", "masks", "integers", "leading_axis", "twins", "rectangular", "flags", "strings", "each_longer", "lengths",
           "huge"]

SHIFT = 40000  # added to integer arrays (ids, positions) and to lengths: past int16, a max_len of 5000, float16's 2048
WRAP = 65536  # integer arrays times this: ids that int8, uint8 or int16 wrap onto one another
HUGE = (10 ** 6 + 1, 10 ** 17 + 1)  # whole-number sizes times these: products past 2**63 (int64), each past 2**53
LARGE = (1e3,)  # the first float array times these: exp of unshifted scores overflows, -1e4 no longer masks (1e6 would
# refuse the textbook linear attention, whose exp(x) features underflow to 0 / 0 for strongly negative queries)
SMALL = (1e-6,)  # and these: a rounding to fixed decimals, an eps or a clip that the formula has not, shows
MAX_SIZE = 5_000_000  # a probe's result holds at most this many numbers (a length probe is skipped beyond it)
LONGER = (600, 2100)  # whole-number lengths tried: past a table of 512, int8's 127 and float16's 2048
INVALID = object()  # what :func:`valid` returns for an input that is not one of the exercise's


class Given(NamedTuple):
    """What a builder changes: the reference, the case it starts from (``base``) and every case's arguments."""
    reference: object
    base: tuple
    cases: list


def valid(reference, args, finite=False):
    """The reference's value on ``args``, or INVALID where it raises, is empty, too big, holds NaN, or holds ±inf
    (when ``finite``: the exercise's own results never do)."""
    try:
        with pristine_numpy(), quiet_numpy():
            value = reference(*copy.deepcopy(args))
    except Exception:  # noqa: BLE001 -- not a valid input of this exercise
        return INVALID
    for v in value if isinstance(value, tuple) else (value,):
        if isinstance(v, (np.ndarray, np.number, int, float)) and not isinstance(v, bool):
            a = np.asarray(v)
            if a.size == 0 or a.size > MAX_SIZE or (a.dtype.kind in "fc" and (
                    np.isnan(a).any() or (finite and np.isinf(a).any()))):
                return INVALID
    return value


def whole(v) -> bool:
    """A whole number that is not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _names(g) -> list:
    return arg_names(g.reference, g.base)


def _put(args, i, x) -> tuple:
    return args[:i] + (x,) + args[i + 1:]


def _slots(g) -> list:
    """[(label, read, write)] for every optional input of the base case: a parameters field or an argument whose
    default is None, given (not None)."""
    try:
        params = inspect.signature(g.reference).parameters
    except (TypeError, ValueError):
        params = {}
    out = []
    for i, (name, v) in enumerate(zip(_names(g), g.base)):
        if hasattr(v, "_fields"):
            out += [(f, (lambda a, i=i, f=f: getattr(a[i], f)),
                     (lambda a, x, i=i, f=f: _put(a, i, a[i]._replace(**{f: x}))))
                    for f in v._fields if getattr(v, f) is not None]
        elif v is not None and name in params and params[name].default is None:
            out.append((name, (lambda a, i=i: a[i]), (lambda a, x, i=i: _put(a, i, x))))
    return out


def _arrays(g, kinds="f", fields=True) -> list:
    """[(label, read, write)] for every array argument of a dtype kind in ``kinds``, then (``fields``) every
    array field of a parameters argument and optional array argument not listed already."""
    out = [(name, (lambda a, i=i: a[i]), (lambda a, x, i=i: _put(a, i, x)))
           for i, (name, v) in enumerate(zip(_names(g), g.base))
           if isinstance(v, np.ndarray) and v.dtype.kind in kinds and v.size]
    listed = {label for label, _, _ in out}
    return out + [s for s in (_slots(g) if fields else []) if s[0] not in listed and
                  isinstance(s[1](g.base), np.ndarray) and s[1](g.base).dtype.kind in kinds and s[1](g.base).size]


def _beyond_unit(v) -> bool:
    return bool(v.min() < 0 or v.max() > 1)  # not probabilities (weights, a float mask)


def _divisor(g, i) -> int:
    """The common divisor of whole-number argument i over every case (2 for a d_model that is always even)."""
    import math
    values = [int(a[i]) for a in g.cases if i < len(a) and whole(a[i])]
    return math.gcd(*values) if len(values) >= 3 and len(set(values)) > 1 else 1


def _an_index(g, i) -> bool:
    """Whole-number argument i is below another one in every case (i < h, t < T): an index, which may be 0."""
    return any(all(whole(c[i]) and whole(c[j]) and c[i] < c[j] for c in g.cases if len(c) == len(g.base))
               for j in range(len(g.base)) if j != i)


def at_one_hint(symbol, n=1) -> str:
    """The one sentence for a mistake that shows only where a size is at its smallest (1), in every exercise."""
    return say("Right for every other {symbol}: is there a special case for {symbol} = {n} (an if-branch, a squeeze, "
               "an index that drops the axis), or a loop or search that assumes more? Fix: one code path for "
               "every {symbol}", symbol=symbol, n=n)


def each_at_one(g):
    """Each size of the shape line cut to 1, each index at 0 and each whole-number argument at its smallest (1,
    or the divisor every case keeps), from the base case and, for a function of numbers only, from its first
    cases too; then all of them at once."""
    from .derive import shape_line
    dims_of, _ = shape_line(g.reference)
    symbols = list(dict.fromkeys([d for dims in dims_of.values() for d in dims if d.isidentifier()]))
    starts = g.cases[:4] if all(not isinstance(v, np.ndarray) for v in g.base) else [g.base]
    for start in [g.base] + [c for c in starts if c is not g.base]:
        together = start
        for i, (name, v) in enumerate(zip(arg_names(g.reference, start), start)):
            if whole(v) and v > 0 and start is g.base and _an_index(g, i):  # head i = 0, position t = 0
                yield _put(start, i, 0), say("{name} = {n}", name=name, n=0), at_one_hint(name, 0), False
            if whole(v) and v > _divisor(g, i) and name not in symbols:
                yield _put(start, i, _divisor(g, i)), say("{name} = {n}", name=name, n=_divisor(g, i)), \
                    at_one_hint(name, _divisor(g, i)), False
                together = _put(together, i, _divisor(g, i))
        for symbol in symbols:
            args = cut_to_one(g.reference, start, symbol)
            if args is not None:
                yield args, say("{symbol} = 1", symbol=symbol), at_one_hint(symbol), False
                together = cut_to_one(g.reference, together, symbol) or together
        yield together, say("every size at its smallest"), say(
            "Right when the sizes are larger: is there a special case for a size of 1 (an if-branch, a squeeze, a "
            "0-d result)? Fix: one code path for every size"), False


def sizes_of(args) -> dict:
    """{(argument,): value} of one case's whole numbers and {(argument, axis from the end): length} of its arrays."""
    out = {}
    for i, v in enumerate(args):
        if whole(v):
            out[(i,)] = int(v)
        elif isinstance(v, np.ndarray):
            out.update({(i, k - v.ndim): n for k, n in enumerate(v.shape)})
    return out


def relations(cases):
    """What every case keeps, as a test of a probe's arguments: each whole-number argument a multiple of its
    common divisor over the cases (d_model even), each whole-number argument a divisor of another size where every
    case has it so (h of d_model, h_kv of h), and arrays of one shape in every case of one shape still."""
    import math
    sizes = [sizes_of(a) for a in cases]
    keys = set.intersection(*(set(s) for s in sizes))
    divisor = {k: math.gcd(*(s[k] for s in sizes)) for k in keys  # of whole-number arguments: three cases or more
               if len(k) == 1 and len(sizes) >= 3 and len({s[k] for s in sizes}) > 1}
    divides = [(a, b) for a in keys for b in keys if a != b and len(b) == 1 and all(
        s[b] and s[a] % s[b] == 0 for s in sizes) and any(s[b] > 1 for s in sizes)]
    n = min(len(a) for a in cases)
    arrays = (lambda a, i, j: isinstance(a[i], np.ndarray) and isinstance(a[j], np.ndarray))
    twins = [(i, j) for i in range(n) for j in range(i + 1, n) if all(
        arrays(a, i, j) and a[i].shape == a[j].shape for a in cases)]

    def keeps(args) -> bool:
        mine = sizes_of(args)
        return (all(mine[k] % d == 0 for k, d in divisor.items() if d > 1 and k in mine) and
                all(mine[b] and mine[a] % mine[b] == 0 for a, b in divides if a in mine and b in mine) and
                all(arrays(args, i, j) and args[i].shape == args[j].shape for i, j in twins))
    return keeps


def each_quotient_at_one(g):
    """Each whole-number argument that divides another size in every case made equal to it (h = d_model: d_k = 1;
    h = h_kv: one query head per key head)."""
    sizes = [sizes_of(a) for a in g.cases]
    mine = sizes_of(g.base)
    for i, (name, v) in enumerate(zip(_names(g), g.base)):
        if not whole(v) or v < 1:
            continue
        for key, n in mine.items():
            if key != (i,) and n > v and all(s.get(key, 0) % s[(i,)] == 0 for s in sizes if (i,) in s and s[(i,)]):
                other = _names(g)[key[0]] if len(key) == 1 else f"{_names(g)[key[0]]}.shape[{key[1]}]"
                yield _put(g.base, i, n), say("{name} = {other} = {n}", name=name, other=other, n=n), say(
                    "Right when {other} is more than {name}: a special case where they are equal (d_k = 1, one "
                    "query head per key/value head) gives this. Fix: one code path for every size",
                    name=name, other=other), False


def each_alone(g):
    """Each optional input left out alone, each given alone (the others that may be None left out), and every
    vector among them (the biases) all zeros at once."""
    optional = [s for s in _slots(g) if valid(g.reference, s[2](g.base, None)) is not INVALID]
    hint = say("Each optional input is given or left out on its own: does one test (b_q is None) decide for all "
               "of them? Fix: test each one where it is used (if b_k is not None: K = K + b_k)")
    for label, _, write in optional:
        yield write(g.base, None), say("{name} left out (None), the others given", name=label), hint, False
    if len(optional) > 2:
        for label, _, _ in optional:
            args = g.base
            for other, _, write in optional:
                args = write(args, None) if other != label else args
            yield args, say("only {name} given of the optional inputs", name=label), hint, False
    arrays = [s for s in _slots(g) if isinstance(s[1](g.base), np.ndarray) and s[1](g.base).ndim == 1]
    if len(arrays) > 1:
        args = g.base
        for _, read, write in arrays:
            args = write(args, np.zeros_like(read(g.base)))
        yield args, say("every bias all zeros"), _zeros_hint(), False


def _zeros_hint():
    return say("Zeros are ordinary numbers here: is an array of zeros taken for \"missing\" or \"padding\" (if not "
               "x.any(), a zero bias dropped), or divided by its own max or norm (0 / 0)? Fix: test for None or for the "
               "shape, never for the values, and divide only by what cannot be 0")


def zeros(g):
    """Each float array all zeros (an ordinary value: not "missing" or "padding")."""
    for label, read, write in _arrays(g):
        yield write(g.base, np.zeros_like(read(g.base))), say("{name} all zeros", name=label), _zeros_hint(), False


def integer(g):
    """Every float array that is not probabilities as integers (all at once: an output made like one input of
    mixed dtypes is a choice, not a mistake), from the base case or, where it holds ±inf, the first finite case."""
    finite = (lambda args: all(np.isfinite(v).all() for v in args if isinstance(v, np.ndarray) and v.dtype.kind == "f"))
    start = next((c for c in [g.base] + list(g.cases) if len(c) == len(g.base) and finite(c)), None)
    if start is None:
        return
    g = g._replace(base=start)
    chosen = [(label, read, write) for label, read, write in _arrays(g, fields=False) if _beyond_unit(read(g.base))]
    args = g.base
    for _, read, write in chosen:
        args = write(args, np.rint(2 * read(g.base)).astype(np.int64))
    if chosen:
        yield args, say("integer {names}", names=", ".join(c[0] for c in chosen)), say(
            "Integer inputs give the same numbers as floats of those values: is an array made with the input's "
            "dtype (np.empty_like, np.zeros_like, .astype(x.dtype)) or is an integer array changed in place (/=)? "
            "Fix: compute into a new float array (the expression itself)"), True


def other_order(g):
    """The arrays of two axes or more with the same values in column-major (Fortran) memory order."""
    args, changed = g.base, []
    for label, read, write in _arrays(g, "fiub", fields=False):
        if read(g.base).ndim >= 2:
            args, changed = write(args, np.asfortranarray(read(g.base))), changed + [label]
    if changed:
        yield args, say("{names} in column-major memory order", names=", ".join(changed)), say(
            "The same values stored with other strides give other numbers: are strides or flat offsets computed by "
            "hand (np.lib.stride_tricks.as_strided, x.data)? Fix: index, reshape and transpose the array itself"), False


def negated(g):
    """Each float array that is not probabilities negated."""
    for label, read, write in _arrays(g, fields=False):
        if _beyond_unit(read(g.base)) and np.isfinite(read(g.base)).all():  # -(-inf) is an input no case holds
            yield write(g.base, -read(g.base)), say("{name} negated", name=label), say(
                "Negative numbers are ordinary values here: is a sign assumed (the largest value where the largest "
                "magnitude belongs, M.max() for np.abs(M).max(); a 1 for one entry whatever its sign)? Fix: use "
                "magnitudes (np.abs) where a size is meant"), False


def large(g):
    """The first float array that is not probabilities LARGE times larger, then SMALL times (each factor in turn)."""
    hint = say("Values this large or this small: is exp taken of unshifted values, or shifted by one max for all "
               "rows (it overflows, or a row underflows to 0 / 0), a finite number standing in for -inf (-1e4, -1e9), "
               "a square taken by hand, a narrow dtype (float16, float32), or a constant (an eps, a clip, a rounding) "
               "that matters at this scale? Fix: subtract each row's own max before exp, mask with -inf, "
               "np.linalg.norm, stay in the inputs' dtype")
    for label, read, write in _arrays(g, fields=False)[:1]:
        if _beyond_unit(read(g.base)):
            for k in LARGE + SMALL:
                said = f"{k:g}".replace("e-0", "e-")
                yield write(g.base, read(g.base) * k), say("{name} × {k}", name=label, k=said), hint, False, k < 1


def masks(g):
    """Each boolean array all True, all False, reversed along its last axis, and with its first row all False."""
    hint = say("Every mask pattern is valid here (nothing blocked, everything blocked, padding on the left, a row "
               "with no key): is a mask turned into lengths, skipped when it blocks nothing, or a fully blocked row "
               "given something other than zeros? Fix: apply the mask as it is, for every pattern")
    for label, read, write in _arrays(g, "b", fields=False):
        v = read(g.base)
        yield write(g.base, np.ones_like(v)), say("{name} all True", name=label), hint, False
        yield write(g.base, np.zeros_like(v)), say("{name} all False", name=label), hint, False
        yield write(g.base, np.ascontiguousarray(v[..., ::-1])), say("{name} reversed along its last axis",
                                                                     name=label), hint, False
        if v.ndim >= 2:
            row = v.copy()
            row[..., 0, :] = False
            yield write(g.base, row), say("{name} with its first row all False", name=label), hint, False


def integers(g):
    """The integer arrays (ids, positions, tokens) all one value, shifted by SHIFT, times WRAP, and negated (where
    only wrong values refuse: a function may refuse negative ids)."""
    chosen = _arrays(g, "iu", fields=False)
    if not chosen:
        return
    names = ", ".join(c[0] for c in chosen)
    wide = _wide_hint()
    for what, change, hint, lenient in (
            (say("{names} all one value", names=names), lambda v: np.full_like(v, v.flat[0]), say(
                "One value repeated is a valid input (one document, one token): does a shortcut for it leave out "
                "part of the rule (the causal part)? Fix: one code path for every input"), False),
            (say("{names} + {k}", names=names, k=SHIFT), lambda v: v + SHIFT, wide, False),
            (say("{names} × {k}", names=names, k=WRAP), lambda v: v * WRAP, wide, False),
            (say("{names} negated", names=names), lambda v: -v, say(  # lenient: a function may refuse negative ids
                "Negative integers where the reference takes them (a position before 0): does an index into a table "
                "(table[positions]) count them from the end? Fix: compute from the values themselves"), True)):
        args = g.base
        for _, read, write in chosen:
            args = write(args, change(read(g.base)))
        yield args, what, hint, lenient


def leading_axis(g):
    """A leading axis of 2 on every array whose shape line starts with "..." and whose number of axes the cases
    vary (so the exercise takes any): the case and its reverse stacked."""
    from .derive import shape_line
    dims_of, _ = shape_line(g.reference)
    args, changed = g.base, []
    for i, (name, v) in enumerate(zip(_names(g), g.base)):
        ndims = {np.ndim(c[i]) for c in g.cases if i < len(c) and isinstance(c[i], np.ndarray)}
        if isinstance(v, np.ndarray) and dims_of.get(name, [""])[0] == "..." and len(ndims) > 1:
            args, changed = _put(args, i, np.stack([v, v[..., ::-1]])), changed + [name]
    if changed:
        yield args, say("a leading axis of 2 on {names}", names=", ".join(changed)), say(
            "The shape line's \"...\" is any number of leading axes: is an axis counted from the front (axis=1, "
            "x.shape[2]) where it is counted from the end (axis=-1, x.shape[-1]), or the input reshaped to fixed axes "
            "(reshape(-1, T, d)) and the result not reshaped back? Fix: count the axes from the end, or reshape back "
            "to x.shape[:-2]"), False


def twins(g):
    """Each array the same array as each earlier one of its shape in the base case (W_v as W_k: tied weights;
    grad_V as grad_K)."""
    arrays = _arrays(g)
    for j, (b, read_b, write_b) in enumerate(arrays):
        for a, read_a, _ in arrays[:j]:
            if read_a(g.base).shape == read_b(g.base).shape:
                yield write_b(g.base, read_a(g.base)), say("{b} the same array as {a}", a=a, b=b), say(
                    "Two arguments may be one array (tied weights) or equal: does an identity or equality test (W_k "
                    "is W_v) take a shortcut? Fix: one code path, each argument used as itself"), False


def rectangular(g):
    """Each square float matrix argument (a weight, n × n in every case, not square by its shape line) made n × 2n,
    its columns repeated reversed: a width read from the input where the matrix's own output width belongs shows."""
    from .derive import shape_line
    dims_of, _ = shape_line(g.reference)
    for i, (name, v) in enumerate(zip(_names(g), g.base)):
        dims = dims_of.get(name, [])
        if len(dims) == 2 and dims[0] == dims[1]:
            continue  # square by its shape line: W_q (d_model, d_model)
        if isinstance(v, np.ndarray) and v.ndim == 2 and v.dtype.kind == "f" and v.shape[0] == v.shape[1] > 1 and all(
                np.ndim(c[i]) == 2 and np.shape(c[i])[0] == np.shape(c[i])[1] for c in g.cases if len(c) == len(g.base)):
            yield _put(g.base, i, np.concatenate([v, v[:, ::-1]], axis=1)), say(
                "{name} not square ({n} × {m})", name=name, n=v.shape[0], m=2 * v.shape[0]), say(
                "A matrix that is not square gives other numbers: is a width read from the input (X.shape[-1]) where "
                "the matrix's own (W.shape[1]) belongs, or the matrix transposed somewhere? Fix: take each size "
                "from the array it belongs to"), False


def flags(g):
    """Each flag given as numpy's bool (np.True_, np.False_): a truth value that is not the object True."""
    for i, (name, v) in enumerate(zip(_names(g), g.base)):
        if isinstance(v, bool):
            yield _put(g.base, i, np.bool_(v)), say("{name} as np.{value}_", name=name, value=v), say(
                "A flag may be numpy's bool (a comparison's result): is it tested with `is True` or `== True` "
                "against a type? Fix: if {name}:", name=name), False


def each_longer(g):
    """Each size of the shape line made longer (max(64, 4 n), the axis's entries repeated): a window, a table or a
    buffer of fixed length runs out."""
    from .derive import shape_line
    dims_of, _ = shape_line(g.reference)
    for symbol in dict.fromkeys(d for dims in dims_of.values() for d in dims if d.isidentifier()):
        args, n = g.base, None
        for i, (name, v) in enumerate(zip(_names(g), g.base)):
            dims = [d for d in dims_of.get(name, []) if d != "..."]
            if isinstance(v, np.ndarray) and 0 < len(dims) <= v.ndim and symbol in dims:
                for j, d in enumerate(dims):
                    if d == symbol and v.shape[v.ndim - len(dims) + j]:
                        axis = v.ndim - len(dims) + j
                        n = max(64, 4 * v.shape[axis])
                        v = np.take(v, np.arange(n) % v.shape[axis], axis=axis)
                args = _put(args, i, v)
        if n is not None:
            yield args, say("{symbol} = {n} (the entries repeated)", symbol=symbol, n=n), say(
                "A longer input gives other numbers: is a window, a table or a buffer of fixed length (a sliding "
                "window of 512, max_len = 5000, a float16 position) standing where the whole length belongs? Fix: "
                "compute for the length given"), False


def strings(g):
    """Each string argument as an equal string built at run time (another object than the literal)."""
    for i, (name, v) in enumerate(zip(_names(g), g.base)):
        if isinstance(v, str) and v:
            yield _put(g.base, i, "".join(list(v))), say("{name} built at run time", name=name), say(
                "An equal string that is another object: is it compared with `is`? Fix: compare strings with =="), False


def _wide_hint() -> str:
    return say("Integers this large: does a narrow dtype (int8, int16, float16) wrap or round, or a table of a fixed "
               "length (max_len = 5000) run out? Fix: keep the inputs' integers and compute for the lengths asked")


def lengths(g):
    """Each whole-number argument made LONGER (past a table of 512, int8's 127, float16's 2048) and SHIFT larger (a
    length, a step, an offset), each where the result stays small."""
    for i, (name, v) in enumerate(zip(_names(g), g.base)):
        fits = _fits(g, i) if whole(v) and v >= 0 else None
        for n in [n for n in LONGER if n > v] + [v + SHIFT] if fits else []:
            if fits(n):
                yield _put(g.base, i, n), say("{name} = {n}", name=name, n=n), _wide_hint(), False


def _fits(g, i):
    """A test of a value for argument i: the result there holds at most MAX_SIZE numbers, judged from its growth
    from base[i] + 1 to base[i] + 2 (None where the reference refuses those)."""
    def size(args):
        value = valid(g.reference, args)
        return None if value is INVALID else sum(np.asarray(v).size for v in (
            value if isinstance(value, tuple) else (value,)) if isinstance(v, (np.ndarray, np.number, int, float)))
    v = g.base[i]
    n1, n2 = size(_put(g.base, i, v + 1)), size(_put(g.base, i, v + 2))
    if not n1 or not n2:
        return None
    if n2 <= n1:
        return lambda target: True  # the result does not grow with it (a step t, a count)
    power = np.log(n2 / n1) / np.log((v + 2) / (v + 1))
    return lambda target: n1 * ((target + 1) / (v + 1)) ** power <= MAX_SIZE


def huge(g):
    """For a function that returns numbers: every whole-number size HUGE times larger (each factor in turn), and
    each one alone; only a wrong number refuses (a function may refuse sizes this large)."""
    value = valid(g.reference, g.base)
    numbers = value if isinstance(value, tuple) else (value,)
    if not (all(isinstance(v, (int, float, np.number)) for v in numbers) and any(whole(v) for v in g.base)):
        return
    hint = say("Numbers this large: fixed-width integers (np.prod, np.square, an int64 or int32 array) overflow, and a "
               "float division (int(a / b), np.ceil(a / b)) rounds past 2**53. Fix: Python ints with // (exact at "
               "any size)")
    for k in HUGE:
        said = f"(10**{len(str(k)) - 1} + 1)"
        yield tuple(v * k if whole(v) else v for v in g.base), say("every size × {k}", k=said), hint, True
        for i, (name, v) in enumerate(zip(_names(g), g.base)):
            if whole(v):
                yield _put(g.base, i, v * k), say("{name} × {k}", name=name, k=said), hint, True


BUILDERS = (each_at_one, each_quotient_at_one, each_alone, zeros, integer, other_order, negated, large, masks,
            integers, leading_axis, twins, rectangular, flags, strings, each_longer, lengths, huge)

protect(globals())
