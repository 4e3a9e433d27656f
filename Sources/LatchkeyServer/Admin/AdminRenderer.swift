import Foundation
import JSON
import Storage

/// The admin API's resources rendered (SPEC "/admin/v1", "Admin console"): origins, audit entries,
/// who is signed in, tickets, and the users page. Pure functions, members in the documented order.
enum AdminRenderer {
    /// `{"origins":[{"origin","source"}]}`.
    static func origins(_ origins: [(origin: String, source: String)]) -> JSONValue {
        .object([("origins", .array(origins.map { .object([("origin", .string($0.origin)), ("source", .string($0.source))]) }))])
    }

    /// `{"origin"}`: the origin an add named, normalised.
    static func origin(_ origin: String) -> JSONValue {
        .object([("origin", .string(origin))])
    }

    /// `{"entries":[…]}`, newest first.
    static func auditEntries(_ entries: [AuditEntry]) -> JSONValue {
        .object([("entries", .array(entries.map { e in
            .object([("id", .number(Double(e.id))), ("at", .string(iso8601(e.at))), ("actor", .string(e.actor)),
                     ("actorUsername", e.actorUsername.map { .string($0) } ?? .null),
                     ("action", .string(e.action)), ("subject", e.subject.map { .string($0) } ?? .null), ("detail", e.detail)])
        }))])
    }

    /// `GET /admin/v1/me`: `{"actor","user"}` (`user` null for the admin key).
    static func identity(_ who: AdminIdentity) -> JSONValue {
        .object([("actor", .string(who.actor)), ("user", who.user.map(user) ?? .null)])
    }

    /// `{"ticket","expiresAt","userId"}`.
    static func ticket(_ t: IssuedTicket) -> JSONValue {
        .object([("ticket", .string(t.ticket)), ("expiresAt", .string(iso8601(t.expiresAt))), ("userId", .string(t.userId))])
    }

    /// The console's view of an account: `{"id","username","displayName","externalId","createdAt","admin"}`.
    static func user(_ s: UserSummary) -> JSONValue {
        .object([("id", .string(s.user.id)), ("username", .string(s.user.username)), ("displayName", .string(s.user.displayName)),
                 ("externalId", s.externalId.map { .string($0) } ?? .null), ("createdAt", .string(iso8601(s.createdAt))),
                 ("admin", .bool(s.isAdmin))])
    }

    /// `GET /admin/v1/users`: `{"users":[…]}`.
    static func users(_ found: [UserSummary]) -> JSONValue {
        .object([("users", .array(found.map(user)))])
    }

    /// `GET /admin/v1/users/{id}`: `{"user","passkeys","deviceKeys","sessions"}`. Passkeys, device
    /// keys and sessions are rendered as their own features render them (SPEC's shapes), passed in
    /// by the route: the one seam between this page and those features' renderers.
    static func userPage(_ page: AdminUserPage, passkey: (CredentialRecord) -> JSONValue, deviceKey: (DeviceKeyRecord) -> JSONValue,
                         sessions: ([SessionRecord]) -> [JSONValue]) -> JSONValue {
        .object([
            ("user", user(page.summary)),
            ("passkeys", .array(page.passkeys.map(passkey))),
            ("deviceKeys", .array(page.deviceKeys.map(deviceKey))),
            ("sessions", .array(sessions(page.sessions))),
        ])
    }
}
