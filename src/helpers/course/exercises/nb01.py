"""Notebook 01 — illustrated self-attention (seed 000), in PyTorch and in TensorFlow.

Both halves compute the same numbers from the same inputs and use the same names, so one
world of names serves both; each half's exercises require its own framework. The PyTorch half
has one TO-DO cell per step; the TensorFlow half is a translation in two TO-DO cells (the
tensors and projections; then scores, weights and outputs), each checked step by step.

Every value step is a function of the names it reads: on the notebook's numbers, on the
student's own earlier answers (carried-forward credit), and on fresh random worlds on which
the student's cell is replayed. The notebook's score matrix happens to be symmetric; the
fresh worlds are not, so a transposed product or a softmax over the wrong axis shows.
"""

from __future__ import annotations

import numpy as np

from ..mistakes import CLAMPED_SCORES_HINT
from ..reference import (
    global_shift_float32,
    global_softmax,
    max_of_columns,
    max_without_keepdim,
    max_without_keepdim_float32,
    softmax,
    sum_normalise,
    sum_unshifted,
)
from ..roles import ROLES, mix_ups
from ..spec import (
    Exercise,
    global_rounding_sign,
    global_shift_sign,
    logsumexp_sign,
    overflow_sign,
    register,
    upstream_of,
)

NOTEBOOK = "01_illustrated_self_attention"
SEED = "000_6403dcf444e40cb5.txt"  # every number it prints must appear in the stored outputs

X = np.array([[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]], dtype=np.float64)
W_KEY = np.array([[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float64)
W_QUERY = np.array([[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]], dtype=np.float64)
W_VALUE = np.array([[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]], dtype=np.float64)
# The seed rounds the softmax "for readability" and then uses the rounded weights.
ROUNDED_WEIGHTS = np.array([[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.0, 0.9, 0.1]])


def _rounded_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rows of weights with one decimal that sum to 1, like the seed's rounded weights."""
    tenths = rng.multinomial(10, np.ones(n) / n, size=n)
    return tenths / 10.0


def fresh_numbers(rng: np.random.Generator, shape: tuple[int, ...], top: float = 1.0) -> np.ndarray:
    """Multiples of 0.5 from -1 to ``top``, of both signs and not all whole: the notebook's numbers are small
    non-negative integers, on which a `.relu()`, an `.abs()`, a `.round()` or a cast to integers changes nothing;
    on these it does."""
    return rng.integers(-2, int(2 * top) + 1, size=shape) / 2.0


def world(rng: np.random.Generator | None = None) -> dict:
    """Every name of the notebook, in order: the given lists, then each step's result.

    ``rng=None`` gives the notebook's own numbers; otherwise small random halves of both signs (see
    :func:`fresh_numbers`), so the scores stay moderate and the softmax does not turn one-hot, for 2, 4 or 5
    tokens, queries and keys 2, 4 or 5 wide and values 4 or 5 wide.
    """
    if rng is None:
        x, wq, wk, wv, rounded = X, W_QUERY, W_KEY, W_VALUE, ROUNDED_WEIGHTS
    else:  # other numbers of tokens, queries and keys of another width and a wider value: a loop over range(3),
        # keys[:, :3] or values[:, :3] shows
        n, d_k, d_v = int(rng.choice([2, 4, 5])), int(rng.choice([2, 4, 5])), int(rng.choice([4, 5]))
        x = fresh_numbers(rng, (n, 4))
        wq, wk = (fresh_numbers(rng, (4, d_k)) for _ in range(2))
        wv = fresh_numbers(rng, (4, d_v), top=2.0)
        rounded = _rounded_rows(rng, n)
    return _world_of(x, wq, wk, wv, rounded)


def _world_of(x, wq, wk, wv, rounded) -> dict:
    """The notebook's names computed from its inputs, weights and rounded weights."""
    queries, keys, values = x @ wq, x @ wk, x @ wv
    scores = queries @ keys.T
    weights = softmax(scores)
    return {
        # the notebook's lists hold integers; fresh ones hold halves as floats (whole ones as integers)
        "x_list": _as_list(x), "w_query_list": _as_list(wq), "w_key_list": _as_list(wk), "w_value_list": _as_list(wv),
        # the original's rounded weights are given before any step: every step's replay is handed them (the
        # TensorFlow half's one cell multiplies them with its values too)
        "rounded_weights": rounded,
        "x": x, "w_query": wq, "w_key": wk, "w_value": wv,
        "queries": queries, "keys": keys, "values": values,
        "attn_scores": scores,
        "attn_weights": weights,
        "outputs": weights @ values,
        "outputs_rounded": rounded @ values,
    }


def _edge_rng(inputs: dict) -> np.random.Generator:
    """The generator of an edge replay, seeded by the replay's own inputs (their halves, as whole numbers): the same
    inputs give the same edge, and the check's seed reaches it through them."""
    return np.random.default_rng([int(2 * v) + 2 for row in inputs["x_list"] for v in row])


def _half_steps_up_to(limit: float) -> float:
    """The largest multiple of 0.5 (at least 1) whose value stays below ``limit``."""
    return max(1.0, np.floor(2.0 * limit) / 2.0)


def _scaled_up(x, wq, wk, wv):
    """The inputs and weights scaled by multiples of 0.5 (every product stays exact in float32): the largest score
    between about 18 and 40 (the queries' weights change sign if that puts larger scores side by side in a row),
    the largest value near 40. Scores within ±40 keep every exp(s − max) of a row a normal float32 number."""
    scores = (x @ wq) @ (x @ wk).T

    def second(s: np.ndarray) -> float:  # the largest second-largest score of a row
        return float(np.sort(s, axis=-1)[:, -2].max())

    if second(-scores) > second(scores):
        wq, scores = -wq, -scores
    x = x * _half_steps_up_to(np.sqrt(40.0 / (float(np.abs(scores).max()) or 1.0)) - 1e-9)
    if (x @ wv).max() < -(x @ wv).min():  # the largest value positive: a clamp from above shows too
        wv = -wv
    wv = wv * _half_steps_up_to(40.0 / (float(np.abs(x @ wv).max()) or 1.0))
    return x, wq, wk, wv


def _clamp_shows(scores: np.ndarray) -> bool:
    """A clamp of the scores at 16 from above (or to ±16) moves some weight by more than 1e-3."""
    right = softmax(scores)
    return all(np.abs(softmax(np.clip(scores, low, 16.0)) - right).max() > 1e-3 for low in (None, -16.0))


def large_numbers_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Numbers for an edge replay far above the notebook's: 3 to 5 tokens of fresh numbers scaled up (see
    :func:`_scaled_up`), drawn (from a generator seeded by the replay's own inputs, so the same inputs give the same
    edge) until a clamp of the scores at the notebook's largest, 16, changes the weights. A clamp of the values at 8
    or a clip to the notebook's range shows too; an exp() of the raw scores still fits in float32."""
    rng = _edge_rng(inputs)
    for _ in range(200):
        n, d_v = int(rng.choice([3, 4, 5])), int(rng.choice([4, 5]))
        x, wq, wk, wv = _scaled_up(fresh_numbers(rng, (n, 4)), *(fresh_numbers(rng, (4, 3)) for _ in range(2)),
                                   fresh_numbers(rng, (4, d_v), top=2.0))
        if _clamp_shows((x @ wq) @ (x @ wk).T):
            break
    return x, wq, wk, wv, _rounded_rows(rng, n)


def large_numbers(inputs: dict) -> dict:
    """An edge replay with numbers far above the notebook's (see :func:`large_numbers_arrays`)."""
    full = _world_of(*large_numbers_arrays(inputs))
    return {name: full[name] for name in inputs}


def large_positive_outputs(inputs: dict) -> dict:
    """Numbers like :func:`large_numbers`', with the values scaled by a power of 2 and their signs flipped until two
    outputs lie above 16 and two below 8: a clamp of the outputs from above only (`.clamp(max=8)`) shows as a
    clamp, whatever the signs of the large outputs drawn."""
    x, wq, wk, wv, rounded = large_numbers_arrays(inputs)
    weights = softmax((x @ wq) @ (x @ wk).T)
    for scaled in (wv * 2.0**k * sign for k in (0, 1, -1, 2, -2, 3, -3, 4) for sign in (1.0, -1.0)):  # (exact)
        out = weights @ (x @ scaled)
        if int((out > 16).sum()) >= 2 and int(((out < 7) & (out > out.min() + 1)).sum()) >= 2:
            # (numbers well between the smallest and the clamp show that it is one)
            wv = scaled
            break
    full = _world_of(x, wq, wk, wv, rounded)
    return {name: full[name] for name in inputs}


NEAR_LIMIT = 86.0  # exp(86) still fits in float32 (up to about 88.7): only a clamp shows here (PAST_LIMIT: overflow)


def near_limit_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Tokens whose largest score is between 80.5 and 86, with a second score of its row 74 or more and at least 2
    below it: the query weights of fresh numbers times a whole number, so every score stays exact in float32. A
    clamp of the scores "against overflow" anywhere from 50 to 80 changes that row's weights (at 80 it moves weight
    from the first to the second, below it ties them), while exp() of every score still fits in float32 (what
    shows here is the clamp; :func:`past_limit_arrays` has scores that overflow). Drawn from a generator seeded by
    the replay's own inputs; returns x, w_query, w_key, w_value and rounded weights."""
    def factor_of(s: np.ndarray) -> float | None:
        if s.max() <= 0:
            return None
        factor = float(np.floor(NEAR_LIMIT / s.max()))
        top = int(np.argmax(s.max(axis=1)))
        first, second = np.sort(s[top] * factor)[::-1][:2]
        # every row's largest score 0 or more: a shift by the largest of all (not each row's) stays exact in float32
        ok = first >= 80.5 and second >= 74.0 and first - second >= 2.0 and s.max(axis=1).min() >= 0
        return factor if ok else None

    return _drawn_scaled(inputs, int(NEAR_LIMIT), factor_of, flip=True)


