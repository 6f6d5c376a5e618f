"""Mistakes derived from the exercise itself, for a result that no catalogued mistake explains.

Two families of transformations of the reference are tried, and a member is named only when it
gives the learner's outcome on **every** case that ran (several: all are named):

- of the reference's output, per output: the opposite sign, 1 / it, a factor built from the
  case's sizes (sqrt(d_k), d_k, h, 1/h, T, S, 2, the exercise's own whole-number arguments), a
  swap or a permutation of the named axes, the reverse order or a shift by one along an axis;
- of the reference's code: the mutants of :func:`mha_course.check.mutants.mutants` (another axis,
  a reduction, a constant, a dropped term, the mask after the softmax, its polarity, an
  off-by-one, the first or last occurrence, floor division, ...), tried case by case within a
  time budget and memoised on the exercise.

Each is said with :mod:`.vocabulary`'s sentence, filled with the exercise's symbols. The sizes
and axis names come from the exercise (``sizes=``, ``axes=``) or, by default, from the
reference's docstring shape line (``Q (..., T, d_k), K (..., S, d_k) -> weights (..., T, S)``),
its whole-number arguments by name, and ``d_k = d_model / h``.
"""
from __future__ import annotations

import inspect
import re
from itertools import combinations, permutations
from typing import NamedTuple

from . import vocabulary
from .compare import close, has_nan, nan_free, num, rounding_of, same, same_outcome
from .distributions import normaliser_forms, restricted_forms
from .sandbox import arg_names, np, protect
from .variants import WORDS, variants

CALLS = 1500  # the most mutant runs of one diagnosis (deterministic; later diagnoses reuse the memo)


class Derived(NamedTuple):
    """A mistake derived from the exercise: its vocabulary class, its sentence and its fix."""
    key: str
    text: str
    fix: str


def derive(spec, runs, budget=None) -> list:
    """The derived mistakes that give the learner's outcome on every case that ran ([] if none).

    The output-level ones first (when every differing output has one), else the mutants'.
    """
    if not runs or any(r.got.lines and r.got.error is None for r in runs):
        return []  # a time-out, a broken rule, an argument changed in place: said already
    raised = any(r.got.error is not None for r in runs)  # then only a variant raising the same may fit
    found = ([] if raised else _output_level(spec, runs)) or _input_level(spec, runs)
    if found and all(d.key == "scale" for d in found):  # a factor of sizes, and an argument read for another: both
        found += [d for d in _input_level(spec, runs)  # (a size ignored, stuck at 1, is the factor said already)
                  if d.text not in {f.text for f in found} and d.key != "argument-ignored"]
    if found and all(d.key in _VALUE_FUNCTIONS or d.key == "scale" for d in found):  # and the code's change
        return found + [d for d in _mutant_level(spec, runs, CALLS if budget is None else budget)
                        if d.text not in {f.text for f in found}]
    if found:
        return found
    return _mutant_level(spec, runs, CALLS if budget is None else budget)


_VALUE_FUNCTIONS = frozenset({"squared", "square-root", "exponential", "logarithm", "absolute", "extra-term",
                              "missing-term"})  # what the value became, and the change in the code that makes it


_STRUCTURAL = frozenset({"transpose", "axis-order", "flipped", "shifted", "reversed-input", "swapped-inputs",
                         "flipped-mask", "repeated", "swapped-outputs", "output-for-output", "replaced-input",
                         "transposed-input", "negated-input", "argument-changed", "flag-inverted", "flag-ignored"})


def also_fitting(spec, runs) -> list:
    """The derived mistakes of another structure (a transpose, a reversal, a shift, swapped
    inputs) that give the same numbers as a catalogued mistake that fits: named beside it."""
    if not runs or any(r.got.error is not None or r.got.lines for r in runs):
        return []
    found = _output_level(spec, runs) or _input_level(spec, runs)
    return [d for d in found if d.key in _STRUCTURAL]


# ---------------------------------------------------------------------------------------
# the exercise's symbols: sizes and axis names
# ---------------------------------------------------------------------------------------

_SHAPE = re.compile(r"([A-Za-z_]\w*)\s*\(([^()]*)\)")


def shape_line(reference) -> tuple:
    """({argument: dims}, [(output, dims)]) of the reference docstring's first line."""
    doc = (inspect.getdoc(reference) or "").split("\n")[0]
    left, _, right = doc.partition("->")
    parse = (lambda text: [(n, [d.strip() for d in dims.split(",") if d.strip()])
                           for n, dims in _SHAPE.findall(text)])
    return dict(parse(left)), parse(right)


