"""Learning platforms: their submission downloads in, their gradebooks out.

**In** — ``python -m helpers.grade import-canvas DOWNLOAD --out SUBMISSIONS`` (or
``import-moodle``) turns a platform's "download all submissions" (the ``.zip``, or the folder it
was unpacked into) into a class folder the grader reads: ``SUBMISSIONS/<student>/<file>.ipynb``,
the student known from the platform's own file names, nothing renamed by hand.

- Canvas ("Download Submissions", ``ContentZipper`` in canvas-lms): one flat zip;
  each file is ``<name>[_LATE]_<user id>_<attachment id>_<original name>``, ``<name>`` being the
  student's sortable name lower-cased without punctuation (``smithjohn``). An anonymous
  assignment gives ``anon_<anonymous id>`` instead of name and user id. The student's folder is
  ``<name>_<user id>`` (``anon_<id>``); ``late`` is kept.
- Moodle ("Download all submissions", ``mod_assign``): a folder per student and plugin,
  ``<Full Name>_<participant id>_assignsubmission_file_/<original name>`` (or, with "download
  submissions in folders" off, one file ``<Full Name>_<participant id>_assignsubmission_file_<name>``).
  The participant id is the assignment's own (the "Participant N" of its grading worksheet).
  The student's folder is ``<Full Name>_<participant id>``.

What each folder is (the platform, its id, name, late, the original file names) is written to
``SUBMISSIONS/.import.json``, which ``export-canvas`` reads. A download is hostile input, as
the class folder is: nothing is ever written outside ``--out``; an entry that is a symbolic
link (a zip can hold one), a device, an absolute path or a path with ``..`` is refused and named;
zip entries are read, never "extracted", with a size limit on every file and on the whole;
a folder is walked without following any link and read with ``O_NOFOLLOW``, as the grader does.
Only ``.ipynb`` files are imported; anything else is listed and left.

**Out** — ``python -m helpers.grade export-canvas GRADES --out FILE.csv`` writes a CSV that
Canvas's gradebook import takes (Grades → Import): ``Student, ID, SIS User ID, SIS Login ID,
Section`` and one column per assignment, ``Title (assignment id)`` — the columns and the matching
of students (by Canvas user ID, else SIS User ID, else SIS Login ID, else name) are those of
canvas-lms's ``GradebookImporter``. The IDs come from ``import-canvas`` (``--submissions``) and/or
from a roster, the CSV that Canvas's own gradebook export writes (``--roster``), which also names
the assignments and their points. ``export-table`` writes the plain table: one row per student,
one column per notebook. Every text cell goes through :func:`report.csv_text`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import secrets
import stat
import sys
import unicodedata
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..grade import _read_fd
from . import report
from .shards import read_journal

__all__ = ["ImportResult", "PlatformError", "export_canvas", "export_table", "import_download", "read_canvas_roster"]

MANIFEST = ".import.json"
MAX_FILE_MB = 100  # as the grader reads (helpers.grade.MAX_FILE_MB)
MAX_TOTAL_MB = 20_000
MAX_ENTRIES = 200_000
MAX_DEPTH = 16
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029/\\]")


class PlatformError(RuntimeError):
    """A download that cannot be imported, grades that cannot be exported (the message says why)."""


# ----------------------------------------------------------------------------- names


def safe_name(text: str, fallback: str = "student", limit: int = 150) -> str:
    """One folder or file name from hostile text: no separators, no control characters, not
    hidden (a leading ``.`` or ``_`` is dropped: the grader skips hidden entries), at most
    ``limit`` UTF-8 bytes (cut at a character)."""
    name = _CONTROLS.sub("_", unicodedata.normalize("NFC", text)).strip().lstrip("._ ")
    encoded = name.encode("utf-8", "surrogatepass")
    if len(encoded) > limit:
        name = encoded[:limit].decode("utf-8", "ignore").rstrip()
    return name if name not in ("", ".", "..") else fallback


def _say(text: str) -> str:
    return report.escape_controls(text)


@dataclass(frozen=True)
class Owner:
    """Whose file an entry of a download is, as the platform's file name says."""

    platform: str
    folder: str  # the student's folder in the class folder
    id: str  # the platform's id: Canvas user id ("anon_…" if anonymous), Moodle participant id
    name: str  # as the platform wrote it (Canvas: sortable name, lower-cased, without punctuation)
    original: str  # the file's name as the student uploaded it
    late: bool = False
    attachment: str | None = None


