"""write_dataset(memory_budget=...): scored results checkpointed at the destination in
run-fingerprint namespaces, the same dataset as an unbudgeted run, reuse only under strong
identities, a hard failure that says how to provide a fingerprint, and pruning only after
a successful commit."""

from pathlib import Path

import pytest

from kuration.errors import InputError
from kuration.numbers import format_bytes, parse_bytes
from kuration.output.commit_protocol import CHECKPOINT_DIR, COMMIT_FILE
from kuration.output.write_dataset import DatasetWriteError, write_dataset
from kuration.read import load_committed, verify_dataset
from kuration.scoring import MemoryBudgetError, feature_fingerprints, run_fingerprint
from kuration.scoring.segments import Segmenter
from kuration.sources import ParquetTickAdapter
from kuration.sources.protocol import SourceIdentity
from tests.output.corpus import Corpus, data_files, snapshot, version_dir


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return Corpus(tmp_path_factory.mktemp("corpus"))


class LogicalOnly(ParquetTickAdapter):
    def identity(self, source_id):
        return SourceIdentity("logical", f"{source_id}|mtime")


class BrokenMedia(ParquetTickAdapter):
    def decode_media(self, column, refs, *, source_id):
        raise OSError(f"{source_id}: the frame store went away")


def _write(corpus, out, *, adapter=None, segmenter=None, **kw):
    return write_dataset(out, schema=corpus.schema, adapter=adapter or corpus.adapter,
                         strategy=corpus.settings.strategy,
                         segmenter=segmenter or corpus.settings.segmenter, spec=corpus.spec, train_hours=40 / 3600,
                         test_hours=20 / 3600, span_seconds=10.0, **kw)


def _namespaces(out: Path) -> list[str]:
    return sorted(p.name for p in (out / CHECKPOINT_DIR).iterdir()) if (out / CHECKPOINT_DIR).exists() else []


def _feature_namespaces(corpus, segmenter=None) -> set[str]:
    """The namespaces of a run's segment rows and feature values (kept with its whole tables)."""
    parts = feature_fingerprints(corpus.adapter, segmenter or corpus.settings.segmenter, corpus.settings.strategy)
    return {f[:16] for f in (parts.segments, *parts.features.values())}


def test_a_budgeted_write_is_the_same_dataset_with_its_scores_checkpointed(corpus, tmp_path):
    plain = _write(corpus, tmp_path / "plain")
    budgeted = _write(corpus, tmp_path / "budgeted", memory_budget="1KiB")
    shards_and_manifest = {k: v for k, v in data_files(tmp_path / "budgeted").items()
                           if not k.startswith(CHECKPOINT_DIR)}
    assert shards_and_manifest == data_files(tmp_path / "plain")
    assert verify_dataset(tmp_path / "budgeted").ok and load_committed(tmp_path / "budgeted")
    scoring_run = budgeted.config["job"]["scoring_run"]
    assert _namespaces(tmp_path / "budgeted") == sorted({scoring_run[:16]} | _feature_namespaces(corpus))
    n_sources = len(corpus.adapter.list_sources())
    assert len(list((tmp_path / "budgeted" / CHECKPOINT_DIR / scoring_run[:16]).glob("*.arrow"))) == n_sources
    assert budgeted.config["job"]["memory_budget_bytes"] == 1024
    memory = budgeted.config["results"]["scoring"]["memory"]
    assert memory["resident_bytes"] == 0 and memory["checkpointed_sources"] == n_sources
    assert plain.config["results"]["scoring"]["memory"] is None and not _namespaces(tmp_path / "plain")


def test_resume_reads_the_checkpoints_instead_of_scoring_again(corpus, tmp_path):
    out = tmp_path / "out"
    first = _write(corpus, out, memory_budget=1 << 20)
    # one shard gone: the committed version is not rewritten, the resume writes a new one (and
    # its config.json records this run's scoring)
    (version_dir(out) / first.manifest["entries"][0]["path"]).unlink()
    again = _write(corpus, out, memory_budget=1 << 20, resume=True)
    n_sources = len(corpus.adapter.list_sources())
    assert again.config["results"]["scoring"] | {"memory": None} == {"scored": 0, "cached": n_sources, "skipped": 0,
                                                                    "memory": None}
    assert again.reused == len(first.manifest["entries"]) - 1 and again.manifest == first.manifest


