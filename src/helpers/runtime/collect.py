"""Gather what the student's code produced for one exercise, as plain data: a *record*.

A *plan* (plain data, made by the course's registry — in the student's kernel — or sent by the
grader into its sandbox) says what to gather::

    {"id": "01.scores", "kind": "value" | "function", "answers": ["attn_scores"],
     "framework": "torch" | "tensorflow" | "numpy" | None,
     "trials": [...],      # function: argument dicts (trial 0 is the notebook's own example);
                           # value: fresh, consistent values of the names the cell reads (replays)
     "reads": [...],       # value: names whose current values are recorded (the student's own inputs)
     "count_rows": [...],  # value: weights whose products are counted in each replay (record["rows"])
     "module": None | "sa_v1",          # an nn.Module whose parameters must be trainable
     "probes": [{"kind": "peak_memory" | "one_pass" | "key_blocks" | "causal_blocks" | "module_dropout"
                 | "module_init", "inputs": {...}, "stream": "scores", "buffer": "causal_mask"}]}

:func:`collect` returns a *record*: the answers (one dict of float64 arrays per trial: for a value
exercise the namespace's values first, then one per replay of the student's own cell), the facts a
TO-DO may ask about (framework and dtype of what was handed in, inputs changed in place, notebook
data read from inside a function, parameters of a module, memory and passes), and the student's
own upstream values. It never decides anything: the registry compares the record with its
references (:func:`helpers.course.spec.evaluate`). It raises nothing: problems become
``record["error"]`` with a message for the student.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import dis
import functools
import inspect
import io
import random
import re
import sys
import traceback
import tracemalloc
import types
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..convert import AnswerError, NotDone, framework_of, to_array
from .cells import (
    _parse,
    assigned_names,
    attribute_names,
    called_names,
    code_features,
    computed_from,
    definition_source,
    deleted_names,
    discarded_results,
    free_names,
    inplace_targets,
    library_attention,
    mentioned_names,
    module_changes,
    out_targets,
    typed_lists,
    without_timing,
)
from .history import History, Run, message_line
from .nonfinite import origin as nonfinite_origin
from .watch import tracking

__all__ = ["OneShot", "collect", "dtype_name", "to_framework"]

_HELPERS_DIR = __file__.rsplit("/", 2)[0]
_INSTALLED = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python3\.\d+[/\\]")
_FRAMEWORK_NAMES = {"torch": "a PyTorch tensor", "tensorflow": "a TensorFlow tensor", "numpy": "a NumPy array"}
_MAGIC_LINE = re.compile(r"^\s*[%!]", re.M)

_replaying = False  # a check called from inside a replayed cell does nothing


# ----------------------------------------------------------------------------- frameworks


def dtype_name(value: Any) -> str | None:
    """``"float32"``, ``"int64"``, … for a tensor or array; None for lists and other objects."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return None
    name = getattr(dtype, "name", None)  # NumPy and TensorFlow
    if isinstance(name, str):
        return name
    return str(dtype).removeprefix("torch.")


# every object a check makes to hand to the student's code, kept alive until the next check starts: a function that
# keeps results by `id(x)` then never meets a new array that took the id of a freed one it remembers (its verdict
# would depend on the allocator). (A record whose measurements are deferred keeps its own list.)
_held: list[Any] | None = None


def _hold(value: Any) -> Any:
    if _held is not None:
        _held.append(value)
    return value


def to_framework(value: Any, framework: str | None, dtype: str | None = None) -> Any:
    """Hand a NumPy input to the student's code as the exercise's framework expects it.

    Floats become float32 tensors in torch / TensorFlow (float64 arrays in NumPy) unless ``dtype``
    says otherwise; integers and booleans keep their kind. Lists are deep-copied; other values
    pass through. While a check runs, every array made here is kept alive until the next check.
    """
    return _hold(_to_framework(value, framework, dtype)) if isinstance(value, (list, np.ndarray)) else value


def _to_framework(value: Any, framework: str | None, dtype: str | None = None) -> Any:
    if isinstance(value, list):
        return copy.deepcopy(value)
    if not isinstance(value, np.ndarray):
        return value
    if dtype is None:
        dtype = {"b": "bool", "i": "int64", "u": "int64"}.get(value.dtype.kind,
                                                             "float64" if framework in (None, "numpy", "python")
                                                             else "float32")
        if framework == "tensorflow" and dtype == "int64":
            dtype = "int32"
    arr = value.astype(dtype)
    if framework in (None, "numpy", "python"):
        return arr
    if framework == "torch":
        import torch

        return torch.from_numpy(arr.copy())
    if framework == "tensorflow":
        import tensorflow as tf

        return tf.constant(arr)
    raise ValueError(f"unknown framework {framework!r}")


def _mimic(value: Any, like: Any, framework: str | None) -> Any:
    """``value`` (NumPy, or a list) in the type the student's own variable has (``like``). A module of the
    notebook (``like`` has parameters) comes as ``{parameter name: array}``: a copy of the student's module
    that holds those arrays (of other sizes, maybe) as its parameters."""
    if isinstance(value, dict) and callable(getattr(like, "named_parameters", None)):
        return _module_like(value, like)
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and (plain := _plain_like(value, like)) is not None:
        return plain
    if isinstance(value, list) or not isinstance(value, np.ndarray):
        return copy.deepcopy(value)
    if value.ndim == 0 and type(like) in (int, float):  # a size the student keeps as a Python number stays one
        return type(like)(value)
    fw = framework_of(like) if like is not None else None
    if fw not in ("torch", "tensorflow", "numpy"):
        fw = framework or "numpy"
    dtype = dtype_name(like) if like is not None and framework_of(like) == fw else None
    if dtype is not None and value.dtype.kind == "f" and not re.match(r"(b?float|half|double)", dtype):
        dtype = None  # the student's own variable is an int tensor: give floats as the world has them
    try:
        return to_framework(value, fw, dtype)
    except (TypeError, ValueError):
        return to_framework(value, fw)


def _plain_like(value: np.ndarray, like: Any) -> Any:
    """``value`` as the plain Python value the student's own variable is (a predicted shape is a tuple of ints,
    an axis or a size an int): a later cell uses it as such (``reshape(scores_shape)``, ``dim=softmax_axis``).
    None when ``like`` is not a plain number or a flat tuple/list of numbers."""
    if isinstance(like, bool) or not isinstance(like, (int, float, tuple, list)):
        return None
    whole = bool(np.all(np.isfinite(value))) and bool(np.all(value == np.round(value)))
    if isinstance(like, (int, float)):
        if value.ndim:
            return None
        return int(value) if isinstance(like, int) and whole else type(like)(float(value))
    if value.ndim != 1 or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in like):
        return None
    items = [int(v) if whole and all(isinstance(u, int) for u in like) else float(v) for v in value]
    return type(like)(items)


def _module_like(params: Mapping[str, Any], module: Any) -> Any:
    """A copy of ``module`` whose parameters are ``params`` (by name; by order when the student named them
    otherwise, as long as there are as many), each as trainable as the student's own. ``params`` of the form
    ``{"trainable": {name: array}, "frozen": {name: array}}`` make a module of their own instead, with exactly
    these parameters (those of ``frozen`` with requires_grad=False; see :func:`_module_of` for ``buffers`` and
    ``double``)."""
    import torch

    if {"trainable", "frozen"} <= set(params) <= {"trainable", "frozen", "buffers", "double", "eval", "tied", "grads"} \
            and all(isinstance(params[k], Mapping) for k in ("trainable", "frozen")):
        made = _module_of(params["trainable"], params["frozen"], params.get("buffers") or {},
                          params.get("double") or (), params.get("tied") or {}, bool(params.get("grads")))
        return made.eval() if params.get("eval") else made
    clone = copy.deepcopy(module)
    own = [name for name, _ in clone.named_parameters()]
    if set(params) <= set(own):
        pairs = [(name, params[name]) for name in params]
    elif len(own) == len(params):
        pairs = list(zip(own, params.values()))
    else:
        return clone
    for name, arr in pairs:
        owner_name, _, attr = name.rpartition(".")
        owner = clone.get_submodule(owner_name) if owner_name else clone
        old = getattr(owner, attr)
        setattr(owner, attr, torch.nn.Parameter(torch.as_tensor(np.asarray(arr), dtype=old.dtype),
                                                requires_grad=old.requires_grad))
    return clone


def _module_of(trainable: Mapping[str, Any], frozen: Mapping[str, Any], buffers: Mapping[str, Any] | None = None,
               double: Iterable[str] = (), tied: Mapping[str, str] | None = None, grads: bool = False) -> Any:
    """A plain ``nn.Module`` whose parameters are the given arrays (float32, or float64 for the names in
    ``double``), in that order, those of ``frozen`` with requires_grad=False, and ``buffers`` registered as buffers
    kept out of the state_dict:
    other counts, sizes and frozen parameters than the student's own module. A dotted name (``proj.w_out``) puts
    the parameter in a submodule of that name. ``tied`` maps a further name to one of those parameters: the same
    parameter object, registered there too (tied weights, which ``parameters()`` yields once). The first parameter
    is a view of a longer tensor (its storage holds twice its entries). ``grads``: every trainable one holds a
    gradient of zeros, as after a backward pass."""
    import torch

    module = torch.nn.Module()
    double = set(double)

    def owner(name: str) -> tuple[Any, str]:
        path, _, attr = name.rpartition(".")
        at = module
        for part in path.split(".") if path else ():
            if not hasattr(at, part):
                at.add_module(part, torch.nn.Module())
            at = getattr(at, part)
        return at, attr

    first = True
    for group, grad in ((trainable, True), (frozen, False)):
        for name, arr in group.items():
            at, attr = owner(name)
            dtype = torch.float64 if name in double else torch.float32
            data = torch.as_tensor(np.asarray(arr), dtype=dtype)
            if first and data.dim() >= 1 and data.shape[0]:
                # the first one a view of a tensor twice as long (as `nn.Parameter(t[:n])` makes): a count of what
                # the storages behind the parameters hold, not of their entries, shows
                whole = torch.zeros((2 * data.shape[0], *data.shape[1:]), dtype=dtype)
                whole[: data.shape[0]] = data
                data, first = whole[: data.shape[0]], False
            param = torch.nn.Parameter(data, requires_grad=grad)
            if grad and grads:  # a gradient kept from a backward pass, as a module trained before has
                param.grad = torch.zeros_like(data)
            at.register_parameter(attr, param)
    for name, arr in (buffers or {}).items():
        at, attr = owner(name)
        at.register_buffer(attr, torch.as_tensor(np.asarray(arr), dtype=torch.float32), persistent=False)
    for alias, source in (tied or {}).items():
        at, attr = owner(alias)
        at.register_parameter(attr, module.get_parameter(source))
    return module


# ----------------------------------------------------------------------------- errors


def _first_line(exc: BaseException) -> str:
    return message_line(exc, 300) or "(no message)"


def student_frame_line(exc: BaseException) -> str:
    """Where in the student's own code an exception came from (not helpers', not a library's)."""
    frames = [
        f for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(_HELPERS_DIR) and not _INSTALLED.search(f.filename)
    ]
    if not frames:
        return ""
    f = frames[-1]
    if f.line and f.line.strip().startswith("raise "):
        return ""  # a deliberate `raise` (often of code the notebook gives): its message says it all
    where = f"line {f.lineno}: `{f.line.strip()}`" if f.line else f"line {f.lineno}"
    if len(frames) > 1 and f.name != "<module>" and frames[-2].name != f.name:
        # inside another function of the notebook's (one the notebook gives, say), called from the student's: both
        caller = frames[-2]
        call = f": `{caller.line.strip()}`" if caller.line else ""
        where += f", in `{f.name}`, called from line {caller.lineno}{call}"
    return f" ({where})"


def _raising_line_binds(exc: BaseException, source: str | None) -> list[str]:
    """The names the top-level statement of the student's cell that raised binds (`attn_scores = …` on the line of
    the error): which step's line it was, when one cell computes several steps."""
    if not source or _MAGIC_LINE.search(source):
        return []
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<your cell>" and f.lineno]
    if not lines:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    for node in tree.body:
        if node.lineno <= lines[0] <= (node.end_lineno or node.lineno):
            return sorted(assigned_names(ast.get_source_segment(source, node) or ""))[:10]
    return []


def _raising_line_feeds(exc: BaseException, source: str | None) -> list[str]:
    """The names the cell's later top-level statements bind from what the raising statement binds (directly or
    through each other), in the order they are bound: which step's answer a raising helper line (`row_max = …`)
    is part of."""
    binds = set(_raising_line_binds(exc, source))
    if not binds:
        return []
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<your cell>" and f.lineno]
    tree = ast.parse(source or "")
    later = [n for n in tree.body if n.lineno > lines[0]]
    tainted, feeds = set(binds), []
    for node in later:
        reads = {x.id for x in ast.walk(node) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Load)}
        if reads & tainted:
            made = sorted(assigned_names(ast.get_source_segment(source, node) or ""))
            feeds += [n for n in made if n not in feeds]
            tainted |= set(made)
    return feeds[:20]


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"error": {"kind": kind, "message": message}}


def _stale_error(history: History | None, run: Run | None, names: Sequence[str], what: str) -> dict[str, Any] | None:
    """The record's error when the cell that defines the answer raised on its last run, or when an
    untouched TO-DO cell for it ran after the last cell that defined it."""
    if history is not None and history.placeholder_since(names, run) is not None:
        return _error("not_done", f"The TO-DO cell for {what} still has its placeholder: replace the "
                                  "`raise NotImplementedError(...)` line with your code and run the cell.")
    if run is None or not run.error:
        return None
    if run.placeholder and run.raised_in:
        return _error("not_done", f"The cell that defines {what} calls `{run.raised_in}`, which still raises its "
                                  "TO-DO placeholder: finish that step first, then run this cell again.")
    stale, partial = run.stale(names), run.partial(names)
    if not stale and not partial:
        return None
    name = sorted(stale or partial)[0]
    if run.placeholder:  # the TO-DO's own line, not a NotImplementedError of a library (softmax of integers)
        return _error("not_done", f"The TO-DO cell that defines `{name}` still raises NotImplementedError: "
                                  "replace the placeholder line with your code and run the cell.")
    at = f" on line {run.line}" if run.line else ""
    if stale:
        return _error("cell_raised", f"The cell that defines {what} raised {run.error}{at} the last time it ran, "
                                     f"so `{name}` may still hold an older value (or none). Fix that cell and run "
                                     "it again.")
    return _error("cell_raised", f"The cell that defines {what} raised {run.error}{at} the last time it ran, so "
                                 f"`{name}` may be only partly computed. Fix that cell and run it again.")


# ----------------------------------------------------------------------------- quiet replays


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """No output (nor warnings), no figures shown, and the random generators left as they were."""
    global _replaying
    states: list[tuple[Callable[[Any], Any], Any]] = [(random.setstate, random.getstate()),
                                                    (np.random.set_state, np.random.get_state())]
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_rng_state"):
        states.append((torch.set_rng_state, torch.get_rng_state()))
    plt = sys.modules.get("matplotlib.pyplot")
    figures = set(plt.get_fignums()) if plt is not None else set()
    show = plt.show if plt is not None else None
    _replaying = True
    try:
        if plt is not None:
            plt.show = lambda *a, **k: None
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the student's own warnings were shown when the cell ran
            yield
    finally:
        _replaying = False
        if plt is not None:
            plt.show = show
            for num in set(plt.get_fignums()) - figures:
                plt.close(num)
        for setter, state in states:
            with contextlib.suppress(Exception):
                setter(state)


_COUNTER: Any = None


def _counting(value: Any, name: str, counts: dict[str, int]) -> Any:
    """A PyTorch tensor that adds to ``counts[name]`` the rows of every tensor multiplied by it, and keeps the
    rows of the first such product in ``counts[name + "@first"]`` (and of each product, in order, in the list
    ``counts[name + "@sizes"]``); other values are returned as they are.

    Any product that consumes the value itself is counted, however it is written: ``x @ value``,
    ``torch.matmul`` / ``mm`` / ``bmm`` / ``addmm``, ``F.linear(x, value.T)``, ``torch.einsum("nd,de->ne", x,
    value)``, ``torch.tensordot``, ``torch.linalg.multi_dot``, or the value on the left (``value.T @ x.T``: the
    columns of x). The value's transposes, copies and casts (``.T``, ``.t()``, ``.transpose``, ``.permute``,
    ``.contiguous()``, ``.clone()``, ``.detach()``, ``.to(…)``, ``.float()``, ``.reshape``, ``.view``) are
    counted as the value; anything else derived from it (a slice, a stack) is a plain tensor, and so are the
    results: a product the count does not follow is missed, never invented."""
    global _COUNTER
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return value
    if _COUNTER is None:
        tensor = torch.Tensor
        matmuls = {tensor.__matmul__, torch.matmul, tensor.matmul, torch.mm, tensor.mm, torch.bmm, tensor.bmm}
        structural = {tensor.t, torch.t, tensor.transpose, torch.transpose, tensor.permute, torch.permute,
                      tensor.contiguous, tensor.clone, torch.clone, tensor.detach, torch.detach, tensor.to,
                      tensor.float, tensor.double, tensor.reshape, torch.reshape, tensor.view, tensor.type_as,
                      tensor.requires_grad_}
        transposes = {"T", "mT", "H", "mH"}
        # weights put side by side (a fused projection, torch.cat([w_query, w_key, w_value], dim=1)): a product
        # with the result is counted for each of them
        joins = {torch.cat, torch.concat, torch.hstack, torch.column_stack, torch.stack}
        linear = torch.nn.functional.linear

        def rows_of(other: Any, contracted: int) -> int | None:
            """The rows of ``other`` whose ``contracted`` entries each meet the weight."""
            if not isinstance(other, torch.Tensor) or not other.ndim:
                return None
            return other.numel() // max(1, contracted)

        def einsum_rows(args: tuple, counter: Any) -> int | None:
            if not args or not isinstance(args[0], str):
                return None
            ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
            spec = args[0].replace(" ", "").split("->")[0].split(",")
            if len(ops) != 2 or len(spec) != 2 or "." in args[0]:
                return None
            mine = 0 if ops[0] is counter else 1
            other, letters = ops[1 - mine], spec[1 - mine]
            if not isinstance(other, torch.Tensor) or len(letters) != other.ndim:
                return None
            shared = [size for letter, size in zip(letters, other.shape) if letter in spec[mine]]
            return rows_of(other, int(np.prod(shared)) if shared else 1)

        def rows_multiplied(func: Any, args: tuple, kwargs: dict, counter: Any) -> int | None:
            """The rows of the other operand of a product that consumes ``counter`` (None: not such a product)."""
            if func in matmuls and len(args) >= 2:
                if args[1] is counter and isinstance(args[0], torch.Tensor) and args[0].ndim:
                    return rows_of(args[0], args[0].shape[-1])
                if args[0] is counter and isinstance(args[1], torch.Tensor) and args[1].ndim >= 2:
                    return rows_of(args[1], args[1].shape[-2])  # the weight on the left: the other's columns
                return None
            if getattr(func, "__name__", "") == "__rmatmul__" and len(args) >= 2 and args[0] is counter:
                return rows_of(args[1], args[1].shape[-1]) if isinstance(args[1], torch.Tensor) else None
            if func is linear:
                weight = args[1] if len(args) > 1 else kwargs.get("weight")
                x = args[0] if args else kwargs.get("input")
                return rows_of(x, x.shape[-1]) if weight is counter and isinstance(x, torch.Tensor) else None
            if func in (torch.addmm, tensor.addmm) and len(args) >= 3 and args[2] is counter:
                return rows_of(args[1], args[1].shape[-1]) if isinstance(args[1], torch.Tensor) else None
            if func is torch.einsum:
                return einsum_rows(args, counter)
            if func is torch.tensordot and len(args) >= 2 and (args[0] is counter or args[1] is counter):
                dims = args[2] if len(args) > 2 else kwargs.get("dims", 2)
                mine = 0 if args[0] is counter else 1
                other = args[1 - mine]
                if not isinstance(other, torch.Tensor):
                    return None
                if isinstance(dims, int):
                    axes = range(other.ndim - dims, other.ndim) if mine == 1 else range(dims)
                else:
                    axes = list(dims[1 - mine]) if isinstance(dims[1 - mine], (list, tuple)) else [dims[1 - mine]]
                return rows_of(other, int(np.prod([other.shape[a] for a in axes])))
            if func is torch.linalg.multi_dot and args and isinstance(args[0], (list, tuple)) and len(args[0]) == 2:
                first, second = args[0]
                return rows_of(first, first.shape[-1]) if second is counter and isinstance(first, torch.Tensor) \
                    else None
            return None

        def keeps_being(func: Any) -> bool:
            """Does ``func`` give the weight itself again (a transpose, a copy, a cast)?"""
            if func in structural:
                return True
            owner = getattr(func, "__self__", None)  # a property's getter: .T, .mT
            return getattr(func, "__name__", "") == "__get__" and getattr(owner, "__name__", "") in transposes

        def counted(result: Any, counts: dict[str, int], name: str) -> Any:
            out = result.as_subclass(RowCounter)
            out._counts, out._name = counts, name
            return out

        class RowCounter(torch.Tensor):
            __module__ = "torch"  # a tensor like any other, for the student's code and for framework_of
            _counts: dict[str, int] | None = None
            _name = ""

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
                kwargs = kwargs or {}
                flat = [*args, *kwargs.values()]
                flat += [a for x in flat if isinstance(x, (list, tuple)) for a in x]
                counters = [a for a in flat if isinstance(a, RowCounter) and a._counts is not None]
                for counter in counters[:1]:
                    try:
                        rows = rows_multiplied(func, args, kwargs, counter)
                    except Exception:  # noqa: BLE001 — arguments of a shape the count does not know: not counted
                        rows = None
                    if rows is not None:
                        for name in counter._name.split("+"):
                            counter._counts[name] = counter._counts.get(name, 0) + rows
                            counter._counts.setdefault(name + "@first", rows)  # the first product alone
                            # every product's rows, in order (a decoder fed a few tokens at a time)
                            counter._counts.setdefault(name + "@sizes", []).append(rows)
                with torch._C.DisableTorchFunctionSubclass():
                    result = func(*args, **kwargs)
                source = args[0] if args else None
                if isinstance(source, RowCounter) and source._counts is not None and keeps_being(func) and \
                        isinstance(result, torch.Tensor):
                    return counted(result, source._counts, source._name)
                if func in joins and counters and isinstance(result, torch.Tensor):
                    names = "+".join(dict.fromkeys(n for c in counters for n in c._name.split("+")))
                    return counted(result, counters[0]._counts, names)
                return result

        _COUNTER = RowCounter
    out = value.as_subclass(_COUNTER)
    out._counts, out._name = counts, name
    return out


