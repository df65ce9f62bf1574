"""helpers.plotting: the figures show the numbers they are given, in the right places.

Figures render with Agg; the tests read the artists back (every drawn value carries a gid,
see ``helpers.plotting._Board``) rather than comparing pixels.
"""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg", force=True)

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from helpers.plotting import (  # noqa: E402
    ROLE_COLOURS,
    attention_heatmap,
    attention_numbers,
    attention_steps_figure,
    matrix_product_figure,
    save_attention_gif,
    scores_figure,
    softmax_figure,
    weighted_values_figure,
)

# seed 000's numbers
X = [[1, 0, 1, 0], [0, 2, 0, 2], [1, 1, 1, 1]]
W_KEY = [[0, 0, 1], [1, 1, 0], [0, 1, 0], [1, 1, 0]]
W_QUERY = [[1, 0, 1], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
W_VALUE = [[0, 2, 0], [0, 3, 0], [1, 0, 3], [1, 1, 0]]
KEYS = [[0, 1, 1], [4, 4, 0], [2, 3, 1]]
SCORES = [[2, 4, 4], [4, 16, 12], [4, 12, 10]]
ROUNDED = [[0.0, 0.5, 0.5], [0.0, 1.0, 0.0], [0.0, 0.9, 0.1]]
INPUTS = ["input 1", "input 2", "input 3"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def texts(fig) -> dict:
    return {t.get_gid(): t for ax in fig.axes for t in ax.texts if t.get_gid()}


def grid(fig, name: str, shape) -> list[list[str]]:
    found = texts(fig)
    return [[found[f"{name}[{i},{j}]"].get_text() for j in range(shape[1])] for i in range(shape[0])]


def patches(fig, prefix: str) -> dict:
    return {p.get_gid(): p for ax in fig.axes for p in ax.patches if (p.get_gid() or "").startswith(prefix)}


def inside(rect: Rectangle, text) -> bool:
    x, y = text.get_position()
    x0, y0 = rect.get_xy()
    return x0 < x < x0 + rect.get_width() and y0 < y < y0 + rect.get_height()


# --- numbers -----------------------------------------------------------------------------------


def test_attention_numbers_reproduce_the_seed():
    nums = attention_numbers(X, W_QUERY, W_KEY, W_VALUE)
    np.testing.assert_array_equal(nums["keys"], KEYS)
    np.testing.assert_array_equal(nums["scores"], SCORES)
    np.testing.assert_allclose(nums["weights"][0], [0.063379, 0.468311, 0.468311], atol=1e-6)
    np.testing.assert_allclose(nums["outputs"][0], [1.9366, 6.6831, 1.5951], atol=1e-4)
    scaled = attention_numbers(X, W_QUERY, W_KEY, W_VALUE, scale=True)["scores"]
    np.testing.assert_allclose(scaled, np.array(SCORES) / np.sqrt(3))


def test_attention_numbers_name_a_shape_mismatch():
    with pytest.raises(ValueError, match=r"x has 4 columns .* w_value has 3 rows"):
        attention_numbers(X, W_QUERY, W_KEY, W_VALUE[:3])
    with pytest.raises(ValueError, match="same size"):
        attention_numbers(X, W_KEY, [row[:2] for row in W_QUERY], W_VALUE)


def test_importing_plotting_does_not_import_matplotlib():
    code = "import sys, helpers.plotting; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --- heatmap ---------------------------------------------------------------------------------


def test_heatmap_writes_each_weight_in_its_cell_with_a_readable_colour():
    w = attention_numbers(X, W_QUERY, W_KEY, W_VALUE)["weights"]
    ax = attention_heatmap(w, INPUTS, INPUTS, title="attention weights")
    cells = {t.get_gid(): t for t in ax.texts}
    assert len(cells) == 9
    for i in range(3):
        for j in range(3):
            t = cells[f"cell[{i},{j}]"]
            assert t.get_text() == f"{w[i, j]:.2f}"
            assert t.get_position() == (j, i)  # column = key, row = query
    assert cells["cell[1,1]"].get_text() == "0.98"
    assert matplotlib.colors.to_hex(cells["cell[1,1]"].get_color()) == "#ffffff"  # dark cell, white text
    assert matplotlib.colors.to_hex(cells["cell[0,0]"].get_color()) == "#000000"  # light cell, black text
    assert [t.get_text() for t in ax.get_xticklabels()] == INPUTS
    assert [t.get_text() for t in ax.get_yticklabels()] == INPUTS
    assert ax.get_title() == "attention weights"
    assert "key" in ax.get_xlabel() and "query" in ax.get_ylabel()
    assert len(ax.figure.axes) == 2  # the heatmap and its colorbar
    assert ax.images[0].get_clim() == (0.0, 1.0)


def test_heatmap_draws_into_a_given_axes_and_scales_scores_to_their_range():
    fig, (left, right) = plt.subplots(1, 2)
    ax = attention_heatmap(SCORES, ax=right, fmt=".0f", colorbar=False)
    assert ax is right and not left.texts
    assert ax.images[0].get_clim() == (2.0, 16.0)
    assert [t.get_text() for t in ax.texts] == [str(v) for row in SCORES for v in row]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["query 1", "query 2", "query 3"]
    assert len(fig.axes) == 2


def test_heatmap_accepts_tensors_and_can_leave_the_cells_empty():
    torch = pytest.importorskip("torch")
    ax = attention_heatmap(torch.tensor(ROUNDED), fmt=None)
    assert len(ax.texts) == 0
    np.testing.assert_allclose(ax.images[0].get_array(), ROUNDED)


def test_heatmap_rejects_bad_input_clearly():
    with pytest.raises(ValueError, match="2-d"):
        attention_heatmap(np.zeros((2, 3, 3)))
    with pytest.raises(ValueError, match="2 labels for 3"):
        attention_heatmap(ROUNDED, queries_labels=["a", "b"])
    with pytest.raises(ValueError, match="ragged"):
        attention_heatmap([[1, 2], [3]])


# --- matrix product ------------------------------------------------------------------------


def product(**kw):
    return matrix_product_figure(X, W_KEY, names=("x", "w_key", "keys"), **kw)


def test_product_writes_the_three_matrices_and_the_signs():
    fig = product(colors=("input", "w_key", "key"), row_labels=INPUTS)
    assert grid(fig, "x", (3, 4)) == [[str(v) for v in row] for row in X]
    assert grid(fig, "w_key", (4, 3)) == [[str(v) for v in row] for row in W_KEY]
    assert grid(fig, "keys", (3, 3)) == [[str(v) for v in row] for row in KEYS]
    found = texts(fig)
    assert [found[f"title:{n}"].get_text() for n in ("x", "w_key", "keys")] == ["x", "w_key", "keys"]
    assert found["sign:@"].get_text() == "@" and found["sign:="].get_text() == "="
    assert [found[f"label:x:{i}"].get_text() for i in range(3)] == INPUTS
    # the signs sit between the matrices
    x_of = {gid: t.get_position()[0] for gid, t in found.items()}
    assert x_of["x[0,3]"] < x_of["sign:@"] < x_of["w_key[0,0]"]
    assert x_of["w_key[0,2]"] < x_of["sign:="] < x_of["keys[0,0]"]
    tile = patches(fig, "tile:keys[0,0]")["tile:keys[0,0]"]
    assert matplotlib.colors.to_hex(tile.get_facecolor()) == ROLE_COLOURS["key"]
    assert not patches(fig, "highlight:")


def test_product_highlight_frames_the_row_the_column_and_the_cell():
    i, j = 1, 2
    fig = product(highlight=(i, j))
    found = texts(fig)
    boxes = patches(fig, "highlight:")
    assert set(boxes) == {"highlight:x:row:1", "highlight:w_key:col:2", "highlight:keys:cell:1,2"}

    def framed(box, name, shape):
        cells = [(a, b) for a in range(shape[0]) for b in range(shape[1])]
        return {(a, b) for a, b in cells if inside(boxes[box], found[f"{name}[{a},{b}]"])}

    assert framed("highlight:x:row:1", "x", (3, 4)) == {(1, b) for b in range(4)}
    assert framed("highlight:w_key:col:2", "w_key", (4, 3)) == {(a, 2) for a in range(4)}
    assert framed("highlight:keys:cell:1,2", "keys", (3, 3)) == {(1, 2)}
    assert found["caption"].get_text() == "row 2 of x · column 3 of w_key = 0×1 + 2×0 + 0×0 + 2×0 = 0"


def test_product_of_floats_uses_two_decimals_and_no_negative_zero():
    fig = matrix_product_figure([[0.5, -0.25]], [[1e-9], [2e-9]], result=[[-0.001]], highlight=(0, 0))
    assert grid(fig, "A", (1, 2)) == [["0.50", "-0.25"]]
    assert grid(fig, "A @ B", (1, 1)) == [["0.00"]]
    assert texts(fig)["caption"].get_text().endswith("= 0.00")


def test_product_draws_a_given_result_and_promotes_vectors():
    fig = matrix_product_figure([1, 0, 2], np.array(KEYS).T, result=[2, 4, 4], names=("query 1", "keys.T", "scores"))
    assert grid(fig, "query 1", (1, 3)) == [["1", "0", "2"]]
    assert grid(fig, "scores", (1, 3)) == [["2", "4", "4"]]
    fig = matrix_product_figure([[1, 2]], [3, 4])  # a 1-d right factor is a column
    assert grid(fig, "B", (2, 1)) == [["3"], ["4"]] and grid(fig, "A @ B", (1, 1)) == [["11"]]


def test_product_rejects_mismatched_shapes_clearly():
    with pytest.raises(ValueError, match=r"cannot multiply x \(3, 4\) by w_key \(3, 3\): x has 4 columns"):
        matrix_product_figure(X, W_KEY[:3], names=("x", "w_key", "keys"))
    with pytest.raises(ValueError, match=r"keys should have shape \(3, 3\)"):
        product(result=np.zeros((3, 4)))
    with pytest.raises(ValueError, match="outside the product"):
        product(highlight=(3, 0))
    with pytest.raises(ValueError, match="3 entries"):
        matrix_product_figure(X, W_KEY, names=("x", "w_key"))
    assert plt.get_fignums() == []  # nothing half-drawn is left behind


# --- the steps -----------------------------------------------------------------------------


def test_qkv_step_shows_inputs_and_their_projections():
    fig = attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, steps="qkv")
    assert grid(fig, "x", (3, 4)) == [[str(v) for v in row] for row in X]
    assert grid(fig, "keys", (3, 3)) == [[str(v) for v in row] for row in KEYS]
    assert grid(fig, "queries", (3, 3)) == [["1", "0", "2"], ["2", "2", "2"], ["2", "1", "3"]]
    assert grid(fig, "values", (3, 3)) == [["1", "2", "3"], ["2", "8", "0"], ["2", "6", "3"]]
    found = texts(fig)
    assert [found[f"label:x:{i}"].get_text() for i in range(3)] == INPUTS
    assert found["subtitle:keys"].get_text() == "x @ w_key"
    assert "step:scores" not in found


@pytest.mark.parametrize("query, scores", [(0, ["2", "4", "4"]), (1, ["4", "16", "12"])])
def test_scores_step_puts_the_query_against_every_key(query, scores):
    fig = attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, query=query, steps="scores")
    q = [["1", "0", "2"], ["2", "2", "2"]][query]
    assert grid(fig, "query", (3, 3)) == [q] * 3
    assert grid(fig, "keys", (3, 3)) == [[str(v) for v in row] for row in KEYS]
    assert [row[0] for row in grid(fig, "scores", (3, 1))] == scores
    found = texts(fig)
    assert found["step:scores"].get_text() == f"2 · scores: query {query + 1} against every key"
    assert found["label:keys:2"].get_text() == "key of input 3"
    tile = patches(fig, "tile:query[0,0]")["tile:query[0,0]"]
    assert matplotlib.colors.to_hex(tile.get_facecolor()) == ROLE_COLOURS["query"]


