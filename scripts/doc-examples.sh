#!/usr/bin/env bash
# Runs every `sh run` example in README.md and docs/ against a fresh dev-mode server
# (Tests/Docs/run_examples.py says which blocks run and why the others do not). The server: the
# test cluster (or DATABASE_URL's), a scratch database latchkey_docs, a random admin key, mail as
# .eml files. LATCHKEY_BIN: an already built binary. Well under a minute.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
eval "$(bash scripts/install-deps.sh)"
# Every relative link in the Markdown names a file of the repository, and nothing names a contract file
# that is not in it (Tests/Docs/check_links.py, static, a second). A failure here fails the stage
# after the examples still ran.
links_status=0
python3 Tests/Docs/check_links.py || links_status=1
# The docs' $ADMIN_KEY examples name where scripts/run.sh's development admin key comes from.
timeout 60 python3 Tests/Docs/check_dev_admin_key.py || links_status=1
if [[ -n "${DATABASE_URL:-}" ]]; then url="$DATABASE_URL"; else url="$(bash scripts/dev-postgres.sh --test | tail -n 1)"; fi
psql -q "${url%/*}/postgres" -c "DROP DATABASE IF EXISTS latchkey_docs WITH (FORCE)" -c "CREATE DATABASE latchkey_docs"
if [[ -z "${LATCHKEY_BIN:-}" ]]; then
  swift build --product latchkey
  LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey"
fi
work="$(mktemp -d)"
server=
trap 'if [[ -n "$server" ]]; then kill "$server" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export DATABASE_URL="${url%/*}/latchkey_docs" LATCHKEY_DEV=1 LATCHKEY_RP_ID=localhost LATCHKEY_LISTEN="127.0.0.1:$port"
export LATCHKEY_KEY_ENCRYPTION_KEY="$(openssl rand -base64 32)" ADMIN_KEY="$(openssl rand -hex 24)"
export LATCHKEY_ADMIN_KEY="$ADMIN_KEY" LATCHKEY_MAIL_DIR="$work/mail" LATCHKEY_EMAIL_SIGN_IN=1
export LATCHKEY_URL="http://localhost:$port" PATH="$(dirname "$LATCHKEY_BIN"):$PATH"
"$LATCHKEY_BIN" serve >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do
  curl -fsS "$LATCHKEY_URL/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.2
done
python3 Tests/Docs/run_examples.py
exit "$links_status"
