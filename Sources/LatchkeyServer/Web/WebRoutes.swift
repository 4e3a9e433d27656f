import Foundation
import HTTP

/// The web front door: the static app in `LATCHKEY_WEB_DIR` (default `web/`), served at `/`.
///
/// Only the files named in `WebAssets.files` are ever read, so no request path can reach any other
/// file (no traversal, no directory listing). Files are read per request: they are a few KB, and
/// an edit shows on reload without a restart. `no-cache` plus a content ETag: the browser always
/// revalidates (the names carry no version) and gets a 304 when nothing changed.
enum WebAssets {
    /// The client module's version: `export const VERSION` in web/latchkey.js says the same (the
    /// browser suite checks it). A release that changes the module changes both.
    static let clientVersion = "1.0.0"

    /// Request path → (file in the web folder, Content-Type).
    static let files: [(path: String, file: String, contentType: String)] = [
        ("/", "index.html", "text/html; charset=utf-8"),
        ("/app.js", "app.js", "text/javascript; charset=utf-8"),
        // The app's vault panel (docs/vault.md), a module app.js imports.
        ("/vault-panel.js", "vault-panel.js", "text/javascript; charset=utf-8"),
        ("/app.css", "app.css", "text/css; charset=utf-8"),
        // The OpenID Provider's page (SPEC "OpenID Provider": `<first web origin>/authorize?request=…`).
        ("/authorize", "authorize.html", "text/html; charset=utf-8"),
        ("/authorize.js", "authorize.js", "text/javascript; charset=utf-8"),
        // The logout confirmation's script (SPEC "Userinfo and logout"; the page is OAuthPages').
        ("/logout.js", "logout.js", "text/javascript; charset=utf-8"),
        // How the vault uses a passkey's PRF (`prfUsageDetails` of /.well-known/passkey-endpoints).
        ("/help/vault", "help/vault.html", "text/html; charset=utf-8"),
        ("/help/help.js", "help/help.js", "text/javascript; charset=utf-8"),
        // The message catalogs both apps load (one per language, web/i18n/).
        ("/i18n.js", "i18n.js", "text/javascript; charset=utf-8"),
        ("/admin/i18n.js", "i18n.js", "text/javascript; charset=utf-8"),
    ] + I18nCatalogs.languages.flatMap { lang in
        [("/i18n/\(lang).json", "i18n/\(lang).json", "application/json; charset=utf-8"),
         ("/admin/i18n/\(lang).json", "i18n/\(lang).json", "application/json; charset=utf-8")]
    } + [
        // The admin console (SPEC "Admin console"), under /admin/ so that a separate admin listener
        // (LATCHKEY_ADMIN_LISTEN) that takes every /admin/ path takes the console with the API.
        ("/admin/", "admin/index.html", "text/html; charset=utf-8"),
        ("/admin/admin.js", "admin/admin.js", "text/javascript; charset=utf-8"),
        ("/admin/admin.css", "admin/admin.css", "text/css; charset=utf-8"),
        // The app's stylesheet the console builds on, under /admin/ too: the admin listener serves
        // only /admin/ paths, and the console must be whole there.
        ("/admin/app.css", "app.css", "text/css; charset=utf-8"),
    ]

    /// The browser client module (web/latchkey.js) any page may import, also from another origin
    /// (a module script is fetched in CORS mode, so it carries `Access-Control-Allow-Origin: *`;
    /// it is public code, no credentials involved). `/latchkey.js` always revalidates (no-cache +
    /// ETag: the newest); `/latchkey/<version>/latchkey.js` never changes and is cached for a year.
    static let clientFiles: [(path: String, file: String, contentType: String, immutable: Bool)] = [
        ("/latchkey.js", "latchkey.js", "text/javascript; charset=utf-8", false),
        ("/latchkey.d.ts", "latchkey.d.ts", "text/plain; charset=utf-8", false),
        ("/latchkey/\(clientVersion)/latchkey.js", "latchkey.js", "text/javascript; charset=utf-8", true),
        ("/latchkey/\(clientVersion)/latchkey.d.ts", "latchkey.d.ts", "text/plain; charset=utf-8", true),
        // The console's own copy, for an admin listener that serves only /admin/… paths.
        ("/admin/latchkey.js", "latchkey.js", "text/javascript; charset=utf-8", false),
    ]

    static let clientHeaders: [(String, String)] = [
        ("Access-Control-Allow-Origin", "*"),
        ("Cross-Origin-Resource-Policy", "cross-origin"),
        ("X-Content-Type-Options", "nosniff"),
        ("Latchkey-Client-Version", clientVersion),
    ]

    /// Same-origin everything; no inline script or style, so the CSP needs no exceptions.
    static let securityHeaders: [(String, String)] = [
        ("Content-Security-Policy",
         "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
             + "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("Cross-Origin-Opener-Policy", "same-origin"),
    ]

    static func response(file: String, contentType: String, directory: String, request: Request,
                         cacheControl: String = "no-cache", extraHeaders: [(String, String)]? = nil) throws(ServiceError) -> Response {
        guard let data = FileManager.default.contents(atPath: directory + "/" + file) else {
            throw ServiceError.notFound(file)
        }
        let body = [UInt8](data)
        let etag = "\"\(fnv1a64(body))\""
        var headers = [("Cache-Control", cacheControl), ("ETag", etag)] + (extraHeaders ?? securityHeaders)
        if let presented = request.header("If-None-Match"),
           presented.split(separator: ",").contains(where: { $0.trimmingCharacters(in: .whitespaces) == etag }) {
            return .empty(status: 304, headers: headers)
        }
        headers.insert(("Content-Type", contentType), at: 0)
        return Response(status: 200, headers: headers, body: body)
    }

    /// A cache validator, not a security property: FNV-1a over the file's bytes.
    static func fnv1a64(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { hash = (hash ^ UInt64(b)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }
}

extension RouteTable {
    /// `GET /`, `/app.js`, `/app.css`, the catalogs, the client module (`/latchkey.js`) and the console under `/admin/` from the web folder; also loads the AAGUID → provider-name
    /// table the passkey list shows (`LATCHKEY_AAGUIDS`, default `<web folder>/aaguids.json`).
    mutating func addWebRoutes(_ s: Services) {
        let directory = s.configuration.webDirectory
        PasskeyProviders.load(fileAt: s.configuration.aaguidFile)
        for asset in WebAssets.files {
            add("GET", asset.path, .anyone, accepting: .any) { ctx in
                try WebAssets.response(file: asset.file, contentType: asset.contentType, directory: directory, request: ctx.request)
            }
        }
        for asset in WebAssets.clientFiles {
            let cache = asset.immutable ? "public, max-age=31536000, immutable" : "no-cache"
            add("GET", asset.path, .anyone, accepting: .any) { ctx in
                try WebAssets.response(file: asset.file, contentType: asset.contentType, directory: directory, request: ctx.request,
                                       cacheControl: cache, extraHeaders: WebAssets.clientHeaders)
            }
        }
        add("GET", "/admin", .anyone, accepting: .any) { _ in .empty(status: 308, headers: [("Location", "/admin/")]) }
    }
}
