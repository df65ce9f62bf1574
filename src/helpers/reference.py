"""Small NumPy building blocks shared by the reference computations and their wrong variants."""

from __future__ import annotations

import numpy as np

__all__ = ["global_softmax", "softmax", "sum_normalise", "unstable_softmax"]


def softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis`` (the row maximum is subtracted first)."""
    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - np.max(s, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def unstable_softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """The textbook formula without max-subtraction: overflows for large scores."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(np.asarray(scores, dtype=np.float64))
        return e / np.sum(e, axis=axis, keepdims=True)


def global_softmax(scores: np.ndarray) -> np.ndarray:
    """exp(scores) / sum over the *whole* matrix: the bug of seed 004."""
    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - s.max())
    return e / e.sum()


def sum_normalise(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Divide by the plain sum (seed 001's first normalisation)."""
    s = np.asarray(scores, dtype=np.float64)
    return s / np.sum(s, axis=axis, keepdims=True)
