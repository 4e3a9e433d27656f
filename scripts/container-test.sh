#!/usr/bin/env bash
# The container image built and started, not only configured, with no registry: Debian's podman
# (runc; scripts/podman-setup.sh), the base from debootstrap (scripts/container-base.sh, cached under
# data/container), deploy/container/Containerfile built from the .deb of scripts/package.sh (dist/;
# built here when missing), started with host networking against a database of its own on the test
# PostgreSQL and the key-encryption key from a podman secret; checked at /readyz, by a passkey sign-up
# and sign-in (Tests/Deploy/signup.py) and that it runs as a non-root user. Then compose.yaml's
# latchkey service, started by podman-compose with an override file under data/: the service on the
# project's bridge reaches the test PostgreSQL through a relay on the bridge's gateway address, and
# postgres and mail, whose images are in a registry, are idle base-image containers; it answers
# /readyz. Everything it started is stopped and removed. Timings in
# data/container/timings.txt. Needs root.
#   DATABASE_URL   any database URL on the test cluster (its server part is used)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
eval "$(bash scripts/install-deps.sh python3-cryptography)"
eval "$(bash scripts/podman-setup.sh)"
: "${DATABASE_URL:?DATABASE_URL: the test PostgreSQL}"
source scripts/ports.sh
work="$REPO/data/container"
mkdir -p "$work"
timings="$work/timings.txt"
: > "$timings"
status=0
step() { printf '%-34s %5ss\n' "$1" "$2" | tee -a "$timings"; }

server="${DATABASE_URL%/*}"
tag="ci$$"
image="localhost/latchkey:$tag"
name="latchkey-$tag"
project="latchkey-$tag"
secret="latchkey_kek_$tag"
dbname="latchkey_container_$$"
compose_db="latchkey_compose_$$"
override="$work/compose.override.yaml"
relay_pid=""
cleanup() {
  podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
  [[ -f "$override" ]] && podman-compose -p "$project" -f compose.yaml -f "$override" down -v -t 5 >/dev/null 2>&1 || true
  podman network rm -f "${project}_default" >/dev/null 2>&1 || true
  podman volume rm -f "${project}_postgres" >/dev/null 2>&1 || true
  [[ -n "$relay_pid" ]] && kill "$relay_pid" 2>/dev/null || true
  podman secret rm "$secret" >/dev/null 2>&1 || true
  podman rmi -f "$image" "${project}_latchkey" >/dev/null 2>&1 || true
  rm -f "$override" "$work/kek.b64"
  for db in "$dbname" "$compose_db"; do psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
trap 'exit 143' TERM INT   # so that `timeout` still runs the clean-up

t0=$SECONDS
base="$(bash scripts/container-base.sh | tail -n 1)"
step "base image (debootstrap, import)" $((SECONDS - t0))

deb="$(ls dist/latchkey_*.deb 2>/dev/null | head -n 1 || true)"
if [[ -z "$deb" ]]; then
  t0=$SECONDS
  deb="$(bash scripts/package.sh | tail -n 1)"
  step "package.sh (build the .deb)" $((SECONDS - t0))
fi
echo "container: $deb on $base"

t0=$SECONDS
podman build --format docker --build-arg "BASE_IMAGE=$base" -f deploy/container/Containerfile -t "$image" . >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log"; echo "FAIL podman build"; exit 1; }
step "podman build" $((SECONDS - t0))

# The key-encryption key as a podman secret, mounted at /run/secrets/latchkey_kek.
openssl rand -base64 32 > "$work/kek.b64"
chmod 0644 "$work/kek.b64"  # compose bind-mounts it for the image's non-root user; a throwaway key
podman secret rm "$secret" >/dev/null 2>&1 || true
podman secret create "$secret" "$work/kek.b64" >/dev/null
psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $dbname" -c "CREATE DATABASE $dbname"
port="$(first_free_port 18480 /nonexistent)"
rp_id=container.latchkey.test
t0=$SECONDS
# shellcheck disable=SC2086
podman run -d --name "$name" --network host --no-healthcheck $LATCHKEY_ULIMITS \
  --secret "$secret,target=latchkey_kek,mode=0444" \
  -e LATCHKEY_KEY_ENCRYPTION_KEY=@/run/secrets/latchkey_kek \
  -e DATABASE_URL="$server/$dbname" -e LATCHKEY_RP_ID="$rp_id" -e LATCHKEY_ORIGINS="https://$rp_id" \
  -e LATCHKEY_LISTEN="127.0.0.1:$port" "$image" >/dev/null
ready=0
for _ in $(seq 1 600); do
  [[ "$(podman inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" == true ]] || break
  if curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null; then ready=1; break; fi
  sleep 0.1
done
if ((ready)); then
  step "podman run until /readyz" $((SECONDS - t0))
  echo "ok   the image answers /readyz"
else
  echo "FAIL the container did not become ready:"; podman logs "$name" 2>&1 | tail -n 30; exit 1
fi
python3 Tests/Deploy/signup.py "http://127.0.0.1:$port" "$rp_id" "https://$rp_id" || status=1
for page in / /admin/ /latchkey.js /authorize; do
  code="$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port$page")"
  [[ "$code" == 200 ]] && echo "ok   GET $page 200" || { echo "FAIL GET $page answered $code"; status=1; }
