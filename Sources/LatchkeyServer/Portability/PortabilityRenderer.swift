import JSON

/// An import's per-account outcome as its JSON Lines line:
/// `{"line","username","outcome","reason"|null}` (SPEC "Portability" → Import).
public enum PortabilityRenderer {
    public static func outcome(_ o: ImportOutcome) -> JSONValue {
        .object([("line", .number(Double(o.line))), ("username", o.username.map(JSONValue.string) ?? .null),
                 ("outcome", .string(o.outcome.rawValue)), ("reason", o.reason.map(JSONValue.string) ?? .null)])
    }

    /// A file refused before any account is read (a wrong checksum, a truncated file): one line,
    /// `line` 0, nothing imported.
    public static func fileRefused(_ reason: String) -> JSONValue {
        .object([("line", .number(0)), ("username", .null), ("outcome", .string("refused")), ("reason", .string(reason))])
    }
}

extension PortableFile {
    /// The file's verdict as the public API sees it.
    public static func verify(lines: some Sequence<[UInt8]>) -> (sha256: String?, reason: String?) {
        let check = Checksum()
        for l in lines { check.add(l) }
        switch check.finish() {
        case .whole(let sha, _): return (sha, nil)
        case .broken(let reason): return (nil, reason)
        }
    }
}
