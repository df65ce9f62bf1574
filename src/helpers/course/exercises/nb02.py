"""Notebook 02 — from dot products to trainable weights (seed 001), in PyTorch.

Part 1 uses the six embeddings as their own queries, keys and values; part 2 projects
them with three (3, 2) weight matrices drawn by ``torch.rand`` after
``torch.manual_seed(123)``. Those draws are fixed by the seed, so their exact float32
values are written out below and every reference is computed in NumPy.
"""

from __future__ import annotations

import numpy as np

from ..reference import global_softmax, self_attention, softmax, sum_normalise
from ..spec import Exercise, register, upstream_of

NOTEBOOK = "02_dot_products_to_trainable_weights"
SEED = "001_8601a33d321beecd.txt"  # every number it prints must appear in the stored outputs

# "Your journey starts with one step": one 3-d embedding per word (x^1 … x^6).
INPUTS = np.array(
    [
        [0.43, 0.15, 0.89],  # Your
        [0.55, 0.87, 0.66],  # journey
        [0.57, 0.85, 0.64],  # starts
        [0.22, 0.58, 0.33],  # with
        [0.77, 0.25, 0.10],  # one
        [0.05, 0.80, 0.55],  # step
    ]
)
# torch.manual_seed(123); then torch.rand(3, 2) three times, in the order query, key, value.
# These are the exact float32 values torch draws (the CPU generator is the same everywhere).
W_QUERY = np.array([[0.29611194133758545, 0.516562283039093],
                    [0.2516707181930542, 0.6885567903518677],
                    [0.07397246360778809, 0.866521954536438]])
W_KEY = np.array([[0.13657987117767334, 0.10247904062271118],
                  [0.18405646085739136, 0.7264467477798462],
                  [0.3152539134025574, 0.6871066689491272]])
W_VALUE = np.array([[0.07563531398773193, 0.19663816690444946],
                    [0.31641197204589844, 0.4017401337623596],
                    [0.1185683012008667, 0.8273953795433044]])
JOURNEY = 1  # x^2, the second word, is row 1


def world(rng: np.random.Generator | None = None) -> dict:
    """Every array the notebook defines, in order (``rng=None``: the notebook's own numbers).

    Fresh worlds draw six embeddings of both signs and weight matrices like ``torch.rand``; the
    notebook's names and shapes stay the same.
    """
    if rng is None:
        x, wq, wk, wv = INPUTS, W_QUERY, W_KEY, W_VALUE
    else:
        x = rng.normal(0.0, 1.5, size=(6, 3)).round(2)
        wq, wk, wv = (rng.uniform(0.0, 1.0, size=(3, 2)) for _ in range(3))
    q = x[JOURNEY]
    s2 = x @ q
    s = x @ x.T
    keys, values = x @ wk, x @ wv
    query_2 = x[JOURNEY] @ wq
    s2_qk = query_2 @ keys.T
    w2_qk = softmax(s2_qk / np.sqrt(keys.shape[-1]))
    return {
        "inputs": x, "query": q,
        "attn_scores_2": s2, "attn_scores_2_vec": s2,
        "attn_weights_2_sum": sum_normalise(s2), "attn_weights_2": softmax(s2),
        "context_vec_2_simple": softmax(s2) @ x,
        "attn_scores_loop": s, "attn_scores": s, "attn_weights": softmax(s), "all_context_vecs": softmax(s) @ x,
        "x_2": x[JOURNEY],
        "w_query": wq, "w_key": wk, "w_value": wv,
        "query_2": query_2, "key_2": x[JOURNEY] @ wk, "value_2": x[JOURNEY] @ wv,
        "keys": keys, "values": values,
        "attn_score_22": query_2 @ (x[JOURNEY] @ wk),
        "attn_scores_2_qk": s2_qk,
        "attn_weights_2_qk": w2_qk,
        "context_vec_2": w2_qk @ values,
        "context_vecs_v1": attention(x, W_QUERY, W_KEY, W_VALUE),
    }


def _one(name: str, fn):
    """A value reference (or wrong variant) that returns ``{name: fn(**inputs)}``."""
    return lambda **i: {name: fn(**i)}


# --- part 2: trainable projections --------------------------------------------------------


def attention(x, w_query, w_key, w_value, *, scale=None, transpose=False, axis=-1, swap_kv=False):
    """Context vectors softmax(Q·Kᵀ / scale)·V with switches for the catalogued mistakes
    (``scale=None`` divides by √d_k; see :func:`helpers.course.reference.self_attention`)."""
    return self_attention(
        x, w_query, w_key, w_value, scale=scale, transpose=transpose, swap_kv=swap_kv,
        normalise=lambda s: softmax(s, axis=axis),
    )[1]


