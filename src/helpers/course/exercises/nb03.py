"""Notebook 03 — self-attention on your own (seed 002): predict, compute, pack into a function.

The seed's example (notebook 01's inputs and weights) computed with fewer hints. Before a
step, the student predicts the shape of its result, written with the size names ``n``,
``d_model``, ``d_k``, ``d_v`` (every one of them except ``d_model`` is 3 in the example, so
digits could not say which size is meant), or which axis a softmax or a sum runs along.

Two worlds of names, in notebook order:

- ``world(rng)``: the example's d_model and d_k, values of another width (2, 4 or 5: never d_k), and a
  token count n of 2 to 5; the computing steps are replayed on fresh numbers of these shapes;
- ``world(rng, sized=True)``: fresh sizes as well (none 3 or 4, and no two of them within 1 of each
  other, so that ``d_model - 1`` cannot stand for ``d_v``), for the shape
  predictions: ``scores_shape = (n, n)`` replayed there gives ``(5, 5)``, and each typical
  wrong prediction something else. Axis predictions do not depend on the sizes: they are
  judged on the notebook's answer alone (``replays=0``), where every wrong axis already shows.

``weighted_values[i, j, k] = attn_weights[i, j] * values[j, k]``: axis 0 is the query (whose
output), axis 1 the input whose value is weighted, axis 2 the feature. Step 6 sums over axis 1.
"""

from __future__ import annotations

import numpy as np

from ..mistakes import CLAMPED_SCORES_HINT
from ..reference import (
    global_shift_float32,
    global_softmax,
    max_of_columns,
    max_without_keepdim,
    max_without_keepdim_float32,
    one_sum,
    softmax,
    sum_normalise,
    sums_without_keepdim,
)
from ..spec import (
    Exercise,
    global_rounding_sign,
    global_shift_sign,
    logsumexp_sign,
    loud_token,
    more_rows,
    one_row,
    overflow_sign,
    register,
    repeated_row,
    rows_reversed,
    scaled_by,
    upstream_of,
    wide_projections,
    zero_row,
)
from . import nb01
from .nb01 import (
    QKV_MISTAKES,
    QKV_MIX_UPS,
    REVERSED_QKV_HINT,
    ROUNDED_WEIGHTS,
    SCORES_MISTAKES,
    SOFTMAX_MISTAKES,
    ref_qkv,
    ref_scores,
)

NOTEBOOK = "03_hands_on_steps"
SEED = "002_b79901dd11caa054.txt"  # every number it prints must appear in the stored outputs

# The seed's diagrams round query 1's softmax row to 0.0 / 0.5 / 0.5 (steps 5–6).
ROUNDED_1 = ROUNDED_WEIGHTS[0]
SIZES = ("n", "d_model", "d_k", "d_v")
SIZED = (2, 5, 7, 9, 11)  # the fresh sizes of the shape predictions: at least 2 apart, none 3 or 4


def _weighted(weights, values):
    """(n_queries, n_inputs) weights and (n_inputs, d_v) values -> (n_queries, n_inputs, d_v)."""
    return np.asarray(values)[None, :, :] * np.asarray(weights)[:, :, None]


def _sized_base(rng: np.random.Generator) -> dict:
    """The names notebook 01's world has, for fresh sizes: none of them 3 or 4 (the example's sizes), and no
    two of them equal or one apart, so that every wrong shape prediction gives another tuple than the right one
    (``d_model - 1`` or ``d_k + 1`` for ``d_v`` too), and a prediction typed in digits never matches."""
    n, d_model, d_k, d_v = (int(s) for s in rng.choice(SIZED, size=4, replace=False))
    x = rng.integers(0, 2, size=(n, d_model)).astype(np.float64)
    wq, wk = (rng.integers(0, 2, size=(d_model, d_k)).astype(np.float64) for _ in range(2))
    wv = rng.integers(0, 4, size=(d_model, d_v)).astype(np.float64)
    return _base_of(x, wq, wk, wv)


def _base_of(x: np.ndarray, wq: np.ndarray, wk: np.ndarray, wv: np.ndarray) -> dict:
    """Notebook 01's names computed from small inputs and weights (as float64 arrays, and as the given lists)."""
    queries, keys, values = x @ wq, x @ wk, x @ wv
    scores = queries @ keys.T
    return {
        "x_list": nb01._as_list(x), "w_query_list": nb01._as_list(wq),
        "w_key_list": nb01._as_list(wk), "w_value_list": nb01._as_list(wv),
        "x": x, "w_query": wq, "w_key": wk, "w_value": wv,
        "queries": queries, "keys": keys, "values": values,
        "attn_scores": scores, "attn_weights": softmax(scores),
    }


REPLAYED_N = (2, 3, 4, 5)  # the token counts of the computing steps' replays
REPLAYED_D_MODEL = (5, 6)  # their inputs' widths: above the example's 4, so inputs cut to 4 features show
REPLAYED_D_K = (4, 5)  # their keys' widths: above the example's 3 (and above most n), so keys cut to 3 show


def _replayed_base(rng: np.random.Generator, d_v: int | None = None) -> dict:
    """Notebook 01's world of fresh numbers, with a token count, an input width and a key width of its own and values
    of another width than the keys: a cell that writes out three tokens (``weighted_values[:, 0] + … +
    weighted_values[:, 2]``) does not pass a replay, nor one that cuts the values to d_k columns, the keys to 3 or
    the inputs to 4."""
    n = int(rng.choice(REPLAYED_N))
    d_model, d_k = int(rng.choice(REPLAYED_D_MODEL)), int(rng.choice(REPLAYED_D_K))
    d_v = d_v or d_k + int(rng.integers(1, 3))  # wider than the keys: values cut to d_k columns show
    x = nb01.fresh_numbers(rng, (n, d_model))  # halves of both signs: a .relu(), .abs(), .round() or int cast shows
    wq, wk = (nb01.fresh_numbers(rng, (d_model, d_k)) for _ in range(2))
    wv = nb01.fresh_numbers(rng, (d_model, d_v), top=2.0)
    return _base_of(x, wq, wk, wv)


def world(rng: np.random.Generator | None = None, *, sized: bool = False, d_v: int | None = None) -> dict:
    """Every name of the notebook, in notebook order (see the module's docstring); ``d_v``: the replayed values'
    width, else one or two wider than the replayed keys."""
    base = nb01.world(None) if rng is None else _sized_base(rng) if sized else _replayed_base(rng, d_v)
    rounded_1 = ROUNDED_1 if rng is None else nb01._rounded_rows(rng, base["x"].shape[0])[0]
    return _world_of(base, rounded_1)


def narrow_values(first: dict) -> dict:
    """An edge replay from the first one: values one number wide, narrower than the keys (the other replays have
    them wider), so that keys cut to the values' width (`keys[:, :d_v]`) show. From a generator seeded by the first
    replay's sizes."""
    x = np.asarray(first["x"]) if "x" in first else np.asarray(first["x_list"], dtype=np.float64)
    rng = np.random.default_rng([*x.shape, 7])
    base = _replayed_base(rng, d_v=1)
    full = _world_of(base, nb01._rounded_rows(rng, base["x"].shape[0])[0])
    return {name: full[name] for name in first}


