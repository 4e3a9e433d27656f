import Foundation

/// Every mail Latchkey sends, in the account's language (issue 22): one catalog per language beside
/// this file (`MailCatalog+<tag>.swift`), keyed by `MailCatalog.Key`; `{name}` placeholders are
/// filled by `text(_:_:)`. The language is the one the account last used (`users.language`,
/// remembered from Accept-Language when a session starts or the address is set); English when
/// it never said or a catalog lacks a text. MailCatalogTests checks every key in every catalog.
struct MailCatalog: Sendable {
    enum Key: String, CaseIterable, Sendable {
        case codeFooter
        case signInSubject, signInIntro
        case recoveryCodeSubject, recoveryCodeIntro
        case verifySubject, verifyBody
        case changedSubject, changedBody
        case addedSubject, addedBody, addedHeld, addedNotHeld
        case revokedSubject, revokedBody, revokedByAdminBody
        case startedSubject, startedBody, startedByEmail, startedByCode, startedNow, startedInHours, startedInSeconds
    }

    /// The catalogs, by language tag (the web app's tags: web/i18n/<tag>.json).
    static let catalogs: [String: [Key: String]] = ["en": en, "de": de, "pl": pl, "zh-Hans": zhHans]

    let language: String

    /// The catalog for a stored tag (anything unknown: English).
    init(language: String?) {
        self.language = language.flatMap { Self.catalogs[$0] == nil ? nil : $0 } ?? "en"
    }

    /// The text for `key`, placeholders filled from `params`.
    func text(_ key: Key, _ params: [String: String] = [:]) -> String {
        var s = Self.catalogs[language]?[key] ?? Self.en[key] ?? key.rawValue
        for (name, value) in params { s = s.replacingOccurrences(of: "{\(name)}", with: value) }
        return s
    }

    subscript(_ key: Key, _ params: [String: String]) -> String { text(key, params) }
    subscript(_ key: Key) -> String { text(key) }
}
