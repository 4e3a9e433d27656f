"""The Python witness and verifier against the C2SP texts' vectors, a naive RFC 9162 Merkle tree,
and a small reference log written here (its own code, not Latchkey's).

Run: cd Tests/Transparency && python3 -m unittest -v
"""

import contextlib
import functools
import hashlib
import http.client
import io
import json
import os
import struct
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlog_verify as tv  # noqa: E402
import witness as wt  # noqa: E402

wt.LOG = io.StringIO()

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402


# ---------------------------------------------------------------------------------------------
# RFC 9162 section 2.1, written as literally as the RFC states it (recursion on lists).

def naive_mth(leaves):
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + naive_mth(leaves[:k]) + naive_mth(leaves[k:])).digest()


def naive_path(m, leaves):
    n = len(leaves)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return naive_path(m, leaves[:k]) + [naive_mth(leaves[k:])]
    return naive_path(m - k, leaves[k:]) + [naive_mth(leaves[:k])]


def naive_subproof(m, leaves, b):
    n = len(leaves)
    if m == n:
        return [] if b else [naive_mth(leaves)]
    k = 1
    while k * 2 < n:
        k *= 2
    if m <= k:
        return naive_subproof(m, leaves[:k], b) + [naive_mth(leaves[k:])]
    return naive_subproof(m - k, leaves[k:], False) + [naive_mth(leaves[:k])]


def naive_proof(m, leaves):
    return naive_subproof(m, leaves, True)


def entry(i):
    return hashlib.sha256(b"entry %d" % i).digest()


# ---------------------------------------------------------------------------------------------
# A reference log: entries, Ed25519-signed checkpoints, tiles and entry bundles over HTTP.

class ReferenceLog:
    def __init__(self, origin="log.test/ref", key=None):
        self.origin = origin
        self.key = key or Ed25519PrivateKey.generate()
        self.vkey = tv.VerifierKey.from_public(origin, tv.SIG_ED25519, tv.raw_public_key(self.key))
        self.entries = []
        self.resources = {}  # path -> bytes, every tile of every checkpointed size
        self._mth_cache = {}

    def append(self, *entries):
        self.entries.extend(entries)

    def mth(self, a, b):
        """MTH(D[a:b]) with the hashes below memoised (perfect subtrees recur a lot)."""
        key = (a, b)
        if key not in self._mth_cache:
            n = b - a
            if n == 1:
                h = tv.leaf_hash(self.entries[a])
            else:
                k = 1
                while k * 2 < n:
                    k *= 2
                h = tv.node_hash(self.mth(a, a + k), self.mth(a + k, b))
            self._mth_cache[key] = h
        return self._mth_cache[key]

    def root(self, size):
        return hashlib.sha256(b"").digest() if size == 0 else self.mth(0, size)

    def checkpoint_text(self, size=None):
        size = len(self.entries) if size is None else size
        return f"{self.origin}\n{size}\n{tv.b64encode(self.root(size))}\n"

    def checkpoint(self, size=None, key=None, name=None):
        text = self.checkpoint_text(size)
        return text + "\n" + tv.sign_note_text(key or self.key, name or self.origin, text)

    def publish(self, size=None):
        """Makes the tiles and bundles of a tree size available (a log serves them once it
        has a checkpoint for that size)."""
        size = len(self.entries) if size is None else size
        for level, n, width in tv.tiles_for_size(size):
            span = 256 ** level
            hashes = b"".join(self.mth((n * 256 + i) * span, (n * 256 + i + 1) * span) for i in range(width))
            self.resources["/" + tv.tile_path(level, n, width)] = hashes
            if level == 0:
                bundle = b"".join(struct.pack(">H", len(e)) + e
                                  for e in self.entries[n * 256:n * 256 + width])
                self.resources["/" + tv.tile_path("entries", n, width)] = bundle
        self.resources["/checkpoint"] = self.checkpoint(size).encode()
        return self.resources["/checkpoint"].decode()

    def inclusion(self, index, size=None):
        size = len(self.entries) if size is None else size
        return tv.inclusion_proof(index, size, self.mth)

    def consistency(self, old, new=None):
        new = len(self.entries) if new is None else new
        return tv.consistency_proof(old, new, self.mth)

    def add_checkpoint_body(self, old, new=None, proof=None, checkpoint=None):
        new = len(self.entries) if new is None else new
        proof = self.consistency(old, new) if proof is None else proof
        lines = [f"old {old}"] + [tv.b64encode(h) for h in proof]
        return ("\n".join(lines) + "\n\n" + (checkpoint or self.checkpoint(new))).encode()


