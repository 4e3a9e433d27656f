import Foundation
import HTTP
import Testing

/// Decodes our problem bodies just enough to check members (the HTTP module has no JSON dependency).
func member(_ name: String, in body: [UInt8]) -> String? {
    let text = String(decoding: body, as: UTF8.self)
    guard let start = text.firstRange(of: "\"\(name)\":") else { return nil }
    var rest = text[start.upperBound...]
    if rest.hasPrefix("\"") {
        rest = rest.dropFirst()
        var value = ""
        var escaped = false
        for character in rest {
            if escaped { value.append(character); escaped = false; continue }
            if character == "\\" { escaped = true; continue }
            if character == "\"" { return value }
            value.append(character)
        }
        return nil
    }
    return String(rest.prefix { $0 != "," && $0 != "}" })
}

private func echoRouter() -> Router {
    var router = Router()
    router.get("/v1/passkeys") { _, _ in .json(bytes: Array("list".utf8)) }
    router.patch("/v1/passkeys/{id}") { _, parameters in .json(bytes: Array("patch \(parameters["id"]!)".utf8)) }
    router.delete("/v1/passkeys/{id}") { _, parameters in .text("delete \(parameters["id"]!)") }
    router.post("/v1/device-keys/challenges") { _, _ in .text("challenge") }
    router.delete("/v1/device-keys/{id}") { _, parameters in .text("revoke \(parameters["id"]!)") }
    router.get("/admin/v1/users/{user}/keys/{key}") { _, parameters in
        .text("\(parameters["user"]!)|\(parameters["key"]!)")
    }
    router.post("/v1/token", accepting: .jsonOrForm) { request, _ in .text("token \(request.body.count)") }
    router.post("/upload", accepting: .any) { request, _ in .text("got \(request.body.count)") }
    return router
}

@Suite struct RouterTests {
    let router = echoRouter()

