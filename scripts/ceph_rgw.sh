#!/usr/bin/env bash
# A real S3 object store for the integration tests: single-node Ceph (one mon, one memstore
# OSD) and radosgw on 127.0.0.1, user TESTKEY / TESTSECRET. Our own copy of the recipe in
# the shared DESIGN notes, with install, stop-by-PID, reuse of a running gateway, and
# retries from a clean state.
#
#   scripts/ceph_rgw.sh start DIR   install the Debian packages if missing (needs root + apt),
#                                   start the cluster with its state under DIR, and print the
#                                   endpoint on stdout (everything else: stderr)
#   scripts/ceph_rgw.sh stop DIR    stop the daemons by the PIDs recorded under DIR
#
# The gateway listens on 127.0.0.1:KURATION_CEPH_RGW_PORT (default 7480), the monitor on
# KURATION_CEPH_MON_PORT (default 6789): a second cluster on one machine needs both others.
# If a gateway already answers on the gateway port, start reuses it and records nothing to
# stop. A failed start is stopped by PID and retried from an empty DIR, up to
# KURATION_CEPH_ATTEMPTS times (default 3); each failure is reported with the step that
# failed and the daemons' last log lines. Every wait is bounded by a deadline of
# KURATION_CEPH_WAIT seconds (default 90), not by a number of polls: one `ceph` CLI call
# alone takes a second or more on a loaded machine. tests/ceph/test_ceph_script.py runs this
# script on stand-in daemons to prove the retry.
#
# Why the OSD does not update its CRUSH location or device class on start: this Ceph's
# clients can send a monitor command before they hold the cluster's monmap, so it carries
# fsid 00000000-... and the monitor refuses it ("handle_command on fsid 0000... != <fsid>").
# The CLI calls below are simply retried until their deadline. The OSD sends two such
# commands during init; it logs the refusal as "mon_cmd_maybe_osd_create fail: 'wrong
# fsid'" and exits when the device-class update fails, which is how the first start after
# the Debian install (a cold, slow machine) failed. This script places osd.0 in the CRUSH map
# itself, so the OSD has no command to send before it boots.
set -euo pipefail
cmd=${1:-}; C=${2:-}
if [ -z "$cmd" ] || [ -z "$C" ]; then
  echo "usage: $0 start|stop DIR" >&2; exit 2
fi
RGW_PORT=${KURATION_CEPH_RGW_PORT:-7480}
MON_PORT=${KURATION_CEPH_MON_PORT:-6789}
for port in "$RGW_PORT" "$MON_PORT"; do
  case "$port" in ''|*[!0-9]*) echo "ceph_rgw.sh: ports must be numbers, got '$port'" >&2; exit 2 ;; esac
done
ENDPOINT=http://127.0.0.1:$RGW_PORT
ATTEMPTS=${KURATION_CEPH_ATTEMPTS:-3}
WAIT=${KURATION_CEPH_WAIT:-90}

# Stop every daemon whose pid file is under $1/run, by PID (SIGTERM, then SIGKILL after 10 s).
stop_daemons() {
  [ -d "$1/run" ] || return 0
  local pidfile pid
  for pidfile in "$1"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile"); kill "$pid" 2>/dev/null || true
  done
  for pidfile in "$1"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  done
}

if [ "$cmd" = stop ]; then
  stop_daemons "$C"
  rm -rf "$C"
  exit 0
fi
[ "$cmd" = start ] || { echo "$0: unknown command $cmd (start|stop)" >&2; exit 2; }

rgw_answers() { curl -s -o /dev/null "$ENDPOINT/"; }

if rgw_answers; then
  echo "ceph_rgw.sh: a gateway already answers on $ENDPOINT; reusing it" >&2
  mkdir -p "$C"; echo "$ENDPOINT"; exit 0
fi
if ! command -v radosgw >/dev/null || ! command -v ceph-mon >/dev/null || ! command -v uuidgen >/dev/null; then
  echo "ceph_rgw.sh: installing ceph-mon ceph-osd radosgw (Debian packages, about 20 s)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q ceph-mon ceph-osd radosgw uuid-runtime curl >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q ceph-mon ceph-osd radosgw uuid-runtime curl >/dev/null; }
fi

# Poll "$@" every half second until it succeeds or WAIT seconds pass.
wait_for() {
  local deadline=$((SECONDS + WAIT))
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}
daemon_alive() { [ -e "$C/run/$1.pid" ] && kill -0 "$(cat "$C/run/$1.pid")" 2>/dev/null; }
mon_up() { timeout 10 ceph -c ceph.conf mon stat >/dev/null 2>&1; }
register_osd() {
  # "osd create" with the same uuid and id is idempotent, so a call retried after a timeout is harmless
  timeout 10 ceph -c ceph.conf osd create "$1" 0 >/dev/null 2>&1 \
    && timeout 10 ceph -c ceph.conf osd dump 2>/dev/null | grep -q "^osd.0 "
}
# Up, or dead: a dead OSD ends the wait at once, and the attempt then says so.
osd_up_or_dead() {
  daemon_alive osd.0 || return 0
  timeout 10 ceph -c ceph.conf osd stat 2>/dev/null | grep -q "1 up"
}
test_user() {
  radosgw-admin -c ceph.conf user info --uid=test >/dev/null 2>&1 \
    || radosgw-admin -c ceph.conf user create --uid=test --display-name=test --access-key=TESTKEY \
         --secret=TESTSECRET >/dev/null 2>&1
}

