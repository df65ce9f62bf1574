"""Notebook 02 — from dot products to trainable weights (seed 001), in PyTorch.

Part 1 uses the six embeddings ``x`` as their own queries, keys and values; part 2 projects
them with three (d_model, d_k) = (3, 2) weight matrices drawn by ``torch.rand`` after
``torch.manual_seed(123)``. Those draws are fixed by the seed, so their exact float32
values are written out below and every reference is computed in NumPy.

Fresh worlds draw embeddings of both signs (the notebook's are all positive, which hides a
plain division by the sum going wrong) and weights like ``torch.rand``. Part 1's score matrix
is symmetric in every world (x xᵀ), so a softmax down the columns gives exactly the transpose of
the right weights: it is named as ``softmax_wrong_axis`` all the same.
"""

from __future__ import annotations

import functools

import numpy as np

from ..mistakes import CLAMPED_SCORES_HINT
from ..reference import (
    global_shift_float32,
    global_softmax,
    max_of_columns,
    max_without_keepdim,
    max_without_keepdim_float32,
    one_sum,
    projected_scores,
    self_attention,
    softmax,
    sum_normalise,
    sums_without_keepdim,
)
from ..roles import mix_ups
from ..spec import (
    Exercise,
    Probe,
    global_rounding_sign,
    global_shift_sign,
    loud_token,
    more_rows,
    one_row,
    overflow_sign,
    register,
    repeated_row,
    rows_reversed,
    square_x,
    upstream_of,
    wide_projections,
    zero_row,
)
from . import nb01

NOTEBOOK = "02_dot_products_to_trainable_weights"
SEED = "001_8601a33d321beecd.txt"  # every number it prints must appear in the stored outputs

# "Your journey starts with one step": one 3-d embedding per word (x^1 … x^6).
X = np.array(
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
# The same three draws in float64 (torch.rand(3, 2, dtype=torch.float64) after the same seed): other numbers.
W_QUERY_64 = np.array([[0.368895870664273, 0.013365949855291825], [0.5917800383018739, 0.09263931233897627],
                       [0.472451921042887, 0.5220316791666796]])
W_KEY_64 = np.array([[0.6050827078458633, 0.5312960527869689], [0.9485464763406578, 0.05667562533261972],
                     [0.8285744797310848, 0.09380308349175259]])
W_VALUE_64 = np.array([[0.19596254575695027, 0.22033581483610876], [0.19462613768691917, 0.41458350743866934],
                       [0.7430684281621825, 0.3251963060982157]])
# The same three draws with torch.randn (normal, both signs) instead of torch.rand, after the same seed.
W_QUERY_N = np.array([[-0.11146711558103561, 0.12036294490098953], [-0.3696345090866089, -0.2404179722070694],
                      [-1.1969243288040161, 0.20926935970783234]])
W_KEY_N = np.array([[-0.9723550081253052, -0.755045473575592], [0.32390275597572327, -0.10852263122797012],
                    [0.21033115684986115, -0.39084282517433167]])
W_VALUE_N = np.array([[0.23497341573238373, 0.6652604341506958], [0.3528207540512085, 0.9728211164474487],
                      [-0.03861621767282486, -0.8861014246940613]])
JOURNEY = 1  # x^(2), the second word, is row 1
D_K = 2  # the notebook's d_k: a code that divides by √2 whatever the keys is caught on other sizes
N, D_MODEL = 6, 3


def world(rng: np.random.Generator | None = None, one_width: bool = False, rows: bool = True,
          sizes: tuple[int, int, int, int] | None = None) -> dict:
    """Every array the notebook defines, in order (``rng=None``: the notebook's own numbers).

    Fresh worlds draw embeddings of both signs and weight matrices mostly positive (like ``torch.rand``, with
    some negative entries so that an ``abs`` shows), of other sizes than the notebook's, all four different:
    another number of words n than six (a loop over a typed-in range, a buffer of six, an index counted from the
    end show), inputs of another width d_model than 3, keys of another width d_k than 2 and values of another
    width d_v than the keys (the given ``d_model`` and ``d_k`` follow), so that a size typed in, or √d_v, √n or
    √d_model instead of √d_k, shows. ``one_width``: values as wide as the keys (SelfAttentionV1 draws all three
    matrices d_k wide). ``rows=False``: six words, as a step whose TO-DO names the shape (6, 6) has. ``sizes``:
    (n, d_model, d_k, d_v) given, for a second draw of new numbers in the same shapes.
    """
    d_k = d_v = D_K
    if rng is None:
        x, wq, wk, wv = X, W_QUERY, W_KEY, W_VALUE
    else:
        while sizes is None:
            n, d_model, d_k, d_v = (int(v) for v in rng.choice(np.arange(3, 9), size=4, replace=False))
            if (n != N or not rows) and d_model != D_MODEL:
                sizes = (n if rows else N, d_model, d_k, d_k if one_width else d_v)
        n, d_model, d_k, d_v = sizes
        x, wq, wk, wv = _fresh(rng, d_k, d_v, n, d_model)
    return _world_of(x, wq, wk, wv, d_k)


def _world_of(x, wq, wk, wv, d_k: int) -> dict:
    """The notebook's arrays computed from its embeddings and weights."""
    query = x[JOURNEY]
    s2 = x @ query
    s = x @ x.T
    keys, values = x @ wk, x @ wv
    query_2, key_2 = x[JOURNEY] @ wq, x[JOURNEY] @ wk
    s2_qk = query_2 @ keys.T
    w2_qk = softmax(s2_qk / np.sqrt(keys.shape[-1]))
    return {
        "x": x, "query": query,
        "attn_scores_2": s2, "attn_scores_2_vec": s2,
        "attn_weights_2_sum": sum_normalise(s2), "attn_weights_2": softmax(s2),
        "context_vec_2_simple": softmax(s2) @ x,
        "attn_scores_loop": s, "attn_scores": s, "attn_weights": softmax(s), "outputs": softmax(s) @ x,
        "x_2": x[JOURNEY], "d_model": int(x.shape[1]), "d_k": d_k,
        "w_query": wq, "w_key": wk, "w_value": wv,
        "query_2": query_2, "key_2": key_2, "value_2": x[JOURNEY] @ wv,
        "keys": keys, "values": values,
        "attn_score_22": query_2 @ key_2,
        "attn_scores_2_qk": s2_qk,
        "attn_weights_2_qk": w2_qk,
        "context_vec_2": w2_qk @ values,
        "outputs_v1": _v1(x, d_k),
    }


def _well_divided(scores: np.ndarray) -> bool:
    """Every row's sum is far from 0, so that dividing by it (a catalogued mistake) is not so
    ill-conditioned that float32 inputs change the result beyond the tolerance."""
    s = np.atleast_2d(scores)
    return bool(np.all(np.abs(s.sum(axis=-1)) > 0.2 * np.abs(s).sum(axis=-1)))


def _fresh(rng: np.random.Generator, d_k: int = D_K, d_v: int = D_K, n: int = N,
           d_model: int = D_MODEL) -> tuple[np.ndarray, ...]:
    """Embeddings of both signs and weights mostly positive, drawn again until every score vector the notebook
    divides by its sum has a sum well away from 0."""
    while True:
        x = rng.normal(0.0, 1.5, size=(n, d_model))
        wq, wk = (rng.uniform(-0.3, 1.0, size=(d_model, d_k)) for _ in range(2))
        wv = rng.uniform(-0.3, 1.0, size=(d_model, d_v))
        s2_qk = (x[JOURNEY] @ wq) @ (x @ wk).T
        if _well_divided(x @ x.T) and _well_divided(s2_qk):
            return x, wq, wk, wv


def _one(name: str, fn):
    """A value reference (or wrong variant) that returns ``{name: fn(**inputs)}``."""
    return lambda **i: {name: fn(**i)}


# --- part 2: trainable projections --------------------------------------------------------


def attention(x, w_query, w_key, w_value, *, scale=None, transpose=False, axis=-1, swap_kv=False,
              normalise=None, mix_inputs=False):
    """Context vectors softmax(Q·Kᵀ / scale)·V with switches for the catalogued mistakes
    (``scale=None`` divides by √d_k; see :func:`helpers.course.reference.self_attention`)."""
    weights, out = self_attention(
        x, w_query, w_key, w_value, scale=scale, transpose=transpose, swap_kv=swap_kv,
        normalise=normalise or (lambda s: softmax(s, axis=axis)),
    )
    return weights @ x if mix_inputs else out


def _causal_softmax(s):
    """A softmax of each row over the keys up to its own position (a causal mask)."""
    s = np.asarray(s, dtype=np.float64)
    return softmax(np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf))


def _weights_2_qk(attn_scores_2_qk, keys, scale=None, **_):
    d_k = keys.shape[-1]
    return softmax(attn_scores_2_qk / (np.sqrt(d_k) if scale is None else scale))


def _scaled_function_inputs(inputs: dict, tag: int, factor_of) -> dict:
    """An edge trial for the function: random inputs, the query weights times ``factor_of(scaled scores)`` (None:
    draw again), from a generator seeded by the trial's own inputs."""
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in np.ravel(inputs["x"])[:8]] + [tag])
    drawn = _function_inputs(rng)
    for _ in range(500):
        drawn = _function_inputs(rng)
        s = projected_scores(drawn["x"], drawn["w_query"], drawn["w_key"])
        if (factor := factor_of(s)) is not None:
            return {**drawn, "w_query": np.asarray(drawn["w_query"], dtype=np.float64) * factor}
    return drawn


def far_below_inputs(inputs: dict) -> dict:
    """An edge trial for the function: a row of scaled scores all at or below -110 while none is above 60: a
    softmax that subtracts a row's maximum only when it is large (or above 0) makes that row 0 / 0."""
    return _scaled_function_inputs(inputs, 110, lambda s: nb01.below_factor(s, whole=False))


def _scaled_2_qk(attn_scores_2_qk, keys, **_):
    return np.asarray(attn_scores_2_qk, dtype=np.float64) / np.sqrt(np.shape(keys)[-1])


def _projected(x, w_query, w_key, **_):
    return projected_scores(x, w_query, w_key)


def _reshaped(x, w_query, w_key, w_value):
    """keys.reshape(d_k, n) where keys.T was meant."""
    q, k, v = x @ w_query, x @ w_key, x @ w_value
    return softmax(q @ k.reshape(k.shape[1], k.shape[0]) / np.sqrt(k.shape[-1])) @ v


