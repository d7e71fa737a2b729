"""The rollout store of a curated dataset, as the pipeline builds and checks it.

:func:`build_rollout_store` is what the ``rollout_store`` asset runs: generate records from the
committed dataset's train split with a recipe, bound to the resolved split under the storage
root, and write them through the atomic runner (temp sibling, full validation, rename), so a
failed build leaves the previous store in place. The two checks wrap core validators and
return :class:`~kuration.checks.CheckResult`:

- :func:`rollout_validation_check`: :func:`validate_rollout_zarr_store`, every violation;
- :func:`check_rollout_lineage`: the store still describes the *current* artifacts: its
  ``split_manifest_hash`` is the baked ``splits.json``'s digest, its source dataset version is
  the dataset's committed manifest, and every source row's shard path and SHA-256 are in that
  manifest. A store built before the split or the dataset was re-materialized fails it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuration.checks import CheckResult, Figure, failed_verdict, first
from kuration.errors import KurationError, RolloutStoreError
from kuration.read.committed import CommittedDataset, load_committed
from kuration.rollouts.demo_recipe import MotionDirectionRecipe
from kuration.rollouts.generation import RolloutLineage, RolloutRecipe, rollout_records_from_dataset
from kuration.rollouts.promote import write_validated_rollout_store
from kuration.rollouts.reader import RolloutZarrStoreReader
from kuration.rollouts.validation import RolloutZarrValidationResult, validate_rollout_zarr_store
from kuration.rollouts.writer import RolloutZarrWriteResult
from kuration.splits.artifacts import read_split_assignments
from kuration.storage import is_remote, local_path


@dataclass(frozen=True)
class RolloutStoreBuild:
    """What :func:`build_rollout_store` wrote (counts, chunking, manifest digest), what it
    was generated from, and the validation that let it be promoted."""

    write: RolloutZarrWriteResult
    lineage: RolloutLineage
    validation: RolloutZarrValidationResult


def build_rollout_store(
    dataset: str | os.PathLike[str] | CommittedDataset,
    store_dir: str | os.PathLike[str],
    *,
    splits_root: str | os.PathLike[str] | None,
    recipe: RolloutRecipe | None = None,
    discount_gamma: float = 1.0,
    split: str = "train",
    allow_non_train: bool = False,
    invocation: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RolloutStoreBuild:
    """Generate rollout records from ``dataset``'s ``split`` shards with ``recipe`` (default:
    :class:`MotionDirectionRecipe`) and write them to ``store_dir`` atomically (a local folder,
    or a remote URL: :mod:`kuration.rollouts.remote`).

    ``splits_root`` (the storage root holding the resolved split) binds the store's
    ``split_manifest_hash`` to its baked ``splits.json`` and proves the dataset was written
    from that split; ``invocation`` (who asked: a Dagster run id, a CLI) goes into the
    sidecar. Raises :class:`~kuration.errors.RolloutInputError` for a refused generation,
    and whatever the runner raises when the new store fails validation (nothing is promoted
    then)."""
    generation = rollout_records_from_dataset(dataset, recipe or MotionDirectionRecipe(), split=split,
                                              allow_non_train=allow_non_train, splits_root=splits_root,
                                              progress=progress)
    options = generation.writer_options()
    context = dict(options.pop("manifest_context"))
    if invocation is not None:
        context["invocation"] = dict(invocation)
    written, validation = write_validated_rollout_store(store_dir, generation.records, discount_gamma=discount_gamma,
                                                        manifest_context=context, **options)
    return RolloutStoreBuild(written, generation.lineage, validation)


def validation_check_result(result: RolloutZarrValidationResult) -> CheckResult:
    """``result`` in the shape every Kuration check takes: counts as figures, and a verdict
    naming the first violation."""
    figures = {"rollouts": result.num_rollouts, "steps": result.num_steps, "candidates": result.num_candidates,
               "violations": len(result.errors)}
    if result.ok:
        verdict = (f"valid: {result.num_rollouts:,} rollouts, {result.num_steps:,} steps and "
                   f"{result.num_candidates:,} candidate actions; every array, link, mask, label and source hash "
                   "checks out, and the training view matches the tables it is built from")
    else:
        verdict = failed_verdict(tuple(result.errors), "violation")
    return CheckResult(verdict=verdict, errors=tuple(result.errors), figures=figures)


#: How to build a rollout store, for a check that finds none.
BUILD_HINT = "build one with build_rollout_store (in Dagster: materialize rollout_store, the build_rollouts job)"


def rollout_validation_check(store_dir: str | os.PathLike[str], *, validate_selected_payload: bool = True,
                             build_hint: str = BUILD_HINT) -> CheckResult:
    """:func:`validate_rollout_zarr_store` as a check result (it never raises: a missing or
    unreadable store is a violation). It only reads, so it re-checks a store built earlier;
    where there is no store at all, the verdict says so and ``build_hint`` how to build one."""
    if not is_remote(store_dir) and not os.path.exists(local_path(store_dir)):
        missing = f"no rollout store at {os.fspath(store_dir)}; {build_hint}"
        return CheckResult(verdict=missing, errors=(missing,), figures={"violations": 1})
    return validation_check_result(validate_rollout_zarr_store(os.fspath(store_dir),
                                                               validate_selected_payload=validate_selected_payload))


def check_rollout_lineage(store_dir: str | os.PathLike[str], *, dataset: str | os.PathLike[str],
                          splits_root: str | os.PathLike[str]) -> CheckResult:
    """Whether the store at ``store_dir`` was built from the current resolved split (under
    ``splits_root``) and the current committed ``dataset``. Never raises: an input that
    cannot be read fails the check, saying which."""
    try:
        reader = RolloutZarrStoreReader(store_dir)
        config = reader.attrs["config"]
        sources = _store_sources(reader)
    except KurationError as exc:
        return CheckResult.cannot_check(f"the rollout store {os.fspath(store_dir)}", exc)
    try:
        _, splits_digest = read_split_assignments(splits_root)
    except (KurationError, OSError) as exc:
        return CheckResult.cannot_check(f"the resolved split under {os.fspath(splits_root)}", exc)
    try:
        committed = load_committed(dataset)
    except (KurationError, OSError) as exc:
        return CheckResult.cannot_check(f"the dataset {os.fspath(dataset)}", exc)
    errors = []
    if config.get("split_manifest_hash") != splits_digest:
        errors.append(f"split_manifest_hash {str(config.get('split_manifest_hash'))[:12]}... is not the current "
                      f"baked splits.json ({splits_digest[:12]}...): the split was re-resolved after the store was "
                      "built; re-materialize rollout_store")
    if config.get("source_dataset_version") != committed.record.manifest_sha256:
        errors.append(f"source_dataset_version {str(config.get('source_dataset_version'))[:12]}... is not the "
                      f"dataset's committed manifest ({str(committed.record.manifest_sha256)[:12]}...): the dataset "
                      "was re-written after the store was built; re-materialize rollout_store")
    recorded = {str(e["path"]): str(e["sha256"]) for e in committed.entries}
    missing = [p for p in sources if p not in recorded]
    changed = [p for p, sha in sources.items() if p in recorded and recorded[p] != sha]
    if missing:
        errors.append(f"{len(missing):,} source shard(s) are not in the dataset manifest: {first(missing)}")
    if changed:
        errors.append(f"{len(changed):,} source shard(s) have another SHA-256 in the dataset manifest: "
                      f"{first(changed)}")
    figures: dict[str, Figure] = {
        "sources": len(sources), "split_manifest_hash": str(config.get("split_manifest_hash"))[:12],
        "dataset_manifest_sha256": str(committed.record.manifest_sha256)[:12]}
    if errors:
        return CheckResult(verdict=failed_verdict(tuple(errors), "lineage break"), errors=tuple(errors),
                           figures=figures)
    return CheckResult(verdict=f"{len(sources):,} source shards match the dataset manifest; the split hash is the "
                               "current baked splits.json", figures=figures)


def _store_sources(reader: RolloutZarrStoreReader) -> dict[str, str]:
    """Shard path -> hex SHA-256, for every source row of the store."""
    paths = reader.vocabulary("sources", "shard_paths")
    codes = reader.array("sources/shard_path_code")
    if codes.size and (codes.min() < 0 or codes.max() >= len(paths)):
        raise RolloutStoreError(f"{reader.store_dir}: sources/shard_path_code holds codes outside the "
                                f"{len(paths)} shard paths; the store is damaged: re-materialize rollout_store")
    digests = reader.array("sources/shard_sha256")
    return {paths[int(code)]: bytes(digest).hex() for code, digest in zip(codes, digests, strict=True)}


def store_summary(build: RolloutStoreBuild) -> list[dict[str, str]]:
    """What a person asks of a built store, one ``{"what": ..., "value": ...}`` row each (the
    ``rollout_store`` asset's summary table): how many rollouts, steps and candidate actions
    from how many source shards, whether it validated, and what it was built from (digests
    shortened to 12 hex digits; the sidecar ``rollout_manifest.json`` has them whole)."""
    write, lineage = build.write, build.lineage
    steps = max(write.num_steps, 1)
    per_step = (f"{write.num_candidates // steps:,} per step" if write.num_candidates % steps == 0
                else f"{write.num_candidates / steps:.3g} per step on average")
    validation = ("passed before the store replaced the previous one (rollout_validation checks it again on disk)"
                  if build.validation.ok else f"{len(build.validation.errors):,} violations")
    split_hash = (lineage.split_manifest_hash or "")[:12] or "none bound"
    dataset_hash = lineage.dataset_manifest_sha256[:12]
    return [
        {"what": "rollouts", "value": f"{write.num_rollouts:,} chains of recorded states, each aimed at a target"},
        {"what": "steps", "value": f"{write.num_steps:,} recorded states, each with the action the recording took"},
        {"what": "candidate actions", "value": f"{write.num_candidates:,} ({per_step}): the recorded action and its "
                                               "alternatives, each labelled by the recipe or masked as invalid"},
        {"what": "sources", "value": f"{write.num_sources:,} {lineage.split} shards of the committed dataset"},
        {"what": "validation", "value": validation},
        {"what": "lineage", "value": f"split {split_hash} (splits.json), dataset {dataset_hash} (its manifest), "
                                     f"recipe {lineage.recipe_id}; rollout_lineage checks both are still current"},
    ]


def q_h_preview(store_dir: str | os.PathLike[str], rows: int = 5) -> list[dict[str, Any]]:
    """The first ``rows`` states of the persisted ``q_h/`` view, one summary row each
    (for the asset's metadata): ids, the selected action, its reward and return, how many
    actions are valid and trainable, and the best one-step label."""
    reader = RolloutZarrStoreReader(store_dir)
    count = min(rows, int(reader.counts["steps"]))
    positions = np.arange(count)
    take = {name: reader.array_rows(f"q_h/{name}", positions)
            for name in ("step_ids", "source_ids", "selected_action_index", "td_reward", "td_return", "td_terminal",
                         "valid_action_mask", "q_train_mask", "one_step_labels")}
    preview = []
    for i in range(count):
        labels = take["one_step_labels"][i]
        finite = labels[np.isfinite(labels)]
        preview.append({
            "step": int(take["step_ids"][i]), "source": int(take["source_ids"][i]),
            "selected": int(take["selected_action_index"][i]), "reward": float(take["td_reward"][i]),
            "return": float(take["td_return"][i]), "terminal": bool(take["td_terminal"][i]),
            "valid": int(take["valid_action_mask"][i].sum()), "trainable": int(take["q_train_mask"][i].sum()),
            "best_label": float(finite.max()) if finite.size else None,
        })
    return preview


__all__ = ["BUILD_HINT", "RolloutStoreBuild", "build_rollout_store", "check_rollout_lineage", "q_h_preview",
           "rollout_validation_check", "store_summary", "validation_check_result"]
