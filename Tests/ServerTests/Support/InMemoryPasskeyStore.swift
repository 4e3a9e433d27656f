import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage

/// `PasskeyStore` in memory over `InMemoryTables`, keeping the rules `AccountRepository`'s SQL keeps:
/// - registration options read an account's live passkeys, oldest first, and whether the step-up
///   can still be redeemed (unused, the user's, for this action, its approving passkey live);
/// - a verify's read finds the challenge's use and whether it is still live (the tables' clock
///   plays the database's), a credential with the response's id (live or revoked), the live one
///   this very response registered (its digest), a new account's username, the account with its
///   address, language and live passkeys, and the recovery when it is the account's;
/// - the verify's write records the challenge's id used — a second verify of it writes nothing,
///   `.challengeUnusable` — and only with it: the recovery completed (pending, its delay passed, not
///   expired: every session of the account ended, its other pending recoveries cancelled, under
///   `revokePasskeys` its other passkeys revoked), the ticket used up (unused, the account's), the
///   step-up redeemed; each gate is written on its own, as each is its own CTE, and the account,
///   passkey, session, audit lines, events, mail, cancel link and language memo only when every
///   gate held. The passkey is stored as the INSERT stores it: created at the tables' clock (the
///   database's `now()`, so passkeys list in the order they were registered), not flagged, never
///   used. A username or credential id (live or revoked) taken: nothing but the challenge's use,
///   and `.conflict(.usernameTaken)` / `.conflict(.credentialExists)`;
/// - a rename touches a live passkey of the account only, with its event;
/// - a revocation is refused with nothing written when the step-up cannot be redeemed
///   (`.conflict(.stepUpUsed)`), when the passkey is the last way in under `keeping` (no other live
///   passkey, no unused recovery code, no verified address that counts: `.conflict(.lastWayIn)`),
///   and is nil for no such live passkey; otherwise the step-up is redeemed (its approver judged as
///   before the change), the passkey revoked with the sessions it began, and the audit line, events
///   and mail written.
struct InMemoryPasskeyStore: PasskeyStore {
    let tables: InMemoryTables

    func user(username: String) throws(StorageError) -> UserRecord? {
        try tables.read { t throws(StorageError) in t.users.values.first { $0.username == username } }
    }

    func registrationAccount(id: String, redeeming: StepUpRedemption?) throws(StorageError) -> RegistrationAccount? {
        try tables.read { t throws(StorageError) in
            guard let user = t.users[id] else { return nil }
            return RegistrationAccount(user: user,
                                       credentials: InMemoryLoginStore.live(of: id, in: t).map { CredentialDescriptorRow(id: $0.id, transports: $0.transports) },
                                       stepUpRedeemable: redeeming.map { InMemoryTables.redeemable($0, in: t) } ?? true)
        }
    }

    func registrationRead(_ challenge: UsedChallenge, account: String?, username: String?, credentialId: [UInt8], digest: [UInt8],
                          recoveryId: String?) throws(StorageError) -> RegistrationRead {
        let now = tables.now()
        return try tables.read { t throws(StorageError) in
            let user = account.flatMap { t.users[$0] }
            let registered = t.credentials.first {
                $0.id == credentialId && t.registrationDigests[$0.id] == digest && !t.revokedCredentials.contains($0.id) && t.users[$0.userId] != nil
            }
            let recovery = recoveryId.flatMap { t.recoveries[$0]?.record }.flatMap { r in r.userId == user?.id ? r : nil }
            return RegistrationRead(used: t.usedChallenges[challenge.id] != nil, live: challenge.expiresAt > now, registered: registered,
                                    credentialKnown: t.credentials.contains { $0.id == credentialId },
                                    usernameTaken: username.map { n in t.users.values.contains { $0.username == n } } ?? false,
                                    account: user, language: user.flatMap { t.languages[$0.id] }, email: user.flatMap { t.emails[$0.id] },
                                    accepted: user.map { InMemoryLoginStore.live(of: $0.id, in: t).map(\.id) } ?? [], recovery: recovery)
        }
    }