def _no_check(*args: Any, **kwargs: Any) -> None:
    return None


def _compile_cell(source: str, shell: Any) -> types.CodeType | None:
    source = without_timing(source)  # `%time x = …` runs `x = …` (in the replay's namespace, not the notebook's)
    if _MAGIC_LINE.search(source):
        if shell is None:
            return None
        source = shell.transform_cell(source)
    try:
        return compile(source, "<your cell>", "exec")
    except (SyntaxError, ValueError):
        return None


def _replay(code: types.CodeType | Callable[..., Any], namespace: Mapping[str, Any], overlay: Mapping[str, Any],
            answers: Sequence[str], keep: bool = False) -> dict[str, Any]:
    """Run the student's cell again in a copy of the namespace, with ``overlay`` for its inputs (``keep``: with the
    answers the notebook holds left bound, as when a student runs the cell a second time)."""
    ns = dict(namespace)
    for name in answers if not keep else ():
        ns.pop(name, None)
    ns.update(overlay)
    ns["check"] = _no_check
    ns["display"] = _no_check
    with _quiet():
        if callable(code) and not isinstance(code, types.CodeType):
            ns.update(code(**overlay))
        else:
            try:
                exec(code, ns)
            except BaseException as exc:
                with contextlib.suppress(AttributeError, TypeError):  # (an exception that takes no attributes)
                    exc._helpers_namespace = ns  # what the cell had bound when it raised (see _given_line_raised)
                raise
    return ns


def _given_line_raised(exc: BaseException, source: str | None, given: Sequence[str]) -> bool:
    """Did the cell raise on a line its TO-DO gives (an `assert` that compares the answer with the library's, a
    print), after the student's own lines ran? Such a line fails because the answer is wrong (or of another
    dtype): the answers are judged, not the raise."""
    if not source or not given:
        return False
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<your cell>" and f.lineno]
    if not lines:
        return False
    text = source.split("\n")
    return 0 < lines[0] <= len(text) and text[lines[0] - 1].strip() in given


def _replay_trials(record: dict[str, Any], plan: Mapping[str, Any], namespace: Mapping[str, Any],
                   trials: Sequence[Mapping[str, Any]], code: Any, source: str | None, answers: Sequence[str],
                   later: list[str], earlier: set[str], mutated: set[str], rebound: set[str], deleted: set[str],
                   reassigned: set[str]) -> None:
    """Run the cell again on each trial's inputs (see :func:`collect`): the answers, and what each run did to the
    notebook's names, go into ``record`` and the sets given."""
    if record["replay"]["available"]:
        def given(world: Mapping[str, Any]) -> dict[str, Any]:
            return {name: _mimic(value, namespace.get(name), plan.get("framework")) for name, value in world.items()
                    if name not in (plan.get("own") or ()) or name not in namespace}

        for i, world in enumerate(trials, start=1):
            overlay = given(world)
            before = _snapshot(overlay)
            lists = {n: copy.deepcopy(v) for n, v in overlay.items() if isinstance(v, list)}  # given as lists
            rows: dict[str, int] = {}
            for name in plan.get("count_rows") or ():
                if name in overlay:
                    overlay[name] = _counting(overlay[name], name, rows)
            try:
                ns = _replay(code, namespace, overlay, answers)
            except BaseException as exc:  # noqa: BLE001 — the student's cell, run again: anything can happen
                if isinstance(exc, KeyboardInterrupt):
                    raise
                bound = getattr(exc, "_helpers_namespace", None)
                if isinstance(exc, Exception) and bound is not None and all(n in bound for n in answers) \
                        and _given_line_raised(exc, source, plan.get("given") or ()):
                    ns = bound  # (the answers were computed: the given line that checks them failed on them)
                else:
                    record["replay"]["error"] = {"trial": i, "message": f"{type(exc).__name__}: {_first_line(exc)}"
                                                                         f"{student_frame_line(exc)}",
                                                 "binds": _raising_line_binds(exc, source),
                                                 "feeds": _raising_line_feeds(exc, source)}
                    break
            # in place: the very objects handed to the cell changed (a name the cell binds anew, such as
            # a loop variable or a step of the same cell computed again, is not a change of its input)
            mutated.update(_mutated(before, overlay))
            mutated.update(n for n, v in lists.items() if _list_changed(v, overlay[n]))
            # a name the notebook reads further down, bound anew by the cell to something else; or an input the
            # cell starts from, bound anew so that running the cell again gives another answer
            changed = {n for n in set(later) | set(overlay) | earlier - set(answers)
                       if n in ns and _rebound(overlay[n] if n in overlay else namespace.get(n), ns[n])}
            rebound.update(changed & set(later))
            reassigned.update(changed & earlier)
            deleted.update(n for n in later if n in overlay and n not in ns)  # `del x_seq`: the cells below fail
            if (changed - set(later)) and not rebound and _rerun_differs(code, ns, answers):
                rebound.update(changed - set(later))
            got = {}
            for name in answers:
                if name not in ns:
                    record["replay"]["error"] = {"trial": i, "message": f"the cell did not define `{name}`"}
                    break
                try:
                    got[name] = to_array(ns[name], name, finite=False)
                except AnswerError as err:
                    record["replay"]["error"] = {"trial": i, "message": err.message}
                    break
            if record["replay"]["error"]:
                break
            if i == 1:  # the framework the cell itself gives them (the notebook's may come from a later cell)
                record["facts"]["replayed"] = {n: framework_of(ns[n]) for n in answers}
                # run once more with the notebook's answers still bound, as a second run of the cell has them: a
                # cell that keeps an answer already defined (`globals().get(...)`, `try: … except NameError`) gives
                # the old one
                if kind := _keeps_old_answer(code, namespace, world, plan, answers, got):
                    record["keeps_old"] = kind
                # and once without the names the cell itself assigns besides its answers (a helper kept from an
                # earlier run: `if "scale" not in globals(): scale = …`)
                if source is not None and (stale := _stale_helpers(code, namespace, world, plan, answers, got,
                                                                   source)):
                    record["stale_helpers"] = stale
            record["answers"].append(got)
            if "nonfinite" not in record and any(_nonfinite(v) for v in got.values()):
                # where the first NaN or infinity was made: the cell once more on these inputs, watched
                seen = nonfinite_origin(functools.partial(_replay, code, namespace, given(world), answers),
                                        plan.get("framework"))
                if seen:
                    record["nonfinite"] = {"trial": i, **seen}
            if plan.get("module") and i <= len(plan.get("again") or ()) and plan["again"][i - 1]:
                record.setdefault("module_again", []).append(
                    _module_again(ns.get(plan["module"]), plan["again"][i - 1], plan.get("framework")))
            # the inputs of the step that the cell computes itself (01's TensorFlow half: the weights and the outputs
            # in one cell), as this replay made them: the step is also judged from those
            own_up = {}
            for name in plan.get("reads") or ():
                if name in ns and ns[name] is not overlay.get(name, namespace.get(name)):
                    try:
                        own_up[name] = to_array(ns[name], name, finite=False)
                    except AnswerError:
                        continue
            record.setdefault("replay_upstream", []).append(own_up)
            if plan.get("count_rows"):
                record.setdefault("rows", []).append(rows)


