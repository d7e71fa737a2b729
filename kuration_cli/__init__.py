"""``kuration``: one command, one verb per task.

  kuration run --landing DIR --storage OUT      materialize the whole graph on a landing zone
  kuration check-landing DIR                    check a landing zone before anything runs
  kuration demo [--out DIR]                     the whole graph on the bundled demo corpus
  kuration resolve-splits ... --out splits.json generate a baked splits.json
  kuration budget review|check STORAGE_ROOT     explain or check a stored budget plan
  kuration inspect DATASET                      what a committed dataset holds
  kuration diff LEFT RIGHT                      what changed between two datasets
  kuration check DATASET --policy quality.json  judge a dataset against a quality policy

:data:`VERBS` is the list: a verb's name, the line ``kuration --help`` shows for it, and
where its :class:`kuration.cli.Command` lives. Adding a verb is one entry there (and the
command beside the code it runs). A verb's module is imported only when that verb runs:
``kuration --help`` and the Dagster-free verbs never import Dagster (``run`` and ``demo``
do). Every verb has ``--help`` with examples and what its exit status means; the status is
the same for all of them (:mod:`kuration.cli`): 0 ok, 1 a check failed, 2 bad input.

The older script names (``kur-inspect``, ``resolve-splits``, ``kuration-demo``, ...) are
aliases of these verbs, in :mod:`kuration_cli.aliases`. This module parses the verb and
hands the rest of the command line to it; it implements no verb itself.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from kuration._version import __version__
from kuration.cli import Command, ExitStatus, HelpFormatter, run_command


@dataclass(frozen=True)
class Verb:
    """One ``kuration`` verb: ``summary`` is its line in ``kuration --help``; ``command`` is
    ``module:attribute`` of its :class:`~kuration.cli.Command`, imported when the verb runs."""

    name: str
    summary: str
    command: str

    def load(self) -> Command:
        module, _, attribute = self.command.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, Command):
            raise TypeError(f"kuration {self.name}: {self.command} is a {type(command).__name__}, not a Command")
        return command


VERBS = (
    Verb("run", "materialize the whole asset graph on a landing zone (through the Dagster instance)",
         "kuration_cli.landing_commands:RUN"),
    Verb("check-landing", "check a landing zone before anything runs: settings, plugins, recordings, universe",
         "kuration_cli.landing_commands:CHECK_LANDING"),
    Verb("demo", "materialize the whole graph on the bundled demo corpus and say what came out",
         "kuration_definitions.demo_job:DEMO"),
    Verb("resolve-splits", "generate a baked splits.json from a universe.csv or a folder",
         "kuration.splits.cli:RESOLVE_SPLITS"),
    Verb("budget", "explain (review) or check the budget plan stored under a storage root",
         "kuration.budget.cli:BUDGET"),
    Verb("inspect", "summarize a committed dataset; --verify decodes every shard", "kuration.inspect.cli:INSPECT"),
    Verb("diff", "compare two committed datasets (exit 1 when they differ)", "kuration.inspect.cli:DIFF"),
    Verb("check", "judge a committed dataset against a quality policy (exit 1 when a gate fails)",
         "kuration.inspect.cli:CHECK"),
    Verb("versions", "list a dataset root's versions and which one is current",
         "kuration.output.versions_cli:VERSIONS"),
    Verb("publish", "audit a staged version and make it current (exit 1 when a blocking check fails)",
         "kuration.output.versions_cli:PUBLISH"),
    Verb("gc", "remove the versions of a dataset root that keep_versions no longer keeps (never current, newer "
               "or pinned ones)", "kuration.output.version_gc_cli:GC"),
    Verb("pin", "keep a version of a dataset root from gc while a reader uses it (expires by itself)",
         "kuration.output.version_gc_cli:PIN"),
    Verb("unpin", "drop a reader's pin on a dataset root's version", "kuration.output.version_gc_cli:UNPIN"),
)

#: The exit status every verb shares, as ``kuration --help`` states it.
EXIT_STATUS = ExitStatus(ok="done, and whatever the verb judges passed",
                         checked="a check failed: a gate, a verification, a contract, a difference (diff), a run's "
                                 "blocking check", bad_input="bad input: a file, a setting or a dataset that cannot "
                                                             "be read or is invalid")


def verb(name: str) -> Verb:
    """The verb called ``name``; ``KeyError`` naming the verbs there are."""
    for candidate in VERBS:
        if candidate.name == name:
            return candidate
    raise KeyError(f"no kuration verb {name!r}; the verbs are {', '.join(v.name for v in VERBS)}")


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: a verb and the arguments that go to it."""
    width = max(len(v.name) for v in VERBS)
    listing = "\n".join(f"  {v.name:<{width}}  {v.summary}" for v in VERBS)
    parser = argparse.ArgumentParser(
        prog="kuration", description="Curate recorded sessions into training datasets you can trust.",
        epilog=f"verbs:\n{listing}\n\n`kuration VERB --help` shows a verb's options, examples and exit status.\n\n"
               f"{EXIT_STATUS.help()}",
        formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"kuration {__version__}")
    parser.add_argument("verb", metavar="VERB", choices=[v.name for v in VERBS], help="what to do (listed below)")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="the verb's own arguments (VERB --help)")
    return parser


def verb_parser(name: str) -> argparse.ArgumentParser:
    """The parser of ``kuration NAME``."""
    prog = f"kuration {name}"
    return verb(name).load().parser(prog)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kuration VERB ARGS`` (``argv`` without the program name; default ``sys.argv``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    if not argv:
        parser.error("name a VERB (`kuration --help` lists them)")
    args = parser.parse_args(argv)
    command = verb(args.verb).load()
    return run_command(command, command.parser(f"kuration {args.verb}"), args.arguments)


__all__ = ["EXIT_STATUS", "VERBS", "Verb", "build_parser", "main", "verb", "verb_parser"]
