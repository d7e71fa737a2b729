"""Fingerprints of the user code a dataset depends on (encoder, adapter, callbacks such as
``group_of``), for config.json's provenance block and the run fingerprint.

A fingerprint names the code, hashes its source, and records its state, so that editing an
encoder, an adapter or a grouping function makes ``resume=True`` refuse the old shards.
It must also be stable across processes, or an unchanged run could never resume: reprs of
objects that carry a memory address have the address masked.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
from typing import Any

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def stable_repr(value: Any) -> str:
    """``repr`` without memory addresses (which differ from process to process)."""
    return _ADDRESS.sub(" at 0x?", repr(value))


def _source_sha256(target: Any) -> str | None:
    try:
        return hashlib.sha256(inspect.getsource(target).encode()).hexdigest()
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        if code is None:
            return None  # built in C, or a class typed at a prompt: its name and state still count
        # A function typed at a prompt has no source file, but has its bytecode and constants.
        return hashlib.sha256(code.co_code + stable_repr(code.co_consts).encode()).hexdigest()


def _state(mapping: dict[str, Any]) -> Any:
    return json.loads(json.dumps(mapping, sort_keys=True, default=stable_repr))


def code_fingerprint(obj: Any, *, state: Any = None) -> dict[str, Any] | None:
    """``{"name", "code_sha256", "state"}`` of a function, bound method, partial or object
    (its class's code and its attributes, or ``state`` when the object's own description is
    the better one: an adapter's attributes hold caches that change as it is used, its repr
    names what it reads); ``None`` for ``None``."""
    if obj is None:
        return None
    if isinstance(obj, functools.partial):
        return {"name": "functools.partial", "code_sha256": None,
                "state": {"func": code_fingerprint(obj.func), "args": _state({"a": list(obj.args)})["a"],
                          "keywords": _state(dict(obj.keywords))}}
    if inspect.ismethod(obj):
        return {"name": f"{type(obj.__self__).__module__}.{obj.__qualname__}", "code_sha256": _source_sha256(obj.__func__),
                "state": {"self": code_fingerprint(obj.__self__)}}
    if inspect.isfunction(obj):
        closure = {name: cell.cell_contents for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ())}
        return {"name": f"{obj.__module__}.{obj.__qualname__}", "code_sha256": _source_sha256(obj),
                "state": _state({"closure": closure, "defaults": list(obj.__defaults__ or ())})}
    if inspect.isbuiltin(obj):
        return {"name": f"{getattr(obj, '__module__', None)}.{obj.__qualname__}", "code_sha256": None, "state": {}}
    cls = type(obj)
    return {"name": f"{cls.__module__}.{cls.__qualname__}", "code_sha256": _source_sha256(cls),
            "state": _state(dict(getattr(obj, "__dict__", {}))) if state is None else _state({"state": state})["state"]}


__all__ = ["code_fingerprint", "stable_repr"]
