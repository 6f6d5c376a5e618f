"""Slips of a learner's code that only the diagnosis tries (:class:`.mutant_sites.Sites` with ``extended=True``).

Each function takes a node of the reference's syntax tree and gives the changed nodes, with the words of
the change; none of them is part of the mutation tests (the exercises' cases need not be proven against
them), they only name what a learner's result is:

- :func:`other_function`: another numpy function for one (``np.maximum`` for ``np.logaddexp``, ``np.stack``
  for ``np.concatenate``, ``np.tile`` for ``np.repeat``, ``np.log2`` for ``np.log``, ``np.triu`` for ``np.tril``);
- :func:`regrouped`: the brackets of two operations moved (``a * b + c`` read as ``a * (b + c)``);
- :func:`numbers_swapped`: two numbers of one expression in each other's place (the exponents of two terms);
- :func:`open_slices`: an open slice where one index belongs (``x[:, head:]`` for ``x[:, head]``);
- :func:`floor_division_slips`: ``i // g`` rounded to the nearest or up, and ``(a + b) // c`` as ``a // c + b // c``;
- :func:`size_shifts`: a size off by one inside a formula (``two_i / (d_model - 1)`` for ``two_i / d_model``);
- :func:`pseudo_inverse`: ``np.linalg.pinv(b)`` where the transpose of ``b`` belongs (a product "undone");
- :func:`inside_out`: an element-wise function and a reduction in the other order (``np.abs(x.sum())`` for
  ``np.abs(x).sum()``, ``np.exp(np.sum(x))`` for ``np.sum(np.exp(x))``);
- :func:`unpacked_otherwise`: a shape unpacked in another order (``T, B, D = x.shape`` for ``B, T, D = x.shape``);
- :func:`negative_stop`: a slice stop ``n - k`` written ``-k`` (empty when k is 0: ``x[:-0]``);
- :func:`split_call`: ``np.sqrt(var) + eps`` for ``np.sqrt(var + eps)`` (a call closed too early);
- :func:`half_power`: ``d_k ** 1/2`` (read ``(d_k ** 1) / 2``) for ``np.sqrt(d_k)`` or ``d_k ** 0.5``.

>>> import ast
>>> [ast.unparse(n) for n, _ in regrouped(ast.parse("a * b + c", mode="eval").body)]
['a * (b + c)']
"""
from __future__ import annotations

import ast
import copy

__all__ = ["OTHER_FUNCTIONS", "other_function", "regrouped", "numbers_swapped", "open_slices",
           "floor_division_slips", "size_names", "size_shifts", "pseudo_inverse", "inside_out",
           "unpacked_otherwise", "negative_stop", "split_call", "half_power"]

# a numpy function and those a learner writes in its place
OTHER_FUNCTIONS = {"logaddexp": ("maximum", "add"), "maximum": ("logaddexp", "minimum"), "minimum": ("maximum",),
                   "concatenate": ("stack",), "stack": ("concatenate",), "vstack": ("hstack",), "hstack": ("vstack",),
                   "repeat": ("tile",), "tile": ("repeat",), "log": ("log2", "log10"), "exp": ("exp2",),
                   "log2": ("log",), "exp2": ("exp",), "tril": ("triu",), "triu": ("tril",),
                   "argmax": ("argmin",), "argmin": ("argmax",), "cumsum": ("cumprod",), "matmul": ("multiply",),
                   "floor": ("trunc",), "sqrt": ("square",), "outer": ("multiply",)}

# how tightly an operator binds (Python's order): a regrouping only crosses two different levels
_LEVEL = {ast.Add: 1, ast.Sub: 1, ast.Mult: 2, ast.Div: 2, ast.FloorDiv: 2, ast.Mod: 2, ast.MatMult: 2, ast.Pow: 3}


