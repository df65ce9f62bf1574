"""Probe inputs that watch how a blockwise function uses them (notebook 07), in the student's kernel
and in the grader's sandbox alike.

A probe's plan carries plain arrays; :func:`tracking` turns its queries ``q`` and keys ``k`` into arrays
that know, for every entry, which token (row) it belongs to, through slicing, indexing, transposing and
reshaping. A product of queries with keys (``@``, ``*``, ``np.dot``, ``np.einsum`` …) tells a shared log:

- ``causal_blocks``: scores of a key after its query; a block entirely above the diagonal, or far more
  such scores than the diagonal blocks hold, raises :class:`ScoresAboveTheDiagonal` from inside the call;
- ``key_blocks``: how many keys each product takes at once; after the call, :meth:`_KeyLog.finish`
  raises :class:`KeysNotInBlocks` when that was never the block size, and :class:`KeyBlocksTwice` when
  the scores of a query and a key were computed again after the function had gone on to other keys (a
  second pass over the key blocks);
- ``tile_blocks``: the same, and how many queries each product takes at once: :class:`QueriesNotInTiles` when that
  was never the block size (a causal function that goes one query at a time instead of one tile of queries).

Arrays derived in ways not followed here become plain arrays: a probe can miss a computation, never
invent one. Nothing here knows a right answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["KeyBlocksTwice", "KeysNotInBlocks", "QueriesNotInTiles", "ScoresAboveTheDiagonal", "WATCHES", "tracking"]





class ScoresAboveTheDiagonal(RuntimeError):
    """Raised from inside the student's causal function when it computes what causal attention never uses."""


class _Log:
    """What the probe's queries and keys have seen computed: scores (i, j) of a key after its query."""

    def __init__(self, n: int, block_size: int):
        self.n, self.block_size = n, block_size
        self.above = 0
        # The diagonal blocks hold about n (b − 1) / 2 such scores; twice n·b leaves room for tiles
        # of another size. Computing every block and masking is n (n − 1) / 2.
        self.allowance = 2 * n * block_size

    def product(self, q_tok: np.ndarray, k_tok: np.ndarray, paired: bool = False) -> None:
        rows, cols = np.unique(q_tok), np.unique(k_tok)
        if not paired and rows.size == self.n and cols.size == self.n:
            # the whole n × n matrix (where the peak-memory probe's long input does not reach: a function that
            # computes it only for short sequences)
            raise WholeScoreMatrix(_WHOLE.format(n=self.n))
        # an element-wise product (``paired``) takes only the pairs (q_tok[i], k_tok[i]), not every query with every
        # key: its pairs above the diagonal count against the same allowance
        above = int(np.sum(k_tok > q_tok)) if paired else \
            int(np.sum(cols.size - np.searchsorted(cols, rows, side="right")))
        if not above:
            return
        where = f"queries {rows.min()}–{rows.max()} with keys {cols.min()}–{cols.max()}"
        if not paired and cols.min() > rows.max():
            raise ScoresAboveTheDiagonal(
                f"it computed the scores of {where}: every one of those keys comes after every one of those "
                "queries, a block above the diagonal that no query of it may see. Skip such blocks instead of "
                "computing them")
        self.above += above
        if self.above > self.allowance:
            raise ScoresAboveTheDiagonal(
                f"it has computed {self.above} scores of a key that comes after its query (this product: {where}), "
                f"and no query may see any of them. Skipping the key blocks that lie after each block of "
                f"queries leaves only about {self.n * (self.block_size - 1) // 2}, all in the diagonal blocks")


class WholeScoreMatrix(RuntimeError):
    """Raised from a blockwise function watched on a sequence shorter than the peak-memory probe's, when it computed
    the scores of every query with every key at once (a fallback to plain attention for short sequences)."""


_WHOLE = ("it computed the scores of all {n} queries with all {n} keys at once: the whole {n} × {n} score matrix, "
          "which a blockwise version never holds, whatever the length")