def test_softmax_step_shows_the_row_becoming_weights():
    fig = attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, steps=["softmax"])
    assert [r[0] for r in grid(fig, "scores", (3, 1))] == ["2", "4", "4"]
    assert [r[0] for r in grid(fig, "exp", (3, 1))] == ["0.14", "1.00", "1.00"]
    assert [r[0] for r in grid(fig, "weights", (3, 1))] == ["0.06", "0.47", "0.47"]
    assert texts(fig)["note:weights_sum"].get_text() == "sum = 1.00"
    fig = softmax_figure([4, 16, 12], fmt=".4f")
    assert [r[0] for r in grid(fig, "weights", (3, 1))] == ["0.0000", "0.9820", "0.0180"]


def test_weighted_step_sums_to_the_output():
    fig = attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, steps="weighted", labels=["a", "b", "c"])
    assert grid(fig, "weighted", (3, 3))[1] == ["0.94", "3.75", "0.00"]
    assert grid(fig, "output", (1, 3)) == [["1.94", "6.68", "1.60"]]
    found = texts(fig)
    assert found["title:output"].get_text() == "= output 1"
    assert [found[f"label:weights:{i}"].get_text() for i in range(3)] == ["a", "b", "c"]


def test_weighted_values_figure_reproduces_the_seed_outputs_from_rounded_weights():
    values = attention_numbers(X, W_QUERY, W_KEY, W_VALUE)["values"]
    for q, want in enumerate([["2.00", "7.00", "1.50"], ["2.00", "8.00", "0.00"], ["2.00", "7.80", "0.30"]]):
        fig = weighted_values_figure(ROUNDED, values, query=q)
        assert grid(fig, "output", (1, 3)) == [want]
        assert texts(fig)["title:output"].get_text() == f"= output {q + 1}"
    with pytest.raises(ValueError, match="one weight per value row"):
        weighted_values_figure([0.5, 0.5], values)


