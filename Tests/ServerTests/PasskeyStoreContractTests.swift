import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
import PostgreSQL
@testable import Storage
import Testing

/// `InMemoryPasskeyStore` and `InMemoryLoginStore` are held to `AccountRepository` and
/// `LoginRepository`: one script of store calls runs against the PostgreSQL stores on a database of
/// its own and against the in-memory stores on a fixed clock, and both transcripts must be the
/// expected one. The rows a script needs that the store under test does not write (an address, a
/// recovery, a ticket, a step-up receipt) are set up through `ContractRows`, on either side.
@Suite("Passkey and login stores: in memory as in PostgreSQL")
struct PasskeyStoreContractTests {
    @Test("the in-memory passkey store answers the script as PostgreSQL does")
    func passkeyTranscript() throws {
        let postgres = try ContractDatabase()
        let sql = try Self.passkeyScript(postgres.database.accounts, postgres)
        #expect(sql == Self.expectedPasskey)

        let memory = ContractMemory()
        let kept = try Self.passkeyScript(InMemoryPasskeyStore(tables: memory.tables), memory)
        #expect(kept == sql)
        for (n, (a, b)) in zip(sql, kept).enumerated() where a != b { Issue.record("line \(n): PostgreSQL \(a) / in memory \(b)") }
    }

    @Test("the in-memory login store answers the script as PostgreSQL does")
    func loginTranscript() throws {
        let postgres = try ContractDatabase()
        let sql = try Self.loginScript(postgres.database.logins, postgres.database.accounts, postgres)
        #expect(sql == Self.expectedLogin)

        let memory = ContractMemory()
        let kept = try Self.loginScript(InMemoryLoginStore(tables: memory.tables), InMemoryPasskeyStore(tables: memory.tables), memory)
        #expect(kept == sql)
        for (n, (a, b)) in zip(sql, kept).enumerated() where a != b { Issue.record("line \(n): PostgreSQL \(a) / in memory \(b)") }
    }
}

// MARK: The rows beside the store under test

/// What a contract script sets up and looks at that the store under test does not write or read
/// itself. Times are each side's own clock: PostgreSQL's `now()`, the in-memory tables' clock.
protocol ContractRows {
    func addEmail(_ email: String, userId: String) throws
    func addRecoveryCode(userId: String) throws
    /// A pending email recovery: due (its delay passed) or not yet, expired or not.
    func addRecovery(id: String, userId: String, due: Bool, expired: Bool) throws
    func addTicket(hash: [UInt8], userId: String) throws
    /// A step-up receipt made by the passkey `approver`.
    func addReceipt(_ redemption: StepUpRedemption, approver: [UInt8]) throws
    /// "live", "ended" or "none".
    func session(_ familyId: String) throws -> String
    /// The number of audit lines with `action`.
    func audit(_ action: String) throws -> Int
}

/// A migrated database of its own on the test server (dropped with it).
final class ContractDatabase: ContractRows {
    let scratch: TestDatabase.Scratch
    let database: Database

    init() throws {
        scratch = try TestDatabase.Scratch()
        database = Database(url: scratch.url, connections: 2)
        _ = try database.migrate()
    }

    deinit { database.shutdown() }

    func addEmail(_ email: String, userId: String) throws {
        _ = try database.pool.execute("INSERT INTO account_emails (user_id, email) VALUES (\(userId), \(email))")
    }

    func addRecoveryCode(userId: String) throws {
        _ = try database.pool.execute("INSERT INTO recovery_codes (user_id, code_hash) VALUES (\(userId), \(Digest32.random()))")
    }

    func addRecovery(id: String, userId: String, due: Bool, expired: Bool) throws {
        let notBefore = due ? -60 : 3600
        let expiresIn = expired ? -1 : 7200
        _ = try database.pool.execute("""
            INSERT INTO recoveries (id, user_id, method, token_hash, not_before, expires_at)
            VALUES (\(id), \(userId), 'email', \(Digest32.random()), now() + \(notBefore)::int * interval '1 second',
                    now() + \(expiresIn)::int * interval '1 second')
            """)
    }

    func addTicket(hash: [UInt8], userId: String) throws {
        _ = try database.pool.execute("INSERT INTO enrolment_tickets (hash, user_id, expires_at) VALUES (\(hash), \(userId), now() + interval '1 hour')")
    }

    func addReceipt(_ r: StepUpRedemption, approver: [UInt8]) throws {
        _ = try database.pool.execute("""
            INSERT INTO step_up_receipts (id, user_id, method, key_id, public_key, challenge, signed_data, signature, action, action_hash,
                                          key_binding, token_jti, token_expires_at)
            VALUES (\("rcpt-" + r.jti), \(r.userId), 'passkey', \(Base64URL.encode(approver)), \([UInt8]([1])), \([UInt8]([2])), \([UInt8]([3])),
                    \([UInt8]([4])), '{}', \(r.actionHash), 'binding', \(r.jti), now() + interval '1 hour')
            """)
    }

