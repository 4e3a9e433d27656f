import Crypto
import Foundation
import DeviceKeys
import JSON
import Receipts
import Storage
import Tokens
import WebAuthn

/// Action-bound step-up (SPEC "Step-up"): challenges, their verification by a device key or a
/// passkey, the short-lived token and its consumption, and receipts. A biometric prompt is only a
/// local yes/no; what the server trusts is a signature by a registered key over a one-time
/// challenge bound to the account, that key and the action. Stateless like the passkey
/// ceremonies: the core's ceremony state lives in a challenge row. Device-key enrolment is
/// DeviceKeyService's; the checks behind every gated change are in StepUpApprovals.swift.
public final class StepUpService: Sendable {
    let store: any StepUpStore
    let signer: TokenSigner
    let assertion: PasskeyAssertion
    let origins: any OriginAllowlist
    /// The relying party the ceremonies are bound to (its rpId is taken from here alone).
    let relyingParty: RelyingParty
    let policy: StepUpPolicy
    let runtime: Runtime
    /// The caller's live device keys (DeviceKeyService).
    let keys: any LiveDeviceKeys
    let stepUp: StepUpCeremony
    /// The passkey method: a WebAuthn assertion with user verification required, whatever the deployment's default.
    let passkeyCeremony: AuthenticationCeremony
    let passkeyPolicy: VerificationPolicy
    let events: OutboxEvents
    /// Sessions ended lately (the same set access tokens are checked against): a step-up token dies with its session.
    let revoked: any SessionRevocations

    /// JWT `typ` of a step-up token: never accepted where an access token is expected, and back.
    public static let tokenType = StepUpClaims.type
    /// SPEC: a step-up token lives at most two minutes.
    static let maxTokenTTL = 120

    init(store: any StepUpStore, keys: any LiveDeviceKeys, signer: TokenSigner, assertion: PasskeyAssertion,
         origins: any OriginAllowlist, events: OutboxEvents, revoked: any SessionRevocations,
         relyingParty: RelyingParty, policy: StepUpPolicy, runtime: Runtime) {
        self.relyingParty = relyingParty
        self.revoked = revoked
        self.keys = keys
        self.events = events
        self.store = store
        self.signer = signer
        self.assertion = assertion
        self.origins = origins
        self.policy = policy
        self.runtime = runtime
        stepUp = StepUpCeremony(ttlSeconds: policy.challengeTTL, environment: runtime.deviceKeys)
        passkeyCeremony = AuthenticationCeremony(rpId: relyingParty.id, userVerification: .required,
                                                 timeoutSeconds: policy.challengeTTL, hints: policy.hints,
                                                 environment: runtime.ceremonies)
        passkeyPolicy = policy.passkeyVerification
    }

    /// The step-up token's whole lifetime: it is checked with no leeway, so `exp - iat` is all of it.
    var tokenTTL: Int { min(Self.maxTokenTTL, policy.tokenTTL, policy.challengeTTL) }

    // MARK: Step-up challenges

