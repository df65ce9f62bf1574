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

import contextlib
import copy
import dis
import functools
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
from .cells import code_features, definition_source, mentioned_names
from .history import History, Run, message_line
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


def to_framework(value: Any, framework: str | None, dtype: str | None = None) -> Any:
    """Hand a NumPy input to the student's code as the exercise's framework expects it.

    Floats become float32 tensors in torch / TensorFlow (float64 arrays in NumPy) unless ``dtype``
    says otherwise; integers and booleans keep their kind. Lists are deep-copied; other values
    pass through.
    """
    if isinstance(value, list):
        return copy.deepcopy(value)
    if not isinstance(value, np.ndarray):
        return value
    if dtype is None:
        dtype = {"b": "bool", "i": "int64", "u": "int64"}.get(value.dtype.kind,
                                                             "float64" if framework in (None, "numpy") else "float32")
        if framework == "tensorflow" and dtype == "int64":
            dtype = "int32"
    arr = value.astype(dtype)
    if framework in (None, "numpy"):
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


def _module_like(params: Mapping[str, Any], module: Any) -> Any:
    """A copy of ``module`` whose parameters are ``params`` (by name; by order when the student named them
    otherwise, as long as there are as many), each as trainable as the student's own. ``params`` of the form
    ``{"trainable": {name: array}, "frozen": {name: array}}`` make a module of their own instead, with exactly
    these parameters (those of ``frozen`` with requires_grad=False)."""
    import torch

    if set(params) == {"trainable", "frozen"} and all(isinstance(v, Mapping) for v in params.values()):
        return _module_of(params["trainable"], params["frozen"])
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


def _module_of(trainable: Mapping[str, Any], frozen: Mapping[str, Any]) -> Any:
    """A plain ``nn.Module`` whose parameters are the given arrays (float32), in that order, those of ``frozen``
    with requires_grad=False: other counts, sizes and frozen parameters than the student's own module."""
    import torch

    module = torch.nn.Module()
    for group, grad in ((trainable, True), (frozen, False)):
        for name, arr in group.items():
            module.register_parameter(name, torch.nn.Parameter(torch.as_tensor(np.asarray(arr), dtype=torch.float32),
                                                               requires_grad=grad))
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
    return f" (line {f.lineno}: `{f.line.strip()}`)" if f.line else f" (line {f.lineno})"


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
    if run.error.startswith("NotImplementedError"):
        return _error("not_done", f"The TO-DO cell that defines `{name}` still raises NotImplementedError: "
                                  "replace the placeholder line with your code and run the cell.")
    at = f" on line {run.line}" if run.line else ""
    if stale:
        return _error("cell_raised", f"The cell that defines {what} raised {run.error}{at} the last time it ran, "
                                     f"so `{name}` still holds an older value (or none). Fix that cell and run it "
                                     "again.")
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
    """A PyTorch tensor that adds to ``counts[name]`` the rows of every tensor multiplied by it
    (``x @ value``, ``torch.matmul(x, value)``, ``x.mm(value)``) and keeps the rows of the first such
    product in ``counts[name + "@first"]``; other values are returned as they are.
    Results are plain tensors: only the products with the value itself are counted."""
    global _COUNTER
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return value
    if _COUNTER is None:
        products = {torch.Tensor.__matmul__, torch.matmul, torch.Tensor.matmul, torch.mm, torch.Tensor.mm}

        class RowCounter(torch.Tensor):
            __module__ = "torch"  # a tensor like any other, for the student's code and for framework_of
            _counts: dict[str, int] | None = None
            _name = ""

            @classmethod
            def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
                if func in products and len(args) >= 2 and isinstance(args[1], RowCounter) and \
                        args[1]._counts is not None and isinstance(args[0], torch.Tensor) and args[0].ndim:
                    counts, left, name = args[1]._counts, args[0], args[1]._name
                    rows = left.numel() // max(1, left.shape[-1])
                    counts[name] = counts.get(name, 0) + rows
                    counts.setdefault(name + "@first", rows)  # the rows of the first product alone
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **(kwargs or {}))

        _COUNTER = RowCounter
    out = value.as_subclass(_COUNTER)
    out._counts, out._name = counts, name
    return out


def _no_check(*args: Any, **kwargs: Any) -> None:
    return None


