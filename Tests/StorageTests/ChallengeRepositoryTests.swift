import Foundation
import PostgreSQL
import PostgreSQLTesting
import Storage
import Synchronization
import Testing

@Suite struct ChallengeRepositoryTests {
    @Test(arguments: CeremonyKind.allCases)
    func consumeReturnsWhatWasInserted(kind: CeremonyKind) throws {
        let s = try TestDatabase.scratch()
        let hash = Fixture.bytes()
        let state: [UInt8] = [0, 1, 2, 0xFF, 0]  // any bytes, zeros included
        try s.database.challenges.insert(hash: hash, kind: kind, userId: "u1", rpId: "example.com", state: state, ttlSeconds: 60)
        let found = try s.database.challenges.consume(hash: hash)
        #expect(found == StoredChallenge(kind: kind, userId: "u1", rpId: "example.com", state: state, expired: false))
        #expect(try s.database.challenges.consume(hash: hash) == nil)
    }

    @Test func consumeIsSingleUseUnderConcurrency() throws {
        let s = try TestDatabase.scratch()
        let hash = Fixture.bytes()
        try s.database.challenges.insert(hash: hash, kind: .authentication, userId: nil, rpId: "example.com", state: [1], ttlSeconds: 60)
        let winners = Atomic(0)
        let errors = onThreads(16) { _ in
            if try s.database.challenges.consume(hash: hash) != nil { winners.add(1, ordering: .relaxed) }
        }
        #expect(errors.isEmpty)
        #expect(winners.load(ordering: .relaxed) == 1)
    }

    @Test func aMismatchedKindOrUserLeavesTheChallengeAlone() throws {
        let s = try TestDatabase.scratch()
        let hash = Fixture.bytes()
        try s.database.challenges.insert(hash: hash, kind: .stepUp, userId: "alice", rpId: "example.com", state: [7], ttlSeconds: 60)
        #expect(try s.database.challenges.consume(hash: hash, kind: .stepUp, userId: "mallory") == nil)
        #expect(try s.database.challenges.consume(hash: hash, kind: .deviceKeyEnrolment, userId: "alice") == nil)
        #expect(try s.database.challenges.consume(hash: hash, kind: .stepUp, userId: "alice")?.state == [7])
    }

    @Test func anExpiredChallengeSaysSo() throws {
        let s = try TestDatabase.scratch()
        let hash = Fixture.bytes()
        try s.database.challenges.insert(hash: hash, kind: .registration, userId: nil, rpId: "example.com", state: [], ttlSeconds: -1)
        #expect(try s.database.challenges.consume(hash: hash)?.expired == true)
    }

    @Test func purgeDropsOnlyLongExpiredChallenges() throws {
        let s = try TestDatabase.scratch()
        let old = Fixture.bytes(), fresh = Fixture.bytes()
        try s.database.challenges.insert(hash: old, kind: .registration, userId: nil, rpId: "example.com", state: [], ttlSeconds: -7200)
        try s.database.challenges.insert(hash: fresh, kind: .registration, userId: nil, rpId: "example.com", state: [], ttlSeconds: -60)
        try s.database.challenges.purgeExpired()
        #expect(try s.database.challenges.consume(hash: old) == nil)
        #expect(try s.database.challenges.consume(hash: fresh)?.expired == true)
    }

    @Test func purgeDropsUsedChallengeIdsAMinuteAfterTheirExpiry() throws {
        let s = try TestDatabase.scratch()
        let old = UsedChallenge(id: Fixture.bytes(16), expiresAt: Date().addingTimeInterval(-120))
        let recent = UsedChallenge(id: Fixture.bytes(16), expiresAt: Date().addingTimeInterval(-10))
        for used in [old, recent] {
            #expect(try s.database.logins.login(used, credentialId: Fixture.bytes(16)) { _ in .refused(flag: nil) } == .challengeUnusable,
                    "expired by the database's clock: not recorded")
            try s.connect().execute("INSERT INTO used_challenges (id, expires_at) VALUES (\(used.id), \(used.expiresAt))")
        }
        try s.database.challenges.purgeExpired()
        let left = try s.connect().query("SELECT id FROM used_challenges").map { try $0.bytes("id") }
        #expect(left == [recent.id])
    }
}
