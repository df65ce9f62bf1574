"""Every notebook runs top to bottom as "Run All" runs it, in a student's environment.

- An exercise notebook, untouched: the only errors are the TO-DO placeholders, each in a cell
  tagged ``raises-exception`` so the run carries on (nbclient honours the tag as JupyterLab
  does: without it the run stops there), every check says "not done yet", every cell runs.
- Nothing at all on stderr. Nothing is filtered, and the kernel's environment sets no
  TensorFlow variable, as on a student's machine or in Colab: what would show as a pink box
  in JupyterLab fails here.

The solution notebooks are not run a second time here: nbval runs them (conftest.py fails a
cell that writes to stderr or raises), and test_build.py checks what they stored.

One test class per notebook, so `pytest -n 2 --dist loadscope` spreads the notebooks
over the workers (a class is a scope).
"""

import os
import re
import subprocess
import sys

import nbformat
import pytest
from nbclient.exceptions import CellExecutionError
from nbformat.v4 import new_code_cell, new_notebook
from student import student_env

from helpers.build import PLACEHOLDER, RAISES, build_notebook, check_calls
from helpers.execute import run
from paths import NOTEBOOKS, ROOT, SOLUTIONS

PLACEHOLDER_LINE = PLACEHOLDER[1].format(indent="")


def _text(out):
    if out.output_type == "stream":
        return out.text
    if out.output_type in ("execute_result", "display_data"):
        return str(out.get("data", {}).get("text/plain", ""))
    return ""


def _run_all(path):
    """Run ``path`` like Run All; return the notebook and the problems that stop or spoil the run."""
    nb = nbformat.read(path, as_version=4)
    problems = []
    try:
        run(nb, path.parent, timeout=300, env=student_env())
    except CellExecutionError as exc:
        problems.append(f"{path.name}: Run All stops at an error in a cell not tagged {RAISES!r}:\n{str(exc)[-1500:]}")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.execution_count is None and not problems:
            problems.append(f"{path.name}, cell {i + 1}: never ran")
        for out in cell.outputs:
            if out.output_type == "stream" and out.name == "stderr":
                problems.append(f"{path.name}, cell {i + 1}: wrote to stderr: {out.text.strip()[:300]}")
    return nb, problems


def _exercise_problems(path):
    nb, problems = _run_all(path)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"{path.name}, cell {i + 1}"
        for out in cell.outputs:
            if out.output_type == "error":
                if out.ename != "NotImplementedError" or "TO-DO" not in out.evalue:
                    problems.append(f"{where}: unexpected {out.ename}: {out.evalue}")
                elif PLACEHOLDER_LINE not in cell.source and "def " not in cell.source:
                    problems.append(f"{where}: NotImplementedError from a cell without a placeholder")
        for ex_id in check_calls(cell.source):
            text = "".join(_text(o) for o in cell.outputs)
            lines = [ln for ln in text.splitlines() if re.match(rf"^\S+ {re.escape(ex_id)} — ", ln)]
            if not lines:
                problems.append(f"{where}: check({ex_id!r}) printed no verdict")
            for ln in lines:
                if not ln.startswith(f"⏳ {ex_id} — not done yet"):
                    problems.append(f"{where}: check({ex_id!r}) should say not done yet, said: {ln}")
    return problems


def _make_class(exercise):
    def test_untouched_notebook_runs_with_only_placeholders_failing(self):
        problems = _exercise_problems(exercise)
        assert not problems, "\n".join(problems)

    name = "TestExercise_" + re.sub(r"\W", "_", exercise.stem)
    return name, type(name, (), {
        "test_untouched_notebook_runs_with_only_placeholders_failing":
            test_untouched_notebook_runs_with_only_placeholders_failing,
    })


for _path in sorted(NOTEBOOKS.glob("*.ipynb")):
    _name, _cls = _make_class(_path)
    globals()[_name] = _cls


def test_there_are_exercise_notebooks():
    assert sorted(NOTEBOOKS.glob("*.ipynb")), "notebooks/ is empty: run python -m helpers.build"
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(p.name for p in SOLUTIONS.glob("*.ipynb"))


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_exercise_has_no_solution_left(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        assert "BEGIN SOLUTION" not in cell.source
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def test_run_all_carries_on_past_a_todo_only_with_the_tag(tmp_path):
    """The mechanism the exercise runs rely on: the builder's tag is what lets Run All go on."""
    solution = new_notebook(cells=[
        new_code_cell("### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION"),
        new_code_cell("print('the cell after the TO-DO ran')"),
    ])
    exercise = build_notebook(solution, "09_demo.ipynb")
    assert RAISES in exercise.cells[0].metadata["tags"]
    run(exercise, tmp_path, timeout=60, env=student_env())
    assert exercise.cells[0].outputs[0].ename == "NotImplementedError"
    assert exercise.cells[1].outputs[0].text == "the cell after the TO-DO ran\n"

    untagged = build_notebook(solution, "09_demo.ipynb")
    untagged.cells[0].metadata["tags"].remove(RAISES)
    with pytest.raises(CellExecutionError, match="NotImplementedError"):
        run(untagged, tmp_path, timeout=60, env=student_env())
    assert untagged.cells[1].execution_count is None


def test_nbval_fails_a_solution_cell_that_writes_to_stderr(tmp_path):
    """nbval compares every output except stderr; conftest.py fails a cell that writes there."""
    nb = new_notebook(cells=[new_code_cell("print('fine')"),
                             new_code_cell("import sys\nsys.stderr.write('a pink box\\n')")])
    nbformat.write(nb, tmp_path / "demo.ipynb")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src"), str(ROOT / "tests")])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest", "--nbval",
         "--rootdir", str(tmp_path), str(tmp_path / "demo.ipynb")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout[-2000:]
    assert "1 failed, 1 passed" in proc.stdout, proc.stdout[-2000:]
    assert "wrote to stderr" in proc.stdout and "a pink box" in proc.stdout
