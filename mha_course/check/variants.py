"""The reference run on arguments changed the way a learner's slip changes them.

Each :class:`Variant` is the exercise's reference called on transformed arguments; the diagnosis
(:mod:`.derive`) names one when it gives the learner's outcome on every case. The families:

- an array argument in reverse order along one of its axes ("reversed-input");
- two array arguments swapped, or one used where the other belongs ("swapped-inputs",
  "replaced-input": the queries taken from the context);
- a square matrix argument, or a matrix field of a parameters argument, transposed
  ("transposed-input"); a field used where another belongs (W_q for W_k: "replaced-input");
- a whole-number argument one more, one less (also modulo another whole-number argument: head
  i + 1 of h), twice or half ("argument-changed");
- a flag (a bool argument) read the other way round, or ignored: always True or always False
  ("flag-inverted", "flag-ignored");
- a number argument ignored: one value (its default, one the cases use, 1 or 2 for a whole number)
  on every case, as when an example's value is written into the code ("argument-ignored");
- a float array argument, or two of one width together (Q and K), scaled before use by 1/sqrt(d),
  sqrt(d), 1/d or d of their last axis, or by 2 or 1/2 ("scaled-input");
- a float array argument added to the result, as a residual connection would ("input-added");
- the first item of an argument's batch axis used for every item (keep[0] for the whole batch: "first-item");
- a float array argument ignored, as if it were all ones (the incoming gradient dropped: "input-ones").

>>> import numpy as np
>>> ref = lambda x, i: x[i]
>>> vs = variants(ref, [(np.arange(4.0), 1)], ["x", "i"], {})
>>> [(v.key, v.slots.get("change", "")) for v in vs if v.key == "argument-changed"][:2]
[('argument-changed', '+ 1'), ('argument-changed', '- 1')]
"""
from __future__ import annotations

import inspect
from itertools import combinations, permutations
from typing import NamedTuple

from .sandbox import np, protect

__all__ = ["Variant", "variants", "MOST"]

MOST = 160  # the most variants of one exercise (each costs one run of the reference per case)
WORDS = {"T": "query", "S": "key", "B": "batch", "h": "head", "d_k": "feature", "d_v": "feature",
         "d_model": "feature", "D": "feature", "n": "row", "m": "column"}


class Variant(NamedTuple):
    """The reference run on transformed arguments (kept on the exercise, so its outcomes are memoised)."""
    fn: object
    key: str
    slots: dict


def variants(reference, args, names, dims_of) -> list:
    """Every Variant of ``reference`` for the cases' argument tuples ``args`` (at most :data:`MOST`).

    ``names``: the argument names; ``dims_of``: {argument: its docstring dims} ("T", "d_k", ...).
    """
    out = (_flips(reference, args, names, dims_of) + _pairs(reference, args, names)
           + _transposed(reference, args, names) + _fields(reference, args, names) + _negated(reference, args, names)
           + _swapped_ints(reference, args, names)
           + _ints(reference, args, names)
           + _flags(reference, args, names) + _ignored(reference, args, names) + _size_from_array(reference, args, names)
           + _scaled_inputs(reference, args, names, dims_of)
           + _residual(reference, args, names) + _first_item(reference, args, names, dims_of)
           + _end_left_out(reference, args, names)
           + _ones(reference, args, names) + _batch_merged(reference, args, names))
    return out[:MOST]


def _batch_merged(reference, args, names) -> list:
    """Every array argument flattened to 2-D (x.reshape(-1, d)): the batch items read as one long sequence, so each
    query sees every item's keys; where every argument is a float array of the same leading axes."""
    n = min(len(a) for a in args)
    if not all(all(isinstance(a[j], np.ndarray) and a[j].dtype.kind == "f" and a[j].ndim >= 2 for j in range(n))
               and len({a[j].shape[:-2] for j in range(n)}) == 1 for a in args) or \
            not any(int(np.prod(a[0].shape[:-2])) > 1 for a in args):
        return []

    def merged(*a):
        lead = a[0].shape[:-1]
        out = reference(*(x.reshape(-1, x.shape[-1]) for x in a))
        if not isinstance(out, np.ndarray) or out.size % max(int(np.prod(lead)), 1):
            return _NO_RESULT  # a tuple, or a size that does not fold back: this variant gives nothing to compare
        return out.reshape(*lead, -1)
    return [Variant(merged, "batch-merged", {"args": ", ".join(names[:n])})]


