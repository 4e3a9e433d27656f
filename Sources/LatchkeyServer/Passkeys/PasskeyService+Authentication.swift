import Foundation
import Crypto
import JSON
import Storage
import WebAuthn

/// Passkey sign-in (SPEC "HTTP contract"; WebAuthn L3 §7.2): request options (discoverable, or
/// username-first with decoys that do not tell whether an account exists) and the assertion's
/// verification. Options write nothing: the ceremony state is sealed into the challenge
/// (`SealedAuthentication`). A verify is one transaction of two round trips and one commit
/// (ARCHITECTURE.md "A login, through the code").
extension PasskeyLogin {
    /// `userVerification` / `extensions`: the conformance profile's options request.
    func authenticationOptions(username: String?, userVerification asked: VerificationPolicy.UserVerification? = nil,
                               extensions: JSONValue? = nil) throws(ServiceError) -> RequestOptions {
        // One read, the same statement whether or not the account exists.
        var found: (userId: String, credentials: [(id: [UInt8], transports: [String])])?? = nil
        if let username { found = .some(try storage { () throws(StorageError) in try logins.account(username: username) }) }
        return try authenticationOptions(username: username, found: found, userVerification: asked, extensions: extensions)
    }

    /// `authenticationOptions(username:)` from a task on an event loop, over the loop's store.
    func authenticationOptions(username: String?, over store: some LoopLoginStore) async throws(ServiceError) -> RequestOptions {
        var found: (userId: String, credentials: [(id: [UInt8], transports: [String])])?? = nil
        if let username {
            do { found = .some(try await store.account(username: username)) } catch { throw ServiceError(error) }
        }
        return try authenticationOptions(username: username, found: found, userVerification: nil, extensions: nil)
    }

    /// The options once the username's read (`found`: nil when no username was given) is in.
    private func authenticationOptions(username: String?, found: (userId: String, credentials: [(id: [UInt8], transports: [String])])??,
                                       userVerification asked: VerificationPolicy.UserVerification?,
                                       extensions: JSONValue?) throws(ServiceError) -> RequestOptions {
        var allow: [CredentialDescriptor] = []
        var account: String? = nil
        if let username, let found {
            // The decoys are derived either way, and an unknown username seals a random user id
            // of the same shape.
            let decoys = Self.decoyCredentials(username: username, secret: try decoySecret.value())
            account = found?.userId ?? runtime.identifier()
            allow = found?.credentials.map { CredentialDescriptor(id: $0.id, transports: $0.transports) } ?? []
            // No such account (or no passkey): a decoy list derived from the username and a
            // deployment secret, stable across calls and instances, so the answer does not
            // reveal whether the account exists.
            if allow.isEmpty { allow = decoys }
        }
        let uv = userVerification(asked) ?? policy.userVerification
        let challenge = try sealedChallenge(SealedAuthentication(userVerification: uv, account: account, context: nil,
                                                                 expiresAt: challengeExpiry(), random: runtime.random(32)))
        let (options, _) = authentication.begin(allowCredentials: allow, account: account, challenge: challenge, userVerification: uv,
                                                extensions: extensions)
        return options
    }

    /// When a challenge sealed now expires (LATCHKEY_CHALLENGE_TTL).
    func challengeExpiry() -> Date { runtime.now().addingTimeInterval(Double(policy.challengeTTL)) }

    func sealedChallenge(_ state: SealedAuthentication) throws(ServiceError) -> [UInt8] {
        guard let plaintext = state.plaintext() else { throw ServiceError(.internalError, "an account id too long to seal") }
        return try seal.seal(plaintext, rpId: relyingParty.id)
    }

    /// Shapes real passkeys have in `allowCredentials`: credential id lengths common among passkey
    /// providers and security keys, and transports as browsers report them (WebAuthn L3
    /// `getTransports()`: sorted lexicographically). A decoy of one fixed shape (one 32-byte id with
    /// `["internal","hybrid"]`, an order no browser sends) told a decoy from a real account at a glance.
    static let decoyIdLengths = [16, 20, 32, 64]
    static let decoyTransports: [[String]] = [["hybrid", "internal"], ["hybrid", "internal"], ["internal"], ["hybrid", "internal", "usb"],
                                              ["nfc", "usb"], ["usb"]]

