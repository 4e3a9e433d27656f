import Crypto
import Foundation
import JSON
import Storage
import Tokens

/// Sessions (SPEC "Sessions"): a session is a refresh-token family; this service starts them,
/// rotates, lists and ends them, issues the access tokens that go with them, and says who a
/// request's bearer token belongs to — refusing a revoked session's tokens before they expire
/// (`RevokedSessions`: in memory while the revocation feed is heard from, else one indexed read).
public final class SessionService: Sendable {
    /// The settings sessions are issued with, read once from the configuration (SPEC "Sessions").
    struct Lifetimes: Sendable {
        /// Seconds an access token lives (`LATCHKEY_ACCESS_TOKEN_TTL`).
        var accessToken: Int
        /// Seconds a refresh token lives, from its issue (`LATCHKEY_REFRESH_TOKEN_TTL`).
        var refreshToken: Int

        init(_ c: Configuration) {
            accessToken = c.accessTokenTTL
            refreshToken = c.refreshTokenTTL
        }
    }

    let sessions: any SessionStore
    let signer: TokenSigner
    let lifetimes: Lifetimes
    let runtime: Runtime
    let revoked: RevokedSessions
    let events: OutboxEvents


    init(sessions: any SessionStore, signer: TokenSigner, lifetimes: Lifetimes, runtime: Runtime,
         revoked: RevokedSessions, events: OutboxEvents) {
        self.events = events
        self.sessions = sessions
        self.revoked = revoked
        self.signer = signer
        self.lifetimes = lifetimes
        self.runtime = runtime
    }

    /// A session not stored yet: the row to store (with the ceremony that began it) and the refresh
    /// token only the client will ever see.
    struct Pending: Sendable {
        let record: NewSession
        let refreshToken: String
    }

    /// The tokens a client receives for a session (SPEC `tokens`).
    struct Issued: Sendable {
        let accessToken: String
        let refreshToken: String
        let expiresIn: Int
        /// The DPoP key the session is bound to (`cnf.jkt`; `token_type` `DPoP`), nil for Bearer.
        var jkt: String? = nil
    }

    /// A new session for `userId` that `credentialId`'s passkey ceremony (registration or login)
    /// began just now, for a caller that stores it inside its own transaction (registration).
    /// `method` `.recovery`: a passkey registered with a recovery token (SPEC "Recovery").
    /// `dpop`: the request's DPoP proof (SPEC "Sender-constrained tokens"): the session is bound to
    /// its key, and its `jti` is recorded by the statement that stores the session.
    func prepare(userId: String, credentialId: [UInt8]?, method: SessionMethod = .passkey, dpop: DPoPBinding? = nil) -> Pending {
        let refresh = OpaqueSecret(prefix: "lkr_", runtime: runtime)
        // Whole seconds: the token's `auth_time` (NumericDate) and the stored one are the same instant.
        var record = NewSession(familyId: runtime.sessionIdentifier(), userId: userId, refreshHash: refresh.hash,
                                ttlSeconds: lifetimes.refreshToken, method: method, credentialId: credentialId,
                                authTime: Date(timeIntervalSince1970: Double(runtime.unixTime)))
        record.dpop = dpop
        return Pending(record: record, refreshToken: refresh.token)
    }

    /// The token response for a stored session.
    /// `authentication`: the passkey ceremony that began it (an email session's is its own).
    func issue(_ pending: Pending, authentication: AuthenticationClaims) throws(ServiceError) -> Issued {
        try issue(userId: pending.record.userId, familyId: pending.record.familyId, authTime: pending.record.authTime,
                  refreshToken: pending.refreshToken,
                  claims: pending.record.method == .email ? .emailOTP : authentication, jkt: pending.record.dpop?.jkt)
    }

    /// A session that a mailed one-time code began (SPEC "Email sign-in": `acr`
    /// `urn:latchkey:acr:email-otp`, `amr` `["otp"]`), stored with its audit line.
    func startEmailSession(userId: String, audit: [AuditRecord], language: String? = nil) throws(ServiceError) -> Issued {
        let pending = prepare(userId: userId, credentialId: nil, method: .email)
        _ = try storage { () throws(StorageError) in try sessions.start(session: pending.record, audit: audit, language: language) }
        return try issue(pending, authentication: .emailOTP)
    }