# Canvas: [<name>_][LATE_]<user id | anon_<id>>_<attachment id>_<original> (canvas-lms ContentZipper:
# get_filename joins [name, "LATE", id] with "_" and keeps word characters only; the name's own
# "_<digits>_" runs are squeezed so the ids can be found; the attachment's display name follows).
_CANVAS = re.compile(r"(?:(?P<name>.*?)_)??(?:(?P<late>late)_)?(?P<id>\d+|anon_[a-z0-9]+)_(?P<att>\d+)_(?P<orig>.+)",
                     re.S | re.I)
# Moodle: <Full Name>_<participant id>_assignsubmission_<plugin>_[<file name>] (mod_assign
# download_submissions: the prefix is clean_filename(fullname with "_" made " " + "_" + unique id + "_")).
_MOODLE = re.compile(r"(?P<name>.*?)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z]+)_(?P<rest>.*)", re.S)


def parse_canvas(parts: tuple[str, ...]) -> Owner | None:
    m = _CANVAS.fullmatch(parts[-1])
    if not m:
        return None
    uid, name = m.group("id"), m.group("name") or ""
    folder = safe_name(f"{name}_{uid}" if name else uid)
    return Owner("canvas", folder, uid, name, m.group("orig"), bool(m.group("late")), m.group("att"))


def parse_moodle(parts: tuple[str, ...]) -> tuple[Owner | None, str | None]:
    """The owner and, for a plugin other than files (online text …), that plugin's name."""
    for j, part in enumerate(parts):
        m = _MOODLE.fullmatch(part)
        if not m:
            continue
        if m.group("plugin") != "file":
            return None, m.group("plugin")
        if m.group("rest"):  # one flat file per submission file
            if j != len(parts) - 1:
                return None, None
            original = m.group("rest")
        elif j < len(parts) - 1:  # a folder per student and plugin
            original = "_".join(parts[j + 1:]) if len(parts) > j + 2 else parts[-1]
        else:
            return None, None
        name = m.group("name").strip()
        return Owner("moodle", safe_name(f"{name}_{m.group('id')}"), m.group("id"), name, original), None
    return None, None


# ----------------------------------------------------------------------------- reading a download


@dataclass
class Entry:
    parts: tuple[str, ...]
    kind: str  # file, dir, link, special
    size: int = 0
    read: Callable[[int], bytes] | None = None  # read(limit): at most limit + 1 bytes


def _zip_entries(path: Path, notes: list[str]) -> Iterator[Entry]:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise PlatformError(f"{path} is not a readable zip file ({exc})") from None
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise PlatformError(f"{path} holds {len(infos)} entries; more than {MAX_ENTRIES} are not imported")
        for info in infos:
            name = info.filename
            shown = _say(name)
            if "\x00" in name or "\\" in name:
                notes.append(f"{shown}: a name with a backslash or NUL character; refused")
                continue
            if name.startswith("/") or re.match(r"[A-Za-z]:", name):
                notes.append(f"{shown}: an absolute path; refused")
                continue
            parts = tuple(name.rstrip("/").split("/"))
            if any(p in ("", ".", "..") for p in parts):
                notes.append(f"{shown}: a path with '..', '.' or an empty part; refused")
                continue
            mode = (info.external_attr >> 16) & 0xFFFF
            if info.is_dir() or stat.S_ISDIR(mode):
                yield Entry(parts, "dir")
                continue
            if stat.S_ISLNK(mode):
                yield Entry(parts, "link")
                continue
            if mode and stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                yield Entry(parts, "special")
                continue
            if info.flag_bits & 0x1:
                notes.append(f"{shown}: encrypted; refused")
                continue

            def read(limit: int, info: zipfile.ZipInfo = info) -> bytes:
                with zf.open(info) as f:
                    return f.read(limit + 1)

            yield Entry(parts, "file", info.file_size, read)


def _open_under(root_fd: int, parts: tuple[str, ...]) -> int:
    fd = os.dup(root_fd)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC) if last else _DIR_FLAGS
            nfd = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nfd
        result, fd = fd, -1
        return result
    finally:
        if fd >= 0:
            os.close(fd)


