"""Measuring attention at scale: timings, growth exponents, memory peaks and array sizes.

Used by notebook 07. Timings are illustrations, never assertions: they change from run to
run and from machine to machine. The array sizes reported by :func:`largest_new_array`
are exact and the same on every run.

    median_time(fn, *args, repeat=5)        -> seconds (median of `repeat` calls)
    time_over_sizes(impls, sizes, make)     -> {name: {n: seconds}}
    growth_exponent(ns, values)             -> slope of log(value) over log(n)
    peak_bytes(fn, *args)                   -> tracemalloc peak while fn runs (NumPy arrays included)
    largest_new_array(fn, *args)            -> Allocation(shape, nbytes) of the largest array fn computed
    fmt_bytes(nbytes)                       -> "16.0 GiB"

NumPy only; torch is never imported here (the callables handed in may use it).
"""

from __future__ import annotations

import statistics
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "Allocation",
    "fmt_bytes",
    "growth_exponent",
    "largest_new_array",
    "median_time",
    "peak_bytes",
    "time_over_sizes",
]


def median_time(fn: Callable[..., Any], *args: Any, repeat: int = 5, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``fn(*args)`` over ``repeat`` calls (after ``warmup`` untimed ones).

    The median, not the mean: one call slowed down by another process on the machine
    should not move the result.
    """
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    for _ in range(warmup):
        fn(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_over_sizes(
    impls: Mapping[str, Callable[..., Any]],
    sizes: Mapping[str, Sequence[int]],
    make_inputs: Callable[[int], tuple],
    repeat: int = 5,
) -> dict[str, dict[int, float]]:
    """Time every implementation at each of its sizes: ``{name: {n: median seconds}}``.

    ``make_inputs(n)`` returns the arguments for size ``n``; they are made once per size
    and shared, so every implementation sees the same inputs.
    """
    unknown = set(sizes) - set(impls)
    if unknown:
        raise ValueError(f"sizes given for unknown implementations {sorted(unknown)}")
    inputs = {n: make_inputs(n) for n in sorted({n for ns in sizes.values() for n in ns})}
    return {name: {n: median_time(impls[name], *inputs[n], repeat=repeat) for n in sizes[name]} for name in sizes}


def growth_exponent(ns: Sequence[float], values: Sequence[float]) -> float:
    """The exponent p of the best fit ``value ≈ c · n**p`` (least squares on log–log axes)."""
    x, y = np.log(np.asarray(ns, dtype=float)), np.log(np.asarray(values, dtype=float))
    if x.size < 2:
        raise ValueError("need at least two sizes")
    return float(np.polyfit(x, y, 1)[0])


def peak_bytes(fn: Callable[..., Any], *args: Any) -> int:
    """Peak memory traced by :mod:`tracemalloc` while ``fn(*args)`` runs, above what was there before.

    NumPy reports its array buffers to tracemalloc, so this sees NumPy's temporaries;
    PyTorch's allocator is not traced.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        fn(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return max(0, peak - before)


class Allocation(NamedTuple):
    shape: tuple[int, ...]
    nbytes: int


class _Tracked(np.ndarray):
    """An ndarray that reports every array NumPy derives from it (ufuncs, matmul, reductions, slices)."""

    _largest: list | None = None  # [nbytes, shape] of the largest array seen, while a measurement runs

    def __array_finalize__(self, obj: Any) -> None:
        largest = _Tracked._largest
        if largest is not None and self.nbytes > largest[0]:
            largest[0], largest[1] = self.nbytes, tuple(self.shape)


def largest_new_array(fn: Callable[..., Any], *args: Any) -> Allocation:
    """The largest array ``fn(*args)`` computed from its array arguments: shape and bytes.

    Every NumPy array argument is handed over as a tracking subclass, so each array NumPy
    derives from it — by a ufunc such as ``np.exp`` or ``-``, by ``@``, a reduction, a slice —
    is seen. Exact and the same on every run. Not seen: arrays made from scratch
    (``np.zeros``, ``np.full``) and anything computed outside NumPy.
    """
    if _Tracked._largest is not None:
        raise RuntimeError("largest_new_array is already measuring")
    tracked = [a.view(_Tracked) if isinstance(a, np.ndarray) else a for a in args]
    _Tracked._largest = [0, ()]
    try:
        fn(*tracked)
        nbytes, shape = _Tracked._largest
    finally:
        _Tracked._largest = None
    return Allocation(shape, nbytes)


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_bytes(nbytes: float) -> str:
    """``1536`` → ``"1.5 KiB"``, ``2**34`` → ``"16.0 GiB"`` (powers of 1024)."""
    value = float(nbytes)
    for unit in _UNITS:
        if abs(value) < 1024 or unit == _UNITS[-1]:
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
