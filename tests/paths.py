"""Paths shared by the tests (the repository-wide pytest set-up is in the top-level conftest.py)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
NOTEBOOKS = ROOT / "notebooks"
