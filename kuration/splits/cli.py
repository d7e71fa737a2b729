"""``kuration resolve-splits``: generate a baked, committable ``splits.json``.

Four ways in, one way out (only ``file_indices`` selectors plus ``universe_hash``):

  kuration resolve-splits --from-csv U.csv --out splits.json
  kuration resolve-splits --universe-csv U.csv --strategy random|stratified --seed 7 \\
      [--group-by group|source] [--ad-aware] [--val-ratio 0.2] [--test-ratio 0.2] --out splits.json
  kuration resolve-splits --folder DIR [--pattern GLOB] --strategy random --seed 7 --out splits.json
  kuration resolve-splits --universe-csv U.csv --rule rule.json --out splits.json
  kuration resolve-splits --universe-csv U.csv --rule baked.json --extend-baked --seed 7 --out splits.json

``--folder`` is the universe of a folder with no ``universe.csv`` (seed 003's
``--data-module`` case, a module that enumerates its samples from disk): every file under
DIR whose name matches ``--pattern`` is one source holding one sample, named by its path
relative to DIR (:func:`kuration.splits.enumerate_folder`). It takes ``--strategy`` or
``--rule`` as ``--universe-csv`` does.

A baked file (concrete selectors, pinned universe_hash) given as --rule for a universe
that has changed since it was baked must decide about every sample: samples none of its
stages names are an error, naming them, until --extend-baked assigns them by the seeded
unit hash (kuration.splits.extend) without moving any earlier assignment.

Same inputs and seed give byte-identical output. Exit status: 0 written, 2 bad input (the
message says what and where); nothing is written on failure. Seed 003 names the command
``resolve-splits``, which stays an alias (``kuration_cli.aliases``).
"""

from __future__ import annotations

import argparse
import logging
import sys

from kuration.cli import EXIT_BAD_INPUT, EXIT_OK, Command, ExitStatus, UsageError
from kuration.errors import KurationError, UniverseDriftError
from kuration.splits.bake import GROUP_BY, bake_from_split_column, bake_random, bake_stratified
from kuration.splits.config import LEAKAGE_MODES, DataSplitConfig, load_splits, save_splits
from kuration.splits.extend import SplitExtension, bake_file
from kuration.splits.resolution import plan_splits
from kuration.splits.stages import EXCLUSIVE_STAGES
from kuration.splits.universe import Universe, enumerate_folder
from kuration.splits.universe_csv import read_universe_csv


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-csv", metavar="U.csv",
                        help="import this universe.csv's 'split' column (train/val/test)")
    source.add_argument("--universe-csv", metavar="U.csv", help="the universe to split (with --strategy or --rule)")
    source.add_argument("--folder", metavar="DIR",
                        help="the universe is the files under DIR (a folder or an fsspec URL), one sample per file, "
                             "named by its path relative to DIR; with --strategy or --rule")
    parser.add_argument("--pattern", metavar="GLOB", default=None,
                        help="with --folder: the file names that are samples (default: every visible file), "
                             "e.g. '*.npz'")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--strategy", choices=["random", "stratified"],
                     help="compute a split over --universe-csv or --folder")
    how.add_argument("--rule", metavar="R.json", help="resolve this hand-authored rule splits.json into its baked form")
    parser.add_argument("--seed", type=int, default=None, help="random seed (required with --strategy)")
    parser.add_argument("--val-ratio", type=float, default=0.2,
                        help="share for val: of groups with random, of samples (per tag) with stratified (default 0.2)")
    parser.add_argument("--test-ratio", type=float, default=0.2,
                        help="share for test: of groups with random, of samples (per tag) with stratified (default "
                             "0.2)")
    parser.add_argument(
        "--group-by", choices=list(GROUP_BY), default="group",
        help="unit kept whole in one stage: the universe's 'group' column (defaults to source) or the source "
        "(default: group). With 'source', a group spanning several sources may land in two stages, which the "
        "group-aware leakage check then refuses",
    )
    parser.add_argument("--ad-aware", action="store_true",
                        help="anomaly-detection split: keep samples with a non-background category out of train")
    parser.add_argument("--leakage", choices=list(LEAKAGE_MODES), default="error",
                        help="leakage policy written into the file for generated splits (default: error)")
    parser.add_argument(
        "--extend-baked", action="store_true",
        help="with --rule: a baked file whose universe changed keeps every assignment, and the samples it names in "
        "no stage are assigned by the seeded unit hash (needs --seed; --val-ratio, --test-ratio, --group-by and "
        "--ad-aware apply to them). Without it such samples are an error",
    )
    parser.add_argument("--one-file-per-row", action="store_true",
                        help="require a distinct materialized_path on every universe.csv row")
    parser.add_argument("--out", required=True, metavar="splits.json",
                        help="where to write the baked file (path or URL)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")


