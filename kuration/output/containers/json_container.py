"""The ``json`` container: one human-readable JSON object per shard.

::

    {"format": "kuration-shard-json/1", "n_steps": 3, "present": [true, true, true, false],
     "modalities": {"label": [1, 2, 2, 0], "pos": [[0.5, 1.0, -0.0], ...]}}

``present`` is left out when the spec has no mask; modalities are nested lists of shape
``(rows, *shape)``, sorted by name. Integers are written exactly (uint64 too) and floats as
the shortest text that reads back to the same double, which every float16/float32/float64
value is exactly, so values round-trip bit for bit, ``-0.0`` included. Non-finite floats
use Python's ``NaN`` / ``Infinity`` / ``-Infinity`` tokens: strict JSON has none, so a
shard with them needs a reader that accepts them (Python's ``json`` does by default, as
does this reader). A NaN's sign and payload bits are not kept: every NaN reads back as the
default quiet NaN. Duplicate object keys are rejected on read, as is any value the declared
dtype cannot hold exactly (``300`` for ``uint8``, ``1.5`` for an integer modality). The
reader accepts integral floats for integer modalities and integers for float ones when the
value is exact; booleans are only ``true``/``false``, and only for ``bool``. A float literal
beyond the float range (``1e999``) is refused as it is parsed instead of becoming an
infinity the writer would have spelled ``Infinity`` (floats go through a parse hook, which
makes float-heavy shards about a third slower to parse; integers do not). An integer no
dtype can hold is refused with its row (one past Python's 4300-digit conversion limit as the
parser meets it).

Reading is safe for untrusted bytes: a shard longer than the text ``max_rows`` rows of the
declared shapes can take (:func:`text_limit`) is refused before it is parsed, so what the
parser builds is bounded by the declared shapes; Python's JSON parser is linear in the text,
and nesting beyond the interpreter's recursion limit is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from kuration.errors import check_keys
from kuration.output.containers._common import assemble, check_n_steps, check_names, check_shard, value_limit
from kuration.output.containers.protocol import ShardArrays, ShardFormatError, ShardStream
from kuration.output.spec import PRESENT, Modality
from kuration.canonical.strict_json import parse_finite_float

FORMAT = "kuration-shard-json/1"
_KEYS = ("format", "n_steps", "present", "modalities")
#: The longest text one value takes as the writer spells it ("-2.2250738585072014e-308,"),
#: plus the brackets of each nesting level, and the keys and format around the arrays.
_VALUE_TEXT, _FRAME_TEXT = 26, 4096


def text_limit(modalities: Mapping[str, Modality], max_rows: int) -> int:
    """The most bytes a shard of at most ``max_rows`` rows of ``modalities`` takes as JSON."""
    values = sum(value_limit(n, modalities, max_rows) * (_VALUE_TEXT + 2 * (len(m.shape) + 1))
                 for n, m in modalities.items())
    return _FRAME_TEXT + values + max_rows * len("false,") + sum(len(n) + 4 for n in modalities)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ShardFormatError(
                f"json shard: key {key!r} appears twice in one object; a shard holds each key once (keys here: "
                f"{[k for k, _ in pairs]})"
            )
        out[key] = value
    return out


def _dumps(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True, separators=(",", ":")).encode("ascii")


class JsonContainer:
    """Human-readable; exact for every dtype except NaN sign/payload bits."""

    name = "json"
    extension = ".json"
    #: the text is bounded by the declared shapes before it is parsed, and parsing is linear in it
    safe_for_untrusted = True

    def write(self, stream: ShardStream, shard: ShardArrays) -> None:
        arrays, present, n_steps = check_shard(shard, self.name)
        # written piece by piece so a big shard never exists as one str besides its arrays
        stream.write(b'{"format":' + _dumps(FORMAT) + b',"n_steps":' + _dumps(n_steps))
        if present is not None:
            stream.write(b',"present":' + _dumps(present.tolist()))
        stream.write(b',"modalities":{')
        for i, (name, a) in enumerate(arrays.items()):
            # tolist() gives Python ints (exact, any width) and floats (a float16/32 widens exactly)
            stream.write((b"," if i else b"") + _dumps(name) + b":" + _dumps(a.tolist()))
        stream.write(b"}}\n")

    def read(self, data: bytes | bytearray, modalities: Mapping[str, Modality], *, presence: bool,
             max_rows: int | None = None, verified: bool = False) -> ShardArrays:
        if max_rows is not None and len(data) > (limit := text_limit(modalities, max_rows)):
            raise ShardFormatError(
                f"json shard: {len(data)} bytes, more than the {limit} a shard of {max_rows} rows of the declared "
                "modalities takes; it is corrupt or was not written with this spec"
            )
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ShardFormatError(f"json shard: not UTF-8 text ({exc})") from None
        try:
            doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_float=parse_finite_float)
        except ShardFormatError:
            raise
        except json.JSONDecodeError as exc:
            raise ShardFormatError(
                f"json shard: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; is the file "
                "truncated?"
            ) from None
        except RecursionError:
            raise ShardFormatError("json shard: nested too deeply to be a shard") from None
        except ValueError as exc:  # a float literal past the float range (1e999), an integer past 4300 digits
            raise ShardFormatError(f"json shard: {exc}") from None
        if not isinstance(doc, dict):
            raise ShardFormatError(f"json shard: expected an object with keys {list(_KEYS)}, found "
                                   f"{type(doc).__name__}")
        check_keys(doc, _KEYS, where="json shard", error=ShardFormatError)
        if doc.get("format") != FORMAT:
            raise ShardFormatError(f"json shard: \"format\" is {doc.get('format')!r}, expected {FORMAT!r}")
        if "n_steps" not in doc:
            raise ShardFormatError("json shard: no \"n_steps\" (the real step count)")
        n_steps = check_n_steps("json", doc["n_steps"])
        body = doc.get("modalities")
        if not isinstance(body, dict):
            raise ShardFormatError("json shard: \"modalities\" must be an object of name -> nested lists, found "
                                   f"{body!r:.80}")
        # the mask lives in "present"; a "_present" among the modalities is just an unexpected name
        names = [f"modalities.{n}" if n == PRESENT else n for n in body]
        check_names("json", [*names, *([PRESENT] if "present" in doc else [])], modalities, presence=presence)
        present = _array(doc["present"], PRESENT, ()) if presence else None
        found = {name: _array(body[name], name, m.shape, m.numpy_dtype) for name, m in modalities.items()}
        return assemble("json", found, present, n_steps, modalities, max_rows)

    def __repr__(self) -> str:
        return "JsonContainer()"


_BOOL = np.dtype(bool)


def _array(value: Any, name: str, shape: tuple[int, ...], dtype: np.dtype = _BOOL) -> np.ndarray:
    """Nested lists as an array in whatever dtype numpy infers; ``assemble`` checks the shape
    and converts exactly (or raises)."""
    what = "the present mask" if name == PRESENT else f"modality {name!r}"
    if not isinstance(value, list):
        raise ShardFormatError(f"json shard: {what} must be a list (one entry per row), found {type(value).__name__}")
    if not value:  # zero rows: nothing to infer the inner shape from
        return np.empty((0, *shape), dtype)
    try:
        a = np.array(value)
        if dtype.kind in "iu" and a.dtype.kind == "f":
            # numpy types a list holding an int beyond int64 as float64, rounding it; or the
            # list holds floats. Either way, check every value exactly as the Python number it is
            a = np.array(value, dtype=object)
        return a
    except (ValueError, TypeError, OverflowError) as exc:
        raise ShardFormatError(
            f"json shard: {what} is not a rectangular array of shape (rows, *{list(shape)}): {exc}"
        ) from None


__all__ = ["FORMAT", "JsonContainer", "text_limit"]
