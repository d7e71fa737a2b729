#!/usr/bin/env bash
# Open the Dagster UI on http://127.0.0.1:3000 over the same instance and code location.
# Run scripts/demo.sh first to have a demo landing zone and a finished run to look at.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
export DAGSTER_HOME="$PWD"
export KURATION_LANDING_ZONE="${KURATION_LANDING_ZONE:-$PWD/demo_output/landing}"
export KURATION_STORAGE_ROOT="${KURATION_STORAGE_ROOT:-$PWD/demo_output/storage}"
set -m  # dagster dev's children must get their own process group to receive SIGINT/SIGTERM
exec .venv/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p "${PORT:-3000}"