    func session(_ familyId: String) throws -> String {
        guard let row = try database.pool.query("SELECT revoked_at IS NULL AS live FROM refresh_families WHERE id = \(familyId)").first else { return "none" }
        return try row.bool("live") ? "live" : "ended"
    }

    func audit(_ action: String) throws -> Int {
        try database.pool.query("SELECT count(*)::int AS n FROM audit_log WHERE action = \(action)")[0].int("n")
    }
}

/// In-memory tables on a fixed clock.
struct ContractMemory: ContractRows {
    let clock = ManualClock(start: Date(timeIntervalSince1970: 1_900_000_000))
    let tables: InMemoryTables

    init() { tables = InMemoryTables(now: clock.now) }

    func addEmail(_ email: String, userId: String) throws {
        try tables.change { (t, _) throws(StorageError) in t.emails[userId] = email }
    }

    func addRecoveryCode(userId: String) throws {
        try tables.change { (t, _) throws(StorageError) in t.recoveryCodes.append(.init(userId: userId, hash: Digest32.random())) }
    }

    func addRecovery(id: String, userId: String, due: Bool, expired: Bool) throws {
        try tables.change { (t, now) throws(StorageError) in
            let record = RecoveryRecord(id: id, userId: userId, method: .email, notBefore: now.addingTimeInterval(due ? -60 : 3600),
                                        expiresAt: now.addingTimeInterval(expired ? -1 : 7200), status: .pending)
            t.recoveries[id] = InMemoryTables.Recovery(record: record, tokenHash: Digest32.random(), createdAt: now)
        }
    }

    func addTicket(hash: [UInt8], userId: String) throws {
        tables.addTicket(EnrolmentTicket(hash: hash, userId: userId, holds: false), expiresAt: clock.now().addingTimeInterval(3600))
    }

    func addReceipt(_ redemption: StepUpRedemption, approver: [UInt8]) throws {
        tables.addReceipt(redemption, approver: approver)
    }

    func session(_ familyId: String) throws -> String {
        tables.snapshot.families[familyId].map { $0.revokedAt == nil ? "live" : "ended" } ?? "none"
    }

    func audit(_ action: String) throws -> Int {
        tables.snapshot.audit.filter { $0.action == action }.count
    }
}

// MARK: What the scripts write

enum Contract {
    /// Live by either side's clock (PostgreSQL's `now()`, the in-memory 2030), and expired by both.
    static let live = Date(timeIntervalSince1970: 4_000_000_000)
    static let expired = Date(timeIntervalSince1970: 1_000_000_000)
    static let stamp = Date(timeIntervalSince1970: 1_900_000_000)

    static func user(_ name: String) -> UserRecord {
        UserRecord(id: "usr_" + name, userHandle: Array(("handle-" + name).utf8), username: name, displayName: name)
    }

    /// A credential id from its label ("A1").
    static func id(_ label: String) -> [UInt8] { Array(("cred-" + label).utf8) }

    static func label(_ id: [UInt8]) -> String { String(decoding: id, as: UTF8.self).replacingOccurrences(of: "cred-", with: "") }

    static func labels(_ ids: [[UInt8]]) -> String { "[" + ids.map(label).joined(separator: ",") + "]" }

    /// A passkey as a registration hands it to the store: `createdAt`, `flagged` and `lastUsedAt`
    /// are what a caller might say; the store decides what is stored.
    static func credential(_ label: String, of userId: String, signCount: Int64 = 0, createdAt: Date = stamp) -> CredentialRecord {
        CredentialRecord(id: id(label), userId: userId, publicKey: [0x30, 1], alg: -7, signCount: signCount, aaguid: Array(repeating: 0, count: 16),
                         transports: ["internal"], backupEligible: false, backedUp: false, attestationFormat: "none", attestationType: "none",
                         name: "Passkey", flagged: false, createdAt: createdAt, lastUsedAt: nil, approvesFrom: nil, hardwareBound: false)
    }

    static func session(_ familyId: String, user: String, credential: String?, browser: Bool = false) -> NewSession {
        NewSession(familyId: familyId, userId: user, refreshHash: refreshHash(familyId), ttlSeconds: 3600, method: .passkey,
                   credentialId: credential.map(id), authTime: stamp, browser: browser)
    }

    static func refreshHash(_ familyId: String) -> [UInt8] { Array(("refresh-" + familyId).utf8) }

    /// A thrown storage error as a line, or the value.
    static func outcome<T>(_ body: () throws -> T, _ show: (T) -> String = { "\($0)" }) -> String {
        do { return show(try body()) }
        catch StorageError.conflict(let why) { return "conflict(\(why))" }
        catch StorageError.notFound { return "notFound" }
        catch { return "error \(error)" }
    }

    static func revocations(_ r: RecoveryRevocations?) -> String {
        r.map { " sessions=\($0.sessions.sorted()) passkeys=\(labels($0.passkeys.sorted { $0.lexicographicallyPrecedes($1) }))" } ?? ""
    }

    static func written(_ w: RegistrationWritten) -> String {
        if case .registered(let r) = w { return "registered" + revocations(r) }
        return "\(w)"
    }
}
