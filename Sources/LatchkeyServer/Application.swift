import Foundation
import HTTP
import JSON
import PostgreSQL
import Storage
import WebAuthn

/// Every route of SPEC's HTTP contract → the service that answers it. Handlers parse, call one
/// service method, and turn its result or `ServiceError` into a response; nothing else.
public struct Application: Responder {
    let router: Router
    let metrics: Metrics
    let log: RequestLog

    public init(services: Services) {
        metrics = services.metrics
        log = services.log
        var r = Router()
        let s = services
        func route(_ method: String, _ pattern: String, accepting: AcceptedBody = .json,
                   _ handler: @escaping @Sendable (Request, PathParameters) throws -> Response) {
            r.add(method, pattern, accepting: accepting) { request, params in
                var response: Response
                do {
                    response = try handler(request, params)
                } catch let error as ServiceError {
                    response = error.response
                } catch {
                    response = ServiceError("internal_error", "unexpected failure").response
                }
                response.headers.append((RequestLog.routeHeader, pattern))
                return response
            }
        }

        // Passkey ceremonies.
        route("POST", "/v1/passkeys/registration/options") { req, _ in
            let requester: PasskeyService.Requester
            switch try s.authenticate(req, allowTicket: true) {
            case .some(let userId): requester = .user(userId)
            case .none:
                let body = try jsonBody(req)
                guard let username = body["username"]?.stringValue else { throw ServiceError.invalid("username is required") }
                let displayName = body["displayName"]?.stringValue ?? username
                try validateName(username, "username")
                try validateName(displayName, "displayName")
                requester = .newAccount(username: username, displayName: displayName)
            }
            return .json(bytes: try s.passkeys.registrationOptions(for: requester).serialized())
        }
        route("POST", "/v1/passkeys/registration/verify") { req, _ in
            .json(status: 201, bytes: try s.passkeys.verifyRegistration(req.body).serialized())
        }
        route("POST", "/v1/passkeys/authentication/options") { req, _ in
            let body = req.body.isEmpty ? JSONValue.object([]) : try jsonBody(req)
            var username: String? = nil
            if let u = body["username"], !u.isNull {
                guard let name = u.stringValue else { throw ServiceError.invalid("username must be a string") }
                try validateName(name, "username")
                username = name
            }
            return .json(bytes: try s.passkeys.authenticationOptions(username: username).serialized())
        }
        route("POST", "/v1/passkeys/authentication/verify") { req, _ in
            .json(bytes: try s.passkeys.verifyAuthentication(req.body).serialized())
        }

        // Passkey management.
        route("GET", "/v1/passkeys", accepting: .any) { req, _ in
            .json(bytes: try s.passkeys.listPasskeys(userId: try s.requireUser(req)).serialized())
        }
        route("PATCH", "/v1/passkeys/{id}") { req, params in
            let userId = try s.requireUser(req)
            guard let name = try jsonBody(req)["name"]?.stringValue else { throw ServiceError.invalid("name is required") }
            try validateName(name, "name")
            return .json(bytes: try s.passkeys.renamePasskey(userId: userId, id: params["id"] ?? "", name: name).serialized())
        }
        route("DELETE", "/v1/passkeys/{id}", accepting: .any) { req, params in
            try s.passkeys.revokePasskey(userId: try s.requireUser(req), id: params["id"] ?? "")
            return .empty(status: 204)
        }

        // Tokens.
        route("POST", "/v1/token", accepting: .jsonOrForm) { req, _ in
            let fields = try formOrJSON(req)
            guard fields["grant_type"] == "refresh_token" else {
                throw ServiceError.invalid("grant_type must be refresh_token")
            }
            guard let token = fields["refresh_token"], !token.isEmpty else { throw ServiceError.invalid("refresh_token is required") }
            return .json(bytes: try s.refresh(token).json.serialized(), headers: [("Cache-Control", "no-store")])
        }
        route("POST", "/v1/logout", accepting: .any) { req, _ in
            try s.logout(req)
            return .empty(status: 204)
        }

        // Well-known documents: application/json, 200, never a redirect.
        route("GET", "/.well-known/jwks.json", accepting: .any) { _, _ in
            .json(bytes: s.tokens.jwks.serialized(), headers: [("Cache-Control", "public, max-age=300")])
        }
        for name in ["apple-app-site-association", "assetlinks.json", "webauthn"] {
            route("GET", "/.well-known/\(name)", accepting: .any) { _, _ in try s.wellKnown(name) }
        }

        // Admin API.
        route("GET", "/admin/v1/origins", accepting: .any) { req, _ in
            try s.requireAdmin(req)
            return .json(bytes: try s.listOrigins().serialized())
        }
        route("POST", "/admin/v1/origins") { req, _ in
            try s.requireAdmin(req)
            let (origin, created) = try s.addOrigin(try jsonBody(req))
            return .json(status: created ? 201 : 200, bytes: JSONValue.object([("origin", .string(origin))]).serialized())
        }
        route("DELETE", "/admin/v1/origins/{origin}", accepting: .any) { req, params in
            try s.requireAdmin(req)
            try s.removeOrigin(params["origin"] ?? "")
            return .empty(status: 204)
        }
        route("POST", "/admin/v1/users/{externalId}/enrolment-tickets") { req, params in
            try s.requireAdmin(req)
            return .json(status: 201, bytes: try s.enrolmentTicket(externalId: params["externalId"] ?? "", body: try jsonBody(req)).serialized())
        }
        route("GET", "/admin/v1/audit", accepting: .any) { req, _ in
            try s.requireAdmin(req)
            return .json(bytes: try s.auditLog(limit: req.queryValue("limit"), before: req.queryValue("before")).serialized())
        }

        // Operations.
        route("GET", "/healthz", accepting: .any) { _, _ in .json(bytes: Array(#"{"status":"ok"}"#.utf8)) }
        route("GET", "/readyz", accepting: .any) { _, _ in
            guard s.store.ping() else { throw ServiceError("internal_error", "database unreachable") }
            return .json(bytes: Array(#"{"status":"ready"}"#.utf8))
        }
        route("GET", "/metrics", accepting: .any) { _, _ in
            let st = s.store.pool.stats
            return .text(s.metrics.render(pool: (st.open, st.inUse, st.waiting)), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        route("GET", "/", accepting: .any) { _, _ in .text(DemoPage.html, contentType: "text/html; charset=utf-8") }
        router = r
    }

    public func respond(to request: Request) -> Response {
        let start = monotonicNow()
        var response = router.respond(to: request)
        var route = "unmatched"
        if let i = response.headers.firstIndex(where: { $0.0 == RequestLog.routeHeader }) {
            route = response.headers[i].1
            response.headers.remove(at: i)
        }
        if !response.headers.contains(where: { $0.0.lowercased() == "cache-control" }) {
            response.headers.append(("Cache-Control", "no-store"))
        }
        let seconds = monotonicNow() - start
        metrics.observeRequest(route: route, method: request.method, status: response.status, seconds: seconds)
        log.write(request: request, route: route, status: response.status, seconds: seconds, response: response)
        return response
    }
}

func jsonBody(_ request: Request) throws(ServiceError) -> JSONValue {
    do {
        let value = try JSONParser.parse(request.body)
        guard case .object = value else { throw ServiceError.invalid("the body must be a JSON object") }
        return value
    } catch let e as JSONError {
        throw ServiceError.invalid("malformed JSON: \(e.reason)")
    } catch {
        throw ServiceError.invalid("the body must be a JSON object")
    }
}

/// OAuth token requests come form-encoded (RFC 6749 §4.1.3); JSON is accepted too.
func formOrJSON(_ request: Request) throws(ServiceError) -> [String: String] {
    if request.mediaType == "application/x-www-form-urlencoded" {
        var out: [String: String] = [:]
        for pair in String(decoding: request.body, as: UTF8.self).split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = formDecode(String(kv[0])), value = kv.count > 1 ? formDecode(String(kv[1])) : ""
            guard let key, let value else { throw ServiceError.invalid("malformed form body") }
            out[key] = value
        }
        return out
    }
    var out: [String: String] = [:]
    for member in try jsonBody(request).objectValue ?? [] {
        if let s = member.value.stringValue { out[member.key] = s }
    }
    return out
}

func formDecode(_ s: String) -> String? {
    var bytes: [UInt8] = []
    var it = Array(s.utf8).makeIterator()
    while let c = it.next() {
        if c == UInt8(ascii: "+") { bytes.append(0x20) }
        else if c == UInt8(ascii: "%") {
            guard let h = it.next(), let l = it.next(), let v = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(v)
        } else { bytes.append(c) }
    }
    return String(validating: bytes, as: UTF8.self)
}

/// Names shown to users: 1…64 characters, no control characters.
func validateName(_ value: String, _ field: String) throws(ServiceError) {
    guard !value.isEmpty, value.count <= 64, !value.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
        throw ServiceError.invalid("\(field) must be 1 to 64 printable characters")
    }
}
