"""How fast does the grader get through a class, next to what a kernel per notebook costs?

    python benchmarks/grade.py [--n 100] [--jobs 2] [--notebook solutions/01_….ipynb] [--keep DIR]

Grades N submissions in a temporary folder — half copies of a solution notebook, half copies
of a wrong version of it (a softmax over the wrong axis and the scores transposed, so the
wrong answers go through the diagnosis) — with ``python -m helpers.grade`` in the sandbox,
exactly as an instructor would, and reports the seconds per submission.

Measured in the same run, for comparison:

- the floor of the usual way (one kernel per submission): a Jupyter kernel start (nbclient
  running an empty notebook) plus ``python -c "import <the notebook's frameworks>"``;
- the notebook's own compute: its code cells run once in a process that already imported
  everything (what no grader can avoid).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from helpers.execute import QUIET_ENV  # noqa: E402

DEFAULT = ROOT / "solutions" / "01_illustrated_self_attention.ipynb"
FRAMEWORKS = {"torch": "torch", "tensorflow": "tensorflow", "numpy": "numpy", "matplotlib": "matplotlib.pyplot"}
WRONG = [  # (pattern, replacement): catalogued mistakes the diagnosis should name
    (r"softmax\(attn_scores, dim=-1\)", "softmax(attn_scores, dim=0)"),
    (r"nn\.softmax\(attn_scores, axis=-1\)", "nn.softmax(attn_scores, axis=0)"),
]


def frameworks_of(path: Path) -> list[str]:
    src = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    return [mod for name, mod in FRAMEWORKS.items() if re.search(rf"^\s*(import|from) {name}\b", src, re.M)]


def kernel_start() -> float:
    """nbclient: start a kernel, run one empty cell, shut it down."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("pass")])
    t0 = time.perf_counter()
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return time.perf_counter() - t0


def import_time(modules: list[str]) -> float:
    code = "; ".join(f"import {m}" for m in modules) or "pass"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, **QUIET_ENV},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


_COMPUTE = r"""
import os, sys, time, json, tempfile
import nbformat
from helpers.grading import zygote
zygote.preload(1)
shell = zygote.make_shell()
cells = [c.source for c in nbformat.read(sys.argv[1], as_version=4).cells if c.cell_type == "code"]
os.chdir(tempfile.mkdtemp())
sys.stdout = zygote._Swallow(1)
t0 = time.perf_counter()
for src in cells:
    shell.run_cell(src, store_history=True)
sys.__stdout__.write(json.dumps(time.perf_counter() - t0))
"""


def notebook_compute(path: Path) -> float:
    env = {**os.environ, **QUIET_ENV, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
           "TF_NUM_INTEROP_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _COMPUTE, str(path)], check=True, capture_output=True, text=True,
                         env=env, cwd=ROOT)
    return float(out.stdout.strip().splitlines()[-1])


def wrong_version(path: Path) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    changed = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            for pattern, repl in WRONG:
                cell.source, n = re.subn(pattern, repl, cell.source)
                changed += n
    if not changed:
        sys.exit(f"{path.name}: none of the benchmark's mistakes applies; pass a notebook 01-like solution")
    return nb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100, help="submissions (half solutions, half wrong)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--notebook", type=Path, default=DEFAULT)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--keep", type=Path, help="grade into this folder and keep it (default: a temporary one)")
    ap.add_argument("--no-sandbox", action="store_true")
    args = ap.parse_args()
    os.environ.update(QUIET_ENV)

    work = Path(tempfile.mkdtemp(prefix="grade-bench-")) if args.keep is None else args.keep
    subs, out = work / "submissions", work / "grades"
    shutil.rmtree(subs, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    wrong = wrong_version(args.notebook)
    for i in range(args.n):
        dest = subs / f"student{i:03d}" / args.notebook.name
        dest.parent.mkdir(parents=True)
        if i % 2 == 0:
            shutil.copyfile(args.notebook, dest)
        else:
            nbformat.write(wrong, dest)

    cmd = [sys.executable, "-m", "helpers.grade", str(subs), "--out", str(out), "--jobs", str(args.jobs),
           "--timeout", str(args.timeout), "--quiet"] + (["--no-sandbox"] if args.no_sandbox else [])
    print("$", " ".join(cmd[1:]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"the grader failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    statuses = {r["status"] for r in rows}
    right = [r for r in rows if int(r["student"][7:]) % 2 == 0]
    bad = [r for r in rows if int(r["student"][7:]) % 2 == 1]
    assert len(rows) == args.n and statuses == {"graded"}, statuses
    assert all(r["score"] == r["max_score"] for r in right), "a copy of the solution lost points"
    assert all(r["score"] < r["max_score"] for r in bad), "a wrong copy got full marks"
    diagnoses = sorted({e["diagnosis"] for r in bad for e in r["exercises"] if e["diagnosis"]})

    mods = frameworks_of(args.notebook)
    kernel = statistics.median(kernel_start() for _ in range(3))
    imports = statistics.median(import_time(mods) for _ in range(3))
    compute = statistics.median(notebook_compute(args.notebook) for _ in range(2))
    inside = [r["seconds"] for r in rows if r.get("seconds")]
    floor = kernel + imports
    per = wall / args.n
    print(f"graded {args.n} submissions of {args.notebook.name} ({len(right)} solutions: "
          f"{right[0]['score']}/{right[0]['max_score']}; {len(bad)} wrong: diagnosed {', '.join(diagnoses)})")
    print(f"  wall time          {wall:7.1f} s with --jobs {args.jobs} on {os.cpu_count()} CPUs "
          f"= {per:.2f} s per submission")
    print(f"  in the sandbox     {statistics.mean(inside):7.2f} s per submission (fork, run, record, clean up; "
          f"mean), {wall - sum(inside) / args.jobs:.1f} s of start-up and overhead in the batch")
    print(f"  notebook compute   {compute:7.2f} s (its cells in an already warm process: the irreducible part)")
    print(f"  floor, 1 kernel    {floor:7.2f} s = kernel start {kernel:.2f} s + import {', '.join(mods)} "
          f"{imports:.2f} s; {floor / args.jobs:.2f} s per submission with {args.jobs} in parallel")
    print(f"  ratio              {per / (floor / args.jobs):7.2f} of the floor (per submission, same parallelism)")
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
