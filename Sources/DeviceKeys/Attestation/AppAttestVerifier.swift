import Crypto
import JSON

/// Apple App Attest (format `apple-appattest`), after Apple's "Validating apps that connect to your
/// server" (DeviceCheck documentation): "Verify the attestation" steps 1–9 and "Verify the assertion"
/// steps 1–5. Step 6 of the assertion (the challenge inside client data) is the caller's: it hands in
/// `clientDataHash` = SHA-256 of the challenge bytes it issued. Parse first (`AppAttestObject`,
/// `AppAttestAssertion`), verify second; every failure is `attestation_invalid` with a reason.
public enum AppAttestVerifier {
    static let nonceExtension = "1.2.840.113635.100.8.2"
    /// "appattest" followed by seven 0x00 bytes.
    static let productionAAGUID: [UInt8] = Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
    static let developmentAAGUID: [UInt8] = Array("appattestdevelop".utf8)

    /// Apple's "Validating apps that connect to your server" steps 1–9: fmt "apple-appattest", x5c chain to the
    /// Apple App Attestation Root CA valid at policy.now, nonce extension 1.2.840.113635.100.8.2 ==
    /// SHA-256(authData ‖ clientDataHash), key id == SHA-256(public key), rpIdHash == SHA-256(one of policy.iosApps),
    /// counter 0, AAGUID "appattest"+7×00 (or "appattestdevelop" when policy.appAttestDevelopment), credentialId == keyId.
    /// `clientDataHash` is the bytes the app passed to `attestKey(_:clientDataHash:)`, of any length
    /// (Apple's API takes any `Data`; the server always passes SHA-256(enrolment challenge bytes),
    /// `latchkey inspect device-key --client-data-hash` whatever a sample used).
    public static func verifyAttestation(keyId: [UInt8], attestationObject: [UInt8], clientDataHash: [UInt8],
                                         policy: DeviceKeyAttestationPolicy, trace: AttestationTrace? = nil) throws(DeviceKeyError) -> AttestedDeviceKey {
        let check = Checker(trace: trace)
        let parsed: AppAttestObject
        do { parsed = try AppAttestObject(bytes: attestationObject) } catch {
            trace?.record("appattest.parse", false, error.reason)
            throw error
        }
        check.pass("appattest.parse")
        let verified = try VerifiedAppAttestation(parsed, keyId: keyId, clientDataHash: clientDataHash, policy: policy, check: check)
        let decoded = verified.decoded
        trace?.decoded.append(contentsOf: decoded)
        return AttestedDeviceKey(format: .appleAppAttest, securityLevel: .secureEnclave, app: verified.appId,
                                 userAuthenticationRequired: nil, publicKey: verified.publicKey, appAttestKeyId: keyId,
                                 counter: verified.counter, decoded: .object(decoded))
    }

    /// An App Attest assertion (CBOR {signature, authenticatorData}): rpIdHash of `appId`, signature by `publicKey`
    /// over SHA-256(authenticatorData ‖ clientDataHash) (nonce), counter > previousCounter. Returns the new counter.
    public static func verifyAssertion(_ assertion: [UInt8], publicKey: DevicePublicKey, clientDataHash: [UInt8],
                                       appId: String, previousCounter: UInt32) throws(DeviceKeyError) -> UInt32 {
        try verifiedAssertion(assertion, publicKey: publicKey, clientDataHash: clientDataHash, appId: appId,
                              previousCounter: previousCounter).counter
    }

    /// `verifyAssertion` with what a receipt keeps: the exact bytes signed and the signature, so the
    /// approval can be re-verified offline like any device-key step-up.
    public static func verifiedAssertion(_ assertion: [UInt8], publicKey: DevicePublicKey, clientDataHash: [UInt8],
                                         appId: String, previousCounter: UInt32) throws(DeviceKeyError) -> VerifiedAppAttestAssertion {
        try VerifiedAppAttestAssertion(try AppAttestAssertion(bytes: assertion), publicKey: publicKey, clientDataHash: clientDataHash,
                                       appId: appId, previousCounter: previousCounter)
    }

