import CBOR
import Crypto
import DeviceKeys

/// Builds App Attest objects the way Apple's service does, under a test root: a P-256 root and
/// intermediate (made once), a credCert for `credentialKey` carrying the nonce extension, and authData
/// with the attested credential. Start from a valid object, change one field, expect one refusal.
public struct AppAttestBuilder {
    public init() {}

    public static let productionAAGUID: [UInt8] = Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
    public static let developmentAAGUID: [UInt8] = Array("appattestdevelop".utf8)
    /// 2030-01-01T00:00:00Z, inside every test certificate's validity (2020 → 2039).
    public static let now: Int64 = 1_893_456_000

    public static let rootKey = PrivateKey.generateEC(.p256)
    public static let root = TestCertificate.make(subject: "Test App Attestation Root CA", issuer: "Test App Attestation Root CA",
                                           key: rootKey.publicKey, signer: rootKey, isCA: true)
    public static let intermediateKey = PrivateKey.generateEC(.p256)
    public static let intermediate = TestCertificate.make(subject: "Test App Attestation CA 1", issuer: "Test App Attestation Root CA",
                                                   key: intermediateKey.publicKey, signer: rootKey, isCA: true)

    public enum Nonce { case correct, missing, extensionValue([UInt8]) }

    public var appId = "ABCDE12345.com.example.latchkey"
    public var aaguid = productionAAGUID
    public var counter: UInt32 = 0
    public var credentialKey = PrivateKey.generateEC(.p256)
    public var credentialId: [UInt8]? = nil            // default: keyId
    public var coseKeyX963: [UInt8]? = nil             // default: credentialKey's point
    public var clientDataHash = Digest.sha256(Array("enrolment challenge".utf8))
    public var nonce = Nonce.correct
    public var receipt: [UInt8] = Array("receipt bytes (not verified)".utf8)

    public var keyId: [UInt8] { Digest.sha256(credentialKey.publicKey.x963Point ?? []) }

    public var authData: [UInt8] {
        let point = coseKeyX963 ?? credentialKey.publicKey.x963Point ?? []
        let half = (point.count - 1) / 2
        let cose = CBOREncoder.encode(.map([
            CBORPair(.int(1), .int(2)), CBORPair(.int(3), .int(-7)), CBORPair(.int(-1), .int(1)),
            CBORPair(.int(-2), .bytes(Array(point[1...half]))), CBORPair(.int(-3), .bytes(Array(point[(half + 1)...]))),
        ]))
        let id = credentialId ?? keyId
        return Digest.sha256(Array(appId.utf8)) + [0x40] + withUnsafeBytes(of: counter.bigEndian, Array.init)
            + aaguid + [UInt8(id.count >> 8), UInt8(id.count & 0xFF)] + id + cose
    }

    public func object(authData override: [UInt8]? = nil) -> [UInt8] {
        let authData = override ?? self.authData
        var extensions: [[UInt8]] = []
        switch nonce {
        case .correct:
            let value = TestCertificate.seq(TestCertificate.tlv(0xA1, TestCertificate.tlv(0x04, Digest.sha256(authData + clientDataHash))))
            extensions.append(TestCertificate.extensionField(oid: TestCertificate.nonceOID, value: value))
        case .missing: break
        case .extensionValue(let value): extensions.append(TestCertificate.extensionField(oid: TestCertificate.nonceOID, value: value))
        }
        let credCert = TestCertificate.make(subject: Base64URL.encode(keyId), issuer: "Test App Attestation CA 1",
                                            key: credentialKey.publicKey, signer: Self.intermediateKey, isCA: false,
                                            extensions: extensions)
        return CBOREncoder.encode(.map([
            CBORPair(.text("fmt"), .text("apple-appattest")),
            CBORPair(.text("attStmt"), .map([
                CBORPair(.text("x5c"), .array([.bytes(credCert), .bytes(Self.intermediate)])),
                CBORPair(.text("receipt"), .bytes(receipt)),
            ])),
            CBORPair(.text("authData"), .bytes(authData)),
        ]))
    }

    public func policy(development: Bool = false) throws -> DeviceKeyAttestationPolicy {
        var p = DeviceKeyAttestationPolicy(trustAnchors: [try Certificate(der: Self.root)], now: Self.now)
        p.iosApps = [appId]
        p.appAttestDevelopment = development
        return p
    }

    public func verify(development: Bool = false, object: [UInt8]? = nil) throws -> AttestedDeviceKey {
        try AppAttestVerifier.verifyAttestation(keyId: keyId, attestationObject: object ?? self.object(), clientDataHash: clientDataHash,
                                                policy: try policy(development: development))
    }

    /// An assertion by `credentialKey`: `{signature, authenticatorData}` signed over SHA-256(authenticatorData ‖ clientDataHash).
    public func assertion(counter: UInt32, clientDataHash: [UInt8], authenticatorData override: [UInt8]? = nil,
                   signature transform: ([UInt8]) -> [UInt8] = { $0 }) throws -> [UInt8] {
        let authData = override ?? (Digest.sha256(Array(appId.utf8)) + [0x40] + withUnsafeBytes(of: counter.bigEndian, Array.init))
        let signature = try credentialKey.sign(Digest.sha256(authData + clientDataHash), algorithm: .ecdsa(.sha256))
        return CBOREncoder.encode(.map([CBORPair(.text("signature"), .bytes(transform(signature))),
                                        CBORPair(.text("authenticatorData"), .bytes(authData))]))
    }
}

/// A minimal X.509 v3 DER writer for test chains (RFC 5280 §4.1), signed ECDSA-SHA256.
public enum TestCertificate {
    public static let nonceOID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x63, 0x64, 0x08, 0x02]   // 1.2.840.113635.100.8.2
    public static let ecdsaWithSHA256: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03, 0x02]
    public static let commonName: [UInt8] = [0x55, 0x04, 0x03]
    public static let basicConstraints: [UInt8] = [0x55, 0x1D, 0x13]

    public static func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let n = content.count
        let length: [UInt8] = n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
        return [tag] + length + content
    }
    public static func seq(_ parts: [UInt8]...) -> [UInt8] { tlv(0x30, parts.flatMap { $0 }) }
    public static func name(_ cn: String) -> [UInt8] { seq(tlv(0x31, seq(tlv(0x06, commonName), tlv(0x0C, Array(cn.utf8))))) }
    public static func extensionField(oid: [UInt8], critical: Bool = false, value: [UInt8]) -> [UInt8] {
        seq(tlv(0x06, oid), critical ? tlv(0x01, [0xFF]) : [], tlv(0x04, value))
    }

    public static func make(subject: String, issuer: String, key: PublicKey, signer: PrivateKey, isCA: Bool,
                     extensions: [[UInt8]] = [], serial: UInt8 = 1) -> [UInt8] {
        let algorithm = seq(tlv(0x06, ecdsaWithSHA256))
        var all = extensions
        if isCA { all.append(extensionField(oid: basicConstraints, critical: true, value: seq(tlv(0x01, [0xFF])))) }
        let tbs = seq(tlv(0xA0, tlv(0x02, [2])), tlv(0x02, [serial]), algorithm, name(issuer),
                      seq(tlv(0x17, Array("200101000000Z".utf8)), tlv(0x17, Array("391231235959Z".utf8))),
                      name(subject), key.spkiDER, all.isEmpty ? [] : tlv(0xA3, seq(all.flatMap { $0 })))
        let signature = try! signer.sign(tbs, algorithm: .ecdsa(.sha256))
        return seq(tbs, algorithm, tlv(0x03, [0] + signature))
    }
}
