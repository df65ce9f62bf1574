"""Run the corpus of student attempts the way a student runs them: in a Jupyter kernel.

A corpus file (``tests/corpus/NN_*.yaml``) lists attempts at one notebook's TO-DO cells::

    notebook: 01_illustrated_self_attention
    attempts:
      - exercise: 01.scores
        region: |                 # what the student typed between the TO-DO's markers
          attn_scores = keys @ queries.T
        expect: fail              # pass | fail | not_done | carried
        diagnosis: transposed_scores   # the code the message must carry; a list: any of them
                                       # (with "none" in it: or no code);
                                       # "none": the message must name no code (a precise message
                                       # without one); leave it out for a pass
        says: queries @ keys.T    # optional: a piece of text the message must contain
        says_not: (01.outputs)    # optional: text (or a list) the message must not contain
        why: the product reversed # what the student did (for people reading the corpus)

``cell:`` instead of ``region:`` replaces the whole TO-DO cell. ``before:`` is code the student
ran just before (e.g. a wrong earlier step, for carried-forward credit); a list of such cells is run
one cell after the other (e.g. a wrong step, then training with it, then the step fixed);
``setup_exercise:`` runs the attempt after that other exercise's TO-DO cell instead of the solution's.

The runner starts one kernel per notebook and executes the solution notebook top to bottom. At
each TO-DO cell it first plays every attempt at it — the attempt's cell, then the check cell(s)
that follow it — and records what the check printed; after each attempt it runs again the earlier
solution cells that bind what the attempt (or its ``before:``) bound beyond the cell's own names, so
the next attempt starts from the notebook's values. Then it runs the solution's own cell, so the
next steps start from the right values, exactly as a student who fixes the cell and goes on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

from helpers.runtime.cells import assigned_names, deleted_names, inplace_targets, mentioned_names

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
CORPUS = Path(__file__).resolve().parent

_REGION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION[ \t]*$", re.M | re.S)
_CHECK = re.compile(r"""check\(\s*["']([^"']+)["']""")
_VERDICT = re.compile(r"^(✅|❌|⏳|🟡|⚠️) (\S+) — (.*)$")
_SYMBOL = {"✅": "pass", "❌": "fail", "⏳": "not_done", "🟡": "carried", "⚠️": "broken"}


@dataclass
class Attempt:
    notebook: str
    exercise: str
    expect: str
    source: str | None = None  # the whole cell
    region: str | None = None  # what replaces the TO-DO region
    diagnosis: Any = None
    says: str | None = None
    says_not: str | list[str] | None = None
    why: str = ""
    before: str | list[str] | None = None
    index: int = 0
    file: str = ""

    @property
    def name(self) -> str:
        return f"{self.exercise}#{self.index}"


@dataclass
class Result:
    attempt: Attempt
    status: str | None = None
    code: str | None = None
    message: str = ""
    output: str = ""
    problems: list[str] = field(default_factory=list)


class _StrictLoader(yaml.SafeLoader):
    """YAML that refuses a key given twice in one mapping (an attempt with two `expect:` would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice",
                                                        key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep)


def load(path: Path) -> list[Attempt]:
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=_StrictLoader)  # noqa: S506 — a safe loader
    notebook = data["notebook"]
    out = []
    for i, raw in enumerate(data.get("attempts") or []):
        unknown = set(raw) - {"exercise", "expect", "cell", "region", "diagnosis", "says", "says_not", "why",
                              "before"}
        if unknown:
            raise ValueError(f"{path.name}, attempt {i}: unknown keys {sorted(unknown)}")
        if ("cell" in raw) == ("region" in raw):
            raise ValueError(f"{path.name}, attempt {i}: give exactly one of cell: or region:")
        if raw["expect"] not in ("pass", "fail", "not_done", "carried"):
            raise ValueError(f"{path.name}, attempt {i}: expect must be pass, fail, not_done or carried")
        if raw["expect"] == "fail" and "diagnosis" not in raw:
            raise ValueError(f"{path.name}, attempt {i}: a wrong attempt says which diagnosis it deserves "
                             "(a code, a list of codes, or none)")
        out.append(Attempt(notebook, raw["exercise"], raw["expect"], raw.get("cell"), raw.get("region"),
                           raw.get("diagnosis"), raw.get("says"), raw.get("says_not"), raw.get("why", ""),
                           raw.get("before"), i, path.name))
    return out


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("[0-9][0-9]_*.yaml"))


