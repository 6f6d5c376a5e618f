"""The checker's diagnosis: which mistake gives the learner's numbers, in the exercise's words.

:func:`explain` turns a failing run into feedback: the catalogued mistakes whose outcomes equal
the learner's on every case (:func:`fitting`), else a mistake derived from the exercise itself
(:mod:`.derive`), else where and how the result differs (:func:`localise`, with a factor named by
the exercise's sizes: sqrt(d_k), 1/h, ...).
"""
from __future__ import annotations

from .compare import NOT_DIAGNOSED, axis_labels, differences, num, ratio, same_outcome, where_and_how
from .sandbox import arg_names, np, protect, quiet_numpy


def fitting(spec, runs) -> list:
    """The mistakes whose outcome equals the learner's on every case that ran."""
    if not any(r.problem for r in runs) or any(r.got.lines and r.got.error is None for r in runs):
        return []
    return [m for m in spec.mistakes if all(same_outcome(spec.outcome(i, m), r.got) for i, r in enumerate(runs))]



def explain(spec, runs, run) -> tuple:
    """(the problem lines of the failing run, then the diagnosis; the names of the mistakes it names)."""
    fits = fitting(spec, runs)
    lines = [ln.removeprefix(NOT_DIAGNOSED) for ln in run.problem]
    if fits:
        return lines + [looks_like(fits)], [m.name for m in fits]
    if run.got.lines or run.problem[0].startswith(NOT_DIAGNOSED):  # an error, a time-out, a stub
        return lines, []
    with quiet_numpy():  # NaN comparisons in the learner's result warn nothing
        return lines + localise(spec, runs, run), []


def looks_like(fits) -> str:
    """"Looks like: <mistake>. Fix: <fix>", naming every mistake that gives these numbers."""
    causes = [(m.name, m.fix) for m in fits] + [(m.also, m.fix) for m in fits if getattr(m, "also", "")]
    if len(causes) == 1:
        return f"Looks like: {causes[0][0]}. Fix: {causes[0][1]}"
    return ("Looks like one of these, which give the same numbers here: "
            + "; or ".join(f"{name} (fix: {fix})" for name, fix in causes))


def localise(spec, runs, run) -> list:
    """Where and how each differing output differs, for a mistake the catalogue does not know (rule c):
    in the exercise's terms (a factor named by its sizes: sqrt(d_k), 1/h, ...), and shape advice
    only when a shape is wrong."""
    axes, lines, shape_wrong = spec.axes or {}, [], False
    for name, g, w in differences(run.got.value, run.want, spec.outputs):
        shape_wrong |= g.shape != w.shape
        labels = axis_labels(np.ndim(w), axes.get(name, ()))
        lines += [f"- {name}: {s}" for s in where_and_how(g, w, labels, Factor(spec, runs, name))]
    advice = ("Print the shape of each step and compare it with the formula in the notebook." if shape_wrong
              else "Every shape is right: compare each step's values with the formula in the notebook.")
    return ["This is not one of the mistakes I know; here is where your result differs:"] + lines + [advice]



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
        return f"{best} ({here:.4g} in this case)" if best not in ("2", "1/2", "-2", "-1/2") else best


def case_sizes(spec, args) -> dict:
    """{symbol: size} of one case: the exercise's own (``sizes``), else its whole-number arguments by
    name and the last axis of each array argument."""
    if spec.sizes is not None:
        try:
            return {str(k): float(v) for k, v in dict(spec.sizes(*args)).items()}
        except Exception:
            return {}
    out = {}
    for name, v in zip(arg_names(spec.reference, args), args):
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v > 1:
            out[name] = float(v)
        elif isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[-1] > 1:
            out[f"{name}.shape[-1]"] = float(v.shape[-1])
    return out


def candidates(sizes) -> dict:
    """Factors a learner's slip produces, by name: n, sqrt(n), 1/n, 1/sqrt(n), their negatives, 2 and 1/2."""
    out = {"2": 2.0, "1/2": 0.5, "-2": -2.0, "-1/2": -0.5}
    for k, v in sizes.items():
        if v > 0:
            for name, value in ((k, v), (f"sqrt({k})", v ** 0.5), (f"1/{k}", 1 / v), (f"1/sqrt({k})", v ** -0.5),
                                (f"{k}**2", v * v)):
                out.setdefault(name, value)
                out.setdefault(f"-{name}", -value)
    return out




protect(globals())
