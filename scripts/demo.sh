#!/usr/bin/env bash
# The main job: set up .venv, then materialize every asset on the bundled demo corpus with a
# sqlite-backed Dagster instance (DAGSTER_HOME = this repository) and print what came out.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
export DAGSTER_HOME="$PWD"
exec .venv/bin/kuration demo "$@"
