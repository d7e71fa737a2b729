"""``s3://`` URLs end to end, against the loopback S3 server started in ``conftest.py``.

Kuration is given nothing but URLs: the endpoint and credentials come from the
environment, as in a deployment. Objects are often written with a plain boto3 client
("out of band"): that is how another process (an uploader, another Dagster run) changes
the bucket, without telling the s3fs instance Kuration holds in this process.
"""

from __future__ import annotations

import hashlib
import io
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kuration import storage
from kuration.landing.recordings import diff_recordings, file_token, list_recordings
from kuration.sources.media import MediaError
from kuration.sources.schema import Schema
from kuration.scoring.cache import FsspecScoreCache
from kuration.scoring import score_sources
from kuration.scoring.segments import Segmenter
from kuration.sources import ParquetTickAdapter, TickDataError
from kuration.splits import (
    DataSplitConfig,
    Selector,
    load_splits,
    read_universe_csv,
    resolve_selectors,
    save_splits,
)
from kuration.splits.artifacts import (
    SplitRequest,
    check_split_leakage,
    check_universe_drift,
    load_baked_splits,
    load_universe,
    materialize_splits,
    read_split_report,
    read_universe_table,
    validate_universe_table,
    write_universe,
)
from kuration.scoring.strategy import Strategy
from kuration.sources.tracks import tracks_from_ticks

S = Selector

SCHEMA_DICT = {
    "sample_hz": 10, "time": "tick", "entity": "drone",
    "fields": {"pos": {"dtype": "float32", "shape": [3]}, "battery": {"dtype": "float32"}},
    "globals": {"wind": {"dtype": "float32"}},
    "media": {"frame": {"dtype": "uint8", "shape": [2, 3], "provider": "npy_index"}},
    "tags": "events",
}
SCHEMA = Schema.from_dict(SCHEMA_DICT)
SCHEMA_NO_MEDIA = Schema.from_dict({k: v for k, v in SCHEMA_DICT.items() if k != "media"})
STRATEGY = Strategy.from_dict({
    "method": "inclusion", "priority": {"battery.min": -1.0, "tag.near_miss": 5.0}, "tags": ["near_miss"],
})
SEGMENTER = Segmenter(10, 5, unit="seconds")
DRONES = ("a", "b")


# -- helpers ------------------------------------------------------------------------


def _split(url: str) -> tuple[str, str]:
    assert url.startswith("s3://")
    bucket, _, key = url[len("s3://"):].partition("/")
    return bucket, key


def put(client, url: str, data: bytes) -> str:
    """Write an object out of band (plain boto3); returns its ETag without quotes."""
    bucket, key = _split(url)
    return client.put_object(Bucket=bucket, Key=key, Body=data)["ETag"].strip('"')


def get(client, url: str) -> bytes:
    bucket, key = _split(url)
    return client.get_object(Bucket=bucket, Key=key)["Body"].read()


def keys_under(client, url: str) -> list[str]:
    bucket, prefix = _split(url)
    listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix.rstrip("/") + "/")
    return sorted(o["Key"][len(prefix.rstrip("/")) + 1:] for o in listing.get("Contents", []))


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def recording(seed: int, *, ticks: int = 200, frames: str | None = "frames/rec.npy") -> tuple[bytes, dict]:
    """One source's Parquet bytes (one row per tick and drone) and the arrays written."""
    rng = np.random.default_rng(seed)
    n = ticks * len(DRONES)
    pos = rng.normal(size=(n, 3)).astype("float32")
    frame_rows = rng.integers(0, 255, size=(n, 2, 3), dtype=np.uint8)
    columns = {
        "tick": np.repeat(np.arange(ticks), len(DRONES)),
        "drone": np.tile(np.asarray(DRONES), ticks),
        "pos": pa.FixedSizeListArray.from_arrays(pa.array(pos.reshape(-1)), 3),
        "battery": np.linspace(1.0, 0.1, n).astype("float32"),
        "wind": np.repeat(rng.normal(size=ticks), len(DRONES)).astype("float32"),
        "events": [["near_miss"] if rng.random() < 0.02 else [] for _ in range(n)],
    }
    if frames:
        columns["frame"] = [f"{frames}#{k}" for k in range(n)]
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer)
    return buffer.getvalue(), {"pos": pos, "frames": frame_rows}


