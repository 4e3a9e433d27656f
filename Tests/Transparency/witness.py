#!/usr/bin/env python3
"""A transparency log witness per c2sp.org/tlog-witness@v1.0.0, written from the C2SP texts with
no Latchkey code in it: `POST <prefix>/add-checkpoint` verifies the log's signature on the
checkpoint, the old size against the size it recorded, and the RFC 9162 consistency proof, then
records the checkpoint and answers with a cosignature/v1 (tlog-cosignature v1.0.1, key type 0x04).

  witness.py --listen 127.0.0.1:PORT --state DIR --log "<origin> <log vkey>" [--log …]
             [--name NAME] [--prefix /PATH]
  witness.py --state DIR [--name NAME] --print-vkey    (makes the seed if missing, prints the vkey)

DIR holds `witness.seed` (the Ed25519 seed, made on first start) and `state.json` (the latest
cosigned checkpoint per origin, written before the answer, so a restart keeps it). On start it
prints `vkey <cosignature/v1 verifier key>` and `listening http://HOST:PORT<prefix>` on stdout.

Needs Python 3 and python3-cryptography (Debian 12); nothing from PyPI.
"""

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlog_verify as tv  # noqa: E402

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

MAX_BODY = 64 * 1024
LOG = sys.stderr  # where requests and refusals are logged (the tests quiet it)
MAX_PROOF_LINES = 63


class Refusal(Exception):
    def __init__(self, status, message, body=None, content_type="text/plain; charset=utf-8"):
        super().__init__(message)
        self.status, self.body, self.content_type = status, body, content_type


