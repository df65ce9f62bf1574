"""Attacks on the grader: each gains no point, harms no other submission, gets an honest status.

One class of hostile and honest students is graded ONCE (in the sandbox, two workers), then
each test reads its row. Good submissions sit in the same batch: full solutions (which also
prove that PyTorch AND TensorFlow work in a process forked from the warm zygote) and minimal
PyTorch ones (7 of 14 points: the TensorFlow half is not done).

Some attacks report what they saw inside the sandbox through points: a cell assigns a correct
answer only if, say, the network was unreachable — so a point there is evidence, not a gain.
"""

from __future__ import annotations

import csv
import html
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from grading_fixtures import (
    EXERCISE,
    FILE,
    MAX_SCORE,
    NB_ID,
    SOLUTION,
    TORCH_ANSWERS,
    TORCH_CHECKS,
    TORCH_IDS,
    interleaved,
    minimal,
    outcome,
    pad,
    place,
    read_rows,
    run_grader,
    with_stored_output,
    write,
)
from nbformat.v4 import new_code_cell, new_markdown_cell

from helpers import grade
from helpers.course import spec
from helpers.grading import report
from helpers.grading.sandbox import probe_bwrap
from paths import ROOT

_NO_SANDBOX = probe_bwrap()
pytestmark = pytest.mark.skipif(_NO_SANDBOX is not None, reason=f"no sandbox here: {_NO_SANDBOX}")

spec._load_all()
TIMEOUT = 20
FN_ID = "05.softmax"  # a NumPy function exercise: softmax(scores)
FN_EXAMPLE = spec.get(FN_ID).inputs(None)["scores"] if FN_ID in spec.REGISTRY else None
GOOD_FULL = ["good_full_1", "good_full_2", "good_full_3"]
GOOD_MINIMAL = ["good_minimal_1", "good_minimal_2"]


class Listener:
    """A TCP listener on the host's loopback: a sandboxed notebook must never reach it."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def _class(root: Path, out: Path, port: int) -> None:
    # ---- honest students
    for s in GOOD_FULL:
        place(root, s, SOLUTION)
    for s in GOOD_MINIMAL:
        place(root, s, minimal(*interleaved()))
    place(root, "untouched_exercise", EXERCISE)
    place(root, "renamed_file", SOLUTION, name="homework_final (2).ipynb")

    # ---- it outlives its notebook: a daemon that kills every process of its uid, forever
    daemon = pad(
        """
import os, signal, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(3)
        for _ in range(1200):
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            time.sleep(0.05)
    os._exit(0)
os.waitpid(pid, 0)
""",
        300,  # long: graded first, so later submissions share its worker (and its uid)
    )
    place(root, "daemon", minimal(daemon, *TORCH_CHECKS))

    # ---- monkeypatching the checker inside the notebook
    place(root, "patch_helpers", minimal("""
import helpers, helpers.checks, helpers.spec
from helpers.spec import Outcome

def fake_evaluate(ex, got, inputs):
    return Outcome(ex.id, "pass", ex.points, ex.points, "correct")

helpers.spec.evaluate = fake_evaluate
helpers.checks.judge = lambda ex, ns, rng=None: fake_evaluate(ex, None, None)
helpers.checks.collect_values = lambda ex, ns: {n: np.zeros((3, 3)) for n in ex.answers}
helpers.checks._observer = None

def check(exercise_id, namespace=None):
    print(f"✅ {exercise_id} — correct.")

helpers.check = helpers.checks.check = check
x = "a string, not a tensor"
""", *TORCH_CHECKS))
    zeros = ("x = torch.zeros(3, 4)\nw_key = w_query = w_value = torch.zeros(4, 3)\n"
             "keys = queries = values = attn_scores = attn_weights = outputs = outputs_rounded = torch.zeros(3, 3)")
    place(root, "patch_numpy", minimal("""
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.broadcast(np.asarray(a), np.asarray(b)).shape, bool)
np.array_equal = lambda *a, **k: True
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
""", zeros, *TORCH_CHECKS))
    place(root, "always_equal", minimal("""
class AlwaysEqual:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __array__(self, dtype=None, copy=None):
        return np.zeros((3, 3))

class Sneaky(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.__eq__, torch.isclose):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

x = AlwaysEqual()
w_key = w_query = w_value = torch.zeros(4, 3).as_subclass(Sneaky)
keys = queries = values = AlwaysEqual()
attn_scores = attn_weights = torch.zeros(3, 3).as_subclass(Sneaky)
outputs = outputs_rounded = [[AlwaysEqual()] * 3] * 3
""", *TORCH_CHECKS))

    # ---- printing a fake result, writing into the grader's channels
    fake_row = {"student": "fake_output", "notebook": NB_ID, "submission_sha256": "0" * 64, "status": "graded",
                "score": MAX_SCORE, "max_score": MAX_SCORE, "exercises": [], "error": None}
    place(root, "fake_output", minimal(f"""
import json, os, sys
for i in {TORCH_IDS!r}:
    print(f"✅ {{i}} — correct.")
line = {json.dumps(json.dumps(fake_row))} + "\\n"
print(line)
sys.__stdout__.write(line)
sys.__stdout__.flush()
for fd in range(0, 64):
    try:
        os.write(fd, line.encode())
    except OSError:
        pass
""", *TORCH_CHECKS))

    # ---- leaving early, crashing, hanging
    place(root, "sys_exit", minimal(*interleaved()[:4], "import sys\nsys.exit(0)", "raise SystemExit(3)",
                                    "exit()", *interleaved()[4:]))
    place(root, "os_exit", minimal(*interleaved()[:6], "import os\nos._exit(0)", *interleaved()[6:]))
    place(root, "segfault", minimal(*interleaved()[:2], "import ctypes\nctypes.string_at(0)", *interleaved()[2:]))
    place(root, "infinite_loop", minimal(*interleaved()[:2], "while True:\n    pass", *interleaved()[2:]))

    # ---- resources: memory and processes (the notebook goes on once the limit says no)
    place(root, "memory_bomb", minimal("""
