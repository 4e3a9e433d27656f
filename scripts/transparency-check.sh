#!/usr/bin/env bash
# The transparency log checked by code that is not Latchkey's (Tests/Transparency: a C2SP
# tlog-witness and a verifier written in Python from the C2SP texts).
#  (a) the unit tests: signed-note vectors, RFC 9162 proofs against a naive tree, the witness's
#      answers (200, 400, 403, 404, 409, 422) and the verifier against a reference log (seconds);
#  (b) when LATCHKEY_BIN and DATABASE_URL are given: two Python witnesses and `latchkey serve` with
#      LATCHKEY_LOG_WITNESSES naming them, real passkey step-ups over HTTP, then tlog_verify.py on a
#      checkpoint with both cosignatures, on every tile and entry bundle, on each receipt's proof, and
#      on consistency between a checkpoint before and one after more receipts; and `latchkey receipts
#      verify` on the same receipts when the binary has that command. Skipped, saying so, when the
#      server answers 404 for /v1/transparency/checkpoint (a build without the log).
# Environment: LATCHKEY_BIN, DATABASE_URL (a cluster; the run uses a fresh database
# latchkey_transparency on it), LATCHKEY_KEY_ENCRYPTION_KEY (default: the tests' key).
# Output and logs in data/transparency/. Bounded: every wait has a limit; callers add `timeout`.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
log() { printf 'transparency-check: %s\n' "$*" >&2; }

# Ed25519 comes from python3-cryptography (Debian); use a python3 that has it.
eval "$(bash scripts/install-deps.sh python3-cryptography)"
PY=python3
"$PY" -c 'import cryptography' 2>/dev/null || PY=/usr/bin/python3

status=0
log "(a) unit tests: Tests/Transparency/test_c2sp.py"
(cd Tests/Transparency && timeout 300 "$PY" -m unittest -v test_c2sp 2>&1) || { status=1; log "FAILED: unit tests"; }

if [[ -z "${LATCHKEY_BIN:-}" || -z "${DATABASE_URL:-}" ]]; then
  log "(b) live check SKIPPED: set LATCHKEY_BIN and DATABASE_URL to run it"
  exit $status
fi

out="$REPO/data/transparency"
rm -rf "$out"; mkdir -p "$out/w1" "$out/w2" "$out/receipts" "$out/mail" "$out/wellknown-empty"
cluster="${DATABASE_URL%/*}"
psql -v ON_ERROR_STOP=1 -q "$cluster/postgres" -c "DROP DATABASE IF EXISTS latchkey_transparency WITH (FORCE)" \
  -c "CREATE DATABASE latchkey_transparency" >&2

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port="$(free_port)"; w1_port="$(free_port)"; w2_port="$(free_port)"
base="http://127.0.0.1:$port"
tlog="$base/v1/transparency"
rp_origin="http://localhost:$port"
# SPEC default origin: <rpId>/latchkey/receipts.
log_origin="localhost/latchkey/receipts"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

server_pid=""
start_server() {  # $1: log file; the rest: extra VAR=value settings
  local logfile="$1"; shift
  env DATABASE_URL="$cluster/latchkey_transparency" LATCHKEY_DEV=1 LATCHKEY_RP_ID=localhost \
    LATCHKEY_LISTEN="127.0.0.1:$port" LATCHKEY_ORIGINS="$rp_origin" \
    LATCHKEY_WELLKNOWN_DIR="$out/wellknown-empty" LATCHKEY_WEB_DIR="$REPO/web" LATCHKEY_MAIL_DIR="$out/mail" \
    LATCHKEY_RATE_LIMIT=0 LATCHKEY_LOG_INTERVAL=1 LATCHKEY_LOG_STATE="$out/log-state" \
    LATCHKEY_KEY_ENCRYPTION_KEY="${LATCHKEY_KEY_ENCRYPTION_KEY:-bGF0Y2hrZXktdGVzdC1rZWstMzItYnl0ZXMtLS0tLS0=}" \
    "$@" "$LATCHKEY_BIN" serve >"$logfile" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 150); do
    "$PY" -c "import urllib.request as u; u.urlopen('$base/healthz', timeout=2)" 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || { log "the server did not start:"; tail -30 "$logfile" >&2; return 1; }
    sleep 0.2
  done
  log "the server did not answer /healthz in 30 s"; return 1
}
stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
}
http_status() {  # the status code, or 000 when nothing answered
  "$PY" - "$1" <<'EOF'
import sys, urllib.request, urllib.error
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
except OSError:
    print("000")
EOF
}

