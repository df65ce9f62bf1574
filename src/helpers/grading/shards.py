"""Grading a class on several machines: shards, and merging their outputs.

``python -m helpers.grade SUBMISSIONS --shard I/N --out OUT_I`` grades the part of the class
whose (student, notebook) falls into shard ``I`` of ``N`` (``0 <= I < N``): any scheduler that
can start ``N`` copies of one command (a Slurm job array, a Kubernetes Indexed Job, a CI
matrix) grades the class in parallel. ``python -m helpers.grade merge OUT_0 … OUT_N-1 --out
DIR`` then merges their journals and rebuilds ``grades.csv`` and the feedback pages.

Which shard grades a submission depends on that submission alone: a stable hash (SHA-256) of
its normalised identity — the student's name and the course notebook it is graded as, in
Unicode NFC, case-folded, with runs of white space made one space — taken modulo ``N``. Not
its path: a file renamed or moved inside the student's folder stays in its shard, and a class
folder that gains or loses entries moves no other submission to another shard. A hash spreads
every notebook's submissions evenly over the shards, so each gets about ``1/N`` of the work
(the heavy TensorFlow notebooks included). All shards read every notebook's cells to know what
it is graded as (cheap next to running it); two files of one student for one notebook always
land in the same shard, which grades the newer, as one run would.

Each shard writes ``shard.json`` (its index, ``N``, how many submissions were its own and how
many it graded) into its output folder, so a merge can say which shard is missing or unfinished.
"""

from __future__ import annotations

import argparse
import errno
import fcntl
import hashlib
import json
import os
import re
import sys
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import report

__all__ = ["ShardSpec", "merge", "normalise", "parse_shard", "read_journal", "shard_of", "write_record"]

RECORD = "shard.json"
_SPACES = re.compile(r"\s+")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@dataclass(frozen=True)
class ShardSpec:
    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> ShardSpec:
    """``"I/N"`` with ``0 <= I < N`` (argparse type)."""
    m = re.fullmatch(r"\s*(\d{1,6})\s*/\s*(\d{1,6})\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r} is not of the form I/N (e.g. 0/4: the first of 4 shards)")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1 or not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"shard {index}/{count}: I must be 0 … N-1 (shards count from 0)")
    return ShardSpec(index, count)


def normalise(text: str) -> str:
    """A name as the same identity however it was typed or stored: NFC, case-folded, one space."""
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text).casefold()).strip()


def shard_of(student: str, notebook: str, count: int) -> int:
    """The shard (0 … count-1) of a student's notebook; the same on every machine and Python."""
    key = f"{normalise(student)}\x00{normalise(notebook)}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % count


