"""Notebook 05 — a NumPy ``self_attention`` and the bug in it (seed 004).

The seed normalises ``exp(scores)`` by ONE sum over the whole score matrix instead of one sum
per row, uses the raw dot products (no scaling by √d_k), and draws its queries, keys and values
at random (with a width tied to the sentence length) instead of projecting token embeddings.
The exercises find the bug on the seed's own matrices and fix it there (the row-wise softmax of
the raw scores alone, then the scaling as its own step), write a stable row-wise softmax, and
then ``self_attention(x, w_query, w_key, w_value)`` on seeded token embeddings.

The seed's matrices come from an unseeded generator and are printed to 8 decimals only.
Recomputing from those 8-decimal values moves the 8th decimal of some results, so the
matrices below carry three more digits: they round to exactly the seed's printed matrices and
reproduce every score, weight and output it printed.
"""

from __future__ import annotations

import numpy as np

from ..reference import (
    global_softmax,
    log_softmax,
    max_of_columns,
    max_without_keepdim,
    one_sum,
    projected_scores,
    self_attention,
    sigmoid,
    softmax,
    sum_normalise,
    sum_unshifted,
    unstable_softmax,
)
from ..roles import mix_ups
from ..spec import (
    Exercise,
    decades_x,
    far_below_x,
    large_scores,
    loud_token,
    more_rows,
    one_row,
    overflow_sign,
    register,
    repeated_row,
    rows_reversed,
    sum_overflow_hint,
    sum_overflow_sign,
    upstream_of,
    zero_row,
)

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
QUERIES = np.array([
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
    w_query = rng.standard_normal((D_MODEL, D_K)) / np.sqrt(D_MODEL)
    w_key = rng.standard_normal((D_MODEL, D_K)) / np.sqrt(D_MODEL)
    w_value = rng.standard_normal((D_MODEL, D_K)) / np.sqrt(D_MODEL)
    x = table[[vocab.index(t) for t in TOKENS]]
    return {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value}


def world(rng: np.random.Generator | None = None, vary_n: bool = False, n: int | None = None) -> dict:
    """The notebook's arrays, in order (``rng=None``: the seed's matrices and the seeded embeddings).

    Fresh worlds draw new queries and keys for the 4 tokens, of a width d_k other than 4 (so that
    the number of tokens or a typed-in 2 cannot stand in for √d_k), values as wide as the sentence
    is long (as the original's: the wrong products of the values stay defined), and new embeddings
    and projections (d_model = 8, d_k = 3). ``vary_n`` also changes the number of tokens (for a
    step whose cell does not draw the 4 tokens' labels), so that √n cannot pass either, and the width of
    the values, apart from n, d_k and 4, so that √d_v cannot either; ``n`` (with ``vary_n``) that number.
    """
    if rng is None:
        queries, keys, values = QUERIES, KEYS, VALUES
        emb = embedding_example()
    else:
        n = (n or int(rng.integers(3, 8))) if vary_n else len(TOKENS)
        d_k = int(rng.choice([2, 3, 5, 6, 7]))
        queries, keys = (rng.standard_normal((n, d_k)) for _ in range(2))
        d_v = int(rng.choice([w for w in (2, 3, 5, 6, 7, 8) if w not in (n, d_k)])) if vary_n else n
        values = rng.standard_normal((n, d_v))
        # part 5's keys of another width than the notebook's 3 (and than the 4 tokens): a typed-in √3, or a
        # 3 found elsewhere (len(x) - 1), shows; the given d_k follows
        d_k5 = int(rng.choice([2, 5, 6, 7]))
        emb = {**{w: rng.standard_normal((D_MODEL, d_k5)) / np.sqrt(D_MODEL) for w in ("w_query", "w_key", "w_value")},
               "x": rng.standard_normal((4, D_MODEL))}
        # and values of another width than the keys (the notebook's are both 3): a √d_v for √d_k shows (drawn last,
        # so that every other number is what it was)
        d_v5 = int(rng.choice([w for w in (2, 5, 6, 7) if w != d_k5]))
        emb["w_value"] = rng.standard_normal((D_MODEL, d_v5)) / np.sqrt(D_MODEL)
    attn_scores = queries @ keys.T
    original = global_softmax(attn_scores)
    fixed = softmax(attn_scores)
    q, k = emb["x"] @ emb["w_query"], emb["x"] @ emb["w_key"]
    return {
        # the sentence's labels, one per token (the cells use len(tokens) as the number of tokens)
        "tokens": list(TOKENS) if len(queries) == len(TOKENS) else [f"token {i + 1}" for i in range(len(queries))],
        "queries": queries, "keys": keys, "values": values,
        "attn_scores": attn_scores,
        "attention_weights": original,
        "attention_value": original @ values,
        "row_sums": original.sum(axis=1),
        "fixed_weights": fixed,
        "fixed_value": fixed @ values,
        "scaled_weights": softmax(attn_scores / np.sqrt(keys.shape[-1])),
        "d_model": D_MODEL, "d_k": emb["w_key"].shape[-1],
        "w_query": emb["w_query"], "w_key": emb["w_key"], "w_value": emb["w_value"], "x": emb["x"],
        "q": q, "k": k,
        "attn_weights": softmax(q @ k.T / np.sqrt(k.shape[-1])),
    }


def quarter_scores(first: dict) -> dict:
    """An edge trial: the first trial's scores rounded to quarters (every sum of them exact, whatever the order)."""
    return {**first, "scores": np.round(np.asarray(first["scores"], dtype=np.float64) * 4.0) / 4.0}


def rows_reversed_scores(first: dict) -> dict:
    """An edge trial after :func:`quarter_scores`: its rows in reverse order (the same shape and exactly the same
    total, other rows): a softmax that keeps its results by the scores' shape and sum hands back the last ones."""
    scores = quarter_scores(first)["scores"]
    return {**first, "scores": scores[::-1].copy()} if scores.ndim == 2 and len(scores) > 1 else first


def one_row_of_all(first: dict) -> dict:
    """An edge trial after :func:`quarter_scores`: its scores as one row (the same numbers in the same order: the
    same bytes, another shape), whose softmax is another: a softmax that keeps its results by the scores' bytes
    (`scores.tobytes()`) hands back the earlier, wrong-shaped, weights."""
    scores = quarter_scores(first)["scores"]
    return {**first, "scores": np.ascontiguousarray(scores).reshape(1, -1)} if scores.ndim == 2 else first


quarter_scores.of_first_trial = True
rows_reversed_scores.of_first_trial = True
one_row_of_all.of_first_trial = True


def world_any_n(rng: np.random.Generator | None = None) -> dict:
    return world(rng, vary_n=True)


def one_token(first: dict) -> dict:
    """An edge replay of a sentence of one token, drawn from a generator seeded by the first replay's scores (the same
    inputs give the same edge): its one row of weights is (1, 1), and a `.squeeze()` takes it down to a number."""
    rng = np.random.default_rng([int(abs(v) * 1000) % 10_000 for v in np.ravel(first["attn_scores"])][:32])
    full = world(rng, vary_n=True, n=1)
    return {name: full[name] for name in first}


one_token.of_first_trial = True


# --- part 2: the bug, found and fixed on the seed's matrices ---------------------------


def _sum_no_keepdim(s):
    """exp(s) divided by the row sums without keepdims: entry (i, j) divided by the sum of row j."""
    e = np.exp(s)
    return e / e.sum(axis=-1)


def _fixed(fn):
    return lambda attn_scores, **_: {"fixed_weights": fn(attn_scores)}


FIXED_WEIGHTS_MISTAKES = {
    "global_softmax": _fixed(global_softmax),  # the original's attention_weights again
    "max_without_keepdim": _fixed(max_without_keepdim),
    "max_wrong_axis": _fixed(max_of_columns),
    "sum_without_axis": _fixed(one_sum),  # each row's maximum, then one sum for the whole matrix
    "softmax_wrong_axis": _fixed(lambda s: softmax(s, axis=0)),
    "missing_keepdim": _fixed(_sum_no_keepdim),
    "transposed_scores": _fixed(lambda s: softmax(s.T)),
    "no_softmax": _fixed(lambda s: s),
    "sum_normalisation": _fixed(sum_normalise),
    "unexpected_scale": lambda attn_scores, keys, **_: {
        "fixed_weights": softmax(attn_scores / np.sqrt(keys.shape[-1]))},
}

FIXED_VALUE_MISTAKES = {
    # the original's own attention_value: its globally normalised weights @ values
    "global_softmax": lambda attention_weights, values, **_: {"fixed_value": attention_weights @ values},
    "elementwise_product": lambda fixed_weights, values, **_: {"fixed_value": fixed_weights * values},
    "transposed_scores": lambda fixed_weights, values, **_: {"fixed_value": fixed_weights.T @ values},
    "values_times_weights": lambda fixed_weights, values, **_: {"fixed_value": values @ fixed_weights},
    "values_transposed": lambda fixed_weights, values, **_: {"fixed_value": fixed_weights @ values.T},  # (square)
    # the original's value divided by its row sums, an (n,) vector lined up with the columns
    "missing_keepdim": lambda attention_value, row_sums, **_: {"fixed_value": attention_value / row_sums},
}


def ref_scaled(attn_scores, keys, **_):
    return {"scaled_weights": softmax(attn_scores / np.sqrt(keys.shape[-1]))}


def _scaled(fn, divisor=None):
    """A wrong ``scaled_weights``: ``fn`` applied to the scores divided by ``divisor(d_k)`` (√d_k)."""
    def variant(attn_scores, keys, **_):
        d_k = keys.shape[-1]
        return {"scaled_weights": fn(attn_scores / (np.sqrt(d_k) if divisor is None else divisor(d_k)))}
    return variant


SCALED_WEIGHTS_MISTAKES = {
    "missing_scale": _scaled(softmax, divisor=lambda d_k: 1.0),  # fixed_weights again
    "scale_by_d": _scaled(softmax, divisor=float),
    "scale_after_softmax": lambda attn_scores, keys, **_: {
        "scaled_weights": softmax(attn_scores) / np.sqrt(keys.shape[-1])},
    "global_softmax": _scaled(global_softmax),
    "softmax_wrong_axis": _scaled(lambda s: softmax(s, axis=0)),
    "missing_keepdim": _scaled(_sum_no_keepdim),
    "scale_multiplied": _scaled(softmax, divisor=lambda d_k: 1 / np.sqrt(d_k)),
    "softmax_base_two": _scaled(softmax, divisor=lambda d_k: np.sqrt(d_k) / np.log(2.0)),  # 2 ** s: e ** (s ln 2)
    "log_softmax_as_weights": _scaled(log_softmax),
    "sigmoid_as_softmax": _scaled(sigmoid),
    "power_precedence": _scaled(softmax, divisor=lambda d_k: 2.0 * d_k),  # s / d_k ** 1/2 = (s / d_k) / 2
    # √len(tokens), √4 or 2 typed in: the notebook's number whatever the keys
    "fixed_scale": lambda attn_scores, **_: {"scaled_weights": softmax(attn_scores / 2.0)},
    "scale_by_n": lambda attn_scores, keys, **_: {"scaled_weights": softmax(attn_scores / np.sqrt(keys.shape[0]))},
    "scale_by_d_v": lambda attn_scores, values, **_: {
        "scaled_weights": softmax(attn_scores / np.sqrt(values.shape[-1]))},
}

# --- part 4: a stable, row-wise softmax -----------------------------------------------


def softmax_inputs(rng: np.random.Generator | None = None) -> dict:
    """The seed's scores (rng=None), or random scores with two extreme rows.

    One row of very negative scores: around -742, exp() returns subnormal numbers with only a few
    correct digits, so a softmax that does not subtract the row maximum comes out finite but
    visibly wrong (0/0 = NaN below about -745). One row in which two scores lie about 800 above
    the others: exp() of the difference overflows, so subtracting the row's minimum (or nothing)
    gives inf / inf = NaN there, while the maximum keeps it finite. The other rows stay moderate
    but far apart, so one maximum for the whole matrix underflows there too. A third row has one score
    2 400 above the others (see below).
    """
    if rng is None:
        return {"scores": QUERIES @ KEYS.T}
    n = int(rng.integers(3, 7))  # square, as the scores of self-attention are
    scores = rng.normal(scale=3.0, size=(n, n))
    low, wide, peak = (int(r) for r in rng.choice(n, size=3, replace=False))
    scores[low] = -742.0 + rng.uniform(-1.5, 1.5, size=n)
    scores[wide, rng.choice(n, size=2, replace=False)] += 800.0 + rng.uniform(-1.0, 1.0, size=2)
    # one score 2 400 above the rest of its row: at least 1 600 above the row's mean, so subtracting the mean
    # instead of the maximum overflows too
    scores[peak, rng.integers(n)] += 2400.0 + rng.uniform(-1.0, 1.0)
    return {"scores": scores}


def ref_softmax(scores):
    return softmax(scores, axis=-1)


def _global_max(scores):
    e = np.exp(scores - scores.max())
    return e / e.sum(axis=-1, keepdims=True)


def _keepdims_nowhere(scores):
    """Row maxima and row sums both without keepdims: NumPy lines each up with the columns."""
    e = np.exp(scores - scores.max(axis=-1))
    return e / e.sum(axis=-1)


def _sum_without_keepdim(scores):
    """Each row's own maximum subtracted, but the row sums without keepdims (lined up with the columns)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1)


def _shifted_by_min(scores):
    """Each row's minimum subtracted instead of its maximum: a large spread overflows."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(scores - scores.min(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _shifted_by_mean(scores):
    """Each row's mean subtracted instead of its maximum: a score far above the rest still overflows."""
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(scores - scores.mean(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _max_without_keepdim(scores):
    """The row maxima without keepdims (shifting column j by row j's maximum), the sums with it."""
    e = np.exp(scores - scores.max(axis=-1))
    return e / e.sum(axis=-1, keepdims=True)


def _max_of_columns(scores):
    """Each column's maximum subtracted instead of each row's (`axis=0`), written out: a row far below its columns'
    maxima underflows to 0 / 0."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        e = np.exp(scores - scores.max(axis=0, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)


def _sums_of_columns(scores):
    """Each row's own maximum subtracted, but the exponentials divided by the sums of the columns (axis=0)."""
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _bounded_rows(scores) -> np.ndarray:
    """The scores squeezed into ±30 around each row's median, distinct and in the same order."""
    s = np.array(scores, dtype=float)
    return 30.0 * np.tanh((s - np.median(s, axis=-1, keepdims=True)) / 10.0)


def far_above(inputs: dict) -> dict:
    """An edge trial: in every row, the largest score lifted 1 500 above the others (which lie within ±30).
    Subtracting any number of the row well below its maximum (its mean, median, second-largest or smallest
    score) leaves an exponent above 709: exp() overflows, and inf / inf = NaN."""
    s = _bounded_rows(inputs["scores"])
    rows = np.arange(s.shape[0])
    s[rows, s.argmax(axis=-1)] += 1500.0
    return {**inputs, "scores": s}


def far_above_last(inputs: dict) -> dict:
    """:func:`far_above`'s trial with each row's lifted score moved to the last column: a row maximum that leaves the
    last column out (`scores[:, :-1].max(...)`) overflows there as one that leaves the first out does elsewhere."""
    s = far_above(inputs)["scores"]
    rows = np.arange(s.shape[0])
    top = s.argmax(axis=-1)
    s[rows, top], s[rows, -1] = s[rows, -1], s[rows, top].copy()
    return {**inputs, "scores": s}


def far_above_last_wide(inputs: dict) -> dict:
    """:func:`far_above_last`'s first two rows only, so that each row has more scores than there are rows: a row
    maximum taken over as many columns as there are rows (`scores[:, :len(scores)]`) leaves the loud last one out."""
    s = far_above_last(inputs)["scores"]
    return {**inputs, "scores": s[:2].copy()} if s.ndim == 2 and s.shape[-1] > 2 else inputs


def past_half_rows(inputs: dict) -> dict:
    """An edge trial of rows whose largest score lies past float16's largest number (65 504) and other scores 10 and
    more below it: a row maximum kept in float16 is inf there (NaN after the shift), as are float16 scores."""
    return {"scores": np.array([[70000.0, 69990.0, 0.0, -10.0],
                                [-5.0, 1.0, 66000.0, 65980.0],
                                [3.0, 0.0, -2.0, 1.0]])}


def far_below(inputs: dict) -> dict:
    """An edge trial: in every row, the smallest score dropped 1 000 below the others (which lie within ±30).
    Subtracting more than the maximum (the median plus the range, say) pushes every exponent below -745:
    exp() underflows to 0 everywhere, and 0 / 0 = NaN. Below the maximum, only the smallest score is that far."""
    s = _bounded_rows(inputs["scores"])
    rows = np.arange(s.shape[0])
    s[rows, s.argmin(axis=-1)] -= 1000.0
    return {**inputs, "scores": s}


def all_very_negative(inputs: dict) -> dict:
    """An edge trial: every score near −800 (within ±30 of it), as in the notebook's softmax(-big): exp() of the raw
    scores underflows to 0 everywhere, so a shift made only when the scores are large (`if scores.max() > 700`)
    leaves 0 / 0."""
    return {**inputs, "scores": _bounded_rows(inputs["scores"]) - 800.0}


def level_rows(inputs: dict) -> dict:
    """An edge trial of ordinary scores whose rows are flat: every score of a row equal, or nearly (uniform weights,
    the case of identical tokens). A shift by anything above each row's maximum (max - 709, say) makes their
    exponentials so large that the row's sum overflows to inf, and the row comes out as zeros."""
    return {"scores": np.array([[0.0, 0.0, 0.0, 0.0, 0.0], [1.5, 1.5, 1.25, 1.5, 1.5], [-2.0, -2.0, -2.0, -2.0, -2.5]])}


def two_wide(inputs: dict) -> dict:
    """An edge trial of rows of two scores, far apart (the other trials' rows hold three or more): a softmax that
    subtracts each row's maximum only in rows of three or more scores overflows here."""
    return {"scores": np.array([[0.0, 1000.0], [-5.0, 3.0], [800.0, -800.0]])}


two_wide.of_first_trial = True  # (made from nothing: it draws nothing from the check's generator)


def twin_near_limit(inputs: dict) -> dict:
    """An edge trial of rows whose two largest scores are alike and just below exp's limit in float64 (709.4 and
    709.5, the rest far lower): each exponential is a float64 number, a row's sum of them is past the limit (inf), so
    a softmax written out divides by inf and gives 0s, with no NaN to see, where the right weights are halves. A
    softmax that subtracts the maximum only once a NaN (or an inf) shows fails there."""
    return {"scores": np.array([[709.4, 709.4, 3.0, -2.0], [-1.0, 709.5, 0.5, 709.5], [2.0, 1.0, 0.0, -1.0]])}


def huge_rows(inputs: dict) -> dict:
    """An edge trial of float64 scores beyond float32's range (4e38) and beyond int64's (±1e19), each row with one
    clear winner (so a log-sum-exp, whose log of the sum vanishes next to such scores, stays right): a row maximum
    kept in float32 (inf there) or cast to an integer (it wraps) is no longer the row's maximum, and exp()
    overflows, or every exponential underflows: 0 / 0. Its last row is of ordinary size, its maximum 1 500 above
    the rest: a shift by the mean (or the median) breaks there too, which :func:`_shifted_below_max` looks for."""
    return {"scores": np.array([[4e38, 3e38, 0.0, -1e30],
                                [1e19, 1e19 - 4096.0, 5.0, 0.0],
                                [-1e19, -1e19 + 4096.0, -2e19, -3e19],
                                [1500.0, 0.0, 10.0, -5.0]])}  # and an ordinary row a shift by the mean breaks


_CASTS = {"astype", "float32", "float16", "half", "float", "int", "int32", "int64", "int16", "int8", "intc", "intp",
          "longlong", "single", "asarray", "array", "view", "to", "type", "cast"}


def _max_cast(ex, trials, record) -> str | None:
    """Wrong only on rows of scores beyond int64's range (|s| > 9.2e18), where it gives NaN or inf, and right on
    every other row of every trial: each row's maximum cast to float32 (inf beyond 3.4e38) or to an integer (it
    wraps beyond 9.2e18) before the shift. (A shift by the row's mean breaks on those rows too, and on the ordinary
    row of :func:`huge_rows` as well: that is `shifted_by_mean`, told by its sign first.)"""
    calls = set(record.get("calls") or []) if isinstance(record.get("calls"), list) else None
    if calls is not None and not calls & _CASTS:
        return None  # no cast in its code: a shift by something near the maximum (0.999 of it, a percentile)
    seen = False
    for answer, inputs in trials:
        s, got = np.asarray(inputs["scores"], dtype=np.float64), np.asarray(answer["softmax"], dtype=np.float64)
        if got.shape != s.shape or s.ndim != 2:
            return None
        right = np.all(np.isclose(got, ref_softmax(s), rtol=1e-8, atol=1e-14), axis=-1)
        huge = np.abs(s).max(axis=-1) > 2.0 ** 63
        bad = ~np.all(np.isfinite(got), axis=-1)
        if (~right & ~(huge & bad)).any():
            return None
        seen = seen or bool((huge & bad).any())
    if not seen:
        return None
    return ("Your softmax is right everywhere but on rows of scores beyond about 1e19, where it gives NaN: most "
            "likely each row's maximum is cast on the way (to float32, which turns anything above 3.4e38 into inf, "
            "or to an integer type, which wraps beyond 9.2e18), so what you subtract is no longer the row's maximum, "
            "and exp() overflows, or every exponential underflows: 0 / 0. Subtract the maxima as they come, in "
            "float64.")


def _shifted_below_max(answer, inputs) -> bool:
    """Right on every row it gives finite numbers for, NaN or inf on some row whose mean, median or second-largest
    score lies more than 709 below its maximum, and nowhere else: each row shifted by a number of its own below its
    maximum (its mean, its median, its second-largest score), which cancels in the softmax until it overflows. A
    row near -742 stays right, so a softmax with no shift at all (subnormal, wrong digits there) is not this."""
    s, got = np.asarray(inputs["scores"], dtype=np.float64), np.asarray(answer["softmax"], dtype=np.float64)
    if got.shape != s.shape or s.ndim != 2:
        return False
    bad = ~np.all(np.isfinite(got), axis=-1)
    top = s.max(axis=-1)
    second = np.sort(s, axis=-1)[:, -2] if s.shape[-1] > 1 else top
    below = np.maximum.reduce([top - s.mean(axis=-1), top - np.median(s, axis=-1), top - second])
    wide = below > 709.0  # a usual number below the maximum is far enough below it to overflow exp()
    right = np.all(np.isclose(got, ref_softmax(s), rtol=1e-4, atol=1e-6), axis=-1)
    huge = np.abs(s).max(axis=-1) > 2.0 ** 63  # beyond int64: a maximum cast on the way breaks there alone
    return bool((bad & ~huge).any() and not (bad & ~wide).any() and np.all(right | bad))


def _overflow_hidden(answer, inputs) -> bool:
    """A finite answer, right on every row whose exp() stays a normal float64 and wrong on some row where it does
    not (it overflows to inf, or underflows to subnormal numbers or 0): an overflow hidden (scores clipped, inf and
    NaN replaced) rather than avoided."""
    s, got = np.asarray(inputs["scores"], dtype=np.float64), np.asarray(answer["softmax"], dtype=np.float64)
    if got.shape != s.shape or s.ndim != 2 or not np.all(np.isfinite(got)):
        return False
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(s)
    extreme = ~np.all(np.isfinite(e) & (e >= np.finfo(np.float64).tiny), axis=-1)
    wrong = ~np.all(np.isclose(got, ref_softmax(s), rtol=1e-4, atol=1e-6), axis=-1)
    return bool(wrong.any() and not (wrong & ~extreme).any())


SOFTMAX_MISTAKES = {
    "global_softmax": global_softmax,
    "softmax_wrong_axis": lambda scores: softmax(scores, axis=0),
    "unstable_softmax": lambda scores: unstable_softmax(scores, axis=-1),
    "missing_keepdim": _sum_without_keepdim,
    "keepdims_nowhere": _keepdims_nowhere,
    "max_without_keepdim": _max_without_keepdim,
    "max_wrong_axis": _max_of_columns,
    "shifted_by_min": _shifted_by_min,
    "shifted_by_mean": _shifted_by_mean,
    "sum_unshifted": lambda scores: sum_unshifted(scores),
    "global_max_subtraction": _global_max,
    "sum_without_axis": one_sum,
    "sum_wrong_axis": _sums_of_columns,
    "softmax_base_two": lambda scores: softmax(np.asarray(scores, dtype=np.float64) * np.log(2.0)),
    "log_softmax_as_weights": lambda scores: log_softmax(scores),
    "sigmoid_as_softmax": lambda scores: sigmoid(scores),
}

# --- part 5: self-attention on token embeddings ----------------------------------------


def attention_inputs(rng: np.random.Generator | None = None) -> dict:
    """The notebook's embeddings (rng=None) or random ones, with a value width d_v of its own.

    d_v differs from d_k on every draw (and draws that still cannot tell two variants apart are rejected), so
    the keys' and the values' widths cannot stand in for each other; keys and values swapped then
    make a product of mismatched shapes, which the student's function raises on as well (the
    notebook's example, where d_v = d_k, names that mistake).
    """
    if rng is None:
        return embedding_example()
    # four different sizes, none the notebook's d_k = 3: every scaling (√n, √d_model, √d_k, √d_v, √3)
    # then divides by another number on every draw
    n, d_model, d_k, d_v = (int(v) for v in rng.choice([2, 4, 5, 6, 7, 8], size=4, replace=False))
    return {
        "x": rng.standard_normal((n, d_model)),
        "w_query": rng.standard_normal((d_model, d_k)) / np.sqrt(d_model),
        "w_key": rng.standard_normal((d_model, d_k)) / np.sqrt(d_model),
        "w_value": rng.standard_normal((d_model, d_v)) / np.sqrt(d_model),
    }


def _weights_from(x, w_query, w_key, **how):
    return {"attn_weights": self_attention(x, w_query, w_key, w_key, **how)[0]}


def _attention(x, w_query, w_key, w_value, **how):
    return self_attention(x, w_query, w_key, w_value, **how)[1]


def _xw_scores(x, w_query, w_key, **_):
    return projected_scores(x, w_query, w_key)


def _attention_weights_zeroed(answer, inputs) -> bool:
    """A sign of ``small_values_zeroed`` for the whole self-attention: the answer is the output of the weights whose
    entries below a threshold (1e-2 … 1e-12) are set to 0 after the softmax, with or without each row divided by its
    new sum; and it differs from the right one (by more than rounding)."""
    x = np.asarray(inputs["x"], dtype=np.float64)
    if (got := np.asarray(next(iter(answer.values())), dtype=np.float64)).ndim != 2 or x.ndim != 2:
        return False
    weights = softmax(_xw_scores(**inputs))
    values = x @ np.asarray(inputs["w_value"], dtype=np.float64)
    right = weights @ values
    if got.shape != right.shape or np.allclose(got, right, rtol=1e-10, atol=1e-13):
        return False
    for t in 10.0 ** -np.arange(2, 13):
        kept = np.where(weights < t, 0.0, weights)
        with np.errstate(invalid="ignore", divide="ignore"):  # (a row wholly below the threshold: 0 / 0)
            if any(np.allclose(got, w @ values, rtol=1e-9, atol=1e-13)
                   for w in (kept, kept / kept.sum(axis=-1, keepdims=True))):
                return True
    return False


def _sqrt_width(x):
    return float(np.sqrt(x.shape[-1]))


WEIGHTS_MISTAKES = {
    "missing_scale": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, scale="none"),
    "scale_by_d": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, scale="d"),
    "scale_by_d_model": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, scale=_sqrt_width(x)),
    "transposed_scores": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, transpose=True),
    "softmax_wrong_axis": lambda x, w_query, w_key, **_: _weights_from(
        x, w_query, w_key, normalise=lambda s: softmax(s, 0)),
    "global_softmax": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, normalise=global_softmax),
    "scale_after_softmax": lambda x, w_query, w_key, **_: {
        "attn_weights": _weights_from(x, w_query, w_key, scale="none")["attn_weights"] / np.sqrt(w_key.shape[-1])},
    "power_precedence": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, scale=2.0 * w_key.shape[-1]),
    "scale_by_d_v": lambda x, w_query, w_key, w_value, **_: _weights_from(x, w_query, w_key,
                                                                          scale=float(np.sqrt(w_value.shape[-1]))),
    "softmax_base_two": lambda x, w_query, w_key, **_: _weights_from(  # 2 ** s is e ** (s ln 2)
        x, w_query, w_key, scale=np.sqrt(w_key.shape[-1]) / np.log(2.0)),
    "scale_multiplied": lambda x, w_query, w_key, **_: _weights_from(
        x, w_query, w_key, scale=1 / np.sqrt(w_key.shape[-1])),
    # √4 whatever the keys: √n (the 4 tokens, k.shape[0], len(tokens)) or a 2 typed in, which a sentence of 4
    # tokens cannot tell apart
    "fixed_scale": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, scale=2.0),
    # √n, the number of tokens (k.shape[0], len(x)): told apart from √4 where a replay has another number of them
    "fixed_scale:n": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, scale=float(np.sqrt(len(x)))),
    # a softmax written out again in the cell: the row sums or the row maxima without keepdims, or one sum for all
    "missing_keepdim": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, normalise=_sum_no_keepdim),
    "max_without_keepdim": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key,
                                                                        normalise=max_without_keepdim),
    "sum_without_axis": lambda x, w_query, w_key, **_: _weights_from(x, w_query, w_key, normalise=one_sum),
}


