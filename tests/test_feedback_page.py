"""The page a student gets back: each step with its verdict, their code for it and its errors.

A realistic submission of notebook 01 (some steps right, some wrong, one cell that raises, the
rest untouched) is graded once in the sandbox; the tests read its row and its page, rebuild the
page from ``results.jsonl`` alone, and open it in Debian's Chromium (headless, through
Playwright) to see the code and the error next to the right step. Screenshots are kept in
``artifacts/feedback/`` for a human to look at.
"""

from __future__ import annotations

import html
import json
import re
import shutil

import nbformat
import pytest
from grading_fixtures import EXERCISE, NB_ID, place, read_rows, run_grader

from helpers.grading import report
from helpers.grading.sandbox import probe_bwrap
from paths import ROOT

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]
ARTIFACTS = ROOT / "artifacts" / "feedback"
_NO_SANDBOX = probe_bwrap()
needs_bwrap = pytest.mark.skipif(_NO_SANDBOX is not None, reason=f"no sandbox here: {_NO_SANDBOX}")

# What the student wrote in the TO-DO cell before each check (the rest stays untouched).
ANSWERS = {
    "01.x": "x = torch.tensor(x_list, dtype=torch.float32)",
    "01.weights": "w_key = torch.tensor(w_key_list, dtype=torch.float32)\n"
                  "w_query = torch.tensor(w_query_list, dtype=torch.float32)\n"
                  "w_value = torch.tensor(w_value_list, dtype=torch.float32)",
    "01.qkv": "keys = x @ w_key\nqueries = x @ w_query\nvalues = x @ w_value",
    "01.scores": "attn_scores = queries @ keys.T",
    "01.softmax": "attn_weights = torch.softmax(attn_scores, dim=0)  # <b>my</b> weights",  # the wrong axis
    # a NameError on line 3
    "01.outputs": "# weighted sum of the values\nweighted = attn_weights\noutputs = weighted @ value",
}


