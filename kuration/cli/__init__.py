"""What one verb of the ``kuration`` command is, and the exit status every verb shares.

A verb (``kuration inspect``, ``kuration resolve-splits`` ...) is a :class:`Command`: the
text of its ``--help`` (a description, examples, and what each exit status means for it),
a function that adds its arguments to a parser, and a function that runs it on the parsed
arguments and returns the exit status. A verb's module defines its command beside the code
it runs; the ``kuration`` program (``kuration_cli``) lists the verbs and imports a verb's
module only when that verb runs, so ``kuration inspect`` loads neither Dagster nor another
verb's dependencies. This module knows no verb, and prints nothing itself.

Exit status, the same for every verb (:data:`EXIT_OK`, :data:`EXIT_CHECK_FAILED`,
:data:`EXIT_BAD_INPUT`):

- 0: done, and whatever the verb judges passed;
- 1: the verb ran and a check failed: a gate, a shard's verification, a contract, the
  difference ``diff`` looks for, a run's blocking check;
- 2: bad input: a usage error, or a file, a setting or a dataset that cannot be read or is
  invalid (the message says what, where and how to fix it).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kuration.errors import InputError

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2

#: Where an exit-status list wraps (argparse wraps the rest to the terminal).
HELP_WIDTH = 88


class UsageError(InputError):
    """Arguments that parse, but do not go together (``--extend-baked`` without ``--rule``):
    :func:`run_command` reports it as argparse reports a usage error, with the usage line and
    exit status 2."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Wraps each paragraph of a description or epilog to the terminal, and keeps a paragraph
    whose lines are indented (a list, examples, a JSON sample) as it is written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = text.split("\n\n")
        return "\n\n".join(
            textwrap.indent(p, indent) if any(line.startswith(" ") for line in p.splitlines()[1:]) or p.startswith(" ")
            else textwrap.fill(" ".join(p.split()), width, initial_indent=indent, subsequent_indent=indent)
            for p in paragraphs)


@dataclass(frozen=True)
class ExitStatus:
    """What each exit status means for one verb, as its ``--help`` says: ``checked`` is None
    for a verb that judges nothing (it only ever exits 0 or 2)."""

    ok: str
    bad_input: str
    checked: str | None = None

    def help(self) -> str:
        meanings = [(EXIT_OK, self.ok), (EXIT_CHECK_FAILED, self.checked),
                    (EXIT_BAD_INPUT, f"{self.bad_input}; also a usage error")]
        return exit_status_help("exit status:", [(code, text) for code, text in meanings if text is not None])


def exit_status_help(title: str, meanings: Sequence[tuple[int, str]]) -> str:
    """``title`` and one wrapped line per exit status, for a ``--help``."""
    width = max(len(str(code)) for code, _ in meanings) + 2
    return "\n".join([title, *(textwrap.fill(text, HELP_WIDTH, initial_indent=f"  {code:<{width}}",
                                             subsequent_indent=" " * (width + 2)) for code, text in meanings)])


@dataclass(frozen=True)
class Command:
    """One verb. ``examples`` are the arguments after the verb (``out/ --verify``), shown
    after ``kuration VERB`` in its help; ``run`` returns the exit status and may raise
    :class:`UsageError`."""

    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    exit_status: ExitStatus
    examples: tuple[str, ...] = ()

    def parser(self, prog: str, *, invocation: str | None = None, note: str = "",
               exit_help: str | None = None) -> argparse.ArgumentParser:
        """This verb's parser under the program name ``prog`` (``kuration inspect``, or an old
        name). Its examples start with ``invocation`` (default ``prog``); ``note`` opens the
        description, and ``exit_help`` replaces the verb's exit-status help (an alias that keeps
        an exit status of its own says so). The parsed namespace carries ``prog``, for the
        messages."""
        epilog = []
        if self.examples:
            epilog.append("examples:\n" + "\n".join(f"  {invocation or prog} {e}" for e in self.examples))
        epilog.append(exit_help or self.exit_status.help())
        parser = argparse.ArgumentParser(prog=prog, description=f"{note}\n\n{self.description}" if note else
                                         self.description, epilog="\n\n".join(epilog),
                                         formatter_class=HelpFormatter)
        self.add_arguments(parser)
        parser.set_defaults(prog=prog)
        return parser


def run_command(command: Command, parser: argparse.ArgumentParser, argv: Sequence[str]) -> int:
    """Parse ``argv`` with ``parser`` (:meth:`Command.parser`) and run ``command`` on it; the
    exit status. A usage error, whether argparse or the command finds it, exits 2 through
    ``SystemExit`` after printing the usage, as argparse does."""
    args = parser.parse_args(list(argv))
    try:
        return int(command.run(args))
    except UsageError as exc:
        parser.error(str(exc))


__all__ = ["EXIT_BAD_INPUT", "EXIT_CHECK_FAILED", "EXIT_OK", "Command", "ExitStatus", "HelpFormatter", "UsageError",
           "exit_status_help", "run_command"]
