import JSON

// The words and the money format of ConsentDisplay, in the web app's four languages (SPEC "The
// `/authorize` page"). Written out here rather than taken from the platform's locale data, which
// Foundation on Linux does not always carry: the same request reads the same on every server.

/// The consent page's phrases in one language; `{name}` placeholders are filled in one pass, so a
/// client name or payee that contains "{payee}" stays as it was sent.
struct ConsentWords: Sendable {
    enum Label: Sendable { case amount, payee, payeeIBAN, payerIBAN, reference }

    let lang: String
    let colon: String
    let labels: [Label: String]
    /// `Scopes.supported` in words (OAuthProtocol.swift's `Scopes.words` is the English).
    let scopes: [String: String]
    let phrases: [String: String]

    static func of(_ lang: String) -> ConsentWords { all.first { $0.lang == lang } ?? en }

    func label(_ label: Label, _ value: String) -> String { (labels[label] ?? "") + colon + value }
    /// Any other member, under its JSON name: "name: value".
    func member(_ name: String, _ value: String) -> String { name + ": " + value }

    func app(_ client: String, _ host: String) -> String { fill("app", ["client": client, "host": host]) }
    func appScheme(_ scheme: String) -> String { fill("appScheme", ["scheme": scheme]) }
    var thisDevice: String { fill("thisDevice", [:]) }
    func type(_ type: String) -> String { fill("type", ["type": type]) }
    func item(_ n: Int, _ count: Int, _ type: String) -> String { fill("item", ["n": String(n), "count": String(count), "type": type]) }
    var allow: String { fill("allow", [:]) }
    var approve: String { fill("approve", [:]) }
    func approveAll(_ count: Int) -> String { fill("approveAll", ["count": String(count)]) }
    func approvePay(_ amount: String, _ payee: String) -> String { fill("approvePay", ["amount": amount, "payee": payee]) }
    func approveAmount(_ amount: String) -> String { fill("approveAmount", ["amount": amount]) }

    func fill(_ key: String, _ values: [String: String]) -> String {
        let template = phrases[key] ?? ConsentWords.en.phrases[key] ?? key
        var out = ""
        var rest = Substring(template)
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}"), let value = values[String(rest[rest.index(after: open)..<close])] else {
                out.append("{")
                rest = rest[rest.index(after: open)...]
                continue
            }
            out += value
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    static let all = [en, de, pl, zhHans]

    static let en = ConsentWords(
        lang: "en", colon: ": ",
        labels: [.amount: "Amount", .payee: "Payee", .payeeIBAN: "Payee's account (IBAN)", .payerIBAN: "From account (IBAN)",
                 .reference: "Reference"],
        scopes: ["openid": "Sign you in with your Latchkey account", "profile": "See your username and display name",
                 "email": "See your verified email address", "offline_access": "Stay signed in when you are not using it"],
        phrases: ["app": "App: {client} ({host})", "appScheme": "the app {scheme}", "thisDevice": "an app on this device",
                  "type": "Type: {type}", "item": "Item {n} of {count}, type: {type}", "allow": "Allow", "approve": "Approve",
                  "approveAll": "Approve all {count}", "approvePay": "Approve {amount} to {payee}", "approveAmount": "Approve {amount}"])

    static let de = ConsentWords(
        lang: "de", colon: ": ",
        labels: [.amount: "Betrag", .payee: "Empfänger", .payeeIBAN: "Konto des Empfängers (IBAN)", .payerIBAN: "Belastetes Konto (IBAN)",
                 .reference: "Verwendungszweck"],
        scopes: ["openid": "Sie mit Ihrem Latchkey-Konto anmelden", "profile": "Ihren Benutzernamen und Anzeigenamen sehen",
                 "email": "Ihre bestätigte E-Mail-Adresse sehen", "offline_access": "Angemeldet bleiben, auch wenn Sie die App nicht nutzen"],
        phrases: ["app": "App: {client} ({host})", "appScheme": "die App {scheme}", "thisDevice": "eine App auf diesem Gerät",
                  "type": "Art: {type}", "item": "Posten {n} von {count}, Art: {type}", "allow": "Zulassen", "approve": "Freigeben",
                  "approveAll": "Alle {count} freigeben", "approvePay": "{amount} an {payee} freigeben", "approveAmount": "{amount} freigeben"])

    static let pl = ConsentWords(
        lang: "pl", colon: ": ",
        labels: [.amount: "Kwota", .payee: "Odbiorca", .payeeIBAN: "Rachunek odbiorcy (IBAN)", .payerIBAN: "Z rachunku (IBAN)",
                 .reference: "Tytuł przelewu"],
        scopes: ["openid": "Logować Cię za pomocą konta Latchkey", "profile": "Widzieć Twoją nazwę użytkownika i nazwę wyświetlaną",
                 "email": "Widzieć Twój zweryfikowany adres e-mail", "offline_access": "Mieć dostęp także wtedy, gdy z niej nie korzystasz"],
        phrases: ["app": "Aplikacja: {client} ({host})", "appScheme": "aplikacja {scheme}", "thisDevice": "aplikacja na tym urządzeniu",
                  "type": "Typ: {type}", "item": "Pozycja {n} z {count}, typ: {type}", "allow": "Zezwól", "approve": "Zatwierdź",
                  "approveAll": "Zatwierdź wszystkie ({count})", "approvePay": "Zatwierdź {amount} dla {payee}", "approveAmount": "Zatwierdź {amount}"])

    static let zhHans = ConsentWords(
        lang: "zh-Hans", colon: "：",
        labels: [.amount: "金额", .payee: "收款人", .payeeIBAN: "收款账户（IBAN）", .payerIBAN: "付款账户（IBAN）", .reference: "附言"],
        scopes: ["openid": "使用您的 Latchkey 账户为您登录", "profile": "查看您的用户名和显示名称",
                 "email": "查看您已验证的电子邮件地址", "offline_access": "在您未使用时保持登录"],
        phrases: ["app": "应用：{client}（{host}）", "appScheme": "应用 {scheme}", "thisDevice": "此设备上的应用",
                  "type": "类型：{type}", "item": "第 {n} 项（共 {count} 项），类型：{type}", "allow": "允许", "approve": "批准",
                  "approveAll": "批准全部 {count} 项", "approvePay": "批准向 {payee} 支付 {amount}", "approveAmount": "批准 {amount}"])
}

