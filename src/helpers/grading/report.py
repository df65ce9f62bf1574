"""The grader's outputs: the journal ``results.jsonl``, ``grades.csv`` and the feedback pages.

The journal is the only record of truth. Each row is written with ONE ``os.write`` on an
``O_APPEND`` descriptor and then fsync'd, so a kill leaves at most a partial last line, which
the next run drops before it reads the journal. ``grades.csv`` and the feedback pages are
rebuilt from the journal (the newest row per student and notebook counts) and written through
a temporary file and ``os.replace``: a reader never sees half a file.

Everything in a row that came from a submission (student and file names, code, messages) is
hostile text. ``grades.csv`` neutralises what a spreadsheet would evaluate and keeps one record
per line (:func:`csv_text`); the pages escape everything and cap what they show; a student's
page lives at a path of its own (:func:`feedback_path`). One grader at a time writes an output
folder (:func:`exclusive`).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import hashlib
import html
import io
import json
import os
import re
import socket
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

JOURNAL = "results.jsonl"
GRADES = "grades.csv"
FEEDBACK = "feedback"
LOCK = ".grader.lock"
# carried_forward: how many steps earned their points as "right for the student's own inputs"
CSV_FIELDS = ("student", "notebook", "score", "max_score", "status", "carried_forward")

# What a page shows of a cell: a window of lines around what matters, each line cut.
MAX_CODE_LINES = 40
MAX_LINE_CHARS = 160


# ----------------------------------------------------------------------------- hostile text


_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """Control characters and line/paragraph separators as visible escapes (``\\n``, ``\\x1b``, …).

    What is left holds no line break of any kind (``str.splitlines`` finds one line) and no
    terminal escape sequence: safe for a CSV field, a line of a log, the instructor's terminal.
    """
    def one(m: re.Match[str]) -> str:
        c = m.group()
        return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")

    return _CONTROLS.sub(one, text)


# A cell starting with one of these is a formula to Excel, LibreOffice or Google Sheets (OWASP's
# list, plus the fullwidth forms some spreadsheets normalise to the ASCII ones).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_text(value: Any) -> str:
    """A text cell of a CSV file that a spreadsheet shows as text and that stays on one line.

    Line breaks and other control characters become visible escapes; a cell that starts
    (after spaces) with ``= + - @``, a tab, a carriage return or a fullwidth ``＝ ＋ － ＠``
    gets a leading ``'`` (OWASP's advice on CSV injection). Quoting is the csv module's.
    """
    text = escape_controls("" if value is None else str(value))
    if text.lstrip(" ").startswith(_FORMULA_START):
        text = "'" + text
    return text


_READABLE = re.compile(r"[^\w .+=@,()\[\]{}'~-]")  # what is kept of a name in a folder name (besides the hash)
_PLAIN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,79}")


def path_component(name: str) -> str:
    """A student's or notebook's name as ONE folder/file name, different for different names.

    A plain name (lowercase letters, digits, ``_ . -``; 80 characters at most; not hidden) is
    used as it is. Any other name becomes a readable part plus ``~`` and 16 hex digits of the
    SHA-256 of the full name: ``Ann Smith`` → ``Ann Smith~4f0c…``. Plain names contain no ``~``
    and no capital, so no two names share a path, also on a case-insensitive file system
    (distinct hashes differ in their lowercase hex digits).
    """
    if _PLAIN.fullmatch(name) and not name.endswith("."):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    readable = _READABLE.sub("_", unicodedata.normalize("NFC", name)).strip(" ._")[:60].rstrip(" ._")
    return f"{readable}~{digest}" if readable else f"~{digest}"


def safe_component(name: str) -> str:
    """A label without control characters or slashes (kept for names shown in rows)."""
    cleaned = re.sub(r"[\x00-\x1f/\\]", "_", name).strip()
    if cleaned in ("", ".", ".."):
        cleaned = "_" + cleaned
    return cleaned[:150]


# ----------------------------------------------------------------------------- one grader per folder


class OutputLocked(RuntimeError):
    """Another grader is writing into this output folder (the message says which)."""


@contextlib.contextmanager
def exclusive(out: Path, wait: bool = False, waiting: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the output folder for this process: ``flock`` on ``out/.grader.lock``.

    A second grader on the same folder raises :class:`OutputLocked` (or, with ``wait``, blocks
    until the first is done). The kernel drops the lock when the holder's process ends, however
    it ends (``kill -9`` too): a lock is never stale. The file stays; it only says who holds it.
    """
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            if not wait:
                raise OutputLocked(escape_controls(holder)) from None
            if waiting is not None:
                waiting(escape_controls(holder))
            fcntl.flock(fd, fcntl.LOCK_EX)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {stamp}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


