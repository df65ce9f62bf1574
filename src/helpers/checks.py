"""The student's ``check(...)``: gather the answer from the notebook, judge it, say why.

``check("01.scores")`` looks up what the exercise names in the notebook's namespace, replays
the student's own cell (for a value step) or calls the student's function (for a function
step) on fresh inputs, and prints a one-line verdict. It never raises and never shows a
traceback from inside ``helpers``.

Runs in the student's kernel only: it needs the registry (:mod:`helpers.course`). In the
grader's sandbox, ``helpers.check`` is a recorder instead (:mod:`helpers.grading.zygote`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .course import spec
from .course.spec import Exercise, Outcome
from .runtime import collect as runtime
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
) -> Outcome:
    """Gather and evaluate one exercise; every problem becomes an :class:`Outcome`.

    ``cell`` is the student's cell to replay (source, or a function of the step's inputs that
    returns the answers); by default the latest run of the cell that binds the answer, in
    ``history``. Without either, a value step is judged on the notebook's numbers only.
    """
    try:
        plan = spec.make_plan(ex, rng)
    except RuntimeError:  # a rare run of draws that never separates the variants: draw again
        plan = spec.make_plan(ex, rng)
    record = runtime.collect(plan.data, namespace, history, cell=cell, shell=shell)
    outcome = spec.evaluate(ex, plan, record)
    if outcome.status == "fail" and ex.kind == "function" and ex.depends_on:
        after = ex.depends_on
    elif outcome.status == "carried" and ex.kind == "value" and ex.depends_on:
        after = outcome.carried_from  # which of them its module was trained with: the record could not say
    else:
        after = ()
    behind = [d for d in after if judge(spec.get(d), namespace, rng, history=history, shell=shell).status == "fail"]
    if behind:
        outcome.message += spec.behind_note(ex, behind)
    return outcome


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