def case_sizes(spec, args) -> dict:
    """{symbol: size} of one case: the exercise's own (``sizes``), else the docstring's symbols
    bound to the arguments' axes, the whole-number arguments by name, ``d_k = d_model / h``, and
    the last axis of each array argument."""
    if spec.sizes is not None:
        try:
            return {str(k): float(v) for k, v in dict(spec.sizes(*args)).items()}
        except Exception:
            return {}
    out = {}
    dims_of, _ = shape_line(spec.reference)
    for name, v in zip(arg_names(spec.reference, args), args):
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= 1:  # 1 too: h_kv = 1
            out[name] = float(v)
        elif isinstance(v, np.ndarray) and v.ndim >= 1:
            dims = [d for d in dims_of.get(name, []) if d != "..."]
            if 0 < len(dims) <= v.ndim:
                for d, n in zip(dims, v.shape[-len(dims):]):
                    if d.isidentifier() and n > 1:
                        out.setdefault(d, float(n))
            for i, n in enumerate(v.shape):  # every axis' length by name: a.shape[0] (a batch size)
                if n > 1:
                    out.setdefault(f"{name}.shape[{i - v.ndim if i == v.ndim - 1 else i}]", float(n))
        elif hasattr(v, "d_model") and isinstance(getattr(v, "d_model", None), (int, np.integer)):
            out.setdefault("d_model", float(v.d_model))
    if "h" in out and "d_k" not in out:
        width = out.get("d_model") or next((float(v.shape[-1]) for v in args if isinstance(v, np.ndarray)
                                            and v.ndim >= 2 and v.shape[-1] % out["h"] == 0), None)
        if width:
            out["d_k"] = width / out["h"]
    return out


def candidates(sizes) -> dict:
    """Factors a learner's slip produces, by name: n, sqrt(n), 1/n, 1/sqrt(n), n**2, their negatives, 2 and 1/2."""
    out = {"2": 2.0, "1/2": 0.5, "-2": -2.0, "-1/2": -0.5, "8 (bits for bytes?)": 8.0, "1/8 (bytes for bits?)": 0.125,
           "10 (a zero too many?)": 10.0, "1/10 (a zero too few?)": 0.1, "sqrt(2)": 2 ** 0.5, "1/sqrt(2)": 2 ** -0.5,
           "1024 (KiB where bytes are asked?)": 1024.0, "1/1024 (KiB where bytes are asked?)": 1 / 1024,
           "1/1048576 (MiB where bytes are asked?)": 2.0 ** -20}
    for k in (3, 4, 5, 6):  # a count of k equal terms with one left out, or one too many: 3/4 for 3 of 4 matrices
        out[f"{k - 1}/{k} (one of {k} equal terms left out?)"] = (k - 1) / k
        out[f"{k + 1}/{k} (one equal term too many, {k + 1} of them where {k} belong?)"] = (k + 1) / k
    for k, v in sizes.items():
        if v > 0:
            for name, value in ((k, v), (f"sqrt({k})", v ** 0.5), (f"1/{k}", 1 / v), (f"1/sqrt({k})", v ** -0.5),
                                (f"{k}**2", v * v), (f"1/{k}**2", v ** -2.0)):
                out.setdefault(name, value)
                out.setdefault(f"-{name}", -value)
                for c, said in ((2.0, "2·{x}"), (0.5, "{x}/2"), (-2.0, "-2·{x}"), (-0.5, "-{x}/2")):  # a 2 as well
                    out.setdefault(_times(said, name), c * value)
    named = [(k, v) for k, v in sizes.items() if v > 0 and "." not in k][:8]  # products of two symbols: h·d_k
    for (a, u), (b, v) in combinations(named, 2):
        for name, value in ((f"{a}·{b}", u * v), (f"{a}/{b}", u / v), (f"{b}/{a}", v / u), (f"1/({a}·{b})", 1 / (u * v))):
            out.setdefault(name, value)
    return out


