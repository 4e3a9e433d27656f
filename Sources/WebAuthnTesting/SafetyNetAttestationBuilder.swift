import CBOR
import Crypto
import JSON

/// `android-safetynet` (WebAuthn L3 §8.5): attStmt {ver, response}, where response is a SafetyNet
/// JWS signed by a key certified for attest.android.com whose payload nonce is
/// base64(SHA-256(authenticatorData || clientDataHash)).
public struct SafetyNetAttestationBuilder: AttestationStatementBuilder {
    /// The JWS signer: leaf for attest.android.com and the rest of its chain (no root).
    public var identity: AttestationIdentity
    public var ver = "200616037"
    /// Milliseconds since 1970; nil: now.
    public var timestampMs: Int64? = nil
    public var ctsProfileMatch = true
    public var basicIntegrity = true
    /// The nonce's bytes instead of the real hash.
    public var nonceOverride: [UInt8]? = nil
    /// The header's x5c instead of the identity's chain.
    public var x5cOverride: [Certificate]? = nil
    /// attStmt.response exactly (e.g. empty).
    public var responseOverride: [UInt8]? = nil
    public let format = "android-safetynet"

    public init(identity: AttestationIdentity) { self.identity = identity }

    /// A SafetyNet signing identity (ES256) under `ca`: CN attest.android.com.
    public static func identity(under ca: TestCertificateAuthority) -> AttestationIdentity {
        let (key, cert) = ca.leaf(subject: [("C", "US"), ("O", "Latchkey Test"), ("CN", "attest.android.com")])
        return AttestationIdentity(key: key, chain: [cert, ca.certificate])
    }

    public func statement(authenticatorData: [UInt8], clientDataHash: [UInt8], authenticator: SoftAuthenticator) -> [CBORPair] {
        let header = JSONValue.object([
            ("alg", "ES256"), ("x5c", .array((x5cOverride ?? identity.chain).map { .string(Base64.encodeStandard($0.der)) })),
        ])
        let nonce = nonceOverride ?? Digest.sha256(authenticatorData + clientDataHash)
        let payload = JSONValue.object([
            ("nonce", .string(Base64.encodeStandard(nonce))),
            ("timestampMs", .number(Double(timestampMs ?? Self.nowMs()))),
            ("apkPackageName", "com.google.android.gms"),
            ("apkCertificateDigestSha256", ["bGF0Y2hrZXktdGVzdA=="]),
            ("ctsProfileMatch", .bool(ctsProfileMatch)), ("basicIntegrity", .bool(basicIntegrity)),
        ])
        let input = Base64URL.encode(header.serialized()) + "." + Base64URL.encode(payload.serialized())
        let der = try! identity.key.sign(Array(input.utf8), algorithm: .ecdsa(.sha256))
        let signature = try! ECDSASignature.rawFromDER(der, coordinateLength: 32)
        let jws = Array((input + "." + Base64URL.encode(signature)).utf8)
        return [CBORPair(.text("ver"), .text(ver)), CBORPair(.text("response"), .bytes(responseOverride ?? jws))]
    }

    public static func nowMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec / 1_000_000)
    }
}

#if canImport(Glibc)
import Glibc
#endif
