import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Portability" → Import, a batch at a time: one read and one write for a batch, and the
/// outcomes, in file order, those of the accounts imported one at a time — an account earlier in
/// the batch is in the way of a later one, a credential id twice in a file is refused, one
/// account's conflict fails no other, and two imports at once create each account once.
@Suite(.serialized) struct PortabilityBatchTests {
    /// The repository, with its batch reads and writes counted (PostgreSQL does the work).
    final class CountingStore: PortabilityStore {
        let base: PortabilityRepository
        private let counts = Mutex((reads: 0, writes: 0))

        init(_ base: PortabilityRepository) { self.base = base }

        var calls: (reads: Int, writes: Int) { counts.withLock { $0 } }

        func exportPage(after: String?, limit: Int) throws(StorageError) -> [PortableAccount] { try base.exportPage(after: after, limit: limit) }
        func exportAccount(username: String) throws(StorageError) -> PortableAccount? { try base.exportAccount(username: username) }
        func importPresences(_ accounts: [PortableAccount]) throws(StorageError) -> [ImportPresence] {
            counts.withLock { $0.reads += 1 }
            return try base.importPresences(accounts)
        }
        func importAccounts(_ batch: [(account: PortableAccount, audit: AuditRecord)]) throws(StorageError) -> [Bool] {
            counts.withLock { $0.writes += 1 }
            return try base.importAccounts(batch)
        }
        func begin(redeeming redemption: StepUpRedemption?, audit: AuditRecord) throws(StorageError) {
            try base.begin(redeeming: redemption, audit: audit)
        }
    }

    /// What each of two imports at once answered.
    final class Results: Sendable {
        private let results = Mutex<[Int: Result<[ImportOutcome], StorageError>]>([:])
        func set(_ k: Int, _ r: Result<[ImportOutcome], StorageError>) { results.withLock { $0[k] = r } }
        func get(_ k: Int) -> Result<[ImportOutcome], StorageError>? { results.withLock { $0[k] } }
    }

    /// An account with one passkey (a software authenticator's key) and, when given, an address.
    static func account(_ name: String, email: String? = nil) -> PortableAccount {
        let authenticator = SoftAuthenticator()
        let suffix = uniqueSuffix()
        let passkey = PortablePasskey(credentialId: authenticator.credentialId, publicKey: authenticator.publicKeyCOSE,
                                      alg: authenticator.algorithm.rawValue, signCount: 4, transports: ["internal"],
                                      aaguid: Array(repeating: 0, count: 16), backupEligible: true, backedUp: true, name: "Key of \(name)",
                                      createdAt: "2026-01-02T03:04:05.000006Z", lastUsedAt: nil)
        return PortableAccount(id: "batch-\(name)-\(suffix)", username: "\(name)-\(suffix)", displayName: name, externalId: nil,
                               createdAt: "2026-01-01T00:00:00.000000Z", userHandle: SecureRandom.bytes(32),
                               email: email.map { PortableEmail(address: $0, verifiedAt: "2026-01-01T00:00:00.000000Z") },
                               passkeys: [passkey], deviceKeys: [])
    }

    static func entries(_ accounts: [PortableAccount], from first: Int = 1) -> [PortableEntry] {
        accounts.enumerated().map { PortableEntry(line: first + $0.offset, account: .success($0.element)) }
    }

    static let sha = String(repeating: "ab", count: 32)

    static func run(dryRun: Bool = false) -> PortabilityService.ImportRun {
        PortabilityService.ImportRun(sha256: sha, actor: "cli", dryRun: dryRun, trustVerifiedEmails: false)
    }

    static func deployment(_ name: String) throws -> (TestServer, TestDatabase.Scratch) {
        let scratch = try TestDatabase.Scratch()
        return (try TestServer(name: name) { $0.databaseURL = scratch.url }, scratch)
    }

    static func count(_ scratch: TestDatabase.Scratch, _ sql: SQL) throws -> Int {
        try scratch.connect().query(sql).first?.int("n") ?? -1
    }

