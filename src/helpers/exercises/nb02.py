"""Notebook 02 — from dot products to trainable weights (seed 001), in PyTorch.

Part 1 uses the six embeddings as their own queries, keys and values; part 2 projects
them with three (3, 2) weight matrices drawn by ``torch.rand`` after
``torch.manual_seed(123)``. Those draws are fixed by the seed, so their exact float32
values are written out below and every reference is computed in NumPy.
"""

from __future__ import annotations

import numpy as np

from ..reference import global_softmax, self_attention, softmax, sum_normalise
from ..spec import Exercise, register

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


def _inputs() -> dict:
    return {"x": INPUTS, "w_query": W_QUERY, "w_key": W_KEY, "w_value": W_VALUE}


def _one(name: str, fn):
    """A value reference (or wrong variant) that returns ``{name: fn(**inputs)}``."""
    return lambda **i: {name: fn(**i)}


# --- part 1: the embeddings are their own queries, keys and values ----------------------


def _scores_2(x, **_):
    return x @ x[JOURNEY]


def _scores(x, **_):
    return x @ x.T


# --- part 2: trainable projections --------------------------------------------------------


def attention(x, w_query, w_key, w_value, *, scale=None, transpose=False, axis=-1, swap_kv=False):
    """Context vectors softmax(Q·Kᵀ / scale)·V with switches for the catalogued mistakes
    (``scale=None`` divides by √d_k; see :func:`helpers.reference.self_attention`)."""
    return self_attention(
        x, w_query, w_key, w_value, scale=scale, transpose=transpose, swap_kv=swap_kv,
        normalise=lambda s: softmax(s, axis=axis),
    )[1]


def _qk_scores_2(x, w_query, w_key, **_):
    return (x[JOURNEY] @ w_query) @ (x @ w_key).T


def _qk_weights_2(x, w_query, w_key, scale=None, **_):
    d_k = w_key.shape[-1]
    return softmax(_qk_scores_2(x, w_query, w_key) / (np.sqrt(d_k) if scale is None else scale))


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
        return _inputs()
    n, d_in, d_out = int(rng.integers(3, 8)), int(rng.integers(2, 6)), int(rng.integers(2, 6))
    return {
        "x": rng.normal(size=(n, d_in)),
        "w_query": rng.normal(size=(d_in, d_out)),
        "w_key": rng.normal(size=(d_in, d_out)),
        "w_value": rng.normal(size=(d_in, d_out)),
    }


# --- the exercises ---------------------------------------------------------------------------

_common = {"notebook": NOTEBOOK, "inputs": _inputs, "framework": "torch"}

