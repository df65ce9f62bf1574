"""Notebook 10 — a tiny attention model that learns (beyond the seeds), PyTorch.

One causal multi-head attention layer (the student's module of notebook 06, without padding)
inside a tiny model — token and position embeddings, the layer added to its input, a linear
read-out — trained to reverse a sequence of digits: ``d1 … dL | dL … d1``. Only the guesses
made from the separator on can be right more often than chance, so the loss and the accuracy
count those.

- ``10.attention`` and ``10.model`` are value steps like ``06.module``: the student's cell defines
  a module, loads the notebook's weights into it and runs it; the cell is replayed on fresh
  worlds (:func:`world`) of other sizes.
- ``10.loss`` and ``10.accuracy`` are function steps on logits and tokens of random sizes.
- ``10.train_step`` runs the student's ``train_step`` four times on a stand-in model (a table of
  next-token scores, trained with SGD) whose gradients the reference computes by hand, so the
  order of ``zero_grad`` / ``backward`` / ``step`` shows in the losses.
- ``10.trained`` compares the trained model's guesses on fresh sequences with the true answers:
  the behaviour, not the weights. The student's cell is replayed on two more sets of fresh
  sequences (cheap: it only evaluates the trained model); the reference is the task itself, so
  a model passes when it reverses every fresh sequence, and an untrained one fails.
"""

from __future__ import annotations

import functools

import numpy as np

from ..mistakes import MISTAKES
from ..reference import softmax
from ..spec import Exercise, Probe, only_first_token_off, register, upstream_of

NOTEBOOK = "10_tiny_attention_model"

DIGITS, LENGTH = 10, 6  # the task: 6 digits, a separator, the 6 digits reversed
SEP = DIGITS
VOCAB = DIGITS + 1
SEQ_LEN = 2 * LENGTH + 1
MAX_LEN = 8  # the attention example's causal buffer is MAX_LEN × MAX_LEN (the notebook's cell says so)
FRESH = 500  # fresh sequences the trained model is evaluated on
PROBE_STEPS = 4  # train_step is run this many times on the stand-in


# --- the task's sequences (the same generator calls as the notebook's make_sequences) ----------


def make_sequences(rng: np.random.Generator, n: int, length: int = LENGTH, digits: int = DIGITS) -> np.ndarray:
    """n sequences of ``length`` random digits, the separator (token ``digits``), the digits reversed."""
    prompts = rng.integers(0, digits, size=(n, length))
    return np.concatenate([prompts, np.full((n, 1), digits), prompts[:, ::-1]], axis=1)


# --- building blocks (NumPy, float64) ----------------------------------------------------------


def split_heads(x, num_heads, wrong=False):
    b, s, d = x.shape
    if wrong:
        return x.reshape(b, num_heads, s, d // num_heads)
    return x.reshape(b, s, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x, wrong=False):
    b, h, s, dh = x.shape
    if wrong:
        return x.reshape(b, s, h * dh)
    return x.transpose(0, 2, 1, 3).reshape(b, s, h * dh)


@functools.lru_cache(maxsize=64)
def _allowed(n: int, causal: str) -> np.ndarray:
    """(n, n): True where a query (row) may see a key (column): ``lower`` the causal mask, key j ≤ query i; the
    others are its wrong variants (made once per size: read-only)."""
    lower = np.tril(np.ones((n, n), dtype=bool))
    out = {"lower": lower, "none": np.ones((n, n), bool), "upper": lower.T.copy(), "inverted": ~lower,
           "strict": np.tril(lower, -1)}[causal]
    out.flags.writeable = False
    return out


def _weights(x, w_query, w_key, num_heads, *, causal="lower", scale="head", how="inf", wrong_heads=False, axis=-1,
             scores_times=1.0):
    """The attention weights of every head, (batch, heads, seq, seq) (``scores_times``: the scores multiplied by it
    before the mask, as dropout on the scores does)."""
    q, k = (split_heads(x @ w, int(num_heads), wrong_heads) for w in (w_query, w_key))
    scores = q @ np.swapaxes(k, -1, -2) * scores_times
    if scale == "head":
        scores = scores / np.sqrt(q.shape[-1])
    elif scale == "model":
        scores = scores / np.sqrt(x.shape[-1])
    elif scale == "precedence":  # `d_head ** -1/2` is (d_head ** -1) / 2: the scores over 2 d_head
        scores = scores / (2.0 * q.shape[-1])
    n = x.shape[-2]
    allowed = _allowed(int(n), causal)
    if how == "inf":
        with np.errstate(invalid="ignore"):  # a row with nothing allowed is 0/0: NaN, as in PyTorch
            return softmax(np.where(allowed, scores, -np.inf), axis=axis)
    if how == "zero":
        return softmax(np.where(allowed, scores, 0.0), axis=axis)
    if how == "after":
        return softmax(scores, axis=axis) * allowed
    raise ValueError(how)


def attention(x, w_query, w_key, w_value, w_out, num_heads, keep=None, p=0.0, *, causal="lower", scale="head",
              how="inf", wrong_heads=False, project=True, dropout="none", axis=-1, out_transposed=False,
              wrong_merge=False, zero_below=0.0, renormalised=False):
    """Causal multi-head self-attention; ``dropout`` says what happens to the weights (``none``: nothing);
    ``wrong_merge``: the heads merged by a reshape alone, without moving the heads axis back first;
    ``zero_below``: the weights below it set to 0 before the dropout (``renormalised``: each row then divided by its
    new sum)."""
    weights = _weights(x, w_query, w_key, num_heads, causal=causal, scale=scale, how=how, wrong_heads=wrong_heads,
                       axis=axis, scores_times=keep / (1 - p) if dropout == "scores" else 1.0)
    if zero_below:
        weights = np.where(weights < zero_below, 0.0, weights)
        if renormalised:
            weights = weights / weights.sum(axis=-1, keepdims=True)
    if dropout not in ("none", "scores"):
        weights = {"train": weights * keep / (1 - p), "no_rescale": weights * keep, "rescaled": weights / (1 - p),
                   "times_keep": weights * keep * (1 - p), "by_p": weights * keep / p}[dropout]
    v = split_heads(x @ w_value, int(num_heads), wrong_heads)
    merged = merge_heads(weights @ v, wrong_heads or wrong_merge)
    if not project:
        return merged
    return merged @ (w_out.T if out_transposed else w_out)


# --- part 2a: the attention layer, in evaluation and in training mode -------------------------------


ATTENTION_READS = ("x_demo", "w_query", "w_key", "w_value", "w_out", "num_heads", "p_drop", "keep_draw")


def _layer(x_demo, w_query, w_key, w_value, w_out, num_heads, p_drop, keep_draw, *, in_eval="none",
           in_train="train", **how):
    """Both outputs of the layer: ``{"out_eval": …, "out_train": …}``; the keywords make its wrong variants."""
    common = (x_demo, w_query, w_key, w_value, w_out, num_heads, keep_draw, p_drop)
    return {"out_eval": attention(*common, dropout=in_eval, **how),
            "out_train": attention(*common, dropout=in_train, **how)}


def ref_layer(**names):
    return _layer(**{n: names[n] for n in ATTENTION_READS})


def zero_vector(inputs: dict) -> dict:
    """An edge replay with the second position's input vector all zeros (a token may embed so): its key is 0, and
    every query still sees it (score 0). A layer that hides zero vectors as padding (kept from notebook 06) shows."""
    x = np.array(inputs["x_demo"], dtype=np.float64)
    if x.shape[-2] < 2:
        return inputs
    x[..., 1, :] = 0.0
    names = {**inputs, "x_demo": x}
    names |= ref_layer(**names)
    return {n: names[n] for n in inputs}


def loud_layer(inputs: dict) -> dict:
    """An edge replay: the inputs 8 times larger (outputs of a few tens: outputs clamped to a "safe" range show) and,
    where that leaves the largest score a query can see below 200, the query weights scaled up to make it 200: a
    softmax written out without its maximum overflows (exp() of anything above about 88.7 is inf in float32). The
    values grow only with the inputs, so a right float32 answer stays as exact as on the other trials."""
    x = 8.0 * np.asarray(inputs["x_demo"], dtype=np.float64)
    wq = np.asarray(inputs["w_query"], dtype=np.float64)
    heads = int(inputs["num_heads"])
    q = split_heads(x @ wq, heads, False)
    k = split_heads(x @ np.asarray(inputs["w_key"], dtype=np.float64), heads, False)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    n = s.shape[-1]
    visible = float(np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf).max())
    if 0 < visible < 200.0:
        wq = wq * (200.0 / visible)
    names = {**inputs, "x_demo": x, "w_query": wq}
    names |= ref_layer(**names)
    return {n: names[n] for n in inputs}


FAR = -1e6  # the score of :func:`layer_fill_far`'s first query with its one visible key


