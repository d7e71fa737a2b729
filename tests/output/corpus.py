"""The corpus the dataset-writer tests share: the demo landing zone (three sites, one
recording each), scored once, with a plan and a write of the default output spec; and the
views of a written dataset that two runs of one job must agree on."""

from __future__ import annotations

import json
from pathlib import Path

from kuration.budget import BudgetOptions, plan_budget
from kuration.demo.corpus import write_demo_landing_zone
from kuration.output import OutputSpec
from kuration.output.commit_protocol import COMMIT_FILE, CONFIG_FILE
from kuration.output.versions import resolve_dataset
from kuration.output.write_dataset import WriteOptions, write_planned_dataset
from kuration.scoring import score_sources
from kuration.landing.settings import load_curation_settings
from kuration.sources import ParquetTickAdapter

SPEC = {"shard_length": 32, "short_policy": "pad", "container": "npz", "modalities": {
    "pos": {"dtype": "float32", "shape": [3], "source": "field:pos"},
    "battery": {"dtype": "float32", "shape": [], "source": "field:battery"},
    "frame": {"dtype": "uint8", "shape": [12, 16, 3], "source": "media:frame"},
    "wind": {"dtype": "float32", "shape": [], "source": "segment:wind.max"},
}}


class Corpus:
    def __init__(self, root: Path):
        zone = write_demo_landing_zone(root / "landing", seed=5, recordings_per_site=1, sites=3, minutes=(1, 2))
        landing = Path(zone.root)
        self.settings = load_curation_settings(landing / "schema.json", landing / "strategy.json", window=10, stride=5)
        self.schema = self.settings.schema
        self.adapter = ParquetTickAdapter(landing / "recordings", self.schema)
        self.spec = OutputSpec.from_dict(SPEC)
        self.scored = score_sources(self.adapter, segmenter=self.settings.segmenter, strategy=self.settings.strategy)

    def plan(self, **budget):
        budget = {"train_hours": 40 / 3600, "test_hours": 20 / 3600, "span_seconds": 10.0, **budget}
        options = BudgetOptions(**budget, chunking=self.spec.chunking)
        return plan_budget(self.scored.segments, options, strategy=self.settings.strategy, group_of=None)

    def write(self, out, plan=None, spec=None, **kwargs):
        return write_planned_dataset(out, plan or self.plan(), adapter=self.adapter, schema=self.schema,
                                     spec=spec or self.spec, **planned_write_kwargs(**kwargs))


#: write_planned_dataset's own keywords besides what the shards are made of.
_OWN_KEYWORDS = ("encoder", "job", "split")


def planned_write_kwargs(**kwargs):
    """write_planned_dataset's keywords from a test's flat ones: ``encoder``, ``job`` and
    ``split`` as they are, the rest (``resume``, ``force``, ``on_other_run``,
    ``write_workers``, ...) gathered into its :class:`WriteOptions`."""
    own = {key: kwargs.pop(key) for key in _OWN_KEYWORDS if key in kwargs}
    return {**own, "options": WriteOptions(**kwargs)}


def fail_the_third_read(corpus: Corpus, monkeypatch) -> None:
    """The corpus adapter's third recording read raises: the preflight's read, one source
    written, then a fault mid-write (``monkeypatch.undo()`` ends it)."""
    real, reads = corpus.adapter.read_ticks, []

    def failing(source):
        reads.append(source)
        if len(reads) == 3:
            raise RuntimeError("injected fault reading a recording")
        return real(source)

    monkeypatch.setattr(corpus.adapter, "read_ticks", failing)


def version_dir(out, version: str | None = None) -> Path:
    """The folder of the dataset root ``out``'s ``version`` (default: the current one)."""
    return Path(resolve_dataset(out, version))


def snapshot(out: Path) -> dict[str, bytes]:
    """Every published file's bytes (not the lease or temp files)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != ".kuration-writer.lock" and not p.name.endswith(".tmp")}


def comparable_record(out: Path) -> dict:
    """config.json and the commit record without what differs between two runs of one job
    by design: when it ran, how many shards a resume reused, and the checksums over those."""
    config = json.loads((version_dir(out) / CONFIG_FILE).read_bytes())
    config.pop("timestamps")
    for key in ("written_shards", "reused_shards", "resume"):
        config["results"].pop(key)
    record = json.loads((version_dir(out) / COMMIT_FILE).read_bytes())
    for key in ("config_sha256", "checksum"):
        record.pop(key)
    return {"config": config, "commit": record}


def data_files(out: Path) -> dict[str, bytes]:
    """What must be byte-identical between two runs of one job, in the current version:
    shards, manifest, marker."""
    return {k: v for k, v in snapshot(version_dir(out)).items() if k not in (CONFIG_FILE, COMMIT_FILE)
            and not k.startswith(".kuration_resume")}