ATTENTION_MISTAKES = {
    "missing_scale": lambda **i: attention(**i, scale=1.0),
    "power_precedence": lambda **i: attention(**i, scale=2.0 * i["w_key"].shape[-1]),  # s / d_k ** 1/2
    "scale_by_n": lambda **i: attention(**i, scale=float(np.sqrt(i["x"].shape[0]))),
    "scale_by_d": lambda **i: attention(**i, scale=float(i["w_key"].shape[-1])),
    "scale_by_d_model": lambda **i: attention(**i, scale=float(np.sqrt(i["x"].shape[-1]))),
    "fixed_scale": lambda **i: attention(**i, scale=float(np.sqrt(D_K))),
    "scale_truncated": lambda **i: attention(**i, scale=float(np.floor(np.sqrt(i["w_key"].shape[-1])))),
    "transposed_scores": lambda **i: attention(**i, transpose=True),
    "softmax_wrong_axis": lambda **i: attention(**i, axis=0),
    "swapped_projections": lambda **i: attention(**i, swap_kv=True),
    "mixed_inputs_not_values": lambda **i: attention(**i, mix_inputs=True),
    "weights_returned": lambda **i: self_attention(**i)[0],
    # a softmax written out by hand: the row sums without keepdim, the row maxima without keepdim, one sum for all
    "missing_keepdim": lambda **i: attention(**i, normalise=sums_without_keepdim),
    "max_without_keepdim": lambda **i: attention(**i, normalise=max_without_keepdim),
    "max_wrong_axis": lambda **i: attention(**i, normalise=max_of_columns),
    "global_softmax": lambda **i: attention(**i, normalise=global_softmax),
    "sum_without_axis": lambda **i: attention(**i, normalise=one_sum),
    # a causal mask (`is_causal=True`), which this step does not ask for: each token sees only those before it
    "unasked_causal_mask": lambda **i: attention(**i, normalise=_causal_softmax),
    # the values made with w_key (or the weights applied to the keys)
    "projection_reused": lambda x, w_query, w_key, **_: attention(x, w_query, w_key, w_key),
    "keys_reshaped": lambda x, w_query, w_key, w_value: _reshaped(x, w_query, w_key, w_value),
}
ATTENTION_HINTS = {
    "transposed_scores": "Your weights come out transposed (row i belongs to key i): the scores computed as "
    "keys @ queries.T, or a softmax down the columns (dim=0) transposed back, or the queries made with w_key and "
    "the keys with w_query. Use queries @ keys.T and the softmax along each row (dim=-1).",
    "softmax_wrong_axis": "Your softmax normalised each column of the scores. Row i holds query i's scores, so "
    "each row must sum to 1: softmax along dim=-1.",
    "swapped_projections": "Your keys and values use each other's weights. Keys come from w_key, values "
    "from w_value.",
    "scale_by_d_model": "You divided by the square root of d_model, the width of an input. The scores are dot "
    "products of queries with keys, so divide by √d_k, the width of a key (keys.shape[-1]).",
    "fixed_scale": "You divided by √2, this notebook's d_k, whatever the width of the keys. Take d_k from the "
    "keys the function computes (keys.shape[-1]), so that it works for any size.",
    "mixed_inputs_not_values": "You mixed the inputs x with the weights. The context vectors mix the values, "
    "x @ w_value.",
    "weights_returned": "You returned the attention weights, one row of n weights per query. The context vectors "
    "mix the values with them: weights @ values.",
    "power_precedence": "`scores / d_k ** 1/2` is (scores / d_k) / 2: Python raises d_k to the power 1 first and "
    "then divides by 2, so no square root is taken. Write d_k ** 0.5 (or math.sqrt(d_k)).",
    "missing_keepdim": "Your row sums lost their axis: a (n,) tensor, which lines up with the columns, so entry "
    "(i, j) was divided by the sum of row j. Keep the axis: `.sum(dim=-1, keepdim=True)` (or use torch.softmax "
    "with dim=-1).",
    "max_without_keepdim": "The maxima you subtracted line up with the columns: entry (i, j) was shifted by the "
    "maximum of row j, which the softmax does not cancel. A `s.max(dim=-1).values` without keepdim is an (n,) tensor "
    "that does this. Subtract each row's own maximum: `s.max(dim=-1, keepdim=True).values` (or use torch.softmax "
    "with dim=-1).",
    "global_softmax": "You divided by one sum over the whole matrix, so no row sums to 1. Each query's row is "
    "normalised on its own: sum along dim=-1 with keepdim=True (or use torch.softmax with dim=-1).",
    "sum_without_axis": "Your row maxima are right, but you divided by one sum over the whole matrix (a `.sum()` "
    "without its dim), so no row sums to 1. Sum each row on its own: `.sum(dim=-1, keepdim=True)`.",
    "projection_reused": "Your outputs mix the keys: the values made with w_key, or the weights applied to the keys. "
    "The keys only decide the weights; the context vectors mix the values, x @ w_value.",
}


def _function_inputs(rng: np.random.Generator | None, one_width: bool = False) -> dict:
    """The notebook's example (rng=None) or a fresh random one of random sizes, all different: d_k of 3 or
    more (so that √2, this notebook's √d_k, is wrong), and n, d_model, d_v other than d_k (so that √n,
    √d_model and √d_v are wrong too: in the notebook's example d_v = d_k). ``one_width``: the values as wide
    as the keys, as in SelfAttentionV2, whose layers all have one width."""
    if rng is None:
        return {"x": X, "w_query": W_QUERY, "w_key": W_KEY, "w_value": W_VALUE}
    n, d_model, d_k, d_v = (int(v) for v in rng.choice(np.arange(3, 9), size=4, replace=False))
    return {
        "x": rng.normal(size=(n, d_model)),
        "w_query": rng.normal(size=(d_model, d_k)),
        "w_key": rng.normal(size=(d_model, d_k)),
        "w_value": rng.normal(size=(d_model, d_k if one_width else d_v)),
    }


def swapped_n_d_k(first: dict) -> dict:
    """An edge trial from the first random trial: its number of tokens and its keys' width swapped (the other
    sizes kept), so that whichever was the larger there is the smaller here: a d_k taken as the smaller (or the
    larger) of the sizes of q, `min(q.shape)`, shows. New numbers, from a generator seeded by the trial's."""
    n, d_model = np.shape(first["x"])
    d_k, d_v = np.shape(first["w_key"])[-1], np.shape(first["w_value"])[-1]
    rng = np.random.default_rng([n, d_model, d_k, d_v])
    return {"x": rng.normal(size=(d_k, d_model)), "w_query": rng.normal(size=(d_model, n)),
            "w_key": rng.normal(size=(d_model, n)), "w_value": rng.normal(size=(d_model, d_v))}


swapped_n_d_k.of_first_trial = True


def small_scores(first: dict) -> dict:
    """An edge trial from the first random trial: its scores rescaled to add up to 0.5 (or, when they add up to 0
    or less, made a tenth as large), so that a sum kept from falling below 1 (`.clamp(min=1)`) shows."""
    s = np.asarray(first["attn_scores_2"], dtype=float)
    total = float(s.sum())
    return {**first, "attn_scores_2": s * (0.5 / total) if total > 0 else s / 10}


small_scores.of_first_trial = True


def journey_not_largest(first: dict) -> dict:
    """An edge trial from the first random trial: the first word's score made the largest, above the journey's
    score with itself (which is the largest in most draws), so that code relying on that shows."""
    s = np.array(first["attn_scores_2"], dtype=float)
    s[0] = s.max() + 1.0
    return {**first, "attn_scores_2": s}


journey_not_largest.of_first_trial = True


def negative_sum(first: dict) -> dict:
    """An edge trial from the first random one: its scores moved down so that they add up to −0.5 (the notebook's
    own example shows a negative score): a division told to do something else when the sum is not positive
    shows."""
    s = np.asarray(first["attn_scores_2"], dtype=float)
    return {**first, "attn_scores_2": s - (float(s.sum()) + 0.5) / s.size}


negative_sum.of_first_trial = True


def tiny_sum(first: dict) -> dict:
    """An edge trial from the first random one: its scores on a grid of sixteenths, the last one set so that they add
    up to exactly 2⁻¹⁴ (about 6e-5), every partial sum exact in float32 whatever the order. The right weights are
    the scores times 2¹⁴; a small number added to the sum "for safety" (1e-6) moves every weight by about 2 %.
    The largest score is a power of two, above all the others' sizes together, so that scores first divided by it
    (`s / s.max()`, then by their sum: the same weights) stay exact too."""
    s = np.round(np.asarray(first["attn_scores_2"], dtype=float) * 16.0) / 16.0
    s = np.clip(s, -8.0, 8.0)
    if s.size < 3:
        return first
    top = int(np.argmax(s[:-1]))
    rest = [i for i in range(s.size - 1) if i != top]
    s[top] = 2.0 ** int(np.ceil(np.log2(np.abs(s[rest]).sum() + 1.0)))
    s[-1] = 2.0**-14 - float(s[:-1].sum())  # (negative: the power of two above outweighs the rest)
    return {**first, "attn_scores_2": s}


tiny_sum.of_first_trial = True

NEAR_LIMIT = 85.0  # exp(85) still fits in float32 (up to about 88.7): only a clamp shows here (PAST_LIMIT: overflow)


def _grid(a, step: float) -> np.ndarray:
    return np.round(np.asarray(a, dtype=np.float64) / step) * step


def _near_limit(first: dict, scores: str) -> dict:
    """An edge trial from the first random one whose largest score is about 85, with a second score of its row a
    little below it (one word made 0.97 times another: every score with it 0.97 times that word's): a clamp of the
    scores "against overflow" anywhere from 50 to 80 changes that row's weights, while exp() of every score still
    fits in float32 (what shows here is the clamp; :func:`_past_limit` has the scores that overflow). ``scores``: which
    scores the step takes — ``"x"`` (x·xᵀ, or one row of it: the embeddings scaled) or ``"qk"`` (query 2 against
    the keys, divided by √d_k: the query weights scaled). Embeddings and weights on a grid of eighths and
    sixteenths, so that the scores are exact in float32."""
    x0 = np.asarray(first["x"], dtype=np.float64)
    wq0 = np.asarray(first.get("w_query", np.zeros((x0.shape[1], D_K))), dtype=np.float64)
    wk = _grid(first.get("w_key", np.zeros((x0.shape[1], D_K))), 1 / 16)
    if scores == "x":
        j = int(np.argmax((x0 * x0).sum(axis=1))) if "attn_scores" in first else int(np.argmax(x0 @ x0[JOURNEY]))
    else:
        s = (x0[JOURNEY] @ wq0) @ (x0 @ wk).T
        j = int(np.argmax(np.abs(s)))
        wq0 = wq0 * np.sign(s[j])
    others = [k for k in range(len(x0)) if k not in (j, JOURNEY)]
    out = first
    for ratio in (0.97, 0.96, 0.98, 0.95):
        for k in others:
            x = x0.copy()
            x[k] = ratio * x[j]
            if scores == "x":
                whole = "attn_scores" in first  # every row's scores, or the journey's only
                x = _grid(x * np.sqrt(NEAR_LIMIT / float((x @ x.T).max() if whole else (x @ x[JOURNEY]).max())),
                          1 / 8)
                row = (x @ x.T)[j] if whole else x @ x[JOURNEY]
                out = _rebuilt(first, x=x, w_key=wk)
            else:
                x = _grid(x, 1 / 8)
                peak = float(((x[JOURNEY] @ wq0) @ (x @ wk).T).max() / np.sqrt(wk.shape[-1])) or 1.0
                wq = _grid(wq0 * (NEAR_LIMIT / peak), 1 / 16)
                row = (x[JOURNEY] @ wq) @ (x @ wk).T / np.sqrt(wk.shape[-1])
                out = _rebuilt(first, x=x, w_query=wq, w_key=wk)
            top, second = np.sort(row)[::-1][:2]
            if 80.0 <= top <= 86.0 and second >= 74.0 and top - second >= 2.0:
                return out
    return out  # no pair found (never seen): scores near the limit all the same


PAST_LIMIT = 190.0  # far past float32's exp() limit (about 88.7)


def _past_limit(first: dict, scores: str, top: float = PAST_LIMIT) -> dict:
    """An edge trial from the first random one whose largest score is about 190, where exp() overflows float32 (inf,
    and inf / inf is NaN): a softmax written as its formula fails, as step 2 says. The other scores of that row are
    made 0 or negative (the other words negated where they score above 0), so its mean lies at least 95 below its
    maximum: a shift by the mean or the minimum overflows too. With every row's scores (``"x"`` and
    ``"attn_scores"`` in the trial), one word is made short (length 2.5): its row lies more than 110 below that
    maximum, within 80, and a shift by the largest score of all underflows it to 0 / 0. ``scores``: ``"x"`` (x·xᵀ,
    or the journey's row of it) or ``"qk"`` (query 2 against the keys, divided by √d_k). Embeddings on a grid of
    eighths, weights of sixteenths."""
    x = np.asarray(first["x"], dtype=np.float64).copy()
    wq0 = np.asarray(first.get("w_query", np.zeros((x.shape[1], D_K))), dtype=np.float64)
    wk = _grid(first.get("w_key", np.zeros((x.shape[1], D_K))), 1 / 16)
    whole = scores == "x" and "attn_scores" in first
    if scores == "x":
        r = int(np.argmax((x * x).sum(axis=1))) if whole else JOURNEY
        x[[i for i in range(len(x)) if i != r and x[i] @ x[r] > 0]] *= -1
        x *= np.sqrt(top / float(x[r] @ x[r]))
        if whole:
            t = next(i for i in range(len(x)) if i != r)
            x[t] *= 2.5 / (float(np.linalg.norm(x[t])) or 1.0)
        return _rebuilt(first, x=_grid(x, 1 / 8), w_key=wk)
    row = (x[JOURNEY] @ wq0) @ (x @ wk).T
    j = int(np.argmax(np.abs(row)))
    wq0 = wq0 * np.sign(row[j])
    row = row * np.sign(row[j])
    x[[i for i in range(len(x)) if i not in (j, JOURNEY) and row[i] > 0]] *= -1
    x = _grid(x, 1 / 8)
    peak = float(((x[JOURNEY] @ wq0) @ (x @ wk).T).max() / np.sqrt(wk.shape[-1])) or 1.0
    return _rebuilt(first, x=x, w_query=_grid(wq0 * (top / peak), 1 / 16), w_key=wk)


