"""Import TensorFlow without its start-up messages.

TensorFlow's C++ core writes a few lines straight to the process's standard error (file
descriptor 2) while it loads and when it runs its first operation::

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 00:00:... cuda_platform.cc:52] failed call to cuInit: ...

They come out whatever ``TF_CPP_MIN_LOG_LEVEL`` says, and Jupyter (JupyterLab, Colab, VS Code)
shows everything written there as a pink "stderr" box. In a notebook::

    from helpers.quiet import quiet_tensorflow

    with quiet_tensorflow():
        import tensorflow as tf

points descriptor 2 at the null device during the import and during one tiny first operation
(which is where the lazy lines come from), then puts it back. Python's own warnings and errors
are untouched: they do not go through descriptor 2 in a kernel, and anything written after the
block shows as usual.

This module uses the standard library only (it also runs inside the grader's sandbox).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["quiet_tensorflow", "stderr_descriptor_silenced"]

STDERR_FD = 2


@contextlib.contextmanager
def stderr_descriptor_silenced() -> Iterator[None]:
    """Send whatever is written to file descriptor 2 to the null device until the block ends."""
    for stream in (sys.stderr, sys.__stderr__):
        with contextlib.suppress(Exception):  # a closed or replaced stream: nothing to flush
            stream.flush()
    try:
        saved = os.dup(STDERR_FD)
    except OSError:  # no descriptor 2 at all: nothing can reach it
        yield
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, STDERR_FD)
        finally:
            os.close(null)
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.__stderr__.flush()
        os.dup2(saved, STDERR_FD)
        os.close(saved)


def _first_operation(tf) -> None:
    """One tiny op: TensorFlow looks for GPUs (and says it found none) on its first one."""
    _ = (tf.constant(1.0) + 1.0).numpy()


@contextlib.contextmanager
def quiet_tensorflow() -> Iterator[None]:
    """Import TensorFlow inside this block: its start-up lines do not reach the notebook.

    Also sets ``TF_CPP_MIN_LOG_LEVEL=3`` unless a level is already chosen, so TensorFlow's
    C++ info and warning lines stay quiet after start-up too.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with stderr_descriptor_silenced():
        yield
        tf = sys.modules.get("tensorflow")
        if tf is not None and hasattr(tf, "constant"):
            _first_operation(tf)
