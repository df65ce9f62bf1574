"""The draws a check is made of, and the trials at the edges of what a softmax can hold.

- A draw that fails to separate the wrong variants is refused exactly as before when the pair that failed last is
  tried first (the same plans, drawn faster).
- A product of the probe's queries with its keys is what multiplies them, not any function handed both
  (``np.result_type(q, k, v)``).
- Two scores just below exp's limit: each exponential fits, their sum does not; a softmax written out there gives
  0s and no NaN, and the check says so.
- 10.accuracy's exact ties: any way of breaking them is right, counting every tie right is not.
- Wrong answers that passed on some draws (a NaN gradient, a squeezed comparison, a guarded softmax, a rounded
  rotation) fail on those.
"""

import numpy as np
import pytest
from frameworks import needs

from helpers.checks import judge
from helpers.course import spec
from helpers.runtime import watch

spec._load_all()


def _signature(plan: spec.Plan) -> list:
    return [(k, np.asarray(v).tobytes() if hasattr(v, "shape") else repr(v)) for t in plan.inputs for k, v in t.items()]


@pytest.mark.parametrize("exercise", ["10.accuracy", "09.cached_attention", "04.numpy", "10.loss"])
def test_a_draw_is_refused_or_taken_whichever_pair_is_tried_first(exercise, monkeypatch):
    ex = spec.REGISTRY[exercise]
    remembered = []
    for seed in range(4):
        remembered.append(_signature(spec.make_plan(ex, np.random.default_rng(seed))))
    assert spec._CLASHED.get(ex.id), "these exercises refuse some draws: a pair that clashed is remembered"
    monkeypatch.setattr(spec, "_clashes_again", lambda *a, **k: False)
    for seed in range(4):
        assert _signature(spec.make_plan(ex, np.random.default_rng(seed))) == remembered[seed]


def _watched(n: int = 12, block: int = 4) -> dict:
    rng = np.random.default_rng(0)
    inputs = {"q": rng.normal(size=(n, 3)), "k": rng.normal(size=(n, 3)), "v": rng.normal(size=(n, 2)),
              "block_size": block}
    return watch.tracking(inputs, "key_blocks")


def test_a_dtype_chosen_from_queries_and_keys_is_no_product_of_them():
    t = _watched()
    q, k = t["q"], t["k"]
    q._log.start()
    np.result_type(q, k, t["v"])
    np.stack([q, k])
    for start in range(0, 12, 4):  # block by block: one product per block of keys
        _ = q @ k[start:start + 4].T
    q._log.finish()  # raises if any of it was taken for the whole score matrix


def test_the_whole_score_matrix_at_once_is_still_seen():
    t = _watched()
    q, k = t["q"], t["k"]
    q._log.start()
    np.dot(q, k.T)
    with pytest.raises(watch.WholeScoreMatrix):
        q._log.finish()


def _written_out(scores: np.ndarray, dtype) -> np.ndarray:
    s = scores.astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("dtype, top", [("float32", 88.4), ("float64", 709.4)])
def test_a_sum_that_alone_overflows_is_seen(dtype, top):
    scores = np.array([[top, top, 0.0], [1.0, 2.0, 3.0]])
    sign = spec.sum_overflow_sign(lambda s: {"w": spec_softmax(s)}, lambda s: s, dtype)
    got = _written_out(scores, getattr(np, dtype))
    assert np.isfinite(got).all() and (got[0] == 0).all()  # no NaN to see: the row is 0s
    assert sign({"w": got}, {"s": scores})
    assert not sign({"w": spec_softmax(scores)}, {"s": scores})  # the right weights are no such row
    nan = got.copy()
    nan[0] = np.nan
    assert not sign({"w": nan}, {"s": scores})  # a NaN is the other face (overflow_sign's)


def spec_softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("exercise", ["04.scaled_attention", "04.self_attention", "05.softmax", "05.self_attention"])
def test_every_sum_overflow_edge_is_just_below_the_limit(exercise):
    """The edge trials made for it: each row's largest score below exp's limit, and some row's sum past it."""
    ex = spec.REGISTRY[exercise]
    limit = spec.EXP_LIMIT["float32" if exercise.startswith("04") else "float64"]
    for seed in range(10):
        plan = spec.make_plan(ex, np.random.default_rng(seed))
        found = False
        for inputs in plan.inputs:
            s = _scores_of(exercise, inputs)
            top = s.max(axis=-1)
            total = top + np.log(np.exp(s - top[..., None]).sum(axis=-1))
            found |= bool(((top < limit) & (total > limit)).any())
        assert found, f"{exercise}: no trial of seed {seed} has a row whose sum alone overflows"


def _scores_of(exercise: str, inputs: dict) -> np.ndarray:
    if "scores" in inputs:
        return np.asarray(inputs["scores"], dtype=float)
    if "q" in inputs:
        q, k = np.asarray(inputs["q"], dtype=float), np.asarray(inputs["k"], dtype=float)
        return q @ np.swapaxes(k, -1, -2) / np.sqrt(k.shape[-1])
    x = np.asarray(inputs["x"], dtype=float)
    q, k = x @ np.asarray(inputs["w_query"], dtype=float), x @ np.asarray(inputs["w_key"], dtype=float)
    return q @ k.T / np.sqrt(k.shape[-1])


