import Crypto
import DeviceKeys
import Foundation
import JSON
import Storage
import Tokens
import WebAuthn

/// Hardware-bound device keys and action-bound step-up (SPEC "Device keys", "Step-up"; issue 5).
/// A biometric prompt is only a local yes/no; what the server trusts is a signature by a
/// registered key over a one-time challenge bound to the account, that key and the action.
/// Stateless like the passkey ceremonies: challenges live in PostgreSQL.
public final class StepUpService: Sendable {
    let store: Store
    let configuration: Configuration
    let tokens: TokenService
    let passkeys: PasskeyService

    static let enrolmentPurpose = "device-key"
    static let stepUpPurpose = "step-up"
    /// JWT `typ` of a step-up token: never accepted where an access token is expected, and back.
    public static let tokenType = "step-up+jwt"
    /// SPEC: a step-up token lives at most two minutes.
    static let maxTokenTTL = 120

    public init(store: Store, configuration: Configuration, tokens: TokenService, passkeys: PasskeyService) {
        self.store = store
        self.configuration = configuration
        self.tokens = tokens
        self.passkeys = passkeys
    }

    var tokenTTL: Int { min(Self.maxTokenTTL, configuration.stepUpTTL) }

    // MARK: Device keys

    /// `POST /v1/device-keys/challenges`: the bytes the new key signs as proof of possession (and
    /// an Android app passes to `setAttestationChallenge`).
    public func enrolmentChallenge(userId: String) throws(ServiceError) -> JSONValue {
        let challenge = EnrolmentChallenge(userId: userId).bytes
        let policy = JSONValue.object([("challenge", .string(Base64URL.encode(challenge)))]).text
        let hash = Digest.sha256(challenge)
        try db {
            try store.insertChallenge(hash: hash, purpose: Self.enrolmentPurpose, userId: userId, rpId: configuration.rpId,
                                      policy: policy, ttlSeconds: configuration.challengeTTL)
        }
        return .object([("challengeId", .string(Base64URL.encode(hash))), ("challenge", .string(Base64URL.encode(challenge))),
                        ("expiresAt", .string(iso8601(Date().addingTimeInterval(Double(configuration.challengeTTL)))))])
    }

    /// `POST /v1/device-keys`: parse everything, then use the challenge up, then check the proof.
    public func enrol(userId: String, body: JSONValue) throws(ServiceError) -> JSONValue {
        let deviceId = try Self.string(body, "deviceId", max: 128)
        let platform = try Self.string(body, "platform", max: 16)
        guard platform == "ios" || platform == "android" else { throw ServiceError.invalid("platform must be \"ios\" or \"android\"") }
        var name = platform == "ios" ? "iOS device" : "Android device"
        if let n = body["name"], !n.isNull {
            guard let s = n.stringValue else { throw ServiceError.invalid("name must be a string") }
            try validateName(s, "name")
            name = s
        }
        let key: DevicePublicKey
        let keyBytes = try Self.bytes(body, "publicKey")
        do { key = try DevicePublicKey(bytes: keyBytes) } catch { throw ServiceError(error) }
        let signature: DERSignature
        let signatureBytes = try Self.bytes(body, "signature")
        do { signature = try DERSignature(bytes: signatureBytes) } catch { throw ServiceError(error) }
        let challengeHash = try Self.challengeId(body)
        var chain: [Certificate] = []
        if let a = body["attestation"], !a.isNull {
            guard let list = a.arrayValue, !list.isEmpty, list.count <= 8 else {
                throw ServiceError.invalid("attestation must be an array of 1 to 8 base64url DER certificates, leaf first")
            }
            for item in list {
                guard let text = item.stringValue, let der = Base64URL.decode(text), let cert = try? Certificate(der: der) else {
                    throw ServiceError.invalid("attestation holds something that is not a base64url DER certificate")
                }
                chain.append(cert)
            }
        }

        // The challenge is used up from here on, whatever happens next.
        let stored = try consume(challengeHash, purpose: Self.enrolmentPurpose, userId: userId)
        guard let text = (try? JSONParser.parse(stored.policy))?["challenge"]?.stringValue, let challenge = Base64URL.decode(text) else {
            throw ServiceError("challenge_invalid", "challenge belongs to another ceremony")
        }
        do { _ = try DeviceKeyVerifier.verify(signature, by: key, over: challenge) } catch { throw ServiceError(error) }

        var attestation: JSONValue? = nil
        if !chain.isEmpty {
            // The leaf must certify the very key being enrolled; the chain's links must hold.
            guard let leafKey = try? chain[0].publicKey, leafKey.isSameKey(as: key.key) else {
                throw ServiceError("attestation_invalid", "the attestation leaf certifies another key")
            }
            for i in 0..<(chain.count - 1) {
                guard let issuerKey = try? chain[i + 1].publicKey, chain[i].isSigned(by: issuerKey) else {
                    throw ServiceError("attestation_invalid", "attestation certificate \(i) is not signed by certificate \(i + 1)")
                }
            }
            // Not yet checked: the Google hardware attestation roots and the KeyDescription
            // (challenge, TEE/StrongBox, purpose SIGN, user auth with zero timeout). Until then the
            // key is recorded as not attested, with the chain's shape noted.
            attestation = .object([("certificates", .number(Double(chain.count))), ("verified", false),
                                   ("reason", "hardware attestation roots and key description are not checked yet")])
        }
        let id = Base64URL.encode(SecureRandom.bytes(16))
        let (record, _) = try db {
            try store.enrolDeviceKey(id: id, userId: userId, deviceId: deviceId, platform: platform, name: name,
                                     publicKey: key.spkiDER, attested: false, attestation: attestation?.text)
        }
        return Self.deviceKeyJSON(record)
    }

