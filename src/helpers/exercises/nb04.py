"""Notebook 04 — attention from scratch in TensorFlow (seed 003), with a NumPy cross-check.

Four 4-d integer word embeddings and three integer weight matrices, fixed to the values
the seed printed (the seed draws them with an unseeded ``tf.random.uniform``). First the
attention output of word 1 word by word, then all four in matrix form, scaled by
√d_k with d_k = 4.

The scores reach 85 / √4 = 42.5, so the softmax is almost one-hot: weights as small as
1e-11 next to 0.9999995. At the default tolerances several wrong variants (e.g. the
unscaled softmax of word 1) agree with the reference to 1e-6, so the weight exercises
compare with a tight relative tolerance that float32 answers still meet, and only the
mistakes that stay distinguishable on these inputs are declared.
"""

from __future__ import annotations

import numpy as np

from ..reference import global_softmax, softmax
from ..spec import Exercise, register

NOTEBOOK = "04_attention_from_scratch_tensorflow"
SEED = "003_9ffdeb4a97181e8e.txt"  # every number it prints must appear in the stored outputs

WORDS = np.array([[0, 1, 1, 2], [1, 0, 0, 2], [1, 1, 0, 2], [2, 1, 1, 1]])
# The seed draws these with tf.random.uniform(..., dtype=tf.int32) without a seed; these are the
# matrices it printed, so its numbers can be reproduced.
W_Q = np.array([[1, 1, 0, 0], [0, 0, 2, 2], [1, 2, 2, 2], [0, 0, 2, 2]])
W_K = np.array([[1, 1, 0, 2], [1, 1, 2, 0], [2, 1, 0, 2], [0, 0, 0, 1]])
W_V = np.array([[1, 2, 1, 1], [1, 2, 0, 1], [0, 0, 2, 0], [2, 1, 1, 2]])

TIGHT = {"rtol": 1e-5, "atol": 1e-12}  # weights down to 1e-12: compare them relative to their size

NO_SOFTMAX_WEIGHTS = ("These are the scaled scores, not weights. Apply tf.nn.softmax to them (over the last "
                      "axis) so that each word's weights are positive and sum to 1.")
NO_SOFTMAX_OUTPUTS = ("Your outputs weight the values by the scaled scores themselves. Turn the scores into "
                      "weights with tf.nn.softmax first, then take the weighted sum of the values.")


def _inputs() -> dict:
    return {"words": WORDS, "w_q": W_Q, "w_k": W_K, "w_v": W_V}


def _qkv(words, w_q, w_k, w_v, **_):
    x = np.asarray(words, dtype=np.float64)
    return x @ w_q, x @ w_k, x @ w_v


def _scaled(scores, keys):
    return np.asarray(scores, dtype=np.float64) / np.sqrt(keys.shape[-1])


# --- part 1: word by word (word 1) -------------------------------------------------------


def ref_stack(words, **_):
    return {"word_emb_stack": np.asarray(words)[np.newaxis]}


def _per_word(words, w_q, w_k, w_v, swap=False, product=np.matmul):
    out = {}
    for i in range(4):
        w = np.asarray(words[i : i + 1], dtype=np.float64)
        q, k = product(w, w_q), product(w, w_k)
        if swap:
            q, k = k, q
        out |= {f"query_{i + 1}": q, f"key_{i + 1}": k, f"value_{i + 1}": product(w, w_v)}
    return out


def ref_qkv_words(**inp):
    return _per_word(**inp)


def _scores_1(**inp):
    q, k, _ = _qkv(**inp)
    return (k @ q[0]).reshape(4, 1, 1)  # query_1 against key_1 … key_4


def ref_scores_1(**inp):
    return {"scores_1": _scores_1(**inp)}


def _weights_1(**inp):
    return softmax(_scaled(_scores_1(**inp).reshape(4), _qkv(**inp)[1]))


def ref_weights_1(**inp):
    return {"weights_1": _weights_1(**inp)}


def _w1_variant(transform):
    def variant(**inp):
        return {"weights_1": transform(_scores_1(**inp).reshape(4).astype(np.float64))}

    return variant


def _attention_1(weights, **inp):
    return {"attention_1": (np.asarray(weights) @ _qkv(**inp)[2]).reshape(1, 4)}


def ref_attention_1(**inp):
    return _attention_1(_weights_1(**inp), **inp)


# --- part 2: matrix form -----------------------------------------------------------------


def ref_qkv(**inp):
    q, k, v = _qkv(**inp)
    return {"embeddings": np.asarray(inp["words"]), "queries": q, "keys": k, "values": v}


def _scores(**inp):
    q, k, _ = _qkv(**inp)
    return q @ k.T


def ref_scores(**inp):
    return {"scores": _scores(**inp)}


def _weights(**inp):
    return softmax(_scaled(_scores(**inp), _qkv(**inp)[1]))


def ref_weights(**inp):
    return {"weights": _weights(**inp)}


