"""Notebook 05 — a NumPy ``self_attention`` and the bug in it (seed 004).

The seed normalises ``exp(scores)`` by ONE sum over the whole score matrix instead of
one sum per row, skips the 1/√d_k scaling, and draws its queries, keys and values at
random instead of projecting token embeddings. The exercises find the bug on the seed's
own matrices, fix it there, write a stable row-wise softmax, and then a correct
``self_attention(x, w_q, w_k, w_v)`` on seeded token embeddings.

The seed's matrices come from an unseeded generator and are printed to 8 decimals only.
Recomputing from those 8-decimal values moves the 8th decimal of some results, so the
matrices below carry three more digits: they round to exactly the seed's printed
matrices and reproduce every score, weight and output it printed.
"""

from __future__ import annotations

import numpy as np

from ..reference import global_softmax, self_attention, softmax, unstable_softmax
from ..spec import Exercise, register, upstream_of

NOTEBOOK = "05_numpy_self_attention_bug"
SEED = "004_0a3221decd775555.txt"  # every number it prints must appear in the stored outputs

_UNSEEDED = "drawn by the seed from NumPy's unseeded global generator, so no one can draw it again"
_HOW_ARE_YOU = (
    "output of the seed's self_attention('How are you'), which draws fresh random matrices inside "
    "the function and never prints them, so it cannot be recomputed"
)
# fmt: off
SEED_EXCUSED = {
    **{t: _UNSEEDED for t in (
        "0.24595806", "0.80297821", "0.91356724", "0.3644435", "0.85240105",
        "0.06672613", "0.12761768", "0.4752835", "0.84502346", "0.26101756",
    )},
    **{t: _HOW_ARE_YOU for t in (
        "0.03466487", "0.16967173", "0.02008044", "0.0387055", "0.07074764", "0.03003003",
        "0.12138279", "0.0065977", "0.5081193",
        "-0.07045921", "0.30256486", "0.02967586", "-0.04790429", "0.19714705", "0.02780509",
        "-0.43380583", "0.22494098", "-0.06037294",
    )},
}

# The seed's matrices for "how are you doing" (rounded to 8 decimals, they are exactly what it printed).
QUERY = np.array([
    [0.17893869346, -0.84604280093, 0.45129721702, -0.41137148007],
    [1.14494046216, 0.53410844201, -0.23760124068, -1.08492736654],
    [-0.12321855702, 0.87362528963, -0.40952102956, -0.42694097654],
    [-0.54553616158, 0.60786712346, -0.84776331654, 1.20422583346],
])
KEYS = np.array([
    [2.43169512654, -0.30909618346, 1.25203020654, -0.92018300346],
    [-1.84807596346, 1.18086691654, -0.53522638346, 1.48934727157],
    [-0.72982072018, -0.44740646346, -1.32930931744, -0.39467154346],
    [0.10700545654, 0.45875576749, 2.53498868654, 1.12647361831],
])
VALUES = np.array([
    [0.57437671, 0.9038271865, 0.36601465757, -1.0168540935],
    [-0.76705726155, -1.04074081286, -0.56039835727, -0.28129068134],
    [-0.80001236, 0.6158418465, 0.4593210135, -0.6520006535],
    [0.93936566, -0.5717334035, -0.2347110965, 0.1864032465],
])
# fmt: on

TOKENS = ["how", "are", "you", "doing"]
D_MODEL, D_K = 8, 3


def embedding_example() -> dict:
    """The notebook's token embeddings and projections, drawn exactly as the notebook draws them."""
    rng = np.random.default_rng(0)
    vocab = sorted(set(TOKENS))
    table = rng.standard_normal((len(vocab), D_MODEL))
    w_q = rng.standard_normal((D_MODEL, D_K)) / np.sqrt(D_MODEL)
    w_k = rng.standard_normal((D_MODEL, D_K)) / np.sqrt(D_MODEL)
    w_v = rng.standard_normal((D_MODEL, D_K)) / np.sqrt(D_MODEL)
    x = table[[vocab.index(t) for t in TOKENS]]
    return {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v}


def world(rng: np.random.Generator | None = None) -> dict:
    """The notebook's arrays, in order (``rng=None``: the seed's matrices and the seeded embeddings).

    Fresh worlds draw 4 × 4 queries, keys and values, and new embeddings and projections of the
    notebook's shapes (d_model = 8, d_k = 3).
    """
    if rng is None:
        query, keys, values = QUERY, KEYS, VALUES
        emb = embedding_example()
    else:
        query, keys, values = (rng.normal(size=(4, 4)) for _ in range(3))
        emb = {"x": rng.standard_normal((4, D_MODEL)),
               **{w: rng.standard_normal((D_MODEL, D_K)) / np.sqrt(D_MODEL) for w in ("w_q", "w_k", "w_v")}}
    scores = query @ keys.T
    original = global_softmax(scores)
    fixed = softmax(scores / np.sqrt(keys.shape[-1]))
    q, k = emb["x"] @ emb["w_q"], emb["x"] @ emb["w_k"]
    return {
        "query": query, "keys": keys, "values": values,
        "scores": scores,
        "attention_weights": original,
        "attention_value": original @ values,
        "row_sums": original.sum(axis=1),
        "fixed_weights": fixed,
        "fixed_value": fixed @ values,
        "w_q": emb["w_q"], "w_k": emb["w_k"], "w_v": emb["w_v"], "x": emb["x"],
        "q": q, "k": k,
        "attn_weights": softmax(q @ k.T / np.sqrt(D_K)),
    }