class KeysNotInBlocks(RuntimeError):
    """Raised after a blockwise function has run, when it did not take the keys one block at a time."""


class KeyBlocksTwice(RuntimeError):
    """Raised after a blockwise function has run, when it went through the key blocks twice (the scores of a
    query and a key computed again after other keys: a maximum first, then the sums)."""


def _span(tokens: np.ndarray) -> str:
    return f"{tokens.min()}–{tokens.max()}" if tokens.size > 1 else f"{tokens.min()}"


class _KeyLog:
    """How many keys each product of the probe's queries with its keys takes at once (07.flash): at most
    ``block_size``, and ``block_size`` for at least one product, or the function is not going through the
    keys block by block. And whether a (query, key) score is computed again after products with other keys:
    the same block's scores computed twice in a row (for its maximum, then for the exponentials) is still one
    pass; coming back to a block after others is a second one. Nothing is raised during the call (the
    reference and the wrong variants may run on the same inputs); :meth:`finish` says what the call just
    did."""

    def __init__(self, n: int, block_size: int):
        self.n, self.block_size = n, block_size
        self.start()

    def start(self) -> None:
        self.whole = False
        self.widest = 0
        self.products = 0
        self.when = np.full((self.n, self.n), -1, dtype=np.int64)  # the product that last computed (i, j)
        self.again: tuple[np.ndarray, np.ndarray] | None = None
        self.glued_keys: np.ndarray | None = None

    def glued(self, rows: np.ndarray, keys: np.ndarray) -> None:
        """Scores of several key blocks glued together into one array (see :class:`_Scores`). The whole n × n
        matrix is left to the peak-memory probe, as in :meth:`product`."""
        if rows.size == self.n and keys.size == self.n:
            return
        if keys.size > self.block_size and (self.glued_keys is None or keys.size > self.glued_keys.size):
            self.glued_keys = keys

    def product(self, q_tok: np.ndarray, k_tok: np.ndarray, paired: bool = False) -> None:
        rows, cols = np.unique(q_tok), np.unique(k_tok)
        if paired:  # an element-wise product: its pairs only (each query's own score, say), not a block of keys
            self.when[q_tok, k_tok] = self.products
            self.products += 1
            return
        if rows.size == self.n and cols.size == self.n:
            self.whole = True  # the whole n × n matrix: said after the call (see finish)
            return
        self.widest = max(self.widest, int(cols.size))
        seen = self.when[np.ix_(rows, cols)]
        # computed again after other keys: a second pass (a query's score with itself, found ahead of the pass to
        # start its running maximum, is n products in all, not a pass)
        again = (seen >= 0) & (seen < self.products - 1) & (rows[:, None] != cols[None, :])
        if self.again is None and again.any():
            self.again = (rows, cols)
        self.when[np.ix_(rows, cols)] = self.products
        self.products += 1

    def finish(self) -> None:
        b = self.block_size
        if self.whole:
            raise WholeScoreMatrix(_WHOLE.format(n=self.n))
        if self.widest > b:
            raise KeysNotInBlocks(f"it multiplied queries with {self.widest} keys at once (block_size = {b})")
        if 0 < self.widest < b:
            raise KeysNotInBlocks(f"it never took more than {self.widest} keys at once (block_size = {b})")
        if self.glued_keys is not None:
            raise KeysNotInBlocks(f"it glued the scores of keys {_span(self.glued_keys)}, computed block by block, "
                                  "into one array: a softmax over all of them at once, not an online softmax over "
                                  "the blocks")
        if self.again is not None:
            rows, cols = self.again
            raise KeyBlocksTwice(f"it computed the scores of queries {_span(rows)} with keys {_span(cols)} a "
                                 "second time, after it had gone on to other keys: two passes over the key blocks")


class QueriesNotInTiles(RuntimeError):
    """Raised after a causal blockwise function has run, when it never took a tile of block_size queries at once."""


