"""The older script names are thin aliases of ``kuration`` verbs: the same parser and output
under the old name, one line on stderr naming the verb, the seeds' names kept, the others
deprecated, and each keeping the exit status it had (the ``kur-`` three are tested on real
datasets in ``tests/inspect/test_aliases.py``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kuration_cli import verb
from kuration_cli.aliases import ALIASES, kuration_budget, resolve_splits

#: The names the seeds give: they stay (COMMON: a seed's name is a promise to users).
SEED_NAMES = {"kur-inspect": "seed 000", "kur-diff": "seed 000", "kur-check": "seed 000",
              "resolve-splits": "seed 003"}


@pytest.mark.parametrize("alias", ALIASES, ids=lambda a: a.name)
def test_each_alias_prints_one_line_naming_the_verb_and_says_so_in_its_help(alias, capsys):
    with pytest.raises(SystemExit) as exit_:
        alias(["--help"])
    assert exit_.value.code == 0
    captured = capsys.readouterr()
    (notice,) = captured.err.splitlines()
    assert notice.startswith(f"{alias.name}: ") and f"`kuration {alias.verb}" in notice
    text = " ".join(captured.out.split())
    assert captured.out.startswith(f"usage: {alias.name} ")
    assert f"{alias.name} is `kuration {alias.verb}" in text and f"kuration {alias.verb} " in text  # examples
    assert verb(alias.verb).load().description.split(".")[0] in text
    if alias.name in SEED_NAMES:
        assert alias.kept is not None and alias.kept.startswith(SEED_NAMES[alias.name])
        assert "the name stays" in text and "it stays)" in notice
    else:
        assert alias.kept is None
        assert "deprecated, gone in the next release" in text and "gone in the next release; use" in notice


def test_resolve_splits_keeps_its_exit_status_and_its_name_in_messages(tmp_path, capsys):
    dup = tmp_path / "dup.csv"
    dup.write_text("source,index,split\nrec/a.cu3s,0,train\nrec/a.cu3s,0,val\n")
    assert resolve_splits(["--from-csv", str(dup), "--out", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("resolve-splits: the same as `kuration resolve-splits`")
    assert err[1].startswith("resolve-splits: error: ") and "duplicate identity" in err[1]
    with pytest.raises(SystemExit) as exit_:
        resolve_splits(["--out", "o.json"])
    assert exit_.value.code == 2


def test_kuration_budget_keeps_its_exit_status(tmp_path, capsys):
    assert kuration_budget(["check", str(tmp_path)]) == 2  # no plan: bad input, as before
    err = capsys.readouterr().err
    assert "kuration-budget: " in err and "materialize budget_plan" in err
    with pytest.raises(SystemExit) as exit_:
        kuration_budget(["audit", str(tmp_path)])
    assert exit_.value.code == 2


def test_an_installed_alias_runs_as_a_console_script(tmp_path):
    script = Path(sys.executable).with_name("kur-inspect")
    done = subprocess.run([str(script), str(tmp_path / "none")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1  # kur-inspect: nothing could be judged, as it always exited
    assert done.stderr.splitlines()[0] == ("kur-inspect: the same as `kuration inspect` (a name seed 000 gives; "
                                           "it stays)")
    assert "no dataset.commit.json" in done.stderr
