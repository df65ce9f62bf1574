"""The student's ``check(...)``: gather the answer from the notebook, judge it, say why.

``check("01.scores")`` looks up what the exercise names in the notebook's namespace, replays
the student's own cell (for a value step) or calls the student's function (for a function
step) on fresh inputs, and prints a one-line verdict. It never raises and never shows a
traceback from inside ``helpers``.

Runs in the student's kernel only: it needs the registry (:mod:`helpers.course`). In the
grader's sandbox, ``helpers.check`` is a recorder instead (:mod:`helpers.grading.zygote`).
"""

from __future__ import annotations

import os
import sys
import types
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .course import spec
from .course.spec import Exercise, Outcome
from .runtime import collect as runtime
from .runtime.cells import definition_source, mentioned_names
from .runtime.history import History, current

__all__ = ["check", "format_outcome", "judge"]

_SYMBOL = {"pass": "✅", "fail": "❌", "not_done": "⏳", "carried": "🟡"}


def judge(
    ex: Exercise,
    namespace: Mapping[str, Any],
    rng: np.random.Generator | None = None,
    *,
    history: History | None = None,
    cell: str | Callable[..., Mapping[str, Any]] | None = None,
    shell: Any = None,
    _upstream: dict[str, str] | None = None,
) -> Outcome:
    """Gather and evaluate one exercise; every problem becomes an :class:`Outcome`.

    ``cell`` is the student's cell to replay (source, or a function of the step's inputs that
    returns the answers); by default the latest run of the cell that binds the answer, in
    ``history``. Without either, a value step is judged on the notebook's numbers only.
    """
    rng = rng if rng is not None else _seeded(ex.id)
    # the verdicts on the earlier functions this step uses, each judged once per check: the step and the functions
    # it uses may use the same earlier ones (10.trained uses 10.model, which uses 10.attention)
    upstream = _upstream if _upstream is not None else {}

    def failing(ids: list[str]) -> list[str]:
        for d in ids:
            if d not in upstream:
                upstream[d] = "pending"  # (two functions that call each other: each judged once)
                upstream[d] = judge(spec.get(d), namespace, rng, history=history, shell=shell,
                                    _upstream=upstream).status
        return [d for d in ids if upstream[d] == "fail"]

    try:
        plan = spec.make_plan(ex, rng)
    except RuntimeError:  # a rare run of draws that never separates the variants: draw again
        plan = spec.make_plan(ex, rng)
    record = runtime.collect(plan.data, namespace, history, cell=cell, shell=shell, defer=True)
    outcome = spec.evaluate(ex, plan, record)
    if outcome.status == "fail" and outcome.diagnosis not in _NOT_CARRIED:
        uses = _functions_used(ex, namespace, history, cell)
        behind = failing(uses)
        if behind and _right_with(ex, plan, namespace, history, shell, cell, behind) is True:
            names = " and ".join(f"`{spec.get(d).answers[0]}` ({d})" for d in behind)
            return Outcome(ex.id, "carried", ex.points, ex.points,
                           f"Your code for this step is right: with a correct {names} it computes exactly what it "
                           f"should. But your own {'is' if len(behind) == 1 else 'are'} not right yet, so the result "
                           "is not either: fix the earlier step, then run this cell again.",
                           carried_from=tuple(behind))
        if behind:
            outcome.message += spec.behind_note(ex, behind)
    elif outcome.status == "pass" and (uses := _functions_used(ex, namespace, history, cell)):
        # right, with earlier functions of the student's: if one of them is wrong, is this step right only because
        # it undoes that mistake (a transpose around a softmax that normalises columns)?
        behind = failing(uses)
        if behind and _right_with(ex, plan, namespace, history, shell, cell, behind) is False:
            names = " and ".join(f"`{spec.get(d).answers[0]}` ({d})" for d in behind)
            return Outcome(ex.id, "fail", 0, ex.points,
                           f"Your step gives the right numbers only together with your own {names}, which "
                           f"{'is' if len(behind) == 1 else 'are'} not right yet: with a correct one in its place it "
                           "gives wrong ones, so your code here undoes that function's mistake (a transpose, a scale "
                           "or an axis added in this step). Fix the earlier function, then write this step as if it "
                           "were right.", "compensates_upstream")
    elif outcome.status == "carried" and ex.kind == "value" and ex.depends_on:
        # which of them its module was trained with: the record could not say
        behind = failing(list(outcome.carried_from))
        if behind:
            outcome.message += spec.behind_note(ex, behind)
    return outcome


