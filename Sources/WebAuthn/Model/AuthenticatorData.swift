import CBOR
import Crypto

/// Authenticator data (WebAuthn L3 §6.1): every length checked, nothing trusted.
public struct AuthenticatorData: Sendable {
    public struct Flags: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let userPresent = Flags(rawValue: 0x01)
        public static let userVerified = Flags(rawValue: 0x04)
        public static let backupEligible = Flags(rawValue: 0x08)
        public static let backedUp = Flags(rawValue: 0x10)
        public static let attestedCredentialData = Flags(rawValue: 0x40)
        public static let extensionData = Flags(rawValue: 0x80)
    }

    /// §6.5.1 attested credential data.
    public struct AttestedCredentialData: Sendable {
        public let aaguid: [UInt8]
        public let credentialId: [UInt8]
        /// The COSE_Key exactly as the authenticator encoded it.
        public let publicKeyBytes: [UInt8]
        public let publicKey: COSEKey
    }

    public static let maxCredentialIdLength = 1023

    public let raw: [UInt8]
    public let rpIdHash: [UInt8]
    public let flags: Flags
    public let signCount: UInt32
    public let attestedCredentialData: AttestedCredentialData?
    public let extensions: CBORValue?

    public var userPresent: Bool { flags.contains(.userPresent) }
    public var userVerified: Bool { flags.contains(.userVerified) }
    public var backupEligible: Bool { flags.contains(.backupEligible) }
    public var backedUp: Bool { flags.contains(.backedUp) }

    public init(_ raw: [UInt8]) throws(WebAuthnError) {
        guard raw.count >= 37 else { throw .invalid("authenticatorData is shorter than 37 bytes") }
        guard raw.count <= 65_536 else { throw .invalid("authenticatorData is too large") }
        self.raw = raw
        rpIdHash = Array(raw[0..<32])
        flags = Flags(rawValue: raw[32])
        signCount = UInt32(raw[33]) << 24 | UInt32(raw[34]) << 16 | UInt32(raw[35]) << 8 | UInt32(raw[36])
        var offset = 37
        if flags.contains(.attestedCredentialData) {
            guard raw.count >= offset + 18 else { throw .invalid("attested credential data is truncated") }
            let aaguid = Array(raw[offset..<offset + 16])
            let idLength = Int(raw[offset + 16]) << 8 | Int(raw[offset + 17])
            offset += 18
            guard idLength >= 1, idLength <= Self.maxCredentialIdLength else {
                throw .invalid("credential id length \(idLength) is outside 1…1023")  // §6.5.1, §7.1 step 25
            }
            guard raw.count >= offset + idLength else { throw .invalid("credential id is truncated") }
            let credentialId = Array(raw[offset..<offset + idLength])
            offset += idLength
            let (keyValue, used): (CBORValue, Int)
            do { (keyValue, used) = try CBORDecoder.decodePrefix(raw[offset...]) } catch {
                throw .invalid("credential public key: \(error.reason)")
            }
            let keyBytes = Array(raw[offset..<offset + used])
            offset += used
            let key = try COSEKey(keyValue)
            attestedCredentialData = AttestedCredentialData(aaguid: aaguid, credentialId: credentialId,
                                                            publicKeyBytes: keyBytes, publicKey: key)
        } else {
            attestedCredentialData = nil
        }
        if flags.contains(.extensionData) {
            guard offset < raw.count else { throw .invalid("ED flag set but no extensions follow") }
            let value: CBORValue
            do { value = try CBORDecoder.decode(Array(raw[offset...])) } catch { throw .invalid("extensions: \(error.reason)") }
            guard case .map = value else { throw .invalid("extensions are not a CBOR map") }
            extensions = value
            offset = raw.count
        } else {
            extensions = nil
        }
        guard offset == raw.count else { throw .invalid("\(raw.count - offset) unexpected bytes after authenticatorData") }
    }
}
