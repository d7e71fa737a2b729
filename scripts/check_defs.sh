#!/usr/bin/env bash
# Validate the Dagster definitions: load the code location (kuration_definitions) as the UI
# does and report every error, with `dg check defs`. Exits 0 when it loads, 1 when not.
#
#   scripts/check_defs.sh                    the definitions on the landing zone and storage root
#                                            of KURATION_LANDING_ZONE / KURATION_STORAGE_ROOT
#                                            (their defaults when unset), as scripts/test.sh runs it
#
# The check's instance is a scratch DAGSTER_HOME with telemetry off, removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
home="$(mktemp -d)"
trap 'rm -rf "$home"' EXIT
printf 'telemetry:\n  enabled: false\n' > "$home/dagster.yaml"
# no component defs.yaml to schema-check: the code location is a module (see [tool.dg] in pyproject.toml)
DAGSTER_HOME="$home" DAGSTER_DISABLE_TELEMETRY=1 .venv/bin/dg check defs --no-check-yaml
