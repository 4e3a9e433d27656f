-- The transparency log of receipt commitments (C2SP tlog-checkpoint, tlog-tiles, tlog-witness).
--
-- The log's identity and key: one row. The Ed25519 key is sealed under the key-encryption key (the
-- envelope of signing_keys, bound to the origin); there is never a plaintext copy. `size` is the
-- stored tree, always the size of the newest checkpoint (the writer stores the new hashes and the
-- signed checkpoint in one transaction); `signed_size` is the largest size ever signed for this
-- origin and never goes down, so a tree restored from an older backup is refused at start.
CREATE TABLE transparency_log (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    origin      text NOT NULL,
    public_key  bytea NOT NULL CHECK (octet_length(public_key) = 32),
    sealed_key  bytea NOT NULL,
    size        bigint NOT NULL DEFAULT 0 CHECK (size >= 0),
    signed_size bigint NOT NULL DEFAULT 0 CHECK (signed_size >= 0),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The leaves: 32-byte commitments by index. No reference to step_up_receipts: erasing an account
-- deletes its receipts and leaves their commitments, which reveal nothing without them.
CREATE TABLE transparency_log_entries (
    index      bigint PRIMARY KEY CHECK (index >= 0),
    commitment bytea NOT NULL CHECK (octet_length(commitment) = 32)
);

-- Every complete subtree: the node at (level, index) is the RFC 9162 hash of the 2^level leaves
-- from index·2^level. Level 0 holds the leaf hashes; tiles are the levels 8·L; any proof is built
-- from these.
CREATE TABLE transparency_log_nodes (
    level smallint NOT NULL CHECK (level BETWEEN 0 AND 63),
    index bigint NOT NULL CHECK (index >= 0),
    hash  bytea NOT NULL CHECK (octet_length(hash) = 32),
    PRIMARY KEY (level, index)
);

-- Every checkpoint signed: its note text and the log's signature line.
CREATE TABLE transparency_log_checkpoints (
    origin     text NOT NULL,
    size       bigint NOT NULL CHECK (size >= 0),
    root       bytea NOT NULL CHECK (octet_length(root) = 32),
    note       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (origin, size)
);

-- Witnesses' cosignature lines (C2SP tlog-cosignature), per checkpoint and witness key.
CREATE TABLE transparency_log_cosignatures (
    origin  text NOT NULL,
    size    bigint NOT NULL,
    witness text NOT NULL,
    line    text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (origin, size, witness),
    FOREIGN KEY (origin, size) REFERENCES transparency_log_checkpoints (origin, size) ON DELETE CASCADE
);

-- The size each witness last cosigned for an origin (what `add-checkpoint`'s `old` line says).
CREATE TABLE transparency_log_witnesses (
    origin  text NOT NULL,
    witness text NOT NULL,
    size    bigint NOT NULL CHECK (size >= 0),
    PRIMARY KEY (origin, witness)
);