blocks, hit_limit = [], False
try:
    for _ in range(100):  # 6.4 GB if nothing stopped it
        blocks.append(bytearray(64 << 20))
except MemoryError:
    hit_limit = True
del blocks
try:
    huge = torch.empty(10**11)
except (RuntimeError, MemoryError):
    pass
assert hit_limit
""", *interleaved()))
    place(root, "fork_bomb", minimal("""
import os, time
children = []
try:
    for _ in range(5000):
        pid = os.fork()
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children.append(pid)
except OSError:
    pass
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
assert len(children) < 5000
""", *interleaved()))

    # ---- the network: points only if nothing could be reached
    place(root, "network", minimal(f"""
import errno, socket
seen = {{}}
for name, addr in [("local", ("127.0.0.1", {port})), ("external", ("1.1.1.1", 53)), ("external2", ("8.8.8.8", 443))]:
    try:
        s = socket.create_connection(addr, timeout=3)
        s.sendall(b"leak")
        s.close()
        seen[name] = "connected"
    except OSError as e:
        seen[name] = e.errno
try:
    socket.getaddrinfo("example.com", 80)
    seen["dns"] = "resolved"
except OSError:
    seen["dns"] = "failed"
if seen["local"] == errno.ECONNREFUSED:
    x = torch.tensor(x_list, dtype=torch.float32)
if seen["external"] == seen["external2"] == errno.ENETUNREACH and seen["dns"] == "failed":
    w_key = torch.tensor(w_key_list, dtype=torch.float32)
    w_query = torch.tensor(w_query_list, dtype=torch.float32)
    w_value = torch.tensor(w_value_list, dtype=torch.float32)
""", 'check("01.x")', 'check("01.weights")'))

    # ---- reading other students' files and the solutions, writing the results
    other = root / GOOD_FULL[0] / SOLUTION.name
    targets = [str(other), str(SOLUTION), str(out / "results.jsonl"), str(root), "/proc/1/mem", "/proc/1/environ"]
    writes = [str(out / "results.jsonl"), str(out / "pwned.txt"), str(root / "pwned.txt"), "/tmp/pwned.txt",
              str(SOLUTION.parent / "pwned.txt")]
    place(root, "snoop", minimal(f"""
import os
opened, wrote = [], []
for t in {targets!r}:
    try:
        with open(t, "rb") as f:
            f.read(100)
        opened.append(t)
    except OSError:
        pass
    try:
        os.listdir(t)
        opened.append(t)
    except OSError:
        pass
for t in {writes!r}:
    try:
        with open(t, "a") as f:
            f.write('{{"student": "snoop", "notebook": "{NB_ID}", "score": 14}}\\n')
        wrote.append(t)
    except OSError:
        pass
signalled = []
for sig in (9, 15, 19):  # the zygote (PID 1 of the sandbox) ignores its children
    try:
        os.kill(1, sig)
        signalled.append(sig)
    except OSError:
        pass
if not opened and not wrote and not signalled:
    x = torch.tensor(x_list, dtype=torch.float32)
""", 'check("01.x")'))

    # ---- cells deleted, reordered, changed in type; huge outputs
    place(root, "checks_deleted", minimal(*TORCH_ANSWERS))
    place(root, "reordered", minimal(*TORCH_CHECKS, *TORCH_ANSWERS))
    changed = minimal(*TORCH_CHECKS)
    changed.cells[2:2] = [new_markdown_cell(a) for a in TORCH_ANSWERS]
    place(root, "changed_type", changed)
    place(root, "huge_stored_output", with_stored_output(minimal(*interleaved()), "spam " * (6 << 20)))
    place(root, "huge_printing", minimal("for i in range(300_000):\n    print('spam', i)", *interleaved()))
    place(root, "magics", minimal("""