    public func listDeviceKeys(userId: String) throws(ServiceError) -> JSONValue {
        .object([("deviceKeys", .array(try db { try store.deviceKeys(userId: userId) }.map(Self.deviceKeyJSON)))])
    }

    public func revokeDeviceKey(userId: String, id: String) throws(ServiceError) {
        guard !id.isEmpty, id.utf8.count <= 64, try db({ try store.revokeDeviceKey(userId: userId, id: id) }) else {
            throw ServiceError.notFound("device key")
        }
    }

    static func deviceKeyJSON(_ k: DeviceKeyRecord) -> JSONValue {
        .object([("id", .string(k.id)), ("deviceId", .string(k.deviceId)), ("platform", .string(k.platform)), ("name", .string(k.name)),
                 ("createdAt", .string(iso8601(k.createdAt))), ("lastUsedAt", k.lastUsedAt.map { .string(iso8601($0)) } ?? .null),
                 ("attested", .bool(k.attested))])
    }

    // MARK: Step-up challenges

    /// `POST /v1/step-up/challenges` `{"keyId","action"}` or `{"method":"passkey","action"}`.
    public func createChallenge(userId: String, body: JSONValue) throws(ServiceError) -> JSONValue {
        guard let actionValue = body["action"], !actionValue.isNull else { throw ServiceError.invalid("action is required") }
        let action: StepUpAction
        do { action = try StepUpAction(actionValue) } catch { throw ServiceError(error) }
        let method: StepUpChallenge.Method
        let keyBinding: [UInt8]
        var keyId: String? = nil
        var allow: [JSONValue] = []
        if let k = body["keyId"], !k.isNull {
            guard let id = k.stringValue, !id.isEmpty, id.utf8.count <= 64 else { throw ServiceError.invalid("keyId must be a string") }
            let key = try liveKey(id: id, userId: userId)
            method = .deviceKey
            keyBinding = key.publicKey
            keyId = id
        } else if let m = body["method"], !m.isNull {
            guard m.stringValue == "passkey" else { throw ServiceError.invalid("method must be \"passkey\" (or send keyId)") }
            let credentials = try db { try store.credentials(userId: userId) }
            guard !credentials.isEmpty else { throw ServiceError("credential_unknown", "the account has no passkey") }
            method = .passkey
            keyBinding = Self.passkeyBinding(credentialIds: credentials.map(\.id), rpId: configuration.rpId)
            allow = credentials.map(PasskeyService.descriptor)
        } else {
            throw ServiceError.invalid("keyId or \"method\":\"passkey\" is required")
        }

        let challenge = StepUpChallenge(method: method, userId: userId, keyBinding: keyBinding, action: action)
        let bytes = challenge.bytes
        var policy: [(key: String, value: JSONValue)] = [
            ("method", .string(method == .deviceKey ? "device-key" : "passkey")), ("challenge", .string(Base64URL.encode(bytes))),
            ("action", .string(String(decoding: action.canonical, as: UTF8.self))), ("keyBinding", .string(Base64URL.encode(keyBinding))),
        ]
        if let keyId { policy.append(("keyId", .string(keyId))) }
        let hash = Digest.sha256(bytes)
        try db {
            try store.insertChallenge(hash: hash, purpose: Self.stepUpPurpose, userId: userId, rpId: configuration.rpId,
                                      policy: JSONValue.object(policy).text, ttlSeconds: configuration.stepUpTTL)
        }
        var out: [(key: String, value: JSONValue)] = [
            ("challengeId", .string(Base64URL.encode(hash))), ("challenge", .string(Base64URL.encode(bytes))),
            ("expiresAt", .string(iso8601(Date().addingTimeInterval(Double(configuration.stepUpTTL))))),
            ("actionHash", .string(Base64URL.encode(action.hash))),
        ]
        if method == .passkey {
            // PublicKeyCredentialRequestOptionsJSON, user verification required: the step-up is the biometric.
            out.append(("publicKey", .object([
                ("challenge", .string(Base64URL.encode(bytes))), ("timeout", .number(Double(configuration.stepUpTTL * 1000))),
                ("rpId", .string(configuration.rpId)), ("allowCredentials", .array(allow)), ("userVerification", "required"),
                ("hints", .array([])),
            ])))
        }
        return .object(out)
    }

