import Foundation
import HTTP

/// The web front door: the static app in `LATCHKEY_WEB_DIR` (default `web/`), served at `/`.
///
/// Only the files named in `WebAssets.files` are ever read, so no request path can reach any other
/// file (no traversal, no directory listing). Files are read per request: they are a few KB, and
/// an edit shows on reload without a restart. `no-cache` plus a content ETag: the browser always
/// revalidates (the names carry no version) and gets a 304 when nothing changed.
enum WebAssets {
    /// Request path → (file in the web folder, Content-Type).
    static let files: [(path: String, file: String, contentType: String)] = [
        ("/", "index.html", "text/html; charset=utf-8"),
        ("/app.js", "app.js", "text/javascript; charset=utf-8"),
        // The WebAuthn JSON helpers, one ES module both apps import as ./webauthn.js.
        ("/webauthn.js", "webauthn.js", "text/javascript; charset=utf-8"),
        ("/app.css", "app.css", "text/css; charset=utf-8"),
        // The OpenID Provider's page (SPEC "OpenID Provider": `<first web origin>/authorize?request=…`).
        ("/authorize", "authorize.html", "text/html; charset=utf-8"),
        ("/authorize.js", "authorize.js", "text/javascript; charset=utf-8"),
        // The admin console (SPEC "Admin console"), under /admin/ so that a separate admin listener
        // (LATCHKEY_ADMIN_LISTEN) that takes every /admin/ path takes the console with the API.
        ("/admin/", "admin/index.html", "text/html; charset=utf-8"),
        ("/admin/admin.js", "admin/admin.js", "text/javascript; charset=utf-8"),
        ("/admin/webauthn.js", "webauthn.js", "text/javascript; charset=utf-8"),
        ("/admin/admin.css", "admin/admin.css", "text/css; charset=utf-8"),
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

    static func response(file: String, contentType: String, directory: String, request: Request) throws(ServiceError) -> Response {
        guard let data = FileManager.default.contents(atPath: directory + "/" + file) else {
            throw ServiceError.notFound(file)
        }
        let body = [UInt8](data)
        let etag = "\"\(fnv1a64(body))\""
        var headers = [("Cache-Control", "no-cache"), ("ETag", etag)] + securityHeaders
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
    /// `GET /`, `/app.js`, `/webauthn.js`, `/app.css` and the console under `/admin/` from the web folder; also loads the AAGUID → provider-name
    /// table the passkey list shows (`LATCHKEY_AAGUIDS`, default `<web folder>/aaguids.json`).
    mutating func addWebRoutes(_ s: Services) {
        let directory = s.configuration.webDirectory
        PasskeyProviders.load(fileAt: s.configuration.aaguidFile)
        for asset in WebAssets.files {
            add("GET", asset.path, .anyone, accepting: .any) { ctx in
                try WebAssets.response(file: asset.file, contentType: asset.contentType, directory: directory, request: ctx.request)
            }
        }
        add("GET", "/admin", .anyone, accepting: .any) { _ in .empty(status: 308, headers: [("Location", "/admin/")]) }
    }
}
