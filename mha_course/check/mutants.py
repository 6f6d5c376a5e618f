"""Mutants of a reference solution: each a small change to its code, named in one vocabulary.

``mutants(fn)`` parses ``fn``'s source (the whole file, so a lambda inside a call is found too),
changes one thing at a time and compiles each change into a function that runs with ``fn``'s
globals, defaults and closure. The tests use the mutants to prove an exercise's cases reject every
wrong answer of this kind (``tests/check/test_mutants.py``); the diagnosis uses them to name a
learner's mistake by the mutant that reproduces it.

>>> import numpy as np
>>> def ref(x):
...     return x.sum(axis=-1) / 2
>>> ms = mutants(ref)
>>> sorted({m.mutation.category for m in ms})[:4]
['axis', 'constant', 'dropped-term', 'floor-division']
>>> m = next(m for m in ms if m.mutation.category == "axis")
>>> m.mutation.before, m.mutation.after, m.mutation.params
('x.sum(axis=-1)', 'x.sum(axis=-2)', (('axis', -1), ('to', -2)))
>>> float(m.fn(np.ones((2, 3)))[0])
1.0

What is never mutated (it cannot change a result on valid input): the docstring, strings and
f-strings, ``raise`` and ``assert`` statements, an ``if`` whose body only raises (an argument
check), decorators, defaults and annotations. Identical mutants are listed once (the first
category that produces the code wins, in the order of :data:`CATEGORIES`' use while walking the
code top-down). The order is deterministic: the same function gives the same list.

``depth=1`` also mutates the helpers the function calls by name (plain Python functions of
``mha_course`` outside ``_validate`` and ``check``, not argument checks named ``check_*`` or
``_check_*``, not those in ``exclude``), each reached through a copy of the caller's globals, so
the reference is unchanged; ``depth=0`` mutates the function alone.

Where a change can be made is :mod:`.mutant_sites`' job; this module compiles each change into a
function. Run ``python -m tests.check.mutation_run`` for the per-exercise table of the course.
"""
from __future__ import annotations

import ast
import copy
import linecache
import types
from typing import Callable, NamedTuple

from .mutant_sites import Sites, apply_change, locate, parents_of

__all__ = ["CATEGORIES", "DIAGNOSIS_ONLY", "Mutation", "Mutant", "mutants"]

CATEGORIES = {
    "operator": "an arithmetic operator replaced (+ and -, * and /, ** and @ by *, & and |)",
    "comparison": "a comparison replaced (< and <=, > and >=, < and >, == and !=)",
    "constant": "a number changed (an int by 1, a float doubled, halved, made 1 or negated, True and False)",
    "axis": "another axis (axis=, a positional axis, a permutation's neighbours swapped)",
    "keepdims": "keepdims switched",
    "slice-bound": "a slice bound moved by one",
    "index": "an index moved by one",
    "dropped-term": "one operand of a binary operation dropped, or an in-place update left out",
    "doubled-term": "a term of a sum counted twice",
    "swapped-arguments": "two neighbouring arguments (or operands) swapped",
    "reciprocal": "a / b as b / a",
    "reduction": "sum, mean, max and min swapped",
    "dropped-call": "exp, log, abs, tanh, softmax or a cast left out (its argument kept)",
    "sqrt": "a square root dropped, or one added to a divisor",
    "transpose": "a transpose (.T, transpose, swapaxes, moveaxis) left out",
    "reversed": "a reversal (flip, reversed, [::-1]) left out",
    "rounding": "floor, ceil and round swapped, or a division rounded down",
    "floor-division": "/ and // swapped",
    "negation": "a minus sign or a not added or removed",
    "mask-polarity": "a mask inverted (~ added or removed, np.where's branches swapped)",
    "statement-order": "two neighbouring statements in the other order",
    "mask-after-softmax": "the mask and the softmax in the other order",
    "first-occurrence": "only the first of the positions found",
    "last-occurrence": "only the last of the positions found",
    "subscript": "(diagnosis only) x[:, i] read as x[i] or x[0, i] in a statement",
    "replaced-name": "(diagnosis only) one argument read where another belongs",
    "finite-infinity": "(diagnosis only) a large finite number (1e9) where np.inf belongs",
    "floored-terms": "(diagnosis only) (a + b) // c as a // c + b // c: each term rounded down on its own",
    "other-function": "(diagnosis only) another numpy function for one (np.maximum for np.logaddexp, np.stack for "
                      "np.concatenate): .slips.OTHER_FUNCTIONS",
    "regrouped": "(diagnosis only) the brackets of two operations moved (a * b + c as a * (b + c))",
    "numbers-swapped": "(diagnosis only) two numbers of one expression in each other's place",
    "open-slice": "(diagnosis only) an open slice where one index belongs (x[i:] for x[i])",
    "size-shifted": "(diagnosis only) a size one more or one less inside a formula (d_model - 1 for d_model)",
    "pseudo-inverse": "(diagnosis only) np.linalg.pinv(x) where the transpose of x belongs",
    "inside-out": "(diagnosis only) an element-wise function and a reduction in the other order (abs of a sum)",
    "unpack-order": "(diagnosis only) a shape unpacked in another order (T, B, D = x.shape)",
    "negative-stop": "(diagnosis only) a slice stop n - k written -k (empty for k = 0)",
}
DIAGNOSIS_ONLY = frozenset({"subscript", "replaced-name", "finite-infinity", "floored-terms", "other-function",
                            "regrouped", "numbers-swapped", "open-slice", "size-shifted",
                            "pseudo-inverse", "inside-out",
                            "unpack-order", "negative-stop"})  # made only with ``extended=True``