narrow_values.of_first_trial = True


def _lists_world(inputs: dict, arrays: tuple[np.ndarray, ...]) -> dict:
    """The names ``inputs`` asks for, from notebook 01's arrays (x, w_query, w_key, w_value and rounded weights, of
    which token 1's row is this notebook's)."""
    x, wq, wk, wv, rounded = arrays
    full = _world_of(_base_of(x, wq, wk, wv), rounded[0])
    return {name: full[name] for name in inputs}


def large_numbers(inputs: dict) -> dict:
    """An edge replay with numbers far above the notebook's (see :func:`nb01.large_numbers`, whose tokens it takes):
    the scores up to about 85, the values near 40. A clamp at the notebook's largest score or value shows."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    big = nb01.large_numbers({**lists, "rounded_weights": None})  # its own tokens, and rounded weights for them
    base = _base_of(*(np.asarray(big[name], dtype=np.float64) for name in lists))
    full = _world_of(base, np.asarray(big["rounded_weights"][0], dtype=np.float64))
    return {name: full[name] for name in inputs}


def loud_values(inputs: dict) -> dict:
    """An edge replay: this trial's sentence with the value weights 4 096 times larger (a power of 2: exact in
    float32), so the values and the outputs reach thousands: a clamp or clip of them at a "safe" bound (±1 000, ±100)
    shows. Scores and weights stay as they were."""
    lists = {name: np.asarray(inputs[name], dtype=np.float64)
             for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    base = _base_of(lists["x_list"], lists["w_query_list"], lists["w_key_list"], 4096.0 * lists["w_value_list"])
    # (token 1's rounded weights: this trial's, where the step reads them; any, where it does not)
    full = _world_of(base, np.asarray(inputs.get("rounded_1", np.zeros(len(lists["x_list"]))), dtype=np.float64))
    return {name: full[name] for name in inputs}


def long_loud(inputs: dict) -> dict:
    """An edge replay of 40 tokens whose inputs are 256 times the usual halves (see :func:`nb01.long_loud_arrays`):
    tokens cut at a count typed in and clamps at a "safe" bound up to several hundred show."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01.long_loud_arrays(lists))


def near_limit_scores(inputs: dict) -> dict:
    """An edge replay whose largest score is about 85 (see :func:`nb01.near_limit_arrays`): a clamp of the scores
    shows; exp() of every score still fits in float32."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01.near_limit_arrays(lists))


def past_limit_scores(inputs: dict) -> dict:
    """An edge replay whose largest score is between 150 and 200 (see :func:`nb01.past_limit_arrays`): a softmax
    that does not subtract each row's own maximum overflows or underflows on it."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01.past_limit_arrays(lists))


def last_key_loud_scores(inputs: dict) -> dict:
    """An edge replay whose largest score, at least 95 above the rest of its row, is in the last column (see
    :func:`nb01.last_key_loud_arrays`): a row maximum that leaves the last key out overflows there."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01.last_key_loud_arrays(lists))


def far_past_scores(inputs: dict) -> dict:
    """An edge replay whose largest score lies between 700 and 800 (see :func:`nb01.far_past_scores`)."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01._drawn_scaled(lists, int(nb01.FAR_PAST), nb01.far_factor, flip=True))


def past_half_scores(inputs: dict) -> dict:
    """An edge replay whose largest score lies between 65 600 and 70 000 (see :func:`nb01.past_half_scores`)."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01._drawn_scaled(lists, int(nb01.PAST_HALF), nb01.past_half_factor, flip=True))


def apart_rows(inputs: dict) -> dict:
    """An edge replay with two rows of scores 2²⁰ apart (see :func:`nb01.apart_arrays`): one maximum of the whole
    matrix subtracted before the library's softmax shows."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01.apart_arrays(lists))


def _global_shift_along(attn_scores, softmax_axis, **_):
    """:func:`global_shift_float32` along the step's softmax axis."""
    s = np.moveaxis(np.asarray(attn_scores, dtype=np.float64), int(softmax_axis), -1)
    return np.moveaxis(global_shift_float32(s), -1, int(softmax_axis))


def far_below_scores(inputs: dict) -> dict:
    """An edge replay with a row of scores all at or below -110 (see :func:`nb01.far_below_scores`)."""
    lists = {name: inputs[name] for name in ("x_list", "w_query_list", "w_key_list", "w_value_list")}
    return _lists_world(inputs, nb01._drawn_scaled(lists, 110, nb01.below_factor, flip=False))


def small_numbers(inputs: dict, d_v: int | None = None) -> dict:
    """An edge replay of small numbers (see :func:`nb01.small_arrays`): scores, values and outputs set to 0 below a
    threshold show. ``d_v``: the values' width."""
    return _lists_world(inputs, nb01.small_arrays(inputs, d_v))


def small_numbers_3(inputs: dict) -> dict:
    """:func:`small_numbers` with values 3 wide, the example's width (the steps whose replays keep it)."""
    return small_numbers(inputs, 3)


def precise_numbers(inputs: dict) -> dict:
    """An edge replay for the tensors' step: numbers with seven decimals, inputs 5 wide (see
    :func:`nb01.precise_arrays`): a trip through float16 or bfloat16 shows."""
    return _lists_world(inputs, nb01.precise_arrays(inputs))


def one_token(inputs: dict, d_v: int | None = None) -> dict:
    """An edge replay of one token (see :func:`nb01.one_token_arrays`): a result squeezed loses its token axis.
    ``d_v``: the values' width."""
    return _lists_world(inputs, nb01.one_token_arrays(inputs, d_v))


def one_token_3(inputs: dict) -> dict:
    """:func:`one_token` with values 3 wide, the example's width (the steps whose replays keep it)."""
    return one_token(inputs, 3)


def one_column(inputs: dict) -> dict:
    """An edge replay of weights one column wide (see :func:`nb01.one_column_arrays`): a squeeze loses that axis."""
    return _lists_world(inputs, nb01.one_column_arrays(inputs))


def repeated_numbers(inputs: dict) -> dict:
    """An edge replay for the tensors' step: a token repeated, and a column of each weight matrix (see
    :func:`nb01.repeated_arrays`): merging or dropping equal rows or columns shows."""
    return _lists_world(inputs, nb01.repeated_arrays(inputs))


def _world_of(base: dict, rounded_1: np.ndarray) -> dict:
    """Every name of the notebook from notebook 01's names (``base``) and the rounded weights of token 1."""
    x, w_key, w_value = base["x"], base["w_key"], base["w_value"]
    n, d_model = x.shape
    d_k, d_v = w_key.shape[1], w_value.shape[1]
    weights, values = base["attn_weights"], base["values"]
    wv = _weighted(weights, values)
    wv1 = rounded_1[:, None] * values
    given = ["x_list", "w_query_list", "w_key_list", "w_value_list"]
    return {
        **{name: base[name] for name in given},
        "labels": [f"token {i + 1}" for i in range(n)],  # one name per token, as the notebook's cell gives them
        **{name: base[name] for name in ("x", "w_query", "w_key", "w_value")},
        "n": n, "d_model": d_model, "d_k": d_k, "d_v": d_v,
        "queries": base["queries"], "keys": base["keys"], "values": values,
        "scores_shape": np.array([n, n]),
        "attn_scores": base["attn_scores"],
        # the figures' numbers, from the lists (a given cell): the outputs' cell compares with given["outputs"]
        "given": {"x": x, "keys": base["keys"], "queries": base["queries"], "values": values,
                  "scores": base["attn_scores"], "weights": weights, "outputs": weights @ values},
        "softmax_axis": np.array(1),
        "attn_weights": weights,
        "weighted_shape": np.array([n, n, d_v]),
        "weighted_values": wv,
        "sum_axis": np.array(1),
        "outputs": wv.sum(axis=1),
        "rounded_1": rounded_1,
        "weighted_values_1_rounded": wv1,
        "output_1_rounded": wv1.sum(axis=0),
        "outputs_shape": np.array([n, d_v]),
    }


