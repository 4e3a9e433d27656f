import Foundation

/// The action a user approves ("pay 200.00 EUR to X"): a JSON object, bound to a step-up challenge
/// by `actionHash` = base64url(SHA-256(RFC 8785 canonical JSON)). The server computes the same hash
/// from the action it receives (`DeviceKeys.StepUpAction`); this type applies the same rules, so an
/// action this accepts, the server accepts, with the same hash.
///
/// Put amounts in strings: RFC 8785 numbers are IEEE doubles, so `200.00`, `2e2` and `200` are one
/// action, and `0.1 + 0.2` is not `0.3`.
public struct StepUpAction: Sendable, Hashable {
    public let json: LatchkeyJSON
    /// The RFC 8785 bytes the hash covers.
    public let canonical: Data
    /// SHA-256 of `canonical`.
    public let hash: Data
    /// `hash` as base64url: what the server returns as `actionHash` and puts in the token's `action_hash`.
    public var hashBase64URL: String { Base64URL.encode(hash) }

    /// The server's limit on an action's canonical length.
    public static let maxCanonicalLength = 4096

    public init(_ json: LatchkeyJSON) throws(LatchkeyError) {
        guard case .object(let members) = json else { throw LatchkeyError(.invalidJSON, "an action must be a JSON object") }
        guard !members.isEmpty else { throw LatchkeyError(.invalidJSON, "an action must not be empty") }
        guard Self.allFinite(json) else { throw LatchkeyError(.invalidJSON, "an action holds a number that is not finite") }
        let bytes = json.canonicalized()
        guard bytes.count <= Self.maxCanonicalLength else {
            throw LatchkeyError(.invalidJSON, "an action is at most \(Self.maxCanonicalLength) bytes in canonical form")
        }
        self.json = json
        canonical = Data(bytes)
        hash = SHA256Digest.hash(bytes)
    }

    /// An action given as JSON text (parsed strictly, as the server parses it).
    public init(jsonText: String) throws(LatchkeyError) { try self.init(LatchkeyJSON(parsing: jsonText)) }

    /// An action an app models as an `Encodable` struct.
    public init(encoding value: some Encodable) throws(LatchkeyError) { try self.init(LatchkeyJSON(encoding: value)) }

    static func allFinite(_ v: LatchkeyJSON) -> Bool {
        switch v {
        case .number(let d): d.isFinite
        case .array(let a): a.allSatisfy(allFinite)
        case .object(let o): o.allSatisfy { allFinite($0.value) }
        default: true
        }
    }

    public static func == (a: StepUpAction, b: StepUpAction) -> Bool { a.hash == b.hash }
    public func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}

/// The changes Latchkey itself gates behind a step-up (docs/step-up.md, docs/assurance.md): built here
/// exactly as the server builds them.
extension StepUpAction {
    /// `{"type":"latchkey.device-key.enrol","deviceId":…}`: enrolling or replacing this device's key.
    public static func deviceKeyEnrolment(deviceId: String) throws(LatchkeyError) -> StepUpAction {
        try StepUpAction(["type": "latchkey.device-key.enrol", "deviceId": .string(deviceId)])
    }

    /// `{"type":"latchkey.passkey.add"}`: registration options for another passkey on a signed-in account.
    public static let passkeyAddition = try! StepUpAction(["type": "latchkey.passkey.add"])

    /// `{"type":"latchkey.passkey.revoke","credentialId":…}`: revoking that passkey (its id, base64url).
    public static func passkeyRevocation(credentialId: String) throws(LatchkeyError) -> StepUpAction {
        try StepUpAction(["type": "latchkey.passkey.revoke", "credentialId": .string(credentialId)])
    }

    /// `{"type":"latchkey.recovery-codes.create"}`: a new set of recovery codes.
    public static let recoveryCodesCreation = try! StepUpAction(["type": "latchkey.recovery-codes.create"])

    /// `{"type":"latchkey.email.change","email":…}`: setting the verified address to `email`, exactly as sent.
    public static func emailChange(email: String) throws(LatchkeyError) -> StepUpAction {
        try StepUpAction(["type": "latchkey.email.change", "email": .string(email)])
    }
}
