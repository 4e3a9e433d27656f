import Foundation
import HTTP

// The pages the OpenID Provider answers in the browser when it may not redirect (SPEC "OpenID
// Provider", "Authorization": an unknown client or an unregistered redirect URI → "400 page (in the
// browser's language), never a redirect"; "Limits": the styled 429 page; "Userinfo and logout": a
// refused id_token_hint). Styled like /authorize (web/authorize.html: /app.css, the same top bar and
// card), in the web app's four languages, every text HTML-escaped; no script, so the CSP of
// `WebAssets.securityHeaders` holds as it is.

enum OAuthPages {
    enum Problem: Sendable, Equatable {
        case missingClientId, unknownClient, lookupFailed, requestURIUnknown
        case missingRedirectURI, unregisteredRedirectURI
        case duplicateParameter(String)
        case idTokenHintRefused, idTokenHintExpired, clientIdMismatch, postLogoutURIUnregistered
        case tooManyRequests
        case signedOut

        /// The catalog keys (English text) of the page's title, message and hint, and the message's
        /// `{name}` value.
        var texts: (title: String, message: String, hint: String?, name: String?) {
            let signIn = "This sign-in request cannot continue"
            let signOut = "This sign-out request cannot continue"
            let goBack = "Go back to the app you came from and try again."
            switch self {
            case .missingClientId: return (signIn, "The app did not say who it is (client_id is missing).", goBack, nil)
            case .unknownClient: return (signIn, "This app (client_id) is not registered with this server.", goBack, nil)
            case .lookupFailed: return (signIn, "The server cannot look the app up right now. Try again in a moment.", goBack, nil)
            case .requestURIUnknown:
                return (signIn, "This sign-in request (request_uri) is unknown, has expired or was already used.", goBack, nil)
            case .missingRedirectURI:
                return (signIn, "The app did not say where to send the answer (redirect_uri is missing).", goBack, nil)
            case .unregisteredRedirectURI:
                return (signIn, "The address the app wants the answer sent to (redirect_uri) is not registered for it, so nothing is sent there.",
                        goBack, nil)
            case .duplicateParameter(let name): return (signIn, "The parameter {name} is given more than once.", goBack, name)
            case .idTokenHintRefused: return (signOut, "The id_token_hint was not issued by this server.", goBack, nil)
            case .idTokenHintExpired: return (signOut, "The id_token_hint is more than 30 days old.", goBack, nil)
            case .clientIdMismatch: return (signOut, "The client_id does not match the app the id_token_hint was issued to.", goBack, nil)
            case .postLogoutURIUnregistered:
                return (signOut, "The address to return to after signing out (post_logout_redirect_uri) is not registered for this app.", goBack, nil)
            case .tooManyRequests:
                return ("Too many sign-in requests", "Too many sign-in requests came from here or for this app. Wait a minute, then try again.",
                        nil, nil)
            case .signedOut: return ("You are signed out", "You are signed out. You can close this page.", nil, nil)
            }
        }
    }

    /// The page for `problem` in `lang` (a catalog tag; anything else reads English), never cached.
    /// `extraHeaders` carries what the status needs besides, such as a 429's `Retry-After`.
    static func page(_ problem: Problem, lang: String, status: Int, extraHeaders: [(String, String)] = []) -> Response {
        let lang = catalogs[lang] == nil ? "en" : lang
        let texts = problem.texts
        let title = escape(text(texts.title, lang))
        var message = escape(text(texts.message, lang))
        // The name is filled in after escaping the sentence, and escaped itself: a parameter name
        // from the query never becomes markup.
        if let name = texts.name { message = message.replacingOccurrences(of: "{name}", with: "<code>" + escape(name) + "</code>") }
        let hint = texts.hint.map { "\n      <p class=\"hint\">\(escape(text($0, lang)))</p>" } ?? ""
        let html = document(title: title, lang: lang, bodyAttributes: " data-state=\"error\"", main: """
                <section class="card" aria-labelledby="problem-title">
                  <h1 id="problem-title">\(title)</h1>
                  <p id="problem" role="alert">\(message)</p>\(hint)
                </section>
            """)
        return response(html, lang: lang, status: status, extraHeaders: extraHeaders)
    }

    /// A page as an answer: never cached, its language said, the web app's security headers.
    static func response(_ html: String, lang: String, status: Int, extraHeaders: [(String, String)] = []) -> Response {
        .text(status: status, html, contentType: "text/html; charset=utf-8",
              headers: [("Cache-Control", "no-store"), ("Content-Language", lang)] + extraHeaders + WebAssets.securityHeaders)
    }

