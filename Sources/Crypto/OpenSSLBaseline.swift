internal import COpenSSL

/// The benchmark's yardstick: key import plus `EVP_DigestVerify` done entirely in C, measured in
/// the same run as Latchkey's own verification so results are ratios, not machine-dependent numbers.
public enum OpenSSLBaseline {
    public enum Key: Sendable {
        case ec(EllipticCurve, point: [UInt8])
        case ed25519([UInt8])
        case rsa(modulus: [UInt8], exponent: [UInt8])
    }

    /// Imports `key` and verifies; true when the signature is valid.
    public static func verify(key: Key, hash: HashFunction?, signature: [UInt8], message: [UInt8]) -> Bool {
        let md = hash?.md
        let rc: Int32 = signature.withUnsafeBufferPointer { s in
            message.withUnsafeBufferPointer { m in
                switch key {
                case .ec(let curve, let point):
                    return point.withUnsafeBufferPointer { p in
                        shim_baseline_verify(0, curve.openSSLName, p.baseAddress, p.count, nil, 0, md, s.baseAddress, s.count, m.baseAddress, m.count)
                    }
                case .ed25519(let raw):
                    return raw.withUnsafeBufferPointer { p in
                        shim_baseline_verify(1, nil, p.baseAddress, p.count, nil, 0, nil, s.baseAddress, s.count, m.baseAddress, m.count)
                    }
                case .rsa(let n, let e):
                    return n.withUnsafeBufferPointer { nb in
                        e.withUnsafeBufferPointer { eb in
                            shim_baseline_verify(2, nil, nb.baseAddress, nb.count, eb.baseAddress, eb.count, md, s.baseAddress, s.count, m.baseAddress, m.count)
                        }
                    }
                }
            }
        }
        if rc != 1 { CryptoError.clearQueue() }
        return rc == 1
    }
}
