"""Where a NaN or an infinity was first made: one more run of the student's code, watched operation by operation.

A result that contains NaN says little by itself: an exponential that overflowed (inf / inf), a row whose every
exponential underflowed to 0 (0 / 0), a row whose every score is −∞ (−∞ − (−∞)), the square root of a negative number
all end the same way. :func:`origin` runs a call again with its operations watched and returns, as plain data, the
first operation that made a NaN or an infinity from numbers that had none, with what it was given there:

- PyTorch: a :class:`torch.overrides.TorchFunctionMode` sees every operation on tensors (functions, methods and
  operators alike) with its inputs and output;
- NumPy: its floating-point error log (:func:`numpy.errstate` in ``"log"`` mode) names the operation (``overflow
  encountered in exp``, ``invalid value encountered in divide``) but not the numbers.

Nothing here knows a right answer; an operation not seen (TensorFlow, code that silences NumPy's errors) leaves the
result None: the verdict then says what it said before.
"""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["origin", "KINDS"]

# what an event may say (the grader keeps only these)
KINDS = ("overflow", "underflow", "masked_row", "zero_by_zero", "inf_by_inf", "inf_minus_inf", "inf_times_zero",
         "negative", "div_by_zero", "log_zero", "cast_overflow", "other")

_EXP = {"exp", "exp2", "expm1", "pow", "rpow", "float_power", "special_exp2"}
_DIV = {"div", "truediv", "rtruediv", "true_divide", "divide", "floordiv", "rfloordiv"}
_SUB = {"sub", "rsub", "subtract", "add", "radd"}
_MUL = {"mul", "rmul", "multiply", "matmul", "rmatmul", "bmm", "mm", "einsum", "mv", "dot", "baddbmm", "addmm",
        "tensordot", "prod"}
_ROOT = {"sqrt", "rsqrt", "log", "log2", "log10", "log1p"}
_CAST = {"to", "float", "half", "bfloat16", "type", "type_as"}
_SOFTMAX = {"softmax", "log_softmax"}


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", "") or "").strip("_")


def origin(call: Callable[[], Any], framework: str | None) -> dict[str, Any] | None:
    """Run ``call`` once with its operations watched; the first NaN, +inf and −inf each made from finite numbers, as
    ``{"nan": event, "inf": event, "neg": event}`` (absent when none was made), or None when nothing could be
    watched. An event: ``{"kind": one of KINDS, "op": the operation's name, "value": a number or None, "dtype": …}``.
    ``call``'s errors are not raised (a run that raises leaves what it saw before)."""
    if framework == "torch" and "torch" in sys.modules:
        watcher: _Watch = _TorchWatch()
    elif framework in ("numpy", "python", None):
        watcher = _NumpyWatch()
    else:
        return None
    with contextlib.suppress(Exception):
        with watcher:
            call()
    return watcher.found or None


class _Watch:
    def __init__(self) -> None:
        self.found: dict[str, dict[str, Any]] = {}
        self.exp_rows: dict[str, Any] | None = None  # the first exponential whose whole row came out 0
        self.overflowed: dict[str, Any] | None = None  # the first exponential that overflowed

    def note(self, slot: str, kind: str, op: str, value: float | None = None, dtype: str = "") -> None:
        if slot in self.found:
            return
        event: dict[str, Any] = {"kind": kind, "op": op[:40], "dtype": dtype, "seq": len(self.found)}
        if value is not None and math.isfinite(value):
            event["value"] = float(value)
        if slot != "inf" and self.overflowed is not None and kind != "overflow":
            event["after"] = dict(self.overflowed)  # what made the infinity this NaN came from
        elif slot != "inf" and self.exp_rows is not None:
            event["after"] = dict(self.exp_rows)  # a row of exponentials all 0: the 0 of this 0 / 0
        self.found[slot] = event

    def __enter__(self) -> _Watch:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class _NumpyWatch(_Watch):
    """NumPy's error log: ``Warning: overflow encountered in exp``, one message per operation and kind."""

    def __enter__(self) -> _NumpyWatch:
        self._state = np.errstate(all="log", call=self)
        self._state.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._state.__exit__(*exc)

    def write(self, message: str) -> None:
        text = message.strip().removeprefix("Warning: ")
        what, _, op = text.partition(" encountered in ")
        op = op.strip()
        if what == "overflow" and op in ("exp", "exp2", "power", "float_power", "expm1"):
            if self.overflowed is None:
                self.overflowed = {"kind": "overflow", "op": op}
            self.note("inf", "overflow", op)
        elif what == "underflow" and op in ("exp", "exp2", "power", "expm1"):
            # (some exponential underflowed, not necessarily a whole row: said only of a 0 / 0 that follows)
            if self.exp_rows is None:
                self.exp_rows = {"kind": "underflow", "op": op}
        elif what == "invalid value":
            if op in ("divide", "true_divide", "floor_divide"):
                kind = "inf_by_inf" if self.overflowed else "zero_by_zero"
            elif op in ("subtract", "add"):
                kind = "inf_minus_inf"
            elif op in ("multiply", "matmul", "dot", "einsum"):
                kind = "inf_times_zero"
            elif op in ("sqrt", "log", "log2", "log10", "power"):
                kind = "negative"
            else:
                kind = "other"
            self.note("nan", kind, op)
        elif what == "divide by zero":
            self.note("neg" if op.startswith("log") else "inf", "log_zero" if op.startswith("log") else "div_by_zero",
                      op)


