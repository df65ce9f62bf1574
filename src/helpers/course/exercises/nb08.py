"""Notebook 08 — order and position (beyond the seeds), in PyTorch.

Part 1: self-attention is permutation-equivariant (a value step, replayed on worlds whose
permutations are not their own inverse). Part 2: the sinusoidal encoding of "Attention Is All You
Need" and attention on x + pe (function steps). Part 3: a table of learned position vectors
(function step). Part 4: rotary embeddings (RoPE): the rotation (function step), attention with
rotated queries and keys, and the grid of scores of one query and one key put at every pair of
positions, which depends on the offset only (value steps).

The notebook's numbers are made with NumPy's seeded generators exactly as here, so
``rng=None`` gives what the student sees. Projections are square (d_k = d_model), so a student
who adds the encoding after the projection gets a result, and the check can name it.
"""

from __future__ import annotations

import numpy as np

from ..reference import softmax
from ..scales import other_scale, scale_explains
from ..spec import Exercise, register, upstream_of, zero_row

NOTEBOOK = "08_order_and_position"

VOCAB = ["the", "dog", "bites", "man"]
SENTENCE = ["the", "dog", "bites", "the", "man"]
PERM = np.array([0, 4, 2, 3, 1])  # "the dog bites the man" -> "the man bites the dog"
D_MODEL = 8
MAX_LEN = 16
GRID = 8  # positions 0..7 for the grid of scores
BASE = 10000.0


# --- the notebook's numbers ----------------------------------------------------------------


def notebook_data() -> dict:
    """Same generator calls as the notebook's first cells."""
    rng = np.random.default_rng(8)
    embedding = rng.normal(size=(len(VOCAB), D_MODEL)).round(1)
    w_query, w_key, w_value = (rng.normal(size=(3, D_MODEL, D_MODEL)) / np.sqrt(D_MODEL)).round(2)
    x = embedding[[VOCAB.index(w) for w in SENTENCE]]
    table = np.random.default_rng(11).normal(0.0, 0.5, size=(MAX_LEN, D_MODEL)).round(2)
    return {"embedding": embedding, "x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value,
            "perm": PERM.copy(), "table": table}


# --- building blocks (NumPy, float64) ----------------------------------------------------


def attend(q, k, v, scale=True):
    s = q @ np.swapaxes(k, -1, -2)
    if scale:
        s = s / np.sqrt(k.shape[-1])
    return softmax(s) @ v


def self_attention(x, w_query, w_key, w_value, scale=True):
    return attend(x @ w_query, x @ w_key, x @ w_value, scale=scale)


