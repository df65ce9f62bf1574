"""pytest set-up for the whole repository (nbval over solutions/ and the tests/)."""

import os

from helpers.execute import QUIET_ENV

os.environ.update(QUIET_ENV)  # every kernel nbval or nbclient starts inherits this


def pytest_collectstart(collector):
    # Kernel stderr is not reliably seen by nbval under pytest, and TensorFlow's C++
    # start-up lines land there: compare every output except stderr.
    if hasattr(collector, "skip_compare"):
        collector.skip_compare += ("stderr",)
