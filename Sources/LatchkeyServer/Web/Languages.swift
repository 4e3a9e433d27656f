import Foundation

/// The languages the web app, the console and the mails speak: one catalog per language
/// in `web/i18n/<tag>.json` for the pages and `Events/MailCatalogs/MailCatalog+<tag>.swift` for
/// mail; English the fallback.
enum I18nCatalogs {
    static let languages = ["en", "de", "pl", "zh-Hans"]

    /// The catalog tag for a BCP 47 tag, as web/i18n.js matches: de-AT → de, zh / zh-CN / zh-Hans →
    /// zh-Hans (never zh-TW / zh-HK / zh-Hant), anything else by its primary subtag.
    static func match(_ tag: String) -> String? {
        let t = tag.trimmingCharacters(in: .whitespaces).lowercased()
        guard !t.isEmpty, t != "*" else { return nil }
        if t == "zh" || t.hasPrefix("zh-") {
            return ["hant", "-tw", "-hk", "-mo"].contains(where: { t.contains($0) }) ? nil : "zh-Hans"
        }
        let primary = t.split(separator: "-").first.map(String.init) ?? t
        return languages.first { $0.lowercased() == primary }
    }

    /// The best catalog for an `Accept-Language` header (RFC 9110 §12.5.4: by q, then order), or nil.
    static func negotiate(_ header: String?) -> String? {
        guard let header, header.utf8.count <= 512 else { return nil }
        var ranked: [(tag: String, q: Double, index: Int)] = []
        for (index, item) in header.split(separator: ",").prefix(32).enumerated() {
            let parts = item.split(separator: ";")
            guard let tag = parts.first.map(String.init) else { continue }
            var q = 1.0
            for p in parts.dropFirst() {
                let kv = p.trimmingCharacters(in: .whitespaces)
                if kv.hasPrefix("q="), let v = Double(kv.dropFirst(2)), v >= 0, v <= 1 { q = v }
            }
            if q > 0 { ranked.append((tag, q, index)) }
        }
        ranked.sort { $0.q != $1.q ? $0.q > $1.q : $0.index < $1.index }
        return ranked.lazy.compactMap { match($0.tag) }.first
    }
}
