import Crypto
import DeviceKeys
import JSON

/// A step-up's receipt (SPEC "Evidence"): the JSON document a third party verifies without trusting
/// Latchkey's database, stored in RFC 8785 canonical form with the step-up, and committed to by
/// SHA-256 of exactly those bytes (the leaf of the transparency log):
///
///     {"v":1,"id","iss","sub","approvedAt","action","actionHash","display":{…}|null,
///      "approver":{"kind","id","publicKey","attestation":{"format","trust"}|null},"evidence":{…},
///      "breakGlass"?:true}
///
/// Pure: every value comes from the step-up's state and its verified answer. `ReceiptChecker`
/// checks one.
public struct ReceiptDocument: Sendable {
    public enum ApproverKind: String, Sendable { case passkey, deviceKey = "device-key" }

    /// How far the approver's attestation was checked: to a trust anchor, self attestation, or not at all.
    public enum Trust: String, Sendable { case verifiedChain = "verified-chain", `self`, none }

    public struct Attestation: Sendable, Equatable {
        public let format: String
        public let trust: Trust
        public init(format: String, trust: Trust) {
            self.format = format
            self.trust = trust
        }
    }

    /// The raw signature evidence.
    public enum Evidence: Sendable {
        /// A WebAuthn assertion over the challenge: the signature covers authenticatorData ‖ SHA-256(clientDataJSON).
        case passkey(clientDataJSON: [UInt8], authenticatorData: [UInt8], signature: [UInt8], rpId: String)
        /// A device key's DER ECDSA-SHA256 signature over the challenge bytes, or for an App Attest key
        /// (`appAttest`) over SHA-256(authenticatorData ‖ clientDataHash), clientDataHash = SHA-256(challenge).
        case deviceKey(challenge: [UInt8], signature: [UInt8], appAttest: (authenticatorData: [UInt8], clientDataHash: [UInt8])?)
    }

    public let id: String
    public let issuer: String
    public let subject: String
    /// Seconds since 1970; written RFC 3339, UTC, whole seconds.
    public let approvedAt: Int64
    public let action: StepUpAction
    public let display: StepUpDisplay?
    public let approverKind: ApproverKind
    /// The device key's id, or the passkey's credential id (base64url).
    public let approverId: String
    /// COSE_Key bytes for a passkey, SPKI DER for a device key.
    public let approverPublicKey: [UInt8]
    public let attestation: Attestation?
    public let evidence: Evidence
    /// The challenge's version, its 32 random bytes and the exact key-binding bytes it hashed.
    public let challengeVersion: UInt8
    public let nonce: [UInt8]
    public let keyBinding: [UInt8]
    /// The step-up approved a break-glass approval: the document says `"breakGlass":true` (absent otherwise).
    public let breakGlass: Bool

    public init(id: String, issuer: String, subject: String, approvedAt: Int64, action: StepUpAction, display: StepUpDisplay?,
                approverKind: ApproverKind, approverId: String, approverPublicKey: [UInt8], attestation: Attestation?,
                evidence: Evidence, challenge: StepUpChallenge, keyBinding: [UInt8], breakGlass: Bool = false) {
        self.breakGlass = breakGlass
        self.id = id
        self.issuer = issuer
        self.subject = subject
        self.approvedAt = approvedAt
        self.action = action
        self.display = display
        self.approverKind = approverKind
        self.approverId = approverId
        self.approverPublicKey = approverPublicKey
        self.attestation = attestation
        self.evidence = evidence
        challengeVersion = challenge.version
        nonce = challenge.nonce
        self.keyBinding = keyBinding
    }

    /// The document as a JSON value (members in any order: `bytes` canonicalizes).
    public var value: JSONValue {
        let b64 = Base64URL.encode
        var evidenceMembers: [(key: String, value: JSONValue)]
        switch evidence {
        case .passkey(let clientDataJSON, let authenticatorData, let signature, let rpId):
            evidenceMembers = [("clientDataJSON", .string(b64(clientDataJSON))), ("authenticatorData", .string(b64(authenticatorData))),
                               ("signature", .string(b64(signature))), ("rpId", .string(rpId))]
        case .deviceKey(let challenge, let signature, let appAttest):
            evidenceMembers = [("challenge", .string(b64(challenge))), ("signature", .string(b64(signature)))]
            if let appAttest {
                evidenceMembers += [("authenticatorData", .string(b64(appAttest.authenticatorData))),
                                    ("clientDataHash", .string(b64(appAttest.clientDataHash)))]
            }
        }
        evidenceMembers += [("challengeVersion", .number(Double(challengeVersion))), ("nonce", .string(b64(nonce))),
                            ("keyBinding", .string(b64(keyBinding)))]
        let attestationValue: JSONValue = attestation.map {
            .object([("format", .string($0.format)), ("trust", .string($0.trust.rawValue))])
        } ?? .null
        return .object([
            ("v", 1), ("id", .string(id)), ("iss", .string(issuer)), ("sub", .string(subject)),
            ("approvedAt", .string(RFC3339.string(unixSeconds: approvedAt))),
            ("action", action.value), ("actionHash", .string(b64(action.hash))),
            ("display", display?.value ?? .null),
            ("approver", .object([("kind", .string(approverKind.rawValue)), ("id", .string(approverId)),
                                  ("publicKey", .string(b64(approverPublicKey))), ("attestation", attestationValue)])),
            ("evidence", .object(evidenceMembers)),
        ] + (breakGlass ? [("breakGlass", .bool(true))] : []))
    }

    /// The RFC 8785 bytes: what is stored, handed out and committed to.
    public var bytes: [UInt8] { value.canonicalized() }

    /// SHA-256 of `bytes`: the receipt's leaf in the transparency log.
    public static func commitment(of bytes: [UInt8]) -> [UInt8] { Digest.sha256(bytes) }
}
