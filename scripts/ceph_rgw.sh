#!/usr/bin/env bash
# A real S3 object store for the integration tests: single-node Ceph (one mon, one memstore
# OSD) and radosgw on 127.0.0.1:7480, user TESTKEY / TESTSECRET. Our own copy of the recipe
# in the shared DESIGN notes, with install, stop-by-PID and reuse of a running gateway.
#
#   scripts/ceph_rgw.sh start DIR   install the Debian packages if missing (needs root + apt),
#                                   start the cluster with its state under DIR, print the endpoint
#   scripts/ceph_rgw.sh stop DIR    stop the daemons by the PIDs recorded under DIR
#
# Ports are fixed (mon 6789, rgw 7480). If a gateway already answers on 7480, start reuses it
# and records nothing to stop.
set -euo pipefail
cmd=${1:-}; C=${2:-}
if [ -z "$cmd" ] || [ -z "$C" ]; then
  echo "usage: $0 start|stop DIR" >&2; exit 2
fi
ENDPOINT=http://127.0.0.1:7480

if [ "$cmd" = stop ]; then
  [ -d "$C/run" ] || exit 0
  for pidfile in "$C"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile"); kill "$pid" 2>/dev/null || true
  done
  for pidfile in "$C"/run/*.pid; do
    [ -e "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$C"
  exit 0
fi
[ "$cmd" = start ] || { echo "$0: unknown command $cmd (start|stop)" >&2; exit 2; }

if curl -s -o /dev/null "$ENDPOINT/"; then
  echo "ceph_rgw.sh: a gateway already answers on $ENDPOINT; reusing it" >&2
  mkdir -p "$C"; exit 0
fi
if ! command -v radosgw >/dev/null || ! command -v ceph-mon >/dev/null || ! command -v uuidgen >/dev/null; then
  echo "ceph_rgw.sh: installing ceph-mon ceph-osd radosgw (Debian packages, about 20 s)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q ceph-mon ceph-osd radosgw uuid-runtime curl >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q ceph-mon ceph-osd radosgw uuid-runtime curl >/dev/null; }
fi

fail() {
  echo "ceph_rgw.sh: $1 failed; the last log lines:" >&2
  tail -n 20 "$C"/log/*.log >&2 2>/dev/null || true
  exit 1
}
rm -rf "$C"; mkdir -p "$C/run" "$C/log" "$C/mon.a" "$C/osd.0" "$C/rgw"; cd "$C"
fsid=$(uuidgen)
cat > ceph.conf <<EOF
[global]
fsid = $fsid
mon initial members = a
mon host = v1:127.0.0.1:6789
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
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:7480
rgw data = $C/rgw
EOF
# Every step waits for its daemon (a loaded machine is slow) and names itself if it fails.
monmaptool --create --add a 127.0.0.1:6789 --fsid "$fsid" monmap >/dev/null || fail "monmaptool"
ceph-mon -c ceph.conf --mkfs -i a --monmap monmap || fail "ceph-mon --mkfs"
ceph-mon -c ceph.conf -i a || fail "starting ceph-mon"
up=0
for _ in $(seq 1 240); do timeout 5 ceph -c ceph.conf mon stat >/dev/null 2>&1 && { up=1; break; }; sleep 0.5; done
[ "$up" = 1 ] || fail "waiting for the monitor (120 s)"
# osd.0 is registered with the uuid its mkfs gets, so the daemon and the monitor agree on
# who osd.0 is (a bare "osd create" leaves that to a race the daemon can lose: "wrong fsid").
osd_uuid=$(uuidgen)
for _ in $(seq 1 5); do timeout 30 ceph -c ceph.conf osd create "$osd_uuid" 0 >/dev/null 2>&1 && break; sleep 1; done
timeout 30 ceph -c ceph.conf osd dump 2>/dev/null | grep -q "^osd.0 " || fail "registering osd.0 with the monitor"
ceph-osd -c ceph.conf -i 0 --mkfs --osd-uuid "$osd_uuid" 2>/dev/null || fail "ceph-osd --mkfs"
ceph -c ceph.conf osd crush add-bucket localhost host >/dev/null 2>&1 || true
ceph -c ceph.conf osd crush move localhost root=default >/dev/null 2>&1 || true
ceph -c ceph.conf osd crush add osd.0 1.0 host=localhost >/dev/null 2>&1 || fail "adding osd.0 to the crush map"
ceph-osd -c ceph.conf -i 0 2>/dev/null || true  # it daemonizes; whether it came up is checked next
up=0
for _ in $(seq 1 240); do
  timeout 5 ceph -c ceph.conf osd stat 2>/dev/null | grep -q "1 up" && { up=1; break; }
  sleep 0.5
done
[ "$up" = 1 ] || fail "waiting for osd.0 to come up (120 s)"
radosgw -c ceph.conf -n client.rgw.a || fail "starting radosgw"
for _ in $(seq 1 240); do curl -s -o /dev/null "$ENDPOINT/" && break; sleep 0.5; done
curl -s -o /dev/null "$ENDPOINT/" || fail "waiting for radosgw on $ENDPOINT (120 s)"
for _ in $(seq 1 5); do
  radosgw-admin -c ceph.conf user create --uid=test --display-name=test --access-key=TESTKEY --secret=TESTSECRET \
    >/dev/null 2>&1 && break
  sleep 2
done
radosgw-admin -c ceph.conf user info --uid=test >/dev/null 2>&1 || fail "creating the TESTKEY user"
echo "ceph_rgw.sh: rgw ready at $ENDPOINT (pids $(cat run/*.pid | tr '\n' ' '))" >&2
