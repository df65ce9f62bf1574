"""Figures drawn from the numbers: attention heatmaps, matrix products and the steps of self-attention.

Every function accepts PyTorch or TensorFlow tensors, NumPy arrays or nested lists (through
:func:`helpers.convert.to_array`) and draws the values it is given, written in the cells, so a
figure can be checked against the printed tensors. Nothing is downloaded and nothing needs a
display: the figures render with any matplotlib backend, Agg included.

matplotlib is imported inside the functions, so ``import helpers`` stays cheap.

    attention_heatmap(weights, queries_labels, keys_labels)          -> Axes
    matrix_product_figure(a, b, names=("x", "w_key", "keys"), highlight=(0, 1))  -> Figure
    attention_steps_figure(x, w_query, w_key, w_value, query=0, steps="scores")   -> Figure
    save_attention_gif(path, x, w_query, w_key, w_value, query=0)     -> Path of the GIF

The step figures follow the picture of the illustrated walk-through: inputs -> keys, queries
and values; the scores of one query against every key; the softmax of that row; the values
weighted by it, and their sum, the output. Colours name the roles (:data:`ROLE_COLOURS`):
keys orange, queries red, values purple, scores and weights blue, weighted values yellow,
outputs green.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .convert import to_array

__all__ = [
    "ROLE_COLOURS",
    "STEPS",
    "attention_heatmap",
    "attention_numbers",
    "attention_steps_figure",
    "matrix_product_figure",
    "save_attention_gif",
    "scores_figure",
    "softmax_figure",
    "weighted_values_figure",
]

# Cell fills per role. Light enough for black text on every one of them.
ROLE_COLOURS: dict[str, str] = {
    "input": "#b7dfa6",  # green
    "key": "#f9b26c",  # orange
    "query": "#f08c8c",  # red
    "value": "#c4aedf",  # purple
    "score": "#9ccbec",  # blue
    "weight": "#9ccbec",  # blue: the softmax of the scores
    "exp": "#cfe5f5",  # light blue: exp(score - max)
    "weighted": "#f7df7c",  # yellow: weight x value
    "output": "#7cc47a",  # green, darker than the inputs
    "w_key": "#fde0c2",  # the weight matrices: tints of their role
    "w_query": "#f9d4d4",
    "w_value": "#e6dcf2",
    "plain": "#dde3ea",  # grey-blue, for matrices without a role
}
HIGHLIGHT = "#1b1b1b"
_INK = "#2b2b2b"  # brackets and signs
_MUTED = "#6b6b6b"  # shapes and notes

# The steps of one query's computation, in order.
STEPS = ("qkv", "scores", "softmax", "weighted")
STEP_TITLES = {
    "qkv": "1 · every input gets a key, a query and a value",
    "scores": "2 · scores: query {q} against every key",
    "softmax": "3 · softmax of query {q}'s scores",
    "weighted": "4 · weighted values, summed: output {q}",
}

Fmt = str | Callable[[float], str] | None

# The grader sets this to False in its sandbox: nobody sees a figure there, so the functions below
# still check their arguments (a wrong one raises as it would in the notebook) but draw nothing.
DRAW = True

_UNIT = 0.42  # inches per cell of the step figures
_FONT = 10.5  # points, values in cells
_CHAR = 0.2  # rough width of a character at _FONT, in cells (used to size cells and labels)


# --- small utilities ----------------------------------------------------------------------


def _matrix(obj: Any, name: str, ndim: int | tuple[int, ...] = 2) -> np.ndarray:
    """``obj`` as a float array; a 1-d array becomes a row when 2-d is wanted."""
    arr = to_array(obj, name, finite=False)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if arr.ndim == 1 and 2 in allowed and 1 not in allowed:
        arr = arr[None, :]
    if arr.ndim not in allowed:
        want = " or ".join(f"{n}-d" for n in allowed)
        raise ValueError(f"`{name}` must be {want}; it has shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError(f"`{name}` is empty (shape {arr.shape}); there is nothing to draw.")
    return arr


def _blank_figure():
    """What a figure function returns when ``DRAW`` is off: an empty Figure outside pyplot."""
    from matplotlib.figure import Figure

    return Figure()


def _auto_fmt(arr: np.ndarray) -> str:
    """Whole numbers without decimals, anything else with two."""
    finite = arr[np.isfinite(arr)]
    return ".0f" if finite.size and np.allclose(finite, np.round(finite), rtol=0, atol=1e-9) else ".2f"


def _formatter(fmt: Fmt, arr: np.ndarray) -> Callable[[float], str]:
    if callable(fmt):
        return fmt
    spec = _auto_fmt(arr) if fmt is None else fmt

    def f(v: float) -> str:
        if not math.isfinite(v):
            return str(v)
        s = format(v, spec)
        if s.startswith("-") and float(s) == 0:  # -0.00 reads as a sign error; it is 0
            s = s[1:]
        return s

    return f


def _colour(c: str) -> str:
    return ROLE_COLOURS.get(c, c)


def _labels(labels: Sequence[str] | None, n: int, what: str, default: str = "input {}") -> list[str]:
    if labels is None:
        return [default.format(i + 1) for i in range(n)]
    labels = [str(s) for s in labels]
    if len(labels) != n:
        raise ValueError(f"{what}: {len(labels)} labels for {n} rows/columns.")
    return labels


def _text_width(s: str) -> float:
    return _CHAR * len(s)


def _pyplot_figure():
    import matplotlib.pyplot as plt

    return plt.figure()


# --- a board: matrices drawn as tiles in cell units, y pointing down -----------------------


class _Board:
    """Draws tiles, texts and signs on one borderless Axes and keeps track of their extent.

    Every artist gets a ``gid`` so tests (and curious students) can find it:
    ``"<name>[i,j]"`` for the value in a cell, ``"title:<name>"``, ``"label:<name>:<i>"``,
    ``"highlight:<name>:row:<i>"`` / ``":col:<j>"`` / ``":cell:<i>,<j>"``, ``"caption"``.
    """

    def __init__(self, fig):
        self.fig = fig
        self.ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        self.ax.set_axis_off()
        self.bounds = [math.inf, math.inf, -math.inf, -math.inf]
        self.groups: list[list] = [[]]

    def new_group(self) -> None:
        self.groups.append([])

    def _keep(self, artist, x0: float, y0: float, x1: float, y1: float):
        b = self.bounds
        self.bounds = [min(b[0], x0), min(b[1], y0), max(b[2], x1), max(b[3], y1)]
        self.groups[-1].append(artist)
        return artist

    def text(self, x: float, y: float, s: str, *, gid: str | None = None, size: float = _FONT,
             ha: str = "center", va: str = "center", width: float | None = None, **kw):
        t = self.ax.text(x, y, s, ha=ha, va=va, fontsize=size, gid=gid, color=kw.pop("color", _INK), **kw)
        w = _text_width(s) * size / _FONT * (1.12 if kw.get("fontweight") == "bold" else 1) if width is None else width
        x0 = {"center": x - w / 2, "left": x, "right": x - w}[ha]
        return self._keep(t, x0, y - 0.35, x0 + w, y + 0.35)

    def rect(self, x: float, y: float, w: float, h: float, *, gid: str | None = None, **kw):
        from matplotlib.patches import Rectangle

        r = Rectangle((x, y), w, h, gid=gid, **kw)
        self.ax.add_patch(r)
        return self._keep(r, x, y, x + w, y + h)

    def line(self, xs: Sequence[float], ys: Sequence[float], **kw):
        (ln,) = self.ax.plot(xs, ys, color=kw.pop("color", _INK), lw=kw.pop("lw", 1.2),
                             solid_capstyle="butt", **kw)
        return self._keep(ln, min(xs), min(ys), max(xs), max(ys))

    def cell_width(self, texts: Sequence[str]) -> float:
        return max(1.0, max(_text_width(s) for s in texts) + 0.45)

    def matrix(self, arr: np.ndarray, x: float, y: float, *, name: str, colour: str, fmt: Fmt = None,
               title: str | None = None, row_labels: Sequence[str] | None = None, shape_note: bool = False,
               cw: float | None = None, subtitle: str | None = None) -> tuple[float, float]:
        """Draw ``arr`` (2-d) with its top-left corner at (x, y); return its width and height."""
        f = _formatter(fmt, arr)
        texts = [[f(float(v)) for v in row] for row in arr]
        cw = cw or self.cell_width([s for row in texts for s in row])
        n, m = arr.shape
        fill = _colour(colour)
        for i in range(n):
            for j in range(m):
                self.rect(x + j * cw, y + i, cw, 1, facecolor=fill, edgecolor="white", lw=1.5,
                          gid=f"tile:{name}[{i},{j}]")
                self.text(x + (j + 0.5) * cw, y + i + 0.5, texts[i][j], gid=f"{name}[{i},{j}]", width=cw)
        w, h = m * cw, n
        # brackets, so a tile group reads as a matrix
        for side, sx, d in (("l", x - 0.08, 0.18), ("r", x + w + 0.08, -0.18)):
            self.line([sx + d, sx, sx, sx + d], [y, y, y + h, y + h], gid=f"bracket:{name}:{side}")
        if subtitle:
            self.text(x + w / 2, y - 0.45, subtitle, gid=f"subtitle:{name}", size=_FONT - 1.5, color=_MUTED)
        if title:
            self.text(x + w / 2, y - (1.05 if subtitle else 0.55), title, gid=f"title:{name}", fontweight="bold")
        if row_labels is not None:
            for i, lab in enumerate(row_labels):
                self.text(x - 0.3, y + i + 0.5, lab, ha="right", gid=f"label:{name}:{i}", size=_FONT - 1,
                          color=_MUTED)
        if shape_note:
            self.text(x + w / 2, y + h + 0.45, f"{n} × {m}", gid=f"shape:{name}", size=_FONT - 2, color=_MUTED)
        return w, h

    def sign(self, x: float, y: float, s: str, gid: str | None = None, size: float = _FONT + 5, **kw):
        return self.text(x, y, s, gid=gid or f"sign:{s}", size=size, width=0.6, **kw)

    def highlight(self, x: float, y: float, w: float, h: float, gid: str):
        return self.rect(x - 0.06, y - 0.06, w + 0.12, h + 0.12, fill=False, edgecolor=HIGHLIGHT, lw=2.6,
                         zorder=5, gid=gid)

    def finish(self, margin: float = 0.35, unit: float = _UNIT) -> None:
        x0, y0, x1, y1 = self.bounds
        x0, y0, x1, y1 = x0 - margin, y0 - margin, x1 + margin, y1 + margin
        self.ax.set_xlim(x0, x1)
        self.ax.set_ylim(y1, y0)  # rows go down, as in a printed matrix
        self.fig.set_size_inches(round((x1 - x0) * unit, 2), round((y1 - y0) * unit, 2))


# --- the numbers of one self-attention computation ------------------------------------------


def attention_numbers(x: Any, w_query: Any, w_key: Any, w_value: Any, *, scale: bool = False) -> dict[str, np.ndarray]:
    """Keys, queries, values, scores, weights (row-wise softmax) and outputs, in NumPy.

    ``scale=True`` divides the scores by sqrt(d_k) before the softmax. Shapes are checked
    with messages that name the mismatch.
    """
    x = _matrix(x, "x")
    ws = {n: _matrix(w, n) for n, w in (("w_query", w_query), ("w_key", w_key), ("w_value", w_value))}
    for n, w in ws.items():
        if w.shape[0] != x.shape[1]:
            raise ValueError(
                f"x @ {n}: x has {x.shape[1]} columns (features) but {n} has {w.shape[0]} rows; they must match."
            )
    if ws["w_key"].shape[1] != ws["w_query"].shape[1]:
        raise ValueError(
            f"keys and queries need the same size to be compared: w_key gives {ws['w_key'].shape[1]}, "
            f"w_query gives {ws['w_query'].shape[1]}."
        )
    keys, queries, values = x @ ws["w_key"], x @ ws["w_query"], x @ ws["w_value"]
    scores = queries @ keys.T
    if scale:
        scores = scores / math.sqrt(keys.shape[1])
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))  # the row-wise softmax the figures show
    weights = e / e.sum(axis=-1, keepdims=True)
    return {"x": x, "keys": keys, "queries": queries, "values": values, "scores": scores,
            "weights": weights, "outputs": weights @ values}


# --- heatmap -------------------------------------------------------------------------------


def attention_heatmap(weights: Any, queries_labels: Sequence[str] | None = None,
                      keys_labels: Sequence[str] | None = None, ax=None, title: str | None = None,
                      fmt: Fmt = ".2f", *, cmap: str = "Blues", vmin: float | None = None,
                      vmax: float | None = None, colorbar: bool = True):
    """A labelled heatmap of attention weights (or scores): row i = query i, column j = key j.

    The values are written in the cells (``fmt=None`` leaves them out), in white on dark cells
    and in black on light ones. Weights between 0 and 1 are coloured on the scale 0..1, anything
    else on its own range (or ``vmin``/``vmax``). Returns the Axes; without ``ax`` a new figure
    is made with pyplot, so ``plt.show()`` displays it.
    """
    w = _matrix(weights, "weights")
    n, m = w.shape
    qlab = _labels(queries_labels, n, "queries_labels", "query {}")
    klab = _labels(keys_labels, m, "keys_labels", "key {}")
    finite = w[np.isfinite(w)]
    if vmin is None and vmax is None and finite.size and finite.min() >= 0 and finite.max() <= 1:
        vmin, vmax = 0.0, 1.0
    if not DRAW:
        if fmt is not None:
            _formatter(fmt, w)(float(w.flat[0]))  # a bad format spec raises, as it does when drawn
        return ax if ax is not None else _blank_figure().add_subplot()
    if ax is None:
        import matplotlib.pyplot as plt

        longest = max(len(s) for s in qlab)
        fig, ax = plt.subplots(figsize=(1.0 + 0.8 * m + 0.07 * longest + (0.8 if colorbar else 0), 1.2 + 0.8 * n),
                               layout="constrained")
    im = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=vmax, aspect="equal")
    ax.set_xticks(range(m), klab)
    ax.set_yticks(range(n), qlab)
    ax.tick_params(length=0)
    ax.set_xlabel("key (what is attended to)")
    ax.set_ylabel("query (who attends)")
    ax.set_xticks(np.arange(-0.5, m, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, n, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if title:
        ax.set_title(title)
    if fmt is not None:
        f = _formatter(fmt, w)
        for i in range(n):
            for j in range(m):
                r, g, b, _ = im.cmap(im.norm(w[i, j]))
                light = 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.5
                ax.text(j, i, f(float(w[i, j])), ha="center", va="center", fontsize=10,
                        color="black" if light else "white", gid=f"cell[{i},{j}]", in_layout=False)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


# --- a matrix product ----------------------------------------------------------------------


def _three(value: Any, default: tuple, what: str) -> tuple:
    if value is None:
        return default
    if isinstance(value, (str, bytes)) or callable(value):
        return (value,) * 3
    value = tuple(value)
    if len(value) != 3:
        raise ValueError(f"{what} needs 3 entries (A, B, product), got {len(value)}.")
    return value


def matrix_product_figure(a: Any, b: Any, result: Any = None, names: Sequence[str] = ("A", "B", "A @ B"),
                          highlight: tuple[int, int] | None = None, fmt: Any = None, *,
                          colors: Sequence[str] | None = None, row_labels: Sequence[str] | None = None,
                          caption: bool = True):
    """Draw ``a @ b = result`` with the values in the cells; return the Figure.

    ``highlight=(i, j)`` frames row i of ``a``, column j of ``b`` and cell (i, j) of the
    product, and (``caption=True``) writes the dot product that forms it underneath.
    ``result`` defaults to ``a @ b``; pass your own to draw it (its shape is checked).
    A 1-d ``a`` is a row, a 1-d ``b`` a column. ``fmt``: a format spec such as ``".2f"``, a
    function, ``None`` (whole numbers as integers, else two decimals) or one per matrix.
    ``colors``: role names of :data:`ROLE_COLOURS` (``("input", "w_key", "key")``) or colours.
    ``row_labels`` label the rows of ``a`` (and of the product beside them).
    """
    name_a, name_b, name_r = (str(s) for s in _three(names, ("A", "B", "A @ B"), "names"))
    A = _matrix(a, name_a, (1, 2))
    B = _matrix(b, name_b, (1, 2))
    A = A[None, :] if A.ndim == 1 else A
    B = B[:, None] if B.ndim == 1 else B
    if A.shape[1] != B.shape[0]:
        raise ValueError(
            f"cannot multiply {name_a} {A.shape} by {name_b} {B.shape}: {name_a} has {A.shape[1]} columns "
            f"but {name_b} has {B.shape[0]} rows; they must be equal."
        )
    want = (A.shape[0], B.shape[1])
    if result is None:
        R = A @ B
    else:
        R = to_array(result, name_r, finite=False)
        if R.size != want[0] * want[1] or (R.ndim == 2 and R.shape != want) or R.ndim > 2:
            raise ValueError(f"{name_r} should have shape {want} ({name_a} {A.shape} @ {name_b} {B.shape}), "
                             f"got {R.shape}.")
        R = R.reshape(want)
    if highlight is not None:
        i, j = (int(v) for v in highlight)
        if not (0 <= i < A.shape[0] and 0 <= j < B.shape[1]):
            raise ValueError(f"highlight={highlight!r} is outside the product, whose shape is {want}.")
    fa, fb, fr = _three(fmt, (None, None, None), "fmt")
    ca, cb, cr = _three(colors, ("plain", "plain", "plain"), "colors")
    labels = None if row_labels is None else _labels(row_labels, A.shape[0], "row_labels")
    if not DRAW:
        return _blank_figure()

    fig = _pyplot_figure()
    board = _Board(fig)
    x = 0.0
    top = 0.0
    wa, _ = board.matrix(A, x, top, name=name_a, colour=ca, fmt=fa, title=name_a, row_labels=labels,
                         shape_note=True)
    mid = top + max(A.shape[0], B.shape[0]) / 2
    xa = x
    x += wa + 0.75
    board.sign(x, mid, "@", gid="sign:@")
    x += 0.75
    xb = x
    wb, _ = board.matrix(B, x, top, name=name_b, colour=cb, fmt=fb, title=name_b, shape_note=True)
    x += wb + 0.75
    board.sign(x, mid, "=", gid="sign:=")
    x += 0.75
    xr = x
    wr, _ = board.matrix(R, x, top, name=name_r, colour=cr, fmt=fr, title=name_r, shape_note=True)
    bottom = max(A.shape[0], B.shape[0]) + 0.9
    if highlight is not None:
        cwb, cwr = wb / B.shape[1], wr / R.shape[1]
        board.highlight(xa, top + i, wa, 1, gid=f"highlight:{name_a}:row:{i}")
        board.highlight(xb + j * cwb, top, cwb, B.shape[0], gid=f"highlight:{name_b}:col:{j}")
        board.highlight(xr + j * cwr, top + i, cwr, 1, gid=f"highlight:{name_r}:cell:{i},{j}")
        if caption:
            f_a, f_b, f_r = (_formatter(f, m) for f, m in ((fa, A), (fb, B), (fr, R)))
            k = A.shape[1]
            terms = [f"{f_a(A[i, t])}×{f_b(B[t, j])}" for t in range(k)]
            if k > 6:
                terms = terms[:3] + ["…"] + terms[-2:]
            text = (f"row {i + 1} of {name_a} · column {j + 1} of {name_b} = "
                    + " + ".join(terms) + f" = {f_r(R[i, j])}")
            board.text(0.0, bottom + 0.5, text, ha="left", gid="caption", size=_FONT)
    board.finish()
    return fig


# --- the steps of self-attention for one query ----------------------------------------------


def _check_query(query: int, n: int) -> int:
    q = int(query)
    if not 0 <= q < n:
        raise ValueError(f"query={query} does not exist: there are {n} queries (0 to {n - 1}).")
    return q


def _panel_qkv(board: _Board, y: float, nums: dict, labels: list[str], fmt: Fmt) -> float:
    """inputs -> queries, keys, values: one row per input. Returns the panel's height."""
    x = nums["x"]
    wx, h = board.matrix(x, 0.0, y, name="x", colour="input", fmt=fmt, title="inputs", subtitle="x",
                         row_labels=labels)
    pos = wx + 1.4
    board.sign(pos - 0.7, y + h / 2, "→", gid="sign:qkv")
    for key, role, formula in (("queries", "query", "x @ w_query"), ("keys", "key", "x @ w_key"),
                               ("values", "value", "x @ w_value")):
        arr = nums[key]
        f = _formatter(fmt, arr)
        cw = board.cell_width([f(float(v)) for v in arr.ravel()])
        wide = max(arr.shape[1] * cw, _text_width(formula) * 0.9)
        left = pos + (wide - arr.shape[1] * cw) / 2
        board.matrix(arr, left, y, name=key, colour=role, fmt=fmt, title=key, subtitle=formula, cw=cw)
        pos += wide + 1.0
    return h


