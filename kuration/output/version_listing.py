"""One row per version of a dataset root, for ``kuration versions``: its state, when it was
committed, its run fingerprint, split hours, publications and the reader pins on it.
Above :mod:`.versions` and :mod:`.version_pins`, which it reads; it changes nothing."""

from __future__ import annotations

import os
from typing import Any

from kuration.errors import CommitError
from kuration.output.commit_protocol import CONFIG_FILE, read_commit, strict_json
from kuration.output.destinations import Destination, open_destination
from kuration.output.version_pins import active_pins
from kuration.output.versions import PLAIN_VERSION, DatasetRoot, PublishRecord


def describe_versions(root: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One row per version for ``kuration versions``: its name, state, when it was
    committed, its run fingerprint, its split hours (when the budget counts seconds),
    whether it is current, was ever published, and was forced, and the holders of the
    reader pins that keep it from gc (``pinned``). A version gc removed is not listed."""
    dataset_root = DatasetRoot(root)
    log = dataset_root.publish_log()
    current = log[-1].version if log else None
    pins = active_pins(dataset_root)
    rows = []
    for version in dataset_root.versions():
        row = _version_row(dataset_root, version, current, [r for r in log if r.version == version])
        rows.append({**row, "pinned": [pin.holder for pin in pins if pin.version == version]})
    if dataset_root.has_plain_dataset():  # never pinned: gc never touches it
        rows.insert(0, {**_version_row(dataset_root, PLAIN_VERSION, current or PLAIN_VERSION, []), "pinned": []})
    return rows


def _version_row(root: DatasetRoot, version: str, current: str | None,
                 publications: list[PublishRecord]) -> dict[str, Any]:
    folder = root.url if version == PLAIN_VERSION else root.version_url(version)
    destination = open_destination(folder)
    try:
        record = read_commit(destination)
    except CommitError as exc:
        return {"version": version, "state": f"torn ({exc})", "current": version == current}
    config = _config_of(destination) if record is not None and record.state == "committed" else {}
    return {
        "version": version, "state": "empty" if record is None else record.state, "current": version == current,
        "published": [p.published for p in publications], "forced": any(p.forced for p in publications),
        "reasons": [p.reason for p in publications if p.reason],
        "run_fingerprint": record.run_fingerprint if record else None,
        "finished": config.get("timestamps", {}).get("finished"), "hours": _split_hours(config),
    }


def _config_of(destination: Destination) -> dict[str, Any]:
    data = destination.read(CONFIG_FILE)
    try:
        config = strict_json(data or b"{}", where=destination.where(CONFIG_FILE))
    except CommitError:
        return {}
    return config if isinstance(config, dict) else {}


def _split_hours(config: dict[str, Any]) -> dict[str, float] | None:
    """Admitted hours per split, when the budget counted seconds (None otherwise)."""
    budget = config.get("results", {}).get("budget", {})
    if budget.get("unit") != "seconds":
        return None
    return {name: round(block.get("admitted", 0) / 3600, 4) for name, block in budget.get("splits", {}).items()}


__all__ = ["describe_versions"]