    func finishRegistration(_ challenge: UsedChallenge, _ write: RegistrationWrite) throws(StorageError) -> RegistrationWritten {
        enum Outcome: Sendable {
            case written(RegistrationWritten)
            case refused(StorageError.Conflict)
        }
        let outcome = try tables.change { (t, now) throws(StorageError) -> Outcome in
            guard t.usedChallenges[challenge.id] == nil, challenge.expiresAt > now else { return .written(.challengeUnusable) }
            t.usedChallenges[challenge.id] = challenge.expiresAt
            guard case .register(let r) = write else { return .written(.refused) }
            let credential = r.credential
            let userId = credential.userId
            let recoveryDue = r.completing.map { c in
                t.recoveries[c.recoveryId].map {
                    $0.record.userId == userId && $0.record.status == .pending && $0.record.notBefore <= now && $0.record.expiresAt > now
                } ?? false
            }
            let ticketIndex = r.ticketHash.flatMap { hash in t.tickets.firstIndex { $0.ticket.hash == hash && $0.ticket.userId == userId && !$0.used } }
            let stepUpRedeemable = r.redeeming.map { InMemoryTables.redeemable($0, in: t) }
            // The session's DPoP proof is a gate like the others: seen before, nothing of the registration is written.
            let proofNew = r.session.dpop.map { t.dpopProofs[$0.replay.bytes].map { kept in kept <= now } ?? true }
            let stores = recoveryDue != false && (r.ticketHash == nil || ticketIndex != nil) && stepUpRedeemable != false && proofNew != false
            if stores {
                // A unique constraint rolls the whole statement back; the challenge's use is then recorded alone.
                if let u = r.newUser, t.users.values.contains(where: { $0.username == u.username }) { return .refused(.usernameTaken) }
                if t.credentials.contains(where: { $0.id == credential.id }) { return .refused(.credentialExists) }
            }
            // Each gate is its own CTE, written whenever it holds.
            var revocations: RecoveryRevocations? = nil
            var cancelledRecoveries: [InMemoryTables.Recovery] = []
            if let c = r.completing, recoveryDue == true {
                if let done = t.recoveries[c.recoveryId] { t.recoveries[c.recoveryId]?.record = done.record.with(status: .completed) }
                for (id, other) in t.recoveries where other.record.userId == userId && other.record.status == .pending && id != c.recoveryId {
                    t.recoveries[id]?.record = other.record.with(status: .cancelled)
                    cancelledRecoveries.append(other)
                }
                var sessions: [String] = []
                for (id, f) in t.families where f.userId == userId && f.revokedAt == nil {
                    t.families[id]?.revokedAt = now
                    sessions.append(id)
                }
                var passkeys: [[UInt8]] = []
                if c.revokePasskeys {
                    for p in InMemoryLoginStore.live(of: userId, in: t) where p.id != credential.id {
                        t.revokedCredentials.insert(p.id)
                        passkeys.append(p.id)
                    }
                }
                revocations = RecoveryRevocations(sessions: sessions.sorted(), deviceKeys: [], passkeys: passkeys)
            }
            if let i = ticketIndex { t.tickets[i].used = true }
            if let s = r.redeeming, stepUpRedeemable == true { t.receipts[s.jti]?.consumed = true }
            if proofNew == true { _ = InMemoryTables.record(r.session.dpop, in: &t, now: now) }
            guard stores else {
                if recoveryDue == false { return .written(.recoveryEnded) }
                if r.ticketHash != nil, ticketIndex == nil { return .written(.ticketUsed) }
                if stepUpRedeemable == false { return .written(.stepUpUsed) }
                return .written(.proofReplayed)
            }
            if let u = r.newUser {
                t.users[u.id] = u
                if let language = r.language { t.languages[u.id] = language }
            } else if let language = r.language {
                t.languages[userId] = language
            }
            // The INSERT leaves `created_at` (the database's now()), `flagged` and `last_used_at` to the table.
            let c = credential
            t.credentials.append(CredentialRecord(
                id: c.id, userId: c.userId, publicKey: c.publicKey, alg: c.alg, signCount: c.signCount, aaguid: c.aaguid, transports: c.transports,
                backupEligible: c.backupEligible, backedUp: c.backedUp, attestationFormat: c.attestationFormat,
                attestationType: c.attestationType, name: c.name, flagged: false, createdAt: now, lastUsedAt: nil,
                approvesFrom: c.approvesFrom, hardwareBound: c.hardwareBound))
            if let digest = r.registrationDigest { t.registrationDigests[credential.id] = digest }
            try InMemoryTables.start(r.session, in: &t, now: now)
            if let c = r.completing, let revoked = revocations {
                t.audit.append(c.audit)
                for other in cancelledRecoveries {
                    InMemoryTables.audit(c.otherCancelledAudit, subject: userId, detail: [("recoveryId", .string(other.record.id))], in: &t)
                }
                InMemoryTables.events(c.events, in: &t)
                t.events += revoked.sessions.map { .init(type: c.sessionRevoked.type, accountId: userId, key: $0) }
                t.events += revoked.passkeys.map { .init(type: c.passkeyRevoked.type, accountId: userId, key: Base64URL.encode($0)) }
                t.events += cancelledRecoveries.map { .init(type: c.otherCancelledEvent.type, accountId: userId, key: $0.record.id) }
            }
            t.audit.append(r.audit)
            InMemoryTables.events(r.events + r.mail.map(\.event), in: &t)
            t.mail += r.mail
            if let token = r.cancelToken {
                t.cancelTokens.append(InMemoryTables.CancelToken(hash: token.hash, userId: token.userId, recoveryId: nil,
                                                                 credentialId: token.credentialId, expiresAt: token.expiresAt))
            }
            return .written(.registered(revocations))
        }
        switch outcome {
        case .written(let written): return written
        case .refused(let why):
            // As after the rolled-back statement: the challenge's use on its own.
            _ = try finishRegistration(challenge, .refused)
            throw .conflict(why)
        }
    }

