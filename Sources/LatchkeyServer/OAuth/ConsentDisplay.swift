import Foundation
import JSON

// Placeholder until the page branch lands (same API): English lines, every member shown.
enum ConsentDisplay {
    static func language(uiLocales: String?, acceptLanguage: String?, chosen: String?) -> String {
        if let chosen, let m = I18nCatalogs.match(chosen) { return m }
        for tag in (uiLocales ?? "").split(separator: " ") { if let m = I18nCatalogs.match(String(tag)) { return m } }
        return I18nCatalogs.negotiate(acceptLanguage) ?? "en"
    }
    static func lines(clientName: String, redirectURI: String, scopes: [String], details: JSONValue, lang: String) -> [String] {
        var out = scopes.map(Scopes.words)
        for d in details.arrayValue ?? [] { out.append(d.text) }
        return out
    }
    static func host(ofRedirectURI uri: String, lang: String) -> String { URLComponents(string: uri)?.host ?? uri }
    static func approveLabel(details: JSONValue, lang: String) -> String { details == .null ? "Allow" : "Approve" }
}
