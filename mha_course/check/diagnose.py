"""The checker's diagnosis: which mistake gives the learner's numbers, in the exercise's words.

:func:`explain` turns a failing run into feedback: the catalogued mistakes whose outcomes equal
the learner's on every case (:func:`fitting`), else a mistake derived from the exercise itself
(:mod:`.derive`), else where and how the result differs (:func:`localise`, with a factor named by
the exercise's sizes: sqrt(d_k), 1/h, ...).
"""
from __future__ import annotations

import inspect
import re
from typing import NamedTuple

from .compare import (
    NOT_DIAGNOSED,
    axis_labels,
    differences,
    num,
    ratio,
    rounded_form,
    same_outcome,
    states_int,
    where_and_how,
)
from .derive import also_fitting, candidates, case_sizes, derive
from .language import say
from .probe_inputs import at_one_hint
from .sandbox import arg_names, np, protect, quiet_numpy
from .symbols import spell_shape


def fitting(spec, runs) -> list:
    """The mistakes whose outcome equals the learner's on every case that ran."""
    if not any(r.problem for r in runs) or any(r.got.lines and r.got.error is None for r in runs):
        return []
    return [m for m in spec.mistakes if all(same_outcome(spec.outcome(i, m), r.got) for i, r in enumerate(runs))]


class _AlsoFloat(NamedTuple):
    """A catalogued mistake made with floats where the signature states an int."""
    name: str
    fix: str


def float_fitting(spec, runs) -> list:
    """The mistakes that give the learner's numbers once its whole-number floats are read as ints
    (432.0 for the int 432, and a mistake): where the reference states ``-> int`` the float is
    named too; elsewhere a whole float is a right count, so the mistake alone is named."""
    if spec.mistakes == ():
        return []
    strict = states_int(spec.reference) or spec.strict_types
    as_ints = []
    for r in runs:
        v = r.got.value
        if r.got.error is not None or r.got.lines:
            return []
        if isinstance(v, (float, np.floating)) and np.isfinite(v) and float(v).is_integer():
            v = int(v)
        elif r.problem:
            return []
        as_ints.append(r._replace(got=r.got._replace(value=v)))
    if all(r.got.value is o.got.value for r, o in zip(as_ints, runs)):
        return []
    fits = fitting(spec, as_ints)
    if not strict:
        return fits
    return [_AlsoFloat(f"{m.name}; and the count is a float where the signature states an int",
                       f"{m.fix}; and use // (or int(...)) so the result is an int") for m in fits]


class _InPart(NamedTuple):
    """A catalogued mistake of a step that is another exercise, made inside this one."""
    name: str
    fix: str
    fn: object
    also: str = ""  # the step's mistake's second sentence, made at that step too
    derived: bool = False  # a slip derived from the step (its scale), named only where no catalogued one is


def part_mistakes(spec) -> tuple:
    """Every catalogued mistake of each of ``spec.parts``' exercises, made at that step of ``spec``."""
    def build():
        from .engine import catalogue
        out = []
        for part in spec.parts:
            for m in catalogue()[part.exercise].mistakes:
                out.append(_InPart(f"{part.where}: {m.name}", m.fix, part.wrap(m.fn),
                                   f"{part.where}: {m.also}" if m.also else ""))
            out += _scale_slips(spec, part, catalogue()[part.exercise].reference)
        return tuple(out)
    return spec.memoised("part-mistakes", build) if spec.parts else ()


def _scale_slips(spec, part, step) -> list:
    """A step whose docstring scales by sqrt(d_k) (the attention), run with the scores divided by another size
    of the exercise's cases (√d_model, √T, h, ...) where √d_k belongs: a size read from the wrong place."""
    if "sqrt(d_k)" not in (inspect.getdoc(step) or ""):
        return []
    sized = [case_sizes(spec, c.args) for c, _ in spec.expected()]
    symbols = [k for k in sized[0] if "." not in k and k != "d_k" and all(k in z for z in sized)]
    out = []
    for symbol in symbols:
        for root in (True, False):
            def fn(*args, _s=symbol, _r=root):
                x = case_sizes(spec, args)[_s]

                def scaled(Q, K, V, mask=None):
                    return step(Q * (np.sqrt(Q.shape[-1]) / (np.sqrt(x) if _r else x)), K, V, mask)
                return part.wrap(scaled)(*args)
            by = f"√{symbol}" if root else symbol
            out.append(_InPart(say("{where}: the scores divided by {by} where √d_k belongs", where=part.where, by=by),
                               say("divide by √d_k, d_k = Q.shape[-1] (the width of each head's queries)"), fn,
                               derived=True))
    return out


