#if canImport(Glibc)
import Glibc
#endif

/// One fuzz target: a name, what it covers, and the body libFuzzer calls with each input. A body
/// returns normally for every input, valid or not; a crash, an ASan report, a leak, a timeout or a
/// failed `FuzzCheck.require` (a property the parser must keep, such as "re-encoding round-trips")
/// is a finding.
struct FuzzTarget: Sendable {
    let name: String
    let summary: String
    let run: @Sendable ([UInt8]) -> Void

    init(_ name: String, _ summary: String, _ run: @escaping @Sendable ([UInt8]) -> Void) {
        self.name = name
        self.summary = summary
        self.run = run
    }
}

enum FuzzTargets {
    static let all: [FuzzTarget] = encodingTargets + webAuthnTargets + attestationTargets + internalTargets
        + cryptoTargets + tokenTargets + deviceKeyTargets + httpTargets

    static func named(_ name: String) -> FuzzTarget? { all.first { $0.name == name } }

    /// LATCHKEY_FUZZ_TARGET, read once; an unknown name stops the run at the first input.
    static let selected: FuzzTarget = {
        let name = getenv("LATCHKEY_FUZZ_TARGET").map { String(cString: $0) } ?? ""
        guard let target = named(name) else {
            FileHandleOut.stderr("LATCHKEY_FUZZ_TARGET=\(name) is not a fuzz target; one of: \(all.map(\.name).joined(separator: " "))\n")
            exit(64)
        }
        return target
    }()
}

/// A property every input must keep; a violation aborts, which libFuzzer reports as a crash with
/// the input saved.
enum FuzzCheck {
    static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition {
            FileHandleOut.stderr("fuzz property violated: \(message())\n")
            abort()
        }
    }
}

enum FileHandleOut {
    static func stderr(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBufferPointer { write(2, $0.baseAddress, $0.count) }
    }
}

/// Reading inputs for replay mode.
enum Replay {
    static func files(at path: String) -> [String] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [path] }
        guard (info.st_mode & S_IFMT) == S_IFDIR, let dir = opendir(path) else { return [path] }
        defer { closedir(dir) }
        var out: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name.hasPrefix(".") { continue }
            out.append(path + "/" + name)
        }
        return out.sorted()
    }

    static func read(_ path: String) -> [UInt8]? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&buffer, 1, buffer.count, f)
            if n > 0 { out.append(contentsOf: buffer[0..<n]) }
            if n < buffer.count { break }
        }
        return out
    }
}

/// The input split into a selector byte and the rest (targets that fuzz several entry points).
extension Array where Element == UInt8 {
    var selectorAndRest: (UInt8, [UInt8])? { isEmpty ? nil : (self[0], Array(self[1...])) }
}