    /// `auth_time` is the session's (SPEC "Sessions"): the authentication that began it, never the refresh.
    private func issue(userId: String, familyId: String, authTime: Date, refreshToken: String,
                       claims: AuthenticationClaims, jkt: String?) throws(ServiceError) -> Issued {
        let now = runtime.unixTime
        let access: String
        do {
            access = try signer.sign(AccessClaims(subject: userId, sessionId: familyId, jwtId: runtime.identifier(), issuedAt: now,
                                                  expiresAt: now + Int64(lifetimes.accessToken),
                                                  authTime: Int64(authTime.timeIntervalSince1970.rounded(.down)), authentication: claims,
                                                  jkt: jkt))
        } catch { throw ServiceError(.internalError, "no signing key") }
        return Issued(accessToken: access, refreshToken: refreshToken, expiresIn: lifetimes.accessToken, jkt: jkt)
    }

    // MARK: Refresh and logout

    /// OAuth refresh (RFC 6749 §6) with rotation; a reused token revokes its whole family (RFC 9700 §4.14.2).
    /// `dpop`: the request's proof; a session bound to a DPoP key refreshes only with a proof by
    /// that key (RFC 9449 §5), and a Bearer session is bound by the first proof that refreshes it.
    func refresh(_ token: String, dpop: DPoPBinding? = nil) throws(ServiceError) -> Issued {
        let next = OpaqueSecret(prefix: "lkr_", runtime: runtime)
        let outcome = try storage { () throws(StorageError) in
            try sessions.rotate(hash: OpaqueSecret.hash(token), newHash: next.hash, ttlSeconds: lifetimes.refreshToken,
                                reuseAudit: AuditTemplate(.refreshReuseDetected, actor: AuditActor.server),
                                reuseEvent: events.sessionRevoked(reason: .refreshTokenReuse), dpop: dpop)
        }
        switch outcome {
        case .rotated(let userId, let familyId, let authTime, let method, let jkt):
            // A refreshed email session stays an email one (never upgraded to a passkey acr).
            return try issue(userId: userId, familyId: familyId, authTime: authTime, refreshToken: next.token,
                             claims: method == .email ? .emailOTP : .passkey, jkt: jkt)
        case .proofRequired:
            throw SessionDPoP.refusal(.invalidProof, "this session is bound to a DPoP key: a proof by that key is required")
        case .proofReplayed:
            throw SessionDPoP.replayed
        case .reused(let familyId):
            revoked.insert([familyId])
            throw ServiceError(.invalidGrant, "refresh token reuse detected: the session is revoked")
        case .invalid:
            throw ServiceError(.invalidGrant, "the refresh token is invalid, expired or revoked")
        }
    }

    /// `POST /v1/logout`: ends the session the access token belongs to.
    func logout(_ caller: Caller) throws(ServiceError) {
        let ended = try storage { () throws(StorageError) in
            try sessions.revoke(userId: caller.userId, familyId: caller.sessionId, logout: true,
                                revokedEvent: events.sessionRevoked(reason: .logout))
        }
        revoked.insertLogout(ended)
    }

    // MARK: The user's sessions

    /// `GET /v1/sessions`: the caller's live sessions; `current` marks the one the token belongs to.
    func list(_ caller: Caller) throws(ServiceError) -> SessionList {
        SessionList(sessions: live(try storage { () throws(StorageError) in try sessions.list(userId: caller.userId) }), current: caller.sessionId)
    }

    /// `DELETE /v1/sessions/{id}`: ends one of the caller's live sessions; anyone else's, or an
    /// unknown or ended one, is 404.
    func end(_ caller: Caller, sessionId: String) throws(ServiceError) {
        guard !sessionId.isEmpty, sessionId.utf8.count <= 64 else { throw ServiceError.notFound("session") }
        let ended = try storage { () throws(StorageError) in
            try sessions.revoke(userId: caller.userId, familyId: sessionId, logout: false, revokedEvent: events.sessionRevoked(reason: .ended))
        }
        guard !ended.isEmpty else { throw ServiceError.notFound("session") }
        revoked.insert(ended)
    }

    /// The sessions as read, without those this instance knows were revoked since (the user's list
    /// and the admin console's users page).
    func live(_ records: [SessionRecord]) -> [SessionRecord] {
        records.filter { !revoked.contains($0.id) }
    }

    /// `DELETE /admin/v1/users/{id}/sessions/{sessionId}`: an admin ends a user's session (audited,
    /// with the admin's approval redeemed in the same transaction); 404 when there is no such live session.
    func end(userId: String, sessionId: String, by admin: AdminCaller) throws(ServiceError) {
        guard !sessionId.isEmpty, sessionId.utf8.count <= 64 else { throw ServiceError.notFound("session") }
        let audit = admin.record(.sessionRevoked, subject: userId, detail: [("sessionId", .string(sessionId)), ("reason", "admin")])
        guard try storage({ () throws(StorageError) in
            try sessions.revoke(userId: userId, familyId: sessionId, audit: audit, redeeming: admin.redemption)
        }) else { throw ServiceError.notFound("session") }
        revoked.insert([sessionId])
    }