    /// Every page's shell, styled like /authorize (web/authorize.html: /app.css, the top bar): `title`
    /// and `main` already escaped; `head` adds elements (a script of this origin, never inline).
    static func document(title: String, lang: String, head: String = "", bodyAttributes: String, main: String) -> String {
        """
        <!doctype html>
        <html lang="\(lang)">
        <head>
          <meta charset="utf-8">
          <meta name="viewport" content="width=device-width, initial-scale=1">
          <meta name="color-scheme" content="light dark">
          <title>\(title) — Latchkey</title>
          <link rel="stylesheet" href="/app.css">
          <link rel="icon" href="data:,">\(head)
        </head>
        <body\(bodyAttributes)>
          <header class="topbar">
            <div class="brand">
              <span class="logo" aria-hidden="true"><svg viewBox="0 0 24 24" width="22" height="22"><path fill="currentColor" d="M7 14a5 5 0 1 1 4.9-6H22v4h-2v3h-3v-3h-5.1A5 5 0 0 1 7 14Zm0-3a2 2 0 1 0 0-4 2 2 0 0 0 0 4Z"/></svg></span>
              <span class="brand-name">Latchkey</span>
            </div>
          </header>
          <main id="main">
        \(main)
          </main>
        </body>
        </html>
        """
    }

    static func text(_ key: String, _ lang: String) -> String { catalogs[lang]?[key] ?? logoutWords[lang]?[key] ?? key }