done
# Non-root: the server process's user on the host (no user namespace) and inside.
pid="$(podman inspect -f '{{.State.Pid}}' "$name")"
uid="$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")"
inside="$(podman exec "$name" id -un)"
if [[ "$uid" != 0 && "$inside" == latchkey ]]; then
  echo "ok   the container's server runs as uid $uid ($inside), not root"
else
  echo "FAIL the container's server runs as uid $uid ($inside)"; status=1
fi
t0=$SECONDS
podman stop -t 10 "$name" >/dev/null
[[ "$(podman inspect -f '{{.State.ExitCode}}' "$name")" == 0 ]] || { echo "FAIL serve did not exit 0 on SIGTERM"; status=1; }
podman rm "$name" >/dev/null
step "stop" $((SECONDS - t0))

# compose.yaml's latchkey service, by podman-compose, on the test PostgreSQL. podman-compose 1.0.3
# cannot put a service on the host network (it adds the project network too), so the service stays on
# the project's bridge and reaches the test PostgreSQL (listening on 127.0.0.1) through a relay on the
# bridge's gateway address only. postgres and mail, whose images are in a registry, run the base
# image idle instead; /readyz is asked inside the latchkey container (latchkey healthcheck).
psql -q "$server/postgres" -c "DROP DATABASE IF EXISTS $compose_db" -c "CREATE DATABASE $compose_db"
hostport="${server##*@}"; hostport="${hostport%%/*}"
network="${project}_default"
podman network create --label "io.podman.compose.project=$project" "$network" >/dev/null
gateway="$(podman network inspect -f '{{range .Subnets}}{{.Gateway}}{{end}}' "$network")"
relay_port="$(first_free_port $((port + 1)) /nonexistent)"
cat > "$override" <<YAML
# written by scripts/container-test.sh: compose.yaml's latchkey service on the test PostgreSQL
services:
  postgres:
    image: $base
    command: ["sleep", "infinity"]
  mail:
    image: $base
    command: ["sleep", "infinity"]
  latchkey:
    environment:
      DATABASE_URL: postgresql://postgres@host.containers.internal:$relay_port/$compose_db
secrets:
  latchkey_kek:
    file: $work/kek.b64
YAML
t0=$SECONDS
# shellcheck disable=SC2086
if podman-compose -p "$project" -f compose.yaml -f "$override" --podman-run-args "$LATCHKEY_ULIMITS" \
     --podman-build-args "--format docker" up -d >"$work/compose.log" 2>&1; then
  # The bridge has its gateway address once a container is on it; serve waits for the database.
  python3 Tests/Deploy/tcp_relay.py "$gateway" "$relay_port" "${hostport%:*}" "${hostport##*:}" >"$work/relay.log" 2>&1 &
  relay_pid=$!
  ready=0
  for _ in $(seq 1 300); do
    if podman exec "${project}_latchkey_1" /usr/bin/latchkey healthcheck --url http://127.0.0.1:8080/readyz >/dev/null 2>&1; then
      ready=1; break
    fi
    sleep 0.2
  done
  if ((ready)); then
    step "podman-compose up until /readyz" $((SECONDS - t0))
    echo "ok   compose.yaml (podman-compose) answers /readyz"
  else
    echo "FAIL compose.yaml's latchkey did not become ready:"; tail -n 30 "$work/compose.log"
    podman logs "${project}_latchkey_1" 2>&1 | tail -n 30; status=1
  fi
else
  echo "FAIL podman-compose up:"; tail -n 30 "$work/compose.log"; status=1
fi
echo "timings:"; cat "$timings"
exit $status
