#!/usr/bin/env bash
# Create .venv (Python 3.11) and install Kuration with the pinned set in constraints.txt.
# Idempotent: re-installs only when pyproject.toml or constraints.txt changed.
# Usage: scripts/bootstrap.sh [extras]   (default extras: dev)
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      python_bin="$candidate"; break
    fi
  done
fi
if [ -z "$python_bin" ]; then
  echo "bootstrap: Python 3.11 is required (zarr 3.1.x pins it); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv with $python_bin"
  "$python_bin" -m venv .venv
fi
stamp=".venv/.kuration-install-$extras"
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap: installing kuration[$extras] with constraints.txt (about a minute on a fresh machine)"
  # compat mode puts the repo on sys.path, so packages added later import without a reinstall
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$extras]" --config-settings editable_mode=compat
  echo "$want" > "$stamp"
fi