def _panel_scores(board: _Board, y: float, nums: dict, q: int, labels: list[str], fmt: Fmt) -> float:
    """query q against every key: key_j · query_q = score_j, one row per input."""
    keys, queries, scores = nums["keys"], nums["queries"], nums["scores"]
    n = keys.shape[0]
    qrow = np.repeat(queries[q : q + 1], n, axis=0)
    wk, h = board.matrix(keys, 0.0, y, name="keys", colour="key", fmt=fmt, title="keys",
                         row_labels=[f"key of {s}" for s in labels])
    x = wk + 0.7
    for i in range(n):
        board.sign(x, y + i + 0.5, "•", gid=f"sign:dot:{i}", size=_FONT + 2)
    x += 0.7
    wq, _ = board.matrix(qrow, x, y, name="query", colour="query", fmt=fmt, title=f"query {q + 1}")
    x += wq + 0.7
    for i in range(n):
        board.sign(x, y + i + 0.5, "=", gid=f"sign:=:{i}")
    x += 0.7
    board.matrix(scores[q][:, None], x, y, name="scores", colour="score", fmt=fmt, title=f"scores {q + 1}")
    return h


def _panel_softmax(board: _Board, y: float, nums: dict, q: int, labels: list[str], fmt: Fmt) -> float:
    """scores -> exp(score - max) -> divided by their sum = weights, as columns (one row per input)."""
    s = nums["scores"][q]
    e = np.exp(s - s.max())
    w = e / e.sum()
    fs = _formatter(fmt, s)
    fe = _formatter(".2f" if fmt is None else fmt, e)
    n = s.shape[0]
    ws, h = board.matrix(s[:, None], 0.0, y, name="scores", colour="score", fmt=fs, title=f"scores {q + 1}",
                         row_labels=labels)
    x = ws + 1.4
    board.sign(x, y + h / 2, "→", gid="sign:exp")
    x += 1.4
    we, _ = board.matrix(e[:, None], x, y, name="exp", colour="exp", fmt=fe, title="exp(s − max)")
    x += we + 1.4
    board.text(x, y + h / 2 - 0.45, f"÷ {fe(float(e.sum()))}", size=_FONT - 2, color=_MUTED, width=1.4,
               gid="note:sum")
    board.sign(x, y + h / 2 + 0.15, "→", gid="sign:divide")
    x += 1.4
    fw = _formatter(".2f" if fmt is None else fmt, w)
    ww, _ = board.matrix(w[:, None], x, y, name="weights", colour="weight", fmt=fw, title=f"weights {q + 1}")
    board.text(x + ww / 2, y + n + 0.5, f"sum = {fw(float(w.sum()))}", size=_FONT - 1, color=_MUTED,
               gid="note:weights_sum", width=2.0)
    return h + 1.0