def _weights_2_qk(attn_scores_2_qk, keys, scale=None, **_):
    d_k = keys.shape[-1]
    return softmax(attn_scores_2_qk / (np.sqrt(d_k) if scale is None else scale))


ATTENTION_MISTAKES = {
    "missing_scale": lambda **i: attention(**i, scale=1.0),
    "scale_by_d": lambda **i: attention(**i, scale=float(i["w_key"].shape[-1])),
    "transposed_scores": lambda **i: attention(**i, transpose=True),
    "softmax_wrong_axis": lambda **i: attention(**i, axis=0),
    "swapped_projections": lambda **i: attention(**i, swap_kv=True),
}
ATTENTION_HINTS = {
    "transposed_scores": "Your scores are keys @ queries.T, so row i belongs to key i. Use queries @ keys.T "
    "(the same thing happens if the queries come from w_key and the keys from w_query).",
    "swapped_projections": "Your keys and values use each other's weights. Keys come from w_key, values "
    "from w_value.",
}


def _function_inputs(rng: np.random.Generator | None) -> dict:
    """The notebook's example (rng=None) or a fresh random one of random size."""
    if rng is None:
        return {"x": INPUTS, "w_query": W_QUERY, "w_key": W_KEY, "w_value": W_VALUE}
    n, d_in, d_out = int(rng.integers(3, 8)), int(rng.integers(2, 6)), int(rng.integers(2, 6))
    return {
        "x": rng.normal(size=(n, d_in)),
        "w_query": rng.normal(size=(d_in, d_out)),
        "w_key": rng.normal(size=(d_in, d_out)),
        "w_value": rng.normal(size=(d_in, d_out)),
    }


def _v1(inputs, scale=None, transpose=False, axis=-1, swap_kv=False, **_):
    """SelfAttentionV1 seeded with 123 draws step 5's matrices, whatever the inputs."""
    return attention(inputs, W_QUERY, W_KEY, W_VALUE, scale=scale, transpose=transpose, axis=axis, swap_kv=swap_kv)


# --- the exercises ---------------------------------------------------------------------------


def _value(ex_id, title, answers, reference, **kw):
    return Exercise(ex_id, notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                    inputs=upstream_of(world, answers[0]), framework="torch", **kw)


PART_1 = [
    _value("02.scores_2_loop", "Scores of the journey query, by a loop", ("attn_scores_2",),
           _one("attn_scores_2", lambda inputs, query, **_: inputs @ query), reads=("inputs", "query"),
           mistakes={"wrong_query_row": _one("attn_scores_2", lambda inputs, **_: inputs @ inputs[0])}),
    _value("02.scores_2_vec", "Scores of the journey query, by one matrix product", ("attn_scores_2_vec",),
           _one("attn_scores_2_vec", lambda inputs, query, **_: inputs @ query), reads=("inputs", "query"),
           mistakes={"elementwise_product": _one("attn_scores_2_vec", lambda inputs, query, **_: inputs * query)},
           hints={"elementwise_product": "You multiplied element by element (`*`) and kept all six rows of three "
                  "products. A dot product also adds them up: use `inputs @ query`."}),
    _value("02.weights_2_sum", "Weights by dividing by the sum", ("attn_weights_2_sum",),
           _one("attn_weights_2_sum", lambda attn_scores_2, **_: sum_normalise(attn_scores_2)),
           reads=("attn_scores_2",),
           mistakes={"softmax_wrong_axis": _one("attn_weights_2_sum",
                                                lambda attn_scores_2, **_: softmax(attn_scores_2))},
           hints={"softmax_wrong_axis": "These are softmax weights. This step divides the scores by their plain "
                  "sum (no exponential): attn_scores_2 / attn_scores_2.sum()."}),
    _value("02.weights_2", "Weights by softmax", ("attn_weights_2",),
           _one("attn_weights_2", lambda attn_scores_2, **_: softmax(attn_scores_2)), reads=("attn_scores_2",),
           mistakes={
               "sum_normalisation": _one("attn_weights_2", lambda attn_scores_2, **_: sum_normalise(attn_scores_2)),
               "no_softmax": _one("attn_weights_2", lambda attn_scores_2, **_: attn_scores_2),
           }),
    _value("02.context_2_simple", "The journey's context vector", ("context_vec_2_simple",),
           _one("context_vec_2_simple", lambda attn_weights_2, inputs, **_: attn_weights_2 @ inputs),
           reads=("attn_weights_2", "inputs"),
           mistakes={
               "sum_normalisation": _one("context_vec_2_simple",
                                         lambda attn_weights_2_sum, inputs, **_: attn_weights_2_sum @ inputs),
               "no_softmax": _one("context_vec_2_simple", lambda attn_scores_2, inputs, **_: attn_scores_2 @ inputs),
           },
           hints={
               "sum_normalisation": "You weighted the embeddings with attn_weights_2_sum. Use the softmax "
               "weights attn_weights_2.",
               "no_softmax": "You weighted the embeddings with the raw scores attn_scores_2. Use the softmax "
               "weights attn_weights_2.",
           }),
    _value("02.scores_loop", "All scores, by a double loop", ("attn_scores_loop",),
           _one("attn_scores_loop", lambda inputs, **_: inputs @ inputs.T), reads=("inputs",)),
    _value("02.scores", "All scores, by one matrix product", ("attn_scores",),
           _one("attn_scores", lambda inputs, **_: inputs @ inputs.T), reads=("inputs",),
           mistakes={"elementwise_product": _one("attn_scores", lambda inputs, **_: inputs * inputs)},
           hints={"elementwise_product": "You multiplied `inputs * inputs` element by element. Every row against "
                  "every row is a matrix product with the transpose: `inputs @ inputs.T`."}),
    _value("02.weights", "All attention weights", ("attn_weights",),
           _one("attn_weights", lambda attn_scores, **_: softmax(attn_scores)), reads=("attn_scores",),
           mistakes={
               "softmax_wrong_axis": _one("attn_weights", lambda attn_scores, **_: softmax(attn_scores, axis=0)),
               "global_softmax": _one("attn_weights", lambda attn_scores, **_: global_softmax(attn_scores)),
               "sum_normalisation": _one("attn_weights", lambda attn_scores, **_: sum_normalise(attn_scores)),
               "no_softmax": _one("attn_weights", lambda attn_scores, **_: attn_scores),
           }),
    _value("02.context_all", "All context vectors", ("all_context_vecs",),
           _one("all_context_vecs", lambda attn_weights, inputs, **_: attn_weights @ inputs),
           reads=("attn_weights", "inputs"),
           mistakes={
               "softmax_wrong_axis": _one("all_context_vecs",
                                          lambda attn_weights, inputs, **_: attn_weights.T @ inputs),
               "no_softmax": _one("all_context_vecs", lambda attn_scores, inputs, **_: attn_scores @ inputs),
           },
           hints={"softmax_wrong_axis": "Row i of your weights does not belong to query i: either the softmax "
                  "normalised columns (use dim=-1) or you multiplied with attn_weights.T. "
                  "Use attn_weights @ inputs."}),
]