_NO_RESULT = object()  # a variant's result that matches no learner's (not an error: an error could match one)


def _at(a, j, value):
    return (*a[:j], value, *a[j + 1:])


def _flips(reference, args, names, dims_of) -> list:
    out = []
    for j, name in enumerate(names):
        if not all(j < len(a) and isinstance(a[j], np.ndarray) and a[j].ndim >= 1 for a in args):
            continue
        k = min(a[j].ndim for a in args)
        dims = [d for d in dims_of.get(name, []) if d != "..."][-k:]
        labels = ([f"{WORDS[d]} ({d})" if d in WORDS else d for d in dims] if len(dims) == k
                  else [f"axis {i}" for i in range(-k, 0)])
        for ax, label in zip(range(-k, 0), labels):
            def fn(*a, _j=j, _ax=ax):
                return reference(*_at(a, _j, np.flip(a[_j], _ax)))
            out.append(Variant(fn, "reversed-input", {"arg": name, "axis": label}))
    return out[:16]


def swappable(u, v) -> bool:
    """Two array arguments a learner could use one for the other (same number of axes and last axis)."""
    return (isinstance(u, np.ndarray) and isinstance(v, np.ndarray) and u.ndim == v.ndim >= 1
            and u.shape[-1] == v.shape[-1] and u is not v)


def _pairs(reference, args, names) -> list:
    """Two array arguments swapped; one used where the other belongs (each way)."""
    out = []
    for (i, a), (j, b) in combinations(list(enumerate(names)), 2):
        if not any(i < len(x) and j < len(x) and swappable(x[i], x[j]) for x in args):
            continue

        def swapped(*x, _i=i, _j=j):
            x = list(x)
            if _j < len(x) and swappable(x[_i], x[_j]):
                x[_i], x[_j] = x[_j], x[_i]
            return reference(*x)
        out.append(Variant(swapped, "swapped-inputs", {"a": a, "b": b}))
        for (p, arg), (q, used) in (((i, a), (j, b)), ((j, b), (i, a))):
            def replaced(*x, _p=p, _q=q):
                return reference(*_at(x, _p, x[_q])) if _q < len(x) and swappable(x[_p], x[_q]) else reference(*x)
            out.append(Variant(replaced, "replaced-input", {"arg": arg, "used": used}))
    return out[:16]


def _square(v) -> bool:
    return isinstance(v, np.ndarray) and v.ndim >= 2 and v.shape[-1] == v.shape[-2] > 1


def _transposed(reference, args, names) -> list:
    out = []
    for j, name in enumerate(names):
        if all(j < len(a) and _square(a[j]) for a in args):
            def fn(*a, _j=j):
                return reference(*_at(a, _j, np.swapaxes(a[_j], -1, -2)))
            out.append(Variant(fn, "transposed-input", {"arg": name}))
    square = [j for j, _ in enumerate(names) if all(j < len(a) and _square(a[j]) for a in args)]
    if len(square) > 1:  # every weight matrix used transposed: a belief, not a slip
        def every(*a, _js=tuple(square)):
            for j in _js:
                a = _at(a, j, np.swapaxes(a[j], -1, -2))
            return reference(*a)
        out.append(Variant(every, "transposed-input", {"arg": " and ".join(names[j] for j in square)}))
    return out + _reshaped(reference, args, names)


