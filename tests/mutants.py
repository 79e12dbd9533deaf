"""Mutants of the reference: each exercise's reference function with one learner's slip, made by a named operator.

Instructor-only (it reads ``solutions/``): the mutation search (``tests/mutant_search.py``) runs the checks on each
mutant to find slips they let through or name wrongly; ``tests/solutions/test_mutants.py`` replays its record.

``mutants(name)`` parses the reference's source (what the notebook's solution cell holds), walks its body (the
docstring, ``raise`` statements and f-strings left out: they only word a message) and, at every site an operator
fits, makes one mutant: a ``Mutant`` with a stable id ``<exercise>:<operator>:<line>:<col>`` (the line counted from
the ``def``; ``#2``, ``#3`` for a second mutant at the same place), the edit in words, and the mutated source, which
``compile_mutant`` compiles as the learner's notebook would (after its set-up cell and its other answers). A mutant
whose source equals the reference's, or an earlier mutant's, is left out. ``OPERATORS`` names each operator; the
``device`` ones (``DEVICE_OPERATORS``) only tell on a GPU.
"""
import ast
import copy
import textwrap
from dataclasses import dataclass

from coursekit.sync import solution_source
from helpers import learner_namespace
from learner.check import EXERCISES

OPERATORS = {
    "int+1": "an integer constant or index plus 1",
    "int-1": "an integer constant or index minus 1",
    "index+1": "a computed index or slice bound plus 1",
    "index-1": "a computed index or slice bound minus 1",
    "dim-other": "a dim/axis argument changed (d to d+1, -d to -d-1; a variable to -1)",
    "dim-drop": "a dim argument dropped (reduce over everything), or keepdim=True dropped",
    "transpose-drop": "a .transpose/.T/.mT/.t() dropped",
    "transpose-add": "the right operand of @ transposed (.mT)",
    "div-drop": "a division dropped (a / b to a)",
    "sqrt-drop": "a square root dropped (sqrt(d) to d)",
    "sub-drop": "a subtraction dropped (a - b to a: a shift such as - max)",
    "add-drop": "an addition dropped (a + b to a: a bias, a residual, an offset)",
    "mul-drop": "a multiplication dropped (a * b to a: a scale)",
    "gather-drop": "a gather/scatter/index_select dropped (its input returned)",
    "fill-drop": "a masked_fill or torch.where dropped (its input / first choice returned)",
    "invert-drop": "a ~ (logical not) dropped: the mask's polarity flipped",
    "tril-triu": "tril swapped for triu (or back)",
    "compare-bound": "a comparison's boundary moved (< to <=, > to >=, and back)",
    "inplace": "an input changed in place (x = x + y to x += y; x.masked_fill(...) to x.masked_fill_(...))",
    "seed": "torch.manual_seed(0) inserted at the top (the caller's global random state changed)",
    "dtype-float": "a returned tensor cast with .float()",
    "dtype-double": "a returned tensor cast with .double()",
    "dtype-long": "a returned tensor cast with .long()",
    "dtype-kw": "a dtype= argument changed (float64 <-> float32, long to int32, bool to long, else float32)",
    "device-drop": "a device= argument dropped (the tensor is made on the CPU)",
}
DEVICE_OPERATORS = ("device-drop",)

DIM_KEYWORDS = ("dim", "dims", "axis")
# methods and torch functions whose positional argument ``i`` is a dim: {name: (positions on a method, on torch.f)}
DIM_POSITIONS = {
    **{m: ((0,), (1,)) for m in ("sum", "mean", "amax", "amin", "max", "min", "logsumexp", "prod", "all", "any",
                                 "argmax", "argmin", "softmax", "log_softmax", "cumsum", "unsqueeze", "squeeze",
                                 "flatten", "size", "gather", "index_select", "scatter", "scatter_add", "var", "std",
                                 "norm", "unbind", "split", "chunk", "narrow", "roll", "flip", "cumprod")},
    "transpose": ((0, 1), (1, 2)), "topk": ((1,), (2,)), "cat": ((), (1,)), "stack": ((), (1,)),
    "concat": ((), (1,)), "movedim": ((0, 1), (1, 2)),
}
REDUCTIONS = ("sum", "mean", "amax", "amin", "logsumexp", "prod", "all", "any", "argmax", "argmin", "var", "std",
              "norm", "max", "min")
INPLACE_TWINS = ("masked_fill", "add", "sub", "mul", "div", "clamp", "clamp_min", "clamp_max", "exp", "neg", "tril",
                 "triu", "relu", "tanh", "sigmoid", "scatter", "fill_diagonal", "abs", "sqrt", "log", "copy",
                 "index_fill", "masked_scatter", "unsqueeze", "squeeze", "transpose", "t", "zero", "fill")
