"""The cells the student ran, in order: the names each one binds, and whether it raised.

Installed into IPython (the student's kernel, or the grader's sandboxed shell) through its
``pre_run_cell`` / ``post_run_cell`` events. A check asks :meth:`History.defining` for the
latest run of a cell that binds its answer: that run's source is what the check replays on
fresh inputs, and if that run raised before (re)binding the answer, the value in the
namespace is stale — left over from an earlier run — and the check says so instead of judging it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .cells import assigned_names, filled_at, filled_names, mentioned_names

__all__ = ["History", "Run", "current", "install"]

_MISSING = object()
PLACEHOLDER_ERROR = "NotImplementedError: TO-DO"  # what the builder's placeholder line raises
MAX_RUNS = 2000
_ATTR = "_attention_course_history"
# what lets a cell bind a name without an assignment that names it
_DYNAMIC = re.compile(r"\b(globals|vars|locals)\s*\(|\bexec\s*\(|\bsetattr\s*\(")


@dataclass(frozen=True)
class Run:
    source: str
    names: frozenset[str]  # what the source binds (static analysis)
    error: str | None = None  # "ValueError: …" (first line), when the run raised
    line: int | None = None  # line of the cell where it raised
    unbound: frozenset[str] = field(default_factory=frozenset)  # bound by the source, but not by this run
    running: bool = False  # the cell running right now (the check is called from it)
    mentions: frozenset[str] = field(default_factory=frozenset)  # every name the source reads or binds
    raised_in: str | None = None  # the function, defined in another cell, where the error was raised
    unfinished: frozenset[str] = field(default_factory=frozenset)  # filled piece by piece when it raised
    # id() of the object each name it binds held just after it ran: a later cell that binds one of them anew in a
    # way no source can show (through globals(), exec) leaves another object there
    ids: tuple[tuple[str, int], ...] = ()
    # names it bound without naming them in an assignment (`globals()[f"query_{i}"] = …`, exec): a cell that writes
    # through globals() is the one that made them, and replaying it binds them again
    dynamic: frozenset[str] = field(default_factory=frozenset)

    @property
    def placeholder(self) -> bool:
        """It raised the exercise notebooks' TO-DO placeholder."""
        return bool(self.error) and self.error.startswith(PLACEHOLDER_ERROR)

    def stale(self, names: Iterable[str]) -> set[str]:
        """The names among ``names`` that this run should have bound but did not, because it raised."""
        return set(names) & self.unbound if self.error else set()

    def partial(self, names: Iterable[str]) -> set[str]:
        """The names among ``names`` this run was filling piece by piece when it raised (a loop writing
        ``scores[i] = …``): their values are half done. A value bound whole and then only read by a
        line that raised (a print, an assert) is complete."""
        return set(names) & self.unfinished if self.error else set()


# TensorFlow prefixes its op errors with the graph node it ran in: noise for a student.
_TF_NODE = re.compile(r"\{\{function_node [^}]*\}\}\s*")


def message_line(exc: BaseException, limit: int = 200) -> str:
    """The first line of an exception's message, without TensorFlow's node prefix."""
    text = _TF_NODE.sub("", str(exc)).strip()
    return text.splitlines()[0][:limit] if text else ""


