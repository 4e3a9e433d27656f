import DeviceKeys
import JSON
@testable import LatchkeyServer
import Testing

/// SPEC "Evidence" → "What the person was shown": Latchkey renders the display of its own
/// `latchkey.*` actions from the action and the request's language, as its pages show them, and an
/// app's own action carries the app's display or none.
@Suite("Displays Latchkey renders")
struct LatchkeyDisplayTests {
    static func action(_ json: String) throws -> StepUpAction { try StepUpAction(try JSONParser.parse(Array(json.utf8), maxDepth: 8)) }

    @Test("An OpenID approval: the client, then the authorization details as the /authorize page lists them")
    func oauthAuthorization() throws {
        let details = try JSONParser.parse(Array(#"""
            [{"type":"payment_initiation","instructedAmount":{"amount":"123.50","currency":"EUR"},"creditorName":"Merchant A",
              "creditorAccount":{"iban":"DE02100100109307118603"},"remittanceInformationUnstructured":"Ref 42"}]
            """#.utf8), maxDepth: 8)
        let action = try StepUpAction.oauthAuthorization(clientId: "shop", requestId: "lkq_x", authorizationDetails: details)
        let display = LatchkeyDisplay.render(action, lang: "en")
        #expect(display.source == .latchkey && display.lang == "en")
        let page = ConsentDisplay.lines(clientName: "Shop", redirectURI: "https://shop.example/cb", scopes: ["openid"], details: details, lang: "en")
        // Every details line of the page, in its order, after the heading.
        #expect(display.lines == ["Approve the request of the app shop"] + page.suffix(from: 2) + ["requestId: lkq_x"])
        #expect(display.lines.contains { $0.contains("123.50") } && display.lines.contains { $0.contains("DE02100100109307118603") })
        let signIn = LatchkeyDisplay.render(try StepUpAction.oauthAuthorization(clientId: "shop", requestId: "lkq_y", authorizationDetails: .null),
                                            lang: "de")
        #expect(signIn.lines == ["Die Anfrage der App shop freigeben", "Bei der App anmelden, ohne weitere Angaben", "requestId: lkq_y"])
    }

    @Test("An admin change: method and path, then every member of the body; invisible characters written out")
    func adminChange() throws {
        let action = try StepUpAction.adminChange(method: "POST", path: "/admin/v1/origins", body: ["origin": "https://evil\u{202E}.example"])
        #expect(LatchkeyDisplay.render(action, lang: "en").lines == ["Admin change: POST /admin/v1/origins",
                                                                    "body.origin: https://evil[U+202E].example"])
        let delete = try StepUpAction.adminChange(method: "DELETE", path: "/admin/v1/webhooks/wh_1", body: nil)
        #expect(LatchkeyDisplay.render(delete, lang: "pl").lines == ["Zmiana administracyjna: DELETE /admin/v1/webhooks/wh_1",
                                                                    "Brak treści żądania"])
    }

    @Test("The account's own changes, and a latchkey.* type this build does not name: a heading and every member")
    func ownChanges() throws {
        #expect(LatchkeyDisplay.render(try StepUpAction.emailChange(email: "a@example.com"), lang: "zh-Hans").lines
                == ["将已验证的电子邮件地址更改为 a@example.com"])
        #expect(LatchkeyDisplay.render(try Self.action(#"{"type":"latchkey.approval","approvalId":"ap_1","actionHash":"abc"}"#), lang: "en").lines
                == ["Approve latchkey.approval", "approvalId: ap_1", "actionHash: abc"])
    }

    @Test("The step-up picks: Latchkey's display for latchkey.*, whatever was sent; the app's for its own; none without")
    func choice() throws {
        let appDisplay: JSONValue = ["lang": "en", "lines": ["Pay 5 EUR"]]
        let own = try StepUpService.display(for: try StepUpAction.passkeyAddition(), requested: appDisplay, acceptLanguage: "de-AT, en;q=0.5")
        #expect(own == StepUpDisplay(latchkey: "de", lines: ["Einen Passkey zum Konto hinzufügen"]))
        let fallback = try StepUpService.display(for: try StepUpAction.passkeyAddition(), requested: "junk", acceptLanguage: "fr")
        #expect(fallback?.lang == "en" && fallback?.source == .latchkey)
        let transfer = try Self.action(#"{"type":"transfer","amount":"5"}"#)
        #expect(try StepUpService.display(for: transfer, requested: appDisplay, acceptLanguage: nil)?.source == .app)
        #expect(try StepUpService.display(for: transfer, requested: nil, acceptLanguage: nil) == nil)
        #expect(try StepUpService.display(for: transfer, requested: .null, acceptLanguage: nil) == nil)
        #expect(throws: ServiceError.self) { try StepUpService.display(for: transfer, requested: ["lang": "en"], acceptLanguage: nil) }
    }
}