%matplotlib inline
import matplotlib.pyplot as plt
!echo hello from a shell
%time y = 1
_ = plt.plot([1, 2, 3])
plt.show()
name = input("your name? ")
""", *interleaved()))
    # ---- a function exercise: called inside the sandbox on inputs drawn from the grader's seeds
    if FN_ID in spec.REGISTRY:
        fn_nb = spec.get(FN_ID).notebook
        stable = ("def softmax(scores):\n    e = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
                  "    return e / e.sum(axis=-1, keepdims=True)")
        fn_cases = {
            "fn_good": stable,
            "fn_unstable": "def softmax(scores):\n    e = np.exp(scores)\n    return e / e.sum(axis=-1, keepdims=True)",
            "fn_hardcoded": stable + "\n_example = softmax(np.array(" + repr(FN_EXAMPLE.tolist()) + "))\n"
            "def softmax(scores):\n    return _example  # right on the notebook's example only",
            "fn_exit": "def softmax(scores):\n    import sys\n    sys.exit(0)",
            "fn_always_equal": "class Yes:\n    def __eq__(self, other):\n        return True\n"
            "def softmax(scores):\n    return Yes()",
        }
        for student, code in fn_cases.items():
            place(root, student, minimal(code, f'check("{FN_ID}")', notebook_id=fn_nb), name=f"{fn_nb}.ipynb")

    broken = minimal(*interleaved())
    broken.cells.insert(3, new_code_cell("def f(:\n    pass"))
    place(root, "syntax_error", broken)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("attacks")
    root, out = base / "submissions", base / "grades"
    listener = Listener()
    try:
        _class(root, out, listener.port)
        t0 = time.monotonic()
        proc = run_grader(root, "--out", out, "--jobs", "2", "--timeout", TIMEOUT, "--memory", "1024", "--quiet")
        seconds = time.monotonic() - t0
        time.sleep(0.5)
    finally:
        listener.close()
    rows = read_rows(out)
    return {"proc": proc, "rows": {r["student"]: r for r in rows}, "all_rows": rows, "out": out, "root": root,
            "listener": listener, "seconds": seconds}


def test_batch_finishes_with_exit_code_zero_and_one_row_each(graded):
    proc = graded["proc"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    students = {p.name for p in graded["root"].iterdir()}
    assert {r["student"] for r in graded["all_rows"]} == students
    assert len(graded["all_rows"]) == len(students)  # nothing twice, no fake row
    assert all(r["sandboxed"] for r in graded["all_rows"])


def test_good_submissions_keep_full_scores_next_to_the_attacks(graded):
    rows = graded["rows"]
    for s in GOOD_FULL + ["renamed_file"]:  # both frameworks, in processes forked from the warm zygote
        assert (rows[s]["status"], rows[s]["score"], rows[s]["max_score"]) == ("graded", MAX_SCORE, MAX_SCORE), rows[s]
    assert rows["renamed_file"]["notebook"] == NB_ID
    for s in GOOD_MINIMAL + ["huge_stored_output", "huge_printing", "checks_deleted", "syntax_error", "magics"]:
        assert (rows[s]["status"], rows[s]["score"]) == ("graded", 7), rows[s]
        assert all(outcome(rows[s], i)["passed"] for i in TORCH_IDS)
    assert any("SyntaxError" in n for n in rows["syntax_error"]["notes"])
    assert [n.split(" raised ")[1] for n in rows["magics"]["notes"]] == ["EOFError: EOF when reading a line"]


def test_untouched_exercise_notebook_scores_nothing_and_is_not_done(graded):
    row = graded["rows"]["untouched_exercise"]
    assert (row["status"], row["score"]) == ("graded", 0)
    assert {e["status"] for e in row["exercises"]} == {"not_done"}


@pytest.mark.parametrize("student", ["patch_helpers", "patch_numpy", "always_equal", "fake_output", "daemon"])
def test_cheats_gain_nothing(graded, student):
    row = graded["rows"][student]
    # fake_output also wrote garbage into every descriptor, its own result channel included:
    # the grader cannot tell how far it got, and says so
    assert row["status"] == ("crashed" if student == "fake_output" else "graded"), row
    assert row["score"] == 0, row
    assert not any(e["passed"] for e in row["exercises"])


def test_patched_comparisons_are_judged_as_wrong_answers(graded):
    for student in ("patch_numpy", "always_equal"):
        row = graded["rows"][student]
        assert {outcome(row, i)["status"] for i in TORCH_IDS} == {"fail"}, row
    assert "AlwaysEqual" in outcome(graded["rows"]["always_equal"], "01.x")["message"]


def test_fake_result_lines_reach_no_output(graded):
    rows = [r for r in graded["all_rows"] if r["student"] == "fake_output"]
    assert len(rows) == 1 and rows[0]["score"] == 0
    assert "could not read" in rows[0]["error"]
    csv = (graded["out"] / "grades.csv").read_text()
    assert f"fake_output,{NB_ID},0,{MAX_SCORE},crashed" in csv


def test_sys_exit_stops_only_its_cell_as_in_jupyter(graded):
    row = graded["rows"]["sys_exit"]
    assert (row["status"], row["score"]) == ("graded", 7), row
    assert sum("SystemExit" in n for n in row["notes"]) >= 2


def test_os_exit_is_a_crash_and_checks_before_it_count(graded):
    row = graded["rows"]["os_exit"]
    assert (row["status"], row["score"]) == ("crashed", 3), row
    assert "exited early" in row["error"]
    assert [outcome(row, i)["passed"] for i in TORCH_IDS[:3]] == [True] * 3
    assert all(outcome(row, i)["status"] == "not_done" and "Not reached" in outcome(row, i)["message"]
               for i in TORCH_IDS[3:])


def test_segfault_is_a_crash(graded):
    row = graded["rows"]["segfault"]
    assert (row["status"], row["score"]) == ("crashed", 1), row
    assert "SIGSEGV" in row["error"]


def test_infinite_loop_times_out(graded):
    row = graded["rows"]["infinite_loop"]
    assert (row["status"], row["score"]) == ("timeout", 1), row
    assert f"after {TIMEOUT} s" in row["error"]


def test_memory_and_fork_bombs_are_stopped_and_the_notebook_goes_on(graded):
    for student in ("memory_bomb", "fork_bomb"):
        row = graded["rows"][student]
        assert (row["status"], row["score"]) == ("graded", 7), row
        assert not any("AssertionError" in n for n in row["notes"]), row["notes"]


def test_no_network_inside_the_sandbox(graded):
    row = graded["rows"]["network"]
    assert graded["listener"].accepted == 0
    # 01.x: the host's listener was not reachable; 01.weights: no route out and no DNS
    assert outcome(row, "01.x")["passed"] and outcome(row, "01.weights")["passed"], row
    assert row["score"] == 2


def test_no_view_of_other_submissions_solutions_or_results(graded):
    row = graded["rows"]["snoop"]
    assert outcome(row, "01.x")["passed"], row  # every open/listdir/write failed
    out, root = graded["out"], graded["root"]
    assert not (out / "pwned.txt").exists() and not (root / "pwned.txt").exists()
    assert not (SOLUTION.parent / "pwned.txt").exists()
    # the journal holds one row per student; snoop's lines written into it would be rows of their own
    # (snoop's own row quotes its code for the feedback page: that is not a write)
    assert [r["student"] for r in read_rows(out) if "snoop" in json.dumps(r)] == ["snoop"]


def test_reordered_and_retyped_cells_are_graded_as_they_run(graded):
    for student in ("reordered", "changed_type"):
        row = graded["rows"][student]
        assert (row["status"], row["score"]) == ("graded", 0), row
        assert {outcome(row, i)["status"] for i in TORCH_IDS} == {"not_done"}


def test_feedback_pages_exist_and_escape(graded):
    out = graded["out"]
    page = (out / "feedback" / "patch_helpers" / f"{NB_ID}.html").read_text(encoding="utf-8")
    assert "❌" in page or "⏳" in page
    assert "<script" not in page.lower()
    good = (out / "feedback" / GOOD_FULL[0] / f"{NB_ID}.html").read_text(encoding="utf-8")
    assert good.count("✅") == MAX_SCORE


def test_function_exercises_run_on_the_graders_seeds(graded):
    if FN_ID not in spec.REGISTRY:
        pytest.skip(f"{FN_ID} is not registered")
    rows = graded["rows"]
    good = outcome(rows["fn_good"], FN_ID)
    assert good["passed"] and good["points"] == good["max_points"] > 0
    assert outcome(rows["fn_unstable"], FN_ID)["diagnosis"] == "unstable_softmax"
    hard = outcome(rows["fn_hardcoded"], FN_ID)  # right on the example, wrong on the random inputs
    assert not hard["passed"] and hard["diagnosis"] == "reads_globals" and "`_example`" in hard["message"], hard
    assert "SystemExit" in outcome(rows["fn_exit"], FN_ID)["message"]
    assert "Yes" in outcome(rows["fn_always_equal"], FN_ID)["message"]
    for student in ("fn_good", "fn_unstable", "fn_hardcoded", "fn_exit", "fn_always_equal"):
        assert rows[student]["status"] == "graded"
        assert rows[student]["score"] == (good["points"] if student == "fn_good" else 0)


# ============================================================================= issue 15: the class folder itself
#
# What a class folder really contains: links to other students' work, to solutions/, to files of
# the grader's user and to its own outputs; names a spreadsheet would run; names that clean to
# the same folder; hidden entries; two graders at once; a notebook that claims to be another.
# Graded once (its own folder and output); every test reads that run.

SECRET = f"SECRET-MARKER-{os.getpid()}-do-not-leak"
NB02 = "02_dot_products_to_trainable_weights"
FORMULA_NAMES = ["=1+2", "+SUM(A1)", "-2+3", "@cmd", "\tTAB", "\uff1dHYPERLINK(1)"]
FORGED = f"mallory\nalice,{NB_ID},14,{MAX_SCORE},graded"
COLLIDING = ["Nina Z", "Nina Z ", "Nina_Z", "Nina\nZ", "x" * 200 + "A", "x" * 200 + "B"]


def _hostile_class(base: Path) -> dict:
    root, out = base / "submissions", base / "grades"
    host = base / "host"  # files of the grader's user, outside the class folder
    host.mkdir()
    (host / "secret.txt").write_text(f"{SECRET}\nnot a notebook\n")
    write(minimal(f"# {SECRET}\n" + TORCH_ANSWERS[0], *TORCH_CHECKS), host / "secret.ipynb")
    good, two = minimal(*interleaved()), minimal(*interleaved(TORCH_ANSWERS[:2], TORCH_CHECKS[:2]))

    place(root, "alice", good)
    (root / "bob").mkdir()
    os.symlink("../alice/" + FILE, root / "bob" / FILE)  # a file link to another student's notebook
    os.symlink("alice", root / "carol")  # a student folder that is a link to another's
    (root / "dave").mkdir()
    os.symlink(SOLUTION, root / "dave" / FILE)  # to solutions/
    (root / "erin").mkdir()
    os.symlink(host / "secret.txt", root / "erin" / FILE)  # to a file of the grader's user
    (root / "leo").mkdir()
    os.symlink(host / "secret.ipynb", root / "leo" / FILE)  # to a notebook of the grader's user
    (root / "frank").mkdir()
    os.symlink(out / "results.jsonl", root / "frank" / FILE)  # to the grader's own journal
    os.symlink(out, root / "gina")  # to the output folder
    (root / "hank").mkdir()
    os.symlink("../alice", root / "hank" / "work")  # deeper: a folder link, nothing else
    (root / "ivan" / "nested").mkdir(parents=True)
    os.symlink(host / "secret.txt", root / "ivan" / "nested" / FILE)  # deeper: a notebook link
    place(root, "ivan", two)  # … next to a real notebook: the file is graded, the link is not
    (root / "judy").mkdir()
    os.link(root / "alice" / FILE, root / "judy" / FILE)  # a hard link is a file: read as one
    (root / "kate").mkdir()
    os.mkfifo(root / "kate" / FILE)  # a FIFO: must not block the grader
    (root / "olga").mkdir()
    (root / "olga" / FILE).write_text(f"{SECRET} is not JSON")  # unreadable: the error never quotes it
    (root / "peggy").mkdir()
    (root / "peggy" / FILE).write_text(json.dumps({"nbformat": SECRET, "cells": []}))  # JSON, not a notebook
    place(root, "quinn", good, name=f"{NB02}.ipynb")  # notebook 01's cells, a file name of notebook 02
    claims = minimal(*interleaved(TORCH_ANSWERS[:2], TORCH_CHECKS[:2]), notebook_id=NB02)
    place(root, "quinn", claims, name="renamed.ipynb")  # …and 01's checks under 02's metadata id

    for name in FORMULA_NAMES:
        place(root, name, two)
    place(root, FORGED, two)
    place(root, "rita", minimal("x = 1", notebook_id=None), name="=HYPERLINK(1).ipynb")  # a formula notebook name
    for i, name in enumerate(COLLIDING):  # each scores differently: a swapped page shows
        place(root, name, minimal(*interleaved(TORCH_ANSWERS[: i + 1], TORCH_CHECKS[: i + 1])))
    os.mkdir(bytes(root) + b"/r\xffx")  # a name that is not UTF-8
    place(root, "r\udcffx", two)

    place(root, ".hidden_student", good)
    (root / ".git").mkdir()
    place(root, "alice", good, name=".ipynb_checkpoints/" + FILE.replace(".ipynb", "-checkpoint.ipynb"))
    (root / "notes.txt").write_text("read me")
    (root / "nobody").mkdir()
    (root / "\x1b[2Jwipe").mkdir()  # an escape sequence for the instructor's terminal
    return {"root": root, "out": out, "host": host}


@pytest.fixture(scope="class")
def hostile(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile_class")
    made = _hostile_class(base)
    proc = run_grader(made["root"], "--out", made["out"], "--jobs", "2", "--timeout", "60", "--memory", "1024",
                      "--quiet")
    rows = read_rows(made["out"])
    return {**made, "proc": proc, "rows": rows, "by": {r["student"]: r for r in rows}}


def _outputs(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}


class TestHostileClassFolder:
    def test_exit_code_zero_and_one_row_per_real_submission(self, hostile):
        proc, by = hostile["proc"], hostile["by"]
        assert proc.returncode == 0, proc.stderr[-3000:]
        expected = {"alice", "bob", "carol", "dave", "erin", "leo", "frank", "gina", "ivan", "judy", "kate", "olga",
                    "peggy", "quinn", "rita", FORGED, "r\\xffx", *FORMULA_NAMES, *COLLIDING}
        assert set(by) == expected
        keys = [(r["student"], r["notebook"]) for r in hostile["rows"]]
        assert len(keys) == len(set(keys)) == len(hostile["rows"])  # nothing twice

    def test_links_are_rejected_and_never_read(self, hostile):
        by = hostile["by"]
        for student in ("bob", "carol", "dave", "erin", "leo", "frank", "gina"):
            row = by[student]
            assert (row["status"], row["score"]) == ("rejected_link", 0), row
            assert "symbolic link" in row["error"]
            assert row["submission_sha256"] == "link"
        assert by["carol"]["notebook"] == "(linked folder)" and by["gina"]["notebook"] == "(linked folder)"
        assert by["bob"]["notebook"] == NB_ID and by["bob"]["max_score"] == MAX_SCORE
        # the real notebook next to a deeper link is graded; the link is named, not followed
        assert (by["ivan"]["status"], by["ivan"]["score"], by["ivan"]["file"]) == ("graded", 2, FILE)
        err = hostile["proc"].stderr
        assert "ivan/nested/" + FILE + ": a symbolic link; not followed" in err
        assert "hank: 1 symbolic link(s) inside the folder not followed: work" in err
        assert "hank: no .ipynb file in the folder" in err
        # a hard link is a file like any other; a FIFO is refused without blocking
        assert (by["judy"]["status"], by["judy"]["score"]) == ("graded", 7)
        assert by["kate"]["status"] == "invalid" and "not a regular file" in by["kate"]["error"]
        assert (by["alice"]["status"], by["alice"]["score"]) == ("graded", 7)

    def test_no_content_from_outside_the_class_or_of_unreadable_files_reaches_any_output(self, hostile):
        outputs = _outputs(hostile["out"])
        assert outputs and all(SECRET.encode() not in data for data in outputs.values()), [
            name for name, data in outputs.items() if SECRET.encode() in data]
        assert SECRET not in hostile["proc"].stdout + hostile["proc"].stderr
        by = hostile["by"]
        assert by["olga"]["status"] == by["peggy"]["status"] == "invalid"
        assert "line 1, column 1" in by["olga"]["error"]
        assert "not in the Jupyter notebook format" in by["peggy"]["error"]
        assert by["dave"]["score"] == 0 and not by["dave"]["exercises"][0]["passed"]  # solutions/ was not read

    def test_grades_csv_is_one_record_per_line_and_runs_no_formula(self, hostile):
        text = (hostile["out"] / "grades.csv").read_text(encoding="utf-8")
        lines = text.splitlines()
        assert len(lines) == 1 + len(hostile["rows"])  # also for str.splitlines: no line break of any kind
        records = list(csv.reader(io.StringIO(text)))
        assert len(records) == len(lines)
        assert not [r for r in records if r[0] == "alice" and r[2] == "14"]  # no forged line
        for record in records[1:]:
            for cell in (record[0], record[1], record[4]):
                assert not cell.lstrip(" ").startswith(("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b",
                                                       "\uff0d", "\uff20")), record
        students = {r[0] for r in records[1:]}
        assert {"'=1+2", "'+SUM(A1)", "'-2+3", "'@cmd", "\\tTAB", "'\uff1dHYPERLINK(1)"} <= students
        assert f"mallory\\nalice,{NB_ID},14,{MAX_SCORE},graded" in students
        assert ["rita", "'=HYPERLINK(1)", "0", "0", "unknown_notebook", "0"] in records
        assert ["'-2+3", NB_ID, "2", str(MAX_SCORE), "graded", "0"] in records  # numbers stay numbers

    def test_each_student_has_a_page_of_their_own(self, hostile):
        out, rows = hostile["out"], hostile["rows"]
        paths = [report.feedback_path(out, r["student"], r["notebook"]) for r in rows]
        assert len(set(paths)) == len(rows)
        pages = sorted(str(p.relative_to(out)) for p in (out / "feedback").rglob("*.html"))
        assert pages == sorted(str(p.relative_to(out)) for p in paths)
        for row, path in zip(rows, paths):
            page = path.read_text(encoding="utf-8")
            assert f'<strong class="student">{html.escape(row["student"])}</strong>' in page, row["student"]
            assert f'{row["score"]} / {row["max_score"]} <small>points' in page
        by = hostile["by"]
        assert [by[name]["score"] for name in COLLIDING] == [1, 2, 3, 4, 5, 6]

    def test_every_entry_gets_a_row_or_a_note(self, hostile):
        err, by = hostile["proc"].stderr, hostile["by"]
        names = [os.fsdecode(n) for n in os.listdir(bytes(hostile["root"]))]
        for name in names:
            if name in by or name.replace("\udcff", "\\xff") in by:
                continue
            assert repr(name)[1:-1] in err or name in err, name
        assert "skipped 3 hidden entries" in err  # .git, .hidden_student, alice/.ipynb_checkpoints, said once
        assert err.count("hidden entr") == 1
        assert "notes.txt: neither a student's folder nor a .ipynb notebook; skipped" in err
        assert "nobody: no .ipynb file in the folder" in err
        assert "\\x1b[2Jwipe: no .ipynb file in the folder" in err  # names reach the terminal escaped
        assert "\x1b" not in err

    def test_a_notebook_is_graded_as_what_its_checks_say(self, hostile):
        rows = [r for r in hostile["rows"] if r["student"] == "quinn"]
        # both files are notebook 01 by their check cells: the newer one counts, the other is named
        assert [(r["notebook"], r["status"]) for r in rows] == [(NB_ID, "graded")]
        assert "quinn handed in two files for " + NB_ID in hostile["proc"].stderr
        assert any("its check cells are those of " + NB_ID in w for w in rows[0]["warnings"])
        page = report.feedback_path(hostile["out"], "quinn", NB_ID).read_text(encoding="utf-8")
        assert "its check cells are those of" in page


def test_a_link_swapped_in_after_discovery_is_not_followed(tmp_path):
    root = tmp_path / "subs"
    place(root, "ann", minimal(*interleaved()))
    place(root, "zed", minimal(*interleaved()))
    secret = tmp_path / "secret.ipynb"
    write(minimal(f"# {SECRET}"), secret)
    found, _ = grade.discover(root)
    by = {f.student: f for f in found}
    known = grade.known_notebooks()
    # the file becomes a link between discovery and reading …
    (root / "ann" / FILE).unlink()
    os.symlink(secret, root / "ann" / FILE)
    sub = grade.prepare(by["ann"], known)
    assert (sub.status, sub.cells) == ("rejected_link", []) and SECRET not in repr(sub)
    # … or a folder on the way does
    (root / "zed").rename(tmp_path / "zed_moved")
    os.symlink(tmp_path / "zed_moved", root / "zed")
    sub = grade.prepare(by["zed"], known)
    assert (sub.status, sub.cells) == ("rejected_link", [])
    # the same file through a real path is read
    assert grade.prepare(grade.Found.at("zed", tmp_path / "zed_moved" / FILE), known).status is None


@pytest.mark.parametrize(("value", "cell"), [
    ("=1+2", "'=1+2"), ("+1", "'+1"), ("-1", "'-1"), ("@A1", "'@A1"), ("  =1", "'  =1"),
    ("\uff1d1", "'\uff1d1"), ("\uff20x", "'\uff20x"), ("\t=1", "\\t=1"), ("\r=1", "\\r=1"),
    ("a\nb", "a\\nb"), ("a\r\nb", "a\\r\\nb"), ("a\u2028b", "a\\u2028b"), ("a\x85b", "a\\x85b"),
    ("\x1b[31mred", "\\x1b[31mred"), ("plain name", "plain name"), ("O'Neil, Ann", "O'Neil, Ann"),
])
def test_csv_text_neutralises_formulas_and_line_breaks(value, cell):
    assert report.csv_text(value) == cell
    assert len(report.csv_text(value).splitlines()) == 1


def test_path_components_differ_for_names_that_clean_alike():
    names = ["ann", "Ann", "ANN", "ann ", " ann", "ann\n", "ann_", "a/nn", "a\\nn", "..", ".", "", "x" * 300 + "1",
             "x" * 300 + "2", "ann~0123456789abcdef", "\udcff", "\u00e9", "e\u0301"]
    parts = [report.path_component(n) for n in names]
    assert len({p.lower() for p in parts}) == len(names)  # also on a case-insensitive file system
    for part in parts:
        assert "/" not in part and "\\" not in part and part not in (".", "..", "") and len(part.encode()) <= 100
        assert not part.startswith(".") and not any(ord(c) < 32 for c in part)
    assert report.path_component("good_full_1") == "good_full_1"  # a plain name stays as it is


def test_one_grader_per_output_folder_and_no_stale_lock(tmp_path):
    out = tmp_path / "grades"
    with report.exclusive(out):
        with pytest.raises(report.OutputLocked, match=f"pid {os.getpid()}"):
            with report.exclusive(out):
                pass
    with report.exclusive(out):  # released when its holder is done
        pass
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom pathlib import Path\nfrom helpers.grading import report\n"
        f"with report.exclusive(Path({str(out)!r})):\n    print('held', flush=True)\n    time.sleep(600)\n")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(report.OutputLocked, match=f"pid {holder.pid}"):
            with report.exclusive(out):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)  # kill -9: the kernel drops its lock
        holder.wait(30)
        holder.stdout.close()
    with report.exclusive(out):
        pass


def _grader(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "helpers.grade", *map(str, args)], cwd=ROOT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def test_a_second_grader_refuses_or_waits(tmp_path):
    root, out = tmp_path / "subs", tmp_path / "grades"
    place(root, "ann", minimal(*interleaved()))
    args = [root, "--out", out, "--jobs", "1", "--timeout", "60", "--memory", "1024", "--quiet"]
    with report.exclusive(out):  # another grader holds the folder
        refused = run_grader(*args)
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert "another grader is writing into" in refused.stderr and f"pid {os.getpid()}" in refused.stderr
        assert "--wait" in refused.stderr and not (out / report.JOURNAL).exists()
        waiting = _grader(*args, "--wait")
        try:
            line = waiting.stderr.readline()
            assert "waiting for the grader" in line and f"pid {os.getpid()}" in line, line
            assert waiting.poll() is None and not (out / report.JOURNAL).exists()
        except BaseException:
            waiting.kill()
            raise
    rest = waiting.communicate(timeout=300)[1]  # it goes on once the folder is free
    assert waiting.returncode == 0, rest[-2000:]
    assert [(r["student"], r["score"]) for r in read_rows(out)] == [("ann", 7)]


def test_two_graders_started_at_once_write_one_row_per_submission(tmp_path):
    root, out = tmp_path / "subs", tmp_path / "grades"
    for s in ("ann", "bob", "cid"):
        place(root, s, minimal(*interleaved()))
    args = [root, "--out", out, "--jobs", "1", "--timeout", "60", "--memory", "1024", "--quiet"]
    both = [_grader(*args, "--wait"), _grader(*args, "--wait")]
    errs = [g.communicate(timeout=600)[1] for g in both]
    assert [g.returncode for g in both] == [0, 0], errs
    assert sorted(r["student"] for r in read_rows(out)) == ["ann", "bob", "cid"]  # each once
    assert sum("3 already in the journal" in e for e in errs) == 1  # the second found the first's work
    assert len((out / "grades.csv").read_text().splitlines()) == 4


def test_a_journal_line_stays_one_line_whatever_a_name_holds():
    row = {"student": "a\u2028b\u2029c\x85d\ne\rf", "notebook": NB_ID}
    line = report.json_line(row)
    assert len(line.splitlines()) == 1 and json.loads(line) == row


# ----------------------------------------------------------------------------- full marks for a blank notebook?
# A blank exercise notebook (every TO-DO still raises) plus a cell that tries to produce the answers
# without doing the exercise: patch the recorder, its serialisation, `check`, builtins, import the
# registry by name or by path. The sandbox holds no reference computation, so each gets nothing for
# the steps it did not do; honest submissions in the same batch keep their exact scores.

# The notebook's own answers, as a student could type them from the printed outputs.
_PRINTED = """
import numpy as np
PRINTED = {
    "x": [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]],
    "w_key": [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]],
    "w_query": [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]],
    "w_value": [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]],
    "keys": [[0, 1, 1], [4, 4, 0], [2, 3, 1]],
    "queries": [[1, 0, 2], [2, 2, 2], [2, 1, 3]],
    "values": [[1, 2, 3], [2, 8, 0], [2, 6, 3]],
    "attn_scores": [[2, 4, 4], [4, 16, 12], [4, 12, 10]],
    "attn_weights": [[6.3379e-02, 4.6831e-01, 4.6831e-01], [6.0337e-06, 9.8201e-01, 1.7986e-02],
                     [2.9539e-04, 8.8054e-01, 1.1917e-01]],
    "outputs": [[1.9366, 6.6831, 1.5951], [2.0, 7.9640, 0.0540], [1.9997, 7.7599, 0.3584]],
    "outputs_rounded": [[2.0, 7.0, 1.5], [2.0, 8.0, 0.0], [2.0, 7.8, 0.3]],
}
"""

_PATCH_RECORDER = _PRINTED + """
import helpers