# wrong weight matrices, shared by the weights, attention and NumPy exercises
WRONG_WEIGHTS = {
    "missing_scale": lambda s: softmax(s),
    "scale_by_d": lambda s: softmax(s / 4),
    "softmax_wrong_axis": lambda s: softmax(s / 2, axis=0),
    "global_softmax": lambda s: global_softmax(s / 2),
    "no_softmax": lambda s: s / 2,
}


def _weights_variant(code, name="weights", then=lambda w, **inp: w):
    def variant(**inp):
        return {name: then(WRONG_WEIGHTS[code](_scores(**inp)), **inp)}

    return variant


def _times_values(w, **inp):
    return w @ _qkv(**inp)[2]


def ref_attention(**inp):
    return {"attention": _weights(**inp) @ _qkv(**inp)[2]}


def ref_attention_sum(**inp):
    return {"attention_sum": _weights(**inp) @ _qkv(**inp)[2]}


def ref_attention_np(**inp):
    return {"attention_np": _weights(**inp) @ _qkv(**inp)[2]}


# --- part 4: a function, checked on random inputs ----------------------------------------


def fn_inputs(rng: np.random.Generator | None = None) -> dict:
    if rng is None:
        q, k, v = _qkv(**_inputs())
        return {"queries": q, "keys": k, "values": v}
    n, d_k, d_v = int(rng.integers(3, 7)), int(rng.integers(2, 9)), int(rng.integers(2, 6))
    return {
        "queries": rng.normal(size=(n, d_k)),
        "keys": rng.normal(size=(n, d_k)),
        "values": rng.normal(size=(n, d_v)),
    }


def _attend(queries, keys, values, scores, scale, axis=-1):
    return softmax(scores / scale, axis=axis) @ values


def ref_scaled_attention(queries, keys, values):
    return _attend(queries, keys, values, queries @ keys.T, np.sqrt(keys.shape[-1]))


FN_MISTAKES = {
    "missing_scale": lambda queries, keys, values: _attend(queries, keys, values, queries @ keys.T, 1.0),
    "scale_by_d": lambda queries, keys, values: _attend(queries, keys, values, queries @ keys.T, keys.shape[-1]),
    "transposed_scores": lambda queries, keys, values: _attend(
        queries, keys, values, keys @ queries.T, np.sqrt(keys.shape[-1])
    ),
    "softmax_wrong_axis": lambda queries, keys, values: _attend(
        queries, keys, values, queries @ keys.T, np.sqrt(keys.shape[-1]), axis=0
    ),
}


