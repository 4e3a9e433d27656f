import Crypto
import JSON

/// What the person was shown when they approved a step-up (SPEC "Evidence"): the lines, in one
/// language, and who wrote them — Latchkey itself for its own `latchkey.*` actions, the app for an
/// app's own. A step-up with a display signs its hash (challenge version 2) and its receipt carries
/// it: `{"lang","lines","source"}`, hashed in RFC 8785 form, `source` included.
public struct StepUpDisplay: Sendable, Equatable {
    public enum Source: String, Sendable { case app, latchkey }

    public let source: Source
    /// A BCP 47 language tag.
    public let lang: String
    public let lines: [String]

    public static let maxLines = 32
    /// In Unicode scalars: a line is what fits on a phone's screen a few times over, not a document.
    public static let maxLineLength = 256
    /// The whole display in RFC 8785 form, in bytes.
    public static let maxCanonicalLength = 8192
    public static let maxLanguageLength = 35

    /// A display Latchkey rendered itself (its lines are the pages' lines, already made visible).
    public init(latchkey lang: String, lines: [String]) {
        source = .latchkey
        self.lang = lang
        self.lines = lines
    }

    /// An app's `"display":{"lang","lines"}` as sent with a step-up challenge, checked strictly: exactly
    /// those two members, `lang` a language tag, 1 to `maxLines` lines of 1 to `maxLineLength`
    /// characters with no control or line-breaking character. Anything else is `invalid_request`.
    public init(app value: JSONValue) throws(DeviceKeyError) {
        guard let members = value.objectValue else { throw .invalid("display must be an object {\"lang\",\"lines\"}") }
        for member in members where member.key != "lang" && member.key != "lines" {
            throw .invalid("display has an unknown member \"\(member.key)\" (only lang and lines)")
        }
        guard let lang = value["lang"]?.stringValue, Self.isLanguageTag(lang) else {
            throw .invalid("display.lang must be a language tag such as \"en\" or \"de-CH\"")
        }
        guard let items = value["lines"]?.arrayValue, !items.isEmpty, items.count <= Self.maxLines else {
            throw .invalid("display.lines must be an array of 1 to \(Self.maxLines) strings")
        }
        var lines: [String] = []
        for (index, item) in items.enumerated() {
            guard let line = item.stringValue else { throw .invalid("display.lines[\(index)] must be a string") }
            let count = line.unicodeScalars.count
            guard count >= 1, count <= Self.maxLineLength else {
                throw .invalid("display.lines[\(index)] must be 1 to \(Self.maxLineLength) characters")
            }
            guard line.unicodeScalars.allSatisfy(Self.isShowable) else {
                throw .invalid("display.lines[\(index)] holds a control or line-breaking character")
            }
            lines.append(line)
        }
        source = .app
        self.lang = lang
        self.lines = lines
        guard canonical.count <= Self.maxCanonicalLength else {
            throw .invalid("display is longer than \(Self.maxCanonicalLength) bytes in canonical form")
        }
    }

    /// A receipt's `display` object, or the one a ceremony state stored: exactly `lang`, `lines` (strings)
    /// and `source`. Its lines are taken as written: Latchkey's own may be longer or more than an app's.
    public init(receipt value: JSONValue) throws(DeviceKeyError) {
        guard let members = value.objectValue, members.count == 3 else { throw .invalid("display must be an object {\"lang\",\"lines\",\"source\"}") }
        guard let sourceName = value["source"]?.stringValue, let source = Source(rawValue: sourceName) else {
            throw .invalid("display.source must be \"latchkey\" or \"app\"")
        }
        guard let lang = value["lang"]?.stringValue else { throw .invalid("display.lang must be a string") }
        guard let items = value["lines"]?.arrayValue else { throw .invalid("display.lines must be an array of strings") }
        var lines: [String] = []
        for item in items {
            guard let line = item.stringValue else { throw .invalid("display.lines must be an array of strings") }
            lines.append(line)
        }
        self.source = source
        self.lang = lang
        self.lines = lines
    }

    /// `{"lang","lines","source"}`, members in RFC 8785 order.
    public var value: JSONValue {
        .object([("lang", .string(lang)), ("lines", .array(lines.map { .string($0) })), ("source", .string(source.rawValue))])
    }

    /// RFC 8785 bytes of `value`: what challenge version 2 hashes.
    public var canonical: [UInt8] { value.canonicalized() }

    /// SHA-256 of `canonical`.
    public var hash: [UInt8] { Digest.sha256(canonical) }

    /// A BCP 47 tag in its common shape: a 2–8 letter primary subtag, then subtags of 1–8 letters or
    /// digits, joined by hyphens, at most 35 characters.
    public static func isLanguageTag(_ tag: String) -> Bool {
        guard !tag.isEmpty, tag.utf8.count <= maxLanguageLength else { return false }
        let parts = tag.split(separator: "-", omittingEmptySubsequences: false)
        guard let first = parts.first, (2...8).contains(first.utf8.count), first.utf8.allSatisfy(isLetter) else { return false }
        return parts.dropFirst().allSatisfy { (1...8).contains($0.utf8.count) && $0.utf8.allSatisfy { isLetter($0) || (0x30...0x39).contains($0) } }
    }

    static func isLetter(_ b: UInt8) -> Bool { (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) }

    /// Not a control character, line or paragraph separator, or noncharacter.
    static func isShowable(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator, .surrogate, .unassigned: false
        default: !scalar.properties.isNoncharacterCodePoint
        }
    }
}
