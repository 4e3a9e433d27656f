import Foundation
import PostgreSQL
import Storage
import Testing

@Suite struct DatabaseTests {
    @Test func pingAndStats() throws {
        let s = try TestDatabase.scratch()
        #expect(s.database.ping())
        #expect(s.database.connectionStats.open >= 1 && s.database.connectionStats.inUse == 0)
    }

    @Test func anUnreachableDatabaseIsUnavailable() throws {
        let database = Database(url: "postgresql://postgres@127.0.0.1:1/none?connect_timeout=2", connections: 1)
        defer { database.shutdown() }
        #expect(!database.ping())
        #expect {
            try database.accounts.user(id: "x")
        } throws: { error in
            guard case .unavailable = error as? StorageError else { return false }
            return true
        }
    }

    @Test func keysAndSecrets() throws {
        let s = try TestDatabase.scratch()
        for kid in ["k1", "k2", "k3"] {
            try s.database.keys.insertSigningKey(kid: kid, sealed: Array("sealed-\(kid)".utf8))
            usleep(2000)  // distinct created_at
        }
        #expect(try s.database.keys.signingKeys().map(\.kid) == ["k3", "k2"])
        let first = try s.database.keys.secret(named: "pepper", candidate: [1, 2, 3])
        #expect(first == [1, 2, 3])
        #expect(try s.database.keys.secret(named: "pepper", candidate: [9]) == [1, 2, 3])
    }

    /// A stored value the code cannot read (here a NULL where the schema promised a value) is the
    /// code's or the schema's fault, not the database being down: `undecodable` names the column,
    /// where it was reported as `unavailable` (and so as an outage) before.
    @Test func aValueThatCannotBeReadIsUndecodableNamingItsColumn() throws {
        let s = try TestDatabase.scratch()
        let c = try s.connect()
        try c.execute("INSERT INTO users (id, user_handle, username, display_name) VALUES ('u1', '\\x01', 'one', 'One')")
        try c.execute("ALTER TABLE account_emails ALTER COLUMN email DROP NOT NULL")
        try c.execute("INSERT INTO account_emails (user_id, email) VALUES ('u1', NULL)")
        #expect(throws: StorageError.undecodable(column: "email")) { try s.database.recovery.email(userId: "u1") }
    }
}
