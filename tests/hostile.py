"""Hypothesis strategies for hostile and careless input: the values a person, another tool
or an attacker may put where Kuration expects a declaration, and valid documents mutated
one node at a time. Shared by every parser's fuzz test (damaged bytes:
:func:`kuration.testing.strategies.damaged`, which the contract kits use too)."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

#: Every fuzz test: bounded in examples and in time per example, never flaky on shared cores.
FUZZ = settings(max_examples=150, deadline=5000, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.data_too_large])

HUGE_INTS = st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**400, -(10**400), 10**4000])
NUMBERS = (st.integers() | HUGE_INTS | st.floats() | st.sampled_from([0, -1, 1, 0.5, 1e308, 1e-320, -0.0]))
#: What only a caller in Python can pass: numpy scalars, bytes, tuples, sets, objects.
PYTHON_ONLY = st.sampled_from([
    np.float32("nan"), np.float64("inf"), np.int64(7), np.uint64(2**64 - 1), np.bool_(True), np.float16(3),
    b"bytes", (1, 2), frozenset({1}), object(), np.dtype("float32"), np.array([1, 2]),
])


def scalars(*, python: bool) -> st.SearchStrategy[Any]:
    base = st.none() | st.booleans() | NUMBERS | st.text(max_size=12)
    return base | PYTHON_ONLY if python else base


def keys(*, python: bool) -> st.SearchStrategy[Any]:
    base = st.text(max_size=10)
    return base | st.integers() | HUGE_INTS | st.none() | st.tuples(st.integers()) if python else base


def values(*, python: bool) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars(python=python),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(keys(python=python), children, max_size=4),
        max_leaves=12,
    )


def _slots(node: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) pair below ``node``, depth first."""
    out = []
    if isinstance(node, dict):
        for key, child in node.items():
            out.append((node, key))
            out.extend(_slots(child))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            out.append((node, i))
            out.extend(_slots(child))
    return out


@st.composite
def mutated(draw, base: dict, *, python: bool) -> Any:
    """``base`` with one to three nodes replaced, deleted or added (or the whole of it replaced)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(values(python=python))
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        slots = _slots(data)
        if not slots:
            break
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            container[key] = draw(values(python=python))
        elif action == "delete":
            del container[key]
        elif isinstance(container, dict):
            container[draw(keys(python=python))] = draw(values(python=python))
        else:
            container.append(draw(values(python=python)))
    return data


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


@st.composite
def json_texts(draw, base: dict) -> bytes:
    """``base`` mutated and written as JSON, then perhaps damaged as text: a duplicated key,
    a number past every range, deep nesting, a cut, stray bytes."""
    text = _dumps(draw(mutated(base, python=False)))
    damage = draw(st.sampled_from(["none", "duplicate", "huge", "deep", "cut", "bytes"]))
    if damage == "duplicate" and text.startswith("{") and len(text) > 2:
        first = text[1:].split(",", 1)[0].rstrip("}")
        text = "{" + first + ", " + text[1:]
    elif damage == "huge":
        text = text.replace("1", draw(st.sampled_from(["1e999", "9" * 400, "-1e400", "1" * 5000])), 1)
    elif damage == "deep":
        depth = draw(st.sampled_from([65, 1000, 100_000]))
        text = text[:-1] + ', "deep": ' + "[" * depth + "]" * depth + "}" if text.endswith("}") else text
    elif damage == "cut":
        text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
    data = text.encode()
    if damage == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    return data
