"""Notebook 09 — cross-attention and decoding with a KV cache (beyond the seeds), PyTorch and TensorFlow.

Part 1 and 2 are function steps on cross-attention: queries from one sequence (the decoder's),
keys and values from another (the encoder's), of another length, with the encoder's padding
hidden. Their random inputs always have n_q ≠ n_k, so taking the keys from the wrong sequence
or masking as in self-attention shows.

Part 3 decodes a sequence one token at a time with a cache of keys and values. The function
step ``cached_attention`` attends the newest m queries over every key so far (the cache and the
new ones): its random inputs always hold at least one cached key and at least two new queries,
so a mask counted from 0, a mask one off and no mask at all all differ. The decoding loop is a
value step replayed on fresh worlds (:func:`world`): new lengths, widths, position tables and
weights, so a loop that forgets to append, counts positions from 0 or re-masks the cache shows
on every draw. Its world's ``queries``, ``keys``, ``values`` and ``full_out`` (the whole
sequence at once, computed before the loop) are NaN: decoding must compute each token's query,
key and value itself. How it does that is checked too: the rows multiplied by ``w_key`` and
``w_value`` in a replay are counted (:class:`helpers.course.spec.RowBudget`), so a loop that
projects the whole prefix again at every step, with no cache, shows although its numbers are right.

Part 4 counts the bytes of a cache (plain Python arithmetic, any framework); Part 5 is the
TensorFlow twin of the padded cross-attention, compared in the notebook with Keras.

The examples are made with NumPy's seeded generator exactly as the notebook makes them, so trial 0
of a function step is the example the student sees.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ..reference import scaled_scores, softmax
from ..scales import other_scale, scale_explains
from ..spec import (
    Exercise,
    RowBudget,
    batch_of_one,
    future_masked_late,
    global_shift_sign,
    long_batch,
    loud_future,
    one_row,
    overflow_sign,
    register,
    scaled_by,
)

NOTEBOOK = "09_cross_attention_kv_cache"

D_MODEL, D_K = 6, 4  # the width of every token's vector, and of a query / key / value
N_ENC, N_DEC = 5, 3  # "the cat sat on mats" (encoder) and "<s> le chat" (decoder)
ENC_LENGTHS = np.array([5, 2])  # the padded batch: "the cat sat on mats" and "dogs bark" + 3 <pad>
N_SEQ, MAX_LEN = 6, 8  # the decoded sequence and the rows of its position table
T_CACHED = 4  # the chunk example: 4 tokens in the cache, 2 new ones
GPT2_SMALL = (12, 12, 1024, 64, 4)  # layers, heads, n (its context), d_head, bytes of a float32
# GPT-3 (175B) with its full context in float16: 9 GiB, above 2**33, so a count in int32 wraps around
GPT3 = (96, 96, 2048, 128, 2)


# --- the notebook's examples (same generator calls as in the notebook) ------------------


def cross_example() -> dict:
    rng = np.random.default_rng(90)
    x_enc = rng.normal(size=(N_ENC, D_MODEL)).round(1)
    x_dec = rng.normal(size=(N_DEC, D_MODEL)).round(1)
    w_query, w_key, w_value = (rng.normal(size=(3, D_MODEL, D_K)) / np.sqrt(D_MODEL)).round(2)
    return {"x_dec": x_dec, "x_enc": x_enc, "w_query": w_query, "w_key": w_key, "w_value": w_value}


def padded_batch() -> tuple[np.ndarray, np.ndarray]:
    """The padded batch: two encoder sentences (the second padded with zero vectors) and two decoder prefixes."""
    rng = np.random.default_rng(91)
    x_enc_b = rng.normal(size=(2, N_ENC, D_MODEL)).round(1)
    x_enc_b[1, ENC_LENGTHS[1]:] = 0.0
    x_dec_b = rng.normal(size=(2, N_DEC, D_MODEL)).round(1)
    return x_dec_b, x_enc_b


def padded_example() -> dict:
    w = cross_example()
    x_dec_b, x_enc_b = padded_batch()
    return {"q": x_dec_b @ w["w_query"], "k": x_enc_b @ w["w_key"], "v": x_enc_b @ w["w_value"],
            "enc_lengths": ENC_LENGTHS.copy()}


def decoder_example() -> dict:
    rng = np.random.default_rng(92)
    x_seq = rng.normal(size=(N_SEQ, D_MODEL)).round(1)
    pos_table = rng.normal(size=(MAX_LEN, D_MODEL)).round(1)
    w_query, w_key, w_value = (rng.normal(size=(3, D_MODEL, D_K)) / np.sqrt(D_MODEL)).round(2)
    return {"x_seq": x_seq, "pos_table": pos_table, "w_query": w_query, "w_key": w_key, "w_value": w_value}


def _projected(x_seq, pos_table, w_query, w_key, w_value, positions=None):
    """Queries, keys and values of the tokens at ``positions`` (default 0, 1, …, n − 1)."""
    n = x_seq.shape[0]
    pos = np.arange(n) if positions is None else positions
    h = x_seq + pos_table[pos]
    return h @ w_query, h @ w_key, h @ w_value


def cached_example() -> dict:
    q, k, v = _projected(**decoder_example())
    return {"q": q[T_CACHED:], "k": k, "v": v}


# --- building blocks (NumPy, float64) ----------------------------------------------------


def _t(a):
    return np.swapaxes(a, -1, -2)


def _scores(q, k, scale=True):
    """q·kᵀ divided by √d_k (``True``), by d_k (``"d"``), by a given number, or not at all (``False``)."""
    s = q @ _t(k)
    if scale is True:
        return s / np.sqrt(k.shape[-1])
    if scale == "d":
        return s / k.shape[-1]
    if scale is False:
        return s
    return s / float(scale)


def _attend(scores, v, allowed=None, how="inf", axis=-1, empty="nan"):
    """Masked softmax of ``scores`` (``allowed`` True = may attend) times ``v``.

    ``how``: −∞ before the softmax (``"inf"``), 0 before it (``"zero"``) or zeroed after it
    (``"after"``). A row with no allowed key is NaN (``empty="nan"``, as −∞ gives) or 0
    (``empty="zero"``: what attending over an empty cache gives).
    """
    if allowed is None:
        return softmax(scores, axis=axis) @ v
    allowed = np.broadcast_to(allowed, scores.shape)
    with np.errstate(invalid="ignore"):
        if how == "inf":
            weights = softmax(np.where(allowed, scores, -np.inf), axis=axis)
        elif how == "zero":
            weights = softmax(np.where(allowed, scores, 0.0), axis=axis)
        elif how == "after":
            weights = softmax(scores, axis=axis) * allowed
        else:
            raise ValueError(how)
        if empty == "zero":
            weights = np.where(allowed.any(axis=-1, keepdims=True), weights, 0.0)
    return weights @ v


# --- part 1: cross-attention ---------------------------------------------------------------


def _cross(x_dec, x_enc, w_query, w_key, w_value, *, q_from="dec", kv_from="enc", scale=True, axis=-1,
           weights=True, values_from_key=False, causal=False, keys_from_query=False):
    src = {"dec": x_dec, "enc": x_enc}
    q = src[q_from] @ w_query
    k = src[kv_from] @ (w_query if keys_from_query else w_key)
    v = src[kv_from] @ (w_key if values_from_key else w_value)
    if scale == "model":
        scale = np.sqrt(x_dec.shape[-1])
    if not weights:  # the raw scores times the values
        return _scores(q, k, scale) @ v
    if causal:  # decoder token i sees the encoder's tokens j ≤ i only
        return _attend(_scores(q, k, scale), v, np.tril(np.ones((q.shape[-2], k.shape[-2]), bool)))
    return _attend(_scores(q, k, scale), v, axis=axis)


def ref_cross(x_dec, x_enc, w_query, w_key, w_value):
    return _cross(x_dec, x_enc, w_query, w_key, w_value)


CROSS_MISTAKES = {
    "cross_keys_from_decoder": lambda **i: _cross(**i, kv_from="dec"),
    "cross_queries_from_encoder": lambda **i: _cross(**i, q_from="enc"),
    "cross_roles_swapped": lambda **i: _cross(**i, q_from="enc", kv_from="dec"),
    "missing_scale": lambda **i: _cross(**i, scale=False),
    "scale_by_d": lambda **i: _cross(**i, scale="d"),
    "scale_by_d_model": lambda **i: _cross(**i, scale="model"),
    "scale_by_d_v": lambda **i: _cross(**i, scale=np.sqrt(i["w_value"].shape[-1])),
    "softmax_wrong_axis": lambda **i: _cross(**i, axis=-2),
    "scale_multiplied": lambda **i: _cross(**i, scale=1.0 / np.sqrt(np.shape(i["w_key"])[-1])),
    "scale_after_softmax": lambda **i: _cross(**i, scale=False) / np.sqrt(np.shape(i["w_key"])[-1]),
    # dim=1: the keys' axis of one sentence's (n_q, n_k) scores, the decoder tokens' of a batch's (b, n_q, n_k)
    "softmax_wrong_axis:dim1": lambda **i: _cross(**i, axis=1 if np.ndim(i["x_dec"]) == 3 else -1),
    # no dim given (`F.softmax(scores)`): torch takes dim 0 for 3-D scores, the batch, and the last for 2-D ones
    "softmax_wrong_axis:implicit": lambda **i: _cross(**i, axis=0 if np.ndim(i["x_dec"]) == 3 else -1),
    # dim=0 itself: the batch of a batch's scores, the decoder tokens' of one sentence's
    "softmax_wrong_axis:dim0": lambda **i: _cross(**i, axis=0),
    "no_softmax": lambda **i: _cross(**i, weights=False),
    # the keys made with w_query (a line copied from the queries')
    "projection_reused:keys_from_query": lambda **i: _cross(**i, keys_from_query=True),
    # the values made with w_key (the same width as w_value in the notebook, not in general)
    "swapped_projections": lambda **i: _cross(**i, values_from_key=True),
    "cross_causal_mask": lambda **i: _cross(**i, causal=True),
}


def _two_lengths(rng) -> tuple[int, int]:
    """n_q and n_k, never equal: a decoder prefix and a source sentence of another length; n_k never the example's
    N_ENC, so that a scale by √n_k differs on every fresh trial from one by the example's n_k typed in (with every
    trial's n_k equal to the example's, and d_k equal to it on one trial, the two could not be told apart)."""
    n_q = int(rng.integers(2, 5))
    n_k = int(rng.choice([n for n in range(3, 7) if n not in (n_q, N_ENC)]))
    return n_q, n_k


D_K_CROSS = 4  # the width of the notebook's own queries and keys in part 1


def cross_inputs(rng=None) -> dict:
    if rng is None:
        return cross_example()
    batch = (int(rng.integers(2, 4)),)  # the notebook's example has no batch axis; these always have one
    n_q, n_k = _two_lengths(rng)
    d_model, d_k = (int(rng.integers(2, 7)) for _ in range(2))
    d_k = 5 if d_k == D_K_CROSS else d_k  # never the notebook's 4: a √4 typed in (in a 2-D branch, say) shows
    d_v = int(rng.choice([w for w in range(2, 7) if w != n_k]))  # a scale by √n_k never looks like one by √d_v
    return {"x_dec": rng.normal(size=(*batch, n_q, d_model)), "x_enc": rng.normal(size=(*batch, n_k, d_model)),
            "w_query": rng.normal(size=(d_model, d_k)) / np.sqrt(d_model),
            "w_key": rng.normal(size=(d_model, d_k)) / np.sqrt(d_model),
            "w_value": rng.normal(size=(d_model, d_v)) / np.sqrt(d_model)}


# --- part 2: the encoder's padding ---------------------------------------------------------


def _real_keys(enc_lengths, n_k, off_by_one=False, short=False):
    """(batch, 1, n_k): True where key j is a real token of its sentence (``short``: j < length − 1)."""
    j, lengths = np.arange(n_k)[None, :], np.asarray(enc_lengths)[:, None]
    return (j <= lengths if off_by_one else j < lengths - 1 if short else j < lengths)[:, None, :]


def _nonzero_keys(k) -> np.ndarray:
    """(batch, 1, n_k): True where key j is not all zeros (a mask of the padding by its contents)."""
    return np.any(np.asarray(k) != 0, axis=-1)[:, None, :]


def _padded(q, k, v, enc_lengths, *, padding="keys", causal=False, how="inf", scale=True, axis=-1):
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = {"keys": _real_keys(enc_lengths, n_k), "none": np.ones((1, 1, n_k), bool),
               "inverted": ~_real_keys(enc_lengths, n_k),
               "off_by_one": _real_keys(enc_lengths, n_k, off_by_one=True),
               "short": _real_keys(enc_lengths, n_k, short=True),
               # the source's lengths applied to the decoder's queries (rows): a row past the length has no key
               "queries": np.arange(n_q)[None, :, None] < np.asarray(enc_lengths)[:, None, None],
               # every sentence masked from the shortest length on (a loop over the lengths without the index b)
               "shortest": _real_keys(np.full_like(np.asarray(enc_lengths), np.min(enc_lengths)), n_k),
               # the keys of zeros hidden (the padding found from the keys' contents), with the lengths or without
               "zero_keys": _real_keys(enc_lengths, n_k) & _nonzero_keys(k),
               "zero_keys_only": _nonzero_keys(k)}[padding]
    if causal:
        allowed = allowed & np.tril(np.ones((n_q, n_k), bool))
    if how == "penalty_on_real":  # −1e9 added to the real keys' scores, in float32 (the student's tensors)
        s = (_scores(q, k, scale) + np.where(allowed, -1e9, 0.0)).astype(np.float32).astype(np.float64)
        return _attend(s, v, axis=axis)
    return _attend(_scores(q, k, scale), v, allowed, how, axis)


def ref_padded(q, k, v, enc_lengths):
    return _padded(q, k, v, enc_lengths)


def native_tf_padded(q, k, v, enc_lengths):
    """09.tf_padded_cross_attention's reference in TensorFlow, differentiable (a right student's function: its gradient
    is judged)."""
    import tensorflow as tf

    s = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
    real = tf.range(tf.shape(k)[-2])[None, :] < tf.cast(enc_lengths, tf.int32)[:, None]
    return tf.matmul(tf.nn.softmax(tf.where(real[:, None, :], s, tf.constant(-np.inf, s.dtype)), axis=-1), v)


PADDED_MISTAKES = {
    "missing_padding_mask": lambda **i: _padded(**i, padding="none"),
    "padding_mask_inverted": lambda **i: _padded(**i, padding="inverted"),
    "padding_mask_off_by_one": lambda **i: _padded(**i, padding="off_by_one"),
    "padding_mask_short_by_one": lambda **i: _padded(**i, padding="short"),
    "fully_masked_row": lambda **i: _padded(**i, padding="queries"),
    "cross_causal_mask": lambda **i: _padded(**i, causal=True),
    "mask_with_zero": lambda **i: _padded(**i, how="zero"),
    # the weights of the padded keys zeroed after the softmax; the same numbers as the padded values set to 0
    # with their scores left in the softmax (weight · 0): the hint names both
    "mask_after_softmax": lambda **i: _padded(**i, how="after"),
    "missing_scale": lambda **i: _padded(**i, scale=False),
    # √d_k typed in as 2, the notebook's √4 (the random trials' keys are 2 to 5 wide)
    "fixed_scale": lambda **i: _padded(**i, scale=2.0),
    "softmax_wrong_axis": lambda **i: _padded(**i, axis=-2),
    "padding_mask_one_length": lambda **i: _padded(**i, padding="shortest"),
    # the lengths sorted first, longest first (a habit from packing padded sequences): another sentence's length
    "padding_lengths_sorted": lambda q, k, v, enc_lengths: _padded(q, k, v, np.sort(np.asarray(enc_lengths))[::-1]),
    # the weights applied to the keys instead of the values (where they are as wide)
    "swapped_projections": lambda q, k, v, enc_lengths: _padded(q, k, k, enc_lengths),
}


def _zero_keys_hidden(answer, inputs) -> bool:
    """A sign of ``padding_from_zero_keys``: the numbers of a mask that hides the keys of zeros as well as the
    padding, or instead of it (on random trials, whose padding is not zeros, the latter hides nothing; on
    :func:`_real_zero_key`'s, both hide a real key)."""
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    return any(got.shape == wrong.shape and bool(np.allclose(got, wrong, rtol=1e-4, atol=1e-5))
               for wrong in (_padded(**inputs, padding="zero_keys"), _padded(**inputs, padding="zero_keys_only")))


# (an answer right where a real key is all zeros has not hidden such keys: a mask skipped for some batches, say, whose
# numbers are those of a mask that finds no key of zeros to hide)
_zero_keys_hidden.shows = lambda inputs: bool((~_nonzero_keys(inputs["k"]) & _real_keys(
    inputs["enc_lengths"], np.shape(inputs["k"])[-2])).any())


def _penalty_on_real_keys(answer, inputs) -> bool:
    """An additive mask without its `1 −`: −1e9 on the real keys, 0 on the padding. Where every sentence is padded
    it gives the numbers of the inverted mask (padding_mask_inverted); a full sentence, every key pushed down
    alike, keeps nearly equal weights in float32 where the inverted −∞ mask leaves NaN."""
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    wrong = _padded(**inputs, how="penalty_on_real")
    return got.shape == wrong.shape and bool(np.allclose(got, wrong, atol=1e-4, equal_nan=True))


def padded_inputs(rng=None) -> dict:
    if rng is None:
        return padded_example()
    b = int(rng.integers(2, 4))
    n_q, n_k = _two_lengths(rng)
    d, d_v = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    # every sentence padded: a batch padded to a fixed length (a multiple of 8, the model's maximum) has no
    # sentence that fills it, so a mask as wide as the longest sentence (arange(enc_lengths.max())) shows
    lengths = rng.integers(1, n_k, size=b)
    return {"q": rng.normal(size=(b, n_q, d)), "k": rng.normal(size=(b, n_k, d)), "v": rng.normal(size=(b, n_k, d_v)),
            "enc_lengths": lengths}


def loud_padding(first: dict) -> dict:
    """An edge trial from the first random one: the padding holds garbage that scores far above every real key (each
    query close to one direction, each padded key 400 / |q|² times along it: scores of 100 and more). Masked right,
    the padding gets weight 0 whatever it holds; a softmax that takes its maximum over the padded keys too shifts
    every real score so far down that its exp underflows to 0 in float32, and the row becomes 0/0."""
    q, k = np.asarray(first["q"], dtype=np.float64), np.array(first["k"], dtype=np.float64)
    lengths = np.asarray(first["enc_lengths"])
    b, n_q, d = q.shape
    rng = np.random.default_rng([b, n_q, d, k.shape[1]])
    q0 = rng.normal(size=(b, 1, d))
    q = q0 + 0.1 * rng.normal(size=(b, n_q, d))
    for i in range(b):
        k[i, lengths[i]:] = 400.0 * q0[i, 0] / float(q0[i, 0] @ q0[i, 0])
    return {**first, "q": q, "k": k}


loud_padding.of_first_trial = True
loud_padding.loud_scores = True


def _padding_masked_late(answer, inputs) -> bool:
    """NaN or inf on a batch whose padding scores far above the words (:func:`loud_padding`): the padded keys'
    scores reached the exponentials, or the maximum taken before them, ahead of the mask."""
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    k, lengths = np.asarray(inputs["k"]), np.asarray(inputs["enc_lengths"])
    loud = any(np.abs(k[i, int(n):]).max(initial=0.0) > 50.0 for i, n in enumerate(lengths))
    return (loud or _fill_far_trial(inputs)) and not bool(np.isfinite(got).all())


def _fill_far_trial(inputs) -> bool:
    """Is this :func:`_fill_far`'s trial (its visible scores at −10⁶, the hidden ones at 0: a maximum taken over the
    hidden keys too underflows every visible exponential)?"""
    q = np.asarray(inputs["q"], dtype=np.float64)
    return q.ndim >= 3 and bool(np.all(q[..., 0, 1:] == 0) and np.all(q[..., 0, 0] == FILL_FAR * np.sqrt(q.shape[-1])))


# --- part 3: attention over a cache -------------------------------------------------------


def _cached(q, k, v, *, mask="offset", how="inf", scale=True, axis=-1, offset=None):
    """The newest m queries over all t + m keys; new query i is at position t + i (``offset``: a t of its own,
    ``"m"`` for the number of new queries)."""
    m, n_k = q.shape[-2], k.shape[-2]
    t = n_k - m if offset is None else m if offset == "m" else int(offset)
    i, j = np.arange(m)[:, None], np.arange(n_k)[None, :]
    allowed = {"offset": j <= t + i, "from_zero": j <= i, "off_by_one": j < t + i, "sees_next": j <= t + i + 1,
               "none": np.ones((m, n_k), bool), "inverted": j > t + i, "by_value": j <= t + i,
               "upper": (j < t) | (j >= t + i)}[mask]
    scores = _scores(q, k, scale)
    if mask == "by_value":  # the future zeroed (tril) and then every score equal to 0 hidden: a real 0 as well
        allowed = allowed & (scores != 0)
    return _attend(scores, v, allowed, how, axis)


def ref_cached(q, k, v):
    return _cached(q, k, v)


CACHED_MISTAKES = {
    "cache_remasked": lambda **i: _cached(**i, mask="from_zero"),
    "cache_mask_off_by_one": lambda **i: _cached(**i, mask="off_by_one"),
    "cache_mask_sees_next": lambda **i: _cached(**i, mask="sees_next"),
    "missing_causal_mask": lambda **i: _cached(**i, mask="none"),
    # a mask only when nothing is cached (m == n_k), none once keys are cached: the new queries see each other's future
    "missing_causal_mask:cached": lambda **i: _cached(**i, mask="none" if np.shape(i["k"])[-2] > np.shape(i["q"])[-2]
                                                      else "offset"),
    # the allowed triangle handed to masked_fill: what each query may see is hidden, the future shown
    "causal_mask_inverted": lambda **i: _cached(**i, mask="inverted"),
    # the cache seen, and the new queries' own block as its upper triangle (`triu` where `tril` belongs)
    "mask_wrong_triangle": lambda **i: _cached(**i, mask="upper"),
    "mask_with_zero": lambda **i: _cached(**i, how="zero"),
    "mask_after_softmax": lambda **i: _cached(**i, how="after"),
    "missing_scale": lambda **i: _cached(**i, scale=False),
    "softmax_wrong_axis": lambda **i: _cached(**i, axis=-2),
    # the notebook's t_cached (4) read or typed in instead of t found from the shapes
    "cache_length_fixed": lambda **i: _cached(**i, offset=T_CACHED),
    # t taken as the number of new queries m
    "cache_offset_from_m": lambda **i: _cached(**i, offset="m"),
}


def _cached_by_value(answer, inputs) -> bool:
    """The mask made from the scores' values (tril, then ``scores == 0`` hidden): on the trial whose first key is
    all zeros (:func:`_heads_and_zero_key`), that key is hidden from every query as well."""
    q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
    if not np.all(k[..., 0, :] == 0):
        return False
    (got,) = answer.values()
    want = _cached(q, k, v, mask="by_value")
    got = np.asarray(got, dtype=np.float64)
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True))


