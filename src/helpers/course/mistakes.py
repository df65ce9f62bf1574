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
    # --- notebook 10
    ("missing_position_embedding", "no position embeddings",
     "Your model's input vectors carry no position: add each position's row of the position table to the token's "
     "row of the token table. Without it, equal tokens at different places look the same to attention."),
    ("missing_residual", "the attention output replaces its input",
     "Your model hands on only what attention returns. Add it to its input instead (x + attention(x), a residual "
     "connection): the vector keeps what its token was and gains what attention found."),
    ("softmax_before_cross_entropy", "probabilities where the loss wants logits",
     "A softmax was applied before the cross-entropy. F.cross_entropy takes the raw scores (logits) and applies "
     "the (log-)softmax itself; a softmax before it squashes the scores and the loss barely moves."),
    ("targets_not_shifted", "each guess compared with its own token",
     "You compared the guess made at position t with the token at position t. The guess at position t is about "
     "the NEXT token: compare logits[:, t] with tokens[:, t + 1]."),
    ("prompt_positions_counted", "the prompt's positions counted too",
     "You counted the guesses about the prompt's digits too. They are random, so no model can guess them: count "
     "only the guesses made from the separator on, about the answer tokens."),
    ("first_answer_skipped", "the first answer token left out",
     "You left out the guess made at the separator itself. The first answer token is guessed there: the guesses "
     "that count are made at positions L (the separator) to 2L − 1."),
    ("summed_not_averaged", "summed instead of averaged",
     "You added up over the guesses instead of averaging them, so the number grows with the batch and the length. "
     "Take the mean over every answer guess of every sequence."),
    ("loss_sign_flipped", "log-likelihood without its minus sign",
     "Your loss is the mean log-probability of the right tokens, which training would push down. The cross-entropy "
     "is minus that: −mean(log p(right token))."),
    ("nll_without_log_softmax", "NLL loss on raw logits",
     "F.nll_loss expects log-probabilities, but it was given raw logits. Apply log_softmax first, or use "
     "F.cross_entropy, which does both."),
    ("whole_sequences_counted", "whole sequences counted instead of tokens",
     "You counted the sequences whose answer is entirely right. This accuracy is per token: the fraction of answer "
     "tokens guessed right."),
    ("missing_zero_grad", "gradients never cleared",
     "PyTorch adds every new gradient to the one already in `.grad`. Clear the gradients in every step "
     "(optimizer.zero_grad()) before loss.backward(), or each update uses the sum of all gradients so far."),
    ("weights_never_updated", "a training step that changes nothing",
     "Your training step leaves the weights as they were. Compute the gradients (loss.backward()), then use them "
     "(optimizer.step()), with no zero_grad() between the two."),
    ("step_before_backward", "optimizer step before the backward pass",
     "Your optimizer steps before this batch's gradients exist, so each update uses older gradients. Order: "
     "zero_grad, loss, backward, step."),
    ("divided_by_batch_size", "divided by the number of sequences",
     "You divided a sum over every guess by the number of sequences, so each sequence's L guesses add up. Average "
     "over the guesses themselves: divide by sequences × L (or take the mean of all of them)."),
    ("length_from_batch_axis", "L taken from the batch axis",
     "Your L comes from the number of sequences (len(tokens) or tokens.shape[0]). A sequence's length is along "
     "axis 1: L = tokens.shape[1] // 2."),
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
