extension CBORDecoder {
    /// The common shape of a COSE key, decoded without libcbor: one definite map of at most 23
    /// pairs whose keys are integers and whose values are integers or definite byte strings, every
    /// head in its shortest form, no duplicate keys, nothing after the map. Anything else — a
    /// longer head, another type, a duplicate, trailing bytes — gives nil, and the caller decodes
    /// with `decode`, which decides. So this accepts a subset of what `decode` accepts and yields
    /// the same value for it (a stored credential key is parsed on every login that misses the
    /// key cache: this is most of the COSE parsing time of an RS256 login).
    public static func decodeFlatIntegerMap(_ bytes: [UInt8]) -> CBORValue? {
        bytes.withUnsafeBufferPointer { b -> CBORValue? in
            guard b.count <= defaultMaxBytes, let first = b.first, first >> 5 == 5, first & 0x1F < 24 else { return nil }
            let count = Int(first & 0x1F)
            var i = 1
            /// A shortest-form head of major type 0, 1 or 2 (argument below 2^32).
            func head() -> (major: UInt8, argument: UInt64)? {
                guard i < b.count else { return nil }
                let initial = b[i]
                let major = initial >> 5, info = initial & 0x1F
                guard major <= 2 else { return nil }
                i += 1
                switch info {
                case 0..<24: return (major, UInt64(info))
                case 24:
                    guard i < b.count, b[i] >= 24 else { return nil }
                    i += 1
                    return (major, UInt64(b[i - 1]))
                case 25:
                    guard i + 2 <= b.count else { return nil }
                    let v = UInt64(b[i]) << 8 | UInt64(b[i + 1])
                    guard v > 0xFF else { return nil }
                    i += 2
                    return (major, v)
                case 26:
                    guard i + 4 <= b.count else { return nil }
                    let v = UInt64(b[i]) << 24 | UInt64(b[i + 1]) << 16 | UInt64(b[i + 2]) << 8 | UInt64(b[i + 3])
                    guard v > 0xFFFF else { return nil }
                    i += 4
                    return (major, v)
                default: return nil
                }
            }
            var pairs: [CBORPair] = []
            pairs.reserveCapacity(count)
            for _ in 0..<count {
                guard let k = head(), k.major <= 1 else { return nil }
                let key: CBORValue = k.major == 0 ? .unsigned(k.argument) : .negative(k.argument)
                guard let v = head() else { return nil }
                let value: CBORValue
                switch v.major {
                case 0: value = .unsigned(v.argument)
                case 1: value = .negative(v.argument)
                default:
                    let n = Int(v.argument)
                    guard n <= b.count - i else { return nil }
                    value = .bytes(Array(b[i..<(i + n)]))
                    i += n
                }
                for p in pairs where p.key == key { return nil }
                pairs.append(CBORPair(key, value))
            }
            return i == b.count ? .map(pairs) : nil
        }
    }
}
