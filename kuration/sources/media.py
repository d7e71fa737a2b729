"""Media providers: decode lazy media references into arrays, in bounded batches.

A media column holds references (a path, a key, ``file#index``), never pixels. A provider,
registered by name, turns a batch of references into one ``(N, *shape)`` array of the
declared dtype. Registration by name is also how worker processes rebuild providers.
A column's declaration (:class:`MediaSpec`) lives here, below :mod:`kuration.sources.schema`,
which reads it and checks its provider against this registry.

Built in: ``npy_index``, whose references point into ``.npy`` arrays and ``.npz`` archives
relative to the adapter's root (local or fsspec URL; grammar in :class:`NpyIndexProvider`).
Adapters over episode stores register their own (``hdf5_rows``, ``zarr_rows``).

Contract every provider keeps: a ``None`` reference is an absent entity's slot (see
:mod:`kuration.sources.tracks`) and decodes to zeros; anything else that cannot be decoded into
the declared dtype and shape raises :class:`MediaError` naming the source, the column and
the reference (its batch position in ``MediaError.reference``, which the shard writer
turns into the track row). Providers never resize, convert colour spaces or guess.

Providers are built for every batch, so a provider that reads whole files keeps them in
the active :func:`media_cache` (through :func:`cached`): the dataset writer opens one for
each write, so each file is read once per write while the cache's byte bound allows, and
never reused by another write (a file rewritten in between is read again).
"""

from __future__ import annotations

import importlib
import io
import threading
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from kuration import storage
from kuration.errors import RecordingError
from kuration.numbers import bounded_index, is_digits


@dataclass(frozen=True)
class MediaSpec:
    """A lazy media column: references decoded by ``provider`` into ``dtype`` / ``shape``."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    provider: str

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": list(self.shape), "provider": self.provider}


class MediaError(RecordingError):
    """A media reference cannot be decoded into its declared dtype and shape. ``reference``
    is the position in the decoded batch of the reference at fault, when there is one."""

    def __init__(self, message: str, *, reference: int | None = None) -> None:
        super().__init__(message)
        self.reference = reference


class MediaProvider(Protocol):
    """Decodes references. A provider whose references name files may also be a
    :class:`MediaDependencies`, so an adapter can fold those files into the source's identity."""

    def decode(self, refs: Sequence[str], spec: MediaSpec, *, root: str, source_id: str) -> np.ndarray: ...


@runtime_checkable
class MediaDependencies(Protocol):
    """A provider that can say which files a batch of references would read."""

    def dependencies(self, refs: Sequence[str], spec: MediaSpec, *, root: str) -> list[str]: ...


_PROVIDERS: dict[str, Callable[..., MediaProvider]] = {}


def register_media_provider(name: str, factory: Callable[..., MediaProvider]) -> None:
    """Register ``factory`` under ``name`` (what a schema's ``media.<col>.provider`` names)."""
    _PROVIDERS[name] = factory


#: Providers whose module registers them on import, imported on first use of the name.
_REGISTERED_ON_IMPORT = {"hdf5_rows": "kuration.sources.robomimic_hdf5", "zarr_rows": "kuration.sources.zarr_replay"}


def media_provider_names() -> list[str]:
    """Every provider name a schema may declare: the registered ones, and the built-in ones
    whose module registers them on first use."""
    return sorted(set(_PROVIDERS) | set(_REGISTERED_ON_IMPORT))


def unregister_media_provider(name: str) -> None:
    """Remove provider ``name`` (no error when absent). Mostly for tests."""
    _PROVIDERS.pop(name, None)


def media_provider_module(name: str) -> str | None:
    """The module that registered provider ``name`` (what a worker process imports to find
    it by name), or ``None`` when no provider by that name is registered."""
    factory = _PROVIDERS.get(name)
    return None if factory is None else getattr(factory, "__module__", None)


def media_provider_factory(name: str) -> Callable[..., MediaProvider] | None:
    """The factory registered under ``name`` (a built-in one's module imported first), or
    None: the code that decodes a schema's media, which a shard's content key covers."""
    if name not in _PROVIDERS and name in _REGISTERED_ON_IMPORT:
        importlib.import_module(_REGISTERED_ON_IMPORT[name])
    return _PROVIDERS.get(name)


def get_media_provider(name: str, **options) -> MediaProvider:
    factory = media_provider_factory(name)
    if factory is None:
        raise MediaError(f"no media provider named {name!r}; registered: {media_provider_names()}. "
                         "Call kuration.sources.media.register_media_provider first (in every worker process).")
    return factory(**options)


