#!/usr/bin/env bash
# Latchkey dev/test PostgreSQL: a private cluster with its own port and socket directory.
#
# Usage: scripts/dev-postgres.sh [--test] [--stop | --status | -h | --help]
#   (no argument)  install what is missing (postgresql, libpq-dev), initialise the cluster on first
#                  use, start it if it is not running, create databases `latchkey` and
#                  `latchkey_test`, and print the DATABASE_URL as the last line of stdout.
#   --test         the throwaway test cluster instead of the dev one: data folder <repo>/data/test-postgres
#                  (LATCHKEY_TEST_DATA_DIR, else LATCHKEY_DATA_DIR), port LATCHKEY_TEST_PG_PORT, else
#                  LATCHKEY_PG_PORT, else the first from 54330; always LATCHKEY_PG_FAST=1.
#   --stop         stop the cluster (kept on disk; the next run starts it again).
#   --status       exit 0 when the cluster is running, 3 when it is not.
# Environment:
#   LATCHKEY_DATA_DIR  data folder (default: <repo>/data/postgres); holds cluster/, socket/, postgres.log
#   LATCHKEY_PG_PORT   TCP port on 127.0.0.1 (default: the first from 54329 that is free or already
#                      this data folder's socket)
#   LATCHKEY_PG_FAST=1 fsync=off, synchronous_commit=off, full_page_writes=off: throwaway test
#                      clusters only (a crash can corrupt the cluster). Default keeps durability.
# Auth is `trust` on the socket and on 127.0.0.1 only: a local development cluster, never a server.
# Progress goes to stderr; stdout carries only the URL.
set -euo pipefail

log() { printf 'dev-postgres: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

REPO="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)"
ACTION=start
TEST=0
for arg in "$@"; do
  case "$arg" in
    --test) TEST=1 ;;
    --stop) ACTION=stop ;;
    --status) ACTION=status ;;
    -h|--help) sed -n '2,/^[^#]/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) log "unknown argument: $arg (try --help)"; exit 64 ;;
  esac
done
if ((TEST)); then
  DATA_DIR="${LATCHKEY_TEST_DATA_DIR:-${LATCHKEY_DATA_DIR:-$REPO/data/test-postgres}}"
  PORT="${LATCHKEY_TEST_PG_PORT:-${LATCHKEY_PG_PORT:-}}"
  BASE_PORT=54330
  FAST=1
else
  DATA_DIR="${LATCHKEY_DATA_DIR:-$REPO/data/postgres}"
  PORT="${LATCHKEY_PG_PORT:-}"
  BASE_PORT=54329
  FAST="${LATCHKEY_PG_FAST:-0}"
fi
[[ -z "$PORT" || "$PORT" =~ ^[0-9]+$ ]] || die "the port (LATCHKEY_TEST_PG_PORT, LATCHKEY_PG_PORT) must be a number, got '$PORT'"

mkdir -p "$DATA_DIR"
DATA_DIR="$(cd "$DATA_DIR" && pwd)"
PGDATA="$DATA_DIR/cluster"
SOCKET_DIR="$DATA_DIR/socket"
LOGFILE="$DATA_DIR/postgres.log"