# --- part 2: the bug, found and fixed on the seed's matrices ---------------------------


def _fixed(scores, keys, normalise=softmax, divisor=None, **_):
    """Normalised scores, divided by √d_k unless another divisor is given."""
    if divisor is None:
        divisor = np.sqrt(keys.shape[-1])
    return normalise(scores / divisor)


def _no_keepdim(s):
    with np.errstate(all="ignore"):
        e = np.exp(s - s.max())
        return e / e.sum(axis=-1)


FIXED_WEIGHTS_MISTAKES = {
    "global_softmax": lambda **i: {"fixed_weights": _fixed(**i, normalise=global_softmax)},
    "softmax_wrong_axis": lambda **i: {"fixed_weights": _fixed(**i, normalise=lambda s: softmax(s, axis=0))},
    "missing_keepdim": lambda **i: {"fixed_weights": _fixed(**i, normalise=_no_keepdim)},
    "no_softmax": lambda **i: {"fixed_weights": _fixed(**i, normalise=lambda s: s)},
    "missing_scale": lambda **i: {"fixed_weights": _fixed(**i, divisor=1.0)},
    "scale_by_d": lambda **i: {"fixed_weights": _fixed(**i, divisor=float(i["keys"].shape[-1]))},
}

FIXED_VALUE_MISTAKES = {
    # the original's own attention_value: its globally normalised, unscaled weights @ values
    "global_softmax": lambda attention_weights, values, **_: {"fixed_value": attention_weights @ values},
    "elementwise_product": lambda fixed_weights, values, **_: {"fixed_value": fixed_weights * values},
    "transposed_scores": lambda fixed_weights, values, **_: {"fixed_value": fixed_weights.T @ values},
}

# --- part 4: a stable, row-wise softmax -----------------------------------------------


def softmax_inputs(rng: np.random.Generator | None = None) -> dict:
    """The seed's scores (rng=None), or random scores with one row of very negative scores.

    Around -742, exp() returns subnormal numbers with only a few correct digits, so a
    softmax that does not subtract the row maximum comes out finite but visibly wrong
    (0/0 = NaN below about -745). The other rows stay moderate but far apart, so one
    maximum for the whole matrix underflows there too.
    """
    if rng is None:
        return {"scores": QUERY @ KEYS.T}
    n = int(rng.integers(3, 7))  # square, as the scores of self-attention are
    scores = rng.normal(scale=3.0, size=(n, n))
    scores[int(rng.integers(n))] = -742.0 + rng.uniform(-1.5, 1.5, size=n)
    return {"scores": scores}


def ref_softmax(scores):
    return softmax(scores, axis=-1)


def _global_max(scores):
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        e = np.exp(scores - scores.max())
        return e / e.sum(axis=-1, keepdims=True)


SOFTMAX_MISTAKES = {
    "global_softmax": global_softmax,
    "softmax_wrong_axis": lambda scores: softmax(scores, axis=0),
    "unstable_softmax": lambda scores: unstable_softmax(scores, axis=-1),
    "missing_keepdim": lambda scores: _no_keepdim(scores),
    "global_max_subtraction": _global_max,
}

# --- part 5: a correct self_attention on token embeddings -----------------------------


def attention_inputs(rng: np.random.Generator | None = None) -> dict:
    """The notebook's embeddings (rng=None) or random ones; d_k = d_v so every variant is defined."""
    if rng is None:
        return embedding_example()
    n, d_model, d_k = int(rng.integers(2, 7)), int(rng.integers(3, 9)), int(rng.integers(2, 6))
    return {
        "x": rng.standard_normal((n, d_model)),
        "w_q": rng.standard_normal((d_model, d_k)) / np.sqrt(d_model),
        "w_k": rng.standard_normal((d_model, d_k)) / np.sqrt(d_model),
        "w_v": rng.standard_normal((d_model, d_k)) / np.sqrt(d_model),
    }


def _attention_weights(x, w_q, w_k, w_v=None, **how):
    return self_attention(x, w_q, w_k, w_k if w_v is None else w_v, **how)[0]


def _attention(x, w_q, w_k, w_v, **how):
    return self_attention(x, w_q, w_k, w_v, **how)[1]


def _weights_from(x, w_q, w_k, **how):
    return {"attn_weights": _attention_weights(x, w_q, w_k, **how)}