def _dir_entries(root: Path, notes: list[str]) -> Iterator[Entry]:
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    count = 0

    def walk(fd: int, rel: tuple[str, ...], depth: int) -> Iterator[Entry]:
        nonlocal count
        with os.scandir(fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            count += 1
            if count > MAX_ENTRIES:
                raise PlatformError(f"{root} holds more than {MAX_ENTRIES} entries; not imported")
            parts = (*rel, entry.name)
            if entry.is_symlink():
                yield Entry(parts, "link")
            elif entry.is_dir(follow_symlinks=False):
                yield Entry(parts, "dir")
                if depth >= MAX_DEPTH:
                    notes.append(f"{_say('/'.join(parts))}: folders nested more than {MAX_DEPTH} deep are not read")
                    continue
                try:
                    sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    notes.append(f"{_say('/'.join(parts))}: could not be opened ({exc.strerror}); skipped")
                    continue
                try:
                    yield from walk(sub, parts, depth + 1)
                finally:
                    os.close(sub)
            elif entry.is_file(follow_symlinks=False):
                def read(limit: int, parts: tuple[str, ...] = parts) -> bytes:
                    f = _open_under(root_fd, parts)
                    try:
                        if not stat.S_ISREG(os.fstat(f).st_mode):
                            raise OSError("not a regular file")
                        os.set_blocking(f, True)
                        return _read_fd(f, limit)
                    finally:
                        os.close(f)

                size = entry.stat(follow_symlinks=False).st_size
                yield Entry(parts, "file", size, read)
            else:
                yield Entry(parts, "special")

    try:
        yield from walk(root_fd, (), 1)
    finally:
        os.close(root_fd)


# ----------------------------------------------------------------------------- writing the class folder


def _open_dir(parent_fd: int, name: str) -> int:
    try:
        os.mkdir(name, 0o755, dir_fd=parent_fd)
    except FileExistsError:
        pass
    return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)  # a link planted here is refused (O_NOFOLLOW)


def _write_file(dir_fd: int, name: str, data: bytes) -> str:
    """Write ``name`` in the folder: ``"new"``, ``"updated"`` or ``"unchanged"``. Never through a link."""
    try:
        old = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        old = None
    except OSError:  # a link or something else in the way: replaced below (rename never follows it)
        old = -1
    state = "new" if old is None else "updated"
    if old is not None and old >= 0:
        try:
            st = os.fstat(old)
            if stat.S_ISREG(st.st_mode) and st.st_size == len(data):
                os.set_blocking(old, True)
                same = b""
                while len(same) <= len(data):
                    chunk = os.read(old, 1 << 20)
                    if not chunk:
                        break
                    same += chunk
                if same == data:
                    return "unchanged"
        finally:
            os.close(old)
    tmp = f".import-{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    return state


@dataclass
class ImportResult:
    written: dict[str, int] = field(default_factory=lambda: {"new": 0, "updated": 0, "unchanged": 0})
    students: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    not_notebooks: list[str] = field(default_factory=list)
    unrecognised: list[str] = field(default_factory=list)

    @property
    def imported(self) -> int:
        return sum(self.written.values())


def _load_manifest(out: Path) -> dict[str, Any]:
    try:
        data = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"students": {}}
    if not isinstance(data, dict) or not isinstance(data.get("students"), dict):
        return {"students": {}}
    return data