@contextlib.contextmanager
def serve_resources(resources):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = resources.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def run_cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = tv.main(list(argv))
    return code, out.getvalue()


# ---------------------------------------------------------------------------------------------

class SignedNoteVectors(unittest.TestCase):
    """The example of c2sp.org/signed-note@v1.0.0 "Verifier keys"."""
    VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
    NOTE = ("This is an example message.\n\n"
            "\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n")

    def test_vector_verifies(self):
        key = tv.VerifierKey.parse(self.VKEY)
        self.assertEqual((key.name, key.kid, key.sig_type), ("example.com/foo", 0x530d903a, 0x01))
        self.assertEqual(str(key), self.VKEY)
        note = tv.parse_note(self.NOTE)
        self.assertEqual(note.text, "This is an example message.\n")
        self.assertEqual(list(tv.verify_note(note, [key])), [self.VKEY])

    def test_changed_text_is_rejected(self):
        key = tv.VerifierKey.parse(self.VKEY)
        note = tv.parse_note(self.NOTE.replace("example message", "example massage"))
        with self.assertRaises(tv.VerifyError):
            tv.verify_note(note, [key])

    def test_signatures_from_unknown_keys_are_ignored(self):
        key = tv.VerifierKey.parse(self.VKEY)
        other = Ed25519PrivateKey.generate()
        # Same name, another key (so another key ID): ignored, the known one still verifies.
        extra = tv.sign_note_text(other, "example.com/foo", "This is an example message.\n")
        self.assertNotEqual(extra.split()[2][:8], self.NOTE.split()[-1][:8])
        note = tv.parse_note(self.NOTE + extra)
        self.assertEqual(len(note.signatures), 2)
        self.assertEqual(list(tv.verify_note(note, [key])), [self.VKEY])
        # Only unknown signatures: rejected.
        only = tv.parse_note("This is an example message.\n\n" + extra)
        with self.assertRaises(tv.VerifyError):
            tv.verify_note(only, [key])
        # Same key ID under another name: ignored as well.
        renamed = tv.parse_note(self.NOTE.replace("\u2014 example.com/foo", "\u2014 example.com/bar"))
        with self.assertRaises(tv.VerifyError):
            tv.verify_note(renamed, [key])

    def test_key_id_is_sha256_of_name_type_and_key(self):
        with self.assertRaises(tv.VerifyError):
            tv.VerifierKey.parse("example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")
        with self.assertRaises(tv.VerifyError):
            tv.VerifierKey.parse("example.com/bar+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k")

    def test_format_rules(self):
        bad = [
            "no blank line\n\u2014 example.com/foo AAAAAAA=\n",
            "text\n\n\u2014 example.com/foo Uw2Q\n",                         # too short
            "text\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnag=",   # no final newline
            "te\x01xt\n\n" + self.NOTE.split("\n\n")[1],                     # control character
            "text\n\n- example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq=\n",  # not an em dash
            "text\n\n",
        ]
        for b in bad:
            with self.subTest(note=b), self.assertRaises(tv.VerifyError):
                tv.parse_note(b)
        # The text may hold empty lines: the last blank line separates it from the signatures.
        text = "Ognuno sta solo sul cuor della terra\ntrafitto da un raggio di sole:\n\ned è subito sera.\n"
        note = tv.parse_note(text + "\n\u2014 quasimodo.example/salvatore NnugSzTjtVAewIS+Z/iJhUPeFDkO/5QQ2i5ddnGITLlC+EhfLW9oJKONrMouFSQU0xMcXxj99ihAQwaqP3ZekRwNtIc=\n")
        self.assertEqual(note.text, text)
        self.assertEqual(note.signatures[0].name, "quasimodo.example/salvatore")

    def test_sixteen_signatures_are_accepted(self):
        text = "many signers\n"
        keys = [Ed25519PrivateKey.generate() for _ in range(16)]
        sigs = "".join(tv.sign_note_text(k, f"signer.test/{i}", text) for i, k in enumerate(keys))
        note = tv.parse_note(text + "\n" + sigs)
        vkeys = [tv.VerifierKey.from_public(f"signer.test/{i}", 1, tv.raw_public_key(k)) for i, k in enumerate(keys)]
        self.assertEqual(len(tv.verify_note(note, vkeys)), 16)

    def test_checkpoint_example_parses(self):
        cp = tv.parse_checkpoint(
            "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
            "\u2014 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
            "\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==\n")
        self.assertEqual((cp.origin, cp.size), ("example.com/behind-the-sofa", 20852163))
        # The cosignature example is 4 + 72 bytes: the key ID, then timestamp 1679315147 (tlog-cosignature's example).
        sig = cp.note.signatures[1].sig
        self.assertEqual(len(sig), 72)
        self.assertEqual(struct.unpack(">Q", sig[:8])[0], 1679315147)
        for bad in ["o\n012\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "o\n12\nAAAA\n",
                    "\n12\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n", "o\n12\n"]:
            with self.subTest(text=bad), self.assertRaises(tv.VerifyError):
                tv.parse_checkpoint(bad + "\n\u2014 o AAAAAAAA\n")


