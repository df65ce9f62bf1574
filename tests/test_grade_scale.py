"""Grading beyond one machine: shards of a class and the merge of their outputs.

The centre: a small class graded as one run and as three shards run at the same time, merged,
gives the same grades (scores, statuses, each step's points, status and diagnosis; the fresh
inputs are random per submission, so messages with numbers are not compared). Around it, without
a sandbox: which shard a submission belongs to (stable, balanced, by identity not path), the
merge's reading of journals (partial lines, duplicates, the newest row), and what a merge says
about missing, unfinished or still-running shards.
"""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import shutil
import subprocess
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from frameworks import needs
from grading_fixtures import (
    FILE,
    MAX_SCORE,
    NB_ID,
    PYTHON,
    TORCH_ANSWERS,
    TORCH_CHECKS,
    good_minimal,
    interleaved,
    minimal,
    place,
    read_rows,
)

from helpers import grade
from helpers.grading import report, shards
from helpers.grading.sandbox import probe_bwrap
from paths import NOTEBOOKS, ROOT, SOLUTIONS

_NO_SANDBOX = probe_bwrap()
needs_bwrap = pytest.mark.skipif(_NO_SANDBOX is not None, reason=f"no sandbox here: {_NO_SANDBOX}")
NB05 = "05_numpy_self_attention_bug"


# ----------------------------------------------------------------------------- which shard


def test_shard_of_is_fixed_by_the_identity_alone():
    # The values are part of the contract: two machines, two Python versions, two releases of this
    # course must put a submission into the same shard, or a rerun of one shard would grade others.
    assert [shards.shard_of(s, NB_ID, 4) for s in ("ann", "bob", "cid", "dan", "eve")] == \
        [shards.shard_of(s, NB_ID, 4) for s in ("ann", "bob", "cid", "dan", "eve")]
    key = "ann\x00" + NB_ID
    import hashlib

    expected = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 7
    assert shards.shard_of("ann", NB_ID, 7) == expected
    # normalised: the same student typed differently is the same identity (NFC/NFD, case, spaces)
    nfd = unicodedata.normalize("NFD", "Zoë  Müller")
    assert shards.shard_of(nfd, NB_ID, 97) == shards.shard_of("zoë müller", NB_ID, 97)
    assert shards.shard_of(" ANN ", NB_ID, 97) == shards.shard_of("ann", NB_ID, 97)
    # and different notebooks of one student are spread too (not all in the student's shard)
    assert len({shards.shard_of("ann", f"{i:02d}_x", 8) for i in range(40)}) > 1


def test_shards_are_balanced_and_stable_when_the_class_changes():
    notebooks = [f"{i:02d}_notebook" for i in range(1, 8)]
    students = [f"student{i:03d}" for i in range(300)]
    keys = [(s, nb) for s in students for nb in notebooks]
    for count in (2, 3, 4, 8, 16):
        sizes = Counter(shards.shard_of(s, nb, count) for s, nb in keys)
        assert sorted(sizes) == list(range(count))
        # a hash puts each submission anywhere with chance 1/N: the counts are binomial, the largest
        # shard typically 2-3 standard deviations above the mean (4 would be a broken hash)
        mean = len(keys) / count
        sd = (len(keys) * (1 / count) * (1 - 1 / count)) ** 0.5
        assert max(abs(n - mean) for n in sizes.values()) < 4 * sd, (count, sizes)
        for nb in notebooks:  # each notebook (a heavy TensorFlow one too) is spread over the shards
            per = Counter(shards.shard_of(s, nb, count) for s in students)
            m, d = len(students) / count, (len(students) / count * (1 - 1 / count)) ** 0.5
            assert max(abs(per[i] - m) for i in range(count)) < 4 * d, (count, nb, per)
    before = {k: shards.shard_of(*k, 4) for k in keys}
    grown = keys[::2] + [(f"late{i}", nb) for i in range(50) for nb in notebooks]  # half leave, 50 join
    assert all(shards.shard_of(*k, 4) == before[k] for k in grown if k in before)


@pytest.mark.parametrize(("text", "ok"), [("0/1", (0, 1)), ("3/4", (3, 4)), (" 2 / 8 ", (2, 8)), ("4/4", None),
                                          ("-1/4", None), ("1/0", None), ("a/b", None), ("1", None)])
def test_shard_syntax(text, ok):
    if ok is None:
        with pytest.raises(Exception) as info:
            shards.parse_shard(text)
        assert "shard" in str(info.value) or "I/N" in str(info.value)
    else:
        spec = shards.parse_shard(text)
        assert (spec.index, spec.count) == ok
        _, args = grade.parse(["subs", "--shard", text])
        assert args.shard == spec


def test_the_shard_follows_the_notebook_not_the_files_name(tmp_path):
    """A renamed copy of notebook 01 is still 01 (its checks say so): its shard does not move."""
    a = place(tmp_path / "a", "ann", good_minimal(), name=FILE)
    b = place(tmp_path / "b", "ann", good_minimal(), name="Copy of my homework (3).ipynb")
    known = grade.known_notebooks()
    sa, sb = grade.prepare(grade.Found.at("ann", a), known), grade.prepare(grade.Found.at("ann", b), known)
    assert sa.notebook == sb.notebook == NB_ID
    assert shards.shard_of(sa.student, sa.notebook, 5) == shards.shard_of(sb.student, sb.notebook, 5)


