# Sourced by scripts/dev-postgres.sh and scripts/pgbouncer.sh (not run on its own).
#
# first_free_port BASE SOCKET_DIR: prints the first port from BASE that nothing listens on at
# 127.0.0.1, or whose PostgreSQL-protocol socket (SOCKET_DIR/.s.PGSQL.<port>) is already this
# caller's own server, so a running server keeps its port between runs.
first_free_port() {
  local port=$1 socket_dir=$2
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ ! -S "$socket_dir/.s.PGSQL.$port" ]]; do
    port=$((port + 1))
  done
  echo "$port"
}
