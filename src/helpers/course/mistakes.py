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
     "Your scores end up divided by d_k itself, not by its square root √d_k (e.g. `** 0.5` or `math.sqrt`). If "
     "you already divide by √d_k, look for a second scaling (of the queries or the keys too)."),
    ("unexpected_scale", "scaled where no scaling was asked for",
     "This step uses the raw dot products. Leave out the division by √d_k here."),
    ("transposed_scores", "K·Qᵀ instead of Q·Kᵀ",
     "You computed keys @ queries.T. Row i of the scores belongs to query i: use queries @ keys.T."),
    ("symmetrised_scores", "scores made symmetric",
     "Your scores are symmetric: score (i, j) equals score (j, i), as the average (or the larger) of "
     "queries @ keys.T and its transpose gives, or one triangle computed and mirrored. The example's scores happen "
     "to be symmetric, but the "
     "score of query i with key j, q_i · k_j, is not q_j · k_i in general: use queries @ keys.T as it is."),
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
     "Your softmax does not subtract each row's own maximum, and it shows on large scores: in float32, exp() of a "
     "score above about 88 is inf (and inf / inf is NaN), and exp() of scores all far below 0 is 0 (0 / 0). "
     "Subtract each row's own maximum before exponentiating (not its mean or its minimum): that changes no weight, "
     "and the largest exponential is then exp(0) = 1."),
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
    ("mask_by_value", "the mask applied by the scores' values",
     "You hid the scores that are 0 (after zeroing the future with tril, `scores == 0`), not the future positions: "
     "a real score of exactly 0 is hidden as well, and a query whose only visible score is 0 sees nothing (NaN). "
     "Build the mask from the positions (key j after query i), not from the scores."),
    ("mask_with_zero", "masked with 0 instead of −∞",
     "Your masked scores are 0, or near it (−1e-9 is not −1e9): a score of 0 still gets weight after the softmax "
     "(exp(0) = 1). Fill masked scores with −∞ "
     "(float('-inf') or a very large negative number)."),
    ("mask_fill_too_small", "hidden scores filled with a finite number that real scores can fall below",
     "Your mask fills the hidden scores with a finite number that is not low enough. A query whose real scores "
     "are all below it (on some inputs, every score of one query lies far below 0) gives nearly all its weight to "
     "the keys it must "
     "not see. Fill with −∞, or with a number below any score (−1e9, or the lowest number of the scores' "
     "dtype)."),
    ("loss_capped", "a loss that cannot grow past a cap",
     "On a batch where the model is confidently wrong (the right tokens' probabilities about e^-25) your loss stays "
     "below the right one: something caps it. A small number added inside the log (log(p + 1e-12)) stops it near "
     "27.6; a clamp stops it where you put it (and passes no gradient above). Use F.cross_entropy on the "
     "logits (or log_softmax and the right tokens' entries): exact for any logits."),
    ("heads_reshaped_without_transpose", "heads split by reshape alone",
     "You reshaped (batch, seq, d) to (batch, heads, seq, d_head) directly, which mixes tokens "
     "between heads. Reshape to (batch, seq, heads, d_head) and then transpose axes 1 and 2."),
    ("missing_keepdim", "a row sum without keepdim",
     "A row reduction of yours (the row sums you divide by, or a logsumexp you subtract) lost its axis, so it "
     "lined each row's number up with a column instead of its own row. Keep the axis: `keepdim=True` (NumPy: "
     "`keepdims=True`)."),
    ("elementwise_with_transpose", "`*` with `.T` instead of `@`",
     "You multiplied element by element with a transpose (`a * b.T`). On square matrices that runs but "
     "pairs up single entries; a score is a dot product of whole rows: `a @ b.T`."),
    ("wrong_query_row", "the wrong row taken as the query",
     "Your result belongs to another query: Python counts from 0, so the second input is row 1."),
    ("global_max_subtraction", "one maximum for the whole matrix",
     "You subtracted the maximum of the whole matrix, not of each row. In a row whose scores lie far below that "
     "maximum, the exponentials underflow to 0 (or lose their digits), and a row of zeros gives 0 / 0 = NaN. "
     "Subtract each row's own maximum (axis=-1, keepdims=True)."),
    ("log_softmax_as_weights", "log-probabilities instead of weights",
     "Your weights are log-probabilities (a log_softmax): negative numbers, the logarithms of the weights. The "
     "weights themselves are the softmax: positive, each row summing to 1."),
    ("sigmoid_as_softmax", "each score's sigmoid instead of a softmax over the row",
     "Your weights are each score's sigmoid, taken on its own: they lie between 0 and 1 but do not sum to 1 over a "
     "row, and a score does not compete with the others. Use the softmax over each row of scores."),
    ("softmax_base_two", "powers of 2 instead of e in the softmax",
     "Your softmax raises 2 to the scores (`2 ** s`, `np.exp2`, `tf.pow(2.0, s)`) instead of e: that is the softmax "
     "of the scores times ln 2 ≈ 0.69, flatter than the right one. Use the exponential (np.exp, torch.exp, tf.exp), "
     "or the library's softmax."),
    ("logsumexp_rounding", "a softmax as exp(s − logsumexp(s)) in float32, on large scores",
     "Your softmax is exp(s − logsumexp(s)): right in exact arithmetic, and it never overflows. But in float32 the "
     "log-sum-exp of large scores is rounded to the spacing of numbers that large (1/128 near 70 000), and that one "
     "rounding moves every weight of the row by the same factor, up to a few percent. Subtract each row's maximum "
     "first and exponentiate the differences, which are exact (the library's softmax does that), or call the "
     "library's softmax."),
    ("global_max_rounding", "one maximum for the whole matrix subtracted before a softmax",
     "You subtracted one maximum for the whole matrix before the softmax. In exact arithmetic that changes nothing "
     "(the softmax subtracts each row's own maximum anyway), but in float32 a score minus a much larger maximum is "
     "rounded to the spacing of numbers that large, so a row whose scores lie far below it loses digits. Leave that "
     "subtraction out: the library's softmax is stable on its own."),
    ("max_wrong_axis", "each column's maximum subtracted instead of each row's",
     "You subtracted the maximum of each column (axis=0), not of each row. Within a row, each score is then "
     "shifted by a different number, and that changes the softmax: only one number per row cancels out. Take "
     "each row's own maximum: axis=-1, keepdims=True."),
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
    # --- notebook 04
    ("stack_wrong_axis", "stacked along the wrong axis",
     "Your stack put the new axis in the wrong place. A stack adds one axis where `axis=` says (0 by default): "
     "choose the position at which the stacked items should run."),
    ("concat_instead_of_stack", "concatenated where a new axis was needed",
     "You concatenated, which joins the pieces along an axis they already have, so the result lacks an axis. "
     "A stack creates a new axis for the pieces."),
    ("transposed_first_operand", "the first operand transposed instead of the second",
     "You transposed the first operand of the product (`transpose_a=True`, or a `.T` on the left). A score "
     "pairs a query row with a key row: transpose the second operand, the keys."),
    ("keys_not_transposed", "keys not transposed (Q·K instead of Q·Kᵀ)",
     "You multiplied the queries by the keys without transposing the keys. On square matrices that runs, but "
     "entry (i, j) then pairs query i with column j of the keys. Each score is query i · key j: use the "
     "transposed keys."),
    ("missing_squeeze", "an axis of length 1 left in",
     "Your tensor still has an axis of length 1 that the step drops. Squeeze it away before you go on."),
    ("weights_cast_to_int", "weights cast to integers",
     "You cast the weights to an integer type, which cuts every weight below 1 down to 0. Cast the values to "
     "float instead, and keep the weights as they are."),
    ("scale_after_softmax", "divided by √d_k after the softmax",
     "You divided by √d_k after the softmax, so the weights no longer sum to 1. The division belongs inside: "
     "softmax(scores / √d_k)."),
    ("product_order_reversed", "the factors of a matrix product in the wrong order",
     "You multiplied in the wrong order (B·A instead of A·B). With square matrices that runs, but it is another "
     "product: here the rows are the tokens, so each row is multiplied by the matrix on its right."),
    ("weights_not_applied", "the weights returned instead of the weighted values",
     "You returned the attention weights, one row of n weights per query. The output is those weights applied "
     "to the values: multiply them by the values, so each row becomes a weighted sum of the value rows."),
    ("values_transposed", "the values transposed",
     "You transposed the values. The outputs are the weights times the values as they are: row j of the values "
     "is value j, and weight (i, j) scales the whole of it."),
    ("scale_by_n", "scaled by √n instead of √d_k",
     "You divided by the square root of the number of tokens n (the first axis of the keys). d_k is the width "
     "of one key, the last axis of the keys."),
    # --- notebook 05
    # scale_after_softmax: catalogued under notebook 04 (the same misconception)
    ("max_without_keepdim", "a row maximum without keepdims",
     "Your row maxima lost their axis (an (n,) vector), so NumPy lined them up with the columns: entry (i, j) "
     "was shifted by the maximum of row j, which the softmax does not cancel. Keep the axis: keepdims=True."),
    ("scale_truncated", "√d_k cut to a whole number",
     "Your scores are divided by √d_k cut to a whole number (`int(d_k ** 0.5)`, `math.isqrt(d_k)`): for d_k = 2 "
     "or 3 that is 1, no scaling at all, and for d_k = 8 it is 2 instead of 2.83. Divide by the square root itself: "
     "`d_k ** 0.5` or `math.sqrt(d_k)`."),
    ("power_precedence", "`** 1/2` for a square root",
     "`d_k ** 1/2` is not √d_k: Python applies `** 1` first and then divides by 2, so no square root is taken "
     "(`s / d_k ** 1/2` is s / d_k / 2, and `s / (d_k ** 1/2)` is s / (d_k / 2)). Write d_k ** 0.5 (or "
     "np.sqrt(d_k))."),
    ("sum_without_axis", "one sum over the whole array instead of one per row",
     "You summed without an axis, which adds up every entry into one number. Sum along each row (axis=1 or "
     "axis=-1), one sum per row."),
    ("scale_multiplied", "multiplied by √d_k instead of divided",
     "You multiplied the scores by √d_k. The scaling divides them by √d_k, which shrinks their spread back "
     "to about 1."),
    ("values_times_weights", "values @ weights instead of weights @ values",
     "You computed values @ weights. Output i mixes the rows of the values with the weights of row i: "
     "weights @ values."),
    # --- notebook 02
    ("fixed_scale", "a fixed number instead of √d_k of the keys at hand",
     "You divided by a fixed number (this notebook's √d_k) whatever the width of the keys. Take d_k from the "
     "keys themselves (keys.shape[-1]), so that the code works for any size."),
    ("counted_tensors", "weight tensors counted instead of their numbers",
     "You counted the weight tensors, not the numbers in them. Add up the number of entries of each "
     "parameter (a tensor's .numel())."),
    ("softmax_instead_of_sum", "a softmax where the plain division by the sum was asked",
     "These are softmax weights. This step divides the scores by their plain sum, without exponentials."),
    ("mixed_inputs_not_values", "the inputs mixed instead of the values",
     "You mixed the inputs x. With trainable weights, the context vectors mix the values (x projected by "
     "w_value)."),
    ("softmax_of_weights", "a softmax of weights instead of scores",
     "You applied the softmax to weights that were already normalised. The softmax goes on the scores."),
    ("features_paired", "xᵀ x (features against features) instead of x xᵀ",
     "You multiplied x.T @ x, which pairs up the columns (the features). A score pairs up two rows (two "
     "tokens): x @ x.T."),
    ("exp_not_normalised", "exponentials not divided by their sum",
     "You exponentiated the scores but did not divide by the sum of the exponentials, so the weights do not add "
     "up to 1. A softmax does both."),
    ("weight_shape_swapped", "weight matrices drawn as (d_k, d_model)",
     "Your weight matrices have shape (d_k, d_model). x @ w needs as many rows as x has columns: draw them as "
     "(d_model, d_k)."),
    ("weights_returned", "the weights returned instead of the context vectors",
     "You returned the attention weights. The context vectors mix the values with them: weights @ values."),
    ("all_rows_or_one", "all the inputs where one was asked, or one where all were asked",
     "Check which inputs this step is about: one row of x, or all of its rows."),
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
    ("unasked_residual", "the input added to the attention output (a residual connection)",
     "Your function adds its input to the attention output (x + …, a residual connection). That addition belongs "
     "to the block around the attention layer, not to this step: return the attention output alone."),
    ("causal_mask_sees_next", "the causal mask one key short: each query sees the next token",
     "Your mask hides only the keys two or more places ahead: each query still sees the token right after it "
     "(`triu(…, diagonal=2)`, or `tril(…, 1)`). Hide every key after the query, j > i: `triu(…, diagonal=1)` marks "
     "exactly those."),
    ("weights_transposed", "the weights transposed before they mix the values",
     "Your weights were transposed before the product with the values (`weights.T @ v`, `transpose_a=True`): "
     "output i then mixes the values with column i of the weights, which belongs to no query. Row i of the "
     "weights is query i's: weights @ v."),
    ("missing_causal_mask", "no causal mask",
     "Every query still sees the keys after it: the causal mask is missing. Hide the scores above the diagonal "
     "(key j > query i) before the softmax."),
    ("missing_padding_mask", "no padding mask",
     "The padded keys are not hidden. Hide the scores of the keys at positions ≥ the sentence's length before "
     "the softmax."),
    ("padding_mask_off_by_one", "padding mask off by one",
     "Your mask shows one padded key too many: positions count from 0, so key j is real when j < length (not ≤)."),
    ("padding_mask_short_by_one", "padding mask one key short",
     "Your mask hides the last real key of every sentence: positions count from 0, so key j is real when "
     "j < length (not j < length − 1)."),
    ("unasked_causal_mask", "a causal mask where the step asks for none",
     "Your function hides the keys after each query (a causal mask), which this step does not ask for: here "
     "every query may look at every key it is allowed to see, the later ones too."),
    ("projections_transposed", "every projection transposed (the nn.Linear habit)",
     "You multiplied by the transposed weights, x @ w.T, as nn.Linear does with the weights it stores as (out, "
     "in). The course's weights are used as x @ w: each (d_model, d_model) matrix as it is, for every projection."),
    # --- notebook 07
    ("acc_not_rescaled", "the running output not rescaled",
     "You rescaled the running sum when the maximum grew, but not the running output: both were measured "
     "against the old maximum. Multiply the running output by the same exp(m_old − m_new) before adding the "
     "new block's weighted values."),
    ("missing_final_division", "the running output never divided by the running sum",
     "Your output is the running sum of exp(score − m) · value, not yet divided by the running sum of "
     "exp(score − m). Divide each query's output by its own total at the end."),
    ("block_max_in_exp", "a block's exponentials taken against the block's own maximum",
     "You exponentiated each block's scores minus that block's own maximum, while the running sums are measured "
     "against the running maximum m_new: the blocks end up summed on different scales. Subtract m_new."),
    ("diagonal_block_unmasked", "the diagonal block used without its mask",
     "You skip the blocks above the diagonal but use the whole diagonal block. Inside it, the keys after a "
     "query are still in its future: hide the keys j > i there (score −∞)."),
    ("diagonal_block_skipped", "the diagonal block left out",
     "Your loop over the key blocks stops before the diagonal block, so no query sees the keys of its own block "
     "(and the first block's queries see nothing at all: 0/0). Include the diagonal block, with its mask."),
    ("triangle_mask_every_block", "the diagonal block's triangle mask applied to every block",
     "You masked the upper triangle of every block, not only of the diagonal one. In a block below the diagonal "
     "every key comes before every query, so nothing there is hidden: mask only the diagonal block (or compare "
     "positions in the whole sequence rather than within the block)."),
    ("softmax_per_block", "each block's softmax taken on its own",
     "You normalised each block's scores on their own and then combined the blocks' results. A query's weights "
     "must sum to 1 over all the keys together: keep running sums across the blocks and divide once, at the end."),
    ("normaliser_pair_swapped", "(total, m) returned instead of (m, total)",
     "Your pair is the other way round: the maximum m comes first, then the total."),
    ("finite_max_start", "a finite number (such as −1e9) as the running maximum's start",
     "Your running maximum starts at a finite number standing in for −∞ (such as −1e9). Scores all below it "
     "never move m, so every exp(score − m) underflows to 0 and the total comes out 0. Start m at −∞ "
     "(-math.inf, or -np.inf): every score is larger than that."),
    ("acc_rescaled_twice", "the running output multiplied by the correction factor twice",
     "When the maximum grows, the running output is multiplied by exp(m_old − m_new) once, like the running "
     "sum; yours is multiplied by it twice."),
    ("new_block_rescaled", "the correction factor applied to the new block instead of the old sums",
     "The factor exp(m_old − m_new) belongs to what was summed before (measured against the old maximum), not "
     "to the new block's terms, which are already measured against the new one."),
    ("tile_positions_local", "query positions counted within the tile, key positions in the sequence",
     "Your causal mask compares a key's position in the whole sequence with the query's position inside its "
     "tile. Count both in the whole sequence (a tile's first row is at q_start)."),
    # --- notebook 08
    ("permutation_inverted", "reordered with the inverse permutation",
     "Your rows are reordered the other way round. Row i of the reordered tensor must be row perm[i] of the "
     "original, which is what indexing with `[perm]` gives; `torch.argsort(perm)` (or assigning `new[perm] = old`) "
     "applies the inverse permutation, which undoes the reordering."),
    ("pe_halves", "sines and cosines in two halves",
     "Your encoding puts all the sines in the first half of the columns and all the cosines in the second. In the "
     "formula they alternate: column 2i holds the sine and column 2i+1 the cosine of the same angle."),
    ("pe_sin_cos_swapped", "sine and cosine swapped",
     "Your even columns hold cosines and your odd columns sines. The formula puts the sine in column 2i and the "
     "cosine in column 2i+1, so the row of position 0 reads 0, 1, 0, 1, …"),
    ("pe_exponent_without_2", "frequency exponent i/d instead of 2i/d",
     "Your frequencies use the exponent i/d_model. The formula divides the position by 10000^(2i/d_model), where i "
     "counts the pairs of columns, so the exponents run 0, 2/d_model, 4/d_model, … from one pair to the next."),
    ("pe_exponent_column_doubled", "exponent 2j/d with j the column",
     "Your exponent doubles the column index: column j got 2j/d_model. In the formula, 2i is already the even "
     "column of the pair: columns 2i and 2i+1 both use 2i/d_model, so the exponents run 0, 0, 2/d_model, "
     "2/d_model, 4/d_model, …"),
    ("pe_cos_own_frequency", "each cosine column with its own frequency",
     "Your cosine columns use their own column index in the exponent, (2i+1)/d_model. A sine and the cosine next "
     "to it share one angle: columns 2i and 2i+1 both divide the position by 10000^(2i/d_model)."),
    ("pe_base_1000", "the base 1000 instead of 10000",
     "Your frequencies use the base 1000. The formula's base is 10000: θ_i = 1 / 10000^(2i/d) (with 1000, "
     "every pair but the first turns too fast)."),
    ("pe_same_frequency", "every pair with the same frequency",
     "Every pair of columns got the same frequency, 1: the angle is the position itself. Either the division by "
     "10000^(2i/d_model) is missing, or its exponent became 0 (integer division, `//`, does that): pair i divides "
     "the position by 10000^(2i/d_model)."),
    ("positions_from_one", "positions counted from 1",
     "Your positions start at 1. The first token is at position 0: its encoding is sin 0 = 0 and cos 0 = 1 in "
     "every pair, its vector in a table of positions is row 0."),
    ("pe_after_projection", "positions added after the projection",
     "You added the positions to the queries, keys and values, after the projection. An additive encoding goes "
     "into the inputs: project x + pe, so the queries are (x + pe) @ w_query, and the same for keys and values."),
    ("pe_after_projection_qk", "positions added to the projected queries and keys",
     "You added the positions to the queries and keys after the projection (and left the values without). An "
     "additive encoding goes into the inputs: project x + pe, so that queries, keys and values all come from it."),
    ("pe_added_to_outputs", "positions added to the outputs",
     "You added the positions to the outputs of attention. They have to be in the inputs, x + pe, so that the "
     "scores can use them."),
    ("positions_not_added", "no positions added",
     "Your result is exactly what the inputs give without any positions. Add each position's vector to its row of "
     "x first."),
    ("positions_concatenated", "positions concatenated instead of added",
     "You concatenated the position vectors to the inputs, which doubles the width. Here they are added: each row "
     "of x plus the vector of its position, same shape as x."),
    ("permutation_not_applied", "the reordered inputs not used",
     "Your outputs_shuffled are the outputs of the original order: attention was run on x, not on the reordered "
     "inputs. Give it x_shuffled."),
    ("rope_halves", "RoPE pairs taken from the two halves",
     "You turned feature i together with feature i + d/2 (the 'halves' layout some libraries use). Here, as in the "
     "RoFormer paper, a pair is two neighbours: features 2i and 2i+1 turn together."),
    ("rope_angles_tiled", "the angles laid out for halves, the pairs neighbours",
     "Your angles run θ_0, θ_1, …, θ_(d/2−1) and then again from θ_0 (a `.repeat(1, 2)` or a `cat` of the angles with "
     "themselves): the layout for pairs made of the two halves. Here a pair is two neighbours, features 2i and "
     "2i+1, which turn by one angle together: lay the angles out as θ_0, θ_0, θ_1, θ_1, … "
     "(`.repeat_interleave(2, dim=-1)`)."),
    ("rope_wrong_sign", "rotated by minus the angle",
     "Your pairs turn the wrong way: the signs of the sine terms are swapped. Turning (u, w) by the angle φ gives "
     "(u·cos φ − w·sin φ, u·sin φ + w·cos φ)."),
    ("rope_pairs_not_put_back", "rotated pairs not put back in place",
     "Each pair is rotated correctly, but the results are stored as all first members, then all second members. "
     "Put each rotated pair back where it came from, in features 2i and 2i+1."),
    ("rope_positions_ignored", "positions 0…n−1 used instead of the given ones",
     "Your rotation uses the positions 0, 1, …, n−1 whatever `positions` holds. Turn row j by the angles of "
     "positions[j]."),
    ("rope_rotates_values", "the values rotated too",
     "You rotated the values as well. RoPE turns only the queries and the keys: the scores carry the positions, "
     "the values are mixed as they are."),
    ("rope_before_projection", "the inputs rotated before the projection",
     "You rotated x and projected it afterwards. RoPE turns the queries and keys themselves, after the projection; "
     "a projection after the rotation mixes the pairs, and the scores no longer depend on the offset alone."),
    ("rope_only_queries", "only the queries rotated",
     "Only your queries were rotated. Turn each key too, by the angles of its own position: then a score depends "
     "on the difference of the two positions."),
    # --- notebook 01/03
    # transposed_first_operand, keys_not_transposed, values_times_weights, values_transposed,
    # product_order_reversed, missing_squeeze, sum_without_axis: catalogued under notebooks 04/05 (the same
    # misconceptions)
    ("one_query_only", "one query's result instead of all queries'",
     "Your answer is what a single query gets. All queries at once add an axis in front: one slice per query."),
    ("no_new_axis", "weights times values without a new axis",
     "You multiplied the weights and the values entry by entry as they are, so weight (i, j) met entry (i, j) "
     "of the values (this only runs when the sizes happen to agree). Weight (i, j) must scale the whole of "
     "value j: give the weights a new last axis first."),
    ("sum_over_features", "summed the features of each value",
     "You summed over the features: that adds up the numbers inside each value vector. An output keeps the "
     "features of the values and adds up the weighted values of the different inputs."),
    ("width_of_keys", "d_k where the values' width d_v belongs",
     "You gave the values' side the width of the keys, d_k. Keys and queries must share a width to be "
     "compared; the values have their own width, d_v, and so have the outputs made from them."),
    ("width_of_inputs", "d_model where the values' width d_v belongs",
     "You gave the result the width of the inputs, d_model. An output is a mix of values, so it has the "
     "values' width, d_v."),
    ("summed_too_early", "the weighted values already summed",
     "You computed the outputs (the weights times the values, already summed over the inputs). This step keeps "
     "every weighted value on its own: one vector for each (query, input) pair, summed only in the next step."),
    ("new_axis_on_values", "the new axis given to the values instead of the weights",
     "You gave the values the new axis. Weight (i, j) must scale every feature of value j, so it is the weights "
     "that need a new last axis, to be stretched along the features."),
    ("mean_instead_of_sum", "averaged instead of summed",
     "You took the mean. The weights of each query already sum to 1, so the plain sum of the weighted values "
     "is their weighted average; dividing by the number of tokens again shrinks every output."),
    ("missing_sum", "the sum over the tokens left out",
     "Your result still has the axis of the tokens being mixed: the weighted values are not added up yet. Sum "
     "them over that axis."),
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
    ("cache_appended_late_first_own", "the new key and value appended after attending, the first token apart",
     "From the second token on, each token attends to the earlier tokens but not to itself: its key and value "
     "are added to the cache only after the attention (the first token, with an empty cache, was handled apart). "
     "Append first, then attend: a token may look at itself, and the first one needs no special case."),
    ("cache_length_fixed", "the cache's length fixed at the notebook's t_cached",
     "Your mask is offset by 4, the notebook's t_cached, whatever the shapes (the global read, or the number "
     "typed in). Find t from the shapes: t = k.shape[-2] − q.shape[-2], the keys that were cached before."),
    ("cache_offset_from_m", "the offset t taken as the number of new queries",
     "Your mask's offset is m, the number of new queries, instead of t, the number of keys cached before them: "
     "t = k.shape[-2] − q.shape[-2]. New query i is at position t + i."),
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
    ("cache_missing_kv_factor", "the cache counted without its values (no factor 2)",
     "Your count is half the cache: it holds two tensors per layer, the keys and the values, so the count needs a "
     "factor 2 (left out, or divided away again)."),
    ("cache_missing_layers", "the cache of one layer only",
     "Every layer keeps its own keys and values: multiply by the number of layers."),
    ("cache_missing_heads", "the cache of one head only",
     "Every head keeps its own keys and values, each d_head numbers wide: multiply by the number of heads (a "
     "token's key in all heads together is num_heads · d_head = d_model numbers)."),
    ("cache_heads_twice", "the heads counted twice",
     "Your count has the heads in it twice: num_heads · d_head is already a token's whole width, d_model. Multiply "
     "d_head by num_heads, or use d_model, not both."),
    ("cache_counted_in_numbers", "the cache counted in numbers, not bytes",
     "You counted the numbers in the cache, not their bytes: multiply by the bytes of one number (4 in float32, "
     "2 in float16)."),
    ("cache_bytes_fixed", "the bytes per number fixed at 4",
     "Your function counts 4 bytes per number whatever `bytes_per_number` says: use the argument, so that the "
     "same function gives the size in float16 (2 bytes) or float64 (8 bytes) too."),
    ("cache_counted_in_bits", "the cache counted in bits, not bytes",
     "Your number is 8 times the size in bytes: it counts bits. The step asks for bytes: a float32 number "
     "takes 4 bytes (32 bits)."),
    ("cache_in_mebibytes", "the cache given in MiB, not bytes",
     "Your number is the size in MiB (bytes / 2**20). The function should return plain bytes; convert to MiB or "
     "GiB only when you print it."),
    ("cache_in_gibibytes", "the cache given in GiB, not bytes",
     "Your number is the size in GiB (bytes / 2**30), as the notebook prints it. The function should return "
     "plain bytes; convert to MiB or GiB only when you print it."),
    ("cache_in_megabytes", "the cache given in MB, not bytes",
     "Your number is the size in MB (bytes / 10**6). The function should return plain bytes; convert only when "
     "you print it."),
    ("cache_quadratic_in_n", "the cache counted as n × n",
     "The cache grows linearly with n: each token adds one key and one value per layer and head. An n × n matrix "
     "is the size of the scores, which the cache does not keep."),
    ("cache_tokens_short_by_one", "the cache of n − 1 tokens",
     "Your count holds n − 1 tokens' keys and values. Every token of the sequence, the newest too, keeps its key "
     "and value in the cache: n of them."),
    ("cache_extra_token", "the cache of n + 1 tokens",
     "Your count holds n + 1 tokens' keys and values (a slot for the next token, say). The cache holds the keys and "
     "values of the n tokens seen so far: n of them."),
    ("cache_extra_layer", "one layer too many in the cache",
     "Your count has num_layers + 1 layers (the embeddings counted as one, say). Only the attention layers keep "
     "keys and values: num_layers of them."),
    ("cache_heads_for_layers", "num_heads where num_layers belongs",
     "Your count multiplies num_heads by itself where num_layers belongs: each of the num_layers layers keeps "
     "num_heads heads' keys and values, so the product is num_layers · num_heads."),
    # --- notebook 10
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
    ("output_projection_transposed", "the output projection transposed",
     "You multiplied the merged heads by w_out.T. The course's weights are used as x @ w: multiply by w_out as it "
     "is, (d_model, d_model), rows for the merged features."),
    ("missing_readout", "no read-out to the vocabulary",
     "Your model returns the vectors themselves, d_model numbers per token. The last step turns each vector into "
     "one score per token of the vocabulary: multiply it by the read-out matrix."),
    ("loss_after_update", "the loss returned after the update",
     "Your step returns a loss computed again after optimizer.step(), so each number is one update late. Return "
     "the loss you called backward() on, the one from before the update."),
    ("divided_by_length", "divided by L, not by the number of guesses",
     "You divided a sum over every guess by L, the guesses of one sequence. Average over all the guesses of all "
     "the sequences: divide by sequences × L (or take the mean)."),
    ("guesses_one_early", "the guesses taken one position too early",
     "Your window starts one position early: it takes the guesses at positions L − 1 … 2L − 2, the first about "
     "the separator. The guesses that count are made at positions L … 2L − 1, about the tokens at L + 1 … 2L."),
    # --- notebook 07
    ("positive_exponent", "exp of a score above the running maximum",
     "One of your exponents can be positive: exp(s − m) taken before m is raised to s, a rescaling factor "
     "exp(m_new − m), the wrong way round, or an m that is not the largest score so far (rounded, cast, or gone to "
     "±inf on the way). When a score jumps far above the running maximum (by more than about "
     "709), that exp overflows: to inf with NumPy, an OverflowError with math.exp. Raise m first "
     "(m_new = max(m, s)), then rescale what you have by exp(m − m_new) and add "
     "exp(s − m_new): every exponent is then ≤ 0."),
    ("total_not_rescaled", "the running sum not rescaled",
     "You rescaled the running output when the maximum grew, but not the running sum: both were measured against "
     "the old maximum. Multiply the running sum by the same exp(m_old − m_new) before adding the new block's "
     "terms."),
    ("transposed_all_axes", "`.T` on a tensor with more than two axes",
     "`.T` reverses every axis of a tensor, so on (batch, heads, n, d_k) it gives (d_k, n, heads, batch) and the "
     "product no longer lines up. Swap only the last two axes: `k.transpose(-2, -1)` (or `k.mT`)."),
    # --- notebook 04 (what simulated students found)
    ("stack_last_axis", "stacked along the last axis: words and features swapped",
     "You stacked along the last axis, so the words run along the features' axis and the features along the "
     "words': the right shape, with the numbers transposed. Stack along the axis the words should run along."),
    ("scores_as_weights", "the raw scores used as weights",
     "You weighted the values by the raw scores. The weights are the softmax of the scaled scores: positive "
     "and summing to 1 over the words."),
    ("scale_by_d_v", "scaled by √d_v instead of √d_k",
     "You divided by the square root of the values' width d_v. The scores are dot products of queries and keys, "
     "so divide by √d_k, the width of a key (the last axis of the keys)."),
    # --- notebook 02
    # power_precedence, scale_by_n, scale_by_d_v: catalogued under notebooks 04/05 (the same misconceptions)
    ("keys_reshaped", "keys reshaped instead of transposed",
     "You reshaped the keys to (d_k, n) instead of transposing them. A reshape keeps the numbers in their order and "
     "only cuts them into new rows, so each column mixes pieces of different keys; a transpose turns key j into "
     "column j (`.T`, or transpose_b=True in tf.matmul)."),
    ("projection_reused", "one weight matrix used for two roles",
     "One of your projections uses another role's matrix (the keys made with w_query, for instance). Each role "
     "has a matrix of its own: queries from w_query, keys from w_key, values from w_value."),
    ("reseeded_each_draw", "the generator seeded again before every draw",
     "You seeded the generator again before each draw, so every draw starts from the same place and gives the "
     "same numbers. Seed once, then draw one matrix after the other: each draw goes on where the last stopped."),
    ("randn_for_rand", "drawn with torch.randn (normal) where torch.rand (uniform) was asked",
     "Your matrices hold numbers of both signs: torch.randn draws them from a normal distribution. The book's "
     "matrices come from torch.rand, uniform between 0 and 1: draw with torch.rand, after the same seed."),
    ("earlier_weights_used", "weights of an earlier step used",
     "You used weights computed in an earlier step, from other scores. Use the weights this step starts from."),
    ("counted_all_tensors", "every weight tensor counted (frozen ones too) instead of their numbers",
     "You counted the weight tensors, frozen ones included, not the numbers in them. Add up the number of entries "
     "(a tensor's .numel()) of each parameter that requires a gradient."),
    ("counted_by_grad", "trainable parameters picked by `p.grad is None`",
     "Your count picks the parameters by their `.grad`, which only says whether a backward pass has reached them "
     "yet: it changes once the module is trained. Keep the parameters with p.requires_grad."),
    ("counted_frozen", "frozen parameters counted as trainable",
     "You counted the entries of every parameter, frozen ones too: a parameter with requires_grad=False does not "
     "change in training. Keep only the parameters with p.requires_grad."),
    ("counted_from_shapes", "the count computed from the sizes instead of the module's parameters",
     "You computed the count from the sizes the module was made with. Count what the module holds: the entries "
     "(.numel()) of its parameters that require a gradient."),
    ("counted_inputs", "the inputs' numbers counted instead of the parameters'",
     "You counted the numbers of the inputs x. The trainable numbers are the entries of the module's parameters "
     "(module.parameters()), whatever the inputs it is run on."),
    # --- notebook 01
    # projection_reused: catalogued under notebook 02 (the same misconception)
    ("key_value_swapped", "keys and values made with each other's weights",
     "Your keys use the values' weights and your values the keys' weights. Keys come from w_key, values from "
     "w_value."),
    ("self_rounded_weights", "the weights rounded by hand",
     "You rounded the weights yourself. Use the weights the step names as they are: rounding changes every "
     "output that uses them."),
    # --- notebook 05 (fix)
    # scale_by_d_v: catalogued under notebook 04 (the same misconception)
    ("sum_unshifted", "each row's maximum subtracted in the numerator, not in the sum",
     "You subtracted each row's maximum before exp() in the numerator, but the sum you divide by adds the "
     "exponentials of the raw scores: every weight comes out multiplied by exp(−max), so the rows no longer sum to "
     "1, and that sum overflows (weights 0) or underflows to 0 (weights inf) wherever exp of the raw scores does. "
     "Compute e = exp(s − max) once and divide it by its own row sum."),
    ("shifted_by_min", "each row's minimum subtracted instead of its maximum",
     "You subtracted each row's minimum. Any number per row cancels in the softmax, but only the maximum keeps "
     "exp() safe: after subtracting the minimum, a row whose scores span more than about 709 still overflows to "
     "inf (and inf / inf = NaN). Subtract each row's maximum; then the largest exponential is exp(0) = 1."),
    ("shifted_by_mean", "each row shifted by less than its maximum (its mean, say)",
     "You subtracted a number per row that is below the row's maximum (its mean, or another of its scores). Any "
     "number per row cancels in the softmax, but only the maximum keeps exp() safe: a score far above what you "
     "subtracted (more than about 709) still overflows to inf, and inf / inf = NaN. Subtract each row's maximum; "
     "then the largest exponential is exp(0) = 1."),
    ("keepdims_nowhere", "row maxima and row sums both without keepdims",
     "Your row maxima and your row sums both lost their axis: (n,) vectors, which NumPy lines up with the "
     "columns, so entry (i, j) was shifted and divided by the numbers of row j. Keep the axis in both: "
     "keepdims=True (or [:, None])."),
    # --- notebook 02 (simulation 5)
    ("abs_sum_normalisation", "divided by the sum of the absolute values instead of the sum",
     "You divided the scores by the sum of their absolute values (an L1 norm, as F.normalize(p=1) does). Where "
     "every score is positive that is the same sum; with a negative score it is not. Divide by the plain sum."),
    # --- notebook 08 (fix)
    ("pe_exponent_doubled", "exponent 2·(2i)/d: the 2i doubled again",
     "Your exponent is 2·(2i)/d_model, twice the formula's: the 2i doubled again (counting the pairs' even columns "
     "0, 2, 4, …, as `arange(0, d_model, 2)` does, already gives 2i), or 2i divided by d_model/2 instead of "
     "d_model. Divide the position by 10000^(2i/d_model): exponents 0, 2/d_model, 4/d_model, …"),
    # --- notebook 06 (fix)
    ("dropout_mask_inverted", "the keep-mask used the wrong way round",
     "You kept the weights the mask drops and dropped the ones it keeps (1 − keep). In `keep`, 1 means 'survives': "
     "multiply by keep itself, then divide by (1 − p)."),
    ("dropout_mask_transposed", "the keep-mask transposed",
     "Your zeros are keep's transposed: keep[i, j] says whether weight [i, j] stays. Multiply the weights by keep "
     "entry by entry, as it is, then divide by (1 − p)."),
    ("dropout_mask_ignored", "the keep-mask never applied",
     "You rescaled every weight by 1 / (1 − p) but dropped none: the keep-mask was not used. Multiply by keep "
     "(0 for a dropped weight), then divide by (1 − p)."),
    ("heads_merged_without_transpose", "heads split right, merged by reshape alone",
     "Your heads are split correctly but merged by a reshape alone, which mixes tokens between heads. Transpose "
     "axes 1 and 2 back (to (batch, seq, heads, d_head)), then reshape."),
    ("heads_interleaved", "the features dealt to the heads in turn",
     "Your heads got every heads-th feature (a reshape with d_head before heads, or the heads axis moved last) "
     "instead of one block of d_head neighbouring features each. Head h holds features h·d_head … "
     "(h+1)·d_head − 1: the shape to reshape to is (batch, seq, heads, d_head)."),
    ("heads_split_interleaved", "the features dealt to the heads in turn when splitting, merged back in blocks",
     "Your split gave each head every heads-th feature (a reshape to (batch, seq, d_head, heads)) instead of one "
     "block of d_head neighbouring features, while your merge puts the heads back as blocks: the two do not undo "
     "each other. Split by reshaping to (batch, seq, heads, d_head), then move the heads axis in front of the "
     "tokens."),
    ("heads_count_as_size", "the head count used as the size of each head",
     "You made d_head pieces of num_heads features each, where num_heads pieces of d_head features each are "
     "meant: `split` takes the size of every piece (`chunk` takes how many pieces), and a reshape takes "
     "(…, heads, d_head) in that order. Head h holds features h·d_head … (h+1)·d_head − 1."),
    ("heads_wrong_transpose", "the wrong axes transposed around the reshape",
     "You transposed at the wrong moment or the wrong pair of axes, so the reshape cuts the numbers in the wrong "
     "places. Split: reshape to (batch, seq, heads, d_head), then transpose axes 1 and 2. Merge: the same steps "
     "backwards."),
    ("dropout_before_softmax", "dropout applied to the scores",
     "You applied dropout to the scores, before the softmax. Dropout acts on the attention weights, after the "
     "softmax and before the product with the values (on masked scores, −∞ · 0 is NaN)."),
    # --- notebooks 06 to 10 (simulation 6, B)
    ("future_masked_late", "the future hidden after the softmax, each row renormalised",
     "Your weights reach the hidden keys' scores before your mask does: a softmax over every key with the future "
     "zeroed afterwards, the maximum taken over every key, or the exponentials taken before the mask. That is "
     "exact in arithmetic, but on a row whose hidden key scores far above the visible ones it is not: the visible "
     "weights underflow to 0 (and the row becomes 0/0), or the hidden key's exponential overflows (and inf · 0 is "
     "NaN). Hide the future in the scores themselves, before the softmax (a score of −∞)."),
    ("padding_masked_late", "the padded keys masked after the exponentials",
     "On a batch whose padding holds large numbers (anything can sit in the padding), your result is NaN or inf: "
     "the padded keys' scores reach the exponentials, or the maximum subtracted before them, ahead of your mask. "
     "There they overflow (inf · 0 = NaN) or push every real weight down to 0 (0/0). Mask the scores themselves "
     "before the softmax: fill the padded keys' scores with −inf, so that whatever the padding holds gets weight 0."),
    ("scale_by_other_size", "scaled by the square root of another size than d_k",
     "You divided the scores by the square root of another size of the inputs than d_k. The scores are dot "
     "products of a query and a key, d_k numbers each: divide by √d_k, the width of one key."),
    ("dropout_renormalised", "the rows renormalised after dropping",
     "You divided each row by its sum after dropping, so that it sums to 1 again (a row with every weight dropped "
     "is then 0/0 = NaN). Dropout does not renormalise: multiply by keep, then divide by (1 − p), the same number "
     "for every weight."),
    ("dropout_rescaled_twice", "divided by (1 − p) twice",
     "You divided by (1 − p) twice (by its square, or once the weights and once the keep-mask). Inverted "
     "dropout divides the kept weights by (1 − p) once: weights · keep / (1 − p)."),
    ("dropout_precedence", "`/ 1 - p` without brackets",
     "Your division lost its brackets: `weights * keep / 1 - p` divides by 1 and then subtracts p from every weight, "
     "dropped ones too. Write `/ (1 - p)`."),
    ("dropout_wrong_scale", "the kept weights multiplied by another factor than 1 / (1 − p)",
     "Your function multiplies the kept weights by another factor than 1 / (1 − p). Inverted dropout divides every "
     "kept weight by the probability of keeping it, 1 − p, so that each weight keeps its expected value."),
    ("dropout_scale_by_odds", "the kept weights multiplied by p / (1 − p)",
     "You multiplied the kept weights by p / (1 − p). Inverted dropout divides them by the keep probability "
     "alone, (1 − p): p, the drop probability, does not appear as a factor."),
    ("masks_combined_with_and", "a key hidden only where both masks hide it",
     "Your combined mask hides a key only where the causal mask and the padding mask both hide it (`&` of two "
     "masks that say 'hide', or `|` of two that say 'keep'), so a query still sees the real keys after it and the "
     "padded keys before it. A key must be hidden when either mask hides it: `causal | padded`."),
    ("positions_from_batch_axis", "the rows of the position table taken along the batch axis",
     "Your position rows are counted along the batch axis: every token of sequence b got row b of the position "
     "table (tokens.shape[0] is the number of sequences). A position is a token's place in its sequence, along "
     "axis 1: take one row per position, pos_emb[:tokens.shape[1]]."),
    ("residual_multiplied", "the residual multiplied instead of added",
     "You multiplied the attention output by its input (h * attn(h)). The residual connection adds them: "
     "h + attn(h), so that each token keeps its own vector and attention adds what it gathered."),
    ("readout_through_embedding", "the read-out through the token table instead of the read-out weights",
     "Your logits come from the token table transposed (`token_emb.T`, weight tying) instead of the model's own "
     "read-out weights. Tying them is a real technique, but this model has a read-out of its own: multiply by "
     "`self.w_readout`."),
    ("guesses_one_late", "the guesses taken one position too late",
     "Your guesses are the model's, but taken one position too late: the logits at position i guess token i + 1, "
     "so the first answer token is guessed at the separator's position. Start there, and leave out the last "
     "position (it guesses past the end)."),
    # --- notebooks 08 and 09 (simulation 5)
    ("pe_ignored", "the encoding it is given replaced by one computed again",
     "Your function adds an encoding it computes itself (the sinusoids again) instead of the `pe` it is given: "
     "right only while the caller hands it that very table. Add `pe`, whatever encoding it holds."),
    ("cache_in_kibibytes", "the cache given in KiB, not bytes",
     "Your number is the size in KiB (bytes / 1024). The function should return plain bytes; convert to KiB, MiB "
     "or GiB only when you print it."),
    ("integer_overflow", "a count in fixed-width integers that wraps around",
     "Your count wraps around for large sizes: a NumPy int32 holds at most 2³¹ − 1 (about 2.1 billion), and a "
     "product above that silently comes out wrong (negative, or off by a multiple of 2³²). Multiply plain Python "
     "integers, which never overflow (or NumPy's int64)."),
    # --- notebook 04 (simulation 6)
    ("scale_by_size", "scaled by the square root of the number of entries of the keys",
     "You divided by the square root of the number of entries of the keys (their size, n · d_k). d_k is the width "
     "of one key, the last axis of the keys."),
]

