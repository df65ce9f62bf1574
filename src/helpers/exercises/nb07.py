"""Notebook 07 — attention at scale (beyond the seeds): batched attention, the online softmax,
and blockwise ("flash") attention that never holds the n × n score matrix.

The notebook's examples are made here and in the notebook by the same seeded NumPy
generators, so the check's "notebook example" is exactly what the student sees.
"""

from __future__ import annotations

import numpy as np

from ..reference import softmax, unstable_softmax
from ..spec import Exercise, register

NOTEBOOK = "07_attention_at_scale"

# A catalogue code this notebook would use, proposed to the lead; the mistake is declared
# automatically once src/helpers/mistakes.py has it (its variants are below).
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


def online_softmax_no_rescale(scores):
    """The running sum kept without the factor exp(m_old − m_new) when the maximum grows."""
    m, total = -np.inf, 0.0
    for s in np.asarray(scores, dtype=np.float64):
        m = max(m, s)
        total += np.exp(s - m)
    return np.exp(scores - m) / total


def flash_no_rescale(q, k, v, block_size):
    """Blockwise attention whose running sums are never rescaled when a row's maximum grows."""
    m = np.full(q.shape[0], -np.inf)
    denom = np.zeros(q.shape[0])
    acc = np.zeros((q.shape[0], v.shape[-1]))
    for start in range(0, k.shape[0], block_size):
        s = q @ k[start : start + block_size].T / np.sqrt(q.shape[-1])
        m = np.maximum(m, s.max(axis=1))
        p = np.exp(s - m[:, None])
        denom = denom + p.sum(axis=1)
        acc = acc + p @ v[start : start + block_size]
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


def online_softmax_inputs(rng=None):
    """The notebook's stream, or a fresh stream of 24–96 scores just below the overflow limit.

    Near 709, every exp(score) is still finite but their sum is not (the values are
    709 + log(u) with u uniform, so their exps add up to e^709 · Σu and Σu > 2.19 overflows):
    the formula without max-subtraction returns all zeros there. The first score is 800
    lower than the rest, so the running maximum jumps by about 800 at the second score:
    shifting by the first score (instead of the running maximum) overflows too.
    """
    if rng is None:
        return {"scores": STREAM.copy()}
    n = int(rng.integers(24, 97))
    scores = NEAR_OVERFLOW + np.log(rng.uniform(0.01, 1.0, size=n))
    scores[0] -= 800.0
    return {"scores": scores}


def flash_inputs(rng=None):
    """The notebook's example, or random sizes with a block that does not divide n."""
    if rng is None:
        return flash_example()
    n = int(rng.integers(7, 41))
    d, dv = int(rng.integers(2, 9)), int(rng.integers(1, 7))
    block = int(rng.integers(2, n // 2 + 1))
    while n % block == 0:
        block += 1  # a shorter last block, too (stops at n - 1 at the latest)
    return {
        "q": rng.normal(0, 1.5, size=(n, d)),
        "k": rng.normal(0, 1.5, size=(n, d)),
        "v": rng.normal(size=(n, dv)),
        "block_size": block,
    }


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
        title="Online softmax of one stream of scores",
        answers=("online_softmax",),
        kind="function",
        framework="numpy",
        inputs=online_softmax_inputs,
        reference=lambda scores: softmax(scores),
        mistakes={
            "unstable_softmax": lambda scores: unstable_softmax(scores),
            MISSING_RESCALE: online_softmax_no_rescale,
        },
        hints={
            "unstable_softmax": "exp() overflowed: the check feeds you scores near 709, where each exp(score) "
            "is still finite in float64 but their sum is not. Keep a running maximum m and add exp(score − m).",
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
        reference=lambda q, k, v, block_size: attention(q, k, v),
        mistakes={
            "missing_scale": lambda q, k, v, block_size: attention(q, k, v, scale=1.0),
            "scale_by_d": lambda q, k, v, block_size: attention(q, k, v, scale=q.shape[-1]),
            MISSING_RESCALE: flash_no_rescale,
        },
        hints={
            "missing_scale": "Your scores were not divided by √d. Divide each block of scores, "
            "q @ k_block.T, by np.sqrt(q.shape[-1]) before taking its maximum and exponentials.",
        },
    ),
)
