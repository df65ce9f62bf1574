"""Notebook 07 — attention at scale (beyond the seeds): batched attention, the online softmax's
normaliser in one pass over a stream, and blockwise ("flash") attention that never holds the
n × n score matrix.

The last two are about *how* the answer is computed, so besides the values their checks measure
the process: the stream of scores can be read once only and the memory may not grow with it; the
blockwise function's extra memory must stay far below one n × n matrix.

The notebook's examples are made here and in the notebook by the same seeded NumPy
generators, so the check's "notebook example" is exactly what the student sees.
"""

from __future__ import annotations

import numpy as np

from ..reference import softmax
from ..spec import Exercise, Probe, register

NOTEBOOK = "07_attention_at_scale"

MISSING_RESCALE = "missing_rescale"

# The notebook's stream of scores for the warm-up: the maximum changes three times.
STREAM = np.array([1.0, 3.0, 0.5, 4.0, 4.0, -2.0, 6.5, 2.0])
# Float64's largest x with a finite exp(x) is about 709.78: scores just below it keep every
# exp(x) finite but make the plain sum overflow.
NEAR_OVERFLOW = 709.0


def batched_example() -> dict:
    """2 sequences × 3 heads × 5 positions, d = 4 (the notebook's `qb, kb, vb`)."""
    rng = np.random.default_rng(2024)
    return {name: rng.normal(size=(2, 3, 5, 4)) for name in ("q", "k", "v")}


def flash_example() -> dict:
    """10 positions, d = 4, values of width 3, blocks of 4 keys (the notebook's `q_np, k_np, v_np`)."""
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(10, 4)), rng.normal(size=(10, 4)), rng.normal(size=(10, 3))
    return {"q": q, "k": k, "v": v, "block_size": 4}


# --- references and wrong variants ---------------------------------------------------------


def _t(a):
    return np.swapaxes(a, -1, -2)


def attention(q, k, v, scale=None, axis=-1):
    """softmax(q kᵀ / scale) v over the last two axes; scale defaults to √d."""
    d = q.shape[-1]
    s = q @ _t(k) / (np.sqrt(d) if scale is None else scale)
    return softmax(s, axis=axis) @ v


VECTORISED_MISTAKES = {
    "missing_scale": lambda q, k, v: attention(q, k, v, scale=1.0),
    "scale_by_d": lambda q, k, v: attention(q, k, v, scale=q.shape[-1]),
    "transposed_scores": lambda q, k, v: softmax(k @ _t(q) / np.sqrt(q.shape[-1])) @ v,
    "softmax_wrong_axis": lambda q, k, v: attention(q, k, v, axis=-2),
}


def _running(scores, start=-np.inf, rescale=True, update_max=True, shift=True):
    """(m, total): the largest score and the sum of exp(score − m), so that softmax(s) = exp(s − m) / total,
    in one pass (the reference reads its stream once, too), with switches for the catalogued mistakes."""
    m, total = start, 0.0
    first = True
    for s in scores:
        s = float(s)
        if not shift:  # the maximum tracked, but exp(score) added as it is
            m = max(m, s)
            with np.errstate(over="ignore"):
                total += np.exp(s)
            continue
        m_new = max(m, s) if (update_max or first) else m
        if first and not update_max:
            m_new = s
        with np.errstate(over="ignore", invalid="ignore"):
            total = (total * np.exp(m - m_new) if rescale else total) + np.exp(s - m_new)
        m, first = m_new, False
    return np.array([m, total])


ONLINE_MISTAKES = {
    MISSING_RESCALE: lambda scores: _running(scores, rescale=False),
    "max_from_zero": lambda scores: _running(scores, start=0.0),
    "first_score_as_max": lambda scores: _running(scores, update_max=False),
    "unstable_softmax": lambda scores: _running(scores, shift=False),
}


def _flash(q, k, v, block_size, rescale=True, last_block=True, m0=-np.inf):
    """Blockwise attention with switches for the catalogued mistakes."""
    n = k.shape[0]
    m = np.full(q.shape[0], m0)
    denom = np.zeros(q.shape[0])
    acc = np.zeros((q.shape[0], v.shape[-1]))
    stop = n if last_block else n - n % block_size
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for start in range(0, stop, block_size):
            s = q @ k[start : start + block_size].T / np.sqrt(q.shape[-1])
            m_new = np.maximum(m, s.max(axis=1))
            alpha = np.exp(m - m_new) if rescale else np.ones_like(m)
            p = np.exp(s - m_new[:, None])
            denom = alpha * denom + p.sum(axis=1)
            acc = alpha[:, None] * acc + p @ v[start : start + block_size]
            m = m_new
        return acc / denom[:, None]


# --- inputs --------------------------------------------------------------------------------