    /// `POST /v1/step-up/challenges` `{"keyId","action","display"?}` or `{"method":"passkey","action","display"?}`.
    /// `onlyActionType`: the caller may ask for this action type alone (the OP session cookie).
    /// `acceptLanguage`: the request's `Accept-Language`, the language of a display Latchkey renders.
    func createChallenge(userId: String, body: JSONValue, onlyActionType: String? = nil,
                         acceptLanguage: String? = nil) throws(ServiceError) -> StepUpChallengeIssued {
        guard let actionValue = body["action"], !actionValue.isNull else { throw ServiceError.invalid("action is required") }
        let action: StepUpAction
        do { action = try StepUpAction(actionValue) } catch { throw ServiceError(error) }
        let display = try Self.display(for: action, requested: body["display"], acceptLanguage: acceptLanguage)
        if let onlyActionType, actionValue["type"]?.stringValue != onlyActionType {
            throw ServiceError(.unauthorized, "this step-up needs a Bearer access token")
        }
        let method: StepUpChallenge.Method
        let keyBinding: [UInt8]
        var keyId: String? = nil
        var allow: [CredentialDescriptor] = []
        var breakGlass = false
        if let k = body["keyId"], !k.isNull {
            guard let id = Identifiers.opaque(k.stringValue) else {
                throw ServiceError.invalid("keyId must be a device key id (base64url of 16 bytes)")
            }
            let key = try keys.liveKey(id: id, userId: userId)
            method = .deviceKey
            keyBinding = key.publicKey
            keyId = id
        } else if let m = body["method"], !m.isNull {
            guard m.stringValue == "passkey" else { throw ServiceError.invalid("method must be \"passkey\" (or send keyId)") }
            let vote = actionValue["type"]?.stringValue == GatedActionType.approvalVote ? actionValue["approvalId"]?.stringValue : nil
            let read = try storage { () throws(StorageError) in try store.passkeyChallengeRead(userId: userId, voteFor: vote) }
            let credentials = read.passkeys
            guard !credentials.isEmpty else { throw ServiceError(.credentialUnknown, "the account has no passkey") }
            breakGlass = read.breakGlassVote
            method = .passkey
            keyBinding = PasskeyBinding(credentialIds: credentials.map(\.id), rpId: relyingParty.id).bytes
            allow = credentials.map(CredentialDescriptor.init)
        } else {
            throw ServiceError.invalid("keyId or \"method\":\"passkey\" is required")
        }

        let (options, state) = stepUp.begin(method: method, userId: userId, keyBinding: keyBinding, keyId: keyId, display: display,
                                            breakGlass: breakGlass, action: action)
        try storage { () throws(StorageError) in
            try store.insertChallenge(hash: options.challengeId, userId: userId, rpId: relyingParty.id,
                                      state: state.encoded(), ttlSeconds: policy.challengeTTL)
        }
        var publicKey: RequestOptions? = nil
        if method == .passkey {
            // PublicKeyCredentialRequestOptionsJSON, user verification required: the step-up is the biometric.
            publicKey = passkeyCeremony.begin(allowCredentials: allow, account: userId, challenge: options.challenge,
                                              restrictToAllowed: true).options
        }
        return StepUpChallengeIssued(options: options, publicKey: publicKey)
    }

    // MARK: Step-up verification

    /// `POST /v1/step-up/verify`: `{"challengeId","signature"}` or `{"challengeId","credential"}`,
    /// optionally with the `action` the client believes it approved (must be the bound one).
    /// One read (the challenge, the user's live device keys, the passkey an assertion names), the
    /// decision, and one write: the receipt with the challenge used up, or — refused — the challenge
    /// used up alone (SPEC "Shapes and decisions": a failure after the challenge is found still uses it).
    func verify(userId: String, sessionId: String, body: JSONValue, onlyActionType: String? = nil) throws(ServiceError) -> VerifiedStepUp {
        // Parse: nothing is used up by a malformed request.
        let input = try VerifyInput(body)
        let read = try storage { () throws(StorageError) in
            try store.verifyRead(hash: input.challengeId, userId: userId, credentialId: input.assertion?.response.rawId)
        }
        guard let found = read.challenge else { throw ServiceError(.challengeInvalid, "unknown or already used challenge") }
        let approval: Approval
        do {
            approval = try decide(input, found, read, userId: userId, onlyActionType: onlyActionType)
        } catch {
            try storage { () throws(StorageError) in _ = try store.consumeChallenge(hash: input.challengeId, userId: userId) }
            throw error
        }
        // One statement: the challenge used up, the receipt, the passkey's use (counter, backup state,
        // clone flag), the audit line. A device key revoked after the read still wins: the receipt is
        // stored only while it is live. The passkey's counter is compared and stored there: a
        // concurrent step-up carrying the same counter that got there first makes this one
        // sign_count_regression (no receipt). An App Attest key's counter is compare-and-set the same way.
        let written: ApprovalWritten
        do throws(StorageError) {
            written = try store.insertReceipt(approval.receipt, usingChallenge: input.challengeId, liveDeviceKeyId: approval.liveDeviceKeyId,
                                              appAttestCounter: approval.appAttestCounter, credentialUse: approval.passkey?.use,
                                              audit: [approval.audit], events: approval.events)
        } catch .conflict(.signCountRegression) where approval.passkey != nil {
            throw assertion.refuseRegression(approval.passkey!)
        } catch {
            throw ServiceError(error)
        }
        switch written {
        case .challengeUsed:
            throw ServiceError(.challengeInvalid, "unknown or already used challenge")
        case .refused:
            if approval.appAttestCounter != nil, let keyId = approval.liveDeviceKeyId,
               try storage({ () throws(StorageError) in try store.deviceKey(id: keyId) })?.revokedAt == nil {
                throw ServiceError(.signatureInvalid, "App Attest counter already used by another approval")
            }
            throw ServiceError(.keyRevoked, "this device key was revoked; enrol the device again")
        case .stored:
            break
        }
        let receipt = approval.receipt
        let token: String
        do {
            token = try signer.sign(StepUpClaims(subject: userId, sessionId: sessionId, jwtId: receipt.tokenJTI,
                                                 issuedAt: Int64(receipt.createdAt.timeIntervalSince1970), lifetime: Int64(tokenTTL),
                                                 authentication: approval.approvedWith, actionHash: receipt.actionHash, receiptId: receipt.id))
        } catch { throw ServiceError(.internalError, "no signing key") }
        return VerifiedStepUp(token: token, expiresIn: tokenTTL, actionHash: receipt.actionHash, receiptId: receipt.id)
    }