def cached_inputs(rng=None) -> dict:
    if rng is None:
        return cached_example()
    batch = (int(rng.integers(2, 4)),)  # the notebook's example has no batch axis; these always have one
    # keys already cached, and new queries: at least 3, so that a mask that lets each query see the next new
    # token differs from no mask at all. The draw keeps the pairs where every variant differs: t other than the
    # notebook's t_cached = 4 and than m, and neither one off from the other (two variants are offsets of 4 and
    # of m) — with these ranges, t = 2 and m = 5, or t from 6 to 8 (the cache longer than the notebook's).
    t, m = int(rng.integers(1, 9)), int(rng.integers(3, 6))
    d, d_v = int(rng.integers(2, 6)), int(rng.integers(2, 6))
    return {"q": rng.normal(size=(*batch, m, d)), "k": rng.normal(size=(*batch, t + m, d)),
            "v": rng.normal(size=(*batch, t + m, d_v))}


def _louder(name: str, scores_of, top: float = 40.0):
    """An edge trial from the first random one: ``name`` scaled so that the largest score (in size) is ``top``, far
    beyond the other trials' few units (the scores of trained projections, or of part 1's ×16 query): scores clipped
    or clamped to a "safe" range show. Nothing overflows: the softmax is still exact."""
    def edge(first: dict) -> dict:
        s = np.asarray(scores_of(first), dtype=np.float64)
        # the largest score positive (its sign turned where the largest in size is negative): a cap from above
        # shows as a clamp on both sides does
        sign = -1.0 if s.max() < -s.min() else 1.0
        peak = float(np.abs(s).max()) or 1.0
        return {**first, name: np.asarray(first[name], dtype=np.float64) * (sign * top / peak)}

    edge.of_first_trial = True
    return edge