class _ModuleWatch:
    """Global forward hooks on every torch module while a cell runs again: the classes of the outermost modules
    whose forward added parameters to them (``grown``: weights made on the first call, not in ``__init__``), and of
    the modules with parameters that such a forward calls without holding them (``unregistered``: layers kept in a
    plain list or dict, or a module of the notebook's), whose weights its ``parameters()`` leaves out."""

    def __init__(self) -> None:
        self.grown: set[str] = set()
        self.unregistered: set[str] = set()
        self.outer: Any = None
        self.count = 0
        self.handles: list[Any] = []

    @staticmethod
    def _count(module: Any) -> int:
        return sum(1 for _ in module.parameters())

    def _before(self, module: Any, *_: Any) -> None:
        if self.outer is None:
            self.outer, self.count = module, self._count(module)
        elif not any(m is module for m in self.outer.modules()) and self._count(module):
            self.unregistered.add(type(module).__name__)

    def _after(self, module: Any, *_: Any) -> None:
        if module is self.outer:
            if self._count(module) > self.count:
                self.grown.add(type(module).__name__)
            self.outer = None

    def start(self) -> None:
        try:
            from torch.nn.modules import module as torch_module

            self.handles = [torch_module.register_module_forward_pre_hook(self._before),
                            # (also when forward raises: the next call is then an outermost one again)
                            torch_module.register_module_forward_hook(self._after, always_call=True)]
        except Exception:  # noqa: BLE001 — no torch, or one without global hooks: nothing is watched
            self.handles = []

    def stop(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _grad_mode_hook(module: Any, seen: list[bool]) -> Any:
    """A forward pre-hook on ``module`` that notes at each call whether a graph is built: gradients on, and a
    parameter of the module called that requires one (a copy of the model with every parameter frozen builds none,
    whatever the grad mode; the copy keeps the hook). None: not a module."""
    try:
        import torch

        return module.register_forward_pre_hook(lambda m, *_: seen.append(
            torch.is_grad_enabled() and any(p.requires_grad for p in m.parameters())))
    except Exception:  # noqa: BLE001 — not a torch module, or one that refuses hooks
        return None


def _keeps_old_answer(code: Any, namespace: Mapping[str, Any], world: Mapping[str, Any], plan: Mapping[str, Any],
                      answers: Sequence[str], got: Mapping[str, np.ndarray]) -> list[str] | None:
    """The answers a replay gives otherwise when the notebook's answers are left bound (the cell keeps an answer it
    finds already defined), or None."""
    held = [n for n in answers if n in namespace]
    if not held:
        return None
    try:
        overlay = {name: _mimic(value, namespace.get(name), plan.get("framework")) for name, value in world.items()
                   if name not in (plan.get("own") or ()) or name not in namespace}
        ns = _replay(code, namespace, overlay, answers, keep=True)
        kept = []
        for name in held:
            new, old = to_array(ns[name], name, finite=False), to_array(namespace[name], name, finite=False)
            # the notebook's own answer came back, where the fresh inputs give another one
            if new.shape == old.shape and np.array_equal(new, old, equal_nan=True) and not (
                    new.shape == got[name].shape and np.allclose(new, got[name], rtol=1e-6, atol=1e-9, equal_nan=True)):
                kept.append(name)
        return kept or None
    except BaseException as exc:  # noqa: BLE001 — the student's cell, run again: anything can happen
        if isinstance(exc, KeyboardInterrupt):
            raise
        return None


def _stale_helpers(code: Any, namespace: Mapping[str, Any], world: Mapping[str, Any], plan: Mapping[str, Any],
                   answers: Sequence[str], got: Mapping[str, np.ndarray], source: str) -> dict[str, Any] | None:
    """The cell run on the first replay's inputs without the names it assigns itself besides its answers (its
    helpers, as a first run has them: not yet defined): when that gives other answers than the replay with the
    notebook's helpers bound, the cell keeps a helper from an earlier run. Those helpers' names and the fresh run's
    answers, or None (no helper, the same answers, or a fresh run that raises: a name read before it is set)."""
    helpers = sorted(n for n in assigned_names(source) - set(answers) - set(world) - set(plan.get("reads") or ())
                     if n in namespace and not n.startswith("_") and not callable(namespace[n]))
    if not helpers:
        return None
    def without(names: Sequence[str]) -> dict[str, np.ndarray] | None:
        """The answers of a run without ``names``, if they differ from the replay's (None: the same, or it raised)."""
        try:
            overlay = {name: _mimic(value, namespace.get(name), plan.get("framework"))
                       for name, value in world.items() if name not in (plan.get("own") or ()) or name not in namespace}
            ns = _replay(code, {k: v for k, v in namespace.items() if k not in names}, overlay, answers)
            fresh = {name: to_array(ns[name], name, finite=False) for name in answers}
        except BaseException as exc:  # noqa: BLE001 — the student's cell, run again: anything can happen
            if isinstance(exc, KeyboardInterrupt):
                raise
            return None
        same = all(fresh[n].shape == got[n].shape and np.allclose(fresh[n], got[n], rtol=1e-6, atol=1e-9,
                                                                  equal_nan=True) for n in answers)
        return None if same else fresh

    fresh = without(helpers)
    if fresh is None:
        return None
    # the helpers that matter, each left out alone (the others it recomputes anyway)
    kept = [h for h in helpers[:10] if without([h]) is not None] if len(helpers) > 1 else helpers
    return {"names": (kept or helpers)[:10], "answers": fresh}


def _shares_storage(a: Any, b: Any) -> bool:
    """Do two tensors or arrays share memory (one a view of the other)?"""
    if a is b:
        return False
    try:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return bool(np.shares_memory(a, b, max_work=1000))
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() and a.numel() > 0
    except Exception:  # noqa: BLE001 — an object that cannot say: not a view
        return False
    return False


def _mutated(before: Mapping[str, np.ndarray], after: Mapping[str, Any]) -> list[str]:
    changed = []
    for name, old in before.items():
        try:
            new = to_array(after[name], name, finite=False)
        except (AnswerError, KeyError):
            continue
        if new.shape != old.shape or not np.array_equal(new, old, equal_nan=True):
            changed.append(name)
    return changed


def _list_changed(old: list, new: Any) -> bool:
    """Has a list handed to the cell (the notebook's numbers, as given) been changed in place?"""
    try:
        return bool(old != new)
    except Exception:  # noqa: BLE001 — lists of tensors compare element by element: ask NumPy
        try:
            return not np.array_equal(np.asarray(old, dtype=float), np.asarray(new, dtype=float), equal_nan=True)
        except Exception:  # noqa: BLE001
            return False


def _rebound(old: Any, new: Any) -> bool:
    """Is ``new`` (what a name holds after the replayed cell) another value than ``old`` (what it held before)?
    Only data is compared (tensors, arrays, numbers, tuples); functions, classes and modules are not."""
    if new is old:
        return False
    if (state := _module_state(old)) is not None:  # a model built anew (new draws) or replaced by something else
        again = _module_state(new)
        return again is None or type(new) is not type(old) or state.keys() != again.keys() or any(
            a.shape != again[k].shape or not np.array_equal(a, again[k], equal_nan=True) for k, a in state.items())
    for v in (old, new):
        if callable(v) and not hasattr(v, "shape") or isinstance(v, (str, bytes, dict, type(None))):
            return False
    try:
        a, b = to_array(old, "old", finite=False), to_array(new, "new", finite=False)
    except AnswerError:
        return False
    # the same numbers computed another way (step 8's score taken again from the row of all scores) differ in the
    # last bits of a float32 only: that is not another value
    return a.shape != b.shape or dtype_name(old) != dtype_name(new) or not np.allclose(a, b, rtol=1e-6, atol=1e-7,
                                                                                       equal_nan=True)


def _without_given(source: str, given: Sequence[str]) -> str:
    """The cell without the lines its TO-DO gives (each taken out once): what the student wrote. The whole cell
    when what is left does not parse."""
    left = list(given)
    kept = []
    for line in source.split("\n"):
        if line.strip() in left:
            left.remove(line.strip())
        else:
            kept.append(line)
    own = "\n".join(kept)
    return own if _parse(own) is not None else source


def _module_state(value: Any) -> dict[str, np.ndarray] | None:
    """A PyTorch module's parameters and buffers as arrays (None for anything else)."""
    if framework_of(value) != "torch" and not any(c.__module__.startswith("torch.nn") for c in type(value).__mro__):
        return None
    state = getattr(value, "state_dict", None)
    if not callable(state):
        return None
    try:
        return {k: to_array(t, k, finite=False) for k, t in state().items()}
    except Exception:  # noqa: BLE001 — a module whose state cannot be read: not compared
        return None


def _rerun_differs(code: Any, ns: Mapping[str, Any], answers: Sequence[str]) -> bool:
    """Run the cell once more where its last run left the namespace: does it give other answers (it started from
    an input that its own first run changed, such as `attn_scores = softmax(attn_scores)`)?"""
    try:
        again = _replay(code, ns, {}, answers)
        return any(n in ns and n in again and _rebound(ns[n], again[n]) for n in answers)
    except BaseException as exc:  # noqa: BLE001 — the student's cell, run again: anything can happen
        if isinstance(exc, KeyboardInterrupt):
            raise
        return True


def _snapshot(values: Mapping[str, Any]) -> dict[str, np.ndarray]:
    out = {}
    for name, value in values.items():
        if isinstance(value, (list, str)) or value is None:
            continue
        try:
            out[name] = to_array(value, name, finite=False)
        except AnswerError:
            continue
    return out


# ----------------------------------------------------------------------------- facts


def _facts(values: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {"framework": {n: framework_of(v) for n, v in values.items()},
            # a Python number has no dtype: its type, so that an axis of 1.0 is not taken for the integer 1
            "dtype": {n: dtype_name(v) if not isinstance(v, float) else "float" for n, v in values.items()},
            "items": {n: _items_framework(v) for n, v in values.items()},
            # a tuple or list where one tensor is asked for: its kind and length, so the message can say so
            "container": {n: [type(v).__name__, len(v)] for n, v in values.items() if type(v) in (list, tuple)},
            "grad": {n: bool(v.requires_grad) for n, v in values.items()
                     if framework_of(v) == "torch" and hasattr(v, "requires_grad")},
            # NumPy's matrix class, whose * and ** are matrix products
            "matrix": {n: True for n, v in values.items() if isinstance(v, np.matrix)}}


def _aliased(values: Mapping[str, Any]) -> list[list[str]]:
    """Pairs of answers that are one object, or share their memory (`keys = queries`, then `keys.copy_(…)`: writing
    one changes the other)."""
    def address(v: Any) -> int | None:
        if isinstance(v, np.ndarray):
            return int(v.__array_interface__["data"][0]) if v.size else None
        ptr = getattr(v, "data_ptr", None)  # a torch tensor
        try:
            return int(ptr()) if callable(ptr) and v.numel() else None
        except Exception:  # noqa: BLE001 — anything that merely looks like a tensor
            return None

    names = list(values)
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            va, vb = values[a], values[b]
            if va is vb or (address(va) is not None and address(va) == address(vb)):
                pairs.append([a, b])
    return pairs[:10]


def _items_framework(value: Any) -> str | None:
    """For a list or tuple: the framework of its entries when they are all tensors of one framework
    (e.g. a list of losses left as 0-d tensors) or all NumPy arrays of at least one axis (rows), else None."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    if all(isinstance(v, np.ndarray) and v.ndim >= 1 for v in value):  # rows of an array (not NumPy scalars)
        return "numpy"
    if all(isinstance(v, np.ndarray) and v.ndim == 0 for v in value):  # `loss.detach().numpy()`: arrays of no axis
        return "numpy0d"
    kinds = {framework_of(v) for v in value}
    return kinds.pop() if len(kinds) == 1 and kinds <= {"torch", "tensorflow"} else None


@functools.lru_cache(maxsize=512)
def _global_names(code: types.CodeType) -> frozenset[str]:
    """The global names a code object (and the functions, lambdas, comprehensions inside it) loads (kept for the
    code objects seen last: the same function is asked about many times)."""
    return _global_ops(code, ("LOAD_GLOBAL", "LOAD_NAME"))


def _global_ops(code: types.CodeType, ops: tuple[str, ...]) -> frozenset[str]:
    """The names the instructions ``ops`` of a code object (and of the code objects inside it) name."""
    names: set[str] = set()
    todo = [code]
    while todo:
        c = todo.pop()
        names.update(ins.argval for ins in dis.get_instructions(c) if ins.opname in ops)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return frozenset(names)


def _stale_defaults(fn: Any) -> list[str]:
    """The functions a function keeps as default values of its parameters (``loss_fn=answer_loss``) that are no
    longer what the notebook's name holds: the default was taken when the ``def`` ran, before the name was bound
    anew (a function fixed and run again since)."""
    glob = getattr(fn, "__globals__", None)
    if not isinstance(glob, dict):
        return []
    defaults = [*(getattr(fn, "__defaults__", None) or ()), *(getattr(fn, "__kwdefaults__", None) or {}).values()]
    return sorted({d.__name__ for d in defaults if callable(d) and isinstance(getattr(d, "__name__", None), str)
                   and d.__name__ in glob and glob[d.__name__] is not d and callable(glob[d.__name__])})[:10]


def _data_globals_written(fn: Any) -> list[str]:
    """The globals a function assigns (``global attn_scores`` then ``attn_scores = …``, in it or in a function inside
    it) that hold notebook data now (an array, a tensor, a model)."""
    code, glob = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
    if code is None or not isinstance(glob, dict):
        return []
    # (or a number of the notebook's: a `global d_k` rebound, which a later cell divides by)
    return [n for n in sorted(_global_ops(code, ("STORE_GLOBAL",))) if (v := glob.get(n)) is not None
            and (framework_of(v) in ("torch", "tensorflow", "numpy") and hasattr(v, "shape") or _is_model(v)
                 or isinstance(v, (int, float)) and not isinstance(v, bool) and not n.startswith("_"))][:20]


def _data_globals(fn: Any) -> tuple[list[str], str | None]:
    """Names of notebook data (arrays, tensors, models) the function reads from its globals — or, when it reads
    none itself, that the methods of a class of the notebook it uses read (a module's ``forward``), or a function of
    the notebook it calls, with that method's or function's name."""
    code = getattr(fn, "__code__", None)
    glob = getattr(fn, "__globals__", None)
    if code is None or not isinstance(glob, dict):
        return [], None

    def data(names: set[str]) -> list[str]:
        return [n for n in sorted(names) if (v := glob.get(n)) is not None
                and (framework_of(v) in ("torch", "tensorflow", "numpy") and hasattr(v, "shape") or _is_model(v))]

    names = _global_names(code)
    if found := data(names):
        return found, None
    for cls_name in sorted(names):
        cls = glob.get(cls_name)
        if not isinstance(cls, type) or cls.__module__ != getattr(fn, "__module__", None):
            continue
        for attr, method in vars(cls).items():
            inner = getattr(method, "__code__", None)
            if inner is not None and getattr(method, "__globals__", None) is glob and \
                    (found := data(_global_names(inner))):
                return found, f"{cls.__name__}.{attr}"
    # or that a function of the notebook it calls reads (a helper `_project(w)` that returns `x @ w`)
    for helper_name in sorted(names):
        helper = glob.get(helper_name)
        if isinstance(helper, types.FunctionType) and helper is not fn and helper.__globals__ is glob \
                and (found := data(_global_names(helper.__code__))):
            return found, helper_name
    return [], None


def _container_globals(fn: Any) -> list[str]:
    """The notebook's dicts, lists and tuples the function's own code reads from its globals (a ``model`` dict of
    sizes, where the function should use its arguments)."""
    code = getattr(fn, "__code__", None)
    glob = getattr(fn, "__globals__", None)
    if code is None or not isinstance(glob, dict):
        return []
    return [n for n in sorted(_global_names(code)) if not n.startswith("_")
            and isinstance(glob.get(n), (dict, list, tuple))]


def _scalar_globals(fn: Any) -> dict[str, float]:
    """The notebook's numbers (ints and floats, not booleans) the function's own code reads from its globals
    (a ``seq`` or ``d_k`` of the notebook, where the function should take the size from its arguments), with
    their values."""
    code = getattr(fn, "__code__", None)
    glob = getattr(fn, "__globals__", None)
    if code is None or not isinstance(glob, dict):
        return {}
    return {n: float(v) for n in sorted(_global_names(code)) if not n.startswith("_")
            and isinstance(v := glob.get(n), (int, float, np.integer, np.floating)) and not isinstance(v, bool)}


def _influential(fn: Any, scalars: Mapping[str, float], trials: Sequence[Mapping[str, Any]],
                 framework: str | None) -> dict[str, float]:
    """Those of ``scalars`` (globals the function reads) whose value changes what the function gives on the
    trial's inputs (its result, or the error it raises): a constant it only uses where it does not matter (a fill
    of -1e9, say) is not one. Each global is changed for one call and put back."""
    if not scalars or not trials:
        return {}
    glob = fn.__globals__

    def outcome(trial: Mapping[str, Any]) -> Any:
        args = [to_framework(v, framework) for v in trial.values()]
        try:
            with _quiet():
                return to_array(fn(*args), "result", finite=False)
        except Exception as exc:  # noqa: BLE001 — the student's function: anything can happen
            return f"{type(exc).__name__}: {exc}"

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))
        return type(a) is type(b) and a == b

    # a change one way can leave the outcome alone where the other does not (a slice `table[:n]` of a table with
    # just n rows): both ways, on each trial given
    bases, found = [outcome(t) for t in trials], {}
    for name, value in scalars.items():
        old = glob[name]
        changes = (old + 1, old - 1) if isinstance(old, (int, np.integer)) else (old * 1.5 + 0.5, old * 0.5)
        try:
            for new in changes:
                glob[name] = type(old)(new)
                if any(not same(outcome(t), base) for t, base in zip(trials, bases)):
                    found[name] = value
                    break
        except Exception:  # noqa: BLE001, S110 — a value it cannot take says nothing
            pass
        finally:
            glob[name] = old
    return found


def _packages_reached(fn: Any, depth: int = 3) -> dict[str, str | None]:
    """The top-level packages (``torch``, ``tensorflow``, …) a function reaches by name, whatever it calls them:
    through a global bound to one of their modules, functions or classes (``torch``, ``F``, an alias such as
    ``_t``, ``from torch import tensor``), an ``import`` inside the function, or the same in a function of the
    notebook it calls (``depth`` levels down): ``{package: None}``, or the name of that function of the
    notebook through which it is reached."""
    code = getattr(fn, "__code__", None)
    glob = getattr(fn, "__globals__", None)
    if code is None or not isinstance(glob, dict):
        return {}
    out: dict[str, str | None] = {}
    todo = [code]
    while todo:
        c = todo.pop()
        for ins in dis.get_instructions(c):
            if ins.opname == "IMPORT_NAME":
                out[str(ins.argval).split(".")[0]] = None
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    for name in sorted(_global_names(code)):
        value = glob.get(name)
        where = value.__name__ if isinstance(value, types.ModuleType) else \
            getattr(value, "__module__", None) if callable(value) else None
        if isinstance(where, str) and where != getattr(fn, "__module__", None):
            out[where.split(".")[0]] = None
        elif depth > 1 and isinstance(value, types.FunctionType) and value is not fn:
            for package in _packages_reached(value, depth - 1):  # the notebook's own (attention_loops: torch)
                out.setdefault(package, name)
    return out


def _library_attention_reached(fn: Any, depth: int = 3) -> str | None:
    """The global name through which a function reaches a library's attention without naming it in its own code:
    an alias bound in another cell (``attend = F.scaled_dot_product_attention``, ``from keras.ops import
    dot_product_attention as dpa``, a ``functools.partial`` of one), a layer object of one kept in a global, or a
    function of the notebook that calls one (``depth`` levels down). None if it reaches none."""
    code = getattr(fn, "__code__", None)
    glob = getattr(fn, "__globals__", None)
    if code is None or not isinstance(glob, dict):
        return None
    for name in sorted(_global_names(code)):
        value = glob.get(name)
        target = value.func if isinstance(value, functools.partial) else value
        if target is fn or getattr(target, "__code__", None) is code:
            continue  # the function itself (a call counter, a recursion over the batch)
        called = {str(getattr(target, "__name__", "")), type(target).__name__}
        # (a function of the notebook's own is judged by what it calls, not by its name: `multi_head_attention`)
        own = isinstance(target, types.FunctionType) and getattr(target, "__module__", None) == getattr(
            fn, "__module__", None)
        if callable(target) and not own and library_attention(called):
            return name
        if depth > 1 and isinstance(target, types.FunctionType) and target is not fn:
            inner = target.__code__
            names: set[str] = set()
            todo = [inner]
            while todo:
                c = todo.pop()
                names.update(c.co_names)
                todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
            if library_attention(names) or _library_attention_reached(target, depth - 1):
                return name
    return None


def _is_model(value: Any) -> bool:
    """A model object of the notebook (a PyTorch module, a Keras layer): a function that uses one from its
    globals, instead of the one it is given, works on that model only."""
    torch, keras = sys.modules.get("torch"), sys.modules.get("keras")
    return bool(torch is not None and isinstance(value, torch.nn.Module)
                or keras is not None and isinstance(value, keras.layers.Layer))


def _param_ranges(module: Any) -> list[list[Any]]:
    """Each floating parameter's name, smallest and largest entry and last size (a layer's fan-in): how it was
    started (see ``spec._init_problem``). Empty when they cannot be listed."""
    try:
        return [[name, float(p.detach().min()), float(p.detach().max()), int(p.shape[-1])]
                for name, p in list(module.named_parameters())[:20]
                if getattr(getattr(p, "dtype", None), "is_floating_point", False) and p.numel() and p.dim() >= 1
                and bool(p.detach().isfinite().all())]
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        return []


def _module_facts(module: Any, reads: Iterable[str] = ()) -> dict[str, Any] | None:
    """The module's parameters (name, shape, trainable), its tensors that are plain attributes, and which of
    the notebook's names ``reads`` a method of its own class reads as a global (``p_drop`` in ``forward``
    instead of ``self.dropout``), with that method's name."""
    named = getattr(module, "named_parameters", None)
    if not callable(named):
        return None
    params = [[name, list(getattr(p, "shape", ())), bool(getattr(p, "requires_grad", False))] for name, p in named()]
    # parameters of a floating dtype other than float32 (every module of the course is float32: a `.double()` on a
    # weight doubles it and its gradient, and a float32 input must be cast to meet it)
    wide = [[name, str(getattr(p, "dtype", "")).removeprefix("torch.")] for name, p in named()
            if getattr(getattr(p, "dtype", None), "is_floating_point", False) and str(p.dtype) != "torch.float32"]
    plain = [name for name, value in vars(module).items()
             if framework_of(value) == "torch" and hasattr(value, "requires_grad") and not name.startswith("_")]
    # plain tensors made from a parameter by an operation (`nn.Parameter(...) / 2` is a plain tensor again)
    derived = [name for name in plain if getattr(vars(module)[name], "grad_fn", None) is not None]
    facts: dict[str, Any] = {"params": params, "plain_tensors": plain, "derived_tensors": derived,
                             "globals_read": [], "globals_in": None,
                             "training": bool(getattr(module, "training", False)), "param_dtypes": wide[:20]}
    facts["param_ranges"] = _param_ranges(module)
    # a part still training under a module set to evaluation by hand (`model.training = False` reaches no submodule)
    parts = getattr(module, "named_modules", None)
    if not facts["training"] and callable(parts):
        with contextlib.suppress(Exception):  # the student's module: anything can happen
            facts["training_parts"] = [n for n, m in parts() if n and getattr(m, "training", False)][:5]
            facts["training"] = bool(facts["training_parts"])
    # a class of the student's that defines __call__ itself: nn.Module's call (which runs forward, and the hooks
    # around it) is bypassed
    facts["own_call"] = any("__call__" in vars(cls) for cls in type(module).__mro__
                            if cls.__module__.split(".")[0] not in ("torch", "builtins"))
    # a dropout draw its forward takes (`keep`) that the caller must now hand in: its default (None) left out
    try:
        facts["keep_required"] = inspect.signature(module.forward).parameters["keep"].default is inspect.Parameter.empty
    except (KeyError, TypeError, ValueError, AttributeError):
        facts["keep_required"] = False
    wanted = set(reads)
    for cls in type(module).__mro__:
        if cls.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        for attr, method in vars(cls).items():
            code = getattr(method, "__code__", None)
            if code is not None and (found := sorted(_global_names(code) & wanted)):
                return facts | {"globals_read": found, "globals_in": f"{cls.__name__}.{attr}"}
    return facts


class _Score(float):
    """A float from a :class:`OneShot` stream that tells its stream when it is dropped."""

    __slots__ = ("_stream",)

    def __del__(self) -> None:
        stream = getattr(self, "_stream", None)
        if stream is not None:
            stream.alive -= 1


class OneShot:
    """A stream that can be read once: a second ``iter()`` raises, and ``len`` or indexing is refused.

    It also counts how many of its scores are alive at once (``max_alive``): a function that reads
    the stream once but keeps every score (``list(stream)``) holds them all.
    """

    def __init__(self, values: Sequence[float]):
        self._values = values
        self.reads = 0
        self.alive = 0
        self.max_alive = 0

    def __iter__(self) -> Iterator[float]:
        self.reads += 1
        if self.reads > 1:
            raise RuntimeError("this stream of scores can be read only once")
        return self._scores()

    def _scores(self) -> Iterator[float]:
        for v in self._values:
            score = _Score(v)
            score._stream = self
            self.alive += 1
            self.max_alive = max(self.max_alive, self.alive)
            yield score
            del score


# ----------------------------------------------------------------------------- collect


def _misspelled_error(plan: Mapping[str, Any], history: History | None, run: Run | None,
                      namespace: Mapping[str, Any]) -> dict[str, Any] | None:
    if history is None:
        return None
    found = history.misspelled(plan["answers"], run, plan.get("others") or ())
    if found is None:
        return None
    name, typo = found
    held = f"`{name}` still holds what an earlier run gave it, and that is not what you just wrote" \
        if name in namespace else f"`{name}` is not defined at all"
    return _error("misspelled_name", f"Your latest run of this step's cell assigns `{typo}`, not `{name}`: {held}. "
                                     f"Name it `{name}` and run the cell again.")


def _value_record(plan: Mapping[str, Any], namespace: Mapping[str, Any], history: History | None,
                  run: Run | None, cell: Any, shell: Any) -> dict[str, Any]:
    answers = list(plan["answers"])
    what = ", ".join(f"`{n}`" for n in answers)
    if err := _stale_error(history, run, answers, what) or _misspelled_error(plan, history, run, namespace):
        return err
    if history is not None and (refill := history.refilled(answers, run)):  # a buffer the cell does not create
        return _error("refilled", f"Your cell fills `{refill[0]}` entry by entry but does not create it: it "
                                  f"writes into the `{refill[0]}` an earlier run left behind, so entries it does not "
                                  f"write keep their old numbers, and on a fresh start the cell raises NameError. "
                                  f"Create `{refill[0]}` in the cell first (with the right size), then fill it.")
    values = {}
    missing = [n for n in answers if n not in namespace]
    if missing and len(missing) < len(answers) and run is not None:  # the cell ran, and made only some of them
        made = [n for n in answers if n in namespace]
        names = ", ".join(f"`{n}`" for n in missing[:4]) + (" …" if len(missing) > 4 else "")
        return _error("partly_done", f"Your cell defines {len(made)} of the {len(answers)} names this step makes, "
                                     f"but not {names}. Make every one of them, with the names the step gives, and "
                                     "run the cell again.")
    for name in answers:
        if name not in namespace:
            return _error("not_done", f"`{name}` is not defined yet. Fill in the TO-DO cell above and run it.")
        values[name] = namespace[name]
    if history is not None and cell is None and history.rebound_since(answers, run, namespace):
        # the values were made later by a cell that binds them without naming them (a globals() loop): the cell
        # that names them is not what made them, and there is nothing else to replay
        run = None
    record: dict[str, Any] = {"facts": _facts(values)}
    try:
        record["answers"] = [{n: to_array(v, n, finite=False) for n, v in values.items()}]
    except AnswerError as err:
        return _error(err.kind, err.message)
    record["aliased"] = _aliased(values)
    record["upstream"] = {n: a for n, a in _snapshot({r: namespace[r] for r in plan.get("reads", ())
                                                      if r in namespace}).items()}
    trials = plan.get("trials") or []
    code: Any = cell
    source = run.source if run is not None else (cell if isinstance(cell, str) else None)
    if source is not None:  # the step's inputs its cell never names (x built from word_1 … word_4, not the stack),
        # and the other names of the notebook it names instead
        named = mentioned_names(source)
        record["reads_unused"] = sorted(set(plan.get("reads") or ()) - named)
        world = trials[0] if trials and isinstance(trials[0], Mapping) else {}
        record["upstream_named"] = sorted((named & set(world)) - set(plan.get("reads") or ()) - set(answers))
    if source is not None and (plan.get("computed_with") or plan.get("not_with")):
        mentioned = mentioned_names(source)
        record["unused"] = sorted(set(plan.get("computed_with") or ()) - mentioned)
        # an answer the step asks to compute the others from (the weighted values, then their sum) is used when
        # another answer is computed from it, not merely when the cell binds it; the others computed from the
        # step's inputs by another way skip it (numbers typed in are another mistake)
        record["unused"] += sorted(n for n in set(plan.get("computed_with") or ()) & set(answers)
                                   if not computed_from(source, n, others := [a for a in answers if a != n])
                                   and any(computed_from(source, r, others) for r in plan.get("reads") or ()))
        # the names a step is to be computed without, in the student's own lines (a line the notebook gives may
        # compare the answer with one of them)
        record["forbidden"] = sorted(set(plan.get("not_with") or ())
                                     & mentioned_names(_without_given(source, plan.get("given") or ())))
    if source is not None:
        record["how"] = code_features(_without_given(source, plan.get("given") or ()))
        record["discarded"] = discarded_results(_without_given(source, plan.get("given") or ()))
        if plan.get("in_eval") and plan.get("module"):  # a trained model judged as it is: the cell must not change it
            record["module_changes"] = module_changes(_without_given(source, plan.get("given") or ()), plan["module"])
        record["typed_in"] = typed_lists(_without_given(source, plan.get("given") or ()))
        # other steps' answers the cell reads besides the ones it starts from (a predicted axis as `dim=`); a name
        # the cell only assigns (the TensorFlow half computing `outputs` again) is not used
        # (in the student's own lines: a print the notebook gives that shows another answer beside it is not used)
        read = free_names(source)
        own_read = free_names(_without_given(source, plan.get("given") or ())) if plan.get("given") else read
        record["used"] = _snapshot({n: namespace[n] for n in sorted(set(plan.get("others") or ()) & own_read)
                                    if n in namespace})
        # the framework of what the cell starts from: an answer of the wrong framework may come from an input
        tensors = ("torch", "tensorflow", "numpy")
        record["facts"]["inputs"] = {n: framework_of(namespace[n]) for n in sorted(read & set(plan.get("reads") or ()))
                                     if n in namespace and framework_of(namespace[n]) in tensors}
        # and their dtypes: an answer of the wrong dtype may take it from an input (right code, wrong input)
        record["facts"]["input_dtypes"] = {n: dtype_name(namespace[n]) for n in record["facts"]["inputs"]}
    if code is None and run is not None:
        code = _compile_cell(run.source, shell)
    elif isinstance(code, str):
        code = _compile_cell(code, shell)
    record["replay"] = {"available": bool(trials) and code is not None, "error": None}
    mutated: set[str] = set()
    rebound: set[str] = set()
    deleted: set[str] = set()
    later = [n for n in plan.get("later") or () if n not in answers]
    # and what the lines the notebook gives in this cell bind for the cells below (02's `query = x[1]`): it must
    # still hold that after the cell (a stray `query = x_i` after the loop does not)
    given_binds = assigned_names("\n".join(plan.get("given") or ())) if plan.get("given") else set()
    later += sorted(n for n in given_binds & set(plan.get("reads") or ()) if n not in answers and n not in later)
    earlier = set(plan.get("earlier") or ()) - set(answers)
    reassigned: set[str] = set()
    # a step that asks for the model's forward passes without gradients: the grad mode each one ran in (a lazy
    # generator made inside `torch.no_grad()` runs its calls only where it is consumed, after the block)
    forward_grad: list[bool] = []
    hook = _grad_mode_hook(namespace.get(plan["module"]), forward_grad) \
        if record["replay"]["available"] and (plan.get("how") or {}).get("no_grad") and plan.get("module") else None
    # a step that makes a module: how its forward treats the module's parameters (see :class:`_ModuleWatch`)
    watch = _ModuleWatch() if record["replay"]["available"] and plan.get("module") \
        and plan.get("framework") == "torch" else None
    try:
        if watch is not None:
            watch.start()
        _replay_trials(record, plan, namespace, trials, code, source, answers, later, earlier, mutated, rebound,
                       deleted, reassigned)
    finally:
        if hook is not None:
            hook.remove()
        if watch is not None:
            watch.stop()
    if forward_grad:
        record["forward_grad"] = any(forward_grad)
    if watch is not None and (watch.grown or watch.unregistered):
        record["forward_params"] = {"grown": sorted(watch.grown), "unregistered": sorted(watch.unregistered)}
    if run is not None and run.error:
        record["raised"] = {"message": run.error, "line": run.line}
    if source is not None:  # an input written into by `out=` (np.matmul(x, w, out=w)): changed in place, even where
        mutated.update(n for n in out_targets(source) if n in (plan.get("reads") or ()))  # a replay raised first
    record["mutated"] = sorted(mutated)
    if source is not None:  # an input changed through a view of it the cell writes into (`query.zero_()`, where an
        # earlier cell made `query = x[1]`): the replays hand the cell no such view, so only the notebook's objects tell
        written = {n for n in inplace_targets(source) if n in namespace} - set(plan.get("reads") or ())
        record["mutated_views"] = {r: n for r in plan.get("reads") or () if r in namespace and r not in mutated
                                   for n in sorted(written) if _shares_storage(namespace[n], namespace[r])}
    record["rebound"] = sorted(rebound)
    if source is not None:  # (a name the replays were not handed: what the cell's own run already deleted)
        deleted |= deleted_names(source) & set(later)
    record["deleted"] = sorted(deleted)
    # an earlier step's answer the cell binds anew: what it holds now (the verdict asks that step whether it is still
    # right)
    # (and any the cell assigns at all: a replay may have raised on, or been handed, what the cell's own run left
    # there, a `key_1` cast to float32, so the replays cannot say)
    source = run.source if run is not None else cell if isinstance(cell, str) else None
    if source is not None:
        # (whatever the replays found: a replay hands the cell what the notebook holds now, which the cell's own run
        # may already have changed, a `attn_scores_1` cast to float32 and cast again)
        reassigned |= assigned_names(source) & earlier
    record["reassigned"] = _snapshot({n: namespace[n] for n in sorted(reassigned - rebound) if n in namespace})
    record["reassigned_dtypes"] = {n: dtype_name(namespace[n]) for n in record["reassigned"]}
    # those the cell computes from its own answers (`context_vec_2_simple = outputs[1]`)
    record["reassigned_from_answers"] = sorted(n for n in record["reassigned"] if source is not None
                                               and any(computed_from(source, a, [n]) for a in answers))
    # the step's own functions that keep an older function of the notebook as a default (`loss_fn=answer_loss`)
    record["stale_defaults"] = sorted({n for f in plan.get("functions") or () if callable(namespace.get(f))
                                       for n in _stale_defaults(namespace[f])})
    # and those that keep something on the function object itself (`train_step.best = …`): a state between calls
    record["functions_kept"] = sorted({f"{f}.{n}" for f in plan.get("functions") or () if callable(namespace.get(f))
                                       for n in _fn_attributes(namespace[f])})
    # the step's own functions that the cell calls (10.train_step): a model read from the notebook's globals
    record["models_read"] = sorted({n for f in plan.get("functions") or () if callable(namespace.get(f))
                                    for n in _data_globals(namespace[f])[0]
                                    if _is_model(getattr(namespace[f], "__globals__", {}).get(n))})
    if plan.get("module"):
        # (and the module's own notebook name: a forward that reads `mhsa.training` instead of `self.training`)
        record["module"] = _module_facts(namespace.get(plan["module"]), [*(plan.get("reads") or ()), plan["module"]])
        module = namespace.get(plan["module"])
        for probe in plan.get("probes") or []:
            if record["module"] is None:
                break
            if probe.get("kind") == "module_dropout":
                record.setdefault("probes", {})["module_dropout"] = _module_dropout(module, probe)
            elif probe.get("kind") == "module_init":
                record.setdefault("probes", {})["module_init"] = _module_init(module, probe)
            elif probe.get("kind") == "module_grad":
                # (and the sizes another module of the class is made with, for what it may keep on the class)
                make = next((p.get("inputs") for p in plan.get("probes") or [] if p.get("kind") == "module_init"),
                            None)
                record.setdefault("probes", {})["module_grad"] = _module_grad(module, probe, make)
            elif probe.get("kind") == "module_drops":
                record.setdefault("probes", {})["module_drops"] = _module_drops(module, probe)
            elif probe.get("kind") == "module_guesses":
                on = (probe.get("inputs") or {}).get("on")
                record.setdefault("probes", {})["module_guesses"] = _module_guesses(
                    module, probe, [namespace.get(on)] + [t.get(on) for t in trials], history, namespace,
                    plan["module"])
    for probe in plan.get("probes") or []:
        if probe.get("kind") == "train_step" and plan.get("functions") \
                and callable(step := namespace.get(plan["functions"][0])):
            record.setdefault("probes", {})["train_step"] = _train_step_probe(step, probe)
    return record