def _accuracy(pick):
    def answer_accuracy(logits, tokens):
        half = (tokens.shape[1] - 1) // 2
        guesses = pick(logits[:, half:2 * half])
        return (guesses == tokens[:, half + 1:]).float().mean()
    return answer_accuracy


@pytest.mark.parametrize("framework", [pytest.param("torch", marks=needs("torch"))])
def test_any_way_of_breaking_exact_ties_is_right_and_counting_every_tie_is_not(framework):
    import torch

    ex = spec.REGISTRY["10.accuracy"]
    right = {"argmax": lambda z: z.argmax(-1),
             "kthvalue": lambda z: torch.kthvalue(-z, 1, dim=-1).indices,
             "last of the tied": lambda z: z.shape[-1] - 1 - z.flip(-1).argmax(-1)}

    def every_tie(logits, tokens):
        half = (tokens.shape[1] - 1) // 2
        z = logits[:, half:2 * half]
        return (z.gather(-1, tokens[:, half + 1:, None]).squeeze(-1) >= z.amax(-1)).float().mean()

    for seed in range(8):
        for name, pick in right.items():
            outcome = judge(ex, {"answer_accuracy": _accuracy(pick)}, np.random.default_rng(seed))
            assert outcome.status == "pass", (name, seed, outcome.message)
        assert judge(ex, {"answer_accuracy": every_tie}, np.random.default_rng(seed)).status == "fail", seed


def test_the_kept_answers_are_shared_safely_between_grader_threads(monkeypatch):
    """The grader judges submissions in several threads of one process: the memory of computed answers is shared
    (a right copy of the solution once lost a point to "dictionary changed size during iteration")."""
    import threading

    monkeypatch.setattr(spec, "KEPT_LIMIT", 1)  # every new entry evicts the oldest
    ex = spec.get("01.softmax")
    errors = []

    def hammer():
        try:
            for _ in range(3000):
                inputs = {"attn_scores": np.zeros((2, 2))}
                spec._kept_answers(ex, "right", inputs, lambda attn_scores: {"attn_weights": attn_scores + 1.0})
        except Exception as exc:  # noqa: BLE001 — what a thread raised is the failure
            errors.append(repr(exc))

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def _drawn(exercise: str, seed: int) -> np.random.Generator:
    """The generator a student's check draws from with ``HELPERS_CHECK_SEED=seed``."""
    import zlib

    return np.random.default_rng([seed, zlib.crc32(exercise.encode())])


@pytest.mark.parametrize("seed", [9, 10, 18, 21, 24])  # draws on which it passed (its loud trial ranked fifth)
@pytest.mark.parametrize("framework", [pytest.param("tensorflow", marks=needs("tensorflow"))])
def test_exponentials_selected_after_they_overflow_give_a_nan_gradient_on_every_draw(seed, framework):
    import math

    import tensorflow as tf

    def tf_causal_attention(q, k, v):
        n = tf.shape(q)[-2]
        allowed = tf.range(n)[:, None] >= tf.range(n)[None, :]
        s = tf.matmul(q, k, transpose_b=True) / math.sqrt(q.shape[-1])
        m = tf.reduce_max(tf.where(allowed, s, tf.constant(-np.inf, s.dtype)), axis=-1, keepdims=True)
        e = tf.where(allowed, tf.exp(s - m), tf.zeros_like(s))
        return tf.matmul(e / tf.reduce_sum(e, axis=-1, keepdims=True), v)

    ex = spec.REGISTRY["06.tf_causal_attention"]
    outcome = judge(ex, {"tf_causal_attention": tf_causal_attention}, _drawn(ex.id, seed))
    assert (outcome.status, outcome.diagnosis) == ("fail", "nan_gradient"), outcome.message


@pytest.mark.parametrize("seed", [19, 39])  # draws on which the one-guess trial's broadcast gave the right fraction
@pytest.mark.parametrize("framework", [pytest.param("torch", marks=needs("torch"))])
def test_a_comparison_squeezed_to_a_table_is_named_on_every_draw(seed, framework):
    def answer_accuracy(logits, tokens):
        half = tokens.shape[1] // 2
        guess = logits[:, half:-1].argmax(dim=-1, keepdim=True).squeeze()
        return (guess == tokens[:, half + 1:]).float().mean()

    ex = spec.REGISTRY["10.accuracy"]
    outcome = judge(ex, {"answer_accuracy": answer_accuracy}, _drawn(ex.id, seed))
    assert (outcome.status, outcome.diagnosis) == ("fail", "squeezed_axes"), outcome.message


