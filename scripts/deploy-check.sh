#!/usr/bin/env bash
# The deploy files start (issue 25, point 4): `latchkey config check` with the environment of the
# Kubernetes manifest, the systemd unit and compose.yaml (Tests/Deploy/check_deploy.py, PyYAML:
# python3-yaml), and `nginx -t` on deploy/nginx/latchkey.conf. nginx is taken from PATH, else its
# Debian package is downloaded and unpacked under data/nginx (no daemon is installed or started);
# and `systemd-analyze verify` on the unit where systemd is installed.
# LATCHKEY_BIN: an already built binary. About ten seconds.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
eval "$(bash scripts/install-deps.sh python3-yaml)"
if [[ -z "${LATCHKEY_BIN:-}" ]]; then
  swift build --product latchkey
  LATCHKEY_BIN="$(swift build --show-bin-path)/latchkey"
fi
status=0
python3 Tests/Deploy/check_deploy.py "$LATCHKEY_BIN" || status=1

# nginx -t: the site file inside a minimal nginx.conf, certificate paths pointed at a throwaway
# self-signed certificate (the file's own paths are the operator's Let's Encrypt ones).
nginx_bin="$(command -v nginx || true)"
if [[ -z "$nginx_bin" ]]; then
  mkdir -p data/nginx
  if [[ ! -x data/nginx/root/usr/sbin/nginx ]]; then
    (cd data/nginx && rm -f nginx_*.deb && apt-get download nginx >&2 && dpkg-deb -x nginx_*.deb root)
  fi
  nginx_bin="$REPO/data/nginx/root/usr/sbin/nginx"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=example.com \
  -keyout "$work/privkey.pem" -out "$work/fullchain.pem" 2>/dev/null
sed -e "s#/etc/letsencrypt/live/example.com/#$work/#" deploy/nginx/latchkey.conf > "$work/latchkey.conf"
cat > "$work/nginx.conf" <<CONF
pid $work/nginx.pid;
error_log stderr;
events {}
http {
    access_log off;
    client_body_temp_path $work; proxy_temp_path $work; fastcgi_temp_path $work; uwsgi_temp_path $work; scgi_temp_path $work;
    include $work/latchkey.conf;
}
CONF
if "$nginx_bin" -t -q -p "$work" -c "$work/nginx.conf"; then
  echo "ok   nginx -t: deploy/nginx/latchkey.conf"
else
  echo "FAIL nginx -t: deploy/nginx/latchkey.conf"; status=1
fi
# Every proxied location sends Host and X-Forwarded-For (LATCHKEY_TRUST_PROXY=1 reads the latter).
python3 - deploy/nginx/latchkey.conf <<'PY' || status=1
import re, sys
text = open(sys.argv[1]).read()
server = text[text.index("listen 443"):]
server = server[:server.index("\nserver {")] if "\nserver {" in server else server
# Server-level headers (before the first location block), inherited by every location that sets none of its own.
head = re.split(r"^\s*location\s", server, maxsplit=1, flags=re.M)[0]
headers = set(re.findall(r"^\s*proxy_set_header\s+(\S+)", head, re.M))
own = re.findall(r"location\s+\S+\s*\{[^}]*proxy_set_header", server)
ok = {"Host", "X-Forwarded-For"} <= headers and "location /admin/" in server and not own
print(("ok   " if ok else "FAIL ") + "nginx: Host and X-Forwarded-For set for every location, /admin/ included")
sys.exit(0 if ok else 1)
PY
# systemd-analyze verify on the unit (the binary path pointed at the built one), where systemd is
# installed; a container without it skips this line and says so.
if command -v systemd-analyze >/dev/null 2>&1; then
  sed -e "s#/usr/bin/latchkey#$LATCHKEY_BIN#" deploy/systemd/latchkey.service > "$work/latchkey.service"
  if out="$(cd "$work" && systemd-analyze verify --man=no ./latchkey.service 2>&1)" && [[ -z "$out" ]]; then
    echo "ok   systemd-analyze verify: deploy/systemd/latchkey.service"
  else
    echo "FAIL systemd-analyze verify: deploy/systemd/latchkey.service"; echo "$out"; status=1
  fi
else
  echo "skip systemd-analyze verify: systemd is not installed here"
fi
exit $status
