import CBOR
import Crypto

/// An App Attest attestation object, parsed but not yet trusted:
///
///     {"fmt": "apple-appattest", "attStmt": {"x5c": [credCert, intermediate, …], "receipt": bytes}, "authData": bytes}
///
/// Strict CBOR (no trailing bytes, duplicate keys or indefinite lengths); unknown keys are refused so
/// that no unverified field rides along. Only `AppAttestVerifier` turns this into a verified result.
struct AppAttestObject: Sendable {
    static let format = "apple-appattest"
    /// Apple's attestation objects are ~5 KB (two certificates and a receipt); far more is not one.
    static let maxLength = 64 * 1024
    static let maxCertificates = 4

    let certificates: [Certificate]     // credCert first
    let receipt: [UInt8]
    let authenticatorData: AppAttestAuthenticatorData

    var credentialCertificate: Certificate { certificates[0] }

    init(bytes: [UInt8]) throws(DeviceKeyError) {
        func fail(_ why: String) -> DeviceKeyError { DeviceKeyError(.attestationInvalid, "App Attest attestation object: \(why)") }
        guard !bytes.isEmpty else { throw fail("empty") }
        guard bytes.count <= Self.maxLength else { throw fail("longer than \(Self.maxLength) bytes") }
        let root: CBORValue
        do { root = try CBORDecoder.decode(bytes, maxDepth: 4) } catch { throw fail("not strict CBOR (\(error.code.rawValue))") }
        guard let top = root.mapValue else { throw fail("not a CBOR map") }
        guard Set(top.map(\.key)) == [.text("fmt"), .text("attStmt"), .text("authData")] else {
            throw fail("keys must be exactly fmt, attStmt and authData")
        }
        // WebAuthn L3 §6.5.4: fmt names the statement format; App Attest's is "apple-appattest".
        guard root[text: "fmt"]?.textValue == Self.format else { throw fail("fmt is not \"\(Self.format)\"") }
        guard let statement = root[text: "attStmt"], let statementPairs = statement.mapValue else { throw fail("attStmt is not a map") }
        guard Set(statementPairs.map(\.key)) == [.text("x5c"), .text("receipt")] else {
            throw fail("attStmt keys must be exactly x5c and receipt")
        }
        guard let x5c = statement[text: "x5c"]?.arrayValue, (2...Self.maxCertificates).contains(x5c.count) else {
            throw fail("attStmt.x5c must hold the credential certificate and its intermediate (2 to \(Self.maxCertificates) certificates)")
        }
        var certificates: [Certificate] = []
        for (i, item) in x5c.enumerated() {
            guard let der = item.bytesValue else { throw fail("attStmt.x5c[\(i)] is not a byte string") }
            do { certificates.append(try Certificate(der: der)) } catch { throw fail("attStmt.x5c[\(i)] is not a DER X.509 certificate") }
        }
        guard let receipt = statement[text: "receipt"]?.bytesValue else { throw fail("attStmt.receipt is not a byte string") }
        guard let authData = root[text: "authData"]?.bytesValue else { throw fail("authData is not a byte string") }
        self.certificates = certificates
        self.receipt = receipt
        authenticatorData = try AppAttestAuthenticatorData(attestation: authData)
    }
}

/// An App Attest assertion, parsed but not yet trusted: `{"signature": DER ECDSA, "authenticatorData": 37 bytes}`.
struct AppAttestAssertion: Sendable {
    static let maxLength = 1024

    let signature: DERSignature
    let authenticatorData: AppAttestAuthenticatorData

    init(bytes: [UInt8]) throws(DeviceKeyError) {
        func fail(_ why: String) -> DeviceKeyError { DeviceKeyError(.attestationInvalid, "App Attest assertion: \(why)") }
        guard !bytes.isEmpty else { throw fail("empty") }
        guard bytes.count <= Self.maxLength else { throw fail("longer than \(Self.maxLength) bytes") }
        let root: CBORValue
        do { root = try CBORDecoder.decode(bytes, maxDepth: 2) } catch { throw fail("not strict CBOR (\(error.code.rawValue))") }
        guard let pairs = root.mapValue, Set(pairs.map(\.key)) == [.text("signature"), .text("authenticatorData")] else {
            throw fail("must be a map of exactly signature and authenticatorData")
        }
        guard let signature = root[text: "signature"]?.bytesValue, let authData = root[text: "authenticatorData"]?.bytesValue else {
            throw fail("signature and authenticatorData must be byte strings")
        }
        do { self.signature = try DERSignature(bytes: signature) } catch { throw fail(error.reason) }
        authenticatorData = try AppAttestAuthenticatorData(assertion: authData)
    }
}