    /// The decoy `allowCredentials` for `username`: one or two credentials, each shape and id derived
    /// from the username under the deployment secret (the same on every call and instance).
    static func decoyCredentials(username: String, secret: [UInt8]) -> [CredentialDescriptor] {
        let seed = HMAC.sha256(key: secret, data: Array("decoy-shape:\(username)".utf8))
        let count = seed[0] % 4 == 0 ? 2 : 1
        return (0..<count).map { i in
            let length = decoyIdLengths[Int(seed[1 + i]) % decoyIdLengths.count]
            var id: [UInt8] = []
            var block = 0
            while id.count < length {
                id += HMAC.sha256(key: secret, data: Array("decoy:\(username):\(i):\(block)".utf8))
                block += 1
            }
            return CredentialDescriptor(id: Array(id.prefix(length)),
                                        transports: decoyTransports[Int(seed[3 + i]) % decoyTransports.count])
        }
    }

    /// `conformance`: the conformance profile's `/assertion/result` (an assertion's UP flag may be clear).
    /// `language`: the language the request asked for (`Accept-Language`), remembered for the
    /// account's mail by the login's one statement.
    func verifyAuthentication(_ body: [UInt8], conformance: Bool = false, language: String? = nil,
                              dpop: DPoPBinding? = nil) throws(ServiceError) -> PasskeyService.SignedIn {
        try observed("authentication") { () throws(ServiceError) in
            try finishAuthentication(body, conformance: conformance, language: language, dpop: dpop)
        }
    }

    func finishAuthentication(_ body: [UInt8], conformance: Bool, language: String?, dpop: DPoPBinding?) throws(ServiceError) -> PasskeyService.SignedIn {
        var pending: SessionService.Pending? = nil
        let (login, written) = try checkedLogin(body, conformance: conformance, boundTo: nil) { login throws(ServiceError) in
            sessionWrite(login, dpop: dpop, language: language, pending: &pending)
        }
        return try signedIn(login, written, pending)
    }

    /// `verifyAuthentication` from a task on an event loop, over the loop's store.
    func verifyAuthentication(_ body: [UInt8], language: String?, dpop: DPoPBinding?,
                              over store: some LoopLoginStore) async throws(ServiceError) -> PasskeyService.SignedIn {
        do {
            var pending: SessionService.Pending? = nil
            let (login, written) = try await checkedLogin(body, conformance: false, boundTo: nil, over: store) { login throws(ServiceError) in
                sessionWrite(login, dpop: dpop, language: language, pending: &pending)
            }
            let result = try signedIn(login, written, pending)
            metrics.observeCeremony("authentication", outcome: "ok")
            return result
        } catch {
            metrics.observeCeremony("authentication", outcome: error.code.rawValue)
            throw error
        }
    }

    /// The one statement: the challenge's use, the counter's compare-and-set, the session, the
    /// audit line, the events and the language memo.
    private func sessionWrite(_ login: CheckedLogin, dpop: DPoPBinding?, language: String?, pending: inout SessionService.Pending?) -> LoginWrite {
        let session = sessions.prepare(userId: login.user.id, credentialId: login.outcome.use.credentialId, dpop: dpop)
        pending = session
        return .session(session.record, recording: login.outcome.use,
                        audit: [AuditRecord(.passkeyLogin, actor: login.user.id, subject: login.user.id, detail: login.outcome.auditDetail)],
                        events: login.outcome.events, language: language)
    }

    private func signedIn(_ login: CheckedLogin, _ written: LoginWritten, _ pending: SessionService.Pending?) throws(ServiceError) -> PasskeyService.SignedIn {
        guard case .session(let recorded) = written, let pending else { throw ServiceError(.internalError, "the login wrote no session") }
        let issued = try sessions.issue(pending, authentication: login.outcome.authentication)
        // The passkey as this login left it.
        var updated = login.credential
        updated.signCount = recorded.signCount
        updated.backedUp = login.outcome.use.backedUp
        updated.backupEligible = login.outcome.verified.backupEligible
        updated.flagged = recorded.flagged
        updated.lastUsedAt = pending.record.authTime     // what the passkey list reads back (the session's auth_time)
        return signedIn(user: login.user, passkey: updated, tokens: issued, accepted: login.accepted)
    }

    /// A passkey sign-in for a ceremony another feature finishes (the OP browser session, SPEC "Who
    /// may approve"): options whose sealed state is bound to `context`, user verification required.
    func authenticationOptions(boundTo context: [UInt8]) throws(ServiceError) -> RequestOptions {
        let challenge = try sealedChallenge(SealedAuthentication(userVerification: .required, account: nil,
                                                                 context: SealedAuthentication.contextDigest(context),
                                                                 expiresAt: challengeExpiry(), random: runtime.random(32)))
        let (options, _) = authentication.begin(allowCredentials: [], account: nil, challenge: challenge, userVerification: .required)
        return options
    }
}
