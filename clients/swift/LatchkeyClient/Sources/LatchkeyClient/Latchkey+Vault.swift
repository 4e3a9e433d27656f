import Foundation

/// A passkey that evaluates the PRF extension (WebAuthn L3 §10.1.4; CTAP2 `hmac-secret`): one
/// user-verified assertion for `request.options` restricted to `request.allowedCredentialIDs`,
/// with `prf.eval.first = request.salt`. On iOS 18 / macOS 15 `PRFPasskeyAuthorization`
/// (AuthenticationServices' `ASAuthorizationPublicKeyCredentialPRFAssertionInput`); in tests a
/// software authenticator. The PRF output never leaves the device: the client uses it here only.
public protocol PRFAuthenticator: Sendable {
    func assertWithPRF(_ request: PRFRequest) async throws -> PRFAssertion
}

public struct PRFRequest: Sendable {
    /// The request options (a step-up challenge's, or sign-in options used only locally).
    public var options: AuthenticationOptions
    /// `prf.eval.first`: the vault's 32-byte salt.
    public var salt: Data
    /// The passkeys that may answer (the vault's wraps, or the one passkey to wrap for).
    public var allowedCredentialIDs: [Data]
}

/// The assertion (posted only when it answers a step-up challenge) and the PRF output (never posted).
public struct PRFAssertion: Sendable {
    public var credential: AssertionCredential
    public var prfOutput: Data

    public init(credential: AssertionCredential, prfOutput: Data) {
        self.credential = credential
        self.prfOutput = prfOutput
    }
}

/// `GET /v1/vault`: the salt, the wraps of the live passkeys, and the recovery wrap when this
/// session may read it.
public struct Vault: Sendable {
    public let prfSalt: Data
    /// credential id (base64url) → `wrappedKey`.
    public let wrapped: [(credentialId: String, wrappedKey: String)]
    public let recoveryWrappedKey: String?

    init(_ j: LatchkeyJSON) throws(LatchkeyError) {
        prfSalt = try j.bytes("prfSalt", in: "vault")
        wrapped = try (j["wrapped"]?.arrayValue ?? []).map { w throws(LatchkeyError) -> (credentialId: String, wrappedKey: String) in
            (try w.string("credentialId", in: "wrapped key"), try w.string("wrappedKey", in: "wrapped key"))
        }
        recoveryWrappedKey = j["recovery"]?["wrappedKey"]?.stringValue
    }

    /// A vault whose creation stopped before any key was stored (the prompt cancelled): its salt is
    /// reused by the next `createVault`, since `PUT /v1/vault` succeeds once per account.
    public var isUnfinished: Bool { wrapped.isEmpty && recoveryWrappedKey == nil }
}

/// The data key, held on this device only: AES-256-GCM of the app's data under it, the same bytes
/// as latchkey.js's open vault (IV ‖ ciphertext ‖ tag, no associated data).
public struct OpenVault: Sendable {
    public let dataKey: [UInt8]
    /// The passkey that opened it (nil when opened with the vault recovery key).
    public let credentialId: String?

    public init(dataKey: [UInt8], credentialId: String?) {
        self.dataKey = dataKey
        self.credentialId = credentialId
    }

    public func encrypt(_ plaintext: Data) -> String { Base64URL.encode(VaultCrypto.aesGCMSeal([UInt8](plaintext), key: dataKey)) }
    public func encrypt(_ text: String) -> String { encrypt(Data(text.utf8)) }

    public func decrypt(_ sealed: String) throws(VaultCrypto.Locked) -> Data {
        guard let bytes = Base64URL.decode(sealed), let plain = VaultCrypto.aesGCMOpen([UInt8](bytes), key: dataKey) else { throw VaultCrypto.Locked() }
        return Data(plain)
    }

    public func decryptText(_ sealed: String) throws(VaultCrypto.Locked) -> String { String(decoding: try decrypt(sealed), as: UTF8.self) }
}

/// The vault the server cannot read (docs/vault.md) over HTTP. Latchkey stores the salt and the
/// wraps; the PRF output, the key-wrapping keys, the data key and the vault recovery key stay here.
/// A wrap for a passkey needs a step-up for `latchkey.vault.wrap` of that passkey: the client asks
/// that same passkey for the step-up assertion and the PRF output at once (one prompt).
extension Latchkey {
    /// `GET /v1/vault`; nil when the account has no vault (404).
    public func vault(accessToken: String) async throws(LatchkeyError) -> Vault? {
        do { return try Vault(try await call("GET", "/v1/vault", authorization: .bearer(accessToken))) } catch {
            if error.status == 404 { return nil }
            throw error
        }
    }

    /// `PUT /v1/vault` `{"prfSalt"}` (once per account; 409 `conflict` after).
    public func putVault(prfSalt: Data, accessToken: String) async throws(LatchkeyError) {
        _ = try await call("PUT", "/v1/vault", body: ["prfSalt": .string(Base64URL.encode(prfSalt))], authorization: .bearer(accessToken))
    }

