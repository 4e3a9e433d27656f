#!/usr/bin/env bash
# The .deb installed on this machine as on a Debian 12 VM: builds it (scripts/package.sh), then runs
# docs/operator.md's "Install on a VM" blocks as written there (```sh norun: vm-install, vm-start,
# vm-check, vm-remove), with this run's values for the variables the guide has the operator set: the package
# against a database of its own on the test PostgreSQL (DATABASE_URL's cluster), served as the
# `latchkey` user from / (no web/ there: the pages come from /usr/share/latchkey/web), checked at
# /readyz, by a passkey sign-up and sign-in (Tests/Deploy/signup.py) and `latchkey config check` from
# the installed paths; then stopped and purged, and the KEK, the credential copy, the user and the
# database removed. Timings in data/package/timings.txt. Needs root (dpkg, runuser).
#   DATABASE_URL         any database URL on the test cluster (its server part is used)
#   LATCHKEY_RELEASE_BIN an already built release binary to package (else package.sh builds it)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
eval "$(bash scripts/install-deps.sh python3-cryptography)"
[[ $EUID -eq 0 ]] || { echo "package-test: needs root (dpkg -i, runuser)" >&2; exit 1; }
: "${DATABASE_URL:?DATABASE_URL: the test PostgreSQL}"
source scripts/ports.sh
mkdir -p data/package
timings="$REPO/data/package/timings.txt"
: > "$timings"
status=0
step() { printf '%-34s %5ss\n' "$1" "$2" | tee -a "$timings"; }

# The guide's blocks, by tag (```sh norun: vm-install, …: the docs' example runner leaves them to this script).
block() {
  python3 - "$1" <<'PY'
import re, sys
text = open("docs/operator.md").read()
blocks = re.findall(r"^```sh norun: " + re.escape(sys.argv[1]) + r",[^\n]*\n(.*?)^```$", text, re.M | re.S)
if len(blocks) != 1:
    sys.exit(f"docs/operator.md: expected one ```sh norun: {sys.argv[1]}, … block, found {len(blocks)}")
print(blocks[0], end="")
PY
}
for tag in vm-install vm-start vm-check vm-remove; do block "$tag" >/dev/null || exit 1; done

t0=$SECONDS
deb="$(bash scripts/package.sh | tail -n 1)"
step "package.sh (build the .deb)" $((SECONDS - t0))
dpkg-deb --info "$deb" | sed -n '/Package:/,/Description:/p'
contents="$(dpkg-deb --contents "$deb" | awk '{ print $1, $2, $6 }' \
  | grep -E ' \./(usr/bin/latchkey|etc/latchkey/latchkey\.env|lib/systemd/system/latchkey\.service|usr/share/latchkey/web/index\.html)$' || true)"
echo "$contents"
[[ "$(wc -l <<<"$contents")" == 4 ]] || { echo "FAIL the .deb lacks the binary, the env file, the unit or the web app"; status=1; }

# This run's values for what the guide has the operator set.
server="${DATABASE_URL%/*}"
dbname="latchkey_package_$$"
export deb db="$server/$dbname" rp_id=vm.latchkey.test
port="$(first_free_port 18380 /nonexistent)"
export listen="127.0.0.1:$port"
log="$REPO/data/package/serve.log"
server_pid=""
# The processes the started block made (bash, runuser, latchkey), by their parent links.
descendants() { local c; for c in $(ps -o pid= --ppid "$1" 2>/dev/null || true); do echo "$c"; descendants "$c"; done; }
# SIGTERM to the server (runuser and the shell then exit with it); SIGKILL to all after 10 s.
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  local pids
  pids="$(descendants "$server_pid")"
  for p in $pids; do [[ "$(ps -o comm= -p "$p")" == latchkey ]] && kill -TERM "$p"; done 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$server_pid" 2>/dev/null; then
    echo "FAIL serve did not stop on SIGTERM"; status=1
    kill -KILL $pids "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