    /// What a passkey step-up challenge's key hash covers: the user's passkeys at issue time.
    static func passkeyBinding(credentialIds: [[UInt8]], rpId: String) -> [UInt8] {
        JSONValue.object([("credentialIds", .array(credentialIds.map { .string(Base64URL.encode($0)) }.sorted { $0.stringValue! < $1.stringValue! })),
                          ("method", "passkey"), ("rpId", .string(rpId))]).canonicalized()
    }

    /// The caller's own live key; another user's key is 404, a revoked one `key_revoked`.
    func liveKey(id: String, userId: String) throws(ServiceError) -> DeviceKeyRecord {
        guard let key = try db({ try store.deviceKey(id: id) }), key.userId == userId else { throw ServiceError.notFound("device key") }
        guard key.revokedAt == nil else { throw ServiceError("key_revoked", "this device key was revoked; enrol the device again") }
        return key
    }

    // MARK: Step-up verification

    /// `POST /v1/step-up/verify`: `{"challengeId","signature"}` or `{"challengeId","credential"}`,
    /// optionally with the `action` the client believes it approved (must be the bound one).
    public func verify(userId: String, body: JSONValue) throws(ServiceError) -> JSONValue {
        // Parse: nothing is used up by a malformed request.
        let challengeHash = try Self.challengeId(body)
        var signature: DERSignature? = nil
        var assertion: ParsedAuthentication? = nil
        if let s = body["signature"], !s.isNull {
            let signatureBytes = try Self.bytes(body, "signature")
        do { signature = try DERSignature(bytes: signatureBytes) } catch { throw ServiceError(error) }
        } else if let c = body["credential"], !c.isNull {
            do { assertion = try ParsedAuthentication(AuthenticationResponse(json: c)) } catch { throw ServiceError(error) }
        } else {
            throw ServiceError.invalid("signature (device key) or credential (passkey) is required")
        }
        var claimed: StepUpAction? = nil
        if let a = body["action"], !a.isNull {
            do { claimed = try StepUpAction(a) } catch { throw ServiceError(error) }
        }

        // The challenge: this user's, for step-up, unexpired. Used up from here on.
        let stored = try consume(challengeHash, purpose: Self.stepUpPurpose, userId: userId)
        guard let policy = try? JSONParser.parse(stored.policy), let method = policy["method"]?.stringValue,
              let challenge = policy["challenge"]?.stringValue.flatMap(Base64URL.decode),
              let actionText = policy["action"]?.stringValue, let keyBinding = policy["keyBinding"]?.stringValue
        else { throw ServiceError("challenge_invalid", "challenge belongs to another ceremony") }
        let actionHash = Digest.sha256(Array(actionText.utf8))
        if let claimed, !constantTimeEquals(claimed.hash, actionHash) {
            throw ServiceError("action_mismatch", "the challenge was issued for another action")
        }

        let now = Date()
        let jti = Base64URL.encode(SecureRandom.bytes(16))
        let receiptId = Base64URL.encode(SecureRandom.bytes(16))
        let receipt: StepUpReceiptRecord
        let amr: [JSONValue]
        let acr: String
        var deviceKeyId: String? = nil
        switch method {
        case "device-key":
            guard let signature else { throw ServiceError.invalid("this challenge is for a device key: send signature") }
            guard let keyId = policy["keyId"]?.stringValue else { throw ServiceError("challenge_invalid", "challenge has no key") }
            let record = try liveKey(id: keyId, userId: userId)
            let key: DevicePublicKey
            do { key = try DevicePublicKey(bytes: record.publicKey) } catch { throw ServiceError("internal_error", "stored key unreadable") }
            do { _ = try DeviceKeyVerifier.verify(signature, by: key, over: challenge) } catch { throw ServiceError(error) }
            deviceKeyId = keyId
            acr = "urn:latchkey:acr:step-up:device-key"
            amr = ["hwk", "pop"]  // RFC 8176: proof of possession of a hardware-secured key
            receipt = StepUpReceiptRecord(
                id: receiptId, userId: userId, method: "device-key", keyId: keyId, publicKey: key.spkiDER, challenge: challenge,
                signedData: challenge, signature: signature.der, action: actionText, actionHash: actionHash, keyBinding: keyBinding,
                tokenJTI: jti, tokenExpiresAt: now.addingTimeInterval(Double(tokenTTL)))
        case "passkey":
            guard let assertion else { throw ServiceError.invalid("this challenge is for a passkey: send credential") }
            let verified = try verifyPasskey(assertion, challenge: challenge, userId: userId, keyBinding: keyBinding)
            acr = "urn:latchkey:acr:step-up:passkey-uv"
            amr = ["pop", "user", "mfa"]
            receipt = StepUpReceiptRecord(
                id: receiptId, userId: userId, method: "passkey", keyId: Base64URL.encode(verified.credentialId),
                publicKey: verified.spki, challenge: challenge,
                signedData: assertion.authenticatorData.raw + assertion.clientData.hash, signature: assertion.response.signature,
                action: actionText, actionHash: actionHash, keyBinding: keyBinding, clientDataJSON: assertion.clientData.raw,
                authenticatorData: assertion.authenticatorData.raw, tokenJTI: jti, tokenExpiresAt: now.addingTimeInterval(Double(tokenTTL)))
        default:
            throw ServiceError("challenge_invalid", "challenge belongs to another ceremony")
        }
        // A key revoked after the lookup above still wins: the receipt is stored only while it is live.
        guard try db({ try store.insertStepUpReceipt(receipt, deviceKeyId: deviceKeyId) }) else {
            throw ServiceError("key_revoked", "this device key was revoked; enrol the device again")
        }
        let token = try stepUpToken(userId: userId, jti: jti, authTime: Int64(now.timeIntervalSince1970), acr: acr, amr: amr,
                                    actionHash: actionHash, receiptId: receiptId)
        return .object([("access_token", .string(token)), ("token_type", "Bearer"), ("expires_in", .number(Double(tokenTTL))),
                        ("actionHash", .string(Base64URL.encode(actionHash))), ("receiptId", .string(receiptId))])
    }