def test_scores_figure_from_the_tensors():
    nums = attention_numbers(X, W_QUERY, W_KEY, W_VALUE)
    fig = scores_figure(nums["queries"], nums["keys"], query=2)
    assert [r[0] for r in grid(fig, "scores", (3, 1))] == ["4", "12", "10"]
    with pytest.raises(ValueError, match="same size"):
        scores_figure(nums["queries"], nums["keys"][:, :2])


def test_all_steps_stack_in_order():
    fig = attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, query=2)
    found = texts(fig)
    ys = [found[f"step:{s}"].get_position()[1] for s in ("qkv", "scores", "softmax", "weighted")]
    assert ys == sorted(ys)  # top to bottom (y grows downwards)
    assert found["step:weighted"].get_text().endswith("output 3")
    assert grid(fig, "output", (1, 3)) == [["2.00", "7.76", "0.36"]]


def test_steps_reject_bad_arguments():
    with pytest.raises(ValueError, match="unknown step"):
        attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, steps="outputs")
    with pytest.raises(ValueError, match="query=3 does not exist"):
        attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, query=3)
    with pytest.raises(ValueError, match="2 labels for 3"):
        attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, labels=["a", "b"])


# --- the GIF -----------------------------------------------------------------------------------


def test_gif_has_one_frame_per_step_each_adding_ink(tmp_path):
    from PIL import Image, ImageChops

    path = save_attention_gif(tmp_path / "attention.gif", X, W_QUERY, W_KEY, W_VALUE, query=0, fps=2)
    assert path == tmp_path / "attention.gif"
    assert plt.get_fignums() == []  # drawn off pyplot: nothing pops up in a notebook
    with Image.open(path) as im:
        assert im.format == "GIF" and im.n_frames == 4
        assert im.info["duration"] == 500
        assert max(im.size) < 800  # small: about 590 x 750 at the default dpi
        frames = []
        for k in range(im.n_frames):
            im.seek(k)
            frames.append(im.convert("L"))
    ink = [sum(f.histogram()[:200]) for f in frames]  # pixels darker than the background
    assert ink == sorted(ink) and len(set(ink)) == 4  # every frame adds a panel
    assert ImageChops.difference(frames[0], frames[-1]).getbbox() is not None
    assert path.stat().st_size < 150_000