# ----------------------------------------------------------------------------- merging journals


def _row(student, score, at, notebook=NB_ID, sha="x"):
    return {"student": student, "notebook": notebook, "submission_sha256": sha, "status": "graded",
            "score": score, "max_score": MAX_SCORE, "exercises": [], "error": None, "graded_at": at}


def _journal(folder: Path, *rows, tail: bytes = b"") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / report.JOURNAL
    path.write_bytes(b"".join((report.json_line(r) + "\n").encode() for r in rows) + tail)
    return path


def test_merge_keeps_the_newest_row_drops_partial_lines_and_duplicates_and_leaves_inputs_alone(tmp_path):
    a = _journal(tmp_path / "a", _row("ann", 3, "2025-01-01T10:00:00Z"), _row("bob", 5, "2025-01-01T10:00:00Z"),
                 tail=b'{"student": "cid", "notebook": "01_illus')  # a shard killed mid-write
    b = _journal(tmp_path / "b", _row("ann", 9, "2025-01-02T10:00:00Z"), _row("dan", 1, "2025-01-01T10:00:00Z"))
    with open(b, "ab") as f:
        f.write(b"garbage that is a whole line\n")
    shutil.copytree(tmp_path / "a", tmp_path / "a_again")  # the same shard given twice
    before = {p: p.read_bytes() for p in (a, b)}
    said: list[str] = []
    result = shards.merge([tmp_path / "a", tmp_path / "b", tmp_path / "a_again"], tmp_path / "m", said.append)
    assert {p: p.read_bytes() for p in (a, b)} == before  # inputs are read, never repaired
    assert any("partial last line" in s for s in said) and any("1 unreadable line" in s for s in said)
    lines = (tmp_path / "m" / "grades.csv").read_text().splitlines()
    assert lines[1:] == [f"ann,{NB_ID},9,{MAX_SCORE},graded,0", f"bob,{NB_ID},5,{MAX_SCORE},graded,0",
                         f"dan,{NB_ID},1,{MAX_SCORE},graded,0"]
    merged = read_rows(tmp_path / "m")
    assert len(merged) == 4  # ann twice (history kept, newest last), bob and dan once: duplicates dropped
    assert (result.rows, result.students, result.problems) == (3, 3, [])
    assert report.feedback_path(tmp_path / "m", "ann", NB_ID).is_file()
    # merging again (the output's own journal takes part) changes nothing
    shards.merge([tmp_path / "a", tmp_path / "b"], tmp_path / "m", said.append)
    assert len(read_rows(tmp_path / "m")) == 4
    # an older row arriving later does not win: "newest" is when it was graded
    _journal(tmp_path / "c", _row("ann", 1, "2024-12-31T10:00:00Z"))
    shards.merge([tmp_path / "c"], tmp_path / "m", said.append)
    assert f"ann,{NB_ID},9,{MAX_SCORE},graded,0" in (tmp_path / "m" / "grades.csv").read_text()