# --- 1. packages ------------------------------------------------------------------------------
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
find_bindir() {
  local d
  if [[ -n "${PG_BINDIR:-}" ]]; then echo "$PG_BINDIR"; return 0; fi
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  [[ -n "$d" && -x "$d/initdb" ]] && echo "$d"
}
if [[ "$ACTION" == start ]]; then
  missing=()
  if command -v dpkg-query >/dev/null; then
    { pkg_installed postgresql || find_bindir >/dev/null; } || missing+=(postgresql)
    pkg_installed libpq-dev || [[ -f /usr/include/postgresql/libpq-fe.h ]] || missing+=(libpq-dev)
  fi
  if ((${#missing[@]})); then
    SUDO=()
    if [[ $EUID -ne 0 ]]; then
      command -v sudo >/dev/null || die "need root or sudo to install: ${missing[*]}"
      SUDO=(sudo)
    fi
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2 \
      || { "${SUDO[@]}" apt-get update >&2 \
           && "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2; } \
      || die "apt-get install ${missing[*]} failed"
  fi
fi
BINDIR="$(find_bindir)" || die "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin (set PG_BINDIR)"

# --- who runs the server: initdb and postgres refuse root ------------------------------------
if [[ $EUID -eq 0 ]]; then
  RUN_USER="${LATCHKEY_PG_USER:-postgres}"
  id "$RUN_USER" >/dev/null 2>&1 || die "OS user '$RUN_USER' does not exist (set LATCHKEY_PG_USER)"
  as_pg() { (cd / && runuser -u "$RUN_USER" -- "$@"); }
  chown "$RUN_USER:" "$DATA_DIR"
  chmod 700 "$DATA_DIR"
  as_pg test -x "$DATA_DIR" || die "user '$RUN_USER' cannot reach $DATA_DIR (a parent folder is not traversable)"
else
  as_pg() { "$@"; }
fi
PGCTL=("$BINDIR/pg_ctl" -D "$PGDATA")

# One run at a time per data folder (tests may start it from several processes at once).
# fd 9 is closed for pg_ctl start/restart, or the server would inherit the lock and hold it.
exec 9>"$DATA_DIR/.lock"
command -v flock >/dev/null && flock 9

# No port given: the first from the base that nothing listens on, or that this cluster already has.
# shellcheck source=ports.sh
source "$REPO/scripts/ports.sh"
AUTO_PORT=0
[[ -n "$PORT" ]] || { PORT="$(first_free_port "$BASE_PORT" "$SOCKET_DIR")"; AUTO_PORT=1; }

is_running() { [[ -f "$PGDATA/PG_VERSION" ]] && as_pg "${PGCTL[@]}" status >/dev/null 2>&1; }

case "$ACTION" in
  status)
    if is_running; then log "running on 127.0.0.1:$PORT ($PGDATA)"; exit 0; fi
    log "not running ($PGDATA)"; exit 3 ;;
  stop)
    if is_running; then as_pg "${PGCTL[@]}" -m fast -w stop >&2; else log "not running"; fi
    exit 0 ;;
esac

# --- 2. initialise once ------------------------------------------------------------------------
if [[ ! -f "$PGDATA/PG_VERSION" ]]; then
  [[ -e "$PGDATA" ]] && [[ -n "$(ls -A "$PGDATA")" ]] && die "$PGDATA exists but is not a cluster; remove it"
  log "initdb $PGDATA"
  as_pg "$BINDIR/initdb" -D "$PGDATA" -U postgres -E UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=trust --no-instructions >&2
  # Only local connections: the socket and loopback, whatever initdb wrote.
  as_pg sh -c "cat > '$PGDATA/pg_hba.conf'" <<'HBA'
# Latchkey dev cluster: trust, socket and loopback only.
local   all   all                  trust
host    all   all   127.0.0.1/32   trust
host    all   all   ::1/128        trust
HBA
  as_pg sh -c "echo \"include_if_exists = 'latchkey.conf'\" >> '$PGDATA/postgresql.conf'"
fi
as_pg mkdir -p "$SOCKET_DIR"

# Settings are rewritten on every run; a change restarts a running cluster.
# lz4 needs PostgreSQL 15 built with it (Debian's is); other servers take pglz ('on').
pg_major="$("$BINDIR/postgres" --version | sed -E 's/[^0-9]*([0-9]+).*/\1/')"
WAL_COMPRESSION=on
if [[ "$pg_major" =~ ^[0-9]+$ ]] && ((pg_major >= 15)) && ldd "$BINDIR/postgres" 2>/dev/null | grep -q liblz4; then
  WAL_COMPRESSION=lz4
fi
# The dev cluster (the demo, `latchkey bench`) gets a quarter of the memory it may use, at most 2 GB,
# as deploy/ha/patroni.yml asks of a database machine: a million benchmark accounts (1.25 GB) then
# stay in PostgreSQL's own cache. The throwaway test cluster keeps PostgreSQL's 128 MB.
SHARED_BUFFERS_MB=128
if ((!TEST)); then
  memory_kb="$(awk '/^MemTotal:/ {print $2}' /proc/meminfo 2>/dev/null || echo 0)"
  limit="$(cat /sys/fs/cgroup/memory.max 2>/dev/null || echo max)"
  if [[ "$limit" =~ ^[0-9]+$ ]] && ((limit / 1024 < memory_kb)); then memory_kb=$((limit / 1024)); fi
  SHARED_BUFFERS_MB=$((memory_kb / 4 / 1024))
  if ((SHARED_BUFFERS_MB > 2048)); then SHARED_BUFFERS_MB=2048; fi
  if ((SHARED_BUFFERS_MB < 128)); then SHARED_BUFFERS_MB=128; fi
fi
write_settings() {
  local conf old
  conf="# written by scripts/dev-postgres.sh; edit the script or its environment instead
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$SOCKET_DIR'
max_connections = 400
timezone = 'UTC'
log_timezone = 'UTC'
# Full-page images compressed and the buffer pool sized, as deploy/ha/patroni.yml ships them, so
# \`latchkey bench\` here measures a sign-in as a deployment sees it (docs/sizing.md).
wal_compression = $WAL_COMPRESSION
shared_buffers = ${SHARED_BUFFERS_MB}MB"
  if [[ "$FAST" == 1 ]]; then
    conf+="
# LATCHKEY_PG_FAST=1: throwaway cluster, durability off
fsync = off
synchronous_commit = off
full_page_writes = off"
  fi
  old="$(cat "$PGDATA/latchkey.conf" 2>/dev/null || true)"
  changed=0
  if [[ "$old" != "$conf" ]]; then
    printf '%s\n' "$conf" | as_pg sh -c "cat > '$PGDATA/latchkey.conf'"
    changed=1
  fi
}
write_settings

# --- 3. start ----------------------------------------------------------------------------------
if is_running; then
  if ((changed)); then log "settings changed; restarting"; as_pg "${PGCTL[@]}" -m fast -w restart -l "$LOGFILE" >&2 9>&-; fi
else
  as_pg touch "$LOGFILE" 2>/dev/null || true
  for attempt in 1 2 3 4 5; do
    log "starting on 127.0.0.1:$PORT"
    lines_before="$(wc -l < "$LOGFILE" 2>/dev/null || echo 0)"
    as_pg "${PGCTL[@]}" -w -t 60 -l "$LOGFILE" start >&2 9>&- && break
    # A port chosen here can still be taken between the check and the bind (ports from 54329 lie in
    # the kernel's ephemeral range, where any outgoing connection may be given one): take the next.
    if ((AUTO_PORT)) && ((attempt < 5)) && tail -n "+$((lines_before + 1))" "$LOGFILE" | grep -q "Address already in use"; then
      log "port $PORT was taken after all; trying the next free one"
      PORT="$(first_free_port $((PORT + 1)) "$SOCKET_DIR")"
      write_settings
      continue
    fi
    tail -n 20 "$LOGFILE" >&2 || true
    die "could not start the cluster (port $PORT in use?)"
  done
fi

PSQL=("$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCKET_DIR" -p "$PORT" -U postgres -d postgres)
for _ in $(seq 1 60); do
  as_pg "$BINDIR/pg_isready" -q -h "$SOCKET_DIR" -p "$PORT" && break
  sleep 0.5
done

# --- 4. databases ------------------------------------------------------------------------------
for db in latchkey latchkey_test; do
  if [[ "$(as_pg "${PSQL[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]]; then
    log "creating database $db"
    as_pg "${PSQL[@]}" -c "CREATE DATABASE $db" >&2
  fi
done

# --- 5. the URL --------------------------------------------------------------------------------
log "test database: postgresql://postgres@127.0.0.1:$PORT/latchkey_test"
echo "postgresql://postgres@127.0.0.1:$PORT/latchkey"