def _reshaped(reference, args, names) -> list:
    """A matrix argument "transposed" with a reshape to the transposed shape (B.reshape(M, K) for B.T): the
    reference on B' with B'.T = B.reshape(M, K); one of them, or every matrix argument at once."""
    mats = [j for j, _ in enumerate(names) if all(j < len(a) and isinstance(a[j], np.ndarray) and a[j].ndim == 2
                                                  and a[j].dtype.kind == "f" for a in args)
            and not all(_square(a[j]) for a in args)]  # a square matrix reshaped is itself: "transposed-input"

    def reread(m):
        return m.reshape(m.shape[::-1]).T
    out = []
    for group in [(j,) for j in mats] + ([tuple(mats)] if len(mats) > 1 else []):
        def fn(*a, _g=group):
            for j in _g:
                a = _at(a, j, reread(a[j]))
            return reference(*a)
        out.append(Variant(fn, "reshaped-input", {"arg": " and ".join(names[j] for j in group),
                                                  "code": ", ".join(f"{names[j]}.reshape(n, m)" for j in group)}))
    return out


def _array_fields(v) -> list:
    fields = getattr(type(v), "_fields", None)
    return [f for f in fields or () if isinstance(getattr(v, f), np.ndarray)] if hasattr(v, "_replace") else []


def _fields(reference, args, names) -> list:
    """A parameters argument (a NamedTuple: MHAParams) with one matrix transposed, or one matrix
    (or bias) used where another of the same shape belongs."""
    out = []
    for j, name in enumerate(names):
        if not all(j < len(a) and _array_fields(a[j]) for a in args):
            continue
        first = args[0][j]
        fields = _array_fields(first)
        out += _biases_dropped(reference, args, j, name) + _projection_dropped(reference, args, j, name)
        for f in fields:
            if _square(getattr(first, f)):
                def fn(*a, _j=j, _f=f):
                    p = a[_j]
                    return reference(*_at(a, _j, p._replace(**{_f: np.swapaxes(getattr(p, _f), -1, -2)})))
                out.append(Variant(fn, "transposed-input", {"arg": f"{name}.{f}"}))
        for f, g in permutations(fields, 2):
            if getattr(first, f).shape == getattr(first, g).shape:  # (the biases of a case that has them, below)
                out += _field_pair(reference, j, name, f, g)
    return out[:32] + _bias_pairs(reference, args, names)[:16]


def _field_pair(reference, j, name, f, g) -> list:
    """Field ``g`` of argument ``j`` used where ``f`` belongs; and, once per pair, the two in each other's place."""
    def used(*a):
        p = a[j]
        return reference(*_at(a, j, p._replace(**{f: getattr(p, g)})))

    def both(*a):
        p = a[j]
        return reference(*_at(a, j, p._replace(**{f: getattr(p, g), g: getattr(p, f)})))
    return [Variant(used, "replaced-input", {"arg": f"{name}.{f}", "used": f"{name}.{g}"})] + (
        [Variant(both, "swapped-inputs", {"a": f"{name}.{f}", "b": f"{name}.{g}"})] if f < g else [])


def _bias_pairs(reference, args, names) -> list:
    """The biases of a parameters argument where only some cases have them: one used for another, or two swapped
    (b_k added to V, or b_k and b_v in each other's place)."""
    out = []
    for j, name in enumerate(names):
        have = [a[j] for a in args if j < len(a) and _array_fields(a[j])]
        if len(have) != len(args) or all(_array_fields(v) == _array_fields(have[0]) for v in have):
            continue  # every case has the same fields: _fields has them all
        full = max(have, key=lambda v: len(_array_fields(v)))
        extra = [f for f in _array_fields(full) if f not in _array_fields(have[0])]
        for f, g in permutations(extra, 2):
            if getattr(full, f).shape == getattr(full, g).shape:
                out += _field_pair(reference, j, name, f, g)
    return out


