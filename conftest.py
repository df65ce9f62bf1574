"""pytest set-up for the whole repository (nbval over solutions/ and the tests/)."""

import os

from helpers.execute import QUIET_ENV

os.environ.update(QUIET_ENV)  # every kernel nbval or nbclient starts inherits this


def pytest_collectstart(collector):
    # Kernel stderr is not reliably seen by nbval under pytest, and TensorFlow's C++
    # start-up lines land there: compare every output except stderr.
    if hasattr(collector, "skip_compare"):
        collector.skip_compare += ("stderr",)


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


def pytest_collection_modifyitems(items):
    items.sort(key=_cost, reverse=True)  # stable: keeps each scope's own order
