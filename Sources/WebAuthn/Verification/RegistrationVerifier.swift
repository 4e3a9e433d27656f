import CBOR
import Crypto
import JSON

/// A registration that passed every check of WebAuthn L3 §7.1: safe to store.
public struct VerifiedRegistration: Sendable {
    public let credentialId: [UInt8]
    /// COSE_Key bytes as the authenticator sent them; stored and parsed again at each login.
    public let publicKeyBytes: [UInt8]
    public let algorithm: COSEAlgorithm
    public let signCount: UInt32
    public let userVerified: Bool
    public let backupEligible: Bool
    public let backedUp: Bool
    public let aaguid: [UInt8]
    public let format: String
    public let attestationType: AttestationType
    public let trustPath: [Certificate]
    public let transports: [String]
    public let origin: String
    /// The metadata statement that vouched for this registration; nil when metadata is off or
    /// (self / none attestation) no entry matched.
    public let metadata: MetadataMatch?
}

/// A registration response parsed into its parts but not yet verified.
public struct ParsedRegistration: Sendable {
    public let response: RegistrationResponse
    public let clientData: CollectedClientData
    public let attestationObject: AttestationObject

    public init(_ response: RegistrationResponse) throws(WebAuthnError) {
        self.response = response
        clientData = try CollectedClientData(raw: response.clientDataJSON)
        attestationObject = try AttestationObject(bytes: response.attestationObject)
    }

    public init(bytes: [UInt8]) throws(WebAuthnError) { try self.init(RegistrationResponse(bytes: bytes)) }
}

public enum RegistrationVerifier {
    /// WebAuthn L3 §7.1 "Registering a New Credential", steps 5-25 (step 26, "not yet registered",
    /// is the storage layer's).
    public static func verify(_ parsed: ParsedRegistration, expectedChallenge: [UInt8], policy: VerificationPolicy,
                              trace: VerificationTrace? = nil) throws(WebAuthnError) -> VerifiedRegistration {
        let c = parsed.clientData
        let authData = parsed.attestationObject.authenticatorData
        trace.decoded("clientData", clientDataJSON(c))
        trace.decoded("authenticatorData", authenticatorDataJSON(authData))
        trace.decoded("attestation", ["fmt": .string(parsed.attestationObject.format)])

        try CeremonyChecks.clientData(c, type: .create, expectedChallenge: expectedChallenge, policy: policy, trace: trace)
        try CeremonyChecks.authenticatorData(authData, policy: policy, trace: trace,
                                             userPresenceWaiver: policy.acceptRegistrationWithoutUserPresence
                                                 ? "accepted for a conditional create (§5.1.3)" : nil)

        // Attested credential data must be present (AT flag) in a registration.
        guard let credential = authData.attestedCredentialData else {
            try trace.fail("authData.attestedCredentialData", .invalid("authenticatorData has no attested credential data"))
        }
        trace.pass("authData.attestedCredentialData")
        // Credential id in authData must be the one the client reports (rawId).
        try trace.require("credential.rawIdMatches", credential.credentialId == parsed.response.rawId,
                          .invalid("rawId does not match the credential id in authenticatorData"))
        // Step 19: the key's algorithm is one the options offered.
        try trace.require("credential.algorithmOffered", policy.allowedAlgorithms.contains(credential.publicKey.algorithm),
                          WebAuthnError(.algorithmUnsupported, "\(credential.publicKey.algorithm.name) was not offered"))

        // Steps 21-22: the attestation statement format and its verification procedure.
        let format = parsed.attestationObject.format
        guard let verifier = AttestationFormats.named(format) else {
            try trace.fail("attestation.format", .attestation("attestation format \"\(format)\" is not supported"))
        }
        trace.pass("attestation.format", format)
        let now = policy.clock()
        let input = AttestationInput(format: format, statement: parsed.attestationObject.statement,
                                     authenticatorData: authData, credential: credential, clientDataHash: c.hash,
                                     policy: policy, now: now)
        let result = try verifier.verify(input, trace: trace)
        trace.pass("attestation.statement", result.type.rawValue)

        // Steps 23-24: trust anchors, when configured, must anchor the trust path at `now`.
        if !policy.trustAnchors.isEmpty, let leaf = result.trustPath.first {
            do {
                try CertificatePath.validate(leaf: leaf, intermediates: Array(result.trustPath.dropFirst()),
                                             anchors: policy.trustAnchors, at: now)
                trace.pass("attestation.trustPath")
            } catch {
                try trace.fail("attestation.trustPath", .attestation(error.reason))
            }
        }
        // SPEC "Metadata rules in detail": with metadata configured, its statement must vouch for the attestation.
        let metadata = try MetadataTrust.apply(policy.metadata, format: format, result: result, credential: credential,
                                               now: now, trace: trace)
        trace.decoded("credential", [
            "id": .string(Base64URL.encode(credential.credentialId)),
            "aaguid": .string(formatUUID(credential.aaguid)),
            "alg": .number(Double(credential.publicKey.algorithm.rawValue)),
            "publicKey": .string(Base64URL.encode(credential.publicKeyBytes)),
            "attestationType": .string(result.type.rawValue),
            "trustPathLength": .number(Double(result.trustPath.count)),
        ])
        return VerifiedRegistration(
            credentialId: credential.credentialId, publicKeyBytes: credential.publicKeyBytes,
            algorithm: credential.publicKey.algorithm, signCount: authData.signCount,
            userVerified: authData.userVerified, backupEligible: authData.backupEligible, backedUp: authData.backedUp,
            aaguid: credential.aaguid, format: format, attestationType: result.type, trustPath: result.trustPath,
            transports: parsed.response.transports, origin: c.origin, metadata: metadata)
    }
}

