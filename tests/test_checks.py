"""Registry-wide tests of the checks: every exercise, every framework, every mistake.

These run over whatever the registry holds, so a new notebook's exercises are covered
the moment they are registered.
"""

import numpy as np
import pytest

from helpers import spec
from helpers.checks import check, format_outcome, judge
from helpers.convert import to_array
from helpers.samples import answer_namespace, in_framework

spec._load_all()
EXERCISES = sorted(spec.REGISTRY.values(), key=lambda e: e.id)
PAIRS = [(ex, code) for ex in EXERCISES for code in ex.mistakes]


def _frameworks(ex):
    return [ex.framework] if ex.framework else ["numpy", "torch", "tensorflow", "list"]


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_reference_answer_passes_in_every_allowed_framework(ex):
    for fw in _frameworks(ex):
        outcome = judge(ex, answer_namespace(ex, None, fw))
        assert outcome.status == "pass", (fw, outcome.message)
        assert outcome.points == ex.points


@pytest.mark.parametrize("ex, code", PAIRS, ids=[f"{e.id}:{c}" for e, c in PAIRS])
def test_each_mistake_is_diagnosed_with_exactly_its_code(ex, code):
    fw = ex.framework or "numpy"
    outcome = judge(ex, answer_namespace(ex, code, fw), rng=np.random.default_rng(0))
    assert outcome.status == "fail"
    assert outcome.diagnosis == code, outcome.message
    assert outcome.message == ex.hint(code)


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_random_wrong_answers_get_no_diagnosis(ex):
    rng = np.random.default_rng(42)
    if ex.kind == "value":
        want = ex.expected(ex.inputs())
        ns = {n: in_framework(want[n] + rng.normal(0.3, 0.1, size=want[n].shape), ex.framework) for n in ex.answers}
    else:
        ref = answer_namespace(ex, None, ex.framework)[ex.answers[0]]

        def noisy(*args):
            out = to_array(ref(*args))
            return in_framework(out + rng.normal(0.3, 0.1, size=out.shape), ex.framework)

        ns = {ex.answers[0]: noisy}
    outcome = judge(ex, ns)
    assert outcome.status == "fail" and outcome.diagnosis is None
    assert "differs" in outcome.message


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_missing_answer_is_not_done(ex, capsys):
    check(ex.id, {})
    out = capsys.readouterr().out
    assert out.startswith(f"⏳ {ex.id} — not done yet:") and "not defined yet" in out


@pytest.mark.parametrize("ex", EXERCISES, ids=lambda e: e.id)
def test_wrong_shape_is_named(ex):
    if ex.kind == "value":
        ns = {n: in_framework(np.zeros((7, 1)), ex.framework) for n in ex.answers}
    else:
        ns = {ex.answers[0]: lambda *a: in_framework(np.zeros((7, 1)), ex.framework)}
    outcome = judge(ex, ns)
    assert outcome.status == "fail" and "has shape (7, 1), expected" in outcome.message


def test_placeholders_and_bad_values_never_raise(capsys):
    ex = spec.get("01.scores")
    for value in (None, "scores", ..., [[1, 2], [3]], float("nan"), object()):
        check(ex.id, {"attn_scores": value})
        out = capsys.readouterr().out
        assert out.startswith(("❌", "⏳")) and "Traceback" not in out
    check("01.nope", {})
    assert "There is no exercise '01.nope'" in capsys.readouterr().out


def test_function_that_raises_is_reported_with_the_students_line():
    exs = [e for e in EXERCISES if e.kind == "function"]
    if not exs:
        pytest.skip("no function exercise registered yet")
    ex = exs[0]

    def student(*args):
        return args[0] @ "oops"

    outcome = judge(ex, {ex.answers[0]: student})
    assert outcome.status == "fail" and "raised TypeError" in outcome.message and "`return args[0]" in outcome.message

    def todo(*args):
        raise NotImplementedError("TO-DO")

    assert judge(ex, {ex.answers[0]: todo}).status == "not_done"


def test_dependency_failure_is_mentioned(capsys):
    from helpers.exercises import nb01

    torch = pytest.importorskip("torch")
    t = lambda a: torch.tensor(a, dtype=torch.float32)  # noqa: E731
    ns = {"x": t(nb01.X), "w_key": t(nb01.W_KEY), "w_query": t(nb01.W_QUERY), "w_value": t(nb01.W_VALUE)}
    ns.update(keys=t(nb01.X @ nb01.W_VALUE), queries=t(nb01.X @ nb01.W_QUERY), values=t(nb01.X @ nb01.W_VALUE))
    ns["attn_scores"] = ns["queries"] @ ns["keys"].T
    check("01.scores", ns)
    out = capsys.readouterr().out
    assert "01.qkv is not passing yet" in out


def test_format_outcome_symbols():
    o = spec.Outcome("01.x", "fail", 0, 1, "Use dim=-1.", "softmax_wrong_axis")
    assert format_outcome(o) == "❌ 01.x — not right yet (softmax_wrong_axis): Use dim=-1."


def test_every_exercise_belongs_to_a_solution_notebook():
    from paths import SOLUTIONS

    stems = {p.stem for p in SOLUTIONS.glob("*.ipynb")}
    assert {ex.notebook for ex in EXERCISES} <= stems


def test_error_inside_a_framework_points_at_the_students_line_and_keeps_one_line():
    torch = pytest.importorskip("torch")
    ex = spec.get("02.self_attention")
    layer = torch.nn.Linear(5, 2)

    def self_attention(x, w_query, w_key, w_value):
        return layer(x)  # x has 3 features, the layer wants 5: raised inside torch.nn

    msg = judge(ex, {"self_attention": self_attention}).message
    assert "raised RuntimeError" in msg and "(line " in msg and "`return layer(x)" in msg
    assert "module.py" not in msg and "\n" not in msg


def test_every_catalogued_mistake_is_diagnosed_somewhere():
    from helpers.mistakes import MISTAKES

    used = {code for ex in EXERCISES for code in ex.mistakes}
    assert set(MISTAKES) - used == set(), "catalogued but never diagnosed by any exercise"