    @Test func capturesAndDecodesParameters() {
        let response = router.respond(to: Request(method: "DELETE", target: "/v1/passkeys/abc%2Fdef%20g"))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "delete abc/def g")
    }

    @Test func capturesSeveralParameters() {
        let response = router.respond(to: Request(method: "GET", target: "/admin/v1/users/u1/keys/k%3A2?x=1"))
        #expect(String(decoding: response.body, as: UTF8.self) == "u1|k:2")
    }

    @Test func literalSegmentBeatsParameter() {
        let post = router.respond(to: Request(method: "POST", target: "/v1/device-keys/challenges",
                                              headers: [("Content-Type", "application/json")], body: Array("{}".utf8)))
        #expect(String(decoding: post.body, as: UTF8.self) == "challenge")
        // The literal pattern owns the path for every method (OpenAPI's rule; Schemathesis found
        // `Allow: POST, DELETE` on /v1/recovery/challenges): DELETE is 405, not `{id}` = "challenges".
        let delete = router.respond(to: Request(method: "DELETE", target: "/v1/device-keys/challenges"))
        #expect(delete.status == 405)
        #expect(delete.header("Allow") == "POST")
        #expect(String(decoding: router.respond(to: Request(method: "DELETE", target: "/v1/device-keys/other")).body, as: UTF8.self)
                == "revoke other")
    }

    @Test(arguments: ["/nope", "/v1/passkeys/", "/v1/passkeys/a/b", "/", "", "v1/passkeys", "/v1/passkeys/a%2Fb/c"])
    func unknownPathIs404(path: String) {
        let response = router.respond(to: Request(method: "GET", target: path))
        #expect(response.status == 404)
        #expect(response.header("content-type") == "application/problem+json")
        #expect(member("code", in: response.body) == "not_found")
        #expect(member("type", in: response.body) == "https://latchkey.dev/problems/not_found")
        #expect(member("status", in: response.body) == "404")
    }

    @Test func wrongMethodIs405WithAllow() {
        let response = router.respond(to: Request(method: "PUT", target: "/v1/passkeys/abc"))
        #expect(response.status == 405)
        #expect(response.header("Allow") == "PATCH, DELETE")
        #expect(member("code", in: response.body) == "invalid_request")
        #expect(member("status", in: response.body) == "405")

        let list = router.respond(to: Request(method: "POST", target: "/v1/passkeys"))
        #expect(list.status == 405)
        #expect(list.header("allow") == "GET, HEAD")
    }

    /// The literal-path lookup (`dispatch`'s fast path) answers exactly what matching every route
    /// answers: the same path with one letter percent-encoded cannot take the lookup (it has a `%`),
    /// so it goes through the full match, and both must agree on status, body and Allow.
    @Test(arguments: ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"])
    func literalLookupAgreesWithFullMatch(method: String) {
        for pattern in ["/v1/passkeys", "/v1/device-keys/challenges", "/v1/token", "/upload"] {
            let encoded = pattern.replacingOccurrences(of: "/v1/", with: "/v%31/")
                .replacingOccurrences(of: "/upload", with: "/%75pload")
            #expect(encoded != pattern && encoded.contains("%"))
            let headers = [("Content-Type", "application/json")]
            let plain = router.respond(to: Request(method: method, target: pattern, headers: headers, body: Array("{}".utf8)))
            let slow = router.respond(to: Request(method: method, target: encoded, headers: headers, body: Array("{}".utf8)))
            #expect(plain.status == slow.status, "\(method) \(pattern)")
            #expect(plain.body == slow.body, "\(method) \(pattern)")
            #expect(plain.header("Allow") == slow.header("Allow"), "\(method) \(pattern)")
        }
    }

    /// A path that only looks like a literal route with a different spelling (trailing slash, a
    /// parameter's value equal to a literal elsewhere) is not taken by the lookup.
    @Test func literalLookupIsExact() {
        #expect(router.respond(to: Request(method: "GET", target: "/v1/passkeys/")).status == 404)
        #expect(String(decoding: router.respond(to: Request(method: "DELETE", target: "/v1/passkeys/challenges")).body, as: UTF8.self)
                == "delete challenges")
        #expect(router.respond(to: Request(method: "GET", target: "/v1/passkeys?x=1")).status == 200)
    }

    @Test func headFallsBackToGet() {
        #expect(router.respond(to: Request(method: "head", target: "/v1/passkeys")).status == 200)
    }

    @Test(arguments: ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", nil])
    func nonJSONBodyIs415(contentType: String?) {
        let headers = contentType.map { [("Content-Type", $0)] } ?? []
        let response = router.respond(to: Request(method: "PATCH", target: "/v1/passkeys/abc",
                                                  headers: headers, body: Array("{}".utf8)))
        #expect(response.status == 415)
        #expect(member("code", in: response.body) == "invalid_request")
    }

    @Test(arguments: ["application/json", "application/json; charset=utf-8", "Application/JSON ;charset=UTF-8"])
    func jsonWithParametersIsAccepted(contentType: String) {
        let response = router.respond(to: Request(method: "PATCH", target: "/v1/passkeys/abc",
                                                  headers: [("content-type", contentType)], body: Array("{}".utf8)))
        #expect(response.status == 200)
    }

    @Test func emptyBodyNeedsNoContentType() {
        #expect(router.respond(to: Request(method: "PATCH", target: "/v1/passkeys/abc")).status == 200)
    }

    @Test(arguments: ["application/json", "application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=utf-8"])
    func tokenRouteAcceptsForm(contentType: String) {
        let response = router.respond(to: Request(method: "POST", target: "/v1/token",
                                                  headers: [("Content-Type", contentType)],
                                                  body: Array("grant_type=refresh_token".utf8)))
        #expect(response.status == 200)
        let rejected = router.respond(to: Request(method: "POST", target: "/v1/token",
                                                  headers: [("Content-Type", "text/plain")], body: [1]))
        #expect(rejected.status == 415)
    }

    @Test func anyRouteSkipsTheCheck() {
        let response = router.respond(to: Request(method: "POST", target: "/upload",
                                                  headers: [("Content-Type", "image/png")], body: [1, 2, 3]))
        #expect(String(decoding: response.body, as: UTF8.self) == "got 3")
    }
}

@Suite struct RequestResponseTests {
    @Test func requestParsesTarget() {
        let request = Request(method: "get", target: "/a%20b/c?x=1&y=two+words&z=%26&flag&x=2",
                              headers: [("X-Thing", "v"), ("x-thing", "w")])
        #expect(request.method == "GET")
        #expect(request.path == "/a b/c")
        #expect(request.rawPath == "/a%20b/c")
        #expect(request.queryValue("x") == "1")
        #expect(request.queryValue("y") == "two words")
        #expect(request.queryValue("z") == "&")
        #expect(request.queryValue("flag") == "")
        #expect(request.query.map(\.0) == ["x", "y", "z", "flag", "x"])
        #expect(request.header("X-THING") == "v")
        #expect(request.header("missing") == nil)
    }

