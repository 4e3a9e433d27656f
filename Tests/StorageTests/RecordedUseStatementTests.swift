import Foundation
import PostgreSQL
@testable import Storage
import Testing

/// The statement that records a passkey's use (every login runs it inside the session start).
@Suite struct RecordedUseStatementTests {
    static func plan(_ use: CredentialUse, on connection: PostgresConnection) throws -> String {
        let statement = SQL.with([("cred", AccountRepository.recording(use))], AccountRepository.recordedOrWhy(use))
        return try connection.plan(statement, options: "ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF")
    }

    /// Issue 24: `known` (does the credential exist at all?) is looked up only when the use was not
    /// recorded; a recorded use already says so, and the lookup was one more index descent per login.
    @Test func theCredentialIsLookedUpAgainOnlyWhenTheUseWasNotRecorded() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 5)
        let connection = try s.connect()
        func use(_ id: [UInt8], _ count: Int64) -> CredentialUse {
            CredentialUse(credentialId: id, userId: user.id, signCount: count, backedUp: false, cloneWarning: false)
        }
        // The second lookup is the plan's last scan of credentials (the first is the UPDATE's).
        func lookup(_ plan: String) -> Substring? {
            let scans = plan.split(separator: "\n").filter { $0.contains("Scan") && $0.contains(" on credentials") }
            return scans.count == 2 ? scans[1] : nil
        }
        let recorded = try Self.plan(use(credential.id, 6), on: connection)
        #expect(lookup(recorded)?.contains("never executed") == true, "\(recorded)")
        let refused = try Self.plan(use(credential.id, 6), on: connection)   // the counter did not advance
        #expect(lookup(refused).map { !$0.contains("never executed") } == true, "\(refused)")
        // The outcomes the lookup decides are unchanged.
        #expect(throws: StorageError.conflict(.signCountRegression)) { try s.database.accounts.recordUse(use(credential.id, 6), audit: []) }
        #expect(throws: StorageError.notFound) { try s.database.accounts.recordUse(use(Fixture.bytes(16), 1), audit: []) }
        #expect(try s.database.accounts.recordUse(use(credential.id, 7), audit: []) == RecordedUse(signCount: 7, flagged: false))
    }
}