/// An RFC 9396 amount object (`{"amount":"42.00","currency":"EUR"}`, the amount a decimal string
/// or a JSON number) as the language writes money: €42.00 (en, zh-Hans), 42,00 € (de, pl). The
/// digits are never rounded: more decimals than the currency has are all shown. A currency without
/// a symbol here reads "42.00 XYZ"; an amount that is no plain decimal is shown as it was sent.
enum ConsentMoney {
    static let nbsp = "\u{00A0}"

    /// ISO 4217 minor units where they are not 2.
    static let minorDigits: [String: Int] = ["JPY": 0, "KRW": 0, "ISK": 0, "CLP": 0, "VND": 0, "UGX": 0, "XAF": 0, "XOF": 0,
                                             "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3]

    /// The symbols each language writes (CLDR's, with "US$" where "$" alone would be ambiguous).
    static let symbols: [String: [String: String]] = [
        "en": ["EUR": "€", "GBP": "£", "USD": "US$", "JPY": "JP¥", "CNY": "CN¥", "CHF": "CHF"],
        "de": ["EUR": "€", "GBP": "£", "USD": "$", "JPY": "¥", "CNY": "CN¥", "CHF": "CHF"],
        "pl": ["EUR": "€", "PLN": "zł", "GBP": "GBP", "USD": "USD", "CHF": "CHF"],
        "zh-Hans": ["EUR": "€", "GBP": "£", "USD": "US$", "JPY": "JP¥", "CNY": "¥", "CHF": "CHF"],
    ]

    static func format(_ money: JSONValue, lang: String) -> String {
        // A currency that is no string still shows, as its JSON.
        let code = money["currency"].map { ConsentDisplay.scalar($0) ?? ConsentDisplay.visible(String(decoding: $0.serialized(), as: UTF8.self)) } ?? ""
        let raw = money["amount"].flatMap(ConsentDisplay.scalar) ?? ""
        let iso = code.utf8.count == 3 && code.utf8.allSatisfy { $0 >= 0x41 && $0 <= 0x5A }
        guard let number = decimal(raw, minor: iso ? minorDigits[code] ?? 2 : nil, lang: lang) else {
            return [raw, code].filter { !$0.isEmpty }.joined(separator: nbsp)
        }
        guard !code.isEmpty else { return number.sign + number.digits }
        let symbol = iso ? symbols[lang]?[code] : nil
        switch lang {
        case "de", "pl": return number.sign + number.digits + nbsp + (symbol ?? code)
        default:
            guard let symbol else { return number.sign + number.digits + nbsp + code }
            return number.sign + symbol + (symbol.allSatisfy(\.isLetter) ? nbsp : "") + number.digits
        }
    }

    /// A plain decimal ("-1234.5") grouped and padded for the language, or nil for anything else
    /// (an exponent, a comma, letters), which is then shown as sent.
    static func decimal(_ text: String, minor: Int?, lang: String) -> (sign: String, digits: String)? {
        var body = Substring(text)
        let sign = body.first == "-" ? "-" : ""
        if !sign.isEmpty { body = body.dropFirst() }
        let parts = body.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } })
        else { return nil }
        var fraction = parts.count == 2 ? String(parts[1]) : ""
        if let minor, fraction.count < minor { fraction += String(repeating: "0", count: minor - fraction.count) }
        let (group, point, minimumGrouping): (String, String, Int) = switch lang {
        case "de": (".", ",", 4)
        case "pl": (nbsp, ",", 5)
        default: (",", ".", 4)
        }
        var grouped = String(whole)
        if whole.count >= minimumGrouping {
            grouped = ""
            for (i, c) in whole.enumerated() {
                if i > 0 && (whole.count - i) % 3 == 0 { grouped += group }
                grouped.append(c)
            }
        }
        return (sign, fraction.isEmpty ? grouped : grouped + point + fraction)
    }
}
