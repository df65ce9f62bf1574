"""The catalogue of misconceptions a check can name.

Each code is part of the grader's output (``results.jsonl``), so codes never change
meaning. Three kinds:

- ``concept``: a misconception about attention. An exercise lists the codes that can occur in
  it together with the wrong variant of its reference computation (see
  :mod:`helpers.course.spec`); the hint is what the student reads when the answer matches it.
- ``property``: the answer has the right numbers but not what the TO-DO asks for (dtype,
  framework, trainable weights, inputs left unchanged, computed rather than typed in); the
  checks write these messages themselves, naming the variable.
- ``process``: the answer is right but not computed the way the exercise is about (memory that
  grows like n², a stream read twice).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MISTAKES", "Mistake"]


@dataclass(frozen=True)
class Mistake:
    code: str
    title: str
    hint: str
    kind: str = "concept"


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
    ("missing_keepdim", "a row sum without keepdim",
     "Your row sums lost their axis, so the division lined each sum up with a column instead of its own row. "
     "Keep the axis: `.sum(dim=-1, keepdim=True)` (NumPy: `keepdims=True`)."),
    ("elementwise_with_transpose", "`*` with `.T` instead of `@`",
     "You multiplied element by element with a transpose (`a * b.T`). On square matrices that runs but "
     "pairs up single entries; a score is a dot product of whole rows: `a @ b.T`."),
    ("wrong_query_row", "the wrong row taken as the query",
     "Your result belongs to another query: Python counts from 0, so the second input is row 1."),
    ("global_max_subtraction", "one maximum for the whole matrix",
     "You subtracted the maximum of the whole matrix, not of each row. A row far below that maximum "
     "underflows to 0/0. Subtract each row's own maximum (axis=-1, keepdims=True)."),
    ("scale_by_d_model", "scaled by √d_model instead of √d_k",
     "You divided by the square root of the model (embedding) width. The scores are dot products of keys and "
     "queries, so divide by √d_k, the size of one key (of one head's key, with several heads)."),
    ("dropout_no_rescale", "dropout without rescaling",
     "You zeroed the dropped weights but did not rescale the kept ones. Inverted dropout divides what it keeps "
     "by (1 − p), so the expected value stays the same."),
    ("dropout_scale_by_keep", "dropout multiplied by (1 − p)",
     "You multiplied the kept weights by (1 − p). Inverted dropout divides them by (1 − p): during training "
     "fewer weights survive, so each one counts for more."),
    ("dropout_divide_by_p", "dropout divided by p",
     "You divided the kept weights by p, the drop probability. Divide by the keep probability, 1 − p."),
    ("missing_output_projection", "no output projection",
     "You concatenated the heads but left out the output projection. Multiply the merged heads by w_o: it is "
     "what mixes the heads' results into one vector per token."),
    ("softmax_over_heads", "softmax over the heads axis",
     "Your softmax ran over the heads axis. Each head normalises its own scores over the keys: softmax over "
     "the last axis."),
    ("padding_mask_on_queries", "padding masked on the query axis",
     "You masked the padded queries (rows) instead of the padded keys (columns). A real token must not attend "
     "to padding: hide the columns of the padded keys."),
    ("padding_mask_inverted", "padding mask inverted",
     "Your mask hides the real tokens and keeps the padding. Check which value of the mask means 'attend'."),
    ("dropped_last_block", "the last, shorter block left out",
     "Your loop skips the last block when the number of keys is not a multiple of the block size. Let the last "
     "block be shorter: `range(0, n, block_size)` with slices `k[start:start + block_size]`."),
    ("first_score_as_max", "the running maximum not updated",
     "Your running maximum never moves past its first value, so a larger score later overflows (or a very "
     "negative start underflows to 0). Update it with every score: m = max(m, s)."),
    ("max_from_zero", "the running maximum started at 0",
     "Your running maximum starts at 0, so a stream of very negative scores underflows: every exp(s − 0) is 0. "
     "Start it at −∞ (or at the first score)."),
    # --- notebook 06
    ("dropout_in_eval", "dropout applied in evaluation",
     "Dropout is only for training. In evaluation mode (`model.eval()`, `training=False`) return the weights "
     "unchanged."),
    ("missing_dropout", "no dropout while training",
     "In training mode (`model.train()`, `training=True`) dropout must act on the attention weights: multiply "
     "them by the keep-mask and divide by (1 − p)."),
    ("dropout_mode_inverted", "dropout in evaluation instead of training",
     "Your dropout acts in evaluation mode and not in training mode: the test of the mode is the wrong way "
     "round. Drop weights only when training (`self.training` is True / `training=True`)."),
    ("fully_masked_row", "a row with every key masked",
     "In some rows your mask hides every key, so the softmax there is 0/0 = NaN. Every query needs at least one "
     "key it may attend to: check which positions your mask hides (keys, not whole rows)."),
    ("causal_mask_inverted", "causal mask the wrong way round",
     "Your mask hides what each query may see (keys j ≤ i, itself included) and shows the future. Hide only the "
     "positions above the diagonal (j > i)."),
    ("missing_causal_mask", "no causal mask",
     "Every query still sees the keys after it: the causal mask is missing. Hide the scores above the diagonal "
     "(key j > query i) before the softmax."),
    ("missing_padding_mask", "no padding mask",
     "The padded keys are not hidden. Hide the scores of the keys at positions ≥ the sentence's length before "
     "the softmax."),
    ("padding_mask_off_by_one", "padding mask off by one",
     "Your mask shows one padded key too many: positions count from 0, so key j is real when j < length (not ≤)."),
    # --- notebook 09
    ("cross_keys_from_decoder", "cross-attention keys and values taken from the decoder",
     "Your keys and values come from the decoder's own tokens, which makes it self-attention again. In "
     "cross-attention only the queries come from the decoder; the keys and values come from the encoder's outputs."),
    ("cross_queries_from_encoder", "cross-attention queries taken from the encoder",
     "Your queries come from the encoder, so you get one output per encoder token. The queries come from the "
     "decoder (one output per token being written); the keys and values from the encoder."),
    ("cross_roles_swapped", "the two sequences' roles swapped in cross-attention",
     "You took the queries from the encoder and the keys and values from the decoder: the roles the wrong way "
     "round. The decoder asks (queries); the encoder's outputs are looked up (keys and values)."),
    ("cross_causal_mask", "a causal mask in cross-attention",
     "Cross-attention needs no causal mask: the whole source sentence is known before decoding starts, so every "
     "decoder token may look at every real encoder token. Hide only the encoder's padding."),
    ("cache_not_appended", "the new key and value never stored in the cache",
     "Each token attends to its own key only: the new key and value are not kept in the cache, so the cache "
     "stays empty. Append them to the cache at every step, then attend over everything the cache holds."),
    ("cache_appended_late", "the new key and value appended after attending",
     "Each token attends to the earlier tokens but not to itself: its key and value are added to the cache only "
     "after the attention. Append first, then attend: a token may look at itself."),
    ("cache_remasked", "the cached keys hidden by a mask counted from 0",
     "Your causal mask counts the new queries as positions 0, 1, …, so it hides cached keys that lie in the past. "
     "The new queries come after everything in the cache: with t keys cached, new query i is at position t + i "
     "and may see keys j ≤ t + i (one new token sees the whole cache, no mask needed)."),
    ("cache_mask_off_by_one", "the cache mask's offset one too small",
     "Your mask's offset is one too small: each new query loses its own key. With t keys cached, new query i is "
     "at position t + i and may see keys j ≤ t + i, itself included."),
    ("cache_mask_sees_next", "the cache mask's offset one too large",
     "Your mask's offset is one too large: each new query also sees the new token after it. With t keys cached, "
     "new query i is at position t + i and may see keys j ≤ t + i, not j ≤ t + i + 1."),
    ("cache_position_offset", "the new token's position counted from 0",
     "Every new token gets position 0: its position embedding is counted within the one-token input instead of "
     "within the whole sequence. Token t is at position t (the number of tokens already in the cache)."),
    ("cache_position_off_by_one", "the new token's position one too far",
     "Every token gets the position after its own (t + 1 instead of t), e.g. the cache's length read after "
     "appending to it. Token t is at position t: the number of tokens in the cache before it is added."),
    ("position_embedding_missing", "the position embedding left out",
     "Your tokens enter the layer without their position embedding, so the layer cannot tell where each one "
     "stands. Add the row of the position table for the token's position to its vector before projecting it."),
    ("cache_missing_kv_factor", "the cache counted without its values (no factor 2)",
     "The cache holds two tensors per layer, the keys and the values: multiply by 2."),
    ("cache_missing_layers", "the cache of one layer only",
     "Every layer keeps its own keys and values: multiply by the number of layers."),
    ("cache_counted_in_numbers", "the cache counted in numbers, not bytes",
     "You counted the numbers in the cache, not their bytes: multiply by the bytes of one number (4 in float32, "
     "2 in float16)."),
    ("cache_quadratic_in_n", "the cache counted as n × n",
     "The cache grows linearly with n: each token adds one key and one value per layer and head. An n × n matrix "
     "is the size of the scores, which the cache does not keep."),
]

_PROPERTY_ROWS = [
    ("wrong_dtype", "not the dtype the step asks for",
     "Your answer has another dtype than the step asks for: make it float32."),
    ("wrong_framework", "a tensor of another framework",
     "Your answer is a tensor of another framework than this step is about."),
    ("mutates_input", "an input changed in place",
     "Your code changes one of its inputs in place, so the caller's variable changes too. Compute into a new "
     "tensor instead."),
    ("not_trainable", "weights that cannot be trained",
     "The module's weights are not trainable parameters: create them as nn.Parameter(...) (or nn.Linear) and "
     "leave requires_grad at True."),
    ("reads_globals", "a function that reads the notebook's variables",
     "Your function reads the notebook's variables instead of its own arguments."),
    ("hard_coded", "numbers typed in rather than computed",
     "Your cell gives the same answer whatever its inputs: compute it from the variables the step starts from."),
    ("copied_answer", "an earlier result copied instead of computed",
     "Your answer is a copy of an earlier result that happens to be equal here. This step asks you to compute it "
     "yourself, from its own inputs."),
    ("cell_raised", "the cell that defines the answer raised",
     "The cell that defines this answer raised an error the last time it ran: fix it and run it again."),
]
_PROCESS_ROWS = [
    ("full_score_matrix", "the whole n × n score matrix held at once",
     "Your function holds far more memory than one block of scores: it builds the whole n × n score matrix "
     "(or something as large). Work through the keys one block at a time, keeping only a running maximum, a "
     "running sum and a running output per query."),
    ("not_one_pass", "the stream read more than once",
     "Your function reads the stream of scores more than once (or keeps all of it). An online softmax reads "
     "each score once, as it arrives, and keeps only a running maximum and a running sum."),
]

MISTAKES: dict[str, Mistake] = {
    **{code: Mistake(code, title, hint) for code, title, hint in _ROWS},
    **{code: Mistake(code, title, hint, "property") for code, title, hint in _PROPERTY_ROWS},
    **{code: Mistake(code, title, hint, "process") for code, title, hint in _PROCESS_ROWS},
}