    @Test func aBatchMixingEveryOutcomeIsOneReadAndOneWriteAndDecidesAsOneAtATime() throws {
        let (server, scratch) = try Self.deployment("batch-mixed")
        let repository = server.database.portability
        let here = Self.account("here"), holder = Self.account("holder")
        for a in [here, holder] {
            #expect(try repository.importAccount(a, audit: AuditRecord(actor: "test", action: "account.imported", subject: a.id)))
        }
        let a = Self.account("a", email: "a-\(uniqueSuffix())@example.test"), f = Self.account("f")
        var sameName = Self.account("b")
        sameName.username = holder.username  // against the database
        var twice = Self.account("c")
        twice.passkeys[0].credentialId = a.passkeys[0].credentialId  // an id of an earlier line of the batch
        var nameOfA = Self.account("d")
        nameOfA.username = a.username  // against an earlier line of the batch
        let addressOfA = Self.account("e", email: a.email?.address)
        var takenKey = Self.account("g")
        takenKey.passkeys[0].credentialId = holder.passkeys[0].credentialId
        var entries = Self.entries([a, here, sameName])
        entries.append(PortableEntry(line: 4, account: .failure(PortableFile.Refusal(reason: "invalid_public_key", username: "bad"))))
        entries += Self.entries([twice, nameOfA, addressOfA, f, takenKey], from: 5)

        let store = CountingStore(repository)
        let service = PortabilityService(store: store, policy: PortabilityPolicy(server.configuration))
        var seen = CredentialIdDigests()
        let outcomes = try service.importBatch(entries, run: Self.run(), seen: &seen)
        let expected: [(String?, ImportOutcome.Kind, String?)] = [
            (a.username, .created, nil), (here.username, .skipped, "already_imported"), (holder.username, .conflict, "username_exists"),
            ("bad", .refused, "invalid_public_key"), (twice.username, .refused, "duplicate_credential_id"),
            (a.username, .conflict, "username_exists"), (addressOfA.username, .conflict, "email_exists"), (f.username, .created, nil),
            (takenKey.username, .conflict, "credential_exists"),
        ]
        #expect(outcomes == expected.enumerated().map { ImportOutcome(line: $0.offset + 1, username: $0.element.0, outcome: $0.element.1, reason: $0.element.2) })
        #expect(store.calls.reads == 1 && store.calls.writes == 1, "\(store.calls)")
        // The two created whole (user, passkey, unverified address, audit line naming the file); none of the others.
        for created in [a, f] {
            #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM credentials WHERE id = \(created.passkeys[0].credentialId) AND user_id = \(created.id)") == 1)
            #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM audit_log WHERE action = 'account.imported' AND subject = \(created.id) AND detail->>'sha256' = \(Self.sha)") == 1)
        }
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM unverified_addresses WHERE user_id = \(a.id) AND email = \(a.email!.address)") == 1)
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM account_emails WHERE email = \(a.email!.address)") == 0)
        let others = [sameName, twice, nameOfA, addressOfA, takenKey].map(\.id)
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM users WHERE id = ANY(string_to_array(\(others.joined(separator: ",")), ','))") == 0)

        // A re-run, as a batch and one line at a time: the same outcomes, nothing written.
        var batchSeen = CredentialIdDigests(), lineSeen = CredentialIdDigests()
        let again = try service.importBatch(entries, run: Self.run(), seen: &batchSeen)
        let alone = try entries.map { try service.importEntry($0, run: Self.run(), seen: &lineSeen) }
        #expect(again == alone)
        #expect(again.map(\.outcome) == [.skipped, .skipped, .conflict, .refused, .refused, .conflict, .conflict, .skipped, .conflict])
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM audit_log WHERE action = 'account.imported' AND detail->>'sha256' = \(Self.sha)") == 2)
    }

