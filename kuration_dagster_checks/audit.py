"""Whether a staged dataset version passed its audit: the blocking checks' latest evaluations,
read from the Dagster instance, each on that very version.

Write, audit, publish: the dataset asset commits a new version unpublished, its blocking
checks run on that version (each records ``version`` in its metadata), and the publish
step asks :func:`audit_failures` before it makes the version current. A check counts as
passed when its latest evaluation passed, or failed only at WARN severity (Kuration's
"usable, but look": the rule of :func:`failed_only_as_warning`), *and* it evaluated the
version about to be published. A check that has not run on it, failed at ERROR, or did not
execute is a reason not to publish. "Latest" skips the executions still pending: Dagster
plans a run's checks when the run is created, so a build waiting in the run queue holds a
newer execution of each check that says nothing yet. Dagster's blocking checks already keep
the publish step from running after an ERROR failure in the same run; this makes the rule
hold for a publish materialized alone, later, or by automation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagster import AssetCheckEvaluation, AssetCheckKey, DagsterInstance

from kuration_dagster_checks import failed_only_as_warning

#: The metadata key every dataset check records the version it evaluated under.
VERSION_KEY = "version"
#: How many executions of a check one read of its history returns.
_HISTORY_PAGE = 20


def _evaluation(record: Any) -> AssetCheckEvaluation | None:
    """The check evaluation of an execution record (None: only planned)."""
    return record.event.asset_check_evaluation if record is not None and record.event is not None else None


def _latest_settled(instance: DagsterInstance, key: AssetCheckKey) -> Any:
    """The newest execution of ``key`` that is not pending: evaluated, or planned by a run that
    finished without evaluating it (it did not execute). None: no such execution."""
    cursor = None
    while True:
        records = instance.event_log_storage.get_asset_check_execution_history(key, limit=_HISTORY_PAGE, cursor=cursor)
        for record in records:
            if _evaluation(record) is not None:
                return record
            run = instance.get_run_by_id(record.run_id)
            if run is None or run.is_finished:
                return record
        if len(records) < _HISTORY_PAGE:
            return None
        cursor = records[-1].id


def audit_failures(instance: DagsterInstance, checks: Sequence[AssetCheckKey], version: str) -> list[str]:
    """Why ``version`` must not be published (empty: every check in ``checks`` passed on it)."""
    failures = []
    for key in checks:
        evaluation = _evaluation(_latest_settled(instance, key))
        name = key.to_user_string()
        if evaluation is None:
            failures.append(f"{name}: has not evaluated {version}")
            continue
        audited = evaluation.metadata.get(VERSION_KEY)
        audited_version = getattr(audited, "value", audited)
        if audited_version != version:
            failures.append(f"{name}: its latest evaluation is of {audited_version or 'another dataset'}, not "
                            f"{version}")
        elif not (evaluation.passed or failed_only_as_warning(evaluation)):
            failures.append(f"{name}: failed on {version}: {evaluation.description or 'no verdict recorded'}")
    return failures


__all__ = ["VERSION_KEY", "audit_failures"]