def other_function(call: ast.Call) -> list:
    """[(new call, (("from", name), ("to", other)))] for a call of a function of :data:`OTHER_FUNCTIONS`."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    out = []
    for other in OTHER_FUNCTIONS.get(name, ()):
        new = copy.copy(call)
        new.func = copy.copy(func)
        if isinstance(func, ast.Attribute):
            new.func.attr = other
        else:
            new.func.id = other
        out.append((new, (("from", name), ("to", other))))
    if name == "norm" and len(call.args) == 1 and not call.keywords:  # a matrix norm other than Frobenius's
        for ord_, said in ((2, "the spectral norm, ord=2"), ("nuc", "the nuclear norm, ord='nuc'")):
            new = copy.copy(call)
            new.keywords = [ast.keyword(arg="ord", value=ast.Constant(ord_))]
            out.append((new, (("from", "linalg.norm (the Frobenius norm)"), ("to", f"linalg.norm ({said})"))))
    return out


def regrouped(node: ast.BinOp) -> list:
    """[(new node, ())]: ``a op1 b op2 c`` with the brackets on the other pair, where the two operators bind
    differently (``a * b + c`` as ``a * (b + c)``, ``a + b * c`` as ``(a + b) * c``, ``a / b ** c`` ...)."""
    out = []
    left, right = node.left, node.right
    if isinstance(left, ast.BinOp) and _levels_differ(left.op, node.op):  # (a op1 b) op2 c -> a op1 (b op2 c)
        out.append((ast.BinOp(left.left, left.op, ast.BinOp(left.right, node.op, right)), ()))
    if isinstance(right, ast.BinOp) and _levels_differ(right.op, node.op):  # a op1 (b op2 c) -> (a op1 b) op2 c
        out.append((ast.BinOp(ast.BinOp(left, node.op, right.left), right.op, right.right), ()))
    if isinstance(right, ast.BinOp) and (isinstance(node.op, ast.Div) and isinstance(right.op, ast.Mult) or
                                         isinstance(node.op, ast.Sub) and isinstance(right.op, (ast.Add, ast.Sub))):
        out.append((ast.BinOp(ast.BinOp(left, node.op, right.left), right.op, right.right), ()))  # a / b * c
    return out


_SPLIT_CALLS = frozenset({"sqrt", "exp", "log", "abs", "absolute", "square", "tanh"})


def half_power(node) -> list:
    """[(new node, (("from", code),))]: a square root written ``x ** 1/2`` (Python reads ``(x ** 1) / 2``):
    for ``np.sqrt(x)``, ``math.sqrt(x)``, ``x ** 0.5``; and ``x ** -0.5`` as ``x ** -1/2``."""
    if isinstance(node, ast.Call):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name != "sqrt" or len(node.args) != 1 or node.keywords:
            return []
        x, one = node.args[0], ast.Constant(1)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) and isinstance(node.right, (ast.Constant,
                                                                                                  ast.UnaryOp)):
        try:
            e = ast.literal_eval(node.right)
        except ValueError:
            return []
        if e not in (0.5, -0.5):
            return []
        x, one = node.left, (ast.Constant(1) if e > 0 else ast.UnaryOp(ast.USub(), ast.Constant(1)))
    else:
        return []
    return [(ast.BinOp(ast.BinOp(x, ast.Pow(), one), ast.Div(), ast.Constant(2)), (("from", ast.unparse(node)),))]


def split_call(call: ast.Call) -> list:
    """[(new node, (("from", code),))]: ``f(a op b)`` as ``f(a) op b`` for an element-wise f, the call closed
    too early (``np.sqrt(var) + eps`` for ``np.sqrt(var + eps)``)."""
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in _SPLIT_CALLS or len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.BinOp):
        return []
    inner = call.args[0]
    if not isinstance(inner.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
        return []
    return [(ast.BinOp(ast.Call(call.func, [inner.left], []), inner.op, inner.right), (("from", ast.unparse(call)),))]


def _levels_differ(a, b) -> bool:
    la, lb = _LEVEL.get(type(a)), _LEVEL.get(type(b))
    return la is not None and lb is not None and la != lb


def numbers_swapped(expr: ast.expr) -> list:
    """[(new expression, (("a", x), ("b", y)))]: two different numbers of ``expr`` (not inside a subscript) in
    each other's place, for every pair (at most 6)."""
    spots = [n for n in _numbers(expr)]
    out = []
    for i, a in enumerate(spots):
        for b in spots[i + 1:]:
            if a.value != b.value and len(out) < 6:
                new = copy.deepcopy(expr)
                mine = _numbers(new)
                mine[spots.index(a)].value, mine[spots.index(b)].value = b.value, a.value
                out.append((new, (("a", a.value), ("b", b.value))))
    return out


_AXES_CALLS = frozenset({"transpose", "swapaxes", "moveaxis", "reshape", "permute", "expand_dims", "squeeze"})


def _numbers(expr) -> list:
    """The int and float constants of ``expr`` in walk order, leaving out subscripts' (an index) and the axes of a
    call (transpose(0, 2, 1, 3), axis=-1): their order is an axis family's to name."""
    inside = {id(n) for s in ast.walk(expr) if isinstance(s, ast.Subscript) for n in ast.walk(s.slice)}
    inside |= {id(n) for c in ast.walk(expr) if isinstance(c, ast.Call) for a in
               (c.args if getattr(c.func, "attr", getattr(c.func, "id", "")) in _AXES_CALLS else []) +
               [k.value for k in c.keywords if k.arg in ("axis", "axes", "dim")] for n in ast.walk(a)}
    return [n for n in ast.walk(expr) if isinstance(n, ast.Constant) and type(n.value) in (int, float)
            and id(n) not in inside]