class Mutation(NamedTuple):
    """What one mutant changed.

    ``category`` is a key of :data:`CATEGORIES`; ``function`` the name of the mutated function
    (the reference, or ``caller>helper`` for a helper it calls); ``filename`` and ``line`` where the
    changed code is,
    ``offset`` the same counted from the function's first line;
    ``before``/``after`` the code of the changed node (``np.`` for an added numpy call);
    ``params`` a tuple of (name, value) pairs (``(("axis", -1), ("to", -2))``).
    """
    category: str
    function: str
    filename: str
    line: int
    offset: int
    before: str
    after: str
    params: tuple = ()

    @property
    def id(self) -> str:
        """A stable key for tables: ``function:line-offset category: before -> after`` (the line
        counted from the function's first line, so edits elsewhere in the file keep it)."""
        return f"{self.function}+{self.offset} {self.category}: {self.before} -> {self.after}"

    def params_dict(self) -> dict:
        return dict(self.params)


class Mutant(NamedTuple):
    """``fn``: the mutated function (same signature as the reference); ``mutation``: what changed."""
    fn: Callable
    mutation: Mutation


# ---------------------------------------------------------------------------------------
# finding a function's syntax tree
# ---------------------------------------------------------------------------------------

_TREES: dict = {}


def _file_tree(filename):
    lines = linecache.getlines(filename)
    key = (filename, len(lines), hash(tuple(lines)))
    if key not in _TREES:
        _TREES[key] = ast.parse("".join(lines), filename)
    return _TREES[key]


def _node_of(fn):
    """The FunctionDef or Lambda node of ``fn`` in its file (a deep copy)."""
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TypeError(f"mutants needs a Python function, got {type(fn).__name__}")
    tree = _file_tree(code.co_filename)
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            if first == code.co_firstlineno and node.name == code.co_name:
                found.append(node)
        elif isinstance(node, ast.Lambda) and code.co_name == "<lambda>" and node.lineno == code.co_firstlineno:
            args = tuple(a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs)
            if args == names:
                found.append(node)
    if not found:
        raise ValueError(f"cannot find the source of {getattr(fn, '__qualname__', fn)!r} in {code.co_filename}")
    if len(found) > 1:  # two lambdas with the same arguments on one line: the one whose code matches
        found = [n for n in found if _compiled(n, fn).co_code == code.co_code] or found
    return copy.deepcopy(found[0])


# ---------------------------------------------------------------------------------------
# compiling a changed tree into a function
# ---------------------------------------------------------------------------------------

_TYPE_PARAMS = {"type_params": []} if "type_params" in ast.FunctionDef._fields else {}


def _compiled(node, fn) -> types.CodeType:
    """The code object of the function ``node`` defines (free variables of ``fn`` stay free)."""
    free = fn.__code__.co_freevars
    if isinstance(node, ast.Lambda):
        inner = ast.Return(value=node)
    else:
        inner = None
        node.decorator_list, saved = [], node.decorator_list
    body = [inner] if inner else [node, ast.Return(value=ast.Name(id=node.name, ctx=ast.Load()))]
    outer = ast.FunctionDef(name="__mutant_outer__", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=v) for v in free], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=body, decorator_list=[], returns=None, **_TYPE_PARAMS)
    module = ast.Module(body=[outer], type_ignores=[])
    for n in (outer, *outer.args.args, *body, *([] if inner else [body[1].value])):
        locate(n, node, walk=False)
    try:
        code = compile(module, fn.__code__.co_filename, "exec", dont_inherit=True)
    finally:
        if inner is None:
            node.decorator_list = saved
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    return next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.__code__.co_name)


def _function(code, fn, globals_=None):
    closure = None
    if code.co_freevars:
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        closure = tuple(cells[v] for v in code.co_freevars)
    new = types.FunctionType(code, fn.__globals__ if globals_ is None else globals_, fn.__name__,
                             fn.__defaults__, closure)
    new.__kwdefaults__ = copy.copy(fn.__kwdefaults__)
    new.__qualname__, new.__doc__, new.__module__ = fn.__qualname__, fn.__doc__, fn.__module__
    return new


