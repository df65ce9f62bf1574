"""helpers.quiet: TensorFlow's start-up lines never reach a notebook, everything else still does."""

import ast
import re
import subprocess
import sys
import textwrap

import nbformat
from nbformat.v4 import new_code_cell, new_notebook
from student import student_env

from helpers.execute import run
from paths import ROOT

QUIET_PY = ROOT / "src" / "helpers" / "quiet.py"


def _python(code, **kw):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, **kw)


def test_descriptor_2_is_silenced_inside_the_block_and_restored_after():
    proc = _python("""
        import os
        from helpers.quiet import stderr_descriptor_silenced

        os.write(2, b"before\\n")
        with stderr_descriptor_silenced():
            os.write(2, b"inside\\n")
        os.write(2, b"after\\n")
        try:
            with stderr_descriptor_silenced():
                os.write(2, b"inside again\\n")
                raise KeyError("boom")
        except KeyError:
            os.write(2, b"after an error\\n")
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "before\nafter\nafter an error\n"


def test_quiet_module_stands_alone():
    """It runs in the grader's sandbox, which holds only a few of the package's modules."""
    tree = ast.parse(QUIET_PY.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    relative = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert not relative, f"quiet.py imports from the package: {relative}"
    assert imported <= sys.stdlib_module_names, f"not standard library: {imported - sys.stdlib_module_names}"
    # and it loads from a file on its own, in an isolated interpreter
    proc = subprocess.run([sys.executable, "-I", "-c", "import runpy, sys; runpy.run_path(sys.argv[1])", str(QUIET_PY)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _kernel_run(tmp_path, sources, tf_log_level):
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    env = student_env()
    env["TF_CPP_MIN_LOG_LEVEL"] = tf_log_level
    run(nb, tmp_path, timeout=300, env=env)
    return [[o for o in c.outputs if o.output_type == "stream" and o.name == "stderr"] for c in nb.cells]


def test_tensorflow_in_a_kernel_is_quiet_at_import_and_first_op_whatever_the_log_level(tmp_path):
    first_op = "print(float((tf.constant([1.0, 2.0]) * 2)[1]))"
    later = "import os, time\nos.write(2, b'written after the import\\n')\ntime.sleep(0.5)"
    # Control: a plain import shows TensorFlow's lines (else this test could not tell anything).
    plain = _kernel_run(tmp_path, ["import tensorflow as tf", first_op], tf_log_level="0")
    assert plain[0] or plain[1], "TensorFlow printed nothing on stderr: this control no longer shows the problem"
    quiet_run = _kernel_run(tmp_path, [
        "from helpers.quiet import quiet_tensorflow\n\nwith quiet_tensorflow():\n    import tensorflow as tf",
        first_op,
        later,
    ], tf_log_level="0")
    assert quiet_run[0] == [] and quiet_run[1] == [], f"TensorFlow's lines got through: {quiet_run[:2]}"
    assert "".join(o.text for o in quiet_run[2]) == "written after the import\n", "stderr not restored"


def test_the_block_imports_nothing_itself():
    """The grader's warm process imports this module: it must not start TensorFlow."""
    proc = _python("""
        import sys
        from helpers.quiet import quiet_tensorflow

        with quiet_tensorflow():
            pass
        print("tensorflow" in sys.modules)
    """)
    assert proc.returncode == 0 and proc.stdout == "False\n", proc.stdout + proc.stderr


def test_notebooks_that_use_tensorflow_import_it_quietly_in_their_first_code_cell():
    for folder in ("solutions", "notebooks"):
        for path in sorted((ROOT / folder).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            code = [c.source for c in nb.cells if c.cell_type == "code" and c.get("id") != "colab-setup"]
            uses_tf = any("import tensorflow" in s or "import keras" in s for s in code)
            if uses_tf:
                assert re.search(r"^with quiet_tensorflow\(\):.*\n    import tensorflow as tf$", code[0], re.M), (
                    f"{folder}/{path.name}: import TensorFlow in the first code cell, inside quiet_tensorflow()")
