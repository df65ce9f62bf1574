"""Registry-wide tests of the checks: every exercise, every framework, every mistake.

These run over whatever the registry holds, so a new notebook's exercises are covered
the moment they are registered. A value step is judged like a student's: on the notebook's
numbers, on the student's own upstream values, and with its "cell" replayed on fresh inputs
(``student_cell`` plays the student's cell).
"""

import numpy as np
import pytest
from frameworks import needs

from helpers.checks import check, format_outcome, judge
from helpers.convert import to_array
from helpers.course import spec
from helpers.course.mistakes import MISTAKES
from helpers.course.samples import answer_namespace, in_framework, student_cell

spec._load_all()
EXERCISES = sorted(spec.REGISTRY.values(), key=lambda e: e.id)
PAIRS = [(ex, code) for ex in EXERCISES for code in ex.mistakes]
VALUES = [ex for ex in EXERCISES if ex.kind == "value"]
# parameters that skip, with the reason, where the exercise's framework is not installed
EX_PARAMS = [pytest.param(ex, id=ex.id, marks=needs(ex.framework, "torch" if ex.module else None))
             for ex in EXERCISES]
PAIR_PARAMS = [pytest.param(ex, code, id=f"{ex.id}:{code}", marks=needs(ex.framework)) for ex, code in PAIRS]


def _frameworks(ex):
    if ex.framework:
        return [ex.framework]
    return ["numpy", "list"] + [fw for fw in ("torch", "tensorflow") if not needs(fw)]


def _judge(ex, code=None, fw=None, rng=None):
    fw = fw or ex.framework or "numpy"
    cell = student_cell(ex, code, fw) if ex.kind == "value" else None
    return judge(ex, answer_namespace(ex, code, fw), rng, cell=cell)


@pytest.mark.parametrize("ex", EX_PARAMS)
def test_reference_answer_passes_in_every_allowed_framework(ex):
    for fw in _frameworks(ex):
        if fw == "list" and ex.dtype:
            continue  # a list has no dtype to ask for
        outcome = _judge(ex, None, fw)
        assert outcome.status == "pass", (fw, outcome.message)
        assert outcome.points == ex.points


@pytest.mark.parametrize("ex, code", PAIR_PARAMS)
def test_each_mistake_is_diagnosed_with_exactly_its_code(ex, code):
    outcome = _judge(ex, code, rng=np.random.default_rng(0))
    assert outcome.status == "fail"
    assert outcome.diagnosis == spec.code_of(code), outcome.message
    # (two forms of one mistake that give the same numbers on every trial of the draw, √n and a typed 2 on sentences
    # of 4 tokens, are told with the hint of either)
    forms = [c for c in ex.mistakes if spec.code_of(c) == spec.code_of(code)]
    assert any(outcome.message.startswith(ex.hint(c)) for c in forms), outcome.message


@pytest.mark.parametrize("ex", EX_PARAMS)
def test_random_wrong_answers_get_no_diagnosis(ex):
    rng = np.random.default_rng(42)
    fw = ex.framework or "numpy"
    if ex.kind == "value":
        right = student_cell(ex, None, "numpy")

        def noisy(**inputs):
            return {n: in_framework(to_array(v) + rng.normal(0.3, 0.1, size=np.shape(v)), fw)
                    for n, v in right(**inputs).items()}

        ns = answer_namespace(ex, None)
        ns.update(noisy(**ex.inputs()))
        outcome = judge(ex, ns, cell=noisy)
    else:
        ref = answer_namespace(ex, None, fw)[ex.answers[0]]

        def noisy(*args):
            out = to_array(ref(*args))
            return in_framework(out + rng.normal(0.3, 0.1, size=out.shape), fw)

        outcome = judge(ex, {ex.answers[0]: noisy})
    assert outcome.status == "fail" and outcome.diagnosis is None, outcome.message
    if ex.predicts:  # a prediction's message talks in sizes or axes
        assert any(w in outcome.message for w in ("not the size", "should be one axis", "no axis")), outcome.message
    else:
        assert "differs" in outcome.message


@pytest.mark.parametrize("ex", EX_PARAMS)
def test_missing_answer_is_not_done(ex, capsys):
    check(ex.id, {})
    out = capsys.readouterr().out
    assert out.startswith(f"⏳ {ex.id} — not done yet:") and "not defined yet" in out


@pytest.mark.parametrize("ex", EX_PARAMS)
def test_wrong_shape_is_named(ex):
    fw = ex.framework or "numpy"
    if ex.kind == "value":
        ns = answer_namespace(ex, None)
        ns.update({n: in_framework(np.zeros((7, 1)), fw) for n in ex.answers})
        outcome = judge(ex, ns)
    else:
        outcome = judge(ex, {ex.answers[0]: lambda *a: in_framework(np.zeros((7, 1)), fw)})
    if ex.predicts:  # a prediction is one tuple of sizes, or one axis
        assert outcome.status == "fail" and "should be a shape" in outcome.message or "should be one axis" in \
            outcome.message, outcome.message
    else:
        assert outcome.status == "fail" and "has shape (7, 1), expected" in outcome.message


def test_placeholders_and_bad_values_never_raise(capsys):
    pytest.importorskip("torch")
    ex = spec.get("01.scores")
    for value in (None, "scores", ..., [[1, 2], [3]], float("nan"), object()):
        check(ex.id, {"attn_scores": value})
        out = capsys.readouterr().out
        assert out.startswith(("❌", "⏳")) and "Traceback" not in out
    check("01.nope", {})
    assert "There is no exercise '01.nope'" in capsys.readouterr().out


def test_function_that_raises_is_reported_with_the_students_line():
    ex = next(e for e in EXERCISES if e.kind == "function" and e.framework == "numpy")

    def student(*args):
        return args[0] @ "oops"

    outcome = judge(ex, {ex.answers[0]: student})
    assert outcome.status == "fail" and "raised " in outcome.message and "`return args[0]" in outcome.message

    def todo(*args):
        raise NotImplementedError("TO-DO")

    assert judge(ex, {ex.answers[0]: todo}).status == "not_done"


def test_format_outcome_symbols():
    o = spec.Outcome("01.x", "fail", 0, 1, "Use dim=-1.", "softmax_wrong_axis")
    assert format_outcome(o) == "❌ 01.x — not right yet (softmax_wrong_axis): Use dim=-1."
    o = spec.Outcome("01.outputs", "carried", 1, 1, "Your code is right.")
    assert format_outcome(o) == "🟡 01.outputs — right for your inputs: Your code is right."


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


def test_every_catalogued_concept_is_diagnosed_somewhere():
    used = {spec.code_of(code) for ex in EXERCISES
            for code in (*ex.mistakes, *ex.raises.values(), *ex.signs, *ex.explains)}
    concepts = {code for code, m in MISTAKES.items() if m.kind == "concept"}
    assert concepts - used == set(), "catalogued but never diagnosed by any exercise"


# --------------------------------------------------------------------------- the student's own upstream


def test_a_right_step_on_a_wrong_earlier_answer_is_carried_forward():
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    scores = torch.tensor([[2.0, 4.0, 4.0], [4.0, 16.0, 12.0], [4.0, 12.0, 9.0]])  # one wrong score
    ns = {"torch": torch, "attn_scores": scores, "attn_weights": torch.softmax(scores, dim=-1)}
    outcome = judge(ex, ns, cell="attn_weights = torch.softmax(attn_scores, dim=-1)")
    assert outcome.status == "carried" and outcome.points == ex.points, outcome.message
    assert "01.scores" in outcome.message and outcome.carried_from == ("01.scores",)


def test_a_wrong_step_on_a_wrong_earlier_answer_is_diagnosed_and_the_earlier_one_named():
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    scores = torch.tensor([[2.0, 4.0, 4.0], [4.0, 16.0, 12.0], [4.0, 12.0, 9.0]])
    ns = {"torch": torch, "attn_scores": scores, "attn_weights": torch.softmax(scores, dim=0)}
    outcome = judge(ex, ns, cell="attn_weights = torch.softmax(attn_scores, dim=0)")
    assert outcome.status == "fail" and outcome.diagnosis == "softmax_wrong_axis", outcome.message
    assert "01.scores" in outcome.message


# --------------------------------------------------------------------------- replays


@pytest.mark.parametrize("cell, code", [
    ("attn_scores = keys @ queries.T", "transposed_scores"),  # the notebook's scores are symmetric
    ("attn_scores = queries * keys.T", "elementwise_with_transpose"),
    ("attn_scores = torch.tensor([[2., 4, 4], [4, 16, 12], [4, 12, 10]])", "hard_coded"),
])
def test_replays_catch_what_the_notebooks_numbers_hide(cell, code):
    torch = pytest.importorskip("torch")
    ex = spec.get("01.scores")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    exec(cell, ns)
    outcome = judge(ex, ns, cell=cell)
    assert outcome.status == "fail" and outcome.diagnosis == code, outcome.message


def test_a_cell_that_recomputes_an_earlier_step_is_still_right():
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    cell = "attn_weights = torch.softmax(queries @ keys.T, dim=-1)"
    exec(cell, ns)
    assert judge(ex, ns, cell=cell).status == "pass"


def _softmax_cell_outcome(cell):
    """01.softmax judged on ``cell`` (a line that binds attn_weights), and the namespace it ran in."""
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    exec(cell, ns)
    return judge(ex, ns, cell=cell)


@pytest.mark.parametrize("factor, code", [("(1 - 1e-4)", "stray_factor"), ("(1 + 3e-5)", "stray_factor"),
                                          ("1", None)])