    /// The passkey method: a WebAuthn assertion (L3 §7.2) over the step-up challenge, with user
    /// verification required whatever the deployment's default, by one of the user's passkeys
    /// that the challenge was bound to.
    func verifyPasskey(_ parsed: ParsedAuthentication, challenge: [UInt8], userId: String,
                       keyBinding: String) throws(ServiceError) -> (credentialId: [UInt8], spki: [UInt8]) {
        var policy = passkeys.basePolicy()
        policy.userVerification = .required
        let checked: CeremonyCheckedAuthentication
        do { checked = try AuthenticationVerifier.checkCeremony(parsed, expectedChallenge: challenge, policy: policy) } catch {
            throw ServiceError(error)
        }
        guard let (credential, user) = try db({ try store.credentialForLogin(id: parsed.response.rawId) }), user.id == userId else {
            throw ServiceError("credential_unknown", "no such passkey on this account")
        }
        guard let binding = Base64URL.decode(keyBinding), let list = (try? JSONParser.parse(binding))?["credentialIds"]?.arrayValue,
              list.contains(.string(Base64URL.encode(credential.id))) else {
            throw ServiceError("credential_unknown", "this passkey was not offered for the step-up")
        }
        let (verified, key) = try passkeys.verifyAssertion(checked, credential: credential, user: user)
        try db { try store.recordPasskeyStepUp(credentialId: credential.id, signCount: Int64(verified.newSignCount)) }
        return (credential.id, key.publicKey.spkiDER)
    }

