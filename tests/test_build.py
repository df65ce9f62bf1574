"""The builder: placeholders, cleared outputs, notebook id, --check, marker errors, course rules."""

import json
import platform
import re
import shutil

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from helpers import build
from helpers.runtime.cells import assigned_names, mentioned_names
from paths import NOTEBOOKS, SOLUTIONS


def _nb(*sources, outputs=True):
    cells = []
    for s in sources:
        if s.startswith("md:"):
            cells.append(new_markdown_cell(s[3:]))
        else:
            c = new_code_cell(s, execution_count=3)
            if outputs:
                c.outputs = [new_output("stream", name="stdout", text="hello\n")]
            cells.append(c)
    nb = new_notebook(cells=cells)
    for i, c in enumerate(nb.cells):
        c.id = f"c{i}"
    return nb


def test_region_becomes_placeholder_and_outputs_are_cleared():
    nb = _nb("a = 1\n### BEGIN SOLUTION\nb = a + 1\n### END SOLUTION\nprint(b)", "print('x')")
    out = build.build_notebook(nb, "09_demo.ipynb")
    src = out.cells[0].source
    assert "b = a + 1" not in src and "BEGIN SOLUTION" not in src
    assert src.startswith("a = 1\n# TO-DO") and src.endswith("print(b)")
    assert 'raise NotImplementedError("TO-DO' in src
    for c in out.cells:
        assert c.outputs == [] and c.execution_count is None
    assert out.metadata["attention_course"]["notebook_id"] == "09_demo"
    assert nb.cells[0].outputs, "the solution notebook itself must not be modified"


def test_placeholder_keeps_indentation_inside_a_function():
    nb = _nb("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n")
    src = build.build_notebook(nb, "09_demo.ipynb").cells[0].source
    compile(src, "cell", "exec")  # still valid Python
    ns = {}
    exec(src, ns)
    with pytest.raises(NotImplementedError, match="TO-DO"):
        ns["f"](1)


def test_two_regions_in_one_cell():
    nb = _nb("### BEGIN SOLUTION\na = 1\n### END SOLUTION\nmid = 0\n### BEGIN SOLUTION\nb = 2\n### END SOLUTION")
    src = build.build_notebook(nb, "x.ipynb").cells[0].source
    assert src.count("NotImplementedError") == 2 and "mid = 0" in src and "a = 1" not in src


@pytest.mark.parametrize(
    "source, words",
    [
        ("### BEGIN SOLUTION\na = 1\n", ["cell 2", "line 1", "never closed"]),
        ("a = 1\n### END SOLUTION\n", ["cell 2", "line 2", "without a matching"]),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\na=1\n### END SOLUTION\n### END SOLUTION", ["cell 2", "nested"]),
        ("## BEGIN SOLUTION\na = 1\n## END SOLUTION", ["cell 2", "malformed marker"]),
        ("### begin solution\na = 1", ["cell 2", "malformed marker"]),
    ],
)
def test_bad_markers_name_notebook_and_cell(source, words):
    nb = _nb("print(0)", source)
    with pytest.raises(build.BuildError) as err:
        build.build_notebook(nb, "07_broken.ipynb")
    msg = str(err.value)
    assert "07_broken.ipynb" in msg
    for w in words:
        assert w in msg


def test_markers_in_markdown_are_refused():
    nb = _nb("md:### BEGIN SOLUTION\nsecret\n### END SOLUTION")
    with pytest.raises(build.BuildError, match="code cells only"):
        build.build_notebook(nb, "x.ipynb")


def _tree(tmp_path):
    sol, ex = tmp_path / "solutions", tmp_path / "notebooks"
    sol.mkdir()
    nbformat.write(_nb("### BEGIN SOLUTION\na = 1\n### END SOLUTION\nprint(a)"), sol / "01_a.ipynb")
    nbformat.write(_nb("print(2)"), sol / "02_b.ipynb")
    return sol, ex


def _main(sol, ex, *extra):
    return build.main(["--solutions", str(sol), "--notebooks", str(ex), *extra])


