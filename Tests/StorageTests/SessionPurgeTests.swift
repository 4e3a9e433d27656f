import Foundation
import PostgreSQL
import PostgreSQLTesting
import Storage
import Testing

/// Ended sessions are deleted 30 days after they end (`SessionRepository.purgeEnded`): revoked
/// ones by their revocation, unrevoked ones once their last refresh token has expired. Live
/// sessions and recently ended ones stay, and a passkey's last use survives its sessions.
@Suite struct SessionPurgeTests {
    static func families(_ s: Scratch, _ user: UserRecord) throws -> Set<String> {
        Set(try s.connect().query("SELECT id FROM refresh_families WHERE user_id = \(user.id)").map { try $0.string("id") })
    }

    static func tokens(_ s: Scratch, _ familyId: String) throws -> Int64 {
        try s.connect().query("SELECT count(*)::int8 AS n FROM refresh_tokens WHERE family_id = \(familyId)")[0].int64("n")
    }

    @Test func sessionsEndedLongAgoGoWithTheirTokensAndThePasskeysLastUseStays() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        let registration = try Self.families(s, user)  // the session the registration began: live
        let now = Int(Date().timeIntervalSince1970)
        let (live, _) = try PasskeyLastUseTests.signIn(s, user, credential, at: Date(timeIntervalSince1970: Double(now - 120)))
        let (expired, _) = try PasskeyLastUseTests.signIn(s, user, credential, at: Date(timeIntervalSince1970: Double(now - 60)))
        let (revokedLongAgo, _) = try PasskeyLastUseTests.signIn(s, user, credential, at: Date(timeIntervalSince1970: Double(now - 180)))
        let (revokedYesterday, _) = try PasskeyLastUseTests.signIn(s, user, credential, at: Date(timeIntervalSince1970: Double(now - 240)))
        let c = try s.connect()
        // An unrevoked session whose refresh token ran out 31 days ago, unused since.
        _ = try c.execute("UPDATE refresh_tokens SET expires_at = now() - interval '31 days' WHERE family_id = \(expired.familyId)")
        _ = try c.execute("UPDATE refresh_families SET last_used_at = now() - interval '61 days' WHERE id = \(expired.familyId)")
        _ = try c.execute("UPDATE refresh_families SET revoked_at = now() - interval '31 days' WHERE id = \(revokedLongAgo.familyId)")
        _ = try c.execute("UPDATE refresh_families SET revoked_at = now() - interval '1 day' WHERE id = \(revokedYesterday.familyId)")
        let expiredAuthTime = Date(timeIntervalSince1970: Double(now - 60))
        #expect(try PasskeyLastUseTests.lastUse(s, user, credential) == expiredAuthTime, "the newest unrevoked session's authentication")

        #expect(try s.database.sessions.purgeEnded() == 2)
        #expect(try Self.families(s, user) == registration.union([live.familyId, revokedYesterday.familyId]))
        #expect(try Self.tokens(s, expired.familyId) == 0)
        #expect(try Self.tokens(s, revokedLongAgo.familyId) == 0)
        #expect(try Self.tokens(s, live.familyId) == 1)
        // The expired session's authentication time was folded into the passkey's row before it went.
        #expect(try PasskeyLastUseTests.lastUse(s, user, credential) == expiredAuthTime)
        #expect(Set(try s.database.sessions.list(userId: user.id).map(\.id)) == registration.union([live.familyId]))
        #expect(try s.database.sessions.purgeEnded() == 0, "nothing else has ended")
    }

    @Test func aPassBeyondItsLimitLeavesTheRestForTheNext() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        var ids = try Self.families(s, user)
        for _ in 0..<3 {
            let (session, _) = try PasskeyLastUseTests.signIn(s, user, credential, at: Date(timeIntervalSince1970: Double(Int(Date().timeIntervalSince1970) - 60)))
            ids.insert(session.familyId)
        }
        _ = try s.connect().execute("UPDATE refresh_families SET revoked_at = now() - interval '40 days' WHERE user_id = \(user.id)")
        #expect(try s.database.sessions.purgeEnded(limit: 2) == 2)
        #expect(try Self.families(s, user).count == ids.count - 2)
        #expect(try s.database.sessions.purgeEnded(limit: 2) == ids.count - 2)
        #expect(try Self.families(s, user).isEmpty)
    }
}