def ref_weights(x, w_query, w_key, **_):
    return _weights_from(x, w_query, w_key)


def _weights_made_with(made_with, x, w_query, w_key, w_value, **_):
    w = {"query": w_query, "key": w_key, "value": w_value}
    return _weights_from(x, w[made_with["query"]], w[made_with["key"]])


# the queries or the keys made with another role's matrix (queries and keys swapped are the transposed scores)
WEIGHTS_MIX_UPS = mix_ups(_weights_made_with, {"query": ("the queries", "queries = x @ w_query"),
                                               "key": ("the keys", "keys = x @ w_key")}, swaps=False)


def ref_self_attention(x, w_query, w_key, w_value):
    return _attention(x, w_query, w_key, w_value)


ATTENTION_MISTAKES = {
    "global_softmax": lambda **i: _attention(**i, normalise=global_softmax),
    "missing_scale": lambda **i: _attention(**i, scale="none"),
    "scale_by_d": lambda **i: _attention(**i, scale="d"),
    "scale_by_d_model": lambda **i: _attention(**i, scale=_sqrt_width(i["x"])),
    "scale_by_d_v": lambda **i: _attention(**i, scale=_sqrt_width(i["w_value"])),
    "scale_by_n": lambda **i: _attention(**i, scale=float(np.sqrt(len(i["x"])))),
    "transposed_scores": lambda **i: _attention(**i, transpose=True),
    "softmax_wrong_axis": lambda **i: _attention(**i, normalise=lambda s: softmax(s, axis=0)),
    "swapped_projections": lambda **i: _attention(**i, swap_kv=True),
    "power_precedence": lambda **i: _attention(**i, scale=2.0 * i["w_key"].shape[-1]),
    "scale_multiplied": lambda **i: _attention(**i, scale=1 / np.sqrt(i["w_key"].shape[-1])),
    # √3 whatever the keys: the notebook's global d_k (an int, so not seen as notebook data) or 3 typed in
    "reads_globals": lambda **i: _attention(**i, scale=float(np.sqrt(D_K))),
    "weights_returned": lambda **i: self_attention(**i)[0],  # (n, n) instead of (n, d_v)
    "projection_reused": lambda x, w_query, w_key, **_: _attention(x, w_query, w_key, w_key),  # values from w_key
}