def _past_limit(name: str, scores_of, top: float = 200.0, *, last_row: bool = False, quiet_padding: bool = False):
    """An edge trial from the first random one: ``name`` of the batch's first sentence scaled (and its sign turned
    where that makes the largest score positive) so that its largest score is ``top``, where exp() overflows
    float32 (inf, and inf / inf is NaN); the other sentences keep their scores of a few units. A softmax written out
    without each row's maximum fails on the first sentence, one shifted by the largest score of the whole batch on
    the others (their exponentials all underflow to 0: 0 / 0). No hidden key scores far above the visible ones
    (that is :func:`loud_future`'s and :func:`loud_padding`'s trial): ``last_row``, only the last new query of a
    cache is scaled (it sees every key); ``quiet_padding``, the first sentence's padded keys are zeros."""
    def edge(first: dict) -> dict:
        a = np.array(first[name], dtype=np.float64)
        rows = (0, Ellipsis, slice(-1, None), slice(None)) if last_row else (0,)
        out = dict(first)
        if quiet_padding:
            k = np.array(first["k"], dtype=np.float64)
            k[0, int(np.asarray(first["enc_lengths"])[0]):] = 0.0
            out["k"] = k
        s = np.asarray(scores_of({**out, name: a}), dtype=np.float64)
        if s.ndim < 3:
            return first
        if s[rows].max() < -s[rows].min():
            a[rows] = -a[rows]
            s = np.asarray(scores_of({**out, name: a}), dtype=np.float64)
        a[rows] = a[rows] * (top / (float(s[rows].max()) or 1.0))
        return {**out, name: a}

    edge.of_first_trial = True
    return edge


def _far_below(seen_of):
    """An edge trial from the first random one: the first query of one sentence (the one whose first query sees the
    most keys, two at least) scores every key it may see (``seen_of(q, k, first)[b]`` of sentence b) at -115 or
    below (its keys share a long common part, the query points away from it); the other rows keep scores of a few
    units or tens. The keys it must not see then have to stay hidden whatever their fill: a fill of -100 gives them
    the weight, scores clamped from below (at -80, say) flatten its weights, and a softmax written out without the
    row's maximum gives 0 / 0 there."""
    def edge(first: dict) -> dict:
        q, k = np.array(first["q"], dtype=np.float64), np.array(first["k"], dtype=np.float64)
        if q.ndim < 3:
            return first
        d = q.shape[-1]
        seen = np.array(np.broadcast_to(np.asarray(seen_of(q, k, first)), q.shape[:1]))
        b = int(np.argmax(seen))
        out = dict(first)
        if "enc_lengths" in first and seen[b] < 2 <= k.shape[-2] - 1:  # two real keys at least, still padded
            lengths = np.array(first["enc_lengths"])
            lengths[b] = seen[b] = 2
            out["enc_lengths"] = lengths
        common = np.ones(d) / np.sqrt(d)
        for size in (10.0, 30.0, 100.0):
            kb = k[b] + size * common
            unit = -(kb[: int(seen[b])] @ common) / np.sqrt(d)
            if unit.max() < 0:
                q[b, 0], k[b] = -common * (115.0 / -unit.max()), kb
                return {**out, "q": q, "k": k}
        return first

    edge.of_first_trial = True
    return edge


def _far_below_cross(first: dict) -> dict:
    """:func:`_far_below`'s trial for cross-attention, which projects its own queries and keys: the first sentence's
    source tokens get a long common part, and its first decoder token points away from what that part becomes, so
    that it scores every source token at -115 or below (a clamp of the scores from below, at -80 say, shows)."""
    x_dec, x_enc = np.array(first["x_dec"], dtype=np.float64), np.array(first["x_enc"], dtype=np.float64)
    wq, wk = np.asarray(first["w_query"], dtype=np.float64), np.asarray(first["w_key"], dtype=np.float64)
    if x_dec.ndim < 3 or x_enc.ndim < 3:
        return first
    common = np.ones(x_enc.shape[-1]) / np.sqrt(x_enc.shape[-1])
    for size in (10.0, 30.0, 100.0):
        enc0 = x_enc[0] + size * common
        m = (enc0 @ wk) @ wq.T / np.sqrt(wk.shape[-1])  # score of token j with a decoder token u: u · m[j]
        mean = m.mean(axis=0)
        if not np.linalg.norm(mean):
            continue
        u = -mean / np.linalg.norm(mean)
        unit = m @ u
        if unit.max() < 0:
            x_dec[0, 0], x_enc[0] = u * (115.0 / -unit.max()), enc0
            return {**first, "x_dec": x_dec, "x_enc": x_enc}
    return first


_far_below_cross.of_first_trial = True


# the first new query of a cache sees the cached keys and its own; a padded sentence's queries see its real keys
_far_below_first_query = _far_below(lambda q, k, first: k.shape[-2] - q.shape[-2] + 1)
_far_below_padded = _far_below(lambda q, k, first: np.asarray(first["enc_lengths"]))


FILL_FAR = -1e6  # every visible score of a query of :func:`_fill_far`: below a finite fill of −1e4 or −1e5


def _visible(q, k, seen) -> np.ndarray:
    """Which keys the first query of each sentence sees (its first ``seen`` keys), as (…, keys) like ``k[..., 0]``."""
    seen = np.broadcast_to(np.asarray(seen), q.shape[:1])
    visible = np.arange(k.shape[-2]) < seen[:, None]
    return np.broadcast_to(visible.reshape(visible.shape[:1] + (1,) * (k.ndim - 3) + visible.shape[1:]),
                           k.shape[:-1])