class _TileLog(_KeyLog):
    """:class:`_KeyLog`, and how many queries each product takes at once (07.causal_flash, whose TO-DO asks for
    tiles of ``block_size`` queries): ``block_size`` for at least one product, or the function does not go through
    the queries tile by tile (one query at a time, say)."""

    def start(self) -> None:
        super().start()
        self.tallest = 0

    def product(self, q_tok: np.ndarray, k_tok: np.ndarray, paired: bool = False) -> None:
        rows = np.unique(q_tok)
        if not paired and not (rows.size == self.n and np.unique(k_tok).size == self.n):
            self.tallest = max(self.tallest, int(rows.size))
        super().product(q_tok, k_tok, paired)

    def finish(self) -> None:
        super().finish()
        if 0 < self.tallest < self.block_size:
            what = "one query" if self.tallest == 1 else f"{self.tallest} queries"
            raise QueriesNotInTiles(f"it never took more than {what} at once (block_size = {self.block_size})")


def _tokens_of(x: Any) -> list:
    """Every tracking array in a (nested) argument."""
    if isinstance(x, _Tokens) and x._log is not None:
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for item in x for t in _tokens_of(item)]
    return []


def _unwrap(x: Any, tok: bool = False) -> Any:
    """Plain arrays in place of tracking ones (``tok``: their token indices instead)."""
    if isinstance(x, _Tokens):
        return x._tok if tok else x.view(np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_unwrap(item, tok) for item in x)
    return x


_STRUCTURAL = {np.transpose, np.swapaxes, np.moveaxis, np.reshape, np.ravel, np.copy, np.squeeze,
               np.expand_dims, np.atleast_2d, np.split, np.array_split, np.concatenate, np.vstack, np.stack}


# the array functions that multiply queries with keys (the operators and ufuncs, `@` and `*`, come through
# __array_ufunc__); np.linalg's are NumPy 2's
_PRODUCTS = {f for f in (np.dot, np.vdot, np.inner, np.outer, np.tensordot, np.einsum, np.kron, np.cross,
                         np.correlate, np.convolve, np.linalg.multi_dot, getattr(np.linalg, "matmul", None),
                         getattr(np.linalg, "tensordot", None), getattr(np.linalg, "outer", None),
                         getattr(np.linalg, "vecdot", None), getattr(np.linalg, "cross", None)) if f is not None}


