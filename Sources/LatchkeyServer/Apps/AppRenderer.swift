import Foundation
import JSON
import WellKnown

/// Declared apps and the association-file preview, rendered (`/admin/v1/apps`,
/// `/admin/v1/wellknown/preview`, and `latchkey apps`): pure functions, members in the documented order.
public enum AppRenderer {
    /// `{"apps":[…]}`.
    static func apps(_ apps: [DeclaredApp]) -> JSONValue {
        .object([("apps", .array(apps.map(app)))])
    }

    /// One app: `id`, `platform`, the platform's fields, the `origins` it needs, and `createdAt` once stored.
    public static func app(_ declared: DeclaredApp) -> JSONValue {
        let app = declared.app
        var m: [(key: String, value: JSONValue)] = [("id", .string(app.identifier)), ("platform", .string(app.platform))]
        switch app {
        case .ios(let a):
            m += [("appId", .string(a.appID)), ("teamId", .string(a.teamId)), ("bundleId", .string(a.bundleId))]
        case .android(let a):
            m += [("packageName", .string(a.packageName)),
                  ("fingerprints", .array(a.fingerprints.map { .object([("sha256", .string($0.keytool)), ("origin", .string($0.origin))]) })),
                  ("handleAllUrls", .bool(a.handleAllURLs))]
        }
        m.append(("origins", .array(app.origins(rpId: declared.rpId).map { .string($0) })))
        if let createdAt = declared.createdAt { m.append(("createdAt", .string(iso8601(createdAt)))) }
        return .object(m)
    }

    /// `{"rpId","origins","files","problems","ok"}`.
    static func preview(_ p: WellKnownPreview) -> JSONValue {
        .object([
            ("rpId", .string(p.rpId)), ("origins", .array(p.origins.map { .string($0) })),
            ("files", .array(p.files.map { f in
                .object([("name", .string(f.name)), ("path", .string("/.well-known/" + f.name)),
                         ("source", .string(f.built == nil ? "built" : "directory")),
                         ("content", .string(String(decoding: f.content, as: UTF8.self))),
                         ("built", f.built.map { .string(String(decoding: $0, as: UTF8.self)) } ?? .null)])
            })),
            ("problems", .array(p.problems.map { p in
                .object([("code", .string(p.code.rawValue)), ("file", .string(p.file)), ("message", .string(p.message)), ("fix", .string(p.fix))])
            })),
            ("ok", .bool(p.ok)),
        ])
    }
}