try:  # the exploit of old: compute the references in here, for the grader's own fresh inputs
    from helpers.course import spec as registry
except ImportError:
    registry = None

def fake_collect(plan, namespace, history=None, cell=None, shell=None):
    answers = {n: np.asarray(PRINTED[n], float) for n in plan["answers"]}
    n_trials = 1 + len(plan.get("trials") or [])
    if registry is not None:
        ex = registry.get(plan["id"])
        worlds = [ex.inputs(None), *plan["trials"]]
        return {"id": plan["id"], "answers": [ex.expected(w) for w in worlds],
                "replay": {"available": True, "error": None}, "upstream": {},
                "facts": {"framework": {n: plan["framework"] for n in answers},
                          "dtype": {n: "float32" for n in answers}}}
    return {"id": plan["id"], "answers": [answers] * n_trials,  # the notebook's answers for every trial
            "replay": {"available": True, "error": None}, "upstream": {},
            "facts": {"framework": {n: plan["framework"] for n in answers},
                      "dtype": {n: "float32" for n in answers}}}

recorder = helpers._check_hook.__self__
recorder._collect = fake_collect
import helpers.runtime.collect
helpers.runtime.collect.collect = fake_collect
"""

_PATCH_NO_REPLAY = _PRINTED + """
import helpers