def _exponents(d_model: int, how: str = "pair") -> np.ndarray:
    """The exponent e of 10000^e that divides the position, one per column."""
    j = np.arange(d_model)
    pair = 2 * (j // 2)  # 2i, the even column of the pair
    return {
        "pair": pair / d_model,
        "pair_negated": -pair / d_model,  # 10000^(2i/d) multiplying (or exp(+2i·ln 10000/d))
        "pair_doubled": 2 * pair / d_model,
        "without_2": (j // 2) / d_model,
        "column_doubled": 2 * j / d_model,
        "column": j / d_model,
        "same": 0 * j,
    }[how].astype(np.float64)


def sinusoid(n, d_model, exponent="pair", start=0, layout="interleaved", base=BASE, width=None):
    """(n, d_model): sin in the even columns, cos in the odd ones, with switches for the mistakes (``width``: the d
    of the exponent 2i/d, when it is another number than d_model)."""
    n, d_model = int(n), int(d_model)
    e = _exponents(d_model, exponent) * (1.0 if width is None else d_model / width)
    angles = np.arange(start, start + n, dtype=np.float64)[:, None] / base ** e
    out = np.empty((n, d_model))
    if layout == "halves":  # all sines, then all cosines, of the pairs' angles
        a = angles[:, 0::2]
        return np.concatenate([np.sin(a), np.cos(a)], axis=1)
    even, odd = (np.cos, np.sin) if layout == "swapped" else (np.sin, np.cos)
    out[:, 0::2] = even(angles[:, 0::2])
    out[:, 1::2] = odd(angles[:, 1::2])
    return out


def pair_frequencies(d, exponent="pair", base=BASE, width=None):
    """θ_i, one per pair of features: 1 / 10000^(2i/d) (and the mistaken exponents and bases; ``width``: the d
    of the exponent, when it is another number than the features')."""
    e = _exponents(d, exponent)[0::2]
    return 1.0 / base ** (e if width is None else e * d / width)


def rope(x, positions, pairing="adjacent", sign=1.0, exponent="pair", put_back="interleaved", trig="cos_sin",
         base=BASE, width=None):
    """Turn every pair of features of row j by positions[j]·θ_i (with switches for the mistakes)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    angles = np.asarray(positions, dtype=np.float64)[:, None] * pair_frequencies(d, exponent, base, width)[None, :]
    cos, sin = np.cos(angles), np.sin(angles)
    if trig == "sin_cos":  # cos and sin the other way round in the rotation
        cos, sin = sin, cos
    if pairing == "halves":
        u, w = x[..., : d // 2], x[..., d // 2:]
    else:
        u, w = x[..., 0::2], x[..., 1::2]
    ru = u * cos - sign * w * sin
    rw = sign * u * sin + w * cos
    if pairing == "halves" or put_back == "halves":
        return np.concatenate([ru, rw], axis=-1)
    return np.stack([ru, rw], axis=-1).reshape(x.shape)


def rope_angles_tiled(x, positions):
    """RoPE with neighbouring pairs whose per-feature angles are tiled (θ_0 … θ_(d/2−1), θ_0 … again: `.repeat(1, 2)`)
    instead of repeated pair by pair (θ_0, θ_0, θ_1, θ_1, …): feature j turns by θ_(j mod d/2), not θ_(j // 2)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    angles = np.asarray(positions, dtype=np.float64)[:, None] * pair_frequencies(d, "pair", BASE, None)[None, :]
    per_feature = np.concatenate([angles, angles], axis=-1)[:, :d]
    partner = np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)  # (−w, u) of each pair, in place
    return x * np.cos(per_feature) + partner * np.sin(per_feature)


def _grid(q_vec, k_vec, grid_positions, rotate_keys=True):
    m = len(grid_positions)
    qs = rope(np.tile(q_vec, (m, 1)), grid_positions)
    ks = np.tile(k_vec, (m, 1))
    if rotate_keys:
        ks = rope(ks, grid_positions)
    return qs @ ks.T


# --- the notebook's world of names (value steps) ---------------------------------------------


def world(rng: np.random.Generator | None = None) -> dict:
    """Every array the value steps can read, in the notebook's order (``rng=None``: its own numbers).

    Fresh worlds draw new word vectors for the same sentence (so "the" still comes twice), and a
    permutation that is in general not its own inverse: the notebook's swap of "dog" and "man" is,
    which hides the direction of the reordering.
    """
    if rng is None:
        data = notebook_data()
        embedding, x, wq, wk, wv, perm = (data[k] for k in ("embedding", "x", "w_query", "w_key", "w_value", "perm"))
        table = data["table"]
    else:
        embedding = rng.normal(size=(len(VOCAB), D_MODEL)).round(2)
        x = embedding[[VOCAB.index(w) for w in SENTENCE]]
        wq, wk, wv = rng.normal(size=(3, D_MODEL, D_MODEL)) / np.sqrt(D_MODEL)
        perm = rng.permutation(len(SENTENCE))
        table = rng.normal(0.0, 0.5, size=(MAX_LEN, D_MODEL))
    n = x.shape[0]
    outputs = self_attention(x, wq, wk, wv)
    x_shuffled = x[perm]
    pe = sinusoid(n, D_MODEL)
    positions = np.arange(n)
    queries, keys, values = x @ wq, x @ wk, x @ wv
    q_rot, k_rot = rope(queries, positions), rope(keys, positions)
    q_vec, k_vec = queries[1], keys[4]  # "dog" asks, "man" answers
    grid_positions = np.arange(GRID)
    return {
        "embedding": embedding, "x": x, "w_query": wq, "w_key": wk, "w_value": wv,
        "n": n, "d_model": D_MODEL,
        "outputs": outputs,
        "perm": perm,
        "x_shuffled": x_shuffled, "outputs_shuffled": self_attention(x_shuffled, wq, wk, wv),
        "pe": pe,
        "outputs_pos": self_attention(x + pe, wq, wk, wv),
        "table": table,
        "positions": positions,
        "queries": queries, "keys": keys, "values": values,
        "q_rot": q_rot, "k_rot": k_rot, "outputs_rope": attend(q_rot, k_rot, values),
        "q_vec": q_vec, "k_vec": k_vec, "grid_positions": grid_positions,
        "score_grid": _grid(q_vec, k_vec, grid_positions),
    }


# --- part 1: the same vectors, reordered --------------------------------------------------------


def _index(perm) -> np.ndarray:
    return np.asarray(perm).astype(np.int64)  # the student's tensor may arrive as floats


def ref_shuffled(x, w_query, w_key, w_value, perm, **_):
    xs = x[_index(perm)]
    return {"x_shuffled": xs, "outputs_shuffled": self_attention(xs, w_query, w_key, w_value)}


def _inverse_shuffled(x, w_query, w_key, w_value, perm, **_):
    xs = x[np.argsort(_index(perm))]
    return {"x_shuffled": xs, "outputs_shuffled": self_attention(xs, w_query, w_key, w_value)}


def _copied_shuffled(x, outputs, perm, **_):
    perm = _index(perm)
    return {"x_shuffled": x[perm], "outputs_shuffled": outputs[perm]}


def _unused_shuffled(x, w_query, w_key, w_value, perm, **_):
    return {"x_shuffled": x[_index(perm)], "outputs_shuffled": self_attention(x, w_query, w_key, w_value)}


def _twice_shuffled(x, w_query, w_key, w_value, perm, **_):
    perm = _index(perm)
    xs = x[perm][perm]
    return {"x_shuffled": xs, "outputs_shuffled": self_attention(xs, w_query, w_key, w_value)}


def _outputs_reordered_again(x, w_query, w_key, w_value, perm, **_):
    perm = _index(perm)
    return {"x_shuffled": x[perm], "outputs_shuffled": self_attention(x[perm], w_query, w_key, w_value)[perm]}


def _shuffled_with(which: tuple[str, str, str]):
    """The reordered sentence run through self_attention with its three weights handed over as ``which`` names them
    (the query's and key's swapped: the transposed scores; the key's as the values')."""
    def variant(x, perm, **weights):
        xs = x[_index(perm)]
        return {"x_shuffled": xs, "outputs_shuffled": self_attention(xs, *(weights[w] for w in which))}
    return variant


SHUFFLED_MISTAKES = {"permutation_inverted": _inverse_shuffled, "copied_answer": _copied_shuffled,
                     "permutation_not_applied": _unused_shuffled, "permutation_applied_twice": _twice_shuffled,
                     "outputs_reordered_again": _outputs_reordered_again,
                     "transposed_scores": _shuffled_with(("w_key", "w_query", "w_value")),
                     "projection_reused": _shuffled_with(("w_query", "w_key", "w_key"))}
SHUFFLED_HINTS = {
    "transposed_scores": "Your call hands self_attention w_key where it takes w_query and w_query where it takes "
    "w_key: every score becomes key · query, the transposed scores. Keep the order of the arguments: x_shuffled, "
    "w_query, w_key, w_value.",
    "projection_reused": "Your call hands self_attention w_key as the value weights: the outputs then mix the keys. "
    "Keep the order of the arguments: x_shuffled, w_query, w_key, w_value.",
    "not_as_asked": "Your cell runs self_attention on x, in the original order, and reorders its outputs "
    "afterwards (`self_attention(x, …)[perm]`). The numbers are the same, which is just what this step is to "
    "show, but only if attention itself runs on the reordered inputs: give self_attention x_shuffled.",
    "copied_answer": "Your outputs_shuffled is outputs[perm], the earlier result reordered. That is what the "
    "cell compares with afterwards; the point is to compute it: run self_attention on the reordered inputs.",
}


# --- part 2: the sinusoidal encoding ----------------------------------------------------------


def sinusoidal_inputs(rng=None) -> dict:
    if rng is None:
        return {"n": len(SENTENCE), "d_model": D_MODEL}
    return {"n": int(rng.integers(3, 13)), "d_model": int(rng.choice([4, 6, 8, 10, 12, 16]))}


def one_position(first: dict) -> dict:
    """An edge trial from the first random one: a table of one position (n = 1): a table squeezed (`.squeeze()`
    drops every axis of length 1) loses its position axis."""
    return {**first, "n": 1}


one_position.of_first_trial = True


def wider_table(first: dict) -> dict:
    """An edge trial from the first random one: its number of positions again, with a table 4 wider: a function
    that keeps its tables by the number of positions alone (a cache keyed by n) returns the first, narrower one."""
    return {**first, "d_model": int(first["d_model"]) + 4}


wider_table.of_first_trial = True


def paper_width(inputs: dict) -> dict:
    """An edge trial as wide as the paper's model (512): a divisor 10000^(2i/d) computed as (10000^(2i))^(1/d),
    whose inner power overflows to inf once 2i > 77, gives angles of 0 to the pairs past the 39th (the other trials
    are at most 36 wide)."""
    return {"n": 20, "d_model": 512}


def odd_step_width(inputs: dict) -> dict:
    """An edge trial 98 wide: exponents 2i/d from a float step (`arange(0, 1, 2 / d_model)`) give one too many
    there (the rounding of 2/98 leaves 1 − 2/98·49 just above 0)."""
    return {"n": 6, "d_model": 98}


def long_table(inputs: dict) -> dict:
    """An edge trial as wide as the table the notebook draws (32) and far longer (300 positions, a short context of
    a real model's): a function that changes its answer beyond the small sizes of the other trials (a table capped
    at 50 rows, positions kept in int8 or uint8, which wrap at 128 and 256) shows."""
    return {"n": 300, "d_model": 32}


def longest_table(inputs: dict) -> dict:
    """An edge trial of 6 000 positions, 2 wide (one frequency, 1: every angle a whole number, exact in float32): a
    table made once for a fixed length (the 5 000 positions of a well-known tutorial) and sliced shows."""
    return {"n": 6000, "d_model": 2}


def ref_sinusoid(n, d_model):
    return sinusoid(n, d_model)


SINUSOID_MISTAKES = {
    "pe_halves": lambda n, d_model: sinusoid(n, d_model, layout="halves"),
    "pe_sin_cos_swapped": lambda n, d_model: sinusoid(n, d_model, layout="swapped"),
    "pe_exponent_without_2": lambda n, d_model: sinusoid(n, d_model, exponent="without_2"),
    "pe_exponent_doubled": lambda n, d_model: sinusoid(n, d_model, exponent="pair_doubled"),
    "pe_exponent_column_doubled": lambda n, d_model: sinusoid(n, d_model, exponent="column_doubled"),
    "pe_cos_own_frequency": lambda n, d_model: sinusoid(n, d_model, exponent="column"),
    "pe_same_frequency": lambda n, d_model: sinusoid(n, d_model, exponent="same"),
    "positions_from_one": lambda n, d_model: sinusoid(n, d_model, start=1),
    "pe_base_1000": lambda n, d_model: sinusoid(n, d_model, base=1000.0),
    "pe_exponent_from_n": lambda n, d_model: sinusoid(n, d_model, width=n),
}


def _exponent_sign(answer, inputs) -> bool:
    """The frequencies 10000^(+2i/d) (multiplying, or the exponent's sign flipped): the angles reach 10^4 or more,
    where float32 keeps no digit of a sine, so the answer is compared with that variant where the angles stay
    below 4000 only (float32 keeps them to about 10^-3 there), and must differ from the right one there."""
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    if "n" in inputs:
        n, d = int(inputs["n"]), int(inputs["d_model"])
        wrong, right, positions = sinusoid(n, d, exponent="pair_negated"), sinusoid(n, d), np.arange(n)
    else:
        x, positions = inputs["x"], inputs["positions"]
        n, d = np.shape(x)[-2], np.shape(x)[-1]
        wrong, right = rope(x, positions, exponent="pair_negated"), rope(x, positions)
    # the entries (row, column) whose angle stays below 4000: each row at its own position
    cells = np.abs(np.asarray(positions, dtype=np.float64)).reshape(-1, 1) * BASE ** _exponents(d) <= 4000
    if got.shape != right.shape or not cells.any() or cells.shape != right.shape[-2:]:
        return False
    cells = np.broadcast_to(cells, right.shape)
    # (of the vectors' size: an angle off by 1e-3 moves an entry by 1e-3 of the vector's length)
    atol = 3e-3 * max(1.0, float(np.abs(right).max()))
    if np.allclose(wrong[cells], right[cells], atol=atol):  # far positions, few columns: only the first pair
        # (frequency 1) is left, the same for both: the trial cannot tell, as long as the answer is far off where the
        # angles are large (a growing frequency leaves no digit there; an answer off by float32's 2π alone, a
        # remainder taken with it, is not)
        return bool(np.allclose(got[cells], wrong[cells], atol=atol) and not np.allclose(got, right, atol=atol))
    return bool(np.allclose(got[cells], wrong[cells], atol=atol)  # the trial cannot tell
                and not np.allclose(got[cells], right[cells], atol=atol))


def _half_positions(answer, inputs) -> bool:
    """A sign of positions sent through float16 (or bfloat16): the answer is the rotation at the positions those
    dtypes round to (float16 holds whole numbers exactly only up to 2 048, bfloat16 up to 256)."""
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    x, positions = inputs["x"], np.asarray(inputs["positions"])
    right = rope(x, positions)
    for rounded in (positions.astype(np.float16).astype(np.float64), _bfloat16(positions)):
        if (rounded != positions).any():
            wrong = rope(x, rounded)
            # (past float16's largest number, 65 504, a position is inf there, and its rotation NaN)
            if got.shape == wrong.shape and np.allclose(got, wrong, atol=1e-4, equal_nan=True) \
                    and not np.allclose(got, right, atol=1e-4):
                return True
    return False


def _bfloat16(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bfloat16 (8 bits of mantissa: float32's top 16 bits, rounded to nearest even)."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


SINUSOID_HINTS = {
    "positions_from_one": "Your positions start at 1. The first token is at position 0, so row 0 of the encoding "
    "is sin 0 = 0 and cos 0 = 1 in every pair: 0, 1, 0, 1, …",
}


def positional_inputs(rng=None) -> dict:
    if rng is None:
        d = notebook_data()
        x = d["x"]
        return {"x": x, "w_query": d["w_query"], "w_key": d["w_key"], "w_value": d["w_value"],
                "pe": sinusoid(x.shape[0], D_MODEL)}
    n, d_model = int(rng.integers(3, 8)), int(rng.choice([4, 6, 8]))
    # queries and keys narrower or wider than the tokens (and the values of a third width): a scale by √d_model
    # where the keys' width belongs shows
    d_k = int(rng.choice([d for d in (3, 5, 7, 9) if d != n]))
    d_v = int(rng.choice([d for d in (2, 5, 9) if d not in (d_model, n)]))
    w_query, w_key = rng.normal(size=(2, d_model, d_k)) / np.sqrt(d_model)
    w_value = rng.normal(size=(d_model, d_v)) / np.sqrt(d_model)
    # "pe is the encoding of those positions": any encoding, not only the sinusoids (a function that computes them
    # again instead of adding its pe is right only while it is handed that very table)
    return {"x": rng.normal(size=(n, d_model)), "w_query": w_query, "w_key": w_key, "w_value": w_value,
            "pe": rng.normal(size=(n, d_model))}


def ref_positional(x, w_query, w_key, w_value, pe):
    return self_attention(x + pe, w_query, w_key, w_value)


POSITIONAL_MISTAKES = {
    "pe_after_projection": lambda x, w_query, w_key, w_value, pe: attend(x @ w_query + pe, x @ w_key + pe,
                                                                         x @ w_value + pe),
    "pe_added_to_outputs": lambda x, w_query, w_key, w_value, pe: self_attention(x, w_query, w_key, w_value) + pe,
    "pe_after_projection_qk": lambda x, w_query, w_key, w_value, pe: attend(x @ w_query + pe, x @ w_key + pe,
                                                                            x @ w_value),
    "positions_not_added": lambda x, w_query, w_key, w_value, pe: self_attention(x, w_query, w_key, w_value),
    "pe_ignored": lambda x, w_query, w_key, w_value, pe: self_attention(x + sinusoid(*x.shape), w_query, w_key,
                                                                        w_value),
    "missing_scale": lambda x, w_query, w_key, w_value, pe: self_attention(x + pe, w_query, w_key, w_value,
                                                                           scale=False),
    "pe_not_in_values": lambda x, w_query, w_key, w_value, pe: attend((x + pe) @ w_query, (x + pe) @ w_key,
                                                                      x @ w_value),
    # √d_model, the tokens' width, where the keys' width belongs (the same only for square weights)
    "scale_by_d_model": lambda x, w_query, w_key, w_value, pe: attend((x + pe) @ w_query / np.sqrt(x.shape[-1]),
                                                                      (x + pe) @ w_key, (x + pe) @ w_value,
                                                                      scale=False),
    "pe_scaled": lambda x, w_query, w_key, w_value, pe: self_attention(x + pe * np.sqrt(x.shape[-1]), w_query,
                                                                       w_key, w_value),
    "embeddings_scaled": lambda x, w_query, w_key, w_value, pe: self_attention(x * np.sqrt(x.shape[-1]) + pe,
                                                                               w_query, w_key, w_value),
    "positions_reversed": lambda x, w_query, w_key, w_value, pe: self_attention(x + pe[::-1], w_query, w_key,
                                                                                w_value),
}
POSITIONAL_HINTS = {
    "positions_reversed": "Your encoding's rows run backwards: the first token got the row of the last position "
    "(a flip of pe). Token t takes row t of pe: x + pe, in order.",
    "scale_by_d_model": "You divided the scores by √d_model, the square root of the tokens' width. The scale is the "
    "square root of the width of the queries and keys (d_k, the keys' last axis), which differs from d_model as soon "
    "as the projections are not square.",
    "positions_not_added": "Your outputs are those of self_attention(x, …) without positions: `pe` never made it "
    "in. Add it to x before the attention.",
}


# --- part 3: learned position vectors ----------------------------------------------------------


def learned_inputs(rng=None) -> dict:
    if rng is None:
        d = notebook_data()
        return {"x": np.stack([d["x"], d["x"][PERM]]), "table": d["table"]}
    n, d_model = int(rng.choice([k for k in range(3, 8) if k != len(SENTENCE)])), int(rng.integers(2, 7))
    lead = ()  # no batch axis (the notebook's x has one): a table[None, :n] shows as an extra axis
    max_len = n + int(rng.integers(2, 8))
    return {"x": rng.normal(size=(*lead, n, d_model)), "table": rng.normal(size=(max_len, d_model))}


def square_table(first: dict) -> dict:
    """An edge trial from the first random one: a table with as many positions as it is wide (max_len = d_model): a
    table transposed whenever its rows number d_model ("it may be stored (d_model, max_len)") shows."""
    x = np.asarray(first["x"], dtype=float)
    d_model = max(x.shape[-1], x.shape[-2])  # (at least as many positions as the sentence has tokens)
    rng = np.random.default_rng([x.shape[-2], d_model, 8])
    return {**first, "x": rng.normal(size=(*x.shape[:-1], d_model)), "table": rng.normal(size=(d_model, d_model))}


square_table.of_first_trial = True


def long_sentence(inputs: dict) -> dict:
    """The edge trial: a batch of one sentence of 12 tokens and a table of exactly 12 positions, longer than any
    random draw, so that positions wrapped around at some length (`arange(n) % 8`), a table cut from its end
    (`table[:-(len(table) - n)]`, empty here) and a squeezed batch axis show; the table's numbers 8 times larger."""
    x, table = np.asarray(inputs["x"], dtype=float), np.asarray(inputs["table"], dtype=float)
    rows = np.concatenate([x, -0.5 * x + 0.25, 1.5 * x - 0.75, x[::-1]], axis=-2)[..., :12, :]
    more = np.concatenate([table, 0.5 - table, 1.25 * table + 0.1, -table], axis=0)[:12]
    # and a table of larger numbers (a trained one's can be): a table clamped "for safety" shows
    return {**inputs, "x": rows[None], "table": 8.0 * more}


def very_long_sentence(first: dict) -> dict:
    """An edge trial from the first random one: a sentence of 2 100 tokens, as wide, and a table of 2 104 positions:
    positions kept in int8 or uint8 (which wrap at 128 and 256, and then read rows from the table's end), or counted
    in float16 or bfloat16 (whole numbers exact only up to 2 048 and 256) show. From a generator seeded by the first
    trial's width."""
    d = np.shape(first["x"])[-1]
    rng = np.random.default_rng([d, 300])
    return {**first, "x": rng.normal(size=(2100, d)), "table": rng.normal(size=(2104, d))}


very_long_sentence.of_first_trial = True


def ref_learned(x, table):
    return x + table[: x.shape[-2]]


LEARNED_MISTAKES = {
    "positions_from_one": lambda x, table: x + table[1: x.shape[-2] + 1],
    "positions_concatenated": lambda x, table: np.concatenate(
        [x, np.broadcast_to(table[: x.shape[-2]], x.shape)], axis=-1),
    "positions_not_added": lambda x, table: x,
    # the token vectors scaled by √d_model first (the original Transformer's habit for its embeddings)
    "embeddings_scaled": lambda x, table: x * np.sqrt(x.shape[-1]) + table[: x.shape[-2]],
    "positions_reversed": lambda x, table: x + table[: x.shape[-2]][::-1],
}
def _bfloat16(a: np.ndarray) -> np.ndarray:
    """float32 numbers rounded to bfloat16 (to nearest, ties to even: 8 bits of mantissa), back as float32."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def _positions_narrowed(answer, inputs) -> bool:
    """A sign of ``wrong_dtype:positions`` for the learned table: the answer is the token vectors plus the rows of
    positions that went through float16 or bfloat16 (whole numbers exact only up to 2 048 and 256), or int8 or
    uint8 (which wrap at 128 and 256: a negative row counts from the table's end), and not the right answer."""
    (got,) = (np.asarray(a, dtype=np.float64) for a in answer.values())
    x, table = np.asarray(inputs["x"], dtype=np.float64), np.asarray(inputs["table"], dtype=np.float64)
    n = x.shape[-2]
    right = x + table[:n]
    if got.shape != right.shape or np.allclose(got, right, rtol=1e-4, atol=1e-5):
        return False
    count = np.arange(n, dtype=np.float64)
    forms = [count.astype(np.int8), count.astype(np.uint8)]
    for narrow, top in ((lambda a: a.astype(np.float16).astype(np.float64), 2048),
                        (lambda a: _bfloat16(a).astype(np.float64), 256)):
        # the count rounded; one counted from 1 (a running sum of ones, rounded as it goes), then 1 taken off in that
        # type; and a running sum kept in that type, which sticks where adding 1 rounds away
        forms += [narrow(count), narrow(narrow(count + 1) - 1), np.minimum(count, top - 1)]
    for rows in (np.asarray(f).astype(np.int64) for f in forms):
        if rows.min() >= -len(table) and rows.max() < len(table) \
                and np.allclose(got, x + table[rows], rtol=1e-4, atol=1e-5):
            return True
    return False


LEARNED_HINTS = {
    "wrong_dtype:positions": "Your positions went through a narrow type on the way: float16 holds whole numbers "
    "exactly only up to 2 048 (bfloat16 only up to 256), and int8 or uint8 wrap at 128 or 256, so from there on "
    "tokens read the wrong rows of the table. Count positions with integers of full width (`torch.arange(n)`, "
    "int64).",
    "positions_reversed": "Your positions run backwards: the first token got row n − 1 of the table. Token t takes "
    "row t: the first n rows, in order.",
    "embeddings_scaled": "You multiplied the token vectors by √d_model before adding the positions (as the original "
    "Transformer does with its embeddings). This step adds the table's rows to the vectors as they are.",
    "positions_from_one": "Your rows got the vectors of positions 1 to n. The first token is at position 0: "
    "it gets row 0 of the table, the n tokens rows 0 to n − 1.",
    "positions_not_added": "Your result is x itself: no position vector was added. Add the first rows of the "
    "table, one per token.",
}


# --- part 4: rotary embeddings ------------------------------------------------------------------


def rope_inputs(rng=None) -> dict:
    if rng is None:
        d = notebook_data()
        return {"x": d["x"] @ d["w_query"], "positions": np.arange(len(SENTENCE))}
    # (never the notebook's d_model of 8: a width read from the notebook shows on every draw)
    n, d = int(rng.integers(3, 8)), int(rng.choice([4, 6, 10, 12]))
    # always a batch axis in front ("a batch axis may come first"; the notebook's own x has none), so that
    # x.shape[1] for d, or pairs taken along axis 1, show on every draw
    lead = (int(rng.integers(2, 4)),)
    return {"x": rng.normal(size=(*lead, n, d)), "positions": rng.integers(0, 20, size=n)}


def far_positions(inputs: dict) -> dict:
    """An edge trial from the first random one: the same vectors at positions 260 and beyond (the other trials
    stay below 20): positions wrapped at a maximum length (`% 64`), kept in int8 or uint8 (which wrap at 128 and
    256), or a table of angles cut short, show; and, the shapes being the first trial's, so do angles kept from an
    earlier call of the same shapes."""
    return {**inputs, "positions": np.asarray(inputs["positions"]) + 260}


far_positions.of_first_trial = True


def past_half_positions(first: dict) -> dict:
    """An edge trial from the first random one: its vectors cut to 4 features (frequencies 1 and 1/100, both exact
    enough in float32 that a right rotation stays far inside the tolerance) at odd positions from 2 049 on, which
    float16 cannot hold (its whole numbers stop at 2 048; bfloat16's at 256): positions sent through float16 turn
    every token by a radian or more."""
    x = np.asarray(first["x"], dtype=np.float64)[..., :4]
    n = np.shape(first["positions"])[0]
    return {**first, "x": x, "positions": 2049 + 2 * np.arange(n)}


past_half_positions.of_first_trial = True


def million_positions(first: dict) -> dict:
    """An edge trial from the first random one: its vectors cut to 2 features (one pair, turned at frequency 1, so
    every angle is its position, a whole number that float32 holds exactly) at positions near a million (a long
    context): a right rotation is as exact there as at position 3, while angles wrapped into [0, 2π) by float32's
    2π (6.2831855, not 6.2831853…) drift by 1.7e-7 radians a turn, some 0.03 radians after 166 000 turns."""
    x = np.asarray(first["x"], dtype=np.float64)[..., :2]
    n = np.shape(first["positions"])[0]
    return {**first, "x": x, "positions": 1_048_573 + 3 * np.arange(n)}


million_positions.of_first_trial = True


def wide_rope(inputs: dict) -> dict:
    """An edge trial from the first random one: vectors 128 wide (a head's width in real models; the other trials
    are at most 12 wide): a frequency 10000^(-2i/d) computed through 10000^(2i), which overflows once 2i > 77,
    leaves the pairs past the 39th unturned."""
    x = np.asarray(inputs["x"], dtype=np.float64)
    rng = np.random.default_rng(x.shape)
    return {**inputs, "x": rng.normal(size=(*x.shape[:-1], 128))}


wide_rope.of_first_trial = True


def small_angles(inputs: dict) -> dict:
    """An edge trial from the first random one: vectors 128 wide, entries 8 times the others', at positions 1 to n
    (the lowest frequency, about 1.2e-4, turns them by 1e-4 to 1e-3 radians): a sine taken as √(1 − cos²) keeps
    almost no digit of such an angle in float32 (cos rounds near 1), where the right rotation, at these positions,
    stays far inside the tolerance."""
    x = np.asarray(inputs["x"], dtype=np.float64)
    rng = np.random.default_rng([*x.shape, 8])
    n = np.shape(inputs["positions"])[0]
    return {**inputs, "x": 8.0 * rng.normal(size=(*x.shape[:-1], 128)), "positions": np.arange(1, n + 1)}


small_angles.of_first_trial = True


def huge_vectors(inputs: dict) -> dict:
    """An edge trial from the first random one: its vectors 10⁵ times longer (the other trials' entries are of order
    1), every one at position 0, where the rotation leaves it as it is (exactly, in float32 too: cos 0 = 1, sin 0 =
    0): an output clamped "against exploding queries" (at ±1e4, say) shows."""
    return {**inputs, "x": np.asarray(inputs["x"], dtype=np.float64) * 1e5,
            "positions": np.zeros_like(np.asarray(inputs["positions"]))}


huge_vectors.of_first_trial = True


def long_rope(inputs: dict) -> dict:
    """An edge trial from the first random one: 600 vectors at positions 0 to 99, six times over (the other trials
    have at most 7 rows): a rotation that changes with the number of rows past some count (a base enlarged for
    inputs longer than 64 rows: "dynamic NTK") shows. (Positions stay below 100: float32's angles of a thousand
    radians are too coarse for the tolerance.)"""
    x = np.asarray(inputs["x"], dtype=np.float64)
    rng = np.random.default_rng([*x.shape, 600])
    return {**inputs, "x": rng.normal(size=(1, 600, x.shape[-1])), "positions": np.arange(600) % 100}


long_rope.of_first_trial = True


def ref_rope(x, positions):
    return rope(x, positions)


ROPE_MISTAKES = {
    "rope_halves": lambda x, positions: rope(x, positions, pairing="halves"),
    "rope_angles_tiled": rope_angles_tiled,
    "rope_wrong_sign": lambda x, positions: rope(x, positions, sign=-1.0),
    "rope_pairs_not_put_back": lambda x, positions: rope(x, positions, put_back="halves"),
    "rope_positions_ignored": lambda x, positions: rope(x, np.arange(x.shape[-2])),
    "pe_exponent_without_2": lambda x, positions: rope(x, positions, exponent="without_2"),
    "pe_same_frequency": lambda x, positions: rope(x, positions, exponent="same"),
    "pe_exponent_doubled": lambda x, positions: rope(x, positions, exponent="pair_doubled"),
    "pe_sin_cos_swapped": lambda x, positions: rope(x, positions, trig="sin_cos"),
    "pe_base_1000": lambda x, positions: rope(x, positions, base=1000.0),
    "rope_theta_from_n": lambda x, positions: rope(x, positions, width=x.shape[-2]),
    "rope_positions_consecutive": lambda x, positions: rope(x, np.asarray(positions)[0] + np.arange(x.shape[-2])),
}
ROPE_HINTS = {
    "wrong_dtype:positions": "Your positions went through float16 (or bfloat16) on the way: float16 holds whole "
    "numbers exactly only up to 2 048 (bfloat16 only up to 256), so position 2 049 becomes 2 048 and its token is "
    "turned by the wrong angle. Keep the positions as integers, or in float32 (`positions.float()`), before "
    "multiplying them by the frequencies.",
    "pe_exponent_doubled": "Your angles use the exponent 2·(2i)/d, twice the formula's: the 2i doubled again (the "
    "numbers 0, 2, 4, … that `arange(0, d, 2)` gives are already 2i), or 2i divided by d/2 instead of d. "
    "θ_i = 1 / 10000^(2i/d), so the exponents run 0, 2/d, 4/d, ….",
    "pe_sin_cos_swapped": "Your rotation has cos and sin the other way round. Turning (u, w) by the angle φ gives "
    "(u·cos φ − w·sin φ, u·sin φ + w·cos φ): at position 0 (φ = 0) the pair must stay as it was.",
    "pe_exponent_without_2": "Your angles use the exponent i/d. Pair i (features 2i and 2i+1) turns by "
    "position · θ_i with θ_i = 1 / 10000^(2i/d): the exponents run 0, 2/d, 4/d, … from one pair to the next.",
    "pe_same_frequency": "Every pair turned by the same angle, the position itself. Either the frequencies θ_i "
    "are missing, or their exponent became 0 (integer division, `//`, does that): pair i turns by "
    "position · θ_i with θ_i = 1 / 10000^(2i/d).",
}


def ref_rope_attention(queries, keys, values, positions, **_):
    q_rot, k_rot = rope(queries, positions), rope(keys, positions)
    return {"q_rot": q_rot, "k_rot": k_rot, "outputs_rope": attend(q_rot, k_rot, values)}


def _rope_attention_with(q_rot, k_rot, v, scale=True, order="qk", axis=-1):
    s = q_rot @ k_rot.T if order == "qk" else k_rot @ q_rot.T
    if scale is True:
        s = s / np.sqrt(k_rot.shape[-1])
    elif scale is not False:  # a number of the caller's (scale_by_other_size)
        s = s / scale
    return {"q_rot": q_rot, "k_rot": k_rot, "outputs_rope": softmax(s, axis=axis) @ v}


ROPE_ATTENTION_MISTAKES = {
    "rope_rotates_values": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, positions), rope(keys, positions), rope(values, positions)),
    "rope_before_projection": lambda x, w_query, w_key, values, positions, **_: _rope_attention_with(
        rope(x, positions) @ w_query, rope(x, positions) @ w_key, values),
    "rope_only_queries": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, positions), keys, values),
    "missing_scale": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, positions), rope(keys, positions), values, scale=False),
    "transposed_scores": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, positions), rope(keys, positions), values, order="kq"),
    "softmax_wrong_axis": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, positions), rope(keys, positions), values, axis=0),
    # positions counted from 1: each token turned one step too far (the scores, which depend on offsets, unchanged)
    "positions_from_one": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, np.asarray(positions) + 1), rope(keys, np.asarray(positions) + 1), values),
    # the weights mix the keys (as they are, or turned) instead of the values
    "swapped_projections": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, positions), rope(keys, positions), keys),
    "swapped_projections:turned": lambda queries, keys, values, positions, **_: _rope_attention_with(
        rope(queries, positions), rope(keys, positions), rope(keys, positions)),
}


