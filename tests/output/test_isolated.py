"""The isolated shard decoder's worker: decodes what the in-process reader decodes, and
survives its worker being killed, failing to start, or the process forking."""

from __future__ import annotations

import io
import os
import signal

import numpy as np
import pytest

from kuration.output.containers import get_container
from kuration.output.containers.protocol import ShardFormatError
from kuration.read import isolated
from kuration.read.isolated import IsolatedDecoder, IsolatedDecoderError, decode_isolated
from tests.output.committed_datasets import shard, spec_for


def encoded(container: str, rows: int = 5) -> bytes:
    buffer = io.BytesIO()
    get_container(container).write(buffer, shard(rows))
    return buffer.getvalue()


@pytest.mark.parametrize("container", ["hdf5", "parquet", "npz", "json"])
def test_the_worker_decodes_what_the_container_decodes(container):
    spec, data = spec_for(container), encoded(container)
    here = get_container(container).read(data, spec.modalities, presence=True, max_rows=spec.shard_length)
    there = decode_isolated(spec, container, data)
    assert all(here.arrays[n].tobytes() == there.arrays[n].tobytes() and here.arrays[n].dtype == there.arrays[n].dtype
               for n in here.arrays)
    assert (here.n_steps, here.present.tobytes()) == (there.n_steps, there.present.tobytes())


def test_the_workers_errors_come_back_as_the_containers_own():
    spec = spec_for("hdf5")
    with pytest.raises(ShardFormatError, match=r"^hdf5 shard: not a readable HDF5 file"):
        decode_isolated(spec, "hdf5", b"not an hdf5 file at all")


def test_a_worker_killed_while_idle_is_replaced():
    decoder = IsolatedDecoder()
    spec, data = spec_for("hdf5"), encoded("hdf5")
    try:
        decoder.decode(spec, "hdf5", data)
        first = decoder._proc.pid
        os.kill(first, signal.SIGKILL)
        decoder._proc.wait()
        assert decoder.decode(spec, "hdf5", data).n_steps == 5 and decoder._proc.pid != first
    finally:
        decoder.close()


def test_a_worker_that_cannot_start_is_a_machine_error_not_a_shard_error(monkeypatch):
    monkeypatch.setattr(isolated.sys, "executable", "/bin/false")
    decoder = IsolatedDecoder()
    with pytest.raises(IsolatedDecoderError, match=r"the isolated shard decoder did not start \(exit status 1\)"):
        decoder.decode(spec_for("hdf5"), "hdf5", encoded("hdf5"))
    assert not isinstance(IsolatedDecoderError("x"), ShardFormatError)


def test_a_forked_child_decodes_with_its_own_worker():
    spec, data = spec_for("hdf5"), encoded("hdf5")
    decode_isolated(spec, "hdf5", data)  # the parent's worker is running
    parent_worker = isolated._DECODER._proc.pid
    pid = os.fork()
    if pid == 0:  # the child: its own worker, and the parent's left alone; it never returns into pytest
        code = 1
        try:
            code = 0 if (decode_isolated(spec, "hdf5", data).n_steps == 5
                         and isolated._DECODER._proc.pid != parent_worker) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert isolated._DECODER._proc.pid == parent_worker and decode_isolated(spec, "hdf5", data).n_steps == 5
    assert np.array_equal(decode_isolated(spec, "hdf5", data).arrays["label"], np.arange(5) * 3)
