#!/usr/bin/env bash
# A private PostgreSQL server for a Dagster instance (deploy/dagster.yaml) and its tests:
# Debian's PostgreSQL, one cluster under DIR, listening on 127.0.0.1 only.
#
#   scripts/postgres.sh start DIR [PORT]   install Debian's postgresql if missing (needs root + apt),
#                                          start the cluster under DIR on 127.0.0.1:PORT (default
#                                          55432), create the Dagster user and database, and print
#                                          the connection URL on stdout (everything else: stderr)
#   scripts/postgres.sh stop DIR           stop the server by the PID in DIR/data/postmaster.pid
#
# The Dagster role is KURATION_POSTGRES_USER (default dagster) with password
# KURATION_POSTGRES_PASSWORD (default dagster) and CREATEDB, so a test can make a database of
# its own; its database is named like the role. Connections over TCP need the password
# (scram-sha-256); the Unix socket, in DIR/socket and reachable only by the cluster's owner,
# trusts its user.
#
# PostgreSQL refuses to run as root: run as root, the cluster belongs to the `postgres` system
# user (the Debian package creates it) and every server command runs through runuser, so every
# folder above DIR must be searchable by that user. A DIR with a cluster in it is started as it
# is, and its data kept by `stop`. Only a cluster this call created is wiped and created again
# when its first start fails (KURATION_POSTGRES_ATTEMPTS, default 2); every wait is bounded by
# KURATION_POSTGRES_WAIT seconds (default 30).
set -euo pipefail
cmd=${1:-}; DIR=${2:-}; PORT=${3:-55432}
if [ -z "$cmd" ] || [ -z "$DIR" ]; then
  echo "usage: $0 start DIR [PORT] | stop DIR" >&2; exit 2
fi
case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac
DATA="$DIR/data"; SOCKET="$DIR/socket"; LOG="$DIR/server.log"
ATTEMPTS=${KURATION_POSTGRES_ATTEMPTS:-2}
WAIT=${KURATION_POSTGRES_WAIT:-30}
DB_USER=${KURATION_POSTGRES_USER:-dagster}
DB_PASSWORD=${KURATION_POSTGRES_PASSWORD:-dagster}

# The newest installed server's bin folder (Debian keeps each major version apart), or nothing.
server_bin() {
  local found
  found=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$found" ] && [ -x "$found/pg_ctl" ] && echo "$found"
}

# Run a server command as the cluster's owner: ourselves, or `postgres` when we are root.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# The postmaster's PID while it runs, else nothing.
postmaster_pid() {
  local pid
  [ -f "$DATA/postmaster.pid" ] || return 1
  pid=$(head -n 1 "$DATA/postmaster.pid")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# pg_ctl stop (fast: open sessions are cut, the data stays consistent), then the PID by force.
stop_server() {
  local bin pid
  pid=$(postmaster_pid) || return 0
  bin=$(server_bin) || true
  if [ -n "$bin" ]; then
    as_owner "$bin/pg_ctl" stop -D "$DATA" -m fast -t 20 >/dev/null 2>&1 || true
  fi
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null || true
  fi
}

if [ "$cmd" = stop ]; then
  stop_server
  exit 0
fi
[ "$cmd" = start ] || { echo "$0: unknown command $cmd (start|stop)" >&2; exit 2; }
case "$PORT" in ''|*[!0-9]*) echo "postgres.sh: PORT must be a number, got '$PORT'" >&2; exit 2 ;; esac

BIN=$(server_bin) || BIN=""
if [ -z "$BIN" ]; then
  if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" != 0 ]; then
    echo "postgres.sh: no PostgreSQL server under /usr/lib/postgresql and this is not a root shell with apt;" \
         "install Debian's postgresql package, or set KURATION_SKIP_POSTGRES=1 to run the tests without it" >&2
    exit 1
  fi
  echo "postgres.sh: installing Debian's postgresql (about 15 s)" >&2
  export DEBIAN_FRONTEND=noninteractive
  # apt's package lists may be stale on a fresh machine: update once and retry
  apt-get install -y -q postgresql >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q postgresql >/dev/null; } \
    || { echo "postgres.sh: apt-get install postgresql failed" >&2; exit 1; }
  BIN=$(server_bin) || { echo "postgres.sh: postgresql installed, but no pg_ctl under /usr/lib/postgresql/*/bin" >&2; exit 1; }
fi
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  echo "postgres.sh: running as root needs the 'postgres' system user to own the cluster (Debian's" \
       "postgresql package creates it); reinstall that package, or run this script as another user" >&2
  exit 1
