internal import CCBOR

/// Strict CBOR decoding on top of libcbor.
///
/// libcbor 0.8 accepts trailing bytes, duplicate map keys and indefinite lengths, and allocates
/// whatever element count a header claims. WebAuthn data never needs any of that, and accepting it
/// invites parser differentials, so a bounds pre-scan refuses those inputs before libcbor sees them
/// (indefinite lengths, counts larger than the bytes left, nesting deeper than `maxDepth`, maps of
/// more than `maxMapEntries` entries), and the conversion from libcbor's tree refuses duplicate keys
/// (found with a hash set: linear) and invalid UTF-8.
///
/// 256 entries per map: WebAuthn's maps (attestation object, statements, COSE keys, extensions)
/// hold a handful, so a map of thousands is refused by its header before libcbor allocates it.
public enum CBORDecoder {
    public static let defaultMaxDepth = 8
    public static let defaultMaxBytes = 1 << 20
    public static let defaultMaxMapEntries = 256

    /// Decodes exactly one item that must span all of `bytes`.
    public static func decode(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth, maxBytes: Int = defaultMaxBytes,
                              maxMapEntries: Int = defaultMaxMapEntries) throws(CBORError) -> CBORValue {
        let (value, used) = try decodePrefix(bytes[...], maxDepth: maxDepth, maxBytes: maxBytes, maxMapEntries: maxMapEntries)
        guard used == bytes.count else { throw CBORError(.trailingBytes, "\(bytes.count - used) bytes after the item") }
        return value
    }

    /// Decodes the first item of `bytes` and returns it with the number of bytes it used
    /// (authenticator data holds a COSE key followed by more CBOR).
    public static func decodePrefix(_ bytes: ArraySlice<UInt8>, maxDepth: Int = defaultMaxDepth, maxBytes: Int = defaultMaxBytes,
                                    maxMapEntries: Int = defaultMaxMapEntries) throws(CBORError) -> (CBORValue, Int) {
        guard !bytes.isEmpty else { throw CBORError(.truncated, "no data") }
        guard bytes.count <= maxBytes else { throw CBORError(.tooLarge, "more than \(maxBytes) bytes") }
        let length = try bytes.withUnsafeBufferPointer { buffer throws(CBORError) in
            var scanner = BoundsScanner(bytes: buffer, maxDepth: maxDepth, maxMapEntries: maxMapEntries)
            try scanner.skipItem(depth: 0)
            return scanner.index
        }
        return try bytes.withUnsafeBufferPointer { buffer throws(CBORError) in
            var result = cbor_load_result()
            guard let item = cbor_load(buffer.baseAddress, length, &result) else {
                switch result.error.code {
                case CBOR_ERR_NOTENOUGHDATA, CBOR_ERR_NODATA: throw CBORError(.truncated, "item is truncated")
                case CBOR_ERR_MEMERROR: throw CBORError(.tooLarge, "item too large")
                default: throw CBORError(.malformed, "malformed item at byte \(result.error.position)")
                }
            }
            defer { var owned: UnsafeMutablePointer<cbor_item_t>? = item; cbor_decref(&owned) }
            guard result.read == length else { throw CBORError(.malformed, "libcbor read an unexpected length") }
            return (try convert(item, depth: 0, maxDepth: maxDepth), length)
        }
    }