def past_limit_embeddings(first: dict) -> dict:
    """:func:`_past_limit` for part 1's scores, x·xᵀ (or the journey's row of it)."""
    return _past_limit(first, "x")


def past_limit_query(first: dict) -> dict:
    """:func:`_past_limit` for query 2's scores against the keys, divided by √d_k."""
    return _past_limit(first, "qk")


def far_past_embeddings(first: dict) -> dict:
    """:func:`_past_limit` with the largest score near 800, past exp()'s limit in float64 too: a softmax written out
    in float64 (and cast back) overflows."""
    return _past_limit(first, "x", nb01.FAR_PAST - 20.0)


def past_half_embeddings(first: dict) -> dict:
    """:func:`_past_limit` with the largest score near 70 000, past float16's largest number: a row maximum kept in
    float16 (inf) or bfloat16 (rounded by up to 128) breaks the shift."""
    return _past_limit(first, "x", nb01.PAST_HALF)


def far_past_query(first: dict) -> dict:
    """:func:`far_past_embeddings` for query 2's scaled scores against the keys."""
    return _past_limit(first, "qk", nb01.FAR_PAST - 20.0)


def far_below_query(first: dict) -> dict:
    """An edge trial from the first random one whose scaled scores of query 2 all lie at or below -110 (the query
    weights negated where its own score is above 0, the other words negated where theirs is): exp() of each is 0 in
    float32, so a softmax that subtracts the maximum only when it is large (or above 0) gives 0 / 0."""
    x = _grid(first["x"], 1 / 8)
    wq = np.asarray(first.get("w_query", np.zeros((x.shape[1], D_K))), dtype=np.float64)
    wk = _grid(first.get("w_key", np.zeros((x.shape[1], D_K))), 1 / 16)
    row = (x[JOURNEY] @ wq) @ (x @ wk).T
    if row[JOURNEY] > 0:
        wq, row = -wq, -row
    x[[i for i in range(len(x)) if i != JOURNEY and row[i] > 0]] *= -1
    row = (x[JOURNEY] @ wq) @ (x @ wk).T / np.sqrt(wk.shape[-1])
    if row.max() >= 0:
        return first  # a score of exactly 0 (never seen): no such row
    return _rebuilt(first, x=x, w_query=_grid(wq * (120.0 / -float(row.max())), 1 / 16), w_key=wk)


def wide_keys_query(first: dict) -> dict:
    """An edge trial from the first random one with keys 256 wide (√d_k = 16) and query 2's scores spread over 125,
    so that its lowest word lies 125 below its highest: exp of that gap is 0 in float32, but the scaled gap, 7.8,
    leaves that word a weight of about 4e-4. The scaling done after the softmax (its weights raised to the power
    1/√d_k, then normalised) keeps that 0. From a generator seeded by the first trial's sizes."""
    x = np.asarray(first["x"], dtype=np.float64)
    rng = np.random.default_rng([*x.shape, 256])
    wk = rng.normal(size=(x.shape[1], 256))
    if not float(x[JOURNEY] @ x[JOURNEY]):
        return first
    for _ in range(500):  # the scores are x @ u (u = wk @ q2, for the query q2 chosen below)
        u = rng.normal(size=x.shape[1])
        spread = float(np.ptp(x @ u))
        if spread < 1e-6:
            continue
        u *= 125.0 / spread
        w = softmax(x @ u / 16.0)
        # two words that share the weight (no one-hot answer) beside the one far below
        if np.sort(w)[-2] >= 0.05:
            break
    else:
        return first
    q2 = np.linalg.lstsq(wk, u, rcond=None)[0]
    wq = np.outer(x[JOURNEY], q2) / float(x[JOURNEY] @ x[JOURNEY])  # x[JOURNEY] @ wq = q2
    return _rebuilt(first, w_query=wq, w_key=wk)


wide_keys_query.of_first_trial = True


def lead_query(first: dict) -> dict:
    """An edge trial from the first random one with query 2's weights scaled so that its largest scaled score leads
    the next by 12: the next weight is then about 6e-6, which a shortcut that keeps only the top weight once the lead
    is large (a one-hot above a lead of 8, say) sets to 0."""
    x = np.asarray(first["x"], dtype=np.float64)
    wq = np.asarray(first.get("w_query", np.zeros((x.shape[1], D_K))), dtype=np.float64)
    wk = np.asarray(first.get("w_key", np.zeros((x.shape[1], D_K))), dtype=np.float64)
    row = (x[JOURNEY] @ wq) @ (x @ wk).T / np.sqrt(wk.shape[-1])
    order = np.argsort(row)
    if len(row) < 2 or not row[order[-1]] - row[order[-2]] > 1e-3:
        return first  # one word, or two top scores alike: no such row
    top, second = order[-1], order[-2]
    stretch = 12.0 / float(row[top] - row[second])
    if top == JOURNEY:  # (its own embedding makes the query too: the query weights are scaled instead)
        return _rebuilt(first, w_query=wq * stretch)
    # the top word's embedding moved away from the second's: its score becomes the second's + 12, the rest stay
    x[top] = x[second] + (x[top] - x[second]) * stretch
    return _rebuilt(first, x=x)


lead_query.of_first_trial = True
past_limit_embeddings.of_first_trial = True
past_limit_query.of_first_trial = True
far_past_embeddings.of_first_trial = True
far_past_query.of_first_trial = True
past_half_embeddings.of_first_trial = True
far_below_query.of_first_trial = True


def past_limit_inputs(inputs: dict) -> dict:
    """An edge trial for the function: random inputs whose largest scaled score is 200, where exp() overflows
    float32, drawn (from a generator seeded by the trial's own inputs) until the scaled scores have what
    :func:`nb01.past_limit` asks: a softmax shifted by a row's mean or minimum, or by the largest score of all,
    fails on them too."""
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in np.ravel(inputs["x"])[:8]] + [200])
    for _ in range(500):
        drawn = _function_inputs(rng)
        x, wq = np.asarray(drawn["x"], dtype=np.float64), np.asarray(drawn["w_query"], dtype=np.float64)
        s = projected_scores(x, wq, drawn["w_key"])
        if s.max() < -s.min():
            wq, s = -wq, -s
        if s.max() <= 0:
            continue
        scale = nb01.PAST_LIMIT / float(s.max())
        if nb01.past_limit(s * scale):
            break
    return {**drawn, "w_query": wq * scale}


def wider_keys(first: dict) -> dict:
    """An edge trial from the first random one with d_k one more than d_model (the random sizes are all different,
    but d_model - 1 can happen to be d_k on every trial): a width taken as len(x_2) - 1 shows."""
    return {**first, "d_k": int(first["d_model"]) + 1}


wider_keys.of_first_trial = True


def negative_score(first: dict) -> dict:
    """An edge trial from the first random one whose score of query 2 against key 2 is negative (the query weights
    negated where it is not): one number, so a clamp at 0 or an abs() shows on this trial whatever the draws."""
    wq = np.asarray(first["w_query"], dtype=np.float64)
    x = np.asarray(first["x"], dtype=np.float64)
    if (x[JOURNEY] @ wq) @ (x[JOURNEY] @ np.asarray(first["w_key"], dtype=np.float64)) > 0:
        wq = -wq
    return _rebuilt(first, w_query=wq)


negative_score.of_first_trial = True


def _lined_up(first: dict, sign: float, at: int = 0) -> dict:
    """Word ``at`` (the first) made ``sign`` times c times the journey's embedding, with c such that its score with
    the journey is about ±1000 (embeddings on a grid of eighths, c a whole number: every score is exact)."""
    x = _grid(first["x"], 1 / 8)
    if not x[JOURNEY].any() or at % len(x) == JOURNEY:
        return first
    c = float(np.ceil(1000.0 / float(x[JOURNEY] @ x[JOURNEY])))
    x[at] = sign * c * x[JOURNEY]
    return _rebuilt(first, x=x)


def opposite_word(first: dict) -> dict:
    """An edge trial from the first random one: the first word points against the journey and is long, so its score
    with the journey is about -1000 while the journey's row stays small above it. Subtracting the largest absolute
    score (1000) instead of the largest pushes every exponent of that row below -900: 0 / 0."""
    return _lined_up(first, -1.0)


def longer_word(first: dict) -> dict:
    """An edge trial from the first random one: the first word points along the journey and is long, so its score
    with the journey (about 1000) is far above the journey's score with itself. Subtracting a row's own (diagonal)
    score instead of its largest leaves an exponent of about 1000: inf, then NaN."""
    return _lined_up(first, 1.0)


def towering_word(first: dict) -> dict:
    """An edge trial from the first random one: the first word 2 048 along a feature no other word has (the others'
    first feature set to 0), so its score with itself is 2²² and with every other word 0, while the other rows stay
    a few units wide near 0. One maximum of the whole matrix (2²²) subtracted before the library's softmax leaves
    those rows near −2²², where float32 keeps only halves: their differences are rounded, and their weights move."""
    x = np.array(first["x"], dtype=np.float64)
    word = 0 if JOURNEY != 0 else -1
    x[:, 0] = 0.0
    x[word] = 0.0
    x[word, 0] = 2048.0
    return _rebuilt(first, x=x)


towering_word.of_first_trial = True


def lopsided_scores(first: dict) -> dict:
    """An edge trial from the first random one: its scores made lopsided (an antisymmetric part added, as large as
    the scores themselves), where x @ x.T always gives symmetric ones. Softmax along the wrong axis and transposed
    (`softmax(s, dim=0).T`, `softmax(s.T, dim=-1)`), which symmetric scores cannot tell from the right weights,
    shows. Every other answer is judged on the other trials (see ``accepts``)."""
    s = np.asarray(first["attn_scores"], dtype=np.float64)
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in s.ravel()[:8]] + [2])
    a = rng.normal(size=s.shape)
    return {**first, "attn_scores": s + (a - a.T) * max(float(s.std()), 1.0)}


lopsided_scores.of_first_trial = True
# this trial is there for the transposed softmax alone, which symmetric scores cannot tell from the right weights:
# every other answer is judged on the other trials (a cell that starts from x @ x.T rather than attn_scores, right
# or wrong, gives here what it gives in a world of symmetric scores)
lopsided_scores.accepts = lambda answer, inputs: not _transposed_softmax({"attn_weights": answer}, inputs)


def _transposed_softmax(answer, inputs) -> bool:
    """A sign of ``transposed_scores``: the softmax of each column, transposed (of lopsided scores: on symmetric
    ones it is the right answer)."""
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    s = np.asarray(inputs["attn_scores"], dtype=np.float64)
    wrong = softmax(s.T)
    return got.shape == wrong.shape and not np.allclose(s, s.T) and bool(np.allclose(got, wrong, rtol=1e-4,
                                                                                      atol=1e-6))


def zero_word(first: dict) -> dict:
    """An edge trial from the first random one: the first word's embedding all zeros (a padding-like token), so its
    score with every word is exactly 0: a softmax that drops the zero scores (`to_sparse()`, a mask of `s == 0`)
    gives that word no weight, where exp(0) is as real as any other. The embeddings are shrunk so that every score
    lies within ±1 (with the projections and without): that weight is then not a small one either."""
    x = np.array(first["x"], dtype=np.float64)
    x[0 if JOURNEY != 0 else -1] = 0.0
    wq = np.asarray(first.get("w_query", np.eye(x.shape[1])), dtype=np.float64)
    wk = np.asarray(first.get("w_key", np.eye(x.shape[1])), dtype=np.float64)
    largest = max(float(np.abs(x @ x.T).max()), float(np.abs((x @ wq) @ (x @ wk).T).max()))
    if largest > 1.0:  # (every score scales with the square of the embeddings)
        x = x / np.sqrt(largest)
    return _rebuilt(first, x=x)


zero_word.of_first_trial = True


