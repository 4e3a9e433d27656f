/// A minimal, strict DER reader for the certificate extensions WebAuthn attestation formats define
/// (AAGUID, Apple nonce, Android key description, TPM subject alternative names).
public struct DERNode: Sendable {
    public enum TagClass: UInt8, Sendable { case universal = 0, application = 1, contextSpecific = 2, `private` = 3 }
    public let tagClass: TagClass
    public let constructed: Bool
    public let tagNumber: UInt64
    public let content: ArraySlice<UInt8>

    public static let maxDepth = 24

    public static func parse(_ bytes: [UInt8]) throws(CryptoError) -> DERNode { try parse(bytes[...]) }

    public static func parse(_ bytes: ArraySlice<UInt8>) throws(CryptoError) -> DERNode {
        var reader = DERReader(bytes)
        let node = try reader.next()
        guard reader.isAtEnd else { throw CryptoError(.invalidCertificate, "trailing bytes after DER value") }
        return node
    }

    public var children: [DERNode] {
        get throws(CryptoError) {
            guard constructed else { throw CryptoError(.invalidCertificate, "DER value is not constructed") }
            var reader = DERReader(content)
            var out: [DERNode] = []
            while !reader.isAtEnd { out.append(try reader.next()) }
            return out
        }
    }

    public func isUniversal(_ number: UInt64) -> Bool { tagClass == .universal && tagNumber == number }
    public func isContext(_ number: UInt64) -> Bool { tagClass == .contextSpecific && tagNumber == number }

    public static let sequence: UInt64 = 16, set: UInt64 = 17, integer: UInt64 = 2, octetString: UInt64 = 4,
        oid: UInt64 = 6, boolean: UInt64 = 1, enumerated: UInt64 = 10, null: UInt64 = 5, bitString: UInt64 = 3,
        utf8String: UInt64 = 12, printableString: UInt64 = 19

    /// The value of a small non-negative INTEGER or ENUMERATED.
    public var intValue: Int {
        get throws(CryptoError) {
            guard !constructed, !content.isEmpty, content.count <= 8 else { throw CryptoError(.invalidCertificate, "bad INTEGER") }
            guard content.first! & 0x80 == 0 else { throw CryptoError(.invalidCertificate, "negative INTEGER") }
            var v = 0
            for b in content { v = v << 8 | Int(b) }
            return v
        }
    }

    public var boolValue: Bool {
        get throws(CryptoError) {
            guard isUniversal(DERNode.boolean), content.count == 1 else { throw CryptoError(.invalidCertificate, "bad BOOLEAN") }
            return content.first! != 0
        }
    }

    /// Dotted text of an OBJECT IDENTIFIER.
    public var oidString: String {
        get throws(CryptoError) {
            guard isUniversal(DERNode.oid), !content.isEmpty else { throw CryptoError(.invalidCertificate, "bad OID") }
            var arcs: [UInt64] = []
            var value: UInt64 = 0
            for b in content {
                guard value < (1 << 56) else { throw CryptoError(.invalidCertificate, "OID arc too large") }
                value = value << 7 | UInt64(b & 0x7F)
                if b & 0x80 == 0 { arcs.append(value); value = 0 }
            }
            guard content.last! & 0x80 == 0, let first = arcs.first else { throw CryptoError(.invalidCertificate, "bad OID") }
            let head: [UInt64] = first < 80 ? [first / 40, first % 40] : [2, first - 80]
            return (head + arcs.dropFirst()).map(String.init).joined(separator: ".")
        }
    }
}

public struct DERReader {
    var bytes: ArraySlice<UInt8>
    public init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }
    public var isAtEnd: Bool { bytes.isEmpty }

    public mutating func next() throws(CryptoError) -> DERNode {
        func fail(_ why: String) -> CryptoError { CryptoError(.invalidCertificate, "DER: \(why)") }
        guard let first = bytes.popFirst() else { throw fail("truncated") }
        let tagClass = DERNode.TagClass(rawValue: first >> 6)!
        let constructed = first & 0x20 != 0
        var number = UInt64(first & 0x1F)
        if number == 0x1F {
            number = 0
            repeat {
                guard let b = bytes.popFirst() else { throw fail("truncated tag") }
                guard number < (1 << 50) else { throw fail("tag too large") }
                number = number << 7 | UInt64(b & 0x7F)
                if b & 0x80 == 0 { break }
            } while true
        }
        guard let lengthByte = bytes.popFirst() else { throw fail("truncated length") }
        var length = 0
        if lengthByte < 0x80 {
            length = Int(lengthByte)
        } else {
            let count = Int(lengthByte & 0x7F)
            guard count >= 1, count <= 4 else { throw fail("unsupported length") }  // 0x80 = indefinite: not DER
            for _ in 0..<count {
                guard let b = bytes.popFirst() else { throw fail("truncated length") }
                length = length << 8 | Int(b)
            }
        }
        guard length <= bytes.count else { throw fail("value longer than input") }
        let content = bytes.prefix(length)
        bytes = bytes.dropFirst(length)
        return DERNode(tagClass: tagClass, constructed: constructed, tagNumber: number, content: content)
    }
}

/// ECDSA signature encodings: DER (X9.62, what OpenSSL and WebAuthn use) and raw `r || s` (JOSE).
public enum ECDSASignature {
    public static func rawFromDER(_ der: [UInt8], coordinateLength: Int) throws(CryptoError) -> [UInt8] {
        let seq = try DERNode.parse(der)
        let parts = try seq.children
        guard seq.isUniversal(DERNode.sequence), parts.count == 2, parts.allSatisfy({ $0.isUniversal(DERNode.integer) }) else {
            throw CryptoError(.invalidSignature, "not an ECDSA DER signature")
        }
        var out: [UInt8] = []
        for p in parts {
            let v = Array(p.content.drop(while: { $0 == 0 }))
            guard v.count <= coordinateLength else { throw CryptoError(.invalidSignature, "integer too long") }
            out += [UInt8](repeating: 0, count: coordinateLength - v.count) + v
        }
        return out
    }

    public static func derFromRaw(_ raw: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard raw.count % 2 == 0, !raw.isEmpty else { throw CryptoError(.invalidSignature, "odd raw signature length") }
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(bytes.drop(while: { $0 == 0 }))
            if v.isEmpty { v = [0] }
            if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02] + derLength(v.count) + v
        }
        let half = raw.count / 2
        let body = integer(raw[0..<half]) + integer(raw[half...])
        return [0x30] + derLength(body.count) + body
    }

    static func derLength(_ n: Int) -> [UInt8] {
        if n < 0x80 { return [UInt8(n)] }
        if n < 0x100 { return [0x81, UInt8(n)] }
        return [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
    }
}