def _module_again(module: Any, call: Mapping[str, Any], framework: str | None) -> Any:
    """The module a replay made, called in evaluation mode (without gradients) on ``call["first"]``'s values (the
    replay's own batch), then once more on ``call["then"]``'s, in order: the second output as an array, or
    ``{"error": …}`` when it raised there. The module's mode, its parameters and buffers, and torch's generator are
    left as they were; None when there is no module to call, when the first call raises, or when a third call gives
    another output (it draws)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(module, torch.nn.Module):
        return None
    first = [to_framework(v, framework) for v in (call.get("first") or {}).values()]
    args = [to_framework(v, framework) for v in (call.get("then") or {}).values()]
    was_training, state, kept = bool(module.training), torch.get_rng_state(), _tensor_state(module)
    try:
        module.eval()
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            try:
                module(*first)
            except Exception:  # noqa: BLE001 — not callable on its own batch this way: nothing to say here
                return None
            out = to_array(module(*args), "the module's output", finite=False)
            # a module that still draws in evaluation mode gives another output each time: that is another mistake
            return out if np.array_equal(out, to_array(module(*args), "", finite=False), equal_nan=True) else None
    except Exception as exc:  # noqa: BLE001 — the student's module: anything can happen
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
    finally:
        module.train(was_training)
        torch.set_rng_state(state)
        _restore_tensor_state(module, kept)


def _module_init(module: Any, probe: Mapping[str, Any]) -> dict[str, Any]:
    """A new module of the same class, made with the probe's inputs as keyword arguments: for each of its
    parameters, the name, the shape, the spread of its entries (their standard deviation), and whether they
    are all equal or not all finite. torch's random generator is left as it was."""
    import torch

    state, saved = torch.get_rng_state(), dict(vars(type(module)))
    try:
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh = type(module)(**probe["inputs"])
        params, means, repeated = [], {}, {}
        with torch.no_grad():
            for name, p in fresh.named_parameters():
                values = p.detach().double().reshape(-1)
                finite = bool(torch.isfinite(values).all()) if values.numel() else True
                spread = float(values.std()) if finite and values.numel() > 1 else 0.0
                constant = bool((values == values[0]).all()) if values.numel() else True
                params.append([str(name), [int(n) for n in p.shape], spread, constant, finite])
                if finite and values.numel():
                    means[str(name)] = float(values.mean())
                if values.numel() > 1 and not constant:  # most entries one number (an identity: 0 off the diagonal)
                    share = float(torch.unique(values, return_counts=True)[1].max()) / values.numel()
                    if share > 0.5:
                        repeated[str(name)] = share
            buffers = [[str(name), [int(n) for n in b.shape]] for name, b in fresh.named_buffers()][:20]
        drops = _drops_at_zero(type(module), probe["inputs"])
    except Exception as exc:  # noqa: BLE001 — the student's class: anything can happen
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
    finally:
        torch.set_rng_state(state)
        _put_back_class(type(module), saved)  # what __init__ keeps on the class must not change the student's
    return {"params": params, "means": means, "repeated": repeated, "buffers": buffers, "drops_at_zero": drops}


def _drops_at_zero(cls: Any, sizes: Mapping[str, Any]) -> bool | None:
    """A module of ``cls`` made with ``sizes`` but a dropout of 0, called twice in training mode on random tokens
    (the notebook's ``forward(x, lengths)``): do its outputs differ (it still drops: a rate of 0 replaced by a
    default, `dropout or 0.1`)? None when that cannot be told (no dropout among the sizes, or the call raised)."""
    import torch

    if "dropout" not in sizes or "d_model" not in sizes:
        return None
    try:
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            quiet = cls(**{**sizes, "dropout": 0.0}).train()
            x = torch.randn(2, 5, int(sizes["d_model"]), generator=torch.Generator().manual_seed(5))
            lengths = torch.tensor([5, 3])
            first, second = quiet(x, lengths), quiet(x, lengths)
            return not bool(torch.equal(first, second))
    except Exception:  # noqa: BLE001 — a class whose forward takes other arguments: nothing to say
        return None


def _module_drops(module: Any, probe: Mapping[str, Any]) -> dict[str, Any]:
    """A new module of the same class, made with ``probe["inputs"]["make"]`` as keyword arguments (a dropout above
    0), called twice in training mode on ``probe["inputs"]["on"]`` without gradients: ``differ``, whether the two
    outputs differ (its dropout draws show); ``eval_differ``, the same in evaluation mode (it must not draw there);
    ``layer_differs``, the same for its first submodule with a
    ``num_heads`` (its attention layer) called on random vectors of width ``make["d_model"]`` (False: the layer
    itself never draws, a matter for its own step). torch's random generator is left as it was."""
    import torch

    state = torch.get_rng_state()
    out: dict[str, Any] = {}
    try:
        torch.manual_seed(0)
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            make = dict(probe["inputs"]["make"])
            fresh = type(module)(**make)
            fresh.train()
            tokens = to_framework(np.asarray(probe["inputs"]["on"]), "torch")
            handed: list[bool] = []  # whether its attention layer is handed something in keep's place
            attention = next((m for m in fresh.modules() if m is not fresh
                              and isinstance(getattr(m, "num_heads", None), int)), None)
            hook = attention.register_forward_pre_hook(
                lambda _m, args, kwargs: handed.append(len(args) > 1 and args[1] is not None
                                                       or kwargs.get("keep") is not None), with_kwargs=True) \
                if attention is not None else None
            try:
                out["differ"] = not bool(torch.equal(fresh(tokens), fresh(tokens)))
            finally:
                if hook is not None:
                    hook.remove()
            out["keep_handed"] = any(handed)
            out["layer_calls"] = len(handed)  # in two forward passes: 2 (a layer run twice and averaged: more)
            fresh.eval()  # and in evaluation mode it must not draw (a forward that sets its layer's mode itself)
            out["eval_differ"] = not bool(torch.equal(fresh(tokens), fresh(tokens)))
            fresh.train()  # and back in training mode after that, it draws again (a forward that changes the model in
            # evaluation mode, `self.attn.dropout = 0.0`, never drops again)
            out["differ_after_eval"] = not bool(torch.equal(fresh(tokens), fresh(tokens)))
            if "dropout" in make:  # made with a dropout of 0, training mode is evaluation mode: nothing drops
                still = type(module)(**{**make, "dropout": 0.0})
                trained, evaluated = still.train()(tokens), still.eval()(tokens)
                out["drops_at_zero"] = not bool(torch.equal(trained, evaluated))
            parts = probe["inputs"].get("parts")
            if attention is not None and isinstance(parts, Mapping):
                out["train_mismatch"] = _off_its_parts(fresh, attention, tokens, parts)
            layer = next((m for m in fresh.modules() if m is not fresh and isinstance(getattr(m, "num_heads", None),
                                                                                       int)), None)
            if layer is not None and "d_model" in make:
                x = torch.randn(*tokens.shape, int(make["d_model"]))
                layer.train()
                out["layer_differs"] = not bool(torch.equal(layer(x), layer(x)))
    except Exception as exc:  # noqa: BLE001 — the student's module: anything can happen
        out["error"] = f"{type(exc).__name__}: {_first_line(exc)}"
    finally:
        torch.set_rng_state(state)
    return out


def _off_its_parts(model: Any, layer: Any, tokens: Any, parts: Mapping[str, Any]) -> bool | None:
    """In training mode, is ``model(tokens)`` something else than its attention ``layer``'s input plus what that
    layer gave (whatever its dropout drew), times ``parts["readout"]``? (A dropout of the model's own on the logits
    or around the layer, a scale in training mode only; the layer's input itself is the model's to make, checked in
    evaluation mode.) None: it could not be told (no such parameter, the layer not run once)."""
    import torch

    readout = getattr(model, str(parts.get("readout")), None)
    if not isinstance(readout, torch.Tensor):
        return None
    seen: list[Any] = []

    def keep(_m: Any, args: tuple, kwargs: dict, result: Any) -> None:
        # copies, as they are now: the forward may add into the layer's output in place (`out += h`)
        given = args[0] if args else next(iter(kwargs.values()), None) if len(kwargs) == 1 else None
        seen.append(tuple(v.detach().clone() if isinstance(v, torch.Tensor) else v for v in (given, result)))

    hook = layer.register_forward_hook(keep, with_kwargs=True)
    try:
        model.train()
        logits = model(tokens)
    finally:
        hook.remove()
    if len(seen) != 1 or not isinstance(logits, torch.Tensor):
        return None
    (given, result), = seen
    if not isinstance(given, torch.Tensor) or not isinstance(result, torch.Tensor):
        return None
    want = (given + result) @ readout.detach()
    return want.shape != logits.shape or not bool(torch.allclose(logits, want, rtol=1e-4, atol=1e-5))


def _module_dropout(module: Any, probe: Mapping[str, Any]) -> dict[str, Any]:
    """The module on the probe's inputs in evaluation mode, in training mode with no draw handed in,
    and (with ``probe["buffer"]``) in evaluation mode with that buffer zeroed. The module's mode, its
    buffer and torch's random generator are left as they were."""
    import torch

    args = [to_framework(v, "torch") for v in probe["inputs"].values()]
    was_training, state = bool(getattr(module, "training", False)), torch.get_rng_state()
    out: dict[str, Any] = {}
    mode = "eval"
    try:
        with torch.no_grad():
            module.eval()
            out["eval"] = to_array(module(*args), "the module's output", finite=False)
            mode = "train"
            module.train()
            out["train"] = to_array(module(*args), "the module's output", finite=False)
            # a forward that switches the module's mode itself (`self.eval()` after a training call)
            out["mode_after_train"] = bool(getattr(module, "training", True))
            module.train()
            out.update(_draw_facts(module, args))
            mode = "eval"
            name = probe.get("buffer")
            buffers = dict(module.named_buffers()) if name else {}
            if name in buffers:
                buf = buffers[name]
                saved = buf.clone()
                try:
                    buf.copy_(torch.zeros_like(buf))
                    module.eval()
                    out["without_buffer"] = to_array(module(*args), "the module's output", finite=False)
                finally:
                    buf.copy_(saved)
    except Exception as exc:  # noqa: BLE001 — the student's module: anything can happen
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}{student_frame_line(exc)}", "mode": mode}
    finally:
        module.train(was_training)
        torch.set_rng_state(state)
    return out


def _draw_facts(module: Any, args: list[Any]) -> dict[str, Any]:
    """How the module draws its own dropout, in training mode (called with gradients off, the module in training
    mode): ``same_draw``, two calls without a draw of the caller's (keep=None), from two different states of
    torch's generator, give the same outputs (a seed set inside forward); ``rng_reset``, those calls leave the
    generator in the same state (torch.manual_seed inside forward); ``keep_ignored``, two calls with the same
    draw handed in (every weight kept) give different outputs (a draw of its own made anyway); ``repeats``, a third
    call, from the state the second left, gives the second's output (the generator never moves on); ``seed_repeats``,
    a call from the first state again gives the first's output (its draw follows torch.manual_seed); ``draw_shared``,
    the axes of the weights its own draw is shared by (see :func:`_draw_shared_axes`). A fact that cannot be measured
    (the call raised, no ``num_heads``) is left out."""
    import torch

    out: dict[str, Any] = {}
    try:
        results, states = [], []
        for seed in (20231, 20232):
            torch.manual_seed(seed)
            with contextlib.redirect_stdout(io.StringIO()), _draw_recorder() as draws:  # a print in forward was seen
                results.append(module(*args))
            states.append(torch.get_rng_state())
            if len(results) == 1:
                shared = _draw_shared_axes(draws.shapes, module, args)
                if shared is not None:
                    out["draw_shared"] = shared
                elsewhere = _draw_elsewhere(draws.shapes, module, args)
                if elsewhere is not None:
                    out["draw_elsewhere"] = elsewhere
        out["same_draw"] = _same_tensor(results[0], results[1])
        out["rng_reset"] = bool(torch.equal(states[0], states[1]))
        # and once more from where the last call left the generator: a draw that leaves it where it was (made
        # under `torch.random.fork_rng()`, or its state set back) comes out the same at every call
        with contextlib.redirect_stdout(io.StringIO()):
            out["repeats"] = _same_tensor(results[1], module(*args))
            # and from the first seed again: a draw from torch's generator comes out as it did (one from NumPy's or
            # Python's generator, or a torch.Generator of its own, does not follow torch.manual_seed)
            torch.manual_seed(20231)
            out["seed_repeats"] = _same_tensor(results[0], module(*args))
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        pass
    heads, x = getattr(module, "num_heads", None), args[0] if args else None
    if isinstance(heads, int) and hasattr(x, "shape") and len(x.shape) == 3:
        few = [a[:8] if hasattr(a, "shape") and len(a.shape) and a.shape[0] == x.shape[0] else a for a in args]
        keep = torch.ones(few[0].shape[0], heads, x.shape[1], x.shape[1])
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                first, second = (module(*few, keep=keep) for _ in range(2))
                # two calls in evaluation mode that differ: the module changes itself as it runs (a buffer flipped
                # in place), which is what makes the two calls with one keep differ, not a draw of its own
                kept = _tensor_state(module)
                try:
                    module.eval()
                    changes = not _same_tensor(module(*few), module(*few))
                finally:
                    module.train()
                    _restore_tensor_state(module, kept)
            if changes:
                out["changes_itself"] = True
            else:
                out["keep_ignored"] = not _same_tensor(first, second)  # NaN (a row with no key left) equals NaN
        except Exception:  # noqa: BLE001
            pass
        # a draw handed in once, then calls that hand none, from two states of the generator: the same outputs
        # (the layer kept the draw it was given and uses it again) where, before any was given, they differed
        if out.get("same_draw") is False:
            kept, attributes = _tensor_state(module), dict(vars(module))
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    given = (torch.rand(keep.shape, generator=torch.Generator().manual_seed(7)) >= 0.5).to(keep.dtype)
                    module(*few, keep=given)
                    after = []
                    for seed in (20233, 20234):
                        torch.manual_seed(seed)
                        after.append(module(*few))
                out["keep_reused"] = _same_tensor(after[0], after[1])
            except Exception:  # noqa: BLE001
                pass
            finally:
                _restore_tensor_state(module, kept)
                for name in set(vars(module)) - set(attributes):  # what the calls left on it (the draw it kept)
                    delattr(module, name)
                vars(module).update(attributes)
    return out


def _same_tensor(a: Any, b: Any) -> bool:
    """The same shape and entries, NaN matching NaN (two calls of a module whose mask leaves a row without keys)."""
    import torch

    return a.shape == b.shape and bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())