_PROPERTY_ROWS = [
    ("compensates_upstream", "a step that makes up for an earlier function's mistake",
     "Your step gives the right numbers only together with your own earlier function, which is not right yet: "
     "with a correct one in its place it gives wrong ones, so it undoes that function's mistake (a transpose, a "
     "scale or an axis added here). Fix the earlier function, then write this step as if it were right."),
    ("grad_left_off", "gradients switched off for the whole session",
     "torch.set_grad_enabled(False) ran and was never undone: every later cell runs without gradients. Use "
     "`with torch.no_grad():` around the lines that need no gradient."),
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
    ("init_not_random", "weights that do not start random",
     "Your module's weights start all equal (zeros, ones) or unfilled (torch.empty): then every feature gets the "
     "same gradient, or none at all, and training cannot tell them apart. Start them random: "
     "torch.randn(d_model, d_model) / √d_model."),
    ("init_not_centred", "random weights all of one sign",
     "Your weights start mostly of one sign, their mean far from 0 (torch.rand, for one, draws from [0, 1)): every "
     "product of a token with them leans the same way. Draw them centred on 0, from a normal distribution "
     "(torch.randn), scaled by 1/√d_model."),
    ("init_unscaled", "random weights not scaled by 1/√d_model",
     "Your module's weights start random but not at the spread the step asks for: divide torch.randn(d_model, "
     "d_model) by √d_model, so that x @ w keeps entries of about the size of x's."),
    ("overwrites_variable", "a variable of the notebook assigned anew",
     "Your cell also assigns a variable that an earlier step computed and later cells read: after it, those cells "
     "see something else. Keep your own results under new names."),
    ("misspelled_name", "the answer's name misspelled",
     "Your latest run of the cell assigns a name close to the answer's but not it: the answer's variable still "
     "holds a value from an earlier run. Use the name the step asks for."),
    ("reads_globals", "a function that reads the notebook's variables",
     "Your function reads the notebook's variables instead of its own arguments."),
    ("hard_coded", "numbers typed in rather than computed",
     "Your cell gives the same answer whatever its inputs: compute it from the variables the step starts from."),
    ("class_state_shared", "a size kept on the class, shared by every module of it",
     "Your module keeps something on its class (`MultiHeadSelfAttention.d_head = …` in `__init__`, or a class "
     "attribute changed there) instead of on itself (`self.d_head = …`): every module of the class reads the same "
     "one, so making a second module of other sizes changes it for the first, which then computes with the wrong "
     "sizes. Keep what belongs to one module on `self`."),
    ("tied_counted_twice", "a parameter shared by two submodules counted twice",
     "Your count adds a parameter twice when two submodules share it (tied weights): counting over each module's "
     "own parameters, or over every name, meets it once per name. `module.parameters()` yields each parameter "
     "once."),
    ("stray_factor", "the right numbers times a constant",
     "Your numbers are the right ones times one constant, on every input: a small difference, but a factor that no "
     "right computation has (a leftover `* (1 - 1e-4)`, an epsilon folded into a scale). Find it and take it out."),
    ("stray_offset", "the right numbers plus a constant",
     "Your numbers are the right ones plus one small constant, on every entry: too small to see in most of them, but "
     "not in those that should be near 0 (a leftover `+ 1e-9`, an epsilon added to the result). Find it and take it "
     "out."),
    ("example_sizes_only", "right only for the example's sizes",
     "Your code gives the right numbers on the notebook's example but not on inputs of other sizes: somewhere it "
     "relies on the example's sizes. Typical causes: a number typed in (a size, a count, an index), a slice, a loop "
     "or a reshape made for the example, a size taken from something that equals it only there, a `.squeeze()` that "
     "drops an axis when it has length 1, or two axes that line up only while their sizes are equal. Take every size "
     "from the shapes of the inputs."),
    ("squeezed_axes", "axes of length 1 squeezed away",
     "On inputs that have an axis of length 1 (one token, one row), your result lacks that axis: a `.squeeze()` "
     "without an axis drops every axis of length 1, also those that belong to the answer. Squeeze only the axis you "
     "mean (`.squeeze(0)`), or index it (`[0]`)."),
    ("copied_answer", "an earlier result copied instead of computed",
     "Your answer is a copy of an earlier result that happens to be equal here. This step asks you to compute it "
     "yourself, from its own inputs."),
    ("small_values_zeroed", "the small numbers set to 0",
     "Your numbers are right except that the small ones are set to 0. Keep every number as it is computed: a small "
     "weight is still a weight, and a small output is not 0."),
    ("rounded_answer", "the right numbers rounded",
     "Your numbers are the right ones rounded to a few decimals. Keep them at full precision: round only what you "
     "print."),
    ("in_place_breaks_backward", "an in-place operation that breaks backward",
     "Training through your module raises in backward: an in-place operation (`*=`, `+=`, `masked_fill_`, "
     "`x[...] = …`) changed a tensor that autograd had saved to compute the gradients (a softmax's output, an "
     "input of a product). Write it out of place (`w = w * keep / (1 - p)`, `h = h + self.attn(h)`)."),
    ("result_discarded", "a result computed and thrown away",
     "A line of your code computes a new tensor that nothing keeps (a call such as `scores.masked_fill(...)` on a "
     "line of its own): it changes nothing. Assign its result to a name and use that name."),
    ("cell_raised", "the cell that defines the answer raised",
     "The cell that defines this answer raised an error the last time it ran: fix it and run it again."),
    ("optimizer_state_reset", "the optimizer's state cleared at every step",
     "Your training step wipes what the optimizer keeps from step to step (its running averages): leave the "
     "optimizer's state alone, and only zero_grad(), backward() and step()."),
    ("stale_value", "an older value kept from before a cell ran again",
     "Your code keeps an older value of a name that a cell has defined anew since (a function's default taken "
     "when its `def` ran): run again the cell that keeps it."),
]
_PROCESS_ROWS = [
    ("reduced_precision", "a training step in lower precision than float32",
     "Your step computes in float16 or bfloat16 (torch.autocast, or a model cast with .half()): its losses and "
     "updates are not those of a float32 step. Leave the autocast, or the cast, out."),
    ("gradients_altered", "the gradients clipped or scaled before the update",
     "Your step changes the gradients between loss.backward() and optimizer.step() (clip_grad_norm_, "
     "clip_grad_value_, a scaling): when they are large, the update is not the one the optimizer makes of them. "
     "Leave the gradients as backward() computes them."),
    ("not_as_asked", "computed another way than the step asks",
     "Your numbers are right, but the step asks for them to be computed a particular way (a loop, no loop, "
     "without a matrix product, without another library), and your cell does it another way."),
    ("not_computed_with", "the answer not computed with what the step asks for",
     "Your cell never uses what the step asks you to compute with (for instance the trained model): the numbers "
     "come from somewhere else."),
    ("full_score_matrix", "the whole n × n score matrix held at once",
     "Your function holds far more memory than one block of scores needs: memory that grows with the length of "
     "the sequence as the whole n × n score matrix does (that matrix, a mask of the whole sequence, or what every "
     "block gave kept in a list). Work through the keys one block at a time, keeping only a running maximum, a "
     "running sum and a running output per query."),
    ("not_one_pass", "the stream read more than once",
     "Your function reads the stream of scores more than once (or keeps all of it). An online softmax reads "
     "each score once, as it arrives, and keeps only a running maximum and a running sum."),
    # --- notebook 07
    ("forward_twice", "the model run twice in one training step",
     "Your step runs the model twice: once for the loss it returns and once for the loss it trains on. That doubles "
     "the work, and with dropout on the two are different random draws, so the number you return is not the loss "
     "the step learned from. Run the model once, keep that loss, call backward() on it, and return its .item()."),
    ("result_overwritten", "a result that the next call overwrites",
     "Your function returns an array it keeps between calls (in a global, or on the function itself) and fills "
     "again on the next call: a result a caller holds changes when the function is called again, with other "
     "inputs. Make a new array or tensor for each call's result, inside the function (`np.zeros(...)`, "
     "`torch.zeros(...)`, `torch.empty_like(...)`)."),
    ("dropout_not_on_weights", "dropout drawn for the values or the output, not the attention weights",
     "Your module's own dropout draw (when it is given no keep-mask) drops something other than the attention "
     "weights: the values, or the output. Both have the same average as dropping weights, but not the same "
     "randomness. Draw the mask for the weights themselves, (batch, heads, seq, seq), after the softmax and before "
     "the product with the values, as with a keep-mask given."),
    ("stateful_forward", "forward changes the module from call to call",
     "Called twice on the same input, your module gives two different outputs: its `forward` changes the module "
     "as it runs (a weight rescaled or updated in place, a result kept from an earlier call). A forward computes "
     "its output from its input and the parameters as they are, and leaves them unchanged: only the optimizer "
     "changes the weights."),
    ("input_detached", "the module's input cut off from the gradient",
     "Your module's output gets no gradient back to its input: forward detaches it (`x.detach()`, `x.data`, a "
     "NumPy round trip). Its own weights still learn, but nothing before it could: the embeddings or the layers "
     "that feed it. Compute from the input itself."),
    ("weights_used_once", "a tensor computed from the weights once, in __init__, and reused",
     "Your module computes something from its weights once (in `__init__`, say `self.w_scaled = self.w_query / "
     "d_k ** 0.5`) and uses that tensor in every forward pass. The first backward goes through it and frees its "
     "graph, so a second one raises, and an optimizer step that changes the weights never changes that tensor: "
     "the module cannot train. Compute everything from the parameters inside `forward`."),
    ("gradient_cut", "the computation cut off from the trainable weights",
     "The result does not require a gradient: a `.detach()`, `torch.no_grad()` or a NumPy round trip cut it off "
     "from the weights, so training could not change them."),
    ("tokens_cut", "tokens past a count typed in dropped",
     "Your result keeps only some of the tokens of a longer sentence: a count typed in (`x[:8]`, a \"context "
     "window\") drops the others. Keep every token the inputs have."),
    ("clamped", "numbers clamped at a bound",
     "Your numbers never go past a bound where the right ones do, and all the others are right: a clamp, a clip "
     "or a ReLU in your code cuts them off. Take it out: the right numbers can be that large."),
    ("pe_exponent_from_n", "the exponent 2i/n, with the number of positions for d_model",
     "Your frequencies use the number of positions n (the table's rows) where the formula has d_model, the width "
     "of each vector: column pair i turns at 1 / 10000^(2i/d_model), whatever the number of positions."),
    ("embeddings_scaled", "the token vectors multiplied by √d_model before the encoding is added",
     "You multiplied the token vectors by √d_model before adding the encoding (as the original Transformer does "
     "with its learned embeddings). This step adds the encoding to the vectors as they are: x + pe."),
    ("heads_averaged", "the heads' merged output divided by their number",
     "Your output is the right one divided by the number of heads: the heads averaged. Multi-head attention does "
     "not average its heads: it places their outputs side by side (each head fills its own d_head features of the "
     "merged row), and the output projection mixes them."),
    ("gradient_wrong", "a gradient that is not the gradient of the result",
     "The result is right, but the gradient that flows back through it is not its gradient: some entries of an "
     "input get none, or a wrong one (a lookup with `padding_idx` gives that row none), so training would not "
     "learn what it should."),
    ("not_a_number", "a tensor returned where a Python number is asked for",
     "The step asks for a plain Python number: turn a 0-d tensor into one with `.item()`."),
    # --- notebooks 06 and 10: how a module draws its dropout, how a step trains
    ("given_draw_ignored", "a draw of its own although the caller gives one",
     "In training mode your code makes a random draw of its own although it is given one (`keep`): two calls "
     "with the same keep give different outputs. Use the draw it is given, and no other (no `F.dropout` or "
     "`nn.Dropout` on top of it), on the attention weights; make one of your own only when keep is None."),
    ("dropout_draw_shared", "one dropout draw shared by the whole batch (or by the heads, or the queries)",
     "Your own dropout draw (keep=None) is the same for every sequence of the batch: a draw smaller than the "
     "weights (of shape (1, …), one number per key, or one for everything) broadcast over the batch axis, and "
     "perhaps over the heads and queries too. Each attention weight of each sequence needs "
     "its own draw: draw the keep-mask with the full shape of the weights (torch.rand_like(attn_weights))."),
    ("reseeded_each_call", "the random generator seeded at every call",
     "Your code sets the random seed (torch.manual_seed, or a generator seeded on the spot) every time it runs, "
     "so every call draws the same random numbers. Seed once, at the top of the notebook, never inside a "
     "function that runs again and again."),
    ("not_registered", "weights the module does not register",
     "Your module uses weights that its `parameters()` does not list: made in `forward` on the first call, or held "
     "in a plain Python list or dict. An optimizer handed `model.parameters()` never trains them. Make them in "
     "`__init__`, as attributes (or in an `nn.ModuleList`)."),
    ("nan_gradient", "right numbers, but a NaN gradient",
     "Your numbers are right, but the gradient through them is NaN on some inputs: a value that overflows (inf) on "
     "the way and is removed afterwards (a `where` or a mask after an exponential) still sends 0 · inf = NaN back. "
     "Remove what should not count before the operation that overflows."),
    ("exp_overflow", "an exponential overflowed",
     "An exponential in your code overflowed to inf (in float32, exp() of anything above about 88.7 is inf; in "
     "float64, above 709.8), and the infinity then turned into NaN or inf in the result. Hand exp only numbers of at "
     "most 0: subtract from each score the largest score of its row first."),
    ("exp_underflow", "every exponential of a row underflowed to 0",
     "Every exponential of a row came out 0 (in float32, exp() of anything below about −103.9 is 0; in float64, below "
     "−745.1), so the row sums to 0 and 0 / 0 is NaN. Subtract from each score the largest score of its row, "
     "whatever its sign: the largest exponent is then exactly 0, and no sum is 0."),
    ("draws_at_random", "a random draw in a step that computes a fixed result",
     "Your function gives other numbers on the same inputs from one call to the next: it draws at random somewhere "
     "(a dropout left on, such as `F.dropout(w, p)`, whose `training` is True unless you say otherwise, or a "
     "`torch.rand…` / `np.random…` of its own). This step has no randomness: leave the draw out."),
    ("gradient_graph_kept", "gradients that keep their own graph",
     "Your training step keeps the graph of its gradients (`create_graph=True`): every step builds a second graph "
     "that is never used and holds it in memory. Call `loss.backward()` as it is."),
    ("dropout_other_generator", "a dropout drawn from another generator than torch's",
     "Your dropout draws from another random generator than torch's (NumPy's `np.random`, Python's `random`, a "
     "`torch.Generator` of its own): `torch.manual_seed` does not repeat it, so the runs this notebook seeds with "
     "`torch.manual_seed(…)` cannot be reproduced. Draw with torch's own generator: `torch.rand(w.shape) >= p`, or "
     "`F.dropout`."),
    ("reseeds_generator", "a random generator seeded anew at every call",
     "Your function seeds a random generator each time it runs (`torch.manual_seed`, `np.random.seed`, "
     "`random.seed`), so that generator is back in the same state after every call and every later random draw "
     "repeats. Seed once, at the top of the notebook."),
    ("generator_put_back", "the random generator set back after each draw",
     "Your code draws from torch's generator but leaves it where it was (a `torch.random.fork_rng()` around the "
     "draw, or the generator's state set back after it), so the next call draws the same random numbers. Draw, and "
     "let the generator move on."),
    ("optimizer_not_used", "the optimizer it is given never used",
     "Your step updates the weights without the optimizer it is given (its step() is never called): an update "
     "written by hand, or an optimizer of your own, trains the same way whatever optimizer the caller chose. "
     "Call optimizer.step() after loss.backward() (and clear the gradients with optimizer.zero_grad())."),
    ("trained_in_eval_mode", "training in evaluation mode",
     "Your step switches the model to evaluation mode (`model.eval()`), so the model trains with its dropout "
     "off. Leave the mode as the caller set it: train() calls model.train() once, before the steps."),
    ("keys_not_in_blocks", "the keys not taken one block at a time",
     "Your function does not go through the keys block by block: blockwise attention takes block_size keys at a "
     "time (the last block may be shorter), updates each query's running maximum, total and weighted sum with "
     "that block, and divides once at the end."),
    ("max_not_running", "the maximum of the current block instead of the running maximum",
     "Your m is the current block's maximum, not the running maximum of every score so far: when a later block's "
     "scores are much lower, exp(m_old − m_new) overflows. Keep m = max(m, the block's maximum)."),
    ("future_blocks_computed", "blocks above the diagonal computed",
     "Your causal function computes scores of keys that come after their query: whole blocks above the diagonal, "
     "which a query may never see. Skip the key blocks that lie after a block of queries; only the diagonal "
     "block needs a mask."),
    # --- notebooks 07 and 10 (simulation 5)
    ("queries_not_in_tiles", "the queries taken one at a time instead of in tiles",
     "Your function goes through the queries one at a time (or a few), not one tile of block_size queries at a "
     "time. Take a tile of block_size queries (the last one may be shorter) and compute its scores with a key "
     "block in one product, keeping m, total and acc for every query of the tile."),
    ("dropout_never_drawn", "no dropout draw in training mode",
     "In training mode, with a dropout above 0, your model gives the same output every time it runs: no attention "
     "weight is ever dropped. Let the attention layer make its own draw: call it without a `keep` (a keep of ones "
     "keeps every weight)."),
    ("dropout_rate_replaced", "a dropout rate of 0 replaced by a default",
     "A module made with dropout = 0 still drops weights in training mode. A rate of 0 means no dropout: keep the "
     "rate it is given (`dropout or 0.1` turns 0 into 0.1, as `or` treats 0 as missing; write `0.1 if dropout is "
     "None else dropout` for a default)."),
    # --- notebook 09
    ("no_cache", "every step recomputes the keys and values of the whole prefix",
     "Your numbers are right, but each step projects all the tokens so far again, instead of keeping the keys "
     "and values already computed: that is decoding without a cache. Project only the new token, append its key "
     "and value to your cache, and let its query attend over the cache."),
    ("projected_ahead", "every token projected before the loop, as if the whole sequence were known",
     "Your numbers are right, but your loop starts from keys and values of the whole sequence, projected "
     "before any token was fed in: a decoder does not have the later tokens yet. Inside the loop, project only "
     "the token that has just arrived, append its key and value to the cache, and let its query attend over "
     "the cache."),
    # --- notebooks 08-10 (simulation 7)
    ("tokens_in_chunks", "the tokens fed in a few at a time, not one at a time",
     "Your numbers are right, but your loop feeds the tokens in a few at a time: several new tokens projected "
     "and attending together. A model that writes text has only one new token per step (the next one does not "
     "exist until this one's output is known): take one token per step, project it, append its key and value to "
     "the cache, and let its query attend over the cache."),
    ("query_position_late", "the query given the position after its token's",
     "Your keys and values are right, but each query gets the position embedding of the next place, t + 1 (the "
     "cache's length read after the new key was appended, say). Token t's query, key and value all come from "
     "x_seq[t] + pos_table[t]."),
    ("query_position_missing", "the query made without its position embedding",
     "Your keys and values carry their positions, but your queries are made from x_seq[t] alone. Token t's "
     "query, key and value all come from the same vector, x_seq[t] + pos_table[t]."),
    ("padding_penalty_on_real_keys", "the additive mask's large negative number put on the real keys",
     "Your additive mask puts its large negative number on the real keys and 0 on the padding, so a padded "
     "sentence attends to its <pad> keys only. Add it where the key is padding (j ≥ enc_lengths[b]), e.g. "
     "(1 − real) · (−1e9), and 0 where the key is real."),
    ("padding_from_zero_keys", "the padding found from keys of zeros instead of from the lengths",
     "Your mask hides the keys that are all zeros (found from the keys themselves, or from scores of 0), as if a "
     "key's contents said it is padding (besides the lengths, or instead of them). A real token's key can be 0 too, "
     "and it is then hidden (a sentence may lose every key it "
     "has); padding need not be zeros either. The lengths alone say which keys are real: key j of sentence b is "
     "real when j < its length."),
    ("padding_mask_one_length", "every sentence masked with one length (the shortest)",
     "Every sentence of your batch hides the keys from the shortest length on, not from its own: a loop over the "
     "lengths that masks `scores[:, :, L:]` for the whole batch does that. Sentence b hides only its own "
     "padding, the keys j ≥ enc_lengths[b] (scores[b, :, L:] in a loop)."),
    ("padding_lengths_sorted", "the lengths sorted before the padding mask",
     "You sorted the lengths before building the mask, so sentence b is masked with another sentence's length "
     "(right only while the batch already comes longest first). The mask of sentence b must use its own entry of "
     "the lengths, in the batch's own order: nothing needs sorting here."),
    ("permutation_applied_twice", "the permutation applied twice",
     "Your inputs are reordered twice (x[perm][perm], or perm applied to something already reordered). Once "
     "is the new order: x_shuffled = x[perm]."),
    ("outputs_reordered_again", "the outputs of the reordered inputs reordered again",
     "Your x_shuffled is right, but its outputs come out reordered once more: a `[perm]` too many, after "
     "self_attention or on x_shuffled a second time on its way in (attention moves its outputs as its inputs move, "
     "so both give these numbers). Attention on x_shuffled already gives them in the new order: keep them as they "
     "come."),
    ("pe_exponent_sign", "10000^(2i/d) multiplying instead of dividing",
     "Your frequencies grow from one pair of features to the next: the position is multiplied by "
     "10000^(2i/d) (or the exponent's sign is flipped, as in exp(+2i·ln 10000 / d)). Pair i uses the frequency "
     "1 / 10000^(2i/d), which falls from 1 towards 1/10000: divide by 10000^(2i/d)."),
    ("pe_not_in_values", "the values made from x without the positions",
     "Your queries and keys are made from x + pe, but your values from x alone. The positions go into the "
     "inputs: project x + pe for the values too."),
    ("pe_scaled", "the encoding scaled before it is added",
     "Your positions are multiplied by √d_model before they are added. Add the encoding as it is: x + pe."),
    ("rope_theta_from_n", "θ computed with the number of tokens instead of the vector size",
     "Your frequencies use the number of rows n (x.shape[-2]) where the formula has d, the size of each vector "
     "(x.shape[-1]): θ_i = 1 / 10000^(2i/d)."),
    ("rope_positions_consecutive", "consecutive positions from the first one assumed",
     "Your rotation uses positions[0], positions[0] + 1, …: consecutive positions from the first one. The "
     "positions given need not follow each other: turn row j by the angles of positions[j] itself."),
    ("positions_one_row", "one position row added to every token",
     "Every token got the same position vector, one row of pos_emb (indexed with the length, pos_emb[seq], say). "
     "Token t takes row t: pos_emb[:seq], one row per position."),
    ("positions_reversed", "the position rows taken backwards",
     "Your positions run backwards: the first token got the last row. Token t takes row t of pos_emb, in order: "
     "pos_emb[:seq]."),
    ("attention_applied_twice", "the attention layer applied twice",
     "Your model runs its attention layer twice (h + attn(h), then again on the result). This model has one "
     "attention step: (x + attn(x)) @ w_readout."),
    ("log_softmax_before_cross_entropy", "log-probabilities returned instead of the logits",
     "Your model returns log-probabilities (a log_softmax over the vocabulary). Return the raw scores, the "
     "logits: F.cross_entropy applies the log-softmax itself."),
    ("label_smoothing_added", "label smoothing added to the loss",
     "Your loss smooths the labels (label_smoothing): part of each target's weight is spread over every token. "
     "The step asks for the plain cross-entropy of the answer guesses: leave label_smoothing out."),
    ("log_softmax_over_positions", "the log-softmax taken over the positions, not the vocabulary",
     "Your log-softmax (the logsumexp) runs over the positions (dim=1). Each guess is a distribution over the "
     "vocabulary: normalise over the last axis (dim=-1), or let F.cross_entropy do it."),
    ("update_doubled", "each update made twice as large",
     "Your steps move the weights twice as far as the learning rate says: the gradient counted twice (backward() "
     "called twice on the same loss adds it twice into .grad) or the optimizer stepping twice. Call backward() "
     "once and optimizer.step() once per step."),
    ("gradient_divided_by_batch", "the gradient divided by the batch size",
     "Your steps are smaller than the learning rate says: the gradient is divided by the batch size (the loss "
     "divided by it before backward(), say). answer_loss is already a mean: call backward() on it as it is."),
    ("gradient_times_batch", "the gradient multiplied by the batch size",
     "Your steps are larger than the learning rate says: the gradient is multiplied by the batch size (the loss "
     "multiplied by it before backward(), a summed loss). answer_loss is already the mean over the batch: call "
     "backward() on it as it is."),
    ("accuracy_as_percent", "the accuracy as a percentage",
     "Your accuracy is 100 times the fraction of right guesses: a percentage. The step asks for the fraction, "
     "between 0 and 1: leave out the × 100 (a print can still show it as a percentage, with `:.1%`)."),
    ("accuracy_rounded_down", "the accuracy rounded down to 0",
     "Your accuracy is 0 although some guesses are right: either the comparison is never true (the largest logits "
     "themselves, `.max(-1).values`, compared with tokens, or an `.argmax()` without its dim, one index for the "
     "whole tensor: a guess is the position of the largest logit along the last axis, `.argmax(-1)`), or the "
     "fraction was rounded down to a whole number (an integer division, `//`, or `.all()`, which is 1 only when "
     "every guess is right). Compare the argmax with the tokens, then divide as floats: right.float().mean()."),
]

_ALL = [r[0] for r in (*_ROWS, *_PROPERTY_ROWS, *_PROCESS_ROWS)]
if len(_ALL) != len(set(_ALL)):  # a code declared twice would silently lose one of its hints
    raise ValueError(f"mistake codes declared twice: {sorted({c for c in _ALL if _ALL.count(c) > 1})}")

MISTAKES: dict[str, Mistake] = {
    **{code: Mistake(code, title, hint) for code, title, hint in _ROWS},
    **{code: Mistake(code, title, hint, "property") for code, title, hint in _PROPERTY_ROWS},
    **{code: Mistake(code, title, hint, "process") for code, title, hint in _PROCESS_ROWS},
}

# a form of ``clamped`` that the softmax steps name in their own words (`clamped:scores`): the scores' negative
# numbers set to 0 (a ReLU, `clamp(min=0)`) before the softmax
CLAMPED_SCORES_HINT = ("You set the negative scores to 0 before the softmax (a ReLU, `clamp(min=0)`, `maximum(s, 0)`): "
                       "every key that scored below 0 then gets the weight of a score of 0. A negative score is a "
                       "real, low similarity, and the softmax turns it into a small weight by itself: apply it to "
                       "the scores as they are.")
