"""Gradescope: an autograder bundle built from this grader.

``python -m helpers.grade gradescope-bundle --out DIR [--notebook 01 …]`` writes
``DIR/autograder.zip``, what Gradescope's "Configure Autograder" takes: ``setup.sh`` and
``run_autograder`` at the root of the zip (Gradescope's autograder specification), with this
repository's ``helpers`` package, ``pyproject.toml`` and ``requirements.txt`` next to them and
``gradescope.json`` (which notebooks the assignment expects, time and memory limits, visibility).

- ``setup.sh`` runs once, as root, when Gradescope builds the image: it installs bubblewrap and
  Python 3.11 (Ubuntu's packages) and the course's exact pins (``requirements.txt``) with this
  package into ``/autograder/venv``.
- ``run_autograder`` runs for every submission: ``python -m helpers.grade gradescope-run``
  grades the files in ``/autograder/submission`` with the same code as a local run
  (:func:`helpers.grade.prepare`, :class:`helpers.grade.Batch`, the same verdict) and writes
  ``/autograder/results/results.json`` (:func:`report.gradescope_results`): one test per step,
  with the message, the known mistake and the cell the feedback page shows. It always writes
  that file, also when grading fails. ``AUTOGRADER_ROOT`` (default ``/autograder``) and
  ``AUTOGRADER_PYTHON`` move it elsewhere, for a test on one's own machine.

Student code runs in the bubblewrap sandbox when Gradescope's container allows it (it needs
namespaces: see the README). When it does not, with ``"sandbox": "auto"`` (the default) the
submission runs without it, in that submission's own throwaway container, as Gradescope's
security advice describes: as an unprivileged uid (the grader, as root, drops to one), with the
registry of references, the grader and ``/autograder/source`` made unreadable to it first
(:func:`harden`); ``"require"`` refuses instead. The stdout, which only instructors see, says
which.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import stat
import sys
import tempfile
import time
import traceback
import zipfile
from pathlib import Path
from typing import Any

from . import report
from .protocol import SANDBOX_VIEW

__all__ = ["build_bundle", "harden", "run"]

CONFIG = "gradescope.json"
DEFAULT_ROOT = Path("/autograder")
SANDBOX_MODES = ("auto", "require")

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu).
# It installs bubblewrap (the grader's sandbox), Python 3.11+, and the course's exact pins
# (requirements.txt) with this repository's helpers package into /autograder/venv.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
SOURCE=/autograder/source
apt-get update
apt-get install -y --no-install-recommends bubblewrap ca-certificates
PY=""
for candidate in python3.11 python3.12 python3; do
  if ! command -v "$candidate" >/dev/null 2>&1; then
    apt-get install -y --no-install-recommends "$candidate" "$candidate-venv" >/dev/null 2>&1 || true
  fi
  if command -v "$candidate" >/dev/null 2>&1 \
     && "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    PY="$candidate"
    break
  fi
done
if [ -z "$PY" ]; then
  echo "setup.sh: no Python 3.11 or newer on this image; choose an Ubuntu 22.04 or 24.04 base image" >&2
  exit 1
fi
"$PY" -m venv /autograder/venv
/autograder/venv/bin/pip install --upgrade pip
/autograder/venv/bin/pip install -r "$SOURCE/requirements.txt" "$SOURCE[grader]"
/autograder/venv/bin/python -m helpers.grade --help >/dev/null
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission, as root, in /autograder. It grades the files in
# $AUTOGRADER_ROOT/submission with the course's grader and writes
# $AUTOGRADER_ROOT/results/results.json (always, also when grading fails).
# AUTOGRADER_ROOT and AUTOGRADER_PYTHON exist for testing it elsewhere; Gradescope sets neither.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT"
exec "$PY" -m helpers.grade gradescope-run --root "$ROOT" --config "$ROOT/source/gradescope.json"
"""


# ----------------------------------------------------------------------------- the bundle


