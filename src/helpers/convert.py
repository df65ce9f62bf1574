"""Turn whatever a student hands in into a NumPy array, or explain why we can't.

Accepted: NumPy arrays and scalars, PyTorch tensors (also ones that require grad,
also on another device), TensorFlow tensors and variables, nested lists/tuples of
numbers, Python numbers. Everything else raises :class:`AnswerError` whose message
is written for the student.

Neither torch nor TensorFlow is imported here: a tensor is recognised by the module
its type comes from, so importing ``helpers`` stays cheap.
"""

from __future__ import annotations

import decimal
import fractions
import numbers
from typing import Any

import numpy as np

__all__ = ["AnswerError", "NotDone", "framework_of", "nonfinite_problem", "to_array"]


class AnswerError(ValueError):
    """A student-facing problem with an answer.

    ``kind`` is a short machine-readable code (``none``, ``string``, ``ragged``,
    ``not_array``, ``not_numeric``, ``nan``, ``inf``, ``shape``, ``dtype``,
    ``framework``, ``not_done``, ``raised``); ``str(err)`` is the message.
    """

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


class NotDone(AnswerError):
    """The answer is still a placeholder (undefined, ``...`` or NotImplementedError)."""

    def __init__(self, message: str):
        super().__init__("not_done", message)


def _type_name(obj: Any) -> str:
    t = type(obj)
    mod = t.__module__
    return t.__qualname__ if mod == "builtins" else f"{mod}.{t.__qualname__}"


def framework_of(obj: Any) -> str:
    """Return ``"torch"``, ``"tensorflow"``, ``"numpy"`` or ``"python"`` for an answer."""
    mod = type(obj).__module__ or ""
    root = mod.split(".", 1)[0]
    if root == "torch":
        return "torch"
    if root in ("tensorflow", "keras", "tf_keras"):
        return "tensorflow"
    if root == "numpy":
        return "numpy"
    return "python"


def _from_torch(obj: Any, name: str) -> np.ndarray:
    try:
        t = obj.detach()
        if getattr(t, "is_complex", lambda: False)():
            raise AnswerError("dtype", f"`{name}` is a complex tensor; attention works with real numbers.")
        if str(getattr(t, "dtype", "")) == "torch.bfloat16":  # NumPy has no bfloat16: its values, as float32
            t = t.float()
        return t.cpu().numpy()
    except AnswerError:
        raise
    except Exception as exc:  # e.g. a meta tensor or a sparse layout
        layout = str(getattr(obj, "layout", "torch.strided")).removeprefix("torch.")
        if layout != "strided":  # a sparse tensor (`.to_sparse()`): its numbers are there, in another layout
            raise AnswerError("not_array", f"`{name}` is a sparse tensor (layout {layout}): keep it an ordinary "
                                           "dense tensor (no `.to_sparse()`; `.to_dense()` turns one back).") from None
        raise AnswerError(
            "not_array", f"`{name}` is a torch tensor whose numbers cannot be read ({type(exc).__name__}: {exc})."
        ) from None


def _from_tensorflow(obj: Any, name: str) -> np.ndarray:
    if hasattr(obj, "numpy"):
        try:
            return np.asarray(obj.numpy())
        except Exception as exc:
            raise AnswerError(
                "not_array",
                f"`{name}` is a TensorFlow object without a value yet ({type(exc).__name__}). "
                "Run it eagerly (outside tf.function) and hand in the result.",
            ) from None
    raise AnswerError("not_array", f"`{name}` is a {_type_name(obj)}, not a tensor with values.")


