internal import COpenSSL

public enum HMAC {
    /// HMAC-SHA-256 (RFC 2104).
    public static func sha256(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        let ok = key.withUnsafeBufferPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    COpenSSL.HMAC(HashFunction.sha256.md, k.baseAddress, Int32(k.count), d.baseAddress, d.count, o.baseAddress, &length)
                }
            }
        }
        precondition(ok != nil, "HMAC failed")
        return out
    }
}
