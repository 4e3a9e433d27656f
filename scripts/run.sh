#!/usr/bin/env bash
# Installs what is missing, starts the private development PostgreSQL (kept under data/postgres
# between runs; DATABASE_URL overrides it), builds Latchkey and serves the demo on
# http://localhost:8080 with rpId `localhost` in development mode.
#
# In development mode without LATCHKEY_ADMIN_KEY it sets a development admin key (48 random hex
# characters, kept in data/dev-admin-key between runs) and prints it, so the docs' `$ADMIN_KEY`
# examples run against this server: `export ADMIN_KEY="$(bash scripts/run.sh --admin-key)"` prints
# the key (making it if needed) and exits. It is this machine's own, never an example value.
# LATCHKEY_DEV takes the server's boolean spellings (1/true/yes/on, in any case, are on).
# LATCHKEY_BIN: an already built latchkey binary to serve with, instead of the release build.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
dev_admin_key() {
  local file="$REPO/data/dev-admin-key"
  if [[ ! -s "$file" ]]; then
    mkdir -p "$REPO/data"
    (umask 077 && openssl rand -hex 24 >"$file")
  fi
  cat "$file"
}
# A boolean setting's value is on as the server reads it (Configuration.boolean): 1, true, yes or on,
# in any case, around spaces.
is_on() {
  local v="${1,,}"
  v="${v//[[:space:]]/}"
  [[ "$v" == 1 || "$v" == true || "$v" == yes || "$v" == on ]]
}
if [[ "${1:-}" == "--admin-key" ]]; then
  dev_admin_key
  exit 0
fi
eval "$(bash scripts/install-deps.sh)"
if [[ -z "${DATABASE_URL:-}" ]]; then
  # The private dev cluster (data/postgres; its port: LATCHKEY_PG_PORT, else the first free from 54329).
  url="$(bash scripts/dev-postgres.sh | tail -n 1)"   # fails the script (set -e, pipefail) if PostgreSQL cannot start
  export DATABASE_URL="$url"
fi
if [[ -z "${LATCHKEY_BIN:-}" ]]; then
  swift build -c release --product latchkey
  LATCHKEY_BIN="$(swift build -c release --show-bin-path)/latchkey"
fi
export LATCHKEY_DEV="${LATCHKEY_DEV:-1}"
export LATCHKEY_RP_ID="${LATCHKEY_RP_ID:-localhost}"
export LATCHKEY_LISTEN="${LATCHKEY_LISTEN:-127.0.0.1:8080}"
if [[ -z "${LATCHKEY_SMTP_URL:-}" ]] && is_on "$LATCHKEY_DEV"; then
  export LATCHKEY_MAIL_DIR="${LATCHKEY_MAIL_DIR:-$REPO/data/mail}"
  echo "run: no LATCHKEY_SMTP_URL: mail (codes, recovery notices) is written as .eml files to $LATCHKEY_MAIL_DIR" >&2
fi
if [[ -z "${LATCHKEY_ADMIN_KEY:-}" ]] && is_on "$LATCHKEY_DEV"; then
  export LATCHKEY_ADMIN_KEY="$(dev_admin_key)"
  echo "run: development admin key (docs' \$ADMIN_KEY): export ADMIN_KEY=$LATCHKEY_ADMIN_KEY" >&2
fi
exec "$LATCHKEY_BIN" serve
