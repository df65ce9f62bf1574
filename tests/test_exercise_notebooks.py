"""Every exercise notebook, untouched, runs top to bottom: the only errors are the TO-DO
placeholders and every check says "not done yet".

One test class per notebook, so `pytest -n 2 --dist loadscope` spreads the notebooks
over the workers (a class is a scope).
"""

import re

import nbformat
import pytest

from helpers.build import PLACEHOLDER, check_calls
from helpers.execute import is_framework_noise, run
from paths import NOTEBOOKS

PLACEHOLDER_LINE = PLACEHOLDER[1].format(indent="")


def _text(out):
    if out.output_type == "stream":
        return out.text
    if out.output_type in ("execute_result", "display_data"):
        return str(out.get("data", {}).get("text/plain", ""))
    return ""


def _run_untouched(path):
    nb = nbformat.read(path, as_version=4)
    run(nb, path.parent, timeout=300, allow_errors=True)
    problems = []
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
            elif out.output_type == "stream" and out.name == "stderr" and not is_framework_noise(out.text):
                problems.append(f"{where}: wrote to stderr: {out.text.strip()[:200]}")
        for ex_id in check_calls(cell.source):
            text = "".join(_text(o) for o in cell.outputs)
            lines = [ln for ln in text.splitlines() if re.match(rf"^\S+ {re.escape(ex_id)} — ", ln)]
            if not lines:
                problems.append(f"{where}: check({ex_id!r}) printed no verdict")
            for ln in lines:
                if not ln.startswith(f"⏳ {ex_id} — not done yet"):
                    problems.append(f"{where}: check({ex_id!r}) should say not done yet, said: {ln}")
    return problems


def _make_class(path):
    def test_untouched_notebook_runs_with_only_placeholders_failing(self):
        problems = _run_untouched(path)
        assert not problems, "\n".join(problems)

    name = "TestExercise_" + re.sub(r"\W", "_", path.stem)
    return name, type(name, (), {"test_untouched_notebook_runs_with_only_placeholders_failing":
                                  test_untouched_notebook_runs_with_only_placeholders_failing})


for _path in sorted(NOTEBOOKS.glob("*.ipynb")):
    _name, _cls = _make_class(_path)
    globals()[_name] = _cls


def test_there_are_exercise_notebooks():
    assert sorted(NOTEBOOKS.glob("*.ipynb")), "notebooks/ is empty: run python -m helpers.build"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_exercise_has_no_solution_left(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        assert "BEGIN SOLUTION" not in cell.source
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
