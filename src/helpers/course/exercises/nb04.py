"""Notebook 04 — attention from scratch in TensorFlow (seed 003), with a NumPy cross-check.

Four 4-d integer word embeddings and three integer weight matrices, fixed to the values
the seed printed (the seed draws them with an unseeded ``tf.random.uniform``). First the
attention output of word 1 word by word, then all four in matrix form, scaled by
√d_k with d_k = 4.

The scores reach 85 / √4 = 42.5, so the softmax is almost one-hot: weights as small as
1e-11 next to 0.9999995. At the default tolerances several wrong variants (e.g. the
unscaled softmax of word 1) agree with the reference to 1e-6, so the weight exercises
compare with a tight relative tolerance that float32 answers still meet. Fresh worlds use
smaller integers (0–2 inputs, 0/1 weights), where every mistake shows.
"""

from __future__ import annotations

import numpy as np

from ..reference import global_softmax, softmax
from ..spec import Exercise, register, upstream_of

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


def world(rng: np.random.Generator | None = None) -> dict:
    """Every name of the notebook, in its order (``rng=None``: the notebook's own numbers)."""
    if rng is None:
        words, wq, wk, wv = WORDS, W_Q, W_K, W_V
    else:
        words = rng.integers(0, 3, size=(4, 4))
        wq, wk, wv = (rng.integers(0, 2, size=(4, 4)) for _ in range(3))
    x = np.asarray(words, dtype=np.int64)
    out: dict = {f"word_{i + 1}": x[i : i + 1] for i in range(4)}
    out["word_emb_stack"] = x[np.newaxis]
    out |= {"W_Q": np.asarray(wq), "W_K": np.asarray(wk), "W_V": np.asarray(wv)}
    q, k, v = x @ wq, x @ wk, x @ wv
    for i in range(4):
        out |= {f"query_{i + 1}": q[i : i + 1], f"key_{i + 1}": k[i : i + 1], f"value_{i + 1}": v[i : i + 1]}
    out["scores_1"] = (k @ q[0]).reshape(4, 1, 1)
    scores = q @ k.T
    weights = softmax(scores / np.sqrt(k.shape[-1]))
    out["weights_1"] = weights[0]
    out["attention_1"] = (weights[0] @ v).reshape(1, 4)
    out |= {"embeddings": x, "queries": q, "keys": k, "values": v, "scores": scores, "weights": weights}
    out["attention"] = weights @ v
    out["attention_sum"] = weights @ v
    out |= {"X": x.astype(np.float64), "Wq": np.asarray(wq, np.float64), "Wk": np.asarray(wk, np.float64),
            "Wv": np.asarray(wv, np.float64)}
    out["attention_np"] = weights @ v
    return out


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _scaled(scores, keys):
    return _f(scores) / np.sqrt(np.shape(keys)[-1])


# --- part 1: word by word (word 1) -------------------------------------------------------


def ref_stack(word_1, word_2, word_3, word_4, **_):
    return {"word_emb_stack": np.stack([_f(w)[0] for w in (word_1, word_2, word_3, word_4)])[np.newaxis]}


def _per_word(W_Q, W_K, W_V, swap=False, product=np.matmul, **words):
    out = {}
    for i in range(1, 5):
        w = _f(words[f"word_{i}"])
        q, k = product(w, _f(W_Q)), product(w, _f(W_K))
        if swap:
            q, k = k, q
        out |= {f"query_{i}": q, f"key_{i}": k, f"value_{i}": product(w, _f(W_V))}
    return out


def ref_qkv_words(**inp):
    return _per_word(**{k: v for k, v in inp.items() if k in ("W_Q", "W_K", "W_V") or k.startswith("word_")})


def _keys_of(inp):
    return np.concatenate([_f(inp[f"key_{j}"]) for j in range(1, 5)])


def ref_scores_1(query_1, **inp):
    return {"scores_1": (_keys_of(inp) @ _f(query_1)[0]).reshape(4, 1, 1)}


