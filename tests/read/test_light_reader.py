"""The read path a training node installs alone (issue 26): what importing the seed's reader,
and reading each container with it, loads. Each check runs in a fresh interpreter, since
this one has long since imported everything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kuration.read import shard_entries
from tests.output.committed_datasets import build

#: Third-party distributions the read path must not load unless a shard or URL needs them.
HEAVY = ("pandas", "pyarrow", "pandera", "fsspec", "h5py", "zarr", "dagster", "torch", "rich", "s3fs", "pydantic")

_PROBE = """
import json, sys
before = set(sys.modules)
{setup}
loaded = {{m.split(".")[0] for m in sys.modules}} - set(sys.stdlib_module_names)
print(json.dumps(sorted(m for m in loaded if not m.startswith("_"))))
"""


def third_party_loaded(setup: str) -> set[str]:
    """The top-level non-standard-library modules loaded after running ``setup`` in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _PROBE.format(setup=setup)], capture_output=True, text=True,
                          check=True)
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("statement", ["import kuration.core.loaders", "from kuration import iter_shards",
                                       "from kuration.read import iter_shards, load_committed, verify_dataset",
                                       "import kuration"])
def test_importing_the_reader_loads_numpy_and_the_standard_library_only(statement):
    assert third_party_loaded(statement) <= {"kuration", "numpy"}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("light")
    return {container: build(root / container, container) for container in ("npz", "json", "hdf5", "parquet")}


#: What reading a dataset of each container may add: its container's library, nothing else
#: (pyarrow brings its own imports, pandas among them, when it converts columns to numpy).
MAY_LOAD = {"npz": set(), "json": set(), "hdf5": {"h5py"}, "parquet": {"pyarrow", "pandas", "dateutil", "pytz", "six"}}


@pytest.mark.parametrize("container", sorted(MAY_LOAD))
def test_reading_a_container_loads_only_its_library(datasets, container):
    shards = len(shard_entries(datasets[container]))
    setup = ("from kuration.core.loaders import iter_shards\n"
             f"assert sum(1 for _ in iter_shards({str(datasets[container])!r})) == {shards}")
    loaded = third_party_loaded(setup)
    assert loaded - {"kuration", "numpy", "cython_runtime"} <= MAY_LOAD[container]
    if container in ("hdf5", "parquet"):
        assert {"h5py" if container == "hdf5" else "pyarrow"} <= loaded, "the probe read no shard"


def test_a_dataset_given_as_a_url_loads_fsspec(datasets):
    shards = len(shard_entries(datasets["npz"]))
    setup = ("from kuration.core.loaders import iter_shards\n"
             f"assert sum(1 for _ in iter_shards('local://' + {str(datasets['npz'])!r})) == {shards}")
    assert "fsspec" in third_party_loaded(setup)


def test_the_seed_paths_are_the_read_sides_objects():
    import kuration
    import kuration.core.loaders as loaders
    from kuration.read import loaders as implementation

    assert loaders.iter_shards is implementation.iter_shards is kuration.iter_shards
    assert loaders.shard_entries is implementation.shard_entries
    assert loaders.read_shard_arrays is implementation.read_shard_arrays
    pytest.importorskip("torch")
    from kuration.core.torch import ShardDataset, pad_collate
    from kuration.torch import ShardDataset as Implemented, pad_collate as implemented_collate

    assert ShardDataset is Implemented and pad_collate is implemented_collate


def test_the_heavy_list_names_what_the_full_install_has():
    """The probe above proves nothing about a library that is not installed: each one it
    guards against must be importable in the test environment."""
    import importlib.util

    missing = [name for name in HEAVY if importlib.util.find_spec(name) is None]
    assert missing == []