def _draw_recorder() -> Any:
    """A context that records the shape of every random tensor torch draws inside it (``.shapes``): torch.rand,
    rand_like, bernoulli, uniform_, dropout and their kin, however the module calls them."""
    import torch
    from torch.overrides import TorchFunctionMode

    random_draws = {torch.rand, torch.rand_like, torch.randn, torch.randn_like, torch.randint, torch.randint_like,
                    torch.bernoulli, torch.normal, torch.multinomial, torch.dropout, torch.nn.functional.dropout,
                    torch.Tensor.bernoulli_, torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.random_,
                    torch.Tensor.exponential_, torch.Tensor.geometric_, torch.Tensor.bernoulli}

    class Draws(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.shapes: list[tuple[int, ...]] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
            result = func(*args, **(kwargs or {}))
            if func in random_draws and isinstance(result, torch.Tensor):
                self.shapes.append(tuple(int(n) for n in result.shape))
            return result

    return Draws()


def _draw_elsewhere(shapes: list[tuple[int, ...]], module: Any, args: list[Any]) -> list[int] | None:
    """The shape of the module's largest own dropout draw when it is not one for the attention weights, (batch,
    heads, query, key): a draw whose last axis is not the keys' (seq) drops something else — the values, (batch,
    heads, seq, d_head), or the output, (batch, seq, d_model). None otherwise (a 1-D draw reshaped says nothing)."""
    heads, x = getattr(module, "num_heads", None), args[0] if args else None
    if not shapes or not isinstance(heads, int) or not hasattr(x, "shape") or len(x.shape) != 3:
        return None
    largest = max(shapes, key=lambda s: int(np.prod(s)))
    if len(largest) < 2 or int(np.prod(largest)) < int(x.shape[1]) or largest[-1] == int(x.shape[1]):
        return None
    return [int(n) for n in largest]


def _draw_shared_axes(shapes: list[tuple[int, ...]], module: Any, args: list[Any]) -> list[str] | None:
    """The axes of the attention weights, (batch, heads, query, key), that the module's own dropout draw is shared
    by: its draws hold fewer numbers than the weights, and the largest of them broadcasts to the weights with size
    1 on those axes. None when that cannot be told (no draw seen, one of another shape, enough numbers drawn)."""
    heads, x = getattr(module, "num_heads", None), args[0] if args else None
    if not shapes or not isinstance(heads, int) or not hasattr(x, "shape") or len(x.shape) != 3:
        return None
    full = (int(x.shape[0]), heads, int(x.shape[1]), int(x.shape[1]))
    if sum(int(np.prod(s)) for s in shapes) >= int(np.prod(full)):
        return None
    largest = max(shapes, key=lambda s: int(np.prod(s)))
    if len(largest) > len(full):
        return None
    padded = (1,) * (len(full) - len(largest)) + largest
    if any(a not in (1, f) for a, f in zip(padded, full)):
        # or the draw's axes from the front, broadcast over the last ones (torch.rand(w.shape[:-1])[..., None]: one
        # number per query, for all its keys)
        padded = largest + (1,) * (len(full) - len(largest))
        if any(a not in (1, f) for a, f in zip(padded, full)):
            return None
    shared = [name for name, a, f in zip(("batch", "heads", "query", "key"), padded, full) if a == 1 and f > 1]
    return shared or None


def _module_of_class(module: Any) -> bool:
    """Is ``module`` a torch module (a step's module the cell made)?"""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(module, torch.nn.Module)


def _module_grad(module: Any, probe: Mapping[str, Any], make: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The module called in evaluation mode with gradients on: does its output require a gradient, and which of
    its trainable parameters does the gradient of the output's sum not reach (``cut``)? With ``make`` (keyword
    arguments of the class), ``class_state``: what the module does once another module of its class has been made
    with those (see :func:`_class_state_shared`). The module's mode is left as it was."""
    import torch

    args = [to_framework(v, "torch") for v in probe["inputs"].values()]
    was_training, state = bool(getattr(module, "training", False)), torch.get_rng_state()
    kept = _tensor_state(module)  # put back after the calls: a forward that changes the module must not change
    # the student's (and whether the calls changed it is what `stateful` says)
    try:
        module.eval()
        with torch.enable_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            result = module(*args)
            if not isinstance(result, torch.Tensor):
                return {}
            named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
            if not result.requires_grad:
                # cut in evaluation mode only (a `.detach()` in a branch for it), when training reaches every weight
                only = bool(named) and _backward_in_training(module, args, named) == {"partial": []}
                return {"keeps_grad": False, "cut": [], **({"eval_only": True} if only else {})}
            try:
                grads = torch.autograd.grad(result.float().sum(), [p for _, p in named], allow_unused=True)
            except RuntimeError as exc:  # an in-place change of a tensor autograd saved: backward cannot run
                return {"keeps_grad": True, "cut": [], "inplace_error": _first_line(exc)[:300]}
            ignores = _ignores_input(module, args, result)
            torch.set_rng_state(state)  # the first call's draws again, if it draws (dropout left on in eval mode)
            stateful = _called_again_differs(module, args, result) or _state_changed(module, kept)
            partial = _partial_gradients(module, args) if not any(g is None for g in grads) else []
            trained = _backward_in_training(module, args, named)
            input_cut = _input_cut(module, args)
            stateful = stateful or _changes_other_weights(module, args)  # (last: it changes the weights)
            if not stateful and make:
                _restore_tensor_state(module, kept)  # (the calls above may have moved its weights)
            shared = None if stateful or not make else _class_state_shared(module, args, make)
    except Exception as exc:  # noqa: BLE001 — the student's module: anything can happen
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
    finally:
        module.train(was_training)
        torch.set_rng_state(state)  # a module that draws in evaluation mode must not move the notebook's generator
        _restore_tensor_state(module, kept)
    out = {"keeps_grad": True, "cut": [n for (n, _), g in zip(named, grads) if g is None], "ignores_input": ignores,
           "partial": partial, "stateful": stateful, "class_state": shared,
           # a gradient of another layout than a plain tensor's (`F.embedding(..., sparse=True)`): most optimizers,
           # AdamW among them, refuse to step with it
           "sparse": [n for (n, _), g in zip(named, grads) if g is not None and g.layout != torch.strided]}
    if trained.get("inplace"):
        out["inplace_error"] = trained["inplace"]
    if trained.get("reused_graph"):
        out["reused_graph"] = trained["reused_graph"]
    if input_cut and not out["cut"] and not ignores:  # every weight reached, and the input matters: yet not it
        out["input_cut"] = True
    if not out["cut"] and not partial:  # right in evaluation mode, but not in training mode (its dropout branch)
        out["train_cut"], out["train_partial"] = trained.get("cut") or [], trained.get("partial") or []
    return out


def _put_back_class(cls: type, saved: Mapping[str, Any]) -> None:
    """The attributes of ``cls`` as ``saved`` (``dict(vars(cls))``) holds them: what a constructor set on the class
    itself (``MyAttention.d_head = …``) undone."""
    for name in [n for n in vars(cls) if n not in saved]:
        with contextlib.suppress(Exception):
            delattr(cls, name)
    for name, value in saved.items():
        if vars(cls).get(name) is not value:
            with contextlib.suppress(Exception):
                setattr(cls, name, value)


def _class_state_shared(module: Any, args: list[Any], make: Mapping[str, Any]) -> str | None:
    """``module`` called (in evaluation mode, without gradients) on ``args``, another module of its class made with
    ``make``, then ``module`` called again: None when it gives the same, else what it does now ("raises …", "gives
    other outputs") — it keeps something on its class (``MyAttention.d_head = …`` in ``__init__``), which every new
    module overwrites. The class is put back as it was, so that the student's modules keep working."""
    import torch

    cls = type(module)
    saved = dict(vars(cls))
    try:
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            module.eval()
            before = module(*args)
            if not isinstance(before, torch.Tensor):
                return None
            torch.manual_seed(0)
            cls(**make)
            after = module(*args)
        if isinstance(after, torch.Tensor) and after.shape == before.shape and \
                torch.allclose(after.double(), before.double(), rtol=1e-5, atol=1e-6, equal_nan=True):
            return None
        return "gives other outputs"
    except Exception as exc:  # noqa: BLE001 — the student's class: anything can happen
        return f"raises {type(exc).__name__}: {_first_line(exc)}"
    finally:
        _put_back_class(cls, saved)


def _partial_gradients(module: Any, args: list[Any], training: bool = False) -> list[str]:
    """The trainable parameters whose gradient misses part of the way they change the output: a `.detach()` on one
    path of several (``h + attn(h.detach())``), which leaves every parameter some gradient. For each parameter, the
    gradient of the output's sum along a random direction is compared with the change of that sum when the parameter
    moves a little that way (a central difference), on a float64 copy of the module in evaluation mode (``training``:
    in training mode, every call drawing the same dropout; the caller puts torch's generator back). A module that
    cannot be copied or run in float64 says nothing (an empty list)."""
    import torch

    try:
        twin = copy.deepcopy(module).double().train(training)
        wide = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        named = [(n, p) for n, p in twin.named_parameters() if p.requires_grad]
        if not named or sum(p.numel() for _, p in named) > 200_000:
            return []

        def call() -> Any:
            if training:
                torch.manual_seed(20233)
            return twin(*wide)

        result = call()
        if not isinstance(result, torch.Tensor) or not result.requires_grad or result.dtype != torch.float64:
            return []
        if training:
            with torch.no_grad():
                if not torch.equal(call(), result.detach()):
                    # a draw torch's seed does not repeat (a generator of the module's own, NumPy's): every call
                    # drops other weights, so differences of calls say nothing about the gradient
                    return []
        grads = torch.autograd.grad(result.sum(), [p for _, p in named], allow_unused=True)
        generator = torch.Generator().manual_seed(0)
        partial: list[str] = []

        def slope(p: Any, direction: Any, eps: float) -> float:  # a central difference of the output's sum
            p.add_(eps * direction)
            plus = call().sum()
            p.sub_(2 * eps * direction)
            minus = call().sum()
            p.add_(eps * direction)
            return float((plus - minus) / (2 * eps))

        with torch.no_grad():
            for (name, p), g in zip(named, grads):
                if g is None:
                    continue
                direction = torch.randn(p.shape, generator=generator, dtype=torch.float64)
                numeric, analytic = slope(p, direction, 1e-6), float((g * direction).sum())
                if abs(numeric - analytic) <= 1e-4 * max(1.0, abs(numeric)):
                    continue
                if abs(slope(p, direction, 2e-6) - numeric) > 1e-3 * max(1.0, abs(numeric)):
                    # the output is not smooth at this scale: the forward rounds through float32 on the way (a
                    # softmax in float32, cast back), whose rounding swamps a difference of 1e-6. Ask again at a
                    # step float32's rounding cannot swamp, with a tolerance that allows for it
                    numeric = slope(p, direction, 1e-2)
                    if abs(numeric - analytic) <= 2e-2 * max(1.0, abs(numeric)):
                        continue
                partial.append(name)
        return partial
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        return []


def _input_cut(module: Any, args: list[Any]) -> bool:
    """Does the gradient of the output's sum (evaluation mode) miss every floating input the module is called with
    (a `x.detach()` or a NumPy round trip of the input in forward: nothing before the module could learn)?"""
    import torch

    try:
        wide = [_hold(a.detach().clone().requires_grad_(True))
                if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        floats = [a for a in wide if isinstance(a, torch.Tensor) and a.requires_grad]
        if not floats:
            return False
        module.eval()  # (the caller puts the mode back)
        result = module(*wide)
        if not isinstance(result, torch.Tensor) or not result.requires_grad:
            return False
        grads = torch.autograd.grad(result.float().sum(), floats, allow_unused=True)
        return all(g is None for g in grads)
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        return False


def _changes_other_weights(module: Any, args: list[Any]) -> str | None:
    """With its floating parameters set to other numbers (of both signs, some above 1), does a call change them?
    ``"weights"`` when it does (a forward that clamps or rescales a weight in place, a no-op on the weights it starts
    with), else None. The weights are left changed: the caller puts them back."""
    import torch

    try:
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
            for p in module.parameters():
                if p.is_floating_point():
                    p.copy_(torch.randn_like(p) * 2)
            before = _tensor_state(module)
            module.eval()  # (the caller puts the mode back)
            module(*args)
        return None if _same_state(_tensor_state(module), before) else "weights"
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        return None


def _backward_in_training(module: Any, args: list[Any], named: list[tuple[str, Any]]) -> dict[str, Any]:
    """Backward through the module in training mode (its dropout branch): ``inplace``, the first line of the error
    it raises when that is an in-place change of a tensor autograd saved; ``cut``, the parameters the gradient does
    not reach there (a `torch.no_grad()` around the dropout); ``partial``, those whose gradient misses a path there
    (see :func:`_partial_gradients`). Empty when it cannot be told."""
    import torch

    try:
        module.train()
        result = module(*args)
        if not isinstance(result, torch.Tensor):
            return {}
        if not result.requires_grad:
            return {"cut": [n for n, _ in named]}
        grads = torch.autograd.grad(result.float().sum(), [p for _, p in named], allow_unused=True)
    except RuntimeError as exc:
        message = _first_line(exc)
        if "backward through the graph a second time" in message:  # a tensor made from the weights once, kept
            return {"reused_graph": message[:300]}
        return {"inplace": message[:300]} if "inplace operation" in message else {}
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        return {}
    if cut := [n for (n, _), g in zip(named, grads) if g is None]:
        return {"cut": cut}
    return {"partial": _partial_gradients(module, args, training=True)}


def _tensor_state(module: Any) -> dict[str, Any] | None:
    """A copy of the module's parameters and buffers by name (the buffers kept out of its state_dict too), to
    compare and to put back (None when they cannot be read)."""
    try:
        named = [*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)]
        return {name: t.detach().clone() for name, t in named if t is not None}
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        return None


def _same_state(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    import torch

    if a is None or b is None:
        return True
    return a.keys() == b.keys() and all(a[n].shape == b[n].shape and bool(torch.equal(a[n], b[n])) for n in a)


def _state_changed(module: Any, kept: dict[str, Any] | None) -> str | None:
    """``"same"`` when the module's parameters or buffers are not what ``kept`` holds (the calls changed them)."""
    return None if _same_state(_tensor_state(module), kept) else "same"


def _restore_tensor_state(module: Any, kept: dict[str, Any] | None) -> None:
    """Put the module's parameters and buffers back as ``kept`` holds them (after probes that called it), those a
    forward replaced by a tensor of another shape (``self.causal_mask = self.causal_mask[:n, :n]``) included."""
    import torch

    if kept is None:
        return
    for name, saved in kept.items():
        try:
            owner_name, _, leaf = name.rpartition(".")
            owner = module.get_submodule(owner_name) if owner_name else module
            with torch.no_grad():
                if leaf in owner._parameters and owner._parameters[leaf] is not None:
                    param = owner._parameters[leaf]
                    if param.shape == saved.shape:
                        param.copy_(saved)
                    else:
                        param.data = saved.clone()
                elif leaf in owner._buffers:
                    buffer = owner._buffers[leaf]
                    if buffer is not None and buffer.shape == saved.shape:
                        buffer.copy_(saved)
                    else:
                        owner._buffers[leaf] = saved.clone()
        except Exception:  # noqa: BLE001 — the student's module: anything can happen
            continue


def _shorter(args: list[Any]) -> list[Any] | None:
    """``args`` one token shorter: the sequence axis of the first argument (rows of an (n, d) matrix, axis 1 of a
    (batch, n, d) batch or of (batch, n) token ids) cut by one, lengths given beside it capped at the new length.
    None when there is no such axis, or a single token."""
    import torch

    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.dim() not in (2, 3):
        return None
    axis = 0 if x.dim() == 2 and x.is_floating_point() else 1
    n = int(x.shape[axis])
    if n < 2:
        return None
    rest = []
    for a in args[1:]:
        if isinstance(a, torch.Tensor) and a.dim() == 1 and not a.is_floating_point() and a.dtype != torch.bool:
            a = a.clamp(max=n - 1)  # lengths of the sequences of a padded batch
        elif isinstance(a, torch.Tensor):
            return None  # a draw or a mask shaped by the length: not cut here
        rest.append(a)
    return [x.narrow(axis, 0, n - 1), *rest]


def _called_again_differs(module: Any, args: list[Any], first: Any) -> str | None:
    """Called once more on the same input (after the probe's other calls), does the module give another output? A
    forward that changes the module (a weight rescaled in place) or keeps something from call to call does:
    ``"same"``. Then called on a sequence one token shorter and on the first one again: a forward that cuts what it
    keeps to the length it sees (``self.causal_mask = self.causal_mask[:n, :n]``) fails or differs on the longer
    one: ``"shorter"``. None when neither shows."""
    import torch

    def differs(again: Any) -> bool:
        return isinstance(again, torch.Tensor) and (again.shape != first.shape or not bool(
            torch.allclose(again.float(), first.detach().float(), rtol=1e-5, atol=1e-6, equal_nan=True)))

    state = torch.get_rng_state()  # the draws of the first call (a module that draws in this mode draws the same)
    try:
        with torch.no_grad():
            again = module(*args)
    except Exception:  # noqa: BLE001 — raising now is another problem
        return None
    if differs(again):
        return "same"
    if (short := _shorter(args)) is None:
        return None
    try:
        with torch.no_grad():
            module(*short)
    except Exception:  # noqa: BLE001 — a module that refuses a shorter sequence: another problem, not this one
        return None
    torch.set_rng_state(state)
    try:
        with torch.no_grad():
            again = module(*args)
    except Exception:  # noqa: BLE001 — it ran on this input before the shorter one: the shorter call changed it
        return "shorter"
    return "shorter" if differs(again) else None


def _ignores_input(module: Any, args: list[Any], result: Any) -> bool:
    """Does the module give the same output when its first (floating) argument changes? (A forward that reads the
    notebook's `x` instead of its argument.)"""
    import torch

    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        return False
    try:
        with torch.no_grad():
            other = module(x * 1.5 + 0.25, *args[1:])
    except Exception:  # noqa: BLE001 — raising on other inputs is not ignoring them
        return False
    return isinstance(other, torch.Tensor) and other.shape == result.shape and bool(
        torch.allclose(other.float(), result.detach().float(), rtol=1e-6, atol=1e-7))


def _train_step_probe(step: Callable[..., Any], probe: Mapping[str, Any]) -> dict[str, Any]:
    """The student's ``train_step(model, optimizer, tokens)`` run once on a stand-in (a table of next-token
    scores and a shift added to every row, in training mode) with an SGD optimizer that counts its calls, twice,
    from two states of torch's generator: ``steps``, how often the optimizer stepped; ``changed``, whether a
    parameter changed; ``unchanged``, the parameters that did not (``table``, ``shift``); ``modes``,
    the model's mode at each forward; ``training_after``, its mode after the step; ``modes_next``, the modes of a
    second call on the model as the first left it; ``rng_reset``, whether the
    two runs left torch's generator in the same state (a seed set inside the step); ``state_steps``, the step count
    an Adam optimizer keeps after three calls of the step (3, unless the step clears the optimizer's state). Torch's
    generator is left as it was. Also: ``low_precision``, the precision of a product inside the model's forward
    or of its weights after a step when lower than float32 (autocast, `model.half()`); ``large_moved_otherwise``,
    whether one step moves the weights otherwise than a plain step when the gradients are large (a norm of
    ``large_norm``: gradients clipped or scaled in the step)."""
    import torch

    inputs = probe["inputs"]
    table = torch.as_tensor(np.asarray(inputs["table"]), dtype=torch.float32)
    tokens = torch.as_tensor(np.asarray(inputs["tokens"]).astype(np.int64))

    class Table(torch.nn.Module):
        """The table of scores and a second parameter, a shift of every token's score (a step that updates only
        some parameters, `loss.backward(inputs=[first])`, shows on it)."""

        def __init__(self, gain: float = 1.0) -> None:
            super().__init__()
            self.table = torch.nn.Parameter(table.clone())
            self.shift = torch.nn.Parameter(torch.zeros(table.shape[-1]))
            self.gain = gain
            self.modes: list[bool] = []
            self.rows: list[int] = []
            self.products: set[str] = set()

        def forward(self, t: Any) -> Any:
            self.modes.append(bool(self.training))
            self.rows.append(int(t.shape[0]) if getattr(t, "ndim", 0) else 1)
            # the precision a product gets here (lower than float32 under torch.autocast)
            self.products.add(str((torch.ones(1, 1) @ torch.ones(1, 1)).dtype).removeprefix("torch."))
            return self.gain * self.table[t] + self.shift

    class CountingSGD(torch.optim.SGD):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.steps = 0

        def step(self, closure: Any = None) -> Any:  # noqa: ANN401
            self.steps += 1
            return super().step(closure)

    state = torch.get_rng_state()
    out: dict[str, Any] = {}
    try:
        states = []
        for seed in (20231, 20232):
            torch.manual_seed(seed)
            model = Table().train()
            # (two parameter groups, as an optimizer with weight decay on some weights only has: a step() per
            # group shows)
            optimizer = CountingSGD([{"params": [model.table]}, {"params": [model.shift]}], lr=float(inputs["lr"]))
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                step(model, optimizer, tokens.clone())
            states.append(torch.get_rng_state())
            if not out:
                moved = {"table": not bool(torch.equal(model.table.detach(), table)),
                         "shift": bool(model.shift.detach().abs().sum() > 0)}
                out = {"steps": optimizer.steps, "modes": list(model.modes), "rows": list(model.rows),
                       "lr_after": float(optimizer.param_groups[0].get("lr", float("nan"))),
                       "batch": int(tokens.shape[0]), "training_after": bool(model.training),
                       "changed": any(moved.values()), "unchanged": [n for n, m in moved.items() if not m],
                       # gradients that keep the graph that made them (`backward(create_graph=True)`)
                       "grad_graph": any(p.grad is not None and bool(p.grad.requires_grad)
                                         for p in model.parameters())}
        out["rng_reset"] = bool(torch.equal(states[0], states[1]))
        # three steps with SGD, next to three plain steps (zero_grad, the step's own loss function, backward, step)
        # on a copy: a parameter that moves otherwise has its gradients cleared, or used, differently (a `break`
        # left in a loop that clears them one parameter at a time)
        loss_fn = getattr(step, "__globals__", {}).get("answer_loss")
        if callable(loss_fn):
            torch.manual_seed(20234)
            model, plain = Table().train(), Table().train()
            sgd, plain_sgd = (torch.optim.SGD(m.parameters(), lr=float(inputs["lr"])) for m in (model, plain))
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                states = []
                for _ in range(3):
                    step(model, sgd, tokens.clone())
                    states.append({n: getattr(plain, n).detach().clone() for n in ("table", "shift")})
                    plain_sgd.zero_grad()
                    loss_fn(plain(tokens.clone()), tokens.clone()).backward()
                    plain_sgd.step()
            low = {d for d in model.products if d != "float32"} | {
                str(getattr(model, n).dtype).removeprefix("torch.") for n in ("table", "shift")
                if getattr(model, n).dtype in (torch.float16, torch.bfloat16)}
            if low:
                out["low_precision"] = sorted(low)[0]
            out["moved_otherwise"] = [n for n in ("table", "shift")
                                      if not torch.allclose(getattr(model, n).detach().float(),
                                                            getattr(plain, n).detach(),
                                                            rtol=1e-4, atol=1e-5)]
            # where two plain steps put them: each update one call late (step() before backward())
            out["one_late"] = bool(out["moved_otherwise"]) and all(
                torch.allclose(getattr(model, n).detach().float(), states[2][n], rtol=1e-4, atol=1e-5)
                for n in ("table", "shift"))
            # one step on a stand-in whose scores are the table times 100 (gradients of a norm in the tens, as a
            # model's are early in training), next to a plain step: a step that clips or scales the gradients
            # moves the weights less, or otherwise
            torch.manual_seed(20235)
            model, plain = Table(gain=100.0).train(), Table(gain=100.0).train()
            sgd, plain_sgd = (torch.optim.SGD(m.parameters(), lr=float(inputs["lr"])) for m in (model, plain))
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                step(model, sgd, tokens.clone())
                plain_sgd.zero_grad()
                loss_fn(plain(tokens.clone()), tokens.clone()).backward()
                out["large_norm"] = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in plain.parameters())))
                plain_sgd.step()
            out["large_moved_otherwise"] = not all(
                torch.allclose(getattr(model, n).detach().float(), getattr(plain, n).detach(), rtol=1e-4, atol=1e-4)
                for n in ("table", "shift"))
        # three steps with an optimizer that keeps a state (Adam's running averages and its step count): a step
        # that clears that state at every call (`optimizer.state.clear()`) leaves a count of 1
        torch.manual_seed(20233)
        model = Table().train()
        # (with settings of its own, betas and eps, which a step leaves as they are)
        adam = torch.optim.Adam(model.parameters(), lr=float(inputs["lr"]), betas=(0.8, 0.95), eps=1e-6)
        adam_before = {k: v for k, v in adam.param_groups[0].items() if k != "params"}
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                step(model, adam, tokens.clone())
        counts = [int(s["step"]) for s in adam.state.values() if isinstance(s, dict) and "step" in s]
        if counts:
            out["state_steps"] = max(counts)
        # an optimizer with settings of its own (weight decay, momentum): a step leaves them as the caller set them,
        # also when the loss rises from one call to the next (a learning rate halved then, "on plateau", shows)
        model = Table().train()
        tuned = torch.optim.SGD(model.parameters(), lr=float(inputs["lr"]), momentum=0.5, weight_decay=0.01)
        before = {k: v for k, v in tuned.param_groups[0].items() if k != "params"}
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step(model, tuned, tokens.clone())
            with torch.no_grad():  # the table made badly wrong: the next call's loss is far higher
                model.table.copy_(-20.0 * torch.nn.functional.one_hot(
                    torch.arange(table.shape[-1]) % table.shape[-1], table.shape[-1]).float() + model.table)
            step(model, tuned, tokens.clone())
        changed = {}
        for group, was in ((adam.param_groups[0], adam_before), (tuned.param_groups[0], before)):
            changed.update({k: [repr(v), repr(group.get(k))] for k, v in was.items()
                            if isinstance(v, (int, float, bool, tuple)) and group.get(k) != v and k not in changed})
        out["settings_changed"] = changed
        # a batch the table already gets right (each answer's score 8 above the others: a loss of about 0.003): a
        # step still updates (a step skipped below some loss leaves the weights as they were)
        n_vocab, length = int(table.shape[-1]), (int(tokens.shape[1]) - 1) // 2
        if 0 < length < n_vocab:
            prompt = torch.arange(length)
            sure = torch.cat([prompt, torch.tensor([n_vocab - 1]), prompt.flip(0)]).repeat(4, 1)

            def updates(start: Any) -> bool:
                """One step from a table that starts as ``start``, with a plain SGD: did the table change?"""
                model = Table().train()
                with torch.no_grad():
                    model.table.copy_(start)
                sgd = torch.optim.SGD(model.parameters(), lr=float(inputs["lr"]))
                with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    step(model, sgd, sure.clone())
                return not bool(torch.equal(model.table.detach(), start))

            confident = torch.zeros(n_vocab, n_vocab)
            confident[sure[0, length:-1], sure[0, length + 1:]] = 8.0
            out["confident_changed"] = updates(confident)
            # and a batch it gets badly wrong (another token 30 above each answer: a loss of about 30): a step
            # skipped above some loss ("exploding" steps) leaves the weights as they were too
            wrong = torch.zeros(n_vocab, n_vocab)
            wrong[sure[0, length:-1], (sure[0, length + 1:] + 1) % n_vocab] = 30.0
            out["wrong_changed"] = updates(wrong)
        # two calls, the second on the model as the first left it: a step that ends in `model.eval()` trains the next
        # time in evaluation mode unless it calls `model.train()` first (which makes ending so harmless). (Last: what
        # a step keeps on itself between calls is as the measurements above left it.)
        torch.manual_seed(20236)
        model = Table().train()
        sgd = torch.optim.SGD(model.parameters(), lr=float(inputs["lr"]))
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            step(model, sgd, tokens.clone())
            before = len(model.modes)
            step(model, sgd, tokens.clone())
        out["modes_next"] = model.modes[before:]
    except Exception as exc:  # noqa: BLE001 — the student's function: anything can happen
        if out:  # what the first runs measured stands
            return out
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
    finally:
        torch.set_rng_state(state)
    return out