    /// Records each check in the trace (when there is one) and throws on the first that fails.
    struct Checker {
        let trace: AttestationTrace?
        func pass(_ name: String, _ detail: String? = nil) { trace?.record(name, true, detail) }
        func require(_ name: String, _ condition: Bool, _ reason: @autoclosure () -> String) throws(DeviceKeyError) {
            guard condition else {
                let why = reason()
                trace?.record(name, false, why)
                throw DeviceKeyError(.attestationInvalid, "App Attest: \(why)")
            }
            trace?.record(name, true)
        }
        func fail(_ name: String, _ reason: String) -> DeviceKeyError {
            trace?.record(name, false, reason)
            return DeviceKeyError(.attestationInvalid, "App Attest: \(reason)")
        }
    }
}

/// An attestation object that passed every step; only `AppAttestVerifier` makes one.
struct VerifiedAppAttestation: Sendable {
    let publicKey: DevicePublicKey
    let appId: String
    let counter: UInt32
    let development: Bool
    let decoded: [(key: String, value: JSONValue)]

    init(_ object: AppAttestObject, keyId: [UInt8], clientDataHash: [UInt8], policy: DeviceKeyAttestationPolicy,
         check: AppAttestVerifier.Checker) throws(DeviceKeyError) {
        let authData = object.authenticatorData
        let credCert = object.credentialCertificate
        try check.require("appattest.keyIdLength", keyId.count == 32, "keyId must be 32 bytes (SHA-256 of the public key)")

        // Step 1: x5c holds credCert then the intermediate; the path ends at a trust anchor (the Apple
        // App Attestation Root CA) and every certificate is valid at policy.now.
        do {
            try CertificatePath.validate(leaf: credCert, intermediates: Array(object.certificates.dropFirst()),
                                         anchors: policy.trustAnchors, at: policy.now)
            check.pass("appattest.step1.chain")
        } catch { throw check.fail("appattest.step1.chain", "step 1: \(error.reason)") }

        // Steps 2–3: nonce = SHA-256(authData ‖ clientDataHash).
        let nonce = Digest.sha256(authData.raw + clientDataHash)
        // Step 4: credCert's extension 1.2.840.113635.100.8.2 is SEQUENCE { [1] EXPLICIT OCTET STRING nonce }.
        guard let ext = credCert.extension(AppAttestVerifier.nonceExtension) else {
            throw check.fail("appattest.step4.nonce", "step 4: credCert has no nonce extension \(AppAttestVerifier.nonceExtension)")
        }
        guard let certNonce = Self.nonce(fromExtension: ext.value) else {
            throw check.fail("appattest.step4.nonce", "step 4: nonce extension is not SEQUENCE { [1] OCTET STRING (32 bytes) }")
        }
        try check.require("appattest.step4.nonce", constantTimeEquals(certNonce, nonce),
                          "step 4: nonce extension differs from SHA-256(authData ‖ clientDataHash)")

        // Step 5: SHA-256 of credCert's public key (the X9.63 point) is the key identifier. Device keys are P-256.
        let certKey: DevicePublicKey
        guard let key = try? credCert.publicKey, key.type == .ec(.p256), let deviceKey = try? DevicePublicKey(bytes: key.spkiDER) else {
            throw check.fail("appattest.step5.keyId", "step 5: credCert key is not an uncompressed EC P-256 key")
        }
        certKey = deviceKey
        try check.require("appattest.step5.keyId", Digest.sha256(certKey.x963) == keyId,
                          "step 5: keyId is not SHA-256 of credCert's public key")

        // Step 6: rpIdHash = SHA-256 of a declared App ID ("<teamId>.<bundleId>").
        guard let app = policy.iosApps.first(where: { Digest.sha256(Array($0.utf8)) == authData.rpIdHash }) else {
            throw check.fail("appattest.step6.rpIdHash", policy.iosApps.isEmpty
                             ? "step 6: no iOS app is declared" : "step 6: rpIdHash is not SHA-256 of a declared iOS App ID")
        }
        check.pass("appattest.step6.rpIdHash", app)

        // Step 7: the counter of a fresh key's attestation is 0.
        try check.require("appattest.step7.counter", authData.counter == 0, "step 7: counter is \(authData.counter), not 0")

        // Step 8: AAGUID names the environment the server operates in: "appattestdevelop" in development,
        // "appattest" + 7×00 in production. A key from the other environment is refused.
        guard let credential = authData.attestedCredential else { throw check.fail("appattest.step8.aaguid", "step 8: no attested credential data") }
        let expected = policy.appAttestDevelopment ? AppAttestVerifier.developmentAAGUID : AppAttestVerifier.productionAAGUID
        let isDevelopment = credential.aaguid == AppAttestVerifier.developmentAAGUID
        try check.require("appattest.step8.aaguid", credential.aaguid == expected,
                          isDevelopment ? "step 8: AAGUID is appattestdevelop (development) but the server is in production"
                              : credential.aaguid == AppAttestVerifier.productionAAGUID
                              ? "step 8: AAGUID is production but the server is in development (LATCHKEY_APP_ATTEST_DEVELOPMENT)"
                              : "step 8: AAGUID is not an App Attest environment")

        // Step 9: credentialId is the key identifier.
        try check.require("appattest.step9.credentialId", credential.credentialId == keyId, "step 9: credentialId differs from keyId")

        // Beyond Apple's steps: the COSE key in authData is credCert's key (WebAuthn L3 §6.5.1), so the
        // two places a client could read the key from agree.
        try check.require("appattest.credentialKey", credential.coseKeyX963 == certKey.x963,
                          "authData's credential public key differs from credCert's")

        publicKey = certKey
        appId = app
        counter = authData.counter
        development = isDevelopment
        decoded = [
            ("format", .string(AttestationFormatName.appleAppAttest.rawValue)),
            ("keyId", .string(Base64URL.encode(keyId))),
            ("app", .string(app)),
            ("environment", .string(isDevelopment ? "development" : "production")),
            ("aaguid", .string(Base64URL.encode(credential.aaguid))),
            ("counter", .number(Double(authData.counter))),
            ("flags", .number(Double(authData.flags))),
            ("receiptLength", .number(Double(object.receipt.count))),
            ("credCertNotBefore", .string(rfc3339(credCert.notBefore))),
            ("credCertNotAfter", .string(rfc3339(credCert.notAfter))),
            ("chainLength", .number(Double(object.certificates.count))),
        ]
    }

