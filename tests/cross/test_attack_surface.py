"""Issue 32's attack generator: every public callable, called with hostile arguments drawn by Hypothesis.

The surface is found by introspection (``attack_table.public_callables``). For each callable the table
builds a valid call from the parameter names; each example perturbs ONE argument of it with a hostile
value of that argument's kind and asserts the contract:

- "refuse" attacks (a negative, float or bool size; an index out of range, -1 included; an unknown
  option; a misspelled key; a value of the wrong type) must raise ValueError or TypeError whose
  message names the argument: never a silent clamp or ignore.
- every other attack (NaN, inf, empty axes, huge and tiny magnitudes, float16, non-contiguous and
  broadcast views, lists) either raises such an error or returns: a finite result where the valid call
  gave one, and for the "same" attacks (the same numbers in another container) the same result.
- whatever the attack, never IndexError, KeyError, ZeroDivisionError, AttributeError, OverflowError
  or any other class, nor a numpy-internal message, nor a traitlets TraitError.

``test_every_public_callable_has_a_strategy`` fails when a public callable has no valid call, so new
public code is attacked without being listed. Examples per callable: the "mha-course-attack" profile
(a few, for ``make test``); ``MHA_COURSE_ATTACK_PROFILE=ci`` selects "mha-course-attack-ci" (many more).
"""
from __future__ import annotations

import copy
import dataclasses
import math
import os
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cross import attack_known as known  # noqa: E402
from cross import attack_table as at  # noqa: E402

_COMMON = dict(derandomize=True, database=None, deadline=None, print_blob=True,
               suppress_health_check=list(HealthCheck))
settings.register_profile("mha-course-attack", max_examples=6, **_COMMON)
settings.register_profile("mha-course-attack-ci", max_examples=60, **_COMMON)
PROFILE = settings.get_profile(
    "mha-course-attack-ci" if os.environ.get("MHA_COURSE_ATTACK_PROFILE") == "ci" else "mha-course-attack")
SLOW_MODULES = ("mha_course.views.", "mha_course.widgets.")  # a figure per call: a third of the examples

ALLOWED = (ValueError, TypeError)
# Messages that come from numpy's or Python's insides instead of the package's own checks.
INTERNAL = re.compile(
    r"operands could not be broadcast|need at least one array|zero-size array|cannot reshape array|"
    r"axis -?\d+ is out of bounds|could not convert|unsupported operand|ufunc|'NoneType' object|"
    r"only integer scalar arrays|setting an array element|invalid literal|math domain error|"
    r"list indices must|unhashable type|object is not (subscriptable|iterable|callable)|"
    r"only 0-dimensional arrays|too many values to unpack|not enough values to unpack|"
    r"matmul: Input operand|has no len\(\)|must be real number, not|can't multiply sequence|"
    r"missing \d+ required positional|takes \d+ positional argument|unexpected keyword|"
    r"arrays used as indices|shapes \(.*\) and \(.*\) not aligned|object of type .* has no")


@dataclasses.dataclass(frozen=True)
class Attack:
    """One hostile value for one argument and what the call must do with it."""
    label: str
    value: object
    expect: str  # "refuse", "finite", "same" or "any"

    def __repr__(self):
        return f"<{self.label}: {self.expect}>"


def _with_nonfinite(v, bad):
    out = np.array(v, dtype=np.float64, copy=True)
    if out.size:
        out.flat[0] = bad
    return out


def _noncontiguous(v):
    v = np.asarray(v)
    big = np.zeros(v.shape + (2,), dtype=v.dtype)
    big[..., 0] = v
    return big[..., 0]


def _empty_axis(v):
    v = np.asarray(v)
    if v.ndim == 0:
        return v.reshape(0)
    return np.take(v, [], axis=v.ndim - 1)