def _module_guesses(module: Any, probe: Mapping[str, Any], inputs: list[Any], history: History | None,
                    namespace: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The module's own guesses (the argmax of its output over the last axis), in evaluation mode and without
    gradients, on each trial's input (the notebook's, then each replay's), and what the history says of how the
    module was made and trained (:func:`_training_history`). Its mode is left as it was."""
    import torch

    was_training, state = bool(getattr(module, "training", False)), torch.get_rng_state()
    guesses = []
    try:
        module.eval()
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
            for value in inputs:
                if value is None:
                    return {}
                t = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.asarray(value).astype(np.int64))
                guesses.append(module(t).argmax(dim=-1).numpy().astype(np.float64))
    except Exception as exc:  # noqa: BLE001 — the student's model: anything can happen
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
    finally:
        module.train(was_training)
        torch.set_rng_state(state)
    trained = (probe.get("inputs") or {}).get("trained") or ()
    return {"guesses": guesses,
            "history": _training_history(history, namespace, module, name, *trained) if len(trained) == 2 else {}}


def _training_history(history: History | None, namespace: Mapping[str, Any], module: Any, name: str, bound: str,
                      step: str) -> dict[str, Any]:
    """Which run (an index into the history) last made the module ``name``, last trained it (bound ``bound``, the
    training cell's result) and last defined ``step``, the function it trains with; and the classes of the module
    (or of its parts) that the notebook has defined again since the module was made."""
    def last(wanted: str) -> int | None:
        if history is None:
            return None
        for i in range(len(history.runs) - 1, -1, -1):
            run = history.runs[i]
            if wanted in run.names and wanted not in run.unbound:
                return i
        return None

    stale = sorted({type(m).__name__ for m in getattr(module, "modules", lambda: [])()
                    if isinstance(namespace.get(type(m).__name__), type)
                    and namespace[type(m).__name__] is not type(m)})
    # the last run of the training cell that raised before binding ``bound`` (h11: said instead of "not trained")
    raised = next(({"run": i, "error": run.error, "raised_in": run.raised_in}
                   for i in range(len(history.runs) - 1, -1, -1) if (run := history.runs[i]).error
                   and bound in run.unbound), None) if history is not None else None
    return {"made": last(name), "trained": last(bound), "step": step, "step_defined": last(step),
            "stale_classes": stale, "train_raised": raised}


def _call(fn: Callable[..., Any], name: str, args: list[Any], which: str, shapes: str) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. overflow in a wrong answer: the verdict says what is wrong
            result = fn(*args)
    except NotImplementedError as exc:
        if str(exc).startswith("TO-DO"):  # the placeholder's own line; else a library's (softmax of integers)
            raise NotDone(f"`{name}` still raises NotImplementedError: replace the placeholder with your code.") \
                from None
        raise AnswerError("raised", f"`{name}` raised {type(exc).__name__}: {_first_line(exc)}"
                                    f"{student_frame_line(exc)} when called on {which} ({shapes}).") from None
    except Exception as exc:
        raise AnswerError("raised", f"`{name}` raised {type(exc).__name__}: {_first_line(exc)}"
                                    f"{student_frame_line(exc)} when called on {which} ({shapes}).") from None
    if result is Ellipsis:
        raise NotDone(f"`{name}` still returns the placeholder `...`.")
    if isinstance(result, tuple) and len(result) > 1 and all(len(getattr(v, "shape", ())) >= 1 for v in result):
        raise AnswerError("returns_tuple", f"`{name}` returns a tuple of {len(result)} tensors; this step asks for "
                                           "one. Return only the result the step names (the outputs).")
    return result


def _keeps_grad(fn: Callable[..., Any], name: str, inputs: Mapping[str, Any],
                wanted: Iterable[str] | None = None, notes: dict[str, Any] | None = None) -> bool | None:
    """Called on float inputs that require a gradient (as trainable weights do; with ``wanted``, those of these
    names only), does ``fn`` return a result that still requires one, and does the gradient of its sum reach
    every one of those inputs? False when it cuts the graph (``.detach()``, ``torch.no_grad()``, a NumPy round
    trip), for all inputs or for one; None when that cannot be told (it raised, or returned no tensor). A gradient
    that raises because an in-place operation changed a tensor autograd had saved goes into ``notes``
    (``inplace_error``)."""
    args = []
    names = None if wanted is None else set(wanted)
    for key, v in inputs.items():
        t = to_framework(v, "torch")
        # a mask of 0s and 1s (a dropout draw) is not trained: a function may use it as booleans
        mask = isinstance(v, np.ndarray) and v.size > 0 and bool(np.isin(v, (0.0, 1.0)).all())
        if hasattr(t, "is_floating_point") and t.is_floating_point() and not mask \
                and (names is None or key in names):
            t = _hold(t.clone().requires_grad_(True))
        args.append(t)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = fn(*args)
            if not getattr(result, "requires_grad", False):
                return False if hasattr(result, "requires_grad") else None
            # every input that needs a gradient must get one: `table.detach()` cuts the table off, although the
            # result still requires a gradient through x
            import torch

            wanting = [a for a in args if getattr(a, "requires_grad", False)]
            grads = torch.autograd.grad(result.sum(), wanting, allow_unused=True)
    except Exception as exc:  # noqa: BLE001 — the student's function: anything can happen
        if notes is not None and "modified by an inplace operation" in str(exc):
            notes["inplace_error"] = _first_line(exc)[:300]
        return _numpy_of_graph(exc)
    return all(g is not None for g in grads)


_NAN_GRAD_TRIALS = 4  # (06's causal steps: a trial of loud values, another of loud hidden scores, …)


def _nan_grad(fn: Callable[..., Any], trials: Sequence[Mapping[str, Any]], framework: str,
              wanted: Iterable[str] | None = None, loud: Iterable[int] = ()) -> dict[str, Any] | None:
    """Of the trials built with loud hidden scores (``loud``, the plan's "loud_trials") and the few with the largest
    input entries, the first (those built loud first, then the loudest) where ``fn``'s result is finite but the
    gradient of its sum is not (NaN or inf) for some float input (a softmax written out whose hidden entries'
    exponentials overflow before a select removes them: the select sends 0 back, and 0 · inf is NaN): that trial's
    index and those inputs' names. None when every gradient is finite or none can be taken (it raised, no tensor
    came back). (The largest entries alone missed such a trial on one draw in four: values 10⁷ times larger, which
    never reach an exponential, ranked above it.)"""
    names = None if wanted is None else set(wanted)
    chosen = []
    for i, inputs in enumerate(trials):
        picked = [k for k, v in inputs.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size
                  and not np.isin(v, (0.0, 1.0)).all() and (names is None or k in names)]
        if picked:
            chosen.append((-max(float(np.abs(inputs[k]).max()) for k in picked), i, picked))
    # only a loud trial overflows a hidden exponential: the loudest few (a gradient per trial is what costs here)
    first = set(loud)
    ranked = [c for c in chosen if c[1] in first] + sorted(c for c in chosen if c[1] not in first)[:_NAN_GRAD_TRIALS]
    for _, i, picked in ranked:
        inputs = trials[i]
        try:
            with _quiet(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if framework == "torch":
                    import torch

                    args = {k: to_framework(v, "torch") for k, v in inputs.items()}
                    for k in picked:
                        args[k] = _hold(args[k].clone().requires_grad_(True))
                    out = fn(*args.values())
                    if not isinstance(out, torch.Tensor) or not out.requires_grad \
                            or not bool(torch.isfinite(out).all()):
                        continue
                    grads = torch.autograd.grad(out.sum(), [args[k] for k in picked], allow_unused=True)
                    bad = [k for k, g in zip(picked, grads) if g is not None and not bool(torch.isfinite(g).all())]
                else:
                    import tensorflow as tf

                    args = {k: to_framework(v, "tensorflow") for k, v in inputs.items()}
                    with tf.GradientTape() as tape:
                        for k in picked:
                            tape.watch(args[k])
                        out = fn(*args.values())
                        if not isinstance(out, tf.Tensor) or not bool(tf.reduce_all(tf.math.is_finite(out))):
                            continue
                        total = tf.reduce_sum(out)
                    grads = tape.gradient(total, [args[k] for k in picked])
                    bad = [k for k, g in zip(picked, grads)
                           if g is not None and not bool(tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(g))))]
        except Exception:  # noqa: BLE001 — the student's function: anything can happen
            continue
        if bad:
            return {"trial": i, "inputs": bad, "shapes": _shapes(inputs)}
    return None


def _grad_mismatch(fn: Callable[..., Any], inputs: Mapping[str, Any],
                   wanted: Iterable[str] | None = None) -> list[str] | None:
    """Is the gradient autograd gives through ``fn`` the gradient of what ``fn`` computes? Called in float64, the
    autograd gradient of the result's sum along a random direction of each input is compared with the central
    difference of that sum along the same direction. The names of the inputs where they disagree (a table looked
    up with ``padding_idx``, whose row never learns; a custom backward); None when that cannot be told (the result
    is not float64, the function is not deterministic, or it raised)."""
    import torch

    names = None if wanted is None else set(wanted)
    gen = np.random.default_rng(7)
    args, picked = [], []
    for key, v in inputs.items():
        t = to_framework(v, "torch")
        mask = isinstance(v, np.ndarray) and v.size > 0 and bool(np.isin(v, (0.0, 1.0)).all())
        if hasattr(t, "is_floating_point") and t.is_floating_point():
            t = t.detach().to(torch.float64)
            if not mask and (names is None or key in names) and t.numel():
                picked.append((key, len(args), torch.from_numpy(gen.standard_normal(tuple(t.shape)))))
        args.append(t)
    if not picked:
        return None

    def total(shift: float = 0.0, which: int | None = None, grad: bool = False) -> Any:
        call = [_hold(a.clone()) if hasattr(a, "clone") else a for a in args]  # (a plain number, such as p, as it is)
        for _, i, v in picked:
            if grad:
                call[i].requires_grad_(True)
            elif i == which:
                call[i] = _hold(call[i] + shift * v)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*call)
        if not hasattr(out, "dtype") or out.dtype != torch.float64 or not out.is_floating_point():
            raise TypeError("not float64")
        return out, call

    try:
        out, call = total(grad=True)
        grads = torch.autograd.grad(out.sum(), [call[i] for _, i, _ in picked], allow_unused=True)
        with torch.no_grad():
            again, _ = total()
            if not torch.equal(again, out.detach()):  # a draw of its own, or a cache: no claim
                return None
            wrong = []
            base = float(out.detach().sum())
            for (key, i, v), g in zip(picked, grads):
                eps = 1e-6 * max(1.0, float(args[i].abs().max()))
                up, _ = total(eps, i)
                down, _ = total(-eps, i)
                again, _ = total()
                # the same function at every call (not a cache that hands back what an earlier call computed), and a
                # smooth one here: the two half-steps agree to first order
                high, low = float(up.sum()), float(down.sum())
                if not torch.equal(again, out.detach()) or abs(high + low - 2 * base) > 1e-3 * abs(high - low) + 1e-9:
                    return None
                fd = float((up.sum() - down.sum()) / (2 * eps))
                ad = 0.0 if g is None else float((g * v).sum())
                size = float(torch.linalg.vector_norm(v)) * (0.0 if g is None else float(torch.linalg.vector_norm(g)))
                if not (np.isfinite(fd) and np.isfinite(ad)):
                    return None
                if abs(fd - ad) > 1e-4 * (abs(fd) + size) + 1e-7:
                    wrong.append(key)
    except Exception:  # noqa: BLE001 — the student's function: anything can happen (it may refuse float64)
        return None
    return wrong


def _keeps_grad_tf(fn: Callable[..., Any], inputs: Mapping[str, Any]) -> bool | None:
    """:func:`_keeps_grad` for TensorFlow: called on its float inputs watched by a ``tf.GradientTape``, does the
    gradient of the result's sum reach every one of them? False when it does not reach one (NumPy inside, the
    result wrapped in ``tf.constant``, ``tf.stop_gradient``); None when that cannot be told (it raised, or
    returned no TensorFlow tensor)."""
    try:
        import tensorflow as tf

        args, watched = [], []
        for v in inputs.values():
            t = to_framework(v, "tensorflow")
            mask = isinstance(v, np.ndarray) and v.size > 0 and bool(np.isin(v, (0.0, 1.0)).all())
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and not mask:
                watched.append(t)
            args.append(t)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            with tf.GradientTape() as tape:
                for t in watched:
                    tape.watch(t)
                result = fn(*args)
            if not isinstance(result, (tf.Tensor, tf.Variable)) or not result.dtype.is_floating or not watched:
                return None
            grads = tape.gradient(result, watched)  # of the sum of its entries
    except Exception:  # noqa: BLE001 — the student's function: anything can happen
        return None
    return all(g is not None for g in grads)


def _grad_mismatch_tf(fn: Callable[..., Any], inputs: Mapping[str, Any]) -> list[str] | None:
    """:func:`_grad_mismatch` for TensorFlow: under a ``tf.GradientTape``, the gradient of the result's sum along a
    random direction of each float input, against the central difference along it. In float64 where the function
    takes it, else (it raised there: a cast to tf.float32 inside) in float32 with a wider step and tolerance; a
    function that takes float64 and returns another dtype is not judged (as in :func:`_grad_mismatch`). The names
    of the inputs where they disagree (a `tf.stop_gradient` on part of a softmax: its denominator, say); None when
    that cannot be told."""
    try:
        import tensorflow as tf
    except Exception:  # noqa: BLE001
        return None
    gen = np.random.default_rng(7)
    picked = [(k, gen.standard_normal(np.shape(v))) for k, v in inputs.items()
              if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size and not np.isin(v, (0.0, 1.0)).all()]
    if not picked:
        return None
    # (float64 at a step of 1e-6; where it disagrees, float64 again at a step of 1e-2 with float32's tolerance: a
    # softmax taken in float32 and cast back rounds its numbers to float32, which a step of 1e-6 reads as a wrong
    # gradient; where float64 raises, float32 at that step)
    settings = ((tf.float64, 1e-6, 1e-4, True), (tf.float64, 1e-2, 3e-2, False), (tf.float32, 1e-2, 3e-2, False))
    for dtype, step, tol, first in settings:
        def call(shift: float = 0.0, which: str | None = None, tape: Any = None, dtype: Any = dtype) -> Any:
            args, watched = [], {}
            for k, v in inputs.items():
                if isinstance(v, np.ndarray) and v.dtype.kind == "f":
                    a = np.asarray(v, dtype=np.float64)
                    if k == which:
                        a = a + shift * dict(picked)[k]
                    t = tf.constant(a, dtype=dtype)
                    if tape is not None and k in dict(picked):
                        tape.watch(t)
                        watched[k] = t
                    args.append(t)
                else:
                    args.append(to_framework(v, "tensorflow"))
            out = fn(*args)
            if not isinstance(out, (tf.Tensor, tf.Variable)) or out.dtype != dtype:
                raise _OtherDtype
            return out, watched

        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                with tf.GradientTape() as tape:
                    out, watched = call(tape=tape)
                    total = tf.reduce_sum(out)
                grads = tape.gradient(total, [watched[k] for k, _ in picked])
                base = float(total)
                wrong = []
                for (key, v), g in zip(picked, grads):
                    eps = step * max(1.0, float(np.abs(inputs[key]).max()))
                    high = float(tf.reduce_sum(call(eps, key)[0]))
                    low = float(tf.reduce_sum(call(-eps, key)[0]))
                    if float(tf.reduce_sum(call()[0])) != base or \
                            abs(high + low - 2 * base) > 10 * tol * abs(high - low) + 1e-6:
                        return None  # not the same function at every call, or not smooth here: no claim
                    fd = (high - low) / (2 * eps)
                    gv = np.zeros_like(v) if g is None else np.asarray(g, dtype=np.float64)
                    ad = float((gv * v).sum())
                    size = float(np.linalg.norm(v) * np.linalg.norm(gv))
                    if not (np.isfinite(fd) and np.isfinite(ad)):
                        return None
                    if abs(fd - ad) > tol * (abs(fd) + size) + 1e-6:
                        wrong.append(key)
            if wrong and first:
                continue  # asked again at the wider step
            return wrong
        except _OtherDtype:  # float64 in, another dtype out (a result cast, or made of NumPy): no claim, as in torch
            return None
        except Exception:  # noqa: BLE001 — the student's function: it may refuse float64 (a tf.float32 cast
            continue  # inside makes float64 operands clash); then float32
    return None


class _OtherDtype(Exception):
    """A function that returned another dtype than its inputs' (see :func:`_grad_mismatch_tf`)."""


def _numpy_of_graph(exc: BaseException) -> bool | None:
    """False when ``exc`` is PyTorch refusing ``.numpy()`` on a tensor that requires a gradient: the function
    takes its result out of the graph (a NumPy round trip), and only works where no gradient is wanted. None
    (cannot be told) for any other error. Likewise ``requires_grad_(False)`` on a result that is part of the graph,
    which PyTorch refuses there (only leaves may change the flag): it only works where no gradient is wanted."""
    text = str(exc)
    refused = "numpy()" in text and "requires grad" in text or "requires_grad flags of leaf variables" in text
    return False if isinstance(exc, RuntimeError) and refused else None


def _frozen(module: Any) -> list[str]:
    """The names of the module's parameters that do not require a gradient (frozen: no optimizer trains them)."""
    try:
        return [name for name, p in module.named_parameters() if not p.requires_grad][:20]
    except Exception:  # noqa: BLE001 — not a module, or one whose parameters cannot be listed
        return []


def _module_stateful(module: Any, inputs: Mapping[str, Any]) -> str | None:
    """Called twice on the first of ``inputs`` (and on a shorter sequence in between), does the module give two
    outputs, or change its parameters or buffers? ``"same"`` or ``"shorter"`` as :func:`_called_again_differs` says,
    else None (also when that cannot be told). The module and torch's generator are left as they were."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(module, torch.nn.Module) or not inputs:
        return None
    args = [to_framework(next(iter(inputs.values())), "torch")]
    kept, state = _tensor_state(module), torch.get_rng_state()
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            first = module(*args)
            torch.set_rng_state(state)
            if not isinstance(first, torch.Tensor):
                return None
            return _called_again_differs(module, args, first) or _state_changed(module, kept)
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
        return None
    finally:
        torch.set_rng_state(state)
        _restore_tensor_state(module, kept)


def _module_keeps_grad(module: Any, inputs: Mapping[str, Any], notes: dict[str, Any] | None = None) -> bool | None:
    """Called on the first of ``inputs`` with gradients on, does the module's output reach every parameter of it
    that requires a gradient? None when that cannot be told (no module, it raised, no tensor came out). A gradient
    that raises because an in-place operation changed a tensor autograd had saved goes into ``notes``
    (``inplace_error``)."""
    torch = sys.modules.get("torch")
    params = [p for p in getattr(module, "parameters", lambda: [])() if getattr(p, "requires_grad", False)] \
        if torch is not None and isinstance(module, torch.nn.Module) else []
    if not params or not inputs:
        return None
    state = torch.get_rng_state()
    try:
        with warnings.catch_warnings(), torch.enable_grad():
            warnings.simplefilter("ignore")
            result = module(to_framework(next(iter(inputs.values())), "torch"))
            if not getattr(result, "requires_grad", False):
                return False if hasattr(result, "requires_grad") else None
            grads = torch.autograd.grad(result.sum(), params, allow_unused=True)
    except Exception as exc:  # noqa: BLE001 — the student's module: anything can happen
        if notes is not None and "modified by an inplace operation" in str(exc):
            notes["inplace_error"] = _first_line(exc)[:300]
        return None
    finally:
        torch.set_rng_state(state)
    return all(g is not None for g in grads)


def _shapes(inputs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}{tuple(np.shape(v))}" if isinstance(v, (np.ndarray, list)) else f"{k}={v!r}"
                     for k, v in inputs.items())


def _function_record(plan: Mapping[str, Any], namespace: Mapping[str, Any], history: History | None,
                     run: Run | None) -> dict[str, Any]:
    name = plan["answers"][0]
    if err := _stale_error(history, run, [name], f"`{name}`") or _misspelled_error(plan, history, run, namespace):
        return err
    if name not in namespace:
        return _error("not_done", f"`{name}` is not defined yet. Fill in the TO-DO cell above and run it.")
    fn = namespace[name]
    if fn is Ellipsis:
        return _error("not_done", f"`{name}` is still the placeholder `...`.")
    if not callable(fn):
        return _error("not_callable", f"`{name}` should be a function, but it is a {type(fn).__name__}.")
    framework = plan.get("framework")
    read, where = _data_globals(fn)
    glob = getattr(fn, "__globals__", None) or {}
    trials = plan.get("trials") or []
    record: dict[str, Any] = {"answers": [], "globals_read": read, "globals_in": [where] if where else [],
                              "mutated": [], "models_read": [n for n in read if _is_model(glob.get(n))],
                              "scalars_read": _influential(fn, _scalar_globals(fn), trials[1:], framework),
                              "containers_read": _container_globals(fn), "globals_written": _data_globals_written(fn)}
    own = definition_source(run.source, name) if run is not None else None  # not the cell's given code
    if own is not None:
        record["calls"] = sorted(called_names(own))
    if own is not None:  # what the TO-DO asks for, and what a wrong answer's code says (a float16 cast)
        record["how"] = code_features(own)
        if record["how"] is not None and not record["how"]["library_attention"] \
                and (via := _library_attention_reached(fn)):
            record["how"]["library_attention"] = True
            record["library_via"] = via
            # an alias of the library's function, or a function of the notebook that calls it
            record["library_via_own"] = isinstance(getattr(fn, "__globals__", {}).get(via), types.FunctionType)
        record["discarded"] = discarded_results(own)
    if own is not None:
        record["typed_in"] = typed_lists(own)
    if own is not None and (plan.get("computed_with") or plan.get("not_with")):
        mentioned = mentioned_names(own)
        record["unused"] = sorted(set(plan.get("computed_with") or ()) - mentioned)
        reached = _packages_reached(fn)
        # a library's helper reached as an attribute counts too (`nn.Transformer.generate_square_subsequent_mask`)
        record["forbidden"] = sorted(set(plan.get("not_with") or ()) & (mentioned | attribute_names(own)
                                                                         | set(reached)))
        record["forbidden_via"] = {p: via for p, via in reached.items() if p in record["forbidden"] and via
                                   and p not in mentioned}
    mutated: set[str] = set()
    results: list[Any] = []  # what each call returned, as it returned it
    # measurements that matter only to an answer whose numbers are right (see `collect`'s `defer`)
    later: dict[str, Callable[[], Any]] = record.setdefault(_LATER, {})
    watch = _ModuleWatch() if plan.get("module") and framework == "torch" else None  # a module it makes and runs
    if watch is not None:
        watch.start()
    # torch's generator after each call (a function, not a module's step): one that seeds it anew on every call
    # (`torch.manual_seed(0)` inside) leaves it in the same state after each
    torch_ = sys.modules.get("torch") if framework == "torch" and not plan.get("module") else None
    states = [torch_.random.get_rng_state()] if torch_ is not None else []
    # NumPy's and Python's generators too (`np.random.seed(0)`, `random.seed(0)` inside a function)
    others: dict[str, list[Any]] = {k: [g[0]()] for k, g in _GENERATORS.items()} if not plan.get("module") else {}
    try:
        for i, inputs in enumerate(plan.get("trials") or []):
            args = {k: to_framework(v, framework) for k, v in inputs.items()}
            before = _snapshot(args)
            flags = {k: getattr(v, "requires_grad", None) for k, v in args.items()}
            which = "the notebook's example" if i == 0 else "random inputs"
            result = _call(fn, name, list(args.values()), which, _shapes(inputs))
            mutated.update(_mutated(before, args))
            # an input whose requires_grad the call switched on (`x.requires_grad_(True)`): the caller's tensor
            # then requires a gradient (its .numpy() fails, every backward fills its .grad)
            flagged = record.setdefault("grad_flag_set", [])
            flagged += [k for k, v in args.items() if flags[k] is False and getattr(v, "requires_grad", False) is True
                        and k not in flagged]
            if i == 0:
                record["facts"] = _facts({name: result})
            record["answers"].append({name: to_array(result, f"{name}(...)", finite=False)})
            results.append(result)
            if torch_ is not None:
                states.append(torch_.random.get_rng_state())
            for k, kept in others.items():
                kept.append(_GENERATORS[k][0]())
        if watch is not None:
            watch.stop()
            if watch.grown or watch.unregistered:
                record["forward_params"] = {"grown": sorted(watch.grown), "unregistered": sorted(watch.unregistered)}
        # a result a later call changed: the function hands out an array it keeps and fills again (the last one is
        # checked by one more call, on its inputs doubled: the same shapes, other numbers)
        copies = [a[name] for a in record["answers"]]
        if results and not _overwritten(results, copies):
            _call_quietly(fn, {k: _doubled(v, framework) for k, v in (plan.get("trials") or [])[-1].items()})
            results, copies = [results[-1], None], [copies[-1], None]
        record["result_overwritten"] = _overwritten(results, copies)
        # (after that: the calls below may change what a function keeps between calls)
        record["reseeds"] = _reseeds(fn, plan, states, framework) or (_names_a_seed(fn) and any(
            _reseeds_other(fn, plan, kept, framework, *_GENERATORS[k]) for k, kept in others.items()))
        if not plan.get("module"):
            _nonfinite_trial(record, fn, name, plan, states, framework)
        if not plan.get("module") and plan.get("trials"):  # (after the calls above: a result it keeps is judged)
            # (on the largest trial: a dropout on a few weights may well drop none of them twice in a row)
            # (the largest of at most 5 000 numbers: one of 30 000 costs more calls than it tells)
            sizes = [sum(np.size(v) for v in t.values() if isinstance(v, np.ndarray))
                     for t in plan["trials"][:len(record["answers"])]]
            fits = [i for i, size in enumerate(sizes) if size <= 5000]
            big = max(fits, key=sizes.__getitem__) if fits else min(range(len(sizes)), key=sizes.__getitem__)
            record["draws"] = _draws_at_random(fn, plan["trials"][big], framework,
                                               next(iter(record["answers"][big].values()), None))
        if framework == "torch" and not plan.get("module") and plan.get("trials"):
            # the same numbers whatever torch's grad mode: a branch on `torch.is_grad_enabled()` shows
            later["grad_mode_differs"] = lambda: _grad_mode_differs(fn, plan["trials"][0])
            # and the inputs that require a gradient still require one after the call (`w_key.requires_grad_(False)`
            # inside freezes the caller's weight)
            later["grad_flag_cleared"] = lambda: _grad_flag_cleared(fn, plan["trials"][0])
        if plan.get("follows_dtype") and plan.get("trials") and not record.get("forbidden"):
            # float64 in, float64 out: a result cast to float32, or built in the default dtype, loses the precision
            later["double_dtype"] = lambda: _double_dtype(fn, plan["trials"][0], framework)
        # a result kept for the very objects it was given (a cache keyed by id()): the last trial's arrays changed in
        # place and handed in again give the old result, where new arrays of the same numbers give another
        if plan.get("trials") and framework in ("numpy", "torch") and results:
            kept: dict[str, Any] = {}
            record["keeps_by_identity"] = _keeps_by_identity(fn, args, record["answers"][-1][name],
                                                             plan["trials"][-1], framework, kept)
            record["same_for_doubled"] = kept.get("same_for_doubled") is True
        # a function that uses what the step rules out (another library) is not measured: that comes first
        record["probes"] = {} if record.get("forbidden") else _probes(plan, fn, name, framework)
        if framework == "torch" and plan.get("module"):
            record["module_alike"] = _alike_parameters(namespace.get(plan["module"]))
        if plan.get("keeps_grad") and framework == "torch" and plan.get("trials") and plan.get("module"):
            # the function runs a module the cell made (which it may call without gradients): that module's output
            notes = {}
            record["module_grad"] = _module_keeps_grad(namespace.get(plan["module"]), plan["trials"][0], notes)
            if notes.get("inplace_error"):
                record["grad_inplace"] = notes["inplace_error"]
        grad_probe = next((p for p in plan.get("probes") or () if p.get("kind") == "module_grad"), None)
        if framework == "torch" and plan.get("module") and grad_probe is not None \
                and _module_of_class(namespace.get(plan["module"])):
            # the cell's own module, trained as the next steps train it (a forward that keeps its result for an input
            # it has seen cannot be trained twice)
            record["probes"]["module_grad"] = _module_grad(namespace[plan["module"]], grad_probe)
        if framework == "torch" and plan.get("trials") and plan.get("module"):
            record["module_stateful"] = _module_stateful(namespace.get(plan["module"]), plan["trials"][0])
            record["module_frozen"] = _frozen(namespace.get(plan["module"]))
            record["module_ranges"] = _param_ranges(namespace.get(plan["module"]))
        elif plan.get("keeps_grad") and framework == "torch" and plan.get("trials"):
            wanted = plan["keeps_grad"] if isinstance(plan["keeps_grad"], (list, tuple)) else None
            notes: dict[str, Any] = {}
            record["keeps_grad"] = _keeps_grad(fn, name, plan["trials"][0], wanted, notes)
            if record["keeps_grad"]:  # a gradient reaches every input: is it the right one?
                later["grad_mismatch"] = lambda: _grad_mismatch(fn, plan["trials"][0], wanted)
                # and a finite one, on the loud trials whose result is finite (the loud hidden keys of the edges)
                later["nan_grad"] = lambda: _nan_grad(fn, plan["trials"], "torch", wanted,
                                                      plan.get("loud_trials") or ())
            if notes.get("inplace_error"):
                record["grad_inplace"] = notes["inplace_error"]
        elif plan.get("keeps_grad") and framework == "tensorflow" and plan.get("trials"):
            record["keeps_grad"] = _keeps_grad_tf(fn, plan["trials"][0])
            if record["keeps_grad"]:  # a gradient reaches every input: is it the right one?
                later["grad_mismatch"] = lambda: _grad_mismatch_tf(fn, plan["trials"][0])
                later["nan_grad"] = lambda: _nan_grad(fn, plan["trials"], "tensorflow", None,
                                                      plan.get("loud_trials") or ())
    except AnswerError as err:
        # what it returned before it raised: the mistake that makes it raise may show in those numbers
        return {**_error(err.kind, err.message), "globals_read": read, "globals_in": record["globals_in"],
                "answers": record["answers"] if err.kind == "raised" else [],
                "scalars_read": record["scalars_read"], "calls": record.get("calls"), "how": record.get("how"),
                "typed_in": record.get("typed_in", []),
                # what the step rules out, which may be why it raised (another library's softmax on integers)
                **{k: record[k] for k in ("unused", "forbidden", "forbidden_via", "library_via", "library_via_own")
                   if k in record}, "fn_attributes": _fn_attributes(fn)}
    finally:
        if watch is not None:
            watch.stop()
    record["mutated"] = sorted(mutated)
    record["fn_attributes"] = _fn_attributes(fn)
    return record


def _alike_parameters(module: Any) -> list[str]:
    """Two trainable parameters of ``module`` of one shape holding exactly the same numbers, not all equal ones (a
    layer deep-copied into another's place, one draw given to two weights): their names, or []. Zeros or ones, a
    layer norm's start, are not this."""
    import torch

    named = getattr(module, "named_parameters", None)
    if not callable(named):
        return []
    seen: list[tuple[str, Any]] = []
    with torch.no_grad():
        for name, p in named():
            if not getattr(p, "requires_grad", False) or p.numel() < 2 or bool((p == p.reshape(-1)[0]).all()):
                continue
            for other, q in seen:
                if q.shape == p.shape and bool(torch.equal(q, p)):
                    return [other, str(name)]
            seen.append((str(name), p))
    return []


def _fn_attributes(fn: Any) -> list[str]:
    """What a plain function keeps on itself (`f.cache = …`, set by its own calls): a state its next calls read."""
    if not isinstance(fn, types.FunctionType):
        return []
    kept = [k if isinstance(k, str) else f"__dict__[{k!r}]" for k in vars(fn)
            if not (isinstance(k, str) and k.startswith("__"))]
    # and a default argument that is a container its calls filled (`def f(x, _memo={})`): "_memo="
    code = fn.__code__
    positional = code.co_varnames[:code.co_argcount]
    defaults = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()):], fn.__defaults__ or ()))
    defaults |= fn.__kwdefaults__ or {}
    kept += [f"{name}=" for name, value in defaults.items() if isinstance(value, (dict, list, set)) and len(value)]
    return sorted(n[:80] for n in kept)[:5]