def _repository() -> Path:
    root = Path(__file__).resolve().parents[3]
    pyproject = root / "pyproject.toml"
    if not (pyproject.is_file() and 'name = "attention-course-helpers"' in pyproject.read_text(encoding="utf-8")
            and (root / "requirements.txt").is_file()):
        raise RuntimeError("gradescope-bundle packs the repository it runs from: run it from a clone of the "
                           "course repository (with `pip install -e .`)")
    return root


def _notebook_ids(names: list[str]) -> list[str]:
    from ..grade import known_notebooks

    known = sorted(known_notebooks())
    chosen = []
    for name in names:
        hits = [k for k in known if k == name or k.split("_", 1)[0] == name]
        if len(hits) != 1:
            raise ValueError(f"--notebook {name!r} is none of the course's notebooks: {', '.join(known)}")
        chosen.append(hits[0])
    return sorted(set(chosen))


def _add(zf: zipfile.ZipFile, arcname: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))  # the same bytes for the same sources
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o100755 if executable else 0o100644) & 0xFFFF) << 16
    zf.writestr(info, data)


def build_bundle(out: Path, notebooks: list[str], timeout: float = 600, memory: int = 4096,
                 sandbox: str = "auto", visibility: str = "visible", carry_forward: bool = True) -> Path:
    """Write ``out/autograder.zip``; return its path."""
    if sandbox not in SANDBOX_MODES:
        raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_MODES)}")
    if visibility not in report.GRADESCOPE_VISIBILITY:
        raise ValueError(f"visibility must be one of {', '.join(report.GRADESCOPE_VISIBILITY)}")
    root = _repository()
    config = {"notebooks": _notebook_ids(notebooks), "timeout": timeout, "memory": memory, "sandbox": sandbox,
              "visibility": visibility, "carry_forward": carry_forward}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "autograder.zip"
    tmp = out / ".autograder.zip.tmp"
    with zipfile.ZipFile(tmp, "w") as zf:
        _add(zf, "setup.sh", SETUP_SH.encode(), executable=True)
        _add(zf, "run_autograder", RUN_AUTOGRADER.encode(), executable=True)
        _add(zf, CONFIG, (json.dumps(config, indent=2) + "\n").encode())
        for name in ("pyproject.toml", "requirements.txt", "README.md", "LICENSE"):
            if (root / name).is_file():
                _add(zf, name, (root / name).read_bytes())
        package = root / "src" / "helpers"
        for file in sorted(package.rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts and file.suffix not in (".pyc", ".pyo"):
                _add(zf, file.relative_to(root).as_posix(), file.read_bytes())
    os.replace(tmp, path)
    return path


def bundle_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m helpers.grade gradescope-bundle",
        description="Build a Gradescope autograder (autograder.zip: setup.sh, run_autograder, this grader) "
                    "for a programming assignment whose students upload the course's notebooks.",
    )
    ap.add_argument("--out", type=Path, required=True, help="folder to write autograder.zip into")
    ap.add_argument("--notebook", action="append", default=[], metavar="NOTEBOOK",
                    help="a notebook the assignment expects (01 or 01_illustrated_self_attention; repeat for "
                         "several). Its steps are the assignment's tests, also when it is not handed in. "
                         "Default: whatever course notebook is uploaded")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per notebook (default 600)")
    ap.add_argument("--memory", type=int, default=4096, help="MB a notebook may allocate (default 4096)")
    ap.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto",
                    help="auto: bubblewrap if the container allows it, else an unprivileged uid in Gradescope's "
                         "per-submission container; require: refuse to grade without bubblewrap")
    ap.add_argument("--visibility", choices=report.GRADESCOPE_VISIBILITY, default="visible",
                    help="when students see the tests (Gradescope's visibility; default visible)")
    ap.add_argument("--no-carry-forward", action="store_true",
                    help="no points for a step right only from the student's own wrong earlier answer")
    return ap


def bundle_main(argv: list[str]) -> int:
    args = bundle_parser().parse_args(argv)
    try:
        path = build_bundle(args.out, args.notebook, args.timeout, args.memory, args.sandbox, args.visibility,
                            not args.no_carry_forward)
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {path}: in Gradescope, create a Programming Assignment, then Configure Autograder → "
          "Zip file upload → this file → Update Autograder; test it with a solution notebook.", file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- on Gradescope