def attacks(name: str, spec: at.Spec, value, required: bool) -> list[Attack]:
    """The hostile values of one argument of kind ``spec.kind`` whose valid value is ``value``."""
    kind = spec.kind
    out: list[Attack] = []
    whole = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if kind in ("size", "count", "index") and not whole:
        kind = "object"  # a default of another type (a tuple of sizes, say): only the type attacks
    if required:
        out.append(Attack("None", None, "refuse"))
    if kind == "size":
        out += [Attack("zero", 0, "finite"), Attack("negative", -1, "refuse"),
                Attack("float", value + 0.5, "refuse"), Attack("bool", True, "refuse"),
                Attack("string", str(value), "refuse"), Attack("numpy int", np.int64(value), "same")]
    elif kind == "count":
        out += [Attack("negative", -1, "refuse"), Attack("float", value + 0.5, "refuse"),
                Attack("bool", True, "refuse"), Attack("string", str(value), "refuse"),
                Attack("numpy int", np.int64(value), "same")]
    elif kind == "index":
        if name == "axis":
            out += [Attack("out of range", 7, "refuse"), Attack("float", 0.5, "refuse")]
        else:
            out += [Attack("minus one", -1, "refuse"), Attack("one past the end", spec.bound, "refuse"),
                    Attack("far out", spec.bound + 100, "refuse"), Attack("float", value + 0.5, "refuse"),
                    Attack("bool", True, "refuse"), Attack("numpy int", np.int64(value), "same")]
    elif kind == "float":
        out += [Attack("NaN", math.nan, "refuse"), Attack("inf", math.inf, "refuse"),
                Attack("string", "spam", "refuse")]
        if value is not None:
            out += [Attack("numpy float", np.float64(value), "same")]
    elif kind == "array":
        v = np.asarray(value)
        out += [Attack("string", "spam", "refuse"), Attack("NaN", _with_nonfinite(v, np.nan), "any"),
                Attack("inf", _with_nonfinite(v, np.inf), "any"), Attack("empty axis", _empty_axis(v), "finite"),
                Attack("non-contiguous view", _noncontiguous(v), "same"),
                Attack("read-only broadcast view", np.broadcast_to(v, v.shape), "same"),
                Attack("nested list", v.tolist(), "same")]
        if v.dtype.kind == "f":
            out += [Attack("huge (1e30)", v * 1e30, "finite"), Attack("tiny (1e-30)", v * 1e-30, "finite"),
                    Attack("subnormal (1e-310)", v * 1e-310, "finite"),
                    Attack("float16", v.astype(np.float16), "finite"), Attack("float32", v.astype(np.float32), "finite")]
    elif kind == "mask":
        v = np.asarray(value)
        out += [Attack("int mask", v.astype(int), "refuse"), Attack("float mask", v.astype(float), "refuse"),
                Attack("wrong shape", v[..., :-1], "refuse"), Attack("string", "spam", "refuse"),
                Attack("nothing allowed", np.zeros_like(v), "finite"),
                Attack("non-contiguous view", _noncontiguous(v), "same")]
    elif kind == "tokens":
        v = np.asarray(value) if not isinstance(value, list) else value
        if isinstance(v, np.ndarray):
            low = v.copy()
            low.flat[0] = -1
            high = v.copy()
            high.flat[0] = spec.bound
            out += [Attack("token -1", low, "refuse"), Attack("token out of range", high, "refuse"),
                    Attack("float tokens", v + 0.5, "refuse"), Attack("bool tokens", v > 0, "refuse"),
                    Attack("int32 tokens", v.astype(np.int32), "same")]
        out += [Attack("string", "spam", "refuse")]
    elif kind == "option":
        options = spec.options
        if isinstance(value, str):
            out += [Attack("unknown option", "nope", "refuse"), Attack("misspelled", value[:-1], "refuse"),
                    Attack("upper case", value.upper(), "refuse"), Attack("wrong type", 3, "refuse")]
        else:
            out += [Attack("unknown option", max(options) + 1, "refuse"), Attack("negative", -value, "refuse"),
                    Attack("float", value + 0.5, "refuse"), Attack("bool", True, "refuse")]
    elif kind == "scaling":
        out += [Attack("misspelled key", {"tpye": "linear", "factor": 2.0}, "refuse"),
                Attack("extra key", {"type": "linear", "factor": 2.0, "beta_fst": 3.0}, "refuse"),
                Attack("unknown type", {"type": "nope", "factor": 2.0}, "refuse"),
                Attack("string", "garbage", "refuse"),
                Attack("NaN factor", {"type": "linear", "factor": math.nan}, "refuse"),
                Attack("negative factor", {"type": "ntk", "factor": -2.0}, "refuse")]
    elif kind == "flag":
        out += [Attack("string", "yes", "refuse"), Attack("int 2", 2, "refuse")]
    elif kind in ("object", "rng"):
        out += [Attack("string", "spam", "refuse"), Attack("int", 3, "refuse")]
    return out