def put_recording(client, root: str, source_id: str, seed: int, *, ticks: int = 200) -> dict:
    """``<root>/<source_id>`` plus its frames at ``<root>/frames/<stem>.npy``."""
    stem = source_id.removesuffix(".parquet")
    data, arrays = recording(seed, ticks=ticks, frames=f"frames/{stem}.npy")
    put(client, f"{root}/{source_id}", data)
    put(client, f"{root}/frames/{stem}.npy", npy_bytes(arrays["frames"]))
    return arrays


# -- 1. kuration.storage ------------------------------------------------------------


def test_storage_writes_reads_and_checks_s3_objects(bucket, s3_client):
    base = storage.join_url(bucket, "prefix")
    assert base == f"{bucket}/prefix" and storage.is_remote(base)
    url = storage.join_url(base, "a", "b.bin")
    assert url == f"{bucket}/prefix/a/b.bin"
    assert storage.join_url(f"{base}/", "c.bin") == f"{bucket}/prefix/c.bin"
    assert storage.parent_url(url) == f"{bucket}/prefix/a"

    assert not storage.exists(url)
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(url)
    assert storage.write_bytes_atomic(url, b"one") == url
    assert storage.exists(url) and storage.read_bytes(url) == b"one"
    assert get(s3_client, url) == b"one"  # a real object, visible to any S3 client
    assert keys_under(s3_client, base) == ["a/b.bin"]  # one put, no temporary objects left behind

    storage.write_bytes_atomic(url, b"two, longer")
    assert storage.read_bytes(url) == b"two, longer"

    # another writer changes the bucket: this process sees it
    put(s3_client, url, b"three")
    assert storage.read_bytes(url) == b"three"
    other = storage.join_url(base, "a", "c.bin")
    put(s3_client, other, b"four")
    assert storage.exists(other) and storage.read_bytes(other) == b"four"
    s3_client.delete_object(Bucket=_split(other)[0], Key=_split(other)[1])
    assert not storage.exists(other)


def test_storage_sees_objects_another_writer_added_after_a_listing(bucket, s3_client):
    """A listing fills s3fs's listing cache; ``exists``/``read_bytes`` must not trust it for
    objects written since (the sensor / asset processes of a deployment are long-lived)."""
    base = f"{bucket}/zone"
    put(s3_client, f"{base}/r/one.bin", b"1")
    put(s3_client, f"{base}/top.bin", b"top")
    assert list(list_recordings(f"{base}/r", pattern="*.bin")) == ["one.bin"]  # fs.find: caches listings
    put(s3_client, f"{base}/r/two.bin", b"2")
    assert storage.exists(f"{base}/r/two.bin") and storage.read_bytes(f"{base}/r/two.bin") == b"2"
    assert storage.exists(f"{base}/top.bin") and storage.read_bytes(f"{base}/top.bin") == b"top"
    put(s3_client, f"{base}/r/one.bin", b"rewritten, longer")
    assert storage.read_bytes(f"{base}/r/one.bin") == b"rewritten, longer"


# -- 2. kuration.splits -------------------------------------------------------------


def _coco(images: int, *, anomalous: tuple[int, ...] = (), tags: tuple[str, ...] = ()) -> bytes:
    return json.dumps({
        "images": [{"id": i, "tags": list(tags)} for i in range(images)],
        "annotations": [{"id": k, "image_id": i, "category_id": 1} for k, i in enumerate(anomalous)],
        "categories": [{"id": 0, "name": "background"}, {"id": 1, "name": "near_miss"}],
    }).encode()