def axis_names(spec, output, ndim) -> list:
    """The name of each axis of an output: declared (``axes=``), else the docstring's symbols
    ("query (T)"), else "axis i"/"row"/"column"."""
    declared = tuple((spec.axes or {}).get(output, ()))
    if not declared:
        outs = shape_line(spec.reference)[1]
        dims = dict(outs).get(output) or (outs[0][1] if len(outs) == 1 and output == "result" else [])
        dims = [d for d in dims if d != "..."]
        if dims and all(d.isidentifier() for d in dims):
            declared = tuple(f"{WORDS[d]} ({d})" if d in WORDS else d for d in dims)
    trailing = declared or (("row", "column") if ndim >= 2 else ("entry",))
    trailing = trailing[-ndim:] if ndim else ()
    return [f"axis {i}" for i in range(ndim - len(trailing))] + list(trailing)


# ---------------------------------------------------------------------------------------
# transformations of the reference's output
# ---------------------------------------------------------------------------------------

def _outputs(value, want, outputs) -> list:
    """[(name, got, expected)] for each output (a tuple's, a dict's, or the one result)."""
    if isinstance(want, dict):
        return [(str(k), value.get(k) if isinstance(value, dict) else None, w) for k, w in want.items()]
    if isinstance(want, tuple):
        names = outputs or [f"output {i}" for i in range(len(want))]
        got = value if isinstance(value, (tuple, list)) and len(value) == len(want) else [None] * len(want)
        return list(zip(names, got, want))
    return [("result", value, want)]


def _arrays(g, w):
    try:
        g, w = np.asarray(g), np.asarray(w)
    except Exception:
        return None
    if g.dtype.kind not in "biuf" or w.dtype.kind not in "biuf" or w.size == 0:
        return None
    return num(g), num(w)


def _output_level(spec, runs) -> list:
    per_run = [_outputs(r.got.value, r.want, spec.outputs) for r in runs]
    names = [nm for nm, _, _ in per_run[0]]
    wrong = [j for j in range(len(names)) if not all(
        (p := _arrays(o[j][1], o[j][2])) is not None and close(*p) for o in per_run)]
    crossed = _crossed(per_run, names, wrong) if len(names) > 1 else []
    if crossed:
        return crossed
    given = _an_input(spec, runs, per_run, names, wrong)
    if given:
        return given
    found = []
    for j in wrong:
        pairs = [_arrays(outs[j][1], outs[j][2]) for outs in per_run]
        if any(p is None for p in pairs):
            return []
        raws = [tuple(np.asarray(v) for v in (outs[j][1], outs[j][2])) for outs in per_run]
        fits = _transforms(spec, runs, names[j], pairs, raws)
        if not fits:
            return []
        found.append(fits)
    if len(found) > 1 and all(len(f) == 1 for f in found):  # one mistake in each of several outputs
        return [_together([f[0] for f in found])]
    return [d for f in found for d in f]


def _an_input(spec, runs, per_run, names, wrong) -> list:
    """A wrong output that is one of the arguments, unchanged, on every case (the step not applied)."""
    args = [r.case.args for r in runs]
    arg_list = arg_names(spec.reference, max(args, key=len))
    found = []
    for j in wrong:
        src = [k for k, nm in enumerate(arg_list) if all(
            k < len(a) and isinstance(a[k], np.ndarray) and (p := _arrays(o[j][1], a[k])) is not None and close(*p)
            for a, o in zip(args, per_run))]
        if not src:
            return []
        found.append(Derived("input-returned", vocabulary.sentence("input-returned", output=names[j], arg=arg_list[src[0]]),
                             vocabulary.fix("input-returned", output=names[j], arg=arg_list[src[0]])))
    return [_together(found)] if len(found) > 1 else found


def _crossed(per_run, names, wrong) -> list:
    """Each wrong output holds another output's expected value on every case: two outputs
    swapped, or one output's step used for another (W_q for the keys too)."""
    held = {}
    for j in wrong:
        src = [i for i in range(len(names)) if i != j and all(
            (p := _arrays(o[j][1], o[i][2])) is not None and close(*p) for o in per_run)]
        if not src:
            return []
        held[j] = src[0]
    out, by_source = [], {}
    for j, i in held.items():
        if held.get(i) == j:
            if j < i:
                out.append(("swapped-outputs", {"a": names[j], "b": names[i]}))
        else:
            by_source.setdefault(i, []).append(names[j])
    out += [("output-for-output", {"a": names[i], "b": " and ".join(js)}) for i, js in by_source.items()]
    found = [Derived(k, vocabulary.sentence(k, **sl), vocabulary.fix(k, **sl)) for k, sl in out]
    return [_together(found)] if len(found) > 1 else found


