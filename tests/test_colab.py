"""Colab and Binder: badges and the set-up cell all come from one configured repository."""

import importlib.util  # noqa: E402
import shutil
import sys
import types

import nbformat
import pytest

from helpers import build, colab
from paths import NOTEBOOKS, ROOT

_REAL_FIND_SPEC = importlib.util.find_spec
REPO = colab.Repository.from_pyproject(ROOT / "pyproject.toml")
EXERCISES = sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_badge_and_setup_cell_point_at_the_configured_repository(path):
    nb = nbformat.read(path, as_version=4)
    badge, setup = nb.cells[0], nb.cells[1]
    assert badge.cell_type == "markdown" and f"]({REPO.colab_url(path.stem)})" in badge.source
    assert f"/blob/{REPO.branch}/notebooks/{path.name})" in badge.source
    image = badge.source.split("](")[1].split(")")[0]
    assert image.startswith("data:image/svg+xml"), "the badge image must be embedded, not loaded from the network"
    assert setup.cell_type == "code" and setup.source == colab.setup_cell(REPO).source
    assert f'REPOSITORY, BRANCH = "{REPO.url}", "{REPO.branch}"' in setup.source
    first_other_code = next(c for c in nb.cells[2:] if c.cell_type == "code")
    assert "from helpers import" in first_other_code.source or "import helpers" in first_other_code.source


def test_readme_badges_match_the_configuration():
    text = (ROOT / "README.md").read_text()
    assert colab.readme_block(REPO, [p.stem for p in EXERCISES]) in text
    assert REPO.binder_url() in text


def _run_setup(monkeypatch, in_colab, has_helpers):
    calls = []
    if in_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    import importlib.util
    import subprocess

    real = _REAL_FIND_SPEC
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: (real(n, *a) if has_helpers or n != "helpers"
                                                                     else None))
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    exec(colab.setup_cell(REPO).source, {})
    return calls


def test_setup_cell_installs_only_in_colab_and_only_when_missing(monkeypatch):
    assert _run_setup(monkeypatch, in_colab=False, has_helpers=False) == []
    assert _run_setup(monkeypatch, in_colab=True, has_helpers=True) == []
    (cmd,) = _run_setup(monkeypatch, in_colab=True, has_helpers=False)
    assert cmd[1:5] == ["-m", "pip", "install", "-q"] and cmd[-1] == REPO.pip_spec()
    assert not any(word in " ".join(cmd) for word in ("torch", "tensorflow", "--upgrade", "-U"))


def test_package_core_dependencies_leave_colab_frameworks_alone():
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if d.split(">")[0].split("=")[0].strip() in ("torch", "tensorflow", "keras")]


def test_changing_the_repository_once_updates_every_link(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    text = (ROOT / "pyproject.toml").read_text().replace(REPO.url, "https://github.com/someone/fork")
    (tmp_path / "pyproject.toml").write_text(text.replace(f'branch = "{REPO.branch}"', 'branch = "dev"'))
    assert build.main(["--solutions", str(tmp_path / "solutions"), "--notebooks", str(tmp_path / "nb")]) == 0
    every = (tmp_path / "README.md").read_text() + "".join(p.read_text() for p in (tmp_path / "nb").glob("*.ipynb"))
    assert REPO.slug not in every
    assert every.count("someone/fork/blob/dev/notebooks/") >= 2 * len(EXERCISES)
    assert 'REPOSITORY, BRANCH = "https://github.com/someone/fork", "dev"' in every.replace('\\"', '"')


def test_bad_repository_setting_is_refused(tmp_path):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.attention-course]\nrepository = "gitlab.com/x"\n')
    with pytest.raises(build.BuildError, match="OWNER/REPO"):
        build.plan(tmp_path / "solutions", tmp_path / "nb")


def test_binder_reads_environment_yml_and_installs_the_package():
    post = (ROOT / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post
    assert not (ROOT / "binder").exists(), "a binder/ folder would make Binder ignore the root environment.yml"