fi

ready() { "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 2; }
# Anything at all accepts TCP connections on the port (a server of another kind fails pg_isready).
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; }
wait_ready() {
  local deadline=$((SECONDS + WAIT))
  until ready; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
url() { echo "postgresql://$DB_USER:$DB_PASSWORD@127.0.0.1:$PORT/$DB_USER"; }
# psql as the cluster's superuser over the owner-only socket, with the role's name and password as variables
superuser_sql() { as_owner "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -v user="$DB_USER" -v password="$DB_PASSWORD" \
  -h "$SOCKET" -p "$PORT" -U postgres -d postgres "$@"; }

# DIR's cluster is already up on PORT: hand out its URL again.
if pid=$(postmaster_pid) && ready; then
  echo "postgres.sh: the cluster in $DATA already runs (pid $pid); reusing it" >&2
  url; exit 0
fi
if port_taken; then
  echo "postgres.sh: something not started from $DIR already listens on 127.0.0.1:$PORT; stop it or choose another PORT" >&2
  exit 1
fi

mkdir -p "$DIR"
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$DIR"
  if ! runuser -u postgres -- test -w "$DIR"; then
    echo "postgres.sh: the postgres user cannot write to $DIR: a folder above it is not searchable by" \
         "others (mktemp -d makes 0700 folders); chmod o+x the parents, or choose a DIR under /tmp" >&2
    exit 1
  fi
fi

# Creates the cluster if DIR has none, starts it, and makes the Dagster role and database. On
# failure it sets $why to the step that failed and returns 1.
start_once() {
  if [ ! -f "$DATA/PG_VERSION" ]; then
    as_owner mkdir -p "$SOCKET"
    as_owner "$BIN/initdb" -D "$DATA" -U postgres -E UTF8 --locale=C.UTF-8 --auth-local=trust \
      --auth-host=scram-sha-256 >"$DIR/initdb.log" 2>&1 || { why="initdb (its output: $DIR/initdb.log)"; return 1; }
  fi
  as_owner mkdir -p "$SOCKET"
  # listen on loopback only; the socket lives in DIR, so no system folder (/var/run/postgresql) is needed
  as_owner "$BIN/pg_ctl" start -D "$DATA" -l "$LOG" -w -t "$WAIT" \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -c unix_socket_directories=$SOCKET -c unix_socket_permissions=0700" \
    >/dev/null 2>&1 || { why="pg_ctl start"; return 1; }
  wait_ready || { why="waiting for the server to accept connections on 127.0.0.1:$PORT ($WAIT s)"; return 1; }
  superuser_sql <<'EOF' >/dev/null 2>"$DIR/setup.log" || { why="creating the $DB_USER role and database (psql's output: $DIR/setup.log)"; return 1; }
SELECT format('CREATE ROLE %I LOGIN CREATEDB PASSWORD %L', :'user', :'password')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user') \gexec
SELECT format('ALTER ROLE %I PASSWORD %L', :'user', :'password') \gexec
SELECT format('CREATE DATABASE %I OWNER %I', :'user', :'user')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'user') \gexec
EOF
}

existing=0; [ -f "$DATA/PG_VERSION" ] && existing=1
why=""
for attempt in $(seq 1 "$ATTEMPTS"); do
  why=""
  if start_once; then
    echo "postgres.sh: PostgreSQL $(cat "$DATA/PG_VERSION") ready on 127.0.0.1:$PORT (attempt $attempt of $ATTEMPTS; pid $(postmaster_pid); data $DATA)" >&2
    url; exit 0
  fi
  echo "postgres.sh: attempt $attempt of $ATTEMPTS failed at: $why; the last lines of its logs:" >&2
  for log in "$DIR/initdb.log" "$LOG" "$DIR/setup.log"; do
    [ -s "$log" ] && tail -n 12 "$log" >&2
  done
  stop_server
  if [ "$existing" = 1 ]; then
    echo "postgres.sh: $DATA held a cluster before this start, so it is not wiped; fix the cause above" \
         "(or remove $DATA to start from an empty cluster)" >&2
    exit 1
  fi
  if port_taken; then
    echo "postgres.sh: something not started here listens on 127.0.0.1:$PORT; not retrying over it" >&2
    exit 1
  fi
  rm -rf "$DATA" "$SOCKET" "$LOG" "$DIR/initdb.log" "$DIR/setup.log"
done
echo "postgres.sh: could not start PostgreSQL in $ATTEMPTS attempts (the last failed at: $why)" >&2
exit 1