def _rebound(fn, name, replacement):
    """``fn`` reading ``replacement`` under the global ``name`` (through a copy of its globals)."""
    return _function(fn.__code__, fn, {**fn.__globals__, name: replacement})


def _mutated(fn, depth, label, seen, exclude=(), extended=False):
    node = _node_of(fn)
    first_line = node.lineno
    sites = Sites(node, fn.__globals__, extended).walk()
    out, parents = [], parents_of(node)
    seen.add(_compiled(node, fn))
    for category, slot, new, params in sites:
        undo, before, after = apply_change(slot, new, parents)
        try:
            try:
                code = _compiled(node, fn)
            except (SyntaxError, ValueError, TypeError):
                continue
            if code in seen:  # the same code as the reference or as an earlier mutant
                continue
            seen.add(code)
            line = getattr(slot[0], "lineno", first_line)
            mutation = Mutation(category, label, fn.__code__.co_filename, line, line - first_line, before, after,
                                params)
            out.append(Mutant(_function(code, fn), mutation))
        finally:
            undo()
    if extended:  # the same change at every site it fits: a belief applied throughout (axis=(-2, -1) in mean and var)
        out += _everywhere(node, fn, sites, parents, label, first_line, seen)
    if depth > 0:
        for name, helper in _helpers(node, fn):
            if any(helper is e for e in exclude) or name.lstrip("_").startswith("check_"):
                continue
            for m in _mutated(helper, depth - 1, f"{label}>{name}", set(), exclude, extended):
                out.append(Mutant(_rebound(fn, name, m.fn), m.mutation))
    return out


_EVERYWHERE = ("axis", "constant", "replaced-name")


def _everywhere(node, fn, sites, parents, label, first_line, seen) -> list:
    """One mutant per change (of :data:`_EVERYWHERE`) that fits two or more sites of ``node``, made at all of them."""
    groups = {}
    for category, slot, new, params in sites:
        if category in _EVERYWHERE and new is not None and not isinstance(slot[2], tuple):
            groups.setdefault((category, params, ast.dump(new) if isinstance(new, ast.AST) else repr(new)),
                              []).append((slot, new))
    out = []
    for (category, params, _), changes in groups.items():
        if len(changes) < 2:
            continue
        undos, texts = [], []
        try:
            for slot, new in changes:
                undo, before, after = apply_change(slot, copy.deepcopy(new), parents)
                undos.append(undo)
                texts.append((before, after))
            try:
                code = _compiled(node, fn)
            except (SyntaxError, ValueError, TypeError):
                continue
            if code in seen:
                continue
            seen.add(code)
            line = getattr(changes[0][0][0], "lineno", first_line)
            out.append(Mutant(_function(code, fn), Mutation(category, label, fn.__code__.co_filename, line,
                                                            line - first_line, texts[0][0], texts[0][1],
                                                            params + (("sites", len(changes)),))))
        finally:
            for undo in reversed(undos):
                undo()
    return out


def _helpers(node, fn):
    """(name, function) of the package's plain Python functions ``node`` calls by a global name."""
    found = {}
    local = {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id not in local:
            target = fn.__globals__.get(call.func.id)
            module = getattr(target, "__module__", "") or ""
            if (isinstance(target, types.FunctionType) and target is not fn and module.startswith("mha_course")
                    and not module.startswith(("mha_course._validate", "mha_course.check"))
                    and call.func.id not in found):
                found[call.func.id] = target
    return sorted(found.items())


def mutants(fn, depth: int = 0, categories=None, exclude=(), extended: bool = False) -> list:
    """The mutants of ``fn``: a list of :class:`Mutant` (``fn``: a function with ``fn``'s
    signature, globals, defaults and closure; ``mutation``: a :class:`Mutation`).

    ``fn``: a Python function or lambda whose source file is readable (a reference solution).
    ``depth``: 0 mutates ``fn`` alone; 1 also the package helpers it calls by name (see the module
    docstring). ``categories``: keep only these keys of :data:`CATEGORIES` (None: all).
    ``exclude``: functions whose code is not mutated as helpers (e.g. the references of other
    exercises, checked by their own checkers). ``extended``: also the slips only the diagnosis
    tries (* for +, + for *, % for //, - for /, a comparison's boundary moved by one).
    Deterministic; about 0.3 ms per mutant.
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise ValueError(f"depth={depth!r} must be an int >= 0 (0: the function alone, 1: and its helpers)")
    if categories is not None:
        unknown = sorted(set(categories) - set(CATEGORIES))
        if unknown:
            raise ValueError(f"unknown categories {unknown}; the categories are {sorted(CATEGORIES)}")
    if not isinstance(fn, types.FunctionType):
        raise TypeError(f"mutants needs a Python function (def or lambda), got {type(fn).__name__}")
    found = _mutated(fn, depth, fn.__name__, set(), tuple(exclude), bool(extended))
    return [m for m in found if categories is None or m.mutation.category in categories]
