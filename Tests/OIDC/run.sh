#!/usr/bin/env bash
# The OpenID Provider against real client libraries (SPEC "OpenID Provider"): Authlib (PyPI) runs
# the code flow, refresh, userinfo and logout, and the negative tests, against a real `latchkey
# serve` on the test cluster (a fresh database latchkey_oidc).
#
# Everything goes through an https front: deploy/nginx/latchkey.conf under nginx with a test CA
# (Tests/OIDC/tls-front.sh), so idpyoidc gets the https issuer it insists on.
# Installs what is missing (python3-venv, nginx, openssl; Authlib, idpyoidc and requests from PyPI into a venv under
# data/), starts the server in development mode on a free loopback port, runs Tests/OIDC/test_oidc.py.
# Environment: LATCHKEY_BIN (a built latchkey), LATCHKEY_OIDC_DATABASE_URL (a cluster URL; default
# the test cluster of scripts/dev-postgres.sh --test). The server's log: data/oidc/server.log.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
log() { printf 'oidc-tests: %s\n' "$*" >&2; }

eval "$(bash scripts/install-deps.sh python3-venv nginx openssl curl)"
VENV="$REPO/data/oidc-venv"
if ! "$VENV/bin/python" -c 'import authlib, idpyoidc, requests, cryptography, flask' 2>/dev/null; then
  log "installing authlib, idpyoidc, requests and flask (docs/oidc.md's example) into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check 'authlib>=1.3,<2' 'idpyoidc>=5,<6' 'requests>=2.28,<3' 'flask>=2.2,<4' >&2
fi

url="${LATCHKEY_OIDC_DATABASE_URL:-$(bash scripts/dev-postgres.sh --test | tail -n 1)}"
cluster="${url%/*}"
psql -v ON_ERROR_STOP=1 -q "$cluster/postgres" -c "DROP DATABASE IF EXISTS latchkey_oidc WITH (FORCE)" -c "CREATE DATABASE latchkey_oidc" >&2
export DATABASE_URL="$cluster/latchkey_oidc"

if [[ -z "${LATCHKEY_BIN:-}" ]]; then
  swift build --product latchkey >&2
  LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey"
fi
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"
tls_port="$(free_port)"
mkdir -p data/oidc
server_log="$REPO/data/oidc/server.log"
admin_key="lk_admin_$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
# Every client talks to the issuer through the https front (deploy/nginx/latchkey.conf, a test CA).
issuer="https://localhost:$tls_port"
export LATCHKEY_DEV=1 LATCHKEY_RP_ID=localhost LATCHKEY_ORIGINS="$issuer" LATCHKEY_ISSUER="$issuer" LATCHKEY_TRUST_PROXY=1
# Email sign-in, its mail written as .eml files (development mode without SMTP): the CIBA client's
# device-key session is an email session (Tests/OIDC/test_ciba.py reads the codes there).
export LATCHKEY_EMAIL_SIGN_IN=1 LATCHKEY_MAIL_DIR="$REPO/data/oidc/mail"
rm -rf "$REPO/data/oidc/mail" && mkdir -p "$REPO/data/oidc/mail"
export LATCHKEY_KEY_ENCRYPTION_KEY="${LATCHKEY_KEY_ENCRYPTION_KEY:-bGF0Y2hrZXktdGVzdC1rZWstMzItYnl0ZXMtLS0tLS0=}"
# Migrate first, so the test's `latchkey clients add` and the server agree on the schema.
"$LATCHKEY_BIN" migrate >&2
log "serving on http://localhost:$port (log: $server_log)"
LATCHKEY_LISTEN="127.0.0.1:$port" LATCHKEY_ADMIN_KEY="$admin_key" LATCHKEY_WEB_DIR="$REPO/web" "$LATCHKEY_BIN" serve >"$server_log" 2>&1 &
server_pid=$!
front=()
stop() {
  kill "$server_pid" "${front[@]}" 2>/dev/null || true
  wait "$server_pid" "${front[@]}" 2>/dev/null || true
}
trap stop EXIT
rm -rf "$REPO/data/oidc/tls"
mapfile -t started < <(bash Tests/OIDC/tls-front.sh "$REPO/data/oidc/tls" "$tls_port" "$port")
front=("${started[0]}")
ca="${started[1]}"
for _ in $(seq 1 240); do
  curl -fsS --cacert "$ca" "$issuer/readyz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { log "the server exited; see $server_log"; tail -n 20 "$server_log" >&2; exit 1; }
  sleep 0.25
done
set +e
export LATCHKEY_URL="$issuer" LATCHKEY_ADMIN_URL="http://127.0.0.1:$port" LATCHKEY_BIN LATCHKEY_TEST_ADMIN_KEY="$admin_key" \
  REQUESTS_CA_BUNDLE="$ca" PYTHONPATH="$REPO/Tests/OIDC"
timeout 300 "$VENV/bin/python" Tests/OIDC/test_oidc.py
status=$?
# idpyoidc checks the discovery document as the standard says (an https issuer, RS256 listed).
timeout 180 "$VENV/bin/python" Tests/OIDC/test_idpyoidc.py || status=1
# A CIBA client written from CIBA Core 1.0 (poll and ping) with a device-key approval.
timeout 180 "$VENV/bin/python" Tests/OIDC/test_ciba.py || status=1
set -e
exit $status
