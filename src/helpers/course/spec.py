"""The exercise-spec model: one declaration per exercise, read by the checks and the grader.

An :class:`Exercise` says what the student produces (named values, or a function), what the
step reads, how to make its inputs, the reference computation and the wrong variants
(mistakes) that apply. The same declaration serves three uses:

- **the notebook's own numbers** — ``inputs(None)``: for a value step, the values of the
  notebook names it reads (its *upstream*), as the notebook has them; for a function step, the
  notebook's example arguments;
- **fresh inputs** — ``inputs(rng)``: a new, consistent set of those names (or arguments), drawn
  by :func:`draw` so that the reference and every wrong variant differ from each other on every
  draw. Function steps are called on them; value steps have the student's own cell *replayed*
  on them (:mod:`helpers.runtime.collect`);
- **the student's own upstream** — the reference is a function of the names the step reads, so
  a step that is right on top of a wrong earlier answer is recognised (error carried forward).

:func:`make_plan` turns an exercise into a plain-data *plan* (what to gather, on which inputs);
the runtime turns the plan into a *record* next to the student's code; :func:`evaluate` compares
the record with the references — in the student's kernel, or in the grader's own process.
Everything here is NumPy and never runs student code.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..convert import AnswerError, nonfinite_problem
from .later_names import CELL_BINDS, GIVEN_LINES, LATER_NAMES
from .mistakes import MISTAKES
from .reference import projected_scores

__all__ = ["Exercise", "Outcome", "Plan", "Probe", "REGISTRY", "RowBudget", "behind_note", "draw", "evaluate",
           "exercises_for", "get", "make_plan", "producer", "register"]

Arrays = Mapping[str, np.ndarray]
SEPARATION = 10  # variants must differ by this many times the tolerance on every fresh draw
TYPED_IN = 1e-3  # how close numbers copied from a printout (4 decimals) come to the notebook's
MAX_DRAWS = 200
# A float32 computation's error, counted at its inputs: a few units in the last place of float32 (PyTorch and
# TensorFlow steps get float32 tensors) or of float64 (NumPy steps keep float64). Some wrong variants are
# ill-conditioned on some draws (a sum-normalisation whose row of scores sums to almost 0): there, a student's
# float32 code with that mistake misses the float64 variant by its rounding alone. When no variant matches
# at the tolerance, :func:`diagnose` looks again, allowing each variant the change such an error makes in it.
ROUNDING_ULPS = 16


@dataclass(frozen=True)
class Probe:
    """A measurement of *how* a function works, on inputs of its own (a process check).

    ``kind`` is ``"peak_memory"`` (the extra bytes NumPy allocates during the call, traced by
    :mod:`tracemalloc`, must stay at most ``limit(inputs)``) or ``"one_pass"`` (the argument
    ``stream`` is handed over as a stream that can be read once, and at most ``limit(inputs)`` of
    its scores may be kept at the same time). ``code`` names the mistake when a limit is exceeded.

    For a value step with a ``module``, kind ``"module_dropout"``: the module is called on ``inputs``
    (many copies of one batch) in evaluation mode and in training mode without a dropout draw of
    the caller's, so that its own draws show (they must change the output and average to the
    evaluation output); with ``buffer``, it is called once more in evaluation mode with that buffer
    zeroed, which must change the output (a forward that builds the mask again never reads it).
    Kind ``"module_init"``: a new module of the same class is made with ``inputs`` as keyword arguments;
    each of its parameters of shape (d_model, d_model) must start random (not constant), with a spread
    (standard deviation) between half of ``limit(inputs)`` and 1.25 times it.
    Kind ``"module_drops"``: a new module of the same class is made with ``inputs["make"]`` as keyword arguments (a
    dropout above 0) and called twice in training mode on ``inputs["on"]``: the outputs must differ (it draws).
    Kind ``"module_grad"``: the module is called on ``inputs`` with gradients on; its output must reach every
    trainable parameter (no ``.detach()`` inside).
    Kind ``"train_step"``: the step's function (``functions[0]``) runs on a stand-in table of scores
    (``inputs``: ``table``, ``tokens``, ``lr``) with an optimizer that counts its steps: it must use that
    optimizer, train in training mode and leave torch's generator alone.
    Kind ``"module_guesses"``: the module's own guesses (argmax over its last axis) on each trial's ``inputs["on"]``,
    and how the history says it was made and trained (``inputs["trained"]``: the name the training cell binds,
    the function it trains with). ``own(guesses)`` gives the answers a right cell makes from those guesses: when
    the answers are exactly those and still wrong, the step's own code is right and the module is not.
    """

    kind: str
    inputs: Callable[[np.random.Generator], dict[str, Any]]
    limit: Callable[[Mapping[str, Any]], float]
    code: str
    stream: str | None = None
    buffer: str | None = None
    own: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None


@dataclass(frozen=True)
class RowBudget:
    """A value step's process check: when the cell is replayed, the rows multiplied by the weight ``name``
    (``x @ name``, ``torch.matmul(x, name)``, on PyTorch tensors) add up to at most ``limit(world)``;
    ``code`` names the mistake when they do not (e.g. a decoder that projects the whole prefix again at
    every step instead of keeping a cache). With ``first``, the limit is on the rows of the first product
    alone (a decoder that projects every token before its loop starts with a product of all n rows). With
    ``sizes``, the rows of each product in order are judged instead: ``sizes(rows, world)`` is a note naming
    what is wrong (e.g. a decoder fed a few tokens at a time), or None. A product the count does not follow is
    missed, never invented."""

    name: str
    limit: Callable[[Mapping[str, Any]], float]
    code: str
    first: bool = False
    sizes: Callable[[Sequence[int], Mapping[str, Any]], str | None] | None = None


# how close a step that asks for float64 must come, besides its own tolerance (which also judges the wrong variants,
# some of them made from float32 tensors): right float64 code agrees to ~1e-15; numbers that went through float32
# on the way, or were rounded to 6 decimals, do not
FLOAT64_RTOL, FLOAT64_ATOL = 1e-9, 1e-12


@dataclass(frozen=True)
class Exercise:
    """One gradable step of a notebook.

    kind ``"value"``: the student's cell binds the variables in ``answers``. ``inputs(rng)``
    returns the notebook names upstream of the step (``rng=None``: as the notebook has them) and
    ``reference(**inputs)`` returns ``{name: array}`` for every answer. ``reads`` are the names
    the reference uses (recorded from the student's namespace for carried-forward credit).

    kind ``"function"``: the student defines the function ``answers[0]``; it is called
    positionally with ``inputs(rng)`` and must return what ``reference(**inputs)`` returns.

    ``mistakes`` maps a code of :data:`helpers.course.mistakes.MISTAKES` to a wrong variant with
    the reference's signature. ``dtype`` (``"float"``, ``"float32"``, ``"float64"`` or ``"int32"``) is
    what the TO-DO asks for; ``module`` names an ``nn.Module`` whose ``trainable`` parameters must be
    trainable (for a function step with ``keeps_grad``: a module the cell makes, whose output must keep
    its gradient to the module's parameters); ``probes`` check how a function works.
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
    reads: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()  # function steps that call other function steps
    rtol: float = 1e-4
    atol: float = 1e-6
    random_trials: int = 3  # function steps: fresh inputs besides the notebook's example
    replays: int = 2  # value steps: fresh inputs the student's cell is replayed on (0: none)
    # per-exercise wording of a mistake's hint; "not_as_asked:<feature>" words it for one feature of ``how``
    # (or "not_as_asked:not_with" for the names of ``not_with`` it uses, put where it says {names}), where a
    # step asks for more than one
    hints: Mapping[str, str] = field(default_factory=dict)
    dtype: str | None = None
    module: str | None = None
    trainable: int = 0
    # value steps with a module whose TO-DO names every weight it has (SelfAttentionV1's three, the four of 06's
    # module): more trainable tensors than ``trainable`` make another, larger model (biases, say), whatever the
    # outputs at the start
    exact_trainable: bool = False
    # value steps with a ``module``: the names its parameters must have, no more and no fewer (the TO-DO names them)
    parameters: tuple[str, ...] = ()
    # steps with a ``module`` made of nn.Linear layers whose text promises their own start (02.sa_v2: uniform within
    # ±1/√in_features, centred on 0): these layers' weights, as the module holds them, must look like that draw
    default_init: tuple[str, ...] = ()
    # steps with a ``module`` whose own dropout draws the notebook repeats with torch.manual_seed (notebook 10 seeds
    # them, `torch.manual_seed(3)  # the dropout draws`): a draw from another generator is wrong there
    torch_seeded: bool = False
    probes: tuple[Probe, ...] = ()
    # one more trial (a value step: one more replay), a fresh draw cut to edge sizes (one query, a width of 1),
    # where the variants need not differ; it catches code right only while every axis is longer than 1 (a
    # final squeeze), or moved to an edge of its values (scores near float64's lowest, a size above 2**32)
    # (a function step may have several: a tuple of them, one trial each)
    edge: Callable[[dict[str, Any]], dict[str, Any]] | tuple[Callable[[dict[str, Any]], dict[str, Any]], ...] | None \
        = None
    # value steps whose line starts from a name the same cell computes, not one it is handed (01's TensorFlow half:
    # the outputs from the weights of the line above): those names, and the step's reference from them; a replay
    # whose answer is right from what the replay itself computed there is the step's line right on a wrong input
    cell_reads: tuple[str, ...] = ()
    cell_reference: Callable[..., Any] | None = None
    # function steps whose TO-DO promises any d_k and d_v: the arguments whose last axes are the keys' width and the
    # values' (("k", "v"), ("w_key", "w_value")); some trial has the values wider than the keys, and some narrower,
    # so that an output cut to (or padded to) d_k columns shows
    widths: tuple[str, str] | None = None
    # value steps whose TO-DO is a function that the cell calls (``train_step``): one that uses a model of the
    # notebook's globals instead of the one it is given is named, although the cell hands it that very model
    functions: tuple[str, ...] = ()
    # value steps whose ``module`` must be in evaluation mode: wrong answers from a module left in training mode
    # are named (dropout_in_eval)
    in_eval: bool = False
    # value steps with a ``module``: from one replay's inputs, the arguments of the module's call on them, of one more
    # call of the module that replay made (in evaluation mode, after the cell's own calls) and the output a forward
    # that computes every call from its own inputs gives there; another output, or an error where the first call
    # works, is a forward that keeps something from an earlier call (a padding mask or a length stored on `self`)
    again: Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any], np.ndarray]] | None = None
    # value steps: names the cell must use to compute its answer (e.g. the trained ``model`` whose
    # guesses are asked for); a cell that never mentions one is not doing the step, whatever it gives
    computed_with: tuple[str, ...] = ()
    not_with: tuple[str, ...] = ()  # value steps: names the cell must not use (e.g. ``tf`` in a NumPy cross-check)
    # value steps about the how: {"loop": True} asks for a Python loop, {"loop": False} for none,
    # {"matmul": False} for no matrix product, {"indexed_result": False} for no ``f(x)[perm]``,
    # {"typed_numbers": False} for no array typed in by hand (read from
    # the cell's code, not its numbers)
    how: Mapping[str, bool] = field(default_factory=dict)
    # value steps that ask for a prediction: "shape" (a tuple of sizes; messages talk in shapes, on the
    # sizes of each trial) or "axis" (one integer; a negative axis counts from the right of a tensor of
    # ``ndim`` axes)
    predicts: str | None = None
    ndim: int = 0
    # value steps that ask for "a single number": a plain Python number (``.item()``, ``float(...)``) is as
    # good as a 0-d tensor of the exercise's framework
    plain_number: bool = False
    numbers: bool = False  # value steps: a list whose entries must be Python (or NumPy) numbers, not tensors
    # torch steps whose result must stay differentiable: a value step's answers (a trainable module's output),
    # a function step's result when its float inputs require a gradient (no .detach(), no torch.no_grad())
    # (a tuple of argument names: those inputs only, e.g. not a fixed encoding handed in next to the weights)
    keeps_grad: bool | tuple[str, ...] = False
    # function steps: the reference written in the step's framework, differentiable: the right answer the tests
    # play in that framework (its gradient is judged, which a NumPy reference wrapped in a tensor has not)
    native: Callable[..., Any] | None = None
    # function steps: a call that raised an error whose text ("Type: message", with the student's line)
    # matches the regular expression is that mistake (e.g. an OverflowError from exp(s - m) with s > m)
    raises: Mapping[str, str] = field(default_factory=dict)
    budgets: tuple[RowBudget, ...] = ()  # value steps: rows multiplied by a weight in a replay (see RowBudget)
    # (regex, sentence): said after the error when the cell (or the function) raised with a message that
    # matches, e.g. a size mismatch whose size is that of a buffer the step asks to cut to the sequence; with a
    # third entry (names), only when the function's own code calls one of those names (e.g. ``max``). The sentence
    # may instead be a function of (the error's text, the inputs it raised on or None, the code features of the
    # function's own definition) that returns a sentence or None: said only when the code or the sizes suggest
    # that cause.
    raised_hints: tuple[tuple[Any, ...], ...] = ()
    # value steps with a module: what the module itself calls each notebook name it is given (``p_drop`` →
    # "`self.dropout`, …"), for a module that uses a notebook value typed in instead
    given_as: Mapping[str, str] = field(default_factory=dict)
    # function steps: mistakes told by a property of the wrong answer rather than by a variant's numbers (a number
    # the student chose shows in the answer, e.g. a running maximum stuck at the finite start typed in): code →
    # test(answer, inputs). Named when no variant matches and the test holds on every trial the answer is wrong on.
    signs: Mapping[str, Callable[[Arrays, Mapping[str, Any]], bool]] = field(default_factory=dict)
    # mistakes told from all the trials at once, each with a message of its own (what was found: which size of the
    # inputs the scale matches): code → explain(exercise, trials, record) → the message, or None when the answers
    # are not that mistake. Tried when no variant (nor sign) matches; ``trials`` are (answers, inputs), the
    # notebook's first.
    explains: Mapping[str, Callable[..., str | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("value", "function"):
            raise ValueError(f"{self.id}: kind must be 'value' or 'function'")
        unknown = ({code_of(m) for m in (*self.mistakes, *self.signs)} | {h.split(":")[0] for h in self.hints}
                   | set(self.raises.values()) | {code_of(b.code) for b in self.budgets}
                   | set(self.explains)) - set(MISTAKES)
        if unknown:
            raise ValueError(f"{self.id}: unknown mistake codes {sorted(unknown)}")
        if self.kind == "function" and len(self.answers) != 1:
            raise ValueError(f"{self.id}: a function exercise names exactly one function")
        if self.dtype not in (None, "float", "float32", "float64", "int32"):
            raise ValueError(f"{self.id}: dtype must be None, 'float', 'float32', 'float64' or 'int32'")
        if self.predicts not in (None, "shape", "axis") or (self.predicts == "axis") != (self.ndim > 0):
            raise ValueError(f"{self.id}: predicts must be None, 'shape' or 'axis' (an axis with its ndim)")

    def hint(self, code: str) -> str:
        return self.hints.get(code, self.hints.get(code_of(code), MISTAKES[code_of(code)].hint))

    def expected(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Reference answers as ``{name: float64 array}`` for the given inputs (a copy: a verdict asks for one
        trial's several times, and a long trial's reference is worth keeping for the last few)."""
        return _kept_answers(self, "", inputs, self.reference)

    def variant(self, code: str, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """A wrong variant's answers (kept, as the reference's: the draw that separates the variants computes
        them, and the diagnosis on that same trial asks again)."""
        return _kept_answers(self, code, inputs, self.mistakes[code])


# the last answers computed by a reference or a wrong variant: (exercise, code, inputs) -> (that exercise, those
# inputs, their values, the answers, the bytes they hold); the objects are kept, so an id is never another object's
# while its entry lives
_KEPT: dict[tuple[int, str, int], tuple[Any, Mapping[str, Any], tuple[Any, ...], dict[str, np.ndarray], int]] = {}
_KEPT_BYTES = [0]
_KEPT_LOCK = threading.Lock()
KEPT_LIMIT = 64 * 2**20  # bytes of answers and inputs kept at most (counted per entry)


def _nbytes(values: tuple[Any, ...], answers: dict[str, Any]) -> int:
    return sum(int(getattr(a, "nbytes", 0)) for a in (*values, *answers.values()))


def _kept_answers(ex: Exercise, code: str, inputs: Mapping[str, Any], compute: Callable[..., Any]) -> dict[str, Any]:
    """``compute(**inputs)`` as named answers, computed once for these very inputs while they stay among the last
    ones asked for (a copy every time: a caller may change what it is handed)."""
    key, values = (id(ex), code, id(inputs)), tuple(inputs.values())
    with _KEPT_LOCK:  # (the grader judges submissions in several threads: the memory is shared)
        kept = _KEPT.get(key)
    if kept is None or kept[0] is not ex or kept[1] is not inputs or len(kept[2]) != len(values) \
            or any(a is not b for a, b in zip(kept[2], values)):  # (the same dict holding other values)
        with np.errstate(all="ignore"):  # a wrong variant may well overflow: that is the point of some
            answers = _as_named(ex, compute(**inputs))
        kept = (ex, inputs, values, answers, _nbytes(values, answers))
        with _KEPT_LOCK:
            if (old := _KEPT.pop(key, None)) is not None:
                _KEPT_BYTES[0] -= old[4]
            _KEPT[key] = kept
            _KEPT_BYTES[0] += kept[4]
            while (_KEPT_BYTES[0] > KEPT_LIMIT or len(_KEPT) > 2048) and len(_KEPT) > 1:
                _KEPT_BYTES[0] -= _KEPT.pop(next(iter(_KEPT)))[4]
    return {k: v.copy() for k, v in kept[3].items()}


def code_of(key: str) -> str:
    """The catalogue code of a key of :attr:`Exercise.mistakes` or :attr:`Exercise.signs`: a key may be
    ``"code:detail"``, one of several variants of one mistake (the keys made with w_value, the values with w_key),
    each with a hint of its own under that key; the verdict names ``code``."""
    return key.split(":")[0]


def _as_named(ex: Exercise, out: Any) -> dict[str, np.ndarray]:
    if ex.kind == "function":
        return {ex.answers[0]: np.asarray(out, dtype=np.float64)}
    return {name: np.asarray(out[name], dtype=np.float64) for name in ex.answers if name in out}


@dataclass
class Outcome:
    """The verdict on one exercise.

    ``status`` is ``pass``, ``fail``, ``not_done`` or ``carried`` (the step's own code is right,
    but it starts from an earlier answer that is not: error carried forward).
    """

    exercise: str
    status: str
    points: float
    max_points: float
    message: str
    diagnosis: str | None = None
    carried_from: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.exercise,
            "status": self.status,
            "points": self.points,
            "max_points": self.max_points,
            "passed": self.passed,
            "carried_forward": self.status == "carried",
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


def owner(ex: Exercise, name: str) -> Exercise | None:
    """The value exercise of the same notebook and framework, before or after ``ex``, whose answer is ``name``."""
    _load_all()
    return next((o for o in REGISTRY.values() if o is not ex and o.notebook == ex.notebook and o.kind == "value"
                 and name in o.answers and o.framework in (ex.framework, None)), None)


def _raised_on_other_step(ex: Exercise, replay_error: Mapping[str, Any]) -> str | None:
    """Run again on other inputs, the cell raised on a line that makes another step's answer (one cell, several
    steps): that line, not this step's, is what to fix, and this step's line was not judged there."""
    binds = [n for n in replay_error.get("binds") or () if n not in ex.answers]
    if not binds or set(replay_error.get("binds") or ()) & set(ex.answers):
        return None
    owners = [(n, o) for n in binds if (o := owner(ex, n)) is not None]
    if not owners:
        # a helper line (`row_max = …`): it belongs to the first step whose answer the cell makes from it
        made = None
        for n in replay_error.get("feeds") or ():
            if n in ex.answers:
                return None  # this step's own: what raised is this step's to fix
            if (o := owner(ex, n)) is not None:
                made = (n, o)
                break
        if made is None:
            return None
        name, other = made
        return (f"Right on this notebook's numbers, but run again on other inputs, your cell raised "
                f"{replay_error.get('message', '')}, on the line that makes `{binds[0]}`, from which the cell makes "
                f"`{name}` ({other.id}): not this step's line, so this step could not be judged there. Fix that step "
                "first (its own check says more), then run the cell again.")
    name, other = owners[0]
    return (f"Right on this notebook's numbers, but run again on other inputs, your cell raised "
            f"{replay_error.get('message', '')}, on the line that makes `{name}` ({other.id}), not on this step's "
            "line, so this step could not be judged there. Fix that line first (its own check says more), then run "
            "the cell again.")


def producer(ex: Exercise, name: str) -> Exercise | None:
    """The exercise of the same notebook, declared before ``ex``, whose answer is ``name``."""
    _load_all()
    found = None
    for other in REGISTRY.values():
        if other is ex:
            return found
        if other.notebook == ex.notebook and other.kind == "value" and name in other.answers \
                and other.framework in (ex.framework, None):  # None: plain data (a predicted axis), any framework
            found = other
    return found


def _load_all() -> None:
    from . import exercises  # noqa: F401  (registers every notebook's exercises)


# --------------------------------------------------------------------------- fresh inputs


def _close(a: Arrays, b: Arrays, names: Sequence[str], rtol: float, atol: float,
           slack: Mapping[str, np.ndarray] | None = None) -> bool:
    """Same shapes and values; NaN matches NaN and inf matches an inf of the same sign. ``slack``: a further
    absolute tolerance per entry (twice a variant's own rounding sensitivity, :func:`_slack`)."""
    for n in names:
        if n not in a or n not in b or a[n].shape != b[n].shape:
            return False
        tol = atol + 2 * slack[n] if slack is not None and n in slack else atol
        if not _allclose(a[n], b[n], rtol, tol):
            return False
    return True


_MASKED_NOTEBOOKS = ("06", "07", "09", "10")  # the notebooks whose steps hide keys with masks


def _allclose(a: np.ndarray, b: np.ndarray, rtol: float, atol: Any) -> bool:
    """``np.allclose(a, b, rtol, atol, equal_nan=True)`` for arrays of one shape, without its generality (the draws
    compare every pair of variants: this is where a check spends most of its time)."""
    with np.errstate(invalid="ignore", over="ignore"):
        ok = (np.abs(a - b) <= atol + rtol * np.abs(b)) & np.isfinite(b)
        if ok.all():
            return True
        # inf matches an inf of the same sign (inf - inf is NaN above), NaN matches NaN
        return bool((ok | (a == b) | (np.isnan(a) & np.isnan(b))).all())


# per exercise, the pairs of outputs (the reference "" or a variant's key) that last could not be told apart on a
# draw, the latest first: the next draw tries those pairs first (a draw that fails, fails mostly on one of a few pairs,
# which depend on its sizes: √d_k cut to a whole number equals √d_k where d_k is 4, and 1 where it is 3; the outcome
# is the same, sooner)
_CLASHED: dict[str, list[tuple[str, str]]] = {}
_CLASHES_KEPT = 8
_SEPARATE_ERRORS = (ArithmeticError, ValueError, IndexError, KeyError, TypeError)


def _clashes_again(ex: Exercise, inputs: Mapping[str, Any], rtol: float, atol: float) -> bool:
    """Are two outputs that lately clashed on a draw of this exercise alike on these inputs too?"""
    for pair in list(_CLASHED.get(ex.id, ())):
        try:
            a, b = (_flat(ex.expected(inputs) if key == "" else ex.variant(key, inputs), ex.answers) for key in pair)
        except _SEPARATE_ERRORS:
            continue
        if a[0] is not None and a[0] == b[0] and _close_to_any(b[1], [a[1]], rtol, atol):
            return True
    return False


def _remember_clash(ex: Exercise, pair: tuple[str, str]) -> None:
    pairs = [pair, *(p for p in _CLASHED.get(ex.id, ()) if p != pair)]
    _CLASHED[ex.id] = pairs[:_CLASHES_KEPT]


def separates(ex: Exercise, inputs: Mapping[str, Any]) -> bool:
    """Do the reference and every wrong variant differ from each other on these inputs (well beyond
    the tolerance)? For a value step (not an axis), the reference must also differ from the notebook's own
    answer, so that a hard-coded answer cannot pass a replay."""
    rtol, atol = ex.rtol * SEPARATION, ex.atol * SEPARATION
    errors = _SEPARATE_ERRORS
    if _clashes_again(ex, inputs, rtol, atol):
        return False
    try:
        outs = [ex.expected(inputs)]
        if ex.kind == "value" and ex.predicts != "axis":  # an axis is the same for every size: typed in is right
            outs.append(ex.expected(ex.inputs(None)))
            if _close(outs[0], outs[1], ex.answers, rtol, atol):
                return False
    except errors:
        return False
    # the outputs so far, flat, by the shapes of their answers, with the catalogue code each one names ("" for
    # the reference and the notebook's answer): two forms of one mistake (`code:float32`) may agree on ordinary inputs
    # (with the key each came from: "" the reference, None the notebook's answer)
    seen: dict[tuple, list[tuple[str, np.ndarray, str | None]]] = {}
    for out, key in zip(outs, ("", None)):
        shapes, flat = _flat(out, ex.answers)
        seen.setdefault(shapes, []).append(("", flat, key))
    for code in ex.mistakes:
        try:
            wrong = ex.variant(code, inputs)
        except errors:  # undefined for these sizes (a product of non-square matrices): the student's cell raises
            continue    # too, and the check names the mistake from the notebook's own numbers (see diagnose)
        shapes, flat = _flat(wrong, ex.answers)
        others = [(f, k) for c, f, k in seen.get(shapes, []) if c != code_of(code)] if shapes is not None else []
        if others and _close_to_any(flat, [f for f, _ in others], rtol, atol):
            alike = next((k for f, k in others if _close_to_any(flat, [f], rtol, atol)), None)
            if alike is not None:
                _remember_clash(ex, (alike, code))
            return False
        seen.setdefault(shapes, []).append((code_of(code), flat, code))
    return True


def _flat(out: Arrays, names: Sequence[str]) -> tuple[tuple | None, np.ndarray | None]:
    """An output's answers as one flat float vector, with the shapes they had (None when an answer is missing)."""
    try:
        arrays = [np.asarray(out[n], dtype=float) for n in names]
    except (KeyError, TypeError, ValueError):  # an answer missing, or not numbers: compared with nothing
        return None, None
    return tuple(a.shape for a in arrays), np.concatenate([a.ravel() for a in arrays])


def _close_to_any(new: np.ndarray, outs: Sequence[np.ndarray], rtol: float, atol: float) -> bool:
    """``new`` close to any of ``outs`` (flat vectors of the same length), entry by entry, compared with all of them
    at once (one array operation instead of one call per pair: the variants of an exercise are compared pairwise
    on every draw)."""
    with np.errstate(invalid="ignore", over="ignore"):
        others = np.stack(outs)
        ok = (np.abs(others - new) <= atol + rtol * np.abs(others)) & np.isfinite(others)
        if not np.isfinite(new).all():  # inf matches an inf of the same sign, NaN matches NaN
            ok |= (others == new) | (np.isnan(others) & np.isnan(new))
        return bool(ok.all(axis=1).any())


def one_row(rows: str, column: str | None = None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An :attr:`Exercise.edge`: the draw with one row of ``rows`` (one token, one query) and, with
    ``column``, one column of that argument (values of width 1)."""
    def cut(inputs: dict[str, Any]) -> dict[str, Any]:
        out = dict(inputs)
        out[rows] = np.asarray(out[rows])[..., :1, :]
        if column is not None:
            out[column] = np.asarray(out[column])[..., :1]
        return out

    return cut


def batch_of_one(*names: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An :attr:`Exercise.edge`: the draw with only the first entry of its batch (the leading axis of each of
    ``names`` cut to length 1): a result squeezed (`.squeeze()` drops every axis of length 1) loses its batch axis."""
    def cut(inputs: dict[str, Any]) -> dict[str, Any]:
        return {**inputs, **{n: np.asarray(inputs[n])[:1] for n in names}}

    return cut


def trial_size(inputs: Mapping[str, Any]) -> int:
    """How many numbers a trial's arrays hold (what a call on it costs, roughly)."""
    return sum(np.size(v) for v in inputs.values() if isinstance(v, np.ndarray))


def draw(ex: Exercise, rng: np.random.Generator) -> dict[str, Any]:
    """Fresh inputs on which the reference and every catalogued variant can be told apart."""
    for _ in range(MAX_DRAWS):
        inputs = ex.inputs(rng)
        if separates(ex, inputs):
            return inputs
    raise RuntimeError(f"{ex.id}: no draw of fresh inputs separates its wrong variants")


@dataclass
class Plan:
    """What to gather for one exercise (``data``: plain data for the runtime) and the inputs the
    verdict is computed on (``inputs[0]`` is the notebook's own; then one per fresh trial)."""

    data: dict[str, Any]
    inputs: list[dict[str, Any]]
    probe_inputs: list[dict[str, Any]]
    drawn: tuple[int, ...] = ()  # which of ``inputs`` are the random trials (the rest: the notebook's, the edges)
    # trials (by index in ``inputs``) whose right answer is not one number: an edge's ``accepts(answer, inputs)`` says
    # whether an answer that differs from the reference is right there too (10.accuracy's exact ties, which any
    # way of breaking them settles)
    accepts: dict[int, Callable[[Any, Mapping[str, Any]], bool]] = field(default_factory=dict)


def make_plan(ex: Exercise, rng: np.random.Generator | None = None, seeds: Sequence[int] | None = None) -> Plan:
    """Draw the fresh inputs (from ``seeds``, one generator each, as the grader does; else from
    ``rng``) and describe what the runtime must gather."""
    n = ex.replays if ex.kind == "value" else ex.random_trials
    if seeds is not None:
        rngs = [np.random.default_rng(int(s)) for s in seeds]
    else:
        rng = rng if rng is not None else np.random.default_rng()
        rngs = [rng] * n
    fresh = [draw(ex, r) for r in rngs]
    notebook = ex.inputs(None)
    if fresh:
        fresh = _varied_trials(ex, fresh, rngs, notebook)
    accepting: list[tuple[dict[str, Any], Callable[[Any, Mapping[str, Any]], bool]]] = []  # edges that accept more
    loud: list[dict[str, Any]] = []  # edges whose hidden scores are loud (see `loud_scores`)
    if ex.edge is not None and rngs:  # a function's extra trials, a value step's extra replay
        first = fresh[0] if fresh else None
        for edge in ex.edge if isinstance(ex.edge, tuple) else (ex.edge,):
            # an edge made from the first trial itself (its sizes mirrored, say), or from a draw of its own
            fresh.append(edge(first) if getattr(edge, "of_first_trial", False) and first is not None
                         else edge(ex.inputs(rngs[0])))
            if (accepts := getattr(edge, "accepts", None)) is not None:
                accepting.append((fresh[-1], accepts))
            if getattr(edge, "loud_scores", False):
                loud.append(fresh[-1])
    drawn = list(range(min(n, len(fresh))))
    if ex.kind == "function" and len(fresh) > n >= 1:
        # the last trial is the one a function is called on again (what it keeps between calls: a cache, an output
        # array it fills again): the smallest random trial, not a long edge
        small = min(range(n), key=lambda i: trial_size(fresh[i]))
        fresh.append(fresh.pop(small))
        drawn = [*range(n - 1), len(fresh) - 1]
    probe_rng = rngs[0] if rngs else np.random.default_rng(0)
    probe_inputs = [p.inputs(probe_rng) for p in ex.probes]
    data = {
        "id": ex.id,
        "kind": ex.kind,
        "answers": list(ex.answers),
        "framework": ex.framework,
        "trials": fresh if ex.kind == "value" else [notebook, *fresh],
        "reads": list(ex.reads) + [n for n in ex.cell_reads if n not in ex.reads],
        "computed_with": list(ex.computed_with),
        "not_with": list(ex.not_with),
        "how": dict(ex.how),
        "keeps_grad": ex.keeps_grad,
        # a function of float32 tensors (not a module's: its weights fix the dtype) hands float64 inputs back in
        # float64, as torch's and TensorFlow's own functions do
        "follows_dtype": ex.kind == "function" and ex.framework in ("torch", "tensorflow") and ex.dtype == "float32"
        and not ex.module,
        "functions": list(ex.functions),
        "count_rows": [b.name for b in ex.budgets],
        "later": list(LATER_NAMES.get(ex.id, ())) if ex.kind == "value" else [],
        "given": list(GIVEN_LINES.get(ex.id, ())) if ex.kind == "value" else [],
        # the lines the notebook gives in the other steps' cells (and not in this one's): a later cell that binds this
        # step's answer anew and holds one of them is another step's cell, not a new try at this one
        "others_given": sorted({line for other in exercises_for(ex.notebook) if other is not ex
                                for line in GIVEN_LINES.get(other.id, ())} - set(GIVEN_LINES.get(ex.id, ())))
        if ex.kind == "value" else [],
        "others": sorted({n for other in exercises_for(ex.notebook) for n in other.answers} - set(ex.answers)),
        # the answers of the steps above: a cell that binds one anew (to something that step would not accept)
        # undoes it
        "earlier": _earlier_answers(ex) if ex.kind == "value" else [],
        # predicted axes are the same for any inputs: a replay keeps the student's own (a cell may use it as `dim=`)
        "own": sorted({n for other in exercises_for(ex.notebook) if other.predicts == "axis"
                       for n in other.answers} - set(ex.answers)
                      # unless the step starts from it (reads it): then the replay hands it the right axis, and a
                      # wrong prediction used as the TO-DO asks is an earlier answer gone wrong (🟡)
                      - set(ex.reads)),
        "module": ex.module,
        "in_eval": ex.in_eval,
        "again": [dict(zip(("first", "then"), ex.again(w)[:2])) for w in fresh]
        if ex.again is not None and ex.kind == "value" else [],
        "probes": [{"kind": p.kind, "inputs": pi, "stream": p.stream, "buffer": p.buffer}
                   for p, pi in zip(ex.probes, probe_inputs)],
        # the trials (their indices in "trials") built so that a key the softmax must ignore scores far above the
        # ones it keeps: a gradient is taken on them first (a softmax written out whose hidden exponentials overflow
        # sends NaN back), whatever the other trials' largest entries
        "loud_trials": [i + (ex.kind != "value") for i, t in enumerate(fresh) if any(t is kept for kept in loud)],
    }
    accepts = {i + 1: fn for i, t in enumerate(fresh) for kept, fn in accepting if t is kept}
    return Plan(data, [notebook, *fresh], probe_inputs, tuple(i + 1 for i in drawn), accepts)


def _earlier_answers(ex: Exercise) -> list[str]:
    found: set[str] = set()
    for other in exercises_for(ex.notebook):
        if other is ex:
            break
        found |= set(other.answers)
    # the answers its own cell is meant to bind (the steps of one cell, as in 01's TensorFlow half) are its own
    return sorted(found - set(ex.answers) - set(CELL_BINDS.get(ex.id, ())))


VARIETY_PATIENCE = 40  # draws that bring no new variety before the trials are taken as they are
_VARIETY: dict[str, tuple[frozenset[Any], frozenset[Any]]] = {}


def _size_signs(trial: Mapping[str, Any], notebook: Mapping[str, Any]) -> Iterator[tuple[tuple[str, Any], int]]:
    """Each size of a trial — every axis of an array, every plain number — against the notebook's: (which, sign of
    the difference)."""
    for k, v in trial.items():
        ref = notebook.get(k)
        if isinstance(v, np.ndarray) and isinstance(ref, np.ndarray):
            for a in range(ref.ndim):
                n = v.shape[a] if v.ndim == ref.ndim else -1
                yield (k, a), int(n > ref.shape[a]) - int(n < ref.shape[a]) if n >= 0 else 2
        elif _scalar(v) and _scalar(ref):
            yield (k, "="), int(v > ref) - int(v < ref)
    # and the aspect of every matrix (or list of rows) among them: wider than tall in some trial, so that a slice of
    # its columns to the rows' count (`values[:, :len(x)]`, `keys[:, :n]`) cuts something
    for k, v in trial.items():
        if k in notebook and _PROJECTED.match(k) and len(shape := _shape_of(v)) == 2 and shape[1] > shape[0]:
            yield (k, "wide"), 1


# the inputs, projections and weight matrices of the first notebooks, whose rows and columns both change size
_PROJECTED = re.compile(r"^(?:x|queries|keys|values|w_(?:query|key|value))(?:_list|_np)?$")


def _shape_of(value: Any) -> tuple[int, ...]:
    """The shape of an array, or of a list of equal rows; () for anything else."""
    if isinstance(value, np.ndarray):
        return value.shape
    if isinstance(value, list) and value and all(isinstance(r, list) and len(r) == len(value[0]) for r in value):
        return (len(value), len(value[0]))
    return ()


def _width_signs(ex: Exercise, trial: Mapping[str, Any]) -> Iterator[tuple[str, int]]:
    """For an exercise with :attr:`Exercise.widths`: whether the trial's values are wider or narrower than its keys."""
    if ex.widths is None:
        return
    keys, values = (trial.get(n) for n in ex.widths)
    if isinstance(keys, np.ndarray) and isinstance(values, np.ndarray) and keys.shape[-1] != values.shape[-1]:
        yield ("widths", 1 if values.shape[-1] > keys.shape[-1] else -1)


def _scalar(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _variety(ex: Exercise) -> tuple[frozenset[Any], frozenset[Any]]:
    """The sizes this exercise's fresh inputs can take other than the notebook's, and those they can take larger
    (learned once, from a few draws of a generator of its own)."""
    if ex.id not in _VARIETY:
        notebook, rng = ex.inputs(None), np.random.default_rng(2026)
        if ex.kind == "value":  # the names the cell starts from, not everything upstream of it
            notebook = {k: v for k, v in notebook.items() if k in ex.reads}
        differ, larger = set(), set()
        for _ in range(16):
            trial = ex.inputs(rng)
            for key, sign in _size_signs(trial, notebook):
                if sign:
                    differ.add(key)
                if sign == 1:
                    larger.add(key)
            differ.update(_width_signs(ex, trial))
        _VARIETY[ex.id] = (frozenset(differ), frozenset(larger))
    return _VARIETY[ex.id]


def _reach(trials: Sequence[Mapping[str, Any]], notebook: Mapping[str, Any], ex: Exercise) -> int:
    differ, larger = _variety(ex)
    if ex.kind == "value":
        notebook = {k: v for k, v in notebook.items() if k in ex.reads}
    seen_differ, seen_larger = set(), set()
    for trial in trials:
        for key, sign in _size_signs(trial, notebook):
            if sign:
                seen_differ.add(key)
            if sign == 1:
                seen_larger.add(key)
        seen_differ.update(_width_signs(ex, trial))
    return len(seen_differ & differ) + len(seen_larger & larger)


def _varied_trials(ex: Exercise, fresh: list[dict[str, Any]], rngs: Sequence[np.random.Generator],
                   notebook: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Redraw trials until every size that can differ from the notebook's does in some trial, and every size
    that can be larger is larger in some trial (as far as :data:`VARIETY_PATIENCE` draws allow): an answer that
    types in the notebook's 2 heads, its p = 0.2 or a 5 × 5 mask must not pass because the draws happened to keep
    them."""
    differ, larger = _variety(ex)
    want = len(differ) + len(larger)
    reach, idle, attempt = _reach(fresh, notebook, ex), 0, 0
    while reach < want and idle < VARIETY_PATIENCE:
        k = attempt % len(fresh)
        attempt += 1
        candidate = ex.inputs(rngs[k])  # separated from the variants only if it brings something new
        trials = fresh[:k] + [candidate] + fresh[k + 1:]
        if (new := _reach(trials, notebook, ex)) > reach and separates(ex, candidate):
            fresh, reach, idle = trials, new, 0
        else:
            idle += 1
    return fresh


def seeds_needed(ex: Exercise) -> int:
    return ex.replays if ex.kind == "value" else ex.random_trials


# --------------------------------------------------------------------------- evaluation


def _fmt(v: float) -> str:
    return f"{v:.6g}"


def _distinct(got: float, want: float) -> tuple[str, str]:
    """Both numbers with as many digits as it takes to tell them apart (6 at least, 12 at most): an answer
    off in the 7th digit (rounded, say) does not read as "you have 5, expected 5"."""
    for digits in range(6, 13):
        a, b = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if a != b:
            return a, b
    return a, b


def _first_difference(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    with np.errstate(invalid="ignore", over="ignore"):
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if got.ndim else ()
        worst = float(np.nanmax(np.abs(got - want))) if np.isfinite(got - want).any() else float("nan")
    if got.size == 1 and not idx:
        return "differs: you have {}, expected {}.".format(*_distinct(float(got), float(want)))
    where = f"at index {idx}" if idx else "in its value"
    n_bad, n = int(bad.sum()), bad.size
    return (
        "first differs {}: you have {}, expected {} ".format(where, *_distinct(float(got[idx]), float(want[idx])))
        + f"({n_bad} of {n} entries differ; largest difference {_fmt(worst)})." + _clipped(got, want, rtol, atol)
    )


def _clipped(got: np.ndarray, want: np.ndarray, rtol: float, atol: float, weak: bool = False) -> str:
    """When ``got`` is ``want`` cut off at a bound (its own smallest or largest number, reached by two entries or
    more where the right numbers go past it) and right everywhere else: a sentence that says so. ``weak``: one
    entry past the bound is enough, and no right numbers between the bounds are needed (a trial that agrees with a
    clamp another trial shows)."""
    with np.errstate(invalid="ignore", over="ignore"):
        if got.size < 2 or got.shape != want.shape or not (np.isfinite(got).all() and np.isfinite(want).all()):
            return ""
        lo, hi = float(got.min()), float(got.max())
        inside = (got > lo + atol) & (got < hi - atol)  # right numbers between the bounds: evidence of a clamp
        # (or the two bounds of a symmetric clip, each reached by two entries or more whose right numbers go past it:
        # numbers so large that almost every one is cut)
        symmetric = lo < 0 < hi and np.isclose(lo, -hi) and all(
            int((np.isclose(got, b) & past).sum()) >= 2 for b, past in ((hi, want > hi + atol), (lo, want < lo - atol)))
        if (int(inside.sum()) < 2 and not weak and not symmetric) \
                or not np.allclose(got, np.clip(want, lo, hi), rtol=rtol, atol=atol):
            return ""
        cut = [b for b, past in ((hi, want > hi + atol), (lo, want < lo - atol))
               if int(past.sum()) >= 2 or (past.any() and (weak or int(np.isclose(got, b).sum()) >= 2))]
    if not cut:
        return ""
    # (above the upper bound, below the lower one: said as such)
    sides = [f"above {_fmt(b)}" if b == hi else f"below {_fmt(b)}" for b in cut]
    size = "large" if cut == [hi] else "small" if cut == [lo] else "large and that small"
    return (f" Your numbers never go {' or '.join(sides)} where the right ones do, and all the others are right: a "
            f"clamp, a clip or a ReLU in your code cuts them off. Take it out: the right numbers can be that {size}.")


def _cut_or_clamped(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]], note: str = "") -> Outcome | None:
    """A mistake the trials of many tokens or of large numbers show: on every trial where the answer is wrong, it is
    the right answer with its tokens cut at a count (its first or last k rows along the token axis: `x[:8]`, a
    "context window"), or the right answer clamped at a bound (``tokens_cut``, ``clamped``)."""
    if ex.predicts:
        return None
    cut, clamped, wrong, weak = [], [], 0, 0
    for got, inputs in trials:
        try:
            want = ex.expected(inputs)
        except Exception:  # noqa: BLE001 — a reference that cannot take those inputs
            return None
        for name in ex.answers:
            if name not in got or name not in want:
                continue
            try:
                g, w = np.asarray(got[name], dtype=np.float64), np.asarray(want[name], dtype=np.float64)
            except (TypeError, ValueError):
                return None
            if g.shape == w.shape and np.allclose(g, w, rtol=ex.rtol, atol=ex.atol, equal_nan=True):
                continue
            wrong += 1
            # (on a long trial only: on a short one, fewer rows come from many other mistakes, equal tokens merged)
            if g.ndim == w.ndim >= 1 and g.shape[1:] == w.shape[1:] and 0 < g.shape[0] < w.shape[0] >= 20:
                k = g.shape[0]
                if np.allclose(g, w[:k], rtol=ex.rtol, atol=ex.atol) or np.allclose(g, w[-k:], rtol=ex.rtol,
                                                                                    atol=ex.atol):
                    cut.append((k, w.shape[0]))
                    continue
            if g.ndim == w.ndim >= 2 and g.shape[:-2] == w.shape[:-2] and g.shape[-1] == w.shape[-1] \
                    and 0 < g.shape[-2] < w.shape[-2] >= 20:
                k = g.shape[-2]
                if np.allclose(g, w[..., :k, :], rtol=ex.rtol, atol=ex.atol) \
                        or np.allclose(g, w[..., -k:, :], rtol=ex.rtol, atol=ex.atol):
                    cut.append((k, w.shape[-2]))
                    continue
            if (said := _clipped(g, w, ex.rtol, ex.atol)) and g.shape == w.shape:
                clamped.append(said)
                continue
            if g.shape == w.shape and _clipped(g, w, ex.rtol, ex.atol, weak=True):
                weak += 1  # one entry at the bound: a clamp, if another trial shows it clearly
                continue
            return None
    if wrong and len(cut) == wrong:
        k, n = cut[0]
        return _fail(ex, "tokens_cut", f"Your result keeps only {k} of the {n} tokens of a longer sentence (the first "
                                       f"or the last {k} rows): a count typed in (`x[:{k}]`, a \"context window\") "
                                       "drops the others. Keep every token the inputs have.", note)
    if wrong and clamped and len(clamped) + weak == wrong:
        return _fail(ex, "clamped", clamped[0].strip(), note)
    return None


def _compare(ex: Exercise, got: Arrays, want: Arrays, trial: str = "", *, product: bool = True,
             inputs: Mapping[str, Any] | None = None) -> str | None:
    """None when ``got`` matches ``want``; otherwise what is wrong (the first name that differs).
    ``product``: whether the student's code has a matrix product to blame for a transpose; ``inputs``: the
    trial's inputs (a shape prediction is described on their sizes)."""
    if ex.predicts == "shape":
        return _compare_shape(ex, got, want, inputs or {})
    if ex.predicts == "axis":
        return _compare_axis(ex, got, want)
    for name in ex.answers:
        label = f"`{name}`" if ex.kind == "value" else f"`{name}(...)`"
        if name not in got:
            return f"{label} was not produced{trial}."
        g, w = got[name], want[name]
        problem = nonfinite_problem(g, label.strip("`"), masks=ex.notebook[:2] in _MASKED_NOTEBOOKS)
        # NaN or inf where the reference has them too (a step right on NaN input): not this step's problem
        if problem and not (g.shape == w.shape and _allclose(g, w, ex.rtol, ex.atol)):
            return _beyond_float32(label, g, w) or problem.message
        if g.shape != w.shape:
            return shape_message(label, g, w, product)
        with np.errstate(invalid="ignore", over="ignore"):
            ok = np.allclose(g, w, rtol=ex.rtol, atol=ex.atol, equal_nan=True)
            transposed = g.ndim == 2 and g.shape[0] == g.shape[1] and \
                np.allclose(g.T, w, rtol=ex.rtol, atol=ex.atol, equal_nan=True)
        if not ok and transposed:
            how = "check the order of a matrix product, or a `.T` too many (or too few)" if product else \
                "a `.T` (or a transpose) too many, or too few?"
            return f"{label}{trial} is the transpose of what it should be: {how}."
        if not ok:
            return f"{label}{trial} " + _first_difference(g, w, ex.rtol, ex.atol)
    return None


def _beyond_float32(label: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """Where ``got`` is inf and the right number is finite but beyond float32's range: a float32 on the way
    overflowed (not an exp)."""
    if got.shape != want.shape:
        return None
    with np.errstate(invalid="ignore"):
        where = np.isinf(got) & np.isfinite(want) & (np.abs(want) > np.finfo(np.float32).max)
    if not where.any():
        return None
    at = tuple(int(i) for i in np.argwhere(where)[0])
    return (f"{label} contains inf (first at index {at}) where the right number is {want[at]:.4g}, finite but beyond "
            "the largest float32 (about 3.4e38): a float32 (or float16) on the way overflows there. Keep the numbers "
            "in float64 (plain Python floats are float64).")


compare = _compare  # for the checks' carried-forward credit (helpers.checks)


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for s in shape if s != 1)


def _sizes(inputs: Mapping[str, Any]) -> str:
    """The sizes among a trial's inputs, as ``n = 5, d_model = 7`` (plain integers only)."""
    return ", ".join(f"{k} = {int(v)}" for k, v in inputs.items()
                     if isinstance(v, (int, np.integer)) and not isinstance(v, bool))


def _tuple(a: np.ndarray) -> str:
    vals = [f"{float(v):g}" for v in np.ravel(a)]
    return f"({vals[0]},)" if len(vals) == 1 else f"({', '.join(vals)})"


def _compare_shape(ex: Exercise, got: Arrays, want: Arrays, inputs: Mapping[str, Any]) -> str | None:
    """A predicted shape (a tuple of sizes) against the true one, in shapes."""
    name = ex.answers[0]
    g, w = got[name], want[name]
    if g.shape == w.shape and np.allclose(g, w, rtol=ex.rtol, atol=ex.atol):
        return None
    if g.ndim != 1:
        return (f"`{name}` should be a shape: one tuple of sizes, one per axis, like {_example_shape(ex)}"
                f"{', not one number' if g.ndim == 0 else ''}.")
    sizes = _sizes(inputs)
    where = f"With {sizes}, your" if sizes else "Your"
    if g.size != w.size:
        return f"{where} prediction gives {_tuple(g)}, {g.size} axes; the result has {w.size} axes."
    bad = [str(i) for i in np.flatnonzero(~np.isclose(g, w, rtol=ex.rtol, atol=ex.atol))]
    if len(bad) == 1:
        return f"{where} prediction gives {_tuple(g)}: axis {bad[0]} is not the size it should be."
    return f"{where} prediction gives {_tuple(g)}: axes {', '.join(bad[:-1])} and {bad[-1]} are not the sizes " \
           "they should be."


def _example_shape(ex: Exercise) -> str:
    return f"`({ex.reads[0]}, {ex.reads[1]})`" if len(ex.reads) >= 2 else "`(3, 4)`"


def _compare_axis(ex: Exercise, got: Arrays, want: Arrays) -> str | None:
    """A predicted axis (one integer; counted from the right when negative) against the right one."""
    name = ex.answers[0]
    g, w = got[name], want[name]
    if not _integral(g):
        return _axis_form(ex)
    a = round(float(g))
    if not -ex.ndim <= a < ex.ndim:
        return (f"There is no axis {a}: the tensor has {ex.ndim} axes, 0 to {ex.ndim - 1} counted from the left "
                f"(or -{ex.ndim} to -1 counted from the right).")
    if a % ex.ndim == round(float(w)):
        return None
    raw = round(float(raw)) if _integral(raw := np.asarray(getattr(g, "raw", g))) else a
    return f"`{name}` = {raw}{f' (axis {a})' if raw != a else ''} is not the axis the step asks for."


def _integral(a: np.ndarray) -> bool:
    """One whole number (up to float32 rounding)."""
    return a.shape == () and bool(np.isfinite(a)) and abs(float(a) - round(float(a))) < 1e-6


def _axis_form(ex: Exercise, what: str = "") -> str:
    return (f"`{ex.answers[0]}` {what + ', but it ' if what else ''}should be one axis: an integer such as 0 or 1 "
            "(or -1, counted from the right), not a tuple, a list or True/False.")


def _prediction_form(ex: Exercise, kind: str, message: str = "") -> str:
    """What a prediction must look like, for an answer that is not even numbers (``message``: the error's, which
    says whether the string is the answer or inside it)."""
    inside = "inside the list" in message
    if ex.predicts == "axis":
        return _axis_form(ex, ("holds a string" if inside else "is a string") if kind == "string" else "")
    what = ("a tuple of strings" if inside else "a string") if kind == "string" else "not a tuple of sizes"
    sizes = " with the size names defined above" if ex.reads else ""
    return (f"`{ex.answers[0]}` is {what}: write the shape as a tuple of numbers{sizes}, like "
            f"{_example_shape(ex)}{', without quotes' if kind == 'string' else ''}.")


def _as_axis(ex: Exercise, answers: Arrays) -> dict[str, np.ndarray]:
    """A negative axis as the same axis counted from the left (-1 is the last of ``ex.ndim``)."""
    out = dict(answers)
    for name, a in answers.items():
        if _integral(a) and -ex.ndim <= round(float(a)) < 0:
            out[name] = _Axis(float(round(float(a)) + ex.ndim))
            out[name].raw = round(float(a))  # as written, for the messages
    return out


class _Axis(np.ndarray):
    """A predicted axis counted from the left, which remembers how it was written (``raw``: -1)."""

    raw: int

    def __new__(cls, value: float) -> _Axis:
        return np.asarray(value).view(cls)


def shape_message(label: str, g: np.ndarray, w: np.ndarray, product: bool = True) -> str:
    """The shape mismatch, and what such a shape usually comes from (never asserted as the cause).
    ``product``: whether the code has a matrix product whose order could explain a transpose."""
    gs, ws = tuple(g.shape), tuple(w.shape)
    msg = f"{label} has shape {gs}, expected {ws}."
    if _squeezed(gs) == _squeezed(ws) and len(gs) != len(ws):  # an axis of length 1 more or fewer
        if len(gs) > len(ws):
            return msg + " It has an extra axis of length 1: rows that already had it stacked (torch.stack / " \
                         "np.stack of (1, d) pieces: concatenate them instead), a `[None]` or `unsqueeze` too many, " \
                         "or one `keepdim=True` / `keepdims=True` too many."
        if sum(n == 1 for n in ws) > 1 or (ws and ws[0] == 1 and len(ws) > len(gs)):
            lost = "an axis" if len(ws) - len(gs) == 1 else "axes"
            return msg + f" It lacks {lost} of length 1 (these inputs have one row, or a width of 1): a `squeeze()` " \
                         "removes every such axis, whatever the sizes are; or a `keepdim=True` / `keepdims=True` is " \
                         "missing. Return the shape the step gives for any sizes."
        return msg + " It lacks an axis of length 1: a `squeeze` too many, or a `keepdim=True` / `keepdims=True` " \
                     "missing? Keep it, or add it back (`[:, None]`, a reshape)."
    if g.size == w.size:
        if len(gs) == 2 and gs == ws[::-1]:
            with np.errstate(invalid="ignore"):
                numbers = bool(np.allclose(g.T, w, rtol=1e-4, atol=1e-6, equal_nan=True))
            if not numbers and 1 in gs:  # a row where a column is meant, holding other numbers
                return msg + " It has the transpose's shape but not its numbers: a column where a row is meant " \
                             "(a split, slice or index along the other axis?)."
            if not numbers:
                return msg + (" It has the transpose's shape but not its numbers: the factors of a matrix product "
                              "in the wrong order or transposed, a reshape where a transpose was meant, or an axis "
                              "mixed up?" if product else " It has the transpose's shape but not its numbers: a "
                              "reshape where a transpose was meant, or an axis mixed up?")
            return msg + (" It looks transposed: check the order of your matrix product, or a `.T`." if product
                          else " It looks transposed: a `.T` (or a transpose) too many, or too few?")
        if len(gs) == len(ws) - 1 and gs[1:] == ws[2:] and gs[0] == ws[0] * ws[1] and ws[0] > 1 \
                and np.allclose(g, w.reshape(gs), rtol=1e-4, atol=1e-5, equal_nan=True):  # (the right rows, merged)
            return msg + f" Its first axis holds the first two axes' {ws[0]} × {ws[1]} rows one after the other: " \
                         "the batch axis merged into the next one (a reshape, view or flatten to fewer axes, or a " \
                         "concatenation of the batch's results). Keep the batch axis: `reshape(-1, …)` loses it."
        if len(gs) != len(ws):
            return msg + " Same number of entries, but another number of axes: stacking (which adds an axis) " \
                         "where concatenating was meant, or the other way round?"
        if sorted(gs) == sorted(ws):
            return msg + " The same sizes with the axes in another order: look at which axes your transpose, " \
                         "permute, stack or reshape put where."
        return msg + " Same number of entries in another arrangement: check which axes you stacked, split or " \
                     "reshaped."
    if len(gs) == len(ws) + 1:
        return msg + " It has one axis too many: often a sum or a mean that is missing or leaves an axis (over " \
                     "the axis you multiplied along, or over only some of the axes), or an axis added by " \
                     "broadcasting."
    if len(gs) + 1 == len(ws):
        return msg + " It has one axis too few: often a sum or a reduction over an axis that should stay, or " \
                     "an axis (a batch, the heads) that went missing."
    if len(gs) == len(ws) and len(gs) >= 2 and gs[-1] != ws[-1] and gs[:-1] == ws[:-1]:
        return msg + f" Only the last axis differs: {gs[-1]} numbers per row where {ws[-1]} are expected. Which " \
                     "matrix, slice, sum or merge made that last axis?"
    return msg


_FRAMEWORK_NAMES = {"torch": "a PyTorch tensor", "tensorflow": "a TensorFlow tensor", "numpy": "a NumPy array",
                    "python": "a plain Python value"}
_OPS = {"torch": "torch", "tensorflow": "tf", "numpy": "NumPy"}
_DTYPE_HOW = {"torch": "dtype=torch.float32 (or .float())",
              "tensorflow": "dtype=tf.float32 (or tf.cast(…, tf.float32))",
              "numpy": "dtype=np.float32 (or .astype(np.float32))"}


def _fail(ex: Exercise, code: str, message: str | None = None, note: str = "") -> Outcome:
    return Outcome(ex.id, "fail", 0, ex.points, (message or ex.hint(code)) + note, code_of(code))


def _framework_problem(ex: Exercise, facts: Mapping[str, Any]) -> Outcome | None:
    if not ex.framework:
        return None
    if ex.framework == "numpy" and (matrix := [n for n, m in (facts.get("matrix") or {}).items() if m]):
        label = f"`{matrix[0]}`" if ex.kind == "value" else f"`{matrix[0]}(...)`"
        return _fail(ex, "wrong_framework",
                     f"{label} is an np.matrix, not an ordinary NumPy array: for a matrix `*` and `**` are matrix "
                     "products and every result stays two-dimensional, so the code built on it computes something "
                     "else. Return an array (np.asarray(...), and no np.matrix / np.asmatrix on the way).")
    for name, fw in (facts.get("framework") or {}).items():
        dtype = str((facts.get("dtype") or {}).get(name))
        if ex.framework == "python" and fw == "numpy" and ("int" in dtype or dtype in ("float64", "float")):
            continue  # a NumPy integer or float64 (np.prod's; a float as Python sees it) is a number too; a float32
            # one is not exact
        container = (facts.get("container") or {}).get(name)
        rows = container and str(container[0]) == "list" and (facts.get("items") or {}).get(name) in (
            "numpy", "torch", "tensorflow")
        if ex.kind == "value" and not ex.predicts and not ex.numbers and container and str(container[0]) == "tuple" \
                and container[1] == 1:  # (a shape predicted as `(n,)` is a tuple of one, and right)
            return _fail(ex, "wrong_framework", f"`{name}` is a tuple holding one value: a comma at the end of the "
                                                f"line that makes it (`{name} = … ,`) wraps the result in a tuple. "
                                                "Take the comma away.")
        if fw == "numpy" and ex.plain_number and ex.framework != "python":
            continue  # "a single number": a NumPy number (`.numpy()` of a 0-d tensor) is one, as a float is (its
            # shape and value are judged as any answer's)
        if fw == "python" and (ex.framework == "numpy" or ex.plain_number) and not (
                ex.framework == "numpy" and not ex.plain_number and rows):
            continue  # floats, lists of numbers and tuples are NumPy-friendly; a list of arrays (rows) is not
        if fw != ex.framework:
            label = f"`{name}`" if ex.kind == "value" else f"`{name}(...)` returns"
            verb = "is" if ex.kind == "value" else ""
            if container := (facts.get("container") or {}).get(name):
                text = f"{label} {verb} " + _container_text(ex, container, facts.get("items", {}).get(name))
                return _fail(ex, "wrong_framework", text.replace("  ", " "))
            got = _FRAMEWORK_NAMES.get(str(fw), "something else")
            steps = exercises_for(ex.notebook)
            later = next((o for o in steps[steps.index(ex) + 1:] if o.kind == "value" and o.framework == fw
                          and name in o.answers), None) if ex.kind == "value" and ex in steps else None
            if later is not None and (facts.get("replayed") or {}).get(name) == ex.framework:
                # the cell itself makes the right kind; 01's TensorFlow half gives Part 1's names TensorFlow tensors
                return _fail(ex, "wrong_framework",
                             f"`{name}` is {got} now: a later step of this notebook ({later.id}) gives the same "
                             f"name {got}, and your cell itself makes {_FRAMEWORK_NAMES[ex.framework]}. To check "
                             "this step again, run this part's cells again from its top (they make its tensors "
                             "again), then this check.")
            came = [n for n, f in (facts.get("inputs") or {}).items() if f == fw and n != name]
            if ex.kind == "value" and came:  # the cell's own operations are fine: an input it starts from is not
                which = ", ".join(f"`{n}`" for n in came)
                holds = "holds" if len(came) == 1 else "hold"
                return _fail(ex, "wrong_framework",
                             f"`{name}` is {got}: it starts from your {which}, which {holds} {got} now. This step "
                             f"is about {_FRAMEWORK_NAMES[ex.framework]}: run again the cell that makes {which} "
                             f"{_FRAMEWORK_NAMES[ex.framework]}, then this cell.")
            how = ("Return a plain Python number: an int (`.item()` or `int(...)` turns a tensor or a NumPy number "
                   "into one; a float32 cannot hold every whole number above 2**24)." if ex.framework == "python" else
                   f"Build it with {_OPS[ex.framework]} operations." if fw != "python" else
                   "Return the tensor itself: `.item()`, `float(...)` or `.tolist()` turn a tensor into plain Python "
                   "values, which no later step can differentiate or compute on as a tensor.")
            text = (f"{label} {verb} {got}; this step is about {_FRAMEWORK_NAMES[ex.framework]}. "
                    f"{how}").replace("  ", " ")
            return _fail(ex, "wrong_framework", text)
    return None


def _container_text(ex: Exercise, container: Sequence[Any], items: str | None) -> str:
    """What to say of a tuple or a list handed in where the step asks for one tensor (the rest of a sentence)."""
    kind, length = str(container[0]), int(container[1])
    what = _FRAMEWORK_NAMES[ex.framework or "numpy"]
    ops = {"torch": ("torch.stack", "torch.cat"), "tensorflow": ("tf.stack", "tf.concat"),
           "numpy": ("np.stack", "np.concatenate")}[ex.framework or "numpy"]
    if kind == "tuple" and length == 1:
        return (f"a tuple of one value; this step asks for {what}. A trailing comma (`return x,` or `= (x,)`) "
                "makes a tuple: leave it out.")
    if kind == "tuple":
        return (f"a tuple of {length} values; this step asks for {what}. Return (or assign) only the result the "
                "step names.")
    if items in ("torch", "tensorflow", "numpy"):
        return (f"a Python list of {length} {'arrays' if items == 'numpy' else 'tensors'}; this step asks for "
                f"{what}. Put the pieces together: {ops[1]} joins them along an axis they already have, {ops[0]} "
                "along a new one.")
    make = {"torch": "torch.tensor", "tensorflow": "tf.constant"}.get(ex.framework or "numpy", "np.array")
    return (f"a Python list of {length} values; this step asks for {what}. Keep the result as it is computed "
            f"(a `.tolist()` turns it into a list), or make the list one: {ops[0]} of its pieces, or "
            f"{make}(...) of plain numbers.")


def _items_problem(ex: Exercise, facts: Mapping[str, Any]) -> Outcome | None:
    if not ex.numbers:
        return None
    for name, fw in (facts.get("items") or {}).items():
        if fw in ("torch", "tensorflow"):
            kind = {"torch": "PyTorch", "tensorflow": "TensorFlow"}[fw]
            return _fail(ex, "not_a_number", f"The entries of `{name}` are {kind} tensors, not Python "
                                             "numbers: return `loss.item()`, a plain float to add up and plot "
                                             "(a tensor that is not detached also keeps its step's whole "
                                             "computation in memory).")
        if fw == "numpy0d":
            return _fail(ex, "not_a_number", f"The entries of `{name}` are NumPy arrays of no axis (what "
                                             "`.numpy()` makes of a 0-d tensor), not Python numbers: return "
                                             "`loss.item()`, a plain float.")
    return None


def _grad_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    if ex.kind == "function" and ex.module and (how := record.get("module_stateful")):  # before its gradient: a
        return _stateful_forward(ex, how)  # weight changed in place in forward misleads that test
    if ex.kind == "function" and ex.module and (frozen := record.get("module_frozen")):
        listed = ", ".join(f"`{n}`" for n in frozen)
        return _fail(ex, "not_trainable", f"`{ex.module}` has a frozen parameter: {listed} has requires_grad=False, so "
                                          "no optimizer can train it: a `requires_grad=False`, a `requires_grad_("
                                          "False)` or a `.detach_()` on it (in `forward` too, which runs it at every "
                                          "call). Leave requires_grad at its default (True).")
    if ex.kind == "function" and ex.module and (problem := _init_problem(ex, {"param_ranges":
                                                                              record.get("module_ranges")})):
        return problem
    if not ex.keeps_grad:
        return None
    if ex.kind == "function" and ex.module:  # the function runs a module: the module's output must keep it
        if isinstance(record.get("grad_inplace"), str):
            return _fail(ex, "in_place_breaks_backward",
                         f"`{ex.module}` gives the right numbers, but the gradient through its forward raises: an "
                         "in-place operation (`exp_`, `/=`, `masked_fill_`, `x[...] = …`) changed a tensor that "
                         "autograd had saved to compute the gradients (a softmax's output, say), so the module "
                         "cannot be trained. Write that step out of place (`w = w.masked_fill(mask, 0)`, `s = "
                         f"s.exp()`). (The gradient raised: {record['grad_inplace']})")
        if record.get("module_grad") is False:
            return _fail(ex, "gradient_cut", f"The output of `{ex.module}` is cut off from the module's own weights "
                                             "(all of them, or some): a "
                                             "`.detach()`, `torch.no_grad()` or a trip through NumPy in `forward`, so "
                                             "`loss.backward()` cannot reach its layers and training cannot change "
                                             "them. Keep every step of `forward` in torch operations; detach only to "
                                             "print.")
        return None
    if ex.kind == "function" and isinstance(record.get("grad_inplace"), str):
        # right numbers, but its gradient raises: an in-place change of a tensor autograd saved
        return _fail(ex, "in_place_breaks_backward",
                     f"`{ex.answers[0]}` gives the right numbers, but the gradient through it raises: an in-place "
                     "operation (`masked_fill_`, `*=`, `x[...] = …`) changed a tensor that autograd had saved to "
                     "compute the gradients (a softmax's output, say), so a model trained through it fails in "
                     "backward. Write that step out of place (`w = w.masked_fill(mask, 0)`). "
                     f"(The gradient raised: {record['grad_inplace']})")
    if ex.kind == "function" and isinstance(nan := record.get("nan_grad"), Mapping) and nan.get("inputs"):
        listed = ", ".join(f"`{n}`" for n in nan["inputs"])
        where = "the notebook's example" if not nan.get("trial") else f"random inputs ({nan.get('shapes')})"
        calls = record.get("calls")
        # (a function that selects nothing, where no select can be the cause: an inf reached some other way)
        selects = not isinstance(calls, list) or bool(set(calls) & _SELECTS)
        return _fail(ex, "nan_gradient",
                     f"`{ex.answers[0]}` gives the right numbers, but on {where} the gradient that flows back to "
                     f"{listed} is NaN (or inf), so one training step there would ruin the weights. "
                     + ("Often an exponential of every score, hidden ones too, that overflows (inf) before a select "
                        "(`where`, `.tril()`, a mask) removes it: the select sends 0 back, and 0 · inf is NaN. Hide "
                        "the scores before the exponential (fill them with −inf, then the softmax), so nothing "
                        "overflows." if selects else
                        "Somewhere on the way an exponential overflows (inf), and what comes after it sends back a "
                        "gradient of 0 (a 1 / inf, an inf that a later step leaves out): 0 · inf is NaN, though the "
                        "numbers come out right. Keep every exponent at most 0 (subtract each row's maximum first, as "
                        "the softmax does), or use the library's softmax."))
    if ex.kind == "function" and (wrong := record.get("grad_mismatch")):
        listed = ", ".join(f"`{n}`" for n in wrong)
        return _fail(ex, "gradient_wrong",
                     f"`{ex.answers[0]}` gives the right numbers, but the gradient that flows back to {listed} is not "
                     "the gradient of those numbers: some entries get none, or a wrong one ("
                     + ("a `tf.stop_gradient` on part of the computation, a softmax's sums, say"
                        if ex.framework == "tensorflow" else "a lookup with `padding_idx`, say, gives that row none")
                     + "). Training through it would not learn what it should: compute the result with plain "
                     "differentiable operations on the inputs.")
    if ex.kind == "function":  # its trials run without gradients: only the call on inputs that need one says
        cut = [f"{ex.answers[0]}(...)"] if record.get("keeps_grad") is False else []
        if cut and ex.framework == "tensorflow":
            return _fail(ex, "gradient_cut", f"The result of `{cut[0]}` is cut off from its inputs: under a "
                                             "tf.GradientTape no gradient reaches them (all of them, or some), because "
                                             "something on the way does not pass gradients on: NumPy (with the "
                                             "result wrapped in tf.constant), tf.stop_gradient, or a tf.Variable "
                                             "made from an intermediate result (a Variable starts a new graph). A "
                                             "model could not be trained through it: keep every step in tf "
                                             "operations on tensors.")
    else:
        cut = [n for n, g in ((record.get("facts") or {}).get("grad") or {}).items() if g is False]
    if not cut:
        return None
    what = f"`{cut[0]}`" if ex.kind == "value" else f"The result of `{cut[0]}`"
    whom = "the weights" if ex.kind == "value" else "the inputs that need a gradient (all of them, or some)"
    return _fail(ex, "gradient_cut", f"{what} is cut off from {whom}: a `.detach()`, `torch.no_grad()` or a trip "
                                     "through NumPy on the way, so `loss.backward()` cannot reach them and training "
                                     "cannot change them. Keep every step in torch operations on the parameters; "
                                     "detach only to print.")


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat", "half", "double"))


def _dtype_problem(ex: Exercise, facts: Mapping[str, Any]) -> Outcome | None:
    if not ex.dtype:
        return None
    for name, dtype in (facts.get("dtype") or {}).items():
        if dtype is None or dtype == "float":  # a plain Python number: no dtype of a framework to ask for
            continue
        if _dtype_wrong(ex.dtype, dtype) and (carried := _dtype_carried(ex, facts, name, dtype)):
            return carried
        fw = (facts.get("framework") or {}).get(name, ex.framework or "numpy")
        label = f"`{name}`" if ex.kind == "value" else f"`{name}(...)`'s result"
        if ex.dtype == "float" and not _is_float(dtype):
            return _fail(ex, "wrong_dtype", f"{label} has the integer dtype {dtype}. Make it a float tensor "
                                            f"({_DTYPE_HOW.get(fw, 'float32')}): a softmax and a division need floats.")
        if ex.dtype == "float32" and dtype != "float32":
            return _fail(ex, "wrong_dtype", f"{label} has dtype {dtype}; this step asks for float32 "
                                            f"({_DTYPE_HOW.get(fw, 'float32')}). Mixed dtypes make the next steps "
                                            "fail or silently change precision.")
        if ex.dtype == "float64" and dtype != "float64":
            return _fail(ex, "wrong_dtype", f"{label} has dtype {dtype}; this step asks for float64, double "
                                            "precision: leave out the cast or the `dtype=` that made it (NumPy's "
                                            "arrays are float64 unless told otherwise), or convert with "
                                            ".astype(np.float64).")
        if ex.dtype == "int32" and dtype != "int32":
            return _fail(ex, "wrong_dtype", f"{label} has dtype {dtype}; this step keeps the integers (int32). Leave "
                                            "out the cast here: the notebook casts to float later, where a step "
                                            "asks for it.")
    return None


def _through_float32(trials: Sequence[tuple[Arrays, Mapping[str, Any]]], wants: Sequence[Arrays],
                     names: Sequence[str]) -> bool:
    """Whether the answers' errors look like float32's: spread over nearly every entry. Of the entries whose right
    value float32 cannot hold, fewer than a quarter agree to double precision (a computation in float64 that
    changes only some entries, such as small weights set to 0, leaves most of them exact)."""
    exact = total = single = close = rows = scaled = 0
    for (got, _), want in zip(trials, wants):
        for name in names:
            try:
                g, w = np.asarray(got[name], float), np.asarray(want[name], float)
            except Exception:  # noqa: BLE001 — answers that are not numbers
                continue
            if g.shape != w.shape:
                continue
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                # a row whose entries are all off by one and the same factor (a small constant added to a row's sum,
                # say) is scaled, not rounded: float32 leaves each entry its own error
                if g.ndim and g.shape[-1] > 2:
                    r = ((g - w) / w).reshape(-1, g.shape[-1])
                    mean = np.abs(np.nanmean(r, axis=-1))
                    off = np.isfinite(mean) & (mean > 1e-9)
                    rows += int(off.sum())
                    scaled += int(np.sum(off & (np.nanstd(r, axis=-1) < 1e-3 * mean)))
                held = np.isfinite(w) & (w.astype(np.float32).astype(float) != w)
                exact += int(np.sum(held & (np.abs(g - w) <= 1e-12 * np.abs(w))))
                # float32's own numbers (a cast back at the end), or errors relative to each number's size (float32
                # keeps about 7 digits of a weight of 1e-14 as of one of 0.5): not a constant added to every entry
                single += int(np.sum(held & (g.astype(np.float32).astype(float) == g)))
                close += int(np.sum(held & (np.abs(g - w) <= 1e-5 * np.abs(w))))
            total += int(held.sum())
    if rows and scaled >= rows / 2:
        return False
    return total == 0 or exact < total / 4 and (single >= total / 2 or close >= 0.9 * total)


def _integer_where_float(ex: Exercise, facts: Mapping[str, Any]) -> bool:
    """An answer of an integer dtype where the step asks for floats."""
    return bool(ex.dtype and ex.dtype.startswith("float")) and any(
        dt is not None and dt != "float" and not _is_float(str(dt)) and str(dt) != "bool"
        for dt in (facts.get("dtype") or {}).values())


def _dtype_wrong(asked: str, dtype: str) -> bool:
    return not _is_float(dtype) if asked == "float" else dtype != asked


# the notebooks whose TO-DOs say that their functions take float64 too ("float32 here, float64 when handed float64"):
# there a function that raises on float64 inputs is not what was asked (elsewhere the TO-DO asks for float32 inputs)
FLOAT64_ASKED = frozenset({"03_hands_on_steps", "06_masks_dropout_multihead", "08_order_and_position",
                           "09_cross_attention_kv_cache"})


def _double_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """A function of tensors that hands float64 inputs back in a lower precision (see :func:`collect._double_dtype`)."""
    dtype = record.get("double_dtype")
    if ex.kind != "function" or not isinstance(dtype, str) or dtype in ("float64", "double"):
        return None
    if dtype.startswith("raised: "):
        if ex.notebook not in FLOAT64_ASKED:
            return None
        fixed = ("a `tf.cast(…, tf.float32)`, a `tf.fill`/`tf.ones` or a NumPy array made in float32 (TensorFlow never "
                 "mixes dtypes)", "`tf.cast(d, q.dtype)`, `tf.fill(shape, tf.constant(-math.inf, q.dtype))`") \
            if ex.framework == "tensorflow" else \
            ("a tensor made in the default dtype (`torch.zeros(n, d)`, `torch.ones(…)`) or cast with `.float()`, then "
             "used in a product with the inputs", "`torch.zeros_like(…)`, `dtype=q.dtype`")
        return _fail(ex, "wrong_dtype", f"`{ex.answers[0]}(...)` gives the right numbers on float32 inputs, but handed "
                                        f"float64 inputs it raises ({dtype[len('raised: '):]}). Something in it is "
                                        f"fixed to float32: {fixed[0]}. Like the library's functions, it should take "
                                        "any float dtype and return it: make constants and new tensors in the inputs' "
                                        f"dtype ({fixed[1]}).")
    if ex.framework == "tensorflow":
        how = ("a `tf.cast(…, tf.float32)`, NumPy's float32 wrapped in a tensor, or a Keras layer, which computes in "
               "its own dtype policy's float32", "`tf.cast(d, q.dtype)`")
    else:
        how = ("a `.float()`, a `dtype=torch.float32`, or a tensor made in the default dtype (`torch.zeros(n, d)`) and "
               "filled", "`torch.zeros_like(…)` or `dtype=q.dtype`")
    return _fail(ex, "wrong_dtype", f"`{ex.answers[0]}(...)` gives the right numbers here, but handed float64 inputs "
                                    f"it returns {dtype}: somewhere it fixes the dtype ({how[0]}), and the precision "
                                    "of its inputs is lost. A function of tensors should return its inputs' dtype, as "
                                    f"the library's own do: make new tensors like the inputs ({how[1]}) and cast "
                                    "nothing.")


def _dtype_carried(ex: Exercise, facts: Mapping[str, Any], name: str, dtype: str) -> Outcome | None:
    """A value step's right numbers in a wrong dtype that an earlier step's answer it starts from has too: the
    cell's code is right, that answer's dtype is what to fix (🟡)."""
    if ex.kind != "value":
        return None
    came = [n for n, d in (facts.get("input_dtypes") or {}).items()
            if n != name and d == dtype and (o := producer(ex, n)) is not None and o.dtype]
    if not came:
        return None
    owners = [f"`{n}` ({producer(ex, n).id})" for n in came]  # type: ignore[union-attr]
    return Outcome(ex.id, "carried", ex.points, ex.points,
                   f"Your code for this step is right, but it starts from your {', '.join(owners)}, which "
                   f"{'has' if len(came) == 1 else 'have'} dtype {dtype}, and `{name}` takes that dtype from it: "
                   "fix the earlier step (its check says how), then run this cell again.",
                   carried_from=tuple(producer(ex, n).id for n in came))  # type: ignore[union-attr]


_HALF_PRECISION = {"bfloat16": (1e-1, 5e-2), "float16": (2e-2, 1e-2)}  # rtol, atol of a result computed in it


def _past_half(inputs: Mapping[str, Any]) -> bool:
    """Does some float array of these inputs hold a number beyond float16's largest (65 504)?"""
    return any(isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size and float(np.nanmax(np.abs(v))) > 65504
               for v in inputs.values())


def _low_precision_problem(ex: Exercise, record: Mapping[str, Any],
                           trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> Outcome | None:
    """A wrong answer that is the right one to the precision of a half-precision float (float16, bfloat16) it has
    as its dtype, or that its code names: computed in half precision, where the step asks for float32 (or the
    framework's usual float) or float64."""
    if ex.dtype == "int32" or not trials:
        return None
    asked = ex.dtype if ex.dtype in ("float32", "float64") else \
        "float64" if (ex.framework or "numpy") == "numpy" else "float32"
    dtypes = {n: str(d).removeprefix("torch.") for n, d in ((record.get("facts") or {}).get("dtype") or {}).items()
              if d is not None and str(d).removeprefix("torch.") in _HALF_PRECISION}
    named = (record.get("how") or {}).get("low_precision")  # the half type the code names ("float16", "bfloat16")
    if not dtypes and not named:
        return None
    half = next(iter(dtypes.values()), named if named in _HALF_PRECISION else "float16")
    rtol, atol = _HALF_PRECISION[half]
    if half == "float16" and len(finite := _finite_trials(trials)) >= 2:
        trials = finite  # (float16 overflows past 65 504: inf, and NaN after it, where a trial's scores reach that)
    if half == "float16" and len(held := [(got, inputs) for got, inputs in trials if not _past_half(inputs)]) >= 2:
        trials = held  # (and a trial whose inputs float16 cannot hold, a value of 10⁸, says nothing of its digits)
    for got, inputs in trials:
        try:
            want = ex.expected(inputs)
        except Exception:
            return None
        if not _close(got, want, ex.answers, rtol, atol):
            return None
    digits = "3" if half == "float16" else "2"
    if dtypes:
        name = next(iter(dtypes))
        what = f"`{name}`" if ex.kind == "value" else f"`{name}(...)`'s result"
        said = f"{what} has dtype {half}, which keeps only about {digits} significant digits"
    else:
        where = "Your cell" if ex.kind == "value" else f"`{ex.answers[0]}`"
        exact = "256" if half == "bfloat16" else "2048"
        said = (f"{where} puts some of its numbers through {half} (half precision, even if only a scale factor or "
                f"the positions a mask compares), which keeps only about {digits} significant digits, and whole "
                f"numbers exactly only up to {exact}")
    tail = "" if dtypes else " (or a mask hides the wrong keys)"
    return _fail(ex, "wrong_dtype", f"{said}: on some inputs your numbers are right only to that many digits{tail}. "
                                     f"This step asks for {asked}: leave out the cast to {half}.")


# the calls of a function that can remove an overflowed exponential after it is made (see nan_gradient)
_SELECTS = {"where", "tril", "triu", "band_part", "masked_fill", "masked_fill_", "boolean_mask", "select", "gather",
            "take", "index_select", "masked_select", "multiply", "mul", "logical_and", "logical_not"}
# what a function calls where its numbers may go through float32 (a cast, another framework's tensors)
_THROUGH_FLOAT32 = {"astype", "float32", "float16", "single", "half", "float", "array", "asarray", "tensor",
                    "as_tensor", "from_numpy", "constant", "convert_to_tensor", "cast", "to", "type", "numpy", "view"}


def _float32_precision_problem(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]],
                               record: Mapping[str, Any] | None = None) -> Outcome | None:
    """A float64 step whose numbers are not right to double precision: rounded (to k decimals), or right only to
    float32's precision (about 7 digits) because they went through float32 on the way (a cast there and back,
    another framework's float32 tensors), whatever dtype they end in."""
    if ex.dtype != "float64" or not trials:
        return None
    try:
        wants = [ex.expected(inputs) for _, inputs in trials]
    except Exception:  # noqa: BLE001 — a reference that cannot say
        return None
    if all(_close(got, want, ex.answers, FLOAT64_RTOL, FLOAT64_ATOL) for (got, _), want in zip(trials, wants)):
        return None
    if rounded := _rounded_answer(ex, trials, (FLOAT64_RTOL, FLOAT64_ATOL)):
        return rounded
    names = ", ".join(f"`{n}`" for n in ex.answers) if ex.kind == "value" else f"`{ex.answers[0]}(...)`'s result"
    agree = "agree" if ex.kind == "value" and len(ex.answers) > 1 else "agrees"
    # (further off than float32 leaves, yet within the step's tolerance: a number rounded on the way, the scores to
    # 4 decimals or √d_k, is not right to double precision either)
    near = all(_close(got, want, ex.answers, 4e-6, 1e-7) for (got, _), want in zip(trials, wants))
    if not near and not all(_close(got, want, ex.answers, ex.rtol, ex.atol) for (got, _), want in zip(trials, wants)):
        return None  # beyond the step's tolerance: another mistake, for the other checks to name
    error = _largest_relative_error(trials, wants, ex.answers)
    calls = (record or {}).get("calls")
    # (a function whose code calls nothing that could take its numbers through float32 is not told it did)
    possible = not isinstance(calls, list) or bool(set(calls) & _THROUGH_FLOAT32)
    if near and error > 1e-8 and possible and _through_float32(trials, wants, ex.answers):  # (float32: 1e-8 or more)
        return _fail(ex, "wrong_dtype", f"{names} {agree} with the double-precision result only to about 7 significant "
                                         "digits, float32's precision: on the way the numbers went through float32 (a "
                                         "cast there and back, or tensors of another framework). This step asks for "
                                         "float64 all the way: keep NumPy's float64 arrays from start to end.")
    if error > FLOAT64_RTOL:  # off by less than float32 leaves, on no grid of decimals: say how far, not why
        digits = max(int(-np.log10(error)), 1)
        return Outcome(ex.id, "fail", 0, ex.points,
                       f"{names} {agree} with the double-precision result only to about {digits} significant digits. "
                       "This step asks for it right to double precision (about 15 digits): float64 all the way, "
                       "nothing rounded or perturbed on the way.")
    return None


def _largest_relative_error(trials, wants, names) -> float:
    """The largest |got − want| over the answers' entries, relative to the largest |want| of its array (0 where it
    cannot be read): about 1e-8 or more after a trip through float32, far less for numbers rounded to 10 decimals."""
    worst = 0.0
    for (got, _), want in zip(trials, wants):
        for n in names:
            try:
                g, w = np.asarray(got[n], dtype=np.float64), np.asarray(want[n], dtype=np.float64)
                if g.shape == w.shape and g.size:
                    scale = max(float(np.nanmax(np.abs(w))), 1e-300)
                    worst = max(worst, float(np.nanmax(np.abs(g - w))) / scale)
            except (KeyError, TypeError, ValueError):
                continue
    return worst


def _grad_off_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """A PyTorch step whose cell switched gradients off for the whole session (``torch.set_grad_enabled(False)``
    left on): every later cell, training included, would run without them."""
    if ex.framework != "torch" or not record.get("grad_off"):
        return None
    return _fail(ex, "grad_left_off", "Your cell switched gradients off for the whole session: "
                                      "`torch.set_grad_enabled(False)`, or a `torch.no_grad()` or "
                                      "`torch.inference_mode()` entered with `__enter__()` and never left, stays in "
                                      "force after the cell, so every cell after it computes without them and "
                                      "training can no longer learn. Turn them back on (`torch.set_grad_enabled(True)`"
                                      "; restart the kernel after an inference mode) and switch them off only around "
                                      "the lines that need it: `with torch.no_grad():`.")


def _module_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    if not ex.module:
        return None
    facts = record.get("module")
    if not facts:
        return _fail(ex, "not_trainable", f"`{ex.module}` is not a PyTorch module (nn.Module): its weights cannot "
                                          "be found, so they cannot be trained.")
    trainable = [p for p in facts.get("params", []) if p[2]]
    frozen = [p[0] for p in facts.get("params", []) if not p[2]]
    plain = facts.get("plain_tensors", [])
    if len(trainable) < ex.trainable:
        derived = [n for n in facts.get("derived_tensors", []) if n in plain]
        if derived:
            why = (f"`{', '.join(derived)}` {'is a plain tensor' if len(derived) == 1 else 'are plain tensors'} "
                   "computed from a parameter (an operation on `nn.Parameter(...)`, such as a division after it or "
                   "an index into it, `self.w[0]`, returns a plain tensor, which the module does not register): do "
                   "the operation inside nn.Parameter(...), `nn.Parameter(torch.randn(d, d) / math.sqrt(d))`, and "
                   "make each weight a parameter of its own")
        elif plain:
            why = (f"`{', '.join(plain)}` {'is a plain tensor' if len(plain) == 1 else 'are plain tensors'}, not "
                   "registered with the module: wrap each weight in nn.Parameter(...)")
        elif frozen:
            why = (f"`{', '.join(frozen)}` has requires_grad=False (a `requires_grad=False`, a `requires_grad_(False)` "
                   "or a `.detach_()` on it, in `forward` too, which runs at every call): leave requires_grad at its "
                   "default (True)")
        else:
            why = ex.hints.get("not_trainable") or \
                "create each weight as nn.Parameter(...) (or nn.Linear) inside __init__"
        return _fail(ex, "not_trainable", f"`{ex.module}` has {len(trainable)} trainable weight tensor(s); it "
                                          f"should have {ex.trainable}. {why[0].upper() + why[1:]}, so that "
                                          "module.parameters() lists it and an optimizer can train it.")
    if ex.exact_trainable and len(trainable) > ex.trainable:
        names = ", ".join(f"`{p[0]}`" for p in trainable)
        return _fail(ex, "not_as_asked", f"`{ex.module}` has {len(trainable)} trainable tensors ({names}); the step "
                                         f"asks for {ex.trainable} weights and nothing else. The others make another, "
                                         "larger model (training moves them too), even if its outputs agree while "
                                         "they keep their start (biases of 0, say): leave them out.")
    if wide := [e for e in facts.get("param_dtypes") or () if e[0] in {p[0] for p in trainable}]:
        kinds = sorted({str(e[1]) for e in wide})
        verb = "is" if len(wide) == 1 else "are"
        return _fail(ex, "wrong_dtype", f"`{ex.module}`'s weights {_listed([str(e[0]) for e in wide])} {verb} "
                                        f"{' and '.join(kinds)}, not float32 as the course's tensors are: every "
                                        "weight and its gradient takes that dtype's size, and a float32 input has to "
                                        "be cast to meet them (a cast back at the end hides it). Make the weights "
                                        "float32 (torch.rand's and nn.Linear's default): no `.double()` or `dtype=` "
                                        "on them.")
    if problem := _init_problem(ex, facts):
        return problem
    if facts.get("own_call"):
        return _fail(ex, "not_as_asked", f"`{ex.module}`'s class defines `__call__` itself instead of `forward`: "
                                         "calling the module then skips nn.Module's own call, which runs `forward` "
                                         "and the hooks around it (and `forward` stays missing). Name the method "
                                         "`forward`; `module(x)` calls it for you.")
    if (read := facts.get("globals_read")) and ex.module in read:
        where = facts.get("globals_in") or f"{ex.module}'s class"
        return _fail(ex, "reads_globals", f"`{where}` reads the notebook's `{ex.module}` (its mode, `{ex.module}"
                                          ".training`, say) instead of `self`: every module of this class then "
                                          f"follows that one object, so `model.eval()` on another no longer turns "
                                          "its dropout off. Use `self` for everything about the module itself.")
    if read := facts.get("globals_read"):
        names = ", ".join(f"`{n}`" for n in read)
        where = facts.get("globals_in") or f"{ex.module}'s class"
        return _fail(ex, "reads_globals", f"`{where}` reads the notebook's {names}: the numbers come out right here "
                                          "only because the notebook's values are the ones this module was made "
                                          "with and called on. Use what the module keeps (self.…, set in __init__ "
                                          "from its arguments) and the arguments forward is given.")
    return None


def _init_problem(ex: Exercise, facts: Mapping[str, Any]) -> Outcome | None:
    """The layers of :attr:`Exercise.default_init` as the module holds them: nn.Linear's own start draws each weight
    uniformly within ±1/√in_features. A layer all of whose weights are one number (zeros: ``init_not_random``), or
    beyond that bound (``init_unscaled``), or layers whose weights are all of one sign (18 numbers of a centred draw:
    one chance in 10⁵; ``init_not_centred``) were started otherwise: a re-initialisation the step does not ask
    for."""
    if not ex.default_init:
        return None
    ranges = {str(r[0]): r for r in facts.get("param_ranges") or ()}
    layers = [(n, ranges.get(f"{n}.weight")) for n in ex.default_init]
    if any(r is None for _, r in layers):
        return None  # not nn.Linear layers of those names: the step's own checks say so
    code, why = "", ""
    for name, (_, low, high, fan_in) in layers:
        bound = 1.0 / float(np.sqrt(max(int(fan_in), 1)))
        if low == high:
            code, why = "init_not_random", f"every weight of `self.{name}` is {low:g}"
        elif max(abs(low), abs(high)) > bound * (1 + 1e-6):
            code, why = "init_unscaled", (f"`self.{name}` holds weights up to {max(abs(low), abs(high)):.3g} in "
                                          f"size, beyond nn.Linear's ±1/√{int(fan_in)} = ±{bound:.3g}")
        if why:
            break
    if not why and (all(r[1] >= 0 for _, r in layers) or all(r[2] <= 0 for _, r in layers)):
        names = _listed([f"self.{n}" for n, _ in layers])
        code, why = "init_not_centred", f"the weights of {names} are all of one sign"
    if not why:
        return None
    return _fail(ex, code, f"Your `{ex.module}` does not start from nn.Linear's own weights: {why}. The step keeps the "
                           "layer's start, numbers drawn uniformly between −1/√d_model and 1/√d_model, centred on 0 (a "
                           "zero start makes every score, or every output, 0 and leaves the other layers no gradient; "
                           "a large one saturates the softmax). Create the layers and leave their weights as "
                           "nn.Linear draws them.")


def _listed(names: Sequence[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def _forward_params_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """A module whose forward makes its parameters (on its first call) or runs layers it does not hold (see
    :class:`collect._ModuleWatch`): a new one has no parameters, or fewer than it uses, for an optimizer to train."""
    if ex.module and (record.get("module") or {}).get("keep_required") is True:
        return _fail(ex, "not_as_asked",
                     f"Your `{ex.module}`'s forward requires `keep`: the `keep=None` of the TO-DO's signature is gone, "
                     "so a call without a draw of the caller's (the cells below make one, in training mode) raises a "
                     "TypeError. Keep `keep=None`, and draw your own when it is None.")
    watched = record.get("forward_params")
    if not ex.module or not isinstance(watched, Mapping):
        return None
    if grown := list(watched.get("grown") or ()):
        return _fail(ex, "not_registered",
                     f"Your `{grown[0]}` makes parameters in `forward`, on its first call: a new `{grown[0]}(...)` has "
                     "none until it runs, so an optimizer made right after it (`torch.optim.SGD(model.parameters(), "
                     "…)`) gets an empty list, and `state_dict()` leaves them out. Make every parameter in `__init__`.")
    if layers := list(watched.get("unregistered") or ()):
        return _fail(ex, "not_registered",
                     f"Your `{ex.module}`'s forward runs {'a layer' if len(layers) == 1 else 'layers'} "
                     f"({_listed(layers)}) that the module does not hold as a submodule (one kept in a plain Python "
                     "list or dict, or a layer of the notebook's): "
                     f"`{ex.module}.parameters()` leaves its weights out, so no optimizer handed them trains them, and "
                     "`state_dict()` does not save them. Assign each layer to an attribute (`self.w_query = "
                     "nn.Linear(…)`), or keep them in an `nn.ModuleList` / `nn.ModuleDict`.")
    return None


def _parameters_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """The module's parameters are the ones the TO-DO names (:attr:`Exercise.parameters`), and no others."""
    if not ex.parameters:
        return None
    params = (record.get("module") or {}).get("params") or []
    names = [str(p[0]) for p in params]
    wanted = _listed([f"self.{n}" for n in ex.parameters])
    if missing := [n for n in ex.parameters if n not in names]:
        return _fail(ex, "not_as_asked", f"The TO-DO asks for the parameters {wanted}; your `{ex.module}` registers "
                                         f"no parameter named {_listed(missing)} (its parameters: "
                                         f"{_listed(names) if names else 'none'}). Name them as asked, one attribute "
                                         "per matrix: `named_parameters()`, `state_dict()` and code outside the class "
                                         f"find a weight by that name (`{ex.module}.{ex.parameters[0]}`).")
    if extra := [p for p in params if str(p[0]) not in ex.parameters]:
        sizes = [int(np.prod(p[1])) for p in extra]
        listed = ", ".join(f"`{p[0]}` ({k} number{'' if k == 1 else 's'})" for p, k in zip(extra, sizes))
        trained = [p for p in extra if len(p) < 3 or p[2]]
        why = ("an extra parameter is trained too, and it changes the count of trainable numbers of the next step"
               if trained else "a fixed number belongs in a plain attribute (or a buffer), not among the "
               "parameters an optimizer is handed")
        return _fail(ex, "not_as_asked", f"Your `{ex.module}` has a parameter the step does not ask for: {listed}. The "
                                         f"step asks for {wanted} only; {why}.")
    return None


_HOW = {
    ("loop", True): "The step asks you to write it as a Python loop, and your cell has none: the loop is the point "
                    "here (it shows each term being added).",
    ("loop", False): "The step asks for it without a Python loop, and your cell has one: use one tensor operation "
                     "over all the rows at once.",
    ("nested_loop", True): "The step asks for two nested loops, one over the rows i and inside it one over the rows "
                           "j, and your cell has a single loop: compute each entry (i, j) on its own, one dot product "
                           "at a time.",
    ("seeds_in_class", False): "Your class seeds the random generator itself (a `manual_seed` inside it), so every "
                               "object it makes starts from the very same numbers, whatever the generator's state. "
                               "Seed outside the class, as the cell does, and only draw inside `__init__`.",
    ("matmul", False): "The step asks for it without a matrix product, and your cell uses one (`@`, matmul, "
                       "einsum or dot): build it from the pieces the step names.",
    ("matmul", True): "The step asks for a matrix product, and your cell has none.",
    ("implicit_softmax_dim", False): "Your numbers are right, but a softmax in your cell does not state its axis, "
                                     "so the library picks one by a rule of its own, which picks another axis for "
                                     "other shapes. State the axis (`dim=…`).",
    ("typed_numbers", False): "Your cell types the numbers in by hand: this step asks you to compute them, so "
                              "that the same code works on any inputs.",
    ("library_attention", False): "Your function calls a library's attention (`scaled_dot_product_attention` or "
                                  "a multi-head attention layer). This step asks you to write it yourself, from "
                                  "matrix products and a softmax; the library's version is what the cell "
                                  "compares yours with.",
    ("sampled", False): "Your cell draws its guesses at random from the model's probabilities (`torch.multinomial`, "
                        "a distribution's `sample()`): a guess is the token with the largest logit, the argmax. A "
                        "trained model is almost sure of itself, so a draw is right most of the time, not always.",
    ("no_grad", True): "Your numbers are right, but the step asks you to evaluate without keeping track of "
                       "gradients: run the model inside `with torch.no_grad():` (gradients are only needed to "
                       "train, and recording them costs memory and time).",
    ("indexed_result", False): "Your cell reorders (indexes) what a function returns: the numbers come out the "
                               "same, but the step asks for the function run on the reordered inputs themselves.",
}


_NO_GRAD_ALONE = ("Your numbers are right, but `torch.no_grad()` on a line of its own switches nothing off: it only "
                  "acts on the lines inside a `with torch.no_grad():` block. Put the model's call in that block.")


def _as_asked_hint(ex: Exercise, feature: str) -> str | None:
    """The exercise's own wording of ``not_as_asked`` for one feature (see :attr:`Exercise.hints`)."""
    return ex.hints.get(f"not_as_asked:{feature}") or ex.hints.get("not_as_asked")


_PACKAGES = {"torch": "PyTorch", "tensorflow": "TensorFlow", "keras": "Keras", "jax": "JAX", "numpy": "NumPy"}


def _unused_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    unused = [n for n in record.get("unused") or [] if n in ex.computed_with]
    forbidden = [n for n in record.get("forbidden") or [] if n in ex.not_with]
    how = record.get("how") or {}
    # the model's forward passes watched: every one ran without gradients (a `torch.no_grad()` entered through an
    # ExitStack, or bound to a name first, which the cell's text does not show as a block): nothing to say on that
    # (not where it also runs `model.forward(...)`, which no hook sees)
    measured_off = ex.how.get("no_grad") and ex.module and record.get("forward_grad") is False \
        and not how.get("forward_called")
    for feature, wanted in ex.how.items() if not unused else ():  # not computed with X says more than how
        if feature == "no_grad" and measured_off:
            continue
        if feature in how and how[feature] != wanted:
            if feature == "no_grad" and how.get("no_grad_alone"):
                return _fail(ex, "not_as_asked", _NO_GRAD_ALONE)
            said = _as_asked_hint(ex, feature) or _HOW[feature, wanted]
            if feature == "library_attention" and record.get("library_via"):
                said += (f" (Yours calls it through `{record['library_via']}`, a function of your own that calls "
                         "it.)" if record.get("library_via_own") else
                         f" (Yours calls it through `{record['library_via']}`, a name bound outside the function: "
                         "another name for the library's function is still the library's function.)")
            return _fail(ex, "not_as_asked", said)
    inside = how.get("no_grad_names", record.get("no_grad_names"))
    outside = how.get("grad_calls", record.get("grad_calls"))
    # the module called where gradients are on (a copy of it called inside the block is fine)
    if ex.how.get("no_grad") and ex.module and how.get("no_grad", True) and isinstance(inside, list) \
            and not measured_off and "*" not in inside \
            and (ex.module in outside if isinstance(outside, list) else ex.module not in inside):
        return _fail(ex, "not_as_asked", f"Your cell switches gradients off, but not where `{ex.module}` runs: "
                                         f"`{ex.module}(...)` is outside the `with torch.no_grad():` block, so its "
                                         "forward pass still keeps track of gradients. Put the model's call inside "
                                         "the block.")
    if ex.how.get("no_grad") and ex.module and how.get("no_grad", True) and record.get("forward_grad"):
        # the block is there and the call written inside it, yet the forward passes ran with gradients on
        if how.get("grad_on_again"):
            return _fail(ex, "not_as_asked", f"Your cell writes `{ex.module}(...)` inside `with torch.no_grad():`, "
                                             "but switches gradients on again around it (`torch.enable_grad()`, "
                                             "`torch.set_grad_enabled(True)`), so its forward passes keep track of "
                                             "gradients. Leave them off for the whole evaluation.")
        return _fail(ex, "not_as_asked", f"Your cell writes `{ex.module}(...)` inside `with torch.no_grad():`, but "
                                         "its forward passes run with gradients on: most often after the block, a "
                                         "generator expression (or a `map`) made in the block running its calls "
                                         "only where it is consumed. Compute the guesses inside the block (a list, "
                                         "or the tensor itself), not a lazy generator.")
    if forbidden:
        via = record.get("forbidden_via") or {}
        names = " and ".join(f"`{n}`" + (f" ({_PACKAGES[n]}{f', through `{via[n]}`' if via.get(n) else ''})"
                                         if n in _PACKAGES else "") for n in forbidden)
        only = f", with {_OPS[ex.framework]} operations only" if ex.framework in _OPS else ""
        where = "Your cell" if ex.kind == "value" else f"`{ex.answers[0]}`"
        own = _as_asked_hint(ex, "not_with")  # may say where the names go: {names}
        return _fail(ex, "not_as_asked", own.replace("{names}", names) if own
                     else f"{where} uses {names}: this step is to be computed without "
                          f"{'it' if len(forbidden) == 1 else 'them'}{only}.")
    if not unused:
        return None
    quoted = [f"`{n}`" for n in unused]
    names = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return _fail(ex, "not_computed_with", ex.hints.get("not_computed_with")
                 or f"Your cell never uses {names}: the step asks you to compute "
                    f"{', '.join(f'`{a}`' for a in ex.answers)} with {'it' if len(quoted) == 1 else 'them'}, and "
                    "your numbers come from somewhere else.")


def _unused_names_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """:func:`_unused_problem` for the names the cell never uses alone (not how it computes)."""
    if not [n for n in record.get("unused") or [] if n in ex.computed_with]:
        return None
    return _unused_problem(ex, record)


def _budget_problem(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    counted = record.get("rows") or []
    for budget in ex.budgets:
        for rows, world in zip(counted, plan.inputs[1:]):
            if budget.sizes is not None:  # the rows of each product, in order
                if (note := budget.sizes(list((rows or {}).get(budget.name + "@sizes") or ()), world)) is not None:
                    return _fail(ex, budget.code, note=note)
                continue
            key = budget.name + "@first" if budget.first else budget.name
            used, limit = float((rows or {}).get(key, 0)), budget.limit(world)
            if used > limit and budget.first:
                return _fail(ex, budget.code, note=f" (Run again on other inputs, your cell's first product with "
                                                   f"`{budget.name}` took {used:.0f} rows at once.)")
            if used > limit:
                return _fail(ex, budget.code, note=f" (Run again on other inputs, your cell multiplied {used:.0f} rows "
                                                   f"by `{budget.name}`; {limit:.0f} are enough.)")
    return None


def _kept_for_shapes(ex: Exercise, plan: Plan | None, record: Mapping[str, Any]) -> bool:
    """Did the function give exactly its last trial's answer back for new arrays of the same shapes holding other
    numbers (that trial's float inputs doubled), where the right answer changes with them?"""
    if plan is None or record.get("same_for_doubled") is not True or record.get("mutated") or not plan.inputs \
            or record.get("globals_read") or record.get("containers_read") or record.get("scalars_read"):
        return False  # one that reads the notebook's arrays gives the same answer for any numbers too
    last = plan.inputs[-1]
    doubled = {k: np.asarray(v) * 2.0 if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
               for k, v in last.items()}
    answers = record.get("answers") or []
    if len(answers) != len(plan.inputs):
        return False
    try:
        # right on that last trial (an answer wrong there, all zeros say, may come out the same for any numbers)
        # and the doubled numbers call for another
        return _compare(ex, answers[-1], ex.expected(last), "") is None \
            and _compare(ex, ex.expected(last), ex.expected(doubled), "") is not None
    except Exception:  # noqa: BLE001 — a reference that cannot take those numbers: no claim
        return False


def _answer_given_again(ex: Exercise, plan: Plan, answers: Sequence[Any],
                        record: Mapping[str, Any]) -> Outcome | None:
    """A function that, on the first trial where it is wrong, returns exactly (bit for bit) what it returned, right,
    on an earlier random trial whose right answer is another: a result kept from that call (a cache keyed by the
    bytes of an array, which another shape shares, or by anything but the numbers and their shape). Not the
    notebook's own answer (trial 0: a function that reads the notebook's arrays gives that one for any inputs)."""
    if record.get("globals_read") or record.get("containers_read") or record.get("scalars_read") \
            or record.get("mutated"):
        return None
    name = ex.answers[0]
    for i, got in enumerate(answers):
        want = ex.expected(plan.inputs[i])
        if _compare(ex, got, want) is None:
            continue
        g = got.get(name) if isinstance(got, Mapping) else None
        if not isinstance(g, np.ndarray) or g.size < 2:
            return None
        for j in range(1, i):
            earlier = answers[j].get(name) if isinstance(answers[j], Mapping) else None
            if isinstance(earlier, np.ndarray) and earlier.shape == g.shape and np.array_equal(earlier, g) \
                    and _compare(ex, answers[j], ex.expected(plan.inputs[j])) is None \
                    and not _same_numbers(plan.inputs[i], plan.inputs[j]):
                return _fail(ex, "stale_value",
                             f"`{name}` gives back an answer it kept from an earlier call: called on other inputs "
                             f"({_describe_inputs(plan.inputs[i])}), it returned exactly what it returned for "
                             "earlier ones, which call for another answer (a cache keyed by the arrays' bytes, which "
                             "another shape can share, or by anything but the numbers and their shape). Compute the "
                             "answer from the inputs on every call.")
        return None
    return None


def _same_numbers(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Do two trials hold the same float arrays (the same shapes and numbers), differing only in their other inputs
    (lengths in another order, say)? Then one answer for both is no sign of a cache: a function that reads those
    other inputs wrongly (lengths sorted first) gives it as well."""
    floats = [n for n, v in a.items() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    return bool(floats) and all(isinstance(b.get(n), np.ndarray) and np.array_equal(a[n], b[n]) for n in floats)


def _overwritten_problem(ex: Exercise, record: Mapping[str, Any], plan: Plan | None = None) -> Outcome | None:
    if _kept_for_shapes(ex, plan, record):
        return _fail(ex, "stale_value",
                     f"`{ex.answers[0]}` gives back an answer it kept from an earlier call: called on new arrays of "
                     "the same shapes holding other numbers, it returned exactly its last answer again (a cache "
                     "keyed by the shapes, or by anything but the numbers). Compute the answer from the numbers on "
                     "every call.")
    if record.get("keeps_by_identity") is True and not record.get("mutated"):
        return _fail(ex, "stale_value",
                     f"`{ex.answers[0]}` keeps what it computed (or part of it) for the very arrays it was handed "
                     "before: called again on those arrays after their numbers changed (in place), it gave another "
                     "answer than new arrays with the same numbers get, the old one or part of it (a cache keyed by "
                     "`id(...)`, or by an array's memory address). Compute the answer from the numbers on every "
                     "call.")
    return _fail(ex, "result_overwritten") if record.get("result_overwritten") is True else None


def _function_state(ex: Exercise, record: Mapping[str, Any], error: Mapping[str, Any] | None = None) -> Outcome | None:
    """A wrong function that keeps something on the function object itself (`f.matrices = …` at its first call):
    what an earlier call stored there is most likely what a later call reuses."""
    kept = [n for n in record.get("fn_attributes") or [] if isinstance(n, str)]
    if not kept:
        return None
    names = ", ".join(f"the default `{n}…`, filled by its calls" if n.endswith("=") else f"`{ex.answers[0]}.{n}`"
                      for n in kept[:2]) + (", …" if len(kept) > 2 else "")
    then = f" (On other inputs it raised {error.get('message')})" if error else ""
    return _fail(ex, "stale_value",
                 f"`{ex.answers[0]}` keeps something on the function object itself ({names}), and on other inputs "
                 "its answers are wrong: most likely a later call reuses what an earlier call stored there (the "
                 "notebook's own call, made first). Compute everything from the arguments of each call, and keep "
                 "nothing between calls." + then)


def _mode_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """A function with right numbers that depends on torch's grad mode, or seeds torch's generator at every call."""
    if record.get("grad_mode_differs") is True:
        return _fail(ex, "not_as_asked",
                     f"`{ex.answers[0]}` gives other numbers when gradients are off (called under `torch.no_grad()`) "
                     "or when its inputs require a gradient (as a model's tensors do while it trains): a branch on "
                     "`torch.is_grad_enabled()` or on `.requires_grad`, say, taken for training or inference. A "
                     "function has no mode: it must compute the same whatever the gradients (a module's dropout "
                     "follows `self.training`, which `model.eval()` sets).")
    if record.get("draws") is True:
        return _fail(ex, "draws_at_random")
    if record.get("reseeds") is True:
        return _fail(ex, "reseeds_generator",
                     f"`{ex.answers[0]}` gives the right numbers, but it seeds a random generator anew at every call "
                     "(a `torch.manual_seed(...)`, `np.random.seed(...)` or `random.seed(...)` inside it): after each "
                     "call the generator is back in the same state, so every random draw after it (a weight's "
                     "initialisation, a dropout mask, a shuffle) repeats the same numbers. Seed once, at the top of "
                     "the notebook, never inside a function.")
    return None


def _mutation_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    mutated = record.get("mutated") or []
    if not mutated:
        return None
    names = ", ".join(f"`{n}`" for n in mutated)
    where = "Your cell" if ex.kind == "value" else f"`{ex.answers[0]}`"
    views = record.get("mutated_views") or {}
    if through := [(n, views[n]) for n in mutated if n in views]:
        name, view = through[0]
        # (a view of `x` written into, `x` changed by the replays too, and `query = x[1]`, another view, with it)
        if len(shared := [n for n in mutated if n not in views or views[n] == view]) > 1:
            names = " and ".join(f"`{n}`" for n in shared)
            return _fail(ex, "mutates_input", f"{where} changes {names} in place through `{view}`, which shares their "
                                              "memory (indexing or slicing a tensor shares its memory, it does not "
                                              f"copy it): writing into `{view}` (`.zero_()`, `+=`, `[...] =`) writes "
                                              f"into {names} too. Start from a new tensor instead "
                                              f"(`torch.zeros_like({view})`, or `{view}.clone()`), then run again the "
                                              f"cells that make {names}: they hold the changed values now.")
        return _fail(ex, "mutates_input", f"{where} changes `{name}` in place through `{view}`, which is a view of "
                                          f"`{name}` (indexing or slicing a tensor shares its memory, it does not "
                                          f"copy it): writing into `{view}` (`.zero_()`, `+=`, `[...] =`) writes into "
                                          f"`{name}` too. Start from a new tensor instead (`torch.zeros_like({view})`, "
                                          f"or `{view}.clone()`), then run again the cell that makes `{name}`: it "
                                          "holds the changed values now.")
    return _fail(ex, "mutates_input", f"{where} changes {names} in place (an in-place operation such as `-=`, "
                                      "`/=`, `.add_()`, `[...] =` or a call's `out=` on an input), so the caller's "
                                      "variable changes too. Compute into a new tensor instead (e.g. `s = s - m`), "
                                      "then run again "
                                      "the cells that compute the variables you passed in: they hold the changed "
                                      "values now.")


_ASSIGNED = re.compile(r"\s*([A-Za-z_]\w*)\s*=[^=]")  # a line that binds one name


def _rebound_problem(ex: Exercise, record: Mapping[str, Any], names: Sequence[str] | None = None) -> Outcome | None:
    """The cell binds anew a name that later cells of the notebook read (``record["rebound"]``, or ``names``)."""
    rebound = list(names if names is not None else record.get("rebound") or [])
    if not rebound:
        return None
    name = rebound[0]
    owner = producer(ex, name)
    whose = f"the answer of {owner.id}" if owner else "a variable the notebook defines earlier"
    others = f" (and {', '.join(f'`{n}`' for n in rebound[1:])})" if len(rebound) > 1 else ""
    given = {m.group(1): line for line in GIVEN_LINES.get(ex.id, ()) if (m := _ASSIGNED.match(line))}
    if name in given:
        return _fail(ex, "overwrites_variable",
                     f"Your cell also assigns `{name}`{others} after the line the notebook gives it "
                     f"(`{given[name]}`): the cells further down read it, and after your cell it holds something "
                     "else. Keep your own results under new names, then run this cell again.")
    if name in LATER_NAMES.get(ex.id, ()):
        harm = "which the cells further down read: after your cell it holds something else, and they go wrong"
    else:
        harm = ("which your cell starts from: after one run it holds something else, so running the cell again "
                "gives another answer")
    return _fail(ex, "overwrites_variable",
                 f"Your cell also assigns `{name}`{others}, {whose}, {harm}. Keep your own results under new names, "
                 f"then run again the cell that computes `{name}` and this one.")


def _deleted_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """The cell deletes a name that later cells of the notebook read (``del x_seq``)."""
    deleted = list(record.get("deleted") or [])
    if not deleted:
        return None
    names = " and ".join(f"`{n}`" for n in deleted[:3])
    one = len(deleted) == 1
    return _fail(ex, "overwrites_variable",
                 f"Your cell also deletes {names}, which the cells further down read: they fail with a NameError "
                 f"now. Take out the `del`, then run again the cell that defines {'it' if one else 'them'} and "
                 "this one.")


def _module_changed_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """A step that judges a trained model as it is (:attr:`Exercise.in_eval`) whose cell also changes that model
    beyond its mode: its mask buffer filled, its dropout set, its parameters frozen."""
    changes = list(record.get("module_changes") or [])
    if not changes:
        return None
    lines = "; ".join(f"`{c}`" for c in changes)
    training = ", and leaves it in training mode" if (record.get("module") or {}).get("training") else ""
    return _fail(ex, "overwrites_variable",
                 f"Your cell also changes `{ex.module}` itself ({lines}){training}. A cell that evaluates the trained "
                 "model must leave it as it is: whatever such a line does not put back, the cells further down meet "
                 f"another model than the one that was trained. Evaluating takes only `{ex.module}.eval()` and "
                 f"`torch.no_grad()`: take those lines out (if the model kept a change, run again the cells that "
                 f"make and train `{ex.module}`), then run this cell again.")


def _reassigned_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """The cell binds anew an earlier step's answer, and that answer is no longer right (04.weights_1 flattening
    `attn_scores_1` on the way): the earlier step is undone."""
    for name, value in sorted((record.get("reassigned") or {}).items()):
        owner = producer(ex, name)
        if owner is None:
            continue
        try:
            want = owner.expected(owner.inputs(None))[name]
            right = _same(np.asarray(value, float), np.asarray(want, float), owner)
        except Exception:  # noqa: BLE001 — a reference that cannot say, or a value of another shape
            right = False
        dtype = (record.get("reassigned_dtypes") or {}).get(name)
        if right and owner.dtype and dtype and _dtype_wrong(owner.dtype, dtype):
            return _fail(ex, "overwrites_variable",
                         f"Your cell also assigns `{name}`, the answer of {owner.id}, and leaves it in {dtype} where "
                         f"that step keeps {owner.dtype}: the cells that use it (this one too, run again) now get "
                         f"another dtype. Keep your own results under new names, then run again the cell that "
                         f"computes `{name}` and this one.")
        if not right:
            return _fail(ex, "overwrites_variable",
                         f"Your cell also assigns `{name}`, the answer of {owner.id}: after your cell it no longer "
                         f"holds what that step computed, so that step is undone. Keep your own results under new "
                         f"names, then run again the cell that computes `{name}` and this one.")
        compared = [line for line in GIVEN_LINES.get(ex.id, ()) if re.search(rf"\b{re.escape(name)}\b", line)] \
            if name in (record.get("reassigned_from_answers") or ()) else []
        if compared:  # the same numbers, from this step's answer: the line the notebook gives compares the two
            return _fail(ex, "overwrites_variable",
                         f"Your cell also assigns `{name}`, the answer of {owner.id}, from this step's own result: "
                         f"the line the notebook gives in this cell (`{compared[0]}`) compares your answer with it, "
                         "and now says yes whatever you computed. Keep `{name}` as its own step made it: drop that "
                         f"line, run again the cell that computes `{name}`, then this one.".replace("{name}", name))
    return None


def _probe_problem(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    measured = record.get("probes") or {}
    for probe, inputs in zip(ex.probes, plan.probe_inputs):
        if probe.kind.startswith("module_"):  # (the cell's module: see _module_probe_problem)
            continue
        entry = measured.get(probe.kind)
        if not isinstance(entry, Mapping):
            return _fail(ex, probe.code, note=" (It could not be measured.)")
        if probe.kind == "one_pass":
            held = float(entry.get("held", 0))
            if int(entry.get("reads", 1)) > 1 or held > probe.limit(inputs):
                return _fail(ex, probe.code)
        answer = entry.get("answer")
        if answer is not None:
            want = ex.expected(inputs)
            if wrong := _compare(ex, {ex.answers[0]: answer}, want, " on a long input"):
                return Outcome(ex.id, "fail", 0, ex.points, wrong)
        peak = float(entry.get("peak_bytes", 0))
        limit = probe.limit(inputs)
        if probe.kind == "peak_memory" and peak > limit:
            return _fail(ex, probe.code, note=f" (On {_describe_inputs(inputs)} it used {peak / 1024:.0f} KiB of "
                                              f"extra memory; a version that works as the step asks needs at most "
                                              f"about {limit / 1024:.0f} KiB.)")
    return None


def _module_drops_problem(ex: Exercise, drops: Mapping[str, Any], code: str) -> Outcome | None:
    """What the ``module_drops`` probe saw (see collect's ``_module_drops``), as the verdict tells it: the first that
    holds, in this order."""
    if drops.get("differ") is False and drops.get("keep_handed"):
        return _fail(ex, code, f"`{ex.module}`, made with a dropout above 0 and run twice in training mode, gives "
                               "the same output both times: its forward hands the attention layer a second "
                               "argument, which the layer takes for the keep-mask (`keep`), so it draws nothing of "
                               "its own. Call the layer with the hidden vectors alone: with keep=None it draws its "
                               "dropout itself in training mode.")
    if drops.get("differ") is False and drops.get("layer_differs") is not False:  # (one that never draws: its step)
        return _fail(ex, code, ex.hints.get(code) or
                     f"`{ex.module}`, made with a dropout above 0 and run twice in training mode, gives the same "
                     "output both times: its attention layer never drops there (a layer made without the model's "
                     "dropout, or a forward that sets the layer's mode itself, `self.attn.eval()`). Hand the "
                     "dropout on to the layer, and leave the modes to `model.train()` and `model.eval()`, which "
                     "pass them on to every layer.")
    if isinstance(drops.get("layer_calls"), int) and drops["layer_calls"] > 2:
        return _fail(ex, "not_as_asked",
                     f"`{ex.module}` runs its attention layer more than once in a forward pass (in training mode, "
                     f"two passes called it {drops['layer_calls']} times): averaging several runs of the layer "
                     "averages several dropout draws, which is another model. Run the layer once: "
                     "`h = h + self.attn(h)`.")
    if drops.get("differ") is True and drops.get("keep_handed"):
        return _fail(ex, "not_as_asked",
                     f"`{ex.module}`'s forward draws the dropout mask itself and hands it to the attention layer "
                     "(`self.attn(h, keep)`): it drops with a rate of its own (a number typed in, or the "
                     "notebook's `p_drop`), not the one the model was made with. Call the layer with the hidden "
                     "vectors alone: with keep=None it draws its dropout itself, with the model's rate, in "
                     "training mode.")
    if drops.get("drops_at_zero") is True:
        return _fail(ex, "not_as_asked",
                     f"`{ex.module}`, made with dropout=0.0, still changes its output in training mode (it differs "
                     "from evaluation mode's): something in it is random there, a dropout of its own (a rate typed "
                     "in, the notebook's `p_drop`, a rate set on its layer in forward: `self.attn.dropout = …`) or "
                     "noise added in training. Use the dropout the model is made with, and only that.")
    if drops.get("train_mismatch") is True:
        return _fail(ex, "not_as_asked",
                     f"`{ex.module}` in training mode (made with a dropout above 0) gives other logits than its last "
                     "two steps give: what its attention layer was handed plus what it returned (whatever that "
                     "layer's dropout drew), times `w_readout`. Something else changes them while training (a "
                     "dropout of the model's own on the logits or on the layer's output, or a scale used only when "
                     "`self.training`). Keep the forward to the three steps, the same in both modes: the layer's "
                     "own dropout is the one that drops.")
    if drops.get("differ") is True and drops.get("differ_after_eval") is False:
        return _fail(ex, "stateful_forward",
                     f"`{ex.module}` drops in training mode until it has run once in evaluation mode, and never "
                     "again after that: its forward changes the model for good when it is not training (a rate set "
                     "on its layer, `self.attn.dropout = 0.0`, say). Leave the layers as they are in forward: "
                     "`model.train()` and `model.eval()` switch every layer's dropout on and off.")
    if drops.get("eval_differ") is True:
        return _fail(ex, "dropout_in_eval",
                     f"`{ex.module}`, made with a dropout above 0, gives another output each time it runs in "
                     "evaluation mode: something in it still drops there. Either its attention layer (a forward "
                     "that sets the layer's mode itself, `self.attn.train()`), or a dropout of the model's own "
                     "told to drop whatever the mode (`F.dropout(..., training=True)`: hand it "
                     "`training=self.training`). Leave the modes to `model.train()` and `model.eval()`, which "
                     "pass them on to every layer.")
    return None


def _stateful_forward(ex: Exercise, how: Any) -> Outcome:
    """``stateful_forward``, told the way the calls showed it: two calls on one input that differ (the catalogue's
    message), a call on a shorter sequence that broke the next, longer one, a call that changed weights of other
    values (``"weights"``), or a call on another batch after the cell's own calls that does not give what a first
    call gives (``"again"``)."""
    if how == "again":
        return _fail(ex, "stateful_forward",
                     f"Called once more after your cell's own calls, on another batch (one token shorter, its "
                     f"sentences in another order), `{ex.module}` fails or gives another output than a module whose "
                     "forward computes everything from the call's own inputs: it keeps something from an earlier call "
                     "(a padding mask, a sequence length or a mask stored on `self`). Compute each call's masks from "
                     "that call's `x` and `lengths`, in local names.")
    if how == "weights":
        return _fail(ex, "stateful_forward",
                     f"Given other weights (of both signs, some above 1), `{ex.module}`'s forward changes them as it "
                     "runs: a clamp or a rescaling in place (`.data.clamp_(…)`, `.mul_(…)`), a no-op only while the "
                     "weights are those it starts with. A forward computes its output from its input and the "
                     "parameters as they are, and leaves them unchanged: only the optimizer changes the weights.")
    if how != "shorter":
        return _fail(ex, "stateful_forward")
    return _fail(ex, "stateful_forward",
                 "Called on a sequence one token shorter and then on the first one again, your module fails or gives "
                 "another output: its `forward` changes the module to fit the length it sees (for instance "
                 "`self.causal_mask = self.causal_mask[:n, :n]`, which keeps only the first call's part of the mask "
                 "for good). Take a slice into a new local name and leave the module's buffers and parameters as "
                 "they are: a forward must work for every length up to the one the module was built for.")


def _module_again_problem(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    """The module each replay made, called once more on another batch (:attr:`Exercise.again`): it must give what a
    forward computed from that call's inputs alone gives, and not raise."""
    if ex.again is None:
        return None
    for world, got in zip(plan.inputs[1:], record.get("module_again") or ()):
        if got is None:
            continue
        if isinstance(got, Mapping):  # it raised (where the cell's own calls, on the replay's batch, did not)
            return _stateful_forward(ex, "again")
        want = np.asarray(ex.again(world)[2], float)
        got = np.asarray(got, float)
        if got.shape != want.shape or not np.allclose(got, want, rtol=ex.rtol, atol=ex.atol, equal_nan=True):
            return _stateful_forward(ex, "again")
    return None


def _module_probe_problem(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    """The module's own dropout draws and its use of its buffer (see :class:`Probe`, ``module_dropout``)."""
    measured = record.get("probes") or {}
    for probe, inputs in zip(ex.probes, plan.probe_inputs):
        if probe.kind == "module_init" and (problem := _module_init_problem(ex, probe, inputs,
                                                                           measured.get(probe.kind))):
            return problem
        if probe.kind == "module_grad" and isinstance(entry := measured.get(probe.kind), Mapping) \
                and entry.get("stateful"):
            return _stateful_forward(ex, entry["stateful"])
        if probe.kind == "module_grad" and isinstance(entry := measured.get(probe.kind), Mapping) \
                and isinstance(entry.get("class_state"), str):
            return _fail(ex, "class_state_shared", note=f" (Here, once another module of the class, of other sizes, "
                                                        f"had been made, `{ex.module}` {entry['class_state']}.)")
        if probe.kind == "module_grad" and isinstance(entry := measured.get(probe.kind), Mapping) \
                and entry.get("inplace_error"):
            return _module_grad_carried(ex, "training through it raises an error in backward") or _fail(
                ex, "in_place_breaks_backward", note=f" (Training `{ex.module}` raised: {entry['inplace_error']})")
        if probe.kind == "module_grad" and isinstance(entry := measured.get(probe.kind), Mapping) \
                and entry.get("reused_graph"):
            return _module_grad_carried(ex, "training it a second time raises an error in backward") or _fail(
                ex, "weights_used_once", note=f" (Its second backward raised: {entry['reused_graph']})")
        if probe.kind == "module_grad" and isinstance(entry := measured.get(probe.kind), Mapping) \
                and entry.get("ignores_input"):
            # a module started at zero gives 0 whatever its input: that start, not its forward, is the cause
            if problem := _init_problem(ex, {"param_ranges": record.get("module_ranges")
                                             or (record.get("module") or {}).get("param_ranges")}):
                return problem
            return _module_grad_carried(ex, "it gives the same output whatever input it is called with") or _fail(
                ex, "reads_globals", f"`{ex.module}` gives the same output whatever input it is called with: its "
                                     "forward computes from something other than its argument (the notebook's `x`, "
                                     "say, or a result kept from an earlier call). Compute from the input forward "
                                     "is given.")
        if probe.kind == "module_grad" and (problem := _module_grad_problem(ex, measured.get(probe.kind))):
            return _module_grad_carried(ex) or problem
        if probe.kind == "module_grad" and isinstance(entry := measured.get(probe.kind), Mapping) \
                and entry.get("input_cut") is True:
            return _module_grad_carried(ex, "nothing before it could learn through it: its forward cuts its input "
                                            "off from the gradient") or _fail(ex, "input_detached")
        if probe.kind == "module_drops" and isinstance(drops := measured.get(probe.kind), Mapping) \
                and (problem := _module_drops_problem(ex, drops, probe.code)):
            return problem
        if probe.kind != "module_dropout":
            continue
        entry = measured.get(probe.kind)
        if not isinstance(entry, Mapping):
            return None  # no module to call: the answers say enough
        copies = len(next(iter(inputs.values())))
        where = f"`{ex.module}` called on {copies} copies of a sentence"
        if entry.get("error"):
            if entry.get("mode") != "train":
                return None  # evaluation mode already ran on every replay: nothing new to say here
            if re.search(r"Double|Float|dtype|float64", entry["error"]):
                return _fail(ex, "wrong_dtype", f"In training mode without a draw of the caller's (keep=None), {where} "
                                                f"raised {entry['error']}: the draw it makes itself is of another "
                                                "dtype than the weights (float64, say). Draw it like the weights: "
                                                "`torch.rand_like(weights)`, or with `dtype=weights.dtype`.")
            return _fail(ex, probe.code, f"In training mode without a draw of the caller's (keep=None), {where} "
                                         f"raised {entry['error']}. When no draw is given, the module makes one "
                                         "of its own.")
        if entry.get("mode_after_train") is False:
            return _fail(ex, "stateful_forward", f"In training mode, {where} switches itself to evaluation mode as it "
                                                 "runs (a `self.eval()` in forward): every call after the first then "
                                                 "drops nothing, whatever `model.train()` said. Leave the mode to the "
                                                 "caller: forward reads `self.training`, it never sets it.")
        ev, tr = np.asarray(entry["eval"], float), np.asarray(entry["train"], float)
        if ev.shape != tr.shape or not np.isfinite(ev).all():
            return None
        if not np.allclose(ev, ev[:1], rtol=ex.rtol, atol=ex.atol):  # copies of one sentence, told apart: a draw
            return _fail(ex, "dropout_in_eval", note=f" (Without a draw of the caller's, keep=None, `{ex.module}` "
                                                     f"in evaluation mode gives {copies} copies of one sentence "
                                                     "different outputs: it still drops weights at random. A new "
                                                     "nn.Dropout made inside forward is always in training mode.)")
        if np.allclose(tr, ev, rtol=ex.rtol, atol=ex.atol):
            return _fail(ex, probe.code,
                         f"In training mode without a draw of the caller's (keep=None), {where} drops nothing: its "
                         "outputs equal those of evaluation mode. When no draw is given, the module makes one of its "
                         "own (each weight kept with probability 1 − p, then divided by 1 − p).")
        if entry.get("changes_itself"):
            return _stateful_forward(ex, "same")
        if entry.get("keep_ignored"):
            return _fail(ex, "given_draw_ignored", ex.hints.get("given_draw_ignored"))
        if entry.get("keep_reused"):
            return _fail(ex, "stale_value", f"Once it has been handed a draw (keep), {where} uses that draw again on "
                                            "later calls that hand none: it keeps it on itself. In training, every "
                                            "call without a draw of the caller's (keep=None) makes a new one of its "
                                            "own; a draw that is handed in is used for that call only.")
        if np.allclose(tr, tr[:1], rtol=ex.rtol, atol=ex.atol) and not entry.get("rng_reset"):
            # every copy dropped the same way (one coin for the whole tensor looks the same from call to call too,
            # when it comes up "keep" both times)
            return _fail(ex, "dropout_draw_shared", note=f" ({where} in training mode, keep=None, gives every copy "
                                                         "the same output.)")
        if entry.get("same_draw"):
            reset = " (torch.manual_seed there also resets the notebook's own generator at every call.)" \
                if entry.get("rng_reset") else ""
            return _fail(ex, "reseeded_each_call", ex.hints.get("reseeded_each_call")
                         or (_RESEEDED_MODULE if entry.get("rng_reset") else _SAME_DRAW_MODULE), reset)
        if entry.get("repeats"):
            return _fail(ex, "generator_put_back", _REPEATED_DRAW_MODULE)
        if ex.torch_seeded and entry.get("seed_repeats") is False:
            return _fail(ex, "dropout_other_generator", note=f" ({where} in training mode, keep=None, called twice "
                                                             "after the same torch.manual_seed, dropped differently.)")
        if np.allclose(tr, tr[:1], rtol=ex.rtol, atol=ex.atol):  # every copy dropped the same way
            return _fail(ex, "dropout_draw_shared", note=f" ({where} in training mode, keep=None, gives every copy "
                                                         "the same output.)")
        if entry.get("draw_shared"):  # one draw broadcast over the heads or the queries (or the keys)
            return _fail(ex, "dropout_draw_shared", _shared_draw_message(list(entry["draw_shared"])))
        if entry.get("draw_elsewhere"):  # a draw the shape of the values or of the output, not of the weights
            shape = "(" + ", ".join(str(n) for n in entry["draw_elsewhere"]) + ")"
            return _fail(ex, "dropout_not_on_weights", note=f" (In training mode without a draw of the caller's, "
                                                            f"keep=None, {where} drew its dropout for a tensor of "
                                                            f"shape {shape}.)")
        mean, spread = tr.mean(axis=0), tr.std(axis=0) / np.sqrt(len(tr))
        if np.isnan(tr).any() or (np.abs(mean - ev[0]) > 6 * spread + 1e-3).any():
            return Outcome(ex.id, "fail", 0, ex.points,
                           f"In training mode without a draw of the caller's (keep=None), {where} gives outputs whose "
                           "average is not the evaluation output, as inverted dropout's would be: your own draw "
                           "keeps the weights with another probability than 1 − p, or rescales them otherwise than "
                           "dividing by 1 − p.")
        if probe.buffer and entry.get("without_buffer") is not None:
            nb = np.asarray(entry["without_buffer"], float)
            if nb.shape == ev.shape and np.array_equal(nb, ev):
                return _fail(ex, "not_as_asked", ex.hints.get("not_as_asked") or
                             f"`{ex.module}`'s output does not depend on its buffer `{probe.buffer}`: the forward "
                             "builds the mask again (or keeps one made from the buffer on an earlier call) instead "
                             "of reading the buffer at every call.")
    return None


def _shared_draw_message(axes: list[str]) -> str:
    """The message for a module's own dropout draw shared by ``axes`` of the weights (batch, heads, query, key)."""
    who = {"batch": "sequence of the batch", "heads": "head", "query": "query", "key": "key"}
    shape = ", ".join("1" if a in axes else ("seq" if a in ("query", "key") else a)
                      for a in ("batch", "heads", "query", "key"))
    drops = {"heads": " (every head drops the same query–key weights)",
             "query": " (every query drops the same keys)", "key": " (each query keeps or drops all its keys at "
             "once)"}
    every = " and every ".join(who[a] for a in axes)
    return (f"Your own dropout draw (keep=None) is the same for every {every}: one draw of shape ({shape}) "
            f"broadcast over the weights{''.join(drops.get(a, '') for a in axes[:1])}. Each attention weight needs its "
            "own draw: draw the keep-mask with the full shape of the weights (torch.rand_like(attn_weights)).")


_RESEEDED_MODULE = (
    "Your module's own draw (keep=None) is the same on every call: forward seeds the random generator "
    "(torch.manual_seed, or a generator seeded there) before it draws, so every training step would drop the same "
    "weights. Seed once, at the top of the notebook; in forward, only draw.")


_REPEATED_DRAW_MODULE = (
    "Your module's own draw (keep=None) is the same at every call: forward draws from torch's generator but leaves "
    "it where it was (a `torch.random.fork_rng()` around the draw, or the generator's state set back after it), so "
    "the next call draws the same numbers and every training step would drop the same weights. Draw, and let the "
    "generator move on.")


_SAME_DRAW_MODULE = (
    "Your module's own draw (keep=None) is the same on every call, whatever state torch's generator is in: forward "
    "draws from a generator of its own seeded there, or the draw is made once (in __init__, or on the first call) "
    "and kept. Every training step must drop other weights: draw anew in forward, from torch's generator "
    "(torch.rand, torch.bernoulli, F.dropout).")


def _module_grad_problem(ex: Exercise, entry: Any) -> Outcome | None:
    """A module whose output does not reach its weights (see :class:`Probe`, ``module_grad``)."""
    if not isinstance(entry, Mapping) or "keeps_grad" not in entry:
        return None
    cut = list(entry.get("cut") or [])
    if entry["keeps_grad"] and not cut and (sparse := list(entry.get("sparse") or [])):
        names = ", ".join(f"`{n}`" for n in sparse)
        return _fail(ex, "not_trainable", f"The gradient of {names} comes out as a sparse tensor (a lookup made with "
                                          "`sparse=True`): AdamW, like most optimizers, refuses to step with it, so "
                                          "training raises. Look the rows up plainly (`table[tokens]`, or "
                                          "`F.embedding` without `sparse=True`).")
    if entry["keeps_grad"] and not cut and (partial := list(entry.get("partial") or [])):
        names = ", ".join(f"`{n}`" for n in partial)
        return _fail(ex, "gradient_cut", f"The gradient of {names} is not the gradient of `{ex.module}`'s output: "
                                         "part of the way the output depends on "
                                         f"{'it' if len(partial) == 1 else 'them'} gets none, or a wrong one, as with "
                                         "a `.detach()` (or "
                                         "`torch.no_grad()`) on one of the paths inside forward, such as the input of "
                                         "a layer detached while the residual around it is not; or a lookup that "
                                         "changes its rows' gradients (`padding_idx`, which gives that row none, "
                                         "`scale_grad_by_freq`). Every parameter still gets a gradient, but not the "
                                         "right one, so training follows a wrong slope. Detach nothing inside "
                                         "forward, and look rows up plainly (`table[tokens]`).")
    if entry["keeps_grad"] and not cut and (train := list(entry.get("train_cut") or entry.get("train_partial") or [])):
        names = ", ".join(f"`{n}`" for n in train)
        how = "does not reach" if entry.get("train_cut") else "misses part of the way the output depends on"
        return _fail(ex, "gradient_cut", f"In evaluation mode the gradient of `{ex.module}`'s output reaches every "
                                         f"weight, but in training mode, the mode it is trained in, it {how} {names}: "
                                         "a branch that runs only in training (`if self.training:`, a dropout) "
                                         "computes under `torch.no_grad()` or with a `.detach()`. A random draw needs "
                                         "no gradient, but what the weights compute must stay in the graph: keep it "
                                         "outside `no_grad` and detach nothing.")
    if entry["keeps_grad"] and not cut:
        return None
    if not entry["keeps_grad"] and entry.get("eval_only"):
        return _fail(ex, "gradient_cut", f"In training mode the gradient of `{ex.module}`'s output reaches every "
                                         "weight, but in evaluation mode the output is cut off from them: a branch "
                                         "that runs only there (`if not self.training:`, `… if self.training else "
                                         "out.detach()`) detaches it or computes under `torch.no_grad()`. A module "
                                         "in evaluation mode still passes gradients back (to fine-tune with dropout "
                                         "off, or to see which inputs an output depends on); leave gradients to the "
                                         "caller (`torch.no_grad()` around the call) and detach nothing inside "
                                         "forward.")
    whom = "its weights" if not entry["keeps_grad"] else ", ".join(f"`{n}`" for n in cut)
    return _fail(ex, "gradient_cut", f"The output of `{ex.module}` is cut off from {whom}: a `.detach()`, "
                                     "`torch.no_grad()` or a trip through NumPy (or a Python list) inside its forward, "
                                     "or a tensor it keeps from an earlier call (one made under `no_grad`, say), "
                                     "so `loss.backward()` cannot reach them and training cannot change them (making "
                                     "the result require a gradient again, with `requires_grad_()` or "
                                     "`torch.tensor(…, requires_grad=True)`, starts a new tensor and does not "
                                     "reconnect it). Keep "
                                     "every step in torch operations on the parameters; detach only to print "
                                     "(the cell may detach the output it prints, the module must not).")


def _module_grad_carried(ex: Exercise, why: str = "its output is cut off from its weights, so training could not "
                                                   "change them") -> Outcome | None:
    """🟡 for a step that only reads its ``module`` (a count of its parameters) when that module is wrong in a way
    its probe measures (``why``: its output cut off from its weights, …): the step's own code is right, the step
    that makes the module (the one with ``trainable`` and the same probe) is not."""
    if ex.trainable:
        return None
    owner = next((o for o in exercises_for(ex.notebook) if o is not ex and o.module == ex.module and o.trainable
                  and any(p.kind == "module_grad" for p in o.probes)), None)
    if owner is None:
        return None
    return Outcome(ex.id, "carried", ex.points, ex.points,
                   f"Your code for this step is right. But `{ex.module}` ({owner.id}) is not right yet: {why}. Fix "
                   "the earlier step, run the cell that makes the module again, then run this cell again.",
                   carried_from=(owner.id,))


def _draw_problem(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    """Wrong answers from a module that makes a draw of its own although it is given one (see :class:`Probe`,
    ``module_dropout``): its training output is random, so no variant can match it."""
    entry = (record.get("probes") or {}).get("module_dropout")
    if isinstance(entry, Mapping) and entry.get("keep_ignored"):
        return _fail(ex, "given_draw_ignored", ex.hints.get("given_draw_ignored"))
    return None


def _step_probe_problem(ex: Exercise, record: Mapping[str, Any], right: bool) -> Outcome | None:
    """How the step's function trains (see :class:`Probe`, ``train_step``). ``right``: its answers are right
    (then the mode and the generator are judged too; a wrong answer has a cause of its own to fix first)."""
    entry = (record.get("probes") or {}).get("train_step")
    name = ex.functions[0] if ex.functions else "Your step"
    inputs = dict(next((p.inputs(None) for p in ex.probes if p.kind == "train_step"), {}))
    if right and isinstance(entry, Mapping) and isinstance(entry.get("error"), str) and "steps" not in entry:
        return Outcome(ex.id, "fail", 0, ex.points,
                       f"Your `{name}` is right on the notebook's stand-in, but given another batch "
                       f"({len(inputs.get('tokens', ()))} sequences) and another learning rate, it raised "
                       f"{entry['error']}. A step computes with the `model`, `optimizer` and `tokens` it is given "
                       "(not with the notebook's `probe_…` variables, nor with their sizes).")
    if not isinstance(entry, Mapping) or "steps" not in entry:
        return None
    if entry["steps"] == 0 and entry.get("changed"):
        return _fail(ex, "optimizer_not_used", ex.hints.get("optimizer_not_used"),
                     f" (Given an SGD optimizer, `{name}` changed the weights, but never called its step().)")
    if entry["steps"] == 0 and right:  # (a wrong step has a cause of its own to fix first)
        return _fail(ex, "optimizer_not_used",
                     f"Your `{name}` never uses the optimizer it is given: given a fresh SGD optimizer and a stand-in "
                     "model, it did not call that optimizer's step(), and the stand-in's weights did not move (an "
                     "optimizer kept from an earlier call, or one of your own, steps other weights or none). Use the "
                     "`optimizer` argument of every call: optimizer.zero_grad(), the loss and loss.backward(), then "
                     "optimizer.step().")
    if isinstance(entry.get("low_precision"), str):
        return _fail(ex, "reduced_precision",
                     f"Your `{name}` trains in {entry['low_precision']}, not float32 (torch.autocast around the "
                     "model, or the model cast with .half() or .bfloat16()): that keeps 2 to 3 significant digits "
                     "where float32 keeps 7, so the losses and the updates are not those of the step asked for (the "
                     "notebook's stand-in multiplies nothing, which can hide it). Train in float32: leave the "
                     "autocast, or the cast, out.")
    if not right:
        return None
    if isinstance(entry["steps"], int) and entry["steps"] > 1:
        return _fail(ex, "not_as_asked",
                     f"Your `{name}` calls the optimizer's step() {entry['steps']} times in one training step (given "
                     "an optimizer with two parameter groups, it stepped once per group, say): every call must update "
                     "the weights once. Call optimizer.step() once, after loss.backward(); it updates every group.")
    unchanged = [n for n in entry.get("unchanged") or [] if isinstance(n, str)]
    if entry.get("changed") and unchanged:
        return _fail(ex, "gradient_cut",
                     f"Your `{name}` moves only some of the model's weights. Run on a stand-in with two parameters, "
                     f"a table of scores and a shift added to every score, it left {_listed(unchanged)} as it was, "
                     "though the loss depends on it: its gradient never reached it (loss.backward(inputs=…) with "
                     "only some of them, an optimizer given a part of model.parameters(), or a parameter detached "
                     "or frozen in the step). Compute the gradient of the loss with respect to every weight: "
                     "loss.backward(), then optimizer.step().")
    lr = inputs.get("lr")
    if isinstance(entry.get("lr_after"), float) and isinstance(lr, float) and not np.isclose(entry["lr_after"], lr):
        return _fail(ex, "optimizer_not_used",
                     f"Your `{name}` changes the optimizer it is given: given one with a learning rate of {lr}, it "
                     f"left it at {entry['lr_after']:g} (an assignment to `param_groups[…][\"lr\"]`, say). "
                     "The caller sets the learning rate (train() gives AdamW 3e-3): a step only calls "
                     "optimizer.zero_grad(), loss.backward() and optimizer.step().")
    if settings := entry.get("settings_changed"):
        key, (was, now) = next(iter(settings.items()))
        return _fail(ex, "optimizer_not_used",
                     f"Your `{name}` changes the optimizer it is given: given one with {key}={was}, it left it at "
                     f"{now} (an assignment to `param_groups[…][\"{key}\"]`, say). The caller chooses the optimizer "
                     "and its settings (train() gives AdamW, whose weight decay is part of it): a step only calls "
                     "optimizer.zero_grad(), loss.backward() and optimizer.step().")
    if entry.get("confident_changed") is False and entry.get("changed"):
        return _fail(ex, "not_as_asked",
                     f"Your `{name}` leaves the weights as they were on a batch the model already gets right (a loss "
                     "of about 0.003, on a stand-in): a step skipped when the loss is small. One step of training "
                     "always updates: a small loss gives a small step, which the optimizer takes.")
    if entry.get("wrong_changed") is False and entry.get("changed") and not record.get("functions_kept"):
        # (a step that keeps the best loss so far on itself skips this one for that reason: told so below)
        return _fail(ex, "not_as_asked",
                     f"Your `{name}` leaves the weights as they were on a batch the model gets badly wrong (a loss "
                     "of about 30, on a stand-in): a step skipped when the loss is large. One step of training "
                     "always updates: a large loss is what training is there to bring down (and what a learning "
                     "rate that is too large shows).")
    if entry.get("grad_graph") is True:
        return _fail(ex, "gradient_graph_kept",
                     f"Your `{name}` leaves gradients that keep the graph that made them (`loss.backward("
                     "create_graph=True)`, or `torch.autograd.grad(…, create_graph=True)`): each step then builds a "
                     "second graph for nothing, keeps it in memory, and ties every parameter to its own gradient in "
                     "a reference cycle. A training step needs plain gradients: `loss.backward()`.")
    if entry.get("one_late") is True:
        return _fail(ex, "step_before_backward",
                     f"Your `{name}` updates the weights one call late. Run three times on a stand-in, it leaves "
                     "them where two plain steps put them: optimizer.step() comes before loss.backward(), so each "
                     "call applies the gradients the call before it left (the first call, none), and the losses it "
                     "returns do not show it. In each call: optimizer.zero_grad(), the loss, loss.backward(), then "
                     "optimizer.step().")
    if [n for n in entry.get("moved_otherwise") or [] if isinstance(n, str)]:
        return _fail(ex, "missing_zero_grad",
                     f"Your `{name}` treats the model's parameters differently. On the check's stand-in, whose one "
                     "parameter is a table of scores, its losses are right; run three times on a stand-in with two "
                     "parameters (that table and a shift added to every score), it moves them otherwise than three "
                     "plain steps (optimizer.zero_grad(), loss.backward(), optimizer.step()) do: the gradients of "
                     "some parameters are not cleared between steps, or not used (a loop over the parameters that "
                     "stops early, say). Clear every gradient with optimizer.zero_grad().")
    if entry.get("large_moved_otherwise") is True and not record.get("functions_kept"):
        # (a step that keeps something on itself between calls skips or changes this one for that reason: told below)
        norm = entry.get("large_norm")
        size = f" (of a norm of about {norm:.0f})" if isinstance(norm, float) and np.isfinite(norm) else ""
        return _fail(ex, "gradients_altered",
                     f"Your `{name}` changes the gradients before the update. Its steps are right on the notebook's "
                     f"stand-in, whose gradients are small; on a stand-in with large gradients{size}, one call moved "
                     "the weights otherwise than a plain step (optimizer.zero_grad(), loss.backward(), "
                     "optimizer.step()) does: the gradients clipped (clip_grad_norm_, clip_grad_value_) or scaled. "
                     "The step asked for uses the gradients as backward() leaves them; how far to move is the "
                     "optimizer's job (its learning rate).")
    rows, batch = entry.get("rows"), entry.get("batch")
    # (the batch in parts, each forwarded once, gradients accumulated: one forward of every sequence all the same)
    parts = isinstance(rows, list) and isinstance(batch, int) and sum(r for r in rows if isinstance(r, int)) == batch
    if len(entry.get("modes") or []) > 1 and not parts:
        return _fail(ex, "forward_twice", ex.hints.get("forward_twice"),
                     f" (Given a stand-in model, `{name}` called it {len(entry['modes'])} times.)")
    # (left in evaluation mode after the step: wrong only if the next call then trains in it, without `model.train()`)
    if not all(entry.get("modes") or [True]) or not all(entry.get("modes_next", [entry.get("training_after", True)])):
        return _fail(ex, "trained_in_eval_mode", ex.hints.get("trained_in_eval_mode"))
    if entry.get("rng_reset"):
        return _fail(ex, "reseeded_each_call", ex.hints.get("reseeded_each_call"))
    if isinstance(entry.get("state_steps"), int) and 0 < entry["state_steps"] < 3:
        return _fail(ex, "optimizer_state_reset",
                     f"Your `{name}` wipes what the optimizer keeps from step to step: called three times with an "
                     f"Adam optimizer, it left a step count of {entry['state_steps']} (`optimizer.state.clear()`, or "
                     "a new state, at every call). AdamW's running averages of the gradients are what make its steps "
                     "steady; without them every step is a first step. Leave the optimizer's state alone: "
                     "zero_grad(), backward(), step().")
    return None


def _module_carried(ex: Exercise, plan: Plan, record: Mapping[str, Any], got0: Arrays,
                    code_right: bool) -> Outcome | None:
    """🟡 for a step about its ``module``'s parameters, whose inputs hand that module over as ``{"trainable": {name:
    array}, "frozen": {…}}`` (a count of trainable numbers), when the answer is right for the student's own module
    (its parameters as the record lists them) and that module is not the notebook's: the step's code is right, the
    module (made by an earlier step) is not. When the replays could not show the code right on other modules (the
    rest of the cell raised, on the student's class), a ❌ that says what is wrong with the module."""
    world0 = plan.inputs[0]
    given = world0.get(ex.module) if ex.module else None
    params = (record.get("module") or {}).get("params")
    if not isinstance(given, Mapping) or set(given) != {"trainable", "frozen"} or not isinstance(params, list) \
            or any(not shape for _, shape, _ in params):  # shapes unknown (the grader's record keeps none)
        return None
    own: dict[str, dict[str, np.ndarray]] = {"trainable": {}, "frozen": {}}
    for name, shape, trainable in params:
        own["trainable" if trainable else "frozen"][str(name)] = np.zeros(tuple(int(n) for n in shape))
    if all({n: np.shape(a) for n, a in own[k].items()} == {n: np.shape(a) for n, a in given[k].items()}
           for k in own):
        return None  # the module is the notebook's (its shapes): the count itself is wrong
    try:
        local = ex.expected({**world0, ex.module: own})
    except Exception:  # noqa: BLE001 — a module the reference cannot count says nothing
        return None
    if _compare(ex, got0, local) is not None:
        return None
    owner = next((o.id for o in exercises_for(ex.notebook) if o.module == ex.module and o is not ex), None)
    plain = (record.get("module") or {}).get("plain_tensors") or []
    frozen = sorted(set(own["frozen"]) - set(given["frozen"]))
    if frozen and own["trainable"]:
        one = len(frozen) == 1
        why = (f"{_listed(frozen)} {'has' if one else 'have'} requires_grad=False, so training would leave "
               f"{'it as it is' if one else 'them as they are'}")
    elif own["trainable"]:
        def listing(params: Mapping[str, Any]) -> str:
            return ", ".join(f"`{n}` {tuple(np.shape(a))}" for n, a in params.items())
        why = f"its trainable parameters are {listing(own['trainable'])}, not {listing(given['trainable'])}"
    else:
        why = "it has no trainable parameters at all" + (
            f" (`{', '.join(plain)}` {'is a plain tensor' if len(plain) == 1 else 'are plain tensors'}, which a "
            "module does not register)" if plain else "")
    fix = "Fix the earlier step, run the cell that makes the module again, then run this cell again."
    module = f"`{ex.module}`{f' ({owner})' if owner else ''}"
    if not code_right:
        raised = (record.get("raised") or {}).get("message")
        return Outcome(ex.id, "fail", 0, ex.points,
                       f"Your `{ex.answers[0]}` is what your own `{ex.module}` holds, but {module} is not right yet: "
                       f"{why}. {fix}" + (f" (This cell also raised {raised}.)" if raised else ""))
    return Outcome(ex.id, "carried", ex.points, ex.points,
                   f"Your code for this step is right: it counts exactly what your own `{ex.module}` holds. But "
                   f"{module} is not right yet: {why}. {fix}", carried_from=(owner,) if owner else ())


def _model_carried(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    """🟡 for a step whose answers are exactly its module's own guesses (see :class:`Probe`, ``module_guesses``)
    when those are wrong: the step's code is right, the module is not (not trained, or trained by an earlier
    version of the code). What the history tells says how to get a right one."""
    probe = next((p for p in ex.probes if p.kind == "module_guesses" and p.own is not None), None)
    entry = (record.get("probes") or {}).get("module_guesses")
    answers = record.get("answers") or []
    if probe is None or not isinstance(entry, Mapping) or not entry.get("guesses") or \
            len(entry["guesses"]) != len(answers) or len(answers) != min(len(plan.inputs), 1 + ex.replays):
        return None
    for got, guesses in zip(answers, entry["guesses"]):
        if _compare(ex, got, probe.own(np.asarray(guesses))) is not None:
            return None
    if problem := _unused_problem(ex, record):  # right numbers for the module, but not the way the step asks
        return problem
    name = ex.answers[0]
    right = total = 0
    for got, inputs in zip(answers, plan.inputs):  # the notebook's sequences, then those the cell was replayed on
        g, w = np.asarray(got[name]), np.asarray(ex.expected(inputs)[name])
        right, total = right + (int((g == w).sum()) if g.shape == w.shape else 0), total + w.size
    history = entry.get("history") or {}
    made, trained, defined = history.get("made"), history.get("trained"), history.get("step_defined")
    model = f"`{ex.module}`"
    again = f"Make the model again (run the cell that creates {model}) and run the training cell again"
    carried: tuple[str, ...] = ()
    if stale := history.get("stale_classes"):
        names = " and ".join(f"`{c}`" for c in stale)
        cause = (f"it was made from an earlier version of {names}: you ran the cell that defines "
                 f"{'it' if len(stale) == 1 else 'them'} again since. {again}.")
    elif made is not None and (trained is None or trained < made) and \
            (raised := history.get("train_raised")) and raised.get("run", -1) > made:
        where = f" (in `{raised['raised_in']}`)" if raised.get("raised_in") else ""
        steps = ", ".join(ex.depends_on) or "the steps before"
        cause = (f"the training cell raised {raised.get('error')}{where} the last time it ran, so the model was not "
                 f"trained. The error comes from a step it trains with ({steps}): a step can give right numbers "
                 f"and still break training. Fix it, then {again[0].lower()}{again[1:]}.")
        carried = tuple(ex.depends_on)
    elif made is not None and (trained is None or trained < made):
        cause = "it has not been trained since it was made. Run the training cell."
    elif defined is not None and trained is not None and defined > trained and (step := history.get("step")):
        owner = [d for d in ex.depends_on if step in (*get(d).functions, *get(d).answers)]
        cause = f"it was trained before your last change to `{step}`{f' ({owner[0]})' if owner else ''}. {again}."
        carried = tuple(owner)
    else:
        steps = ", ".join(ex.depends_on) or "the steps before"
        cause = (f"it was trained with the code you have now, and did not learn: a step it is made or trained with "
                 f"is not right yet ({steps}: a ❌ there says what). Fix it, then {again[0].lower()}{again[1:]}.")
        carried = tuple(ex.depends_on)
    return Outcome(ex.id, "carried", ex.points, ex.points,
                   f"Your code for this step is right: `{name}` are your {model}'s own guesses, made as the step "
                   f"asks. But the model has not learned the task ({right} of its {total} guesses on the sequences "
                   f"tried are right): {cause} "
                   "Then run this cell again.", carried_from=carried)


def behind_note(ex: Exercise, behind: Sequence[str]) -> str:
    """What to add to the message of ``ex`` when the steps ``behind`` (of its ``depends_on``) are failing."""
    if ex.kind == "function":
        return f" Note: {', '.join(behind)} is not passing yet, and this function uses it; fix that one first."
    return f" Not passing yet: {', '.join(behind)}."


def _own_agreement(ex: Exercise, record: Mapping[str, Any]) -> float:
    """The share of the notebook's answers that equal what the module's own guesses give (see :class:`Probe`,
    ``module_guesses``); 1 when that was not measured."""
    probe = next((p for p in ex.probes if p.kind == "module_guesses" and p.own is not None), None)
    entry = (record.get("probes") or {}).get("module_guesses")
    answers = record.get("answers") or []
    if probe is None or not isinstance(entry, Mapping) or not entry.get("guesses") or not answers:
        return 1.0
    own = probe.own(np.asarray(entry["guesses"][0]))
    shares = [float(np.mean(np.asarray(answers[0][n]) == own[n])) for n in ex.answers
              if n in answers[0] and np.shape(answers[0][n]) == np.shape(own[n])]
    return min(shares) if len(shares) == len(ex.answers) else 0.0


def _inlined_message(ex: Exercise, name: str, record: Mapping[str, Any] | None = None) -> str:
    """The message for a cell that uses this notebook's value of ``name`` instead of the variable."""
    if name in ((record or {}).get("rebound") or ()):  # the cell binds the given name anew before it uses it
        return (f"Your cell assigns `{name}` itself (typed in, or made again), so its answer comes from that and "
                f"not from the `{name}` the notebook gives it: it is wrong for any other `{name}`. Leave `{name}` as "
                "it is and compute from it.")
    if ex.module and name in ex.given_as:
        return (f"Your module does not use the `{name}` it is given: its output is what this notebook's `{name}` "
                f"gives (a number typed in, or the value rebuilt another way), so it is wrong for a module made or "
                f"called with another `{name}`. Use {ex.given_as[name]}.")
    return (f"Your cell does not use the variable `{name}` itself: its answer is what this notebook's `{name}` gives "
            f"(its numbers typed in, another variable the notebook computed from it, or the result rebuilt another "
            f"way), so it is wrong for any other `{name}`. Compute it from `{name}`.")


def _blamed_scalars(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> dict[str, float]:
    """The notebook's numbers a function reads from its globals, when they can explain its failure: it was
    right on the notebook's own example (where those numbers are the inputs' own) and not on other inputs."""
    scalars = record.get("scalars_read") or {}
    answers = record.get("answers") or []
    if not scalars or ex.kind != "function" or not answers or not plan.inputs:
        return {}
    if _compare(ex, answers[0], ex.expected(plan.inputs[0])) is not None:
        return {}
    return dict(scalars)


# the names of sizes and counts in the notebooks: a function that reads one of them from the notebook's globals reads
# what its arguments' shapes say
_SIZE_NAME = re.compile(r"^(?:d(?:_\w+)?|n(?:_\w+)?|num_\w+|seq(?:_len)?|max_len|block(?:_size)?|batch(?:_size)?|"
                        r"heads|n_heads|length|LENGTH|SEQ_LEN|D_MODEL|D_K|VOCAB|vocab(?:_size)?|DIGITS|digits)$")


def _shape_example(ex: Exercise) -> str:
    """How a size is read from the function's first array argument, in its own name (`q.shape[-1]`)."""
    try:
        example = ex.inputs()
        first = next(n for n in inspect.signature(ex.reference).parameters if np.ndim(example.get(n)) > 0)
    except Exception:  # noqa: BLE001 — no array among the arguments, or inputs that need a generator
        return "(their shapes)"
    return f"(`{first}.shape[-1]`, …)"


def _reads_scalars(ex: Exercise, scalars: Mapping[str, float], then: str) -> str:
    names = ", ".join(f"`{n}` (= {v:g} here)" for n, v in scalars.items())
    return f"`{ex.answers[0]}` reads the notebook's {names} instead of its own arguments, {then}"


def _buffer_size_problem(ex: Exercise, made: str, max_len: int, entry: Mapping[str, Any]) -> Outcome | None:
    """A square mask buffer of a new module must be made for the ``max_len`` it was given: one whose last two
    sizes are equal but not ``max_len`` was made for a size typed in."""
    buffers = [b for b in entry.get("buffers") or [] if isinstance(b, list) and len(b) == 2
               and isinstance(b[1], list) and len(b[1]) >= 2 and b[1][-1] == b[1][-2]]
    if not buffers or any(b[1][-1] == max_len for b in buffers):
        return None
    name, shape = buffers[0]
    return _fail(ex, "hard_coded", f"{made[:-5]} and max_len = {max_len}: its buffer `{name}` has shape "
                                   f"{tuple(shape)}, made for {shape[-1]} tokens whatever max_len is. Make the causal "
                                   "mask from the max_len the module is given, (max_len, max_len), so that it "
                                   "serves any sequence up to that length.")


def _module_init_problem(ex: Exercise, probe: Probe, inputs: Mapping[str, Any], entry: Any) -> Outcome | None:
    """How a new module's square weights start (see :class:`Probe`, ``module_init``). Only what was measured
    is judged: a class that cannot be made with the probe's keywords says nothing here."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("params"), list):
        return None
    d = inputs["d_model"]
    want = float(probe.limit(inputs))
    square = [p for p in entry["params"] if list(p[1]) == [d, d]]
    made = f"A new module of your class, made with d_model = {d}: its"
    for name, _, _spread, constant, finite in square:
        if not finite or constant:
            state = "is not all finite numbers (torch.empty leaves whatever was in memory)" if not finite else \
                "has every entry equal"
            return _fail(ex, "init_not_random", note=f" ({made} `{name}` {state}.)")
    for name, share in (entry.get("repeated") or {}).items():
        if any(p[0] == name for p in square):
            return _fail(ex, "init_not_random", f"{made} `{name}` starts with {share:.1%} of its entries equal, as "
                                                "an identity matrix (torch.eye) does: its spread may look right, but "
                                                "it is no random draw, and the features it starts from are not "
                                                "mixed. Start every weight random: torch.randn(d_model, d_model) / "
                                                "√d_model.")
    if isinstance(n := inputs.get("max_len"), int) and (problem := _buffer_size_problem(ex, made, n, entry)):
        return problem
    if entry.get("drops_at_zero") is True:
        return _fail(ex, "dropout_rate_replaced", note=" (A new module of your class, made with dropout = 0: two "
                                                      "calls in training mode on the same tokens differ.)")
    means = entry.get("means") or {}
    for name, _, spread, _constant, _finite in square:
        mean = means.get(name)
        if isinstance(mean, float) and abs(mean) > spread / 2:  # torch.rand: all of one sign, centred on 0.5·scale
            return _fail(ex, "init_not_centred", note=f" ({made} `{name}` starts with a mean of {mean:.3g} and a "
                                                      f"spread of {spread:.3g}.)")
    for name, _, spread, _constant, _finite in square:
        # from a uniform draw in ±1/√d_model (spread 0.58/√d_model) to a normal one a little wider; a He start,
        # √(2/d_model), is wider than the step asks for
        if not want / 2 <= spread <= want * 1.25:
            return _fail(ex, "init_unscaled", note=f" ({made} `{name}` starts with a spread (standard deviation) "
                                                   f"of {spread:.3g}; 1/√d_model is {want:.3g}.)")
    return None


def _describe_inputs(inputs: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} of shape {tuple(np.shape(v))}" if isinstance(v, np.ndarray) else f"{k}={v!r}"
                     for k, v in inputs.items())


def diagnose(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> str | None:
    """Name the mistake whose wrong variant reproduces the answer on every trial where it can be
    told apart from the reference. When several do, the one that explains the answer on the most
    trials wins (a variant that cannot be told apart on some trial says nothing there); returns None
    when no variant matches, or several match equally. When none matches at the tolerance, each variant
    is allowed the change that a float32 computation's rounding makes in it (see :data:`ROUNDING_ULPS`).

    When none matches, the trials where the answer holds NaN or inf are left out (if two trials or more remain):
    an answer with two faults, one of which overflows on the large-scores trial (a softmax without its maximum as
    well), is named by the other on the rest."""
    memo: dict[Any, Any] = {}  # each variant on each trial computed once, for the passes below
    code = _diagnose(ex, trials, False, memo) or _diagnose(ex, trials, True, memo)
    if code is None:
        # (and the trials where a row of the answer came out all 0 where the right one is not: a sum of exponentials
        # that overflowed on its own, x / inf, is that fault's other face)
        finite = [t for t in trials if all(_all_finite(v) for v in t[0].values()) and not _collapsed(ex, *t)]
        if 2 <= len(finite) < len(trials):
            code = _diagnose(ex, finite, False, memo) or _diagnose(ex, finite, True, memo)
    return code


def _collapsed(ex: Exercise, got: Arrays, inputs: Mapping[str, Any]) -> bool:
    """Does a row (the last axis) of the answer hold only zeros where the right answer's row does not?"""
    try:
        want = ex.expected(inputs)
        for name, value in got.items():
            a, b = np.asarray(value, dtype=np.float64), want.get(name)
            if b is not None and a.ndim >= 1 and a.shape == b.shape and a.shape[-1] > 0 \
                    and ((a == 0).all(axis=-1) & ~(b == 0).all(axis=-1)).any():
                return True
    except Exception:  # noqa: BLE001 — answers of another shape or kind: nothing collapsed
        return False
    return False


_EXP_ABOVE = {"float16": "11.1", "bfloat16": "88.7", "float32": "88.7", "float64": "709.8"}
_EXP_BELOW = {"float16": "−17.3", "bfloat16": "−92", "float32": "−103.9", "float64": "−745.1"}


def _nonfinite_origin(ex: Exercise, record: Mapping[str, Any], answers: Sequence[Arrays],
                      inputs: Sequence[Mapping[str, Any]], trial: str) -> tuple[str | None, str] | None:
    """What made the first NaN or infinity of a trial's answer, where the right answer is finite there: the code and
    the message (the code None where no catalogued mistake is certain), from the operations watched when that trial
    was run once more (``record["nonfinite"]``, :mod:`helpers.runtime.nonfinite`); None where nothing was seen."""
    seen = record.get("nonfinite")
    if not isinstance(seen, Mapping) or type(i := seen.get("trial")) is not int or not 0 <= i < min(
            len(answers), len(inputs)):
        return None
    name = ex.answers[0]
    got = answers[i].get(name)
    try:
        want = ex.expected(inputs[i]).get(name)
    except Exception:  # noqa: BLE001 — no reference for these inputs: nothing to say
        return None
    if got is None or want is None or np.shape(got) != np.shape(want) or got.dtype.kind != "f":
        return None
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(got) & np.isfinite(want)
    if not bad.any():
        return None
    at = tuple(int(j) for j in np.argwhere(bad)[0])
    value = got[at]
    shown = "NaN" if np.isnan(value) else "inf" if value > 0 else "−inf"
    events = {k: e for k in ("nan", "inf", "neg") if isinstance(e := seen.get(k), Mapping)}
    slot = {"NaN": "nan", "inf": "inf", "−inf": "neg"}[shown]
    if slot != "nan":  # an infinity: the earliest made (−log of a probability that underflowed: the log's −∞ first)
        slot = min((k for k in ("inf", "neg") if k in events), key=lambda k: events[k].get("seq", 9), default=slot)
    event = events.get(slot)
    if event is None:
        return None
    label = f"`{name}`" if ex.kind == "value" else f"`{name}(...)`"
    head = f"{label}{trial} contains {shown} (first at index {at})"
    after = event.get("after") if isinstance(event.get("after"), Mapping) else {}
    kind, op = event.get("kind"), str(event.get("op") or "")[:40]
    op = op if op.isidentifier() else "an operation"
    number = event.get("value") if isinstance(event.get("value"), float) else None
    if kind == "overflow" or after.get("kind") == "overflow":
        first = event if kind == "overflow" else after
        dtype, x = str(first.get("dtype") or ""), first.get("value")
        exp = str(first.get("op") or "")
        how = f"`{exp}` of {x:.4g} is inf in {dtype}" if isinstance(x, float) and dtype in _EXP_ABOVE \
            and exp.isidentifier() else "exp of a number above 88.7 is inf in float32, above 709.8 in float64"
        then = ", and what comes of an infinity next (inf / inf, inf − inf, inf · 0) is NaN" if shown == "NaN" else ""
        return "exp_overflow", (f"{head}: an exponential overflowed first ({how}){then}. Hand exp only numbers of at "
                                "most 0: subtract from each score the largest score of its row before exp (that "
                                "changes no result, and the largest exponential is then exp(0) = 1). The maximum is "
                                "that of the very numbers exp is handed: of the scaled scores if the scores are "
                                "scaled, not of the raw ones.")
    if shown == "NaN" and kind == "zero_by_zero" and after.get("kind") == "underflow":
        dtype, x, exp = str(after.get("dtype") or ""), after.get("value"), str(after.get("op") or "")
        if isinstance(x, float) and dtype in _EXP_BELOW and exp.isidentifier():
            how = (f": every exponential of one row came out 0 (the largest number handed to `{exp}` in that row was "
                   f"{x:.4g}, and in {dtype} exp of anything below about {_EXP_BELOW[dtype]} is 0), so that row sums "
                   "to 0, and 0 / 0 is NaN")
        else:
            how = (f": a division (`{op}`) gave 0 / 0 after exponentials underflowed to 0 (exp of a number far below "
                   "0 is 0: below about −103.9 in float32, −745.1 in float64), as a row whose exponentials are all 0 "
                   "does: its sum is 0")
        known = isinstance(x, float) and dtype in _EXP_BELOW and exp.isidentifier()
        return "exp_underflow", (f"{head}{how}. Subtract from each score the largest score of its row, whatever "
                                 "its sign, so that the largest exponent is exactly 0: one exponential of each row is "
                                 "then 1, and no sum is 0. (If your code does subtract it, look at what else goes "
                                 "through exp: a row of shifted scores hands it exactly 0 at most"
                                 + (f", and this one was handed {x:.4g} at most.)" if known else ".)"))
    if shown == "NaN" and (kind == "masked_row" or kind == "zero_by_zero" and after.get("kind") == "masked_row"):
        return "fully_masked_row", (f"{head}: in one row every score is −∞ (every key of that query hidden), so "
                                    f"that row's softmax is 0 / 0 = NaN (`{op}`). Each query must keep at least one "
                                    "key it may see: check which scores your code sets to −∞.")
    # (a 0 / 0, inf / inf, inf − inf or log of 0 with nothing seen before it: the message every NaN gets lists the
    # usual causes, which says more than the operation alone)
    plain = {"negative": f"`{op}` of a negative number{f' ({number:.4g})' if number is not None else ''} is NaN: "
                         "which number there can be negative?",
             "div_by_zero": f"a division by 0 (`{op}`) made it.",
             "cast_overflow": f"a number beyond the range of its new dtype became inf where it was converted "
                              f"(`{op}`)."}
    if kind in plain:
        return None, f"{head}: {plain[kind]}"
    return None


def _finite_trials(trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> list[tuple[Arrays, Mapping[str, Any]]]:
    """The trials whose answer holds no NaN or inf (an answer computed another way than the step asks, which
    overflows on the large-scores trial, is judged nearly right on the others)."""
    return [t for t in trials if all(_all_finite(v) for v in t[0].values())]


def _all_finite(value: Any) -> bool:
    try:
        return bool(np.isfinite(np.asarray(value, dtype=np.float64)).all())
    except (TypeError, ValueError):
        return True


def _diagnose(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]], rounding: bool,
              memo: dict[Any, Any] | None = None) -> str | None:
    matches: dict[str, frozenset[int]] = {}
    # the reference and each variant on each trial, computed once (a long probe input is costly), by the trial's
    # inputs (the same objects in every pass of one diagnosis)
    memo = {} if memo is None else memo

    def once(key: Any, compute: Callable[[], Any]) -> Any:
        if key not in memo:
            try:
                memo[key] = (compute(), None)
            except Exception as exc:  # noqa: BLE001 — kept, to be raised again on the next pass too
                memo[key] = (None, exc)
        value, exc = memo[key]
        if exc is not None:
            raise exc
        return value

    # the small trials first: a variant that does not explain the answer is mostly told so before a long input's
    # turn (the outcome does not depend on the order)
    order = sorted(range(len(trials)), key=lambda t: trial_size(trials[t][1]))
    for code in ex.mistakes:
        informative: set[int] = set()
        ok = True
        for t in order:
            got, inputs = trials[t]
            try:
                wrong = once((code, id(inputs)), lambda: ex.variant(code, inputs))  # noqa: B023 — called at once
                right = once(("", id(inputs)), lambda: ex.expected(inputs))  # noqa: B023
            except Exception:  # a variant undefined for these inputs says nothing
                continue
            if right is None:
                continue
            if _close(wrong, right, ex.answers, ex.rtol, ex.atol):
                continue
            informative.add(t)
            if not _close(got, wrong, ex.answers, ex.rtol, ex.atol, _slack(ex, code, inputs, wrong) if rounding
                          else None):
                ok = False
                break
        if ok and informative:
            matches[code] = frozenset(informative)
    best = [c for c, seen in matches.items() if not any(seen < other for other in matches.values())]
    # (two forms of one mistake, `code` and `code:float32`, that both explain the answer name it once)
    return best[0] if len({code_of(c) for c in best}) == 1 else None


def _nearly_right(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> bool:
    """Every trial's answer agrees with the reference to about three digits (rounding error of another way to
    compute it, not another result)."""
    try:
        return bool(trials) and all(_close(got, ex.expected(inputs), ex.answers, 1e-3, 1e-5) for got, inputs in trials)
    except Exception:  # noqa: BLE001 — answers of another shape or kind
        return False


def _sign(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> str | None:
    """The mistake of :attr:`Exercise.signs` whose test holds on every trial the answer is wrong on (None: no
    such trial, or not exactly one such mistake)."""
    if not ex.signs:
        return None
    wrong, right = [], []
    for got, inputs in trials:
        (right if _close(got, ex.expected(inputs), ex.answers, ex.rtol, ex.atol) else wrong).append((got, inputs))
    found = []
    for code, test in ex.signs.items():
        try:
            # a sign that computes the answer the mistake gives (``refutable``) must also hold where the answer is
            # right: there, that mistake would have given another number
            # (``shows``: inputs on which that mistake is wrong for certain; an answer right there has not made it)
            shows = getattr(test, "shows", lambda _: False)
            refuted = getattr(test, "refutable", False) and not all(test(got, inputs) for got, inputs in right)
            if wrong and all(test(got, inputs) for got, inputs in wrong) and not refuted \
                    and not any(shows(inputs) for _, inputs in right):
                found.append(code)
        except Exception:  # noqa: BLE001 — an answer of another shape or kind: not that sign
            continue
    if not found and wrong:
        # forms of one mistake (`unstable_softmax` and `unstable_softmax:sum`), each shown by some of the trials: the
        # mistake itself (a softmax that shifts only when a NaN shows gives NaN on a row far below 0, 0s on a row
        # whose sum alone overflows)
        families: dict[str, list[Callable[..., bool]]] = {}
        for code, test in ex.signs.items():
            if not getattr(test, "refutable", False):
                families.setdefault(code_of(code), []).append(test)
        found = [base for base, tests in families.items() if len(tests) > 1
                 and all(any(_holds(test, got, inputs) for test in tests) for got, inputs in wrong)]
    return found[0] if len(found) == 1 else None


def _holds(test: Callable[..., bool], got: Arrays, inputs: Mapping[str, Any]) -> bool:
    try:
        return bool(test(got, inputs))
    except Exception:  # noqa: BLE001 — an answer of another shape or kind: not that sign
        return False


def _explained(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]], record: Mapping[str, Any],
               note: str = "") -> Outcome | None:
    """The first mistake of :attr:`Exercise.explains` that explains the answers, with its own message."""
    for code, explain in ex.explains.items():
        try:
            message = explain(ex, trials, record)
        except Exception:  # noqa: BLE001 — answers of another shape or kind: not that mistake
            continue
        if message:
            return _fail(ex, code, message, note)
    return None


def _discarded_problem(ex: Exercise, record: Mapping[str, Any], note: str = "") -> Outcome | None:
    """A wrong answer whose code computes a result on a line of its own and keeps nothing of it
    (``scores.masked_fill(mask, -inf)`` without ``scores =``): most likely the step that went missing."""
    calls = [c for c in record.get("discarded") or [] if isinstance(c, str)]
    if not calls:
        return None
    return _fail(ex, "result_discarded",
                 f"Your line `{calls[0]}` computes a new tensor and nothing keeps it, so it changes nothing: the "
                 f"tensor it is called on stays as it was. Assign its result to a name (or use the in-place "
                 f"version ending in _, where there is one) and go on from there.", note)


def _answer_not_made(ex: Exercise, message: str) -> str | None:
    """The step's own answer that a replay of its cell found undefined: the cell uses it but never makes it."""
    m = re.match(r"NameError: name '(\w+)' is not defined", message)
    return m.group(1) if m and m.group(1) in ex.answers else None


def _rounded_answer(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]],
                    tol: tuple[float, float] | None = None) -> Outcome | None:
    """The right numbers rounded to k decimals (`.round(decimals=4)`, `np.round(…, 3)`) on every trial where the
    answer is wrong (beyond ``tol``, the step's own tolerance by default): every entry a multiple of 10^-k, within
    half of it of the reference's. A float64 step's numbers must sit on the grid to double precision."""
    rtol, atol = tol or (ex.rtol, ex.atol)
    wrong, right = [], []
    for got, inputs in trials:
        want = ex.expected(inputs)
        (right if _close(got, want, ex.answers, rtol, atol) else wrong).append((got, want))
    if not wrong:
        return None
    grid = 1e-12 if ex.dtype == "float64" else 1e-6  # float32 cannot hold 6 decimals exactly
    # 0 only where the step asks for floats (elsewhere whole numbers are more often an integer dtype than a rounding:
    # a float step's integer dtype is told first); up to 10 decimals in float64, 6 in float32
    first = 0 if ex.dtype in ("float32", "float64") else 1
    for k in range(first, 11 if ex.dtype == "float64" else 7):
        step = 10.0 ** -k
        rounded: set[str] = set()
        entries, seen = 0, False
        try:
            for got, want in wrong:  # every answer either right or the right numbers rounded, one of them rounded
                for n in ex.answers:
                    g, w = np.asarray(got[n], float), np.asarray(want[n], float)
                    if g.shape == w.shape and _allclose(g, w, rtol, atol):
                        continue
                    if not _rounded_to(g, w, step, grid):
                        raise ValueError
                    rounded.add(n)
                    entries += int(np.sum(~np.isclose(g, w, rtol=rtol, atol=atol)))
                    seen = seen or _grid_seen(g, w, step, grid)
            # a rounding rounds every trial: one whose numbers are right within the tolerance but off this grid (a
            # rounding to 6 decimals, on a trial of large numbers, against a trial whose few wrong numbers happen to
            # sit on a grid of 0.1) says the rounding is another
            # (its numbers that moved: a function's answer may hold a rounded total beside a maximum left as it is)
            # (in float64 only: float32's slack puts any number above 1e-3 on a grid of 6 decimals)
            for got, want in right if grid < 1e-6 else ():
                for n in ex.answers:
                    g, w = np.asarray(got[n], float), np.asarray(want[n], float)
                    moved = g != w if g.shape == w.shape else None
                    if moved is not None and moved.any() and not _rounded_to(g[moved], w[moved], step, grid):
                        raise ValueError
        except (KeyError, TypeError, ValueError):
            continue
        if rounded and not seen:  # (numbers so large that this grid cannot be told: no rounding to k decimals seen)
            continue
        if rounded and k <= 2 and entries < 2:  # one wrong number on a grid of 0.1 or 0.01 may be there by chance
            return None
        if rounded:
            which = "Your numbers are" if len(ex.answers) == 1 else \
                f"Your {', '.join(f'`{n}`' for n in sorted(rounded))} {'holds' if len(rounded) == 1 else 'hold'}"
            to = f"{k} decimal{'s' if k > 1 else ''}" if k else "whole numbers (`.round()`, `torch.round`)"
            return _fail(ex, "rounded_answer",
                         f"{which} the right {'ones' if len(ex.answers) == 1 else 'numbers'} rounded to {to}. Keep "
                         "them at full precision: round only what you print.")
    return None


def _rounded_within_tolerance(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> Outcome | None:
    """An answer that is the right numbers rounded to k ≤ 4 decimals where that rounding stays inside the step's
    tolerance (values of about 0.5 or more at 4 decimals, float32's rtol): every entry of that answer, on every
    trial, sits on the 10^-k grid (to float32's precision, :func:`_rounded_to`), while the reference's entries
    mostly do not — a right answer computed from inputs with few decimals is on the grid as its reference is, and
    is not taken for a rounding."""
    if not trials:
        return None
    for name in ex.answers:
        try:
            pairs = [(np.asarray(got[name], float), np.asarray(ex.expected(inputs)[name], float))
                     for got, inputs in trials]
        except Exception:  # noqa: BLE001 — answers that are not numbers, a reference that cannot say
            return None
        total = sum(w.size for _, w in pairs)
        for k in range(1, 5):
            step = 10.0 ** -k
            off_grid = 0
            for got, want in pairs:
                if not _rounded_to(got, want, step):
                    break
                off_grid += int(np.sum(np.abs(want / step - np.round(want / step)) > 0.01))
            else:
                if off_grid >= max(3, total // 4):
                    which = "Your numbers are the right ones" if len(ex.answers) == 1 else \
                        f"Your `{name}` holds the right numbers"
                    return _fail(ex, "rounded_answer",
                                 f"{which} rounded to {k} decimal{'s' if k > 1 else ''}. "
                                 "Keep them at full precision: round only what you print.")
    return None


def _clamped_within_tolerance(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> Outcome | None:
    """An answer within the step's tolerance that is the right numbers held up at a floor all the same (weights
    clamped up to 1e-6 "for a log later"): on some trial two entries or more are exactly its smallest number, a
    positive one, where the right numbers are below half of it. (A ceiling is not judged: the numbers a right
    float32 answer rounds cannot be told from one held down by 1e-6.)"""
    eps = float(np.finfo(np.float64 if ex.dtype == "float64" else np.float32).eps)
    for name in ex.answers:
        for got, inputs in trials:
            try:
                g, w = np.asarray(got[name], float), np.asarray(ex.expected(inputs)[name], float)
            except Exception:  # noqa: BLE001 — answers that are not numbers, a reference that cannot say
                return None
            if g.shape != w.shape or g.size < 3 or not (np.isfinite(g).all() and np.isfinite(w).all()):
                continue
            lo = float(g.min())
            at_lo = g == lo
            # (above 1e-12: far from float32's subnormal numbers, which a right float32 answer does hold)
            if lo > 1e-12 and int((at_lo & (w < lo / 2)).sum()) >= 2 and not (at_lo & (w > lo * (1 + 8 * eps))).any():
                which = "Your numbers are" if len(ex.answers) == 1 else f"Your `{name}` is"
                if _offset_by(ex, name, trials, lo):
                    return _fail(ex, "stray_offset",
                                 f"{which} the right ones plus {_fmt(lo)}, on every entry: a difference too small "
                                 "to see in most of them, but where the right numbers are near 0 yours are "
                                 f"{_fmt(lo)} (weights that should vanish do not, and a row no longer sums to "
                                 f"exactly 1). No right computation adds that: find the leftover `+ {_fmt(lo)}` (an "
                                 "epsilon added to the result) and take it out.")
                return _fail(ex, "clamped",
                             f"{which} right to within rounding, but never go below {_fmt(lo)}, where some of the "
                             f"right ones do: two or more of them sit exactly at {_fmt(lo)}. A clamp or a clip in "
                             "your code (an epsilon floor such as `clamp(min=1e-6)`) holds them there. Take it out: "
                             "the right numbers can be that small.")
    return None


def _offset_by(ex: Exercise, name: str, trials: Sequence[tuple[Arrays, Mapping[str, Any]]], c: float) -> bool:
    """Is ``name`` the right numbers plus ``c`` (`w + 1e-9`), not held up at ``c`` (a clamp)? The two agree where
    the right numbers are far below c; where they are a little above it (2c to 10⁴c, where float32 rounds them by
    far less than c), a clamp leaves them as they are and an offset still adds c: nine in ten such entries (five at
    least, over every trial) are off by c, to within a quarter of it."""
    moved = []
    for got, inputs in trials:
        try:
            g, w = np.asarray(got[name], float), np.asarray(ex.expected(inputs)[name], float)
        except Exception:  # noqa: BLE001 — answers that are not numbers, a reference that cannot say
            return False
        if g.shape != w.shape or not (np.isfinite(g).all() and np.isfinite(w).all()):
            continue
        near = (w > 2 * c) & (w < 1e4 * c)
        moved.append((g[near] - w[near]) / c)
    r = np.concatenate(moved) if moved else np.empty(0)
    return r.size >= 5 and float(np.quantile(np.abs(r - 1.0), 0.9)) <= 0.25


def _zeroed_small(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> Outcome | None:
    """An answer that is right except that its small numbers are set to 0 (``w[w < 1e-5] = 0``, ``torch.where(
    out.abs() > 1e-3, out, 0)``): on some trial it holds exact zeros where the right number is not ~0 (above what
    rounding leaves where the exact number is 0; and for an answer with entries of both signs, above 1e-5 of its
    largest entry, where no rounding of a right float32 sum lands exactly on 0), every entry whose size is below the
    largest of those is 0 too (a threshold, not a ReLU), those are all small (at most 5 % of the largest entry of any
    trial), and every other entry is right."""
    zeroed, largest = 0, 0.0
    for name in ex.answers:
        pairs = []
        for got, inputs in trials:
            try:
                g, w = np.asarray(got[name], float), np.asarray(ex.expected(inputs)[name], float)
            except Exception:  # noqa: BLE001 — answers that are not numbers, a reference that cannot say
                return None
            if g.shape == w.shape and np.isfinite(w).all() and not np.isfinite(g).all():
                return None  # NaN or inf where the right numbers are finite: wrong in another way (an overflow)
            if g.shape == w.shape and g.size > 1 and np.isfinite(w).all() and np.isfinite(g).all():
                pairs.append((g, w))  # (one number set to 0 is no threshold: a count of 0 bytes, say)
        # (a right float32 sum is off by a few of float32's steps of the array's largest entry; float64, by far less)
        noise = 1e-12 if ex.dtype == "float64" else 2e-6
        moved = any(((g != 0) & (np.abs(g - w) > noise * float(np.abs(w).max()) + 1e-300)).any() for g, w in pairs)
        if moved and any(all(_rounded_to(g, w, 10.0 ** -k) for g, w in pairs) for k in range(1, 16)):
            return None  # rounded to k decimals (which sets the smallest to 0 too, and moves others): said elsewhere
        # (the largest entry of a typical trial: one of small numbers may have every entry cut; the median of the
        # trials' largest entries, so that one of numbers in the thousands does not make every other trial "small")
        scale = float(np.median([float(np.abs(w).max()) for _, w in pairs])) if pairs else 0.0
        # above the rounding of a right computation where the exact number is 0 (the float64 reference may hold
        # 3e-17 there, a right float32 answer 0): of any trial's largest entry, 1e-14 in float64, 1e-9 in float32
        noise = max((1e-14 if ex.dtype == "float64" else 1e-9) * scale, 1e-30)
        for g, w in pairs:
            # and in float32, half a step of float32 at this trial's largest entry (2**-24: `expm1(t) + 1`, a right
            # formula, rounds an exponential below that to 0)
            own = noise if ex.dtype == "float64" else max(noise, 2.0**-24 * float(np.abs(w).max()))
            floor = own if (w >= 0).all() else max(1e-5 * float(np.abs(w).max()), own)
            cut = (g == 0) & (np.abs(w) > floor)
            rest = ~cut & ~((g == 0) & (np.abs(w) <= floor))  # (the tiniest ones set to 0 too: not judged)
            # (to the default tolerances at least: dropping small terms before a division moves the others a little)
            if not np.allclose(g[rest], w[rest], rtol=max(ex.rtol, 1e-4), atol=max(ex.atol, 1e-6)):
                return None  # wrong in another way
            if not cut.any():
                continue
            top = float(np.abs(w[cut]).max())
            below = (np.abs(w) > floor) & (np.abs(w) <= top)
            # small for every trial, and for this one too unless it is a trial of small numbers (below 1 % of the
            # largest entry of any trial)
            peak = float(np.abs(w).max())
            if top > 0.05 * scale or (g[below] != 0).any() or (peak >= 0.01 * scale and top > 0.05 * peak):
                return None
            zeroed, largest = zeroed + int(cut.sum()), max(largest, top)
    if not zeroed:
        return None
    return _fail(ex, "small_values_zeroed",
                 "Your numbers are right except that the small ones are set to 0: "
                 + (f"one of them, {largest:.3g}, is 0 where it should not be" if zeroed == 1 else
                    f"{zeroed} of them, the largest {largest:.3g}, are 0 where they should not be")
                 + " (a line such as `x[x.abs() < 1e-3] = 0` or a `where` that keeps only the larger ones, or a "
                 "number that underflowed to 0 on the way: exp of a number far below 0 is 0 in float32, and a power "
                 "or a product taken after it cannot bring it back). Keep every number as it is computed: a small "
                 "weight is still a weight (without it a row of weights no longer sums to 1), and a small output is "
                 "not 0.")


def _rounded_to(got: np.ndarray, want: np.ndarray, step: float, grid: float = 1e-6) -> bool:
    if got.shape != want.shape or got.size == 0 or not np.all(np.isfinite(got)) or not np.all(np.isfinite(want)):
        return False
    scaled = got / step
    on_grid = np.abs(scaled - np.round(scaled)) <= 1e-3 + grid * np.abs(scaled)
    # (half a step, and a tenth more: float32's own error comes on top of the rounding, 2e-6 on 08.rope's angles of
    # 600 positions, where half a step of 4 decimals is 5e-5)
    # (a float64 step's numbers sit on the grid to its ``grid`` of 1e-12, and a float64 rounding moves them by half a
    # step and nothing more: float32's slack of 1e-6 of a number would take 3.0000018 for 3.000001 rounded there)
    near = np.abs(got - want) <= 0.55 * step + max(grid, 1e-12) * np.abs(want)
    return bool(np.all(on_grid) and np.all(near))


def _grid_seen(got: np.ndarray, want: np.ndarray, step: float, grid: float = 1e-6) -> bool:
    """Does some entry that moved lie where a step of that grid can be seen (:func:`_rounded_to` allows ``grid`` of
    a number: in float32, a number of a million is near every number within 1 of it, so a rounding to 1 decimal
    cannot be told there; in float64 a number of 5 is not near every number within 5e-6 of it)?"""
    return bool(np.any((got != want) & (grid * np.abs(want) < 0.5 * step)))


def _rounded(ex: Exercise, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs`` as the student's code is handed them (float32 for PyTorch and TensorFlow), each float moved
    by up to :data:`ROUNDING_ULPS` units in the last place of that precision (a fixed pattern)."""
    single = (ex.framework or "numpy") != "numpy"
    eps = 2.0 ** -24 if single else 2.0 ** -53
    noise = np.random.default_rng(0)
    out = dict(inputs)
    for key, value in inputs.items():
        if isinstance(value, np.ndarray) and value.dtype.kind == "f":
            if single:
                value = value.astype(np.float32).astype(np.float64)
            out[key] = value * (1 + ROUNDING_ULPS * eps * noise.uniform(-1, 1, size=value.shape))
    return out


def _slack(ex: Exercise, code: str, inputs: Mapping[str, Any], wrong: Arrays) -> dict[str, np.ndarray] | None:
    """How far variant ``code`` moves, entry by entry, when its inputs carry a rounding error (:func:`_rounded`)."""
    try:  # (not through `variant`: these inputs are made for this one call, nothing to keep them for)
        with np.errstate(all="ignore"):
            moved = _as_named(ex, ex.mistakes[code](**_rounded(ex, inputs)))
    except Exception:
        return None
    out = {}
    for n in ex.answers:
        if n not in moved or n not in wrong or moved[n].shape != wrong[n].shape:
            return None
        with np.errstate(invalid="ignore", over="ignore"):
            out[n] = np.nan_to_num(np.abs(moved[n].astype(float) - wrong[n].astype(float)), nan=0.0, posinf=0.0)
        if out[n].ndim >= 1 and out[n].shape[-1] > 0:
            # each entry, the largest of its row: the noise is one fixed pattern, and where it happens to be small
            # at an entry, a rounding error elsewhere in the row (which moves the whole row of a softmax) is not
            out[n] = np.maximum(out[n], out[n].max(axis=-1, keepdims=True))
    return out


def _same(a: np.ndarray, b: np.ndarray, ex: Exercise) -> bool:
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=ex.rtol, atol=ex.atol, equal_nan=True))


def _rerun_note(ex: Exercise, wrong: Sequence[str]) -> str:
    """For inputs that no exercise of the notebook produces (set by a given cell, so only changed since,
    e.g. in place by an earlier function): running that cell again may be all that is needed."""
    given = [f"`{n}`" for n in wrong if producer(ex, n) is None]
    return f" (or run again the cell that computes {', '.join(given)})" if given else ""


def _upstream_note(ex: Exercise, wrong: Sequence[str]) -> str:
    if not wrong:
        return ""
    owners = []
    for name in wrong:
        owner = producer(ex, name)
        owners.append(f"`{name}`" + (f" ({owner.id})" if owner else ""))
    return (f" Note: this step starts from your {', '.join(owners)}, which "
            f"{'is' if len(owners) == 1 else 'are'} not right yet either; fix that first"
            f"{_rerun_note(ex, wrong)}.")


def _used_note(ex: Exercise, record: Mapping[str, Any], skip: Sequence[str]) -> str:
    """Another step's answer the cell uses (besides the inputs it starts from) that is not right yet."""
    wrong = []
    for name, value in sorted((record.get("used") or {}).items()):
        owner = producer(ex, name) or next((o for o in exercises_for(ex.notebook) if o.kind == "value"
                                            and name in o.answers and o is not ex), None)
        if name in skip or name in ex.reads or owner is None:
            continue
        try:
            want = owner.expected(owner.inputs(None))[name]
        except Exception:  # noqa: BLE001 — a reference that cannot say: no note
            continue
        if owner.predicts == "axis" and _integral(np.asarray(value)) and round(float(value)) < 0:
            value = np.asarray(float(round(float(value)) + owner.ndim))
        if not _same(np.asarray(value, float), np.asarray(want, float), owner):
            wrong.append(f"`{name}` ({owner.id})")
    if not wrong:
        return ""
    return (f" Note: your cell uses {', '.join(wrong)}, which {'is' if len(wrong) == 1 else 'are'} not right yet "
            "either.")


def _inlined(ex: Exercise, plan: Plan, replays: Sequence[Arrays]) -> str | None:
    """The input whose notebook value the cell uses instead of the variable (typed-in numbers): on
    every replay, the answer is what the notebook's value of that one input would give."""
    if not replays:
        return None
    world0 = plan.inputs[0]
    for name in ex.reads:
        hits = 0
        for got, world in zip(replays, plan.inputs[1:]):
            frozen = {**world, name: world0[name]}
            try:
                want = ex.expected(frozen)
            except Exception:
                break
            if _close(want, ex.expected(world), ex.answers, ex.rtol, ex.atol) or \
                    not _close(got, want, ex.answers, ex.rtol, ex.atol):
                break
            hits += 1
        if hits == len(replays):
            return name
    return None


def _predicted_axis(ex: Exercise, name: str, value: Any) -> Any:
    """An input that is a predicted axis, counted from the left (-1 is the last axis): the same axis as the
    notebook's, not a wrong one."""
    owner = producer(ex, name)
    return _as_axis(owner, {name: value})[name] if owner is not None and owner.predicts == "axis" else value


def _stale_helper_problem(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    """A cell that is wrong on the replays only because it keeps a helper of its own from an earlier run (see
    :func:`collect._stale_helpers`): run afresh, without it, it gives the right answers there."""
    stale = record.get("stale_helpers")
    replays = (record.get("answers") or [])[1:]
    if not isinstance(stale, Mapping) or not stale.get("names") or not replays or len(plan.inputs) < 2:
        return None
    want = ex.expected(plan.inputs[1])
    if _compare(ex, stale.get("answers") or {}, want, "") is not None or _compare(ex, replays[0], want, "") is None:
        return None
    names = _listed(list(stale["names"]))
    return _fail(ex, "stale_value",
                 f"Your cell keeps {names} from an earlier run: run afresh on other inputs, it gives the right "
                 f"answer, but run again with {names} already defined it reuses the old value (a test such as "
                 f"`if \"{stale['names'][0]}\" not in globals()`, a `try: … except NameError`, or a `.get` with a "
                 "default). Compute every helper anew each time the cell runs.")


def _keeps_old_problem(ex: Exercise, record: Mapping[str, Any]) -> Outcome | None:
    """A cell that keeps an answer it finds already defined (`x = globals().get("x", …)`, `try: x` / `except
    NameError`): run again with the notebook's answer still bound, its replay gives that old answer back, where the
    fresh inputs give another."""
    kept = [n for n in record.get("keeps_old") or [] if n in ex.answers]
    if not kept:
        return None
    names = ", ".join(f"`{n}`" for n in kept)
    return _fail(ex, "stale_value",
                 f"Your cell computes {names} only when {'it is' if len(kept) == 1 else 'they are'} not defined yet "
                 "(a `globals().get(...)`, a `try` / `except NameError`, an `if ... not in globals()`): run again "
                 "after its inputs change, it keeps the old answer. Compute it every time the cell runs.")


def _cell_carried(ex: Exercise, plan: Plan, record: Mapping[str, Any], fail0: str | None) -> Outcome | None:
    """🟡 for a step whose line starts from a name the same cell computes (:attr:`Exercise.cell_reads`, 01's
    TensorFlow half: the outputs from the weights of the line above): right, on the notebook's numbers and on every
    replay, from what the cell itself computed there, while that input is not right."""
    if not ex.cell_reads or ex.cell_reference is None:
        return None
    answers = record.get("answers") or []
    own = record.get("replay_upstream") or []
    replay = record.get("replay") or {}
    replays = answers[1:]
    if not answers or not replay.get("available") or replay.get("error") or len(replays) < ex.replays \
            or len(own) < len(replays) or len(plan.inputs) <= len(replays):
        return None
    notebook = {n: v for n, v in (record.get("upstream") or {}).items() if n in ex.cell_reads}
    trials = [(answers[0], {**plan.inputs[0], **notebook})] + \
             [(got, {**plan.inputs[i], **own[i - 1]}) for i, got in enumerate(replays, start=1)]
    if any(not set(ex.cell_reads) <= set(inputs) for _, inputs in trials):
        return None
    for got, inputs in trials:
        try:
            with np.errstate(all="ignore"):
                want = _as_named(ex, ex.cell_reference(**inputs))
        except Exception:  # noqa: BLE001 — a reference that cannot take those inputs
            return None
        if _compare(ex, got, want, inputs=inputs) is not None:
            return None
    def differs(n: str) -> bool:  # the cell's own value of ``n`` is not the right one, on some trial
        for i, (_, inputs) in enumerate(trials):
            try:
                own_value = np.asarray(inputs[n], dtype=np.float64)
                right = np.asarray(plan.inputs[i][n], dtype=np.float64)
                if own_value.shape != right.shape or not np.allclose(own_value, right, rtol=1e-5, atol=1e-6):
                    return True
            except (KeyError, TypeError, ValueError):
                continue
        return False

    wrong = [n for n in ex.cell_reads if differs(n)] or list(ex.cell_reads)
    owners = [f"`{n}`" + (f" ({o.id})" if (o := producer(ex, n)) else "") for n in wrong]
    where = "" if fail0 is not None else " (on this notebook's numbers the difference hides, not on others)"
    return Outcome(
        ex.id, "carried", ex.points, ex.points,
        f"Your line for this step is right: from the {', '.join(owners)} your cell computes above it, it gives exactly "
        f"what it should. But {'that is' if len(owners) == 1 else 'those are'} not right yet{where}, so the result is "
        "not either: fix that line, then run the cell again.",
        carried_from=tuple(dict.fromkeys(o.id for n in wrong if (o := producer(ex, n)))),
    )


def _axis_of_one_dropped(ex: Exercise, plan: Plan, replays: Sequence[Arrays],
                         fails: Sequence[str | None]) -> str | None:
    """A shape prediction wrong only where a size is 1, with fewer axes than the result there: it leaves out the axis
    of that size (a special case, `(n, n) if n > 1 else (n,)`)."""
    def ones(inputs: Mapping[str, Any]) -> list[str]:
        return [k for k in ("n", "d_model", "d_k", "d_v") if k in inputs and np.size(inputs[k]) == 1
                and int(np.asarray(inputs[k])) == 1]

    wrong = [i for i, fail in enumerate(fails, start=1) if fail]
    if not wrong or not all(ones(plan.inputs[i]) for i in wrong):
        return None
    i = wrong[0]
    try:
        mine, right = replays[i - 1][ex.answers[0]], ex.expected(plan.inputs[i])[ex.answers[0]]
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    if not np.size(mine) < np.size(right):
        return None
    sizes = ", ".join(f"{k} = 1" for k in ones(plan.inputs[i]))
    return (f"Right for every size but where one is 1: with {sizes}, your prediction gives {_tuple(mine)} where "
            f"{_tuple(right)} is right. A size of 1 is still an axis: the result keeps it, of length 1, and a special "
            f"case that leaves it out (`if {ones(plan.inputs[i])[0]} > 1 else …`) does what a `.squeeze()` would. "
            "Write the same shape for every size.")


def _evaluate_value(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome:
    answers = record.get("answers") or []
    if ex.predicts == "axis":
        floats = [n for n, dt in ((record.get("facts") or {}).get("dtype") or {}).items()
                  if dt is not None and _is_float(str(dt))]
        if floats:  # 1.0 is the right number, but `dim=1.0` raises in the next cell
            return Outcome(ex.id, "fail", 0, ex.points, _axis_form(ex, "is a float") + " An axis counts whole "
                           "axes: `dim=1.0` or `axis=1.0` raises a TypeError.")
        answers = [_as_axis(ex, a) for a in answers]
    world0 = plan.inputs[0]
    want0 = ex.expected(world0)
    got0 = answers[0]
    if problem := _framework_problem(ex, record.get("facts") or {}):
        return problem
    if ex.how.get("typed_numbers") is False and (record.get("how") or {}).get("typed_numbers"):
        # numbers typed in are never the step, right or (rounded from a print) slightly off: say so first
        return _fail(ex, "not_as_asked", ex.hints.get("not_as_asked") or _HOW["typed_numbers", False])
    product = bool((record.get("how") or {}).get("matmul", True))
    fail0 = _compare(ex, got0, want0, product=product, inputs=world0)
    if fail0 is not None and (aliased := record.get("aliased")):
        # two answers are one tensor: whatever is written into one is in the other
        a, b = aliased[0]
        return _fail(ex, "overwrites_variable",
                     f"Your `{a}` and `{b}` are one and the same tensor (a line such as `{b} = {a}` names it twice, it "
                     f"does not copy it), so what you wrote into one (`{b}.copy_(…)`, `{b}[…] = …`) is in the other "
                     f"too. Make each one its own result: `{b} = …` with its own computation.")
    replay = record.get("replay") or {}
    replays = answers[1:]
    fails = [_compare(ex, got, ex.expected(plan.inputs[i]), " on other inputs", product=product,
                      inputs=plan.inputs[i])
             for i, got in enumerate(replays, start=1) if i < len(plan.inputs)]
    # (an edge whose right answer is not one number: a cell that computes from other names than the step's inputs,
    # consistent with them in every world but this one, is right there too)
    fails = [None if f and i in plan.accepts and isinstance(got, Mapping) and len(ex.answers) == 1
             and _accepted(plan.accepts[i], got.get(ex.answers[0]), plan.inputs[i]) else f
             for i, (f, got) in enumerate(zip(fails, replays), start=1)]
    replay_error = replay.get("error")
    if (fail0 is not None or any(fails)) and not replay_error and (carried := _cell_carried(ex, plan, record, fail0)):
        return carried
    if fail0 is None and not any(fails) and not replay_error:
        if ex.replays and len(replays) < ex.replays:
            names = ", ".join(f"`{n}`" for n in ex.answers)
            return Outcome(ex.id, "fail", 0, ex.points,
                           f"Your {names} {'is' if len(ex.answers) == 1 else 'are'} right on this notebook's numbers, "
                           "but no cell assigns it by name, so the code that computes it could not be found and tried "
                           "on other inputs (a name made through `globals()` or `exec` cannot be traced back). Assign "
                           f"it by name in the step's cell ({ex.answers[0]} = …) and run that cell.")
        if models := record.get("models_read"):
            names = ", ".join(f"`{n}`" for n in models)
            return _fail(ex, "reads_globals", f"`{ex.functions[0]}` uses the notebook's {names} instead of the model "
                                              "it is given: right here only because the cell hands it that very "
                                              "model. Use its `model` argument.")
        right_trials = [(got0, world0)] + [(got, plan.inputs[i]) for i, got in enumerate(replays, start=1)
                                           if i < len(plan.inputs)]
        for check in (_unused_problem(ex, record), _zeroed_small(ex, right_trials),
                      _dtype_problem(ex, record.get("facts") or {}),
                      _float32_precision_problem(ex, right_trials), _rounded_within_tolerance(ex, right_trials),
                      _clamped_within_tolerance(ex, right_trials),
                      _items_problem(ex, record.get("facts") or {}),
                      _mutation_problem(ex, record), _rebound_problem(ex, record), _deleted_problem(ex, record),
                      _module_changed_problem(ex, record), _reassigned_problem(ex, record),
                      _module_problem(ex, record), _grad_off_problem(ex, record),
                      _forward_params_problem(ex, record),
                      _parameters_problem(ex, record), _grad_problem(ex, record), _budget_problem(ex, plan, record),
                      _module_probe_problem(ex, plan, record), _module_again_problem(ex, plan, record),
                      _step_probe_problem(ex, record, right=True), _keeps_old_problem(ex, record)):
            if check is not None:
                return check
        if kept := [n for n in record.get("functions_kept") or [] if isinstance(n, str)]:
            names = ", ".join(f"`{n}`" for n in kept[:2])
            return _fail(ex, "stale_value", f"`{ex.functions[0]}` keeps something on the function object itself "
                                            f"({names}) from one call to the next: a later call then does what an "
                                            "earlier one left there says (a best loss kept, a step skipped), and on "
                                            "another run or another model it behaves otherwise. Compute everything "
                                            "from the arguments of each call, and keep nothing between calls.")
        return Outcome(ex.id, "pass", ex.points, ex.points, f"{ex.title}: correct.")

    if (kept := _stale_helper_problem(ex, plan, record)) is not None:
        return kept
    if fail0 is not None and (stale := record.get("stale_defaults")) and ex.functions:
        names = ", ".join(f"`{n}`" for n in stale)
        return _fail(ex, "stale_value",
                     f"`{ex.functions[0]}` keeps an older {names} as the default value of a parameter: a default is "
                     f"taken once, when the `def` runs, and {names} {'was' if len(stale) == 1 else 'were'} defined "
                     f"anew since. Run the cell that defines `{ex.functions[0]}` again (after the one that defines "
                     f"{names}), then this one.")
    if fail0 is None and _integer_where_float(ex, record.get("facts") or {}) and \
            (integer := _dtype_problem(ex, record.get("facts") or {})):
        # right here, wrong (or raising) on other inputs because integers cut the fractions away: the dtype says why
        return integer
    upstream = {n: _predicted_axis(ex, n, a) for n, a in (record.get("upstream") or {}).items() if n in world0}
    wrong_up = [n for n in ex.reads if n in upstream and not _same(upstream[n], np.asarray(world0[n], float), ex)]
    if not replay_error and not wrong_up and (zeroed := _zeroed_small(ex, [(got0, world0)] + [
            (got, plan.inputs[i]) for i, got in enumerate(replays, start=1) if i < len(plan.inputs)])):
        return zeroed  # small numbers cut to 0, found where the threshold reaches above the tolerance
    # an input that is wrong because this very cell changed it (in place, or bound anew): that is what to fix
    views = record.get("mutated_views") or {}
    if own := [n for n in wrong_up if n in (record.get("mutated") or []) or n in views]:
        return _mutation_problem(ex, {"mutated": own, "mutated_views": views}) or _fail(ex, "mutates_input")
    if own := [n for n in wrong_up if n in (record.get("rebound") or [])]:
        return _rebound_problem(ex, record, own) or _fail(ex, "overwrites_variable")
    if set(record.get("reassigned") or {}) & set(ex.reads) and (undone := _reassigned_problem(ex, record)):
        # the cell changed an input it starts from (cast after use): the replays were handed that changed input
        return undone
    student_world = {**world0, **upstream} if wrong_up else world0
    code_right = bool(replay.get("available")) and not replay_error and len(replays) >= ex.replays \
        and not any(fails)
    if fail0 is not None and wrong_up and code_right:
        try:
            local = ex.expected(student_world)
        except Exception:
            local = None
        if local is not None and _compare(ex, got0, local) is None:
            # right numbers from the student's own inputs, but what the code is besides its numbers (its gradients,
            # its parameters, how many rows it projects) is judged as for an answer right on the notebook's inputs
            for problem in (_module_problem(ex, record), _forward_params_problem(ex, record),
                            _parameters_problem(ex, record), _grad_problem(ex, record),
                            _budget_problem(ex, plan, record), _module_probe_problem(ex, plan, record)):
                if problem is not None:
                    return dataclasses.replace(problem, message=problem.message + _upstream_note(ex, wrong_up))
            owners = [f"`{n}`" + (f" ({o.id})" if (o := producer(ex, n)) else "") for n in wrong_up]
            return Outcome(
                ex.id, "carried", ex.points, ex.points,
                f"Your code for this step is right: from your own {', '.join(owners)} it computes exactly what it "
                f"should. But {'that input is' if len(owners) == 1 else 'those inputs are'} not right yet, so the "
                f"result is not either: fix the earlier step{_rerun_note(ex, wrong_up)}, then run this cell again.",
                carried_from=tuple(o.id for n in wrong_up if (o := producer(ex, n))),
            )
    if fail0 is not None and (counted := _module_carried(ex, plan, record, got0, code_right)):
        return counted
    # (an edge trial that accepts the answer says nothing about its mistake: its right answer is not one number)
    trials = [(got0, student_world)] + [(got, plan.inputs[i]) for i, got in enumerate(replays, start=1)
                                        if i < len(plan.inputs) and not (
                                            i in plan.accepts and isinstance(got, Mapping) and len(ex.answers) == 1
                                            and _accepted(plan.accepts[i], got.get(ex.answers[0]), plan.inputs[i]))]
    if set(wrong_up) & set(record.get("mutated") or ()):
        # an input that is wrong because this very cell changed it in place (through a view of it, say): that change
        # is the mistake to fix, not an earlier step
        return _mutation_problem(ex, record)
    note = _upstream_note(ex, wrong_up) + _used_note(ex, record, wrong_up)
    for early in (_step_probe_problem(ex, record, right=False), _model_carried(ex, plan, record)):
        if early is not None:
            return early
    code = diagnose(ex, trials) or _sign(ex, trials)
    if code == "weights_cast_to_int" and (record.get("how") or {}).get("int_cast", record.get("int_cast")) is False:
        code = None  # zeros from another cause (a tf.Variable reset after the cell made it its answer): no cast
    if code:
        return _fail(ex, code, note=note)
    if rounded := _rounded_answer(ex, trials):  # (before a clamp: numbers rounded to 6 decimals, two of them equal,
        return rounded                          # can read as a bound those two reach)
    if shortcut := _cut_or_clamped(ex, trials, note):
        return shortcut
    if fail0 is None and (unused := _unused_names_problem(ex, record)):
        # right here, wrong on other inputs, and the cell never uses what the step is to compute with: that is why
        return _fail(ex, unused.diagnosis or "not_computed_with", unused.message, note)
    if _nearly_right(ex, _finite_trials(trials)) and (how := _unused_problem(ex, record)):
        # off by rounding error only, computed another way than the step asks (the polarisation identity for a
        # matrix product): the way is what to fix
        return how
    if explained := _explained(ex, trials, record, note):
        return explained
    if discarded := _discarded_problem(ex, record, note):
        return discarded
    if drawn := _draw_problem(ex, plan, record):
        return drawn
    if low := _low_precision_problem(ex, record, trials) or _float32_precision_problem(ex, trials, record):
        return low
    if ex.predicts == "shape" and fail0 is None and (record.get("how") or {}).get("shape_read") \
            and ex.hints.get("not_as_asked:shape_read"):
        # a size read off a tensor of the notebook (len(x_list), outputs.shape): the example's, whatever the sizes
        return _fail(ex, "not_as_asked", ex.hints["not_as_asked:shape_read"], note)
    if inlined := _inlined(ex, plan, replays):
        return _fail(ex, "hard_coded", _inlined_message(ex, inlined, record), note)
    if replays and all(_same(got[n], got0[n], ex) for got in replays for n in ex.answers) and \
            not _close(want0, ex.expected(plan.inputs[1]), ex.answers, ex.rtol, ex.atol) and \
            _close(got0, want0, ex.answers, TYPED_IN, TYPED_IN):
        # the same answer whatever the inputs, and this notebook's (as printed): numbers typed in. A constant
        # answer that is not the notebook's comes from a computation gone degenerate (a softmax along an axis
        # of length 1, say): its shape or values say more than "typed in".
        names = ", ".join(f"`{n}`" for n in ex.answers)
        if ex.predicts == "shape":
            right = ", right for this notebook's sizes," if fail0 is None else ""
            return _fail(ex, "hard_coded", f"Your prediction {_tuple(got0[ex.answers[0]])} is written in digits{right} "
                                           "and digits cannot say which size each number stands for (several sizes "
                                           "are equal here). Write it with the size names, like "
                                           f"{_example_shape(ex)}: it is then tried on other sizes.", note)
        others = sorted(set(record.get("used") or ()) - set(ex.reads))
        if others and not (record.get("how") or {}).get("typed_numbers"):
            # it computes from other steps' answers (the notebook's own w_query …), which a replay leaves as they are
            owners = [f"`{n}`" + (f" ({o.id})" if (o := producer(ex, n)) else "") for n in others]
            starts = ", ".join(f"`{n}`" for n in (ex.reads or ([ex.module] if ex.module else [])))
            return _fail(ex, "reads_globals", f"Your cell gives the same {names} whatever its inputs: it computes from "
                                              f"{', '.join(owners)}, not from what this step starts from"
                                              f"{f' ({starts})' if starts else ''}.", note)
        shape0 = {n: np.shape(got0[n]) for n in ex.answers if isinstance(got0.get(n), np.ndarray)}
        if shape0 and not (record.get("how") or {}).get("typed_numbers") \
                and all(any(np.shape(ex.expected(inputs).get(n)) != shape for n, shape in shape0.items())
                        for inputs in plan.inputs[1:]):
            # of the example's shape where every replay calls for another: the sizes, at least, are typed in (a
            # `torch.rand(3, 2)` after the seed gives the same numbers on every run)
            starts = ", ".join(f"`{n}`" for n in ex.reads)
            shapes = ", ".join(dict.fromkeys(str(v) for v in shape0.values()))
            return _fail(ex, "example_sizes_only",
                         f"Your cell gives the same {names} whatever its inputs, of this notebook's shape "
                         f"{shapes}, where other inputs call for other shapes: "
                         "its sizes are typed in (or taken from something that equals them only here). Take every "
                         f"size from what the step starts from{f' ({starts})' if starts else ''}.", note)
        return _fail(ex, "hard_coded", f"Your cell gives the same {names} whatever its inputs: it does not compute "
                                       "from them. Compute the answer from the variables the step starts from "
                                       "(the numbers are there to check against, not to type in).", note)
    if replay_error:
        if fail0 is None and (changed := _mutation_problem(ex, record)):
            # it changed what it was given (a list the next cells read again): what a replay then raised on may be
            # that change itself
            return changed
        if fail0 is None and (typed := _typed_in_problem(ex, plan, record, note)):
            return typed  # numbers typed in from the printout: the replays' other sizes raised on them
        if fail0 is None and (undone := _reassigned_problem(ex, record)):
            # an earlier answer the cell changed: what the replays then raised on may be that change itself
            return undone
        if fail0 is None and (unused := _unused_names_problem(ex, record)):
            # right here, raised on other inputs, and the cell never uses what the step computes with: it reads the
            # notebook's answers themselves (which a replay does not hand it), not the inputs
            return unused
        if fail0 is None and (raised := record.get("raised")):
            # it raised in the notebook as well: that error, not the other inputs, is what to fix (unless
            # the answer's own dtype or framework is what made a later line raise)
            for check in (_framework_problem(ex, record.get("facts") or {}),
                          _dtype_problem(ex, record.get("facts") or {})):
                if check is not None:
                    return check
            at = f" on line {raised['line']}" if raised.get("line") else ""
            return _fail(ex, "cell_raised", f"The cell that defines {', '.join(f'`{n}`' for n in ex.answers)} raised "
                                            f"{raised.get('message', '')}{at} the last time it ran. Fix what made it "
                                            "fail (that line, or a value your lines before it made) and run the cell "
                                            "again." + _raised_hint(ex, str(raised.get("message", ""))),
                                            note)
        if fail0 is None and (missing := _answer_not_made(ex, str(replay_error.get("message", "")))):
            return Outcome(ex.id, "fail", 0, ex.points,
                           f"Your cell does not compute `{missing}`: the `{missing}` the notebook holds was left there "
                           f"by an earlier run (or another cell), and run on its own your cell raises NameError where "
                           f"it uses it. Compute `{missing}` in this cell." + note)
        if fail0 is None and (dtype := _dtype_problem(ex, record.get("facts") or {})):
            return dtype  # its own dtype is wrong already on this notebook's numbers (another line's raise follows)
        if fail0 is None and (elsewhere := _raised_on_other_step(ex, replay_error)):
            return Outcome(ex.id, "fail", 0, ex.points, elsewhere + note)
        if fail0 is None and not ex.module and (sized := _raised_on_other_sizes(
                ex, plan, replay_error.get("trial"), str(replay_error.get("message", "")), note)):
            return sized
        message = fail0 or (f"Right on this notebook's numbers, but run again on other inputs, "
                            f"your cell raised {replay_error.get('message', '')}."
                            + _raised_hint(ex, str(replay_error.get("message", ""))))
        return Outcome(ex.id, "fail", 0, ex.points, message + note)
    if ex.in_eval and (record.get("module") or {}).get("training") and _own_agreement(ex, record) >= 0.5:
        # wrong guesses from a model still in training mode: its dropout draws change them at random (only some of
        # them: guesses that mostly differ from the model's own are wrong for another reason)
        if parts := (record.get("module") or {}).get("training_parts"):
            return _fail(ex, "dropout_in_eval", f"Your `{ex.module}` is set to evaluation mode by hand "
                                                f"(`{ex.module}.training = False`, say), which changes that one flag "
                                                f"only: its parts (`{ex.module}.{parts[0]}`) are still in training "
                                                "mode, so their dropout still drops weights at random and some "
                                                f"guesses change. Call `{ex.module}.eval()`, which sets every part.",
                         note)
        return _fail(ex, "dropout_in_eval", note=note)
    if fail0 is None and (made := _nonfinite_origin(ex, record, answers, plan.inputs, " on other inputs")):
        # (an answer already wrong on the notebook's own numbers is told that first: what made a NaN elsewhere may
        # not be its mistake)
        said = "Right on this notebook's numbers, but not in general: " + made[1]
        return _fail(ex, made[0], said, note) if made[0] else Outcome(ex.id, "fail", 0, ex.points, said + note)
    if fail0 is not None:
        return Outcome(ex.id, "fail", 0, ex.points, fail0 + note)
    first = next(f for f in fails if f)
    if ex.predicts == "axis":
        return Outcome(ex.id, "fail", 0, ex.points,
                       "Right for this notebook's sizes, but your axis changes when the sizes do (it is computed "
                       "from a size such as n, right only while that size is 3): which axis a step runs along does "
                       "not depend on how many tokens or features there are. Write the axis itself, as a number."
                       + note)
    if ex.predicts == "shape" and (dropped := _axis_of_one_dropped(ex, plan, replays, fails)):
        return Outcome(ex.id, "fail", 0, ex.points, dropped + note)
    if ex.predicts == "shape":
        return Outcome(ex.id, "fail", 0, ex.points,
                       f"Right for this notebook's sizes (there your prediction gives {_tuple(got0[ex.answers[0]])}, "
                       "as it should), but not for others: " + first[0].lower() + first[1:] +
                       " Write every size with its own size name (n, d_model, d_k, d_v): another size's name that "
                       "is equal in this example, a size read off a tensor of the notebook, or digits typed in are "
                       "right only for the example's sizes." + note)
    if fail0 is None and (sized := _sizes_problem(ex, plan, got0, trials[1:], note, record)
                          or _length_of_example(ex, plan, fails, note)):
        return sized
    if ex.module and isinstance(world0.get(ex.module), Mapping):  # the replays hand the cell other modules
        first = first.replace(" on other inputs", " on another module (other widths, one of its matrices frozen, "
                                                  "one more trainable matrix, in a submodule and in float64, that "
                                                  "matrix tied into a second submodule, and a buffer; or one whose "
                                                  "every parameter is frozen)")
    return Outcome(ex.id, "fail", 0, ex.points,
                   "Right on this notebook's numbers, but not in general: "
                   + first + note)


def _accepted(accepts: Callable[[Any, Mapping[str, Any]], bool], answer: Any, inputs: Mapping[str, Any]) -> bool:
    try:
        return answer is not None and bool(accepts(np.asarray(answer, dtype=np.float64), inputs))
    except Exception:  # noqa: BLE001 — an answer of another shape or kind: not an accepted one
        return False


def _evaluate_function(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome:
    answers = record.get("answers") or []
    if problem := _framework_problem(ex, record.get("facts") or {}):
        return problem
    fail = None
    for i, (got, inputs) in enumerate(zip(answers, plan.inputs)):
        trial = "" if i == 0 else f" on random inputs ({_describe_inputs(inputs)})"
        fail = _compare(ex, got, ex.expected(inputs), trial)
        if fail and i in plan.accepts and isinstance(got, Mapping) \
                and _accepted(plan.accepts[i], got.get(ex.answers[0]), inputs):
            fail = None  # another answer that is right on this trial too
        if fail:
            break
    if len(answers) < len(plan.inputs) and fail is None:
        fail = f"`{ex.answers[0]}` was not called on every input."
    if fail is not None and (kept := _overwritten_problem(ex, record, plan)) is not None \
            and kept.diagnosis == "stale_value":
        # its wrong numbers are answers kept from before (a function that changes its inputs in place is told that)
        return kept
    if fail is not None and (again := _answer_given_again(ex, plan, answers, record)):
        return again
    if fail is not None and (kept := _function_state(ex, record)):  # (what it keeps, where the above cannot tell)
        return kept
    if fail is None and (alike := record.get("module_alike")):  # right, but the cell's module starts two weights alike
        return _fail(ex, "init_not_random", f"`{ex.module}`'s own `{alike[0]}` and `{alike[1]}` start with exactly "
                                            "the same numbers: one draw serves both (a layer deep-copied into "
                                            "another's place, or one tensor given to two), where each layer draws "
                                            "its own. Make each one anew in `__init__`.")
    if fail is None and record.get("models_read"):  # right here only because the notebook's model is the one given
        return _fail(ex, "reads_globals", _reads_globals(ex, record, "so it trains or runs that model whatever "
                                                                     "model it is given. Use its `model` argument."))
    if fail is None and (flagged := record.get("grad_flag_set")):  # right, but it changes its inputs' flags
        names = ", ".join(f"`{n}`" for n in flagged)
        return _fail(ex, "mutates_input", f"`{ex.answers[0]}` switches on `requires_grad` of the tensor it is given as "
                                          f"{names} (`.requires_grad_(True)` on an argument): the caller's tensor "
                                          "then requires a gradient too, so its `.numpy()` fails and every "
                                          "backward pass fills its `.grad`. Leave the inputs as they are: whoever "
                                          "calls the function decides which tensors need a gradient.")
    if fail is None and (cleared := record.get("grad_flag_cleared")):  # right, but it freezes what it is given
        names = ", ".join(f"`{n}`" for n in cleared)
        return _fail(ex, "mutates_input", f"`{ex.answers[0]}` switches off `requires_grad` of the tensor it is given "
                                          f"as {names} (`.requires_grad_(False)` on an argument): the caller's tensor "
                                          "then gets no gradient, so whatever trains it stops changing it. Leave the "
                                          "inputs as they are: a computation that should not reach a tensor's "
                                          "gradient uses a `.detach()`ed copy.")
    if fail is None and (written := record.get("globals_written")):  # right, but it changes the notebook's data
        names = ", ".join(f"`{n}`" for n in written)
        return _fail(ex, "overwrites_variable",
                     f"`{ex.answers[0]}` assigns the notebook's {names} (a `global` statement): every call "
                     f"overwrites {'it' if len(written) == 1 else 'them'}, so the cells that read "
                     f"{'it' if len(written) == 1 else 'them'} afterwards get what the last call left there, whatever "
                     "that call was given. Keep what the function computes "
                     "in local names and return it; then run again the cell that makes "
                     f"{'it' if len(written) == 1 else 'them'}.")
    if fail is None and (answers_read := _answers_read(ex, record)):  # right, but only where those exist
        names = ", ".join(f"`{n}`" for n in answers_read)
        return _fail(ex, "reads_globals", f"`{ex.answers[0]}` reads the notebook's {names}: its results come out right "
                                          "only because what it takes from there happens not to change them, and it "
                                          "raises a NameError wherever that variable does not exist. Use only the "
                                          "parameters the function is given.")
    if fail is None and ex.framework == "torch" and not ex.keeps_grad and not ex.module \
            and True in ((record.get("facts") or {}).get("grad") or {}).values():
        # nothing it is given needs a gradient, yet its result does: it makes a trainable tensor of its own
        return _fail(ex, "not_as_asked", f"`{ex.answers[0]}(...)` returns a tensor that requires a gradient, though "
                                         "nothing it is given does: it makes a trainable tensor of its own (an "
                                         "`nn.Parameter`, or `requires_grad=True`), which an optimizer would then "
                                         "change. What it computes is fixed: return a plain tensor.")
    if fail is None:
        for check in (_unused_problem(ex, record), _zeroed_small(ex, list(zip(answers, plan.inputs))),
                      _dtype_problem(ex, record.get("facts") or {}),
                      _float32_precision_problem(ex, list(zip(answers, plan.inputs)), record),
                      _rounded_within_tolerance(ex, list(zip(answers, plan.inputs))),
                      _clamped_within_tolerance(ex, list(zip(answers, plan.inputs))),
                      _mutation_problem(ex, record),
                      _overwritten_problem(ex, record, plan), _mode_problem(ex, record),
                      _probe_problem(ex, plan, record), _forward_params_problem(ex, record),
                      _module_probe_problem(ex, plan, record) if ex.module else None,
                      # a gradient cut (a trip through NumPy) is also why a dtype is fixed: that first
                      _grad_problem(ex, record), _double_problem(ex, record)):
            if check is not None:
                return check
        return Outcome(ex.id, "pass", ex.points, ex.points, f"{ex.title}: correct.")
    trials = list(zip(answers, plan.inputs))
    if zeroed := _zeroed_small(ex, trials):
        return zeroed
    for probe, inputs in zip(ex.probes, plan.probe_inputs):  # the long inputs say something too
        entry = (record.get("probes") or {}).get(probe.kind)
        if isinstance(entry, Mapping) and entry.get("answer") is not None:
            trials.append(({ex.answers[0]: entry["answer"]}, inputs))
    code = diagnose(ex, trials) or _sign(ex, trials)
    if code == "hard_coded" and record.get("globals_read"):
        # the notebook's number comes from a notebook variable the function reads (`keys.shape[-1]`), not typed in
        return _fail(ex, "reads_globals", _reads_globals(ex, record, "so it computes with this notebook's sizes "
                                                                     "whatever it is given. Use the parameters the "
                                                                     "function is given."))
    if code == "hard_coded" and (scalars := record.get("scalars_read")):
        # or from numbers of the notebook it reads (`num_heads * d_head`), which change what it gives
        return _fail(ex, "reads_globals", _reads_scalars(ex, scalars, "so it computes with this notebook's sizes "
                                                                      "whatever it is given. Take every size from "
                                                                      "its arguments."))
    if not code and (sizes := {n: v for n, v in (record.get("scalars_read") or {}).items() if _SIZE_NAME.match(n)}):
        # a size of the notebook's own (07's d_k = 32 of the timing cell) that changes what the function gives
        return _fail(ex, "reads_globals", _reads_scalars(ex, sizes, "and what it gives changes with it. Take every "
                                                                    f"size from the arguments {_shape_example(ex)}."))
    if code:
        return _fail(ex, code)
    if shortcut := _cut_or_clamped(ex, trials):
        return shortcut
    if _nearly_right(ex, _finite_trials(trials)) and (how := _unused_problem(ex, record)):
        return how
    if explained := _explained(ex, trials, record):
        return explained
    if discarded := _discarded_problem(ex, record):
        return discarded
    if rounded := _rounded_answer(ex, trials):
        return rounded
    if typed := _typed_argument(ex, plan, answers):
        value = plan.inputs[0][typed]
        if held := [*(record.get("globals_read") or []), *(record.get("containers_read") or [])]:
            # the number comes from a notebook object it reads (drop.p, model["num_layers"]), not typed in
            return _fail(ex, "reads_globals", f"`{ex.answers[0]}` reads the notebook's "
                                              f"{', '.join(f'`{n}`' for n in held)} instead of its own arguments, "
                                              f"and computes as if `{typed}` were always {value!r}, this notebook's "
                                              f"value, whatever it is given: use its `{typed}` argument.")
        return _fail(ex, "hard_coded", f"`{ex.answers[0]}` computes as if `{typed}` were always {value!r}, this "
                                       f"notebook's value, whatever it is given: use its `{typed}` argument.")
    if low := _low_precision_problem(ex, record, trials) or _float32_precision_problem(ex, trials, record):
        return low
    read = record.get("globals_read") or []
    if read:
        return _fail(ex, "reads_globals", _reads_globals(ex, record, "so it only works for this notebook's data. "
                                                                     "Use the parameters the function is given."))
    if scalars := _blamed_scalars(ex, plan, record):
        return _fail(ex, "reads_globals", _reads_scalars(ex, scalars, "so it is right only where that number is "
                                                                      "the inputs' own. Take it from the function's "
                                                                      "arguments (a shape, a size)."))
    if problem := _typed_in_problem(ex, plan, record):
        return problem
    if mutated := _mutation_problem(ex, record):
        # wrong, and it changes an argument in place (`x /= …`): the caller's variable changes too, which is a
        # mistake of its own, and the change is often what makes the numbers wrong
        return mutated
    if answers and _compare(ex, answers[0], ex.expected(plan.inputs[0])) is None and \
            (sized := _sizes_problem(ex, plan, answers[0], trials[1:len(answers)])):
        return sized
    if made := _nonfinite_origin(ex, record, answers, plan.inputs,
                                 " on random inputs" if (record.get("nonfinite") or {}).get("trial") else ""):
        return _fail(ex, made[0], made[1]) if made[0] else Outcome(ex.id, "fail", 0, ex.points, made[1])
    if record.get("draws") is True:  # (no catalogued mistake explains it: a draw of its own, F.dropout left on)
        if ex.framework == "tensorflow":
            return _fail(ex, "draws_at_random", "Your function gives other numbers on the same inputs from one call "
                                                "to the next: it draws at random somewhere (a `tf.nn.dropout` left "
                                                "in, a Keras `Dropout` layer called with `training=True`, or a "
                                                "`tf.random…` of its own). This step has no randomness: leave the "
                                                "draw out.")
        return _fail(ex, "draws_at_random")
    return Outcome(ex.id, "fail", 0, ex.points, fail)


def _typed_argument(ex: Exercise, plan: Plan, answers: Sequence[Arrays]) -> str | None:
    """The plain-number argument (a head count, a probability, a block size) that the function ignores for the
    notebook's value: on every trial where that value is not the one given, the answer is what it would give."""
    notebook = plan.inputs[0]
    for key, value in notebook.items():
        if not _scalar(value):
            continue
        hits = 0
        for got, inputs in zip(answers[1:], plan.inputs[1:]):
            if not _scalar(inputs.get(key)) or inputs[key] == value:
                continue
            try:
                want = ex.expected({**inputs, key: value})
                if _close(want, ex.expected(inputs), ex.answers, ex.rtol, ex.atol):
                    continue  # the value changes nothing here (a block size, for attention): no evidence
            except Exception:  # noqa: BLE001 — the notebook's value does not fit these inputs: no evidence
                want = None
            if want is None or not _close(got, want, ex.answers, ex.rtol, ex.atol):
                hits = -1
                break
            hits += 1
        if hits > 0:
            return key
    return None


# what the probes' watching inputs raise (helpers.course.exercises.nb07), as `_call` words it
_WATCHED = re.compile(r"^`[^`]+` raised (?:KeysNotInBlocks|KeyBlocksTwice|ScoresAboveTheDiagonal|QueriesNotInTiles|"
                      r"WholeScoreMatrix): "
                      r"(?P<what>.+?)"
                      r"(?: \(line \d+: .*\))? when called on (?P<inputs>.+)\.$", re.S)


def _answers_read(ex: Exercise, record: Mapping[str, Any]) -> list[str]:
    """The notebook's own results (answers of its value steps) that a function reads from its globals: data a
    function of its arguments has no business with (a constant of the student's own is not one of them)."""
    read = set(record.get("globals_read") or []) - set(record.get("models_read") or [])
    if record.get("globals_in"):
        read = set()
    # the notebook's numbers it reads that change what it gives (an axis or a size predicted in an earlier step)
    read |= set(record.get("scalars_read") or {})
    if not read:
        return []
    _load_all()
    answers = {n for other in REGISTRY.values() if other.notebook == ex.notebook and other.kind == "value"
               for n in other.answers}
    return sorted(read & answers)


def _reads_globals(ex: Exercise, record: Mapping[str, Any], then: str) -> str:
    """Who reads which of the notebook's globals: the function, or a method of a class it uses (a module's
    ``forward``)."""
    names = ", ".join(f"`{n}`" for n in record.get("globals_read") or [])
    inside = (record.get("globals_in") or [None])[0]
    if inside and "." not in inside:  # a function of the notebook's that it calls
        return (f"`{inside}` (a function of yours that `{ex.answers[0]}` calls) reads the notebook's {names} instead "
                f"of what it is handed: pass it what `{ex.answers[0]}` is given, {then}")
    if inside:
        return (f"`{inside}` (which `{ex.answers[0]}` runs) reads the notebook's {names} instead of the module's "
                f"own weights and its arguments, {then}")
    return f"`{ex.answers[0]}` reads the notebook's {names} instead of its own arguments, {then}"


def evaluate(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome:
    """The verdict on a record (see :mod:`helpers.runtime.collect`) for the inputs of ``plan``; a step that fails
    while an earlier cell has left the session without gradients, or with another default dtype, is told so too."""
    if ex.framework == "torch" and record.get("default_dtype") and record.get("default_dtype_own"):
        return _fail(ex, "wrong_dtype", f"Your cell changes torch's default dtype for the whole session, to "
                                        f"{record['default_dtype']} (`torch.set_default_dtype`): every tensor a later "
                                        "cell makes from plain numbers is then of that dtype, and the steps built on "
                                        "float32 tensors fail or mix dtypes. Leave the default alone (float32, the "
                                        "default) and ask for another dtype only where you need it "
                                        "(`dtype=torch.float64`).")
    with warnings.catch_warnings():  # the check's own arithmetic (a mean of a row of NaN, say) prints nothing
        warnings.simplefilter("ignore")
        outcome = _evaluate(ex, plan, record)
        if outcome.status == "pass" and (factor := _stray_factor(ex, plan, record)):
            return factor
    if outcome.status != "fail" or ex.framework not in ("torch", None):
        return outcome
    if record.get("default_dtype") and not record.get("default_dtype_own"):
        return dataclasses.replace(outcome, message=outcome.message + (
            f" (Note: torch's default dtype is {record['default_dtype']} in this session: an earlier cell called "
            "`torch.set_default_dtype`, so every tensor made from plain numbers since is of that dtype. Set it back "
            "with `torch.set_default_dtype(torch.float32)`, then run the cells again from the top.)"))
    if record.get("grad_off_session") and ex.framework == "torch" and outcome.diagnosis == "gradient_cut":
        what = ", ".join(f"`{n}`" for n in ex.answers) if ex.kind == "value" else f"`{ex.answers[0]}(...)`"
        return _fail(ex, "grad_left_off", f"{what} keeps no gradient because gradients are switched off for the "
                                          "whole session: an earlier cell called `torch.set_grad_enabled(False)`, or "
                                          "entered `torch.no_grad()` without leaving it, so nothing computed since "
                                          "keeps track of them. Turn them back on with "
                                          "`torch.set_grad_enabled(True)`, then run the cells again.")
    if record.get("grad_off_session") and ex.framework == "torch":
        return dataclasses.replace(outcome, message=outcome.message + (
            " (Note: gradients are switched off for the whole session: an earlier cell called "
            "`torch.set_grad_enabled(False)`, or entered `torch.no_grad()` without leaving it, so nothing computed "
            "since keeps track of them. Turn them back on with `torch.set_grad_enabled(True)`, then run this cell "
            "again.)"))
    return outcome


def _stray_factor(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome | None:
    """An answer within the tolerance that is, on every trial, the right one times the same constant c, with
    |c − 1| ≥ 2e-5: on three trials or more nine in ten of the entries' ratios lie within a quarter of |c − 1| of c
    (rounding scatters a right float32 answer's ratios around 1; it does not move them all by one factor), and on no
    trial does the ratios' median stray from c by more than a fifth of |c − 1|. (Ratios only where the right entry
    is above a thousandth of its trial's largest: near 0, rounding moves a ratio far.)"""
    if ex.predicts or (ex.dtype is not None and not ex.dtype.startswith("float")):
        return None
    answers = record.get("answers") or []
    medians, tight = [], 0
    for got, inputs in zip(answers, plan.inputs):
        try:
            want = ex.expected(inputs)
            pairs = [(np.asarray(got[n], dtype=np.float64), np.asarray(want[n], dtype=np.float64))
                     for n in ex.answers]
        except Exception:  # noqa: BLE001 — an answer that is not numbers: nothing to measure
            return None
        ratios = []
        for g, w in pairs:
            if g.shape != w.shape or not (np.isfinite(g).all() and np.isfinite(w).all()) or not w.size \
                    or not all(np.asarray(got[n]).dtype.kind == "f" for n in ex.answers):
                return None
            big = np.abs(w) > 1e-3 * float(np.abs(w).max()) if np.abs(w).max() > 0 else np.zeros(w.shape, bool)
            ratios.append(g[big] / w[big])
        r = np.concatenate(ratios) if ratios else np.empty(0)
        if r.size < 2:
            continue
        medians.append((float(np.median(r)), r))
    if len(medians) < 3:
        return None
    c = float(np.median([m for m, _ in medians]))
    off = abs(c - 1.0)
    if off < 2e-5:
        return None
    for m, r in medians:
        if abs(m - c) > 0.2 * off:
            return None
        tight += bool(np.quantile(np.abs(r - c), 0.9) <= 0.25 * off)
    if tight < 3:
        return None
    return _fail(ex, "stray_factor", f"Your numbers are the right ones times {c:.7g}, on every input: a small "
                                     "difference, but no right computation has that factor (a leftover "
                                     "`* (1 - 1e-4)`, a constant typed in slightly off). Find it and take it out.")


def _evaluate(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> Outcome:
    if grad_off := _grad_off_problem(ex, record):  # the session is left without gradients: that first
        return grad_off
    error = record.get("error")
    if error:
        read = record.get("globals_read") or []
        if error.get("kind") == "raised" and read:
            where = "it fails" if "notebook's example" in str(error.get("message")) else "on other inputs it fails"
            return _fail(ex, "reads_globals", _reads_globals(ex, record, f"and {where}: {error.get('message')}"))
        if error.get("kind") == "raised":
            text = str(error.get("message", ""))
            for pattern, code in ex.raises.items():
                if re.search(pattern, text):
                    watched = _WATCHED.match(text)  # a process check's finding, not an error of the code's own
                    answers = record.get("answers") or []
                    if watched and answers and (shown := diagnose(ex, list(zip(answers, plan.inputs)))):
                        # wrong numbers before the probe: that mistake first (no mask at all is not "masked")
                        return _fail(ex, shown, note=f" (Also, watched on {watched['inputs']}: {watched['what']}.)")
                    return _fail(ex, code, note=f" Watched on {watched['inputs']}: {watched['what']}." if watched
                                 else f" Here: {text}")
        if code := _raising_mistake(ex, plan, record):
            if code == "hard_coded" and (scalars := record.get("scalars_read")):  # read, not typed in
                return _fail(ex, "reads_globals", _reads_scalars(ex, scalars, "so it computes with this notebook's "
                                                                              "sizes whatever it is given, and on "
                                                                              "other inputs it fails: "
                                                                              f"{error.get('message')}"))
            return _fail(ex, code, note=f" (On other inputs it even fails: {error.get('message')})")
        if error.get("kind") == "raised" and (scalars := _blamed_scalars(ex, plan, record)):
            return _fail(ex, "reads_globals", _reads_scalars(ex, scalars, "and on other inputs it fails: "
                                                                          f"{error.get('message')}"))
        kind = str(error.get("kind"))
        if ex.predicts and kind in ("string", "not_array", "not_numeric", "dtype", "ragged"):
            return Outcome(ex.id, "fail", 0, ex.points, _prediction_form(ex, kind, str(error.get("message"))))
        if kind == "string" and (text := _one_number_form(ex, plan, str(error.get("message")))):
            return Outcome(ex.id, "fail", 0, ex.points, text)
        if kind == "raised" and (typed := _typed_in_problem(ex, plan, record, f" (On other inputs it even fails: "
                                                                               f"{error.get('message')})")):
            return typed
        if kind == "raised" and ex.kind == "function" and record.get("answers") \
                and (how := _unused_problem(ex, record)) is not None:
            # right on the notebook's example, then an error on other inputs from what the step does not allow
            # (another library's softmax on integer scores): what it does not allow is the thing to fix
            return how
        answers = record.get("answers") or []
        where = plan.inputs[len(answers)] if ex.kind == "function" and len(answers) < len(plan.inputs) else None
        if kind == "raised" and ex.kind == "function" and answers and (kept := _function_state(ex, record, error)):
            return kept
        if kind == "raised" and ex.kind == "function" and not ex.module and answers and where is not None \
                and _compare(ex, answers[0], ex.expected(plan.inputs[0])) is None \
                and (sized := _raised_on_other_sizes(ex, plan, len(answers), str(error.get("message")), "",
                                                     {"inputs": where, "how": record.get("how") or {},
                                                      "calls": record.get("calls")})):
            return sized
        return outcome_for_error(ex, AnswerError(kind, str(error.get("message"))),
                                 {"inputs": where, "how": record.get("how") or {}, "calls": record.get("calls")})
    if ex.kind == "value":
        return _evaluate_value(ex, plan, record)
    return _evaluate_function(ex, plan, record)


def _one_number_form(ex: Exercise, plan: Plan, message: str) -> str | None:
    """For a string handed in where the step asks for one number: say so (a plain int where the number is a
    count), instead of the general "a tensor, an array or a list"."""
    try:
        want = ex.expected(plan.inputs[0])[ex.answers[0]]
    except Exception:  # noqa: BLE001
        return None
    if want.shape != ():
        return None
    kind = "a plain int" if float(want).is_integer() else "a plain number (a float)"
    what = message.split(". Hand in numbers")[0]
    return (f"{what}: the step asks for one number. Return the number itself, {kind}; format it (commas, units) "
            "only when you print it.")


def _raised_hint(ex: Exercise, message: str, context: Mapping[str, Any] | None = None) -> str:
    """The sentences of :attr:`Exercise.raised_hints` for an error's text. ``context``: the inputs it raised on,
    the code's features and the names its own code calls, for the hints that depend on them (a hint with a third
    entry only when the code calls one of those names; a callable hint decides from the context)."""
    context = context or {}
    out = []
    for hint in ex.raised_hints:
        pattern, text = hint[0], hint[1]
        if not re.search(pattern, message):
            continue
        if len(hint) >= 3 and not set(hint[2]) & set(context.get("calls") or ()):
            continue
        if callable(text):
            text = text(message, context.get("inputs"), context.get("how") or {})
        if text:
            out.append(f" {text}")
    return "".join(out)


def _other_sizes(ex: Exercise, notebook: Mapping[str, Any], inputs: Mapping[str, Any]) -> list[str]:
    """The inputs (those the step starts from) whose shape or size differs between the notebook's example and
    ``inputs``, said as "`x` of shape (5, 6), not (3, 4)"; empty when every size is the example's, and when some
    input has another number of axes (a batch axis: what fails there may be an operation made for 2-d inputs)."""
    out = []
    for name, value in inputs.items():
        if ex.kind == "value" and ex.reads and name not in ex.reads:
            continue
        given = notebook.get(name)
        if isinstance(value, np.ndarray) and isinstance(given, np.ndarray):
            if value.ndim != given.ndim:
                return []
            if value.shape != given.shape:
                out.append(f"`{name}` of shape {tuple(value.shape)}, not {tuple(given.shape)}")
        elif _scalar(value) and _scalar(given) and isinstance(value, (int, np.integer)) and value != given \
                and _SIZE_NAME.match(name):
            out.append(f"`{name}` = {value}, not {given}")
    return out


def _only_squeezed(ex: Exercise, trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> bool:
    """Every trial whose answer has another shape than the right one has it without the right one's axes of length 1
    (a result merged another way, `reshape(-1, d)`, shows on a trial without such an axis)."""
    for got, inputs in trials:
        want = ex.expected(inputs)
        for name in ex.answers:
            g, w = got.get(name), want.get(name)
            if isinstance(g, np.ndarray) and isinstance(w, np.ndarray) and g.shape != w.shape \
                    and g.shape != tuple(d for d in w.shape if d != 1):
                return False
    return True


def _sizes_problem(ex: Exercise, plan: Plan, got0: Arrays, trials: Sequence[tuple[Arrays, Mapping[str, Any]]],
                   note: str = "", record: Mapping[str, Any] | None = None) -> Outcome | None:
    """Right on the notebook's example, a result of the wrong shape on inputs of other sizes: the axes of length 1
    of those inputs squeezed away, or an axis that keeps the example's length where the inputs give it another. Not
    said of a result that is one given back before (a result kept from an earlier call, by a cache: its shape is
    that call's, whatever sizes it has)."""
    notebook = plan.inputs[0]
    want0 = ex.expected(notebook)
    seen = [got0]
    for got, inputs in trials:
        earlier, seen = seen, [*seen, got]
        other = _other_sizes(ex, notebook, inputs)
        want = ex.expected(inputs)
        for name in ex.answers:
            g, w, w0 = (np.shape(a.get(name)) if isinstance(a.get(name), np.ndarray) else None
                        for a in (got, want, want0))
            if g is None or w is None or w0 is None or g == w or not isinstance(got0.get(name), np.ndarray):
                continue
            if any(isinstance(e.get(name), np.ndarray) and np.array_equal(e[name], got[name], equal_nan=True)
                   for e in earlier):
                return None
            label = f"`{name}`" if ex.kind == "value" else f"`{ex.answers[0]}(...)`"
            where = f" ({', '.join(other)})" if other else ""
            if 1 in w and 1 not in w0 and g == tuple(d for d in w if d != 1) and _only_squeezed(ex, trials):
                return _fail(ex, "squeezed_axes",
                             f"Right on this notebook's numbers, but on inputs with an axis of length 1{where}, "
                             f"{label} has shape {g}, where {w} is right: it lacks the axes of length 1. That is what "
                             "a `.squeeze()` without an axis does: it drops every axis of length 1, also those that "
                             "belong to the answer. Squeeze only the axis you mean (`.squeeze(0)`), or index it "
                             "(`[0]`).", note)
            if not other:  # (the sizes of the inputs are the example's: what follows has nothing to go on)
                continue
            if len(g) == len(w) == len(w0):
                kept = [k for k in range(len(w)) if w[k] != w0[k] and g[k] == w0[k]
                        and _keeps_length(ex, name, k, w0[k], trials)]
                if kept and all(g[k] == w[k] for k in range(len(w)) if k not in kept):
                    k = kept[0]
                    if (unnamed := [n for n in (record or {}).get("reads_unused") or () if n in inputs]) \
                            and (record or {}).get("upstream_named"):
                        names = ", ".join(f"`{n}`" for n in unnamed)
                        return _fail(ex, "not_computed_with",
                                     f"Right on this notebook's numbers, but not on inputs of other sizes{where}: "
                                     f"{label} has shape {g} where {w} is right, and your cell never uses {names}, "
                                     "what this step starts from: it builds the result from other names that hold "
                                     "the same numbers only in this notebook (each word's own variable, say). "
                                     f"Compute it from {names}.", note)
                    return _fail(ex, "example_sizes_only",
                                 f"Right on this notebook's numbers, but not on inputs of other sizes{where}: "
                                 f"{label} has shape {g} where {w} is right. Axis {k} has {g[k]}, its length in the "
                                 "notebook's example, where these inputs give it "
                                 f"{w[k]}: your code takes that size from the example (a number typed in, a slice or "
                                 "a loop made for it, or the size of something that equals it only there), not from "
                                 "the inputs. Take every size from the shapes of the inputs.", note)
    return None


def _length_of_example(ex: Exercise, plan: Plan, fails: Sequence[str | None], note: str = "") -> Outcome | None:
    """Right on the example and on every other input whose axis ``k`` of an input has the example's length along it
    (two at least), wrong on every one where it has another: the code counts on that length (a slice `[:4]` in a sum,
    a loop over `range(4)`), though its answers have the right shapes."""
    right = [i + 1 for i, f in enumerate(fails) if not f]
    wrong = [i + 1 for i, f in enumerate(fails) if f]
    if len(right) < 2 or not wrong or ex.kind != "value":
        return None
    notebook = plan.inputs[0]
    for name in ex.reads:
        given = notebook.get(name)
        if not isinstance(given, np.ndarray):
            continue
        shapes = {i: np.shape(v) for i in right + wrong
                  if isinstance(v := plan.inputs[i].get(name), np.ndarray) and v.ndim == given.ndim}
        for k, length in enumerate(given.shape):
            along = {i: shape[k] for i, shape in shapes.items()}
            if all(along.get(i) == length for i in right) and all(along.get(i) not in (None, length) for i in wrong):
                others = ", ".join(dict.fromkeys(str(along[i]) for i in wrong))
                return _fail(ex, "example_sizes_only",
                             f"Right on this notebook's numbers and on every other input where `{name}` has {length} "
                             f"along axis {k}, as in the example, but wrong where it has {others}: somewhere your "
                             f"code counts on that length ({length}): a slice or a loop made for it (`[:{length}]`, "
                             f"`range({length})`), a number typed in, or a size taken from something that equals it "
                             "only here. Take every size from the shapes of the inputs.", note)
    return None


def _keeps_length(ex: Exercise, name: str, axis: int, length: int,
                  trials: Sequence[tuple[Arrays, Mapping[str, Any]]]) -> bool:
    """On every trial where axis ``axis`` of the right ``name`` is not ``length`` long (the example's), the answer's
    is: the example's length kept whatever the inputs (one trial alone can land on it by chance: adjacent equal
    tokens merged on a trial of repeated tokens)."""
    for got, inputs in trials:
        answer = got.get(name)
        if not isinstance(answer, np.ndarray):
            continue
        want = np.shape(ex.expected(inputs).get(name))
        if len(want) > axis and want[axis] != length and (answer.ndim <= axis or answer.shape[axis] != length):
            return False
    return True


# errors about the numbers an input holds, not its sizes: an input of other sizes that raised one of these says
# nothing about sizes (a Categorical of negative scores, a square root of a negative number)
# (and a singular matrix handed to an inverse or a solve: its numbers, not its sizes)
_VALUE_ERROR = re.compile(r"constraint|invalid values|negative(?! dimension)|math domain error|"
                          r"must be (?:positive|finite)|contains (?:NaN|inf)|singular|LinAlgError", re.I)


def _raised_on_other_sizes(ex: Exercise, plan: Plan, trial: Any, message: str, note: str = "",
                           context: Mapping[str, Any] | None = None) -> Outcome | None:
    """Right on the notebook's example, raised on trial ``trial``, whose inputs have other sizes than the
    example's: the code fits the example's sizes only (what raised is quoted; the cause stays general)."""
    if not isinstance(trial, int) or not 0 < trial < len(plan.inputs):
        return None
    if not (where := _other_sizes(ex, plan.inputs[0], plan.inputs[trial])):
        return None
    error = re.sub(r" when called on .*$", "", re.sub(r"^`[^`]+` raised ", "", message), flags=re.S)
    if _VALUE_ERROR.search(error):  # refused for its numbers (a negative "probability"), not for its sizes
        return None
    return _fail(ex, "example_sizes_only",
                 f"Right on this notebook's numbers, but on inputs of other sizes ({', '.join(where)}) your code "
                 f"raised {error.rstrip('.')}. Somewhere it relies on the example's sizes: a number typed in (a "
                 "size, a count, an index), a slice, a loop or a reshape made for the example, a size taken from "
                 "something that equals it only there, a `.squeeze()` that drops an axis when it has length 1, or "
                 "two axes that line up only while their sizes are equal. "
                 "Take every size from the shapes of the inputs." + _raised_hint(ex, message, context), note)


def _typed_in_problem(ex: Exercise, plan: Plan, record: Mapping[str, Any], note: str = "") -> Outcome | None:
    """A function right on the notebook's example whose own code types in that example's numbers (the numbers
    of one of its arguments, such as the lengths [5, 2]) instead of using the argument."""
    answers = record.get("answers") or []
    if not answers or _compare(ex, answers[0], ex.expected(plan.inputs[0])) is not None:
        return None
    for values in record.get("typed_in") or []:
        for name, arr in plan.inputs[0].items():
            if ex.kind == "value" and name not in ex.reads:
                continue
            if isinstance(arr, np.ndarray) and arr.size == len(values) and arr.size >= 2 and \
                    np.allclose(arr.ravel().astype(float), values):
                shown = "[" + ", ".join(f"{v:g}" for v in values) + "]"
                if ex.kind == "value":
                    return _fail(ex, "hard_coded", f"Your cell types in the numbers of the notebook's `{name}` "
                                                   f"({shown}) instead of using the variable `{name}`: right for "
                                                   "this notebook's numbers only." + note)
                return _fail(ex, "hard_coded", f"`{ex.answers[0]}` types in the numbers of the notebook's "
                                               f"`{name}` ({shown}) instead of using its argument `{name}`: right "
                                               "for the notebook's example only." + note)
    return None


def _raising_mistake(ex: Exercise, plan: Plan, record: Mapping[str, Any]) -> str | None:
    """A function that answered the first inputs, then raised on the next ones: the mistake its answers show,
    when that mistake cannot run on the inputs where it raised either (keys and values swapped, which only
    runs while they are as wide as each other) — so it explains the error too."""
    answers = record.get("answers") or []
    error = record.get("error") or {}
    if ex.kind != "function" or error.get("kind") != "raised" or not answers or len(answers) >= len(plan.inputs):
        return None
    code = diagnose(ex, list(zip(answers, plan.inputs)))
    if code is None:
        return _typed_in_variant(ex, plan, answers)
    try:
        ex.variant(code, plan.inputs[len(answers)])
    except Exception:  # the mistake fails where the function failed
        return code
    return None


def _typed_in_variant(ex: Exercise, plan: Plan, answers: Sequence[Arrays]) -> str | None:
    """A ``hard_coded`` variant (a notebook's size typed in, e.g. its number of heads): right wherever that size is
    the inputs' own, as every answer so far is, and raising where the function raised (a reshape to the wrong size)."""
    if "hard_coded" not in ex.mistakes:
        return None
    try:
        if not all(_close(got, ex.variant("hard_coded", inputs), ex.answers, ex.rtol, ex.atol)
                   for got, inputs in zip(answers, plan.inputs)):
            return None
    except Exception:  # noqa: BLE001
        return None
    try:
        ex.variant("hard_coded", plan.inputs[len(answers)])
    except Exception:  # the typed-in size fails where the function failed
        return "hard_coded"
    return None


def outcome_for_error(ex: Exercise, err: AnswerError, context: Mapping[str, Any] | None = None) -> Outcome:
    status = "not_done" if err.kind == "not_done" else "fail"
    code = err.kind if err.kind in MISTAKES else None
    hint = _raised_hint(ex, err.message, context) if status == "fail" else ""
    return Outcome(ex.id, status, 0, ex.points, err.message + hint, code)


# --------------------------------------------------------------------------- notebook worlds


def rows_reversed(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: the same inputs with the rows of ``name`` in reverse order
    (the same shapes, other numbers): a function that keeps an earlier result for inputs of the same shapes (a cache
    keyed by the shape) shows."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        return {**first, name: np.ascontiguousarray(np.asarray(first[name])[::-1])}

    edge.of_first_trial = True
    return edge


def repeated_row(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: the same inputs with the second row of ``name`` a copy of the
    first (a word said twice, or padding), and a third row unlike them: a function that merges or drops equal rows
    (`unique`, `unique_consecutive`) returns fewer rows, or weighs the repeated word's key once."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        a = np.array(first[name])
        if a.shape[-2] == 2:  # and a third, other row: with two rows only, both the same, merging changes nothing
            rng = np.random.default_rng(a.shape)
            a = np.concatenate([a, rng.normal(size=(*a.shape[:-2], 1, a.shape[-1])) * (float(a.std()) or 1.0)],
                               axis=-2)
        if a.shape[-2] > 1:
            a[..., 1, :] = a[..., 0, :]
        return {**first, name: a}

    edge.of_first_trial = True
    return edge


def scaled_by(name: str, factor: float) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: ``name`` times ``factor`` (a power of 2: exact in float32).
    Small (2⁻¹⁰: values of about 0.001), a line that sets small numbers to 0 shows; large (64: outputs of about 50),
    a clamp or clip of the outputs to a "safe" range shows."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        return {**first, name: np.asarray(first[name], dtype=float) * factor}

    edge.of_first_trial = True
    return edge


LOUD_FUTURE = 800.0  # how far a hidden key outscores the one visible key of the first query: exp(−800) is 0


def loud_future(inputs: dict[str, Any]) -> dict[str, Any]:
    """An edge trial for causal attention over ``q`` (the m newest queries) and ``k`` (t cached keys, then the m new
    ones; t = 0 for plain causal attention): the first new query's next key, which it must not see, scores 800 above
    its own key. That query is made a unit vector along the first axis, every other query 0 on that axis, and the
    loud key the first query's own key plus 800·√d on that axis alone: every other query scores the two keys alike,
    exactly, in float32 too. Masked before the softmax (−∞), the loud key gets weight 0; a softmax over every key
    gives it all the weight, the visible keys underflow to 0, and zeroing the future afterwards and renormalising
    divides 0 by 0 (NaN) in that row: see :func:`future_masked_late`."""
    return _future_louder_by(inputs, LOUD_FUTURE)


def _future_louder_by(inputs: dict[str, Any], level: float, query: int = 0) -> dict[str, Any]:
    """New query ``query`` made to look along the first axis alone (the others blind to it), and its next key a copy
    of its own key ``level``·√d higher on that axis (with fewer than ``query`` + 2 new queries: the inputs as they
    are)."""
    q, k = np.array(inputs["q"], dtype=float), np.array(inputs["k"], dtype=float)
    t = k.shape[-2] - q.shape[-2]
    if q.shape[-2] < query + 2:
        return dict(inputs)
    q[..., query, :] = 0.0
    q[..., query, 0] = 1.0
    q[..., [i for i in range(q.shape[-2]) if i != query], 0] = 0.0
    k[..., t + query + 1, :] = k[..., t + query, :]
    k[..., t + query + 1, 0] += level * np.sqrt(q.shape[-1])
    return {**inputs, "q": q, "k": k}


def far_louder_future(inputs: dict[str, Any]) -> dict[str, Any]:
    """An edge trial like :func:`loud_future`'s, for the second new query (which sees two keys or more), its next key
    2²⁰ (about a million) above its own. A softmax shifted
    by a maximum taken over every key, hidden ones too, before the mask, then the library's softmax (which shifts by
    the visible maximum again): nothing overflows or turns NaN, but float32 rounds each visible score minus that
    maximum to the spacing of numbers near a million (1/16), and the row's weights move by percents. Masked first,
    the hidden key changes nothing."""
    return _future_louder_by(inputs, 2.0**20, query=1)  # (the second new query sees two keys at least)


loud_future.loud_scores = True  # (see make_plan's "loud_trials")
far_louder_future.loud_scores = True


def future_masked_late(reference: Callable[..., Any]) -> Callable[[Arrays, Mapping[str, Any]], bool]:
    """The sign of a causal softmax taken over every key, the future zeroed after it and each row renormalised (or
    the maximum taken over every key before the exponentials): on a trial where a hidden key scores far above the
    keys a query sees (:func:`loud_future`'s, :func:`far_louder_future`'s), that query's row is NaN (0/0: every
    exponential it keeps underflowed), and every row whose hidden keys stay within 80 of what it sees is right."""
    def sign(answer: Arrays, inputs: Mapping[str, Any]) -> bool:
        q, k = np.asarray(inputs["q"], dtype=np.float64), np.asarray(inputs["k"], dtype=np.float64)
        if q.shape[-2] < 2:
            return False
        (got,) = answer.values()
        got = np.asarray(got, dtype=np.float64)
        want = np.asarray(reference(**inputs), dtype=np.float64)
        if got.shape != want.shape:
            return False
        scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
        seen = np.tril(np.ones(scores.shape[-2:], dtype=bool), k.shape[-2] - q.shape[-2])
        gap = np.where(seen, -np.inf, scores).max(axis=-1) - np.where(seen, scores, -np.inf).max(axis=-1)
        if got.shape[:-1] != gap.shape:
            return False
        far, near = gap > 110.0, gap < 80.0
        return bool(far.any() and np.isnan(got[far]).all()
                    and np.allclose(got[near], want[near], rtol=1e-4, atol=1e-5))

    return sign


def zero_row(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: the same inputs with the last row of ``name`` all zeros (a
    token of zeros, whose scores are exactly 0: code that takes a score of 0 for padding, or a sparse softmax that
    drops zero entries, shows)."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        a = np.array(first[name], dtype=float)
        a[..., -1, :] = 0.0
        return {**first, name: a}

    edge.of_first_trial = True
    return edge


def large_scores(q: str = "q", k: str = "k", *, x: str | None = None, w_query: str = "w_query",
                 w_key: str = "w_key", top: float = 800.0,
                 second: float | None = None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial, with a score of ``top`` (800 by default: above exp's limit
    in float64, 709, as in float32, 88). Given ``q`` and ``k``: the first query along the first key, scoring
    ``top`` with it and ``top / 2`` with the second key (made half the first), the other rows as drawn: scores
    capped anywhere below (`tf.where(s > 80, 80, s)`) tie there. Given ``x``: one more token, 0.97 times the
    token of the top score's key (so the top row scores it 0.97 times as much: two large scores), then the query
    weights scaled so that the largest score of all is ``top``. A softmax written out without each row's maximum
    overflows there (inf / inf = NaN), and so does one shifted by another number (the row's minimum, its mean); a
    right one gives a one-hot row. See :func:`overflow_sign`.

    ``second``: that row's second score as a fraction of the first, instead (1.0: two scores of ``top``, just below
    exp's limit, whose sum is past it — a softmax written out then divides by inf, and gives 0s, with no NaN to
    see, and, given ``x``, a token of zeros where some row would lie wholly below 0; −1.0: scores of ``top`` and
    −``top``, so that a shift by the middle of the row overflows)."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        if x is None:  # the first query along the first key (a score of top), the second key half the first
            qa, ka = np.array(first[q], dtype=float), np.array(first[k], dtype=float)  # (a score of top / 2)
            if ka.shape[-2] > 1:
                ka[..., 1, :] = (0.5 if second is None else second) * ka[..., 0, :]
            if second is not None:  # no other key longer than the first: none scores above top with that query
                norms = np.linalg.norm(ka, axis=-1, keepdims=True)
                ka = ka * np.minimum(1.0, norms[..., :1, :] / np.maximum(norms, 1e-300))
            norm = float(np.sum(ka[..., 0, :] ** 2)) or 1.0
            qa[..., 0, :] = ka[..., 0, :] * (top * np.sqrt(ka.shape[-1]) / norm)
            return {**first, q: qa, k: ka}
        wq, xa = np.asarray(first[w_query], dtype=float), np.array(first[x], dtype=float)
        scores = projected_scores(xa, wq, first[w_key])
        if scores.max() <= 0:
            wq, scores = -wq, -scores
        if xa.ndim == 2:  # one more token, 0.97 times the top key's: every query scores it 0.97 times as much, so
            a = int(np.unravel_index(int(np.argmax(scores)), scores.shape)[1])  # the top row holds two large
            xa = np.concatenate([xa, (0.97 if second is None else second) * xa[a:a + 1]])  # scores, which a clamp
            # anywhere below ties
            scores = projected_scores(xa, wq, first[w_key])
        peak = float(scores.max()) or 1.0
        if second is not None and second > 0 and xa.ndim == 2 and float(scores.max(axis=-1).min()) < 0:
            # and a token of zeros, which every query scores 0: no row lies wholly far below 0 once scaled (such a
            # row's exps all underflow, and a softmax written out that steps in only when a sum is 0 or an exp is
            # inf stepped in there, hiding the overflowing sum of the top row)
            xa = np.concatenate([xa, np.zeros_like(xa[:1])])
        return {**first, x: xa, w_query: wq * (top / peak)}

    edge.of_first_trial = True
    return edge


def far_below_x(x: str = "x", w_query: str = "w_query", w_key: str = "w_key",
                depth: float = 1000.0) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial of a self-attention of ``x``: the keys' weights the queries'
    negated, and a common part added to every token, grown until every scaled score lies ``depth`` or more below 0
    (every row far below 0; 1 000: below float64's exp limit, -745). A softmax shifted by a maximum clamped at 0 (or
    only when some score is large) leaves every exponential at 0 there: 0 / 0."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        xa, wq = np.array(first[x], dtype=float), np.asarray(first[w_query], dtype=float)
        if np.shape(first[w_key]) != wq.shape:
            return first
        for t in 2.0 ** np.arange(0, 14):
            moved = xa + t
            if projected_scores(moved, wq, -wq).max() <= -depth:
                return {**first, x: moved, w_key: -wq}
        return first

    edge.of_first_trial = True
    return edge


def decades_x(x: str = "x", w_query: str = "w_query", w_key: str = "w_key",
              n: int = 14) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial of a self-attention of ``x``: ``n`` tokens, 1, 2, … ``n`` times
    its first token, and the query weights scaled so that the first row's scaled scores step down by ln 10 from key to
    key: its weights are 1, 0.1, 0.01, … down to 1e-13 (an exact ladder, whatever the draw; the other rows are
    steeper). A threshold that sets the small weights to 0 (below 1e-6, 1e-8) changes that row by far more than the
    tolerance; the largest score, n² ln 10 (451 for 14), stays below exp's limit in float64."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        xa, wq = np.asarray(first[x], dtype=float), np.asarray(first[w_query], dtype=float)
        if xa.ndim != 2:
            return first
        tokens = np.arange(1.0, n + 1.0)[:, None] * xa[:1]
        g = float(projected_scores(xa[:1], wq, first[w_key])[0, 0])
        if not np.isfinite(g) or abs(g) < 1e-6:
            return first
        return {**first, x: tokens, w_query: wq * (np.log(10.0) / g)}

    edge.of_first_trial = True
    return edge


def faint_loud_value(q: str = "q", k: str = "k", v: str = "v") -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: the first query weighs the second key about 1e-8 (its scaled
    score 18.4 below the first key's; every other key 120 below), and that key's value is 10⁸ along the first axis
    (0 elsewhere), so the faint weight adds about 1 to the first output, far above float32's rounding; the other
    queries do not see the keys' first entry, and weigh the loud value as they would any other. A threshold that
    sets weights below 1e-7 (or any above 1e-8) to 0 drops it; a right softmax keeps it."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        qa, ka, va = (np.array(first[n], dtype=float) for n in (q, k, v))
        if qa.ndim != 2 or ka.shape[-2] < 2 or qa.shape[-1] < 1:
            return first
        d = qa.shape[-1]
        qa[:, 0] = 0.0  # (the other queries blind to the keys' first entry: they weigh the keys as drawn)
        qa[0] = 0.0
        qa[0, 0] = np.sqrt(d)  # its scaled score with key j: k[j, 0]
        ka[:, 0] = -100.0
        ka[0, 0], ka[1, 0] = 20.0, 20.0 - np.log(1e8)
        va[1] = 0.0  # the loud value along the first axis alone: no other output entry sums it away to near 0
        va[1, 0] = 1e8
        return {**first, q: qa, k: ka, v: va}

    edge.of_first_trial = True
    return edge


def weights_zeroed_sign(weights: Callable[..., np.ndarray], values: Callable[..., np.ndarray], rtol: float = 1e-4,
                        atol: float = 1e-5) -> Callable[[Arrays, Mapping[str, Any]], bool]:
    """A sign of ``small_values_zeroed`` for an attention's output: the answer is ``weights(**inputs)`` with the
    entries below a threshold (1e-2 … 1e-12) set to 0 (each row divided by its new sum, or not), times
    ``values(**inputs)``, and not the right output."""
    def sign(answer: Arrays, inputs: Mapping[str, Any]) -> bool:
        if len(answer) != 1:
            return False
        (got,) = (np.asarray(a, dtype=np.float64) for a in answer.values())
        w = np.asarray(weights(**inputs), dtype=np.float64)
        vals = np.asarray(values(**inputs), dtype=np.float64)
        right = w @ vals
        if got.shape != right.shape or not np.isfinite(got).all() or np.allclose(got, right, rtol=rtol, atol=atol):
            return False
        with np.errstate(invalid="ignore", divide="ignore"):  # (a row wholly below the threshold: 0 / 0)
            for t in 10.0 ** -np.arange(2, 13):
                kept = np.where(w < t, 0.0, w)
                if any(np.allclose(got, c @ vals, rtol=rtol, atol=atol)
                       for c in (kept, kept / kept.sum(axis=-1, keepdims=True))):
                    return True
        return False

    return sign


def long_batch(first: dict[str, Any], n_q: int, n_k: int, tag: int,
               lengths: tuple[str, Sequence[int]] | None = None) -> dict[str, Any]:
    """Queries, keys and values of a batch of two long sequences (``n_q`` queries, ``n_k`` keys) with the first random
    trial's widths, drawn from a generator seeded by its shapes and ``tag``; with ``lengths`` (a name and the values),
    those lengths too, of the first trial's dtype: sizes kept in int8 or uint8 (which wrap at 128 and 256) show."""
    q, v = np.asarray(first["q"]), np.asarray(first["v"])
    rng = np.random.default_rng([*q.shape, v.shape[-1], tag])
    d, d_v = q.shape[-1], v.shape[-1]
    out = {"q": rng.normal(size=(2, n_q, d)), "k": rng.normal(size=(2, n_k, d)), "v": rng.normal(size=(2, n_k, d_v))}
    if lengths is not None:
        name, values = lengths
        out[name] = np.array(values, dtype=np.asarray(first[name]).dtype)
    return out


def more_rows(name: str, n: int = 600) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: ``name`` with ``n`` rows (tokens) of fresh numbers of the same
    spread, drawn from a generator seeded by its shape; the other inputs as they are. Tokens cut at a count typed in
    (`x[:8]`, `x[-16:]`, a "context window" of 512) show. The numbers are a quarter of that spread: with hundreds of
    tokens some outputs land near 0, where float32 rounding of large scores would exceed the tolerance (a right
    answer was rejected, and told `global_max_subtraction`, on about 1 draw in 150 at the full spread)."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        a = np.asarray(first[name], dtype=float)
        rng = np.random.default_rng([*a.shape, n])
        spread = float(a.std()) or 1.0
        return {**first, name: rng.normal(scale=spread / 4, size=(*a.shape[:-2], n, a.shape[-1]))}

    edge.of_first_trial = True
    return edge


def square_x(name: str = "x") -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: as many tokens as features (``name`` square, its rows cut or
    drawn on from a generator seeded by its shape): code that transposes its input when the first size is the
    width (`if x.shape[0] == d_model: x = x.T`) shows."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        a = np.asarray(first[name], dtype=float)
        n, d = a.shape[-2], a.shape[-1]
        if n < d:
            rng = np.random.default_rng([*a.shape, 7])
            a = np.concatenate([a, rng.normal(scale=float(a.std()) or 1.0, size=(*a.shape[:-2], d - n, d))], axis=-2)
        return {**first, name: a[..., :d, :]}

    edge.of_first_trial = True
    return edge


def loud_token(x: str = "x", w_query: str = "w_query", w_key: str = "w_key", n: int = 24, top: float = 200.0,
               scaled: bool = True, gap: float = 150.0, twin: bool = False,
               quiet: float = 4.0) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: ``n`` tokens of small numbers (the spread divided by ``quiet``),
    the last one long, so that its own score (``scaled`` by √d_k, or not) is ``top`` and every other score of its
    row ``gap`` or more below (about 190 by default). A softmax shifted by something other than the row's maximum
    that lies far below it (a percentile, a median) overflows there: inf / inf. The right row is one-hot. With
    ``n`` past 64 the loudest key of that row lies in a later block of keys than the first (a blockwise softmax
    that does not rescale what it summed shows); ``twin``: the first token a copy of the last (that row's two
    loudest keys in the first and the last block: a block's own maximum taken as the reference overflows); a small
    ``top`` and ``gap`` (12 and 9): weights of e⁻⁹ that matter (a softmax made one-hot where the top score leads by
    8 shows)."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        a = np.asarray(first[x], dtype=float)
        wq, wk = np.asarray(first[w_query], dtype=float), np.asarray(first[w_key], dtype=float)
        rng = np.random.default_rng([*a.shape, n, 24])
        small = rng.normal(scale=(float(a.std()) or 1.0) / quiet, size=(n, a.shape[-1]))
        root = np.sqrt(wk.shape[-1]) if scaled else 1.0
        # (the drawn key weights; if no token can score itself that high with them, the query weights as key
        # weights too, whose every direction scores itself above 0)
        for keys in (wk, wq) if wq.shape == wk.shape else (wk,):
            m = wq @ keys.T
            best = np.linalg.eigh((m + m.T) / 2)[1][:, -1]  # the direction that scores itself highest
            for i in range(100):
                u = best if i == 0 else rng.normal(size=a.shape[-1])
                u = u / np.linalg.norm(u)
                own = float((u @ wq) @ (u @ keys)) / root
                if own > 0.05 * (np.linalg.norm(wq) * np.linalg.norm(keys) / root + 1e-12):
                    small[-1] = u * np.sqrt(top / own)
                    if twin:
                        small[0] = small[-1]
                    s = (small @ wq) @ (small @ keys).T / root
                    rest = s[-1, 1:-1] if twin else s[-1, :-1]
                    if rest.max() <= top - gap and np.abs(s[1:-1] if twin else s[:-1]).max() < 60.0:
                        return {**first, x: small} if keys is wk else {**first, x: small, w_key: keys.copy()}
        return first

    edge.of_first_trial = True
    edge.__name__ = f"loud_token_{n}_{int(top)}{'_twin' if twin else ''}"
    return edge


def wide_projections(*names: str, width: int = 130) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An edge trial made from the first random trial: the weights ``names`` drawn again ``width`` columns wide (from
    a generator seeded by their shapes), queries and keys as wide as a real model's heads
    (128 and more): code that splits them into heads of 64 there, or is right only for narrow keys, shows."""
    def edge(first: dict[str, Any]) -> dict[str, Any]:
        out = dict(first)
        for name in names:
            w = np.asarray(first[name], dtype=float)
            rng = np.random.default_rng([*w.shape, width])
            # (the spread shrunk by √(width / the old width): the scores, sums over the width, stay as large as the
            # first trial's, and the weights soft: one-hot rows would hide what the heads do)
            spread = (float(w.std()) or 1.0) * np.sqrt(w.shape[-1] / width)
            out[name] = rng.normal(scale=spread, size=(*w.shape[:-1], width))
        return out

    edge.of_first_trial = True
    return edge


def _answer_and_reference(answer: Arrays, reference: Callable[..., Any],
                          inputs: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """A one-answer step's answer and the reference's, as float64 arrays (None for an answer of several names)."""
    if len(answer) != 1:
        return None
    (got,) = (np.asarray(v, dtype=np.float64) for v in answer.values())
    want = reference(**inputs)
    return got, np.asarray(next(iter(want.values())) if isinstance(want, Mapping) else want, dtype=np.float64)


def overflow_sign(reference: Callable[..., Any], scores: Callable[..., np.ndarray],
                  limit: float) -> Callable[[Arrays, Mapping[str, Any]], bool]:
    """A sign of ``unstable_softmax``: NaN or inf in the answer only on rows whose scaled scores (``scores(**inputs)``)
    reach above ``limit`` (exp's limit in the dtype the step computes in: 88 in float32, 709 in float64), span more
    than it, or lie all far below 0 (more than ``limit`` + 16: exp() of each is 0), where the right answer is
    finite, and every other row right (but rows whose top score lies below -``limit``, where exp() is subnormal)."""
    def sign(answer: Arrays, inputs: Mapping[str, Any]) -> bool:
        if (pair := _answer_and_reference(answer, reference, inputs)) is None:
            return False
        got, want = pair
        if got.shape != want.shape or got.ndim < 1 or not np.isfinite(want).all():
            return False
        if got.ndim == 1:  # one row of weights (one query's)
            got, want = got[None], want[None]
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(got).all(axis=-1)
            s = np.asarray(scores(**inputs), dtype=np.float64)
            s = s[None] if s.ndim == 1 else s  # one row of scores, as the answer above
            # (NaN: a hidden key's score, which no overflow is judged on)
            top, bottom = np.nanmax(s, axis=-1, initial=-np.inf), np.nanmin(s, axis=-1, initial=np.inf)
            # (and rows whose every score lies far below 0: exp() of each underflows to 0, and the row to 0/0)
            big = (top > limit) | (top - bottom > limit) | (top < -(limit + 16.0))
            # (a row whose top score lies below -limit without underflowing whole: its exp() values are subnormal
            # numbers, a few digits right at most, so an unshifted softmax is off there, not NaN)
            faint = top < -limit
        if s.shape[:-1] != bad.shape or not bad.any() or (bad & ~big).any():
            return False
        return bool(np.allclose(got[~bad & ~faint], want[~bad & ~faint], rtol=1e-4, atol=1e-5))

    return sign


EXP_LIMIT = {"float32": 88.7228, "float64": 709.7827}  # ln of the largest number of each dtype: exp() above is inf


def sum_overflow_sign(reference: Callable[..., Any], scores: Callable[..., np.ndarray],
                      dtype: str) -> Callable[[Arrays, Mapping[str, Any]], bool]:
    """A sign of ``unstable_softmax:sum``, a softmax written out (exp / sum) whose sum alone overflowed: the answer's
    rows are all 0 exactly where each exponential of the row's scaled scores (``scores(**inputs)``) fits in ``dtype``
    (the top score below exp's limit) but their sum does not (the row's log-sum-exp above it), so that every entry of
    the row is x / inf = 0, where the right row is not 0; every other row right. No NaN shows there: a softmax that
    subtracts the maximum only once a NaN (or an inf) appears gives exactly this."""
    limit = EXP_LIMIT[dtype]

    def sign(answer: Arrays, inputs: Mapping[str, Any]) -> bool:
        if (pair := _answer_and_reference(answer, reference, inputs)) is None:
            return False
        got, want = pair
        if got.shape != want.shape or got.ndim < 1 or not (np.isfinite(want).all() and np.isfinite(got).all()):
            return False
        if got.ndim == 1:  # one row of weights (one query's)
            got, want = got[None], want[None]
        s = np.asarray(scores(**inputs), dtype=np.float64)
        s = s[None] if s.ndim == 1 else s
        if s.shape[:-1] != got.shape[:-1]:
            return False
        with np.errstate(invalid="ignore", over="ignore", under="ignore"):
            top = np.nanmax(s, axis=-1)
            total = top + np.log(np.nansum(np.exp(s - top[..., None]), axis=-1))
        summed = (top < limit) & (total > limit)
        zero = (got == 0).all(axis=-1) & ~(want == 0).all(axis=-1)
        if not zero.any() or (zero & ~summed).any():
            return False
        return bool(np.allclose(got[~zero], want[~zero], rtol=1e-4, atol=1e-5))

    return sign


def sum_overflow_hint(dtype: str) -> str:
    """The hint of ``unstable_softmax:sum`` for a step that computes in ``dtype``."""
    limit = {"float32": "88.7", "float64": "709.8"}[dtype]
    return (f"Your softmax divides exponentials of the scores as they are by their sum, and on a row whose two "
            f"largest scaled scores are just below {limit} (exp's limit in {dtype}) each exponential is a finite "
            "number while their sum is inf: every weight of that row comes out x / inf = 0, with no NaN or inf to "
            "notice. Subtract each row's own maximum before exp, always (not only after something went wrong): "
            "the largest exponential is then exp(0) = 1, and no sum can overflow.")


def only_first_token_off(got: Any, want: Any) -> bool:
    """(batch, tokens, …) answers: the first sequence's first token differs from ``want``, every other one agrees (a
    finite fill above the −10⁶ scores of that token's one visible key, on the replay built for it)."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape or got.ndim < 2:
        return False
    others = np.ones(got.shape[:2], dtype=bool)
    others[0, 0] = False
    return bool(not np.allclose(got[0, 0], want[0, 0], rtol=1e-4, atol=1e-4)
                and np.allclose(got[others], want[others], rtol=1e-4, atol=1e-4))


def global_rounding_sign(reference: Callable[..., Any],
                         form: Callable[..., Any]) -> Callable[[Arrays, Mapping[str, Any]], bool]:
    """A sign of ``global_max_rounding``: one maximum of the whole matrix subtracted before a library softmax, which
    subtracts each row's own again, so nothing overflows or gives 0 / 0, but float32 rounds each difference to the
    spacing of numbers near it. ``form(**inputs)`` computes that (:func:`reference.global_shift_float32`); the
    answer, finite, is much nearer to it than to the right numbers."""
    def sign(answer: Arrays, inputs: Mapping[str, Any]) -> bool:
        if (pair := _answer_and_reference(answer, reference, inputs)) is None:
            return False
        got, want = pair
        alt = np.asarray(form(**inputs), dtype=np.float64)
        if got.shape != want.shape or got.shape != alt.shape or not np.isfinite(got).all():
            return False
        off = float(np.max(np.abs(got - want), initial=0.0))
        return off > 0 and float(np.max(np.abs(got - alt), initial=0.0)) <= 0.25 * off

    return sign


def logsumexp_sign(reference: Callable[..., Any], scores: Callable[..., np.ndarray],
                   axis: Callable[..., int] | int = -1) -> Callable[[Arrays, Mapping[str, Any]], bool]:
    """A sign of ``logsumexp_rounding``: a softmax as exp(s − logsumexp(s)) in float32, whose log-sum-exp is rounded
    to float32's spacing near it. Every wrong row (along the softmax's ``axis``; a function of the inputs, or a
    number) is the right row times one factor, whose logarithm is within two of float32's steps of that row's
    log-sum-exp (``scores(**inputs)`` the scores the softmax is taken of), and that step is 2⁻¹³ or more (a
    log-sum-exp of 1 024 or more: no other rounding of a right float32 softmax comes near it); every other row is
    right."""
    def sign(answer: Arrays, inputs: Mapping[str, Any]) -> bool:
        if (pair := _answer_and_reference(answer, reference, inputs)) is None:
            return False
        got, want = pair
        s = np.asarray(scores(**inputs), dtype=np.float64)
        if got.shape != want.shape or got.shape != s.shape or got.ndim < 1 or not np.isfinite(got).all() \
                or not np.isfinite(want).all() or not np.isfinite(s).all():
            return False
        k = int(axis(**inputs) if callable(axis) else axis)
        got, want, s = (np.moveaxis(a, k, -1).reshape(-1, a.shape[k]) for a in (got, want, s))
        wrong = ~np.isclose(got, want, rtol=1e-4, atol=1e-6).all(axis=-1)
        if not wrong.any():
            return False
        with np.errstate(divide="ignore", invalid="ignore"):
            top = s.max(axis=-1)
            lse = top + np.log(np.exp(s - top[:, None]).sum(axis=-1))
            for i in np.flatnonzero(wrong):
                keep = want[i] > 1e-6  # the factor, read where the right weights are not tiny
                if not keep.any() or (got[i][~keep] > 1e-5).any():
                    return False
                ratio = np.log(got[i][keep] / want[i][keep])
                step = float(np.spacing(np.float32(abs(lse[i]))))
                if step < 2.0 ** -13 or np.ptp(ratio) > 1e-4 + 1e-3 * step or np.abs(ratio).max() > 2.0 * step:
                    return False
        return True

    return sign


def global_shift_sign(reference: Callable[..., Any], scores: Callable[..., np.ndarray],
                      limit: float, atol: float = 1e-5) -> Callable[[Arrays, Mapping[str, Any]], bool]:
    """A sign of ``global_max_subtraction``: the answer is wrong (NaN, or numbers off) only on rows with a scaled
    score (``scores(**inputs)``) more than ``limit`` below the largest of the whole matrix, where exp() of that
    score minus that one maximum underflows (87 in float32, 708 in float64: to 0 or to a subnormal number, which
    TensorFlow flushes to 0); a row all of whose scores lie that far below turns 0 / 0. At least one such row is
    wrong, and every other row is right: the rows with the largest scores are right, so this is no overflow."""
    def sign(answer: Arrays, inputs: Mapping[str, Any]) -> bool:
        if (pair := _answer_and_reference(answer, reference, inputs)) is None:
            return False
        got, want = pair
        if got.shape != want.shape or got.ndim < 2 or not np.isfinite(want).all():
            return False
        with np.errstate(invalid="ignore"):
            bad = ~np.isclose(got, want, rtol=1e-4, atol=atol).all(axis=-1)  # (atol: the step's own)
            s = np.asarray(scores(**inputs), dtype=np.float64)
            # (NaN: a hidden key's score, which no underflow is judged on)
            peak = float(np.nanmax(s, initial=-np.inf))
            low = np.nanmin(s, axis=-1, initial=np.inf) < peak - limit
            top = np.nanmax(s, axis=-1, initial=-np.inf) >= peak  # the row(s) holding the largest score: right
            # and every row whose scores all lie so far below that maximum that each exponential is 0 is 0/0: a
            # shift by another number (each row's maximum, kept at 0 or above) leaves such a row right
            gone = np.nanmax(s, axis=-1, initial=-np.inf) < peak - (limit + 17.0)
            nan = ~np.isfinite(got).all(axis=-1)
        return s.shape[:-1] == bad.shape and bool(bad.any()) and not (bad & ~low).any() and not (bad & top).any() \
            and not (gone & ~nan).any()

    def shows(inputs: Mapping[str, Any]) -> bool:
        """Whether one maximum for the whole matrix is wrong on these inputs (a row 0/0): an answer right there
        does not subtract it."""
        s = np.asarray(scores(**inputs), dtype=np.float64)
        if s.ndim < 2:
            return False
        with np.errstate(invalid="ignore"):
            peak = float(np.nanmax(s, initial=-np.inf))
            return bool((np.nanmax(s, axis=-1, initial=-np.inf) < peak - (limit + 17.0)).any())

    sign.shows = shows
    return sign


def upstream_of(world: Callable[[np.random.Generator | None], dict[str, Any]], answer: str,
                independent: Sequence[str] = ()) -> Callable[..., dict]:
    """The ``inputs`` of a value step: every name the notebook defines before ``answer``.

    ``world(rng)`` returns all of a notebook's names in the order the notebook defines them,
    each computed from the ones before (``rng=None``: the notebook's own values). Handing the
    replayed cell *all* upstream names keeps them consistent with each other, so a cell that
    recomputes an earlier step instead of reading its variable is still judged fairly.

    ``independent`` names come from a second, independent draw: for a step that must compute
    its answer itself rather than copy an earlier result that equals it (a cross-check in NumPy,
    explicit sums next to a matrix product), so that a copy shows.
    """

    def inputs(rng: np.random.Generator | None = None) -> dict[str, Any]:
        values = world(rng)
        names = list(values)
        if answer not in names:
            raise KeyError(f"{answer!r} is not a name of this notebook's world")
        out = {n: values[n] for n in names[: names.index(answer)]}
        if rng is not None and independent:
            # of the same sizes as this draw's (a world of drawn widths draws them again): an answer that copies
            # the other draw's result then differs in its numbers, not in a shape a right cell could not give
            for _ in range(50):
                other = world(rng)
                if all(np.shape(other[n]) == np.shape(values[n]) for n in independent):
                    break
            out.update({n: other[n] for n in independent})
        return out

    return inputs