def vectorised_inputs(rng=None):
    if rng is None:
        return batched_example()
    lead = [(), (int(rng.integers(2, 4)),), (int(rng.integers(2, 4)), int(rng.integers(2, 5)))][rng.integers(3)]
    n, d, dv = (int(x) for x in (rng.integers(3, 10), rng.integers(2, 9), rng.integers(1, 7)))
    return {
        "q": rng.normal(size=(*lead, n, d)),
        "k": rng.normal(size=(*lead, n, d)),
        "v": rng.normal(size=(*lead, n, dv)),
    }


def online_inputs(rng=None):
    """The notebook's stream, or a fresh one whose maximum jumps: the first score near −800, the
    others near −300 (all negative, so a running maximum started at 0 never moves, and a maximum
    frozen at the first score is 500 too low)."""
    if rng is None:
        return {"scores": STREAM.copy()}
    n = int(rng.integers(12, 48))
    scores = -300.0 + rng.normal(0.0, 3.0, size=n)
    scores[0] = -800.0 + rng.normal(0.0, 3.0)
    return {"scores": scores}


def long_stream(rng):
    """5 000 scores just below exp's overflow limit, to be read once, keeping few of them at a time."""
    return {"scores": NEAR_OVERFLOW + np.log(rng.uniform(0.01, 1.0, size=5_000))}


def flash_inputs(rng=None):
    """The notebook's example, or random sizes with a block that does not divide n."""
    if rng is None:
        return flash_example()
    n = int(rng.integers(7, 41))
    d, dv = int(rng.integers(2, 9)), int(rng.integers(1, 7))
    block = int(rng.integers(2, n // 2 + 1))
    while n % block == 0:
        block += 1  # a shorter last block, too (stops at n - 1 at the latest)
    q, k = rng.normal(0, 1.5, size=(n, d)), rng.normal(0, 1.5, size=(n, d))
    # One query whose scores are all between −935 and −850: a running maximum started at 0
    # underflows there (exp(−745) is already 0). Every key gets the same component 3 … 3.3 along
    # a direction w, and that query points the other way along w.
    w = np.ones(d) / np.sqrt(d)
    k = k - np.outer(k @ w, w) + np.outer(3.0 + 0.3 * rng.uniform(size=n), w)
    q[int(rng.integers(n))] = -(850.0 * np.sqrt(d) / 3.0) * w
    return {"q": q, "k": k, "v": rng.normal(size=(n, dv)), "block_size": block}


def long_flash(rng):
    """n = 512 keys in blocks of 16: one n × n matrix of float64 is 2 MiB."""
    n, d = 512, 8
    return {"q": rng.normal(size=(n, d)), "k": rng.normal(size=(n, d)), "v": rng.normal(size=(n, 4)),
            "block_size": 16}


def flash_memory_limit(inputs):
    """Generous room for a few n × block arrays and the n-sized running quantities: about two thirds
    of one n × n matrix at this size."""
    n = inputs["q"].shape[0]
    return 8.0 * (8 * n * inputs["block_size"] + 16 * n * (inputs["q"].shape[1] + inputs["v"].shape[1]))


register(
    Exercise(
        "07.vectorised",
        notebook=NOTEBOOK,
        title="Batched attention with matmul and softmax",
        answers=("attention_vectorised",),
        kind="function",
        framework="torch",
        inputs=vectorised_inputs,
        reference=lambda q, k, v: attention(q, k, v),
        mistakes=VECTORISED_MISTAKES,
        hints={
            "transposed_scores": "You computed k @ qᵀ. Row i of the scores belongs to query i: use "
            "q @ k.transpose(-2, -1).",
            "softmax_wrong_axis": "Your softmax normalised over the queries. Each query's weights over the "
            "keys must sum to 1: use dim=-1.",
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
        probes=(Probe("one_pass", long_stream, lambda inputs: 64, "not_one_pass", stream="scores"),),
        hints={
            "unstable_softmax": "You added up exp(score) itself, without subtracting the running maximum: exp "
            "overflows for large scores and underflows to 0 for very negative ones. Add exp(score − m), and rescale "
            "the total when m grows.",
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
        reference=lambda q, k, v, block_size: _flash(q, k, v, block_size),  # blockwise itself
        mistakes={
            "missing_scale": lambda q, k, v, block_size: attention(q, k, v, scale=1.0),
            "scale_by_d": lambda q, k, v, block_size: attention(q, k, v, scale=q.shape[-1]),
            MISSING_RESCALE: lambda q, k, v, block_size: _flash(q, k, v, block_size, rescale=False),
            "dropped_last_block": lambda q, k, v, block_size: _flash(q, k, v, block_size, last_block=False),
            "max_from_zero": lambda q, k, v, block_size: _flash(q, k, v, block_size, m0=0.0),
        },
        probes=(Probe("peak_memory", long_flash, flash_memory_limit, "full_score_matrix"),),
        hints={
            "missing_scale": "Your scores were not divided by √d. Divide each block of scores, "
            "q @ k_block.T, by np.sqrt(q.shape[-1]) before taking its maximum and exponentials.",
        },
    ),
)
