import Foundation
import Storage
import WebAuthn

/// A sign-in's assertion, checked up to the statement that ends it.
struct CheckedLogin: Sendable {
    let outcome: PasskeyAssertion.Outcome
    let credential: CredentialRecord
    let user: UserRecord
    /// The owner's live credential ids (the Signal API's `allAcceptedCredentialIds`).
    let accepted: [[UInt8]]
}

extension PasskeyLogin {
    /// A sign-in's verify, for the API's login and the OP's sign-in alike (SPEC "Rules that must
    /// hold" → Challenges): the challenge opened (not sealed here, for another ceremony or relying
    /// party, or expired → `challenge_invalid`, nothing written); then one transaction — round trip
    /// 1 reads the challenge's use and the credential, the assertion is checked (type → origin →
    /// rpIdHash → UP → UV, the credential, §7.2 steps 5–6, the signature and counter), `write`
    /// (the caller's decision) gives the statement, and round trip 2 runs it with COMMIT. A check
    /// that fails there still records the challenge used (with the flag of a counter that went
    /// back); a challenge used before is `challenge_invalid`. With `context`, the challenge must be
    /// one `authenticationOptions(boundTo:)` made for that context.
    func checkedLogin(_ body: [UInt8], conformance: Bool, boundTo context: [UInt8]?,
                      write: (CheckedLogin) throws(ServiceError) -> LoginWrite) throws(ServiceError) -> (CheckedLogin, LoginWritten) {
        var attempt = try opened(body, conformance: conformance, boundTo: context)
        let written: LoginWritten
        do throws(ServiceError) {
            written = try storage { () throws(StorageError) in
                try logins.login(attempt.used, credentialId: attempt.parsed.response.rawId) { read in decided(&attempt, read, write) }
            }
        } catch { throw failed(attempt, error) }
        return try settled(attempt, written)
    }

    /// `checkedLogin` from a task on an event loop, over the loop's store: the same checks and
    /// statements, each round trip a wait on the loop.
    func checkedLogin(_ body: [UInt8], conformance: Bool, boundTo context: [UInt8]?, over store: some LoopLoginStore,
                      write: (CheckedLogin) throws(ServiceError) -> LoginWrite) async throws(ServiceError) -> (CheckedLogin, LoginWritten) {
        var attempt = try opened(body, conformance: conformance, boundTo: context)
        let written: LoginWritten
        do {
            written = try await store.login(attempt.used, credentialId: attempt.parsed.response.rawId) { read in decided(&attempt, read, write) }
        } catch { throw failed(attempt, ServiceError(error)) }
        return try settled(attempt, written)
    }

    /// A sign-in's verify before its transaction: the body parsed, the challenge opened, and
    /// everything the decision needs from memory at hand.
    struct LoginAttempt {
        let parsed: ParsedAuthentication
        let sealed: SealedAuthentication
        let state: AuthenticationState
        let policy: VerificationPolicy
        let context: [UInt8]?
        var checked: CheckedLogin? = nil
        var refusal: PasskeyAssertion.Refusal? = nil
        var used: UsedChallenge { UsedChallenge(id: sealed.id, expiresAt: sealed.expiresAt) }
    }

    private func opened(_ body: [UInt8], conformance: Bool, boundTo context: [UInt8]?) throws(ServiceError) -> LoginAttempt {
        let parsed: ParsedAuthentication
        do { parsed = try ParsedAuthentication(bytes: body) } catch { throw ServiceError(error) }
        let sealed = try SealedAuthentication(plaintext: seal.open(parsed.clientData.challenge, plaintextLength: SealedAuthentication.plaintextLength,
                                                                   rpId: relyingParty.id))
        guard sealed.expiresAt > runtime.now() else { throw ServiceError(.challengeInvalid, "challenge expired") }
        let state = AuthenticationState(challenge: parsed.clientData.challenge, rpId: relyingParty.id, userVerification: sealed.userVerification,
                                        account: sealed.account, allowedCredentials: nil)
        return LoginAttempt(parsed: parsed, sealed: sealed, state: state, policy: currentPolicy(conformance: conformance), context: context)
    }