    /// Creates the vault: a fresh 32-byte salt (or the salt of an unfinished one), a new data key,
    /// wrapped for `credentialId` after one user-verified prompt of that passkey (the step-up and the
    /// PRF output). The salt is stored only after the prompt answered, so a cancelled prompt leaves
    /// nothing behind; a vault left without any key is finished with its own salt.
    public func createVault(credentialId: String, accessToken: String, authenticator: some PRFAuthenticator) async throws(LatchkeyError) -> OpenVault {
        let existing = try await vault(accessToken: accessToken)
        if let existing, !existing.isUnfinished { throw LatchkeyError(.conflict, "this account has a vault already: unlock it") }
        let salt = existing?.prfSalt ?? Data(VaultCrypto.randomBytes(32))
        let dataKey = VaultCrypto.randomBytes(32)
        let step = try await wrapStep(credentialId: credentialId, salt: salt, accessToken: accessToken, authenticator: authenticator)
        if existing == nil { try await putVault(prfSalt: salt, accessToken: accessToken) }
        try await storeWrap(step, dataKey: dataKey, accessToken: accessToken)
        return OpenVault(dataKey: dataKey, credentialId: credentialId)
    }

    /// Wraps an open vault's data key for another passkey of the account (after adding it, or after
    /// opening the vault with its recovery key on a new passkey).
    public func wrapVault(_ open: OpenVault, for credentialId: String, accessToken: String,
                          authenticator: some PRFAuthenticator) async throws(LatchkeyError) {
        guard let vault = try await vault(accessToken: accessToken) else { throw LatchkeyError(.notFound, "this account has no vault", status: 404) }
        let step = try await wrapStep(credentialId: credentialId, salt: vault.prfSalt, accessToken: accessToken, authenticator: authenticator)
        try await storeWrap(step, dataKey: open.dataKey, accessToken: accessToken)
    }

    /// Opens the vault with one of the passkeys it is wrapped for (`userVerification: "required"`).
    /// The assertion answers sign-in options used only here: nothing of it is sent.
    public func unlockVault(accessToken: String, authenticator: some PRFAuthenticator) async throws(LatchkeyError) -> OpenVault {
        guard let vault = try await vault(accessToken: accessToken) else { throw LatchkeyError(.notFound, "this account has no vault", status: 404) }
        guard !vault.wrapped.isEmpty else { throw LatchkeyError(.vaultLocked, "no passkey opens this vault: use the vault recovery key") }
        let options = try await authenticationOptions()
        let ids = vault.wrapped.compactMap { Base64URL.decode($0.credentialId) }
        let answer = try await prf(PRFRequest(options: options.requiringVerification(allowing: ids), salt: vault.prfSalt, allowedCredentialIDs: ids), authenticator)
        let id = Base64URL.encode(answer.credential.credentialID)
        guard let entry = vault.wrapped.first(where: { $0.credentialId == id }) else {
            throw LatchkeyError(.vaultLocked, "the passkey that answered is not one the vault is wrapped for")
        }
        let userHandle = [UInt8](answer.credential.userID ?? Data())
        do {
            let key = try VaultCrypto.unwrapForPasskey(entry.wrappedKey, prfOutput: [UInt8](answer.prfOutput), userHandle: userHandle,
                                                       credentialId: [UInt8](answer.credential.credentialID))
            return OpenVault(dataKey: key, credentialId: id)
        } catch { throw LatchkeyError(.vaultLocked, "this passkey does not open the vault") }
    }

    /// Makes the vault's recovery key (32 random bytes), stores the data key wrapped under it (a
    /// passkey step-up for `latchkey.vault.recovery`) and returns the 52-character code to show the
    /// person once. Latchkey never receives the key.
    public func makeVaultRecoveryKey(_ open: OpenVault, accessToken: String, assert: PasskeyAssertionProvider) async throws(LatchkeyError) -> String {
        let recoveryKey = VaultCrypto.randomBytes(32)
        let wrappedKey = VaultCrypto.wrapForRecovery(dataKey: open.dataKey, recoveryKey: recoveryKey)
        let token = try await stepUpWithPasskey(action: .vaultRecovery, accessToken: accessToken, assert: assert)
        _ = try await call("PUT", "/v1/vault/recovery", body: ["wrappedKey": .string(wrappedKey)], authorization: .bearer(accessToken),
                           headers: [("Latchkey-Step-Up", token.token)])
        return VaultCrypto.recoveryCode(recoveryKey)
    }