    @Test func aCredentialIdTwiceInOneBatchOrAcrossBatchesIsRefusedAndFailsNoOther() throws {
        let (server, scratch) = try Self.deployment("batch-twice")
        let service = PortabilityService(store: server.database.portability, policy: PortabilityPolicy(server.configuration))
        let p = Self.account("p"), r = Self.account("r"), z = Self.account("z")
        var q = Self.account("q"), y = Self.account("y")
        q.passkeys[0].credentialId = p.passkeys[0].credentialId
        y.passkeys[0].credentialId = r.passkeys[0].credentialId
        var seen = CredentialIdDigests()
        let first = try service.importBatch(Self.entries([p, q, r]), run: Self.run(), seen: &seen)
        #expect(first.map(\.outcome) == [.created, .refused, .created])
        #expect(first[1].reason == "duplicate_credential_id")
        let second = try service.importBatch(Self.entries([y, z], from: 4), run: Self.run(), seen: &seen)
        #expect(second == [ImportOutcome(line: 4, username: y.username, outcome: .refused, reason: "duplicate_credential_id"),
                           ImportOutcome(line: 5, username: z.username, outcome: .created, reason: nil)])
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM credentials WHERE id = \(p.passkeys[0].credentialId) AND user_id = \(p.id)") == 1)
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM users WHERE id IN (\(q.id), \(y.id))") == 0)
    }

    @Test func anAccountTheBatchStatementRefusesIsAConflictAndTheOthersAreCreatedWhole() throws {
        let (server, scratch) = try Self.deployment("batch-fallback")
        let store = CountingStore(server.database.portability)
        let service = PortabilityService(store: store, policy: PortabilityPolicy(server.configuration))
        // One live key per device: two of one device in an account is a unique violation no read can see.
        let spki = SecureRandom.bytes(91)
        var devices = Self.account("devices")
        devices.deviceKeys = ["k1", "k2"].map {
            PortableDeviceKey(id: "\($0)-\(uniqueSuffix())", deviceId: "phone", publicKey: spki, platform: "ios", attested: false,
                              createdAt: "2026-01-01T00:00:00.000000Z")
        }
        let before = Self.account("before"), after = Self.account("after")
        var seen = CredentialIdDigests()
        let outcomes = try service.importBatch(Self.entries([before, devices, after]), run: Self.run(), seen: &seen)
        #expect(outcomes.map(\.outcome) == [.created, .conflict, .created])
        #expect(outcomes[1].reason == "changed_during_import")
        #expect(store.calls.reads == 1 && store.calls.writes == 1, "\(store.calls)")
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM users WHERE id IN (\(before.id), \(after.id))") == 2)
        for table in ["users WHERE id", "credentials WHERE user_id", "device_keys WHERE user_id", "audit_log WHERE subject"] {
            #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM \(unsafeRaw: table) = \(devices.id)") == 0, "\(table)")
        }
    }

    @Test func twoImportsAtOnceCreateEachAccountOnceWithoutAnError() throws {
        let (server, scratch) = try Self.deployment("batch-race")
        let accounts = (0..<120).map { Self.account("race\($0)") }
        let service = PortabilityService(store: server.database.portability, policy: PortabilityPolicy(server.configuration))
        // One in file order, one in reverse: the two batches meet in opposite orders (a deadlock is possible).
        let orders = [Array(accounts.indices), Array(accounts.indices.reversed())]
        let results = Results()
        DispatchQueue.concurrentPerform(iterations: 2) { k in
            var seen = CredentialIdDigests()
            let mine = Self.entries(orders[k].map { accounts[$0] })
            do throws(StorageError) {
                var outcomes: [ImportOutcome] = []
                for start in stride(from: 0, to: mine.count, by: 40) {
                    outcomes += try service.importBatch(Array(mine[start..<min(start + 40, mine.count)]), run: Self.run(), seen: &seen)
                }
                results.set(k, .success(outcomes))
            } catch {
                results.set(k, .failure(error))
            }
        }
        let all = try (0..<2).map { try #require(results.get($0)).get() }
        var created = Set<String>()
        for (k, outcomes) in all.enumerated() {
            for (i, outcome) in outcomes.enumerated() {
                let username = accounts[orders[k][i]].username
                #expect(outcome.username == username)
                switch (outcome.outcome, outcome.reason) {
                case (.created, _): #expect(created.insert(username).inserted, "\(username) created twice")
                case (.skipped, "already_imported"?), (.conflict, "changed_during_import"?): break
                default: Issue.record("\(outcome)")
                }
            }
        }
        #expect(created.count == accounts.count)
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM users WHERE id LIKE 'batch-race%'") == accounts.count)
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM audit_log WHERE action = 'account.imported'") == accounts.count)
    }

    @Test func aDryRunBatchWritesNothing() throws {
        let (server, scratch) = try Self.deployment("batch-dry")
        let service = PortabilityService(store: server.database.portability, policy: PortabilityPolicy(server.configuration))
        var seen = CredentialIdDigests()
        let outcomes = try service.importBatch(Self.entries([Self.account("dry1"), Self.account("dry2")]), run: Self.run(dryRun: true), seen: &seen)
        #expect(outcomes.map(\.outcome) == [.created, .created])
        #expect(try Self.count(scratch, "SELECT count(*)::int AS n FROM users WHERE id LIKE 'batch-dry%'") == 0)
    }
}
