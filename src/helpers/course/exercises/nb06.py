"""Notebook 06 — masks, dropout and multi-head attention (beyond the seeds), PyTorch and TensorFlow.

Most exercises here are functions, checked on the notebook's example and on fresh random
inputs whose shapes change from trial to trial. The examples are made with NumPy's seeded
generator exactly as the notebook makes them, so trial 0 is the example the student sees.
Masks are built from shapes and lengths inside the functions, so no input is boolean.

The last PyTorch step is a value step: the student's cell defines one module (causal mask
buffer, padding mask, dropout, output projection), loads the notebook's weights into it and
runs it in evaluation and in training mode on a batch with a given dropout draw. Its cell is
replayed on fresh worlds (:func:`world`), and both outputs are compared, so a module that
drops weights in evaluation mode, or forgets to in training mode, shows on every draw.
"""

from __future__ import annotations

import numpy as np

from ..reference import softmax
from ..roles import ROLES, mix_ups
from ..scales import matches, other_scale, scale_explains
from ..spec import (
    Exercise,
    Probe,
    batch_of_one,
    far_louder_future,
    future_masked_late,
    long_batch,
    loud_future,
    only_first_token_off,
    register,
    scaled_by,
    upstream_of,
)

NOTEBOOK = "06_masks_dropout_multihead"

# --- the notebook's examples (same generator calls as in the notebook) ------------------

SEQ_LEN, D_K = 5, 4  # "the cat sat on mats", 4-d queries/keys/values
LENGTHS = np.array([5, 3])  # a batch of two sentences, the second padded by two
D_MODEL, NUM_HEADS = 6, 2
P_DROP = 0.2  # the module's dropout probability in the notebook
MAX_LEN = 8  # the module's causal buffer is MAX_LEN × MAX_LEN


def causal_example() -> dict:
    q, k, v = np.random.default_rng(6).normal(size=(3, SEQ_LEN, D_K)).round(1)
    return {"q": q, "k": k, "v": v}


def padded_example() -> dict:
    q, k, v = np.random.default_rng(7).normal(size=(3, 2, SEQ_LEN, D_K)).round(1)
    for a in (q, k, v):
        a[1, LENGTHS[1]:] = 0.0  # the padding vectors of sentence 2 are zeros
    return {"q": q, "k": k, "v": v, "lengths": LENGTHS.copy()}


def dropout_example() -> dict:
    weights = softmax(causal_scores(**causal_example()))
    keep = (np.random.default_rng(8).random(weights.shape) >= 0.5).astype(np.float64)
    return {"weights": weights, "keep": keep, "p": 0.5}


def heads_example() -> dict:
    """Token t, feature f holds 10·t + f, so every number says where it came from."""
    t, f = np.meshgrid(np.arange(4), np.arange(D_MODEL), indexing="ij")
    return {"x": (10.0 * t + f)[None], "num_heads": NUM_HEADS}


def mha_example() -> dict:
    rng = np.random.default_rng(9)
    x = rng.normal(size=(2, 4, D_MODEL)).round(1)
    w_query, w_key, w_value, w_out = (rng.normal(size=(4, D_MODEL, D_MODEL)) / np.sqrt(D_MODEL)).round(2)
    return {"x": x, "w_query": w_query, "w_key": w_key, "w_value": w_value, "w_out": w_out, "num_heads": NUM_HEADS}


def module_example() -> dict:
    """Part 5's batch: two sentences of 5 and 3 tokens (zero padding), and one dropout draw."""
    x_pad = np.random.default_rng(10).normal(size=(2, SEQ_LEN, D_MODEL)).round(1)
    x_pad[1, LENGTHS[1]:] = 0.0
    keep = (np.random.default_rng(11).random((2, NUM_HEADS, SEQ_LEN, SEQ_LEN)) >= P_DROP).astype(np.float64)
    return {"x_pad": x_pad, "lengths_pad": LENGTHS.copy(), "p_drop": P_DROP, "keep_draw": keep}


# --- random inputs: shapes move so that hard-coded sizes fail ---------------------------


def _qkv(rng, batch: tuple = ()) -> dict:
    # never the example's sizes: a function that reads the notebook's 5 × 5 mask (or its d_k) must fail here
    # values of another width than the keys (d_v ≠ d_k): a scale read off v, or an output shaped like q, shows
    n, d = int(rng.choice([3, 4, 6, 7])), int(rng.choice([2, 3, 5]))
    d_v = int(rng.choice([w for w in (2, 3, 5, 6) if w != d]))
    q, k = rng.normal(size=(2, *batch, n, d))
    v = rng.normal(size=(*batch, n, d_v))
    return {"q": q, "k": k, "v": v}


def signed_weights(inputs: dict) -> dict:
    """An edge trial: the first row of weights negated: dropout drops and rescales whatever it is given, as
    nn.Dropout does; one that acts only where a weight is above 0 shows. (A whole row of one sign: its kept
    weights never sum to 0, so a version that renormalises them stays finite and is named.)"""
    w = np.array(inputs["weights"], dtype=np.float64)
    w[0] = -w[0]
    return {**inputs, "weights": w}


def causal_inputs(rng=None) -> dict:
    if rng is None:
        return causal_example()
    return _qkv(rng, (int(rng.integers(1, 3)),))  # with a batch axis: (batch, seq, d)


def _last_query_apart(q: np.ndarray) -> np.ndarray:
    """The last query of ``q`` made of unit length and every other one orthogonal to it, in place: a key along it
    then scores with the last query alone. Returns that unit query (…, 1, d)."""
    last = q[..., -1:, :] / np.sqrt(np.sum(q[..., -1:, :] ** 2, axis=-1, keepdims=True))
    q[..., -1:, :] = last
    q[..., :-1, :] -= (q[..., :-1, :] * last).sum(-1, keepdims=True) * last
    return last


def causal_edge(inputs: dict) -> dict:
    """A draw moved to the edges a causal mask must survive. The first key scores exactly 0 with every query (a mask
    applied by value, ``scores == 0``, hides it, and the first query sees nothing else); the last key scores 800 with
    the last query, which sees it (a softmax without its maximum overflows). The other queries are made orthogonal
    to the last one, so that the last key scores 0 with them: no hidden score is huge (a softmax over every key,
    renormalised after the future is zeroed, stays exact, as the notebook shows). The values are 25 times larger."""
    out = dict(inputs)
    q, k = np.array(inputs["q"], dtype=float), np.array(inputs["k"], dtype=float)
    # the last query of unit length: the last key then has entries of at most 800·√d, and a query orthogonal to it
    # scores about 0 in float32 as well (a short last query would make that key huge, and those scores noise)
    last = _last_query_apart(q)
    k[..., 0, :] = 0.0
    k[..., -1, :] = (EDGE_SCORE * np.sqrt(q.shape[-1]) * last)[..., 0, :]
    # values far larger than the other trials' (up to about ±60): outputs clamped to a "safe" range show
    out["q"], out["k"], out["v"] = q, k, np.asarray(inputs["v"], dtype=float) * 25.0
    return out


def loud_pair(inputs: dict) -> dict:
    """A draw whose last query scores 80 with the last key and 72 with the one before it, both of which it sees (the
    other queries made orthogonal to it, so they score 0 with both): scores clamped to a "safe" range (±50, say)
    tie the two and give each half the weight, where the right weights are 0.9997 and 0.0003. exp(80) still fits in
    float32, so nothing overflows."""
    out = dict(inputs)
    q, k = np.array(inputs["q"], dtype=float), np.array(inputs["k"], dtype=float)
    if q.shape[-2] < 2:
        return out
    last = _last_query_apart(q)
    k[..., -1, :] = (80.0 * np.sqrt(q.shape[-1]) * last)[..., 0, :]
    k[..., -2, :] = (72.0 * np.sqrt(q.shape[-1]) * last)[..., 0, :]
    out["q"], out["k"] = q, k
    # values of one sign, 1 and more: scores this large carry float32 rounding of about 1e-5 into the weights, which
    # outputs that cancel to near 0 would turn into differences far above the tolerance (a right answer rejected on
    # about one draw in 400)
    out["v"] = np.abs(np.asarray(inputs["v"], dtype=float)) + 1.0
    return out


def loud_past(inputs: dict) -> dict:
    """A draw whose last query scores 200 with the first key, which it sees, and 0 with its own (the other queries
    made orthogonal to it, so they score 0 with the first key): a softmax shifted by each query's own score (the
    diagonal, "always visible") instead of its row's maximum overflows there, inf / inf. Values of one sign, 1 and
    more (see :func:`loud_pair`)."""
    out = dict(inputs)
    q, k = np.array(inputs["q"], dtype=float), np.array(inputs["k"], dtype=float)
    if q.shape[-2] < 2:
        return out
    last = _last_query_apart(q)
    k[..., -1:, :] -= (k[..., -1:, :] * last).sum(-1, keepdims=True) * last  # its own key: a score of 0
    k[..., 0, :] = (200.0 * np.sqrt(q.shape[-1]) * last)[..., 0, :]
    out["q"], out["k"] = q, k
    out["v"] = np.abs(np.asarray(inputs["v"], dtype=float)) + 1.0
    return out


def many_sentences(first: dict) -> dict:
    """An edge trial from the first random one: a batch of 8 sentences of 3 tokens (more sentences than tokens; the
    other trials have one or two sentences of 3 to 7): a sequence length taken from the wrong axis (the longest one
    in front of the features, `max(q.shape[:-1])`) shows. From a generator seeded by the first trial's shapes."""
    q, v = np.asarray(first["q"]), np.asarray(first["v"])
    rng = np.random.default_rng([*q.shape, v.shape[-1], 8])
    d, d_v = q.shape[-1], v.shape[-1]
    return {**first, "q": rng.normal(size=(8, 3, d)), "k": rng.normal(size=(8, 3, d)),
            "v": rng.normal(size=(8, 3, d_v))}


many_sentences.of_first_trial = True


def loud_last_value(first: dict) -> dict:
    """An edge trial from the first random one: the last token's value 10⁷ times larger (every query but the last
    must not see it): a weight of 1e-9 left on the future (weights clipped "to avoid zeros", a mask of −1e9 … in
    float64) moves every earlier output by 0.01 or more."""
    v = np.array(first["v"], dtype=float)
    v[..., -1, :] = 1e7 * np.where(v[..., -1, :] < 0, -1.0, 1.0)
    return {**first, "v": v}


loud_last_value.of_first_trial = True


