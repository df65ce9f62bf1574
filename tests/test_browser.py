"""JupyterLab in a real browser, as a student meets the course.

Starts JupyterLab from this environment on a free local port and drives Debian's Chromium
headless through Playwright (the system browser, no browser download). Two notebooks:

- the exercise notebook 01, untouched (a byte-for-byte copy of notebooks/01): its Colab badge
  renders as an image, it opens without the "modified" dot, and "Run All" runs every cell to
  the end, each unfinished step failing only in its TO-DO cell and every check saying
  "⏳ … not done yet";
- the solution notebook 01 with its outputs cleared: "Run All" makes every check print ✅ and
  every figure render, and no cell shows a stderr box (TensorFlow is imported in it).

Screenshots of each of those moments are kept in artifacts/browser/ for a human to look at.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest
from student import NOT_A_STUDENTS

from helpers.build import PLACEHOLDER, check_calls
from paths import NOTEBOOKS, ROOT, SOLUTIONS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NOTEBOOK = "01_illustrated_self_attention.ipynb"
ARTIFACTS = ROOT / "artifacts" / "browser"
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]
STDERR_BOX = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
PLACEHOLDER_LINE = PLACEHOLDER[1].format(indent="")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (scripts/system-deps.sh installs it where apt and root are)"
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("lab")
    work = tmp_path / "work"
    for sub in ("exercise", "solution", "control"):
        (work / sub).mkdir(parents=True)
    shutil.copy(NOTEBOOKS / NOTEBOOK, work / "exercise" / NOTEBOOK)  # exactly what a student opens
    nb = nbformat.read(SOLUTIONS / NOTEBOOK, as_version=4)
    for cell in nb.cells:  # every ✅ and figure on the page must come from this run
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, work / "solution" / NOTEBOOK)
    # The control: the exercise with the kernel metadata the builder used to write. JupyterLab must
    # mark it modified, or the clean-tab assertion below could not fail.
    control = nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4)
    control.metadata["kernelspec"]["display_name"] = "Python 3"
    nbformat.write(control, work / "control" / NOTEBOOK)
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
    for name in NOT_A_STUDENTS:  # the kernels get a student's environment
        env.pop(name, None)
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
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield base, token, tmp_path / "lab.log"
    os.killpg(proc.pid, 15)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
    log.close()


@pytest.fixture
def page(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        browser.close()


def _open(page, lab, path, workspace):
    """Open ``path`` in JupyterLab workspace ``workspace`` (one per test: nothing is restored from another)."""
    base, token, _ = lab
    page.goto(f"{base}/lab/workspaces/{workspace}/tree/{path}?token={token}")
    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell", timeout=60_000)
    select = page.get_by_role("button", name="Select", exact=True)
    try:  # JupyterLab may ask which kernel to use: the notebook's own python3
        select.wait_for(timeout=5_000)
        select.click()
    except Exception:
        pass
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


def _tab_classes(page, path):
    """The class list of the tab that shows ``path`` (its title is the full path)."""
    tab = page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab[title*="Path: {path}"]')
    assert tab.count() == 1, f"no single tab for {path}"
    return tab.get_attribute("class").split()


def _run_all(page, panel, n_code_cells, timeout=240):
    """Run > Run All Cells, then wait until every code cell has its execution count, or the kernel
    has stayed idle for 3 s (the run is over: finished, or stopped early)."""
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run All Cells", exact=True).click()
    prompts = panel.locator(".jp-CodeCell .jp-InputArea-prompt")
    idle = page.get_by_text("Python 3 (ipykernel) | Idle", exact=True)
    deadline = time.monotonic() + timeout
    idle_polls, busy_seen, start = 0, False, time.monotonic()
    # (After the first TO-DO error, JupyterLab shows the cells still queued as "[ ]" instead of
    # "[*]" until each has run: the prompts alone cannot tell a stopped run from a running one.)
    while time.monotonic() < deadline and idle_polls < 6:
        texts = [t.strip() for t in prompts.all_inner_texts()]
        if len(texts) == n_code_cells and all(re.fullmatch(r"\[\d+\]:", t) for t in texts):
            break
        is_idle = idle.count() > 0
        busy_seen = busy_seen or not is_idle
        idle_polls = idle_polls + 1 if is_idle and (busy_seen or time.monotonic() - start > 20) else 0
        time.sleep(0.5)
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=60_000)
    return [t.strip() for t in prompts.all_inner_texts()]


def _assert_ran_to_the_end(page, lab, prompts, n_code_cells, name):
    if prompts == [f"[{i}]:" for i in range(1, n_code_cells + 1)]:
        return
    page.screenshot(path=str(ARTIFACTS / f"{name}_run_all_stopped.png"))
    log = lab[2].read_text(errors="replace")[-3000:]
    pytest.fail(f"Run All stopped early: {prompts}\nJupyterLab's log ends with:\n{log}")


def _centre(locator):
    locator.evaluate("e => e.scrollIntoView({block: 'center'})")
    time.sleep(0.3)


def test_exercise_notebook_opens_clean_and_run_all_reaches_the_end(lab, page):
    nb = nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    checks = [ex_id for c in code for ex_id in check_calls(c.source)]
    todo_cells = [c for c in code if PLACEHOLDER_LINE in c.source]
    assert checks and todo_cells

    panel = _open(page, lab, f"exercise/{NOTEBOOK}", "exercise")
    # 1. The Colab badge is an image (and a link), not a line of raw text.
    badge_cell = panel.locator(".jp-Cell").first
    image = badge_cell.locator('a img[alt="Open in Colab"]')
    assert image.count() == 1, f"no badge image; the first cell shows: {badge_cell.inner_text()[:300]!r}"
    image.wait_for(state="visible")
    assert image.evaluate("i => i.complete && i.naturalWidth > 0"), "the badge image did not load"
    assert "colab.research.google.com" in badge_cell.locator("a").first.get_attribute("href")
    assert "data:" not in badge_cell.inner_text(), "the badge's data: address shows as text"

    # 2. Opening it does not modify it. The control (the kernel metadata the builder used to write),
    # opened in a second browser tab, must turn dirty in the meantime, or this could not fail.
    control_page = page.context.new_page()
    _open(control_page, lab, f"control/{NOTEBOOK}", "control")
    deadline = time.monotonic() + 30
    while "jp-mod-dirty" not in _tab_classes(control_page, f"control/{NOTEBOOK}") and time.monotonic() < deadline:
        time.sleep(0.3)
    assert "jp-mod-dirty" in _tab_classes(control_page, f"control/{NOTEBOOK}"), "the control should open as modified"
    control_page.close()
    assert "jp-mod-dirty" not in _tab_classes(page, f"exercise/{NOTEBOOK}"), (
        "the exercise notebook opens as modified: its kernelspec/language_info differ from what JupyterLab "
        "writes for this environment's kernel (rebuild; re-store the solutions if the Python version changed)"
    )
    page.screenshot(path=str(ARTIFACTS / "01_exercise_opened_clean_tab.png"))  # the badge, and the tab's ×, no ●

    # 3. Run All on the untouched notebook: every cell runs, in order, to the last one.
    prompts = _run_all(page, panel, len(code))
    _assert_ran_to_the_end(page, lab, prompts, len(code), "01_exercise")
    outputs = panel.locator(".jp-OutputArea-output").all_inner_texts()
    verdicts = [ln for text in outputs for ln in text.splitlines() if re.match(r"^\S+ \d\d\.\S+ — ", ln)]
    assert len(verdicts) == len(checks), f"{len(checks)} checks, {len(verdicts)} verdicts:\n" + "\n".join(verdicts)
    assert all(v.startswith("⏳ ") and " — not done yet" in v for v in verdicts), "\n".join(verdicts)
    # Pink boxes: exactly one per TO-DO cell (its NotImplementedError), no stderr anywhere else.
    boxes = panel.locator(STDERR_BOX).all_inner_texts()
    strays = [b for b in boxes if "NotImplementedError" not in b or "TO-DO" not in b]
    assert not strays, "a stderr box that is not a TO-DO:\n" + "\n---\n".join(strays)[:3000]
    assert len(boxes) == len(todo_cells), f"{len(todo_cells)} TO-DO cells, {len(boxes)} error boxes"

    page.screenshot(path=str(ARTIFACTS / "01_exercise_run_all_end.png"))  # where JupyterLab leaves the view
    _centre(panel.locator(STDERR_BOX).first)  # the first TO-DO's error, and its check's ⏳ under it
    page.screenshot(path=str(ARTIFACTS / "01_exercise_run_all_first_todo.png"))


def test_solution_notebook_runs_in_jupyterlab(lab, page):
    stored = nbformat.read(SOLUTIONS / NOTEBOOK, as_version=4)
    code = [c for c in stored.cells if c.cell_type == "code"]
    n_checks = sum(len(check_calls(c.source)) for c in code)
    n_images = sum(1 for c in code for o in c.get("outputs", []) if "image/png" in o.get("data", {}))
    assert any("import tensorflow" in c.source for c in code), "this test wants a notebook that imports TensorFlow"

    panel = _open(page, lab, f"solution/{NOTEBOOK}", "solution")
    prompts = _run_all(page, panel, len(code))
    passed = panel.locator(".jp-OutputArea-output", has_text="✅")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and passed.count() < n_checks:
        time.sleep(0.5)
    outputs = panel.locator(".jp-OutputArea-output").all_inner_texts()
    boxes = panel.locator(STDERR_BOX).all_inner_texts()
    _centre(panel.locator(".jp-CodeCell", has_text="quiet_tensorflow").first)  # TensorFlow's import: no pink box
    page.screenshot(path=str(ARTIFACTS / "01_solution_imports_no_stderr.png"))
    if passed.count():
        passed.nth(min(4, passed.count() - 1)).scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "01_after_run_all.png"))
    images = panel.locator(".jp-OutputArea-output img")
    rendered = [img.evaluate("i => i.complete && i.naturalWidth > 0") for img in images.all()]

    _assert_ran_to_the_end(page, lab, prompts, len(code), "01_solution")
    assert not boxes, "stderr on the page:\n" + "\n---\n".join(boxes)[:3000]
    text = "\n".join(outputs)
    assert "Traceback" not in text and "❌" not in text and "⏳" not in text, text[-3000:]
    assert text.count("✅") == n_checks, f"expected {n_checks} ✅, page shows:\n{text[-3000:]}"
    assert len(rendered) >= n_images and all(rendered), f"{sum(rendered)} of {n_images} figures rendered"
