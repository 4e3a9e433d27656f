#!/usr/bin/env python3
"""An independent verifier for Latchkey's transparency log, written from the C2SP texts
(signed-note v1.0.0, tlog-checkpoint v1.0.0, tlog-cosignature v1.0.1, tlog-tiles, tlog-proof@v1)
and RFC 9162 section 2.1, with no Latchkey code in it.

As a module it gives the primitives (notes, verifier keys, checkpoints, cosignatures, Merkle
hashing and proof verification, tile paths, RFC 8785). As a command it checks a live log:

  tlog_verify.py checkpoint  --url BASE|--file F --log-key VKEY [--witness-key VKEY]... [--min-witnesses N] [--save F]
  tlog_verify.py tiles       --url BASE --log-key VKEY [--checkpoint F]
  tlog_verify.py proof       (--response F|URL | --receipt F --proof F | --commitment HEX --proof F)
                             --log-key VKEY [--witness-key VKEY]... [--min-witnesses N] [--bearer TOKEN]
  tlog_verify.py consistency --url BASE --old F [--new F] --log-key VKEY

BASE is the log's prefix (for Latchkey `http://host:port/v1/transparency`). Every check is printed
as `ok   <check>` or `FAIL <check>: <reason>`; the exit status is 0 only when every check holds,
1 when one fails, 2 on bad usage.

Needs Python 3 and python3-cryptography (Debian 12) for Ed25519; nothing from PyPI.
"""

import argparse
import base64
import binascii
import gzip
import hashlib
import json
import struct
import sys
import urllib.error
import urllib.request

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

# Signature type bytes (signed-note "Signature types").
SIG_ED25519 = 0x01
SIG_COSIGNATURE_V1 = 0x04

MAX_SIGNATURES = 64  # signed-note: verifiers MUST accept at least 16.
EM_DASH = "\u2014"


class VerifyError(Exception):
    """A check that did not hold; the message says which and why."""


# ---------------------------------------------------------------------------------------------
# base64 (RFC 4648 section 4, standard alphabet, padded)

def b64decode(text):
    if isinstance(text, str):
        try:
            text = text.encode("ascii")
        except UnicodeEncodeError:
            raise VerifyError("not base64: non-ASCII characters")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise VerifyError(f"not base64: {e}")


def b64encode(data):
    return base64.b64encode(data).decode("ascii")


def parse_decimal(text, what):
    """An ASCII decimal with no leading zeroes (unless it is 0)."""
    if not text or not text.isascii() or not text.isdigit():
        raise VerifyError(f"{what} is not a decimal: {text!r}")
    if len(text) > 1 and text[0] == "0":
        raise VerifyError(f"{what} has a leading zero: {text!r}")
    value = int(text)
    if value >= 1 << 63:
        raise VerifyError(f"{what} is too large: {text}")
    return value


# ---------------------------------------------------------------------------------------------
# Verifier keys and signed notes (c2sp.org/signed-note@v1.0.0)

def key_id(name, sig_type, public_key):
    """key ID = SHA-256(key name || 0x0A || signature type || public key)[:4], as a uint32."""
    digest = hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([sig_type]) + public_key).digest()
    return struct.unpack(">I", digest[:4])[0]


def valid_key_name(name):
    return bool(name) and "+" not in name and not any(c.isspace() for c in name)


class VerifierKey:
    """A vkey `<key name>+hex(32-bit key ID)+base64(signature type || public key)`."""

    def __init__(self, name, kid, sig_type, public_key):
        self.name, self.kid, self.sig_type, self.public_key = name, kid, sig_type, public_key
        self._ed = Ed25519PublicKey.from_public_bytes(public_key)

    @classmethod
    def parse(cls, text):
        text = text.strip()
        parts = text.split("+", 2)
        if len(parts) != 3:
            raise VerifyError(f"a verifier key has three '+'-separated parts: {text!r}")
        name, hex_id, material = parts
        if not valid_key_name(name):
            raise VerifyError(f"bad key name in verifier key: {name!r}")
        if len(hex_id) != 8 or any(c not in "0123456789abcdef" for c in hex_id):
            raise VerifyError(f"the key ID is not 8 lowercase hex digits: {hex_id!r}")
        raw = b64decode(material)
        if len(raw) != 33 or raw[0] not in (SIG_ED25519, SIG_COSIGNATURE_V1):
            raise VerifyError(
                "only Ed25519 (0x01) and cosignature/v1 (0x04) verifier keys with a 32-byte key are supported")
        kid = int(hex_id, 16)
        if kid != key_id(name, raw[0], raw[1:]):
            raise VerifyError(f"the key ID {hex_id} is not the one the name, type and key give")
        return cls(name, kid, raw[0], raw[1:])

    @classmethod
    def from_public(cls, name, sig_type, public_key):
        return cls(name, key_id(name, sig_type, public_key), sig_type, public_key)

    def __str__(self):
        return f"{self.name}+{self.kid:08x}+{b64encode(bytes([self.sig_type]) + self.public_key)}"

    def verify(self, message, signature):
        try:
            self._ed.verify(signature, message)
            return True
        except InvalidSignature:
            return False