class _TorchWatch(_Watch):
    def __enter__(self) -> _TorchWatch:
        import torch
        from torch.overrides import TorchFunctionMode

        watch = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
                out = func(*args, **(kwargs or {}))
                if len(watch.found) < 3:
                    with contextlib.suppress(Exception):
                        watch.see(torch, _name(func), args, kwargs or {}, out)
                return out

        self._mode = Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mode.__exit__(*exc)

    def see(self, torch: Any, name: str, args: tuple, kwargs: dict, out: Any) -> None:
        outs = [t for t in (out if isinstance(out, (tuple, list)) else [out])
                if isinstance(t, torch.Tensor) and t.is_floating_point()]
        if not outs:
            return
        ins = [a for a in (*args, *kwargs.values()) if isinstance(a, (torch.Tensor, float, int))
               and not isinstance(a, bool)]
        tensors = [a for a in ins if isinstance(a, torch.Tensor) and (a.is_floating_point() or a.is_complex())]
        t = outs[0]
        dtype = str(t.dtype).removeprefix("torch.")
        had_nan = any(bool(torch.isnan(a).any()) for a in tensors) or any(
            isinstance(a, float) and math.isnan(a) for a in ins)
        had_pos = any(bool(torch.isposinf(a).any()) for a in tensors) or any(
            isinstance(a, float) and a == math.inf for a in ins)
        had_neg = any(bool(torch.isneginf(a).any()) for a in tensors) or any(
            isinstance(a, float) and a == -math.inf for a in ins)
        if name in _EXP and not had_nan and not had_pos:
            self._exp(torch, name, args, t)
        nan = torch.isnan(t)
        if not had_nan and bool(nan.any()):
            self._nan(torch, name, args, nan, dtype)
        if had_nan:
            return
        if not had_pos and bool(torch.isposinf(t).any()):
            kind = "overflow" if name in _EXP else "div_by_zero" if name in _DIV else \
                "cast_overflow" if name in _CAST else "other"
            value = _largest(torch, args) if kind == "overflow" else None
            if kind == "overflow" and self.overflowed is None:
                self.overflowed = {"kind": "overflow", "op": name, "value": value, "dtype": dtype}
            self.note("inf", kind, name, value, dtype)
        if not had_neg and not had_pos and bool(torch.isneginf(t).any()):
            self.note("neg", "log_zero" if name in _ROOT else "other", name, None, dtype)

    def _exp(self, torch: Any, name: str, args: tuple, t: Any) -> None:
        """Rows (the last axis) of exponentials that all came out 0: from finite numbers they underflowed; from a row
        of −∞ only, every key of that row was hidden."""
        if self.exp_rows is not None or t.ndim == 0 or not t.numel() or name == "expm1":
            return
        zero_rows = (t == 0).all(dim=-1)
        if not bool(zero_rows.any()):
            return
        x = next((a for a in reversed(args) if isinstance(a, torch.Tensor) and tuple(a.shape) == tuple(t.shape)),
                 None)
        if x is None:
            return
        x = x.detach()
        hidden = torch.isneginf(x).all(dim=-1)
        under = zero_rows & ~hidden
        if bool(under.any()):
            rows = x[under]
            top = float(rows.masked_fill(torch.isneginf(rows), -math.inf).max())
            self.exp_rows = {"kind": "underflow", "op": name, "value": top if math.isfinite(top) else None,
                             "dtype": str(t.dtype).removeprefix("torch.")}
        else:
            self.exp_rows = {"kind": "masked_row", "op": name}

    def _nan(self, torch: Any, name: str, args: tuple, nan: Any, dtype: str) -> None:
        at = tuple(int(i) for i in nan.nonzero()[0])
        values = []
        for a in args[:2]:
            if isinstance(a, torch.Tensor):
                with contextlib.suppress(Exception):
                    values.append(float(torch.broadcast_to(a.detach(), nan.shape)[at]))
                    continue
                values.append(None)
            elif isinstance(a, (int, float)) and not isinstance(a, bool):
                values.append(float(a))
        if name in _SOFTMAX:
            x = args[0] if args and isinstance(args[0], torch.Tensor) else None
            masked = x is not None and bool(torch.isneginf(x).all(dim=-1).any())
            self.note("nan", "masked_row" if masked else "other", name, None, dtype)
        elif name in _DIV and len(values) == 2 and None not in values:
            a, b = values
            kind = "zero_by_zero" if a == 0 == b else "inf_by_inf" if math.isinf(a) and math.isinf(b) else "other"
            self.note("nan", kind, name, None, dtype)
        elif name in _SUB and len(values) == 2 and None not in values and all(math.isinf(v) for v in values):
            a, b = values
            masked = a < 0 and (b < 0 if name in ("sub", "rsub", "subtract") else b > 0)
            self.note("nan", "masked_row" if masked else "inf_minus_inf", name, None, dtype)
        elif name in _MUL:
            self.note("nan", "inf_times_zero", name, None, dtype)
        elif name in _ROOT or name in ("pow", "rpow"):
            self.note("nan", "negative", name, min((v for v in values if v is not None), default=None), dtype)
        else:
            self.note("nan", "other", name, None, dtype)


def _largest(torch: Any, args: tuple) -> float | None:
    """The largest finite number handed to an exponential (its exponent; for ``a ** x``, the largest x)."""
    xs = [a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel()]
    if not xs:
        return None
    return float(xs[-1].detach().max())
