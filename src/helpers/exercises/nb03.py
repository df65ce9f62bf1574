"""Notebook 03 — self-attention hands-on, steps 1–6 in PyTorch (seed 002).

The seed's six TO-DO steps, one exercise each (step 4 split into the scores of query 1,
all the scores and the softmax), the rounded-weights computation of its diagrams, and a
function that does steps 3–6 at once, checked on random inputs.

``weighted_values[i, j, k] = attn_weights[i, j] * values[j, k]``: axis 0 is the query
(whose output), axis 1 the input whose value is weighted, axis 2 the feature. Step 6
sums over axis 1.
"""

from __future__ import annotations

import numpy as np

from ..reference import global_softmax, softmax, sum_normalise
from ..spec import Exercise, register
from .nb01 import (  # noqa: F401  (X and the weights are this notebook's data too)
    ROUNDED_WEIGHTS,
    W_KEY,
    W_QUERY,
    W_VALUE,
    X,
    _inputs,
    _qkv,
    _scores,
    ref_qkv,
    ref_weights,
    ref_x,
    swapped_qkv,
)

NOTEBOOK = "03_hands_on_steps"
SEED = "002_b79901dd11caa054.txt"  # every number it prints must appear in the stored outputs

# The seed uses the same inputs and weights as notebook 01's seed: share them, and the
# step references that are the same.
# Its diagrams round the softmax: query 1's row becomes 0.0 / 0.5 / 0.5 (steps 5–6).
ROUNDED_1 = ROUNDED_WEIGHTS[0]


def _values(**inp):
    return _qkv(**inp)[2]


def _weighted(weights, values):
    """(n_queries, n_inputs) weights and (n_inputs, d_v) values -> (n_queries, n_inputs, d_v)."""
    return values[None, :, :] * weights[:, :, None]


# --- references, one per step -------------------------------------------------------


def ref_scores_1(**inp):
    k, q, _ = _qkv(**inp)
    return {"attn_scores_1": q[0] @ k.T}


def ref_scores(**inp):
    return {"attn_scores": _scores(**inp)}


def _softmaxed(normalise, **inp):
    return {"attn_weights": normalise(_scores(**inp))}


def ref_softmax(**inp):
    return _softmaxed(softmax, **inp)


def ref_weighted_values(**inp):
    return {"weighted_values": _weighted(softmax(_scores(**inp)), _values(**inp))}


def ref_outputs(**inp):
    return {"outputs": _weighted(softmax(_scores(**inp)), _values(**inp)).sum(axis=1)}


def ref_rounded_1(**inp):
    wv = ROUNDED_1[:, None] * _values(**inp)
    return {"weighted_values_1_rounded": wv, "output_1_rounded": wv.sum(axis=0)}


SCORES_MISTAKES = {
    "elementwise_product": lambda **i: {"attn_scores": _qkv(**i)[1] * _qkv(**i)[0]},
    "unexpected_scale": lambda **i: {"attn_scores": _scores(**i) / np.sqrt(3)},
}
SOFTMAX_MISTAKES = {
    "softmax_wrong_axis": lambda **i: _softmaxed(lambda s: softmax(s, axis=0), **i),
    "global_softmax": lambda **i: _softmaxed(global_softmax, **i),
    "no_softmax": lambda **i: _softmaxed(lambda s: s, **i),
    "sum_normalisation": lambda **i: _softmaxed(sum_normalise, **i),
    "rounded_weights": lambda **i: {"attn_weights": ROUNDED_WEIGHTS},
    "unexpected_scale": lambda **i: _softmaxed(lambda s: softmax(s / np.sqrt(3)), **i),
}
WEIGHTED_MISTAKES = {
    "no_softmax": lambda **i: {"weighted_values": _weighted(_scores(**i), _values(**i))},
    "softmax_wrong_axis": lambda **i: {"weighted_values": _weighted(softmax(_scores(**i), axis=0), _values(**i))},
    "rounded_weights": lambda **i: {"weighted_values": _weighted(ROUNDED_WEIGHTS, _values(**i))},
    # values * attn_weights.unsqueeze(1): weight (i, k) scales feature k of every value
    "broadcast_wrong_axis": lambda **i: {
        "weighted_values": _values(**i)[None, :, :] * softmax(_scores(**i))[:, None, :]
    },
}
OUTPUT_MISTAKES = {
    # The sum a student writes when carrying over the one-query picture, where the three
    # weighted values are stacked along axis 0.
    "sum_wrong_axis": lambda **i: {"outputs": _weighted(softmax(_scores(**i)), _values(**i)).sum(axis=0)},
    "no_softmax": lambda **i: {"outputs": _scores(**i) @ _values(**i)},
    "rounded_weights": lambda **i: {"outputs": ROUNDED_WEIGHTS @ _values(**i)},
}
ROUNDED_1_MISTAKES = {
    # rounded_1 * values: weight j scales feature j of every value
    "broadcast_wrong_axis": lambda **i: {
        "weighted_values_1_rounded": ROUNDED_1[None, :] * _values(**i),
        "output_1_rounded": (ROUNDED_1[None, :] * _values(**i)).sum(axis=0),
    },
    "sum_wrong_axis": lambda **i: {
        "weighted_values_1_rounded": ROUNDED_1[:, None] * _values(**i),
        "output_1_rounded": (ROUNDED_1[:, None] * _values(**i)).sum(axis=1),
    },
}

