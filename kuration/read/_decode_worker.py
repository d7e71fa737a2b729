"""The child process of :mod:`kuration.read.isolated`: decodes shards it is sent, one at a
time, and answers with each as an npz image (which the parent reads with the npz reader, the
one safe for untrusted bytes) or with the error it met.

Protocol on stdin/stdout, every frame an 8-byte big-endian length and that many bytes: the
worker first writes one ready byte; then per request it reads a JSON header frame
(``container``, ``spec``, ``memory``) and a frame of shard bytes, and writes a status byte
(``K`` or ``E``) followed by one frame (the npz image, or the error message in UTF-8). It
exits at the end of its input. Run as ``python -m kuration.read._decode_worker``; importing
it does nothing.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
from contextlib import contextmanager
from typing import BinaryIO

_LENGTH = struct.Struct(">Q")


def _read_exactly(stream: BinaryIO, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream: BinaryIO) -> bytes | None:
    head = _read_exactly(stream, _LENGTH.size)
    return None if head is None else _read_exactly(stream, _LENGTH.unpack(head)[0])


def _write_all(out: BinaryIO, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[out.write(view):]


def _address_space() -> int | None:
    """This process's mapped address space in bytes (Linux), or None where it cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextmanager
def _memory_limit(allowance: int):
    """Cap the address space at what is mapped now plus ``allowance`` while the block runs, so
    an allocation a crafted shard asks for fails (MemoryError, or an error in the native
    decoder) instead of exhausting the machine. Where the OS gives no figure, no cap."""
    try:
        import resource
    except ImportError:
        yield
        return
    now = _address_space()
    if now is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = now + allowance
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _decode(header: bytes, data: bytes) -> tuple[bytes, bytes]:
    from kuration.errors import KurationError
    from kuration.output.containers import NpzContainer, get_container
    from kuration.output.spec import OutputSpec

    request = json.loads(header)
    name = request["container"]
    try:
        spec = OutputSpec.from_dict(request["spec"])
        container = get_container(name)
        with _memory_limit(int(request["memory"])):
            shard = container.read(data, spec.modalities, presence=spec.presence_mask, max_rows=spec.shard_length)
            image = io.BytesIO()
            NpzContainer().write(image, shard)
        return b"K", image.getvalue()
    except KurationError as exc:
        return b"E", str(exc).encode()
    except MemoryError:
        return b"E", (f"{name} shard: decoding needed more memory than the {int(request['memory'])} bytes a shard "
                      "of this spec is allowed").encode()
    except Exception as exc:  # the isolation boundary: whatever the decoder raised is the shard's fault
        return b"E", f"{name} shard: the decoder failed: {type(exc).__name__}: {exc}".encode()


def main() -> None:
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    source = sys.stdin.buffer
    import kuration.output.containers  # noqa: F401  (imported before the ready byte, not per request)

    _write_all(out, b"R")
    while True:
        header = _read_frame(source)
        data = None if header is None else _read_frame(source)
        if header is None or data is None:
            return
        status, payload = _decode(header, data)
        _write_all(out, status + _LENGTH.pack(len(payload)))
        _write_all(out, payload)


if __name__ == "__main__":
    main()
