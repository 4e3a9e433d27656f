/// Writes one JSON object straight into bytes, member by member, without building a `JSONValue`
/// tree: for the few objects every login writes (a ceremony state, an access token's claims),
/// where the tree's allocations and generic tuple copies cost more than the text itself, and the
/// answer to a finished passkey ceremony. Nested objects and arrays of objects are written in place.
///
/// The output is what `JSONValue.object(members).serialized()` writes for the same members in the
/// same order (numbers are integers here; strings are escaped by the same `writeString`). Listing
/// the members in RFC 8785 order makes it the canonical form too: `requireCanonicalOrder` checks
/// that order as members are added, and a test of each caller holds the bytes equal to the tree's.
public struct JSONObjectWriter {
    public private(set) var bytes: [UInt8]
    private let checksOrder: Bool
    private var lastKey: String?
    /// Members written so far (a comma goes before every one but the first).
    private var memberCount = 0

    /// `requireCanonicalOrder`: every key must come after the previous one in RFC 8785's order
    /// (a precondition, so a mis-ordered caller fails its tests instead of writing a second form).
    public init(capacity: Int = 256, requireCanonicalOrder: Bool = false) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
        checksOrder = requireCanonicalOrder
    }

    /// A nested object written into `bytes` (taken over, not copied), which already holds its
    /// enclosing text up to the member's key.
    private init(continuing bytes: inout [UInt8], requireCanonicalOrder: Bool) {
        self.bytes = []
        swap(&self.bytes, &bytes)
        self.bytes.append(UInt8(ascii: "{"))
        checksOrder = requireCanonicalOrder
    }

    private mutating func key(_ key: String) {
        if checksOrder {
            if let lastKey { precondition(JSONValue.utf16Precedes(lastKey, key), "members out of RFC 8785 order: \(lastKey), \(key)") }
            lastKey = key
        }
        if memberCount > 0 { bytes.append(UInt8(ascii: ",")) }
        memberCount += 1
        JSONValue.writeString(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func member(_ key: String, string: String) {
        self.key(key)
        JSONValue.writeString(string, into: &bytes)
    }

    /// A string, or `null` for nil.
    public mutating func member(_ key: String, optionalString: String?) {
        self.key(key)
        if let optionalString { JSONValue.writeString(optionalString, into: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    /// An integer of at most 2^53 in magnitude (JSON's exact range), written as its digits.
    public mutating func member(_ key: String, integer: Int64) {
        precondition(integer.magnitude <= 9_007_199_254_740_992, "integer outside JSON's exact range")
        self.key(key)
        JSONValue.writeInteger(integer, into: &bytes)
    }

    public mutating func member(_ key: String, bool: Bool) {
        self.key(key)
        bytes.append(contentsOf: (bool ? "true" : "false").utf8)
    }

    /// An array of strings, or `null` for nil.
    public mutating func member(_ key: String, strings: [String]?) {
        self.key(key)
        guard let strings else { bytes.append(contentsOf: "null".utf8); return }
        bytes.append(UInt8(ascii: "["))
        for (i, s) in strings.enumerated() {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            JSONValue.writeString(s, into: &bytes)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// A nested object, its members written by `body` (in `body`'s order; RFC 8785 order is
    /// checked when this writer checks it).
    public mutating func member(_ key: String, object body: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        var nested = JSONObjectWriter(continuing: &bytes, requireCanonicalOrder: checksOrder)
        body(&nested)
        bytes = nested.finish()
    }

    /// An array of `count` objects, the `i`-th one's members written by `element(i, &writer)`.
    public mutating func member(_ key: String, objects count: Int, element: (Int, inout JSONObjectWriter) -> Void) {
        self.key(key)
        bytes.append(UInt8(ascii: "["))
        for i in 0..<count {
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            var nested = JSONObjectWriter(continuing: &bytes, requireCanonicalOrder: checksOrder)
            element(i, &nested)
            bytes = nested.finish()
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// Any value, written as `serialized()` (or `canonicalized()`) writes it.
    public mutating func member(_ key: String, value: JSONValue, canonical: Bool = false) {
        self.key(key)
        value.write(into: &bytes, canonical: canonical)
    }

    /// The object's bytes, closed.
    public consuming func finish() -> [UInt8] {
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// The finished object read back as a tree, for the callers of a shape that need one: the
    /// writer stays the shape's one definition, and the tree cannot drift from the bytes.
    public consuming func finishedValue() -> JSONValue { Self.tree(of: finish()) }

    /// An object whose members `body` writes, as a tree (`finishedValue`).
    public static func value(capacity: Int = 256, _ body: (inout JSONObjectWriter) -> Void) -> JSONValue {
        var writer = JSONObjectWriter(capacity: capacity)
        body(&writer)
        return writer.finishedValue()
    }

    /// Text a `JSONObjectWriter` finished, read back as a tree: no depth or member cap (the text
    /// is the server's own, not a request's).
    public static func tree(of text: [UInt8]) -> JSONValue {
        do { return try JSONParser.parse(text, maxDepth: Int.max, maxMembers: Int.max) } catch {
            // Unreachable: keys and strings are Swift strings (valid UTF-8), escaped by `writeString`.
            preconditionFailure("JSONObjectWriter wrote text JSONParser refuses: \(error)")
        }
    }
}