    private static func convert(_ item: UnsafeMutablePointer<cbor_item_t>, depth: Int, maxDepth: Int) throws(CBORError) -> CBORValue {
        switch cbor_typeof(item) {
        case CBOR_TYPE_UINT: return .unsigned(cbor_get_int(item))
        case CBOR_TYPE_NEGINT: return .negative(cbor_get_int(item))
        case CBOR_TYPE_BYTESTRING:
            guard cbor_bytestring_is_definite(item) else { throw CBORError(.indefiniteLength, "indefinite byte string") }
            let count = cbor_bytestring_length(item)
            guard count > 0, let base = cbor_bytestring_handle(item) else { return .bytes([]) }
            return .bytes(Array(UnsafeBufferPointer(start: base, count: count)))
        case CBOR_TYPE_STRING:
            guard cbor_string_is_definite(item) else { throw CBORError(.indefiniteLength, "indefinite text string") }
            let count = cbor_string_length(item)
            guard count > 0, let base = cbor_string_handle(item) else { return .text("") }
            guard let s = String(validating: UnsafeBufferPointer(start: base, count: count), as: UTF8.self) else {
                throw CBORError(.invalidUTF8, "text string is not UTF-8")
            }
            return .text(s)
        case CBOR_TYPE_ARRAY:
            guard depth < maxDepth else { throw CBORError(.tooDeep, "nesting deeper than \(maxDepth)") }
            guard cbor_array_is_definite(item) else { throw CBORError(.indefiniteLength, "indefinite array") }
            let count = cbor_array_size(item)
            guard count > 0, let handle = cbor_array_handle(item) else { return .array([]) }
            var out: [CBORValue] = []
            out.reserveCapacity(count)
            for i in 0..<count {
                guard let child = handle[i] else { throw CBORError(.malformed, "missing array element") }
                out.append(try convert(child, depth: depth + 1, maxDepth: maxDepth))
            }
            return .array(out)
        case CBOR_TYPE_MAP:
            guard depth < maxDepth else { throw CBORError(.tooDeep, "nesting deeper than \(maxDepth)") }
            guard cbor_map_is_definite(item) else { throw CBORError(.indefiniteLength, "indefinite map") }
            let count = cbor_map_size(item)
            guard count > 0, let handle = cbor_map_handle(item) else { return .map([]) }
            var out: [CBORPair] = []
            out.reserveCapacity(count)
            var keys = Set<CBORValue>()
            keys.reserveCapacity(count)
            for i in 0..<count {
                guard let k = handle[i].key, let v = handle[i].value else { throw CBORError(.malformed, "missing map entry") }
                let key = try convert(k, depth: depth + 1, maxDepth: maxDepth)
                guard keys.insert(key).inserted else { throw CBORError(.duplicateMapKey, "duplicate map key") }
                out.append(CBORPair(key, try convert(v, depth: depth + 1, maxDepth: maxDepth)))
            }
            return .map(out)
        case CBOR_TYPE_TAG:
            guard depth < maxDepth else { throw CBORError(.tooDeep, "nesting deeper than \(maxDepth)") }
            let tag = cbor_tag_value(item)
            // cbor_tag_item returns a new reference.
            guard let inner = cbor_tag_item(item) else { throw CBORError(.malformed, "empty tag") }
            defer { var owned: UnsafeMutablePointer<cbor_item_t>? = inner; cbor_decref(&owned) }
            return .tagged(tag, CBORValue.Box(try convert(inner, depth: depth + 1, maxDepth: maxDepth)))
        case CBOR_TYPE_FLOAT_CTRL:
            if cbor_float_ctrl_is_ctrl(item) {
                switch cbor_ctrl_value(item) {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                case 23: return .undefined
                case let v: return .simple(v)
                }
            }
            return .float(cbor_float_get_float(item))
        default:
            throw CBORError(.malformed, "unknown item type")
        }
    }
}

/// Walks item heads without building anything, so that libcbor is only handed input whose claimed
/// sizes fit in the bytes present and whose nesting is bounded.
struct BoundsScanner {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    let maxMapEntries: Int
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int, maxMapEntries: Int = CBORDecoder.defaultMaxMapEntries) {
        self.bytes = bytes
        self.maxDepth = maxDepth
        self.maxMapEntries = maxMapEntries
    }

    mutating func readArgument(_ info: UInt8) throws(CBORError) -> UInt64 {
        func take(_ n: Int, _ s: inout BoundsScanner) throws(CBORError) -> UInt64 {
            guard s.index + n <= s.bytes.count else { throw CBORError(.truncated, "truncated item head") }
            var v: UInt64 = 0
            for i in 0..<n { v = v << 8 | UInt64(s.bytes[s.index + i]) }
            s.index += n
            return v
        }
        switch info {
        case 0..<24: return UInt64(info)
        case 24: return try take(1, &self)
        case 25: return try take(2, &self)
        case 26: return try take(4, &self)
        case 27: return try take(8, &self)
        case 31: throw CBORError(.indefiniteLength, "indefinite length")
        default: throw CBORError(.malformed, "reserved additional information \(info)")
        }
    }

    mutating func skipItem(depth: Int) throws(CBORError) {
        guard index < bytes.count else { throw CBORError(.truncated, "item is truncated") }
        let initial = bytes[index]
        index += 1
        let major = initial >> 5
        let info = initial & 0x1F
        let remaining = { (s: BoundsScanner) in UInt64(s.bytes.count - s.index) }
        switch major {
        case 0, 1: _ = try readArgument(info)
        case 2, 3:
            let length = try readArgument(info)
            guard length <= remaining(self) else { throw CBORError(.truncated, "string longer than the input") }
            index += Int(length)
        case 4, 5:
            guard depth < maxDepth else { throw CBORError(.tooDeep, "nesting deeper than \(maxDepth)") }
            let count = try readArgument(info)
            if major == 5, count > UInt64(maxMapEntries) {
                throw CBORError(.tooLarge, "map of \(count) entries (more than \(maxMapEntries))")
            }
            let items = major == 4 ? count : count.multipliedReportingOverflow(by: 2).partialValue
            guard count <= remaining(self), items <= remaining(self) else { throw CBORError(.truncated, "more elements claimed than bytes present") }
            for _ in 0..<items { try skipItem(depth: depth + 1) }
        case 6:
            guard depth < maxDepth else { throw CBORError(.tooDeep, "nesting deeper than \(maxDepth)") }
            _ = try readArgument(info)
            try skipItem(depth: depth + 1)
        default:  // 7: simple values and floats
            switch info {
            case 0..<24: break
            case 24:
                guard index < bytes.count else { throw CBORError(.truncated, "truncated simple value") }
                guard bytes[index] >= 32 else { throw CBORError(.malformed, "non-canonical simple value") }
                index += 1
            case 25, 26, 27: _ = try readArgument(info)
            case 31: throw CBORError(.malformed, "unexpected break")
            default: throw CBORError(.malformed, "reserved simple value")
            }
        }
    }
}
