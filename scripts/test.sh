#!/usr/bin/env bash
# Set up .venv and run the whole test suite. Fails if pytest collected no tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
# tests build their own instances; a scratch DAGSTER_HOME keeps stray ones out of the repo
export DAGSTER_HOME="$(mktemp -d)"
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
