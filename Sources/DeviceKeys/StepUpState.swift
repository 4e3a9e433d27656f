import Crypto
import JSON

/// What the server keeps between `StepUpCeremony.begin` and `finish`: the issued challenge and
/// everything it binds, so a receipt can be written from the state alone.
public struct StepUpState: Sendable, Equatable {
    public let method: StepUpChallenge.Method
    /// The exact `StepUpChallenge` bytes issued: what the device key (or passkey) signs.
    public let challenge: [UInt8]
    public let userId: String
    /// The action's RFC 8785 canonical text, byte for byte as hashed.
    public let action: String
    /// SHA-256 of `action`.
    public let actionHash: [UInt8]
    /// A device key's SPKI DER; for passkeys the canonical JSON of the offered credential ids.
    public let keyBinding: [UInt8]
    /// The device key's id (device-key method).
    public let keyId: String?
    /// What the person is shown, sealed here at issue so the receipt carries exactly what the
    /// challenge (version 2) hashed; nil for a version 1 challenge.
    public let display: StepUpDisplay?
    /// The step-up approves a break-glass approval (SPEC "Quorum approvals" → "Break glass"): its
    /// receipt says `"breakGlass":true`. Known when the challenge is issued, so the receipt written
    /// at verify carries it.
    public let breakGlass: Bool

    public init(method: StepUpChallenge.Method, challenge: [UInt8], userId: String, action: String, actionHash: [UInt8],
                keyBinding: [UInt8], keyId: String?, display: StepUpDisplay? = nil, breakGlass: Bool = false) {
        self.method = method
        self.display = display
        self.breakGlass = breakGlass
        self.challenge = challenge
        self.userId = userId
        self.action = action
        self.actionHash = actionHash
        self.keyBinding = keyBinding
        self.keyId = keyId
    }

    static let ceremony = "step-up"

    /// The one storage encoding (canonical JSON, see `CeremonyStateCoding`).
    public func encoded() -> [UInt8] {
        // Members in RFC 8785 order, so the canonical writer has nothing to sort.
        CeremonyStateCoding.encode(Self.ceremony, [
            ("action", .string(action)),
            ("actionHash", .string(Base64URL.encode(actionHash))),
        ] + (breakGlass ? [("breakGlass", .bool(true))] : []) + [
            ("challenge", .string(Base64URL.encode(challenge))),
        ] + (display.map { [("display", $0.value)] } ?? []) + [
            ("keyBinding", .string(Base64URL.encode(keyBinding))),
            ("keyId", keyId.map { .string($0) } ?? .null),
            ("method", .string(Self.name(method))),
            ("userId", .string(userId)),
        ])
    }

    /// Exactly the bytes `encoded()` wrote, whose challenge was made for this method, user, key
    /// binding and action; anything else is `challenge_invalid`.
    public init(decoding bytes: [UInt8]) throws(DeviceKeyError) {
        // A display (an object holding an array) makes the state three levels deep and up to a few KiB longer.
        let state = try CeremonyStateCoding(bytes, ceremony: Self.ceremony, maxLength: 65_536, maxDepth: 3)
        let methodName = try state.string("method")
        guard let method = Self.method(named: methodName) else { throw CeremonyStateCoding.unreadable }
        self.init(method: method, challenge: try state.bytes("challenge"), userId: try state.string("userId"),
                  action: try state.string("action"), actionHash: try state.bytes("actionHash"),
                  keyBinding: try state.bytes("keyBinding"), keyId: try state.optionalString("keyId"),
                  display: try Self.display(state), breakGlass: try state.absentOrBool("breakGlass") ?? false)
        let parsed: StepUpChallenge
        do { parsed = try StepUpChallenge(parsing: challenge) } catch { throw CeremonyStateCoding.unreadable }
        let actionBytes = Array(action.utf8)
        try CeremonyStateCoding.require(
            parsed.method == method && actionHash == Digest.sha256(actionBytes) && parsed.actionHash == actionHash
                && parsed.userHash == Digest.sha256(Array(userId.utf8)) && parsed.keyHash == Digest.sha256(keyBinding)
                && parsed.displayHash == display?.hash)
        try CeremonyStateCoding.requireCanonical(bytes, encoded())
    }

    /// The stored display, absent for a version 1 challenge.
    static func display(_ state: CeremonyStateCoding) throws(DeviceKeyError) -> StepUpDisplay? {
        guard let value = try? state.member("display") else { return nil }
        do { return try StepUpDisplay(receipt: value) } catch { throw CeremonyStateCoding.unreadable }
    }

    /// The method as SPEC and receipts spell it.
    static func name(_ method: StepUpChallenge.Method) -> String {
        switch method {
        case .deviceKey: "device-key"
        case .passkey: "passkey"
        }
    }

    static func method(named name: String) -> StepUpChallenge.Method? {
        switch name {
        case "device-key": .deviceKey
        case "passkey": .passkey
        default: nil
        }
    }
}