class _Tokens(np.ndarray):
    """Queries (``role="q"``) or keys (``"k"``) that know, for every entry, which token (row) it belongs
    to, through slicing, indexing, transposing and reshaping. A product (``@``, ``*``, ``np.dot``,
    ``np.einsum`` …) of queries with keys tells the shared :class:`_Log`, which raises when a block above
    the diagonal is computed. Arrays derived in ways not followed here become plain arrays: the probe
    can miss a computation, never invent one."""

    _role: str | None = None
    _tok: np.ndarray | None = None
    _log: _Log | None = None

    @classmethod
    def make(cls, values: np.ndarray, role: str, log: _Log) -> _Tokens:
        values = np.asarray(values, dtype=np.float64)
        tok = np.broadcast_to(np.arange(values.shape[0]).reshape(-1, *([1] * (values.ndim - 1))), values.shape)
        return _carry(values.view(cls), role, np.array(tok), log)

    def __array_finalize__(self, obj: Any) -> None:
        self._role = self._tok = self._log = None  # set again by the operations that know the tokens

    def __reduce__(self):  # a copy in another process is a plain array
        return self.view(np.ndarray).__reduce__()

    def _same(self, result: Any, tok: np.ndarray) -> Any:
        if self._log is None or not isinstance(result, np.ndarray) or np.shape(tok) != result.shape:
            return result.view(np.ndarray) if isinstance(result, _Tokens) else result
        return _carry(result, self._role, tok, self._log)

    def __getitem__(self, key: Any) -> Any:
        result = super().__getitem__(key)
        if self._log is None or not isinstance(result, np.ndarray):
            return result
        return self._same(result, self._tok[_unwrap(key)])

    @property
    def T(self) -> Any:  # noqa: N802 (NumPy's name)
        return self.transpose()

    def transpose(self, *axes: Any) -> Any:
        result = super().transpose(*axes)
        return self._same(result, self._tok.transpose(*axes)) if self._log is not None else result

    def swapaxes(self, a: int, b: int) -> Any:
        result = super().swapaxes(a, b)
        return self._same(result, self._tok.swapaxes(a, b)) if self._log is not None else result

    def reshape(self, *shape: Any, **kwargs: Any) -> Any:
        result = super().reshape(*shape, **kwargs)
        return self._same(result, self._tok.reshape(*shape, **kwargs)) if self._log is not None else result

    def ravel(self, order: str = "C") -> Any:
        result = super().ravel(order)
        return self._same(result, self._tok.ravel(order)) if self._log is not None else result

    def copy(self, order: str = "C") -> Any:
        result = super().copy(order)
        return self._same(result, self._tok.copy(order)) if self._log is not None else result

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        result = super().astype(dtype, *args, **kwargs)
        return self._same(result, self._tok) if self._log is not None else result

    def dot(self, other: Any, out: Any = None) -> Any:
        return np.dot(self, other) if out is None else np.dot(self, other, out)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        tracked = _tokens_of(list(inputs))
        keys = _record(tracked, paired=method == "__call__")
        outs = kwargs.get("out")
        if outs is not None:
            kwargs["out"] = tuple(_unwrap(o) for o in outs)
        result = getattr(ufunc, method)(*(_unwrap(x) for x in inputs), **kwargs)
        if outs is not None:
            return outs[0] if len(outs) == 1 else outs
        if keys is not None:
            return _Scores.of(result, keys, tracked[0]._log)
        roles = {t._role for t in tracked}
        if method == "__call__" and len(roles) == 1 and isinstance(result, np.ndarray):
            source = tracked[0]
            if result.shape == source.shape and all(t.shape == source.shape for t in tracked):
                return source._same(result, source._tok)  # q / √d_k is still the queries
        return result

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        tracked = _tokens_of(list(args)) + _tokens_of(list(kwargs.values()))
        # only a function that multiplies what it is given makes scores (np.result_type(q, k, v) or np.stack([q, k])
        # takes queries and keys together and makes none)
        keys = _record(tracked, paired=func is np.einsum and _einsum_paired(args)) if func in _PRODUCTS else None
        result = func(*_unwrap(args), **{key: _unwrap(value) for key, value in kwargs.items()})
        if keys is not None:
            return _Scores.of(result, keys, tracked[0]._log)
        roles = {t._role for t in tracked}
        if func in _STRUCTURAL and len(roles) == 1:
            plain = [a for a in _arrays_in(args) if not isinstance(a, _Tokens)]
            if not plain:
                tok = func(*_unwrap(args, tok=True), **{key: _unwrap(value, tok=True) for key, value in kwargs.items()})
                source = tracked[0]
                if isinstance(result, list):
                    return [source._same(r, t) for r, t in zip(result, tok)]
                return source._same(result, tok)
        return result


def _arrays_in(x: Any) -> list:
    if isinstance(x, np.ndarray):
        return [x]
    if isinstance(x, (list, tuple)):
        return [a for item in x for a in _arrays_in(item)]
    return []


def _carry(result: np.ndarray, role: str | None, tok: np.ndarray, log: _Log | None) -> _Tokens:
    out = result if isinstance(result, _Tokens) else result.view(_Tokens)
    out._role, out._tok, out._log = role, np.asarray(tok), log
    return out


