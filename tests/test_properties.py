"""Property-based tests (Hypothesis) of conversion and diagnosis."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from helpers import spec
from helpers.checks import judge
from helpers.convert import to_array
from helpers.samples import answer_namespace, in_framework

spec._load_all()
VALUE_EXERCISES = sorted((e for e in spec.REGISTRY.values() if e.kind == "value"), key=lambda e: e.id)
finite = st.floats(-1e6, 1e6, allow_nan=False, width=32)


@given(hnp.arrays(np.float64, hnp.array_shapes(max_dims=3, max_side=5), elements=finite))
def test_lists_and_arrays_convert_to_the_same_values(arr):
    assert np.array_equal(to_array(arr.tolist()), arr)
    assert np.array_equal(to_array(arr), arr)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALUE_EXERCISES), st.data())
def test_a_random_wrong_entry_is_never_diagnosed_as_a_mistake(ex, data):
    right = ex.expected(ex.inputs())
    name = data.draw(st.sampled_from(ex.answers))
    arr = right[name].copy()
    idx = tuple(data.draw(st.integers(0, n - 1)) for n in arr.shape)
    delta = data.draw(st.floats(0.01, 100) | st.floats(-100, -0.01))
    arr[idx] += delta * max(1.0, abs(arr[idx]))
    ns = answer_namespace(ex, None)
    ns[name] = in_framework(arr, ex.framework)
    outcome = judge(ex, ns)
    assert outcome.status == "fail"
    assert outcome.diagnosis is None, outcome.message
    assert "first differs at index" in outcome.message or "first differs in its value" in outcome.message


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(VALUE_EXERCISES), st.floats(1e-9, 1e-7))
def test_float32_rounding_is_accepted(ex, eps):
    right = ex.expected(ex.inputs())
    ns = {n: in_framework((right[n] * (1 + eps)).astype(np.float32), ex.framework) for n in ex.answers}
    assert judge(ex, ns).status == "pass"