def part_fitting(spec, runs) -> list:
    """The mistakes of a step that is another exercise (:func:`part_mistakes`) that give the learner's
    outcome on every case: one vocabulary, so a slip in MHA's attention reads as it does in 2.4."""
    if not spec.parts or not any(r.problem for r in runs) or any(r.got.lines and r.got.error is None for r in runs):
        return []
    fits = [m for m in part_mistakes(spec) if all(same_outcome(spec.outcome(i, m), r.got) for i, r in enumerate(runs))]
    return [m for m in fits if not m.derived] or fits


def explain(spec, runs, run) -> tuple:
    """(the problem lines of the failing run, then the diagnosis; the names of the mistakes it names)."""
    fits = fitting(spec, runs) or float_fitting(spec, runs) or part_fitting(spec, runs)
    lines = [ln.removeprefix(NOT_DIAGNOSED) for ln in run.problem]
    if fits:
        with quiet_numpy():
            also = [d.text for d in also_fitting(spec, runs)]
        return lines + [looks_like(fits, also)], [m.name for m in fits]
    if run.got.lines or run.problem[0].startswith(NOT_DIAGNOSED):  # an error, a time-out, a stub
        return lines, []
    with quiet_numpy():  # NaN comparisons in the learner's result warn nothing
        found = derive(spec, runs)
        if found:
            return lines + [derived_line(found)], [d.text for d in found]
        return lines + localise(spec, runs, run), []


def looks_like(fits, also=()) -> str:
    """"Looks like: <mistake>. Fix: <fix>", naming every mistake (catalogued or derived) that gives
    these numbers: never asserting one of several. The fixed words go through ``language.say``."""
    causes = list(dict.fromkeys((getattr(m, "name", None) or m.text, m.fix) for m in fits))[:3]
    also = [m.also for m in fits if getattr(m, "also", "")] + list(also)
    if len(causes) == 1:
        said = say("Looks like: {mistake}. Fix: {fix}", mistake=causes[0][0], fix=causes[0][1])
        return said + (say(". Or: {also}, which gives the same numbers", also=also[0]) if also else "")
    if len({fix for _, fix in causes}) == 1:
        return say("Looks like one of these, which give the same numbers here: {names}. Fix: {fix}",
                   names=say("; or ").join(n for n, _ in causes), fix=causes[0][1])
    return say("Looks like one of these, which give the same numbers here: {items}",
               items=say("; or ").join(say("{name} (fix: {fix})", name=n, fix=f) for n, f in causes))


def derived_line(found) -> str:
    """"Found: <what gives these numbers>. Fix: <fix>" for mistakes derived from the exercise (every
    one that gives these numbers, when several do)."""
    causes = list(dict.fromkeys((d.text, d.fix) for d in found))[:3]
    if len(causes) == 1:
        return say("Found: {cause}. Fix: {fix}", cause=causes[0][0], fix=causes[0][1])
    fixes = {fix for _, fix in causes}
    said = say("; or ").join(t if len(fixes) == 1 else say("{name} (fix: {fix})", name=t, fix=f) for t, f in causes)
    return say("Found {n} changes that give these same numbers: {said}", n=len(causes), said=said) + (
        say(". Fix: {fix}", fix=causes[0][1]) if len(fixes) == 1 else "")


def localise(spec, runs, run) -> list:
    """Where and how each differing output differs, for a mistake the catalogue does not know (rule c):
    in the exercise's terms (a factor named by its sizes: sqrt(d_k), 1/h, ...), and shape advice
    only when a shape is wrong."""
    axes, lines, shape_wrong = spec.axes or {}, [], False
    for name, g, w in differences(run.got.value, run.want, spec.outputs):
        shape_wrong |= g.shape != w.shape
        labels = axis_labels(np.ndim(w), axes.get(name, ()))
        lines += [f"- {name}: {s}" for s in where_and_how(g, w, labels, Factor(spec, runs, name))]
        if g.shape != w.shape and g.ndim:
            lines.append(f"- {name}: " + spelled_shapes(spec, runs, run, name, g.shape, w.shape))
            lines += [f"- {name}: {s}" for s in _one_for_many(g, w) + _length_gap(spec, runs, name)]
        past = _past_index(spec, runs, name)
        if past:  # more specific than "the last only": drop that hint
            hint = say(": the last only (a loop or range that stops one early, or the last handled on its own?)")
            lines = [ln.replace(hint, "") for ln in lines] + [f"- {name}: {past}"]
    lines += only_where(spec, runs) + _near_miss([d for r in runs if r.problem and r.got.error is None and not
                                                  r.got.lines for d in differences(r.got.value, r.want, spec.outputs)])
    advice = ("Print the shape of each step and compare it with the formula in the notebook." if shape_wrong
              else "Every shape is right: compare each step's values with the formula in the notebook.")
    return ["This is not one of the mistakes I know; here is where your result differs:"] + lines + [advice]



