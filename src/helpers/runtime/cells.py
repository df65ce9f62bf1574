"""Which names a cell of code assigns, and which cell defined an answer.

Static analysis of source text only (``ast``): nothing is executed. IPython's ``%magic`` and
``!shell`` lines are blanked before parsing, so a cell that uses them is still understood.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["assigned_names", "called_names", "code_features", "computed_from", "defining_cell", "discarded_results",
           "filled_at", "filled_names",
           "first_code_line", "free_names", "mentioned_names", "typed_lists", "without_timing"]

_MAGIC = re.compile(r"^(\s*)([%!].*)$", re.M)
# For a cell that does not parse (a syntax error): the names on the left of a top-level `=`.
_ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*(?:[-+*/@%]|//)?=(?!=)", re.M)
_DEF = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


_TIME_LINE = re.compile(r"^(\s*)%time[ \t]+(\S.*)$", re.M)
_TIME_CELL = re.compile(r"\A(\s*)%%time[ \t]*(?:\n|\Z)")


def without_timing(source: str) -> str:
    """``source`` without IPython's timing magics, which run their code in the notebook as it is: ``%time x = …``
    is the statement ``x = …``, and a cell that starts with ``%%time`` is the rest of the cell."""
    return _TIME_LINE.sub(lambda m: m.group(1) + m.group(2), _TIME_CELL.sub(lambda m: m.group(1), source))


def _parse(source: str) -> ast.AST | None:
    text = _MAGIC.sub(lambda m: m.group(1) + "pass", without_timing(source))
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _targets(node: ast.AST) -> Iterable[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def assigned_names(source: str) -> set[str]:
    """Module-level names a cell binds: assignments (also augmented, annotated, walrus, tuple
    unpacking), ``for``/``with`` targets, ``def``/``class`` names and imports.

    Names bound inside a function or class body are not the cell's: they are skipped.
    A cell that does not parse is read line by line: the names before a top-level ``=`` and the
    names of top-level ``def``/``class`` lines are what it meant to bind.
    """
    tree = _parse(source)
    if tree is None:
        found = {n.strip() for m in _ASSIGNMENT.finditer(source) for n in m.group(1).split(",")}
        return found | set(_DEF.findall(source))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            for deco in node.decorator_list:
                visit(deco)
            return  # its body binds local names
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Assign):
            for t in node.targets:
                found.update(_targets(t))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            found.update(_targets(node.target))
        elif isinstance(node, ast.NamedExpr):
            found.update(_targets(node.target))
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            found.update(_targets(node.target))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    found.update(_targets(item.optional_vars))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name != "*":
                    found.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            # comprehension variables are local to the comprehension, but a walrus inside binds outside
            for sub in ast.walk(node):
                if isinstance(sub, ast.NamedExpr):
                    found.update(_targets(sub.target))
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def definition_source(source: str, name: str) -> str:
    """The source of the function ``name`` defined at the top level of a cell (without the code the cell
    runs after it, e.g. a comparison with a library); the whole cell when there is no such definition."""
    tree = _parse(source)
    if tree is None:
        return source
    text = _MAGIC.sub(lambda m: m.group(1) + "pass", without_timing(source))  # what was parsed: the offsets are into it
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return ast.get_source_segment(text, node) or source
    return source


def mentioned_names(source: str) -> set[str]:
    """Every name a cell reads or binds anywhere in it (``print(x)`` mentions ``x``)."""
    tree = _parse(source)
    if tree is None:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


def attribute_names(source: str) -> set[str]:
    """Every attribute a cell reaches anywhere in it (``nn.Transformer.generate_square_subsequent_mask(n)`` reaches
    ``Transformer`` and ``generate_square_subsequent_mask``)."""
    tree = _parse(source)
    if tree is None:
        return set()
    return {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}


def deleted_names(source: str) -> set[str]:
    """The names a cell deletes at its top level (``del x_seq``; not a ``del`` inside a function, nor of an item or
    an attribute, ``del d[k]``)."""
    tree = _parse(source)
    if tree is None:
        return set()
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        if isinstance(node, ast.Delete):
            todo = list(node.targets)
            while todo:
                target = todo.pop()
                if isinstance(target, ast.Name):
                    found.add(target.id)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    todo.extend(target.elts)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def free_names(source: str) -> set[str]:
    """The names a cell reads that it does not bind at its top level: the notebook's variables it uses. Names
    local to a function, a lambda or a comprehension of the cell (``for w in ...`` inside a generator) are not
    free; a name the cell both reads and binds at its top level is not either."""
    text = _MAGIC.sub(lambda m: m.group(1) + "pass", without_timing(source))
    try:
        top = symtable.symtable(text, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    bound = {sym.get_name() for sym in top.get_symbols() if sym.is_assigned() or sym.is_imported()}
    found = {sym.get_name() for sym in top.get_symbols() if sym.is_referenced()} - bound
    todo = list(top.get_children())
    while todo:
        table = todo.pop()
        found |= {sym.get_name() for sym in table.get_symbols() if sym.is_referenced() and sym.is_global()} - bound
        todo.extend(table.get_children())
    return found


def _filled(node: ast.AST) -> set[str]:
    """Names whose value a statement changes piece by piece: ``x[i] = …``, ``x += …``, ``x[i] += …``."""
    found: set[str] = set()
    for sub in ast.walk(node):
        targets: list[ast.AST] = []
        if isinstance(sub, ast.Assign):
            targets = list(sub.targets)
        elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)):
            targets = [sub.target]
            if isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
                found.add(sub.target.id)
        for t in targets:
            while isinstance(t, (ast.Subscript, ast.Attribute)):
                t = t.value
                if isinstance(t, ast.Name):
                    found.add(t.id)
    return found


def filled_at(source: str, line: int | None) -> set[str]:
    """The names the top-level statement at ``line`` fills piece by piece (a loop that writes
    ``scores[i] = …``): if that statement raised, those values are only partly computed."""
    tree = _parse(source)
    if tree is None or line is None:
        return set()
    for stmt in getattr(tree, "body", []):
        end = getattr(stmt, "end_lineno", stmt.lineno)
        if stmt.lineno <= line <= end:
            return _filled(stmt)
    return set()


def filled_names(source: str) -> set[str]:
    """The names a cell changes piece by piece anywhere (``x[i] = …``, ``x[i] += …``)."""
    tree = _parse(source)
    return _filled(tree) if tree is not None else set()


def defining_cell(sources: Sequence[str], names: Iterable[str], before: int | None = None) -> int | None:
    """Index of the last cell (before index ``before``, or in all) that binds one of ``names``."""
    wanted = set(names)
    stop = len(sources) if before is None else min(before, len(sources))
    for i in range(stop - 1, -1, -1):
        if assigned_names(sources[i]) & wanted:
            return i
    return None


def first_code_line(source: str, limit: int = 60) -> str:
    """The first line of a cell that is not blank or a comment (shortened), for messages."""
    lines = [ln.strip() for ln in source.splitlines() if ln.strip()]
    first = next((ln for ln in lines if not ln.startswith("#")), lines[0] if lines else "")
    return first if len(first) <= limit else first[: limit - 1] + "…"


# Calls that multiply matrices, whatever the library (torch.matmul, tf.linalg.matmul, np.dot, einsum …).
_PRODUCTS = {"matmul", "mm", "bmm", "einsum", "dot", "tensordot", "inner", "vdot", "matvec", "mv", "linear", "addmm",
             "multi_dot", "chain_matmul", "baddbmm", "addbmm", "addmv", "sparse_dense_matmul", "spmm",
             # TensorFlow's own operations (tf.raw_ops), which tf.matmul and @ run
             "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
             "Dot"}  # (and Keras's layer, a batched product)
# Integer types a cast can name: torch.int32, tf.int64, np.uint8, "int32", int ...
_INT_TYPES = {"int", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "long", "short",
              "intc", "int_", "intp"}
# Softmax calls. ``torch.softmax(s)`` / ``F.softmax(s)`` (a library's function: the tensor comes first) state
# their axis as a second argument or a keyword; ``s.softmax(1)`` (a tensor's method) as its first argument;
# ``nn.Softmax(1)`` (a module) as its first argument too.
_SOFTMAXES = {"softmax", "log_softmax"}
_SOFTMAX_MODULES = {"Softmax", "LogSoftmax"}
_LIBRARIES = {"torch", "F", "nn", "functional", "tf", "keras", "np", "numpy", "scipy", "special", "jax", "jnp"}


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _implicit_axis(call: ast.Call, imported: set[str]) -> bool:
    """A softmax call that does not say along which axis it runs (so a library picks one by its own rule).
    Calls whose kind cannot be told from the code (a function of the cell's own, an unknown alias) count as
    explicit: only a sure case is reported."""
    fn = call.func
    if any(k.arg in ("dim", "axis") or k.arg is None for k in call.keywords):
        return False
    n_args = len(call.args)
    if any(isinstance(a, ast.Starred) for a in call.args):
        return False
    if isinstance(fn, ast.Attribute):
        if fn.attr in _SOFTMAX_MODULES:
            return n_args == 0
        if fn.attr in _SOFTMAXES:
            return n_args < 2 if _root(fn.value) in _LIBRARIES else n_args == 0
        return False
    if isinstance(fn, ast.Name) and fn.id in imported:
        return n_args == 0 if fn.id in _SOFTMAX_MODULES else n_args < 2
    return False


def _indexes_a_result(tree: ast.AST) -> bool:
    """Does the cell index what a function of its own names returns (``f(...)[perm]``, or ``r = f(...)``
    then ``r[perm]``)? Method calls (``x.clone()[perm]``), builtins (``list(...)[0]``), fixed indices
    (``f(x[None])[0]``, ``f(x)[:]``) and runs of rows (``f(x)[n:]``) do not count."""
    def own_call(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in _BUILTINS

    def fixed(index: ast.AST) -> bool:
        """An index that picks the same place whatever the data: a number, a slice of numbers, None, ``...``
        (``f(x[None])[0]``, ``f(x)[:]``): taking a batch's sentence out, not reordering rows."""
        if isinstance(index, ast.Tuple):
            return all(fixed(e) for e in index.elts)
        if isinstance(index, ast.Slice):  # a run of rows in their order (x[n:], x[:n]) is not a reordering either;
            return index.step is None or fixed(index.step)  # a step may be one (x[::-1])
        if isinstance(index, ast.UnaryOp):
            return fixed(index.operand)
        return isinstance(index, ast.Constant)

    results = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and own_call(node.value)
               for t in node.targets if isinstance(t, ast.Name)}
    return any(isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Store) and not fixed(node.slice)
               and (own_call(node.value) or isinstance(node.value, ast.Name) and node.value.id in results)
               for node in ast.walk(tree))