def narrow_heads(first: dict) -> dict:
    """An edge trial from the first random one: projections narrower than the model (queries and keys 4 wide, values
    6 wide, while d_model stays 8; the other trials' projections are square): a scale by √d_model, or by a typed-in
    √8, which equals √d_k everywhere else, shows."""
    x = np.asarray(first["x"], dtype=np.float64)
    rng = np.random.default_rng([int(abs(v) * 1e6) % 2**31 for v in x.ravel()[:8]] + [48])
    wq, wk = rng.normal(size=(2, x.shape[-1], 4)) / np.sqrt(x.shape[-1])
    wv = rng.normal(size=(x.shape[-1], 6)) / np.sqrt(x.shape[-1])
    return {**first, "w_query": wq, "w_key": wk, "w_value": wv, "queries": x @ wq, "keys": x @ wk, "values": x @ wv}


narrow_heads.of_first_trial = True


# scores divided by the square root of another size than d_k: which one (scale_by_other_size)
ROPE_OTHER_SCALE = other_scale(
    lambda i, scale: _rope_attention_with(rope(i["queries"], i["positions"]), rope(i["keys"], i["positions"]),
                                          i["values"], scale=scale),
    lambda i: {"n, the number of tokens (len(positions))": len(i["positions"])},
    width="the width of one rotated key (k_rot.shape[-1])")


