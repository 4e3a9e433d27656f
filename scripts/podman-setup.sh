#!/usr/bin/env bash
# Podman as this project's machines need it, for scripts/container-base.sh and
# scripts/container-test.sh: Debian's podman (and podman-compose) with the runc runtime, installed when
# missing. crun refuses these machines' hybrid cgroups (v1 controllers with a v2 mount), so a
# containers.conf of our own (data/container/containers.conf, through CONTAINERS_CONF) selects runc,
# the cgroupfs manager (systemd is not PID 1 here), a file event log, and default ulimits at the
# machine's hard limits (a container asking for more than `ulimit -Hn`/`-Hu` does not start).
# Prints `export CONTAINERS_CONF=…` (callers: eval "$(bash scripts/podman-setup.sh)").
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'podman-setup: %s\n' "$*" >&2; }
missing=()
for p in podman runc podman-compose; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 \
    || { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
fi
nofile="$(ulimit -Hn)"; nproc="$(ulimit -Hu)"
[[ "$nofile" == unlimited ]] && nofile=1048576
[[ "$nproc" == unlimited ]] && nproc=65536
# Below the hard limits, not at them: some hosts refuse a soft limit equal to an unlimited hard one.
nofile=$((nofile < 65536 ? nofile : 65536)); nproc=$((nproc < 32768 ? nproc : 32768))
mkdir -p "$REPO/data/container"
conf="$REPO/data/container/containers.conf"
cat > "$conf" <<CONF
# written by scripts/podman-setup.sh
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
echo "export CONTAINERS_CONF=$conf"
echo "export LATCHKEY_ULIMITS='--ulimit nofile=$nofile:$nofile --ulimit nproc=$nproc:$nproc'"