WEIGHTS_MISTAKES = {
    "missing_scale": lambda x, w_q, w_k, **_: _weights_from(x, w_q, w_k, scale="none"),
    "scale_by_d": lambda x, w_q, w_k, **_: _weights_from(x, w_q, w_k, scale="d"),
    "scale_by_d_model": lambda x, w_q, w_k, **_: _weights_from(x, w_q, w_k, scale=float(np.sqrt(x.shape[-1]))),
    "transposed_scores": lambda x, w_q, w_k, **_: _weights_from(x, w_q, w_k, transpose=True),
    "softmax_wrong_axis": lambda x, w_q, w_k, **_: _weights_from(x, w_q, w_k, normalise=lambda s: softmax(s, 0)),
    "global_softmax": lambda x, w_q, w_k, **_: _weights_from(x, w_q, w_k, normalise=global_softmax),
}


def ref_weights(x, w_q, w_k, **_):
    return _weights_from(x, w_q, w_k)


def ref_self_attention(x, w_q, w_k, w_v):
    return _attention(x, w_q, w_k, w_v)


ATTENTION_MISTAKES = {
    "global_softmax": lambda **i: _attention(**i, normalise=global_softmax),
    "missing_scale": lambda **i: _attention(**i, scale="none"),
    "scale_by_d": lambda **i: _attention(**i, scale="d"),
    "scale_by_d_model": lambda **i: _attention(**i, scale=float(np.sqrt(i["x"].shape[-1]))),
    "transposed_scores": lambda **i: _attention(**i, transpose=True),
    "softmax_wrong_axis": lambda **i: _attention(**i, normalise=lambda s: softmax(s, axis=0)),
    "swapped_projections": lambda **i: _attention(**i, swap_kv=True),
}

_TRANSPOSED = (
    "Your scores are transposed: row i must belong to query i, i.e. q @ k.T with q = x @ w_q and "
    "k = x @ w_k. (k @ q.T, or queries made with w_k and keys with w_q, give this same wrong answer.)"
)


def _value(ex_id, title, answers, reference, **kw):
    return Exercise(ex_id, notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                    inputs=upstream_of(world, answers[0]), framework="numpy", **kw)


register(
    _value("05.row_sums", "Row sums of the original's weights", ("row_sums",),
           lambda attention_weights, **_: {"row_sums": attention_weights.sum(axis=1)}, reads=("attention_weights",),
           mistakes={"sum_wrong_axis": lambda attention_weights, **_: {"row_sums": attention_weights.sum(axis=0)}},
           hints={"sum_wrong_axis": "You summed each column (axis=0). One query's weights are one row: "
                  "sum over axis=1 (or axis=-1)."}),
    _value("05.fixed_weights", "The fixed weights: scaled scores, softmax per row", ("fixed_weights",),
           lambda **i: {"fixed_weights": _fixed(**i)}, reads=("scores", "keys"), mistakes=FIXED_WEIGHTS_MISTAKES,
           hints={
               "global_softmax": "That is the original's bug again: you divided by one sum over the whole "
               "matrix. Sum each row on its own: np.sum(..., axis=1, keepdims=True).",
               "missing_scale": "Each row sums to 1 now, but the scores were not scaled. Divide `scores` by "
               "√d_k = √4 = 2 before the softmax, like the original forgot to.",
           }),
    _value("05.fixed_value", "The fixed attention value", ("fixed_value",),
           lambda fixed_weights, values, **_: {"fixed_value": fixed_weights @ values},
           reads=("fixed_weights", "values"), mistakes=FIXED_VALUE_MISTAKES,
           hints={
               "global_softmax": "That is the original's attention_value: it comes from the original's "
               "weights. Use your `fixed_weights` (each row sums to 1): fixed_weights @ values.",
               "transposed_scores": "You used the transposed weights. Row i of fixed_weights belongs to "
               "token i: fixed_weights @ values.",
           }),
    Exercise(
        "05.softmax",
        notebook=NOTEBOOK,
        title="softmax(scores): row-wise and stable",
        answers=("softmax",),
        kind="function",
        framework="numpy",
        inputs=softmax_inputs,
        reference=ref_softmax,
        mistakes=SOFTMAX_MISTAKES,
        points=2,
        hints={
            "softmax_wrong_axis": "Your softmax normalised each column. Each row must sum to 1: take the "
            "max and the sum over axis=-1 with keepdims=True.",
            "unstable_softmax": "Your softmax does not subtract each row's maximum, and it shows: the "
            "check's random scores contain a row near -742, where exp() keeps only a few correct digits "
            "(and very large scores would overflow to inf). Subtract the row maximum "
            "(np.max(scores, axis=-1, keepdims=True)) before np.exp.",
        },
    ),
    _value("05.weights", "Attention weights of 'how are you doing'", ("attn_weights",), ref_weights,
           reads=("x", "w_q", "w_k"), mistakes=WEIGHTS_MISTAKES, hints={"transposed_scores": _TRANSPOSED}),
    Exercise(
        "05.self_attention",
        notebook=NOTEBOOK,
        title="self_attention(x, w_q, w_k, w_v)",
        answers=("self_attention",),
        kind="function",
        framework="numpy",
        inputs=attention_inputs,
        reference=ref_self_attention,
        mistakes=ATTENTION_MISTAKES,
        points=2,
        depends_on=("05.softmax",),
        hints={
            "transposed_scores": _TRANSPOSED,
            "swapped_projections": "Your keys and values use each other's weights. Keys are x @ w_k, "
            "values are x @ w_v.",
        },
    ),
)
