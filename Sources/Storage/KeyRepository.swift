import Foundation
import PostgreSQL

/// Token signing keys and per-deployment secrets, shared by every instance.
public final class KeyRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// The keys not retired, newest first.
    public func signingKeys() throws(StorageError) -> [(kid: String, pem: String, createdAt: Date)] {
        try pool.run { c in
            try c.query("SELECT kid, private_pem, created_at FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC")
                .map { (try $0.string("kid"), try $0.string("private_pem"), try $0.date("created_at")) }
        }
    }

    /// Stores a new key and retires all but the newest two, in one transaction.
    public func insertSigningKey(kid: String, pem: String) throws(StorageError) {
        try pool.runTransaction { t in
            try t.execute("INSERT INTO signing_keys (kid, private_pem) VALUES (\(kid), \(pem))")
            // Keep the newest two: the current key and the previous one, so tokens it signed still verify.
            try t.execute("""
                UPDATE signing_keys SET retired_at = now() WHERE retired_at IS NULL AND kid NOT IN
                    (SELECT kid FROM signing_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 2)
                """)
        }
    }

    /// A per-deployment secret, created once (from `generate`) and shared by all instances: the
    /// first instance to insert wins, every caller gets the stored value.
    public func secret(named name: String, generate: () -> [UInt8]) throws(StorageError) -> [UInt8] {
        try pool.run { c in
            try c.execute("INSERT INTO server_secrets (name, value) VALUES (\(name), \(generate())) ON CONFLICT (name) DO NOTHING")
            guard let row = try c.query("SELECT value FROM server_secrets WHERE name = \(name)").first else { return [] }
            return try row.bytes("value")
        }
    }
}