DTYPE_SWAP = {"float64": "float32", "double": "float32", "float32": "float64", "float": "float64", "long": "int32",
              "int64": "int32", "bool": "long"}


@dataclass(frozen=True)
class Mutant:
    id: str
    exercise: str
    operator: str
    line: int         # counted from the reference's ``def`` line (1)
    col: int
    diff: str         # "L<line>: `before` -> `after`"
    source: str

    @property
    def device(self):
        return self.operator in DEVICE_OPERATORS


def exercise_names():
    """The exercises that have a reference function to mutate (the self-check questions return a literal)."""
    return [name for name, ex in EXERCISES.items() if ex.answer is None]


def compile_mutant(mutant_or_source, exercise=None):
    """The mutant's function, compiled as its notebook runs it: the set-up cell, then every answer cell of the
    notebook, the mutant in its exercise's place (so it calls the learner's copies of the other exercises)."""
    if isinstance(mutant_or_source, Mutant):
        exercise, source = mutant_or_source.exercise, mutant_or_source.source
    else:
        source = mutant_or_source
    return learner_namespace(EXERCISES[exercise].notebook, {exercise: source})[exercise]


# ---------------------------------------------------------------- sites
def _skipped(fn):
    """ids of the nodes no operator touches: the docstring, raise statements, f-strings."""
    out = set()
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        out |= {id(n) for n in ast.walk(body[0])}
    for node in ast.walk(fn):
        if isinstance(node, (ast.Raise, ast.JoinedStr)):
            out |= {id(n) for n in ast.walk(node)}
    return out


def _call_name(call):
    """("method" | "torch", name) of a call like x.sum(...) / torch.sum(...) / F.softmax(...), else (None, None)."""
    f = call.func
    if isinstance(f, ast.Attribute):
        base = f.value
        if isinstance(base, ast.Name) and base.id in ("torch", "F", "math"):
            return "torch", f.attr
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "torch":
            return "torch", f.attr  # torch.nn.functional / torch.linalg
        return "method", f.attr
    if isinstance(f, ast.Name):
        return "name", f.id
    return None, None