def one_column_weights(*names: str):
    """An edge trial from the first random one with the weights ``names`` cut to their first column (keys or values
    of one number each; the world made again from them): a result squeezed (`.squeeze()` drops every axis of length
    1) loses its column axis."""
    def edge(first: dict) -> dict:
        return _rebuilt(first, **{n: np.asarray(first[n], dtype=np.float64)[:, :1] for n in names})

    edge.of_first_trial = True
    edge.__name__ = f"one_column_{'_'.join(names)}"
    return edge


def longer_last_word(first: dict) -> dict:
    """:func:`longer_word` with the last word long instead: the largest score of the journey's row, and of the last
    word's own row, is in the last column. A row maximum that leaves the last column out (a loop or a slice that
    stops one key early) leaves an exponent of about 1000 there: inf, then NaN."""
    return _lined_up(first, 1.0, at=-1)


opposite_word.of_first_trial = True
longer_word.of_first_trial = True
longer_last_word.of_first_trial = True


def near_limit_embeddings(first: dict) -> dict:
    """:func:`_near_limit` for part 1's scores, x·xᵀ (or the journey's row of it)."""
    return _near_limit(first, "x")


def near_limit_query(first: dict) -> dict:
    """:func:`_near_limit` for query 2's scores against the keys, divided by √d_k."""
    return _near_limit(first, "qk")


def _rebuilt(first: dict, **given) -> dict:
    """The world of ``first`` made again from its embeddings and weights, some of them ``given``: every name the
    step is handed stays consistent with the others."""
    x = np.asarray(given.get("x", first["x"]), dtype=np.float64)
    # weights the step is not handed (part 1 comes before them): any of the right shape
    base = {n: np.asarray(given[n] if n in given else first[n] if n in first else np.zeros((x.shape[1], D_K)),
                          dtype=np.float64) for n in ("w_query", "w_key", "w_value")}
    base["x"] = x
    full = _world_of(base["x"], base["w_query"], base["w_key"], base["w_value"], base["w_key"].shape[-1])
    return {name: full[name] for name in first}


def loud_embeddings(first: dict) -> dict:
    """An edge trial from the first random one: the embeddings 4 096 times larger (a power of 2), so the context
    vectors reach thousands: a clamp or clip of them at a "safe" bound (±1 000) shows. (The scores, in the millions,
    make each row's weights one-hot, exactly in float32 too.)"""
    return _rebuilt(first, x=4096.0 * np.asarray(first["x"], dtype=np.float64))


def loud_value_weights(first: dict) -> dict:
    """An edge trial from the first random one: w_value 4 096 times larger, so the values and the context vectors
    reach thousands: a clamp or clip of them at a "safe" bound (±1 000) shows. Scores and weights are unchanged."""
    if "w_value" not in first:
        return first
    return _rebuilt(first, w_value=4096.0 * np.asarray(first["w_value"], dtype=np.float64))


loud_embeddings.of_first_trial = True
loud_value_weights.of_first_trial = True
near_limit_embeddings.of_first_trial = True
near_limit_query.of_first_trial = True


def near_limit_inputs(inputs: dict) -> dict:
    """An edge trial for the function: random inputs scaled so that the largest scaled score is 85 (exp() of every
    score still fits in float32: what shows is the clamp; :func:`past_limit_inputs` overflows), drawn (from a
    generator seeded by the trial's own inputs) until a clamp of the scores at 50, 60 or 80, from above or to ±,
    changes the outputs."""
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in np.ravel(inputs["x"])[:8]])
    for _ in range(200):
        drawn = _function_inputs(rng)
        x, v = np.asarray(drawn["x"], dtype=np.float64), drawn["x"] @ drawn["w_value"]
        wq = np.asarray(drawn["w_query"], dtype=np.float64)
        s = projected_scores(x, wq, drawn["w_key"])
        if s.max() < -s.min():  # the largest score positive: a clamp from above shows too
            wq, s = -wq, -s
        scale = 85.0 / (float(np.abs(s).max()) or 1.0)
        s = s * scale
        if s.max(axis=1).min() >= 0 and all(  # a shift by the largest score of all stays exact in float32
                np.abs(softmax(np.clip(s, None if low else -top, top)) @ v - softmax(s) @ v).max() > 1e-3
                for top in (50.0, 60.0, 80.0) for low in (False, True)):
            break
    return {**drawn, "w_query": wq * scale}


def _one_width_inputs(rng: np.random.Generator | None) -> dict:
    return _function_inputs(rng, one_width=True)


def _one_width(edge):
    """``edge`` for SelfAttentionV2, whose layers all have one width: its values' weights drawn again as wide as
    the keys' (of the same spread, from a generator seeded by their shape; the scores, which the edge is about, do
    not see them)."""
    def one(inputs: dict) -> dict:
        out = edge(inputs)
        wv, d_k = np.asarray(out["w_value"], dtype=np.float64), int(np.shape(out["w_key"])[-1])
        if wv.shape[-1] == d_k:
            return out
        rng = np.random.default_rng([*wv.shape, d_k])
        return {**out, "w_value": rng.normal(scale=float(wv.std()) or 1.0, size=(wv.shape[0], d_k))}

    one.of_first_trial = getattr(edge, "of_first_trial", False)
    one.__name__ = f"{edge.__name__}_one_width"
    return one


@functools.lru_cache(maxsize=32)
def _seeded(d_k: int, randn: bool = False, float64: bool = False,
            d_model: int = D_MODEL) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """w_query, w_key, w_value as SelfAttentionV1(d_model, d_k) draws them after torch.manual_seed(123): torch.rand
    (or torch.randn; in float64 with ``float64``) of (d_model, d_k), three times in that order. For d_model = 3 and
    d_k = 2, step 5's matrices."""
    import torch

    generator = torch.Generator().manual_seed(123)
    draw = torch.randn if randn else torch.rand
    dtype = torch.float64 if float64 else torch.float32
    return tuple(draw(d_model, d_k, generator=generator, dtype=dtype).double().numpy() for _ in range(3))


def _drawn(d_k=D_K, d_model=D_MODEL, **how) -> dict:
    """Step 5's three matrices as the seeded draws give them for inputs d_model wide and keys d_k wide (``how``:
    see :func:`_seeded`)."""
    return dict(zip(("w_query", "w_key", "w_value"), _seeded(int(d_k), d_model=int(d_model), **how)))


def _v1_weights(x, d_k, **how):
    """The matrices SelfAttentionV1(d_model, d_k) draws after the seed, for inputs x (d_model = x.shape[1])."""
    return _seeded(int(d_k), d_model=int(np.shape(x)[1]), **how)


def loud_v1(inputs: dict) -> dict:
    """An edge replay for SelfAttentionV1: the embeddings made positive and scaled so that the module's largest
    scaled score is 300 (its weights are the seeded draws, all positive: so are the outputs, and float32 rounding of
    such scores stays far inside the tolerance). A softmax that does not subtract each row's own maximum of the
    scaled scores (none, or the unscaled scores' maximum) overflows or underflows there: NaN."""
    x = np.abs(np.asarray(inputs["x"], dtype=np.float64))
    d_k = int(np.asarray(inputs["d_k"]))
    wq, wk, _ = _v1_weights(x, d_k)
    top = float(((x @ wq) @ (x @ wk).T).max()) / np.sqrt(d_k)
    return {**inputs, "x": x * np.sqrt(300.0 / top)} if top > 0 else inputs


def square_v1(inputs: dict) -> dict:
    """An edge replay for SelfAttentionV1 with as many tokens as features (x square): a forward that transposes x
    when its first size is d_model shows."""
    x = np.abs(np.asarray(inputs["x"], dtype=np.float64))
    n, d = x.shape
    if n < d:
        rng = np.random.default_rng([n, d, 5])
        x = np.concatenate([x, np.abs(rng.normal(size=(d - n, d)))])
    return {**inputs, "x": x[:d]}


def loud_token_v1(inputs: dict) -> dict:
    """An edge replay for SelfAttentionV1: 24 tokens of small positive numbers, the last one long, so that its own
    scaled score is 200 and the rest of its row far below: a softmax shifted by a percentile (or a median) of the row
    instead of its maximum overflows there."""
    d = int(np.shape(inputs["x"])[1])
    d_k = int(np.asarray(inputs["d_k"]))
    rng = np.random.default_rng([d, d_k, 24])
    x = np.abs(rng.normal(size=(24, d))) / 4
    wq, wk, _ = _v1_weights(x, d_k)
    own = float((x[-1] @ wq) @ (x[-1] @ wk)) / np.sqrt(d_k)
    if own <= 0:
        return inputs
    x[-1] *= np.sqrt(200.0 / own)
    return {**inputs, "x": x}


def _v1(x, d_k=D_K, scale=None, transpose=False, axis=-1, swap_kv=False, **_):
    """SelfAttentionV1(d_model, d_k) seeded with 123 (for d_model = 3 and d_k = 2, step 5's matrices), whatever the
    inputs."""
    return attention(x, *_v1_weights(x, d_k), scale=scale, transpose=transpose, axis=axis, swap_kv=swap_kv)


def _trainable_inputs(rng: np.random.Generator | None = None) -> dict:
    """What the count reads: the module ``sa_v1`` (as ``{"trainable": {parameter: array}, "frozen": {…}}``; the
    replay hands the cell a module with exactly these parameters), the sizes it was built with and the inputs x
    its cell runs it on. Fresh: a module where the filter on requires_grad matters — one of w_query, w_key,
    w_value frozen, and a fourth, trainable (d_k, m) matrix `w_out` — of another d_k, and inputs of another n, so
    that neither the 18 of this notebook typed in, nor x.numel() (18 here too), nor a count of every parameter,
    nor one from the sizes (3 · d_model · d_k) can pass. d_model stays 3: the cell also trains a new
    SelfAttentionV1 on x."""
    d_model = 3
    names = ("w_query", "w_key", "w_value")
    if rng is None:
        return {"x": X, "d_model": d_model, "d_k": 2,
                "sa_v1": {"trainable": dict(zip(names, (W_QUERY, W_KEY, W_VALUE))), "frozen": {}}}
    # d_k of 3 or more: with d_k = 1 the rows of the trainable parameters (len(p), 6 + d_k) could equal the count;
    # n of 7 or more: x.numel() (3n) must not equal another count a wrong cell can make — the rows of every
    # parameter (9 + d_k), the frozen parameter's entries (3 · d_k) — or that count would pass for counted_inputs
    # (d_k = 3 with n = 4, and d_k = 5 with n = 5, did on a draw or two in a hundred)
    d_k, n, m = int(rng.choice([3, 4, 5])), int(rng.choice([7, 8, 9])), int(rng.choice([1, 2, 4, 5]))
    x = rng.normal(0.0, 1.5, size=(n, d_model)).round(2)
    weights = {name: rng.uniform(0.0, 1.0, size=(d_model, d_k)) for name in names}
    frozen = str(rng.choice(names))
    trainable = {name: w for name, w in weights.items() if name != frozen}
    # m ≠ 3: not three matrices of one shape; in a submodule (a count over .modules() adds it twice), and in float64
    # (bytes / 4 is not the count); and a buffer, which is no parameter (kept out of the state_dict, as a causal
    # mask's often is: a count of the state_dict's entries is then that of every parameter, frozen ones too)
    trainable["proj.w_out"] = rng.uniform(-1.0, 1.0, size=(d_k, m))
    # and a bias that starts at zero, trainable all the same (a count of the nonzero entries leaves it out), and a
    # learnable temperature of no axis (a count that multiplies two sizes of each parameter, or reduces its shape
    # without a start, fails on those), in a module in evaluation mode (the mode changes nothing about what training
    # may change)
    trainable["proj.bias"] = np.zeros(m)
    trainable["temperature"] = np.array(1.5)
    # the bias also tied into a second submodule (one parameter, two names: parameters() yields it once, a count over
    # each module's own parameters or over the state_dict's entries twice; not a matrix of d_model × d_k, whose
    # second count would be the frozen matrix's)
    module = {"trainable": trainable, "frozen": {frozen: weights[frozen]},
              "buffers": {"mask": np.ones((int(rng.choice([2, 3])), m + 1))}, "double": ["proj.w_out"], "eval": True,
              "tied": {"head.bias": "proj.bias"},
              # and trained before: every trainable parameter holds a gradient (a filter on `p.grad is None` shows)
              "grads": True}
    return {"x": x, "d_model": d_model, "d_k": d_k, "sa_v1": module}