def sized_world(rng: np.random.Generator | None = None) -> dict:
    return world(rng, sized=True)


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


# --- the tensors -----------------------------------------------------------------------------


def ref_tensors(x_list, w_query_list, w_key_list, w_value_list, **_):
    return {"x": _f(x_list), "w_query": _f(w_query_list), "w_key": _f(w_key_list), "w_value": _f(w_value_list)}


def swapped_tensors(x_list, w_query_list, w_key_list, w_value_list, **_):
    return {"x": _f(x_list), "w_query": _f(w_key_list), "w_key": _f(w_query_list), "w_value": _f(w_value_list)}


def key_value_swapped_tensors(x_list, w_query_list, w_key_list, w_value_list, **_):
    return {"x": _f(x_list), "w_query": _f(w_query_list), "w_key": _f(w_value_list), "w_value": _f(w_key_list)}


# --- predictions: shapes written with the size names, and axes -------------------------------


def _shape(name, *dims):
    return {name: np.array(dims, dtype=np.float64)}


def ref_scores_shape(n, **_):
    return _shape("scores_shape", n, n)


PREDICT_SCORES_MISTAKES = {
    "elementwise_product": lambda n, d_k, **_: _shape("scores_shape", n, d_k),
    "transposed_first_operand": lambda d_k, **_: _shape("scores_shape", d_k, d_k),
    "one_query_only": lambda n, **_: _shape("scores_shape", n),
}


def ref_weighted_shape(n, d_v, **_):
    return _shape("weighted_shape", n, n, d_v)


PREDICT_WEIGHTED_MISTAKES = {
    "one_query_only": lambda n, d_v, **_: _shape("weighted_shape", n, d_v),
    "no_new_axis": lambda n, **_: _shape("weighted_shape", n, n),
    "width_of_keys": lambda n, d_k, **_: _shape("weighted_shape", n, n, d_k),
    "width_of_inputs": lambda n, d_model, **_: _shape("weighted_shape", n, n, d_model),
}


def ref_outputs_shape(n, d_v, **_):
    return _shape("outputs_shape", n, d_v)


PREDICT_OUTPUTS_MISTAKES = {
    "width_of_inputs": lambda n, d_model, **_: _shape("outputs_shape", n, d_model),
    "width_of_keys": lambda n, d_k, **_: _shape("outputs_shape", n, d_k),
    "one_query_only": lambda d_v, **_: _shape("outputs_shape", d_v),
    "missing_sum": lambda n, d_v, **_: _shape("outputs_shape", n, n, d_v),
}


def _axis(name, value):
    return lambda **_: {name: np.array(float(value))}


# --- computing steps -------------------------------------------------------------------------


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
    # values * attn_weights: entry by entry, (n, n); it runs because d_v = n here
    "no_new_axis": lambda attn_weights, values, **_: {"weighted_values": np.asarray(values) * attn_weights},
    # attn_weights[0].unsqueeze(-1) * values: the diagram's query 1 only
    "one_query_only": lambda attn_weights, values, **_: {
        "weighted_values": np.asarray(attn_weights)[0][:, None] * values
    },
    # attn_weights @ values: the outputs, one step early
    "summed_too_early": lambda attn_weights, values, **_: {"weighted_values": attn_weights @ values},
    # values.unsqueeze(-1) * attn_weights: (n, d_v, 1) * (n, n), entry [j, k, m] = values[j, k] * weights[k, m]
    "new_axis_on_values": lambda attn_weights, values, **_: {
        "weighted_values": np.asarray(values)[:, :, None] * np.asarray(attn_weights)[None, :, :]
    },
}


def _along(axis, ndim: int, right: int) -> int:
    """A predicted axis the step uses (``dim=softmax_axis``), as an int; the right one when it is no axis of the
    tensor (a string, a float, out of range: the prediction's own check says what is wrong with it)."""
    a = np.asarray(axis)
    if a.ndim or a.dtype.kind not in "iuf" or not float(a).is_integer() or not -ndim <= int(a) < ndim:
        return right
    return int(a)


def ref_outputs(weighted_values, sum_axis=1, **_):
    return {"outputs": np.asarray(weighted_values).sum(axis=_along(sum_axis, 3, 1))}


def ref_softmax_along(attn_scores, softmax_axis=1, **_):
    """The weights along the predicted axis (the notebook's: 1): from a wrong prediction, what a right cell makes."""
    return {"attn_weights": softmax(np.asarray(attn_scores, dtype=np.float64), axis=_along(softmax_axis, 2, 1))}


OUTPUT_MISTAKES = {
    # The sum a student writes when carrying over the one-query picture, where the weighted values
    # of the inputs are stacked along axis 0.
    "sum_wrong_axis": lambda weighted_values, **_: {"outputs": np.asarray(weighted_values).sum(axis=0)},
    "sum_over_features": lambda weighted_values, **_: {"outputs": np.asarray(weighted_values).sum(axis=2)},
    "no_softmax": lambda attn_scores, values, **_: {"outputs": attn_scores @ values},
    "rounded_weights": lambda values, **_: {"outputs": ROUNDED_WEIGHTS @ values},
    "mean_instead_of_sum": lambda weighted_values, **_: {"outputs": np.asarray(weighted_values).mean(axis=1)},
    # .sum(dim=1, keepdim=True): the summed axis kept, (n, 1, d_v)
    "missing_squeeze": lambda weighted_values, **_: {"outputs": np.asarray(weighted_values).sum(axis=1, keepdims=True)},
    "sum_without_axis": lambda weighted_values, **_: {"outputs": np.asarray(weighted_values).sum()},
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
    "sum_over_features": lambda rounded_1, values, **_: {
        "weighted_values_1_rounded": np.asarray(rounded_1)[:, None] * values,
        "output_1_rounded": (np.asarray(rounded_1)[:, None] * values).sum(axis=1),
    },
    # query 1's exact weights where the diagram's rounded ones were asked for
    "rounded_weights": lambda attn_weights, values, **_: ref_rounded_1(np.asarray(attn_weights)[0], values),
}

# --- the function exercise: the steps in one go ----------------------------------------------