def todo_cells(nb: nbformat.NotebookNode) -> dict[str, int]:
    """exercise id → index of its TO-DO cell (the last region cell before its check)."""
    out: dict[str, int] = {}
    last_region = None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if "### BEGIN SOLUTION" in cell.source:
            last_region = i
        after = cell.source.split("### END SOLUTION")[-1]
        for ex_id in _CHECK.findall(after):
            if last_region is not None:
                out.setdefault(ex_id, last_region)
    return out


def _check_cells(nb: nbformat.NotebookNode, todo: int, exercise: str) -> list[int]:
    """The cells to run after the attempt: up to and including the one that checks ``exercise``."""
    own = nb.cells[todo].source.split("### END SOLUTION")[-1]
    if exercise in _CHECK.findall(own):
        return []
    cells = []
    for j in range(todo + 1, len(nb.cells)):
        cell = nb.cells[j]
        if cell.cell_type != "code":
            continue
        cells.append(j)
        if exercise in _CHECK.findall(cell.source):
            return cells
    raise ValueError(f"no check({exercise!r}) after cell {todo + 1}")


def attempt_source(attempt: Attempt, solution_cell: str) -> str:
    if attempt.source is not None:
        return attempt.source
    m = _REGION.search(solution_cell)
    indent = m.group(1)
    body = "".join(indent + ln if ln.strip() else ln for ln in attempt.region.splitlines(keepends=True))
    if not body.endswith("\n"):
        body += "\n"
    return solution_cell[: m.start()] + body + solution_cell[m.end() + 1:]


def _text(outputs: list) -> str:
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}\n" + "\n".join(out.get("traceback", [])) + "\n")
    return "".join(parts)


def _verdict(text: str, exercise: str) -> tuple[str | None, str | None, str]:
    for line in text.splitlines():
        m = _VERDICT.match(line)
        if m and m.group(2) == exercise:
            status = _SYMBOL[m.group(1)]
            rest = m.group(3)
            code = None
            cm = re.match(r"(?:not right yet|right for your inputs|not done yet) \(([a-z0-9_]+)\): ", rest)
            if cm:
                code = cm.group(1)
            return status, code, rest
    return None, None, ""


def judge_result(res: Result) -> list[str]:
    """What is wrong with a result, measured against what the attempt expects (empty: fine)."""
    a = res.attempt
    problems = []
    if res.status is None:
        return [f"{a.name}: the check printed no verdict:\n{res.output[-1500:]}"]
    if "Traceback" in res.output and "helpers" in res.output.split("Traceback", 1)[1][:3000]:
        problems.append(f"{a.name}: a traceback from helpers:\n{res.output[-1500:]}")
    if res.status == "broken":
        problems.append(f"{a.name}: the check itself failed: {res.message}")
    if res.status != a.expect:
        problems.append(f"{a.name} ({a.why}): expected {a.expect}, the check said {res.status}: {res.message}")
    elif a.expect == "fail":
        wanted = a.diagnosis
        if wanted == "none":
            if res.code is not None:
                problems.append(f"{a.name} ({a.why}): names {res.code}, a cause this attempt does not have: "
                                f"{res.message}")
        else:
            allowed = [None if w == "none" else w for w in ([wanted] if isinstance(wanted, str) else wanted)]
            if res.code not in allowed:
                problems.append(f"{a.name} ({a.why}): should be diagnosed {allowed}, got {res.code}: {res.message}")
    if a.says and a.says not in res.message:
        problems.append(f"{a.name}: the message should contain {a.says!r}: {res.message}")
    for text in [a.says_not] if isinstance(a.says_not, str) else (a.says_not or []):
        if text in res.message:
            problems.append(f"{a.name}: the message should not contain {text!r}: {res.message}")
    return problems


