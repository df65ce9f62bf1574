"""Grade a whole class: ``python -m helpers.grade SUBMISSIONS [options]``.

``SUBMISSIONS`` is a folder with one sub-folder per student (``SUBMISSIONS/<student>/*.ipynb``)
or a single ``.ipynb`` (the student is the file's stem). A notebook is recognised by the id the
builder writes into its metadata, else by its file name. Writes into ``--out`` (``grades/``):

- ``results.jsonl`` — one JSON object per (student, notebook), appended the moment it is done;
- ``grades.csv`` — ``student,notebook,score,max_score,status``, rebuilt from the journal;
- ``feedback/<student>/<notebook>.html`` — what the student sees.

Statuses: ``graded``, ``timeout``, ``crashed``, ``invalid`` (not a readable notebook),
``unknown_notebook``. A notebook that times out or crashes keeps the points of the checks it
passed before it stopped (each answer was recorded when its ``check(...)`` ran); the steps
after that are "not reached". ``sys.exit()`` in a cell stops only that cell, as in Jupyter.
Rerunning resumes (a file already graded is skipped; a changed one is graded again and its
newest row counts); ``--force`` regrades everything.

Student code runs in a bubblewrap sandbox (no network, no view of the submissions, the output
folder or the solutions, a private scratch folder, time, memory and process limits) and its
answers leave it as plain arrays; the verdict is computed here, outside. See
:mod:`helpers.grading`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import queue
import re
import secrets
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .course import spec
from .course.mistakes import MISTAKES
from .grading import report
from .grading.protocol import encode_value
from .grading.sandbox import SandboxError, Settings, Worker, find_bwrap, probe_bwrap
from .grading.verdict import Cell, as_number, decide, total_points

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
    path: Path
    sha256: str = ""
    notebook: str = ""
    status: str | None = None  # set when known before running: invalid / unknown_notebook
    error: str | None = None
    cells: list[Cell] = field(default_factory=list)
    mtime: float = 0.0


# ----------------------------------------------------------------------------- discovery


def _visible(path: Path, base: Path) -> bool:
    return not any(part.startswith((".", "__")) for part in path.relative_to(base).parts)


def discover(root: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """(student, file) pairs to grade, and warnings about what was left aside."""
    warnings: list[str] = []
    if root.is_file():
        return [(root.stem, root)], warnings
    pairs: list[tuple[str, Path]] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            files = sorted(p for p in entry.rglob("*.ipynb") if p.is_file() and _visible(p, entry))
            if not files:
                warnings.append(f"{entry.name}: no .ipynb file in the folder")
            pairs.extend((entry.name, p) for p in files)
        elif entry.suffix == ".ipynb":
            warnings.append(f"{entry.name}: a notebook directly in {root}; graded as student {entry.stem!r}")
            pairs.append((entry.stem, entry))
    return pairs, warnings


def known_notebooks() -> set[str]:
    spec._load_all()
    return {ex.notebook for ex in spec.REGISTRY.values()}


def identify(nb: Any, stem: str, known: set[str]) -> tuple[str | None, str]:
    """The registered notebook this file is (metadata id first, then its name), and a fallback name."""
    meta = nb.get("metadata", {}) if isinstance(nb, dict) else {}
    course = meta.get("attention_course") if isinstance(meta, dict) else None
    nid = course.get("notebook_id") if isinstance(course, dict) else None
    if isinstance(nid, str) and nid in known:
        return nid, nid
    if stem in known:
        return stem, stem
    inside = [k for k in known if k in stem]  # "Copy of 01_illustrated_self_attention (2)"
    if len(inside) == 1:
        return inside[0], inside[0]
    fallback = nid if isinstance(nid, str) and 0 < len(nid) <= 100 else stem
    return None, report.safe_component(fallback)


def prepare(student: str, path: Path, known: set[str]) -> Submission:
    """Read and recognise one file (hostile input: nothing here executes it)."""
    import nbformat

    sub = Submission(student=student, path=path, notebook=report.safe_component(path.stem))
    try:
        st = path.stat()
        sub.mtime = st.st_mtime
        if st.st_size > MAX_FILE_MB << 20:
            sub.status = "invalid"
            sub.error = f"The file is {st.st_size >> 20} MB; notebooks up to {MAX_FILE_MB} MB are read."
            sub.sha256 = _sha_of_file(path)
            return sub
        data = path.read_bytes()
    except OSError as exc:
        sub.status, sub.error = "invalid", f"The file could not be read ({exc.strerror or exc})."
        sub.sha256 = hashlib.sha256(b"").hexdigest()
        return sub
    sub.sha256 = hashlib.sha256(data).hexdigest()
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
    except Exception as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        sub.status, sub.error = "invalid", f"Not a readable notebook ({reason})."
        return sub
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        sub.status, sub.error = "invalid", "Not a readable notebook (it has no list of cells)."
        return sub
    notebook, name = identify(nb, path.stem, known)
    sub.notebook = name
    if notebook is None:
        sub.status = "unknown_notebook"
        sub.error = (f"{path.name} is not one of the course's notebooks (its metadata names none and its file "
                     f"name matches none of: {', '.join(sorted(known))}).")
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


_FRAMEWORK_IMPORT = {
    "torch": re.compile(r"^\s*(?:import|from)\s+torch\b", re.M),
    "tensorflow": re.compile(r"^\s*(?:import|from)\s+(?:tensorflow|keras)\b", re.M),
}


def frameworks_used(subs: list[Submission]) -> tuple[str, ...]:
    """The frameworks the sandboxes preload: those some notebook of the batch imports."""
    return tuple(name for name, pattern in _FRAMEWORK_IMPORT.items()
                 if any(pattern.search(c.source) for s in subs for c in s.cells))


def _sha_of_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ----------------------------------------------------------------------------- one submission


def _row(sub: Submission, status: str, score: float, max_score: float, exercises: list[dict[str, Any]],
         error: str | None, notes: list[str], sandboxed: bool, seconds: float | None) -> dict[str, Any]:
    return {
        "student": sub.student,
        "notebook": sub.notebook,
        "file": sub.path.name,
        "submission_sha256": sub.sha256,
        "status": status,
        "score": as_number(score),
        "max_score": as_number(max_score),
        "exercises": exercises,
        "error": error,
        "notes": notes,
        "sandboxed": sandboxed,
        "seconds": seconds,
        "graded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def row_without_running(sub: Submission, sandboxed: bool) -> dict[str, Any]:
    exercises = spec.exercises_for(sub.notebook) if sub.status == "invalid" else []
    outs = [
        {"id": ex.id, "points": 0, "max_points": as_number(ex.points), "passed": False, "diagnosis": None,
         "message": "Not graded: the file could not be read.", "status": "not_done"}
        for ex in exercises
    ]
    return _row(sub, str(sub.status), 0, total_points(exercises), outs, sub.error, [], sandboxed, None)


def grade_one(worker: Worker, sub: Submission, settings: Settings) -> dict[str, Any]:
    exercises = spec.exercises_for(sub.notebook)
    # Fresh inputs only this process knows until now: drawn here, from seeds chosen here.
    plans = {ex.id: spec.make_plan(ex, seeds=[secrets.randbits(62) for _ in range(spec.seeds_needed(ex))])
             for ex in exercises}
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
    return _row(sub, result.status, score, total_points(exercises), outs, result.error, result.notes,
                settings.sandboxed, result.seconds)


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
                    bar.set_postfix_str(f"{what.student}: {detail['status']}", refresh=False)
                    bar.update(1)
                elif kind == "error":
                    self.failures.append(f"{what.student}/{what.path.name}: {type(detail).__name__}: {detail}")
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
            self.failures.append(f"{sub.student}/{sub.path.name}: not graded (no sandbox left to run it)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m helpers.grade",
        description="Grade a class's notebooks in a sandbox; write results.jsonl, grades.csv and feedback pages.",
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
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def _solutions_dir() -> Path | None:
    candidate = Path(__file__).resolve().parents[2] / "solutions"
    return candidate if candidate.is_dir() else None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    say = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    if not args.submissions.exists():
        say(f"error: {args.submissions} does not exist")
        return 2
    if args.jobs < 1 or args.timeout <= 0 or args.memory < 64:
        say("error: --jobs must be >= 1, --timeout > 0 and --memory >= 64")
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
    if not sandboxed:
        say(NO_SANDBOX_WARNING)

    pairs, warnings = discover(args.submissions)
    for w in warnings:
        say(f"note: {w}")
    if not pairs:
        say(f"error: no .ipynb submissions found in {args.submissions}")
        return 2

    out: Path = args.out
    out_real = out.resolve()
    sub_real = args.submissions.resolve()
    if sub_real.is_dir() and (out_real == sub_real or sub_real in out_real.parents):
        say("error: the output folder must not be inside the submissions folder")
        return 2
    hide = [args.submissions.resolve(), out_real]
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
    known = known_notebooks()
    t0 = time.monotonic()
    prepared = [prepare(student, path, known) for student, path in pairs]

    # One file per (student, notebook): the newest; the others are named and left aside.
    chosen: dict[tuple[str, str], Submission] = {}
    for sub in prepared:
        key = (sub.student, sub.notebook)
        if key in chosen:
            older, newer = sorted([chosen[key], sub], key=lambda s: (s.mtime, str(s.path)))
            say(f"note: {sub.student} handed in two files for {sub.notebook}: grading {newer.path.name}, "
                f"not {older.path.name}")
            chosen[key] = newer
        else:
            chosen[key] = sub
    batch = Batch(out, settings, args.jobs, progress=not args.quiet)
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
            "bubblewrap is installed but cannot create namespaces here (a container without privileges?).\n"
            "Fix that, or rerun with --no-sandbox for submissions you trust (read its warning first).")
        report.rebuild(out, batch.journal, batch.titles, batch.mistakes)
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
    if interrupted:
        say("interrupted: rerun the same command to finish (nothing already written is lost)")
        return 130
    missing = len(chosen) - skipped - batch.written
    return 0 if missing == 0 and not batch.failures else 1


if __name__ == "__main__":
    sys.exit(main())
