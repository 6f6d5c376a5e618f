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

Run ``python -m mha_course.check.mutants --report`` for the per-exercise table of the course.
"""
from __future__ import annotations

import ast
import copy
import linecache
import types
from typing import Callable, NamedTuple

__all__ = ["CATEGORIES", "Mutation", "Mutant", "mutants"]

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
}


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
        _locate(n, node, walk=False)
    try:
        code = compile(module, fn.__code__.co_filename, "exec", dont_inherit=True)
    finally:
        if inner is None:
            node.decorator_list = saved
    outer_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    return next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.__code__.co_name)


def _locate(tree, like, walk=True):
    """Give every node without a position the position of ``like`` (new nodes, the wrapper)."""
    for n in ast.walk(tree) if walk else (tree,):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            n.lineno, n.col_offset = like.lineno, like.col_offset
            n.end_lineno, n.end_col_offset = like.lineno, like.col_offset


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


# ---------------------------------------------------------------------------------------
# the sites: (category, apply, undo, before, after, params)
# ---------------------------------------------------------------------------------------

_OPERATORS = {ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Div], ast.Div: [ast.Mult],
              ast.MatMult: [ast.Mult], ast.Pow: [ast.Mult], ast.Mod: [ast.FloorDiv],
              ast.BitAnd: [ast.BitOr], ast.BitOr: [ast.BitAnd], ast.BitXor: [ast.BitOr]}
_COMPARISONS = {ast.Lt: [ast.LtE, ast.Gt], ast.LtE: [ast.Lt, ast.GtE], ast.Gt: [ast.GtE, ast.Lt],
                ast.GtE: [ast.Gt, ast.LtE], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq],
                ast.In: [ast.NotIn], ast.NotIn: [ast.In], ast.Is: [ast.IsNot], ast.IsNot: [ast.Is]}
_REDUCTIONS = ("sum", "mean", "max", "min")
_ALIASES = {"amax": "max", "amin": "min", "nansum": "sum", "nanmean": "mean"}
_AXIS_FIRST = {"sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "cumsum", "prod", "std",
               "var", "squeeze", "softmax", "log_softmax", "any", "all", "cumprod", "logsumexp"}
_MODULE_AXIS = {**{f: (1,) for f in _AXIS_FIRST | {"expand_dims", "flip", "concatenate", "stack", "sort",
                                                    "argsort", "unique"}},
                "swapaxes": (1, 2), "moveaxis": (1, 2), "split": (2,), "array_split": (2,), "roll": (2,),
                "take": (2,), "repeat": (2,), "diff": (2,), "take_along_axis": (2,)}
_METHOD_AXIS = {**{f: (0,) for f in _AXIS_FIRST | {"sort", "argsort"}}, "swapaxes": (0, 1), "repeat": (1,),
                "take": (1,)}
_DROPPABLE = {"exp", "log", "abs", "tanh", "softmax", "float", "int", "round", "asarray", "array", "maximum"}
_ROUNDING = ("floor", "ceil", "round")
_NP = "__import__('numpy')"
_OPS_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
             ast.Mod: "%", ast.FloorDiv: "//", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


def _text(node) -> str:
    if isinstance(node, (ast.If, ast.While)):  # a compound statement: its header only
        return f"{'if' if isinstance(node, ast.If) else 'while'} {_text(node.test)}:"
    return ast.unparse(node).replace(_NP, "np")


def _np_call(name, *args):
    return ast.Call(func=ast.Attribute(value=ast.parse(_NP, mode="eval").body, attr=name, ctx=ast.Load()),
                    args=list(args), keywords=[])


def _const(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(-value))
    return ast.Constant(value)


def _int_of(node):
    """The int a node spells (``-1`` included), or None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _call_name(call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


class _Sites:
    """Walks a function's tree and lists every change as (category, slot, new node, params).

    A slot is (parent, field, index): where the new node goes (``index`` None for a plain field).
    A statement swap is a slot ``(parent, field, (i, i + 1))`` with the new node None.
    """

    def __init__(self, root, fn_globals):
        self.root, self.globals, self.sites = root, fn_globals, []

    def add(self, category, slot, new, params=()):
        self.sites.append((category, slot, new, tuple(params)))

    def is_module(self, node) -> bool:
        return isinstance(node, ast.Name) and isinstance(self.globals.get(node.id, None), types.ModuleType)

    # -- walking --------------------------------------------------------------------------
    def walk(self):
        body = self.root.body
        if isinstance(body, list):
            start = 1 if body and _is_docstring(body[0]) else 0
            self.statements(self.root, "body", start)
        else:
            self.expression(self.root, "body", None)
        return self.sites

    def statements(self, parent, field, start=0):
        body = getattr(parent, field)
        for i in range(start, len(body)):
            self.statement(body[i], parent, field, i)
        simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)
        for i in range(start, len(body) - 1):
            a, b = body[i], body[i + 1]
            if isinstance(a, simple) and isinstance(b, simple):
                texts = _text(a) + " " + _text(b)
                both = "softmax" in texts and any(w in texts for w in ("mask", "where", "inf"))
                self.add("mask-after-softmax" if both else "statement-order", (parent, field, (i, i + 1)), None)

    def statement(self, s, parent, field, i):
        if isinstance(s, (ast.Raise, ast.Assert, ast.Pass, ast.Import, ast.ImportFrom, ast.Global,
                          ast.Nonlocal)) or _is_docstring(s):
            return
        if isinstance(s, ast.If) and all(isinstance(b, (ast.Raise, ast.Assert)) for b in s.body):
            self.statements(s, "orelse")  # an argument check: its test and body only matter for bad input
            return
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.statements(s, "body", 1 if s.body and _is_docstring(s.body[0]) else 0)
            return
        if isinstance(s, ast.AugAssign):
            for op in _OPERATORS.get(type(s.op), []):
                self.add("operator", (s, "op", None), op(), (("from", _OPS_TEXT[type(s.op)]), ("to", _OPS_TEXT[op])))
            self.add("dropped-term", (parent, field, i), ast.Pass())
        if isinstance(s, (ast.If, ast.While)):
            self.add("negation", (s, "test", None), ast.UnaryOp(op=ast.Not(), operand=s.test))
        if isinstance(s, ast.Return) and s.value is not None and not isinstance(s.value, ast.Tuple):
            self.add("negation", (s, "value", None), ast.UnaryOp(op=ast.USub(), operand=s.value))
        for name, value in ast.iter_fields(s):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self.statements(s, name)
            elif isinstance(value, list):
                for j, v in enumerate(value):
                    if isinstance(v, ast.expr):
                        self.expression(s, name, j)
            elif isinstance(value, ast.expr) and not (isinstance(s, ast.AnnAssign) and name == "annotation"):
                self.expression(s, name, None)

    def expression(self, parent, field, index):
        node = getattr(parent, field) if index is None else getattr(parent, field)[index]
        if isinstance(node, (ast.JoinedStr, ast.Lambda)) or \
                (isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))):
            return
        slot = (parent, field, index)
        handler = getattr(self, "on_" + type(node).__name__, None)
        if handler is not None:
            handler(node, slot)
        for name, value in ast.iter_fields(node):
            if isinstance(node, ast.Call) and name == "keywords":
                for kw in value:
                    self.expression(kw, "value", None)
            elif isinstance(value, list):
                for j, v in enumerate(value):
                    if isinstance(v, ast.expr):
                        self.expression(node, name, j)
            elif isinstance(value, ast.expr):
                self.expression(node, name, None)

    # -- one handler per node type ----------------------------------------------------------
    def on_BinOp(self, node, slot):
        op = type(node.op)
        for new in _OPERATORS.get(op, []):
            self.add("operator", slot, ast.BinOp(node.left, new(), node.right), (("from", _OPS_TEXT[op]), ("to", _OPS_TEXT[new])))
        if op in (ast.Div, ast.FloorDiv):
            other = ast.FloorDiv if op is ast.Div else ast.Div
            self.add("floor-division", slot, ast.BinOp(node.left, other(), node.right))
        if op in _OPS_TEXT:
            self.add("dropped-term", slot, node.left, (("kept", "left"),))
            if op in (ast.Add, ast.Mult, ast.MatMult, ast.BitAnd, ast.BitOr, ast.Sub):
                self.add("dropped-term", slot, node.right if op is not ast.Sub else ast.UnaryOp(ast.USub(), node.right),
                         (("kept", "right"),))
        if op in (ast.Add, ast.Sub):
            self.add("doubled-term", slot, ast.BinOp(node.left, node.op, ast.BinOp(node.right, ast.Add(), node.right)),
                     (("doubled", "right"),))
            self.add("doubled-term", slot, ast.BinOp(ast.BinOp(node.left, ast.Add(), node.left), node.op, node.right),
                     (("doubled", "left"),))
        if op is ast.Div:
            self.add("reciprocal", slot, ast.BinOp(node.right, ast.Div(), node.left))
            if not (isinstance(node.right, ast.Call) and _call_name(node.right) == "sqrt"):
                self.add("sqrt", slot, ast.BinOp(node.left, ast.Div(), _np_call("sqrt", node.right)), (("added", True),))
            self.add("rounding", slot, _np_call("floor", node), (("added", "floor"),))
        elif op in (ast.Sub, ast.MatMult, ast.Pow, ast.Mod, ast.FloorDiv):
            self.add("swapped-arguments", slot, ast.BinOp(node.right, node.op, node.left))

    def on_Compare(self, node, slot):
        for k, op in enumerate(node.ops):
            for new in _COMPARISONS.get(type(op), []):
                ops = list(node.ops)
                ops[k] = new()
                self.add("comparison", slot, ast.Compare(node.left, ops, node.comparators))
        parent = slot[0]
        if not (isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.BoolOp, ast.UnaryOp)) or
                (isinstance(parent, ast.Call) and _call_name(parent) in ("any", "all", "bool"))):
            self.add("mask-polarity", slot, ast.UnaryOp(ast.Invert(), node), (("added", "~"),))

    def on_UnaryOp(self, node, slot):
        if _int_of(node) is not None or (isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
                                         and type(node.operand.value) is float):
            self.number(-node.operand.value, slot)
            self.add("negation", slot, node.operand, (("removed", "-"),))
            return
        if isinstance(node.op, (ast.USub, ast.Not)):
            self.add("negation", slot, node.operand, (("removed", "-" if isinstance(node.op, ast.USub) else "not"),))
        elif isinstance(node.op, ast.Invert):
            self.add("mask-polarity", slot, node.operand, (("removed", "~"),))

    def on_Constant(self, node, slot):
        v = node.value
        if isinstance(v, bool):
            self.add("constant", slot, ast.Constant(not v), (("from", v), ("to", not v)))
        elif type(v) in (int, float) and not (isinstance(slot[0], ast.UnaryOp) and isinstance(slot[0].op, ast.USub)):
            self.number(v, slot)

    def number(self, v, slot):
        if isinstance(v, int):
            choices = [v + 1, v - 1]
        else:
            if v != v or v in (float("inf"), float("-inf")):
                return
            choices = [v * 2, v / 2, 1.0, -v] if v != 0 else [1.0, -1.0]
        seen = {v}
        for c in choices:
            if c not in seen:
                seen.add(c)
                self.add("constant", slot, _const(c), (("from", v), ("to", c)))

    def on_Attribute(self, node, slot):
        if node.attr in ("T", "mT") and isinstance(node.ctx, ast.Load):
            self.add("transpose", slot, node.value)

    def on_Subscript(self, node, slot):
        pieces = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        owner, field = (node.slice, "elts") if isinstance(node.slice, ast.Tuple) else (node, "slice")
        for k, piece in enumerate(pieces):
            index = k if owner is not node else None
            if isinstance(piece, ast.Slice):
                self.slice_bounds(piece)
            elif not isinstance(piece, ast.Constant) and _int_of(piece) is None:
                for d, op in ((1, ast.Add), (-1, ast.Sub)):
                    self.add("index", (owner, field, index), ast.BinOp(piece, op(), ast.Constant(1)), (("by", d),))
        value = node.value
        if isinstance(node.ctx, ast.Load) and isinstance(value, ast.Call) and _int_of(node.slice) == 0 and (
                _call_name(value) == "nonzero" or (_call_name(value) == "where" and len(value.args) == 1)):
            self.occurrences(node, slot)

    def slice_bounds(self, piece):
        for bound in ("lower", "upper"):
            b = getattr(piece, bound)
            if b is None:
                continue
            for d, op in ((1, ast.Add), (-1, ast.Sub)):
                k = _int_of(b)
                new = _const(k + d) if k is not None else ast.BinOp(b, op(), ast.Constant(1))
                self.add("slice-bound", (piece, bound, None), new, (("bound", bound), ("by", d)))
        if _int_of(piece.step) == -1:
            self.add("reversed", (piece, "step", None), None)

    def occurrences(self, node, slot):
        for category, cut in (("first-occurrence", ast.Slice(None, ast.Constant(1), None)),
                              ("last-occurrence", ast.Slice(_const(-1), None, None))):
            self.add(category, slot, ast.Subscript(node, cut, ast.Load()))

    def on_Call(self, node, slot):
        name = _call_name(node)
        func = node.func
        on_module = isinstance(func, ast.Attribute) and self.is_module(func.value)
        is_method = isinstance(func, ast.Attribute) and not on_module
        first = func.value if is_method else (node.args[0] if node.args else None)
        base = _ALIASES.get(name, name)
        if base in _REDUCTIONS and (isinstance(func, ast.Attribute) or base in ("max", "min")):
            for other in _REDUCTIONS:
                if other != base and (isinstance(func, ast.Attribute) or other in ("max", "min")):
                    new_func = copy.copy(func)
                    if isinstance(func, ast.Attribute):
                        new_func.attr = other
                    else:
                        new_func.id = other
                    self.add("reduction", (node, "func", None), new_func, (("from", base), ("to", other)))
        if first is not None and not (is_method and name in ("sum", "mean", "max", "min")):
            if name == "sqrt":
                self.add("sqrt", slot, first, (("dropped", True),))
            elif name in ("transpose", "swapaxes", "moveaxis"):
                self.add("transpose", slot, first)
            elif name in ("flip", "reversed", "fliplr", "flipud"):
                self.add("reversed", slot, first)
            elif name in _ROUNDING:
                for other in _ROUNDING:
                    if other != name and isinstance(func, ast.Attribute):
                        new_func = copy.copy(func)
                        new_func.attr = other
                        self.add("rounding", (node, "func", None), new_func, (("from", name), ("to", other)))
                self.add("rounding", slot, first, (("dropped", name),))
            elif name in _DROPPABLE and not is_method:
                self.add("dropped-call", slot, first, (("dropped", name),))
        if name in ("flatnonzero", "argwhere"):
            self.occurrences(node, slot)
        self.axes(node, name, is_method)
        self.arguments(node, name)

    def axes(self, node, name, is_method):
        for kw in node.keywords:
            if kw.arg == "axis":
                self.axis_choices(kw, "value", None, kw.value)
            elif kw.arg == "axes" and isinstance(kw.value, (ast.Tuple, ast.List)):
                self.permutation(kw.value)
            elif kw.arg == "keepdims" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool):
                self.add("keepdims", (kw, "value", None), ast.Constant(not kw.value.value))
        positions = (_METHOD_AXIS if is_method else _MODULE_AXIS).get(name, ())
        for p in positions:
            if p < len(node.args):
                self.axis_choices(node, "args", p, node.args[p])
        if name == "transpose":
            args = node.args if is_method else node.args[1:]
            if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
                self.permutation(args[0])
            elif len(args) > 1:
                self.permutation(node, "args", 0 if is_method else 1)

    def axis_choices(self, parent, field, index, value):
        k = _int_of(value)
        if k is None:
            return
        for c in dict.fromkeys([k - 1, k + 1, -1, -2, 0, None]):
            if c != k:
                new = ast.Constant(None) if c is None else _const(c)
                self.add("axis", (parent, field, index), new, (("axis", k), ("to", c)))

    def permutation(self, holder, field="elts", start=0):
        elts = getattr(holder, field)
        for i in range(start, len(elts) - 1):
            swapped = list(elts)
            swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
            new = copy.copy(holder)
            setattr(new, field, swapped)
            self.add("axis", _whole(holder, self.root), new, (("swapped", (i - start, i - start + 1)),))

    def arguments(self, node, name):
        args = node.args
        for i in range(len(args) - 1):
            a, b = args[i], args[i + 1]
            if isinstance(a, ast.Starred) or isinstance(b, ast.Starred) or ast.dump(a) == ast.dump(b):
                continue
            swapped = list(args)
            swapped[i], swapped[i + 1] = b, a
            category = "mask-polarity" if name == "where" and i == 1 else "swapped-arguments"
            self.add(category, (node, "args", None), swapped, (("swapped", (i, i + 1)),))


