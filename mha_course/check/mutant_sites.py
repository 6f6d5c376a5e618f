"""Where a function's code can be changed: the sites of :mod:`.mutants`, one per mistake a learner makes.

:class:`Sites` walks a function's syntax tree top-down and lists every change as (category, slot,
new node, params), in the categories of :data:`.mutants.CATEGORIES`; :func:`apply_change` makes one
change in place and returns how to undo it, with the code before and after (``np.`` for an added
numpy call).

>>> import ast
>>> tree = ast.parse("def f(x): return x.sum(axis=-1) / 2").body[0]
>>> sorted({category for category, *_ in Sites(tree, {}).walk()})[:3]
['axis', 'constant', 'dropped-term']
"""
from __future__ import annotations

import ast
import copy
import types

from . import slips

__all__ = ["Sites", "apply_change", "parents_of", "code_text", "locate"]


def locate(tree, like, walk=True):
    """Give every node without a position the position of ``like`` (new nodes, the wrapper)."""
    for n in ast.walk(tree) if walk else (tree,):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            n.lineno, n.col_offset = like.lineno, like.col_offset
            n.end_lineno, n.end_col_offset = like.lineno, like.col_offset

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
# only for the diagnosis (``extended``): slips a learner makes that the exercises' cases need not be proven against
_EXTENDED_OPERATORS = {ast.Mult: [ast.Add], ast.Add: [ast.Mult], ast.FloorDiv: [ast.Mod, ast.Mult],
                       ast.Div: [ast.Sub], ast.Pow: [ast.BitXor]}  # ^ for ** (a power in another language)
_CMP_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
             ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
_OPS_TEXT = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
             ast.Mod: "%", ast.FloorDiv: "//", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


def code_text(node) -> str:
    if isinstance(node, (ast.If, ast.While)):  # a compound statement: its header only
        return f"{'if' if isinstance(node, ast.If) else 'while'} {code_text(node.test)}:"
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