def _past_index(spec, runs, output) -> str:
    """Differences exactly at the indices after a whole-number argument's value along one axis, on every failing
    case (and none where that value is the axis' last index): a slice from it onward where the single index belongs."""
    found = None
    for r in runs:
        if r.got.lines or r.got.error is not None:
            return ""
        pair = next(((g, w) for nm, g, w in differences(r.got.value, r.want, spec.outputs) if nm == output), None)
        ints = {n: v for n, v in zip(arg_names(spec.reference, r.case.args), r.case.args)
                if isinstance(v, (int, np.integer)) and not isinstance(v, bool)}
        fits = set()
        for n, v in ints.items():
            if pair is None:
                continue
            g, w = np.asarray(pair[0]), np.asarray(pair[1])
            if g.shape != w.shape or not w.ndim:
                return ""
            bad = ~np.isclose(num(g), num(w), equal_nan=True)
            fits |= {(n, ax) for ax in range(w.ndim) if 0 <= v < w.shape[ax] - 1 and list(np.flatnonzero(
                bad.any(axis=tuple(a for a in range(w.ndim) if a != ax)))) == list(range(v + 1, w.shape[ax]))}
        if r.problem:
            found = fits if found is None else found & fits
    if not found:
        return ""
    arg, ax = sorted(found)[0]
    return say("differences only at the indices after {arg} along axis {ax}: a slice [{arg}:] (from {arg} on) "
               "where the single index [{arg}] belongs?", arg=arg, ax=ax)


def _one_for_many(g, w) -> list:
    """Several numbers where one is expected: which of them (or their sum) is the expected one."""
    if w.ndim or not g.size or g.size > 16 or g.dtype.kind not in "biuf":
        return []
    flat, want = g.ravel().astype(float), float(w)
    hit = [k for k, v in enumerate(flat) if np.isclose(v, want, rtol=1e-9, atol=0)]
    if np.isclose(flat.sum(), want, rtol=1e-9, atol=0):
        return [say("{n} values where one number is expected, and their sum is it: add them up", n=g.size)]
    if hit:
        return [say("{n} values where one number is expected, and item {k} of them is it: return that one alone "
                    "(two results returned together, as a tuple?)", n=g.size, k=hit[0])]
    return [say("{n} values where one number is expected: two results returned together (a tuple), or a count "
                "or sum left unreduced?", n=g.size)]


def _length_gap(spec, runs, output) -> list:
    """An axis shorter (or longer) than expected by a size of the case, the same size on every failing case:
    "12 expected, 8: one d_k fewer", a loop that stops one block early (or runs one late)."""
    gaps = []
    for r in runs:
        if not r.problem or r.got.lines or r.got.error is not None:
            continue
        pair = next(((g, w) for nm, g, w in differences(r.got.value, r.want, spec.outputs) if nm == output), None)
        if pair is None or pair[0].ndim != pair[1].ndim or pair[0].shape == pair[1].shape:
            return []
        diff = [b - a for a, b in zip(pair[0].shape, pair[1].shape) if a != b]
        if len(diff) != 1:
            return []
        gaps.append((diff[0], case_sizes(spec, r.case.args)))
    if not gaps:
        return []
    common = set.intersection(*({k for k, v in sizes.items() if v == abs(d) and "." not in k} for d, sizes in gaps))
    if not common or len({d > 0 for d, _ in gaps}) != 1:
        return []
    symbol = min(common, key=len)
    if gaps[0][0] > 0:
        return [say("one {symbol} fewer than expected along that axis: a block (a head, a chunk) left out, a loop "
                    "that stops one early?", symbol=symbol)]
    return [say("one {symbol} more than expected along that axis: a block counted twice, a loop that runs one "
                "too far?", symbol=symbol)]