def _doubled(value: Any, framework: str | None) -> Any:
    """An input for one more call: a float array doubled (the same shape, other numbers); anything else as it is."""
    a = np.asarray(value) if isinstance(value, (np.ndarray, list)) else None
    if a is not None and a.dtype.kind == "f":
        return to_framework(a * 2.0, framework)
    return to_framework(value, framework)


def _keeps_by_identity(fn: Callable[..., Any], args: Mapping[str, Any], before: np.ndarray, trial: Mapping[str, Any],
                       framework: str | None, notes: dict[str, Any] | None = None) -> bool:
    """Does ``fn`` keep answers for the objects it is handed (a cache keyed by `id(...)` or by an array's memory
    address)? Called on the last trial's arrays doubled in place, it gives back exactly what it returned for them
    before (``before``), while new arrays holding the same doubled numbers get another answer. Whether those new
    arrays got exactly ``before`` back too goes into ``notes`` (``same_for_doubled``: a cache keyed by the shapes
    gives that, which the verdict weighs against what the doubled numbers should give)."""
    try:
        fresh_args = {k: _doubled(v, framework) for k, v in trial.items()}
        with _quiet():
            fresh = to_array(fn(*fresh_args.values()), "r", finite=False)
        if notes is not None:
            notes["same_for_doubled"] = fresh.shape == before.shape and bool(np.array_equal(fresh, before,
                                                                                             equal_nan=True))
        doubled = False
        for value in args.values():
            if isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.flags.writeable:
                value *= 2.0
                doubled = True
            elif type(value).__module__.startswith("torch") and getattr(value, "is_floating_point", None) \
                    and value.is_floating_point() and not value.requires_grad:
                import torch
                with torch.no_grad():
                    value.mul_(2.0)
                doubled = True
        if not doubled:
            return False
        with _quiet():
            again = to_array(fn(*args.values()), "r", finite=False)
        if again.shape == before.shape and bool(np.array_equal(again, before, equal_nan=True)) and not (
                fresh.shape == again.shape and np.array_equal(fresh, again, equal_nan=True)):
            return True
        # or another answer than the same numbers in new objects get (part of the work kept by identity: the
        # projections of `x` cached by id(x), the weights applied afresh), where new objects get one answer twice
        # (new objects made by this check never take each other's ids; one may still take the id of an object freed
        # before the check, which the cache remembers: two new objects out of three that agree settle the answer)
        news, agreed = [fresh], None
        while agreed is None and len(news) < 3:
            more = {k: _doubled(v, framework) for k, v in trial.items()}
            with _quiet():
                news.append(to_array(fn(*more.values()), "r", finite=False))
            agreed = next((a for i, a in enumerate(news) for b in news[i + 1:]
                           if a.shape == b.shape and np.array_equal(a, b)), None)
        with np.errstate(invalid="ignore"):
            return agreed is not None and agreed.shape == again.shape and bool(np.isfinite(agreed).all()) \
                and not np.allclose(again, agreed, rtol=1e-5, atol=1e-7)
    except BaseException as exc:  # noqa: BLE001 — the student's function on other numbers: anything can happen
        if isinstance(exc, KeyboardInterrupt):
            raise
        return False