_BUILTINS = set(dir(builtins))


def out_targets(source: str) -> set[str]:
    """The names a cell hands to a call as its ``out=`` (``np.matmul(x, w, out=w)``, ``torch.mm(a, b, out=c)``):
    what the call writes its result into, in place."""
    tree = _parse(source)
    if tree is None:
        return set()
    return {kw.value.id for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords
            if kw.arg == "out" and isinstance(kw.value, ast.Name)}



def inplace_targets(source: str) -> set[str]:
    """The names a cell changes in place: ``q.zero_()``, ``q[0].mul_(2)``, ``q[0] = …``, ``q += …`` (the root name
    of what is written into). A name that is a view of another (02's ``query = x[1]``) changes that
    one too."""
    tree = _parse(source)
    if tree is None:
        return set()
    def root(node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_") \
                and not node.func.attr.startswith("_"):
            owner = node.func.value
            if isinstance(owner, ast.Attribute) and owner.attr == "init" and node.args:  # nn.init.zeros_(q)
                owner = node.args[0]
            if name := root(owner):
                found.add(name)
        elif isinstance(node, ast.AugAssign) and (name := root(node.target)):
            found.add(name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Subscript) and (name := root(target)):
                    found.add(name)
    return found

def _calls_forward(tree: ast.AST) -> bool:
    """Does the cell call a module's ``.forward(…)`` itself (``self.attn.forward(h)``), bypassing its hooks?
    ``super().forward(…)`` does not count."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "forward"
               and not (isinstance(node.func.value, ast.Call) and isinstance(node.func.value.func, ast.Name)
                        and node.func.value.func.id == "super")
               for node in ast.walk(tree))


def _reads_a_shape(tree: ast.AST) -> bool:
    """Does the cell read a size off any object (``.shape``, ``.size()``, ``.ndim``, ``len(…)``, ``np.shape(…)``),
    where a step asks for a shape written with the size names?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("shape", "ndim") and isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in ("len", "size", "shape", "numel", "dim"):
                return True
    return False


def _shape_of_result(tree: ast.AST) -> bool:
    """Does the cell read the shape (``.shape``, ``.size()``, ``.ndim``, ``len(…)``, ``np.shape(…)``) of something
    it computes: an expression with an operator or a call (``(q @ k.T).shape``, ``torch.matmul(q, k.T).size()``),
    or a name the cell binds to one? The shape of a given tensor (``queries.shape[0]``, ``len(labels)``) does not
    count, nor of a tensor made from a literal or a list (``torch.tensor(x_list)``)."""
    def computed(node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.BinOp):
                return True
            if isinstance(sub, ast.Call):
                fn = sub.func
                name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                if name not in _CONSTRUCTORS and name not in ("size", "dim", "len"):
                    return True
        return False

    results = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and computed(node.value)
               for t in node.targets if isinstance(t, ast.Name)}

    def of_result(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in results or not isinstance(node, ast.Name) and computed(node)

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("shape", "ndim") and of_result(node.value):
            return True
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr in ("size", "dim") and of_result(fn.value):
                return True
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in ("len", "shape") and node.args and of_result(node.args[0]):
                return True
    return False

_CONSTRUCTORS = {"tensor", "Tensor", "FloatTensor", "DoubleTensor", "as_tensor", "array", "asarray", "constant",
                 "convert_to_tensor", "Variable", "Parameter"}


def _numbers(node: ast.AST) -> int | None:
    """How many numbers a literal list/tuple (nested or not) holds; None if it holds anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _numbers(node.operand)
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
        counts = [_numbers(e) for e in node.elts]
        return None if None in counts else sum(counts)
    return None


_LIBRARY_ATTENTION = {"scaled_dot_product_attention", "dot_product_attention", "MultiheadAttention",
                      "MultiHeadAttention", "multi_head_attention_forward",
                      "Attention", "AdditiveAttention"}  # Keras's dot-product (Luong) and additive layers
_NO_GRAD = {"no_grad", "inference_mode"}


def library_attention(calls: set[str]) -> bool:
    """A library's attention among the calls: one of :data:`_LIBRARY_ATTENTION`, or a kernel of it by another name
    (`torch.ops.aten._scaled_dot_product_attention_math`, `_scaled_dot_product_flash_attention`)."""
    return bool(calls & _LIBRARY_ATTENTION) or any(
        "scaled_dot_product" in c or "multi_head_attention" in c.lower() or "multiheadattention" in c.lower()
        for c in calls)


def _callee(call: ast.Call) -> str:
    """The name a call calls (``F.softmax(…)`` → ``softmax``; "" for ``f()(…)`` and the like)."""
    fn = call.func
    return fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""


def _call_names(tree: ast.AST) -> set[str]:
    """The names of everything the cell calls (``F.softmax(…)`` → ``softmax``)."""
    return {_callee(node) for node in ast.walk(tree) if isinstance(node, ast.Call)}


def called_names(source: str) -> set[str]:
    """The names of everything a piece of code calls (``lengths.max()`` → ``max``); empty if it does not
    parse."""
    tree = _parse(source)
    return _call_names(tree) - {""} if tree is not None else set()


def _without_grad(tree: ast.AST) -> bool:
    """Does the cell switch gradient tracking off (``with torch.no_grad():``, ``inference_mode``, as a
    decorator too, or ``set_grad_enabled(False)``)?"""
    # `torch.no_grad()` on a line of its own makes a context manager and drops it: nothing is switched off
    alone = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name in _NO_GRAD and id(node) not in alone:
                return True
            if name == "set_grad_enabled" and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value is False:
                return True
        elif isinstance(node, ast.Attribute) and node.attr in _NO_GRAD and id(node) not in called:  # @torch.no_grad
            return True
    return False


def _no_grad_names(tree: ast.AST) -> list[str]:
    """The names read where gradient tracking is off: inside a ``with torch.no_grad():`` (or ``inference_mode``)
    block; ``"*"`` (anything may be) for a cell that calls ``set_grad_enabled(False)`` or defines a function
    decorated with it."""
    found: set[str] = set()

    def no_grad(expr: ast.AST) -> bool:
        return isinstance(expr, ast.Call) and _callee(expr) in _NO_GRAD or \
            isinstance(expr, ast.Attribute) and expr.attr in _NO_GRAD

    for node in ast.walk(tree):
        body: list[ast.AST] = []
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(no_grad(i.context_expr) for i in node.items):
            body = node.body
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(no_grad(d) for d in node.decorator_list):
            found.add("*")  # what it is handed runs without gradients, wherever the call is
        elif isinstance(node, ast.Call) and _callee(node) == "set_grad_enabled" and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value is False:
            found.add("*")
        elif isinstance(node, ast.Call) and no_grad(node.func):  # torch.no_grad()(model): the model wrapped
            body = [*node.args, *(k.value for k in node.keywords)]
        for statement in body:
            found.update(n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return sorted(found)


def _grad_calls(tree: ast.AST) -> list[str]:
    """The names called (``model(...)``, ``model.forward(...)``) outside every ``with torch.no_grad():`` (or
    ``inference_mode``) block: where gradient tracking stays on."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.With, ast.AsyncWith)) and any(
                isinstance(i.context_expr, ast.Call) and _callee(i.context_expr) in _NO_GRAD
                or isinstance(i.context_expr, ast.Attribute) and i.context_expr.attr in _NO_GRAD for i in node.items):
            inside.update(id(n) for statement in node.body for n in ast.walk(statement))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in inside:
            fn = node.func.value if isinstance(node.func, ast.Attribute) and node.func.attr in ("forward", "__call__") \
                else node.func
            if isinstance(fn, ast.Name):
                found.add(fn.id)
    return sorted(found)