# --- the function exercise: steps 3–6 in one go ---------------------------------------


def fn_inputs(rng: np.random.Generator | None = None) -> dict:
    """The notebook's example, or random sizes and entries (kept small so the softmax stays soft)."""
    if rng is None:
        return _inputs()
    n, d_in, d_k, d_v = (int(v) for v in rng.integers(2, 6, size=4))
    return {
        "x": rng.normal(size=(n, d_in)),
        "w_key": rng.normal(scale=0.5, size=(d_in, d_k)),
        "w_query": rng.normal(scale=0.5, size=(d_in, d_k)),
        "w_value": rng.normal(scale=0.5, size=(d_in, d_v)),
    }


def _fn(x, w_key, w_query, w_value, *, scores=None, normalise=softmax, sum_axis=1):
    k, q, v = _qkv(x, w_key, w_query, w_value)
    s = q @ k.T if scores is None else scores(q, k)
    return _weighted(normalise(s), v).sum(axis=sum_axis)


def ref_fn(**inp):
    return _fn(**inp)


FN_MISTAKES = {
    "transposed_scores": lambda **i: _fn(**i, scores=lambda q, k: k @ q.T),
    "unexpected_scale": lambda **i: _fn(**i, scores=lambda q, k: q @ k.T / np.sqrt(k.shape[-1])),
    "softmax_wrong_axis": lambda **i: _fn(**i, normalise=lambda s: softmax(s, axis=0)),
    "global_softmax": lambda **i: _fn(**i, normalise=global_softmax),
    "no_softmax": lambda **i: _fn(**i, normalise=lambda s: s),
    "sum_wrong_axis": lambda **i: _fn(**i, sum_axis=0),
}

_NO_SCALE = (
    "You divided the scores by √d_k. This notebook follows the original and uses the raw "
    "scores queries @ keys.T; the scaling comes in notebook 02. Leave it out here."
)
_SUM_AXIS_OUT = (
    "You summed over axis 0, the queries, so every query's output got mixed with the others'. "
    "weighted_values[i, j, k] is query i's weight for input j times feature k of value j: sum over "
    "the inputs, dim=1, so each query keeps its own output."
)

