#!/usr/bin/env bash
# Checks the Promela models in Tests/Model with spin (Debian package `spin`, installed when
# missing): `spin -a`, pan compiled with gcc, an exhaustive safety search. Fails on any assertion
# violation or invalid end state, or when the search is incomplete. For a model that documents a
# broken variant (`-DBROKEN_CONSUME` in challenges.pml), spin must find a violation there: the
# assertions are shown to catch the bug they are about.
# Usage: scripts/model-check.sh [MODEL.pml…]   (default: every Tests/Model/*.pml)
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log() { printf 'model-check: %s\n' "$*" >&2; }
if ! command -v spin >/dev/null || ! command -v gcc >/dev/null; then
  bash "$REPO/scripts/install-deps.sh" spin gcc >/dev/null
fi
models=("$@")
((${#models[@]})) || models=("$REPO"/Tests/Model/*.pml)
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
status=0

# check MODEL EXPECT [SPIN_FLAG…]: EXPECT is "clean" or "violation".
check() {
  local model=$1 expect=$2; shift 2
  local dir="$work/$(basename "$model" .pml)$(printf '%s' "$@" | tr -c 'A-Za-z0-9' _)"
  mkdir -p "$dir"
  cp "$model" "$dir/model.pml"
  (cd "$dir" && spin "$@" -a model.pml >spin.log 2>&1) || { log "spin -a failed on $model"; cat "$dir/spin.log" >&2; return 1; }
  (cd "$dir" && gcc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c 2>gcc.log) || { log "gcc failed on $model's pan.c"; cat "$dir/gcc.log" >&2; return 1; }
  local started=$SECONDS
  (cd "$dir" && ./pan -m200000 >pan.log 2>&1) || true
  local errors states
  errors="$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.log" | tail -n 1)"
  states="$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' "$dir/pan.log" | tail -n 1)"
  local label="$(basename "$model")${*:+ ($*)}"
  if [[ "$expect" == clean ]]; then
    if [[ "$errors" == 0 ]] && ! grep -q 'Search not completed\|max search depth too small' "$dir/pan.log"; then
      log "$label: no assertion violated, no invalid end state ($states states, $((SECONDS - started)) s)"
    else
      log "$label: FAILED (errors: ${errors:-?})"
      grep -E 'violated|invalid end state|Search not completed|depth too small' "$dir/pan.log" >&2 || true
      (cd "$dir" && [[ -f model.pml.trail ]] && spin -t -p "$@" model.pml | tail -n 40 >&2) || true
      return 1
    fi
  else
    if [[ -n "$errors" && "$errors" != 0 ]]; then
      log "$label: spin finds the expected violation: $(grep -m1 -o 'assertion violated.*' "$dir/pan.log" || echo "errors: $errors")"
    else
      log "$label: FAILED: the broken variant passes, so the model's assertions miss what they are for"
      return 1
    fi
  fi
}

for model in "${models[@]}"; do
  check "$model" clean || status=1
  for flag in $(grep -o -- '-DBROKEN_[A-Z_]*' "$model" | sort -u); do
    check "$model" violation "$flag" || status=1
  done
done
exit $status