def long_sequence(first: dict) -> dict:
    """An edge trial from the first random one: the same batch and widths, 600 tokens (the other trials have at most
    7, the notebook 6): a mask made once for a fixed length and cut to the sequence (`…[:seq, :seq]` of a 16 × 16
    mask), positions kept in int8 (which wraps at 128), and a sliding window of 256 or 512 keys (Mistral's habit,
    the same as causal attention on shorter sequences) show. From a generator seeded by the first trial's shapes."""
    q, v = np.asarray(first["q"]), np.asarray(first["v"])
    rng = np.random.default_rng([*q.shape, v.shape[-1], 33])
    batch, n = q.shape[:-2], 600
    return {**first, "q": rng.normal(size=(*batch, n, q.shape[-1])), "k": rng.normal(size=(*batch, n, q.shape[-1])),
            "v": rng.normal(size=(*batch, n, v.shape[-1]))}


long_sequence.of_first_trial = True


EDGE_SCORE = 800.0  # above exp's limit in float64 (709) as in float32 (88)


FAR_BELOW = -1100.0  # every score of one query: below a finite fill of −100 or −1e3, far above −1e9 and finfo.min;
# near enough to 0 that float32 keeps 4 digits after the point there: a softmax written exp(s − logsumexp(s)) stays
# within 1e-4 of the exact weights (at −5000 it did not)


def _far_row(q) -> int:
    """The query :func:`far_below` moves: the second last (in a causal mask it has one hidden key, the last)."""
    return q.shape[-2] - 2


def far_below(inputs: dict) -> dict:
    """An edge trial: one query (the second last) scores exactly FAR_BELOW with every key, hidden or not. Every key
    gets 1 as its first entry and that query is FAR_BELOW·√d_k (−1100·√d_k) on its first axis and 0 elsewhere, so its
    scores are all the same number, exactly: its row of weights is uniform over the keys it may see. A mask that fills
    hidden scores with a finite number above FAR_BELOW (−100, −1e3) gives the hidden keys that row's weight instead;
    −∞, −1e9, the dtype's lowest, a fill added to the scores, and a softmax renormalised after zeroing all stay
    exact."""
    q, k = np.array(inputs["q"], dtype=float), np.array(inputs["k"], dtype=float)
    row = _far_row(q)
    q[..., row, :] = 0.0
    q[..., row, 0] = FAR_BELOW * np.sqrt(q.shape[-1])
    k[..., 0] = 1.0
    return {**inputs, "q": q, "k": k}


FIRST_FAR = -1e6  # every score of the first query (:func:`first_far`): below the finite fills of −1e4 and −1e5 that
# float16-minded code writes, far above −1e9 and finfo.min


def first_far(inputs: dict) -> dict:
    """An edge trial of causal attention: the first query scores exactly FIRST_FAR (−10⁶) with every key, as
    :func:`far_below` builds it. It sees one key, its own, whose weight is exactly 1 however the softmax is computed
    (a log-sum-exp of one finite score is that score); a mask that fills hidden scores with a finite number above
    −10⁶ (−1e4, −1e5) gives the hidden keys that weight instead."""
    q, k = np.array(inputs["q"], dtype=float), np.array(inputs["k"], dtype=float)
    q[..., 0, :] = 0.0
    q[..., 0, 0] = FIRST_FAR * np.sqrt(q.shape[-1])
    k[..., 0] = 1.0
    return {**inputs, "q": q, "k": k}


def one_real_key_far(inputs: dict) -> dict:
    """An edge trial of padded attention: every sentence one real token long, and each sentence's first query at
    FIRST_FAR (−10⁶) with every key, as :func:`first_far` builds it: its one real key takes all its weight, exactly;
    a finite fill above −10⁶ for the padded keys (−1e4) gives them that weight instead."""
    lengths = np.ones_like(np.asarray(inputs["lengths"]))
    return {**first_far(inputs), "lengths": lengths}


def _moved_row(q) -> int | None:
    """The query :func:`far_below` or :func:`first_far` moved on this trial (None: neither)."""
    for row in (_far_row(q), 0):
        if q.shape[-2] > 1 and np.all(q[..., row, 1:] == 0) and np.all(q[..., row, 0] < FAR_BELOW):
            return row
    return None


def _fill_leaks(answer, inputs, allowed, ref) -> bool:
    """On :func:`far_below`'s or :func:`first_far`'s trial: the moved query's output is the mean of the values of
    the keys it must not see (a finite fill above its scores), every other row right."""
    q, v = np.asarray(inputs["q"], dtype=np.float64), np.asarray(inputs["v"], dtype=np.float64)
    row = _moved_row(q)
    if row is None:
        return False
    got = np.asarray(_only(answer), dtype=np.float64)
    hidden = ~np.broadcast_to(allowed, q.shape[:-1] + (v.shape[-2],))[..., row, :]  # (…, keys)
    if got.shape != ref.shape or not hidden.any(-1).all():
        return False
    leak = (hidden[..., :, None] * v).sum(-2) / hidden.sum(-1)[..., None]
    others = np.arange(q.shape[-2]) != row
    return bool(np.allclose(got[..., row, :], leak, rtol=1e-4, atol=1e-5)
                and np.allclose(got[..., others, :], ref[..., others, :], rtol=1e-4, atol=1e-5))


def _causal_fill_leaks(answer, inputs) -> bool:
    q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
    return _fill_leaks(answer, inputs, _lower(q.shape[-2]), ref_causal(q, k, v))


def _zero_keys_hidden(answer, inputs) -> bool:
    """A sign of ``padding_from_zero_keys``: the numbers of a mask that hides the keys of zeros as well as the
    padding, or instead of it (on random trials, whose padding is not zeros, the latter hides nothing; on
    :func:`real_zero_key`'s, both hide a real key)."""
    q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
    lengths = inputs["lengths"]
    got = np.asarray(next(iter(answer.values())), dtype=np.float64)
    wrongs = (_padded(q, k, v, lengths, allowed=allowed)
              for allowed in (key_allowed(lengths, k.shape[-2]) & nonzero_keys(k), nonzero_keys(k)))
    return any(got.shape == wrong.shape and bool(np.allclose(got, wrong, rtol=1e-4, atol=1e-5)) for wrong in wrongs)


# (an answer right where a real key is all zeros has not hidden such keys: a mask skipped for some batches, say, whose
# numbers are those of a mask that finds no key of zeros to hide)
_zero_keys_hidden.shows = lambda inputs: bool((~nonzero_keys(inputs["k"]) & key_allowed(
    inputs["lengths"], np.shape(inputs["k"])[-2])).any())


def _padded_fill_leaks(answer, inputs) -> bool:
    q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
    lengths = inputs["lengths"]
    return _fill_leaks(answer, inputs, key_allowed(lengths, k.shape[-2]), ref_padded(q, k, v, lengths))


def padded_inputs(rng=None) -> dict:
    if rng is None:
        return padded_example()
    b = int(rng.integers(2, 4))
    inp = _qkv(rng, (b,))
    n = inp["q"].shape[-2]
    # every sentence padded: a batch padded to a fixed length (a multiple of 8, the model's maximum) has no
    # sentence that fills it, so a mask as wide as the longest sentence (arange(lengths.max())) shows
    lengths = rng.integers(1, n, size=b)
    inp["lengths"] = lengths
    return inp


def long_padded(first: dict) -> dict:
    """An edge trial from the first random one's widths: two sentences padded to 300 tokens, of 260 and 300 (the
    other trials have at most 7): lengths kept in uint8 or int8 (which wrap at 256 and 128) show. From a generator
    seeded by the first trial's shapes."""
    return long_batch(first, 300, 300, 300, ("lengths", (260, 300)))


long_padded.of_first_trial = True


def same_lengths_wider(first: dict) -> dict:
    """An edge trial from the first random one: the same lengths, every sentence padded 3 tokens longer (queries,
    keys and values): a mask kept from an earlier call by the lengths alone does not fit."""
    rng = np.random.default_rng([*np.shape(first["k"]), 3])
    wider = {}
    for n in ("q", "k", "v"):
        a = np.asarray(first[n], dtype=float)
        wider[n] = np.concatenate([a, rng.normal(size=(*a.shape[:-2], 3, a.shape[-1]))], axis=-2)
    return {**first, **wider}


same_lengths_wider.of_first_trial = True


# scores of about 1e-6: a fill of the hidden scores relative to the scores themselves (−100 · max |s|) is about 0
QUIET_QUERIES = scaled_by("q", 2.0**-20)


def real_zero_key(first: dict) -> dict:
    """An edge trial from the first random one: every sentence's first key (always a real token) all zeros, so it
    scores exactly 0 with every query: a mask that also hides the keys of zeros (as the notebook's padding is) hides
    a real token. Every sentence at least two tokens long (where the batch is that long), so such a mask leaves each
    query a key and its numbers show what it did (one real key hidden: NaN, a cause of its own)."""
    k = np.array(first["k"], dtype=float)
    k[..., 0, :] = 0.0
    lengths = np.maximum(np.asarray(first["lengths"]), min(2, k.shape[-2]))
    return {**first, "k": k, "lengths": lengths}


real_zero_key.of_first_trial = True


def loud_padding(first: dict) -> dict:
    """An edge trial from the first random one: the padding holds garbage that scores far above every real key (the
    queries close to one direction per sentence, the padded keys 400 / |q|² times along it: scores of 100 and more).
    Masked right, the padding gets weight 0 whatever it holds; a softmax over every key with the padding zeroed and
    the rows renormalised afterwards (or a maximum taken over the padding too) underflows every real weight to 0,
    and the row becomes 0/0."""
    q, k = np.asarray(first["q"], dtype=np.float64), np.array(first["k"], dtype=np.float64)
    lengths = np.asarray(first["lengths"])
    rng = np.random.default_rng([*q.shape, k.shape[-2]])
    q0 = rng.normal(size=(q.shape[0], 1, q.shape[-1]))
    q = q0 + 0.1 * rng.normal(size=q.shape)
    for i in range(q.shape[0]):
        k[i, int(lengths[i]):] = 400.0 * q0[i, 0] / float(q0[i, 0] @ q0[i, 0])
    return {**first, "q": q, "k": k}


loud_padding.of_first_trial = True


def high_p(inputs: dict) -> dict:
    """An edge trial: a dropout probability of 0.95, above the other trials' 0.5 at most (a p clamped to 0.5 or
    0.9, a divisor kept at 0.1 or more, or a rule that holds only up to some p, shows)."""
    return {**inputs, "p": 0.95}


def precise_p(inputs: dict) -> dict:
    """An edge trial: a dropout probability of 0.125, with three decimals where the other trials have at most two
    (a p rounded on the way shows)."""
    return {**inputs, "p": 0.125}


def nothing_kept(inputs: dict) -> dict:
    """An edge trial: a keep-mask of zeros, every weight dropped (likely for a small tensor at a large p): the
    answer is all zeros (a draw that drops everything is not a reason to keep everything)."""
    return {**inputs, "keep": np.zeros_like(np.asarray(inputs["keep"], dtype=float))}


