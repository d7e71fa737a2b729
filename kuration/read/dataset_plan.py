"""The budget plan a committed dataset carries, read through its commit chain.

The writer stores the plan in the dataset's ``budget/`` folder and pins ``budget/budget.json``
in ``config.json`` (``results.budget_plan``), which the commit record pins in turn.
:func:`read_dataset_budget_plan` follows that chain: commit record -> config -> budget.json ->
plan_items.parquet, refusing any link that does not hold; a dataset root's plan is its
current version's. (``hours_selection_review`` given a dataset's folder, e.g. a version
folder, reads the same ``budget/`` files as it reads a storage root's: checked against
``budget.json``'s pins, not against the commit.) A dataset written before datasets carried
their plan has no pin; that is an error saying so, never an empty plan.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kuration.budget.plan import BudgetPlan
from kuration.budget.plan_store import ITEMS_FILE, checked_budget_record, checked_plan_file, plan_from_files
from kuration.errors import BudgetError, CommitError, shown
from kuration.canonical.hashing import sha256_hex
from kuration.output.commit_protocol import CONFIG_FILE, strict_json
from kuration.read.committed import CommittedDataset, load_committed

_FIX = "the dataset was changed after its commit; re-write it (force=True) before trusting its plan"


def plan_pin(dataset: CommittedDataset) -> Mapping[str, Any] | None:
    """``config.json``'s ``results.budget_plan`` pin (path, sha256, bytes), or None when the
    dataset records no plan. Raises ``CommitError`` for a pin of the wrong shape."""
    results = dataset.config.get("results")
    pin = results.get("budget_plan") if isinstance(results, dict) else None
    if pin is None:
        return None
    where = f"{dataset.destination.where(CONFIG_FILE)}: results.budget_plan"
    if (not isinstance(pin, dict) or not isinstance(pin.get("path"), str) or not isinstance(pin.get("sha256"), str)
            or not isinstance(pin.get("bytes"), int)):
        raise CommitError(f"{where}: must be an object with path, sha256 and bytes, got {shown(pin)}")
    return pin


def read_dataset_budget_plan(dataset: CommittedDataset | str | os.PathLike[str]) -> BudgetPlan:
    """The plan ``dataset`` (a committed dataset, or its directory or URL) was written from,
    every file checked against the pin above it. ``BudgetError`` when the dataset records no
    plan or a file does not match."""
    if not isinstance(dataset, CommittedDataset):
        dataset = load_committed(dataset)
    pin = plan_pin(dataset)
    if pin is None:
        raise BudgetError(f"{dataset.destination.where(CONFIG_FILE)}: records no budget plan (results.budget_plan); "
                          "the dataset was written before datasets carried their plan. Re-write it to review its "
                          "selection, or review the storage root's plan")
    where = dataset.destination.where(pin["path"])
    data = dataset.destination.read(pin["path"])
    if data is None or len(data) != pin["bytes"] or sha256_hex(data) != pin["sha256"]:
        raise BudgetError(f"{where}: missing, or not the SHA-256 and size config.json pins; {_FIX}")
    record = checked_budget_record(strict_json(data, where=where, what="budget plan"), where=where, fix=_FIX)
    folder = pin["path"].rsplit("/", 1)[0] if "/" in pin["path"] else ""
    items_path = f"{folder}/{ITEMS_FILE}" if folder else ITEMS_FILE
    items = dataset.destination.read(items_path)
    if items is None:
        raise BudgetError(f"{dataset.destination.where(items_path)}: missing; {_FIX}")
    return plan_from_files(record, checked_plan_file(items, ITEMS_FILE, record,
                                                     where=dataset.destination.where(items_path), fix=_FIX))


__all__ = ["plan_pin", "read_dataset_budget_plan"]