# 1. A first start without witnesses makes the log's key (sealed under the KEK); its vkey is what
#    the witnesses are configured with. A build without the log answers 404 for both the checkpoint
#    and the key; one with it may take an interval to sign its first checkpoint.
start_server "$out/server-1.log" || exit 1
for _ in $(seq 1 10); do
  code="$(http_status "$tlog/checkpoint")"
  [[ "$code" == 200 ]] && break
  sleep 0.5
done
key_code="$(http_status "$tlog/key")"
if [[ "$code" == 404 && "$key_code" == 404 ]]; then
  log "(b) live check SKIPPED: $LATCHKEY_BIN answers 404 for /v1/transparency/checkpoint (no transparency log in this build)"
  exit $status
fi
if [[ "$key_code" != 200 ]]; then
  log "FAILED: GET /v1/transparency/key answered $key_code (checkpoint: $code); server log: $out/server-1.log"
  tail -20 "$out/server-1.log" >&2
  exit 1
fi
log_key="$("$PY" - "$tlog/key" <<'EOF'
import json, sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode().strip()
if body.startswith("{"):
    doc = json.loads(body)
    body = next(v for v in doc.values() if isinstance(v, str) and v.count("+") >= 2)
print(body)
EOF
)"
log "log key: $log_key"
stop_server

# 2. Two witnesses that trust that key for the log's origin.
w1_key="$("$PY" Tests/Transparency/witness.py --state "$out/w1" --name witness.test/w1 --print-vkey)"
w2_key="$("$PY" Tests/Transparency/witness.py --state "$out/w2" --name witness.test/w2 --print-vkey)"
for n in 1 2; do
  wport="w${n}_port"
  "$PY" Tests/Transparency/witness.py --listen "127.0.0.1:${!wport}" --state "$out/w$n" --name "witness.test/w$n" \
    --log "$log_origin $log_key" >"$out/witness-$n.log" 2>&1 &
  pids+=("$!")
done
for n in 1 2; do
  ok=0
  for _ in $(seq 1 50); do
    grep -q '^listening ' "$out/witness-$n.log" 2>/dev/null && { ok=1; break; }
    sleep 0.1
  done
  ((ok)) || { log "witness $n did not start:"; cat "$out/witness-$n.log" >&2; exit 1; }
done
log "witnesses: $w1_key, $w2_key"

# 3. The server again, now sending each checkpoint to both witnesses.
start_server "$out/server-2.log" \
  LATCHKEY_LOG_WITNESSES="http://127.0.0.1:$w1_port $w1_key,http://127.0.0.1:$w2_port $w2_key" || exit 1

verify=("$PY" Tests/Transparency/tlog_verify.py)
keys=(--log-key "$log_key" --origin "$log_origin")
wkeys=(--witness-key "$w1_key" --witness-key "$w2_key" --min-witnesses 2)
check() {  # a named check: runs the command, prints its output, records a failure
  local name="$1"; shift
  log "check: $name"
  if ! "$@"; then status=1; log "FAILED: $name"; fi
}
check_soon() {  # the same for a check on the newest checkpoint, which may be a second away from
  # its cosignatures: up to 15 tries a second apart, the last one's output kept
  local name="$1" try; shift
  log "check: $name"
  for try in $(seq 1 15); do
    if "$@" >"$out/last-check.txt" 2>&1; then cat "$out/last-check.txt"; return 0; fi
    sleep 1
  done
  cat "$out/last-check.txt"; status=1; log "FAILED: $name"
}

# 4. Real step-ups; wait until each receipt is in a checkpoint both witnesses cosigned.
if ! "$PY" Tests/Transparency/live_stepups.py --url "$base" --origin "$rp_origin" --count 4 \
    --out "$out/receipts" --wait 60 --min-witnesses 2 >"$out/receipt-ids-1.txt"; then
  log "FAILED: step-ups or their receipts' log entries (server log: $out/server-2.log)"
  tail -20 "$out/server-2.log" >&2
  exit 1
