"""helpers — checks, exercise specs, plotting, the notebook builder and the grader of the
self-attention course.

Importing this package is cheap: it never imports torch or TensorFlow itself, nor the
registry of exercises (that happens at the first ``check``). In IPython it starts recording
which cells ran (see :mod:`helpers.runtime.history`), so a check can replay the student's cell
and notice a cell that raised.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

from .convert import AnswerError, to_array
from .runtime import history as _history

__all__ = ["AnswerError", "check", "to_array"]
__version__ = "0.1.0"

# The grader's sandbox replaces the check with its recorder (helpers.grading.zygote).
_check_hook: Callable[[str, Mapping[str, Any]], None] | None = None


def check(exercise_id: str, namespace: Mapping[str, Any] | None = None) -> None:
    """Check one exercise of the notebook and print a one-line verdict (✅ / 🟡 / ❌ / ⏳)."""
    if namespace is None:
        namespace = sys._getframe(1).f_globals
    if _check_hook is not None:
        _check_hook(exercise_id, namespace)
        return
    from .checks import check as _check

    _check(exercise_id, namespace)


_history.install()