def _outer_product(call: ast.Call, name: str) -> bool:
    """``tensordot(a, b, axes=0)`` (or ``tf.tensordot(a, b, 0)``), or an ``einsum`` whose output keeps every index
    of its operands (``"ij,jd->ijd"``): a broadcast product, which adds nothing up."""
    if name == "einsum":
        spec = call.args[0] if call.args else None
        if not (isinstance(spec, ast.Constant) and isinstance(spec.value, str) and "->" in spec.value):
            return False
        ins, out = spec.value.replace(" ", "").split("->", 1)
        return "." not in ins and set(ins) - {","} <= set(out)
    if name != "tensordot":
        return False
    axes = next((k.value for k in call.keywords if k.arg in ("axes", "dims")), call.args[2] if len(call.args) > 2
                else None)
    return isinstance(axes, ast.Constant) and axes.value == 0


def _no_grad_alone(tree: ast.AST) -> bool:
    """Is ``torch.no_grad()`` (or ``inference_mode()``) called on a line of its own, where it does nothing?"""
    return any(isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _callee(node.value) in _NO_GRAD
               for node in ast.walk(tree))


def _types_numbers(tree: ast.AST) -> bool:
    """Does the cell type an array in by hand: a nested literal of numbers (a matrix), or a tensor/array
    constructor called on a literal of four numbers or more?"""
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)) and any(isinstance(e, (ast.List, ast.Tuple)) for e in node.elts):
            if (_numbers(node) or 0) >= 4:
                return True
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in _CONSTRUCTORS and (_numbers(node.args[0]) or 0) >= 4:
                return True
    return False


