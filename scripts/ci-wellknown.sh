#!/usr/bin/env bash
# Sample CI job for the association files (issue: native-app association):
#   1. declares this deployment's apps (the one source of truth) in a fresh database,
#   2. builds the files from them and fails if the committed wellknown/ differs (drift),
#   3. checks wellknown/ against the allowlist in the database,
#   4. starts a server that builds its files from the database and checks its live URLs,
#   5. declares another app and pins wellknown/ (LATCHKEY_WELLKNOWN_DIR): serve must warn and
#      `wellknown check --url … --database` must fail on the app the pinned files lack.
# WELLKNOWN_UPDATE=1 rewrites wellknown/ from the declarations instead of failing on drift.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
eval "$(bash scripts/install-deps.sh)"

# The PostgreSQL server of DATABASE_URL when set, else the private test cluster.
if [[ -n "${DATABASE_URL:-}" ]]; then
  url="$DATABASE_URL"
else
  url="$(bash scripts/dev-postgres.sh --test | tail -n 1)"
fi
psql -q "${url%/*}/postgres" -c "DROP DATABASE IF EXISTS latchkey_wellknown_ci" -c "CREATE DATABASE latchkey_wellknown_ci"
export DATABASE_URL="${url%/*}/latchkey_wellknown_ci"
export LATCHKEY_RP_ID=localhost LATCHKEY_DEV=1

# LATCHKEY_BIN: an already built binary (skips the build).
if [[ -z "${LATCHKEY_BIN:-}" ]]; then
  swift build --product latchkey
  LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey"
fi
bin="$LATCHKEY_BIN"
work="$(mktemp -d)"
server=
trap 'if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; fi; rm -rf "$work"' EXIT

# 1. The declarations (example values: replace with your Team ID, bundle id, package and keys).
"$bin" apps add ios --team-id ABCDE12345 --bundle-id com.example.latchkey
"$bin" apps add android --package com.example.latchkey \
    --fingerprint 14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5

# 2. Built files vs the committed ones.
"$bin" wellknown build --out "$work/built" --rp-id localhost
if [[ "${WELLKNOWN_UPDATE:-0}" == "1" ]]; then
  mkdir -p wellknown && cp "$work/built/"* wellknown/
fi
# The three files (wellknown/README.md says they are examples).
for f in apple-app-site-association assetlinks.json webauthn; do
  diff "wellknown/$f" "$work/built/$f" || { echo "wellknown/$f drifted from the declared apps (WELLKNOWN_UPDATE=1 rewrites it)"; exit 1; }
done

# 3. The committed files against the allowlist.
"$bin" wellknown check --dir wellknown --rp-id localhost --database

# 4. A live server (files built from the database: nothing pinned) checked over HTTP.
start() {  # start <log> [VAR=value …]: serve on a free port, wait for /readyz
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  local log="$1"; shift
  env "$@" LATCHKEY_LISTEN="127.0.0.1:$port" "$bin" serve >"$log" 2>&1 &
  server=$!
  # /readyz, not /healthz: until the start-up steps (the apps read, the files built) are done, every
  # other route answers 503, and a busy machine can take longer than the first /healthz answer.
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    kill -0 "$server" 2>/dev/null || break   # exited: no point waiting
    sleep 0.2
  done
  echo "wellknown: the server did not come up on 127.0.0.1:$port; its log:"; cat "$log"; exit 1
}
stop() { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; server=; }
unset LATCHKEY_WELLKNOWN_DIR
start "$work/serve.log"
"$bin" wellknown check --url "http://localhost:$port" --rp-id localhost --database
stop

# 5. A deployment's own app, with the example files pinned: served as pinned, warned, and refused by the check.
"$bin" apps add ios --team-id ZZZZZ99999 --bundle-id com.example.yours
start "$work/pinned.log" LATCHKEY_WELLKNOWN_DIR="$REPO/wellknown"
# The warning comes once the start-up steps have read the apps, which may be after /healthz answers.
for _ in $(seq 50); do grep -q "disagree with the declared apps" "$work/pinned.log" && break; sleep 0.2; done
grep -q "disagree with the declared apps" "$work/pinned.log" || { echo "wellknown: serve did not warn about the pinned files"; cat "$work/pinned.log"; exit 1; }
grep -q "ZZZZZ99999.com.example.yours" "$work/pinned.log" || { echo "wellknown: the warning does not name the missing app"; cat "$work/pinned.log"; exit 1; }
if "$bin" wellknown check --url "http://localhost:$port" --rp-id localhost --database >"$work/check.txt" 2>&1; then
  echo "wellknown: check --database passed although the pinned files lack a declared app"; cat "$work/check.txt"; exit 1
fi
grep -q "declared app ZZZZZ99999.com.example.yours" "$work/check.txt" || { echo "wellknown: check did not name the missing app"; cat "$work/check.txt"; exit 1; }
stop
# Unpinned again, the same server serves the new app.
start "$work/serve2.log"
curl -fsS "http://127.0.0.1:$port/.well-known/apple-app-site-association" | grep -q ZZZZZ99999.com.example.yours \
  || { echo "wellknown: the built AASA lacks the declared app"; exit 1; }
"$bin" wellknown check --url "http://localhost:$port" --rp-id localhost --database
stop
echo "wellknown: ok"
