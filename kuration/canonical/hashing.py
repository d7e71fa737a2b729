"""The one way Kuration turns values, and the user code it runs, into bytes that are hashed.

Every digest the project records goes through this module: run fingerprints, the commit
record's checksum, the schema, strategy, segmenter and output-spec fingerprints, the
scoring cache key and the provenance block of ``config.json``. Two rules keep them equal
wherever they are computed:

- **Values** are encoded by :func:`canonical_json` (sorted keys, compact, UTF-8, no
  NaN/Infinity). ``readable_json`` is the same encoding, indented, for files people open.
- **User code** (a registered feature, an encoder, an adapter, a ``group_of`` callback) is
  described by :func:`code_fingerprint`: its qualified name, the SHA-256 of its source (or,
  where no source file exists, of its bytecode with nested code objects digested
  recursively), and its state (closure cells, defaults, attributes, a mapping's content).
  Nothing in it may depend on the process: memory addresses are masked
  (:func:`stable_repr`), sets are sorted, nested code objects are digested rather than
  repr'd (their repr holds an address), and non-finite floats are spelled out.

What it deliberately does not do: follow the functions a fingerprinted function calls.
Editing a helper that a feature calls is not seen; bump the feature's name or the
strategy when that matters.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import math
import re
import sys
import types
from collections.abc import Mapping
from typing import Any


def canonical_json(data: Any) -> bytes:
    """Deterministic JSON (sorted keys, compact, UTF-8, no NaN/Infinity): the bytes that are hashed."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode()


def readable_json(data: Any) -> bytes:
    """Deterministic, indented JSON for files people open."""
    return (json.dumps(data, sort_keys=True, indent=1, allow_nan=False, ensure_ascii=False) + "\n").encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_digest(data: Any) -> str:
    """SHA-256 of :func:`canonical_json` of ``data``."""
    return sha256_hex(canonical_json(data))


# -- user code -------------------------------------------------------------------------

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
#: How deep :func:`canonical_state` follows containers and attributes before it settles for
#: a repr: state is a description, and a cyclic or very deep object must not recurse forever.
_STATE_DEPTH = 12


def stable_repr(value: Any) -> str:
    """``repr`` without memory addresses (which differ from process to process)."""
    return _ADDRESS.sub(" at 0x?", repr(value))


def _const_token(value: Any) -> Any:
    """A code constant as JSON: nested code objects by digest, sets sorted, floats by repr."""
    if isinstance(value, types.CodeType):
        return {"code": code_object_digest(value)}
    if isinstance(value, (tuple, list)):
        return [_const_token(v) for v in value]
    if isinstance(value, (frozenset, set)):
        return {"set": sorted((_const_token(v) for v in value), key=canonical_json)}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return {type(value).__name__: repr(value)}  # float, complex, bytes, Ellipsis: repr is exact and process-stable


def code_object_digest(code: types.CodeType) -> str:
    """SHA-256 of a code object's bytecode, names and constants, nested code included.

    Used where no source file exists (a function typed at a prompt or built by ``exec``).
    ``repr(code.co_consts)`` would not do: a nested code object (a lambda, a generator
    expression, a comprehension) is repr'd with its memory address, and a frozenset
    constant in the order of the process's string hashes."""
    return canonical_digest({
        "bytecode": code.co_code.hex(), "names": list(code.co_names), "varnames": list(code.co_varnames),
        "freevars": list(code.co_freevars), "cellvars": list(code.co_cellvars),
        "consts": [_const_token(c) for c in code.co_consts],
    })


def _source_sha256(target: Any) -> str | None:
    try:
        return sha256_hex(inspect.getsource(target).encode())
    except (OSError, TypeError):
        code = getattr(target, "__code__", None)
        if code is None:
            return None  # built in C, or a class typed at a prompt: its name and state still count
        return code_object_digest(code)


def module_source_sha256(obj: Any) -> str | None:
    """SHA-256 of the source of the module ``obj`` was defined in, so an edit to a helper
    the function calls changes its fingerprint too; None for a module without source (a
    function typed at a prompt, an extension module): its own code still counts."""
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if module is None:
        return None
    try:
        return sha256_hex(inspect.getsource(module).encode())
    except (OSError, TypeError):
        return None


def _float_token(value: float) -> Any:
    return value if math.isfinite(value) else {"float": repr(value)}