    func passkeys(userId: String) throws(StorageError) -> AccountPasskeys? {
        try tables.read { t throws(StorageError) in
            t.users[userId].map { AccountPasskeys(user: $0, credentials: InMemoryLoginStore.live(of: userId, in: t)) }
        }
    }

    func rename(userId: String, credentialId: [UInt8], name: String,
                renamedEvent: EventTemplate?) throws(StorageError) -> (renamed: CredentialRecord, account: AccountPasskeys)? {
        try tables.change { (t, _) throws(StorageError) -> (renamed: CredentialRecord, account: AccountPasskeys)? in
            guard let user = t.users[userId],
                  let i = t.credentials.firstIndex(where: { $0.id == credentialId && $0.userId == userId && !t.revokedCredentials.contains($0.id) })
            else { return nil }
            let c = t.credentials[i]
            t.credentials[i] = CredentialRecord(
                id: c.id, userId: c.userId, publicKey: c.publicKey, alg: c.alg, signCount: c.signCount, aaguid: c.aaguid, transports: c.transports,
                backupEligible: c.backupEligible, backedUp: c.backedUp, attestationFormat: c.attestationFormat,
                attestationType: c.attestationType, name: name, flagged: c.flagged, createdAt: c.createdAt, lastUsedAt: c.lastUsedAt,
                approvesFrom: c.approvesFrom, hardwareBound: c.hardwareBound)
            if let e = renamedEvent { t.events.append(.init(type: e.type, accountId: userId, key: Base64URL.encode(credentialId))) }
            return (t.credentials[i], AccountPasskeys(user: user, credentials: InMemoryLoginStore.live(of: userId, in: t)))
        }
    }

    func revocationRead(userId: String, credentialId: [UInt8]) throws(StorageError) -> PasskeyRevocationRead {
        try tables.read { t throws(StorageError) in
            let live = InMemoryLoginStore.live(of: userId, in: t)
            let email = t.emails[userId]
            return PasskeyRevocationRead(
                ways: WaysIn(known: live.contains { $0.id == credentialId }, otherPasskey: live.contains { $0.id != credentialId },
                             recoveryCode: t.recoveryCodes.contains { $0.userId == userId && $0.usedAt == nil }, verifiedAddress: email != nil),
                email: email, language: t.languages[userId])
        }
    }

    func revokePasskey(userId: String, credentialId: [UInt8], audit: AuditRecord, redeeming: StepUpRedemption?, keeping rule: LastWayInRule?,
                       mail: [MailToSend], revokedEvent: EventTemplate?, sessionEvent: EventTemplate?) throws(StorageError) -> RevokedPasskey? {
        try tables.change { (t, now) throws(StorageError) -> RevokedPasskey? in
            let live = InMemoryLoginStore.live(of: userId, in: t)
            let known = live.contains { $0.id == credentialId }
            let open = rule.map { rule in
                live.contains { $0.id != credentialId } || t.recoveryCodes.contains { $0.userId == userId && $0.usedAt == nil }
                    || (rule.addressCounts && t.emails[userId] != nil)
            } ?? true
            // Judged as the database was before the change: the approving passkey may be the one revoked.
            let redeemable = redeeming.map { InMemoryTables.redeemable($0, in: t) } ?? true
            guard known, open, redeemable, let user = t.users[userId] else {
                if !redeemable { throw StorageError.conflict(.stepUpUsed) }
                if known, rule != nil { throw StorageError.conflict(.lastWayIn) }
                return nil
            }
            try InMemoryTables.redeem(redeeming, in: &t)
            t.revokedCredentials.insert(credentialId)
            var ended: [String] = []
            for (id, f) in t.families where f.credentialId == credentialId && f.userId == userId && f.revokedAt == nil {
                t.families[id]?.revokedAt = now
                ended.append(id)
            }
            t.audit.append(audit)
            if let e = revokedEvent { t.events.append(.init(type: e.type, accountId: userId, key: Base64URL.encode(credentialId))) }
            if let e = sessionEvent { t.events += ended.sorted().map { .init(type: e.type, accountId: userId, key: $0) } }
            InMemoryTables.events(mail.map(\.event), in: &t)
            t.mail += mail
            return RevokedPasskey(ended: ended.sorted(), account: AccountPasskeys(user: user, credentials: live.filter { $0.id != credentialId }))
        }
    }
}