def fn_inputs(rng: np.random.Generator | None = None) -> dict:
    """The notebook's example, or random sizes (d_v other than n) and entries (kept small so the softmax stays
    soft)."""
    if rng is None:
        return {"x": nb01.X, "w_query": nb01.W_QUERY, "w_key": nb01.W_KEY, "w_value": nb01.W_VALUE}
    n, d_model, d_k = (int(v) for v in rng.integers(2, 6, size=3))
    # d_v never equals n: weights times values without a new axis, (n, n) * (n, d_v), must not run
    d_v = int(rng.choice([s for s in range(2, 6) if s != n]))
    return {
        "x": rng.normal(size=(n, d_model)),
        "w_query": rng.normal(scale=0.5, size=(d_model, d_k)),
        "w_key": rng.normal(scale=0.5, size=(d_model, d_k)),
        "w_value": rng.normal(scale=0.5, size=(d_model, d_v)),
    }


def large_fn_inputs(inputs: dict) -> dict:
    """An edge trial for the function: random inputs scaled so that the largest score is 85 (exp() of every score
    still fits in float32: what shows is the clamp; :func:`past_limit_fn_inputs` overflows), drawn (from a
    generator seeded by the trial's own inputs) until a clamp of the scores at the notebook's 16, at 60 or at 80,
    from above or to ±, changes the outputs."""
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in np.ravel(inputs["x"])[:8]])
    for _ in range(200):
        drawn = fn_inputs(rng)
        x, wq, v = drawn["x"], drawn["w_query"], drawn["x"] @ drawn["w_value"]
        s = (x @ wq) @ (x @ drawn["w_key"]).T
        if s.max() < -s.min():  # the largest score positive: a clamp from above shows too
            wq, s = -wq, -s
        scale = np.sqrt(85.0 / (float(np.abs(s).max()) or 1.0))
        s, v = s * scale**2, v * scale
        if s.max(axis=1).min() >= 0 and all(  # a shift by the largest score of all stays exact in float32
                np.abs(softmax(np.clip(s, None if low else -top, top)) @ v - softmax(s) @ v).max() > 1e-3
                for top in (16.0, 60.0, 80.0) for low in (False, True)):
            break
    return {**drawn, "x": x * scale, "w_query": wq}


def past_limit_fn_inputs(inputs: dict) -> dict:
    """An edge trial for the function: random inputs scaled so that the largest score is 200, where exp()
    overflows float32, drawn (from a generator seeded by the trial's own inputs) until the scores have what
    :func:`nb01.past_limit` asks: a softmax shifted by a row's mean or minimum, or by the largest score of all, fails
    on them too."""
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in np.ravel(inputs["x"])[:8]] + [200])
    for _ in range(500):
        drawn = fn_inputs(rng)
        x, wq = drawn["x"], drawn["w_query"]
        s = (x @ wq) @ (x @ drawn["w_key"]).T
        if s.max() < -s.min():
            wq, s = -wq, -s
        if s.max() <= 0:
            continue
        factor = nb01.PAST_LIMIT / s.max()
        if nb01.past_limit(s * factor):
            break
    return {**drawn, "x": x * np.sqrt(factor), "w_query": wq}


def last_key_loud_fn_inputs(inputs: dict) -> dict:
    """An edge trial for the function: random inputs scaled so that the largest score is 150 to 200, at least 95
    above the rest of its row, with the token whose key makes it moved to the end (see
    :func:`nb01.last_key_loud_arrays`): a row maximum that leaves the last key out overflows there. Drawn from a
    generator seeded by the trial's own inputs."""
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in np.ravel(inputs["x"])[:8]] + [201])
    for _ in range(2000):
        drawn = fn_inputs(rng)
        x, wq = drawn["x"], drawn["w_query"]
        s = (x @ wq) @ (x @ drawn["w_key"]).T
        if s.max() < -s.min():
            wq, s = -wq, -s
        if s.max() > 0 and (factor := nb01.last_key_factor(s)) is not None and _rows_settled(s * factor):
            return {**drawn, "x": x[nb01.loudest_key_last(x, wq, drawn["w_key"])] * np.sqrt(factor), "w_query": wq}
    return inputs


def _rows_settled(s: np.ndarray) -> bool:
    """Every row of scores either small (within ±16, as the notebook's) or one-hot (its top 25 above the next): a row
    of scores in the hundreds that blends would leave float32's rounding of those scores (these inputs are not exact
    in it) in the outputs, above the step's tolerance (a right answer was rejected on 1 draw in 40)."""
    top = np.sort(s, axis=-1)
    return bool(np.all((np.abs(s).max(axis=-1) <= 16.0) | (top[:, -1] - top[:, -2] >= 25.0)))


def _scaled_fn(inputs: dict, tag: int, factor_of) -> dict:
    """An edge trial for the function: random inputs, x scaled by √factor (so the scores by factor) where
    ``factor_of(scores)`` gives one (None: draw again), from a generator seeded by the trial's own inputs."""
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in np.ravel(inputs["x"])[:8]] + [tag])
    drawn = fn_inputs(rng)
    for _ in range(500):
        drawn = fn_inputs(rng)
        s = (drawn["x"] @ drawn["w_query"]) @ (drawn["x"] @ drawn["w_key"]).T
        if (factor := factor_of(s)) is not None:
            return {**drawn, "x": drawn["x"] * np.sqrt(factor)}
    return drawn


def far_below_fn_inputs(inputs: dict) -> dict:
    """An edge trial for the function: a row of scores all at or below -110 while no score is above 60: a softmax
    that subtracts a row's maximum only when it is large (or above 0) makes that row 0 / 0."""
    return _scaled_fn(inputs, 110, lambda s: nb01.below_factor(s, whole=False))


def _scores_fn(x, w_query, w_key, **_):
    return (np.asarray(x, dtype=np.float64) @ w_query) @ (np.asarray(x, dtype=np.float64) @ w_key).T


def _fn(x, w_query, w_key, w_value, *, scores=None, normalise=softmax, sum_axis=1, reduce="sum", w_v=None):
    q, k, v = x @ w_query, x @ w_key, x @ (w_value if w_v is None else w_v)
    s = q @ k.T if scores is None else scores(q, k)
    w = normalise(s)
    if reduce in ("sum", "mean") and sum_axis in (0, 1) and np.ndim(w) == 2 and np.ndim(v) == 2:
        # the same sums without the (queries, inputs, d_v) products in between (a replay of 100 tokens)
        total = w @ v if sum_axis == 1 else np.asarray(w).sum(axis=0)[:, None] * v
        return total / np.shape(w)[sum_axis] if reduce == "mean" else total
    weighted = _weighted(w, v)
    if reduce == "none":
        return weighted
    return weighted.mean(axis=sum_axis) if reduce == "mean" else weighted.sum(axis=sum_axis)


def ref_fn(**inp):
    return _fn(**inp)


def _weights_only(x, w_query, w_key, w_value):
    return softmax((x @ w_query) @ (x @ w_key).T)


