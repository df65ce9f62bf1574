"""Every kernel these tests start inherits ``HELPERS_CHECK_SEED``: the checks then draw their fresh
inputs from that seed (one generator per exercise), so a run of the suite judges every attempt on the
same inputs as the last one and a failure can be replayed exactly. How the verdicts hold up over
other draws is measured by ``benchmarks/draws.py``, which plays the corpus under many seeds.
Set ``HELPERS_CHECK_SEED`` yourself to run the suite on another draw."""

import os

os.environ.setdefault("HELPERS_CHECK_SEED", "2026")