def test_weak_identities_over_the_budget_fail_before_publication_saying_how_to_fix_it(corpus, tmp_path):
    out = tmp_path / "out"
    _write(corpus, out)
    before = snapshot(out)
    weak = LogicalOnly(corpus.adapter.root_url, corpus.schema)
    with pytest.raises(MemoryBudgetError,
                       match=r"Provide a fingerprint: make LogicalOnly\.identity\(\) return a strong"):
        _write(corpus, out, adapter=weak, memory_budget=2048, force=True)
    assert snapshot(out) == before and load_committed(out)  # the committed dataset is untouched
    # within the budget, weak identities run (held in memory) and nothing is checkpointed for them
    result = _write(corpus, tmp_path / "roomy", adapter=weak, memory_budget="64MiB")
    assert result.config["results"]["scoring"]["memory"]["checkpointed_sources"] == 0
    assert not list((tmp_path / "roomy").rglob("*.arrow"))


def test_a_failed_replacement_keeps_the_previous_runs_checkpoints_and_a_commit_prunes_them(corpus, tmp_path):
    out = tmp_path / "out"
    first = _write(corpus, out, memory_budget=1 << 20)
    old = first.config["job"]["scoring_run"][:16]
    other = Segmenter(8, 4, unit="seconds")
    broken = BrokenMedia(corpus.adapter.root_url, corpus.schema)
    with pytest.raises(OSError, match="the frame store went away"):
        _write(corpus, out, adapter=broken, segmenter=other, memory_budget=1 << 20, force=True)
    new = run_fingerprint(corpus.adapter, other, corpus.settings.strategy)[:16]
    # the failed run's own checkpoints, and the old run's, both kept
    assert _namespaces(out) == sorted({old, new} | _feature_namespaces(corpus) | _feature_namespaces(corpus, other))
    second = _write(corpus, out, segmenter=other, memory_budget=1 << 20, force=True)
    assert second.config["results"]["scoring"]["cached"] == len(corpus.adapter.list_sources())  # reused
    assert _namespaces(out) == sorted({new} | _feature_namespaces(corpus, other)) and verify_dataset(out).ok
    # a later commit without a budget prunes every namespace but its own scoring run's
    _write(corpus, out, force=True)
    assert _namespaces(out) == []


def test_checkpoints_alone_do_not_make_a_destination_existing(corpus, tmp_path):
    out = tmp_path / "out"

    def bad_group(source_id):
        raise ValueError(f"no group for {source_id}")
    with pytest.raises(Exception, match="no group for"):
        _write(corpus, out, memory_budget=1 << 20, group_of=bad_group)  # fails in the fill, after scoring
    assert _namespaces(out) and not (out / COMMIT_FILE).exists()
    result = _write(corpus, out, memory_budget=1 << 20)  # neither resume nor force needed
    assert result.record.state == "committed" and result.config["results"]["scoring"]["cached"] > 0


def test_budget_arguments_are_checked_before_anything_is_written(corpus, tmp_path):
    for bad, message in (("lots", "write a number and one of B, KB"), (0, "must be positive"), (-5, "must be positive"),
                         (2.5, "must be a number of bytes"), ("12 XB", "write a number")):
        with pytest.raises(DatasetWriteError, match=message):
            _write(corpus, tmp_path / "out", memory_budget=bad)
    with pytest.raises(DatasetWriteError, match="checkpoints must be local files to be memory-mapped"):
        _write(corpus, "memory://kuration-ckpt/out", memory_budget="1GiB")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text, expected", [
    ("512MiB", 512 * 2**20), ("2 GB", 2 * 10**9), ("1.5GiB", 3 * 2**29), ("10", 10), ("7b", 7), (4096, 4096),
    ("1 kib", 1024), (" 3TB ", 3 * 10**12),
])
def test_parse_bytes_reads_what_people_write(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["", "MiB", "1e3", "-1MiB", "1 2", "0.0001", None, 1.0, True, [1]])
def test_parse_bytes_refuses_the_rest_naming_the_option(bad):
    with pytest.raises(InputError, match="memory_budget"):
        parse_bytes(bad, name="memory_budget")


def test_format_bytes():
    assert [format_bytes(n) for n in (900, 2048, 5 * 2**20, 3 * 2**30, 2**42)] == [
        "900 B", "2.0 KiB", "5.0 MiB", "3.0 GiB", "4.0 TiB"]
