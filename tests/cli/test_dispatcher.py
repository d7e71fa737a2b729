"""``kuration <verb>``: one command for everything. ``kuration --help`` lists every verb with
its purpose, every verb has ``--help`` with examples and its exit status, a verb is added by
one entry, the Dagster-free verbs never import Dagster, and every console script is the
command or one of its aliases."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import kuration_cli
from kuration.cli import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK, Command, ExitStatus, UsageError
from kuration_cli import VERBS, Verb, main, verb, verb_parser
from kuration_cli import aliases
from kuration_cli.aliases import ALIASES

REPO = Path(__file__).resolve().parents[2]
#: The verbs issue 24 asks for; later issues add more.
ASKED = {"run", "check-landing", "demo", "resolve-splits", "budget", "inspect", "diff", "check"}
#: The verbs that need no Dagster: running them must not import it (about a second).
DAGSTER_FREE = ("check-landing", "resolve-splits", "budget", "inspect", "diff", "check")


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_verb_with_its_purpose_and_the_exit_status(capsys):
    text = help_of(["--help"], capsys)
    assert ASKED <= {v.name for v in VERBS}
    for v in VERBS:
        assert f"\n  {v.name:<14}  {v.summary}\n" in text
    assert "exit status:\n  0  done" in text and "\n  1  a check failed" in text and "\n  2  bad input" in text


@pytest.mark.parametrize("name", [v.name for v in VERBS])
def test_every_verb_has_help_with_examples_and_what_its_exit_status_means(name, capsys):
    text = help_of([name, "--help"], capsys)
    assert text.startswith(f"usage: kuration {name} ")
    assert f"examples:\n  kuration {name} " in text
    assert "exit status:\n  0  " in text and "also a usage error" in " ".join(text.split())


def test_a_verb_is_one_entry(monkeypatch, capsys):
    echo = Verb("echo", "say the arguments back", "tests.cli.test_dispatcher:ECHO")
    monkeypatch.setattr(kuration_cli, "VERBS", (*VERBS, echo))
    assert main(["echo", "a", "--times", "2"]) == EXIT_OK
    assert capsys.readouterr().out == "a\na\n"
    assert main(["echo", "fail"]) == EXIT_CHECK_FAILED
    assert "\n  echo            say the arguments back\n" in help_of(["--help"], capsys)
    assert "  kuration echo hello --times 3" in help_of(["echo", "--help"], capsys)


def test_a_usage_error_found_by_the_verb_reads_as_argparse_reports_one(monkeypatch, capsys):
    monkeypatch.setattr(kuration_cli, "VERBS", (*VERBS, Verb("echo", "say it", "tests.cli.test_dispatcher:ECHO")))
    with pytest.raises(SystemExit) as exit_:
        main(["echo", "a", "--times", "0"])
    assert exit_.value.code == EXIT_BAD_INPUT
    assert capsys.readouterr().err.startswith("usage: kuration echo [-h] [--times N] WORD\n"
                                              "kuration echo: error: --times must be at least 1, got 0")


def test_an_unknown_or_missing_verb_is_a_usage_error_naming_the_verbs(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["inspekt", "out/"])
    assert exit_.value.code == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "argument VERB: invalid choice: 'inspekt'" in err and "'inspect'" in err and "'resolve-splits'" in err
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == EXIT_BAD_INPUT
    assert "name a VERB (`kuration --help` lists them)" in capsys.readouterr().err
    with pytest.raises(KeyError, match="no kuration verb 'inspekt'; the verbs are run, check-landing, "):
        verb("inspekt")


def test_a_verb_that_names_no_command_says_so():
    with pytest.raises(TypeError, match=r"kuration broken: kuration_cli:VERBS is a tuple, not a Command"):
        Verb("broken", "x", "kuration_cli:VERBS").load()


def test_the_version(capsys):
    assert help_of(["--version"], capsys) == f"kuration {kuration_cli.__version__}\n"


def test_each_verb_parser_is_the_one_main_runs():
    for v in VERBS:
        parser = verb_parser(v.name)
        assert parser.prog == f"kuration {v.name}" and parser.description == v.load().description


def test_the_dagster_free_verbs_and_the_help_never_import_dagster(tmp_path):
    # one interpreter per command: what a shell pays for each
    probe = ("import sys\nfrom kuration_cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
             "loaded = sorted(m for m in sys.modules if m == 'dagster' or m.startswith(('dagster.', 'dagster_')))\n"
             "verbs = sorted(m for m in sys.modules if m in ('kuration.landing.check', 'kuration.inspect.cli', "
             "'kuration.splits.cli', 'kuration.budget.cli', 'kuration_definitions'))\n"
             "print(','.join(loaded) + '|' + ','.join(verbs), file=sys.stderr)\n")
    commands = [["--help"], *([name, "--help"] for name in DAGSTER_FREE), ["inspect", str(tmp_path / "none")],
                ["budget", "check", str(tmp_path)], ["check-landing", str(tmp_path / "none")]]
    for argv in commands:
        done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=REPO,
                              timeout=120)
        dagster, _, verbs = done.stderr.strip().splitlines()[-1].partition("|")
        assert dagster == "", f"kuration {' '.join(argv)} imported {dagster}"
        if argv == ["--help"]:
            assert verbs == "", f"kuration --help imported the verbs' modules {verbs}"


def test_every_console_script_is_the_command_or_an_alias():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts.pop("kuration") == "kuration_cli:main"
    assert scripts == {alias.name: f"kuration_cli.aliases:{alias.name.replace('-', '_')}" for alias in ALIASES}
    for alias in ALIASES:
        assert getattr(aliases, alias.name.replace("-", "_")) is alias
        assert verb(alias.verb)  # every alias names a verb there is


def _echo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("word", metavar="WORD", help="what to say")
    parser.add_argument("--times", metavar="N", type=int, default=1, help="how often")


def _echo(args: argparse.Namespace) -> int:
    if args.times < 1:
        raise UsageError(f"--times must be at least 1, got {args.times}")
    if args.word == "fail":
        return EXIT_CHECK_FAILED
    print("\n".join([args.word] * args.times))
    return EXIT_OK


#: A verb a later issue might add, defined as a verb's module defines one.
ECHO = Command(description="Say WORD back.", add_arguments=_echo_arguments, run=_echo,
               exit_status=ExitStatus(ok="said", checked="WORD was 'fail'", bad_input="never"),
               examples=("hello --times 3",))


def test_check_landing_help_names_every_reference_it_checks(capsys):
    text = " ".join(help_of(["check-landing", "--help"], capsys).split())
    for reference in ("the strategy against the schema", "the spec against the schema, the segment features and "
                      "the media providers", "the quality policy against the spec",
                      "the rollout recipe's modalities against the spec", '"not configured"'):
        assert reference in text, reference
