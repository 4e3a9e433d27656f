import Crypto
import WebAuthn
import WellKnown

/// What may enter the origin allowlist (SPEC "Rules that must hold": Origin).
public enum OriginRules {
    public struct Rejection: Error, Sendable { public let reason: String }

    /// A normalised origin, or why it is refused: `https://host[:port]`, `android:apk-key-hash:<43 base64url>`,
    /// and `http://localhost[:port]` only in development mode.
    public static func validate(_ origin: String, developmentMode: Bool) -> Result<String, Rejection> {
        if origin.hasPrefix("android:apk-key-hash:") {
            guard SigningCertificateFingerprint(origin: origin) != nil else {
                return .failure(Rejection(reason: "android origins carry the base64url SHA-256 of the signing certificate"))
            }
            return .success(origin)
        }
        let lower = origin.lowercased()
        let isHTTPS = lower.hasPrefix("https://")
        let isLocalHTTP = lower.hasPrefix("http://localhost") || lower.hasPrefix("http://127.0.0.1")
        guard isHTTPS || (isLocalHTTP && developmentMode) else {
            return .failure(Rejection(reason: developmentMode ? "origins are https://host[:port] or http://localhost[:port]"
                                                             : "origins are https://host[:port] (http://localhost needs LATCHKEY_DEV=1)"))
        }
        let rest = lower.dropFirst(isHTTPS ? 8 : 7)
        guard !rest.isEmpty, !rest.contains("/"), !rest.contains("?"), !rest.contains("#"), !rest.contains("@"),
              rest.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" || $0 == "[" || $0 == "]" }) else {
            return .failure(Rejection(reason: "an origin is scheme://host[:port] with no path"))
        }
        if isLocalHTTP {
            let host = rest.split(separator: ":").first.map(String.init) ?? ""
            guard host == "localhost" || host == "127.0.0.1" else { return .failure(Rejection(reason: "only http://localhost is allowed")) }
        }
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
                return .failure(Rejection(reason: "bad port"))
            }
        }
        return .success(lower)
    }

    /// A SHA-256 signing-certificate fingerprint (keytool `AB:CD:…` in any case, plain hex, or the
    /// base64url hash) → `android:apk-key-hash:<base64url>`; anything else names the expected form.
    public static func androidOrigin(fromFingerprint fingerprint: String) -> Result<String, Rejection> {
        do {
            return .success(try SigningCertificateFingerprint(parsing: fingerprint).origin)
        } catch {
            return .failure(Rejection(reason: error.reason))
        }
    }
}

/// The admin bearer key is compared in constant time against its stored SHA-256.
public enum AdminKey {
    public static func hash(_ key: String) -> [UInt8] { Digest.sha256(Array(key.utf8)) }
    public static func matches(_ presented: String, hash: [UInt8]) -> Bool { constantTimeEquals(Digest.sha256(Array(presented.utf8)), hash) }
}
