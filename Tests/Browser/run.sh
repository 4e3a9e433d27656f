#!/usr/bin/env bash
# Browser tests of the web app at `/`: real headless Chromium with a WebAuthn virtual authenticator
# (CTAP2, internal transport, resident keys, user verification), driven by Selenium.
#
# Installs what is missing (Debian's chromium and chromium-driver; Selenium from PyPI into a venv
# under data/), starts the throwaway test PostgreSQL (same cluster as scripts/test.sh), builds and
# starts `latchkey serve` on a free port in development mode, runs Tests/Browser/test_web.py, and
# Tests/Browser/test_client.py (the client module /latchkey.js and the pages' languages: a German
# browser's pages and mail, every page at phone and desktop widths in each language), then
# Tests/Browser/test_admin.py drives the admin console at /admin/ (Tests/Browser/test_admin_listener.py
# the console on its own LATCHKEY_ADMIN_LISTEN listener), Tests/Browser/test_pages.py checks what
# people read at phone width in each language, and Tests/Browser/test_firefox.py
# runs sign-up / sign-in / revoke and the module in Firefox ESR over Marionette (and
# Tests/Browser/test_admin_quorum_firefox.py the console's quorum story there), and
# Tests/Browser/test_oidc.py the OpenID redirect dance through /authorize, Tests/Browser/test_ciba.py the
# CIBA section (approve with a passkey, deny), and Tests/Browser/test_vault.py / test_vault_firefox.py the
# vault's story with PRF; then stops the server.
# Screenshots go to data/screenshots/ (LATCHKEY_SCREENSHOTS overrides), the server's log to
# data/browser/server.log. Mail goes to the real SMTP server of scripts/smtp.sh,
# where the suite reads the codes.
#
# Environment: LATCHKEY_BIN (a built latchkey binary; default: `swift build --product latchkey`),
# LATCHKEY_BROWSER_DATABASE_URL (use this cluster, in a fresh database latchkey_browser; scripts/test.sh passes its own), else
# LATCHKEY_TEST_DATA_DIR / LATCHKEY_TEST_PG_PORT (the test cluster, as in scripts/test.sh).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
log() { printf 'browser-tests: %s\n' "$*" >&2; }

# --- 1. Packages: Chromium and its driver (Debian's, matching versions), python3-venv for Selenium
# Firefox ESR (driven over Marionette by Tests/Browser/marionette.py: Debian ships no geckodriver) and
# Node.js (the client module's unit tests, node --test) as well.
# fonts-wqy-microhei: a CJK font (1.6 MB), so the Chinese pages' screenshots show characters, not boxes.
eval "$(bash scripts/install-deps.sh chromium chromium-driver python3-venv firefox-esr nodejs fonts-wqy-microhei)"

# --- 2. Selenium in a private venv (Debian's python3 refuses pip installs system-wide) --------
VENV="$REPO/data/browser-venv"
if ! "$VENV/bin/python" -c 'import selenium' 2>/dev/null; then
  log "installing selenium into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check 'selenium>=4.11,<5' >&2
fi

# --- 3. The test database: LATCHKEY_BROWSER_DATABASE_URL, else the test cluster's `latchkey`
# database (the Swift suites use `latchkey_test`).
if [[ -z "${LATCHKEY_BROWSER_DATABASE_URL:-}" ]]; then
  LATCHKEY_BROWSER_DATABASE_URL="$(bash scripts/dev-postgres.sh --test | tail -n 1)"
fi
# A fresh database of its own on that cluster each run: the suite's story starts from nothing, and
# nothing an earlier run left (accounts, or signing keys sealed under another key-encryption key)
# can decide its outcome.
cluster="${LATCHKEY_BROWSER_DATABASE_URL%/*}"
psql -v ON_ERROR_STOP=1 -q "$cluster/postgres" -c "DROP DATABASE IF EXISTS latchkey_browser WITH (FORCE)" \
  -c "CREATE DATABASE latchkey_browser" >&2
LATCHKEY_BROWSER_DATABASE_URL="$cluster/latchkey_browser"

# --- 4. The server, on a free loopback port ---------------------------------------------------
if [[ -z "${LATCHKEY_BIN:-}" ]]; then
  swift build --product latchkey >&2
  LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey"
fi
# The real SMTP server the app's mail goes to (scripts/smtp.sh: aiosmtpd); the suite reads codes there.
smtp="$(bash scripts/smtp.sh | tail -n 1)"
smtp_dir="$(bash scripts/smtp.sh --dir)"
smtp_ca="$(bash scripts/smtp.sh --ca)"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p data/browser
server_log="$REPO/data/browser/server.log"
log "serving on http://localhost:$port (log: $server_log)"
# No LATCHKEY_WELLKNOWN_DIR (the default): the association files are built from the declared apps,
# so the admin console's preview shows what the declarations make.
DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" LATCHKEY_DEV=1 LATCHKEY_RP_ID=localhost \
  LATCHKEY_LISTEN="127.0.0.1:$port" LATCHKEY_ORIGINS="http://localhost:$port" \
  LATCHKEY_WEB_DIR="$REPO/web" LATCHKEY_SMTP_URL="smtp://$smtp" LATCHKEY_SMTP_CA="$smtp_ca" LATCHKEY_SMTP_FROM="latchkey@localhost.test" \
  LATCHKEY_EMAIL_SIGN_IN=1 LATCHKEY_MAIL_RETRY_BASE=0.5 "$LATCHKEY_BIN" serve >"$server_log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true' EXIT