def harden(package: Path, source: Path | None = None) -> list[Path]:
    """Make what the submission must not read unreadable to other users (the submission runs as
    one): every file and folder of the package outside ``SANDBOX_VIEW`` (the registry of references
    and wrong variants, the grader), and ``source``. Returns what was changed."""
    view = [v.rstrip("/") for v in SANDBOX_VIEW]
    changed = []
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package).as_posix()
        needed = any(rel == v or rel.startswith(v + "/") or v.startswith(rel + "/") for v in view)
        if needed or path.is_symlink():
            continue
        mode = path.stat().st_mode
        if mode & 0o007:
            os.chmod(path, stat.S_IMODE(mode) & ~0o007)
            changed.append(path)
    if source is not None and source.exists() and source.stat().st_mode & 0o007:
        os.chmod(source, stat.S_IMODE(source.stat().st_mode) & ~0o007)
        changed.append(source)
    return changed


def _load_config(path: Path | None) -> dict[str, Any]:
    config: dict[str, Any] = {"notebooks": [], "timeout": 600, "memory": 4096, "sandbox": "auto",
                              "visibility": "visible", "carry_forward": True}
    if path is not None and path.is_file():
        given = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(given, dict):
            config.update({k: v for k, v in given.items() if k in config})
    return config


def _student_label(metadata: Path) -> str:
    try:
        users = json.loads(metadata.read_text(encoding="utf-8")).get("users") or []
        names = [str(u.get("name")) for u in users if isinstance(u, dict) and u.get("name")]
    except (OSError, ValueError, AttributeError):
        names = []
    return " & ".join(names)[:200] or "submission"


def _missing_row(student: str, notebook: str) -> dict[str, Any]:
    from ..course import spec
    from .verdict import as_number, total_points

    exercises = spec.exercises_for(notebook)
    message = (f"Notebook {notebook} was not in your submission, so this step was not checked. Upload the "
               f"notebook file ({notebook}.ipynb) and submit again.")
    return {
        "student": student, "notebook": notebook, "status": "missing", "score": 0,
        "max_score": as_number(total_points(exercises)), "error": f"Notebook {notebook} was not handed in.",
        "exercises": [{"id": ex.id, "points": 0, "max_points": as_number(ex.points), "passed": False,
                       "diagnosis": None, "message": message, "status": "not_done"} for ex in exercises],
    }