def import_download(platform: str, source: Path, out: Path, max_file_mb: int = MAX_FILE_MB,
                    max_total_mb: int = MAX_TOTAL_MB) -> ImportResult:
    """Import a Canvas or Moodle submissions download (a zip or its unpacked folder) into ``out``."""
    if platform not in ("canvas", "moodle"):
        raise ValueError(platform)
    result = ImportResult()
    src_real, out_real = os.path.realpath(source), os.path.realpath(out)
    if source.is_dir() and (out_real == src_real or out_real.startswith(src_real.rstrip("/") + "/")):
        raise PlatformError("the class folder (--out) must not be inside the download")
    if source.is_dir():
        entries = _dir_entries(source, result.notes)
    elif source.is_file():
        entries = _zip_entries(source, result.notes)
    else:
        raise PlatformError(f"{source} is neither a zip file nor a folder")
    limit, total_limit, total = max_file_mb << 20, max_total_mb << 20, 0
    out.mkdir(parents=True, exist_ok=True)
    out_fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    manifest = _load_manifest(out)
    manifest["platform"] = platform if manifest.get("platform") in (None, platform) else "mixed"
    students: dict[str, Any] = manifest["students"]
    taken: dict[tuple[str, str], str] = {}  # (folder, file name) → the entry that got it in this import
    hidden = 0
    try:
        for entry in entries:
            shown = _say("/".join(entry.parts))
            if any(p.startswith(".") or p == "__MACOSX" for p in entry.parts):
                hidden += 1
                continue
            if entry.kind == "dir":
                continue
            if entry.kind == "link":
                result.notes.append(f"{shown}: a symbolic link; refused (never created, never followed)")
                continue
            if entry.kind == "special":
                result.notes.append(f"{shown}: not a regular file (a device, pipe or socket); refused")
                continue
            if platform == "canvas":
                owner, plugin = parse_canvas(entry.parts), None
            else:
                owner, plugin = parse_moodle(entry.parts)
            if not entry.parts[-1].lower().endswith(".ipynb"):
                result.not_notebooks.append(shown)
                continue
            if owner is None:
                why = f" (Moodle's {plugin} submissions are not notebooks)" if plugin else ""
                result.unrecognised.append(shown + why)
                continue
            if entry.size > limit:
                result.notes.append(f"{shown}: larger than {max_file_mb} MB; refused")
                continue
            try:
                data = entry.read(limit) if entry.read else b""
            except (OSError, zipfile.BadZipFile, EOFError, RuntimeError) as exc:
                result.notes.append(f"{shown}: could not be read ({_say(str(exc))[:200]}); skipped")
                continue
            if len(data) > limit:
                result.notes.append(f"{shown}: larger than {max_file_mb} MB; refused")
                continue
            total += len(data)
            if total > total_limit:
                raise PlatformError(f"the download unpacks to more than {max_total_mb} MB of notebooks; stopped "
                                   "(raise --max-total-mb if that is right)")
            base = safe_name(owner.original.rsplit("/", 1)[-1], fallback="notebook.ipynb")
            if not base.lower().endswith(".ipynb"):
                base += ".ipynb"
            name = base
            n = 2
            while (owner.folder, name) in taken and taken[(owner.folder, name)] != shown:
                name = f"{base[:-6]} ({n}).ipynb"
                n += 1
            taken[(owner.folder, name)] = shown
            try:
                dir_fd = _open_dir(out_fd, owner.folder)
            except OSError as exc:  # a link (never followed) or a file where the student's folder goes
                result.notes.append(f"{shown}: {_say(owner.folder)} in {_say(str(out))} is not a folder (a "
                                    f"symbolic link?: {exc.strerror or exc}); not written there")
                continue
            try:
                state = _write_file(dir_fd, name, data)
            except OSError as exc:
                result.notes.append(f"{shown}: could not be written ({exc.strerror or exc}); skipped")
                continue
            finally:
                os.close(dir_fd)
            result.written[state] += 1
            result.students.add(owner.folder)
            record = students.setdefault(owner.folder, {})
            record.update(platform=owner.platform, id=owner.id, name=owner.name)
            if owner.platform == "canvas":
                record["late"] = owner.late
            files = [f for f in record.get("files", []) if isinstance(f, dict) and f.get("file") != name]
            files.append({"file": name, "original": owner.original,
                          **({"attachment": owner.attachment} if owner.attachment else {})})
            record["files"] = files
    finally:
        os.close(out_fd)
        manifest["source"] = os.path.basename(source.resolve())
        report.write_atomic(out / MANIFEST, json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    if hidden:
        result.notes.append(f"skipped {hidden} hidden entr{'y' if hidden == 1 else 'ies'} (such as __MACOSX, "
                            ".DS_Store)")
    return result


def import_parser(platform: str) -> argparse.ArgumentParser:
    label = {"canvas": "Canvas", "moodle": "Moodle"}[platform]
    how = {"canvas": "Assignments → the assignment → Download Submissions",
           "moodle": "the assignment → View all submissions → Download all submissions"}[platform]
    ap = argparse.ArgumentParser(
        prog=f"python -m helpers.grade import-{platform}",
        description=f"Turn {label}'s submissions download ({how}) into a class folder for the grader: "
                    "one folder per student, the notebooks inside, nothing renamed by hand.",
    )
    ap.add_argument("download", type=Path, help="the downloaded .zip, or the folder it was unpacked into")
    ap.add_argument("--out", type=Path, required=True,
                    help="the class folder to write (created if needed; several downloads can go into one)")
    ap.add_argument("--max-file-mb", type=int, default=MAX_FILE_MB, help=f"largest notebook (default {MAX_FILE_MB})")
    ap.add_argument("--max-total-mb", type=int, default=MAX_TOTAL_MB,
                    help=f"most notebook data in one download (default {MAX_TOTAL_MB})")
    return ap


def import_main(platform: str, argv: list[str]) -> int:
    args = import_parser(platform).parse_args(argv)
    say = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    if not args.download.exists():
        say(f"error: {args.download} does not exist")
        return 2
    try:
        result = import_download(platform, args.download, args.out, args.max_file_mb, args.max_total_mb)
    except PlatformError as exc:
        say(f"error: {exc}")
        return 2
    for note in result.notes:
        say(f"note: {note}")
    if result.not_notebooks:
        listed = ", ".join(result.not_notebooks[:8]) + (", …" if len(result.not_notebooks) > 8 else "")
        say(f"note: {len(result.not_notebooks)} file(s) that are not .ipynb notebooks left out: {listed}")
    if result.unrecognised:
        listed = ", ".join(result.unrecognised[:8]) + (", …" if len(result.unrecognised) > 8 else "")
        say(f"note: {len(result.unrecognised)} notebook(s) whose name is not in {platform.capitalize()}'s download "
            f"format (so whose student is unknown) left out: {listed}")
    w = result.written
    say(f"imported {result.imported} notebook(s) of {len(result.students)} student(s) into {args.out} "
        f"({w['new']} new, {w['updated']} updated, {w['unchanged']} unchanged). "
        f"Next: python -m helpers.grade {args.out} --out grades")
    return 0 if result.imported else 1


# ----------------------------------------------------------------------------- grades out


def _course_notebooks() -> dict[str, float]:
    """Every course notebook and its maximum score."""
    from ..course import spec
    from .verdict import total_points

    spec._load_all()
    notebooks = sorted({ex.notebook for ex in spec.REGISTRY.values()})
    return {nb: float(total_points(spec.exercises_for(nb))) for nb in notebooks}


def _latest(grades: Path) -> dict[tuple[str, str], dict[str, Any]]:
    path = grades / report.JOURNAL
    if not path.is_file():
        raise PlatformError(f"{grades} has no {report.JOURNAL}: grade the class (or merge its shards) into it first")
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in read_journal(path).rows:
        latest[(row["student"], row["notebook"])] = row
    return latest


def _num(x: float) -> str:
    return f"{round(x, 2):g}"


def _score(row: dict[str, Any]) -> float:
    s = row.get("score")
    return float(s) if isinstance(s, (int, float)) and not isinstance(s, bool) else 0.0


def table_rows(latest: dict[tuple[str, str], dict[str, Any]]) -> tuple[list[str], list[list[str]], list[str]]:
    """Header, rows and notes of the plain table: a row per student, a column per course notebook."""
    course = _course_notebooks()
    present = sorted({nb for _, nb in latest if nb in course})
    other = sorted({(s, nb) for s, nb in latest if nb not in course})
    header = ["student", *(f"{nb} (of {_num(course[nb])})" for nb in present),
              f"total (of {_num(sum(course[nb] for nb in present))})"]
    rows = []
    for student in sorted({s for s, _ in latest}):
        cells = []
        total = 0.0
        for nb in present:
            row = latest.get((student, nb))
            if row is None:
                cells.append("")
            else:
                cells.append(_num(_score(row)))
                total += _score(row)
        rows.append([report.csv_text(student), *cells, _num(total)])
    notes = []
    if other:
        notes.append(f"{len(other)} file(s) that are not a course notebook (unknown notebook, linked folder) are in "
                     "grades.csv only")
    return header, rows, notes


def export_table(grades: Path, out: Path) -> list[str]:
    header, rows, notes = table_rows(_latest(grades))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    report.write_atomic(out, buf.getvalue())
    return notes


# Canvas's gradebook CSV (canvas-lms GradebookImporter): the first columns say who the student is;
# "Section" ends them; then one column per assignment, "Title (id)"; an optional second row starting
# "Points Possible"; then the students. Columns Canvas computes itself are ignored on import.
CANVAS_STUDENT_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
_NON_ASSIGNMENT = re.compile(r"Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                             r"Override Score|Override Grade|Override Status")
_TITLE_ID = re.compile(r"(?P<title>.*?)\s+\((?P<id>\d+)\)", re.S)


@dataclass
class RosterStudent:
    name: str
    id: str
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""


@dataclass
class Roster:
    students: list[RosterStudent] = field(default_factory=list)
    assignments: dict[str, str] = field(default_factory=dict)  # assignment id → its column header
    points: dict[str, float] = field(default_factory=dict)  # assignment id → points possible


def read_canvas_roster(path: Path) -> Roster:
    """The students and assignments of a CSV exported from Canvas's gradebook (Export Entire Gradebook)."""
    text = path.read_bytes()[: 64 << 20].decode("utf-8-sig", "replace")
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    if not rows or len(rows[0]) < 4 or "Student" not in rows[0][0] or "ID" not in rows[0][1]:
        raise PlatformError(f"{path} is not a Canvas gradebook export (its first columns must be Student, ID, …)")
    header = [h.strip() for h in rows[0]]
    try:
        end = header.index("Section")
    except ValueError:
        raise PlatformError(f"{path} has no Section column: not a Canvas gradebook export") from None
    col = {name: header.index(name) for name in ("SIS User ID", "SIS Login ID") if name in header[:end]}
    roster = Roster()
    for i, title in enumerate(header[end + 1:], end + 1):
        m = _TITLE_ID.fullmatch(title)
        if m and not _NON_ASSIGNMENT.search(title):
            roster.assignments[m.group("id")] = rows[0][i]
    by_index = {i: aid for aid, h in roster.assignments.items() for i, t in enumerate(rows[0]) if t == h}
    for row in rows[1:]:
        if not row or not any(c.strip() for c in row):
            continue
        if "Points Possible" in row[0]:
            for i, aid in by_index.items():
                try:
                    roster.points[aid] = float(row[i])
                except (ValueError, IndexError):
                    pass
            continue
        if all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", c, re.I) for c in row):
            continue
        cells = {k: row[i].strip() if i < len(row) else "" for k, i in col.items()}
        roster.students.append(RosterStudent(
            name=row[0].strip(), id=row[1].strip() if len(row) > 1 else "", sis_user_id=cells.get("SIS User ID", ""),
            sis_login_id=cells.get("SIS Login ID", ""), section=row[end].strip() if end < len(row) else ""))
    return roster


def _canvas_who(folder: str, manifest: dict[str, Any], roster: Roster | None) -> tuple[RosterStudent | None, str]:
    """The Canvas student a class folder is, and how that was found ("" when not found)."""
    entry = manifest.get("students", {}).get(folder)
    canvas_id = None
    if isinstance(entry, dict) and entry.get("platform") == "canvas" and re.fullmatch(r"\d+", str(entry.get("id"))):
        canvas_id = str(entry["id"])
    if roster is not None:
        if canvas_id:
            hit = next((s for s in roster.students if s.id == canvas_id), None)
            if hit:
                return hit, "import"
        key = folder.strip().casefold()
        for attr, how in (("id", "ID"), ("sis_user_id", "SIS User ID"), ("sis_login_id", "SIS Login ID"),
                          ("name", "name")):
            hits = [s for s in roster.students if getattr(s, attr) and getattr(s, attr).strip().casefold() == key]
            if len(hits) == 1:
                return hits[0], how
    if canvas_id:
        name = str(entry.get("name") or folder) if isinstance(entry, dict) else folder
        return RosterStudent(name=name, id=canvas_id), "import"
    return None, ""


def _pick_notebooks(key: str, notebooks: list[str]) -> list[str]:
    if key in ("all", "*"):
        return notebooks
    hits = [nb for nb in notebooks if nb == key or nb.split("_", 1)[0] == key]
    if not hits:
        raise PlatformError(f"--assignment {key}=…: no graded notebook is {key!r} (graded: {', '.join(notebooks)})")
    return hits


@dataclass
class CanvasColumn:
    header: str
    notebooks: list[str]
    ours: float  # the notebooks' points together
    canvas_points: float | None  # Canvas's points possible, when the roster says
    kind: str  # "id": an assignment by its id; "title": by its title (new if Canvas has none); "new"


def canvas_columns(notebooks: list[str], course: dict[str, float], roster: Roster | None,
                   mapping: list[str]) -> tuple[list[CanvasColumn], list[str]]:
    """One column per Canvas assignment: given (``NOTEBOOK=ID or title``), found in the roster (an
    assignment whose title holds the notebook's id), or new (titled with the notebook's id)."""
    targets: dict[str, str] = {}
    for item in mapping:
        key, sep, target = item.partition("=")
        if not sep or not key.strip() or not target.strip():
            raise PlatformError(f"--assignment {item!r}: write NOTEBOOK=ASSIGNMENT (e.g. 01=12345, or all=12345)")
        for nb in _pick_notebooks(key.strip(), notebooks):
            targets[nb] = target.strip()
    notes: list[str] = []
    columns: dict[str, CanvasColumn] = {}
    for nb in notebooks:
        target = targets.get(nb)
        aid = None
        if target is None and roster is not None:
            found = [a for a, h in roster.assignments.items() if nb in h]
            if len(found) == 1:
                aid = found[0]
        elif target is not None and re.fullmatch(r"\d+", target):
            aid = target
        elif target is not None and roster is not None:
            found = [a for a, h in roster.assignments.items()
                     if h == target or _TITLE_ID.fullmatch(h)["title"] == target]
            aid = found[0] if len(found) == 1 else None
        if aid is not None:
            header = roster.assignments.get(aid) if roster is not None else None
            if roster is not None and header is None:
                raise PlatformError(f"assignment {aid} is not in the roster's columns: is it the right course?")
            header, kind = header or f"{nb} ({aid})", "id"
        elif target is not None:  # by title: new when the roster has no such assignment, unknown without one
            header, kind = target, ("new" if roster is not None else "title")
        else:
            header, kind = nb, "new"
        col = columns.setdefault(header, CanvasColumn(header, [], 0.0, None, kind))
        col.notebooks.append(nb)
        col.ours += course.get(nb, 0.0)
        if aid is not None and roster is not None:
            col.canvas_points = roster.points.get(aid)
    for col in columns.values():
        what = {"id": "the existing assignment", "title": "the assignment of that title; Canvas creates it if it "
                "has none", "new": "a new assignment, which Canvas creates on import; --assignment NOTEBOOK=ID "
                "puts it into an existing one"}[col.kind]
        scale = ""
        if col.canvas_points is not None and col.canvas_points > 0 and abs(col.canvas_points - col.ours) > 1e-9:
            scale = f"; scores scaled from {_num(col.ours)} to Canvas's {_num(col.canvas_points)} points"
        notes.append(f"{', '.join(col.notebooks)} → {col.header!s} ({what}{scale})")
    return list(columns.values()), notes


def _canvas_name(text: str) -> str:
    # A first cell holding "Points Possible" would be read as the points row (GradebookImporter).
    return report.csv_text(text.replace("Points Possible", "Points\u00a0Possible"))


def export_canvas(grades: Path, out: Path, roster_path: Path | None = None, submissions: Path | None = None,
                  mapping: list[str] | None = None) -> list[str]:
    """Write Canvas's gradebook CSV for the newest grades in ``grades``; return notes for the instructor."""
    latest = _latest(grades)
    course = _course_notebooks()
    roster = read_canvas_roster(roster_path) if roster_path is not None else None
    manifest = _load_manifest(submissions) if submissions is not None else {"students": {}}
    notebooks = sorted({nb for _, nb in latest if nb in course})
    if not notebooks:
        raise PlatformError(f"{grades} holds no graded course notebook")
    columns, notes = canvas_columns(notebooks, course, roster, mapping or [])
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*CANVAS_STUDENT_COLUMNS, *(report.csv_text(c.header) for c in columns)])
    # Points for the assignments Canvas creates only: an existing one keeps its own.
    writer.writerow(["Points Possible", "", "", "", "", *(_num(c.ours) if c.kind == "new" else "" for c in columns)])
    unmatched, matched_by_name = [], []
    for student in sorted({s for s, _ in latest}):
        who, how = _canvas_who(student, manifest, roster)
        scores = []
        for col in columns:
            rows = [latest[(student, nb)] for nb in col.notebooks if (student, nb) in latest]
            if not rows:
                scores.append("")
                continue
            got = sum(_score(r) for r in rows)
            if col.canvas_points is not None and col.canvas_points > 0 and col.ours > 0:
                got = got * col.canvas_points / col.ours
            scores.append(_num(got))
        if not any(scores):
            continue
        if who is None:
            unmatched.append(student)
            who = RosterStudent(name=student, id="")
        elif how == "name":
            matched_by_name.append(student)
        writer.writerow([_canvas_name(who.name), report.csv_text(who.id), report.csv_text(who.sis_user_id),
                         report.csv_text(who.sis_login_id), report.csv_text(who.section), *scores])
    report.write_atomic(out, buf.getvalue())
    if unmatched:
        listed = ", ".join(_say(s) for s in unmatched[:8]) + (", …" if len(unmatched) > 8 else "")
        missing = ("they are not in the roster" if roster is not None else
                   "give --roster (Canvas: Grades → Export → Export Entire Gradebook) or --submissions (a class "
                   "folder made by import-canvas)")
        notes.append(f"{len(unmatched)} student(s) without a Canvas ID: {listed}. Their rows carry only the "
                     f"folder's name, which Canvas matches against its students' names, and asks you about "
                     f"the rest on import; {missing}")
    if matched_by_name:
        notes.append(f"{len(matched_by_name)} student(s) matched to the roster by name only: check them on "
                     "Canvas's import page")
    if roster is not None:
        have = {s.id for s in roster.students}
        graded = {(_canvas_who(s, manifest, roster)[0] or RosterStudent("", "")).id for s, _ in latest}
        absent = len(have - graded)
        if absent:
            notes.append(f"{absent} student(s) of the roster have no graded notebook: their cells are left out "
                         "(Canvas keeps what it has)")
    return notes