def _first_line(exc: BaseException) -> str:
    first = message_line(exc)
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _raised_in(exc: BaseException) -> str | None:
    """The function where ``exc`` was raised, when it was defined in another cell than the running one."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_name != "<module>":
        tb = tb.tb_next
    if tb is None:
        return None
    cell_file = tb.tb_frame.f_code.co_filename
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if code.co_filename != cell_file and code.co_filename.startswith(("<", "/tmp/ipykernel", "/tmp/")) \
            and code.co_name != "<module>":
        return code.co_name
    return None


def _cell_line(exc: BaseException) -> int | None:
    """The line of the cell (the outermost frame's file) where ``exc`` was raised."""
    if isinstance(exc, SyntaxError):
        return exc.lineno
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_name != "<module>":  # skip IPython's own frames
        tb = tb.tb_next
    if tb is None:
        return None
    cell_file = tb.tb_frame.f_code.co_filename
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == cell_file:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


class History:
    def __init__(self) -> None:
        self.runs: list[Run] = []
        self._running: tuple[str, frozenset[str]] | None = None
        self._before: dict[str, Any] = {}
        self._ids: dict[str, int] | None = None

    # -- the two IPython events ------------------------------------------------------
    def pre(self, source: str, namespace: Mapping[str, Any]) -> None:
        names = frozenset(assigned_names(source))
        self._running = (source, names)
        self._before = {n: namespace.get(n, _MISSING) for n in names}  # references, compared with `is`
        # a cell that can bind names no assignment shows: the id of every public name before it runs
        self._ids = {k: id(v) for k, v in namespace.items() if not k.startswith("_")} \
            if _DYNAMIC.search(source) else None

    def post(self, source: str, namespace: Mapping[str, Any], error: BaseException | None) -> None:
        if self._running is not None and self._running[0] == source:
            names = self._running[1]
        else:  # installed while this cell ran: no `pre` for it
            names = frozenset(assigned_names(source))
            self._before = {}
        dynamic: frozenset[str] = frozenset()
        if getattr(self, "_ids", None) is not None and self._running is not None and self._running[0] == source:
            dynamic = frozenset(k for k, v in namespace.items() if not k.startswith("_") and k not in names
                                and self._ids.get(k) != id(v))
        self._ids = None
        unbound: frozenset[str] = frozenset()
        if error is not None:
            unbound = frozenset(n for n in names if n in self._before and namespace.get(n, _MISSING) is self._before[n])
        run = Run(source, names, _first_line(error) if error is not None else None,
                  _cell_line(error) if error is not None else None, unbound,
                  mentions=frozenset(mentioned_names(source)) if error is not None else frozenset(),
                  raised_in=_raised_in(error) if error is not None else None,
                  unfinished=frozenset(filled_at(source, _cell_line(error)) & names) if error is not None
                  else frozenset(),
                  ids=tuple(sorted((n, id(namespace[n])) for n in names | dynamic if n in namespace)),
                  dynamic=dynamic)
        self.runs.append(run)
        if len(self.runs) > MAX_RUNS:
            del self.runs[: len(self.runs) - MAX_RUNS]
        self._running = None
        self._before = {}

    # -- questions ----------------------------------------------------------------------
    def defining(self, names: Iterable[str]) -> Run | None:
        """The latest run of a cell that binds one of ``names`` (the running cell first)."""
        wanted = set(names)
        if self._running is not None and self._running[1] & wanted:
            return Run(self._running[0], self._running[1], running=True)
        # the latest cell that bound them, by name or through globals(); but a cell that names them and raised
        # before binding them stays the answer's cell (its step is not done), whatever a later cell writes into them
        # through globals()
        written = None
        for run in reversed(self.runs):
            if run.names & wanted:
                if written is not None and not run.stale(wanted):
                    return written
                return run
            if written is None and run.dynamic & wanted:
                written = run
        return written

    @staticmethod
    def rebound_since(names: Iterable[str], run: Run | None, namespace: Mapping[str, Any]) -> list[str]:
        """The names among ``names`` that ``run`` bound and that now hold another object than the one it left: a
        later cell bound them anew without naming them (a `globals()[f"query_{i}"] = …` loop, exec), so ``run`` is
        not what made their values."""
        if run is None or run.running or run.error:
            return []
        made = dict(run.ids)
        return sorted(n for n in names if n in made and n in namespace and id(namespace[n]) != made[n])

    def refilled(self, names: Iterable[str], run: Run | None) -> tuple[str, Run] | None:
        """A run later than ``run`` (the latest one that binds one of ``names``) that fills one of them piece by
        piece (``scores[i] = …`` in a loop) without creating it: it works on the value an earlier run left, so
        its own code cannot be replayed (and raises on a fresh start). Returns (the name, that run)."""
        if run is None or run.running:
            return None
        wanted = set(names)
        at = next((i for i in range(len(self.runs) - 1, -1, -1) if self.runs[i] is run), None)
        for other in reversed(self.runs[at + 1:] if at is not None else []):
            if other.error is None and (filled := sorted((filled_names(other.source) & wanted) - other.names)):
                return filled[0], other
        return None

    def misspelled(self, names: Iterable[str], run: Run | None, known: Iterable[str] = ()) -> tuple[str, str] | None:
        """A run later than ``run`` (the latest one that binds one of ``names``) that binds instead a name one or
        two letters away from one of them — ``attn_score`` for ``attn_scores`` — while it reads that name or is
        an edit of ``run``'s cell: a typo, which leaves the answer holding the value ``run`` gave it. Returns
        (the answer's name, the misspelled one). Names in ``known`` (other answers of the notebook) are real."""
        wanted, real = set(names), set(known)
        at = next((i for i in range(len(self.runs) - 1, -1, -1) if self.runs[i] is run), None)
        later = list(self.runs) if run is None else self.runs[at + 1:] if at is not None else []
        for other in reversed(later):
            for bound in sorted(other.names - wanted - real):
                for name in sorted(wanted):
                    if len(name) >= 4 and _distance(bound, name) <= 2 and \
                            (name in mentioned_names(other.source)
                             or run is not None and _similar(other.source, run.source)):
                        return name, bound
        # ``run`` itself, when it binds some of ``names`` (so it is the latest to bind one) but binds, instead of
        # another one that it reads, a name one or two letters away: `value = x @ w_value`, then `print(values)`
        if run is not None and not run.running:
            for bound in sorted(run.names - wanted - real):
                for name in sorted(wanted - run.names):
                    if len(name) >= 4 and _distance(bound, name) <= 2 and name in mentioned_names(run.source):
                        return name, bound
        return None

    def placeholder_since(self, names: Iterable[str], run: Run | None) -> Run | None:
        """A run of an untouched TO-DO cell that mentions one of ``names`` (e.g. prints it), later
        than ``run``: the student's step for these names is still to do, whatever they hold."""
        wanted = set(names)
        for other in reversed(self.runs):
            if other is run:
                return None
            if other.placeholder and other.mentions & wanted:
                return other
        return None


def _distance(a: str, b: str) -> int:
    """Levenshtein distance (small names only)."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        cur = [i]
        for j, cb in enumerate(b, start=1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def _similar(a: str, b: str) -> bool:
    """Two versions of one cell (an edit), rather than two different cells."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= 0.6


def install(shell: Any = None) -> History | None:
    """Attach a :class:`History` to an IPython shell (once); None outside IPython."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return None
        shell = get_ipython()
    if shell is None or not hasattr(shell, "events"):
        return None
    history = getattr(shell, _ATTR, None)
    if isinstance(history, History):
        return history
    history = History()

    def pre_run_cell(info: Any) -> None:
        history.pre(getattr(info, "raw_cell", "") or "", shell.user_ns)

    def post_run_cell(result: Any) -> None:
        info = getattr(result, "info", None)
        error = getattr(result, "error_before_exec", None) or getattr(result, "error_in_exec", None)
        history.post(getattr(info, "raw_cell", "") or "", shell.user_ns, error)

    shell.events.register("pre_run_cell", pre_run_cell)
    shell.events.register("post_run_cell", post_run_cell)
    setattr(shell, _ATTR, history)
    return history


def current() -> History | None:
    """The history of the running IPython shell, installing it if needed; None outside IPython."""
    return install()