    /// The nonce of extension 1.2.840.113635.100.8.2: exactly SEQUENCE { [1] EXPLICIT OCTET STRING (32) }.
    static func nonce(fromExtension value: [UInt8]) -> [UInt8]? {
        guard let seq = try? DERNode.parse(value), seq.isUniversal(DERNode.sequence), seq.constructed,
              let items = try? seq.children, items.count == 1, items[0].isContext(1), items[0].constructed,
              let inner = try? items[0].children, inner.count == 1, inner[0].isUniversal(DERNode.octetString), !inner[0].constructed,
              inner[0].content.count == 32 else { return nil }
        return Array(inner[0].content)
    }
}

/// An assertion that passed "Verify the assertion" steps 1–5.
public struct VerifiedAppAttestAssertion: Sendable {
    public let counter: UInt32
    /// The authenticator data as the device sent it.
    public let authenticatorData: [UInt8]
    /// SHA-256(authenticatorData ‖ clientDataHash): the message the ECDSA-SHA256 signature covers.
    public let signedData: [UInt8]
    /// DER ECDSA.
    public let signature: [UInt8]

    init(_ assertion: AppAttestAssertion, publicKey: DevicePublicKey, clientDataHash: [UInt8], appId: String,
         previousCounter: UInt32) throws(DeviceKeyError) {
        func fail(_ why: String) -> DeviceKeyError { DeviceKeyError(.attestationInvalid, "App Attest assertion: \(why)") }
        let authData = assertion.authenticatorData
        // Step 1 is the caller's: clientDataHash = SHA-256(client data), here the challenge bytes.
        guard clientDataHash.count == 32 else { throw fail("clientDataHash must be 32 bytes (SHA-256)") }
        // Steps 2–3: nonce = SHA-256(authenticatorData ‖ clientDataHash); the signature (ECDSA P-256 with
        // SHA-256, DER) is over nonce as the message.
        let nonce = Digest.sha256(authData.raw + clientDataHash)
        guard publicKey.isValidSignature(assertion.signature, over: nonce) else {
            throw fail("step 3: signature does not verify with the attested key over SHA-256(authenticatorData ‖ clientDataHash)")
        }
        // Step 4: rpIdHash = SHA-256 of the App ID.
        guard authData.rpIdHash == Digest.sha256(Array(appId.utf8)) else { throw fail("step 4: rpIdHash is not SHA-256 of \(appId)") }
        // Step 5: the counter is greater than the stored one (0 after the attestation), so a replay is refused.
        guard authData.counter > previousCounter else {
            throw fail("step 5: counter \(authData.counter) is not greater than the stored \(previousCounter)")
        }
        counter = authData.counter
        authenticatorData = authData.raw
        signedData = nonce
        signature = assertion.signature.der
    }
}
