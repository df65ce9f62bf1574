"""Scores divided by the square root of another size of the inputs than d_k (``scale_by_other_size``).

A student who divides by √n, √heads, √batch or √block_size instead of √d_k gets numbers that no one
wrong variant can stand for: which size it is depends on the code. :func:`other_scale` makes an
:attr:`Exercise.explains` entry that tries the square root of every other size of the inputs and names
the one the answers match on every trial where they are wrong (only when one does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

# the answers must match the scaled attention this closely (a factor of 10 above the step's own tolerance: the
# student's float32 against this float64; the sizes tried differ from d_k by far more)
LOOSER = 10.0


def other_scale(attend: Callable[[Mapping[str, Any], Any], Any],
                sizes: Callable[[Mapping[str, Any]], Mapping[str, Any]],
                d_k: str = "d_k", width: str = "the width of one key (k.shape[-1])") -> Callable[..., str | None]:
    """An explain for ``scale_by_other_size``. ``attend(inputs, scale)``: the step's answer (as its reference
    returns it) with the scores divided by ``scale`` (a number, or an array that broadcasts against the scores,
    e.g. one length per sentence); ``sizes(inputs)``: ``{what: size}``, the other sizes of these inputs, ``what``
    in words ("n, the number of tokens (q.shape[-2])"). ``d_k`` and ``width`` say what the right size is."""
    from .spec import _as_named, _close  # spec imports the exercises that import this

    def explain(ex, trials, record=None) -> str | None:
        if ex.kind == "function" and record and (record.get("scalars_read") or record.get("globals_read")):
            return None  # a function that reads the notebook's numbers (its d_k): the check of global reads says so
        typed = _notebook_width(ex)  # a √ of this notebook's d_k typed in gives the same numbers where a size equals it
        matched: list[list[str]] = []
        values: list[dict[str, Any]] = []  # the size each matched trial names, by what
        for got, inputs in trials:
            if _close(got, ex.expected(inputs), ex.answers, ex.rtol, ex.atol):
                continue
            here, ambiguous, blurred = [], False, False
            want = ex.expected(inputs)
            for what, size in sizes(inputs).items():
                scale = np.sqrt(np.asarray(size, dtype=np.float64))
                with np.errstate(all="ignore"):
                    out = _as_named(ex, attend(inputs, scale))
                if _close(out, want, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER):
                    # a size this close to d_k here that the looser match cannot tell it from the right answer: an
                    # answer a little off for another reason (a clamp) would match it, so this trial cannot say
                    blurred = blurred or _close(got, out, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER)
                    continue
                if _close(got, out, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER):
                    if np.ndim(size) == 0 and typed is not None and int(size) == typed:
                        ambiguous = True  # this trial cannot tell that size from the notebook's d_k typed in
                    else:
                        here.append(what)
            if not here and (ambiguous or blurred):
                continue
            if not here:
                return None
            matched.append(here)
            values.append(sizes(inputs))
        if not matched:
            return None
        if len(matched) < len(trials) and \
                _one_number(ex, trials, attend, [v[w] for v, w in zip(values, (m[0] for m in matched))]):
            return None  # the same number on every trial, right where it is d_k (a typed-in √4), that a size only
            # happened to equal where it is wrong
        right = f"The scores are dot products of a query and a key, {d_k} numbers each: divide by √{d_k}, {width}."
        common = [w for w in matched[0] if all(w in m for m in matched)]
        if common:
            also = ""
            if len(common) > 1:
                also = f" (or of {' or of '.join(common[1:])}: they are equal in every input it was tried on)"
            return f"You divided the scores by the square root of {common[0]}{also}, not of {d_k}. {right}"
        seen = list(dict.fromkeys(m[0] for m in matched))
        return (f"You divided the scores by the square root of another size of the inputs than {d_k}: on some "
                f"inputs it is {seen[0]}, on others {' or '.join(seen[1:])} (a size read from another axis). "
                + right)

    explain.attend, explain.sizes = attend, sizes  # for the tests: the answers of each size
    return explain


def _one_number(ex, trials, attend, named: list[Any]) -> bool:
    """The scores divided by one and the same number on every trial, the right ones (where d_k is that number)
    included: a number typed in (or read from the notebook), which the size named on the wrong trials only happened
    to equal there."""
    from .spec import _as_named, _close

    if not named or np.ndim(named[0]) or any(np.ndim(v) or v != named[0] for v in named):
        return False
    scale = np.sqrt(float(named[0]))
    for got, inputs in trials:
        with np.errstate(all="ignore"):
            out = _as_named(ex, attend(inputs, scale))
        if not _close(got, out, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER):
            return False
    return True


def matches(fn: Callable[..., Any], message: str) -> Callable[..., str | None]:
    """An explain for a second form of a catalogued mistake, besides its variant (dropout on the scores before
    the mask as well as after it): ``message`` when the answers are what ``fn(**inputs)`` gives on every trial
    where they are wrong (and on at least one)."""
    from .spec import _as_named, _close

    def explain(ex, trials, record=None) -> str | None:
        wrong = 0
        for got, inputs in trials:
            if _close(got, ex.expected(inputs), ex.answers, ex.rtol, ex.atol):
                continue
            with np.errstate(all="ignore"):
                out = _as_named(ex, fn(**inputs))
            if not _close(got, out, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER):
                return None
            wrong += 1
        return message if wrong else None

    return explain


def _notebook_width(ex: Any) -> int | None:
    """The width of one key in the notebook's own example (its d_k), or None when the step's inputs do not say."""
    try:
        inputs = ex.inputs(None)
    except Exception:  # noqa: BLE001 — an example that cannot be made: no such rule
        return None
    return _key_width(inputs)


def _key_width(inputs: Mapping[str, Any]) -> int | None:
    """d_k of a step's inputs: the width of its keys (or of the key projection), or None when they do not say."""
    for name in ("k", "keys", "w_key"):
        if name in inputs and np.ndim(inputs[name]) >= 1:
            return int(np.shape(inputs[name])[-1])
    return None