def _refuse_combinations(args: argparse.Namespace) -> None:
    """Options that parse but do not go together: a :class:`UsageError` naming them."""
    if args.from_csv and (args.strategy or args.rule):
        raise UsageError("--from-csv imports the split column; it takes neither --strategy nor --rule")
    if args.pattern is not None and not args.folder:
        raise UsageError("--pattern picks the files of --folder DIR; a universe.csv lists its samples itself")
    if (args.universe_csv or args.folder) and not (args.strategy or args.rule):
        given = "--universe-csv" if args.universe_csv else "--folder"
        raise UsageError(f"{given} needs --strategy random|stratified or --rule R.json")
    if args.strategy and args.seed is None:
        raise UsageError("--strategy needs --seed N (the split must be reproducible)")
    if args.extend_baked and not args.rule:
        raise UsageError("--extend-baked extends the baked file given as --rule R.json")
    if args.extend_baked and args.seed is None:
        raise UsageError("--extend-baked needs --seed N (new samples are assigned by a seeded hash)")


def _universe(args: argparse.Namespace) -> Universe:
    if args.folder:
        return enumerate_folder(args.folder, pattern=args.pattern or "*")
    return read_universe_csv(args.from_csv or args.universe_csv, one_file_per_row=args.one_file_per_row)


def _bake(args: argparse.Namespace, universe: Universe) -> tuple[DataSplitConfig, SplitExtension | None]:
    """The baked split the options ask for, and the extension when ``--extend-baked`` extended one."""
    if args.from_csv:
        return bake_from_split_column(universe, leakage=args.leakage), None
    if args.rule:
        baked = bake_file(
            load_splits(args.rule), universe, where=args.rule, extend=args.extend_baked, seed=args.seed or 0,
            val_ratio=args.val_ratio, test_ratio=args.test_ratio, group_by=args.group_by, ad_aware=args.ad_aware,
        )
        if baked.cfg is None:
            raise UniverseDriftError(baked.refusal(args.rule))
        return baked.cfg, baked.extension
    bake = bake_random if args.strategy == "random" else bake_stratified
    return bake(universe, seed=args.seed, val_ratio=args.val_ratio, test_ratio=args.test_ratio,
                group_by=args.group_by, ad_aware=args.ad_aware, leakage=args.leakage), None


def _run(args: argparse.Namespace) -> int:
    _refuse_combinations(args)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        universe = _universe(args)
        cfg, extension = _bake(args, universe)
        resolution = plan_splits(cfg, universe)
        written = save_splits(cfg, args.out)
    except (KurationError, FileNotFoundError) as exc:
        print(f"{args.prog}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.quiet:
        counts, groups = resolution.counts(), resolution.group_counts()
        stages = ", ".join(f"{s}={counts[s]:,} samples/{groups[s]:,} groups" for s in EXCLUSIVE_STAGES)
        print(f"wrote {written}: {stages}; universe {len(universe):,} samples, universe_hash "
              f"{universe.hash[:12]}...; {resolution.leakage.summary()}")
        if extension is not None:
            print(f"extended {args.rule}: {extension.summary()}")
    return EXIT_OK


RESOLVE_SPLITS = Command(
    description="Generate a baked splits.json (concrete file_indices selectors plus a pinned universe_hash) from a "
                "universe.csv or a folder: import its 'split' column, compute a seeded split, or resolve a rule file.",
    add_arguments=_add_arguments, run=_run,
    exit_status=ExitStatus(ok="the baked file was written",
                           bad_input="a universe, rule or option is invalid, or the split leaks; nothing was written"),
    examples=("--from-csv universe.csv --out splits.json",
              "--universe-csv universe.csv --strategy stratified --seed 7 --out splits.json",
              "--folder frames/ --pattern '*.npz' --strategy random --seed 7 --out splits.json",
              "--universe-csv universe.csv --rule rule.json --out splits.json",
              "--universe-csv universe.csv --rule baked.json --extend-baked --seed 7 --out splits.json"),
)


__all__ = ["RESOLVE_SPLITS"]