def _together(found) -> Derived:
    """Several outputs' mistakes, all of them at once (not alternatives): one sentence."""
    return Derived(found[0].key, "; and ".join(d.text for d in found), "; ".join(dict.fromkeys(d.fix for d in found)))


def _transforms(spec, runs, output, pairs, raws=None) -> list:
    """Every output-level transformation that maps the expected output to the learner's on every case."""
    all_close = _all_close_over(pairs, runs)
    same_shape = all(g.shape == w.shape for g, w in pairs)
    k = min(w.ndim for _, w in pairs)  # the trailing axes every case has (counted from the end)
    labels = dict(zip(range(-k, 0), axis_names(spec, output, k)))
    raws = raws or pairs
    out = _mask_forms(raws) if same_shape else []
    if not out and same_shape and _only_non_finite(pairs):
        return [Derived("non-finite", vocabulary.sentence("non-finite", output=output),
                        vocabulary.fix("non-finite", output=output))]
    if same_shape:
        out += _number_forms(pairs, raws, all_close) + _value_forms(spec, runs, pairs, raws, k, labels, all_close)
    elif all(g.ndim == w.ndim for g, w in pairs) and k <= 6:
        out += _shape_forms(pairs, k, labels, all_close)
    return [Derived(key, vocabulary.sentence(key, output=output, **slots), vocabulary.fix(key, output=output, **slots))
            for key, slots in out]


def _all_close_over(pairs, runs):
    """all_close(f): f(expected, got, run) holds on every case (False if f raises)."""
    def all_close(f):
        try:
            return all(f(w, g, r) for (g, w), r in zip(pairs, runs))
        except Exception:
            return False
    return all_close


def _mask_forms(raws) -> list:
    """A boolean mask returned in its additive form (0 / -inf), either way round."""
    out = []
    if all(w.dtype == np.bool_ and g.dtype.kind == "f" for g, w in raws):
        for key, keep, block in (("additive-mask", 0.0, -np.inf), ("additive-mask-reversed", -np.inf, 0.0)):
            if all(np.array_equal(g, np.where(w, keep, block)) for g, w in raws):
                out.append((key, {}))
    return out


def _number_forms(pairs, raws, all_close) -> list:
    """A count one more or one less; a whole-number answer left as a float (or rounded the wrong way)."""
    out = []
    if all(w.dtype.kind in "iuf" and w.dtype != np.bool_ for _, w in raws):
        for delta in (1, -1):  # a count, or a ratio read as "how many times more" (minus 1)
            if all_close(lambda w, g, r, d=delta: close(g, w + d)):
                out.append(("off-by-one", {"delta": "one more" if delta == 1 else "one less"}))
    if all(w.dtype.kind in "iu" for _, w in raws) and all(g.dtype.kind == "f" for g, _ in raws):
        for how, f in (("round it down (int(), // or math.isqrt)", np.floor), ("round it (round())", np.round),
                       ("round it up (math.ceil)", np.ceil)):
            if all(np.all(np.isfinite(g)) and np.array_equal(f(g), w) for g, w in pairs):
                out.append(("float-result", {"how": how}))
                break
    for bits in (32, 16):  # a count that wrapped round a fixed-width integer (np.int32 and its kin)
        if all(w.dtype.kind in "iu" for _, w in raws) and any(np.any(np.abs(w) >= 2 ** (bits - 1)) for _, w in raws) \
                and all(np.array_equal(np.asarray(g, np.int64), (w.astype(np.int64) + 2 ** (bits - 1)) % 2 ** bits
                                       - 2 ** (bits - 1)) for g, w in raws if g.dtype.kind in "iuf"):
            out.append(("overflow", {"bits": str(bits)}))
            break
    if all(w.dtype.kind == "f" for _, w in raws):  # a fraction lost, the same way on every case that has one
        hows = {rounding_of(np.asarray(g, float), w) for g, w in raws if not np.array_equal(w, np.round(w))}
        rest_right = all(np.array_equal(np.asarray(g, float), w) for g, w in raws if np.array_equal(w, np.round(w)))
        if len(hows) == 1 and "" not in hows and rest_right:
            out.append(("truncated", {"how": hows.pop()}))
    return out


