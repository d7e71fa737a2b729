"""``kuration-budget``: read a stored budget plan without Dagster (in CI, in a notebook's shell).

  kuration-budget review STORAGE_ROOT [--json] [--examples N] [--explain SOURCE ENTITY INDEX]
  kuration-budget check  STORAGE_ROOT [--underfill-warn 0.1] [--json]

``review`` explains the plan (the same text the demo prints); ``check`` runs the budget
contract that the blocking Dagster check runs. Exit status: 0 fine (``check`` prints
warnings but passes), 2 the plan is missing, tampered with or breaks the contract.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from kuration.budget.plan_store import read_plan_to_check
from kuration.budget.review import hours_selection_review
from kuration.budget.validation import validate_budget_plan
from kuration.errors import KurationError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kuration-budget",
        description="Explain or check the budget plan stored under a storage root (budget/budget.json and its tables).",
        epilog="Examples:\n  kuration-budget review storage/\n  kuration-budget review storage/ --json > review.json\n"
               "  kuration-budget review storage/ --explain site_a/flight_001.parquet \"str:'drone_01'\" 3\n"
               "  kuration-budget check storage/ --underfill-warn 0.2",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    review = commands.add_parser("review", help="why each split admitted what it did, with bounded examples")
    review.add_argument("root", help="storage root (local path or fsspec URL) holding budget/")
    review.add_argument("--json", action="store_true", help="print the review as JSON instead of text")
    review.add_argument("--examples", type=int, default=3, help="examples per kind and split (default: 3)")
    review.add_argument("--explain", nargs=3, metavar=("SOURCE", "ENTITY", "INDEX"),
                        help="explain one item instead (ENTITY as stored, e.g. \"str:'drone_01'\")")
    check = commands.add_parser("check", help="the budget contract (exit 2 on a violation)")
    check.add_argument("root", help="storage root (local path or fsspec URL) holding budget/")
    check.add_argument("--underfill-warn", type=float, default=None,
                       help="warn past this underfill fraction (default: what the plan was made with, else 0.1)")
    check.add_argument("--json", action="store_true", help="print the verdict, errors, warnings and figures as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "review":
            review = hours_selection_review(args.root, max_examples=args.examples)
            if args.explain:
                source, entity, index = args.explain
                try:
                    print(review.explain(source, entity, int(index)))
                except (KeyError, ValueError) as exc:
                    print(f"kuration-budget: {exc}", file=sys.stderr)
                    return 2
            elif args.json:
                print(json.dumps(review.to_dict(), indent=1, sort_keys=True, default=str))
            else:
                print(review.render())
            return 0
        plan, threshold = read_plan_to_check(args.root, underfill_warn_fraction=args.underfill_warn)
        result = validate_budget_plan(plan.items, plan.accounting, underfill_warn_fraction=threshold)
    except KurationError as exc:
        print(f"kuration-budget: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=1, sort_keys=True))
    else:
        for line in result.errors:
            print(f"ERROR   {line}")
        for line in result.warnings:
            print(f"WARNING {line}")
        print("budget plan: " + ("OK" if result.ok else f"{len(result.errors)} contract violation(s)"))
    return 0 if result.ok else 2


if __name__ == "__main__":
    sys.exit(main())