def test_merge_says_which_shard_is_missing_unfinished_or_still_running(tmp_path):
    spec = lambda i: shards.ShardSpec(i, 3)  # noqa: E731
    for i in range(3):
        _journal(tmp_path / f"s{i}", _row(f"st{i}", i, "2025-01-01T10:00:00Z"))
    shards.write_record(tmp_path / "s0", spec(0), 3, 1, 0, 1, 0, finished=True)
    shards.write_record(tmp_path / "s1", spec(1), 3, 1, 0, 0, 1, finished=False)
    out = tmp_path / "m"
    result = shards.merge([tmp_path / "s0", tmp_path / "s1"], out, lambda s: None)
    text = " | ".join(result.problems)
    assert "shard 1/3" in text and "did not finish" in text and "2/3 missing" in text
    code = grade.main(["merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(out)])
    assert code == 1  # written, but not complete: a scheduler sees the failure
    assert grade.main(["merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out", str(out), "--partial"]) == 0
    # a folder that is no grader's output
    (tmp_path / "empty").mkdir()
    result = shards.merge([tmp_path / "empty"], tmp_path / "m2", lambda s: None)
    assert any("no results.jsonl" in p for p in result.problems)
    # a shard whose grader is still writing is refused, and nothing is written
    with report.exclusive(tmp_path / "s2"):
        code = grade.main(["merge", str(tmp_path / "s2"), "--out", str(tmp_path / "m3")])
    assert code == 2 and not (tmp_path / "m3" / "grades.csv").exists()


def test_a_shard_record_lock_does_not_block_a_merge_after_the_grader_ended(tmp_path):
    _journal(tmp_path / "s", _row("ann", 3, "2025-01-01T10:00:00Z"))
    with report.exclusive(tmp_path / "s"):
        pass  # a grader held it and ended: its lock file stays, unlocked
    fd = os.open(tmp_path / "s" / report.LOCK, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # another reader does not block the merge either
        assert grade.main(["merge", str(tmp_path / "s"), "--out", str(tmp_path / "m")]) == 0
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- one run = shards + merge


def _class(root: Path) -> None:
    wrong = list(TORCH_ANSWERS)
    wrong[4] = "attn_weights = torch.softmax(attn_scores, dim=0)"
    transposed = list(TORCH_ANSWERS)
    transposed[3] = "attn_scores = keys @ queries.T"
    place(root, "ann", good_minimal())
    place(root, "bob", minimal(*interleaved(wrong)))
    place(root, "cid", minimal(*interleaved(TORCH_ANSWERS[:2], TORCH_CHECKS[:2])))
    place(root, "dan", minimal(*interleaved(transposed)))
    place(root, "Émile Zoë", minimal(*interleaved(wrong[:5], TORCH_CHECKS[:5])))
    place(root, "=HYPERLINK(1)", minimal(*interleaved(TORCH_ANSWERS[:4], TORCH_CHECKS[:4])))
    (root / "fay").mkdir()
    (root / "fay" / FILE).write_text("{not a notebook")
    (root / "gus").mkdir()
    os.symlink("../ann/" + FILE, root / "gus" / FILE)
    older = place(root, "hal", minimal(*interleaved(TORCH_ANSWERS[:1], TORCH_CHECKS[:1])), name="old/" + FILE)
    os.utime(older, (1, 1))
    place(root, "hal", good_minimal(), name="Copy of " + FILE)  # two files for 01: the newer counts
    for student in ("ivy", "jon", "kim"):
        place(root, student, NOTEBOOKS / f"{NB05}.ipynb", name=f"{NB05}.ipynb")  # untouched exercise
    place(root, "lea", SOLUTIONS / f"{NB05}.ipynb", name=f"{NB05}.ipynb")
    place(root, "ann", NOTEBOOKS / f"{NB05}.ipynb", name=f"{NB05}.ipynb")


def _verdicts(out: Path) -> dict[tuple[str, str], tuple]:
    latest = {}
    for row in read_rows(out):
        latest[(row["student"], row["notebook"])] = row
    return {key: (row["status"], row["score"], row["max_score"], row["file"],
                  tuple((e["id"], e["points"], e["status"], e["diagnosis"]) for e in row["exercises"]))
            for key, row in latest.items()}


@needs_bwrap
@pytest.mark.parametrize("_", [pytest.param(None, marks=needs("torch"))])
def test_three_shards_in_parallel_then_merge_equal_one_run(tmp_path, _):
    root = tmp_path / "class"
    _class(root)
    common = ["--jobs", "1", "--timeout", "120", "--memory", "1024", "--quiet"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def start(*args):
        return subprocess.Popen([PYTHON, "-m", "helpers.grade", *map(str, args)], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    procs = [start(root, "--out", tmp_path / f"shard{i}", "--shard", f"{i}/3", *common) for i in range(3)]
    procs.append(start(root, "--out", tmp_path / "one", *common))
    outs = [p.communicate(timeout=900) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]

    records = [json.loads((tmp_path / f"shard{i}" / shards.RECORD).read_text()) for i in range(3)]
    assert [(r["shard"], r["of"], r["finished"], r["failures"]) for r in records] == \
        [(i, 3, True, 0) for i in range(3)]
    one = _verdicts(tmp_path / "one")
    assert sum(r["own_submissions"] for r in records) == len(one) == records[0]["class_submissions"] == 14
    parts = [set(_verdicts(tmp_path / f"shard{i}")) for i in range(3)]
    assert all(parts) and not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    assert set().union(*parts) == set(one)

    merged = tmp_path / "merged"
    proc = subprocess.run([PYTHON, "-m", "helpers.grade", "merge", *(tmp_path / f"shard{i}" for i in range(3)),
                           "--out", merged], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _verdicts(merged) == one
    # grades.csv holds no random number: byte for byte the same
    assert (merged / "grades.csv").read_text() == (tmp_path / "one" / "grades.csv").read_text()
    pages = lambda out: sorted(p.relative_to(out).as_posix() for p in (out / "feedback").rglob("*.html"))  # noqa: E731
    assert pages(merged) == pages(tmp_path / "one")
    # what the class holds, to know the comparison compared something
    by = {k: v for k, v in one.items()}
    assert by[("ann", NB_ID)][:2] == ("graded", 7) and by[("fay", NB_ID)][0] == "invalid"
    assert by[("gus", NB_ID)][0] == "rejected_link" and by[("hal", NB_ID)][1] == 7
    assert by[("lea", NB05)][1] == by[("lea", NB05)][2] > 0 and by[("ivy", NB05)][1] == 0
    assert ("softmax_wrong_axis" in {e[3] for e in by[("bob", NB_ID)][4]})
    assert ("transposed_scores" in {e[3] for e in by[("dan", NB_ID)][4]})
    records = list(csv.reader(io.StringIO((merged / "grades.csv").read_text())))
    assert ["'=HYPERLINK(1)", NB_ID, "4", str(MAX_SCORE), "graded", "0"] in records
