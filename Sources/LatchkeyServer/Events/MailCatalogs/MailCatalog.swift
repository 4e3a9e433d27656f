import Foundation

/// Every mail Latchkey sends, in the account's language: one catalog per language beside
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
        case startedSubject, startedBody, startedByEmail, startedByCode, startedNow, startedLater
        /// Quorum approvals: an action about the account waits for approvers (with the veto link), or was approved by break glass.
        case approvalRequestedSubject, approvalRequestedBody, approvalBreakGlassSubject, approvalBreakGlassBody
        /// A count of hours, minutes or seconds in each plural form (`count(_:_:)` picks one).
        case hoursOne, hoursFew, hoursOther, minutesOne, minutesFew, minutesOther, secondsOne, secondsFew, secondsOther
        /// A moment for people (`dateTime(_:)`): `{day}`, `{month}` (the catalog's name or number), `{year}`, `{time}` (24-hour, UTC).
        case dateTime
    }

    /// A unit `count(_:_:)` writes out.
    enum Unit: Sendable { case hours, minutes, seconds }

    /// The plural forms the catalogs tell apart (CLDR's categories, as far as these languages need them).
    enum PluralForm: Sendable, Equatable { case one, few, other }

    /// The catalogs, by language tag (the web app's tags: web/i18n/<tag>.json).
    static let catalogs: [String: [Key: String]] = ["en": en, "de": de, "pl": pl, "zh-Hans": zhHans]
    /// Each catalog's twelve month names (or numbers), January first.
    static let months: [String: [String]] = ["en": enMonths, "de": deMonths, "pl": plMonths, "zh-Hans": zhHansMonths]

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

    /// The plural form of `n` in this language: English and German one (1) / other; Polish one (1),
    /// few (2–4, 22–24, … but not 12–14) and other (0, 5–21, 25–31, …); Chinese has one form.
    static func pluralForm(_ n: Int, language: String) -> PluralForm {
        switch language {
        case "pl":
            if n == 1 { return .one }
            let tens = n % 100
            return (2...4).contains(n % 10) && !(12...14).contains(tens) ? .few : .other
        case "zh-Hans": return .other
        default: return n == 1 ? .one : .other
        }
    }

    /// "1 hour", "5 hours"; "1 godzinę", "2 godziny", "5 godzin": `n` of `unit` in the right form.
    func count(_ n: Int, _ unit: Unit) -> String {
        let keys: (one: Key, few: Key, other: Key) = switch unit {
        case .hours: (.hoursOne, .hoursFew, .hoursOther)
        case .minutes: (.minutesOne, .minutesFew, .minutesOther)
        case .seconds: (.secondsOne, .secondsFew, .secondsOther)
        }
        let key = switch Self.pluralForm(n, language: language) { case .one: keys.one; case .few: keys.few; case .other: keys.other }
        return text(key, ["n": "\(n)"])
    }

    /// A wait of `seconds` in the largest whole unit that fits: hours from an hour, minutes from a minute.
    func duration(seconds: Int) -> String {
        if seconds >= 3600 { return count(seconds / 3600, .hours) }
        if seconds >= 60 { return count(seconds / 60, .minutes) }
        return count(seconds, .seconds)
    }

    /// A moment for the person reading: "7 December 2026, 07:30 UTC", "7. Dezember 2026, 07:30 UTC",
    /// "7 grudnia 2026, 07:30 UTC", "2026年12月7日 07:30 UTC". In UTC, and saying so: a mail does not
    /// know its reader's time zone.
    func dateTime(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        let names = Self.months[language] ?? Self.enMonths
        let time = String(format: "%02d:%02d", Int(parts.tm_hour), Int(parts.tm_min))
        return text(.dateTime, ["day": "\(parts.tm_mday)", "month": names[Int(parts.tm_mon)], "year": "\(parts.tm_year + 1900)",
                                "time": time])
    }

    subscript(_ key: Key, _ params: [String: String]) -> String { text(key, params) }
    subscript(_ key: Key) -> String { text(key) }
}
