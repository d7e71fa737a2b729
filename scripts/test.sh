#!/usr/bin/env bash
# Set up .venv, lint (ruff), type-check (mypy) and validate the Dagster definitions (dg check
# defs), then run the whole test suite. Fails on any lint or type error, a code location that
# does not load, and if pytest collected no tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
# Both read their settings from pyproject.toml ([tool.ruff], [tool.mypy]); the first to fail
# stops the run before the slower tests.
if ! .venv/bin/ruff check; then
  echo "test.sh: ruff found lint errors (above); fix them, or run .venv/bin/ruff check --fix for the fixable ones" >&2
  exit 1
fi
if ! .venv/bin/python -m mypy; then
  echo "test.sh: mypy found type errors (above) in the packages [tool.mypy] files lists" >&2
  exit 1
fi
# The servers started below are stopped on exit, whatever ends the run, the last started first.
stop_on_exit=()
stop_servers() {
  local i
  for ((i = ${#stop_on_exit[@]} - 1; i >= 0; i--)); do eval "${stop_on_exit[i]}" || true; done
}
trap stop_servers EXIT
# Scratch space for the run, removed after the servers stopped: pytest's temporary folders
# (TMPDIR), every test's Dagster instance and the PostgreSQL cluster. In memory (/dev/shm)
# when that is a tmpfs with 4 GiB free: each sqlite or PostgreSQL commit syncs to disk, and
# on a virtual disk those syncs were most of a Dagster test's time. Nothing a test checks
# needs the disk (the crash tests kill processes, not the machine). KURATION_TEST_TMPDIR
# names another parent folder.
scratch_parent="${KURATION_TEST_TMPDIR:-}"
if [ -z "$scratch_parent" ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] \
    && [ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -ge $((4 * 1024 * 1024)) ]; then
  scratch_parent=/dev/shm
fi
SCRATCH="$(mktemp -d -p "${scratch_parent:-${TMPDIR:-/tmp}}" kuration-tests.XXXXXX)"
chmod 755 "$SCRATCH"  # run as root, the PostgreSQL server runs as the postgres user, who must reach its folder
stop_on_exit+=('rm -rf "$SCRATCH"')
# tests build their own instances; a scratch DAGSTER_HOME keeps stray ones out of the repo
export DAGSTER_HOME="$(mktemp -d -p "$SCRATCH")"
# The code location loads as the UI loads it: every asset, check, job, sensor and schedule
# defined without error. `dg check defs` reads [tool.dg] in pyproject.toml; its own instance
# is a scratch one with telemetry off.
if ! scripts/check_defs.sh; then
  echo "test.sh: the Dagster definitions do not load (above); scripts/check_defs.sh runs the same check" >&2
  exit 1
fi
# A real object store for the Ceph integration test (tests/ceph): installed and started
# here, stopped by PID on exit. KURATION_SKIP_CEPH=1 runs without it (that test then skips).
if [ "${KURATION_SKIP_CEPH:-0}" != 1 ]; then
  CEPH_DIR="$(mktemp -d)/ceph"
  stop_on_exit+=('scripts/ceph_rgw.sh stop "$CEPH_DIR"')
  if ! KURATION_CEPH_ENDPOINT="$(scripts/ceph_rgw.sh start "$CEPH_DIR")"; then
    echo "test.sh: could not start Ceph radosgw (see above; it needs root and apt to install); KURATION_SKIP_CEPH=1 runs without it" >&2
    exit 1
  fi
  export KURATION_CEPH_ENDPOINT
fi
# A real PostgreSQL for the deployment tests (tests/deploy): installed and started here on
# 127.0.0.1:${KURATION_POSTGRES_PORT:-55432}, stopped by PID on exit. KURATION_SKIP_POSTGRES=1
# runs without it (those tests then skip).
if [ "${KURATION_SKIP_POSTGRES:-0}" != 1 ]; then
  PG_PARENT="$(mktemp -d -p "$SCRATCH")"
  chmod 755 "$PG_PARENT"  # run as root, the server runs as the postgres user, who must reach its folder
  stop_on_exit+=('scripts/postgres.sh stop "$PG_PARENT/cluster"; rm -rf "$PG_PARENT"')
  if ! KURATION_POSTGRES_URL="$(scripts/postgres.sh start "$PG_PARENT/cluster" "${KURATION_POSTGRES_PORT:-55432}")"; then
    echo "test.sh: could not start PostgreSQL (see above; it needs root and apt to install); KURATION_SKIP_POSTGRES=1 runs without it" >&2
    exit 1
  fi
  export KURATION_POSTGRES_URL
fi
# Headless Chromium for the browser tests (tests/browser.py): Debian's package, installed
# here if missing. KURATION_SKIP_BROWSER=1 runs without it (those tests then skip).
if [ "${KURATION_SKIP_BROWSER:-0}" != 1 ]; then
  if ! scripts/chromium.sh; then
    echo "test.sh: headless Chromium is not usable (see above); KURATION_SKIP_BROWSER=1 runs without the browser tests" >&2
    exit 1
  fi
fi
export TMPDIR="$SCRATCH"
# The tests run on KURATION_TEST_WORKERS pytest-xdist worker processes (default 2, one per
# core of the machine the suite is timed on; 0 runs them in this process). --dist loadgroup
# hands the tests out one at a time, except those sharing a fixture built once (a module's
# corpus, the session's demo), which go to one worker together (tests/worker_groups.py). The
# flags are here rather than in pyproject's addopts so that plain `pytest tests/x.py`, `-p
# no:xdist`, --pdb and breakpoints keep running in one process.
workers="${KURATION_TEST_WORKERS:-2}"
case "$workers" in
  ''|*[!0-9]*) echo "test.sh: KURATION_TEST_WORKERS must be a number of workers (0: none), not '$workers'" >&2; exit 2 ;;
esac
parallel=()
[ "$workers" -eq 0 ] || parallel=(-n "$workers" --dist loadgroup)
set +e
.venv/bin/python -m pytest --durations=15 ${parallel[@]+"${parallel[@]}"} "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test.sh: pytest collected no tests; that is a failure" >&2
  exit 1
fi
exit "$status"