def _value_forms(spec, runs, pairs, raws, k, labels, all_close) -> list:
    """Same shape: the expected values negated, inverted, through a function, scaled, transposed, flipped."""
    out = []
    if any(np.any(w != 0) for _, w in pairs) and all_close(lambda w, g, r: close(g, -w)):
        out.append(("negated", {}))
    if all_close(lambda w, g, r: close(g, 1 / w)):
        out.append(("inverse", {}))
    if any(np.any(w < 0) for _, w in pairs) and all_close(lambda w, g, r: close(g, np.abs(w))):
        out.append(("absolute", {}))
    moved = [(w, g) for g, w in pairs if not close(g, w)]
    for key, f in (("squared", np.square), ("square-root", np.sqrt), ("exponential", np.exp), ("logarithm", np.log)):
        with np.errstate(all="ignore"):
            if moved and all_close(lambda w, g, r, f=f: close(g, f(w))):
                out.append((key, {}))
    factor = _factor(spec, runs, pairs)
    if factor:
        out.append(("scale", {"factor": factor[0], "size": factor[1]}))
    offset = () if factor else _offset(spec, runs, pairs)
    if offset:
        out.append(offset)
    out += normaliser_forms(pairs, labels) or restricted_forms(pairs)
    for a, b in combinations(range(-k, 0), 2):
        if all(w.shape[a] == w.shape[b] for _, w in pairs) and all_close(
                lambda w, g, r, a=a, b=b: close(g, np.swapaxes(w, a, b))) and not all_close(
                lambda w, g, r: close(g, w)):
            out.append(("transpose", {"a": labels[a], "b": labels[b]}))
    out += _reshaped_layouts(pairs, labels, all_close)
    for ax in range(-k, 0):
        if all_close(lambda w, g, r, ax=ax: close(g, np.flip(w, ax))):
            mask = all(w.dtype == np.bool_ for _, w in raws)
            out.append(("flipped-mask" if mask else "flipped", {"axis": labels[ax]}))
        elif all(w.shape[ax] >= 3 for _, w in pairs) and _shifted(pairs, ax):
            out.append(("shifted", {"axis": labels[ax]}))
    return out


def _reshaped_layouts(pairs, labels, all_close) -> list:
    """The expected array with its axes permuted and then reshaped back to its own shape, on every case: what a
    reshape gives where a transpose belongs (x.reshape(B, h, T, d_k) for x.reshape(B, T, h, d_k).transpose(0, 2, 1, 3))."""
    n = pairs[0][1].ndim
    if not 2 <= n <= 5 or any(w.ndim != n for _, w in pairs):
        return []
    out = []
    for perm in permutations(range(n)):
        if perm == tuple(range(n)) or all(np.transpose(w, perm).shape == w.shape for _, w in pairs):
            continue  # the identity, or a plain transpose of equal sizes (the transpose family's)
        if all_close(lambda w, g, r, p=perm: close(g, np.transpose(w, p).reshape(w.shape))):
            said = "(" + ", ".join(labels.get(a - n, f"axis {a}") for a in perm) + ")"
            out.append(("reshaped-layout", {"order": said}))
            break
    return out


def _shape_forms(pairs, k, labels, all_close) -> list:
    """Another shape of the same number of axes: an axis repeated, two axes swapped, the axes reordered."""
    repeated = _repeated(pairs, k)
    if repeated:
        ax, how = repeated
        return [("repeated", {"axis": labels[ax], "how": how})]
    for perm in permutations(range(-k, 0)):
        if perm != tuple(range(-k, 0)) and all_close(
                lambda w, g, r, p=perm: close(g, np.moveaxis(w, p, tuple(range(-k, 0))))):
            moved = [i for i, j in zip(perm, range(-k, 0)) if i != j]
            if len(moved) == 2:  # two axes swapped
                return [("transpose", {"a": labels[moved[0]], "b": labels[moved[1]]})]
            return [("axis-order", {"order": "(" + ", ".join(labels[i] for i in perm) + ")"})]
    return []


def _only_non_finite(pairs) -> bool:
    """Every difference is a nan or an inf where the expected value is finite (a 0/0, an overflow)."""
    seen = False
    for g, w in pairs:
        if g.dtype.kind != "f" or g.shape != w.shape:
            return False
        bad = ~np.isfinite(g) & np.isfinite(w)
        rest = ~bad
        if not close(g[rest], w[rest]):
            return False
        seen |= bool(bad.any())
    return seen