def large_scores(inputs: dict) -> dict:
    """An edge trial: the queries scaled so that the largest score of a real key is 300, far above exp's limit in
    float32 (88): a softmax written out without its maximum overflows to inf / inf = NaN."""
    q, k = np.array(inputs["q"], dtype=float), np.asarray(inputs["k"], dtype=float)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    real = np.arange(k.shape[-2]) < np.asarray(inputs["lengths"])[:, None, None]
    top = float(np.abs(np.where(real, s, 0.0)).max()) or 1.0
    # values of one sign, 1 and more: outputs that cancel to near 0 would turn the float32 rounding that scores of 300
    # carry into the weights (a few 1e-5) into differences above the tolerance (a right answer rejected on about one
    # draw in 300)
    return {**inputs, "q": q * (300.0 / top), "v": np.abs(np.asarray(inputs["v"], dtype=float)) + 1.0}


def one_hot_row(inputs: dict) -> dict:
    """The edge trial: the first row of weights all on its first key, and that weight kept, as the first query of
    causal attention has it: kept and rescaled, it is above 1 (a result clamped to 1, "weights are probabilities",
    shows)."""
    weights, keep = np.array(inputs["weights"], dtype=float), np.array(inputs["keep"], dtype=float)
    weights[0] = 0.0
    weights[0, 0] = 1.0
    keep[0, 0] = 1.0
    return {**inputs, "weights": weights, "keep": keep}


def dropout_inputs(rng=None) -> dict:
    if rng is None:
        return dropout_example()
    n = int(rng.integers(3, 7))
    p = float(rng.choice([0.1, 0.25, 0.5]))
    keep = (rng.random((n, n)) >= p).astype(np.float64)
    return {"weights": softmax(rng.normal(size=(n, n))), "keep": keep, "p": p}


def _heads_shape(rng) -> tuple[int, int, int, int]:
    """(batch, sequence, heads, head width) of a fresh draw; the head width is never the example's, so a
    d_head typed in (or read from the notebook) shows on every draw. Never 2 either: with d_head = 2, d_model // 2
    is the number of heads, so two heads typed into d_head (√(d_model // 2)) would look like a scale by √num_heads;
    and at most 5 tokens, below d_model // 2 of three heads (6 or 9), which would look like a scale by √n. Even
    widths only: with three heads of an odd width, two heads typed in make the reshape raise (d_model = 15 is not
    2 × 7) instead of giving the numbers that name them."""
    widths = [w for w in (4, 6) if w != D_MODEL // NUM_HEADS]
    return (int(rng.integers(1, 3)), int(rng.integers(3, 6)), int(rng.integers(2, 4)),
            int(widths[int(rng.integers(len(widths)))]))


def split_inputs(rng=None) -> dict:
    if rng is None:
        return heads_example()
    b, s, h, dh = _heads_shape(rng)
    return {"x": rng.normal(size=(b, s, h * dh)), "num_heads": h}


def merge_inputs(rng=None) -> dict:
    if rng is None:
        return {"x": split_heads(**heads_example())}
    b, s, h, dh = _heads_shape(rng)
    return {"x": rng.normal(size=(b, h, s, dh))}


def _weights(rng, d: int) -> dict:
    w_query, w_key, w_value, w_out = rng.normal(size=(4, d, d)) / np.sqrt(d)
    return {"w_query": w_query, "w_key": w_key, "w_value": w_value, "w_out": w_out}


def mha_inputs(rng=None) -> dict:
    if rng is None:
        return mha_example()
    b, s, h, dh = _heads_shape(rng)
    d = h * dh
    return {"x": rng.normal(size=(b, s, d)), **_weights(rng, d), "num_heads": h}


def loud_head(first: dict) -> dict:
    """An edge trial from the first random one: the first head's query weights scaled so that its largest score (in
    size) is 150, while the other heads' stay a few units. Each row of weights is a softmax of its own: a shift by
    one maximum over the heads (or the batch) leaves the quiet heads' exponentials at e^-150, 0 in float32, and
    their rows 0/0 = NaN; a shift by each row's maximum stays exact."""
    x, wq, wk = (np.asarray(first[n], dtype=np.float64) for n in ("x", "w_query", "w_key"))
    h = int(first["num_heads"])
    dh = wq.shape[1] // h
    q0, k0 = x @ wq[:, :dh], x @ wk[:, :dh]
    s0 = q0 @ np.swapaxes(k0, -1, -2) / np.sqrt(dh)
    peak = float(s0.max()) if s0.max() >= -s0.min() else float(s0.min())  # the largest in size, with its sign
    wq = wq.copy()
    wq[:, :dh] *= 150.0 / (peak or 1.0)  # positive: a query whose first head scores 150 with some key
    return {**first, "w_query": wq}


loud_head.of_first_trial = True


# --- building blocks (NumPy, float64) ----------------------------------------------------


def causal_scores(q, k, v=None, scale=True):
    """q·kᵀ, divided by √d_k (``scale=True``), by d_k (``scale="d"``) or not at all (``scale=False``)."""
    s = q @ np.swapaxes(k, -1, -2)
    if scale == "d":
        return s / k.shape[-1]
    return s / np.sqrt(k.shape[-1]) if scale else s


def _masked_softmax(scores, allowed, how="inf", axis=-1):
    """Softmax of ``scores`` with the positions where ``allowed`` is False hidden, the way ``how`` says."""
    if how == "inf":
        with np.errstate(invalid="ignore"):  # a row with nothing allowed is 0/0: NaN, as in the frameworks
            return softmax(np.where(allowed, scores, -np.inf), axis=axis)
    if how == "zero":
        return softmax(np.where(allowed, scores, 0.0), axis=axis)
    if how == "after":
        return softmax(scores, axis=axis) * allowed
    raise ValueError(how)


def _attend(scores, allowed, v, how="inf", axis=-1):
    """Masked softmax of ``scores`` (``allowed`` True = may attend), times the values."""
    return _masked_softmax(scores, allowed, how, axis) @ v


def _lower(n):
    """(n, n): True where key j ≤ query i (what a causal query may see)."""
    return np.tril(np.ones((n, n), dtype=bool))


def _causal(q, k, v, how="inf", scale=True, allowed=None, axis=-1):
    n = q.shape[-2]
    return _attend(causal_scores(q, k, scale=scale), _lower(n) if allowed is None else allowed, v, how, axis)


def ref_causal(q, k, v):
    return _causal(q, k, v)


CAUSAL_MISTAKES = {
    "mask_after_softmax": lambda q, k, v: _causal(q, k, v, how="after"),
    "mask_wrong_triangle": lambda q, k, v: _causal(q, k, v, allowed=_lower(q.shape[-2]).T),
    "mask_with_zero": lambda q, k, v: _causal(q, k, v, how="zero"),
    "missing_scale": lambda q, k, v: _causal(q, k, v, scale=False),
    "scale_by_d": lambda q, k, v: _causal(q, k, v, scale="d"),
    # the division by √d_k after the softmax (of the weights, or of the outputs: the same numbers)
    "scale_after_softmax": lambda q, k, v: _causal(q, k, v, scale=False) / np.sqrt(q.shape[-1]),
    # axis 1: the keys' axis of the notebook's (seq, seq) scores (right there), the queries' with a batch axis;
    # it is what dim=-2 (or dim=1) gives on every input with a batch axis
    "softmax_wrong_axis": lambda q, k, v: _causal(q, k, v, axis=1),
    # torch.triu(...) without diagonal=1: the diagonal is hidden too, and query 0 sees nothing
    "fully_masked_row": lambda q, k, v: _causal(q, k, v, allowed=np.tril(np.ones((q.shape[-2],) * 2, bool), -1)),
    # the allowed triangle handed to masked_fill: the past and the token itself hidden, the future shown
    "causal_mask_inverted": lambda q, k, v: _causal(q, k, v, allowed=~_lower(q.shape[-2])),
    # triu(…, diagonal=2): the next key shown too
    "causal_mask_sees_next": lambda q, k, v: _causal(q, k, v, allowed=np.tril(np.ones((q.shape[-2],) * 2, bool), 1)),
    "transposed_scores": lambda q, k, v: _attend(causal_scores(k, q), _lower(q.shape[-2]), v),
    "scale_multiplied": lambda q, k, v: _attend(causal_scores(q, k, scale=False) * np.sqrt(k.shape[-1]),
                                                _lower(q.shape[-2]), v),
    "weights_transposed": lambda q, k, v: np.swapaxes(_masked_softmax(causal_scores(q, k), _lower(q.shape[-2])),
                                                      -1, -2) @ v,
}


def _rows_nan_rest_right(got, want, nan_rows) -> bool:
    """Rows ``nan_rows`` of every batch entirely NaN in ``got``, every other row close to ``want``."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return False
    nan = np.zeros(got.shape[-2], bool)
    nan[list(nan_rows)] = True
    return bool(np.isnan(got[..., nan, :]).all() and np.allclose(got[..., ~nan, :], want[..., ~nan, :],
                                                                   rtol=1e-4, atol=1e-5))


def _masked_by_value(answer, inputs) -> bool:
    """The mask applied by value (``tril()`` and then ``scores == 0`` hidden): the first key, which scores exactly 0,
    is hidden from every query, so the first query sees nothing (NaN) and the others lose it."""
    q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
    if not np.all(k[..., 0, :] == 0):
        return False
    allowed = _lower(q.shape[-2]).copy()
    allowed[:, 0] = False
    allowed[0, 0] = True  # row 0 is compared as NaN, not computed
    return _rows_nan_rest_right(_only(answer), _attend(causal_scores(q, k), allowed, v), [0])


def _unshifted(answer, inputs) -> bool:
    """A softmax written out without its maximum: exp(800) overflows in the last row (inf/inf) of
    :func:`causal_edge`'s trial, and exp(200) in that of :func:`loud_past`'s (also when shifted by the row's own,
    diagonal, score), exp(−1100) underflows in the moved row (0/0) of :func:`far_below`'s; the rest is right."""
    q, k, v = (np.asarray(inputs[n], dtype=np.float64) for n in ("q", "k", "v"))
    loud = (q[..., -1, :] * k[..., 0, :]).sum(-1) / np.sqrt(q.shape[-1])  # :func:`loud_past`'s first key: 200
    if np.all(k[..., 0, :] == 0) or (q.shape[-2] > 1 and np.all(loud > 150.0)):
        row = q.shape[-2] - 1
    elif (moved := _moved_row(q)) is not None:
        row = moved
    else:
        return False
    return _rows_nan_rest_right(_only(answer), ref_causal(q, k, v), [row])


def _only(answer):
    (value,) = answer.values()
    return value


def _shifted_by_hidden(answer, inputs) -> bool:
    """A sign of ``global_max_rounding`` in causal attention: the answer is wrong only in rows whose hidden keys score
    2¹⁸ or more above every key the query sees (:func:`spec.far_louder_future`'s trial), where a maximum taken over
    every key and subtracted before the mask leaves float32 only sixteenths of the visible scores; at least one such
    row is wrong, and every other row is right."""
    (got,) = (np.asarray(a, dtype=np.float64) for a in answer.values())
    want = ref_causal(**inputs)
    if got.shape != want.shape or not np.isfinite(got).all():
        return False
    q, k = np.asarray(inputs["q"], dtype=np.float64), np.asarray(inputs["k"], dtype=np.float64)
    s = causal_scores(q, k)
    seen = np.tril(np.ones(s.shape[-2:], dtype=bool), k.shape[-2] - q.shape[-2])
    with np.errstate(invalid="ignore"):
        gap = np.where(seen, -np.inf, s).max(axis=-1) - np.where(seen, s, -np.inf).max(axis=-1)
    wrong = ~np.isclose(got, want, rtol=1e-4, atol=1e-5).all(axis=-1)
    loud = gap >= 2.0**18
    if not wrong.any() or (wrong & ~loud).any():
        return False
    # and each wrong row a mix of the values its query sees (a hidden key that leaks in is another mistake)
    v = np.asarray(inputs["v"], dtype=np.float64)
    if v.ndim != s.ndim:
        return False
    for index in zip(*np.nonzero(wrong)):
        keys_v = v[index[:-1]][seen[index[-1]]]  # the values of the keys this query sees: (visible keys, d_v)
        if keys_v.shape[0] > keys_v.shape[1]:
            return False  # more visible keys than value entries: any row is such a mix
        mix, *_ = np.linalg.lstsq(keys_v.T, got[index], rcond=None)
        if np.abs(keys_v.T @ mix - got[index]).max() > 1e-3 * (np.abs(got[index]).max() + 1e-3) \
                or abs(mix.sum() - 1.0) > 1e-2:
            return False
    return True


def _hidden_wins(answer, inputs) -> bool:
    """A sign of ``mask_fill_too_small:added``: the answer is wrong only in rows whose hidden keys score 2¹⁸ or more
    above every key the query sees, and each of those rows is the value of its loudest hidden key: a finite number
    added to the hidden scores (−1e4) leaves such a key on top."""
    (got,) = (np.asarray(a, dtype=np.float64) for a in answer.values())
    want = ref_causal(**inputs)
    if got.shape != want.shape or not np.isfinite(got).all():
        return False
    q, k = np.asarray(inputs["q"], dtype=np.float64), np.asarray(inputs["k"], dtype=np.float64)
    v = np.asarray(inputs["v"], dtype=np.float64)
    s = causal_scores(q, k)
    seen = np.tril(np.ones(s.shape[-2:], dtype=bool), k.shape[-2] - q.shape[-2])
    hidden = np.where(seen, -np.inf, s)
    gap = hidden.max(axis=-1) - np.where(seen, s, -np.inf).max(axis=-1)
    wrong = ~np.isclose(got, want, rtol=1e-4, atol=1e-5).all(axis=-1)
    if v.ndim != s.ndim or not wrong.any() or (wrong & (gap < 2.0**18)).any():
        return False
    top = np.argmax(hidden, axis=-1)  # (…, queries)
    leaked = np.take_along_axis(v, top[..., None], axis=-2)  # the loudest hidden key's value, per query
    return bool(np.allclose(got[wrong], leaked[wrong], rtol=1e-3, atol=1e-4))


CAUSAL_SIGNS = {"mask_by_value": _masked_by_value, "unstable_softmax": _unshifted,
                "mask_fill_too_small": _causal_fill_leaks, "future_masked_late": future_masked_late(ref_causal),
                "global_max_rounding": _shifted_by_hidden, "mask_fill_too_small:added": _hidden_wins}


def _causal_scaled(inputs, scale):
    """Causal attention with the scores divided by ``scale`` instead of √d_k."""
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    return _attend(causal_scores(q, k, scale=False) / scale, _lower(q.shape[-2]), v)


def _batch_and_tokens(inputs) -> dict:
    """The sizes of the inputs other than the keys' width: the tokens, the batch when there is one, and the values'
    width when it is another."""
    q, v = inputs["q"], inputs["v"]
    sizes = {"n, the number of tokens (q.shape[-2] or k.shape[-2])": q.shape[-2]}
    if q.ndim == 3:
        sizes["the batch size (q.shape[0])"] = q.shape[0]
    if v.shape[-1] != q.shape[-1]:
        sizes["d_v, the width of one value (v.shape[-1])"] = v.shape[-1]
    return sizes


CAUSAL_OTHER_SCALE = other_scale(_causal_scaled, _batch_and_tokens)


def _real(lengths, n, off_by_one=False):
    """(batch, n): True where position j is a real token of its sentence."""
    lengths = np.asarray(lengths)[:, None]
    return np.arange(n)[None, :] <= lengths if off_by_one else np.arange(n)[None, :] < lengths


def key_allowed(lengths, n, off_by_one=False):
    """(batch, 1, n): True where key j is a real token of its sentence."""
    return _real(lengths, n, off_by_one)[:, None, :]


def nonzero_keys(k):
    """(batch, 1, n): True where key j is not all zeros (a mask of the padding by its contents)."""
    return np.any(np.asarray(k) != 0, axis=-1)[:, None, :]


def query_allowed(lengths, n):
    """(batch, n, 1): True where query i is a real token (the wrong axis to mask)."""
    return _real(lengths, n)[:, :, None]


def _padded(q, k, v, lengths, how="inf", scale=True, allowed=None, axis=-1):
    allowed = key_allowed(lengths, k.shape[-2]) if allowed is None else allowed
    return _attend(causal_scores(q, k, scale=scale), allowed, v, how, axis)


def ref_padded(q, k, v, lengths):
    return _padded(q, k, v, lengths)


def _padded_scaled(inputs, scale):
    return _attend(causal_scores(inputs["q"], inputs["k"], scale=False) / scale,
                   key_allowed(inputs["lengths"], inputs["k"].shape[-2]), inputs["v"])


PADDED_OTHER_SCALE = other_scale(_padded_scaled, lambda i: {
    **_batch_and_tokens(i), "each sentence's own length (lengths)": np.asarray(i["lengths"])[:, None, None]})


def _square(allowed, lengths, n):
    return np.broadcast_to(allowed, (len(lengths), n, n))


PADDED_MISTAKES = {
    "padding_mask_on_queries": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=_square(query_allowed(lengths, q.shape[-2]), lengths, q.shape[-2])),
    "padding_mask_inverted": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=~key_allowed(lengths, k.shape[-2])),
    "mask_after_softmax": lambda q, k, v, lengths: _padded(q, k, v, lengths, how="after"),
    "mask_with_zero": lambda q, k, v, lengths: _padded(q, k, v, lengths, how="zero"),
    "missing_scale": lambda q, k, v, lengths: _padded(q, k, v, lengths, scale=False),
    "scale_by_d": lambda q, k, v, lengths: _padded(q, k, v, lengths, scale="d"),
    "softmax_wrong_axis": lambda q, k, v, lengths: _padded(q, k, v, lengths, axis=-2),
    # padded queries hidden as well as padded keys: their rows have no key left (NaN)
    "fully_masked_row": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=query_allowed(lengths, q.shape[-2]) & key_allowed(lengths, k.shape[-2])),
    "padding_mask_off_by_one": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=key_allowed(lengths, k.shape[-2], off_by_one=True)),
    # j < lengths − 1: the last real key hidden too (a sentence of one token has no key left: NaN)
    "padding_mask_short_by_one": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=key_allowed(np.asarray(lengths) - 1, k.shape[-2])),
    # a causal mask as well, which the step does not ask for
    "unasked_causal_mask": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=key_allowed(lengths, k.shape[-2]) & _lower(q.shape[-2])),
    # the lengths sorted first, longest first (a habit from packing padded sequences): another sentence's length
    "padding_lengths_sorted": lambda q, k, v, lengths: _padded(q, k, v, np.sort(np.asarray(lengths))[::-1]),
}


