"""Another role's weight matrix used for a projection: a step's wrong variants, one per way of mixing up the
matrices, each with a hint that says which matrix made which.

A step that projects queries, keys or values declares ``compute(made_with, **inputs)``: its answers when each role
``r`` is projected with the matrix of role ``made_with[r]``. :func:`mix_ups` turns it into variants keyed
``"projection_reused:<role>_with_<other>"`` (one role made with another role's matrix: a line copied without
changing its matrix) and ``"swapped_projections:<a>_<b>"`` / ``"key_value_swapped"`` (two roles made with each
other's matrices), all under the catalogue's codes (see :func:`helpers.course.spec.code_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

ROLES = ("query", "key", "value")
MATRIX = {"query": "w_query", "key": "w_key", "value": "w_value"}
_PLURAL = {"query": "queries", "key": "keys", "value": "values"}


def mix_ups(compute: Callable[..., Any], said: Mapping[str, tuple[str, str]], roles: Sequence[str] | None = None,
            skip: Sequence[str] = (), swaps: bool = True, tag: str = "",
            matrix: Mapping[str, str] | None = None) -> tuple[dict[str, Callable[..., Any]], dict[str, str]]:
    """(mistakes, hints) for the roles of ``said`` (role -> (what the step calls it, how it is made right), e.g.
    ``{"value": ("value_2", "value_2 = x_2 @ w_value")}``): each role made with each other role's matrix, and (with
    ``swaps``) each pair of them made with each other's matrices. ``skip``: keys the step declares itself (the
    same variant under its own key and hint); ``tag`` ends every key (one set per word of a step); ``matrix``:
    the matrices' names where they are not w_query, w_key, w_value."""
    names = dict(MATRIX, **(matrix or {}))
    roles = tuple(roles or said)
    mistakes: dict[str, Callable[..., Any]] = {}
    hints: dict[str, str] = {}

    def add(key: str, made_with: dict[str, str], hint: str) -> None:
        if key in skip:
            return
        mistakes[key] = lambda **i: compute(made_with, **i)
        hints[key] = hint

    for r in roles:
        name, right = said[r]
        for o in ROLES:
            if o != r:
                add(f"projection_reused:{r}_with_{o}{tag}", {**{q: q for q in ROLES}, r: o},
                    f"You made {name} with {names[o]}, the {_PLURAL[o]}' matrix. Each role has a matrix of its own: "
                    f"{right}.")
    if swaps:
        for a, b in (("query", "key"), ("query", "value"), ("key", "value")):
            if a in roles and b in roles:
                key = "key_value_swapped:key_value" if (a, b) == ("key", "value") else f"swapped_projections:{a}_{b}"
                (na, ra), (nb, rb) = said[a], said[b]
                add(key + tag, {**{q: q for q in ROLES}, a: b, b: a},
                    f"You made {na} with {names[b]} and {nb} with {names[a]}: each other's matrices. {ra}, {rb}.")
    return mistakes, hints
