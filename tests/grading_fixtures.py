"""Notebooks for the grader's tests, built in code from notebook 01.

``minimal(...)`` is a small notebook recognised as notebook 01 (by its metadata id) that holds
the given data and whatever cells a test adds; ``TORCH_ANSWERS`` computes the PyTorch half's
seven answers and ``TORCH_CHECKS`` checks them, so a minimal notebook with both scores 7 of 14
(the TensorFlow half is not done) without importing TensorFlow. Copies of the real solution
and exercise notebooks are used where the full notebook matters.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from paths import NOTEBOOKS, ROOT, SOLUTIONS

NB_ID = "01_illustrated_self_attention"
FILE = f"{NB_ID}.ipynb"
SOLUTION = SOLUTIONS / FILE
EXERCISE = NOTEBOOKS / FILE
TORCH_IDS = ["01.x", "01.weights", "01.qkv", "01.scores", "01.softmax", "01.outputs", "01.outputs_rounded"]
MAX_SCORE = 14
PYTHON = sys.executable

SETUP = """\
import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import torch

from helpers import check

x_list = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
w_key_list = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
w_query_list = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
w_value_list = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
rounded_weights = torch.tensor([[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.0, 0.9, 0.1]])
"""

TORCH_ANSWERS = [
    "x = torch.tensor(x_list, dtype=torch.float32)",
    "w_key = torch.tensor(w_key_list, dtype=torch.float32)\n"
    "w_query = torch.tensor(w_query_list, dtype=torch.float32)\n"
    "w_value = torch.tensor(w_value_list, dtype=torch.float32)",
    "keys = x @ w_key\nqueries = x @ w_query\nvalues = x @ w_value",
    "attn_scores = queries @ keys.T",
    "attn_weights = torch.softmax(attn_scores, dim=-1)",
    "outputs = attn_weights @ values",
    "outputs_rounded = rounded_weights @ values",
]
TORCH_CHECKS = [f'check("{i}")' for i in TORCH_IDS]


def interleaved(answers: list[str] = TORCH_ANSWERS, checks: list[str] = TORCH_CHECKS) -> list[str]:
    """Answer, check, answer, check … as a student's notebook has them."""
    return [cell for pair in zip(answers, checks) for cell in pair]


def minimal(*cells: str, notebook_id: str | None = NB_ID, markdown: str = "A test notebook.") -> nbformat.NotebookNode:
    nb = new_notebook(cells=[new_markdown_cell(markdown), new_code_cell(SETUP)] + [new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if notebook_id:
        nb.metadata["attention_course"] = {"notebook_id": notebook_id, "kind": "exercise"}
    return nb


def good_minimal() -> nbformat.NotebookNode:
    return minimal(*interleaved())


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def place(root: Path, student: str, nb: nbformat.NotebookNode | Path, name: str = FILE) -> Path:
    """Put a notebook (or a copy of a file) into ``root/<student>/<name>``."""
    dest = root / student / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(nb, Path):
        shutil.copyfile(nb, dest)
        return dest
    return write(nb, dest)


def with_stored_output(nb: nbformat.NotebookNode, text: str, cell: int = 1) -> nbformat.NotebookNode:
    nb.cells[cell].outputs = [new_output("stream", name="stdout", text=text)]
    return nb


def read_rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def rows_by_student(out: Path) -> dict[str, dict]:
    return {r["student"]: r for r in read_rows(out)}


def outcome(row: dict, exercise_id: str) -> dict:
    return next(e for e in row["exercises"] if e["id"] == exercise_id)


def run_grader(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m helpers.grade ...`` in a subprocess (as an instructor runs it)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([PYTHON, "-m", "helpers.grade", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)


def pad(source: str, kilobytes: int) -> str:
    """Make a cell long, so the grader (which runs long notebooks first) takes it early."""
    return source + "\n" + "\n".join("# " + "padding " * 12 for _ in range(kilobytes * 10))
