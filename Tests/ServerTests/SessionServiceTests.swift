import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Testing
import Tokens

/// `SessionService`'s decisions over the in-memory store (no socket, no PostgreSQL): the list and
/// ending one session, refresh rotation, a rotated token's reuse revoking its family, logout, the
/// standing of a held passkey's session, enrolment tickets. SessionTests keeps the same flows over
/// HTTP and PostgreSQL.
@Suite struct SessionServiceTests {
    /// A stored session begun by `credentialId`'s passkey (or an email one without), with its tokens.
    static func session(_ f: ServiceFixture, userId: String, credentialId: [UInt8]? = [9, 9],
                        method: SessionMethod = .passkey) throws -> (pending: SessionService.Pending, issued: SessionService.Issued) {
        let pending = f.sessions.prepare(userId: userId, credentialId: credentialId, method: method)
        try InMemorySessionStore(tables: f.tables).start(session: pending.record, audit: [], language: nil)
        return (pending, try f.sessions.issue(pending, authentication: .passkeyVerified))
    }

    @Test("the list shows the caller's live sessions, newest first, marking the current one")
    func list() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice"), bob = f.tables.addUser("bob")
        let first = try Self.session(f, userId: alice.id)
        f.clock.advance(10)
        let second = try Self.session(f, userId: alice.id, credentialId: nil, method: .email)
        _ = try Self.session(f, userId: bob.id)
        let caller = try f.sessions.session(accessToken: first.issued.accessToken)
        #expect(caller.userId == alice.id && caller.sessionId == first.pending.record.familyId)
        let listed = try #require(SessionRenderer.list(try f.sessions.list(caller))["sessions"]?.arrayValue)
        #expect(listed.map { $0["id"]?.stringValue } == [second.pending.record.familyId, first.pending.record.familyId])
        #expect(listed.map { $0["current"]?.boolValue } == [false, true])
        #expect(listed.map { $0["method"]?.stringValue } == ["email", "passkey"])
        #expect(listed[1]["credentialId"]?.stringValue == Base64URL.encode([9, 9]))
        // The admin console's view has no `current`.
        #expect(try f.sessions.list(caller).sessions.map { SessionRenderer.session($0) }.allSatisfy { $0["current"] == nil })
        // A session whose refresh tokens have all expired is not listed.
        f.clock.advance(Double(f.configuration.refreshTokenTTL) - 5)
        #expect(try f.sessions.list(caller).sessions.map(\.id) == [second.pending.record.familyId])
    }

    @Test("ending one session: its tokens are refused at once; ending it again, or another user's, is 404")
    func endOne() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice"), bob = f.tables.addUser("bob")
        let mine = try Self.session(f, userId: alice.id)
        let other = try Self.session(f, userId: alice.id)
        let bobs = try Self.session(f, userId: bob.id)
        let caller = try f.sessions.session(accessToken: mine.issued.accessToken)
        #expect(refusal { try f.sessions.end(caller, sessionId: bobs.pending.record.familyId) } == .notFound)
        #expect(refusal { try f.sessions.end(caller, sessionId: "") } == .notFound)
        try f.sessions.end(caller, sessionId: other.pending.record.familyId)
        #expect(refusal { _ = try f.sessions.session(accessToken: other.issued.accessToken) } == .unauthorized)
        #expect(refusal { _ = try f.sessions.refresh(other.issued.refreshToken) } == .invalidGrant)
        #expect(refusal { try f.sessions.end(caller, sessionId: other.pending.record.familyId) } == .notFound)
        #expect(try f.sessions.list(caller).sessions.count == 1)
        #expect(f.tables.snapshot.events.map(\.key) == [other.pending.record.familyId])
        // Bob's session is untouched.
        #expect(try f.sessions.session(accessToken: bobs.issued.accessToken).userId == bob.id)
    }

    @Test("a refresh rotates: the next token works once, auth_time stays, an email session stays email")
    func rotation() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let started = try Self.session(f, userId: alice.id, credentialId: nil, method: .email)
        let authTime = try f.signer.accessClaims(started.issued.accessToken).authTime
        f.clock.advance(120)
        let next = try f.sessions.refresh(started.issued.refreshToken)
        #expect(next.refreshToken != started.issued.refreshToken)
        let claims = try f.signer.accessClaims(next.accessToken)
        #expect(claims.sessionId == started.pending.record.familyId)
        #expect(claims.authTime == authTime && claims.issuedAt == authTime + 120)
        #expect(claims.acr == AuthenticationClaims.emailOTP.acr)
        let third = try f.sessions.refresh(next.refreshToken)
        #expect(try f.sessions.session(accessToken: third.accessToken).sessionId == started.pending.record.familyId)
        #expect(f.tables.snapshot.families[started.pending.record.familyId]?.lastUsedAt == f.clock.now())
        #expect(refusal { _ = try f.sessions.refresh("lkr_unknown") } == .invalidGrant)
    }

    @Test("a rotated token presented again revokes the whole family: every token of it refused, audited, reported")
    func reuseRevokesFamily() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let started = try Self.session(f, userId: alice.id)
        let spare = try Self.session(f, userId: alice.id)
        let next = try f.sessions.refresh(started.issued.refreshToken)
        #expect(refusal { _ = try f.sessions.refresh(started.issued.refreshToken) } == .invalidGrant)
        let family = started.pending.record.familyId
        #expect(f.tables.snapshot.families[family]?.revokedAt != nil)
        #expect(f.revoked.contains(family))
        #expect(refusal { _ = try f.sessions.refresh(next.refreshToken) } == .invalidGrant)
        #expect(refusal { _ = try f.sessions.session(accessToken: next.accessToken) } == .unauthorized)
        let t = f.tables.snapshot
        #expect(t.audit.filter { $0.action == "refresh.reuse_detected" }.map(\.subject) == [alice.id])
        #expect(t.events.filter { $0.type == .sessionRevoked }.map(\.key) == [family])
        // Once revoked, a second reuse is just invalid (nothing more written); the other session lives on.
        #expect(refusal { _ = try f.sessions.refresh(started.issued.refreshToken) } == .invalidGrant)
        #expect(f.tables.snapshot.audit.count == t.audit.count)
        _ = try f.sessions.refresh(spare.issued.refreshToken)
    }

    @Test("an expired refresh token is invalid, and presenting it revokes nothing")
    func expiredRefresh() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let started = try Self.session(f, userId: alice.id)
        f.clock.advance(Double(f.configuration.refreshTokenTTL))
        #expect(refusal { _ = try f.sessions.refresh(started.issued.refreshToken) } == .invalidGrant)
        #expect(f.tables.snapshot.families[started.pending.record.familyId]?.revokedAt == nil)
    }

    @Test("logout ends the caller's session alone: its tokens refused, the others live")
    func logout() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let mine = try Self.session(f, userId: alice.id)
        let other = try Self.session(f, userId: alice.id)
        try f.sessions.logout(try f.sessions.session(accessToken: mine.issued.accessToken))
        #expect(refusal { _ = try f.sessions.session(accessToken: mine.issued.accessToken) } == .unauthorized)
        #expect(refusal { _ = try f.sessions.refresh(mine.issued.refreshToken) } == .invalidGrant)
        #expect(f.tables.snapshot.families[mine.pending.record.familyId]?.endedBy == "logout")
        let caller = try f.sessions.session(accessToken: other.issued.accessToken)
        #expect(try f.sessions.list(caller).sessions.map(\.id) == [other.pending.record.familyId])
    }

    @Test("an admin ends a session with an approval used once; an unknown one is 404 and uses nothing")
    func adminEnds() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        let started = try Self.session(f, userId: alice.id)
        let approval = StepUpRedemption(jti: "adm", userId: "adm_1", actionHash: [1])
        f.tables.addReceipt(approval)
        let admin = AdminCaller(actor: "adm_1", approval: AdminApproval(redemption: approval, receiptId: "r", actionHash: [1]))
        #expect(refusal { try f.sessions.end(userId: alice.id, sessionId: "nope", by: admin) } == .notFound)
        #expect(f.tables.snapshot.receipts["adm"]?.consumed == false)
        try f.sessions.end(userId: alice.id, sessionId: started.pending.record.familyId, by: admin)
        #expect(f.tables.snapshot.receipts["adm"]?.consumed == true)
        #expect(refusal { _ = try f.sessions.session(accessToken: started.issued.accessToken) } == .unauthorized)
        // Spent: a second session of the account is not ended with the same approval.
        let again = try Self.session(f, userId: alice.id)
        #expect(refusal { try f.sessions.end(userId: alice.id, sessionId: again.pending.record.familyId, by: admin) } == .stepUpRequired)
        #expect(f.tables.snapshot.families[again.pending.record.familyId]?.revokedAt == nil)
    }

    @Test("a session begun by a held passkey does not approve until the hold ends; an email session never does")
    func standing() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        f.tables.addCredential(id: [7], userId: alice.id, approvesFrom: f.clock.now().addingTimeInterval(600))
        let held = try Self.session(f, userId: alice.id, credentialId: [7])
        let email = try Self.session(f, userId: alice.id, credentialId: nil, method: .email)
        let caller = try f.sessions.session(accessToken: held.issued.accessToken)
        let emailCaller = try f.sessions.session(accessToken: email.issued.accessToken)
        #expect(try f.sessions.standing(caller).approves == false)
        #expect(try f.sessions.standing(caller).heldUntil == f.clock.now().addingTimeInterval(600))
        f.clock.advance(600)
        #expect(try f.sessions.standing(caller).approves == true)
        #expect(try f.sessions.standing(emailCaller).approves == false)
        try f.sessions.logout(caller)
        #expect(refusal { _ = try f.sessions.standing(caller) } == .unauthorized)
    }

    @Test("an enrolment ticket names its user while unused and unexpired; otherwise 401 with the Ticket challenge")
    func tickets() throws {
        let f = try ServiceFixture()
        let alice = f.tables.addUser("alice")
        f.tables.addTicket(EnrolmentTicket(hash: OpaqueSecret.hash("lkt_good"), userId: alice.id, holds: true),
                           expiresAt: f.clock.now().addingTimeInterval(60))
        #expect(try f.sessions.ticketHolder(ticket: "lkt_good").userId == alice.id)
        #expect(refusal { _ = try f.sessions.ticketHolder(ticket: "lkt_other") } == .unauthorized)
        f.clock.advance(60)
        #expect(refusal { _ = try f.sessions.ticketHolder(ticket: "lkt_good") } == .unauthorized)
    }
}