def _mentions_lengths(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and "len" in n.id.lower() for n in ast.walk(node))


def _max_of_lengths(tree: ast.AST) -> bool:
    """Does the cell take the largest of some lengths (``lengths.max()``, ``max(enc_lengths)``,
    ``tf.reduce_max(lengths)``): a name with "len" in it, maximised?"""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
        if name not in ("max", "amax", "reduce_max"):
            continue
        receiver = fn.value if isinstance(fn, ast.Attribute) and _root(fn) not in _LIBRARIES else None
        if any(_mentions_lengths(a) for a in [*node.args, *([receiver] if receiver is not None else [])]):
            return True
    return False


_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _idle(node: ast.AST) -> bool:
    """A loop in name only: a ``for`` whose body never reads its loop variable, or a comprehension whose result and
    conditions never read any of its variables (``for i, x_i in enumerate(x): s = x @ query`` computes the same
    thing on every turn). ``for _ in …`` too. A ``while`` loop is never idle: its condition may be what changes."""
    def targets(t: ast.AST) -> set[str]:
        return {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}

    def loaded(parts: list[ast.AST]) -> set[str]:
        return {n.id for part in parts for n in ast.walk(part)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}

    if isinstance(node, (ast.For, ast.AsyncFor)):
        return not targets(node.target) & loaded([*node.body, *node.orelse])
    if isinstance(node, _COMPREHENSIONS):
        names = set().union(*(targets(g.target) for g in node.generators))
        parts: list[ast.AST] = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        parts += [c for g in node.generators for c in g.ifs] + [g.iter for g in node.generators[1:]]
        return not names & loaded(parts)
    return False


