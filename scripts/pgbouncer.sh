#!/usr/bin/env bash
# A private PgBouncer in transaction pooling mode in front of the throwaway test cluster
# (scripts/dev-postgres.sh --test), for running suites the way a pooled production deployment
# talks to PostgreSQL.
#
# Usage: scripts/pgbouncer.sh [--stop | --status | -h | --help]
#   (no argument)  install Debian's pgbouncer when missing, start the test cluster when it is not
#                  running, write the configuration, start PgBouncer (or restart it when the
#                  configuration changed), and print its client URL as the last line of stdout
#                  (database `latchkey`; any database of the cluster works, e.g. `latchkey_test`).
#   --stop         stop PgBouncer (the test cluster keeps running; dev-postgres.sh --test --stop).
#   --status       exit 0 when PgBouncer is running, 3 when it is not.
# Environment:
#   LATCHKEY_PGBOUNCER_DIR   folder for its configuration, socket, log and pid file
#                            (default: <repo>/data/pgbouncer)
#   LATCHKEY_PGBOUNCER_PORT  TCP port on 127.0.0.1 (default: the first from 6433 that is free or
#                            already this PgBouncer's socket)
#   and what scripts/dev-postgres.sh --test reads (LATCHKEY_TEST_DATA_DIR, LATCHKEY_TEST_PG_PORT).
# pool_mode = transaction, max_client_conn = 400, 40 server connections per database and user.
# Auth is `trust` for the users in its userlist (postgres), on loopback and its own socket only,
# like the test cluster behind it: a local test pooler, never a server.
# PgBouncer refuses to run as root: as root it runs as LATCHKEY_PG_USER (default postgres).
# Progress goes to stderr; stdout carries only the URL.
set -euo pipefail

log() { printf 'pgbouncer: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

REPO="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
ACTION=start
for arg in "$@"; do
  case "$arg" in
    --stop) ACTION=stop ;;
    --status) ACTION=status ;;
    -h|--help) sed -n '2,/^[^#]/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) log "unknown argument: $arg (try --help)"; exit 64 ;;
  esac
done

DIR="${LATCHKEY_PGBOUNCER_DIR:-$REPO/data/pgbouncer}"
PORT="${LATCHKEY_PGBOUNCER_PORT:-}"
[[ -z "$PORT" || "$PORT" =~ ^[0-9]+$ ]] || die "LATCHKEY_PGBOUNCER_PORT must be a number, got '$PORT'"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
CONF="$DIR/pgbouncer.ini"
PIDFILE="$DIR/pgbouncer.pid"
SOCKET_DIR="$DIR/socket"
LOGFILE="$DIR/pgbouncer.log"

# --- who runs it: pgbouncer refuses root --------------------------------------------------------
if [[ $EUID -eq 0 ]]; then
  RUN_USER="${LATCHKEY_PG_USER:-postgres}"
  as_pg() { (cd / && runuser -u "$RUN_USER" -- "$@"); }
else
  as_pg() { "$@"; }
fi

is_running() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE" 2>/dev/null)" 2>/dev/null; }

stop() {
  is_running || { rm -f "$PIDFILE"; return 0; }
  local pid
  pid="$(cat "$PIDFILE")"
  kill -TERM "$pid"   # immediate shutdown (SIGINT would wait for clients to disconnect)
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && die "pgbouncer (pid $pid) did not stop"
  rm -f "$PIDFILE"
}

case "$ACTION" in
  status)
    if is_running; then log "running (pid $(cat "$PIDFILE"), $CONF)"; exit 0; fi
    log "not running ($DIR)"; exit 3 ;;
  stop)
    if is_running; then log "stopping pid $(cat "$PIDFILE")"; stop; else log "not running"; fi
    exit 0 ;;
esac

# --- 1. packages and the cluster behind it ------------------------------------------------------
# install-deps.sh's stdout is an `export PATH` line for swift, not needed here.
bash "$REPO/scripts/install-deps.sh" pgbouncer >/dev/null
PGBOUNCER="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
[[ -x "$PGBOUNCER" ]] || die "pgbouncer not found after installing it"
cluster_url="$(bash "$REPO/scripts/dev-postgres.sh" --test | tail -n 1)"
[[ "$cluster_url" =~ @127\.0\.0\.1:([0-9]+)/ ]] || die "unexpected test cluster URL: $cluster_url"
PG_PORT="${BASH_REMATCH[1]}"

if [[ $EUID -eq 0 ]]; then
  id "$RUN_USER" >/dev/null 2>&1 || die "OS user '$RUN_USER' does not exist (set LATCHKEY_PG_USER)"
  chown "$RUN_USER:" "$DIR"
  chmod 700 "$DIR"
  as_pg test -x "$DIR" || die "user '$RUN_USER' cannot reach $DIR (a parent folder is not traversable)"
fi
as_pg mkdir -p "$SOCKET_DIR"

# One run at a time (fd 9 is closed for the daemon, or it would hold the lock).
exec 9>"$DIR/.lock"
command -v flock >/dev/null && flock 9

# shellcheck source=ports.sh
source "$REPO/scripts/ports.sh"
[[ -n "$PORT" ]] || PORT="$(first_free_port 6433 "$SOCKET_DIR")"

# --- 2. configuration (rewritten every run; a change restarts it) -------------------------------
conf="; written by scripts/pgbouncer.sh; edit the script or its environment instead
[databases]
; every database of the test cluster, under its own name
* = host=127.0.0.1 port=$PG_PORT

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $PORT
unix_socket_dir = $SOCKET_DIR
pool_mode = transaction
auth_type = trust
auth_file = $DIR/userlist.txt
admin_users = postgres
max_client_conn = 400
default_pool_size = 40
logfile = $LOGFILE
pidfile = $PIDFILE"
old="$(cat "$CONF" 2>/dev/null || true)"
if [[ "$old" != "$conf" ]]; then
  if is_running; then log "configuration changed; restarting"; stop; fi
  printf '%s\n' "$conf" | as_pg sh -c "cat > '$CONF'"
fi
# trust still needs the user names listed.
printf '"postgres" ""\n' | as_pg sh -c "cat > '$DIR/userlist.txt'"

# --- 3. start -----------------------------------------------------------------------------------
if ! is_running; then
  rm -f "$PIDFILE"
  log "starting on 127.0.0.1:$PORT in front of 127.0.0.1:$PG_PORT (log: $LOGFILE)"
  as_pg touch "$LOGFILE"
  if ! as_pg "$PGBOUNCER" -d -q "$CONF" 9>&-; then
    tail -n 20 "$LOGFILE" >&2 || true
    die "could not start pgbouncer (port $PORT in use?)"
  fi
fi
ready=0
for _ in $(seq 1 100); do
  if pg_isready -q -h 127.0.0.1 -p "$PORT" -d latchkey -U postgres; then ready=1; break; fi
  sleep 0.1
done
if ((!ready)); then
  tail -n 20 "$LOGFILE" >&2 || true
  die "pgbouncer is not answering on 127.0.0.1:$PORT"
fi

# --- 4. the URL ---------------------------------------------------------------------------------
log "test database through pgbouncer: postgresql://postgres@127.0.0.1:$PORT/latchkey_test"
echo "postgresql://postgres@127.0.0.1:$PORT/latchkey"
