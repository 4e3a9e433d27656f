#!/usr/bin/env bash
# Browser tests of the web app at `/`: real headless Chromium with a WebAuthn virtual authenticator
# (CTAP2, internal transport, resident keys, user verification), driven by Selenium.
#
# Installs what is missing (Debian's chromium and chromium-driver; Selenium from PyPI into a venv
# under data/), starts the throwaway test PostgreSQL (same cluster as deploy/test.sh), builds and
# starts `latchkey serve` on a free port in development mode, runs Tests/Browser/test_web.py, and
# stops the server. Screenshots go to data/screenshots/ (LATCHKEY_SCREENSHOTS overrides), the
# server's log to data/browser/server.log.
#
# Environment: LATCHKEY_BIN (a built latchkey binary; default: `swift build --product latchkey`),
# LATCHKEY_BROWSER_DATABASE_URL (use this database; deploy/test.sh passes its cluster's), else
# LATCHKEY_TEST_DATA_DIR / LATCHKEY_TEST_PG_PORT (the test cluster, as in deploy/test.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
log() { printf 'browser-tests: %s\n' "$*" >&2; }
SUDO=()
[[ $EUID -eq 0 ]] || SUDO=(sudo)

# --- 1. Chromium and its driver (Debian's, matching versions) --------------------------------
missing=()
for p in chromium chromium-driver; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || { "${SUDO[@]}" apt-get update -qq >&2 && "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
fi

# --- 2. Selenium in a private venv (Debian's python3 refuses pip installs system-wide) --------
VENV="$REPO/data/browser-venv"
if ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
  log "installing selenium into $VENV"
  rm -rf "$VENV"
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    "${SUDO[@]}" apt-get install -y -qq --no-install-recommends python3-venv >&2 \
      || { "${SUDO[@]}" apt-get update -qq >&2 && "${SUDO[@]}" apt-get install -y -qq --no-install-recommends python3-venv >&2; }
    rm -rf "$VENV"
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install -q --disable-pip-version-check 'selenium>=4.11,<5' >&2
fi

# --- 3. The test database ---------------------------------------------------------------------
if [[ -z "${LATCHKEY_BROWSER_DATABASE_URL:-}" ]]; then
  data_dir="${LATCHKEY_TEST_DATA_DIR:-$REPO/data/test-postgres}"
  # As deploy/test.sh: LATCHKEY_TEST_PG_PORT, else the first from 54330 that is free or already ours.
  pg_port="${LATCHKEY_TEST_PG_PORT:-54330}"
  if [[ -z "${LATCHKEY_TEST_PG_PORT:-}" ]]; then
    while (exec 3<>"/dev/tcp/127.0.0.1/$pg_port") 2>/dev/null && [[ ! -S "$data_dir/socket/.s.PGSQL.$pg_port" ]]; do
      pg_port=$((pg_port + 1))
    done
  fi
  url="$(LATCHKEY_DATA_DIR="$data_dir" LATCHKEY_PG_PORT="$pg_port" LATCHKEY_PG_FAST=1 \
         bash deploy/dev-postgres.sh | tail -n 1)"
  # The cluster's `latchkey` database: the Swift suites use `latchkey_test`.
  LATCHKEY_BROWSER_DATABASE_URL="$url"
fi

# --- 4. The server, on a free loopback port ---------------------------------------------------
if [[ -z "${LATCHKEY_BIN:-}" ]]; then
  command -v swift >/dev/null || eval "$(bash deploy/install-deps.sh)"
  swift build --product latchkey >&2
  LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey"
fi
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p data/browser
server_log="$REPO/data/browser/server.log"
log "serving on http://localhost:$port (log: $server_log)"
DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" LATCHKEY_DEV=1 LATCHKEY_RP_ID=localhost \
  LATCHKEY_LISTEN="127.0.0.1:$port" LATCHKEY_ORIGINS="http://localhost:$port" \
  LATCHKEY_WEB_DIR="$REPO/web" "$LATCHKEY_BIN" serve >"$server_log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT

# --- 5. The suite -----------------------------------------------------------------------------
set +e
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  "$VENV/bin/python" Tests/Browser/test_web.py
status=$?
set -e
exit $status
