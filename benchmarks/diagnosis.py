"""How many of the corpus's wrong attempts the checks name with a catalogue code.

    python benchmarks/diagnosis.py [NOTEBOOK_PREFIX ...]

Plays every attempt of `tests/corpus/*.yaml` in a kernel, as `tests/test_corpus.py` does, and
prints per notebook: attempts, wrong attempts, how many of those the message names with a code,
and the fraction (target ≥ 80 %); then the wrong attempts left unnamed, so they can be worked on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from corpus.runner import corpus_files, judge_result, load, run_notebook  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("only", nargs="*", help="notebook prefixes (e.g. 01 02); default: all")
    args = ap.parse_args()
    totals = Counter()
    unnamed, problems = [], []
    print(f"{'notebook':36s} {'attempts':>8s} {'wrong':>6s} {'named':>6s} {'named %':>8s}")
    for path in corpus_files():
        if args.only and not any(path.name.startswith(p) for p in args.only):
            continue
        attempts = load(path)
        wrong = named = 0
        for result in run_notebook(attempts[0].notebook, attempts):
            problems += judge_result(result)
            if result.attempt.expect == "fail":
                wrong += 1
                if result.code is not None:
                    named += 1
                else:
                    unnamed.append(f"{result.attempt.name} ({result.attempt.why}): {result.message[:140]}")
        totals.update(attempts=len(attempts), wrong=wrong, named=named)
        share = 100 * named / max(wrong, 1)
        print(f"{attempts[0].notebook:36s} {len(attempts):8d} {wrong:6d} {named:6d} {share:7.1f}%")
    share = 100 * totals["named"] / max(totals["wrong"], 1)
    print(f"{'all':36s} {totals['attempts']:8d} {totals['wrong']:6d} {totals['named']:6d} {share:7.1f}%")
    print(f"target ≥ 80 % named: {'met' if share >= 80 else 'NOT met'}")
    if unnamed:
        print("\nwrong attempts without a code (their message is a plain one):")
        for line in unnamed:
            print("  " + line)
    if problems:
        print(f"\n{len(problems)} attempt(s) did not get the verdict the corpus expects:")
        for p in problems:
            print("  " + p.splitlines()[0][:300])


if __name__ == "__main__":
    main()
