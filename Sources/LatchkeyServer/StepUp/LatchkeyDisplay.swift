import Foundation
import DeviceKeys
import JSON

/// What the person is shown for Latchkey's own `latchkey.*` actions (SPEC "Evidence" → "What the
/// person was shown"): Latchkey renders it from the action and the request's language, never from
/// lines a client sends. A heading naming the action, then every other member of the action as the
/// pages write it — for an OpenID approval the `authorizationDetails` lines of the `/authorize` page
/// (`ConsentDisplay`), for an admin change the request the console shows (method, path, every member
/// of the body) — none dropped, none shortened, invisible characters written out.
enum LatchkeyDisplay {
    /// The display for `action` (a `latchkey.*` action) in `lang` (one of the catalogs' tags).
    static func render(_ action: StepUpAction, lang: String) -> StepUpDisplay {
        StepUpDisplay(latchkey: lang, lines: lines(action.value, lang: lang))
    }

    /// The catalog language of an `Accept-Language` header; English when none matches.
    static func language(acceptLanguage: String?) -> String { I18nCatalogs.negotiate(acceptLanguage) ?? "en" }

    static func lines(_ action: JSONValue, lang: String) -> [String] {
        let w = ConsentWords.of(lang)
        let type = action["type"]?.stringValue ?? ""
        let words = Self.words[lang] ?? Self.words["en"]!
        func text(_ key: String, _ value: String = "") -> String {
            (words[key] ?? Self.words["en"]![key]!).replacingOccurrences(of: "{}", with: ConsentDisplay.visible(value))
        }
        var out: [String]
        var rest = (action.objectValue ?? []).filter { $0.key != "type" }
        switch type {
        case GatedActionType.oauthAuthorization:
            out = [text("oauth", action["clientId"]?.stringValue ?? "")]
            let details = action["authorizationDetails"] ?? .null
            let entries = details.arrayValue ?? []
            if details.isNull || entries.isEmpty {
                out.append(text("oauthSignIn"))
            } else {
                for (index, entry) in entries.enumerated() {
                    let entryType = ConsentDisplay.visible(entry["type"]?.stringValue ?? "")
                    out.append(entries.count == 1 ? w.type(entryType) : w.item(index + 1, entries.count, entryType))
                    out += ConsentDisplay.memberLines(entry, w)
                }
            }
            rest = rest.filter { $0.key != "clientId" && $0.key != "authorizationDetails" }
        case GatedActionType.adminChange:
            out = [text("admin", (action["method"]?.stringValue ?? "") + " " + (action["path"]?.stringValue ?? ""))]
            let body = action["body"] ?? .null
            out += body.isNull ? [text("adminNoBody")] : ConsentDisplay.flatten(body, path: "body", w)
            rest = []
        case GatedActionType.deviceKeyEnrolment:
            out = [text("deviceKey", action["deviceId"]?.stringValue ?? "")]
            rest = rest.filter { $0.key != "deviceId" }
        case GatedActionType.recoveryCodesCreation:
            out = [text("recoveryCodes")]
        case GatedActionType.passkeyAddition:
            out = [text("passkeyAdd")]
        case GatedActionType.passkeyRevocation:
            out = [text("passkeyRevoke", action["credentialId"]?.stringValue ?? "")]
            rest = rest.filter { $0.key != "credentialId" }
        case GatedActionType.emailChange:
            out = [text("email", action["email"]?.stringValue ?? "")]
            rest = rest.filter { $0.key != "email" }
        case GatedActionType.vaultWrap:
            out = [text("vaultWrap", action["credentialId"]?.stringValue ?? "")]
            rest = rest.filter { $0.key != "credentialId" }
        case GatedActionType.vaultRecovery:
            out = [text("vaultRecovery")]
        default:
            out = [text("other", type)]
        }
        // Whatever the heading did not say is still shown: one line per member.
        for member in rest { out += ConsentDisplay.flatten(member.value, path: member.key, w) }
        return out
    }

    /// The headings, `{}` the value, in the pages' four languages.
    static let words: [String: [String: String]] = [
        "en": [
            "oauth": "Approve the request of the app {}", "oauthSignIn": "Sign in to the app, with no further details",
            "admin": "Admin change: {}", "adminNoBody": "No request body",
            "deviceKey": "Enrol a device key for the device {}", "recoveryCodes": "Create a new set of recovery codes",
            "passkeyAdd": "Add a passkey to your account", "passkeyRevoke": "Remove the passkey {}",
            "email": "Change your verified email address to {}", "other": "Approve {}",
            "vaultWrap": "Let the passkey {} open your vault", "vaultRecovery": "Set your vault's recovery key",
        ],
        "de": [
            "oauth": "Die Anfrage der App {} freigeben", "oauthSignIn": "Bei der App anmelden, ohne weitere Angaben",
            "admin": "Admin-Änderung: {}", "adminNoBody": "Kein Anfrageinhalt",
            "deviceKey": "Einen Geräteschlüssel für das Gerät {} einrichten", "recoveryCodes": "Neue Wiederherstellungscodes erstellen",
            "passkeyAdd": "Einen Passkey zum Konto hinzufügen", "passkeyRevoke": "Den Passkey {} entfernen",
            "email": "Die bestätigte E-Mail-Adresse in {} ändern", "other": "{} freigeben",
            "vaultWrap": "Dem Passkey {} den Tresor öffnen lassen", "vaultRecovery": "Den Wiederherstellungsschlüssel des Tresors festlegen",
        ],
        "pl": [
            "oauth": "Zatwierdź żądanie aplikacji {}", "oauthSignIn": "Zaloguj się w aplikacji, bez dalszych szczegółów",
            "admin": "Zmiana administracyjna: {}", "adminNoBody": "Brak treści żądania",
            "deviceKey": "Zarejestruj klucz urządzenia {}", "recoveryCodes": "Utwórz nowy zestaw kodów odzyskiwania",
            "passkeyAdd": "Dodaj klucz dostępu do konta", "passkeyRevoke": "Usuń klucz dostępu {}",
            "email": "Zmień zweryfikowany adres e-mail na {}", "other": "Zatwierdź {}",
            "vaultWrap": "Pozwól kluczowi dostępu {} otwierać sejf", "vaultRecovery": "Ustaw klucz odzyskiwania sejfu",
        ],
        "zh-Hans": [
            "oauth": "批准应用 {} 的请求", "oauthSignIn": "登录该应用，没有其他详细信息",
            "admin": "管理变更：{}", "adminNoBody": "没有请求正文",
            "deviceKey": "为设备 {} 注册设备密钥", "recoveryCodes": "创建一组新的恢复码",
            "passkeyAdd": "向账户添加通行密钥", "passkeyRevoke": "移除通行密钥 {}",
            "email": "将已验证的电子邮件地址更改为 {}", "other": "批准 {}",
            "vaultWrap": "允许通行密钥 {} 打开你的保险库", "vaultRecovery": "设置保险库的恢复密钥",
        ],
    ]
}