    /// What an approval writes, decided from the verify's read with no I/O.
    struct Approval {
        let receipt: StepUpReceiptRecord
        let approvedWith: AuthenticationClaims
        let liveDeviceKeyId: String?
        let appAttestCounter: Int64?
        let passkey: PasskeyAssertion.Outcome?
        let audit: AuditRecord
        let events: [OutboxEvent]
    }

    /// The decision: the challenge live and this ceremony's, the claimed action the bound one, and
    /// the device key's signature (or App Attest assertion) or the passkey's assertion checked
    /// against what the read found.
    func decide(_ input: VerifyInput, _ found: StoredChallenge, _ read: StepUpVerifyRead, userId: String,
                onlyActionType: String?) throws(ServiceError) -> Approval {
        let stored = try CeremonyRules.live(found, kind: .stepUp, rpId: relyingParty.id)
        let state: StepUpState
        do { state = try StepUpState(decoding: stored.state) } catch { throw ServiceError(error) }
        if let onlyActionType, (try? JSONParser.parse(Array(state.action.utf8)))?["type"]?.stringValue != onlyActionType {
            throw ServiceError(.unauthorized, "this step-up needs a Bearer access token")
        }
        do { try stepUp.checkClaim(input.claimed, state: state) } catch { throw ServiceError(error) }

        let now = runtime.now()
        let jti = runtime.identifier()
        let receiptId = runtime.identifier()
        let tokenExpiresAt = now.addingTimeInterval(Double(tokenTTL))
        let keyBinding = Base64URL.encode(state.keyBinding)
        let receipt: StepUpReceiptRecord
        let approvedWith: AuthenticationClaims
        var liveDeviceKeyId: String? = nil
        var appAttestCounter: Int64? = nil
        var passkeyOutcome: PasskeyAssertion.Outcome? = nil
        var approvedBy = ""
        var audit: [(key: String, value: JSONValue)] = [("receiptId", .string(receiptId))]
        switch state.method {
        case .deviceKey:
            guard let keyId = state.keyId else { throw ServiceError(.challengeInvalid, "challenge has no key") }
            // The challenge was made for one of the user's live keys: no longer among them, it was revoked since.
            guard let record = read.liveKeys.first(where: { $0.id == keyId }) else {
                throw ServiceError(.keyRevoked, "this device key was revoked; enrol the device again")
            }
            let key: DevicePublicKey
            do { key = try DevicePublicKey(bytes: record.publicKey) } catch { throw ServiceError(.internalError, "stored key unreadable") }
            let signedData: [UInt8], signature: [UInt8]
            var authenticatorData: [UInt8]? = nil
            if record.attestationFormat == .appleAppAttest {
                // An App Attest key signs only App Attest assertions (SPEC "Trust chain"): clientDataHash =
                // SHA-256(challenge bytes), counter strictly increasing, stored by compare-and-set in the write.
                guard let bytes = input.appAttestAssertion else {
                    throw ServiceError.invalid("this device key is an App Attest key: send assertion")
                }
                guard let app = record.app else { throw ServiceError(.internalError, "App Attest key without its app") }
                let verified: VerifiedAppAttestAssertion
                do {
                    verified = try AppAttestVerifier.verifiedAssertion(bytes, publicKey: key, clientDataHash: Digest.sha256(state.challenge),
                                                                       appId: app, previousCounter: UInt32(clamping: record.appAttestCounter ?? 0))
                } catch { throw ServiceError(.signatureInvalid, error.reason) }
                appAttestCounter = Int64(verified.counter)
                signedData = verified.signedData
                signature = verified.signature
                authenticatorData = verified.authenticatorData
            } else {
                guard let plain = input.signature else { throw ServiceError.invalid("this challenge is for a device key: send signature") }
                do { try stepUp.finish(signature: plain, key: key, state: state) } catch { throw ServiceError(error) }
                signedData = state.challenge
                signature = plain.der
            }
            liveDeviceKeyId = keyId
            // SPEC "Trust chain": `hwk` only for a key whose attestation proved hardware; `swk` otherwise (RFC 8176).
            approvedWith = record.attested ? AuthenticationClaims.deviceKeyAttested : AuthenticationClaims.deviceKey
            audit += [("method", .string(StepUpMethod.deviceKey.rawValue)), ("keyId", .string(keyId))]
            approvedBy = keyId
            let evidence = ReceiptDocument.Evidence.deviceKey(
                challenge: state.challenge, signature: signature,
                appAttest: authenticatorData.map { ($0, Digest.sha256(state.challenge)) })
            let document = try receiptDocument(id: receiptId, state: state, approvedAt: now, kind: .deviceKey, approverId: keyId,
                                               publicKey: key.spkiDER, attestation: Self.attestation(record), evidence: evidence)
            receipt = StepUpReceiptRecord(
                id: receiptId, userId: userId, method: .deviceKey, keyId: keyId, publicKey: key.spkiDER, challenge: state.challenge,
                signedData: signedData, signature: signature, action: state.action, actionHash: state.actionHash,
                keyBinding: keyBinding, authenticatorData: authenticatorData, tokenJTI: jti, tokenExpiresAt: tokenExpiresAt, createdAt: now,
                document: document, commitment: ReceiptDocument.commitment(of: document))
        case .passkey:
            guard let parsed = input.assertion else { throw ServiceError.invalid("this challenge is for a passkey: send credential") }
            let outcome = try verifyPasskey(parsed, state: state, userId: userId, found: read.passkey)
            passkeyOutcome = outcome
            approvedWith = outcome.authentication
            let credentialId = Base64URL.encode(outcome.use.credentialId)
            approvedBy = credentialId
            audit += [("method", .string(StepUpMethod.passkey.rawValue)), ("keyId", .string(credentialId))]
            audit += outcome.auditDetail.filter { $0.key != "credentialId" }
            // verifyPasskey found the credential (it refuses otherwise): its COSE key is the receipt's.
            guard let (credential, _) = read.passkey else { throw ServiceError(.credentialUnknown, "no such passkey on this account") }
            let evidence = ReceiptDocument.Evidence.passkey(clientDataJSON: parsed.clientData.raw, authenticatorData: parsed.authenticatorData.raw,
                                                            signature: parsed.response.signature, rpId: relyingParty.id)
            let document = try receiptDocument(id: receiptId, state: state, approvedAt: now, kind: .passkey, approverId: credentialId,
                                               publicKey: credential.publicKey, attestation: Self.attestation(credential), evidence: evidence)
            receipt = StepUpReceiptRecord(
                id: receiptId, userId: userId, method: .passkey, keyId: credentialId, publicKey: outcome.key.publicKey.spkiDER,
                challenge: state.challenge, signedData: parsed.authenticatorData.raw + parsed.clientData.hash,
                signature: parsed.response.signature, action: state.action, actionHash: state.actionHash, keyBinding: keyBinding,
                clientDataJSON: parsed.clientData.raw, authenticatorData: parsed.authenticatorData.raw, tokenJTI: jti,
                tokenExpiresAt: tokenExpiresAt, createdAt: now, document: document, commitment: ReceiptDocument.commitment(of: document))
        }
        let events = [self.events.stepUpApproved(userId: userId, method: receipt.method, keyId: approvedBy, actionHash: state.actionHash,
                                                 receiptId: receiptId)] + (passkeyOutcome?.events ?? [])
        return Approval(receipt: receipt, approvedWith: approvedWith, liveDeviceKeyId: liveDeviceKeyId, appAttestCounter: appAttestCounter,
                        passkey: passkeyOutcome, audit: AuditRecord(.stepUpApproved, actor: userId, subject: userId, detail: audit),
                        events: events)
    }

