#!/usr/bin/env bash
# An https front for the OpenID tests: deploy/nginx/latchkey.conf itself (rendered for a loopback
# port and a throwaway CA this script makes), so idpyoidc sees an https issuer as the standard asks
# instead of being relaxed. Usage: tls-front.sh <dir> <tls port> <upstream port>; starts nginx in the
# foreground's background and prints its pid, then the CA file, one per line.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$1" tls_port="$2" upstream="$3"
mkdir -p "$dir/tmp"
# The test CA and a certificate for localhost / 127.0.0.1 signed by it.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=Latchkey OIDC test CA" \
  -keyout "$dir/ca.key" -out "$dir/ca.pem" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$dir/ext.cnf"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 2 -extfile "$dir/ext.cnf" \
  -out "$dir/server.pem" 2>/dev/null
# deploy/nginx/latchkey.conf, with this test's port, host, certificate and upstream; the port-80
# redirect server is left out (only the TLS server is tested here).
sed -e "s#server 127.0.0.1:8080;#server 127.0.0.1:$upstream;#" \
    -e "s#listen 443 ssl http2;#listen 127.0.0.1:$tls_port ssl;#" -e '/listen \[::\]:443/d' \
    -e "s#server_name example.com;#server_name localhost;#" \
    -e "s#/etc/letsencrypt/live/example.com/fullchain.pem#$dir/server.pem#" \
    -e "s#/etc/letsencrypt/live/example.com/privkey.pem#$dir/server.key#" \
    "$REPO/deploy/nginx/latchkey.conf" | awk '/^server \{/ { n++ } n < 2 || !/./ { print } n >= 2 { exit }' >"$dir/latchkey.conf"
cat >"$dir/nginx.conf" <<CONF
$( [[ $EUID -eq 0 ]] && echo "user root;" )
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    include $dir/latchkey.conf;
}
CONF
nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >"$dir/nginx.out" 2>&1 &
echo $!
echo "$dir/ca.pem"
