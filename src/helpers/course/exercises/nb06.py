"""Notebook 06 — masks, dropout and multi-head attention (beyond the seeds), PyTorch and TensorFlow.

Every exercise here is a function, checked on the notebook's example and on fresh random
inputs whose shapes change from trial to trial. The examples are made with NumPy's seeded
generator exactly as the notebook makes them, so trial 0 is the example the student sees.
Masks are built from shapes and lengths inside the functions, so no input is boolean.
"""

from __future__ import annotations

import numpy as np

from ..reference import softmax
from ..spec import Exercise, register

NOTEBOOK = "06_masks_dropout_multihead"

# --- the notebook's examples (same generator calls as in the notebook) ------------------

SEQ_LEN, D_K = 5, 4  # "the cat sat on mats", 4-d queries/keys/values
LENGTHS = np.array([5, 3])  # a batch of two sentences, the second padded by two
D_MODEL, NUM_HEADS = 6, 2


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
    w_q, w_k, w_v, w_o = (rng.normal(size=(4, D_MODEL, D_MODEL)) / np.sqrt(D_MODEL)).round(2)
    return {"x": x, "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o, "num_heads": NUM_HEADS}


# --- random inputs: shapes move so that hard-coded sizes fail ---------------------------


def _qkv(rng, batch: tuple = ()) -> dict:
    n, d = int(rng.integers(3, 7)), int(rng.integers(2, 6))
    q, k, v = rng.normal(size=(3, *batch, n, d))
    return {"q": q, "k": k, "v": v}


def causal_inputs(rng=None) -> dict:
    if rng is None:
        return causal_example()
    return _qkv(rng, (int(rng.integers(1, 3)),))  # with a batch axis: (batch, seq, d)


def padded_inputs(rng=None) -> dict:
    if rng is None:
        return padded_example()
    b = int(rng.integers(2, 4))
    inp = _qkv(rng, (b,))
    n = inp["q"].shape[-2]
    lengths = rng.integers(1, n + 1, size=b)
    lengths[0] = n  # one sentence fills the batch, as in a real padded batch
    inp["lengths"] = lengths
    return inp


def dropout_inputs(rng=None) -> dict:
    if rng is None:
        return dropout_example()
    n = int(rng.integers(3, 7))
    p = float(rng.choice([0.1, 0.25, 0.5]))
    keep = (rng.random((n, n)) >= p).astype(np.float64)
    return {"weights": softmax(rng.normal(size=(n, n))), "keep": keep, "p": p}


def _heads_shape(rng) -> tuple[int, int, int, int]:
    return int(rng.integers(1, 3)), int(rng.integers(3, 7)), int(rng.integers(2, 4)), int(rng.integers(2, 4))


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


def mha_inputs(rng=None) -> dict:
    if rng is None:
        return mha_example()
    b, s, h, dh = _heads_shape(rng)
    d = h * dh
    w_q, w_k, w_v, w_o = rng.normal(size=(4, d, d)) / np.sqrt(d)
    return {"x": rng.normal(size=(b, s, d)), "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": w_o, "num_heads": h}


# --- building blocks (NumPy, float64) ----------------------------------------------------


def causal_scores(q, k, v=None, scale=True):
    s = q @ np.swapaxes(k, -1, -2)
    return s / np.sqrt(k.shape[-1]) if scale else s


def _attend(scores, allowed, v, how="inf", axis=-1):
    """Masked softmax of ``scores`` (``allowed`` True = may attend), times the values."""
    if how == "inf":
        with np.errstate(invalid="ignore"):  # a row with nothing allowed is 0/0: NaN, as in the frameworks
            w = softmax(np.where(allowed, scores, -np.inf), axis=axis)
    elif how == "zero":
        w = softmax(np.where(allowed, scores, 0.0))
    elif how == "after":
        w = softmax(scores) * allowed
    else:
        raise ValueError(how)
    return w @ v


def _lower(n):
    return np.tril(np.ones((n, n), dtype=bool))


def _causal(q, k, v, how="inf", scale=True, allowed=None):
    n = q.shape[-2]
    return _attend(causal_scores(q, k, scale=scale), _lower(n) if allowed is None else allowed, v, how)


def ref_causal(q, k, v):
    return _causal(q, k, v)


CAUSAL_MISTAKES = {
    "mask_after_softmax": lambda q, k, v: _causal(q, k, v, how="after"),
    "mask_wrong_triangle": lambda q, k, v: _causal(q, k, v, allowed=_lower(q.shape[-2]).T),
    "mask_with_zero": lambda q, k, v: _causal(q, k, v, how="zero"),
    "missing_scale": lambda q, k, v: _causal(q, k, v, scale=False),
}


def key_allowed(lengths, n):
    """(batch, 1, n): True where key j is a real token of its sentence."""
    return (np.arange(n)[None, :] < np.asarray(lengths)[:, None])[:, None, :]


def query_allowed(lengths, n):
    """(batch, n, 1): True where query i is a real token (the wrong axis to mask)."""
    return (np.arange(n)[None, :] < np.asarray(lengths)[:, None])[:, :, None]


def _padded(q, k, v, lengths, how="inf", scale=True, allowed=None):
    allowed = key_allowed(lengths, k.shape[-2]) if allowed is None else allowed
    return _attend(causal_scores(q, k, scale=scale), allowed, v, how)


def ref_padded(q, k, v, lengths):
    return _padded(q, k, v, lengths)


PADDED_MISTAKES = {
    "padding_mask_on_queries": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=np.broadcast_to(query_allowed(lengths, q.shape[-2]),
                                                  (len(lengths),) + (q.shape[-2],) * 2)),
    "padding_mask_inverted": lambda q, k, v, lengths: _padded(
        q, k, v, lengths, allowed=~key_allowed(lengths, k.shape[-2])),
    "mask_after_softmax": lambda q, k, v, lengths: _padded(q, k, v, lengths, how="after"),
    "mask_with_zero": lambda q, k, v, lengths: _padded(q, k, v, lengths, how="zero"),
    "missing_scale": lambda q, k, v, lengths: _padded(q, k, v, lengths, scale=False),
}


