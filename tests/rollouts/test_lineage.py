"""acquisition_row_context through packing: resolves to the original store and row, and
refuses missing, ambiguous or altered bindings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zarr

from kuration.errors import RolloutStoreError
from kuration.rollouts import RolloutZarrStoreReader, pack_rollout_zarr_stores
from kuration.rollouts.lineage import acquisition_row_context, mapping_digest
from kuration.rollouts.writer import write_rollout_zarr_store
from tests.rollouts.store_factory import make_records


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lineage")
    out = {}
    for seed in range(3):
        out[f"in{seed}"] = root / f"in{seed}"
        write_rollout_zarr_store(out[f"in{seed}"], make_records(seed, chains=2, strategy=f"s{seed}"),
                                 split_manifest_hash=f"split-{seed}")
    pack_rollout_zarr_stores([out["in0"], out["in1"]], root / "packed01")
    pack_rollout_zarr_stores([out["in2"], root / "packed01"], root / "packed_twice")
    out["packed01"], out["packed_twice"] = root / "packed01", root / "packed_twice"
    return out


def _digest(store: Path) -> str:
    return zarr.open_group(str(store), mode="r").attrs["manifest_sha256"]


def _counts(store: Path) -> dict[str, int]:
    return zarr.open_group(str(store), mode="r").attrs["counts"]


def test_unpacked_store_is_its_own_acquisition_store(stores: dict[str, Path]) -> None:
    context = acquisition_row_context(RolloutZarrStoreReader(stores["in1"]), "steps", 3)
    assert context.acquisition_manifest_sha256 == _digest(stores["in1"])
    assert (context.acquisition_row_id, context.packing_depth) == (3, 0)
    assert context.generation["config"]["split_manifest_hash"] == "split-1"
    assert context.strategy_id.startswith("s1-") and context.source["split"] == "train"


@pytest.mark.parametrize("table", ["rollouts", "steps", "candidates"])
def test_pack_of_packs_resolves_to_the_original_row(stores: dict[str, Path], table: str) -> None:
    reader = RolloutZarrStoreReader(stores["packed_twice"])
    n2, n0 = _counts(stores["in2"])[table], _counts(stores["in0"])[table]
    expected = {0: ("in2", 0, 1), n2: ("in0", 0, 2), n2 + n0 + 1: ("in1", 1, 2)}
    for row, (name, original, depth) in expected.items():
        context = acquisition_row_context(reader, table, row)
        assert context.acquisition_manifest_sha256 == _digest(stores[name])
        assert (context.acquisition_row_id, context.packing_depth) == (original, depth)
        assert context.generation["config"]["split_manifest_hash"] == f"split-{name[-1]}"
        original_context = acquisition_row_context(RolloutZarrStoreReader(stores[name]), table, original)
        assert (context.strategy_id, context.mixture_id, context.source) == (
            original_context.strategy_id, original_context.mixture_id, original_context.source)


def _edit_packing(store: Path, edit) -> None:
    meta_file = store / "zarr.json"
    meta = json.loads(meta_file.read_text())
    edit(meta["attributes"]["packing"])
    meta_file.write_text(json.dumps(meta))


def _resign(store: Path, packing_edit) -> None:
    """Edit the packing block and re-bind it in the sidecar and attrs, as a forger would:
    only the inner digests (the archived mapping's, the archived manifest's) can catch it."""
    from kuration.canonical.hashing import canonical_digest, readable_json

    meta_file = store / "zarr.json"
    meta = json.loads(meta_file.read_text())
    packing_edit(meta["attributes"]["packing"])
    sidecar = store / "rollout_manifest.json"
    manifest = json.loads(sidecar.read_text())
    manifest["lineage"]["caller"]["packing_sha256"] = canonical_digest(meta["attributes"]["packing"])
    sidecar.write_bytes(readable_json(manifest))
    meta["attributes"]["manifest_sha256"] = canonical_digest(manifest)
    meta_file.write_text(json.dumps(meta))


def test_altered_archived_mapping_is_refused(stores: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    store = tmp_path / "p"
    shutil.copytree(stores["packed01"], store)
    _edit_packing(store, lambda packing: packing["inputs"][1]["rows"]["steps"].__setitem__(1, 99))
    with pytest.raises(RolloutStoreError, match="packing block's digest does not match"):
        acquisition_row_context(RolloutZarrStoreReader(store), "steps", 0)
    shutil.rmtree(store)
    shutil.copytree(stores["packed01"], store)
    _resign(store, lambda packing: packing["inputs"][1]["rows"]["steps"].__setitem__(1, 99))
    n0 = _counts(stores["in0"])["steps"]
    with pytest.raises(RolloutStoreError, match="row mapping .* does not match its mapping_sha256"):
        acquisition_row_context(RolloutZarrStoreReader(store), "steps", n0)
    shutil.rmtree(store)
    shutil.copytree(stores["packed01"], store)
    _resign(store, lambda packing: packing["inputs"][0]["manifest"]["config"].update(split_manifest_hash="x"))
    with pytest.raises(RolloutStoreError, match="archived manifest does not match its manifest_sha256"):
        acquisition_row_context(RolloutZarrStoreReader(store), "steps", 0)


def test_overlapping_and_missing_mappings_are_refused(stores: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    store = tmp_path / "p"
    n0 = _counts(stores["in0"])["steps"]

    def overlap(packing: dict) -> None:
        entry = packing["inputs"][1]
        entry["rows"]["steps"][0] = 0
        entry["mapping_sha256"] = mapping_digest(entry["manifest_sha256"], entry["rows"])
    shutil.copytree(stores["packed01"], store)
    _resign(store, overlap)
    with pytest.raises(RolloutStoreError, match="the row mapping is ambiguous"):
        acquisition_row_context(RolloutZarrStoreReader(store), "steps", 1)

    def gap(packing: dict) -> None:
        entry = packing["inputs"][1]
        entry["rows"]["steps"][0] += 1
        entry["mapping_sha256"] = mapping_digest(entry["manifest_sha256"], entry["rows"])
    shutil.rmtree(store)
    shutil.copytree(stores["packed01"], store)
    _resign(store, gap)
    with pytest.raises(RolloutStoreError, match=f"no archived input holds steps row {n0}"):
        acquisition_row_context(RolloutZarrStoreReader(store), "steps", n0)

    shutil.rmtree(store)
    shutil.copytree(stores["packed01"], store)
    meta = json.loads((store / "zarr.json").read_text())
    del meta["attributes"]["packing"]
    (store / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(RolloutStoreError, match="records packing_sha256 but the store has no packing block"):
        acquisition_row_context(RolloutZarrStoreReader(store), "steps", 0)


def test_bad_table_or_row_is_refused(stores: dict[str, Path]) -> None:
    reader = RolloutZarrStoreReader(stores["in0"])
    with pytest.raises(RolloutStoreError, match="has no lineage"):
        acquisition_row_context(reader, "sources", 0)
    with pytest.raises(RolloutStoreError, match="steps row 10000 is not in the store"):
        acquisition_row_context(reader, "steps", 10_000)


def test_validation_reports_an_altered_packing_archive(stores: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    from kuration.rollouts import validate_rollout_zarr_store

    store = tmp_path / "p"
    shutil.copytree(stores["packed_twice"], store)
    assert validate_rollout_zarr_store(store).ok
    _edit_packing(store, lambda packing: packing["inputs"][0]["rows"]["steps"].__setitem__(0, 5))
    result = validate_rollout_zarr_store(store)
    assert any("root attrs packing: canonical digest" in error for error in result.errors), result.errors


def test_a_link_column_whose_shape_disagrees_with_the_counts_is_refused_before_it_is_read(
        stores: dict[str, Path], tmp_path: Path) -> None:
    # the columns a lookup follows are read whole and kept; their size must come from the
    # checked counts, never from an array's own (hostile) metadata
    import shutil

    store = tmp_path / "store"
    shutil.copytree(stores["in1"], store)
    meta_path = store / "rollouts" / "strategy_code" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"] = [10**9]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RolloutStoreError, match=r"rollouts/strategy_code: 1000000000 rows, expected \d+ \(attrs "
                                                r"counts.rollouts\)"):
        acquisition_row_context(RolloutZarrStoreReader(store), "steps", 0)


def test_many_row_lookups_read_each_link_column_once(stores: dict[str, Path]) -> None:
    reader = RolloutZarrStoreReader(stores["packed_twice"])
    steps = _counts(stores["packed_twice"])["candidates"]
    contexts = [acquisition_row_context(reader, "candidates", row) for row in range(steps)]
    again = acquisition_row_context(RolloutZarrStoreReader(stores["packed_twice"]), "candidates", steps - 1)
    assert contexts[-1] == again  # the kept columns give what a fresh lookup reads
