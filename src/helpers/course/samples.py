"""Made-up student answers for an exercise: right, or wrong with a catalogued mistake.

Used by the tests and benchmarks (and handy for instructors who want to see what each
mistake's feedback looks like). ``answer_namespace(ex, "missing_scale", "torch")`` is a
namespace in which ``judge`` finds an answer made with that mistake, and ``student_cell(ex,
"missing_scale", "torch")`` the "cell" that makes it (a function of the step's inputs), so that
the replays on fresh inputs see the same mistake::

    judge(ex, answer_namespace(ex, code), cell=student_cell(ex, code))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..convert import framework_of, to_array
from ..runtime.collect import _module_of, dtype_name, to_framework
from .spec import Exercise, _as_named

__all__ = ["answer_namespace", "in_framework", "student_cell", "student_function"]


def in_framework(arr: Any, framework: str | None, dtype: str | None = None) -> Any:
    """``arr`` as a tensor of ``framework`` (``"list"`` gives nested lists), of the framework's float dtype
    unless ``dtype`` (an exercise's ``"int32"`` or ``"float64"``) says otherwise."""
    if framework == "list":
        return np.asarray(arr).tolist()
    arr = np.asarray(arr, dtype=np.float64)
    if dtype == "int32" and not np.array_equal(arr, np.round(arr)):
        dtype = None  # a wrong answer with fractions (a division where none belongs) is a float tensor
    return to_framework(arr, framework or "numpy", dtype)


def _answer(ex: Exercise, arr: Any, framework: str | None) -> Any:
    """One answer as a student writes it: an axis prediction is a Python integer, as in the notebook's cell."""
    if ex.predicts == "axis":
        return int(round(float(np.asarray(arr))))
    return in_framework(arr, framework, _asked(ex))


def _asked(ex: Exercise) -> str | None:
    """The exact dtype an exercise asks for, if it names one that is not a framework's default float."""
    return ex.dtype if ex.dtype in ("int32", "float64") else None


def _plain(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Inputs as the references take them: NumPy float64 arrays (lists stay lists)."""
    out = {}
    for key, value in inputs.items():
        if callable(getattr(value, "named_parameters", None)):  # a module handed over: its parameters, as the world
            params = dict(value.named_parameters())
            out[key] = {group: {n: p.detach().numpy().astype(np.float64) for n, p in params.items()
                                if p.requires_grad is grad} for group, grad in (("trainable", True), ("frozen", False))}
            # a parameter under a second name (tied weights), as the world's "tied" says it
            first = {id(p): n for n, p in params.items()}
            tied = {n: first[id(p)] for n, p in value.named_parameters(remove_duplicate=False) if n not in params}
            if tied:
                out[key]["tied"] = tied
            if any(p.grad is not None for p in params.values() if p.requires_grad):  # trained before
                out[key]["grads"] = True
        elif isinstance(value, list) or not hasattr(value, "shape"):
            out[key] = value
        else:
            out[key] = to_array(value, key, finite=False)
    return out


def answer_namespace(ex: Exercise, code: str | None = None, framework: str | None = None) -> dict[str, Any]:
    """A namespace holding the reference answer (``code=None``) or the answer made with mistake ``code``,
    together with the notebook's own values of the names the step reads."""
    framework = framework or ex.framework
    if ex.kind == "value":
        inputs = ex.inputs()
        out = ex.expected(inputs) if code is None else ex.variant(code, inputs)
        ns = {name: (value if isinstance(value, list) else in_framework(value, ex.framework))
              for name, value in inputs.items() if isinstance(value, (list, np.ndarray))}
        ns.update({name: _answer(ex, out[name], framework) for name in ex.answers})
        if ex.keeps_grad:  # as the output of a trainable module is
            ns.update({name: ns[name].requires_grad_(True) for name in ex.answers})
        given = inputs.get(ex.module) if ex.module else None
        if isinstance(given, Mapping) and set(given) == {"trainable", "frozen"}:  # the module the step counts
            ns[ex.module] = _module_of(given["trainable"], given["frozen"])
        elif ex.module:
            ns[ex.module] = _trainable_module(ex.trainable, ex.parameters)
        return ns
    return {ex.answers[0]: student_function(ex, code, framework)}


def _trainable_module(n: int, names: tuple[str, ...] = ()) -> Any:
    import torch

    module = torch.nn.Module()
    for i in range(n):
        name = names[i] if i < len(names) else f"w{i}"  # the names the TO-DO asks for, where it names them
        module.register_parameter(name, torch.nn.Parameter(torch.zeros(1)))
    return module.eval()  # as a module is when its answers are computed


def _computed(ex: Exercise, code: str | None, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The right answers (``code`` None) or mistake ``code``'s, computed anew each time, as a student's code does
    (not the check's kept copies of the reference and the variants)."""
    with np.errstate(all="ignore"):
        return _as_named(ex, (ex.reference if code is None else ex.mistakes[code])(**inputs))


def student_cell(ex: Exercise, code: str | None = None, framework: str | None = None) -> Callable[..., dict]:
    """A value step's "cell": computes the answer (right, or with mistake ``code``) from its inputs."""
    framework = framework or ex.framework

    def cell(**inputs: Any) -> dict[str, Any]:
        out = _computed(ex, code, _plain(inputs))
        return {name: _answer(ex, out[name], framework) for name in ex.answers}

    return cell


def student_function(ex: Exercise, code: str | None, framework: str | None) -> Callable[..., Any]:
    if code is None and ex.native is not None and framework == ex.framework:
        return ex.native  # gradients flow through it, as through the student's own
    example = ex.inputs(None)
    keys = list(example)

    def student(*args: Any) -> Any:
        plain = {}
        for key, arg, like in zip(keys, args, example.values()):
            if type(arg) is np.ndarray and isinstance(like, np.ndarray) and arg.dtype == np.float64:
                plain[key] = arg  # no copy: a copy would count against a step's memory probe
            elif isinstance(like, np.ndarray) and hasattr(arg, "__array__") or isinstance(arg, list):
                arr = to_array(arg, key, finite=False)
                plain[key] = arr.astype(like.dtype) if like.dtype.kind in "biu" else arr
            else:
                plain[key] = arg
        res = _computed(ex, code, plain)
        # in the dtype of its float inputs, as a framework's own operations give (float64 in, float64 out); not where
        # a gradient is asked for (made in NumPy, its gradient is a stand-in, which the float64 comparison of the
        # gradient with central differences would take for a wrong one)
        doubled = any(dtype_name(a) == "float64" for a in args if framework_of(a) == framework) and not any(
            getattr(a, "requires_grad", False) for a in args)
        out = in_framework(res[ex.answers[0]], framework, _asked(ex) or ("float64" if doubled else None))
        if ex.keeps_grad:  # computed in NumPy, so tie the result to the inputs' gradients as torch code would
            out = out + sum(0 * a.sum() for a in args if getattr(a, "requires_grad", False))
        if ex.keeps_grad and framework == "tensorflow":  # the same for a tf.GradientTape watching the float inputs
            import tensorflow as tf

            out = out + sum(0 * tf.reduce_sum(a) for a in args if isinstance(a, tf.Tensor) and a.dtype.is_floating)
        return out

    return student
