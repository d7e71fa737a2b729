#!/usr/bin/env bash
# Open the Dagster UI (dg dev) on http://127.0.0.1:3000 over a landing zone, a storage root and
# the code location, with your plugins.
#
#   scripts/ui.sh                      the demo: demo_output/landing and demo_output/storage
#                                      (run scripts/demo.sh first), instance in the repo root
#   scripts/ui.sh --landing DIR --storage DIR [--config FILE] [--plugins mod1,mod2]
#                 [--plugin-path DIR] [--port N]
#                                      your own data; the instance is <storage>/dagster_home, the
#                                      one `kuration run` uses (unless DAGSTER_HOME is set)
set -euo pipefail
usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; }
absolute() { case "$1" in *://*|/*) printf '%s' "$1" ;; *) printf '%s/%s' "$PWD" "$1" ;; esac; }
landing="" storage="" config="" plugins="" plugin_path="" port="${PORT:-3000}"
while [ $# -gt 0 ]; do
  case "$1" in
    --landing) landing=$(absolute "${2:?--landing needs a folder or URL}"); shift 2 ;;
    --storage) storage=$(absolute "${2:?--storage needs a folder or URL}"); shift 2 ;;
    --config) config=$(absolute "${2:?--config needs a file}"); shift 2 ;;
    --plugins) plugins="${2:?--plugins needs comma-separated module names}"; shift 2 ;;
    --plugin-path) plugin_path=$(absolute "${2:?--plugin-path needs a folder}"); shift 2 ;;
    --port) port="${2:?--port needs a number}"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "scripts/ui.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
scripts/bootstrap.sh dev
export KURATION_LANDING_ZONE="${landing:-${KURATION_LANDING_ZONE:-$PWD/demo_output/landing}}"
export KURATION_STORAGE_ROOT="${storage:-${KURATION_STORAGE_ROOT:-$PWD/demo_output/storage}}"
if [ -z "${DAGSTER_HOME:-}" ]; then
  if [ -n "$storage" ]; then
    case "$storage" in
      *://*) echo "scripts/ui.sh: a remote --storage needs DAGSTER_HOME set to a local folder" >&2; exit 2 ;;
    esac
    export DAGSTER_HOME="$storage/dagster_home"
    mkdir -p "$DAGSTER_HOME"
    [ -f "$DAGSTER_HOME/dagster.yaml" ] || printf 'telemetry:\n  enabled: false\n' > "$DAGSTER_HOME/dagster.yaml"
  else
    export DAGSTER_HOME="$PWD"
  fi
fi
[ -z "$config" ] || export KURATION_CONFIG="$config"
[ -z "$plugins" ] || export KURATION_PLUGINS="$plugins${KURATION_PLUGINS:+,$KURATION_PLUGINS}"
[ -z "$plugin_path" ] || export PYTHONPATH="$plugin_path${PYTHONPATH:+:$PYTHONPATH}"
echo "scripts/ui.sh: landing $KURATION_LANDING_ZONE, storage $KURATION_STORAGE_ROOT, instance $DAGSTER_HOME" >&2
# The webserver and the daemon start a telemetry-upload thread that creates logs/ and
# .logs_queue/ in DAGSTER_HOME (the repository, for the demo) even with telemetry off in
# dagster.yaml; this variable keeps that thread from starting.
export DAGSTER_DISABLE_TELEMETRY=1
# The job pages' "Auto-materialize" badge reads an instance switch the automation sensor does
# not use: set it to what the sensor does (kuration_assets.automation_badge).
.venv/bin/python -m kuration_assets.automation_badge
set -m  # dg dev's children must get their own process group to receive SIGINT/SIGTERM
exec .venv/bin/dg dev -w workspace.yaml -h 127.0.0.1 -p "$port"