FN_MISTAKES = {
    # also what the old argument order (x, w_key, w_query, w_value) computes when called in the course's
    # order: the queries come from w_key and the keys from w_query
    "transposed_scores": lambda **i: _fn(**i, scores=lambda q, k: k @ q.T),
    "unexpected_scale": lambda **i: _fn(**i, scores=lambda q, k: q @ k.T / np.sqrt(k.shape[-1])),
    "softmax_wrong_axis": lambda **i: _fn(**i, normalise=lambda s: softmax(s, axis=0)),
    "global_softmax": lambda **i: _fn(**i, normalise=global_softmax),
    "no_softmax": lambda **i: _fn(**i, normalise=lambda s: s),
    "sum_normalisation": lambda **i: _fn(**i, normalise=sum_normalise),
    "sum_wrong_axis": lambda **i: _fn(**i, sum_axis=0),
    "sum_over_features": lambda **i: _fn(**i, sum_axis=2),
    "mean_instead_of_sum": lambda **i: _fn(**i, reduce="mean"),
    "missing_sum": lambda **i: _fn(**i, reduce="none"),
    "width_of_keys": lambda **i: _fn(**i, w_v=i["w_key"]),  # the values made with w_key
    "weights_returned": _weights_only,
    # a softmax written out by hand: the row sums or the row maxima without keepdim, one sum for the whole matrix
    "missing_keepdim": lambda **i: _fn(**i, normalise=sums_without_keepdim),
    "max_without_keepdim": lambda **i: _fn(**i, normalise=max_without_keepdim),
    "max_wrong_axis": lambda **i: _fn(**i, normalise=max_of_columns),
    "max_without_keepdim:float32": lambda **i: _fn(**i, normalise=max_without_keepdim_float32),
    "sum_without_axis": lambda **i: _fn(**i, normalise=one_sum),
    "keys_reshaped": lambda **i: _fn(**i, scores=lambda q, k: q @ k.reshape(k.shape[1], k.shape[0])),
}

# --- hints, in this notebook's words ---------------------------------------------------------

_NO_SCALE = ("You divided the scores by √d_k. This notebook keeps the raw scores, as the original does, so that "
             "every number can be compared with the original's. Leave the scaling out here.")
_SUM_AXIS_OUT = ("You summed over axis 0, the queries, so every query's output got mixed with the others'. "
                 "weighted_values[i, j, k] is query i's weight for token j times feature k of value j: sum over "
                 "the tokens j, axis 1, so that each query keeps its own output.")
_SUM_FEATURES_OUT = ("You summed over axis 2, the features: that adds up the numbers inside each weighted value. "
                     "Output i keeps the d_v features and adds up query i's weighted values of the n tokens: "
                     "axis 1.")

_NO_SCALE_D = ("You divided the scores by d_k. This notebook keeps the raw scores, as the original does, so that "
               "every number can be compared with the original's. Leave the division out here.")
_STATE_AXIS = ("Your numbers are right, but your softmax does not state its axis, so PyTorch picks one by an old "
               "rule (and warns): the rule that picks the wrong axis for a stack of score matrices, as the section "
               "\"Why the axis must be stated\" shows. Give the axis: dim=")