def _whole(holder, root):
    """The slot that holds ``holder`` (a tuple or a call) in the tree under ``root``."""
    for parent in ast.walk(root):
        for name, value in ast.iter_fields(parent):
            if value is holder:
                return (parent, name, None)
            if isinstance(value, list):
                for j, v in enumerate(value):
                    if v is holder:
                        return (parent, name, j)
    raise ValueError("node not in tree")  # pragma: no cover (a bug of this module)


def _is_docstring(s) -> bool:
    return isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)


def _get(slot):
    parent, field, index = slot
    value = getattr(parent, field)
    return value if index is None else value[index]


def _put(slot, new):
    parent, field, index = slot
    if index is None:
        setattr(parent, field, new)
    else:
        getattr(parent, field)[index] = new


_LEAVES = (ast.Constant, ast.Name, ast.operator, ast.cmpop, ast.expr_context)


def _parents(root) -> dict:
    return {id(child): parent for parent in ast.walk(root) for child in ast.iter_child_nodes(parent)}


def _context(slot, old, parents):
    """The node whose code shows a change at ``slot``: the replaced expression, or the nearest
    expression (or statement) around it when that is a leaf (a number, a name, an operator)."""
    if isinstance(old, ast.expr) and not isinstance(old, _LEAVES) and not (
            isinstance(old, ast.UnaryOp) and isinstance(old.operand, ast.Constant)):
        return None
    node = slot[0]
    while not isinstance(node, (ast.expr, ast.stmt)) or isinstance(node, (ast.Tuple, ast.Slice)):
        node = parents.get(id(node))
        if node is None:
            return slot[0]
    return node