def _fill_far(seen_of):
    """An edge trial from the first random one: the first query of each sentence scores exactly FILL_FAR (−10⁶)
    with every key it may see and exactly 0 with every key it must not (q = (−10⁶·√d, 0, …), the keys' first
    component 1 or 0): masked with −inf (or −1e9, or the dtype's lowest number) it takes the mean of its visible
    values, exactly in any precision; a finite fill above −10⁶ (−1e4 put in place of the hidden scores, or added to
    them) gives the hidden keys all its weight instead."""
    def edge(first: dict) -> dict:
        q, k = np.array(first["q"], dtype=np.float64), np.array(first["k"], dtype=np.float64)
        if q.ndim < 3:
            return first
        visible = _visible(q, k, seen_of(q, k, first))
        if visible.all():
            return first
        q[..., 0, :] = 0.0
        q[..., 0, 0] = FILL_FAR * np.sqrt(q.shape[-1])
        k[..., 0] = visible.astype(np.float64)
        return {**first, "q": q, "k": k}

    edge.of_first_trial = True
    return edge


def _fill_leaks(seen_of, reference):
    """A sign of ``mask_fill_too_small`` on :func:`_fill_far`'s trial: each sentence's first query gets the mean of
    the values it must not see (a finite fill above its scores), every other query is right."""
    def sign(answer, inputs) -> bool:
        q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
        if not _fill_far_trial(inputs):
            return False
        hidden = ~_visible(q, k, seen_of(q, k, inputs))  # (…, keys)
        got = np.asarray(next(iter(answer.values())), dtype=np.float64)
        want = np.asarray(reference(**inputs), dtype=np.float64)
        rows = hidden.any(-1)
        if got.shape != want.shape or not rows.any():
            return False
        leak = (hidden[..., :, None] * v).sum(-2) / np.maximum(hidden.sum(-1), 1)[..., None]
        return bool(np.allclose(got[..., 0, :][rows], leak[rows], rtol=1e-4, atol=1e-4)
                    and np.allclose(got[..., 1:, :], want[..., 1:, :], rtol=1e-4, atol=1e-4))

    return sign


def _cached_seen(q, k, first):
    return k.shape[-2] - q.shape[-2] + 1


def _padded_seen(q, k, first):
    return np.asarray(first["enc_lengths"])


def _long_sources(first: dict) -> dict:
    """An edge trial from the first random one's widths: two sources padded to 2 100 tokens, of 2 049 and 150 (the
    other trials have a few), the last real key of the first loud in its values: lengths kept in int8 or uint8 (which
    wrap at 128 and 256), and positions compared in float16 (whose whole numbers stop being exact above 2 048: 2 049
    rounds to 2 048, and that key is hidden), show. From a generator seeded by the first trial's shapes."""
    out = long_batch(first, 3, 2100, 300, ("enc_lengths", (2049, 150)))
    out["v"][0, 2048] = 40.0
    return out


_long_sources.of_first_trial = True


def _long_cache(first: dict) -> dict:
    """An edge trial from the first random one's widths: a cache of 2 060 keys and 20 new queries (the other trials
    have at most 13 keys): positions kept in int8 (which wraps at 128), or in float16 (whose whole numbers stop
    being exact above 2 048, so a query may see the key after it), show. From a generator seeded by the first trial's
    shapes."""
    return long_batch(first, 20, 2060, 200)


_long_cache.of_first_trial = True


def _scores_of(scores_of):
    return lambda **i: scores_of(i)


def _visible_cached(i: dict) -> np.ndarray:
    """The cached step's scores, NaN where a key is hidden (a new query's future): what an overflow is judged on."""
    s = np.array(_qk(i), dtype=np.float64)
    m, n_k = s.shape[-2], s.shape[-1]
    s[..., np.arange(n_k)[None, :] > (n_k - m) + np.arange(m)[:, None]] = np.nan
    return s


def _visible_padded(i: dict) -> np.ndarray:
    """The padded step's scores, NaN on the padding keys: what an overflow is judged on."""
    s = np.array(_qk(i), dtype=np.float64)
    lengths = np.asarray(i["enc_lengths"]).reshape(-1)
    for b, n in enumerate(lengths):
        s[b, ..., int(n):] = np.nan
    return s


def _qk(i: dict) -> np.ndarray:
    return scaled_scores(i["q"], i["k"])


def _cross_scores(i: dict) -> np.ndarray:
    return scaled_scores(np.asarray(i["x_dec"]) @ np.asarray(i["w_query"]),
                         np.asarray(i["x_enc"]) @ np.asarray(i["w_key"]))


def _zero_source_token(first: dict) -> dict:
    """An edge trial from the first random one: every sentence's first source token a vector of zeros (its key and
    value are zeros: it scores 0 with every query). Nothing is padded in this step: a mask that hides the source
    tokens of zeros hides a real token."""
    x = np.array(first["x_enc"], dtype=np.float64)
    x[..., 0, :] = 0.0
    return {**first, "x_enc": x}


_zero_source_token.of_first_trial = True


def _square_cross(first: dict) -> dict:
    """An edge trial from the first random one: a source exactly as long as the decoder's prefix (n_q = n_k; the
    random trials never have them equal): a causal mask applied whenever the scores are square shows."""
    x_dec, x_enc = np.asarray(first["x_dec"], dtype=np.float64), np.asarray(first["x_enc"], dtype=np.float64)
    n_q, n_k = x_dec.shape[-2], x_enc.shape[-2]
    if n_k < n_q:
        rng = np.random.default_rng(x_enc.shape)
        x_enc = np.concatenate([x_enc, rng.normal(size=(*x_enc.shape[:-2], n_q - n_k, x_enc.shape[-1]))], axis=-2)
    return {**first, "x_enc": x_enc[..., :n_q, :]}


_square_cross.of_first_trial = True


def _long_source(first: dict) -> dict:
    """An edge trial from the first random one: a source of 40 tokens (the random ones have 3 to 6), drawn as they
    are. Attention over only the best few keys of each query (a top-k of 8) is the whole softmax on short sources."""
    x = np.asarray(first["x_enc"], dtype=np.float64)
    rng = np.random.default_rng(x.shape)
    more = rng.normal(size=(*x.shape[:-2], 40 - x.shape[-2], x.shape[-1]))
    return {**first, "x_enc": np.concatenate([x, more], axis=-2)}


_long_source.of_first_trial = True


def _late_loud_key(first: dict) -> dict:
    """An edge trial from the first random one: one query per sentence over a source of 600 tokens whose last key
    scores 8 above every other with that query (made along the query itself, so every score stays moderate): a
    softmax over blocks or tiles of keys (32, 64, 512) that does not rescale what it summed before, or drops the
    last partial block, is wrong there, whatever the draw. From a generator seeded by the first trial's shapes."""
    q_in = np.asarray(first["x_dec"], dtype=np.float64)[..., :1, :]
    x = np.asarray(first["x_enc"], dtype=np.float64)
    wq, wk = np.asarray(first["w_query"], dtype=np.float64), np.asarray(first["w_key"], dtype=np.float64)
    rng = np.random.default_rng(x.shape)
    src = rng.normal(size=(*x.shape[:-2], 600, x.shape[-1]))
    q = q_in @ wq  # (…, 1, d_k)
    along = q @ np.linalg.pinv(wk)  # a token whose key is (as near as the widths allow) the query itself
    scores = (q @ (src @ wk).swapaxes(-1, -2))[..., 0, :]  # (…, 600)
    own = (q @ (along @ wk).swapaxes(-1, -2))[..., 0, :]  # (…, 1): its score, ≥ 0
    if np.any(own <= 1e-6):
        return first
    src[..., -1:, :] = along * ((scores[..., :-1].max(axis=-1, keepdims=True) + 8.0 * np.sqrt(q.shape[-1])) / own
                                )[..., None]
    return {**first, "x_dec": q_in, "x_enc": src}


_late_loud_key.of_first_trial = True


def _real_zero_key(first: dict) -> dict:
    """An edge trial from the first random one: every source's first key (always a real token) all zeros, so that it
    scores exactly 0 with every query: a mask made from the scores' values (`scores == 0` hidden, as padding that
    was zeroed) or from the keys' (keys of zeros hidden) hides a real key."""
    k = np.array(first["k"], dtype=np.float64)
    k[:, 0, :] = 0.0
    # every source at least two tokens long (where it is that long): such a mask then leaves each query a key
    return {**first, "k": k, "enc_lengths": np.maximum(np.asarray(first["enc_lengths"]), min(2, k.shape[-2]))}


_real_zero_key.of_first_trial = True


def _one_source_token(first: dict) -> dict:
    """An edge trial from the first random one: every source one token long (one key, every length 1): a mask
    squeezed to lose its axes of size 1 (`.squeeze()` on the (batch, n_k) mask) shows."""
    k, v = (np.asarray(first[n], dtype=np.float64)[:, :1] for n in ("k", "v"))
    return {**first, "k": k, "v": v, "enc_lengths": np.ones_like(np.asarray(first["enc_lengths"]))}


_one_source_token.of_first_trial = True


def _other_lengths(first: dict) -> dict:
    """An edge trial from the first random one: the same shapes with other lengths (each sentence's length moved
    along the batch, or one shorter): a mask kept from an earlier call of the same shapes shows."""
    lengths = np.asarray(first["enc_lengths"])
    n_k = np.shape(first["k"])[1]
    other = np.roll(lengths, 1)
    if np.array_equal(other, lengths):
        other = np.where(lengths > 1, lengths - 1, np.minimum(lengths + 1, n_k))
    return {**first, "enc_lengths": other.astype(lengths.dtype)}


_other_lengths.of_first_trial = True