def ref_grid(q_vec, k_vec, grid_positions, **_):
    return {"score_grid": _grid(q_vec, k_vec, grid_positions)}


GRID_MISTAKES = {
    "rope_only_queries": lambda q_vec, k_vec, grid_positions, **_: {
        "score_grid": _grid(q_vec, k_vec, grid_positions, rotate_keys=False)},
    "transposed_scores": lambda q_vec, k_vec, grid_positions, **_: {
        "score_grid": _grid(q_vec, k_vec, grid_positions).T},
    "unexpected_scale": lambda q_vec, k_vec, grid_positions, **_: {
        "score_grid": _grid(q_vec, k_vec, grid_positions) / np.sqrt(len(q_vec))},
    "elementwise_product": lambda q_vec, k_vec, grid_positions, **_: {  # (8, d) * (8, d): d = 8 as well
        "score_grid": rope(np.tile(q_vec, (len(grid_positions), 1)), grid_positions)
        * rope(np.tile(k_vec, (len(grid_positions), 1)), grid_positions)},
}
GRID_HINTS = {
    "elementwise_product": "You multiplied the rotated queries and keys element by element (`*`), which happens to "
    "give an (8, 8) tensor because d_k is 8 too. Each score is a dot product of a whole rotated query with a whole "
    "rotated key: use `@` with the transposed keys.",
    "transposed_scores": "Your grid is transposed: row m must hold the query at position m, column p the key at "
    "position p (the rotated queries @ the rotated keys.T).",
    "unexpected_scale": "This grid holds the raw dot products of the rotated query and key. Leave out the division "
    "by √d_k here.",
    "rope_only_queries": "Only your query was rotated: every column holds the same unrotated key. Rotate the key "
    "too, to position p in column p.",
}