def _compile_cell(source: str, shell: Any) -> types.CodeType | None:
    if _MAGIC_LINE.search(source):
        if shell is None:
            return None
        source = shell.transform_cell(source)
    try:
        return compile(source, "<your cell>", "exec")
    except (SyntaxError, ValueError):
        return None


def _replay(code: types.CodeType | Callable[..., Any], namespace: Mapping[str, Any], overlay: Mapping[str, Any],
            answers: Sequence[str]) -> dict[str, Any]:
    """Run the student's cell again in a copy of the namespace, with ``overlay`` for its inputs."""
    ns = dict(namespace)
    for name in answers:
        ns.pop(name, None)
    ns.update(overlay)
    ns["check"] = _no_check
    ns["display"] = _no_check
    with _quiet():
        if callable(code) and not isinstance(code, types.CodeType):
            ns.update(code(**overlay))
        else:
            exec(code, ns)
    return ns


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
            "grad": {n: bool(v.requires_grad) for n, v in values.items()
                     if framework_of(v) == "torch" and hasattr(v, "requires_grad")}}


def _items_framework(value: Any) -> str | None:
    """For a list or tuple: the framework of its entries when they are all tensors of one framework
    (e.g. a list of losses left as 0-d tensors), else None."""
    if not isinstance(value, (list, tuple)) or not value:
        return None
    kinds = {framework_of(v) for v in value}
    return kinds.pop() if len(kinds) == 1 and kinds <= {"torch", "tensorflow"} else None