def _equal_lengths(first: dict) -> dict:
    """An edge trial from the first random one with every sentence padded to the same length, shorter than the keys:
    a mask skipped when the lengths are all equal ("nothing to pad") shows."""
    n_k = np.shape(first["k"])[1]
    lengths = np.asarray(first["enc_lengths"])
    if n_k < 2:
        return first
    return {**first, "enc_lengths": np.full_like(lengths, max(1, n_k // 2))}


_equal_lengths.of_first_trial = True


def _one_padded_sentence(first: dict) -> dict:
    """An edge trial from the first random one: its first sentence alone, a batch of one, still padded (its length
    below the keys'): a mask skipped for a batch of one shows."""
    return {**first, **{n: np.asarray(first[n])[:1] for n in ("q", "k", "v", "enc_lengths")}}


_one_padded_sentence.of_first_trial = True


def _heads_and_zero_key(first: dict) -> dict:
    """An edge trial from the first random one: its batch made a heads axis, (1, heads, …, d), as a model's
    layers call it (a transpose of axes 1 and 2 instead of the last two shows); and the first key all zeros, so that
    it scores exactly 0 with every query (a mask made from the scores' values, ``scores == 0``, hides it)."""
    q, k, v = (np.array(first[n], dtype=np.float64)[None] for n in ("q", "k", "v"))
    k[..., 0, :] = 0.0
    return {**first, "q": q, "k": k, "v": v}


_heads_and_zero_key.of_first_trial = True


def _without_batch(*names: str):
    """An edge trial from the first random one: its first sentence alone, without the batch axis (the TO-DO takes
    inputs with or without one): a 2-D branch that only works at the notebook's own sizes shows."""
    def edge(first: dict) -> dict:
        return {**first, **{n: np.asarray(first[n])[0] for n in names}}

    edge.of_first_trial = True
    return edge


def _prefill(first: dict) -> dict:
    """An edge trial from the first random one: nothing cached yet (t = 0) and all its queries new (m of 3 or more):
    ordinary causal attention, a prompt taken in at once. A mask applied only when something is cached (`if t > 0`)
    lets each query see the tokens after it."""
    q = np.asarray(first["q"])
    m = q.shape[-2]
    return {**first, "k": np.asarray(first["k"])[..., -m:, :], "v": np.asarray(first["v"])[..., -m:, :]}


_prefill.of_first_trial = True


def _one_query(inputs: dict) -> dict:
    """The draw with only its newest query (m = 1): the step decoding makes at every token; and a batch of one
    sentence, so that a function that squeezes an axis of length 1 away shows."""
    return {**inputs, **{n: np.asarray(inputs[n])[:1] for n in ("k", "v")}, "q": np.asarray(inputs["q"])[:1, -1:, :]}


# --- part 3: the decoding loop (a value step) ---------------------------------------------


def world(rng: np.random.Generator | None = None, shape: tuple[int, int, int, int] | None = None) -> dict:
    """Part 3's names in notebook order: the sequence, its position table and the weights, then
    what the notebook computes from them for the whole sequence at once, then the answer.

    Fresh worlds change the length n (9 to 11: longer than the notebook's whole position table, MAX_LEN = 8,
    so a cache or a loop sized to the notebook's numbers fails on every draw), the widths, the position table
    (always at least one row longer than the sequence, as in the notebook) and the weights; ``shape`` = (n,
    d_model, d_k, max_len) fixes the sizes instead of drawing them.
    """
    if rng is None:
        names = decoder_example()
    else:
        if shape is None:
            n = int(rng.integers(MAX_LEN + 1, MAX_LEN + 4))  # longer than the notebook's 6 rows and its 8 positions
            shape = (n, int(rng.integers(3, 7)), int(rng.integers(2, 6)), n + int(rng.integers(1, 4)))
        n, d_model, d_k, max_len = shape
        w_query, w_key, w_value = rng.normal(size=(3, d_model, d_k)) / np.sqrt(d_model)
        names = {"x_seq": rng.normal(size=(n, d_model)), "pos_table": rng.normal(size=(max_len, d_model)),
                 "w_query": w_query, "w_key": w_key, "w_value": w_value}
    queries, keys, values = _projected(**names)
    n = names["x_seq"].shape[0]
    names |= {"n": n, "d_k": names["w_key"].shape[1], "queries": queries, "keys": keys, "values": values,
              "full_out": _attend(_scores(queries, keys), values, np.tril(np.ones((n, n), bool)))}
    return names | ref_decode(**names)


WHOLE_SEQUENCE = ("queries", "keys", "values", "full_out")


def decode_inputs(rng: np.random.Generator | None = None) -> dict:
    """The names before ``decoded``. In a fresh world, what the notebook computed for the whole sequence
    at once is NaN, of the right shapes: a decoder does not have it yet. A loop that copies ``full_out``,
    or reads any row of ``queries``, ``keys`` or ``values`` instead of computing it, gives NaN there; the
    cell's own comparison with ``full_out`` still runs (and says False)."""
    names = world(rng)
    out = {k: v for k, v in names.items() if k != "decoded"}
    if rng is not None:
        out |= {k: np.full_like(out[k], np.nan) for k in WHOLE_SEQUENCE}
    return out


def one_wide(inputs: dict) -> dict:
    """An edge replay of the same length, with queries, keys and values one number wide (d_k = 1, as a head can be):
    the outputs are (n, 1), and a result squeezed (`torch.stack(rows).squeeze()`) loses that axis. From a generator
    seeded by the replay's own sizes."""
    x = np.asarray(inputs["x_seq"])
    n, d_model = x.shape
    rng = np.random.default_rng([n, d_model, 1])
    out = {k: v for k, v in world(rng, (n, d_model, 1, np.shape(inputs["pos_table"])[0])).items() if k != "decoded"}
    return out | {k: np.full_like(out[k], np.nan) for k in WHOLE_SEQUENCE}


DECODE_READS = ("x_seq", "pos_table", "w_query", "w_key", "w_value")


def _decode(x_seq, pos_table, w_query, w_key, w_value, *, positions="own", sees="past", empty="nan", scale=True,
            swap_kv=False, query=None, unplaced=(), reuse=None, **_):
    """``{"decoded": …}``: token t's output when the tokens are fed one at a time; the keywords make the
    wrong variants (which positions the tokens get, which cached keys each one sees, what a token that
    sees no key gets)."""
    n = x_seq.shape[0]
    if positions == "none":
        q, k, v = x_seq @ w_query, x_seq @ w_key, x_seq @ w_value
    else:
        pos = {"own": np.arange(n), "zero": np.zeros(n, int), "next": np.arange(n) + 1}[positions]
        q, k, v = _projected(x_seq, pos_table, w_query, w_key, w_value, pos)
    if swap_kv:
        k, v = v, k
    if reuse is not None:  # a line copied without changing its matrix: ("value", "w_key") makes the values with w_key
        role, weight = reuse
        h = x_seq + pos_table[np.arange(n)]
        made = h @ {"w_query": w_query, "w_key": w_key, "w_value": w_value}[weight]
        k, v = (made, v) if role == "key" else (k, made)
    if query == "next":  # the query alone one position late (t + 1)
        q = (x_seq + pos_table[np.arange(n) + 1]) @ w_query
    elif query == "none":  # the query alone without its position
        q = x_seq @ w_query
    if "keys" in unplaced:  # the cached keys (or values) made from the token alone, without its position
        k = x_seq @ w_key
    if "values" in unplaced:
        v = x_seq @ w_value
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    allowed = {"past": j <= i, "itself": j == i, "first": j == 0, "before": j < i,
               "before_or_first": (j < i) | ((i == 0) & (j == 0))}[sees]
    return {"decoded": _attend(_scores(q, k, scale), v, allowed, empty=empty)}


def ref_decode(**names):
    return _decode(**names)


DECODE_MISTAKES = {
    "cache_not_appended": lambda **names: _decode(**names, sees="itself"),
    # attending over the cache before appending: token 0 attends over an empty cache, which gives 0
    "cache_appended_late": lambda **names: _decode(**names, sees="before", empty="zero"),
    # the same, with the first token (whose cache is still empty) given its own value, which is its right output
    "cache_appended_late_first_own": lambda **names: _decode(**names, sees="before_or_first"),
    # the loop through a cached_attention whose mask is one off: token 0 has every key hidden (NaN)
    "cache_mask_off_by_one": lambda **names: _decode(**names, sees="before"),
    "cache_remasked": lambda **names: _decode(**names, sees="first"),
    "cache_position_offset": lambda **names: _decode(**names, positions="zero"),
    "positions_from_one": lambda **names: _decode(**names, positions="next"),
    "positions_not_added": lambda **names: _decode(**names, positions="none"),
    "query_position_late": lambda **names: _decode(**names, query="next"),
    "query_position_missing": lambda **names: _decode(**names, query="none"),
    "positions_not_added:keys": lambda **names: _decode(**names, unplaced=("keys",)),
    "positions_not_added:values": lambda **names: _decode(**names, unplaced=("values",)),
    "swapped_projections": lambda **names: _decode(**names, swap_kv=True),
    "projection_reused:value_with_key": lambda **names: _decode(**names, reuse=("value", "w_key")),
    "projection_reused:key_with_query": lambda **names: _decode(**names, reuse=("key", "w_query")),
    "missing_scale": lambda **names: _decode(**names, scale=False),
    # every row NaN in a fresh world, whichever of full_out, queries, keys or values was read
    "copied_answer": lambda full_out, **_: {"decoded": full_out},
}

# With a cache, each token is projected once: n rows through w_key and w_value. Room for twice that (a
# check of the cache against the whole sequence, say); a loop that projects the prefix 0 … t again at
# every step multiplies n (n + 1) / 2 rows, 28 or more on a fresh world (n ≥ 7).
# A decoder that projects every token before its loop (the same numbers, and n rows in all) has not decoded
# one token at a time: its first product with w_key or w_value takes all n rows. A prefill (a prompt of a few
# tokens read in one go, then one token at a time) takes fewer, and is decoding.
# After the first product (a prompt read in one go may come first), one token per step: a product of more rows,
# while the sequence's tokens are not all projected yet, feeds them in a few at a time (chunks of 2 or 3: the same
# numbers, as cached_attention takes several new queries). A check of the cache against the whole sequence, after
# the loop, projects tokens already projected, and is not a chunk.


def _one_token_per_step(weight: str):
    def judge(sizes, names) -> str | None:
        n, done = names["x_seq"].shape[0], (sizes[0] if sizes else 0)
        for rows in sizes[1:]:
            if done >= n:
                break
            if rows > 1:
                return (f" (Run again on other inputs, after its first product with `{weight}` your cell "
                        f"multiplied {rows} rows by it at once.)")
            done += rows
        return None
    return judge


DECODE_BUDGETS = (*(RowBudget(w, lambda names: 2 * names["x_seq"].shape[0], "no_cache") for w in ("w_key", "w_value")),
                  *(RowBudget(w, lambda names: names["x_seq"].shape[0] - 1, "projected_ahead", first=True)
                    for w in ("w_key", "w_value")),
                  RowBudget("w_query", lambda names: names["x_seq"].shape[0] - 1, "projected_ahead:query", first=True),
                  *(RowBudget(w, lambda names: 1, "tokens_in_chunks", sizes=_one_token_per_step(w))
                    for w in ("w_key", "w_value", "w_query")))


# --- part 4: the size of a cache -------------------------------------------------------------


def ref_cache_bytes(num_layers, num_heads, n, d_head, bytes_per_number):
    return 2 * num_layers * num_heads * n * d_head * bytes_per_number


CACHE_BYTES_MISTAKES = {
    "cache_counted_in_numbers": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * n * d_head,
    "cache_quadratic_in_n": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * n * n * d_head * bytes_per_number,
    "cache_missing_kv_factor": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        num_layers * num_heads * n * d_head * bytes_per_number,
    "cache_missing_layers": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_heads * n * d_head * bytes_per_number,
    "cache_bytes_fixed": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * n * d_head * 4,
    "cache_counted_in_bits": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * n * d_head * bytes_per_number * 8,
    "cache_in_mebibytes": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * n * d_head * bytes_per_number / 2**20,
    "cache_in_megabytes": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * n * d_head * bytes_per_number / 10**6,
    "cache_in_gibibytes": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * n * d_head * bytes_per_number / 2**30,
    "cache_tokens_short_by_one": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * (n - 1) * d_head * bytes_per_number,
    "cache_extra_token": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * (n + 1) * d_head * bytes_per_number,
    "cache_extra_layer": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * (num_layers + 1) * num_heads * n * d_head * bytes_per_number,
    "cache_missing_heads": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * n * d_head * bytes_per_number,
    "cache_heads_twice": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_layers * num_heads * num_heads * n * d_head * bytes_per_number,
    "cache_heads_for_layers": lambda num_layers, num_heads, n, d_head, bytes_per_number:
        2 * num_heads * num_heads * n * d_head * bytes_per_number,
}


def cache_bytes_inputs(rng=None) -> dict:
    names = ("num_layers", "num_heads", "n", "d_head", "bytes_per_number")
    if rng is None:
        return dict(zip(names, GPT2_SMALL))
    # small sizes, so that every answer is an exact integer in float32 too; no 2 among the layers or the bytes
    # and no layers as many as the bytes, so that forgetting one factor or another gives different numbers
    # and never 4 bytes per number, so that a function that always counts 4 (float32) fails here. Not 2 or 8
    # either: with 2, counting numbers instead of bytes gives half the answer, as forgetting the factor 2 does;
    # with 8, so does a fixed 4. 16 bytes (a complex128) keeps every mistake apart.
    values = (int(rng.choice([3, 5, 6, 7])), int(rng.integers(1, 5)), int(rng.integers(2, 21)),
              int(rng.choice([2, 4, 8])), 16)
    return dict(zip(names, values))


def large_cache(inputs: dict) -> dict:
    """The edge trial: a real model's cache, larger than 2**32 bytes, where a product in int32 wraps around: GPT-3's
    sizes over a long context of 30 000 tokens (so that a count capped at a context length, `min(n, 4096)`, shows)
    with one byte per number (an 8-bit cache, 70 GB), so that a function that never counts fewer than 2 bytes
    (`max(bytes_per_number, 2)`) shows as well."""
    return dict(zip(inputs, (*GPT3[:2], 30_000, GPT3[3], 1)))


def four_bit_cache(inputs: dict) -> dict:
    """An edge trial: GPT-2 small's sizes with half a byte per number (a 4-bit cache), so that bytes rounded to a
    whole number (`int(bytes_per_number)`, `math.ceil`) show."""
    return dict(zip(inputs, (*GPT2_SMALL[:4], 0.5)))


def one_token(inputs: dict) -> dict:
    """An edge trial: one token cached (n = 1), what the notebook's "each token adds" line computes: a count that
    treats one token apart (`if n > 1 else 0`) shows."""
    return {**inputs, "n": 1}


def quarter_bytes(inputs: dict) -> dict:
    """An edge trial: a quarter of a byte per number (2-bit numbers) and an odd product of the other sizes, so that
    the total is not a whole number (22.5 bytes): a total rounded (`round`, `math.ceil`, `// 1`) shows."""
    return dict(zip(inputs, (3, 1, 5, 3, 0.25)))


def fractional_bits(inputs: dict) -> dict:
    """An edge trial: 2.5625 bits per number (0.3203125 bytes, a 2-bit format with its scales, as llama.cpp's Q2_K)
    and sizes whose total, 134.53125 bytes, has five decimals: bits cut to a whole number (`int(8 * bytes)`) or a
    total rounded to two decimals show."""
    return dict(zip(inputs, (2, 3, 7, 5, 0.3203125)))


def byte_and_a_quarter(inputs: dict) -> dict:
    """An edge trial: 1.25 bytes per number (10-bit numbers) and one number of each: 2.5 bytes in all. A total cut to
    a whole number where the bytes per number are 1 or more (`int(...)`) shows."""
    return dict(zip(inputs, (1, 1, 1, 1, 1.25)))


def past_a_million(inputs: dict) -> dict:
    """An edge trial: 4.03125 bits per number (0.50390625 bytes: 4-bit numbers with a 16-bit scale for every 512) and
    a million and one tokens, a total of 1 007 813.5078125 bytes, seven decimals past a million: a total rounded to
    six decimals ("float noise"), or cut to whole bytes once it is large, shows."""
    return dict(zip(inputs, (1, 1, 1_000_001, 1, 0.50390625)))


def seven_decimals(inputs: dict) -> dict:
    """An edge trial: one number of 4.03125 bits in the keys and one in the values, 1.0078125 bytes: seven decimals
    on a small total, so that a total rounded to six is off by a few parts in ten million."""
    return dict(zip(inputs, (1, 1, 1, 1, 0.50390625)))


def many_digits(inputs: dict) -> dict:
    """An edge trial whose total has twelve significant digits, the last of them not 0 (2·61·128·163 839·128·1 =
    327 489 257 472 bytes): a total rounded to ten significant digits on the way (`float(f"{x:.10g}")`) shows."""
    return dict(zip(inputs, (61, 128, 163_839, 128, 1)))


def odd_sizes(inputs: dict) -> dict:
    """An edge trial whose count of numbers is odd and above 2**24 (7·9·123 457·129 = 1 003 335 039 per key or
    value): a product taken in float32 (a tensor of the sizes, `.prod()`), exact only up to 2**24, rounds it."""
    return dict(zip(inputs, (7, 9, 123_457, 129, 1)))


def _float32_rounded(answer, inputs) -> bool:
    """A count a few parts in 10**8 or 10**9 off, as float32's 24 bits leave a product above 2**24 (or a total of a
    million bytes with a fraction of a byte), or a rounding to 8 significant digits does."""
    got = float(np.asarray(answer["kv_cache_bytes"], dtype=np.float64).ravel()[0])
    want = float(ref_cache_bytes(**inputs))
    # (and more than ten significant digits leave, 1.5e-10 of the total at most: a total rounded to 10 digits is
    # another mistake)
    return want > 1e6 and 2e-10 * want < abs(got - want) <= 2.0**-23 * want


def _whole_bytes(answer, inputs) -> bool:
    """A count of bytes that is not a whole number (fewer than 8 bits per number) made one: rounded, up or down."""
    got = float(np.asarray(answer["kv_cache_bytes"], dtype=np.float64).ravel()[0])
    want = float(ref_cache_bytes(**inputs))
    return want != round(want) and got in (np.floor(want), np.ceil(want))


def empty_cache(inputs: dict) -> dict:
    """An edge trial: no token cached yet (n = 0), which takes no bytes at all: a count that never goes below one
    token (`max(n, 1)`, or one token's bytes added to those of n − 1) shows."""
    return {**inputs, "n": 0}


def _wrapped(answer, inputs) -> bool:
    """A count off by a multiple of 2**32: a product in 32-bit integers that wrapped around."""
    got = float(np.asarray(answer["kv_cache_bytes"], dtype=np.float64).ravel()[0])
    want = float(ref_cache_bytes(**inputs))
    return got != want and got == round(got) and (got - want) % 2**32 == 0


def _in_kibibytes(ex, trials, record) -> str | None:
    """The bytes divided by 1024, exactly or rounded down (``// 1024``): KiB, on every trial, one of them at least a
    KiB (below one, 0 is what any count that comes out 0 gives)."""
    big = False
    for answer, inputs in trials:
        got = float(np.asarray(answer["kv_cache_bytes"], dtype=np.float64).ravel()[0])
        want = float(ref_cache_bytes(**inputs))
        if abs(got - want / 2**10) >= 1:
            return None
        big = big or want >= 2**10
    return ex.hint("cache_in_kibibytes") if big else None


# --- hints in this notebook's words -----------------------------------------------------------

NARROW_MASK_HINT = ("(Your mask is made from the longest length ({how}): it is narrower than the keys when every "
                    "source of a batch is padded, as in a batch padded to a fixed length. Make it as wide as the key "
                    "axis, k.shape[-2].)")
DECODER_WIDTH_HINT = ("(Your mask has n_q = {n_q} columns, the decoder's length, where the scores have n_k = {n_k}, "
                      "one per source token: the padding lives on the keys' axis, so make the mask as wide as "
                      "k.shape[-2].)")
_TORCH_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton "
                          r"dimension (\d+)")
_TF_SHAPES = re.compile(r"\[(\d+(?:,\s*\d+)*)\]")


def mask_width_hint(message: str, inputs: dict | None, how: dict) -> str | None:
    """What a size mismatch in the padded cross-attention comes from, when the code or the sizes say it: a mask
    as wide as the longest length (the code takes ``lengths.max()``, or ``tf.sequence_mask`` without
    ``maxlen``), or as wide as the decoder's n_q (the sizes in the error are n_q against n_k, on the keys'
    axis). Nothing otherwise: the error's own line says the rest."""
    if how.get("max_of_lengths") or how.get("sequence_mask_without_maxlen"):
        return NARROW_MASK_HINT.format(how="enc_lengths.max()" if how.get("max_of_lengths")
                                       else "tf.sequence_mask without maxlen")
    if inputs is None:
        return None
    n_q, n_k = np.shape(inputs["q"])[-2], np.shape(inputs["k"])[-2]
    if (m := _TORCH_SIZES.search(message)) and {int(m[1]), int(m[2])} == {n_q, n_k} and \
            int(m[3]) == len(np.shape(inputs["q"])) - 1:
        return DECODER_WIDTH_HINT.format(n_q=n_q, n_k=n_k)
    shapes = [[int(x) for x in g.split(",")] for g in _TF_SHAPES.findall(message)]
    lasts = [shape[-1] for shape in shapes if len(shape) == len(np.shape(inputs["q"]))]
    if n_q in lasts and n_k in lasts:
        return DECODER_WIDTH_HINT.format(n_q=n_q, n_k=n_k)
    return None

def heads_axis_hint(message: str, inputs: dict | None, how: dict) -> str | None:
    """What an error on the trial with a heads axis, (1, heads, …, d), may come from: axes numbered from the front
    (``transpose(1, 2)``, right for (batch, n, d) only). Nothing on other trials."""
    if inputs is None or len(np.shape(inputs["k"])) != 4:
        return None
    return ("(It raised on inputs with a heads axis, (batch, heads, tokens, d), as a model's layers call it. Axes "
            "numbered from the front, such as transpose(1, 2), are the heads and the tokens there: number the last "
            "two from the end, transpose(-2, -1).)")


SCALE_HINT = ("Your scores were not divided by √d_k. Divide them by the square root of the key size "
              "(k.shape[-1]) before the softmax.")
LIBRARY_HINT = ("Your function calls a library's attention (`scaled_dot_product_attention` or a multi-head attention "
                "layer). The TO-DO asks you to write {what} yourself, from matrix products{mask} and a softmax.")
CROSS_HINTS = {
    "softmax_wrong_axis:dim0": "Your softmax runs over dim 0: with a batch axis in front, (batch, n_q, n_k), that is "
    "the batch, and each score is normalised across the sentences (for one sentence's (n_q, n_k) scores, the "
    "decoder's tokens). Normalise over the last axis, the keys: dim=-1.",
    "softmax_wrong_axis:implicit": "Your softmax was given no dim. For 3-D scores, a batch of sentences, torch then "
    "takes dim 0, the batch, and normalises each score across the sentences (for one sentence's 2-D scores it takes "
    "the last axis, which is why it looked right there). Say which axis: dim=-1, the keys.",
    "projection_reused:keys_from_query": "Your keys are made with w_query (`x_enc @ w_query`). Each of the three "
    "has its own matrix: keys are the source tokens times w_key.",
    "softmax_wrong_axis:dim1": "Your softmax runs over axis 1: the keys' axis of one sentence's (n_q, n_k) scores, "
    "but with a batch axis in front, (batch, n_q, n_k), axis 1 is the decoder's tokens. Normalise over the last "
    "axis, the keys, whatever comes before it: dim=-1.",
    "not_as_asked:library_attention": LIBRARY_HINT.format(what="cross-attention", mask=""),
    "missing_scale": "Your scores were not divided by √d_k. Divide them by the square root of the size of one "
    "key (w_key.shape[1]) before the softmax.",
    "scale_by_d_model": "You divided the scores by √d_model, the width of the input vectors. The scores are dot "
    "products of queries and keys of size d_k = w_key.shape[1]: divide by √d_k.",
    "softmax_wrong_axis": "Your softmax normalised each column (over the decoder's tokens). Each decoder token's "
    "row of weights over the encoder's tokens must sum to 1: softmax over the last axis (dim=-1).",
    "swapped_projections": "Your outputs mix the keys, not the values: the weights multiply x_enc @ w_key (values "
    "made with w_key, or the keys themselves in the last product). The keys come from x_enc @ w_key, the values "
    "from x_enc @ w_value, and the weights multiply the values.",
}
PADDED_HINTS = {
    "swapped_projections": "Your weights mix the keys, not the values: each output is a weighted sum of the "
    "values (`weights @ v`). The keys only decide the weights.",
    "not_as_asked:library_attention": LIBRARY_HINT.format(what="it", mask=", the padding mask"),
    "missing_scale": SCALE_HINT,
    "missing_padding_mask": "The encoder's padded keys are not hidden, so the decoder's tokens attend to <pad>. "
    "Hide the scores of the keys at positions ≥ enc_lengths[b] before the softmax.",
    "padding_mask_off_by_one": "Your mask shows one padded key to every query of a padded sentence: positions "
    "count from 0, so key j of sentence b is real when j < enc_lengths[b] (not ≤).",
    "softmax_wrong_axis": "Your softmax normalised each column (over the decoder's tokens). Each decoder token's "
    "row of weights over the encoder's tokens must sum to 1: softmax over the last axis.",
    "mask_after_softmax": "The padded keys still take part in the softmax: their weights were zeroed after it, or "
    "their values set to 0 (the same numbers: weight · 0), so each row's weights on the real tokens sum to less "
    "than 1. Hide the padded keys' scores (−∞) before the softmax.",
}
TF_PADDED_HINTS = {
    "swapped_projections": "Your weights mix the keys, not the values: each output is a weighted sum of the "
    "values (`weights @ v`). The keys only decide the weights.",
    **PADDED_HINTS,
    "not_as_asked:library_attention": "Your function calls a library's attention (`dot_product_attention`, "
    "`MultiHeadAttention` or `scaled_dot_product_attention`). The TO-DO asks you to write the TensorFlow twin "
    "yourself, with tf operations: a matrix product, the padding mask and a softmax.",
    "padding_mask_inverted": "Your mask hides the real encoder tokens and keeps the padding (a full sentence is "
    "left with nothing: NaN). In tf.where(condition, scores, −∞) the condition is what is kept: key j is real "
    "when j < enc_lengths[b].",
    "cross_causal_mask": "Cross-attention needs no causal mask: every decoder token may look at every real "
    "encoder token. Keep only the padding test in your tf.where condition.",
}
CACHED_HINTS = {
    "missing_causal_mask:cached": "Your function hides the future only when nothing is cached (as many keys as "
    "queries); once keys are cached it hides nothing, so each new query sees the new tokens after it too. The mask "
    "is needed whatever the cache holds: new query i sits at position t + i and sees keys j ≤ t + i, the whole "
    "cache and the new ones up to itself.",
    "mask_wrong_triangle": "Your mask shows the cache but takes the upper triangle of the new queries' own block "
    "(`triu` where `tril` belongs): new query i then sees its own key and the later new ones, the future, and not the "
    "earlier new ones. New query i sits at position t + i: it sees the whole cache and new keys 0 … i, the lower "
    "triangle.",
    "not_as_asked:library_attention": LIBRARY_HINT.format(what="it", mask=", the mask of the new queries") + " "
    "Finding that mask is the step (the library's own mask for it comes right after).",
    "not_as_asked:not_with": "Your function takes the mask from the library ({names}): finding which cached keys each "
    "new query may see is the step. Build it yourself from the positions: query i of the m new ones sits at position "
    "t + i and sees the keys at positions up to that.",
    "missing_scale": SCALE_HINT,
    "causal_mask_inverted": "Your mask is the wrong way round: it hides what each new query may see (the keys "
    "j ≤ t + i, itself included) and shows the keys after it. In masked_fill, True means 'hide': pass the keys "
    "after each query, not the ones it may see.",
    "missing_causal_mask": "Your new queries see the new keys after them. With several new tokens at once, new "
    "query i is at position t + i (t = the number of keys cached before): hide the keys j > t + i.",
    "softmax_wrong_axis": "Your softmax normalised each column (over the new queries). Each query's row of "
    "weights over the keys must sum to 1: softmax over the last axis (dim=-1).",
}
DECODE_HINTS = {
    "projection_reused:value_with_key": "Your cached values are made with w_key (a line copied from the keys' "
    "without changing its matrix): each new token's value is (x_seq[t] + pos_table[t]) @ w_value.",
    "projection_reused:key_with_query": "Your cached keys are made with w_query (a line copied from the query's "
    "without changing its matrix): each new token's key is (x_seq[t] + pos_table[t]) @ w_key.",
    "projected_ahead:query": "Your numbers are right, but your loop starts from the queries of the whole sequence, "
    "projected before any token was fed in: a decoder does not have the later tokens yet. Inside the loop, make "
    "each token's query from the token that has just arrived, x_seq[t] + pos_table[t], as you do its key and value.",
    "positions_not_added:keys": "Your cached keys are made from the tokens alone, without their position "
    "embeddings (the query has its own): each new token's key must come from the same x + pos row as its query, "
    "(x_seq[t] + pos_table[t]) @ w_key, before it goes into the cache.",
    "positions_not_added:values": "Your cached values are made from the tokens alone, without their position "
    "embeddings: each new token's value must come from the same x + pos row as its query and key, "
    "(x_seq[t] + pos_table[t]) @ w_value, before it goes into the cache.",
    "positions_from_one": "Every token gets the position after its own: t + 1 instead of t (positions counted "
    "from 1, or the cache's length read after appending to it). Token t is at position t, the number of tokens "
    "in the cache before it is added: its position embedding is row t of pos_table.",
    "positions_not_added": "Your tokens enter the layer without their position embedding, so the layer cannot "
    "tell where each one stands. Add row t of pos_table to token t's vector before projecting it.",
    "missing_scale": "Your scores were not divided by √d_k. Divide each token's scores by the square root of the "
    "key size (d_k) before the softmax.",
    "cache_mask_off_by_one": "Each token misses its own key, and the first token has no key at all (NaN): the "
    "mask in your cached_attention is one off (check 09.cached_attention). A single new token sees the whole "
    "cache, itself included.",
    "cache_remasked": "Each token sees the first token's key only: a causal mask counted from 0 (a hand-made "
    "one, or is_causal=True, in your loop or in your cached_attention: see 09.cached_attention) hides the cached "
    "keys, which all lie in the past. A single new token may see the whole cache, itself included.",
    "not_computed_with": "Your cell never calls your `cached_attention`: the TO-DO asks for each token's output "
    "computed with it, the new query attending over what the cache holds. A library's attention (or the product "
    "written out again) gives the same numbers here, but it is not the step: let your cached_attention compute each "
    "token's output.",
    "copied_answer": "Your loop reads what was computed for the whole sequence at once (`queries`, `keys`, "
    "`values` or `full_out`). When a model writes text, token t + 1 does not exist yet while token t is "
    "processed: compute each token's query, key and value from x_seq[t] and pos_table[t] in the loop, and keep "
    "the keys and values in your own cache.",
}


def _two_sizes(q_name: str, k_name: str, q_words: str, k_words: str,
               v_name: str | None = None) -> Callable[[dict], dict]:
    """The sizes of a query and a key array other than their widths: their lengths, and the batch when there is one
    (and ``v_name``'s width, d_v, where the step is handed the values themselves)."""
    def sizes(i: dict) -> dict:
        q, k = np.asarray(i[q_name]), np.asarray(i[k_name])
        out = {f"n_q, {q_words} ({q_name}.shape[-2])": q.shape[-2], f"n_k, {k_words} ({k_name}.shape[-2])": k.shape[-2]}
        if q.ndim == 3:
            out[f"the batch size ({q_name}.shape[0])"] = q.shape[0]
        if v_name is not None and v_name in i:
            out[f"d_v, the width of one value ({v_name}.shape[-1])"] = np.asarray(i[v_name]).shape[-1]
        return out
    return sizes


# scores divided by the square root of another size than d_k: which one (scale_by_other_size)
CROSS_OTHER_SCALE = other_scale(lambda i, scale: _cross(**i, scale=scale),
                                _two_sizes("x_dec", "x_enc", "the number of decoder tokens",
                                           "the number of encoder tokens"),
                                width="the width of one key (w_key.shape[-1], k.shape[-1])")
PADDED_OTHER_SCALE = other_scale(lambda i, scale: _padded(**i, scale=scale),
                                 _two_sizes("q", "k", "the number of queries", "the number of keys", "v"))
CACHED_OTHER_SCALE = other_scale(lambda i, scale: _cached(**i, scale=scale),
                                 _two_sizes("q", "k", "the number of new queries", "the number of keys", "v"))


def _exercises() -> list[Exercise]:
    common = {"notebook": NOTEBOOK, "kind": "function"}
    torch_ = {**common, "framework": "torch"}
    padded = {"inputs": padded_inputs, "reference": ref_padded, "mistakes": PADDED_MISTAKES,
              # and scores up to 200 in the first sentence: a softmax without each row's maximum fails
              "edge": (loud_padding, _louder("q", _qk), _one_source_token, _real_zero_key,
                       _past_limit("q", _qk, quiet_padding=True), _other_lengths, _long_sources, _far_below_padded,
                       # and every length the same, and a batch of one: a mask skipped there ("no padding") shows
                       _equal_lengths, _one_padded_sentence,
                       _fill_far(_padded_seen),  # and −1e6 against padding at 0: a fill of −1e4 shows
                       # and scores of about 1e-6: a fill relative to the scores (−100 · max |s|) is about 0
                       scaled_by("q", 2.0**-20)),
              "signs": {"padding_penalty_on_real_keys": _penalty_on_real_keys,
                        "padding_from_zero_keys": _zero_keys_hidden,
                        "padding_masked_late": _padding_masked_late,
                        "unstable_softmax": overflow_sign(ref_padded, _scores_of(_visible_padded), 88.0),
                        "global_max_subtraction": global_shift_sign(ref_padded, _scores_of(_visible_padded), 87.0),
                        "mask_fill_too_small": _fill_leaks(_padded_seen, ref_padded)},
              "explains": scale_explains(PADDED_OTHER_SCALE),
              "raised_hints": ((r"must match the size of tensor|must be broadcastable|Incompatible shapes",
                                mask_width_hint),)}
    # "write …" (the TO-DOs say it in so many words): the library's fused attention is not the step; the
    # results feed a model that is trained, so they keep their gradient
    # float32 in, float32 out (the model's tensors): a float64 result (a .double(), a cast) is a mistake, as in 06
    # and atol 5e-5: float32 rounding of their loud trials' scores (40 to 200) reaches outputs near 0 as up to ~4e-5,
    # which rejected a right answer on about 1 draw in 75 (cross) and 1 in 200 (padded, cached) at the default 1e-6
    own = {"how": {"library_attention": False}, "keeps_grad": True, "dtype": "float32", "atol": 5e-5}
    return [
        Exercise("09.cross_attention", title="Cross-attention", answers=("cross_attention",), inputs=cross_inputs,
                 reference=ref_cross, mistakes=CROSS_MISTAKES, hints=CROSS_HINTS,
                 # and values 64 times larger (outputs of about 50): outputs clamped to a "safe" range show
                 # and scores up to 200 in the first sentence: a softmax without each row's maximum fails; and a
                 # source of 40 tokens: a top-k of the keys shows
                 edge=(batch_of_one("x_dec", "x_enc"), _louder("w_query", _cross_scores),
                       _without_batch("x_dec", "x_enc"), scaled_by("w_value", 64.0),
                       _past_limit("x_dec", _cross_scores), _zero_source_token, _far_below_cross, _long_source,
                       _square_cross,  # and a source as long as the prefix: a causal mask there shows
                       _late_loud_key,  # and 600 keys, the last the loudest: blocks of keys not rescaled show
                       one_row("x_enc")),  # and a source of one token: a shortcut that returns its value once shows
                 signs={"unstable_softmax": overflow_sign(ref_cross, _scores_of(_cross_scores), 88.0),
                        "global_max_subtraction": global_shift_sign(ref_cross, _scores_of(_cross_scores), 87.0)},
                 explains=scale_explains(CROSS_OTHER_SCALE), **own, **torch_),
        Exercise("09.padded_cross_attention", title="Cross-attention over a padded batch of sources",
                 answers=("padded_cross_attention",), hints=PADDED_HINTS, **own, **padded, **torch_),
        Exercise("09.cached_attention", title="Attention of the newest queries over a cache",
                 answers=("cached_attention",), inputs=cached_inputs, reference=ref_cached,
                 mistakes=CACHED_MISTAKES, hints=CACHED_HINTS,
                 signs={"mask_by_value": _cached_by_value, "future_masked_late": future_masked_late(ref_cached),
                        "unstable_softmax": overflow_sign(ref_cached, _scores_of(_visible_cached), 88.0),
                        "global_max_subtraction": global_shift_sign(ref_cached, _scores_of(_visible_cached), 87.0),
                        "mask_fill_too_small": _fill_leaks(_cached_seen, ref_cached)},
                 # one new query, as decoding calls it: the answer keeps its query axis, (…, 1, d_v), not squeezed;
                 # scores of 40: clamped scores show
                 # a heads axis and a key of zeros: a transpose(1, 2) and a mask by value show
                 # and a new token's next key far louder than its own: the future hidden after the softmax shows
                 # and scores up to 200 in the first sentence: a softmax without each row's maximum fails; and a
                 # query whose visible scores all lie at -115 or below: a finite fill above them shows
                 # and scores of about 1e-6: a fill relative to the scores (−100 · max |s|) is about 0
                 edge=(_one_query, _louder("q", _qk), _heads_and_zero_key, _without_batch("q", "k", "v"),
                       scaled_by("q", 2.0**-20),
                       loud_future, _past_limit("q", _qk, last_row=True), _far_below_first_query, _long_cache,
                       _prefill,  # and nothing cached yet: a mask skipped when t = 0 shows
                       _fill_far(_cached_seen)),  # and −1e6 against the future at 0: a fill of −1e4 shows
                 not_with=("causal_lower_right", "causal_upper_left", "CausalBias",  # the mask is the step
                           "generate_square_subsequent_mask"),
                 raised_hints=((r"must match the size of tensor|must be broadcastable|size mismatch|cannot be "
                                r"multiplied", heads_axis_hint),),
                 explains=scale_explains(CACHED_OTHER_SCALE), **own, **torch_),
        Exercise(
            "09.decode",
            notebook=NOTEBOOK,
            title="Decoding one token at a time with a KV cache",
            answers=("decoded",),
            inputs=decode_inputs,
            reference=ref_decode,
            reads=DECODE_READS,
            mistakes=DECODE_MISTAKES,
            hints=DECODE_HINTS,
            framework="torch",
            atol=1e-5,
            points=2,
            budgets=DECODE_BUDGETS,
            edge=one_wide,  # keys and values one number wide: a result squeezed loses their axis
            computed_with=("cached_attention",),  # "computed with your cached_attention"
        ),
        Exercise("09.kv_cache_bytes", title="The size of a KV cache", answers=("kv_cache_bytes",),
                 inputs=cache_bytes_inputs, reference=ref_cache_bytes, mistakes=CACHE_BYTES_MISTAKES,
                 # relative: an answer in MiB is a small number; and to 1e-12, as float64 holds a count of bytes
                 # exactly (a total rounded to ten significant digits is 1e-10 off)
                 rtol=1e-12, atol=0.0,
                 framework="python",  # "a number out": not a tensor, nor a float32 (inexact above 2**24)
                 edge=(large_cache, empty_cache, four_bit_cache, one_token, quarter_bytes, fractional_bits,
                       many_digits, odd_sizes, byte_and_a_quarter, past_a_million, seven_decimals),
                 signs={"integer_overflow": _wrapped, "wrong_dtype": _float32_rounded, "rounded_answer": _whole_bytes},
                 hints={"wrong_dtype": "Your count is a few parts in a hundred million off: somewhere it was rounded "
                        "to 7 or 8 significant digits, as float32 does (a tensor of the sizes, its `.prod()`: its 24 "
                        "bits hold whole numbers exactly only up to 2**24, about 16.7 million), or a rounding of "
                        "your own (a `decimal` context, a format). Multiply Python numbers (or int64): they stay "
                        "exact.",
                        "rounded_answer": "Your count is the right one made a whole number of bytes (rounded, up or "
                        "down, or cut by `int(...)` or `//`). With fewer than 8 bits per number (bytes_per_number "
                        "below 1, or 1.25), the total need not be whole: return it as it comes out."},
                 explains={"cache_in_kibibytes": _in_kibibytes}, **common),
        Exercise("09.tf_padded_cross_attention", title="Cross-attention over a padded batch in TensorFlow",
                 answers=("tf_padded_cross_attention",), hints=TF_PADDED_HINTS, **padded, **common,
                 framework="tensorflow", how={"library_attention": False}, dtype="float32", atol=5e-5,
                 native=native_tf_padded,
                 keeps_grad=True,  # "with TensorFlow operations": q, k and v reach the result (tf.GradientTape)
                 # the PyTorch function above, run and wrapped in a TensorFlow tensor, is not the TensorFlow version
                 not_with=("torch", "F", "padded_cross_attention", "cross_attention")),
    ]


register(*_exercises())