def _apply(slot, new, parents):
    """Make the change; return the function that undoes it, and the before/after text."""
    parent, field, index = slot
    if new is None and isinstance(index, tuple):  # swap two statements
        body = getattr(parent, field)
        i, j = index
        before = f"{_text(body[i])}; {_text(body[j])}"
        body[i], body[j] = body[j], body[i]

        def undo():
            body[i], body[j] = body[j], body[i]
        return undo, before, f"{_text(body[i])}; {_text(body[j])}"
    old = _get(slot)
    if isinstance(new, ast.AST) and hasattr(old, "lineno"):
        _locate(new, old)
    holder = _context(slot, old, parents)
    before = _text(holder) if holder is not None else _text(old) if isinstance(old, ast.AST) else repr(old)
    _put(slot, new)
    after = _text(holder) if holder is not None else _text(new) if isinstance(new, ast.AST) else repr(new)

    def undo():
        _put(slot, old)
    return undo, before, after


def _mutated(fn, depth, label, seen, exclude=()):
    node = _node_of(fn)
    first_line = node.lineno
    sites = _Sites(node, fn.__globals__).walk()
    out, parents = [], _parents(node)
    seen.add(_compiled(node, fn))
    for category, slot, new, params in sites:
        undo, before, after = _apply(slot, new, parents)
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
    if depth > 0:
        for name, helper in _helpers(node, fn):
            if any(helper is e for e in exclude) or name.lstrip("_").startswith("check_"):
                continue
            for m in _mutated(helper, depth - 1, f"{label}>{name}", set(), exclude):
                out.append(Mutant(_rebound(fn, name, m.fn), m.mutation))
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


def mutants(fn, depth: int = 0, categories=None, exclude=()) -> list:
    """The mutants of ``fn``: a list of :class:`Mutant` (``fn``: a function with ``fn``'s
    signature, globals, defaults and closure; ``mutation``: a :class:`Mutation`).

    ``fn``: a Python function or lambda whose source file is readable (a reference solution).
    ``depth``: 0 mutates ``fn`` alone; 1 also the package helpers it calls by name (see the module
    docstring). ``categories``: keep only these keys of :data:`CATEGORIES` (None: all).
    ``exclude``: functions whose code is not mutated as helpers (e.g. the references of other
    exercises, checked by their own checkers).
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
    found = _mutated(fn, depth, fn.__name__, set(), tuple(exclude))
    return [m for m in found if categories is None or m.mutation.category in categories]
