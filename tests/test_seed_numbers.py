"""Every number a seed document prints appears in the stored outputs of its notebook.

A seed's numbers are facts the course reproduces. They are kept in tests/data/seed_numbers.json
(written by ``python scripts/seed_numbers.py SEEDS_DIR`` from the seed documents, which are not
part of this repository): for each seed, every decimal number it prints, exactly as printed.
Numbers are compared by value at the precision the seed printed them with (the seed's
`6.3379e-02` is found in an output `6.3379e-02`; its `0.5` in `0.5000`). A number a seed
prints that cannot be reproduced is listed in its exercise module's ``SEED_EXCUSED`` with the
reason (and the notebook says so too). Each ``helpers/course/exercises/nbNN.py`` names its seed in ``SEED``.
"""

import copy
import importlib
import importlib.util
import json
import math
import pkgutil

import nbformat
import pytest

import helpers.course.exercises
from paths import ROOT, SOLUTIONS

_MODULES = [
    importlib.import_module(f"helpers.course.exercises.{m.name}")
    for m in pkgutil.iter_modules(helpers.course.exercises.__path__)
]
NOTEBOOK_OF_SEED = {m.SEED: m.NOTEBOOK for m in _MODULES if getattr(m, "SEED", None)}
EXCUSED = {m.SEED: getattr(m, "SEED_EXCUSED", {}) for m in _MODULES if getattr(m, "SEED", None)}

_spec = importlib.util.spec_from_file_location("seed_numbers", ROOT / "scripts" / "seed_numbers.py")
seed_numbers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seed_numbers)  # one definition of "a number as printed", shared with the script
NUMBER = seed_numbers.NUMBER
SEED_NUMBERS = json.loads(seed_numbers.DATA.read_text(encoding="utf-8"))


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


def missing_numbers(seed: str, nb) -> list[str]:
    """The numbers ``seed`` prints that no output of ``nb`` shows (at the seed's precision)."""
    have = _output_numbers(nb)
    missing = []
    for token in SEED_NUMBERS[seed]:
        if token in EXCUSED.get(seed, {}):
            continue
        want, tol = float(token), _tolerance(token)
        if not any(math.isclose(v, want, abs_tol=tol * 1.0001) for v in have):
            missing.append(token)
    return missing


@pytest.mark.parametrize("seed, notebook", sorted(NOTEBOOK_OF_SEED.items()))
def test_seed_numbers_appear_in_outputs(seed, notebook):
    nb = nbformat.read(SOLUTIONS / f"{notebook}.ipynb", as_version=4)
    missing = missing_numbers(seed, nb)
    assert not missing, f"{notebook} never prints these numbers of {seed}: {missing}"


def test_every_seed_has_a_notebook():
    assert SEED_NUMBERS, f"no seed numbers in {seed_numbers.DATA.name}"
    assert sorted(NOTEBOOK_OF_SEED) == sorted(SEED_NUMBERS)
    for seed, tokens in SEED_NUMBERS.items():
        assert tokens, f"{seed}: no numbers recorded"
        assert tokens == sorted(set(tokens)), f"{seed}: rewrite the data with scripts/seed_numbers.py"
        assert all(NUMBER.fullmatch(t) for t in tokens), f"{seed}: not numbers as printed: {tokens}"


def test_every_excused_number_is_one_the_seed_prints():
    for seed, excused in EXCUSED.items():
        assert set(excused) <= set(SEED_NUMBERS[seed]), f"{seed}: excused but never printed: " \
            f"{sorted(set(excused) - set(SEED_NUMBERS[seed]))}"


def test_an_output_number_removed_is_missed():
    """The comparison above can fail: drop the outputs that show one of a seed's numbers."""
    seed, notebook = sorted(NOTEBOOK_OF_SEED.items())[0]
    nb = nbformat.read(SOLUTIONS / f"{notebook}.ipynb", as_version=4)
    assert missing_numbers(seed, nb) == []
    token = next(t for t in SEED_NUMBERS[seed] if "e" in t.lower() and t not in EXCUSED.get(seed, {}))
    value, tol = float(token), _tolerance(token)
    spoiled = copy.deepcopy(nb)
    for cell in spoiled.cells:
        cell["outputs"] = [
            o for o in cell.get("outputs", [])
            if not any(math.isclose(float(t), value, abs_tol=tol * 1.0001) for t in NUMBER.findall(
                o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))))
        ]
    assert token in missing_numbers(seed, spoiled)


def test_the_maintainer_script_reads_numbers_as_printed(tmp_path):
    (tmp_path / "000_x.txt").write_text("weights [6.3379e-02, 0.5] and 7.7999997; step 3, v1.2.3 x.5\n")
    assert seed_numbers.collect(tmp_path) == {"000_x.txt": ["0.5", "6.3379e-02", "7.7999997"]}
