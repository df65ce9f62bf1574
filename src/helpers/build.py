"""Build the exercise notebooks from the solution notebooks.

    python -m helpers.build            # regenerate notebooks/ from solutions/
    python -m helpers.build --check    # exit 1 and name every stale notebook

In a solution notebook, what the student must write sits between two marker lines in a
code cell::

    ### BEGIN SOLUTION
    keys = x @ w_key
    ### END SOLUTION

The builder replaces each marked region by a TO-DO placeholder (indented like the
region, so it also works inside a function body), tags each such cell ``raises-exception``
(so "Run All" in JupyterLab, Notebook, VS Code or nbclient carries on past an unfinished step
and every check below it still answers) and so too every given cell that calls a function or
class the student writes, clears outputs and execution counts, writes the
kernel metadata JupyterLab would write (so a notebook does not open as modified), and
records the notebook's id in its metadata so the grader recognises a renamed file.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import nbformat

from . import colab
from .runtime.cells import assigned_names, free_names, mentioned_names

__all__ = ["BuildError", "build_notebook", "later_names", "lint", "main", "notebook_id", "solution_regions"]

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
_MARKER = re.compile(r"^(?P<indent>[ \t]*)(?P<marker>### (?:BEGIN|END) SOLUTION)[ \t]*$")
_LOOSE = re.compile(r"#+\s*(BEGIN|END)\s+SOLUTION", re.IGNORECASE)
PLACEHOLDER = (
    "{indent}# TO-DO: write your code here, then run the check below.",
    '{indent}raise NotImplementedError("TO-DO: replace this line with your code")',
)
METADATA_KEY = "attention_course"
# The cell tag Jupyter front ends and nbclient read as "this cell may fail: keep running".
RAISES = "raises-exception"
# What JupyterLab writes into a notebook's metadata when it starts ipykernel's "python3" kernel
# (the display name comes from ipykernel's kernelspec). A notebook that already holds exactly
# this, and the language_info its kernel reports, opens without the "modified" dot.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


class BuildError(ValueError):
    """A solution notebook the builder cannot turn into an exercise (message names it)."""


@dataclass(frozen=True)
class Region:
    cell: int  # index of the cell in the notebook
    start: int  # line index of BEGIN
    end: int  # line index of END
    indent: str


def notebook_id(path: Path) -> str:
    return path.stem


def _where(name: str, cell: int, line: int | None = None) -> str:
    return f"{name}, cell {cell + 1}" + (f", line {line + 1}" if line is not None else "")


def solution_regions(nb: nbformat.NotebookNode, name: str) -> list[Region]:
    """Find every marked region; raise :class:`BuildError` on unbalanced or nested markers."""
    regions = []
    for ci, cell in enumerate(nb.cells):
        lines = cell.source.split("\n")
        open_at: tuple[int, str] | None = None
        for li, line in enumerate(lines):
            m = _MARKER.match(line)
            if not m:
                if _LOOSE.search(line):
                    raise BuildError(
                        f"{_where(name, ci, li)}: malformed marker {line.strip()!r}; "
                        f"write exactly {BEGIN!r} or {END!r} on a line of its own."
                    )
                continue
            if cell.cell_type != "code":
                raise BuildError(f"{_where(name, ci, li)}: solution markers belong in code cells only.")
            if m["marker"] == BEGIN:
                if open_at is not None:
                    raise BuildError(
                        f"{_where(name, ci, li)}: nested {BEGIN!r} (the region opened on line "
                        f"{open_at[0] + 1} is not closed yet)."
                    )
                open_at = (li, m["indent"])
            else:
                if open_at is None:
                    raise BuildError(f"{_where(name, ci, li)}: {END!r} without a matching {BEGIN!r}.")
                regions.append(Region(ci, open_at[0], li, open_at[1]))
                open_at = None
        if open_at is not None:
            raise BuildError(f"{_where(name, ci, open_at[0])}: {BEGIN!r} is never closed by {END!r}.")
    return regions


def _defined_callables(source: str) -> set[str]:
    """Top-level functions and classes a cell defines."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _strip_regions(source: str, regions: list[Region]) -> str:
    lines = source.split("\n")
    for r in sorted(regions, key=lambda r: r.start, reverse=True):
        lines[r.start : r.end + 1] = [p.format(indent=r.indent) for p in PLACEHOLDER]
    return "\n".join(lines)


