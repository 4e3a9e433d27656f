import Crypto
import Foundation
import JSON
@testable import LatchkeyServer
@testable import Storage
import Synchronization

/// The OpenID Provider's rows in memory, beside the shared ones of `InMemoryTables` (accounts,
/// passkeys, sessions and their refresh tokens, step-up receipts, audit, events): clients, requests,
/// codes, grants, consents, assertion `jti`s, and the device keys and step-up approvers an approval
/// names. One change holds this lock and then the shared tables' (always in that order), and stores
/// both copies only when the whole change succeeded, as one statement in PostgreSQL.
/// The revocation cascades of migration 20's triggers and `RevocationCascade.sessionsOfPasskeys`
/// are kept by `revoke(family:)`, `revokePasskey` and `revokeDeviceKey`.
final class InMemoryOAuthTables: Sendable {
    struct Request {
        var kind: String
        var clientId: String
        var params: JSONValue
        var createdAt: Date
        var expiresAt: Date
        var usedAt: Date?
        var clientAddress: String?
    }

    /// What approved a code or a grant: the session, and the passkey (base64url) or device key.
    struct Approvers: Equatable {
        var family: String?
        var credential: String?
        var deviceKey: String?
    }

    struct Code {
        var clientId: String
        var userId: String
        var grant: JSONValue
        var expiresAt: Date
        var usedAt: Date?
        var replayedAt: Date?
        var familyId: String?
        var approvers: Approvers
    }

    struct Grant {
        var clientId: String
        var grant: JSONValue
        var approvers: Approvers
    }

    struct ConsentKey: Hashable {
        var userId: String
        var clientId: String
    }

    struct Rows {
        var clients: [OAuthClientRecord] = []
        var requests: [[UInt8]: Request] = [:]
        var codes: [[UInt8]: Code] = [:]
        /// By the `oauth` family each grant started.
        var grants: [String: Grant] = [:]
        var consents: [ConsentKey: (scopes: [String], grantedAt: Date)] = [:]
        var assertionJTIs: [String: Date] = [:]
        /// Device keys by id: revoked or not.
        var deviceKeys: [String: Bool] = [:]
        /// A step-up receipt's approving key by token `jti`: its method (`passkey`, `device-key`) and key id.
        var stepUpKeys: [String: (method: String, keyId: String)] = [:]
    }

    let shared: InMemoryTables
    private let rows = Mutex(Rows())
    /// Operations that fail with `.unavailable` (by name; `"*"`: every one).
    private let failing = Mutex<Set<String>>([])

    init(shared: InMemoryTables) { self.shared = shared }

    var now: Date { shared.now() }

    // MARK: Failing on purpose

    func fail(_ operations: Set<String>) { failing.withLock { $0 = operations } }

    func check(_ operation: String) throws(StorageError) {
        let failing = failing.withLock { $0 }
        if failing.contains("*") || failing.contains(operation) { throw StorageError.unavailable("\(operation): the test's store is down") }
    }

    // MARK: Reading and changing

    func read<T>(_ body: (Rows, InMemoryTables.Tables, Date) throws(StorageError) -> T) throws(StorageError) -> T {
        let mine = rows.withLock { $0 }
        let now = self.now
        return try shared.read { (t) throws(StorageError) in try body(mine, t, now) }
    }

    func change<T: Sendable>(_ body: (inout Rows, inout InMemoryTables.Tables, Date) throws(StorageError) -> T) throws(StorageError) -> T {
        try rows.allOrNothing { (r: inout Rows) throws(StorageError) -> T in
            try shared.change { (t, now) throws(StorageError) in try body(&r, &t, now) }
        }
    }

    var snapshot: Rows { rows.withLock { $0 } }

    // MARK: Revocations and their cascades

    /// A family's security revocation (`ended_by` NULL): the trigger `refresh_families_grants`
    /// revokes every `oauth` family it approved, and so on down.
    static func revoke(family id: String, in r: Rows, _ t: inout InMemoryTables.Tables, now: Date) {
        guard t.families[id]?.revokedAt == nil, t.families[id] != nil else { return }
        t.families[id]?.revokedAt = now
        for (familyId, grant) in r.grants where grant.approvers.family == id { revoke(family: familyId, in: r, &t, now: now) }
    }