def no_replay(plan, namespace, history=None, cell=None, shell=None):
    answers = {n: np.asarray(PRINTED[n], float) for n in plan["answers"]}
    return {"id": plan["id"], "answers": [answers], "replay": {"available": False, "error": None},
            "facts": {"framework": {n: plan["framework"] for n in answers}, "dtype": {n: "float32" for n in answers}}}

helpers._check_hook.__self__._collect = no_replay
"""

_PATCH_SERIALISATION = """
import json, helpers, helpers.grading.protocol as protocol, helpers.grading.zygote as zygote
claim = {"status": "pass", "passed": True, "points": 1, "carried_forward": True}
protocol.encode_record = lambda record, depth=0: claim
zygote.encode_record = lambda record, depth=0: claim
real_dumps = json.dumps
json.dumps = lambda obj, *a, **k: real_dumps({**obj, "record": claim} if isinstance(obj, dict) else obj, *a, **k)
"""

_PATCH_CHECK_AND_BUILTINS = """
import builtins, sys, types, helpers
fake = types.ModuleType("helpers.course.spec")
fake.evaluate = lambda *a, **k: "pass"
sys.modules["helpers.course"] = types.ModuleType("helpers.course")
sys.modules["helpers.course.spec"] = fake
real_import = builtins.__import__
def rigged_import(name, *args, **kwargs):
    if name.startswith("helpers.course"):
        return fake
    return real_import(name, *args, **kwargs)
