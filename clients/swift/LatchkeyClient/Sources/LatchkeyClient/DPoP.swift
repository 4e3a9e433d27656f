import Foundation

/// The key a DPoP-bound session is bound to (RFC 9449): on iOS and macOS `SecureEnclaveDPoPKey`
/// (it cannot leave the device), `SoftwareDPoPKey` where there is no Secure Enclave, in tests a
/// software P-256 key. ES256 only: the Secure Enclave holds P-256 keys.
public protocol DPoPKey: Sendable {
    /// The public key as a JWK: `{"kty":"EC","crv":"P-256","x","y"}` (base64url coordinates, 32 bytes each).
    var publicJWK: LatchkeyJSON { get }
    /// ES256 over `message`: the raw 64-byte `r ‖ s` (JWS, RFC 7518 §3.4), not DER.
    func sign(_ message: Data) async throws -> Data
}

extension DPoPKey {
    /// The JWK SHA-256 thumbprint (RFC 7638): base64url(SHA-256 of the required members `crv`, `kty`,
    /// `x`, `y` in that order, no whitespace) — what a bound token's `cnf.jkt` holds.
    public var thumbprint: String {
        let required: LatchkeyJSON = .object([("crv", publicJWK["crv"] ?? .null), ("kty", publicJWK["kty"] ?? .null),
                                              ("x", publicJWK["x"] ?? .null), ("y", publicJWK["y"] ?? .null)])
        return Base64URL.encode(SHA256Digest.hash(required.canonicalized()))
    }
}

extension LatchkeyJSON {
    /// The public JWK of a P-256 key from its 65-byte X9.63 point (0x04 ‖ x ‖ y).
    public static func p256JWK(x963 point: Data) -> LatchkeyJSON {
        let bytes = [UInt8](point)
        precondition(bytes.count == 65 && bytes[0] == 4, "an uncompressed P-256 point is 65 bytes starting with 4")
        return .object([("kty", "EC"), ("crv", "P-256"), ("x", .string(Base64URL.encode(Data(bytes[1...32])))),
                        ("y", .string(Base64URL.encode(Data(bytes[33...64]))))])
    }
}

/// Makes DPoP proofs (RFC 9449 §4.2) with one key and keeps the server's latest `DPoP-Nonce`.
/// A proof: header `{"typ":"dpop+jwt","alg":"ES256","jwk"}`, claims `jti` (16 random bytes),
/// `htm`, `htu` (the request URL without query and fragment), `iat`, `ath` =
/// base64url(SHA-256(access token)) when it goes with one, and `nonce` once the server sent one.
public final class DPoPProofs: @unchecked Sendable {
    public let key: any DPoPKey
    /// The server's own address (its issuer) when the client reaches it by another one (a proxy, a
    /// test on loopback): `htu` names the server as it knows itself (RFC 9449 §4.3).
    public let publicBaseURL: URL?
    private let lock = NSLock()
    private var latestNonce: String?
    /// Seconds since 1970 (fixed in tests).
    let clock: @Sendable () -> Int

    public init(key: any DPoPKey, publicBaseURL: URL? = nil, clock: @escaping @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }) {
        self.key = key
        self.publicBaseURL = publicBaseURL
        self.clock = clock
    }

    /// The nonce the next proof carries (the last `DPoP-Nonce` the server sent).
    public var nonce: String? {
        get { lock.lock(); defer { lock.unlock() }; return latestNonce }
        set { lock.lock(); latestNonce = newValue; lock.unlock() }
    }

    /// A proof for `method` on `url`; `accessToken` adds `ath`.
    public func proof(method: String, url: URL, accessToken: String? = nil) async throws(LatchkeyError) -> String {
        let header: LatchkeyJSON = .object([("typ", "dpop+jwt"), ("alg", "ES256"), ("jwk", key.publicJWK)])
        var claims: [(key: String, value: LatchkeyJSON)] = [
            ("jti", .string(Base64URL.encode(Data(VaultCrypto.randomBytes(16))))),
            ("htm", .string(method.uppercased())),
            ("htu", .string(Self.htu(url))),
            ("iat", .number(Double(clock()))),
        ]
        if let accessToken { claims.append(("ath", .string(Base64URL.encode(SHA256Digest.hash(Array(accessToken.utf8)))))) }
        if let nonce { claims.append(("nonce", .string(nonce))) }
        let signingInput = Base64URL.encode(Data(header.serialized())) + "." + Base64URL.encode(Data(LatchkeyJSON.object(claims).serialized()))
        let signature: Data
        do { signature = try await key.sign(Data(signingInput.utf8)) } catch let e as LatchkeyError { throw e } catch {
            throw LatchkeyError(.authenticator, "the DPoP key did not sign: \(error)")
        }
        guard signature.count == 64 else { throw LatchkeyError(.authenticator, "an ES256 signature is 64 bytes (r ‖ s), not \(signature.count)") }
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// `htu`: scheme, host, port and path of `url`; query and fragment dropped (RFC 9449 §4.2).
    static func htu(_ url: URL) -> String {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        parts.query = nil
        parts.fragment = nil
        return parts.url?.absoluteString ?? url.absoluteString
    }

    /// Whether an answer asks for a proof with a (new) nonce: 400 `use_dpop_nonce` (token endpoints),
    /// or 401 with `WWW-Authenticate: DPoP error="use_dpop_nonce"` (resource routes).
    static func asksForNonce(_ response: HTTPResponse) -> Bool {
        guard response.header("DPoP-Nonce") != nil else { return false }
        if response.status == 401, let challenge = response.header("WWW-Authenticate"), challenge.contains("use_dpop_nonce") { return true }
        guard response.status == 400, let body = try? LatchkeyJSON(parsing: response.body) else { return false }
        return body["code"]?.stringValue == "use_dpop_nonce" || body["error"]?.stringValue == "use_dpop_nonce"
    }
}

#if canImport(CryptoKit)
import CryptoKit

/// A P-256 software key (CryptoKit) for devices without a Secure Enclave (the simulator, older Macs).
/// Keep `rawRepresentation` in the Keychain to use it across launches.
public struct SoftwareDPoPKey: DPoPKey {
    /// The private scalar (32 bytes): keep it in the Keychain to use the key across launches.
    public let rawRepresentation: Data
    public let publicJWK: LatchkeyJSON

    public init() { self.init(P256.Signing.PrivateKey()) }
    public init(rawRepresentation: Data) throws { self.init(try P256.Signing.PrivateKey(rawRepresentation: rawRepresentation)) }
    init(_ key: P256.Signing.PrivateKey) {
        rawRepresentation = key.rawRepresentation
        publicJWK = .p256JWK(x963: key.publicKey.x963Representation)
    }

    public func sign(_ message: Data) async throws -> Data {
        try P256.Signing.PrivateKey(rawRepresentation: rawRepresentation).signature(for: message).rawRepresentation
    }
}
#endif
