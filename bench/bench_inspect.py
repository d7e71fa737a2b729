"""Benchmark: ``inspect_dataset(verify=False)`` on a 100,000-shard manifest against ``json.load``
of that manifest (target: at most 3x).

Dataset (synthetic, local disk, built once per run in a temp folder): ``--shards`` npz shards
of 4 steps (one real shard's bytes written under every name, so each entry's size and
SHA-256 are true), in train/val/test 80/10/10, spread over 1,000 sources, every tenth shard
padded; the manifest carries a budget block and the config a schema with ``sample_hz``; the
dataset is published with the commit protocol's own ``publish_committed``. The dataset
carries no budget plan (``budget/``), so the plan's priority histogram is not part of the
timing (it scales with the plan's items, not the manifest).

Timed, best of ``--repeats``, interleaved: ``json.load`` of ``dataset_manifest.json``
(plain parse, nothing checked) and ``inspect_dataset(out)`` (strict parse, the commit chain's
SHA-256 of manifest and config, every entry's structure, the summary). Prints one JSON object
with both times and their ratio.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import timed  # noqa: E402
from _report import ratio  # noqa: E402

from kuration.canonical.hashing import readable_json, sha256_hex  # noqa: E402
from kuration.inspect import inspect_dataset  # noqa: E402
from kuration.output.commit_protocol import MANIFEST_FILE, publish_committed  # noqa: E402
from kuration.output.containers import get_container  # noqa: E402
from kuration.output.containers.protocol import ShardArrays  # noqa: E402
from kuration.output.destinations import LocalDestination  # noqa: E402
from kuration.output.spec import OutputSpec  # noqa: E402

TARGET_RATIO = 3.0  # inspect at most 3x the plain json.load
SPEC = {"shard_length": 4, "short_policy": "pad", "container": "npz", "modalities": {
    "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
    "speed": {"dtype": "float32", "shape": [], "source": "field:speed"}}}


def build(out: Path, shards: int) -> None:
    spec = OutputSpec.from_dict(SPEC)
    buffer = io.BytesIO()
    get_container("npz").write(buffer, ShardArrays({"pos": np.zeros((4, 3), np.float32),
                                                    "speed": np.zeros(4, np.float32)}, np.ones(4, bool), 4))
    data = buffer.getvalue()
    digest = sha256_hex(data)
    entries = []
    for split in ("train", "val", "test"):
        (out / split).mkdir(parents=True)
    for i in range(shards):
        split = "train" if i % 10 < 8 else ("val" if i % 10 == 8 else "test")
        source = f"site_{i % 1000:04d}/rec.parquet"
        path = f"{split}/site_{i % 1000:04d}_rec_str_veh_{i:06d}_0123456789ab_shard0000.npz"
        (out / path).write_bytes(data)
        n_steps = 2 if i % 10 == 0 else 4
        entries.append({"path": path, "split": split, "source_id": source, "entity_id": f"str:'veh_{i}'",
                        "span_index": i, "shard_index": 0, "start": 0, "stop": n_steps, "n_steps": n_steps,
                        "rows": 4, "padded": n_steps < 4, "container": "npz", "bytes": len(data), "sha256": digest})
    seconds = {s: sum(e["n_steps"] for e in entries if e["split"] == s) / 10.0 for s in ("train", "val", "test")}
    budget = {"unit": "seconds", "splits": {s: {"requested": v, "candidate": 2 * v, "admitted": v, "emitted": v,
                                                "utilization": 1.0, "underfill": 0.0} for s, v in seconds.items()},
              "totals": {"requested_seconds": sum(seconds.values())}}
    splits = {s: {"shards": sum(e["split"] == s for e in entries), "steps": int(seconds[s] * 10),
                  "bytes": sum(e["bytes"] for e in entries if e["split"] == s)} for s in ("train", "val", "test")}
    manifest = {"format": 1, "output": spec.to_dict(), "entries": entries, "splits": splits, "budget": budget,
                "run_fingerprint": "f" * 64}
    config = {"format": 1, "job": {"output": spec.to_dict(), "schema": {"sample_hz": 10.0}},
              "results": {"budget": budget, "splits": splits, "shards": shards}}
    publish_committed(LocalDestination(out), run_fingerprint="f" * 64, marker=b"{}", manifest=readable_json(manifest),
                      config=readable_json(config))


def tree() -> dict[str, object]:
    root = Path(__file__).resolve().parent.parent
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "kuration"], cwd=root, capture_output=True,
                           text=True).stdout.split("\n")
    return {"commit": head, "uncommitted": [line[3:] for line in dirty if line]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-inspect-") as tmp:
        out = Path(tmp) / "out"
        build_s, _ = timed(lambda: build(out, args.shards))
        manifest_bytes = (out / MANIFEST_FILE).stat().st_size

        def plain() -> object:
            with open(out / MANIFEST_FILE, "rb") as f:
                return json.load(f)

        inspect_runs: list[float] = []
        json_runs: list[float] = []
        report = None
        for _ in range(args.repeats):  # interleaved, so drift on a shared machine hits both
            t, _ = timed(plain)
            json_runs.append(t)
            t, report = timed(lambda: inspect_dataset(out))
            inspect_runs.append(t)
        assert report is not None and report.shards == args.shards
    best_json, best_inspect = min(json_runs), min(inspect_runs)
    figures = [ratio("inspect_dataset(verify=False) seconds / json.load seconds", best_inspect, best_json,
                     "json.load of the same dataset_manifest.json (plain parse, nothing checked)",
                     target=f"<= {TARGET_RATIO:g}",
                     note=f"{args.shards:,} shards, {manifest_bytes / 1e6:.1f} MB manifest")]
    print(json.dumps({
        "report": figures,
        "bench": "inspect_dataset(verify=False) vs json.load of the manifest",
        "shards": args.shards, "manifest_bytes": manifest_bytes, "build_seconds": round(build_s, 2),
        "json_load_seconds": round(best_json, 4), "inspect_seconds": round(best_inspect, 4),
        "ratio_inspect_over_json_load": round(best_inspect / best_json, 3), "target_ratio_at_most": TARGET_RATIO,
        "runs": {"json_load": [round(t, 4) for t in json_runs], "inspect": [round(t, 4) for t in inspect_runs]},
        "tree": tree(),
    }, indent=1))


if __name__ == "__main__":
    main()
