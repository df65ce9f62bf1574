"""Latency of a student check that has to diagnose a mistake — and that it names it every time.

    python benchmarks/checks.py [--repeat 20]

For every registered exercise, a wrong answer is made with each of its catalogued mistakes (and
the right answer too), in the exercise's framework, with its "cell" for the replays on fresh
inputs, and `helpers.checks.judge` — draw fresh inputs, replay or call on them, convert, compare,
run every wrong variant — is timed. Every call draws new random inputs, so each run of this
script also checks that every mistake is named on every draw (issue: diagnosis must not depend
on the draw), lists the calls that were not, and exits 1 if any. Reports p50 and p95 over all calls and the
slowest exercises. Target: p95 < 50 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

from helpers.checks import judge  # noqa: E402
from helpers.course import spec  # noqa: E402
from helpers.course.samples import answer_namespace, student_cell  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    spec._load_all()
    exercises = sorted(spec.REGISTRY.values(), key=lambda e: e.id)
    cases = []
    for ex in exercises:
        fw = ex.framework or "numpy"
        for code in [None, *ex.mistakes]:
            cell = student_cell(ex, code, fw) if ex.kind == "value" else None
            cases.append((ex, code, answer_namespace(ex, code, fw), cell))
    for ex, _code, ns, cell in cases:  # warm-up: imports, first calls
        judge(ex, ns, cell=cell)
    lat, by_ex, misses = [], {}, []
    rng = np.random.default_rng()  # fresh draws on every run
    for _ in range(args.repeat):
        for ex, code, ns, cell in cases:
            t0 = time.perf_counter()
            outcome = judge(ex, ns, rng, cell=cell)
            dt = (time.perf_counter() - t0) * 1000
            # (a miss is reported, not raised: the latency of the whole run is still measured)
            if code is None and outcome.status != "pass":
                misses.append((ex.id, "the right answer", outcome.message))
            elif code is not None and (outcome.status != "fail" or outcome.diagnosis != spec.code_of(code)):
                misses.append((ex.id, code, outcome.message))
            lat.append(dt)
            by_ex.setdefault(ex.id, []).append(dt)
    p50, p95 = np.percentile(lat, [50, 95])
    pairs = sum(len(ex.mistakes) for ex in exercises)
    print(f"exercises: {len(exercises)}   (exercise, mistake) pairs: {pairs}   calls timed: {len(lat)}")
    if misses:
        print(f"{len(misses)} of {len(lat)} calls did not give the expected verdict:")
        for eid, what, message in misses:
            print(f"  {eid} ({what}): {message[:200]}")
    else:
        print(f"every mistake named on every one of {args.repeat} fresh draws; every right answer passed")
    print(f"latency of judge() with replay and diagnosis: p50 {p50:.2f} ms   p95 {p95:.2f} ms   max {max(lat):.2f} ms")
    print("slowest exercises (median ms):")
    for eid, v in sorted(by_ex.items(), key=lambda kv: -np.median(kv[1]))[:5]:
        print(f"  {eid:28s} {np.median(v):7.2f}")
    print(f"target p95 < 50 ms: {'met' if p95 < 50 else 'NOT met'}")
    if misses:
        sys.exit(1)


if __name__ == "__main__":
    main()
