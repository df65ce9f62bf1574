"""Which deep-learning frameworks this environment has.

A test that needs PyTorch or TensorFlow skips, with the reason, where it is missing (a course
taught with one framework only, a machine without the other), instead of failing on the import.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

__all__ = ["available", "missing", "needs"]

_IMPORT = {"torch": "torch", "tensorflow": "tensorflow"}


def available(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing(frameworks) -> list[str]:
    return sorted({f for f in frameworks if f in _IMPORT and not available(_IMPORT[f])})


def needs(*frameworks: str | None) -> list[pytest.MarkDecorator]:
    """Marks for a test (or a parameter) that needs these frameworks."""
    gone = missing(f for f in frameworks if f)
    return [pytest.mark.skip(reason=f"needs {', '.join(gone)}, which is not installed here")] if gone else []