    /// Sessions another service ended in its own transaction (a passkey's revocation): refused here at once.
    func ended(_ sessionIds: [String]) { revoked.insert(sessionIds) }

    /// `GET /v1/sessions`: the caller's live sessions, and which one is the caller's (SPEC "Sessions").
    struct SessionList: Sendable {
        let sessions: [SessionRecord]
        let current: String
    }

    // MARK: Who is asking

    /// The bearer of a live session's access token.
    struct Caller: Sendable {
        let userId: String
        let sessionId: String
        /// How the session began (`urn:latchkey:acr:passkey-uv` for a user-verified passkey ceremony;
        /// a refreshed token says `urn:latchkey:acr:passkey`).
        var acr: String? = nil
        /// How the session stands, when the caller's resolution already read it (`Access.approver`,
        /// the OP session cookie): the handler does not read it again.
        var standing: Standing? = nil
        /// The account's username, when the resolution read it (the OP session cookie).
        var username: String? = nil
        /// The DPoP key the access token is bound to (`cnf.jkt`), nil for a Bearer token.
        var jkt: String? = nil
    }

    /// The signed-in user and session of a Bearer access token: valid signature and time, and a
    /// session not revoked (SPEC "Sessions" → "How fast."): checked in memory against
    /// `RevokedSessions`, and in the database too while its feed is stale.
    func session(accessToken token: String) throws(ServiceError) -> Caller {
        guard let claims = try? signer.accessClaims(token) else { throw ServiceError.unauthorized }
        guard try !storage({ () throws(StorageError) in try revoked.refuses(claims.sessionId) }) else { throw ServiceError.unauthorized }
        return Caller(userId: claims.subject, sessionId: claims.sessionId, acr: claims.acr, jkt: claims.jkt)
    }

    /// How a session stands (SPEC "Assurance"): how it began, and whether the passkey that began
    /// it is held. One query; nil-safe: a session revoked since its token was issued is 401.
    struct Standing: Sendable {
        let method: SessionMethod
        let credentialId: [UInt8]?
        /// The hold of the passkey that began the session, while it lasts.
        let heldUntil: Date?
        /// The authentication that began the session (OpenID `auth_time`, `max_age`).
        var authTime = Date(timeIntervalSince1970: 0)
        /// The passkey that began it proved a hardware key at registration (OpenID EAP `phrh`).
        var hardware = false

        /// A session begun by one of the account's passkeys that is not held (a passkey login or
        /// registration, or the registration that completed a recovery): the account's strongest
        /// factor was there. An email session, or one a held passkey began, is not.
        var approves: Bool { method != .email && credentialId != nil && heldUntil == nil }
    }

    func standing(_ caller: Caller) throws(ServiceError) -> Standing {
        if let known = caller.standing { return known }
        return try standing(loaded: try storage { () throws(StorageError) in try sessions.session(id: caller.sessionId, userId: caller.userId) })
    }

    /// A session's standing from its row as read (`SessionStore.session(id:userId:)`); nil, a
    /// session revoked since its token was issued, is 401.
    func standing(loaded: (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)?) throws(ServiceError) -> Standing {
        guard let (session, hold, hardware) = loaded else { throw ServiceError.unauthorized }
        let held = hold.flatMap { $0 > runtime.now() ? $0 : nil }
        return Standing(method: session.method, credentialId: session.credentialId, heldUntil: held, authTime: session.authTime,
                        hardware: hardware)
    }

    /// The enrolment ticket (single use) and the user it vouches for; an unknown, expired or used
    /// one is 401 with the `Ticket` challenge. Nothing is used up here: the registration verify that
    /// stores the passkey uses the ticket (SPEC "Assurance": a ceremony that fails keeps it).
    func ticketHolder(ticket: String) throws(ServiceError) -> EnrolmentTicket {
        try ticketHolder(loaded: try storage({ () throws(StorageError) in try sessions.ticket(hash: OpaqueSecret.hash(ticket)) }))
    }

    /// The same decision on a ticket's row as read (nil: unknown, expired or used).
    func ticketHolder(loaded: EnrolmentTicket?) throws(ServiceError) -> EnrolmentTicket {
        guard let loaded else {
            throw ServiceError(.unauthorized, "the enrolment ticket is unknown, expired or used", headers: [("WWW-Authenticate", "Ticket")])
        }
        return loaded
    }
}
