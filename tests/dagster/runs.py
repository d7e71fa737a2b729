"""Setting up and reading the outcome of in-process Dagster runs in the asset tests."""

from __future__ import annotations

import json
from pathlib import Path

#: One second in hours: budgets in the tests are requested in seconds.
H = 1 / 3600


def failure_text(result) -> str:
    """The step failure's message with its cause chain (where the core error's text is)."""
    error = result.get_step_failure_events()[0].event_specific_data.error
    parts = []
    while error is not None:
        parts.append(error.message)
        error = error.cause
    return "\n".join(parts)


def write_rule(path: Path, rule: dict) -> str:
    """Write a split rule (a splits.json selector set) as JSON; returns its path, for the asset config."""
    path.write_text(json.dumps(rule))
    return str(path)