def layer_fill_far(inputs: dict) -> dict:
    """An edge replay: the first sequence's first token x = c·e₀ (the first row of w_query all 1/√d, w_key =
    −w_query), so that its query scores exactly −10⁶ with its own key, the one key it sees, in every head; and that
    key's value exactly 0 (the first row of w_value 0). Masked with −∞ (or −1e9), its output is 0, exactly; a finite
    fill above −10⁶ (−1e4) gives its weight to the keys after it."""
    x = np.array(inputs["x_demo"], dtype=np.float64)
    wq, wv = np.array(inputs["w_query"], dtype=np.float64), np.array(inputs["w_value"], dtype=np.float64)
    d, h = x.shape[-1], int(inputs["num_heads"])
    if x.ndim != 3 or x.shape[1] < 2:
        return inputs
    wq[0] = 1.0 / np.sqrt(d)
    wv[0] = 0.0
    x[0, 0] = 0.0
    x[0, 0, 0] = np.sqrt(-FAR * np.sqrt(d // h) * h)  # each head's score: −c² · (d/h) / d / √(d/h) = −10⁶
    return {**inputs, "x_demo": x, "w_query": wq, "w_key": -wq, "w_value": wv}


FAINT = 10.5  # how far the faint key of :func:`faint_key` scores below the other one: a weight of 2.75e-5
FAINT_VALUE = 32.0  # that key's value in every feature: the faint weight moves the second output by about 1e-3


def faint_key(inputs: dict) -> dict:
    """An edge replay: in the first sequence, the second query sees the first key with a weight of 2.75e-5 (it
    scores that key 0 and its own key FAINT, in every head: x₀ = e₀ and x₁ = c·e₁, the first row of w_key 0, its
    second row and w_query's second row all 1/√d), and that key's value is 32 in every feature (the first row of
    w_value): weights set to 0 below a threshold of 1e-4 or more (`w[w < 1e-4] = 0`) move that output by about 1e-3,
    where the random replays' weights rarely go below 1e-3. (A value of 32, not more: every later query of that
    sequence sees it with an ordinary weight, and float32's rounding of outputs that size stays far inside the
    tolerance.)"""
    x = np.array(inputs["x_demo"], dtype=np.float64)
    wq, wk, wv = (np.array(inputs[n], dtype=np.float64) for n in ("w_query", "w_key", "w_value"))
    d, h = x.shape[-1], int(inputs["num_heads"])
    if x.ndim != 3 or x.shape[1] < 2 or d < 2:
        return inputs
    x[0, :2] = 0.0
    x[0, 0, 0] = 1.0
    x[0, 1, 1] = np.sqrt(FAINT * d / np.sqrt(d // h))  # each head's score of its own key: c² · √(d/h) / d = FAINT
    wq[1] = wk[1] = 1.0 / np.sqrt(d)
    wk[0] = 0.0
    wv[0] = FAINT_VALUE
    names = {**inputs, "x_demo": x, "w_query": wq, "w_key": wk, "w_value": wv}
    names |= ref_layer(**names)
    return {n: names[n] for n in inputs}


def _weights_zeroed(answer, inputs) -> bool:
    """A sign of ``small_values_zeroed``: both outputs are those of the layer whose weights below a threshold (one
    of 1e-2 … 1e-6) are set to 0 after the softmax, with or without each row divided by its new sum."""
    for t in (1e-2, 1e-3, 1e-4, 1e-5, 1e-6):
        for renormalised in (False, True):
            variant = _layer(**{n: inputs[n] for n in ATTENTION_READS}, zero_below=t, renormalised=renormalised)
            if all(np.allclose(np.asarray(answer[n], dtype=np.float64), variant[n], rtol=1e-4, atol=2e-5)
                   for n in variant):
                return True
    return False


def _layer_fill_leaks(answer, inputs) -> bool:
    """A sign of ``mask_fill_too_small`` on :func:`layer_fill_far`'s replay: the first token's output (evaluation
    mode) is not 0, and every other output is right."""
    x = np.asarray(inputs["x_demo"], dtype=np.float64)
    if x.ndim != 3 or not (np.all(x[0, 0, 1:] == 0) and x[0, 0, 0] > 100):
        return False
    return only_first_token_off(answer["out_eval"], ref_layer(**inputs)["out_eval"])


def _layer_variant(**how):
    return lambda **names: _layer(**{n: names[n] for n in ATTENTION_READS}, **how)


def _projections_transposed(**names):
    """The layer with every projection used as x @ w.T (`F.linear(x, w)`, nn.Linear's convention)."""
    return _layer(**{n: np.swapaxes(np.asarray(names[n]), -1, -2) if n in ("w_query", "w_key", "w_value", "w_out")
                     else names[n] for n in ATTENTION_READS})


ATTENTION_MISTAKES = {
    "dropout_in_eval": _layer_variant(in_eval="train"),
    # the division by (1 − p) outside `if self.training:`: evaluation's weights scaled up, none dropped
    "dropout_in_eval:rescaled": _layer_variant(in_eval="rescaled"),
    "missing_dropout": _layer_variant(in_train="none"),
    "dropout_mode_inverted": _layer_variant(in_eval="train", in_train="none"),
    "dropout_no_rescale": _layer_variant(in_train="no_rescale"),
    "dropout_scale_by_keep": _layer_variant(in_train="times_keep"),
    "dropout_divide_by_p": _layer_variant(in_train="by_p"),
    "missing_scale": _layer_variant(scale="none"),
    "scale_by_d_model": _layer_variant(scale="model"),
    "power_precedence": _layer_variant(scale="precedence"),
    "missing_causal_mask": _layer_variant(causal="none"),
    "mask_wrong_triangle": _layer_variant(causal="upper"),
    "causal_mask_inverted": _layer_variant(causal="inverted"),
    "fully_masked_row": _layer_variant(causal="strict"),
    "mask_after_softmax": _layer_variant(how="after"),
    "mask_with_zero": _layer_variant(how="zero"),
    "softmax_wrong_axis": _layer_variant(axis=-2),
    "softmax_over_heads": _layer_variant(axis=1),  # dim=1, the last axis of a 2-D matrix, is the heads here
    "heads_reshaped_without_transpose": _layer_variant(wrong_heads=True),
    # split right, merged by a reshape alone: (batch, heads, seq, d_head) read as if it were (batch, seq, …)
    "heads_merged_without_transpose": _layer_variant(wrong_merge=True),
    "missing_output_projection": _layer_variant(project=False),
    "output_projection_transposed": _layer_variant(out_transposed=True),
    "projections_transposed": _projections_transposed,
    # the scores dropped (in training mode), then masked and the softmax taken
    "dropout_before_softmax": _layer_variant(in_train="scores"),
}

ATTENTION_HINTS = {
    "small_values_zeroed": "Your layer sets its small attention weights to 0 (below a threshold, after the softmax): "
    "a query's faint weight on a key whose value is large then no longer counts, and a row of weights no longer sums "
    "to 1. Keep every weight the softmax gives; a small weight is still a weight.",
    "power_precedence": "Your scores are divided by 2·d_head, not by √d_head: `d_head ** -1/2` is (d_head ** -1) / 2 "
    "(and `s / d_head ** 1/2` is (s / d_head) / 2), because Python raises to the power before it divides. Write "
    "`d_head ** -0.5`, or divide by `math.sqrt(d_head)`.",
    "dropout_no_rescale": "In training mode your module zeroes the dropped weights but does not rescale the kept "
    "ones: inverted dropout divides what it keeps by (1 − p). (If your forward does divide by 1 − self.dropout, "
    "look for what changed self.dropout on the way: setting it to 0 in evaluation mode keeps it 0 for every later "
    "call, in training too.)",
    "not_as_asked": "Your layer's output does not depend on its buffer `causal_mask`: the forward makes the causal "
    "mask again (or lets the fused function make it), or keeps what it made from the buffer on an earlier call, "
    "instead of reading the buffer the __init__ registers at every call. Part 6 "
    "switches the mask off through that buffer, to show what the model does without it: use "
    "self.causal_mask[:seq, :seq].",
    "missing_scale": "Your scores were not divided by √d_head. Inside each head, divide q·kᵀ by the square root of "
    "the head size (q.shape[-1]) before the softmax.",
    "scale_by_d_model": "You divided the scores by √d_model. Each head's scores are dot products of vectors of size "
    "d_head = d_model // num_heads: divide by √d_head.",
    "softmax_over_heads": "Your softmax ran along dim=1, which in the (batch, heads, query, key) scores is the "
    "heads. Every head normalises its own row of scores over the keys: dim=-1. (Along the heads, a hidden score is "
    "−∞ in every head, so the weights there are 0/0 = NaN.)",
    "missing_output_projection": "You put the heads side by side but left out the output projection: multiply the "
    "merged heads by self.w_out.",
    "dropout_in_eval:rescaled": "In evaluation mode your layer drops nothing but still divides the attention "
    "weights by (1 − p), so every output is 1 / (1 − p) times too large (each row of weights sums to more than 1). "
    "The division belongs to the dropout: do it inside `if self.training:`, with the draw; after `.eval()` the "
    "weights stay as the softmax gives them.",
    "dropout_in_eval": "Your layer drops attention weights in evaluation mode too. Apply the draw only when "
    "`self.training` is True; after `.eval()` the weights stay as they are.",
    "missing_dropout": "In training mode your layer leaves the attention weights as they are. When `self.training` "
    "is True, multiply them by the keep-mask and divide by (1 − p).",
    "missing_causal_mask": "Every query still sees the keys after it: the causal mask is missing. Hide the scores "
    "where `self.causal_mask` (cut to the sequence's length) is True, before the softmax.",
    "mask_wrong_triangle": "Your mask hides the past instead of the future: query i may look at keys j ≤ i. The "
    "buffer `self.causal_mask` is True above the diagonal, where the scores must be hidden.",
    "causal_mask_inverted": "Your mask is the wrong way round: it hides what each query may see (keys j ≤ i) and "
    "shows the future. In masked_fill, True means 'hide': pass `self.causal_mask[:seq, :seq]` as it is.",
    "fully_masked_row": "Your mask hides the diagonal too, so the first query has no key left and its row is "
    "0/0 = NaN. A token may attend to itself: hide only the keys after it (torch.triu(…, diagonal=1)).",
    "dropout_before_softmax": "Your layer drops the scores, before the softmax: a dropped score becomes 0 (and a "
    "dropped −∞ of the mask becomes 0 × −∞ = NaN), and the softmax then spreads the weight again over what is left. "
    "Dropout acts on the attention weights, after the softmax and before the product with the values.",
}


# --- part 2b: the model ------------------------------------------------------------------------------


MODEL_READS = ("tokens_demo", "token_emb_demo", "pos_emb_demo", "w_readout_demo", "w_query", "w_key", "w_value",
               "w_out", "num_heads")


def _model(tokens_demo, token_emb_demo, pos_emb_demo, w_readout_demo, w_query, w_key, w_value, w_out, num_heads,
           *, positions="from_zero", residual=True, probabilities=False, causal="lower", readout=True, twice=False,
           **_):
    tokens = np.asarray(tokens_demo).astype(int)
    x = token_emb_demo[tokens]
    seq = tokens.shape[1]
    if positions == "from_zero":
        x = x + pos_emb_demo[:seq]
    elif positions == "from_one":
        x = x + pos_emb_demo[1: seq + 1]
    elif positions == "one_row":  # pos_emb[seq]: the row after the last position, for every token
        x = x + pos_emb_demo[seq]
    elif positions == "reversed":
        x = x + pos_emb_demo[:seq][::-1]
    elif positions == "by_batch":  # row b of the table for every token of sequence b
        x = x + pos_emb_demo[: tokens.shape[0]][:, None]
    out = attention(x, w_query, w_key, w_value, w_out, num_heads, causal=causal)
    h = x + out if residual is True else x * out if residual == "multiplied" else out
    if twice:  # the one layer applied a second time
        h = h + attention(h, w_query, w_key, w_value, w_out, num_heads, causal=causal)
    if not readout:
        return {"logits_demo": h}
    logits = h @ (token_emb_demo.T if readout == "tied" else w_readout_demo)
    if probabilities == "log":
        return {"logits_demo": np.log(softmax(logits))}
    return {"logits_demo": softmax(logits) if probabilities else logits}


def ref_model(**names):
    return _model(**names)


def _model_variant(**how):
    return lambda **names: _model(**names, **how)


MODEL_MISTAKES = {
    "positions_not_added": _model_variant(positions="none"),
    "positions_from_one": _model_variant(positions="from_one"),
    "missing_residual": _model_variant(residual=False),
    "softmax_before_cross_entropy": _model_variant(probabilities=True),
    "missing_causal_mask": _model_variant(causal="none"),
    "missing_readout": _model_variant(readout=False),
    "positions_one_row": _model_variant(positions="one_row"),
    "positions_reversed": _model_variant(positions="reversed"),
    "attention_applied_twice": _model_variant(twice=True),
    "log_softmax_before_cross_entropy": _model_variant(probabilities="log"),
    "positions_from_batch_axis": _model_variant(positions="by_batch"),
    "residual_multiplied": _model_variant(residual="multiplied"),
    "readout_through_embedding": _model_variant(readout="tied"),
}

# a model of the notebook's class with dropout, for the probe that runs it twice in training mode
DROPPING_MODEL = {"vocab_size": 9, "d_model": 6, "num_heads": 2, "max_len": 8, "dropout": 0.5}

MODEL_HINTS = {
    "not_as_asked:forward_called": "Your numbers are right, but your model calls its layer's `.forward(...)` "
    "directly. Call the layer itself, `self.attn(h)`: calling a module runs its hooks around forward, and the "
    "notebook reads the layer's input through one to draw its attention weights (they would never be seen).",
    "positions_not_added": "Your model's input vectors carry no position: each token's row of `token_emb` needs the "
    "row of `pos_emb` of its position added. Without it, equal tokens at different places look the same to "
    "attention.",
    "positions_from_one": "Your positions start at 1. The first token is at position 0: it takes row 0 of "
    "`pos_emb`, and a sequence of seq tokens takes rows 0 … seq − 1.",
    "softmax_before_cross_entropy": "Your model returns probabilities (a softmax over the vocabulary). Return the "
    "raw scores, the logits: the loss, F.cross_entropy, applies the (log-)softmax itself.",
    "missing_causal_mask": "The logits at a position change when a later token changes: the model sees the future. "
    "The attention layer's causal mask is missing (see 10.attention): fix the layer's forward.",
}


# --- part 3: the loss, and part 5: the accuracy (function steps) ---------------------------------------


def _answer_slices(tokens, start=0, shifted=True, everything=False, length_from_batch=False, typed_in=False,
                   early=False):
    """(guess positions, target positions) as slices of the sequence axis."""
    n = tokens.shape[1]
    length = LENGTH if typed_in else (tokens.shape[0] if length_from_batch else n) // 2
    if everything:
        return slice(0, n - 1), slice(1, n)
    if not shifted:
        return slice(length + 1, n), slice(length + 1, n)
    if early:  # both windows one position to the left: from the last prompt digit to the second-to-last answer
        return slice(length - 1, n - 2), slice(length, n - 1)
    return slice(length + start, n - 1), slice(length + 1 + start, n)


def _guesses(logits, tokens, **where):
    tokens = np.asarray(tokens).astype(int)
    guess, target = _answer_slices(tokens, **where)
    return logits[:, guess], tokens[:, target]


def _log_probs(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _picked(values, targets):
    return np.take_along_axis(values, targets[..., None], axis=-1)[..., 0]


def _loss(logits, tokens, *, reduce="mean", how="ce", **where):
    guesses, targets = _guesses(logits, tokens, **where)
    if how == "ce":
        per = -_picked(_log_probs(guesses), targets)
    elif how == "softmax_twice":
        per = -_picked(_log_probs(softmax(guesses)), targets)
    elif how == "no_minus":
        per = _picked(_log_probs(guesses), targets)
    elif how == "nll_on_logits":
        per = -_picked(guesses, targets)
    elif how == "smoothed":  # F.cross_entropy(..., label_smoothing=0.1)
        per = -(0.9 * _picked(_log_probs(guesses), targets) + 0.1 * _log_probs(guesses).mean(axis=-1))
    elif how == "over_positions":  # logsumexp(dim=1, keepdim=True) − the picked logit: (b, 1, vocab) − (b, L, 1)
        m = guesses.max(axis=1, keepdims=True)
        lse = m + np.log(np.exp(guesses - m).sum(axis=1, keepdims=True))
        per = lse - _picked(guesses, targets)[..., None]
    else:
        raise ValueError(how)
    if per.size == 0:  # no guess left (a length typed in, longer than the sequences): the mean is NaN
        return np.nan
    return {"mean": per.mean(), "sum": per.sum(), "per_sequence": per.sum() / len(per),
            "per_length": per.sum() / per.shape[1]}[reduce]


def ref_loss(logits, tokens):
    return _loss(logits, tokens)


def native_loss(logits, tokens):
    """The reference in PyTorch, differentiable: what 10.train_step trains through when it is judged with a right
    answer_loss."""
    import torch.nn.functional as F

    length = tokens.shape[1] // 2
    return F.cross_entropy(logits[:, length:-1].reshape(-1, logits.shape[-1]), tokens[:, length + 1:].reshape(-1))


LOSS_MISTAKES = {
    "targets_not_shifted": lambda logits, tokens: _loss(logits, tokens, shifted=False),
    "prompt_positions_counted": lambda logits, tokens: _loss(logits, tokens, everything=True),
    "first_answer_skipped": lambda logits, tokens: _loss(logits, tokens, start=1),
    "softmax_before_cross_entropy": lambda logits, tokens: _loss(logits, tokens, how="softmax_twice"),
    "summed_not_averaged": lambda logits, tokens: _loss(logits, tokens, reduce="sum"),
    "loss_sign_flipped": lambda logits, tokens: _loss(logits, tokens, how="no_minus"),
    "nll_without_log_softmax": lambda logits, tokens: _loss(logits, tokens, how="nll_on_logits"),
    "divided_by_batch_size": lambda logits, tokens: _loss(logits, tokens, reduce="per_sequence"),
    "length_from_batch_axis": lambda logits, tokens: _loss(logits, tokens, length_from_batch=True),
    "hard_coded": lambda logits, tokens: _loss(logits, tokens, typed_in=True),
    "divided_by_length": lambda logits, tokens: _loss(logits, tokens, reduce="per_length"),
    "guesses_one_early": lambda logits, tokens: _loss(logits, tokens, early=True),
    "label_smoothing_added": lambda logits, tokens: _loss(logits, tokens, how="smoothed"),
    "log_softmax_over_positions": lambda logits, tokens: _loss(logits, tokens, how="over_positions"),
}

TYPED_LENGTH_HINT = (
    "Your function uses the notebook's length, L = 6, typed in, so it is wrong for sequences of another length "
    "(on short ones nothing is left to average: NaN). Compute L from the shape of `tokens`."
)


def _accuracy(logits, tokens, *, reduce="mean", whole=False, **where):
    guesses, targets = _guesses(logits, tokens, **where)
    if guesses.shape[1] == 0:  # no guess left (a length typed in, longer than the sequences): the mean is NaN
        return np.nan
    right = guesses.argmax(axis=-1) == targets
    if whole:
        return right.all(axis=1).mean()
    return {"mean": right.mean(), "sum": right.sum(), "per_sequence": right.sum() / len(right),
            "per_length": right.sum() / right.shape[1]}[reduce]


def ref_accuracy(logits, tokens):
    return _accuracy(logits, tokens)


ACCURACY_MISTAKES = {
    "targets_not_shifted": lambda logits, tokens: _accuracy(logits, tokens, shifted=False),
    "prompt_positions_counted": lambda logits, tokens: _accuracy(logits, tokens, everything=True),
    "first_answer_skipped": lambda logits, tokens: _accuracy(logits, tokens, start=1),
    "whole_sequences_counted": lambda logits, tokens: _accuracy(logits, tokens, whole=True),
    "summed_not_averaged": lambda logits, tokens: _accuracy(logits, tokens, reduce="sum"),
    "divided_by_batch_size": lambda logits, tokens: _accuracy(logits, tokens, reduce="per_sequence"),
    "length_from_batch_axis": lambda logits, tokens: _accuracy(logits, tokens, length_from_batch=True),
    "hard_coded": lambda logits, tokens: _accuracy(logits, tokens, typed_in=True),
    "divided_by_length": lambda logits, tokens: _accuracy(logits, tokens, reduce="per_length"),
    "guesses_one_early": lambda logits, tokens: _accuracy(logits, tokens, early=True),
    "accuracy_as_percent": lambda logits, tokens: 100.0 * np.asarray(_accuracy(logits, tokens), dtype=np.float64),
}


def _bfloat16(a) -> np.ndarray:
    """``a`` rounded to bfloat16 (float32's top 16 bits, to nearest even), as float64."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)

def _rounded_down(answer, inputs) -> bool:
    """The fraction rounded down to a whole number (the count divided with `//`): 0 where some guesses, not all,
    are right."""
    got, want = float(np.asarray(next(iter(answer.values())), dtype=np.float64)), float(ref_accuracy(**inputs))
    return 0 < want < 1 and got == 0.0


def _not_shifted_at_guesses(answer, inputs) -> bool:
    """Each guess of the answer window (from the separator on) compared with the token at its own position."""
    tokens = np.asarray(inputs["tokens"]).astype(int)
    n = tokens.shape[1]
    guess = slice(n // 2, n - 1)
    wrong = (np.asarray(inputs["logits"])[:, guess].argmax(axis=-1) == tokens[:, guess]).mean()
    return bool(np.isclose(float(np.asarray(next(iter(answer.values())), dtype=np.float64)), wrong, atol=1e-6))


_not_shifted_at_guesses.refutable = True  # the mistake's own number: where the answer is right, it would differ
def _count_wrapped(answer, inputs) -> bool:
    """The right guesses counted in a small integer type (int8, uint8, int16) that wrapped around: the count
    behind the answer is off from the right one by a multiple of 256."""
    tokens = np.asarray(inputs["tokens"])
    counted = tokens.shape[0] * ((tokens.shape[1] - 1) // 2)
    got, want = float(np.asarray(next(iter(answer.values())), dtype=np.float64)), float(ref_accuracy(**inputs))
    off = round(got * counted) - round(want * counted)
    return counted > 127 and got != want and off != 0 and off % 256 == 0


def _half_guesses(answer, inputs) -> bool:
    """The guesses taken from the logits in half precision (float16 or bfloat16): near-ties become ties, which the
    argmax settles on the lower token (the near_ties trial). A sign, not a variant: on random logits it changes
    nothing."""
    got, want = float(np.asarray(next(iter(answer.values())), dtype=np.float64)), float(ref_accuracy(**inputs))
    logits = np.asarray(inputs["logits"])
    return got != want and any(np.isclose(got, _accuracy(half, inputs["tokens"]), rtol=1e-6, atol=1e-9)
                               for half in (logits.astype(np.float16).astype(np.float64), _bfloat16(logits)))


def _one_guess_squeezed(answer, inputs) -> bool:
    """On sequences with one guess each (the one_digit trial), the fraction a squeeze that also drops the guesses'
    axis gives: (batch,) guesses compared with (batch, 1) answers broadcast to a (batch, batch) table."""
    got, want = float(np.asarray(next(iter(answer.values())), dtype=np.float64)), float(ref_accuracy(**inputs))
    guesses, targets = _guesses(np.asarray(inputs["logits"]), np.asarray(inputs["tokens"]))
    if guesses.shape[1] != 1 or len(targets) < 2:
        return False
    table = guesses.argmax(axis=-1)[:, 0][None, :] == targets[:, 0][:, None]
    return got != want and bool(np.isclose(got, table.mean(), rtol=1e-6, atol=1e-9))


ACCURACY_SIGNS = {"accuracy_rounded_down": _rounded_down, "targets_not_shifted": _not_shifted_at_guesses,
                  "integer_overflow": _count_wrapped, "wrong_dtype": _half_guesses,
                  "squeezed_axes": _one_guess_squeezed}

ACCURACY_HINTS = {
    "hard_coded": TYPED_LENGTH_HINT,
    "squeezed_axes": "On sequences with a one-digit prompt there is one guess per sequence, and a `.squeeze()` "
    "drops that axis from one side of your comparison: (batch,) compared with (batch, 1) broadcasts to a (batch, "
    "batch) table, every guess against every sequence's answer. Squeeze only the axis you mean (or nothing), so that "
    "guesses and answers both have shape (batch, answers).",
    "integer_overflow": "Your count of right guesses wraps around: it is kept in a small integer type (int8 holds "
    "at most 127, uint8 255), so a batch with more right guesses than that comes out negative or far too small. "
    "Let `.sum()` count in its own int64, or take the mean of the comparison as floats (`.float().mean()`).",
    "wrong_dtype": "Your guesses come from the logits in half precision (float16 or bfloat16, which keep about 3 "
    "significant digits): two logits closer than that become a tie, which the argmax settles on the lower token. "
    "Take the argmax of the logits as they are.",
    "summed_not_averaged": "You counted the right guesses. The accuracy is their fraction: take the mean over "
    "the answer tokens of all the sequences (a number between 0 and 1).",
}


def logits_example() -> dict:
    """The notebook's `logits_try` (random scores) and `examples`."""
    return {"logits": np.random.default_rng(3).normal(size=(3, SEQ_LEN, VOCAB)),
            "tokens": make_sequences(np.random.default_rng(0), 3)}


def _sizes(rng):
    batch, length, digits = int(rng.integers(2, 6)), int(rng.integers(2, 7)), int(rng.integers(3, 11))
    return batch, length, digits


def loss_inputs(rng=None) -> dict:
    if rng is None:
        return logits_example()
    batch, length, digits = _sizes(rng)
    tokens = make_sequences(rng, batch, length, digits)
    return {"logits": 2.0 * rng.normal(size=(*tokens.shape, digits + 1)), "tokens": tokens}


def loud_logits(inputs: dict) -> dict:
    """An edge trial: the logits 50 times larger (several hundred, as an overconfident model's): a log-sum-exp
    written out without the maximum overflows there (exp(400) is inf in float32), and so does the log of a softmax
    whose smallest probabilities underflow to 0; cross_entropy stays finite."""
    return {**inputs, "logits": 50.0 * np.asarray(inputs["logits"], dtype=np.float64)}


def louder_logits(inputs: dict) -> dict:
    """An edge trial: the logits 400 times larger (thousands apart): the log of a softmax underflows to log(0) = -inf
    even in float64 once the answer's logit lies more than about 745 below the largest; cross_entropy stays finite."""
    return {**inputs, "logits": 400.0 * np.asarray(inputs["logits"], dtype=np.float64)}


def past_half_range(inputs: dict) -> dict:
    """An edge trial: the logits scaled so that the largest of the guesses (positions L to 2L − 1) lies near 70 000,
    past float16's largest number (65 504), with many decimals: logits sent through float16 (or bfloat16) come back
    inf or rounded, where float32's cross-entropy stays finite and exact."""
    logits = np.asarray(inputs["logits"], dtype=np.float64)
    length = (logits.shape[1] - 1) // 2
    guesses = logits[:, length:2 * length]
    top = float(guesses.max()) if guesses.size and guesses.max() > 0 else float(np.abs(logits).max())
    return {**inputs, "logits": logits * (70_000.0 / (top or 1.0))}


def answers_off_rule(inputs: dict) -> dict:
    """The edge trial: the answer tokens of every sequence moved one place (rolled) and each one digit on, so they
    no longer follow the task's rule. The loss and the accuracy compare the guesses with the tokens as they are: a
    version that rebuilds the answers from the rule (the prompt reversed) shows."""
    tokens = np.array(inputs["tokens"])
    length = (tokens.shape[1] - 1) // 2
    digits = np.asarray(inputs["logits"]).shape[-1] - 1  # the separator is token `digits`
    # rolled, and every answer digit moved on by one as well: a roll alone changes nothing in a sequence whose
    # answer digits are all the same
    tokens[:, length + 1:] = (np.roll(tokens[:, length + 1:], 1, axis=1) + 1) % digits
    return {**inputs, "tokens": tokens}


def tied_logits(first: dict) -> dict:
    """An edge trial from the first random one: every logit of one sequence 0 (the first whose answer digits are not
    all the same), so every guess there is a tie: an answer that counts a guess right whenever the answer's logit
    equals the largest counts every tie right. Which tied token is the guess, the step does not say (the argmax takes
    the first, `topk` or `kthvalue` may take another): any way of breaking the ties is right (see
    :func:`_ties_broken`)."""
    logits, tokens = np.array(first["logits"], dtype=float), np.asarray(first["tokens"])
    _, targets = _guesses(logits, tokens)
    varied = [b for b in range(len(targets)) if len(set(targets[b].tolist())) > 1]
    logits[varied[0] if varied else 0] = 0.0
    return {**first, "logits": logits}


def _ties_broken(answer: np.ndarray, inputs: dict) -> bool:
    """Is ``answer`` the accuracy for some way of breaking the exact ties of the guesses (each tied guess right or
    not, as the token picked among the tied ones is the answer or not)? Not when every tie is counted right, unless
    the tied answers are all one token (picked everywhere by a rule that goes by the token's position)."""
    guesses, targets = _guesses(np.asarray(inputs["logits"], dtype=float), inputs["tokens"])
    top = guesses.max(axis=-1, keepdims=True)
    tied = (guesses == top).sum(axis=-1) > 1
    could = tied & (_picked(guesses, targets) == top[..., 0])  # a tie the answer is part of
    sure = (guesses.argmax(axis=-1) == targets) & ~tied
    if answer.size != 1 or not could.any():
        return False
    k = float(answer.ravel()[0]) * targets.size - int(sure.sum())
    most = int(could.sum()) - (len(set(targets[could].tolist())) > 1)
    return abs(k - round(k)) < 1e-3 and 0 <= round(k) <= most


tied_logits.of_first_trial = True
tied_logits.accepts = _ties_broken


def near_ties(first: dict) -> dict:
    """An edge trial from the first random one: at every answer guess, the answer's logit 1.0003 and the token below
    it 1.0001 (the rest far lower), so every guess is right by a hair, as float32 tells them apart: logits through
    float16 (whose steps near 1 are 0.001) tie there, and the argmax then settles on the lower token."""
    logits, tokens = np.array(first["logits"], dtype=float), np.asarray(first["tokens"])
    length = (tokens.shape[1] - 1) // 2
    for b in range(tokens.shape[0]):
        for i in range(length):
            right = int(tokens[b, length + 1 + i])
            logits[b, length + i] = -3.0
            logits[b, length + i, right] = 1.0003
            logits[b, length + i, (right - 1) % logits.shape[-1]] = 1.0001
    return {**first, "logits": logits}


near_ties.of_first_trial = True


def separator_answer(_: dict) -> dict:
    """An edge trial of the notebook's own sizes (its separator is the notebook's SEP): the first sequence's last
    answer token is the separator itself, as a batch off the task's rule may hold. The loss counts every answer
    token as it is: one that leaves the separator out (`ignore_index=SEP`) shows."""
    example = logits_example()
    tokens = np.array(example["tokens"])
    tokens[0, -1] = SEP
    return {**example, "tokens": tokens}


def separator_loudest(first: dict) -> dict:
    """An edge trial from the first random one: at every sequence's first answer guess, the separator's logit the
    largest and the right token's the second: that guess is wrong (the model guesses the separator). An argmax over
    the digits only (the separator's logit dropped) counts it right."""
    logits, tokens = np.array(first["logits"], dtype=float), np.asarray(first["tokens"])
    n = tokens.shape[1]
    guess = n // 2  # the first guess of an answer token (the separator's position)
    sep = logits.shape[-1] - 1
    rows = np.arange(len(tokens))
    top = logits[rows, guess].max(axis=-1)
    logits[rows, guess, tokens[rows, guess + 1]] = top + 1.0
    logits[rows, guess, sep] = top + 2.0
    return {**first, "logits": logits}


separator_loudest.of_first_trial = True


def one_digit(first: dict) -> dict:
    """An edge trial from the first random one: prompts of one digit, so one guess per sequence (guesses of shape
    (batch, 1)): a squeeze that drops that axis too, and then compares (batch,) with (batch, 1), shows. The first
    half of the sequences guess right (a bonus on their answer), so that the fraction is neither 0 nor 1; drawn
    again until the (batch, batch) comparison such a broadcast makes gives another fraction (by chance it gave the
    same on one draw in twenty)."""
    logits = np.asarray(first["logits"])
    batch, digits = max(logits.shape[0], 3), logits.shape[-1] - 1
    rng = np.random.default_rng([batch, digits])
    for _ in range(100):
        tokens = make_sequences(rng, batch, 1, digits)
        logits = rng.normal(size=(*tokens.shape, digits + 1))
        rows = np.arange((batch + 1) // 2)
        logits[rows, 1, tokens[rows, 2]] += 6.0
        guess, answer = logits[:, 1].argmax(-1), tokens[:, 2]
        if abs(np.mean(guess == answer) - np.mean(guess[None, :] == answer[:, None])) > 1e-3:
            break
    return {"logits": logits, "tokens": tokens}


one_digit.of_first_trial = True


def unused_tokens(first: dict) -> dict:
    """An edge trial from the first random one: a vocabulary two tokens larger than the batch uses (a model's
    vocabulary holds tokens a batch need not contain), so that a vocabulary size read off the tokens
    (`tokens.max() + 1`) instead of the logits shows. The extra logits are drawn from a generator seeded by the
    sizes."""
    logits = np.asarray(first["logits"])
    extra = np.random.default_rng(list(logits.shape)).normal(size=(*logits.shape[:-1], 2))
    return {**first, "logits": np.concatenate([logits, extra], axis=-1)}


unused_tokens.of_first_trial = True


def confidently_wrong(first: dict) -> dict:
    """An edge trial from the first random one: every next token's logit 25 below the others', so every guess is
    confidently wrong and the loss is about 27, above any cap a loss might be given (`.clamp(max=20)`). Its
    probability, e^-27, is still a normal float32 number: -log(softmax) stays exact."""
    logits, tokens = np.array(first["logits"], dtype=float), np.asarray(first["tokens"])
    b, t = np.meshgrid(np.arange(tokens.shape[0]), np.arange(tokens.shape[1] - 1), indexing="ij")
    logits[b, t, tokens[:, 1:]] -= 25.0
    return {**first, "logits": logits}


confidently_wrong.of_first_trial = True


def _capped(answer, inputs) -> bool:
    """On the confidently wrong trial (a right loss above 20): a finite loss below the right one (a cap)."""
    want = float(ref_loss(np.asarray(inputs["logits"], dtype=float), inputs["tokens"]))
    got = np.asarray(next(iter(answer.values())), dtype=float)
    return want > 20 and got.size == 1 and bool(np.isfinite(got).all()) and float(got.ravel()[0]) < want - 1e-3


def accuracy_inputs(rng=None) -> dict:
    """Scores of a half-trained model: at the answer positions, the right next token gets a bonus (nine
    times in ten for the first guess, six in ten for the others), so the reference and its wrong
    variants give different fractions."""
    if rng is None:
        return logits_example()
    batch, length, digits = _sizes(rng)
    length = max(length, 3)
    tokens = make_sequences(rng, batch, length, digits)
    logits = rng.normal(size=(*tokens.shape, digits + 1))
    sure = rng.random((batch, length)) < np.where(np.arange(length) == 0, 0.9, 0.6)  # the first guess is easiest
    rows, cols = np.nonzero(sure)
    logits[rows, length + cols, tokens[rows, length + 1 + cols]] += 4.0
    return {"logits": logits, "tokens": tokens}


def large_vocabulary(first: dict) -> dict:
    """An edge trial: 40 sequences of 6 digits out of 13 (a vocabulary of 14, above the notebook's 11), most answers
    guessed right (more than 200 of 240): a size read from the notebook (`VOCAB`) shows, and so does a count kept
    in a small integer type (int8 wraps past 127). From a generator seeded by the first trial's shape."""
    rng = np.random.default_rng([*np.shape(first["tokens"]), 14])
    batch, length, digits = 40, 6, 13
    tokens = make_sequences(rng, batch, length, digits)
    logits = rng.normal(size=(*tokens.shape, digits + 1))
    rows, cols = np.nonzero(rng.random((batch, length)) < 0.9)
    logits[rows, length + cols, tokens[rows, length + 1 + cols]] += 6.0
    return {"logits": logits, "tokens": tokens}


large_vocabulary.of_first_trial = True


def _all_guessed(rng: np.random.Generator, batch: int, length: int, digits: int) -> dict:
    """Sequences whose every answer the logits guess right (its token 8 above random scores)."""
    tokens = make_sequences(rng, batch, length, digits)
    logits = rng.normal(size=(*tokens.shape, digits + 1))
    rows, cols = np.meshgrid(np.arange(batch), np.arange(length), indexing="ij")
    logits[rows, length + cols, tokens[rows, length + 1 + cols]] += 8.0
    return {"logits": logits, "tokens": tokens}


def huge_vocabulary(first: dict) -> dict:
    """An edge trial: a vocabulary of 300 (answers up to 298), every answer guessed right: token ids kept in uint8
    (which wraps past 255) or int8 show. From a generator seeded by the first trial's shape."""
    return _all_guessed(np.random.default_rng([*np.shape(first["tokens"]), 300]), 8, 5, 299)


huge_vocabulary.of_first_trial = True


def many_answers(first: dict) -> dict:
    """An edge trial: 3 000 answers (600 sequences of 5 digits), all guessed right but one: a count kept in float16
    (whole numbers exact only up to 2048) rounds 2 999 to 3 000, an accuracy of 1. From a generator seeded by the
    first trial's shape."""
    trial = _all_guessed(np.random.default_rng([*np.shape(first["tokens"]), 3000]), 600, 5, 10)
    tokens, length = trial["tokens"], 5
    wrong = (int(tokens[0, length + 1]) + 1) % 10  # the first answer guessed wrong
    trial["logits"][0, length, wrong] += 20.0
    return trial


many_answers.of_first_trial = True


# --- part 4: one training step, on a stand-in model -------------------------------------------------


def _per_guess(z, y, how="ce"):
    """Each guess's loss and its gradient with respect to its logits ``z`` (guesses × vocab), targets ``y``."""
    rows = np.arange(len(y))
    onehot = np.zeros_like(z)
    onehot[rows, y] = 1.0
    if how == "nll_on_logits":
        return -z[rows, y], -onehot
    if how == "softmax_twice":  # the cross-entropy of p = softmax(z), taken as logits
        p = softmax(z)
        g = softmax(p) - onehot
        return -_log_probs(p)[rows, y], p * (g - (p * g).sum(axis=-1, keepdims=True))
    loss, grad = -_log_probs(z)[rows, y], softmax(z) - onehot
    return (-loss, -grad) if how == "no_minus" else (loss, grad)


# the losses of 10.loss's wrong variants, as (where the guesses are, how they are scored, how they are reduced)
LOSS_VARIANTS = {
    "right": ({}, "ce", "mean"),
    "targets_not_shifted": ({"shifted": False}, "ce", "mean"),
    "prompt_positions_counted": ({"everything": True}, "ce", "mean"),
    "first_answer_skipped": ({"start": 1}, "ce", "mean"),
    "softmax_before_cross_entropy": ({}, "softmax_twice", "mean"),
    "summed_not_averaged": ({}, "ce", "sum"),
    "loss_sign_flipped": ({}, "no_minus", "mean"),
    "nll_without_log_softmax": ({}, "nll_on_logits", "mean"),
}


def _table_losses(probe_table, probe_tokens, probe_lr, how="right", loss="right"):
    """The losses `train_step` returns on the stand-in (a table of next-token scores, SGD), step by step.

    ``how``: ``right`` (zero_grad, backward, step), ``accumulate`` (no zero_grad: each step uses the sum of
    every gradient so far), ``never`` (the weights never change) or ``step_first`` (no zero_grad, and the step
    before the backward pass: each step uses the gradients of the steps before it). ``loss``: the loss the
    step trains on, the right one or one of 10.loss's wrong variants (the student's answer_loss)."""
    table = np.array(probe_table, dtype=np.float64)
    tokens = np.asarray(probe_tokens).astype(int)
    where, scoring, reduce = LOSS_VARIANTS[loss]
    guess, target = _answer_slices(tokens, **where)
    rows, targets = tokens[:, guess].ravel(), tokens[:, target].ravel()
    scale = 1.0 / len(rows) if reduce == "mean" else 1.0

    def loss_and_grad(w):
        per, g = _per_guess(w[rows], targets, scoring)
        grad = np.zeros_like(w)
        np.add.at(grad, rows, g * scale)
        return per.sum() * scale, grad

    losses, stored = [], np.zeros_like(table)
    for _ in range(PROBE_STEPS):
        value, grad = loss_and_grad(table)
        losses.append(value)
        if how in ("right", "after"):
            table = table - probe_lr * grad
        elif how == "doubled":  # backward() twice on the same loss, or step() twice (SGD): twice the update
            table = table - 2 * probe_lr * grad
        elif how == "per_batch":  # (loss / batch).backward()
            table = table - probe_lr * grad / tokens.shape[0]
        elif how == "times_batch":  # (loss * batch).backward()
            table = table - probe_lr * grad * tokens.shape[0]
        elif how == "accumulate":
            stored = stored + grad
            table = table - probe_lr * stored
        elif how == "step_first":
            table = table - probe_lr * stored
            stored = stored + grad
        elif how != "never":
            raise ValueError(how)
    if how == "after":  # each step's loss computed again after its update
        losses = losses[1:] + [loss_and_grad(table)[0]]
    return {"probe_losses": np.array(losses)}


TRAIN_READS = ("probe_table", "probe_tokens", "probe_lr")


def ref_train(**names):
    return _table_losses(**{n: names[n] for n in TRAIN_READS})


def _train_variant(how="right", loss="right"):
    return lambda **names: _table_losses(**{n: names[n] for n in TRAIN_READS}, how=how, loss=loss)


TRAIN_MISTAKES = {
    "missing_zero_grad": _train_variant("accumulate"),
    "weights_never_updated": _train_variant("never"),
    "step_before_backward": _train_variant("step_first"),
    "loss_after_update": _train_variant("after"),
    "update_doubled": _train_variant("doubled"),
    "gradient_divided_by_batch": _train_variant("per_batch"),
    "gradient_times_batch": _train_variant("times_batch"),
    # a right step that trains on a wrong answer_loss (10.loss): the step is named by the loss's mistake
    **{code: _train_variant(loss=code) for code in LOSS_VARIANTS if code != "right"},
}


# --- part 5: the trained model on fresh sequences --------------------------------------------------


def ref_trained(fresh_tokens, **_):
    """The digits before the separator, reversed: what a model that has learned the rule guesses."""
    tokens = np.asarray(fresh_tokens).astype(int)
    length = tokens.shape[1] // 2
    return {"fresh_predictions": tokens[:, :length][:, ::-1]}


def copied_answer_half(fresh_tokens, **_):
    """The tokens after the separator, copied instead of guessed by the model."""
    tokens = np.asarray(fresh_tokens).astype(int)
    return {"fresh_predictions": tokens[:, tokens.shape[1] // 2 + 1:]}


def _one_late(ex, trials, record) -> str | None:
    """The model's own guesses (see the probe ``module_guesses``), taken one position too late: [:, L + 1:]."""
    guesses = ((record.get("probes") or {}).get("module_guesses") or {}).get("guesses") or []
    if not guesses or len(guesses) != len(trials):
        return None
    for (got, _inputs), g in zip(trials, guesses):
        g = np.asarray(g)
        late, mine = g[:, g.shape[1] // 2 + 1:], np.asarray(got["fresh_predictions"])
        if late.shape != mine.shape or not np.array_equal(late, mine):
            return None
    return ex.hint("guesses_one_late")


LAYER_COPIES = 1000


def layer_probe_inputs(rng=None) -> dict:
    """The example's first sequence, 1000 times: the layer's own dropout draws (keep=None), one per copy,
    must change the outputs and average to the evaluation output (as in notebook 06)."""
    return {"x": np.repeat(_attention_example(None)["x_demo"][:1], LAYER_COPIES, axis=0)}


def step_probe_inputs(rng=None) -> dict:
    """A stand-in like the notebook's, for a run of the student's train_step with an optimizer that counts its
    steps: the notebook's table, but another batch (5 sequences) and another learning rate (0.37), so that a step
    that reads the notebook's `probe_tokens` or `probe_lr` instead of what it is given shows."""
    probe = _probe(None)
    return {"table": probe["probe_table"], "tokens": make_sequences(np.random.default_rng(11), 5), "lr": 0.37}


def own_predictions(guesses: np.ndarray) -> dict:
    """What a right 10.trained cell makes of the model's guesses at every position: those about the answer."""
    length = guesses.shape[1] // 2
    return {"fresh_predictions": guesses[:, length:-1]}


# --- the notebook's world ----------------------------------------------------------------------------


def _attention_example(rng):
    if rng is None:
        rng = np.random.default_rng(9)
        x = rng.normal(size=(2, 5, 6)).round(1)
        w_query, w_key, w_value, w_out = (rng.normal(size=(4, 6, 6)) / np.sqrt(6)).round(2)
        p = 0.2
        keep = (np.random.default_rng(11).random((2, 2, 5, 5)) >= p).astype(np.float64)
        return {"x_demo": x, "w_query": w_query, "w_key": w_key, "w_value": w_value, "w_out": w_out,
                "num_heads": 2, "p_drop": p, "keep_draw": keep}
    # every size differs from the example's (batch 2, length 5, width 6), so a size typed in shows
    batch, seq = int(rng.choice([1, 3])), int(rng.choice([3, 4, 6, 7]))
    heads, d_head = (int(v) for v in [(2, 2), (2, 4), (3, 3), (4, 2)][int(rng.integers(4))])
    d = heads * d_head
    w_query, w_key, w_value, w_out = rng.normal(size=(4, d, d)) / np.sqrt(d)
    p = float(rng.choice([0.1, 0.2, 0.3]))  # never 0.5, where dividing by p and by 1 − p agree
    return {"x_demo": rng.normal(size=(batch, seq, d)), "w_query": w_query, "w_key": w_key, "w_value": w_value,
            "w_out": w_out, "num_heads": heads, "p_drop": p,
            "keep_draw": (rng.random((batch, heads, seq, seq)) >= p).astype(np.float64)}


def _model_example(rng, d_model):
    fresh = rng is not None
    if rng is None:
        rng = np.random.default_rng(12)
        vocab, max_len, batch, seq = 9, 8, 2, 7
    else:
        seq = int(rng.choice([4, 5, 6, 8]))  # never the example's 7: a length typed in shows on every replay
        max_len = seq + int(rng.integers(1, 4))
        vocab = int(rng.choice([v for v in range(5, 13) if v not in (d_model, 9)]))  # never the example's 9
        batch = int(rng.choice([1, 3]))  # never the example's 2
    # fresh: the last token of the vocabulary never appears, so that F.one_hot(tokens) without num_classes (as
    # many classes as the largest token seen, plus one) cannot be multiplied by the table on any replay
    top = vocab - 1 if fresh else vocab
    return {"tokens_demo": rng.integers(0, top, size=(batch, seq)),
            "token_emb_demo": rng.normal(size=(vocab, d_model)).round(2),
            "pos_emb_demo": rng.normal(size=(max_len, d_model)).round(2),
            "w_readout_demo": (rng.normal(size=(d_model, vocab)) / np.sqrt(d_model)).round(2)}


def long_sequence(first: dict) -> dict:
    """An edge replay from the first one: its model example with sequences of 12 tokens and a table of 13
    positions, longer than the notebook's 8 rows (positions wrapped at 8, `% 8`, or a table cut to 8 rows show),
    and a vocabulary of 16 tokens, larger than the notebook's 11 (a read-out cut to 11 columns shows)."""
    tokens = np.asarray(first["tokens_demo"])
    table = np.asarray(first["pos_emb_demo"])
    vocab, d_model = 16, table.shape[1]
    rng = np.random.default_rng([tokens.shape[0], tokens.shape[1], table.shape[0], d_model])
    return {**first, "tokens_demo": rng.integers(0, vocab - 1, size=(tokens.shape[0], 12)),
            "pos_emb_demo": rng.normal(size=(13, d_model)).round(2),
            "token_emb_demo": rng.normal(size=(vocab, d_model)).round(2),
            "w_readout_demo": (rng.normal(size=(d_model, vocab)) / np.sqrt(d_model)).round(2)}


long_sequence.of_first_trial = True


def large_logits(first: dict) -> dict:
    """An edge replay from the first one: a read-out 40 times larger, so the logits reach about ±50 (those of a
    model trained hard, or with a large learning rate): logits clamped to a "safe" range (±30) show."""
    return {**first, "w_readout_demo": np.asarray(first["w_readout_demo"]) * 40.0}


large_logits.of_first_trial = True


def _probe(rng):
    if rng is None:
        return {"probe_table": np.random.default_rng(5).normal(size=(VOCAB, VOCAB)).round(2),
                "probe_tokens": make_sequences(np.random.default_rng(6), 4), "probe_lr": 1.0}
    batch, length, digits = _sizes(rng)
    return {"probe_table": rng.normal(size=(digits + 1, digits + 1)),
            "probe_tokens": make_sequences(rng, batch, length, digits),
            # never the notebook's 1.0, nor half of it (two steps of 0.5 come close to one of 1.0)
            "probe_lr": float(rng.choice([0.3, 2.0, 3.0]))}


def large_batch(first: dict) -> dict:
    """An edge replay from the first random one: a batch of 70 sequences, more than the 64 that `train()` hands the
    step (drawn from a generator seeded by the sizes): a step that trains on part of its batch only (a slice of a
    size typed in) shows."""
    table = np.asarray(first["probe_table"])
    tokens = np.asarray(first["probe_tokens"])
    length, digits = (tokens.shape[1] - 1) // 2, table.shape[0] - 1
    return {**first, "probe_tokens": make_sequences(np.random.default_rng([70, length, digits]), 70, length, digits)}


large_batch.of_first_trial = True


def world(rng: np.random.Generator | None = None) -> dict:
    """Every array the notebook defines, in notebook order, and the answers of its value steps.

    Fresh worlds change the sizes of the attention example (batch, sequence length below the
    layer's ``max_len`` of 8, heads, head width), the dropout probability and draw, the model
    example's vocabulary, positions and tokens, and the stand-in's table, batch and learning rate.
    The task's sequences keep their sizes: the trained model is made for them. In the fresh
    sequences of ``10.trained`` the tokens after the separator are scrambled: a trained model's
    guesses follow the digits before it (the notebook measures this), while a cell that copies the
    answer tokens instead of asking the model shows.
    """
    examples = make_sequences(np.random.default_rng(0) if rng is None else rng, 3)
    names = {"examples": examples, **_attention_example(rng)}
    names |= ref_layer(**names)
    names |= _model_example(rng, names["w_query"].shape[0])
    names |= ref_model(**{n: names[n] for n in MODEL_READS})
    names["logits_try"] = logits_example()["logits"] if rng is None else rng.normal(size=(3, SEQ_LEN, VOCAB))
    names |= _probe(rng)
    names |= ref_train(**names)
    if rng is None:
        names["fresh_tokens"] = make_sequences(np.random.default_rng(2024), FRESH)
    else:  # the tokens after the separator scrambled: the trained model's guesses come from the digits before it
        fresh = make_sequences(rng, FRESH)
        fresh[:, LENGTH + 1:] = rng.integers(0, DIGITS, size=(FRESH, LENGTH))
        names["fresh_tokens"] = fresh
    names |= ref_trained(names["fresh_tokens"])
    return names


# --- the exercises -------------------------------------------------------------------------------------


# what the layer and the model are given, in the words of their own code (for a value typed in instead)
ATTENTION_GIVEN = {
    "p_drop": "`self.dropout`, the probability the layer was made with",
    "num_heads": "`self.num_heads`, the number of heads the layer was made with",
    "keep_draw": "`keep`, the draw forward is given",
    "x_demo": "`x`, the input forward is given",
    **{w: f"`self.{w}`, the layer's own weight" for w in ("w_query", "w_key", "w_value", "w_out")},
}
MODEL_GIVEN = {
    "tokens_demo": "`tokens`, the input forward is given",
    "token_emb_demo": "`self.token_emb`, the model's own table",
    "pos_emb_demo": "`self.pos_emb`, the model's own table",
    "w_readout_demo": "`self.w_readout`, the model's own weight", "num_heads": "its layer `self.attn`",
    **{w: "its layer `self.attn`" for w in ("w_query", "w_key", "w_value", "w_out")},
}

TRAIN_HINTS = {
    "optimizer_not_used": "Your train_step updates the weights without the optimizer it is given (its step() is "
    "never called): an update written by hand, or an optimizer made inside the step, trains with plain gradient "
    "descent or a learning rate of its own, whatever the caller chose (train() passes AdamW with lr 0.003). Use "
    "the `optimizer` argument: optimizer.zero_grad(), then the loss and loss.backward(), then optimizer.step().",
    "trained_in_eval_mode": "Your train_step switches the model to evaluation mode (`model.eval()`), so its "
    "training steps run with dropout off (every one after the first, where the switch ends the step): the model "
    "trains without the regularisation it was given. Leave the "
    "mode to the caller (train() calls model.train() once, before the steps); evaluation mode is for part 5.",
    "reseeded_each_call": "Your train_step seeds the random generator (torch.manual_seed) at every step, so every "
    "step of training draws the same dropout, and the notebook's own generator is reset each time. Seed once, "
    "before training (the notebook does at its top); a step only trains.",
    "missing_zero_grad": "Your steps add up the gradients: `backward()` adds each new gradient to the one already "
    "in `.grad`, so from the second step on the update uses the sum of all of them. Clear the gradients "
    "(optimizer.zero_grad()) in every step, before `loss.backward()`.",
    "weights_never_updated": "The loss never moves: your steps leave the weights as they were. In each step the "
    "gradients must be computed (`loss.backward()`) and then used (`optimizer.step()`), in that order, with no "
    "`zero_grad()` between the two.",
    "step_before_backward": "Your optimizer steps before the gradients of this batch are computed, so every update "
    "uses the gradients of earlier steps (the first one does nothing). Order: zero_grad, loss, backward, step.",
    # the loss may come from the student's answer_loss or be computed in train_step itself: name both
    **{code: f"Your steps train on a wrong loss, with this mistake — "
             f"{MISTAKES[code].hint[0].lower()}{MISTAKES[code].hint[1:]} A step trains on answer_loss: if yours "
             "computes the loss itself, call answer_loss instead; if it calls answer_loss, fix that (10.loss), run "
             "its cell, then run this cell again." for code in LOSS_VARIANTS if code != "right"},
}


def _exercises() -> list[Exercise]:
    common = {"notebook": NOTEBOOK}
    return [
        Exercise(
            "10.attention",
            title="The causal multi-head attention layer, in evaluation and in training mode",
            answers=("out_eval", "out_train"),
            inputs=upstream_of(world, "out_eval"),
            # inputs 8 times larger: an unshifted softmax overflows, clamped outputs show; a vector of zeros: hidden
            # as padding shows
            # and a first query at −10⁶ whose every other key is hidden: a fill of −1e4 shows
            # and a query whose weight on a key is 2.75e-5: weights set to 0 below a threshold show
            edge=(loud_layer, zero_vector, layer_fill_far, faint_key),
            signs={"mask_fill_too_small": _layer_fill_leaks, "small_values_zeroed": _weights_zeroed},
            reference=ref_layer,
            reads=ATTENTION_READS,
            mistakes=ATTENTION_MISTAKES,
            hints=ATTENTION_HINTS,
            framework="torch",
            module="mhsa",
            trainable=4,
            dtype="float32",
            torch_seeded=True,  # its own dropout draws are the ones `torch.manual_seed(3)` repeats in the notebook
            # its own draw when given none; and its causal mask read from the buffer, which part 6 switches off
            # (a mask made again in forward, or the fused function's is_causal, would keep the model honest there)
            probes=(Probe("module_dropout", layer_probe_inputs, lambda inputs: 0, "missing_dropout",
                          buffer="causal_mask"),
                    # the cell detaches what it prints: the layer itself must keep its gradient, for training
                    Probe("module_grad", lambda rng: {"x": _attention_example(None)["x_demo"]}, lambda inputs: 0,
                          "gradient_cut")),
            given_as=ATTENTION_GIVEN,
            # outputs of a few tens on the loud trial: a right float32 layer (heads flattened for bmm, in another
            # order) is off by up to about 6e-5 in an entry near 0 there
            atol=1e-4,
            **common,
        ),
        Exercise(
            "10.model",
            title="The tiny model's forward pass",
            answers=("logits_demo",),
            inputs=upstream_of(world, "logits_demo"),
            reference=ref_model,
            reads=MODEL_READS,
            mistakes=MODEL_MISTAKES,
            # the layer called as a module, self.attn(h): its forward hooks run (the notebook reads the layer's
            # input through one, to draw its weights); self.attn.forward(h) skips them
            how={"forward_called": False},
            hints=MODEL_HINTS,
            framework="torch",
            module="demo_model",
            trainable=7,
            dtype="float32",  # the model's tensors are float32: float64 logits are a mistake, as in 06
            # the cell runs it without gradients: the model itself must keep them, for training
            probes=(Probe("module_grad", lambda rng: {"tokens": _model_example(None, 6)["tokens_demo"]},
                          lambda inputs: 0, "gradient_cut"),
                    # in training mode, with a dropout, the layer inside draws (not a keep of ones handed to it)
                    # and there, its logits are the read-out of the layer's input plus what the layer gave, nothing
                    # more (no dropout of the model's own on them, no scale in training mode only)
                    Probe("module_drops", lambda rng: {"make": DROPPING_MODEL,
                                                       "on": _model_example(None, 6)["tokens_demo"],
                                                       "parts": {"readout": "w_readout"}},
                          lambda inputs: 0, "dropout_never_drawn")),
            # the example's pos_emb has 8 rows and its tokens go up to 8: a table of positions indexed by tokens
            raised_hints=((r"out of bounds for dimension 0 with size 8\b",
                           "(8 is the number of rows of pos_emb, max_len: if you indexed it with the tokens, index "
                           "it with the positions 0 … seq − 1 instead; position i takes row i.)"),),
            given_as=MODEL_GIVEN,
            # longer than the notebook's table: positions wrapped or cut at 8 show; logits of ±50: a clamp shows
            edge=(long_sequence, large_logits),
            # a right float32 forward (a gather, a tensordot, in another order) is off by up to about 3e-5 in a
            # logit near 0 among logits of ±50: absolute differences up to 1e-4 are rounding
            atol=1e-4,
            points=2,
            **common,
        ),
        Exercise(
            "10.loss",
            title="The loss of the answer guesses",
            answers=("answer_loss",),
            kind="function",
            inputs=loss_inputs,
            # and logits in the hundreds: a log-sum-exp without its maximum, or the log of a softmax, overflows
            edge=(answers_off_rule, one_digit, unused_tokens, confidently_wrong, loud_logits, separator_answer,
                  large_vocabulary, louder_logits, past_half_range),  # and logits past float16's range
            reference=ref_loss,
            native=native_loss,
            signs={"loss_capped": _capped},
            mistakes=LOSS_MISTAKES,
            hints={"hard_coded": TYPED_LENGTH_HINT},
            framework="torch",
            keeps_grad=True,  # "as a tensor (training will call .backward() on it)"
            dtype="float32",
            atol=1e-5,
            **common,
        ),
        Exercise(
            "10.train_step",
            title="One training step",
            answers=("probe_losses",),
            inputs=upstream_of(world, "probe_losses"),
            reference=ref_train,
            reads=TRAIN_READS,
            mistakes=TRAIN_MISTAKES,
            hints=TRAIN_HINTS,
            numbers=True,  # "it returns that loss as a Python number"
            functions=("train_step",),
            # run once more with an optimizer that counts its steps: the numbers of SGD, whatever way they are
            # reached (an update by hand, an optimizer of its own), do not show that the optimizer given is used
            probes=(Probe("train_step", step_probe_inputs, lambda inputs: 0, "optimizer_not_used"),),
            edge=large_batch,  # 70 sequences: a step on part of its batch shows
            raised_hints=((r"does not require grad and does not have a grad_fn",
                           "loss.backward() needs a loss that kept track of its gradients, and this one did not: "
                           "something cut them before it — torch.no_grad() or .detach() in the step, or the model's "
                           "parameters switched off (`requires_grad_(False)`, left so by an earlier call of the "
                           "step). Keep the step to zero_grad(), the loss, backward() and step() (if the model or "
                           "answer_loss cut the gradients, 10.model or 10.loss says so)."),
                          (r"contains None inside the list",
                           "(A None there is what a call of train_step that returns nothing gives: it must return "
                           "the loss, as a Python number, not print it.)"),),
            # float32 steps agree with the float64 reference to about 1e-7; a loss rounded to 4 decimals (as the cell
            # prints it) is up to 5e-5 off, and is named (rounded_answer)
            rtol=2e-6, atol=1e-6,
            **common,
        ),
        Exercise(
            "10.accuracy",
            title="The accuracy of the answer guesses",
            answers=("answer_accuracy",),
            kind="function",
            inputs=accuracy_inputs,
            edge=(answers_off_rule, one_digit, separator_loudest, tied_logits, large_vocabulary, near_ties,
                  huge_vocabulary, many_answers),
            reference=ref_accuracy,
            mistakes=ACCURACY_MISTAKES,
            signs=ACCURACY_SIGNS,
            hints=ACCURACY_HINTS,
            framework="torch",
            **common,
        ),
        Exercise(
            "10.trained",
            title="The trained model reverses fresh sequences",
            answers=("fresh_predictions",),
            inputs=upstream_of(world, "fresh_predictions"),
            reference=ref_trained,
            reads=("fresh_tokens",),
            computed_with=("model",),  # the rule typed in by hand (reversing the digits) gives the same numbers
            how={"no_grad": True,  # the TO-DO: "in evaluation mode … and without keeping track of gradients"
                 "sampled": False},  # its guesses: the argmax, not a draw from the probabilities
            module="model",  # its mode is recorded: guesses made in training mode are named
            in_eval=True,
            framework="torch",
            # the model's own guesses on the same sequences: a cell that gives exactly those, wrong only because the
            # model has not learned (not trained, or trained by an earlier version of the code), is right
            probes=(Probe("module_guesses", lambda rng: {"on": "fresh_tokens", "trained": ["losses", "train_step"]},
                          lambda inputs: 0, "copied_answer", own=own_predictions),),
            depends_on=("10.attention", "10.model", "10.loss", "10.train_step"),
            mistakes={"copied_answer": copied_answer_half},
            explains={"guesses_one_late": _one_late},
            hints={"copied_answer": "Your `fresh_predictions` are the tokens after the separator, copied from "
                   "`fresh_tokens`, not the model's guesses. Run the trained model on `fresh_tokens` and take its "
                   "guesses (the tokens with the largest logits) at the positions that guess the answer.",
                   "dropout_in_eval": "Your model is still in training mode (`model.training` is True), so its "
                   "dropout drops attention weights at random and some guesses change. Call `model.eval()` before "
                   "it guesses."},
            points=2,
            **common,
        ),
    ]


register(*_exercises())