    /// Ends a family like a logout: no cascade.
    static func end(family id: String, _ t: inout InMemoryTables.Tables, now: Date) -> Bool {
        guard let f = t.families[id], f.revokedAt == nil else { return false }
        t.families[id]?.revokedAt = now
        t.families[id]?.endedBy = "logout"
        return true
    }

    /// A session's security revocation (its owner or an admin ending it), with its cascade.
    func revokeSession(_ familyId: String) throws {
        try change { (r, t, now) throws(StorageError) in Self.revoke(family: familyId, in: r, &t, now: now) }
    }

    /// A passkey revoked: the sessions it began (`RevocationCascade.sessionsOfPasskeys`) and every
    /// grant it approved (trigger `credentials_grants`).
    func revokePasskey(_ id: [UInt8]) throws {
        try change { (r, t, now) throws(StorageError) in
            t.revokedCredentials.insert(id)
            for (familyId, f) in t.families where f.credentialId == id { Self.revoke(family: familyId, in: r, &t, now: now) }
            let encoded = Base64URL.encode(id)
            for (familyId, grant) in r.grants where grant.approvers.credential == encoded { Self.revoke(family: familyId, in: r, &t, now: now) }
        }
    }

    /// A device key revoked: every grant it approved (trigger `device_keys_grants`).
    func revokeDeviceKey(_ id: String) throws {
        try change { (r, t, now) throws(StorageError) in
            r.deviceKeys[id] = true
            for (familyId, grant) in r.grants where grant.approvers.deviceKey == id { Self.revoke(family: familyId, in: r, &t, now: now) }
        }
    }

    // MARK: What a test sets up

    func addDeviceKey(_ id: String) { rows.withLock { $0.deviceKeys[id] = false } }

    /// A step-up receipt (redeemable once) made with `method`'s key `keyId`.
    func addStepUp(_ redemption: StepUpRedemption, method: String, keyId: String) {
        shared.addReceipt(redemption)
        rows.withLock { $0.stepUpKeys[redemption.jti] = (method, keyId) }
    }

    /// A live session of `userId` begun by the passkey `credentialId`; `cookie`: an OP browser
    /// session whose one refresh token is that cookie's hash.
    func addSession(_ familyId: String, userId: String, credentialId: [UInt8]?, method: SessionMethod = .passkey,
                    cookie: String? = nil, ttlSeconds: Int = 43200) throws {
        try change { (_, t, now) throws(StorageError) in
            t.families[familyId] = InMemoryTables.Family(id: familyId, userId: userId, method: method, credentialId: credentialId,
                                                         authTime: now, createdAt: now, lastUsedAt: now, browser: cookie != nil)
            if let cookie {
                let hash = OpaqueSecret.hash(cookie)
                t.refreshTokens[hash] = InMemoryTables.RefreshToken(hash: hash, familyId: familyId,
                                                                    expiresAt: now.addingTimeInterval(Double(ttlSeconds)))
            }
        }
    }
}

/// `OAuthStore` in memory, keeping the rules `OAuthRepository`'s SQL keeps: a pushed request is used
/// once, by the statement that stores what it stands for; authorization requests expire, are limited
/// per address and client, and an identical pending one stands; an approval or refusal uses its
/// request once (with the step-up's redemption while its key is live); a code is used once — a
/// refused one stays used, a replayed one revokes what its first use issued — and checked with its
/// client, redirect URI and PKCE verifier, then issued only while its approvers live; a refresh
/// token rotates once, its reuse revokes its family, a wider scope changes nothing; consents grow
/// by union; a logout ends sessions without a cascade.
struct InMemoryOAuthStore: OAuthStore {
    let tables: InMemoryOAuthTables

    init(tables: InMemoryOAuthTables) { self.tables = tables }

    typealias Rows = InMemoryOAuthTables.Rows

    // MARK: Clients