def _near_miss(differing) -> list:
    """"- within 0.7% of the expected values but not equal: ...": every differing output of every failing case a
    number close (under 10%) to the expected one, as a sampled estimate or an approximation is; for whole numbers,
    one more (or one less) than expected on every failing case ([] otherwise)."""
    whole = [(g, w) for _, g, w in differing if np.ndim(w) == 0 and np.ndim(g) == 0 and float(w).is_integer()
             and np.isfinite(float(g)) and float(g).is_integer()]
    if whole and len(whole) == len(differing):  # counts: off by a whole number, not an estimate
        steps = {int(float(g) - float(w)) for g, w in whole}
        if steps == {1}:
            return ["- " + say("one more than expected: an off-by-one at a boundary or at the end of a loop?")]
        if steps == {-1}:
            return ["- " + say("one less than expected: an off-by-one at a boundary or at the start of a loop?")]
        return []
    worst = 0.0
    for _, g, w in differing:
        try:
            g, w = np.asarray(g, float), np.asarray(w, float)
            scale = float(np.max(np.abs(w))) if w.ndim == 0 and g.shape == w.shape else 0.0  # numbers only
        except (TypeError, ValueError):
            return []
        if not scale or not np.all(np.isfinite(g)):
            return []
        worst = max(worst, float(np.max(np.abs(g - w))) / scale)
    if not differing or not 0 < worst < 0.1 or any(rounded_form(g, w) for _, g, w in differing):
        return []
    return ["- " + say("within {pct} of the expected values but not equal: an estimate (random sampling) or an "
                       "approximation, where the exact value is asked?", pct=f"{100 * worst:.2g}%")]


def case_features(spec, args) -> list:
    """What a case is, in the exercise's words: each flag's value ("causal=True"), each optional
    argument given or not ("mask given"), each size of 1 ("h_kv = 1"), and for two sizes of one kind
    (two lengths, two widths) which is the larger or that they are equal ("T = S", "S < T")."""
    out = []
    for name, v in zip(arg_names(spec.reference, args), args):
        if isinstance(v, (bool, np.bool_)):
            out.append(f"{name}={bool(v)}")
        elif v is None:
            out.append(say("{name} not given", name=name))
        else:
            out.append(say("{name} given", name=name))
    sizes = [(k, v) for k, v in case_sizes(spec, args).items() if "." not in k]
    out += [f"{k} = 1" for k, v in sizes if v == 1]
    kin = [(a, u, b, v) for i, (a, u) in enumerate(sizes) for b, v in sizes[i + 1:]
           if _kind(a) and _kind(a) == _kind(b)]
    out += [f"{a} = {b}" for a, u, b, v in kin if u == v]  # two sizes of one kind: T = S, h_kv = h
    return out + [f"{a} < {b}" if u < v else f"{b} < {a}" for a, u, b, v in kin if u != v]


_KINDS = {"length": {"T", "S", "offset", "window", "L", "n"}, "width": {"d", "d_k", "d_v", "d_model", "D", "d_c"},
          "heads": {"h", "h_kv", "g"}}


def _kind(symbol) -> str:
    """Which kind of size a symbol is (a length, a width, a number of heads): sizes of two kinds being
    equal on a case is a coincidence of the case, not a feature of it."""
    return next((k for k, names in _KINDS.items() if symbol in names), "")


