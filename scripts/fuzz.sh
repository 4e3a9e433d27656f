#!/usr/bin/env bash
# Coverage-guided fuzzing of Latchkey's parsers with libFuzzer (Tests/Fuzz/Harness, one executable, one
# target per parser; `--list` names them).
#
# Usage: scripts/fuzz.sh TARGET SECONDS     fuzz one target for SECONDS
#        scripts/fuzz.sh --all SECONDS      fuzz every target for SECONDS each, then print a summary
#        scripts/fuzz.sh --list             the targets
#        scripts/fuzz.sh --build            only the build
#
# Builds `latchkey-fuzz` with `-sanitize=fuzzer,address -DFUZZING` in its own scratch folder
# (.build/fuzz, so the normal build's cache is untouched; the toolchain ships libclang_rt.fuzzer),
# cuts seed corpora from the shared vectors (scripts/fuzz-seeds.py → data/fuzz/seeds/TARGET), and
# runs with the corpus in data/fuzz/TARGET (kept between runs; new inputs land there).
# Fails (exit 1) on a crash, an ASan report, a leak, a timeout of one input (-timeout=10 s), an
# input needing more than -rss_limit_mb=2048, or a violated property (FuzzCheck): the input is
# saved under data/fuzz/artifacts/TARGET/ — replay it with
#   .build/fuzz/debug/latchkey-fuzz's env LATCHKEY_FUZZ_TARGET=TARGET, or, without sanitizers,
#   `swift build --product latchkey-fuzz && .build/debug/latchkey-fuzz TARGET FILE`.
# Prints per target: executions per second, executions, corpus size (units, bytes), new units.
# Environment: LATCHKEY_FUZZ_SKIP_BUILD=1 uses the existing build; LATCHKEY_FUZZ_ARGS adds libFuzzer flags;
# LATCHKEY_FUZZ_JOBS is how many targets `--all` runs at once (default: the number of cores).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
log() { printf 'fuzz: %s\n' "$*" >&2; }
usage() { sed -n '2,/^set -e/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --list|--all|--build) ;;
  "") usage >&2; exit 64 ;;
esac
if [[ "$1" != --list && "$1" != --build ]]; then
  [[ $# -eq 2 && "$2" =~ ^[0-9]+$ && "$2" -gt 0 ]] || { usage >&2; exit 64; }
fi

eval "$(bash scripts/install-deps.sh)"
SCRATCH="$REPO/.build/fuzz"
BIN="$SCRATCH/debug/latchkey-fuzz"
if [[ "${LATCHKEY_FUZZ_SKIP_BUILD:-0}" != 1 || ! -x "$BIN" ]]; then
  log "building latchkey-fuzz with -sanitize=fuzzer,address (scratch path .build/fuzz)"
  # ld.gold warns once per ASan helper symbol it cannot export; those lines say nothing.
  # LATCHKEY_FUZZ_BUILD=1 gives the program's modules those flags in Package.swift (not `-Xswiftc`, which
  # would give them to the build-time tool too).
  if ! LATCHKEY_FUZZ_BUILD=1 swift build --product latchkey-fuzz --scratch-path "$SCRATCH" \
       2>&1 | { grep -v "Cannot export local symbol" || true; } >&2; then
    log "error: build failed"; exit 1
  fi
fi

# The targets, as the built harness names them.
[[ "$1" != --build ]] || exit 0

ALL=()
while IFS=$'\t' read -r t _; do ALL+=("$t"); done < <("$BIN" --list)
((${#ALL[@]})) || { log "error: $BIN --list named no targets"; exit 1; }
if [[ "$1" == --list ]]; then printf '%s\n' "${ALL[@]}"; exit 0; fi

rm -rf data/fuzz/seeds
python3 scripts/fuzz-seeds.py data/fuzz/seeds >/dev/null

SUMMARY=()
status=0
run_target() {
  local target=$1 seconds=$2
  local corpus="data/fuzz/$target" seeds="data/fuzz/seeds/$target" artifacts="data/fuzz/artifacts/$target"
  local logfile="data/fuzz/logs/$target.log"
  mkdir -p "$corpus" "$seeds" "$artifacts" data/fuzz/logs
  log "$target: ${seconds}s"
  local rc=0
  # A wall-clock guard over libFuzzer's own limits, in case the process itself wedges.
  # shellcheck disable=SC2086
  LATCHKEY_FUZZ_TARGET="$target" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1" \
    timeout --kill-after=10 $((seconds + 120)) "$BIN" "$corpus" "$seeds" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -detect_leaks=1 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" ${LATCHKEY_FUZZ_ARGS:-} >"$logfile" 2>&1 || rc=$?
  local execs eps units size added
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$logfile" | tail -n 1)"
  eps="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$logfile" | tail -n 1)"
  added="$(sed -n 's/^stat::new_units_added: *//p' "$logfile" | tail -n 1)"
  units="$(grep -o 'corp: [0-9]*/[0-9]*[bKM]*b*' "$logfile" | tail -n 1 | sed 's/corp: //')"
  size="$(find "$corpus" -type f | wc -l | tr -d ' ')"
  local line
  line="$(printf '%-24s %8s exec/s %10s execs  corpus %-14s (%s files in %s, %s new)' \
    "$target" "${eps:-?}" "${execs:-?}" "${units:-?}" "$size" "$corpus" "${added:-?}")"
  if ((rc != 0)); then
    line+="  FAILED (exit $rc)"
    status=1
    log "$target failed (exit $rc); the end of $logfile:"
    grep -v '^    #\|^  0x\|^Shadow\|^  [A-Z][a-z]' "$logfile" | tail -n 25 >&2
    ls -1 "$artifacts" >&2 || true
  fi
  SUMMARY+=("$line")
  echo "$line"
}

if [[ "$1" == --all ]]; then
  # libFuzzer runs on one core, so LATCHKEY_FUZZ_JOBS targets (default: one per core) run side by
  # side; each writes its summary line to data/fuzz/results/TARGET, read back in the targets' order.
  jobs_max="${LATCHKEY_FUZZ_JOBS:-$(nproc)}"
  rm -rf data/fuzz/results
  mkdir -p data/fuzz/results
  for t in "${ALL[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs_max)); do wait -n || true; done
    run_target "$t" "$2" >"data/fuzz/results/$t" &
  done
  wait
  for t in "${ALL[@]}"; do
    line="$(cat "data/fuzz/results/$t" 2>/dev/null)"
    [[ -n "$line" ]] || line="$t: no result (the run did not finish)  FAILED"
    [[ "$line" != *FAILED* ]] || status=1
    SUMMARY+=("$line")
  done
  {
    echo "fuzzing summary ($(date -u +%Y-%m-%dT%H:%M:%SZ), ${2}s per target; corpus = units/bytes in memory at the end):"
    printf '  %s\n' "${SUMMARY[@]}"
  } | tee data/fuzz/summary.txt
else
  printf '%s\n' "${ALL[@]}" | grep -qx -- "$1" || { log "unknown target $1; one of: ${ALL[*]}"; exit 64; }
  run_target "$1" "$2"
fi
exit $status