def grade_submission(root: Path, config: dict[str, Any], say: Any) -> dict[str, Any]:
    """Grade ``root/submission`` as one student's folder; return Gradescope's results."""
    from .. import grade
    from .sandbox import Settings, _python_roots, _traversable, find_bwrap, probe_bwrap

    t0 = time.monotonic()
    submission = root / "submission"
    student = _student_label(root / "submission_metadata.json")
    why = "bubblewrap is not installed" if find_bwrap() is None else probe_bwrap()
    sandboxed = why is None
    notes: list[str] = []
    if not sandboxed:
        if config["sandbox"] == "require":
            raise RuntimeError(f"the sandbox is required (\"sandbox\": \"require\") but cannot run here: {why}")
        say(f"note: no bubblewrap sandbox in this container ({why}); grading in Gradescope's per-submission "
            "container instead, the notebook running as an unprivileged user.")
        if os.geteuid() == 0 and root.resolve() == DEFAULT_ROOT:  # on Gradescope only: never a clone's files
            import helpers

            hidden = harden(Path(helpers.__file__).resolve().parent, root / "source")
            say(f"note: made {len(hidden)} file(s) of the grader and its references unreadable to that user")
            if not _traversable(_python_roots()):
                say("warning: Python is not readable by other users here, so the notebook runs as root")
    if not submission.is_dir():
        raise RuntimeError(f"{submission} is not a folder")
    parent_fd = os.open(submission.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walk = grade._Walk(submission.parent)
        walk.student_folder(parent_fd, submission.name)
    finally:
        os.close(parent_fd)
    found = [dataclasses.replace(f, student=student) for f in walk.found]
    for note in walk.notes:
        if not note.endswith("no .ipynb file in the folder"):
            say(f"note: {note}")
    known = grade.known_notebooks()
    prepared = [grade.prepare(f, known) for f in found]
    chosen = grade._choose(prepared, lambda msg: notes.append(msg.removeprefix("note: ")))
    expected = list(config["notebooks"]) or sorted({nb for _, nb in chosen if nb in known})
    subs = []
    for (_, notebook), sub in sorted(chosen.items()):
        if notebook in expected:
            subs.append(sub)
        elif sub.status:  # not a readable notebook, not a course notebook, a link
            notes.append(f"{sub.file} was not graded: {sub.error}")
        else:
            notes.append(f"{sub.file} was not graded: it is notebook {notebook}, which this assignment does not ask "
                         f"for ({', '.join(expected)}).")
    if not found:
        notes.append("Your submission holds no .ipynb notebook: upload the notebook file itself (File → Download "
                     "in Jupyter or Colab).")
    out = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        threads = max(1, os.cpu_count() or 1)
        settings = Settings(sandboxed=sandboxed, timeout=float(config["timeout"]), memory_mb=int(config["memory"]),
                            threads=threads, nproc=48 + 4 * threads,
                            hide=[root / "results", root / "source", out, submission],
                            carry_forward=bool(config["carry_forward"]))
        batch = grade.Batch(out, settings, jobs=1, progress=False)
        immediate = [s for s in subs if s.status]
        todo = [s for s in subs if not s.status]
        settings.frameworks = grade.frameworks_used(todo)
        batch.run(immediate, todo)
        for failure in batch.failures:
            say(f"error: no result for {failure}")
        latest = batch.journal.latest()
        rows = [latest[k] for k in sorted(latest)]
        handed = {row["notebook"] for row in rows}
        rows += [_missing_row(student, nb) for nb in expected if nb not in handed and nb in known]
        if batch.failures:
            notes.append("The autograder could not finish grading one of your notebooks (a problem on our side, not "
                         "in your notebook): please tell your instructor.")
        extra = {"notebooks": {r["notebook"]: {"status": r["status"], "score": r["score"],
                                               "max_score": r["max_score"]} for r in rows},
                 "sandboxed": sandboxed, "grader": _version()}
        result = report.gradescope_results(rows, grade._titles(), grade._mistake_titles(), notes,
                                           config["visibility"], extra)
        result["execution_time"] = round(time.monotonic() - t0)
        return result
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attention-course-helpers")
    except PackageNotFoundError:
        return "unknown"


def run(root: Path = DEFAULT_ROOT, config_path: Path | None = None) -> dict[str, Any]:
    """Grade the submission and write ``root/results/results.json``, whatever happens."""
    say = lambda msg: print(msg, flush=True)  # noqa: E731  (Gradescope shows stdout to instructors only)
    config = _load_config(config_path)
    try:
        result = grade_submission(root, config, say)
    except Exception as exc:  # the student gets a result and the instructor the reason, never a silent failure
        traceback.print_exc(file=sys.stdout)
        result = {
            "score": 0,
            "output": "The autograder could not grade this submission. This is a problem on our side, not in your "
                      "notebook: please tell your instructor.",
            "output_format": "text",
            "visibility": config.get("visibility", "visible"),
            "stdout_visibility": "hidden",
            "tests": [],
            "extra_data": {"error": f"{type(exc).__name__}: {exc}"[:2000]},
        }
    results = root / "results"
    results.mkdir(parents=True, exist_ok=True)
    report.write_atomic(results / "results.json", json.dumps(result, ensure_ascii=False, indent=1) + "\n")
    say(f"score {result['score']}; wrote {results / 'results.json'}")
    return result


def run_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m helpers.grade gradescope-run",
        description="What run_autograder does on Gradescope: grade <root>/submission, write "
                    "<root>/results/results.json.",
    )
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="Gradescope's /autograder (default)")
    ap.add_argument("--config", type=Path, help="the bundle's gradescope.json")
    return ap


def run_main(argv: list[str]) -> int:
    args = run_parser().parse_args(argv)
    run(args.root, args.config)
    return 0