def export_canvas_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m helpers.grade export-canvas",
        description="Write the newest grades as a CSV that Canvas's gradebook import takes (Grades → Import).",
    )
    ap.add_argument("grades", type=Path, help="the grader's output folder (holds results.jsonl)")
    ap.add_argument("--out", type=Path, required=True, help="the CSV file to write")
    ap.add_argument("--roster", type=Path,
                    help="Canvas's gradebook export (Grades → Export → Export Entire Gradebook): the students' "
                         "IDs and sections, the assignments' ids and points")
    ap.add_argument("--submissions", type=Path,
                    help="the class folder made by import-canvas (its .import.json gives each student's Canvas ID)")
    ap.add_argument("--assignment", action="append", default=[], metavar="NOTEBOOK=ASSIGNMENT",
                    help="put a notebook's score (01, or 01_illustrated_self_attention, or all) into a Canvas "
                         "assignment: its id (12345) or title; several notebooks in one assignment are added up. "
                         "Default: the roster's assignment whose title holds the notebook's name, else a new one")
    return ap


def export_canvas_main(argv: list[str]) -> int:
    args = export_canvas_parser().parse_args(argv)
    say = lambda msg: print(msg, file=sys.stderr)  # noqa: E731
    try:
        notes = export_canvas(args.grades, args.out, args.roster, args.submissions, args.assignment)
    except (PlatformError, OSError) as exc:
        say(f"error: {exc}")
        return 2
    for note in notes:
        say(f"note: {note}")
    say(f"wrote {args.out}: in Canvas, Grades → Import, choose this file, check the changes it lists, Upload.")
    return 0


def export_table_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m helpers.grade export-table",
        description="Write the newest grades as one row per student and one column per notebook (with a total).",
    )
    ap.add_argument("grades", type=Path, help="the grader's output folder (holds results.jsonl)")
    ap.add_argument("--out", type=Path, required=True, help="the CSV file to write")
    return ap


def export_table_main(argv: list[str]) -> int:
    args = export_table_parser().parse_args(argv)
    try:
        notes = export_table(args.grades, args.out)
    except (PlatformError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
