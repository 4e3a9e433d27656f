#!/usr/bin/env bash
# Installs what is missing, starts a private PostgreSQL for the tests, builds, and runs every test:
# the swift-testing suites (unit, vectors, PostgreSQL and HTTP integration) and the CLI vector check
# that feeds every shared vector to the real `latchkey inspect` binary, and the browser suite
# (Tests/Browser/run.sh: the web app in headless Chromium with a virtual authenticator).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
eval "$(bash deploy/install-deps.sh)"

# A throwaway cluster for tests: its own folder and port, durability off for speed.
export LATCHKEY_DATA_DIR="${LATCHKEY_TEST_DATA_DIR:-$REPO/data/test-postgres}"
# Port: LATCHKEY_TEST_PG_PORT, else the first from 54330 that is free or already ours.
port="${LATCHKEY_TEST_PG_PORT:-54330}"
if [[ -z "${LATCHKEY_TEST_PG_PORT:-}" ]]; then
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && [[ ! -S "$LATCHKEY_DATA_DIR/socket/.s.PGSQL.$port" ]]; do
    port=$((port + 1))
  done
fi
export LATCHKEY_PG_PORT="$port"
export LATCHKEY_PG_FAST=1
url="$(bash deploy/dev-postgres.sh | tail -n 1)"
export DATABASE_URL="${url%/*}/latchkey_test"
echo "test database: $DATABASE_URL"

mkdir -p data
swift build --build-tests
set +e
swift test --skip-build 2>&1 | tee data/swift-test.log
status=${PIPESTATUS[0]}
set -e

swift build --product latchkey
python3 Tests/CLI/inspect-vectors.py "$(swift build --show-bin-path)/latchkey" || status=1

# The committed association files against the declared apps, and a live server's well-known URLs.
LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey" DATABASE_URL="$url" bash deploy/ci-wellknown.sh || status=1

# The web app at `/` in real headless Chromium with a WebAuthn virtual authenticator: installs
# chromium, chromium-driver and Selenium when missing; screenshots in data/screenshots/.
LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey" LATCHKEY_BROWSER_DATABASE_URL="$url" \
  bash Tests/Browser/run.sh || status=1
exit $status
