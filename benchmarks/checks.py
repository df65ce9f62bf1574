"""Latency of a student check that has to diagnose a mistake.

    python benchmarks/checks.py [--repeat 20]

For every registered exercise, a wrong answer is made with each of its catalogued
mistakes (or, for an exercise without mistakes, a noisy reference) in the exercise's
framework, and `helpers.checks.judge` — collect, convert, compare, run every wrong
variant — is timed. Reports p50 and p95 over all (exercise, answer) calls, the slowest
exercises, and the number of (exercise, mistake) pairs covered. Target: p95 < 50 ms.
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

from helpers import spec  # noqa: E402
from helpers.checks import judge  # noqa: E402
from helpers.samples import answer_namespace, in_framework  # noqa: E402


def noisy(ex):
    ns = answer_namespace(ex, None)
    if ex.kind == "value":
        return {k: in_framework(np.asarray(v if not hasattr(v, "numpy") else v.numpy(), dtype=float) + 0.37,
                                ex.framework) for k, v in ns.items()}
    f = ns[ex.answers[0]]
    return {ex.answers[0]: lambda *a: in_framework(np.asarray(_np(f(*a))) + 0.37, ex.framework)}


def _np(x):
    from helpers.convert import to_array

    return to_array(x, finite=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    spec._load_all()
    exercises = sorted(spec.REGISTRY.values(), key=lambda e: e.id)
    cases = [(ex, code, answer_namespace(ex, code)) for ex in exercises for code in ex.mistakes]
    cases += [(ex, None, noisy(ex)) for ex in exercises if not ex.mistakes]
    for ex, _code, ns in cases:  # warm-up: imports, first calls
        judge(ex, ns)
    lat, by_ex = [], {}
    for _ in range(args.repeat):
        for ex, code, ns in cases:
            t0 = time.perf_counter()
            outcome = judge(ex, ns)
            dt = (time.perf_counter() - t0) * 1000
            assert outcome.status == "fail" and outcome.diagnosis == code, (ex.id, code, outcome.message)
            lat.append(dt)
            by_ex.setdefault(ex.id, []).append(dt)
    p50, p95 = np.percentile(lat, [50, 95])
    pairs = sum(len(ex.mistakes) for ex in exercises)
    print(f"exercises: {len(exercises)}   (exercise, mistake) pairs: {pairs}   calls timed: {len(lat)}")
    print(f"latency of judge() with diagnosis: p50 {p50:.2f} ms   p95 {p95:.2f} ms   max {max(lat):.2f} ms")
    print("slowest exercises (median ms):")
    for eid, v in sorted(by_ex.items(), key=lambda kv: -np.median(kv[1]))[:5]:
        print(f"  {eid:28s} {np.median(v):7.2f}")
    print(f"target p95 < 50 ms: {'met' if p95 < 50 else 'NOT met'}")


if __name__ == "__main__":
    main()