def test_check_names_stale_missing_and_orphan_notebooks(tmp_path, capsys):
    sol, ex = _tree(tmp_path)
    assert _main(sol, ex, "--check") == 1
    assert "notebooks/01_a.ipynb" in capsys.readouterr().err
    assert _main(sol, ex) == 0
    assert _main(sol, ex, "--check") == 0
    # editing a solution without rebuilding makes the check fail and name it
    nb = nbformat.read(sol / "02_b.ipynb", 4)
    nb.cells[0].source = "print(3)"
    nbformat.write(nb, sol / "02_b.ipynb")
    assert _main(sol, ex, "--check") == 1
    err = capsys.readouterr().err
    assert "02_b.ipynb" in err and "01_a.ipynb" not in err
    # a notebook with no solution is an orphan
    assert _main(sol, ex) == 0
    shutil.copy(ex / "01_a.ipynb", ex / "99_extra.ipynb")
    assert _main(sol, ex, "--check") == 1
    assert "orphan: notebooks/99_extra.ipynb" in capsys.readouterr().err
    assert _main(sol, ex) == 0 and not (ex / "99_extra.ipynb").exists()


def test_build_is_deterministic(tmp_path):
    sol, ex = _tree(tmp_path)
    _main(sol, ex)
    first = (ex / "01_a.ipynb").read_text()
    _main(sol, ex)
    assert (ex / "01_a.ipynb").read_text() == first


def test_malformed_solution_notebook_gives_a_clear_error(tmp_path, capsys):
    sol, ex = _tree(tmp_path)
    (sol / "03_bad.ipynb").write_text("{ this is not json")
    assert _main(sol, ex) == 2
    assert "03_bad.ipynb: not a readable notebook" in capsys.readouterr().err
    (sol / "03_bad.ipynb").write_text(json.dumps({"cells": "nope", "nbformat": 4}))
    assert _main(sol, ex) == 2
    assert "03_bad.ipynb" in capsys.readouterr().err


def test_committed_exercises_are_in_sync():
    assert build.main(["--check", "--solutions", str(SOLUTIONS), "--notebooks", str(NOTEBOOKS)]) == 0


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_solution_keeps_course_rules(path):
    nb = build.read_notebook(path)
    assert build.lint(nb, path.name) == []
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_solution_outputs_are_clean(path):
    """No addresses, no grad_fn names, no errors, no stderr in what nbval compares."""
    nb = build.read_notebook(path)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"cell {i + 1} was never run: store outputs with make solutions"
        for out in cell.outputs:
            assert out.output_type != "error", f"cell {i + 1} stored an error"
            assert not (out.output_type == "stream" and out.name == "stderr"), f"cell {i + 1} stored stderr"
            text = out.get("text", "") + json.dumps(out.get("data", {}).get("text/plain", ""))
            assert " at 0x" not in text, f"cell {i + 1} prints a memory address"
            assert "grad_fn" not in text, f"cell {i + 1} prints a grad_fn"


def test_lint_catches_a_todo_without_check():
    nb = _nb("### BEGIN SOLUTION\na = 1\n### END SOLUTION", "print(a)")
    problems = build.lint(nb, "01_illustrated_self_attention.ipynb")
    assert any("without a check" in p for p in problems)
    assert any("never checked" in p for p in problems)