@pytest.fixture
def s3_landing(bucket, s3_client) -> str:
    """``<bucket>/landing``: a universe.csv with relative paths and per-source COCO files."""
    landing = f"{bucket}/landing"
    rows = ["source,index,materialized_path,annotation,group"]
    for site in ("site_a", "site_b"):
        for rec in (1, 2):
            name = f"{site}/rec_{rec}"
            rows.append(f"{name}.parquet,0-2,recordings/{name}.parquet,annotations/{name}.json,{site}")
            anomalous = (1,) if name == "site_b/rec_2" else ()
            tags = ("night",) if name == "site_a/rec_2" else ()
            put(s3_client, f"{landing}/annotations/{name}.json", _coco(3, anomalous=anomalous, tags=tags))
    put(s3_client, f"{landing}/universe.csv", ("\n".join(rows) + "\n").encode())
    return landing


def test_universe_csv_on_s3_resolves_relative_paths_and_reads_coco_from_s3(s3_landing):
    universe = read_universe_csv(f"{s3_landing}/universe.csv")
    assert len(universe) == 12
    table = universe.to_arrow()
    paths = set(table.column("materialized_path").to_pylist())
    assert paths == {f"{s3_landing}/recordings/site_{s}/rec_{r}.parquet" for s in "ab" for r in (1, 2)}
    annotations = set(table.column("annotation").to_pylist())
    assert annotations == {f"{s3_landing}/annotations/site_{s}/rec_{r}.json" for s in "ab" for r in (1, 2)}
    assert all(storage.exists(a) for a in annotations)

    # tag and category selectors need the COCO files: they are read from s3
    assert resolve_selectors([S(kind="tag", any_of=["anomalous"])], universe).uids() == ["site_b/rec_2.parquet#1"]
    assert resolve_selectors([S(kind="tag", any_of=["night"])], universe).uids() == [
        f"site_a/rec_2.parquet#{i}" for i in range(3)]
    assert resolve_selectors([S(kind="categories", any_of=["near_miss"])],
                             universe).uids() == ["site_b/rec_2.parquet#1"]
    assert len(resolve_selectors([S(kind="tag", any_of=["normal"])], universe)) == 11


def test_split_artifacts_with_an_s3_storage_root(s3_landing, bucket, s3_client):
    universe = read_universe_csv(f"{s3_landing}/universe.csv")
    root = f"{bucket}/storage"
    url = write_universe(universe, root)
    assert url == f"{root}/universe/universe.parquet"
    loaded = load_universe(root)
    assert loaded.hash == universe.hash and loaded.uids() == universe.uids()
    assert validate_universe_table(read_universe_table(root)).ok

    # a rule stored on s3 whose test stage needs the COCO annotations (read from s3 again,
    # through the annotation URLs of the universe loaded from storage)
    rule = DataSplitConfig(
        train=(S(kind="glob", pattern="site_a/*"),),
        test=(S(kind="intersect", of=[S(kind="glob", pattern="site_b/*"), S(kind="tag", any_of=["anomalous"])]),),
    )
    rule_url = save_splits(rule, f"{bucket}/rules/rule.json")
    assert rule_url == f"{bucket}/rules/rule.json" and load_splits(rule_url) == rule

    artifacts = materialize_splits(loaded, SplitRequest(splits_json=rule_url), root)
    assert not artifacts.refused
    assert artifacts.splits_url == f"{root}/splits/splits.json"
    assert artifacts.assignments_url == f"{root}/splits/split_assignments.parquet"
    assert keys_under(s3_client, f"{root}/splits") == ["split_assignments.parquet", "split_report.json", "splits.json"]
    assert hashlib.sha256(get(s3_client, artifacts.splits_url)).hexdigest() == artifacts.splits_digest
    baked = load_baked_splits(root, loaded)
    assert baked.is_baked and baked.universe_hash == universe.hash
    assert read_split_report(root)["status"] == "resolved"
    leakage = check_split_leakage(root)
    assert leakage.passed and leakage.counts["train"] == 6 and leakage.counts["test"] == 1
    assert leakage.verdict.startswith("no sample or group in two stages (train 6, ")
    assert check_universe_drift(root).ok

    # a computed split, and save/load of the baked file to another s3 key
    artifacts = materialize_splits(loaded, SplitRequest(strategy="random", seed=3, val_ratio=0.5, test_ratio=0.0), root)
    assert artifacts.resolution is not None and artifacts.resolution.leakage.ok
    copy_url = save_splits(load_baked_splits(root, loaded), f"{bucket}/exports/splits.json")
    assert load_splits(copy_url) == load_baked_splits(root, loaded)
    assert json.loads(get(s3_client, copy_url))["universe_hash"] == universe.hash
    with pytest.raises(FileNotFoundError):
        load_splits(f"{bucket}/exports/missing.json")


