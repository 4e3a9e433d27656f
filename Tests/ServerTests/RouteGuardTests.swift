import Crypto
import Foundation
import JSON
import LatchkeyServer
import Testing
import WebAuthnTesting

/// SPEC "Assurance": the guard lives in the route table. This walks **every** registered route (read
/// from the table, so a new route is walked too) with no credentials, a plain user's token and a
/// held passkey's token, each with plausible, garbage and NUL ids, and proves the order SPEC gives:
/// 401 before 403 before 400 before 403 `step_up_required` before 404 — never a 5xx, and never a
/// 404 that says whether an id exists to a caller who may not ask.
@Suite("Route guards: every route, every caller")
struct RouteGuardTests {
    static let fixture = Result { try TestServer(name: "guards") }

    /// Path segments as sent: one that has the shape of an id (names nothing here), and ones that cannot be ids.
    static let ids = ["AAAAAAAAAAAAAAAAAAAAAA", "wh_AAAAAAAAAAAAAAAAAAAAAA", "rec_AAAAAAAAAAAAAAAAAAAAAA", "%00", "a%00b", "%FF", "%01x",
                      String(repeating: "Z", count: 3000)]

    static func target(_ pattern: String, _ id: String) -> String {
        pattern.split(separator: "/", omittingEmptySubsequences: false).map { $0.hasPrefix("{") ? id : String($0) }.joined(separator: "/")
    }

    /// A body that passes each route's body checks, so the answer is the guard's, not a 400.
    static func body(_ method: String, _ pattern: String, phone: StepUpTests.Phone) -> [UInt8] {
        guard ["POST", "PUT", "PATCH"].contains(method) else { return [] }
        switch pattern {
        case "/v1/account/email": return JSONValue.object([("email", "guard@latchkey.test")]).serialized()
        case "/v1/device-keys":
            return JSONValue.object([("deviceId", .string(phone.deviceId)), ("publicKey", .string(Base64URL.encode(phone.publicKey))),
                                     ("platform", "ios"), ("challengeId", .string(Base64URL.encode([UInt8](repeating: 1, count: 32)))),
                                     ("signature", .string((try? phone.sign(Base64URL.encode([UInt8](repeating: 2, count: 32)))) ?? ""))]).serialized()
        case "/v1/passkeys/{id}": return JSONValue.object([("name", "Renamed")]).serialized()
        case "/v1/vault": return JSONValue.object([("prfSalt", .string(Base64URL.encode([UInt8](repeating: 3, count: 32))))]).serialized()
        case "/v1/vault/wrapped/{credentialId}", "/v1/vault/recovery":
            return JSONValue.object([("wrappedKey", .string(Base64URL.encode([UInt8](repeating: 4, count: 60))))]).serialized()
        default: return JSONValue.object([]).serialized()
        }
    }

