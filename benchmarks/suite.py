"""How close is the notebook part of the test suite to its floor?

    python benchmarks/suite.py [--workers 2] [--repeat 1]

Suite: the wall time of the notebook part of `make test` — nbval over solutions/ plus the
untouched exercise notebooks (the `TestExercise_*` classes) — run as `make test` runs it
(`pytest -n WORKERS --dist loadscope`).

Floor: what no runner can avoid. For every notebook that part executes (each solution and
each exercise notebook), start a kernel and import the frameworks that notebook imports
(torch, tensorflow, keras, numpy, matplotlib, helpers), measured in the same run; summed and divided
by the number of workers.

Prints both and their ratio (the target is ≤ 1.5).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import start_new_kernel

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from helpers.execute import QUIET_ENV  # noqa: E402

IMPORTS = {
    "torch": "import torch",
    "tensorflow": "import tensorflow",
    "keras": "import keras",
    "numpy": "import numpy",
    "matplotlib": "import matplotlib.pyplot",
    "helpers": "import helpers",
}


def frameworks(path: Path) -> list[str]:
    src = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    return [name for name in IMPORTS if re.search(rf"^\s*(import|from) {name}\b", src, re.MULTILINE)]


def floor_of(path: Path) -> float:
    """Kernel start plus the notebook's framework imports, in seconds."""
    code = "\n".join(IMPORTS[f] for f in frameworks(path)) or "pass"
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(path.parent))
    try:
        reply = kc.execute_interactive(code, timeout=300)
        assert reply["content"]["status"] == "ok", reply["content"]
        return time.perf_counter() - t0
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def suite_time(workers: int) -> float:
    # the notebook runs only: the file's other tests (the builder's tag on a two-cell notebook, nbval failing a
    # cell that writes to stderr) start kernels of their own that the floor does not count
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), "--dist", "loadscope",
           "--nbval", "solutions", "tests/test_exercise_notebooks.py", "-k", "ipynb or TestExercise_"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit("the notebook tests failed:\n" + proc.stdout[-3000:])
    print(proc.stdout.strip().splitlines()[-1])
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="suite runs; the median is reported")
    args = ap.parse_args()
    os.environ.update(QUIET_ENV)
    notebooks = sorted((ROOT / "solutions").glob("*.ipynb")) + sorted((ROOT / "notebooks").glob("*.ipynb"))
    per = {}
    for nb in notebooks:
        per[nb] = floor_of(nb)
        print(f"floor {nb.parent.name}/{nb.name:45s} {per[nb]:6.2f} s  ({', '.join(frameworks(nb))})")
    floor = sum(per.values()) / args.workers
    runs = [suite_time(args.workers) for _ in range(args.repeat)]
    suite = statistics.median(runs)
    print(f"\nnotebooks executed : {len(notebooks)}")
    print(f"floor (sum / {args.workers})   : {floor:7.2f} s")
    print(f"suite (median of {args.repeat}): {suite:7.2f} s   runs: {', '.join(f'{r:.1f}' for r in runs)}")
    print(f"suite / floor      : {suite / floor:7.2f}   (target ≤ 1.5)")


if __name__ == "__main__":
    main()