_TRANSPOSED = (
    "Your scores are transposed: row i must belong to query i, so the queries come first, then the "
    "transposed keys (keys @ queries.T, or queries made with w_key and keys with w_query, give this "
    "same wrong answer)."
)
_COLUMNS = ("Each column of your weights sums to 1, not each row: the softmax must run along each row (the last "
            "axis), one row per query.")
_D_MODEL = (
    "You divided by the square root of the embedding width d_model (x.shape[-1], 8 here). The scores are "
    "dot products of a query and a key, so divide by √d_k, the width of one key (3 here)."
)


# The notebook is NumPy only, on float64 arrays: another library's tensors and functions are not the step, and a
# result cast to float32 loses half the digits of its float64 inputs without a word
NOT_NUMPY = ("torch", "tf", "tensorflow", "keras", "jax")
NUMPY_ONLY = dict(framework="numpy", dtype="float64", not_with=NOT_NUMPY)


def low_row(first: dict) -> dict:
    """An edge trial from the first replay: the first row of scores moved down so that its largest is -20, every
    exp of it below 1e-8 (the softmax of the row is unchanged: it ignores a shift). A division that skips or zeroes
    small exponentials (`np.divide(..., where=e > 1e-3)`) shows."""
    s = np.array(first["attn_scores"], dtype=float)
    s[0] -= s[0].max() + 20.0
    return _with_scores(first, s)