def write_record(out: Path, spec: ShardSpec, class_size: int, own: int, already: int, written: int,
                 failures: int, finished: bool) -> Path:
    """``shard.json``: what this shard was given and what it did (read by :func:`merge`)."""
    record = {
        "shard": spec.index,
        "of": spec.count,
        "class_submissions": class_size,
        "own_submissions": own,
        "already_graded": already,
        "graded_now": written,
        "failures": failures,
        "finished": finished,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = out / RECORD
    report.write_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


# ----------------------------------------------------------------------------- reading a journal


@dataclass
class JournalRead:
    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped_partial: int = 0
    bad_lines: int = 0


def read_journal(path: Path) -> JournalRead:
    """The rows of a ``results.jsonl``, read as the resume logic reads it — a partial last line
    (a grader killed mid-write) is dropped, an unreadable line is counted and skipped — but
    without writing to the file (it may belong to a shard that is read-only here)."""
    got = JournalRead()
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        got.dropped_partial = len(data) - keep
        data = data[:keep]
    for line in data.decode("utf-8", "replace").split("\n"):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            got.bad_lines += 1
            continue
        if isinstance(row, dict) and all(isinstance(row.get(k), str) for k in ("student", "notebook")):
            got.rows.append(row)
        else:
            got.bad_lines += 1
    return got


class InputBusy(RuntimeError):
    """A grader is still writing into a folder given to merge."""


def _hold_shared(folder: Path) -> int | None:
    """A shared lock on ``folder/.grader.lock`` (refused while a grader holds it), or None if no
    grader ever wrote there. Read-only: nothing in the folder is created or changed."""
    try:
        fd = os.open(folder / report.LOCK, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise InputBusy(report.escape_controls(holder)) from None
        raise
    return fd


# ----------------------------------------------------------------------------- merging


@dataclass
class MergeResult:
    rows: int = 0
    students: int = 0
    problems: list[str] = field(default_factory=list)  # what makes the merge incomplete (exit code 1)


def _newest_order(inputs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every row once, oldest first, so that the last row of a (student, notebook) is the newest.

    Across folders "newer" is the row's ``graded_at`` (UTC, to the second); rows of the same
    second keep the order of the folders as given, and within a folder the journal's own order
    (its last row counts, as when resuming). Identical rows (a folder merged twice, a merge
    merged again) are kept once.
    """
    keyed = []
    for i, rows in enumerate(inputs):
        for j, row in enumerate(rows):
            stamp = row.get("graded_at")
            stamp = stamp if isinstance(stamp, str) and _STAMP.fullmatch(stamp) else ""
            keyed.append((stamp, i, j, row))
    keyed.sort(key=lambda t: t[:3])
    seen: set[str] = set()
    out = []
    for *_, row in keyed:
        line = report.json_line(row)
        if line not in seen:
            seen.add(line)
            out.append(row)
    return out


def _records(folders: list[Path], say: Callable[[str], None]) -> list[str]:
    """What the shards' ``shard.json`` files say is missing or unfinished."""
    records = []
    for folder in folders:
        try:
            rec = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            say(f"note: {folder / RECORD} is unreadable; ignored")
            continue
        if isinstance(rec, dict) and type(rec.get("shard")) is int and type(rec.get("of")) is int:
            records.append((folder, rec))
    if not records:
        return []
    problems = []
    counts = {rec["of"] for _, rec in records}
    if len(counts) > 1:
        problems.append(f"the folders come from different splits ({', '.join(f'N={n}' for n in sorted(counts))}): "
                        "a submission may be in two of them or in none")
        return problems
    (count,) = counts
    have: dict[int, list[Path]] = {}
    for folder, rec in records:
        have.setdefault(rec["shard"], []).append(folder)
        if not rec.get("finished"):
            problems.append(f"shard {rec['shard']}/{count} ({folder}) did not finish: rerun its command, then merge "
                            "again")
        elif rec.get("failures"):
            problems.append(f"shard {rec['shard']}/{count} ({folder}): {rec['failures']} submission(s) got no row "
                            "(see that shard's log); rerun its command, then merge again")
    missing = [i for i in range(count) if i not in have]
    if missing:
        problems.append(f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing: their students have no "
                        "grade in the merge")
    for i, where in sorted(have.items()):
        if len(where) > 1:
            say(f"note: shard {i}/{count} given twice ({', '.join(map(str, where))}); the newest row of each "
                "submission counts")
    return problems


def merge(folders: list[Path], out: Path, say: Callable[[str], None] = print) -> MergeResult:
    """Merge graders' output folders into ``out``: journal, ``grades.csv``, feedback pages.

    ``out``'s own journal, if it has one, takes part (merging again adds to it). The inputs are
    only read; each is refused while a grader is still writing into it.
    """
    from ..grade import _mistake_titles, _titles

    result = MergeResult()
    unique: list[Path] = []
    seen: set[str] = set()
    out_real = os.path.realpath(out)
    for folder in folders:
        real = os.path.realpath(folder)
        if real == out_real:
            continue  # read below, as out's own journal
        if real not in seen:
            seen.add(real)
            unique.append(folder)
    with report.exclusive(out):
        journals: list[list[dict[str, Any]]] = []
        for folder in unique:
            fd = _hold_shared(folder)
            try:
                path = folder / report.JOURNAL
                if not path.is_file():
                    rec = folder / RECORD
                    if rec.is_file():  # a shard with nothing to grade may have left no journal
                        journals.append([])
                        continue
                    result.problems.append(f"{folder}: no {report.JOURNAL} (not a grader's output folder, or its "
                                           "grader never started)")
                    continue
                got = read_journal(path)
            finally:
                if fd is not None:
                    os.close(fd)
            notes = []
            if got.dropped_partial:
                notes.append(f"a partial last line ({got.dropped_partial} bytes) ignored")
            if got.bad_lines:
                notes.append(f"{got.bad_lines} unreadable line(s) ignored")
            say(f"{folder}: {len(got.rows)} row(s)" + (f"; {'; '.join(notes)}" if notes else ""))
            journals.append(got.rows)
        own = out / report.JOURNAL
        if own.is_file():
            got = read_journal(own)
            say(f"{out} (the output folder's own journal): {len(got.rows)} row(s)")
            journals.append(got.rows)
        result.problems += _records(unique, say)
        rows = _newest_order(journals)
        report.write_atomic(own, "".join(report.json_line(r) + "\n" for r in rows))
        journal = report.Journal(own)
        report.rebuild(out, journal, _titles(), _mistake_titles())
        latest = journal.latest()
        result.rows = len(latest)
        result.students = len({s for s, _ in latest})
    return result


def merge_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m helpers.grade merge",
        description="Merge the output folders of several graders (e.g. the shards of one class) into one: "
                    "results.jsonl (the newest row of each student's notebook counts), grades.csv and the "
                    "feedback pages.",
    )
    ap.add_argument("folders", nargs="+", type=Path, help="output folders of the graders (--out of each shard)")
    ap.add_argument("--out", type=Path, required=True, help="the merged output folder (its own journal is kept)")
    ap.add_argument("--partial", action="store_true",
                    help="exit 0 even when a shard is missing or unfinished (the merge is written either way)")
    return ap


def merge_main(argv: list[str]) -> int:
    args = merge_parser().parse_args(argv)
    say = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    for folder in args.folders:
        if not folder.is_dir():
            say(f"error: {folder} is not a folder")
            return 2
    try:
        result = merge(args.folders, args.out, say)
    except InputBusy as exc:
        say(f"error: a grader is still writing into one of the folders ({exc}). Wait for it to finish, then merge.")
        return 2
    except report.OutputLocked as exc:
        say(f"error: another grader is writing into {args.out} ({exc}).")
        return 2
    for problem in result.problems:
        say(f"warning: {problem}")
    say(f"merged: {result.rows} graded notebook(s) of {result.students} student(s). Outputs: "
        f"{args.out / report.JOURNAL}, {args.out / report.GRADES}, {args.out / report.FEEDBACK}/")
    return 1 if result.problems and not args.partial else 0
