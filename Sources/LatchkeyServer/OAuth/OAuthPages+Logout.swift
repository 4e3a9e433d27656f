import Foundation
import HTTP

// SPEC "Userinfo and logout": `/oauth2/logout` ends the OP session only after the person confirms on
// a page in their language (a same-origin JSON `POST`, under the cookie routes' rules), unless the
// id_token_hint was issued for that very session. The page carries what the confirmation posts
// back in data attributes (no inline script: the CSP of `WebAssets.securityHeaders` holds), and
// `/logout.js` posts it.
extension OAuthPages {
    /// The confirmation: "<app> signed you out; sign out of Latchkey too?".
    static func logoutConfirmation(clientName: String, clientId: String, postLogoutRedirectURI: String?, state: String?,
                                   lang: String) -> Response {
        let lang = catalogs[lang] == nil ? "en" : lang
        func t(_ key: String) -> String { escape(text(key, lang)) }
        let message = t("{name} signed you out. You are still signed in to Latchkey in this browser: other apps can sign you in without asking again.")
            .replacingOccurrences(of: "{name}", with: "<strong>" + escape(clientName) + "</strong>")
        func data(_ name: String, _ value: String?) -> String { value.map { " data-\(name)=\"\(escape($0))\"" } ?? "" }
        let html = document(title: t("Sign out of Latchkey too?"), lang: lang, head: "\n  <script type=\"module\" src=\"/logout.js\"></script>",
                            bodyAttributes: " data-state=\"confirm\"" + data("client", clientId) + data("redirect", postLogoutRedirectURI) + data("state", state),
                            main: """
                <section class="card" aria-labelledby="logout-title">
                  <h1 id="logout-title">\(t("Sign out of Latchkey too?"))</h1>
                  <p id="logout-message">\(message)</p>
                  <p id="logout-done" role="status" hidden>\(t("You are signed out. You can close this page."))</p>
                  <p id="logout-error" role="alert" hidden>\(t("That did not work. Reload the page and try again."))</p>
                  <button type="button" class="btn btn-primary" id="logout-confirm">\(t("Sign out of Latchkey"))</button>
                  <button type="button" class="btn btn-quiet" id="logout-stay">\(t("Stay signed in"))</button>
                </section>
            """)
        return response(html, lang: lang, status: 200)
    }

    /// The confirmation page's words in the languages of `catalogs` (English is the key).
    static let logoutWords: [String: [String: String]] = [
        "de": [
            "Sign out of Latchkey too?": "Auch bei Latchkey abmelden?",
            "{name} signed you out. You are still signed in to Latchkey in this browser: other apps can sign you in without asking again.":
                "{name} hat Sie abgemeldet. Bei Latchkey sind Sie in diesem Browser noch angemeldet: andere Apps können Sie ohne erneute Frage anmelden.",
            "Sign out of Latchkey": "Bei Latchkey abmelden",
            "Stay signed in": "Angemeldet bleiben",
            "That did not work. Reload the page and try again.": "Das hat nicht geklappt. Laden Sie die Seite neu und versuchen Sie es noch einmal.",
        ],
        "pl": [
            "Sign out of Latchkey too?": "Wylogować także z Latchkey?",
            "{name} signed you out. You are still signed in to Latchkey in this browser: other apps can sign you in without asking again.":
                "{name} wylogowała Cię. W tej przeglądarce nadal jesteś zalogowany w Latchkey: inne aplikacje mogą Cię zalogować bez ponownego pytania.",
            "Sign out of Latchkey": "Wyloguj z Latchkey",
            "Stay signed in": "Pozostań zalogowany",
            "That did not work. Reload the page and try again.": "To się nie udało. Odśwież stronę i spróbuj ponownie.",
        ],
        "zh-Hans": [
            "Sign out of Latchkey too?": "也退出 Latchkey 吗？",
            "{name} signed you out. You are still signed in to Latchkey in this browser: other apps can sign you in without asking again.":
                "{name} 已将您退出登录。您在此浏览器中仍登录着 Latchkey：其他应用无需再次询问即可让您登录。",
            "Sign out of Latchkey": "退出 Latchkey",
            "Stay signed in": "保持登录",
            "That did not work. Reload the page and try again.": "操作未成功。请重新加载页面后再试。",
        ],
    ]
}