PART_2 = [
    _value("02.weights_qkv", "Three weight matrices from torch.manual_seed(123)", ("w_query", "w_key", "w_value"),
           lambda **_: {"w_query": W_QUERY, "w_key": W_KEY, "w_value": W_VALUE},
           mistakes={"swapped_projections": lambda **_: {"w_query": W_KEY, "w_key": W_QUERY, "w_value": W_VALUE}},
           hints={"swapped_projections": "Your w_query holds the numbers of w_key and the other way round. Right "
                  "after torch.manual_seed(123), draw them in the order query, key, value."},
           dtype="float32", replays=0),  # seeded draws: the same on every run, nothing to replay
    _value("02.qkv_2", "Query, key and value of the journey", ("query_2", "key_2", "value_2"),
           lambda x_2, w_query, w_key, w_value, **_: {
               "query_2": x_2 @ w_query, "key_2": x_2 @ w_key, "value_2": x_2 @ w_value},
           reads=("x_2", "w_query", "w_key", "w_value"),
           mistakes={"swapped_projections": lambda x_2, w_query, w_key, w_value, **_: {
               "query_2": x_2 @ w_key, "key_2": x_2 @ w_query, "value_2": x_2 @ w_value}}),
    _value("02.keys_values", "Keys and values of all six inputs", ("keys", "values"),
           lambda inputs, w_key, w_value, **_: {"keys": inputs @ w_key, "values": inputs @ w_value},
           reads=("inputs", "w_key", "w_value"),
           mistakes={"swapped_projections": lambda inputs, w_key, w_value, **_: {
               "keys": inputs @ w_value, "values": inputs @ w_key}},
           hints={"swapped_projections": "Your keys and values use each other's weights. Keys come from w_key, "
                  "values from w_value."}),
    _value("02.score_22", "The score of query 2 against key 2", ("attn_score_22",),
           _one("attn_score_22", lambda query_2, key_2, **_: query_2 @ key_2), reads=("query_2", "key_2"),
           mistakes={"elementwise_product": _one("attn_score_22", lambda query_2, key_2, **_: query_2 * key_2)},
           hints={"elementwise_product": "`query_2 * key_2` multiplies entry by entry and gives two numbers. A "
                  "score is one number, the dot product: `query_2 @ key_2` or torch.dot."}),
    _value("02.scores_2_qk", "The scores of query 2 against all keys", ("attn_scores_2_qk",),
           _one("attn_scores_2_qk", lambda query_2, keys, **_: query_2 @ keys.T), reads=("query_2", "keys"),
           mistakes={"elementwise_product": _one("attn_scores_2_qk", lambda query_2, keys, **_: query_2 * keys)},
           hints={"elementwise_product": "`query_2 * keys` multiplies entry by entry and keeps a (6, 2) matrix. "
                  "One dot product per key: `query_2 @ keys.T`."}),
    _value("02.weights_2_qk", "Weights of query 2, scaled by √d_k", ("attn_weights_2_qk",),
           _one("attn_weights_2_qk", _weights_2_qk), reads=("attn_scores_2_qk", "keys"),
           mistakes={
               "missing_scale": _one("attn_weights_2_qk", lambda **i: _weights_2_qk(**i, scale=1.0)),
               "scale_by_d": _one("attn_weights_2_qk",
                                  lambda **i: _weights_2_qk(**i, scale=float(i["keys"].shape[-1]))),
               "sum_normalisation": _one("attn_weights_2_qk",
                                         lambda attn_scores_2_qk, **_: sum_normalise(attn_scores_2_qk)),
               "no_softmax": _one("attn_weights_2_qk",
                                  lambda attn_scores_2_qk, keys, **_: attn_scores_2_qk / np.sqrt(keys.shape[-1])),
           },
           hints={"no_softmax": "These are the scaled scores. Apply torch.softmax(..., dim=-1) to them to get "
                  "weights that sum to 1."}),
    _value("02.context_2", "The journey's context vector, with trainable weights", ("context_vec_2",),
           _one("context_vec_2", lambda attn_weights_2_qk, values, **_: attn_weights_2_qk @ values),
           reads=("attn_weights_2_qk", "values"),
           mistakes={
               "missing_scale": _one("context_vec_2", lambda attn_scores_2_qk, values, **_:
                                     softmax(attn_scores_2_qk) @ values),
               "swapped_projections": _one("context_vec_2", lambda attn_weights_2_qk, keys, **_:
                                           attn_weights_2_qk @ keys),
           },
           hints={"swapped_projections": "You mixed the keys. The keys only decide the weights; the context "
                  "vector mixes the values: attn_weights_2_qk @ values."}),
    Exercise(
        "02.self_attention",
        title="self_attention(x, w_query, w_key, w_value)",
        kind="function",
        answers=("self_attention",),
        inputs=_function_inputs,
        reference=attention,
        mistakes=ATTENTION_MISTAKES,
        hints=ATTENTION_HINTS,
        framework="torch",
        notebook=NOTEBOOK,
        points=2,
    ),
    _value("02.sa_v1", "SelfAttentionV1 seeded with torch.manual_seed(123)", ("context_vecs_v1",),
           _one("context_vecs_v1", _v1), reads=("inputs",), module="sa_v1", trainable=3,
           mistakes={
               "missing_scale": _one("context_vecs_v1", lambda inputs, **_: _v1(inputs, scale=1.0)),
               "scale_by_d": _one("context_vecs_v1", lambda inputs, **_: _v1(inputs, scale=2.0)),
               "transposed_scores": _one("context_vecs_v1", lambda inputs, **_: _v1(inputs, transpose=True)),
               "softmax_wrong_axis": _one("context_vecs_v1", lambda inputs, **_: _v1(inputs, axis=0)),
               "swapped_projections": _one("context_vecs_v1", lambda inputs, **_: _v1(inputs, swap_kv=True)),
           },
           hints={
               **ATTENTION_HINTS,
               "transposed_scores": "Your output is what keys @ queries.T gives. Either forward computes "
               "keys @ queries.T (use queries @ keys.T), or __init__ draws w_key before w_query, which swaps "
               "their numbers: draw w_query, w_key, w_value in that order.",
           }),
    Exercise(
        "02.trainable", notebook=NOTEBOOK, title="Trainable numbers in SelfAttentionV1", answers=("n_trainable",),
        inputs=upstream_of(world, "context_vecs_v1"),
        reference=lambda w_query, **_: {"n_trainable": np.asarray(3.0 * W_QUERY.size)},
        replays=0,  # it counts the module's numbers: the cell also trains a copy, nothing to replay
    ),
    Exercise(
        "02.sa_v2",
        title="SelfAttentionV2 with nn.Linear",
        kind="function",
        answers=("attention_v2_with",),
        inputs=_function_inputs,
        reference=attention,
        mistakes=ATTENTION_MISTAKES,
        hints={
            **ATTENTION_HINTS,
            "swapped_projections": "Your keys and values use each other's layers. Keys come from "
            "self.w_key(x), values from self.w_value(x).",
        },
        framework="torch",
        notebook=NOTEBOOK,
        points=2,
    ),
]

register(*PART_1, *PART_2)
