#!/usr/bin/env bash
# A real SMTP server for the tests (Debian's python3-aiosmtpd with Tests/SMTP/smtp_handler.py),
# listening on 127.0.0.1; mail it accepts is stored as files under data/smtp/mail/<recipient>/.
#   bash scripts/smtp.sh          start (or keep the running one); prints host:port on the last line
#   bash scripts/smtp.sh --stop   stop it
#   bash scripts/smtp.sh --dir    print the mail folder
# LATCHKEY_SMTP_DIR overrides data/smtp; LATCHKEY_SMTP_TEST_PORT the first port tried (2525).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${LATCHKEY_SMTP_DIR:-$REPO/data/smtp}"
PIDFILE="$DIR/pid"
PORTFILE="$DIR/port"
PY=/usr/bin/python3  # Debian's python, where python3-aiosmtpd installs
[[ -x "$PY" ]] || PY=python3
log() { printf 'smtp: %s\n' "$*" >&2; }

running() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

case "${1:-}" in
  --stop)
    if running; then kill "$(cat "$PIDFILE")"; log "stopped"; fi
    rm -f "$PIDFILE" "$PORTFILE"
    exit 0 ;;
  --dir) echo "$DIR/mail"; exit 0 ;;
esac

if running && [[ -f "$PORTFILE" ]]; then
  echo "127.0.0.1:$(cat "$PORTFILE")"
  exit 0
fi
if ! "$PY" -c 'import aiosmtpd' 2>/dev/null; then
  log "installing python3-aiosmtpd"
  SUDO=(); [[ $EUID -eq 0 ]] || SUDO=(sudo)
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends python3-aiosmtpd >&2
fi
mkdir -p "$DIR/mail"
port="${LATCHKEY_SMTP_TEST_PORT:-2525}"
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
PYTHONPATH="$REPO/Tests/SMTP" nohup "$PY" -m aiosmtpd -n -l "127.0.0.1:$port" \
  -c smtp_handler.FileHandler "$DIR/mail" >"$DIR/server.log" 2>&1 &
echo $! >"$PIDFILE"
for _ in $(seq 1 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "$port" >"$PORTFILE"
    log "listening on 127.0.0.1:$port, mail in $DIR/mail"
    echo "127.0.0.1:$port"
    exit 0
  fi
  running || break
  sleep 0.1
done
log "the server did not start; see $DIR/server.log"
cat "$DIR/server.log" >&2 || true
exit 1