def all_frozen(first: dict) -> dict:
    """An edge trial from the first random one: every parameter of the module frozen (as the cell's own `frozen`
    module), so the right count is 0: a count that needs at least one trainable parameter (`torch.cat` of them, a
    `max`) raises there."""
    module = dict(first["sa_v1"])
    module["frozen"] = {**module["trainable"], **module["frozen"]}
    module["trainable"] = {}
    return {**first, "sa_v1": module}


all_frozen.of_first_trial = True


def not_trained_yet(first: dict) -> dict:
    """An edge trial from the first random one: the same module before any backward pass (no parameter holds a
    gradient, as the notebook's sa_v1): a count that picks the parameters by `p.grad is None` gives another number
    there than on the fresh modules, which hold gradients; a count by requires_grad gives the same."""
    return {**first, "sa_v1": {**first["sa_v1"], "grads": False}}


not_trained_yet.of_first_trial = True


def _count(fn):
    return lambda sa_v1, **i: {"n_trainable": np.asarray(float(fn(sa_v1["trainable"], sa_v1["frozen"], **i)))}


def _numbers(params) -> int:
    return sum(int(np.size(w)) for w in params.values())


def _tied(module, group: str) -> int:
    """The entries of ``module``'s parameters of ``group`` ("trainable" or "frozen") met a second time under
    another name (tied weights)."""
    return sum(int(np.size(module[group][source])) for source in (module.get("tied") or {}).values()
               if source in module[group])


# --- the exercises ---------------------------------------------------------------------------


def _qkv_2_made_with(made_with, x_2, w_query, w_key, w_value, **_):
    w = {"query": w_query, "key": w_key, "value": w_value}
    return {f"{r}_2": x_2 @ w[made_with[r]] for r in ("query", "key", "value")}


# each of query_2, key_2, value_2 made with another role's matrix (a line copied without changing its matrix), or
# two of them with each other's; key_2 with w_query and the query and key swapped have hints of their own
QKV_2_MIX_UPS = mix_ups(_qkv_2_made_with, {r: (f"{r}_2", f"{r}_2 = x_2 @ w_{r}") for r in ("query", "key", "value")},
                        skip=("projection_reused:key_with_query", "swapped_projections:query_key"))


def _value(ex_id, title, answers, reference, independent=(), one_width=False, rows=True, **kw):
    def drawn(rng=None):
        values = world(rng, one_width=one_width, rows=rows)
        if rng is not None and independent:  # new numbers for these, in the same shapes (so that a copy shows)
            x, w_key, w_value = values["x"], values["w_key"], values["w_value"]
            other = world(rng, sizes=(*x.shape, w_key.shape[-1], w_value.shape[-1]))
            values.update({n: other[n] for n in independent})
        return values

    return Exercise(ex_id, notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                    inputs=upstream_of(drawn, answers[0]), framework="torch", **kw)


_NO_LOOP = ("Your numbers are right, but your cell loops (a `for` or a comprehension, over the rows or the "
            "features). The step asks for {what} without a loop: one product does every row at once.")


_PART_1_UNSCALED = ("You divided the scores by √3, the square root of the width of an input, before the softmax. "
                    "Part 1 takes the softmax of the plain dot products: no scaling here.")
_DOT = ("A dot product multiplies the entries pairwise and adds the products up: one number per pair of "
        "vectors.")

PART_1 = [
    _value("02.scores_2_loop", "Scores of the journey query, by a loop", ("attn_scores_2",),
           _one("attn_scores_2", lambda x, query, **_: x @ query), reads=("x", "query"), how={"loop": True},
           dtype="float32",  # the next cell compares it with x @ query, which torch refuses across dtypes
           mistakes={
               "wrong_query_row": _one("attn_scores_2", lambda x, **_: x @ x[2]),
           },
           hints={"wrong_query_row": "Your scores belong to the query x[2], \"starts\". Python counts from 0: "
                  "\"journey\", x^(2), is row 1 — the `query` the cell gives you."}),
    _value("02.scores_2_vec", "Scores of the journey query, by one matrix product", ("attn_scores_2_vec",),
           _one("attn_scores_2_vec", lambda x, query, **_: x @ query), reads=("x", "query"),
           dtype="float32",  # the cell compares it with the loop's float32 scores
           independent=("attn_scores_2",), how={"loop": False}, not_with=("attn_scores_2",),
           mistakes={
               "elementwise_product": _one("attn_scores_2_vec", lambda x, query, **_: x * query),
               "sum_wrong_axis": _one("attn_scores_2_vec", lambda x, query, **_: (x * query).sum(axis=0)),
               "wrong_query_row": _one("attn_scores_2_vec", lambda x, **_: x @ x[2]),
               "copied_answer": _one("attn_scores_2_vec", lambda attn_scores_2, **_: attn_scores_2),
           },
           hints={
               "elementwise_product": "You multiplied element by element (`*`) and kept all six rows of three "
               "products. " + _DOT + " A matrix–vector product does that for every row at once.",
               "sum_wrong_axis": "You added the products down the columns (over the six words), which mixes the "
               "words. Each word's score adds up its own three products: along dim=1, or with a matrix product.",
               "wrong_query_row": "Your scores belong to x[2], \"starts\". The query is `query`, \"journey\" "
               "(row 1: Python counts from 0).",
               "copied_answer": "`attn_scores_2_vec` is a copy of the loop's `attn_scores_2`. This step asks you to "
               "compute the same scores again, with one matrix product of `x` and `query`.",
               "not_as_asked:not_with": "Your cell uses {names}, the loop's result. This step computes the same "
               "scores again from `x` and `query` alone, with one matrix product (the cell then compares the two).",
               "not_as_asked": _NO_LOOP.format(what="the six scores in one line"),
           }),
    _value("02.weights_2_sum", "Weights by dividing by the sum", ("attn_weights_2_sum",),
           _one("attn_weights_2_sum", lambda attn_scores_2, **_: sum_normalise(attn_scores_2)),
           # and scores that add up to 2⁻¹⁴: a small number added to the sum shows
           reads=("attn_scores_2",), dtype="float32", edge=(small_scores, negative_sum, tiny_sum),
           mistakes={"softmax_instead_of_sum": _one("attn_weights_2_sum",
                                                    lambda attn_scores_2, **_: softmax(attn_scores_2)),
                     "abs_sum_normalisation": _one("attn_weights_2_sum", lambda attn_scores_2, **_:
                                                   attn_scores_2 / np.abs(attn_scores_2).sum()),
                     # the absolute values divided by their sum: every weight positive
                     "abs_sum_normalisation:both": _one("attn_weights_2_sum", lambda attn_scores_2, **_:
                                                        np.abs(attn_scores_2) / np.abs(attn_scores_2).sum())},
           hints={"abs_sum_normalisation": "You divided the scores by the sum of their absolute values (an L1 "
                  "norm: what F.normalize(p=1) and .abs().sum() give). Here every score is positive, so the two "
                  "sums agree; with a negative score they do not, and the weights would not sum to 1. Divide by "
                  "the plain sum of the scores.",
                  "abs_sum_normalisation:both": "You divided the absolute values of the scores by their sum, so "
                  "a negative score became a positive weight. Here every score is positive and nothing changes; "
                  "with a negative score it does. Divide the scores themselves by their plain sum."}),
    _value("02.weights_2", "Weights by softmax", ("attn_weights_2",),
           _one("attn_weights_2", lambda attn_scores_2, **_: softmax(attn_scores_2)), reads=("attn_scores_2",),
           # scores up to 85: a clamp shows; up to 190: a softmax that does not subtract the maximum fails
           edge=(journey_not_largest, near_limit_embeddings, past_limit_embeddings, far_past_embeddings,
                 opposite_word, longer_word,  # a shift by the largest |score|, or by the journey's own score
                 longer_last_word, zero_word,  # and a row maximum that leaves the last key out; a score of 0
                 past_half_embeddings),  # and scores past float16's range
           signs={"unstable_softmax": overflow_sign(lambda attn_scores_2, **_: softmax(attn_scores_2),
                                                    lambda attn_scores_2, **_: attn_scores_2, 88.0)},
           mistakes={
               "sum_normalisation": _one("attn_weights_2", lambda attn_scores_2, **_: sum_normalise(attn_scores_2)),
               "no_softmax": _one("attn_weights_2", lambda attn_scores_2, **_: attn_scores_2),
               "softmax_of_weights": _one("attn_weights_2",
                                          lambda attn_weights_2_sum, **_: softmax(attn_weights_2_sum)),
               "exp_not_normalised": _one("attn_weights_2", lambda attn_scores_2, **_: np.exp(attn_scores_2)),
               "clamped:scores": _one("attn_weights_2", lambda attn_scores_2, **_:
                                      softmax(np.maximum(attn_scores_2, 0.0))),
               "unexpected_scale": _one("attn_weights_2", lambda attn_scores_2, x, **_:
                                        softmax(attn_scores_2 / np.sqrt(x.shape[-1]))),
               "unexpected_scale:typed": _one("attn_weights_2", lambda attn_scores_2, **_:
                                              softmax(attn_scores_2 / np.sqrt(D_MODEL))),
           },
           hints={
               "no_softmax": "These are the raw scores. Turn them into weights with a softmax.",
               "clamped:scores": CLAMPED_SCORES_HINT,
               "unexpected_scale": _PART_1_UNSCALED,
               "softmax_of_weights": "You applied the softmax to `attn_weights_2_sum`, weights that were already "
               "divided by their sum. The softmax goes on the scores, `attn_scores_2`.",
           }),
    _value("02.context_2_simple", "The journey's context vector", ("context_vec_2_simple",),
           _one("context_vec_2_simple", lambda attn_weights_2, x, **_: attn_weights_2 @ x),
           reads=("attn_weights_2", "x"), how={"loop": True}, dtype="float32",
           mistakes={
               "sum_normalisation": _one("context_vec_2_simple",
                                         lambda attn_weights_2_sum, x, **_: attn_weights_2_sum @ x),
               "no_softmax": _one("context_vec_2_simple", lambda attn_scores_2, x, **_: attn_scores_2 @ x),
               "elementwise_product": _one("context_vec_2_simple",
                                           lambda attn_weights_2, x, **_: attn_weights_2[:, None] * x),
               "sum_wrong_axis": _one("context_vec_2_simple",
                                      lambda attn_weights_2, x, **_: (attn_weights_2[:, None] * x).sum(axis=1)),
               # the weighted inputs averaged (a `/ len(x)` after the loop, a `.mean(0)` of them)
               "mean_instead_of_sum": _one("context_vec_2_simple",
                                           lambda attn_weights_2, x, **_: attn_weights_2 @ x / len(x)),
           },
           hints={
               "mean_instead_of_sum": "You averaged the weighted inputs (divided their sum by the number of words). "
               "The weights already sum to 1: the context vector is the plain sum of the weighted inputs.",
               "sum_normalisation": "You weighted the embeddings with `attn_weights_2_sum`. Use the softmax "
               "weights, `attn_weights_2`.",
               "no_softmax": "You weighted the embeddings with the raw scores `attn_scores_2`. Use the softmax "
               "weights, `attn_weights_2`.",
               "elementwise_product": "You have the six weighted inputs, one per row, but not their sum. The "
               "context vector adds them up into one vector of 3 numbers.",
               "sum_wrong_axis": "You added up the three entries of each weighted input (one number per word). Add "
               "the six weighted inputs together instead: one vector of 3 numbers.",
           }),
    _value("02.scores_loop", "All scores, by a double loop", ("attn_scores_loop",),
           _one("attn_scores_loop", lambda x, **_: x @ x.T), reads=("x",), how={"loop": True, "nested_loop": True},
           # the next cell compares it with a float32 product, which torch refuses across dtypes; other numbers of
           # words: one row and one column per word, so a buffer of 6 × 6 (or a `range(6)`) typed in shows; and 7
           # words, an odd number: a loop that takes the rows two at a time leaves the last one out
           dtype="float32", edge=more_rows("x", 7)),
    _value("02.scores", "All scores, by one matrix product", ("attn_scores",),
           # (and step 1's row of "journey" from another draw: a row copied from it shows)
           _one("attn_scores", lambda x, **_: x @ x.T), reads=("x",), independent=("attn_scores_loop", "attn_scores_2"),
           how={"matmul": True, "loop": False}, not_with=("attn_scores_loop",),  # "by one matrix product"
           mistakes={
               "elementwise_product": _one("attn_scores", lambda x, **_: x * x),
               "features_paired": _one("attn_scores", lambda x, **_: x.T @ x),
               "copied_answer": _one("attn_scores", lambda attn_scores_loop, **_: attn_scores_loop),
           },
           hints={
               "elementwise_product": "You multiplied `x * x` element by element. Every row against every row is a "
               "matrix product of x with its transpose.",
               "copied_answer": "`attn_scores` is a copy of the loops' `attn_scores_loop`. This step asks you to "
               "compute the same matrix again, with one matrix product.",
               "not_as_asked:not_with": "Your cell uses {names}, the loops' result. This step computes the same "
               "matrix again from `x` alone, with one matrix product (the cell then compares the two).",
               "not_as_asked": _NO_LOOP.format(what="all 36 scores in one line"),
               "not_as_asked:matmul": "Your numbers are right, but your cell builds the dot products without a "
               "matrix product. The step asks for all 36 at once with one matrix product of x and its transpose: "
               "it pairs every row with every row in one go.",
           }),
    _value("02.weights", "All attention weights", ("attn_weights",),
           _one("attn_weights", lambda attn_scores, **_: softmax(attn_scores)), reads=("attn_scores",),
           independent=("attn_weights_2",),  # step 2's row of "journey" from another draw: a row copied shows
           dtype="float32",  # the next step multiplies it with the float32 x
           # scores up to 85: a clamp shows; up to 190: a softmax that does not subtract each row's maximum fails
           edge=(near_limit_embeddings, past_limit_embeddings, far_past_embeddings,
                 opposite_word, longer_word,  # a shift by each row's largest |score|, or by its diagonal
                 longer_last_word, zero_word,  # and a row maximum that leaves the last key out; scores of 0
                 towering_word,  # and one score of 2²², the others near 0: one maximum of them all subtracted shows
                 lopsided_scores),  # and scores that are not symmetric: a transposed softmax shows
           signs={"transposed_scores": _transposed_softmax,
                  "unstable_softmax": overflow_sign(lambda attn_scores, **_: softmax(attn_scores),
                                                    lambda attn_scores, **_: attn_scores, 88.0),
                  "global_max_subtraction": global_shift_sign(lambda attn_scores, **_: softmax(attn_scores),
                                                              lambda attn_scores, **_: attn_scores, 87.0),
                  "global_max_rounding": global_rounding_sign(
                      lambda attn_scores, **_: softmax(attn_scores),
                      lambda attn_scores, **_: global_shift_float32(attn_scores))},
           mistakes={
               "softmax_wrong_axis": _one("attn_weights", lambda attn_scores, **_: softmax(attn_scores, axis=0)),
               "max_without_keepdim": _one("attn_weights", lambda attn_scores, **_: max_without_keepdim(attn_scores)),
               "max_without_keepdim:float32": _one("attn_weights", lambda attn_scores, **_:
                                                   max_without_keepdim_float32(attn_scores)),
               "global_softmax": _one("attn_weights", lambda attn_scores, **_: global_softmax(attn_scores)),
               "sum_normalisation": _one("attn_weights", lambda attn_scores, **_: sum_normalise(attn_scores)),
               "clamped:scores": _one("attn_weights", lambda attn_scores, **_: softmax(np.maximum(attn_scores, 0.0))),
               "no_softmax": _one("attn_weights", lambda attn_scores, **_: attn_scores),
               "unexpected_scale": _one("attn_weights", lambda attn_scores, x, **_:
                                        softmax(attn_scores / np.sqrt(x.shape[-1]))),
               "unexpected_scale:typed": _one("attn_weights", lambda attn_scores, **_:
                                              softmax(attn_scores / np.sqrt(D_MODEL))),
           },
           hints={
               "clamped:scores": CLAMPED_SCORES_HINT,
               "softmax_wrong_axis": "Your rows are the columns of the right weights: a softmax down the columns "
               "(dim=0), a `.T` too many, or row sums divided (or a logsumexp subtracted) without keepdim=True "
               "(which lines each row's number up with a column). The scores are symmetric, so only those row "
               "numbers show it. Row i holds query i's weights: normalise along each row, dim=-1.",
               "global_softmax": "You normalised by one sum over the whole matrix, so no row sums to 1. Each query's "
               "row is normalised on its own: a softmax along dim=-1.",
               "no_softmax": "These are the raw scores. Turn each row into weights with a softmax along dim=-1.",
               "unexpected_scale": _PART_1_UNSCALED,
               "max_without_keepdim": ATTENTION_HINTS["max_without_keepdim"] + " The scores x @ x.T are "
               "symmetric, so the maxima of the columns (dim=0) do the same here.",
               "transposed_scores": "Your weights are the softmax of each column, transposed (`softmax(s, dim=0).T`, "
               "or the softmax of `s.T`). The scores x @ x.T are symmetric, so here the numbers agree, but row i "
               "must be query i's own row of scores made into weights, and scores from queries and keys (next "
               "section) are not symmetric. Apply the softmax to attn_scores itself, along dim=-1.",
           }),
    _value("02.context_all", "All context vectors", ("outputs",),
           _one("outputs", lambda attn_weights, x, **_: attn_weights @ x),
           reads=("attn_weights", "x"), dtype="float32",  # the cell compares its row 2 with the float32 step 3's
           independent=("context_vec_2_simple",),  # step 3's context vector from another draw: a copied row shows
           # and scores of 190: weights written out again without each row's maximum; and embeddings in the
           # thousands: a clip of the outputs shows
           edge=(past_limit_embeddings, loud_embeddings),
           how={"matmul": True, "loop": False},  # "with one matrix product"
           mistakes={
               "softmax_wrong_axis": _one("outputs", lambda attn_weights, x, **_: attn_weights.T @ x),
               "no_softmax": _one("outputs", lambda attn_scores, x, **_: attn_scores @ x),
           },
           hints={
               "softmax_wrong_axis": "Row i of the weights you used does not belong to query i: the transpose of "
               "`attn_weights`, or a softmax down the columns (dim=0), which on these symmetric scores is the same. "
               "Row i of the result must mix the inputs with row i of `attn_weights`.",
               "no_softmax": "You mixed the inputs with the raw scores `attn_scores`. Use the weights, "
               "`attn_weights`.",
               "not_as_asked:matmul": "Your numbers are right, but you built the context vectors from a broadcast "
               "product and a sum. The step asks for all six at once with one matrix product of the weights and "
               "the inputs: it does those weighted sums for every query in one go.",
               "not_as_asked:loop": "Your numbers are right, but your cell goes through the queries one at a time "
               "(a loop or a comprehension). The step asks for all six context vectors with one matrix product of "
               "the weights and the inputs, every query at once.",
           }),
]

