import Foundation
import JSON
import PostgreSQL
import Storage
import Testing

@Suite struct AccountRepositoryTests {
    @Test func registerStoresUserCredentialSessionAndAudit() throws {
        let s = try TestDatabase.scratch()
        let user = Fixture.user()
        let credential = Fixture.credential(userId: user.id)
        let session = Fixture.session(userId: user.id)
        try s.database.accounts.register(newUser: user, credential: credential, session: session,
                                         audit: Fixture.audit("passkey.registered", subject: user.id))
        #expect(try s.database.accounts.user(username: user.username) == user)
        #expect(try s.database.accounts.user(id: user.id) == user)
        let stored = try #require(try s.database.accounts.credentials(userId: user.id).first)
        #expect(stored.id == credential.id && stored.transports == ["internal", "hybrid"] && !stored.flagged)
        #expect(try s.count("SELECT count(*) AS n FROM refresh_tokens WHERE family_id = \(session.familyId)") == 1)
        #expect(try s.auditActions() == ["passkey.registered"])
    }

    @Test func usernameClashWritesNothing() throws {
        let s = try TestDatabase.scratch()
        let (taken, _) = try s.registered()
        let clash = Fixture.user(username: taken.username)
        let session = Fixture.session(userId: clash.id)
        let credential = Fixture.credential(userId: clash.id)
        #expect(throws: StorageError.conflict(.usernameTaken)) {
            try s.database.accounts.register(newUser: clash, credential: credential, session: session,
                                             audit: Fixture.audit("passkey.registered"))
        }
        try expectNothingWritten(s, user: clash, credential: credential, session: session)
    }

    @Test func duplicateCredentialWritesNothing() throws {
        let s = try TestDatabase.scratch()
        let (_, existing) = try s.registered()
        let newcomer = Fixture.user()
        let credential = Fixture.credential(userId: newcomer.id, id: existing.id)
        let session = Fixture.session(userId: newcomer.id)
        #expect(throws: StorageError.conflict(.credentialExists)) {
            try s.database.accounts.register(newUser: newcomer, credential: credential, session: session,
                                             audit: Fixture.audit("passkey.registered"))
        }
        try expectNothingWritten(s, user: newcomer, credential: credential, session: session)
        #expect(try s.database.accounts.user(username: newcomer.username) == nil)
    }

    private func expectNothingWritten(_ s: Scratch, user: UserRecord, credential: CredentialRecord, session: NewSession) throws {
        #expect(try s.database.accounts.user(id: user.id) == nil)
        #expect(try s.database.accounts.credentials(userId: user.id).isEmpty)
        #expect(try s.count("SELECT count(*) AS n FROM refresh_families WHERE id = \(session.familyId)") == 0)
        #expect(try s.count("SELECT count(*) AS n FROM refresh_tokens WHERE hash = \(session.refreshHash)") == 0)
        #expect(try s.auditActions() == ["passkey.registered"])  // the first registration's only
    }

    @Test func recordUseMovesTheCounterForwardAndFlaggedIsSticky() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered(signCount: 10)
        func use(_ count: Int64, clone: Bool = false) -> CredentialUse {
            CredentialUse(credentialId: credential.id, userId: user.id, signCount: count, backedUp: true, cloneWarning: clone)
        }
        try s.database.accounts.recordUse(use(11), audit: [Fixture.audit("passkey.step_up")])
        var stored = try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0
        #expect(stored.signCount == 11 && stored.backedUp && !stored.flagged && stored.lastUsedAt != nil)
        let recorded = try s.database.accounts.recordUse(use(12, clone: true), audit: [])
        #expect(recorded == RecordedUse(signCount: 12, flagged: true))
        stored = try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0
        #expect(stored.signCount == 12 && stored.flagged)
        try s.database.accounts.recordUse(use(13), audit: [])
        #expect(try #require(try s.database.accounts.credentialForLogin(id: credential.id)).0.flagged, "flagged is sticky")
        #expect(try s.auditActions() == ["passkey.registered", "passkey.step_up"])
    }

    @Test func recordUseOfAnUnknownCredentialIsNotFoundAndWritesNoAudit() throws {
        let s = try TestDatabase.scratch()
        let use = CredentialUse(credentialId: Fixture.bytes(16), userId: "nobody", signCount: 1, backedUp: false, cloneWarning: false)
        #expect(throws: StorageError.notFound) { try s.database.accounts.recordUse(use, audit: [Fixture.audit("passkey.step_up")]) }
        #expect(try s.auditActions().isEmpty)
    }

    @Test func flagRenameRevoke() throws {
        let s = try TestDatabase.scratch()
        let (user, credential) = try s.registered()
        try s.database.accounts.flag(credentialId: credential.id, audit: Fixture.audit("passkey.flagged", subject: user.id))
        #expect(try s.database.accounts.credentials(userId: user.id)[0].flagged)
        #expect(try s.database.accounts.rename(userId: user.id, credentialId: credential.id, name: "Laptop")?.renamed.name == "Laptop")
        #expect(try s.database.accounts.rename(userId: "someone-else", credentialId: credential.id, name: "x")?.renamed.name == nil)
        #expect(try s.database.accounts.revoke(userId: user.id, credentialId: credential.id, audit: Fixture.audit("passkey.revoked")) != nil)
        #expect(try s.database.accounts.revoke(userId: user.id, credentialId: credential.id, audit: Fixture.audit("passkey.revoked")) == nil)
        #expect(try s.database.accounts.credentialForLogin(id: credential.id) == nil)
        #expect(try s.database.accounts.credentials(userId: user.id).isEmpty)
        #expect(try s.auditActions() == ["passkey.registered", "passkey.flagged", "passkey.revoked"])
        #expect(throws: StorageError.notFound) { try s.database.accounts.flag(credentialId: Fixture.bytes(16), audit: Fixture.audit("x")) }
    }

    /// A revocation is one read (`revocationRead`) and one statement (`revokePasskey`): the step-up
    /// is spent only together with the revocation, its approving passkey judged live as it was
    /// before the statement, and the statement answers the passkeys that remain.
    @Test func aRevocationIsOneStatementThatSpendsItsStepUpOnlyWithTheRevocation() throws {
        let s = try TestDatabase.scratch()
        let (user, first) = try s.registered()
        let second = Fixture.credential(userId: user.id)
        try s.database.accounts.register(newUser: nil, credential: second, session: Fixture.session(userId: user.id, credentialId: second.id),
                                         audit: Fixture.audit("passkey.registered", subject: user.id))
        let read = try s.database.accounts.revocationRead(userId: user.id, credentialId: first.id)
        #expect(read.ways == WaysIn(known: true, otherPasskey: true, recoveryCode: false, verifiedAddress: false))
        #expect(read.email == nil && read.language == nil)
        // A step-up the first passkey made.
        let receipt = Fixture.receipt(userId: user.id, keyId: Fixture.base64url(first.id), method: .passkey)
        #expect(try s.database.deviceKeys.insertReceipt(receipt, liveDeviceKeyId: nil, credentialUse: nil, audit: []))
        let stepUp = StepUpRedemption(jti: receipt.tokenJTI, userId: user.id, actionHash: receipt.actionHash)
        let rule = LastWayInRule(addressCounts: false)
        func unused() throws -> Bool {
            try s.count("SELECT count(*) AS n FROM step_up_receipts WHERE token_jti = \(receipt.tokenJTI) AND consumed_at IS NULL") == 1
        }
        // No such passkey: nothing written, the step-up unused.
        #expect(try s.database.accounts.revokePasskey(userId: user.id, credentialId: Fixture.bytes(16), audit: Fixture.audit("passkey.revoked"),
                                                      redeeming: stepUp, keeping: rule) == nil)
        #expect(try unused())
        // The approving passkey revokes itself: live as it was before the statement.
        let revoked = try #require(try s.database.accounts.revokePasskey(
            userId: user.id, credentialId: first.id, audit: Fixture.audit("passkey.revoked"), redeeming: stepUp, keeping: rule,
            sessionEvent: Fixture.event(.sessionRevoked)))
        #expect(revoked.ended.count == 1 && revoked.account.user.id == user.id && revoked.account.credentials.map(\.id) == [second.id])
        #expect(try !unused())
        // Spent: a second change with it is refused and writes nothing.
        #expect(throws: StorageError.conflict(.stepUpUsed)) {
            try s.database.accounts.revokePasskey(userId: user.id, credentialId: second.id, audit: Fixture.audit("passkey.revoked"),
                                                  redeeming: stepUp, keeping: rule)
        }
        // The last way in: refused under the rule, nothing written.
        #expect(throws: StorageError.conflict(.lastWayIn)) {
            try s.database.accounts.revokePasskey(userId: user.id, credentialId: second.id, audit: Fixture.audit("passkey.revoked"), keeping: rule)
        }
        #expect(try s.database.accounts.credentials(userId: user.id).map(\.id) == [second.id])
        #expect(try s.auditActions() == ["passkey.registered", "passkey.registered", "passkey.revoked"])
    }

    @Test func ticketsAreSingleUse() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let hash = Fixture.bytes()
        let expires = try s.database.accounts.createTicket(hash: hash, userId: user.id, ttlSeconds: 600, audit: Fixture.audit("ticket.issued"))
        #expect(expires > Date() && expires < Date().addingTimeInterval(700))
        #expect(try s.database.accounts.consumeTicket(hash: hash) == user.id)
        #expect(try s.database.accounts.consumeTicket(hash: hash) == nil)
        #expect(try s.auditActions() == ["passkey.registered", "ticket.issued"])
    }

    @Test func externalTicketsMakeTheAccountOnceAndAClashWritesNothing() throws {
        let s = try TestDatabase.scratch()
        let candidate = Fixture.user()
        let ticket = { NewTicket(hash: Fixture.bytes(), purpose: .passkey, ttlSeconds: 600) }
        let audit = AuditTemplate(actor: "admin-key", action: "ticket.issued")
        // The account made, its ticket and the audit line: one statement, no transaction around it.
        let (first, work) = try PostgresDeadline.within(seconds: 5, tracing: true) {
            try s.database.accounts.externalTicket(externalId: "ext-1", candidate: candidate, events: [], ticket: ticket(), audit: audit,
                                                   redeeming: nil)
        }
        #expect(first.userId == candidate.id && first.expiresAt > Date())
        #expect(work.counts == RoundTripCounts(writes: 1), "\(work.statements)")
        // Found the second time: the same account, whatever the candidate.
        let again = try s.database.accounts.externalTicket(externalId: "ext-1", candidate: Fixture.user(), events: [], ticket: ticket(),
                                                           audit: audit, redeeming: nil)
        #expect(again.userId == candidate.id)
        #expect(throws: StorageError.conflict(.usernameTaken)) {
            try s.database.accounts.externalTicket(externalId: "ext-2", candidate: Fixture.user(username: candidate.username), events: [],
                                                   ticket: ticket(), audit: audit, redeeming: nil)
        }
        // A step-up that cannot be redeemed: no account, no ticket, no line.
        let unredeemable = StepUpRedemption(jti: "no-such-jti", userId: candidate.id, actionHash: Fixture.bytes())
        #expect(throws: StorageError.conflict(.stepUpUsed)) {
            try s.database.accounts.externalTicket(externalId: "ext-3", candidate: Fixture.user(), events: [], ticket: ticket(), audit: audit,
                                                   redeeming: unredeemable)
        }
        #expect(try s.count("SELECT count(*) AS n FROM users WHERE external_id IS NOT NULL") == 1)
        #expect(try s.count("SELECT count(*) AS n FROM enrolment_tickets") == 2)
        #expect(try s.auditActions() == ["ticket.issued", "ticket.issued"])
    }

    @Test func ticketsForAnAccountThatIsNotThereWriteNothing() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let audit = AuditTemplate(actor: "admin-key", action: "ticket.issued")
        let ticket = NewTicket(hash: Fixture.bytes(), purpose: .deviceKey, ttlSeconds: 600)
        #expect(try s.database.accounts.accountTicket(.externalId("absent"), ticket: ticket, audit: audit, redeeming: nil) == nil)
        #expect(try s.database.accounts.accountTicket(.id(Fixture.id()), ticket: ticket, audit: audit, redeeming: nil) == nil)
        let (issued, work) = try PostgresDeadline.within(seconds: 5, tracing: true) {
            try s.database.accounts.accountTicket(.id(user.id), ticket: ticket, audit: audit, redeeming: nil)
        }
        #expect(issued?.userId == user.id)
        #expect(work.counts == RoundTripCounts(writes: 1), "\(work.statements)")
        #expect(try s.count("SELECT count(*) AS n FROM enrolment_tickets") == 1)
        #expect(try s.auditActions() == ["passkey.registered", "ticket.issued"])
    }

    @Test func otherUniqueViolationsNameTheirConstraint() throws {
        let s = try TestDatabase.scratch()
        let (user, _) = try s.registered()
        let sameHandle = UserRecord(id: Fixture.id(), userHandle: user.userHandle, username: TestDatabase.uniqueName("u"), displayName: "x")
        #expect(throws: StorageError.conflict(.other("users_user_handle_key"))) {
            try s.database.accounts.register(newUser: sameHandle, credential: Fixture.credential(userId: sameHandle.id),
                                             session: Fixture.session(userId: sameHandle.id), audit: Fixture.audit("x"))
        }
    }
}
