"""helpers.execute (make solutions): what it stores, and what it refuses to store."""

import platform

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from helpers import execute
from helpers.build import KERNELSPEC, render

TF_LINE = "I0000 00:00:1795398775.930819    6205 cudart_stub.cc:31] Could not find cuda drivers on your machine.\\n"


def _write(path, *sources):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.write_text(render(nb))
    return path.read_text()


def test_stores_outputs_and_the_metadata_jupyterlab_writes(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)  # let the kernel forward descriptor 2
    path = tmp_path / "ok.ipynb"
    _write(path, "print('a'); print('b')")
    assert execute.main([str(path)]) == 0
    nb = nbformat.read(path, as_version=4)
    assert nb.cells[0].outputs[0].text == "a\nb\n" and nb.cells[0].execution_count == 1
    assert nb.metadata["kernelspec"] == KERNELSPEC
    assert nb.metadata["language_info"]["version"] == platform.python_version()


def test_refuses_tensorflow_start_up_lines_instead_of_hiding_them(tmp_path, monkeypatch, capsys):
    """They used to be dropped before storing, which hid the pink box every student saw."""
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    path = tmp_path / "noisy.ipynb"
    before = _write(path, f"import os, time\nos.write(2, b'{TF_LINE}')\ntime.sleep(0.5)\nprint('result')")
    assert execute.main([str(path)]) == 1
    err = capsys.readouterr().err
    assert "cell 1: wrote to stderr" in err and "quiet_tensorflow" in err and "cudart_stub" in err
    assert path.read_text() == before, "a refused notebook must be left as it was"