def _with_scores(first: dict, s: np.ndarray) -> dict:
    """``first`` with the scores ``s`` and the names made from them before the step made again: a cell may use any
    of them (the original's row sums undo its one total: e / row_sums[:, None] / e.sum() is the fix as well)."""
    original, fixed = global_softmax(s), softmax(s)
    out = {**first, "attn_scores": s, "attention_weights": original, "row_sums": original.sum(axis=1),
           "fixed_weights": fixed}
    if "values" in first:
        out["attention_value"], out["fixed_value"] = original @ first["values"], fixed @ first["values"]
    return {n: v for n, v in out.items() if n in first}


low_row.of_first_trial = True


def deep_row(first: dict) -> dict:
    """An edge trial from the first replay: the first row of scores moved down so that its largest is -300, and
    -300 / √d_k once scaled (below -80 for keys up to 12 wide). Its exponentials are tiny but normal float64
    numbers, and its softmax is unchanged: an epsilon added to the row sums (`+ 1e-12`) outweighs them, and
    `1 + np.expm1(s)` rounds to exactly 0 there (0 / 0)."""
    s = np.array(first["attn_scores"], dtype=float)
    s[0] -= s[0].max() + 300.0
    return _with_scores(first, s)


deep_row.of_first_trial = True


def sunk_row(first: dict) -> dict:
    """An edge trial from the first replay: the first row of scores moved down so that its largest is -800, past
    exp's reach (exp(-800) is 0 in float64) but not once scaled (-800 / √d_k is above -600 for keys 2 wide or more):
    exponentials taken before the scaling (`np.exp(s) ** (1 / np.sqrt(d_k))`) are all 0 there, and 0 / 0."""
    s = np.array(first["attn_scores"], dtype=float)
    s[0] -= s[0].max() + 800.0
    return _with_scores(first, s)


