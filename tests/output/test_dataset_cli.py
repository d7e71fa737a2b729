"""``kuration-dataset verify|info``: exit 0 on a committed, intact dataset; exit 2 naming
the shard on corruption and the reason on an uncommitted one; ``--help`` on every command."""

import json
import subprocess
import sys

import pytest

from kuration.output.commit_protocol import publish_writing
from kuration.output.destinations import open_destination
from kuration.read import load_committed
from kuration.read.cli import main
from tests.output.test_write_dataset import Corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("cli-corpus"))


def test_verify_and_info_on_an_intact_dataset(corpus, tmp_path, capsys):
    result = corpus.write(tmp_path / "out")
    assert main(["verify", str(tmp_path / "out")]) == 0
    assert f"dataset: OK: {len(result.manifest['entries'])} shards" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "out"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["state"] == "committed" and info["container"] == "npz" and info["shards"] == len(result.manifest["entries"])
    assert info["splits"]["train"]["shards"] == result.manifest["splits"]["train"]["shards"]
    assert main(["info", str(tmp_path / "out")]) == 0
    assert "committed" in capsys.readouterr().out


def test_verify_names_a_corrupt_shard_and_exits_2(corpus, tmp_path, capsys):
    result = corpus.write(tmp_path / "out")
    victim = result.manifest["entries"][0]["path"]
    path = tmp_path / "out" / victim
    path.write_bytes(path.read_bytes()[:-1])
    assert main(["verify", str(tmp_path / "out"), "--json"]) == 2
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["bad_shards"] == [victim]


def test_an_uncommitted_dataset_exits_2_with_the_reason(corpus, tmp_path, capsys):
    corpus.write(tmp_path / "out")
    dataset = load_committed(tmp_path / "out")
    publish_writing(open_destination(tmp_path / "out"), run_fingerprint=dataset.record.run_fingerprint,
                    marker=(tmp_path / "out" / ".kuration_output_spec.json").read_bytes())
    assert main(["verify", str(tmp_path / "out")]) == 2
    assert "ERROR" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "out")]) == 2
    assert "kuration-dataset:" in capsys.readouterr().err
    assert main(["verify", str(tmp_path / "nowhere")]) == 2


@pytest.mark.parametrize("args", [["--help"], ["verify", "--help"], ["info", "--help"]])
def test_every_command_has_help(args):
    done = subprocess.run([sys.executable, "-m", "kuration.read.cli", *args], capture_output=True, text=True)
    assert done.returncode == 0 and "usage: kuration-dataset" in done.stdout
