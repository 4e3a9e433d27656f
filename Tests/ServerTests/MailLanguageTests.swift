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
        let english = MailCatalog(language: nil)
        #expect(english.text(.codeFooter, ["minutes": english.duration(seconds: 600)]).contains("expires in 10 minutes and"))
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

    @Test("counts take each language's plural form: Polish one, few and other; no \"1 hours\" anywhere")
    func plurals() {
        let pl = MailCatalog(language: "pl")
        let forms = [1, 2, 4, 5, 11, 12, 14, 21, 22, 24, 25, 112, 122].map { pl.count($0, .hours) }
        #expect(forms == ["1 godzinę", "2 godziny", "4 godziny", "5 godzin", "11 godzin", "12 godzin", "14 godzin", "21 godzin",
                          "22 godziny", "24 godziny", "25 godzin", "112 godzin", "122 godziny"], "\(forms)")
        #expect(pl.count(1, .minutes) == "1 minutę" && pl.count(3, .minutes) == "3 minuty" && pl.count(10, .minutes) == "10 minut")
        #expect(pl.count(1, .seconds) == "1 sekundę" && pl.count(30, .seconds) == "30 sekund")
        let en = MailCatalog(language: "en"), de = MailCatalog(language: "de"), zh = MailCatalog(language: "zh-Hans")
        #expect(en.count(1, .hours) == "1 hour" && en.count(2, .hours) == "2 hours" && en.count(0, .minutes) == "0 minutes")
        #expect(de.count(1, .hours) == "1 Stunde" && de.count(24, .hours) == "24 Stunden" && de.count(1, .minutes) == "1 Minute")
        #expect(zh.count(1, .hours) == "1 小时" && zh.count(5, .minutes) == "5 分钟")
        // A wait in its largest whole unit.
        #expect(en.duration(seconds: 3600) == "1 hour" && en.duration(seconds: 86400) == "24 hours")
        #expect(en.duration(seconds: 600) == "10 minutes" && en.duration(seconds: 60) == "1 minute" && en.duration(seconds: 1) == "1 second")
        #expect(en.text(.codeFooter, ["minutes": en.duration(seconds: 60)]).contains("expires in 1 minute and"))
        #expect(pl.text(.startedLater, ["duration": pl.duration(seconds: 3600), "date": "D"]) == "za 1 godzinę (D)")
    }

    @Test("times in mails are for people: the day, the month's name and the time in UTC, in the mail's language")
    func dateTimes() {
        let at = Date(timeIntervalSince1970: 1_796_627_100)  // 2026-12-07T07:05:00Z
        #expect(MailCatalog(language: "en").dateTime(at) == "7 December 2026, 07:05 UTC")
        #expect(MailCatalog(language: "de").dateTime(at) == "7. Dezember 2026, 07:05 UTC")
        #expect(MailCatalog(language: "pl").dateTime(at) == "7 grudnia 2026, 07:05 UTC")
        #expect(MailCatalog(language: "zh-Hans").dateTime(at) == "2026年12月7日 07:05 UTC")
        for (language, months) in MailCatalog.months { #expect(months.count == 12, "\(language)") }
    }

    @Test("a Polish account's mails: the code's lifetime and the recovery's wait in Polish plural forms, its time for people, no ISO time")
    func polishMailsCountAndDate() throws {
        let server = try TestServer(name: "mailplural") { RecoveryTests.mailSettings(&$0); $0.recoveryDelay = 3600 }
        let client = server.client()
        let authenticator = SoftAuthenticator()
        let username = server.username("pl")
        let session = try client.signUp(authenticator, username: username)
        let email = TestSMTP.address()
        let action = JSONValue.object([("type", "latchkey.email.change"), ("email", .string(email))])
        let token = try client.stepUpToken(authenticator, authorization: session.bearer, action: action)
        let started = try client.send("PUT", "/v1/account/email", body: JSONValue.object([("email", .string(email))]).serialized(),
                                      authorization: session.bearer,
                                      headers: [("Latchkey-Step-Up", token), ("Accept-Language", "pl-PL,pl;q=0.9")])
        #expect(started.status == 202, "\(started)")
        let verify = try #require(try TestSMTP.waitForMessages(to: email).last)
        #expect(verify.contains("Content-Language: pl") && verify.contains("Wygasa za 10 minut i działa"), "\(verify)")
        let code = try #require(Self.code(verify))
        let done = try client.post("/v1/account/email/verify", .object([("challengeId", started.json!["challengeId"]!), ("code", .string(code))]),
                                   authorization: session.bearer)
        #expect(done.status == 200, "\(done)")
        // Signed out, a recovery by emailed code: the code's mail, then the "recovery started" notice.
        let challenge = try server.client().post("/v1/recovery/challenges", .object([("username", .string(username))]))
        #expect(challenge.status == 202, "\(challenge)")
        let codeMail = try #require(try TestSMTP.waitForMessages(to: email, count: 2).last)
        #expect(codeMail.contains("Kod wygasa za 10 minut i działa"), "\(codeMail)")
        let recoveryCode = try #require(Self.code(codeMail))
        let recovered = try server.client().post("/v1/recovery/verify", .object([("challengeId", challenge.json!["challengeId"]!),
                                                                                 ("code", .string(recoveryCode))]))
        #expect(recovered.status == 200, "\(recovered)")
        let notice = try #require(try TestSMTP.waitForMessage(to: email, containing: "X-Latchkey-Event: recovery.started"))
        let months = MailCatalog.plMonths.joined(separator: "|")
        let when = try Regex("za 1 godzinę \\(\\d{1,2} (\(months)) \\d{4}, \\d{2}:\\d{2} UTC\\)")
        #expect(notice.contains(when), "\(notice)")
        #expect(!notice.contains(/\d{4}-\d{2}-\d{2}T\d{2}:/) && !notice.contains("godz."), "\(notice)")
    }

    /// The digits after the text's first ": " followed by a digit (every catalog writes "…: 123456").
    static func code(_ message: String) -> String? {
        guard let m = message.firstMatch(of: /: (\d{6,10})/) else { return nil }
        return String(m.1)
    }
}
