"""Decoding a shard in a child process, bounded in time and memory, for containers whose
decoders are not safe for untrusted bytes (``hdf5``, ``parquet``; see
``ShardContainer.safe_for_untrusted``).

A dataset's commit chain (sizes and SHA-256 in the manifest, pinned by the commit record) is
integrity, not authentication: whoever can rewrite a shard can rewrite the chain to match.
libhdf5 then parses metadata the sender chose, and a flipped byte in a global-heap object
size was enough to keep it busy for good, holding the GIL, where no Python-side timeout can
reach it. So for an artifact from someone else (``load_committed(..., untrusted=True)``),
such shards are decoded by a worker process:

- the worker gets the shard's bytes and the output spec, decodes them with the container's
  own reader, and answers with the arrays as an npz image, which this process reads with the
  npz reader (the one that is safe for untrusted bytes);
- a decode gets :func:`decode_timeout` seconds (:data:`TIMEOUT_BASE` plus one second per
  :data:`TIMEOUT_BYTES_PER_SECOND` bytes of shard) unless the caller gives its own; past it
  the worker is killed and the read fails with :class:`ShardFormatError`;
- on Linux the worker's address space is capped for the decode at what it had mapped plus
  :func:`memory_allowance` (from the shard's size and the declared shapes), so an allocation
  crafted metadata asks for fails inside the worker;
- a worker that dies (a crash in native code) fails that read, and the next read starts a
  new one.

The worker is started on first use (about a second, importing Kuration; a worker that
cannot start raises :class:`IsolatedDecoderError`, a problem of the machine, not of the
shard), then reused by every thread of this process, one decode at a time; a forked child
starts its own. It exits when this process does. What it does not do: sandbox the decoder (it runs as the same user,
with the same files), or check what npz and json shards do (they are decoded here, and bounded by
the shard's size and the declared shapes).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from kuration.errors import KurationError
from kuration.output.containers import NpzContainer
from kuration.output.containers.protocol import ShardArrays, ShardFormatError
from kuration.output.spec import OutputSpec
from kuration.read._decode_worker import _LENGTH

#: Seconds every isolated decode may take, however small the shard.
TIMEOUT_BASE = 10.0
#: Decode speed assumed for the rest of the time limit: libhdf5 and pyarrow decode an
#: uncompressed shard at several hundred MB/s, so this leaves a wide margin on shared cores.
TIMEOUT_BYTES_PER_SECOND = 20 * 2**20
#: Seconds a new worker may take to start (import numpy, h5py and Kuration).
START_TIMEOUT = 60.0
_CHUNK = 1 << 20


def decode_timeout(size: int) -> float:
    """The default time limit of an isolated decode of a shard of ``size`` bytes."""
    return TIMEOUT_BASE + size / TIMEOUT_BYTES_PER_SECOND


def memory_allowance(spec: OutputSpec, size: int) -> int:
    """What a worker may map beyond its baseline to decode a shard of ``size`` bytes: the
    request and its npz answer (a few copies of the shard and of the declared arrays at
    ``shard_length`` rows), plus room for the decoder's own working memory."""
    declared = spec.shard_length * (sum(m.numpy_dtype.itemsize * math.prod(m.shape) for m in spec.modalities.values())
                                    + 1)
    return 4 * size + 4 * declared + 512 * 2**20


class IsolatedDecoderError(KurationError, RuntimeError):
    """The worker process could not be started (a problem of this machine, not of a shard)."""


class _Timeout(Exception):
    pass


class _WorkerGone(Exception):
    pass


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    """The worker's stdin and stdout; it is started with both as pipes, so neither is None."""
    if proc.stdin is None or proc.stdout is None:
        raise IsolatedDecoderError("the isolated shard decoder was started without its stdin and stdout pipes")
    return proc.stdin, proc.stdout


def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
    """Close this process's ends of the worker's stdin and stdout, those still open."""
    for stream in (proc.stdin, proc.stdout):
        if stream is not None and not stream.closed:
            stream.close()


def _send(fd: int, data: bytes | bytearray | memoryview, deadline: float) -> None:
    view = memoryview(data)
    while view:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([], [fd], [], left)[1]:
            raise _Timeout
        try:
            view = view[os.write(fd, view[:_CHUNK]):]
        except BlockingIOError:
            continue
        except (BrokenPipeError, ConnectionResetError):
            raise _WorkerGone from None


