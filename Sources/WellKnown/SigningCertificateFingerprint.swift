import Crypto

/// SHA-256 of an Android app's signing certificate (upload key, Play app-signing key, …): the one
/// value behind both the `assetlinks.json` entry and the `android:apk-key-hash:` origin that
/// Credential Manager reports (seed 002; SPEC "Rules that must hold": Origin).
public struct SigningCertificateFingerprint: Sendable, Hashable, Comparable {
    public let bytes: [UInt8]

    public static let expectedForm = "a SHA-256 signing-certificate fingerprint: 32 bytes as keytool prints them (AB:CD:…:EF), "
        + "64 hex digits, or the 43-character base64url hash"
    static let originPrefix = "android:apk-key-hash:"

    public init(bytes: [UInt8]) throws(WellKnownError) {
        guard bytes.count == 32 else { throw WellKnownError(.fingerprint, "expected \(Self.expectedForm); got \(bytes.count) bytes") }
        self.bytes = bytes
    }

    /// Accepts what admins paste: keytool's `AB:CD:…` (any case), plain hex, the base64url hash, or
    /// a whole `android:apk-key-hash:` origin — also as the whole line keytool or the Play Console
    /// prints (`SHA256: AB:CD:…`, `SHA-256 certificate fingerprint: AB:CD:…`). Anything else is
    /// refused naming the expected form.
    public init(parsing input: String) throws(WellKnownError) {
        var text = Substring(input.filter { !$0.isWhitespace })
        if text.hasPrefix(Self.originPrefix) { text = text.dropFirst(Self.originPrefix.count) }
        // A label before the value: `SHA256:`, `SHA-256:`, `SHA-256certificatefingerprint:` (spaces gone).
        if let colon = text.firstIndex(of: ":"), text[..<colon].count > 2, text[..<colon].lowercased().hasPrefix("sha") {
            text = text[text.index(after: colon)...]
        }
        if text.contains(":") {
            let pairs = text.split(separator: ":", omittingEmptySubsequences: false)
            guard pairs.count == 32, pairs.allSatisfy({ $0.count == 2 }), let bytes = Hex.decode(pairs.joined()) else {
                throw WellKnownError(.fingerprint, "'\(input.prefix(120))' is not \(Self.expectedForm)")
            }
            try self.init(bytes: bytes)
        } else if text.count == 64, let bytes = Hex.decode(text) {
            try self.init(bytes: bytes)
        } else if let bytes = Self.hash(String(text)) {
            try self.init(bytes: bytes)
        } else {
            throw WellKnownError(.fingerprint, "'\(input.prefix(120))' is not \(Self.expectedForm)")
        }
    }

    /// The origin form, or nil when `origin` is not a well-formed Android origin.
    public init?(origin: String) {
        guard origin.hasPrefix(Self.originPrefix) else { return nil }
        guard let bytes = Self.hash(String(origin.dropFirst(Self.originPrefix.count))) else { return nil }
        self.bytes = bytes
    }

    /// The 32 bytes of a 43-character base64url SHA-256 hash in its one canonical spelling, else nil.
    static func hash(_ text: String) -> [UInt8]? {
        guard text.count == 43, let bytes = Base64URL.decode(text), bytes.count == 32, Base64URL.encode(bytes) == text else { return nil }
        return bytes
    }

    /// `AB:CD:…:EF`, the form `assetlinks.json` uses (`sha256_cert_fingerprints`).
    public var keytool: String {
        bytes.map { b in
            let s = String(b, radix: 16, uppercase: true)
            return s.count == 1 ? "0" + s : s
        }.joined(separator: ":")
    }

    public var base64url: String { Base64URL.encode(bytes) }
    /// The origin Credential Manager reports for an app signed with this certificate.
    public var origin: String { Self.originPrefix + base64url }

    public static func < (a: Self, b: Self) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}
