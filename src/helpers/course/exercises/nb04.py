"""Notebook 04 — attention from scratch in TensorFlow, with a NumPy cross-check.

Four 4-d integer words and three integer weight matrices, fixed to the values the original
printed (it draws the matrices with an unseeded ``tf.random.uniform``). First word 1's output
step by step, then all four in matrix form, scaled by √d_k with d_k = 4; a NumPy cross-check in
float64; then two functions, ``scaled_attention(q, k, v)`` and
``self_attention(x, w_query, w_key, w_value)``.

Everything before the softmax is int32 in TensorFlow, so the casts are part of the lesson: a
missing cast raises inside TensorFlow (the check reports the error and the line), an int32
tensor divided by a Python number silently gives float64 (the float steps ask for float32), and
weights cast to int32 become zeros (``weights_cast_to_int``).

The notebook's scores reach 85 / √4 = 42.5, so its softmax is almost one-hot: weights as small
as 1e-11 next to 0.9999995. At the default tolerances several wrong variants (e.g. the unscaled
softmax of word 1) agree with the reference to 1e-6, so the weight exercises compare with a
tight relative tolerance that float32 answers still meet. Fresh worlds use smaller integers (inputs
from -2 to 2, 0/1 weights), drawn again until no row of the softmax is almost one-hot, so that every
mistake shows.

In the notebook n = d_model = d_k = d_v = 4. The steps that divide by √d_k (word 1's weights, the
weight matrix, the NumPy cross-check) are replayed on worlds of other widths: d_model and d_k
differ from each other and from 4, so √d_model and a typed-in √4 show. The number of words stays
4 (the notebook names them one by one), so √n = 2 cannot be told from a typed-in 2: one code,
``fixed_scale``, whose hints name both causes. The other steps keep the notebook's shapes, which
their TO-DOs state. The NumPy step's worlds also have rows of scores at very different levels,
some above 710 (exp overflows without subtracting the maximum) and some more than 745 below the
largest score (one maximum for the whole matrix underflows them to 0/0).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..reference import (
    global_shift_float32,
    global_softmax,
    max_of_columns,
    max_without_keepdim,
    max_without_keepdim_float32,
    one_sum,
    projected_scores,
    scaled_scores,
    scaled_scores_float32,
    sigmoid,
    softmax,
    sums_without_keepdim,
)
from ..roles import ROLES, mix_ups
from ..spec import (
    Exercise,
    faint_loud_value,
    global_rounding_sign,
    global_shift_sign,
    large_scores,
    loud_token,
    more_rows,
    one_row,
    overflow_sign,
    register,
    rows_reversed,
    sum_overflow_hint,
    sum_overflow_sign,
    upstream_of,
    weights_zeroed_sign,
    zero_row,
)
from . import nb01

NOTEBOOK = "04_attention_from_scratch_tensorflow"
SEED = "003_9ffdeb4a97181e8e.txt"  # every number it prints must appear in the stored outputs

WORDS = np.array([[0, 1, 1, 2], [1, 0, 0, 2], [1, 1, 0, 2], [2, 1, 1, 1]])
# The original draws these with tf.random.uniform(..., dtype=tf.int32) without a seed; these are the
# matrices it printed, so its numbers can be reproduced.
W_QUERY = np.array([[1, 1, 0, 0], [0, 0, 2, 2], [1, 2, 2, 2], [0, 0, 2, 2]])
W_KEY = np.array([[1, 1, 0, 2], [1, 1, 2, 0], [2, 1, 0, 2], [0, 0, 0, 1]])
W_VALUE = np.array([[1, 2, 1, 1], [1, 2, 0, 1], [0, 0, 2, 0], [2, 1, 1, 2]])

TIGHT = {"rtol": 1e-5, "atol": 1e-12}  # weights down to 1e-12: compare them relative to their size
N_WORDS = 4
WORDS_NAMES = tuple(f"word_{i}" for i in range(1, N_WORDS + 1))


BIG = 1000  # the first feature of every word in the NumPy step's worlds (see _levels)


WIDE = 170  # the spread of the wide rows of the NumPy step's scores, per unit of √d_k (see _levels)


def _levels(words, wq, wk, wv, d_k):
    """Rows of scores at very different levels, and rows of very different spreads.

    Levels: every word's first feature is BIG and reaches only the first entry of every key (= BIG), never a
    query or a value; so row i of the scores is shifted by BIG times the first entry of query i, which a
    softmax ignores and a careless exponential does not.

    Spreads: the second feature of the words is 0, 0, 1 and 5 in some order, c_i; it becomes the second
    entry of the queries (c_i) and of the keys (c_j · WIDE · √d_k) alone, so row i of the scaled scores gains
    c_i · c_j · WIDE: nothing in two rows (which stay soft), a spread of 850 in one (subtracting the row's
    minimum overflows there, its mean does not: the mean lies 595 below the maximum) and of 4 250 in another
    (subtracting the mean overflows too)."""
    words, wq, wk, wv = words.copy(), wq.copy(), wk.copy(), wv.copy()
    words[:, 0] = BIG
    wq[0, :], wv[0, :] = 0, 0
    wk[0, :], wk[:, 0] = 0, 0
    wk[0, 0] = 1
    wide = np.array([0, 0, 1, 5])[np.argsort(np.sum(words[:, 2:], axis=1) + np.arange(4) / 10)]
    if wide[-1] == 5:  # never the last word's key on top: a shift by the last column's score overflows too
        wide[[0, -1]] = wide[[-1, 0]]
    words[:, 1] = wide
    wq[1, :], wq[:, 1], wv[1, :] = 0, 0, 0
    wq[1, 1] = 1
    wk[1, :], wk[:, 1] = 0, 0
    wk[1, 1] = round(WIDE * np.sqrt(d_k))
    return words, wq, wk, wv, wide


def _extreme(s, wide) -> bool:
    """exp overflows on some scaled score, some row lies wholly more than 745 below the largest, and the rows
    without a spread (c_i = 0) are soft."""
    soft = softmax(s[wide == 0])
    return bool(s.max() > 720 and (s.max(axis=-1) < s.max() - 760).any() and soft.max() < 0.99)


def world(rng: np.random.Generator | None = None, widths: bool = False, levels: bool = False,
          d_v: int | None = None, signed: bool = True, d_k: int | None = None) -> dict:
    """Every name of the notebook, in its order (``rng=None``: the notebook's own numbers).

    ``widths``: d_model, d_k and d_v drawn different from each other and from n = 4 (d_model of 3 or more
    with ``levels``); ``levels``: rows of scores at very different levels and spreads (see :func:`_levels`);
    ``d_v``: the values' width, else 4; ``d_k`` (with ``widths``): the keys' width, else drawn; ``signed``: words
    from -2 to 2 (else from 0 to 2, as in the notebook)."""
    if rng is None:
        words, wq, wk, wv = WORDS, W_QUERY, W_KEY, W_VALUE
    else:
        d_k_given = d_k
        d_model, d_k, d_v = (4, 4, d_v or 4)
        if widths:
            d_k = d_k_given or int(rng.choice([3, 5, 6]))  # not 2: √2 and 2 must differ from d_k and from √4
            d_model = int(rng.choice([d for d in ((3, 5, 6) if levels else (2, 3, 5, 6)) if d != d_k]))
            d_v = int(rng.choice([d for d in (2, 3, 5, 6, 7) if d not in (d_k, d_model)]))  # √d_v shows too
        while True:  # weights that blend: no row of the softmax (almost) one-hot
            # words of both signs (except in the NumPy step's worlds, built on large positive levels): an abs(),
            # a ReLU or a clip at 0 slipped into a step changes its numbers
            words = rng.integers(-2 if signed and not levels else 0, 3, size=(4, d_model))
            wq, wk = (rng.integers(0, 2, size=(d_model, d_k)) for _ in range(2))
            wv = rng.integers(0, 2, size=(d_model, d_v))
            if levels:
                words, wq, wk, wv, wide = _levels(words, wq, wk, wv, d_k)
            s = (words @ wq) @ (words @ wk).T / np.sqrt(d_k)
            if _extreme(s, wide) if levels else softmax(s).max() < 0.99:
                break
    return _world_from(words, wq, wk, wv)


def _world_from(words, wq, wk, wv) -> dict:
    """Every name of the notebook, computed from its words and weights (4 words, or more: `word_1` … `word_4` are
    then the first four)."""
    x = np.asarray(words, dtype=np.int64)
    out: dict = {f"word_{i + 1}": x[i : i + 1] for i in range(4)}
    out["word_emb_stack"] = x[np.newaxis]
    out |= {"w_query": np.asarray(wq), "w_key": np.asarray(wk), "w_value": np.asarray(wv)}
    q, k, v = x @ wq, x @ wk, x @ wv
    for i in range(4):
        out |= {f"query_{i + 1}": q[i : i + 1], f"key_{i + 1}": k[i : i + 1], f"value_{i + 1}": v[i : i + 1]}
    out["attn_scores_1"] = (k @ q[0]).reshape(len(k), 1, 1)
    scores = q @ k.T
    weights = softmax(scores / np.sqrt(k.shape[-1]))
    out["attn_weights_1"] = weights[0]
    out["d_k"] = np.asarray(k.shape[-1])  # step 4 sets d_k from key_1: a later step may use it
    out["output_1"] = weights[0:1] @ v
    out |= {"x": x, "queries": q, "keys": k, "values": v, "attn_scores": scores, "attn_weights": weights}
    out["outputs"] = weights @ v
    out["outputs_sum"] = weights @ v
    out |= {"x_np": x.astype(np.float64), "w_query_np": np.asarray(wq, np.float64),
            "w_key_np": np.asarray(wk, np.float64), "w_value_np": np.asarray(wv, np.float64)}
    out["outputs_np"] = weights @ v
    return out


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _sqrt_dk(keys) -> float:
    return float(np.sqrt(np.shape(keys)[-1]))


# --- part 1: word by word (word 1) -------------------------------------------------------


def _words(inp) -> list[np.ndarray]:
    return [_f(inp[name]) for name in WORDS_NAMES]


def ref_stack(**inp):
    return {"word_emb_stack": np.stack([w[0] for w in _words(inp)])[np.newaxis]}


STACK_MISTAKES = {
    # tf.stack(words) — axis 0, the default: four "sentences" of one word each
    "stack_wrong_axis": lambda **i: {"word_emb_stack": np.stack(_words(i), axis=0)},
    # tf.concat(words, axis=0): the words' own rows joined, no sentence axis
    "concat_instead_of_stack": lambda **i: {"word_emb_stack": np.concatenate(_words(i), axis=0)},
    # tf.stack(words, axis=2) or axis=-1: (1, d_model, 4), word j in column j
    "stack_last_axis": lambda **i: {"word_emb_stack": np.stack(_words(i), axis=2)},
}


def _per_word(inp, swap=False, product=np.matmul):
    out = {}
    wq, wk, wv = _f(inp["w_query"]), _f(inp["w_key"]), _f(inp["w_value"])
    for i in range(1, 5):
        w = _f(inp[f"word_{i}"])
        q, k = product(w, wq), product(w, wk)
        if swap:
            q, k = k, q
        out |= {f"query_{i}": q, f"key_{i}": k, f"value_{i}": product(w, wv)}
    return out


def ref_qkv_words(**inp):
    return _per_word(inp)


def _word_made_with(i):
    """Word i's query, key and value, each made with the matrix of the role ``made_with`` gives it (the other
    words right)."""
    def made(made_with, **inp):
        w = {r: _f(inp[f"w_{r}"]) for r in ROLES}
        return _per_word(inp) | {f"{r}_{i}": _f(inp[f"word_{i}"]) @ w[made_with[r]] for r in ROLES}

    return made


# one word's query, key or value made with another role's matrix: a line of the twelve copied without changing it
QKV_WORDS_MIX_UPS = [mix_ups(_word_made_with(i), {r: (f"{r}_{i}", f"{r}_{i} = word_{i} @ w_{r}") for r in ROLES},
                             swaps=False, tag=f"_{i}") for i in range(1, 5)]


def _keys_of(inp):
    return np.concatenate([_f(inp[f"key_{j}"]) for j in range(1, 5)])


def _queries_of(inp):
    return np.concatenate([_f(inp[f"query_{j}"]) for j in range(1, 5)])


def ref_scores_1(query_1, **inp):
    return {"attn_scores_1": (_keys_of(inp) @ _f(query_1)[0]).reshape(4, 1, 1)}


SCORES_1_MISTAKES = {
    # query_1 * key_j: four (1, 4) rows of products, stacked
    "elementwise_product": lambda query_1, **i: {"attn_scores_1": (_f(query_1)[0] * _keys_of(i))[:, np.newaxis, :]},
    # key_1 against every query
    "transposed_scores": lambda **i: {"attn_scores_1": (_queries_of(i) @ _f(i["key_1"])[0]).reshape(4, 1, 1)},
    # tf.matmul(query_1, key_j, transpose_a=True): a (4, 4) outer product per word
    "transposed_first_operand": lambda query_1, **i: {"attn_scores_1": np.stack(
        [np.outer(_f(query_1)[0], key) for key in _keys_of(i)])},
    # tf.stack(..., axis=1): (1, 4, 1)
    "stack_wrong_axis": lambda query_1, **i: {"attn_scores_1": (_keys_of(i) @ _f(query_1)[0]).reshape(1, 4, 1)},
    # tf.reduce_sum(query_1 * key_j) without keepdims: right numbers, shape (4,)
    "missing_keepdim": lambda query_1, **i: {"attn_scores_1": _keys_of(i) @ _f(query_1)[0]},
    # tf.concat of the (1, 1) scores: (4, 1)
    "concat_instead_of_stack": lambda query_1, **i: {"attn_scores_1": (_keys_of(i) @ _f(query_1)[0]).reshape(4, 1)},
    # query_1 against the values instead of the keys
    "swapped_projections": lambda query_1, **i: {"attn_scores_1": (_values_of(i) @ _f(query_1)[0]).reshape(4, 1, 1)},
}


def _flat_scores_1(attn_scores_1) -> np.ndarray:
    return _f(attn_scores_1).reshape(4)


def ref_weights_1(attn_scores_1, key_1, **_):
    return {"attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / _sqrt_dk(key_1))}


def _log_softmax_float32(s) -> np.ndarray:
    """tf.nn.log_softmax of float32 scores, as float32 computes it (its log of a sum near 1 keeps float32's spacing,
    which the step's tolerance near 0 would not forgive a float64 version)."""
    s32 = np.asarray(s, dtype=np.float32)
    shifted = s32 - s32.max(axis=-1, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))).astype(np.float64)


