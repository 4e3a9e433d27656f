import Foundation
import JSON

// What the /authorize page shows, in words (SPEC "OpenID Provider", "The `/authorize` page"): the
// language, the client's host, every scope and every member of every `authorizationDetails` entry,
// and what the approve button says. The lines are what a step-up approves, so the server makes them
// once, here, and the page renders them as text; nothing here knows HTTP, SQL or the clock.

enum ConsentDisplay {
    /// The page's language: the switcher's `?lang=` first, then the first of the space-separated
    /// `ui_locales` (OpenID Connect Core §3.1.2.1) there is a catalog for, then `Accept-Language`,
    /// else English — the order SPEC "The `/authorize` page" gives.
    static func language(uiLocales: String?, acceptLanguage: String?, chosen: String?) -> String {
        if let chosen, let tag = I18nCatalogs.match(chosen) { return tag }
        for tag in (uiLocales ?? "").split(separator: " ").prefix(16) {
            if let match = I18nCatalogs.match(String(tag)) { return match }
        }
        return I18nCatalogs.negotiate(acceptLanguage) ?? "en"
    }

    /// The lines the page shows and a step-up binds: the app and where it sends the answer, every
    /// scope in words, then for every entry of `details` (`.null` or an array of objects) every
    /// member, none dropped, none shortened.
    static func lines(clientName: String, redirectURI: String, scopes: [String], details: JSONValue, lang: String) -> [String] {
        let w = ConsentWords.of(lang)
        var out = [w.app(visible(clientName), host(ofRedirectURI: redirectURI, lang: lang))]
        out += scopes.map { w.scopes[$0] ?? w.member("scope", visible($0)) }
        let entries = details.arrayValue ?? []
        for (index, entry) in entries.enumerated() {
            let type = visible(entry["type"]?.stringValue ?? "")
            out.append(entries.count == 1 ? w.type(type) : w.item(index + 1, entries.count, type))
            out += memberLines(entry, w)
        }
        if !details.isNull && details.arrayValue == nil { out += flatten(details, path: "authorization_details", w) }
        return out
    }

    /// The host of an http(s) redirect URI; for a loopback one "an app on this device", for a
    /// private-use scheme (RFC 8252 §7.1) "the app <scheme>", translated.
    static func host(ofRedirectURI uri: String, lang: String) -> String {
        let w = ConsentWords.of(lang)
        guard let url = URLComponents(string: uri), let scheme = url.scheme?.lowercased() else { return visible(uri) }
        guard scheme == "http" || scheme == "https" else { return w.appScheme(visible(scheme)) }
        let host = (url.host ?? "").lowercased()
        if host == "localhost" || host.hasSuffix(".localhost") || RedirectURIs.isLoopbackIP(host) { return w.thisDevice }
        return host.isEmpty ? visible(uri) : visible(host)
    }

    /// What the approve button says: what one entry pays and to whom, how many entries, or "Allow"
    /// for a sign-in that approves no details.
    static func approveLabel(details: JSONValue, lang: String) -> String {
        let w = ConsentWords.of(lang)
        guard let entries = details.arrayValue, !entries.isEmpty else { return w.allow }
        guard entries.count == 1, let entry = entries.first else { return w.approveAll(entries.count) }
        guard let key = amountKeys.first(where: { entry[$0]?.objectValue != nil }), let money = entry[key] else { return w.approve }
        let amount = ConsentMoney.format(money, lang: lang)
        let payee = entry["creditorName"]?.stringValue ?? entry["creditorAccount"]?["iban"]?.stringValue
        return payee.map { w.approvePay(amount, visible($0)) } ?? w.approveAmount(amount)
    }

    // MARK: Members

    /// The members that carry an amount object (`{"amount","currency"}`), as RFC 9396's examples
    /// and the Open Banking payment types name them.
    static let amountKeys = ["instructedAmount", "amount", "transactionAmount"]

    /// One line per member (the `type` is in the entry's heading): the payment members in words,
    /// anything else as "name: value", nested objects as "a.b: value".
    static func memberLines(_ entry: JSONValue, _ w: ConsentWords) -> [String] {
        var out: [String] = []
        for (key, value) in entry.objectValue ?? [] where key != "type" || value.stringValue == nil {
            switch (key, value) {
            case (_, .object(let members)) where amountKeys.contains(key) && value["amount"] != nil:
                out.append(w.label(.amount, ConsentMoney.format(value, lang: w.lang)))
                let rest = JSONValue.object(members.filter { $0.key != "amount" && $0.key != "currency" })
                out += flatten(rest, path: key, w, skipEmpty: true)
            case ("creditorName", .string(let s)): out.append(w.label(.payee, visible(s)))
            case ("creditorAccount", .object), ("debtorAccount", .object):
                let iban = value["iban"]?.stringValue
                if let iban { out.append(w.label(key == "creditorAccount" ? .payeeIBAN : .payerIBAN, visible(iban))) }
                let rest = JSONValue.object((value.objectValue ?? []).filter { iban == nil || $0.key != "iban" })
                out += flatten(rest, path: key, w, skipEmpty: iban != nil)
            case ("remittanceInformationUnstructured", .string(let s)): out.append(w.label(.reference, visible(s)))
            default: out += flatten(value, path: key, w)
            }
        }
        return out
    }

    /// "a.b: value" for every leaf; an array of plain values joined with ", ", an array of objects
    /// numbered from 1 ("a.1.b"); an empty object or array still gets its line ("a: {}").
    static func flatten(_ value: JSONValue, path: String, _ w: ConsentWords, skipEmpty: Bool = false) -> [String] {
        switch value {
        case .object(let members):
            if members.isEmpty { return skipEmpty ? [] : [w.member(visible(path), "{}")] }
            return members.flatMap { flatten($0.value, path: path + "." + $0.key, w) }
        case .array(let items):
            if items.isEmpty { return [w.member(visible(path), "[]")] }
            let plain = items.compactMap(scalar)
            if plain.count == items.count { return [w.member(visible(path), plain.joined(separator: ", "))] }
            return items.enumerated().flatMap { flatten($0.element, path: "\(path).\($0.offset + 1)", w) }
        default:
            return [w.member(visible(path), scalar(value) ?? "")]
        }
    }

    /// A JSON string, number, boolean or null as text; nil for an object or array.
    static func scalar(_ value: JSONValue) -> String? {
        switch value {
        case .string(let s): visible(s)
        case .number, .bool, .null: String(decoding: value.serialized(), as: UTF8.self)
        case .object, .array: nil
        }
    }

    /// The text with every control and invisible formatting character (a right-to-left override
    /// that would show an IBAN backwards, a zero-width space, a line break) written out as
    /// "[U+XXXX]": what is approved is what is shown, character for character.
    static func visible(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .unassigned, .privateUse, .surrogate:
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "[U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
