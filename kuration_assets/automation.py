"""When the graph runs by itself: the declarative automation condition of the assets after the
scoring pool, and the tick interval of the sensors that drive them.

Who asks for what:

- ``universe``, ``resolved_splits`` and the ``scored_segments`` partitions are asked for by
  ``new_recordings_sensor``: only it can see the landing zone (a changed ``universe.csv``, a
  new or rewritten recording); Dagster's conditions only see materializations.
- ``budget_plan``, ``shards`` + ``dataset_manifest`` and ``rollout_store`` carry
  :func:`follows_upstream`: they run once after their upstreams updated, when no upstream is
  missing or in a queued or running run, and when every blocking check of their upstreams
  has passed (or failed only as a warning) on the upstream's latest materialization, or is
  planned in the same run. One
  tick of the automation sensor therefore plans the whole chain a change affects as one run,
  in which each blocking check stops what follows it. An update whose check runs in a step of
  its own and has not run yet (``segment_pool`` after a scoring step, ``dataset_integrity``
  after a dataset built by hand) is waited for, and a failed one stops the chain there until
  the check passes or the upstream is materialized again.

What this module deliberately does not do: rescore anything (the sensor's job, and a backfill's
after a strategy change), or define the sensors and the schedule (the code location does,
:mod:`kuration_definitions`).
"""

import os
from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetCheckKey,
    AssetKey,
    AssetSelection,
    AutomationCondition,
    AutomationContext,
    AutomationResult,
)

from kuration.errors import InputError
from kuration_dagster_checks import failed_only_as_warning

#: Seconds between two ticks of ``new_recordings_sensor`` and of the automation condition
#: sensors, read once when the code location loads. The daemon looks at its sensors about every
#: 5 s, so values below that act like 5 s.
SENSOR_INTERVAL_ENV = "KURATION_SENSOR_INTERVAL_SECONDS"
DEFAULT_SENSOR_INTERVAL_SECONDS = 30


def sensor_interval_seconds(environ: Mapping[str, str] = os.environ) -> int:
    """``KURATION_SENSOR_INTERVAL_SECONDS`` (a whole number of seconds, at least 1), or 30 unset."""
    raw = environ.get(SENSOR_INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_SENSOR_INTERVAL_SECONDS
    try:
        seconds = int(raw)
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise InputError(f"{SENSOR_INTERVAL_ENV}: expected a whole number of seconds of at least 1, got {raw!r}; "
                         f"unset it for the default of {DEFAULT_SENSOR_INTERVAL_SECONDS} s")
    return seconds


def follows_upstream(*, not_triggered_by: AssetSelection | None = None) -> AutomationCondition:
    """``AutomationCondition.eager()`` (an upstream updated since this asset was last requested or
    updated, none missing, none in progress, this asset not in progress) and
    :func:`all_deps_blocking_checks_usable` (every upstream blocking check passed, or failed
    only as a warning).

    The checks sit outside eager's "since last handled" memory on purpose: an update whose
    checks have not run yet is remembered and requested on the tick after they passed, not
    forgotten. An update made by a run that also planned this asset (the nightly re-curation,
    a manual run over the chain) does not trigger it again (eager's ``any_deps_updated``
    ignores those).

    ``not_triggered_by``: upstreams whose update alone does not trigger this asset, because the
    asset also depends on them through another upstream that will update after them (the
    rollout store reads the resolved split, but must wait for the dataset built from it).
    """
    condition: AutomationCondition = AutomationCondition.eager()
    if not_triggered_by is not None:
        condition = condition.replace("any_deps_updated",
                                      AutomationCondition.any_deps_updated().ignore(not_triggered_by))
    return (condition & all_deps_blocking_checks_usable()).with_label("follows_upstream")


class LatestFailureIsAWarning(AutomationCondition[AssetCheckKey]):
    """True for a check whose latest evaluation failed at WARN severity. Only for unpartitioned
    checks (all of Kuration's are): the latest execution of a partitioned check may be another
    partition's, so for one this is false, and a failure of it stops the chain as Dagster's own
    condition would."""

    @property
    def name(self) -> str:
        return "latest_failure_is_a_warning"

    def evaluate(self, context: AutomationContext[AssetCheckKey]) -> AutomationResult[AssetCheckKey]:
        if context.partitions_def is not None:
            return AutomationResult(context, context.get_empty_subset())
        records = context.asset_graph_view.instance.event_log_storage.get_latest_asset_check_execution_by_key(
            [context.key])
        record = records.get(context.key)
        evaluation = record.event.asset_check_evaluation if record is not None and record.event is not None else None
        warned = failed_only_as_warning(evaluation)
        return AutomationResult(context, context.candidate_subset if warned else context.get_empty_subset())


def all_deps_blocking_checks_usable() -> AutomationCondition:
    """Dagster's ``all_deps_blocking_checks_passed()``, except that a blocking check whose latest
    evaluation (of its asset's latest materialization) failed only as WARN counts as passed.

    That is what a blocking check means in a run (only an ERROR stops what follows) and what a
    warning means in Kuration (``CheckResult.ok``: warnings never make what was checked
    unusable). Dagster's ``check_passed`` is false for a WARN failure, so with the stock
    condition a ``budget`` check that warns (a budget larger than the pool, underfill) would
    stop the automation for good, and a growing corpus would never get its next dataset. An
    ERROR failure, a check that has not run on the latest materialization, or one that failed
    to execute still stops it. A condition of Kuration's own: the automation sensor evaluates
    it in the code server (``use_user_code_server=True``), since the daemon knows only Dagster's."""
    usable = (AutomationCondition.check_passed()
              | (AutomationCondition.check_failed() & LatestFailureIsAWarning())
              | AutomationCondition.will_be_requested())
    return AllDepsBlockingChecksUsable(AutomationCondition.all_deps_match(
        AutomationCondition.all_checks_match(usable.with_label("blocking_check_usable"), blocking_only=True)))


class AllDepsBlockingChecksUsable(AutomationCondition[AssetKey]):
    """What :func:`all_deps_blocking_checks_usable` returns: its Dagster-built tree, as the one
    child of a condition Dagster does not know. Dagster's check operators do not list their
    operand as a child, so without this node the tree would look serializable and the code
    location would fail to load, trying to send :class:`LatestFailureIsAWarning` to the UI."""

    def __init__(self, tree: AutomationCondition[Any]):
        self._tree = tree

    @property
    def name(self) -> str:
        return "all_deps_blocking_checks_usable"

    @property
    def children(self) -> Sequence[AutomationCondition]:
        return [self._tree]

    async def evaluate(self, context: AutomationContext[AssetKey]) -> AutomationResult[AssetKey]:  # type: ignore[override]
        tree = await context.for_child_condition(self._tree, child_indices=[0],
                                                 candidate_subset=context.candidate_subset).evaluate_async()
        return AutomationResult(context, tree.true_subset, child_results=[tree])


__all__ = ["DEFAULT_SENSOR_INTERVAL_SECONDS", "SENSOR_INTERVAL_ENV", "LatestFailureIsAWarning",
           "all_deps_blocking_checks_usable", "follows_upstream", "sensor_interval_seconds"]