def _loop_depth(node: ast.AST, depth: int = 0) -> int:
    """How deep loops nest in ``node``: a ``for``/``while`` counts one, a comprehension one per ``for`` clause
    (``[f(a, b) for a in x for b in x]`` is two loops, one inside the other); a loop in name only (:func:`_idle`)
    does not count."""
    if isinstance(node, _LOOPS) and not _idle(node):
        depth += _product_depth(getattr(node, "iter", None))
    elif isinstance(node, _COMPREHENSIONS) and not _idle(node):
        depth += sum(_product_depth(g.iter) for g in node.generators)
    return max([depth, *(_loop_depth(child, depth) for child in ast.iter_child_nodes(node))])


def _product_depth(iterable: ast.AST | None) -> int:
    """How many loops one ``for`` over ``iterable`` is: ``itertools.product(a, b)`` or ``product(r, repeat=2)``
    nests its loops in one statement (two, or the ``repeat``); anything else is one."""
    if not isinstance(iterable, ast.Call):
        return 1
    func = iterable.func
    if not (isinstance(func, ast.Attribute) and func.attr == "product" and isinstance(func.value, ast.Name)
            and func.value.id == "itertools" or isinstance(func, ast.Name) and func.id == "product"):
        return 1
    repeat = next((k.value.value for k in iterable.keywords if k.arg == "repeat" and isinstance(k.value, ast.Constant)
                   and isinstance(k.value.value, int)), 1)
    return max(1, len(iterable.args) * repeat)