HINTS = {
    "tensors": {
        "key_value_swapped": "Your w_key holds the numbers of w_value_list, and your w_value those of w_key_list: "
        "make each tensor from its own list.",
    },
    "qkv": {
        "product_order_reversed": REVERSED_QKV_HINT,
        "not_computed_with": "Your numbers are right, but your cell does not start from the tensors of part 1: it "
        "makes them again (from the lists). Project x with w_query, w_key and w_value.",
    },
    "predict_scores": {
        "elementwise_product": "(n, d_k) is the shape of the queries themselves (and of queries and keys multiplied "
        "entry by entry). A score is one number for each pair (query i, key j), a dot product of two whole vectors: "
        "one row per query, one column per key.",
        "transposed_first_operand": "(d_k, d_k) is what the transposed queries times the keys would give: it "
        "pairs features with features. Scores pair tokens with tokens, query i with key j.",
        "one_query_only": "(n,) are the scores of one query, one per key. All queries at once give one such "
        "row per query.",
    },
    "predict_softmax": {
        "softmax_wrong_axis": "Axis 0 runs down each column: a softmax along it makes every column sum to 1, "
        "sharing each key out among the queries. Query i's scores lie along row i, across the keys.",
    },
    "predict_weighted": {
        "one_query_only": "(n, d_v) is what one query gets: a weighted value of d_v numbers for each of the n "
        "tokens (the original's picture, for query 1). All queries at once add an axis in front.",
        "no_new_axis": "(n, n) is the shape of the weights. Each weight scales a whole value vector, so every "
        "(query, token) pair keeps a vector of its own.",
        "width_of_keys": "The weighted values are scaled values, so their last axis has the values' width, "
        "d_v. d_k is the width of the keys and queries.",
        "width_of_inputs": "The weighted values are scaled values, so their last axis has the values' width, "
        "d_v, not the inputs' width d_model.",
    },
    "predict_sum": {
        "sum_wrong_axis": "Axis 0 runs over the queries: summing along it would add different queries' "
        "weighted values together. Output i adds up what query i takes from each token.",
        "sum_over_features": "Axis 2 runs over the features of one weighted value: summing along it would add "
        "up the numbers inside each vector. Output i keeps the features and adds up over the tokens.",
    },
    "predict_outputs": {
        "width_of_inputs": "An output is a mix of values, so it has the values' width, d_v — not the inputs' "
        "width d_model (they differ in general).",
        "width_of_keys": "An output is a mix of values, so it has the values' width, d_v. d_k is the width of "
        "the keys and queries.",
        "one_query_only": "(d_v,) is one query's output. The function returns the outputs of all queries.",
        "missing_sum": "(n, n, d_v) is the shape of the weighted values. The outputs add them up over the "
        "tokens, so that axis is gone.",
    },
    "scores": {
        "unexpected_scale": _NO_SCALE,
        "unexpected_scale:d_model": nb01.NO_SCALE_D_MODEL,
        "scale_by_d": _NO_SCALE_D,
        "transposed_scores": "Row i of the scores must belong to query i: you have keys against queries. The "
        "example's scores happen to be symmetric and hide this; other inputs do not.",
        "transposed_first_operand": "You transposed the queries instead of the keys, so your product pairs "
        "feature columns with feature columns. Query i is a row of the queries, key j a row of the keys: it is "
        "the keys that must become columns.",
    },
    "softmax": {
        "clamped:scores": CLAMPED_SCORES_HINT,
        "softmax_wrong_axis": "Your softmax normalised each column (dim=0). Each query's row must sum to 1: "
        "the axis of the keys, dim=1 (or -1).",
        "unexpected_scale": "You scaled the scores by √d_k before the softmax. This notebook uses the raw "
        "scores: apply the softmax to attn_scores directly.",
        "scale_by_d": "You divided the scores by d_k before the softmax. This notebook uses the raw scores: "
        "apply the softmax to attn_scores directly.",
        "not_as_asked": _STATE_AXIS + "1 (or dim=-1).",
        "transposed_scores": "Your weights are the softmax of the transposed scores. Apply the softmax to "
        "attn_scores itself, along each row.",
        "missing_keepdim": "A row reduction of yours (the row sums you divide by, or a logsumexp you subtract) lost "
        "its axis, so it lined each row's number up with a column instead of its own row. Keep the axis: "
        "keepdim=True (.sum(dim=1, keepdim=True)).",
        "max_without_keepdim": "Your row maxima lost their axis: `.max(dim).values` is an (n,) tensor, which lines "
        "up with the columns, so entry (i, j) was shifted by the maximum of row j, which the softmax does not "
        "cancel. Keep the axis: `.max(dim=softmax_axis, keepdim=True).values` (torch.softmax subtracts the "
        "maximum itself, so you need not).",
        "rounded_weights": "You typed in the original's rounded weights. This step asks for the exact softmax "
        "of attn_scores.",
    },
    "weighted_values": {
        "no_softmax": "You weighted the values with the raw scores. Use the softmax weights attn_weights.",
        "rounded_weights": "You weighted the values with the original's rounded weights. Use the exact "
        "softmax weights attn_weights.",
        "transposed_scores": "Weight (i, j) — row i of attn_weights — must scale value j for query i; you "
        "used the transposed weights.",
        "no_new_axis": "You multiplied attn_weights and values entry by entry as they are: (n, n) times "
        "(n, d_v), which only runs because d_v = n here, and pairs weight (i, j) with feature j of value i. "
        "Weight (i, j) must scale the whole of value j: give the weights a new last axis first.",
        "broadcast_wrong_axis": "Your new axis sits in the middle of the weights, so weight (i, j) met feature j "
        "of every value instead of the whole of value j. The new axis belongs at the end of the weights, where "
        "the values have their features.",
        "new_axis_on_values": "You gave the values the new axis, so entry (j, k) of the values met weight "
        "(k, ·): features and tokens got paired. Weight (i, j) must scale every feature of value j: it is the "
        "weights that need a new last axis.",
        "one_query_only": "You computed query 1's weighted values only (the original's picture). Do it for "
        "every query at once: the result has a query axis in front, (n, n, d_v).",
        "summed_too_early": "That is attn_weights @ values: the outputs, already summed over the tokens. This "
        "step keeps every weighted value on its own, one per (query, token) pair: (n, n, d_v).",
    },
    "outputs": {
        "missing_squeeze": "Your sum kept the summed axis as an axis of length 1 (keepdim=True): (n, 1, d_v). "
        "The outputs are (n, d_v): sum without keeping it.",
        "sum_without_axis": "You summed without an axis, which adds up every entry into one number. Sum over "
        "one axis only, the tokens, so that each query keeps an output vector.",
        "sum_wrong_axis": _SUM_AXIS_OUT,
        "sum_over_features": _SUM_FEATURES_OUT,
        "no_softmax": "Your outputs mix the values with the raw scores. Sum the weighted values made from the "
        "softmax weights.",
        "rounded_weights": "These are the outputs of the original's rounded weights, like [2.0, 7.0, 1.5]. Sum "
        "the weighted values made from the exact softmax weights.",
    },
    "rounded_1": {
        "rounded_weights": "You used query 1's exact weights, attn_weights[0]. The diagram's numbers come from "
        "its rounded weights, rounded_1.",
        "sum_over_features": "You summed each weighted value's own features (dim=1). Here the weighted values "
        "of the three tokens are the rows: add the rows up, dim=0.",
        "broadcast_wrong_axis": "Your weights met the features of the values instead of the values "
        "themselves: rounded_1 * values scales column j by weight j. Weight j must scale the whole of row j: "
        "give rounded_1 a new last axis first.",
    },
    "attention_outputs": {
        "transposed_scores": "Your weights come out transposed (keys against queries). Either the product is "
        "reversed, or the softmax went down the columns and was transposed back, or queries and keys were built "
        "from each other's weights — mind the argument order: x, "
        "w_query, w_key, w_value. Row i of the scores belongs to query i.",
        "unexpected_scale": _NO_SCALE,
        "softmax_wrong_axis": "Your softmax normalised each column. Each query's row of scores must sum to 1: "
        "softmax with dim=-1.",
        "sum_wrong_axis": "You summed the weighted values over axis 0, the queries. Sum over axis 1, the "
        "tokens, so that each query keeps its own output.",
        "sum_over_features": "You summed the weighted values over axis 2, the features: your result has "
        "shape (n, n). Sum over axis 1, the tokens, so that each output keeps the d_v features.",
        "missing_sum": "Your function returns the weighted values, (n, n, d_v): add them up over the tokens, "
        "axis 1, to get the outputs.",
        "width_of_keys": "Your values are made with w_key. The values, and the outputs that mix them, come "
        "from w_value, whose width d_v may differ from d_k.",
        "weights_returned": "Your function returns the attention weights, (n, n). The outputs mix the values with "
        "them: the weighted values summed over the tokens, (n, d_v).",
        "missing_keepdim": "Your row sums lost their axis: an (n,) tensor, which lines up with the columns, so "
        "entry (i, j) was divided by the sum of row j. Keep the axis: .sum(dim=-1, keepdim=True), or use "
        "torch.softmax with dim=-1.",
        "max_without_keepdim": "Your row maxima lost their axis: an (n,) tensor, which lines up with the columns, so "
        "entry (i, j) was shifted by the maximum of row j, which the softmax does not cancel. Keep the axis: "
        ".max(dim=-1, keepdim=True).values, or use torch.softmax with dim=-1.",
        "sum_without_axis": "You divided by one sum over the whole matrix (a .sum() without its dim), so no row of "
        "weights sums to 1. Sum each row on its own: .sum(dim=-1, keepdim=True).",
        "not_as_asked": _STATE_AXIS + "-1 (or dim=1).",
    },
}


EXAMPLE_ONLY = ("scores_given", "implicit_2d", "implicit_3d")  # the notebook's example of an implicit softmax axis


def _value(name, title, answers, reference, inputs=None, hints=None, **kw):
    if "predicts" not in kw:
        kw.setdefault("edge", large_numbers)  # numbers far above the notebook's: a clamp at its largest shows
        # the figures' numbers (`given`, from the lists) are there to compare with, not to copy: a step computes
        # from the tensors of the steps before it
        # and so are the example's of "why the axis must be stated" (its scores typed in, and their softmaxes)
        kw.setdefault("not_with", ("given", *EXAMPLE_ONLY))
    own = {} if "predicts" in kw else {
        "not_as_asked:not_with": "Your cell takes numbers from {names}, numbers the notebook shows to compare with "
        "(the figures' `given`, made from the lists, or the example of why the axis must be stated), not to copy: "
        "they stay the example's whatever the steps before give. Compute this step from the tensors of the steps "
        "before it, so that it follows them when they change."}
    return Exercise(f"03.{name}", notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                    inputs=inputs or upstream_of(world, answers[0]),
                    hints={**own, **HINTS.get(name, {}), **(hints or {})}, **kw)


_COMPUTED_SHAPE = ("Your cell computes the result and reads its shape off it: this step asks you to predict the "
                   "shape before anything is computed, from the sizes alone (the rule for products above). Write it "
                   "with the size names, like (n, d_model).")


_SIZE_NAMES = ("Your prediction is right for this notebook's sizes, but it reads sizes off the notebook's tensors or "
               "lists (`.shape`, `len(…)`), which keep this example's sizes when the sizes change. Write every size "
               "with its size name (n, d_model, d_k, d_v): that is what makes it a prediction for any sizes.")


