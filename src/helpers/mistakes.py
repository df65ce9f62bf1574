"""The catalogue of misconceptions a check can name.

Each code is part of the grader's output (``results.jsonl``), so codes never change
meaning. An exercise lists the codes that can occur in it together with the wrong
variant of its reference computation (see :mod:`helpers.spec`); the hint here is what
the student reads when their answer matches that variant.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MISTAKES", "Mistake"]


@dataclass(frozen=True)
class Mistake:
    code: str
    title: str
    hint: str


_ROWS = [
    ("missing_scale", "scores not scaled",
     "Your scores were not divided by √d_k. Divide them by the square root of the key "
     "dimension (keys.shape[-1]) before the softmax."),
    ("scale_by_d", "scaled by d instead of √d",
     "You divided by d_k itself. Divide by its square root, √d_k (e.g. `** 0.5` or `math.sqrt`)."),
    ("unexpected_scale", "scaled where no scaling was asked for",
     "This step uses the raw dot products. Leave out the division by √d_k here."),
    ("transposed_scores", "K·Qᵀ instead of Q·Kᵀ",
     "You computed keys @ queries.T. Row i of the scores belongs to query i: use queries @ keys.T."),
    ("softmax_wrong_axis", "softmax over the wrong axis",
     "Your softmax normalised each column. Each query's row must sum to 1: use dim=-1 / axis=-1."),
    ("global_softmax", "softmax over the whole matrix",
     "You normalised by the sum over the whole matrix. Normalise each row on its own "
     "(sum over axis=-1 with keepdims=True)."),
    ("no_softmax", "softmax left out",
     "These are raw scores. Apply a softmax over the last axis to turn them into weights."),
    ("sum_normalisation", "divided by the sum instead of softmax",
     "You divided the scores by their sum. Use a softmax (exponentiate first, then normalise) "
     "so every weight is positive."),
    ("rounded_weights", "used the rounded 'readability' weights",
     "You used the rounded weights (0.0/0.5/1.0/0.9/0.1). Use the exact softmax weights."),
    ("elementwise_product", "`*` instead of `@`",
     "You multiplied element by element (`*`). A matrix product is `@` (or torch.matmul / tf.matmul)."),
    ("swapped_projections", "projection matrices mixed up",
     "Two of your projections use each other's weights. Keys come from w_key, queries from "
     "w_query, values from w_value."),
    ("broadcast_wrong_axis", "weights broadcast along the wrong axis",
     "Your weights were lined up with the features of the values instead of with the values "
     "themselves. Weight (i, j) must scale the whole of value j: give the weights a new last "
     "axis (weights.unsqueeze(-1), or [:, :, None]) before multiplying."),
    ("sum_wrong_axis", "summed over the wrong axis",
     "You summed over the wrong axis. Sum over the inputs (the axis of the keys/values, axis=1 "
     "here) so each query keeps its own output."),
    ("unstable_softmax", "softmax without subtracting the maximum",
     "exp() overflowed for large scores. Subtract each row's maximum before exponentiating; "
     "it does not change the result but keeps it finite."),
    ("missing_rescale", "running sums not rescaled when the maximum grows",
     "When a new score (or block) raises the running maximum m, what you summed so far was measured "
     "against the old maximum: multiply the running sum (and the running output) by exp(m_old − m_new) "
     "before adding the new terms."),
    ("mask_after_softmax", "mask applied after the softmax",
     "You masked after the softmax, so the rows no longer sum to 1. Set masked scores to −∞ "
     "before the softmax (or renormalise each row)."),
    ("mask_wrong_triangle", "the wrong triangle masked",
     "You hid the past instead of the future. A causal mask hides positions j > i (above the "
     "diagonal): torch.triu(..., diagonal=1)."),
    ("mask_with_zero", "masked with 0 instead of −∞",
     "A score of 0 still gets weight after the softmax (exp(0) = 1). Fill masked scores with −∞ "
     "(float('-inf') or a very large negative number)."),
    ("heads_reshaped_without_transpose", "heads split by reshape alone",
     "You reshaped (batch, seq, d) to (batch, heads, seq, d_head) directly, which mixes tokens "
     "between heads. Reshape to (batch, seq, heads, d_head) and then transpose axes 1 and 2."),
]

MISTAKES: dict[str, Mistake] = {code: Mistake(code, title, hint) for code, title, hint in _ROWS}
