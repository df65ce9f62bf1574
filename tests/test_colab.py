"""Colab and Binder: badges and the set-up cell all come from one configured repository."""

import base64
import re
import shutil
import sys
import types
from xml.etree import ElementTree

import nbformat
import pytest

from helpers import build, colab
from paths import NOTEBOOKS, ROOT

REPO = colab.Repository.from_pyproject(ROOT / "pyproject.toml")
EXERCISES = sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.stem)
def test_badge_and_setup_cell_point_at_the_configured_repository(path):
    nb = nbformat.read(path, as_version=4)
    badge, setup = nb.cells[0], nb.cells[1]
    assert badge.cell_type == "markdown" and f"]({REPO.colab_url(path.stem)})" in badge.source
    assert f"/blob/{REPO.ref}/notebooks/{path.name})" in badge.source
    assert setup.cell_type == "code" and setup.source == colab.setup_cell(REPO).source
    assert f'PACKAGE, VERSION = "{colab.PACKAGE}", "{REPO.version}"' in setup.source
    assert f'SOURCE = "git+{REPO.url}.git@{REPO.ref}"' in setup.source
    first_other_code = next(c for c in nb.cells[2:] if c.cell_type == "code")
    assert "from helpers import" in first_other_code.source or "import helpers" in first_other_code.source


_IMAGE = re.compile(r"^\[!\[(?P<alt>[^\]]+)\]\((?P<src>[^()\s]+)\)\]\((?P<href>[^()\s]+)\)$")


def test_badge_is_a_markdown_image_embedded_as_base64_svg():
    """One Markdown image inside one link: an address without spaces, quotes or brackets (with
    them, Markdown shows the whole thing as text), embedded rather than loaded from the network."""
    source = colab.badge_cell(REPO, "01_x").source
    m = _IMAGE.match(source)
    assert m, f"not [![alt](image)](link): {source[:120]!r}"
    assert m["alt"] == "Open in Colab" and m["href"] == REPO.colab_url("01_x")
    prefix = "data:image/svg+xml;base64,"
    assert m["src"].startswith(prefix)
    svg = ElementTree.fromstring(base64.b64decode(m["src"][len(prefix):], validate=True))
    assert svg.tag == "{http://www.w3.org/2000/svg}svg" and int(svg.get("width")) > 0 and int(svg.get("height")) > 0
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert texts == ["Open in", "Colab"]


def test_readme_badges_match_the_configuration():
    text = (ROOT / "README.md").read_text()
    assert colab.readme_block(REPO, [p.stem for p in EXERCISES]) in text
    assert REPO.binder_url() in text


def _run_setup(monkeypatch, in_colab, installed):
    """Run the set-up cell with `installed` as the course distribution's version (None: absent)."""
    import importlib.metadata
    import subprocess

    calls = []
    if in_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)

    def version(name):
        if name != colab.PACKAGE or installed is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed

    monkeypatch.setattr(importlib.metadata, "version", version)
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    exec(colab.setup_cell(REPO).source, {})
    return calls


def test_setup_cell_installs_the_pinned_release_only_in_colab_and_only_when_needed(monkeypatch):
    assert _run_setup(monkeypatch, in_colab=False, installed=None) == []
    assert _run_setup(monkeypatch, in_colab=True, installed=REPO.version) == []
    for installed in (None, "0.0.1", REPO.version + ".post1"):  # absent, or another release
        (cmd,) = _run_setup(monkeypatch, in_colab=True, installed=installed)
        assert cmd[1:5] == ["-m", "pip", "install", "-q"] and cmd[-1] == REPO.pip_spec()
        assert cmd[-1].endswith(f".git@v{REPO.version}")
        assert not any(word in " ".join(cmd) for word in ("torch", "tensorflow", "--upgrade", "-U"))


def test_a_foreign_helpers_module_does_not_count_as_the_course_package(monkeypatch, tmp_path):
    """Anything may provide a module called `helpers`: the cell asks for the distribution."""
    (tmp_path / "helpers.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert len(_run_setup(monkeypatch, in_colab=True, installed=None)) == 1


def test_the_pinned_version_is_the_package_version():
    import tomllib

    import helpers

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert REPO.version == version == helpers.__version__


def test_package_core_dependencies_leave_colab_frameworks_alone():
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if d.split(">")[0].split("=")[0].strip() in ("torch", "tensorflow", "keras")]


def _project_copy(tmp_path):
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _build(tmp_path, *args):
    return build.main(["--solutions", str(tmp_path / "solutions"), "--notebooks", str(tmp_path / "notebooks"), *args])


def test_changing_the_repository_once_updates_every_link(tmp_path):
    _project_copy(tmp_path)
    text = (ROOT / "pyproject.toml").read_text().replace(REPO.url, "https://github.com/someone/fork")
    text = text.replace(f'version = "{REPO.version}"', 'version = "7.8.9"')
    (tmp_path / "pyproject.toml").write_text(text.replace(f'branch = "{REPO.branch}"', 'branch = "dev"'))
    assert _build(tmp_path) == 0
    every = (tmp_path / "README.md").read_text() + "".join(
        p.read_text() for p in (tmp_path / "notebooks").glob("*.ipynb"))
    assert REPO.slug not in every
    assert every.count("someone/fork/blob/v7.8.9/notebooks/") >= 2 * len(EXERCISES)
    assert "mybinder.org/v2/gh/someone/fork/dev?" in every
    assert 'SOURCE = "git+https://github.com/someone/fork.git@v7.8.9"' in every.replace('\\"', '"')


def test_check_names_a_stale_colab_pin(tmp_path, capsys):
    _project_copy(tmp_path)
    assert _build(tmp_path, "--check") == 0
    text = (tmp_path / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text.replace(f'version = "{REPO.version}"', 'version = "99.0.0"'))
    assert _build(tmp_path, "--check") == 1
    err = capsys.readouterr().err
    assert err.count("stale Colab pin") == len(EXERCISES)
    assert f"installs helpers {REPO.version}, the project is at 99.0.0" in err
    assert _build(tmp_path) == 0 and _build(tmp_path, "--check") == 0


@pytest.mark.parametrize("project, words", [
    ('[project]\nversion = "1.0"\n[tool.attention-course]\nrepository = "gitlab.com/x"\n', "OWNER/REPO"),
    ('[project]\nversion = "main"\n[tool.attention-course]\nrepository = "https://github.com/a/b"\n', "version"),
])
def test_bad_repository_setting_is_refused(tmp_path, project, words):
    (tmp_path / "solutions").mkdir()
    (tmp_path / "pyproject.toml").write_text(project)
    with pytest.raises(build.BuildError, match=words):
        build.plan(tmp_path / "solutions", tmp_path / "nb")


def test_binder_reads_environment_yml_and_installs_the_package():
    post = (ROOT / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post
    assert not (ROOT / "binder").exists(), "a binder/ folder would make Binder ignore the root environment.yml"
