/// Deterministic CBOR encoding (RFC 8949 §4.2 preferred serialisation for heads; map pairs in the
/// order given). Used to build attestation objects and COSE keys, e.g. by the test authenticator.
public enum CBOREncoder {
    public static func encode(_ value: CBORValue) -> [UInt8] {
        var out: [UInt8] = []
        encode(value, into: &out)
        return out
    }

    public static func encode(_ value: CBORValue, into out: inout [UInt8]) {
        switch value {
        case .unsigned(let u): head(0, u, &out)
        case .negative(let n): head(1, n, &out)
        case .bytes(let b): head(2, UInt64(b.count), &out); out.append(contentsOf: b)
        case .text(let s): head(3, UInt64(s.utf8.count), &out); out.append(contentsOf: s.utf8)
        case .array(let a): head(4, UInt64(a.count), &out); for e in a { encode(e, into: &out) }
        case .map(let m):
            head(5, UInt64(m.count), &out)
            for p in m { encode(p.key, into: &out); encode(p.value, into: &out) }
        case .tagged(let tag, let box): head(6, tag, &out); encode(box.value, into: &out)
        case .bool(let b): out.append(b ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        case .undefined: out.append(0xF7)
        case .simple(let v):
            if v < 24 { out.append(0xE0 | v) } else { out.append(contentsOf: [0xF8, v]) }
        case .float(let d):
            out.append(0xFB)
            let bits = d.bitPattern
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        }
    }

    static func head(_ major: UInt8, _ argument: UInt64, _ out: inout [UInt8]) {
        let m = major << 5
        switch argument {
        case 0..<24: out.append(m | UInt8(argument))
        case 24...0xFF: out.append(contentsOf: [m | 24, UInt8(argument)])
        case 0x100...0xFFFF: out.append(contentsOf: [m | 25, UInt8(argument >> 8), UInt8(truncatingIfNeeded: argument)])
        case 0x10000...0xFFFF_FFFF:
            out.append(m | 26)
            for s in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: argument >> UInt64(s))) }
        default:
            out.append(m | 27)
            for s in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: argument >> UInt64(s))) }
        }
    }
}