    /// An ES256 JWT (`typ` step-up+jwt) scoped to one action: `sub`, `jti`, `auth_time`, `acr`,
    /// `amr`, `action_hash`, at most two minutes.
    func stepUpToken(userId: String, jti: String, authTime: Int64, acr: String, amr: [JSONValue], actionHash: [UInt8],
                     receiptId: String) throws(ServiceError) -> String {
        try tokens.sign(.object([
            ("iss", .string(configuration.issuer)), ("sub", .string(userId)), ("aud", .string(configuration.rpId)),
            ("iat", .number(Double(authTime))), ("exp", .number(Double(authTime + Int64(tokenTTL)))), ("jti", .string(jti)),
            ("auth_time", .number(Double(authTime))), ("acr", .string(acr)), ("amr", .array(amr)),
            ("action_hash", .string(Base64URL.encode(actionHash))), ("receipt_id", .string(receiptId)),
        ]), type: Self.tokenType)
    }

    // MARK: Consume

    /// `POST /v1/step-up/consume` with the step-up token as Bearer and `{"actionHash"}`: 200 the
    /// first time for the action the token was issued for; `action_mismatch` for any other
    /// action (the token stays unused); `conflict` once used.
    public func consume(token: String, body: JSONValue) throws(ServiceError) -> JSONValue {
        let claims = try tokens.verify(token, type: Self.tokenType)
        guard let sub = claims["sub"]?.stringValue, let jti = claims["jti"]?.stringValue,
              let tokenHash = claims["action_hash"]?.stringValue.flatMap(Base64URL.decode) else { throw ServiceError.unauthorized }
        guard let text = body["actionHash"]?.stringValue else { throw ServiceError.invalid("actionHash is required") }
        guard let presented = Base64URL.decode(text), presented.count == 32 else {
            throw ServiceError.invalid("actionHash must be base64url of 32 bytes (SHA-256)")
        }
        guard constantTimeEquals(presented, tokenHash) else {
            throw ServiceError("action_mismatch", "this step-up token was issued for another action")
        }
        switch try db({ try store.consumeStepUpToken(jti: jti, userId: sub, actionHash: presented) }) {
        case .consumed(let receiptId, let action):
            return .object([("sub", .string(sub)), ("actionHash", .string(text)), ("action", (try? JSONParser.parse(action)) ?? .null),
                            ("receiptId", .string(receiptId)), ("acr", claims["acr"] ?? .null), ("amr", claims["amr"] ?? .null),
                            ("auth_time", claims["auth_time"] ?? .null)])
        case .alreadyUsed:
            throw ServiceError("conflict", "this step-up token was already used")
        case .unknown:
            throw ServiceError.unauthorized
        }
    }

    // MARK: Receipts