def open_slices(node: ast.Subscript) -> list:
    """[(new subscript, ())]: each index of ``node`` that is a name or an expression (not a number, not a slice)
    made the open slice from it (``x[i:]``), as a learner who writes a slice where one index belongs."""
    pieces = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    out = []
    for k, piece in enumerate(pieces):
        if isinstance(piece, (ast.Name, ast.BinOp)):
            new = copy.deepcopy(node)
            opened = ast.Slice(lower=copy.deepcopy(piece), upper=None, step=None)
            if isinstance(new.slice, ast.Tuple):
                new.slice.elts[k] = opened
            else:
                new.slice = opened
            out.append((new, ()))
    return out


def floor_division_slips(node: ast.BinOp) -> list:
    """[(category, new node, params)] for ``a // b``: rounded to the nearest (np.rint(a / b).astype(int)) or up
    (-(-a // b)) instead of down; and for ``(x + y) // b``, each term rounded down on its own."""
    if not isinstance(node.op, ast.FloorDiv):
        return []
    numpy = ast.parse("__import__('numpy')", mode="eval").body  # written np. in the message
    rint = ast.Call(ast.Attribute(numpy, "rint", ast.Load()), [ast.BinOp(node.left, ast.Div(), node.right)], [])
    near = ast.Call(ast.Attribute(rint, "astype", ast.Load()), [ast.Name("int", ast.Load())], [])
    up = ast.UnaryOp(ast.USub(), ast.BinOp(ast.UnaryOp(ast.USub(), node.left), ast.FloorDiv(), node.right))
    out = [("rounding", new, (("from", "rounding down (//)"), ("to", to)))
           for new, to in ((near, "rounding to the nearest"), (up, "rounding up"))]
    left = node.left
    if isinstance(left, ast.BinOp) and isinstance(left.op, (ast.Add, ast.Sub)):
        a, b = (ast.BinOp(t, ast.FloorDiv(), node.right) for t in (left.left, left.right))
        out.append(("floored-terms", ast.BinOp(a, left.op, b), ()))
    return out


_SIZE_CALLS = frozenset({"len", "int", "positive_int", "nonnegative_int", "divisor"})


def size_names(root) -> set:
    """The names of ``root`` (a function's tree) that hold a size: arguments annotated ``int``, and names
    assigned from ``x.shape`` (unpacked or one axis), ``len(...)``, ``int(...)`` or an int check."""
    args = getattr(root, "args", None)
    names = {a.arg for a in (args.posonlyargs + args.args + args.kwonlyargs if args else [])
             if isinstance(a.annotation, ast.Name) and a.annotation.id == "int"}
    for node in ast.walk(root):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Attribute) and value.attr == "shape":
                names |= {t.id for t in target.elts if isinstance(t, ast.Name)}
            elif isinstance(target, ast.Name) and _is_size(value, set()):
                names.add(target.id)
    return names


def _is_size(node, names) -> bool:
    if isinstance(node, ast.Name):
        return node.id in names
    if isinstance(node, ast.Subscript):
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
    if isinstance(node, ast.Call):
        func = node.func
        return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) in _SIZE_CALLS
    return False


_SIZED_OPS = (ast.Div, ast.FloorDiv, ast.Pow, ast.Mod, ast.Mult)


def size_shifts(node: ast.BinOp, names: set) -> list:
    """[(new node, (("from", code), ("to", code)))]: each operand of ``node`` (a /, //, **, % or *) that is a
    size (a name of ``names``, ``x.shape[k]``, ``len(x)``) one more or one less, as a learner who remembers
    a formula with ``d_model - 1`` or ``n + 1`` in it."""
    if not isinstance(node.op, _SIZED_OPS):
        return []
    out = []
    for side in ("left", "right"):
        operand = getattr(node, side)
        if not _is_size(operand, names):
            continue
        for op in (ast.Sub, ast.Add):
            new = copy.copy(node)
            moved = ast.BinOp(operand, op(), ast.Constant(1))
            setattr(new, side, moved)
            out.append((new, (("from", ast.unparse(operand)), ("to", ast.unparse(moved)))))
    return out