PART_1 = [
    Exercise(
        "02.scores_2_loop",
        title="Scores of the journey query, by a loop",
        answers=("attn_scores_2",),
        reference=_one("attn_scores_2", _scores_2),
        **_common,
    ),
    Exercise(
        "02.scores_2_vec",
        title="Scores of the journey query, by one matrix product",
        answers=("attn_scores_2_vec",),
        reference=_one("attn_scores_2_vec", _scores_2),
        mistakes={"elementwise_product": _one("attn_scores_2_vec", lambda x, **_: x * x[JOURNEY])},
        hints={"elementwise_product": "You multiplied element by element (`*`) and kept all six rows of three "
               "products. A dot product also adds them up: use `inputs @ query`."},
        **_common,
    ),
    Exercise(
        "02.weights_2_sum",
        title="Weights by dividing by the sum",
        answers=("attn_weights_2_sum",),
        reference=_one("attn_weights_2_sum", lambda x, **_: sum_normalise(_scores_2(x))),
        depends_on=("02.scores_2_loop",),
        **_common,
    ),
    Exercise(
        "02.weights_2",
        title="Weights by softmax",
        answers=("attn_weights_2",),
        reference=_one("attn_weights_2", lambda x, **_: softmax(_scores_2(x))),
        mistakes={
            "sum_normalisation": _one("attn_weights_2", lambda x, **_: sum_normalise(_scores_2(x))),
            "no_softmax": _one("attn_weights_2", _scores_2),
        },
        depends_on=("02.scores_2_loop",),
        **_common,
    ),
    Exercise(
        "02.context_2_simple",
        title="The journey's context vector",
        answers=("context_vec_2_simple",),
        reference=_one("context_vec_2_simple", lambda x, **_: softmax(_scores_2(x)) @ x),
        mistakes={
            "sum_normalisation": _one("context_vec_2_simple", lambda x, **_: sum_normalise(_scores_2(x)) @ x),
            "no_softmax": _one("context_vec_2_simple", lambda x, **_: _scores_2(x) @ x),
        },
        hints={
            "sum_normalisation": "You weighted the embeddings with attn_weights_2_sum. Use the softmax "
            "weights attn_weights_2.",
            "no_softmax": "You weighted the embeddings with the raw scores attn_scores_2. Use the softmax "
            "weights attn_weights_2.",
        },
        depends_on=("02.weights_2",),
        **_common,
    ),
    Exercise(
        "02.scores_loop",
        title="All scores, by a double loop",
        answers=("attn_scores_loop",),
        reference=_one("attn_scores_loop", _scores),
        **_common,
    ),
    Exercise(
        "02.scores",
        title="All scores, by one matrix product",
        answers=("attn_scores",),
        reference=_one("attn_scores", _scores),
        mistakes={"elementwise_product": _one("attn_scores", lambda x, **_: x * x)},
        hints={"elementwise_product": "You multiplied `inputs * inputs` element by element. Every row against "
               "every row is a matrix product with the transpose: `inputs @ inputs.T`."},
        **_common,
    ),
    Exercise(
        "02.weights",
        title="All attention weights",
        answers=("attn_weights",),
        reference=_one("attn_weights", lambda x, **_: softmax(_scores(x))),
        mistakes={
            "softmax_wrong_axis": _one("attn_weights", lambda x, **_: softmax(_scores(x), axis=0)),
            "global_softmax": _one("attn_weights", lambda x, **_: global_softmax(_scores(x))),
            "sum_normalisation": _one("attn_weights", lambda x, **_: sum_normalise(_scores(x))),
            "no_softmax": _one("attn_weights", _scores),
        },
        depends_on=("02.scores",),
        **_common,
    ),
    Exercise(
        "02.context_all",
        title="All context vectors",
        answers=("all_context_vecs",),
        reference=_one("all_context_vecs", lambda x, **_: softmax(_scores(x)) @ x),
        mistakes={
            "softmax_wrong_axis": _one("all_context_vecs", lambda x, **_: softmax(_scores(x), axis=0) @ x),
            "sum_normalisation": _one("all_context_vecs", lambda x, **_: sum_normalise(_scores(x)) @ x),
            "no_softmax": _one("all_context_vecs", lambda x, **_: _scores(x) @ x),
        },
        hints={"softmax_wrong_axis": "Row i of your weights does not belong to query i: either the softmax "
               "normalised columns (use dim=-1) or you multiplied with attn_weights.T. "
               "Use attn_weights @ inputs."},
        depends_on=("02.weights",),
        **_common,
    ),
]

