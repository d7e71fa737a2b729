#!/usr/bin/env bash
# Set up .venv and run the whole test suite. Fails if pytest collected no tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
# tests build their own instances; a scratch DAGSTER_HOME keeps stray ones out of the repo
export DAGSTER_HOME="$(mktemp -d)"
# A real object store for the Ceph integration test (tests/ceph): installed and started
# here, stopped by PID on exit. KURATION_SKIP_CEPH=1 runs without it (that test then skips).
if [ "${KURATION_SKIP_CEPH:-0}" != 1 ]; then
  CEPH_DIR="$(mktemp -d)/ceph"
  trap 'scripts/ceph_rgw.sh stop "$CEPH_DIR"' EXIT
  if ! scripts/ceph_rgw.sh start "$CEPH_DIR"; then
    echo "test.sh: could not start Ceph radosgw (see above; it needs root and apt to install); KURATION_SKIP_CEPH=1 runs without it" >&2
    exit 1
  fi
  export KURATION_CEPH_ENDPOINT=http://127.0.0.1:7480
fi
set +e
.venv/bin/python -m pytest --durations=15 "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