def _int_value(node):
    """The int a node holds (a constant, or minus a constant), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _int_node(v):
    return ast.UnaryOp(ast.USub(), ast.Constant(-v)) if v < 0 else ast.Constant(v)


def _attr(value, name, *args, **kwargs):
    return ast.Call(ast.Attribute(value, name, ast.Load()), list(args),
                    [ast.keyword(k, v) for k, v in kwargs.items()])


def _dim_args(call):
    """The dim arguments of a call: [(node, "kw" | "pos", keyword or position)]."""
    out = [(k.value, "kw", k.arg) for k in call.keywords if k.arg in DIM_KEYWORDS]
    kind, name = _call_name(call)
    if name in DIM_POSITIONS and kind in ("method", "torch"):
        for i in DIM_POSITIONS[name][0 if kind == "method" else 1]:
            if i < len(call.args) and not isinstance(call.args[i], ast.Starred):
                out.append((call.args[i], "pos", i))
    return out


def _params(fn):
    a = fn.args
    return {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}


def _string_like(node):
    return isinstance(node, (ast.JoinedStr, ast.List, ast.ListComp, ast.Tuple)) or \
        isinstance(node, ast.Constant) and isinstance(node.value, str)


def edits(fn):
    """[(operator, node, replacement)] for every site of ``fn`` (a FunctionDef) and operator. ``replacement`` is a
    function of the copied node that returns the node to put in its place (an ast.stmt for a statement, or None to
    delete a statement)."""
    skip = _skipped(fn)
    params = _params(fn)
    dim_nodes = set()
    out = []
    nodes = [n for n in ast.walk(fn) if id(n) not in skip and n is not fn]
    for node in nodes:
        if isinstance(node, ast.Call):
            for arg, how, key in _dim_args(node):
                dim_nodes |= {id(n) for n in ast.walk(arg)}
    for node in nodes:
        out += _edits_of(node, params, dim_nodes)
    # the seed: one statement at the top of the body, after the docstring
    out.append(("seed", fn, None))
    return out


def _edits_of(node, params, dim_nodes):
    out = []
    v = _int_value(node)
    if v is not None and id(node) not in dim_nodes and not (isinstance(node, ast.Constant) and _negated(node)):
        out += [("int+1", node, lambda n, v=v: _int_node(v + 1)), ("int-1", node, lambda n, v=v: _int_node(v - 1))]
    if isinstance(node, ast.Subscript):
        for i, part in enumerate(_index_parts(node.slice)):
            if _int_value(part) is None and isinstance(part, (ast.Name, ast.BinOp, ast.Call)):
                out += [(op, part, lambda n, d=d: ast.BinOp(n, d, ast.Constant(1)))
                        for op, d in (("index+1", ast.Add()), ("index-1", ast.Sub()))]
    if isinstance(node, ast.Call):
        out += _call_edits(node, params)
    if isinstance(node, ast.Attribute) and node.attr in ("T", "mT") and isinstance(node.ctx, ast.Load):
        out.append(("transpose-drop", node, lambda n: n.value))
    if isinstance(node, ast.BinOp):
        out += _binop_edits(node)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        out.append(("invert-drop", node, lambda n: n.operand))
    if isinstance(node, ast.Compare):
        swap = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
        for i, op in enumerate(node.ops):
            if type(op) in swap:
                out.append(("compare-bound", node, lambda n, i=i: _with_op(n, i, swap[type(n.ops[i])]())))
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and node.targets[0].id in params and isinstance(node.value, ast.BinOp) \
            and isinstance(node.value.left, ast.Name) and node.value.left.id == node.targets[0].id:
        out.append(("inplace", node, lambda n: ast.AugAssign(ast.Name(n.targets[0].id, ast.Store()), n.value.op,
                                                              n.value.right)))
    if isinstance(node, ast.Return) and node.value is not None:
        out += _return_edits(node)
    return out


def _negated(const):
    return getattr(const, "_negated", False)


def _index_parts(s):
    parts = s.elts if isinstance(s, ast.Tuple) else [s]
    out = []
    for p in parts:
        if isinstance(p, ast.Slice):
            out += [b for b in (p.lower, p.upper) if b is not None]
        else:
            out.append(p)
    return out


def _with_op(node, i, op):
    node.ops[i] = op
    return node


def _call_edits(node, params):
    out = []
    kind, name = _call_name(node)
    for arg, how, key in _dim_args(node):
        v = _int_value(arg)
        if isinstance(arg, (ast.Tuple, ast.List)):
            continue
        new = (lambda n, v=v: _int_node(v - 1 if v < 0 else v + 1)) if v is not None else (lambda n: _int_node(-1))
        out.append(("dim-other", arg, new))
        if how == "kw" or (name in REDUCTIONS and key == 0 and kind == "method"):
            out.append(("dim-drop", node, lambda n, how=how, key=key: _drop_arg(n, how, key)))
    for k in node.keywords:
        if k.arg == "keepdim":
            out.append(("dim-drop", node, lambda n: _drop_arg(n, "kw", "keepdim")))
        if k.arg == "dtype":
            out.append(("dtype-kw", k.value, _swap_dtype))
        if k.arg == "device":
            out.append(("device-drop", node, lambda n: _drop_arg(n, "kw", "device")))
    receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
    if kind == "method" and name in ("transpose", "t", "permute"):
        out.append(("transpose-drop", node, lambda n: n.func.value))
    if name in ("sqrt",) and (kind == "torch" and node.args or kind == "method" and not node.args):
        out.append(("sqrt-drop", node, lambda n: n.args[0] if n.args else n.func.value))
    if name in ("gather", "scatter", "scatter_add", "index_select"):
        if kind == "method":
            out.append(("gather-drop", node, lambda n: n.func.value))
        elif kind == "torch" and node.args:
            out.append(("gather-drop", node, lambda n: n.args[0]))
    if name == "masked_fill" and kind == "method":
        out.append(("fill-drop", node, lambda n: n.func.value))
    if name == "where" and kind == "torch" and len(node.args) == 3:
        out.append(("fill-drop", node, lambda n: n.args[1]))
    if name in ("tril", "triu"):
        other = "triu" if name == "tril" else "tril"
        out.append(("tril-triu", node, lambda n, o=other: _renamed(n, o)))
    if kind == "method" and name in INPLACE_TWINS and isinstance(receiver, ast.Name) and receiver.id in params:
        out.append(("inplace", node, lambda n: _renamed(n, n.func.attr + "_")))
    return out


def _renamed(call, attr):
    call.func.attr = attr
    return call


def _drop_arg(call, how, key):
    if how == "kw":
        call.keywords = [k for k in call.keywords if k.arg != key]
    else:
        del call.args[key]
    return call


def _swap_dtype(node):
    name = node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "torch" else None
    return ast.Attribute(ast.Name("torch", ast.Load()), DTYPE_SWAP.get(name, "float32"), ast.Load())


def _binop_edits(node):
    out = []
    if _string_like(node.left) or _string_like(node.right):
        return out
    op = type(node.op)
    if op is ast.Div:
        out.append(("div-drop", node, lambda n: n.left))
    elif op is ast.Sub:
        out.append(("sub-drop", node, lambda n: n.left))
    elif op is ast.Add:
        out.append(("add-drop", node, lambda n: n.left))
    elif op is ast.Mult:
        out.append(("mul-drop", node, lambda n: n.left))
    elif op is ast.MatMult and not _transposed(node.right):
        out.append(("transpose-add", node, lambda n: ast.BinOp(n.left, ast.MatMult(),
                                                                ast.Attribute(n.right, "mT", ast.Load()))))
    if op is ast.Pow and isinstance(node.right, ast.Constant) and node.right.value == 0.5:
        out.append(("sqrt-drop", node, lambda n: n.left))
    return out


def _transposed(node):
    return isinstance(node, ast.Attribute) and node.attr in ("T", "mT") or isinstance(node, ast.Call) and \
        isinstance(node.func, ast.Attribute) and node.func.attr in ("transpose", "t", "permute")


def _return_edits(node):
    values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
    out = []
    for i, v in enumerate(values):
        if isinstance(v, (ast.Constant, ast.Dict, ast.DictComp, ast.List, ast.ListComp, ast.JoinedStr, ast.Compare,
                          ast.BoolOp)) or _string_like(v) or isinstance(v, ast.Call) and _call_name(v)[1] in (
                "join", "item", "tolist", "float", "int", "len"):
            continue
        for op, cast in (("dtype-float", "float"), ("dtype-double", "double"), ("dtype-long", "long")):
            out.append((op, v, lambda n, c=cast: _attr(n, c)))
    return out


# ---------------------------------------------------------------- mutants
def _function(name):
    tree = ast.parse(textwrap.dedent(solution_source(name)))
    fn = tree.body[0]
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)), name
    for node in ast.walk(fn):  # a constant under a minus is mutated with its sign (int+1 on -1 gives -2... no: 0)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            node.operand._negated = True
    return tree, fn


def _apply(tree, target_index, operator, replace):
    """A copy of ``tree`` with the node at ``target_index`` (in ast.walk order) replaced."""
    new = copy.deepcopy(tree)
    nodes = list(ast.walk(new))
    target = nodes[target_index]
    fn = new.body[0]
    if operator == "seed":
        at = 1 if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant) else 0
        fn.body.insert(at, ast.parse("torch.manual_seed(0)").body[0])
        return new
    replacement = replace(target)
    for parent in nodes:
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, replacement)
                return new
            if isinstance(value, list) and any(v is target for v in value):
                value[[i for i, v in enumerate(value) if v is target][0]] = replacement
                return new
    raise AssertionError(f"{operator}: node not found")


def mutants(name):
    """Every mutant of exercise ``name``'s reference, in the order of their sites, without duplicates."""
    tree, fn = _function(name)
    index = {id(n): i for i, n in enumerate(ast.walk(tree))}
    seen = {ast.unparse(tree)}
    taken = {}
    out = []
    for operator, node, replace in edits(fn):
        new = _apply(tree, index[id(node)], operator, replace)
        source = ast.unparse(ast.fix_missing_locations(new))
        if source in seen:
            continue
        seen.add(source)
        line, col = node.lineno - fn.lineno + 1, node.col_offset
        key = f"{name}:{operator}:{line}:{col}"
        taken[key] = taken.get(key, 0) + 1
        before = ast.unparse(node) if operator != "seed" else ""
        after = ast.unparse(_changed(new, index[id(node)], operator))
        out.append(Mutant(key + (f"#{taken[key]}" if taken[key] > 1 else ""), name, operator, line, col,
                          f"L{line}: `{_short(before)}` -> `{_short(after)}`", source))
    return out


def _changed(new_tree, target_index, operator):
    """The node that took the target's place in the mutated tree (for the diff)."""
    if operator == "seed":
        fn = new_tree.body[0]
        return next(s for s in fn.body if isinstance(s, ast.Expr) and "manual_seed" in ast.unparse(s))
    nodes = list(ast.walk(new_tree))  # the replacement sits where the target sat in a walk of the new tree
    return nodes[target_index] if target_index < len(nodes) else new_tree


def _short(text, n=110):
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n - 3] + "..."


def all_mutants(names=None):
    return [m for name in (names or exercise_names()) for m in mutants(name)]