def _record(tracked: list, paired: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """Tell the log about a product of queries with keys; the queries and keys it took (None: not such a
    product). ``paired``: an element-wise product of one query array and one key array of the same shape (``*``,
    ``np.einsum("id,id->i", …)``), which pairs entry with entry, not every query with every key."""
    queries = [t for t in tracked if t._role == "q"]
    keys = [t for t in tracked if t._role == "k"]
    if not (queries and keys):
        return None
    paired = paired and len(queries) == 1 and len(keys) == 1 and queries[0]._tok.shape == keys[0]._tok.shape
    q_tok, k_tok = np.concatenate([t._tok.ravel() for t in queries]), np.concatenate([t._tok.ravel() for t in keys])
    queries[0]._log.product(q_tok, k_tok, paired)
    return np.unique(q_tok), np.unique(k_tok)


def _einsum_paired(args: Any) -> bool:
    """An einsum whose two operands have the same subscripts ("id,id->i"): entry paired with entry."""
    spec = args[0] if args and isinstance(args[0], str) else None
    if spec is None:
        return False
    operands = spec.replace(" ", "").split("->")[0].split(",")
    return len(operands) == 2 and operands[0] == operands[1]


_GLUING = {np.concatenate, np.hstack, np.column_stack, np.append}


class _Scores(np.ndarray):
    """What a product of the probe's queries with its keys gave (and what is computed from it element by element,
    or summed over the features): scores that know which keys they belong to. Gluing the scores of several key
    blocks together along the keys (``np.concatenate(parts, axis=1)``) tells a log that asks for it (``glued``):
    one softmax over all of them, not an online softmax over the blocks."""

    _rows: np.ndarray | None = None
    _keys: np.ndarray | None = None
    _log: Any = None

    @classmethod
    def of(cls, result: Any, tokens: tuple[np.ndarray, np.ndarray] | None, log: Any) -> Any:
        if not isinstance(result, np.ndarray) or tokens is None or not hasattr(log, "glued"):
            return result
        out = result.view(cls)
        (out._rows, out._keys), out._log = tokens, log
        return out

    def __array_finalize__(self, obj: Any) -> None:
        self._rows, self._keys = getattr(obj, "_rows", None), getattr(obj, "_keys", None)
        self._log = getattr(obj, "_log", None)

    def __reduce__(self):  # a copy in another process is a plain array
        return self.view(np.ndarray).__reduce__()

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func in _GLUING:
            parts = [a for a in _arrays_in(args[:2] if func is np.append else args[:1]) if isinstance(a, _Scores)
                     and a._keys is not None and a.ndim >= 2 and a.shape[-1] == a._keys.size]
            axis = kwargs.get("axis", args[1] if func is np.concatenate and len(args) > 1 else
                              args[2] if func is np.append and len(args) > 2 else None)
            along_keys = func in (np.hstack, np.column_stack) or axis in (-1, parts[0].ndim - 1 if parts else -1)
            if len(parts) >= 2 and along_keys and len({tuple(a._keys) for a in parts}) >= 2:
                self._log.glued(np.unique(np.concatenate([a._rows for a in parts])),
                                np.unique(np.concatenate([a._keys for a in parts])))
            return super().__array_function__(func, types, args, kwargs)
        result = super().__array_function__(func, types, args, kwargs)
        if isinstance(result, np.ndarray) and not isinstance(result, _Scores) and result.shape == self.shape:
            return _Scores.of(result, (self._rows, self._keys), self._log)  # np.where(mask, -inf, s): the same
        return result


WATCHES = {"causal_blocks": _Log, "key_blocks": _KeyLog, "tile_blocks": _TileLog}


def tracking(inputs: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """``inputs`` with ``q`` and ``k`` made watching arrays of one new log, for probes of the ``kind``s
    in :data:`WATCHES`; other inputs, and other kinds, are returned as they are."""
    out = dict(inputs)
    log_type = WATCHES.get(kind)
    if log_type is None or "q" not in out or "k" not in out:
        return out
    q, k = np.asarray(out["q"], dtype=np.float64), np.asarray(out["k"], dtype=np.float64)
    log = log_type(q.shape[0], int(out["block_size"]))
    out["q"], out["k"] = _Tokens.make(q, "q", log), _Tokens.make(k, "k", log)
    return out
