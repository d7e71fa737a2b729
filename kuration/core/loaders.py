"""Seed 000's numpy-only reader: :func:`iter_shards`, :func:`shard_entries` and
:func:`read_shard_arrays` (implemented in :mod:`kuration.read.loaders`).

Importing it loads numpy and the standard library only; h5py or pyarrow are imported when a
shard of that container is read, and fsspec when a dataset is given as a URL. A training
node reading npz or json shards needs nothing else (``tests/read/test_light_reader.py``
checks what each import loads; ``bench/bench_import.py`` times it against ``import numpy``).
"""

from kuration.read.loaders import ShardEntry, iter_shards, read_shard_arrays, shard_entries

__all__ = ["ShardEntry", "iter_shards", "read_shard_arrays", "shard_entries"]