def _seeded(exercise_id: str) -> np.random.Generator | None:
    """The fresh inputs' generator when ``HELPERS_CHECK_SEED`` is set (the course's own tests set it, so that
    a run of them draws the same inputs every time): one per exercise, the same whatever ran before. Unset,
    every check draws anew (``None``)."""
    seed = os.environ.get("HELPERS_CHECK_SEED", "").strip()
    if not seed.isdigit():
        return None
    return np.random.default_rng([int(seed), zlib.crc32(exercise_id.encode())])


# a verdict about the cell itself, whatever the functions it calls: no carried-forward credit
_NOT_CARRIED = {"cell_raised", "misspelled_name", "overwrites_variable", "mutates_input", "not_as_asked",
                "wrong_framework", "wrong_dtype", "reads_globals", "hard_coded", "not_computed_with", "grad_left_off"}


def _functions_used(ex: Exercise, namespace: Mapping[str, Any], history: History | None,
                    cell: Any) -> list[str]:
    """The function steps of the notebook this step calls: declared (``depends_on``), or named in the student's
    own code (its function's definition, or the cell of a value step)."""
    found = list(ex.depends_on)
    run = history.defining(ex.answers) if history is not None else None
    source = run.source if run is not None else cell if isinstance(cell, str) else None
    if source is not None:
        if ex.kind == "function":
            source = definition_source(source, ex.answers[0])
        mentioned = mentioned_names(source)
        found += [o.id for o in spec.exercises_for(ex.notebook) if o.kind == "function" and o is not ex
                  and o.answers[0] in mentioned and callable(namespace.get(o.answers[0])) and o.id not in found]
    return found


def _right_with(ex: Exercise, plan: spec.Plan, namespace: Mapping[str, Any], history: History | None, shell: Any,
                cell: Any, behind: list[str]) -> bool | None:
    """Is this step right when the functions in ``behind`` are replaced by correct ones (the course's
    references)? For a value step the cell is replayed on the notebook's own inputs too. None: it cannot be told
    (the code could not be run again so, or raised)."""
    from .course.samples import student_function

    correct = {spec.get(d).answers[0]: student_function(spec.get(d), None, spec.get(d).framework) for d in behind}
    data = dict(plan.data)
    ns = {**namespace, **correct}
    if ex.kind == "function":
        fn = namespace.get(ex.answers[0])
        if not isinstance(fn, types.FunctionType):
            return None
        ns[ex.answers[0]] = types.FunctionType(fn.__code__, {**fn.__globals__, **correct}, fn.__name__,
                                               fn.__defaults__, fn.__closure__)
        data["probes"] = []
    else:  # replayed on the notebook's own inputs as well: plan.inputs, one replay each
        data["trials"] = [plan.inputs[0], *plan.data["trials"]]
    try:
        record = runtime.collect(data, ns, history, cell=cell, shell=shell, defer=True)
    except Exception:  # noqa: BLE001 — no credit when it cannot be told
        return None
    if record.get("error") or (record.get("replay") or {}).get("error"):
        return None
    answers = record.get("answers") or []
    got = answers if ex.kind == "function" else answers[1:]
    if len(got) != len(plan.inputs):
        return None
    return all(spec.compare(ex, g, ex.expected(world)) is None for g, world in zip(got, plan.inputs))


def check(exercise_id: str, namespace: Mapping[str, Any] | None = None) -> None:
    """Check one exercise and print a one-line verdict (✅ / 🟡 / ❌ / ⏳) with what to change."""
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    try:
        ex = spec.get(exercise_id)
    except KeyError as err:
        print(f"⚠️ {err.args[0]}")
        return
    try:
        history = current()
        shell = None
        if history is not None:
            from IPython import get_ipython

            shell = get_ipython()
        outcome = judge(ex, namespace, history=history, shell=shell)
    except Exception as exc:  # a bug in helpers must not look like the student's fault
        print(f"⚠️ {exercise_id}: the check itself failed ({type(exc).__name__}: {exc}). Please report this.")
        return
    print(format_outcome(outcome))


def format_outcome(outcome: Outcome) -> str:
    """``✅ 01.qkv — …: correct.`` / ``❌ 01.qkv — not right yet (code): …`` / ``⏳ … not done yet: …``
    / ``🟡 01.outputs — right for your inputs: …``"""
    head = f"{_SYMBOL[outcome.status]} {outcome.exercise} — "
    if outcome.status == "pass":
        return head + outcome.message
    label = {"not_done": "not done yet", "carried": "right for your inputs"}.get(outcome.status, "not right yet")
    if outcome.diagnosis:
        label += f" ({outcome.diagnosis})"
    return f"{head}{label}: {outcome.message}"