def _weights_1(scores_1, key_1, scale=None, **_):
    s = _f(scores_1).reshape(4)
    return softmax(s / (np.sqrt(np.shape(key_1)[-1]) if scale is None else scale))


def ref_weights_1(**inp):
    return {"weights_1": _weights_1(**inp)}


def _values_of(inp):
    return np.concatenate([_f(inp[f"value_{j}"]) for j in range(1, 5)])


def ref_attention_1(weights_1, **inp):
    return {"attention_1": (_f(weights_1) @ _values_of(inp)).reshape(1, 4)}


# --- part 2: matrix form -----------------------------------------------------------------


def ref_qkv(word_emb_stack, W_Q, W_K, W_V, **_):
    x = _f(word_emb_stack)[0]
    return {"embeddings": x, "queries": x @ _f(W_Q), "keys": x @ _f(W_K), "values": x @ _f(W_V)}


def ref_scores(queries, keys, **_):
    return {"scores": _f(queries) @ _f(keys).T}


# wrong weight matrices, shared by the weights, attention and NumPy exercises: functions of the
# raw scores and d_k
WRONG_WEIGHTS = {
    "missing_scale": lambda s, d: softmax(s),
    "scale_by_d": lambda s, d: softmax(s / d),
    "softmax_wrong_axis": lambda s, d: softmax(s / np.sqrt(d), axis=0),
    "global_softmax": lambda s, d: global_softmax(s / np.sqrt(d)),
    "no_softmax": lambda s, d: s / np.sqrt(d),
}


def ref_weights(scores, keys, **_):
    return {"weights": softmax(_scaled(scores, keys))}


def _weights_variant(code):
    return lambda scores, keys, **_: {"weights": WRONG_WEIGHTS[code](_f(scores), np.shape(keys)[-1])}


def ref_attention(weights, values, **_):
    return {"attention": _f(weights) @ _f(values)}


def _attention_variant(code, name="attention"):
    return lambda scores, keys, values, **_: {name: WRONG_WEIGHTS[code](_f(scores), np.shape(keys)[-1]) @ _f(values)}


def ref_attention_sum(weights, values, **_):
    return {"attention_sum": _f(weights) @ _f(values)}


def ref_attention_np(X, Wq, Wk, Wv, **_):
    q, k, v = X @ Wq, X @ Wk, X @ Wv
    return {"attention_np": softmax(q @ k.T / np.sqrt(k.shape[-1])) @ v}


def _np_variant(code):
    def variant(X, Wq, Wk, Wv, **_):
        q, k, v = X @ Wq, X @ Wk, X @ Wv
        return {"attention_np": WRONG_WEIGHTS[code](q @ k.T, k.shape[-1]) @ v}

    return variant


def _np_no_keepdim(X, Wq, Wk, Wv, **_):
    q, k, v = X @ Wq, X @ Wk, X @ Wv
    s = q @ k.T / np.sqrt(k.shape[-1])
    e = np.exp(s - s.max())
    return {"attention_np": (e / e.sum(axis=-1)) @ v}


# --- part 4: a function, checked on random inputs ----------------------------------------