def _receive(fd: int, n: int, deadline: float) -> bytes:
    out = bytearray()
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise _Timeout
        try:
            chunk = os.read(fd, min(_CHUNK, n - len(out)))
        except BlockingIOError:
            continue
        if not chunk:
            raise _WorkerGone
        out += chunk
    return bytes(out)


class IsolatedDecoder:
    """One worker process, started on first use, replaced after a timeout or a crash."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    def decode(self, spec: OutputSpec, container: str, data: bytes | bytearray, *,
               timeout: float | None = None) -> ShardArrays:
        """The shard ``data`` of ``container``, decoded in the worker within ``timeout``
        seconds (default :func:`decode_timeout`); :class:`ShardFormatError` otherwise."""
        limit = decode_timeout(len(data)) if timeout is None else timeout
        header = json.dumps({"container": container, "spec": spec.to_dict(),
                             "memory": memory_allowance(spec, len(data))}).encode()
        with self._lock:
            proc = self._worker()  # a worker that died while idle is replaced here
            deadline = time.monotonic() + limit
            stdin, stdout = _pipes(proc)
            send, receive = stdin.fileno(), stdout.fileno()
            try:
                _send(send, _LENGTH.pack(len(header)) + header + _LENGTH.pack(len(data)), deadline)
                _send(send, data, deadline)
                status = _receive(receive, 1, deadline)
                payload = _receive(receive, _LENGTH.unpack(_receive(receive, _LENGTH.size, deadline))[0], deadline)
            except _Timeout:
                self._stop(kill=True)
                raise ShardFormatError(
                    f"{container} shard: decoding did not finish within {limit:g} s, so the isolated decoder was "
                    "stopped"
                ) from None
            except _WorkerGone:
                code = self._stop(kill=True)
                raise ShardFormatError(
                    f"{container} shard: the isolated decoder exited ({_describe(code)}) while decoding it"
                ) from None
        if status != b"K":
            raise ShardFormatError(payload.decode(errors="replace"))
        return NpzContainer().read(payload, spec.modalities, presence=spec.presence_mask, max_rows=spec.shard_length)

    def _worker(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop(kill=True)
        root = str(Path(__file__).resolve().parents[2])  # where this kuration is importable from
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])]),
               # a capped address space needs few malloc arenas and pyarrow on the system allocator
               "MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        proc = subprocess.Popen([sys.executable, "-m", "kuration.read._decode_worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, close_fds=True)
        stdin, stdout = _pipes(proc)
        os.set_blocking(stdin.fileno(), False)
        os.set_blocking(stdout.fileno(), False)
        self._proc = proc
        try:
            ready = _receive(stdout.fileno(), 1, time.monotonic() + START_TIMEOUT)
        except (_Timeout, _WorkerGone):
            ready = b""
        if ready != b"R":
            code = self._stop(kill=True)
            raise IsolatedDecoderError(f"the isolated shard decoder did not start ({_describe(code)}); run "
                                       f"{sys.executable} -m kuration.read._decode_worker to see why")
        return proc

    def _stop(self, *, kill: bool) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if kill:
            proc.kill()
        else:
            _pipes(proc)[0].close()  # the worker exits at the end of its input
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        _close_pipes(proc)
        return code

    def close(self) -> None:
        with self._lock:
            self._stop(kill=False)

    def _after_fork_in_child(self) -> None:
        # The parent's worker and lock are the parent's: drop our copies of its pipes (so the
        # worker sees the end of its input when the parent goes) and start afresh.
        self._lock = threading.Lock()
        proc, self._proc = self._proc, None
        if proc is not None:
            _close_pipes(proc)


def _describe(code: int | None) -> str:
    if code is None:
        return "no exit status"
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


_DECODER = IsolatedDecoder()
atexit.register(_DECODER.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_DECODER._after_fork_in_child)


def decode_isolated(spec: OutputSpec, container: str, data: bytes | bytearray, *,
                    timeout: float | None = None) -> ShardArrays:
    """:meth:`IsolatedDecoder.decode` on this process's worker."""
    return _DECODER.decode(spec, container, data, timeout=timeout)


__all__ = ["IsolatedDecoder", "IsolatedDecoderError", "START_TIMEOUT", "TIMEOUT_BASE", "TIMEOUT_BYTES_PER_SECOND",
           "decode_isolated",
           "decode_timeout", "memory_allowance"]