class Signature:
    def __init__(self, name, kid, sig):
        self.name, self.kid, self.sig = name, kid, sig

    def line(self):
        return f"{EM_DASH} {self.name} {b64encode(struct.pack('>I', self.kid) + self.sig)}\n"


class Note:
    def __init__(self, text, signatures):
        self.text = text              # str, ends in "\n", without the separating blank line
        self.signatures = signatures  # [Signature]

    def text_bytes(self):
        return self.text.encode("utf-8")


def parse_note(data):
    """Splits a signed note into its text and signature lines, enforcing the format rules."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise VerifyError("the note is not valid UTF-8")
    for c in data:
        if c < " " and c != "\n":
            raise VerifyError(f"the note contains a control character U+{ord(c):04X}")
    sep = data.rfind("\n\n")
    if sep < 0:
        raise VerifyError("the note has no blank line before its signatures")
    text, sig_block = data[:sep + 1], data[sep + 2:]
    if not sig_block.endswith("\n"):
        raise VerifyError("the note's last signature line does not end in a newline")
    lines = sig_block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise VerifyError(f"the note has more than {MAX_SIGNATURES} signatures")
    signatures = []
    for line in lines:
        if not line.startswith(EM_DASH + " "):
            raise VerifyError(f"not a signature line: {line!r}")
        fields = line[2:].split(" ")
        if len(fields) != 2 or not valid_key_name(fields[0]):
            raise VerifyError(f"malformed signature line: {line!r}")
        raw = b64decode(fields[1])
        if len(raw) < 5:
            raise VerifyError(f"signature too short: {line!r}")
        signatures.append(Signature(fields[0], struct.unpack(">I", raw[:4])[0], raw[4:]))
    if not signatures:
        raise VerifyError("the note has no signatures")
    return Note(text, signatures)


def cosignature_message(note_text, timestamp):
    """tlog-cosignature: `cosignature/v1`, `time <ts>`, then the checkpoint's note text."""
    return f"cosignature/v1\ntime {timestamp}\n".encode("ascii") + note_text.encode("utf-8")


def verify_signature(key, note, sig):
    """Verifies one signature line made by `key` (same name and key ID) on the note.
    Returns the cosignature timestamp for a 0x04 key, None for an Ed25519 note key."""
    if key.sig_type == SIG_ED25519:
        if len(sig.sig) != 64 or not key.verify(note.text_bytes(), sig.sig):
            raise VerifyError(f"the signature by {key.name} does not verify")
        return None
    if len(sig.sig) != 72:
        raise VerifyError(f"the cosignature by {key.name} is not a 72-byte timestamped_signature")
    timestamp = struct.unpack(">Q", sig.sig[:8])[0]
    if timestamp > (1 << 63) - 1:
        raise VerifyError(f"the cosignature by {key.name} has a timestamp above 2^63-1")
    if not key.verify(cosignature_message(note.text, timestamp), sig.sig[8:]):
        raise VerifyError(f"the cosignature by {key.name} does not verify")
    return timestamp


def verify_note(note, keys):
    """Returns {vkey string: timestamp-or-None} for every known key whose signature verifies.
    Unknown signatures are ignored; a known key's bad signature rejects the note (signed-note);
    no verified known signature rejects it too."""
    verified = {}
    for sig in note.signatures:
        for key in keys:
            if key.name == sig.name and key.kid == sig.kid:
                verified[str(key)] = verify_signature(key, note, sig)
    if not verified:
        raise VerifyError("no signature from a known key")
    return verified


def raw_public_key(private_key):
    from cryptography.hazmat.primitives import serialization
    return private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def sign_note_text(private_key, name, text):
    """An Ed25519 (0x01) signature line over a note text, as a log makes it."""
    pub = raw_public_key(private_key)
    return Signature(name, key_id(name, SIG_ED25519, pub), private_key.sign(text.encode("utf-8"))).line()


