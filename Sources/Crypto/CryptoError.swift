internal import COpenSSL

/// Why a cryptographic operation failed. `reason` is safe to show; it never contains key material.
public struct CryptoError: Error, Hashable, CustomStringConvertible, Sendable {
    public enum Code: String, Sendable { case invalidKey, unsupported, invalidCertificate, chainInvalid, invalidSignature, internalFailure }
    public let code: Code
    public let reason: String
    public init(_ code: Code, _ reason: String) { self.code = code; self.reason = reason }
    public var description: String { "\(code.rawValue): \(reason)" }
    public static func == (l: CryptoError, r: CryptoError) -> Bool { l.code == r.code }
    public func hash(into h: inout Hasher) { h.combine(code) }

    /// Drains OpenSSL's thread-local error queue into one error (the queue must not leak into the
    /// next, unrelated call on this thread).
    static func openSSL(_ code: Code, _ context: String) -> CryptoError {
        var detail = ""
        while true {
            let e = ERR_get_error()
            if e == 0 { break }
            if detail.isEmpty, let s = ERR_reason_error_string(e) { detail = String(cString: s) }
        }
        return CryptoError(code, detail.isEmpty ? context : "\(context): \(detail)")
    }

    static func clearQueue() { ERR_clear_error() }
}