def canonical_state(value: Any, _depth: int = 0) -> Any:
    """``value`` as JSON that is the same in every process: what a fingerprint's state holds."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return _float_token(value)
    if _depth >= _STATE_DEPTH:
        return stable_repr(value)
    deeper = _depth + 1
    if _is_code(value):
        return code_fingerprint(value)
    if isinstance(value, Mapping):
        items = [(canonical_state(k, deeper), canonical_state(v, deeper)) for k, v in value.items()]
        if all(isinstance(k, str) for k, _ in items):
            return dict(items)
        return {"mapping": sorted(([k, v] for k, v in items), key=canonical_json)}
    if isinstance(value, (list, tuple)):
        return [canonical_state(v, deeper) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted((canonical_state(v, deeper) for v in value), key=canonical_json)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes_sha256": sha256_hex(bytes(value))}
    numpy_token = _numpy_token(value)
    if numpy_token is not None:
        return numpy_token
    return stable_repr(value)


def _numpy_token(value: Any) -> Any:
    """Arrays by dtype, shape and content digest; numpy scalars as the Python value."""
    numpy = type(value).__module__.split(".")[0] == "numpy"
    if not numpy:
        return None
    import numpy as np

    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return {"ndarray": str(value.dtype), "shape": list(value.shape),
                    "items": canonical_state(value.tolist())}
        return {"ndarray": value.dtype.str, "shape": list(value.shape),
                "sha256": sha256_hex(np.ascontiguousarray(value).tobytes())}
    if isinstance(value, np.generic):
        return canonical_state(value.item())
    return None


def _is_code(value: Any) -> bool:
    return isinstance(value, functools.partial) or inspect.ismethod(value) or inspect.isfunction(value) \
        or inspect.isbuiltin(value) or isinstance(value, types.CodeType)


def code_fingerprint(obj: Any, *, state: Any = None) -> dict[str, Any] | None:
    """``{"name", "code_sha256", "state"}`` of user code, the same in every process.

    A function, bound method, partial, class (its name and source) or object (its class's
    code and its attributes, or
    ``state`` when the object's own description is the better one: an adapter's attributes
    hold caches that change as it is used, its repr names what it reads). A mapping, list,
    tuple or set passed where code could be (``group_of={"rec_1": "site_a", ...}``) is
    fingerprinted by its content: item count and the digest of its canonical form.
    ``None`` for ``None``."""
    if obj is None:
        return None
    if isinstance(obj, types.CodeType):
        return {"name": f"code.{obj.co_qualname}", "code_sha256": code_object_digest(obj), "state": {}}
    if isinstance(obj, functools.partial):
        return {"name": "functools.partial", "code_sha256": None,
                "state": {"func": code_fingerprint(obj.func), "args": canonical_state(list(obj.args)),
                          "keywords": canonical_state(dict(obj.keywords))}}
    if inspect.ismethod(obj):
        return {"name": f"{type(obj.__self__).__module__}.{obj.__qualname__}",
                "code_sha256": _source_sha256(obj.__func__),
                "state": {"self": code_fingerprint(obj.__self__)}}
    if inspect.isfunction(obj):
        closure = {name: cell.cell_contents
                   for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or (), strict=True)}
        return {"name": f"{obj.__module__}.{obj.__qualname__}", "code_sha256": _source_sha256(obj),
                "state": canonical_state({"closure": closure, "defaults": list(obj.__defaults__ or ()),
                                          "kwdefaults": dict(obj.__kwdefaults__ or {})})}
    if inspect.isbuiltin(obj):
        return {"name": f"{getattr(obj, '__module__', None)}.{obj.__qualname__}", "code_sha256": None, "state": {}}
    if inspect.isclass(obj):  # a factory such as a media provider class: its own code, not type's
        return {"name": f"{obj.__module__}.{obj.__qualname__}", "code_sha256": _source_sha256(obj), "state": {}}
    cls = type(obj)
    name = f"{cls.__module__}.{cls.__qualname__}"
    if isinstance(obj, (Mapping, list, tuple, set, frozenset)):
        return {"name": name, "code_sha256": None,
                "state": {"items": len(obj), "sha256": canonical_digest(canonical_state(obj))}}
    described = dict(getattr(obj, "__dict__", {})) if state is None else state
    return {"name": name, "code_sha256": _source_sha256(cls), "state": canonical_state(described)}


__all__ = [
    "canonical_digest", "canonical_json", "canonical_state", "code_fingerprint", "code_object_digest",
    "module_source_sha256", "readable_json", "sha256_hex", "stable_repr",
]