def power_precedence(attend: Callable[[Mapping[str, Any], Any], Any],
                     width: Callable[[Mapping[str, Any]], int | None] = _key_width,
                     d_k: str = "d_k") -> Callable[..., str | None]:
    """An explain for ``power_precedence``: a square root written ``** 1/2``. ``attend(inputs, scale)`` as for
    :func:`other_scale`. ``d ** 1/2`` is ``(d ** 1) / 2``, so a scale computed that way divides the scores by
    d_k / 2 (equal to √d_k only for d_k = 4: right on notebooks whose keys are 4 wide), and ``s / d ** 1/2``
    divides them by 2 · d_k. Named when every wrong trial matches one of the two (the same one on all). ``width``:
    d_k of a trial's inputs (the keys' width by default); ``d_k``: its name in the message ("d_head" for heads)."""
    from .spec import _as_named, _close

    def explain(ex, trials, record=None) -> str | None:
        if ex.kind == "function" and record and (record.get("scalars_read") or record.get("globals_read")):
            return None  # a function that reads the notebook's numbers: the check of global reads says so
        found: list[str] | None = None
        sizes = set()  # the d_k of the wrong trials: one size alone cannot tell d_k / 2 from another number
        for got, inputs in trials:
            if _close(got, ex.expected(inputs), ex.answers, ex.rtol, ex.atol):
                continue
            size = width(inputs)
            if size is None:
                return None
            sizes.add(size)
            here = []
            want = ex.expected(inputs)
            for form, scale in (("half", size / 2), ("double", 2.0 * size)):
                with np.errstate(all="ignore"):
                    out = _as_named(ex, attend(inputs, scale))
                if _close(out, want, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER):
                    continue  # cannot be told from the right answer at the looser tolerance
                if _close(got, out, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER):
                    here.append(form)
            found = here if found is None else [f for f in found if f in here]
            if not found:
                return None
        if not found or len(sizes) < 2:
            return None
        if found[0] == "half":
            return (f"Your scores are divided by {d_k} / 2, not by √{d_k} (the two are equal only when {d_k} = 4). "
                    f"In Python `{d_k} ** 1/2` is `({d_k} ** 1) / 2`, because `**` binds tighter than `/`: write "
                    f"`{d_k} ** 0.5` (or `math.sqrt({d_k})`).")
        return (f"Your scores are divided by 2 · {d_k}, not by √{d_k}: in Python `scores / {d_k} ** 1/2` is "
                f"`(scores / {d_k}) / 2`, because `**` binds tighter than `/` and the divisions go left to right. "
                f"Write `scores / {d_k} ** 0.5` (or divide by `math.sqrt({d_k})`).")

    return explain


def truncated_root(attend: Callable[[Mapping[str, Any], Any], Any],
                   width: Callable[[Mapping[str, Any]], int | None] = _key_width,
                   d_k: str = "d_k") -> Callable[..., str | None]:
    """An explain for ``scale_truncated``: √d_k cut to a whole number (`math.isqrt(d_k)`, `int(d_k ** 0.5)`), which
    is no scale at all where d_k is 2 or 3 and right where it is a square. Named when every wrong trial matches it
    and the wrong trials' cut roots take two values or more, one of them above 1 (one number on every trial is a
    number typed in, or another size's root, which the other explains name)."""
    from .spec import _as_named, _close

    def explain(ex, trials, record=None) -> str | None:
        cuts = set()
        for got, inputs in trials:
            want = ex.expected(inputs)
            if _close(got, want, ex.answers, ex.rtol, ex.atol):
                continue
            size = width(inputs)
            if size is None:
                return None
            cut = float(np.floor(np.sqrt(size)))
            with np.errstate(all="ignore"):
                out = _as_named(ex, attend(inputs, cut))
            if not _close(got, out, ex.answers, ex.rtol * LOOSER, ex.atol * LOOSER):
                return None
            cuts.add(cut)
        if len(cuts) < 2 or max(cuts) <= 1:
            return None
        return (f"Your scores are divided by √{d_k} cut to a whole number (`math.isqrt({d_k})`, `int({d_k} ** 0.5)`): "
                f"that is √{d_k} only when {d_k} is a square (4, 9, …), 1 (no scale at all) when it is 2 or 3, and 2 "
                f"instead of 2.83 when it is 8. Divide by the square root itself: `math.sqrt({d_k})` or "
                f"`{d_k} ** 0.5`.")

    return explain


def scale_explains(other: Callable[..., str | None], width: Callable[[Mapping[str, Any]], int | None] = _key_width,
                   d_k: str = "d_k") -> dict[str, Callable[..., str | None]]:
    """A step's explains for the scale: ``other`` (an :func:`other_scale`), the ``** 1/2`` and the √ cut to a whole
    number of the same step (``width``, ``d_k``: see :func:`power_precedence`)."""
    return {"scale_by_other_size": other, "power_precedence": power_precedence(other.attend, width, d_k),
            "scale_truncated": truncated_root(other.attend, width, d_k)}
