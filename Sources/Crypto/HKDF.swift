/// HKDF with SHA-256 (RFC 5869): a key of `length` bytes (at most 255 × 32) derived from input key
/// material, for one purpose named by `info`.
public enum HKDF {
    public static func sha256(key inputKey: [UInt8], salt: [UInt8] = [], info: [UInt8], length: Int = 32) -> [UInt8] {
        precondition(length > 0 && length <= 255 * 32, "HKDF-SHA-256 gives 1…8160 bytes")
        // §2.2 extract: a salt not given is HashLen zero bytes.
        let prk = HMAC.sha256(key: salt.isEmpty ? [UInt8](repeating: 0, count: 32) : salt, data: inputKey)
        // §2.3 expand: T(i) = HMAC(PRK, T(i-1) ‖ info ‖ i).
        var output: [UInt8] = []
        output.reserveCapacity(length + 32)
        var block: [UInt8] = []
        var counter: UInt8 = 1
        while output.count < length {
            block = HMAC.sha256(key: prk, data: block + info + [counter])
            output += block
            counter &+= 1
        }
        return Array(output.prefix(length))
    }
}
