#!/usr/bin/env bash
# Before/after login benchmark of two or more release binaries in one sitting, alternating them
# round by round (so drift on the machine hits every binary alike), on the durable dev cluster.
#
#   bash scripts/bench-ab.sh [--rounds N] [--duration S] [--concurrency C] [--threads N] [--instructions] NAME=BINARY[,VAR=VALUE…]…
#
# A binary may be followed by settings of its own, so one build can be measured two ways:
# `workers=.build/release/latchkey loops=.build/release/latchkey,LATCHKEY_EVENT_LOOPS=2`.
#
# Each binary serves its own database (bench_ab_<NAME>) with LATCHKEY_DEV=1 and its own default
# LATCHKEY_THREADS unless --threads sets one for all (the default moved from 4 to 8 with the
# shared request queue, so each build is measured as it ships); the *same* client
# (`latchkey bench login` of the first binary) drives every server, because on a small machine the
# client's own CPU use moves the rate. Per round and binary it prints logins/s and the server's CPU
# time per login over the timed logins (utime+stime from /proc, as `bench login --pid` reads it; far
# steadier than the rate), then the medians.
# --instructions also runs each server once under valgrind's callgrind (instrumentation switched on
# only for the timed run) and prints instructions per login: the figure that does not drift.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
rounds=5 duration=8 concurrency=16 instructions=0 threads=
names=() bins=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --instructions) instructions=1; shift ;;
    *=*) names+=("${1%%=*}"); bins+=("${1#*=}"); shift ;;
    *) echo "usage: $0 [--rounds N] [--duration S] [--concurrency C] [--threads N] [--instructions] NAME=BINARY…" >&2; exit 2 ;;
  esac
done
[[ ${#names[@]} -ge 1 ]] || { echo "name at least one NAME=BINARY" >&2; exit 2; }
client="${bins[0]%%,*}"
cluster="$(bash "$REPO/scripts/dev-postgres.sh" | tail -n 1)"
cluster="${cluster%/*}"
export LATCHKEY_KEY_ENCRYPTION_KEY="${LATCHKEY_KEY_ENCRYPTION_KEY:-bGF0Y2hrZXktYmVuY2gta2VrLTMyLWJ5dGVzLS0tLS0=}"
for name in "${names[@]}"; do
  psql -q "$cluster/postgres" -c "CREATE DATABASE bench_ab_$name" 2>/dev/null || true
done
# The servers' logs and callgrind files, in a directory of this run's own (kept: a failure points at them).
scratch="$(mktemp -d /tmp/bench-ab.XXXXXX)"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
serve() {  # serve NAME BINARY[,VAR=VALUE…] PORT [WRAPPER…] → pid
  local name=$1 bin=${2%%,*} port=$3 settings=()
  [[ $2 == *,* ]] && IFS=, read -r -a settings <<<"${2#*,}"
  shift 3
  DATABASE_URL="$cluster/bench_ab_$name" LATCHKEY_DEV=1 LATCHKEY_LISTEN="127.0.0.1:$port" \
    LATCHKEY_ORIGINS="http://localhost:$port" LATCHKEY_RATE_LIMIT=0 \
    env ${threads:+"LATCHKEY_THREADS=$threads"} "${settings[@]}" "$@" "$bin" serve >"$scratch/$name.log" 2>&1 &
  echo $!
}
wait_ready() { for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.2; done; return 1; }
results="$(mktemp)"
trap 'rm -f "$results"' EXIT
for round in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    name=${names[$i]} port="$(free_port)"
    pid="$(serve "$name" "${bins[$i]}" "$port")"
    wait_ready "$port"
    # The server's CPU over the timed logins alone, as the bench measures it with --pid (the
    # enrolments before them and the DPoP-on phase after them are not in it).
    out="$("$client" bench login --url "http://127.0.0.1:$port" --origin "http://localhost:$port" \
      --concurrency "$concurrency" --duration "$duration" --pid "$pid" --no-dpop 2>&1)"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rate="$(awk '/^logins /{print $3}' <<<"$out")"
    us="$(sed -n 's/^CPU per login:.*server \([0-9]*\) µs.*/\1/p' <<<"$out")"
    echo "round $round  $name  ${rate:-?}  server CPU ${us} µs/login"
    echo "$name ${rate%/s} $us" >>"$results"
  done
done
python3 - "$results" <<'EOF'
import sys, statistics, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, rate, us = line.split()
    rows[name].append((float(rate), float(us)))
first = None
for name, values in rows.items():
    rate = statistics.median(r for r, _ in values); us = statistics.median(u for _, u in values)
    spread = (max(r for r, _ in values) - min(r for r, _ in values)) / rate if rate else 0
    first = first or (rate, us)
    print(f"median {name}: {rate:.0f} logins/s (round-to-round spread {spread:.0%}), {us:.0f} µs server CPU/login; "
          f"ratio to {list(rows)[0]}: rate {rate / first[0]:.2f}, CPU {us / first[1]:.2f}")
EOF
if [[ $instructions == 1 ]]; then
  command -v valgrind >/dev/null || { echo "--instructions needs valgrind (apt-get install valgrind)" >&2; exit 1; }
  for i in "${!names[@]}"; do
    name=${names[$i]} port="$(free_port)" out_file="$scratch/callgrind-$name-$round"
    pid="$(serve "$name" "${bins[$i]}" "$port" valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out_file")"
    wait_ready "$port"
    callgrind_control -i on "$pid" >/dev/null 2>&1
    out="$("$client" bench login --url "http://127.0.0.1:$port" --origin "http://localhost:$port" --concurrency 2 --duration 15 --no-dpop 2>&1)"
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"; wait "$pid" 2>/dev/null || true
    logins="$(awk '/^logins /{print $2}' <<<"$out")"
    total="$(cat "$out_file"* | awk '/^totals:/{s += $2} END {printf "%.0f", s}')"
    rm -f "$out_file"*
    echo "instructions $name: $(python3 -c "print(round($total / max($logins, 1)))") per login (server, $logins logins under callgrind)"
  done
fi