def test_a_right_answer_times_a_stray_constant_is_named_though_within_tolerance(factor, code):
    outcome = _softmax_cell_outcome(f"attn_weights = torch.softmax(attn_scores, dim=-1) * {factor}")
    assert (outcome.status, outcome.diagnosis) == (("fail", code) if code else ("pass", None)), outcome.message


@pytest.mark.parametrize("offset, code", [("1e-9", "stray_offset"), ("1e-7", "stray_offset"), ("0", None)])
def test_a_right_answer_plus_a_stray_constant_is_named_not_blamed_on_a_clamp(offset, code):
    outcome = _softmax_cell_outcome(f"attn_weights = torch.softmax(attn_scores, dim=-1) + {offset}")
    assert (outcome.status, outcome.diagnosis) == (("fail", code) if code else ("pass", None)), outcome.message
    clamped = _softmax_cell_outcome("attn_weights = torch.softmax(attn_scores, dim=-1).clamp(min=1e-9)")
    assert clamped.diagnosis == "clamped"


_FLOAT32_SCALE = """
def causal_attention(q, k, v):
    seq = q.shape[-2]
    scores = q @ k.transpose(-2, -1) / torch.sqrt(torch.tensor(k.shape[-1], dtype=torch.float32))
    hidden = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1) @ v.to(torch.float32)
"""


def test_a_function_that_raises_on_float64_fails_where_its_todo_asks_for_float64():
    torch = pytest.importorskip("torch")
    ex = spec.get("06.causal_attention")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    exec(_FLOAT32_SCALE, ns)
    outcome = judge(ex, ns)
    assert (outcome.status, outcome.diagnosis) == ("fail", "wrong_dtype"), outcome.message
    assert "handed float64 inputs it raises" in outcome.message


def test_the_notebooks_that_ask_for_float64_are_those_whose_todos_say_so():
    import nbformat

    from paths import NOTEBOOKS

    said = set()
    for path in NOTEBOOKS.glob("*.ipynb"):
        text = " ".join(c.source for c in nbformat.read(path, 4).cells if c.cell_type == "markdown")
        if "float64 when handed float64" in " ".join(text.split()):
            said.add(path.stem)
    assert said == set(spec.FLOAT64_ASKED)


def test_changing_an_input_in_place_is_named():
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    cell = "attn_scores -= attn_scores.max(dim=-1, keepdim=True).values\nattn_weights = torch.softmax(attn_scores, -1)"
    exec(cell, ns)
    outcome = judge(ex, ns, cell=cell)
    assert outcome.diagnosis == "mutates_input" and "`attn_scores`" in outcome.message


def test_giving_an_input_a_new_name_binding_is_not_an_in_place_change():
    """Binding a name anew leaves the object the cell was given alone: it is not reported as changed in place.
    But the name held the answer of the step above, which the cell so undoes: that is what the check says."""
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    cell = "attn_scores = attn_scores - attn_scores.max(dim=-1, keepdim=True).values\n" \
           "attn_weights = torch.softmax(attn_scores, -1)"
    exec(cell, ns)
    outcome = judge(ex, ns, cell=cell)
    assert outcome.diagnosis == "overwrites_variable", outcome.message
    assert "01.scores" in outcome.message and "in place" not in outcome.message


def test_a_step_computed_again_under_its_own_name_is_not_an_overwrite():
    """A cell that computes an earlier step's answer again, to the same value, undoes nothing."""
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    cell = "attn_scores = queries @ keys.T\nattn_weights = torch.softmax(attn_scores, -1)"
    exec(cell, ns)
    outcome = judge(ex, ns, cell=cell)
    assert outcome.status == "pass", outcome.message


def test_a_new_name_for_a_shifted_input_is_right():
    torch = pytest.importorskip("torch")
    ex = spec.get("01.softmax")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    cell = "shifted = attn_scores - attn_scores.max(dim=-1, keepdim=True).values\n" \
           "attn_weights = torch.softmax(shifted, -1)"
    exec(cell, ns)
    assert judge(ex, ns, cell=cell).status == "pass"


def test_the_dtype_the_todo_asks_for_is_checked():
    torch = pytest.importorskip("torch")
    ex = spec.get("01.x")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    cell = "x = torch.tensor(x_list, dtype=torch.float64)"
    exec(cell, ns)
    outcome = judge(ex, ns, cell=cell)
    assert outcome.diagnosis == "wrong_dtype" and "float64" in outcome.message and "tf." not in outcome.message


def test_a_function_returning_another_frameworks_tensor_is_named():
    pytest.importorskip("torch")
    ex = spec.get("02.self_attention")
    right = answer_namespace(ex, None, "numpy")["self_attention"]
    outcome = judge(ex, {"self_attention": right})
    assert outcome.diagnosis == "wrong_framework" and "NumPy" in outcome.message


def test_a_function_that_reads_notebook_data_is_named():
    torch = pytest.importorskip("torch")
    ex = spec.get("02.self_attention")
    keys = torch.rand(6, 2)  # a notebook global the function should not read
    ns = {"torch": torch, "keys": keys}
    exec("def self_attention(x, w_query, w_key, w_value):\n"
         "    q, v = x @ w_query, x @ w_value\n"
         "    return torch.softmax(q @ keys.T / 2 ** 0.5, dim=-1) @ v\n", ns)
    outcome = judge(ex, ns)
    assert outcome.diagnosis == "reads_globals" and "`keys`" in outcome.message, outcome.message


def test_untrainable_module_weights_are_named():
    torch = pytest.importorskip("torch")
    ex = spec.get("02.sa_v1")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}

    class Frozen(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w_query = torch.nn.Parameter(torch.rand(3, 2), requires_grad=False)
            self.w_key = torch.rand(3, 2)  # not registered at all
            self.w_value = torch.nn.Parameter(torch.rand(3, 2))

    ns["sa_v1"] = Frozen()
    outcome = judge(ex, ns, cell=student_cell(ex, None, "torch"))
    assert outcome.diagnosis == "not_trainable" and "w_key" in outcome.message, outcome.message


# --------------------------------------------------------------------------- cells that raised


def test_a_value_left_from_an_earlier_run_is_not_judged():
    from helpers.runtime.history import History

    torch = pytest.importorskip("torch")
    ex = spec.get("01.scores")
    history = History()
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}  # holds the right scores from an earlier run
    source = "attn_scores = queries @ keys.T + undefined_name"
    history.pre(source, ns)
    history.post(source, ns, NameError("name 'undefined_name' is not defined"))
    outcome = judge(ex, ns, history=history)
    assert outcome.status == "fail" and outcome.diagnosis == "cell_raised", outcome.message
    assert "NameError" in outcome.message


def test_an_untouched_todo_after_an_earlier_answer_is_not_done():
    from helpers.runtime.history import History

    torch = pytest.importorskip("torch")
    ex = spec.get("01.tf_x")
    history = History()
    ns = {"x": torch.ones(3, 4), "x_list": [[1, 0, 1, 0]] * 3}  # the PyTorch half's x
    history.post("x = torch.tensor(x_list, dtype=torch.float32)", ns, None)
    todo = 'raise NotImplementedError("TO-DO: replace this line with your code")\nprint(x)'
    history.pre(todo, ns)
    history.post(todo, ns, NotImplementedError("TO-DO: replace this line with your code"))
    assert judge(ex, ns, history=history).status == "not_done"


def test_a_loop_that_raised_half_way_is_not_judged_but_a_print_that_raised_after_is():
    from helpers.runtime.history import History

    torch = pytest.importorskip("torch")
    ex = spec.get("01.scores")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    history = History()
    loop = "attn_scores = torch.empty(3, 3)\nfor i in range(4):\n    attn_scores[i] = queries[i] @ keys.T"
    history.pre(loop, ns)
    try:
        exec(loop, ns)
    except IndexError as exc:
        history.post(loop, ns, exc)
    outcome = judge(ex, ns, history=history)
    assert outcome.diagnosis == "cell_raised" and "partly computed" in outcome.message, outcome.message
    # the value is whole; only a print after it failed: judge the value (here: right)
    printed = "attn_scores = queries @ keys.T\nprint(attn_scores.nope)"
    history.pre(printed, ns)
    try:
        exec(printed, ns)
    except AttributeError as exc:
        history.post(printed, ns, exc)
    assert judge(ex, ns, history=history, cell="attn_scores = queries @ keys.T").status == "pass"


def test_a_step_that_calls_an_unfinished_function_says_which():
    from IPython.core.interactiveshell import InteractiveShell

    from helpers.runtime.history import install

    shell = InteractiveShell.instance()
    history = install(shell)
    shell.run_cell("def self_attention(x, w_query, w_key, w_value):\n"
                   "    raise NotImplementedError('TO-DO: replace this line with your code')")
    shell.run_cell("outputs_v1 = self_attention(1, 2, 3, 4)")
    outcome = judge(spec.get("02.sa_v1"), shell.user_ns, history=history)
    assert outcome.status == "not_done" and "`self_attention`" in outcome.message, outcome.message


def test_an_answer_that_never_uses_what_the_step_computes_with_is_not_credited():
    """10.trained asks for the trained model's guesses; the task's rule typed in by hand gives the
    same numbers, but it is not the step (and a model that learned nothing would pass it)."""
    pytest.importorskip("torch")
    ex = spec.get("10.trained")
    assert ex.computed_with == ("model",)
    ns = answer_namespace(ex, None, "torch")
    cell = "fresh_predictions = np.flip(np.asarray(fresh_tokens)[:, :6], 1)"
    ns["np"] = np  # fresh_predictions already holds the right numbers
    outcome = judge(ex, ns, cell=cell)
    assert outcome.status == "fail" and outcome.diagnosis == "not_computed_with" and "`model`" in outcome.message