/// Checks §7.1 and §7.2 share, in SPEC's order: challenge → type → origin → rpIdHash → UP → UV.
enum CeremonyChecks {
    static func clientData(_ c: CollectedClientData, type: CollectedClientData.CeremonyType, expectedChallenge: [UInt8],
                           policy: VerificationPolicy, trace: VerificationTrace?) throws(WebAuthnError) {
        // §7.1 step 8 / §7.2 step 12.
        try trace.require("clientData.challenge", constantTimeEquals(c.challenge, expectedChallenge),
                          WebAuthnError(.challengeInvalid, "challenge does not match"))
        // §7.1 step 7 / §7.2 step 11.
        try trace.require("clientData.type", c.type == type.rawValue,
                          .invalid("clientData.type is \"\(c.type)\", expected \"\(type.rawValue)\""))
        // §7.1 step 9 / §7.2 step 13: exact origin allowlist.
        // The reason names the origin received (the client's own data, bounded); `inspect` (a
        // trace) also lists the allowed ones, which a server's answer to a client never does.
        try trace.require("clientData.origin", policy.origins.allows(c.origin),
                          WebAuthnError(.originNotAllowed, "origin \"\(c.origin.prefix(200))\" is not allowed"
                                        + (trace == nil ? "" : "; allowed: " + (policy.origins.allowed.isEmpty ? "none (pass --origin)"
                                            : policy.origins.allowed.sorted().joined(separator: ", ")))))
        // §7.1 step 10 / §7.2 step 14: cross-origin iframes only where the RP embeds itself. With a
        // top-origin allowlist (LATCHKEY_EMBEDDING_ORIGINS) the client must name the top origin and
        // it must be listed: a cross-origin ceremony without topOrigin has nothing to allow.
        if c.crossOrigin || c.topOrigin != nil {
            let allowed: Bool
            switch policy.crossOrigin {
            case .deny: allowed = false
            case .allow(topOrigins: nil): allowed = true  // inspect's --allow-cross-origin alone: any top origin
            case .allow(topOrigins: let tops?): allowed = c.topOrigin.map(tops.contains) ?? false
            }
            try trace.require("clientData.crossOrigin", allowed, WebAuthnError(.originNotAllowed, "cross-origin ceremony is not allowed"))
        } else {
            trace.pass("clientData.crossOrigin")
        }
    }

