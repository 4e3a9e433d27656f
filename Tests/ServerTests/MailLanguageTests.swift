import Foundation
import JSON
@testable import LatchkeyServer
import Testing
import WebAuthnTesting

/// Issue 22, languages: every mail in English, German, Polish and Chinese (Simplified), in the
/// language the account last used (stored from Accept-Language), checked on the real SMTP server.
@Suite("Mail languages")
struct MailLanguageTests {
    @Test("every mail key is in every catalog, with the same placeholders as English")
    func catalogsAreComplete() {
        #expect(Set(MailCatalog.catalogs.keys) == Set(I18nCatalogs.languages))
        let placeholder = /\{(\w+)\}/
        for (language, catalog) in MailCatalog.catalogs {
            for key in MailCatalog.Key.allCases {
                let text = catalog[key]
                #expect(text?.isEmpty == false, "\(language) lacks \(key)")
                let names = Set((text ?? "").matches(of: placeholder).map { String($0.1) })
                let english = Set((MailCatalog.en[key] ?? "").matches(of: placeholder).map { String($0.1) })
                #expect(names == english, "\(language).\(key): \(names) ≠ \(english)")
            }
        }
        #expect(MailCatalog(language: "xx").language == "en")
        #expect(MailCatalog(language: nil).text(.codeFooter, ["minutes": "10"]).contains("10 minutes"))
    }

    @Test("Accept-Language picks a catalog by q and order, as the web app matches tags")
    func negotiation() {
        #expect(I18nCatalogs.negotiate("de-DE,de;q=0.9,en;q=0.8") == "de")
        #expect(I18nCatalogs.negotiate("fr-FR, pl;q=0.5, en;q=0.4") == "pl")
        #expect(I18nCatalogs.negotiate("en;q=0.2, zh-CN;q=0.9") == "zh-Hans")
        #expect(I18nCatalogs.negotiate("zh-TW, zh-Hant;q=0.9") == nil)
        #expect(I18nCatalogs.negotiate("de;q=0, en") == "en")
        #expect(I18nCatalogs.negotiate("*") == nil)
        #expect(I18nCatalogs.negotiate("") == nil)
        #expect(I18nCatalogs.negotiate(nil) == nil)
        #expect(I18nCatalogs.negotiate(String(repeating: "de,", count: 400)) == nil)
    }

    @Test("a German page's account gets German mail, also when someone else asks for it signed out")
    func germanAccountGetsGermanMail() throws {
        let server = try TestServer(name: "maillang") { RecoveryTests.mailSettings(&$0) }
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let username = server.username("de")
        let session = try client.signUp(authenticator, username: username)
        let email = TestSMTP.address()
        // PUT /v1/account/email from a German page: the verification mail is German, and the account's language is stored.
        let action = JSONValue.object([("type", "latchkey.email.change"), ("email", .string(email))])
        let token = try client.stepUpToken(authenticator, authorization: session.bearer, action: action)
        let started = try client.send("PUT", "/v1/account/email", body: JSONValue.object([("email", .string(email))]).serialized(),
                                      authorization: session.bearer,
                                      headers: [("Latchkey-Step-Up", token), ("Accept-Language", "de-DE,de;q=0.9,en;q=0.5")])
        #expect(started.status == 202, "\(started)")
        let verify = try #require(try TestSMTP.waitForMessages(to: email).last)
        #expect(verify.contains("Content-Language: de"), "\(verify)")
        #expect(verify.contains("Ihr Bestätigungscode lautet: "), "\(verify)")
        let code = try #require(Self.code(verify))
        let done = try client.post("/v1/account/email/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]),
                                   authorization: session.bearer)
        #expect(done.status == 200, "\(done)")
        // A recovery asked for without any session or header: the stored language decides.
        let recovery = try server.client().post("/v1/recovery/challenges", .object([("username", .string(username))]))
        #expect(recovery.status == 202, "\(recovery)")
        let mails = try TestSMTP.waitForMessages(to: email, count: 2)
        let recoveryMail = try #require(mails.last)
        #expect(recoveryMail.contains("X-Latchkey-Event: recovery.code"))
        #expect(recoveryMail.contains("Content-Language: de"))
        #expect(recoveryMail.contains("Ihr Wiederherstellungscode lautet: "), "\(recoveryMail)")
        #expect(recoveryMail.contains("Minuten"), "\(recoveryMail)")
    }

    /// The digits after the text's first ": " followed by a digit (every catalog writes "…: 123456").
    static func code(_ message: String) -> String? {
        guard let m = message.firstMatch(of: /: (\d{6,10})/) else { return nil }
        return String(m.1)
    }
}