@pytest.mark.parametrize("source, loop, matmul", [
    ("y = x @ w", False, True),
    ("y = torch.matmul(x, w)", False, True),
    ("y = tf.linalg.matmul(x, w)", False, True),
    ("y = np.einsum('ij,jk->ik', x, w)", False, True),
    ("y = [r * 2 for r in x]", True, False),
    ("for r in x:\n    y = r.sum()", True, False),
    ("y = (x[:, :, None] * w).sum(1)", False, False),
    ("%time y = x * 2", False, False),
])
def test_code_features_read_how_a_cell_computes(source, loop, matmul):
    from helpers.runtime.cells import code_features

    features = code_features(source)
    assert {k: features[k] for k in ("loop", "matmul")} == {"loop": loop, "matmul": matmul}


@pytest.mark.parametrize("source, indexed", [
    ("xs = x[perm]\nys = self_attention(x, w)[perm]", True),
    ("out = self_attention(x, w)\nys = out[perm]", True),
    ("xs = x[perm]\nys = self_attention(xs, w)", False),
    ("xs = x.clone()[perm]\nys = self_attention(xs, w)", False),  # a method's result
    ("ys = list(range(5))[0]", False),  # a builtin's
    ("ys = self_attention(x, w)\nprint(torch.allclose(ys, outputs[perm]))", False),
])
def test_code_features_see_a_function_s_result_reordered(source, indexed):
    from helpers.runtime.cells import code_features

    assert code_features(source)["indexed_result"] is indexed


@pytest.mark.parametrize("source, computed", [
    ("scores_shape = tuple((queries @ keys.T).shape)", True),
    ("scores_shape = torch.matmul(queries, keys.T).size()", True),
    ("s = queries @ keys.T\nscores_shape = s.shape", True),  # a name the cell binds to a product
    ("weighted_shape = tuple((attn_weights[:, :, None] * values[None]).shape)", True),
    ("scores_shape = (len(queries @ keys.T), n)", True),
    ("scores_shape = (n, n)", False),
    ("scores_shape = (len(labels), len(labels))", False),  # the shape of a given value
    ("scores_shape = (queries.shape[0], keys.size(0))", False),
    ("scores_shape = (torch.tensor(x_list).shape[0],) * 2", False),  # a tensor made from a list, not a result
])
def test_code_features_see_a_shape_read_off_a_computed_result(source, computed):
    from helpers.runtime.cells import code_features

    assert code_features(source)["shape_of_result"] is computed


@pytest.mark.parametrize("source, typed", [
    ("w = torch.tensor([[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]])", True),
    ("w = [[1, 2], [3, 4]]\nw = torch.tensor(w)", True),  # a matrix literal, made a tensor later
    ("w = np.array([0.1, 0.2, 0.3, 0.4])", True),
    ("w = tf.constant((-1.0, 2.0, 3.0, 4.5))", True),
    ("w = torch.rand(3, 2)", False),
    ("sizes = [1.5, 2.5, 3.5, 4.5]", False),  # a flat list, not made an array
    ("w = torch.tensor([1.0, 2.0])", False),  # too short to be a weight matrix
    ("w = torch.tensor([[a, b], [c, d]])", False),  # names, not numbers
])
def test_code_features_see_numbers_typed_in(source, typed):
    from helpers.runtime.cells import code_features

    assert code_features(source)["typed_numbers"] is typed


@pytest.mark.parametrize("source, library, no_grad", [
    ("return F.scaled_dot_product_attention(q, k, v)", True, False),
    ("out = nn.MultiheadAttention(4, 2)(x, x, x)", True, False),
    ("return keras.ops.dot_product_attention(q, k, v)", True, False),
    ("return torch.softmax(q @ k.mT, -1) @ v", False, False),
    ("with torch.no_grad():\n    y = model(x)", False, True),
    ("with torch.inference_mode():\n    y = model(x)", False, True),
    ("@torch.no_grad()\ndef f(x):\n    return model(x)", False, True),
    ("torch.set_grad_enabled(False)\ny = model(x)", False, True),
    ("torch.set_grad_enabled(True)\ny = model(x)", False, False),
])
def test_code_features_see_library_attention_and_no_grad(source, library, no_grad):
    from helpers.runtime.cells import code_features

    features = code_features(source)
    assert (features["library_attention"], features["no_grad"]) == (library, no_grad)


@pytest.mark.parametrize("source, nested", [
    ("for i, x_i in enumerate(x):\n    s[i] = x @ x_i", False),
    ("s = torch.stack([x @ x_i for x_i in x])", False),
    ("for i, x_i in enumerate(x):\n    for j, x_j in enumerate(x):\n        s[i, j] = x_i @ x_j", True),
    ("s = torch.tensor([[a @ b for b in x] for a in x])", True),
    ("s = torch.tensor([a @ b for a in x for b in x]).reshape(6, 6)", True),
    ("i = 0\nwhile i < 6:\n    s[i] = torch.stack([x[i] @ b for b in x])\n    i += 1", True),
])
def test_code_features_tell_nested_loops_from_one_loop(source, nested):
    from helpers.runtime.cells import code_features

    assert code_features(source)["nested_loop"] is nested


@pytest.mark.parametrize("source, seeds", [
    ("class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        torch.manual_seed(123)\n"
     "        self.w = nn.Parameter(torch.rand(3, 2))", True),
    ("class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
     "        self.w = nn.Parameter(torch.rand(3, 2))\n\n\ntorch.manual_seed(123)\na = A()", False),
])
def test_code_features_see_a_class_that_seeds_itself(source, seeds):
    from helpers.runtime.cells import code_features

    assert code_features(source)["seeds_in_class"] is seeds


@pytest.mark.parametrize("source, low", [
    ("w = torch.softmax(s.half(), dim=-1)", "float16"),
    ("w = tf.cast(tf.nn.softmax(tf.cast(s, tf.float16)), tf.float32)", "float16"),
    ("w = tf.nn.softmax(tf.cast(s, 'bfloat16'))", "bfloat16"),
    ("w = torch.softmax(s.to(torch.bfloat16), dim=-1)", "bfloat16"),
    ("w = tf.cast(tf.cast(tf.nn.softmax(s, axis=-1), tf.bfloat16), tf.float32)", "bfloat16"),
    ("w = torch.softmax(s.float(), dim=-1)", None),
    ("w = np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)", None),
    ("half = d_model // 2\npe[:, :half] = np.sin(pos * freq)", None),  # a variable called half
])
def test_code_features_see_half_precision_named(source, low):
    """Which half type the code names: the message must not call a bfloat16 cast float16."""
    from helpers.runtime.cells import code_features

    assert code_features(source)["low_precision"] == low


def test_a_function_is_read_from_its_own_definition_not_the_cell_s_comparison_code():
    from helpers.runtime.cells import definition_source

    cell = ("def causal_attention(q, k, v):\n    return q @ k.mT\n\n\n"
            "print(torch.allclose(causal_attention(q, k, v), F.scaled_dot_product_attention(q, k, v)))\n")
    assert definition_source(cell, "causal_attention") == "def causal_attention(q, k, v):\n    return q @ k.mT"
    assert definition_source(cell, "other") == cell  # no such definition: the whole cell


@pytest.mark.parametrize("source, implicit", [
    ("w = torch.nn.functional.softmax(s)", True),
    ("import torch.nn.functional as F\nw = F.softmax(s)", True),
    ("from torch.nn.functional import softmax\nw = softmax(s)", True),
    ("w = torch.nn.Softmax()(s)", True),
    ("w = torch.softmax(s, dim=-1)", False),
    ("w = torch.softmax(s, 1)", False),
    ("w = s.softmax(1)", False),  # a tensor's method: its first argument is the axis
    ("w = torch.nn.Softmax(dim=1)(s)", False),
    ("def softmax(s):\n    return s.exp() / s.exp().sum(-1, keepdim=True)\nw = softmax(s)", False),  # the cell's own
    ("w = self.softmax(s)", False),
])
def test_code_features_tell_a_softmax_without_its_axis(source, implicit):
    from helpers.runtime.cells import code_features

    assert code_features(source)["implicit_softmax_dim"] is implicit


def test_warnings_of_the_students_code_are_not_printed_again_by_the_check(capfd):
    """The student's own run of a cell shows its warnings; replaying it, or calling its function, must not
    print them into the check's output."""
    import warnings

    from helpers.runtime.collect import collect

    def noisy(x, w_query, w_key, w_value):
        warnings.warn("from the student's function", stacklevel=2)
        return x

    ex = spec.get("03.attention_outputs")
    plan = spec.make_plan(ex, np.random.default_rng(0))
    value = spec.get("01.x")
    value_plan = spec.make_plan(value, np.random.default_rng(0))
    cell = "import warnings\nwarnings.warn('from the cell')\nx = np.asarray(x_list, dtype=np.float32)"
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        collect(plan.data, {"attention_outputs": noisy})
        record = collect(value_plan.data, {"np": np, **value_plan.inputs[0], "x": np.ones((3, 4), np.float32)},
                         cell=cell)
    assert len(record["answers"]) == len(value_plan.inputs) > 1 + value.replays  # replayed (edges included)
    assert [str(w.message) for w in shown] == []
    assert "from the" not in capfd.readouterr().err