def test_gif_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"\.gif"):
        save_attention_gif(tmp_path / "a.png", X, W_QUERY, W_KEY, W_VALUE)
    with pytest.raises(ValueError, match="fps"):
        save_attention_gif(tmp_path / "a.gif", X, W_QUERY, W_KEY, W_VALUE, fps=0)
    assert not list(tmp_path.iterdir())


# --- the grader's mode: arguments checked, nothing drawn ------------------------------------------


BAD_CALLS = [  # (call, the error's text): each raises with DRAW on (see the tests above) and must with it off
    (lambda d: attention_heatmap(np.zeros((2, 3, 3))), "2-d"),
    (lambda d: attention_heatmap(ROUNDED, queries_labels=["a", "b"]), "2 labels for 3"),
    (lambda d: attention_heatmap(ROUNDED, fmt=".2q"), "format"),
    (lambda d: matrix_product_figure(X, KEYS), "cannot multiply"),
    (lambda d: matrix_product_figure(X, W_KEY, highlight=(5, 0)), "outside the product"),
    (lambda d: attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, steps="outputs"), "unknown step"),
    (lambda d: attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, query=3), "query=3 does not exist"),
    (lambda d: attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE, labels=["a", "b"]), "2 labels for 3"),
    (lambda d: scores_figure(KEYS, X), "same size"),
    (lambda d: softmax_figure(np.zeros((2, 2, 2))), "1-d or 2-d"),
    (lambda d: weighted_values_figure([0.5, 0.5], KEYS), "one weight per value"),
    (lambda d: save_attention_gif(d / "a.png", X, W_QUERY, W_KEY, W_VALUE), r"\.gif"),
    (lambda d: save_attention_gif(d / "a.gif", X, W_QUERY, W_KEY, W_VALUE, labels=["a"]), "1 labels for 3|labels"),
]


