import Crypto
import JSON

/// What the relying party stored about the credential being used.
public struct StoredCredential: Sendable {
    public let publicKey: COSEKey
    public let signCount: UInt32
    public let backupEligible: Bool?

    public init(publicKey: COSEKey, signCount: UInt32, backupEligible: Bool? = nil) {
        self.publicKey = publicKey
        self.signCount = signCount
        self.backupEligible = backupEligible
    }
}

/// An assertion that passed WebAuthn L3 §7.2.
public struct VerifiedAuthentication: Sendable {
    public let credentialId: [UInt8]
    public let newSignCount: UInt32
    public let userVerified: Bool
    public let backupEligible: Bool
    public let backedUp: Bool
    /// BE differs from what was stored: recorded as a signal, never a refusal (SPEC).
    public let backupEligibilityChanged: Bool
    /// The counter went backwards under `signCountPolicy == .flag`: possible clone, still allowed.
    public let cloneWarning: Bool
    public let userHandle: [UInt8]?
    public let origin: String
}

public struct ParsedAuthentication: Sendable {
    public let response: AuthenticationResponse
    public let clientData: CollectedClientData
    public let authenticatorData: AuthenticatorData

    public init(_ response: AuthenticationResponse) throws(WebAuthnError) {
        self.response = response
        clientData = try CollectedClientData(raw: response.clientDataJSON)
        authenticatorData = try AuthenticatorData(response.authenticatorData)
    }

    public init(bytes: [UInt8]) throws(WebAuthnError) { try self.init(AuthenticationResponse(bytes: bytes)) }
}

/// An assertion whose ceremony checks passed (§7.2 steps 11-17: type, challenge, origin,
/// rpIdHash, UP, UV, backup flags); only the credential-dependent steps remain.
public struct CeremonyCheckedAuthentication: Sendable {
    public let parsed: ParsedAuthentication
    let policy: VerificationPolicy
}

public enum AuthenticationVerifier {
    /// The checks that need no stored credential (§7.2 steps 11-17), so a server can run them in
    /// SPEC's order before it looks the credential up.
    public static func checkCeremony(_ parsed: ParsedAuthentication, expectedChallenge: [UInt8], policy: VerificationPolicy,
                                     trace: VerificationTrace? = nil) throws(WebAuthnError) -> CeremonyCheckedAuthentication {
        try CeremonyChecks.clientData(parsed.clientData, type: .get, expectedChallenge: expectedChallenge, policy: policy, trace: trace)
        // FIDO AppID extension: the client reports `appid: true` when it signed for the AppID.
        var appIdHash: [UInt8]? = nil
        if let appId = policy.appId, parsed.response.clientExtensionResults["appid"]?.boolValue == true {
            appIdHash = Digest.sha256(Array(appId.utf8))
        }
        try CeremonyChecks.authenticatorData(parsed.authenticatorData, policy: policy, trace: trace, alternateRpIdHash: appIdHash,
                                             userPresenceWaiver: policy.acceptAssertionsWithoutUserPresence
                                                 ? "accepted under the FIDO conformance profile" : nil)
        return CeremonyCheckedAuthentication(parsed: parsed, policy: policy)
    }

    /// WebAuthn L3 §7.2 "Verifying an Authentication Assertion", steps 11-22 (steps 5-7, the
    /// credential lookup and user handle, belong to the caller that found `stored`).
    public static func verify(_ parsed: ParsedAuthentication, expectedChallenge: [UInt8], stored: StoredCredential,
                              policy: VerificationPolicy, trace: VerificationTrace? = nil) throws(WebAuthnError) -> VerifiedAuthentication {
        trace.decoded("clientData", clientDataJSON(parsed.clientData))
        trace.decoded("authenticatorData", authenticatorDataJSON(parsed.authenticatorData))
        let checked = try checkCeremony(parsed, expectedChallenge: expectedChallenge, policy: policy, trace: trace)
        return try verify(checked, stored: stored, trace: trace)
    }

    /// §7.2 steps 20-21 for an assertion whose ceremony checks already passed.
    public static func verify(_ checked: CeremonyCheckedAuthentication, stored: StoredCredential,
                              trace: VerificationTrace? = nil) throws(WebAuthnError) -> VerifiedAuthentication {
        let parsed = checked.parsed
        let policy = checked.policy
        let c = parsed.clientData
        let a = parsed.authenticatorData

        // Step 20: signature over authenticatorData || SHA-256(clientDataJSON) with the stored key
        // (a COSEKey only exists for an algorithm Latchkey verifies).
        let signed = a.raw + c.hash
        try trace.require("signature", stored.publicKey.verify(signature: parsed.response.signature, over: signed),
                          WebAuthnError(.signatureInvalid, "signature does not verify"))

        // Step 21: the signature counter. Compare only when either side is non-zero.
        var cloneWarning = false
        if a.signCount != 0 || stored.signCount != 0 {
            if a.signCount <= stored.signCount {
                if policy.signCountPolicy == .reject {
                    try trace.fail("signCount", WebAuthnError(.signCountRegression,
                        "sign count \(a.signCount) is not greater than the stored \(stored.signCount)"))
                }
                cloneWarning = true
                trace?.record("signCount", true, "regressed: flagged as a possible clone")
            } else {
                trace.pass("signCount")
            }
        } else {
            trace.pass("signCount", "zero (counter not used)")
        }
        let beChanged = stored.backupEligible.map { $0 != a.backupEligible } ?? false
        if beChanged { trace?.record("backupEligibility", true, "changed since registration (recorded, not refused)") }
        return VerifiedAuthentication(
            credentialId: parsed.response.rawId, newSignCount: a.signCount, userVerified: a.userVerified,
            backupEligible: a.backupEligible, backedUp: a.backedUp, backupEligibilityChanged: beChanged,
            cloneWarning: cloneWarning, userHandle: parsed.response.userHandle, origin: c.origin)
    }
}