def test_a_step_that_asks_for_a_loop_fails_a_right_product_with_a_message_about_the_loop():
    torch = pytest.importorskip("torch")
    ex = spec.get("02.scores_loop")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    cell = "attn_scores_loop = x @ x.T"
    exec(cell, ns)
    outcome = judge(ex, ns, cell=cell)
    assert outcome.status == "fail" and outcome.diagnosis == "not_as_asked" and "loop" in outcome.message
    loop = ("attn_scores_loop = torch.empty(x.shape[0], x.shape[0])\nfor i, a in enumerate(x):\n"
            "    for j, b in enumerate(x):\n        attn_scores_loop[i, j] = torch.dot(a, b)")
    exec(loop, ns)
    assert judge(ex, ns, cell=loop).status == "pass"


def test_an_error_that_only_one_mistake_raises_is_named():
    """07.online_softmax: math.exp of a positive exponent above 709 raises OverflowError (np.exp gives inf)."""
    import math

    ex = spec.get("07.online_softmax")

    def online_normaliser(scores):
        m, total = -math.inf, 0.0
        for s in scores:
            if m == -math.inf:
                m, total = s, 1.0
                continue
            total += math.exp(s - m)  # before m is raised: positive when s > m
            if s > m:
                total, m = total * math.exp(m - s), s
        return m, total

    outcome = judge(ex, {"online_normaliser": online_normaliser})
    assert outcome.diagnosis == "positive_exponent" and "OverflowError" in outcome.message, outcome.message


def test_a_decoder_without_a_cache_is_named_although_its_numbers_are_right():
    """09.decode counts the rows multiplied by w_key and w_value when the cell is replayed."""
    torch = pytest.importorskip("torch")
    ex = spec.get("09.decode")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch, "F": torch.nn.functional}
    exec("import math\n"  # the student's cached_attention of 09.cached_attention, which the decoder calls
         "def cached_attention(q, k, v):\n"
         "    t = k.shape[-2] - q.shape[-2]\n"
         "    later = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).triu(t + 1)\n"
         "    s = (q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])).masked_fill(later, float('-inf'))\n"
         "    return torch.softmax(s, dim=-1) @ v\n", ns)
    head = "rows = []\nfor t in range(len(x_seq)):\n"
    attend = "    rows.append(cached_attention(q, k, v)[-1:])\ndecoded = torch.cat(rows)"
    again = (head + "    h = x_seq[:t + 1] + pos_table[:t + 1]\n"
             "    q, k, v = h @ w_query, h @ w_key, h @ w_value\n" + attend)
    exec(again, ns)
    outcome = judge(ex, ns, cell=again)
    assert outcome.status == "fail" and outcome.diagnosis == "no_cache", outcome.message
    cached = ("k_cache, v_cache = [], []\n" + head + "    h = x_seq[t:t + 1] + pos_table[t:t + 1]\n"
              "    k_cache.append(h @ w_key)\n    v_cache.append(h @ w_value)\n"
              "    q, k, v = h @ w_query, torch.cat(k_cache), torch.cat(v_cache)\n" + attend)
    exec(cached, ns)
    assert judge(ex, ns, cell=cached).status == "pass"
    ahead = (head.replace("rows = []\n", "rows = []\nh_all = x_seq + pos_table[:len(x_seq)]\n"
                          "k_all, v_all = h_all @ w_key, h_all @ w_value\n")
             + "    q, k, v = h_all[t:t + 1] @ w_query, k_all[:t + 1], v_all[:t + 1]\n" + attend)
    exec(ahead, ns)
    outcome = judge(ex, ns, cell=ahead)
    assert outcome.status == "fail" and outcome.diagnosis == "projected_ahead", outcome.message


def test_a_wrong_number_is_told_as_the_number_it_is():
    ex = spec.get("09.kv_cache_bytes")
    outcome = judge(ex, {"kv_cache_bytes": lambda *sizes: 3 * np.prod(sizes)})  # keys, values and queries
    assert outcome.status == "fail" and "differs: you have" in outcome.message and "entries" not in outcome.message




# --------------------------------------------------------------------------- notebooks 06 and 10: modules, training


def _plan_where(ex, keep, seeds=range(200)):
    """The plan of the first seed whose fresh trials all satisfy ``keep``."""
    for seed in seeds:
        plan = spec.make_plan(ex, np.random.default_rng(seed))
        if all(keep(trial) for trial in plan.inputs[1:]):
            return plan
    raise AssertionError("no seed gives such trials")


@pytest.mark.parametrize("exercise", ["06.module", "10.attention"])
def test_a_module_with_the_dropout_probability_typed_in_is_told_to_use_its_own(exercise):
    """1 − p typed in (0.8): the module must use self.dropout, its constructor argument, not the notebook's
    global p_drop, which the generic message for a value typed in would name."""
    pytest.importorskip("torch")
    from helpers.runtime.collect import collect

    ex = spec.get(exercise)
    typed = ex.inputs(None)["p_drop"]
    plan = _plan_where(ex, lambda trial: trial["p_drop"] != typed)

    def cell(**inputs):
        plain = {k: to_array(v, k, finite=False) if hasattr(v, "shape") else v for k, v in inputs.items()}
        out = ex.expected({**plain, "p_drop": typed})
        return {n: in_framework(out[n], "torch") for n in ex.answers}

    ns = answer_namespace(ex, None, "torch")
    outcome = spec.evaluate(ex, plan, collect(plan.data, ns, cell=cell))
    assert outcome.diagnosis == "hard_coded", outcome.message
    assert "`self.dropout`" in outcome.message and "Compute it from" not in outcome.message, outcome.message


def test_a_shape_error_gets_the_longest_length_rider_only_from_a_function_that_takes_a_maximum():
    torch = pytest.importorskip("torch")
    import math

    ex = spec.get("06.padded_attention")
    source = ("def padded_attention(q, k, v, lengths):\n"
              "    real = torch.arange(k.shape[-2])[None, :] < lengths\n"  # [:, None] missing
              "    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])\n"
              "    return torch.softmax(s.masked_fill(~real[:, None, :], float('-inf')), dim=-1) @ v\n")
    ns = {"torch": torch, "math": math}
    exec(source, ns)
    outcome = judge(ex, ns)
    assert outcome.status == "fail" and "must match the size" in outcome.message, outcome.message
    assert "lengths.max()" not in outcome.message, outcome.message


def test_probes_of_how_a_step_trains_leave_torch_s_generator_as_it_was():
    """10.train_step runs the student's step again (twice, from two seeds) and 06.module calls the module from
    seeds of its own: a reseeding step or module is named, and the notebook's generator is left alone."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F  # noqa: N812

    ex = spec.get("10.train_step")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    def answer_loss(logits, tokens):
        half = tokens.shape[1] // 2
        return F.cross_entropy(logits[:, half:-1].reshape(-1, logits.shape[-1]), tokens[:, half + 1:].reshape(-1))

    ns["answer_loss"] = answer_loss
    exec("def train_step(model, optimizer, tokens):\n"
         "    torch.manual_seed(0)\n"
         "    optimizer.zero_grad()\n"
         "    loss = answer_loss(model(tokens), tokens)\n"
         "    loss.backward()\n"
         "    optimizer.step()\n"
         "    return loss.item()\n", ns)
    torch.manual_seed(1234)
    state = torch.get_rng_state()
    outcome = judge(ex, ns, cell=student_cell(ex, None, "torch"))
    assert outcome.diagnosis == "reseeded_each_call", outcome.message
    assert torch.equal(torch.get_rng_state(), state)


def _solution_code(notebook, *cells):
    """The solution's code of these cells, without the solution markers."""
    import re

    import nbformat

    from paths import SOLUTIONS

    nb = nbformat.read(SOLUTIONS / f"{notebook}.ipynb", as_version=4)
    return "\n".join(re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n", "", nb.cells[i].source, flags=re.M)
                     for i in cells)


def _round_trip(ex, plan, record):
    """The verdict the grader gives on this record, sent as the sandbox sends it."""
    import json

    from helpers.grading.protocol import encode_record
    from helpers.grading.verdict import judge_record

    return judge_record(ex, json.loads(json.dumps(encode_record(record))), plan)


def test_the_grader_reads_what_the_probes_of_modules_and_training_steps_measured():
    """The same verdict in the student's kernel and in the grader: a module that seeds inside forward, a step
    that updates the weights by hand, a function that reads the notebook's number `seq`."""
    torch = pytest.importorskip("torch")
    import math

    from helpers.runtime.collect import collect

    ns = {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "math": math, "np": np}
    code = _solution_code("10_tiny_attention_model", 7, 11)
    exec(code.split("mhsa = load_weights")[0].replace(
        "            if keep is None:\n", "            if keep is None:\n                torch.manual_seed(0)\n"), ns)
    layer = spec.get("10.attention")
    world = layer.inputs(None)
    ns["mhsa"] = ns["load_weights"](ns["MultiHeadSelfAttention"](6, 2, 8, world["p_drop"]),
                                    {w: torch.tensor(world[w], dtype=torch.float32)
                                     for w in ("w_query", "w_key", "w_value", "w_out")})
    step = spec.get("10.train_step")
    exec("def answer_loss(logits, tokens):\n"
         "    half = tokens.shape[1] // 2\n"
         "    guesses, targets = logits[:, half:-1], tokens[:, half + 1:]\n"
         "    return F.cross_entropy(guesses.reshape(-1, guesses.shape[-1]), targets.reshape(-1))\n"
         "def train_step(model, optimizer, tokens):\n"
         "    model.zero_grad()\n"
         "    loss = answer_loss(model(tokens), tokens)\n"
         "    loss.backward()\n"
         "    with torch.no_grad():\n"
         "        for p in model.parameters():\n"
         "            p -= optimizer.param_groups[0]['lr'] * p.grad\n"
         "    return loss.item()\n", ns)
    padded = spec.get("06.padded_attention")
    exec("seq = 5\n"
         "def padded_attention(q, k, v, lengths):\n"
         "    s = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])\n"
         "    real = torch.arange(seq) < lengths[:, None]\n"
         "    return torch.softmax(s.masked_fill(~real[:, None, :], float('-inf')), dim=-1) @ v\n", ns)
    for ex, code, cell in ((layer, "reseeded_each_call", student_cell(layer, None, "torch")),
                           (step, "optimizer_not_used", student_cell(step, None, "torch")),
                           (padded, "reads_globals", None)):
        plan = spec.make_plan(ex, np.random.default_rng(0))
        record = collect(plan.data, answer_namespace(ex, None, "torch") | ns if ex.kind == "value" else ns,
                         cell=cell)
        here, there = spec.evaluate(ex, plan, record), _round_trip(ex, plan, record)
        assert here.diagnosis == code, here.message
        assert (there.status, there.diagnosis, there.message) == (here.status, here.diagnosis, here.message)


