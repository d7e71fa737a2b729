"""A peer that cannot be had gives null figures with the reason, never a crash: the venv
builder says why (bench/_reference_env.py), and bench_peers.py's figures carry it."""

from __future__ import annotations

import sys

import pytest

from kuration.sources.media import media_provider_names, unregister_media_provider
from tests.bench.modules import load_bench_module

reference_env = load_bench_module("_reference_env")


def test_a_peer_switched_off_is_not_built(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_PEER", "off")
    python, why = reference_env.ensure_peer_python(tmp_path / "venv", [], "pass", off_variable="SOME_PEER")
    assert python is None and why == "peer disabled by SOME_PEER=off"
    assert not (tmp_path / "venv").exists()


def test_a_venv_whose_probe_fails_is_reported_with_the_probe_error(tmp_path, monkeypatch):
    monkeypatch.delenv("SOME_PEER", raising=False)
    probe = "import sys; sys.exit('peer library missing')"
    python, why = reference_env.ensure_peer_python(tmp_path / "venv", [], probe, off_variable="SOME_PEER")
    assert python is None
    assert why == f"{tmp_path / 'venv'} was built but its probe fails: peer library missing"


def test_an_existing_venv_that_passes_its_probe_is_used_as_it_is(tmp_path, monkeypatch):
    monkeypatch.delenv("SOME_PEER", raising=False)
    monkeypatch.setattr(reference_env, "_venv_python", lambda venv: type(tmp_path)(sys.executable))
    python, why = reference_env.ensure_peer_python(tmp_path / "venv", [["no-such-install"]], "pass",
                                                   off_variable="SOME_PEER")
    assert (python, why) == (sys.executable, "existing venv")


@pytest.fixture
def peers():
    """bench_peers.py; importing it (through bench_write_dataset.py) registers the bench's
    media provider, which is taken out again so no other test sees it."""
    before = set(media_provider_names())
    try:
        yield load_bench_module("bench_peers")
    finally:
        for name in set(media_provider_names()) - before:
            unregister_media_provider(name)


def test_peer_figures_are_null_with_the_reason_when_a_peer_is_missing(peers):
    sides = {
        "raw": {"write_seconds": 0.3, "read_seconds": 0.2, "sha256_seconds": 0.3},
        "kuration": {"write_seconds": 0.4, "read_seconds": 0.25, "read_no_verify_seconds": 0.2},
        "mds": {"available": True, "reason": None, "write_seconds": 0.6, "read_seconds": 0.2},
        "wds": {"available": False, "reason": "building bench/.venv-webdataset failed: no network",
                "write_seconds": None, "read_seconds": None},
    }
    figures = {f["name"]: f for f in peers.report(sides, payload=161_000_000, steps=1280)}
    wds = [f for name, f in figures.items() if "WebDataset" in name]
    assert len(wds) == 4
    for fig in wds:
        assert fig["value"] is None and fig["met"] is None
        assert fig["note"] == "no figure: building bench/.venv-webdataset failed: no network"
    write = figures["write: Kuration write_planned_dataset (SHA-256 + fsync per shard) / np.savez"]
    assert write["value"] == 0.3 / 0.4 and write["target"] == ">= 0.8" and write["met"] is False
    versus = figures["read, verified: Kuration / MosaicML Streaming (its seconds / Kuration's)"]
    assert versus["value"] == 0.2 / 0.25 and versus["target"] == ">= 1" and versus["met"] is False
    bound = figures["read: Kuration iter_shards (SHA-256 verified) / hash bound"]
    assert bound["value"] == 0.3 / 0.25 and bound["target"] == ">= 0.85" and bound["met"] is True
    assert bound["note"] == "bound: sha256"
    mds_write = figures["write: MosaicML Streaming MDSWriter(hashes=['sha256']) / np.savez"]
    assert mds_write["value"] == 0.3 / 0.6 and mds_write["target"] is None and mds_write["met"] is None
