"""pytest set-up for the whole repository (nbval over solutions/ and the tests/)."""

import os
import re
import sys
from pathlib import Path

import pytest

from helpers.execute import QUIET_ENV

sys.path.insert(0, str(Path(__file__).parent / "tests"))  # tests/frameworks.py

os.environ.update(QUIET_ENV)  # every kernel nbval or nbclient starts inherits this
# ... and this: the checks then draw their fresh inputs from one seed (a generator per exercise), so a run of the
# suite judges every attempt on the same inputs as the last run and a failure can be replayed exactly. How the
# verdicts hold up over other draws is measured by benchmarks/draws.py, which plays the corpus under many seeds.
# Set HELPERS_CHECK_SEED yourself to run the suite on another draw.
os.environ.setdefault("HELPERS_CHECK_SEED", "2026")


def pytest_collectstart(collector):
    # Kernel stderr is not reliably seen by nbval under pytest, and TensorFlow's C++
    # start-up lines land there: compare every output except stderr.
    if hasattr(collector, "skip_compare"):
        collector.skip_compare += ("stderr",)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    # ... but a solution cell that writes to stderr while nbval runs it fails: a student would
    # see that as a pink box. (What nbval received is `item.test_outputs`.)
    result = yield
    written = [out.text for out in getattr(item, "test_outputs", None) or []
               if out.get("output_type") == "stream" and out.get("name") == "stderr"]
    if written:
        raise AssertionError(f"{item.nodeid} wrote to stderr:\n" + "".join(written)[:1500])
    return result


# --- scheduling: longest scopes first ---------------------------------------------------
# `pytest -n 2 --dist loadscope` hands whole scopes (a notebook, a test class, a module) to
# the workers in collection order. Starting with the longest ones keeps the two workers busy
# until the end instead of leaving one alone with a TensorFlow notebook (LPT scheduling).
# The order inside a scope is kept: nbval runs a notebook's cells in order.
_SLOW_MODULES = {  # rough seconds on 2 cores; notebooks are estimated from their imports
    "test_grade_attacks.py": 60,
    "test_grade.py": 40,
    "test_browser.py": 35,
    "test_feedback_page.py": 25,
    "test_environment.py": 40,
    "test_checks.py": 20,
    "test_properties.py": 30,
}


def _scope(item):
    return item.nodeid.rsplit("::", 1)[0] if "::" in item.nodeid else item.nodeid


def _cost(item, cache={}):  # noqa: B006 (a per-run memo)
    scope = _scope(item)
    if scope not in cache:
        path = item.path
        classes = ("TestExercise_", "TestCorpus_")
        if path.suffix == ".ipynb" or any(c in scope for c in classes):
            if path.suffix == ".ipynb":
                name = path.name
            else:
                name = scope.split(next(c for c in classes if c in scope))[1][3:] + ".ipynb"
            source = next(iter(path.parent.parent.glob(f"solutions/*{name}")), path).read_text(errors="ignore")
            uses_tf = "import tensorflow" in source or "import keras" in source or "import_tensorflow" in source
            cache[scope] = (12 if uses_tf else 6) + (8 if "TestCorpus_" in scope else 0)
        else:
            cache[scope] = _SLOW_MODULES.get(path.name, 1)
    return cache[scope]


# --- frameworks: what a test needs, skipped with the reason where it is not installed ---------
# Notebooks (nbval, the untouched exercise runs, the corpus) need what they import; these test
# modules run notebooks or the grader on them.
_MODULE_NEEDS = {
    "test_grade.py": ("torch", "tensorflow"),
    "test_grade_attacks.py": ("torch", "tensorflow"),
    "test_feedback_page.py": ("torch", "tensorflow"),
    "test_browser.py": ("torch", "tensorflow"),
}
_IMPORTS = {"torch": re.compile(r"^\s*(?:import|from)\s+torch\b", re.M),
            "tensorflow": re.compile(r"^\s*(?:import|from)\s+(?:tensorflow|keras)\b|import_tensorflow", re.M)}


def _notebook_of(item) -> Path | None:
    scope = _scope(item)
    if item.path.suffix == ".ipynb":
        return item.path
    for cls in ("TestExercise_", "TestCorpus_"):
        if cls in scope:
            name = scope.split(cls)[1][3:] + ".ipynb"
            return next(iter(item.path.parent.parent.glob(f"solutions/*{name}")), None)
    return None


def _needs(item, cache={}):  # noqa: B006 (a per-run memo)
    nb = _notebook_of(item)
    if nb is not None:
        if nb not in cache:
            source = nb.read_text(errors="ignore")
            cache[nb] = tuple(f for f, rx in _IMPORTS.items() if rx.search(source))
        return cache[nb]
    return _MODULE_NEEDS.get(item.path.name, ())


def pytest_collection_modifyitems(items):
    from frameworks import missing

    for item in items:
        gone = missing(_needs(item))
        if gone:
            item.add_marker(pytest.mark.skip(reason=f"needs {', '.join(gone)}, which is not installed here"))
    items.sort(key=_cost, reverse=True)  # stable: keeps each scope's own order
