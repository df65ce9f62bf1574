"""Notebook 07 — attention at scale (beyond the seeds): batched attention, the online softmax's
normaliser in one pass over a stream, blockwise ("flash") attention that never holds the n × n
score matrix, and its causal version that skips the blocks above the diagonal.

The last three are about *how* the answer is computed, so besides the values their checks measure
the process:

- the stream of scores can be read once only, and the memory may not grow with it (``one_pass``);
- the blockwise functions' extra memory must stay far below one n × n matrix (``peak_memory``);
- the causal function is handed queries and keys that notice when scores of a key after its query
  are computed (``causal_blocks``): a block entirely above the diagonal, or far more such scores than
  the diagonal blocks hold, stops the call with an exception that says which block it was; the
  blockwise function's keys count how many of them each product takes (``key_blocks``).

  Those watching arrays are made by :mod:`helpers.runtime.watch` from the probe's plain arrays, in the
  student's kernel and in the grader's sandbox alike.

The notebook's examples are made here and in the notebook by the same seeded NumPy generators, so
the check's "notebook example" is exactly what the student sees. The references and most variants of
the blockwise steps are computed in closed form (:func:`_attend`, a chunk of queries at a time, so that
the reference itself stays far below an n × n matrix on the long inputs); the variants whose result
depends on the order of the blocks (a missing rescaling, a block's own maximum) run the blocks in order
(:func:`_blockwise`). The causal ones give what a loop over query tiles that skips the blocks above
the diagonal computes. Checks stay fast: the pairwise comparison of the variants on the fresh draws is
most of their cost.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..reference import global_shift_float32, scaled_scores_float32, softmax
from ..scales import other_scale, scale_explains
from ..spec import Exercise, Probe, batch_of_one, global_rounding_sign, register

NOTEBOOK = "07_attention_at_scale"

MISSING_RESCALE = "missing_rescale"

# The notebook's stream of scores for the warm-up: the maximum changes three times.
STREAM = np.array([1.0, 3.0, 0.5, 4.0, 4.0, -2.0, 6.5, 2.0])
# Float64's largest x with a finite exp(x) is about 709.78: scores just below it keep every
# exp(x) finite but make the plain sum overflow.
NEAR_OVERFLOW = 709.0
# The fresh streams lie this far below 0: below the finite stand-ins for −∞ a student starts the maximum at most
# (−1e9, −9999), so such a start is never overtaken there (the edge trial, near −1e300, goes below the others).
# Not much further: near −1e12 float64's spacing is 1.2e-4, and a right running log-sum-exp (np.logaddexp), whose
# running value sits that low, misses the total by as much; near −4e9 the spacing is 5e-7.
FAR_BELOW = -4e9
# The stand-in for −∞ that students write most (the finite_max_start variant).
SENTINEL = -1e9


def batched_example() -> dict:
    """2 sequences × 3 heads × 5 positions, d_k = d_v = 4 (the notebook's `queries_b, keys_b, values_b`)."""
    rng = np.random.default_rng(2024)
    return {name: rng.normal(size=(2, 3, 5, 4)) for name in ("q", "k", "v")}


def flash_example() -> dict:
    """10 positions, d_k = 4, d_v = 3, blocks of 4 keys (the notebook's `queries, keys, values`)."""
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(10, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 3))
    return {"q": q, "k": k, "v": v, "block_size": 4}


# --- references and wrong variants ---------------------------------------------------------


def _t(a):
    return np.swapaxes(a, -1, -2)


def attention(q, k, v, scale=None, axis=-1):
    """softmax(q kᵀ / scale) v over the last two axes; scale defaults to √d_k."""
    d = q.shape[-1]
    s = q @ _t(k) / (np.sqrt(d) if scale is None else scale)
    return softmax(s, axis=axis) @ v


# float32's largest x with a finite exp(x): the PyTorch step's scores are float32
FLOAT32_EXP_LIMIT = float(np.log(np.finfo(np.float32).max))  # about 88.72


def _unshifted_float32(q, k, v):
    """A softmax written out without subtracting each row's maximum, as float32 computes it: exp of a score above
    about 88.7 is inf, and inf / inf is NaN (a sum of finite exponentials above float32's largest number is inf too)."""
    s = q @ _t(k) / np.sqrt(q.shape[-1])
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(s > FLOAT32_EXP_LIMIT, np.inf, np.exp(np.minimum(s, FLOAT32_EXP_LIMIT)))
        total = e.sum(axis=-1, keepdims=True)
        total = np.where(total > np.finfo(np.float32).max, np.inf, total)
        return e / total @ v


VECTORISED_MISTAKES = {
    "unstable_softmax": _unshifted_float32,
    "missing_scale": lambda q, k, v: attention(q, k, v, scale=1.0),
    "scale_by_d": lambda q, k, v: attention(q, k, v, scale=q.shape[-1]),
    "scale_by_d_v": lambda q, k, v: attention(q, k, v, scale=np.sqrt(v.shape[-1])),
    "transposed_scores": lambda q, k, v: softmax(k @ _t(q) / np.sqrt(q.shape[-1])) @ v,
    "softmax_wrong_axis": lambda q, k, v: attention(q, k, v, axis=-2),
    # dim=1, right for the (n, n) scores of the earlier notebooks: here it is the heads axis
    "softmax_over_heads": lambda q, k, v: attention(q, k, v, axis=1),
    # the weights (or the outputs) divided by √d_k instead of the scores
    "scale_after_softmax": lambda q, k, v: attention(q, k, v, scale=1.0) / np.sqrt(q.shape[-1]),
    "scale_multiplied": lambda q, k, v: attention(q, k, v, scale=1.0 / np.sqrt(q.shape[-1])),
}