    /// The passkey method: a WebAuthn assertion (L3 §7.2) over the step-up challenge bytes, with user
    /// verification required, by one of the user's passkeys that the challenge was bound to.
    /// `found`: the live passkey the assertion names, with its owner, as the verify's read found it.
    func verifyPasskey(_ parsed: ParsedAuthentication, state: StepUpState, userId: String,
                       found: (CredentialRecord, UserRecord)?) throws(ServiceError) -> PasskeyAssertion.Outcome {
        let binding = try PasskeyBinding(decoding: state.keyBinding)
        let authentication = AuthenticationState(challenge: state.challenge, rpId: relyingParty.id, userVerification: .required,
                                                 account: userId, allowedCredentials: binding.credentialIds)
        var policy = passkeyPolicy
        policy.origins = origins.policy()
        let checked: CeremonyCheckedAuthentication
        do { checked = try passkeyCeremony.check(parsed, state: authentication, policy: policy) } catch { throw ServiceError(error) }
        guard let (credential, user) = found, credential.id == parsed.response.rawId, user.id == userId else {
            throw ServiceError(.credentialUnknown, "no such passkey on this account")
        }
        let outcome = try assertion.verify(checked, ceremony: passkeyCeremony, state: authentication, credential: credential, user: user)
        // SPEC "Assurance": a held passkey (added from an email session, a held passkey's session or a
        // ticket on an account with passkeys) approves nothing until its hold ends: the mailbox path is
        // no faster than recovery.
        if let from = credential.approvesFrom, from > runtime.now() {
            throw ServiceError(.recoveryPending, "this passkey is held: it approves step-ups from \(iso8601(from))")
        }
        return outcome
    }