# -- 3. ParquetTickAdapter ----------------------------------------------------------


def test_parquet_adapter_lists_reads_and_decodes_media_from_s3(bucket, s3_client):
    root = f"{bucket}/recordings"
    written = {sid: put_recording(s3_client, root, sid, seed) for seed, sid in
               enumerate(["site_a/r1.parquet", "site_b/r2.parquet", "r0.parquet"])}
    data, _ = recording(9)
    put(s3_client, f"{root}/.staging/r9.parquet", data)  # hidden folder
    put(s3_client, f"{root}/site_a/.r3.parquet", data)  # hidden file
    put(s3_client, f"{root}/notes.txt", b"not a recording")

    adapter = ParquetTickAdapter(root, SCHEMA)
    assert adapter.list_sources() == ["r0.parquet", "site_a/r1.parquet", "site_b/r2.parquet"]
    ticks = adapter.read_ticks("site_a/r1.parquet")
    assert len(ticks) == 400 and ticks.source_id == "site_a/r1.parquet"
    np.testing.assert_array_equal(ticks.columns["pos"], written["site_a/r1.parquet"]["pos"])

    tracks = tracks_from_ticks(adapter.schema, ticks)
    assert [t.entity_id for t in tracks] == ["a", "b"] and [len(t) for t in tracks] == [200, 200]
    assert all(t.present.all() for t in tracks)
    b = tracks[1]
    frames = adapter.decode_media("frame", list(b.media["frame"]), source_id="site_a/r1.parquet")
    np.testing.assert_array_equal(frames, written["site_a/r1.parquet"]["frames"][1::2])  # drone b's rows

    with pytest.raises(TickDataError, match="nope.parquet"):
        adapter.read_ticks("nope.parquet")
    with pytest.raises(TickDataError, match="nope.parquet"):
        adapter.identity("nope.parquet")

    # another writer adds one source and deletes one, after this process listed them
    put_recording(s3_client, root, "r5.parquet", 5)
    s3_client.delete_object(Bucket=_split(root)[0], Key=_split(f"{root}/r0.parquet")[1])
    assert adapter.list_sources() == ["r5.parquet", "site_a/r1.parquet", "site_b/r2.parquet"]
    with pytest.raises(MediaError, match=r"s3://.*/frames/gone\.npy not found"):
        adapter.decode_media("frame", ["frames/gone.npy#0"], source_id="r0.parquet")


def test_identity_is_the_etag_and_follows_rewrites(bucket, s3_client):
    root = f"{bucket}/recordings"
    first, _ = recording(1, frames=None)
    etag_a = put(s3_client, f"{root}/a.parquet", first)
    put(s3_client, f"{root}/b.parquet", recording(2, frames=None)[0])
    adapter = ParquetTickAdapter(root, SCHEMA_NO_MEDIA)
    assert adapter.list_sources() == ["a.parquet", "b.parquet"]  # a listing, as score_sources makes
    a0, b0 = adapter.identity("a.parquet"), adapter.identity("b.parquet")
    assert (a0.kind, a0.value) == ("etag", etag_a) and a0.strong
    assert a0 != b0 and adapter.identity("a.parquet") == a0

    second, arrays = recording(3, frames=None, ticks=250)
    adapter.list_sources()  # caches a listing holding a's old size and ETag
    etag_a2 = put(s3_client, f"{root}/a.parquet", second)  # another writer rewrites a
    np.testing.assert_array_equal(adapter.read_ticks("a.parquet").columns["pos"], arrays["pos"])
    a1 = adapter.identity("a.parquet")
    assert (a1.kind, a1.value) == ("etag", etag_a2) and a1 != a0
    assert adapter.identity("b.parquet") == b0
    assert ParquetTickAdapter(root, SCHEMA_NO_MEDIA).identity("a.parquet") == a1  # a fresh reader agrees

    put(s3_client, f"{root}/a.parquet", second)  # same bytes again: same ETag
    assert adapter.identity("a.parquet") == a1