def to_array(obj: Any, name: str = "answer", *, dtype: Any = np.float64, finite: bool = True) -> np.ndarray:
    """Convert ``obj`` to a NumPy array of ``dtype`` (float64 by default).

    Raises :class:`AnswerError` with a message that tells the student what to change.
    """
    if obj is None:
        raise AnswerError(
            "none",
            f"`{name}` is None. Did you forget to assign the result (or to `return` it)?",
        )
    if obj is Ellipsis:
        raise NotDone(f"`{name}` is still the placeholder `...`.")
    if isinstance(obj, (str, bytes)):
        raise AnswerError(
            "string",
            f"`{name}` is a string ({obj[:30]!r}). Hand in numbers: a tensor, an array or a list.",
        )
    if isinstance(obj, dict):
        raise AnswerError("not_array", f"`{name}` is a dict; hand in a tensor, an array or a list.")

    fw = framework_of(obj)
    if fw == "torch" and hasattr(obj, "detach"):
        arr = _from_torch(obj, name)
    elif fw == "tensorflow":
        arr = _from_tensorflow(obj, name)
    elif isinstance(obj, np.ndarray):
        arr = obj
    elif isinstance(obj, (decimal.Decimal, fractions.Fraction)):
        raise AnswerError("not_numeric", _exact_number_text(obj, name))
    elif isinstance(obj, (np.generic, numbers.Number)) and not isinstance(obj, bool):
        arr = np.asarray(obj)
    elif isinstance(obj, tuple) and any(v is None for v in obj):
        raise AnswerError("returns_tuple", f"`{name}` is a tuple of {len(obj)} values, one of them None, not one "
                                           "tensor: hand in only the result (`return out, None` returns a tuple).")
    elif isinstance(obj, tuple) and len(obj) > 1 and all(hasattr(v, "shape") for v in obj) \
            and len({tuple(v.shape) for v in obj}) > 1:
        shapes = ", ".join(str(tuple(int(n) for n in v.shape)) for v in obj[:4])
        raise AnswerError("returns_tuple", f"`{name}` is a tuple of {len(obj)} tensors of shapes {shapes}, not one "
                                           "tensor: hand in only the result the step names (a forward that returns "
                                           "`(output, weights)`, as nn.MultiheadAttention's does, hands back both).")
    elif isinstance(obj, (list, tuple)):
        arr = _from_nested(obj, name)
    else:
        raise AnswerError(
            "not_array",
            f"`{name}` is a {_type_name(obj)}; I expected a tensor, an array or a list of numbers.",
        )

    if arr.dtype == object or arr.dtype.kind in "USV":
        raise AnswerError("not_numeric", f"`{name}` does not contain plain numbers (dtype {arr.dtype}).")
    if arr.dtype.kind == "c":
        raise AnswerError("dtype", f"`{name}` holds complex numbers; attention works with real numbers.")
    if arr.dtype.kind == "b":
        raise AnswerError("dtype", f"`{name}` holds True/False values, not numbers.")
    out = np.array(arr, dtype=dtype, copy=True)
    if finite:
        problem = nonfinite_problem(out, name)
        if problem:
            raise problem
    return out


def _exact_number_text(x: Any, name: str) -> str:
    kind = type(x).__name__
    why = " (a float minus a Decimal raises)" if isinstance(x, decimal.Decimal) else \
        " (an f-string's `:,` or `:.2f` refuses a Fraction)" if kind == "Fraction" else ""
    return (f"`{name}` holds a {type(x).__module__}.{kind} ({x}), not a plain int or float: NumPy, the frameworks "
            f"and the next cells compute and print with those{why}. Convert it with float(...) (or int(...) for a "
            "whole number).")


def nonfinite_problem(arr: np.ndarray, name: str, masks: bool = True) -> AnswerError | None:
    """An :class:`AnswerError` describing the first NaN or inf in ``arr``, or None (``masks``: the step has masks,
    so a row with every key hidden is among the causes worth naming)."""
    if arr.dtype.kind != "f":
        return None
    for found, kind, advice in (
        (np.isnan(arr), "nan", "NaN usually comes from exp() overflowing (inf/inf"
         + (", or inf · 0 where a mask multiplies the exponentials) or from 0/0: a softmax over a row whose every "
            "key is masked (all −inf), or a row renormalised after masking whose visible weights all underflowed to 0"
            if masks else
            ") or from 0/0, such as a row whose exponentials all underflow to 0, or from the log or square root of a "
            "negative number") + ": look at the step that produced it."),
        (np.isposinf(arr), "inf", "Did exp() overflow? Subtract the row maximum before exponentiating (or look "
         "for a division by 0, or the −log of a probability that underflowed to 0: take the log-softmax in one step, "
         "as log_softmax or cross_entropy do)."),
        (np.isneginf(arr), "-inf", "−∞ comes from a fill meant for masking (`masked_fill(…, float('-inf'))` or "
         "`torch.where(…, -inf)`) applied where nothing is to be hidden, or from the log of 0: look at the line that "
         "puts it there."),
    ):
        if found.any():
            where = tuple(int(i) for i in np.argwhere(found)[0])
            shown = {"nan": "NaN", "inf": "inf", "-inf": "−inf"}[kind]
            return AnswerError("inf" if kind == "-inf" else kind, f"`{name}` contains {shown} "
                               f"(first at index {where}). {advice}")
    return None


def _from_nested(obj: list | tuple, name: str) -> np.ndarray:
    def walk(x: Any, depth: int) -> Any:
        if isinstance(x, (list, tuple)):
            return [walk(v, depth + 1) for v in x]
        if x is None:
            raise AnswerError("none", f"`{name}` contains None inside the list.")
        if isinstance(x, (str, bytes)):
            raise AnswerError("string", f"`{name}` contains a string ({x!r}) inside the list.")
        fw = framework_of(x)
        if fw in ("torch", "tensorflow") or isinstance(x, np.ndarray):
            return to_array(x, name, finite=False).tolist()
        if isinstance(x, bool) or not isinstance(x, (numbers.Number, np.generic)):
            raise AnswerError(
                "not_numeric", f"`{name}` contains a {_type_name(x)} inside the list; only numbers are allowed."
            )
        if isinstance(x, (decimal.Decimal, fractions.Fraction)):
            raise AnswerError("not_numeric", _exact_number_text(x, name))
        return x

    plain = walk(obj, 0)
    try:
        arr = np.array(plain, dtype=np.float64)
    except (ValueError, TypeError):
        raise AnswerError(
            "ragged",
            f"`{name}` is a ragged list: its rows do not all have the same length.",
        ) from None
    return arr