_HALF = {"float16", "half", "bfloat16", "float16_t"}


def _low_precision(tree: ast.AST) -> str | None:
    """The half-precision float type the cell names, if any (``.half()``, ``torch.float16``, ``tf.bfloat16``,
    ``np.float16``, ``"float16"``): "bfloat16" when that one is named, else "float16"."""
    named = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _HALF:  # .half(), torch.float16, tf.bfloat16
            named.add(node.attr)
        if isinstance(node, ast.Name) and node.id in _HALF - {"half"}:  # a variable `half` is not a dtype
            named.add(node.id)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in _HALF:
            named.add(node.value)
    if not named:
        return None
    return "bfloat16" if named == {"bfloat16"} else "float16"


def _sequence_mask_without_maxlen(tree: ast.AST) -> bool:
    """A ``tf.sequence_mask(lengths)`` call without its ``maxlen``: as wide as the longest length."""
    return any(isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))
               and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "sequence_mask"
               and len(node.args) < 2 and not any(k.arg in ("maxlen", None) for k in node.keywords)
               for node in ast.walk(tree))


def typed_lists(source: str) -> list[list[float]]:
    """The literal lists (or tuples) of two numbers or more that a cell hands to a tensor or array constructor
    (``torch.tensor([5, 2])``, ``np.array([[1, 2], [3, 4]])``), each flattened; [] if it does not parse."""
    tree = _parse(source)
    if tree is None:
        return []

    def flat(node: ast.AST) -> list[float]:
        if isinstance(node, (ast.List, ast.Tuple)):
            return [x for e in node.elts for x in flat(e)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return [-x for x in flat(node.operand)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
            return flat(node.operand)
        return [float(node.value)] if isinstance(node, ast.Constant) else []

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            if name in _CONSTRUCTORS and (_numbers(node.args[0]) or 0) >= 2:
                out.append(flat(node.args[0]))
    return out


_SEEDS = {"manual_seed", "seed", "set_seed"}


def _seeds_in_class(tree: ast.AST) -> bool:
    """Does a class of the cell seed a random generator itself (``torch.manual_seed(…)`` in its ``__init__``)?"""
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            for node in ast.walk(cls):
                if isinstance(node, ast.Call):
                    fn = node.func
                    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                    if name in _SEEDS:
                        return True
    return False


# methods and functions that return a new tensor and leave their input as it was (their in-place twins end in _)
_OUT_OF_PLACE = {"masked_fill", "masked_scatter", "transpose", "permute", "reshape", "view", "unsqueeze", "squeeze",
                 "softmax", "log_softmax", "add", "sub", "mul", "div", "clamp", "clip", "exp", "tril", "triu",
                 "float", "double", "contiguous", "flip", "where", "index_fill", "scatter", "matmul", "sqrt",
                 "nan_to_num"}
# (not fill_diagonal: NumPy's works in place and returns None; torch's is fill_diagonal_)


_MODE_METHODS = {"eval", "train", "zero_grad"}  # what evaluating or stepping a model may call on it
_CHANGING_METHODS = {"half", "double", "float", "bfloat16", "to", "cuda", "cpu", "apply", "load_state_dict"}


def module_changes(source: str, root: str) -> list[str]:
    """The statements of a cell that change the object ``root`` names (a trained model) beyond its mode: an
    attribute of it assigned (``model.attn.dropout = 0.0``), or an in-place method called on something reached from
    it (``model.attn.causal_mask.fill_(False)``, ``model.requires_grad_(False)``), as source, at most three."""
    tree = _parse(source)
    if tree is None:
        return []

    def rooted(node: ast.AST) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return isinstance(node, ast.Name) and node.id == root

    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if isinstance(node, ast.Assign) and _same_copy(node.value, targets):
                continue  # `model.attn.causal_mask = model.attn.causal_mask.clone()`: the same numbers again
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) and rooted(t) for t in targets):
                found.append(ast.unparse(node)[:80])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and rooted(node.func.value) \
                and (node.func.attr.endswith("_") and not node.func.attr.startswith("_")
                     or node.func.attr in _CHANGING_METHODS and isinstance(node.func.value, ast.Name)) \
                and node.func.attr not in _MODE_METHODS and not _sets_mode_only(node):  # .half(), .to() change it
            found.append(ast.unparse(node)[:80])
    return found[:3]