# One start from an empty $C. On failure it sets $why to the step that failed and returns 1
# (`set -e` does not apply inside a function called from `if`, so every step checks itself).
start_once() {
  rm -rf "$C"; mkdir -p "$C/run" "$C/log" "$C/mon.a" "$C/osd.0" "$C/rgw"; cd "$C"
  local fsid osd_uuid
  fsid=$(uuidgen)
  # tcp_nodelay=1: without it the gateway's small writes wait on Nagle's algorithm for the
  # client's delayed ACK, about 40 ms per GET or copy on loopback (a 12-shard dataset write
  # took 4 s to 7 s, with it 1.5 s to 2 s)
  cat > ceph.conf <<EOF
[global]
fsid = $fsid
mon initial members = a
mon host = v1:127.0.0.1:$MON_PORT
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
osd pool default pg autoscale mode = off
osd pool default pg num = 8
osd pool default pgp num = 8
mon max pg per osd = 1000
run dir = $C/run
log file = $C/log/\$name.log
admin socket = $C/run/\$name.asok
pid file = $C/run/\$name.pid
[mon.a]
mon data = $C/mon.a
[osd.0]
osd data = $C/osd.0
osd objectstore = memstore
memstore device bytes = 1073741824
osd crush update on start = false
osd class update on start = false
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $C/rgw
EOF
  # the address as v1 (legacy) explicitly: monmaptool makes a bare address on any port but 6789 a v2 one,
  # which the v1 "mon host" above then never reaches
  monmaptool --create --addv a "[v1:127.0.0.1:$MON_PORT]" --fsid "$fsid" monmap >/dev/null || { why="monmaptool"; return 1; }
  ceph-mon -c ceph.conf --mkfs -i a --monmap monmap || { why="ceph-mon --mkfs"; return 1; }
  ceph-mon -c ceph.conf -i a || { why="starting ceph-mon"; return 1; }
  wait_for mon_up || { why="waiting for the monitor ($WAIT s)"; return 1; }
  # osd.0 is registered with the uuid its mkfs gets, so the daemon and the monitor agree on
  # who osd.0 is (a bare "osd create" leaves that to a race the daemon can lose)
  osd_uuid=$(uuidgen)
  wait_for register_osd "$osd_uuid" || { why="registering osd.0 with the monitor"; return 1; }
  ceph-osd -c ceph.conf -i 0 --mkfs --osd-uuid "$osd_uuid" >log/osd-mkfs.out 2>&1 || { why="ceph-osd --mkfs"; return 1; }
  ceph -c ceph.conf osd crush add-bucket localhost host >/dev/null 2>&1 || true
  ceph -c ceph.conf osd crush move localhost root=default >/dev/null 2>&1 || true
  ceph -c ceph.conf osd crush add osd.0 1.0 host=localhost >/dev/null 2>&1 || { why="adding osd.0 to the crush map"; return 1; }
  ceph-osd -c ceph.conf -i 0 2>/dev/null || true  # it daemonizes; whether it came up is checked next
  wait_for osd_up_or_dead || { why="waiting for osd.0 to come up ($WAIT s)"; return 1; }
  daemon_alive osd.0 || { why="osd.0 exited while booting"; return 1; }
  radosgw -c ceph.conf -n client.rgw.a || { why="starting radosgw"; return 1; }
  wait_for rgw_answers || { why="waiting for radosgw on $ENDPOINT ($WAIT s)"; return 1; }
  wait_for test_user || { why="creating the TESTKEY user"; return 1; }
}

why=""
for attempt in $(seq 1 "$ATTEMPTS"); do
  why=""
  # the daemons' own output goes to stderr: stdout carries the endpoint alone
  if start_once >&2; then
    echo "ceph_rgw.sh: rgw ready at $ENDPOINT (attempt $attempt of $ATTEMPTS; pids $(cat "$C"/run/*.pid | tr '\n' ' '))" >&2
    echo "$ENDPOINT"; exit 0
  fi
  echo "ceph_rgw.sh: attempt $attempt of $ATTEMPTS failed at: $why; the daemons' last log lines:" >&2
  tail -n 12 "$C"/log/* >&2 2>/dev/null || true
  cd /
  stop_daemons "$C"
  if rgw_answers; then
    echo "ceph_rgw.sh: something not started here answers on $ENDPOINT; not retrying over it" >&2
    exit 1
  fi
done
echo "ceph_rgw.sh: could not start Ceph radosgw in $ATTEMPTS attempts (the last failed at: $why)" >&2
exit 1
