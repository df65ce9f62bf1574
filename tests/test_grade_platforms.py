"""Learning platforms: Canvas's and Moodle's submission downloads in, Canvas's gradebook CSV and a
plain table out.

The downloads are built here as each platform names them — Canvas: one flat zip of
``<lastfirst>[_late]_<user id>_<submission id>_<file name>`` (``anon_<id>`` when anonymous);
Moodle: ``<Full Name>_<participant id>_assignsubmission_file_/<file name>`` (a folder per student)
or the same prefix on a flat file name. They are hostile input: links, ``..``, absolute paths and
control characters are refused or neutralised and named. The exports are read back with the csv
module. One test grades an imported Canvas class in the sandbox and exports it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import zipfile
from pathlib import Path

import nbformat
import pytest
from grading_fixtures import TORCH_ANSWERS, TORCH_CHECKS, good_minimal, interleaved, minimal, read_rows

from helpers import grade
from helpers.grading import platforms, report
from helpers.grading.sandbox import probe_bwrap

NB = "01_illustrated_self_attention"
NB05 = "05_numpy_self_attention_bug"
GOOD = nbformat.writes(good_minimal()).encode()
HALF = nbformat.writes(minimal(*interleaved(TORCH_ANSWERS[:3], TORCH_CHECKS[:3]))).encode()
_NO_SANDBOX = probe_bwrap()


def _zip(path: Path, entries: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def _run(*argv: str | Path) -> int:
    return grade.main([str(a) for a in argv])


# ----------------------------------------------------------------------------- Canvas in


CANVAS = {
    f"smithjohn_1234_98765_{NB}.ipynb": GOOD,
    f"doejane_late_2345_98766_{NB}-1.ipynb": HALF,  # late, and Canvas's "-1" on a resubmitted file
    "anon_k3x9q_98767_my notebook.ipynb": HALF,  # an anonymous assignment
    "smithjohn_1234_98768_notes.pdf": b"%PDF-1.4",  # not a notebook: listed, left
    "garcíamaría_3456_98769_Copy of 01 (2).ipynb": GOOD,
}


def test_canvas_download_becomes_a_class_folder_without_renaming_by_hand(tmp_path, capsys):
    links = {"evil_7_8_link.ipynb": "../../../etc/passwd"}
    download = _zip(tmp_path / "submissions.zip", {**CANVAS, "../up_9_9_x.ipynb": GOOD, "/abs_9_9_y.ipynb": GOOD,
                                                   "README.ipynb": GOOD}, links)
    out = tmp_path / "class"
    assert _run("import-canvas", download, "--out", out) == 0
    err = capsys.readouterr().err
    assert _files(out) == {
        f"smithjohn_1234/{NB}.ipynb": GOOD,
        f"doejane_2345/{NB}-1.ipynb": HALF,
        "anon_k3x9q/my notebook.ipynb": HALF,
        "garcíamaría_3456/Copy of 01 (2).ipynb": GOOD,
    }
    assert "evil_7_8_link.ipynb: a symbolic link; refused" in err
    assert "../up_9_9_x.ipynb" in err and "/abs_9_9_y.ipynb" in err and "refused" in err
    assert "notes.pdf" in err and "README.ipynb" in err  # not a notebook / not in Canvas's format: named
    assert not (tmp_path / "up_9_9_x.ipynb").exists() and not Path("/abs_9_9_y.ipynb").exists()
    manifest = json.loads((out / platforms.MANIFEST).read_text())["students"]
    assert manifest["doejane_2345"] | {"files": None} == {"platform": "canvas", "id": "2345", "name": "doejane",
                                                         "late": True, "files": None}
    assert manifest["smithjohn_1234"]["late"] is False and manifest["anon_k3x9q"]["id"] == "anon_k3x9q"
    assert manifest["smithjohn_1234"]["files"] == [{"file": f"{NB}.ipynb", "original": f"{NB}.ipynb",
                                                    "attachment": "98765"}]
    # the grader reads it as a class: one student per folder (the manifest is a hidden file)
    found, _ = grade.discover(out)
    assert sorted({f.student for f in found}) == ["anon_k3x9q", "doejane_2345", "garcíamaría_3456", "smithjohn_1234"]
    # importing again changes nothing; the unpacked folder gives the same class
    result = platforms.import_download("canvas", download, out)
    assert result.written == {"new": 0, "updated": 0, "unchanged": 4}
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    for name, data in CANVAS.items():
        (unpacked / name).write_bytes(data)
    os.symlink(tmp_path / "submissions.zip", unpacked / "linked_5_6_x.ipynb")
    again = platforms.import_download("canvas", unpacked, tmp_path / "class2")
    assert _files(tmp_path / "class2") == _files(out)
    assert any("linked_5_6_x.ipynb: a symbolic link" in n for n in again.notes)


def test_canvas_names_are_made_safe_and_a_link_in_the_class_folder_is_not_written_through(tmp_path):
    hostile = {
        f"=cmd|x_11_12_{NB}.ipynb": HALF,  # a formula as a name (Canvas keeps word characters, a forged zip not)
        f"a\nb\x1b[2J_13_14_{NB}.ipynb": HALF,  # line break and escape sequence
        f"..._15_16_{NB}.ipynb": HALF,  # a hidden name: skipped, as the grader skips hidden entries
    }
    out = tmp_path / "class"
    (out / "victim").mkdir(parents=True)
    os.symlink(out / "victim", out / "lee_17")  # planted where a student's folder will go
    hostile["lee_17_18_x.ipynb"] = GOOD
    result = platforms.import_download("canvas", _zip(tmp_path / "d.zip", hostile), out)
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    assert names == ["=cmd|x_11", "a_b_[2J_13", "lee_17", "victim"]
    assert any("hidden" in n for n in result.notes)
    assert any(n.startswith("lee_17_18_x.ipynb: lee_17 in") and "not a folder" in n for n in result.notes)
    assert all("\n" not in n and "\x1b" not in n for n in names)
    assert list((out / "victim").iterdir()) == []  # nothing was written through the link
    # and the CSV made from such a name does not start a formula
    assert report.csv_text("=cmd|x_11").startswith("'")


# ----------------------------------------------------------------------------- Moodle in


def test_moodle_download_folders_and_flat_files(tmp_path, capsys):
    download = tmp_path / "moodle"
    (download / "Jane Doe_42_assignsubmission_file_").mkdir(parents=True)
    (download / "Jane Doe_42_assignsubmission_file_" / f"{NB}.ipynb").write_bytes(GOOD)
    (download / "Jane Doe_42_assignsubmission_file_" / "sub").mkdir()
    (download / "Jane Doe_42_assignsubmission_file_" / "sub" / f"{NB05}.ipynb").write_bytes(HALF)
    (download / "Émile Zoë_43_assignsubmission_file_Copy of 01.ipynb").write_bytes(HALF)  # "in folders" off
    (download / "Bob Ray_44_assignsubmission_onlinetext_").mkdir()
    (download / "Bob Ray_44_assignsubmission_onlinetext_" / "onlinetext.html").write_text("<p>hi</p>")
    (download / "Bob Ray_44_assignsubmission_onlinetext_" / "x.ipynb").write_bytes(GOOD)
    os.symlink("/etc/passwd", download / "Eve Low_45_assignsubmission_file_x.ipynb")
    (download / "__MACOSX").mkdir()
    (download / "__MACOSX" / "._Jane").write_bytes(b"junk")
    out = tmp_path / "class"
    assert _run("import-moodle", download, "--out", out) == 0
    err = capsys.readouterr().err
    assert _files(out) == {f"Jane Doe_42/{NB}.ipynb": GOOD, f"Jane Doe_42/sub_{NB05}.ipynb": HALF,
                           "Émile Zoë_43/Copy of 01.ipynb": HALF}
    assert "Eve Low_45_assignsubmission_file_x.ipynb: a symbolic link; refused" in err
    assert "onlinetext" in err and "1 hidden entry" not in err
    students = json.loads((out / platforms.MANIFEST).read_text())["students"]
    assert students["Jane Doe_42"]["id"] == "42" and students["Jane Doe_42"]["name"] == "Jane Doe"
    # the zip Moodle gives holds the same: the same class folder
    entries = {p.relative_to(download).as_posix(): p.read_bytes() for p in download.rglob("*")
               if p.is_file() and not p.is_symlink()}
    platforms.import_download("moodle", _zip(tmp_path / "m.zip", entries), tmp_path / "class2")
    assert _files(tmp_path / "class2") == _files(out)


def test_an_import_refuses_to_write_into_the_download_and_says_when_nothing_was_imported(tmp_path, capsys):
    download = tmp_path / "d"
    download.mkdir()
    (download / "not a canvas name.ipynb").write_bytes(GOOD)
    assert _run("import-canvas", download, "--out", download / "class") == 2
    assert _run("import-canvas", download, "--out", tmp_path / "class") == 1  # nothing recognised: exit 1
    assert "not in Canvas's download format" in capsys.readouterr().err
    (tmp_path / "bad.zip").write_bytes(b"PK\x03\x04 not really")
    assert _run("import-moodle", tmp_path / "bad.zip", "--out", tmp_path / "c2") == 2


# ----------------------------------------------------------------------------- grades out


def _graded(out: Path, rows: list[tuple[str, str, float, str]]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    points = platforms._course_notebooks()
    with open(out / report.JOURNAL, "w") as f:
        for student, notebook, score, status in rows:
            f.write(report.json_line({"student": student, "notebook": notebook, "status": status, "score": score,
                                      "max_score": points.get(notebook, 0), "exercises": [],
                                      "graded_at": "2025-01-01T10:00:00Z"}) + "\n")
    return out


def _read_csv(path: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))


ROSTER = (
    "Student,ID,SIS User ID,SIS Login ID,Section,Notebook 01_illustrated_self_attention (555),Bug hunt (556),"
    "Current Score,Final Score\n"
    "    Points Possible,,,,,20,10,(read only),(read only)\n"
    '"Smith, John",1234,S-1,jsmith,Sec A,,,,\n'
    '"Doe, Jane",2345,S-2,jdoe,Sec B,,,,\n'
    '"Ray, Bob",3456,S-3,bray,Sec A,,,,\n'
    '"Absent, Al",4567,S-4,aal,Sec B,,,,\n'
)


def test_export_canvas_writes_the_gradebook_import_format(tmp_path, capsys):
    points = platforms._course_notebooks()
    grades = _graded(tmp_path / "grades", [
        ("smithjohn_1234", NB, 7, "graded"), ("smithjohn_1234", NB05, 3, "graded"),
        ("doejane_2345", NB, 14, "graded"), ("doejane_2345", NB, 2, "graded"),  # the newer row counts
        ("jsmith2", NB, 1, "invalid"),  # not imported, not in the roster: named
        ("=HYPERLINK(\"x\")", NB, 0, "graded"),
        ("bray", NB, 5, "graded"),  # a SIS login id as the folder's name (a class folder made by hand)
    ])
    subs = tmp_path / "class"
    platforms.import_download("canvas", _zip(tmp_path / "d.zip", {k: v for k, v in CANVAS.items()
                                                                   if "smithjohn" in k or "doejane" in k}), subs)
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")
    out = tmp_path / "canvas.csv"
    assert _run("export-canvas", grades, "--out", out, "--roster", roster, "--submissions", subs,
                "--assignment", f"05={556}") == 0
    err = capsys.readouterr().err
    rows = _read_csv(out)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "Notebook 01_illustrated_self_attention (555)",
                       "Bug hunt (556)"]
    assert rows[1][0] == "Points Possible" and rows[1][5:] == ["", ""]  # existing assignments keep their points
    by_id = {r[1]: r for r in rows[2:]}
    scale = 20 / points[NB]
    assert by_id["1234"] == ["Smith, John", "1234", "S-1", "jsmith", "Sec A", platforms._num(7 * scale),
                             platforms._num(3 * 10 / points[NB05])]
    assert by_id["2345"][5] == platforms._num(2 * scale) and by_id["2345"][6] == ""  # newest row; no 05: empty
    assert by_id["3456"][:2] == ["Ray, Bob", "3456"] and by_id["3456"][5] == platforms._num(5 * scale)
    unmatched = [r for r in rows[2:] if r[1] == ""]
    assert sorted(r[0] for r in unmatched) == ["'=HYPERLINK(\"x\")", "jsmith2"]  # neutralised, and named below
    assert "2 student(s) without a Canvas ID" in err and "1 student(s) of the roster have no graded" in err
    assert "scaled" in err


def test_export_canvas_without_a_roster_creates_assignments_with_their_points(tmp_path):
    points = platforms._course_notebooks()
    grades = _graded(tmp_path / "grades", [("smithjohn_1234", NB, 7, "graded"), ("doejane_2345", NB05, 1, "graded")])
    subs = tmp_path / "class"
    platforms.import_download("canvas", _zip(tmp_path / "d.zip", CANVAS), subs)
    out = tmp_path / "canvas.csv"
    platforms.export_canvas(grades, out, submissions=subs)
    rows = _read_csv(out)
    assert rows[0] == [*platforms.CANVAS_STUDENT_COLUMNS, NB, NB05]
    assert rows[1] == ["Points Possible", "", "", "", "", platforms._num(points[NB]), platforms._num(points[NB05])]
    assert rows[2:] == [["doejane", "2345", "", "", "", "", "1"], ["smithjohn", "1234", "", "", "", "7", ""]]
    # several notebooks into one assignment: added up
    platforms.export_canvas(grades, out, submissions=subs, mapping=["all=Attention notebooks"])
    rows = _read_csv(out)
    assert rows[0][5:] == ["Attention notebooks"] and rows[1][5] == ""  # it may exist: its points are Canvas's
    assert rows[2:] == [["doejane", "2345", "", "", "", "1"], ["smithjohn", "1234", "", "", "", "7"]]
    roster = tmp_path / "roster.csv"
    roster.write_text(ROSTER, encoding="utf-8")  # the roster has no such assignment: it is new, with its points
    platforms.export_canvas(grades, out, roster, subs, mapping=["all=Attention notebooks"])
    assert _read_csv(out)[1][5] == platforms._num(points[NB] + points[NB05])
    with pytest.raises(platforms.PlatformError):
        platforms.export_canvas(grades, out, mapping=["99=1"])


def test_export_table_one_row_per_student_one_column_per_notebook(tmp_path):
    points = platforms._course_notebooks()
    grades = _graded(tmp_path / "grades", [("ann", NB, 7, "graded"), ("ann", NB05, 2, "timeout"),
                                           ("@bob", NB, 3, "graded"), ("cid", "homework", 0, "unknown_notebook")])
    out = tmp_path / "table.csv"
    assert _run("export-table", grades, "--out", out) == 0
    rows = _read_csv(out)
    total = platforms._num(points[NB] + points[NB05])
    assert rows == [["student", f"{NB} (of {platforms._num(points[NB])})",
                     f"{NB05} (of {platforms._num(points[NB05])})", f"total (of {total})"],
                    ["'@bob", "3", "", "3"], ["ann", "7", "2", "9"], ["cid", "", "", "0"]]
    assert _run("export-table", tmp_path / "nothing", "--out", out) == 2


# ----------------------------------------------------------------------------- import, grade, export


@pytest.mark.skipif(_NO_SANDBOX is not None, reason=f"no sandbox here: {_NO_SANDBOX}")
def test_a_canvas_class_imported_graded_and_exported(tmp_path):
    subs = tmp_path / "class"
    download = {f"smithjohn_1234_98765_{NB}.ipynb": GOOD, f"doejane_late_2345_98766_{NB}-1.ipynb": HALF}
    assert _run("import-canvas", _zip(tmp_path / "d.zip", download), "--out", subs) == 0
    grades = tmp_path / "grades"
    assert _run(subs, "--out", grades, "--jobs", "2", "--quiet", "--timeout", "120", "--memory", "1024") == 0
    scores = {r["student"]: r["score"] for r in read_rows(grades)}
    assert scores == {"smithjohn_1234": 7, "doejane_2345": 3}
    out = tmp_path / "canvas.csv"
    assert _run("export-canvas", grades, "--out", out, "--submissions", subs) == 0
    assert _read_csv(out)[2:] == [["doejane", "2345", "", "", "", "3"], ["smithjohn", "1234", "", "", "", "7"]]
