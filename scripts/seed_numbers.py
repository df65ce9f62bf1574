"""Record the numbers each seed document prints, as data the tests read (a maintainer's tool).

    python scripts/seed_numbers.py SEEDS_DIR           # (re)write tests/data/seed_numbers.json
    python scripts/seed_numbers.py SEEDS_DIR --check   # exit 1 if the data and the seeds disagree

The seed documents are the public walk-throughs the notebooks follow. They are not part of
this repository, and nothing in it needs them to build or test: tests/test_seed_numbers.py
reads only the facts kept here, for each seed (named as its exercise module's ``SEED``) every
decimal number it prints, exactly as printed, since the printed precision is the precision
the test compares at. Run this once when a seed is added or changes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "seed_numbers.json"

# A decimal number as printed: "0.5", "-1.25", "6.3379e-02". Integers are not counted (they
# are indices, sizes and step numbers far more often than results).
NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?(?![\w.])", re.IGNORECASE)


def numbers(text: str) -> list[str]:
    """Every distinct number token of ``text``, exactly as written, sorted."""
    return sorted(set(NUMBER.findall(text)))


def collect(seeds: Path) -> dict[str, list[str]]:
    found = {p.name: numbers(p.read_text(encoding="utf-8")) for p in sorted(seeds.glob("*.txt"))}
    if not found:
        raise SystemExit(f"error: no seed documents (*.txt) in {seeds}")
    return found


def render(data: dict[str, list[str]]) -> str:
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/seed_numbers.py", description=__doc__.split("\n")[0])
    ap.add_argument("seeds", type=Path, help="the folder holding the seed documents")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the data is stale")
    args = ap.parse_args(argv)
    text = render(collect(args.seeds))
    if args.check:
        if not DATA.exists() or DATA.read_text(encoding="utf-8") != text:
            print(f"stale: {DATA.name} does not match the seeds in {args.seeds}", file=sys.stderr)
            return 1
        print(f"{DATA.name} matches the seeds")
        return 0
    DATA.parent.mkdir(parents=True, exist_ok=True)
    DATA.write_text(text, encoding="utf-8")
    print(f"wrote {DATA.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
