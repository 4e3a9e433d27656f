/// The languages the web app, the console and the mails speak (SPEC-independent presentation):
/// one catalog per language in `web/i18n/<tag>.json`, English the fallback.
enum I18nCatalogs {
    static let languages = ["en", "de", "pl", "zh-Hans"]
}
