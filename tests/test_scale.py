"""helpers.scale (notebook 07's measuring tools) and notebook 07's blockwise variants.

No test here depends on how fast the machine is: timings are only checked to be
positive and to come from the right number of calls.
"""

import tracemalloc

import numpy as np
import pytest

from helpers.course.exercises import nb07
from helpers.scale import (
    Allocation,
    fmt_bytes,
    growth_exponent,
    largest_new_array,
    median_time,
    peak_bytes,
    time_over_sizes,
)


def _plain(q, k, v):
    s = q @ k.T / np.sqrt(q.shape[-1])
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    return w / w.sum(axis=-1, keepdims=True) @ v


def _blockwise(q, k, v, block):
    m, total, acc = np.full(len(q), -np.inf), np.zeros(len(q)), np.zeros((len(q), v.shape[1]))
    for start in range(0, len(k), block):
        s = q @ k[start : start + block].T / np.sqrt(q.shape[-1])
        m_new = np.maximum(m, s.max(axis=1))
        alpha, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
        total = alpha * total + p.sum(axis=1)
        acc = alpha[:, None] * acc + p @ v[start : start + block]
        m = m_new
    return acc / total[:, None]


# --------------------------------------------------------------------------- timing


def test_median_time_calls_warmup_then_repeat_times():
    calls = []
    t = median_time(lambda x: calls.append(x), 7, repeat=4, warmup=2)
    assert calls == [7] * 6 and t >= 0


def test_median_time_needs_one_call():
    with pytest.raises(ValueError):
        median_time(lambda: None, repeat=0)


def test_time_over_sizes_shares_inputs_and_keeps_each_implementations_sizes():
    made = []

    def make(n):
        made.append(n)
        return (np.ones(n),)

    out = time_over_sizes({"a": np.sum, "b": np.max}, {"a": [4, 2], "b": [2]}, make, repeat=1)
    assert sorted(made) == [2, 4]
    assert list(out) == ["a", "b"] and list(out["a"]) == [4, 2] and list(out["b"]) == [2]
    assert all(t >= 0 for times in out.values() for t in times.values())
    with pytest.raises(ValueError, match="unknown"):
        time_over_sizes({"a": np.sum}, {"c": [1]}, make)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 2.5])
def test_growth_exponent_of_a_power_law(p):
    ns = [16, 32, 64, 128]
    assert growth_exponent(ns, [3.0 * n**p for n in ns]) == pytest.approx(p)
    with pytest.raises(ValueError):
        growth_exponent([4], [1.0])


# --------------------------------------------------------------------------- memory


def test_peak_bytes_sees_numpy_temporaries_and_leaves_tracemalloc_as_it_was():
    assert not tracemalloc.is_tracing()
    peak = peak_bytes(lambda: np.ones(1_000_000).sum())
    assert 8_000_000 <= peak < 9_000_000
    assert not tracemalloc.is_tracing()
    tracemalloc.start()
    try:
        assert peak_bytes(lambda: np.ones(100_000).sum()) >= 800_000
        assert tracemalloc.is_tracing()
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("n", [64, 200])
def test_largest_new_array_is_n_by_n_for_plain_and_n_by_block_for_blockwise(n):
    rng = np.random.default_rng(n)
    q, k, v = rng.normal(size=(n, 8)), rng.normal(size=(n, 8)), rng.normal(size=(n, 3))
    assert np.allclose(_plain(q, k, v), _blockwise(q, k, v, 16))
    assert largest_new_array(_plain, q, k, v) == Allocation((n, n), n * n * 8)
    assert largest_new_array(_blockwise, q, k, v, 16) == Allocation((n, 16), n * 16 * 8)


def test_largest_new_array_ignores_the_inputs_and_arrays_made_from_scratch():
    x = np.ones((50, 50))
    assert largest_new_array(lambda a: np.zeros((100, 100)) + 1.0, x) == Allocation((), 0)
    assert largest_new_array(lambda a: a[:2] * 2, x) == Allocation((2, 50), 800)


def test_largest_new_array_resets_after_an_error_and_refuses_nesting():
    def boom(a):
        raise RuntimeError("student bug")

    with pytest.raises(RuntimeError, match="student bug"):
        largest_new_array(boom, np.ones(3))
    assert largest_new_array(lambda a: a + 1, np.ones(3)).shape == (3,)
    with pytest.raises(RuntimeError, match="already measuring"):
        largest_new_array(lambda a: largest_new_array(np.exp, a), np.ones(3))


@pytest.mark.parametrize(
    "nbytes, text",
    [(0, "0 B"), (1023, "1023 B"), (1536, "1.5 KiB"), (4 * 1024**2, "4.0 MiB"), (2**34, "16.0 GiB"),
     (2**41, "2.0 TiB")],
)
def test_fmt_bytes(nbytes, text):
    assert fmt_bytes(nbytes) == text


# --------------------------------------------------------------------------- notebook 07's variants


def test_blockwise_reference_inputs_have_a_shorter_last_block():
    rng = np.random.default_rng(3)
    for _ in range(50):
        inp = nb07.flash_inputs(rng)
        n, block = len(inp["k"]), inp["block_size"]
        assert isinstance(block, int) and 1 < block < n and n % block != 0
        q, k, v = inp["q"], inp["k"], inp["v"]
        assert np.allclose(_blockwise(q, k, v, block), nb07.attention(q, k, v))


def test_random_streams_jump_far_and_stay_below_zero():
    """Fresh streams for the one-pass normaliser: all scores negative (a maximum started at 0 never
    moves), the first about 500 below the rest (a maximum frozen at the first score is far off)."""
    rng = np.random.default_rng(5)
    for _ in range(50):
        s = nb07.online_inputs(rng)["scores"]
        assert s.max() < 0 and s[1:].min() - s[0] > 400


def test_the_long_stream_overflows_the_plain_sum_but_no_single_exp():
    s = nb07.long_stream(np.random.default_rng(5))["scores"]
    with np.errstate(over="ignore"):
        assert np.all(np.isfinite(np.exp(s))) and np.isinf(np.sum(np.exp(s)))
    m, total = nb07._running(s)
    assert np.isclose(m, s.max()) and np.isfinite(total)