def _biases_dropped(reference, args, j, name) -> list:
    """The biases of a parameters argument never added: all of them, or each one (b_q), where a case has them."""
    biases = list(dict.fromkeys(f for a in args for f in _array_fields(a[j]) if f.startswith("b_")
                                and np.ndim(getattr(a[j], f)) == 1))
    out = []
    for group in ([biases] if len(biases) > 1 else []) + [[b] for b in biases]:
        def fn(*a, _j=j, _g=tuple(group)):
            return reference(*_at(a, _j, a[_j]._replace(**{f: None for f in _g})))
        said = f"{name}.{group[0]}" if len(group) == 1 else f"the biases of {name} ({', '.join(group)})"
        out.append(Variant(fn, "bias-dropped", {"which": said}))
    return out


def _projection_dropped(reference, args, j, name) -> list:
    """A square matrix of a parameters argument (W_o) never applied: the identity in its place, and its bias
    (b_o) left out with it."""
    first, out = args[0][j], []
    for f in _array_fields(first):
        if f.startswith("W") and _square(getattr(first, f)):
            bias = "b" + f[1:]
            for keep in (False, True):  # the bias left out with it, or still added (concat + b_o)
                def fn(*a, _j=j, _f=f, _b=bias, _keep=keep):
                    p = a[_j]
                    change = {_f: np.eye(getattr(p, _f).shape[-1])} | (
                        {_b: None} if _b in p._fields and not _keep else {})
                    return reference(*_at(a, _j, p._replace(**change)))
                said = {"which": f"{name}.{f}", "bias": f"{name}.{bias}"}
                out.append(Variant(fn, "projection-dropped-bias-kept" if keep else "projection-dropped", said))
    return out