sunk_row.of_first_trial = True


def wide_keys(first: dict) -> dict:
    """An edge trial from the first replay: the keys 12 wide (zeros added on the right, so every score stays as it
    is), where √d_k is 3.46: a square root cut to a whole number (`math.isqrt`, `int(...)`), 3, shows, as does a
    fixed 2."""
    keys = np.asarray(first["keys"], dtype=float)
    width = 12 if keys.shape[-1] < 12 else 2 * keys.shape[-1] + 1
    out = {**first}
    for name in ("keys", "queries"):  # both padded alike: queries @ keys.T is still the scores
        if name in first:
            a = np.asarray(first[name], dtype=float)
            out[name] = np.concatenate([a, np.zeros((*a.shape[:-1], width - a.shape[-1]))], axis=-1)
    return out


wide_keys.of_first_trial = True


def spread_row(first: dict) -> dict:
    """An edge trial from the first replay: the first row of scores spread so that, once scaled by √d_k (if the step
    reads the keys), its weights run from about 1 down to 2e-9 (the others spaced evenly between, in the exponent:
    1.3e-3 and 1.7e-6 for 4 tokens). Weights set to 0 below a threshold (`w[w < 1e-4] = 0`) show; the random replays'
    few tokens rarely give a weight below 1e-3."""
    s = np.array(first["attn_scores"], dtype=float)
    scale = float(np.sqrt(np.shape(first["keys"])[-1])) if "keys" in first else 1.0
    s[0] = s[0].max() - np.linspace(0.0, 20.0, s.shape[1]) * scale
    return _with_scores(first, s)