def read_notebook(path: Path) -> nbformat.NotebookNode:
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:
        raise BuildError(f"{path.name}: not a readable notebook ({type(exc).__name__}: {exc}).") from None
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        raise BuildError(f"{path.name}: invalid notebook ({exc.message}).") from None
    return nb


def build_notebook(
    solution: nbformat.NotebookNode, name: str, repo: colab.Repository | None = None
) -> nbformat.NotebookNode:
    """Return the exercise version of ``solution`` (which is left unchanged).

    With ``repo``, an "Open in Colab" badge and Colab's set-up cell come first.
    """
    nb = copy.deepcopy(solution)
    regions = solution_regions(nb, name)
    by_cell: dict[int, list[Region]] = {}
    for r in regions:
        by_cell.setdefault(r.cell, []).append(r)
    written: set[str] = set()  # functions and classes whose body the student writes
    for ci, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            uses_theirs = ci not in by_cell and not check_calls(cell.source) and written & mentioned_names(cell.source)
            if ci in by_cell:
                written |= _defined_callables(cell.source)
                cell.source = _strip_regions(cell.source, by_cell[ci])
            if ci in by_cell or uses_theirs:
                tags = cell.metadata.setdefault("tags", [])
                if RAISES not in tags:
                    tags.append(RAISES)
        cell.metadata.pop("execution", None)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata[METADATA_KEY] = {"notebook_id": Path(name).stem, "kind": "exercise"}
    if repo is not None:
        nb.cells[:0] = [colab.badge_cell(repo, Path(name).stem), colab.setup_cell(repo)]
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


_CHECK_CALL = re.compile(r"""check\(\s*["']([^"']+)["']""")


def check_calls(source: str) -> list[str]:
    return _CHECK_CALL.findall(source)


def lint(solution: nbformat.NotebookNode, name: str) -> list[str]:
    """Course rules a solution notebook must keep; returns the problems found.

    Every TO-DO region is followed by a ``check("…")`` before the next TO-DO; every
    checked id exists and belongs to this notebook; every exercise of the notebook is
    checked somewhere in it.
    """
    from .course import spec

    problems = []
    regions = solution_regions(solution, name)
    region_cells = sorted({r.cell for r in regions})
    for i, ci in enumerate(region_cells):
        stop = region_cells[i + 1] if i + 1 < len(region_cells) else len(solution.cells)
        own = solution.cells[ci].source.split("### END SOLUTION")[-1]
        later = [solution.cells[j].source for j in range(ci + 1, stop) if solution.cells[j].cell_type == "code"]
        if not any(check_calls(s) for s in [own, *later]):
            problems.append(f"{_where(name, ci)}: a TO-DO without a check(...) after it")
    stem = Path(name).stem
    seen = set()
    for ci, cell in enumerate(solution.cells):
        if cell.cell_type != "code":
            continue
        for ex_id in check_calls(cell.source):
            seen.add(ex_id)
            try:
                ex = spec.get(ex_id)
            except KeyError:
                problems.append(f"{_where(name, ci)}: check({ex_id!r}) names no registered exercise")
                continue
            if ex.notebook != stem:
                problems.append(f"{_where(name, ci)}: check({ex_id!r}) belongs to notebook {ex.notebook}")
    for ex in spec.exercises_for(stem):
        if ex.id not in seen:
            problems.append(f"{name}: exercise {ex.id} is registered but never checked in the notebook")
    return problems


def _not_data(source: str) -> set[str]:
    """Names a cell binds by ``import``, ``def`` or ``class`` (modules and code, not the notebook's data)."""
    try:
        tree = ast.parse(re.sub(r"^(\s*)[%!].*$", r"\1pass", source, flags=re.M))
    except SyntaxError:
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name != "*"}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
    return found


def _checked_todos(solution: nbformat.NotebookNode, name: str) -> tuple[list[str | None], dict[str, int]]:
    """The notebook's code cells (None for the others) and, for each exercise checked in it, the index of the TO-DO
    cell it checks (the last one above its check)."""
    cells = [c.source if c.cell_type == "code" else None for c in solution.cells]
    regions = {r.cell for r in solution_regions(solution, name)}
    out: dict[str, int] = {}
    todo = None
    for ci, src in enumerate(cells):
        if src is None:
            continue
        if ci in regions:
            todo = ci
        for ex_id in check_calls(src.split(END)[-1] if ci in regions else src):
            if todo is not None and ex_id not in out:
                out[ex_id] = todo
    return cells, out