_REMOTE_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*(https?:)?//|<img[^>]+src=[\"']?(https?:)?//", re.IGNORECASE)


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")) + sorted(NOTEBOOKS.glob("*.ipynb")),
                         ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_notebook_loads_an_image_from_the_network(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        assert not _REMOTE_IMAGE.search(cell.source), f"cell {i + 1} loads an image from the network"
        if cell.cell_type == "code":
            assert "urlopen" not in cell.source and "requests.get" not in cell.source, f"cell {i + 1} downloads"


def test_todo_cells_and_cells_calling_the_students_code_are_tagged_to_let_run_all_carry_on():
    nb = _nb("### BEGIN SOLUTION\na = 1\n### END SOLUTION", "print(a)", "def f():\n    ### BEGIN SOLUTION\n"
             "    return 1\n    ### END SOLUTION", 'check("09.f")', "print(f() + 1)", "g = 2")
    nb.cells[2].metadata["tags"] = ["nbval-ignore-output"]
    out = build.build_notebook(nb, "09_demo.ipynb")
    assert out.cells[0].metadata["tags"] == [build.RAISES]
    assert "tags" not in out.cells[1].metadata  # reads a value, calls nothing the student wrote
    assert out.cells[2].metadata["tags"] == ["nbval-ignore-output", build.RAISES]
    assert "tags" not in out.cells[3].metadata  # a check prints "not done yet" by itself
    assert out.cells[4].metadata["tags"] == [build.RAISES]  # calls the student's f
    assert "tags" not in out.cells[5].metadata
    assert "tags" not in nb.cells[0].metadata, "the solution notebook itself must not be modified"


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_todo_cell_of_the_exercises_is_tagged(path):
    nb = nbformat.read(path, as_version=4)
    placeholder = build.PLACEHOLDER[1].format(indent="").strip()
    theirs: set[str] = set()  # functions and classes with a TO-DO in their body
    for i, cell in enumerate(nb.cells):
        tagged = build.RAISES in cell.metadata.get("tags", [])
        todo = cell.cell_type == "code" and placeholder in cell.source
        calls = cell.cell_type == "code" and not todo and "check(" not in cell.source and bool(
            theirs & mentioned_names(cell.source))
        assert tagged == (todo or calls), f"cell {i + 1}"
        if todo:
            theirs |= {n for n in assigned_names(cell.source) if re.search(rf"^(def|class) {n}\b", cell.source, re.M)}


def test_kernelspec_is_the_one_jupyterlab_writes_for_this_kernel():
    """JupyterLab writes {name, display_name, language} from the kernel's spec on open; a
    notebook holding anything else opens as modified."""
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    assert build.KERNELSPEC == {"name": "python3", "display_name": spec.display_name, "language": spec.language}


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_notebook_metadata_is_what_jupyterlab_writes(path):
    """The kernelspec as JupyterLab writes it, and language_info as this environment's kernel
    reports it (nbclient stores it when `make solutions` runs): then opening a notebook in
    JupyterLab changes nothing, and the tab shows no "modified" dot (tests/test_browser.py)."""
    solution = nbformat.read(path, as_version=4)
    exercise = nbformat.read(NOTEBOOKS / path.name, as_version=4)
    for nb in (solution, exercise):
        assert nb.metadata["kernelspec"] == build.KERNELSPEC
    assert exercise.metadata["language_info"] == solution.metadata["language_info"]
    info = solution.metadata["language_info"]
    assert info["name"] == "python" and info["codemirror_mode"] == {"name": "ipython", "version": 3}
    assert info["version"] == platform.python_version(), (
        f"stored with Python {info['version']}, this environment runs {platform.python_version()}: JupyterLab "
        "would rewrite language_info on open; re-store the outputs with `make solutions`"
    )


def test_later_names_are_what_the_given_lines_and_later_cells_read():
    """A student's cell that binds one of these anew breaks the notebook below it (the checks say so)."""
    nb = _nb("n = 3\nw = 2\nscores = [1, 2]\ntemp = 0",
             "### BEGIN SOLUTION\nweights = [s / n for s in scores]\n### END SOLUTION\nprint(weights, temp)",
             'check("99.weights")',
             "print(n)\nsquares = [w * w for w in range(4)]\nscores = [0]\nprint(scores)")
    names = build.later_names(nb, "99_demo.ipynb")
    # `temp`: read by the cell's given line; `n`: by a later cell. Not `w` (a comprehension's own variable
    # there), not `scores` (bound again before it is read), not `weights` (the cell's own answer).
    assert names == {"99.weights": ["n", "temp"]}


def test_cell_binds_are_what_the_solution_cell_assigns():
    """The steps answered by one cell (01's TensorFlow half) bind each other's answers there: no overwrite."""
    nb = _nb("x_list = [1, 2]",
             "### BEGIN SOLUTION\nx = list(x_list)\ny = [2 * v for v in x]\n### END SOLUTION\nprint(y)",
             'check("99.x")\ncheck("99.y")')
    assert build.cell_binds(nb, "99_demo.ipynb") == {"99.x": ["x", "y"], "99.y": ["x", "y"]}
    # the lines the cell gives, which are not the student's way of computing (08 compares with the library)
    assert build.given_lines(nb, "99_demo.ipynb") == {"99.x": ["print(y)"], "99.y": ["print(y)"]}
    from helpers.course.later_names import CELL_BINDS

    assert {"x", "outputs"} <= set(CELL_BINDS["01.tf_weights"]) | set(CELL_BINDS["01.tf_outputs"])
    assert "x" in CELL_BINDS["01.tf_weights"] and "outputs" in CELL_BINDS["01.tf_outputs_rounded"]


def test_committed_later_names_are_in_sync(capsys):
    from helpers.course.later_names import LATER_NAMES

    wanted = {ex_id: tuple(names) for p in sorted(SOLUTIONS.glob("*.ipynb"))
              for ex_id, names in build.later_names(build.read_notebook(p), p.name).items()}
    assert LATER_NAMES == wanted
    assert LATER_NAMES["09.decode"] and "n" in LATER_NAMES["09.decode"]