fi
check_soon "checkpoint signed by the log and cosigned by both witnesses" \
  "${verify[@]}" checkpoint --url "$tlog" "${keys[@]}" "${wkeys[@]}" --save "$out/checkpoint-before"
check "tiles and entry bundles recompute the checkpoint" \
  "${verify[@]}" tiles --url "$tlog" --checkpoint "$out/checkpoint-before" "${keys[@]}"
for f in "$out"/receipts/receipt-*.json; do
  check "receipt proof $(basename "$f")" "${verify[@]}" proof --response "$f" "${keys[@]}" "${wkeys[@]}"
done

# 5. More receipts, then the older checkpoint against the newer tree.
mkdir -p "$out/receipts-2"
if "$PY" Tests/Transparency/live_stepups.py --url "$base" --origin "$rp_origin" --count 3 \
    --out "$out/receipts-2" --wait 60 --min-witnesses 2 >"$out/receipt-ids-2.txt"; then
  for f in "$out"/receipts-2/receipt-*.json; do
    check "receipt proof $(basename "$f")" "${verify[@]}" proof --response "$f" "${keys[@]}" "${wkeys[@]}"
  done
  check_soon "checkpoint after more receipts" \
    "${verify[@]}" checkpoint --url "$tlog" "${keys[@]}" "${wkeys[@]}" --save "$out/checkpoint-after"
  check "the checkpoint before is consistent with the one after" \
    "${verify[@]}" consistency --url "$tlog" --old "$out/checkpoint-before" --new "$out/checkpoint-after" "${keys[@]}"
  check "the tree grew" "$PY" -c "
import sys; sys.path.insert(0, 'Tests/Transparency'); import tlog_verify as tv
a = tv.parse_checkpoint(open('$out/checkpoint-before','rb').read()).size
b = tv.parse_checkpoint(open('$out/checkpoint-after','rb').read()).size
print(f'size {a} -> {b}'); sys.exit(0 if b > a else 1)"
else
  status=1; log "FAILED: the second batch of step-ups"
fi

# 6. The witnesses' own records: each holds the log at a size some checkpoint was cosigned at.
check "both witnesses recorded the log" "$PY" -c "
import json, sys
for n in (1, 2):
    s = json.load(open('$out/w%d/state.json' % n))['$log_origin']
    print('witness', n, 'size', s['size'])
    assert s['size'] >= 7, s"

# 7. Latchkey's own verifier on the same receipts, when this build has it.
receipts_help="$("$LATCHKEY_BIN" receipts --help 2>&1 || true)"
if [[ "$receipts_help" == *"unknown command 'receipts'"* ]]; then
  log "latchkey receipts verify: SKIPPED (this build has no 'receipts' command)"
else
  for f in "$out"/receipts/receipt-*.json; do
    check "latchkey receipts verify $(basename "$f")" \
      "$LATCHKEY_BIN" receipts verify "$f" --log-key "$log_key" --witness-key "$w1_key" --witness-key "$w2_key" \
      --min-witnesses 2
  done
fi

# 8. Evidence packs: `receipts export` of the first receipt's user, read by Python's tarfile (a tar
#    implementation that is not ours), verified whole by `receipts verify --pack`, and refused — each
#    with its reason — when a receipt is altered, a proof is another entry's, the log key is another
#    log's, or a cosignature --min-witnesses asks for is missing.
if [[ "$receipts_help" == *"export"* ]]; then
  first="$(ls "$out"/receipts/receipt-*.json | head -n 1)"
  pack_user="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["receipt"]["sub"])' "$first")"
  check "receipts export --user" env DATABASE_URL="$cluster/latchkey_transparency" \
    "$LATCHKEY_BIN" receipts export --user "$pack_user" --out "$out/pack.tar"
  check "the pack as Python's tarfile reads it" "$PY" - "$out/pack.tar" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    names = t.getnames()
    assert names[0] == "receipts.jsonl" and names[-1] == "checkpoint", names
    assert all(n.startswith("proofs/") and n.endswith(".tlog-proof") for n in names[1:-1]), names
    lines = t.extractfile("receipts.jsonl").read().splitlines()
    assert len(lines) == len(names) - 2 and lines, (len(lines), names)