    // MARK: Consume

    /// `POST /v1/step-up/consume` with the step-up token as Bearer and `{"actionHash"}`: 200 the
    /// first time for the action the token was issued for; `action_mismatch` for any other
    /// action (the token stays unused); `conflict` once used.
    func consume(token: String, body: JSONValue) throws(ServiceError) -> ConsumedStepUp {
        guard let claims = try? signer.stepUpClaims(token) else { throw ServiceError.unauthorized }
        let sub = claims.subject, jti = claims.jwtId, tokenHash = claims.actionHash
        guard let text = body["actionHash"]?.stringValue else { throw ServiceError.invalid("actionHash is required") }
        guard let presented = Base64URL.decode(text), presented.count == 32 else {
            throw ServiceError.invalid("actionHash must be base64url of 32 bytes (SHA-256)")
        }
        guard constantTimeEquals(presented, tokenHash) else {
            throw ServiceError(.actionMismatch, "this step-up token was issued for another action")
        }
        guard try sessionIsLive(claims) else {
            throw ServiceError(.unauthorized, "the session that asked for the step-up has ended")
        }
        switch try storage({ () throws(StorageError) in try store.redeemStepUpToken(jti: jti, userId: sub, actionHash: presented) }) {
        case .consumed(let receiptId, let action):
            return ConsumedStepUp(claims: claims, actionHash: text, action: action, receiptId: receiptId)
        case .alreadyUsed:
            throw ServiceError(.conflict, "this step-up token was already used")
        case .unknown:
            throw ServiceError.unauthorized
        }
    }

    // MARK: Receipts

    /// `GET /v1/step-up/receipts/{id}`: everything needed to re-verify the approval offline.
    func receipt(id: String, userId: String?) throws(ServiceError) -> StepUpReceiptRecord {
        guard !id.isEmpty, id.utf8.count <= 64, let r = try storage({ () throws(StorageError) in try store.receipt(id: id) }) else {
            throw ServiceError.notFound("receipt")
        }
        if let userId, r.userId != userId { throw ServiceError.notFound("receipt") }
        return r
    }
}

/// `POST /v1/step-up/challenges`: the challenge (the core's options) and, for the passkey method,
/// the WebAuthn request options over the same challenge bytes.
struct StepUpChallengeIssued: Sendable {
    let options: StepUpOptions
    let publicKey: RequestOptions?
}

/// `POST /v1/step-up/verify`: the step-up token and the receipt that records the approval.
struct VerifiedStepUp: Sendable {
    let token: String
    let expiresIn: Int
    let actionHash: [UInt8]
    let receiptId: String
}

/// `POST /v1/step-up/consume`: the token's claims, the action hash as presented and the approved
/// action (canonical JSON, as stored).
struct ConsumedStepUp: Sendable {
    let claims: StepUpClaims
    let actionHash: String
    let action: String
    let receiptId: String
}
