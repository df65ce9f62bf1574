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
from ..spec import Exercise, register, upstream_of
from . import nb01
from .nb01 import (
    ROUNDED_WEIGHTS,
    SCORES_MISTAKES,
    SOFTMAX_MISTAKES,
    ref_qkv,
    ref_scores,
    ref_softmax,
    ref_weights,
    ref_x,
    swapped_qkv,
    swapped_weights,
)

NOTEBOOK = "03_hands_on_steps"
SEED = "002_b79901dd11caa054.txt"  # every number it prints must appear in the stored outputs

# The seed uses the same inputs and weights as notebook 01's seed: the same world of names,
# with this notebook's own steps in between. Its diagrams round query 1's softmax row to
# 0.0 / 0.5 / 0.5 (steps 5–6).
ROUNDED_1 = ROUNDED_WEIGHTS[0]


def _weighted(weights, values):
    """(n_queries, n_inputs) weights and (n_inputs, d_v) values -> (n_queries, n_inputs, d_v)."""
    return np.asarray(values)[None, :, :] * np.asarray(weights)[:, :, None]


def world(rng: np.random.Generator | None = None) -> dict:
    base = nb01.world(rng)
    rounded_1 = ROUNDED_1 if rng is None else nb01._rounded_rows(rng, 3)[0]
    weights, values = base["attn_weights"], base["values"]
    wv = _weighted(weights, values)
    wv1 = rounded_1[:, None] * values
    names = ["x_list", "w_key_list", "w_query_list", "w_value_list", "x", "w_key", "w_query", "w_value",
             "keys", "queries", "values"]
    return {
        **{n: base[n] for n in names},
        "attn_scores_1": base["queries"][0] @ base["keys"].T,
        "attn_scores": base["attn_scores"],
        "attn_weights": weights,
        "weighted_values": wv,
        "outputs": wv.sum(axis=1),
        "rounded_1": rounded_1,
        "weighted_values_1_rounded": wv1,
        "output_1_rounded": wv1.sum(axis=0),
    }


def ref_scores_1(queries, keys, **_):
    return {"attn_scores_1": queries[0] @ keys.T}


SCORES_1_MISTAKES = {
    "transposed_scores": lambda queries, keys, **_: {"attn_scores_1": keys[0] @ queries.T},
    "wrong_query_row": lambda queries, keys, **_: {"attn_scores_1": queries[1] @ keys.T},
}


def ref_weighted_values(attn_weights, values, **_):
    return {"weighted_values": _weighted(attn_weights, values)}


WEIGHTED_MISTAKES = {
    "no_softmax": lambda attn_scores, values, **_: {"weighted_values": _weighted(attn_scores, values)},
    "rounded_weights": lambda values, **_: {"weighted_values": _weighted(ROUNDED_WEIGHTS, values)},
    # values * attn_weights.unsqueeze(1): weight (i, k) scales feature k of every value
    "broadcast_wrong_axis": lambda attn_weights, values, **_: {
        "weighted_values": np.asarray(values)[None, :, :] * np.asarray(attn_weights)[:, None, :]
    },
    "transposed_scores": lambda attn_weights, values, **_: {"weighted_values": _weighted(attn_weights.T, values)},
}


def ref_outputs(weighted_values, **_):
    return {"outputs": np.asarray(weighted_values).sum(axis=1)}


OUTPUT_MISTAKES = {
    # The sum a student writes when carrying over the one-query picture, where the three
    # weighted values are stacked along axis 0.
    "sum_wrong_axis": lambda weighted_values, **_: {"outputs": np.asarray(weighted_values).sum(axis=0)},
    "no_softmax": lambda attn_scores, values, **_: {"outputs": attn_scores @ values},
    "rounded_weights": lambda values, **_: {"outputs": ROUNDED_WEIGHTS @ values},
}


def ref_rounded_1(rounded_1, values, **_):
    wv = np.asarray(rounded_1)[:, None] * values
    return {"weighted_values_1_rounded": wv, "output_1_rounded": wv.sum(axis=0)}


ROUNDED_1_MISTAKES = {
    # rounded_1 * values: weight j scales feature j of every value
    "broadcast_wrong_axis": lambda rounded_1, values, **_: {
        "weighted_values_1_rounded": np.asarray(rounded_1)[None, :] * values,
        "output_1_rounded": (np.asarray(rounded_1)[None, :] * values).sum(axis=0),
    },
    "sum_wrong_axis": lambda rounded_1, values, **_: {
        "weighted_values_1_rounded": np.asarray(rounded_1)[:, None] * values,
        "output_1_rounded": (np.asarray(rounded_1)[:, None] * values).sum(axis=1),
    },
}

