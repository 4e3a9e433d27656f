import CBOR

/// App Attest authenticator data, decoded here rather than through WebAuthn (DeviceKeys does not
/// depend on WebAuthn). Layout (Apple "Validating apps that connect to your server", the
/// attestation object's authData; WebAuthn L3 §6.1 and §6.5.1):
///
///     rpIdHash 32 | flags 1 | counter 4 (big-endian)
///     [attestation only] aaguid 16 | credentialIdLength 2 (big-endian) | credentialId | COSE_Key (CBOR)
///
/// Parsing checks only structure; the values are checked by `AppAttestVerifier`.
struct AppAttestAuthenticatorData: Sendable {
    static let headerLength = 37

    let raw: [UInt8]
    let rpIdHash: [UInt8]
    let flags: UInt8
    let counter: UInt32
    /// Present in an attestation's authData (bytes after the 37-byte header).
    let attestedCredential: AttestedCredential?

    struct AttestedCredential: Sendable {
        let aaguid: [UInt8]
        let credentialId: [UInt8]
        /// The COSE_Key's uncompressed P-256 point, `04 || x || y`.
        let coseKeyX963: [UInt8]
    }

    /// An attestation's authData: the attested credential data must follow the header, and nothing after it.
    init(attestation bytes: [UInt8]) throws(DeviceKeyError) {
        try self.init(bytes, requireCredential: true)
    }

    /// An assertion's authenticatorData: exactly the 37-byte header. Apple's devices set the AT flag
    /// (0x40) here without attested credential data (the vectors' source asserts this quirk), so the
    /// flag is not read: the length decides.
    init(assertion bytes: [UInt8]) throws(DeviceKeyError) {
        try self.init(bytes, requireCredential: false)
    }

    private init(_ bytes: [UInt8], requireCredential: Bool) throws(DeviceKeyError) {
        func fail(_ why: String) -> DeviceKeyError { DeviceKeyError(.attestationInvalid, "App Attest authenticator data: \(why)") }
        guard bytes.count >= Self.headerLength else { throw fail("shorter than 37 bytes") }
        raw = bytes
        rpIdHash = Array(bytes[0..<32])
        flags = bytes[32]
        counter = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        guard requireCredential else {
            guard bytes.count == Self.headerLength else { throw fail("an assertion's authenticator data is 37 bytes, got \(bytes.count)") }
            attestedCredential = nil
            return
        }
        guard flags & 0x40 != 0 else { throw fail("AT flag is not set") }
        guard flags & 0x80 == 0 else { throw fail("ED flag is set; App Attest carries no extensions") }
        var at = Self.headerLength
        guard bytes.count >= at + 18 else { throw fail("attested credential data is truncated") }
        let aaguid = Array(bytes[at..<at + 16])
        at += 16
        let idLength = Int(bytes[at]) << 8 | Int(bytes[at + 1])
        at += 2
        guard bytes.count >= at + idLength else { throw fail("credentialId is truncated") }
        let credentialId = Array(bytes[at..<at + idLength])
        at += idLength
        let coseKey: CBORValue
        do {
            let (value, used) = try CBORDecoder.decodePrefix(bytes[at...], maxDepth: 2)
            coseKey = value
            at += used
        } catch { throw fail("credential public key is not CBOR (\(error.code.rawValue))") }
        guard at == bytes.count else { throw fail("\(bytes.count - at) bytes after the credential public key") }
        attestedCredential = AttestedCredential(aaguid: aaguid, credentialId: credentialId,
                                                coseKeyX963: try Self.p256Point(coseKey, fail))
    }

    /// RFC 9052 §7 / RFC 9053 §7.1: an EC2 key (kty 2) on P-256 (crv 1); alg, when present, ES256 (-7).
    private static func p256Point(_ key: CBORValue, _ fail: (String) -> DeviceKeyError) throws(DeviceKeyError) -> [UInt8] {
        guard key.mapValue != nil else { throw fail("credential public key is not a COSE_Key map") }
        guard key[int: 1]?.intValue == 2, key[int: -1]?.intValue == 1 else {
            throw fail("credential public key is not an EC2 P-256 COSE_Key")
        }
        if let alg = key[int: 3], alg.intValue != -7 { throw fail("credential public key alg is not ES256") }
        guard let x = key[int: -2]?.bytesValue, let y = key[int: -3]?.bytesValue, x.count == 32, y.count == 32 else {
            throw fail("credential public key coordinates are not 32 bytes each")
        }
        return [0x04] + x + y
    }
}