def test_every_field_the_verdict_reads_is_decoded_by_the_grader():
    """The grader rebuilds a record from the sandbox field by field: a field the verdict reads that the grader
    leaves out makes the grader pass what the check fails. Every key the verdict reads off a record (or off a
    probe's entry) must be one the grader's decoder names."""
    import re
    from pathlib import Path

    import helpers.course.spec as spec_module
    import helpers.grading.verdict as verdict_module

    source = Path(spec_module.__file__).read_text()
    read = set(re.findall(r'(?:record|entry|watched|nan|facts|drops)\.get\("([a-z_0-9]+)"', source)) | set(
        re.findall(r'(?:record|entry)\["([a-z_0-9]+)"\]', source))
    decoded = set(re.findall(r'"([a-z_0-9]+)"', Path(verdict_module.__file__).read_text()))
    assert len(read) > 100, "the pattern no longer finds what the verdict reads"
    assert read - decoded == set(), "read by the verdict but never decoded by the grader"


def test_the_grader_reads_what_the_new_probes_measured():
    """The same verdict in the kernel and in the grader for the measurements added with simulation 30: a NaN
    gradient, a float64 input handed back in float32, a layer's own draw that repeats (fork_rng), a step that
    changes the optimizer's settings, parameters made in forward."""
    torch = pytest.importorskip("torch")
    import math

    from helpers.runtime.collect import collect

    ns = {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "math": math, "np": np}
    exec("def causal_attention(q, k, v):\n"
         "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
         "    n = s.shape[-1]\n"
         "    allowed = torch.ones(n, n, dtype=torch.bool).tril()\n"
         "    m = s.masked_fill(~allowed, float('-inf')).amax(dim=-1, keepdim=True)\n"
         "    e = torch.exp(s - m).tril()\n"
         "    return (e / e.sum(dim=-1, keepdim=True)) @ v\n"
         "def cross_attention(x_dec, x_enc, w_query, w_key, w_value):\n"
         "    q, k, v = x_dec @ w_query, x_enc @ w_key, x_enc @ w_value\n"
         "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
         "    return (torch.softmax(s, dim=-1) @ v).float()\n"
         "def answer_loss(logits, tokens):\n"
         "    half = tokens.shape[1] // 2\n"
         "    guesses, targets = logits[:, half:-1], tokens[:, half + 1:]\n"
         "    return F.cross_entropy(guesses.reshape(-1, guesses.shape[-1]), targets.reshape(-1))\n"
         "def train_step(model, optimizer, tokens):\n"
         "    for group in optimizer.param_groups:\n"
         "        group['weight_decay'] = 0.0\n"
         "    optimizer.zero_grad()\n"
         "    loss = answer_loss(model(tokens), tokens)\n"
         "    loss.backward()\n"
         "    optimizer.step()\n"
         "    return loss.item()\n", ns)
    code = _solution_code("10_tiny_attention_model", 7, 11)
    drawn = "                keep = (torch.rand_like(attn_weights) >= self.dropout).float()\n"
    assert drawn in code
    exec(code.split("mhsa = load_weights")[0].replace(
        drawn, "                with torch.random.fork_rng():\n    " + drawn), ns)
    layer = spec.get("10.attention")
    world = layer.inputs(None)
    ns["mhsa"] = ns["load_weights"](ns["MultiHeadSelfAttention"](6, 2, 8, world["p_drop"]),
                                    {w: torch.tensor(world[w], dtype=torch.float32)
                                     for w in ("w_query", "w_key", "w_value", "w_out")})
    cases = ((spec.get("06.causal_attention"), "nan_gradient", None),
             (spec.get("09.cross_attention"), "wrong_dtype", None),
             (layer, "generator_put_back", student_cell(layer, None, "torch")),
             (spec.get("10.train_step"), "optimizer_not_used", student_cell(spec.get("10.train_step"), None,
                                                                           "torch")))
    for ex, code, cell in cases:
        plan = spec.make_plan(ex, np.random.default_rng(0))
        record = collect(plan.data, answer_namespace(ex, None, "torch") | ns if ex.kind == "value" else ns,
                         cell=cell)
        here, there = spec.evaluate(ex, plan, record), _round_trip(ex, plan, record)
        assert here.diagnosis == code, (ex.id, here.message)
        assert (there.status, there.diagnosis, there.message) == (here.status, here.diagnosis, here.message)


def test_a_right_answers_measurements_are_taken_only_for_numbers_that_are_right():
    """A check takes the costly measurements of a right answer (its gradients, a call in float64) when the verdict
    reads them: an answer whose numbers are wrong is judged without those calls, and every verdict is the one the
    full record gives (the grader's)."""
    torch = pytest.importorskip("torch")
    import math

    from helpers.runtime.collect import DeferredRecord, collect

    ex = spec.get("06.causal_attention")
    bodies = {
        None: "    p = torch.softmax(s.masked_fill(hide, float('-inf')), dim=-1)\n",
        "missing_scale": "    s = s * math.sqrt(q.shape[-1])\n"
                         "    p = torch.softmax(s.masked_fill(hide, float('-inf')), dim=-1)\n",
        "nan_gradient": "    m = s.masked_fill(hide, float('-inf')).amax(dim=-1, keepdim=True)\n"
                        "    e = torch.exp(s - m).tril()\n"
                        "    p = e / e.sum(dim=-1, keepdim=True)\n",
    }
    for code, body in bodies.items():
        calls: list[tuple] = []
        ns = {"torch": torch, "math": math, "calls": calls}
        exec("def causal_attention(q, k, v):\n"
             "    calls.append((q.dtype, q.requires_grad))\n"
             "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
             "    hide = torch.ones(s.shape[-1], s.shape[-1], dtype=torch.bool).triu(1)\n"
             + body + "    return p @ v\n", ns)
        plan = spec.make_plan(ex, np.random.default_rng(0))
        record = collect(plan.data, ns, defer=True)
        assert isinstance(record, DeferredRecord)
        before = len(calls)
        deferred = spec.evaluate(ex, plan, record)
        later = calls[before:]
        full = spec.evaluate(ex, plan, collect(plan.data, ns))
        assert (deferred.status, deferred.diagnosis, deferred.message) == (full.status, full.diagnosis, full.message)
        if code == "missing_scale":
            assert deferred.diagnosis == code and later == [], later
        else:
            assert (deferred.status, deferred.diagnosis) == (("pass", None) if code is None else ("fail", code))
            assert (torch.float64, False) in later and any(grad for _, grad in later), later


def test_a_notebook_number_is_blamed_only_where_it_changes_what_the_function_gives():
    """`d_k` read from the notebook changes the result on other inputs: named. A fill constant of the notebook's
    (-1e9) changes nothing there: the failure has another cause (a scale of 2 typed in), not named as a global."""
    torch = pytest.importorskip("torch")
    import math

    ex = spec.get("06.causal_attention")
    body = ("    seq = q.shape[-2]\n"
            "    future = torch.triu(torch.ones(seq, seq, dtype=torch.bool), diagonal=1)\n"
            "    return torch.softmax((q @ k.transpose(-2, -1) / {scale}).masked_fill(future, NEG), dim=-1) @ v\n")
    for scale, named in (("math.sqrt(d_k)", True), ("2", False)):
        ns = {"torch": torch, "math": math, "d_k": 4, "NEG": -1e9}
        exec("def causal_attention(q, k, v):\n" + body.format(scale=scale), ns)
        outcome = judge(ex, ns)
        assert outcome.status == "fail", outcome.message
        assert (outcome.diagnosis == "reads_globals") == named and ("`NEG`" in outcome.message) is False, \
            outcome.message


def test_the_row_count_follows_the_weight_whatever_writes_the_product():
    """09.decode's budgets: every product that consumes the weight counts its other operand's rows (F.linear with
    the transposed weight, einsum, tensordot, the weight on the left, a fused projection); a slice of it does not
    count (missed, never invented)."""
    torch = pytest.importorskip("torch")
    from helpers.runtime.collect import _counting

    h = torch.randn(5, 4)
    products = {
        "h @ w": 5, "F.linear(h, w.T)": 5, "F.linear(h, w.t())": 5, "torch.einsum('nd,de->ne', h, w)": 5,
        "torch.tensordot(h, w, dims=1)": 5, "(w.T @ h.T).T": 5, "torch.mm(h[:2], w)": 2,
        "h @ torch.cat([other, w], dim=1)": 5, "h @ w.clone().contiguous()": 5, "h @ w[:, :2]": 0,
        "torch.zeros(0, w.shape[1])": 0,
    }
    for expr, rows in products.items():
        counts = {}
        scope = {"torch": torch, "F": torch.nn.functional, "h": h, "other": torch.randn(4, 3),
                 "w": _counting(torch.randn(4, 3), "w_key", counts)}
        eval(expr, scope)
        assert counts.get("w_key", 0) == rows, (expr, counts)