def only_where(spec, runs) -> list:
    """"- right on every case but those where T = S (1 of 6 cases)": the feature of a case that
    separates the failing cases from the passing ones, when one does ([] otherwise)."""
    failing = [bool(r.problem) for r in runs]
    if all(failing) or not any(failing):
        return []
    notes = [r.case.note.lower() for r in runs]
    for word in _EDGE_WORDS:  # the cases' own words first: "large scores" says more than "S < T"
        if [_has(n, word) for n in notes] == failing:
            ones = {n.split(" = 1:")[0].strip() for n, f in zip([r.case.note for r in runs], failing) if f and " = 1:" in n}
            hint = say(" Large inputs: does exp overflow (subtract each row's max first), or are large values clipped or capped where the formula keeps them?") if word in (
                "large", "huge", "overflow") else (" " + at_one_hint(ones.pop()) if len(ones) == 1 else "")
            return ["- " + say("wrong on every case described with “{word}” and right on the others ({n} of {m} "
                               "cases): an edge case your code handles otherwise?", word=word.strip(),
                               n=sum(failing), m=len(runs)) + hint]
    features = [case_features(spec, r.case.args) for r in runs]
    for f in dict.fromkeys(f for fs in features for f in fs):  # flags, then arguments given, then sizes
        has = [f in fs for fs in features]
        if has == failing or (" = " in f and [not x for x in has] == failing):
            condition = f if has == failing else f.replace(" = 1", " > 1").replace(" = ", " ≠ ")
            one = condition.split(" = ")[0] if condition.endswith(" = 1") else ""
            return ["- " + say("wrong on every case where {condition} and right on the others "
                               "({n} of {m} cases): the mistake shows only there",
                               condition=condition, n=sum(failing), m=len(runs)) + (" " + at_one_hint(one) if one else "")]
    notes = [r.case.note for r in runs if r.problem]
    if all(notes) and sum(failing) <= len(runs) // 2 and all(any(_has(n.lower(), w) for w in _EDGE_WORDS) for n in notes):
        # no feature, but each failing case's own words say it is an edge: a row with no key, a size of 1, ...
        ones = {n.split(" = 1:")[0] for n in notes if " = 1:" in n}  # the size-1 edges (edges.py)
        return ["- " + say("right on every case but {notes} ({n} of {m} cases): the mistake shows only on such "
                           "input (an edge case your code handles otherwise, or a branch only it takes)",
                           notes="; ".join(f"“{n}”" for n in notes[:3]), n=sum(failing), m=len(runs))
                + (" " + at_one_hint(ones.pop()) if len(ones) == 1 else "")]
    return []


_EDGE_WORDS = ("no key", "nothing", "masked", "empty", "= 1", "zero", "large", "huge", "single", "fully",
               "all ", "only", "edge", "boundary", "shorter", "longer", "overflow", "padding", "0 cached", "first",
               "last", "exact")


def _has(note, word) -> bool:
    """``word`` in a case's note; "= 1" as a size of 1 only (not the start of "= 128")."""
    return bool(re.search(r"=\s*1(?![\d.])", note)) if word == "= 1" else word in note


def spelled_shapes(spec, runs, run, output, got, want) -> str:
    """"your shape (4, 3) = (d_k, d_c); expected (3, 4) = (T, d_c)": both read in the case's symbols,
    each length's reading chosen to hold on the other cases too."""
    mine, theirs = [], []
    for r in runs:
        if r is run or not r.problem or r.got.lines or r.got.error is not None:
            continue
        sizes = case_sizes(spec, r.case.args)
        for name, g, w in differences(r.got.value, r.want, spec.outputs):
            if name == output:
                mine.append((g.shape, sizes))
                theirs.append((w.shape, sizes))
    sizes = case_sizes(spec, run.case.args)
    return say("your shape {got} = {spelled}; expected {want} = {spelled_want}", got=tuple(got),
               spelled=spell_shape(got, sizes, mine), want=tuple(want), spelled_want=spell_shape(want, sizes, theirs))


class Factor:
    """Names a constant factor by the exercise's sizes: the symbol whose value is the factor on
    every failing case (sqrt(d_k), 1/h, 2, ...)."""

    def __init__(self, spec, runs, output):
        self.spec, self.runs, self.output = spec, runs, output

    def name(self, c) -> str:
        ratios, symbols = [], None
        for r in self.runs:
            if not r.problem or r.got.lines or r.got.error is not None:
                continue
            pair = next(((g, w) for nm, g, w in differences(r.got.value, r.want, self.spec.outputs)
                         if nm == self.output and g.shape == w.shape), None)
            found = ratio(num(pair[0]), num(pair[1])) if pair else 0.0
            if not found:
                return ""
            named = candidates(case_sizes(self.spec, r.case.args))
            fits = {k for k, v in named.items() if np.isclose(v, found, rtol=1e-6, atol=0)}
            symbols = fits if symbols is None else symbols & fits
            ratios.append((found, named))
        if not symbols:
            return ""
        varying = [k for k in symbols if len({round(cands[k], 9) for _, cands in ratios}) > 1]
        best = min(varying or symbols, key=lambda k: (k not in varying, len(k)))
        here = ratios[0][0]
        return best if best in candidates({}) else f"{best} ({here:.4g} in this case)"  # a constant: no value


protect(globals())
