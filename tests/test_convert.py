"""Every kind of answer converts, every bad one gets its own clear message."""

import numpy as np
import pytest

from helpers.convert import AnswerError, NotDone, framework_of, to_array


@pytest.mark.parametrize(
    "value, kind, words",
    [
        (None, "none", "is None"),
        ("0.5", "string", "is a string"),
        (b"xy", "string", "is a string"),
        ([[1, 2], [3]], "ragged", "ragged"),
        ([1, None], "none", "contains None"),
        ([1, "a"], "string", "contains a string"),
        ({"a": 1}, "not_array", "dict"),
        (object(), "not_array", "I expected a tensor"),
        (np.array([1.0, np.nan]), "nan", "NaN (first at index (1,))"),
        (np.array([[1.0, np.inf]]), "inf", "inf (first at index (0, 1))"),
        (np.array(["a"]), "not_numeric", "plain numbers"),
        (np.array([1 + 2j]), "dtype", "complex"),
        (np.array([True]), "dtype", "True/False"),
        ([True, False], "not_numeric", "bool"),
    ],
)
def test_bad_inputs_have_messages(value, kind, words):
    with pytest.raises(AnswerError) as err:
        to_array(value, "scores")
    assert err.value.kind == kind
    assert words in str(err.value) and "`scores`" in str(err.value)


def test_placeholder_is_not_done():
    with pytest.raises(NotDone):
        to_array(..., "keys")


def test_always_equal_object_is_refused():
    class Liar:
        def __eq__(self, other):
            return True

        __array_priority__ = 1000

    with pytest.raises(AnswerError, match="I expected a tensor"):
        to_array(Liar())


@pytest.mark.parametrize("value", [[[1, 2], [3, 4]], ((1, 2), (3, 4)), np.array([[1, 2], [3, 4]], dtype=np.int32)])
def test_plain_values(value):
    out = to_array(value)
    assert out.dtype == np.float64 and out.tolist() == [[1, 2], [3, 4]]


def test_scalars():
    assert to_array(3).shape == () and to_array(np.float32(2.5)) == 2.5


def test_torch_tensor_with_grad_and_int():
    torch = pytest.importorskip("torch")
    t = torch.ones(2, 3, requires_grad=True) * 2
    out = to_array(t)
    assert out.shape == (2, 3) and (out == 2).all() and framework_of(t) == "torch"
    assert to_array(torch.arange(3)).tolist() == [0, 1, 2]
    assert to_array([torch.tensor(1.0), torch.tensor(2.0)]).tolist() == [1, 2]


def test_tensorflow_tensor_and_variable():
    tf = pytest.importorskip("tensorflow")
    assert to_array(tf.constant([[1.0, 2.0]])).tolist() == [[1, 2]]
    v = tf.Variable([3.0, 4.0])
    assert framework_of(v) == "tensorflow" and to_array(v).tolist() == [3, 4]


def test_conversion_copies():
    a = np.zeros(3)
    out = to_array(a)
    out[0] = 5
    assert a[0] == 0


def test_a_bfloat16_tensor_converts_to_its_values():
    """NumPy has no bfloat16: the check reads its values (and says it is the wrong dtype), it does not fail."""
    torch = pytest.importorskip("torch")
    got = to_array(torch.tensor([[1.0, 0.5], [2.0, -3.0]], dtype=torch.bfloat16), "x")
    assert got.dtype == np.float64 and np.array_equal(got, [[1.0, 0.5], [2.0, -3.0]])


def test_a_sparse_tensor_is_named_as_such():
    """Simulation 40: `x.to_sparse()` was told "a torch tensor I cannot read", which sounds like the checker's fault."""
    torch = pytest.importorskip("torch")
    with pytest.raises(AnswerError) as err:
        to_array(torch.eye(3).to_sparse(), "x")
    assert "sparse tensor" in str(err.value) and "to_dense()" in str(err.value)