def test_a_library_is_found_under_any_name_a_function_reaches_it_by():
    from helpers.runtime.collect import _packages_reached

    torch = pytest.importorskip("torch")
    scope = {"_t": torch, "F": torch.nn.functional, "np": np}
    exec("def aliased(q):\n    return _t.tensor(q)\n"
         "def functional(q):\n    return F.softmax(q, -1)\n"
         "def inside(q):\n    import torch.nn.functional as G\n    return G.softmax(q, -1)\n"
         "def calls(q):\n    return aliased(q)\n"
         "def plain(q):\n    return np.exp(q)\n", scope)
    assert set(_packages_reached(scope["aliased"])) == {"torch"}
    assert set(_packages_reached(scope["functional"])) == {"torch"}
    assert set(_packages_reached(scope["inside"])) == {"torch"}
    assert _packages_reached(scope["calls"]) == {"torch": "aliased"}
    assert set(_packages_reached(scope["plain"])) == {"numpy"}


def _key_log_finish(fn, n=40, block=8):
    from helpers.runtime.watch import tracking

    rng = np.random.default_rng(0)
    inputs = tracking({"q": rng.normal(size=(n, 3)), "k": rng.normal(size=(n, 3)), "v": rng.normal(size=(n, 2)),
                       "block_size": block}, "key_blocks")
    log = inputs["q"]._log
    log.start()
    fn(*inputs.values())
    try:
        log.finish()
    except RuntimeError as err:
        return type(err).__name__
    return None


def test_the_key_block_watch_tells_one_pass_from_two_and_from_glued_scores():
    def passes(twice, again_in_a_row=False, glue=False):
        def flash(q, k, v, block_size):
            if glue:
                s = np.concatenate([q @ k[j:j + block_size].T for j in range(0, len(k), block_size)], axis=1)
                return np.exp(s) @ v
            for _ in range(2 if twice else 1):
                for j in range(0, len(k), block_size):
                    s = q @ k[j:j + block_size].T
                    if again_in_a_row:
                        s = np.maximum(s, q @ k[j:j + block_size].T)
            return np.zeros((len(q), v.shape[1]))
        return flash

    assert _key_log_finish(passes(False)) is None
    assert _key_log_finish(passes(False, again_in_a_row=True)) is None  # the same block's scores twice in a row
    assert _key_log_finish(passes(True)) == "KeyBlocksTwice"
    assert _key_log_finish(lambda q, k, v, b: passes(False, glue=True)(q[:8], k, v, b)) == "KeysNotInBlocks"


@pytest.mark.parametrize("source, lengths_max, no_maxlen", [
    ("real = torch.arange(int(enc_lengths.max())) < enc_lengths[:, None]", True, False),
    ("real = torch.arange(max(lengths)) < lengths[:, None]", True, False),
    ("s = s - s.max(dim=-1, keepdim=True).values", False, False),
    ("real = tf.sequence_mask(enc_lengths)", False, True),
    ("real = tf.sequence_mask(enc_lengths, maxlen=tf.shape(k)[1])", False, False),
])
def test_code_features_see_a_mask_as_wide_as_the_longest_length(source, lengths_max, no_maxlen):
    from helpers.runtime.cells import code_features

    features = code_features(source)
    assert (features["max_of_lengths"], features["sequence_mask_without_maxlen"]) == (lengths_max, no_maxlen)


def test_numbers_typed_into_a_tensor_are_read_from_the_code():
    from helpers.runtime.cells import typed_lists

    assert typed_lists("real = torch.arange(5) < torch.tensor([5, 2])[:, None]") == [[5.0, 2.0]]
    assert typed_lists("x = np.array([[1, -2], [3, 4]])") == [[1.0, -2.0, 3.0, 4.0]]
    assert typed_lists("x = torch.tensor(float('-inf'))\ny = torch.zeros(3)") == []


def test_the_fresh_sizes_of_03_s_shape_predictions_are_never_within_one_of_each_other():
    """(n, n, d_model - 1) must not pass because a draw made d_v = d_model - 1 (simulation 4)."""
    ex = spec.get("03.predict_weighted")
    for seed in range(300):
        inputs = ex.inputs(np.random.default_rng(seed))
        sizes = [int(inputs[k]) for k in ("n", "d_model", "d_k", "d_v")]
        assert all(abs(a - b) >= 2 for i, a in enumerate(sizes) for b in sizes[i + 1:]), (seed, sizes)


@pytest.mark.parametrize("source, found", [
    ("scores.masked_fill(mask, float('-inf'))\nw = torch.softmax(scores, -1)",
     ["scores.masked_fill(mask, float('-inf'))"]),
    ("def f(s):\n    s.transpose(0, 1)\n    return s", ["s.transpose(0, 1)"]),
    ("for i in range(3):\n    x.clamp(0, 1)\ny = x", ["x.clamp(0, 1)"]),
    ("scores = scores.masked_fill(mask, float('-inf'))", []),
    ("scores.masked_fill_(mask, float('-inf'))\nw = scores", []),  # in place: nothing to keep
    ("w = torch.softmax(s, -1)\nw.sum(dim=-1)", []),  # the last line is shown, not thrown away
    ("print(w.sum())\nw = 1", []),
    # in place, whatever the name says (simulation 28: `np.fill_diagonal` was said to change nothing)
    ("np.fill_diagonal(s, -np.inf)\nw = softmax(s)", []),
    ("np.exp(s, out=s)\nw = s / s.sum(axis=1, keepdims=True)", []),
    ("np.exp(s)\nw = s / s.sum(axis=1, keepdims=True)", ["np.exp(s)"]),
])
def test_a_result_computed_and_thrown_away_is_found(source, found):
    from helpers.runtime.cells import discarded_results

    assert discarded_results(source) == found


def test_a_line_right_from_a_wrong_line_above_it_is_carried_in_the_check_and_in_the_grader():
    """01's TensorFlow half makes the weights and the outputs in one cell: outputs right from the cell's own wrong
    weights are 🟡, from what each replay computed (`replay_upstream`), the same through the grader's protocol."""
    tf = pytest.importorskip("tensorflow")
    from helpers.runtime.collect import collect

    ex = spec.get("01.tf_outputs")
    plan = spec.make_plan(ex, np.random.default_rng(0))

    def cell(attn_scores, values, **_):
        weights = tf.nn.softmax(tf.transpose(tf.cast(attn_scores, tf.float32)))  # the wrong line
        return {"attn_weights": weights, "outputs": tf.matmul(weights, tf.cast(values, tf.float32))}

    ns = answer_namespace(ex, None, "tensorflow")
    ns.update(cell(ns["attn_scores"], ns["values"]))
    record = collect(plan.data, ns, cell=cell)
    assert record["replay_upstream"] and all("attn_weights" in up for up in record["replay_upstream"])
    here, there = spec.evaluate(ex, plan, record), _round_trip(ex, plan, record)
    assert here.status == "carried" and "attn_weights" in here.message, here.message
    assert (there.status, there.diagnosis, there.message) == (here.status, here.diagnosis, here.message)


def test_the_grader_reads_the_gradient_agreement_the_mode_probe_and_gradients_left_off():
    """A record with a parameter whose gradient misses a path, a model that drops in evaluation mode, and a cell
    that left gradients off: each named, and named the same once sent through the sandbox's protocol."""
    ex = spec.get("10.model")
    plan = spec.make_plan(ex, np.random.default_rng(0))
    right = answer_namespace(ex, None, "torch")
    base = {"answers": [{"logits_demo": to_array(right["logits_demo"], "logits_demo")}] +
            [ex.expected(inputs) for inputs in plan.inputs[1:]],
            "facts": {"framework": {"logits_demo": "torch"}, "dtype": {"logits_demo": "float32"}},
            "replay": {"available": True, "error": None},
            "module": {"params": [[n, [], True] for n in ("token_emb", "pos_emb", "w_readout", "attn.w_query",
                                                          "attn.w_key", "attn.w_value", "attn.w_out")],
                       "plain_tensors": [], "globals_read": [], "globals_in": None, "training": False}}
    grad = {"keeps_grad": True, "cut": [], "ignores_input": False}
    cases = {
        "gradient_cut": {"probes": {"module_grad": {**grad, "partial": ["token_emb"]}}},
        "dropout_in_eval": {"probes": {"module_grad": grad, "module_drops": {"differ": True, "eval_differ": True,
                                                                             "layer_differs": True}}},
        "dropout_never_drawn": {"probes": {"module_grad": grad, "module_drops": {"differ": False,
                                                                                 "layer_differs": True}}},
    }
    for code, extra in cases.items():
        record = {**base, **extra}
        here, there = spec.evaluate(ex, plan, record), _round_trip(ex, plan, record)
        assert here.diagnosis == code, (code, here.message)
        assert (there.status, there.diagnosis, there.message) == (here.status, here.diagnosis, here.message)
    off = spec.get("10.trained")
    record = {"answers": [{"fresh_predictions": np.zeros(3)}], "grad_off": True}
    assert _round_trip(off, spec.make_plan(off, np.random.default_rng(0)), record).status == "fail"