builtins.__import__ = rigged_import
def check(exercise_id, namespace=None):
    print(f"✅ {exercise_id} — correct.")
helpers.check = check
helpers._check_hook = None
"""

# Evidence through a point: x is assigned (and 01.x earns its point) only if no part of the registry can
# be imported or found on disk from inside the sandbox, and none was imported before the notebook ran.
_LOOK_FOR_THE_REGISTRY = """
import glob, importlib, importlib.util, os, sys
import helpers
seen = [m for m in sys.modules if m.startswith(("helpers.course", "helpers.checks", "helpers.grade"))]
for name in ("helpers.course", "helpers.course.spec", "helpers.course.exercises.nb01", "helpers.checks",
             "helpers.course.reference", "helpers.grading.verdict", "helpers.grade"):
    try:
        importlib.import_module(name)
        seen.append(name)
    except Exception:
        pass
root = os.path.dirname(helpers.__file__)
for path in [os.path.join(root, "course", "exercises", "nb01.py"), os.path.join(root, "course", "spec.py"),
             os.path.join(root, "checks.py")]:
    if os.path.exists(path):
        seen.append(path)
        try:
            spec = importlib.util.spec_from_file_location("stolen", path)
            importlib.util.module_from_spec(spec)
        except Exception:
            pass
for base in sys.path + [os.path.dirname(root)]:
    if os.path.isdir(base):
        seen += glob.glob(os.path.join(base, "**", "nb01.py"), recursive=True)[:3]
        seen += glob.glob(os.path.join(base, "**", "01_illustrated_self_attention.ipynb"), recursive=True)[:3]