spread_row.of_first_trial = True



def far_row(first: dict) -> dict:
    """An edge trial from the first replay: in the second row of scores, every score but the largest moved 4 000
    below it, so that their exponentials are exactly 0 (even divided by √d_k), the largest's a normal number. The
    weights of that row are one 1 and zeros. A division told to skip zero exponentials (`np.divide(..., where=e > 0)`
    without `out=`) leaves those entries as whatever the memory held."""
    s = np.array(first["attn_scores"], dtype=float)
    top = int(np.argmax(s[1]))
    s[1] = np.where(np.arange(s.shape[1]) == top, s[1], s[1, top] - 4000.0)
    return _with_scores(first, s)


far_row.of_first_trial = True


def large_weights_scores(first: dict) -> dict:
    """An edge replay from the first one with the query weights scaled so that the largest scaled score is 800
    (see :func:`spec.large_scores`, which also adds a token), the names made from them (q, k) made again: a
    softmax without each row's maximum, the step's own or one written in the cell, overflows there."""
    out = large_scores(x="x")(first)
    xs = np.asarray(out["x"], dtype=np.float64)
    out["q"], out["k"] = xs @ np.asarray(out["w_query"], dtype=np.float64), xs @ np.asarray(out["w_key"], dtype=float)
    return {n: v for n, v in out.items() if n in first}


large_weights_scores.of_first_trial = True


def repeated_token(first: dict) -> dict:
    """An edge replay from the first one with its second token the same as its first (a sentence may repeat a word),
    q and k made again: tokens deduplicated on the way (`np.unique` of the rows) show."""
    x = np.array(first["x"], dtype=np.float64)
    x[1] = x[0]
    out = {**first, "x": x}
    out["q"], out["k"] = x @ np.asarray(first["w_query"], dtype=float), x @ np.asarray(first["w_key"], dtype=float)
    return {n: v for n, v in out.items() if n in first}


repeated_token.of_first_trial = True


def tied_keys(first: dict) -> dict:
    """An edge replay from the first one with its second key the same as its first (two tokens alike as keys), the
    scores and the weights made again from them: every row then holds two equal scores, and two equal weights. A
    sum or a softmax over each row's distinct values (`np.unique`) counts the tie once."""
    queries, keys = np.asarray(first["queries"], dtype=np.float64), np.array(first["keys"], dtype=np.float64)
    if len(keys) < 2:
        return first
    keys[1] = keys[0]
    scores = queries @ keys.T
    original, values = global_softmax(scores), np.asarray(first["values"], dtype=np.float64)
    made = {"keys": keys, "attn_scores": scores, "attention_weights": original, "attention_value": original @ values,
            "row_sums": original.sum(axis=1), "fixed_weights": softmax(scores), "fixed_value": softmax(scores) @ values,
            "scaled_weights": softmax(scores / np.sqrt(keys.shape[-1]))}
    return {n: made.get(n, v) for n, v in first.items()}


tied_keys.of_first_trial = True


def _value(ex_id, title, answers, reference, world_fn=world, **kw):
    return Exercise(ex_id, notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                    inputs=upstream_of(world_fn, answers[0]), **NUMPY_ONLY, **kw)


