"""Grade a whole class: ``python -m helpers.grade SUBMISSIONS [options]``.

``SUBMISSIONS`` is a folder with one sub-folder per student (``SUBMISSIONS/<student>/*.ipynb``)
or a single ``.ipynb`` (the student is the file's stem). A notebook is graded as the course
notebook whose ``check("NN.…")`` cells it holds; without any, as what its metadata id says,
else its file name (a warning says when they disagree). Writes into ``--out`` (``grades/``):

- ``results.jsonl`` — one JSON object per (student, notebook), appended the moment it is done,
  with what the feedback page shows (each step's cell and code, each error's cell and line);
- ``grades.csv`` — ``student,notebook,score,max_score,status``, rebuilt from the journal, with
  formulas neutralised and one record per line;
- ``feedback/<student>/<notebook>.html`` — what the student sees (one path per student).

Statuses: ``graded``, ``timeout``, ``crashed``, ``invalid`` (not a readable notebook),
``unknown_notebook``, ``rejected_link`` (a symbolic link: never followed, never opened). A
notebook that times out or crashes keeps the points of the checks it passed before it stopped
(each answer was recorded when its ``check(...)`` ran); the steps after that are "not reached".
``sys.exit()`` in a cell stops only that cell, as in Jupyter. Every entry of the submissions
folder gets a row or a note saying why not. Rerunning resumes (a file already graded is
skipped; a changed one is graded again and its newest row counts); ``--force`` regrades
everything. One grader at a time holds an output folder (``--wait`` waits for the other).

Student code runs in a bubblewrap sandbox (no network, no view of the submissions, the output
folder or the solutions, a private scratch folder, time, memory and process limits) and its
answers leave it as plain arrays; the verdict is computed here, outside. See
:mod:`helpers.grading`.
"""

from __future__ import annotations

import argparse
import errno
import hashlib
import json
import os
import queue
import re
import secrets
import stat
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .build import check_calls
from .course import spec
from .course.mistakes import MISTAKES
from .grading import report, shards
from .grading.protocol import encode_value
from .grading.sandbox import SandboxError, Settings, Worker, find_bwrap, probe_bwrap
from .grading.verdict import Cell, as_number, decide, total_points
from .runtime.cells import assigned_names

__all__ = ["Submission", "discover", "main", "prepare"]

MAX_FILE_MB = 100
MAX_CODE_MB = 20

NO_SANDBOX_WARNING = """
################################################################################
#  WARNING: --no-sandbox — student code runs WITHOUT the bubblewrap sandbox.   #
#  It can read every file this user can read (other students' submissions,    #
#  solutions/, your home folder), write and delete files, use the network and #
#  leave processes running. Time and memory limits and the separate verdict   #
#  still apply. Use this only for submissions you trust.                      #
################################################################################
""".strip("\n")


@dataclass
class Submission:
    student: str
    path: Path  # for messages only: the file is read through directory descriptors, never by this path
    file: str = ""  # where it is inside the student's folder, as shown in rows
    sha256: str = ""
    notebook: str = ""
    status: str | None = None  # set when known before running: invalid / unknown_notebook / rejected_link
    error: str | None = None
    cells: list[Cell] = field(default_factory=list)
    mtime: float = 0.0
    link: bool = False
    warnings: list[str] = field(default_factory=list)  # about what this file was graded as


# ----------------------------------------------------------------------------- discovery
#
# The submissions folder is hostile: links to other students' work, to solutions/, to the
# grader's own files or outputs; FIFOs that block a reader; names with newlines and escape
# sequences. Discovery walks it through directory descriptors (``os.scandir(fd)``) and never
# follows a symbolic link: a link gets a row of its own (``rejected_link``) or a note, and is
# never opened. Reading a file (:func:`prepare`) opens every folder on its way relative to its
# parent with ``O_NOFOLLOW | O_DIRECTORY`` and the file with ``O_NOFOLLOW | O_NONBLOCK``, so a
# link swapped in after discovery is refused too, and only a regular file is read. (A hard
# link is a regular file: it is read like any other.)

MAX_DEPTH = 16  # folders inside a student's folder
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
LINKED_FOLDER = "(linked folder)"


@dataclass(frozen=True)
class Found:
    """One entry to grade: a file (or a link) at ``root/rel[0]/rel[1]/…``, names as the OS gave them."""

    student: str
    root: Path
    rel: tuple[str, ...]
    link: bool = False

    @classmethod
    def at(cls, student: str, path: Path) -> Found:
        """A file in a folder the caller trusts (only the file itself is opened without following a link)."""
        return cls(student, path.parent, (path.name,))

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.rel)

    @property
    def file(self) -> str:
        """Where it is inside the student's folder (the entry itself for a top-level entry)."""
        return "/".join(shown(p) for p in (self.rel[1:] if len(self.rel) > 1 else self.rel))