def _panel_weighted(board: _Board, y: float, nums: dict, q: int, labels: list[str], fmt: Fmt,
                    weights: np.ndarray | None = None) -> float:
    """weight_j × value_j = weighted value_j, one row per input; their sum is output q."""
    values = nums["values"]
    w = nums["weights"][q] if weights is None else weights
    n = values.shape[0]
    weighted = w[:, None] * values
    fw = _formatter(".2f" if fmt is None else fmt, w)
    fwv = _formatter(".2f" if fmt is None else fmt, weighted)
    ww, h = board.matrix(w[:, None], 0.0, y, name="weights", colour="weight", fmt=fw, title=f"weights {q + 1}",
                         row_labels=labels)
    x = ww + 0.7
    for i in range(n):
        board.sign(x, y + i + 0.5, "×", gid=f"sign:×:{i}")
    x += 0.7
    wv, _ = board.matrix(values, x, y, name="values", colour="value", fmt=fmt, title="values")
    x += wv + 0.7
    for i in range(n):
        board.sign(x, y + i + 0.5, "=", gid=f"sign:=:{i}")
    x += 0.7
    xw = x
    cw = board.cell_width([fwv(float(v)) for v in np.concatenate([weighted.ravel(), weighted.sum(0)])])
    wwv, _ = board.matrix(weighted, x, y, name="weighted", colour="weighted", fmt=fwv, title="weighted values",
                          cw=cw)
    board.line([xw - 0.6, xw + wwv + 0.1], [y + n + 0.2, y + n + 0.2], lw=1.0, gid="rule:sum")
    board.text(xw - 0.35, y + n + 0.8, "sum", ha="right", size=_FONT - 1, color=_MUTED, gid="note:sum")
    wo, _ = board.matrix(weighted.sum(axis=0)[None, :], xw, y + n + 0.3, name="output", colour="output", fmt=fwv,
                         cw=cw)
    board.text(xw + wo + 0.3, y + n + 0.8, f"= output {q + 1}", ha="left", gid="title:output", fontweight="bold")
    return h + 1.3


