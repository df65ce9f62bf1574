"""The pinned environment lives in requirements.txt; environment.yml must agree with it."""

import os
import re
import tomllib

import pytest
import yaml

from paths import ROOT


def _pins(lines):
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert m, f"not an exact pin: {line!r}"
        pins[m[1].lower().replace("_", "-")] = m[2]
    return pins


def requirements_pins():
    return _pins((ROOT / "requirements.txt").read_text().splitlines())


def environment_pins():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_sections = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1, "environment.yml needs exactly one pip section"
    return _pins(pip_sections[0]), env


def test_environment_yml_matches_requirements():
    env_pins, env = environment_pins()
    req = requirements_pins()
    assert env_pins == req, (
        "environment.yml and requirements.txt disagree: "
        f"only in requirements.txt {sorted(set(req.items()) - set(env_pins.items()))}, "
        f"only in environment.yml {sorted(set(env_pins.items()) - set(req.items()))}"
    )
    assert "python=3.11" in env["dependencies"]


def test_frameworks_pinned_to_the_course_versions():
    req = requirements_pins()
    assert req["torch"] == "2.13.0"
    assert req["tensorflow"] == "2.21.0"


def test_core_dependencies_stay_light():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(meta["dependencies"]).lower()
    for heavy in ("torch", "tensorflow", "jupyterlab", "pytest"):
        assert heavy not in core, f"{heavy} must be an extra, not a core dependency (Colab keeps its own)"
    extras = meta["optional-dependencies"]
    assert {"torch", "tensorflow", "dev"} <= set(extras)


def test_every_pinned_package_is_declared_by_the_package():
    """A pin nobody declares is dead weight; a declared package without a pin drifts."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = set()
    for spec in meta["dependencies"] + sum(meta["optional-dependencies"].values(), []):
        declared.add(re.split(r"[<>=!~\[ ;]", spec, maxsplit=1)[0].lower().replace("_", "-"))
    pinned = set(requirements_pins())
    assert declared - pinned == set(), f"declared but not pinned: {sorted(declared - pinned)}"
    assert pinned - declared == set(), f"pinned but not declared: {sorted(pinned - declared)}"


@pytest.mark.parametrize("blocked", ["torch", "tensorflow"])
def test_without_a_framework_the_tests_that_need_it_skip_with_the_reason(blocked):
    """A course taught with one framework: the tests that need the other one skip, saying why; none fails."""
    import subprocess
    import sys

    env = {**os.environ, "ATTENTION_COURSE_BLOCK": blocked, "PYTHONPATH": str(ROOT / "tests")}
    tests = ["tests/test_checks.py::test_reference_answer_passes_in_every_allowed_framework",
             "tests/test_convert.py", "solutions/01_illustrated_self_attention.ipynb"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "block_framework", "-p", "no:xdist", "-q", "-rs",
                           "--nbval", *tests], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    tail = proc.stdout[-3000:]
    assert proc.returncode == 0, tail
    assert re.search(r"\d+ passed", tail) and re.search(r"\d+ skipped", tail), tail
    assert f"needs {blocked}, which is not installed here" in proc.stdout, tail
