import CBOR
import Crypto

/// WebAuthn L3 §6.5.3 attestation types.
public enum AttestationType: String, Sendable {
    case none, `self` = "self", basic, attCA = "attca", anonCA = "anonca"
}

/// What an attestation statement verifier gets: everything §7.1 step 22 hands to the format's
/// verification procedure.
public struct AttestationInput: Sendable {
    public let format: String
    public let statement: CBORValue
    public let authenticatorData: AuthenticatorData
    public let credential: AuthenticatorData.AttestedCredentialData
    public let clientDataHash: [UInt8]
    public let policy: VerificationPolicy
    /// The instant to verify at (seconds since 1970).
    public let now: Int64

    /// `authenticatorData || clientDataHash`: what most formats sign.
    public var signedData: [UInt8] { authenticatorData.raw + clientDataHash }
}

/// The outcome of a format's verification procedure: the attestation type and its trust path
/// (leaf first), which §7.1 step 23 then checks against trust anchors.
public struct AttestationResult: Sendable {
    public let type: AttestationType
    public let trustPath: [Certificate]
    /// The algorithm the authenticator's attestation signature used (attStmt.alg, or the attestation
    /// certificate's for fido-u2f); nil where the signature is not the authenticator's (SafetyNet:
    /// Google's service signs) or is the credential's own (apple). Metadata checks it is listed.
    public let algorithm: COSEAlgorithm?

    public init(type: AttestationType, trustPath: [Certificate] = [], algorithm: COSEAlgorithm? = nil) {
        self.type = type
        self.trustPath = trustPath
        self.algorithm = algorithm
    }
}

/// One attestation statement format (WebAuthn L3 §8). One format per file.
public protocol AttestationFormat: Sendable {
    static var identifier: String { get }
    static func verify(_ input: AttestationInput, trace: VerificationTrace?) throws(WebAuthnError) -> AttestationResult
}

public enum AttestationFormats {
    public static let all: [any AttestationFormat.Type] = [
        NoneAttestation.self, PackedAttestation.self, FIDOU2FAttestation.self, AppleAttestation.self,
        AndroidKeyAttestation.self, AndroidSafetyNetAttestation.self, TPMAttestation.self,
    ]

    public static func named(_ identifier: String) -> (any AttestationFormat.Type)? {
        all.first { $0.identifier == identifier }
    }
}

// Helpers shared by the formats.
extension AttestationInput {
    /// attStmt member `key`, which must be a byte string.
    func bytes(_ key: String) throws(WebAuthnError) -> [UInt8] {
        guard let value = statement[text: key] else { throw .attestation("\(format): attStmt.\(key) is missing") }
        guard let b = value.bytesValue else { throw .attestation("\(format): attStmt.\(key) is not a byte string") }
        return b
    }

    func int(_ key: String) throws(WebAuthnError) -> Int {
        guard let value = statement[text: key]?.intValue else { throw .attestation("\(format): attStmt.\(key) is missing") }
        return value
    }

    /// attStmt.x5c parsed, leaf first; nil when absent.
    func certificates() throws(WebAuthnError) -> [Certificate]? {
        guard let value = statement[text: "x5c"] else { return nil }
        guard let items = value.arrayValue, !items.isEmpty, items.count <= 8 else {
            throw .attestation("\(format): attStmt.x5c must be a non-empty array of at most 8 certificates")
        }
        var out: [Certificate] = []
        for item in items {
            guard let der = item.bytesValue else { throw .attestation("\(format): x5c holds a non-byte-string") }
            do { out.append(try Certificate(der: der)) } catch { throw .attestation("\(format): x5c certificate does not parse") }
        }
        return out
    }

    /// Checks that attStmt holds only the listed members.
    func requireOnly(_ keys: Set<String>) throws(WebAuthnError) {
        for pair in statement.mapValue ?? [] {
            guard let k = pair.key.textValue, keys.contains(k) else {
                throw .attestation("\(format): unexpected attStmt member")
            }
        }
    }
}

/// id-fido-gen-ce-aaguid (1.3.6.1.4.1.45724.1.1.4): when present it must equal the AAGUID in
/// authenticatorData and must not be critical (§8.2.1, also used by tpm).
func checkAAGUIDExtension(_ cert: Certificate, aaguid: [UInt8], format: String, trace: VerificationTrace?) throws(WebAuthnError) {
    guard let ext = cert.extension("1.3.6.1.4.1.45724.1.1.4") else { return }
    let value: [UInt8]
    do {
        let node = try DERNode.parse(ext.value)
        guard node.isUniversal(DERNode.octetString) else { throw WebAuthnError.attestation("") }
        value = Array(node.content)
    } catch {
        throw .attestation("\(format): id-fido-gen-ce-aaguid is not an OCTET STRING")
    }
    try trace.require("attestation.aaguidExtension", !ext.critical && value == aaguid,
                      .attestation("\(format): certificate AAGUID extension does not match authenticatorData"))
}

/// When x5c holds more than the leaf, the leaf must be signed by the next certificate: the chain's
/// own link holds even when no trust anchor is configured (the rest of the path is §7.1 step 23's).
/// Fails closed: a next certificate whose key cannot be read fails the check. Check name
/// `attestation.<format>.leafSignedByIssuer`.
func checkLeafSignedByIssuer(_ x5c: [Certificate], format: String, trace: VerificationTrace?) throws(WebAuthnError) {
    guard x5c.count > 1 else { return }
    let issuerKey = try? x5c[1].publicKey
    try trace.require("attestation.\(format).leafSignedByIssuer", issuerKey.map { x5c[0].isSigned(by: $0) } ?? false,
                      .attestation("\(format): leaf certificate is not signed by the next certificate"))
}

/// The COSE algorithm of an attestation signature; RS1 is allowed here only (SPEC: "RS1 only
/// inside attestation statements that need it").
func attestationSignatureAlgorithm(_ alg: Int, format: String) throws(WebAuthnError) -> SignatureAlgorithm {
    guard let scheme = COSEAlgorithm(alg).signatureAlgorithm else {
        throw WebAuthnError(.algorithmUnsupported, "\(format): attestation algorithm \(COSEAlgorithm(alg).name) is not supported")
    }
    return scheme
}
