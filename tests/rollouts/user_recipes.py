"""A user's own rollout recipe, as a plugin would write one: what the generation tests plug in
(and break on purpose), and what the recipe contract kit runs against beside the built-in one."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kuration.rollouts.records import (
    CandidateShell, RolloutChainBatch, RolloutSourceRef, RolloutStepRecord, RolloutTargetRecord, RolloutWriteRecord,
)


@dataclass(frozen=True)
class OneStepRecipe:
    """A user's recipe: one chain per shard, one step, two candidates (stay; go to the next
    recorded position). ``tamper`` breaks its output on purpose; ``"batch"`` also returns
    the same chain again as a one-chain RolloutChainBatch (a mixed list)."""

    tamper: str = ""
    recipe_id: str = "one_step_v1"
    required_modalities: tuple[str, ...] = ("pos",)
    field_retention_policy: str = "compact"

    @property
    def reason_codes(self) -> dict[str, int]:
        return {"never": 0, "also": 0} if self.tamper == "codes" else {"never": 0}

    def params(self) -> dict:
        return {"tamper": self.tamper, "nan": float("nan")} if self.tamper == "params" else {"tamper": self.tamper}

    def records_for_shard(self, arrays, source):
        pos = arrays["pos"]
        if len(pos) < 2:
            return []
        if self.tamper == "type":
            return {"not": "records"}
        shell = CandidateShell(np.array([0, 1]), np.stack([pos[0], pos[1]]), np.array([True, True]),
                               np.zeros(2, np.uint32), np.float32([0, 1]), np.array([True, True]))
        step = RolloutStepRecord(0, pos[0], shell, 1, 1.0)
        foreign = RolloutSourceRef(source.shard_path, "0" * 64, source.entity, source.split, source.n_states)
        if self.tamper == "item":
            return ["not a record"]
        if self.tamper in ("batch", "batch_source", "empty_batch"):
            chains = 0 if self.tamper == "empty_batch" else 1
            batch = RolloutChainBatch(
                source=foreign if self.tamper == "batch_source" else source, strategy_id="user", mixture_id="mix",
                target_kind="next", target_values=pos[1:2][:chains], target_label_valid=np.ones(chains, bool),
                chain_lengths=np.ones(chains, int), termination_reasons=["done"] * chains,
                source_rows=np.zeros(chains, int), states=pos[:chains], shell_counts=np.full(chains, 2),
                selected_shell_index=np.ones(chains, int), rewards=np.ones(chains),
                action_ids=shell.action_ids[:2 * chains], positions=shell.positions[:2 * chains],
                valid_action=shell.valid_action[:2 * chains],
                reason_bits=shell.reason_bits[:2 * chains], labels=shell.labels[:2 * chains],
                label_valid=shell.label_valid[:2 * chains])
            record = RolloutWriteRecord(source, RolloutTargetRecord("next", pos[1]), "user", "mix", (step,), "done")
            return [record, batch]
        if self.tamper == "source":
            source = foreign
        return [RolloutWriteRecord(source, RolloutTargetRecord("next", pos[1]), "user", "mix", (step,), "done")]