_PANELS = {"qkv": _panel_qkv, "scores": _panel_scores, "softmax": _panel_softmax, "weighted": _panel_weighted}


def _steps(steps: str | Sequence[str] | None) -> list[str]:
    if steps is None:
        return list(STEPS)
    chosen = [steps] if isinstance(steps, str) else list(steps)
    unknown = [s for s in chosen if s not in _PANELS]
    if unknown or not chosen:
        raise ValueError(f"unknown step(s) {unknown}; choose from {list(STEPS)}.")
    return chosen


def _draw_steps(fig, nums: dict, steps: list[str], q: int, labels: list[str], fmt: Fmt,
                titles: bool = True) -> tuple[_Board, list[tuple[str, list]]]:
    board = _Board(fig)
    y = 0.0
    panels = []
    for k, step in enumerate(steps):
        if k:
            board.new_group()
        if titles:
            board.text(-2.2, y, STEP_TITLES[step].format(q=q + 1), ha="left", gid=f"step:{step}",
                       size=_FONT + 1.5, fontweight="bold")
            y += 2.0 if step == "qkv" else 1.5
        if step == "qkv":
            h = _panel_qkv(board, y, nums, labels, fmt)
        else:
            h = _PANELS[step](board, y, nums, q, labels, fmt)
        panels.append((step, board.groups[-1]))
        y += h + 1.2
    return board, panels