def _running(scores, start=-np.inf, rescale=True, update_max=True, shift=True, total_type=float):
    """(m, total): the largest score and the sum of exp(score − m), so that softmax(s) = exp(s − m) / total,
    with switches for the catalogued mistakes. The right one runs online, keeping two numbers (so that
    the sample answer passes the memory probe too); for a wrong one the stream is read once (np.fromiter
    keeps no score object alive), then the running quantities are computed in closed form:

    - right: m = max, total = Σ exp(s − m) (what the rescaled running sum ends with);
    - ``start=0``: m = max(0, max s), total = Σ exp(s − m);
    - ``rescale=False``: each term measured against the running maximum of its own time, never rescaled;
    - ``update_max=False``: m frozen at the first score, total = Σ exp(s − s₀);
    - ``shift=False``: total = Σ exp(s), the maximum tracked but not used.

    ``total_type``: the type the right one keeps its total in (``np.float32``: every term and rescaling rounded to it).
    """
    if start == -np.inf and rescale and update_max and shift:  # the right one: online, as the step asks
        m, total = -math.inf, total_type(0.0)
        for x in scores:
            x = float(x)
            if x > m:
                total, m = total * total_type(math.exp(m - x)), x
            total += total_type(math.exp(x - m))
        return np.array([m, float(total)])
    s = np.fromiter((float(x) for x in scores), dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        if not shift:
            return np.array([max(start, s.max()), np.exp(s).sum()])
        if not update_max:
            return np.array([s[0], np.exp(s - s[0]).sum()])
        if not rescale:
            running = np.maximum(np.maximum.accumulate(s), start)
            return np.array([running[-1], np.exp(s - running).sum()])
        m = max(start, s.max())
        return np.array([m, np.exp(s - m).sum()])


def _exponent_above_max(scores):
    """The running sum grown by exp(s − m) against the old maximum, rescaled only after: right as long as
    no score jumps more than about 709 above the running maximum, inf · 0 = NaN when one does."""
    m, total = -np.inf, 0.0
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        for s in np.fromiter((float(x) for x in scores), dtype=np.float64):
            if m == -np.inf:
                m, total = s, np.float64(1.0)
                continue
            total = total + np.exp(s - m)
            if s > m:
                total, m = total * np.exp(m - s), s
    return np.array([m, total])


ONLINE_MISTAKES = {
    MISSING_RESCALE: lambda scores: _running(scores, rescale=False),
    "max_from_zero": lambda scores: _running(scores, start=0.0),
    "first_score_as_max": lambda scores: _running(scores, update_max=False),
    "unstable_softmax": lambda scores: _running(scores, shift=False),
    "normaliser_pair_swapped": lambda scores: _running(scores)[::-1],
    "positive_exponent": _exponent_above_max,
    # a finite "minus infinity" (−1e9) as the start: never overtaken by scores below it, so every exp underflows
    "finite_max_start": lambda scores: _running(scores, start=SENTINEL),
    "new_block_rescaled": lambda scores: _new_term_rescaled(scores),
}


def _new_term_rescaled(scores):
    """(m, total) of a running sum that adds the new term before it rescales: `total = (total + exp(s − m_new)) ·
    exp(m − m_new)`, so a term that raises the maximum is measured twice against it (the first is lost: 0)."""
    m, total = -math.inf, 0.0
    for x in scores:
        x = float(x)
        m_new = max(m, x)
        total = (total + math.exp(x - m_new)) * (math.exp(m - m_new) if m > -math.inf else 0.0)
        m = m_new
    return np.array([m, total])


def _plain(*arrays):
    """Plain float64 arrays (the causal probe hands in tracking arrays; the references must not trip them)."""
    return tuple(np.asarray(a, dtype=np.float64).view(np.ndarray) for a in arrays)


Allowed = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _blockwise(q, k, v, block_size, *, allowed: Allowed | None = None, zeroed: Allowed | None = None,
               scale=None, rescale_total=True, rescale_acc=True, m0=-np.inf, keep_max=True, per_row=True,
               shift="running", divide=True, last_block=True, local_max=False, acc_power=1, rescaled="old"):
    """Blockwise attention with an online softmax, every query at once, key block by key block in order,
    with switches for the catalogued mistakes (``local_max``: m is the block's own maximum, not the
    running one — exact, until a later block's scores are far lower and exp(m_old − m_new) overflows;
    ``acc_power=2``: acc multiplied by the factor twice; ``rescaled="new"``: the factor applied to the block's
    new terms instead of to what was summed before).

    ``allowed(rows, cols)`` says which (query, key) pairs are used (None: all); a query with no
    allowed key in a block leaves its running quantities untouched, as a loop over query tiles that
    skips that block does. ``zeroed(rows, cols)``: pairs whose score is replaced by 0 (masked with 0).
    """
    q, k, v = _plain(q, k, v)
    n_q, n_k = q.shape[0], k.shape[0]
    scale = np.sqrt(q.shape[-1]) if scale is None else scale
    m = np.full(n_q, float(m0))
    total = np.zeros(n_q)
    acc = np.zeros((n_q, v.shape[-1]))
    rows = np.arange(n_q)[:, None]
    stop = n_k if last_block else n_k - n_k % block_size
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        for start in range(0, stop, block_size):
            cols = np.arange(start, min(start + block_size, n_k))[None, :]
            s = q @ k[start : start + block_size].T / scale
            if zeroed is not None:
                s = np.where(zeroed(rows, cols), 0.0, s)
            if allowed is None:  # every key of the block (the usual case: nothing to hide, every query active)
                active = np.full(n_q, s.shape[1] > 0)
            else:
                ok = np.broadcast_to(allowed(rows, cols), s.shape)
                s = np.where(ok, s, -np.inf)
                active = ok.any(axis=1)
            b_max = s.max(axis=1) if per_row else np.full(n_q, s.max())
            m_new = b_max if local_max else np.maximum(m, b_max)
            alpha = np.exp(m - m_new)
            p = np.exp(s - (m_new if shift == "running" else b_max)[:, None])
            if rescaled == "new":
                new_total = total + alpha * p.sum(axis=1)
                new_acc = acc + alpha[:, None] * (p @ v[start : start + block_size])
            else:
                new_total = (alpha if rescale_total else 1.0) * total + p.sum(axis=1)
                factor = alpha[:, None] ** acc_power if rescale_acc else 1.0
                new_acc = factor * acc + p @ v[start : start + block_size]
            total = np.where(active, new_total, total)
            acc = np.where(active[:, None], new_acc, acc)
            if keep_max:
                m = np.where(active, m_new, m)
        return acc / total[:, None] if divide else acc


def _attend(q, k, v, *, allowed: Allowed | None = None, zeroed: Allowed | None = None, scale=None,
            shift="row", divide=True, chunk=None):
    """Attention in closed form, the same numbers as a right blockwise loop ends with: exp(s − shift)
    summed over the allowed keys, a query at most ``chunk`` at a time (by default as many as keep a chunk of
    scores within 2¹⁴ numbers, and 16 at least: the reference stays far below one n × n matrix on the long
    inputs, and the short ones take one chunk). ``shift``: each row's maximum (``"row"``), that or 0 whichever is
    larger (``"zero"``: a maximum started at 0; ``"sentinel"``: at −1e4), or the largest score of all
    (``"global"``). A query with no allowed key gets 0/0 (NaN), as a loop that never updates it does."""
    q, k, v = _plain(q, k, v)
    n_q, n_k = q.shape[0], k.shape[0]
    chunk = chunk or max(16, 2**14 // max(n_k, 1))
    scale = np.sqrt(q.shape[-1]) if scale is None else scale
    cols = np.arange(n_k)[None, :]

    def scores(start):
        rows = np.arange(start, min(start + chunk, n_q))[:, None]
        s = q[start : start + chunk] @ k.T / scale
        if zeroed is not None:
            s = np.where(zeroed(rows, cols), 0.0, s)
        return s if allowed is None else np.where(allowed(rows, cols), s, -np.inf)

    out = np.empty((n_q, v.shape[-1]))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        if shift == "global":
            top = max(scores(start).max() for start in range(0, n_q, chunk))
        for start in range(0, n_q, chunk):
            s = scores(start)
            m = s.max(axis=1, keepdims=True)
            if shift == "zero":
                m = np.maximum(m, 0.0)
            elif shift == "sentinel":  # a running maximum started at a finite stand-in for −∞ (−1e4)
                m = np.maximum(m, -1e4)
            elif shift == "global":
                m = np.full_like(m, top)
            e = np.exp(s - m)
            acc = e @ v
            out[start : start + chunk] = acc / e.sum(axis=1, keepdims=True) if divide else acc
    return out


def _per_block_average(q, k, v, block_size):
    """Each block's own softmax attention, averaged over the blocks."""
    outs = [_attend(q, k[start : start + block_size], v[start : start + block_size])
            for start in range(0, len(k), block_size)]
    return np.mean(outs, axis=0)


def _last_block_start(n, block_size):
    return (n - 1) // block_size * block_size


FLASH_MISTAKES = {
    "missing_scale": lambda q, k, v, block_size: _attend(q, k, v, scale=1.0),
    "scale_multiplied": lambda q, k, v, block_size: _attend(q, k, v, scale=1.0 / np.sqrt(q.shape[-1])),
    "scale_by_d": lambda q, k, v, block_size: _attend(q, k, v, scale=q.shape[-1]),
    "scale_by_d_v": lambda q, k, v, block_size: _attend(q, k, v, scale=np.sqrt(np.shape(v)[-1])),
    MISSING_RESCALE: lambda q, k, v, block_size: _blockwise(q, k, v, block_size, rescale_total=False,
                                                            rescale_acc=False),
    "acc_not_rescaled": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, rescale_acc=False),
    "total_not_rescaled": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, rescale_total=False),
    "dropped_last_block": lambda q, k, v, block_size: _attend(
        q, k, v, allowed=lambda i, j: j < len(k) - len(k) % block_size),
    "max_from_zero": lambda q, k, v, block_size: _attend(q, k, v, shift="zero"),
    "finite_max_start": lambda q, k, v, block_size: _attend(q, k, v, shift="sentinel"),
    # `m = m_new` left out: m stays −∞, every block's factor exp(m − m_new) is 0: the last block only
    "first_score_as_max": lambda q, k, v, block_size: _attend(
        q, k, v, allowed=lambda i, j: j >= _last_block_start(len(k), block_size)),
    "global_max_subtraction": lambda q, k, v, block_size: _attend(q, k, v, shift="global"),
    "missing_final_division": lambda q, k, v, block_size: _attend(q, k, v, divide=False),
    "block_max_in_exp": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, shift="block"),
    "softmax_per_block": lambda q, k, v, block_size: _per_block_average(q, k, v, block_size),
    "max_not_running": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, local_max=True),
    "acc_rescaled_twice": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, acc_power=2),
    "new_block_rescaled": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, rescaled="new"),
}