@pytest.mark.parametrize("seed", [53, 138])  # draws on which a row wholly far below 0 set the guard off
def test_a_softmax_guarded_by_its_exponentials_fails_on_every_draw(seed):
    def self_attention(x, w_query, w_key, w_value):
        q, k, v = x @ w_query, x @ w_key, x @ w_value
        s = q @ k.T / np.sqrt(k.shape[-1])
        with np.errstate(over="ignore"):
            e = np.exp(s)
        if not np.isfinite(e).all() or (e.sum(axis=1) == 0).any():
            e = np.exp(s - s.max(axis=1, keepdims=True))
        return (e / e.sum(axis=1, keepdims=True)) @ v

    ex = spec.REGISTRY["05.self_attention"]
    outcome = judge(ex, {"self_attention": self_attention}, _drawn(ex.id, seed))
    assert (outcome.status, outcome.diagnosis) == ("fail", "unstable_softmax"), outcome.message


@pytest.mark.parametrize("seed", [0, 9])  # draws on which it passed (float32's error on 600 positions beside it)
@pytest.mark.parametrize("framework", [pytest.param("torch", marks=needs("torch"))])
def test_a_rotation_rounded_to_four_decimals_is_named_on_every_draw(seed, framework):
    import torch

    def apply_rope(x, positions):
        d = x.shape[-1]
        theta = 10000 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
        angle = positions[:, None].float() * theta
        cos, sin = torch.cos(angle), torch.sin(angle)
        u, w = x[..., 0::2], x[..., 1::2]
        return torch.stack([u * cos - w * sin, u * sin + w * cos], dim=-1).flatten(-2).round(decimals=4)

    ex = spec.REGISTRY["08.rope"]
    outcome = judge(ex, {"apply_rope": apply_rope}, _drawn(ex.id, seed))
    assert (outcome.status, outcome.diagnosis) == ("fail", "rounded_answer"), outcome.message


@pytest.mark.parametrize("framework", [pytest.param("torch", marks=needs("torch"))])
def test_weights_set_to_0_below_1e_6_are_named_on_every_draw(framework):
    """Inside the tolerance as they are, they show only where some weight lies between float32's noise and 1e-6: an
    edge replay now holds one (a random draw may hold none: ✅ on such a draw)."""
    import torch

    from helpers.course.samples import answer_namespace

    def cell(attn_scores, **_):
        w = torch.softmax(torch.as_tensor(attn_scores, dtype=torch.float32), dim=-1)
        return {"attn_weights": w.where(w > 1e-6, torch.zeros(()))}

    ex = spec.REGISTRY["01.softmax"]
    ns = answer_namespace(ex, None, "torch")
    ns.update(cell(ns["attn_scores"]))
    verdicts = {(o.status, o.diagnosis) for seed in range(30)
                for o in [judge(ex, ns, _drawn(ex.id, seed), cell=cell)]}
    assert verdicts == {("fail", "small_values_zeroed")}, verdicts


@pytest.mark.parametrize("seed", [21, 40])  # draws whose 20-token replay had a row of equal scores: weights of 0.05
@pytest.mark.parametrize("framework", [pytest.param("torch", marks=needs("torch"))])
def test_weights_rounded_by_the_students_own_code_are_named_on_every_draw(seed, framework):
    from helpers.course.samples import answer_namespace, student_cell

    ex = spec.REGISTRY["01.outputs"]
    ns, cell = answer_namespace(ex, "self_rounded_weights", "torch"), student_cell(ex, "self_rounded_weights", "torch")
    outcome = judge(ex, ns, np.random.default_rng(seed), cell=cell)
    assert (outcome.status, outcome.diagnosis) == ("fail", "self_rounded_weights"), outcome.message


_ROUNDED_CELL = """q = x_np @ w_query_np
k = x_np @ w_key_np
v = x_np @ w_value_np
s = q @ k.T / np.sqrt(k.shape[-1])
e = np.exp(s - s.max(axis=-1, keepdims=True))
outputs_np = e / e.sum(axis=-1, keepdims=True) @ v
outputs_np = np.round(outputs_np, 6)
"""


def test_numbers_rounded_to_6_decimals_are_named_so_on_every_draw_and_the_check_warns_nothing():
    """In float64, a rounding to 6 decimals was told "went through float32" on draws whose moved numbers were all
    above 0.5, "rounded to 1 decimal" where the only trial wrong at the step's tolerance sat on that grid, and a clamp
    where two rounded numbers were equal; and an all-zero edge made the check print NumPy's "Mean of empty slice"."""
    import warnings

    ex = spec.REGISTRY["04.numpy"]
    verdicts = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in [*range(28, 30), 53]:  # seeds on which it was told float32 (default_rng(seed))
            ns = {"np": np, **ex.inputs(None)}
            exec(_ROUNDED_CELL, ns)
            verdicts.add(judge(ex, ns, np.random.default_rng(seed), cell=_ROUNDED_CELL).message)
        for seed in (6, 8):  # seeds on which it was told 1 decimal, a clamp (HELPERS_CHECK_SEED)
            ns = {"np": np, **ex.inputs(None)}
            exec(_ROUNDED_CELL, ns)
            verdicts.add(judge(ex, ns, _drawn(ex.id, seed), cell=_ROUNDED_CELL).message)
    assert verdicts == {"Your numbers are the right ones rounded to 6 decimals. Keep them at full precision: round "
                        "only what you print."}, verdicts
    assert not [str(w.message) for w in caught], [str(w.message) for w in caught]
