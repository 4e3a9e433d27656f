#!/usr/bin/env bash
# A real SMTP server for the tests (Debian's python3-aiosmtpd with Tests/SMTP/smtp_handler.py) on
# 127.0.0.1, offering STARTTLS with a certificate from a throwaway CA (data/smtp/tls/ca.pem), and a
# second listener speaking SMTPS (TLS from the first byte). Mail either accepts is stored as files
# under data/smtp/mail/<recipient>/.
#   bash scripts/smtp.sh          start (or keep the running one); prints host:port (STARTTLS) last
#   bash scripts/smtp.sh --smtps  prints host:port of the SMTPS listener
#   bash scripts/smtp.sh --ca     prints the CA file the servers' certificate chains to
#   bash scripts/smtp.sh --dir    prints the mail folder
#   bash scripts/smtp.sh --stop   stops both
# LATCHKEY_SMTP_DIR overrides data/smtp; LATCHKEY_SMTP_TEST_PORT the first port tried (2525).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${LATCHKEY_SMTP_DIR:-$REPO/data/smtp}"
PY=/usr/bin/python3  # Debian's python, where python3-aiosmtpd installs
[[ -x "$PY" ]] || PY=python3
log() { printf 'smtp: %s\n' "$*" >&2; }

running() { [[ -f "$DIR/$1.pid" ]] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }
stop() {
  for name in starttls smtps; do
    if running "$name"; then kill "$(cat "$DIR/$name.pid")"; log "stopped $name"; fi
    rm -f "$DIR/$name.pid" "$DIR/$name.port"
  done
}

case "${1:-}" in
  --stop) stop; exit 0 ;;
  --dir) echo "$DIR/mail"; exit 0 ;;
  --ca) echo "$DIR/tls/ca.pem"; exit 0 ;;
  --smtps) [[ -f "$DIR/smtps.port" ]] || { log "not running"; exit 1; }; echo "127.0.0.1:$(cat "$DIR/smtps.port")"; exit 0 ;;
  "") ;;
  *) log "usage: smtp.sh [--stop|--dir|--ca|--smtps]"; exit 64 ;;
esac

if running starttls && running smtps && [[ -f "$DIR/starttls.port" ]]; then
  echo "127.0.0.1:$(cat "$DIR/starttls.port")"
  exit 0
fi
stop
if ! "$PY" -c 'import aiosmtpd' 2>/dev/null; then
  log "installing python3-aiosmtpd"
  SUDO=(); [[ $EUID -eq 0 ]] || SUDO=(sudo)
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends python3-aiosmtpd >&2
fi
mkdir -p "$DIR/mail" "$DIR/tls"

# A throwaway CA and a certificate for 127.0.0.1 / localhost (P-256), made once.
tls="$DIR/tls"
if [[ ! -s "$tls/server.pem" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 -subj "/CN=Latchkey test SMTP CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$tls/server.key" -out "$tls/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n' >"$tls/ext.cnf"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial -days 3650 \
    -extfile "$tls/ext.cnf" -out "$tls/server.pem" 2>/dev/null
fi

free_port() {
  local port=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
  echo "$port"
}

start() {  # name port handler-extra aiosmtpd-options…
  local name=$1 port=$2 extra=$3; shift 3
  # The daemon keeps none of this script's descriptors beyond 0–2: whoever ran the script may be
  # waiting for one of them to close (Foundation's Process learns that its child has exited when a
  # socket the child inherited reaches end-of-file, so a test that started this script hung in
  # waitUntilExit for as long as the daemon ran).
  # shellcheck disable=SC2086 # $extra is empty or one word
  (
    for fd in /proc/self/fd/*; do fd=${fd##*/}; if ((fd > 2)); then eval "exec $fd>&-"; fi; done 2>/dev/null
    PYTHONPATH="$REPO/Tests/SMTP" exec nohup "$PY" -m aiosmtpd -n -l "127.0.0.1:$port" "$@" \
      -c smtp_handler.FileHandler "$DIR/mail" $extra >"$DIR/$name.log" 2>&1 </dev/null
  ) &
  echo $! >"$DIR/$name.pid"
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port" >"$DIR/$name.port"; return 0; fi
    running "$name" || break
    sleep 0.1
  done
  log "the $name server did not start; see $DIR/$name.log"
  cat "$DIR/$name.log" >&2 || true
  return 1
}

port="$(free_port "${LATCHKEY_SMTP_TEST_PORT:-2525}")"
start starttls "$port" "" --tlscert "$tls/server.pem" --tlskey "$tls/server.key" --no-requiretls
smtps="$(free_port $((port + 1)))"
start smtps "$smtps" smtps --smtpscert "$tls/server.pem" --smtpskey "$tls/server.key"
log "STARTTLS on 127.0.0.1:$port, SMTPS on 127.0.0.1:$smtps, CA $tls/ca.pem, mail in $DIR/mail"
echo "127.0.0.1:$port"
