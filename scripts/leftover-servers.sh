#!/usr/bin/env bash
# Server processes started under this clone that are still running: every process holding a
# listening TCP or Unix socket (ss -lp) whose executable, working folder or command line lies under
# the repository (a PostgreSQL cluster under data/, PgBouncer, the SMTP server, a `latchkey serve`,
# nginx, etcd, …). scripts/test.sh takes a snapshot before it starts anything and checks at its end
# that it left none of its own running.
#   leftover-servers.sh --snapshot FILE   record the ones running now (a developer's own dev cluster)
#   leftover-servers.sh [--since FILE]    list the others; exit 1 when there is one
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=check snapshot=""
case "${1:-}" in
  --snapshot) mode=snapshot; snapshot="${2:?--snapshot FILE}" ;;
  --since) snapshot="${2:?--since FILE}" ;;
  "") ;;
  *) echo "usage: leftover-servers.sh [--snapshot FILE | --since FILE]" >&2; exit 64 ;;
esac

# "pid start-time" of each server under the clone (the start time tells a reused pid apart).
servers() {
  local pid exe cwd cmd
  for pid in $(ss -Hlpn -A inet,unix 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -un); do
    [[ -r "/proc/$pid/cmdline" ]] || continue
    exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
    cwd="$(readlink "/proc/$pid/cwd" 2>/dev/null || true)"
    cmd="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null || true)"
    if [[ "$exe" == "$REPO"/* || "$cwd" == "$REPO" || "$cwd" == "$REPO"/* || "$cmd" == *"$REPO/"* ]]; then
      echo "$pid $(awk '{ print $22 }' "/proc/$pid/stat" 2>/dev/null)"
    fi
  done
}

if [[ "$mode" == snapshot ]]; then servers > "$snapshot"; exit 0; fi
left=0
while read -r pid start; do
  [[ -n "$pid" ]] || continue
  if [[ -n "$snapshot" && -f "$snapshot" ]] && grep -qx "$pid $start" "$snapshot"; then continue; fi
  left=1
  echo "leftover server: pid $pid ($(ps -o user= -p "$pid" | tr -d ' ')): $(tr '\0' ' ' < "/proc/$pid/cmdline" | cut -c1-200)"
done < <(servers)
if ((left)); then
  echo "FAIL servers started under $REPO are still running (above)"
  exit 1
fi
echo "ok   no server started under $REPO is left running"