    static func escape(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(c)
            }
        }
        return out
    }

    /// Keyed by the English text, as web/i18n/<tag>.json are; English is the key itself.
    static let catalogs: [String: [String: String]] = [
        "en": [:],
        "de": [
            "This sign-in request cannot continue": "Diese Anmeldeanfrage kann nicht fortgesetzt werden",
            "This sign-out request cannot continue": "Diese Abmeldeanfrage kann nicht fortgesetzt werden",
            "Too many sign-in requests": "Zu viele Anmeldeanfragen",
            "You are signed out": "Sie sind abgemeldet",
            "Go back to the app you came from and try again.": "Gehen Sie zurück zu der App, von der Sie kamen, und versuchen Sie es noch einmal.",
            "The app did not say who it is (client_id is missing).": "Die App hat nicht gesagt, wer sie ist (client_id fehlt).",
            "This app (client_id) is not registered with this server.": "Diese App (client_id) ist bei diesem Server nicht registriert.",
            "The server cannot look the app up right now. Try again in a moment.":
                "Der Server kann die App gerade nicht nachschlagen. Versuchen Sie es gleich noch einmal.",
            "This sign-in request (request_uri) is unknown, has expired or was already used.":
                "Diese Anmeldeanfrage (request_uri) ist unbekannt, abgelaufen oder wurde schon verwendet.",
            "The app did not say where to send the answer (redirect_uri is missing).":
                "Die App hat nicht angegeben, wohin die Antwort gehen soll (redirect_uri fehlt).",
            "The address the app wants the answer sent to (redirect_uri) is not registered for it, so nothing is sent there.":
                "Die Adresse, an die die App die Antwort schicken lassen will (redirect_uri), ist für sie nicht registriert; dorthin wird nichts gesendet.",
            "The parameter {name} is given more than once.": "Der Parameter {name} kommt mehr als einmal vor.",
            "The id_token_hint was not issued by this server.": "Der id_token_hint wurde nicht von diesem Server ausgestellt.",
            "The id_token_hint is more than 30 days old.": "Der id_token_hint ist älter als 30 Tage.",
            "The client_id does not match the app the id_token_hint was issued to.":
                "Die client_id passt nicht zu der App, für die der id_token_hint ausgestellt wurde.",
            "The address to return to after signing out (post_logout_redirect_uri) is not registered for this app.":
                "Die Adresse für die Rückkehr nach der Abmeldung (post_logout_redirect_uri) ist für diese App nicht registriert.",
            "Too many sign-in requests came from here or for this app. Wait a minute, then try again.":
                "Von hier oder für diese App kamen zu viele Anmeldeanfragen. Warten Sie eine Minute und versuchen Sie es dann noch einmal.",
            "You are signed out. You can close this page.": "Sie sind abgemeldet. Sie können diese Seite schließen.",
        ],
        "pl": [
            "This sign-in request cannot continue": "Tego żądania logowania nie można kontynuować",
            "This sign-out request cannot continue": "Tego żądania wylogowania nie można kontynuować",
            "Too many sign-in requests": "Zbyt wiele żądań logowania",
            "You are signed out": "Wylogowano",
            "Go back to the app you came from and try again.": "Wróć do aplikacji, z której tu trafiono, i spróbuj ponownie.",
            "The app did not say who it is (client_id is missing).": "Aplikacja nie podała, kim jest (brak client_id).",
            "This app (client_id) is not registered with this server.": "Ta aplikacja (client_id) nie jest zarejestrowana na tym serwerze.",
            "The server cannot look the app up right now. Try again in a moment.":
                "Serwer nie może teraz sprawdzić tej aplikacji. Spróbuj ponownie za chwilę.",
            "This sign-in request (request_uri) is unknown, has expired or was already used.":
                "To żądanie logowania (request_uri) jest nieznane, wygasło lub zostało już użyte.",
            "The app did not say where to send the answer (redirect_uri is missing).":
                "Aplikacja nie podała, dokąd wysłać odpowiedź (brak redirect_uri).",
            "The address the app wants the answer sent to (redirect_uri) is not registered for it, so nothing is sent there.":
                "Adres, na który aplikacja chce otrzymać odpowiedź (redirect_uri), nie jest dla niej zarejestrowany, więc nic tam nie zostanie wysłane.",
            "The parameter {name} is given more than once.": "Parametr {name} podano więcej niż raz.",
            "The id_token_hint was not issued by this server.": "Parametr id_token_hint nie został wydany przez ten serwer.",
            "The id_token_hint is more than 30 days old.": "Parametr id_token_hint jest starszy niż 30 dni.",
            "The client_id does not match the app the id_token_hint was issued to.":
                "Parametr client_id nie pasuje do aplikacji, dla której wydano id_token_hint.",
            "The address to return to after signing out (post_logout_redirect_uri) is not registered for this app.":
                "Adres powrotu po wylogowaniu (post_logout_redirect_uri) nie jest zarejestrowany dla tej aplikacji.",
            "Too many sign-in requests came from here or for this app. Wait a minute, then try again.":
                "Z tego miejsca lub dla tej aplikacji przyszło zbyt wiele żądań logowania. Odczekaj minutę i spróbuj ponownie.",
            "You are signed out. You can close this page.": "Wylogowano. Możesz zamknąć tę stronę.",
        ],
        "zh-Hans": [
            "This sign-in request cannot continue": "此登录请求无法继续",
            "This sign-out request cannot continue": "此退出登录请求无法继续",
            "Too many sign-in requests": "登录请求过多",
            "You are signed out": "您已退出登录",
            "Go back to the app you came from and try again.": "请返回您来自的应用，然后重试。",
            "The app did not say who it is (client_id is missing).": "应用未表明其身份（缺少 client_id）。",
            "This app (client_id) is not registered with this server.": "此应用（client_id）未在本服务器注册。",
            "The server cannot look the app up right now. Try again in a moment.": "服务器暂时无法查询此应用。请稍后重试。",
            "This sign-in request (request_uri) is unknown, has expired or was already used.": "此登录请求（request_uri）未知、已过期或已被使用。",
            "The app did not say where to send the answer (redirect_uri is missing).": "应用未指明答复发送到何处（缺少 redirect_uri）。",
            "The address the app wants the answer sent to (redirect_uri) is not registered for it, so nothing is sent there.":
                "应用要求接收答复的地址（redirect_uri）未为其注册，因此不会向该地址发送任何内容。",
            "The parameter {name} is given more than once.": "参数 {name} 出现了不止一次。",
            "The id_token_hint was not issued by this server.": "id_token_hint 不是由本服务器签发的。",
            "The id_token_hint is more than 30 days old.": "id_token_hint 已超过 30 天。",
            "The client_id does not match the app the id_token_hint was issued to.": "client_id 与 id_token_hint 所签发给的应用不符。",
            "The address to return to after signing out (post_logout_redirect_uri) is not registered for this app.":
                "退出登录后的返回地址（post_logout_redirect_uri）未为此应用注册。",
            "Too many sign-in requests came from here or for this app. Wait a minute, then try again.":
                "来自此处或针对此应用的登录请求过多。请等待一分钟后重试。",
            "You are signed out. You can close this page.": "您已退出登录。可以关闭此页面。",
        ],
    ]
}