def later_names(solution: nbformat.NotebookNode, name: str) -> dict[str, list[str]]:
    """For each exercise checked in ``solution``: the notebook's data names that exist before its TO-DO cell and
    that the cell's given lines or a later cell read before binding them again — unless the solution's TO-DO cell
    binds them itself. A
    student's cell that rebinds one of them (``attn_scores = attn_weights``, a loop variable ``n``) silently
    breaks those later cells; the checks replay the cell and say so (:mod:`helpers.runtime.collect`)."""
    cells, todos = _checked_todos(solution, name)
    return {ex_id: _read_later(cells, todo) for ex_id, todo in todos.items()}


def cell_binds(solution: nbformat.NotebookNode, name: str) -> dict[str, list[str]]:
    """For each exercise checked in ``solution``: the names its solution's TO-DO cell binds. A cell that answers
    several steps (01's TensorFlow half) binds the answers of each of them: binding one of those is no overwrite
    of an earlier step's answer."""
    cells, todos = _checked_todos(solution, name)
    return {ex_id: sorted(n for n in assigned_names(cells[todo] or "") if not n.startswith("_"))
            for ex_id, todo in todos.items()}


def given_lines(solution: nbformat.NotebookNode, name: str) -> dict[str, list[str]]:
    """For each exercise checked in ``solution``: the lines of its TO-DO cell outside the solution's region (what the
    exercise notebook gives, stripped). What a student's cell does is judged without them: a comparison the cell
    gives (`F.scaled_dot_product_attention` to check RoPE) is not the student's way of computing."""
    cells, todos = _checked_todos(solution, name)
    out: dict[str, list[str]] = {}
    for ex_id, todo in todos.items():
        given = _without_region(cells[todo] or "")
        out[ex_id] = [line.strip() for line in given.split("\n") if line.strip()]
    return out


def _without_region(source: str) -> str:
    """A TO-DO cell's source without its solution region: the lines the exercise notebook gives."""
    return re.sub(rf"^[ \t]*{re.escape(BEGIN)}[ \t]*\n.*?^[ \t]*{re.escape(END)}[ \t]*$", "", source,
                  flags=re.M | re.S)


def _read_later(cells: list[str | None], todo: int) -> list[str]:
    before: set[str] = set()
    for src in cells[:todo]:
        if src is not None:
            before |= assigned_names(src) - _not_data(src)
    own = assigned_names(cells[todo] or "")
    alive = before - own
    # what the cell's given lines read (the student's own lines are the student's: the checks replay them)
    given = _without_region(cells[todo] or "")
    found = free_names(given) & alive
    for src in cells[todo + 1:]:
        if src is None:
            continue
        found |= free_names(src) & alive
        alive -= assigned_names(src)
    return sorted(n for n in found if not n.startswith("_"))


LATER_NAMES = Path("src/helpers/course/later_names.py")


def render_later_names(by_notebook: dict[str, dict[str, list[str]]],
                       binds: dict[str, dict[str, list[str]]] | None = None,
                       given: dict[str, dict[str, list[str]]] | None = None) -> str:
    lines = ['"""Generated by `python -m helpers.build` from solutions/ (do not edit): for each exercise, the notebook',
             "names that exist before its TO-DO cell and that later cells read (see helpers.build.later_names), and",
             "the names its solution's TO-DO cell binds (helpers.build.cell_binds), and the lines that cell gives",
             "(helpers.build.given_lines).",
             '"""', "", "# ruff: noqa: E501 (the given lines are kept whole)", ""]
    for title, table in (("LATER_NAMES", by_notebook), ("CELL_BINDS", binds or {}), ("GIVEN_LINES", given or {})):
        lines.append(f"{title}: dict[str, tuple[str, ...]] = {{")
        for stem in sorted(table):
            for ex_id, names in sorted(table[stem].items()):
                if title == "GIVEN_LINES":  # whole lines of code: one string literal per line
                    lines.append(f'    "{ex_id}": (' + ("" if names else "),"))
                    if names:
                        lines += [f"        {line!r}," for line in names]
                        lines.append("    ),")
                    continue
                items = [f'"{n}",' for n in names]
                lines.append(f'    "{ex_id}": (' + ("" if items else "),"))
                if items:
                    lines += textwrap.wrap(" ".join(items), 108, initial_indent=" " * 8, subsequent_indent=" " * 8)
                    lines.append("    ),")
        lines.append("}")
        lines.append("")
    return "\n".join(lines[:-1]) + "\n"


