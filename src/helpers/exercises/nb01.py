"""Notebook 01 — illustrated self-attention (seed 000), in PyTorch and in TensorFlow.

Both halves compute the same numbers from the same inputs, so one set of reference
computations serves both; each half's exercises require its own framework.
"""

from __future__ import annotations

import numpy as np

from ..reference import global_softmax, softmax, sum_normalise
from ..spec import Exercise, register

NOTEBOOK = "01_illustrated_self_attention"
SEED = "000_6403dcf444e40cb5.txt"  # every number it prints must appear in the stored outputs

X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=np.float64)
W_KEY = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float64)
W_QUERY = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float64)
W_VALUE = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=np.float64)
# The seed rounds the softmax "for readability" and then uses the rounded weights.
ROUNDED_WEIGHTS = np.array([[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.0, 0.9, 0.1]])


def _inputs() -> dict:
    return {"x": X, "w_key": W_KEY, "w_query": W_QUERY, "w_value": W_VALUE}


def _qkv(x, w_key, w_query, w_value):
    return x @ w_key, x @ w_query, x @ w_value


def _scores(x, w_key, w_query, w_value):
    k, q, _ = _qkv(x, w_key, w_query, w_value)
    return q @ k.T


# --- references, one per step -------------------------------------------------------


def ref_x(x, **_):
    return {"x": x}


def ref_weights(w_key, w_query, w_value, **_):
    return {"w_key": w_key, "w_query": w_query, "w_value": w_value}


def ref_qkv(**inp):
    k, q, v = _qkv(**inp)
    return {"keys": k, "queries": q, "values": v}


def swapped_qkv(**inp):
    k, q, v = _qkv(**inp)
    return {"keys": q, "queries": k, "values": v}


def ref_scores(**inp):
    return {"attn_scores": _scores(**inp)}


def _weights(normalise, **inp):
    return {"attn_weights": normalise(_scores(**inp))}


def ref_softmax(**inp):
    return _weights(softmax, **inp)


def ref_outputs(**inp):
    _, _, v = _qkv(**inp)
    return {"outputs": softmax(_scores(**inp)) @ v}


def ref_rounded(**inp):
    _, _, v = _qkv(**inp)
    return {"outputs_rounded": ROUNDED_WEIGHTS @ v}


SCORES_MISTAKES = {
    "unexpected_scale": lambda **i: {"attn_scores": _scores(**i) / np.sqrt(3)},
    "elementwise_product": lambda **i: {"attn_scores": _qkv(**i)[1] * _qkv(**i)[0]},
}
SOFTMAX_MISTAKES = {
    "softmax_wrong_axis": lambda **i: _weights(lambda s: softmax(s, axis=0), **i),
    "global_softmax": lambda **i: _weights(global_softmax, **i),
    "no_softmax": lambda **i: _weights(lambda s: s, **i),
    "sum_normalisation": lambda **i: _weights(sum_normalise, **i),
    "rounded_weights": lambda **i: {"attn_weights": ROUNDED_WEIGHTS},
    "unexpected_scale": lambda **i: _weights(lambda s: softmax(s / np.sqrt(3)), **i),
}
OUTPUT_MISTAKES = {
    "rounded_weights": lambda **i: {"outputs": ROUNDED_WEIGHTS @ _qkv(**i)[2]},
    "no_softmax": lambda **i: {"outputs": _scores(**i) @ _qkv(**i)[2]},
    "elementwise_product": lambda **i: {"outputs": softmax(_scores(**i)) * _qkv(**i)[2]},
    "unexpected_scale": lambda **i: {"outputs": softmax(_scores(**i) / np.sqrt(3)) @ _qkv(**i)[2]},
}


def _half(prefix: str, framework: str) -> list[Exercise]:
    p = prefix
    common = {"notebook": NOTEBOOK, "inputs": _inputs, "framework": framework}
    return [
        Exercise(f"01.{p}x", title="The inputs", answers=("x",), reference=ref_x, float_required=True, **common),
        Exercise(
            f"01.{p}weights",
            title="The three weight matrices",
            answers=("w_key", "w_query", "w_value"),
            reference=ref_weights,
            float_required=True,
            **common,
        ),
        Exercise(
            f"01.{p}qkv",
            title="Keys, queries and values",
            answers=("keys", "queries", "values"),
            reference=ref_qkv,
            mistakes={"swapped_projections": swapped_qkv},
            depends_on=(f"01.{p}x", f"01.{p}weights"),
            **common,
        ),
        Exercise(
            f"01.{p}scores",
            title="Attention scores",
            answers=("attn_scores",),
            reference=ref_scores,
            mistakes=SCORES_MISTAKES,
            depends_on=(f"01.{p}qkv",),
            hints={"unexpected_scale": "This notebook follows the seed and uses the raw scores "
                   "queries @ keys.T; the √d_k scaling comes in notebook 02. Leave it out here."},
            **common,
        ),
        Exercise(
            f"01.{p}softmax",
            title="Attention weights (softmax)",
            answers=("attn_weights",),
            reference=ref_softmax,
            mistakes=SOFTMAX_MISTAKES,
            depends_on=(f"01.{p}scores",),
            hints={"unexpected_scale": "You scaled the scores by √3 before the softmax. This notebook "
                   "uses the unscaled scores: apply the softmax to attn_scores directly."},
            **common,
        ),
        Exercise(
            f"01.{p}outputs",
            title="Outputs",
            answers=("outputs",),
            reference=ref_outputs,
            mistakes=OUTPUT_MISTAKES,
            depends_on=(f"01.{p}softmax", f"01.{p}qkv"),
            **common,
        ),
        Exercise(
            f"01.{p}outputs_rounded",
            title="Outputs from the rounded weights",
            answers=("outputs_rounded",),
            reference=ref_rounded,
            mistakes={"elementwise_product": lambda **i: {"outputs_rounded": ROUNDED_WEIGHTS * _qkv(**i)[2]}},
            depends_on=(f"01.{p}qkv",),
            **common,
        ),
    ]


register(*_half("", "torch"), *_half("tf_", "tensorflow"))