def cosign(private_key, name, note_text, timestamp):
    """A cosignature/v1 (0x04) signature line, as a witness makes it."""
    pub = raw_public_key(private_key)
    sig = struct.pack(">Q", timestamp) + private_key.sign(cosignature_message(note_text, timestamp))
    return Signature(name, key_id(name, SIG_COSIGNATURE_V1, pub), sig).line()


# ---------------------------------------------------------------------------------------------
# Checkpoints (c2sp.org/tlog-checkpoint@v1.0.0)

class Checkpoint:
    def __init__(self, note, origin, size, root, extensions):
        self.note, self.origin, self.size, self.root, self.extensions = note, origin, size, root, extensions

    @property
    def text(self):
        return self.note.text


def parse_checkpoint(data):
    note = parse_note(data)
    lines = note.text[:-1].split("\n")
    if len(lines) < 3:
        raise VerifyError("a checkpoint has at least three lines")
    origin, size_text, root_text = lines[:3]
    if not origin:
        raise VerifyError("the checkpoint's origin is empty")
    size = parse_decimal(size_text, "the checkpoint's tree size")
    root = b64decode(root_text)
    if len(root) != 32:
        raise VerifyError("the checkpoint's root hash is not 32 bytes")
    if any(not line for line in lines[3:]):
        raise VerifyError("a checkpoint extension line is empty")
    return Checkpoint(note, origin, size, root, lines[3:])


def verify_checkpoint(checkpoint, log_key, witness_keys=(), min_witnesses=0, origin=None):
    """The log's signature (its key's name must be the origin unless `origin` is given) and the
    cosignatures of the witnesses given; returns the checks made as (description, ok, detail),
    ok None for a note that is no failure (a witness that did not cosign: the count decides)."""
    checks = []
    expected_origin = origin if origin is not None else log_key.name
    checks.append((f"checkpoint origin is {expected_origin!r}", checkpoint.origin == expected_origin,
                   f"it is {checkpoint.origin!r}"))
    try:
        verify_note(checkpoint.note, [log_key])
        checks.append((f"checkpoint signed by the log key {log_key.name}", True, ""))
    except VerifyError as e:
        checks.append((f"checkpoint signed by the log key {log_key.name}", False, str(e)))
    good = 0
    for wkey in witness_keys:
        mine = [s for s in checkpoint.note.signatures if s.name == wkey.name and s.kid == wkey.kid]
        if not mine:
            checks.append((f"no cosignature by {wkey.name}", None, ""))
            continue
        try:
            ts = verify_note(checkpoint.note, [wkey])[str(wkey)]
            good += 1
            checks.append((f"cosignature by {wkey.name} (time {ts})", True, ""))
        except VerifyError as e:
            checks.append((f"cosignature by {wkey.name}", False, str(e)))
    if min_witnesses:
        checks.append((f"at least {min_witnesses} witness cosignature(s)", good >= min_witnesses,
                       f"{good} verified"))
    return checks


# ---------------------------------------------------------------------------------------------
# Merkle trees (RFC 9162 section 2.1)

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(data):
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def largest_power_of_two_below(n):
    """The largest power of two k with k < n (n > 1)."""
    k = 1
    while k << 1 < n:
        k <<= 1
    return k


def root_from_leaf_hashes(hashes):
    """MTH over a list of leaf hashes, iteratively: fold the perfect subtrees right to left."""
    if not hashes:
        return EMPTY_ROOT
    stack = []  # (height, hash) of perfect subtrees, left to right
    for h in hashes:
        height = 0
        while stack and stack[-1][0] == height:
            h = node_hash(stack.pop()[1], h)
            height += 1
        stack.append((height, h))
    h = stack.pop()[1]
    while stack:
        h = node_hash(stack.pop()[1], h)
    return h


def verify_inclusion(index, size, leaf, proof, root):
    """RFC 9162 section 2.1.3.2."""
    if index >= size:
        raise VerifyError(f"index {index} is not below the tree size {size}")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise VerifyError("the inclusion proof is longer than the tree allows")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerifyError("the inclusion proof is shorter than the tree needs")
    if r != root:
        raise VerifyError("the inclusion proof does not lead to the root hash")