def _repeated(pairs, k) -> tuple:
    """(axis, "each value twice" or "the values twice over") when the learner's output is the
    expected one with every entry (or the whole) repeated twice along one axis, else ()."""
    for ax in range(-k, 0):
        if all(g.shape[ax] == 2 * w.shape[ax] and g.shape[:ax] == w.shape[:ax] for g, w in pairs):
            for how, f in (("each value twice", lambda w: np.repeat(w, 2, ax)),
                           ("the values twice over", lambda w: np.concatenate([w, w], ax))):
                if all(close(g, f(w)) for g, w in pairs):
                    return ax, how
    return ()


def _shifted(pairs, ax) -> bool:
    """The learner's output is the expected one moved by one along ``ax`` (its first or last slice aside)."""
    for step in (1, -1):
        ok, seen = True, False
        for g, w in pairs:
            gm, wm = np.moveaxis(g, ax, 0), np.moveaxis(w, ax, 0)
            mine, theirs = (gm[1:], wm[:-1]) if step == 1 else (gm[:-1], wm[1:])
            if not close(mine, theirs):
                ok = False
                break
            seen |= not close(gm, wm)
        if ok and seen:
            return True
    return False


def _times(said, name) -> str:
    """"2·{x}" or "{x}/2" said of a factor's name: 2·sqrt(d_k), 2/d_k, 1/(2·d_k), -d_k/2."""
    if name.startswith("1/"):
        rest = name[2:]
        return said.replace("2·{x}", "2/{r}").replace("{x}/2", "1/(2·{r})").format(r=rest)
    return said.format(x=name)


def _factor(spec, runs, pairs) -> tuple:
    """(the factor c with learner = c * expected on every case, in words; its symbol) or ()."""
    symbols, values = None, []
    for (g, w), r in zip(pairs, runs):
        g, w = g.astype(float), w.astype(float)  # an int vdot overflows for byte counts
        ww = float(np.vdot(w, w))
        if not ww:
            if not close(g, w):
                return ()
            continue
        c = float(np.vdot(g, w)) / ww
        if not np.isfinite(c) or not close(g, c * w):
            return ()
        named = candidates(case_sizes(spec, r.case.args))  # c = 1 on a case too: h_kv / h where h_kv = h
        fits = {k for k, v in named.items() if np.isclose(v, c, rtol=1e-6, atol=0)}
        symbols = fits if symbols is None else symbols & fits
        values.append((c, named))
    if not symbols or all(np.isclose(c, 1) for c, _ in values):
        return ()
    varying = [k for k in symbols if len({round(named[k], 9) for _, named in values}) > 1]
    best = min(varying or symbols, key=lambda k: (k not in varying, len(k)))
    if best in ("2", "1/2", "-2", "-1/2") or "bits" in best or "zero" in best:
        return best, best.split(" ")[0]
    return f"{best} ({values[0][0]:.4g} in case 1)", best


def _offset(spec, runs, pairs) -> tuple:
    """("extra-term" or "missing-term", slots) when a number differs from the expected one by the same term built
    from the case's sizes on every case (d_model², 2·h·d_k, T·d_model ...; not ±1, an off-by-one's), else ()."""
    if not all(w.size == 1 and g.size == 1 for g, w in pairs):
        return ()
    diffs = [float(g.ravel()[0]) - float(w.ravel()[0]) for g, w in pairs]
    if not all(np.isfinite(d) and abs(d) > 1.5 for d in diffs) or len({d > 0 for d in diffs}) != 1:
        return ()
    symbols, values = None, []
    for d, r in zip(diffs, runs):
        terms = {k: v for k, v in candidates(case_sizes(spec, r.case.args)).items()
                 if v > 1 and not k.startswith(("-", "1/", "sqrt")) and " " not in k and "/" not in k}
        terms.update({f"{c}·{k}": c * v for k, v in list(terms.items()) for c in (3, 4) if "·" not in k})
        fits = {k for k, v in terms.items() if np.isclose(v, abs(d), rtol=1e-9, atol=0)}
        symbols = fits if symbols is None else symbols & fits
        values.append(terms)
    varying = [k for k in symbols or () if len({round(t[k], 9) for t in values}) > 1]
    if not varying:
        return ()
    best = min(varying, key=len)
    said = ", ".join(f"{abs(d):.6g}" for d in diffs[:3])
    return ("extra-term" if diffs[0] > 0 else "missing-term", {"term": best, "values": said})