class Witness:
    """The witness's decisions and state, apart from HTTP."""

    def __init__(self, state_dir, name=None, logs=(), clock=time.time):
        os.makedirs(state_dir, exist_ok=True)
        self.state_dir = state_dir
        self.clock = clock
        self.key = self._load_or_make_key(os.path.join(state_dir, "witness.seed"))
        pub = tv.raw_public_key(self.key)
        if name is None:
            name = "witness.test/" + hashlib.sha256(pub).hexdigest()[:12]
        if not tv.valid_key_name(name):
            raise ValueError(f"bad witness name {name!r}")
        self.name = name
        self.vkey = tv.VerifierKey.from_public(name, tv.SIG_COSIGNATURE_V1, pub)
        self.logs = {}  # origin -> [VerifierKey]
        for origin, vkey in logs:
            self.add_log(origin, vkey)
        self.state_path = os.path.join(state_dir, "state.json")
        self.lock = threading.Lock()
        self.state = self._load_state()

    @staticmethod
    def _load_or_make_key(path):
        if not os.path.exists(path):
            seed = os.urandom(32)
            fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(seed)
                f.flush()
                os.fsync(f.fileno())
            os.replace(path + ".tmp", path)
        with open(path, "rb") as f:
            seed = f.read()
        if len(seed) != 32:
            raise ValueError(f"{path} is not a 32-byte Ed25519 seed")
        return Ed25519PrivateKey.from_private_bytes(seed)

    def add_log(self, origin, vkey_text):
        key = tv.VerifierKey.parse(vkey_text)
        if key.sig_type != tv.SIG_ED25519:
            raise ValueError(f"the key for {origin} is not an Ed25519 (0x01) note verifier key")
        self.logs.setdefault(origin, []).append(key)

    def _load_state(self):
        if not os.path.exists(self.state_path):
            return {}
        with open(self.state_path, "r", encoding="utf-8") as f:
            return json.load(f)

    def _persist(self, state):
        tmp = self.state_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)
        dfd = os.open(self.state_dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def recorded(self, origin):
        entry = self.state.get(origin)
        if entry is None:
            return 0, tv.EMPTY_ROOT
        return entry["size"], tv.b64decode(entry["root"])

    @staticmethod
    def parse_request(body):
        """old size line, consistency proof lines, an empty line, then the checkpoint."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise Refusal(400, "the body is not UTF-8")
        end = text.find("\n\n")
        if end < 0:
            raise Refusal(400, "no empty line before the checkpoint")
        head = text[:end].split("\n")
        note = text[end + 2:]
        if not head[0].startswith("old "):
            raise Refusal(400, "the first line is not an old size line")
        try:
            old = tv.parse_decimal(head[0][4:], "the old size")
        except tv.VerifyError as e:
            raise Refusal(400, str(e))
        proof = []
        for line in head[1:]:
            try:
                h = tv.b64decode(line)
            except tv.VerifyError as e:
                raise Refusal(400, f"a consistency proof line: {e}")
            if len(h) != tv.HASH_SIZE:
                raise Refusal(400, "a consistency proof line is not a 32-byte hash")
            proof.append(h)
        if len(proof) > MAX_PROOF_LINES:
            raise Refusal(400, f"more than {MAX_PROOF_LINES} consistency proof lines")
        try:
            checkpoint = tv.parse_checkpoint(note)
        except tv.VerifyError as e:
            raise Refusal(400, f"the checkpoint: {e}")
        return old, proof, checkpoint

    def add_checkpoint(self, body):
        """Returns the cosignature lines, or raises Refusal with the status tlog-witness names."""
        old, proof, cp = self.parse_request(body)
        keys = self.logs.get(cp.origin)
        if not keys:
            raise Refusal(404, f"unknown origin {cp.origin!r}")
        try:
            tv.verify_note(cp.note, keys)
        except tv.VerifyError as e:
            raise Refusal(403, f"the checkpoint is not signed by a key trusted for {cp.origin}: {e}")
        if old > cp.size:
            raise Refusal(400, f"the old size {old} is above the checkpoint size {cp.size}")
        # The check against the recorded size and the write of the new record are one step.
        with self.lock:
            size, root = self.recorded(cp.origin)
            if old != size:
                raise Refusal(409, f"old size {old}, recorded {size}", f"{size}\n".encode("ascii"),
                              "text/x.tlog.size")
            if old == cp.size:
                if proof:
                    raise Refusal(422, "a consistency proof between equal sizes must be empty")
                if cp.root != root:
                    raise Refusal(409, "same size, different root hash", f"{size}\n".encode("ascii"),
                                  "text/x.tlog.size")
            else:
                try:
                    tv.verify_consistency(old, cp.size, root, cp.root, proof)
                except tv.VerifyError as e:
                    LOG.write(f"witness: inconsistent checkpoint for {cp.origin} "
                                     f"({old} -> {cp.size}): {e}\n{body.decode('utf-8', 'replace')}\n")
                    raise Refusal(422, f"the consistency proof does not verify: {e}")
            state = dict(self.state)
            state[cp.origin] = {"size": cp.size, "root": tv.b64encode(cp.root), "checkpoint": cp.text}
            self._persist(state)
            self.state = state
        return tv.cosign(self.key, self.name, cp.text, int(self.clock())).encode("utf-8")


def make_handler(witness, prefix):
    endpoint = prefix.rstrip("/") + "/add-checkpoint"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "tlog-witness.py"

        def log_message(self, fmt, *args):
            LOG.write("witness: %s %s\n" % (self.address_string(), fmt % args))

        def _send(self, status, body, content_type="text/plain; charset=utf-8"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _read_body(self):
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                body = b""
                while True:
                    line = self.rfile.readline(100)
                    try:
                        n = int(line.split(b";")[0].strip(), 16)
                    except ValueError:
                        raise Refusal(400, "bad chunk size")
                    if n == 0:
                        while self.rfile.readline(1000) not in (b"\r\n", b"\n", b""):
                            pass
                        return body
                    if len(body) + n > MAX_BODY:
                        raise Refusal(413, "the body is too large")
                    body += self.rfile.read(n)
                    self.rfile.readline(10)
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise Refusal(411, "Content-Length required")
            if int(length) > MAX_BODY:
                raise Refusal(413, "the body is too large")
            return self.rfile.read(int(length))

        def do_POST(self):
            try:
                body = self._read_body()
            except Refusal as r:
                self.close_connection = True
                self._send(r.status, (str(r) + "\n").encode("utf-8"))
                return
            if self.path != endpoint:
                self._send(404, b"not found\n")
                return
            try:
                self._send(200, witness.add_checkpoint(body))
            except Refusal as r:
                self.log_message("refused %d: %s", r.status, r)
                self._send(r.status, r.body if r.body is not None else (str(r) + "\n").encode("utf-8"),
                           r.content_type)

        def do_GET(self):
            if self.path == endpoint:
                self.send_response(405)
                self.send_header("Allow", "POST")
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self._send(404, b"not found\n")

    return Handler


def serve(witness, host, port, prefix=""):
    """Starts the witness's HTTP server on a thread; returns the server (call shutdown())."""
    server = ThreadingHTTPServer((host, port), make_handler(witness, prefix))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def main(argv=None):
    p = argparse.ArgumentParser(description="A C2SP tlog-witness v1.0.0 server.")
    p.add_argument("--listen", help="HOST:PORT (port 0 picks a free one)")
    p.add_argument("--print-vkey", action="store_true",
                   help="make the seed if missing, print the vkey and exit (to configure a log first)")
    p.add_argument("--state", required=True, help="directory for the seed and the state")
    p.add_argument("--log", action="append", default=[], help='"<origin> <log vkey>" (repeatable)')
    p.add_argument("--name", help="the witness's key name (default witness.test/<key hash>)")
    p.add_argument("--prefix", default="", help="submission prefix path, e.g. /witness")
    args = p.parse_args(argv)
    logs = []
    for spec in args.log:
        parts = spec.split()
        if len(parts) != 2:
            p.error(f'--log takes "<origin> <vkey>": {spec!r}')
        logs.append((parts[0], parts[1]))
    witness = Witness(args.state, args.name, logs)
    if args.print_vkey:
        print(witness.vkey)
        return 0
    if not args.listen:
        p.error("--listen is required")
    host, _, port = args.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), make_handler(witness, args.prefix))
    server.daemon_threads = True
    with open(os.path.join(args.state, "vkey"), "w") as f:
        f.write(str(witness.vkey) + "\n")
    print(f"vkey {witness.vkey}", flush=True)
    print(f"listening http://{host}:{server.server_address[1]}{args.prefix.rstrip('/')}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