def test_a_name_that_a_later_part_makes_anew_is_told_so():
    """Notebook 01's TensorFlow half gives Part 1's names TensorFlow tensors: checking Part 1 again afterwards says so,
    instead of asking to build with torch what the student's cell does build with torch (simulation 20)."""
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("tensorflow")
    ex = spec.get("01.x")
    ns = {**answer_namespace(ex, None, "torch"), "torch": torch, "tf": tf}
    ns["x"] = tf.constant(np.asarray(to_array(ns["x"]), dtype=np.float32))  # as the TensorFlow half leaves it
    message = judge(ex, ns, cell="x = torch.tensor(x_list, dtype=torch.float32)").message
    assert "01.tf_x" in message and "run this part's cells again" in message, message
    # a cell that itself makes a TensorFlow tensor is told to build it with torch
    ns = {**answer_namespace(ex, None, "torch"), "torch": torch, "tf": tf}
    ns["x"] = tf.constant(np.asarray(to_array(ns["x"]), dtype=np.float32))
    message = judge(ex, ns, cell="x = tf.constant(x_list, dtype=tf.float32)").message
    assert "01.tf_x" not in message and "torch" in message, message


def test_an_answer_bound_anew_by_another_steps_cell_is_judged_by_its_own_cell():
    """04.weights' cell binding `attn_weights_1` anew (to the same numbers) made 04.weights_1's check replay that
    cell, and tell the student that "your cell" computes it from the wrong names (simulation 20): the step's own cell,
    the one that holds the lines the notebook gives there, is what is judged."""
    from helpers.runtime.history import History

    tf = pytest.importorskip("tensorflow")
    ex = spec.get("04.weights_1")
    ns = answer_namespace(ex, None, "tensorflow") | {"tf": tf}
    history = History()
    own = ("attn_weights_1 = tf.nn.softmax(tf.cast(tf.reshape(attn_scores_1, [-1]), tf.float32) / "
           "key_1.shape[-1] ** 0.5)\nprint(attn_weights_1)")
    other = "attn_weights_1 = tf.identity(attn_weights_1)  # kept in step with row 1\nprint(attn_weights)"
    ns["attn_weights"] = ns["attn_weights_1"][None]
    for source in (own, other):
        history.pre(source, ns)
        exec(source, ns)  # noqa: S102 — the cells, run as the notebook runs them
        history.post(source, ns, None)
    outcome = judge(ex, ns, history=history)
    assert outcome.status == "pass", outcome.message


def test_a_size_kept_on_the_class_is_found_and_the_class_is_put_back():
    """Simulation 28: `MultiHeadSelfAttention.d_head = …` in __init__ passed; every new module overwrote it."""
    import torch

    from helpers.runtime.collect import _class_state_shared

    class Shared(torch.nn.Module):
        def __init__(self, d_model):
            super().__init__()
            Shared.width = d_model
            self.w = torch.nn.Parameter(torch.ones(d_model, d_model))

        def forward(self, x):
            return x.reshape(-1, Shared.width) @ self.w

    class Own(Shared):
        def __init__(self, d_model):
            torch.nn.Module.__init__(self)
            self.width = d_model
            self.w = torch.nn.Parameter(torch.ones(d_model, d_model))

        def forward(self, x):
            return x @ self.w

    module = Shared(3)
    x = torch.ones(2, 3)
    said = _class_state_shared(module, [x], {"d_model": 5})
    assert said is not None and said.startswith(("raises", "gives other outputs"))
    assert Shared.width == 3 and torch.equal(module(x), torch.full((2, 3), 3.0))  # the class as it was
    assert _class_state_shared(Own(3), [x], {"d_model": 5}) is None


@pytest.mark.parametrize("seed", [60, 157, 248])
def test_a_plain_float32_cross_attention_passes_on_draws_with_loud_scores(seed):
    """These draws rejected the plain float32 answer (scores of 40 to 200 carry float32 rounding of ~1e-5 into
    outputs near 0; the tolerance was 1e-6), one of them with a wrong cause (`scale_by_other_size`)."""
    import math

    import torch

    def cross_attention(x_dec, x_enc, w_query, w_key, w_value):
        q, k, v = x_dec @ w_query, x_enc @ w_key, x_enc @ w_value
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1]), dim=-1) @ v

    outcome = judge(spec.get("09.cross_attention"), {"cross_attention": cross_attention}, np.random.default_rng(seed))
    assert outcome.status == "pass", outcome.message


@pytest.mark.parametrize("seed", [10_046, 10_192, 50_409, 50_598])
def test_a_plain_float32_tensorflow_self_attention_passes_on_draws_with_loud_scores(seed):
    """These draws rejected the plain float32 answer at atol 1e-6 (the large-score trial's float32 rounding reaching
    outputs near 0 by up to ~4e-5)."""
    from helpers.quiet import quiet_tensorflow

    with quiet_tensorflow():
        import tensorflow as tf

    def self_attention(x, w_query, w_key, w_value):
        q, k, v = x @ w_query, x @ w_key, x @ w_value
        scores = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], tf.float32))
        return tf.nn.softmax(scores, axis=-1) @ v

    outcome = judge(spec.get("04.self_attention"), {"self_attention": self_attention}, np.random.default_rng(seed))
    assert outcome.status == "pass", outcome.message


@pytest.mark.parametrize("seed", [117, 183])
def test_a_plain_float32_self_attention_passes_on_draws_with_loud_or_long_trials(seed):
    """Seed 117 rejected it on the 600-token trial (told `global_max_subtraction`), 183 on the near-limit trial:
    float32 rounding of large scores reaching outputs near 0."""
    import torch

    def self_attention(x, w_query, w_key, w_value):
        q, k, v = x @ w_query, x @ w_key, x @ w_value
        return torch.softmax(q @ k.T / k.shape[-1] ** 0.5, dim=-1) @ v

    outcome = judge(spec.get("02.self_attention"), {"self_attention": self_attention}, np.random.default_rng(seed))
    assert outcome.status == "pass", outcome.message


@pytest.mark.parametrize("float32", [False, True])
def test_a_tensorflow_gradient_is_compared_with_finite_differences(float32):
    """tf.stop_gradient on a softmax's row sums keeps the numbers and changes the gradient; on its row maxima it
    changes neither (the shift cancels). Compared in float64, or in float32 when the function casts to it."""
    from helpers.quiet import quiet_tensorflow
    from helpers.runtime.collect import _grad_mismatch_tf

    with quiet_tensorflow():
        import tensorflow as tf

    def attend(q, k, v, stop_sums):
        s = tf.matmul(q, k, transpose_b=True) / tf.sqrt(tf.cast(tf.shape(k)[-1], tf.float32 if float32 else q.dtype))
        e = tf.exp(s - tf.stop_gradient(tf.reduce_max(s, axis=-1, keepdims=True)))
        sums = tf.reduce_sum(e, axis=-1, keepdims=True)
        return tf.matmul(e / (tf.stop_gradient(sums) if stop_sums else sums), v)

    rng = np.random.default_rng(3)
    inputs = {"q": rng.normal(size=(3, 4)), "k": rng.normal(size=(5, 4)), "v": rng.normal(size=(5, 2))}
    assert _grad_mismatch_tf(lambda q, k, v: attend(q, k, v, False), inputs) == []
    assert _grad_mismatch_tf(lambda q, k, v: attend(q, k, v, True), inputs) == ["q", "k"]


@pytest.mark.parametrize("error, about_numbers", [
    ("ValueError: Expected parameter probs (Tensor of shape (7,)) of distribution Categorical(probs: "
     "torch.Size([7])) to satisfy the constraint Simplex(), but found invalid values", True),
    ("ValueError: math domain error", True),
    ("RuntimeError: Trying to create tensor with negative dimension -3: [-3]", False),
    ("ValueError: negative dimensions are not allowed", False),
    ("RuntimeError: The size of tensor a (4) must match the size of tensor b (5) at non-singleton dimension 1", False),
])
def test_an_error_about_an_inputs_numbers_is_not_blamed_on_its_sizes(error, about_numbers):
    """A replay of other sizes that raised about the numbers it was given (a Categorical of negative scores) says
    nothing about sizes; one that raised about a size (a negative dimension) does."""
    assert bool(spec._VALUE_ERROR.search(error)) is about_numbers


