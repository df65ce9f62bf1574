"""The exercise-spec model: one declaration per exercise, read by the checks and the grader.

An :class:`Exercise` says what the student produces (named values, or a function),
how its inputs are built, the reference computation and the wrong variants
(mistakes) that apply. :func:`evaluate` compares collected answers with the
reference and, when they differ, with each wrong variant computed on the same
inputs, so a wrong answer is *named* rather than just rejected.

Everything here is pure NumPy and never runs student code: the grader calls
:func:`evaluate` in its own trusted process on plain arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .convert import AnswerError, nonfinite_problem
from .mistakes import MISTAKES

__all__ = ["Exercise", "Outcome", "REGISTRY", "evaluate", "exercises_for", "get", "register"]

Arrays = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Exercise:
    """One gradable step of a notebook.

    kind ``"value"``: the student assigns the variables in ``answers``; ``inputs()``
    returns the notebook's fixed inputs and ``reference(**inputs)`` returns a dict
    ``{name: array}`` for every name in ``answers``.

    kind ``"function"``: the student defines the function ``answers[0]``; it is called
    positionally with ``inputs(rng)`` (``rng=None`` gives the notebook's own example,
    a generator gives fresh random inputs) and must return what ``reference``
    returns (one array).

    ``mistakes`` maps a code of :data:`helpers.mistakes.MISTAKES` to a wrong variant
    with the same signature and return type as ``reference``.
    """

    id: str
    notebook: str
    title: str
    answers: tuple[str, ...]
    inputs: Callable[..., dict[str, Any]]
    reference: Callable[..., Any]
    points: int = 1
    kind: str = "value"
    mistakes: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    framework: str | None = None  # "torch", "tensorflow" or "numpy" when the step is about that framework
    depends_on: tuple[str, ...] = ()
    rtol: float = 1e-4
    atol: float = 1e-6
    random_trials: int = 3
    hints: Mapping[str, str] = field(default_factory=dict)  # per-exercise wording of a mistake's hint
    float_required: bool = False  # the answer must have a floating dtype (e.g. before a softmax)

    def __post_init__(self) -> None:
        if self.kind not in ("value", "function"):
            raise ValueError(f"{self.id}: kind must be 'value' or 'function'")
        unknown = set(self.mistakes) - set(MISTAKES)
        if unknown:
            raise ValueError(f"{self.id}: unknown mistake codes {sorted(unknown)}")
        if self.kind == "function" and len(self.answers) != 1:
            raise ValueError(f"{self.id}: a function exercise names exactly one function")

    def hint(self, code: str) -> str:
        return self.hints.get(code, MISTAKES[code].hint)

    def expected(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Reference answers as ``{name: float64 array}`` for the given inputs."""
        return _as_named(self, self.reference(**inputs))

    def variant(self, code: str, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return _as_named(self, self.mistakes[code](**inputs))


def _as_named(ex: Exercise, out: Any) -> dict[str, np.ndarray]:
    if ex.kind == "function":
        return {ex.answers[0]: np.asarray(out, dtype=np.float64)}
    return {name: np.asarray(out[name], dtype=np.float64) for name in ex.answers if name in out}


@dataclass
class Outcome:
    """The verdict on one exercise: ``status`` is ``pass``, ``fail`` or ``not_done``."""

    exercise: str
    status: str
    points: float
    max_points: float
    message: str
    diagnosis: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.exercise,
            "points": self.points,
            "max_points": self.max_points,
            "passed": self.passed,
            "diagnosis": self.diagnosis,
            "message": self.message,
        }


REGISTRY: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    for ex in exercises:
        if ex.id in REGISTRY and REGISTRY[ex.id] is not ex:
            raise ValueError(f"exercise id {ex.id!r} is declared twice")
        REGISTRY[ex.id] = ex


def get(exercise_id: str) -> Exercise:
    _load_all()
    try:
        return REGISTRY[exercise_id]
    except KeyError:
        close = [k for k in REGISTRY if k.split(".")[0] == exercise_id.split(".")[0]]
        raise KeyError(
            f"There is no exercise {exercise_id!r}." + (f" This notebook has: {', '.join(close)}." if close else "")
        ) from None


def exercises_for(notebook: str) -> list[Exercise]:
    _load_all()
    return [ex for ex in REGISTRY.values() if ex.notebook == notebook]


def _load_all() -> None:
    from . import exercises  # noqa: F401  (registers every notebook's exercises)