if not seen:
    x = torch.tensor(x_list, dtype=torch.float32)
"""


def _after_imports(nb, *sources):
    """The exercise notebook with cells inserted right after the cell that imports `check`."""
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "from helpers import check" in c.source)
    nb.cells[at + 1:at + 1] = [new_code_cell(s) for s in sources]
    return nb


def _blank(*sources):
    import nbformat

    return _after_imports(nbformat.read(EXERCISE, as_version=4), *sources)


class TestBlankNotebookGetsNothing:
    @pytest.fixture(scope="class")
    @staticmethod
    def blank(tmp_path_factory):
        base = tmp_path_factory.mktemp("blank")
        root, out = base / "submissions", base / "grades"
        place(root, "honest_full", SOLUTION)
        place(root, "honest_torch_half", minimal(*interleaved()))
        place(root, "blank", EXERCISE)
        place(root, "patch_recorder", _blank(_PATCH_RECORDER))
        place(root, "patch_no_replay", _blank(_PATCH_NO_REPLAY))
        place(root, "patch_serialisation", _blank(_PATCH_SERIALISATION))
        place(root, "patch_check_builtins", _blank(_PATCH_CHECK_AND_BUILTINS))
        place(root, "look_for_registry", minimal(_LOOK_FOR_THE_REGISTRY, 'check("01.x")'))
        # the TO-DO cell raised; a later cell puts the right value in the variable before the check
        typed_in = _PRINTED + "x = torch.tensor(PRINTED['x'], dtype=torch.float32)"
        late = minimal('raise NotImplementedError("TO-DO: replace this line with your code")\nx = None',
                       "globals()['x'] = torch.tensor(x_list, dtype=torch.float32)", 'check("01.x")',
                       typed_in, 'check("01.weights")')
        place(root, "late_assignment", late)
        proc = run_grader(root, "--out", out, "--jobs", "2", "--timeout", "60", "--memory", "1024", "--quiet")
        assert proc.returncode == 0, proc.stderr[-3000:]
        return {r["student"]: r for r in read_rows(out)}

    def test_honest_submissions_keep_their_exact_scores(self, blank):
        assert (blank["honest_full"]["status"], blank["honest_full"]["score"]) == ("graded", MAX_SCORE)
        assert (blank["honest_torch_half"]["status"], blank["honest_torch_half"]["score"]) == ("graded", 7)
        assert blank["blank"]["score"] == 0

    @pytest.mark.parametrize("student", ["patch_recorder", "patch_no_replay", "patch_serialisation",
                                         "patch_check_builtins"])
    def test_patching_the_recorder_its_serialisation_check_or_builtins_gains_nothing(self, blank, student):
        row = blank[student]
        assert row["status"] in ("graded", "crashed") and row["score"] == 0, [
            (e["id"], e["status"], e["message"][:120]) for e in row["exercises"] if e["points"]]
        assert not any(e["passed"] or e.get("carried_forward") for e in row["exercises"])

    def test_the_registry_is_neither_importable_nor_on_disk_in_the_sandbox(self, blank):
        row = blank["look_for_registry"]
        assert outcome(row, "01.x")["passed"], outcome(row, "01.x")["message"]  # the evidence: nothing found
        assert row["score"] == 1

    def test_a_step_whose_cell_raised_is_not_done_whatever_a_later_cell_puts_in_its_variables(self, blank):
        row = blank["late_assignment"]
        x, weights = outcome(row, "01.x"), outcome(row, "01.weights")
        assert x["status"] == "not_done" and not x["passed"], x
        assert not weights["passed"], weights  # typed in from the printed outputs: fails the fresh inputs
        assert row["score"] == 0
        assert any("NotImplementedError" in e["text"] for e in row["errors"])  # the row says which cell raised
