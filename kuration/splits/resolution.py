"""From a split config and a universe to per-stage samples: plan, then enforce.

``plan_splits`` verifies drift (refusing a drifted positional split outright, because
resolving it would pick the wrong samples), resolves every stage, and evaluates the
constraints without enforcing them. ``resolve_splits`` is the seed's one-call form: plan,
enforce the leakage policy, and hand back ``SampleRef`` lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kuration.splits.config import DataSplitConfig
from kuration.splits.drift import DriftReport, verify_universe
from kuration.splits.leakage import LeakageReport, enforce, evaluate_constraints
from kuration.splits.resolve import resolve_positions
from kuration.splits.sample_ref import SampleRef
from kuration.splits.stages import STAGES
from kuration.splits.universe import WHOLE_FILE, SampleRefs, Universe


@dataclass(frozen=True)
class SplitResolution:
    """Resolved stages as row positions into ``universe``, with the drift and leakage verdicts."""

    universe: Universe
    config: DataSplitConfig
    positions: Mapping[str, np.ndarray]
    drift: DriftReport
    leakage: LeakageReport

    def refs(self, stage: str) -> SampleRefs:
        return SampleRefs(self.universe, self.positions[stage], attrs=self.config.required_attrs())

    def counts(self) -> dict[str, int]:
        return {stage: int(len(self.positions[stage])) for stage in STAGES}

    @property
    def predicts_everything(self) -> bool:
        """The config names no ``predict`` samples, so ``predict`` is the whole universe."""
        return not self.config.stage("predict")

    def group_counts(self) -> dict[str, int]:
        return {stage: int(len(np.unique(self.universe.group_codes[self.positions[stage]]))) for stage in STAGES}

    def stage_table(self) -> pa.Table:
        """One row per (sample, stage), stages in order; ``predict`` rows may repeat samples."""
        u = self.universe
        sources = np.asarray(u.source_names, dtype=object)
        groups = np.asarray(u.group_names, dtype=object)
        parts = []
        for stage in STAGES:
            rows = self.positions[stage]
            parts.append(pa.table({
                "stage": pa.array([stage] * len(rows), pa.string()),
                "uid": pa.array(u.uids(rows), pa.string()),
                "source": pa.array(sources[u.source_codes[rows]].tolist(), pa.string()),
                "index": pa.array(u.indices[rows], pa.int64(), mask=u.indices[rows] == WHOLE_FILE),
                "group": pa.array(groups[u.group_codes[rows]].tolist(), pa.string()),
                "position": pa.array(rows, pa.int64()),
            }))
        return pa.concat_tables(parts)

    def summary(self) -> dict[str, Any]:
        return {
            "samples": self.counts(), "groups": self.group_counts(),
            "leakage": self.leakage.to_dict(), "drift": self.drift.to_dict(),
        }


def plan_splits(cfg: DataSplitConfig, universe: Universe, *,
                name_to_id: Mapping[str, int] | None = None) -> SplitResolution:
    """Resolve every stage and evaluate the constraints; raise only on drift or bad selectors."""
    drift = verify_universe(cfg, universe)
    positions: dict[str, np.ndarray] = {}
    for stage in STAGES:
        selectors = cfg.stage(stage)
        if stage == "predict" and not selectors:
            positions[stage] = np.arange(len(universe), dtype=np.int64)
        else:
            positions[stage] = resolve_positions(
                selectors, universe, name_to_id=name_to_id, stage=stage, load_together=cfg.required_attrs()
            )
    leakage = evaluate_constraints(positions, universe, cfg.constraints)
    return SplitResolution(universe, cfg, positions, drift, leakage)


def resolve_splits(
    cfg: DataSplitConfig,
    refs: Sequence[SampleRef] | Universe,
    *,
    name_to_id: Mapping[str, int] | None = None,
) -> dict[str, Sequence[SampleRef]]:
    """``{stage: [SampleRef]}`` with the drift guard and the leakage policy applied.

    An empty ``predict`` is the whole universe. Raises ``UniverseDriftError``,
    ``SelectorError`` or ``SplitLeakageError`` / ``SplitConstraintError``.
    """
    if isinstance(refs, Universe):
        resolution = plan_splits(cfg, refs, name_to_id=name_to_id)
        enforce(resolution.leakage)
        return {stage: resolution.refs(stage) for stage in STAGES}
    ref_list = list(refs)
    resolution = plan_splits(cfg, Universe.from_refs(ref_list, name_to_id=name_to_id), name_to_id=name_to_id)
    enforce(resolution.leakage)
    return {stage: [ref_list[p] for p in resolution.positions[stage].tolist()] for stage in STAGES}