def realistic_notebook() -> nbformat.NotebookNode:
    """Notebook 01 as handed out, with the TO-DO cells of ANSWERS filled in."""
    nb = nbformat.read(EXERCISE, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        m = re.fullmatch(r'check\("([^"]+)"\)', cell.source.strip())
        if m and m.group(1) in ANSWERS:
            todo = nb.cells[i - 1]
            assert "TO-DO" in todo.source, todo.source
            todo.source = ANSWERS[m.group(1)] + "\n" + todo.source.split("\n", 2)[2]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if _NO_SANDBOX is not None:
        pytest.skip(f"no sandbox here: {_NO_SANDBOX}")
    base = tmp_path_factory.mktemp("feedback")
    root, out = base / "submissions", base / "grades"
    place(root, "Ana <Ruiz>", realistic_notebook())
    proc = run_grader(root, "--out", out, "--jobs", "1", "--timeout", "120", "--memory", "2048", "--quiet")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = read_rows(out)
    return {"row": row, "out": out, "page": report.feedback_path(out, row["student"], row["notebook"])}


def untouched_todo_cells() -> int:
    """How many cells of the realistic submission still raise the TO-DO's NotImplementedError."""
    return sum(c.cell_type == "code" and "raise NotImplementedError" in c.source for c in realistic_notebook().cells)


def _step(row, ex_id):
    return next(e for e in row["exercises"] if e["id"] == ex_id)


@needs_bwrap
def test_the_row_holds_what_the_page_needs(graded):
    row = graded["row"]
    assert row["status"] == "graded" and row["score"] == 4, row  # x, weights, qkv, scores
    softmax = _step(row, "01.softmax")
    assert softmax["status"] == "fail" and softmax["diagnosis"] == "softmax_wrong_axis"
    assert softmax["cell_role"] == "answer" and "dim=0" in softmax["code"]["text"]
    assert softmax["cell"] == softmax["check_cell"] - 1
    outputs = _step(row, "01.outputs")
    assert outputs["cell_role"] == "answer" and "weighted @ value" in outputs["code"]["text"]
    raised = [e for e in row["errors"] if e["cell"] == outputs["cell"]]
    assert [(e["line"], e["text"]) for e in raised] == [(3, "NameError: name 'value' is not defined")]
    untouched = _step(row, "01.outputs_rounded")
    assert untouched["cell_role"] == "before_check" and "NotImplementedError" in untouched["code"]["text"]
    # the TensorFlow half is untouched: its steps show their own TO-DO cell, not the PyTorch cell that set `x`
    tf_x = _step(row, "01.tf_x")
    assert tf_x["cell_role"] == "before_check" and tf_x["cell"] > _step(row, "01.x")["cell"]
    # the NameError and the TO-DO cells left as handed out (each raises NotImplementedError)
    left = untouched_todo_cells()
    assert left >= 1
    assert row["error_count"] == len({e["cell"] for e in row["errors"]}) == left + 1
    assert sum("NotImplementedError" in e["text"] for e in row["errors"]) == left


@needs_bwrap
def test_page_puts_code_and_errors_next_to_their_step(graded):
    page = graded["page"].read_text(encoding="utf-8")
    assert "Ana &lt;Ruiz&gt;" in page and "<Ruiz>" not in page  # the page names its student, escaped
    assert "&lt;b&gt;my&lt;/b&gt; weights" in page and "<b>my</b>" not in page  # student code is text
    steps = re.finditer(r'<section [^>]*data-step="([^"]+)".*?</section>', page, re.S)
    sections = {m.group(1): m.group(0) for m in steps}
    assert "weighted @ value" in sections["01.outputs"] and "NameError" in sections["01.outputs"]
    assert "NameError" not in sections["01.softmax"] and "dim=0" in sections["01.softmax"]
    assert "raised NameError" in sections["01.outputs"] and "line 3" in sections["01.outputs"]
    assert "Fill in the TO-DO cell above" not in page and "run it" not in page
    assert f"ran to the end, but {untouched_todo_cells() + 1} of its cells raised an error" in page
    assert "without an error" not in page


@needs_bwrap
def test_page_is_rebuilt_from_the_journal_alone(graded):
    out = graded["out"]
    first = graded["page"].read_text(encoding="utf-8")
    graded["page"].unlink()
    journal = report.Journal(out / report.JOURNAL)
    report.rebuild(out, journal, _titles(), _mistakes())
    assert graded["page"].read_text(encoding="utf-8") == first
    row = json.loads((out / report.JOURNAL).read_text(encoding="utf-8").splitlines()[0])
    assert report.render_feedback(row, _titles(), _mistakes()) == first


def _titles():
    from helpers import grade

    return grade._titles()


def _mistakes():
    from helpers import grade

    return grade._mistake_titles()


@needs_bwrap
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (scripts/system-deps.sh installs it)")
def test_page_in_a_real_browser(graded):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    url = graded["page"].resolve().as_uri()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(url)
            assert page.locator(".student").inner_text() == "Ana <Ruiz>"
            outputs = page.locator('section[data-step="01.outputs"]')
            assert "outputs = weighted @ value" in outputs.locator(".code").inner_text()
            hit = outputs.locator("tr.hit")
            assert hit.locator("td.ln").inner_text() == "3"  # the line that raised is marked…
            explained = outputs.locator("tr.raise")  # …and explained under it
            assert "NameError: name 'value' is not defined" in explained.inner_text()
            assert explained.is_visible()
            softmax = page.locator('section[data-step="01.softmax"]')
            assert "dim=0)  # <b>my</b> weights" in softmax.locator(".code").inner_text()
            assert "softmax over the wrong axis" in softmax.locator(".diag").inner_text()
            assert softmax.locator("tr.raise").count() == 0  # no error of another cell strays here
            passed = page.locator('section[data-step="01.x"]')
            assert not passed.locator(".code").is_visible()  # right steps keep their code folded away
            passed.locator("summary").click()
            assert passed.locator(".code").is_visible()
            assert page.locator("script").count() == 0
            page.screenshot(path=str(ARTIFACTS / "feedback_full.png"), full_page=True)
            outputs.scroll_into_view_if_needed()
            outputs.screenshot(path=str(ARTIFACTS / "feedback_step_with_error.png"))
            page.set_viewport_size({"width": 420, "height": 900})  # a phone
            page.screenshot(path=str(ARTIFACTS / "feedback_narrow.png"))
        finally:
            browser.close()


# ----------------------------------------------------------------------------- rendering alone (no sandbox)


def _text(page: str) -> str:
    """What a reader sees of a page's body: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.split("</style>", 1)[1]))


def _row(**changes):
    row = {
        "student": "ann", "notebook": NB_ID, "file": f"{NB_ID}.ipynb", "status": "graded", "score": 0,
        "max_score": 1, "error": None, "notes": [], "errors": [], "error_count": 0, "warnings": [],
        "graded_at": "2026-01-01T00:00:00Z",
        "exercises": [{"id": "01.x", "points": 0, "max_points": 1, "passed": False, "status": "not_done",
                       "diagnosis": None, "kind": "value", "cell": 7, "cell_role": "before_check", "check_cell": 8,
                       "assigned_later": None,
                       "message": "`x` is not defined yet. Fill in the TO-DO cell above and run it.",
                       "code": report.code_excerpt('raise NotImplementedError("TO-DO")\nprint(x)')}],
    }
    row.update(changes)
    return row


def test_status_line_is_true():
    clean = report.render_feedback(_row())
    assert "ran from start to end without an error" in clean
    err = {"cell": 7, "line": 1, "text": "NotImplementedError: TO-DO", "note": "n"}
    raised = report.render_feedback(_row(errors=[err], error_count=1))
    assert "without an error" not in raised and "ran to the end, but 1 of its cells raised an error" in raised
    many = report.render_feedback(_row(errors=[err], error_count=120))
    assert "at least 1 of its cells" in many and "Only the first 1 of 120 errors" in many
    stopped = report.render_feedback(_row(status="timeout", error="The notebook was still running after 5 s."))
    assert "ran to the end" not in stopped and "still running after 5 s" in stopped


@pytest.mark.parametrize(("changes", "expected"), [
    ({}, "your notebook never assigns it"),
    ({"cell_role": None, "cell": None, "code": None, "assigned_later": 12},
     "x is only assigned in cell 13, after its check (in cell 9). Move it before the check."),
    ({"cell_role": "answer"}, "although cell 8 assigns it"),
    ({"kind": "function", "message": "`softmax` is not defined yet. Fill in the TO-DO cell above and run it."},
     "your notebook never defines it"),
])
def test_not_defined_reads_right_on_a_page(changes, expected):
    row = _row()
    row["exercises"][0].update(changes)
    text = _text(report.render_feedback(row))
    assert expected in text
    assert "cell above" not in text and "run it" not in text


def test_the_cell_that_assigns_raised_first():
    row = _row(errors=[{"cell": 7, "line": 1, "text": "ValueError: bad", "note": "n"}], error_count=1)
    row["exercises"][0]["cell_role"] = "answer"
    assert "cell 8, which assigns it, raised an error first" in _text(report.render_feedback(row))


def test_hostile_code_is_escaped_and_capped():
    source = "\n".join([f"<script>alert({i})</script>" + "A" * 5000 for i in range(5000)]) + "\n1/0"
    code = report.code_excerpt(source, focus=5001)
    assert code["total_lines"] == 5001 and code["start"] > 1
    assert len(code["text"]) <= report.MAX_CODE_LINES * (report.MAX_LINE_CHARS + 1)
    assert code["text"].endswith("1/0")  # the window is around the line that raised
    row = _row(errors=[{"cell": 7, "line": 5001, "text": "ZeroDivisionError: <img src=x onerror=alert(1)>",
                        "note": "n"}], error_count=1)
    row["exercises"][0].update(code=code, student="<svg onload=alert(1)>")
    page = report.render_feedback(row)
    assert "<script" not in page and "<img" not in page and "<svg" not in page
    assert len(page) < 60_000
    assert "lines 1–" in page and "not shown" in page


def test_a_page_without_new_fields_still_renders():
    """Rows written before the page showed code (no cell, no code, no errors) still give a page."""
    row = _row()
    for key in ("errors", "error_count", "warnings"):
        del row[key]
    for key in ("cell", "cell_role", "check_cell", "assigned_later", "code", "kind"):
        del row["exercises"][0][key]
    page = report.render_feedback(row)
    assert "⏳" in page and "ann" in page and "cell above" not in page


def test_snippet_line_numbers_follow_python_not_splitlines():
    code = report.code_excerpt("a = 1\x0cb = 2\nc = 3\u2028d\n")
    assert code["total_lines"] == 2 and code["text"].split("\n")[1] == "c = 3\u2028d"