def pseudo_inverse(node) -> list:
    """[(np.linalg.pinv(x), (("from", code),))] for a matrix transpose of ``x``: ``x.T``, ``x.mT``,
    ``x.transpose()``, ``np.transpose(x)`` and a swap of the last two axes (``np.swapaxes(x, -1, -2)``)."""
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT"):
        x = node.value
    elif isinstance(node, ast.Call):
        func, args = node.func, list(node.args)
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        on_module = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("np",
                                                                                                          "numpy")
        if isinstance(func, ast.Attribute) and not on_module:
            args = [func.value] + args
        axes = [ast.literal_eval(a) if isinstance(a, (ast.Constant, ast.UnaryOp)) else None for a in args[1:]]
        last_two = name == "swapaxes" and sorted(axes, key=str) in ([-1, -2], [-2, -1])
        if not args or node.keywords or not (last_two or (name == "transpose" and not axes)):
            return []
        x = args[0]
    else:
        return []
    numpy = ast.parse("__import__('numpy')", mode="eval").body  # written np. in the message
    linalg = ast.Attribute(numpy, "linalg", ast.Load())
    return [(ast.Call(ast.Attribute(linalg, "pinv", ast.Load()), [x], []), (("from", ast.unparse(node)),))]


_ELEMENTWISE = frozenset({"abs", "absolute", "exp", "log", "sqrt", "square"})
_REDUCED = frozenset({"sum", "mean", "max", "min"})


def _name(call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _reduced_part(call):
    """(what ``call`` reduces, a function that rebuilds the reduction around another argument), or None:
    ``x.sum(axis=-1)`` and ``np.sum(x, axis=-1)``."""
    if not isinstance(call, ast.Call) or _name(call) not in _REDUCED:
        return None
    func = call.func
    if isinstance(func, ast.Attribute) and not (isinstance(func.value, ast.Name) and func.value.id in ("np", "numpy")):
        return func.value, lambda a: ast.Call(ast.Attribute(a, func.attr, ast.Load()), call.args, call.keywords)
    if call.args:
        return call.args[0], lambda a: ast.Call(func, [a] + call.args[1:], call.keywords)
    return None


def _elementwise_part(call):
    """(the argument of ``call``, a function that rebuilds it around another), for np.abs(x), abs(x), np.exp(x) ..."""
    if isinstance(call, ast.Call) and _name(call) in _ELEMENTWISE and len(call.args) == 1 and not call.keywords:
        return call.args[0], lambda a: ast.Call(call.func, [a], [])
    return None


def inside_out(call: ast.Call) -> list:
    """[(new node, (("from", code),))]: a reduction of an element-wise function taken the other way round
    (``np.abs(lam).sum()`` as ``np.abs(lam.sum())``), and an element-wise function of a reduction too."""
    outer = _reduced_part(call)
    if outer is not None and (inner := _elementwise_part(outer[0])) is not None:  # sum(f(x)) -> f(sum(x))
        new = _elementwise_part(outer[0])[1](outer[1](inner[0]))
        return [(new, (("from", ast.unparse(call)),))]
    outer = _elementwise_part(call)
    if outer is not None and (inner := _reduced_part(outer[0])) is not None:  # f(sum(x)) -> sum(f(x))
        return [(inner[1](outer[1](inner[0])), (("from", ast.unparse(call)),))]
    return []


def unpacked_otherwise(s: ast.Assign) -> list:
    """[(new statement, (("from", code), ("to", code)))]: ``a, b, c = x.shape`` with two neighbouring names in each
    other's place (``T, B, D = x.shape``), as a learner who remembers another layout."""
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Tuple)
            and isinstance(s.value, ast.Attribute) and s.value.attr == "shape"):
        return []
    names = s.targets[0].elts
    out = []
    for i in range(len(names) - 1):
        if isinstance(names[i], ast.Name) and isinstance(names[i + 1], ast.Name) and names[i].id != "_" != names[i + 1].id:
            new = copy.deepcopy(s)
            new.targets[0].elts[i], new.targets[0].elts[i + 1] = new.targets[0].elts[i + 1], new.targets[0].elts[i]
            out.append((new, (("from", ast.unparse(s.targets[0])), ("to", ast.unparse(new.targets[0])))))
    return out


def negative_stop(piece: ast.Slice) -> list:
    """[(new slice, (("from", code), ("to", code)))]: a stop ``n - k`` (n a length: a name, ``len(x)`` or
    ``x.shape[i]``) written ``-k``, the same stop unless k is 0, where ``x[:-0]`` is empty."""
    stop = piece.upper
    if not (isinstance(stop, ast.BinOp) and isinstance(stop.op, ast.Sub) and not isinstance(stop.right, ast.Constant)
            and (isinstance(stop.left, ast.Name) or _is_size(stop.left, set()))):
        return []
    new = copy.copy(piece)
    new.upper = ast.UnaryOp(ast.USub(), stop.right)
    return [(new, (("from", ast.unparse(stop)), ("to", ast.unparse(new.upper))))]