# --- 5. The suite -----------------------------------------------------------------------------
set +e
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" LATCHKEY_TEST_SMTP_DIR="$smtp_dir" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  "$VENV/bin/python" Tests/Browser/test_web.py
status=$?
# The client module and the languages (issue 22): /latchkey.js, the module's story, a German browser's
# pages and mail, every page at phone and desktop widths in each language (data/screenshots/i18n/).
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" LATCHKEY_TEST_SMTP_DIR="$smtp_dir" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  "$VENV/bin/python" Tests/Browser/test_client.py || status=1
# The web app's session bound to a DPoP key (RFC 9449): the key non-extractable in IndexedDB, the
# token's cnf.jkt its thumbprint, copied tokens refused from Python without it.
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 300 "$VENV/bin/python" Tests/Browser/test_dpop.py || status=1
# The admin console at /admin/ (its own browser); `latchkey admins add` mints the enrolment link.
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" LATCHKEY_BIN="$LATCHKEY_BIN" \
  LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  "$VENV/bin/python" Tests/Browser/test_admin.py || status=1
# What people read, at phone width in en/de/pl/zh-Hans: recovery codes that cannot overlap (their
# screenshots in docs/screenshots/), good news not in red, a held passkey's refusal, the pages' own
# words for a server's refusal, the console's tab strip in view, the audit log's rows and paging,
# the primary button's contrast in light and dark mode.
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" LATCHKEY_BIN="$LATCHKEY_BIN" \
  LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 600 "$VENV/bin/python" Tests/Browser/test_pages.py || status=1
# The console on its own listener (LATCHKEY_ADMIN_LISTEN; issue 33): a server of its own on two more
# ports, the console whole there, its enrolment link, and the checks made before the passkey prompt.
LATCHKEY_BIN="$LATCHKEY_BIN" LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 300 "$VENV/bin/python" Tests/Browser/test_admin_listener.py || status=1
# The console under LATCHKEY_ADMIN_QUORUM=2 (issue 35): a server of its own, two admins in two
# browsers; one asks for a change, the other approves it with a passkey, the first makes it.
LATCHKEY_BIN="$LATCHKEY_BIN" LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 300 "$VENV/bin/python" Tests/Browser/test_admin_quorum.py || status=1
# The OpenID redirect dance (SPEC "OpenID Provider"): a tiny relying party served by the test signs
# in through /oauth2/authorize and the /authorize page, and a payment needs the step-up.
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" LATCHKEY_BIN="$LATCHKEY_BIN" \
  LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  "$VENV/bin/python" Tests/Browser/test_oidc.py || status=1
# The vault the server cannot read (SPEC "Portability"): the app's vault story in Chromium with a
# virtual authenticator that evaluates PRF, then every table and every request body the browser sent
# searched for the PRF outputs, the data key and the vault recovery key (docs/screenshots/vault-*.png).
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" \
  LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 300 "$VENV/bin/python" Tests/Browser/test_vault.py || status=1
# The vault's creation refused at each of its passkey prompts: nothing stranded, Create finishes it.
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" \
  LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 300 "$VENV/bin/python" Tests/Browser/test_vault_cancel.py || status=1
# The same story in Firefox ESR over Marionette (its virtual authenticator's PRF checked first; the
# requests recorded in the page).
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" \
  LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 300 "$VENV/bin/python" Tests/Browser/test_vault_firefox.py || status=1
# The web app's CIBA section: a bank registered with --ciba-approver passkey asks on the backchannel,
# the person approves with a passkey step-up (the bank's poll gets the tokens) or denies.
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SERVER_PID="$server_pid" LATCHKEY_BIN="$LATCHKEY_BIN" \
  LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" SE_OFFLINE=true \
  timeout 300 "$VENV/bin/python" Tests/Browser/test_ciba.py || status=1
# The client module (web/latchkey.js) and the app's sign-up / sign-in / revoke in Firefox ESR, with
# Marionette's virtual authenticator (Tests/Browser/marionette.py: Debian ships no geckodriver).
LATCHKEY_URL="http://localhost:$port" LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" \
  timeout 300 python3 Tests/Browser/test_firefox.py || status=1
# The quorum story of test_admin_quorum.py in Firefox ESR (issue 35): a server of its own, two Firefox
# instances (a profile, Marionette port and virtual authenticator each) run Tests/Browser/quorum_story.py.
LATCHKEY_BIN="$LATCHKEY_BIN" LATCHKEY_DATABASE_URL="$LATCHKEY_BROWSER_DATABASE_URL" \
  LATCHKEY_SCREENSHOTS="${LATCHKEY_SCREENSHOTS:-$REPO/data/screenshots}" \
  timeout 300 python3 Tests/Browser/test_admin_quorum_firefox.py || status=1
set -e
exit $status
