"""``kuration versions ROOT`` and ``kuration publish ROOT --version V``: what a dataset root
holds, and making an audited version current (:mod:`kuration.output.versions`), then
keeping ``--keep`` versions (:mod:`kuration.output.version_gc`).

The audit before a publish is the blocking checks a pipeline runs on a staged version: the
commit chain and every shard's size and SHA-256 (``dataset_integrity``), and, with
``--policy``, the quality gates (``kuration check``). A version that fails is not published
unless ``--force`` is given; a forced publication records what failed and ``--reason`` in
its publish record, where ``kuration versions`` shows it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from kuration.cli import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, Command, ExitStatus
from kuration.errors import KurationError
from kuration.inspect.quality import check_quality, load_policy
from kuration.output.version_gc import DEFAULT_KEEP_VERSIONS, check_keep, collect_under_lease
from kuration.output.version_listing import describe_versions
from kuration.output.versions import DatasetRoot, PublishRecord
from kuration.read.committed import verify_dataset


@dataclass(frozen=True)
class Audit:
    """The blocking checks on one version: ``failures`` names each one that failed."""

    version: str
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


def audit_version(root: str, version: str, *, policy_path: str | None = None) -> Audit:
    """Run the blocking checks on ``version`` of ``root``: integrity, and the policy's gates."""
    failures = []
    integrity = verify_dataset(root, version=version)
    if not integrity.ok:
        failures.append(f"dataset_integrity: {integrity.verdict}")
    if policy_path is not None:
        quality = check_quality(f"{root}@{version}", load_policy(policy_path))
        failures.extend(f"dataset_quality: {error}" for error in quality.errors)
    return Audit(version, tuple(failures))


@dataclass(frozen=True)
class Publication:
    """What ``kuration publish`` did: the audit, the publish record (None: not published),
    and the versions retention removed afterwards."""

    audit: Audit
    record: PublishRecord | None
    removed: tuple[str, ...] = ()


def publish_audited(root: str, version: str, *, policy_path: str | None = None, force: bool = False,
                    reason: str = "", keep_versions: int | None = None) -> Publication:
    """Audit ``version`` and publish it when the audit passes, or when ``force`` (recorded,
    with what failed); then, with ``keep_versions``, remove the versions retention no longer
    keeps (:mod:`.version_gc`). Under the root's writer lease: no write runs meanwhile."""
    dataset_root = DatasetRoot(root)
    if version not in dataset_root.versions():
        raise KurationError(f"{dataset_root.url}: has no version {version!r} (it has "
                            f"{', '.join(dataset_root.versions()) or 'none'}); see `kuration versions {root}`")
    if keep_versions is not None:
        check_keep(keep_versions)
    audit = audit_version(root, version, policy_path=policy_path)
    if not audit.passed and not force:
        return Publication(audit, None)
    why = "; ".join(([reason] if reason else []) + [f"published over: {f}" for f in audit.failures])
    with dataset_root.destination.lease():
        record = dataset_root.publish(version, forced=not audit.passed, reason=why)
        removed = () if keep_versions is None else collect_under_lease(dataset_root.destination, keep_versions).removed
    return Publication(audit, record, removed)


def _versions_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="dataset root (a folder or an fsspec URL)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")


def _row_text(row: dict) -> str:
    hours = row.get("hours")
    split_hours = "" if not hours else "  " + " ".join(f"{k} {v:g} h" for k, v in hours.items())
    forced = "  FORCED: " + "; ".join(row.get("reasons", [])) if row.get("forced") else ""
    pinned = "  pinned by " + ", ".join(row["pinned"]) if row.get("pinned") else ""
    return (f"{'*' if row['current'] else ' '} {row['version']:<5} {row['state']:<10} "
            f"{row.get('finished') or '-':<26} run {(row.get('run_fingerprint') or '-')[:12]:<12}"
            f"{split_hours}{pinned}{forced}")


def _versions(args: argparse.Namespace) -> int:
    try:
        rows = describe_versions(args.root)
    except (KurationError, OSError) as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(f"{args.root}: no dataset versions")
    else:
        print("\n".join(_row_text(row) for row in rows))
    return EXIT_OK


VERSIONS = Command(
    description="List the versions of a dataset root: state, when each was committed, its run fingerprint, split "
                "hours, the reader pins that keep it from gc, whether it was published over a failing check, and "
                "which one is current (*).",
    add_arguments=_versions_arguments, run=_versions,
    exit_status=ExitStatus(ok="listed", bad_input="the root or its publish log is unreadable"),
    examples=("storage/dataset", "s3://bucket/dataset --json"),
)


def _publish_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="dataset root (a folder or an fsspec URL)")
    parser.add_argument("--version", required=True, metavar="vN", help="the version to make current")
    parser.add_argument("--policy", metavar="quality.json", help="also audit the quality gates of this policy")
    parser.add_argument("--force", action="store_true",
                        help="publish even if a check fails (recorded in the publish record, with what failed)")
    parser.add_argument("--reason", default="", help="why (recorded in the publish record)")
    parser.add_argument("--keep", type=int, default=DEFAULT_KEEP_VERSIONS, metavar="N",
                        help=f"then keep N versions (default {DEFAULT_KEEP_VERSIONS}, as keep_versions in "
                             "curation.json): the current one counts, newer and pinned ones are always kept; the rest "
                             "are removed (kuration gc)")


def _publish(args: argparse.Namespace) -> int:
    try:
        published = publish_audited(args.root, args.version, policy_path=args.policy, force=args.force,
                                    reason=args.reason, keep_versions=args.keep)
    except (KurationError, OSError) as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    audit, record = published.audit, published.record
    for failure in audit.failures:
        print(f"{args.prog}: check failed: {failure}", file=sys.stderr)
    if record is None:
        print(f"{args.prog}: {args.version} not published: a blocking check failed (--force publishes it anyway, "
              "and records that)", file=sys.stderr)
        return EXIT_CHECK_FAILED
    print(f"{args.root}: {record.version} is current (publish record {record.sequence}"
          f"{', forced' if record.forced else ''}); kept {args.keep} versions, removed "
          f"{', '.join(published.removed) or 'none'}")
    return EXIT_OK


PUBLISH = Command(
    description="Make a committed version of a dataset root current, in one atomic step, after auditing it: the "
                "commit chain and every shard (dataset_integrity), and with --policy the quality gates. A version "
                "that fails is not published unless --force is given, which is recorded. Then the versions --keep "
                "no longer keeps are removed, as `kuration gc` does.",
    add_arguments=_publish_arguments, run=_publish,
    exit_status=ExitStatus(ok="published", checked="a blocking check failed, so nothing was published",
                           bad_input="no such version, or the root is unreadable"),
    examples=("storage/dataset --version v3", "storage/dataset --version v3 --policy quality.json",
              "storage/dataset --version v3 --force --reason 'hotfix approved by data-eng'"),
)


__all__ = ["Audit", "PUBLISH", "Publication", "VERSIONS", "audit_version", "publish_audited"]
