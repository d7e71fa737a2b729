"""The older script names, each a thin alias of a ``kuration`` verb.

An alias runs its verb with the same arguments and output, under its old name in messages,
and prints one line on stderr naming the ``kuration`` form. It keeps the exit status the
old script had, so a script or CI job written against it keeps working:

- ``kur-inspect``, ``kur-diff`` and ``kur-check`` are the names seed 000 gives, and
  ``resolve-splits`` the one seed 003 gives (the Cuvis.AI command): they stay. The ``kur-``
  three keep their own exit status: 1 unreadable, 2 judged and failed (seed 000: "kur-check
  exits 2 when a gate fails"), 64 usage error; and ``kur-diff`` exits 0 whether or not the
  datasets differ.
- ``kuration-demo`` and ``kuration-budget`` are deprecated: they work for this release and
  go in the next (``kuration-budget check`` exits 2 on a violation, as before).

Each alias is a callable object (the console script calls it), defined by one entry in
:data:`ALIASES`. This module decides nothing a verb does.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kuration.cli import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, exit_status_help, run_command
from kuration_cli import verb

#: The old ``kur-inspect`` / ``kur-diff`` / ``kur-check`` exit status, kept under those names.
_KUR_STATUS = {EXIT_CHECK_FAILED: 2, EXIT_BAD_INPUT: 1}
_KUR_USAGE = 64


@dataclass(frozen=True)
class Alias:
    """``name`` runs ``kuration VERB`` with ``fixed`` arguments first. ``kept`` says why the
    name stays (a seed gives it); without it the name is deprecated. ``statuses`` maps the
    verb's exit status to the old one where they differ, ``usage_status`` is the old
    usage-error status, and ``exit_help`` the help that states them (None: the verb's own)."""

    name: str
    verb: str
    kept: str | None = None
    fixed: tuple[str, ...] = ()
    statuses: Mapping[int, int] = field(default_factory=dict)
    usage_status: int = EXIT_BAD_INPUT
    exit_help: str | None = None

    @property
    def new_form(self) -> str:
        return " ".join(["kuration", self.verb, *self.fixed])

    @property
    def notice(self) -> str:
        """The one line the alias prints on stderr."""
        if self.kept is None:
            return f"{self.name}: deprecated, and gone in the next release; use `{self.new_form}` (same arguments)"
        return f"{self.name}: the same as `{self.new_form}` (a name {self.kept} gives; it stays)"

    def __call__(self, argv: Sequence[str] | None = None) -> int:
        print(self.notice, file=sys.stderr)
        command = verb(self.verb).load()
        if self.kept is None:
            note = f"{self.name} is `{self.new_form}` under its old name: deprecated, gone in the next release."
        else:
            note = f"{self.name} is `{self.new_form}` under the name {self.kept} gives it; the name stays."
        parser = command.parser(self.name, invocation=f"kuration {self.verb}", note=note, exit_help=self.exit_help)
        try:
            status = run_command(command, parser, [*self.fixed, *(sys.argv[1:] if argv is None else argv)])
        except SystemExit as exit_:
            if exit_.code == EXIT_BAD_INPUT:  # argparse's usage error
                raise SystemExit(self.usage_status) from None
            raise
        return self.statuses.get(status, status)


def _kur(name: str, verb_name: str, ok: str, judged: str, *, fixed: tuple[str, ...] = ()) -> Alias:
    exit_help = exit_status_help(
        f"exit status ({name} keeps its own; `kuration {verb_name}` exits 1 when a check fails, 2 on bad input):",
        [(0, ok), (1, "nothing could be judged: not a readable committed dataset, or an invalid policy file"),
         (2, f"judged and failed: {judged}"), (_KUR_USAGE, "usage error")])
    return Alias(name, verb_name, kept="seed 000", fixed=fixed, statuses=_KUR_STATUS, usage_status=_KUR_USAGE,
                 exit_help=exit_help)


kur_inspect = _kur("kur-inspect", "inspect", "done; with --verify, every shard is valid", "a shard failed --verify")
kur_diff = _kur("kur-diff", "diff", "compared, whether or not the datasets differ (the output says)",
                "a side failed --verify", fixed=("--exit-zero",))
kur_check = _kur("kur-check", "check", "every gate passed", "a gate failed")
resolve_splits = Alias("resolve-splits", "resolve-splits", kept="seed 003 (the Cuvis.AI command)")
kuration_demo = Alias("kuration-demo", "demo")
kuration_budget = Alias(
    "kuration-budget", "budget", statuses={EXIT_CHECK_FAILED: 2},
    exit_help=exit_status_help(
        "exit status (kuration-budget keeps its own; `kuration budget check` exits 1 on a violation):",
        [(0, "reviewed, or the plan keeps the contract (warnings are printed, not failed)"),
         (2, "the plan is missing, tampered with, malformed or breaks the contract, or --explain names no item; "
             "also a usage error")]))

#: Every old name, in ``[project.scripts]`` order.
ALIASES = (kur_inspect, kur_diff, kur_check, resolve_splits, kuration_demo, kuration_budget)


__all__ = ["ALIASES", "Alias", "kur_check", "kur_diff", "kur_inspect", "kuration_budget", "kuration_demo",
           "resolve_splits"]