register(
    _value("05.row_sums", "Row sums of the original's weights", ("row_sums",),
           lambda attention_weights, **_: {"row_sums": attention_weights.sum(axis=1)}, reads=("attention_weights",),
           world_fn=world_any_n,  # other numbers of tokens: a slice typed in for the 4 (`[:, :4]`) shows
           # and one token: a `.squeeze()` of (1, 1) sums shows; tied weights: a sum of the distinct ones shows
           edge=(one_token, tied_keys),
           mistakes={"sum_wrong_axis": lambda attention_weights, **_: {"row_sums": attention_weights.sum(axis=0)},
                     "sum_without_axis": lambda attention_weights, **_: {"row_sums": attention_weights.sum()}},
           hints={"sum_wrong_axis": "You summed each column (axis=0). One token's weights are one row: "
                  "sum along each row.",
                  "sum_without_axis": "You added up the whole matrix into one number (a sum without an axis): "
                  "that total is 1 for the original's weights, whatever the scores. Sum each row on its own, "
                  "one sum per token."}),
    _value("05.fixed_weights", "The bug fixed: a softmax for each row of the raw scores", ("fixed_weights",),
           lambda attn_scores, **_: {"fixed_weights": softmax(attn_scores)}, reads=("attn_scores",),
           world_fn=world_any_n,  # other numbers of tokens: a 4 typed in (`np.ones((4, 1))`, `range(4)`) shows
           # a row of scores all far below 0: small exponentials skipped show; a row with exponentials of exactly 0:
           # a division that skips them without out= shows
           edge=(low_row, far_row, deep_row, tied_keys,  # and tied scores (`np.unique` shows)
                 spread_row),  # and weights down to 2e-9: small ones set to 0 show
           mistakes=FIXED_WEIGHTS_MISTAKES,
           hints={
               "global_softmax": "That is the original's bug again (your weights equal attention_weights): "
               "one sum over the whole matrix. Divide each row by the sum of its own exponentials.",
               "missing_keepdim": "Your row sums are lined up with the columns: a (4,) vector (a sum without "
               "keepdims), or a (1, 4) row (a column of sums turned by .T), so entry (i, j) was divided by the sum "
               "of row j. Keep them as a (4, 1) column (keepdims=True, or [:, None]).",
               "softmax_wrong_axis": "Each column of your weights sums to 1, not each row: you summed over "
               "axis=0. One token's weights are one row, so sum along each row (axis=1).",
               "transposed_scores": "You applied the softmax to the transposed scores. Row i of attn_scores "
               "belongs to token i: use attn_scores itself.",
               "no_softmax": "These are the raw scores. Exponentiate them, then divide each row by its own sum.",
               "sum_normalisation": "You divided the scores by their row sums without exponentiating first, "
               "so some weights are negative. Exponentiate, then divide by each row's sum of exponentials.",
               "unexpected_scale": "You divided the scores by √d_k. This step fixes the bug alone: the softmax "
               "of each row of the raw attn_scores. The scaling is the next step.",
               "sum_without_axis": "Your row maxima are right, but you divided by one sum over the whole matrix (a "
               "sum without an axis): that is the original's bug again. Divide each row by the sum of its own "
               "exponentials: sum(axis=1, keepdims=True).",
           }),
    _value("05.fixed_value", "The fixed attention value", ("fixed_value",),
           lambda fixed_weights, values, **_: {"fixed_value": fixed_weights @ values},
           reads=("fixed_weights", "values"), mistakes=FIXED_VALUE_MISTAKES, world_fn=world_any_n,  # (`[:, :4]`)
           # the original's value divided by its row totals gives the same numbers (the next cell prints the
           # identity), but it never applies the fix: the step is the value of the fixed weights
           computed_with=("fixed_weights",),
           hints={
               "not_computed_with": "Your numbers are right, but your cell never uses `fixed_weights`: it rescales "
               "the original's outputs, which gives the same numbers (the next cell shows why). The step asks for "
               "the value of the fixed weights themselves: mix the rows of `values` with `fixed_weights`.",
               "global_softmax": "That is the original's attention_value: it comes from the original's "
               "weights. Use your `fixed_weights`, whose rows sum to 1.",
               "elementwise_product": "You multiplied element by element (`*`). Each output is a weighted sum "
               "of the value rows: a matrix product, `@`.",
               "transposed_scores": "You used the transposed weights. Row i of fixed_weights belongs to "
               "token i and weights the rows of `values`: the weights come first in the product.",
               "missing_keepdim": "You divided the original's attention_value by the row sums as they are, a (4,) "
               "vector, which NumPy lines up with the columns: entry (i, j) was divided by the sum of row j. The "
               "step asks for the value of `fixed_weights`: fixed_weights @ values.",
           }),
    _value("05.scaled_weights", "The scaling by √d_k, as its own step", ("scaled_weights",), ref_scaled,
           reads=("attn_scores", "keys"), mistakes=SCALED_WEIGHTS_MISTAKES, world_fn=world_any_n,
           # exponentials of exactly 0: a division that skips them without out= shows; keys 12 wide: a square
           # root cut to a whole number shows; a row far below 0: an epsilon in the sums shows
           edge=(far_row, wide_keys, deep_row, spread_row,  # and weights down to 2e-9: small ones set to 0 show
                 sunk_row),  # and a row at -800: exponentials taken before the scaling show
           hints={
               "missing_scale": "These are the weights of the raw scores (your fixed_weights again). Divide "
               "attn_scores by √d_k before the softmax.",
               "scale_by_d": "You divided by d_k = 4 itself. The scaling divides by its square root, √d_k = 2.",
               "global_softmax": "The scaling is right, but one sum over the whole matrix is the original's "
               "bug: divide each row by its own sum, as in fixed_weights.",
               "softmax_wrong_axis": "Each column of your weights sums to 1, not each row: sum along each row.",
               "missing_keepdim": "Your row sums lost their axis: an (n,) vector, which NumPy lines up with the "
               "columns. Keep them as an (n, 1) column, as in fixed_weights.",
               "fixed_scale": "Your weights are those of the scores divided by 2, whatever the keys: √len(tokens), "
               "√4 or the 2 of the text typed in (or the square root of fixed_weights, renormalised: √(e^s) is "
               "e^(s/2)). Here the number of tokens and d_k are both 4, but the scaling is about the width of one "
               "key: divide the scores by √d_k, with d_k = keys.shape[-1] (the cell sets it for you).",
               "scale_by_n": "You divided by the square root of the number of tokens (the rows of the keys, "
               "len(keys)). Here it is 4, like d_k, but the scaling is about the width of one key: divide by "
               "√d_k, with d_k = keys.shape[-1] (the cell sets it for you).",
               "scale_by_d_v": "You divided by the square root of the values' width (values.shape[1]). Here it is "
               "4, like d_k, but the scores are dot products of queries and keys: divide by √d_k, with d_k = "
               "keys.shape[-1] (the cell sets it for you).",
           }),
    Exercise(
        "05.softmax",
        notebook=NOTEBOOK,
        title="softmax(scores): row-wise and stable",
        answers=("softmax",),
        kind="function",
        **NUMPY_ONLY,
        inputs=softmax_inputs,
        reference=ref_softmax,
        mistakes=SOFTMAX_MISTAKES,
        signs={"unstable_softmax:hidden": _overflow_hidden, "shifted_by_mean": _shifted_below_max,
               "unstable_softmax:sum": sum_overflow_sign(ref_softmax, lambda scores, **_: scores, "float64")},
        explains={"wrong_dtype": _max_cast},
        # float64 all the way, and a softmax keeps every weight to about 15 digits, however small: a constant added
        # to every exponential "so that nothing is 0" (1e-10) moves the small weights by far more than that
        rtol=1e-8, atol=1e-14,
        # one row of scores: the answer is (1, n), not squeezed; rows whose top score is far above the rest, and
        # rows whose bottom one is far below (shifted by a number well below or above the maximum, exp() overflows
        # or underflows on every row)
        # and flat rows of ordinary scores: a shift above the maximum overflows the sum there
        # (flat rows last: a cache keyed by the array's identity shows on the last trial doubled, which a one-hot
        # row of far_above's would not tell)
        # and scores past float32's and int64's ranges: a maximum cast to either shows
        edge=(one_row("scores"), far_above, far_below, all_very_negative, far_above_last, far_above_last_wide,
              past_half_rows, huge_rows, level_rows,
              # and one trial's rows in reverse: a result kept by the scores' shape and sum shows
              quarter_scores, rows_reversed_scores, one_row_of_all,  # (and its bytes as one row: kept by bytes)
              twin_near_limit,  # and two scores of a row just below exp's limit: their sum past it
              two_wide),  # and rows of two scores only
        points=2,
        hints={
            "unstable_softmax:sum": sum_overflow_hint("float64"),
            "softmax_wrong_axis": "Your softmax normalised each column. Each row must sum to 1: take the "
            "maximum and the sum along the last axis, keeping that axis.",
            "unstable_softmax": "Your softmax does not subtract each row's maximum, and it shows: the "
            "check's random scores contain a row near -742, where exp() keeps only a few correct digits, and "
            "a row with scores near 800, where exp() overflows to inf. Subtract each row's own maximum before "
            "np.exp.",
            "unstable_softmax:hidden": "Your softmax is right on the rows of ordinary scores but wrong on the rows "
            "with extreme ones (the check's random scores have a row near -742 and rows with scores 800 or more "
            "above the rest). There, np.exp of anything but each score minus its own row's maximum overflows to inf "
            "or keeps only a few digits, and whatever is done about it afterwards (a clip of the scores, "
            "np.nan_to_num, a division told to skip some entries with where=) changes the weights. Subtract each "
            "row's own maximum before np.exp, so that the largest exponential is exp(0) = 1, and divide every "
            "entry by its row's sum.",
            "missing_keepdim": "Your row maxima are right, but your row sums lost their axis: an (n,) vector, "
            "which NumPy lines up with the columns, so entry (i, j) was divided by the sum of row j. Keep the "
            "axis: keepdims=True (or [:, None]), as for the maxima.",
            "sum_wrong_axis": "Your row maxima are right, but your sums run down each column (axis=0), so it is "
            "the columns that sum to 1, not the rows. Sum each row, along the last axis, keeping it: "
            "keepdims=True, as for the maxima.",
        },
    ),
    _value("05.weights", "Attention weights of 'how are you doing'", ("attn_weights",), ref_weights,
           reads=("x", "w_query", "w_key"), mistakes={**WEIGHTS_MISTAKES, **WEIGHTS_MIX_UPS[0]},
           computed_with=("softmax",),  # "with your softmax": an inline, unshifted one gives the same numbers here
           # scaled scores of 800: an unshifted softmax (the step's or the cell's) shows; a token said twice: rows
           # deduplicated show
           edge=(large_weights_scores, repeated_token),
           hints={"not_computed_with": "Your cell never calls your `softmax`: the step asks for the weights "
                  "with it. A softmax written again inline (often without subtracting the row maximum) gives "
                  "the same numbers on these small scores and overflows on large ones.",
                  "transposed_scores": _TRANSPOSED, "scale_by_d_model": _D_MODEL, "softmax_wrong_axis": _COLUMNS,
                  **WEIGHTS_MIX_UPS[1],
                  "missing_scale": "Your scores were not divided by √d_k. Divide them by √d_k, the square root "
                  "of the width of a key (3 here), before the softmax.",
                  "scale_by_d": "You divided by d_k itself. The scaling divides by its square root, √d_k.",
                  "scale_by_d_v": "You divided by the square root of the values' width (w_value.shape[1]). Here it "
                  "is 3, like d_k, but the scores are dot products of queries and keys: divide by √d_k, with d_k = "
                  "k.shape[-1].",
                  "fixed_scale": "You divided by 2 whatever the keys: √4, the square root of the number of tokens "
                  "(k.shape[0], len(tokens)), or a 2 typed in. The scaling is about the width of one key: divide by "
                  "√d_k, with d_k = k.shape[-1] (3 here).",
                  "fixed_scale:n": "You divided by √n, the square root of the number of tokens (k.shape[0], "
                  "len(tokens): 4 here). The scaling is about the width of one key: divide by √d_k, with d_k = "
                  "k.shape[-1] (3 here), the last axis of the keys.",
                  "missing_keepdim": "Your row sums lost their axis: a (4,) vector, which NumPy lines up with the "
                  "columns, so entry (i, j) was divided by the sum of row j. Keep the axis (keepdims=True), or "
                  "rather call your `softmax` of Part 4, as the step asks."}),
    Exercise(
        "05.self_attention",
        notebook=NOTEBOOK,
        title="self_attention(x, w_query, w_key, w_value)",
        answers=("self_attention",),
        kind="function",
        **NUMPY_ONLY,
        inputs=attention_inputs,
        reference=ref_self_attention,
        mistakes=ATTENTION_MISTAKES,
        # one token; the same shapes, other numbers; scores of 800 (Part 4's lesson: a softmax without each row's
        # maximum overflows)
        # and scores up to 30: weights from 1 down to about 1e-13, which a threshold on the small ones cuts
        # and every row far below 0: a maximum clamped at 0 (0 / 0) shows
        edge=(one_row("x", "w_value"), rows_reversed("x"), large_scores(x="x"), large_scores(x="x", top=30.0),
              zero_row("x"), far_below_x(), more_rows("x", 100), loud_token(n=600), repeated_row("x"),
              # and a row's two largest scores alike just below exp's limit (their sum past it: a softmax written out
              # gives 0s there, no NaN); and a row from −1 600 to 1 600 (a shift by its middle overflows)
              large_scores(x="x", top=709.4, second=1.0), large_scores(x="x", top=1600.0, second=-1.0),
              # and a row of weights 1, 0.1, … 1e-13 (whatever the draw): a threshold on the small ones shows
              decades_x()),
        # and a token of zeros (masked as padding, it shows); and 100 tokens: a local window, or tiles of 64 keys not
        # rescaled, show; and 600 tokens, the last one loud: tiles of 512 keys not rescaled show whatever the draw
        signs={"unstable_softmax": overflow_sign(ref_self_attention, _xw_scores, 709.0),  # float64
               "unstable_softmax:sum": sum_overflow_sign(ref_self_attention, _xw_scores, "float64"),
               "small_values_zeroed": _attention_weights_zeroed},
        # float64 all the way: the outputs are right to far more than 1e-6, so weights below 1e-6 set to 0 inside,
        # or a constant added to every exponential, show on every draw
        rtol=1e-8, atol=1e-12,
        widths=("w_key", "w_value"),  # "any widths": values wider than the keys in some trial, narrower in another
        points=2,
        depends_on=("05.softmax",),
        hints={
            "unstable_softmax:sum": sum_overflow_hint("float64"),
            "small_values_zeroed": "Your function sets the small attention weights to 0 (below a threshold, after "
            "the softmax): a query's faint weight on a key no longer counts, and on a row of weights from 1 down to "
            "1e-13 the outputs move by far more than double precision allows. Keep every weight the softmax gives: "
            "a small weight is still a weight.",
            "unstable_softmax": "On some rows your function returns NaN, the very bug Part 4 fixed: np.exp of a "
            "score more than 709 above what you subtracted overflows to inf (inf / inf is NaN), and if what you "
            "subtract lies far above a row's scores (0, or a maximum clamped at 0, on a row far below 0), every "
            "exponential of that row underflows to 0 (0 / 0 is NaN). Call your `softmax` of Part 4 "
            "(it subtracts each row's own maximum) instead of writing the formula out again.",
            "transposed_scores": _TRANSPOSED,
            "softmax_wrong_axis": _COLUMNS,
            "swapped_projections": "Your keys and values use each other's weights. The keys come from w_key, "
            "the values from w_value.",
            "scale_by_d_model": "You divided by the square root of the embedding width d_model (x.shape[-1]). "
            "The scores are dot products of a query and a key, so divide by √d_k, the width of one key.",
            "scale_by_d": "You divided by d_k itself. The scaling divides by its square root, √d_k.",
            "missing_scale": "Your scores were not divided by √d_k. Divide them by the square root of the width "
            "of the keys (k.shape[-1]) before the softmax.",
            "scale_by_d_v": "You divided by the square root of the values' width d_v (v.shape[-1]). The scores "
            "are dot products of queries and keys, so divide by √d_k, the width of a key (k.shape[-1]): in "
            "the notebook both are 3, in general they differ.",
            "scale_by_n": "You divided by the square root of the number of tokens (len(x)). The scaling is "
            "about the width of a key: divide by √d_k, k.shape[-1].",
            "projection_reused": "Your values are made with w_key: the outputs mix the keys. The values come from "
            "w_value (x @ w_value), whose width d_v may differ from d_k.",
            "reads_globals": "Your function divides by √3 whatever its inputs: that is the notebook's d_k (the "
            "global variable, or the number typed in). Take d_k from the keys the function computes: "
            "k.shape[-1].",
        },
    ),
)
