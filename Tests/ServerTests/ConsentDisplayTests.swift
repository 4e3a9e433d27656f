import HTTP
import JSON
@testable import LatchkeyServer
import Testing

/// SPEC "OpenID Provider", "The `/authorize` page": the page shows, and the step-up binds, every
/// member of every `authorizationDetails` entry in the person's language; nothing an app sends
/// rides along unseen.
@Suite("Consent display")
struct ConsentDisplayTests {
    static func details(_ json: String) throws -> JSONValue { try JSONParser.parse(Array(json.utf8), maxDepth: 8) }

    /// A payment with the members an attacker would hope stay unseen: the account the money goes
    /// to, the remittance text, and one member no one told the page about.
    static let payment = """
        [{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"42.00"},"creditorName":"Merchant A",
          "creditorAccount":{"iban":"DE02120300000000202051","bic":"BYLADEM1001"},
          "remittanceInformationUnstructured":"Invoice 2024-117 + fee","endToEndIdentification":"E2E-7",
          "x-routing":{"via":["fast","cheap"],"hops":2}}]
        """

    @Test("every member of a payment appears, in every language", arguments: I18nCatalogs.languages)
    func everyMember(lang: String) throws {
        let lines = ConsentDisplay.lines(clientName: "Demo shop", redirectURI: "https://shop.example/cb", scopes: ["openid", "profile"],
                                         details: try Self.details(Self.payment), lang: lang)
        let text = lines.joined(separator: "\n")
        for member in ["DE02120300000000202051", "BYLADEM1001", "Invoice 2024-117 + fee", "Merchant A", "E2E-7",
                       "endToEndIdentification", "x-routing.via: fast, cheap", "x-routing.hops: 2", "payment_initiation",
                       "Demo shop", "shop.example"] {
            #expect(text.contains(member), "\(lang) lacks \(member): \(lines)")
        }
        let amount = ["en": "€42.00", "de": "42,00\u{00A0}€", "pl": "42,00\u{00A0}€", "zh-Hans": "€42.00"][lang] ?? "?"
        #expect(text.contains(amount), "\(lang): \(lines)")
        // The English names of the payment members are not what a German or Chinese reader sees.
        if lang != "en" { #expect(!text.contains("Payee"), "\(lang): \(lines)") }
        // Scopes in words, in the language (Scopes.words is the English).
        #expect(lines.contains(ConsentWords.of(lang).scopes["profile"] ?? "—"))
        #expect(lines.count == 1 + 2 + 1 + 8, "\(lines)")
    }

    @Test("the English lines read as the person would read them")
    func englishLines() throws {
        let lines = ConsentDisplay.lines(clientName: "Demo shop", redirectURI: "https://shop.example/cb", scopes: ["openid"],
                                         details: try Self.details(Self.payment), lang: "en")
        #expect(lines == [
            "App: Demo shop (shop.example)",
            "Sign you in with your Latchkey account",
            "Type: payment_initiation",
            "Amount: €42.00",
            "Payee: Merchant A",
            "Payee's account (IBAN): DE02120300000000202051",
            "creditorAccount.bic: BYLADEM1001",
            "Reference: Invoice 2024-117 + fee",
            "endToEndIdentification: E2E-7",
            "x-routing.via: fast, cheap",
            "x-routing.hops: 2",
        ])
    }

    @Test("an unknown type's members, nested objects and arrays of objects all get their lines")
    func unknownMembers() throws {
        let details = try Self.details("""
            [{"type":"account_information","actions":["read"],"locations":[],"limits":{},"scope":{"accounts":[{"id":"A1"},{"id":"B2"}]},
              "flag":true,"nothing":null,"amount":{"amount":1234567.5,"currency":"XYZ","note":"daily"}},
             {"type":"payment_initiation","instructedAmount":{"currency":"JPY","amount":"1500"}}]
            """)
        let lines = ConsentDisplay.lines(clientName: "C", redirectURI: "com.example.app:/cb", scopes: [], details: details, lang: "en")
        #expect(lines == [
            "App: C (the app com.example.app)",
            "Item 1 of 2, type: account_information",
            "actions: read",
            "locations: []",
            "limits: {}",
            "scope.accounts.1.id: A1",
            "scope.accounts.2.id: B2",
            "flag: true",
            "nothing: null",
            "Amount: 1,234,567.50\u{00A0}XYZ",
            "amount.note: daily",
            "Item 2 of 2, type: payment_initiation",
            "Amount: JP¥1,500",
        ])
    }

    @Test("money in each language's way, never rounded", arguments: [
        ("en", "EUR", "1234.5", "€1,234.50"), ("de", "EUR", "1234.5", "1.234,50\u{00A0}€"),
        ("pl", "EUR", "1234.5", "1234,50\u{00A0}€"), ("pl", "PLN", "12345", "12\u{00A0}345,00\u{00A0}zł"),
        ("zh-Hans", "CNY", "42", "¥42.00"), ("en", "XYZ", "42.00", "42.00\u{00A0}XYZ"), ("de", "XYZ", "42.00", "42,00\u{00A0}XYZ"),
        ("en", "EUR", "0.001", "€0.001"), ("en", "EUR", "1e3", "1e3\u{00A0}EUR"), ("en", "CHF", "-5", "-CHF\u{00A0}5.00"),
        ("en", "eur", "5", "5\u{00A0}eur"),
    ])
    func money(lang: String, currency: String, amount: String, expected: String) {
        let value = JSONValue.object([("currency", .string(currency)), ("amount", .string(amount))])
        #expect(ConsentMoney.format(value, lang: lang) == expected)
    }

    @Test("invisible characters are written out, so an IBAN cannot be shown backwards")
    func invisibleCharacters() throws {
        let details = try Self.details(#"[{"type":"payment_initiation","creditorName":"Shop\u202E1234","remittanceInformationUnstructured":"a\nb"}]"#)
        let lines = ConsentDisplay.lines(clientName: "C\u{200B}", redirectURI: "https://x.example/", scopes: [], details: details, lang: "en")
        #expect(lines.contains("Payee: Shop[U+202E]1234"))
        #expect(lines.contains("Reference: a[U+000A]b"))
        #expect(lines.first == "App: C[U+200B] (x.example)")
    }

    @Test("the page's language: the switcher, then ui_locales, then Accept-Language, then English")
    func languageOrder() {
        #expect(ConsentDisplay.language(uiLocales: "pl", acceptLanguage: "de", chosen: "zh-Hans") == "zh-Hans")
        #expect(ConsentDisplay.language(uiLocales: "fr-CA pl de", acceptLanguage: "de", chosen: nil) == "pl")
        #expect(ConsentDisplay.language(uiLocales: "fr zh-TW", acceptLanguage: "de-AT,en;q=0.5", chosen: "xx") == "de")
        #expect(ConsentDisplay.language(uiLocales: "zh", acceptLanguage: nil, chosen: nil) == "zh-Hans")
        #expect(ConsentDisplay.language(uiLocales: nil, acceptLanguage: "fr, ja", chosen: nil) == "en")
        #expect(ConsentDisplay.language(uiLocales: "", acceptLanguage: nil, chosen: "") == "en")
    }

    @Test("where the answer goes: the host, the app's scheme, or this device", arguments: [
        ("https://Shop.Example:8443/cb?x=1", "en", "shop.example"), ("http://127.0.0.1:51234/cb", "en", "an app on this device"),
        ("http://[::1]/cb", "de", "eine App auf diesem Gerät"), ("http://localhost:3000/cb", "pl", "aplikacja na tym urządzeniu"),
        ("com.example.app:/oauth", "en", "the app com.example.app"), ("com.example.app:/oauth", "zh-Hans", "应用 com.example.app"),
    ])
    func host(uri: String, lang: String, expected: String) {
        #expect(ConsentDisplay.host(ofRedirectURI: uri, lang: lang) == expected)
    }

    @Test("the button says what it approves")
    func approveLabel() throws {
        let payment = try Self.details(Self.payment)
        #expect(ConsentDisplay.approveLabel(details: payment, lang: "en") == "Approve €42.00 to Merchant A")
        #expect(ConsentDisplay.approveLabel(details: payment, lang: "de") == "42,00\u{00A0}€ an Merchant A freigeben")
        #expect(ConsentDisplay.approveLabel(details: payment, lang: "zh-Hans") == "批准向 Merchant A 支付 €42.00")
        #expect(ConsentDisplay.approveLabel(details: .null, lang: "en") == "Allow")
        #expect(ConsentDisplay.approveLabel(details: .null, lang: "pl") == "Zezwól")
        let two = try Self.details(#"[{"type":"a"},{"type":"b"}]"#)
        #expect(ConsentDisplay.approveLabel(details: two, lang: "en") == "Approve all 2")
        let noAmount = try Self.details(#"[{"type":"a","x":1}]"#)
        #expect(ConsentDisplay.approveLabel(details: noAmount, lang: "de") == "Freigeben")
        let ibanOnly = try Self.details(#"[{"type":"p","instructedAmount":{"amount":"5","currency":"GBP"},"creditorAccount":{"iban":"GB33BUKB20201555555555"}}]"#)
        #expect(ConsentDisplay.approveLabel(details: ibanOnly, lang: "en") == "Approve £5.00 to GB33BUKB20201555555555")
    }

    @Test("a placeholder inside a value is not filled")
    func placeholdersInValues() throws {
        let details = try Self.details(#"[{"type":"p","instructedAmount":{"amount":"1","currency":"EUR"},"creditorName":"{amount}"}]"#)
        #expect(ConsentDisplay.approveLabel(details: details, lang: "en") == "Approve €1.00 to {amount}")
        #expect(ConsentDisplay.lines(clientName: "{host}", redirectURI: "https://a.example", scopes: [], details: .null, lang: "en")
            == ["App: {host} (a.example)"])
    }

    @Test("error pages: styled, in the language, escaped, never cached", arguments: I18nCatalogs.languages)
    func errorPages(lang: String) {
        let problems: [OAuthPages.Problem] = [.missingClientId, .unknownClient, .lookupFailed, .requestURIUnknown, .missingRedirectURI,
                                              .unregisteredRedirectURI, .duplicateParameter("<b>state</b>"), .idTokenHintRefused,
                                              .idTokenHintExpired, .clientIdMismatch, .postLogoutURIUnregistered, .tooManyRequests, .signedOut]
        for problem in problems {
            let texts = problem.texts
            for key in [texts.title, texts.message] + (texts.hint.map { [$0] } ?? []) {
                #expect(lang == "en" || OAuthPages.catalogs[lang]?[key] != nil, "\(lang) lacks \(key)")
            }
            let response = OAuthPages.page(problem, lang: lang, status: 400)
            let html = String(decoding: response.body, as: UTF8.self)
            #expect(response.status == 400)
            #expect(html.contains("<html lang=\"\(lang)\">"))
            #expect(html.contains("href=\"/app.css\"") && html.contains("class=\"topbar\"") && html.contains("class=\"card\""))
            #expect(html.contains(OAuthPages.escape(OAuthPages.text(texts.title, lang))))
            #expect(!html.contains("<b>state</b>") && !html.contains("{name}"))
            #expect(response.headers.contains { $0.0 == "Cache-Control" && $0.1 == "no-store" })
            #expect(response.headers.contains { $0.0 == "Content-Security-Policy" })
        }
        let dup = String(decoding: OAuthPages.page(.duplicateParameter("<b>state</b>"), lang: lang, status: 400).body, as: UTF8.self)
        #expect(dup.contains("<code>&lt;b&gt;state&lt;/b&gt;</code>"))
        #expect(OAuthPages.page(.unknownClient, lang: "xx", status: 400).headers.contains { $0.0 == "Content-Language" && $0.1 == "en" })
    }
}