# --- the causal version ---------------------------------------------------------------------


def _masks(block_size: int, mask: str) -> tuple[Allowed | None, Allowed | None]:
    """(allowed, zeroed) for the ways the diagonal block can be treated when the blocks above the
    diagonal are skipped (``mask``):

    causal      keys j ≤ i (right)                  unmasked  the whole diagonal block
    skip        the diagonal block left out          strict    keys j < i (the diagonal masked too)
    wrong       keys j ≥ i of the diagonal block     zero      keys j > i there scored 0 instead of hidden
    none        every key (no causal mask at all)
    local       in every block not above the diagonal, the keys j ≤ i counted within the block
    tile        in every block not above the diagonal, the keys j ≤ i mod b: the query's position counted
                within its tile, the key's in the whole sequence
    next        keys j ≤ i + 1 of the blocks not above the diagonal: each query also sees the next key (an
                off-by-one, `cols > rows + 1`), except the last of its block
    """
    b = block_size

    def same_block(i, j):
        return i // b == j // b

    allowed = {
        "causal": lambda i, j: j <= i,
        "unmasked": lambda i, j: j // b <= i // b,
        "skip": lambda i, j: j // b < i // b,
        "strict": lambda i, j: j < i,
        "wrong": lambda i, j: (j // b < i // b) | (same_block(i, j) & (j >= i)),
        "zero": lambda i, j: j // b <= i // b,
        "none": None,
        "local": lambda i, j: (j // b <= i // b) & (j % b <= i % b),
        "tile": lambda i, j: (j // b <= i // b) & (j <= i % b),
        "next": lambda i, j: (j // b <= i // b) & (j <= i + 1),
    }[mask]
    zeroed = (lambda i, j: same_block(i, j) & (j > i)) if mask == "zero" else None
    return allowed, zeroed


def _causal(q, k, v, block_size, mask="causal", **switches):
    """Causal attention with the diagonal block treated as ``mask`` says (see :func:`_masks`), in closed form."""
    allowed, zeroed = _masks(block_size, mask)
    return _attend(q, k, v, allowed=allowed, zeroed=zeroed, **switches)


def _diagonal_fill_leaks(answer, inputs) -> bool:
    """A sign of ``mask_fill_too_small``: the future of the diagonal block filled with a finite number (−1e4) that
    the far query of :func:`flash_inputs` (its scores near −10⁶) lies below: that query's row is finite and wrong,
    every other row right."""
    got = np.asarray(answer.get("causal_flash_attention"), dtype=np.float64)
    q, k, v = _plain(inputs["q"], inputs["k"], inputs["v"])
    want = _causal(q, k, v, int(inputs["block_size"]))
    if got.shape != want.shape:
        return False
    far = (q @ k.T / np.sqrt(q.shape[-1])).max(axis=1) < -1e5
    bad = ~np.isclose(got, want, rtol=1e-6, atol=1e-9).all(axis=1)
    return bool(far.any() and bad.any() and not (bad & ~far).any() and np.isfinite(got[bad]).all())


def _last_tile_dropped(q, k, v, block_size):
    """Query tiles and key blocks both stop before the last, shorter one: its rows stay zero."""
    out = _causal(q, k, v, block_size)
    out[len(q) - len(q) % block_size:] = 0.0
    return out


CAUSAL_MISTAKES = {
    "missing_scale": lambda q, k, v, block_size: _causal(q, k, v, block_size, scale=1.0),
    "scale_multiplied": lambda q, k, v, block_size: _causal(q, k, v, block_size, scale=1.0 / np.sqrt(q.shape[-1])),
    "scale_by_d_v": lambda q, k, v, block_size: _causal(q, k, v, block_size, scale=np.sqrt(np.shape(v)[-1])),
    MISSING_RESCALE: lambda q, k, v, block_size: _blockwise(q, k, v, block_size, allowed=lambda i, j: j <= i,
                                                            rescale_total=False, rescale_acc=False),
    "acc_not_rescaled": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, allowed=lambda i, j: j <= i,
                                                               rescale_acc=False),
    "total_not_rescaled": lambda q, k, v, block_size: _blockwise(q, k, v, block_size, allowed=lambda i, j: j <= i,
                                                                 rescale_total=False),
    "max_from_zero": lambda q, k, v, block_size: _causal(q, k, v, block_size, shift="zero"),
    "finite_max_start": lambda q, k, v, block_size: _causal(q, k, v, block_size, shift="sentinel"),
    "dropped_last_block": _last_tile_dropped,
    "missing_causal_mask": lambda q, k, v, block_size: _causal(q, k, v, block_size, "none"),
    "diagonal_block_unmasked": lambda q, k, v, block_size: _causal(q, k, v, block_size, "unmasked"),
    "diagonal_block_skipped": lambda q, k, v, block_size: _causal(q, k, v, block_size, "skip"),
    # j < i: the diagonal hidden too, so query 0 sees nothing (the code notebook 06 uses for it)
    "fully_masked_row": lambda q, k, v, block_size: _causal(q, k, v, block_size, "strict"),
    "mask_wrong_triangle": lambda q, k, v, block_size: _causal(q, k, v, block_size, "wrong"),
    "mask_with_zero": lambda q, k, v, block_size: _causal(q, k, v, block_size, "zero"),
    "triangle_mask_every_block": lambda q, k, v, block_size: _causal(q, k, v, block_size, "local"),
    "tile_positions_local": lambda q, k, v, block_size: _causal(q, k, v, block_size, "tile"),
    "causal_mask_sees_next": lambda q, k, v, block_size: _causal(q, k, v, block_size, "next"),
}


# --- inputs --------------------------------------------------------------------------------


def vectorised_inputs(rng=None):
    """The notebook's example, or fresh (batch, heads, n, d_k) inputs. Always four axes: on three, the
    softmax over axis 1 (the heads axis of four) is the one over the queries, and two catalogued
    mistakes could not be told apart."""
    if rng is None:
        return batched_example()
    b, h = int(rng.integers(2, 4)), int(rng.integers(2, 5))
    n, d, dv = (int(x) for x in (rng.integers(3, 10), rng.integers(2, 9), rng.integers(1, 7)))
    q, k, v = rng.normal(size=(b, h, n, d)), rng.normal(size=(b, h, n, d)), rng.normal(size=(b, h, n, dv))
    # One query of one sequence and head has scores up to 110: float32's exp overflows above about 88.7, so a
    # softmax that does not subtract the row maximum gives inf / inf = NaN in that row. Its keys get a component
    # a_j along a direction u, −1 … 1 except one key's 1.5, and the query is c·u: its largest score, 110, leads the
    # next by 36 or more, so its weights are that one key's (float32's rounding of the scores does not show).
    b0, h0, i0, j0 = int(rng.integers(b)), int(rng.integers(h)), int(rng.integers(n)), int(rng.integers(n))
    u = rng.normal(size=d)
    u /= np.linalg.norm(u)
    along = rng.uniform(-1.0, 1.0, size=n)
    along[j0] = 1.5
    k[b0, h0] = k[b0, h0] - np.outer(k[b0, h0] @ u, u) + np.outer(along, u)
    q[b0, h0, i0] = 110.0 * np.sqrt(d) / 1.5 * u
    return {"q": q, "k": k, "v": v}


def past_float64_limit(first: dict) -> dict:
    """An edge trial from the first random one: its loud query (see :func:`vectorised_inputs`) scaled so that its
    largest score is 800, past exp()'s limit in float64 too (709): a softmax without each row's maximum, written
    out in float64 "so that exp cannot overflow", gives inf / inf there. That row stays one-hot, so float32's
    rounding of its scores does not show."""
    q, k = np.array(first["q"], dtype=np.float64), np.asarray(first["k"], dtype=np.float64)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    b0, h0, i0, _ = np.unravel_index(int(np.argmax(s)), s.shape)
    top = float(s[b0, h0, i0].max())
    if top <= 0:
        return first
    q[b0, h0, i0] *= 800.0 / top
    return {**first, "q": q}


past_float64_limit.of_first_trial = True


def past_float32_spacing(first: dict) -> dict:
    """As :func:`past_float64_limit`, the loud query's largest score at 30 000: float32's numbers near it are 0.002
    apart, so one maximum of the whole batch subtracted before the softmax rounds every other row's scores that
    coarsely (their weights off by about 10⁻³), while each row's own maximum leaves them exact."""
    out = past_float64_limit(first)
    if out is first:
        return first
    q = np.asarray(out["q"], dtype=np.float64) * 1.0
    s = q @ np.swapaxes(np.asarray(first["k"], dtype=np.float64), -1, -2) / np.sqrt(q.shape[-1])
    b0, h0, i0, _ = np.unravel_index(int(np.argmax(s)), s.shape)
    q[b0, h0, i0] *= 3e4 / float(s[b0, h0, i0].max())
    return {**first, "q": q}


past_float32_spacing.of_first_trial = True


def online_inputs(rng=None):
    """The notebook's stream, or a fresh one whose maximum jumps far up: the first score near −1100,
    the others near −300 (so a maximum frozen at the first score is 800 too low, and exp of the jump,
    e^800, overflows: an update that takes exp(s − m) before raising m shows), every one of them moved
    down by 4·10⁹ (FAR_BELOW): all negative, so a running maximum started at 0 never moves, and all below
    any finite "minus infinity" such as −1e9, which never moves either. (Differences of scores near 4·10⁹
    are exact in float64, so the right answer is computed as accurately as on the notebook's stream, and a
    running log-sum-exp near 4·10⁹ is off by a few 10⁻⁷ at most.)"""
    if rng is None:
        return {"scores": STREAM.copy()}
    n = int(rng.integers(12, 48))
    scores = -300.0 + rng.normal(0.0, 3.0, size=n)
    scores[0] = -1100.0 + rng.normal(0.0, 3.0)
    return {"scores": FAR_BELOW + scores}


def plain_stream(inputs: dict) -> dict:
    """An edge trial: the fresh stream moved back near 0 and shrunk (scores of a few units, many decimals): on the
    other trials the maximum is near −4·10⁹, where a maximum rounded to a decimal or two is off by less than the
    relative tolerance; here it is not."""
    return {"scores": (np.asarray(inputs["scores"], dtype=np.float64) - FAR_BELOW) / 97.0}


def tiny_stream(inputs: dict) -> dict:
    """An edge trial: the fresh stream moved near 0 and shrunk to scores of about 10⁻⁷ apart: a maximum rounded to 6
    decimals (`round(max(m, s), 6)`) is off by more than the maximum's own size here, though the total measured
    against it stays right."""
    s = np.asarray(inputs["scores"], dtype=np.float64) - FAR_BELOW
    return {"scores": (s - s.max()) / (s.max() - s.min()) * 4e-7 + 6.3e-7}


def faint_stream(inputs: dict) -> dict:
    """An edge trial: one score of 0 and 600 more from 10 to 20 below it (evenly spread): each adds e⁻¹⁰ to e⁻²⁰ to
    the total, a thousandth of it together. A stream that skips the scores some margin below its running maximum
    ("they cannot matter") leaves that part out."""
    return {"scores": np.concatenate([[0.0], -np.linspace(10.0, 20.0, 600)])}


def faint_tail(inputs: dict) -> dict:
    """An edge trial: one score of 0, then 2 000 from 17 to 18 below it: each adds 4e-8 to 1.5e-8 to a total of about
    1, less than half of float32's spacing there (6e-8), 5e-5 of it together. A running total kept in float32 stays
    at exactly 1 (every addition rounds away); in float64 it keeps them all."""
    return {"scores": np.concatenate([[0.0], -np.linspace(17.0, 18.0, 2000)])}


def lowest_stream(inputs: dict) -> dict:
    """The edge trial: the fresh stream (near FAR_BELOW) scaled to near −10³⁰⁰, below any finite stand-in for −∞ a
    student types as the maximum's start (−1e30, −1e300) but still far above float64's lowest number, −1.8e308.
    Its scores lie 10²⁹⁰ or more apart: m is the largest and total = 1, whereas a start above them all is never
    overtaken and leaves total = 0."""
    return {"scores": np.asarray(inputs["scores"], dtype=np.float64) * (-1e300 / FAR_BELOW)}


def zero_maximum(inputs: dict) -> dict:
    """An edge trial: a short stream whose maximum is exactly 0.0, reached second, with lower scores after it: a
    running maximum tested for "not set yet" by its truth value (`if not m`) takes 0.0 for unset and starts again."""
    return {"scores": np.array([-1.0, 0.0, -2.0, -0.5, -3.0])}


def late_jump(inputs: dict) -> dict:
    """An edge trial: 20 000 scores of 0, then one of 21. Their total is 1 + 20 000·e⁻²¹ = 1.0000152: an update that
    drops what it has summed when the maximum jumps far ("the old terms are below e⁻²⁰") keeps 1 alone, 1.5e-5 off,
    whereas each of those terms is tiny, many of them are not."""
    return {"scores": np.concatenate([np.zeros(20_000), [21.0]])}


def _stuck_start(answer, inputs) -> bool:
    """A finite maximum above every score with a total of 0: a running maximum started at a finite number above
    the scores (every exp(score − m) underflowed)."""
    m, total = np.asarray(answer["online_normaliser"], dtype=np.float64).ravel()
    return bool(np.isfinite(m) and m > np.max(np.asarray(inputs["scores"], dtype=np.float64)) and total == 0.0)


def _float32_total(answer, inputs) -> bool:
    """The right maximum with the total a running sum kept in float32 gives (each term and each rescaling rounded
    to float32), off the right total."""
    m, total = np.asarray(answer["online_normaliser"], dtype=np.float64).ravel()
    scores = np.asarray(inputs["scores"], dtype=np.float64)
    if m != scores.max():
        return False
    run, right = _running(scores, total_type=np.float32)[1], _running(scores)[1]
    return bool(np.isclose(total, run, rtol=1e-6, atol=0.0) and not np.isclose(total, right, rtol=4e-6))


def long_stream(rng):
    """5 000 scores just below exp's overflow limit, to be read once, keeping few of them at a time."""
    return {"scores": NEAR_OVERFLOW + np.log(rng.uniform(0.01, 1.0, size=5_000))}


def flash_inputs(rng=None):
    """The notebook's example, or random sizes with a block that does not divide n, and two extreme
    queries (see below)."""
    if rng is None:
        return flash_example()
    n = int(rng.integers(7, 41))
    d, dv = int(rng.integers(2, 9)), int(rng.integers(1, 7))
    block = int(rng.integers(2, n // 2 + 1))
    while n % block == 0:
        block += 1  # a shorter last block, too (stops at n - 1 at the latest)
    if d == block:  # never the keys' width (the notebook's example has both 4): scores divided by √block_size show
        d = d + 1 if d < 8 else d - 1
    q, k = rng.normal(0, 1.5, size=(n, d)), rng.normal(0, 1.5, size=(n, d))
    # Every key gets the same component 3 … 3.3 along a direction w. One query points the other way
    # along w: its scores are all between −1.1·10⁶ and −10⁶, so a running maximum started at 0 underflows
    # there (exp(−745) is already 0), and so does one started at a finite stand-in for −∞ above them (−1e4,
    # −1e5), or a diagonal block's future filled with one (it takes the weight); −1e9 stays below. Another
    # points along w: its scores, 850 … 935, are the largest of all, so one maximum shared by every query
    # underflows the others.
    # A third query, along a direction u across w, falls: the keys of the first block have the component
    # 3 … 3.3 along u, the others −3.3 … −3: its scores are about +400 in the first block and −400 after it,
    # so a maximum that is not kept running (the block's own) takes exp(m_old − m_new) = exp(800): inf.
    w = np.ones(d) / np.sqrt(d)
    u = np.zeros(d)
    u[0], u[1:] = 1.0, -1.0 / (d - 1)
    u = u - (u @ w) * w
    u = u / np.linalg.norm(u)
    k = k - np.outer(k @ w, w) + np.outer(3.0 + 0.3 * rng.uniform(size=n), w)
    side = np.where(np.arange(n) < block, 1.0, -1.0)
    k = k - np.outer(k @ u, u) + np.outer(side * (3.0 + 0.3 * rng.uniform(size=n)), u)
    low, high, drop = rng.choice(np.arange(1, n), size=3, replace=False)
    q[low] = -(1e6 * np.sqrt(d) / 3.0) * w
    q[high] = (850.0 * np.sqrt(d) / 3.0) * w
    q[drop] = (400.0 * np.sqrt(d) / 3.0) * u
    # and a fourth, after the first block, the other way along u: about −400 in the first block and +400 after it,
    # so a maximum taken from the first block only (never raised) takes exp(800): inf
    rise = next((i for i in range(block, n) if i not in (low, high, drop)), None)
    if rise is not None:
        q[rise] = -(400.0 * np.sqrt(d) / 3.0) * u
    # and a fifth the other way along w, less far: scores between −990 and −900, below exp's reach from 0 and above
    # a finite start of −1e4: a maximum started at 0 (NaN here too) is told from one started at −1e4 (right here)
    mid = next((i for i in range(1, n) if i not in (low, high, drop, rise)), None)
    if mid is not None:
        q[mid] = -(900.0 * np.sqrt(d) / 3.0) * w
    return {"q": q, "k": k, "v": rng.normal(size=(n, dv)), "block_size": block}


def key_probe_inputs(rng):
    """n = 200 in blocks of 12 (the last one shorter; not a power of 2: blocks rounded up to one, 16, show). The
    runtime hands the queries and keys over as arrays that count how many keys each product takes at once
    (:mod:`helpers.runtime.watch`, ``key_blocks``)."""
    n, block = 200, 12
    return {"q": rng.normal(size=(n, 6)), "k": rng.normal(size=(n, 6)), "v": rng.normal(size=(n, 4)),
            "block_size": block}


def one_block(inputs: dict) -> dict:
    """The edge trial of the blockwise steps: a block larger than the sequence (the notebook's own cell tries
    block sizes up to 10), so a special case for "one block" is tried too."""
    return {**inputs, "block_size": int(np.shape(inputs["k"])[0]) + 2}


def key_by_key(inputs: dict) -> dict:
    """An edge trial of the blockwise steps: blocks of one key (the notebook's own cell tries block sizes from 1):
    a loop whose step is not the block size itself (at least 2, say) skips keys there. Five tokens of the trial
    only: one key at a time costs a loop turn per key (per pair of blocks, causal), in every variant the diagnosis
    tries."""
    return {**inputs, **{name: np.asarray(inputs[name])[:5] for name in ("q", "k", "v")}, "block_size": 1}


def faint_keys(inputs: dict) -> dict:
    """An edge trial of the blockwise steps: 300 tokens in one dimension, every query 1, key 0 scoring 20 with each
    and the other keys from 10 to 20 below it, ever fainter, their values 1 000 where key 0's is 0: the faint keys
    carry about a thousandth of each query's weight, an output of about 1, which a version that skips keys, or
    whole blocks, some margin below the running maximum leaves out."""
    n = 300
    q = np.ones((n, 1))
    k = np.concatenate([[20.0], 20.0 - np.linspace(10.0, 20.0, n - 1)])[:, None]
    v = np.concatenate([[0.0], np.full(n - 1, 1000.0)])[:, None]
    return {**inputs, "q": q, "k": k, "v": v, "block_size": int(inputs["block_size"])}


def wide_values(first: dict) -> dict:
    """An edge trial from the first random one: values wider than the queries and keys (d_v = d_k + 3; the draws
    mostly give d_v ≤ d_k), so that values cut to d_k columns show. New values, from a generator seeded by the
    sizes."""
    b, h, n, d = np.shape(first["q"])
    return {**first, "v": np.random.default_rng([b, h, n, d]).normal(size=(b, h, n, d + 3))}


wide_values.of_first_trial = True


def huge_future(inputs: dict) -> dict:
    """An edge trial of causal blockwise attention: the second key, in the first query's own (diagonal) block, scores
    far above every other with the first query, which must not see it. A mask applied after the exponentials (the
    future still counted in the running maximum) makes the first query's visible weight exp(−1000) = 0, and 0/0."""
    q, k = np.array(inputs["q"], dtype=float), np.array(inputs["k"], dtype=float)
    k[1] = 1000.0 * np.sqrt(q.shape[-1]) * q[0] / max(float(q[0] @ q[0]), 1e-12)
    return {**inputs, "q": q, "k": k, "block_size": max(int(inputs["block_size"]), 2)}


def long_vectorised(first: dict) -> dict:
    """An edge trial from the first random one: one sentence and one head of 1 089 tokens (the other trials have a
    few): code that changes how it computes past some length (bfloat16 scores from 1 024 tokens on) shows, and so
    does a loop over chunks of queries that leaves the last one out (1 089 is one more than a multiple of 64, of 32,
    of 16 …: `range(0, n - 1, 64)` stops a chunk short)."""
    q, v = np.asarray(first["q"]), np.asarray(first["v"])
    n, d = 1089, q.shape[-1]
    rng = np.random.default_rng([*q.shape, v.shape[-1], n])
    return {**first, "q": rng.normal(size=(1, 1, n, d)), "k": rng.normal(size=(1, 1, n, d)),
            "v": rng.normal(size=(1, 1, n, v.shape[-1]))}


long_vectorised.of_first_trial = True


def zero_query(inputs: dict) -> dict:
    """An edge trial of causal blockwise attention: the first query all zeros, so it scores exactly 0 with every key,
    the ones it sees and the ones after it in its block. A mask made from the scores' values (a score of 0 taken
    for one the mask zeroed) hides the first or shows the others."""
    q = np.array(inputs["q"], dtype=float)
    q[0] = 0.0
    return {**inputs, "q": q, "block_size": max(int(inputs["block_size"]), 2)}


def long_flash(rng):
    """n = 1536 keys in blocks of 16, narrow queries and values: one n × n matrix of booleans (n² bytes,
    2.25 MiB) is already well above what a few n × block arrays of float64 take, so a mask of the whole
    sequence shows as well as the scores do (96 tiles: a loop over tiles stays quick)."""
    n, d = 1536, 4
    return {"q": rng.normal(size=(n, d)), "k": rng.normal(size=(n, d)), "v": rng.normal(size=(n, 2)),
            "block_size": 16}


def long_causal_flash(rng):
    """:func:`long_flash` for the causal function, in blocks of 8 over 1 024 tokens: what grows with the number of
    blocks for each query (each tile's running maximum after every key block, kept: n × n/block) then takes 1 MiB,
    above the room that blocks of 16 over 1 536 tokens leave for n × block arrays (blocks of 8 take 8 192 steps of a
    tile over a key block, against 4 656 there)."""
    n, d = 1024, 4
    return {"q": rng.normal(size=(n, d)), "k": rng.normal(size=(n, d)), "v": rng.normal(size=(n, 2)),
            "block_size": 8}


def flash_memory_limit(inputs):
    """Room for seven n × block arrays of float64 and four of the n-sized running quantities per column
    of q and v, plus 32 KiB: about 1.6 MiB on the long input, where a right blockwise function takes at
    most about 0.9 MiB and one n × n matrix of booleans 2.25 MiB (of float64, 18 MiB)."""
    n = inputs["q"].shape[0]
    return 8.0 * (7 * n * inputs["block_size"] + 4 * n * (inputs["q"].shape[1] + inputs["v"].shape[1])) + 32 * 1024


def causal_probe_inputs(rng):
    """n = 120 in blocks of 14 (the last one shorter; not a power of 2: tiles or blocks rounded up to one show). The
    runtime hands the queries and keys over as arrays that watch the products (:mod:`helpers.runtime.watch`,
    ``causal_blocks``)."""
    n, block = 120, 14
    return {"q": rng.normal(size=(n, 6)), "k": rng.normal(size=(n, 6)), "v": rng.normal(size=(n, 4)),
            "block_size": block}


# Part 3 is NumPy: another framework's tensors (and their memory, which NumPy's tracing does not see) are not the step
NOT_NUMPY = ("torch", "tensorflow", "keras", "jax")
NUMPY_HINTS = {
    "not_as_asked:not_with": "Your function uses {names}: Part 3 is NumPy. Write the blocks and the running "
    "quantities with NumPy arrays; another library's arrays and functions are not the step.",
}
TWO_PASSES_HINT = (
    "Your function goes through the key blocks twice: first for the maximum, then again for the sums, so every "
    "score is computed twice. The online softmax needs one pass: with each block, update m, total and acc "
    "together, rescaling what was summed so far by exp(m_old − m_new) when m grows."
)
BLOCKS_RAISED = {r"\bKeysNotInBlocks\b": "keys_not_in_blocks", r"\bKeyBlocksTwice\b": "not_one_pass",
                 r"\bWholeScoreMatrix\b": "full_score_matrix"}

WRONG_TRIANGLE_HINT = (
    "In the diagonal block you hid the keys before each query and kept the ones after it. Query i may look "
    "at keys j ≤ i: hide the keys with j > i (the upper triangle of the diagonal block)."
)

# scores divided by the square root of another size than d_k: which one (scale_by_other_size)
VECTORISED_OTHER_SCALE = other_scale(lambda i, scale: attention(i["q"], i["k"], i["v"], scale=scale), lambda i: {
    "the batch size (q.shape[0])": i["q"].shape[0], "the number of heads (q.shape[1])": i["q"].shape[1],
    "n, the number of tokens (q.shape[-2])": i["q"].shape[-2]}, width="the width of one query or key (q.shape[-1])")
_FLASH_SIZES = {"block_size, the number of keys in a block": lambda i: i["block_size"],
                "n, the number of tokens (q.shape[0])": lambda i: np.shape(i["q"])[0]}
FLASH_OTHER_SCALE = other_scale(lambda i, scale: _attend(i["q"], i["k"], i["v"], scale=scale),
                                lambda i: {w: f(i) for w, f in _FLASH_SIZES.items()},
                                width="the width of one query or key (q.shape[1])")
CAUSAL_FLASH_OTHER_SCALE = other_scale(lambda i, scale: _causal(i["q"], i["k"], i["v"], i["block_size"], scale=scale),
                                       lambda i: {w: f(i) for w, f in _FLASH_SIZES.items()},
                                       width="the width of one query or key (q.shape[1])")

register(
    Exercise(
        "07.vectorised",
        notebook=NOTEBOOK,
        title="Batched attention with matmul and softmax",
        answers=("attention_vectorised",),
        kind="function",
        framework="torch",
        inputs=vectorised_inputs,
        # a batch of one: a result squeezed loses its batch axis; and a score of 800: a softmax without the row's
        # maximum in float64 overflows
        # and 1 089 tokens: a softmax in another precision past 1 024 tokens ("the scores are the memory problem")
        edge=(wide_values, batch_of_one("q", "k", "v"), past_float64_limit, long_vectorised, past_float32_spacing),
        reference=lambda q, k, v: attention(q, k, v),
        mistakes=VECTORISED_MISTAKES,
        explains=scale_explains(VECTORISED_OTHER_SCALE),
        # one maximum of the whole batch subtracted before the library's softmax: float32 rounds the rows far below it
        signs={"global_max_rounding": global_rounding_sign(
            lambda q, k, v: attention(q, k, v),
            lambda q, k, v: global_shift_float32(scaled_scores_float32(q, k)) @ v)},
        dtype="float32",
        keeps_grad=True,  # attention inside a model that is trained: no .detach(), no torch.no_grad()
        how={"library_attention": False},  # the cell compares it with the fused function: that one is not the step
        # `.T` reverses all four axes: the product that follows cannot line them up, and raises (not `.T` on an
        # indexed slice, `k[i, j].T`, which is 2-D)
        raises={r"RuntimeError.*\(line \d+: `[^`]*[\w)]\.T\b": "transposed_all_axes"},
        hints={
            "not_as_asked:library_attention": "Your function calls a library's attention "
            "(`scaled_dot_product_attention`). This step asks you to write the batched version yourself, from "
            "matrix products and a softmax: the fused function is what the cell compares yours with.",
            "missing_scale": "Your scores were not divided by √d_k. Divide them by the square root of the last "
            "axis of q (the width of a query) before the softmax.",
            "scale_by_d": "You divided by d_k itself. Divide by its square root, √d_k.",
            "transposed_scores": "You computed k times q transposed. Row i of the scores belongs to query i: "
            "multiply q by k with its last two axes swapped.",
            "softmax_wrong_axis": "Your softmax normalised over the queries (axis -2). Each query's weights over "
            "the keys must sum to 1: the keys are the last axis.",
            "unstable_softmax": "Your softmax does not subtract each row's maximum before torch.exp (it takes exp of "
            "the scores themselves, or of the scores minus a smaller number, such as the row's minimum or mean). In "
            "float32, exp overflows to inf above about 88.7, and inf / inf is NaN: a query whose scores reach 100 "
            "above what you subtract gets a row of NaN. Subtract each row's maximum (keepdim=True) before torch.exp, "
            "or use torch.softmax, which does it for you.",
            "softmax_over_heads": "Your softmax ran over axis 1: right for the (n, n) scores of the earlier "
            "notebooks, but here axis 1 holds the heads. Each query's weights over the keys must sum to 1: "
            "normalise over the last axis (dim=-1), whatever comes in front of it.",
        },
    ),
    Exercise(
        "07.online_softmax",
        notebook=NOTEBOOK,
        title="The softmax's normaliser in one pass over a stream",
        answers=("online_normaliser",),
        kind="function",
        framework="numpy",
        inputs=online_inputs,
        reference=lambda scores: _running(scores),
        mistakes=ONLINE_MISTAKES,
        not_with=NOT_NUMPY,
        # (and a faint tail of 2 000 scores: a total kept in float32 loses it)
        edge=(lowest_stream, zero_maximum, plain_stream, late_jump, tiny_stream, faint_stream, faint_tail),
        # total ≥ 1 is computed in float64: right code agrees to 2e-6 (a running log-sum-exp near 4·10⁹, the worst),
        # a total rounded to 4 decimals like the notebook's table does not (1.2122 is 4e-5 off); and the maximum is
        # one of the scores, exactly: no absolute slack (a maximum rounded to 6 decimals is off by less than 1e-6)
        rtol=4e-6, atol=1e-12,
        # a start at another finite number than the variant's −1e9 (−9999, −1e30): the m it returns is that number
        signs={"finite_max_start": _stuck_start, "wrong_dtype:float32_total": _float32_total},
        probes=(Probe("one_pass", long_stream, lambda inputs: 64, "not_one_pass", stream="scores"),
                # read once but kept whole (a list of 5 000 floats is about 160 KiB): not an online softmax either
                Probe("peak_memory", long_stream, lambda inputs: 32 * 1024, "not_one_pass")),
        # math.exp raises where np.exp gives inf: only a positive exponent above 709 overflows here
        raises={r"\bOverflowError\b": "positive_exponent"},
        raised_hints=((r"'OneShot'", "(The check hands your function its scores as a stream that can be read "
                       "once, from first to last, as the step says: no len(), no indexing, no second pass. Go "
                       "through it with one `for s in scores:` loop.)"),),
        hints={
            "unstable_softmax": "You added up exp(score) itself, without subtracting the running maximum: exp "
            "overflows for large scores and underflows to 0 for very negative ones. Add exp(score − m), and rescale "
            "the total when m grows.",
            "first_score_as_max": "Your m never moves past the first score, so a larger score later is measured "
            "against a maximum that is too small (and can overflow). Update m with every score.",
            "new_block_rescaled": "Your total rescales the new term along with the old sum: the factor "
            "exp(m − m_new) belongs to what was summed before (measured against the old maximum), not to the new "
            "term exp(s − m_new), already measured against the new one (and the first term, rescaled by exp(−∞), "
            "is lost). total = total · exp(m − m_new) + exp(s − m_new).",
            "wrong_dtype:float32_total": "Your running total is kept in float32. After a large score, a long tail "
            "of small ones adds terms of about 1e-8 each to a total near 1, less than half of float32's spacing "
            "there: every addition rounds away, and the total stays 1 where the terms add up to 5e-5. Keep m and the "
            "total as Python floats (float64).",
            "not_as_asked:not_with": "`online_normaliser` uses {names}: Part 3 is NumPy and plain Python. Go "
            "through the stream with one loop, keeping m and total as Python (or NumPy) numbers.",
        },
    ),
    Exercise(
        "07.flash",
        notebook=NOTEBOOK,
        title="Blockwise (flash) attention with an online softmax",
        answers=("flash_attention",),
        kind="function",
        framework="numpy",
        inputs=flash_inputs,
        reference=lambda q, k, v, block_size: _attend(q, k, v),
        mistakes=FLASH_MISTAKES,
        dtype="float64",  # float64 in, float64 out, right to double precision: no float32 on the way, no rounding
        explains=scale_explains(FLASH_OTHER_SCALE),
        probes=(Probe("peak_memory", long_flash, flash_memory_limit, "full_score_matrix"),
                Probe("key_blocks", key_probe_inputs, lambda inputs: 0, "keys_not_in_blocks")),
        edge=(one_block, key_by_key, faint_keys),  # and faint keys: skipping those far below the maximum shows
        raises=BLOCKS_RAISED,
        how={"library_attention": False},
        not_with=NOT_NUMPY,
        hints={
            **NUMPY_HINTS,
            "not_as_asked:library_attention": "Your function calls a library's attention "
            "(`scaled_dot_product_attention`): this step is to write blockwise attention yourself, in NumPy: the "
            "keys one block at a time, each query's m, total and acc updated as in the table.",
            "not_one_pass": TWO_PASSES_HINT,
            "keys_not_in_blocks": "Your function does not go through the keys in blocks of block_size (what it "
            "did instead is in brackets): take exactly block_size keys at a time (the last block may be shorter), "
            "update each query's m, total and acc with that block, and divide once at the end.",
            "acc_rescaled_twice": "Your acc is multiplied by the factor exp(m_old − m_new) twice when a block "
            "raises a query's maximum. Once is what makes the old sum count against the new maximum: "
            "acc · exp(m_old − m_new) + exp(S_b − m_new) V_b, the same factor as for total.",
            "new_block_rescaled": "You multiplied the new block's terms by exp(m_old − m_new). The new terms are "
            "already measured against m_new; it is what was summed before (total and acc, measured against the old "
            "maximum) that must be multiplied by it: total · exp(m_old − m_new) + the block's sum.",
            "max_not_running": "Your m is the maximum of the current block only, not of every score so far. "
            "That is exact until a later block's scores are far below an earlier one's: then exp(m_old − m_new) "
            "overflows to inf (here: scores near +400, then near −400). Keep the running maximum, "
            "np.maximum(m, the block's maximum).",
            "missing_scale": "Your scores were not divided by √d_k. Divide each block of scores by the square "
            "root of the width of a query before taking its maximum and exponentials.",
            "scale_by_d": "You divided the scores by d_k itself. Divide them by its square root, √d_k.",
            MISSING_RESCALE: "When a block raises a query's running maximum m, what was summed so far (in total "
            "and in acc) was measured against the old maximum: multiply both by exp(m_old − m_new) before adding "
            "the block's terms.",
            "first_score_as_max": "Your output is attention over the last block of keys only: what the earlier "
            "blocks summed is lost. Two codes do that: m, total and acc set up again inside the loop over the "
            "blocks (set them up once, before it), or a running maximum m that is never updated, so it stays at "
            "−∞ and each block's factor exp(m − m_new) is 0 (keep the new maximum after each block).",
            "max_from_zero": "Your running maximum starts at 0. For a query whose scores are all far below 0 (below "
            "about −745), every exp(score − 0) underflows to 0, and its output becomes 0/0. Start it at −∞.",
            "global_max_subtraction": "Your running maximum is one number for all queries. A query whose scores "
            "are all far below the largest score in the block then gets exp(…) = 0 for every key, and 0/0. Keep "
            "one running maximum per query (a maximum over each row, axis=1).",
            "dropped_last_block": "Your loop skips the last block when the number of keys is not a multiple of "
            "block_size. Let the last block be shorter: start a block at every multiple of block_size below n, and "
            "slice up to start + block_size (NumPy stops at the end).",
        },
    ),
    Exercise(
        "07.causal_flash",
        notebook=NOTEBOOK,
        title="Causal blockwise attention that skips the blocks above the diagonal",
        answers=("causal_flash_attention",),
        kind="function",
        framework="numpy",
        inputs=flash_inputs,
        reference=lambda q, k, v, block_size: _causal(q, k, v, block_size),
        mistakes=CAUSAL_MISTAKES,
        dtype="float64",  # float64 in, float64 out, right to double precision: no float32 on the way, no rounding
        explains=scale_explains(CAUSAL_FLASH_OTHER_SCALE),
        probes=(
            Probe("peak_memory", long_causal_flash, flash_memory_limit, "full_score_matrix"),
            Probe("causal_blocks", causal_probe_inputs, lambda inputs: 0, "future_blocks_computed"),
            # "for each tile, run the online softmax … over the key blocks": not all the past keys at once; and
            # "one tile of block_size queries at a time": not one query at a time
            Probe("tile_blocks", causal_probe_inputs, lambda inputs: 0, "keys_not_in_blocks"),
        ),
        edge=(one_block, huge_future, key_by_key, zero_query, faint_keys),
        signs={"mask_fill_too_small": _diagonal_fill_leaks},
        raises={r"\bScoresAboveTheDiagonal\b": "future_blocks_computed", **BLOCKS_RAISED,
                r"\bQueriesNotInTiles\b": "queries_not_in_tiles"},
        how={"library_attention": False},
        not_with=NOT_NUMPY,
        hints={
            **NUMPY_HINTS,
            "not_as_asked:library_attention": "Your function calls a library's attention "
            "(`scaled_dot_product_attention`): this step is to write causal blockwise attention yourself, in "
            "NumPy: one tile of queries at a time, the online softmax over the key blocks up to the diagonal.",
            "not_one_pass": TWO_PASSES_HINT,
            "keys_not_in_blocks": "Your function does not go through the keys in blocks of block_size (what it "
            "did instead is in brackets). For each tile of queries, go through the key blocks up to the diagonal one "
            "by one (exactly block_size keys each, the last one may be shorter), updating the tile's m, total and "
            "acc with each block as in 07.flash.",
            "causal_mask_sees_next": "Your mask hides only the keys two or more places after the query (a "
            "comparison such as `cols > rows + 1`): each query also sees the key right after it, where that key is "
            "in a block the tile goes through. Key j is hidden from query i exactly when j > i.",
            "tile_positions_local": "Your mask compares the keys' positions in the whole sequence with the "
            "queries' positions inside their tile (0 … block_size − 1). Count both in the whole sequence: query "
            "row r of the tile starting at q_start is at position q_start + r.",
            "missing_scale": "Your scores were not divided by √d_k. Divide each block of scores by the square "
            "root of the width of a query before masking it and taking its maximum.",
            MISSING_RESCALE: "When a block raises a query's running maximum m, what was summed so far (in total "
            "and in acc) was measured against the old maximum: multiply both by exp(m_old − m_new) before adding "
            "the block's terms.",
            "dropped_last_block": "The rows of your last, shorter block of queries are zero: your loops stop "
            "before it when n is not a multiple of block_size. Let the last block of queries (and of keys) be "
            "shorter: start one at every multiple of block_size below n.",
            "max_from_zero": "Your running maximum starts at 0. For a query whose scores are all far below 0 (below "
            "about −745), every exp(score − 0) underflows to 0, and its output becomes 0/0. Start it at −∞.",
            "fully_masked_row": "You hid key j = i as well, so the first query has no key left and its row is "
            "0/0 = NaN. A query may attend to itself: in the diagonal block, hide only the keys after it, j > i.",
            "missing_causal_mask": "Your output is attention without a mask: every query also uses the keys after "
            "it. Causal attention lets query i use only the keys j ≤ i: skip the blocks above the diagonal and "
            "hide the later keys inside the diagonal block.",
            "mask_wrong_triangle": WRONG_TRIANGLE_HINT,
            "full_score_matrix": "Your function holds memory that grows with the length of the sequence as the "
            "whole n × n matrix does: the scores, a mask of the whole sequence (even as booleans that is n² bytes), "
            "or what every key block gave each query, kept (n × n/block). Work one tile of queries at a time, keep "
            "only its running quantities, and build the mask of a diagonal block for that block only.",
            "mask_with_zero": "In the diagonal block you set the scores of later keys to 0, but a score of 0 still "
            "gets a weight (exp(0 − m) > 0). Give them −∞, so that their weight is exactly 0.",
        },
    ),
)
