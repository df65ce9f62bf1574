"""Made-up student answers for an exercise: right, or wrong with a catalogued mistake.

Used by the tests and benchmarks (and handy for instructors who want to see what each
mistake's feedback looks like): ``answer_namespace(ex, "missing_scale", "torch")`` is a
namespace in which ``check``/``judge`` find an answer made with that mistake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .checks import to_framework
from .convert import to_array
from .spec import Exercise

__all__ = ["answer_namespace", "in_framework"]


def in_framework(arr: Any, framework: str | None) -> Any:
    """``arr`` as a tensor of ``framework`` (``"list"`` gives nested lists)."""
    if framework == "list":
        return np.asarray(arr).tolist()
    return to_framework(np.asarray(arr), framework or "numpy")


def answer_namespace(ex: Exercise, code: str | None = None, framework: str | None = None) -> dict[str, Any]:
    """A namespace holding the reference answer (``code=None``) or the answer made with mistake ``code``."""
    framework = framework or ex.framework
    if ex.kind == "value":
        inputs = ex.inputs()
        out = ex.expected(inputs) if code is None else ex.variant(code, inputs)
        return {name: in_framework(out[name], framework) for name in ex.answers}
    return {ex.answers[0]: student_function(ex, code, framework)}


def student_function(ex: Exercise, code: str | None, framework: str | None) -> Callable[..., Any]:
    example = ex.inputs(None)
    keys = list(example)

    def student(*args: Any) -> Any:
        plain = {}
        for key, arg, like in zip(keys, args, example.values()):
            if isinstance(like, np.ndarray):
                arr = to_array(arg, key, finite=False)
                plain[key] = arr.astype(like.dtype) if like.dtype.kind in "biu" else arr
            else:
                plain[key] = arg
        res = ex.expected(plain) if code is None else ex.variant(code, plain)
        return in_framework(res[ex.answers[0]], framework)

    return student