    func insertClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> OAuthClientRecord {
        try tables.check("insertClient")
        return try tables.change { (r, t, now) throws(StorageError) in
            guard !r.clients.contains(where: { $0.id == c.id }) else { throw StorageError.conflict(.other("oauth_clients_pkey")) }
            try InMemoryTables.redeem(redeeming, in: &t)
            var stored = c
            stored.createdAt = now
            r.clients.append(stored)
            t.audit.append(audit)
            return stored
        }
    }

    func clients() throws(StorageError) -> [OAuthClientRecord] {
        try tables.check("clients")
        return try tables.read { (r, _, _) throws(StorageError) in
            r.clients.sorted { $0.createdAt != $1.createdAt ? $0.createdAt < $1.createdAt : $0.id < $1.id }
        }
    }

    func client(id: String) throws(StorageError) -> OAuthClientRecord? {
        try tables.check("client")
        return try tables.read { (r, _, _) throws(StorageError) in r.clients.first { $0.id == id } }
    }

    func updateClient(_ c: OAuthClientRecord, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> Bool {
        try tables.check("updateClient")
        return try tables.change { (r, t, _) throws(StorageError) in
            guard let i = r.clients.firstIndex(where: { $0.id == c.id }) else { return false }
            r.clients[i].name = c.name
            r.clients[i].redirectURIs = c.redirectURIs
            r.clients[i].postLogoutRedirectURIs = c.postLogoutRedirectURIs
            r.clients[i].jwksURI = c.jwksURI
            r.clients[i].authorizationDetailsTypes = c.authorizationDetailsTypes
            r.clients[i].idTokenAlg = c.idTokenAlg
            r.clients[i].pkceRequired = c.pkceRequired
            r.clients[i].dpopRequired = c.dpopRequired
            r.clients[i].profile = c.profile
            try InMemoryTables.redeem(redeeming, in: &t)
            t.audit.append(audit)
            return true
        }
    }

    func deleteClient(id: String, audit: AuditRecord, redeeming: StepUpRedemption?) throws(StorageError) -> [String]? {
        try tables.check("deleteClient")
        return try tables.change { (r, t, now) throws(StorageError) in
            let ended = r.grants.filter { $0.value.clientId == id }.map(\.key).filter { t.families[$0]?.revokedAt == nil }.sorted()
            for familyId in ended { InMemoryOAuthTables.revoke(family: familyId, in: r, &t, now: now) }
            guard r.clients.contains(where: { $0.id == id }) else { throw StorageError.notFound }
            // ON DELETE CASCADE: what names the client goes with it.
            r.clients.removeAll { $0.id == id }
            r.requests = r.requests.filter { $0.value.clientId != id }
            r.codes = r.codes.filter { $0.value.clientId != id }
            r.grants = r.grants.filter { $0.value.clientId != id }
            r.consents = r.consents.filter { $0.key.clientId != id }
            try InMemoryTables.redeem(redeeming, in: &t)
            t.audit.append(audit)
            return ended
        }
    }

    // MARK: Requests

    func storeRequest(hash: [UInt8], kind: String, clientId: String, params: JSONValue, ttlSeconds: Int,
                      dpop: DPoPReplayKey?) throws(StorageError) -> Bool {
        try tables.check("storeRequest")
        // The proof is recorded first; a replayed one stores nothing.
        if let dpop, try !recordDPoPProof(dpop) { return false }
        return try tables.change { (r, _, now) throws(StorageError) -> Bool in
            guard r.requests[hash] == nil else { throw StorageError.conflict(.other("oauth_requests_pkey")) }
            r.requests[hash] = InMemoryOAuthTables.Request(kind: kind, clientId: clientId, params: params, createdAt: now,
                                                          expiresAt: now.addingTimeInterval(Double(ttlSeconds)))
            return true
        }
    }

    /// The pushed request `hash` used up, if it is there to use (RFC 9126 §2.2).
    static func useUpPushed(_ hash: [UInt8]?, in r: inout Rows, now: Date) -> Bool {
        guard let hash else { return true }
        guard let p = r.requests[hash], p.kind == "par", p.usedAt == nil, p.expiresAt > now else { return false }
        r.requests[hash]?.usedAt = now
        return true
    }

    static func isPending(_ q: InMemoryOAuthTables.Request?, now: Date) -> Bool {
        guard let q else { return false }
        return q.kind == "authorize" && q.usedAt == nil && q.expiresAt > now
    }

    func storeAuthorizationRequest(hash: [UInt8], clientId: String, params: JSONValue, ttlSeconds: Int, clientAddress: String,
                                   perAddressPerMinute: Int?, perClient: Int, usingUpPushed pushed: [UInt8]?) throws(StorageError) -> OAuthRequestStore {
        try tables.check("storeAuthorizationRequest")
        return try tables.change { (r, _, now) throws(StorageError) in
            // Every part runs, as the statement's CTEs do: the pushed request is used up whatever else happens.
            let won = Self.useUpPushed(pushed, in: &r, now: now)
            let before = r.requests
            r.requests = r.requests.filter { $0.value.expiresAt >= now.addingTimeInterval(-3600) }
            let existing = before[hash].map { $0.usedAt == nil && $0.expiresAt > now } ?? false
            let fromAddress = before.values.filter { $0.clientAddress == clientAddress && $0.createdAt > now.addingTimeInterval(-60) }.count
            let ofClient = before.values.filter { $0.clientId == clientId && $0.usedAt == nil && $0.expiresAt > now }.count
            let ok = !existing && won && (perAddressPerMinute.map { fromAddress < $0 } ?? true) && ofClient < perClient
            if ok {
                r.requests[hash] = InMemoryOAuthTables.Request(kind: r.requests[hash]?.kind ?? "authorize", clientId: r.requests[hash]?.clientId ?? clientId,
                                                              params: params, createdAt: now, expiresAt: now.addingTimeInterval(Double(ttlSeconds)),
                                                              usedAt: nil, clientAddress: clientAddress)
            }
            if !won { return .pushedGone }
            if existing { return .pending }
            return ok ? .stored : .limited
        }
    }

    func request(hash: [UInt8]) throws(StorageError) -> OAuthRequestRecord? {
        try tables.check("request")
        return try tables.read { (r, _, now) throws(StorageError) in
            guard let q = r.requests[hash], Self.isPending(q, now: now) else { return nil }
            return OAuthRequestRecord(clientId: q.clientId, params: q.params, createdAt: q.createdAt)
        }
    }

    func pushed(hash: [UInt8], clientId: String) throws(StorageError) -> OAuthRequestRecord? {
        try tables.check("pushed")
        return try tables.read { (r, _, now) throws(StorageError) in
            guard let q = r.requests[hash], q.kind == "par", q.clientId == clientId, q.usedAt == nil, q.expiresAt > now else { return nil }
            return OAuthRequestRecord(clientId: q.clientId, params: q.params, createdAt: q.createdAt)
        }
    }

    /// Whether the key that made a step-up receipt is live (`StepUpRedemption.approverIsLive`).
    static func approverIsLive(_ jti: String, userId: String, _ r: Rows, _ t: InMemoryTables.Tables) -> Bool {
        guard let key = r.stepUpKeys[jti] else { return true }
        if key.method == "device-key" { return r.deviceKeys[key.keyId] == false }
        guard let id = Base64URL.decode(key.keyId) else { return false }
        return t.credentials.contains { $0.id == id && $0.userId == userId } && !t.revokedCredentials.contains(id)
    }

    func finish(requestHash: [UInt8]?, code: (hash: [UInt8], clientId: String, userId: String, grant: JSONValue, ttlSeconds: Int)?,
                approvers: OAuthApprovers?, consent scopes: [String]?, usingUpPushed pushed: [UInt8]?,
                redeeming: StepUpRedemption?, audit: AuditRecord, events: [OutboxEvent]) throws(StorageError) -> Bool {
        try tables.check("finish")
        let (done, pending) = try tables.change { (r, t, now) throws(StorageError) -> (Bool, Bool) in
            let won = Self.useUpPushed(pushed, in: &r, now: now)
            let pending: Bool
            if let requestHash {
                pending = Self.isPending(r.requests[requestHash], now: now)
            } else if let code, let scopes {
                let consent = r.consents[.init(userId: code.userId, clientId: code.clientId)]
                pending = won && consent.map { Set($0.scopes).isSuperset(of: scopes) } ?? false
            } else {
                return (false, false)
            }
            var go = pending
            if let red = redeeming {
                let receipt = t.receipts[red.jti]
                go = pending && receipt.map { !$0.consumed && $0.redemption == red } == true
                    && Self.approverIsLive(red.jti, userId: red.userId, r, t)
                if go { t.receipts[red.jti]?.consumed = true }
            }
            if go, let requestHash { r.requests[requestHash]?.usedAt = now }
            if let code {
                r.codes = r.codes.filter { $0.value.expiresAt >= now.addingTimeInterval(-3600) || $0.value.familyId != nil }
                if go {
                    // The approving key: the step-up's (its receipt names it), else the passkey that began the session.
                    let key = approvers?.stepUpJTI.flatMap { r.stepUpKeys[$0] }
                    let credential = key == nil ? approvers?.sessionCredential.map(Base64URL.encode) : key?.method == "passkey" ? key?.keyId : nil
                    r.codes[code.hash] = InMemoryOAuthTables.Code(
                        clientId: code.clientId, userId: code.userId, grant: code.grant,
                        expiresAt: now.addingTimeInterval(Double(code.ttlSeconds)),
                        approvers: .init(family: approvers?.familyId, credential: credential,
                                         deviceKey: key?.method == "device-key" ? key?.keyId : nil))
                    if let scopes, requestHash != nil {
                        let k = InMemoryOAuthTables.ConsentKey(userId: code.userId, clientId: code.clientId)
                        r.consents[k] = (Array(Set((r.consents[k]?.scopes ?? []) + scopes)).sorted(), now)
                    }
                }
            }
            if go {
                t.audit.append(audit)
                InMemoryTables.events(events, in: &t)
            }
            return (go, pending)
        }
        if !done, pending, redeeming != nil { throw StorageError.conflict(.stepUpUsed) }
        return done
    }

    // MARK: Codes and grants

    func redeemCode(hash: [UInt8], presented: OAuthCodePresentation, familyId: String, refreshHash: [UInt8], ttlSeconds: Int,
                    replayAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthCodeRedemption {
        try tables.check("redeemCode")
        // The proof is recorded first; a replayed one leaves the code as it was.
        if let dpop = presented.dpop, try !recordDPoPProof(dpop.replay) { return .proofReplayed }
        return try tables.change { (r, t, now) throws(StorageError) -> OAuthCodeRedemption in
            guard let c = r.codes[hash] else { return .invalid("the code is unknown or expired") }
            if c.usedAt != nil {
                // RFC 6749 §4.1.2: used twice — what the first use issued is revoked, with the audit line.
                r.codes[hash]?.replayedAt = now
                if let family = c.familyId { InMemoryOAuthTables.revoke(family: family, in: r, &t, now: now) }
                var detail = replayAudit.detail.objectMembers ?? []
                detail.append(("sessionId", c.familyId.map { .string($0) } ?? .null))
                t.audit.append(AuditRecord(actor: replayAudit.actor, action: replayAudit.action, subject: replayAudit.subject, detail: .object(detail)))
                return .replayed(revokedFamily: c.familyId)
            }
            let challenge = c.grant["code_challenge"]?.stringValue
            let refusal: String? =
                if c.expiresAt <= now { "the code is unknown or expired" }
                else if c.clientId != presented.clientId { "the code was issued to another client" }
                else if presented.redirectURI == nil || presented.redirectURI != c.grant["redirect_uri"]?.stringValue {
                    "redirect_uri does not match the authorization request"
                } else if let challenge, challenge != presented.verifierChallenge {
                    "code_verifier does not match the code_challenge (PKCE S256)"
                } else if challenge == nil, presented.verifierChallenge != nil || !presented.pkceOptional {
                    "code_verifier does not match the code_challenge (PKCE S256)"
                } else if let bound = c.grant["dpop_jkt"]?.stringValue, bound != presented.dpop?.jkt {
                    "the code is bound to another DPoP key (dpop_jkt)"
                } else { nil }
            // A refused code stays used up.
            r.codes[hash]?.usedAt = now
            if let refusal { return .invalid(refusal) }
            let a = c.approvers
            let live = (a.family.map { id in t.families[id].map { $0.revokedAt == nil || $0.endedBy == "logout" } ?? false } ?? true)
                && (a.credential.map { key in
                    Base64URL.decode(key).map { id in t.credentials.contains { $0.id == id } && !t.revokedCredentials.contains(id) } ?? false
                } ?? true)
                && (a.deviceKey.map { r.deviceKeys[$0] == false } ?? true)
            guard live else { return .approverRevoked }
            guard t.families[familyId] == nil, t.refreshTokens[refreshHash] == nil else { throw StorageError.conflict(.other("refresh_families_pkey")) }
            r.codes[hash]?.familyId = familyId
            t.families[familyId] = InMemoryTables.Family(
                id: familyId, userId: c.userId, method: .oauth, credentialId: c.grant["credential_id"]?.stringValue.flatMap(Base64URL.decode),
                authTime: Date(timeIntervalSince1970: c.grant["auth_time"]?.doubleValue ?? 0), createdAt: now, lastUsedAt: now, browser: false)
            t.refreshTokens[refreshHash] = InMemoryTables.RefreshToken(hash: refreshHash, familyId: familyId,
                                                                       expiresAt: now.addingTimeInterval(Double(ttlSeconds)))
            // The grant is bound to the proof's key (or to none).
            var members = (c.grant.objectValue ?? []).filter { $0.key != "dpop_jkt" }
            if let jkt = presented.dpop?.jkt { members.append(("dpop_jkt", .string(jkt))) }
            r.grants[familyId] = InMemoryOAuthTables.Grant(clientId: presented.clientId, grant: .object(members), approvers: a)
            InMemoryTables.audit(AuditTemplate(actor: nil, action: issuedAudit.action, detail: issuedAudit.detail), subject: c.userId, detail: [],
                                 in: &t)
            return .started(OAuthCodeRecord(clientId: presented.clientId, userId: c.userId, grant: c.grant))
        }
    }

    func rotate(hash: [UInt8], newHash: [UInt8], clientId: String, scope: [String]?, dpop: DPoPBinding?, sameKey: Bool, rotates: Bool,
                ttlSeconds: Int, reuseAudit: AuditRecord, issuedAudit: AuditRecord) throws(StorageError) -> OAuthRefreshOutcome {
        try tables.check("rotate")
        // The proof is recorded first; a replayed one rotates nothing.
        if let dpop, try !recordDPoPProof(dpop.replay) { return .proofReplayed }
        return try tables.change { (r, t, now) throws(StorageError) -> OAuthRefreshOutcome in
            guard let token = t.refreshTokens[hash], let family = t.families[token.familyId], let grant = r.grants[family.id],
                  grant.clientId == clientId else { return .invalid }
            // A public client's bound grant rotates only with a proof by its key.
            if sameKey, let bound = grant.grant["dpop_jkt"]?.stringValue, bound != dpop?.jkt { return .invalid }
            let granted = Set((grant.grant["scope"]?.stringValue ?? "").split(separator: " ").map(String.init))
            let usable = token.usedAt == nil && token.expiresAt > now && family.revokedAt == nil && family.method == .oauth
            if usable, scope.map({ granted.isSuperset(of: $0) }) ?? true {
                // A token that does not rotate is kept as it is: no next token, no use recorded.
                guard rotates else {
                    t.families[family.id]?.lastUsedAt = now
                    InMemoryTables.audit(AuditTemplate(actor: nil, action: issuedAudit.action, detail: issuedAudit.detail),
                                         subject: family.userId, detail: [("sessionId", .string(family.id))], in: &t)
                    return .rotated(userId: family.userId, familyId: family.id, authTime: family.authTime, grant: grant.grant)
                }
                t.refreshTokens[hash]?.usedAt = now
                t.families[family.id]?.lastUsedAt = now
                guard t.refreshTokens[newHash] == nil else { throw StorageError.conflict(.other("refresh_tokens_pkey")) }
                t.refreshTokens[newHash] = InMemoryTables.RefreshToken(hash: newHash, familyId: family.id,
                                                                       expiresAt: now.addingTimeInterval(Double(ttlSeconds)))
                InMemoryTables.audit(AuditTemplate(actor: nil, action: issuedAudit.action, detail: issuedAudit.detail),
                                     subject: family.userId, detail: [("sessionId", .string(family.id))], in: &t)
                return .rotated(userId: family.userId, familyId: family.id, authTime: family.authTime, grant: grant.grant)
            }
            // RFC 9700 §4.14.2: presented after its use, the family is revoked (once), with its audit line.
            if token.usedAt != nil {
                guard family.revokedAt == nil else { return .invalid }
                InMemoryOAuthTables.revoke(family: family.id, in: r, &t, now: now)
                InMemoryTables.audit(AuditTemplate(actor: reuseAudit.actor, action: reuseAudit.action, detail: reuseAudit.detail),
                                     subject: clientId, detail: [("sessionId", .string(family.id))], in: &t)
                return .reused(familyId: family.id)
            }
            return usable ? .scopeExceeded : .invalid
        }
    }

    func revoke(refreshHash: [UInt8], clientId: String) throws(StorageError) -> [String] {
        try tables.check("revoke")
        return try tables.change { (r, t, now) throws(StorageError) -> [String] in
            guard let token = t.refreshTokens[refreshHash], r.grants[token.familyId]?.clientId == clientId,
                  t.families[token.familyId]?.revokedAt == nil else { return [] }
            InMemoryOAuthTables.revoke(family: token.familyId, in: r, &t, now: now)
            return [token.familyId]
        }
    }

    func logout(sid: String, userId: String, clientId: String, cookieHash: [UInt8]?)
        throws(StorageError) -> (ended: [String], browserEnded: Bool, cookieSession: String?) {
        try tables.check("logout")
        return try tables.change { (r, t, now) throws(StorageError) in
            // What the cookie names is read as the statement began.
            let cookieSession = cookieHash.flatMap { t.refreshTokens[$0] }.flatMap { token in
                t.families[token.familyId].flatMap { f in token.expiresAt > now && f.browser && f.revokedAt == nil ? f.id : nil }
            }
            var ended: [String] = []
            for (familyId, grant) in r.grants where grant.clientId == clientId && (familyId == sid || grant.grant["op_sid"]?.stringValue == sid) {
                guard let f = t.families[familyId], f.userId == userId, f.method == .oauth, f.revokedAt == nil else { continue }
                _ = InMemoryOAuthTables.end(family: familyId, &t, now: now)
                ended.append(familyId)
            }
            var browserEnded = false
            if let f = t.families[sid], f.userId == userId, f.browser, f.revokedAt == nil, cookieSession == sid {
                browserEnded = InMemoryOAuthTables.end(family: sid, &t, now: now)
            }
            return (ended.sorted(), browserEnded, cookieSession)
        }
    }

    func recordDPoPProof(_ key: DPoPReplayKey) throws(StorageError) -> Bool {
        try recordAssertion(clientId: "dpop", jtiHash: key.bytes, ttlSeconds: DPoPProofRepository.retention)
    }

    func recordAssertion(clientId: String, jtiHash: [UInt8], ttlSeconds: Int) throws(StorageError) -> Bool {
        try tables.check("recordAssertion")
        return try tables.change { (r, _, now) throws(StorageError) -> Bool in
            r.assertionJTIs = r.assertionJTIs.filter { $0.value >= now }
            let key = clientId + "|" + Base64URL.encode(jtiHash)
            guard r.assertionJTIs[key] == nil else { return false }
            r.assertionJTIs[key] = now.addingTimeInterval(Double(ttlSeconds))
            return true
        }
    }

    // MARK: Browser sessions, userinfo, consents

    static func pendingRecord(_ hash: [UInt8]?, _ r: Rows, now: Date) -> OAuthRequestRecord? {
        guard let hash, let q = r.requests[hash], isPending(q, now: now) else { return nil }
        return OAuthRequestRecord(clientId: q.clientId, params: q.params, createdAt: q.createdAt)
    }

    func browserSession(cookieHash: [UInt8], withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: BrowserSessionRecord, request: OAuthRequestRecord?)? {
        try tables.check("browserSession")
        return try tables.read { (r, t, now) throws(StorageError) in
            guard let token = t.refreshTokens[cookieHash], token.expiresAt > now, let f = t.families[token.familyId], f.browser,
                  f.revokedAt == nil, let user = t.users[f.userId] else { return nil }
            let credential = f.credentialId.flatMap { id in t.credentials.first { $0.id == id } }
            return (BrowserSessionRecord(familyId: f.id, userId: f.userId, username: user.username, credentialId: f.credentialId,
                                         authTime: f.authTime, passkeyApprovesFrom: credential?.approvesFrom,
                                         hardware: credential?.hardwareBound ?? false),
                    Self.pendingRecord(requestHash, r, now: now))
        }
    }

    func approverSession(familyId: String, userId: String, withRequest requestHash: [UInt8]?)
        throws(StorageError) -> (session: ApproverSessionRecord, request: OAuthRequestRecord?)? {
        try tables.check("approverSession")
        return try tables.read { (r, t, now) throws(StorageError) in
            guard let f = t.families[familyId], f.userId == userId, f.revokedAt == nil else { return nil }
            let credential = f.credentialId.flatMap { id in t.credentials.first { $0.id == id } }
            return (ApproverSessionRecord(method: f.method, credentialId: f.credentialId, authTime: f.authTime,
                                          passkeyApprovesFrom: credential?.approvesFrom, hardware: credential?.hardwareBound ?? false),
                    Self.pendingRecord(requestHash, r, now: now))
        }
    }

    func endBrowserSession(familyId: String) throws(StorageError) -> Bool {
        try tables.check("endBrowserSession")
        return try tables.change { (_, t, now) throws(StorageError) -> Bool in
            guard t.families[familyId]?.browser == true else { return false }
            return InMemoryOAuthTables.end(family: familyId, &t, now: now)
        }
    }

    func userinfo(userId: String, sessionId: String) throws(StorageError) -> (user: UserRecord, email: String?)? {
        try tables.check("userinfo")
        return try tables.read { (_, t, _) throws(StorageError) in
            guard let user = t.users[userId], let f = t.families[sessionId], f.userId == userId, f.revokedAt == nil else { return nil }
            return (user, t.emails[userId])
        }
    }

    func username(userId: String) throws(StorageError) -> String? {
        try tables.check("username")
        return try tables.read { (_, t, _) throws(StorageError) in t.users[userId]?.username }
    }

    func consents(userId: String) throws(StorageError) -> [OAuthConsentRecord] {
        try tables.check("consents")
        return try tables.read { (r, _, _) throws(StorageError) in
            r.consents.compactMap { key, value -> OAuthConsentRecord? in
                guard key.userId == userId, let client = r.clients.first(where: { $0.id == key.clientId }) else { return nil }
                return OAuthConsentRecord(clientId: key.clientId, clientName: client.name, scopes: value.scopes, grantedAt: value.grantedAt)
            }
            .sorted { $0.grantedAt != $1.grantedAt ? $0.grantedAt > $1.grantedAt : $0.clientId < $1.clientId }
        }
    }

    func deleteConsent(userId: String, clientId: String) throws(StorageError) -> Bool {
        try tables.check("deleteConsent")
        return try tables.change { (r, _, _) throws(StorageError) -> Bool in
            r.consents.removeValue(forKey: .init(userId: userId, clientId: clientId)) != nil
        }
    }
}