PART_2 = [
    Exercise(
        "02.weights_qkv",
        title="Three weight matrices from torch.manual_seed(123)",
        answers=("w_query", "w_key", "w_value"),
        reference=lambda w_query, w_key, w_value, **_: {"w_query": w_query, "w_key": w_key, "w_value": w_value},
        mistakes={"swapped_projections": lambda w_query, w_key, w_value, **_: {
            "w_query": w_key, "w_key": w_query, "w_value": w_value}},
        hints={"swapped_projections": "Your w_query holds the numbers of w_key and the other way round. Right "
               "after torch.manual_seed(123), draw them in the order query, key, value."},
        float_required=True,
        **_common,
    ),
    Exercise(
        "02.qkv_2",
        title="Query, key and value of the journey",
        answers=("query_2", "key_2", "value_2"),
        reference=lambda x, w_query, w_key, w_value: {
            "query_2": x[JOURNEY] @ w_query, "key_2": x[JOURNEY] @ w_key, "value_2": x[JOURNEY] @ w_value},
        mistakes={"swapped_projections": lambda x, w_query, w_key, w_value: {
            "query_2": x[JOURNEY] @ w_key, "key_2": x[JOURNEY] @ w_query, "value_2": x[JOURNEY] @ w_value}},
        depends_on=("02.weights_qkv",),
        **_common,
    ),
    Exercise(
        "02.keys_values",
        title="Keys and values of all six inputs",
        answers=("keys", "values"),
        reference=lambda x, w_key, w_value, **_: {"keys": x @ w_key, "values": x @ w_value},
        mistakes={"swapped_projections": lambda x, w_key, w_value, **_: {"keys": x @ w_value, "values": x @ w_key}},
        hints={"swapped_projections": "Your keys and values use each other's weights. Keys come from w_key, "
               "values from w_value."},
        depends_on=("02.weights_qkv",),
        **_common,
    ),
    Exercise(
        "02.score_22",
        title="The score of query 2 against key 2",
        answers=("attn_score_22",),
        reference=_one("attn_score_22", lambda x, w_query, w_key, **_: (x[JOURNEY] @ w_query) @ (x[JOURNEY] @ w_key)),
        mistakes={"elementwise_product": _one(
            "attn_score_22", lambda x, w_query, w_key, **_: (x[JOURNEY] @ w_query) * (x[JOURNEY] @ w_key))},
        hints={"elementwise_product": "`query_2 * key_2` multiplies entry by entry and gives two numbers. A "
               "score is one number, the dot product: `query_2 @ key_2` or torch.dot."},
        depends_on=("02.qkv_2",),
        **_common,
    ),
    Exercise(
        "02.scores_2_qk",
        title="The scores of query 2 against all keys",
        answers=("attn_scores_2_qk",),
        reference=_one("attn_scores_2_qk", _qk_scores_2),
        mistakes={"elementwise_product": _one(
            "attn_scores_2_qk", lambda x, w_query, w_key, **_: (x[JOURNEY] @ w_query) * (x @ w_key))},
        hints={"elementwise_product": "`query_2 * keys` multiplies entry by entry and keeps a (6, 2) matrix. "
               "One dot product per key: `query_2 @ keys.T`."},
        depends_on=("02.qkv_2", "02.keys_values"),
        **_common,
    ),
    Exercise(
        "02.weights_2_qk",
        title="Weights of query 2, scaled by √d_k",
        answers=("attn_weights_2_qk",),
        reference=_one("attn_weights_2_qk", _qk_weights_2),
        mistakes={
            "missing_scale": _one("attn_weights_2_qk", lambda **i: _qk_weights_2(**i, scale=1.0)),
            "scale_by_d": _one("attn_weights_2_qk", lambda **i: _qk_weights_2(**i, scale=2.0)),
            "sum_normalisation": _one("attn_weights_2_qk", lambda **i: sum_normalise(_qk_scores_2(**i))),
            "no_softmax": _one("attn_weights_2_qk", lambda **i: _qk_scores_2(**i) / np.sqrt(2.0)),
        },
        hints={"no_softmax": "These are the scaled scores. Apply torch.softmax(..., dim=-1) to them to get "
               "weights that sum to 1."},
        depends_on=("02.scores_2_qk",),
        **_common,
    ),
    Exercise(
        "02.context_2",
        title="The journey's context vector, with trainable weights",
        answers=("context_vec_2",),
        reference=_one("context_vec_2", lambda **i: attention(**i)[JOURNEY]),
        mistakes={
            "missing_scale": _one("context_vec_2", lambda **i: attention(**i, scale=1.0)[JOURNEY]),
            "scale_by_d": _one("context_vec_2", lambda **i: attention(**i, scale=2.0)[JOURNEY]),
            "swapped_projections": _one(
                "context_vec_2", lambda x, w_query, w_key, **_: _qk_weights_2(x, w_query, w_key) @ (x @ w_key)),
        },
        hints={"swapped_projections": "You mixed the keys. The keys only decide the weights; the context "
               "vector mixes the values: attn_weights_2_qk @ values."},
        depends_on=("02.weights_2_qk", "02.keys_values"),
        **_common,
    ),
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
    Exercise(
        "02.sa_v1",
        title="SelfAttentionV1 seeded with torch.manual_seed(123)",
        answers=("context_vecs_v1",),
        reference=_one("context_vecs_v1", attention),
        mistakes={code: _one("context_vecs_v1", fn) for code, fn in ATTENTION_MISTAKES.items()},
        hints={
            **ATTENTION_HINTS,
            "transposed_scores": "Your output is what keys @ queries.T gives. Either forward computes "
            "keys @ queries.T (use queries @ keys.T), or __init__ draws w_key before w_query, which swaps "
            "their numbers: draw w_query, w_key, w_value in that order.",
        },
        depends_on=("02.self_attention",),
        **_common,
    ),
    Exercise(
        "02.trainable",
        title="Trainable numbers in SelfAttentionV1",
        answers=("n_trainable",),
        reference=lambda w_query, **_: {"n_trainable": np.asarray(3.0 * w_query.size)},
        notebook=NOTEBOOK,
        inputs=_inputs,
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