def fn_inputs(rng: np.random.Generator | None = None) -> dict:
    if rng is None:
        x = WORDS.astype(np.float64)
        return {"queries": x @ W_Q, "keys": x @ W_K, "values": x @ W_V}
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
    def value(ex_id, title, answers, reference, independent=(), **kw):
        kw.setdefault("framework", "tensorflow")
        return Exercise(ex_id, notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                        inputs=upstream_of(world, answers[0], independent), **kw)

    words = tuple(f"word_{i}" for i in range(1, 5))
    per_word = tuple(f"{kind}_{i}" for i in range(1, 5) for kind in ("query", "key", "value"))
    return [
        value("04.stack", "The stacked word embeddings", ("word_emb_stack",), ref_stack, reads=words),
        value("04.qkv_words", "Query, key and value of every word", per_word, ref_qkv_words,
              reads=(*words, "W_Q", "W_K", "W_V"),
              mistakes={
                  "swapped_projections": lambda **i: _per_word(**{k: v for k, v in i.items() if k in (
                      "W_Q", "W_K", "W_V") or k.startswith("word_")}, swap=True),
                  "elementwise_product": lambda **i: _per_word(**{k: v for k, v in i.items() if k in (
                      "W_Q", "W_K", "W_V") or k.startswith("word_")}, product=np.multiply),
              },
              hints={
                  "elementwise_product": "You multiplied element by element (`*`), which broadcasts a (1, 4) "
                  "word against a (4, 4) matrix into a (4, 4) result. A projection is a matrix product: "
                  "tf.matmul(word_1, W_Q) (or word_1 @ W_Q), shape (1, 4).",
              }),
        value("04.scores_1", "The scores of word 1", ("scores_1",), ref_scores_1,
              reads=("query_1", "key_1", "key_2", "key_3", "key_4"),
              mistakes={
                  "elementwise_product": lambda query_1, **i: {
                      "scores_1": (_f(query_1)[0] * _keys_of(i))[:, np.newaxis, :]},
                  "transposed_scores": lambda **i: {"scores_1": np.stack(
                      [_f(i[f"query_{j}"])[0] @ _f(i["key_1"])[0] for j in range(1, 5)]).reshape(4, 1, 1)},
              },
              hints={
                  "elementwise_product": "You multiplied query_1 and the keys element by element, so each "
                  "score is 4 numbers. A score is one dot product: tf.matmul(query_1, key_j, transpose_b=True), "
                  "shape (1, 1).",
                  "transposed_scores": "You compared key_1 with every query. Word 1's scores are query_1 "
                  "against every key: tf.matmul(query_1, key_j, transpose_b=True) for j = 1 … 4.",
              }),
        value("04.weights_1", "The weights of word 1", ("weights_1",), ref_weights_1, reads=("scores_1", "key_1"),
              mistakes={
                  "missing_scale": lambda **i: {"weights_1": _weights_1(**i, scale=1.0)},
                  "scale_by_d": lambda **i: {"weights_1": _weights_1(**i, scale=float(np.shape(i["key_1"])[-1]))},
                  "no_softmax": lambda scores_1, key_1, **_: {"weights_1": _scaled(_f(scores_1).reshape(4), key_1)},
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
              dtype="float", **TIGHT),
        value("04.attention_1", "The attention output of word 1", ("attention_1",), ref_attention_1,
              reads=("weights_1", "value_1", "value_2", "value_3", "value_4"),
              mistakes={
                  "no_softmax": lambda scores_1, key_1, **i: {
                      "attention_1": (_scaled(_f(scores_1).reshape(4), key_1) @ _values_of(i)).reshape(1, 4)},
                  "elementwise_product": lambda weights_1, **i: {
                      "attention_1": (_f(weights_1)[:, None] * _values_of(i)).sum(axis=1).reshape(1, 4)},
              },
              hints={
                  "no_softmax": NO_SOFTMAX_OUTPUTS,
                  "elementwise_product": "You added up each value's own entries, weighted. Output 1 is the sum "
                  "of the whole value vectors, each times its weight: weights_1[0] * v1 + … + weights_1[3] * v4.",
              },
              dtype="float", rtol=1e-5),
        value("04.qkv", "Queries, keys and values of all four words", ("embeddings", "queries", "keys", "values"),
              ref_qkv, reads=("word_emb_stack", "W_Q", "W_K", "W_V"),
              mistakes={
                  "swapped_projections": lambda **i: ref_qkv(**i) | {
                      "queries": ref_qkv(**i)["keys"], "keys": ref_qkv(**i)["queries"]},
                  "elementwise_product": lambda word_emb_stack, W_Q, W_K, W_V, **_: {
                      "embeddings": _f(word_emb_stack)[0], "queries": _f(word_emb_stack)[0] * _f(W_Q),
                      "keys": _f(word_emb_stack)[0] * _f(W_K), "values": _f(word_emb_stack)[0] * _f(W_V)},
              }),
        value("04.scores", "The score matrix", ("scores",), ref_scores, reads=("queries", "keys"),
              mistakes={
                  "transposed_scores": lambda queries, keys, **_: {"scores": _f(keys) @ _f(queries).T},
                  "elementwise_product": lambda queries, keys, **_: {"scores": _f(queries) * _f(keys)},
                  "elementwise_with_transpose": lambda queries, keys, **_: {"scores": _f(queries) * _f(keys).T},
                  "unexpected_scale": lambda queries, keys, **_: {"scores": _scaled(_f(queries) @ _f(keys).T, keys)},
              },
              hints={
                  "unexpected_scale": "You already divided by √d_k. Keep `scores` as the raw dot products, "
                  "as for word 1: the scaling comes in the next step, right before the softmax.",
                  "transposed_scores": "Row i of the scores must belong to query i: "
                  "tf.matmul(queries, keys, transpose_b=True). You have keys against queries.",
              }),
        value("04.weights", "The weight matrix", ("weights",), ref_weights, reads=("scores", "keys"),
              mistakes={code: _weights_variant(code) for code in WRONG_WEIGHTS},
              hints={"no_softmax": NO_SOFTMAX_WEIGHTS}, dtype="float", **TIGHT),
        value("04.attention", "The attention outputs of all four words", ("attention",), ref_attention,
              reads=("weights", "values"),
              mistakes={
                  **{code: _attention_variant(code) for code in WRONG_WEIGHTS},
                  "elementwise_product": lambda weights, values, **_: {"attention": _f(weights) * _f(values)},
                  "transposed_scores": lambda weights, values, **_: {"attention": _f(weights).T @ _f(values)},
              },
              hints={"no_softmax": NO_SOFTMAX_OUTPUTS,
                     "transposed_scores": "You used the transposed weights: row i of `weights` belongs to word i, "
                     "so the outputs are tf.matmul(weights, values)."},
              dtype="float", rtol=1e-5),
        value("04.attention_sum", "The outputs as explicit weighted sums", ("attention_sum",), ref_attention_sum,
              reads=("weights", "values"), independent=("attention",),
              mistakes={
                  "sum_wrong_axis": lambda weights, values, **_: {
                      "attention_sum": _f(weights).sum(axis=0)[:, np.newaxis] * _f(values)},
                  "elementwise_product": lambda weights, values, **_: {"attention_sum": _f(weights) * _f(values)},
                  "copied_answer": lambda attention, **_: {"attention_sum": _f(attention)},
              },
              hints={
                  "sum_wrong_axis": "You summed over the queries (axis 0). Output i adds up weights[i, j] * "
                  "value_j over the words j: keep axis 0, sum over axis 1.",
                  "elementwise_product": "You multiplied weights and values entry by entry and did not add "
                  "anything up. Output i is the sum over j of weights[i, j] times the whole value row j.",
                  "copied_answer": "You copied `attention`. This step writes the same outputs as explicit "
                  "weighted sums of the value rows, from `weights` and `values`.",
              },
              dtype="float", rtol=1e-5),
        value("04.numpy", "The NumPy cross-check", ("attention_np",), ref_attention_np,
              reads=("X", "Wq", "Wk", "Wv"), independent=("attention", "attention_sum", "weights", "scores",
                                                         "queries", "keys", "values"),
              framework="numpy",
              mistakes={
                  **{code: _np_variant(code) for code in ("missing_scale", "scale_by_d", "softmax_wrong_axis",
                                                          "global_softmax")},
                  "missing_keepdim": _np_no_keepdim,
                  "copied_answer": lambda attention, **_: {"attention_np": _f(attention)},
              },
              hints={
                  "softmax_wrong_axis": "Your softmax normalised each column. Sum the exponentials over "
                  "axis=-1 with keepdims=True, so each row is divided by its own sum.",
                  "copied_answer": "You converted TensorFlow's `attention` to NumPy. A cross-check must compute "
                  "the result again, independently: from X, Wq, Wk and Wv with NumPy operations only.",
              },
              rtol=1e-5),
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