_RESET = ("import sys as _sys\nif 'torch' in _sys.modules:\n    _sys.modules['torch'].set_grad_enabled(True)\n"
          "    _sys.modules['torch'].set_default_dtype(_sys.modules['torch'].float32)\n")


def run_notebook(notebook: str, attempts: list[Attempt], timeout: int = 300) -> Iterator[Result]:
    """Play every attempt at ``notebook`` in one kernel (see the module's docstring)."""
    path = SOLUTIONS / f"{notebook}.ipynb"
    nb = nbformat.read(path, as_version=4)
    todos = todo_cells(nb)
    by_cell: dict[int, list[Attempt]] = {}
    for a in attempts:
        if a.exercise not in todos:
            raise ValueError(f"{a.file}: no TO-DO cell for {a.exercise} in {notebook}")
        by_cell.setdefault(todos[a.exercise], []).append(a)
    nb.cells.append(new_code_cell(""))  # the slot every cell below is run in
    scratch = len(nb.cells) - 1
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            record_timing=False, shutdown_kernel="immediate",
                            resources={"metadata": {"path": str(path.parent)}})

    def run(source: str) -> str:
        cell = new_code_cell(source)
        client.execute_cell(cell, scratch, store_history=True)
        return _text(cell.outputs)

    def restore(changed: set[str], upto: int) -> None:
        """Run again the solution's cells (before cell ``upto``) that bind the names in ``changed``."""
        if not changed:
            return
        for j in range(upto):
            c = nb.cells[j]
            if c.cell_type == "code" and assigned_names(c.source) & changed:
                run(c.source)

    with client.setup_kernel():
        run("import matplotlib\nmatplotlib.use('Agg')")
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            for a in by_cell.get(i, []):
                out = ""
                for before in [a.before] if isinstance(a.before, str) else a.before or []:
                    out += run(before)
                out += run(attempt_source(a, cell.source))
                for j in _check_cells(nb, i, a.exercise):
                    out += run(nb.cells[j].source)
                status, code, message = _verdict(out, a.exercise)
                yield Result(a, status, code, message, out)
                # what the attempt (or the code before it) bound that the solution's own cell does not: an earlier
                # step's variable it overwrote, which the next attempts must find as the notebook has it
                source = attempt_source(a, cell.source)
                before = a.before if isinstance(a.before, str) else "\n".join(a.before or [])
                stray = assigned_names(before) | (assigned_names(source) - assigned_names(cell.source)) \
                    | deleted_names(source)
                if "mutates_input" in str(a.diagnosis):  # changed in place: whatever it names
                    stray |= mentioned_names(source)
                if code == "mutates_input":  # and the variables the check says were changed (a function's argument
                    # changed in place changes the notebook's variable handed to it: `keep_draw` for `keep`)
                    stray |= set(re.findall(r"`(\w+)`", message))
                elif written := sorted(inplace_targets(before + "\n" + source)):
                    # what it wrote into in place (`x[1].zero_()`, `w += …`), where that is an array or a tensor of
                    # the notebook's (a model is trained by later cells, which restoring its defining cell skips)
                    probe = new_code_cell(f"print(*[n for n in {written!r} if hasattr(globals().get(n), 'shape')])")
                    client.execute_cell(probe, scratch, store_history=False)
                    stray |= set(_text(probe.outputs).split()) & set(written)
                # global state an attempt may leave behind (gradients switched off for the session, another
                # default dtype), reset before the cells that bind its stray names run again
                client.execute_cell(new_code_cell(_RESET), scratch, store_history=False)
                restore({n for n in stray if not n.startswith("_")}, i)
            run(cell.source)