WEIGHTS_1_MISTAKES = {
    "missing_scale": lambda attn_scores_1, **_: {"attn_weights_1": softmax(_flat_scores_1(attn_scores_1))},
    "scale_by_d": lambda attn_scores_1, key_1, **_: {
        "attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / np.shape(key_1)[-1])},
    # tf.math.sqrt(4.0) typed in, or the square root of the number of scores (4)
    "fixed_scale": lambda attn_scores_1, **_: {"attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / 2.0)},
    # the width of a word instead of a key's
    "scale_by_d_model": lambda attn_scores_1, word_1, **_: {
        "attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / np.sqrt(np.shape(word_1)[-1]))},
    "no_softmax": lambda attn_scores_1, key_1, **_: {"attn_weights_1": _flat_scores_1(attn_scores_1) / _sqrt_dk(key_1)},
    "scale_after_softmax": lambda attn_scores_1, key_1, **_: {
        "attn_weights_1": softmax(_flat_scores_1(attn_scores_1)) / _sqrt_dk(key_1)},
    # the width of a value (d_v) instead of a key's
    "scale_by_d_v": lambda attn_scores_1, value_1, **_: {
        "attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / np.sqrt(np.shape(value_1)[-1]))},
    # s / d_k ** 1/2 = s / d_k / 2
    "power_precedence": lambda attn_scores_1, key_1, **_: {
        "attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / (2.0 * np.shape(key_1)[-1]))},
    # s / (d_k ** 1/2) = s / (d_k / 2)
    "power_precedence:grouped": lambda attn_scores_1, key_1, **_: {
        "attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / (np.shape(key_1)[-1] / 2.0))},
    # tf.pow(2.0, s): e ** (s ln 2)
    "softmax_base_two": lambda attn_scores_1, key_1, **_: {
        "attn_weights_1": softmax(_flat_scores_1(attn_scores_1) / _sqrt_dk(key_1) * np.log(2.0))},
    "log_softmax_as_weights": lambda attn_scores_1, key_1, **_: {
        "attn_weights_1": _log_softmax_float32(_flat_scores_1(attn_scores_1) / _sqrt_dk(key_1))},
    "sigmoid_as_softmax": lambda attn_scores_1, key_1, **_: {
        "attn_weights_1": sigmoid(_flat_scores_1(attn_scores_1) / _sqrt_dk(key_1))},
    # no tf.squeeze: the softmax runs over the last axis of a (4, 1, 1) tensor, of length 1
    "missing_squeeze": lambda **_: {"attn_weights_1": np.ones((4, 1, 1))},
    # tf.squeeze(..., axis=1) or axis=2: (4, 1), and the softmax runs over the axis of length 1 left
    "softmax_wrong_axis": lambda **_: {"attn_weights_1": np.ones((4, 1))},
}


def _to_int(weights) -> np.ndarray:
    """tf.cast(weights, tf.int32) on float32 weights: truncated, so all but weights of exactly 1 become 0."""
    return np.trunc(np.asarray(weights, dtype=np.float32)).astype(np.float64)


def _values_of(inp):
    return np.concatenate([_f(inp[f"value_{j}"]) for j in range(1, 5)])


def ref_output_1(attn_weights_1, **inp):
    return {"output_1": (_f(attn_weights_1) @ _values_of(inp)).reshape(1, 4)}


OUTPUT_1_MISTAKES = {
    # the scaled scores used as weights
    "no_softmax": lambda attn_scores_1, key_1, **i: {
        "output_1": (_flat_scores_1(attn_scores_1) / _sqrt_dk(key_1) @ _values_of(i)).reshape(1, 4)},
    # attn_weights_1 * values (the (4, 4) value rows): weight j lined up with feature j, nothing added up
    "elementwise_product": lambda attn_weights_1, **i: {"output_1": _f(attn_weights_1)[None, :] * _values_of(i)},
    # ... then summed over the words: weight j times the sum of feature j
    "broadcast_wrong_axis": lambda attn_weights_1, **i: {
        "output_1": (_f(attn_weights_1)[None, :] * _values_of(i)).sum(axis=0, keepdims=True)},
    # right numbers, but the row axis summed away: shape (4,)
    "missing_keepdim": lambda attn_weights_1, **i: {"output_1": _f(attn_weights_1) @ _values_of(i)},
    # tf.cast(attn_weights_1, tf.int32): every weight below 1 becomes 0
    "weights_cast_to_int": lambda attn_weights_1, **i: {
        "output_1": (_to_int(attn_weights_1) @ _values_of(i)).reshape(1, 4)},
    # value_4 itself: word 1's weights are almost one-hot on word 4 in the notebook
    "copied_answer": lambda value_4, **_: {"output_1": _f(value_4)},
    # the raw scores of step 3 as the weights
    "scores_as_weights": lambda attn_scores_1, **i: {
        "output_1": (_flat_scores_1(attn_scores_1) @ _values_of(i)).reshape(1, 4)},
    # the weighted sum of the keys
    "swapped_projections": lambda attn_weights_1, **i: {"output_1": (_f(attn_weights_1) @ _keys_of(i)).reshape(1, 4)},
}


# --- part 2: matrix form -----------------------------------------------------------------


def ref_qkv(word_emb_stack, w_query, w_key, w_value, **_):
    x = _f(word_emb_stack)[0]
    return {"x": x, "queries": x @ _f(w_query), "keys": x @ _f(w_key), "values": x @ _f(w_value)}


def _qkv_swapped(**i):
    ref = ref_qkv(**i)
    return ref | {"queries": ref["keys"], "keys": ref["queries"]}


def _qkv_made_with(made_with, word_emb_stack, w_query, w_key, w_value, **_):
    x, w = _f(word_emb_stack)[0], {"query": _f(w_query), "key": _f(w_key), "value": _f(w_value)}
    return {"x": x, **{f"{_PLURAL[r]}": x @ w[made_with[r]] for r in ROLES}}


_PLURAL = {"query": "queries", "key": "keys", "value": "values"}
QKV_MIX_UPS = mix_ups(_qkv_made_with, {r: (_PLURAL[r], f"{_PLURAL[r]} = x @ w_{r}") for r in ROLES},
                      skip=("swapped_projections:query_key",))


def _qkv_elementwise(word_emb_stack, w_query, w_key, w_value, **_):
    x = _f(word_emb_stack)[0]
    return {"x": x, "queries": x * _f(w_query), "keys": x * _f(w_key), "values": x * _f(w_value)}


def _qkv_unsqueezed(word_emb_stack, w_query, w_key, w_value, **_):
    x = _f(word_emb_stack)  # (1, 4, 4): tf.matmul broadcasts over the leading axis
    return {"x": x, "queries": x @ _f(w_query), "keys": x @ _f(w_key), "values": x @ _f(w_value)}


def _qkv_reversed(word_emb_stack, w_query, w_key, w_value, **_):
    x = _f(word_emb_stack)[0]
    return {"x": x, "queries": _f(w_query) @ x, "keys": _f(w_key) @ x, "values": _f(w_value) @ x}


def ref_scores(queries, keys, **_):
    return {"attn_scores": _f(queries) @ _f(keys).T}


SCORES_MISTAKES = {
    "transposed_scores": lambda queries, keys, **_: {"attn_scores": _f(keys) @ _f(queries).T},
    "elementwise_product": lambda queries, keys, **_: {"attn_scores": _f(queries) * _f(keys)},
    "elementwise_with_transpose": lambda queries, keys, **_: {"attn_scores": _f(queries) * _f(keys).T},
    "unexpected_scale": lambda queries, keys, **_: {"attn_scores": _f(queries) @ _f(keys).T / _sqrt_dk(keys)},
    "keys_not_transposed": lambda queries, keys, **_: {"attn_scores": _f(queries) @ _f(keys)},
    "transposed_first_operand": lambda queries, keys, **_: {"attn_scores": _f(queries).T @ _f(keys)},
    # step 2's query_1 … query_4 or key_1 … key_4 stacked again (they come from another draw in the replays)
    "copied_answer": lambda keys, **i: {"attn_scores": _stacked(i, "query") @ _f(keys).T},
    "copied_answer:keys": lambda queries, **i: {"attn_scores": _f(queries) @ _stacked(i, "key").T},
    "copied_answer:both": lambda **i: {"attn_scores": _stacked(i, "query") @ _stacked(i, "key").T},
}


def _stacked(inputs: dict, kind: str) -> np.ndarray:
    return np.concatenate([_f(inputs[f"{kind}_{j}"]) for j in range(1, 5)])

# wrong weight matrices, shared by the weight, output and NumPy exercises: functions of the raw
# scores and d_k
WRONG_WEIGHTS = {
    "missing_scale": lambda s, d: softmax(s),
    "scale_by_d": lambda s, d: softmax(s / d),
    "softmax_wrong_axis": lambda s, d: softmax(s / np.sqrt(d), axis=0),
    "global_softmax": lambda s, d: global_softmax(s / np.sqrt(d)),
    "no_softmax": lambda s, d: s / np.sqrt(d),
    "scale_after_softmax": lambda s, d: softmax(s) / np.sqrt(d),
    "power_precedence": lambda s, d: softmax(s / (2.0 * d)),  # s / d_k ** 1/2 = s / d_k / 2
    "power_precedence:grouped": lambda s, d: softmax(s / (d / 2.0)),  # s / (d_k ** 1/2) = s / (d_k / 2)
}


def _no_keepdims(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())  # one shift for all: the ratios are those of exp(s) itself
    return e / e.sum(axis=-1)  # (n, n) / (n,): entry (i, j) divided by row j's sum


def ref_weights(attn_scores, keys, **_):
    return {"attn_weights": softmax(_f(attn_scores) / _sqrt_dk(keys))}


def _weights_variant(code):
    return lambda attn_scores, keys, **_: {"attn_weights": WRONG_WEIGHTS[code](_f(attn_scores), np.shape(keys)[-1])}


WEIGHTS_MISTAKES = {
    **{code: _weights_variant(code) for code in WRONG_WEIGHTS},
    "missing_keepdim": lambda attn_scores, keys, **_: {"attn_weights": _no_keepdims(_f(attn_scores) / _sqrt_dk(keys))},
    "softmax_base_two": lambda attn_scores, keys, **_: {  # tf.pow(2.0, s): e ** (s ln 2)
        "attn_weights": softmax(_f(attn_scores) / _sqrt_dk(keys) * np.log(2.0))},
    "log_softmax_as_weights": lambda attn_scores, keys, **_: {
        "attn_weights": _log_softmax_float32(_f(attn_scores) / _sqrt_dk(keys))},
    "sigmoid_as_softmax": lambda attn_scores, keys, **_: {
        "attn_weights": sigmoid(_f(attn_scores) / _sqrt_dk(keys))},
    "transposed_scores": lambda attn_scores, keys, **_: {"attn_weights": softmax(_f(attn_scores).T / _sqrt_dk(keys))},
    "max_without_keepdim": lambda attn_scores, keys, **_: {
        "attn_weights": max_without_keepdim(_f(attn_scores) / _sqrt_dk(keys))},
    "max_wrong_axis": lambda attn_scores, keys, **_: {
        "attn_weights": max_of_columns(_f(attn_scores) / _sqrt_dk(keys))},
    "max_without_keepdim:float32": lambda attn_scores, keys, **_: {
        "attn_weights": max_without_keepdim_float32(_f(attn_scores) / _sqrt_dk(keys))},
    # √d_v: values.shape[-1]
    "scale_by_d_v": lambda attn_scores, values, **_: {
        "attn_weights": softmax(_f(attn_scores) / np.sqrt(np.shape(values)[-1]))},
    # √4 typed in, or √n (keys.shape[0], the number of words: 4 in every world)
    "fixed_scale": lambda attn_scores, **_: {"attn_weights": softmax(_f(attn_scores) / 2.0)},
    # √n, the number of words (keys.shape[0]): √4 = 2 on a sentence of 4 words, told apart on one of 6
    "fixed_scale:n": lambda attn_scores, keys, **_: {"attn_weights": softmax(_f(attn_scores) / np.sqrt(len(keys)))},
    # √d_model: x.shape[1], or the rows of w_key
    "scale_by_d_model": lambda attn_scores, x, **_: {
        "attn_weights": softmax(_f(attn_scores) / np.sqrt(np.shape(x)[-1]))},
    # √tf.size(keys): every entry of the keys counted, n · d_k
    "scale_by_size": lambda attn_scores, keys, **_: {"attn_weights": softmax(_f(attn_scores) / np.sqrt(np.size(keys)))},
}


def ref_outputs(attn_weights, values, **_):
    return {"outputs": _f(attn_weights) @ _f(values)}


def _outputs_variant(code):
    return lambda attn_scores, keys, values, **_: {
        "outputs": WRONG_WEIGHTS[code](_f(attn_scores), np.shape(keys)[-1]) @ _f(values)}


OUTPUTS_MISTAKES = {
    **{code: _outputs_variant(code) for code in ("missing_scale", "softmax_wrong_axis", "no_softmax")},
    "elementwise_product": lambda attn_weights, values, **_: {"outputs": _f(attn_weights) * _f(values)},
    "transposed_scores": lambda attn_weights, values, **_: {"outputs": _f(attn_weights).T @ _f(values)},
    "weights_cast_to_int": lambda attn_weights, values, **_: {"outputs": _to_int(attn_weights) @ _f(values)},
    "product_order_reversed": lambda attn_weights, values, **_: {"outputs": _f(values) @ _f(attn_weights)},
    "values_transposed": lambda attn_weights, values, **_: {"outputs": _f(attn_weights) @ _f(values).T},
}


def ref_outputs_sum(attn_weights, values, **_):
    return {"outputs_sum": _f(attn_weights) @ _f(values)}


OUTPUTS_SUM_MISTAKES = {
    # weights[:, :, None] * values[None], summed over axis 0 (the queries)
    "sum_wrong_axis": lambda attn_weights, values, **_: {
        "outputs_sum": _f(attn_weights).sum(axis=0)[:, np.newaxis] * _f(values)},
    # weights[:, None, :] * values[None]: weight (i, j) lined up with feature j, summed over the words
    "broadcast_wrong_axis": lambda attn_weights, values, **_: {
        "outputs_sum": _f(attn_weights) * _f(values).sum(axis=0)[np.newaxis, :]},
    "elementwise_product": lambda attn_weights, values, **_: {"outputs_sum": _f(attn_weights) * _f(values)},
    # attn_weights[j, i] in the loop
    "transposed_scores": lambda attn_weights, values, **_: {"outputs_sum": _f(attn_weights).T @ _f(values)},
    "weights_cast_to_int": lambda attn_weights, values, **_: {
        "outputs_sum": _to_int(attn_weights) @ _f(values)},
    "copied_answer": lambda outputs, **_: {"outputs_sum": _f(outputs)},
    # weights[:, :, None] * values[None], summed over axis 2 (the features): entry (i, j) = w_ij · Σ value_j
    "sum_over_features": lambda attn_weights, values, **_: {
        "outputs_sum": _f(attn_weights) * _f(values).sum(axis=1)[np.newaxis, :]},
}


# --- part 3: NumPy ------------------------------------------------------------------------


def _np_qkv(x_np, w_query_np, w_key_np, w_value_np):
    x = _f(x_np)
    return x @ _f(w_query_np), x @ _f(w_key_np), x @ _f(w_value_np)


def _np_scaled_scores(x_np, w_query_np, w_key_np, **_):
    q, k = _f(x_np) @ _f(w_query_np), _f(x_np) @ _f(w_key_np)
    return q @ k.T / np.sqrt(k.shape[-1])


def ref_outputs_np(x_np, w_query_np, w_key_np, w_value_np, **_):
    q, k, v = _np_qkv(x_np, w_query_np, w_key_np, w_value_np)
    return {"outputs_np": softmax(q @ k.T / np.sqrt(k.shape[-1])) @ v}


def _np_variant(code):
    def variant(x_np, w_query_np, w_key_np, w_value_np, **_):
        q, k, v = _np_qkv(x_np, w_query_np, w_key_np, w_value_np)
        return {"outputs_np": WRONG_WEIGHTS[code](q @ k.T, k.shape[-1]) @ v}

    return variant


def _np_softmax_variant(normalise):
    """A hand-written softmax gone wrong: ``normalise(s)`` of the scaled scores, then times the values."""
    def variant(x_np, w_query_np, w_key_np, w_value_np, **_):
        q, k, v = _np_qkv(x_np, w_query_np, w_key_np, w_value_np)
        return {"outputs_np": normalise(q @ k.T / np.sqrt(k.shape[-1])) @ v}

    return variant


def _row_max(s):
    return s.max(axis=-1, keepdims=True)


def _np_by_n(answer, inputs) -> bool:
    """A sign of ``scale_by_n`` in the NumPy cross-check: the scores divided by √n, the number of words (the first
    axis of the keys), where the example's n and d_k are both 4."""
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    k = _np_qkv(inputs["x_np"], inputs["w_query_np"], inputs["w_key_np"], inputs["w_value_np"])[1]
    if k.shape[0] == k.shape[-1]:  # (√n is √d_k here: nothing to tell)
        return False
    wrong = _np_scale_variant(lambda x, k: np.sqrt(k.shape[0]))(**inputs)["outputs_np"]
    right = np.asarray(ref_outputs_np(**inputs)["outputs_np"], dtype=np.float64)
    if np.allclose(wrong, right, rtol=1e-4, atol=1e-7):  # (weights so sharp that the scale does not matter)
        return False
    return got.shape == wrong.shape and bool(np.allclose(got, wrong, rtol=1e-6, atol=1e-9))


def _np_scale_variant(scale):
    """The right softmax of the scores divided by ``scale(x_np, k)`` instead of √d_k."""
    def variant(x_np, w_query_np, w_key_np, w_value_np, **_):
        q, k, v = _np_qkv(x_np, w_query_np, w_key_np, w_value_np)
        return {"outputs_np": softmax(q @ k.T / scale(_f(x_np), k)) @ v}

    return variant


def _np_scores_variant(product):
    def variant(x_np, w_query_np, w_key_np, w_value_np, **_):
        q, k, v = _np_qkv(x_np, w_query_np, w_key_np, w_value_np)
        return {"outputs_np": softmax(product(q, k) / np.sqrt(k.shape[-1])) @ v}

    return variant


def _np_weights(x_np, w_query_np, w_key_np):
    q, k = _f(x_np) @ _f(w_query_np), _f(x_np) @ _f(w_key_np)
    return softmax(q @ k.T / np.sqrt(k.shape[-1]))


def _np_reversed(x_np, w_query_np, w_key_np, w_value_np, **_):
    """w @ x instead of x @ w for the three projections (the rest right)."""
    x = _f(x_np)
    q, k, v = _f(w_query_np) @ x, _f(w_key_np) @ x, _f(w_value_np) @ x
    return {"outputs_np": softmax(q @ k.T / np.sqrt(k.shape[-1])) @ v}


def _np_copied(name):
    """The outputs with TensorFlow's ``name`` (part 2's queries, keys or values, `.numpy()`) in place of the ones the
    NumPy inputs give."""
    def variant(x_np, w_query_np, w_key_np, w_value_np, **i):
        q, k, v = _np_qkv(x_np, w_query_np, w_key_np, w_value_np)
        q, k, v = (_f(i[n]) if n == name else own for n, own in zip(("queries", "keys", "values"), (q, k, v)))
        return {"outputs_np": softmax(q @ k.T / np.sqrt(k.shape[-1])) @ v}

    return variant


NUMPY_MISTAKES = {
    **{code: _np_variant(code) for code in ("missing_scale", "scale_by_d", "softmax_wrong_axis", "global_softmax",
                                            "scale_after_softmax", "power_precedence")},
    "softmax_base_two": _np_softmax_variant(lambda s: softmax(s * np.log(2.0))),  # np.exp2: e ** (s ln 2)
    # each row's maximum, then e / e.sum(axis=-1): entry (i, j) divided by row j's sum
    "missing_keepdim": _np_softmax_variant(lambda s: np.exp(s - _row_max(s)) / np.exp(s - _row_max(s)).sum(axis=-1)),
    # s - s.max(axis=-1): entry (i, j) shifted by row j's maximum
    "max_without_keepdim": _np_softmax_variant(
        lambda s: np.exp(s - s.max(axis=-1)) / np.exp(s - s.max(axis=-1)).sum(axis=-1, keepdims=True)),
    # s - s.max(axis=0, keepdims=True): entry (i, j) shifted by column j's maximum
    "max_wrong_axis": _np_softmax_variant(max_of_columns),
    # np.exp(s) without a maximum: overflows to inf / inf
    "unstable_softmax": _np_softmax_variant(lambda s: np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)),
    # s - s.max(): rows far below the largest score underflow to 0 / 0
    "global_max_subtraction": _np_softmax_variant(
        lambda s: np.exp(s - s.max()) / np.exp(s - s.max()).sum(axis=-1, keepdims=True)),
    # each row's maximum, but the sums of the columns
    "sum_wrong_axis": _np_softmax_variant(lambda s: np.exp(s - _row_max(s)) / np.exp(s - _row_max(s)).sum(
        axis=0, keepdims=True)),
    # each row's minimum or mean subtracted instead of its maximum: the wide rows overflow
    "shifted_by_min": _np_softmax_variant(lambda s: np.exp(s - s.min(axis=-1, keepdims=True)) / np.exp(
        s - s.min(axis=-1, keepdims=True)).sum(axis=-1, keepdims=True)),
    "shifted_by_mean": _np_softmax_variant(lambda s: np.exp(s - s.mean(axis=-1, keepdims=True)) / np.exp(
        s - s.mean(axis=-1, keepdims=True)).sum(axis=-1, keepdims=True)),
    "sum_without_axis": _np_softmax_variant(one_sum),  # each row's maximum, then one sum for the whole matrix
    "fixed_scale": _np_scale_variant(lambda x, k: 2.0),  # np.sqrt(4) typed in
    "scale_by_d_model": _np_scale_variant(lambda x, k: np.sqrt(x.shape[-1])),
    "scale_by_d_v": lambda x_np, w_query_np, w_key_np, w_value_np, **_: {
        "outputs_np": softmax(_np_qkv(x_np, w_query_np, w_key_np, w_value_np)[0] @ _np_qkv(
            x_np, w_query_np, w_key_np, w_value_np)[1].T / np.sqrt(np.shape(w_value_np)[-1]))
        @ _np_qkv(x_np, w_query_np, w_key_np, w_value_np)[2]},
    "transposed_scores": _np_scores_variant(lambda q, k: k @ q.T),
    "keys_not_transposed": _np_scores_variant(lambda q, k: q @ k),
    "product_order_reversed": _np_reversed,
    "values_transposed": lambda x_np, w_query_np, w_key_np, w_value_np, **_: {
        "outputs_np": _np_weights(x_np, w_query_np, w_key_np) @ (_f(x_np) @ _f(w_value_np)).T},
    "copied_answer": lambda outputs, **_: {"outputs_np": _f(outputs)},
    # TensorFlow's values converted (v = values.numpy()); its queries or keys, as wide as the NumPy ones only in
    # this notebook, make the cell raise on other inputs
    "copied_answer:values": _np_copied("values"),
}


# --- part 4: functions, checked on random sizes -------------------------------------------


def fn_inputs(rng: np.random.Generator | None = None) -> dict:
    """(q, k, v): the notebook's example, or random normal tensors of random sizes."""
    if rng is None:
        x = WORDS.astype(np.float64)
        return {"q": x @ W_QUERY, "k": x @ W_KEY, "v": x @ W_VALUE}
    # n ≠ d_k ≠ 4 (mostly), so that √n and a typed-in √4 show
    n, d_k = (int(s) for s in rng.choice([2, 3, 5, 6, 7, 8], size=2, replace=False))
    d_v = int(rng.integers(2, 9))  # narrower or wider than the keys, as it comes (see `widths`)
    return {"q": rng.normal(size=(n, d_k)), "k": rng.normal(size=(n, d_k)), "v": rng.normal(size=(n, d_v))}


def many_words(first: dict) -> dict:
    """An edge trial from the first random one: 13 words (the other trials have 8 at most), from a generator seeded
    by its shapes: attention that keeps only each query's few best keys (a top-k of 8) shows."""
    q, v = np.asarray(first["q"]), np.asarray(first["v"])
    rng = np.random.default_rng([*q.shape, v.shape[-1], 13])
    return {"q": rng.normal(size=(13, q.shape[-1])), "k": rng.normal(size=(13, q.shape[-1])),
            "v": rng.normal(size=(13, v.shape[-1]))}


many_words.of_first_trial = True


def long_words(first: dict) -> dict:
    """An edge trial from the first random one: 100 words (above a tile of 64 keys, and far beyond a window of a few
    neighbours), from a generator seeded by its shapes: an online softmax over tiles that forgets to rescale what it
    has when a later tile raises the maximum, or attention kept to a local window, shows."""
    q, v = np.asarray(first["q"]), np.asarray(first["v"])
    rng = np.random.default_rng([*q.shape, v.shape[-1], 100])
    return {"q": rng.normal(size=(100, q.shape[-1])), "k": rng.normal(size=(100, q.shape[-1])),
            "v": rng.normal(size=(100, v.shape[-1]))}


long_words.of_first_trial = True


def _attend(q, k, v, scale=None, transpose=False, axis=-1, normalise=softmax, after=1.0):
    scores = k @ q.T if transpose else q @ k.T
    return normalise(scores / (np.sqrt(k.shape[-1]) if scale is None else scale), axis=axis) / after @ v


def ref_scaled_attention(q, k, v):
    return _attend(q, k, v)


def _qk_scores(q, k, **_):
    return scaled_scores(q, k)


def _xw_scores(x, w_query, w_key, **_):
    return projected_scores(x, w_query, w_key)


FN_MISTAKES = {
    "missing_scale": lambda q, k, v: _attend(q, k, v, scale=1.0),
    "scale_by_d": lambda q, k, v: _attend(q, k, v, scale=float(k.shape[-1])),
    "scale_by_n": lambda q, k, v: _attend(q, k, v, scale=np.sqrt(k.shape[0])),
    "scale_by_n:queries": lambda q, k, v: _attend(q, k, v, scale=np.sqrt(q.shape[0])),  # the queries' count
    "hard_coded": lambda q, k, v: _attend(q, k, v, scale=2.0),  # √4, this notebook's d_k, typed in
    "transposed_scores": lambda q, k, v: _attend(q, k, v, transpose=True),
    "softmax_wrong_axis": lambda q, k, v: _attend(q, k, v, axis=0),
    "global_softmax": lambda q, k, v: global_softmax(q @ k.T / np.sqrt(k.shape[-1])) @ v,
    "no_softmax": lambda q, k, v: (q @ k.T / np.sqrt(k.shape[-1])) @ v,
    "scale_after_softmax": lambda q, k, v: _attend(q, k, v, scale=1.0, after=np.sqrt(k.shape[-1])),
    "weights_not_applied": lambda q, k, v: softmax(q @ k.T / np.sqrt(k.shape[-1])),
    "scale_by_d_v": lambda q, k, v: _attend(q, k, v, scale=np.sqrt(v.shape[-1])),
    # a softmax written out by hand: the row sums or the row maxima without keepdims, one sum for the whole matrix
    "missing_keepdim": lambda q, k, v: sums_without_keepdim(q @ k.T / np.sqrt(k.shape[-1])) @ v,
    "max_without_keepdim": lambda q, k, v: max_without_keepdim(q @ k.T / np.sqrt(k.shape[-1])) @ v,
    "max_wrong_axis": lambda q, k, v: max_of_columns(q @ k.T / np.sqrt(k.shape[-1])) @ v,
    "sum_without_axis": lambda q, k, v: one_sum(q @ k.T / np.sqrt(k.shape[-1])) @ v,
    "power_precedence": lambda q, k, v: _attend(q, k, v, scale=2.0 * k.shape[-1]),  # k.shape[-1] ** 1 / 2
    "power_precedence:grouped": lambda q, k, v: _attend(q, k, v, scale=k.shape[-1] / 2.0),  # / (d_k ** 1/2)
    "swapped_projections": lambda q, k, v: softmax(q @ k.T / np.sqrt(k.shape[-1])) @ k,  # the keys mixed
    "keys_reshaped": lambda q, k, v: softmax(q @ k.reshape(k.shape[1], k.shape[0]) / np.sqrt(k.shape[-1])) @ v,
}


def self_inputs(rng: np.random.Generator | None = None) -> dict:
    """(x, w_query, w_key, w_value): the notebook's words and matrices, or random ones of random sizes."""
    if rng is None:
        return {"x": WORDS.astype(np.float64), "w_query": W_QUERY.astype(np.float64),
                "w_key": W_KEY.astype(np.float64), "w_value": W_VALUE.astype(np.float64)}
    # n, d_model and d_k all different, and d_k ≠ 4, so that √n, √d_model and a typed-in √4 show
    n, d_model, d_k = (int(s) for s in rng.choice([2, 3, 5, 6, 7, 8], size=3, replace=False))
    d_v = int(rng.integers(2, 6))
    scale = 1 / np.sqrt(d_model)
    return {"x": rng.normal(size=(n, d_model)), "w_query": rng.normal(size=(d_model, d_k)) * scale,
            "w_key": rng.normal(size=(d_model, d_k)) * scale, "w_value": rng.normal(size=(d_model, d_v)) * scale}


def ref_self_attention(x, w_query, w_key, w_value):
    return _attend(x @ w_query, x @ w_key, x @ w_value)


def native_scaled_attention(q, k, v):
    """The reference in TensorFlow, differentiable (what a right student's function is: its gradient is judged)."""
    import tensorflow as tf

    s = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
    return tf.matmul(tf.nn.softmax(s, axis=-1), v)


def native_self_attention(x, w_query, w_key, w_value):
    import tensorflow as tf

    return native_scaled_attention(tf.matmul(x, w_query), tf.matmul(x, w_key), tf.matmul(x, w_value))


SELF_MISTAKES = {
    "scale_by_d_model": lambda x, w_query, w_key, w_value: _attend(
        x @ w_query, x @ w_key, x @ w_value, scale=np.sqrt(x.shape[-1])),
    "missing_scale": lambda x, w_query, w_key, w_value: _attend(x @ w_query, x @ w_key, x @ w_value, scale=1.0),
    "scale_by_n": lambda x, w_query, w_key, w_value: _attend(
        x @ w_query, x @ w_key, x @ w_value, scale=np.sqrt(x.shape[0])),
    "hard_coded": lambda x, w_query, w_key, w_value: _attend(x @ w_query, x @ w_key, x @ w_value, scale=2.0),
    "transposed_scores": lambda x, w_query, w_key, w_value: _attend(
        x @ w_query, x @ w_key, x @ w_value, transpose=True),
    "softmax_wrong_axis": lambda x, w_query, w_key, w_value: _attend(x @ w_query, x @ w_key, x @ w_value, axis=0),
    "weights_not_applied": lambda x, w_query, w_key, w_value: softmax((x @ w_query) @ (x @ w_key).T
                                                                      / np.sqrt(w_key.shape[-1])),
    "projection_reused": lambda x, w_query, w_key, w_value: _attend(x @ w_query, x @ w_key, x @ w_key),
    "max_wrong_axis": lambda x, w_query, w_key, w_value: max_of_columns(
        (x @ w_query) @ (x @ w_key).T / np.sqrt(w_key.shape[-1])) @ (x @ w_value),
}


def _self_made_with(made_with, x, w_query, w_key, w_value):
    w = {"query": w_query, "key": w_key, "value": w_value}
    return _attend(*(x @ w[made_with[r]] for r in ROLES))


# the queries and keys made with one matrix, or the values with w_query: the mix-ups that run whatever the widths
# (w_value's d_v differs from d_k on other inputs, so the others raise there, as the student's function does)
SELF_MIX_UPS = [{k: v for k, v in m.items() if k.split(":")[-1] in ("query_with_key", "key_with_query",
                                                                      "value_with_query")}
                for m in mix_ups(_self_made_with, {r: (f"the {_PLURAL[r]}", f"{_PLURAL[r]} = x @ w_{r}")
                                                   for r in ROLES})]
SELF_MISTAKES |= SELF_MIX_UPS[0]


# --- hints: what the student reads, in this notebook's TensorFlow / NumPy terms --------------

NO_SOFTMAX_WEIGHTS = ("These are the scaled scores, not weights. Apply tf.nn.softmax to them (over the last "
                      "axis) so that each word's weights are positive and sum to 1.")
NO_SOFTMAX_OUTPUTS = ("Your outputs weight the values by the scaled scores themselves. Turn the scores into "
                      "weights with a softmax first, then take the weighted sum of the values.")
CAST_TO_INT = ("You cast the weights to int32, which cuts every weight below 1 down to 0, so the outputs are "
               "(almost) all zeros. Cast the values to float32 instead, and keep the weights as they are.")
SCALE_AFTER = ("You divided by √d_k after the softmax, so each row of weights sums to 1/√d_k instead of 1. "
               "Divide the scores first, then take the softmax of the result.")
# for a function that returns the outputs: dividing the weights, the values or the result by √d_k gives the same
SCALE_AFTER_OUT = ("You divided by √d_k after the softmax (the weights, the values or the result: it comes to the "
                   "same), so each output mixes the values with weights that sum to 1/√d_k instead of 1. Divide the "
                   "scores first, then take the softmax of the result.")
PRECEDENCE = ("`d_k ** 1/2` is not √d_k: Python raises d_k to the power 1 first and then divides by 2, so no square "
              "root is taken (`scores / d_k ** 1/2` is scores / d_k / 2, and `scores / (d_k ** 1/2)` is "
              "scores / (d_k / 2)). Write d_k ** 0.5 (or tf.math.sqrt of d_k as a float).")
SCORES_1_HINTS = {
    "elementwise_product": "You multiplied query_1 and the keys entry by entry, so each score is 4 numbers. A "
    "score is one dot product: the sum of those products, a (1, 1) matrix product of query_1 with the "
    "transposed key.",
    "transposed_scores": "You compared key_1 with every query. Word 1's scores are query_1 against every key: "
    "key_1, key_2, key_3, key_4.",
    "transposed_first_operand": "Each of your scores is a (4, 4) matrix: you transposed query_1 (transpose_a), "
    "which makes an outer product, a column times a row. A dot product is a row times a column: transpose the "
    "key (transpose_b).",
    "stack_wrong_axis": "Your scores have shape (1, 4, 1): the stack put the words on axis 1. Stack the four "
    "(1, 1) scores along a new first axis (axis 0, the default) to get (4, 1, 1).",
    "missing_keepdim": "Your scores have the right numbers but shape (4,): each score lost its (1, 1) shape "
    "(a tf.reduce_sum without keepdims=True, or a product of flat vectors). Keep it: keepdims=True, or a (1, 4) "
    "@ (4, 1) matrix product per score.",
    "concat_instead_of_stack": "Your scores have shape (4, 1): tf.concat joined the four (1, 1) scores along "
    "their rows. tf.stack adds a new axis for them, which gives (4, 1, 1).",
    "swapped_projections": "You scored query_1 against the values. A score says how well a query matches a key: "
    "query_1 · key_j. The values come in later, in step 5.",
}
WEIGHTS_1_HINTS = {
    "missing_scale": "Your weights are the softmax of the raw scores. Divide the scores by √d_k = √4 = 2 before "
    "the softmax. (If you took d_k from tf.shape(key_1)[0]: that is 1, the number of rows of key_1; d_k is its "
    "last axis.) The weights look almost the same, but the small ones are off by orders of magnitude.",
    "scale_by_d": "You divided the scores by d_k = 4. Divide by its square root, tf.math.sqrt(d_k) = 2.",
    "fixed_scale": "You divided by a fixed 2, whatever the length of the keys: √4 typed in, the square root of "
    "the number of scores (4 here too), or of another number of this example that happens to be 4. Take d_k from "
    "key_1, the size of its last axis (tf.shape(key_1)[-1]), "
    "so that the code works for keys of any length.",
    "scale_by_d_model": "You divided by √d_model, the width of a word. The scores are dot products of a query "
    "with the keys, so divide by √d_k, the width of a key: the last axis of key_1. Here both are 4; in general "
    "they differ.",
    "scale_by_d_v": "You divided by √d_v, the width of a value (value_1). The scores are dot products of a query "
    "with the keys, so divide by √d_k, the width of a key: the last axis of key_1. Here both are 4; in general "
    "they differ.",
    "power_precedence": PRECEDENCE,
    "no_softmax": NO_SOFTMAX_WEIGHTS,
    "scale_after_softmax": SCALE_AFTER,
    "softmax_wrong_axis": "Your weights are all 1, in shape (4, 1): one axis of length 1 is still there, and the "
    "softmax ran over it (the softmax of a single score is 1). Squeeze attn_scores_1 all the way to shape (4,), "
    "then take the softmax over its four scores.",
    "missing_squeeze": "Your weights are all 1, in shape (4, 1, 1): attn_scores_1 still has its two axes of "
    "length 1, so the softmax ran over the last of them, which holds a single score. Squeeze the scores to "
    "shape (4,) first (tf.squeeze), then take the softmax.",
}
OUTPUT_1_HINTS = {
    "no_softmax": NO_SOFTMAX_OUTPUTS,
    "elementwise_product": "Your output is (4, 4): you multiplied the weights and the values element by element, "
    "which lines weight j up with feature j of every value, and added nothing up. Output 1 is one row: "
    "attn_weights_1[0] times the whole of value_1, plus attn_weights_1[1] times value_2, and so on.",
    "broadcast_wrong_axis": "Your weights were lined up with the features of the values instead of with the "
    "values themselves: weight j multiplied feature j of every value. Weight j must scale the whole of value_j: "
    "give the weights a new last axis (attn_weights_1[:, tf.newaxis]) before multiplying, or use a (1, 4) @ "
    "(4, 4) matrix product.",
    "missing_keepdim": "Your output has the right numbers but shape (4,): the sum over the words dropped the "
    "row axis. Keep it (keepdims=True in tf.reduce_sum, or a (1, 4) @ (4, 4) matrix product): output_1 is a "
    "(1, 4) row, like the values.",
    "weights_cast_to_int": CAST_TO_INT,
    "copied_answer": "Your output_1 is value_4, word 4's value (taken itself, or from weights that are not word "
    "1's). Here word 1's weights are almost one-hot on word 4, so output_1 equals value_4 to six digits, but only "
    "for these words and matrices: with weights that blend, it does not. "
    "Compute the weighted sum: attn_weights_1[j] times value_j, added up over the four words.",
    "scores_as_weights": "You weighted the values by the raw scores of step 3 (numbers like 55 and 85, hence "
    "outputs in the thousands). Use attn_weights_1, the softmax of the scaled scores: positive weights that "
    "sum to 1.",
    "swapped_projections": "You added up the keys. Keys serve for the scores; the output is the weighted sum of "
    "the values: attn_weights_1[j] times value_j.",
}
QKV_HINTS = {
    "swapped_projections": "Your queries and keys are swapped: queries come from w_query, keys from w_key.",
    "elementwise_product": "You multiplied element by element (`*`). A projection is a matrix product: `@` or "
    "tf.matmul.",
    "product_order_reversed": "You multiplied the matrix by x (w @ x, as in W·x for column vectors). Here each "
    "word is a row of x, so each row is multiplied by the matrix on its right: x @ w_query, and so on.",
    "missing_squeeze": "Your x has shape (1, 4, 4): it kept the sentence axis of word_emb_stack (and tf.matmul "
    "carried it into queries, keys and values). Squeeze axis 0 away: x must be the (4, 4) matrix of the "
    "words.",
}
SCORES_HINTS = {
    "copied_answer": "Your scores are made from step 2's per-word results (query_1 … query_4, or key_1 … key_4) "
    "stacked again, not from `queries` and `keys`: they give the same numbers only while nothing upstream "
    "changes. Compute them from the `queries` and `keys` of step 6.",
    "unexpected_scale": "You already divided by √d_k. Keep `attn_scores` as the raw dot products, as for word "
    "1: the scaling comes in the next step, right before the softmax.",
    "transposed_scores": "Row i of the scores must belong to query i; you have the keys against the queries. "
    "Put the queries first and transpose the keys.",
    "elementwise_product": "You multiplied queries and keys entry by entry. Each score is a dot product of a "
    "query row with a key row: a matrix product of the queries with the transposed keys.",
    "elementwise_with_transpose": "You multiplied element by element with a transposed operand. On square "
    "matrices that runs but pairs single entries; each score is a dot product of whole rows: a matrix product "
    "of the queries with the transposed keys.",
    "keys_not_transposed": "You multiplied queries by keys without transposing the keys: on these square "
    "matrices that runs, but entry (i, j) pairs query i with column j of the keys. Transpose the keys "
    "(tf.matmul's transpose_b, as in step 3).",
    "transposed_first_operand": "You transposed the queries (transpose_a, or tf.transpose on the left). Entry "
    "(i, j) must be query_i · key_j: transpose the keys, the second operand (transpose_b).",
}
WEIGHTS_HINTS = {
    "missing_scale": "Your weights are the softmax of the raw scores. Divide the scores by √d_k (d_k from "
    "tf.shape(keys)[-1]) before the softmax.",
    "no_softmax": NO_SOFTMAX_WEIGHTS,
    "softmax_wrong_axis": "Your softmax normalised each column. Each word's weights, a row, must sum to 1: "
    "softmax over the last axis (axis=-1, the default of tf.nn.softmax).",
    "global_softmax": "You normalised by the sum over the whole matrix. Each row must sum to 1 on its own: "
    "tf.nn.softmax over the last axis does that.",
    "scale_after_softmax": SCALE_AFTER,
    "transposed_scores": "Your weights are the softmax of the transposed scores: row i holds key i's scores "
    "against every query. Take the softmax of attn_scores as it is, where row i belongs to word i.",
    "missing_keepdim": "Your row sums lost their axis: a (4,) tensor divides a (4, 4) one column by column, so "
    "entry (i, j) was divided by row j's sum. Keep the axis (keepdims=True in tf.reduce_sum), or use "
    "tf.nn.softmax.",
    "fixed_scale": "You divided by 2 whatever the keys: √4 typed in, the square root of keys.shape[0] (the "
    "first axis, which counts the words: n = 4, like d_k here), or a square root cut to a whole number by int() "
    "(int(√5) is 2 as well). d_k is the width of a key, the last axis of `keys`: tf.shape(keys)[-1], and its "
    "square root stays a float.",
    "fixed_scale:n": "You divided by √n, the square root of keys.shape[0]: the first axis, which counts the words "
    "(4 here, like d_k). d_k is the width of a key, the last axis of `keys`: tf.shape(keys)[-1].",
    "scale_by_d_model": "You divided by √d_model, the width of x (or the rows of w_key). The scores are dot "
    "products of queries and keys, so divide by √d_k, the width of a key: the last axis of `keys`. Here both "
    "are 4; in general they differ.",
    "scale_by_size": "You divided by the square root of tf.size(keys), which counts every entry of the keys: "
    "n · d_k = 16 here. d_k is the width of one key, the last axis of `keys`: tf.shape(keys)[-1].",
    "scale_by_d_v": "You divided by √d_v, the width of the values (values.shape[-1]). The scores are dot products "
    "of queries and keys, so divide by √d_k, the width of a key: the last axis of `keys`. Here both are 4; in "
    "general they differ.",
    "max_without_keepdim": "Your row maxima lost their axis: tf.reduce_max(s, axis=-1) is a (4,) tensor, which "
    "lines up with the columns, so entry (i, j) was shifted by the maximum of row j, which the softmax does not "
    "cancel. Keep the axis (keepdims=True), or use tf.nn.softmax.",
    "power_precedence": PRECEDENCE,
}
OUTPUTS_HINTS = {
    "no_softmax": NO_SOFTMAX_OUTPUTS,
    "missing_scale": "Your outputs use the softmax of the unscaled scores. Use attn_weights, the weights of "
    "step 8.",
    "softmax_wrong_axis": "Your outputs use weights normalised over each column. Use attn_weights, whose rows "
    "sum to 1.",
    "elementwise_product": "You multiplied weights and values element by element (`*`). Row i of the outputs is "
    "a weighted sum of all value rows: a matrix product, tf.matmul or `@`.",
    "transposed_scores": "You used the transposed weights: row i of attn_weights belongs to word i, so the "
    "outputs are attn_weights times values, in that order and without a transpose.",
    "weights_cast_to_int": CAST_TO_INT,
    "values_transposed": "You transposed the values (transpose_b, as for the scores). Here the values stay as "
    "they are: row j of `values` is value_j, and attn_weights[i, j] scales the whole of it.",
    "product_order_reversed": "You multiplied values by attn_weights. Row i of the outputs is word i's weights "
    "(row i of attn_weights) times the values: attn_weights first, values second.",
}
ONE_PRODUCT = ("Your numbers are right, but the step asks for all four outputs with one matrix product (tf.matmul "
               "or `@` of the weights and the values), and your cell builds them another way (a broadcast sum, or a "
               "loop over the words). Step 10 writes the sums out; here the point is the one product.")
OUTPUTS_SUM_HINTS = {
    "sum_wrong_axis": "You summed over the queries (axis 0). Output i adds up attn_weights[i, j] * value_j over "
    "the words j: keep axis 0, sum over axis 1.",
    "broadcast_wrong_axis": "Your weights were lined up with the features of the values instead of with the "
    "value rows: weight (i, j) must multiply the whole of value_j. Give the weights a new last axis, "
    "attn_weights[:, :, tf.newaxis], before multiplying.",
    "elementwise_product": "You multiplied weights and values entry by entry and added nothing up. Output i is "
    "the sum over j of attn_weights[i, j] times the whole value row j.",
    "transposed_scores": "You used attn_weights[j, i] where attn_weights[i, j] belongs: row i of the weights "
    "holds word i's weights, one per value row j.",
    "weights_cast_to_int": CAST_TO_INT,
    "copied_answer": "You copied `outputs` (or computed it again with a matrix product from step 9's names). "
    "This step writes the outputs as explicit weighted sums of the rows of `values`, with the weights of "
    "`attn_weights`.",
    "sum_over_features": "You summed over the last axis, the features of each value, so entry (i, j) is weight "
    "(i, j) times the sum of value_j's numbers. Output i keeps the features and adds up over the words j: sum "
    "over axis 1.",
}
NUMPY_HINTS = {
    "missing_scale": "Your scores were not divided by √d_k. Divide them by np.sqrt of the keys' last axis before "
    "the softmax.",
    "scale_by_d": "You divided by d_k itself. Divide by its square root, np.sqrt(d_k).",
    "softmax_wrong_axis": "Your softmax normalised each column. Take each row's maximum and sum over axis=-1 "
    "(keeping that axis), so that each row is divided by its own sum.",
    "global_softmax": "You divided by the sum over the whole matrix. Sum each row on its own (over axis=-1, "
    "keeping the axis), so that each row of weights sums to 1.",
    "missing_keepdim": "Your row sums lost their axis: a (4,) array divides a (4, 4) one column by column, so "
    "entry (i, j) was divided by row j's sum. Keep the axis (keepdims=True) so each row is divided by its own "
    "sum.",
    "transposed_scores": "You computed keys @ queries.T. Row i of the scores belongs to query i: queries @ "
    "keys.T.",
    "keys_not_transposed": "You multiplied queries by keys without transposing the keys (on these square "
    "matrices it runs). Each score is query i · key j: queries @ keys.T.",
    "product_order_reversed": "You multiplied the matrices by x (w @ x). Each word is a row of x_np, so each "
    "row is multiplied by the matrix on its right: x_np @ w_query_np, and so on.",
    "values_transposed": "You transposed the values. The outputs are the weights times the values as they are: "
    "row j of the values is value j, and weight (i, j) scales the whole of it.",
    "copied_answer:values": "Your outputs use TensorFlow's `values` (part 2's, converted to NumPy), not values "
    "computed from the NumPy inputs: here they hold the same numbers, on other inputs they do not. A cross-check "
    "computes everything again: the values from x_np and w_value_np.",
    "copied_answer": "You converted TensorFlow's results to NumPy. A cross-check must compute the outputs "
    "again, independently: from x_np, w_query_np, w_key_np and w_value_np with NumPy operations only.",
    "unstable_softmax": "Your softmax gives nan on rows of large scores: what goes into np.exp is not each score "
    "minus its own row's maximum. Scores not shifted (or minus a smaller number) overflow: np.exp of anything "
    "above about 709 is inf in float64, and inf / inf is nan; minus a larger number (the maximum of other numbers "
    "than those you exponentiate), every exponential of a row can underflow to 0, and 0 / 0 is nan. Subtract each "
    "row's maximum of the very scores you exponentiate (s.max(axis=-1, keepdims=True)), as the step asks: the "
    "softmax stays the same and the largest exponent is exactly 0.",
    "global_max_subtraction": "You subtracted one maximum for the whole matrix. A row whose scores all lie far "
    "below that maximum underflows to 0 everywhere, and 0 / 0 is nan. Subtract each row's own maximum: "
    "s.max(axis=-1, keepdims=True).",
    "sum_wrong_axis": "You divided by the sums of the columns (axis=0). Each row of weights must sum to 1: "
    "divide by each row's own sum, over axis=-1 with keepdims=True.",
    "fixed_scale": "You divided by 2 whatever the keys: np.sqrt(4) typed in, the square root of k.shape[0] (the "
    "first axis, which counts the words: 4, like d_k here), a width read off another array than these keys "
    "(Part 2's TensorFlow `keys`, say), or a square root cut to a whole number by int(). d_k is the width of a key: "
    "k.shape[-1], and its square root stays a float.",
    "scale_by_n": "You divided by √n, the square root of k.shape[0]: the first axis, which counts the words (4, "
    "like d_k, in the example). d_k is the width of a key: k.shape[-1], the last axis.",
    "scale_by_d_model": "You divided by √d_model, the width of x_np (or the rows of w_key_np). Divide by √d_k, "
    "the width of a key: the last axis of the keys (or of w_key_np). Here both are 4; in general they differ.",
    "scale_by_d_v": "You divided by √d_v, the width of the values (v.shape[1], or w_value_np's). Divide by √d_k, "
    "the width of a key: k.shape[-1]. Here both are 4; in general they differ.",
    "sum_without_axis": "Your row maxima are right, but you divided by one sum over the whole matrix (e.sum() "
    "without an axis), so no row of weights sums to 1. Sum each row on its own: e.sum(axis=-1, keepdims=True).",
    "shifted_by_min": "You subtracted each row's minimum (or another number far below its maximum: a median, "
    "say). Any number per row cancels in the softmax, but only the maximum keeps np.exp safe: in a row whose "
    "scores span more than about 709, exp(s − that number) overflows to inf, and inf / inf is nan. Subtract each "
    "row's maximum, as the step asks.",
    "shifted_by_mean": "You subtracted a number per row below the row's maximum (its mean, or another of its "
    "scores). Any number per row cancels in the softmax, but only the maximum keeps np.exp safe: a score more than "
    "about 709 above what you subtracted overflows to inf, and inf / inf is nan. Subtract each row's maximum, as "
    "the step asks.",
}
_TF_UNSTABLE = ("On some rows your function returns NaN: what goes into tf.exp is not each score minus "
                "its own row's maximum. Scores not shifted (or minus a smaller number) overflow: tf.exp of a "
                "large score is inf (above 88 in float32, above 709 in float64), and inf / inf is NaN; minus a larger "
                "number (the maximum of other numbers than those you exponentiate, such as the unscaled scores, or a "
                "maximum clamped at 0 on a row whose scores all lie far below 0), every exponential of a row can "
                "underflow to 0, and 0 / 0 is NaN. Subtract each row's maximum of "
                "the very scores you exponentiate (tf.reduce_max(s, axis=-1, keepdims=True)): the largest exponent "
                "is then exactly 0, and the weights do not change. tf.nn.softmax does that for you.")

FN_HINTS = {
    "unstable_softmax": _TF_UNSTABLE,
    "missing_scale": "Your function does not divide the scores by √d_k. d_k is the size of the last axis of "
    "`k`: tf.shape(k)[-1], cast to float before the square root.",
    "scale_by_d": "Your function divides by d_k itself. Divide by its square root.",
    "scale_by_n": "Your function divides by √n, the square root of the number of tokens (the first axis of `k`, "
    "or of `q`). d_k is the last axis of `k`.",
    "scale_by_n:queries": "Your function divides by the square root of the number of queries (the first axis of "
    "`q`). The scale is √d_k, the width of a key: the last axis of `k`.",
    "hard_coded": "Your function divides by a fixed 2 (√4, this notebook's d_k). For keys of another width "
    "that is wrong: take d_k from the last axis of `k`.",
    "transposed_scores": "Your weights come out transposed (row i belongs to key i): the scores computed as k qᵀ, "
    "or a softmax taken down the columns and transposed back. Row i of the scores belongs to query i: q kᵀ "
    "(tf.matmul(q, k, transpose_b=True)), with the softmax along each row.",
    "softmax_wrong_axis": "Your softmax normalises each column. Each query's row of weights must sum to 1: "
    "softmax over the last axis.",
    "global_softmax": "You normalised by the sum over the whole score matrix. Each row must sum to 1 on its "
    "own: a softmax over the last axis.",
    "no_softmax": "Your function weights the values by the scaled scores themselves. Turn them into weights "
    "with a softmax over the last axis first.",
    "scale_after_softmax": SCALE_AFTER_OUT,
    "weights_not_applied": "Your function returns the weights, an (n, n) matrix, not the outputs. Multiply the "
    "weights by v, so that row i becomes query i's weighted sum of the value rows, (n, d_v).",
    "scale_by_d_v": "Your function divides by √d_v, the width of the values (the last axis of `v`). The scores "
    "are dot products of queries and keys: divide by √d_k, the last axis of `k`.",
    "missing_keepdim": "Your row sums lost their axis: tf.reduce_sum(e, axis=-1) is an (n,) tensor, which lines "
    "up with the columns, so entry (i, j) was divided by the sum of row j. Keep the axis (keepdims=True), or use "
    "tf.nn.softmax.",
    "max_without_keepdim": "Your row maxima lost their axis: tf.reduce_max(s, axis=-1) is an (n,) tensor, which "
    "lines up with the columns, so entry (i, j) was shifted by the maximum of row j, which the softmax does not "
    "cancel. Keep the axis (keepdims=True), or use tf.nn.softmax.",
    "sum_without_axis": "You divided by one sum over the whole matrix (tf.reduce_sum without an axis), so no row "
    "of weights sums to 1. Sum each row on its own: tf.reduce_sum(e, axis=-1, keepdims=True).",
    "power_precedence": PRECEDENCE,
    "swapped_projections": "Your function mixes the keys: the weights times `k`. The keys only decide the weights; "
    "the outputs are the weighted sums of the values, the weights times `v`.",
}
SELF_HINTS = {
    "unstable_softmax": _TF_UNSTABLE,
    "scale_by_d_model": "You divided by √d_model, the width of x (or the rows of w_key). The scores are dot "
    "products of queries and keys, so divide by √d_k, the width of a key: the last axis of the keys (or of "
    "w_key).",
    "missing_scale": "Your function does not divide the scores by √d_k, the square root of the keys' width.",
    "scale_by_n": "Your function divides by √n, the square root of the number of tokens (the first axis of x). "
    "d_k is the width of a key: the last axis of the keys.",
    "hard_coded": "Your function divides by a fixed 2 (√4, this notebook's d_k). For other widths that is "
    "wrong: take d_k from the keys (or from w_key).",
    # swapping the queries and the keys gives exactly the transposed scores: one code, both causes
    "transposed_scores": "Your weights come out transposed (keys against queries): row i belongs to key i. Either "
    "the product is the wrong way round (it must be queries times transposed keys), or the softmax went down the "
    "columns and was transposed back, or your queries and keys come "
    "from each other's matrices: queries from w_query, keys from w_key, and the parameters in the order "
    "(x, w_query, w_key, w_value).",
    "softmax_wrong_axis": FN_HINTS["softmax_wrong_axis"],
    "weights_not_applied": "Your function returns the weights, an (n, n) matrix, not the outputs: apply them to "
    "the values (the weights times the values), which gives (n, d_v).",
    "projection_reused": "Your values are made with w_key: the outputs mix the keys. The values come from w_value "
    "(x @ w_value), whose width d_v may differ from d_k.",
    **SELF_MIX_UPS[1],
}


NUMPY_INDEPENDENT = ("outputs", "outputs_sum", "attn_weights", "attn_scores", "queries", "keys", "values")


def _numpy_inputs(rng: np.random.Generator | None = None) -> dict:
    """The NumPy step's upstream, drawn with other widths and with rows of extreme levels and spreads; the
    TensorFlow results it must not copy come from an independent draw, with values of the same width (the cell
    compares its outputs with TensorFlow's)."""
    out = upstream_of(partial(world, widths=True, levels=True), "outputs_np")(rng)
    if rng is not None:
        # non-negative, like the notebook's: float32 results copied from TensorFlow then differ from float64
        # ones by a relative 1e-7 only (signed, some outputs cancel to near 0 and lose that)
        other = world(rng, d_v=int(np.shape(out["w_value_np"])[-1]), signed=False)
        out.update({name: other[name] for name in NUMPY_INDEPENDENT})
    return out


def _numpy_world_of(inputs: dict, words, wq, wk, wv) -> dict:
    """The NumPy step's inputs made anew from these words and weights (the TensorFlow names too, which a cell may
    convert instead: they hold the same numbers), the results it must not copy kept from ``inputs``."""
    full = _world_from(np.asarray(words), np.asarray(wq), np.asarray(wk), np.asarray(wv))
    return {name: inputs[name] if name in NUMPY_INDEPENDENT else full[name] for name in inputs}


def widest_last(inputs: dict) -> dict:
    """An edge replay of the NumPy step with its words reordered so that the word of the widest spread (c_i = 5, see
    :func:`_levels`) comes last: its key then tops every row that has a spread from the last column, so a row
    maximum that leaves the last column out overflows there."""
    x = np.array(inputs["x_np"], dtype=np.float64)
    if x.shape[-1] < 2:
        return inputs
    top = int(np.argmax(x[:, 1]))
    order = [i for i in range(len(x)) if i != top] + [top]
    return _numpy_world_of(inputs, x[order], inputs["w_query_np"], inputs["w_key_np"], inputs["w_value_np"])


def wider_spread(inputs: dict) -> dict:
    """An edge replay of the NumPy step with its spreads a quarter wider (see :func:`_levels`): in the row of
    c_i = 1 the largest scaled score then lies about 850 above the row's own diagonal score, so each row shifted by
    its diagonal (a word against itself) instead of its maximum overflows, while the maximum still keeps every
    exponential at most 1."""
    wk = np.array(inputs["w_key_np"], dtype=np.float64)
    if wk.shape[0] < 2 or wk.shape[1] < 2:
        return inputs
    wk[1, 1] = round(wk[1, 1] * 1.25)
    return _numpy_world_of(inputs, inputs["x_np"], inputs["w_query_np"], wk, inputs["w_value_np"])


def twin_near_limit_np(inputs: dict) -> dict:
    """An edge replay of the NumPy step where word 1 scores two keys alike (word 2 a copy of word 1) at 709.15 to
    709.75, scaled, just below exp's limit in float64: each exponential fits, their sum does not, and a softmax
    written out gives 0s there (x / inf), with no NaN to see, where the right weights are halves. Whole numbers
    throughout (see :func:`_tied_words`), so that projections made in float32 are exact. From a generator seeded
    by the replay's own words."""
    x = np.asarray(inputs["x_np"])
    rng = np.random.default_rng([int(abs(v)) % 1000 + 5 for v in np.ravel(x)][:64] + [709])
    d_model, d_k = int(x.shape[1]), int(np.shape(inputs["w_key_np"])[1])
    words = _tied_words(rng, d_model, d_k, 709.15, 709.75)
    if words is None:
        return inputs
    eye = np.eye(d_model, d_k)
    # value weights of its own: the replay's give the levels' first entries no value (word 1's value would be 0)
    d_v = int(np.shape(inputs["w_value_np"])[1])
    w_value = rng.integers(1, 3, size=(d_model, d_v)) * rng.choice([-1, 1], size=(d_model, 1))
    return _numpy_world_of(inputs, words, eye, eye, w_value.astype(np.float64))


def _tensorflow_results_of(inputs: dict, n: int, seed_words) -> dict:
    """TensorFlow's results, which the NumPy step's cell compares with its own, for a sentence of ``n`` words (4 to
    6), from other words (a draw seeded by ``seed_words``), as always."""
    plain = world(np.random.default_rng([int(v) % 1000 for v in np.ravel(seed_words)][:64]),
                  d_v=int(np.shape(inputs["w_value_np"])[-1]), signed=False)
    other = _world_from(_six_words(plain["x"], low=0).astype(np.int64)[:n], plain["w_query"], plain["w_key"],
                        plain["w_value"])
    return {name: other[name] for name in NUMPY_INDEPENDENT if name in inputs}


def far_above(inputs: dict) -> dict:
    """An edge replay of the NumPy step with every query's first entry raised by 2 BIG (see :func:`_levels`): every
    row of scores then lies 800 000 or more above 0 (scaled), with its spreads as before. A shift by nearly each
    row's maximum (0.999 of it leaves 800 in the exponent) overflows float64's exp."""
    wq = np.array(inputs["w_query_np"], dtype=np.float64)
    wq[0, 0] += 2.0
    return _numpy_world_of(inputs, inputs["x_np"], wq, inputs["w_key_np"], inputs["w_value_np"])


def _six_words(words, levels: bool = False, low: int = -2) -> np.ndarray:
    """These words and two more, drawn from a generator seeded by the words themselves (the same inputs give the same
    edge): a sentence of 6 words, where the steps' text speaks of "the four words"; their entries from ``low`` to 2.
    With ``levels``, the new words as :func:`_levels` makes them, without a spread (their rows stay soft)."""
    words = np.asarray(words, dtype=np.float64)
    rng = np.random.default_rng([int(abs(v)) % 1000 + 11 for v in np.ravel(words)][:64])
    more = rng.integers(0 if levels else low, 3, size=(2, words.shape[-1])).astype(np.float64)
    if levels:
        more[:, 0], more[:, 1] = BIG, 0.0
    return np.concatenate([words, more])


def six_words(inputs: dict) -> dict:
    """An edge replay of the projections step with a sentence of 6 words: a slice or a reshape to the example's 4
    words (`[:4]`, `len(words)` of the heatmap's labels) shows."""
    words = _six_words(np.asarray(inputs["word_emb_stack"])[0]).astype(np.int64)
    full = _world_from(words, inputs["w_query"], inputs["w_key"], inputs["w_value"])
    return {name: full[name] for name in inputs}


def six_words_np(inputs: dict) -> dict:
    """An edge replay of the NumPy step with a sentence of 6 words (the two new ones as :func:`_levels` makes them):
    sums over the example's 4 keys (`e[:, :4]`) show. The fifth word repeats the features of the word whose key tops
    the first row without a spread (c_i = 0), so that its key weighs as much as the top one there: at least a fifth of
    that row (random new words may weigh next to nothing). And the words' first feature (BIG) reaches the values'
    first entry here, 1 for 1: every output's first entry is then about BIG, so a wrong sum shows even when the random
    features' values are all 0 (a world 3 features wide can draw them so)."""
    x = _six_words(inputs["x_np"], levels=True)
    wq, wk = np.asarray(inputs["w_query_np"], dtype=np.float64), np.asarray(inputs["w_key_np"], dtype=np.float64)
    wv = np.array(inputs["w_value_np"], dtype=np.float64)
    soft = np.flatnonzero(x[:4, 1] == 0)
    if soft.size and x.shape[-1] > 2:
        top = int(np.argmax((x[soft[0]] @ wq) @ (x[:4] @ wk).T))
        x[4, 2:] = x[top, 2:]
    wv[0, 0] = 1.0
    out = _numpy_world_of(inputs, x, wq, wk, wv)
    return out | _tensorflow_results_of(inputs, len(x), x)  # (of 6 words as well)


def far_below(inputs: dict) -> dict:
    """An edge replay of the NumPy step with every query's first entry lowered by BIG (see :func:`_levels`): every
    row of scores then lies about BIG² / √d_k below 0, with its spreads as before. A shift by the largest |score|
    of a row, or by a maximum that starts at 0 (`initial=0`, `max(0, …)`), leaves every exponential at 0: 0 / 0."""
    wq = np.array(inputs["w_query_np"], dtype=np.float64)
    wq[0, 0] -= 1.0
    return _numpy_world_of(inputs, inputs["x_np"], wq, inputs["w_key_np"], inputs["w_value_np"])


def first_query_far_below(first: dict) -> dict:
    """An edge trial from the first random one: the first query scores every key at 200 or more below 0 (scaled), the
    first key 50 above the next: each key's first entry set to 1, 1.25, 1.5, … and the query to (−200·√d_k, 0, …).
    A softmax that shifts by a maximum clamped at 0 (or only when a score is large) leaves every exponential of that
    row at 0: 0 / 0. The right row is one-hot (float32's rounding cannot move it)."""
    q, k = np.array(first["q"], dtype=np.float64), np.array(first["k"], dtype=np.float64)
    k[:, 0] = 1.0 + 0.25 * np.arange(k.shape[-2])
    q[0] = 0.0
    q[0, 0] = -200.0 * np.sqrt(k.shape[-1])
    return {**first, "q": q, "k": k}


first_query_far_below.of_first_trial = True


def zero_in_first_key(first: dict) -> dict:
    """An edge trial from the first random one: the first key's last entry exactly 0 (random keys never hold one): a
    width counted as the key's non-zero entries (`count_nonzero(k[0])`) shows."""
    k = np.array(first["k"], dtype=np.float64)
    k[0, -1] = 0.0
    return {**first, "k": k}


zero_in_first_key.of_first_trial = True


def last_key_loudest(first: dict) -> dict:
    """An edge trial from the first random one: the first query scores 800 with the last key and exactly 0 with every
    other one (their part along the query taken out): a row maximum that leaves the last column out
    (`s[:, :-1].max(...)`) subtracts 0 there, and exp(800) overflows. The right weights are one-hot."""
    q, k = np.array(first["q"], dtype=np.float64), np.array(first["k"], dtype=np.float64)
    if k.shape[-2] < 2 or not np.linalg.norm(q[0]):
        return first
    u = q[0] / np.linalg.norm(q[0])
    k[:-1] -= np.outer(k[:-1] @ u, u)
    k[-1] = u * (800.0 * np.sqrt(k.shape[-1]) / np.linalg.norm(q[0]))
    return {**first, "k": k}


last_key_loudest.of_first_trial = True


def second_key_loudest(first: dict, top: float = 2e5) -> dict:
    """An edge trial from the first random one: the first query scores 200 000 (``top``) with the second key (an odd
    index) and exactly 0 with every other one: a shift by nearly the maximum (0.999 of it leaves 200 in the exponent)
    or by a maximum over every other key (`s[:, ::2]`) overflows float32's exp. The right weights are one-hot."""
    q, k = np.array(first["q"], dtype=np.float64), np.array(first["k"], dtype=np.float64)
    if k.shape[-2] < 2 or not np.linalg.norm(q[0]):
        return first
    u = q[0] / np.linalg.norm(q[0])
    k -= np.outer(k @ u, u)
    k[1] = u * (top * np.sqrt(k.shape[-1]) / np.linalg.norm(q[0]))
    return {**first, "k": k}


def second_key_past_int32(first: dict) -> dict:
    """:func:`second_key_loudest` with a score of 3·10⁹, past int32's largest number (2 147 483 647): a row maximum
    cast to int32 ("a whole-number shift is enough") saturates there, and exp() overflows."""
    return second_key_loudest(first, 3e9)


second_key_loudest.of_first_trial = True
second_key_past_int32.of_first_trial = True


def tiny_output(inputs: dict) -> dict:
    """An edge replay of the outputs step: the first word weighs the first two values 0.25 + 2⁻¹⁹ and 0.25 - 2⁻¹⁹
    (exact in float32), whose first entries are 1 and -1 (the others 0), so its first output is 2⁻¹⁸ = 3.8e-6, exactly
    in any order of the sum (the second word's, 9.8e-4): outputs near zero (or near a whole number, within 1e-5) set
    to it "to tidy the print", or rounded, show."""
    w = np.array(inputs["attn_weights"], dtype=np.float64)
    v = np.array(inputs["values"])
    if w.shape[0] < 1 or w.shape[1] < 4 or v.shape[0] < 4:
        return inputs
    w[0] = [0.25 + 2.0**-19, 0.25 - 2.0**-19, 0.25, 0.25] + [0.0] * (w.shape[1] - 4)
    if w.shape[0] > 1:  # and the second word's first output 2⁻¹⁰ = 9.8e-4, exactly: a cut at 1e-3 takes both
        w[1] = [0.25 + 2.0**-11, 0.25 - 2.0**-11, 0.25, 0.25] + [0.0] * (w.shape[1] - 4)
    v[:, 0] = 0
    v[0, 0], v[1, 0] = 1, -1
    return {**inputs, "attn_weights": w, "values": v}


def _inexact(a, bits: int) -> bool:
    """Some entry of the integers ``a`` is not a number of a float type with ``bits`` significant bits (float16: 11,
    exact up to 2048; bfloat16: 8, exact up to 256; float32: 24), so a round trip through it changes it (float16's
    largest number, 65504, is not checked: the integers here stay below it, or past it are inexact anyway)."""
    for n in np.abs(np.asarray(a, dtype=np.int64)).ravel().tolist():
        if n and (n >> ((n & -n).bit_length() - 1)) >= 1 << bits:  # the odd part of n needs more bits
            return True
    return False


def _large_words(inputs: dict, top: int, fits) -> dict:
    """The replay's weights with words drawn from -top..top (seeded by the replay's own words, so the same inputs
    give the same edge) until ``fits`` holds for the names made from them."""
    wq, wk, wv = (np.asarray(inputs[n]) for n in ("w_query", "w_key", "w_value"))
    rng = np.random.default_rng([int(v) + 5 for v in np.ravel(inputs["word_1"])] + [top])
    for _ in range(200):
        full = _world_from(rng.integers(-top, top + 1, size=(4, wq.shape[0])), wq, wk, wv)
        if fits(full):
            break
    return {**inputs, **{name: full[name] for name in inputs if name in full}}


def large_words(inputs: dict) -> dict:
    """An edge replay of the projections step: words up to ±1500, so that some query, key and value is an odd
    number above 2048: a trip through float16 (exact up to 2048) or bfloat16 (up to 256) and back rounds it."""
    return _large_words(inputs, 1500, lambda w: all(_inexact(w[n], 11) for n in ("queries", "keys", "values")))


def large_int_scores(inputs: dict) -> dict:
    """An edge replay of the score steps: words up to ±400, so that queries and keys reach the hundreds (some of them
    odd above 256) and scores the hundred thousands (some not a float16 number): a trip through bfloat16 or float16
    and back rounds them. Every score stays below 2**24, where float32 is exact too."""
    def fits(w):
        s = w["attn_scores"]
        return (_inexact(s, 11) and not _inexact(s, 24) and _inexact(w["queries"][:1], 8) and _inexact(w["keys"], 8)
                and _inexact((w["keys"] @ w["queries"][0]), 11))
    return _large_words(inputs, 400, fits)


def large_values(inputs: dict) -> dict:
    """An edge replay of the outputs step with the value weights 1 001 times larger (values in the thousands, odd
    multiples of 1 001 among them) and the words made non-negative (no output then cancels to near 0, where
    float32's rounding of numbers in the thousands would exceed the tolerance: an einsum was rejected on some
    draws): values sent through float16 (exact up to 2048) and back round. The replay's other names follow from
    the same words."""
    wv = np.asarray(inputs["w_value"], dtype=np.int64) * 1001
    full = _world_from(np.abs(np.asarray(inputs["x"])), np.asarray(inputs["w_query"]), np.asarray(inputs["w_key"]),
                       wv)
    return {name: full[name] for name in inputs}


def zero_key_entry(inputs: dict) -> dict:
    """An edge replay whose keys all hold a 0 (the key weights' first column zeroed): a width counted as a key's
    non-zero entries (`count_nonzero(key_1)`) shows, which the integer words show only on some draws. Drawn from a
    generator seeded by the replay's own words."""
    rng = np.random.default_rng([int(v) + 7 for v in np.ravel(inputs["word_1"])])
    base = world(rng, widths=True)
    wk = np.array(base["w_key"])
    wk[:, 0] = 0
    full = _world_from(base["x"], base["w_query"], wk, base["w_value"])
    return {name: full[name] for name in inputs}


def narrow_keys(inputs: dict) -> dict:
    """An edge replay of keys 3 wide, narrower than the 4 words (the other replays' keys may all be wider): a d_k
    taken as the largest (or the first) size of the keys, max(n, d_k), shows. Drawn from a generator seeded by the
    replay's own words, so the same inputs give the same edge."""
    rng = np.random.default_rng([int(v) + 3 for v in np.ravel(inputs["word_1"])])
    full = world(rng, widths=True, d_k=3)
    return {name: full[name] for name in inputs}


def repeated_word(first: dict) -> dict:
    """An edge replay from the first one with its second word the same as its first (a sentence may repeat a token):
    words deduplicated on the way (through a dict or a set) show."""
    words = np.concatenate([np.asarray(first[f"word_{i}"]) for i in range(1, 5)])
    words[1] = words[0]
    d = words.shape[1]
    wq, wk, wv = (np.asarray(first.get(n, np.zeros((d, 4), dtype=np.int64))) for n in ("w_query", "w_key", "w_value"))
    full = _world_from(words, wq, wk, wv)
    return {name: full[name] for name in first}


repeated_word.of_first_trial = True


def zero_word(first: dict) -> dict:
    """An edge replay from the first one with its second word all zeros (a real word may be: a padding test that drops
    it shows)."""
    words = np.concatenate([np.asarray(first[f"word_{i}"]) for i in range(1, 5)])
    words[1] = 0
    d = words.shape[1]
    wq, wk, wv = (np.asarray(first.get(n, np.zeros((d, 4), dtype=np.int64))) for n in ("w_query", "w_key", "w_value"))
    full = _world_from(words, wq, wk, wv)
    return {name: full[name] for name in first}


zero_word.of_first_trial = True


def big_word_entries(first: dict) -> dict:
    """An edge replay from the first one with entries that float16 cannot hold (2 049, −3 001, 70 001 — it rounds them
    or overflows): a stack sent through float16 and back shows."""
    words = [np.array(first[f"word_{i}"], dtype=np.int64) for i in range(1, 5)]
    words[0][0, 0], words[1][0, -1], words[3][0, 0] = 2049, -3001, 70001
    return {**first, **{f"word_{i}": w for i, w in enumerate(words, start=1)}}


def one_feature_words(first: dict) -> dict:
    """An edge replay from the first one with words of one feature each, (1, 1): a squeeze without an axis takes that
    axis away as well."""
    return {**first, **{f"word_{i}": np.array(first[f"word_{i}"])[:, :1].copy() for i in range(1, 5)}}


big_word_entries.of_first_trial = True
one_feature_words.of_first_trial = True


def small_weights_1(inputs: dict) -> dict:
    """An edge replay of word 1's output: weights 2⁻¹¹, 2⁻¹¹, ½ − 2⁻¹⁰ and ½ (exact, summing to 1), the two small
    ones on values of ±1 000: weights below 1e-3 dropped ("sparse attention") move the output by about 0.5."""
    w = np.array(inputs["attn_weights_1"], dtype=np.float64).reshape(-1)
    if w.size != 4:
        return inputs
    out = {**inputs, "attn_weights_1": np.array([2.0**-11, 2.0**-11, 0.5 - 2.0**-10, 0.5]).reshape(
        np.shape(inputs["attn_weights_1"]))}
    for j, sign in ((1, 1), (2, -1)):
        v = np.array(inputs[f"value_{j}"], dtype=np.int64)
        v[0, 0] = sign * 1000
        out[f"value_{j}"] = v
    return out


def near_limit_weights(inputs: dict) -> dict:
    """An edge replay whose largest scaled score is between 80 and 86, with a second of its row 60 or more and at
    least 2 below it: the words of a fresh draw times a whole number. A clamp of the scores "against overflow" at 60
    or below ties that row's two largest; exp() of every score still fits in float32. Drawn from a generator seeded
    by the replay's own words."""
    rng = np.random.default_rng([int(v) + 5 for v in np.ravel(inputs["word_1"])] + [86])
    for _ in range(2000):
        base = world(rng, widths=True)
        words, wq, wk, wv = (np.asarray(base[n]) for n in ("x", "w_query", "w_key", "w_value"))
        s = (words @ wq) @ (words @ wk).T / np.sqrt(wk.shape[-1])
        if s.max() <= 0:
            continue
        factor = int(np.floor(np.sqrt(86.0 / s.max())))
        top = int(np.argmax(s.max(axis=1)))
        first, second = np.sort(s[top] * factor**2)[::-1][:2]
        # and every row's largest score 0 or more: a shift by the largest score of all (not each row's) keeps every
        # exponential a normal float32 number (e^-87 is one), so it stays as exact as the row-wise shift
        if factor >= 1 and first >= 80.0 and second >= 60.0 and first - second >= 2.0 and s.max(axis=1).min() >= 0:
            full = _world_from(words * factor, wq, wk, wv)
            return {name: full[name] for name in inputs}
    raise RuntimeError("no words with such scores")  # never: a draw in a few hundred qualifies


def past_limit_weights(inputs: dict) -> dict:
    """An edge replay whose largest scaled score lies between 150 and 200, where tf.exp overflows float32: the
    words of a fresh draw times a whole number, drawn (from a generator seeded by the replay's own words) until the
    scaled scores have what :func:`nb01.past_limit` asks: a softmax written as its formula, or shifted by a row's
    mean or minimum, or by the largest score of all, fails on them."""
    rng = np.random.default_rng([int(v) + 5 for v in np.ravel(inputs["word_1"])] + [200])
    for _ in range(2000):
        base = world(rng, widths=True)
        words, wq, wk = (np.asarray(base[n]) for n in ("x", "w_query", "w_key"))
        s = (words @ wq) @ (words @ wk).T / np.sqrt(wk.shape[-1])
        if s.max() <= 0:
            continue
        factor = int(np.floor(np.sqrt(nb01.PAST_LIMIT / s.max())))
        if factor >= 1 and nb01.past_limit(s * factor**2):
            full = _world_from(words * factor, wq, wk, np.asarray(base["w_value"]))
            return {name: full[name] for name in inputs}
    raise RuntimeError("no words with such scores")


def _scaled_words(inputs: dict, tag: int, factor_of, twin: bool = False) -> dict:
    """An edge replay: the words of a fresh draw times the whole number ``factor_of(scaled scores)`` gives (None:
    draw again), from a generator seeded by the replay's own words (``twin``: word 2 a copy of word 1, so that every
    row scores keys 1 and 2 alike)."""
    rng = np.random.default_rng([int(v) + 5 for v in np.ravel(inputs["word_1"])] + [tag])
    for _ in range(4000):
        base = world(rng, widths=True)
        words, wq, wk = (np.asarray(base[n]) for n in ("x", "w_query", "w_key"))
        if twin:
            words = words.copy()
            words[1] = words[0]
        s = (words @ wq) @ (words @ wk).T / np.sqrt(wk.shape[-1])
        if (factor := factor_of(s)) is not None:
            full = _world_from(words * factor, wq, wk, np.asarray(base["w_value"]))
            return {name: full[name] for name in inputs}
    raise RuntimeError("no words with such scores")


def _far_past_factor(s: np.ndarray) -> int | None:
    if s.max() <= 0:
        return None
    factor = int(np.floor(np.sqrt(nb01.FAR_PAST / s.max())))
    # (720 and more: from 700, a draw below float64's limit of 709.8 let a softmax written out in float64 pass)
    return factor if factor >= 1 and s.max() * factor**2 >= FAR_PAST_LOW else None


FAR_PAST_LOW = 720.0  # the lowest largest score of the far-past replays: past float64's exp() limit (709.8)


def far_past_weights(inputs: dict) -> dict:
    """An edge replay whose largest scaled score lies between 720 and 800, past exp()'s limit in float64 too: a
    softmax written out in float64 (and cast back) overflows."""
    return _scaled_words(inputs, 800, _far_past_factor)


def _as_squares(total: int, n: int) -> np.ndarray | None:
    """Whole numbers, at most three of them non-zero, whose squares sum to ``total`` (an ``n``-vector), or None."""
    top = int(np.sqrt(total))
    for a in range(top, 0, -1):
        for b in range(min(a, int(np.sqrt(total - a * a))), -1, -1):
            c2 = total - a * a - b * b
            c = int(round(np.sqrt(c2)))
            if c * c == c2 and c <= b and (n >= 3 or c == 0) and (n >= 2 or b == 0):
                return np.array([a, b, c, *([0] * max(n - 3, 0))][:n], dtype=np.int64)
    return None


def _tied_words(rng: np.random.Generator, d_model: int, d_k: int, low: float, high: float) -> np.ndarray | None:
    """Four words of whole numbers, d_model wide (3 or more), for query and key weights that are both the identity (a
    word's score with another is their dot product, over the first d_k entries): words 1 and 2 alike, their square
    norm between ``low`` and ``high`` times √d_k, the two others small (entries −2 … 2), so that every score of
    word 1 but those two lies far below. None where no such norm exists (never for the widths drawn)."""
    n = min(d_model, d_k)
    word = next((w for t in range(int(np.ceil(low * np.sqrt(d_k))), int(np.floor(high * np.sqrt(d_k))) + 1)
                 if (w := _as_squares(t, n)) is not None), None)
    if word is None:
        return None
    words = rng.integers(-2, 3, size=(4, d_model))
    words[0, :] = words[1, :] = 0
    words[0, :n] = words[1, :n] = word
    return words


def tied_near_limit(inputs: dict) -> dict:
    """An edge replay where word 1 scores two keys alike (word 2 a copy of word 1) at 88.15 to 88.65, scaled: each
    exponential is a float32 number, their sum overflows to inf, and each weight written out as exp / sum comes out
    0, with no NaN nor inf anywhere, where the right weights are 0.5 and 0.5. A softmax that falls back to the
    shifted one only when a NaN or an inf shows fails there. See :func:`_tied_words`. From a generator seeded by the
    replay's own words."""
    rng = np.random.default_rng([int(v) + 5 for v in np.ravel(inputs["word_1"])] + [88])
    base = world(rng, widths=True)
    d_k, w_value = int(np.shape(base["w_key"])[1]), np.asarray(base["w_value"])
    d_model = max(int(w_value.shape[0]), 3)
    if w_value.shape[0] != d_model:
        w_value = rng.integers(-2, 3, size=(d_model, w_value.shape[1]))
    words = _tied_words(rng, d_model, d_k, 88.15, 88.65)
    if words is None:
        return inputs
    eye = np.eye(d_model, d_k, dtype=np.int64)
    full = _world_from(words, eye, eye, w_value)
    return {name: full[name] for name in inputs}


def word_1_far_below(inputs: dict) -> dict:
    """An edge replay whose word 1 scores every key 110 or more below 0 (scaled), where float32's exp of each is 0:
    a softmax that subtracts the maximum only when it is large (or a maximum clamped at 0) gives 0 / 0 there. The
    query weights are the identity and the key weights its negative (a word's score with another is minus their dot
    product), the words 1, 2, 3 and 4 times one long word: every row's largest score leads the next by a quarter of
    it or more, so its weights are one-hot and float32's rounding of scores in the hundreds cannot move them. From a
    generator seeded by the replay's own words."""
    rng = np.random.default_rng([int(v) + 5 for v in np.ravel(inputs["word_1"])] + [110])
    base = world(rng, widths=True)
    d_k, w_value = int(np.shape(base["w_key"])[1]), np.asarray(base["w_value"])
    d_model = int(w_value.shape[0])
    n = min(d_model, d_k)
    word = np.zeros(d_model, dtype=np.int64)
    word[:n] = int(np.ceil(np.sqrt(110.0 * np.sqrt(d_k) / n))) + rng.integers(0, 2, size=n)  # |word|² ≥ 110·√d_k
    words = np.arange(1, 5)[:, None] * word
    eye = np.eye(d_model, d_k, dtype=np.int64)
    full = _world_from(words, eye, -eye, w_value)
    return {name: full[name] for name in inputs}


def _first_row_past_factor(s: np.ndarray) -> int | None:
    top = float(s[0].max())
    if top <= 0:
        return None
    factor = int(np.floor(np.sqrt(nb01.PAST_LIMIT / top)))
    # word 1's largest scaled score between 120 and 200, and at least 2 above its second: tf.exp overflows there
    first, second = np.sort(s[0] * factor**2)[::-1][:2]
    return factor if factor >= 1 and first >= 120.0 and first - second >= 2.0 else None


def word_1_far_past(inputs: dict) -> dict:
    """An edge replay whose word 1 scores a key between 720 and 800 (scaled), past exp()'s limit in float64 too: a
    softmax of word 1's scores written out in float64 (and cast back) overflows."""
    return _scaled_words(inputs, 801, lambda s: _far_past_factor(s[:1]))  # word 1's row alone


def word_1_past_limit(inputs: dict) -> dict:
    """An edge replay whose word 1 scores a key between 120 and 200 (scaled), where tf.exp overflows float32: a
    softmax of word 1's scores written out without their maximum (a log-sum-exp too) fails."""
    return _scaled_words(inputs, 201, _first_row_past_factor)


def _scaled_scores_1_of(attn_scores_1, key_1, **_):
    return np.ravel(_f(attn_scores_1)) / _sqrt_dk(key_1)


def _scaled_scores_of(attn_scores, keys, **_):
    return _f(attn_scores) / _sqrt_dk(keys)


def _exercises() -> list[Exercise]:
    def value(ex_id, title, answers, reference, independent=(), widths=False, levels=False, **kw):
        kw.setdefault("framework", "tensorflow")
        drawn = partial(world, widths=widths, levels=levels)
        if widths and not levels:
            kw.setdefault("edge", narrow_keys)  # keys narrower than the words are many, whatever the draws
        kw.setdefault("inputs", upstream_of(drawn, answers[0], independent))
        return Exercise(ex_id, notebook=NOTEBOOK, title=title, answers=answers, reference=reference, **kw)

    per_word = tuple(f"{kind}_{i}" for i in range(1, 5) for kind in ("query", "key", "value"))
    values = tuple(f"value_{j}" for j in range(1, 5))
    return [
        value("04.stack", "The stacked words", ("word_emb_stack",), ref_stack, reads=WORDS_NAMES,
              # words of other widths than 4: a reshape to a typed (1, 4, 4) shows
              # a word repeated: deduplicated words show; a word of zeros: one dropped as padding shows
              # entries float16 cannot hold, and words of one feature: a float16 round trip and a squeeze show
              mistakes=STACK_MISTAKES, edge=(repeated_word, zero_word, big_word_entries, one_feature_words),
              widths=True,
              hints={
                  "stack_wrong_axis": "Your stack has shape (4, 1, 4): tf.stack put the new axis first (axis 0, "
                  "its default), so each word became a sentence of its own. The words must run along axis 1, "
                  "between the sentence axis and the features.",
                  "concat_instead_of_stack": "Yours has shape (4, 4): tf.concat joined the words' rows, and the "
                  "sentence axis is missing. tf.stack makes a new axis for the words, next to the (1, 4) "
                  "shape each word already has.",
                  "stack_last_axis": "Yours has the right shape, but the words run along the last axis (axis=2 "
                  "or -1): word j is column j, and the features run along axis 1. The words must run along axis 1, "
                  "so that word j is row j of word_emb_stack[0].",
              }, dtype="int32"),
        value("04.qkv_words", "Query, key and value of every word", per_word, ref_qkv_words,
              reads=(*WORDS_NAMES, "w_query", "w_key", "w_value"),
              mistakes={
                  "swapped_projections": lambda **i: _per_word(i, swap=True),
                  "elementwise_product": lambda **i: _per_word(i, product=np.multiply),
                  # tf.matmul(w_query, word_1, transpose_b=True): the matrix times the word as a column, (4, 1)
                  "product_order_reversed": lambda **i: _per_word(i, product=lambda word, w: w @ word.T),
                  **{k: v for m in QKV_WORDS_MIX_UPS for k, v in m[0].items()},
              }, dtype="int32", edge=large_words,  # products in the thousands: a float16 round trip shows
              how={"matmul": True},  # "each a matrix product"
              hints={
                  "not_as_asked": "Your numbers are right, but your cell makes them without a matrix product (a "
                  "broadcast product and a sum, say). The step asks for each as a matrix product: the word's row "
                  "times the matrix, word_1 @ w_query (or tf.matmul).",
                  "swapped_projections": "Your queries and keys are swapped: query_i comes from w_query, key_i "
                  "from w_key.",
                  "elementwise_product": "You multiplied element by element (`*`), which broadcasts a (1, 4) "
                  "word against a (4, 4) matrix into a (4, 4) result. A projection is a matrix product: "
                  "tf.matmul or `@`, which gives a (1, 4) row.",
                  "product_order_reversed": "You multiplied the matrix by the word turned into a column (W·xᵀ, a "
                  "(4, 1) column, as for column vectors). Here each word is a row, multiplied by the matrix on its "
                  "right: word_1 @ w_query, a (1, 4) row.",
                  **{k: v for m in QKV_WORDS_MIX_UPS for k, v in m[1].items()},
              }),
        value("04.scores_1", "The scores of word 1", ("attn_scores_1",), ref_scores_1,
              reads=("query_1", "key_1", "key_2", "key_3", "key_4"),
              mistakes=SCORES_1_MISTAKES, hints=SCORES_1_HINTS, dtype="int32", edge=large_int_scores),
        value("04.weights_1", "The weights of word 1", ("attn_weights_1",), ref_weights_1,
              reads=("attn_scores_1", "key_1"), mistakes=WEIGHTS_1_MISTAKES,
              hints={**WEIGHTS_1_HINTS, "unstable_softmax:sum": sum_overflow_hint("float32")},
              signs={"unstable_softmax": overflow_sign(ref_weights_1, _scaled_scores_1_of, 88.0),
                     "unstable_softmax:sum": sum_overflow_sign(ref_weights_1, _scaled_scores_1_of, "float32")},
              # and word 1's scores past float32's exp limit: a softmax written out without the maximum fails
              # and word 1's two largest scores alike, just below the limit (their sum past it), or all far below 0
              dtype="float32", widths=True,
              edge=(narrow_keys, zero_key_entry, word_1_past_limit, tied_near_limit, word_1_far_below,
                    word_1_far_past), **TIGHT),
        value("04.attention_1", "The output of word 1", ("output_1",), ref_output_1,
              reads=("attn_weights_1", *values), mistakes=OUTPUT_1_MISTAKES, hints=OUTPUT_1_HINTS,
              computed_with=("attn_weights_1",),  # the weights of the step before, not made again in this cell
              # atol: this notebook's weights of 3e-7 times a value of 4 is 1.2e-6 — an answer that leaves
              # them out (word 4's value alone) is told apart by the replays, not by the last digits
              dtype="float32", rtol=1e-5, atol=1e-5, edge=small_weights_1),  # weights below 1e-3 dropped show
        value("04.qkv", "Queries, keys and values of all four words", ("x", "queries", "keys", "values"),
              ref_qkv, reads=("word_emb_stack", "w_query", "w_key", "w_value"),
              mistakes={"swapped_projections": _qkv_swapped, "elementwise_product": _qkv_elementwise,
                        "missing_squeeze": _qkv_unsqueezed, "product_order_reversed": _qkv_reversed,
                        **QKV_MIX_UPS[0]},
              hints={**QKV_HINTS, **QKV_MIX_UPS[1]}, dtype="int32",
              # "from x": the words' own query_1 … query_4 of step 3, concatenated, give the same numbers; words
              # of another width than the 4 tokens: a reshape to (d_model, n) shows
              computed_with=("w_query", "w_key", "w_value"), widths=True, edge=six_words,  # and 6 words: a `[:4]`
              raised_hints=((r"Input to reshape is a tensor with",
                             "Your reshape has the notebook's sizes typed in: a sentence with words of another "
                             "width does not fit them. Take the batch's one sentence instead (`word_emb_stack[0]`), "
                             "which keeps whatever sizes the words have."),)),
        # step 2's per-word queries and keys from another draw: scores stacked from them (not computed) show
        value("04.scores", "The score matrix", ("attn_scores",), ref_scores, reads=("queries", "keys"),
              independent=tuple(f"{kind}_{j}" for kind in ("query", "key") for j in range(1, 5)),
              # and 6 words: rows made for the example's 4 words (`range(4)`) show
              mistakes=SCORES_MISTAKES, hints=SCORES_HINTS, dtype="int32", edge=(large_int_scores, six_words)),
        # word 1's weights of step 4 from another draw: a row copied from them (not computed) shows
        value("04.weights", "The weight matrix", ("attn_weights",), ref_weights, reads=("attn_scores", "keys"),
              independent=("attn_weights_1",),
              mistakes=WEIGHTS_MISTAKES, hints={**WEIGHTS_HINTS, "unstable_softmax:sum": sum_overflow_hint("float32")},
              dtype="float32", widths=True,
              # scaled scores up to 86: a clamp shows; up to 200: a softmax without each row's maximum fails
              # (no row far below 0: these integer words rarely give one, and drawing one costs a check 60 ms)
              # and 6 words: rows of the example's 4 (a reshape to `[-1, 4]`) show
              # and word 1's two largest scores alike just below the limit (their sum past it), or all far below 0
              edge=(narrow_keys, near_limit_weights, past_limit_weights, far_past_weights, zero_key_entry, six_words,
                    tied_near_limit, word_1_far_below),
              # (relative 1e-4: a softmax as exp(s − logsumexp(s)) in float32 rounds the log-sum-exp of scores near
              # 1 000 to its last bit, 6e-5, which moves every weight by that much relative)
              rtol=1e-4, atol=TIGHT["atol"],
              signs={"unstable_softmax": overflow_sign(ref_weights, _scaled_scores_of, 88.0),
                     "unstable_softmax:sum": sum_overflow_sign(ref_weights, _scaled_scores_of, "float32"),
                     "global_max_subtraction": global_shift_sign(ref_weights, _scaled_scores_of, 87.0,
                                                                 atol=TIGHT["atol"])}),
        # word 1's output of step 5 from another draw: a row copied from it (not computed) shows
        value("04.attention", "The outputs of all four words", ("outputs",), ref_outputs,
              reads=("attn_weights", "values"), mistakes=OUTPUTS_MISTAKES, independent=("output_1",),
              hints={**OUTPUTS_HINTS, "not_as_asked": ONE_PRODUCT}, how={"matmul": True, "loop": False},
              dtype="float32", rtol=1e-5, edge=(tiny_output, large_values, six_words)),
        # values of other widths than the 4 words (widths): a mean over the words times d_v shows
        value("04.attention_sum", "The outputs as explicit weighted sums", ("outputs_sum",), ref_outputs_sum,
              reads=("attn_weights", "values"), independent=("outputs", "output_1"),
              mistakes=OUTPUTS_SUM_MISTAKES, hints=OUTPUTS_SUM_HINTS, dtype="float32", rtol=1e-5,
              how={"matmul": False}, widths=True),
        value("04.numpy", "The NumPy cross-check", ("outputs_np",), ref_outputs_np,
              reads=("x_np", "w_query_np", "w_key_np", "w_value_np"), inputs=_numpy_inputs,
              # float64 is the point of the cross-check: an answer rounded to 5 decimals (off by up to 5e-6 here) does
              # not pass; TensorFlow's float32 results, off by ~1e-7, are still told apart as copies
              framework="numpy", mistakes=NUMPY_MISTAKES, rtol=5e-7, atol=1e-9,
              hints={**NUMPY_HINTS, "unstable_softmax:sum": sum_overflow_hint("float64")},
              not_with=("tf", "tensorflow", "torch", "keras", "jax"),  # NumPy only: no other library's tensors
              dtype="float64", widths=True, levels=True,
              edge=(wider_spread, widest_last, far_below, far_above, six_words_np, twin_near_limit_np),
              signs={"unstable_softmax": overflow_sign(ref_outputs_np, _np_scaled_scores, 709.0),  # float64
                     "unstable_softmax:sum": sum_overflow_sign(ref_outputs_np, _np_scaled_scores, "float64"),
                     # √n (k.shape[0]): the example's 4 words, like its d_k; only six_words_np has another n
                     "scale_by_n": _np_by_n}),
        Exercise(
            "04.scaled_attention",
            title="scaled_attention(q, k, v)",
            answers=("scaled_attention",),
            kind="function",
            inputs=fn_inputs,
            reference=ref_scaled_attention,
            native=native_scaled_attention,
            mistakes=FN_MISTAKES,
            hints={**FN_HINTS, "unstable_softmax:sum": sum_overflow_hint("float32"),
                   "small_values_zeroed": "Your function sets the small attention weights to 0 (below a threshold, "
                   "after the softmax). A weight of 1e-8 on a value of 10⁸ adds 1 to the output, and it is gone; the "
                   "rows no longer sum to 1 either, and the zeroed weights get no gradient. Keep every weight the "
                   "softmax gives: a small weight is still a weight."},
            notebook=NOTEBOOK,
            framework="tensorflow",
            dtype="float32",
            keeps_grad=True,  # a function training goes through: q, k and v reach the result (tf.GradientTape)
            # one query, values of width 1: the answer is (1, 1), not squeezed; scores of 800: a softmax without
            # each row's maximum overflows
            # and a key of zeros (its scores are 0: a mask made from the scores' values hides it)
            # and the score of 800 on the last key: a row maximum that leaves the last column out shows
            edge=(one_row("q", "v"), large_scores(), zero_row("k"), many_words,  # and 13 words: a top-8 shows
                  last_key_loudest, large_scores(top=3e4),  # a score of 30 000: a clip at ±1e4 shows
                  first_query_far_below, zero_in_first_key, long_words,  # and 100 words: tiles of 64 show
                  second_key_loudest, second_key_past_int32,  # and 200 000 on key 1: 0.999 of the maximum, or
                  # `s[:, ::2]`'s, shows; and 3·10⁹: a maximum cast to int32 shows
                  large_scores(top=88.4, second=1.0),  # and two scores of 88.4: each exp fits float32, the sum not
                  faint_loud_value()),  # and a weight of 1e-8 on a value of 10⁸: weights set to 0 below 1e-7 show
            signs={"small_values_zeroed": weights_zeroed_sign(lambda q, k, v: softmax(scaled_scores(q, k)),
                                                             lambda q, k, v: v),
                   "unstable_softmax": overflow_sign(ref_scaled_attention, _qk_scores, 88.0),  # float32
                   "unstable_softmax:sum": sum_overflow_sign(ref_scaled_attention, _qk_scores, "float32"),
                   "global_max_subtraction": global_shift_sign(ref_scaled_attention, _qk_scores, 87.0),
                   "global_max_rounding": global_rounding_sign(
                       ref_scaled_attention, lambda q, k, v: global_shift_float32(scaled_scores_float32(q, k)) @ v)},
            widths=("k", "v"),  # "any n, d_k and d_v": values wider than the keys in some trial, narrower in another
            points=2,
        ),
        Exercise(
            "04.self_attention",
            title="self_attention(x, w_query, w_key, w_value)",
            answers=("self_attention",),
            kind="function",
            inputs=self_inputs,
            reference=ref_self_attention,
            native=native_self_attention,
            mistakes=SELF_MISTAKES,
            hints={**SELF_HINTS, "unstable_softmax:sum": sum_overflow_hint("float32")},
            notebook=NOTEBOOK,
            framework="tensorflow",
            dtype="float32",
            # the large-score trial's float32 rounding (scores in the hundreds) reaches outputs near 0 by ~4e-5:
            # the plain answer was rejected on about 1 draw in 150 at 1e-6; outputs rounded to 4 decimals still show
            atol=5e-5,
            keeps_grad=True,  # x and the three weight matrices reach the result
            # one token; the same shapes, other numbers; scores of 800
            # and a token of zeros (a real token: masked as padding, it shows)
            # and 100 tokens: a local window, or tiles of 64 keys not rescaled, show
            # and 600 tokens, the last one loud: tiles of 64 or 512 keys not rescaled show whatever the draw
            edge=(one_row("x", "w_value"), rows_reversed("x"), large_scores(x="x"), zero_row("x"),
                  more_rows("x", 100), loud_token(n=600),
                  large_scores(x="x", top=88.4, second=1.0)),  # and two scores of 88.4: their exps' sum past float32
            signs={"unstable_softmax": overflow_sign(ref_self_attention, _xw_scores, 88.0),
                   "unstable_softmax:sum": sum_overflow_sign(ref_self_attention, _xw_scores, "float32"),
                   "global_max_subtraction": global_shift_sign(ref_self_attention, _xw_scores, 87.0, atol=5e-5)},
            widths=("w_key", "w_value"),
            depends_on=("04.scaled_attention",),
            points=2,
        ),
    ]


register(*_exercises())
