"""``resolve-splits``: generate a baked, committable ``splits.json``.

Three ways in, one way out (only ``file_indices`` selectors plus ``universe_hash``):

  resolve-splits --from-csv U.csv --out splits.json
  resolve-splits --universe-csv U.csv --strategy random|stratified --seed 7 \\
      [--group-by group|source] [--ad-aware] [--val-ratio 0.2] [--test-ratio 0.2] --out splits.json
  resolve-splits --universe-csv U.csv --rule rule.json --out splits.json
  resolve-splits --universe-csv U.csv --rule baked.json --extend-baked --seed 7 --out splits.json

A baked file (concrete selectors, pinned universe_hash) given as --rule for a universe
that has changed since it was baked must decide about every sample: samples none of its
stages names are an error, naming them, until --extend-baked assigns them by the seeded
unit hash (kuration.splits.extend) without moving any earlier assignment.

Same inputs and seed give byte-identical output. Exit status: 0 written, 2 bad input
(the message says what and where); nothing is written on failure.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from kuration.errors import KurationError, UniverseDriftError
from kuration.splits.bake import GROUP_BY, bake_from_split_column, bake_random, bake_stratified
from kuration.splits.config import LEAKAGE_MODES, load_splits, save_splits
from kuration.splits.extend import SplitExtension, bake_file
from kuration.splits.resolution import plan_splits
from kuration.splits.stages import EXCLUSIVE_STAGES
from kuration.splits.universe_csv import read_universe_csv


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="resolve-splits",
        description=(
            "Generate a baked splits.json (concrete file_indices selectors plus a pinned universe_hash) "
            "from a universe.csv: import its 'split' column, compute a seeded split, or resolve a rule file."
        ),
        epilog="Examples:\n  resolve-splits --from-csv universe.csv --out splits.json\n"
        "  resolve-splits --universe-csv universe.csv --strategy stratified --seed 7 --out splits.json\n"
        "  resolve-splits --universe-csv universe.csv --rule rule.json --out splits.json\n"
        "  resolve-splits --universe-csv universe.csv --rule baked.json --extend-baked --seed 7 --out splits.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-csv", metavar="U.csv",
                        help="import this universe.csv's 'split' column (train/val/test)")
    source.add_argument("--universe-csv", metavar="U.csv", help="the universe to split (with --strategy or --rule)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--strategy", choices=["random", "stratified"], help="compute a split over --universe-csv")
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
                        help="require a distinct materialized_path on every universe row")
    parser.add_argument("--out", required=True, metavar="splits.json",
                        help="where to write the baked file (path or URL)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.from_csv and (args.strategy or args.rule):
        parser.error("--from-csv imports the split column; it takes neither --strategy nor --rule")
    if args.universe_csv and not (args.strategy or args.rule):
        parser.error("--universe-csv needs --strategy random|stratified or --rule R.json")
    if args.strategy and args.seed is None:
        parser.error("--strategy needs --seed N (the split must be reproducible)")
    if args.extend_baked and not args.rule:
        parser.error("--extend-baked extends the baked file given as --rule R.json")
    if args.extend_baked and args.seed is None:
        parser.error("--extend-baked needs --seed N (new samples are assigned by a seeded hash)")
    extension: SplitExtension | None = None
    try:
        universe = read_universe_csv(args.from_csv or args.universe_csv, one_file_per_row=args.one_file_per_row)
        if args.from_csv:
            cfg = bake_from_split_column(universe, leakage=args.leakage)
        elif args.rule:
            baked = bake_file(
                load_splits(args.rule), universe, where=args.rule, extend=args.extend_baked, seed=args.seed or 0,
                val_ratio=args.val_ratio, test_ratio=args.test_ratio, group_by=args.group_by, ad_aware=args.ad_aware,
            )
            if baked.cfg is None:
                raise UniverseDriftError(baked.refusal(args.rule))
            cfg, extension = baked.cfg, baked.extension
        else:
            bake = bake_random if args.strategy == "random" else bake_stratified
            cfg = bake(
                universe, seed=args.seed, val_ratio=args.val_ratio, test_ratio=args.test_ratio,
                group_by=args.group_by, ad_aware=args.ad_aware, leakage=args.leakage,
            )
        resolution = plan_splits(cfg, universe)
        written = save_splits(cfg, args.out)
    except (KurationError, FileNotFoundError) as exc:
        print(f"resolve-splits: error: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        counts, groups = resolution.counts(), resolution.group_counts()
        stages = ", ".join(f"{s}={counts[s]} samples/{groups[s]} groups" for s in EXCLUSIVE_STAGES)
        print(f"wrote {written}: {stages}; universe {len(universe)} samples, universe_hash "
              f"{universe.hash[:12]}...; {resolution.leakage.summary()}")
        if extension is not None:
            print(f"extended {args.rule}: {extension.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
