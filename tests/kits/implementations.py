"""Kit subclasses over implementations in the tree, without the ``Test`` prefix, so that
importing one collects nothing: each is made a test class where it is used, by
``tests/sources``, ``tests/read`` and the plugin modules the kit tests write
(``class TestGood(ParquetEpisodes): pass``)."""

from __future__ import annotations

import io

import fsspec
import numpy as np
import pytest

from kuration.read import load_committed
from kuration.sources import ParquetTickAdapter
from kuration.testing import AdapterContract, ShardSourceContract, WholeFileProviderContract
from tests.sources._parquet_files import write_episode


class ParquetEpisodes(AdapterContract):
    """``ParquetTickAdapter`` over one ``ep_<i>.parquet`` per episode, frames in ``frames/``."""

    media_provider = "npy_index"

    def write(self, root, episodes):
        for old in root.glob("*.parquet"):
            old.unlink()
        for i, episode in enumerate(episodes):
            write_episode(root, f"ep_{i:03d}", episode)

    def make_adapter(self, root, schema):
        return ParquetTickAdapter(root, schema)

    def expected_ids(self, count):
        return [f"ep_{i:03d}.parquet" for i in range(count)]


class NpyFiles(WholeFileProviderContract):
    """``npy_index`` over one ``media/<name>.npy`` per array in a local folder."""

    provider_name = "npy_index"

    def write(self, folder, arrays):
        (folder / "media").mkdir(parents=True)
        for name, array in arrays.items():
            np.save(folder / "media" / f"{name}.npy", array)
        return str(folder)

    def ref(self, name, row):
        return f"media/{name}.npy#{row}"

    def missing_root(self, folder):
        return str(folder / "gone")


class NpyFilesInMemory(NpyFiles):
    """``npy_index`` over the same files in fsspec's in-memory filesystem, at the test's
    temporary folder's path (so no two tests share one), removed when the test ends."""

    @pytest.fixture(autouse=True)
    def _forget(self, tmp_path):
        yield
        fs = fsspec.filesystem("memory")
        if fs.exists(str(tmp_path)):
            fs.rm(str(tmp_path), recursive=True)

    def write(self, folder, arrays):
        fs = fsspec.filesystem("memory")
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            fs.pipe_file(f"{folder}/media/{name}.npy", buffer.getvalue())
        return f"memory://{folder}"

    def missing_root(self, folder):
        return f"memory://{folder}/gone"

    def remove_store(self, folder):
        fsspec.filesystem("memory").rm(str(folder), recursive=True)
        return folder


class CommittedDatasets(ShardSourceContract):
    """Committed datasets opened with ``load_committed`` under ``self.base`` (a local folder,
    or a URL a subclass sets)."""

    @pytest.fixture(autouse=True)
    def _base(self, tmp_path):
        self.base = str(tmp_path)

    def make_root(self, place):
        return f"{self.base}/{place}"

    def open_source(self, root, *, untrusted, decode_timeout):
        return load_committed(root, untrusted=untrusted, decode_timeout=decode_timeout)