    /// `GET /v1/step-up/receipts/{id}`: everything needed to re-verify the approval offline.
    public func receipt(id: String, userId: String?) throws(ServiceError) -> JSONValue {
        guard !id.isEmpty, id.utf8.count <= 64, let r = try db({ try store.stepUpReceipt(id: id) }) else {
            throw ServiceError.notFound("receipt")
        }
        if let userId, r.userId != userId { throw ServiceError.notFound("receipt") }
        var layout: JSONValue = .null
        if let c = try? StepUpChallenge(parsing: r.challenge) {
            layout = .object([("magic", "LKSTEPUP"), ("version", .number(Double(StepUpChallenge.version))),
                              ("method", .string(c.method == .deviceKey ? "device-key" : "passkey")),
                              ("nonce", .string(Base64URL.encode(c.nonce))), ("userHash", .string(Base64URL.encode(c.userHash))),
                              ("keyHash", .string(Base64URL.encode(c.keyHash))), ("actionHash", .string(Base64URL.encode(c.actionHash)))])
        }
        let pem = PEM.encode(r.publicKey, label: "PUBLIC KEY")
        var out: [(key: String, value: JSONValue)] = [
            ("id", .string(r.id)), ("userId", .string(r.userId)), ("method", .string(r.method)), ("keyId", .string(r.keyId)),
            ("publicKey", .string(Base64URL.encode(r.publicKey))), ("publicKeyPEM", .string(pem)),
            ("challenge", .string(Base64URL.encode(r.challenge))), ("challengeFields", layout),
            ("signedData", .string(Base64URL.encode(r.signedData))), ("signature", .string(Base64URL.encode(r.signature))),
            ("signatureAlgorithm", "ECDSA-SHA256 (DER)"),
            ("action", (try? JSONParser.parse(r.action)) ?? .null), ("actionCanonical", .string(r.action)),
            ("actionHash", .string(Base64URL.encode(r.actionHash))), ("keyBinding", .string(r.keyBinding)),
            ("tokenId", .string(r.tokenJTI)), ("createdAt", .string(iso8601(r.createdAt))),
            ("consumedAt", r.consumedAt.map { .string(iso8601($0)) } ?? .null),
        ]
        if let c = r.clientDataJSON { out.append(("clientDataJSON", .string(Base64URL.encode(c)))) }
        if let a = r.authenticatorData { out.append(("authenticatorData", .string(Base64URL.encode(a)))) }
        return .object(out)
    }

    // MARK: Shared

    /// Uses up this user's challenge of `purpose`; unknown, used, another user's, expired → challenge_invalid.
    func consume(_ hash: [UInt8], purpose: String, userId: String) throws(ServiceError) -> ChallengeRecord {
        try passkeys.validate(try db { try store.consumeChallenge(hash: hash, purpose: purpose, userId: userId) }, purpose: purpose)
    }

    static func challengeId(_ body: JSONValue) throws(ServiceError) -> [UInt8] {
        guard let v = body["challengeId"], !v.isNull else { throw ServiceError.invalid("challengeId is required") }
        guard let text = v.stringValue, let bytes = Base64URL.decode(text), bytes.count == 32 else {
            throw ServiceError.invalid("challengeId is not a challenge id (base64url of 32 bytes)")
        }
        return bytes
    }

    static func string(_ body: JSONValue, _ member: String, max: Int) throws(ServiceError) -> String {
        guard let v = body[member], !v.isNull else { throw ServiceError.invalid("\(member) is required") }
        guard let s = v.stringValue, !s.isEmpty, s.utf8.count <= max,
              !s.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ServiceError.invalid("\(member) must be a string of 1 to \(max) bytes")
        }
        return s
    }

    static func bytes(_ body: JSONValue, _ member: String) throws(ServiceError) -> [UInt8] {
        guard let v = body[member], !v.isNull else { throw ServiceError.invalid("\(member) is required") }
        guard let text = v.stringValue, let bytes = Base64URL.decode(text) else {
            throw ServiceError.invalid("\(member) is not base64url")
        }
        return bytes
    }
}

extension ServiceError {
    init(_ error: DeviceKeyError) { self.init(error.code.rawValue, error.reason) }
}
