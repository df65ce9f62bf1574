"""The student's ``check(...)``: read the answer from the notebook, judge it, say why.

``check("01.qkv")`` looks up the variables (or the function) the exercise names in the
notebook's namespace, converts them with :func:`helpers.convert.to_array`, and prints a
one-line verdict from :func:`helpers.spec.evaluate`. It never raises and never shows a
traceback from inside ``helpers``.
"""

from __future__ import annotations

import re
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from . import spec
from .convert import AnswerError, NotDone, framework_of, to_array
from .spec import Exercise, Outcome

__all__ = ["call_function", "check", "collect", "collect_values", "judge", "seeded_trials", "to_framework"]

_SYMBOL = {"pass": "✅", "fail": "❌", "not_done": "⏳"}
_OPS = {"torch": "torch", "tensorflow": "tf", "numpy": "NumPy"}
_FRAMEWORK_NAMES = {"torch": "a PyTorch tensor", "tensorflow": "a TensorFlow tensor", "numpy": "a NumPy array"}
_HELPERS_DIR = __file__.rsplit("/", 1)[0]
_INSTALLED = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python3\.\d+[/\\]")


def to_framework(value: Any, framework: str | None) -> Any:
    """Hand an input to the student's code in the exercise's framework (float32 for tensors)."""
    if not isinstance(value, np.ndarray) or framework in (None, "numpy"):
        return value.copy() if isinstance(value, np.ndarray) else value
    if framework == "torch":
        import torch

        if value.dtype == bool:
            return torch.from_numpy(value.copy())
        if value.dtype.kind in "iu":
            return torch.from_numpy(value.astype(np.int64))
        return torch.from_numpy(value.astype(np.float32))
    if framework == "tensorflow":
        import tensorflow as tf

        if value.dtype == bool:
            return tf.constant(value)
        if value.dtype.kind in "iu":
            return tf.constant(value.astype(np.int32))
        return tf.constant(value.astype(np.float32))
    raise ValueError(f"unknown framework {framework!r}")


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message (TensorFlow's run to dozens of lines)."""
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "(no message)"


def _student_frame_line(exc: BaseException) -> str:
    """Where in the student's own code an exception came from: not helpers' frames, and not
    the frames inside torch / TensorFlow / NumPy (installed packages) it passed through."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(_HELPERS_DIR) and not _INSTALLED.search(f.filename)
    ]
    if not frames:
        return ""
    f = frames[-1]
    return f" (line {f.lineno}: `{f.line.strip()}`)" if f.line else f" (line {f.lineno})"


def _lookup(namespace: Mapping[str, Any], name: str) -> Any:
    if name not in namespace:
        raise NotDone(f"`{name}` is not defined yet. Fill in the TO-DO cell above and run it.")
    return namespace[name]


def _require_framework(ex: Exercise, name: str, value: Any) -> None:
    if ex.framework and ex.kind == "value":
        fw = framework_of(value)
        if fw != ex.framework:
            got = _FRAMEWORK_NAMES.get(fw, f"a {type(value).__name__}")
            raise AnswerError(
                "framework",
                f"`{name}` is {got}; this step is about {_FRAMEWORK_NAMES[ex.framework]}. "
                f"Build it with {_OPS[ex.framework]} operations.",
            )


def _require_float(ex: Exercise, name: str, value: Any) -> None:
    if not ex.float_required:
        return
    dtype = getattr(value, "dtype", None)
    kind = getattr(dtype, "is_floating_point", None)
    if kind is not None:  # torch
        ok = bool(kind)
    elif dtype is not None and hasattr(dtype, "is_floating"):  # TensorFlow
        ok = bool(dtype.is_floating)
    elif dtype is not None:
        ok = np.dtype(dtype).kind == "f"
    else:
        ok = True  # a nested list: no dtype to get wrong
    if not ok:
        raise AnswerError(
            "dtype",
            f"`{name}` has an integer dtype ({dtype}). Make it float32 "
            "(e.g. dtype=torch.float32 / tf.float32): softmax and √d_k need floats.",
        )


def collect_values(ex: Exercise, namespace: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A value exercise's answers as ``{name: float64 array}``; raises :class:`AnswerError`."""
    got = {}
    for name in ex.answers:
        value = _lookup(namespace, name)
        if value is not Ellipsis:
            _require_framework(ex, name, value)
            _require_float(ex, name, value)
        got[name] = to_array(value, name, finite=False)
    return got


def seeded_trials(ex: Exercise, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """A function exercise's inputs: the notebook's example, then one random draw per seed.

    The grader sends the seeds into the sandbox and rebuilds the same inputs outside it.
    """
    return [ex.inputs(None)] + [ex.inputs(np.random.default_rng(int(s))) for s in seeds]


def _student_function(ex: Exercise, namespace: Mapping[str, Any]) -> Callable[..., Any]:
    name = ex.answers[0]
    fn = _lookup(namespace, name)
    if fn is Ellipsis:
        raise NotDone(f"`{name}` is still the placeholder `...`.")
    if not callable(fn):
        raise AnswerError("not_callable", f"`{name}` should be a function, but it is a {type(fn).__name__}.")
    return fn


def call_function(
    ex: Exercise, namespace: Mapping[str, Any], trials: Sequence[Mapping[str, Any]]
) -> list[dict[str, np.ndarray]]:
    """Call the student's function on each trial's inputs (the first is the notebook's example).

    Returns one ``{name: float64 array}`` per trial; raises :class:`AnswerError`.
    """
    name = ex.answers[0]
    fn = _student_function(ex, namespace)
    outs = []
    for i, inputs in enumerate(trials):
        args = [to_framework(v, ex.framework) for v in inputs.values()]
        try:
            result = fn(*args)
        except NotImplementedError:
            raise NotDone(
                f"`{name}` still raises NotImplementedError: replace the placeholder with your code."
            ) from None
        except Exception as exc:
            shapes = ", ".join(
                f"{k}{tuple(v.shape)}" if isinstance(v, np.ndarray) else f"{k}={v!r}" for k, v in inputs.items()
            )
            which = "the notebook's example" if i == 0 else "random inputs"
            raise AnswerError(
                "raised",
                f"`{name}` raised {type(exc).__name__}: {_first_line(exc)}{_student_frame_line(exc)} "
                f"when called on {which} ({shapes}).",
            ) from None
        if result is Ellipsis:
            raise NotDone(f"`{name}` still returns the placeholder `...`.")
        outs.append({name: to_array(result, f"{name}(...)", finite=False)})
    return outs


def collect(
    ex: Exercise, namespace: Mapping[str, Any], rng: np.random.Generator | None = None
) -> tuple[list[dict[str, np.ndarray]], list[dict[str, Any]]]:
    """Gather the student's answer as plain arrays, one dict per trial.

    Value exercises have one trial (the notebook's inputs). Function exercises are
    called on the notebook's example and on ``ex.random_trials`` fresh random inputs.
    Raises :class:`AnswerError` (or :class:`NotDone`) with a student-facing message.
    """
    if ex.kind == "value":
        return [collect_values(ex, namespace)], [ex.inputs()]
    _student_function(ex, namespace)  # a missing or placeholder function is reported before any input is drawn
    rng = rng if rng is not None else np.random.default_rng()
    trials = [ex.inputs(None)] + [ex.inputs(rng) for _ in range(ex.random_trials)]
    return call_function(ex, namespace, trials), trials


def judge(ex: Exercise, namespace: Mapping[str, Any], rng: np.random.Generator | None = None) -> Outcome:
    """Collect and evaluate one exercise; every problem becomes an :class:`Outcome`."""
    try:
        got, inputs = collect(ex, namespace, rng)
    except AnswerError as err:
        return spec.outcome_for_error(ex, err)
    return spec.evaluate(ex, got, inputs)


_observer: Callable[[Exercise, Mapping[str, Any]], None] | None = None  # set by the grader's runner


def check(exercise_id: str, namespace: Mapping[str, Any] | None = None) -> None:
    """Check one exercise and print a one-line verdict (✅ / ❌ / ⏳) with what to change."""
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    try:
        ex = spec.get(exercise_id)
    except KeyError as err:
        print(f"⚠️ {err.args[0]}")
        return
    try:
        if _observer is not None:
            _observer(ex, namespace)
        outcome = judge(ex, namespace)
        if outcome.status == "fail" and ex.depends_on:
            behind = [d for d in ex.depends_on if judge(spec.get(d), namespace).status == "fail"]
            if behind:
                outcome.message += (
                    f" Note: {', '.join(behind)} is not passing yet, so this step starts from "
                    "wrong inputs; fix that one first."
                )
    except Exception as exc:  # a bug in helpers must not look like the student's fault
        print(f"⚠️ {exercise_id}: the check itself failed ({type(exc).__name__}: {exc}). Please report this.")
        return
    print(format_outcome(outcome))


def format_outcome(outcome: Outcome) -> str:
    """``✅ 01.qkv — …: correct.`` / ``❌ 01.qkv — not right yet (code): …`` / ``⏳ … not done yet: …``"""
    head = f"{_SYMBOL[outcome.status]} {outcome.exercise} — "
    if outcome.status == "pass":
        return head + outcome.message
    label = "not done yet" if outcome.status == "not_done" else "not right yet"
    if outcome.diagnosis:
        label += f" ({outcome.diagnosis})"
    return f"{head}{label}: {outcome.message}"
