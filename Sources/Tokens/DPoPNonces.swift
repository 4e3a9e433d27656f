import Crypto

/// Stateless DPoP nonces (RFC 9449 §8): the base64url (no padding) of the first 16 bytes of
/// HMAC-SHA-256(K, ⌊Unix time / 10⌋ as 8 bytes big-endian). K is derived from the KEK, so every
/// instance makes and accepts the same nonces without sharing state; the current and the previous
/// slot's nonce are accepted.
public struct DPoPNonces: Sendable {
    public static let slotSeconds: Int64 = 10
    static let info = Array("latchkey dpop nonce v1".utf8)
    let key: [UInt8]

    /// `keyEncryptionKey`: the KEK's bytes; K = HKDF-SHA-256(KEK, "latchkey dpop nonce v1").
    public init(keyEncryptionKey: [UInt8]) { key = HKDF.sha256(key: keyEncryptionKey, info: Self.info) }

    /// The nonce of the slot `unixSeconds` falls in.
    public func nonce(at unixSeconds: Int64) -> String { nonce(slot: Self.slot(unixSeconds)) }

    /// Whether `nonce` is the current slot's or the previous one's.
    public func accepts(_ nonce: String, at unixSeconds: Int64) -> Bool {
        let slot = Self.slot(unixSeconds)
        let given = Array(nonce.utf8)
        return constantTimeEquals(given, Array(self.nonce(slot: slot).utf8))
            || constantTimeEquals(given, Array(self.nonce(slot: slot - 1).utf8))
    }

    static func slot(_ unixSeconds: Int64) -> Int64 {
        unixSeconds >= 0 ? unixSeconds / slotSeconds : (unixSeconds - slotSeconds + 1) / slotSeconds
    }

    func nonce(slot: Int64) -> String {
        let counter = (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: slot) >> (56 - 8 * UInt64($0))) }
        return Base64URL.encode(Array(HMAC.sha256(key: key, data: counter).prefix(16)))
    }
}