def test_identity_covers_the_media_files_on_s3(bucket, s3_client):
    root = f"{bucket}/recordings"
    put_recording(s3_client, root, "a.parquet", 1)
    put_recording(s3_client, root, "b.parquet", 2)
    adapter = ParquetTickAdapter(root, SCHEMA)
    adapter.list_sources()
    a0, b0 = adapter.identity("a.parquet"), adapter.identity("b.parquet")
    assert a0.kind == "fingerprint" and a0.strong and a0 != b0
    put(s3_client, f"{root}/frames/a.npy", npy_bytes(np.zeros((400, 2, 3), np.uint8)))  # only the frames change
    a1 = adapter.identity("a.parquet")
    assert a1.strong and a1 != a0
    assert adapter.identity("b.parquet") == b0
    frames = adapter.decode_media("frame", ["frames/a.npy#5"], source_id="a.parquet")
    assert not frames.any()


def test_identity_on_a_versioned_bucket_is_the_version_id(bucket, s3_client):
    name, _ = _split(bucket)
    s3_client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    root = f"{bucket}/recordings"
    data, _ = recording(1, frames=None)
    v1 = s3_client.put_object(Bucket=name, Key="recordings/a.parquet", Body=data)["VersionId"]
    adapter = ParquetTickAdapter(root, SCHEMA_NO_MEDIA)
    assert adapter.identity("a.parquet") == adapter.identity("a.parquet")
    before_listing = adapter.identity("a.parquet")
    adapter.list_sources()
    assert adapter.identity("a.parquet") == before_listing  # whether or not a listing is cached
    assert (before_listing.kind, before_listing.value) == ("version", v1)
    v2 = s3_client.put_object(Bucket=name, Key="recordings/a.parquet", Body=data)["VersionId"]  # same bytes
    assert v2 != v1 and adapter.identity("a.parquet").value == v2


# -- 4. scoring with an s3 cache ----------------------------------------------------


