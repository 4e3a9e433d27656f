/// An email address as Latchkey stores and compares it (SPEC "Recovery": trimmed, domain
/// lower-cased; the local part is kept as given, RFC 5321 §2.4). Deliberately strict about what it
/// takes: one `@`, no spaces, quotes, angle brackets or control characters, a dotted domain — an
/// address that could break a mail header or an SMTP command never gets this far.
/// Never logged, never in metrics or events (`description` hides it).
struct EmailAddress: Sendable, Hashable, CustomStringConvertible {
    /// The normalised form.
    let value: String

    init?(_ raw: String) {
        let trimmed = raw.trimmed
        guard trimmed.utf8.count <= 254, let at = trimmed.lastIndex(of: "@") else { return nil }
        let local = trimmed[..<at], domain = trimmed[trimmed.index(after: at)...]
        guard !local.isEmpty, local.utf8.count <= 64, !domain.isEmpty, domain.contains("."),
              !domain.hasPrefix("."), !domain.hasSuffix("."), !domain.contains("..") else { return nil }
        let forbidden: Set<Character> = ["@", " ", "\"", "<", ">", "(", ")", ",", ";", ":", "\\", "[", "]"]
        for c in trimmed.unicodeScalars where c.value < 0x21 || c.value == 0x7F { _ = c; return nil }
        guard !local.contains(where: { forbidden.contains($0) }), !domain.contains(where: { forbidden.contains($0) }) else { return nil }
        guard domain.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." }) else { return nil }
        value = String(local) + "@" + domain.lowercased()
    }

    var description: String { "<email address>" }
}
