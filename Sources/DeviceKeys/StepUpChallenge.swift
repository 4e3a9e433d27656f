import Crypto

/// The exact bytes a device key (or a passkey, as its WebAuthn challenge) signs for step-up.
/// Versioned and self-describing, so a stored signature later proves what was approved. Version 1,
/// a step-up without a display:
///
///     offset  size  field
///          0     8  magic "LKSTEPUP"      domain separation: never an enrolment challenge,
///                                         never a login challenge, never another protocol's data
///          8     1  version (1)
///          9     1  method: 1 device key, 2 passkey
///         10    32  nonce: OS CSPRNG
///         42    32  SHA-256(user id, UTF-8)
///         74    32  SHA-256(key binding): a device key's SPKI DER; for passkeys the RFC 8785
///                   JSON {"credentialIds":[…],"method":"passkey","rpId":…}
///        106    32  SHA-256(action, RFC 8785 canonical JSON)
///        138        end
///
/// Version 2, a step-up with a display (SPEC "Evidence" → "The signed challenge"): the same up to
/// offset 106 with version 2, then
///
///        106    32  SHA-256(display, RFC 8785: {"lang","lines","source"})
///        138    32  SHA-256(action, RFC 8785 canonical JSON)
///        170        end
///
/// In both the action hash is the last 32 bytes.
///
/// The server never reconstructs these from client input: it stores them and checks the
/// signature over the stored bytes. `parse` exists for receipts and offline checking.
public struct StepUpChallenge: Sendable, Equatable {
    public enum Method: UInt8, Sendable { case deviceKey = 1, passkey = 2 }

    public static let magic: [UInt8] = Array("LKSTEPUP".utf8)
    /// Without a display.
    public static let version1: UInt8 = 1
    /// With a display.
    public static let version2: UInt8 = 2
    public static let length = 138
    public static let lengthWithDisplay = 170

    public let method: Method
    public let nonce: [UInt8]
    public let userHash: [UInt8]
    public let keyHash: [UInt8]
    /// SHA-256 of the display's RFC 8785 form: version 2 only.
    public let displayHash: [UInt8]?
    public let actionHash: [UInt8]

    /// 1 without a display, 2 with one.
    public var version: UInt8 { displayHash == nil ? Self.version1 : Self.version2 }

    public var bytes: [UInt8] {
        Self.magic + [version, method.rawValue] + nonce + userHash + keyHash + (displayHash ?? []) + actionHash
    }

    /// A fresh challenge: version 2 when `display` is given, else version 1. `random` is injected so
    /// tests can pin it.
    public init(method: Method, userId: String, keyBinding: [UInt8], display: StepUpDisplay? = nil, action: StepUpAction,
                random: (Int) -> [UInt8] = SecureRandom.bytes) {
        self.method = method
        nonce = random(32)
        precondition(nonce.count == 32, "step-up nonce must be 32 bytes")
        userHash = Digest.sha256(Array(userId.utf8))
        keyHash = Digest.sha256(keyBinding)
        displayHash = display?.hash
        actionHash = action.hash
    }

    public init(parsing bytes: [UInt8]) throws(DeviceKeyError) {
        guard bytes.count >= 10, Array(bytes[0..<8]) == Self.magic else { throw .invalid("not a Latchkey step-up challenge") }
        let version = bytes[8]
        guard version == Self.version1 || version == Self.version2 else { throw .invalid("unsupported step-up challenge version \(version)") }
        let expected = version == Self.version1 ? Self.length : Self.lengthWithDisplay
        guard bytes.count == expected else {
            throw .invalid("a version \(version) step-up challenge is \(expected) bytes, not \(bytes.count)")
        }
        guard let m = Method(rawValue: bytes[9]) else { throw .invalid("unknown step-up method \(bytes[9])") }
        method = m
        nonce = Array(bytes[10..<42])
        userHash = Array(bytes[42..<74])
        keyHash = Array(bytes[74..<106])
        displayHash = version == Self.version2 ? Array(bytes[106..<138]) : nil
        actionHash = Array(bytes[(expected - 32)..<expected])
    }

    /// Whether these bytes were made for this user, key binding, display (none for version 1) and action.
    public func binds(userId: String, keyBinding: [UInt8], display: StepUpDisplay? = nil, action: StepUpAction) -> Bool {
        let displayBound: Bool = switch (displayHash, display) {
        case (nil, nil): true
        case (let signed?, let shown?): constantTimeEquals(signed, shown.hash)
        default: false
        }
        return constantTimeEquals(userHash, Digest.sha256(Array(userId.utf8))) && constantTimeEquals(keyHash, Digest.sha256(keyBinding))
            && displayBound && constantTimeEquals(actionHash, action.hash)
    }
}

/// Proof-of-possession challenge for enrolling a device key (`POST /v1/device-keys/challenges`);
/// an Android app also passes it to `setAttestationChallenge`. Its own magic keeps an enrolment
/// signature from ever passing as a step-up approval, and the other way round.
///
///     "LKENROLL" | version 1 | 32 random bytes | SHA-256(user id)      (73 bytes)
public struct EnrolmentChallenge: Sendable, Equatable {
    public static let magic: [UInt8] = Array("LKENROLL".utf8)
    public static let version: UInt8 = 1
    public static let length = 73

    public let nonce: [UInt8]
    public let userHash: [UInt8]
    public var bytes: [UInt8] { Self.magic + [Self.version] + nonce + userHash }

    public init(userId: String, random: (Int) -> [UInt8] = SecureRandom.bytes) {
        nonce = random(32)
        precondition(nonce.count == 32, "enrolment nonce must be 32 bytes")
        userHash = Digest.sha256(Array(userId.utf8))
    }
}