def group_row_refs(
    refs: Sequence[str | None], spec: MediaSpec, *, source_id: str, form: str
) -> tuple[np.ndarray, dict[str, list[tuple[int, int]]]]:
    """The zeroed output batch, and ``{path: [(batch position, row)]}`` for the references.

    ``None`` (an absent entity's slot) stays zero; it is masked by ``_present`` downstream.
    ``form`` describes the reference syntax for error messages."""
    out = np.zeros((len(refs), *spec.shape), dtype=spec.dtype)
    by_path: dict[str, list[tuple[int, int]]] = {}
    for i, ref in enumerate(refs):
        if ref is None:
            continue
        path, row = parse_row_ref(ref, spec, source_id, i, form)
        by_path.setdefault(path, []).append((i, row))
    return out, by_path


#: Decoded media a write keeps by default (see :func:`media_cache`).
DEFAULT_MEDIA_CACHE_BYTES = 256 << 20


class MediaCache:
    """Decoded media arrays by key, least recently used out first, holding at most
    ``max_bytes``; an array larger than that is handed out and not kept. Arrays are
    read-only, so no caller can change what another one gets. Thread-safe."""

    def __init__(self, max_bytes: int = DEFAULT_MEDIA_CACHE_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
            raise ValueError(f"media cache max_bytes must be an int >= 0, got {max_bytes!r}")
        self.max_bytes = max_bytes
        self.nbytes = 0
        self.hits = self.misses = 0
        self._items: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, load: Callable[[], np.ndarray]) -> np.ndarray:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                self.hits += 1
                return self._items[key]
            self.misses += 1
        value = load()  # outside the lock: one slow read does not hold up lookups of other keys
        value.flags.writeable = False
        with self._lock:
            if value.nbytes <= self.max_bytes and key not in self._items:
                self._items[key] = value
                self.nbytes += value.nbytes
                while self.nbytes > self.max_bytes:
                    _, dropped = self._items.popitem(last=False)
                    self.nbytes -= dropped.nbytes
        return value


_ACTIVE_CACHE: ContextVar[MediaCache | None] = ContextVar("kuration_media_cache", default=None)


@contextmanager
def media_cache(max_bytes: int | None = None) -> Iterator[MediaCache]:
    """Keep decoded media files for the ``with`` block, in this thread (and the context it
    runs in): what a dataset write does around its shards. Inside a block that already has
    one, that one is used (its bound holds), so wrapping a write in ``with
    media_cache(max_bytes=...)`` sets the write's bound."""
    current = _ACTIVE_CACHE.get()
    if current is not None:
        yield current
        return
    cache = MediaCache(DEFAULT_MEDIA_CACHE_BYTES if max_bytes is None else max_bytes)
    token = _ACTIVE_CACHE.set(cache)
    try:
        yield cache
    finally:
        _ACTIVE_CACHE.reset(token)


def cached(key: Hashable, load: Callable[[], np.ndarray]) -> np.ndarray:
    """``load()``, kept in the active :func:`media_cache` under ``key`` (a key naming what
    was read, e.g. its URL); with no cache active, just ``load()``."""
    cache = _ACTIVE_CACHE.get()
    return load() if cache is None else cache.get(key, load)


NPY_INDEX_FORM = "'<file>.npy#<row>' (or '<file>.npz#<row>', '<file>.npz#<key>/<row>', '<file>.npz#<key>')"


def _reference_failure(spec: MediaSpec, source_id: str, index: int) -> Callable[[str], MediaError]:
    """How a problem with reference ``index`` of a batch is raised: a :class:`MediaError`
    naming the source, the media column and the reference."""
    def fail(problem: str) -> MediaError:
        return MediaError(f"{source_id}: media {spec.name!r}, reference {index}: {problem}", reference=index)
    return fail


def _row_number(text: str, fail: Callable[[str], MediaError]) -> int:
    """The row ``text`` (ASCII digits: ``"\u0661"`` is a decimal to Python, but no row) names,
    refused above int64 (see :func:`kuration.numbers.bounded_index`)."""
    row = bounded_index(text)
    if row is None:
        raise fail(f"row {text[:20]}... ({len(text)} digits) is out of range")
    return row