def _exercises() -> list[Exercise]:
    common = {"notebook": NOTEBOOK, "inputs": _inputs, "framework": "tensorflow"}
    return [
        Exercise(
            "04.stack",
            title="The stacked word embeddings",
            answers=("word_emb_stack",),
            reference=ref_stack,
            **common,
        ),
        Exercise(
            "04.qkv_words",
            title="Query, key and value of every word",
            answers=tuple(f"{kind}_{i}" for i in range(1, 5) for kind in ("query", "key", "value")),
            reference=ref_qkv_words,
            mistakes={
                "swapped_projections": lambda **i: _per_word(**i, swap=True),
                "elementwise_product": lambda **i: _per_word(**i, product=np.multiply),
            },
            hints={
                "elementwise_product": "You multiplied element by element (`*`), which broadcasts a (1, 4) "
                "word against a (4, 4) matrix into a (4, 4) result. A projection is a matrix product: "
                "tf.matmul(word_1, W_Q) (or word_1 @ W_Q), shape (1, 4).",
            },
            **common,
        ),
        Exercise(
            "04.scores_1",
            title="The scores of word 1",
            answers=("scores_1",),
            reference=ref_scores_1,
            mistakes={
                "elementwise_product": lambda **i: {
                    "scores_1": (_qkv(**i)[0][0] * _qkv(**i)[1])[:, np.newaxis, :]
                },
            },
            hints={
                "elementwise_product": "You multiplied query_1 and the keys element by element, so each "
                "score is 4 numbers. A score is one dot product: tf.matmul(query_1, key_j, transpose_b=True), "
                "shape (1, 1).",
            },
            depends_on=("04.qkv_words",),
            **common,
        ),
        Exercise(
            "04.weights_1",
            title="The weights of word 1",
            answers=("weights_1",),
            reference=ref_weights_1,
            mistakes={
                "missing_scale": _w1_variant(softmax),
                "scale_by_d": _w1_variant(lambda s: softmax(s / 4)),
                "no_softmax": _w1_variant(lambda s: s / 2),
                "softmax_wrong_axis": lambda **i: {"weights_1": np.ones((4, 1, 1))},
            },
            hints={
                "missing_scale": "Your weights are the softmax of the raw scores. Divide the scores by "
                "√d_k = √4 = 2 first: even though the weights look almost the same, the small ones are "
                "off by orders of magnitude.",
                "no_softmax": NO_SOFTMAX_WEIGHTS,
                "softmax_wrong_axis": "Your weights are all 1: the softmax ran over an axis of length 1, "
                "because scores_1 has shape (4, 1, 1). tf.squeeze it to shape (4,) first, then take "
                "the softmax.",
            },
            float_required=True,
            depends_on=("04.scores_1",),
            **TIGHT,
            **common,
        ),
        Exercise(
            "04.attention_1",
            title="The attention output of word 1",
            answers=("attention_1",),
            reference=ref_attention_1,
            mistakes={
                "scale_by_d": lambda **i: _attention_1(softmax(_scores_1(**i).reshape(4) / 4), **i),
                "no_softmax": lambda **i: _attention_1(_scores_1(**i).reshape(4) / 2, **i),
            },
            hints={"no_softmax": NO_SOFTMAX_OUTPUTS},
            float_required=True,
            depends_on=("04.weights_1", "04.qkv_words"),
            rtol=1e-5,
            **common,
        ),
        Exercise(
            "04.qkv",
            title="Queries, keys and values of all four words",
            answers=("embeddings", "queries", "keys", "values"),
            reference=ref_qkv,
            mistakes={
                "swapped_projections": lambda **i: ref_qkv(**i) | {"queries": _qkv(**i)[1], "keys": _qkv(**i)[0]},
                "elementwise_product": lambda **i: ref_qkv(**i) | {
                    "queries": i["words"] * i["w_q"], "keys": i["words"] * i["w_k"], "values": i["words"] * i["w_v"]
                },
            },
            depends_on=("04.stack",),
            **common,
        ),
        Exercise(
            "04.scores",
            title="The score matrix",
            answers=("scores",),
            reference=ref_scores,
            mistakes={
                "transposed_scores": lambda **i: {"scores": _scores(**i).T},
                "elementwise_product": lambda **i: {"scores": _qkv(**i)[0] * _qkv(**i)[1]},
                "unexpected_scale": lambda **i: {"scores": _scores(**i) / 2},
            },
            hints={
                "unexpected_scale": "You already divided by √d_k. Keep `scores` as the raw dot products, "
                "as for word 1: the scaling comes in the next step, right before the softmax.",
            },
            depends_on=("04.qkv",),
            **common,
        ),
        Exercise(
            "04.weights",
            title="The weight matrix",
            answers=("weights",),
            reference=ref_weights,
            mistakes={code: _weights_variant(code) for code in WRONG_WEIGHTS},
            hints={"no_softmax": NO_SOFTMAX_WEIGHTS},
            float_required=True,
            depends_on=("04.scores",),
            **TIGHT,
            **common,
        ),
        Exercise(
            "04.attention",
            title="The attention outputs of all four words",
            answers=("attention",),
            reference=ref_attention,
            mistakes={
                **{code: _weights_variant(code, "attention", _times_values) for code in WRONG_WEIGHTS},
                "elementwise_product": lambda **i: {"attention": _weights(**i) * _qkv(**i)[2]},
            },
            hints={"no_softmax": NO_SOFTMAX_OUTPUTS},
            float_required=True,
            depends_on=("04.weights", "04.qkv"),
            rtol=1e-5,
            **common,
        ),
        Exercise(
            "04.attention_sum",
            title="The outputs as explicit weighted sums",
            answers=("attention_sum",),
            reference=ref_attention_sum,
            mistakes={
                "sum_wrong_axis": lambda **i: {
                    "attention_sum": _weights(**i).sum(axis=0)[:, np.newaxis] * _qkv(**i)[2]
                },
                "elementwise_product": lambda **i: {"attention_sum": _weights(**i) * _qkv(**i)[2]},
            },
            hints={
                "sum_wrong_axis": "You summed over the queries (axis 0). Output i adds up weights[i, j] * "
                "value_j over the words j: keep axis 0, sum over axis 1.",
                "elementwise_product": "You multiplied weights and values entry by entry and did not add "
                "anything up. Output i is the sum over j of weights[i, j] times the whole value row j.",
            },
            float_required=True,
            depends_on=("04.weights", "04.qkv"),
            rtol=1e-5,
            **common,
        ),
        Exercise(
            "04.numpy",
            title="The NumPy cross-check",
            answers=("attention_np",),
            reference=ref_attention_np,
            mistakes={
                code: _weights_variant(code, "attention_np", _times_values)
                for code in ("missing_scale", "scale_by_d", "softmax_wrong_axis", "global_softmax")
            },
            hints={
                "softmax_wrong_axis": "Your softmax normalised each column. Sum the exponentials over "
                "axis=-1 with keepdims=True, so each row is divided by its own sum.",
            },
            notebook=NOTEBOOK,
            inputs=_inputs,
            framework="numpy",
            rtol=1e-5,
        ),
        Exercise(
            "04.scaled_attention",
            title="scaled_attention(queries, keys, values)",
            answers=("scaled_attention",),
            kind="function",
            inputs=fn_inputs,
            reference=ref_scaled_attention,
            mistakes=FN_MISTAKES,
            hints={
                "missing_scale": "Your function does not divide the scores by √d_k. d_k is the size of "
                "the last axis of `keys`: tf.math.sqrt(tf.cast(tf.shape(keys)[-1], tf.float32)).",
            },
            notebook=NOTEBOOK,
            framework="tensorflow",
            points=2,
        ),
    ]


register(*_exercises())
