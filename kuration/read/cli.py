"""``kuration-dataset``: check or describe a written dataset without Dagster (before a
training job reads it, in CI, from a shell on the training machine).

  kuration-dataset verify OUT [--json]   the commit chain, and every shard's size and SHA-256
  kuration-dataset info   OUT [--json]   commit state, run, container, splits, budget

``OUT`` is a local folder or an fsspec URL (``s3://bucket/run1``). Exit status: 0 fine;
2 the dataset is not committed, does not verify, or cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from kuration.errors import KurationError
from kuration.read.committed import load_committed, verify_dataset


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kuration-dataset",
        description="Verify or describe a dataset written by write_dataset or the Dagster dataset asset.",
        epilog="Examples:\n  kuration-dataset verify demo_output/storage/dataset\n"
               "  kuration-dataset verify s3://bucket/run1 --json\n  kuration-dataset info demo_output/storage/dataset",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    verify = commands.add_parser("verify", help="re-hash every shard against the manifest; exit 2 on any mismatch")
    verify.add_argument("out", help="the dataset folder or URL (holding dataset.commit.json)")
    verify.add_argument("--json", action="store_true", help="print the result as JSON")
    info = commands.add_parser("info", help="what the committed dataset holds (reads metadata only)")
    info.add_argument("out", help="the dataset folder or URL (holding dataset.commit.json)")
    info.add_argument("--json", action="store_true", help="print the description as JSON")
    return parser


def _info(out: str) -> dict[str, Any]:
    dataset = load_committed(out)
    manifest, config = dataset.manifest, dataset.config
    return {
        "out": dataset.root, "state": dataset.record.state, "run_fingerprint": dataset.record.run_fingerprint,
        "container": dataset.spec.container, "shard_length": dataset.spec.shard_length,
        "short_policy": dataset.spec.short_policy, "modalities": sorted(dataset.spec.modalities),
        "splits": manifest.get("splits", {}), "shards": len(dataset.entries),
        "budget_unit": (manifest.get("budget") or {}).get("unit"),
        "timestamps": config.get("timestamps", {}),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "info":
        try:
            info = _info(args.out)
        except KurationError as exc:
            print(f"kuration-dataset: {exc}", file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(info, indent=1, sort_keys=True))
        else:
            print(f"{info['out']}: {info['state']} (run {info['run_fingerprint'][:12]}), {info['shards']} {info['container']} "
                  f"shards of {info['shard_length']} steps ({info['short_policy']}); modalities {', '.join(info['modalities'])}")
            for name, split in info["splits"].items():
                print(f"  {name:5s} {split['shards']:6d} shards {split['steps']:9d} steps {split['bytes'] / 1e6:10.1f} MB")
        return 0
    result = verify_dataset(args.out)
    if args.json:
        print(json.dumps({"ok": result.ok, "errors": list(result.errors), "shards": result.shards, "bytes": result.bytes,
                          "bad_shards": list(result.bad_shards), "figures": result.figures}, indent=1, sort_keys=True))
    else:
        for line in result.errors:
            print(f"ERROR {line}")
        print(f"dataset: {'OK' if result.ok else 'FAILED'}: {result.shards} shards, {result.bytes / 1e6:.1f} MB checked, "
              f"{len(result.bad_shards)} bad")
    return 0 if result.ok else 2


if __name__ == "__main__":
    sys.exit(main())