def ref_dropout(weights, keep, p):
    return weights * keep / (1.0 - p)


DROPOUT_MISTAKES = {
    "dropout_no_rescale": lambda weights, keep, p: weights * keep,
    "dropout_scale_by_keep": lambda weights, keep, p: weights * keep * (1.0 - p),
    "dropout_divide_by_p": lambda weights, keep, p: weights * keep / p,
}


def split_heads(x, num_heads):
    b, s, d = x.shape
    return x.reshape(b, s, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def split_heads_wrong(x, num_heads):
    b, s, d = x.shape
    return x.reshape(b, num_heads, s, d // num_heads)


def merge_heads(x):
    b, h, s, dh = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * dh)


def merge_heads_wrong(x):
    b, h, s, dh = x.shape
    return x.reshape(b, s, h * dh)


def _mha(x, w_q, w_k, w_v, w_o, num_heads, wrong_heads=False, scale=True, d_model_scale=False, axis=-1,
         project=True):
    split, merge = (split_heads_wrong, merge_heads_wrong) if wrong_heads else (split_heads, merge_heads)
    q, k, v = (split(x @ w, int(num_heads)) for w in (w_q, w_k, w_v))
    allowed = np.ones((q.shape[-2], k.shape[-2]), dtype=bool)
    scores = causal_scores(q, k, scale=scale and not d_model_scale)
    if d_model_scale:
        scores = scores / np.sqrt(x.shape[-1])
    merged = merge(_attend(scores, allowed, v, axis=axis))
    return merged @ w_o if project else merged


def ref_mha(x, w_q, w_k, w_v, w_o, num_heads):
    return _mha(x, w_q, w_k, w_v, w_o, num_heads)


MHA_MISTAKES = {
    "heads_reshaped_without_transpose": lambda **i: _mha(**i, wrong_heads=True),
    "missing_scale": lambda **i: _mha(**i, scale=False),
    "scale_by_d_model": lambda **i: _mha(**i, d_model_scale=True),
    "softmax_over_heads": lambda **i: _mha(**i, axis=1),
    "missing_output_projection": lambda **i: _mha(**i, project=False),
}

MERGE_HINT = (
    "You reshaped (batch, heads, seq, d_head) straight to (batch, seq, d_model), which mixes "
    "tokens between heads. Transpose axes 1 and 2 first (back to (batch, seq, heads, d_head)), "
    "then reshape."
)
MHA_SCALE_HINT = (
    "Your scores were not divided by √d_head. Inside each head, divide q·kᵀ by the square root "
    "of the head size (d_model // num_heads) before the softmax."
)
WRONG_TRIANGLE_HINT = (
    "You hid the past instead of the future. Query i may look at keys j ≤ i: hide the positions "
    "above the diagonal (torch.triu(..., diagonal=1) / the upper triangle), keep the lower one."
)
PADDED_ZERO_HINT = (
    "A score of 0 still gets weight after the softmax (exp(0) = 1), so the padding positions "
    "leak into the output. Fill the scores of padded keys with −∞ (float('-inf'))."
)


def _exercises() -> list[Exercise]:
    common = {"notebook": NOTEBOOK, "kind": "function"}
    torch_ = {**common, "framework": "torch"}
    tf_ = {**common, "framework": "tensorflow"}
    causal = {"inputs": causal_inputs, "reference": ref_causal, "mistakes": CAUSAL_MISTAKES,
              "hints": {"mask_wrong_triangle": WRONG_TRIANGLE_HINT}}
    mha = {"inputs": mha_inputs, "reference": ref_mha, "mistakes": MHA_MISTAKES, "atol": 1e-5,
           "hints": {"missing_scale": MHA_SCALE_HINT}}
    return [
        Exercise("06.causal_attention", title="Causal attention", answers=("causal_attention",), **causal, **torch_),
        Exercise(
            "06.padded_attention",
            title="Attention over a padded batch",
            answers=("padded_attention",),
            inputs=padded_inputs,
            reference=ref_padded,
            mistakes=PADDED_MISTAKES,
            hints={"mask_with_zero": PADDED_ZERO_HINT},
            **torch_,
        ),
        Exercise(
            "06.inverted_dropout",
            title="Dropout with a given keep-mask",
            answers=("inverted_dropout",),
            inputs=dropout_inputs,
            reference=ref_dropout,
            mistakes=DROPOUT_MISTAKES,
            **torch_,
        ),
        Exercise(
            "06.split_heads",
            title="Splitting into heads",
            answers=("split_heads",),
            inputs=split_inputs,
            reference=split_heads,
            mistakes={"heads_reshaped_without_transpose": split_heads_wrong},
            **torch_,
        ),
        Exercise(
            "06.merge_heads",
            title="Merging the heads",
            answers=("merge_heads",),
            inputs=merge_inputs,
            reference=merge_heads,
            mistakes={"heads_reshaped_without_transpose": merge_heads_wrong},
            hints={"heads_reshaped_without_transpose": MERGE_HINT},
            **torch_,
        ),
        Exercise(
            "06.multi_head_attention",
            title="Multi-head attention",
            answers=("multi_head_attention",),
            depends_on=("06.split_heads", "06.merge_heads"),
            **mha,
            **torch_,
        ),
        Exercise(
            "06.tf_causal_attention", title="Causal attention in TensorFlow", answers=("tf_causal_attention",),
            **causal, **tf_,
        ),
        Exercise(
            "06.tf_multi_head_attention",
            title="Multi-head attention in TensorFlow",
            answers=("tf_multi_head_attention",),
            **mha,
            **tf_,
        ),
    ]


register(*_exercises())
