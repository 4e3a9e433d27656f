import Crypto

/// Standard Webhooks signatures (https://www.standardwebhooks.com, "Verifying webhook authenticity"):
/// `webhook-signature: v1,<base64 HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>.<body>")>`, where
/// key = the base64-decoded part of the `whsec_…` secret. Used by the sender and by
/// `latchkey webhooks listen`, so both sides are the same code path (tests check it against an
/// independent computation).
public enum WebhookSignature {
    public static let secretPrefix = "whsec_"
    /// Receivers refuse timestamps further than this from their clock (replay window).
    public static let toleranceSeconds: Int64 = 300

    /// `whsec_` + base64 of the 32 key bytes.
    public static func secret(key: [UInt8]) -> String { secretPrefix + Base64.encodeStandard(key) }

    /// The key bytes of a `whsec_…` secret (the prefix is optional, as Standard Webhooks libraries accept).
    public static func key(fromSecret secret: String) -> [UInt8]? {
        let text = secret.hasPrefix(secretPrefix) ? String(secret.dropFirst(secretPrefix.count)) : secret
        guard let key = Base64.decodeStandard(text), !key.isEmpty else { return nil }
        return key
    }

    /// The `webhook-signature` header value for one attempt.
    public static func sign(id: String, timestamp: Int64, body: [UInt8], key: [UInt8]) -> String {
        "v1," + Base64.encodeStandard(HMAC.sha256(key: key, data: Array("\(id).\(timestamp).".utf8) + body))
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case missingHeaders, badTimestamp, stale, noMatch
        public var description: String {
            switch self {
            case .missingHeaders: "webhook-id, webhook-timestamp or webhook-signature is missing"
            case .badTimestamp: "webhook-timestamp is not Unix seconds"
            case .stale: "webhook-timestamp is more than 5 minutes from now"
            case .noMatch: "no v1 signature matches"
            }
        }
    }

    /// Checks a delivery: the timestamp within `toleranceSeconds` of `now`, and one of the
    /// space-separated `v1,…` signatures equal (constant time) to the expected one.
    public static func verify(id: String?, timestamp: String?, signature: String?, body: [UInt8], key: [UInt8],
                              now: Int64) throws(Failure) {
        guard let id, let timestamp, let signature else { throw .missingHeaders }
        guard let ts = Int64(timestamp) else { throw .badTimestamp }
        guard abs(now - ts) <= toleranceSeconds else { throw .stale }
        let expected = Array(sign(id: id, timestamp: ts, body: body, key: key).utf8)
        for candidate in signature.split(separator: " ") where candidate.hasPrefix("v1,") {
            if constantTimeEquals(Array(candidate.utf8), expected) { return }
        }
        throw .noMatch
    }

    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<a.count { diff |= a[i] ^ b[i] }
        return diff == 0
    }
}