def _draws_at_random(fn: Callable[..., Any], inputs: Mapping[str, Any], framework: str | None,
                     first: Any = None) -> bool | None:
    """Does ``fn`` give other numbers on the same inputs when the random generators (Python's, NumPy's, torch's) are
    elsewhere, and the same numbers from the same state? (A dropout left on, `F.dropout(w, p)` whose `training`
    defaults to True.) ``first``: what its first call on ``inputs`` gave: a call from other states that gives the
    same says no at once. None when that cannot be told: it raised, or two calls from one state differ (a state of
    its own). The generators are left as they were."""
    torch = sys.modules.get("torch")

    def once(moved: bool) -> np.ndarray:
        with _quiet():  # (the generators put back after each call)
            if moved:
                random.random()
                np.random.random()
                if torch is not None:
                    torch.rand(1)
            return to_array(fn(*(to_framework(v, framework) for v in inputs.values())), "", finite=False)

    if framework == "tensorflow":
        return _draws_at_random_tf(once, first)
    try:
        moved = once(True)
        if isinstance(first, np.ndarray) and first.shape == moved.shape \
                and np.array_equal(first, moved, equal_nan=True):
            return False
        first, again = once(False), once(False)
    except Exception:  # noqa: BLE001 — the student's function: anything can happen
        return None
    if first.shape != again.shape or not np.array_equal(first, again, equal_nan=True):
        return None
    return first.shape != moved.shape or not np.array_equal(first, moved, equal_nan=True)


def _draws_at_random_tf(once: Callable[[bool], np.ndarray], first: Any = None) -> bool | None:
    """:func:`_draws_at_random` for TensorFlow, whose random ops (`tf.nn.dropout`, `keras.layers.Dropout` called in
    training) draw from seeds its context hands out: two calls that agree say no, and TensorFlow's state is not
    touched (every right answer). Two that differ are called again, each after the same global seed (TensorFlow's
    own reset, `tf.random.set_seed`): equal then, it draws at random; still different, it keeps a state of its own
    (None). The context's seed and seed sequence are put back afterwards (not the kernels it cleared: a cell after a
    wrong answer like this one may draw other numbers than it would have)."""
    try:
        a = once(False) if not isinstance(first, np.ndarray) else first
        b = once(False)
    except Exception:  # noqa: BLE001 — the student's function: anything can happen
        return None
    if a.shape == b.shape and np.array_equal(a, b, equal_nan=True):
        return False
    try:
        import copy

        import tensorflow as tf
        from tensorflow.python.eager import context as tf_context

        ctx = tf_context.context()
        seed, rng = getattr(ctx, "_seed", None), copy.deepcopy(getattr(ctx, "_rng", None))
    except Exception:  # noqa: BLE001 — another TensorFlow than this one was written for: cannot be told
        return None
    try:
        runs = []
        for _ in range(2):
            tf.random.set_seed(20250)
            runs.append(once(False))
    except Exception:  # noqa: BLE001 — the student's function: anything can happen
        return None
    finally:
        with contextlib.suppress(Exception):
            ctx._seed, ctx._rng = seed, rng
    return runs[0].shape == runs[1].shape and np.array_equal(runs[0], runs[1], equal_nan=True)


def _grad_mode_differs(fn: Callable[..., Any], inputs: Mapping[str, Any]) -> bool | None:
    """Called on ``inputs`` with gradients on, then under ``torch.no_grad()``, then on again, then on inputs that
    require a gradient (each from the same state of the random generators): does the call without gradients, or
    the one whose inputs require one (a branch on `requires_grad`, "only while training"), give other numbers, where
    the two plain calls agree? None when that cannot be told (a raise, no array out)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    results = []
    try:
        for off, grad in ((False, False), (True, False), (False, False), (False, True)):
            args = []
            for v in inputs.values():
                t = to_framework(v, "torch")
                mask = isinstance(v, np.ndarray) and v.size > 0 and bool(np.isin(v, (0.0, 1.0)).all())
                if grad and getattr(t, "is_floating_point", lambda: False)() and not mask:
                    t = _hold(t.clone().requires_grad_(True))  # as a model's tensors are while it trains
                args.append(t)
            with _quiet(), torch.no_grad() if off else torch.enable_grad():
                out = fn(*args)
                results.append(to_array(out.detach() if hasattr(out, "detach") else out, "", finite=False))
    except Exception:  # noqa: BLE001 — the student's function: anything can happen
        return None
    on, off, again, trained = results
    if on.shape != again.shape or not np.array_equal(on, again, equal_nan=True):
        return None
    return any(other.shape != on.shape or not np.array_equal(on, other, equal_nan=True) for other in (off, trained))


def _grad_flag_cleared(fn: Callable[..., Any], inputs: Mapping[str, Any]) -> list[str]:
    """Called on ``inputs`` whose float tensors require a gradient: the names of those that no longer do after the
    call (the function switched their `requires_grad` off: the caller's tensor then gets no gradient). Empty when the
    call raises."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    args = {}
    for k, v in inputs.items():
        t = to_framework(v, "torch")
        if getattr(t, "is_floating_point", lambda: False)() and not (
                isinstance(v, np.ndarray) and v.size > 0 and bool(np.isin(v, (0.0, 1.0)).all())):
            t = _hold(t.clone().requires_grad_(True))
        args[k] = t
    flagged = [k for k, t in args.items() if getattr(t, "requires_grad", False)]
    try:
        with _quiet(), torch.enable_grad():
            fn(*args.values())
    except Exception:  # noqa: BLE001 — the student's function: anything can happen
        return []
    return [k for k in flagged if not args[k].requires_grad]


def _double_dtype(fn: Callable[..., Any], inputs: Mapping[str, Any], framework: str | None) -> str | None:
    """Called on ``inputs`` with every float array in float64, the dtype of the float tensor ``fn`` returns (of the
    first float tensor of a tuple), e.g. ``"float32"`` for a result cast with ``.float()`` or made in the default dtype
    (``torch.zeros(n, d)`` filled in a loop); ``"raised: <the error>"`` when float64 inputs make it raise (a constant
    of TensorFlow's float32, a buffer in torch's default dtype multiplied with them: the TO-DOs ask for a function
    that takes float64 too). None when that cannot be told: no float input, or no float tensor out. torch's generator
    is left as it was."""
    if framework not in ("torch", "tensorflow") or not any(
            isinstance(v, np.ndarray) and v.dtype.kind == "f" for v in inputs.values()):
        return None

    def floats(keep_masks: bool) -> list[Any]:
        return [to_framework(v, framework, "float64") if isinstance(v, np.ndarray) and v.dtype.kind == "f"
                and not (keep_masks and v.size and np.isin(v, (0.0, 1.0)).all()) else to_framework(v, framework)
                for v in inputs.values()]

    state = None
    try:
        if framework == "torch":
            import torch

            state = torch.random.get_rng_state()
        with _quiet(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                # a mask of 0s and 1s, a dropout draw, kept as it is first: a result cast to its dtype shows
                out = fn(*floats(True))
            except Exception:  # noqa: BLE001 — then everything in float64 (weights of 0s and 1s, as in 03's example)
                out = fn(*floats(False))
    except Exception as exc:  # noqa: BLE001 — the student's function: it may refuse float64
        return f"raised: {type(exc).__name__}: {_first_line(exc)[:200]}{student_frame_line(exc)}"
    finally:
        if state is not None:
            import torch

            torch.random.set_rng_state(state)
    for value in out if isinstance(out, (tuple, list)) else (out,):
        name = dtype_name(value) if framework_of(value) == framework else None
        if name and re.match(r"(b?float|half|double)", name):
            return name
    return None


def _reseeds(fn: Callable[..., Any], plan: Mapping[str, Any], states: Sequence[Any], framework: str | None) -> bool:
    """Does ``fn`` seed torch's generator anew at every call? ``states``: the generator's state before the trials and
    after each. The same state after every call, and another before them: yes. The same state before as well (the
    generator already where the seed puts it, after an earlier call of the notebook's, or a function that draws
    nothing): one more call with the generator moved on first says which; the notebook's generator is then put back
    where it was."""
    torch = sys.modules.get("torch")
    if torch is None or len(states) < 3 or not all(torch.equal(states[1], state) for state in states[2:]):
        return False
    if not torch.equal(states[0], states[1]):
        return True
    saved = torch.random.get_rng_state()
    try:
        torch.rand(1)
        moved = torch.random.get_rng_state()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():  # (not `_quiet`, which puts the generator back)
            warnings.simplefilter("ignore")
            try:
                fn(*(to_framework(v, framework) for v in plan["trials"][0].values()))
            except Exception:  # noqa: BLE001 — the student's function: anything can happen
                pass
        after = torch.random.get_rng_state()
    finally:
        torch.random.set_rng_state(saved)
    return not torch.equal(after, moved) and torch.equal(after, states[1])


def _names_a_seed(fn: Callable[..., Any]) -> bool:
    """Does ``fn``'s code (or code it defines) name something that sets a generator (`seed`, `set_state`)? Only
    then is NumPy's or Python's generator called once more for :func:`_reseeds_other` (a function that draws
    nothing leaves it where it was anyway)."""
    todo, names = [getattr(fn, "__code__", None)], set()
    while todo:
        code = todo.pop()
        if isinstance(code, types.CodeType):
            names.update(code.co_names)
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return any("seed" in n or n in ("set_state", "setstate") for n in names)


def _same_numpy_state(a: Any, b: Any) -> bool:
    return a[0] == b[0] and bool(np.array_equal(a[1], b[1])) and tuple(a[2:]) == tuple(b[2:])


# the global generators a function might seed anew: how to read a state, set it, move it on, and compare two
_GENERATORS: dict[str, tuple[Callable[[], Any], Callable[[Any], Any], Callable[[], Any],
                              Callable[[Any, Any], bool]]] = {
    "numpy": (np.random.get_state, np.random.set_state, np.random.random, _same_numpy_state),
    "python": (random.getstate, random.setstate, random.random, lambda a, b: a == b),
}


def _reseeds_other(fn: Callable[..., Any], plan: Mapping[str, Any], states: Sequence[Any], framework: str | None,
                   get: Callable[[], Any], put: Callable[[Any], Any], advance: Callable[[], Any],
                   same: Callable[[Any, Any], bool]) -> bool:
    """:func:`_reseeds` for NumPy's or Python's global generator (``get``, ``put``, ``advance`` and ``same`` read,
    set, move on and compare its state); the generator is put back where it was."""
    if len(states) < 3 or not all(same(states[1], state) for state in states[2:]):
        return False
    if not same(states[0], states[1]):
        return True
    saved = get()
    try:
        advance()
        moved = get()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                fn(*(to_framework(v, framework) for v in plan["trials"][0].values()))
            except Exception:  # noqa: BLE001 — the student's function: anything can happen
                pass
        after = get()
    finally:
        put(saved)
    return not same(after, moved) and same(after, states[1])


def _nonfinite(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f" and not bool(np.isfinite(a).all())


def _nonfinite_trial(record: dict[str, Any], fn: Callable[..., Any], name: str, plan: Mapping[str, Any],
                     states: Sequence[Any], framework: str | None) -> None:
    """The first trial whose result holds a NaN or an infinity, called once more with its operations watched (from
    the random state that call started from): where the first one was made goes into ``record["nonfinite"]``."""
    for i, answer in enumerate(record["answers"]):
        if not _nonfinite(answer.get(name)):
            continue
        trial = (plan.get("trials") or [])[i]
        state = states[i] if i < len(states) else None

        def again(trial: Mapping[str, Any] = trial, state: Any = state) -> None:
            with _quiet():
                if state is not None:
                    sys.modules["torch"].random.set_rng_state(state)
                fn(*(to_framework(v, framework) for v in trial.values()))

        if seen := nonfinite_origin(again, framework):
            record["nonfinite"] = {"trial": i, **seen}
        return


def _call_quietly(fn: Callable[..., Any], args: Mapping[str, Any]) -> None:
    """Call ``fn`` once more, for what the call does to earlier results; its own result and errors do not matter."""
    try:
        with _quiet():
            fn(*args.values())
    except Exception:  # noqa: BLE001 — the student's function on other numbers: anything can happen
        pass


def _overwritten(results: Sequence[Any], copies: Sequence[np.ndarray | None]) -> bool:
    """Is a result of an earlier call no longer what it was when it was returned (``copies``: what it held then)?
    A function that keeps its output array between calls (in a global, on itself) and returns it hands every caller
    the same object, which the next call fills again."""
    for result, copy_ in zip(results[:-1], copies[:-1]):
        try:
            now = to_array(result, "", finite=False)
        except Exception:  # noqa: BLE001 — a result that cannot be read again says nothing here
            continue
        if now.shape != copy_.shape or not np.array_equal(now, copy_, equal_nan=True):
            return True
    return False


def _watched(fn: Callable[..., Any], inputs: Iterable[Any]) -> Callable[..., Any]:
    """``fn``, and then what the probe's inputs saw it do: an input that logs how it is used (an attribute
    ``_log`` with ``start`` and ``finish``) raises from ``finish`` when the call did not work as asked."""
    logs = list({id(log): log for v in inputs if hasattr(log := getattr(v, "_log", None), "finish")}.values())
    if not logs:
        return fn

    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        for log in logs:
            log.start()
        result = fn(*args)
        for log in logs:
            log.finish()
        return result

    return call


def _probes(plan: Mapping[str, Any], fn: Callable[..., Any], name: str, framework: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for probe in plan.get("probes") or []:
        kind = probe["kind"]
        if kind == "module_grad":  # (the cell's module trained, not the function called: see _function_record)
            continue
        inputs = tracking(probe["inputs"], kind)  # queries and keys that watch the products, for those kinds
        stream = None
        if kind == "one_pass":
            stream = OneShot(np.asarray(inputs[probe["stream"]]).tolist())
            inputs[probe["stream"]] = stream
        args = [v if v is stream else to_framework(v, framework) for v in inputs.values()]
        trace = kind == "peak_memory"
        was_tracing = tracemalloc.is_tracing()
        if trace and not was_tracing:
            tracemalloc.start()
        peak = base = 0
        try:
            if trace:
                tracemalloc.reset_peak()
                base, _ = tracemalloc.get_traced_memory()
            try:
                result = _call(_watched(fn, inputs.values()), name, args, "a long input", _shapes(probe["inputs"]))
            except AnswerError:
                if stream is None or stream.reads < 2:
                    raise
                result = None  # it tried to read the stream a second time: that is what is measured
            if trace:
                _, peak = tracemalloc.get_traced_memory()
        finally:
            if trace and not was_tracing:
                tracemalloc.stop()
        answer = to_array(result, f"{name}(...)", finite=False) if result is not None else None
        entry: dict[str, Any] = {"answer": answer}
        if trace:
            entry["peak_bytes"] = max(0, peak - base)
        if stream is not None:
            entry |= {"reads": stream.reads, "held": stream.max_alive}
        out[kind] = entry
    return out


def _own_cell(history: History, run: Run | None, plan: Mapping[str, Any]) -> Run | None:
    """The run to judge a value step by: ``run`` (the latest cell that binds its answers), unless that cell is
    another step's (it holds a line the notebook gives there, and none of this step's: 04.weights binding
    `attn_weights_1` anew), and a run of this step's own cell binds them too: then that run, the latest."""
    def holds(source: str, lines: Iterable[str]) -> bool:
        return any(line.strip() and line.strip() in source for line in lines)

    given, others = plan.get("given") or (), plan.get("others_given") or ()
    if run is None or run.running or not given or holds(run.source, given) or not holds(run.source, others):
        return run
    wanted = set(plan["answers"])
    own = next((r for r in reversed(history.runs) if r.names & wanted and holds(r.source, given)), None)
    # (without the objects it left: the answers now hold what the other cell made, which is no sign of a cell that
    # binds them through globals())
    return dataclasses.replace(own, ids=()) if own is not None else run


_LATER = "_later"  # a record's measurements not yet taken: name → how to take it


class DeferredRecord(dict):  # type: ignore[type-arg]
    """A record whose costly measurements of a right answer's gradient and dtype (more calls of the student's
    function) are taken when the verdict first reads them: a verdict reads them only for an answer whose numbers
    are right, so a wrong answer is judged without them. Reads go through ``get``, ``[]`` or ``in``;
    :meth:`resolved` takes every one (anything that copies, iterates or stores a record needs that first)."""

    def __init__(self, record: Mapping[str, Any], later: Mapping[str, Callable[[], Any]],
                 held: list[Any] | None = None) -> None:
        super().__init__(record)
        self._later = dict(later)
        self._held = held  # what its check handed the student's code: alive while a later measurement may run

    def _take(self, key: Any) -> None:
        take = self._later.pop(key, None)
        if take is not None:
            global _held
            outer, _held = _held, self._held  # (its calls' objects join its check's)
            try:
                dict.__setitem__(self, key, _taken(take))
            finally:
                _held = outer

    def __getitem__(self, key: Any) -> Any:
        self._take(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._take(key)
        return dict.get(self, key, default)

    def __contains__(self, key: Any) -> bool:
        self._take(key)
        return dict.__contains__(self, key)

    def resolved(self) -> dict[str, Any]:
        for key in list(self._later):
            self._take(key)
        return dict(self)


def _taken(take: Callable[[], Any]) -> Any:
    torch = sys.modules.get("torch")
    grad_on = torch.enable_grad() if torch is not None and hasattr(torch, "enable_grad") else contextlib.nullcontext()
    with grad_on:  # as `collect` takes the others, whatever a cell left torch.set_grad_enabled at
        return take()


def collect(plan: Mapping[str, Any], namespace: Mapping[str, Any], history: History | None = None,
            cell: str | Callable[..., Mapping[str, Any]] | None = None, shell: Any = None,
            defer: bool = False) -> dict[str, Any]:
    """The record of one exercise (see the module's docstring). ``cell`` overrides the cell to replay
    (its source, or a function of the replay inputs returning the answers); by default it is the
    latest run, in ``history``, of a cell that binds the answers. With ``defer``, a
    :class:`DeferredRecord`: the measurements only a right answer needs are taken when first read."""
    if _replaying:
        return _error("replaying", "checked while replaying a cell")
    global _held
    _held = []  # (the last check's objects go; this one's stay until the next)
    held = _held
    run = history.defining(plan["answers"]) if history is not None else None
    if plan["kind"] == "value" and history is not None and cell is None:
        run = _own_cell(history, run, plan)
    torch = sys.modules.get("torch")
    grad_on = torch.enable_grad() if torch is not None and hasattr(torch, "enable_grad") else contextlib.nullcontext()
    try:
        with grad_on:  # judged as it runs in a fresh session, whatever a cell left torch.set_grad_enabled at
            if plan["kind"] == "value":
                record = _value_record(plan, namespace, history, run, cell, shell)
            else:
                record = _function_record(plan, namespace, history, run)
                if not defer:
                    record.update((key, take()) for key, take in record.pop(_LATER, {}).items())
    except AnswerError as err:  # e.g. a framework missing
        record = _error(err.kind, err.message)
    record["id"] = plan["id"]
    torch = sys.modules.get("torch")
    inference = bool(getattr(torch, "is_inference_mode_enabled", lambda: False)()) if torch is not None else False
    off = torch is not None and hasattr(torch, "is_grad_enabled") and (not torch.is_grad_enabled() or inference)
    if off and run is not None and re.search(r"set_grad_enabled|__enter__|inference_mode\(\)\s*$", run.source,
                                             re.MULTILINE):
        # this step's cell switched gradients off and left them off (`torch.set_grad_enabled(False)`, a
        # `torch.no_grad().__enter__()` never left): every later cell runs without them
        record["grad_off"] = True
    elif off:  # an earlier cell did: what this one computed has no gradients, through no fault of its own
        record["grad_off_session"] = True
    dtype = getattr(torch, "get_default_dtype", None) if torch is not None else None
    if callable(dtype) and str(dtype()) != "torch.float32":
        # torch's default dtype changed for the whole session (`torch.set_default_dtype(torch.float64)`): every
        # tensor made from plain numbers after it is of that dtype; by this step's cell, or an earlier one
        record["default_dtype"] = str(dtype()).replace("torch.", "")
        record["default_dtype_own"] = bool(run is not None and re.search(r"set_default_dtype|set_default_tensor_type",
                                                                         run.source))
    later = record.pop(_LATER, None)
    return DeferredRecord(record, later, held) if later else record