# ----------------------------------------------------------------------------- running one call
def leaves(value, depth=0):
    """The numbers in a result: arrays, floats, ints, in tuples, lists, dicts and dataclasses."""
    if depth > 4:
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fcbiu":
            yield value
    elif isinstance(value, (bool, int, float, complex, np.number, np.bool_)):
        yield np.asarray(value)
    elif isinstance(value, dict):
        for k in value:
            yield from leaves(value[k], depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from leaves(v, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from leaves(getattr(value, f.name), depth + 1)


def all_finite(value) -> bool:
    return all(np.isfinite(a).all() for a in leaves(value) if a.dtype.kind in "fc")


def same(a, b) -> bool:
    la, lb = list(leaves(a)), list(leaves(b))
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if x.shape != y.shape:
            return False
        if x.dtype.kind in "fc" or y.dtype.kind in "fc":
            if not np.allclose(x, y, rtol=1e-6, atol=1e-12, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def call(fn, kwargs):
    """Run fn(**kwargs) -> ("ok", result) or ("raised", exception); figures closed after."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                return "ok", fn(**{k: _copy(v) for k, v in kwargs.items()})
    except Exception as exc:  # noqa: BLE001 - the class is what is checked
        return "raised", exc
    finally:
        import matplotlib.pyplot as plt
        plt.close("all")


def _copy(value):
    """A deep copy where one can be made (shared objects must not carry one call's changes to the next)."""
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - widgets cannot be copied; they are made fresh per call anyway
        return value


_BASE: dict[str, tuple] = {}


def base_call(qualname):
    """(kwargs, specs, outcome, result-or-exception), built and run once per callable."""
    if qualname not in _BASE:
        fn = at.FUNCS[qualname]
        try:
            kwargs, specs, missing = at.base_kwargs(qualname, fn)
        except Exception as exc:  # noqa: BLE001
            _BASE[qualname] = ({}, {}, "unbuilt", exc)
            return _BASE[qualname]
        if missing:
            _BASE[qualname] = (kwargs, specs, "missing", missing)
        else:
            _BASE[qualname] = (kwargs, specs) + call(fn, kwargs)
    return _BASE[qualname]


def names_argument(message: str, param: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(param)}(?![A-Za-z0-9_])", message) is not None


def check_contract(qualname, param, attack, outcome, result, base_result):
    """The contract for one attacked call; a failure message, or None when it held."""
    where = f"{qualname}({param}=<{attack.label}>)"
    if outcome == "raised":
        exc = result
        text = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, ALLOWED) or type(exc).__name__ == "TraitError":
            return f"{where} raised {text[:300]}; want ValueError/TypeError naming {param!r}"
        if INTERNAL.search(str(exc)):
            return f"{where} raised an internal message: {text[:300]}"
        if not names_argument(str(exc), param) and attack.expect == "refuse":
            return f"{where} raised without naming {param!r}: {text[:300]}"
        return None
    if attack.expect == "refuse":
        return f"{where} was accepted silently (returned {type(result).__name__}); want a ValueError naming {param!r}"
    if attack.expect in ("finite", "same") and all_finite(base_result) and not all_finite(result):
        return f"{where} returned NaN or inf from finite input"
    if attack.expect == "same" and not same(result, base_result):
        return f"{where} returned a different result for the same numbers in another container"
    return None


def attack_plan(qualname):
    """[(param, Attack)] for one callable, from its valid call."""
    kwargs, specs, outcome, _ = base_call(qualname)
    if outcome != "ok":
        return []
    fn = at.FUNCS[qualname]
    defaults = {p.name: p.default for p in at.params_of(fn)}
    plan = []
    for name, spec in specs.items():
        if spec.kind == "free":
            continue
        value = kwargs[name] if name in kwargs else defaults[name]
        if value is None and spec.kind not in ("scaling", "float"):
            value = spec.make(at.WORLD)
            if value is None:
                continue
        required = defaults[name] is inspect_empty
        plan += [(name, a) for a in attacks(name, spec, value, required)]
    return plan


inspect_empty = __import__("inspect").Parameter.empty
TARGETS = sorted(q for q, fn in at.FUNCS.items() if not at.is_record(fn) and not at.exempt(q))


# ----------------------------------------------------------------------------- the tests
def test_every_public_callable_has_a_strategy():
    """Every public callable (records and EXEMPT aside) has a valid call that the table builds and runs."""
    problems = {}
    for q in TARGETS:
        _, _, outcome, detail = base_call(q)
        if outcome == "missing":
            problems[q] = f"no Spec for {detail}: add them to attack_table.PARAMS or OVERRIDES"
        elif outcome == "unbuilt":
            problems[q] = f"its valid call could not be built: {type(detail).__name__}: {detail}"
        elif outcome == "raised":
            problems[q] = f"its valid call raised {type(detail).__name__}: {str(detail)[:200]}"
    new = {q: why for q, why in problems.items() if q not in known.UNBUILT}
    assert not new, "\n".join(f"{q}: {why}" for q, why in sorted(new.items()))
    built = sorted(set(known.UNBUILT) - set(problems))
    assert not built, f"these callables build now: remove them from attack_known.UNBUILT: {built}"


def test_the_surface_is_found_by_introspection():
    """The walk finds the core, lessons, views and widgets (a broken walk would attack nothing)."""
    modules = {q.rsplit(".", 1)[0] for q in TARGETS}
    for pkg in ("mha_course.lessons.", "mha_course.views.", "mha_course.widgets."):
        assert any(m.startswith(pkg) for m in modules), pkg
    assert {"mha_course.attention.scaled_dot_product_attention", "mha_course.kvcache.KVCache"} <= set(TARGETS)
    assert len(TARGETS) > 250
    assert set(at.EXEMPT) <= set(at.FUNCS), set(at.EXEMPT) - set(at.FUNCS)


def _known(q):
    """A callable with a listed open break: an expected failure, strict (attack_known says why)."""
    if q in known.BREAKS:
        return pytest.param(q, marks=pytest.mark.xfail(strict=True, reason="listed in attack_known.BREAKS"))
    return q


@pytest.mark.parametrize("qualname", [_known(q) for q in TARGETS])
def test_attack(qualname):
    """One public callable under its attacks: each example perturbs one argument of its valid call."""
    plan = attack_plan(qualname)
    if not plan:
        pytest.skip("no valid call (test_every_public_callable_has_a_strategy fails for it) or nothing to attack")
    fn = at.FUNCS[qualname]
    kwargs, _, _, base_result = base_call(qualname)
    n = PROFILE.max_examples // 3 if qualname.startswith(SLOW_MODULES) else PROFILE.max_examples
    failures = []

    @settings(PROFILE, max_examples=max(n, 2))
    @given(st.sampled_from(plan))
    def run(step):
        param, attack = step
        outcome, result = call(fn, {**kwargs, param: attack.value})
        problem = check_contract(qualname, param, attack, outcome, result, base_result)
        if problem:
            failures.append(problem)

    run()
    assert not failures, "\n".join(sorted(set(failures)))
