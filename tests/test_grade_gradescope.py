"""The Gradescope autograder bundle, and its run_autograder run here on fixture submissions.

``run_autograder`` is run by bash, as Gradescope runs it, with ``AUTOGRADER_ROOT`` pointing at a
folder laid out as Gradescope's ``/autograder`` (``source/`` = the unpacked bundle,
``submission/``, ``submission_metadata.json``) and ``AUTOGRADER_PYTHON`` at this Python. Its
``results.json`` must follow Gradescope's documented schema and say what a local run of the
grader says about the same files: the same score, the same points and verdict per step, the same
words as the feedback page. What cannot be tried here: ``setup.sh`` on Gradescope's image.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from grading_fixtures import TORCH_ANSWERS, good_minimal, interleaved, minimal, place, read_rows, run_grader

from helpers import grade
from helpers.grading import gradescope, report
from helpers.grading.sandbox import probe_bwrap

NB = "01_illustrated_self_attention"
_NO_SANDBOX = probe_bwrap()
needs_bwrap = pytest.mark.skipif(_NO_SANDBOX is not None, reason=f"no sandbox here: {_NO_SANDBOX}")

# Gradescope's results.json (gradescope-autograders.readthedocs.io, "Autograder Specifications").
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}
STATUS = {"passed", "failed"}


def check_schema(result: dict) -> None:
    """Fail unless ``result`` is a results.json Gradescope accepts (types and allowed values)."""
    allowed = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
               "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
    assert set(result) <= allowed, set(result) - allowed
    assert isinstance(result["score"], (int, float)) and not isinstance(result["score"], bool)
    assert isinstance(result.get("output", ""), str)
    assert result.get("output_format", "text") in FORMATS
    assert result.get("visibility", "visible") in VISIBILITY and result.get("stdout_visibility", "hidden") in VISIBILITY
    assert isinstance(result.get("extra_data", {}), dict) and isinstance(result.get("execution_time", 0), int)
    test_keys = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                 "tags", "visibility", "extra_data"}
    for test in result["tests"]:
        assert set(test) <= test_keys, set(test) - test_keys
        assert isinstance(test["name"], str) and isinstance(test["number"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], (int, float)) and isinstance(test["max_score"], (int, float))
        assert 0 <= test["score"] <= test["max_score"]
        assert test["status"] in STATUS and test["output_format"] in FORMATS and test["visibility"] in VISIBILITY
    assert abs(sum(t["score"] for t in result["tests"]) - result["score"]) < 1e-9


# ----------------------------------------------------------------------------- the bundle


def _bundle(tmp_path: Path, *args: str) -> Path:
    assert grade.main(["gradescope-bundle", "--out", str(tmp_path / "bundle"), *args]) == 0
    return tmp_path / "bundle" / "autograder.zip"


def test_the_bundle_holds_setup_and_run_autograder_at_its_root_and_this_grader(tmp_path):
    path = _bundle(tmp_path, "--notebook", "01", "--timeout", "120", "--visibility", "after_published")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
        modes = {i.filename: (i.external_attr >> 16) for i in zf.infolist()}
        config = json.loads(zf.read(gradescope.CONFIG))
        setup, run = zf.read("setup.sh").decode(), zf.read("run_autograder").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "pyproject.toml", "src/helpers/grade.py",
            "src/helpers/grading/gradescope.py", "src/helpers/course/spec.py"} <= names
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    assert not any(n.startswith(("solutions/", ".venv/", "tests/")) or "__pycache__" in n for n in names)
    assert config == {"notebooks": [NB], "timeout": 120.0, "memory": 4096, "sandbox": "auto",
                      "visibility": "after_published", "carry_forward": True}
    assert "bubblewrap" in setup and "requirements.txt" in setup and "gradescope-run" in run
    for script in (setup, run):
        proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    # the same sources give the same bytes (upload it again only when something changed)
    assert _bundle(tmp_path / "again", "--notebook", "01", "--timeout", "120", "--visibility",
                   "after_published").read_bytes() == path.read_bytes()
    assert grade.main(["gradescope-bundle", "--out", str(tmp_path / "x"), "--notebook", "99"]) == 2


def test_results_follow_gradescopes_schema_and_keep_hostile_text_as_text():
    row = {"student": "s", "notebook": NB, "status": "crashed", "score": 2, "max_score": 3,
           "error": "Your notebook stopped: <script>alert(1)</script>", "errors": [{"cell": 4, "line": 2,
                                                                                  "text": "ZeroDivisionError"}],
           "exercises": [
               {"id": "01.x", "points": 1, "max_points": 1, "status": "pass", "message": "The inputs: correct."},
               {"id": "01.weights", "points": 1, "max_points": 1, "status": "carried", "message": "Carried."},
               {"id": "01.qkv", "points": 0, "max_points": 1, "status": "fail", "diagnosis": "softmax_wrong_axis",
                "message": "Not right.", "cell": 4, "cell_role": "answer", "code": {"start": 1, "text": "x"}},
           ]}
    result = report.gradescope_results([row], {"01.x": "The inputs"}, {"softmax_wrong_axis": "Softmax over rows"})
    check_schema(result)
    assert result["score"] == 2 and [t["status"] for t in result["tests"]] == ["passed", "passed", "failed"]
    assert result["tests"][0]["name"] == "01.x · The inputs"
    failed = result["tests"][2]["output"]
    assert "Known mistake: Softmax over rows" in failed and "cell 5 of your notebook" in failed
    assert "Line 2 raised ZeroDivisionError" in failed
    assert "<script>" in result["output"] and result["output_format"] == "text"  # shown as text, never as HTML
    with pytest.raises(ValueError):
        report.gradescope_results([row], visibility="public")


# ----------------------------------------------------------------------------- run_autograder, here


def _autograder_root(tmp_path: Path, bundle: Path, name: str) -> Path:
    root = tmp_path / name
    (root / "submission").mkdir(parents=True)
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(root / "source")  # our own bundle, from a trusted zip
    (root / "submission_metadata.json").write_text(json.dumps({"users": [{"name": f"Student {name}",
                                                                          "email": "s@example.org", "id": 1}]}))
    return root


def _run_autograder(root: Path) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    script = root / "source" / "run_autograder"
    proc = subprocess.run(["bash", str(script)], cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((root / "results" / "results.json").read_text())
    check_schema(result)
    return result


@needs_bwrap
def test_run_autograder_gives_the_scores_and_words_of_a_local_run(tmp_path):
    bundle = _bundle(tmp_path, "--notebook", "01", "--timeout", "120", "--memory", "1024")
    wrong = list(TORCH_ANSWERS)
    wrong[4] = "attn_weights = torch.softmax(attn_scores, dim=0)"
    submissions = {"good": good_minimal(), "wrong": minimal(*interleaved(wrong))}
    local = tmp_path / "class"
    results = {}
    for name, nb in submissions.items():
        root = _autograder_root(tmp_path, bundle, name)
        place(root, "submission", nb, name=f"work/Copy of {NB}.ipynb")  # a folder and a renamed file
        (root / "submission" / "notes.txt").write_text("not a notebook")
        place(local, name, nb)
        results[name] = _run_autograder(root)
    proc = run_grader(local, "--out", tmp_path / "grades", "--jobs", "2", "--quiet", "--timeout", "120",
                      "--memory", "1024")
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["student"]: r for r in read_rows(tmp_path / "grades")}
    mistakes = grade._mistake_titles()
    for name, result in results.items():
        row = rows[name]
        assert result["score"] == row["score"] and result["extra_data"]["notebooks"][NB]["status"] == row["status"]
        assert [(t["number"], t["score"], t["max_score"], t["status"]) for t in result["tests"]] == \
            [(e["id"], e["points"], e["max_points"], "passed" if e["status"] in ("pass", "carried") else "failed")
             for e in row["exercises"]]
        for test, ex in zip(result["tests"], row["exercises"]):
            if not any(c.isdigit() for c in ex["message"]):  # fresh inputs are random: numbers differ per run
                assert test["output"] == report.step_text(ex, row, mistakes)
    assert results["good"]["score"] == 7 and results["wrong"]["score"] < 7
    assert any("Known mistake:" in t["output"] for t in results["wrong"]["tests"])
    assert f"Notebook {NB}: 7 / 14 points." in results["good"]["output"]


@needs_bwrap
def test_run_autograder_without_the_expected_notebook_or_without_a_submission(tmp_path):
    bundle = _bundle(tmp_path, "--notebook", "01")
    root = _autograder_root(tmp_path, bundle, "empty")
    (root / "submission" / "answers.pdf").write_bytes(b"%PDF")
    result = _run_autograder(root)
    assert result["score"] == 0 and len(result["tests"]) == 14
    assert all(t["status"] == "failed" and "was not in your submission" in t["output"] for t in result["tests"])
    assert "holds no .ipynb notebook" in result["output"]
    # grading that cannot happen still writes results.json, which says so (never a silent failure)
    shutil.rmtree(root / "submission")
    result = _run_autograder(root)
    assert result["score"] == 0 and result["tests"] == [] and "problem on our side" in result["output"]
    assert "is not a folder" in result["extra_data"]["error"]