def _input_level(spec, runs) -> list:
    """The reference on arguments a slip changes (:mod:`.variants`: an axis reversed, two inputs
    swapped or one used for the other, a matrix transposed, a whole number off by one...), when
    that gives the learner's outcome on every case."""
    def build():
        args = [r.case.args for r in runs]
        return variants(spec.reference, args, arg_names(spec.reference, max(args, key=len)),
                        shape_line(spec.reference)[0])
    found = []
    order = sorted(range(len(runs)), key=lambda i: not runs[i].problem)  # failing cases first: they filter most
    for v in spec.memoised("input-variants", build):
        if all(same_outcome(spec.outcome(i, v), runs[i].got) for i in order):
            found.append(Derived(v.key, vocabulary.sentence(v.key, **v.slots), vocabulary.fix(v.key, **v.slots)))
    return found


# ---------------------------------------------------------------------------------------
# mutants of the reference's code
# ---------------------------------------------------------------------------------------

def _mutants_of(spec, depth=1) -> list:
    """The reference's mutants to ``depth`` calls down (memoised on the exercise; [] where the generator
    is missing or fails); at depth 2 only those that depth 1 does not have."""
    def build():
        try:
            from .mutants import mutants
            found = [m for m in mutants(spec.reference, depth=depth, extended=True)
                     if vocabulary.mutant_class(m.mutation.category)]
        except Exception:  # noqa: BLE001 -- no generator, or a reference it cannot read
            return []
        if depth > 1:
            shallower = {m.mutation for m in _mutants_of(spec, depth - 1)}
            found = [m for m in found if m.mutation not in shallower]
        return found
    return spec.memoised(f"mutants-{depth}", build)


def _mutant_level(spec, runs, budget) -> list:
    """The mutants that give the learner's outcome on every case: the reference and the package
    steps it calls first; where none does, the steps those call (a bias added two calls down)."""
    return (_mutants_fitting(spec, runs, budget, 1) or _mutants_fitting(spec, runs, budget, 2)
            or _mutants_per_output(spec, runs, budget) or _unguarded(spec, runs, budget))


def _unguarded(spec, runs, budget) -> list:
    """A mutant that gives the learner's numbers wherever the learner's are not NaN, its NaN where the
    mutant (and the reference) guard an exp(-inf - (-inf)) or a 0/0: two slips, the second said with the first."""
    if not any(r.got.error is None and has_nan(r.got.value) for r in runs):
        return []
    found = _mutants_fitting(spec, runs, budget, 1, nan_free) or _mutants_fitting(spec, runs, budget, 2, nan_free)
    return [d._replace(text=f"{d.text}; {vocabulary.UNGUARDED_NAN}", fix=f"{d.fix}; {vocabulary.UNGUARDED_FIX}")
            for d in found]


def _mutants_per_output(spec, runs, budget) -> list:
    """Several outputs wrong, each as one mutant makes it while the others stay right (grad_a through
    pinv(b) and grad_b through pinv(a): two slips at once), said together; [] unless every wrong output has one."""
    if any(r.got.error is not None or not isinstance(r.want, tuple) or not isinstance(r.got.value, tuple)
           or len(r.got.value) != len(r.want) for r in runs):
        return []
    n = len(runs[0].want)
    wrong = [j for j in range(n) if any(not same(r.got.value[j], r.want[j]) for r in runs)]
    ms = _mutants_of(spec, 1)
    if len(wrong) < 2 or len(ms) * len(runs) > 2 * budget:
        return []

    def fits(m, j):
        for i, r in enumerate(runs):
            o = spec.outcome(i, m)
            if o.error is not None or not isinstance(o.value, tuple) or len(o.value) != n or not all(
                    same(o.value[k], r.got.value[k] if k == j else r.want[k]) for k in range(n)):
                return False
        return True
    ordered = sorted(ms, key=lambda m: vocabulary.mutant_class(m.mutation.category) in _SPECULATIVE)
    chosen = [next((m for m in ordered if fits(m, j)), None) for j in wrong]
    if any(m is None for m in chosen):
        return []
    return [_together([_mutant_words(m.mutation) for m in chosen])]