print(f"{len(names) - 2} receipts with their proofs and the checkpoint")
PY
  keys=(--log-key "$log_key" --witness-key "$w1_key" --witness-key "$w2_key")
  check "receipts verify --pack" "$LATCHKEY_BIN" receipts verify --pack "$out/pack.tar" "${keys[@]}" --min-witnesses 2
  "$PY" - "$out/pack.tar" "$out" <<'PY'
import io, json, sys, tarfile, hashlib, base64
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization
src, out = sys.argv[1], sys.argv[2]
with tarfile.open(src) as t:
    files = [(m.name, t.extractfile(m).read()) for m in t.getmembers()]
def write(name, files):
    with tarfile.open(f"{out}/{name}", "w", format=tarfile.USTAR_FORMAT) as t:
        for n, b in files:
            info = tarfile.TarInfo(n); info.size = len(b); t.addfile(info, io.BytesIO(b))
lines = dict(files)["receipts.jsonl"].splitlines()
first = json.loads(lines[0]); first["sub"] = "someone-else"
altered = [json.dumps(first, separators=(",", ":"), sort_keys=True).encode()] + lines[1:]
write("pack-altered.tar", [(n, b"\n".join(altered) + b"\n" if n == "receipts.jsonl" else b) for n, b in files])
proofs = [(n, b) for n, b in files if n.startswith("proofs/")]
if len(proofs) >= 2:
    swapped = {proofs[0][0]: proofs[1][1], proofs[1][0]: proofs[0][1]}
    write("pack-swapped.tar", [(n, swapped.get(n, b)) for n, b in files])
def vkey(name, kind):
    pub = Ed25519PrivateKey.generate().public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    h = hashlib.sha256(name.encode() + b"\n" + bytes([kind]) + pub).digest()[:4]
    return f"{name}+{h.hex()}+{base64.b64encode(bytes([kind]) + pub).decode()}"
open(f"{out}/other-log.vkey", "w").write(vkey("localhost/latchkey/receipts", 1))
open(f"{out}/other-witness.vkey", "w").write(vkey("witness.test/w3", 4))
PY
  refused() {  # name, expected text, command…: exit 1 and the reason printed
    local name="$1" reason="$2"; shift 2
    log "check: refused: $name"
    local rc=0; "$@" >"$out/refused.txt" 2>&1 || rc=$?
    cat "$out/refused.txt"
    if [[ $rc -ne 1 ]] || ! grep -q -- "$reason" "$out/refused.txt"; then status=1; log "FAILED: $name (exit $rc, wanted 1 and '$reason')"; fi
  }
  refused "a receipt altered in the pack" "FAIL  receipt" \
    "$LATCHKEY_BIN" receipts verify --pack "$out/pack-altered.tar" "${keys[@]}"
  if [[ -f "$out/pack-swapped.tar" ]]; then
    refused "a proof that is another entry's" "inclusion" "$LATCHKEY_BIN" receipts verify --pack "$out/pack-swapped.tar" "${keys[@]}"
  fi
  refused "a checkpoint checked against another log's key" "FAIL  checkpoint" \
    "$LATCHKEY_BIN" receipts verify --pack "$out/pack.tar" --log-key "$(cat "$out/other-log.vkey")"
  refused "a cosignature --min-witnesses asks for is missing" "cosign" \
    "$LATCHKEY_BIN" receipts verify --pack "$out/pack.tar" --log-key "$log_key" --witness-key "$w1_key" \
    --witness-key "$(cat "$out/other-witness.vkey")" --min-witnesses 2
fi

if grep -q "internal_error\|fatal\|panic" "$out/server-2.log"; then
  status=1; log "the server logged failures:"; grep "internal_error\|fatal\|panic" "$out/server-2.log" | head -20 >&2
fi
((status == 0)) && log "every check passed" || log "some checks FAILED (logs in $out)"
exit $status
