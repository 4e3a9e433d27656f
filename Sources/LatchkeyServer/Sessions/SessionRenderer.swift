import Crypto
import JSON
import Storage

/// The session resources as JSON (SPEC "Sessions"): pure functions from the values
/// `SessionService` returns, for the routes, the admin console's users page and every answer
/// that carries `tokens`.
enum SessionRenderer {
    /// SPEC's session shape; `current`, the caller's own session id, adds `current` (the user's
    /// list), the admin console's view (no current) leaves it out.
    static func session(_ r: SessionRecord, current: String? = nil) -> JSONValue {
        .object([("id", .string(r.id)), ("method", .string(r.method.rawValue)),
                 ("credentialId", r.credentialId.map { .string(Base64URL.encode($0)) } ?? .null),
                 ("clientId", r.clientId.map { .string($0) } ?? .null), ("clientName", r.clientName.map { .string($0) } ?? .null),
                 ("browser", .bool(r.browser)),
                 ("createdAt", .string(iso8601(r.createdAt))), ("lastUsedAt", .string(iso8601(r.lastUsedAt))),
                 ("authTime", .string(iso8601(r.authTime)))] + (current.map { [("current", .bool(r.id == $0))] } ?? []))
    }

    /// `GET /v1/sessions`: `{"sessions":[…]}`, `current` marking the caller's.
    static func list(_ l: SessionService.SessionList) -> JSONValue {
        .object([("sessions", .array(l.sessions.map { session($0, current: l.current) }))])
    }

    /// SPEC's `tokens` object (a refresh's answer, and a login's `tokens`).
    static func tokens(_ t: SessionService.Issued) -> JSONValue {
        JSONObjectWriter.value(capacity: 160 + t.accessToken.utf8.count) { writeTokens(t, into: &$0) }
    }

    /// `tokens`' members, written into an object (the one definition of the shape).
    static func writeTokens(_ t: SessionService.Issued, into writer: inout JSONObjectWriter) {
        writer.member("access_token", string: t.accessToken)
        writer.member("token_type", string: t.jkt == nil ? "Bearer" : "DPoP")
        writer.member("expires_in", integer: Int64(t.expiresIn))
        writer.member("refresh_token", string: t.refreshToken)
    }
}