def ref_dropout(weights, keep, p):
    return weights * keep / (1.0 - p)


DROPOUT_MISTAKES = {
    "dropout_no_rescale": lambda weights, keep, p: weights * keep,
    "dropout_scale_by_keep": lambda weights, keep, p: weights * keep * (1.0 - p),
    "dropout_divide_by_p": lambda weights, keep, p: weights * keep / p,
    "dropout_mask_inverted": lambda weights, keep, p: weights * (1 - keep) / (1.0 - p),
    "dropout_mask_ignored": lambda weights, keep, p: weights / (1.0 - p),
    "dropout_mask_transposed": lambda weights, keep, p: weights * np.swapaxes(keep, -1, -2) / (1.0 - p),
    "dropout_rescaled_twice": lambda weights, keep, p: weights * keep / (1.0 - p) ** 2,
    "dropout_scale_by_odds": lambda weights, keep, p: weights * keep * p / (1.0 - p),
    # each row divided by its sum after dropping: a row with every weight dropped is 0/0
    "dropout_renormalised": lambda weights, keep, p: weights * keep / (weights * keep).sum(axis=-1, keepdims=True),
    # `weights * keep / 1 - p`: divided by 1, then p subtracted from every weight
    "dropout_precedence": lambda weights, keep, p: weights * keep - p,
}


def _dropout_factor(ex, trials, record=None) -> str | None:
    """An explain for ``dropout_wrong_scale``: on every trial the answer is wrong on, the dropped weights are 0 and
    every kept weight is multiplied by one factor, another than 1 / (1 − p) (a factor of 1 + p, one rounded to a
    whole number, 1 / √(1 − p), the fraction of this draw's weights kept, a `//` that rounds the kept weights down to
    0)."""
    said = None
    for got, inputs in trials:
        g = np.asarray(got.get("inverted_dropout"), dtype=np.float64)
        weights, keep = (np.asarray(inputs[n], dtype=np.float64) for n in ("weights", "keep"))
        p = float(inputs["p"])
        want = ref_dropout(weights, keep, p)
        if g.shape == want.shape and np.allclose(g, want, rtol=ex.rtol, atol=ex.atol):
            continue
        if g.shape != weights.shape:
            return None
        if np.array_equal(g, np.floor(want)):  # `weights * keep // (1 - p)`: rounded down to whole numbers
            said = said or ("Your function rounds the kept weights down to whole numbers: `//` is a floor division, "
                            "so a kept weight of 0.3 divided by 1 − p comes out 0. Divide with `/`: "
                            "`weights * keep / (1 - p)`.")
            continue
        kept = (keep != 0) & (np.abs(weights) > 1e-3)
        if not kept.any() and keep.mean() == 0 and np.isnan(g).all():
            continue  # nothing kept, divided by the fraction kept: 0 / 0 (told on the trials that keep some)
        if not kept.any() or not np.allclose(g[keep == 0], 0.0, atol=1e-7):
            return None
        factors = g[kept] / weights[kept]
        factor = float(np.median(factors))
        if not np.allclose(factors, factor, rtol=1e-4, atol=1e-6) or np.isclose(factor, 1.0 / (1.0 - p), rtol=1e-4):
            return None
        # only the factors of a known slip (another factor has other causes: a p read elsewhere, clamped, rounded)
        fraction = float(keep.mean())
        if fraction > 0.0 and np.isclose(factor, 1.0 / fraction, rtol=1e-4):
            why = ": 1 over the fraction of weights this draw happened to keep, not over the probability of keeping one"
        elif np.isclose(factor, 1.0 + p, rtol=1e-4):
            why = ": 1 + p, not 1 / (1 − p)"
        elif factor == round(1.0 / (1.0 - p)) and not np.isclose(factor, 1.0 / (1.0 - p), rtol=1e-4):
            why = ": 1 / (1 − p) rounded to a whole number"
        elif np.isclose(factor, 1.0 / np.sqrt(1.0 - p), rtol=1e-4):
            why = ": 1 / √(1 − p), a scale that keeps the spread of the weights, not their expected value"
        else:
            return None
        if said is None:
            said = (f"Your function zeroes the dropped weights, but multiplies each kept one by {factor:.4g} (here "
                    f"p = {p:g}){why}. Inverted dropout divides every kept weight by the probability of keeping it, "
                    f"1 − p = {1.0 - p:g} (a factor of {1.0 / (1.0 - p):.4g}), the same for every draw, so that each "
                    "weight keeps its expected value: `weights * keep / (1 - p)`.")
    return said


