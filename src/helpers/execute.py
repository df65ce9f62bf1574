"""Run solution notebooks and store their outputs (a maintainer's tool).

    python -m helpers.execute solutions/01_illustrated_self_attention.ipynb [...]

Outputs must be stored by executing with the pinned versions, so run this inside the
course environment (``make solutions`` does). It refuses to store a notebook whose run
raised an error or wrote anything to stderr: stored outputs are what nbval compares
against, and what a student sees on screen must match them, pink stderr boxes included.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from .build import KERNELSPEC, read_notebook, render

# The environment every notebook run of the course's tools gets on top of the caller's: a fixed
# hash seed (set and dict orders), and oneDNN off (the same floating-point results on every CPU;
# the notebooks that use TensorFlow set it themselves too). TensorFlow's log level is NOT set
# here: the notebooks keep TensorFlow quiet on their own (helpers.quiet), as they must for a
# student, whose environment sets nothing.
QUIET_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONHASHSEED": "0"}


def run(
    nb: nbformat.NotebookNode,
    cwd: Path,
    timeout: int = 600,
    allow_errors: bool = False,
    env: dict[str, str] | None = None,
) -> nbformat.NotebookNode:
    """Execute ``nb`` in place in a fresh ``python3`` kernel.

    The kernel's environment is ``env`` when given (exactly that), else this process's
    environment with :data:`QUIET_ENV`. Cells tagged ``raises-exception`` may fail without
    stopping the run, as in JupyterLab.
    """
    if env is None:
        os.environ.update(QUIET_ENV)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=allow_errors,
        record_timing=False,
        shutdown_kernel="immediate",  # a graceful stop waits ~2.5 s for TensorFlow's threads
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(**({"env": dict(env)} if env is not None else {}))
    return nb


# TensorFlow's C++ start-up lines ("All log messages before absl::InitializeLog() ...",
# glog-style "I0000 00:00:... cudart_stub.cc ..."). They used to be dropped here before storing;
# now they are refused like any stderr, with a hint: dropping them hid from us exactly what every
# student saw (a pink box under the import). A notebook imports TensorFlow inside
# `with quiet_tensorflow():` (helpers.quiet) and never prints them.
_TF_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\)|[IWE]\d{4} \d\d:\d\d:)", re.M)


def merge_streams(outputs: list) -> list:
    """Join consecutive stream outputs of the same stream, so stored JSON does not depend on
    how the kernel happened to flush (nbval compares them joined anyway)."""
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if prev is not None and out.output_type == prev.output_type == "stream" and out.name == prev.name:
            prev.text += out.text
        else:
            merged.append(out)
    return merged


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """Every error output and every stderr output of ``nb``, one line each."""
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                found.append(f"cell {i + 1}: {out.ename}: {out.evalue}")
            elif out.output_type == "stream" and out.name == "stderr":
                hint = ""
                if _TF_NOISE.search(out.text):
                    hint = (" (TensorFlow's start-up lines: import it inside `with quiet_tensorflow():`, "
                            "from helpers.quiet)")
                found.append(f"cell {i + 1}: wrote to stderr{hint}: {out.text.strip()[:200]}")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.execute", description=__doc__.split("\n")[0])
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    args = ap.parse_args(argv)
    status = 0
    for path in args.notebooks:
        nb = read_notebook(path)
        try:
            run(nb, path.parent, args.timeout)
        except Exception as exc:
            print(f"{path}: {type(exc).__name__}: {str(exc)[-2000:]}", file=sys.stderr)
            status = 1
            continue
        bad = problems(nb)
        if bad:
            print(f"{path}: not stored:\n  " + "\n  ".join(bad), file=sys.stderr)
            status = 1
            continue
        nb.metadata["kernelspec"] = dict(KERNELSPEC)  # language_info is the kernel's own (nbclient)
        for cell in nb.cells:
            cell.metadata.pop("execution", None)
            if cell.cell_type == "code":
                cell.outputs = merge_streams(cell.outputs)
        path.write_text(render(nb), encoding="utf-8")
        print(f"stored outputs of {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