class NpyIndexProvider:
    """References relative to the adapter's root:

    - ``frames/rec_01.npy#17``: row 17 of the array in a ``.npy`` file;
    - ``frames/rec_01.npz#17``: row 17 of the only array in a ``.npz`` archive;
    - ``frames/rec_01.npz#car_7/17``: row 17 of the archive's array ``car_7``;
    - ``frames/rec_01.npz#frame_000017``: the archive's array ``frame_000017``, whole, as
      one item (its shape is the declared shape).

    The file is everything before the last ``#`` (a file ending in ``.npz``, any case, is an
    archive). After it, in an archive: digits are a row; ``<key>/<digits>`` a row of that
    key; anything else a key. So a key cannot contain ``#``, and a key that is all digits
    or ends in ``/<digits>`` can only be read by rows. Each file, and each archive member,
    is read once per batch, and once per write inside a :func:`media_cache`."""

    def dependencies(self, refs: Sequence[str], spec: MediaSpec, *, root: str) -> list[str]:
        paths = {str(ref).rpartition("#")[0] for ref in refs if ref is not None}
        return sorted(storage.join_url(root, *p.split("/")) for p in paths if p)

    def decode(self, refs: Sequence[str | None], spec: MediaSpec, *, root: str, source_id: str) -> np.ndarray:
        out = np.zeros((len(refs), *spec.shape), dtype=spec.dtype)
        # (file, key, whole array?) -> [(batch position, row)]; a whole array is row 0 of itself
        wanted_by_array: dict[tuple[str, str | None, bool], list[tuple[int, int]]] = {}
        for i, ref in enumerate(refs):
            if ref is None:
                continue
            path, key, row = _parse_npy_ref(ref, spec, source_id, i)
            wanted_by_array.setdefault((path, key, row is None), []).append((i, 0 if row is None else row))
        for (path, key, whole), wanted in wanted_by_array.items():
            url = storage.join_url(root, *path.split("/"))
            array = _npy_array(url, key, spec, source_id, wanted[0][0])
            fill_rows(out, array[None] if whole else array, wanted, spec, source_id,
                      url if key is None else f"{url}#{key}")
        return out


def _parse_npy_ref(ref: object, spec: MediaSpec, source_id: str, index: int) -> tuple[str, str | None, int | None]:
    """``(file, key, row)``: key None for a ``.npy`` file, ``""`` for an archive's only
    array; row None for a whole-array item."""
    fail = _reference_failure(spec, source_id, index)
    path, sep, fragment = str(ref).rpartition("#")
    if not isinstance(ref, str) or not sep or not path or not fragment:
        raise fail(f"{ref!r} is not {NPY_INDEX_FORM}")
    if not path.lower().endswith(".npz"):
        if not is_digits(fragment):
            raise fail(f"{ref!r} is not {NPY_INDEX_FORM}")
        return path, None, _row_number(fragment, fail)
    if is_digits(fragment):
        return path, "", _row_number(fragment, fail)
    key, slash, row = fragment.rpartition("/")
    if slash and key and is_digits(row):
        return path, key, _row_number(row, fail)
    return path, fragment, None


def _npy_array(url: str, key: str | None, spec: MediaSpec, source_id: str, index: int) -> np.ndarray:
    """The array a reference reads (the file's, or the archive member's), from the active
    media cache when it holds it."""
    fail = _reference_failure(spec, source_id, index)
    if key is None:
        return cached(("npy_index", url), lambda: _load_npy(url, fail))
    return cached(("npy_index", url, key), lambda: _load_npz_member(url, key, fail))


#: What numpy and zipfile raise on a torn or foreign file (zipfile.BadZipFile is neither a
#: ValueError nor an OSError).
_UNREADABLE = (ValueError, OSError, EOFError, zipfile.BadZipFile, zlib.error)


def _read(url: str, fail: Callable[[str], MediaError]) -> bytes:
    try:
        return storage.read_bytes(url)
    except FileNotFoundError:
        raise fail(f"file {url} not found") from None
    except OSError as exc:
        raise fail(f"cannot read {url} ({exc})") from None


def _load(data, url: str, fail: Callable[[str], MediaError], what: str):
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except _UNREADABLE as exc:
        raise fail(f"{url} is not a readable {what} ({exc})") from None


def _load_npy(url: str, fail: Callable[[str], MediaError]) -> np.ndarray:
    loaded = _load(_read(url, fail), url, fail, ".npy array")
    if isinstance(loaded, np.lib.npyio.NpzFile):
        keys = sorted(loaded.files)
        loaded.close()
        raise fail(f"{url} is an .npz archive (arrays {keys[:5]}), not a .npy array; give the file an '.npz' name and "
                   "address it as '<file>.npz#<key>/<row>'")
    return loaded


