"""The grader's outputs: the journal ``results.jsonl``, ``grades.csv`` and the feedback pages.

The journal is the only record of truth. Each row is written with ONE ``os.write`` on an
``O_APPEND`` descriptor and then fsync'd, so a kill leaves at most a partial last line, which
the next run drops before it reads the journal. ``grades.csv`` and the feedback pages are
rebuilt from the journal (the newest row per student and notebook counts) and written through
a temporary file and ``os.replace``: a reader never sees half a file.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

JOURNAL = "results.jsonl"
GRADES = "grades.csv"
FEEDBACK = "feedback"
CSV_FIELDS = ("student", "notebook", "score", "max_score", "status")


def safe_component(name: str) -> str:
    """A student or notebook name usable as one path component."""
    cleaned = re.sub(r"[\x00-\x1f/\\]", "_", name).strip()
    if cleaned in ("", ".", ".."):
        cleaned = "_" + cleaned
    return cleaned[:150]


class Journal:
    """``results.jsonl``: one JSON object per line, appended as each submission finishes."""

    def __init__(self, path: Path):
        self.path = path
        self.dropped_partial = 0
        self.bad_lines = 0
        self.rows: list[dict[str, Any]] = []
        path.parent.mkdir(parents=True, exist_ok=True)
        self._repair()
        self._load()

    def _repair(self) -> None:
        """Drop a trailing partial line (left by a kill in the middle of a write)."""
        if not self.path.exists():
            return
        with open(self.path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                keep = data.rfind(b"\n") + 1
                self.dropped_partial = len(data) - keep
                f.truncate(keep)
                f.flush()
                os.fsync(f.fileno())

    def _load(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    self.bad_lines += 1
                    continue
                if isinstance(row, dict) and all(isinstance(row.get(k), str) for k in ("student", "notebook")):
                    self.rows.append(row)
                else:
                    self.bad_lines += 1

    def seen(self) -> set[tuple[str, str, str]]:
        return {(r["student"], r["notebook"], str(r.get("submission_sha256"))) for r in self.rows}

    def append(self, row: dict[str, Any]) -> None:
        line = (json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
        new = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, line)
            if written != len(line):  # disk full: leave no partial line behind for long
                raise OSError(f"short write to {self.path} ({written} of {len(line)} bytes)")
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            _fsync_dir(self.path.parent)
        self.rows.append(row)

    def latest(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The newest row per (student, notebook): the one that counts."""
        out: dict[tuple[str, str], dict[str, Any]] = {}
        for row in self.rows:
            out[(row["student"], row["notebook"])] = row
        return out


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _number(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return ""
    return f"{x:g}"


def write_grades(out: Path, latest: dict[tuple[str, str], dict[str, Any]]) -> Path:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for (student, notebook), row in sorted(latest.items()):
        writer.writerow([student, notebook, _number(row.get("score")), _number(row.get("max_score")),
                         row.get("status", "")])
    path = out / GRADES
    write_atomic(path, buf.getvalue())
    return path


def feedback_path(out: Path, student: str, notebook: str) -> Path:
    return out / FEEDBACK / safe_component(student) / f"{safe_component(notebook)}.html"


_STATUS_TEXT = {
    "graded": "Your notebook ran to the end and every step was graded.",
    "timeout": "Your notebook took too long and was stopped.",
    "crashed": "Your notebook stopped before the end.",
    "invalid": "This file could not be read as a Jupyter notebook.",
    "unknown_notebook": "This notebook is not one of the course's graded notebooks.",
}
_SYMBOLS = {"pass": "✅", "fail": "❌", "not_done": "⏳"}

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1d2329;line-height:1.45}
h1{font-size:1.5rem;margin-bottom:.25rem}.meta{color:#5b6570;margin-top:0}
.score{font-size:1.25rem;font-weight:600}.status{padding:.5rem .75rem;border-radius:.4rem;background:#eef2f6}
.status.bad{background:#fdecea}table{border-collapse:collapse;width:100%;margin-top:1rem}
th,td{text-align:left;vertical-align:top;padding:.45rem .5rem;border-bottom:1px solid #dde3ea}
td.sym{font-size:1.2rem;width:2rem}td.pts{white-space:nowrap}.id{font-family:ui-monospace,monospace;font-size:.9em}
.diag{color:#8a4b00;font-size:.9em}.notes li{font-family:ui-monospace,monospace;font-size:.85em}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def render_feedback(row: dict[str, Any], titles: dict[str, str] | None = None,
                    mistakes: dict[str, str] | None = None) -> str:
    """The page a student reads: one line per step (✅ / ❌ / ⏳), what to change, why."""
    titles = titles or {}
    mistakes = mistakes or {}
    status = str(row.get("status", ""))
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Feedback: {_e(row.get('notebook'))} ({_e(row.get('student'))})</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Feedback on notebook {_e(row.get('notebook'))}</h1>",
        f'<p class="meta">Student: {_e(row.get("student"))} · file: {_e(row.get("file"))}'
        f" · graded {_e(row.get('graded_at'))}</p>",
        f'<p class="score">Score: {_e(_number(row.get("score")))} / {_e(_number(row.get("max_score")))}</p>',
        f'<p class="status{"" if status == "graded" else " bad"}">{_e(_STATUS_TEXT.get(status, status))}'
        + (f"<br>{_e(row.get('error'))}" if row.get("error") else "")
        + "</p>",
    ]
    exercises = row.get("exercises") or []
    if exercises:
        parts.append("<table><thead><tr><th></th><th>Step</th><th>Points</th><th>Feedback</th></tr></thead><tbody>")
        for ex in exercises:
            if not isinstance(ex, dict):
                continue
            state = ex.get("status") or ("pass" if ex.get("passed") else "fail")
            diagnosis = ex.get("diagnosis")
            diag = ""
            if diagnosis:
                title = mistakes.get(str(diagnosis))
                diag = (f'<br><span class="diag">Diagnosis: {_e(diagnosis)}'
                        + (f" — {_e(title)}" if title else "") + "</span>")
            parts.append(
                f'<tr class="{_e(state)}"><td class="sym">{_SYMBOLS.get(str(state), "❌")}</td>'
                f'<td><span class="id">{_e(ex.get("id"))}</span><br>{_e(titles.get(str(ex.get("id")), ""))}</td>'
                f'<td class="pts">{_e(_number(ex.get("points")))} / {_e(_number(ex.get("max_points")))}</td>'
                f"<td>{_e(ex.get('message'))}{diag}</td></tr>"
            )
        parts.append("</tbody></table>")
    notes = row.get("notes") or []
    if notes:
        parts.append("<h2>Errors while running your notebook</h2><ul class=\"notes\">")
        parts.extend(f"<li>{_e(n)}</li>" for n in notes if isinstance(n, str))
        parts.append("</ul>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_feedback(out: Path, row: dict[str, Any], titles: dict[str, str], mistakes: dict[str, str]) -> Path:
    path = feedback_path(out, str(row["student"]), str(row["notebook"]))
    write_atomic(path, render_feedback(row, titles, mistakes))
    return path


def rebuild(out: Path, journal: Journal, titles: dict[str, str], mistakes: dict[str, str],
            only: Iterable[tuple[str, str]] | None = None) -> None:
    """grades.csv and every feedback page from the journal's newest rows."""
    latest = journal.latest()
    write_grades(out, latest)
    keys = latest.keys() if only is None else [k for k in only if k in latest]
    for key in keys:
        write_feedback(out, latest[key], titles, mistakes)
