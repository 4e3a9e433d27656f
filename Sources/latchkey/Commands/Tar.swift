/// POSIX ustar archives (IEEE Std 1003.1, "pax" ustar interchange format) of regular files only:
/// what an evidence pack is. Written so that GNU tar, bsdtar and Python's tarfile read it, and read
/// back strictly: a checksum that does not add up, a name that climbs out of the pack (`..`, an
/// absolute path), a link, a device or a size past the end is refused, never followed.
enum Tar {
    struct Entry: Equatable {
        var name: String
        var bytes: [UInt8]
    }

    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    static let blockSize = 512

    /// The archive of `entries`, in that order, each a file of mode 0644 owned by uid/gid 0 with
    /// `modified` (Unix seconds) as its time, and the two zero blocks that end an archive.
    static func archive(_ entries: [Entry], modified: Int) throws(Malformed) -> [UInt8] {
        var out: [UInt8] = []
        for entry in entries {
            out += try header(name: entry.name, size: entry.bytes.count, modified: modified)
            out += entry.bytes
            out += [UInt8](repeating: 0, count: padding(entry.bytes.count))
        }
        out += [UInt8](repeating: 0, count: 2 * blockSize)
        return out
    }

    /// The files of an archive `archive` wrote (or any ustar/GNU archive of regular files and
    /// directories; directories are skipped).
    static func entries(_ archive: [UInt8]) throws(Malformed) -> [Entry] {
        var entries: [Entry] = []
        var offset = 0
        while offset + blockSize <= archive.count {
            let block = Array(archive[offset..<offset + blockSize])
            if block.allSatisfy({ $0 == 0 }) { return entries }
            guard checksum(block) == (try octal(block[148..<156], field: "checksum")) else {
                throw Malformed(description: "header at byte \(offset): checksum does not match")
            }
            let size = try octal(block[124..<136], field: "size")
            let type = block[156]
            var name = text(block[0..<100])
            // POSIX ustar ("ustar\0") has a name prefix at 345; GNU's "ustar " keeps other fields there.
            if Array(block[257..<263]) == Array("ustar".utf8) + [0] {
                let prefix = text(block[345..<500])
                if !prefix.isEmpty { name = prefix + "/" + name }
            }
            let start = offset + blockSize
            guard size <= archive.count - start else { throw Malformed(description: "\(name): size past the end of the archive") }
            switch type {
            case UInt8(ascii: "0"), 0:
                try checkName(name)
                entries.append(Entry(name: name, bytes: Array(archive[start..<start + size])))
            case UInt8(ascii: "5"):
                break
            default:
                throw Malformed(description: "\(name): only regular files belong in a pack (type \(Character(UnicodeScalar(type))))")
            }
            offset = start + size + padding(size)
        }
        throw Malformed(description: "the archive ends without its two zero blocks")
    }

    private static func header(name: String, size: Int, modified: Int) throws(Malformed) -> [UInt8] {
        try checkName(name)
        let nameBytes = Array(name.utf8)
        guard nameBytes.count <= 100 else { throw Malformed(description: "\(name): names longer than 100 bytes are not written") }
        var block = [UInt8](repeating: 0, count: blockSize)
        func put(_ bytes: [UInt8], at offset: Int) { for (i, b) in bytes.enumerated() { block[offset + i] = b } }
        func putOctal(_ value: Int, at offset: Int, width: Int) {
            let digits = String(value, radix: 8)
            put(Array((String(repeating: "0", count: max(0, width - 1 - digits.count)) + digits).utf8), at: offset)
        }
        put(nameBytes, at: 0)
        putOctal(0o644, at: 100, width: 8)
        putOctal(0, at: 108, width: 8)
        putOctal(0, at: 116, width: 8)
        putOctal(size, at: 124, width: 12)
        putOctal(modified, at: 136, width: 12)
        block[156] = UInt8(ascii: "0")
        put(Array("ustar".utf8) + [0], at: 257)
        put(Array("00".utf8), at: 263)
        put(Array("root".utf8), at: 265)
        put(Array("root".utf8), at: 297)
        // The checksum is taken with its own field as eight spaces, then written as six octal
        // digits, a NUL and a space.
        let sum = checksum(block)
        putOctal(sum, at: 148, width: 7)
        block[155] = UInt8(ascii: " ")
        return block
    }

    private static func checksum(_ block: [UInt8]) -> Int {
        var sum = 0
        for (i, b) in block.enumerated() { sum += (148..<156).contains(i) ? 32 : Int(b) }
        return sum
    }

    private static func padding(_ size: Int) -> Int { (blockSize - size % blockSize) % blockSize }

    private static func text(_ field: ArraySlice<UInt8>) -> String {
        String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)
    }

    private static func octal(_ field: ArraySlice<UInt8>, field name: String) throws(Malformed) -> Int {
        let digits = field.filter { $0 != 0 && $0 != UInt8(ascii: " ") }
        guard !digits.isEmpty, digits.count <= 11, let value = Int(String(decoding: digits, as: UTF8.self), radix: 8) else {
            throw Malformed(description: "a header's \(name) is not an octal number")
        }
        return value
    }

    private static func checkName(_ name: String) throws(Malformed) {
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.isEmpty, !name.hasPrefix("/"), !parts.contains(".."), !parts.contains(""), !name.utf8.contains(0) else {
            throw Malformed(description: "\(name): not a relative path inside the pack")
        }
    }
}