register(
    Exercise(
        "03.x", notebook=NOTEBOOK, title="Step 1 · the inputs", answers=("x",), inputs=_inputs,
        reference=ref_x, framework="torch", float_required=True,
    ),
    Exercise(
        "03.weights", notebook=NOTEBOOK, title="Step 2 · the weight matrices",
        answers=("w_key", "w_query", "w_value"), inputs=_inputs, reference=ref_weights,
        framework="torch", float_required=True,
    ),
    Exercise(
        "03.qkv", notebook=NOTEBOOK, title="Step 3 · keys, queries and values",
        answers=("keys", "queries", "values"), inputs=_inputs, reference=ref_qkv, framework="torch",
        mistakes={"swapped_projections": swapped_qkv}, depends_on=("03.x", "03.weights"),
    ),
    Exercise(
        "03.scores_1", notebook=NOTEBOOK, title="Step 4 · the scores of query 1",
        answers=("attn_scores_1",), inputs=_inputs, reference=ref_scores_1, framework="torch",
        depends_on=("03.qkv",),
    ),
    Exercise(
        "03.scores", notebook=NOTEBOOK, title="Step 4 · all the attention scores",
        answers=("attn_scores",), inputs=_inputs, reference=ref_scores, framework="torch",
        mistakes=SCORES_MISTAKES, depends_on=("03.qkv",), hints={"unexpected_scale": _NO_SCALE},
    ),
    Exercise(
        "03.softmax", notebook=NOTEBOOK, title="Step 4 · the softmax over each row",
        answers=("attn_weights",), inputs=_inputs, reference=ref_softmax, framework="torch",
        mistakes=SOFTMAX_MISTAKES, depends_on=("03.scores",),
        hints={
            "softmax_wrong_axis": "Your softmax normalised each column (dim=0). Each query's row must "
            "sum to 1: pass dim=-1 (the keys' axis).",
            "unexpected_scale": "You scaled the scores by √3 before the softmax. This notebook uses the "
            "unscaled scores: apply the softmax to attn_scores directly.",
        },
    ),
    Exercise(
        "03.weighted_values", notebook=NOTEBOOK, title="Step 5 · the weighted values",
        answers=("weighted_values",), inputs=_inputs, reference=ref_weighted_values, framework="torch",
        mistakes=WEIGHTED_MISTAKES, depends_on=("03.softmax", "03.qkv"),
        hints={
            "no_softmax": "You weighted the values with the raw scores. Use the softmax weights "
            "attn_weights: values * attn_weights.unsqueeze(-1).",
            "softmax_wrong_axis": "Your weights are column-normalised (softmax over dim=0). Fix the "
            "softmax in step 4 (dim=-1), then run this cell again.",
            "rounded_weights": "You weighted the values with the diagrams' rounded weights. Use the "
            "exact softmax weights attn_weights.",
        },
    ),
    Exercise(
        "03.outputs", notebook=NOTEBOOK, title="Step 6 · the outputs",
        answers=("outputs",), inputs=_inputs, reference=ref_outputs, framework="torch",
        mistakes=OUTPUT_MISTAKES, depends_on=("03.weighted_values",),
        hints={
            "sum_wrong_axis": _SUM_AXIS_OUT,
            "no_softmax": "Your outputs mix the values with the raw scores. Sum the weighted values "
            "made from the softmax weights.",
            "rounded_weights": "These are the diagrams' outputs from rounded weights, like [2.0, 7.0, 1.5]. "
            "Sum the weighted values made from the exact softmax weights.",
        },
    ),
    Exercise(
        "03.rounded_1", notebook=NOTEBOOK, title="The diagram's output 1 from rounded weights",
        answers=("weighted_values_1_rounded", "output_1_rounded"), inputs=_inputs,
        reference=ref_rounded_1, framework="torch", mistakes=ROUNDED_1_MISTAKES, depends_on=("03.qkv",),
        hints={
            "sum_wrong_axis": "You summed each weighted value's own features (dim=1). The three weighted "
            "values are the rows: add them up with dim=0.",
        },
    ),
    Exercise(
        "03.attention_outputs", notebook=NOTEBOOK, title="Steps 3–6 as one function",
        answers=("attention_outputs",), kind="function", framework="torch", inputs=fn_inputs,
        reference=ref_fn, mistakes=FN_MISTAKES, atol=1e-5, points=2,
        hints={
            "transposed_scores": "Your scores come out transposed (keys against queries). Either you wrote "
            "keys @ queries.T, or keys and queries were built from each other's weights — mind the "
            "argument order: x, w_key, w_query, w_value. Row i of the scores belongs to query i.",
            "unexpected_scale": _NO_SCALE,
            "softmax_wrong_axis": "Your softmax normalised each column. Each query's row of scores must "
            "sum to 1: softmax with dim=-1.",
            "sum_wrong_axis": "You summed the weighted values over axis 0, the queries. Sum over axis 1, "
            "the inputs, so each query keeps its own output.",
        },
    ),
)