def attention_steps_figure(x: Any, w_query: Any, w_key: Any, w_value: Any, query: int = 0,
                           steps: str | Sequence[str] | None = None, *, labels: Sequence[str] | None = None,
                           fmt: Fmt = None, titles: bool = True):
    """Draw the steps of self-attention for input number ``query`` (0-based) from the raw tensors.

    ``steps``: one of :data:`STEPS` — ``"qkv"`` (inputs -> queries, keys, values), ``"scores"``
    (query ``query`` against every key), ``"softmax"`` (that row of scores -> weights),
    ``"weighted"`` (weights × values, one row per input, and their sum: the output) — a list of
    them, or ``None`` for all four stacked. Everything is recomputed here in NumPy from
    ``x`` and the three weight matrices. ``labels`` name the inputs (default "input 1", ...).
    Returns the Figure (made with pyplot: ``plt.show()`` displays it).
    """
    nums = attention_numbers(x, w_query, w_key, w_value)
    n = nums["x"].shape[0]
    q = _check_query(query, n)
    chosen, names = _steps(steps), _labels(labels, n, "labels")
    if not DRAW:
        return _blank_figure()
    fig = _pyplot_figure()
    board, _ = _draw_steps(fig, nums, chosen, q, names, fmt, titles)
    board.finish()
    return fig