def _mutants_fitting(spec, runs, budget, depth, agree=same_outcome) -> list:
    ms = _mutants_of(spec, depth)
    if not ms:
        return []
    order = sorted(range(len(runs)), key=lambda i: (not runs[i].problem, _size(runs[i].case.args)))  # failing
    alive, calls = ms[:budget], 0  # cases first (they filter most), the smallest first (the cheapest runs)
    for i in order:
        calls += len(alive)
        if calls > budget:
            return []  # too many runs before every case was tried: name nothing rather than guess
        alive = [m for m in alive if agree(spec.outcome(i, m), runs[i].got)]
        if not alive:
            return []
    found, seen = [], set()
    for m in sorted(alive, key=lambda m: vocabulary.mutant_class(m.mutation.category) in _SPECULATIVE):
        # a slip in the code itself first; an argument or a range moved (often an equivalent way round) after
        d = _mutant_words(m.mutation)
        if d.text not in seen:
            seen.add(d.text)
            found.append(d)
    return found


_SPECULATIVE = frozenset({"replaced-name", "index"})  # named after the other classes that fit


def _size(value) -> int:
    """How many numbers an argument (or a tuple, list or dict of them) holds: a case's cost."""
    if isinstance(value, np.ndarray):
        return value.size
    if isinstance(value, (tuple, list)):
        return sum(_size(v) for v in value)
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    return 1


def _short(text, n=60) -> str:
    text = re.sub(r"\b_validate\.\w+\((\w+)(?:, [^()]*)?\)", r"\1", " ".join(str(text).split()))  # d_k, not its check
    return text if len(text) <= n else ""


def _mutant_words(mutation) -> Derived:
    key = vocabulary.mutant_class(mutation.category)
    params = dict(mutation.params)
    if key == "comparison" and "by" in params:
        key = "comparison-boundary"
    elif key == "index" and params.get("range"):
        key = "range-shifted"
    elif key == "swapped-arguments" and "order" in params:
        key = "parts-order"
    elif key == "comparison" and {params.get("test"), params.get("test_to")} in ({"==", "!="}, {"in", "not in"},
                                                                                {"is", "is not"}):
        key = "comparison-negated"
    if key == "axis" and "fixed" in params:
        key = "axis-fixed"
    if key == "axis" and "swapped" in params:  # a permutation's neighbours swapped: said with the code
        key, params = "axes-reordered", {}
    if key in ("negation", "constant", "index") and all(".shape[" in str(t) for t in (mutation.before, mutation.after)):
        key = "shape-axis"  # Q.shape[1] where Q.shape[-1] belongs: a size read from another axis, not a sign
        params = {}
    axes = [re.search(r"\b(?:axis|dim)=(-?\d+)", str(t)) for t in (mutation.before, mutation.after)]
    if key in ("negation", "constant") and all(axes) and axes[0].group(1) != axes[1].group(1) and \
            str(mutation.before).replace(axes[0].group(0), "") == str(mutation.after).replace(axes[1].group(0), ""):
        key, params = "axis", {"axis": axes[0].group(1), "to": axes[1].group(1)}  # axis=1 for axis=-1: not a sign
    op = params.get("dropped") or (re.findall(r"(\w+)\s*\(", str(mutation.before)) or [""])[-1] or "step"
    before = params.get("from", params.get("axis", _short(mutation.before)))
    after = params.get("to", _short(mutation.after))
    slots = {**{k: str(v) for k, v in params.items()}, "op": op, "before": before, "after": after}
    if key in ("replaced-name", "subscript", "range-shifted", "parts-order", "regrouped", "shape-axis", "doubled-term",
               "open-slice", "axes-reordered", "inside-out"):  # said with the changed code: "x @ W_k where context @ W_k belongs"
        slots.update({"before": _short(mutation.before, 80), "after": _short(mutation.after, 80),
                      "from": params.get("from", ""), "to": params.get("to", ""),
                      "how": "only the first item of the first axis" if params.get("leading") == "first"
                      else "the index on another axis"})
    elif key == "sqrt":  # said with the changed code: "np.sqrt(factor) where factor belongs"
        slots.update({"before": _short(mutation.before, 80), "after": _short(mutation.after, 80),
                      "how": "a square root too many" if params.get("added") else "the square root left out"})
    text = vocabulary.sentence(key, **slots)
    if "sites" in dict(mutation.params):  # one change made at every place it fits
        text += f" (at each of the {dict(mutation.params)['sites']} places it appears)"
    return Derived(key, text, vocabulary.fix(key, **slots))


protect(globals())
