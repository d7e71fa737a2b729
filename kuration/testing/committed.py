"""Small committed datasets for the kits that read one (:class:`ShardSourceContract`,
:class:`RolloutRecipeContract`): shards staged and sealed through a destination, then the
manifest, config and commit record published last, as the writer does, with nothing scored
or planned.

What it deliberately does not do: plan spans, reuse shards or take the writer's lease; a
dataset written here is what a finished write leaves, not a way to make one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kuration.canonical.hashing import readable_json
from kuration.output.commit_protocol import publish_committed
from kuration.output.containers import get_container
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import Destination
from kuration.output.spec import OutputSpec

#: The run fingerprint the commit record of a kit's dataset carries.
KIT_RUN = "f" * 64


@dataclass(frozen=True)
class KitShard:
    """One shard of a kit's dataset: its split, its arrays and where it came from.
    ``container`` is the spec's when None."""

    split: str
    arrays: ShardArrays
    source_id: str = "src"
    entity_id: str = "int:0"
    container: str | None = None


@dataclass(frozen=True)
class KitDataset:
    """What :func:`write_committed_dataset` wrote: the spec, the manifest entries in order
    and each entry's shard."""

    spec: OutputSpec
    entries: tuple[Mapping[str, Any], ...]
    shards: tuple[KitShard, ...] = field(repr=False)


def write_committed_dataset(destination: Destination, spec: OutputSpec, shards: Sequence[KitShard], *,
                            provenance: Mapping[str, Any] | None = None) -> KitDataset:
    """Write ``shards`` (each to ``<split>/<source>_<i>_shard0000<ext>``) and commit them
    under ``destination``. ``provenance`` goes into ``config.json`` as the writer's does."""
    entries = []
    for i, shard in enumerate(shards):
        name = shard.container or spec.container
        box = get_container(name)
        path = f"{shard.split}/{shard.source_id.replace('/', '_')}_{i:02d}_shard0000{box.extension}"
        written = destination.stage_shard(path, box, shard.arrays).seal()
        entries.append({"path": path, "split": shard.split, "source_id": shard.source_id,
                        "entity_id": shard.entity_id, "span_index": None, "shard_index": i,
                        "n_steps": shard.arrays.n_steps, "rows": shard.arrays.rows,
                        "padded": shard.arrays.n_steps < shard.arrays.rows, "container": name,
                        "bytes": written.bytes, "sha256": written.sha256})
    manifest = {"format": 1, "output": spec.to_dict(), "entries": entries}
    config = {"job": {}, "provenance": {"run_fingerprint": KIT_RUN, **(provenance or {})}}
    publish_committed(destination, run_fingerprint=KIT_RUN, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json(config))
    return KitDataset(spec, tuple(entries), tuple(shards))


__all__ = ["KIT_RUN", "KitDataset", "KitShard", "write_committed_dataset"]