    @Test("every route declares its guard; unauthorized callers get 401/403 whatever the id; ids that cannot be ids are 404, never a 5xx")
    func everyRoute() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let owner = SoftAuthenticator()
        let user = try client.signUp(owner, username: server.username("guard"))
        let application = Application(services: server.services)
        let guards = application.guards
        #expect(guards.count == application.routes.count, "a route without a declared guard")
        #expect(guards.count >= 40, "\(guards.count) routes")
        let phone = StepUpTests.Phone(platform: "ios")
        var walked = 0
        // Logout ends the user's session: it goes last.
        let walkable = guards.filter { $0.enabled }
        for g in walkable.filter({ $0.pattern != "/v1/logout" }) + walkable.filter({ $0.pattern == "/v1/logout" }) {
            let ids = g.pattern.contains("{") ? Self.ids : [""]
            for id in ids {
                let target = Self.target(g.pattern, id)
                let body = Self.body(g.method, g.pattern, phone: phone)
                let place = "\(g.method) \(target.prefix(80)) (\(g.access))"
                // No credentials.
                let anonymous = try client.send(g.method, target, body: body)
                #expect(anonymous.status < 500, "\(place): \(anonymous)")
                if ["session", "passkey-session", "ciba-approver", "admin", "step-up-token", "approver", "session-or-browser"].contains(g.access) {
                    #expect(anonymous.status == 401 && anonymous.code == "unauthorized", "\(place) without credentials: \(anonymous)")
                    #expect(anonymous.header("WWW-Authenticate") != nil, "\(place): 401 without a challenge")
                }
                // A garbage Authorization is 401 too on every route that reads it.
                let garbage = try client.send(g.method, target, body: body, authorization: "Bearer \u{7F}garbage")
                #expect(garbage.status < 500, "\(place): \(garbage)")
                if ["session", "passkey-session", "ciba-approver", "admin", "step-up-token", "registration", "approver", "session-or-browser"].contains(g.access) {
                    #expect(garbage.status == 401, "\(place) with a garbage token: \(garbage)")
                }
                // A plain user's access token (a passkey session, no step-up, not an admin).
                let asUser = try client.send(g.method, target, body: body, authorization: user.bearer)
                #expect(asUser.status < 500, "\(place) as a user: \(asUser)")
                switch g.access {
                case "admin":
                    #expect(asUser.status == 403 && asUser.code == "forbidden", "\(place) as a user: \(asUser)")
                case "session" where g.stepUp, "registration":
                    #expect(asUser.status == 403 && asUser.code == "step_up_required", "\(place) as a user without step-up: \(asUser)")
                case "session" where !id.isEmpty && id != "AAAAAAAAAAAAAAAAAAAAAA" && !g.pattern.hasPrefix("/v1/recovery/"),
                     "session-or-browser" where !id.isEmpty && id != "AAAAAAAAAAAAAAAAAAAAAA":
                    #expect(asUser.status == 404 && asUser.code == "not_found", "\(place) as a user with an id that cannot be one: \(asUser)")
                case "approver":
                    // A passkey session approves; an id that names no stored request is 404 after the caller is authorized.
                    #expect(asUser.status == 404 && asUser.code == "not_found", "\(place) as a user: \(asUser)")
                default:
                    break
                }
                walked += 1
            }
        }
        #expect(walked > 150)
    }

    @Test("SPEC's Assurance table is the route table's: every change it lists declares its step-up, and no read does")
    func stepUpsMatchTheTable() throws {
        let server = try Self.fixture.get()
        let guards = Application(services: server.services).guards
        let declared = Set(guards.filter(\.stepUp).map { "\($0.method) \($0.pattern)" })
        // SPEC "Assurance" (and "Admin console": every admin change; the preview changes nothing).
        var expected: Set<String> = ["POST /v1/passkeys/registration/options", "DELETE /v1/passkeys/{id}", "PUT /v1/account/email",
                                     "POST /v1/recovery-codes", "POST /v1/device-keys",
                                     // SPEC "OpenID Provider": approving with authorization_details needs the step-up.
                                     "POST /v1/oauth/requests/{id}/approve",
                                     // SPEC "Quorum approvals": approving is an eligible approver's step-up.
                                     "POST /v1/approvals/{id}/approve",
                                     // SPEC "Assurance": wrapping the vault for a passkey, setting its recovery wrap.
                                     "PUT /v1/vault/wrapped/{credentialId}", "PUT /v1/vault/recovery",
                                     // SPEC "CIBA approval": the step-up of the key the client names.
                                     "POST /v1/ciba/requests/{authReqId}/approve",
                                     // SPEC "Portability": the one read behind a step-up, an export of every account.
                                     "GET /admin/v1/export"]
        for g in guards where g.access == "admin" && g.method != "GET" && g.pattern != "/admin/v1/wellknown/preview" {
            expected.insert("\(g.method) \(g.pattern)")
        }
        #expect(declared == expected, "declared but not in the table: \(declared.subtracting(expected)); missing: \(expected.subtracting(declared))")
        // Every /admin route is the admin's, every /v1 route that names the caller's things a session's.
        for g in guards where g.pattern.hasPrefix("/admin/v1/") { #expect(g.access == "admin", "\(g.method) \(g.pattern)") }
    }

    @Test("the admin key with ids that cannot be ids: 404 before any lookup, never a 5xx")
    func adminKeyWithBadIds() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let admin = "Bearer \(server.endpoint.adminKey ?? "")"
        for g in Application(services: server.services).guards where g.access == "admin" && g.pattern.contains("{") && g.enabled {
            for id in ["%00", "a%00b", "%FF", String(repeating: "Z", count: 3000)] {
                let target = Self.target(g.pattern, id)
                let body: [UInt8] = ["POST", "PUT", "PATCH"].contains(g.method) ? JSONValue.object([]).serialized() : []
                let r = try client.send(g.method, target, body: body, authorization: admin)
                if g.pattern == "/admin/v1/accounts/{userId}/enrolment-tickets" {
                    // Never open to the admin key: the wrong kind of caller is 403 before any id is looked at.
                    #expect(r.status == 403 && r.code == "forbidden", "\(g.method) \(target.prefix(80)): \(r)")
                    continue
                }
                #expect(r.status == 404 && r.code == "not_found", "\(g.method) \(target.prefix(80)): \(r)")
            }
        }
    }
}