# --------------------------------------------------------------------------- evaluation


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _first_difference(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
    idx = tuple(int(i) for i in np.argwhere(bad)[0]) if got.ndim else ()
    where = f"at index {idx}" if idx else "in its value"
    n_bad, n = int(bad.sum()), bad.size
    worst = float(np.max(np.abs(got - want)))
    return (
        f"first differs {where}: you have {_fmt(float(got[idx]))}, expected {_fmt(float(want[idx]))} "
        f"({n_bad} of {n} entries differ; largest difference {_fmt(worst)})."
    )


def _close(a: Arrays, b: Arrays, names: tuple[str, ...], rtol: float, atol: float) -> bool:
    """Same shapes and values; NaN matches NaN and inf matches an inf of the same sign."""
    for n in names:
        if n not in a or n not in b or a[n].shape != b[n].shape:
            return False
        if not np.allclose(a[n], b[n], rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True


def diagnose(ex: Exercise, got_by_trial: list[Arrays], inputs_by_trial: list[Mapping[str, Any]]) -> str | None:
    """Name the mistake whose wrong variant reproduces the answer on every trial.

    A variant that equals the reference on a trial's inputs cannot be told apart there
    and is not used for that trial; a variant that cannot be told apart on any trial is
    never reported. Returns ``None`` when no variant, or more than one, matches.
    """
    matches = []
    for code in ex.mistakes:
        informative = False
        ok = True
        for got, inputs in zip(got_by_trial, inputs_by_trial):
            try:
                wrong = ex.variant(code, inputs)
                right = ex.expected(inputs)
            except Exception:  # a variant undefined for these inputs (e.g. overflow) says nothing
                continue
            if _close(wrong, right, ex.answers, ex.rtol, ex.atol):
                continue
            informative = True
            if not _close(got, wrong, ex.answers, ex.rtol, ex.atol):
                ok = False
                break
        if ok and informative:
            matches.append(code)
    return matches[0] if len(matches) == 1 else None


def evaluate(ex: Exercise, got_by_trial: list[Arrays], inputs_by_trial: list[Mapping[str, Any]]) -> Outcome:
    """Compare converted answers (one dict of arrays per trial) with the reference."""
    fail_msg = None
    for got, inputs in zip(got_by_trial, inputs_by_trial):
        want = ex.expected(inputs)
        for name in ex.answers:
            g, w = got[name], want[name]
            label = f"`{name}`" if ex.kind == "value" else f"`{name}(...)`"
            problem = nonfinite_problem(g, label.strip("`"))
            # NaN/inf where the reference has none: a known mistake (e.g. an overflowing
            # softmax) may still explain it below
            if problem and not (g.shape == w.shape and np.array_equal(g, w, equal_nan=True)):
                fail_msg = problem.message
                break
            if g.shape != w.shape:
                fail_msg = _shape_message(ex, name, g, w, inputs)
                break
            if not np.allclose(g, w, rtol=ex.rtol, atol=ex.atol, equal_nan=True):
                trial = "" if ex.kind == "value" or inputs is inputs_by_trial[0] else " on random inputs"
                fail_msg = f"{label}{trial} " + _first_difference(g, w, ex.rtol, ex.atol)
                break
        if fail_msg:
            break
    if fail_msg is None:
        return Outcome(ex.id, "pass", ex.points, ex.points, f"{ex.title}: correct.")
    code = diagnose(ex, got_by_trial, inputs_by_trial)
    if code:
        return Outcome(ex.id, "fail", 0, ex.points, ex.hint(code), code)
    return Outcome(ex.id, "fail", 0, ex.points, fail_msg)


def _shape_message(ex: Exercise, name: str, g: np.ndarray, w: np.ndarray, inputs: Mapping[str, Any]) -> str:
    msg = f"`{name}` has shape {tuple(g.shape)}, expected {tuple(w.shape)}."
    if g.size == w.size:
        msg += " Same number of entries: check the order of your matrix product or a transpose."
    elif g.ndim < w.ndim:
        msg += " Did you sum or reduce over an axis you should keep?"
    elif g.ndim > w.ndim:
        msg += " Did you forget to sum, or add an extra axis?"
    return msg


def outcome_for_error(ex: Exercise, err: AnswerError) -> Outcome:
    status = "not_done" if err.kind == "not_done" else "fail"
    return Outcome(ex.id, status, 0, ex.points, err.message)