def test_score_sources_caches_on_s3_and_rescores_a_rewritten_object(bucket, s3_client):
    root = f"{bucket}/recordings"
    sources = ["site_a/r1.parquet", "site_a/r2.parquet", "site_b/r3.parquet"]
    for seed, sid in enumerate(sources):
        put_recording(s3_client, root, sid, seed, ticks=150 + 50 * seed)
    cache_url = f"{bucket}/cache"

    def run(**kw):
        return score_sources(ParquetTickAdapter(root, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY,
                             cache=FsspecScoreCache(cache_url), **kw)

    first = run()
    assert [o.status for o in first.outcomes] == ["scored"] * 3
    assert all(o.identity.strong for o in first.outcomes)
    entries = keys_under(s3_client, cache_url)
    # per source: its whole scored table, its segment rows and each feature's values
    entries_per_source = 2 + len(STRATEGY.feature_keys())
    assert len(entries) == 3 * entries_per_source
    assert {e.split("/")[0] for e in entries} == {f[:16] for f in first.cache_fingerprints}
    assert first.run_fingerprint in first.cache_fingerprints

    second = run()
    assert [o.status for o in second.outcomes] == ["cached"] * 3
    assert second.segments.equals(first.segments)

    put_recording(s3_client, root, sources[1], 42, ticks=300)  # rewritten with different bytes
    third = run()
    assert {o.source_id: o.status for o in third.outcomes} == {
        sources[0]: "cached", sources[1]: "scored", sources[2]: "cached"}
    fresh = score_sources(ParquetTickAdapter(root, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY,
                          sources=[sources[1]])
    assert third.for_source(sources[1]).equals(fresh.segments)
    assert not third.for_source(sources[1]).equals(first.for_source(sources[1]))
    assert len(keys_under(s3_client, cache_url)) == 4 * entries_per_source  # the rewrite's entries beside the old
    assert [o.status for o in run().outcomes] == ["cached"] * 3


_WORKER_RUN = """
import io, json, sys
import pyarrow.parquet as pq
from kuration import storage
from kuration.sources.schema import Schema
from kuration.scoring.cache import FsspecScoreCache
from kuration.scoring import score_sources
from kuration.scoring.segments import Segmenter
from kuration.sources import ParquetTickAdapter
from kuration.scoring.strategy import Strategy

if __name__ == "__main__":
    root, cache, out, schema, strategy = sys.argv[1:]
    result = score_sources(
        ParquetTickAdapter(root, Schema.from_dict(json.loads(schema))), segmenter=Segmenter(10, 5, unit="seconds"),
        strategy=Strategy.from_dict(json.loads(strategy)), workers=2, cache=FsspecScoreCache(cache))
    buffer = io.BytesIO()
    pq.write_table(result.segments, buffer)
    storage.write_bytes_atomic(out, buffer.getvalue())
    print(json.dumps({o.source_id: [o.status, o.error] for o in result.outcomes}))
"""


def test_worker_processes_score_s3_sources(bucket, s3_client, tmp_path):
    """``workers=2``: the adapter (and its s3fs instance) is pickled into forkserver workers,
    which read the recordings and frames from s3 themselves. Run in a fresh interpreter
    started with the S3 environment, as a deployment is: a forkserver this test session
    started earlier would not have it."""
    import subprocess
    import sys

    root = f"{bucket}/recordings"
    sources = [f"site_{i % 2}/r{i}.parquet" for i in range(4)]
    for seed, sid in enumerate(sources):
        put_recording(s3_client, root, sid, seed)
    script = tmp_path / "run_workers.py"
    script.write_text(_WORKER_RUN)
    strategy = {"method": "inclusion", "priority": {"battery.min": -1.0, "tag.near_miss": 5.0}, "tags": ["near_miss"]}
    done = subprocess.run(
        [sys.executable, str(script), root, f"{bucket}/cache", f"{bucket}/out/segments.parquet",
         json.dumps(SCHEMA_DICT), json.dumps(strategy)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    outcomes = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcomes == {sid: ["scored", None] for sid in sources}
    parallel = pq.read_table(io.BytesIO(storage.read_bytes(f"{bucket}/out/segments.parquet")))
    serial = score_sources(ParquetTickAdapter(root, SCHEMA), segmenter=SEGMENTER, strategy=STRATEGY,
                           cache=FsspecScoreCache(f"{bucket}/cache"))
    assert [o.status for o in serial.outcomes] == ["cached"] * 4  # the workers' cache entries, on s3
    assert parallel.equals(serial.segments)


# -- 5. landing zone ----------------------------------------------------------------


def test_landing_tokens_are_etags_and_diff_after_a_rewrite(bucket, s3_client):
    landing = f"{bucket}/landing"
    root = f"{landing}/recordings"
    for name, data in {"site_a/r1.parquet": b"one", "site_b/r2.parquet": b"two", "notes.txt": b"x",
                       ".tmp/r9.parquet": b"x", "site_a/.r3.parquet": b"x"}.items():
        put(s3_client, f"{root}/{name}", data)
    csv_etag = put(s3_client, f"{landing}/universe.csv", b"source,index\n")

    before = list_recordings(root)
    assert before == {"site_a/r1.parquet": f"ETag:{md5(b'one')}", "site_b/r2.parquet": f"ETag:{md5(b'two')}"}
    assert list_recordings(f"{landing}/missing") == {}
    # what the sensor asks right after listing the recordings
    assert file_token(f"{landing}/universe.csv") == f"ETag:{csv_etag}"
    assert file_token(f"{root}/site_a/r1.parquet") == before["site_a/r1.parquet"]
    assert file_token(f"{root}/site_a/none.parquet") is None

    put(s3_client, f"{root}/site_a/r1.parquet", b"one, rewritten")
    put(s3_client, f"{root}/site_c/r4.parquet", b"four")
    s3_client.delete_object(Bucket=_split(root)[0], Key=_split(f"{root}/site_b/r2.parquet")[1])
    csv_etag2 = put(s3_client, f"{landing}/universe.csv", b"source,index\nsite_a/r1.parquet,0\n")
    after = list_recordings(root)
    diff = diff_recordings(before, after)
    assert (diff.new, diff.changed, diff.removed) == (("site_c/r4.parquet",), ("site_a/r1.parquet",),
                                                      ("site_b/r2.parquet",))
    assert after["site_a/r1.parquet"] == f"ETag:{md5(b'one, rewritten')}"
    assert file_token(f"{root}/site_a/r1.parquet") == after["site_a/r1.parquet"]
    assert file_token(f"{root}/site_b/r2.parquet") is None
    assert file_token(f"{landing}/universe.csv") == f"ETag:{csv_etag2}"
    assert diff_recordings(after, list_recordings(root)).to_score == ()


# -- 6. Dagster assets with s3 resources --------------------------------------------


def test_dagster_assets_materialize_with_s3_resources(bucket, s3fs_fs, s3_client, tmp_path):
    from dagster import AssetKey, instance_for_test, materialize

    from tests.dagster.sensors import run_sensor

    from kuration.demo.corpus import write_demo_landing_zone
    from kuration.landing.recordings import recording_name
    from kuration.scoring.segment_store import list_scored_recordings, read_source_segments
    from kuration_assets import new_recordings_sensor, scored_segments, segment_pool, source_partitions
    from kuration_dagster_checks.provenance import recorded_provenance
    from kuration_resources import LandingZoneResource, StorageRootResource
    from splits_assets import resolved_splits, split_leakage, universe, universe_drift, universe_schema

    zone = write_demo_landing_zone(tmp_path / "landing", seed=5, recordings_per_site=1, sites=2, minutes=(1, 2))
    landing, store = f"{bucket}/landing", f"{bucket}/storage"
    s3fs_fs.put(f"{zone.root}/", f"{_split(bucket)[0]}/landing/", recursive=True)
    local_files = sorted(p.relative_to(zone.root).as_posix() for p in (tmp_path / "landing").rglob("*") if p.is_file())
    assert keys_under(s3_client, landing) == local_files
    resources = {
        "storage_root": StorageRootResource(url=store),
        "landing_zone": LandingZoneResource(url=landing),
    }
    sources = sorted(list_recordings(f"{landing}/recordings"))
    assert len(sources) == 2

    with instance_for_test() as instance:
        result = materialize(
            [universe, resolved_splits, universe_schema, split_leakage, universe_drift], resources=resources,
            instance=instance, run_config={"ops": {"resolved_splits": {"config": {"strategy": "random", "seed": 1,
                                                                                  "val_ratio": 0.5,
                                                                                  "test_ratio": 0.0}}}},
        )
        assert result.success
        assert {e.check_name: e.passed for e in result.get_asset_check_evaluations()} == {
            "universe_schema": True, "split_leakage": True, "universe_drift": True}
        stored = load_universe(store)
        assert len(stored) == zone.clips and sorted(stored.source_names) == sources
        assert set(stored.to_arrow().column("materialized_path").to_pylist()) == {
            f"{landing}/recordings/{s}" for s in sources}
        assert keys_under(s3_client, f"{store}/splits") == ["split_assignments.parquet", "split_report.json",
                                                            "splits.json"]

        names = [recording_name(s) for s in sources]
        instance.add_dynamic_partitions(source_partitions.name, names)
        scored = materialize([scored_segments, segment_pool], resources=resources, instance=instance,
                             partition_key=names[0])
        assert scored.success
        (mat,) = [e.step_materialization_data.materialization for e in scored.get_asset_materialization_events()]
        meta = {k: v.value for k, v in mat.metadata.items()}
        assert mat.partition == names[0] and meta["status"] == "scored" and meta["segments"] > 0
        provenance = recorded_provenance(meta)
        assert provenance["identity_strong"] is True and provenance["identity"].startswith("fingerprint:")
        assert meta["path"] == f"{store}/scored_segments/{names[0]}.parquet"
        assert read_source_segments(store, sources[0]).num_rows == meta["segments"]
        assert list_scored_recordings(store) == [names[0]]
        assert [(e.check_name, e.passed) for e in scored.get_asset_check_evaluations()] == [("segment_pool", True)]
        assert instance.get_materialized_partitions(AssetKey("scored_segments")) == {names[0]}

        again = materialize([scored_segments], resources=resources, instance=instance, partition_key=names[0])
        (mat,) = [e.step_materialization_data.materialization for e in again.get_asset_materialization_events()]
        assert mat.metadata["status"].value == "cached"

        # the sensor over the s3 landing zone, starting from the instance: the scored recording's
        # listing token and the universe's csv token match what their materializations recorded,
        # so only the recording never scored is requested
        tick = run_sensor(new_recordings_sensor, instance=instance, resources=resources)
        assert provenance["recording_token"] == list_recordings(f"{landing}/recordings")[sources[0]]
        assert [(r.partition_key, r.asset_selection) for r in tick.run_requests] == [
            (names[1], [AssetKey("scored_segments")])]
        quiet = run_sensor(new_recordings_sensor, instance=instance, resources=resources, cursor=tick.cursor)
        assert quiet.run_requests == []

        # the rest of the graph on the s3 storage root: budget plan, then write, audit, publish:
        # the version is committed staged, audited by the blocking checks, then published (a
        # conditional put of its publish record)
        from kuration.output.versions import DatasetRoot
        from kuration.read import verify_dataset
        from kuration_assets import (
            budget_plan, dataset_integrity, dataset_quality, published_dataset, shards_and_manifest, shards_present,
        )

        assert materialize([scored_segments], resources=resources, instance=instance, partition_key=names[1]).success
        planned = materialize([budget_plan], resources=resources, instance=instance, run_config={
            "ops": {"budget_plan": {"config": {"train": 20 / 3600, "val": 20 / 3600, "test": 0.0}}}})
        assert planned.success and keys_under(s3_client, f"{store}/budget") == [
            "admitted.parquet", "budget.json", "plan_items.parquet"]
        written = materialize([shards_and_manifest, shards_present, dataset_integrity, dataset_quality,
                               published_dataset], resources=resources, instance=instance)
        assert written.success
        assert {e.check_name: (e.passed, e.metadata["version"].value)
                for e in written.get_asset_check_evaluations()} == {
            "shards_present": (True, "v1"), "dataset_integrity": (True, "v1"), "dataset_quality": (True, "v1")}
        assert verify_dataset(f"{store}/dataset").ok
        assert DatasetRoot(f"{store}/dataset").current().version == "v1"
        keys = keys_under(s3_client, f"{store}/dataset")
        assert "versions/v1/dataset.commit.json" in keys and "published/00000001.json" in keys


def test_the_storage_resource_takes_endpoint_and_credentials_from_a_dagster_aws_s3resource(
        bucket, s3_endpoint, s3_client, monkeypatch):
    """With the environment's S3 settings removed, only the S3Resource can say where the store
    is and who we are; after the run the process's settings are back as they were."""
    import fsspec.config
    from dagster import asset, materialize
    from dagster_aws.s3 import S3Resource

    from kuration import storage
    from kuration_resources import StorageRootResource

    saved = fsspec.config.conf.pop("s3", None)
    for name in ("FSSPEC_S3_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    storage._forget_s3_instances()
    try:
        @asset(required_resource_keys={"storage_root"})  # this module's annotations are strings
        def probe(context) -> None:
            storage.write_bytes_atomic(context.resources.storage_root.path("probe.txt"), b"through the S3Resource")

        root = StorageRootResource(url=f"{bucket}/storage", s3=S3Resource(
            endpoint_url=s3_endpoint.url, region_name="us-east-1",
            aws_access_key_id="kuration-test-key", aws_secret_access_key="kuration-test-secret"))
        assert materialize([probe], resources={"storage_root": root}).success
        name = bucket[len("s3://"):]
        assert s3_client.get_object(Bucket=name, Key="storage/probe.txt")["Body"].read() == b"through the S3Resource"
        assert "s3" not in fsspec.config.conf  # restored after the run
    finally:
        if saved is not None:
            fsspec.config.conf["s3"] = saved
        storage._forget_s3_instances()