    static func authenticatorData(_ a: AuthenticatorData, policy: VerificationPolicy, trace: VerificationTrace?,
                                  alternateRpIdHash: [UInt8]? = nil, userPresenceWaiver: String? = nil) throws(WebAuthnError) {
        // §7.1 step 13 / §7.2 step 15 (an AppID hash only when the client says it used the appid extension).
        let rpIdOK = constantTimeEquals(a.rpIdHash, policy.rpIdHash) || alternateRpIdHash.map { constantTimeEquals(a.rpIdHash, $0) } == true
        try trace.require("authData.rpIdHash", rpIdOK, WebAuthnError(.rpIdMismatch, "rpIdHash is not SHA-256 of the rpId"))
        // §7.1 step 14 / §7.2 step 16; waived only for a conditional create (§5.1.3: the user was not
        // asked) and, for assertions, under the FIDO conformance profile.
        if let waiver = userPresenceWaiver, !a.userPresent {
            trace?.record("authData.userPresent", true, "not set: " + waiver)
        } else {
            try trace.require("authData.userPresent", a.userPresent, WebAuthnError(.userPresenceRequired, "user presence flag is not set"))
        }
        // §7.1 step 15 / §7.2 step 17.
        if policy.userVerification == .required {
            try trace.require("authData.userVerified", a.userVerified,
                              WebAuthnError(.userVerificationRequired, "user verification flag is not set"))
        }
        // §7.1 step 16 / §7.2 step 18: BS may only be set when BE is.
        try trace.require("authData.backupFlags", a.backupEligible || !a.backedUp,
                          .invalid("backup state set on a credential that is not backup eligible"))
    }
}

/// An AAGUID (or any 16 bytes) in the usual 8-4-4-4-12 lower-case form; other lengths as plain hex.
public func formatUUID(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(36)
    for (i, b) in bytes.enumerated() {
        if bytes.count == 16, [4, 6, 8, 10].contains(i) { out.append(UInt8(ascii: "-")) }
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

func clientDataJSON(_ c: CollectedClientData) -> JSONValue {
    var members: [(key: String, value: JSONValue)] = [
        ("type", .string(c.type)), ("challenge", .string(Base64URL.encode(c.challenge))),
        ("origin", .string(c.origin)), ("crossOrigin", .bool(c.crossOrigin)),
    ]
    if let top = c.topOrigin { members.append(("topOrigin", .string(top))) }
    if let tb = c.tokenBindingStatus { members.append(("tokenBinding", .string(tb))) }
    members.append(("hash", .string(Base64URL.encode(c.hash))))
    return .object(members)
}

func authenticatorDataJSON(_ a: AuthenticatorData) -> JSONValue {
    var members: [(key: String, value: JSONValue)] = [
        ("rpIdHash", .string(Base64URL.encode(a.rpIdHash))),
        ("flags", .object([
            ("up", .bool(a.userPresent)), ("uv", .bool(a.userVerified)), ("be", .bool(a.backupEligible)),
            ("bs", .bool(a.backedUp)), ("at", .bool(a.flags.contains(.attestedCredentialData))),
            ("ed", .bool(a.flags.contains(.extensionData))),
        ])),
        ("signCount", .number(Double(a.signCount))),
    ]
    if let cred = a.attestedCredentialData {
        members.append(("aaguid", .string(formatUUID(cred.aaguid))))
        members.append(("credentialId", .string(Base64URL.encode(cred.credentialId))))
        members.append(("credentialPublicKey", .object([
            ("alg", .number(Double(cred.publicKey.algorithm.rawValue))), ("algName", .string(cred.publicKey.algorithm.name)),
        ])))
    }
    if a.extensions != nil { members.append(("extensions", .bool(true))) }
    return .object(members)
}
