# Sourced by scripts/dev-postgres.sh and scripts/pgbouncer.sh (not run on its own).
#
# first_free_port BASE SOCKET_DIR: prints the first port from BASE that a server could bind on
# 127.0.0.1 now, or whose PostgreSQL-protocol socket (SOCKET_DIR/.s.PGSQL.<port>) is already this
# caller's own server, so a running server keeps its port between runs.
first_free_port() {
  local port=$1 socket_dir=$2
  until [[ -S "$socket_dir/.s.PGSQL.$port" ]] || port_is_bindable "$port"; do
    port=$((port + 1))
  done
  echo "$port"
}

# port_is_bindable PORT: a listener could bind 127.0.0.1:PORT now, as PostgreSQL does (SO_REUSEADDR).
# "Nothing listens there" is not enough: in the ephemeral range an outgoing connection may hold the
# port as its local end, and the bind then fails. Without python3, the listening check alone.
port_is_bindable() {
  if command -v python3 >/dev/null; then
    python3 -c '
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
' "$1"
  else
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}