def _sets_mode_only(call: ast.Call) -> bool:
    """``model.apply(lambda m: m.eval())``: every submodule's mode set, which ``model.eval()`` does as well."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "apply" and len(call.args) == 1
            and isinstance(call.args[0], ast.Lambda)):
        return False
    body = call.args[0].body
    return isinstance(body, ast.Call) and isinstance(body.func, ast.Attribute) and body.func.attr in ("eval", "train")


def _same_copy(value: ast.AST, targets: Sequence[ast.AST]) -> bool:
    """``value`` is a copy of the one target itself (``t.clone()``, ``t.detach().clone()``, ``t.detach()``)."""
    if len(targets) != 1:
        return False
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and not value.args \
            and value.func.attr in ("clone", "detach", "contiguous"):
        value = value.func.value
    return ast.dump(value) == ast.dump(targets[0]).replace("ctx=Store()", "ctx=Load()")


def discarded_results(source: str) -> list[str]:
    """Calls whose new tensor is thrown away: a statement of its own such as ``scores.masked_fill(mask, -inf)``
    (which changes nothing; ``masked_fill_`` or ``scores = scores.masked_fill(...)`` would). The last line of a cell
    is left out: the notebook shows its value."""
    tree = _parse(source)
    if tree is None:
        return []
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            if isinstance(node, ast.Module) and field == "body":
                stmts = stmts[:-1]
            for stmt in stmts:
                call = stmt.value if isinstance(stmt, ast.Expr) else None
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) \
                        and call.func.attr in _OUT_OF_PLACE and not any(k.arg == "out" for k in call.keywords):
                    found.append(ast.unparse(call)[:80])
    return found


def code_features(source: str) -> dict[str, Any] | None:
    """How a cell computes, for steps that ask for one way: ``loop`` (a ``for``/``while`` or a
    comprehension), ``nested_loop`` (a loop inside a loop, or a comprehension with two ``for``),
    ``matmul`` (``@`` or a matrix-product call), ``implicit_softmax_dim`` (a softmax called without its
    axis, e.g. ``F.softmax(s)``), ``indexed_result`` (the result of a function call indexed, as in
    ``f(x)[perm]``), ``typed_numbers`` (an array typed in by hand: a nested literal of numbers, or a
    tensor/array made from a literal of four numbers or more), ``library_attention`` (a library's
    attention called: ``scaled_dot_product_attention``, a multi-head attention layer), ``no_grad``
    (gradient tracking switched off), ``seeds_in_class`` (a class that seeds a random generator itself),
    ``low_precision`` (a half-precision float type named), ``max_of_lengths`` (the largest of some lengths
    taken: ``lengths.max()``), ``sequence_mask_without_maxlen``, ``shape_of_result`` (the shape read off a
    result the cell computes, where a step asks to predict it), ``shape_read`` (a size read off
    anything), ``forward_called`` (a module's forward called directly), ``int_cast`` (an integer type named) and
    ``no_grad_names`` (the names read where gradients are off) and ``grad_calls`` (the names called where they are
    on), ``sampled`` (a call that draws from probabilities: ``torch.multinomial``, a distribution's ``sample()``).
    ``None`` if it does not parse."""
    tree = _parse(source)
    if tree is None:
        return None
    imported = {(a.asname or a.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for a in node.names if a.name in _SOFTMAXES | _SOFTMAX_MODULES}
    loop = matmul = implicit = False
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor)) and _over_named_things(node.iter):
            pass  # `for w in (w_key, w_value)`: one product per matrix, not one per input
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) \
                and all(_over_named_things(g.iter) for g in node.generators):
            pass
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp,
                               ast.GeneratorExp)):
            loop = loop or not _idle(node)  # (a loop whose variable nothing reads computes nothing per turn)
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            matmul = True
        elif isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
            matmul = matmul or name in _PRODUCTS and not _outer_product(node, name)
            # a loop written as a call (but `map(x.matmul, (w_key, w_value))`: one product per matrix)
            loop = loop or isinstance(fn, ast.Name) and fn.id in ("map", "filter") \
                and not all(_over_named_things(a) for a in node.args[1:])
            implicit = implicit or _implicit_axis(node, imported)
    return {"loop": loop, "nested_loop": _loop_depth(tree) >= 2, "matmul": matmul, "implicit_softmax_dim": implicit,
            "indexed_result": _indexes_a_result(tree), "typed_numbers": _types_numbers(tree),
            # (a function the cell defines is its own, whatever its name: `multi_head_attention` calling itself)
            "library_attention": library_attention(_call_names(tree) - {
                node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}),
            "no_grad": _without_grad(tree),
            "no_grad_alone": _no_grad_alone(tree),
            "seeds_in_class": _seeds_in_class(tree), "low_precision": _low_precision(tree),
            "max_of_lengths": _max_of_lengths(tree), "shape_of_result": _shape_of_result(tree),
            "shape_read": _reads_a_shape(tree), "forward_called": _calls_forward(tree),
            "sequence_mask_without_maxlen": _sequence_mask_without_maxlen(tree), "int_cast": _int_cast(tree),
            "no_grad_names": _no_grad_names(tree), "grad_calls": _grad_calls(tree),
            "sampled": bool(_call_names(tree) & _SAMPLERS), "grad_on_again": _grad_on_again(tree)}


def _grad_on_again(tree: ast.AST) -> bool:
    """Does the cell switch gradients on (`torch.enable_grad()`, `torch.set_grad_enabled(True)`)?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name == "enable_grad" or name == "set_grad_enabled" and node.args \
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value is True:
                return True
    return False


# calls that draw at random from probabilities (guesses sampled instead of taken as the argmax)
_SAMPLERS = {"multinomial", "sample", "rsample", "bernoulli", "gumbel_softmax",
             "choice", "choices", "random_categorical", "categorical"}


_WEIGHT_NAME = re.compile(r"(?:^|_)(?:w|W|weights?|Wq|Wk|Wv|Wo|w[qkvo])(?:_|$)")


def _over_named_things(node: ast.AST) -> bool:
    """An iterable written out as a tuple, list or set of weight matrices (``(w_key, w_value)``,
    ``[("w_query", w_query), …]``, ``(self.w_key, self.w_value)``) or a ``zip`` with one: the loop goes through the
    projections, whatever the number of inputs (a tuple of the inputs themselves, ``(word_1, word_2)``, is a loop
    over the inputs)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "zip" and node.args:
        return any(_over_named_things(a) for a in node.args)
    if not isinstance(node, (ast.Tuple, ast.List, ast.Set)) or not node.elts:
        return False

    def weight(e: ast.AST) -> bool:
        if isinstance(e, ast.Tuple):
            return any(weight(x) for x in e.elts) and all(
                weight(x) or isinstance(x, ast.Constant) and isinstance(x.value, str) for x in e.elts)
        name = e.attr if isinstance(e, ast.Attribute) else e.id if isinstance(e, ast.Name) else None
        return name is not None and bool(_WEIGHT_NAME.search(name))

    return all(weight(e) for e in node.elts)


def _int_cast(tree: ast.AST) -> bool:
    """An integer type named anywhere (``tf.cast(w, tf.int32)``, ``.astype(int)``, ``dtype="int64"``, ``.long()``,
    ``.int()``): what a cast to integers needs."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in _INT_TYPES:
            return True
        if isinstance(node, ast.Name) and node.id in _INT_TYPES:
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in _INT_TYPES:
            return True
    return False


def _names_read(node: ast.AST | None) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} \
        if node is not None else set()


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def computed_from(source: str, name: str, targets: Iterable[str]) -> bool:
    """Whether the cell computes one of ``targets`` from ``name``: some statement that binds or fills a target
    (``t = …``, ``t += …``, ``t[i] = …``, ``t.add_(…)``) reads ``name``, directly or through other names the cell
    computes from it (``total = wv.sum(0); t = total``). A loop's variable counts as computed from what it runs
    over. Static and generous: a cell that does not parse, or binds no target in a way read here, counts as
    computing from ``name``."""
    tree = _parse(source)
    if tree is None:
        return True
    deps: dict[str, set[str]] = {}

    def add(target: ast.AST, reads: set[str]) -> None:
        for t in ast.walk(target) if isinstance(target, (ast.Tuple, ast.List)) else (target,):
            if (root := _root_name(t)) is not None:
                deps.setdefault(root, set()).update(reads | (_names_read(t) - {root}))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                add(t, _names_read(node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            add(node.target, _names_read(node.value))
        elif isinstance(node, ast.NamedExpr):
            add(node.target, _names_read(node.value))
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            add(node.target, _names_read(node.iter))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):  # t.add_(…), t.copy_(…)
            add(node.func.value, _names_read(ast.Tuple(elts=[*node.args, *(k.value for k in node.keywords)])))
    wanted = [t for t in targets if t in deps]
    if not wanted:
        return True
    seen, todo = set(), list(wanted)
    while todo:
        for read in deps.get(todo.pop(), ()):
            if read == name:
                return True
            if read not in seen:
                seen.add(read)
                todo.append(read)
    return False
