"""Small NumPy building blocks shared by the reference computations and their wrong variants."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["global_softmax", "max_of_columns", "max_without_keepdim", "one_sum", "projected_scores", "scaled_scores",
           "self_attention", "softmax", "sum_normalise", "sums_without_keepdim", "unstable_softmax",
           "max_without_keepdim_float32", "exp_float32"]


def scaled_scores(q: Any, k: Any) -> np.ndarray:
    """q kᵀ / √d_k in float64, over the last two axes (a batch axis in front, or none)."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    return q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])


def projected_scores(x: Any, w_query: Any, w_key: Any) -> np.ndarray:
    """The scaled scores of the queries x @ w_query against the keys x @ w_key."""
    x = np.asarray(x, dtype=np.float64)
    return scaled_scores(x @ np.asarray(w_query, dtype=np.float64), x @ np.asarray(w_key, dtype=np.float64))


def softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Numerically stable softmax along ``axis`` (the row maximum is subtracted first)."""
    s = np.asarray(scores, dtype=np.float64)
    e = s - s.max(axis=axis, keepdims=True)  # (the methods, in place: the checks call this thousands of times)
    np.exp(e, out=e)
    e /= e.sum(axis=axis, keepdims=True)
    return e


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


def sums_without_keepdim(scores: np.ndarray) -> np.ndarray:
    """exp(scores) divided by the row sums kept as an (n,) vector, which lines up with the columns: entry (i, j)
    divided by the sum of row j (a shift common to all entries, as in ``exp(s)`` itself, changes nothing)."""
    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - s.max())
    return e / e.sum(axis=-1)


def exp_float32(x: Any) -> np.ndarray:
    """exp() with float32's range, in float64: inf above about 88.72, 0 below about -103.97 (where float32's
    smallest subnormal ends), so that a variant reaches inf or 0 where a float32 computation does."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):
        return np.where(x > 88.7228, np.inf, np.where(x < -103.972, 0.0, np.exp(np.minimum(x, 88.7228))))


def sum_unshifted(scores: np.ndarray, float32: bool = False) -> np.ndarray:
    """Each row's maximum subtracted in the numerator only: exp(s − m) / Σ exp(s), the right weights times exp(−m),
    and the sum overflows (weights 0) or underflows (inf) where the raw scores' exponentials do (float32's range
    with ``float32``)."""
    s = np.asarray(scores, dtype=np.float64)
    exp = exp_float32 if float32 else np.exp
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        return exp(s - s.max(axis=-1, keepdims=True)) / exp(s).sum(axis=-1, keepdims=True)


def max_without_keepdim(scores: np.ndarray) -> np.ndarray:
    """The row maxima kept as an (n,) vector, which lines up with the columns: entry (i, j) shifted by the
    maximum of row j, which the row sums (with their axis) do not cancel (the exact numbers, as a softmax of the
    shifted scores gives them: `torch.softmax(s - s.max(-1).values, -1)`)."""
    s = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = s - s.max(axis=-1)
        # (as the library's softmax computes it, its own row maximum subtracted once more: a row whose wrongly
        # shifted scores are all far below 0 gives its weights, not 0 / 0)
        e = np.exp(shifted - shifted.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def log_softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """log(softmax(scores)) along ``axis``, computed without its exponentials underflowing (no log of 0)."""
    s = np.asarray(scores, dtype=np.float64)
    shifted = s - s.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + e^-x), without overflow for large negative x."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))


def max_of_columns(scores: np.ndarray) -> np.ndarray:
    """A softmax written out with each column's maximum subtracted (`s.max(axis=0, keepdims=True)`) instead of each
    row's: entry (i, j) shifted by the maximum of column j, which the row sums do not cancel. The exact numbers
    (what `exp(s - m) / sum` gives wherever its exponentials neither overflow nor all underflow)."""
    s = np.asarray(scores, dtype=np.float64)
    shifted = s - s.max(axis=-2, keepdims=True)
    e = np.exp(shifted - shifted.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def scaled_scores_float32(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """q kᵀ / √d_k over the last two axes, as float32 computes it (its rounding is what some signs look for)."""
    q32, k32 = np.asarray(q, dtype=np.float32), np.asarray(k, dtype=np.float32)
    return (q32 @ np.swapaxes(k32, -1, -2)) / np.float32(np.sqrt(q32.shape[-1]))


def global_shift_float32(scores: np.ndarray, by: str = "max") -> np.ndarray:
    """A library softmax of float32 scores from which one maximum of the whole tensor was subtracted first
    (`softmax(s - s.max())`): right in exact arithmetic, but the difference is rounded to float32's spacing near it,
    so a row whose scores lie far below that maximum loses digits. As float32 computes it (the softmax after it is
    exact: the library subtracts each row's maximum again). ``scores`` as float32 computed them
    (:func:`scaled_scores_float32`): the rounding of the difference depends on their last digits.)"""
    s = np.asarray(scores, dtype=np.float32)
    shifted = (s - (s.max() if by == "max" else s.min())).astype(np.float64)  # (by="min": the smallest score of all)
    e = np.exp(shifted - shifted.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def max_without_keepdim_float32(scores: np.ndarray) -> np.ndarray:
    """:func:`max_without_keepdim` written out, `exp(s - m) / sum`, as float32 computes it: its exp() overflows (and
    underflows) far sooner than float64's, so the shifted scores that reach above 88.7 are inf here too."""
    s = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = exp_float32(s - s.max(axis=-1))
        total = e.sum(axis=-1, keepdims=True)
        return e / np.where(total > np.finfo(np.float32).max, np.inf, total)


def one_sum(scores: np.ndarray) -> np.ndarray:
    """Each row's own maximum subtracted, then ONE sum over the whole matrix (a sum without its axis)."""
    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum()


def sum_normalise(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Divide by the plain sum (seed 001's first normalisation)."""
    s = np.asarray(scores, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return s / np.sum(s, axis=axis, keepdims=True)


def self_attention(
    x: np.ndarray,
    w_query: np.ndarray,
    w_key: np.ndarray,
    w_value: np.ndarray,
    *,
    scale: float | str | None = None,
    normalise=softmax,
    transpose: bool = False,
    swap_kv: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Projected self-attention, ``(weights, outputs)``, with switches for catalogued mistakes.

    ``scale``: None or ``"sqrt"`` divides the scores by √d_k (the reference), ``"none"`` by 1,
    ``"d"`` by d_k, a number by that number. ``normalise`` turns scores into weights;
    ``transpose`` computes K·Qᵀ; ``swap_kv`` takes the keys from w_value and the values from w_key.
    """
    if swap_kv:
        w_key, w_value = w_value, w_key
    q, k, v = x @ w_query, x @ w_key, x @ w_value
    scores = k @ q.T if transpose else q @ k.T
    d_k = k.shape[-1]
    divisor = {None: np.sqrt(d_k), "sqrt": np.sqrt(d_k), "none": 1.0, "d": float(d_k)}.get(scale, scale)
    weights = normalise(scores / divisor)
    return weights, weights @ v
