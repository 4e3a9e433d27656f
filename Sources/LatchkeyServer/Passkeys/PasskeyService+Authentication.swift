import Foundation
import Crypto
import JSON
import Storage
import WebAuthn

/// Passkey sign-in (SPEC "HTTP contract"; WebAuthn L3 §7.2): request options (discoverable, or
/// username-first with decoys that do not tell whether an account exists) and the assertion's
/// verification, in two round trips (ARCHITECTURE.md "A login, through the code").
extension PasskeyService {
    /// `userVerification` / `extensions`: the conformance profile's options request.
    func authenticationOptions(username: String?, userVerification asked: VerificationPolicy.UserVerification? = nil,
                               extensions: JSONValue? = nil) throws(ServiceError) -> JSONValue {
        var allow: [CredentialDescriptor] = []
        var account: String? = nil
        if let username {
            if let user = try storage({ () throws(StorageError) in try accounts.user(username: username) }) {
                account = user.id
                allow = try storage { () throws(StorageError) in try accounts.credentials(userId: user.id) }.map(CredentialDescriptor.init)
            }
            if allow.isEmpty {
                // No such account (or no passkey): a decoy list derived from the username and a
                // deployment secret, stable across calls and instances, so the answer does not
                // reveal whether the account exists.
                allow = Self.decoyCredentials(username: username, secret: try decoySecret.value())
            }
        }
        let (options, state) = authentication.begin(allowCredentials: allow, account: account,
                                                    userVerification: userVerification(asked), extensions: extensions)
        try storage { () throws(StorageError) in
            try challenges.insert(hash: Digest.sha256(options.challenge), kind: .authentication, userId: account,
                                  rpId: configuration.rpId, state: state.encoded(), ttlSeconds: configuration.challengeTTL)
        }
        return options.json
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
    func verifyAuthentication(_ body: [UInt8], conformance: Bool = false) throws(ServiceError) -> SignedIn {
        try observed("authentication") { () throws(ServiceError) in try finishAuthentication(body, conformance: conformance) }
    }

    func finishAuthentication(_ body: [UInt8], conformance: Bool) throws(ServiceError) -> SignedIn {
        let (outcome, credential, user, accepted) = try checkedAssertion(body, conformance: conformance, boundTo: nil)
        // Round trip 2 (the one durable commit): the passkey's use, the new session and the audit line.
        // The counter is compared and stored in that one statement: a concurrent login carrying
        // the same counter that got there first makes this one sign_count_regression.
        let issued: SessionService.Issued
        let recorded: RecordedUse?
        do {
            (issued, recorded) = try sessions.start(
                userId: user.id, authentication: outcome.authentication, recording: outcome.use,
                audit: [AuditRecord(.passkeyLogin, actor: user.id, subject: user.id, detail: outcome.auditDetail)],
                events: outcome.events)
        } catch where error.code == .signCountRegression {
            throw assertion.refuseRegression(outcome)
        }
        // The passkey as this login left it.
        var updated = credential
        updated.signCount = recorded?.signCount ?? max(credential.signCount, outcome.use.signCount)
        updated.backedUp = outcome.use.backedUp
        updated.backupEligible = outcome.verified.backupEligible
        updated.flagged = recorded?.flagged ?? (credential.flagged || outcome.use.cloneWarning)
        updated.lastUsedAt = runtime.now()
        return signedIn(user: user, passkey: updated, tokens: issued, accepted: accepted)
    }

    /// A passkey sign-in for a ceremony another feature finishes (the OP browser session, SPEC "Who
    /// may approve"): options whose challenge is bound to `context` (16 random bytes, then the first
    /// 16 of HMAC(deployment secret, label ‖ context ‖ those bytes)), user verification required.
    func authenticationOptions(boundTo context: [UInt8]) throws(ServiceError) -> JSONValue {
        let nonce = runtime.random(16)
        let challenge = nonce + Array(HMAC.sha256(key: try decoySecret.value(), data: Self.bindingLabel + context + nonce).prefix(16))
        let (options, state) = authentication.begin(allowCredentials: [], account: nil, challenge: challenge, userVerification: .required)
        try storage { () throws(StorageError) in
            try challenges.insert(hash: Digest.sha256(options.challenge), kind: .authentication, userId: nil,
                                  rpId: configuration.rpId, state: state.encoded(), ttlSeconds: configuration.challengeTTL)
        }
        return options.json
    }

    static let bindingLabel = Array("latchkey bound sign-in v1".utf8)

    /// The assertion of a login, checked up to (not including) the session: the challenge used up
    /// (round trip 1), the ceremony, the credential and its signature. With `context`, the challenge
    /// must be one `authenticationOptions(boundTo:)` made for that context.
    func checkedAssertion(_ body: [UInt8], conformance: Bool = false, boundTo context: [UInt8]?)
        throws(ServiceError) -> (PasskeyAssertion.Outcome, CredentialRecord, UserRecord, [[UInt8]]) {
        let parsed: ParsedAuthentication
        do { parsed = try ParsedAuthentication(bytes: body) } catch { throw ServiceError(error) }
        // Round trip 1: use the challenge up and fetch the credential (SPEC: consumed first, so any
        // later failure still uses it up; the credential is only looked at after the ceremony checks).
        let (found, login, accepted) = try storage { () throws(StorageError) in
            try challenges.consumeForLogin(hash: Digest.sha256(parsed.clientData.challenge), credentialId: parsed.response.rawId)
        }
        let stored = try CeremonyRules.live(found, kind: .authentication, rpId: configuration.rpId)
        if let context {
            let challenge = parsed.clientData.challenge
            let expected = challenge.count == 32
                ? Array(HMAC.sha256(key: try decoySecret.value(), data: Self.bindingLabel + context + Array(challenge.prefix(16))).prefix(16)) : []
            guard challenge.count == 32, constantTimeEquals(Array(challenge.suffix(16)), expected) else {
                throw ServiceError(.challengeInvalid, "the challenge was not made for this request")
            }
        }
        let state: AuthenticationState
        do { state = try AuthenticationState(decoding: stored.state) } catch { throw ServiceError(error) }
        // SPEC order: type → origin → rpIdHash → UP → UV, then the credential.
        let checked: CeremonyCheckedAuthentication
        do { checked = try authentication.check(parsed, state: state, policy: currentPolicy(conformance: conformance)) } catch {
            throw ServiceError(error)
        }
        guard let (credential, user) = login else {
            // SPEC "Signal API": a clean miss (challenge valid, clientData fine, no such live credential)
            // tells the client to have the passkey provider drop that credential.
            var miss = ServiceError(.credentialUnknown, "no such passkey")
            miss.members = [("signal", Signals.unknownCredential(rpId: configuration.rpId, credentialId: parsed.response.rawId))]
            throw miss
        }
        // Username-first: the credential must belong to the account the options were for (§7.2 step 5).
        if let bound = state.account, bound != user.id { throw ServiceError(.credentialUnknown, "no such passkey") }
        return (try assertion.verify(checked, ceremony: authentication, state: state, credential: credential, user: user), credential, user, accepted)
    }
}
