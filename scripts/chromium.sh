#!/usr/bin/env bash
# Headless Chromium for the browser tests (HTML reports, the Dagster UI): Debian's package,
# driven by the playwright Python package with executable_path=/usr/bin/chromium, so no
# `playwright install` and no browser download.
#
#   scripts/chromium.sh   install Debian's chromium if /usr/bin/chromium is missing (needs
#                         root and apt), then check it starts headless; prints its version
#
# The check renders a blank page to a screenshot once: a package that installed but cannot
# start (missing libraries, a sandbox it cannot use) fails here, naming the step, instead of
# as a timeout inside pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
CHROMIUM=/usr/bin/chromium
if [ ! -x "$CHROMIUM" ]; then
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    echo "chromium.sh: $CHROMIUM is missing and this is not a root shell with apt; install Debian's chromium package, or set KURATION_SKIP_BROWSER=1 to run without the browser tests" >&2
    exit 1
  fi
  echo "chromium.sh: installing Debian's chromium (about 20 s)"
  # apt's package lists may be stale on a fresh machine: update once and retry
  apt-get install -y -q chromium >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
    || { echo "chromium.sh: apt-get install chromium failed" >&2; exit 1; }
fi
# The same flags the tests use (tests/browser.py): without the background-networking ones
# Chromium keeps trying to reach Google's hosts on a closed network.
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
if ! timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --disable-quic --no-first-run --user-data-dir="$out/profile" \
    --screenshot="$out/blank.png" about:blank >"$out/log" 2>&1 || [ ! -s "$out/blank.png" ]; then
  echo "chromium.sh: $CHROMIUM did not render a blank page headless; its output:" >&2
  tail -n 20 "$out/log" >&2
  exit 1
fi
"$CHROMIUM" --version 2>/dev/null