    /// Opens the vault with the written-down vault recovery key (after an account recovery, from the
    /// session it began); then `wrapVault(_:for:…)` wraps it for the new passkey.
    public func openVault(recoveryCode: String, accessToken: String) async throws(LatchkeyError) -> OpenVault {
        guard let key = VaultCrypto.parseRecoveryCode(recoveryCode) else {
            throw LatchkeyError(.invalidRequest, "a vault recovery key is 52 letters and digits")
        }
        guard let vault = try await vault(accessToken: accessToken), let wrapped = vault.recoveryWrappedKey else {
            throw LatchkeyError(.notFound, "this session cannot read the vault recovery wrap", status: 404)
        }
        do { return OpenVault(dataKey: try VaultCrypto.unwrapForRecovery(wrapped, recoveryKey: key), credentialId: nil) } catch {
            throw LatchkeyError(.vaultLocked, "this vault recovery key does not open the vault")
        }
    }

    // MARK: Parts

    /// One prompt of `credentialId`: its assertion answers the `latchkey.vault.wrap` step-up
    /// challenge, its PRF output on `salt` derives the key-wrapping key.
    struct WrapStep {
        let challenge: StepUpChallenge
        let action: StepUpAction
        let answer: PRFAssertion
        let credentialId: String
    }

    func wrapStep(credentialId: String, salt: Data, accessToken: String, authenticator: some PRFAuthenticator) async throws(LatchkeyError) -> WrapStep {
        guard let id = Base64URL.decode(credentialId) else { throw LatchkeyError(.invalidRequest, "a credential id is base64url") }
        let action = try StepUpAction.vaultWrap(credentialId: credentialId)
        let challenge = try await passkeyStepUpChallenge(action: action, accessToken: accessToken)
        let options = challenge.passkeyOptions!.requiringVerification(allowing: [id])
        let answer = try await prf(PRFRequest(options: options, salt: salt, allowedCredentialIDs: [id]), authenticator)
        guard answer.credential.credentialID == id else { throw LatchkeyError(.authenticator, "another passkey answered than the one to wrap for") }
        return WrapStep(challenge: challenge, action: action, answer: answer, credentialId: credentialId)
    }

    func storeWrap(_ step: WrapStep, dataKey: [UInt8], accessToken: String) async throws(LatchkeyError) {
        guard let userHandle = step.answer.credential.userID, !userHandle.isEmpty else {
            throw LatchkeyError(.authenticator, "the assertion carries no user handle (the key-wrapping key needs it)")
        }
        let token = try await verifyStepUp(step.challenge, credential: step.answer.credential, action: step.action, accessToken: accessToken)
        let wrappedKey = VaultCrypto.wrapForPasskey(dataKey: dataKey, prfOutput: [UInt8](step.answer.prfOutput), userHandle: [UInt8](userHandle),
                                                    credentialId: [UInt8](step.answer.credential.credentialID))
        _ = try await call("PUT", "/v1/vault/wrapped/\(Self.pathSegment(step.credentialId))", body: ["wrappedKey": .string(wrappedKey)],
                           authorization: .bearer(accessToken), headers: [("Latchkey-Step-Up", token.token)])
    }

    func prf(_ request: PRFRequest, _ authenticator: some PRFAuthenticator) async throws(LatchkeyError) -> PRFAssertion {
        let answer: PRFAssertion
        do { answer = try await authenticator.assertWithPRF(request) } catch let e as LatchkeyError { throw e } catch {
            throw LatchkeyError(.authenticator, "the passkey prompt failed: \(error)")
        }
        guard answer.prfOutput.count == 32 else { throw LatchkeyError(.unsupported, "this passkey cannot open a vault (no PRF output)") }
        return answer
    }
}

extension AuthenticationOptions {
    /// These options with `userVerification: "required"` and `allowCredentials` narrowed to `ids`.
    func requiringVerification(allowing ids: [Data]) -> AuthenticationOptions {
        guard case .object(var members) = json else { return self }
        members.removeAll { $0.key == "allowCredentials" || $0.key == "userVerification" }
        members.append(("allowCredentials", .array(ids.map { .object([("type", "public-key"), ("id", .string(Base64URL.encode($0)))]) })))
        members.append(("userVerification", "required"))
        return (try? AuthenticationOptions(json: .object(members))) ?? self
    }
}

extension StepUpAction {
    /// `{"type":"latchkey.vault.wrap","credentialId":…}`: storing the data key wrapped for that passkey.
    public static func vaultWrap(credentialId: String) throws(LatchkeyError) -> StepUpAction {
        try StepUpAction(["type": "latchkey.vault.wrap", "credentialId": .string(credentialId)])
    }

    /// `{"type":"latchkey.vault.recovery"}`: storing the data key wrapped under the vault recovery key.
    public static let vaultRecovery = try! StepUpAction(["type": "latchkey.vault.recovery"])
}

extension LatchkeyError.Code {
    /// A key that does not open the vault: the wrong passkey, recovery key or data.
    public static let vaultLocked: LatchkeyError.Code = "vault_locked"
}
