"""From what came out of the sandbox to a verdict — in the grader's own, trusted process.

Everything in the child's records is treated as hostile: frames are length-checked JSON,
arrays are rebuilt from raw float64 bytes after their shape and size are validated, strings
are capped. Only the registry's exercises of the recognised notebook are looked at, and
:func:`helpers.spec.evaluate` (pure NumPy, from this process's own imports) decides.

A run that did not finish (timeout, crash) keeps the answers recorded before it stopped: each
was produced by the student's code at its ``check(...)`` and is judged like any other. Steps
after the stop are "not reached" and score nothing. The status says the run did not finish.
"""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import spec
from ..checks import seeded_trials
from ..convert import AnswerError, NotDone
from ..spec import Exercise, Outcome
from .protocol import ProtocolError, decode_array, split_frames

MAX_TEXT = 2000
MAX_NOTES = 50


@dataclass
class Cell:
    index: int  # position in the notebook (0-based, all cells)
    source: str

    def label(self) -> str:
        lines = [ln.strip() for ln in self.source.splitlines() if ln.strip()]
        first = next((ln for ln in lines if not ln.startswith("#")), lines[0] if lines else "")
        if len(first) > 60:
            first = first[:57] + "…"
        return f"cell {self.index + 1}" + (f" (`{first}`)" if first else "")


@dataclass
class RunResult:
    status: str  # graded / timeout / crashed
    error: str | None
    outcomes: list[Outcome]
    notes: list[str] = field(default_factory=list)
    seconds: float | None = None
    # the notes about cells that raised, structured: {"cell": notebook index or None, "line", "text", "note"}
    errors: list[dict[str, Any]] = field(default_factory=list)
    error_count: int = 0  # every "err" record, also those beyond MAX_NOTES


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


_SIGNAL_HINTS = {
    "SIGKILL": "killed — usually the memory or CPU-time limit",
    "SIGSEGV": "a segmentation fault",
    "SIGABRT": "aborted — often a framework running out of memory",
    "SIGXCPU": "the CPU-time limit",
    "SIGXFSZ": "the file-size limit",
    "SIGBUS": "a bus error",
}


def _outcome_from_record(ex: Exercise, rec: Mapping[str, Any], seeds: Sequence[int]) -> Outcome:
    if "error" in rec:
        err = rec["error"]
        if not isinstance(err, dict):
            raise ProtocolError("an error record is not an object")
        kind, message = _text(err.get("kind"), 40), _text(err.get("message"))
        return spec.outcome_for_error(ex, NotDone(message) if kind == "not_done" else AnswerError(kind, message))
    if ex.kind == "value":
        value = rec.get("value")
        if not isinstance(value, dict) or set(value) != set(ex.answers):
            raise ProtocolError("the recorded answer does not name the exercise's variables")
        got = {name: decode_array(value[name]) for name in ex.answers}
        return spec.evaluate(ex, [got], [ex.inputs()])
    outputs = rec.get("outputs")
    if not isinstance(outputs, list) or len(outputs) != 1 + len(seeds):
        raise ProtocolError("the recorded function outputs do not match the trials")
    name = ex.answers[0]
    got_by_trial = [{name: decode_array(o)} for o in outputs]
    return spec.evaluate(ex, got_by_trial, seeded_trials(ex, seeds))


def judge_record(ex: Exercise, rec: Mapping[str, Any], seeds: Sequence[int]) -> Outcome:
    try:
        return _outcome_from_record(ex, rec, seeds)
    except ProtocolError as exc:
        return Outcome(ex.id, "fail", 0, ex.points, f"The grader could not read this answer ({exc}).")
    except Exception as exc:  # an answer that makes a reference computation fail
        return Outcome(ex.id, "fail", 0, ex.points,
                       f"The grader could not evaluate this answer ({type(exc).__name__}: {_text(str(exc), 200)}).")