def scores_figure(queries: Any, keys: Any, query: int = 0, *, labels: Sequence[str] | None = None, fmt: Fmt = None):
    """Row ``query`` of the queries against every key: ``key_j · query = score_j``. Returns the Figure."""
    Q, K = _matrix(queries, "queries"), _matrix(keys, "keys")
    if Q.shape[1] != K.shape[1]:
        raise ValueError(f"queries have {Q.shape[1]} columns but keys have {K.shape[1]}: a dot product needs "
                         "vectors of the same size.")
    q = _check_query(query, Q.shape[0])
    nums = {"keys": K, "queries": Q, "scores": Q @ K.T}
    names = _labels(labels, K.shape[0], "labels")
    if not DRAW:
        return _blank_figure()
    fig = _pyplot_figure()
    board = _Board(fig)
    _panel_scores(board, 0.0, nums, q, names, fmt)
    board.finish()
    return fig


def softmax_figure(scores: Any, query: int = 0, *, labels: Sequence[str] | None = None, fmt: Fmt = None):
    """Softmax of one row of scores (row ``query`` of a matrix, or a 1-d row): scores -> e -> weights."""
    S = to_array(scores, "scores", finite=False)
    if S.ndim == 1:
        S, q = S[None, :], 0
    elif S.ndim == 2:
        q = _check_query(query, S.shape[0])
    else:
        raise ValueError(f"`scores` must be 1-d or 2-d; it has shape {S.shape}.")
    names = _labels(labels, S.shape[1], "labels")
    if not DRAW:
        return _blank_figure()
    fig = _pyplot_figure()
    board = _Board(fig)
    _panel_softmax(board, 0.0, {"scores": S}, q, names, fmt)
    board.finish()
    return fig