class CosignatureFormat(unittest.TestCase):
    def test_message_and_verification(self):
        key = Ed25519PrivateKey.generate()
        text = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
        self.assertEqual(tv.cosignature_message(text, 1679315147),
                         b"cosignature/v1\ntime 1679315147\n" + text.encode())
        line = tv.cosign(key, "witness.test/w1", text, 1679315147)
        vkey = tv.VerifierKey.from_public("witness.test/w1", 0x04, tv.raw_public_key(key))
        note = tv.parse_note(text + "\n" + line)
        self.assertEqual(tv.verify_note(note, [vkey]), {str(vkey): 1679315147})
        # The same key as a type 0x01 key has another key ID: the cosignature is not its.
        as_note_key = tv.VerifierKey.from_public("witness.test/w1", 0x01, tv.raw_public_key(key))
        with self.assertRaises(tv.VerifyError):
            tv.verify_note(note, [as_note_key])
        # The timestamp is signed.
        raw = tv.b64decode(line.split()[2])
        forged = raw[:4] + struct.pack(">Q", 1679315148) + raw[12:]
        note = tv.parse_note(text + "\n\u2014 witness.test/w1 " + tv.b64encode(forged) + "\n")
        with self.assertRaises(tv.VerifyError):
            tv.verify_note(note, [vkey])


class MerkleAgainstNaive(unittest.TestCase):
    def test_roots(self):
        leaves = [entry(i) for i in range(300)]
        for n in range(0, 300):
            self.assertEqual(tv.root_from_leaf_hashes([tv.leaf_hash(x) for x in leaves[:n]]),
                             naive_mth(leaves[:n]), n)

    def test_inclusion_proofs(self):
        leaves = [entry(i) for i in range(80)]
        for n in range(1, 80):
            root = naive_mth(leaves[:n])
            for m in range(n):
                proof = naive_path(m, leaves[:n])
                tv.verify_inclusion(m, n, tv.leaf_hash(leaves[m]), proof, root)
                # The proof does not hold for another leaf, index, size or root.
                with self.assertRaises(tv.VerifyError):
                    tv.verify_inclusion(m, n, tv.leaf_hash(leaves[(m + 1) % 80]), proof, root)
                with self.assertRaises(tv.VerifyError):
                    tv.verify_inclusion(m, n + 1, tv.leaf_hash(leaves[m]), proof, naive_mth(leaves[:n + 1]))
                if n > 1:
                    with self.assertRaises(tv.VerifyError):
                        tv.verify_inclusion((m + 1) % n, n, tv.leaf_hash(leaves[m]), proof, root)
                    with self.assertRaises(tv.VerifyError):
                        tv.verify_inclusion(m, n, tv.leaf_hash(leaves[m]), proof[:-1], root)
            with self.assertRaises(tv.VerifyError):
                tv.verify_inclusion(n, n, tv.leaf_hash(leaves[0]), [], root)

    def test_consistency_proofs(self):
        leaves = [entry(i) for i in range(70)]
        roots = [naive_mth(leaves[:n]) for n in range(71)]
        for n in range(1, 71):
            for m in range(1, n + 1):
                proof = naive_proof(m, leaves[:n])
                tv.verify_consistency(m, n, roots[m], roots[n], proof)
                if m < n:
                    with self.assertRaises(tv.VerifyError):
                        tv.verify_consistency(m, n, roots[m - 1] if m > 1 else roots[n], roots[n], proof)
                    with self.assertRaises(tv.VerifyError):
                        tv.verify_consistency(m, n, roots[m], roots[n - 1], proof)
                    with self.assertRaises(tv.VerifyError):
                        tv.verify_consistency(m, n, roots[m], roots[n], proof[:-1])
                    with self.assertRaises(tv.VerifyError):
                        tv.verify_consistency(m, n, roots[m], roots[n], proof + [roots[0]])
        tv.verify_consistency(0, 5, b"", roots[5], [])
        with self.assertRaises(tv.VerifyError):
            tv.verify_consistency(0, 5, b"", roots[5], [roots[1]])
        with self.assertRaises(tv.VerifyError):
            tv.verify_consistency(6, 5, roots[6], roots[5], [])

    def test_proof_generation_matches_naive(self):
        log = ReferenceLog()
        log.append(*[entry(i) for i in range(100)])
        leaves = log.entries
        for n in (1, 2, 3, 7, 8, 9, 31, 64, 65, 100):
            for m in range(n):
                self.assertEqual(log.inclusion(m, n), naive_path(m, leaves[:n]))
            for m in range(1, n):
                self.assertEqual(log.consistency(m, n), naive_proof(m, leaves[:n]))


