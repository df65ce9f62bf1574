"""JupyterLab in a real browser: open a solution notebook, run all cells, see the checks pass.

Starts JupyterLab from this environment on a free local port, drives Debian's Chromium
headless through Playwright (the system browser, no browser download), runs every cell,
and asserts that every check prints ✅ and every figure renders. The screenshot is kept
in artifacts/browser/ for a human to look at.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

from helpers.build import check_calls
from paths import ROOT, SOLUTIONS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NOTEBOOK = "01_illustrated_self_attention.ipynb"
ARTIFACTS = ROOT / "artifacts" / "browser"
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (scripts/system-deps.sh installs it where apt and root are)"
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    nb = nbformat.read(SOLUTIONS / NOTEBOOK, as_version=4)
    for cell in nb.cells:  # every ✅ and figure on the page must come from this run
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, work / NOTEBOOK)
    port, token = _free_port(), "course-browser-test"
    # Render every cell (JupyterLab 4 only renders the cells in view by default).
    settings = tmp_path / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    notify = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    notify.mkdir(parents=True)
    (notify / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "cfg"), JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"), HOME=str(tmp_path))
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}", "--ServerApp.disable_check_xsrf=True",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start in 60 s:\n" + (tmp_path / "lab.log").read_text()[-2000:])
    if proc.poll() is not None:
        pytest.fail("JupyterLab exited:\n" + (tmp_path / "lab.log").read_text()[-2000:])
    yield base, token
    os.killpg(proc.pid, 15)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    log.close()


def test_solution_notebook_runs_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    base, token = lab
    stored = nbformat.read(SOLUTIONS / NOTEBOOK, as_version=4)
    n_checks = sum(len(check_calls(c.source)) for c in stored.cells if c.cell_type == "code")
    n_images = sum(1 for c in stored.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        select = page.get_by_role("button", name="Select", exact=True)
        try:  # JupyterLab may ask which kernel to use: the notebook's own python3
            select.wait_for(timeout=5_000)
            select.click()
        except Exception:
            pass
        page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()
        passed = page.locator(".jp-OutputArea-output", has_text="✅")
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and passed.count() < n_checks:
            time.sleep(0.5)
        outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
        if passed.count():
            passed.nth(min(4, passed.count() - 1)).scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "01_after_run_all.png"), full_page=False)
        images = page.locator(".jp-OutputArea-output img")
        rendered = [img.evaluate("i => i.complete && i.naturalWidth > 0") for img in images.all()]
        browser.close()
    text = "\n".join(outputs)
    assert "Traceback" not in text and "❌" not in text and "⏳" not in text, text[-3000:]
    assert text.count("✅") == n_checks, f"expected {n_checks} ✅, page shows:\n{text[-3000:]}"
    assert len(rendered) >= n_images and all(rendered), f"{sum(rendered)} of {n_images} figures rendered"
