import Foundation
import PostgreSQL

/// Token signing keys and per-deployment secrets, shared by every instance.
public final class KeyRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// A token signing key as stored: sealed by the server (an envelope this layer does not read),
    /// or, for a row from before keys were encrypted, the plaintext PEM until it is sealed.
    public struct StoredSigningKey: Sendable {
        public let kid: String
        public let sealed: [UInt8]?
        public let legacyPEM: String?
        public let createdAt: Date
        public let retired: Bool
    }

    /// Seconds since the newest live signing key was made, by the database's clock (it stamped
    /// `created_at`): nil when there is none. (ARCHITECTURE.md, one clock: rule 3.)
    public func newestSigningKeyAge() throws(StorageError) -> Double? {
        try pool.run { c in
            try c.query("""
                SELECT extract(epoch FROM now() - max(created_at))::float8 AS age FROM signing_keys WHERE retired_at IS NULL
                """).first.flatMap { try $0.optionalDouble("age") }
        }
    }

    /// The keys not retired (or every key), newest first.
    public func signingKeys(includingRetired: Bool = false) throws(StorageError) -> [StoredSigningKey] {
        try pool.run { c in
            try c.query("""
                SELECT kid, sealed_key, private_pem, created_at, retired_at IS NOT NULL AS retired FROM signing_keys
                WHERE retired_at IS NULL OR \(includingRetired) ORDER BY created_at DESC, kid
                """).map {
                StoredSigningKey(kid: try $0.string("kid"), sealed: try $0.optionalBytes("sealed_key"),
                                 legacyPEM: try $0.optionalString("private_pem"), createdAt: try $0.date("created_at"),
                                 retired: try $0.bool("retired"))
            }
        }
    }

    /// Stores a new sealed key and retires all but the newest two, in one transaction.
    public func insertSigningKey(kid: String, sealed: [UInt8]) throws(StorageError) {
        try pool.runTransaction { t in
            try t.execute("INSERT INTO signing_keys (kid, sealed_key) VALUES (\(kid), \(sealed))")
            // Keep the newest two: the current key and the previous one, so tokens it signed still verify.
            try t.execute("""
                UPDATE signing_keys SET retired_at = now() WHERE retired_at IS NULL AND kid NOT IN
                    (SELECT kid FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 2)
                """)
        }
    }

    /// Replaces a plaintext row's PEM by its sealed form; false when another instance sealed it first.
    @discardableResult
    public func sealLegacyKey(kid: String, sealed: [UInt8]) throws(StorageError) -> Bool {
        try pool.run { c in
            try c.execute("""
                UPDATE signing_keys SET sealed_key = \(sealed), private_pem = NULL WHERE kid = \(kid) AND private_pem IS NOT NULL
                """) == 1
        }
    }

    /// Rewrites every key's envelope (`changes`: kid, the envelope read, its replacement) in one
    /// transaction, with the rows locked. False, and nothing written, when the table no longer
    /// holds exactly the envelopes read (a key added or changed meanwhile: read again and retry).
    public func reseal(_ changes: [(kid: String, from: [UInt8], to: [UInt8])],
                       retiring ceremonyKey: (keyId: [UInt8], sealed: [UInt8])? = nil) throws(StorageError) -> Bool {
        try pool.runTransaction { t in
            let rows = try t.query("SELECT kid, sealed_key FROM signing_keys FOR UPDATE")
            var current: [String: [UInt8]?] = [:]
            for row in rows { current[try row.string("kid")] = try row.optionalBytes("sealed_key") }
            guard current.count == changes.count,
                  changes.allSatisfy({ current[$0.kid] == .some($0.from) }) else { return false }
            for change in changes {
                try t.execute("UPDATE signing_keys SET sealed_key = \(change.to) WHERE kid = \(change.kid)")
            }
            if let ceremonyKey {
                // The ceremony-sealing key the old KEK derived: still accepted for a challenge's lifetime.
                try t.execute("""
                    INSERT INTO ceremony_seal_keys (key_id, sealed_key) VALUES (\(ceremonyKey.keyId), \(ceremonyKey.sealed))
                    ON CONFLICT (key_id) DO UPDATE SET sealed_key = EXCLUDED.sealed_key, retired_at = now()
                    """)
            }
            return true
        }
    }

    /// Ceremony-sealing keys a KEK rotation retired less than `acceptedForSeconds` ago (by the
    /// database's clock), each with the seconds it stays accepted.
    public func retiredCeremonySealKeys(acceptedForSeconds: Int) throws(StorageError) -> [(keyId: [UInt8], sealed: [UInt8], remaining: Double)] {
        try pool.run { c in
            try c.query("""
                SELECT key_id, sealed_key, extract(epoch FROM retired_at + make_interval(secs => \(acceptedForSeconds)) - now())::float8 AS remaining
                FROM ceremony_seal_keys WHERE retired_at + make_interval(secs => \(acceptedForSeconds)) > now()
                """).map { (try $0.bytes("key_id"), try $0.bytes("sealed_key"), try $0.double("remaining")) }
        }
    }

    /// A per-deployment secret, created once (as `candidate`) and shared by all instances: the
    /// first instance to insert wins, every caller gets the stored value.
    public func secret(named name: String, candidate: [UInt8]) throws(StorageError) -> [UInt8] {
        try pool.run { c in
            try c.execute("INSERT INTO server_secrets (name, value) VALUES (\(name), \(candidate)) ON CONFLICT (name) DO NOTHING")
            guard let row = try c.query("SELECT value FROM server_secrets WHERE name = \(name)").first else { return [] }
            return try row.bytes("value")
        }
    }

    /// Sets a secret created empty (a placeholder `secret(named:candidate: [])` inserted) to `value`,
    /// only while it is still empty: the first instance to fill it wins.
    public func replaceEmptySecret(named name: String, with value: [UInt8]) throws(StorageError) {
        try pool.run { c in
            try c.execute("UPDATE server_secrets SET value = \(value) WHERE name = \(name) AND length(value) = 0")
        }
    }
}