def verify_consistency(first, second, first_hash, second_hash, proof):
    """RFC 9162 section 2.1.4.2, with the two cases it leaves to the caller: an empty old tree
    (the proof must be empty) and equal sizes (the proof must be empty and the roots equal)."""
    if first > second:
        raise VerifyError(f"the old size {first} is above the new size {second}")
    if first == 0:
        if proof:
            raise VerifyError("a consistency proof from the empty tree must be empty")
        return
    if first == second:
        if proof:
            raise VerifyError("a consistency proof between equal sizes must be empty")
        if first_hash != second_hash:
            raise VerifyError("equal sizes with different root hashes")
        return
    if not proof:
        raise VerifyError("the consistency proof is empty")
    path = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, first_hash)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise VerifyError("the consistency proof is longer than the trees allow")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerifyError("the consistency proof is shorter than the trees need")
    if fr != first_hash:
        raise VerifyError("the consistency proof does not lead to the old root hash")
    if sr != second_hash:
        raise VerifyError("the consistency proof does not lead to the new root hash")


def inclusion_proof(index, size, subtree):
    """PATH(m, D[0:n]) of RFC 9162 section 2.1.3.1, with `subtree(a, b)` = MTH(D[a:b])."""
    def path(m, a, b):
        n = b - a
        if n == 1:
            return []
        k = largest_power_of_two_below(n)
        if m < k:
            return path(m, a, a + k) + [subtree(a + k, b)]
        return path(m - k, a + k, b) + [subtree(a, a + k)]
    return path(index, 0, size)


def consistency_proof(first, second, subtree):
    """PROOF(m, D[0:n]) of RFC 9162 section 2.1.4.1, with `subtree(a, b)` = MTH(D[a:b])."""
    def subproof(m, a, b, complete):
        n = b - a
        if m == n:
            return [] if complete else [subtree(a, b)]
        k = largest_power_of_two_below(n)
        if m <= k:
            return subproof(m, a, a + k, complete) + [subtree(a + k, b)]
        return subproof(m - k, a + k, b, False) + [subtree(a, a + k)]
    if first == 0 or first == second:
        return []
    return subproof(first, 0, second, True)


# ---------------------------------------------------------------------------------------------
# Tiles (c2sp.org/tlog-tiles)

TILE_WIDTH = 256
HASH_SIZE = 32


def tile_index_path(n):
    """`<N>` as zero-padded 3-digit elements, all but the last prefixed with `x`."""
    if n < 0:
        raise ValueError("negative tile index")
    groups = []
    while True:
        groups.append(n % 1000)
        n //= 1000
        if n == 0:
            break
    groups.reverse()
    return "/".join([f"x{g:03d}" for g in groups[:-1]] + [f"{groups[-1]:03d}"])


def tile_path(level, n, width=TILE_WIDTH):
    """`tile/<L>/<N>[.p/<W>]`, or `tile/entries/<N>[.p/<W>]` when level is "entries"."""
    if not 1 <= width <= TILE_WIDTH:
        raise ValueError("a tile holds 1 to 256 hashes")
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{tile_index_path(n)}{suffix}"