def plan(solutions: Path, notebooks: Path) -> dict[Path, str]:
    """Map every generated file to the text it should have: the exercise notebooks and,
    when the project has a ``pyproject.toml`` with ``[tool.attention-course]``, the badge
    block of its README.md."""
    project = solutions.parent
    repo = None
    if (project / "pyproject.toml").exists():
        try:
            repo = colab.Repository.from_pyproject(project / "pyproject.toml")
        except ValueError as exc:
            raise BuildError(str(exc)) from None
    out = {}
    paths = sorted(solutions.glob("*.ipynb"))
    names, binds, given = {}, {}, {}
    for path in paths:
        nb = read_notebook(path)
        out[notebooks / path.name] = render(build_notebook(nb, path.name, repo))
        names[path.stem] = later_names(nb, path.name)
        binds[path.stem] = cell_binds(nb, path.name)
        given[path.stem] = given_lines(nb, path.name)
    if (project / LATER_NAMES).parent.is_dir():
        out[project / LATER_NAMES] = render_later_names(names, binds, given)
    readme = project / "README.md"
    if repo is not None and readme.exists():
        block = colab.readme_block(repo, [p.stem for p in paths])
        try:
            out[readme] = colab.replace_readme_block(readme.read_text(encoding="utf-8"), block)
        except ValueError as exc:
            raise BuildError(str(exc)) from None
    return out


def _cell_source(text: str, cell_id: str) -> str | None:
    try:
        cells = nbformat.reads(text, as_version=4).cells
    except Exception:
        return None
    return next((c.source for c in cells if c.get("id") == cell_id), None)


_PIN = re.compile(r'^PACKAGE, VERSION = "[^"]*", "([^"]*)"$', re.MULTILINE)


def _stale_reason(path: Path, wanted: str) -> str:
    """Why ``path`` differs from what the builder would write (the Colab pin is named)."""
    if path.name == "README.md":
        return "its badge block is out of date"
    if path.name == LATER_NAMES.name:
        return "(the names each exercise's later cells read) does not match solutions/"
    if not path.exists():
        return f"is missing (solutions/{path.name} has no exercise yet)"
    have = _cell_source(path.read_text(encoding="utf-8"), colab.SETUP_ID)
    want = _cell_source(wanted, colab.SETUP_ID)
    if have != want:
        old = _PIN.search(have or "")
        new = _PIN.search(want or "")
        installs = f"installs helpers {old[1]}" if old else "pins no release"
        return f"has a stale Colab pin: its set-up cell {installs}, the project is at {new[1] if new else '?'}"
    return f"does not match solutions/{path.name}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.build", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if notebooks/ is stale")
    ap.add_argument("--solutions", type=Path, default=Path("solutions"))
    ap.add_argument("--notebooks", type=Path, default=Path("notebooks"))
    args = ap.parse_args(argv)
    try:
        wanted = plan(args.solutions, args.notebooks)
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not wanted:
        print(f"error: no solution notebooks in {args.solutions}", file=sys.stderr)
        return 2
    existing = set(args.notebooks.glob("*.ipynb"))
    if args.check:
        stale = [p.name for p, text in wanted.items() if not p.exists() or p.read_text(encoding="utf-8") != text]
        orphans = sorted(p.name for p in existing - set(wanted))
        for n in stale:
            path = next(p for p in wanted if p.name == n)
            shown = n if n == "README.md" else str(LATER_NAMES) if n == LATER_NAMES.name else f"notebooks/{n}"
            print(f"stale: {shown} {_stale_reason(path, wanted[path])}", file=sys.stderr)
        for n in orphans:
            print(f"orphan: notebooks/{n} has no solution notebook", file=sys.stderr)
        if stale or orphans:
            print("Run `python -m helpers.build` to regenerate notebooks/.", file=sys.stderr)
            return 1
        print(f"notebooks/ is up to date ({len([p for p in wanted if p.suffix == '.ipynb'])} notebooks), and so is "
              f"{LATER_NAMES}.")
        return 0
    args.notebooks.mkdir(parents=True, exist_ok=True)
    for path, text in wanted.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(args.solutions.parent) if path.name == 'README.md' else path}")
    for p in sorted(existing - set(wanted)):
        p.unlink()
        print(f"removed notebooks/{p.name} (no solution notebook)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
