"""Every number a seed document prints appears in the stored outputs of its notebook.

A seed's numbers are facts the course reproduces. Numbers are compared by value at the
precision the seed printed them with (the seed's `6.3379e-02` is found in an output
`6.3379e-02`; its `0.5` in `0.5000`). A number a seed prints that cannot be reproduced
is listed in its exercise module's ``SEED_EXCUSED`` with the reason (and the notebook
says so too). Each ``helpers/course/exercises/nbNN.py`` names its seed in ``SEED``.
"""

import importlib
import math
import pkgutil
import re

import nbformat
import pytest

import helpers.course.exercises
from paths import SEEDS, SOLUTIONS

_MODULES = [
    importlib.import_module(f"helpers.course.exercises.{m.name}")
    for m in pkgutil.iter_modules(helpers.course.exercises.__path__)
]
NOTEBOOK_OF_SEED = {m.SEED: m.NOTEBOOK for m in _MODULES if getattr(m, "SEED", None)}
EXCUSED = {m.SEED: getattr(m, "SEED_EXCUSED", {}) for m in _MODULES if getattr(m, "SEED", None)}

NUMBER = re.compile(r"(?<![\w.])-?\d+\.\d+(?:e[-+]?\d+)?(?![\w.])", re.IGNORECASE)


def _tolerance(token: str) -> float:
    mant, _, exp = token.lower().partition("e")
    decimals = len(mant.split(".")[1])
    return 0.5 * 10 ** (-decimals) * (10 ** int(exp) if exp else 1)


def _output_numbers(nb) -> list[float]:
    vals = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "") + str(out.get("data", {}).get("text/plain", ""))
            vals += [float(t) for t in NUMBER.findall(text)]
    return vals


@pytest.mark.parametrize("seed, notebook", sorted(NOTEBOOK_OF_SEED.items()))
def test_seed_numbers_appear_in_outputs(seed, notebook):
    text = (SEEDS / seed).read_text(encoding="utf-8")
    have = _output_numbers(nbformat.read(SOLUTIONS / f"{notebook}.ipynb", as_version=4))
    excused = EXCUSED.get(seed, {})
    missing = []
    for token in sorted(set(NUMBER.findall(text))):
        if token in excused:
            continue
        want, tol = float(token), _tolerance(token)
        if not any(math.isclose(v, want, abs_tol=tol * 1.0001) for v in have):
            missing.append(token)
    assert not missing, f"{notebook} never prints these numbers of {seed}: {missing}"


def test_every_seed_has_a_notebook():
    seeds = sorted(p.name for p in SEEDS.glob("*.txt"))
    assert seeds, f"no seed documents found in {SEEDS.name}/"
    assert sorted(NOTEBOOK_OF_SEED) == seeds
