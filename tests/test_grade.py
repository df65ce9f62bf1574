"""The grader's command: outputs, statuses, resume after a kill, the trust boundary's parsing.

The attacks on the sandbox are in test_grade_attacks.py. Here: files that are not notebooks
(no sandbox needed: they get their row straight away), the journal and its recovery, hostile
records fed straight to the verdict, resuming (changed files, --force, SIGKILL mid-batch),
--no-sandbox and the refusal without bubblewrap.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from grading_fixtures import (
    MAX_SCORE,
    NB_ID,
    PYTHON,
    SOLUTION,
    TORCH_ANSWERS,
    TORCH_IDS,
    good_minimal,
    interleaved,
    minimal,
    outcome,
    place,
    read_rows,
    rows_by_student,
    run_grader,
)

from helpers import grade
from helpers.course import spec
from helpers.grading import report
from helpers.grading.protocol import ProtocolError, decode_array, encode_array, frame, split_frames
from helpers.grading.sandbox import probe_bwrap, uid_base_for
from helpers.grading.verdict import Cell, decide
from paths import ROOT

_NO_SANDBOX = probe_bwrap()
needs_bwrap = pytest.mark.skipif(_NO_SANDBOX is not None, reason=f"no sandbox here: {_NO_SANDBOX}")


# ----------------------------------------------------------------------------- files that are not notebooks


def test_unreadable_files_get_a_row_each_and_no_sandbox(tmp_path, capsys):
    root, out = tmp_path / "subs", tmp_path / "grades"
    files = {
        "empty": b"",
        "blank": b"  \n\t ",
        "malformed": b'{"cells": [ {"cell_type": "code", ',
        "png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4,
        "json_list": b"[1, 2, 3]",
        "not_a_notebook": b'{"hello": "world"}',
        "cells_not_a_list": json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": 7}).encode(),
        "deep": b"[" * 200_000 + b"]" * 200_000,
        "latin1": "caf\xe9".encode("latin-1"),
    }
    for student, data in files.items():
        (root / student).mkdir(parents=True)
        (root / student / f"{NB_ID}.ipynb").write_bytes(data)
    (root / "dup" / "v2").mkdir(parents=True)  # two files for one notebook: the newest is graded
    (root / "dup" / f"{NB_ID}.ipynb").write_bytes(b"")
    (root / "dup" / "v2" / f"{NB_ID}.ipynb").write_bytes(b"{not json")
    os.utime(root / "dup" / f"{NB_ID}.ipynb", (1, 1))
    place(root, "stranger", minimal("x = 1", notebook_id="99_not_in_this_course"), name="my_project.ipynb")
    place(root, "<b>eve", minimal("x = 1", notebook_id=None), name="<i>whatever.ipynb")

    code = grade.main([str(root), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "dup handed in two files" in err
    rows = rows_by_student(out)
    assert set(rows) == set(files) | {"stranger", "<b>eve", "dup"}
    assert len(read_rows(out)) == len(rows)
    assert "Not a readable notebook" in rows["dup"]["error"]
    for student in files:
        row = rows[student]
        assert row["status"] == "invalid" and row["score"] == 0 and row["error"], row
        assert row["notebook"] == NB_ID and row["max_score"] == MAX_SCORE  # known from the file name
    assert "empty" in rows["empty"]["error"] and "nested too deeply" in rows["deep"]["error"]
    assert "UTF-8" in rows["latin1"]["error"]
    assert rows["stranger"]["status"] == "unknown_notebook" and rows["stranger"]["notebook"] == "99_not_in_this_course"
    assert rows["<b>eve"]["status"] == "unknown_notebook"

    csv_lines = (out / "grades.csv").read_text().splitlines()
    assert csv_lines[0] == "student,notebook,score,max_score,status,carried_forward"
    assert f"empty,{NB_ID},0,{MAX_SCORE},invalid,0" in csv_lines
    page = report.feedback_path(out, "<b>eve", "<i>whatever").read_text(encoding="utf-8")
    assert "&lt;b&gt;eve" in page and "<b>eve" not in page and "<i>whatever" not in page


def test_single_file_submission_uses_the_file_stem_as_student(tmp_path):
    nb = tmp_path / "carol.ipynb"
    nb.write_text("not json")
    assert grade.main([str(nb), "--out", str(tmp_path / "g"), "--quiet"]) == 0
    (row,) = read_rows(tmp_path / "g")
    assert (row["student"], row["status"]) == ("carol", "invalid")


def test_discover_and_identify(tmp_path):
    root = tmp_path / "subs"
    place(root, "ann", minimal(), name="01_illustrated_self_attention.ipynb")
    place(root, "ann", minimal(), name=".ipynb_checkpoints/01_illustrated_self_attention-checkpoint.ipynb")
    (root / "nobody").mkdir()
    place(root, "bo", minimal(notebook_id=None), name="Copy of 01_illustrated_self_attention (3).ipynb")
    pairs, warnings = grade.discover(root)
    assert [(f.student, f.path.name) for f in pairs] == [
        ("ann", "01_illustrated_self_attention.ipynb"), ("bo", "Copy of 01_illustrated_self_attention (3).ipynb")]
    assert any("nobody" in w for w in warnings)
    known = grade.known_notebooks()
    sub = grade.prepare(pairs[1], known)
    assert (sub.status, sub.notebook) == (None, NB_ID)


def test_refuses_without_bubblewrap_unless_told(tmp_path, monkeypatch, capsys):
    place(tmp_path / "subs", "ann", good_minimal())
    monkeypatch.setattr(grade, "find_bwrap", lambda: None)
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "g"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap" in err and "--no-sandbox" in err
    monkeypatch.setattr(grade, "find_bwrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(grade, "probe_bwrap", lambda: "bwrap cannot create a sandbox here: no namespaces")
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "g"), "--quiet"]) == 2
    assert "cannot create a sandbox" in capsys.readouterr().err
    assert not (tmp_path / "g" / "results.jsonl").exists()


def test_a_sandbox_that_fails_to_start_is_not_blamed_on_namespaces(tmp_path, monkeypatch, capsys):
    """bubblewrap passed its probe, then the Python inside stopped (here: a package it cannot see)."""
    place(tmp_path / "subs", "ann", good_minimal())
    monkeypatch.setattr(grade, "find_bwrap", lambda: "/usr/bin/bwrap")
    monkeypatch.setattr(grade, "probe_bwrap", lambda: None)

    def fails(self, immediate, todo):
        raise grade.SandboxError("the sandbox did not start (the sandbox closed its output).\n"
                                 "ModuleNotFoundError: No module named 'helpers'")

    monkeypatch.setattr(grade.Batch, "run", fails)
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "g"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "No module named 'helpers'" in err and "bubblewrap itself works here" in err
    assert "namespaces" not in err


def test_output_folder_inside_submissions_is_refused(tmp_path, capsys):
    place(tmp_path / "subs", "ann", good_minimal())
    assert grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "subs" / "grades"), "--quiet"]) == 2


# ----------------------------------------------------------------------------- journal and outputs


def _row(student, score, status="graded", sha="a"):
    return {"student": student, "notebook": NB_ID, "submission_sha256": sha, "status": status, "score": score,
            "max_score": MAX_SCORE, "exercises": [], "error": None}


def test_journal_drops_a_partial_last_line_and_newest_row_counts(tmp_path):
    path = tmp_path / "results.jsonl"
    j = report.Journal(path)
    j.append(_row("ann", 3, sha="1"))
    j.append(_row("bob", 5))
    j.append(_row("ann", 9, sha="2"))
    with open(path, "ab") as f:  # what a kill in the middle of a write could leave
        f.write(b'{"student": "cid", "notebook": "01_illus')
    j2 = report.Journal(path)
    assert j2.dropped_partial > 0 and path.read_bytes().endswith(b"\n")
    assert [r["student"] for r in j2.rows] == ["ann", "bob", "ann"]
    assert ("ann", NB_ID, "1") in j2.seen() and ("ann", NB_ID, "2") in j2.seen()
    report.write_grades(tmp_path, j2.latest())
    assert (tmp_path / "grades.csv").read_text().splitlines()[1:] == [
        f"ann,{NB_ID},9,{MAX_SCORE},graded,0", f"bob,{NB_ID},5,{MAX_SCORE},graded,0"]
    with open(path, "ab") as f:
        f.write(b"garbage that is a whole line\n")
    assert report.Journal(path).bad_lines == 1


def test_feedback_escapes_everything():
    row = {**_row("<script>alert(1)</script>", 1), "file": "<img src=x onerror=alert(1)>.ipynb",
           "error": "<b>boom</b>", "notes": ["cell 3 raised ValueError: <svg onload=alert(1)>"],
           "exercises": [{"id": "01.x", "points": 0, "max_points": 1, "passed": False, "status": "fail",
                          "diagnosis": "no_softmax", "message": "`x` is <script>bad()</script>"}]}
    page = report.render_feedback(row, {"01.x": "The <inputs>"}, {"no_softmax": "softmax left out"})
    assert "<script" not in page and "<img" not in page and "<svg" not in page and "<b>boom" not in page
    assert "&lt;script&gt;" in page and "❌" in page and "no_softmax" in page and "softmax left out" in page


# ----------------------------------------------------------------------------- the trust boundary


def _blob(*messages) -> bytes:
    return b"".join(frame(json.dumps(m).encode()) for m in messages)


EXS = [ex for ex in spec.exercises_for(NB_ID)]
PLANS = {ex.id: spec.make_plan(ex, seeds=list(range(spec.seeds_needed(ex)))) for ex in EXS}
CELLS = [Cell(1, "x = torch.tensor(x_list)")]
DONE = {"state": "exited", "exit_code": 0, "signal": None, "seconds": 1.0}


def _rec(ex_id, **record):
    return {"t": "rec", "id": ex_id, "at": "check", "cell": 0, "record": record}


def _answers(ex_id, first):
    """A value step's answers as the sandbox sends them: the notebook's, then one per replay (right)."""
    ex, plan = spec.get(ex_id), PLANS[ex_id]
    replays = [{n: encode_array(a) for n, a in ex.expected(world).items()} for world in plan.inputs[1:]]
    return [first, *replays]


def _x_record():
    x = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], float)
    return {"answers": _answers("01.x", {"x": encode_array(x)}), "replay": {"available": True, "error": None},
            "facts": {"framework": {"x": "torch"}, "dtype": {"x": "float32"}}}


def test_hostile_records_are_judged_never_trusted():
    x = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], float)
    bad_b64 = {"shape": [3, 4], "f8": "!!!!" * 32}
    lying_shape = {"shape": [100000, 100000], "f8": encode_array(x)["f8"]}
    nan = {"shape": [3, 3], "f8": encode_array(np.full((3, 3), np.nan))["f8"]}
    right_tf_x = {**_x_record(), "facts": {"framework": {"x": "tensorflow"}, "dtype": {"x": "float32"}}}
    blob = _blob(
        {"t": "cell", "i": 0},
        _rec("01.x", **_x_record()),
        _rec("01.weights", answers=[{"w_key": bad_b64, "w_query": bad_b64, "w_value": bad_b64}]),
        _rec("01.qkv", answers=[{"keys": lying_shape}]),
        _rec("01.scores", answers=[{"attn_scores": nan}]),
        _rec("01.softmax", error={"kind": "not_done", "message": "`attn_weights` is not defined yet."}),
        {"t": "rec", "id": "01.outputs", "passed": True, "points": 99},
        _rec(["unhashable"], answers=[]),
        {"t": "rec", "id": "01.tf_x", "record": "x" * 10},
        # the right numbers, but no replay on the fresh inputs (a patched recorder): not credited
        _rec("01.tf_weights", answers=[{n: encode_array(a) for n, a in spec.get("01.tf_weights").expected(
            PLANS["01.tf_weights"].inputs[0]).items()}], replay={"available": False}),
        # and a claim that the answer is right: ignored, the grader computes
        _rec("01.tf_qkv", answers=[{"keys": encode_array(x)}], status="pass", passed=True),
        "not even an object",
        {"t": "done"},
    )
    result = decide(EXS, PLANS, DONE, blob, CELLS, 60)
    by_id = {o.exercise: o for o in result.outcomes}
    assert result.status == "graded"
    assert by_id["01.x"].status == "pass", by_id["01.x"].message
    assert by_id["01.weights"].status == "fail" and "could not read" in by_id["01.weights"].message
    assert by_id["01.qkv"].status == "fail" and "could not read" in by_id["01.qkv"].message
    assert by_id["01.scores"].status == "fail" and "NaN" in by_id["01.scores"].message
    assert by_id["01.softmax"].status == "not_done"
    assert by_id["01.outputs"].status == "fail" and by_id["01.outputs"].points == 0
    assert by_id["01.tf_x"].status == "fail"
    assert by_id["01.tf_weights"].status == "fail" and "other inputs" in by_id["01.tf_weights"].message
    assert by_id["01.tf_qkv"].status == "fail"
    assert sum(o.points for o in result.outcomes) == 1
    decided_tf_x = decide(EXS, PLANS, DONE, _blob(_rec("01.tf_x", **right_tf_x), {"t": "done"}), CELLS, 60)
    assert decided_tf_x.outcomes[7].exercise == "01.tf_x" and decided_tf_x.outcomes[7].status == "pass"


def test_truncated_or_garbled_streams_keep_what_came_before():
    good = _blob({"t": "cell", "i": 0}, _rec("01.x", **_x_record()))
    for tail in (b"\x00\x00\x00\xff{", b"\xff\xff\xff\xff", b"\x00\x00\x00\x03abc", b"\x00"):
        result = decide(EXS, PLANS, DONE, good + tail, CELLS, 60)
        assert result.status == "crashed" and "could not read" in result.error
        assert result.outcomes[0].status == "pass"
    frames, problem = split_frames(frame(b"[" * 100_000))
    assert frames == [] and problem


def test_unfinished_runs_keep_earlier_checks_and_say_why():
    blob = _blob({"t": "cell", "i": 0}, _rec("01.x", **_x_record()))
    for header, status, words in [
        ({"state": "timeout"}, "timeout", "still running after 60 s"),
        ({"state": "exited", "exit_code": None, "signal": signal.SIGSEGV}, "crashed", "SIGSEGV"),
        ({"state": "exited", "exit_code": 0, "signal": None}, "crashed", "exited early"),
        ({"state": "overflow"}, "crashed", "too much data"),
        ({"state": "sandbox_died", "message": "gone"}, "crashed", "gone"),
    ]:
        result = decide(EXS, PLANS, header, blob, CELLS, 60)
        assert result.status == status and words in result.error and "cell 2" in result.error, result.error
        assert [o.status for o in result.outcomes[:2]] == ["pass", "not_done"]
        assert "Not reached" in result.outcomes[1].message


@pytest.mark.parametrize("bad", [
    None, [], {"shape": [2], "f8": "AAAA"}, {"shape": [-1], "f8": ""}, {"shape": [1] * 9, "f8": "A" * 12},
    {"shape": [True], "f8": ""}, {"shape": [2**40, 2**40], "f8": ""}, {"shape": [1], "f8": 5},
    {"shape": [1], "f8": "AAAAAAAAAA=="}, {"shape": [1], "f8": "AAAAAAAAAAA=", "extra": 1},
])
def test_decode_array_rejects_malformed_arrays(bad):
    with pytest.raises(ProtocolError):
        decode_array(bad)


def test_arrays_travel_exactly_with_nan_and_inf():
    for a in (np.array([[1.5, -np.inf], [np.nan, 1e-300]]), np.array(3.25), np.arange(24.0).reshape(2, 3, 4).T):
        b = decode_array(json.loads(json.dumps(encode_array(a))))
        assert b.shape == a.shape and np.array_equal(a, b, equal_nan=True)
    assert base64.b64decode(encode_array(np.zeros(0))["f8"]) == b""


# ----------------------------------------------------------------------------- resuming, in the sandbox


@needs_bwrap
def test_resume_skips_graded_files_regrades_changed_ones_and_force(tmp_path):
    root, out = tmp_path / "subs", tmp_path / "grades"
    same = good_minimal()
    place(root, "ann", same)
    place(root, "bob", same)  # identical files, two students: two submissions
    place(root, "cid", minimal(*TORCH_ANSWERS[:2]))
    args = [root, "--out", out, "--jobs", "2", "--timeout", "60", "--memory", "1024", "--quiet"]

    first = run_grader(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = rows_by_student(out)
    assert {s: (r["status"], r["score"]) for s, r in rows.items()} == {
        "ann": ("graded", 7), "bob": ("graded", 7), "cid": ("graded", 2)}
    assert rows["ann"]["submission_sha256"] == rows["bob"]["submission_sha256"]
    assert outcome(rows["cid"], "01.qkv")["status"] == "not_done"

    second = run_grader(*args)
    assert second.returncode == 0 and len(read_rows(out)) == 3
    assert "3 already in the journal" in second.stderr

    place(root, "cid", good_minimal())  # cid hands in a better version
    (out / "grades.csv").unlink()
    third = run_grader(*args)
    assert third.returncode == 0 and len(read_rows(out)) == 4
    assert f"cid,{NB_ID},7,{MAX_SCORE},graded,0" in (out / "grades.csv").read_text()
    assert "7 / 14" in (out / "feedback" / "cid" / f"{NB_ID}.html").read_text(encoding="utf-8")

    forced = run_grader(*args, "--force")
    assert forced.returncode == 0 and len(read_rows(out)) == 7


def _zygotes_of(uid_base: int) -> list[int]:
    """Processes still running the zygote of a grader whose sandbox uid base is known."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"helpers.grading.zygote" in cmd and f'"uid": {uid_base}'.encode() in cmd:
            found.append(int(pid))
    return found