def test_where_a_nan_was_made_is_named_in_the_kernel_and_in_the_grader():
    """A result with NaN or inf where the right one is finite: the trial is run once more with its operations watched
    (helpers.runtime.nonfinite), and the message names what made the first one (an exponential that overflowed, a row
    of exponentials that all underflowed to 0, a row whose every score is −∞), the same in the grader. A function
    whose NaN comes from something else is not told any of those."""
    torch = pytest.importorskip("torch")
    import math

    from helpers.runtime.collect import collect
    from helpers.runtime.nonfinite import origin

    s = torch.tensor([[1.0, 2.0, 300.0], [-500.0, -400.0, -300.0]])
    seen = origin(lambda: (lambda e: e / e.sum(-1, keepdim=True))(s.exp()), "torch")
    assert seen["nan"]["kind"] == "inf_by_inf" and seen["nan"]["after"]["value"] == 300.0
    seen = origin(lambda: torch.sqrt(s), "torch")
    assert seen["nan"]["kind"] == "negative" and seen["nan"]["value"] == -500.0
    assert origin(lambda: torch.softmax(s, -1), "torch") is None  # nothing made
    seen = origin(lambda: (lambda e: e / e.sum(-1, keepdims=True))(np.exp(s.numpy().astype(float) * 3)), "numpy")
    assert seen["nan"]["kind"] == "inf_by_inf" and seen["inf"]["op"] == "exp"
    assert np.geterrcall() is None and np.geterr()["over"] == "warn"  # NumPy's error handling is put back

    head = ("def cross_attention(x_dec, x_enc, w_query, w_key, w_value):\n"
            "    q, k, v = x_dec @ w_query, x_enc @ w_key, x_enc @ w_value\n"
            "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n")
    bodies = {
        "exp_overflow": "    e = torch.exp(s - s.median(dim=-1, keepdim=True).values)\n",
        "exp_underflow": "    e = torch.exp(s - s.amax(dim=-1, keepdim=True).clamp(min=0))\n",
        "fully_masked_row": "    hide = s.amax(-1, keepdim=True) < 0\n"
                            "    return torch.softmax(s.masked_fill(hide, float('-inf')), -1) @ v\n",
        "none": "    e = torch.exp(s - s.amax(dim=-1, keepdim=True))\n    e = e * (1 + 0 * torch.sqrt(s))\n",
    }
    ex = spec.get("09.cross_attention")
    for code, body in bodies.items():
        ns = {"torch": torch, "math": math}
        exec(head + body + "    return (e / e.sum(dim=-1, keepdim=True)) @ v\n", ns)
        plan = spec.make_plan(ex, np.random.default_rng(0))
        record = collect(plan.data, ns)
        here, there = spec.evaluate(ex, plan, record), _round_trip(ex, plan, record)
        assert here.status == "fail", here.message
        assert (there.status, there.diagnosis, there.message) == (here.status, here.diagnosis, here.message)
        made = spec._nonfinite_origin(ex, record, record["answers"], plan.inputs, "")
        if code == "none":  # the square root of a negative score: said, and no catalogued cause named
            assert made[0] is None and "`sqrt` of a negative number" in made[1], made
            assert here.diagnosis is None and "`sqrt` of a negative number" in here.message, here.message
        else:  # (a catalogued mistake the numbers show comes first: no maximum subtracted is `unstable_softmax`)
            assert made[0] == code, made
            assert here.diagnosis in (code, "unstable_softmax"), (code, here.message)
    ex = spec.get("05.softmax")
    for code, body in {"exp_overflow": "    e = np.exp(s)\n",
                       "exp_underflow": "    e = np.exp(s - np.maximum(s.max(axis=-1, keepdims=True), 0))\n"}.items():
        ns = {"np": np}
        exec("def softmax(s):\n" + body + "    return e / e.sum(axis=-1, keepdims=True)\n", ns)
        plan = spec.make_plan(ex, np.random.default_rng(0))
        record = collect(plan.data, ns)
        here, there = spec.evaluate(ex, plan, record), _round_trip(ex, plan, record)
        assert (there.status, there.diagnosis, there.message) == (here.status, here.diagnosis, here.message)
        assert here.status == "fail" and here.diagnosis in (code, "unstable_softmax"), here.message


def test_a_function_that_takes_a_plain_number_has_its_gradient_checked_and_its_inputs_flags_kept():
    """The gradient check of a torch function step runs where the function also takes a plain number (06's `p`):
    an autograd.Function whose backward forgets 1 / (1 − p) is gradient_wrong, the right one passes; and a function
    that switches off `requires_grad` of a tensor it is given is mutates_input. The same verdicts in the grader."""
    torch = pytest.importorskip("torch")
    import math

    from helpers.runtime.collect import collect

    drop = ("def inverted_dropout(weights, keep, p):\n"
            "    class Drop(torch.autograd.Function):\n"
            "        @staticmethod\n"
            "        def forward(ctx, w):\n"
            "            return w * keep / (1 - p)\n"
            "        @staticmethod\n"
            "        def backward(ctx, grad):\n"
            "            return grad * keep{}\n"
            "    return Drop.apply(weights)\n")
    cross = ("def cross_attention(x_dec, x_enc, w_query, w_key, w_value):\n"
             "    {}\n"
             "    q, k, v = x_dec @ w_query, x_enc @ w_key, x_enc @ w_value\n"
             "    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v\n")
    cases = ((spec.get("06.inverted_dropout"), drop.format(""), "gradient_wrong"),
             (spec.get("06.inverted_dropout"), drop.format(" / (1 - p)"), None),
             (spec.get("09.cross_attention"), cross.format("w_key.requires_grad_(False)"), "mutates_input"),
             (spec.get("09.cross_attention"), cross.format("pass"), None))
    for ex, code, diagnosis in cases:
        ns = {"torch": torch, "math": math}
        exec(code, ns)
        plan = spec.make_plan(ex, np.random.default_rng(0))
        record = collect(plan.data, ns)
        here, there = spec.evaluate(ex, plan, record), _round_trip(ex, plan, record)
        assert (here.status, here.diagnosis) == (("pass", None) if diagnosis is None else ("fail", diagnosis)), (
            ex.id, here.message)
        assert (there.status, there.diagnosis, there.message) == (here.status, here.diagnosis, here.message)


def test_no_argument_a_check_hands_a_function_takes_the_id_of_a_freed_one():
    """A function that keeps results by `id(x)` is judged on what it computes, not on the allocator: within one
    check (its deferred measurements too), no object handed to the function has the id of an earlier one that was
    freed meanwhile. Seen by a right function that notes the id of every `x` it is handed, with a weak reference."""
    torch = pytest.importorskip("torch")
    import math
    import weakref

    from helpers.runtime.collect import collect

    ex = spec.get("06.multi_head_attention")
    seen, clashes = {}, []

    def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads):
        for arg in (x, w_query, w_key, w_value, w_out):
            ref = seen.get(id(arg))
            if ref is not None and ref() is not arg:
                clashes.append(tuple(arg.shape))
            seen[id(arg)] = weakref.ref(arg)
        b, n, d = x.shape
        q, k, v = ((x @ w).reshape(b, n, num_heads, d // num_heads).transpose(1, 2)
                   for w in (w_query, w_key, w_value))
        s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, n, d) @ w_out

    for seed in range(3):
        seen.clear()
        plan = spec.make_plan(ex, np.random.default_rng(seed))
        record = collect(plan.data, {"multi_head_attention": multi_head_attention}, defer=True)
        assert spec.evaluate(ex, plan, record).status == "pass"
        record.resolved()
        assert len(seen) > 20, "the function is called on many objects"
    assert clashes == []


def test_a_cache_keyed_by_id_is_named_whatever_ids_the_allocator_hands_out():
    """A function that keeps its projections by `id(x)` is right on every new array and wrong on an array whose
    numbers changed in place. Every object a check hands the function stays alive until the next check, so no new
    array takes the id of a freed one the cache remembers: the verdict is the same on every run (it was not, and
    the function passed about one run in three), in the kernel and in the grader."""
    torch = pytest.importorskip("torch")
    import math

    from helpers.runtime.collect import collect

    ex = spec.get("06.multi_head_attention")
    ns = {"torch": torch, "math": math, "np": np}
    source = ("def split_heads(x, h):\n"
              "    b, s, d = x.shape\n"
              "    return x.reshape(b, s, h, d // h).transpose(1, 2)\n"
              "def merge_heads(x):\n"
              "    b, h, s, d = x.shape\n"
              "    return x.transpose(1, 2).reshape(b, s, h * d)\n"
              "def multi_head_attention(x, w_query, w_key, w_value, w_out, num_heads):\n"
              "    cache = multi_head_attention.__dict__.setdefault('projections', {})\n"
              "    if id(x) not in cache:\n"
              "        cache[id(x)] = [split_heads(x @ w, num_heads) for w in (w_query, w_key, w_value)]\n"
              "    q, k, v = cache[id(x)]\n"
              "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
              "    return merge_heads(torch.softmax(s, dim=-1) @ v) @ w_out\n")
    verdicts = []
    for seed in range(6):
        exec(source, ns)  # (a new function, its cache empty, as a student's cell run again makes)
        plan = spec.make_plan(ex, np.random.default_rng(seed))
        record = collect(plan.data, ns, defer=True)
        here = spec.evaluate(ex, plan, record)
        there = _round_trip(ex, plan, record)
        verdicts.append((here.diagnosis, there.diagnosis))
    assert verdicts == [("stale_value", "stale_value")] * 6


def test_a_one_hot_shortcut_for_a_clear_winner_fails_on_every_draw():
    """02.weights_2_qk written as the softmax, replaced by a one-hot of the top score once it leads the next by more
    than 8: right to the step's tolerance wherever the lead is below 8 or far above 14, so a replay whose top score
    leads by 12 is in every plan (it passed on some draws without one)."""
    torch = pytest.importorskip("torch")
    ex = spec.get("02.weights_2_qk")
    cell = ("scaled = attn_scores_2_qk / keys.shape[-1] ** 0.5\n"
            "attn_weights_2_qk = torch.softmax(scaled, dim=0)\n"
            "top = scaled.topk(min(2, scaled.numel())).values\n"
            "if top[0] - top[-1] > 8:\n"
            "    attn_weights_2_qk = torch.nn.functional.one_hot(scaled.argmax(), scaled.numel()).to(scaled.dtype)\n")
    ns = answer_namespace(ex, None, "torch") | {"torch": torch}
    exec(cell, ns)
    for seed in range(8):
        outcome = judge(ex, ns, np.random.default_rng(seed), cell=cell)
        assert outcome.status == "fail", (seed, outcome.message)


def test_the_names_a_cell_writes_into_in_place_are_found():
    """What the collector looks for views of, and the corpus runner restores: the root name of whatever an in-place
    method, an augmented assignment, an indexed assignment or `nn.init.*_` writes into; not a plain rebinding, not a
    name only read."""
    from helpers.runtime.cells import inplace_targets

    cell = ("c = query.zero_()\nfor i in range(3):\n    c += w[i] * x[i]\nq[0] = 1\nnn.init.zeros_(k[1])\n"
            "a.b[0].mul_(2)\ny = x + 1\nz = torch.zeros(3)\n")
    assert inplace_targets(cell) == {"query", "c", "q", "k", "a"}
    assert inplace_targets("y = x.clone()\nprint(x.sum())") == set()
    assert inplace_targets("def f(:") == set()  # a cell that does not parse: nothing claimed