def decide(
    exercises: Sequence[Exercise],
    seeds: Mapping[str, Sequence[int]],
    header: Mapping[str, Any],
    blob: bytes,
    cells: Sequence[Cell],
    timeout: float,
) -> RunResult:
    """Turn the zygote's header and the child's raw records into a status and outcomes."""
    frames, problem = split_frames(blob)
    wanted = {ex.id for ex in exercises}
    records: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    errors: list[dict[str, Any]] = []
    error_count = 0
    last_cell: int | None = None
    done = False
    for f in frames:
        if not isinstance(f, dict):
            problem = problem or "a message that is not an object"
            continue
        kind = f.get("t")
        if kind == "cell" and type(f.get("i")) is int:
            last_cell = f["i"]
        elif kind == "rec" and isinstance(f.get("id"), str) and f["id"] in wanted:
            records[f["id"]] = f  # the last check of an exercise counts
        elif kind == "err":
            error_count += 1
            if len(notes) >= MAX_NOTES:
                continue
            i, line = f.get("i"), f.get("line")
            known_cell = type(i) is int and 0 <= i < len(cells)
            where = cells[i].label() if known_cell else "after the last cell"
            line = line if type(line) is int and 0 < line < 10**7 else None
            at = f", line {line}" if line else ""
            text = _text(f.get("text"), 500)
            notes.append(f"{where}{at} raised {text}")
            errors.append({"cell": cells[i].index if known_cell else None, "line": line, "text": text,
                           "note": notes[-1]})
        elif kind == "done":
            done = True
    if problem:
        notes.append(f"Part of what the notebook's process sent could not be read ({problem}).")

    state = header.get("state")
    code, sig = header.get("exit_code"), header.get("signal")
    where = ""
    if type(last_cell) is int and 0 <= last_cell < len(cells):
        where = f" while running {cells[last_cell].label()}"
    finished = state == "exited" and code == 0 and sig is None and done
    if finished:
        status, error = "graded", None
    elif state == "timeout":
        status = "timeout"
        error = f"The notebook was still running after {timeout:g} s{where} and was stopped."
    else:
        status = "crashed"
        if state == "overflow":
            error = f"The notebook's process sent far too much data{where} and was stopped."
        elif state == "exited" and problem:
            error = (f"The notebook's process sent data the grader could not read ({problem}){where}: "
                     "did the notebook write into the grader's channel?")
        elif state == "exited" and isinstance(sig, int):
            name = _signal_name(sig)
            error = f"The notebook's process died ({name}: {_SIGNAL_HINTS.get(name, 'a fatal signal')}){where}."
        elif state == "exited":
            error = f"The notebook's process exited early (exit code {code}){where}, e.g. through os._exit()."
        else:
            error = f"The notebook could not be run to the end ({_text(header.get('message') or state, 300)}){where}."
    if error:
        error += " Answers checked before that point are graded; later steps were not reached."

    outcomes = []
    for ex in exercises:
        rec = records.get(ex.id)
        if rec is not None:
            outcomes.append(judge_record(ex, rec, seeds.get(ex.id, [])))
        elif finished:
            outcomes.append(Outcome(ex.id, "not_done", 0, ex.points, "No answer was recorded for this step."))
        else:
            outcomes.append(Outcome(ex.id, "not_done", 0, ex.points,
                                    "Not reached: the notebook stopped before this step was checked."))
    _add_dependency_notes(exercises, outcomes)
    seconds = header.get("seconds")
    return RunResult(status, error, outcomes, notes, float(seconds) if isinstance(seconds, (int, float)) else None,
                     errors, error_count)


def _add_dependency_notes(exercises: Sequence[Exercise], outcomes: list[Outcome]) -> None:
    by_id = {o.exercise: o for o in outcomes}
    for ex, outcome in zip(exercises, outcomes):
        if outcome.status != "fail" or not ex.depends_on:
            continue
        behind = [d for d in ex.depends_on if d in by_id and by_id[d].status == "fail"]
        if behind:
            outcome.message += (
                f" Note: {', '.join(behind)} is not passing yet, so this step starts from wrong inputs; "
                "fix that one first."
            )


def total_points(exercises: Sequence[Exercise]) -> float:
    return float(sum(ex.points for ex in exercises))


def as_number(x: float) -> int | float:
    """3.0 -> 3 (JSON and CSV read better); keeps fractions."""
    x = float(x)
    return int(x) if np.isfinite(x) and x == int(x) else x
