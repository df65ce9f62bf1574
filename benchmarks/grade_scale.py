"""How long does a big class take, on one machine and on several?

    python benchmarks/grade_scale.py [--n 1000] [--jobs 2] [--machines 1,2,4,8,16,32] [--keep DIR]

Makes a class of N submissions that mixes every course notebook (round robin over the
notebooks; for each, alternately the solution and the untouched exercise, so both the full
compute and the many "not done yet" steps are in it), grades it with
``python -m helpers.grade --jobs J`` in the sandbox exactly as an instructor would, and merges
the output once (``python -m helpers.grade merge``), as the last step of a sharded run does.

Prints the wall time, the seconds per submission, and the projected wall time of the class on
M machines like this one, each grading one shard of N/M submissions:
``start-up + (N/M) × seconds per submission + merge``. The projection assumes shards of equal
work (the stable hash spreads every notebook evenly over the shards; see
``helpers.grading.shards``) and storage every machine reaches; it leaves out the scheduler's
own start-up (queueing, pulling an image).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def make_class(root: Path, n: int) -> dict[str, int]:
    """N submissions, ``root/student0000/<notebook>.ipynb``, mixed over the notebooks; per notebook, how many."""
    notebooks = sorted(p.name for p in (ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    counts: dict[str, int] = {}
    for i in range(n):
        name = notebooks[i % len(notebooks)]
        source = ROOT / ("solutions" if (i // len(notebooks)) % 2 == 0 else "notebooks") / name
        dest = root / f"student{i:04d}" / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        counts[name] = counts.get(name, 0) + 1
    return counts


def startup_seconds(jobs: int, timeout: float) -> float:
    """A grader run on a class of one tiny notebook: import, sandbox and warm workers, outputs."""
    with tempfile.TemporaryDirectory(prefix="grade-startup-") as tmp:
        make_class(Path(tmp) / "class", 1)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "helpers.grade", str(Path(tmp) / "class"), "--out",
                        str(Path(tmp) / "out"), "--jobs", str(jobs), "--quiet", "--timeout", str(timeout)],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="submissions (default 1000)")
    ap.add_argument("--jobs", type=int, default=2, help="--jobs of the grader (default 2)")
    ap.add_argument("--machines", default="1,2,4,8,16,32", help="machine counts to project (default 1,2,4,8,16,32)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", type=Path, help="make and grade the class in this folder and keep it")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="grade-scale-"))
    try:
        if (work / "class").exists():
            shutil.rmtree(work / "class")
        for sub in ("out", "merged"):
            shutil.rmtree(work / sub, ignore_errors=True)
        counts = make_class(work / "class", args.n)
        print(f"class: {args.n} submissions in {work / 'class'}: "
              + ", ".join(f"{name[:2]}: {k}" for name, k in sorted(counts.items())))
        print(f"machine: {os.cpu_count()} CPU(s); grading with --jobs {args.jobs} …", flush=True)
        start = startup_seconds(args.jobs, args.timeout)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "helpers.grade", str(work / "class"), "--out", str(work / "out"),
                               "--jobs", str(args.jobs), "--quiet", "--timeout", str(args.timeout)],
                              cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"the grader exited with {proc.returncode}")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "helpers.grade", "merge", str(work / "out"), "--out",
                        str(work / "merged")], check=True, cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        merge = time.perf_counter() - t0
        per = max(0.0, wall - start) / args.n
        print(proc.stderr.strip().splitlines()[-1])
        print(f"\nwall time: {wall:.1f} s for {args.n} submissions = {wall / args.n:.3f} s per submission "
              f"({per:.3f} s after a start-up of {start:.1f} s); merging the output: {merge:.1f} s")
        print(f"\nprojected wall time for N={args.n} on M machines like this one (--jobs {args.jobs} each):")
        for m in (int(x) for x in args.machines.split(",") if x.strip()):
            shard = -(-args.n // m)
            total = start + shard * per + (merge if m > 1 else 0.0)
            print(f"  M={m:>3}: {shard:>5} submissions per shard → {total / 60:6.1f} min")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
