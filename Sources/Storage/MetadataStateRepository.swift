import Foundation
import PostgreSQL

/// What the stored number says about a BLOB offered for use (SPEC "Authenticator metadata": its
/// `no` must not be lower than the last BLOB accepted).
public enum MetadataBLOBAcceptance: Sendable, Equatable {
    /// Not lower than any accepted before under this root; the stored number is now at least this one.
    case accepted
    /// Lower than `lastAccepted`, which stays.
    case rollback(lastAccepted: Int)
}

/// The last accepted FIDO MDS3 BLOB number per signing root (migration 13), shared by every
/// instance on the database.
public final class MetadataStateRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// Records `number` for `root` (the SHA-256 of the root certificate the BLOB's chain ends at)
    /// unless a higher one is stored. One statement, so two instances accepting at once cannot
    /// move it backwards: the row lock orders them and GREATEST keeps the higher. An equal number
    /// (the same BLOB after a restart) is accepted.
    public func accept(number: Int, root: [UInt8]) throws(StorageError) -> MetadataBLOBAcceptance {
        try pool.run { c in
            let stored = try c.query("""
                INSERT INTO metadata_state AS s (root_sha256, blob_number) VALUES (\(root), \(number))
                ON CONFLICT (root_sha256) DO UPDATE
                SET blob_number = GREATEST(s.blob_number, EXCLUDED.blob_number),
                    accepted_at = CASE WHEN EXCLUDED.blob_number >= s.blob_number THEN now() ELSE s.accepted_at END
                RETURNING blob_number
                """)[0].int("blob_number")
            return stored > number ? .rollback(lastAccepted: stored) : .accepted
        }
    }

    /// The highest number accepted under `root`, nil when none was (`latchkey mds check`; reads only).
    public func lastAccepted(root: [UInt8]) throws(StorageError) -> (number: Int, at: Date)? {
        try pool.run { c in
            try c.query("SELECT blob_number, accepted_at FROM metadata_state WHERE root_sha256 = \(root)").first.map { r in
                (try r.int("blob_number"), try r.date("accepted_at"))
            }
        }
    }
}
