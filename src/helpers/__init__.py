"""helpers — checks, exercise specs, plotting, the notebook builder and the grader of the
self-attention course.

Importing this package is cheap: it never imports torch or TensorFlow itself.
"""

from .checks import check
from .convert import AnswerError, to_array

__all__ = ["AnswerError", "check", "to_array"]
__version__ = "0.1.0"