def _own_draw(answer, inputs) -> bool:
    """Every weight either dropped (0) or kept and divided by (1 − p), but not where the given keep says: a draw of
    the function's own (F.dropout, torch.rand) instead of the keep-mask it is given."""
    got = np.asarray(answer["inverted_dropout"], dtype=np.float64)
    weights, keep, p = (np.asarray(inputs[n], dtype=np.float64) for n in ("weights", "keep", "p"))
    dropped, kept = got == 0.0, np.isclose(got, weights / (1.0 - p), rtol=1e-4, atol=1e-7)
    # zeros elsewhere than keep's (keep transposed on every trial is a variant of its own, named before this; on one
    # trial, a draw's zeros can fall where keep's transposed are by chance)
    return bool(got.shape == weights.shape and (dropped | kept).all() and (dropped != (keep == 0)).any())


DROPOUT_HINTS = {
    "given_draw_ignored": "Your zeros fall in other places than keep's: your function does not drop where the "
    "keep-mask it is given says (a draw of its own, keep changed on the way, or used another way than as it is). "
    "Use `keep` as it is: multiply the weights by it, then divide by (1 − p).",
}


def split_heads(x, num_heads):
    b, s, d = x.shape
    return x.reshape(b, s, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_heads_wrong(x, num_heads):
    b, s, d = x.shape
    return x.reshape(b, num_heads, s, d // num_heads)


def split_heads_interleaved(x, num_heads):
    """reshape(b, s, d_head, heads), heads moved in front: feature f goes to head f % heads."""
    b, s, d = x.shape
    return x.reshape(b, s, d // num_heads, num_heads).transpose(0, 3, 1, 2)


def split_heads_transposed_first(x, num_heads):
    """(b, s, d) transposed to (b, d, s), then reshaped to (b, heads, s, d_head)."""
    b, s, d = x.shape
    return x.transpose(0, 2, 1).reshape(b, num_heads, s, d // num_heads)


def split_heads_count_as_size(x, num_heads):
    """torch.split(num_heads) — pieces of num_heads features, d_head of them — stacked on a heads axis."""
    b, s, d = x.shape
    return x.reshape(b, s, d // num_heads, num_heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, s, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * dh)


def merge_heads_wrong(x):
    b, h, s, dh = x.shape
    return x.reshape(b, s, h * dh)


def merge_heads_interleaved(x):
    """permute(0, 2, 3, 1): (b, s, d_head, heads), so the heads' features alternate."""
    b, h, s, dh = x.shape
    return x.transpose(0, 2, 3, 1).reshape(b, s, h * dh)


def merge_heads_typed_in(x):
    """The merged width typed in for the notebook's sizes (its 2 heads): raises on any other number of heads."""
    b, h, s, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, NUM_HEADS * dh)


def merge_heads_all_axes(x):
    """Every axis reversed (a transpose without the order of the axes), then reshaped to (b, s, d_model)."""
    b, h, s, dh = x.shape
    return x.transpose(3, 2, 1, 0).reshape(b, s, h * dh)


def merge_heads_wrong_transpose(x):
    """transpose(2, 3): (b, heads, d_head, s), then reshaped to (b, s, d_model)."""
    b, h, s, dh = x.shape
    return x.transpose(0, 1, 3, 2).reshape(b, s, h * dh)


def _heads_scores(x, w_query, w_key, w_value, num_heads, wrong_heads=False, scale="head", transposed=False,
                  raw_values=False):
    """Queries, keys and values split into heads, and the scores of every head (``transposed``: x @ w.T;
    ``raw_values``: the inputs split as they are, in place of the values)."""
    split = {False: split_heads, True: split_heads_wrong, "interleaved": split_heads_interleaved,
             "split_interleaved": split_heads_interleaved}[wrong_heads]
    q, k, v = (split(x @ (w.T if transposed else w), int(num_heads)) for w in (w_query, w_key, w_value))
    if raw_values:
        v = split(x, int(num_heads))
    scores = causal_scores(q, k, scale="d" if scale == "d" else scale == "head")
    if scale == "model":
        scores = scores / np.sqrt(x.shape[-1])
    elif not isinstance(scale, str):  # a number of the caller's (scale_by_other_size)
        scores = scores / scale
    return scores, v


def _mha(x, w_query, w_key, w_value, w_out, num_heads, wrong_heads=False, scale="head", axis=-1, project=True,
         wrong_merge=False, causal=False, weights_t=False, raw_values=False):
    transposed = project == "all_transposed"
    scores, v = _heads_scores(x, w_query, w_key, w_value, num_heads, wrong_heads, scale, transposed, raw_values)
    allowed = _lower(scores.shape[-1]) if causal else np.ones(scores.shape[-2:], dtype=bool)
    merge = merge_heads_interleaved if wrong_heads == "interleaved" or wrong_merge == "interleaved" else \
        merge_heads_all_axes if wrong_merge == "all_axes" else merge_heads if wrong_heads == "split_interleaved" else \
        merge_heads_wrong if wrong_heads or wrong_merge else merge_heads
    weights = _masked_softmax(scores, allowed, "inf", axis)
    merged = merge((np.swapaxes(weights, -1, -2) if weights_t else weights) @ v)
    return merged @ (w_out if project is True else w_out.T) if project else merged  # "transposed", "all_…": w_out.T


def ref_mha(x, w_query, w_key, w_value, w_out, num_heads):
    return _mha(x, w_query, w_key, w_value, w_out, num_heads)


def native_tf_causal(q, k, v):
    """06.tf_causal_attention's reference in TensorFlow, differentiable (a right student's function: its gradient is
    judged)."""
    import tensorflow as tf

    n = tf.shape(q)[-2]
    s = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], q.dtype))
    allowed = tf.range(n)[None, :] <= tf.range(n)[:, None]
    return tf.matmul(tf.nn.softmax(tf.where(allowed, s, tf.constant(-np.inf, s.dtype)), axis=-1), v)


def native_tf_mha(x, w_query, w_key, w_value, w_out, num_heads):
    """06.tf_multi_head_attention's reference in TensorFlow, differentiable."""
    import tensorflow as tf

    b, s, d = (int(n) for n in x.shape)
    h = int(num_heads)

    def split(t):
        return tf.transpose(tf.reshape(t, (b, s, h, d // h)), perm=[0, 2, 1, 3])

    q, k, v = (split(tf.matmul(x, w)) for w in (w_query, w_key, w_value))
    weights = tf.nn.softmax(tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(d // h, x.dtype)), axis=-1)
    merged = tf.reshape(tf.transpose(tf.matmul(weights, v), perm=[0, 2, 1, 3]), (b, s, d))
    return tf.matmul(merged, w_out)


MHA_MISTAKES = {
    "heads_reshaped_without_transpose": lambda **i: _mha(**i, wrong_heads=True),
    "missing_scale": lambda **i: _mha(**i, scale="none"),
    "scale_by_d_model": lambda **i: _mha(**i, scale="model"),
    # divided by d_head itself: or by √d_head twice (the queries, then the scores again)
    "scale_by_d": lambda **i: _mha(**i, scale="d"),
    "softmax_over_heads": lambda **i: _mha(**i, axis=1),
    "missing_output_projection": lambda **i: _mha(**i, project=False),
    "heads_merged_without_transpose": lambda **i: _mha(**i, wrong_merge=True),
    "output_projection_transposed": lambda **i: _mha(**i, project="transposed"),
    # (batch, seq, d_head, heads) both ways: every head gets features spread over the whole row
    "heads_interleaved": lambda **i: _mha(**i, wrong_heads="interleaved"),
    # x @ w.T for every weight, w_out too (the nn.Linear habit)
    "projections_transposed": lambda **i: _mha(**i, project="all_transposed"),
    "unasked_causal_mask": lambda **i: _mha(**i, causal=True),
    "softmax_wrong_axis": lambda **i: _mha(**i, axis=-2),  # over the queries: dim=-2
    # the division by √d_head after the softmax (the weights, or the heads' outputs: the same numbers, projected)
    "scale_after_softmax": lambda **i: _mha(**i, scale="none") / np.sqrt(i["x"].shape[-1] // int(i["num_heads"])),
    # the heads "averaged": the merged output divided by their number
    "heads_averaged": lambda **i: _mha(**i) / int(i["num_heads"]),
    # each head's (seq, seq) weights transposed before they mix the values (`weights.transpose(-2, -1) @ v`)
    "weights_transposed": lambda **i: _mha(**i, weights_t=True),
    # the inputs split into heads in place of the values (`v = split_heads(x, h)`: no x @ w_value)
    "mixed_inputs_not_values": lambda **i: _mha(**i, raw_values=True),
}


def _mha_made_with(made_with, x, w_query, w_key, w_value, w_out, num_heads):
    w = {"query": w_query, "key": w_key, "value": w_value}
    return _mha(x, w[made_with["query"]], w[made_with["key"]], w[made_with["value"]], w_out, num_heads)


# a projection made with another role's matrix (a line copied, its matrix left as it was), or the output's
MHA_MIX_UPS, MHA_MIX_HINTS = mix_ups(_mha_made_with, {r: (f"the {plural}", f"{r[0]} = x @ w_{r}") for r, plural in
                                                      zip(ROLES, ("queries", "keys", "values"))})
MHA_MISTAKES |= MHA_MIX_UPS
MHA_MISTAKES["projection_reused:out_with_value"] = lambda **i: _mha(**{**i, "w_out": i["w_value"]})
MHA_MIX_HINTS["projection_reused:out_with_value"] = (
    "You projected the merged heads with w_value, the values' matrix. The output projection has a matrix of its "
    "own: merged @ w_out.")
MHA_MISTAKES["unasked_residual"] = lambda **i: _mha(**i) + i["x"]
# TensorFlow's version is one function: heads dealt in turn when splitting only, then merged back the usual way
# (perm [0, 2, 1, 3]); and tf.transpose without perm, which reverses every axis, when merging
TF_MHA_MISTAKES = {
    **MHA_MISTAKES,
    "heads_split_interleaved": lambda **i: _mha(**i, wrong_heads="split_interleaved"),
    "transposed_all_axes": lambda **i: _mha(**i, wrong_merge="all_axes"),
}


def _mha_all_axes(x, w_query, w_key, w_value, w_out, num_heads):
    """tf.transpose without perm when splitting and when merging: each head split to (d_head, heads, seq, batch),
    so the scores pair the tokens over the batch axis, and the merge reverses every axis back."""
    b, s, d = x.shape
    h = int(num_heads)
    q, k, v = (np.transpose((x @ w).reshape(b, s, h, d // h)) for w in (w_query, w_key, w_value))
    out = softmax(q @ np.swapaxes(k, -1, -2) / np.sqrt(d // h)) @ v
    return np.transpose(out).reshape(b, s, d) @ w_out


def _mha_scaled(inputs, scale):
    return _mha(**inputs, scale=scale)


MHA_OTHER_SCALE = other_scale(_mha_scaled, lambda i: {
    "the number of heads (num_heads)": int(i["num_heads"]), "n, the number of tokens (x.shape[1])": i["x"].shape[1],
    "the batch size (x.shape[0])": i["x"].shape[0]},
    d_k="d_head", width="the width of one head's keys (d_model // num_heads, k.shape[-1] after the split)")
MHA_SCALE_EXPLAINS = scale_explains(MHA_OTHER_SCALE, lambda i: int(np.shape(i["w_query"])[-1]) // int(i["num_heads"]),
                                    d_k="d_head")
TF_MHA_EXPLAINS = {
    **MHA_SCALE_EXPLAINS,
    "transposed_all_axes": matches(_mha_all_axes, "tf.transpose without perm reverses every axis: your split turns "
                                   "(batch, seq, heads, d_head) into (d_head, heads, seq, batch), so the scores pair "
                                   "the tokens through the batch axis, and the merge reverses everything back. Give "
                                   "the new order of all the axes (perm=[0, 2, 1, 3]) when splitting and when "
                                   "merging, so that only the heads and the tokens change places."),
    "heads_interleaved": matches(lambda **i: _mha(**i, wrong_merge="interleaved"),
                                 "Your heads are split right, but merged with the heads axis last (perm=[0, 2, 3, 1] "
                                 "gives (batch, seq, d_head, heads)), so the merged row alternates between the "
                                 "heads' features. Swap back only the heads and the tokens (perm=[0, 2, 1, 3]), "
                                 "then reshape, so that each head's block comes back whole."),
}


# --- part 5: one module, run in evaluation and in training mode --------------------------


def world(rng: np.random.Generator | None = None) -> dict:
    """The names of part 4 that the module's cell can read, in notebook order, and its answers.

    Fresh worlds change the model width, the number of heads, the batch, the sentence length
    (at most ``MAX_LEN - 1``, so the buffer must be cut to the sequence), the lengths (the first
    sentence full, every other one padded), the dropout probability (never 0.5, where dividing
    by p and by 1 − p agree) and the dropout draw.
    """
    if rng is None:
        example = mha_example()
        heads = {"x_mha": example.pop("x"), **example}
        part5 = module_example()
    else:
        b, s, h, dh = _heads_shape(rng)
        d = h * dh
        heads = {"x_mha": rng.normal(size=(b, s, d)), **_weights(rng, d), "num_heads": h}
        batch, n = int(rng.integers(2, 4)), int(rng.integers(4, MAX_LEN))
        lengths = rng.integers(1, n, size=batch)  # every sentence padded, as in padded_inputs
        p = float(rng.choice([0.1, 0.2, 0.3]))
        part5 = {"x_pad": rng.normal(size=(batch, n, d)), "lengths_pad": lengths, "p_drop": p,
                 "keep_draw": (rng.random((batch, h, n, n)) >= p).astype(np.float64)}
    names = {**heads, **part5}
    return {**names, **ref_module(**names)}


def module_fill_far(inputs: dict) -> dict:
    """An edge replay of the module's cell: its first sentence one token long, that token's query scoring exactly
    −10⁶ with its own key in every head (x = c·e₀, the first row of w_query all 1/√d, w_key = −w_query) and its value
    exactly 0 (the first row of w_value 0). Masked with −∞ (or −1e9), every query of that sentence sees that one key
    only and gets 0, exactly; a finite fill above −10⁶ (−1e4) gives the first query's weight to the hidden keys."""
    x = np.array(inputs["x_pad"], dtype=np.float64)
    lengths = np.array(inputs["lengths_pad"])
    wq, wv = np.array(inputs["w_query"], dtype=np.float64), np.array(inputs["w_value"], dtype=np.float64)
    d, h = x.shape[-1], int(inputs["num_heads"])
    dh = d // h
    wq[0] = 1.0 / np.sqrt(d)
    wv[0] = 0.0
    x[0, 0] = 0.0
    x[0, 0, 0] = np.sqrt(-FIRST_FAR * np.sqrt(dh) * d / dh)  # each head's score: −c² · dh / d / √dh = −10⁶
    lengths[0] = 1
    return {**inputs, "x_pad": x, "lengths_pad": lengths, "w_query": wq, "w_key": -wq, "w_value": wv}


def _module_fill_leaks(answer, inputs) -> bool:
    """A sign of ``mask_fill_too_small`` on :func:`module_fill_far`'s replay: the first sentence's first query, whose
    one visible key scores −10⁶, is not 0 in evaluation mode, and every other output is right."""
    x = np.asarray(inputs["x_pad"], dtype=np.float64)
    if not (int(np.asarray(inputs["lengths_pad"])[0]) == 1 and np.all(x[0, 0, 1:] == 0) and x[0, 0, 0] > 100):
        return False
    return only_first_token_off(answer["out_eval"], ref_module(**inputs)["out_eval"])


DROPOUT_COPIES = 1000


def module_probe_inputs(rng=None) -> dict:
    """The notebook's first sentence, 1000 times: the module's own dropout draws (keep=None), one per copy,
    must change the outputs and average to the evaluation output."""
    x = module_example()["x_pad"][:1]
    return {"x": np.repeat(x, DROPOUT_COPIES, axis=0), "lengths": np.full(DROPOUT_COPIES, x.shape[1])}


# a new module is made with these, to see how its weights start: 1/√256 = 0.0625 is far from an unscaled 1 and
# from 1/256 (divided by d_model), and no other weight of the module is (256, 256); and what its causal buffer is
# made for: 24 is neither the notebook's max_len nor a round size a student would type in
INIT_SIZES = {"d_model": 256, "num_heads": 4, "max_len": 24, "dropout": 0.1}

MODULE_READS = ("x_pad", "lengths_pad", "w_query", "w_key", "w_value", "w_out", "num_heads", "p_drop", "keep_draw")


def _module(x_pad, lengths_pad, w_query, w_key, w_value, w_out, num_heads, p_drop, keep_draw, *, causal="lower",
            padding="keys", how="inf", scale="head", wrong_heads=False, project=True, dropout="train", **_):
    """Both outputs of the module: ``{"out_eval": …, "out_train": …}``; the keywords make its wrong variants."""
    scores, v = _heads_scores(x_pad, w_query, w_key, w_value, num_heads, wrong_heads, scale)
    n = x_pad.shape[-2]
    allowed = {"lower": _lower(n), "none": np.ones((n, n), bool), "upper": _lower(n).T,
               "inverted": ~_lower(n)}[causal]
    real = _real(lengths_pad, n)
    if padding in ("keys", "both"):
        allowed = allowed & real[:, None, None, :]
    if padding in ("queries", "both"):
        allowed = allowed & real[:, None, :, None]
    if padding == "inverted":
        allowed = allowed & ~real[:, None, None, :]
    if padding == "off_by_one":  # j <= length: one padded key shown to every query of a padded sentence
        allowed = allowed & _real(lengths_pad, n, off_by_one=True)[:, None, None, :]
    if padding == "either":  # hidden only where both masks hide: causal & padded (or keep-masks joined by |)
        allowed = allowed | real[:, None, None, :]
    if dropout == "scores_first":  # the scores dropped, then masked and the softmax taken (no NaN)
        train = _masked_softmax(scores * keep_draw / (1 - p_drop), allowed, how)
        return {"out_eval": merge_heads(_masked_softmax(scores, allowed, how) @ v) @ w_out,
                "out_train": merge_heads(train @ v) @ w_out}
    if dropout == "scores":  # the masked scores dropped (−∞ · 0 = NaN), then the softmax
        with np.errstate(invalid="ignore"):
            hidden = np.where(allowed, scores, -np.inf)
            return {"out_eval": _module(x_pad, lengths_pad, w_query, w_key, w_value, w_out, num_heads, p_drop,
                                        keep_draw)["out_eval"],
                    "out_train": merge_heads(softmax(hidden * keep_draw / (1 - p_drop)) @ v) @ w_out}
    weights = _masked_softmax(scores, allowed, how)
    dropped = {"train": weights * keep_draw / (1 - p_drop), "none": weights, "no_rescale": weights * keep_draw,
               "times_keep": weights * keep_draw * (1 - p_drop), "by_p": weights * keep_draw / p_drop}
    eval_weights = dropped["train"] if dropout in ("in_eval", "inverted") else weights
    train_weights = dropped[{"in_eval": "train", "inverted": "none"}.get(dropout, dropout)]
    merge = merge_heads_wrong if wrong_heads else merge_heads

    def out(w):
        merged = merge(w @ v)
        return merged @ w_out if project else merged

    return {"out_eval": out(eval_weights), "out_train": out(train_weights)}


def ref_module(**names):
    return _module(**names)


def module_again(world: dict) -> tuple[dict, dict, np.ndarray]:
    """The module call of a replay (its batch, as the cell calls it), and one more call after the cell's own: the
    batch's sentences in reverse order, one token shorter (a padding mask or a length kept from the first call no
    longer fits), with its evaluation output."""
    x, lengths = world["x_pad"][::-1, :-1].copy(), np.minimum(world["lengths_pad"][::-1], world["x_pad"].shape[1] - 1)
    n = x.shape[1]
    names = {**{k: world[k] for k in MODULE_READS}, "x_pad": x, "lengths_pad": lengths,
             "keep_draw": np.ones((len(x), world["num_heads"], n, n))}
    return ({"x": world["x_pad"], "lengths": world["lengths_pad"]}, {"x": x, "lengths": lengths},
            ref_module(**names)["out_eval"])


def _variant(**how):
    return lambda **names: _module(**names, **how)


MODULE_MISTAKES = {
    "dropout_in_eval": _variant(dropout="in_eval"),
    "missing_dropout": _variant(dropout="none"),
    "dropout_mode_inverted": _variant(dropout="inverted"),
    "dropout_no_rescale": _variant(dropout="no_rescale"),
    "dropout_scale_by_keep": _variant(dropout="times_keep"),
    "dropout_divide_by_p": _variant(dropout="by_p"),
    "missing_scale": _variant(scale="none"),
    "scale_by_d_model": _variant(scale="model"),
    "missing_causal_mask": _variant(causal="none"),
    "mask_wrong_triangle": _variant(causal="upper"),
    "causal_mask_inverted": _variant(causal="inverted"),
    "missing_padding_mask": _variant(padding="none"),
    # with the causal mask, masking the padded queries only or queries and keys give the same rows
    "fully_masked_row": _variant(padding="both"),
    "padding_mask_inverted": _variant(padding="inverted"),
    "padding_mask_off_by_one": _variant(padding="off_by_one"),
    "mask_after_softmax": _variant(how="after"),
    "mask_with_zero": _variant(how="zero"),
    "heads_reshaped_without_transpose": _variant(wrong_heads=True),
    "missing_output_projection": _variant(project=False),
    "dropout_before_softmax": _variant(dropout="scores"),
    "masks_combined_with_and": _variant(padding="either"),
}
MODULE_EXPLAINS = {
    "dropout_before_softmax": matches(_variant(dropout="scores_first"), "Your module drops the scores, before the "
                                      "mask and the softmax: the softmax then spreads the weight again over what is "
                                      "left. Dropout acts on the attention weights, after the softmax and before the "
                                      "product with the values."),
}

# --- hints in this notebook's words ---------------------------------------------------------

MERGE_HINT = (
    "You reshaped (batch, heads, seq, d_head) straight to (batch, seq, d_model), which mixes "
    "tokens between heads. Transpose axes 1 and 2 first (back to (batch, seq, heads, d_head)), "
    "then reshape."
)
MERGE_ONLY_HINT = (
    "Your heads are split right, but put back together by a reshape alone: (batch, heads, seq, d_head) "
    "straight to (batch, seq, d_model) mixes tokens between heads. Transpose axes 1 and 2 first, then reshape."
)
MHA_SCALE_HINT = (
    "Your scores were not divided by √d_head. Inside each head, divide q·kᵀ by the square root "
    "of the head size, d_head = d_model // num_heads, before the softmax."
)
MHA_D_MODEL_HINT = (
    "You divided the scores by √d_model. Each head's scores are dot products of vectors of size d_head = "
    "d_model // num_heads: divide by √d_head."
)
MHA_TWICE_HINT = (
    "Your scores end up divided by d_head itself, not by √d_head: divided by d_head, or by √d_head twice (the "
    "queries first, then the scores again). Scale once: divide the scores (or the queries) by √d_head."
)
OUTPUT_PROJECTION_HINT = (
    "You put the heads side by side but left out the output projection. Multiply the merged heads by w_out: "
    "it mixes the heads' results into every output feature."
)
SCALE_HINT = (
    "Your scores were not divided by √d_k. Divide them by the square root of the key size (k.shape[-1]) "
    "before the softmax."
)
PADDED_ZERO_HINT = (
    "A score of 0 still gets weight after the softmax (exp(0) = 1), so the padding positions "
    "leak into the output. Fill the scores of padded keys with −∞ (float('-inf'))."
)
PADDED_HINTS = {
    "mask_with_zero": PADDED_ZERO_HINT,
    "missing_scale": SCALE_HINT,
    "padding_mask_on_queries": "You hid the padded queries (rows) instead of the padded keys (columns): a padded "
    "query then has no key left, so its row is 0/0 = NaN, and the real tokens still attend to the padding. Hide "
    "the columns of the padded keys: key j of sentence b is real when j < lengths[b].",
    "fully_masked_row": "You hid the padded queries (rows) as well as the padded keys, so a padded query has no key "
    "left: its softmax row is 0/0 = NaN. Hide only the padded keys (columns); every query then keeps at least one "
    "real key, and the outputs at padded positions are dropped later anyway.",
    "padding_mask_off_by_one": "Your mask shows one padded key to every query of a padded sentence: positions count "
    "from 0, so key j of sentence b is real when j < lengths[b] (not ≤).",
    # the same numbers as the padded values set to 0 with their scores left in the softmax (weight · 0)
    "mask_after_softmax": "The padded keys still take part in the softmax: their weights were zeroed after it, "
    "or their values set to 0 (the same numbers: weight · 0), so each row's weights on the real keys sum to less "
    "than 1. Hide the padded keys' scores (−∞) before the softmax.",
}


def _causal_hints(framework: str) -> dict:
    torch_ = framework == "torch"
    hide = "torch.triu(…, diagonal=1)" if torch_ else "key j ≤ query i is allowed: `<=`, not `<`"
    axis = "dim" if torch_ else "axis"
    return {
        "softmax_wrong_axis": "Your softmax normalised over the queries' axis, so each column sums to 1, not each "
        f"row. The keys' axis is the last one: {axis}=-1. ({axis}=1 is the keys' axis of (seq, seq) scores only; "
        "with a batch axis in front, (batch, seq, seq), it is the queries'.)",
        "missing_scale": SCALE_HINT,
        "mask_fill_too_small:added": "Your mask adds a finite number to the hidden scores: that moves them down from "
        "where they are, so a hidden key that scores far above the visible ones (here about a million above) still "
        "comes out on top, and the query takes nearly all of its value from the future. Replace the hidden scores "
        "instead (a fill of −∞, or of a number below any score), or add −∞.",
        "global_max_rounding": "You subtracted each row's maximum over every key, the hidden future ones too, before "
        "the mask. Nothing overflows, but when a hidden key scores far above the visible ones (here about a million "
        "above), float32 rounds each visible score minus that maximum to the spacing of numbers that large, and the "
        "weights move by percents. Mask first: the softmax then subtracts the maximum of what the query sees.",
        "mask_wrong_triangle": "You hid the past instead of the future. Query i may look at keys j ≤ i: hide the "
        "positions above the diagonal, keep the lower triangle"
        + (" (torch.triu(…, diagonal=1) is the part to hide)." if torch_ else "."),
        "fully_masked_row": "Your mask hides the diagonal too, so the first query has no key left and its row is "
        f"0/0 = NaN. A token may attend to itself: hide only the keys after it, j > i ({hide}).",
        "causal_mask_inverted": "Your mask is the wrong way round: it hides what each query may see (the keys "
        "j ≤ i, itself included) and shows the future, so the last query has nothing left (NaN). "
        + ("In masked_fill, True means 'hide': pass the positions above the diagonal, "
           "torch.triu(…, diagonal=1), not the lower triangle." if torch_ else
           "In tf.where(condition, scores, −∞), the condition is what is kept: the lower triangle, key j ≤ query i."),
    }


MODULE_HINTS = {
    "dropout_no_rescale": "In training mode your module zeroes the dropped weights but does not rescale the kept "
    "ones: inverted dropout divides what it keeps by (1 − p). (If your forward does divide by 1 − self.dropout, "
    "look for what changed self.dropout on the way: setting it to 0 in evaluation mode keeps it 0 for every later "
    "call, in training too.)",
    "dropout_before_softmax": "Your module drops the scores, before the softmax: the masked scores are −∞, and "
    "−∞ · 0 is NaN. Dropout acts on the attention weights, after the softmax and before the product with the "
    "values.",
    "missing_scale": MHA_SCALE_HINT,
    "missing_output_projection": OUTPUT_PROJECTION_HINT,
    "scale_by_d_model": MHA_D_MODEL_HINT,
    "dropout_in_eval": "Your module drops attention weights in evaluation mode too. Dropout is only for training: "
    "apply the draw only when `self.training` is True; after `module.eval()` return the weights unchanged.",
    "missing_dropout": "In training mode your module leaves the attention weights as they are. After "
    "`module.train()`, multiply them by the keep-mask and divide by (1 − p), as inverted_dropout does.",
    "mask_wrong_triangle": "Your causal mask hides the past instead of the future: query i may look at keys j ≤ i. "
    "Hide the positions above the diagonal (torch.triu(…, diagonal=1)).",
    "causal_mask_inverted": "Your causal mask is the wrong way round: it hides what each query may see (keys j ≤ i) "
    "and shows the future. In masked_fill, True means 'hide': the positions above the diagonal.",
    "fully_masked_row": "The rows of the padded queries hide every key, so their softmax is 0/0 = NaN: you masked "
    "the padded queries (rows). Hide only the padded keys (columns); every query then keeps at least one key.",
    "not_as_asked": "Your module's output does not change when its buffer `causal_mask` does: the forward "
    "builds the causal mask again on every call instead of using the buffer. Cut the buffer to the sequence "
    "length (its first seq rows and columns) and use that.",
    "not_trainable": "wrap each of the four (d_model, d_model) weights in nn.Parameter(...) inside __init__ (the "
    "cell copies the notebook's weights into them, and forward uses them as x @ w)",
    "missing_padding_mask": "The padded keys are not hidden. With the causal mask a real token never sees the "
    "padding after it, so only the outputs at padded positions differ, but a padded query must still attend to "
    "real keys only: hide the keys at positions ≥ the sentence's length.",
}


# what the module is given, in the words of its own code (for a value typed in instead)
MODULE_GIVEN = {
    "p_drop": "`self.dropout`, the probability the module was made with",
    "num_heads": "`self.num_heads`, the number of heads the module was made with",
    "keep_draw": "`keep`, the draw forward is given",
    "x_pad": "`x`, the input forward is given",
    "lengths_pad": "`lengths`, the lengths forward is given",
    **{w: f"`self.{w}`, the module's own weight" for w in ("w_query", "w_key", "w_value", "w_out")},
}


def _exercises() -> list[Exercise]:
    common = {"notebook": NOTEBOOK, "kind": "function"}
    own = {"library_attention": False}  # "write …": the library's attention is what the cell compares with
    # float32 in, float32 out: a float64 result (a NumPy round trip, a .double()) breaks the comparisons after it
    # and a result that keeps its gradient: these are the pieces of a module that is trained (part 5, notebook 10)
    torch_ = {**common, "framework": "torch", "dtype": "float32", "keeps_grad": True}
    tf_ = {**common, "framework": "tensorflow",
           "keeps_grad": True,  # the twins of the pieces above: q, k, v (and the weights) reach the result
           # the PyTorch functions above, run and wrapped in a TensorFlow tensor, are not the TensorFlow version
           "not_with": ("torch", "F", "causal_attention", "multi_head_attention", "split_heads", "merge_heads")}
    causal = {"inputs": causal_inputs, "reference": ref_causal, "mistakes": CAUSAL_MISTAKES,
              # and a hidden key far louder than the first query's own: the future hidden after the softmax shows
              # and a sequence of 33 tokens: a mask of a fixed length cut to the sequence shows
              # and a query whose visible first key scores 200 above its own: a shift by the diagonal shows
              # and 8 sentences of 3 tokens: a length taken from the batch axis shows; and the last value 10⁷ times
              # larger: a weight of 1e-9 left on the future shows
              # and scores of about 1e-6 (the queries times 2⁻²⁰): a fill relative to the scores (−100 · max |s|)
              # is then about 0, and the hidden keys get weight
              # and a hidden key 2²⁰ above the visible one: a maximum over every key, subtracted before the mask, rounds
              "edge": (causal_edge, far_below, loud_future, long_sequence, loud_pair, loud_past, many_sentences,
                       loud_last_value, first_far, QUIET_QUERIES, far_louder_future), "signs": CAUSAL_SIGNS,
              "explains": scale_explains(CAUSAL_OTHER_SCALE)}
    mha = {"inputs": mha_inputs, "reference": ref_mha, "mistakes": MHA_MISTAKES, "atol": 1e-5,
           "edge": loud_head,  # one head's scores 150, the others' a few units: a max over the heads shows
           "hints": {"missing_scale": MHA_SCALE_HINT, "scale_by_d_model": MHA_D_MODEL_HINT,
                     "missing_output_projection": OUTPUT_PROJECTION_HINT,
                     "heads_merged_without_transpose": MERGE_ONLY_HINT, "scale_by_d": MHA_TWICE_HINT,
                     "scale_after_softmax": "You divided by √d_head after the softmax, so each head's weights no "
                     "longer sum to 1. The division belongs inside: softmax(scores / √d_head).",
                     "mixed_inputs_not_values": "Your heads mix the inputs x split into heads, not the values: the "
                     "values are x projected by w_value (x @ w_value), then split into heads as the queries and keys "
                     "are.", **MHA_MIX_HINTS},
           "explains": MHA_SCALE_EXPLAINS}
    return [
        Exercise("06.causal_attention", title="Causal attention", answers=("causal_attention",),
                 hints=_causal_hints("torch"), how=own, **causal, **torch_),
        Exercise(
            "06.padded_attention",
            title="Attention over a padded batch",
            answers=("padded_attention",),
            inputs=padded_inputs,
            reference=ref_padded,
            mistakes=PADDED_MISTAKES,
            hints=PADDED_HINTS,
            explains=scale_explains(PADDED_OTHER_SCALE),
            # only for a function that takes a maximum (lengths.max(), torch.max(lengths)): other shape errors
            # have other causes (a [:, None] missing, a global read)
            raised_hints=((r"must match the size of tensor",
                           "(If your mask is made from the longest length, lengths.max(): it is narrower than the "
                           "keys when every sentence of a batch is padded, as in a batch padded to a fixed length. "
                           "Make it as wide as the key axis, k.shape[-2].)", ("max", "amax")),),
            how=own,
            # scores of 300: a softmax written out without its maximum overflows; a query whose every score is
            # −1100: a finite fill above that gives the padded keys its weight
            # and a real key of zeros: a mask by value shows
            # and padding that scores far above the words: the padding hidden after the softmax shows
            # and a batch of one sentence: a result squeezed loses its batch axis
            edge=(large_scores, far_below, one_real_key_far, real_zero_key, loud_padding, long_padded, QUIET_QUERIES,
                  batch_of_one("q", "k", "v", "lengths"), same_lengths_wider),  # and a mask kept by the lengths
            signs={"mask_fill_too_small": _padded_fill_leaks, "padding_from_zero_keys": _zero_keys_hidden},
            **torch_,
        ),
        Exercise(
            "06.inverted_dropout",
            title="Dropout with a given keep-mask",
            answers=("inverted_dropout",),
            inputs=dropout_inputs,
            reference=ref_dropout,
            mistakes=DROPOUT_MISTAKES,
            signs={"given_draw_ignored": _own_draw},
            explains={"dropout_wrong_scale": _dropout_factor},
            hints=DROPOUT_HINTS,
            edge=(one_hot_row, high_p, nothing_kept, precise_p, signed_weights),
            # a product and a division in float32 are within 2e-7 of the float64 reference; a factor 1 / (1 - p)
            # rounded to 4 decimals is up to 4e-5 off (1.1111 for p = 0.1)
            rtol=2e-6, atol=1e-7,
            **torch_,
        ),
        Exercise(
            "06.split_heads",
            title="Splitting into heads",
            answers=("split_heads",),
            inputs=split_inputs,
            reference=split_heads,
            mistakes={"heads_reshaped_without_transpose": split_heads_wrong,
                      "heads_interleaved": split_heads_interleaved,
                      "heads_wrong_transpose": split_heads_transposed_first,
                      "heads_count_as_size": split_heads_count_as_size},
            hints={"heads_interleaved": "You reshaped to (batch, seq, d_head, heads), so feature f went to head "
                   "f % heads: every head got features spread over the whole row. Reshape to (batch, seq, heads, "
                   "d_head), so that head h holds the block h·d_head … (h+1)·d_head − 1; then move the heads axis "
                   "in front of the tokens.",
                   "heads_wrong_transpose": "You transposed before reshaping: (batch, d_model, seq) cut into "
                   "heads mixes the tokens. Cut each token's row into its heads' pieces first (reshape to "
                   "(batch, seq, heads, d_head)), then transpose axes 1 and 2."},
            **torch_,
        ),
        Exercise(
            "06.merge_heads",
            title="Merging the heads",
            answers=("merge_heads",),
            inputs=merge_inputs,
            reference=merge_heads,
            mistakes={"heads_reshaped_without_transpose": merge_heads_wrong,
                      "heads_interleaved": merge_heads_interleaved,
                      "heads_wrong_transpose": merge_heads_wrong_transpose,
                      "hard_coded": merge_heads_typed_in},
            hints={"heads_reshaped_without_transpose": MERGE_HINT,
                   "hard_coded": "`merge_heads` reshapes to a width typed in for this notebook (its 2 heads, or its "
                   "d_model of 6), so it fails on any other number of heads. Compute the width from x itself: "
                   "x.shape[1] * x.shape[3] (heads × d_head).",
                   "heads_interleaved": "You moved the heads axis to the end, (batch, seq, d_head, heads), so the "
                   "merged row alternates between the heads' features. Undo split_heads: transpose axes 1 and 2 "
                   "(back to (batch, seq, heads, d_head)), then reshape, so that each head's block comes back "
                   "whole.",
                   "heads_wrong_transpose": "You transposed the last two axes (the tokens and the features of a "
                   "head) instead of the heads and the tokens. Transpose axes 1 and 2, back to (batch, seq, "
                   "heads, d_head), then reshape."},
            **torch_,
        ),
        Exercise(
            "06.multi_head_attention",
            title="Multi-head attention",
            answers=("multi_head_attention",),
            depends_on=("06.split_heads", "06.merge_heads"),
            how=own,
            **mha,
            **torch_,
        ),
        Exercise(
            "06.module",
            notebook=NOTEBOOK,
            title="One multi-head attention module, in evaluation and in training mode",
            answers=("out_eval", "out_train"),
            inputs=upstream_of(world, "out_eval"),
            reference=ref_module,
            reads=MODULE_READS,
            mistakes=MODULE_MISTAKES,
            hints=MODULE_HINTS,
            explains=MODULE_EXPLAINS,
            framework="torch",
            module="mhsa",
            trainable=4,
            exact_trainable=True,  # "four (d_model, d_model) weights", as nn.MultiheadAttention(bias=False)
            probes=(Probe("module_dropout", module_probe_inputs, lambda inputs: 0, "missing_dropout",
                          buffer="causal_mask"),
                    # the cell overwrites the weights with the notebook's, so their start is judged on a new module
                    Probe("module_init", lambda rng: dict(INIT_SIZES), lambda inputs: inputs["d_model"] ** -0.5,
                          "init_unscaled"),
                    # the output must keep its gradient: the module is trained (the cell prints it detached)
                    Probe("module_grad", lambda rng: {"x": module_example()["x_pad"],
                                                      "lengths": module_example()["lengths_pad"]},
                          lambda inputs: 0, "gradient_cut")),
            again=module_again,
            # and a query at −10⁶ whose every other key is hidden: a fill of −1e4 shows; and the query weights times
            # 2⁻²⁰ (scores of about 1e-6): a fill relative to the scores (−100 · max |s|) is then about 0
            edge=(module_fill_far, scaled_by("w_query", 2.0**-20)),
            signs={"mask_fill_too_small": _module_fill_leaks},
            given_as=MODULE_GIVEN,
            raised_hints=((rf"size of tensor [ab] \({MAX_LEN}\)",
                           f"A size of {MAX_LEN} is max_len, the length the causal mask buffer is made for, "
                           "where x is shorter: something in the forward is max_len long. Use the buffer cut to the "
                           "sequence length of x (its first seq rows and columns), and build any other mask (the "
                           "padding one) from x's own length, x.shape[1], not from the buffer's size."),
                          (r"'Linear' object has no attribute",
                           "The TO-DO asks for four (d_model, d_model) weights used as x @ w, which the cell copies "
                           "the notebook's weights into: an nn.Linear is a layer (it keeps its weight transposed, as "
                           "(out, in)), not such a weight. Make each one an nn.Parameter of shape (d_model, "
                           "d_model)."),),
            atol=1e-5,
            points=2,
        ),
        Exercise(
            "06.tf_causal_attention", title="Causal attention in TensorFlow", answers=("tf_causal_attention",),
            hints=_causal_hints("tensorflow"), how=own, dtype="float32", native=native_tf_causal, **causal, **tf_,
        ),
        Exercise(
            "06.tf_multi_head_attention",
            title="Multi-head attention in TensorFlow",
            answers=("tf_multi_head_attention",),
            how=own,
            dtype="float32",
            native=native_tf_mha,
            **{**mha, "mistakes": TF_MHA_MISTAKES, "explains": TF_MHA_EXPLAINS,
               "hints": {**mha["hints"], "transposed_all_axes": "tf.transpose without perm reverses every axis: "
                         "(batch, heads, seq, d_head) becomes (d_head, seq, heads, batch), and the reshape after it "
                         "mixes the numbers of every token and head. Give the new order of all the axes (perm=…), "
                         "so that only the heads and the tokens change places."}},
            **tf_,
        ),
    ]


register(*_exercises())