def _global_names(code: types.CodeType) -> set[str]:
    """The global names a code object (and the functions, lambdas, comprehensions inside it) loads."""
    names: set[str] = set()
    todo = [code]
    while todo:
        c = todo.pop()
        names.update(ins.argval for ins in dis.get_instructions(c) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def _data_globals(fn: Any) -> tuple[list[str], str | None]:
    """Names of notebook data (arrays, tensors, models) the function reads from its globals — or, when it reads
    none itself, that the methods of a class of the notebook it uses read (a module's ``forward``), with
    that method's name."""
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
    return [], None


def _is_model(value: Any) -> bool:
    """A model object of the notebook (a PyTorch module, a Keras layer): a function that uses one from its
    globals, instead of the one it is given, works on that model only."""
    torch, keras = sys.modules.get("torch"), sys.modules.get("keras")
    return bool(torch is not None and isinstance(value, torch.nn.Module)
                or keras is not None and isinstance(value, keras.layers.Layer))


def _module_facts(module: Any, reads: Iterable[str] = ()) -> dict[str, Any] | None:
    """The module's parameters (name, shape, trainable), its tensors that are plain attributes, and which of
    the notebook's names ``reads`` a method of its own class reads as a global (``p_drop`` in ``forward``
    instead of ``self.dropout``), with that method's name."""
    named = getattr(module, "named_parameters", None)
    if not callable(named):
        return None
    params = [[name, list(getattr(p, "shape", ())), bool(getattr(p, "requires_grad", False))] for name, p in named()]
    plain = [name for name, value in vars(module).items()
             if framework_of(value) == "torch" and hasattr(value, "requires_grad") and not name.startswith("_")]
    facts: dict[str, Any] = {"params": params, "plain_tensors": plain, "globals_read": [], "globals_in": None,
                             "training": bool(getattr(module, "training", False))}
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


def _value_record(plan: Mapping[str, Any], namespace: Mapping[str, Any], history: History | None,
                  run: Run | None, cell: Any, shell: Any) -> dict[str, Any]:
    answers = list(plan["answers"])
    what = ", ".join(f"`{n}`" for n in answers)
    if err := _stale_error(history, run, answers, what):
        return err
    values = {}
    for name in answers:
        if name not in namespace:
            return _error("not_done", f"`{name}` is not defined yet. Fill in the TO-DO cell above and run it.")
        values[name] = namespace[name]
    record: dict[str, Any] = {"facts": _facts(values)}
    try:
        record["answers"] = [{n: to_array(v, n, finite=False) for n, v in values.items()}]
    except AnswerError as err:
        return _error(err.kind, err.message)
    record["upstream"] = {n: a for n, a in _snapshot({r: namespace[r] for r in plan.get("reads", ())
                                                      if r in namespace}).items()}
    trials = plan.get("trials") or []
    code: Any = cell
    source = run.source if run is not None else (cell if isinstance(cell, str) else None)
    if source is not None and (plan.get("computed_with") or plan.get("not_with")):
        mentioned = mentioned_names(source)
        record["unused"] = sorted(set(plan.get("computed_with") or ()) - mentioned)
        record["forbidden"] = sorted(set(plan.get("not_with") or ()) & mentioned)
    if source is not None:
        record["how"] = code_features(source)
    if code is None and run is not None:
        code = _compile_cell(run.source, shell)
    elif isinstance(code, str):
        code = _compile_cell(code, shell)
    record["replay"] = {"available": bool(trials) and code is not None, "error": None}
    mutated: set[str] = set()
    if record["replay"]["available"]:
        for i, world in enumerate(trials, start=1):
            overlay = {name: _mimic(value, namespace.get(name), plan.get("framework")) for name, value in world.items()}
            before = _snapshot(overlay)
            rows: dict[str, int] = {}
            for name in plan.get("count_rows") or ():
                if name in overlay:
                    overlay[name] = _counting(overlay[name], name, rows)
            try:
                ns = _replay(code, namespace, overlay, answers)
            except BaseException as exc:  # noqa: BLE001 — the student's cell, run again: anything can happen
                if isinstance(exc, KeyboardInterrupt):
                    raise
                record["replay"]["error"] = {"trial": i, "message": f"{type(exc).__name__}: {_first_line(exc)}"
                                                                     f"{student_frame_line(exc)}"}
                break
            # in place: the very objects handed to the cell changed (a name the cell binds anew, such as
            # a loop variable or a step of the same cell computed again, is not a change of its input)
            mutated.update(_mutated(before, overlay))
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
            record["answers"].append(got)
            if plan.get("count_rows"):
                record.setdefault("rows", []).append(rows)
    if run is not None and run.error:
        record["raised"] = {"message": run.error, "line": run.line}
    record["mutated"] = sorted(mutated)
    # the step's own functions that the cell calls (10.train_step): a model read from the notebook's globals
    record["models_read"] = sorted({n for f in plan.get("functions") or () if callable(namespace.get(f))
                                    for n in _data_globals(namespace[f])[0]
                                    if _is_model(getattr(namespace[f], "__globals__", {}).get(n))})
    if plan.get("module"):
        record["module"] = _module_facts(namespace.get(plan["module"]), plan.get("reads") or ())
        module = namespace.get(plan["module"])
        for probe in plan.get("probes") or []:
            if record["module"] is None:
                break
            if probe.get("kind") == "module_dropout":
                record.setdefault("probes", {})["module_dropout"] = _module_dropout(module, probe)
            elif probe.get("kind") == "module_init":
                record.setdefault("probes", {})["module_init"] = _module_init(module, probe)
    return record


def _module_init(module: Any, probe: Mapping[str, Any]) -> dict[str, Any]:
    """A new module of the same class, made with the probe's inputs as keyword arguments: for each of its
    parameters, the name, the shape, the spread of its entries (their standard deviation), and whether they
    are all equal or not all finite. torch's random generator is left as it was."""
    import torch

    state = torch.get_rng_state()
    try:
        torch.manual_seed(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fresh = type(module)(**probe["inputs"])
        params = []
        with torch.no_grad():
            for name, p in fresh.named_parameters():
                values = p.detach().double().reshape(-1)
                finite = bool(torch.isfinite(values).all()) if values.numel() else True
                spread = float(values.std()) if finite and values.numel() > 1 else 0.0
                constant = bool((values == values[0]).all()) if values.numel() else True
                params.append([str(name), [int(n) for n in p.shape], spread, constant, finite])
    except Exception as exc:  # noqa: BLE001 — the student's class: anything can happen
        return {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
    finally:
        torch.set_rng_state(state)
    return {"params": params}


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


def _call(fn: Callable[..., Any], name: str, args: list[Any], which: str, shapes: str) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. overflow in a wrong answer: the verdict says what is wrong
            result = fn(*args)
    except NotImplementedError:
        raise NotDone(f"`{name}` still raises NotImplementedError: replace the placeholder with your code.") from None
    except Exception as exc:
        raise AnswerError("raised", f"`{name}` raised {type(exc).__name__}: {_first_line(exc)}"
                                    f"{student_frame_line(exc)} when called on {which} ({shapes}).") from None
    if result is Ellipsis:
        raise NotDone(f"`{name}` still returns the placeholder `...`.")
    if isinstance(result, tuple) and len(result) > 1 and all(len(getattr(v, "shape", ())) >= 1 for v in result):
        raise AnswerError("returns_tuple", f"`{name}` returns a tuple of {len(result)} tensors; this step asks for "
                                           "one. Return only the result the step names (the outputs).")
    return result


def _keeps_grad(fn: Callable[..., Any], name: str, inputs: Mapping[str, Any]) -> bool | None:
    """Called on float inputs that require a gradient (as trainable weights do), does ``fn`` return a result
    that still requires one, and does the gradient of its sum reach every one of those inputs? False when it
    cuts the graph (``.detach()``, ``torch.no_grad()``, a NumPy round trip), for all inputs or for one; None
    when that cannot be told (it raised, or returned no tensor)."""
    args = []
    for v in inputs.values():
        t = to_framework(v, "torch")
        if hasattr(t, "is_floating_point") and t.is_floating_point():
            t = t.clone().requires_grad_(True)
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
    except Exception:
        return None
    return all(g is not None for g in grads)


def _module_keeps_grad(module: Any, inputs: Mapping[str, Any]) -> bool | None:
    """Called on the first of ``inputs`` with gradients on, does the module's output reach every parameter of it
    that requires a gradient? None when that cannot be told (no module, it raised, no tensor came out)."""
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
    except Exception:  # noqa: BLE001 — the student's module: anything can happen
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
    if err := _stale_error(history, run, [name], f"`{name}`"):
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
    record: dict[str, Any] = {"answers": [], "globals_read": read, "globals_in": [where] if where else [],
                              "mutated": [], "models_read": [n for n in read if _is_model(glob.get(n))]}
    own = definition_source(run.source, name) if run is not None else None  # not the cell's given code
    if own is not None:  # what the TO-DO asks for, and what a wrong answer's code says (a float16 cast)
        record["how"] = code_features(own)
    if own is not None and (plan.get("computed_with") or plan.get("not_with")):
        mentioned = mentioned_names(own)
        record["unused"] = sorted(set(plan.get("computed_with") or ()) - mentioned)
        record["forbidden"] = sorted(set(plan.get("not_with") or ()) & mentioned)
    mutated: set[str] = set()
    try:
        for i, inputs in enumerate(plan.get("trials") or []):
            args = {k: to_framework(v, framework) for k, v in inputs.items()}
            before = _snapshot(args)
            which = "the notebook's example" if i == 0 else "random inputs"
            result = _call(fn, name, list(args.values()), which, _shapes(inputs))
            mutated.update(_mutated(before, args))
            if i == 0:
                record["facts"] = _facts({name: result})
            record["answers"].append({name: to_array(result, f"{name}(...)", finite=False)})
        record["probes"] = _probes(plan, fn, name, framework)
        if plan.get("keeps_grad") and framework == "torch" and plan.get("trials") and plan.get("module"):
            # the function runs a module the cell made (which it may call without gradients): that module's output
            record["module_grad"] = _module_keeps_grad(namespace.get(plan["module"]), plan["trials"][0])
        elif plan.get("keeps_grad") and framework == "torch" and plan.get("trials"):
            record["keeps_grad"] = _keeps_grad(fn, name, plan["trials"][0])
    except AnswerError as err:
        # what it returned before it raised: the mistake that makes it raise may show in those numbers
        return {**_error(err.kind, err.message), "globals_read": read, "globals_in": record["globals_in"],
                "answers": record["answers"] if err.kind == "raised" else []}
    record["mutated"] = sorted(mutated)
    return record


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


def collect(plan: Mapping[str, Any], namespace: Mapping[str, Any], history: History | None = None,
            cell: str | Callable[..., Mapping[str, Any]] | None = None, shell: Any = None) -> dict[str, Any]:
    """The record of one exercise (see the module's docstring). ``cell`` overrides the cell to replay
    (its source, or a function of the replay inputs returning the answers); by default it is the
    latest run, in ``history``, of a cell that binds the answers."""
    if _replaying:
        return _error("replaying", "checked while replaying a cell")
    run = history.defining(plan["answers"]) if history is not None else None
    try:
        if plan["kind"] == "value":
            record = _value_record(plan, namespace, history, run, cell, shell)
        else:
            record = _function_record(plan, namespace, history, run)
    except AnswerError as err:  # e.g. a framework missing
        record = _error(err.kind, err.message)
    record["id"] = plan["id"]
    return record