class Sites:
    """Walks a function's tree and lists every change as (category, slot, new node, params).

    A slot is (parent, field, index): where the new node goes (``index`` None for a plain field).
    A statement swap is a slot ``(parent, field, (i, i + 1))`` with the new node None.
    """

    def __init__(self, root, fn_globals, extended=False):
        self.root, self.globals, self.sites, self.extended = root, fn_globals, [], extended

    def size_names(self) -> set:
        if not hasattr(self, "sizes"):
            self.sizes = slips.size_names(self.root)
        return self.sizes

    def add(self, category, slot, new, params=()):
        self.sites.append((category, slot, new, tuple(params)))

    def is_module(self, node) -> bool:
        return isinstance(node, ast.Name) and isinstance(self.globals.get(node.id, None), types.ModuleType)

    # -- walking --------------------------------------------------------------------------
    def walk(self):
        body = self.root.body
        if isinstance(body, list):
            self.statements(self.root, "body", 1 if body and _is_docstring(body[0]) else 0)
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
                texts = code_text(a) + " " + code_text(b)
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
        if self.extended and isinstance(s, (ast.Assign, ast.AugAssign, ast.Return, ast.Expr)):
            self.leading_axis(s, parent, field, i)
            for new, params in slips.numbers_swapped(s.value) if isinstance(s.value, ast.expr) else ():
                self.add("numbers-swapped", (s, "value", None), new, params)
            for new, params in slips.unpacked_otherwise(s):  # T, B, D = x.shape for B, T, D = x.shape
                self.add("unpack-order", (parent, field, i), new, params)
        for name, value in ast.iter_fields(s):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self.statements(s, name)
            elif isinstance(value, list):
                for j, v in enumerate(value):
                    if isinstance(v, ast.expr):
                        self.expression(s, name, j)
            elif isinstance(value, ast.expr) and not (isinstance(s, ast.AnnAssign) and name == "annotation"):
                self.expression(s, name, None)

    def leading_axis(self, s, parent, field, i):
        """x[:, i] read as x[i] (the index on the first axis) or as x[0, i] (the first item only),
        in every subscript of the statement that starts with ``:`` (both sides of out[:, h] = y[:, h])."""
        def full(e):
            return isinstance(e, ast.Slice) and e.lower is None and e.upper is None and e.step is None
        for how, params in ((lambda elts: elts[1:], (("leading", "dropped"),)),
                            (lambda elts: [ast.Constant(0)] + elts[1:], (("leading", "first"),))):
            new, changed = copy.deepcopy(s), False
            for node in ast.walk(new):
                if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and \
                        len(node.slice.elts) >= 2 and full(node.slice.elts[0]) and \
                        not any(isinstance(e, ast.Starred) for e in node.slice.elts):
                    elts = how(list(node.slice.elts))
                    node.slice = elts[0] if len(elts) == 1 else ast.Tuple(elts=elts, ctx=ast.Load())
                    changed = True
            if changed:
                self.add("subscript", (parent, field, i), new, params)

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
            elif self.extended:  # the fourth root: / np.sqrt(np.sqrt(d_k))
                self.add("sqrt", slot, ast.BinOp(node.left, ast.Div(), _np_call("sqrt", node.right)), (("added", True),))
            self.add("rounding", slot, _np_call("floor", node), (("added", "floor"),))
        elif op in (ast.Sub, ast.MatMult, ast.Pow, ast.Mod, ast.FloorDiv):
            self.add("swapped-arguments", slot, ast.BinOp(node.right, node.op, node.left))
        if self.extended:
            for new, params in slips.regrouped(node) + slips.half_power(node):  # a * (b + c); d_k ** -1 / 2
                self.add("regrouped", slot, new, params)
            if op in (ast.Div, ast.FloorDiv):  # i // (h // h_kv) written i // h_kv
                self.add("dropped-term", slot, node.right, (("kept", "right"),))
            if op is ast.Div and isinstance(slot[0], ast.BinOp) and isinstance(slot[0].op, ast.Pow) and \
                    slot[1] == "right":  # an exponent -(2 * j // d_k) for -2 * j / d_k: rounded toward 0
                self.add("floor-division", slot, _np_call("trunc", node), (("to", "toward zero"),))
            for new in _EXTENDED_OPERATORS.get(op, []):
                self.add("operator", slot, ast.BinOp(node.left, new(), node.right),
                         (("from", _OPS_TEXT[op]), ("to", _OPS_TEXT[new])))
            for category, new, params in slips.floor_division_slips(node):  # i // g rounded otherwise, or per term
                self.add(category, slot, new, params)
            for new, params in slips.size_shifts(node, self.size_names()):  # two_i / (d_model - 1) for two_i / d_model
                self.add("size-shifted", slot, new, params)

    def on_Compare(self, node, slot):
        for k, op in enumerate(node.ops):
            for new in _COMPARISONS.get(type(op), []):
                ops = list(node.ops)
                ops[k] = new()
                self.add("comparison", slot, ast.Compare(node.left, ops, node.comparators),
                         (("test", _CMP_TEXT[type(op)]), ("test_to", _CMP_TEXT[new])))
        if self.extended and len(node.ops) == 1 and isinstance(node.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)):
            for d, op in ((1, ast.Add), (-1, ast.Sub)):  # the boundary moved by one: s <= q + 1
                self.add("comparison", slot, ast.Compare(node.left, node.ops, [ast.BinOp(node.comparators[0], op(),
                         ast.Constant(1))]), (("by", d),))
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
            if self.extended and v < 0:
                choices.append(-1.0)
        if self.extended and abs(v) >= 10:  # a zero too many or too few: 1000 for 10000
            choices += [v * 10, v / 10 if isinstance(v, float) else (v // 10 if v % 10 == 0 else v)]
        seen = {v}
        for c in choices:
            if c not in seen:
                seen.add(c)
                self.add("constant", slot, _const(c), (("from", v), ("to", c)))

    def on_Name(self, node, slot):
        """(extended) an argument read where another belongs: x for context, h_kv for g."""
        if not self.extended or not isinstance(node.ctx, ast.Load) or not hasattr(self.root, "args"):
            return
        a = self.root.args
        names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
        call = slot[0]
        if node.id not in names or isinstance(call, ast.keyword) or (isinstance(call, ast.Call) and (
                _call_name(call).lstrip("_").startswith("check") or (isinstance(call.func, ast.Attribute) and
                                                                     code_text(call.func.value) == "_validate"))):
            return  # an argument check returns its argument: the whole input replaced is a variant's job
        for other in names:
            if other != node.id:
                self.add("replaced-name", slot, ast.Name(id=other, ctx=ast.Load()), (("from", node.id), ("to", other)))

    def on_Attribute(self, node, slot):
        if node.attr in ("T", "mT") and isinstance(node.ctx, ast.Load):
            self.add("transpose", slot, node.value)
            for new, params in slips.pseudo_inverse(node) if self.extended else ():  # pinv(b) for b.T
                self.add("pseudo-inverse", slot, new, params)
        elif node.attr == "inf" and self.extended:  # -1e9 for -np.inf: a row that may see nothing averages instead
            self.add("finite-infinity", slot, ast.Constant(1e9), (("from", "inf"), ("to", "1e9")))

    def on_Subscript(self, node, slot):
        pieces = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        owner, field = (node.slice, "elts") if isinstance(node.slice, ast.Tuple) else (node, "slice")
        for k, piece in enumerate(pieces):
            index = k if owner is not node else None
            if isinstance(piece, ast.Slice):
                self.slice_bounds(piece)
                for new, params in slips.negative_stop(piece) if self.extended else ():  # x[:-k] for x[:n - k]
                    self.add("negative-stop", (owner, field, index), new, params)
            elif not isinstance(piece, ast.Constant) and _int_of(piece) is None:
                for d, op in ((1, ast.Add), (-1, ast.Sub)):
                    self.add("index", (owner, field, index), ast.BinOp(piece, op(), ast.Constant(1)), (("by", d),))
        if self.extended and isinstance(node.ctx, ast.Load):
            for new, params in slips.open_slices(node):  # x[:, head:] for x[:, head]
                self.add("open-slice", slot, new, params)
        if self.extended and owner is not node and isinstance(node.ctx, ast.Load):
            for k in range(len(pieces) - 1):  # keep[:, None, :] written keep[:, :, None]: a new axis elsewhere
                a, b = pieces[k], pieces[k + 1]
                if ast.dump(a) != ast.dump(b) and any(isinstance(p, ast.Constant) and p.value is None for p in (a, b)):
                    new = copy.copy(owner)
                    new.elts = list(pieces)
                    new.elts[k], new.elts[k + 1] = b, a
                    self.add("axis", (node, "slice", None), new, (("swapped", (k, k + 1)),))
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
        self.reductions(node, func, _ALIASES.get(name, name))
        if first is not None and not (is_method and name in ("sum", "mean", "max", "min")):
            if name == "sqrt":
                self.add("sqrt", slot, first, (("dropped", True),))
            elif name in ("transpose", "swapaxes", "moveaxis"):
                self.add("transpose", slot, first)
                for new, params in slips.pseudo_inverse(node) if self.extended else ():  # pinv(b) for b.T
                    self.add("pseudo-inverse", slot, new, params)
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
        if self.extended:
            self.extended_call(node, slot, name, first)
            self.default_axis(node, name, is_method)
            self.element_order(node)
            if isinstance(func, ast.Name) and len(node.args) == 1 and not node.keywords and \
                    self.package_function(func.id):
                self.add("dropped-call", slot, node.args[0], (("dropped", name),))
        self.axes(node, name, is_method)
        self.arguments(node, name)

    def reductions(self, node, func, base):
        """One reduction for another (sum, mean, max, min ...): a method, or the builtin max and min."""
        if base in _REDUCTIONS and (isinstance(func, ast.Attribute) or base in ("max", "min")):
            for other in _REDUCTIONS:
                if other != base and (isinstance(func, ast.Attribute) or other in ("max", "min")):
                    new_func = copy.copy(func)
                    if isinstance(func, ast.Attribute):
                        new_func.attr = other
                    else:
                        new_func.id = other
                    self.add("reduction", (node, "func", None), new_func, (("from", base), ("to", other)))

    def extended_call(self, node, slot, name, first):
        """The diagnosis' slips in a call: another rounding of a whole number (round or ceil for isqrt or int, the float
        itself, a root rounded down), a triangle's diagonal moved by one, a finite mask added where -inf is put."""
        for new, params in slips.other_function(node):  # np.maximum for np.logaddexp
            self.add("other-function", slot, new, params)
        for new, params in slips.inside_out(node):  # np.abs(x.sum()) for np.abs(x).sum()
            self.add("inside-out", slot, new, params)
        for new, params in slips.split_call(node) + slips.half_power(node):  # np.sqrt(var) + eps; d_k ** 1 / 2
            self.add("regrouped", slot, new, params)
        if name == "sqrt" and len(node.args) == 1:  # math.isqrt(n) for math.sqrt(n): the root rounded down
            self.add("rounding", slot, _np_call("floor", node), (("from", "sqrt"), ("to", "math.isqrt")))
        if name in ("isqrt", "int") and len(node.args) == 1 and not node.keywords:
            real = ast.BinOp(first, ast.Pow(), ast.Constant(0.5)) if name == "isqrt" else first
            for other, func in (("round", ast.Name(id="round", ctx=ast.Load())),
                                ("ceil", ast.parse("__import__('math').ceil", mode="eval").body)):
                self.add("rounding", slot, ast.Call(func=func, args=[real], keywords=[]),
                         (("from", name), ("to", other)))
            self.add("rounding", slot, real, (("dropped", name),))
        if name == "sqrt" and first is not None:  # int(np.sqrt(d_k)): a root rounded down to a whole number
            self.add("rounding", slot, ast.Call(func=ast.Name(id="int", ctx=ast.Load()), args=[node], keywords=[]),
                     (("from", "the square root"), ("to", "the square root rounded down (int(np.sqrt(...)))")))
        if name in ("arange", "range") and len(node.args) in (1, 2) and not node.keywords:  # 0..n-1 for 1..n
            for d, op in ((1, ast.Add), (-1, ast.Sub)):
                shifted = copy.copy(node)
                args = node.args if len(node.args) == 2 else [ast.Constant(0), node.args[0]]
                shifted.args = [_shifted(a, d, op) for a in args]
                self.add("index", slot, shifted, (("by", d), ("range", True)))
        if name in ("tril", "triu") and len(node.args) == 1 and not node.keywords:
            for k in (1, -1):
                self.add("constant", slot, ast.Call(node.func, node.args, [ast.keyword("k", _const(k))]), (("from", 0), ("to", k)))
        if name == "where" and len(node.args) == 3 and "inf" in code_text(node.args[2]):  # scores + (-1e9 where masked)
            self.add("finite-infinity", slot, ast.BinOp(node.args[1], ast.Sub(), _np_call("where", node.args[0],
                     ast.Constant(0.0), ast.Constant(1e9))), (("from", "inf"), ("to", "an added -1e9")))

    def package_function(self, name) -> bool:
        """``name`` is a plain function of the package (a step such as elu_feature_map), not an argument check."""
        target = self.globals.get(name)
        module = getattr(target, "__module__", "") or ""
        return isinstance(target, types.FunctionType) and module.startswith("mha_course") and not module.startswith(
            "mha_course._validate") and not name.lstrip("_").startswith("check")

    def element_order(self, node):
        """(extended) the parts of a concatenate or stack in another order: [b_k, b_q, b_v], the list reversed."""
        if _call_name(node) not in ("concatenate", "stack", "hstack", "vstack", "block") or not node.args or \
                not isinstance(node.args[0], (ast.List, ast.Tuple)):
            return
        holder = node.args[0]
        elts = holder.elts
        if len(elts) < 2 or any(isinstance(e, ast.Starred) for e in elts):
            return
        orders = [(i, i + 1) for i in range(len(elts) - 1)] + ([None] if len(elts) > 2 else [])
        for o in orders:
            new = copy.copy(holder)
            if o is None:
                new.elts = list(reversed(elts))
            else:
                swapped = list(elts)
                swapped[o[0]], swapped[o[1]] = swapped[o[1]], swapped[o[0]]
                new.elts = swapped
            self.add("swapped-arguments", (node, "args", 0), new, (("order", o or "reversed"),))

    def default_axis(self, node, name, is_method):
        """(extended) a softmax (or log_softmax, logsumexp, cumsum) called with its default axis,
        taken over another one: the normalisation over the queries, not the keys."""
        if is_method or name not in ("softmax", "log_softmax", "logsumexp", "cumsum") or len(node.args) != 1 or \
                any(kw.arg == "axis" for kw in node.keywords):
            return
        func = node.func
        target = self.globals.get(func.id) if isinstance(func, ast.Name) else getattr(
            self.globals.get(func.value.id), func.attr, None) if self.is_module(func.value) else None
        try:
            import inspect
            default = inspect.signature(target).parameters["axis"].default if target else -1
        except (TypeError, ValueError, KeyError):
            return
        if not isinstance(default, int):
            return
        for c in dict.fromkeys([default - 1, 0, -2]):
            if c != default:
                kw = ast.keyword(arg="axis", value=_const(c))
                locate(kw, node)
                self.add("axis", (node, "keywords", None), list(node.keywords) + [kw], (("axis", default), ("to", c)))

    def axes(self, node, name, is_method):
        for kw in node.keywords:
            if kw.arg == "axis" and self.extended and isinstance(kw.value, ast.Name):  # axis=axis: another, fixed
                for c in (0, -1, -2):
                    self.add("axis", (kw, "value", None), _const(c), (("fixed", kw.value.id), ("to", c)))
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
        if self.extended and k == -1:  # over the last two axes: a normalisation over too many axes
            self.add("axis", (parent, field, index), ast.parse("(-2, -1)", mode="eval").body, (("axis", k),
                                                                                                ("to", "(-2, -1)")))

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


def _shifted(a, d, op):
    """``a`` moved by ``d`` (+1 or -1) as a learner writes it: 1 -> 0, n + 1 -> n, n -> n - 1."""
    k = _int_of(a)
    if k is not None:
        return _const(k + d)
    if isinstance(a, ast.BinOp) and _int_of(a.right) == 1 and isinstance(a.op, ast.Sub if d == 1 else ast.Add):
        return a.left
    return ast.BinOp(a, op(), ast.Constant(1))


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
    setattr(parent, field, new) if index is None else getattr(parent, field).__setitem__(index, new)


_LEAVES = (ast.Constant, ast.Name, ast.operator, ast.cmpop, ast.expr_context)


def parents_of(root) -> dict:
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


def apply_change(slot, new, parents):
    """Make the change; return the function that undoes it, and the before/after text."""
    parent, field, index = slot
    if new is None and isinstance(index, tuple):  # swap two statements
        body = getattr(parent, field)
        i, j = index
        before = f"{code_text(body[i])}; {code_text(body[j])}"
        body[i], body[j] = body[j], body[i]

        def undo():
            body[i], body[j] = body[j], body[i]
        return undo, before, f"{code_text(body[i])}; {code_text(body[j])}"
    old = _get(slot)
    if isinstance(new, ast.AST) and hasattr(old, "lineno"):
        locate(new, old)
    holder = None if isinstance(old, ast.stmt) and type(new) is type(old) else _context(slot, old, parents)
    before = code_text(holder) if holder is not None else code_text(old) if isinstance(old, ast.AST) else repr(old)
    _put(slot, new)
    after = code_text(holder) if holder is not None else code_text(new) if isinstance(new, ast.AST) else repr(new)

    def undo():
        _put(slot, old)
    return undo, before, after