@pytest.mark.parametrize("draw", [True, False], ids=["drawn", "not drawn"])
@pytest.mark.parametrize("k", range(len(BAD_CALLS)))
def test_bad_arguments_raise_the_same_whether_or_not_figures_are_drawn(monkeypatch, tmp_path, draw, k):
    import helpers.plotting as plotting

    monkeypatch.setattr(plotting, "DRAW", draw)
    call, text = BAD_CALLS[k]
    with pytest.raises(ValueError, match=text):
        call(tmp_path)
    plt.close("all")


def test_without_drawing_the_figures_are_blank_and_nothing_reaches_pyplot(monkeypatch, tmp_path):
    from PIL import Image

    import helpers.plotting as plotting

    plt.close("all")
    monkeypatch.setattr(plotting, "DRAW", False)
    figures = [matrix_product_figure(X, W_KEY), attention_steps_figure(X, W_QUERY, W_KEY, W_VALUE),
               scores_figure(KEYS, KEYS), softmax_figure(SCORES), weighted_values_figure(ROUNDED, KEYS)]
    assert all(not f.axes and not f.patches and not f.texts for f in figures)
    ax = attention_heatmap(ROUNDED)
    assert not ax.images and not ax.texts  # an empty Axes: `ax.set_ylabel(...)` after it still works
    ax.set_ylabel("")
    _, given = plt.subplots()
    assert attention_heatmap(ROUNDED, ax=given) is given and not given.images
    assert plt.get_fignums() == [given.figure.number]  # only the student's own figure
    path = save_attention_gif(tmp_path / "a.gif", X, W_QUERY, W_KEY, W_VALUE)
    with Image.open(path) as im:  # the notebook reads the file back: it must be a GIF
        assert im.format == "GIF" and im.size == (1, 1)
    plt.close("all")


def test_the_grader_sandbox_turns_drawing_off():
    code = ("import helpers.plotting as p; from helpers.grading import zygote; assert p.DRAW; "
            "zygote.preload(1, frameworks=()); print(p.DRAW)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
