import Foundation
import JSON
import PostgreSQL
import Storage
import Testing

/// The joined reads behind `RecoveryStore` and `SessionStore`: each answers in one query what the
/// service used to ask in several.
@Suite struct RecoveryReadsTests {
    @Test("the settings page's read: the address, unused codes, and pending unexpired recoveries newest first")
    func accountState() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let empty = try s.database.recovery.accountState(userId: user.id)
        #expect(empty == RecoveryAccountState(email: nil, recoveryCodesLeft: 0, pending: []))

        #expect(try s.database.recovery.setVerifiedEmail(userId: user.id, email: "state@example.org", previous: nil, notice: [],
                                                          audit: Fixture.audit("email.verified"), events: []) == .stored)
        let c = try s.connect()
        for used in [false, false, true] {
            try c.execute("INSERT INTO recovery_codes (user_id, code_hash, used_at) VALUES (\(user.id), \(Fixture.bytes()), \(used ? Date() : nil))")
        }
        let older = try RecoveryCompletionTests.start(s, userId: user.id)
        try c.execute("UPDATE recoveries SET created_at = created_at - interval '1 minute' WHERE id = \(older)")
        let newer = try RecoveryCompletionTests.start(s, userId: user.id, method: .recoveryCode)
        let cancelled = try RecoveryCompletionTests.start(s, userId: user.id)
        #expect(try s.database.recovery.cancel(id: cancelled, userId: user.id, audit: Fixture.audit("recovery.cancelled"), events: []))
        let expired = try RecoveryCompletionTests.start(s, userId: user.id)
        try c.execute("UPDATE recoveries SET expires_at = now() - interval '1 second' WHERE id = \(expired)")

        let state = try s.database.recovery.accountState(userId: user.id)
        #expect(state.email == "state@example.org" && state.recoveryCodesLeft == 2)
        #expect(state.pending.map(\.id) == [newer, older])
        #expect(state.pending == (try s.database.recovery.pending(userId: user.id)))
        #expect(state.recoveryCodesLeft == (try s.database.recovery.unusedRecoveryCodes(userId: user.id)))
    }

    @Test("a username's account with its address, or without one; nil for nobody")
    func accountByUsername() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        #expect(try s.database.recovery.recipient(.username(user.username)) == CodeRecipient(userId: user.id, email: nil, language: nil))
        _ = try s.database.recovery.setVerifiedEmail(userId: user.id, email: "named@example.org", previous: nil, notice: [],
                                                      audit: Fixture.audit("email.verified"), events: [])
        #expect(try s.database.recovery.recipient(.username(user.username)) == CodeRecipient(userId: user.id, email: "named@example.org", language: nil))
        #expect(try s.database.recovery.recipient(.username("nobody-" + Fixture.id())) == CodeRecipient(userId: nil, email: nil, language: nil))
        #expect(try s.database.recovery.user(id: user.id) == user)
    }

    @Test("the sessions' store reads a valid passkey ticket as the accounts' store does")
    func ticket() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let hash = Fixture.bytes()
        _ = try s.database.accounts.createTicket(hash: hash, userId: user.id, ttlSeconds: 600, audit: Fixture.audit("ticket.created"))
        #expect(try s.database.sessions.ticket(hash: hash) == EnrolmentTicket(hash: hash, userId: user.id, holds: false))
        #expect(try s.database.sessions.ticket(hash: hash) == (try s.database.accounts.ticket(hash: hash)))
        _ = try s.database.accounts.consumeTicket(hash: hash)
        #expect(try s.database.sessions.ticket(hash: hash) == nil)
    }
}
