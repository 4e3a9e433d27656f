import Crypto

/// A hardware-bound P-256 public key as a phone sends it, parsed and checked: on the curve,
/// uncompressed, P-256 only. Two encodings are accepted (SPEC "Rules"):
/// - SubjectPublicKeyInfo DER — Android `KeyPair.public.encoded`;
/// - the 65-byte X9.63 point `04 || x || y` — iOS `SecKeyCopyExternalRepresentation`.
/// Both parse to the same key; `spkiDER` is the one stored form.
public struct DevicePublicKey: Sendable {
    public let key: PublicKey
    /// Canonical SubjectPublicKeyInfo DER (what `openssl pkey -pubin -inform DER` reads).
    public let spkiDER: [UInt8]
    /// Uncompressed point, 65 bytes.
    public let x963: [UInt8]

    public enum Encoding: String, Sendable { case spki, x963 }
    public let encoding: Encoding

    /// P-256 SubjectPublicKeyInfo is 91 bytes; anything near a few hundred bytes is not one.
    static let maxEncodedLength = 512

    public init(bytes: [UInt8]) throws(DeviceKeyError) {
        guard !bytes.isEmpty else { throw .invalid("publicKey is empty") }
        guard bytes.count <= Self.maxEncodedLength else { throw .invalid("publicKey is too long for a P-256 key") }
        switch bytes[0] {
        case 0x04 where bytes.count == 65:
            do { key = try PublicKey.ec(curve: .p256, x963: bytes) } catch {
                throw .invalid("publicKey is not a point on P-256")
            }
            encoding = .x963
        case 0x02, 0x03:
            throw .invalid("publicKey is a compressed point; send the 65-byte uncompressed X9.63 form or SPKI DER")
        case 0x04:
            throw .invalid("publicKey: an X9.63 P-256 point is 65 bytes (04 || x || y), got \(bytes.count)")
        case 0x30:
            let parsed: PublicKey
            do { parsed = try PublicKey(spkiDER: bytes) } catch {
                throw .invalid("publicKey is not a valid SubjectPublicKeyInfo (or its EC point is not on the curve)")
            }
            switch parsed.type {
            case .ec(.p256): break
            case .ec(let curve): throw .invalid("publicKey is on \(curve.rawValue); device keys must be P-256")
            case .rsa: throw .invalid("publicKey is an RSA key; device keys must be EC P-256")
            case .ed25519: throw .invalid("publicKey is an Ed25519 key; device keys must be EC P-256")
            case .other: throw .invalid("publicKey is not an EC P-256 key")
            }
            // SPKI may carry a compressed point; the stored form is always uncompressed.
            guard Self.spkiPointIsUncompressed(bytes) else {
                throw .invalid("publicKey holds a compressed point; send an uncompressed P-256 key")
            }
            key = parsed
            encoding = .spki
        default:
            throw .invalid("publicKey is neither SPKI DER nor a 65-byte X9.63 point")
        }
        guard let point = key.x963Point, point.count == 65 else { throw .invalid("publicKey is not an uncompressed P-256 point") }
        x963 = point
        spkiDER = key.spkiDER
    }

    /// The BIT STRING of a SubjectPublicKeyInfo starts with an unused-bits byte, then the point.
    static func spkiPointIsUncompressed(_ der: [UInt8]) -> Bool {
        guard let spki = try? DERNode.parse(der), let parts = try? spki.children, parts.count == 2,
              parts[1].isUniversal(DERNode.bitString) else { return false }
        let bits = Array(parts[1].content)
        return bits.count == 66 && bits[0] == 0 && bits[1] == 0x04
    }

    /// PEM of the SPKI, for `openssl dgst -verify`.
    public var pem: String { PEM.encode(spkiDER, label: "PUBLIC KEY") }

    /// A parsed DER signature by this key over `message` (SHA-256 inside, as
    /// `.ecdsaSignatureMessageX962SHA256` and `SHA256withECDSA` compute it).
    public func isValidSignature(_ signature: DERSignature, over message: [UInt8]) -> Bool {
        key.verify(signature: signature.der, message: message, algorithm: .ecdsa(.sha256))
    }
}

/// An ECDSA signature in X9.62 DER (`SEQUENCE { r INTEGER, s INTEGER }`), structurally checked.
/// SPEC ("a present but wrong signature is `signature_invalid`"): bytes that are not such a
/// signature are a wrong signature, refused before any challenge is used up. A raw 64-byte
/// `r || s` (CryptoKit's `rawRepresentation`, JOSE) says so in the reason, so a client bug is
/// reported as one; only an empty signature counts as a missing member (`invalid_request`).
public struct DERSignature: Sendable {
    public let der: [UInt8]

    public init(bytes: [UInt8]) throws(DeviceKeyError) {
        guard !bytes.isEmpty else { throw .invalid("signature is empty") }
        guard bytes.count <= 80 else { throw .wrongSignature("signature is too long for DER ECDSA P-256") }
        guard let seq = try? DERNode.parse(bytes), seq.isUniversal(DERNode.sequence), let ints = try? seq.children, ints.count == 2,
              ints.allSatisfy({ $0.isUniversal(DERNode.integer) && !$0.content.isEmpty && $0.content.count <= 33 })
        else {
            // Decided after the DER parse, not from the first byte: a raw r||s whose r starts
            // with 0x30 (one in 256) is still a raw signature and is reported as one.
            if bytes.count == 64 { throw .wrongSignature("signature looks like raw r||s; send the DER (X9.62) encoding") }
            throw .wrongSignature("signature is not DER ECDSA (X9.62)")
        }
        der = bytes
    }
}