def weighted_values_figure(weights: Any, values: Any, query: int = 0, *, labels: Sequence[str] | None = None,
                           fmt: Fmt = None):
    """Weights of one query × the values, one row per input, and their sum: the output. Returns the Figure.

    ``weights``: a (n, n) matrix (row ``query`` is used) or one row of n weights.
    """
    V = _matrix(values, "values")
    W = to_array(weights, "weights", finite=False)
    if W.ndim == 1:
        row, q = W, int(query)  # one row of weights: `query` only names it
    elif W.ndim == 2:
        q = _check_query(query, W.shape[0])
        row = W[q]
    else:
        raise ValueError(f"`weights` must be 1-d or 2-d; it has shape {W.shape}.")
    if row.shape[0] != V.shape[0]:
        raise ValueError(f"{row.shape[0]} weights for {V.shape[0]} values: there must be one weight per value row.")
    names = _labels(labels, V.shape[0], "labels")
    if not DRAW:
        return _blank_figure()
    fig = _pyplot_figure()
    board = _Board(fig)
    _panel_weighted(board, 0.0, {"values": V}, q, names, fmt, weights=row)
    board.finish()
    return fig


# --- the animation --------------------------------------------------------------------------


def save_attention_gif(path: str | Path, x: Any, w_query: Any, w_key: Any, w_value: Any, query: int = 0,
                       fps: float = 1, *, dpi: int = 70, labels: Sequence[str] | None = None,
                       fmt: Fmt = None) -> Path:
    """Save an animated GIF of the steps for one query: one frame per step, each adding a panel.

    Drawn offline with matplotlib's Agg canvas and written with Pillow (it comes with matplotlib);
    no window opens and no pyplot figure is left behind. The first frame is drawn whole; each later
    frame draws only the panel it adds on top of the one before (panels do not overlap), and all
    frames share the palette of the last, complete one. Returns the path written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from PIL import Image

    path = Path(path)
    if path.suffix.lower() != ".gif":
        raise ValueError(f"{path.name}: the file name must end in .gif")
    if fps <= 0:
        raise ValueError(f"fps must be positive, got {fps}.")
    nums = attention_numbers(x, w_query, w_key, w_value)
    n = nums["x"].shape[0]
    q = _check_query(query, n)
    names = _labels(labels, n, "labels")
    if not DRAW:  # a one-pixel GIF: the file exists and reads back as a GIF, as the notebook expects
        Image.new("P", (1, 1)).save(path)
        return path
    fig = Figure(dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    board, panels = _draw_steps(fig, nums, list(STEPS), q, names, fmt)
    board.finish()
    fig.set_facecolor("white")
    for k, (_, artists) in enumerate(panels):
        for art in artists:
            art.set_visible(k == 0)
    canvas.draw()
    renderer = canvas.get_renderer()
    frames = [Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3].copy())]
    for _, artists in panels[1:]:
        for art in artists:
            art.set_visible(True)
            art.draw(renderer)
        frames.append(Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3].copy()))
    palette = frames[-1].quantize(colors=255, method=Image.Quantize.FASTOCTREE)
    frames = [f.quantize(palette=palette, dither=Image.Dither.NONE) for f in frames]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)
    return path


# --- training (notebook 10) ------------------------------------------------------------------


def loss_curve(losses: Any, *, ax=None, label: str | None = None, chance: float | None = None,
               title: str | None = None, log: bool = True):
    """The loss at every training step, as a line; call again with the same ``ax`` to add a curve.

    ``chance`` draws the loss of guessing uniformly (ln of the vocabulary size) as a dashed line,
    labelled with its value. The loss axis is logarithmic unless ``log=False``: a loss that falls
    from 2 to 0.01 stays readable. Returns the Axes; without ``ax`` a new figure is made with
    pyplot, so ``plt.show()`` displays it.
    """
    values = to_array(losses, "losses", finite=False).ravel()
    if values.size == 0:
        raise ValueError("`losses` is empty: there is no training step to draw.")
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
    ax.plot(np.arange(1, values.size + 1), values, linewidth=1.2, label=label, gid="loss")
    if chance is not None:
        ax.axhline(chance, color=_MUTED, linestyle="--", linewidth=1, gid="chance")
        ax.annotate(f"guessing: {chance:.2f}", (1, chance), xytext=(2, 3), textcoords="offset points",
                    fontsize=9, color=_MUTED)
    if log and np.all(values[np.isfinite(values)] > 0):
        ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("loss (cross-entropy)")
    if title:
        ax.set_title(title)
    if label is not None:
        ax.legend(loc="best", frameon=False)
    ax.grid(True, which="major", alpha=0.3)
    return ax
