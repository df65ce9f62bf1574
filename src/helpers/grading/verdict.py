"""From what came out of the sandbox to a verdict — in the grader's own, trusted process.

Everything in the child's records is treated as hostile: frames are length-checked JSON,
arrays are rebuilt from raw float64 bytes after their shape and size are validated, strings
are capped, every field is checked against the plan the grader sent. Only the registry's
exercises of the recognised notebook are looked at, and :func:`helpers.course.spec.evaluate`
(pure NumPy, from this process's own imports) decides, on inputs this process drew itself.

A run that did not finish (timeout, crash) keeps the answers recorded before it stopped: each
was produced by the student's code at its ``check(...)`` and is judged like any other. Steps
after the stop are "not reached" and score nothing. The status says the run did not finish.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..course import spec
from ..course.spec import Exercise, Outcome, Plan, behind_note
from ..runtime.nonfinite import KINDS as NONFINITE_KINDS
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


def _stateful(value: Any) -> str | None:
    """How a module's forward showed it changes the module (see collect's ``_called_again_differs``): "same" (two
    calls on one input differ), "shorter" (a call on a shorter sequence broke the longer one), "weights" (a call
    changed weights of other values), else None."""
    return value if value in ("same", "shorter", "weights") else None


def _text(value: Any, limit: int = MAX_TEXT) -> str:
    s = value if isinstance(value, str) else repr(value)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _ranges(raw: Any) -> list[list[Any]]:
    """A module's parameters as [name, smallest, largest, last size] (see ``collect._param_ranges``)."""
    return [[_text(e[0], 100), float(e[1]), float(e[2]), int(e[3])] for e in (raw if isinstance(raw, list) else [])[:20]
            if isinstance(e, list) and len(e) == 4 and all(_finite(v) for v in e[1:3])
            and isinstance(e[3], int) and not isinstance(e[3], bool) and 0 < e[3] < 10**9]