def _whole(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _negated(reference, args, names) -> list:
    """A float array argument, or a parameters field (a bias b_q), with its sign flipped: the result
    of subtracting a term that is added (x @ W_q - b_q), or of a minus sign on an input."""
    out = []
    for j, name in enumerate(names):
        if all(j < len(a) and isinstance(a[j], np.ndarray) and a[j].dtype.kind == "f" for a in args):
            def fn(*a, _j=j):
                return reference(*_at(a, _j, -a[_j]))
            out.append(Variant(fn, "negated-input", {"arg": name}))
        elif all(j < len(a) and hasattr(a[j], "_replace") for a in args):
            fields = list(dict.fromkeys(f for a in args for f in _array_fields(a[j])))
            biases = [f for f in fields if all(getattr(a[j], f, None) is None or np.ndim(getattr(a[j], f)) == 1
                                               for a in args)]
            groups = [[f] for f in fields] + ([biases] if len(biases) > 1 else [])
            for group in groups:
                def fn(*a, _j=j, _g=tuple(group)):
                    p = a[_j]
                    return reference(*_at(a, _j, p._replace(**{f: -getattr(p, f) for f in _g
                                                               if getattr(p, f, None) is not None})))
                said = (f"{name}.{group[0]}" if len(group) == 1
                        else f"the biases of {name} ({', '.join(group)})")
                out.append(Variant(fn, "negated-input", {"arg": said}))
    return out[:12]


def _swapped_ints(reference, args, names) -> list:
    """Two whole-number arguments swapped (i and t, T and h), or two real ones (b1 and b2, lr and eps),
    where some case tells them apart."""
    n = min(len(a) for a in args)
    ints = [j for j in range(n) if all(_whole(a[j]) for a in args)]
    reals = [j for j in range(n) if all(isinstance(a[j], (float, np.floating)) for a in args)]
    out = []
    for j, k in list(combinations(ints, 2)) + list(combinations(reals, 2)):
        if any(a[j] != a[k] for a in args):
            def fn(*a, _j=j, _k=k):
                return reference(*_at(_at(a, _j, a[_k]), _k, a[_j]))
            out.append(Variant(fn, "swapped-inputs", {"a": names[j], "b": names[k]}))
    return out[:6]


def _ints(reference, args, names) -> list:
    """A whole-number argument + 1, - 1 (also modulo another: head (i + 1) % h), * 2 and // 2."""
    out = []
    n = min(len(a) for a in args)
    ints = [j for j in range(n) if all(_whole(a[j]) for a in args)]
    for j in ints:
        for change, f in (("+ 1", lambda v: v + 1), ("- 1", lambda v: v - 1), ("* 2", lambda v: 2 * v),
                          ("/ 2", lambda v: v // 2)):
            def fn(*a, _j=j, _f=f):
                return reference(*_at(a, _j, type(a[_j])(_f(a[_j]))))
            out.append(Variant(fn, "argument-changed", {"arg": names[j], "change": change}))
        for k in ints:
            if k != j and any(a[j] != a[k] for a in args):  # one whole number used for another: h for h_kv
                def fn(*a, _j=j, _k=k):
                    return reference(*_at(a, _j, a[_k]))
                out.append(Variant(fn, "replaced-input", {"arg": names[j], "used": names[k]}))
            if k != j and all(a[j] < a[k] for a in args):
                for change, d in (("+ 1", 1), ("- 1", -1)):
                    def fn(*a, _j=j, _k=k, _d=d):
                        return reference(*_at(a, _j, type(a[_j])((a[_j] + _d) % a[_k])))
                    out.append(Variant(fn, "argument-changed",
                                       {"arg": names[j], "change": f"{change} (modulo {names[k]})"}))
    for j in range(n):  # a positive real argument (a base, a factor) doubled or halved; a base read as e or 10
        if all(isinstance(a[j], (float, np.floating)) and a[j] > 0 for a in args):
            for change, f in (("* 2", lambda v: 2 * v), ("/ 2", lambda v: v / 2)):
                def fn(*a, _j=j, _f=f):
                    return reference(*_at(a, _j, type(a[_j])(_f(a[_j]))))
                out.append(Variant(fn, "argument-changed", {"arg": names[j], "change": change}))
            for used, value in (("e (np.exp or np.log)", np.e), ("10 (np.log10)", 10.0)):
                if all(a[j] != value for a in args):
                    def fn(*a, _j=j, _v=value):
                        return reference(*_at(a, _j, type(a[_j])(_v)))
                    out.append(Variant(fn, "replaced-input", {"arg": names[j], "used": used}))
    return out[:28]


def _flags(reference, args, names) -> list:
    """A bool argument negated, or replaced by True or by False in every case (when the cases vary it)."""
    out = []
    n = min(len(a) for a in args)
    for j in range(n):
        if not all(isinstance(a[j], (bool, np.bool_)) for a in args):
            continue
        def inverted(*a, _j=j):
            return reference(*_at(a, _j, not a[_j]))
        out.append(Variant(inverted, "flag-inverted", {"arg": names[j], "other": "not " + names[j]}))
        for value in (True, False):
            if any(bool(a[j]) != value for a in args):
                def fixed(*a, _j=j, _v=value):
                    return reference(*_at(a, _j, _v))
                out.append(Variant(fixed, "flag-ignored", {"arg": names[j], "value": value}))
    return out



# values a learner writes in from an example or another library's defaults (RoPE's base, Adam's betas and eps, ...)
_COMMON_REAL = (10000.0, 500000.0, 1e-5, 1e-6, 1e-8, 1e-12, 0.9, 0.99, 0.999, 0.1, 0.01, 1.0, 2.0, 4.0, 8.0)
_COMMON_WHOLE = (4, 8, 16, 32, 64, 128, 512, 1024)


def _ignored(reference, args, names) -> list:
    """A number argument (not a flag) replaced by one value on every case, where the cases vary it: its
    default in the reference's signature (or, for a whole number, twice or half of it), a value the cases
    give it, 1 or 2 for a whole number, or a value often written in (_COMMON_REAL, _COMMON_WHOLE)."""
    try:
        defaults = {k: p.default for k, p in inspect.signature(reference).parameters.items()}
    except (TypeError, ValueError):
        defaults = {}
    out = []
    for j, name in enumerate(names):  # an argument a case leaves out has its default there
        default = defaults.get(name, inspect.Parameter.empty)
        seen = [a[j] if j < len(a) else default for a in args]
        whole = all(_whole(v) for v in seen)
        if not (whole or all(isinstance(v, (float, np.floating)) for v in seen)) or len(set(seen)) < 2:
            continue
        values = [default] if default in seen else []
        values += [v for d in values if whole and d > 1 for v in (2 * d, d // 2)]  # 8 bytes for the default 4
        values = [(0, v) for v in values] + [(1, v) for v in ([1, 2] if whole else [])] + [
            (2, v) for v in list(dict.fromkeys(seen))[:4]] + [(3, v) for v in (_COMMON_WHOLE if whole else _COMMON_REAL)]
        firsts = {}
        for rank, value in values:
            firsts.setdefault(value, rank)  # each value once, at its first (highest) rank
        for k, (value, rank) in enumerate(firsts.items()):
            def fixed(*a, _j=j, _v=value, _pad=tuple(defaults.get(m) for m in names)):
                a = (*a, *_pad[len(a):_j + 1])  # the arguments a case leaves out, each at its own default
                return reference(*_at(a, _j, type(a[_j])(_v)))
            out.append(((rank, k), Variant(fixed, "argument-ignored", {"arg": name, "value": value})))
    # a default, its double or half, 1 or 2 first; then each argument's values in turn
    return [v for _, v in sorted(out, key=lambda rv: rv[0])][:64]



def _size_from_array(reference, args, names) -> list:
    """A whole-number argument replaced by an axis length of an array argument (``d_k`` read as
    ``grad.shape[-1]``), where the two differ on some case."""
    n = min(len(a) for a in args)
    ints = [j for j in range(n) if all(_whole(a[j]) for a in args)]
    arrays = [i for i in range(n) if all(isinstance(a[i], np.ndarray) and a[i].ndim for a in args)]
    out = []
    for j in ints:
        for i in arrays:
            for k in range(min(a[i].ndim for a in args)):
                axis = k if k < min(a[i].ndim for a in args) - 1 else -1
                if all(a[i].shape[axis] == a[j] for a in args) or not all(a[i].shape[axis] >= 1 for a in args):
                    continue

                def read(*a, _j=j, _i=i, _ax=axis):
                    return reference(*_at(a, _j, type(a[_j])(a[_i].shape[_ax])))
                out.append(Variant(read, "size-from-array", {"arg": names[j], "source": f"{names[i]}.shape[{axis}]"}))
    return out[:16]


_INPUT_FACTORS = (("1/√{n}", lambda n: n ** -0.5), ("√{n}", lambda n: n ** 0.5), ("1/{n}", lambda n: 1.0 / n),
                  ("{n}", lambda n: float(n)), ("2", lambda n: 2.0), ("1/2", lambda n: 0.5))


def _scaled_inputs(reference, args, names, dims_of=None) -> list:
    """Float array arguments multiplied by a factor before use: one of them, or every one of a width (Q and K
    of width d_k), by 1/sqrt(d), sqrt(d), 1/d, d (d its last axis) or 2 or 1/2."""
    n = min(len(a) for a in args)
    floats = [j for j in range(n) if all(isinstance(a[j], np.ndarray) and a[j].dtype.kind == "f" and a[j].ndim
                                         for a in args)]
    groups = sorted({tuple(k for k in floats if all(a[k].shape[-1] == a[j].shape[-1] for a in args))
                     for j in floats if len(floats) > 1} - {(j,) for j in floats}) + [(j,) for j in floats]
    out = []
    for group in groups:
        dims = [d for d in (dims_of or {}).get(names[group[0]], []) if d != "..."]
        width = dims[-1] if dims else f"{names[group[0]]}.shape[-1]"  # d_k, from the docstring's shape line
        for said, f in _INPUT_FACTORS:
            def fn(*a, _g=group, _f=f):
                for k in _g:
                    a = _at(a, k, a[k] * _f(a[k].shape[-1]))
                return reference(*a)
            out.append(Variant(fn, "scaled-input", {"args": " and ".join(names[k] for k in group),
                                                    "factor": said.format(n=width)}))
    return out[:24] + _scaled_by_other(reference, args, names, floats, dims_of)[:8]


def _scaled_by_other(reference, args, names, floats, dims_of) -> list:
    """One float array multiplied by 1/sqrt(d) or 1/d with d the last axis of *another* array argument (the
    scores divided by sqrt(d_v)), where the two widths differ on some case."""
    out = []
    for j in floats:
        for o in floats:
            if o == j or all(a[o].shape[-1] == a[j].shape[-1] for a in args):
                continue
            dims = [d for d in (dims_of or {}).get(names[o], []) if d != "..."]
            width = dims[-1] if dims else f"{names[o]}.shape[-1]"
            for said, f in _INPUT_FACTORS[:3:2]:  # 1/sqrt(d) and 1/d
                def fn(*a, _j=j, _o=o, _f=f):
                    return reference(*_at(a, _j, a[_j] * _f(a[_o].shape[-1])))
                out.append(Variant(fn, "scaled-input", {"args": names[j], "factor": said.format(n=width)}))
    return out



def _residual(reference, args, names) -> list:
    """The result plus a float array argument of the same shape (x + f(x): a residual the exercise lacks)."""
    n = min(len(a) for a in args)
    out = []
    for j in range(n):
        if all(isinstance(a[j], np.ndarray) and a[j].dtype.kind == "f" for a in args):
            def fn(*a, _j=j):
                y = reference(*a)
                if not isinstance(y, np.ndarray) or y.shape != a[_j].shape:
                    raise ValueError("not the shape of the result")
                return y + a[_j]
            out.append(Variant(fn, "input-added", {"arg": names[j]}))
    return out[:4]



def _first_item(reference, args, names, dims_of=None) -> list:
    """An array argument whose first axis is the batch (B in its docstring shape, or the first of two or more
    axes of a mask or token array) with its first item in every place of that axis."""
    n = min(len(a) for a in args)
    out = []
    for j in range(n):
        dims = [d for d in (dims_of or {}).get(names[j], []) if d != "..."]
        if not all(isinstance(a[j], np.ndarray) and a[j].ndim >= 2 for a in args) or (dims and dims[0] != "B") \
                or not any(a[j].shape[0] > 1 for a in args):
            continue
        def fn(*a, _j=j):
            return reference(*_at(a, _j, np.broadcast_to(a[_j][:1], a[_j].shape).copy()))
        out.append(Variant(fn, "first-item", {"arg": names[j]}))
    return out[:4]



def _end_left_out(reference, args, names) -> list:
    """A float array argument with its last (or first) entry along one axis read as 0: a loop or a sum over that
    axis that stops one early (or starts one late)."""
    n = min(len(a) for a in args)
    out = []
    for j in range(n):
        if not all(isinstance(a[j], np.ndarray) and a[j].dtype.kind == "f" and a[j].ndim for a in args):
            continue
        for ax in range(-min(a[j].ndim for a in args), 0):
            if not any(a[j].shape[ax] >= 3 for a in args):
                continue
            for end, key in ((-1, "last-left-out"), (0, "first-left-out")):
                def fn(*a, _j=j, _ax=ax, _end=end):
                    v = np.array(a[_j], copy=True)
                    np.moveaxis(v, _ax, 0)[_end] = 0.0
                    return reference(*_at(a, _j, v))
                out.append(Variant(fn, key, {"arg": names[j], "axis": str(ax)}))
    return out[:8]


def _ones(reference, args, names) -> list:
    """A float array argument replaced by ones of its shape: it is ignored (a backward that drops the incoming
    gradient computes the numbers of a gradient of ones)."""
    n = min(len(a) for a in args)
    out = []
    for j in range(n):
        if all(isinstance(a[j], np.ndarray) and a[j].dtype.kind == "f" for a in args):
            def fn(*a, _j=j):
                return reference(*_at(a, _j, np.ones_like(a[_j])))
            out.append(Variant(fn, "input-ones", {"arg": names[j]}))
    return out[:4]


protect(globals())