    /// The statement the read leads to: the caller's `write` for a login that passed, else the
    /// refusal (the challenge used, with the flag of a counter that went back).
    private func decided(_ attempt: inout LoginAttempt, _ read: LoginRead,
                         _ write: (CheckedLogin) throws(ServiceError) -> LoginWrite) -> LoginWrite {
        do throws(PasskeyAssertion.Refusal) {
            let login = try decide(attempt.parsed, sealed: attempt.sealed, state: attempt.state, policy: attempt.policy, read: read,
                                   context: attempt.context)
            attempt.checked = login
            do throws(ServiceError) { return try write(login) } catch { throw PasskeyAssertion.Refusal(error: error, flag: nil) }
        } catch {
            attempt.refusal = error
            return .refused(flag: error.flag)
        }
    }

    private func failed(_ attempt: LoginAttempt, _ error: ServiceError) -> ServiceError {
        switch error.code {
        case .signCountRegression:
            // The counter's compare-and-set lost to a concurrent use carrying the same counter: the
            // challenge is used, nothing else was stored (§7.2 step 22, as a regression).
            guard let checked = attempt.checked else { return error }
            return assertion.refuseRegression(checked.outcome)
        case .notFound:
            // The passkey was revoked (or deleted) after the read found it: the same answer as a
            // read that finds none (the challenge is used, nothing else was stored).
            return unknownCredential(attempt.parsed.response.rawId)
        default:
            return error
        }
    }

    private func settled(_ attempt: LoginAttempt, _ written: LoginWritten) throws(ServiceError) -> (CheckedLogin, LoginWritten) {
        switch written {
        case .challengeUnusable:
            throw ServiceError(.challengeInvalid, "unknown, already used or expired challenge")
        case .refused:
            guard let refusal = attempt.refusal else { throw ServiceError(.internalError, "a refused login without its reason") }
            throw refusal.error
        case .proofReplayed:
            throw SessionDPoP.replayed
        case .session, .browserSession:
            guard let checked = attempt.checked else { throw ServiceError(.internalError, "a login written without its check") }
            return (checked, written)
        }
    }

    /// The checks of a sign-in once its read is in: pure (the key cache is memory).
    private func decide(_ parsed: ParsedAuthentication, sealed: SealedAuthentication, state: AuthenticationState, policy: VerificationPolicy,
                        read: LoginRead, context: [UInt8]?) throws(PasskeyAssertion.Refusal) -> CheckedLogin {
        func refuse(_ error: ServiceError) -> PasskeyAssertion.Refusal { PasskeyAssertion.Refusal(error: error, flag: nil) }
        if let context, sealed.context != SealedAuthentication.contextDigest(context) {
            throw refuse(ServiceError(.challengeInvalid, "the challenge was not made for this request"))
        }
        // SPEC order: type → origin → rpIdHash → UP → UV, then the credential.
        let checked: CeremonyCheckedAuthentication
        do { checked = try authentication.check(parsed, state: state, policy: policy) } catch { throw refuse(ServiceError(error)) }
        guard let (credential, user) = read.login else {
            // SPEC "Signal API": a clean miss (challenge valid, clientData fine, no such live credential)
            // tells the client to have the passkey provider drop that credential.
            throw refuse(unknownCredential(parsed.response.rawId))
        }
        // Username-first: the credential must belong to the account the options were for (§7.2 step 5).
        if let bound = state.account, bound != user.id { throw refuse(ServiceError(.credentialUnknown, "no such passkey")) }
        let outcome = try assertion.verifyDeferringFlag(checked, ceremony: authentication, state: state, credential: credential, user: user)
        return CheckedLogin(outcome: outcome, credential: credential, user: user, accepted: read.accepted)
    }

    /// SPEC "Signal API": a clean miss tells the client to have the passkey provider drop the credential.
    private func unknownCredential(_ credentialId: [UInt8]) -> ServiceError {
        var miss = ServiceError(.credentialUnknown, "no such passkey")
        miss.attachment = .unknownCredential(rpId: relyingParty.id, credentialId: credentialId)
        return miss
    }
}