def tiles_for_size(size):
    """Every (level, index, width) tile of a tree of `size` leaves, full and partial."""
    out = []
    level = 0
    while True:
        span = TILE_WIDTH ** level      # leaves per hash at this level
        hashes = size // span           # full subtrees at this level
        if hashes == 0:
            break
        for n in range(hashes // TILE_WIDTH):
            out.append((level, n, TILE_WIDTH))
        if hashes % TILE_WIDTH:
            out.append((level, hashes // TILE_WIDTH, hashes % TILE_WIDTH))
        level += 1
    return out


def parse_entry_bundle(data):
    """Big-endian uint16 length-prefixed entries."""
    entries, i = [], 0
    while i < len(data):
        if i + 2 > len(data):
            raise VerifyError("the entry bundle ends inside a length prefix")
        length = struct.unpack(">H", data[i:i + 2])[0]
        i += 2
        if i + length > len(data):
            raise VerifyError("the entry bundle ends inside an entry")
        entries.append(data[i:i + length])
        i += length
    return entries


class TileHashes:
    """MTH(D[a:b]) for any range of a tree of `size`, from that tree's tiles. `tiles` maps
    (level, index) to the tile's bytes (a partial tile where the tree has one)."""

    def __init__(self, size, tiles):
        self.size, self.tiles = size, tiles

    def stored(self, level, k):
        """The k-th hash at tile level `level`: MTH of leaves [k*256^l, (k+1)*256^l)."""
        tile = self.tiles.get((level, k // TILE_WIDTH))
        off = (k % TILE_WIDTH) * HASH_SIZE
        if tile is None or off + HASH_SIZE > len(tile):
            raise VerifyError(f"no tile holds hash {k} of level {level}")
        return tile[off:off + HASH_SIZE]

    def perfect(self, a, height):
        """A perfect aligned subtree of 2^height leaves starting at a."""
        level, rest = divmod(height, 8)
        first = a // (TILE_WIDTH ** level)
        hashes = [self.stored(level, first + i) for i in range(1 << rest)]
        while len(hashes) > 1:
            hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
        return hashes[0]

    def __call__(self, a, b):
        if not 0 <= a < b <= self.size:
            raise VerifyError(f"range [{a}, {b}) is not inside the tree of size {self.size}")
        n = b - a
        if n & (n - 1) == 0 and a % n == 0:
            return self.perfect(a, n.bit_length() - 1)
        k = largest_power_of_two_below(n)
        return node_hash(self(a, a + k), self(a + k, b))

    def root(self):
        return EMPTY_ROOT if self.size == 0 else self(0, self.size)


# ---------------------------------------------------------------------------------------------
# RFC 8785 (JSON Canonicalization Scheme) for the JSON values receipts hold

def _reject_duplicates(pairs):
    obj = {}
    for k, v in pairs:
        if k in obj:
            raise VerifyError(f"duplicate JSON member {k!r}")
        obj[k] = v
    return obj


def _reject_float(text):
    raise VerifyError(f"non-integer number {text} (receipts hold only integers)")


def json_loads(data):
    """Parses JSON the way RFC 8785 input must be (I-JSON: no duplicate names)."""
    if isinstance(data, bytes):
        data = data.decode("utf-8")
    return json.loads(data, object_pairs_hook=_reject_duplicates, parse_float=_reject_float,
                      parse_constant=_reject_float)


def _jcs_string(s):
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\b":
            out.append("\\b")
        elif c == "\f":
            out.append("\\f")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif o < 0x20:
            out.append(f"\\u{o:04x}")
        elif 0xD800 <= o <= 0xDFFF:
            raise VerifyError("a lone surrogate cannot be canonicalised")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _utf16_key(s):
    return s.encode("utf-16-be")


def canonical_json(value):
    """RFC 8785 bytes of a value made of strings, integers, booleans, null, arrays and objects."""
    def ser(v):
        if v is None:
            return "null"
        if v is True:
            return "true"
        if v is False:
            return "false"
        if isinstance(v, int):
            if abs(v) > 2 ** 53:
                raise VerifyError(f"integer {v} is outside the I-JSON range")
            return str(v)
        if isinstance(v, str):
            return _jcs_string(v)
        if isinstance(v, list):
            return "[" + ",".join(ser(x) for x in v) + "]"
        if isinstance(v, dict):
            keys = sorted(v.keys(), key=_utf16_key)
            return "{" + ",".join(_jcs_string(k) + ":" + ser(v[k]) for k in keys) + "}"
        raise VerifyError(f"cannot canonicalise a {type(v).__name__}")
    return ser(value).encode("utf-8")


def receipt_commitment(receipt):
    """The log's leaf for a receipt: SHA-256 of its RFC 8785 bytes."""
    return hashlib.sha256(canonical_json(receipt)).digest()


# ---------------------------------------------------------------------------------------------
# tlog-proof (c2sp.org/tlog-proof@v1)

class TlogProof:
    def __init__(self, extra, index, path, checkpoint):
        self.extra, self.index, self.path, self.checkpoint = extra, index, path, checkpoint


def parse_tlog_proof(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    header = "c2sp.org/tlog-proof@v1\n"
    if not text.startswith(header) and text and "\n" not in text:
        # The proof text itself base64-encoded (a JSON carrier may hold it so).
        try:
            text = b64decode(text).decode("utf-8")
        except (VerifyError, UnicodeDecodeError):
            pass
    if not text.startswith(header):
        raise VerifyError("the proof does not start with c2sp.org/tlog-proof@v1")
    rest = text[len(header):]

    def take_line(s):
        i = s.find("\n")
        if i < 0:
            raise VerifyError("the proof ends before its checkpoint")
        return s[:i], s[i + 1:]

    line, rest = take_line(rest)
    extra = None
    if line.startswith("extra "):
        extra = b64decode(line[len("extra "):])
        line, rest = take_line(rest)
    if not line.startswith("index "):
        raise VerifyError(f"expected an index line, got {line!r}")
    index = parse_decimal(line[len("index "):], "the proof's index")
    path = []
    while True:
        line, rest = take_line(rest)
        if line == "":
            break
        h = b64decode(line)
        if len(h) != HASH_SIZE:
            raise VerifyError("an inclusion proof line is not a 32-byte hash")
        path.append(h)
        if len(path) > 63:
            raise VerifyError("the inclusion proof has more than 63 hashes")
    return TlogProof(extra, index, path, parse_checkpoint(rest))


def verify_tlog_proof(proof, leaf, log_key, witness_keys=(), min_witnesses=0, origin=None):
    """tlog-proof "Verifying a tlog proof" steps 2 to 4 for a leaf (the entry's bytes)."""
    checks = verify_checkpoint(proof.checkpoint, log_key, witness_keys, min_witnesses, origin)
    try:
        verify_inclusion(proof.index, proof.checkpoint.size, leaf_hash(leaf), proof.path,
                         proof.checkpoint.root)
        checks.append((f"inclusion of entry {proof.index} in the tree of size {proof.checkpoint.size}",
                       True, ""))
    except VerifyError as e:
        checks.append((f"inclusion of entry {proof.index} in the tree of size {proof.checkpoint.size}",
                       False, str(e)))
    return checks


# ---------------------------------------------------------------------------------------------
# HTTP

def http_get(url, bearer=None, timeout=20):
    """GET returning (status, headers, body); a gzip Content-Encoding is undone."""
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip, identity"})
    if bearer:
        req.add_header("Authorization", f"Bearer {bearer}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, headers, body = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        status, headers, body = e.code, e.headers, e.read()
    if headers.get("Content-Encoding", "").lower() == "gzip":
        body = gzip.decompress(body)
    return status, headers, body


def fetch_ok(url, bearer=None):
    status, _, body = http_get(url, bearer)
    if status != 200:
        raise VerifyError(f"GET {url} answered {status}")
    return body


def fetch_tiles(base, size, with_entries=True):
    """Every tile (and entry bundle) of a tree of `size` from a tlog-tiles prefix."""
    base = base.rstrip("/")
    tiles, bundles = {}, {}
    def get(level, n, width):
        status, _, body = http_get(f"{base}/{tile_path(level, n, width)}")
        if status == 404 and width < TILE_WIDTH:
            # A log may drop a partial tile once the full one exists (tlog-tiles, "Partial Tiles").
            status, _, full = http_get(f"{base}/{tile_path(level, n)}")
            if status == 200 and level != "entries":
                body = full[:width * HASH_SIZE]
            elif status == 200:
                body = b"".join(_bundle_slices(full)[:width])
        if status != 200:
            raise VerifyError(f"GET {base}/{tile_path(level, n, width)} answered {status}")
        return body

    for level, n, width in tiles_for_size(size):
        body = get(level, n, width)
        if len(body) != width * HASH_SIZE:
            raise VerifyError(f"tile {tile_path(level, n, width)} is {len(body)} bytes, not {width * HASH_SIZE}")
        tiles[(level, n)] = body
        if level == 0 and with_entries:
            bundles[n] = get("entries", n, width)
    return tiles, bundles


def _bundle_slices(data):
    """An entry bundle's entries, each with its length prefix (to cut a full bundle short)."""
    out, i = [], 0
    while i + 2 <= len(data):
        length = struct.unpack(">H", data[i:i + 2])[0]
        out.append(data[i:i + 2 + length])
        i += 2 + length
    return out


def check_tiles(size, root, tiles, bundles):
    """The tiles' own consistency and the root they give; returns [(check, ok, detail)]."""
    checks = []
    # Every entry is 32 bytes and hashes to its level-0 tile hash.
    bad = []
    entries = 0
    for n, bundle in sorted(bundles.items()):
        try:
            items = parse_entry_bundle(bundle)
        except VerifyError as e:
            bad.append(f"bundle {n}: {e}")
            continue
        tile = tiles.get((0, n), b"")
        if len(items) * HASH_SIZE != len(tile):
            bad.append(f"bundle {n} holds {len(items)} entries, its tile {len(tile) // HASH_SIZE}")
        for i, e in enumerate(items):
            entries += 1
            if len(e) != 32:
                bad.append(f"entry {n * TILE_WIDTH + i} is {len(e)} bytes")
            elif leaf_hash(e) != tile[i * HASH_SIZE:(i + 1) * HASH_SIZE]:
                bad.append(f"entry {n * TILE_WIDTH + i} does not hash to its level-0 tile hash")
    if bundles:
        checks.append((f"{entries} entries in the bundles are 32-byte commitments hashing to the level-0 tiles",
                       not bad and entries == size, "; ".join(bad[:5]) or f"{entries} entries for size {size}"))
    # Every hash at level l+1 is the MTH of the full tile it stands for at level l.
    bad = []
    for (level, n), tile in sorted(tiles.items()):
        if level == 0:
            continue
        for i in range(len(tile) // HASH_SIZE):
            below = tiles.get((level - 1, n * TILE_WIDTH + i))
            if below is None or len(below) != TILE_WIDTH * HASH_SIZE:
                bad.append(f"tile {level}/{n} hash {i} has no full tile below")
                continue
            hashes = [below[j:j + HASH_SIZE] for j in range(0, len(below), HASH_SIZE)]
            if root_from_leaf_hashes(hashes) != tile[i * HASH_SIZE:(i + 1) * HASH_SIZE]:
                bad.append(f"tile {level}/{n} hash {i} is not the hash of the tile below")
    checks.append((f"{len(tiles)} tile(s): each higher-level hash is the root of its tile below", not bad,
                   "; ".join(bad[:5])))
    try:
        got = TileHashes(size, tiles).root()
        checks.append(("the tiles recompute the checkpoint's root hash", got == root,
                       f"they give {b64encode(got)}"))
    except VerifyError as e:
        checks.append(("the tiles recompute the checkpoint's root hash", False, str(e)))
    return checks


# ---------------------------------------------------------------------------------------------
# Command line

def report(checks):
    ok = True
    for desc, good, detail in checks:
        if good is None:
            print(f"--   {desc}")
        elif good:
            print(f"ok   {desc}")
        else:
            ok = False
            print(f"FAIL {desc}: {detail}")
    return ok


def _read(source, bearer=None):
    if source.startswith("http://") or source.startswith("https://"):
        return fetch_ok(source, bearer)
    with open(source, "rb") as f:
        return f.read()


def _keys(args):
    log_key = VerifierKey.parse(args.log_key)
    if log_key.sig_type != SIG_ED25519:
        raise VerifyError("--log-key must be an Ed25519 (type 0x01) verifier key")
    witnesses = []
    for w in args.witness_key or []:
        k = VerifierKey.parse(w)
        if k.sig_type != SIG_COSIGNATURE_V1:
            raise VerifyError(f"--witness-key {k.name} is not a cosignature/v1 (type 0x04) verifier key")
        witnesses.append(k)
    if args.min_witnesses > len(witnesses):
        raise VerifyError(f"--min-witnesses {args.min_witnesses} with {len(witnesses)} --witness-key")
    return log_key, witnesses


def _checkpoint_source(args):
    if getattr(args, "file", None):
        return _read(args.file)
    return fetch_ok(args.url.rstrip("/") + "/checkpoint")


def cmd_checkpoint(args):
    log_key, witnesses = _keys(args)
    data = _checkpoint_source(args)
    cp = parse_checkpoint(data)
    print(f"checkpoint {cp.origin} size {cp.size} root {b64encode(cp.root)}")
    ok = report(verify_checkpoint(cp, log_key, witnesses, args.min_witnesses, args.origin))
    if args.save:
        with open(args.save, "wb") as f:
            f.write(data)
    return ok


def cmd_tiles(args):
    log_key, _ = _keys(args)
    data = _read(args.checkpoint) if args.checkpoint else fetch_ok(args.url.rstrip("/") + "/checkpoint")
    cp = parse_checkpoint(data)
    print(f"checkpoint {cp.origin} size {cp.size} root {b64encode(cp.root)}")
    checks = verify_checkpoint(cp, log_key, origin=args.origin)
    tiles, bundles = fetch_tiles(args.url, cp.size)
    checks += check_tiles(cp.size, cp.root, tiles, bundles)
    return report(checks)


def cmd_proof(args):
    log_key, witnesses = _keys(args)
    checks = []
    if args.response:
        doc = json_loads(_read(args.response, args.bearer))
        if not isinstance(doc, dict) or "receipt" not in doc or "log" not in doc:
            raise VerifyError("the response is not {\"receipt\":…,\"log\":…}")
        if doc["log"] is None:
            raise VerifyError("the receipt is not in the log yet (\"log\": null)")
        receipt, proof_text = doc["receipt"], doc["log"]
    else:
        receipt = json_loads(_read(args.receipt)) if args.receipt else None
        proof_text = _read(args.proof).decode("utf-8")
    if receipt is not None:
        if isinstance(receipt, dict) and "receipt" in receipt and "v" not in receipt:
            receipt = receipt["receipt"]
        leaf = receipt_commitment(receipt)
        print(f"receipt {receipt.get('id') if isinstance(receipt, dict) else '?'} "
              f"commitment {leaf.hex()} (SHA-256 of its RFC 8785 bytes)")
    else:
        leaf = bytes.fromhex(args.commitment)
        if len(leaf) != 32:
            raise VerifyError("--commitment must be 32 bytes in hex")
    proof = parse_tlog_proof(proof_text)
    checks += verify_tlog_proof(proof, leaf, log_key, witnesses, args.min_witnesses, args.origin)
    return report(checks)


def cmd_consistency(args):
    log_key, _ = _keys(args)
    old = parse_checkpoint(_read(args.old))
    new_data = _read(args.new) if args.new else fetch_ok(args.url.rstrip("/") + "/checkpoint")
    new = parse_checkpoint(new_data)
    print(f"old checkpoint size {old.size} root {b64encode(old.root)}")
    print(f"new checkpoint size {new.size} root {b64encode(new.root)}")
    checks = [("old " + d, g, x) for d, g, x in verify_checkpoint(old, log_key, origin=args.origin)]
    checks += [("new " + d, g, x) for d, g, x in verify_checkpoint(new, log_key, origin=args.origin)]
    checks.append(("both checkpoints have the same origin", old.origin == new.origin, f"{old.origin} ≠ {new.origin}"))
    checks.append(("the old tree is not larger than the new", old.size <= new.size, f"{old.size} > {new.size}"))
    if old.size <= new.size:
        tiles, _ = fetch_tiles(args.url, new.size, with_entries=False)
        hashes = TileHashes(new.size, tiles)
        try:
            got = hashes.root()
            checks.append(("the new tree's tiles recompute its root hash", got == new.root, b64encode(got)))
            proof = consistency_proof(old.size, new.size, hashes)
            verify_consistency(old.size, new.size, old.root, new.root, proof)
            checks.append((f"consistency proof {old.size} → {new.size} ({len(proof)} hashes, from the tiles) verifies",
                           True, ""))
        except VerifyError as e:
            checks.append((f"consistency {old.size} → {new.size}", False, str(e)))
    return report(checks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p, witnesses=True):
        p.add_argument("--log-key", required=True, help="the log's note verifier key (type 0x01)")
        p.add_argument("--origin", help="the expected origin (default: the log key's name)")
        if witnesses:
            p.add_argument("--witness-key", action="append", help="a cosignature/v1 verifier key (type 0x04)")
            p.add_argument("--min-witnesses", type=int, default=0)
        else:
            p.set_defaults(witness_key=[], min_witnesses=0)

    p = sub.add_parser("checkpoint", help="a checkpoint's signature and cosignatures")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--url", help="the log prefix; fetches <url>/checkpoint")
    g.add_argument("--file")
    p.add_argument("--save", help="write the checkpoint checked to this file")
    common(p)
    p.set_defaults(func=cmd_checkpoint)

    p = sub.add_parser("tiles", help="every tile and entry bundle recompute the checkpoint's root")
    p.add_argument("--url", required=True)
    p.add_argument("--checkpoint", help="a checkpoint file (default: fetch <url>/checkpoint)")
    common(p, witnesses=False)
    p.set_defaults(func=cmd_tiles)

    p = sub.add_parser("proof", help="a receipt's tlog-proof")
    p.add_argument("--response", help="GET /v1/receipts/{id} response (file or URL)")
    p.add_argument("--bearer", help="access token for --response URL")
    p.add_argument("--receipt", help="the receipt JSON (or a {receipt, log} response) file")
    p.add_argument("--commitment", help="the leaf, 32 bytes hex, instead of a receipt")
    p.add_argument("--proof", help="a .tlog-proof file")
    common(p)
    p.set_defaults(func=cmd_proof)

    p = sub.add_parser("consistency", help="an older checkpoint is consistent with a newer one")
    p.add_argument("--url", required=True)
    p.add_argument("--old", required=True, help="the older checkpoint (file)")
    p.add_argument("--new", help="the newer checkpoint (file; default: fetch <url>/checkpoint)")
    common(p, witnesses=False)
    p.set_defaults(func=cmd_consistency)

    args = parser.parse_args(argv)
    if args.command == "proof" and not args.response and not args.proof:
        parser.error("proof needs --response, or --proof with --receipt or --commitment")
    if args.command == "proof" and args.proof and not (args.receipt or args.commitment) and not args.response:
        parser.error("proof --proof needs --receipt or --commitment")
    try:
        ok = args.func(args)
    except VerifyError as e:
        print(f"FAIL {args.command}: {e}")
        return 1
    except (OSError, urllib.error.URLError, ValueError) as e:
        print(f"FAIL {args.command}: {e}")
        return 1
    print("all checks hold" if ok else "some checks FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
