"""``kur-inspect``, ``kur-diff`` and ``kur-check``, the names seed 000 gives ``kuration inspect``,
``diff`` and ``check``, keep the exit status they always had: 1 when nothing could be judged,
2 when judged and failed (seed 000: "kur-check ... exits 2 when a gate fails"), 64 on a usage
error, and ``kur-diff`` 0 whether or not the datasets differ."""

from __future__ import annotations

import json

import pytest

from kuration_cli.aliases import kur_check, kur_diff, kur_inspect
from tests.inspect.datasets import plain_copy
from tests.output.committed_datasets import manifest_of, rechain_shard


@pytest.fixture
def damaged(written, tmp_path):
    out = plain_copy(written, tmp_path / "damaged")
    rechain_shard(out, 1, b"garbage")
    return out


def test_kur_inspect(written, damaged, tmp_path, capsys):
    assert kur_inspect([str(written), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["kind"] == "dataset_report"
    assert captured.err.startswith("kur-inspect: the same as `kuration inspect`")
    assert kur_inspect([str(damaged), "--verify"]) == 2
    assert f"kur-inspect: bad shard {manifest_of(damaged)['entries'][1]['path']}:" in capsys.readouterr().err
    assert kur_inspect([str(tmp_path / "none")]) == 1
    with pytest.raises(SystemExit) as exit_:
        kur_inspect([])
    assert exit_.value.code == 64


def test_kur_diff_exits_0_when_the_datasets_differ(written, smaller, damaged, tmp_path, capsys):
    assert kur_diff([str(written), str(smaller)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("different: ") and "`kuration diff --exit-zero`" in captured.err
    assert kur_diff([str(written), str(damaged), "--verify"]) == 2
    assert kur_diff([str(written), str(tmp_path / "none")]) == 1


def test_kur_check_exits_2_when_a_gate_fails(written, tmp_path, capsys):
    policy = tmp_path / "quality.json"
    policy.write_text(json.dumps({"min_shards": 10**6}))
    assert kur_check([str(written), "--policy", str(policy)]) == 2
    assert "kur-check: gate failed: min_shards:" in capsys.readouterr().err
    policy.write_text(json.dumps({"min_shards": 1}))
    assert kur_check([str(written), "--policy", str(policy)]) == 0
    policy.write_text(json.dumps({"min_shard": 1}))
    assert kur_check([str(written), "--policy", str(policy)]) == 1
    with pytest.raises(SystemExit) as exit_:
        kur_check([str(written)])  # --policy is required
    assert exit_.value.code == 64


@pytest.mark.parametrize("alias", [kur_inspect, kur_diff, kur_check], ids=lambda a: a.name)
def test_their_help_states_their_own_exit_status(alias, capsys):
    with pytest.raises(SystemExit) as exit_:
        alias(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert f"exit status ({alias.name} keeps its own;" in text and "\n  64  usage error" in text