def _load_npz_member(url: str, key: str, fail: Callable[[str], MediaError]) -> np.ndarray:
    # The archive's bytes are cached too: the members of one archive (one per vehicle, say)
    # are wanted by different shards, and the file is then read once, not once per member.
    data = cached(("npy_index:archive", url), lambda: np.frombuffer(_read(url, fail), np.uint8))
    loaded = _load(data, url, fail, ".npz archive")
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise fail(f"{url} is a .npy array, not an .npz archive; name it '.npy' and address rows as '<file>.npy#<row>'")
    with loaded:
        keys = sorted(loaded.files)
        if key == "" and len(keys) != 1:
            raise fail(f"{url} holds {len(keys)} arrays {keys[:5]}, so '#<row>' is ambiguous; name the array: "
                       "'<file>.npz#<key>/<row>'")
        name = keys[0] if key == "" else key
        if name not in keys:
            raise fail(f"{url} has no array {name!r}; it has {keys[:10]}{'...' if len(keys) > 10 else ''}")
        try:
            member = loaded[name]
        except _UNREADABLE as exc:
            raise fail(f"array {name!r} of {url} is not readable ({exc})") from None
    if not isinstance(member, np.ndarray):  # numpy hands back a member that is no .npy file as raw bytes
        raise fail(f"array {name!r} of {url} is not readable (the archive member is not a .npy file)")
    return member


def parse_row_ref(ref: object, spec: MediaSpec, source_id: str, index: int, form: str) -> tuple[str, int]:
    """Split ``<where>#<row>`` into ``(where, row)``, or raise naming the reference."""
    fail = _reference_failure(spec, source_id, index)
    path, sep, row = str(ref).rpartition("#")
    if not isinstance(ref, str) or not sep or not path or not is_digits(row):
        raise fail(f"{ref!r} is not {form}")
    return path, _row_number(row, fail)


def fill_rows(
    out: np.ndarray, array, wanted: list[tuple[int, int]], spec: MediaSpec, source_id: str, where: str
) -> None:
    """Copy ``array[row]`` into ``out[i]`` for each ``(i, row)``, checking shape, dtype and range.

    ``array`` is anything indexable with a sorted list of rows that has ``shape`` and
    ``dtype`` (a numpy, h5py or zarr array), so only the wanted rows are read."""
    first = wanted[0][0] if wanted else None  # the reference that reads ``where`` first
    if tuple(array.shape[1:]) != spec.shape:
        raise MediaError(
            f"{source_id}: media {spec.name!r}: {where} holds items of shape {list(array.shape[1:])}, "
            f"declared {list(spec.shape)}", reference=first,
        )
    if not np.can_cast(array.dtype, out.dtype, casting="same_kind"):
        raise MediaError(f"{source_id}: media {spec.name!r}: {where} holds {array.dtype}, declared {spec.dtype}",
                         reference=first)
    for i, row in wanted:
        if row >= array.shape[0]:
            raise _reference_failure(spec, source_id, i)(f"row {row} out of range, {where} has {array.shape[0]} rows")
    rows = sorted({row for _, row in wanted})
    if not rows:
        return
    if rows[-1] - rows[0] < 2 * len(rows):  # dense: one contiguous read
        block = np.asarray(array[rows[0]: rows[-1] + 1])
        offset = {row: row - rows[0] for row in rows}
    else:  # sparse: read only the wanted rows (increasing, as h5py requires)
        block = np.asarray(array[rows])
        offset = {row: k for k, row in enumerate(rows)}
    for i, row in wanted:
        out[i] = block[offset[row]]


register_media_provider("npy_index", NpyIndexProvider)


def decode_in_batches(
    provider: MediaProvider, refs: Sequence[str], spec: MediaSpec, *, root: str, source_id: str, batch_size: int = 256
):
    """Yield ``(start, array)`` for consecutive batches of at most ``batch_size`` references,
    so memory stays bounded by one batch whatever the track length."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    for start in range(0, len(refs), batch_size):
        yield start, provider.decode(refs[start: start + batch_size], spec, root=root, source_id=source_id)


__all__ = [
    "DEFAULT_MEDIA_CACHE_BYTES", "MediaCache", "MediaDependencies", "MediaError", "MediaProvider", "MediaSpec",
    "NPY_INDEX_FORM", "NpyIndexProvider",
    "cached", "decode_in_batches", "fill_rows", "get_media_provider", "group_row_refs", "media_cache",
    "media_provider_factory", "media_provider_module", "media_provider_names", "parse_row_ref",
    "register_media_provider", "unregister_media_provider",
]
