#!/usr/bin/env bash
# Installs what is missing, starts the private development PostgreSQL (kept under data/postgres
# between runs; DATABASE_URL overrides it), builds Latchkey and serves the demo on
# http://localhost:8080 with rpId `localhost` in development mode.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
eval "$(bash deploy/install-deps.sh)"
if [[ -z "${DATABASE_URL:-}" ]]; then
  # The private cluster's port: LATCHKEY_PG_PORT, else the first from 54329 that is free or already ours.
  export LATCHKEY_DATA_DIR="${LATCHKEY_DATA_DIR:-$REPO/data/postgres}"
  if [[ -z "${LATCHKEY_PG_PORT:-}" ]]; then
    port=54329
    while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ ! -S "$LATCHKEY_DATA_DIR/socket/.s.PGSQL.$port" ]]; do
      port=$((port + 1))
    done
    export LATCHKEY_PG_PORT="$port"
  fi
  url="$(bash deploy/dev-postgres.sh | tail -n 1)"   # fails the script (set -e, pipefail) if PostgreSQL cannot start
  export DATABASE_URL="$url"
fi
swift build -c release --product latchkey
export LATCHKEY_DEV="${LATCHKEY_DEV:-1}"
export LATCHKEY_RP_ID="${LATCHKEY_RP_ID:-localhost}"
export LATCHKEY_LISTEN="${LATCHKEY_LISTEN:-127.0.0.1:8080}"
exec "$(swift build -c release --show-bin-path)/latchkey" serve