def _sizes_only(inputs):
    """A fresh world's sizes and earlier predictions only (the notebook's own world whole): the other names keep the
    notebook's values. A prediction built on an earlier one (`(weighted_shape[0], d_v)`) follows the sizes too."""
    def sizes(rng: np.random.Generator | None = None) -> dict:
        drawn = inputs(rng)
        return drawn if rng is None else {k: v for k, v in drawn.items() if k in SIZES or k.endswith("_shape")}

    return sizes


def _resized(inputs: dict, sizes: dict) -> dict:
    """``inputs`` with these sizes, and the earlier predictions among them (the shapes) made to follow."""
    out = {**inputs, **sizes}
    n, d_v = out.get("n"), out.get("d_v")
    shapes = {"scores_shape": (n, n), "weighted_shape": (n, n, d_v), "outputs_shape": (n, d_v)}
    return {**out, **{k: np.array(v) for k, v in shapes.items() if k in inputs}}


def mirrored_sizes(inputs: dict) -> dict:
    """An edge replay for the shape predictions: the drawn sizes mirrored within :data:`SIZED` (2 ↔ 11, 5 ↔ 9, 7
    stays), which reverses the order of every two of them: a prediction that takes the larger of two sizes
    (`max(d_k, d_v)`), right on the draws where that one happened to be the right one, shows."""
    mirror = dict(zip(SIZED, SIZED[::-1]))
    return _resized(inputs, {k: mirror.get(int(inputs[k]), int(inputs[k])) for k in SIZES if k in inputs})


mirrored_sizes.of_first_trial = True  # the first replay's own sizes, mirrored: every pair of them changes order


def even_sizes(inputs: dict) -> dict:
    """An edge replay for the predictions: an even number of tokens and values one number wide (n = 6, d_model = 10,
    d_k = 8, d_v = 1; the fresh sizes are mostly odd and never 1): a prediction that holds only for odd sizes
    (`n % 2`) or that treats one-wide values apart (`(n,) if d_v == 1`) shows."""
    return _resized(inputs, {k: v for k, v in {"n": 6, "d_model": 10, "d_k": 8, "d_v": 1}.items() if k in inputs})


def one_token_sizes(inputs: dict) -> dict:
    """An edge replay for the shape predictions: a single token (n = 1, d_model = 5, d_k = 7, d_v = 9): a prediction
    that drops an axis of length 1 (`(n, n) if n > 1 else (n,)`) shows."""
    return _resized(inputs, {k: v for k, v in {"n": 1, "d_model": 5, "d_k": 7, "d_v": 9}.items() if k in inputs})


def _predict_shape(name, title, answer, reference, mistakes):
    # Replayed on fresh sizes: (n, n) is right for every size, a typed-in (3, 3) or (n, d_k) is not. A shape read
    # off the computed result is right for every size too, and is not a prediction.
    # Only the sizes are fresh: a shape read off a tensor of the notebook (`tuple(outputs.shape)`, `len(x_list)`)
    # stays the example's, as it would if the sizes changed and the tensors were not made yet.
    return _value(name, title, (answer,), reference, inputs=_sizes_only(upstream_of(sized_world, answer)), reads=SIZES,
                  mistakes=mistakes, predicts="shape", how={"shape_of_result": False, "shape_read": False},
                  edge=(mirrored_sizes, even_sizes, one_token_sizes),  # and a single token
                  hints={"not_as_asked:shape_of_result": _COMPUTED_SHAPE, "not_as_asked:shape_read": _SIZE_NAMES})


def _predict_axis(name, title, answer, mistakes, ndim):
    # An axis does not depend on the sizes or the numbers, and every wrong axis already differs from the right one
    # on the notebook's own answer. A negative axis counts from the
    # right of the tensor's ndim axes (-1 is axis 1 of the (n, n) scores).
    # Replayed on fresh sizes all the same: an axis computed from a size (`n - 2`, right while n is 3) is not one.
    return _value(name, title, (answer,), _axis(answer, 1), inputs=_sizes_only(upstream_of(sized_world, answer)),
                  reads=SIZES, mistakes=mistakes, predicts="axis", ndim=ndim, edge=even_sizes)


