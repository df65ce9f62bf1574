"""Attacks on the grader: each gains no point, harms no other submission, gets an honest status.

One class of hostile and honest students is graded ONCE (in the sandbox, two workers), then
each test reads its row. Good submissions sit in the same batch: full solutions (which also
prove that PyTorch AND TensorFlow work in a process forked from the warm zygote) and minimal
PyTorch ones (7 of 14 points: the TensorFlow half is not done).

Some attacks report what they saw inside the sandbox through points: a cell assigns a correct
answer only if, say, the network was unreachable — so a point there is evidence, not a gain.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from grading_fixtures import (
    EXERCISE,
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
)
from nbformat.v4 import new_code_cell, new_markdown_cell

from helpers.course import spec
from helpers.grading.sandbox import probe_bwrap

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
    assert "snoop" not in (out / "results.jsonl").read_text().replace('"student":"snoop"', "")


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
