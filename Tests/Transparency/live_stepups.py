#!/usr/bin/env python3
"""Real step-ups against a running `latchkey serve`, for scripts/transparency-check.sh: signs up an
account with a software passkey (scripts/openapi/softauthn.py: attestation "none"), makes COUNT
passkey step-ups for an app action over the HTTP API (POST /v1/step-up/challenges and
/v1/step-up/verify), and with --wait polls GET /v1/receipts/{id}?minWitnesses=M until each receipt's
`log` is there with a checkpoint that carries M cosignatures. Each answer is written as it came to
OUT/receipt-<id>.json; the receipt ids go to stdout, one a line.

  live_stepups.py --url http://127.0.0.1:PORT --origin http://localhost:PORT --count N --out DIR
                  [--wait SECONDS] [--min-witnesses M]
"""

import argparse
import base64
import json
import os
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "openapi"))
import softauthn  # noqa: E402


def request(method, url, token, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def step_up(base, passkey, token, action, display):
    body = {"method": "passkey", "action": action}
    if display is not None:
        body["display"] = display
    status, raw = request("POST", base + "/v1/step-up/challenges", token, body)
    if status == 400 and display is not None:
        print(f"live_stepups.py: a challenge with display was refused ({raw[:200]!r}); without it",
              file=sys.stderr)
        return step_up(base, passkey, token, action, None)
    if status != 201:
        raise RuntimeError(f"POST /v1/step-up/challenges answered {status}: {raw[:300]!r}")
    challenge = json.loads(raw)
    credential = passkey.assertion(challenge["publicKey"])
    status, raw = request("POST", base + "/v1/step-up/verify", token,
                          {"challengeId": challenge["challengeId"], "credential": credential})
    if status != 200:
        raise RuntimeError(f"POST /v1/step-up/verify answered {status}: {raw[:300]!r}")
    reply = json.loads(raw)
    if not reply.get("receiptId"):
        raise RuntimeError(f"the step-up answer has no receiptId: {reply}")
    return reply["receiptId"]


def cosignatures(proof_text):
    """Signature lines of the proof's checkpoint beyond the log's own one."""
    if not proof_text.startswith("c2sp.org/tlog-proof@v1"):
        proof_text = base64.b64decode(proof_text).decode()
    note = proof_text.split("\n\n", 1)[1] if "\n\n" in proof_text else ""
    return max(0, sum(1 for line in note.split("\n") if line.startswith("\u2014 ")) - 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--origin", required=True, help="the WebAuthn origin the passkey reports")
    p.add_argument("--rp-id", default="localhost")
    p.add_argument("--count", type=int, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--wait", type=float, default=0, help="seconds to wait for every receipt's log")
    p.add_argument("--min-witnesses", type=int, default=0)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    base = args.url.rstrip("/")

    passkey, reply = softauthn.sign_up(base, args.rp_id, args.origin)
    token = reply["tokens"]["access_token"]
    ids = []
    for i in range(args.count):
        action = {"type": "transfer", "amount": f"{i + 1}.00", "currency": "EUR", "to": "DE89370400440532013000"}
        # Every other step-up carries what the app showed (challenge version 2, "source":"app").
        display = {"lang": "en", "lines": [f"Transfer {i + 1}.00 EUR", "to DE89 3704 0044 0532 0130 00"]} \
            if i % 2 else None
        ids.append(step_up(base, passkey, token, action, display))

    deadline = time.monotonic() + args.wait
    pending = list(ids)
    while True:
        for rid in list(pending):
            status, raw = request("GET", f"{base}/v1/receipts/{rid}?minWitnesses={args.min_witnesses}", token)
            if status != 200:
                if not args.wait:
                    pending.remove(rid)
                    continue
                raise RuntimeError(f"GET /v1/receipts/{rid} answered {status}: {raw[:300]!r}")
            doc = json.loads(raw)
            if not args.wait or (doc.get("log") and cosignatures(doc["log"]) >= args.min_witnesses):
                with open(os.path.join(args.out, f"receipt-{rid}.json"), "wb") as f:
                    f.write(raw)
                pending.remove(rid)
        if not pending or not args.wait:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pending)} receipt(s) without a log entry with {args.min_witnesses} "
                               f"cosignatures after {args.wait:.0f} s: {', '.join(pending)}")
        time.sleep(0.5)
    for rid in ids:
        print(rid)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, urllib.error.URLError, OSError, KeyError, ValueError) as e:
        print(f"live_stepups.py: {e}", file=sys.stderr)
        sys.exit(1)