class Tiles(unittest.TestCase):
    def test_paths(self):
        self.assertEqual(tv.tile_path(0, 1234067), "tile/0/x001/x234/067")
        self.assertEqual(tv.tile_path(1, 0, 17), "tile/1/000.p/17")
        self.assertEqual(tv.tile_path("entries", 1000), "tile/entries/x001/000")
        self.assertEqual(tv.tile_path("entries", 5, 1), "tile/entries/005.p/1")
        self.assertEqual(tv.tile_index_path(999), "999")
        self.assertEqual(tv.tile_index_path(1000000), "x001/x000/000")

    def test_tile_set_of_the_texts_examples(self):
        t = tv.tiles_for_size(70000)
        self.assertEqual(sum(1 for l, n, w in t if l == 0 and w == 256), 273)
        self.assertIn((0, 273, 112), t)
        self.assertIn((1, 0, 256), t)
        self.assertIn((1, 1, 17), t)
        self.assertIn((2, 0, 1), t)
        self.assertEqual(len(t), 277)
        self.assertEqual(tv.tiles_for_size(256), [(0, 0, 256), (1, 0, 1)])
        self.assertEqual(tv.tiles_for_size(0), [])

    def test_tiles_recompute_roots_and_proofs(self):
        log = ReferenceLog()
        log.append(*[entry(i) for i in range(70000)])
        for size in (1, 2, 255, 256, 257, 511, 512, 1000, 65535, 65536, 65537, 70000):
            with self.subTest(size=size):
                tiles = {}
                for level, n, width in tv.tiles_for_size(size):
                    span = 256 ** level
                    tiles[(level, n)] = b"".join(log.mth((n * 256 + i) * span, (n * 256 + i + 1) * span)
                                                 for i in range(width))
                hashes = tv.TileHashes(size, tiles)
                self.assertEqual(hashes.root(), log.root(size))
                for old in {1, size // 3, size - 1} - {0}:
                    if old < size:
                        proof = tv.consistency_proof(old, size, hashes)
                        self.assertEqual(proof, log.consistency(old, size))
                        tv.verify_consistency(old, size, log.root(old), log.root(size), proof)
                index = size // 2
                tv.verify_inclusion(index, size, tv.leaf_hash(log.entries[index]),
                                    tv.inclusion_proof(index, size, hashes), log.root(size))

    def test_entry_bundles(self):
        bundle = struct.pack(">H", 32) + b"a" * 32 + struct.pack(">H", 3) + b"abc"
        self.assertEqual(tv.parse_entry_bundle(bundle), [b"a" * 32, b"abc"])
        with self.assertRaises(tv.VerifyError):
            tv.parse_entry_bundle(bundle + b"\x00")
        with self.assertRaises(tv.VerifyError):
            tv.parse_entry_bundle(struct.pack(">H", 32) + b"a" * 31)


class RFC8785(unittest.TestCase):
    def test_property_order_is_utf16(self):
        # RFC 8785 section 3.2.3's sorting example.
        doc = json.loads('{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",'
                         '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control",'
                         '"\\u00f6":"Latin Small Letter O With Diaeresis"}')
        out = tv.canonical_json(doc).decode()
        keys = [k for k in json.loads(out, object_pairs_hook=lambda p: [k for k, _ in p])]
        self.assertEqual(keys, ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001F600", "\ufb33"])

    def test_serialisation(self):
        doc = tv.json_loads('{ "b": [1, -2, true, false, null], "a": "x\\"\\\\\\n\\u001f\\u00e9\\u2028/",\n "c": {} }')
        self.assertEqual(tv.canonical_json(doc),
                         '{"a":"x\\"\\\\\\n\\u001f\u00e9\u2028/","b":[1,-2,true,false,null],"c":{}}'.encode())

    def test_refusals(self):
        for bad in ['{"a":1,"a":2}', '{"a":1.5}', '{"a":NaN}']:
            with self.subTest(doc=bad), self.assertRaises(tv.VerifyError):
                tv.canonical_json(tv.json_loads(bad))

    def test_commitment(self):
        receipt = {"v": 1, "id": "r1", "display": None, "sub": "u1"}
        self.assertEqual(tv.receipt_commitment(receipt),
                         hashlib.sha256(b'{"display":null,"id":"r1","sub":"u1","v":1}').digest())


class WitnessTests(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log = ReferenceLog()
        self.witness = wt.Witness(self.dir.name, "witness.test/w1", [(self.log.origin, str(self.log.vkey))],
                                  clock=lambda: 1700000000)
        self.server = wt.serve(self.witness, "127.0.0.1", 0)
        self.port = self.server.server_address[1]

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        self.dir.cleanup()

    def post(self, body, path="/add-checkpoint"):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        conn.request("POST", path, body=body, headers={"Content-Type": "text/plain"})
        resp = conn.getresponse()
        out = resp.status, resp.getheader("Content-Type"), resp.read()
        conn.close()
        return out

    def cosigned(self, size=None):
        """Grows the log and submits it from the witness's recorded size; returns the response."""
        old = self.witness.recorded(self.log.origin)[0]
        return self.post(self.log.add_checkpoint_body(old, size))

    def test_good_add_checkpoint_is_cosigned_and_verifies(self):
        self.log.append(*[entry(i) for i in range(5)])
        status, _, body = self.cosigned()
        self.assertEqual(status, 200, body)
        lines = body.decode().splitlines(keepends=True)
        self.assertTrue(lines and all(l.startswith("\u2014 witness.test/w1 ") for l in lines))
        note = tv.parse_checkpoint(self.log.checkpoint() + body.decode())
        self.assertEqual(tv.verify_note(note.note, [self.witness.vkey]), {str(self.witness.vkey): 1700000000})
        checks = tv.verify_checkpoint(note, self.log.vkey, [self.witness.vkey], 1)
        self.assertTrue(all(ok for _, ok, _ in checks) and len(checks) == 4, checks)
        # It grows from there with a consistency proof, many times.
        for n in (6, 8, 9, 17, 64, 300, 301):
            self.log.append(*[entry(i) for i in range(len(self.log.entries), n)])
            status, _, body = self.cosigned()
            self.assertEqual(status, 200, (n, body))
            self.assertEqual(self.witness.recorded(self.log.origin), (n, self.log.root(n)))
        # Submitting the recorded checkpoint again (old == size, same root) is cosigned again.
        self.assertEqual(self.cosigned()[0], 200)

    def test_wrong_old_size_is_409_with_the_recorded_size(self):
        self.log.append(*[entry(i) for i in range(10)])
        self.assertEqual(self.cosigned()[0], 200)
        self.log.append(*[entry(i) for i in range(10, 20)])
        for old in (0, 5, 11):
            status, ctype, body = self.post(self.log.add_checkpoint_body(old))
            self.assertEqual((status, ctype, body), (409, "text/x.tlog.size", b"10\n"), old)
        # A client that knows nothing asks with old 0 and learns the size the same way.
        status, ctype, body = self.post(self.log.add_checkpoint_body(0, 20, proof=[]))
        self.assertEqual((status, ctype, body), (409, "text/x.tlog.size", b"10\n"))

    def test_bad_consistency_proof_is_422_and_changes_nothing(self):
        self.log.append(*[entry(i) for i in range(10)])
        self.assertEqual(self.cosigned()[0], 200)
        self.log.append(*[entry(i) for i in range(10, 13)])
        good = self.log.consistency(10, 13)
        for proof in ([], good[:-1], good + [good[0]], [hashlib.sha256(b"x").digest()] + good[1:]):
            status, _, body = self.post(self.log.add_checkpoint_body(10, proof=proof))
            self.assertEqual(status, 422, (proof, body))
        self.assertEqual(self.witness.recorded(self.log.origin)[0], 10)
        # A forked log (another entry at index 10) signed by the same key: the proof cannot hold.
        fork = ReferenceLog(self.log.origin, self.log.key)
        fork.append(*self.log.entries[:9], entry(999), *self.log.entries[10:])
        status, _, _ = self.post(fork.add_checkpoint_body(10))
        self.assertEqual(status, 422)
        # The same size with another root is a 409.
        same_size = ReferenceLog(self.log.origin, self.log.key)
        same_size.append(*self.log.entries[:9], entry(999))
        status, ctype, body = self.post(same_size.add_checkpoint_body(10, 10, []))
        self.assertEqual((status, ctype, body), (409, "text/x.tlog.size", b"10\n"))
        self.assertEqual(self.post(self.log.add_checkpoint_body(10))[0], 200)

    def test_checkpoint_signed_by_another_key_is_403(self):
        self.log.append(entry(0))
        other = Ed25519PrivateKey.generate()
        status, _, _ = self.post(self.log.add_checkpoint_body(0, checkpoint=self.log.checkpoint(key=other)))
        self.assertEqual(status, 403)
        # A known key's signature that does not verify (the text changed after signing).
        cp = self.log.checkpoint()
        tampered = cp.replace("\n1\n", "\n2\n", 1)
        status, _, _ = self.post(f"old 0\n\n{tampered}".encode())
        self.assertEqual(status, 403)
        self.assertEqual(self.witness.recorded(self.log.origin)[0], 0)

    def test_unknown_origin_is_404(self):
        stranger = ReferenceLog("log.test/stranger")
        stranger.append(entry(0))
        status, _, _ = self.post(stranger.add_checkpoint_body(0))
        self.assertEqual(status, 404)
        self.assertEqual(self.post(b"old 0\n\n", "/other")[0], 404)

    def test_malformed_requests_are_400(self):
        self.log.append(*[entry(i) for i in range(4)])
        cp = self.log.checkpoint()
        bodies = [b"", b"old 0\n", f"old 01\n\n{cp}".encode(), f"new 0\n\n{cp}".encode(),
                  f"old 0\nnot base64!\n\n{cp}".encode(), f"old 0\nAAAA\n\n{cp}".encode(),
                  b"old 0\n\nno checkpoint\n", f"old 5\n\n{cp}".encode(),  # old size above the size
                  ("old 0\n" + "".join(tv.b64encode(entry(i)) + "\n" for i in range(64)) + "\n" + cp).encode(),
                  b"\xff\xfe"]
        for body in bodies:
            with self.subTest(body=body[:40]):
                self.assertEqual(self.post(body)[0], 400)
        self.assertEqual(self.witness.recorded(self.log.origin)[0], 0)

    def test_state_survives_a_restart(self):
        self.log.append(*[entry(i) for i in range(7)])
        self.assertEqual(self.cosigned()[0], 200)
        again = wt.Witness(self.dir.name, "witness.test/w1", [(self.log.origin, str(self.log.vkey))])
        self.assertEqual(again.recorded(self.log.origin), (7, self.log.root(7)))
        self.assertEqual(str(again.vkey), str(self.witness.vkey))
        with self.assertRaises(wt.Refusal) as refused:
            again.add_checkpoint(self.log.add_checkpoint_body(0))
        self.assertEqual((refused.exception.status, refused.exception.body), (409, b"7\n"))

    def test_concurrent_submissions_of_one_old_size_cosign_once(self):
        self.log.append(*[entry(i) for i in range(3)])
        self.assertEqual(self.cosigned()[0], 200)
        bodies = []
        for n in range(4, 12):
            self.log.append(entry(n))
            bodies.append(self.log.add_checkpoint_body(3))
        results = []
        threads = [threading.Thread(target=lambda b=b: results.append(self.post(b)[0])) for b in bodies]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(sorted(results), [200] + [409] * (len(bodies) - 1))

    def test_witness_cli_prints_its_vkey(self):
        import subprocess
        proc = subprocess.Popen([sys.executable, wt.__file__, "--listen", "127.0.0.1:0", "--state",
                                 os.path.join(self.dir.name, "cli"), "--log", f"{self.log.origin} {self.log.vkey}",
                                 "--name", "witness.test/cli", "--prefix", "/w"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            vkey_line = proc.stdout.readline().split()
            listening = proc.stdout.readline().split()
            self.assertEqual(vkey_line[0], "vkey")
            vkey = tv.VerifierKey.parse(vkey_line[1])
            self.assertEqual((vkey.name, vkey.sig_type), ("witness.test/cli", 0x04))
            url = listening[1]
            self.log.append(entry(0))
            host, port = url[len("http://"):].split("/")[0].split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            conn.request("POST", "/w/add-checkpoint", body=self.log.add_checkpoint_body(0))
            resp = conn.getresponse()
            body = resp.read().decode()
            conn.close()
            self.assertEqual(resp.status, 200)
            cp = tv.parse_checkpoint(self.log.checkpoint() + body)
            self.assertIn(str(vkey), tv.verify_note(cp.note, [vkey]))
        finally:
            proc.terminate()
            proc.wait(10)
            proc.stdout.close()


class VerifierAgainstReferenceLog(unittest.TestCase):
    """tlog_verify.py's commands against the reference log served over HTTP, with two witnesses."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log = ReferenceLog("log.test/receipts")
        self.witnesses = [wt.Witness(os.path.join(self.dir.name, f"w{i}"), f"witness.test/w{i}",
                                     [(self.log.origin, str(self.log.vkey))]) for i in (1, 2)]

    def tearDown(self):
        self.dir.cleanup()

    def cosign_all(self, witnesses=None):
        cp = self.log.publish()
        for w in witnesses if witnesses is not None else self.witnesses:
            old = w.recorded(self.log.origin)[0]
            cp += w.add_checkpoint(self.log.add_checkpoint_body(old, checkpoint=self.log.checkpoint())).decode()
        self.log.resources["/checkpoint"] = cp.encode()
        return cp

    def file(self, name, data):
        path = os.path.join(self.dir.name, name)
        with open(path, "w" if isinstance(data, str) else "wb") as f:
            f.write(data)
        return path

    def receipts(self, n, start=0):
        out = []
        for i in range(start, start + n):
            r = {"v": 1, "id": f"r{i}", "sub": "user-1", "action": {"type": "pay", "amount": i},
                 "display": None, "breakGlass": True, "note": "caf\u00e9 \u20ac"}
            out.append(r)
            self.log.append(tv.receipt_commitment(r))
        return out

    def wkeys(self):
        return [a for w in self.witnesses for a in ("--witness-key", str(w.vkey))]

    def test_checkpoint_tiles_proof_and_consistency(self):
        receipts = self.receipts(300)
        old_cp = self.cosign_all()
        old_file = self.file("old", old_cp)
        receipts += self.receipts(200, 300)
        cp = self.cosign_all()
        with serve_resources(self.log.resources) as base:
            code, out = run_cli("checkpoint", "--url", base, "--log-key", str(self.log.vkey), *self.wkeys(),
                                "--min-witnesses", "2")
            self.assertEqual(code, 0, out)
            self.assertIn("ok   at least 2 witness cosignature(s)", out)
            code, out = run_cli("tiles", "--url", base, "--log-key", str(self.log.vkey))
            self.assertEqual(code, 0, out)
            self.assertIn("ok   the tiles recompute the checkpoint's root hash", out)
            self.assertIn("ok   500 entries", out)
            code, out = run_cli("consistency", "--url", base, "--old", old_file, "--log-key", str(self.log.vkey))
            self.assertEqual(code, 0, out)
            for index in (0, 299, 300, 499):
                proof = (f"c2sp.org/tlog-proof@v1\nindex {index}\n"
                         + "".join(tv.b64encode(h) + "\n" for h in self.log.inclusion(index)) + "\n" + cp)
                resp = self.file(f"resp{index}.json", json.dumps({"receipt": receipts[index], "log": proof}, indent=2))
                code, out = run_cli("proof", "--response", resp, "--log-key", str(self.log.vkey), *self.wkeys(),
                                    "--min-witnesses", "2")
                self.assertEqual(code, 0, out)
                # Tampered receipt, a proof for another index, one witness short: each refused.
                bad = dict(receipts[index], sub="user-2")
                resp = self.file("bad.json", json.dumps({"receipt": bad, "log": proof}))
                self.assertEqual(run_cli("proof", "--response", resp, "--log-key", str(self.log.vkey))[0], 1)
                other = proof.replace(f"index {index}\n", f"index {index ^ 1}\n")
                resp = self.file("bad.json", json.dumps({"receipt": receipts[index], "log": other}))
                self.assertEqual(run_cli("proof", "--response", resp, "--log-key", str(self.log.vkey))[0], 1)
            only_one = (f"c2sp.org/tlog-proof@v1\nindex 7\n"
                        + "".join(tv.b64encode(h) + "\n" for h in self.log.inclusion(7)) + "\n"
                        + cp[:cp.index("\u2014 witness.test/w2")])
            resp = self.file("one.json", json.dumps({"receipt": receipts[7], "log": only_one}))
            code, out = run_cli("proof", "--response", resp, "--log-key", str(self.log.vkey), *self.wkeys(),
                                "--min-witnesses", "2")
            self.assertEqual(code, 1, out)
            self.assertIn("FAIL at least 2 witness cosignature(s): 1 verified", out)
            self.assertEqual(run_cli("proof", "--response", resp, "--log-key", str(self.log.vkey), *self.wkeys(),
                                     "--min-witnesses", "1")[0], 0)
            # The same proof as base64 of its text, and as a .tlog-proof file with the receipt apart.
            resp = self.file("b64.json", json.dumps({"receipt": receipts[7], "log": tv.b64encode(only_one.encode())}))
            self.assertEqual(run_cli("proof", "--response", resp, "--log-key", str(self.log.vkey))[0], 0)
            code, out = run_cli("proof", "--receipt", self.file("r7.json", json.dumps(receipts[7])),
                                "--proof", self.file("r7.tlog-proof", only_one), "--log-key", str(self.log.vkey))
            self.assertEqual(code, 0, out)
            code, out = run_cli("proof", "--commitment", tv.receipt_commitment(receipts[8]).hex(),
                                "--proof", self.file("r7.tlog-proof", only_one), "--log-key", str(self.log.vkey))
            self.assertEqual(code, 1, out)
            # Another log key (same origin name): the checkpoint is refused.
            impostor = ReferenceLog(self.log.origin)
            code, out = run_cli("checkpoint", "--url", base, "--log-key", str(impostor.vkey))
            self.assertEqual(code, 1, out)

    def test_tampered_tiles_and_entries_are_found(self):
        self.receipts(300)
        self.cosign_all()
        good = dict(self.log.resources)
        cases = {
            "/tile/0/001.p/44": lambda b: b[:32] + bytes(32) + b[64:],
            "/tile/1/000.p/1": lambda b: bytes(32),
            "/tile/entries/001.p/44": lambda b: b[:-34] + struct.pack(">H", 31) + b[-32:-1],
        }
        for path, change in cases.items():
            with self.subTest(path=path):
                self.log.resources.clear()
                self.log.resources.update(good)
                self.log.resources[path] = change(good[path])
                with serve_resources(self.log.resources) as base:
                    code, out = run_cli("tiles", "--url", base, "--log-key", str(self.log.vkey))
                self.assertEqual(code, 1, out)
                self.assertIn("FAIL", out)

    def test_a_dropped_partial_tile_is_read_from_the_full_one(self):
        self.receipts(100)
        old_cp = self.log.publish()
        self.receipts(300, 100)
        self.log.publish()
        for path in ("/tile/0/000.p/100", "/tile/entries/000.p/100"):
            del self.log.resources[path]
        with serve_resources(self.log.resources) as base:
            code, out = run_cli("tiles", "--url", base, "--checkpoint", self.file("old", old_cp),
                                "--log-key", str(self.log.vkey))
        self.assertEqual(code, 0, out)
        self.assertIn("ok   100 entries", out)

    def test_inconsistent_checkpoints_are_found(self):
        self.receipts(40)
        old_file = self.file("old", self.log.publish())
        fork = ReferenceLog(self.log.origin, self.log.key)
        fork.append(*self.log.entries[:20], entry(5000), *self.log.entries[21:], entry(5001))
        fork.publish()
        with serve_resources(fork.resources) as base:
            code, out = run_cli("consistency", "--url", base, "--old", old_file, "--log-key", str(self.log.vkey))
        self.assertEqual(code, 1, out)
        self.assertIn("FAIL consistency 40", out)

    def test_witness_refuses_the_fork_the_verifier_finds(self):
        self.receipts(10)
        self.cosign_all()
        fork = ReferenceLog(self.log.origin, self.log.key)
        fork.append(*self.log.entries[:9], entry(777), entry(778))
        with self.assertRaises(wt.Refusal) as refused:
            self.witnesses[0].add_checkpoint(fork.add_checkpoint_body(10))
        self.assertEqual(refused.exception.status, 422)


if __name__ == "__main__":
    unittest.main()