def near_limit_scores(inputs: dict) -> dict:
    """An edge replay whose largest score is about 85 (see :func:`near_limit_arrays`)."""
    full = _world_of(*near_limit_arrays(inputs))
    return {name: full[name] for name in inputs}


PAST_LIMIT = 200.0  # far past float32's exp() limit (about 88.7), well within float64's (about 709)


def past_limit(s: np.ndarray) -> bool:
    """Scores (n, n) whose largest lies between 150 and 200, in a row whose mean is at least 95 below it, with
    another row whose scores all lie at least 110 below it and within 80 of each other (see
    :func:`past_limit_arrays`)."""
    top = int(np.argmax(s.max(axis=1)))
    first = s[top].max()
    low = (s.max(axis=1) <= first - 110.0) & (np.ptp(s, axis=1) < 80.0)
    return bool(150.0 <= first <= PAST_LIMIT + 1e-6 and first - s[top].mean() >= 95.0 and low.any())


def past_limit_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Tokens whose largest score lies between 150 and 200, where exp() overflows float32 (to inf, and inf / inf is
    NaN): a softmax written as its formula fails there, as the notebooks say. The row holding that score has a mean
    at least 95 below its maximum (a shift by the row's mean or its minimum overflows too), and another row's
    scores all lie at least 110 below that maximum and within 80 of each other (a shift by the largest score of
    all, not each row's, underflows that whole row to 0 / 0, while a row-wise shift keeps it right). The query
    weights of fresh numbers times a whole number, so every score stays exact in float32; drawn from a generator
    seeded by the replay's own inputs. Returns x, w_query, w_key, w_value and rounded weights."""
    def factor_of(s: np.ndarray) -> float | None:
        factor = float(np.floor(PAST_LIMIT / s.max())) if s.max() > 0 else 0.0
        return factor if factor and past_limit(s * factor) else None

    return _drawn_scaled(inputs, int(PAST_LIMIT), factor_of, flip=True)


def past_limit_scores(inputs: dict) -> dict:
    """An edge replay whose largest score is between 150 and 200 (see :func:`past_limit_arrays`): a softmax that
    does not subtract each row's own maximum overflows or underflows on it."""
    full = _world_of(*past_limit_arrays(inputs))
    return {name: full[name] for name in inputs}


FAR_PAST = 800.0  # past float64's exp() limit too (about 709.8): a softmax written out in float64 overflows


def far_factor(s: np.ndarray) -> float | None:
    """The whole number that takes the largest score of ``s`` (made positive) to between 700 and 800, or None."""
    top = float(s.max())
    if top <= 0:
        return None
    factor = float(np.floor(FAR_PAST / top))
    return factor if factor >= 1 and top * factor >= 700.0 else None


def below_factor(s: np.ndarray, whole: bool = True) -> float | None:
    """The number (a whole one, with ``whole``) that takes some row of ``s`` to scores all at or below -110 (exp()
    of each is 0 in float32) while the largest score of all stays at 60 or below, or None: a row far below 0 in a
    matrix whose scores are otherwise moderate."""
    lowest = float(s.max(axis=1).min())
    if lowest >= 0:
        return None
    factor = float(np.ceil(110.0 / -lowest)) if whole else 110.0 / -lowest
    return factor if float(s.max()) * factor <= 60.0 else None


def _drawn_scaled(inputs: dict, tag: int, factor_of, flip: bool) -> tuple[np.ndarray, ...]:
    """Fresh tokens whose query weights, times the whole number ``factor_of(scores)`` gives (None: draw again),
    make the scores an edge asks for (every score exact in float32); ``flip``: the query weights negated first
    where the most negative score is larger in size than the largest. Drawn from a generator seeded by the replay's
    own inputs and ``tag``; returns x, w_query, w_key, w_value and rounded weights."""
    rng = np.random.default_rng([int(2 * v) + 2 for row in inputs["x_list"] for v in row] + [tag])
    for _ in range(4000):
        n, d_v = int(rng.choice([3, 4, 5])), int(rng.choice([4, 5]))
        x, wq, wk = fresh_numbers(rng, (n, 4)), fresh_numbers(rng, (4, 3)), fresh_numbers(rng, (4, 3))
        s = (x @ wq) @ (x @ wk).T
        if flip and s.max() < -s.min():
            wq, s = -wq, -s
        if (factor := factor_of(s)) is not None:
            return x, wq * factor, wk, fresh_numbers(rng, (4, d_v), top=2.0), _rounded_rows(rng, n)
    raise RuntimeError("no tokens with such scores")  # never: a draw in a few dozen qualifies


def last_key_factor(s: np.ndarray) -> float | None:
    """The whole number that brings the largest score to between 150 and 200, where that score's row has no other
    score within 95 of it (None: no such number): see :func:`last_key_loud_arrays`."""
    factor = float(np.floor(PAST_LIMIT / s.max())) if s.max() > 0 else 0.0
    if not factor or s.shape[-1] < 2:
        return None
    top = np.sort(s[int(np.argmax(s.max(axis=1)))] * factor)
    return factor if top[-1] >= 150.0 and top[-1] - top[-2] >= 95.0 else None


def last_key_loud_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Tokens whose largest score (150 to 200, at least 95 above the rest of its row) lies in the last column: the
    token whose key makes it moved to the end. A row maximum that leaves the last key out (a loop or a slice that
    stops one key early) leaves an exponent above 88 there: inf, then NaN. As :func:`past_limit_arrays` (drawn,
    exact in float32), with the tokens reordered; returns x, w_query, w_key, w_value and rounded weights."""
    x, wq, wk, wv, rounded = _drawn_scaled(inputs, int(PAST_LIMIT) + 1, last_key_factor, flip=True)
    return x[loudest_key_last(x, wq, wk)], wq, wk, wv, rounded


def loudest_key_last(x: np.ndarray, wq: np.ndarray, wk: np.ndarray) -> list[int]:
    """The order of the tokens ``x`` that moves the token whose key makes the largest score to the end."""
    s = (x @ wq) @ (x @ wk).T
    col = int(np.argmax(s[int(np.argmax(s.max(axis=1)))]))
    return [i for i in range(len(x)) if i != col] + [col]


def far_past_scores(inputs: dict) -> dict:
    """An edge replay whose largest score lies between 700 and 800, past exp()'s limit in float64 too: a softmax
    written out in float64 (and cast back) overflows, where the right one stays exact."""
    full = _world_of(*_drawn_scaled(inputs, int(FAR_PAST), far_factor, flip=True))
    return {name: full[name] for name in inputs}


def faint_factor(s: np.ndarray) -> float | None:
    """The smallest whole number (up to 40, the largest score staying at 60 or below) that gives some row of ``s``
    a weight between 1.5e-7 and 9e-7, or None."""
    for factor in range(1, 41):
        t = s * factor
        if t.max() > 60.0:
            return None
        w = softmax(t)
        if ((w >= 1.5e-7) & (w <= 9e-7)).any():
            return float(factor)
    return None


def faint_weight_scores(inputs: dict) -> dict:
    """An edge replay whose weights include one between 1.5e-7 and 9e-7 (scores exact in float32, none above 60):
    weights set to 0 below a threshold of 1e-6 or more (`w[w < 1e-6] = 0`) show, inside the tolerance as that is,
    where a random draw may hold no weight that small."""
    full = _world_of(*_drawn_scaled(inputs, 7, faint_factor, flip=True))
    return {name: full[name] for name in inputs}


APART = 2.0**19  # how far above and below 0 :func:`apart_rows` puts two rows of scores


def apart_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Tokens with one row of scores near +2¹⁹ and another near −2¹⁹, each spread over a few units in
    sixteenths (a feature of 1 in every token, read by the keys, and the queries' weight on another feature 2¹⁹):
    every score is exact in float32, but the lower row minus the largest score of all lies past 2²⁰, where float32
    keeps only eighths. One maximum of the whole matrix subtracted before a library softmax (which subtracts each
    row's own again) rounds that row's differences, and its weights move by a few percent. Drawn from a generator
    seeded by the replay's own inputs; returns x, w_query, w_key, w_value and rounded weights."""
    rng = _edge_rng(inputs)
    for _ in range(400):
        n = int(rng.choice([3, 4, 5]))
        x = fresh_numbers(rng, (n, 4))
        x[:, 0], x[0, 1], x[1, 1] = 1.0, 1.0, -1.0
        wq, wk = fresh_numbers(rng, (4, 3)), fresh_numbers(rng, (4, 3))
        wq[:, 0], wq[1, 0] = 0.0, APART
        wk[0], wk[1:, 0] = 0.0, 0.0
        wk[0, 0] = 1.0
        s = (x @ wq) @ (x @ wk).T
        # (and the upper row minus the smallest score of all as well: one minimum subtracted rounds that row)
        shifted, raised = s[1] - s.max(), s[0] - s.min()
        if (shifted.astype(np.float32) != shifted).any() and (raised.astype(np.float32) != raised).any() \
                and 1.0 <= np.ptp(s[1]) <= 30.0:
            break
    return x, wq, wk, fresh_numbers(rng, (4, int(rng.choice([4, 5]))), top=2.0), _rounded_rows(rng, n)


def apart_rows(inputs: dict) -> dict:
    """An edge replay with two rows of scores 2²⁰ apart (see :func:`apart_arrays`)."""
    full = _world_of(*apart_arrays(inputs))
    return {name: full[name] for name in inputs}


PAST_HALF = 70_000.0  # past float16's largest number (65 504), and far from a multiple of bfloat16's 256 there


def past_half_factor(s: np.ndarray) -> float | None:
    """The whole number that takes the largest score of ``s`` (made positive) to between 65 600 and 70 000, or
    None."""
    top = float(s.max())
    if top <= 0:
        return None
    factor = float(np.floor(PAST_HALF / top))
    return factor if factor >= 1 and top * factor >= 65_600.0 else None


def past_half_scores(inputs: dict) -> dict:
    """An edge replay whose largest score lies between 65 600 and 70 000: a row maximum kept in float16 (inf there)
    or in bfloat16 (rounded by up to 128) leaves exp() an exponent that overflows or underflows the whole row,
    where a shift by the maximum itself stays exact (the scores are whole multiples of halves, exact in float32)."""
    full = _world_of(*_drawn_scaled(inputs, int(PAST_HALF), past_half_factor, flip=True))
    return {name: full[name] for name in inputs}


def far_below_scores(inputs: dict) -> dict:
    """An edge replay with a row whose scores all lie at or below -110 while no score is above 60: exp() of each
    of that row's scores is 0 in float32, so a softmax that subtracts a row's maximum only when it is large (or
    only when it is above 0) makes that row 0 / 0; the right one gives it weights as any other."""
    full = _world_of(*_drawn_scaled(inputs, 110, below_factor, flip=False))
    return {name: full[name] for name in inputs}


def scores_of(attn_scores, **_):
    return np.asarray(attn_scores, dtype=np.float64)


def wide_inputs(inputs: dict) -> dict:
    """An edge replay for the inputs' step: two tokens of 6 features (the notebook has 3 of 4), with weights of 6
    rows to match (the TensorFlow half's cell goes on to use them): a reshape to 4 columns or a cut to 4 features
    shows. Drawn from a generator seeded by the replay's own inputs."""
    rng = _edge_rng(inputs)
    x = fresh_numbers(rng, (2, 6))
    wq, wk = (fresh_numbers(rng, (6, 3)) for _ in range(2))
    full = _world_of(x, wq, wk, fresh_numbers(rng, (6, 4), top=2.0), _rounded_rows(rng, 2))
    return {name: full[name] for name in inputs}


def long_loud_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Fresh numbers for a sentence of 40 tokens whose inputs are 256 times the usual halves (exact in float32, as
    every product of them is): tokens cut at a count typed in (`x[:8]`, `x[-16:]`) and clamps of the inputs, values
    or outputs at any "safe" bound up to several hundred, and of the scores up to float16's 65504, show. Drawn from a
    generator seeded by the replay's own inputs. (No softmax step gets it: its scores are in the millions.)"""
    rng = _edge_rng(inputs)
    x = 256.0 * fresh_numbers(rng, (40, 4))
    wq, wk, wv = (fresh_numbers(rng, shape) for shape in ((4, 3), (4, 3), (4, int(rng.choice([4, 5])))))
    return x, wq, wk, wv, _rounded_rows(rng, 40)


def long_loud(inputs: dict) -> dict:
    """An edge replay of a long, loud sentence (see :func:`long_loud_arrays`)."""
    full = _world_of(*long_loud_arrays(inputs))
    return {name: full[name] for name in inputs}


def one_token_arrays(inputs: dict, d_v: int | None = None) -> tuple[np.ndarray, ...]:
    """Fresh numbers for a single token (its one score, one weight of 1): a result squeezed (`.squeeze()` drops
    every axis of length 1, whatever the sizes) loses its token axis. Drawn from a generator seeded by the replay's
    own inputs. ``d_v``: the values' width (4 or 5 when not given)."""
    rng = _edge_rng(inputs)
    d_v = int(rng.choice([4, 5])) if d_v is None else d_v
    x, wq, wk, wv = (fresh_numbers(rng, shape) for shape in ((1, 4), (4, 3), (4, 3), (4, d_v)))
    return x, wq, wk, wv, _rounded_rows(rng, 1)


def one_token(inputs: dict) -> dict:
    """An edge replay of one token (see :func:`one_token_arrays`)."""
    full = _world_of(*one_token_arrays(inputs))
    return {name: full[name] for name in inputs}


def twenty_tokens(inputs: dict) -> dict:
    """An edge replay of 20 tokens of small halves (the other replays have at most 5; the long, loud one is kept
    from the outputs step, whose tolerance its products in the hundreds exceed): code that keeps only each query's
    few largest weights (a top-16, "sparse attention") shows. Drawn from a generator seeded by the replay's own
    inputs. Drawn again while some weight lies within 1e-4 of a rounding tie at one decimal (a row of 20 equal
    scores gives 0.05 each, which float64 rounds down and float32, a hair above, rounds up: weights rounded by the
    student's own code would then be told apart from the same mistake by the float32 bit alone)."""
    rng = _edge_rng(inputs)
    for _ in range(200):
        x = fresh_numbers(rng, (20, 4))
        wq, wk = (fresh_numbers(rng, (4, 3)) / 2 for _ in range(2))
        tenths = 10.0 * softmax((x @ wq) @ (x @ wk).T)
        if not (np.abs(tenths - np.floor(tenths) - 0.5) < 1e-3).any():
            break
    full = _world_of(x, wq, wk, fresh_numbers(rng, (4, 4), top=2.0), _rounded_rows(rng, 20))
    return {name: full[name] for name in inputs}


def one_column_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Fresh numbers for 3 tokens whose weight matrices are one column wide, (4, 1): queries, keys and values of one
    number each. A matrix or a result squeezed (`.squeeze()` drops every axis of length 1) loses its column axis.
    Drawn from a generator seeded by the replay's own inputs."""
    rng = _edge_rng(inputs)
    x, wq, wk, wv = (fresh_numbers(rng, shape) for shape in ((3, 4), (4, 1), (4, 1), (4, 1)))
    return x, wq, wk, wv, _rounded_rows(rng, 3)


def one_column(inputs: dict) -> dict:
    """An edge replay of weights one column wide (see :func:`one_column_arrays`)."""
    full = _world_of(*one_column_arrays(inputs))
    return {name: full[name] for name in inputs}


def repeated_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Fresh numbers for 3 to 5 tokens whose first two tokens are the same (a word said twice), with weights whose
    first two columns are the same too: a step that merges or drops equal rows or columns (`unique`,
    `unique_consecutive`) shows. Drawn from a generator seeded by the replay's own inputs."""
    rng = _edge_rng(inputs)
    n, d_v = int(rng.choice([3, 4, 5])), int(rng.choice([4, 5]))
    x, wq, wk, wv = (fresh_numbers(rng, shape) for shape in ((n, 4), (4, 3), (4, 3), (4, d_v)))
    x[1] = x[0]
    for w in (wq, wk, wv):
        w[:, 1] = w[:, 0]
    return x, wq, wk, wv, _rounded_rows(rng, n)


def repeated_numbers(inputs: dict) -> dict:
    """An edge replay for the steps that make tensors from the lists: a token repeated, and a column of each weight
    matrix (see :func:`repeated_arrays`)."""
    full = _world_of(*repeated_arrays(inputs))
    return {name: full[name] for name in inputs}


def precise_arrays(inputs: dict) -> tuple[np.ndarray, ...]:
    """Inputs 5 wide and weights of seven decimals (0.1234567 is no float16 or bfloat16 number, as the halves of
    the other replays are, and a number rounded to fewer decimals on the way is another number), for as many
    tokens as the replay has; drawn from a generator seeded by its inputs."""
    rng = _edge_rng(inputs)
    n = len(inputs["x_list"])
    x = rng.normal(size=(n, 5)).round(7)
    wq, wk = (rng.normal(size=(5, 3)).round(7) for _ in range(2))
    return x, wq, wk, rng.normal(size=(5, 4)).round(7), _rounded_rows(rng, n)


def precise_numbers(inputs: dict) -> dict:
    """An edge replay for the steps that make tensors from the lists: numbers with seven decimals, 5 features wide
    (see :func:`precise_arrays`): a trip through float16 or bfloat16, numbers rounded on the way, or a width of 4
    typed in, show."""
    full = _world_of(*precise_arrays(inputs))
    return {name: full[name] for name in inputs}


def small_arrays(inputs: dict, d_v: int | None = None) -> tuple[np.ndarray, ...]:
    """Fresh halves for as many tokens as the replay has, the inputs divided by 16 and the value weights by 64
    (powers of 2: every product stays exact in float32): scores of about 0.01 and below, values and outputs of
    about 0.001, so that a line setting small numbers to 0 changes them. The last token is all zeros (when there
    are two or more): its scores are exactly 0, which a mask of the zero scores or a sparse softmax drops. Drawn
    from a generator seeded by the replay's inputs; ``d_v``: the values' width (else 4 or 5)."""
    rng = _edge_rng(inputs)
    n = len(inputs["x_list"])
    x = fresh_numbers(rng, (n, 4)) / 16.0
    if n > 1:
        x[-1] = 0.0
    wq, wk = (fresh_numbers(rng, (4, 3)) for _ in range(2))
    wv = fresh_numbers(rng, (4, d_v or int(rng.choice([4, 5]))), top=2.0) / 64.0
    return x, wq, wk, wv, _rounded_rows(rng, n)


def small_numbers(inputs: dict) -> dict:
    """An edge replay of small numbers (see :func:`small_arrays`): scores, values and outputs set to 0 below a
    threshold show."""
    full = _world_of(*small_arrays(inputs))
    return {name: full[name] for name in inputs}


def _as_list(a: np.ndarray) -> list:
    return [[int(v) if float(v).is_integer() else float(v) for v in row] for row in a]


def _f(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


# --- references and wrong variants, one group per step, each a function of what it reads ---


def ref_x(x_list, **_):
    return {"x": _f(x_list)}


def ref_weights(w_query_list, w_key_list, w_value_list, **_):
    return {"w_query": _f(w_query_list), "w_key": _f(w_key_list), "w_value": _f(w_value_list)}


def swapped_weights(w_query_list, w_key_list, w_value_list, **_):
    return {"w_query": _f(w_key_list), "w_key": _f(w_query_list), "w_value": _f(w_value_list)}


def key_value_swapped_weights(w_query_list, w_key_list, w_value_list, **_):
    return {"w_query": _f(w_query_list), "w_key": _f(w_value_list), "w_value": _f(w_key_list)}


def _weights_made_with(made_with, **lists):
    return {f"w_{r}": _f(lists[f"w_{made_with[r]}_list"]) for r in ROLES}


# one tensor made from another role's list, or one tensor under two names (`w_key = w_query`, then filled in place)
WEIGHTS_MIX_UPS = mix_ups(_weights_made_with, {r: (f"w_{r}", "") for r in ROLES}, swaps=False)[0]
WEIGHTS_MISTAKES = {"swapped_projections": swapped_weights, "key_value_swapped": key_value_swapped_weights,
                    **WEIGHTS_MIX_UPS}


def ref_qkv(x, w_query, w_key, w_value, **_):
    return {"queries": x @ w_query, "keys": x @ w_key, "values": x @ w_value}


def swapped_qkv(x, w_query, w_key, w_value, **_):
    return {"queries": x @ w_key, "keys": x @ w_query, "values": x @ w_value}


def reversed_qkv(x, w_query, w_key, w_value, **_):
    """w @ x: (d_model, d_k) @ (n, d_model) runs here because n = d_k = 3, and gives (d_model, d_model)."""
    return {"queries": w_query @ x, "keys": w_key @ x, "values": w_value @ x}


def _qkv_made_with(made_with, x, w_query, w_key, w_value, **_):
    w = {"query": w_query, "key": w_key, "value": w_value}
    return {{"query": "queries", "key": "keys", "value": "values"}[r]: x @ w[made_with[r]] for r in ROLES}


QKV_MIX_UPS = mix_ups(_qkv_made_with, {"query": ("queries", "queries = x @ w_query"),
                                       "key": ("keys", "keys = x @ w_key"),
                                       "value": ("values", "values = x @ w_value")},
                      skip=("projection_reused:key_with_query", "swapped_projections:query_key",
                            "key_value_swapped:key_value"))

QKV_MISTAKES = {
    "swapped_projections": swapped_qkv,
    "product_order_reversed": reversed_qkv,
    # a line copied from the queries' without changing the weight: keys = x @ w_query
    "projection_reused": lambda x, w_query, w_key, w_value, **_: {
        "queries": x @ w_query, "keys": x @ w_query, "values": x @ w_value},
    "key_value_swapped": lambda x, w_query, w_key, w_value, **_: {
        "queries": x @ w_query, "keys": x @ w_value, "values": x @ w_key},
    **QKV_MIX_UPS[0],
}


def ref_scores(queries, keys, **_):
    return {"attn_scores": queries @ keys.T}


NO_SCALE_D_MODEL = ("You divided the scores by √d_model, the square root of the inputs' width. This step uses "
                    "the raw dot products, with no scaling; and where attention is scaled (later notebooks), it is by "
                    "√d_k, the width of the keys, not of the inputs.")

SCORES_MISTAKES = {
    "transposed_scores": lambda queries, keys, **_: {"attn_scores": keys @ queries.T},
    "unexpected_scale": lambda queries, keys, **_: {"attn_scores": queries @ keys.T / np.sqrt(keys.shape[-1])},
    "scale_by_d": lambda queries, keys, **_: {"attn_scores": queries @ keys.T / keys.shape[-1]},
    # the notebook's d_k, 3, typed in (the replays' keys have other widths)
    "unexpected_scale:typed": lambda queries, keys, **_: {"attn_scores": queries @ keys.T / np.sqrt(3.0)},
    "scale_by_d:typed": lambda queries, keys, **_: {"attn_scores": queries @ keys.T / 3.0},
    # √d_model, the inputs' width (the notebook's `d_model` where it has one, else x's; 4 in 01 and 03)
    "unexpected_scale:d_model": lambda queries, keys, d_model=None, x=None, **_: {
        "attn_scores": queries @ keys.T / np.sqrt(float(d_model if d_model is not None
                                                        else np.shape(x)[-1] if x is not None else 4))},
    "elementwise_with_transpose": lambda queries, keys, **_: {"attn_scores": queries * keys.T},
    "elementwise_product": lambda queries, keys, **_: {"attn_scores": queries * keys},
    "transposed_first_operand": lambda queries, keys, **_: {"attn_scores": queries.T @ keys},
    "keys_not_transposed": lambda queries, keys, **_: {"attn_scores": queries @ keys},
    # the queries against the values (where they are as wide as the keys)
    "projection_reused:values_for_keys": lambda queries, values=None, **_: {
        "attn_scores": queries @ np.asarray(values, dtype=np.float64).T},
    # made symmetric, as the example's scores are: averaged with the transpose, or one triangle mirrored
    "symmetrised_scores": lambda queries, keys, **_: {"attn_scores": (queries @ keys.T + keys @ queries.T) / 2},
    "symmetrised_scores:upper": lambda queries, keys, **_: {"attn_scores": _mirrored(queries @ keys.T)},
    "symmetrised_scores:lower": lambda queries, keys, **_: {"attn_scores": _mirrored((queries @ keys.T).T).T},
    # the larger of the two scores of each pair (torch.maximum of the scores and their transpose)
    "symmetrised_scores:max": lambda queries, keys, **_: {"attn_scores": np.maximum(queries @ keys.T,
                                                                                    keys @ queries.T)},
}


def _mirrored(s: np.ndarray) -> np.ndarray:
    """The upper triangle of ``s`` (the diagonal with it) mirrored onto the lower one."""
    return np.triu(s) + np.triu(s, 1).T


def _weights(fn):
    return lambda attn_scores, **i: {"attn_weights": fn(np.asarray(attn_scores, dtype=np.float64), **i)}


def _no_keepdim(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max())  # one shift for all: the ratios are those of exp(s) itself
    return e / e.sum(axis=-1)  # (n, n) / (n,): entry (i, j) divided by row j's sum


ref_softmax = _weights(lambda s, **_: softmax(s))
SOFTMAX_MISTAKES = {
    "softmax_wrong_axis": _weights(lambda s, **_: softmax(s, axis=0)),
    "transposed_scores": _weights(lambda s, **_: softmax(s.T)),
    "missing_keepdim": _weights(lambda s, **_: _no_keepdim(s)),
    "max_without_keepdim": _weights(lambda s, **_: max_without_keepdim(s)),
    "max_wrong_axis": _weights(lambda s, **_: max_of_columns(s)),
    "sum_unshifted": _weights(lambda s, **_: sum_unshifted(s, float32=True)),
    # written out (`exp(s - m) / sum`) in float32: overflows where the shifted scores pass 88.7
    "max_without_keepdim:float32": _weights(lambda s, **_: max_without_keepdim_float32(s)),
    "global_softmax": _weights(lambda s, **_: global_softmax(s)),
    "no_softmax": _weights(lambda s, **_: s),
    "sum_normalisation": _weights(lambda s, **_: sum_normalise(s)),
    "rounded_weights": _weights(lambda s, **_: ROUNDED_WEIGHTS),  # typed in from the notebook's numbers
    "unexpected_scale": _weights(lambda s, keys=None, **_: softmax(s / np.sqrt(_f(keys).shape[-1]))),
    "scale_by_d": _weights(lambda s, keys=None, **_: softmax(s / _f(keys).shape[-1])),
    "unexpected_scale:typed": _weights(lambda s, **_: softmax(s / np.sqrt(3.0))),
    "scale_by_d:typed": _weights(lambda s, **_: softmax(s / 3.0)),
    "clamped:scores": _weights(lambda s, **_: softmax(np.maximum(s, 0.0))),
}


def ref_outputs(attn_weights, values, **_):
    return {"outputs": attn_weights @ values}


OUTPUT_MISTAKES = {
    "rounded_weights": lambda rounded_weights, values, **_: {"outputs": _f(rounded_weights) @ values},
    "no_softmax": lambda attn_scores, values, **_: {"outputs": attn_scores @ values},
    "elementwise_product": lambda attn_weights, values, **_: {"outputs": attn_weights * values},
    "transposed_scores": lambda attn_weights, values, **_: {"outputs": attn_weights.T @ values},
    "values_times_weights": lambda attn_weights, values, **_: {"outputs": values @ attn_weights},
    "values_transposed": lambda attn_weights, values, **_: {"outputs": attn_weights @ values.T},
    "self_rounded_weights": lambda attn_weights, values, **_: {"outputs": np.round(attn_weights, 1) @ values},
}


def ref_rounded(rounded_weights, values, **_):
    return {"outputs_rounded": _f(rounded_weights) @ values}


ROUNDED_MISTAKES = {
    "elementwise_product": lambda rounded_weights, values, **_: {"outputs_rounded": _f(rounded_weights) * values},
    "rounded_weights": lambda attn_weights, values, **_: {"outputs_rounded": attn_weights @ values},
    "values_times_weights": lambda rounded_weights, values, **_: {"outputs_rounded": values @ _f(rounded_weights)},
    # torch.round(attn_weights, decimals=1): the exact weights rounded, not the original's rounded weights
    "self_rounded_weights": lambda attn_weights, values, **_: {"outputs_rounded": np.round(attn_weights, 1) @ values},
}

_NO_SCALE = ("This notebook uses the raw scores on purpose: the scaling by √d_k comes in notebook 02. "
             "Leave it out here.")
_NO_SCALE_D = ("You divided the scores by d_k. This notebook uses the raw scores on purpose (notebook 02 brings "
               "in a scaling, by √d_k): leave the division out here.")


REVERSED_QKV_HINT = (
    "You multiplied the weights by the inputs (w @ x). That runs here only because there are as many tokens as a "
    "weight matrix has columns, and it gives a (4, 4) matrix. The tokens are the rows of x, so x comes first: "
    "each row is multiplied by the weight matrix on its right."
)


def _one_list_hint(key: str, tf: bool) -> str:
    """The hint of ``projection_reused:<role>_with_<other>`` in step 0: a tensor with another role's numbers."""
    role, other = key.split(":")[1].split("_with_")
    mine, theirs = f"w_{role}", f"w_{other}"
    shared = "" if tf else (f", or one tensor with {theirs} (after `{theirs} = {mine}` the two names are one tensor, "
                            f"and filling {theirs} in place fills {mine} too)")
    return (f"Your {mine} holds the numbers of {theirs}_list: made from that list{shared}. Make each tensor from its "
            "own list.")


def _tf_qkv_hint(key: str) -> str:
    """The TensorFlow half makes its tensors in the cell that projects them: another role's numbers may come from
    the matrix used or from the list the matrix was made from."""
    plural = {"query": "queries", "key": "keys", "value": "values"}
    if key.startswith("projection_reused:"):
        role, other = key.split(":")[1].split("_with_")
        return (f"Your {plural[role]} are made with the numbers of w_{other}_list: with w_{other} itself, or with a "
                f"w_{role} made from w_{other}_list. Each role has a matrix of its own, from its own list: "
                f"{plural[role]} = x @ w_{role}.")
    a, b = key.split(":")[1].split("_")
    return (f"Your {plural[a]} and {plural[b]} are made with each other's numbers: each other's matrices, or w_{a} "
            f"and w_{b} made from each other's lists. {plural[a]} = x @ w_{a}, {plural[b]} = x @ w_{b}.")


def _hints(framework: str) -> dict[str, dict[str, str]]:
    """Per-step wording of the hints, in the half's own API (no `tf.` in the PyTorch half and no `.T` in
    the TensorFlow half, whose tensors have none)."""
    tf = framework == "tensorflow"
    qk = "tf.matmul(queries, keys, transpose_b=True)" if tf else "queries @ keys.T"
    axis = "axis=-1" if tf else "dim=-1"
    keep = "tf.reduce_sum(…, axis=-1, keepdims=True)" if tf else ".sum(dim=-1, keepdim=True)"
    keep_max = "tf.reduce_max(…, axis=-1, keepdims=True)" if tf else ".max(dim=-1, keepdim=True).values"
    product = ("You multiplied element by element (`*`). A matrix product is tf.matmul (or `@`)." if tf else
               "You multiplied element by element (`*`). A matrix product is `@` (or torch.matmul).")
    lists = ("Your cell does not make {what} from {lists}: the TensorFlow half makes its tensors itself, from the "
             "lists (tf.constant({first}, dtype=tf.float32)), not from Part 1's PyTorch tensors or other numbers.")
    hints = {
        "x": {"not_computed_with": lists.format(what="`x`", lists="`x_list`", first="x_list")} if tf else {},
        "weights": {
            **({"not_computed_with": lists.format(what="the weight matrices", lists="their lists",
                                                  first="w_query_list")} if tf else {}),
            "key_value_swapped": "Your w_key holds the numbers of w_value_list, and your w_value those of "
            "w_key_list: make each tensor from its own list.",
            **{key: _one_list_hint(key, tf) for key in WEIGHTS_MIX_UPS},
        },
        "qkv": {
            **({key: _tf_qkv_hint(key) for key in QKV_MIX_UPS[1]} if tf else QKV_MIX_UPS[1]),
            "product_order_reversed": REVERSED_QKV_HINT,
            "not_computed_with": "Your numbers are right, but your cell does not start from the tensors of step 0: "
            "it makes them again (from the lists). Project x with w_query, w_key and w_value.",
        },
        "scores": {
            "elementwise_product": product,
            "unexpected_scale": _NO_SCALE,
            "unexpected_scale:d_model": NO_SCALE_D_MODEL,
            "scale_by_d": _NO_SCALE_D,
            "transposed_scores": f"Row i of the scores must belong to query i: {qk} (you have keys against "
            "queries). The notebook's own scores happen to be symmetric and hide this; other inputs do not.",
            "transposed_first_operand": "You transposed the queries instead of the keys, so your product pairs "
            f"feature columns with feature columns. A score pairs a row of the queries with a row of the keys: {qk}.",
            "projection_reused:values_for_keys": "Your scores pair the queries with the values. A score says how "
            f"well a query matches a key; the values only come in after the softmax: {qk}.",
        },
        "softmax": {
            "clamped:scores": CLAMPED_SCORES_HINT,
            "unexpected_scale": "You divided the scores by √d_k before the softmax. This notebook uses the "
            "unscaled scores: apply the softmax to attn_scores directly.",
            "scale_by_d": "You divided the scores by d_k before the softmax. This notebook uses the unscaled "
            "scores: apply the softmax to attn_scores directly.",
            "transposed_scores": "Your weights are the softmax of the transposed scores (each column "
            f"normalised, then transposed). Apply the softmax to attn_scores itself, along each row ({axis}).",
            "softmax_wrong_axis": f"Your softmax normalised each column. Each query's row must sum to 1: {axis}.",
            "missing_keepdim": "A row reduction of yours (the row sums you divide by, or a logsumexp you subtract) "
            f"lost its axis, so it lined each row's number up with a column instead of its own row. Keep the axis: "
            f"{keep}.",
            "max_without_keepdim": "Your row maxima lost their axis, so the subtraction lined each maximum up with a "
            "column: entry (i, j) was shifted by the maximum of row j, which the softmax does not cancel. Keep the "
            f"axis: {keep_max}.",
            "rounded_weights": "You typed in the original's rounded weights. This step asks for the exact "
            "softmax of attn_scores.",
            "global_max_rounding:min": "You subtracted the smallest score of the whole matrix before the softmax. In "
            "exact arithmetic that changes nothing (the softmax subtracts each row's own maximum anyway), but in "
            "float32 a score far above that minimum is rounded to the spacing of numbers that large, so a row whose "
            "scores lie far from it loses digits. Leave that subtraction out: the library's softmax is stable on "
            "its own.",
        },
        "outputs": {
            "elementwise_product": product,
            "transposed_scores": "You used the transposed weights: row i of attn_weights holds query i's "
            "weights, and it must meet the values as the rows of the first factor.",
            "no_softmax": "You weighted the values with the raw scores. Use the softmax weights attn_weights.",
            "rounded_weights": "You used the rounded weights. These outputs come from the exact softmax "
            "weights attn_weights.",
            "softmax_wrong_axis": "Your outputs mix the values with weights normalised down each column: the "
            f"softmax above them runs along the wrong axis. Each query's row must sum to 1: {axis}.",
            "self_rounded_weights": "You rounded the weights to one decimal yourself. These outputs come from the "
            "exact softmax weights, attn_weights, as they are.",
        },
        "outputs_rounded": {
            "elementwise_product": product,
            "rounded_weights": "These are the outputs of the exact weights. Here the step asks for the outputs "
            "of rounded_weights.",
            "self_rounded_weights": "You rounded the exact weights yourself. The original's rounded weights are "
            "given as rounded_weights, and they are not simply the weights rounded to one decimal (row 1 has 0.0 "
            "where 0.0634 would round to 0.1): use rounded_weights.",
        },
    }
    if tf:
        for group in hints.values():
            group["not_as_asked"] = ("Your cell uses `torch`: the TensorFlow half does everything itself, with "
                                     "TensorFlow alone, from the lists (tf.constant makes a tensor of a list). "
                                     "A tensor made or computed with PyTorch and then converted "
                                     "brings Part 1's work into this half.")
    return hints


# The TensorFlow half computes steps 2–4 in one cell. Replaying that cell for the outputs recomputes
# the weights (and the outputs) in float32; had the replay been handed the world's weights, the
# recomputed ones would differ from them in the last bit and look like an input changed in place. So
# these two steps are handed the scores, not the weights, and their references start from the scores.


def _without(inputs, *names):
    def fewer(rng: np.random.Generator | None = None) -> dict:
        return {k: v for k, v in inputs(rng).items() if k not in names}

    return fewer


def _from_scores(fn):
    return lambda attn_scores, values, **i: fn(softmax(_f(attn_scores)), values, **i)


TF_OUTPUT_MISTAKES = {
    "rounded_weights": OUTPUT_MISTAKES["rounded_weights"],
    "no_softmax": OUTPUT_MISTAKES["no_softmax"],
    "elementwise_product": _from_scores(lambda w, values, **_: {"outputs": w * values}),
    "transposed_scores": _from_scores(lambda w, values, **_: {"outputs": w.T @ values}),
    "softmax_wrong_axis": lambda attn_scores, values, **_: {"outputs": softmax(_f(attn_scores), axis=0) @ values},
    "values_times_weights": _from_scores(lambda w, values, **_: {"outputs": values @ w}),
    "values_transposed": _from_scores(lambda w, values, **_: {"outputs": w @ values.T}),
    "self_rounded_weights": _from_scores(lambda w, values, **_: {"outputs": np.round(w, 1) @ values}),
}
TF_ROUNDED_MISTAKES = {
    "elementwise_product": ROUNDED_MISTAKES["elementwise_product"],
    "values_times_weights": ROUNDED_MISTAKES["values_times_weights"],
    "rounded_weights": _from_scores(lambda w, values, **_: {"outputs_rounded": w @ values}),
    "self_rounded_weights": _from_scores(lambda w, values, **_: {"outputs_rounded": np.round(w, 1) @ values}),
}


def _half(prefix: str, framework: str) -> list[Exercise]:
    p = prefix
    hints = _hints(framework)
    tf = framework == "tensorflow"

    def value(name, title, answers, reference, first=None, drop=(), **kw):
        inputs = upstream_of(world, first or answers[0])
        kw.setdefault("edge", large_numbers)  # numbers far above the notebook's: a clamp at its largest shows
        return Exercise(f"01.{p}{name}", notebook=NOTEBOOK, title=title, answers=answers, reference=reference,
                        inputs=_without(inputs, *drop) if drop else inputs, framework=framework, **kw)

    # the TensorFlow half "computes everything itself, from the lists": no torch in its cells, and the tensors
    # made from the lists (not from Part 1's PyTorch tensors, which a replay does not hand it)
    own = dict(not_with=("torch",)) if tf else {}
    if tf:
        outputs_step = dict(reference=_from_scores(ref_outputs), reads=("attn_scores", "values"),
                            drop=("attn_weights",), mistakes=TF_OUTPUT_MISTAKES,
                            # its line starts from the weights of the line above it, in the same cell
                            cell_reads=("attn_weights",), cell_reference=ref_outputs)
        rounded_step = dict(drop=("attn_weights", "outputs"), mistakes=TF_ROUNDED_MISTAKES)
    else:
        outputs_step = dict(reference=ref_outputs, reads=("attn_weights", "values"), mistakes=OUTPUT_MISTAKES)
        rounded_step = dict(mistakes=ROUNDED_MISTAKES)
    return [
        value("x", "The inputs", ("x",), ref_x, reads=("x_list",), dtype="float32", hints=hints["x"],
              # and one token: a squeeze of the inputs shows
              edge=(large_numbers, wide_inputs, precise_numbers, repeated_numbers, long_loud, one_token),
              **(dict(own, computed_with=("x_list",)) if tf else {})),
        value("weights", "The three weight matrices", ("w_query", "w_key", "w_value"), ref_weights,
              edge=(large_numbers, precise_numbers, repeated_numbers, one_column),  # one column: a squeeze shows
              reads=("w_query_list", "w_key_list", "w_value_list"), dtype="float32",
              mistakes=WEIGHTS_MISTAKES, hints=hints["weights"],
              **(dict(own, computed_with=("w_query_list", "w_key_list", "w_value_list")) if tf else {})),
        # Steps 1–3 work on float32 tensors, and a float64 result makes the next matrix product raise. The
        # PyTorch half projects the tensors of step 0 (the TensorFlow half makes them in the same cell).
        # numbers with seven decimals too: weights sent through bfloat16 or float16 show
        value("qkv", "Queries, keys and values", ("queries", "keys", "values"), ref_qkv,
              edge=(large_numbers, precise_numbers, long_loud, one_token, one_column),  # a squeeze shows
              # the TensorFlow half's lines start from the tensors its own cell makes above them
              **(dict(cell_reads=("x", "w_query", "w_key", "w_value"), cell_reference=ref_qkv) if tf else {}),
              reads=("x", "w_query", "w_key", "w_value"), mistakes=QKV_MISTAKES, hints=hints["qkv"], dtype="float32",
              computed_with=() if tf else ("x", "w_query", "w_key", "w_value"), **own),
        value("scores", "Attention scores", ("attn_scores",), ref_scores, reads=("queries", "keys"),
              mistakes=SCORES_MISTAKES, hints=hints["scores"], dtype="float32",
              edge=(large_numbers, small_numbers, one_token, long_loud), **own),  # one token: a squeeze shows
        # scores up to 86 too: a clamp of the scores shows; and up to 200: a softmax that does not subtract each
        # row's own maximum (its formula as written, a shift by the mean or by the largest score of all) fails
        value("softmax", "Attention weights (softmax)", ("attn_weights",), ref_softmax,
              reads=("attn_scores",), mistakes=SOFTMAX_MISTAKES, hints=hints["softmax"], dtype="float32",
              # the TensorFlow half's line starts from the scores of the line above it, in the same cell
              **(dict(cell_reads=("attn_scores",), cell_reference=ref_softmax) if tf else {}),
              # and a row of zero scores; one token: a squeeze shows; scores up to 800 (past float64's limit) and a
              # row far below 0: a softmax written out in float64, or shifted only where the scores are large, fails
              # and three-decimal numbers: a softmax sent through float16 shows
              # and a token said twice (equal columns of scores merged, `unique`, show)
              edge=(large_numbers, near_limit_scores, past_limit_scores, small_numbers, one_token, far_past_scores,
                    far_below_scores, precise_numbers, repeated_numbers, past_half_scores,  # and past float16
                    faint_weight_scores,  # and a weight below 1e-6: weights set to 0 below a threshold show
                    apart_rows),  # and rows 2²⁰ apart: one maximum of the whole matrix subtracted first shows
              signs={"unstable_softmax": overflow_sign(ref_softmax, scores_of, 88.0),
                     "global_max_subtraction": global_shift_sign(ref_softmax, scores_of, 87.0),
                     "global_max_rounding": global_rounding_sign(
                         ref_softmax, lambda attn_scores, **_: global_shift_float32(attn_scores)),
                     "global_max_rounding:min": global_rounding_sign(
                         ref_softmax, lambda attn_scores, **_: global_shift_float32(attn_scores, by="min")),
                     "logsumexp_rounding": logsumexp_sign(ref_softmax, scores_of)},
              **own),
        # numbers with seven decimals too: values sent through float16 show (the other replays' halves are exact in it)
        # and small numbers: outputs set to 0 below a threshold show
        # (the TensorFlow half's cell makes the weights too: from a softmax that overflows, its outputs are 🟡)
        value("outputs", "Outputs", ("outputs",), hints=hints["outputs"], dtype="float32",
              edge=(large_numbers, large_positive_outputs, precise_numbers, small_numbers, one_token, twenty_tokens,
                    # (no long, loud trial: 40 products of float32 weights with values in the hundreds leave errors
                    # of 1e-3 against outputs that cancel to near 0, which made the carried-forward verdict depend on
                    # the draw; nor in TensorFlow, whose own softmax of such scores can leave a weight of 1e-8)
                    # scores up to 200: weights written out again in the cell without each row's maximum overflow
                    *((past_limit_scores, far_past_scores, far_below_scores) if tf else (past_limit_scores,))),
              **outputs_step, **own),
        value("outputs_rounded", "Outputs from the rounded weights", ("outputs_rounded",), ref_rounded,
              reads=("rounded_weights", "values"), hints=hints["outputs_rounded"], dtype="float32",
              edge=(large_numbers, small_numbers, one_token), **rounded_step, **own),
    ]


register(*_half("", "torch"), *_half("tf_", "tensorflow"))
