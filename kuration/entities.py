"""Entity ids: one canonical form for every place that groups, sorts or names entities.

An entity id can be any plain value a recording uses (a drone's int id, a vehicle's
string, a tuple). ``1``, ``True``, ``1.0`` and ``"1"`` must stay four entities, which
Python's ``==`` and ``hash`` would merge, so grouping and naming go through
:func:`entity_key`, a type-tagged string that also names the entity in tables and
manifests. A float zero is one entity, ``float:0.0``, whatever its sign: ``==``, ``hash`` and
``np.unique`` merge ``0.0`` and ``-0.0`` already, and which of the two an unstable sort
keeps first depends on the CPU, so a signed name would not be reproducible.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kuration.errors import KurationError
from kuration.floats import canonical_float

#: Entity id types with a canonical value representation.
_ENTITY_SCALARS = (bool, int, float, str, bytes)


class EntityIdError(KurationError, ValueError):
    """An entity id has no canonical representation (an extension object, a NaN float...)."""


def entity_key(entity: Any) -> str:
    """Canonical, type-tagged string for an entity id, so ``1`` and ``"1"`` never alias:
    ``"none:None"``, ``"bool:True"``, ``"int:1"``, ``"float:1.5"``, ``"str:'a'"``,
    ``"bytes:b'a'"``, ``"tuple:(int:1,str:'a')"``, ``"frozenset:{int:1,int:2}"`` (elements
    sorted). NumPy scalars count as the Python value they hold (``np.int64(1)`` is
    ``"int:1"``). Anything else, and non-finite floats, raise :class:`EntityIdError`."""
    if isinstance(entity, np.generic) and not isinstance(entity, (np.datetime64, np.timedelta64, np.void)):
        value = entity.item()
        if not isinstance(value, np.generic):  # e.g. longdouble stays NumPy: reject below
            return entity_key(value)
    if entity is None:
        return "none:None"
    if isinstance(entity, bool):
        return f"bool:{entity!r}"
    if isinstance(entity, int):
        return f"int:{int(entity)!r}"
    if isinstance(entity, float):
        if not math.isfinite(entity):
            raise EntityIdError(f"entity id {entity!r}: a non-finite float has no canonical representation")
        return f"float:{canonical_float(float(entity))!r}"
    if isinstance(entity, str):
        return f"str:{str(entity)!r}"
    if isinstance(entity, bytes):
        return f"bytes:{bytes(entity)!r}"
    if isinstance(entity, tuple):
        return "tuple:(" + ",".join(entity_key(e) for e in entity) + ")"
    if isinstance(entity, frozenset):
        return "frozenset:{" + ",".join(sorted(entity_key(e) for e in entity)) + "}"
    raise EntityIdError(
        f"entity id {entity!r} of type {type(entity).__name__} has no canonical representation; use None, bool, "
        "int, finite float, str, bytes, or tuples / frozensets of those (NumPy scalars of those are fine)"
    )


def canonical_entity(value: Any) -> Any:
    """Plain Python form of an entity id, or raise ValueError naming what is wrong."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        raise ValueError("entity id is null")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"entity id {value!r} is not finite")
        value = canonical_float(value)
    if isinstance(value, _ENTITY_SCALARS):
        return value
    if isinstance(value, (tuple, frozenset)):
        items = [canonical_entity(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else frozenset(items)
    raise ValueError(
        f"entity id {value!r} of type {type(value).__name__} has no canonical form; "
        "use None-free ints, finite floats, strings, bytes, bools, tuples or frozensets"
    )
