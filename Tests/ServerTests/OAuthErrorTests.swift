import HTTP
import JSON
@testable import LatchkeyServer
import Testing

/// OAuth's refusals are a closed set of registered codes (`OAuthError.Code`), rendered as RFC 6749
/// §5.2 JSON at the client endpoints, RFC 6750 §3.1 at userinfo, and `error` redirect parameters.
@Suite("OAuth errors: typed codes, OAuth's formats")
struct OAuthErrorTests {
    @Test("every code's wire name is a registered snake_case name, sent as error with error_description")
    func wireNames() throws {
        #expect(Set(OAuthError.Code.allCases.map(\.rawValue)).count == OAuthError.Code.allCases.count)
        for code in OAuthError.Code.allCases {
            #expect(code.rawValue.allSatisfy { $0 == "_" || ("a"..."z").contains($0) }, "\(code)")
            let e = OAuthError(code, "why")
            #expect(e.error == code.rawValue)
            #expect(String(decoding: e.json.serialized(), as: UTF8.self) == #"{"error":"\#(code.rawValue)","error_description":"why"}"#)
            #expect(e.pairs.map(\.0) == ["error", "error_description"] && e.pairs[0].1 == code.rawValue)
        }
    }

    @Test("RFC 6749 §5.2: invalid_client 401 with its Basic challenge, a limit 429, the store 503, anything else 400")
    func tokenResponses() throws {
        for code in OAuthError.Code.allCases {
            let r = OAuthError(code, "why").tokenResponse
            #expect(r.status == (code == .invalidClient ? 401 : 400), "\(code)")
            #expect(r.header("WWW-Authenticate") == (code == .invalidClient ? #"Basic realm="latchkey""# : nil), "\(code)")
            #expect(r.header("Cache-Control") == "no-store" && r.header("Pragma") == "no-cache")
            #expect(r.header("Content-Type")?.hasPrefix("application/json") == true)
        }
        var limited = OAuthError(.temporarilyUnavailable, "later")
        limited.retryAfter = 17
        #expect(limited.tokenResponse.status == 429 && limited.tokenResponse.header("Retry-After") == "17")
        #expect(limited.tokenResponse.header("WWW-Authenticate") == nil)
        let down = OAuthError.unavailable.tokenResponse
        #expect(down.status == 503 && down.header("Retry-After") == "1")
    }

    @Test("RFC 6750 §3.1: invalid_token 401 and insufficient_scope 403 with their Bearer challenges; the store 503")
    func bearerResponses() throws {
        let invalid = OAuthError(.invalidToken, "no").bearerResponse
        #expect(invalid.status == 401 && invalid.header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
        let scope = OAuthError(.insufficientScope, "no").bearerResponse
        #expect(scope.status == 403 && scope.header("WWW-Authenticate") == #"Bearer error="insufficient_scope", scope="openid""#)
        let down = OAuthError.unavailable.bearerResponse
        #expect(down.status == 503 && down.header("Retry-After") == "1" && down.header("WWW-Authenticate") == nil)
        #expect(invalid.header("Cache-Control") == "no-store")
    }

    @Test("a refusal by the caller resolver is answered in the endpoint's format, with SPEC's code of the same status")
    func throughTheGuard() throws {
        let token = ServiceError(oauth: .token(OAuthError.invalidClient("unknown client")))
        #expect(token.code == .unauthorized && token.status == 401)
        #expect(token.response.header("WWW-Authenticate") == #"Basic realm="latchkey""#)
        #expect(token.response.body == OAuthError.invalidClient("unknown client").json.serialized())
        let bearer = ServiceError(oauth: .bearer(OAuthError(.invalidToken, "no")))
        #expect(bearer.code == .unauthorized && bearer.response.header("WWW-Authenticate") == #"Bearer error="invalid_token""#)
        let down = ServiceError(oauth: .token(.unavailable))
        #expect(down.code == .internalError && down.response.status == 503)
    }
}