@needs_bwrap
def test_sigkill_mid_batch_loses_nothing_and_grades_nothing_twice(tmp_path):
    root, out = tmp_path / "subs", tmp_path / "grades"
    slow = minimal("import time\ntime.sleep(0.7)", *interleaved())
    students = [f"s{i}" for i in range(6)]
    for s in students:
        place(root, s, slow)
    args = ["-m", "helpers.grade", str(root), "--out", str(out), "--jobs", "1", "--timeout", "60", "--quiet"]
    proc = subprocess.Popen([PYTHON, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = out / "results.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_bytes().count(b"\n") >= 2:
            break
        if proc.poll() is not None:
            pytest.fail(f"the grader finished before it could be killed: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    proc.stderr.close()
    uid_base = uid_base_for(proc.pid)
    for _ in range(100):  # the sandbox dies with the grader (bwrap --die-with-parent)
        if not _zygotes_of(uid_base):
            break
        time.sleep(0.1)
    assert _zygotes_of(uid_base) == []

    before = [json.loads(line) for line in journal.read_bytes().split(b"\n")[:-1]]  # complete lines only
    assert 2 <= len(before) < len(students)
    rerun = run_grader(*args[2:])
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = read_rows(out)
    assert sorted(r["student"] for r in after) == students  # each exactly once
    assert after[: len(before)] == before
    assert all((r["status"], r["score"]) == ("graded", 7) for r in after)
    assert len((out / "grades.csv").read_text().splitlines()) == 1 + len(students)


# ----------------------------------------------------------------------------- --no-sandbox


def test_no_sandbox_warns_loudly_and_still_kills_what_a_submission_leaves(tmp_path):
    root, out = tmp_path / "subs", tmp_path / "grades"
    marker = tmp_path / "daemon_was_here"
    place(root, "ann", good_minimal())
    place(root, "dan", minimal(f"""
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(2)
        open({str(marker)!r}, "w").write("still alive")
    os._exit(0)
"""))
    result = run_grader(root, "--out", out, "--no-sandbox", "--jobs", "1", "--timeout", "60", "--quiet")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "WITHOUT the bubblewrap sandbox" in result.stderr
    rows = rows_by_student(out)
    assert (rows["ann"]["status"], rows["ann"]["score"], rows["ann"]["sandboxed"]) == ("graded", 7, False)
    time.sleep(3)
    assert not marker.exists()  # the zygote, their subreaper, killed what the notebook left running


def test_solution_notebook_is_recognised_without_running(tmp_path):
    sub = grade.prepare(grade.Found.at("x", SOLUTION), grade.known_notebooks())
    assert (sub.status, sub.notebook) == (None, NB_ID) and len(sub.cells) > 10
    assert all(isinstance(c.source, str) for c in sub.cells)
    assert TORCH_IDS[0] in {ex.id for ex in spec.exercises_for(sub.notebook)}


def test_frames_are_length_prefixed():
    assert frame(b"abc") == struct.pack(">I", 3) + b"abc"


SCAN = """
import ctypes
pattern = bytes.fromhex({hex!r})
found = 0
for line in open("/proc/self/maps").read().splitlines():
    addr, perms = line.split()[:2]
    lo, hi = (int(a, 16) for a in addr.split("-"))
    if "r" in perms and "w" in perms and hi - lo < 2**31:
        found += ctypes.string_at(lo, hi - lo).count(pattern)
clean = found == 1  # only the pattern object above: nothing of the previous submission is in memory
"""


@needs_bwrap
def test_one_worker_leaves_no_trace_and_a_dead_sandbox_is_restarted(tmp_path):
    import threading

    from helpers.grading.sandbox import Settings, Worker

    secret = "QWZX-" + "the code of student A-" + str(os.getpid())
    ann = place(tmp_path, "ann", minimal("\n".join(f"# {secret} {i}" for i in range(1000)), *interleaved()))
    eve = place(tmp_path, "eve", minimal(SCAN.format(hex=secret.encode().hex()),
                                         "if clean:\n    x = torch.tensor(x_list, dtype=torch.float32)",
                                         'check("01.x")'))
    slow = place(tmp_path, "bob", minimal("import time\ntime.sleep(30)", *interleaved()))
    known = grade.known_notebooks()
    settings = Settings(timeout=60, memory_mb=1024, frameworks=("torch",), nproc=64)
    worker = Worker(0, settings)
    try:
        row = grade.grade_one(worker, grade.prepare(grade.Found.at("ann", ann), known), settings)
        assert (row["status"], row["score"]) == ("graded", 7)
        # the next submission in the same sandbox searches its (forked) memory for ann's code
        row = grade.grade_one(worker, grade.prepare(grade.Found.at("eve", eve), known), settings)
        assert (row["status"], row["score"]) == ("graded", 1), row

        first = worker.proc.pid
        # the whole sandbox dies in the middle of a submission (as if the machine's OOM killer hit it)
        threading.Timer(2.0, lambda: os.killpg(first, signal.SIGKILL)).start()
        row = grade.grade_one(worker, grade.prepare(grade.Found.at("bob", slow), known), settings)
        assert row["status"] == "crashed" and "sandbox stopped" in row["error"], row
        row = grade.grade_one(worker, grade.prepare(grade.Found.at("ann", ann), known), settings)
        assert (row["status"], row["score"], worker.restarts) == ("graded", 7, 1)
        assert worker.proc.pid != first
    finally:
        worker.close()


def _carried_softmax_record():
    """01.softmax right on top of wrong scores: the student's own upstream, replays right."""
    ex = spec.get("01.softmax")
    wrong = np.array([[2.0, 4, 4], [4, 16, 12], [4, 12, 9]])
    e = np.exp(wrong - wrong.max(axis=1, keepdims=True))
    return {"answers": _answers("01.softmax", {"attn_weights": encode_array(e / e.sum(axis=1, keepdims=True))}),
            "upstream": {"attn_scores": encode_array(wrong)}, "replay": {"available": True, "error": None},
            "facts": {"framework": {"attn_weights": "torch"}, "dtype": {"attn_weights": "float32"}}}, ex


def test_a_right_step_on_a_wrong_earlier_answer_is_credited_unless_carry_forward_is_off():
    record, ex = _carried_softmax_record()
    blob = _blob(_rec("01.softmax", **record), {"t": "done"})
    on = {o.exercise: o for o in decide(EXS, PLANS, DONE, blob, CELLS, 60).outcomes}["01.softmax"]
    assert on.status == "carried" and on.points == ex.points and "01.scores" in on.message
    assert on.as_dict()["carried_forward"] is True
    off = {o.exercise: o for o in decide(EXS, PLANS, DONE, blob, CELLS, 60, carry_forward=False).outcomes}
    assert off["01.softmax"].status == "carried" and off["01.softmax"].points == 0
    assert "not given" in off["01.softmax"].message


# ------------------------------------------------------------- process probes, as the sandbox receives them


def _through_the_sandbox_protocol(ex_id: str, namespace: dict) -> spec.Outcome:
    """The plan as the grader sends it (encoded, JSON), collected as the sandbox's recorder does, the record
    sent back (encoded, JSON) and judged by the grader: everything but the processes."""
    from helpers.grading.protocol import decode_value, encode_record, encode_value
    from helpers.grading.verdict import judge_record
    from helpers.runtime.collect import collect

    ex = spec.get(ex_id)
    plan = spec.make_plan(ex, seeds=list(range(spec.seeds_needed(ex))))
    sent = decode_value(json.loads(json.dumps(encode_value(plan.data))))
    record = collect(sent, namespace)
    return judge_record(ex, json.loads(json.dumps(encode_record(record))), plan)


def _flash(tile_queries_only: bool):
    def flash(q, k, v, block_size):
        out = np.zeros((q.shape[0], v.shape[1]))
        for i in range(0, q.shape[0], block_size):
            qi = q[i:i + block_size]
            if tile_queries_only:  # every key at once, one block of queries at a time
                s = qi @ k.T / np.sqrt(q.shape[1])
                w = np.exp(s - s.max(axis=1, keepdims=True))
                out[i:i + block_size] = (w @ v) / w.sum(axis=1, keepdims=True)
                continue
            m, total, acc = np.full(len(qi), -np.inf), np.zeros(len(qi)), np.zeros((len(qi), v.shape[1]))
            for j in range(0, k.shape[0], block_size):
                s = qi @ k[j:j + block_size].T / np.sqrt(q.shape[1])
                new = np.maximum(m, s.max(axis=1))
                w, fade = np.exp(s - new[:, None]), np.exp(m - new)
                total, acc, m = total * fade + w.sum(axis=1), acc * fade[:, None] + w @ v[j:j + block_size], new
            out[i:i + block_size] = acc / total[:, None]
        return out
    return flash


def test_the_grader_watches_how_blockwise_attention_takes_its_keys():
    """The key-block probe's arrays are made in the sandbox from the plan's plain arrays (they used to be
    watching arrays only in the student's kernel, and plain ones in the grader's)."""
    right = _through_the_sandbox_protocol("07.flash", {"flash_attention": _flash(False)})
    assert right.status == "pass", right.message
    tiled = _through_the_sandbox_protocol("07.flash", {"flash_attention": _flash(True)})
    assert tiled.status == "fail" and tiled.diagnosis == "keys_not_in_blocks", tiled.message


def test_the_grader_sees_a_causal_function_compute_blocks_above_the_diagonal():
    flash = _flash(False)

    def causal(q, k, v, block_size):  # blockwise, but every key block computed, the future hidden inside each
        n, out = q.shape[0], np.zeros((q.shape[0], v.shape[1]))
        for i in range(0, n, block_size):
            rows = np.arange(i, min(i + block_size, n))
            s = q[rows] @ k.T / np.sqrt(q.shape[1])  # noqa: F841 — the scores of the future, computed and unused
            for r in rows:
                out[r] = flash(q[r:r + 1], k[:r + 1], v[:r + 1], block_size)[0]
        return out

    outcome = _through_the_sandbox_protocol("07.causal_flash", {"causal_flash_attention": causal})
    assert outcome.status == "fail" and outcome.diagnosis == "future_blocks_computed", outcome.message


_MODULE_CELL = """
class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_len, dropout=0.0):
        super().__init__()
        self.num_heads, self.dropout = num_heads, dropout
        for name in ("w_query", "w_key", "w_value", "w_out"):
            setattr(self, name, nn.Parameter(torch.randn(d_model, d_model) SCALE))
        self.register_buffer("causal_mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1))

    def forward(self, x, lengths, keep=None):
        b, seq, d = x.shape
        h = self.num_heads
        q, k, v = ((x @ w).reshape(b, seq, h, d // h).transpose(1, 2) for w in (self.w_query, self.w_key, self.w_value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h)
        hidden = self.causal_mask[:seq, :seq] | (torch.arange(seq) >= lengths[:, None])[:, None, None, :]
        weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)
        if self.training and self.dropout > 0:
            if keep is None:
                keep = (torch.rand_like(weights) >= self.dropout).float()
            weights = weights * keep / (1 - self.dropout)
        return (weights @ v).transpose(1, 2).reshape(b, seq, d) @ self.w_out

mhsa = MultiHeadSelfAttention(d_model=x_pad.shape[-1], num_heads=num_heads, max_len=8, dropout=p_drop)
with torch.no_grad():
    for name, w in [("w_query", w_query), ("w_key", w_key), ("w_value", w_value), ("w_out", w_out)]:
        getattr(mhsa, name).copy_(w)
mhsa.eval()
out_eval = mhsa(x_pad, lengths_pad, keep_draw)
mhsa.train()
out_train = mhsa(x_pad, lengths_pad, keep_draw)
"""


@pytest.mark.parametrize("scale, diagnosis", [("/ math.sqrt(d_model)", None), ("", "init_unscaled"),
                                              ("* 0", "init_not_random")])
def test_the_grader_judges_how_a_module_starts_its_weights(scale, diagnosis):
    """06.module: the cell overwrites the weights, so a new module is made in the sandbox to see their start."""
    torch = pytest.importorskip("torch")
    import math

    ex = spec.get("06.module")
    cell = _MODULE_CELL.replace("SCALE", scale)
    ns = {"torch": torch, "nn": torch.nn, "math": math}
    for name, value in ex.inputs().items():  # the notebook's values, in the dtypes it has them
        ns[name] = torch.from_numpy(np.array(value, dtype=np.float32 if value.dtype.kind == "f" else None)) \
            if isinstance(value, np.ndarray) else value
    exec(cell, ns)
    from helpers.grading.protocol import decode_value, encode_record, encode_value
    from helpers.grading.verdict import judge_record
    from helpers.runtime.collect import collect

    plan = spec.make_plan(ex, seeds=list(range(spec.seeds_needed(ex))))
    record = collect(decode_value(json.loads(json.dumps(encode_value(plan.data)))), ns, cell=cell)
    outcome = judge_record(ex, json.loads(json.dumps(encode_record(record))), plan)
    assert (outcome.status, outcome.diagnosis) == (("pass", None) if diagnosis is None else ("fail", diagnosis)), \
        outcome.message


def _value_step_through_the_protocol(ex_id: str, namespace: dict, cell: str) -> spec.Outcome:
    """A value step: the student's cell replayed in the sandbox on the plan's inputs, judged by the grader."""
    from helpers.grading.protocol import decode_value, encode_record, encode_value
    from helpers.grading.verdict import judge_record
    from helpers.runtime.collect import collect

    ex = spec.get(ex_id)
    plan = spec.make_plan(ex, seeds=list(range(spec.seeds_needed(ex))))
    exec(cell, namespace)
    record = collect(decode_value(json.loads(json.dumps(encode_value(plan.data)))), namespace, cell=cell)
    return judge_record(ex, json.loads(json.dumps(encode_record(record))), plan)


def test_the_grader_names_a_cell_that_overwrites_a_later_read_variable_and_a_list_handed_in():
    """What the sandbox records about names bound anew (or deleted) and about containers reaches the verdict."""
    torch = pytest.importorskip("torch")
    import math

    from helpers.course.samples import answer_namespace

    ex = spec.get("09.decode")
    base = {"torch": torch, "math": math, "F": torch.nn.functional, "n": 6, "keys": torch.zeros(6, 4),
            "cached_attention": lambda q, k, v: torch.softmax(q @ k.T / math.sqrt(k.shape[-1]), dim=-1) @ v}
    loop = ("k_cache, v_cache, rows = [], [], []\nfor {i} in range(len(x_seq)):\n"
            "    h = x_seq[{i}:{i} + 1] + pos_table[{i}:{i} + 1]\n"
            "    k_cache.append(h @ w_key)\n    v_cache.append(h @ w_value)\n"
            "    rows.append(cached_attention(h @ w_query, torch.cat(k_cache), torch.cat(v_cache)))\n")
    right = _value_step_through_the_protocol("09.decode", answer_namespace(ex) | base,
                                             loop.format(i="t") + "decoded = torch.cat(rows)")
    assert right.status == "pass", right.message
    clobbered = _value_step_through_the_protocol("09.decode", answer_namespace(ex) | base,
                                                 loop.format(i="n") + "decoded = torch.cat(rows)")
    assert (clobbered.status, clobbered.diagnosis) == ("fail", "overwrites_variable") and "`n`" in clobbered.message
    listed = _value_step_through_the_protocol("09.decode", answer_namespace(ex) | base, loop.format(i="t") +
                                              "decoded = rows")
    assert (listed.status, listed.diagnosis) == ("fail", "wrong_framework") and "list of" in listed.message
    deleted = _value_step_through_the_protocol("09.decode", answer_namespace(ex) | base, loop.format(i="t") +
                                               "decoded = torch.cat(rows)\ndel x_seq")
    assert (deleted.status, deleted.diagnosis) == ("fail", "overwrites_variable") and "deletes `x_seq`" in \
        deleted.message, deleted.message


def test_the_grader_names_an_earlier_answer_undone_and_an_input_of_another_framework():
    """Simulation 5: the sandbox's record of an earlier step's answer bound anew, and of the frameworks of the
    inputs a cell starts from, reaches the verdict as in the notebook's own check."""
    torch = pytest.importorskip("torch")
    import numpy as np

    from helpers.course.samples import answer_namespace

    ex = spec.get("01.softmax")
    shifted = _value_step_through_the_protocol(
        "01.softmax", answer_namespace(ex, None, "torch") | {"torch": torch},
        "attn_scores = attn_scores - attn_scores.max(dim=-1, keepdim=True).values\n"
        "attn_weights = torch.softmax(attn_scores, -1)")
    assert shifted.diagnosis == "overwrites_variable" and "01.scores" in shifted.message, shifted.message
    ex = spec.get("01.outputs_rounded")
    namespace = answer_namespace(ex, None, "torch") | {"torch": torch}
    namespace["rounded_weights"] = np.asarray(namespace["rounded_weights"])
    namespace["values"] = np.asarray(namespace["values"])
    numpy_in = _value_step_through_the_protocol("01.outputs_rounded", namespace,
                                                "outputs_rounded = rounded_weights @ values")
    assert numpy_in.diagnosis == "wrong_framework" and "starts from your `rounded_weights`" in numpy_in.message, \
        numpy_in.message


def test_the_grader_reads_what_the_code_says_about_an_error():
    """The code's features and the numbers it types in travel from the sandbox, so the grader names the
    notebook's lengths typed in (hard_coded) as the notebook's check does."""
    from helpers.grading.protocol import encode_record
    from helpers.grading.verdict import decode_record

    ex = spec.get("09.padded_cross_attention")
    plan = spec.make_plan(ex, seeds=list(range(spec.seeds_needed(ex))))
    raw = {"error": {"kind": "raised", "message": "`padded_cross_attention` raised RuntimeError: The size of tensor "
                     "a (2) must match the size of tensor b (3) at non-singleton dimension 0"},
           "answers": [ex.expected(plan.inputs[0])],
           "how": {"library_attention": False, "max_of_lengths": False}, "typed_in": [[5, 2], ["x"], "y"]}
    record = decode_record(json.loads(json.dumps(encode_record(raw))), ex, plan)
    assert record["typed_in"] == [[5.0, 2.0]] and record["how"]["max_of_lengths"] is False
    outcome = spec.evaluate(ex, plan, record)
    assert outcome.diagnosis == "hard_coded", outcome.message


def test_the_grader_names_an_earlier_answer_left_in_another_dtype():
    """Simulation 7: a cell that casts an earlier step's answer after using it (`key_1` to float32) makes its own
    replays raise; the grader, as the notebook's check, names the cast answer, not "other inputs"."""
    tf = pytest.importorskip("tensorflow")

    from helpers.course.samples import answer_namespace

    ex = spec.get("04.scores_1")
    namespace = answer_namespace(ex, None, "tensorflow") | {"tf": tf}
    for name in ex.reads:  # the notebook's words are int32
        namespace[name] = tf.cast(namespace[name], tf.int32)
    cast = _value_step_through_the_protocol(
        "04.scores_1", namespace,
        "attn_scores_1 = tf.stack([tf.matmul(query_1, k, transpose_b=True) for k in (key_1, key_2, key_3, key_4)])\n"
        "key_1 = tf.cast(key_1, tf.float32)")
    assert cast.diagnosis == "overwrites_variable" and "float32" in cast.message and "04.qkv_words" in cast.message, \
        cast.message


def test_the_grader_names_a_module_that_ignores_its_input():
    """Simulation 8: a forward that computes from the notebook's `x` through globals() gives the same output for any
    input; the sandbox's module probe reports it and the grader names it as the notebook's check does."""
    torch = pytest.importorskip("torch")

    from helpers.course.samples import answer_namespace

    ex = spec.get("02.sa_v1")
    namespace = answer_namespace(ex, None, "torch") | {"torch": torch, "nn": torch.nn}

    def self_attention(x, w_query, w_key, w_value):
        q, k, v = x @ w_query, x @ w_key, x @ w_value
        return torch.softmax(q @ k.T / k.shape[-1] ** 0.5, dim=-1) @ v

    namespace.update(self_attention=self_attention, d_model=3, d_k=2)
    cell = ("class SelfAttentionV1(nn.Module):\n"
            "    def __init__(self, d_model, d_k):\n"
            "        super().__init__()\n"
            "        self.w_query = nn.Parameter(torch.rand(d_model, d_k))\n"
            "        self.w_key = nn.Parameter(torch.rand(d_model, d_k))\n"
            "        self.w_value = nn.Parameter(torch.rand(d_model, d_k))\n\n"
            "    def forward(self, inputs):\n"
            "        return self_attention(globals()['x'], self.w_query, self.w_key, self.w_value)\n\n\n"
            "_ = torch.manual_seed(123)\nsa_v1 = SelfAttentionV1(d_model, d_k)\noutputs_v1 = sa_v1(x)\n")
    outcome = _value_step_through_the_protocol("02.sa_v1", namespace, cell)
    assert outcome.diagnosis == "reads_globals" and "whatever input" in outcome.message, outcome.message


def test_the_grader_names_an_input_changed_through_a_view():
    """Simulation 38: what the sandbox records about a view the cell wrote into (02's `query = x[1]`, then
    `query.zero_()`) reaches the verdict as in the notebook's own check; a fresh start is right."""
    torch = pytest.importorskip("torch")
    from helpers.course.samples import answer_namespace

    ex = spec.get("02.context_2_simple")
    namespace = answer_namespace(ex, None, "torch") | {"torch": torch}
    namespace["x"] = torch.as_tensor(namespace["x"], dtype=torch.float32).clone()
    namespace["query"] = namespace["x"][1]
    loop = "for i, x_i in enumerate(x):\n    context_vec_2_simple += attn_weights_2[i] * x_i\n"
    through = _value_step_through_the_protocol("02.context_2_simple", namespace,
                                               "context_vec_2_simple = query.zero_()\n" + loop)
    assert (through.status, through.diagnosis) == ("fail", "mutates_input") and "through `query`" in \
        through.message, through.message
    namespace = answer_namespace(ex, None, "torch") | {"torch": torch}
    namespace["x"] = torch.as_tensor(namespace["x"], dtype=torch.float32).clone()
    namespace["query"] = namespace["x"][1]
    right = _value_step_through_the_protocol("02.context_2_simple", namespace,
                                             "context_vec_2_simple = torch.zeros_like(query)\n" + loop)
    assert right.status == "pass", right.message


def test_the_grader_names_a_module_whose_weights_are_float64():
    """Simulation 38: 02.sa_v1 with float64 weights and its output cast back to float32 passed. The dtypes the sandbox
    records about the module's parameters reach the verdict; float32 weights are right."""
    torch = pytest.importorskip("torch")
    from helpers.course.samples import answer_namespace

    cell = ("class SelfAttentionV1(torch.nn.Module):\n"
            "    def __init__(self, d_model, d_k):\n"
            "        super().__init__()\n"
            "        self.w_query = torch.nn.Parameter(torch.rand(d_model, d_k){cast})\n"
            "        self.w_key = torch.nn.Parameter(torch.rand(d_model, d_k){cast})\n"
            "        self.w_value = torch.nn.Parameter(torch.rand(d_model, d_k){cast})\n\n"
            "    def forward(self, x):\n"
            "        q, k, v = x.to(self.w_query.dtype) @ self.w_query, x.to(self.w_key.dtype) @ self.w_key, "
            "x.to(self.w_value.dtype) @ self.w_value\n"
            "        return (torch.softmax(q @ k.T / k.shape[-1] ** 0.5, dim=-1) @ v).float()\n\n"
            "_ = torch.manual_seed(123)\nsa_v1 = SelfAttentionV1(d_model, d_k)\noutputs_v1 = sa_v1(x)\n")
    ex = spec.get("02.sa_v1")

    def through(cast: str) -> spec.Outcome:
        namespace = answer_namespace(ex, None, "torch") | {"torch": torch}
        namespace["x"] = torch.as_tensor(namespace["x"], dtype=torch.float32)
        namespace.setdefault("d_model", namespace["x"].shape[1])
        namespace.setdefault("d_k", 2)
        return _value_step_through_the_protocol("02.sa_v1", namespace, cell.format(cast=cast))

    wide = through(".double()")
    assert (wide.status, wide.diagnosis) == ("fail", "wrong_dtype") and "float64" in wide.message, wide.message
    right = through("")
    assert right.status == "pass", right.message


def test_the_grader_names_layers_not_started_as_nn_linear_draws_them():
    """Simulation 40: 02.sa_v2 with its query and key layers zero-initialised (or scaled by 100) passed; the weights'
    ranges the sandbox records reach the verdict. Layers left as nn.Linear draws them, in any order, are right."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    def namespace(start, order=("w_query", "w_key", "w_value")):
        class SelfAttentionV2(nn.Module):
            def __init__(self, d_model, d_k):
                super().__init__()
                for name in order:
                    setattr(self, name, nn.Linear(d_model, d_k, bias=False))
                with torch.no_grad():
                    start(self)

            def forward(self, x):
                q, k, v = self.w_query(x), self.w_key(x), self.w_value(x)
                return torch.softmax(q @ k.T / k.shape[-1] ** 0.5, dim=-1) @ v

        def attention_v2_with(x, w_query, w_key, w_value):
            sa = SelfAttentionV2(*w_query.shape)
            with torch.no_grad():
                for name, w in (("w_query", w_query), ("w_key", w_key), ("w_value", w_value)):
                    getattr(sa, name).weight.copy_(w.T)
            return sa(x)

        torch.manual_seed(123)
        return {"attention_v2_with": attention_v2_with, "sa_v2": SelfAttentionV2(3, 2)}

    def zero(sa):
        sa.w_query.weight.zero_()
        sa.w_key.weight.zero_()

    for start, found in ((zero, "is 0"), (lambda sa: sa.w_value.weight.mul_(100), "beyond nn.Linear's")):
        outcome = _through_the_sandbox_protocol("02.sa_v2", namespace(start))
        assert outcome.status == "fail" and outcome.diagnosis.startswith("init_") and found in outcome.message, \
            outcome.message
    right = _through_the_sandbox_protocol("02.sa_v2", namespace(lambda sa: None, ("w_value", "w_key", "w_query")))
    assert right.status == "pass", right.message