register(
    _value("tensors", "The inputs and the weight matrices", ("x", "w_query", "w_key", "w_value"), ref_tensors,
           # and a token of zeros (dropping it shows); a token said twice (merging equal rows shows)
           # and one token, and weights one column wide: a squeeze shows
           edge=(large_numbers, precise_numbers, small_numbers, repeated_numbers, long_loud, one_token, one_column),
           reads=("x_list", "w_query_list", "w_key_list", "w_value_list"), dtype="float32", framework="torch",
           mistakes={"swapped_projections": swapped_tensors, "key_value_swapped": key_value_swapped_tensors}),
    # from the float32 tensors of part 1 (a float64 result makes the next product raise)
    # and values narrower than the keys (the replays have them wider): a cut to d_v columns shows either way; and
    # numbers with seven decimals (a trip through bfloat16 shows)
    _value("qkv", "Queries, keys and values", ("queries", "keys", "values"), ref_qkv,
           edge=(large_numbers, narrow_values, precise_numbers, long_loud, loud_values),  # values in the thousands
           reads=("x", "w_query", "w_key", "w_value"), framework="torch", dtype="float32",
           computed_with=("x", "w_query", "w_key", "w_value"), mistakes=QKV_MISTAKES, hints=QKV_MIX_UPS[1]),
    _predict_shape("predict_scores", "Prediction: the shape of the scores", "scores_shape", ref_scores_shape,
                   PREDICT_SCORES_MISTAKES),
    # float32 all the way, as part 1 asks: integer scores make the softmax raise, float64 weights the next product
    _value("scores", "The attention scores", ("attn_scores",), ref_scores, reads=("queries", "keys"),
           edge=(large_numbers, narrow_values, small_numbers, one_token, long_loud),  # one token: a squeeze shows
           framework="torch", mistakes=SCORES_MISTAKES, dtype="float32",
           how={"loop": False, "matmul": True},  # "all the scores at once with one matrix product"
           hints={"projection_reused:values_for_keys": "Your scores pair the queries with the values. A score says "
                  "how well a query matches a key; the values only come in after the softmax: queries @ keys.T.",
                  "not_as_asked:loop": "Your numbers are right, but your cell goes through the keys (or the "
                  "queries) one at a time, in a loop or a comprehension. This step makes all the scores at once: one "
                  "matrix product of the queries and the transposed keys.",
                  "not_as_asked:matmul": "Your numbers are right, but your cell builds the dot products without a "
                  "matrix product (a broadcast product and a sum, say). This step makes all the scores with one "
                  "matrix product of the queries and the transposed keys."}),
    _predict_axis("predict_softmax", "Prediction: the axis of the softmax", "softmax_axis",
                  {"softmax_wrong_axis": _axis("softmax_axis", 0)}, ndim=2),
    # "Why the axis must be stated": a softmax without its axis is what this part argues against
    # the TO-DO uses the predicted axis (dim=softmax_axis): from a wrong prediction, the right code is 🟡
    _value("softmax", "The attention weights", ("attn_weights",), ref_softmax_along,
           reads=("attn_scores", "softmax_axis"), framework="torch", mistakes=SOFTMAX_MISTAKES,
           how={"implicit_softmax_dim": False}, dtype="float32",
           # and scores up to 200: a softmax that does not subtract each row's own maximum fails
           # and a token of zeros; scores up to 800 and a row far below 0 (see nb01's softmax)
           # and the largest score in the last column; and a token said twice (equal columns merged show)
           edge=(large_numbers, near_limit_scores, past_limit_scores, small_numbers, far_past_scores, past_half_scores,
                 far_below_scores, precise_numbers, last_key_loud_scores, repeated_numbers,
                 apart_rows),  # and rows 2²⁰ apart: one maximum of the whole matrix subtracted first shows
           signs={"unstable_softmax": overflow_sign(ref_softmax_along, nb01.scores_of, 88.0),
                  "global_max_subtraction": global_shift_sign(ref_softmax_along, nb01.scores_of, 87.0),
                  "global_max_rounding": global_rounding_sign(ref_softmax_along, _global_shift_along),
                  "logsumexp_rounding": logsumexp_sign(ref_softmax_along, nb01.scores_of,
                                                       lambda softmax_axis, **_: int(softmax_axis))}),
    _predict_shape("predict_weighted", "Prediction: the shape of the weighted values", "weighted_shape",
                   ref_weighted_shape, PREDICT_WEIGHTED_MISTAKES),
    _value("weighted_values", "The weighted values, by broadcasting", ("weighted_values",), ref_weighted_values,
           reads=("attn_weights", "values"), framework="torch", mistakes=WEIGHTED_MISTAKES,
           how={"loop": False}, dtype="float32",
           # seven decimals too: values sent through float16 show; one token: a squeeze shows; scores up to 200:
           # weights written out again in the cell without each row's maximum overflow
           # and values in the thousands: a clip of the results at a "safe" bound shows
           edge=(large_numbers, precise_numbers, one_token, past_limit_scores, loud_values),
           hints={"not_as_asked": "Your numbers are right, but your cell goes through a loop (over the queries, "
                  "the tokens or the features). This step is about broadcasting: one product of two tensors, one of "
                  "them given a new axis, makes every weighted value at once."}),
    _predict_axis("predict_sum", "Prediction: the axis of the sum", "sum_axis",
                  {"sum_wrong_axis": _axis("sum_axis", 0), "sum_over_features": _axis("sum_axis", 2)}, ndim=3),
    _value("outputs", "The outputs", ("outputs",), ref_outputs, reads=("weighted_values", "sum_axis"),
           framework="torch", mistakes=OUTPUT_MISTAKES, computed_with=("weighted_values",),
           dtype="float32",  # as its neighbours: a float64 sum makes the cell's own comparison raise
           # one token: a squeeze shows; values one wide, narrower than the tokens are many: a cut of the token
           # axis to d_v shows
           edge=(large_numbers, one_token, narrow_values, loud_values),  # and values in the thousands: a clip
           hints={"not_computed_with": "Your numbers are right, but your cell never uses `weighted_values`: this "
                  "step sums the weighted values of the previous step over the right axis (a matrix product of the "
                  "weights and the values gives the same numbers, and skips the point of the step)."}),
    _value("rounded_1", "The original's output 1, by broadcasting a vector",
           ("weighted_values_1_rounded", "output_1_rounded"), ref_rounded_1, reads=("rounded_1", "values"),
           framework="torch", mistakes=ROUNDED_1_MISTAKES, dtype="float32",  # float32 all the way, as part 1 asks
           # its replays keep the example's widths (below; the large numbers' edge has its own), and so does its
           # edge of small numbers (outputs set to 0 below a threshold show)
           # and one token: a squeeze shows (no trial of values in the thousands: the rounded weights are not exact
           # in float32, so a right answer near 0 is off by 1e-4 there)
           edge=(small_numbers_3, one_token_3),
           # values as wide as the example's: the cell's given print subtracts the answer from outputs[0], so an
           # answer typed in at the example's width would raise there instead of showing as typed in
           inputs=upstream_of(lambda rng=None: world(rng, d_v=3), "weighted_values_1_rounded"),
           # "their sum", by "one more broadcast": the output summed from the weighted values, which no loop makes
           computed_with=("weighted_values_1_rounded",), how={"loop": False},
           hints={"not_computed_with": "Your numbers are right, but your `output_1_rounded` does not come from "
                  "`weighted_values_1_rounded`: this step sums the weighted values you just made (a product of "
                  "the weights and the values gives the same numbers, and skips the point of the step).",
                  "not_as_asked": "Your numbers are right, but your cell goes through the tokens one at a time (a "
                  "loop or a comprehension). This step is one more broadcast: one product of the weights, given a "
                  "new axis, and the values makes the three weighted values at once."}),
    _predict_shape("predict_outputs", "Prediction: the shape of the function's result", "outputs_shape",
                   ref_outputs_shape, PREDICT_OUTPUTS_MISTAKES),
    Exercise(
        "03.attention_outputs", notebook=NOTEBOOK, title="Self-attention as one function",
        answers=("attention_outputs",), kind="function", framework="torch", inputs=fn_inputs,
        # atol 1e-3: float32's rounding of the loud trials' scores (up to 200, not exact in it, rows that blend)
        # reaches the outputs by up to 1.4e-5 for the plain answer (rejected on about 1 draw in 150 at 1e-5) and by
        # up to 6e-4 for right answers written otherwise (a broadcast sum, a softmax without its dim: rejected on an
        # unseeded run at 5e-5); numbers cut or rounded below that are named by their own signs
        reference=ref_fn, mistakes=FN_MISTAKES, atol=1e-3, points=2, hints=HINTS["attention_outputs"],
        how={"implicit_softmax_dim": False}, dtype="float32",
        # and the first trial's tokens in reverse order (the same shapes): a result kept by shape shows
        # and a token of zeros (its scores are 0: a mask of the zero scores, or a sparse softmax, drops them), and
        # small values (outputs set to 0 below a threshold show)
        edge=(one_row("x", "w_value"), large_fn_inputs, past_limit_fn_inputs, rows_reversed("x"), zero_row("x"),
              scaled_by("w_value", 2.0 ** -10), scaled_by("w_value", 4096.0),  # outputs near 0.001, and thousands
              repeated_row("x"), far_below_fn_inputs, more_rows("x"),
              last_key_loud_fn_inputs,  # and the largest score in the last column; 24 tokens, one loud
              loud_token(scaled=False), loud_token(n=130, scaled=False), loud_token(n=130, scaled=False, twin=True),
              # (see 02.self_attention's: blocks of keys, a one-hot shortcut, heads of 64)
              loud_token(n=130, scaled=False, top=12.0, gap=9.0, quiet=16.0),
              loud_token(scaled=False, top=70_000.0, gap=60_000.0, quiet=256.0),  # a row maximum kept in float16
              wide_projections("w_query", "w_key", "w_value")),
        # scores up to 200: a softmax that does not subtract each row's own maximum fails on some rows only
        signs={"unstable_softmax": overflow_sign(ref_fn, _scores_fn, 88.0),
               "global_max_subtraction": global_shift_sign(ref_fn, _scores_fn, 87.0)},
        widths=("w_key", "w_value"),  # "any n, d_model, d_k and d_v": values wider than the keys, and narrower
    ),
)