    @Test(arguments: [("application/json", "application/json"), ("Application/JSON ; charset=UTF-8", "application/json"),
                      (" \ttext/plain\t ", "text/plain"), ("application/json;", "application/json"), (";charset=x", nil),
                      (" \t ", nil), ("", nil), ("tExt/Ünïcode", "text/Ünïcode")] as [(String, String?)])
    func mediaTypeIsLowercasedWithoutParametersOrWhitespace(field: String, expected: String?) {
        #expect(Request(method: "POST", target: "/", headers: [("content-type", field)]).mediaType == expected)
    }

    @Test func mediaTypeNeedsAContentType() {
        #expect(Request(method: "POST", target: "/", headers: [("Content-Length", "2")]).mediaType == nil)
        #expect(Request(method: "POST", target: "/", headers: [("Content-Typ", "a/b"), ("CONTENT-TYPE", "c/d")]).mediaType == "c/d")
    }

    @Test func malformedEscapesAreKept() {
        #expect(Request(method: "GET", target: "/%zz/%4").path == "/%zz/%4")
    }

    @Test func problemIsRFC9457WithCode() {
        let response = Response.problem(status: 429, code: "rate_limited", title: "Slow down",
                                        detail: "Say \"hi\"\n\u{01}", headers: [("Retry-After", "3")])
        #expect(response.status == 429)
        #expect(response.header("Content-Type") == "application/problem+json")
        #expect(response.header("Retry-After") == "3")
        let text = String(decoding: response.body, as: UTF8.self)
        #expect(text == #"{"type":"https://latchkey.dev/problems/rate_limited","title":"Slow down","status":429,"detail":"Say \"hi\"\n\u0001","code":"rate_limited"}"#)
    }

    @Test func problemTitleDefaultsToReasonPhrase() {
        let response = Response.problem(status: 413, code: "payload_too_large", detail: "big")
        #expect(member("title", in: response.body) == "Content Too Large")
    }

    @Test func jsonHelperSetsContentType() {
        let response = Response.json(status: 201, bytes: Array("{}".utf8))
        #expect(response.status == 201)
        #expect(response.header("content-type") == "application/json")
        #expect(response.body == Array("{}".utf8))
    }
}

/// `loopRoute`: what an event loop answers itself, and what it hands to the workers untouched.
@Suite struct LoopRouteTests {
    private static func router(withParameterRoute: Bool) -> Router {
        var router = echoRouter()
        router.add("POST", "/v1/sign-in", handler: { _, _ in .text("worker") }, onLoop: { _, _ in .text("loop") })
        if withParameterRoute {
            router.add("POST", "/v1/sign-in/{step}", handler: { _, _ in .text("worker") },
                       onLoop: { _, parameters in .text("loop \(parameters["step"]!)") })
        }
        return router
    }

    private static func post(_ target: String) -> Request {
        Request(method: "POST", target: target, headers: [("Content-Type", "application/json")], body: Array("{}".utf8))
    }

    @Test(arguments: [false, true]) func aLoopRouteIsFoundAlsoPercentEncoded(withParameterRoute: Bool) async {
        let router = Self.router(withParameterRoute: withParameterRoute)
        for target in ["/v1/sign-in", "/v1/sign%2Din", "/v1/sign-in?x=1"] {
            let route = router.loopRoute(Self.post(target))
            #expect(route?.pattern == "/v1/sign-in", "\(target)")
            if let route { #expect(String(decoding: await route.answer().body, as: UTF8.self) == "loop") }
        }
        let parameter = router.loopRoute(Self.post("/v1/sign-in/verify"))
        #expect((parameter?.pattern) == (withParameterRoute ? "/v1/sign-in/{step}" : nil))
    }

    @Test(arguments: [false, true]) func everyOtherRequestIsLeftToTheWorkers(withParameterRoute: Bool) {
        let router = Self.router(withParameterRoute: withParameterRoute)
        for request in [Self.post("/v1/device-keys/challenges"), Request(method: "GET", target: "/v1/passkeys"),
                        Request(method: "GET", target: "/v1/sign-in"), Self.post("/nope"), Self.post("/v1/sign-in/")] {
            #expect(router.loopRoute(request).map(\.pattern) == nil, "\(request.method) \(request.rawPath)")
            // ...and the worker still answers it as before.
            #expect(router.dispatch(request).response.status != 500)
        }
    }
}