# --- the function exercise: steps 3–6 in one go ---------------------------------------


def fn_inputs(rng: np.random.Generator | None = None) -> dict:
    """The notebook's example, or random sizes and entries (kept small so the softmax stays soft)."""
    if rng is None:
        return {"x": nb01.X, "w_key": nb01.W_KEY, "w_query": nb01.W_QUERY, "w_value": nb01.W_VALUE}
    n, d_in, d_k, d_v = (int(v) for v in rng.integers(2, 6, size=4))
    return {
        "x": rng.normal(size=(n, d_in)),
        "w_key": rng.normal(scale=0.5, size=(d_in, d_k)),
        "w_query": rng.normal(scale=0.5, size=(d_in, d_k)),
        "w_value": rng.normal(scale=0.5, size=(d_in, d_v)),
    }


def _fn(x, w_key, w_query, w_value, *, scores=None, normalise=softmax, sum_axis=1):
    k, q, v = x @ w_key, x @ w_query, x @ w_value
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
    "sum_normalisation": lambda **i: _fn(**i, normalise=sum_normalise),
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


def _value(ex_id, title, answers, reference, **kw):
    return Exercise(ex_id, notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                    inputs=upstream_of(world, answers[0]), framework="torch", **kw)


register(
    _value("03.x", "Step 1 · the inputs", ("x",), ref_x, reads=("x_list",), dtype="float32"),
    _value("03.weights", "Step 2 · the weight matrices", ("w_key", "w_query", "w_value"), ref_weights,
           reads=("w_key_list", "w_query_list", "w_value_list"), dtype="float32",
           mistakes={"swapped_projections": swapped_weights}),
    _value("03.qkv", "Step 3 · keys, queries and values", ("keys", "queries", "values"), ref_qkv,
           reads=("x", "w_key", "w_query", "w_value"), mistakes={"swapped_projections": swapped_qkv}),
    _value("03.scores_1", "Step 4 · the scores of query 1", ("attn_scores_1",), ref_scores_1,
           reads=("queries", "keys"), mistakes=SCORES_1_MISTAKES),
    _value("03.scores", "Step 4 · all the attention scores", ("attn_scores",), ref_scores,
           reads=("queries", "keys"), mistakes=SCORES_MISTAKES, hints={"unexpected_scale": _NO_SCALE}),
    _value("03.softmax", "Step 4 · the softmax over each row", ("attn_weights",), ref_softmax,
           reads=("attn_scores",), mistakes=SOFTMAX_MISTAKES,
           hints={
               "softmax_wrong_axis": "Your softmax normalised each column (dim=0). Each query's row must "
               "sum to 1: pass dim=-1 (the keys' axis).",
               "unexpected_scale": "You scaled the scores by √d_k before the softmax. This notebook uses the "
               "unscaled scores: apply the softmax to attn_scores directly.",
               "transposed_scores": "Your weights are the softmax of the transposed scores. Apply the softmax "
               "to attn_scores itself, over its last dimension.",
           }),
    _value("03.weighted_values", "Step 5 · the weighted values", ("weighted_values",), ref_weighted_values,
           reads=("attn_weights", "values"), mistakes=WEIGHTED_MISTAKES,
           hints={
               "no_softmax": "You weighted the values with the raw scores. Use the softmax weights "
               "attn_weights.",
               "rounded_weights": "You weighted the values with the diagrams' rounded weights. Use the "
               "exact softmax weights attn_weights.",
               "transposed_scores": "Weight (i, j) — row i of attn_weights — must scale value j for query i; "
               "you used the transposed weights.",
           }),
    _value("03.outputs", "Step 6 · the outputs", ("outputs",), ref_outputs, reads=("weighted_values",),
           mistakes=OUTPUT_MISTAKES,
           hints={
               "sum_wrong_axis": _SUM_AXIS_OUT,
               "no_softmax": "Your outputs mix the values with the raw scores. Sum the weighted values "
               "made from the softmax weights.",
               "rounded_weights": "These are the diagrams' outputs from rounded weights, like [2.0, 7.0, 1.5]. "
               "Sum the weighted values made from the exact softmax weights.",
           }),
    _value("03.rounded_1", "The diagram's output 1 from rounded weights",
           ("weighted_values_1_rounded", "output_1_rounded"), ref_rounded_1, reads=("rounded_1", "values"),
           mistakes=ROUNDED_1_MISTAKES,
           hints={
               "sum_wrong_axis": "You summed each weighted value's own features (dim=1). The three weighted "
               "values are the rows: add them up with dim=0.",
           }),
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
