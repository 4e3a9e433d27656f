import HTTP
import JSON

extension RouteTable {
    /// OAuth refresh (RFC 6749 §6) and logout.
    mutating func addTokenRoutes(_ s: Services) {
        add("POST", "/v1/token", accepting: .jsonOrForm) { req, _ in
            let fields = try formOrJSON(req)
            guard fields["grant_type"] == "refresh_token" else { throw ServiceError.invalid("grant_type must be refresh_token") }
            guard let token = fields["refresh_token"], !token.isEmpty else { throw ServiceError.invalid("refresh_token is required") }
            return .json(bytes: try s.sessions.refresh(token).json.serialized(), headers: [("Cache-Control", "no-store")])
        }
        add("POST", "/v1/logout", accepting: .any) { req, _ in
            try s.sessions.logout(req)
            return .empty(status: 204)
        }
        add("GET", "/.well-known/jwks.json", accepting: .any) { _, _ in
            .json(bytes: s.signer.jwks.serialized(), headers: [("Cache-Control", "public, max-age=300")])
        }
    }

    /// The signed-in user's sessions (SPEC "Sessions"): list them, end one.
    mutating func addSessionRoutes(_ s: Services) {
        add("GET", "/v1/sessions", accepting: .any) { req, _ in
            .json(bytes: try s.sessions.list(try s.sessions.requireSession(req)).serialized())
        }
        add("DELETE", "/v1/sessions/{id}", accepting: .any) { req, params in
            try s.sessions.end(try s.sessions.requireSession(req), sessionId: params["id"] ?? "")
            return .empty(status: 204)
        }
    }
}
