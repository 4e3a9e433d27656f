import Tokens
import HTTP
import JSON

extension RouteTable {
    /// OAuth refresh (RFC 6749 §6) and logout.
    mutating func addTokenRoutes(_ s: Services) {
        add("POST", "/v1/token", .anyone, accepting: .jsonOrForm) { ctx in
            let req = ctx.request
            // RFC 6749 §5.1: token responses, and their errors, are never cached.
            let noStore = [("Cache-Control", "no-store"), ("Pragma", "no-cache")]
            var oauthError = "invalid_request"
            do throws(ServiceError) {
                let fields = try formOrJSON(req)
                guard let grantType = fields["grant_type"], !grantType.isEmpty else { throw ServiceError.invalid("grant_type is required") }
                guard grantType == "refresh_token" else {
                    oauthError = "unsupported_grant_type"
                    throw ServiceError.invalid("grant_type must be refresh_token")
                }
                guard let token = fields["refresh_token"], !token.isEmpty else { throw ServiceError.invalid("refresh_token is required") }
                // A DPoP proof binds the session (or must be by its key); its jti rides in the rotation.
                let dpop = try s.callers.dpop.binding(req)
                return .json(bytes: SessionRenderer.tokens(try s.sessions.refresh(token, dpop: dpop)).serialized(), headers: noStore)
            } catch {
                // SPEC's problem document, plus RFC 6749 §5.2's `error` / `error_description` so an
                // OAuth client library reads the same refusal (`code` stays SPEC's).
                var refusal = error
                if refusal.code == .invalidGrant { oauthError = "invalid_grant" }
                if refusal.code == .invalidGrant || refusal.code == .invalidRequest {
                    refusal.members += [("error", .string(oauthError)), ("error_description", .string(refusal.detail))]
                }
                refusal.headers += noStore
                throw refusal
            }
        }
        add("POST", "/v1/logout", .session, accepting: .any) { ctx in
            try s.sessions.logout(try ctx.session())
            return .empty(status: 204)
        }
        add("GET", "/.well-known/jwks.json", .anyone, accepting: .any) { _ in
            // The ES256 keys and the OpenID Provider's RS256 key (SPEC "OpenID Provider").
            .json(bytes: try s.openID.jwks().serialized(), headers: [("Cache-Control", "public, max-age=300")])
        }
    }

    /// The signed-in user's sessions (SPEC "Sessions"): list them, end one.
    mutating func addSessionRoutes(_ s: Services) {
        add("GET", "/v1/sessions", .session, accepting: .any) { ctx in
            .json(bytes: SessionRenderer.list(try s.sessions.list(try ctx.session())).serialized())
        }
        add("DELETE", "/v1/sessions/{id:opaque}", .session, accepting: .any) { ctx in
            try s.sessions.end(try ctx.session(), sessionId: try ctx.path.text("id"))
            return .empty(status: 204)
        }
    }
}