# the floating dtypes a module's parameters can be reported as (anything else is dropped)
_FLOAT_DTYPES = ("float64", "float16", "bfloat16", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2")

_SIGNAL_HINTS = {
    "SIGKILL": "killed — usually the memory or CPU-time limit",
    "SIGSEGV": "a segmentation fault",
    "SIGABRT": "aborted — often a framework running out of memory",
    "SIGXCPU": "the CPU-time limit",
    "SIGXFSZ": "the file-size limit",
    "SIGBUS": "a bus error",
}


def _names(value: Any, allowed: set[str], what: str) -> list[str]:
    if not isinstance(value, list) or len(value) > 50 or not all(isinstance(v, str) for v in value):
        raise ProtocolError(f"{what} is not a list of names")
    return [v[:100] for v in value if v in allowed or not allowed]


def _identifiers(value: Any, limit: int = 200) -> list[str]:
    """Python names (what a function calls), at most ``limit``; anything else is left out."""
    if not isinstance(value, list):
        return []
    return [v for v in value[:limit] if isinstance(v, str) and v.isidentifier() and len(v) <= 100]


def _scalars(value: Any) -> dict[str, float]:
    """The notebook's numbers a function reads (name → value): Python names and finite numbers only."""
    if not isinstance(value, dict):
        return {}
    return {k: float(v) for k, v in list(value.items())[:20] if isinstance(k, str) and k.isidentifier()
            and len(k) <= 100 and _finite(v)}


def _index(value: Any) -> int | None:
    return value if type(value) is int else None


def _text_map(value: Any, allowed: set[str], what: str) -> dict[str, str | None]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= allowed:
        raise ProtocolError(f"{what} does not name the exercise's variables")
    return {k: (v[:40] if isinstance(v, str) else None) for k, v in value.items()}


def _bool_map(value: Any, allowed: set[str], what: str) -> dict[str, bool]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= allowed:
        raise ProtocolError(f"{what} does not name the exercise's variables")
    return {k: v for k, v in value.items() if isinstance(v, bool)}


def _arrays(value: Any, allowed: set[str], what: str) -> dict[str, np.ndarray]:
    if not isinstance(value, dict) or not set(value) <= allowed:
        raise ProtocolError(f"{what} does not name the exercise's variables")
    return {k: decode_array(v) for k, v in value.items()}


def _containers(value: Any, allowed: set[str]) -> dict[str, list[Any]]:
    """``{answer: ["list" | "tuple", length]}``: an answer handed in as a Python container."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not set(value) <= allowed:
        raise ProtocolError("the containers do not name the exercise's variables")
    return {k: [v[0], v[1]] for k, v in value.items()
            if isinstance(v, list) and len(v) == 2 and v[0] in ("list", "tuple")
            and isinstance(v[1], int) and not isinstance(v[1], bool) and 0 <= v[1] < 10**9}
def _features(value: Any) -> dict[str, bool]:
    """The code features read from the function's own definition (:func:`helpers.runtime.cells.code_features`):
    booleans under short names."""
    if not isinstance(value, dict) or len(value) > 40:
        return {}
    return {k: v is True for k, v in value.items() if isinstance(k, str) and len(k) <= 40}


def _typed_lists(value: Any) -> list[list[float]]:
    """The lists of numbers typed into the function's code (:func:`helpers.runtime.cells.typed_lists`)."""
    if not isinstance(value, list):
        return []
    return [[float(x) for x in item] for item in value[:20]
            if isinstance(item, list) and len(item) <= 64
            and all(_finite(x) for x in item)]


def _session(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What an earlier cell (or this one) left the session in: gradients off, torch's default dtype changed."""
    out: dict[str, Any] = {"grad_off_session": raw.get("grad_off_session") is True}
    if isinstance(raw.get("default_dtype"), str):
        out["default_dtype"] = _text(raw["default_dtype"], 20)
        out["default_dtype_own"] = raw.get("default_dtype_own") is True
    return out


def _nonfinite_event(raw: Any, nested: bool = True) -> dict[str, Any] | None:
    if not isinstance(raw, dict) or raw.get("kind") not in NONFINITE_KINDS:
        return None
    event: dict[str, Any] = {"kind": raw["kind"], "op": _text(raw.get("op"), 40),
                             "dtype": _text(raw.get("dtype"), 20)}
    if type(raw.get("seq")) is int and 0 <= raw["seq"] < 10:
        event["seq"] = raw["seq"]
    if isinstance(raw.get("value"), float) and math.isfinite(raw["value"]):
        event["value"] = raw["value"]
    if nested and (after := _nonfinite_event(raw.get("after"), nested=False)) is not None:
        event["after"] = after
    return event


def _nonfinite(raw: Any, trials: int) -> dict[str, Any] | None:
    """Where the first NaN, +inf and −inf of one trial's answer were made (:mod:`helpers.runtime.nonfinite`)."""
    if not isinstance(raw, dict) or type(raw.get("trial")) is not int or not 0 <= raw["trial"] < trials:
        return None
    events = {k: e for k in ("nan", "inf", "neg") if (e := _nonfinite_event(raw.get(k))) is not None}
    return {"trial": raw["trial"], **events} if events else None


def decode_record(raw: Any, ex: Exercise, plan: Plan) -> dict[str, Any]:
    """Rebuild a record from the sandbox, keeping only what the plan asked for, in checked types."""
    if not isinstance(raw, dict):
        raise ProtocolError("a record is not an object")
    error = raw.get("error")
    if error is not None:
        if not isinstance(error, dict):
            raise ProtocolError("an error record is not an object")
        return {"error": {"kind": _text(error.get("kind"), 40), "message": _text(error.get("message"))},
                "globals_read": _names(raw.get("globals_read") or [], set(), "the globals read"),
                "globals_in": _names(raw.get("globals_in") or [], set(), "where the globals are read"),
                "answers": [_arrays(a, set(ex.answers), "an answer") for a in answers]
                if isinstance(answers := raw.get("answers"), list) and len(answers) < len(plan.inputs) else [],
                "scalars_read": _scalars(raw.get("scalars_read")), "calls": _identifiers(raw.get("calls")),
                # what the function's own code says, for the hints about the error (a mask as wide as the longest
                # length, the notebook's numbers typed in)
                "how": _features(raw.get("how")), "typed_in": _typed_lists(raw.get("typed_in")),
                "grad_off": raw.get("grad_off") is True, **_session(raw)}
    answers_names = set(ex.answers)
    answers = raw.get("answers")
    if not isinstance(answers, list) or not answers or len(answers) > len(plan.inputs):
        raise ProtocolError("the recorded answers do not match the trials")
    record: dict[str, Any] = {"answers": [_arrays(a, answers_names, "an answer") for a in answers]}
    starts_from = set(ex.reads) | set(ex.cell_reads)  # what the step starts from, in the notebook or its own cell
    facts = raw.get("facts") or {}
    if not isinstance(facts, dict):
        raise ProtocolError("the facts are not an object")
    record["facts"] = {"framework": _text_map(facts.get("framework"), answers_names, "the frameworks"),
                       "dtype": _text_map(facts.get("dtype"), answers_names, "the dtypes"),
                       "items": _text_map(facts.get("items"), answers_names, "the entries' frameworks"),
                       "grad": _bool_map(facts.get("grad"), answers_names, "the answers' gradients"),
                       "matrix": _bool_map(facts.get("matrix"), answers_names, "the answers' matrix types"),
                       "container": _containers(facts.get("container"), answers_names),
                       "inputs": _text_map(facts.get("inputs"), starts_from, "the inputs' frameworks"),
                       "input_dtypes": _text_map(facts.get("input_dtypes"), starts_from, "the inputs' dtypes"),
                       "replayed": _text_map(facts.get("replayed"), answers_names, "the replays' frameworks")}
    if ex.keeps_grad and isinstance(raw.get("keeps_grad"), bool):
        record["keeps_grad"] = raw["keeps_grad"]
    if ex.module and (stateful := _stateful(raw.get("module_stateful"))):
        record["module_stateful"] = stateful
    if ex.module and isinstance(raw.get("module_frozen"), list):
        record["module_frozen"] = [_text(n, 80) for n in raw["module_frozen"][:20]]
    if ex.module:
        record["module_ranges"] = _ranges(raw.get("module_ranges"))
    if ex.keeps_grad and raw.get("grad_inplace"):
        record["grad_inplace"] = _text(raw["grad_inplace"], 300)
    if ex.keeps_grad and isinstance(raw.get("grad_mismatch"), list):
        record["grad_mismatch"] = _names(raw["grad_mismatch"], set(plan.inputs[0]) if plan.inputs else set(),
                                         "the inputs whose gradient is wrong")
    inputs0 = set(plan.inputs[0]) if plan.inputs else set()
    nan = raw.get("nan_grad")  # a gradient that is not finite on a trial whose result is
    if ex.keeps_grad and isinstance(nan, dict) and type(nan.get("trial")) is int and 0 <= nan["trial"] < 10**4:
        record["nan_grad"] = {"trial": nan["trial"], "shapes": _text(nan.get("shapes"), 300),
                              "inputs": _names(nan.get("inputs") or [], inputs0 or {""}, "the inputs whose gradient "
                                                                                          "is not finite")}
    if isinstance(raw.get("double_dtype"), str):  # what a function hands back for float64 inputs
        record["double_dtype"] = _text(raw["double_dtype"], 500)
    if ex.keeps_grad and isinstance(raw.get("grad_flag_set"), list):  # inputs whose requires_grad it switched on
        record["grad_flag_set"] = _names(raw["grad_flag_set"], inputs0 or {""}, "the inputs flagged")
    if ex.framework == "torch" and isinstance(raw.get("grad_flag_cleared"), list):  # inputs it froze
        record["grad_flag_cleared"] = _names(raw["grad_flag_cleared"], inputs0 or {""}, "the inputs frozen")
    if ex.module and isinstance(raw.get("module_alike"), list):  # parameters that start as one draw
        record["module_alike"] = _names(raw["module_alike"], set(), "the parameters alike")
    if ex.module and isinstance(fp := raw.get("forward_params"), dict):  # parameters made or run outside __init__
        record["forward_params"] = {k: _identifiers(fp.get(k), 10) for k in ("grown", "unregistered")}
    if ex.module and type(raw.get("forward_grad")) is bool:  # gradients on while the module ran
        record["forward_grad"] = raw["forward_grad"]
    # state kept on the function itself: attributes, and default arguments its calls filled ("_memo=")
    kept = raw.get("fn_attributes")
    record["fn_attributes"] = [v for v in (kept if isinstance(kept, list) else [])[:20] if isinstance(v, str)
                               and len(v) <= 100 and v.removesuffix("=").isidentifier()]
    if raw.get("upstream") is not None:
        record["upstream"] = _arrays(raw["upstream"], starts_from, "the upstream values")
    own_up = raw.get("replay_upstream")
    if isinstance(own_up, list) and len(own_up) < len(plan.inputs):
        record["replay_upstream"] = [_arrays(a, starts_from, "the inputs the cell computes") for a in own_up]
    record["grad_off"] = raw.get("grad_off") is True
    record.update(_session(raw))
    record["aliased"] = [[a, b] for a, b in (p for p in raw.get("aliased") or [] if isinstance(p, list) and len(p) == 2)
                         if a in answers_names and b in answers_names][:10]
    replay = raw.get("replay")
    if isinstance(replay, dict):
        err = replay.get("error")
        record["replay"] = {
            "available": replay.get("available") is True,
            "error": {"message": _text((err or {}).get("message"), 500),
                      "binds": _identifiers((err or {}).get("binds"), 10)} if isinstance(err, dict) else None,
        }
    record["mutated"] = _names(raw.get("mutated") or [], set(), "the changed inputs")
    views = raw.get("mutated_views")  # an input the cell wrote into through a view of it: input → the view's name
    record["mutated_views"] = {k: v for k, v in list(views.items())[:10] if k in starts_from and isinstance(v, str)
                               and v.isidentifier() and len(v) <= 100} if isinstance(views, dict) else {}
    record["result_overwritten"] = raw.get("result_overwritten") is True
    record["reseeds"] = raw.get("reseeds") is True
    record["draws"] = raw.get("draws") is True
    if (seen := _nonfinite(raw.get("nonfinite"), len(plan.inputs))) is not None:
        record["nonfinite"] = seen  # where the first NaN or infinity of a trial's answer was made
    record["grad_mode_differs"] = raw.get("grad_mode_differs") is True
    record["keeps_by_identity"] = raw.get("keeps_by_identity") is True
    record["same_for_doubled"] = raw.get("same_for_doubled") is True
    again = raw.get("module_again")  # the module called once more on another batch: its output, or that it raised
    if ex.again is not None and isinstance(again, list) and len(again) < len(plan.inputs):
        record["module_again"] = [{"error": True} if isinstance(a, dict) and "error" in a and len(a) == 1
                                  else decode_array(a) if a is not None else None for a in again]
    if ex.in_eval and isinstance(raw.get("module_changes"), list):  # lines of the cell that change the model
        record["module_changes"] = [_text(c, 80) for c in raw["module_changes"][:3] if isinstance(c, str)]
    # names the cell bound anew: only the notebook's later-read names and the replay's inputs can be reported
    bindable = set(plan.data.get("later") or ()) | {k for t in plan.data.get("trials") or () if isinstance(t, dict)
                                                    for k in t}
    record["rebound"] = _names(raw.get("rebound") or [], bindable or {""}, "the names bound anew")
    record["deleted"] = _names(raw.get("deleted") or [], set(plan.data.get("later") or ()) or {""},
                               "the names deleted")
    if raw.get("reassigned") is not None and plan.data.get("earlier"):
        record["reassigned"] = _arrays(raw["reassigned"], set(plan.data["earlier"]), "the earlier answers bound anew")
        record["reassigned_dtypes"] = _text_map(raw.get("reassigned_dtypes"), set(plan.data["earlier"]),
                                                "the earlier answers' dtypes")
        record["reassigned_from_answers"] = _names(raw.get("reassigned_from_answers") or [],
                                                   set(plan.data["earlier"]), "the earlier answers made from these")
    stale = raw.get("stale_helpers")  # a helper kept from an earlier run: its names, and the fresh run's answers
    if isinstance(stale, dict) and isinstance(stale.get("answers"), dict):
        record["stale_helpers"] = {"names": _identifiers(stale.get("names"), 10),
                                   "answers": _arrays(stale["answers"], answers_names, "the fresh run's answers")}
    if raw.get("used") is not None and plan.data.get("others"):
        record["used"] = _arrays(raw["used"], set(plan.data["others"]), "the other answers used")
    if ex.computed_with:
        record["unused"] = _names(raw.get("unused") or [], set(ex.computed_with), "the names not used")
    record["reads_unused"] = _names(raw.get("reads_unused") or [], set(ex.reads) or {""}, "the inputs not named")
    world = plan.inputs[0] if plan.inputs and isinstance(plan.inputs[0], Mapping) else {}
    record["upstream_named"] = _names(raw.get("upstream_named") or [], set(world) or {""}, "the other names used")
    if ex.not_with:
        record["forbidden"] = _names(raw.get("forbidden") or [], set(ex.not_with), "the names used")
        via = raw.get("forbidden_via")
        if isinstance(via, dict):
            record["forbidden_via"] = {k: v[:100] for k, v in via.items()
                                       if k in record["forbidden"] and isinstance(v, str) and v.isidentifier()}
    via = raw.get("library_via")  # the alias through which a function reaches a library's attention
    if "library_attention" in ex.how and isinstance(via, str) and via.isidentifier() and len(via) <= 100:
        record["library_via"] = via
        record["library_via_own"] = raw.get("library_via_own") is True
    record["typed_in"] = _typed_lists(raw.get("typed_in"))
    record["keeps_old"] = _names(raw.get("keeps_old") or [], set(ex.answers), "the answers kept from before") \
        if isinstance(raw.get("keeps_old"), list) else []
    record["discarded"] = [_text(c, 80) for c in (raw.get("discarded") or [])[:5] if isinstance(c, str)] \
        if isinstance(raw.get("discarded"), list) else []
    raised = raw.get("raised")
    if isinstance(raised, dict):
        line = raised.get("line")
        record["raised"] = {"message": _text(raised.get("message"), 300),
                            "line": line if isinstance(line, int) and not isinstance(line, bool) else None}
    how = raw.get("how")
    if ex.how and isinstance(how, dict):
        record["how"] = {k: how.get(k) is True for k in ex.how if k in how}
    if isinstance(how, dict) and (extra := {k: how[k] for k in ("no_grad_alone", "grad_on_again", "forward_called")
                                            if type(how.get(k)) is bool}):  # how gradients are switched off or on
        record["how"] = {**(record.get("how") or {}), **extra}
    if isinstance(how, dict) and type(how.get("int_cast")) is bool:  # a zero answer is a cast to int only with one
        record["int_cast"] = how["int_cast"]
    if ex.module and isinstance(how, dict) and isinstance(how.get("no_grad_names"), list):  # where gradients are off:
        record["no_grad_names"] = [n for n in how["no_grad_names"][:1000] if n in (ex.module, "*")]  # the module?
    if ex.module and isinstance(how, dict) and isinstance(how.get("grad_calls"), list):  # where they are on
        record["grad_calls"] = [n for n in how["grad_calls"][:1000] if n == ex.module]
    record["globals_read"] = _names(raw.get("globals_read") or [], set(), "the globals read")
    record["containers_read"] = _names(raw.get("containers_read") or [], set(), "the containers read")
    record["globals_in"] = _names(raw.get("globals_in") or [], set(), "where the globals are read")
    record["models_read"] = _names(raw.get("models_read") or [], set(), "the models read")
    record["globals_written"] = _names(raw.get("globals_written") or [], set(), "the globals written")
    record["stale_defaults"] = _names(raw.get("stale_defaults") or [], set(), "the stale defaults")
    kept = raw.get("functions_kept")
    record["functions_kept"] = [_text(n, 170) for n in (kept if isinstance(kept, list) else [])[:5]
                                if isinstance(n, str)]
    record["scalars_read"] = _scalars(raw.get("scalars_read"))
    if raw.get("calls") is not None:
        record["calls"] = _identifiers(raw.get("calls"))
    module = raw.get("module")
    if isinstance(module, dict):
        params = module.get("params")
        if not isinstance(params, list) or len(params) > 1000:
            raise ProtocolError("the module's parameters are not a list")
        record["module"] = {
            "params": [[_text(p[0], 100), [], p[2] is True] for p in params if isinstance(p, list) and len(p) == 3],
            "plain_tensors": _names(module.get("plain_tensors") or [], set(), "the plain tensors"),
            "derived_tensors": _names(module.get("derived_tensors") or [], set(), "the derived tensors"),
            # only the step's own names can be reported as read (a recorder cannot make the grader print others)
            "globals_read": _names(module.get("globals_read") or [], set(ex.reads) | {ex.module}, "the globals read"),
            "globals_in": _text(module.get("globals_in"), 100) if module.get("globals_in") else None,
            "training": module.get("training") is True,
            "training_parts": [v for v in (module.get("training_parts") or [])[:5] if isinstance(v, str)
                               and len(v) <= 100 and all(s.isidentifier() for s in v.split("."))]
            if isinstance(module.get("training_parts"), list) else [],
            "own_call": module.get("own_call") is True,
            "keep_required": module.get("keep_required") is True,
            "param_ranges": _ranges(module.get("param_ranges")),
            "param_dtypes": [[_text(e[0], 100), e[1]] for e in (module.get("param_dtypes") or [])[:20]
                             if isinstance(e, list) and len(e) == 2 and e[1] in _FLOAT_DTYPES]
            if isinstance(module.get("param_dtypes"), list) else [],
        }
    probes = raw.get("probes")
    if isinstance(probes, dict):
        record["probes"] = {}
        for probe in ex.probes:
            entry = probes.get(probe.kind)
            if not isinstance(entry, dict):
                continue
            if probe.kind == "module_dropout":
                record["probes"][probe.kind] = (
                    {"error": _text(entry.get("error"), 500), "mode": _text(entry.get("mode"), 10)}
                    if entry.get("error") else
                    {**{k: decode_array(entry[k]) for k in ("eval", "train", "without_buffer")
                        if entry.get(k) is not None},
                     **{k: entry[k] for k in ("same_draw", "rng_reset", "keep_ignored", "changes_itself", "repeats",
                                           "seed_repeats", "keep_reused", "mode_after_train")
                        if type(entry.get(k)) is bool},
                     # how the module's own draw is shaped: axes it is shared by, or a shape not of the weights
                     **({"draw_shared": [a for a in entry["draw_shared"] if a in ("batch", "heads", "query", "key")]}
                        if isinstance(entry.get("draw_shared"), list) else {}),
                     **({"draw_elsewhere": [int(n) for n in entry["draw_elsewhere"][:6]]}
                        if isinstance(entry.get("draw_elsewhere"), list)
                        and all(type(n) is int and 0 < n < 10**6 for n in entry["draw_elsewhere"]) else {})})
                continue
            if probe.kind == "module_grad":
                record["probes"][probe.kind] = {} if type(entry.get("keeps_grad")) is not bool else {
                    "keeps_grad": entry["keeps_grad"], "ignores_input": entry.get("ignores_input") is True,
                    "stateful": _stateful(entry.get("stateful")),
                    **{key: _names(entry.get(key) or [], {p[0] for p in (record.get("module") or {})
                                                         .get("params", [])} or {""}, what)
                       for key, what in (("partial", "the parameters whose gradient misses a path"),
                                         ("sparse", "the parameters whose gradient is sparse"),
                                         ("train_cut", "the parameters cut off in training mode"),
                                         ("train_partial", "the parameters whose gradient misses a path in training "
                                                           "mode"))},
                    **({"inplace_error": _text(entry["inplace_error"], 300)} if entry.get("inplace_error") else {}),
                    **({"reused_graph": _text(entry["reused_graph"], 300)} if entry.get("reused_graph") else {}),
                    **({"input_cut": True} if entry.get("input_cut") is True else {}),
                    **({"eval_only": True} if entry.get("eval_only") is True else {}),
                    **({"class_state": _text(entry["class_state"], 300)} if isinstance(entry.get("class_state"), str)
                       else {}),
                    # only the module's own parameters can be named
                    "cut": _names(entry.get("cut") or [], {p[0] for p in (record.get("module") or {}).get("params", [])}
                                  or {""}, "the parameters cut off")}
                continue
            if probe.kind == "train_step":
                modes = entry.get("modes")
                if type(entry.get("steps")) is not int and isinstance(entry.get("error"), str):
                    record["probes"][probe.kind] = {"error": _text(entry["error"], 300)}
                    continue
                record["probes"][probe.kind] = {} if type(entry.get("steps")) is not int else {
                    "steps": entry["steps"], "changed": entry.get("changed") is True,
                    "unchanged": _names(entry.get("unchanged") or [], {"table", "shift"},
                                        "the stand-in's parameters left unchanged"),
                    "moved_otherwise": _names(entry.get("moved_otherwise") or [], {"table", "shift"},
                                              "the stand-in's parameters moved otherwise"),
                    **({"lr_after": float(entry["lr_after"])} if type(entry.get("lr_after")) in (int, float)
                       else {}),
                    "modes": [m is True for m in modes[:100]] if isinstance(modes, list) else [],
                    **({"rows": [r for r in entry["rows"][:100] if type(r) is int], "batch": entry["batch"]}
                       if isinstance(entry.get("rows"), list) and type(entry.get("batch")) is int else {}),
                    "training_after": entry.get("training_after") is not False,
                    **({"modes_next": [m is True for m in entry["modes_next"][:100]]}
                       if isinstance(entry.get("modes_next"), list) else {}),
                    "rng_reset": entry.get("rng_reset") is True,
                    **({k: entry[k] for k in ("one_late", "confident_changed", "wrong_changed", "large_moved_otherwise",
                                              "grad_graph")
                        if type(entry.get(k)) is bool}),
                    **({"large_norm": float(entry["large_norm"])} if type(entry.get("large_norm")) is float else {}),
                    # (a dtype's name, one of those lower than float32, or nothing the student's code can choose)
                    **({"low_precision": entry["low_precision"]}
                       if entry.get("low_precision") in ("float16", "bfloat16") else {}),
                    **({"settings_changed": {_text(k, 40): [_text(v[0], 40), _text(v[1], 40)]
                                             for k, v in list(entry["settings_changed"].items())[:10]
                                             if isinstance(v, list) and len(v) == 2}}
                       if isinstance(entry.get("settings_changed"), dict) else {}),
                    **({"state_steps": entry["state_steps"]} if type(entry.get("state_steps")) is int
                       and 0 <= entry["state_steps"] < 1000 else {})}
                continue
            if probe.kind == "module_guesses":
                guesses, history = entry.get("guesses"), entry.get("history")
                history = history if isinstance(history, dict) else {}
                # the function it trains with, as the plan names it (a recorder cannot make the grader print others)
                step = next((pi.get("trained", [None, None])[1] for pr, pi in zip(ex.probes, plan.probe_inputs)
                             if pr.kind == probe.kind), None)
                record["probes"][probe.kind] = {} if not isinstance(guesses, list) or \
                    len(guesses) > len(plan.inputs) else {
                    "guesses": [decode_array(g) for g in guesses],
                    "history": {**{k: _index(history.get(k)) for k in ("made", "trained", "step_defined")},
                                "step": step if history.get("step") == step else None,
                                "stale_classes": _identifiers(history.get("stale_classes"), 10)}}
                continue
            if probe.kind == "module_init":
                params = entry.get("params")
                record["probes"][probe.kind] = {"error": _text(entry.get("error"), 500)} if entry.get("error") or \
                    not isinstance(params, list) else {"params": [
                        [_text(p[0], 100), [int(n) for n in p[1] if type(n) is int][:8], float(p[2]), p[3] is True,
                         p[4] is True]
                        for p in params[:100] if isinstance(p, list) and len(p) == 5 and isinstance(p[1], list)
                        and isinstance(p[2], (int, float)) and not isinstance(p[2], bool)],
                    "means": {_text(k, 100): float(v) for k, v in list((entry.get("means") or {}).items())[:100]
                              if isinstance(v, (int, float)) and not isinstance(v, bool)}
                    if isinstance(entry.get("means"), dict) else {},
                    "repeated": {_text(k, 100): float(v) for k, v in list((entry.get("repeated") or {}).items())[:100]
                                 if isinstance(v, (int, float)) and not isinstance(v, bool) and 0.5 < v <= 1}
                    if isinstance(entry.get("repeated"), dict) else {},
                    # the square buffers a new module registers (name, shape), and whether dropout=0 still drops
                    "buffers": [[_text(b[0], 100), [int(n) for n in b[1][:8] if type(n) is int]]
                                for b in (entry.get("buffers") or [])[:20]
                                if isinstance(b, list) and len(b) == 2 and isinstance(b[1], list)]
                    if isinstance(entry.get("buffers"), list) else [],
                    "drops_at_zero": entry.get("drops_at_zero") is True}
                continue
            if probe.kind == "module_drops":
                record["probes"][probe.kind] = {k: entry[k] for k in ("differ", "layer_differs", "eval_differ",
                                                                      "keep_handed", "drops_at_zero",
                                                                      "differ_after_eval", "train_mismatch")
                                                if type(entry.get(k)) is bool}
                if type(entry.get("layer_calls")) is int:
                    record["probes"][probe.kind]["layer_calls"] = entry["layer_calls"]
                continue
            peak, reads, held = entry.get("peak_bytes"), entry.get("reads", 1), entry.get("held", 0)
            record["probes"][probe.kind] = {
                "peak_bytes": float(peak) if isinstance(peak, (int, float)) and not isinstance(peak, bool) else 1e30,
                "reads": int(reads) if type(reads) is int else 2,
                # how many of the stream's items the function kept alive at once
                "held": float(held) if isinstance(held, (int, float)) and not isinstance(held, bool) else 1e30,
                "answer": decode_array(entry["answer"]) if entry.get("answer") is not None else None,
            }
    return record


def judge_record(ex: Exercise, raw: Any, plan: Plan) -> Outcome:
    try:
        return spec.evaluate(ex, plan, decode_record(raw, ex, plan))
    except ProtocolError as exc:
        return Outcome(ex.id, "fail", 0, ex.points, f"The grader could not read this answer ({exc}).")
    except Exception as exc:  # an answer that makes a reference computation fail
        return Outcome(ex.id, "fail", 0, ex.points,
                       f"The grader could not evaluate this answer ({type(exc).__name__}: {_text(str(exc), 200)}).")


def decide(
    exercises: Sequence[Exercise],
    plans: Mapping[str, Plan],
    header: Mapping[str, Any],
    blob: bytes,
    cells: Sequence[Cell],
    timeout: float,
    carry_forward: bool = True,
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
            outcome = judge_record(ex, rec.get("record"), plans[ex.id])
            if outcome.status == "carried" and not carry_forward:
                outcome.points = 0
                outcome.message += " (Carried-forward credit is not given for this assignment.)"
            outcomes.append(outcome)
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
        if outcome.status == "fail" and ex.kind == "function":
            after = ex.depends_on
        elif outcome.status == "carried" and ex.kind == "value" and ex.depends_on:
            after = outcome.carried_from  # which of them its module was trained with: the record could not say
        else:
            continue
        behind = [d for d in after if d in by_id and by_id[d].status == "fail"]
        if behind:
            outcome.message += behind_note(ex, behind)


def total_points(exercises: Sequence[Exercise]) -> float:
    return float(sum(ex.points for ex in exercises))


def as_number(x: float) -> int | float:
    """3.0 -> 3 (JSON and CSV read better); keeps fractions."""
    x = float(x)
    return int(x) if np.isfinite(x) and x == int(x) else x
