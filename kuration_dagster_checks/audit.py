"""Whether a staged dataset version passed its audit: the blocking checks' latest evaluations,
read from the Dagster instance, each on that very version.

Write, audit, publish: the dataset asset commits a new version unpublished, its blocking
checks run on that version (each records ``version`` in its metadata), and the publish
step asks :func:`audit_failures` before it makes the version current. A check counts as
passed when its latest evaluation passed, or failed only at WARN severity (Kuration's
"usable, but look": the rule of :func:`failed_only_as_warning`), *and* it evaluated the
version about to be published. A check that has not run on it, failed at ERROR, or did not
execute is a reason not to publish. Dagster's blocking checks already keep the publish
step from running after an ERROR failure in the same run; this makes the rule hold for a
publish materialized alone, later, or by automation.
"""

from __future__ import annotations

from collections.abc import Sequence

from dagster import AssetCheckKey, DagsterInstance

from kuration_dagster_checks import failed_only_as_warning

#: The metadata key every dataset check records the version it evaluated under.
VERSION_KEY = "version"


def audit_failures(instance: DagsterInstance, checks: Sequence[AssetCheckKey], version: str) -> list[str]:
    """Why ``version`` must not be published (empty: every check in ``checks`` passed on it)."""
    records = instance.event_log_storage.get_latest_asset_check_execution_by_key(list(checks))
    failures = []
    for key in checks:
        record = records.get(key)
        evaluation = record.event.asset_check_evaluation if record is not None and record.event is not None else None
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