PART_2 = [
    _value("02.weights_qkv", "Three weight matrices from torch.manual_seed(123)", ("w_query", "w_key", "w_value"),
           lambda d_k, d_model, **_: _drawn(d_k, d_model),
           # replayed with other numbers of words, d_model and d_k: a size taken from something else that happens
           # to be 2 or 3 here (len(x_2) - 1, x.shape[0] // 2) shows
           reads=("x", "x_2", "d_model", "d_k"), one_width=True,
           edge=wider_keys,  # d_k one more than d_model: a width taken as d_model - 1 shows on every check
           mistakes={
               "swapped_projections": lambda d_k, d_model, **_: {
                   **_drawn(d_k, d_model), "w_query": _drawn(d_k, d_model)["w_key"],
                   "w_key": _drawn(d_k, d_model)["w_query"]},
               "weight_shape_swapped": lambda d_k, d_model, **_: {  # torch.rand(d_k, d_model): the same numbers
                   n: w.reshape(int(d_k), int(d_model)) for n, w in _drawn(d_k, d_model).items()},
               "wrong_dtype": lambda d_k, d_model, **_: _drawn(d_k, d_model, float64=True),
               "reseeded_each_draw": lambda d_k, d_model, **_: dict.fromkeys(("w_query", "w_key", "w_value"),
                                                                    _drawn(d_k, d_model)["w_query"]),
               "randn_for_rand": lambda d_k, d_model, **_: _drawn(d_k, d_model, randn=True),
           },
           hints={
               "swapped_projections": "Your w_query holds the numbers of w_key and the other way round. Right "
               "after torch.manual_seed(123), draw them in the order query, key, value.",
               "weight_shape_swapped": "Your matrices have shape (d_k, d_model) = (2, 3). An input, a row of "
               "d_model = 3 numbers, is multiplied by the matrix (x_2 @ w_query), so it needs d_model rows: "
               "(d_model, d_k).",
               "wrong_dtype": "You drew the matrices in float64: in double precision torch.rand draws other numbers "
               "than the book's. Draw them with the default dtype, float32.",
               "reseeded_each_draw": "Your three matrices are equal, all three the first draw after the seed: the "
               "generator seeded with 123 again before each draw (each draw then starts from the same place), or one "
               "draw copied into the others. Seed once, then draw w_query, w_key and w_value one after the other, "
               "each with its own torch.rand.",
               "not_as_asked": "Your cell types the numbers in instead of drawing them: a model's weights are "
               "drawn at random before training. Seed with torch.manual_seed(123), then draw each matrix with "
               "torch.rand.",
           },
           dtype="float32", how={"typed_numbers": False}),  # numbers typed in are caught by `how`
    _value("02.qkv_2", "Query, key and value of the journey", ("query_2", "key_2", "value_2"),
           lambda x_2, w_query, w_key, w_value, **_: {
               "query_2": x_2 @ w_query, "key_2": x_2 @ w_key, "value_2": x_2 @ w_value},
           reads=("x_2", "w_query", "w_key", "w_value"),
           dtype="float32",  # the next step multiplies query_2 with key_2 and keys, float32 tensors
           mistakes={
               "swapped_projections": lambda x_2, w_query, w_key, w_value, **_: {
                   "query_2": x_2 @ w_key, "key_2": x_2 @ w_query, "value_2": x_2 @ w_value},
               "wrong_query_row": lambda x, w_query, w_key, w_value, **_: {
                   "query_2": x[2] @ w_query, "key_2": x[2] @ w_key, "value_2": x[2] @ w_value},
               "all_rows_or_one": lambda x, w_query, w_key, w_value, **_: {
                   "query_2": x @ w_query, "key_2": x @ w_key, "value_2": x @ w_value},
               "projection_reused": lambda x_2, w_query, w_value, **_: {
                   "query_2": x_2 @ w_query, "key_2": x_2 @ w_query, "value_2": x_2 @ w_value},
               **QKV_2_MIX_UPS[0],
           },
           hints={
               "swapped_projections": "Your query_2 and key_2 use each other's matrices. The query comes from "
               "w_query, the key from w_key.",
               "wrong_query_row": "You projected x[2], \"starts\". \"journey\" is row 1 of x (Python counts from "
               "0): it is the x_2 the notebook gives you.",
               "all_rows_or_one": "You projected all six inputs, x. This step is about \"journey\" alone: project "
               "x_2, which gives two numbers each for query_2, key_2 and value_2.",
               "projection_reused": "Your key_2 is made with w_query, the query's matrix. The key has a matrix of "
               "its own: key_2 = x_2 @ w_key.",
               **QKV_2_MIX_UPS[1],
           }),
    _value("02.keys_values", "Keys and values of all six inputs", ("keys", "values"),
           lambda x, w_key, w_value, **_: {"keys": x @ w_key, "values": x @ w_value},
           reads=("x", "w_key", "w_value"), dtype="float32",  # the next products mix them with float32 tensors
           how={"loop": False},  # "for all six inputs at once"
           edge=one_column_weights("w_query", "w_key", "w_value"),  # keys and values of one number: a squeeze
           mistakes={
               "swapped_projections": lambda x, w_key, w_value, **_: {"keys": x @ w_value, "values": x @ w_key},
               "all_rows_or_one": lambda x_2, w_key, w_value, **_: {"keys": x_2 @ w_key, "values": x_2 @ w_value},
               "projection_reused": lambda x, w_query, w_value, **_: {"keys": x @ w_query, "values": x @ w_value},
               "projection_reused:value_with_key": lambda x, w_key, **_: {"keys": x @ w_key, "values": x @ w_key},
           },
           hints={
               "swapped_projections": "Your keys and values use each other's weights. Keys come from w_key, values "
               "from w_value.",
               "all_rows_or_one": "You projected only \"journey\", x_2. The scores need a key for every input, and "
               "the context vector a value for every input: project all six rows of x at once.",
               "projection_reused": "Your keys are made with w_query, the queries' matrix. Keys have a matrix of "
               "their own: x @ w_key.",
               "projection_reused:value_with_key": "Your values are made with w_key, the keys' matrix (a line "
               "copied, its matrix left as it was). Values have a matrix of their own: x @ w_value.",
               "not_as_asked": "Your numbers are right, but your cell projects the inputs one at a time (a `for` or "
               "a comprehension). The step asks for all six at once: one product of x with each matrix.",
           }),
    _value("02.score_22", "The score of query 2 against key 2", ("attn_score_22",),
           _one("attn_score_22", lambda query_2, key_2, **_: query_2 @ key_2), reads=("query_2", "key_2"),
           plain_number=True,  # "a single number": a Python float (.item()) is one too
           dtype="float32",  # the next cell compares it with a float32 entry, which torch refuses across dtypes
           edge=negative_score,  # a negative score on one trial at least: a clamp at 0 or an abs() shows
           # float32's own error stays below 1e-6 here; an answer rounded to 4 decimals is 1.5e-5 off on the notebook's
           rtol=5e-6, atol=3e-6,
           mistakes={
               "elementwise_product": _one("attn_score_22", lambda query_2, key_2, **_: query_2 * key_2),
               "wrong_query_row": _one("attn_score_22", lambda query_2, keys, **_: query_2 @ keys[2]),
               "unexpected_scale": _one("attn_score_22", lambda query_2, key_2, **_: query_2 @ key_2 / np.sqrt(
                   key_2.shape[-1])),
           },
           hints={
               "elementwise_product": "`query_2 * key_2` multiplies entry by entry and gives two numbers. A score "
               "is one number, the dot product: those products added up.",
               "wrong_query_row": "You took keys[2], the key of \"starts\". Key 2 in the text's counting is "
               "\"journey\"'s, row 1 (Python counts from 0): `key_2`, or keys[1].",
               "unexpected_scale": "This is the scaled score. This step asks for the plain dot product; the division "
               "by √d_k comes in step 9.",
           }),
    _value("02.scores_2_qk", "The scores of query 2 against all keys", ("attn_scores_2_qk",),
           _one("attn_scores_2_qk", lambda query_2, keys, **_: query_2 @ keys.T), reads=("query_2", "keys"),
           independent=("attn_score_22",),  # step 8's one score from another draw: an entry copied from it shows
           how={"loop": False},
           mistakes={
               "elementwise_product": _one("attn_scores_2_qk", lambda query_2, keys, **_: query_2 * keys),
               "swapped_projections": _one("attn_scores_2_qk", lambda query_2, values, **_: query_2 @ values.T),
               "unexpected_scale": _one("attn_scores_2_qk",
                                        lambda query_2, keys, **_: query_2 @ keys.T / np.sqrt(keys.shape[-1])),
           },
           hints={
               "elementwise_product": "`query_2 * keys` multiplies entry by entry and keeps a (6, 2) matrix. A "
               "score is one dot product per key: six numbers.",
               "swapped_projections": "You compared the query with the values. Scores compare the query with the "
               "keys; the values are only mixed afterwards.",
               "unexpected_scale": "These are the scaled scores. This step asks for the plain dot products; the "
               "division by √d_k comes in the next step.",
               "not_as_asked": _NO_LOOP.format(what="the six scores in one product"),
           }),
    _value("02.weights_2_qk", "Weights of query 2, scaled by √d_k", ("attn_weights_2_qk",),
           _one("attn_weights_2_qk", _weights_2_qk), reads=("attn_scores_2_qk", "keys"),
           dtype="float32",  # the next step multiplies it with the float32 values
           # scaled scores up to 85: a clamp shows; up to 190: a softmax that does not subtract the maximum fails
           edge=(near_limit_query, past_limit_query, far_past_query, far_below_query, zero_word,  # a key of 0
                 lead_query, wide_keys_query),  # and keys 256 wide: the scaling done after the softmax shows
           signs={"unstable_softmax": overflow_sign(_weights_2_qk, _scaled_2_qk, 88.0)},
           mistakes={
               "scale_by_d_v": _one("attn_weights_2_qk", lambda attn_scores_2_qk, values, **_:
                                    softmax(attn_scores_2_qk / np.sqrt(values.shape[-1]))),
               "fixed_scale": _one("attn_weights_2_qk", lambda **i: _weights_2_qk(**i, scale=float(np.sqrt(D_K)))),
               "missing_scale": _one("attn_weights_2_qk", lambda **i: _weights_2_qk(**i, scale=1.0)),
               "scale_truncated": _one("attn_weights_2_qk", lambda **i: _weights_2_qk(
                   **i, scale=float(np.floor(np.sqrt(i["keys"].shape[-1]))))),
               "scale_by_d": _one("attn_weights_2_qk",
                                  lambda **i: _weights_2_qk(**i, scale=float(i["keys"].shape[-1]))),
               "scale_by_d_model": _one("attn_weights_2_qk",
                                        lambda **i: _weights_2_qk(**i, scale=float(np.sqrt(i["x"].shape[-1])))),
               "scale_after_softmax": _one("attn_weights_2_qk", lambda attn_scores_2_qk, keys, **_:
                                           softmax(attn_scores_2_qk) / np.sqrt(keys.shape[-1])),
               "scale_multiplied": _one("attn_weights_2_qk",
                                        lambda **i: _weights_2_qk(**i, scale=1.0 / np.sqrt(i["keys"].shape[-1]))),
               "sum_normalisation": _one("attn_weights_2_qk",
                                         lambda attn_scores_2_qk, **_: sum_normalise(attn_scores_2_qk)),
               "no_softmax": _one("attn_weights_2_qk",
                                  lambda attn_scores_2_qk, keys, **_: attn_scores_2_qk / np.sqrt(keys.shape[-1])),
               "power_precedence": _one("attn_weights_2_qk",  # s / d_k ** 1/2 = s / d_k / 2
                                        lambda **i: _weights_2_qk(**i, scale=2.0 * i["keys"].shape[-1])),
               "scale_by_n": _one("attn_weights_2_qk",
                                  lambda **i: _weights_2_qk(**i, scale=float(np.sqrt(i["keys"].shape[0])))),
           },
           hints={
               "missing_scale": "These are the weights of the unscaled scores. Divide the scores by √d_k, the width "
               "of a key, before the softmax.",
               "scale_by_d_model": "You divided by √3, the square root of d_model (the width of an input). The "
               "scores are dot products of a query and a key, which have d_k = 2 entries: divide by √d_k.",
               "no_softmax": "These are the scaled scores. Turn them into weights that sum to 1 with a softmax.",
               "power_precedence": ATTENTION_HINTS["power_precedence"],
               "scale_by_n": "You divided by √6, the square root of the number of keys n. d_k is the width of one "
               "key, 2: keys.shape[-1], not keys.shape[0].",
               "scale_by_d_v": "You divided by the square root of the values' width d_v (values.shape[-1]), which "
               "equals d_k only in this notebook (both 2). The scores are dot products of a query and the keys: "
               "divide by √d_k, the width of a key (keys.shape[-1], or the d_k the notebook set).",
               "fixed_scale": "You divided by √2 whatever the width of the keys: the number typed in (2 ** 0.5, "
               "1.4142), or another size of this example that happens to be 2 (d_model − 1, say). Divide by √d_k "
               "with d_k taken from the keys (keys.shape[-1]) or the notebook's d_k, so that the same line works "
               "for keys of any width.",
           }),
    _value("02.context_2", "The journey's context vector, with trainable weights", ("context_vec_2",),
           _one("context_vec_2", lambda attn_weights_2_qk, values, **_: attn_weights_2_qk @ values),
           reads=("attn_weights_2_qk", "values"),
           # scores of 190: weights written out again without the row's maximum overflow; values of one number: a
           # squeeze shows
           edge=(past_limit_query, one_column_weights("w_value"), loud_value_weights),  # and values in the 1000s
           widths=("keys", "values"),  # values wider than the keys in some replay: values cut to d_k columns show
           dtype="float32",  # step 12 compares the module's float32 row 2 with it: torch.allclose refuses float64
           mistakes={
               "missing_scale": _one("context_vec_2", lambda attn_scores_2_qk, values, **_:
                                     softmax(attn_scores_2_qk) @ values),
               "swapped_projections": _one("context_vec_2", lambda attn_weights_2_qk, keys, **_:
                                           attn_weights_2_qk @ keys),
               "mixed_inputs_not_values": _one("context_vec_2", lambda attn_weights_2_qk, x, **_:
                                               attn_weights_2_qk @ x),
               "earlier_weights_used": _one("context_vec_2", lambda attn_weights_2, values, **_:
                                            attn_weights_2 @ values),
           },
           hints={
               "missing_scale": "You used the weights of the unscaled scores. Use `attn_weights_2_qk`, the weights "
               "of step 9.",
               "swapped_projections": "You mixed the keys. The keys only decide the weights; the context vector "
               "mixes the values.",
               "mixed_inputs_not_values": "You mixed the inputs x, as in part 1. Now the context vector mixes the "
               "values: two numbers, not three.",
               "earlier_weights_used": "You mixed the values with `attn_weights_2`, the weights of part 1 (from the "
               "embeddings' own dot products). Part 2's weights of \"journey\" are `attn_weights_2_qk`, from its "
               "query and the keys.",
           }),
    Exercise(
        "02.self_attention",
        title="self_attention(x, w_query, w_key, w_value)",
        kind="function",
        answers=("self_attention",),
        inputs=_function_inputs,
        reference=attention,
        # one token, values of width 1: the answer is (1, 1), not squeezed; n and d_k in the other order
        # and scores up to 85: a clamp of the scores shows (exp() of each still fits float32)
        # and the first trial's tokens in reverse order (the same shapes): a result kept by shape shows
        # and scores up to 200: a softmax that does not subtract each row's own maximum fails on some rows
        # and the first trial's first word said twice: a function that merges equal rows returns fewer
        # (no trial of scores near 800 for the function: its random float inputs, rounded to float32, leave a right
        # float32 answer outside the tolerance there on some draws)
        # and 40 tokens: tokens cut at a count typed in show
        # and a token of zeros (its scores are exactly 0: a softmax that drops them shows), as many tokens as
        # features (a transpose of a square x shows), and 24 tokens with one loud (a shift by a percentile shows)
        edge=(one_row("x", "w_value"), swapped_n_d_k, near_limit_inputs, past_limit_inputs, rows_reversed("x"),
              repeated_row("x"), far_below_inputs, more_rows("x"), zero_row("x"), square_x(), loud_token(),
              # 130 tokens, one loud (alone, and its twin first), and one that leads its row by about 10: a softmax
              # over blocks of keys without rescaling, a block's own maximum as reference, a one-hot shortcut show;
              # and keys 130 wide: heads of 64 split there show
              loud_token(n=130), loud_token(n=130, twin=True), loud_token(n=130, top=12.0, gap=9.0, quiet=16.0),
              wide_projections("w_query", "w_key", "w_value")),
        signs={"unstable_softmax": overflow_sign(attention, _projected, 88.0),
               "global_max_subtraction": global_shift_sign(attention, _projected, 87.0)},
        widths=("w_key", "w_value"),  # "any size": values wider than the keys in some trial, narrower in another
        mistakes={**ATTENTION_MISTAKES,
                  "scale_by_d_v": lambda **i: attention(**i, scale=float(np.sqrt(i["w_value"].shape[-1])))},
        hints={**ATTENTION_HINTS,
               "scale_by_d_v": "You divided the scores by the square root of the values' width, d_v (values.shape"
               "[-1]), which equals d_k only in this notebook's example. The scores are dot products of queries with "
               "keys: divide by √d_k, keys.shape[-1]."},
        framework="torch",
        dtype="float32",  # SelfAttentionV1 calls it, and its cell compares the result with float32 numbers
        keeps_grad=True,  # SelfAttentionV1 is trained through it: a detached result cannot be
        notebook=NOTEBOOK,
        points=2,
        # float32 inputs: outputs near 0 (values of both signs mixed) carry errors of ~1e-6, and up to ~3e-5 on the
        # near-limit trial (scores of 85): a right answer was rejected on about 1 draw in 300 at 1e-5
        atol=5e-5,
    ),
    _value("02.sa_v1", "SelfAttentionV1 seeded with torch.manual_seed(123)", ("outputs_v1",),
           _one("outputs_v1", _v1), reads=("x", "d_model", "d_k"), module="sa_v1",
           trainable=3, exact_trainable=True, keeps_grad=True,
           # scaled scores of 300: a softmax shifted by anything but each row's maximum fails; and a square x (a
           # transpose when n equals d_model shows), and 24 tokens, one loud (a shift by a percentile shows)
           edge=(loud_v1, square_v1, loud_token_v1),
           one_width=True,  # built with other d_model and d_k too: a √2 typed in, or weights 2 wide, show
           parameters=("w_query", "w_key", "w_value"),
           how={"seeds_in_class": False},  # "drawn like the matrices of step 5": from the generator the cell seeds
           # the module is trained (the next step): its output must reach every weight, not be a new leaf made to
           # require a gradient (`.detach().requires_grad_()`, `torch.tensor(out.tolist(), requires_grad=True)`)
           probes=(Probe("module_grad", lambda rng: {"x": X}, lambda inputs: 0, "gradient_cut"),),
           mistakes={
               "missing_scale": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, scale=1.0)),
               "scale_by_d": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, scale=float(d_k))),
               "scale_by_d_model": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k,
                                                                          scale=float(np.sqrt(x.shape[1])))),
               "power_precedence": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, scale=2.0 * d_k)),
               "scale_by_n": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, scale=float(np.sqrt(x.shape[0])))),
               # √2 typed in: the notebook's d_k (caught on the other widths)
               "fixed_scale": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, scale=float(np.sqrt(2.0)))),
               "transposed_scores": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, transpose=True)),
               "softmax_wrong_axis": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, axis=0)),
               "swapped_projections": _one("outputs_v1", lambda x, d_k, **_: _v1(x, d_k, swap_kv=True)),
               "reads_globals": _one("outputs_v1", lambda x, w_query, w_key, w_value, **_:
                                     attention(x, w_query, w_key, w_value)),
               "weights_returned": _one("outputs_v1", lambda x, d_k, **_: self_attention(x, *_v1_weights(x, d_k))[0]),
               "randn_for_rand": _one("outputs_v1", lambda x, d_k, **_: attention(x, *_v1_weights(x, d_k, randn=True))),
               # one nn.Parameter given to all three attributes (or the generator seeded again before each draw):
               # the first draw serves every role
               "projection_reused:one_matrix": _one("outputs_v1",
                                                    lambda x, d_k, **_: attention(x, *[_v1_weights(x, d_k)[0]] * 3)),
           },
           hints={
               **ATTENTION_HINTS,
               "transposed_scores": "Your output is what keys @ queries.T gives. Either forward computes "
               "keys @ queries.T (use queries @ keys.T), or __init__ draws w_key before w_query, which swaps "
               "their numbers: create w_query, w_key, w_value in that order (or forward hands the weights on in "
               "another order than query, key, value).",
               "swapped_projections": "Your keys and values use each other's weights: either forward mixes up "
               "self.w_key and self.w_value, or __init__ draws w_value before w_key. Create w_query, w_key, "
               "w_value in that order, and take keys from self.w_key, values from self.w_value.",
               "reads_globals": "Your module computes with the notebook's w_query, w_key and w_value (step 5's "
               "matrices), not with weights of its own: either __init__ wraps those matrices (nn.Parameter(w_query) "
               "shares their numbers, so training would change the notebook's w_query too), or forward reads them "
               "instead of self.w_query, …. Draw the module's own weights in __init__, as in step 5, and use "
               "self.w_query, self.w_key and self.w_value in forward.",
               "projection_reused:one_matrix": "Your module uses one and the same matrix, the first draw, for the "
               "queries, the keys and the values: one nn.Parameter given to all three attributes (they are then one "
               "object), the generator seeded again before each draw, or forward using self.w_query for every role. "
               "Each role needs a matrix of its own: draw w_query, w_key and w_value one after the other, each its "
               "own nn.Parameter, and use each for its role in forward.",
           }),
    Exercise(
        "02.trainable", notebook=NOTEBOOK, title="Trainable numbers in SelfAttentionV1", answers=("n_trainable",),
        inputs=_trainable_inputs, edge=(all_frozen, not_trained_yet),
        module="sa_v1",  # the count of the student's own module, when that one is wrong: 🟡 (no trainable to ask for)
        # a module whose output is cut off from its weights (02.sa_v1's probe): a right count of it is 🟡, not ✅
        probes=(Probe("module_grad", lambda rng: {"x": X}, lambda inputs: 0, "gradient_cut"),),
        reference=_count(lambda trainable, frozen, **_: _numbers(trainable)),
        mistakes={
            "counted_tensors": _count(lambda trainable, frozen, **_: len(trainable)),
            "counted_all_tensors": _count(lambda trainable, frozen, **_: len(trainable) + len(frozen)),
            "counted_frozen": _count(lambda trainable, frozen, **_: _numbers(trainable) + _numbers(frozen)),
            # a filter on `p.grad is None` (a parameter no backward pass has reached): every one before training,
            # the frozen ones only after (`requires_grad and grad is None`, 0 after, is right before: no variant)
            "counted_by_grad": lambda sa_v1, **_: {"n_trainable": np.asarray(float(
                _numbers(sa_v1["frozen"]) if sa_v1.get("grads") else _numbers(sa_v1["trainable"])
                + _numbers(sa_v1["frozen"])))},

            "counted_from_shapes": _count(lambda trainable, frozen, d_model, d_k, **_: 3 * d_model * d_k),
            "counted_inputs": lambda x, **_: {"n_trainable": np.asarray(float(np.size(x)))},
            # the state_dict: every parameter, frozen or not, a tied one under each of its names
            "counted_frozen:state_dict": lambda sa_v1, **_: {"n_trainable": np.asarray(float(
                _numbers(sa_v1["trainable"]) + _numbers(sa_v1["frozen"]) + _tied(sa_v1, "trainable")
                + _tied(sa_v1, "frozen")))},
            # each module's own parameters (or every name of named_parameters(remove_duplicate=False))
            "tied_counted_twice": lambda sa_v1, **_: {"n_trainable": np.asarray(float(
                _numbers(sa_v1["trainable"]) + _tied(sa_v1, "trainable")))},
        },
        hints={"counted_tensors": "You counted the weight tensors (3), not the numbers in them. Add up the number "
               "of entries of every parameter that requires a gradient (a tensor's .numel()).",
               "counted_all_tensors": "You counted the weight tensors, not the numbers in them (and every tensor, "
               "frozen ones too). Add up the number of entries (a tensor's .numel()) of the parameters that require "
               "a gradient.",
               "counted_by_grad": "Your count picks the parameters by their `.grad`: `p.grad is None` only says "
               "that no backward pass has reached a parameter yet. Before any training that is every parameter, "
               "the frozen ones as well; on a module trained before (its trainable parameters hold gradients), "
               "only the frozen ones. Keep the parameters with p.requires_grad: that is what marks a trainable one.",
               "counted_frozen": "Your count takes in frozen parameters too: on a module with a frozen parameter "
               "(requires_grad=False, like the cell's `frozen` below) it counts numbers that training never changes "
               "(on one whose every parameter is trainable, as the notebook's sa_v1, it happens to come out right). "
               "Keep only the parameters with p.requires_grad: that is what marks a trainable one (p.grad cannot "
               "tell: it stays None for every parameter until a backward pass; a state_dict() cannot either: it "
               "holds plain tensors).",
               "counted_from_shapes": "Your count comes to three d_model × d_k matrices whatever the module holds "
               "(computed from the sizes, one matrix's .numel() times 3, or the same weights counted whether they "
               "train or not): right only for a module made exactly like SelfAttentionV1 with every "
               "weight trainable. Count what sa_v1 itself holds: the entries (.numel()) of its parameters that "
               "require a gradient.",
               "tied_counted_twice": "Your count adds a parameter twice when two submodules share it (tied "
               "weights, one parameter under two names): going through each module's own parameters, or through "
               "every name of the module, meets it once per name. `sa_v1.parameters()` yields each parameter once: "
               "count over that.",
               "counted_inputs": "You counted the numbers of the inputs x, which happen to be 18 too. Training "
               "changes the module's own numbers: add up the entries of sa_v1's parameters (sa_v1.parameters()), "
               "which do not depend on the inputs."},
        # a module's parameters need not be matrices: a bias has one axis, a learnable temperature none
        raised_hints=((r"expected a non-empty list of Tensors|empty sequence|must be non-empty",
                       "On a module whose every parameter is frozen (like the cell's `frozen`), the count is 0, and "
                       "joining or comparing no tensors at all (`torch.cat`, `torch.stack`, `max`) raises. Add up "
                       "each trainable parameter's .numel() instead: a sum of nothing is 0."),
                      (r"tuple index out of range|reduce\(\) of empty",
                       "Your count takes every parameter for a matrix (its p.shape[0] and p.shape[1], or the product "
                       "of its sizes with no start), but a parameter may have one axis (a bias) or none (a learnable "
                       "temperature). Count each one's entries with p.numel(), whatever its shape."),),
    ),
    Exercise(
        "02.sa_v2",
        title="SelfAttentionV2 with nn.Linear",
        kind="function",
        answers=("attention_v2_with",),
        inputs=_one_width_inputs,
        reference=attention,
        mistakes=ATTENTION_MISTAKES,
        # one token: the outputs are (1, d_k), not squeezed; and scores up to 85, up to 200 and a row far below 0,
        # as for self_attention: a softmax in forward that does not subtract each row's own maximum fails
        # and, as for self_attention, a token of zeros, a square x and 24 tokens with one loud
        edge=(one_row("x"), *map(_one_width, (near_limit_inputs, past_limit_inputs, far_below_inputs)),
              zero_row("x"), square_x(), loud_token(), loud_token(n=130), loud_token(n=130, twin=True),
              loud_token(n=130, top=12.0, gap=9.0, quiet=16.0), wide_projections("w_query", "w_key", "w_value")),
        signs={"unstable_softmax": overflow_sign(attention, _projected, 88.0),
               "global_max_subtraction": global_shift_sign(attention, _projected, 87.0)},
        dtype="float32",  # layers made float64 give other numbers than the float32 module of the notebook
        keeps_grad=True, module="sa_v2",  # the cell's sa_v2: its output must keep the gradient to its layers
        # and its layers start as nn.Linear draws them, as the step's text says (a zero or a ×100 start passed)
        default_init=("w_query", "w_key", "w_value"),
        # and it is trained: a forward that keeps its result (or its projections) for an input it has seen gives the
        # old numbers after a step of the optimizer, and its second backward raises
        probes=(Probe("module_grad", lambda rng: {"x": X}, lambda inputs: 0, "gradient_cut"),),
        hints={
            **ATTENTION_HINTS,
            "swapped_projections": "Your keys and values use each other's layers. Keys come from "
            "self.w_key(x), values from self.w_value(x).",
            "mixed_inputs_not_values": "You mixed the inputs x with the weights. The context vectors mix the "
            "values, self.w_value(x).",
            "projection_reused": "Your outputs mix the keys: the values made with self.w_key, or the weights applied "
            "to the keys. The keys only decide the weights; the context vectors mix the values, self.w_value(x).",
        },
        framework="torch",
        notebook=NOTEBOOK,
        points=2,
        atol=5e-5,  # as for 02.self_attention (float32 rounding on its near-limit trial)
    ),
]

register(*PART_1, *PART_2)