cleanup() {
  stop_server
  dpkg-query -W -f='${Status}' latchkey 2>/dev/null | grep -q installed && dpkg --purge latchkey >/dev/null 2>&1 || true
  rm -rf /etc/latchkey/kek /run/credentials/latchkey.service
  rmdir /etc/latchkey 2>/dev/null || true
  getent passwd latchkey >/dev/null && userdel latchkey 2>/dev/null || true
  getent group latchkey >/dev/null && groupdel latchkey 2>/dev/null || true
  psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $dbname WITH (FORCE)" >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 143' TERM INT   # so that `timeout` still runs the clean-up
cleanup  # a run that was killed may have left the package installed
psql -q "$server/postgres" -c "CREATE DATABASE $dbname"

t0=$SECONDS
if bash -euo pipefail -c "$(block vm-install)"; then
  step "dpkg -i and configure" $((SECONDS - t0))
else
  echo "FAIL the vm-install block"; exit 1
fi
id latchkey
mode="$(stat -c '%a %U:%G %n' /etc/latchkey/latchkey.env)"
[[ "$mode" == "640 root:latchkey /etc/latchkey/latchkey.env" ]] && echo "ok   $mode" \
  || { echo "FAIL /etc/latchkey/latchkey.env is $mode, not 0640 root:latchkey"; status=1; }
if ldd /usr/bin/latchkey | grep -E 'libswift|/opt/swift|not found'; then echo "FAIL the installed binary needs the toolchain"; status=1; fi

t0=$SECONDS
bash -euo pipefail -c "$(block vm-start)" >"$log" 2>&1 &
server_pid=$!
ready=0
for _ in $(seq 1 600); do
  kill -0 "$server_pid" 2>/dev/null || break
  if curl -fsS -o /dev/null "http://$listen/readyz" 2>/dev/null; then ready=1; break; fi
  sleep 0.1
done
if ((ready)); then
  step "start until /readyz" $((SECONDS - t0))
else
  echo "FAIL the installed server did not become ready"; cat "$log"; exit 1
fi
serve_user="$(for p in $(descendants "$server_pid"); do ps -o comm=,user= -p "$p"; done | awk '$1 == "latchkey" { print $2 }')"
[[ "$serve_user" == latchkey ]] && echo "ok   serve runs as latchkey" || { echo "FAIL serve runs as '${serve_user:-?}', not latchkey"; status=1; }

# The pages from /usr/share/latchkey/web although it runs from /.
for page in / /admin/ /latchkey.js /authorize; do
  code="$(curl -s -o /dev/null -w '%{http_code}' "http://$listen$page")"
  [[ "$code" == 200 ]] && echo "ok   GET $page 200" || { echo "FAIL GET $page answered $code"; status=1; }
done
python3 Tests/Deploy/signup.py "http://$listen" "$rp_id" "https://$rp_id" || status=1
if out="$(bash -euo pipefail -c "$(block vm-check)" 2>&1)"; then
  grep -q "ok: latchkey serve would start" <<<"$out" && echo "ok   vm-check: /readyz and config check from the installed paths" \
    || { echo "FAIL config check did not say serve would start:"; echo "$out"; status=1; }
  grep -q "/usr/share/latchkey/web" <<<"$out" || { echo "FAIL config check does not show /usr/share/latchkey/web"; echo "$out"; status=1; }
else
  echo "FAIL the vm-check block:"; echo "$out"; status=1
fi

t0=$SECONDS
stop_server
if bash -euo pipefail -c "$(block vm-remove)"; then
  [[ ! -e /usr/bin/latchkey && ! -e /etc/latchkey/latchkey.env && ! -e /usr/share/latchkey ]] \
    && echo "ok   vm-remove: purged" || { echo "FAIL files left after the purge"; status=1; }
else
  echo "FAIL the vm-remove block"; status=1
fi
step "stop and purge" $((SECONDS - t0))
echo "timings:"; cat "$timings"
exit $status