# ----------------------------------------------------------------------------- the journal


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
        with open(self.path, encoding="utf-8", errors="replace", newline="\n") as f:
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
        line = (json_line(row) + "\n").encode("utf-8")
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


def json_line(row: dict[str, Any]) -> str:
    """One row as one line of JSON, whatever the row's strings hold.

    ``json`` escapes control characters; U+0085, U+2028 and U+2029 (line breaks to
    ``str.splitlines`` and to JavaScript) are escaped here too, so a name cannot split a line.
    """
    text = json.dumps(row, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("\u0085", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


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
    """``grades.csv``: text cells through :func:`csv_text`, numbers as numbers."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for (student, notebook), row in sorted(latest.items()):
        carried = sum(1 for ex in row.get("exercises") or [] if isinstance(ex, dict) and ex.get("carried_forward"))
        writer.writerow([csv_text(student), csv_text(notebook), _number(row.get("score")),
                         _number(row.get("max_score")), csv_text(row.get("status", "")), carried])
    path = out / GRADES
    write_atomic(path, buf.getvalue())
    return path


def feedback_path(out: Path, student: str, notebook: str) -> Path:
    """``feedback/<student>/<notebook>.html``, each part from :func:`path_component`."""
    return out / FEEDBACK / path_component(student) / f"{path_component(notebook)}.html"


# ----------------------------------------------------------------------------- code on a page


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # Python's own line numbering (not str.splitlines)


def code_excerpt(source: str, focus: int | None = None, max_lines: int = MAX_CODE_LINES) -> dict[str, Any]:
    """What a page shows of a cell: at most ``max_lines`` lines, each cut to ``MAX_LINE_CHARS``.

    The window starts at line 1, or around line ``focus`` (e.g. where an error was raised) when
    that line would not be in it. ``{"start": first line shown, "text": ..., "total_lines": n}``.
    """
    lines = _LINE_BREAK.split(source)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    total = len(lines)
    start = 1
    if total > max_lines and focus is not None and focus > max_lines - 3:
        start = max(1, min(focus - max_lines // 2, total - max_lines + 1))
    shown = [ln if len(ln) <= MAX_LINE_CHARS else ln[: MAX_LINE_CHARS - 1] + "…"
             for ln in lines[start - 1 : start - 1 + max_lines]]
    return {"start": start, "text": "\n".join(shown), "total_lines": total}


# ----------------------------------------------------------------------------- the feedback page


_SYMBOLS = {"pass": "✅", "fail": "❌", "not_done": "⏳", "carried": "🟡"}
_STATE_WORDS = {"pass": "right", "fail": "not right yet", "not_done": "not done yet",
                "carried": "right for your own inputs (points carried forward)"}

_PLACEHOLDER = re.compile(r"^The TO-DO cell for (?P<what>.{1,400}?) still has its placeholder: replace the "
                          r"`raise NotImplementedError\(\.\.\.\)` line with your code and run the cell\.")
_STALE = re.compile(r"^(?P<head>The cell that defines .{1,400}? raised .{1,600}?) the last time it ran, so "
                    r"(?P<name>`[^`]{1,200}`) (?:may still hold an older value \(or none\)|may be only partly "
                    r"computed)\. "
                    r"Fix that cell and run it again\.")
_NOT_DEFINED = re.compile(r"^`(?P<name>[^`]{1,200})` is not defined yet\. Fill in the TO-DO cell above and run it\.")

_CSS = """
:root{--ink:#1f2933;--muted:#5f6b7a;--line:#e3e8ef;--ok:#1a7f4b;--ok-bg:#e8f6ee;--bad:#b42318;
  --bad-bg:#fdeceb;--todo:#8a5a00;--todo-bg:#fff5e0;--code-bg:#f7f9fb}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:58rem;margin:0 auto;
  padding:2rem 1rem 4rem;color:var(--ink);line-height:1.5;background:#fff}
h1{font-size:1.6rem;margin:0 0 .2rem}
h2{font-size:1.15rem;margin:2.2rem 0 .8rem}
.who{color:var(--muted);margin:0 0 1.2rem}
.who strong{color:var(--ink)}
.summary{display:flex;flex-wrap:wrap;gap:1rem 2rem;align-items:center;border:1px solid var(--line);
  border-radius:.6rem;padding:1rem 1.2rem}
.score{font-size:1.9rem;font-weight:700;white-space:nowrap}
.score small{font-size:1rem;font-weight:500;color:var(--muted)}
.bar{flex:1 1 12rem;height:.6rem;background:var(--line);border-radius:1rem;overflow:hidden;min-width:10rem}
.bar span{display:block;height:100%;background:var(--ok)}
.counts{display:flex;gap:.5rem;flex-wrap:wrap;margin:0;padding:0;list-style:none}
.counts li{padding:.15rem .6rem;border-radius:1rem;font-size:.9rem;background:var(--code-bg);
  border:1px solid var(--line)}
.counts li::before{content:"";display:inline-block;width:.6rem;height:.6rem;border-radius:50%;
  margin-right:.4rem;background:var(--muted)}
.counts li.pass::before{background:var(--ok)}
.counts li.fail::before{background:var(--bad)}
.counts li.not_done::before{background:#d69e00}
.status{margin:1rem 0 0;padding:.75rem 1rem;border-radius:.5rem;border-left:.3rem solid var(--ok);
  background:var(--ok-bg)}
.status.warn{border-color:#d69e00;background:var(--todo-bg)}
.status.bad{border-color:var(--bad);background:var(--bad-bg)}
.status p{margin:.2rem 0}
.notice{margin:1rem 0 0;padding:.6rem 1rem;border-radius:.5rem;background:#eef4ff;
  border-left:.3rem solid #3b6fd8}
.step{border:1px solid var(--line);border-radius:.6rem;margin:0 0 1rem;overflow:hidden}
.step>header{display:flex;align-items:baseline;gap:.7rem;padding:.7rem 1rem;background:var(--code-bg)}
.step.fail>header{background:var(--bad-bg)}
.step.not_done>header{background:var(--todo-bg)}
.step.pass>header{background:var(--ok-bg)}
.sym{font-size:1.15rem}
.step h3{font-size:1.02rem;margin:0;flex:1}
.id{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.82rem;color:var(--muted);font-weight:400;
  margin-left:.4rem}
.pts{white-space:nowrap;font-weight:600}
.body{padding:.2rem 1rem .9rem}
.msg{margin:.7rem 0}
.diag{margin:.4rem 0;color:var(--todo);font-size:.93rem}
.legend{color:var(--muted);font-size:.85rem;margin:-.4rem 0 .9rem}
.msg code,.diag code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.88em;background:#0000000d;
  padding:.05rem .3rem;border-radius:.25rem}
.msg a{color:inherit}
.step.compact .body{padding:0 1rem .1rem}
.where{font-size:.85rem;color:var(--muted);margin:.7rem 0 .3rem}
details>summary{cursor:pointer;color:var(--muted);font-size:.9rem;margin:.6rem 0 .2rem}
.code{border:1px solid var(--line);border-radius:.4rem;background:var(--code-bg);overflow-x:auto;margin:0}
.code table{border-collapse:collapse;width:100%;font-family:ui-monospace,Menlo,Consolas,monospace;
  font-size:.84rem;line-height:1.45}
.code td{padding:0 .6rem;vertical-align:top}
.code td.ln{color:#9aa5b1;text-align:right;user-select:none;width:1%;border-right:1px solid var(--line)}
.code td.tx{white-space:pre}
.code tr.hit td{background:#fde2e0}
.code tr.hit td.ln{color:var(--bad);font-weight:700}
.code tr.raise td.tx{white-space:pre-wrap;color:var(--bad);font-family:system-ui,sans-serif;font-size:.86rem;
  padding:.25rem .6rem .4rem;background:#fff4f3}
.more{color:var(--muted);font-size:.8rem;padding:.15rem .6rem;margin:0}
.raised{color:var(--bad);font-size:.9rem;margin:.4rem 0 0}
.other{margin:0 0 1.2rem}
footer{margin-top:2.5rem;color:var(--muted);font-size:.82rem}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _int(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _errors(row: dict[str, Any]) -> list[dict[str, Any]]:
    errors = row.get("errors")
    return [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []


def _cell_name(index: int | None) -> str:
    return f"cell {index + 1}" if index is not None else "a cell"


def _page_message(ex: dict[str, Any], failed_cells: set[int]) -> str:
    """The check's message, in words that read right on a page (not under the notebook's cell).

    "Fill in the TO-DO cell above and run it" makes sense under a check cell only; here it
    becomes what the notebook actually does with that name.
    """
    message = str(ex.get("message") or "")
    message = _PLACEHOLDER.sub(r"The TO-DO cell for \g<what> still has its placeholder line "
                               r"(`raise NotImplementedError(...)`): this step was not done.", message)
    message = _STALE.sub(r"\g<head>, so \g<name> may not have been (fully) computed.", message)
    message = message.replace(", then run this cell again.", ".")
    m = _NOT_DEFINED.match(message)
    if not m:
        return message
    name = m.group("name")
    verb = "defines" if ex.get("kind") == "function" else "assigns"
    assigned, later, check = _int(ex.get("assigned_in")), _int(ex.get("assigned_later")), _int(ex.get("check_cell"))
    if assigned is None and ex.get("cell_role") == "answer":  # a row from before assigned_in was stored
        assigned = _int(ex.get("cell"))
    if assigned is not None:
        if assigned in failed_cells:
            why = (f"`{name}` was not defined when it was checked: {_cell_name(assigned)}, which {verb} it, "
                   "raised an error first.")
        else:
            why = (f"`{name}` was not defined when it was checked, although {_cell_name(assigned)} {verb} it: "
                   "did that line run? (It may sit under an `if`, or after a line that raised an error.)")
    elif later is not None:
        where = f" (in {_cell_name(check)})" if check is not None else ""
        why = (f"`{name}` is only {'defined' if verb == 'defines' else 'assigned'} in {_cell_name(later)}, "
               f"after its check{where}. Move it before the check.")
    else:
        why = f"`{name}` is not defined: your notebook never {verb} it."
    return why + message[m.end():]


_TICKS = re.compile(r"`([^`<>]{1,200})`")


def _rich(text: str, ids: dict[str, str]) -> str:
    """Escaped text with `names` as code and step ids as links to their step."""
    out = _TICKS.sub(lambda m: f"<code>{m.group(1)}</code>", _e(text))
    if ids:
        pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(_e(i)) for i in sorted(ids, key=len, reverse=True))
                             + r")(?![\w])")
        out = pattern.sub(lambda m: f'<a href="#step-{m.group(1)}">{m.group(1)}</a>', out)
    return out


def _code_block(code: Any, cell: int | None, errors: list[dict[str, Any]], label: str) -> str:
    """A cell's code with line numbers; each error under the line it was raised at."""
    if not isinstance(code, dict) or not isinstance(code.get("text"), str):
        return ""
    start = _int(code.get("start")) or 1
    total = _int(code.get("total_lines")) or 0
    lines = _LINE_BREAK.split(code["text"])[:MAX_CODE_LINES]
    at_line: dict[int, list[str]] = {}
    elsewhere: list[str] = []
    for err in errors:
        line = _int(err.get("line"))
        if line is not None and start <= line < start + len(lines):
            at_line.setdefault(line, []).append(str(err.get("text", "")))
        else:
            elsewhere.append(str(err.get("text", "")) + (f" (line {line})" if line else ""))
    rows = []
    if start > 1:
        rows.append(f'<p class="more">… lines 1–{start - 1} not shown</p>')
    rows.append("<table><tbody>")
    for n, text in enumerate(lines, start):
        cls = ' class="hit"' if n in at_line else ""
        rows.append(f'<tr{cls}><td class="ln">{n}</td><td class="tx">{_e(text) or " "}</td></tr>')
        for message in at_line.get(n, []):
            rows.append(f'<tr class="raise"><td class="ln"></td><td class="tx">⚠ This line raised '
                        f"{_e(message)}</td></tr>")
    rows.append("</tbody></table>")
    end = start + len(lines) - 1
    if total > end:
        rows.append(f'<p class="more">… {total - end} more line{"s" if total - end != 1 else ""} not shown</p>')
    raised = "".join(f'<p class="raised">⚠ This cell raised {_e(m)}</p>' for m in elsewhere)
    where = f'<p class="where">{_e(label)} · {_e(_cell_name(cell))} of your notebook</p>'
    return f'{where}<div class="code" data-cell="{_e(cell)}">{"".join(rows)}</div>{raised}'


def _status_box(row: dict[str, Any], n_failed_cells: int, more: bool) -> str:
    status = str(row.get("status", ""))
    count = f"{'at least ' if more else ''}{n_failed_cells} of its cells raised an error"
    error = row.get("error")
    tone = "bad"
    if status == "graded":
        if n_failed_cells:
            lines = [f"Your notebook ran to the end, but {count}: each error is shown below, next to its code."]
            tone = "warn"
        else:
            lines = ["Your notebook ran from start to end without an error, and every step was checked."]
            tone = ""
    elif status in ("timeout", "crashed"):
        lines = [str(error or "Your notebook stopped before the end.")]
        if n_failed_cells:
            lines.append(f"Before it stopped, {count} (shown below, next to the code).")
    elif status == "invalid":
        lines = ["This file could not be read as a Jupyter notebook.", str(error or "")]
    elif status == "unknown_notebook":
        lines = ["This notebook is not one of the course's graded notebooks.", str(error or "")]
    elif status == "rejected_link":
        lines = [str(error or "This is a link to another place, not a file, so it was not opened.")]
    else:
        lines = [status, str(error or "")]
    body = "".join(f"<p>{_rich(line, {})}</p>" for line in lines if line)
    return f'<div class="status {tone}" role="status">{body}</div>'


def render_feedback(row: dict[str, Any], titles: dict[str, str] | None = None,
                    mistakes: dict[str, str] | None = None) -> str:
    """The page a student reads: each step with its verdict, their code for it and its errors."""
    titles = titles or {}
    mistakes = mistakes or {}
    student, notebook = row.get("student"), row.get("notebook")
    exercises = [ex for ex in (row.get("exercises") or []) if isinstance(ex, dict)]
    errors = _errors(row)
    failed_cells = {c for c in (_int(e.get("cell")) for e in errors) if c is not None}
    n_failed = len(failed_cells) + sum(1 for e in errors if _int(e.get("cell")) is None)
    error_count = _int(row.get("error_count"))
    more = error_count is not None and error_count > len(errors)

    score, max_score = row.get("score"), row.get("max_score")
    share = 0.0
    if isinstance(score, (int, float)) and isinstance(max_score, (int, float)) and max_score > 0:
        share = max(0.0, min(1.0, score / max_score))
    states = [str(ex.get("status") or ("pass" if ex.get("passed") else "fail")) for ex in exercises]
    counts = "".join(f'<li class="{s}">{states.count(s)} {_STATE_WORDS[s]}</li>'
                     for s in ("pass", "carried", "fail", "not_done") if states.count(s))

    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Feedback for {_e(student)}: {_e(notebook)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Feedback on notebook {_e(notebook)}</h1>",
        f'<p class="who">For <strong class="student">{_e(student)}</strong> · file {_e(row.get("file"))}</p>',
        '<section class="summary" aria-label="score">'
        f'<div class="score">{_e(_number(score))} / {_e(_number(max_score))} <small>points</small></div>'
        f'<div class="bar"><span style="width:{share * 100:.1f}%"></span></div>'
        f'<ul class="counts">{counts}</ul></section>',
        _status_box(row, n_failed, more),
    ]
    for warning in row.get("warnings") or []:
        if isinstance(warning, str):
            parts.append(f'<p class="notice">{_rich(warning, {})}</p>')

    shown_cells: set[int] = set()
    ids = {str(ex.get("id")): "" for ex in exercises}
    if exercises:
        parts.append("<h2>Step by step</h2>")
    if any(isinstance(ex.get("code"), dict) for ex in exercises) or errors:
        parts.append('<p class="legend">Cell numbers count every cell of your notebook from the top, '
                     "text cells included.</p>")
    for ex, state in zip(exercises, states):
        ex_id = str(ex.get("id"))
        title = titles.get(ex_id, ex_id)
        cell = _int(ex.get("cell"))
        message = _page_message(ex, failed_cells)
        plain_pass = state == "pass" and message == f"{title}: correct."
        body = "" if plain_pass else f'<p class="msg">{_rich(message, ids)}</p>'
        if ex.get("diagnosis"):
            known = mistakes.get(str(ex["diagnosis"]))
            body += (f'<p class="diag" data-diagnosis="{_e(ex["diagnosis"])}">Known mistake: '
                     f'{_e(known or ex["diagnosis"])}</p>')
        compact = False
        if cell is not None and isinstance(ex.get("code"), dict):
            shown_cells.add(cell)
            here = [e for e in errors if _int(e.get("cell")) == cell]
            label = ("Your code for this step" if ex.get("cell_role") == "answer"
                     else "The cell before this step's check")
            block = _code_block(ex["code"], cell, here, label)
            if state == "pass" and not here:
                block = f"<details><summary>Your code ({_e(_cell_name(cell))})</summary>{block}</details>"
                compact = not body
            body += block
        elif state != "pass" and "cell_role" in ex:
            body += '<p class="where">No cell of your notebook computes this step yet.</p>'
        parts.append(
            f'<section class="step {_e(state)}{" compact" if compact else ""}" data-step="{_e(ex_id)}" '
            f'id="step-{_e(ex_id)}">'
            f'<header><span class="sym" aria-label="{_e(_STATE_WORDS.get(state, state))}">'
            f'{_SYMBOLS.get(state, "❌")}</span>'
            f'<h3>{_e(title)}<span class="id">{_e(ex_id)}</span></h3>'
            f'<span class="pts">{_e(_number(ex.get("points")))} / {_e(_number(ex.get("max_points")))}</span></header>'
            f'<div class="body">{body}</div></section>'
        )

    others = [e for e in errors if _int(e.get("cell")) not in shown_cells]
    if others:
        parts.append("<h2>Other cells that raised an error</h2>")
        by_cell: dict[int | None, list[dict[str, Any]]] = {}
        for err in others:
            by_cell.setdefault(_int(err.get("cell")), []).append(err)
        for cell, errs in by_cell.items():
            code = next((e.get("code") for e in errs if isinstance(e.get("code"), dict)), None)
            if code is not None:
                parts.append(f'<div class="other">{_code_block(code, cell, errs, "Your code")}</div>')
            else:
                where = _cell_name(cell) if cell is not None else "After the last cell"
                for err in errs:
                    line = _int(err.get("line"))
                    at = f" (line {line})" if line else ""
                    parts.append(f'<p class="raised">⚠ {_e(where.capitalize())}{_e(at)} raised '
                                 f'{_e(err.get("text"))}</p>')
    if more:
        parts.append(f'<p class="more">Only the first {len(errors)} of {error_count} errors are shown.</p>')
    error_notes = {e.get("note") for e in errors}
    notes = [n for n in (row.get("notes") or []) if isinstance(n, str) and n not in error_notes]
    if notes:
        parts.append("<h2>Also noted</h2><ul>")
        parts.extend(f"<li>{_e(n)}</li>" for n in notes)
        parts.append("</ul>")
    stamp = str(row.get("graded_at") or "")
    when = re.fullmatch(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d):\d\dZ", stamp)
    parts.append(f"<footer>Graded on {_e(when.group(1))} at {_e(when.group(2))} UTC.</footer>" if when
                 else f"<footer>Graded {_e(stamp)}.</footer>")
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


# ----------------------------------------------------------------------------- Gradescope's results.json
#
# The same row, the same words as the feedback page, in the schema of Gradescope's autograder
# specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a top-level
# "score" and "output", and one test per step with "name", "number", "score", "max_score",
# "status" ("passed" / "failed"), "output" and "visibility". Outputs are plain text
# ("output_format": "text"): a student's code and names are never read as HTML or Markdown.

GRADESCOPE_VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")
MAX_TEST_OUTPUT = 20_000  # characters of one test's output


def status_text(row: dict[str, Any]) -> list[str]:
    """What the page's status box says about a row, as lines of plain text."""
    errors = _errors(row)
    failed = {c for c in (_int(e.get("cell")) for e in errors) if c is not None}
    n_failed = len(failed) + sum(1 for e in errors if _int(e.get("cell")) is None)
    error_count = _int(row.get("error_count"))
    more = error_count is not None and error_count > len(errors)
    count = f"{'at least ' if more else ''}{n_failed} of its cells raised an error"
    status, error = str(row.get("status", "")), row.get("error")
    if status == "graded":
        if n_failed:
            return [f"Your notebook ran to the end, but {count}: each error is shown with its step."]
        return ["Your notebook ran from start to end without an error, and every step was checked."]
    if status in ("timeout", "crashed"):
        lines = [str(error or "Your notebook stopped before the end.")]
        if n_failed:
            lines.append(f"Before it stopped, {count}.")
        return lines
    if status == "invalid":
        return ["This file could not be read as a Jupyter notebook.", str(error or "")]
    if status == "unknown_notebook":
        return ["This notebook is not one of the course's graded notebooks.", str(error or "")]
    if status == "rejected_link":
        return [str(error or "This is a link to another place, not a file, so it was not opened.")]
    return [line for line in (str(error or ""),) if line] or [status]


def step_text(ex: dict[str, Any], row: dict[str, Any], mistakes: dict[str, str] | None = None) -> str:
    """One step as plain text: its verdict and message as the page has them, the known mistake,
    where its code is, and each error its cell raised with the line."""
    mistakes = mistakes or {}
    errors = _errors(row)
    failed = {c for c in (_int(e.get("cell")) for e in errors) if c is not None}
    state = str(ex.get("status") or ("pass" if ex.get("passed") else "fail"))
    lines = [f"{_SYMBOLS.get(state, '❌')} {_STATE_WORDS.get(state, state).capitalize()}. {_page_message(ex, failed)}"]
    if ex.get("diagnosis"):
        lines.append(f"Known mistake: {mistakes.get(str(ex['diagnosis'])) or ex['diagnosis']}")
    cell = _int(ex.get("cell"))
    if cell is not None and isinstance(ex.get("code"), dict):
        label = "Your code for this step" if ex.get("cell_role") == "answer" else "The cell before this step's check"
        lines.append(f"{label}: {_cell_name(cell)} of your notebook (counting every cell from the top).")
        for err in errors:
            if _int(err.get("cell")) == cell:
                line = _int(err.get("line"))
                lines.append(f"⚠ {'Line ' + str(line) if line else 'It'} raised {err.get('text', '')}")
    elif state != "pass" and "cell_role" in ex:
        lines.append("No cell of your notebook computes this step yet.")
    text = "\n".join(lines)
    return text if len(text) <= MAX_TEST_OUTPUT else text[: MAX_TEST_OUTPUT - 1] + "…"


def gradescope_results(rows: list[dict[str, Any]], titles: dict[str, str] | None = None,
                       mistakes: dict[str, str] | None = None, notes: list[str] | None = None,
                       visibility: str = "visible", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Gradescope's ``results.json`` for one submission's rows (one row per notebook)."""
    if visibility not in GRADESCOPE_VISIBILITY:
        raise ValueError(f"visibility must be one of {', '.join(GRADESCOPE_VISIBILITY)}")
    titles = titles or {}
    tests: list[dict[str, Any]] = []
    total = 0.0
    summary: list[str] = []
    for row in rows:
        score, max_score = row.get("score"), row.get("max_score")
        summary.append(f"Notebook {row.get('notebook')}: {_number(score)} / {_number(max_score)} points. "
                       + " ".join(line for line in status_text(row) if line))
        for warning in row.get("warnings") or []:
            if isinstance(warning, str):
                summary.append(warning)
        for note in row.get("notes") or []:
            if isinstance(note, str) and note not in {e.get("note") for e in _errors(row)}:
                summary.append(note)
        for ex in row.get("exercises") or []:
            if not isinstance(ex, dict):
                continue
            ex_id = str(ex.get("id"))
            points = ex.get("points") if isinstance(ex.get("points"), (int, float)) else 0
            state = str(ex.get("status") or ("pass" if ex.get("passed") else "fail"))
            total += float(points)
            tests.append({
                "name": f"{ex_id} · {titles.get(ex_id, ex_id)}",
                "number": ex_id,
                "score": points,
                "max_score": ex.get("max_points") if isinstance(ex.get("max_points"), (int, float)) else 0,
                "status": "passed" if state in ("pass", "carried") else "failed",
                "output": step_text(ex, row, mistakes),
                "output_format": "text",
                "visibility": visibility,
            })
    summary += list(notes or [])
    result: dict[str, Any] = {
        "score": round(total, 6),
        "output": "\n\n".join(summary),
        "output_format": "text",
        "visibility": visibility,
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    if extra:
        result["extra_data"] = extra
    return result
