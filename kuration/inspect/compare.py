"""``compare_datasets``: what changed between two committed datasets, structurally.

Both sides are inspected (:func:`kuration.inspect.report.inspect_dataset`, so both are loaded
fail closed, and decoded when ``verify=True``); the comparison reports

- shards added, removed and changed, by manifest path (changed: same path, another SHA-256);
- per split, the shard, step and byte counts on each side;
- modalities added, removed, and changed (dtype, shape or source);
- recursive differences in the config's ``schema``, ``strategy``, ``output`` and
  ``pipeline`` (the rest of the job: budget options, segmenter, executor, ...) sections, the
  ``results`` and the inspection ``warnings``: a list of ``{path, change, left, right}``,
  ``path`` a JSON Pointer (RFC 6901) into the section, ``change`` one of ``added`` (only the
  right side has it), ``removed`` (only the left) and ``changed``.

It reports; whether a change is acceptable is the reader's call. Timestamps and the commit
record's checksums are left out of the sections: they differ between any two runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kuration.inspect.report import REPORT_SCHEMA_VERSION, DatasetReport, Progress, inspect_dataset
from kuration.read.committed import load_committed

#: The config sections compared recursively, in the order reports show them.
SECTIONS = ("schema", "strategy", "output", "pipeline", "results", "warnings")
#: The job keys that have their own section; the rest of the job is the ``pipeline``.
_OWN_SECTION = ("schema", "strategy", "output")
_MISSING = object()


def _pointer(parts: tuple[str, ...]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def differences(left: Any, right: Any) -> list[dict[str, Any]]:
    """Every place ``left`` and ``right`` (JSON values) differ, depth first, keys sorted."""
    out: list[dict[str, Any]] = []
    stack: list[tuple[tuple[str, ...], Any, Any]] = [((), left, right)]
    while stack:
        parts, a, b = stack.pop()
        if a is _MISSING or b is _MISSING:
            out.append({"path": _pointer(parts), "change": "added" if a is _MISSING else "removed",
                        "left": None if a is _MISSING else a, "right": None if b is _MISSING else b})
        elif isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str, reverse=True):
                stack.append(((*parts, str(key)), a.get(key, _MISSING), b.get(key, _MISSING)))
        elif isinstance(a, list) and isinstance(b, list):
            for i in reversed(range(max(len(a), len(b)))):
                stack.append(((*parts, str(i)), a[i] if i < len(a) else _MISSING, b[i] if i < len(b) else _MISSING))
        elif type(a) is not type(b) or a != b:
            out.append({"path": _pointer(parts), "change": "changed", "left": a, "right": b})
    return out


@dataclass(frozen=True)
class DatasetComparison:
    left: DatasetReport
    right: DatasetReport
    shards: dict[str, Any]
    splits: dict[str, dict[str, Any]]
    modalities: dict[str, Any]
    sections: dict[str, list[dict[str, Any]]]

    @property
    def identical(self) -> bool:
        """Same shards, same modalities and no difference in any section."""
        return (not (self.shards["added"] or self.shards["removed"] or self.shards["changed"])
                and not (self.modalities["added"] or self.modalities["removed"] or self.modalities["changed"])
                and not any(self.sections.values()))

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": REPORT_SCHEMA_VERSION, "kind": "dataset_comparison",
                "left": {"root": self.left.root, "commit": self.left.commit, "verification": self.left.verification},
                "right": {"root": self.right.root, "commit": self.right.commit,
                          "verification": self.right.verification},
                "identical": self.identical, "shards": self.shards, "splits": self.splits,
                "modalities": self.modalities, "sections": self.sections}


def _sections(config: Mapping[str, Any], manifest_output: Any, report: DatasetReport) -> dict[str, Any]:
    raw = config.get("job")
    job: dict[str, Any] = raw if isinstance(raw, dict) else {}
    return {"schema": job.get("schema"), "strategy": job.get("strategy"),
            "output": job.get("output", manifest_output),
            "pipeline": {k: v for k, v in job.items() if k not in _OWN_SECTION},
            "results": config.get("results"), "warnings": report.warnings}


def _shards(left: list[Mapping[str, Any]], right: list[Mapping[str, Any]]) -> dict[str, Any]:
    a = {e["path"]: e["sha256"] for e in left}
    b = {e["path"]: e["sha256"] for e in right}
    changed = [{"path": p, "left_sha256": a[p], "right_sha256": b[p]} for p in sorted(a.keys() & b.keys())
               if a[p] != b[p]]
    return {"added": sorted(b.keys() - a.keys()), "removed": sorted(a.keys() - b.keys()), "changed": changed,
            "unchanged": len(a.keys() & b.keys()) - len(changed)}


def _modalities(left: DatasetReport, right: DatasetReport) -> dict[str, Any]:
    a = {m["name"]: m for m in left.modalities}
    b = {m["name"]: m for m in right.modalities}
    return {"added": [b[n] for n in sorted(b.keys() - a.keys())],
            "removed": [a[n] for n in sorted(a.keys() - b.keys())],
            "changed": [{"name": n, "left": a[n], "right": b[n]} for n in sorted(a.keys() & b.keys()) if a[n] != b[n]]}


def compare_datasets(left: str | os.PathLike[str], right: str | os.PathLike[str], verify: bool = False, *,
                     untrusted: bool = True, progress: Progress | None = None) -> DatasetComparison:
    """Compare the committed datasets ``left`` and ``right`` (directories or URLs); see the
    module doc. ``verify=True`` decodes every shard of both; ``progress`` is called per shard."""
    reports, configs = [], []
    for side in (left, right):
        dataset = load_committed(side, untrusted=untrusted)
        reports.append(inspect_dataset(dataset, verify, progress=progress))
        configs.append((dataset.config, dataset.manifest.get("output"), list(dataset.manifest["entries"])))
    a, b = reports
    sections_a = _sections(configs[0][0], configs[0][1], a)
    sections_b = _sections(configs[1][0], configs[1][1], b)
    splits = {}
    for name in a.splits:
        sa = {k: a.splits[name][k] for k in ("shards", "steps", "bytes")}
        sb = {k: b.splits[name][k] for k in ("shards", "steps", "bytes")}
        splits[name] = {"left": sa, "right": sb, "changed": sa != sb}
    return DatasetComparison(a, b, _shards(configs[0][2], configs[1][2]), splits, _modalities(a, b),
                             {name: differences(sections_a[name], sections_b[name]) for name in SECTIONS})


__all__ = ["SECTIONS", "DatasetComparison", "compare_datasets", "differences"]
