"""How the corpus's verdicts hold up over the checks' random draws.

    python benchmarks/draws.py [--seeds 1-8] [--jobs 2] [NOTEBOOK_PREFIX ...]

The test suite plays the corpus (`tests/corpus/*.yaml`) with one fixed seed for the checks' fresh
inputs (`HELPERS_CHECK_SEED`, set in `conftest.py`), so a run is reproducible. A student's check
draws anew every time, so a verdict that depends on the draw is a bug even when the suite's seed hides
it. This plays the whole corpus once per seed (each seed a separate run, `--jobs` of them at a time)
and prints every attempt that did not get the verdict the corpus expects, with the seeds it failed
on: `HELPERS_CHECK_SEED=S python -m pytest tests/test_corpus.py` replays one exactly.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_ONE_SEED = r"""
import sys
sys.path[:0] = [{src!r}, {tests!r}]
from corpus.runner import corpus_files, judge_result, load, run_notebook
only = {only!r}
n = 0
for path in corpus_files():
    if only and not any(path.name.startswith(p) for p in only):
        continue
    attempts = load(path)
    for result in run_notebook(attempts[0].notebook, attempts):
        n += 1
        for problem in judge_result(result):
            print("PROBLEM " + problem.splitlines()[0][:400], flush=True)
print(f"PLAYED {{n}}", flush=True)
"""


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def play(seed: int, only: list[str]) -> tuple[int, int, list[str]]:
    env = {**os.environ, "HELPERS_CHECK_SEED": str(seed), "TF_CPP_MIN_LOG_LEVEL": "3",
           "TF_ENABLE_ONEDNN_OPTS": "0"}
    code = _ONE_SEED.format(src=str(ROOT / "src"), tests=str(ROOT / "tests"), only=only)
    run = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    lines = run.stdout.splitlines()
    played = next((int(x.split()[1]) for x in lines if x.startswith("PLAYED ")), 0)
    problems = [x[len("PROBLEM "):] for x in lines if x.startswith("PROBLEM ")]
    if run.returncode:
        problems.append(f"(seed {seed}: the run itself failed: {run.stderr.strip().splitlines()[-1:]})")
    return seed, played, problems


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("only", nargs="*", help="notebook prefixes (e.g. 05 06); default: all")
    ap.add_argument("--seeds", default="1-4", help="seeds to play, e.g. 1-8 or 3,7,11 (default 1-4)")
    ap.add_argument("--jobs", type=int, default=2, help="seeds played at the same time (default 2)")
    args = ap.parse_args()
    seeds = _seeds(args.seeds)
    failed_on: dict[str, list[int]] = defaultdict(list)
    played = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for seed, n, problems in pool.map(lambda s: play(s, args.only), seeds):
            played += n
            print(f"seed {seed}: {n} attempts played, {len(problems)} without the expected verdict", flush=True)
            for p in problems:
                failed_on[p.split(" ", 1)[0].rstrip(":")].append(seed)
                print("  " + p[:300], flush=True)
    print(f"\n{played} plays over {len(seeds)} seeds; {sum(map(len, failed_on.values()))} plays without the "
          f"expected verdict, {len(failed_on)} distinct attempts")
    for name, on in sorted(failed_on.items()):
        print(f"  {name}: seeds {', '.join(map(str, on))}")


if __name__ == "__main__":
    main()
