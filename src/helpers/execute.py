"""Run solution notebooks and store their outputs (a maintainer's tool).

    python -m helpers.execute solutions/01_illustrated_self_attention.ipynb [...]

Outputs must be stored by executing with the pinned versions, so run this inside the
course environment (``make solutions`` does). It refuses to store a notebook whose run
raised an error or wrote to stderr: stored outputs are what nbval compares against.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from .build import read_notebook, render

# Quiet TensorFlow before any kernel imports it (level 3: on TF 2.21 level 2 still
# lets absl's start-up lines through to stderr).
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0", "PYTHONHASHSEED": "0"}


def run(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 600, allow_errors: bool = False) -> nbformat.NotebookNode:
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
    client.execute()
    return nb


# TensorFlow's C++ start-up lines ("All log messages before absl::InitializeLog() ...",
# glog-style "I0000 00:00:... cudart_stub.cc ...") reach the kernel's stderr whatever the
# log level once zmq is loaded first, and ipykernel forwards them to the notebook.
_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog\(\)|[IWE]\d{4} \d\d:\d\d:)")


def is_framework_noise(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return bool(lines) and all(_NOISE.match(ln) for ln in lines)


def drop_framework_noise(nb: nbformat.NotebookNode) -> None:
    """Remove stderr outputs made only of TensorFlow's C++ start-up lines."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [
                o for o in cell.outputs
                if not (o.output_type == "stream" and o.name == "stderr" and is_framework_noise(o.text))
            ]


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
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                found.append(f"cell {i + 1}: {out.ename}: {out.evalue}")
            elif out.output_type == "stream" and out.name == "stderr":
                found.append(f"cell {i + 1}: wrote to stderr: {out.text.strip()[:200]}")
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
        drop_framework_noise(nb)
        bad = problems(nb)
        if bad:
            print(f"{path}: not stored:\n  " + "\n  ".join(bad), file=sys.stderr)
            status = 1
            continue
        for cell in nb.cells:
            cell.metadata.pop("execution", None)
            if cell.cell_type == "code":
                cell.outputs = merge_streams(cell.outputs)
        path.write_text(render(nb), encoding="utf-8")
        print(f"stored outputs of {path}")
    return status


if __name__ == "__main__":
    sys.exit(main())