def shown(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 become ``\\xNN`` (rows are UTF-8 JSON)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def _hidden(name: str) -> bool:
    return name.startswith((".", "__"))


def _is_notebook(name: str) -> bool:
    return name.lower().endswith(".ipynb")


def _stem(name: str) -> str:
    return name[: -len(".ipynb")] if _is_notebook(name) else name


def _is_link_at(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


class _Walk:
    def __init__(self, root: Path):
        self.root = root
        self.found: list[Found] = []
        self.notes: list[str] = []
        self.hidden: list[str] = []

    def student_folder(self, root_fd: int, name: str) -> None:
        student = shown(name)
        before = len(self.found)
        links: list[str] = []
        self._folder(root_fd, (name,), student, links, 1)
        own = self.found[before:]
        if links:
            more = f" and {len(links) - 5} more" if len(links) > 5 else ""
            self.notes.append(f"{_say(student)}: {len(links)} symbolic link(s) inside the folder not followed: "
                              f"{', '.join(_say(x) for x in links[:5])}{more}")
        if not own:
            self.notes.append(f"{_say(student)}: no .ipynb file in the folder")

    def _folder(self, parent_fd: int, rel: tuple[str, ...], student: str, links: list[str], depth: int) -> None:
        try:
            fd = os.open(rel[-1], _DIR_FLAGS, dir_fd=parent_fd)
        except OSError as exc:
            if _is_link_at(parent_fd, rel[-1]):  # it became a link after it was listed
                if depth == 1:
                    self.found.append(Found(student, self.root, rel, link=True))
                else:
                    links.append("/".join(shown(p) for p in rel[1:]))
            else:
                self.notes.append(f"{_say('/'.join(map(shown, rel)))}: could not be opened "
                                  f"({exc.strerror or exc}); skipped")
            return
        try:
            if depth > MAX_DEPTH:
                self.notes.append(f"{_say('/'.join(map(shown, rel)))}: folders nested more than {MAX_DEPTH} "
                                  "deep are not searched")
                return
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                sub = (*rel, entry.name)
                if _hidden(entry.name):
                    self.hidden.append("/".join(map(shown, sub)))
                elif entry.is_symlink():
                    if _is_notebook(entry.name):
                        self.found.append(Found(student, self.root, sub, link=True))
                    else:
                        links.append("/".join(shown(p) for p in sub[1:]))
                elif entry.is_dir(follow_symlinks=False):
                    self._folder(fd, sub, student, links, depth + 1)
                elif _is_notebook(entry.name):
                    self.found.append(Found(student, self.root, sub))
        finally:
            os.close(fd)


def discover(root: Path) -> tuple[list[Found], list[str]]:
    """What to grade, and notes on everything left aside (each entry of ``root`` gets one or the other).

    ``root`` itself is the instructor's choice and may be a link; nothing below it is followed.
    """
    if not root.is_dir():  # one notebook: the student is its file name
        real = Path(os.path.realpath(root))
        return [Found(shown(_stem(real.name)), real.parent, (real.name,))], []
    walk = _Walk(root)
    students: dict[str, str] = {}
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with os.scandir(root_fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            name, label = entry.name, shown(entry.name)
            if _hidden(name):
                walk.hidden.append(label)
                continue
            folder = entry.is_dir(follow_symlinks=False) or (entry.is_symlink() and not _is_notebook(name))
            student = label if folder else shown(_stem(name))
            if student in students and students[student] != name:
                walk.notes.append(f"{_say(shown(students[student]))} and {_say(label)} are both graded as student "
                                  f"{_say(student)}")
            students.setdefault(student, name)
            if any("\udc80" <= c <= "\udcff" for c in name):  # bytes that are not UTF-8 (surrogate-escaped)
                walk.notes.append(f"{_say(label)}: the name is not valid UTF-8; shown with \\x escapes")
            if entry.is_symlink():
                walk.notes.append(f"{_say(label)}: a symbolic link; not followed (status rejected_link)")
                walk.found.append(Found(student, root, (name,), link=True))
            elif entry.is_dir(follow_symlinks=False):
                walk.student_folder(root_fd, name)
            elif _is_notebook(name):
                walk.notes.append(f"{_say(label)}: a notebook directly in {root}; graded as student {student!r}")
                walk.found.append(Found(student, root, (name,)))
            else:
                walk.notes.append(f"{_say(label)}: neither a student's folder nor a .ipynb notebook; skipped")
    finally:
        os.close(root_fd)
    for f in walk.found:
        if f.link and len(f.rel) > 1:
            walk.notes.append(f"{_say(f.student)}/{_say(f.file)}: a symbolic link; not followed (status rejected_link)")
    if walk.hidden:
        listed = ", ".join(_say(h) for h in walk.hidden[:8]) + (", …" if len(walk.hidden) > 8 else "")
        walk.notes.append(f"skipped {len(walk.hidden)} hidden entr{'y' if len(walk.hidden) == 1 else 'ies'} "
                          f"(names starting with '.' or '__', such as .ipynb_checkpoints, .git, __MACOSX): {listed}")
    return walk.found, walk.notes


def _say(text: str) -> str:
    """A name in a message to the instructor's terminal: no line breaks, no escape sequences."""
    return report.escape_controls(text)


class _LinkRefused(OSError):
    pass


class _NotRegular(OSError):
    pass


def open_beneath(root: Path, rel: tuple[str, ...]) -> int:
    """A read-only descriptor of ``root/rel…`` that followed no symbolic link below ``root``.

    Raises :class:`_LinkRefused` when a part of the way is a link (also one swapped in since
    discovery), :class:`_NotRegular` when the file is not a regular file (a device is never
    opened), ``OSError`` otherwise. Something swapped in between that look and the open is
    caught by ``O_NOFOLLOW`` (a link) and ``O_NONBLOCK`` (a FIFO); the caller checks the type of
    what it opened.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i, part in enumerate(rel):
            last = i == len(rel) - 1
            if last:
                mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
                if stat.S_ISLNK(mode):
                    raise _LinkRefused(errno.ELOOP, "a symbolic link")
                if not stat.S_ISREG(mode):
                    raise _NotRegular(errno.EINVAL, "not a regular file")
            try:
                nfd = os.open(part, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link_at(fd, part):
                    raise _LinkRefused(exc.errno, "a symbolic link") from None
                raise
            os.close(fd)
            fd = nfd
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)


def _read_fd(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def known_notebooks() -> set[str]:
    spec._load_all()
    return {ex.notebook for ex in spec.REGISTRY.values()}


def _by_name(stem: str, known: set[str]) -> str | None:
    if stem in known:
        return stem
    inside = [k for k in known if k in stem]  # "Copy of 01_illustrated_self_attention (2)"
    return inside[0] if len(inside) == 1 else None


def _by_checks(sources: list[str]) -> tuple[str | None, Counter[str]]:
    """The course notebook whose ``check("…")`` calls the code holds most (None on a tie or none)."""
    spec._load_all()
    counts: Counter[str] = Counter()
    for source in sources:
        for ex_id in check_calls(source):
            ex = spec.REGISTRY.get(ex_id)
            if ex is not None:
                counts[ex.notebook] += 1
    top = counts.most_common(2)
    if not top or (len(top) == 2 and top[0][1] == top[1][1]):
        return None, counts
    return top[0][0], counts


def identify(nb: Any, stem: str, known: set[str], sources: list[str] | None = None
             ) -> tuple[str | None, str, list[str]]:
    """The course notebook a file is graded as, a fallback name, and warnings.

    Its ``check("NN.…")`` cells decide: a notebook whose checks are those of notebook 02 is
    graded as 02, whatever its metadata or file name claim (a warning says so when they
    disagree). A notebook without any check cell is what its metadata id says, else what its
    file name says.
    """
    meta = nb.get("metadata", {}) if isinstance(nb, dict) else {}
    course = meta.get("attention_course") if isinstance(meta, dict) else None
    nid = course.get("notebook_id") if isinstance(course, dict) else None
    claimed = nid if isinstance(nid, str) and nid in known else None
    named = _by_name(stem, known)
    checked, counts = _by_checks(sources or [])
    warnings: list[str] = []
    if checked is not None:
        if claimed is not None and claimed != checked:
            warnings.append(f"Graded as notebook {checked}: its check cells are those of {checked}, "
                            f"although its metadata says it is {claimed}.")
        elif named is not None and named != checked:
            warnings.append(f"Graded as notebook {checked}: its check cells are those of {checked}, "
                            f"although its file name is that of {named}.")
        if len(counts) > 1:
            mix = ", ".join(f"{n}: {c}" for n, c in sorted(counts.items()))
            warnings.append(f"It holds check cells of several notebooks ({mix}); graded as {checked}.")
        return checked, checked, warnings
    chosen = claimed or named
    if claimed is not None and named is not None and claimed != named:
        warnings.append(f"Graded as notebook {claimed}, as its metadata says (its file name is that of {named}).")
    if chosen is not None:
        return chosen, chosen, warnings
    fallback = nid if isinstance(nid, str) and 0 < len(nid) <= 100 else stem
    return None, report.safe_component(fallback), warnings


_NOT_A_FILE = "This is not a regular file (a pipe, a device or a socket?)."
_LINK_ERROR = ("This file is a symbolic link (a shortcut to a file somewhere else), not a notebook, so it was "
               "not opened. Hand in the notebook file itself.")
_FOLDER_LINK_ERROR = ("Your folder is a symbolic link (a shortcut to a folder somewhere else), so it was not "
                      "opened. Hand in a folder with your notebook in it.")


def prepare(found: Found, known: set[str]) -> Submission:
    """Read and recognise one file (hostile input: nothing here executes it).

    Messages about a file that is not a readable notebook say what is wrong with it, never
    what it contains.
    """
    import nbformat

    stem = shown(_stem(found.rel[-1]))
    sub = Submission(student=found.student, path=found.path, file=found.file,
                     notebook=_by_name(stem, known) or report.safe_component(stem), link=found.link)
    if found.link:
        return _rejected_link(sub, found, known)

    def unread(message: str) -> Submission:
        sub.status, sub.error, sub.sha256 = "invalid", message, hashlib.sha256(b"").hexdigest()
        return sub

    try:
        fd = open_beneath(found.root, found.rel)
    except _LinkRefused:
        return _rejected_link(sub, found, known)
    except _NotRegular:
        return unread(_NOT_A_FILE)
    except OSError as exc:
        return unread(f"The file could not be opened ({exc.strerror or type(exc).__name__}).")
    try:
        st = os.fstat(fd)
        sub.mtime = st.st_mtime
        if not stat.S_ISREG(st.st_mode):
            return unread(_NOT_A_FILE)
        os.set_blocking(fd, True)
        data = _read_fd(fd, MAX_FILE_MB << 20)
    except OSError as exc:
        return unread(f"The file could not be read ({exc.strerror or type(exc).__name__}).")
    finally:
        os.close(fd)
    # (a file over the limit was read only in part: its hash also covers its size)
    sub.sha256 = hashlib.sha256(data if len(data) <= MAX_FILE_MB << 20 else data + b"%d" % st.st_size).hexdigest()
    if len(data) > MAX_FILE_MB << 20:
        sub.status = "invalid"
        sub.error = f"The file is larger than {MAX_FILE_MB} MB; notebooks up to {MAX_FILE_MB} MB are read."
        return sub
    if not data.strip():
        sub.status, sub.error = "invalid", "The file is empty."
        return sub
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        sub.status, sub.error = "invalid", "The file is not text (not UTF-8): is it really a .ipynb notebook?"
        return sub
    try:
        nb = nbformat.reads(text, as_version=4, capture_validation_error={})
    except RecursionError:
        sub.status, sub.error = "invalid", "Not a readable notebook (the JSON is nested too deeply)."
        return sub
    except Exception:
        sub.status, sub.error = "invalid", f"Not a readable notebook ({_json_problem(text)})."
        return sub
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        sub.status, sub.error = "invalid", "Not a readable notebook (it has no list of cells)."
        return sub
    size = 0
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            source = ""
        size += len(source)
        sub.cells.append(Cell(i, source))
    if size > MAX_CODE_MB << 20:
        sub.status, sub.error = "invalid", f"The notebook holds more than {MAX_CODE_MB} MB of code."
        sub.cells = []
        return sub
    notebook, name, sub.warnings = identify(nb, stem, known, [c.source for c in sub.cells])
    sub.notebook = name
    if notebook is None:
        sub.status = "unknown_notebook"
        sub.error = (f"{sub.file} is not one of the course's notebooks (it has no check cell of one, its "
                     f"metadata names none and its file name matches none of: {', '.join(sorted(known))}).")
        sub.cells = []
    return sub


def _rejected_link(sub: Submission, found: Found, known: set[str]) -> Submission:
    sub.status = "rejected_link"
    sub.sha256 = "link"
    try:
        sub.mtime = os.lstat(found.path).st_mtime
    except OSError:
        pass
    if len(found.rel) == 1 and not _is_notebook(found.rel[0]):
        sub.notebook, sub.error = LINKED_FOLDER, _FOLDER_LINK_ERROR
    else:
        sub.notebook = _by_name(shown(_stem(found.rel[-1])), known) or sub.notebook
        sub.error = _LINK_ERROR
    return sub


def _json_problem(text: str) -> str:
    """Why a text is not a notebook, by position only: the text itself is never quoted."""
    try:
        json.loads(text)
    except RecursionError:
        return "the JSON is nested too deeply"
    except json.JSONDecodeError as exc:
        return f"the JSON is malformed at line {exc.lineno}, column {exc.colno}"
    except ValueError:
        return "it is not valid JSON"
    return "it is JSON, but not in the Jupyter notebook format"


_FRAMEWORK_IMPORT = {
    "torch": re.compile(r"^\s*(?:import|from)\s+torch\b", re.M),
    "tensorflow": re.compile(r"^\s*(?:import|from)\s+(?:tensorflow|keras)\b", re.M),
}


def frameworks_used(subs: list[Submission]) -> tuple[str, ...]:
    """The frameworks the sandboxes preload: those some notebook of the batch imports."""
    return tuple(name for name, pattern in _FRAMEWORK_IMPORT.items()
                 if any(pattern.search(c.source) for s in subs for c in s.cells))


# ----------------------------------------------------------------------------- one submission

MAX_PARSED_CELL = 200_000  # characters: a bigger cell is not parsed for the page (it shows no step)
MAX_ERROR_CELLS = 20  # cells outside the steps whose code a row keeps, for the errors they raised


def locate(cells: list[Cell], exercises: list[Any]) -> dict[str, dict[str, Any]]:
    """Where each step is in the notebook, for the feedback page (static: nothing is run).

    ``check_cell``: the last cell calling ``check("<id>")``. ``cell``: the cell that defines the
    step's answer — the last one binding an answer name (as
    :func:`helpers.runtime.cells.defining_cell`, each cell parsed once) among the cells since
    the previous check, role ``answer``; when none there does, the code cell just before the
    check (the TO-DO cell), role ``before_check``; failing that, the last cell before the check
    that binds a name. ``assigned_in``: the last cell up to the check that binds a name, anywhere;
    ``assigned_later``: a cell after the check that binds a name, when none before it does.
    Indices are the notebook's (0-based, all cells).
    """
    sources = [c.source for c in cells]
    binds: dict[int, set[str]] = {}

    def names(k: int) -> set[str]:
        if k not in binds:
            binds[k] = assigned_names(sources[k]) if len(sources[k]) <= MAX_PARSED_CELL else set()
        return binds[k]

    def last_binding(lo: int, hi: int, wanted: set[str]) -> int | None:
        return next((k for k in range(hi - 1, lo - 1, -1) if names(k) & wanted), None)

    checks = [set(check_calls(s)) if len(s) <= MAX_PARSED_CELL else set() for s in sources]
    where: dict[str, dict[str, Any]] = {}
    for ex in exercises:
        wanted = set(ex.answers)
        at = [k for k, ids in enumerate(checks) if ex.id in ids]
        check = at[-1] if at else None
        found, role, later = None, None, None
        if check is None:
            found = last_binding(0, len(sources), wanted)
        else:
            since = next((k + 1 for k in range(check - 1, -1, -1) if checks[k]), 0)
            found = last_binding(since, check + 1, wanted)
            if found is None and check > since:
                found, role = check - 1, "before_check"
            elif found is None:
                found = last_binding(0, check, wanted)
            if last_binding(0, check + 1, wanted) is None:
                later = next((k for k in range(check + 1, len(sources)) if names(k) & wanted), None)
        if found is not None and role is None:
            role = "answer"
        assigned = last_binding(0, len(sources) if check is None else check + 1, wanted)
        where[ex.id] = {
            "cell": cells[found].index if found is not None else None,
            "cell_role": role,
            "check_cell": cells[check].index if check is not None else None,
            "assigned_in": cells[assigned].index if assigned is not None else None,
            "assigned_later": cells[later].index if later is not None else None,
            "kind": ex.kind,
            "_k": found,
        }
    return where


def _first_error_line(errors: list[dict[str, Any]], cell: int | None) -> int | None:
    return next((e["line"] for e in errors if e.get("cell") == cell and e.get("line")), None)


def page_fields(sub: Submission, exercises: list[Any], outs: list[dict[str, Any]],
                errors: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The exercise entries with what the page shows of each step (cell, code), and the errors,
    those from cells that are no step's with that cell's code: a page is rebuilt from its row alone."""
    where = locate(sub.cells, exercises)
    by_index = {c.index: c for c in sub.cells}
    shown: set[int] = set()
    entries = []
    for out in outs:
        info = dict(where.get(out["id"], {}))
        k = info.pop("_k", None)
        code = None
        if k is not None:
            cell = sub.cells[k]
            code = report.code_excerpt(cell.source, _first_error_line(errors, cell.index))
            shown.add(cell.index)
        entries.append({**out, **info, "code": code})
    kept: list[dict[str, Any]] = []
    coded: set[int] = set()
    for err in errors:
        err = dict(err)
        cell = err.get("cell")
        if cell in by_index and cell not in shown and (cell in coded or len(coded) < MAX_ERROR_CELLS):
            if cell not in coded:
                err["code"] = report.code_excerpt(by_index[cell].source, _first_error_line(errors, cell))
                coded.add(cell)
        kept.append(err)
    return entries, kept


def _row(sub: Submission, status: str, score: float, max_score: float, exercises: list[dict[str, Any]],
         error: str | None, notes: list[str], sandboxed: bool, seconds: float | None,
         errors: list[dict[str, Any]] | None = None, error_count: int = 0) -> dict[str, Any]:
    return {
        "student": sub.student,
        "notebook": sub.notebook,
        "file": sub.file,
        "submission_sha256": sub.sha256,
        "status": status,
        "score": as_number(score),
        "max_score": as_number(max_score),
        "exercises": exercises,
        "error": error,
        "notes": notes,
        "errors": errors or [],
        "error_count": error_count,
        "warnings": sub.warnings,
        "sandboxed": sandboxed,
        "seconds": seconds,
        "graded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


_NOT_GRADED = {
    "invalid": "Not graded: the file could not be read.",
    "rejected_link": "Not graded: the link was not opened.",
}


def row_without_running(sub: Submission, sandboxed: bool) -> dict[str, Any]:
    exercises = spec.exercises_for(sub.notebook) if sub.status in _NOT_GRADED else []
    outs = [
        {"id": ex.id, "points": 0, "max_points": as_number(ex.points), "passed": False, "diagnosis": None,
         "message": _NOT_GRADED[str(sub.status)], "status": "not_done"}
        for ex in exercises
    ]
    return _row(sub, str(sub.status), 0, total_points(exercises), outs, sub.error, [], sandboxed, None)


def _fresh_plan(ex: spec.Exercise, attempts: int = 5) -> spec.Plan:
    """A plan from seeds chosen here; a rare run of draws that never separates the variants is drawn
    again from other seeds rather than costing the submission its row."""
    for attempt in range(attempts):
        try:
            return spec.make_plan(ex, seeds=[secrets.randbits(62) for _ in range(spec.seeds_needed(ex))])
        except RuntimeError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def grade_one(worker: Worker, sub: Submission, settings: Settings) -> dict[str, Any]:
    exercises = spec.exercises_for(sub.notebook)
    # Fresh inputs only this process knows until now: drawn here, from seeds chosen here.
    plans = {ex.id: _fresh_plan(ex) for ex in exercises}
    job = {
        "plans": {ex_id: encode_value(plan.data) for ex_id, plan in plans.items()},
        "timeout": settings.timeout,
        "memory_mb": settings.memory_mb,
        "file_mb": settings.file_mb,
        "max_bytes": settings.max_bytes,
        "nproc": settings.nproc,
        "threads": settings.threads,
    }
    header, blob = worker.run(job, [c.source for c in sub.cells])
    result = decide(exercises, plans, header, blob, sub.cells, settings.timeout, settings.carry_forward)
    outs = [{**o.as_dict(), "points": as_number(o.points), "max_points": as_number(o.max_points),
             "status": o.status} for o in result.outcomes]
    score = sum(o.points for o in result.outcomes)
    outs, errors = page_fields(sub, exercises, outs, result.errors)
    return _row(sub, result.status, score, total_points(exercises), outs, result.error, result.notes,
                settings.sandboxed, result.seconds, errors, result.error_count)


# ----------------------------------------------------------------------------- the batch


def _titles() -> dict[str, str]:
    spec._load_all()
    return {ex.id: ex.title for ex in spec.REGISTRY.values()}


def _mistake_titles() -> dict[str, str]:
    return {code: m.title for code, m in MISTAKES.items()}


class Batch:
    def __init__(self, out: Path, settings: Settings, jobs: int, progress: bool = True):
        self.out = out
        self.settings = settings
        self.jobs = jobs
        self.journal = report.Journal(out / report.JOURNAL)
        self.titles = _titles()
        self.mistakes = _mistake_titles()
        self.progress = progress
        self.written = 0
        self.failures: list[str] = []
        self.statuses: Counter[str] = Counter()

    def record(self, row: dict[str, Any]) -> None:
        self.journal.append(row)
        self.written += 1
        self.statuses[row["status"]] += 1
        report.write_feedback(self.out, row, self.titles, self.mistakes)

    def run(self, immediate: list[Submission], todo: list[Submission]) -> None:
        from tqdm import tqdm

        bar = tqdm(total=len(immediate) + len(todo), desc="grading", unit="nb", file=sys.stderr,
                   disable=not self.progress, dynamic_ncols=True)
        try:
            for sub in immediate:
                self.record(row_without_running(sub, self.settings.sandboxed))
                bar.update(1)
            if todo:
                self._run_sandboxed(todo, bar)
        finally:
            bar.close()

    def _run_sandboxed(self, todo: list[Submission], bar: Any) -> None:
        pending: queue.Queue[Submission] = queue.Queue()
        for sub in todo:
            pending.put(sub)
        results: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        stop = threading.Event()
        workers = [Worker(i, self.settings) for i in range(max(1, min(self.jobs, len(todo))))]

        def loop(worker: Worker) -> None:
            try:
                worker.start()
                results.put(("ready", worker, None))
                while not stop.is_set():
                    try:
                        sub = pending.get_nowait()
                    except queue.Empty:
                        break
                    try:
                        results.put(("row", sub, grade_one(worker, sub, self.settings)))
                    except SandboxError as exc:  # a restart failed: this worker is done
                        results.put(("error", sub, exc))
                        break
                    except Exception as exc:  # a grader bug must not stop the batch or invent a grade
                        results.put(("error", sub, exc))
            except SandboxError as exc:
                results.put(("fatal", worker, exc))
            finally:
                worker.close()
                results.put(("exit", worker, None))

        threads = [threading.Thread(target=loop, args=(w,), daemon=True, name=f"grader-{w.index}") for w in workers]
        for t in threads:
            t.start()
        alive = len(threads)
        fatal: list[str] = []
        try:
            while alive:
                kind, what, detail = results.get()
                if kind == "exit":
                    alive -= 1
                elif kind == "fatal":
                    fatal.append(str(detail))
                elif kind == "row":
                    self.record(detail)
                    bar.set_postfix_str(f"{_say(what.student)}: {detail['status']}", refresh=False)
                    bar.update(1)
                elif kind == "error":
                    self.failures.append(f"{_say(what.student)}/{_say(what.file)}: {type(detail).__name__}: {detail}")
                    bar.update(1)
        except BaseException:
            stop.set()
            for w in workers:
                w.kill()
            raise
        left = pending.qsize()
        if fatal and left:
            raise SandboxError(fatal[0])
        for sub in list(pending.queue):
            self.failures.append(f"{_say(sub.student)}/{_say(sub.file)}: not graded (no sandbox left to run it)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m helpers.grade",
        description="Grade a class's notebooks in a sandbox; write results.jsonl, grades.csv and feedback pages.",
        epilog="Other commands (each has --help): merge OUT… --out DIR (join shards' outputs); "
               "import-canvas / import-moodle DOWNLOAD --out SUBMISSIONS (a learning platform's submissions "
               "download, as a class folder); export-canvas GRADES --out FILE (a CSV for Canvas's gradebook "
               "import); export-table GRADES --out FILE (one row per student, one column per notebook); "
               "gradescope-bundle --out DIR (a Gradescope autograder built from this grader).",
    )
    ap.add_argument("submissions", type=Path, help="a folder with one sub-folder per student, or one .ipynb")
    ap.add_argument("--out", type=Path, default=Path("grades"), help="output folder (default: grades/)")
    ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                    help="submissions graded in parallel (one sandbox each; default: min(4, CPUs))")
    ap.add_argument("--timeout", type=float, default=600, help="wall-clock seconds per submission (default 600)")
    ap.add_argument("--memory", type=int, default=4096,
                    help="MB a submission may allocate on top of the preloaded libraries (default 4096)")
    ap.add_argument("--force", action="store_true", help="regrade submissions already in the journal")
    ap.add_argument("--no-carry-forward", action="store_true",
                    help="give no points to a step that is right only from the student's own wrong earlier answer")
    ap.add_argument("--no-sandbox", action="store_true",
                    help="run student code without bubblewrap (DANGEROUS: see the warning it prints)")
    ap.add_argument("--wait", action="store_true",
                    help="if another grader is writing into --out, wait for it to finish (default: refuse)")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--shard", type=shards.parse_shard, metavar="I/N",
                    help="grade only shard I of N (0 <= I < N): a stable part of the class, about 1/N of it; run "
                         "the N shards anywhere, each with its own --out, then `merge` their outputs")
    ap.add_argument("--uid-base", type=int, metavar="UID",
                    help="as root: run the submissions as uids UID … UID+63 (default: an unused range above "
                         "1879048192); in a container with a user namespace of its own, pick a range it maps")
    return ap


# Commands other than grading: `python -m helpers.grade <command> …` (a class folder that happens to
# be named like one is given as ./merge).
def _subcommands() -> dict[str, tuple[Any, Any]]:
    from .grading import gradescope, platforms

    return {
        "merge": (shards.merge_parser, shards.merge_main),
        "import-canvas": (lambda: platforms.import_parser("canvas"), lambda a: platforms.import_main("canvas", a)),
        "import-moodle": (lambda: platforms.import_parser("moodle"), lambda a: platforms.import_main("moodle", a)),
        "export-canvas": (platforms.export_canvas_parser, platforms.export_canvas_main),
        "export-table": (platforms.export_table_parser, platforms.export_table_main),
        "gradescope-bundle": (gradescope.bundle_parser, gradescope.bundle_main),
        "gradescope-run": (gradescope.run_parser, gradescope.run_main),
    }


SUBCOMMANDS = ("merge", "import-canvas", "import-moodle", "export-canvas", "export-table", "gradescope-bundle",
               "gradescope-run")


def parse(argv: list[str]) -> tuple[str, argparse.Namespace]:
    """What a command line means, without running it: ``("grade", args)`` or ``(command, args)``."""
    if argv and argv[0] in SUBCOMMANDS:
        return argv[0], _subcommands()[argv[0]][0]().parse_args(argv[1:])
    return "grade", build_parser().parse_args(argv)


def _solutions_dir() -> Path | None:
    candidate = Path(__file__).resolve().parents[2] / "solutions"
    return candidate if candidate.is_dir() else None


def _choose(prepared: list[Submission], say: Any) -> dict[tuple[str, str], Submission]:
    """One file per (student, notebook): a file before a link, then the newest; the others are named."""
    chosen: dict[tuple[str, str], Submission] = {}
    for sub in prepared:
        key = (sub.student, sub.notebook)
        if key not in chosen:
            chosen[key] = sub
            continue
        older, newer = sorted([chosen[key], sub], key=lambda s: (not s.link, s.mtime, str(s.path)))
        say(f"note: {_say(sub.student)} handed in two files for {_say(sub.notebook)}: grading {_say(newer.file)}, "
            f"not {_say(older.file)}" + (" (a link)" if older.link else ""))
        chosen[key] = newer
    return chosen


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SUBCOMMANDS:
        return int(_subcommands()[argv[0]][1](argv[1:]))
    args = build_parser().parse_args(argv)
    say = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    if not args.submissions.exists():
        say(f"error: {args.submissions} does not exist")
        return 2
    if args.jobs < 1 or args.timeout <= 0 or args.memory < 64:
        say("error: --jobs must be >= 1, --timeout > 0 and --memory >= 64")
        return 2
    if args.uid_base is not None and not 1 <= args.uid_base <= 2**32 - 2 - 64:
        say("error: --uid-base must be a uid from 1 to 4294967229 (64 uids from it are used)")
        return 2
    sandboxed = not args.no_sandbox
    if sandboxed and find_bwrap() is None:
        say("error: bubblewrap (`bwrap`) is not installed, and the grader runs student code only inside it.\n"
            "Install it (Debian/Ubuntu: `sudo apt-get install bubblewrap`, or `bash scripts/system-deps.sh`),\n"
            "or, for submissions you trust, rerun with --no-sandbox (read the warning it prints).")
        return 2
    if sandboxed and (why := probe_bwrap()):
        say(f"error: {why}.\nThe grader runs student code only inside that sandbox. Allow namespaces here "
            "(e.g. run as root, or a container with the needed privileges), or, for submissions you trust,\n"
            "rerun with --no-sandbox (read the warning it prints).")
        return 2

    out: Path = args.out
    out_real = out.resolve()
    sub_real = args.submissions.resolve()
    if sub_real.is_dir() and (out_real == sub_real or sub_real in out_real.parents):
        say("error: the output folder must not be inside the submissions folder")
        return 2
    try:
        with report.exclusive(out, wait=args.wait,
                              waiting=lambda who: say(f"note: waiting for the grader that writes into {out} "
                                                      f"({who}) to finish")):
            return _grade(args, out, sandboxed, say)
    except report.OutputLocked as exc:
        say(f"error: another grader is writing into {out} ({exc}).\n"
            "Wait for it to finish (rerun with --wait to do so), or give this one another --out.")
        return 2


def _grade(args: argparse.Namespace, out: Path, sandboxed: bool, say: Any) -> int:
    """The batch, with ``out`` held by this process alone."""
    if not sandboxed:
        say(NO_SANDBOX_WARNING)
    found, notes = discover(args.submissions)
    for note in notes:
        say(f"note: {note}")
    if not found:
        say(f"error: no .ipynb submissions found in {args.submissions}")
        return 2
    hide = [args.submissions.resolve(), out.resolve()]
    if (sol := _solutions_dir()) is not None:
        hide.append(sol)
    settings = Settings(
        sandboxed=sandboxed,
        timeout=args.timeout,
        memory_mb=args.memory,
        threads=(threads := max(1, (os.cpu_count() or 1) // args.jobs)),
        nproc=48 + 4 * threads,  # processes + threads of one submission (notebook 01 uses 4 with 1 thread)
        hide=hide,
        carry_forward=not args.no_carry_forward,
    )
    if args.uid_base is not None:
        settings.uid_base = args.uid_base
    known = known_notebooks()
    t0 = time.monotonic()
    prepared = [prepare(f, known) for f in found]
    for sub in prepared:
        for warning in sub.warnings:
            say(f"note: {_say(sub.student)}/{_say(sub.file)}: {_say(warning)}")
    chosen = _choose(prepared, say)
    class_size = len(chosen)
    if args.shard is not None:
        spec = args.shard
        chosen = {k: s for k, s in chosen.items() if shards.shard_of(s.student, s.notebook, spec.count) == spec.index}
        say(f"shard {spec}: {len(chosen)} of the class's {class_size} submissions (the others are other shards')")

    batch = Batch(out, settings, args.jobs, progress=not args.quiet)
    if args.shard is not None:
        batch.journal.path.touch()  # an empty shard leaves an (empty) journal too
    if batch.journal.dropped_partial:
        say(f"note: dropped a partial last line ({batch.journal.dropped_partial} bytes) from the journal")
    if batch.journal.bad_lines:
        say(f"note: {batch.journal.bad_lines} unreadable line(s) in the journal were ignored")
    seen = set() if args.force else batch.journal.seen()
    immediate, todo, skipped = [], [], 0
    for sub in chosen.values():
        if (sub.student, sub.notebook, sub.sha256) in seen:
            skipped += 1
        elif sub.status:
            immediate.append(sub)
        else:
            todo.append(sub)
    todo.sort(key=lambda s: -sum(len(c.source) for c in s.cells))  # long ones first: better packing
    settings.frameworks = frameworks_used(todo)
    interrupted = False
    try:
        batch.run(immediate, todo)
    except SandboxError as exc:
        say(f"error: could not start the sandbox: {exc}\n"
            "bubblewrap itself works here (the grader tried it before the batch), so what failed is what runs\n"
            "inside it: its last output is above (e.g. a package the sandbox cannot see). Fix that, or rerun with\n"
            "--no-sandbox for submissions you trust (read its warning first).")
        report.rebuild(out, batch.journal, batch.titles, batch.mistakes)
        if args.shard is not None:
            shards.write_record(out, args.shard, class_size, len(chosen), skipped, batch.written,
                                len(batch.failures), finished=False)
        return 2
    except KeyboardInterrupt:
        interrupted = True
    report.rebuild(out, batch.journal, batch.titles, batch.mistakes)
    elapsed = time.monotonic() - t0
    summary = ", ".join(f"{n} {s}" for s, n in sorted(batch.statuses.items())) or "nothing new"
    say(f"{batch.written} graded ({summary}), {skipped} already in the journal, in {elapsed:.1f} s. "
        f"Outputs: {out / report.JOURNAL}, {out / report.GRADES}, {out / report.FEEDBACK}/")
    if not sandboxed:
        say("reminder: graded WITHOUT the sandbox (--no-sandbox).")
    for failure in batch.failures:
        say(f"error: no row for {failure}")
    missing = len(chosen) - skipped - batch.written
    if args.shard is not None:
        shards.write_record(out, args.shard, class_size, len(chosen), skipped, batch.written,
                            len(batch.failures) if interrupted else missing, finished=not interrupted)
    if interrupted:
        say("interrupted: rerun the same command to finish (nothing already written is lost)")
        return 130
    return 0 if missing == 0 and not batch.failures else 1


if __name__ == "__main__":
    sys.exit(main())
