"""``kuration budget``: read a stored budget plan without Dagster (in CI, in a notebook's shell).

  kuration budget review STORAGE_ROOT [--json] [--examples N] [--explain SOURCE ENTITY INDEX]
  kuration budget check  STORAGE_ROOT [--underfill-warn 0.1] [--json]

``review`` explains the plan (the same text the demo prints); ``check`` runs the budget
contract that the blocking Dagster check runs. Exit status, as for every verb
(:mod:`kuration.cli`): 0 fine (``check`` prints warnings but passes), 1 the plan breaks the
contract, 2 the plan is missing, tampered with or malformed, or ``--explain`` names no item.
The old name ``kuration-budget`` is an alias for this release (``kuration_cli.aliases``).
"""

from __future__ import annotations

import argparse
import json
import sys

from kuration.budget.plan_store import read_plan_to_check
from kuration.budget.review import hours_selection_review
from kuration.budget.validation import validate_budget_plan
from kuration.cli import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, Command, ExitStatus
from kuration.errors import KurationError


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="command", required=True, metavar="{review,check}",
                                     help="review explains the plan; check runs its contract")
    review = commands.add_parser("review", help="why each split admitted what it did, with bounded examples")
    review.add_argument("root", help="storage root (local path or fsspec URL) holding budget/")
    review.add_argument("--json", action="store_true", help="print the review as JSON instead of text")
    review.add_argument("--examples", type=int, default=3, help="examples per kind and split (default: 3)")
    review.add_argument("--explain", nargs=3, metavar=("SOURCE", "ENTITY", "INDEX"),
                        help="explain one item instead (ENTITY as stored, e.g. \"str:'drone_01'\")")
    check = commands.add_parser("check", help="the budget contract (exit 1 on a violation)")
    check.add_argument("root", help="storage root (local path or fsspec URL) holding budget/")
    check.add_argument("--underfill-warn", type=float, default=None,
                       help="warn past this underfill fraction (default: what the plan was made with, else 0.1)")
    check.add_argument("--json", action="store_true", help="print the verdict, errors, warnings and figures as JSON")


def _review(args: argparse.Namespace) -> int:
    review = hours_selection_review(args.root, max_examples=args.examples)
    if args.explain:
        source, entity, index = args.explain
        try:
            print(review.explain(source, entity, int(index)))
        except (KeyError, ValueError) as exc:
            print(f"{args.prog}: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
    elif args.json:
        print(json.dumps(review.to_dict(), indent=1, sort_keys=True, default=str))
    else:
        print(review.render())
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    plan, threshold = read_plan_to_check(args.root, underfill_warn_fraction=args.underfill_warn)
    result = validate_budget_plan(plan.items, plan.accounting, underfill_warn_fraction=threshold)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1, sort_keys=True))
    else:
        for line in result.errors:
            print(f"ERROR   {line}")
        for line in result.warnings:
            print(f"WARNING {line}")
        print("budget plan: " + ("OK" if result.ok else f"{len(result.errors)} contract violation(s)"))
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


def _run(args: argparse.Namespace) -> int:
    try:
        return _review(args) if args.command == "review" else _check(args)
    except KurationError as exc:
        print(f"{args.prog}: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


BUDGET = Command(
    description="Explain or check the budget plan stored under a storage root (budget/budget.json and its tables).",
    add_arguments=_add_arguments, run=_run,
    exit_status=ExitStatus(ok="reviewed, or the plan keeps the contract (warnings are printed, not failed)",
                           checked="check: the plan breaks the budget contract (each violation is printed)",
                           bad_input="the plan is missing, tampered with or malformed, or --explain names no item"),
    examples=("review storage/", "review storage/ --json > review.json",
              "review storage/ --explain site_a/flight_001.parquet \"str:'drone_01'\" 3",
              "check storage/ --underfill-warn 0.2"),
)


__all__ = ["BUDGET"]
