"""``kuration gc ROOT``, ``kuration pin ROOT --holder NAME`` and ``kuration unpin ROOT --holder
NAME``: retention of a dataset root's versions (:mod:`kuration.output.version_gc`) and the
reader pins that keep a version from it (:mod:`kuration.output.version_pins`)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict

from kuration.cli import EXIT_BAD_INPUT, EXIT_OK, Command, ExitStatus
from kuration.errors import KurationError
from kuration.output.version_gc import DEFAULT_KEEP_VERSIONS, GcResult, collect_garbage
from kuration.output.version_pins import pin_version, unpin_version

#: A pin's default lifetime: a day, longer than most training runs; a longer one pins again.
DEFAULT_PIN_HOURS = 24.0


def _gc_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="dataset root (a folder or an fsspec URL)")
    parser.add_argument("--keep", type=int, default=DEFAULT_KEEP_VERSIONS, metavar="N",
                        help=f"versions to keep (default {DEFAULT_KEEP_VERSIONS}, as keep_versions in curation.json): "
                             "the current one counts as one; newer and pinned versions are always kept")
    parser.add_argument("--dry-run", action="store_true", help="say what would be removed; change nothing")
    parser.add_argument("--json", action="store_true", help="print the plan and what was removed as JSON")


def _gc_lines(result: GcResult) -> list[str]:
    plan = result.plan
    lines = [plan.note] if plan.note else []
    verb = "would remove" if result.dry_run else "removed"
    for fate in plan.fates:
        if fate.removed and fate.version in result.removed:
            lines.append(f"{fate.version:<6} {verb:<12} {fate.why}")
        elif fate.removed:
            lines.append(f"{fate.version:<6} {'kept':<12} pinned by a reader while gc ran")
        else:
            lines.append(f"{fate.version:<6} {'kept':<12} {fate.why}")
    lines.extend(f"expired pin of {holder} {'would be ' if result.dry_run else ''}removed" for holder in
                 plan.expired_pins)
    pool = result.pool
    if pool.removed or pool.kept or pool.refused:
        lines.append(pool.refused or f"shards/ {verb} {len(pool.removed)} pool object(s) no kept version names, kept "
                                     f"{pool.kept}")
    return lines


def _reported(args: argparse.Namespace, action: Callable[[], str]) -> int:
    """Print what ``action`` says (exit 0), or the error that stopped it (exit 2)."""
    try:
        said = action()
    except (KurationError, OSError) as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(said)
    return EXIT_OK


def _gc(args: argparse.Namespace) -> int:
    def collect() -> str:
        result = collect_garbage(args.root, args.keep, dry_run=args.dry_run)
        if args.json:
            return json.dumps(asdict(result), indent=2)
        return "\n".join(_gc_lines(result)) or f"{args.root}: no versions"

    return _reported(args, collect)


GC = Command(
    description="Remove the versions of a dataset root that retention no longer keeps: of the committed versions "
                "older than the current one, all but the newest --keep minus one (the current one counts), and the "
                "folders of killed or failed builds older than it. Never the current version, a newer one (staged "
                "or being written), a version a reader pinned (kuration pin), or a plain dataset at the root. Runs "
                "under the root's writer lease; one line per version says removed or kept, and why.",
    add_arguments=_gc_arguments, run=_gc,
    exit_status=ExitStatus(ok="done (or planned, with --dry-run)",
                           bad_input="the root, its publish log or a pin is unreadable, or a writer holds the lease"),
    examples=("storage/dataset", "storage/dataset --keep 5 --dry-run", "s3://bucket/dataset --json"),
)


def _pin_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="dataset root (a folder or an fsspec URL); pinning writes ROOT/pins/HOLDER.json")
    parser.add_argument("--holder", required=True, metavar="NAME",
                        help="who holds the pin (letters, digits, '.', '_', '-'), e.g. the training job's name; "
                             "pinning again with one holder replaces its pin")
    parser.add_argument("--version", metavar="vN", help="the version to pin (default: the current one)")
    parser.add_argument("--hours", type=float, default=DEFAULT_PIN_HOURS, metavar="H",
                        help=f"how long the pin holds (default {DEFAULT_PIN_HOURS:g}); an expired pin keeps nothing")


def _pin(args: argparse.Namespace) -> int:
    def pin() -> str:
        made = pin_version(args.root, args.version, holder=args.holder, ttl_seconds=args.hours * 3600)
        return f"{args.root}@{made.version}: pinned by {made.holder} until {made.expires} (gc keeps it)"

    return _reported(args, pin)


PIN = Command(
    description="Keep a version of a dataset root from gc while a reader uses it: a pin file under ROOT/pins/ "
                "that expires by itself after --hours. Needs write access to the root; a reader without it relies "
                "on keep_versions.",
    add_arguments=_pin_arguments, run=_pin,
    exit_status=ExitStatus(ok="pinned", bad_input="no such committed version, a bad holder name, or the root is "
                                                  "unreadable or read-only"),
    examples=("storage/dataset --holder train-job-42", "storage/dataset --holder eval --version v3 --hours 72"),
)


def _unpin_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", help="dataset root (a folder or an fsspec URL)")
    parser.add_argument("--holder", required=True, metavar="NAME", help="whose pin to drop (none: nothing to do)")


def _unpin(args: argparse.Namespace) -> int:
    def unpin() -> str:
        unpin_version(args.root, args.holder)
        return f"{args.root}: {args.holder} holds no pin now"

    return _reported(args, unpin)


UNPIN = Command(
    description="Drop a reader's pin, so gc may remove the version it kept (when retention no longer keeps it).",
    add_arguments=_unpin_arguments, run=_unpin,
    exit_status=ExitStatus(ok="unpinned (or held no pin)", bad_input="a bad holder name, or the root is unreadable"),
    examples=("storage/dataset --holder train-job-42",),
)


__all__ = ["GC", "PIN", "UNPIN"]
