"""``RolloutRecipeContract``: what every :class:`~kuration.rollouts.RolloutRecipe` promises.

A recipe turns one committed shard's arrays into rollout chains. A test module subclasses the
kit once per recipe (``class TestMine(RolloutRecipeContract)``) and supplies the recipe and
shard arrays it makes chains from; the kit commits those shards as a dataset's train split
and checks, directly and through :func:`~kuration.rollouts.rollout_records_from_dataset` and
the store writer:

* its members are what the protocol says: a non-empty ``recipe_id``; ``params()`` a JSON-able
  mapping, the same on every call and for a recipe built alike; ``reason_codes`` names mapped
  to distinct bits 0..31; ``required_modalities`` a tuple of names; a retention policy the
  store writer knows;
* the dataset becomes chains, each item a record or a non-empty batch whose source is the
  shard it came from, and the store written from them passes
  :func:`~kuration.rollouts.validate_rollout_zarr_store` with as many rollouts and steps;
* every candidate's reason bits are bits the recipe declares;
* a shard's chains depend on that shard alone: the same on a second call, after another
  shard, and from a recipe built alike;
* the required modalities (and ``_present``) are enough: with every other modality left out
  a shard gives as many chains and steps (an optional payload may then be missing);
* a shard without rows gives no items.

A subclass supplies ``make_recipe()`` and ``shards()``: the train shards' arrays, each a
mapping of modality name to rows (``(rows, *shape)``, every shard with the same names,
dtypes and shapes), with ``"_present"`` (bool per row) when the dataset has a presence mask.
The spec is made from them; the recipe must make at least one chain from them.

What it does not check: what the labels mean or whether the recipe's actions suit the
domain (the recipe's own tests' job), or the split binding, which the generation checks
whatever the recipe.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kuration.canonical.hashing import canonical_json
from kuration.output.containers.protocol import ShardArrays
from kuration.output.destinations import LocalDestination
from kuration.output.spec import PRESENT, OutputSpec
from kuration.rollouts import (
    RolloutChainBatch, RolloutRecipe, RolloutSourceRef, RolloutWriteRecord, rollout_records_from_dataset,
    validate_rollout_zarr_store, write_rollout_zarr_store,
)
from kuration.rollouts.config import FIELD_RETENTION_POLICIES
from kuration.testing.committed import KitDataset, KitShard, write_committed_dataset

#: Bits a reason-code table may use (the store keeps them in a uint32).
REASON_BITS = 32


def comparable(value: Any) -> Any:
    """``value`` (records, batches, arrays, floats) in a form ``==`` compares exactly: arrays
    and floats by their bits, so NaN equals NaN and -0.0 differs from 0.0."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, tuple(comparable(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, np.ndarray | np.generic):
        array = np.asarray(value)
        return array.dtype.str, array.shape, array.tobytes()
    if isinstance(value, float):
        return "float", float(value).hex() if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), comparable(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(comparable(v) for v in value)
    return value


def chain_shape(items: Sequence[Any]) -> list[tuple[int, ...]]:
    """Each item's chain lengths: how many chains, and how many steps each."""
    return [tuple(int(n) for n in item.chain_lengths) if isinstance(item, RolloutChainBatch) else (len(item.steps),)
            for item in items]


def kit_spec(shard: Mapping[str, np.ndarray], rows: int) -> OutputSpec:
    """An npz spec declaring each array of ``shard`` as a field modality."""
    modalities = {name: {"dtype": array.dtype.name, "shape": list(array.shape[1:]), "source": f"field:{name}"}
                  for name, array in shard.items() if name != PRESENT}
    return OutputSpec.from_dict({"shard_length": rows, "short_policy": "pad", "container": "npz",
                                 "presence_mask": PRESENT in shard, "modalities": modalities})


def padded(shard: Mapping[str, np.ndarray], rows: int) -> ShardArrays:
    """``shard`` padded with zero, absent rows to ``rows``."""
    steps = len(next(array for name, array in shard.items() if name != PRESENT))
    arrays = {}
    for name, array in shard.items():
        if name != PRESENT:
            arrays[name] = np.zeros((rows, *array.shape[1:]), array.dtype)
            arrays[name][:steps] = array
    present = None
    if PRESENT in shard:
        present = np.zeros(rows, bool)
        present[:steps] = shard[PRESENT]
    return ShardArrays(arrays, present, steps)


class RolloutRecipeContract(abc.ABC):
    @abc.abstractmethod
    def make_recipe(self) -> RolloutRecipe:
        ...

    @abc.abstractmethod
    def shards(self) -> Sequence[Mapping[str, np.ndarray]]:
        ...

    # ---- fixtures and helpers ---------------------------------------------------------

    @pytest.fixture
    def dataset(self, tmp_path) -> tuple[Path, KitDataset]:
        shards = list(self.shards())
        rows = max(len(next(a for n, a in s.items() if n != PRESENT)) for s in shards)
        spec = kit_spec(shards[0], rows)
        out = tmp_path / "dataset"
        written = write_committed_dataset(LocalDestination(out), spec, [
            KitShard("train", padded(shard, rows), source_id=f"rec_{i}", entity_id=f"str:'drone_{i}'")
            for i, shard in enumerate(shards)])
        return out, written

    def shard_inputs(self, written: KitDataset) -> list[tuple[dict[str, np.ndarray], RolloutSourceRef]]:
        """What ``rollout_records_from_dataset`` hands the recipe for each shard: the
        arrays trimmed to the shard's steps, and the shard as a source."""
        out = []
        for entry, shard in zip(written.entries, written.shards, strict=True):
            steps = shard.arrays.n_steps
            arrays = {name: array[:steps] for name, array in shard.arrays.arrays.items()}
            if shard.arrays.present is not None:
                arrays[PRESENT] = shard.arrays.present[:steps]
            source = RolloutSourceRef(shard_path=entry["path"], shard_sha256=entry["sha256"],
                                      entity=entry["entity_id"], split=entry["split"], n_states=steps)
            out.append((arrays, source))
        return out

    # ---- the members ------------------------------------------------------------------

    def test_the_members_are_what_the_protocol_says(self, dataset):
        recipe, again = self.make_recipe(), self.make_recipe()
        assert isinstance(recipe, RolloutRecipe)
        assert isinstance(recipe.recipe_id, str) and recipe.recipe_id and recipe.recipe_id == again.recipe_id
        params = recipe.params()
        assert isinstance(params, Mapping)
        assert canonical_json(params) == canonical_json(recipe.params()) == canonical_json(again.params())
        codes = recipe.reason_codes
        assert isinstance(codes, Mapping) and codes, "a recipe declares at least one reason"
        assert all(isinstance(name, str) and name for name in codes)
        bits = list(codes.values())
        assert all(type(bit) is int and 0 <= bit < REASON_BITS for bit in bits), codes
        assert len(set(bits)) == len(bits), f"two reasons share a bit: {codes}"
        modalities = recipe.required_modalities
        assert isinstance(modalities, tuple) and all(isinstance(m, str) for m in modalities)
        declared = dataset[1].spec.modalities
        assert set(modalities) <= set(declared), f"shards() lacks required modalities {set(modalities) - set(declared)}"
        assert recipe.field_retention_policy in FIELD_RETENTION_POLICIES

    # ---- chains and the store ---------------------------------------------------------

    def test_the_dataset_becomes_a_valid_store(self, dataset, tmp_path):
        out, written = dataset
        generation = rollout_records_from_dataset(out, self.make_recipe())
        assert generation.num_chains > 0, "the recipe made no chain from shards(): give it shards it can use"
        paths = {entry["path"] for entry in written.entries}
        assert all(item.source.shard_path in paths for item in generation.records)
        result = write_rollout_zarr_store(tmp_path / "store", generation.records, **generation.writer_options())
        assert (result.num_rollouts, result.num_steps) == (generation.num_chains, generation.num_steps)
        check = validate_rollout_zarr_store(tmp_path / "store")
        assert check.ok, check.errors
        assert (check.num_rollouts, check.num_steps) == (generation.num_chains, generation.num_steps)

    def test_each_item_is_a_record_or_a_batch_of_its_own_shard(self, dataset):
        recipe = self.make_recipe()
        for arrays, source in self.shard_inputs(dataset[1]):
            items = recipe.records_for_shard(arrays, source)
            assert isinstance(items, list | tuple), type(items)
            for i, item in enumerate(items):
                assert isinstance(item, RolloutWriteRecord | RolloutChainBatch), (i, type(item))
                assert item.source == source, (i, item.source, source)
                if isinstance(item, RolloutChainBatch):
                    assert len(item.chain_lengths) > 0, f"item {i}: a batch of no chains"

    def test_every_reason_bit_is_declared(self, dataset):
        recipe = self.make_recipe()
        declared = 0
        for bit in recipe.reason_codes.values():
            declared |= 1 << bit
        generation = rollout_records_from_dataset(dataset[0], recipe)
        used = 0
        for record in generation.chain_records():
            for step in record.steps:
                used |= int(np.bitwise_or.reduce(np.asarray(step.shell.reason_bits, np.uint64), initial=0))
        assert used & ~declared == 0, f"reason bits {bin(used & ~declared)} are not in {dict(recipe.reason_codes)}"

    # ---- independence -----------------------------------------------------------------

    def test_a_shards_chains_depend_on_that_shard_alone(self, dataset):
        inputs = self.shard_inputs(dataset[1])
        recipe = self.make_recipe()
        first = [comparable(recipe.records_for_shard(arrays, source)) for arrays, source in inputs]
        backwards = [comparable(recipe.records_for_shard(arrays, source)) for arrays, source in inputs[::-1]]
        assert backwards[::-1] == first
        assert [comparable(self.make_recipe().records_for_shard(a, s)) for a, s in inputs] == first

    def test_the_required_modalities_are_enough(self, dataset):
        recipe = self.make_recipe()
        keep = {*recipe.required_modalities, PRESENT}
        for arrays, source in self.shard_inputs(dataset[1]):
            narrowed = {name: array for name, array in arrays.items() if name in keep}
            assert chain_shape(recipe.records_for_shard(narrowed, source)) == chain_shape(
                recipe.records_for_shard(arrays, source)), source.shard_path

    def test_a_shard_without_rows_gives_no_items(self, dataset):
        recipe = self.make_recipe()
        arrays, source = self.shard_inputs(dataset[1])[0]
        empty = {name: array[:0] for name, array in arrays.items()}
        assert list(recipe.records_for_shard(empty, dataclasses.replace(source, n_states=0))) == []


__all__ = ["RolloutRecipeContract", "comparable"]