# --- the exercises ---------------------------------------------------------------------------


def _exercises() -> list[Exercise]:
    fn = {"notebook": NOTEBOOK, "kind": "function", "framework": "torch"}
    return [
        Exercise(
            "08.shuffled", notebook=NOTEBOOK, title="The same sentence, reordered",
            answers=("x_shuffled", "outputs_shuffled"),
            inputs=upstream_of(world, "x_shuffled", independent=("outputs",)),
            reference=ref_shuffled, reads=("x", "w_query", "w_key", "w_value", "perm"),
            mistakes=SHUFFLED_MISTAKES, hints=SHUFFLED_HINTS, framework="torch", how={"indexed_result": False},
            dtype="float32",  # the cell compares its outputs with the float32 outputs of the sentence in order
        ),
        Exercise(
            "08.sinusoidal", title="The sinusoidal encoding", answers=("sinusoidal_encoding",),
            inputs=sinusoidal_inputs, reference=ref_sinusoid, mistakes=SINUSOID_MISTAKES, hints=SINUSOID_HINTS,
            # and the first trial's n with a wider table: tables kept by n alone show
            dtype="float32", signs={"pe_exponent_sign": _exponent_sign},
            # and 6 000 positions: a table cut at 5 000; and 512 wide: a power of a power that overflows
            edge=(long_table, wider_table, one_position, longest_table, paper_width, odd_step_width),
            # a float32 table made the usual ways is off by 1e-5 at most on these trials (the angles of 300 positions
            # rounded to float32); a table scaled or clamped by 0.9999 is off by 1e-4 where it should be ±1
            atol=3e-5, rtol=1e-6, **fn,
        ),
        Exercise(
            "08.attention_with_positions", title="Attention with the positions added",
            answers=("attention_with_positions",), inputs=positional_inputs, reference=ref_positional,
            mistakes=POSITIONAL_MISTAKES, hints=POSITIONAL_HINTS, atol=1e-5, dtype="float32",
            edge=zero_row("x"),  # a token of zeros keeps its position: an encoding added to the others only shows
            # the token vectors and the weights are trained through it; the fixed encoding pe is not
            keeps_grad=("x", "w_query", "w_key", "w_value"), **fn,
        ),
        Exercise(
            "08.learned_positions", title="Learned position vectors", answers=("add_learned_positions",),
            inputs=learned_inputs, reference=ref_learned, mistakes=LEARNED_MISTAKES, hints=LEARNED_HINTS,
            # and a token whose vector is all zeros (it still has a position: a table added only to the others shows)
            dtype="float32", edge=(long_sentence, very_long_sentence, zero_row("x"), square_table),
            signs={"wrong_dtype:positions": _positions_narrowed},
            keeps_grad=True,  # the table is trained: its gradient must reach it (no .detach())
            **fn,
        ),
        Exercise(
            "08.rope", title="The rotation of RoPE", answers=("apply_rope",), inputs=rope_inputs,
            reference=ref_rope, mistakes=ROPE_MISTAKES, hints=ROPE_HINTS, dtype="float32", atol=5e-5, points=2,
            signs={"pe_exponent_sign": _exponent_sign, "wrong_dtype:positions": _half_positions},
            # and odd positions past 2 048: positions sent through float16 show
            # and small angles on long vectors: a sine taken as √(1 − cos²) shows
            # and positions near a million, at frequency 1: angles wrapped by float32's 2π show
            edge=(far_positions, wide_rope, long_rope, huge_vectors, past_half_positions, small_angles,
                  million_positions),
            keeps_grad=True,  # the queries and keys it turns are trained through it
            **fn,
        ),
        Exercise(
            "08.rope_attention", notebook=NOTEBOOK, title="Attention with rotated queries and keys",
            answers=("q_rot", "k_rot", "outputs_rope"), inputs=upstream_of(world, "q_rot"),
            reference=ref_rope_attention, reads=("queries", "keys", "values", "positions"),
            mistakes=ROPE_ATTENTION_MISTAKES, atol=1e-5, framework="torch", edge=narrow_heads,
            explains=scale_explains(ROPE_OTHER_SCALE),
            # "written yourself as in part 1": the library's fused function is what the cell compares with
            how={"library_attention": False},
            hints={"positions_from_one": "Your queries and keys are turned as if the first token stood at "
                   "position 1. The first token is at position 0, where RoPE turns nothing. (Your outputs come out "
                   "right all the same: the scores depend only on how far apart two positions are.)",
                   "swapped_projections": "Your weights mix the keys, not the values: each output is a weighted "
                   "sum of the values (`weights @ values`). The rotation turns the queries and keys only; the values "
                   "stay as they are.",
                   "not_as_asked:library_attention": "Your cell calls a library's attention "
                   "(`scaled_dot_product_attention`). This step asks you to write the attention on the rotated "
                   "queries and keys yourself, as in part 1 (scores, softmax, weighted values): the library's "
                   "version is what the cell compares yours with."},
        ),
        Exercise(
            "08.relative_grid", notebook=NOTEBOOK, title="Scores at every pair of positions",
            answers=("score_grid",), inputs=upstream_of(world, "score_grid"), reference=ref_grid,
            reads=("q_vec", "k_vec", "grid_positions"), mistakes=GRID_MISTAKES, hints=GRID_HINTS, atol=1e-4,
            framework="torch",
        ),
    ]


register(*_exercises())
