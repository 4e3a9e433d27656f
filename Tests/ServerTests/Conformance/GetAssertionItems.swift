import CBOR
import Crypto
import JSON
import Testing
import WebAuthn
import WebAuthnTesting

// "GetAssertion Request" and "GetAssertion Response": the items of the public FIDO2 server test
// list, one test case each, named by id. Each registers a fresh authenticator first.

enum GetAssertionRequest {
    static var req1: [ConformanceItem] {
        var g = ItemGroup("Server-ServerPublicKeyCredentialGetOptionsResponse-Req-1")
        g.P("P-1", "Get ServerPublicKeyCredentialGetOptionsResponse: status, errorMessage, challenge, extensions, timeout, rpId, allowCredentials, userVerification") { r in
            let a = SoftAuthenticator()
            let name = try r.enrol(a)
            let reply = try r.assertionOptions(name, userVerification: "required", [("extensions", .object([("example.extension", "test")]))])
            var problems = succeeded(reply)
            guard let o = reply.json else { return problems }
            if (o["challenge"]?.stringValue.flatMap(Base64URL.decode)?.count ?? 0) < 16 { problems.append("challenge is not base64url of ≥ 16 bytes") }
            if o["extensions"]?["example.extension"]?.stringValue != "test" { problems.append("extensions.example.extension is not echoed") }
            if let t = o["timeout"], (t.intValue ?? 0) <= 0 { problems.append("timeout is not a positive number") }
            if let rpId = o["rpId"] {
                let host = r.server.origin.dropFirst("https://".count)
                if rpId.stringValue.map({ host == $0 || host.hasSuffix("." + $0) }) != true { problems.append("rpId is not the origin's host or a suffix") }
            }
            let list = o["allowCredentials"]?.arrayValue ?? []
            for d in list where d["type"]?.stringValue == nil || (d["id"]?.stringValue.flatMap(Base64URL.decode) ?? []).isEmpty {
                problems.append("allowCredentials member \(d.text)")
            }
            if list.count != 1 || list.first?["id"]?.stringValue != Base64URL.encode(a.credentialId) || list.first?["type"]?.stringValue != "public-key" {
                problems.append("allowCredentials is not exactly the registered credential")
            }
            if o["userVerification"]?.stringValue != "required" { problems.append("userVerification is not the requested \"required\"") }
            return problems
        }
        g.P("P-2", "Get two ServerPublicKeyCredentialGetOptionsResponses: their challenges differ") { r in
            let name = try r.enrol(SoftAuthenticator())
            let a = try r.assertionOptions(name), b = try r.assertionOptions(name)
            return succeeded(a) + succeeded(b) + (a.json?["challenge"]?.stringValue == b.json?["challenge"]?.stringValue ? ["equal challenges"] : [])
        }
        return g.items
    }
}

enum GetAssertionResponse {
    /// Registers `authenticator`, then signs in with the change and edit.
    static func signIn(_ r: ConformanceRun, _ a: SoftAuthenticator = SoftAuthenticator(), userVerification: String? = nil,
                       change: (inout AssertionBuilder) -> Void = { _ in }, edit: (JSONValue) -> JSONValue = { $0 }) throws -> Reply {
        let name = try r.enrol(a)
        return try r.login(a, username: name, userVerification: userVerification, change: change, edit: edit)
    }

    static var resp1: [ConformanceItem] {
        var g = ItemGroup("Server-ServerAuthenticatorAssertionResponse-Resp-1")
        g.P("P-1", "A valid ServerAuthenticatorAssertionResponse: the server succeeds") { r in succeeded(try signIn(r)) }
        let edits: [(String, String, @Sendable (JSONValue) -> JSONValue)] = [
            ("F-1", "missing \"id\"", { $0.removing("id") }),
            ("F-2", "\"id\" is not a DOMString", { $0.setting("id", 42) }),
            ("F-3", "\"id\" is not base64url", { $0.setting("id", "**not+base64url/==") }),
            ("F-4", "missing \"type\"", { $0.removing("type") }),
            ("F-5", "\"type\" is not a DOMString", { $0.setting("type", 1) }),
            ("F-6", "\"type\" is not \"public-key\"", { $0.setting("type", "private-key") }),
            ("F-7", "missing \"response\"", { $0.removing("response") }),
            ("F-8", "\"response\" is not an Object", { $0.setting("response", "response") }),
            ("F-9", "missing response.clientDataJSON", { $0.settingResponse("clientDataJSON", nil) }),
            ("F-10", "response.clientDataJSON is not a DOMString", { $0.settingResponse("clientDataJSON", 7) }),
            ("F-11", "response.clientDataJSON is an empty DOMString", { $0.settingResponse("clientDataJSON", "") }),
            ("F-12", "missing response.authenticatorData", { $0.settingResponse("authenticatorData", nil) }),
            ("F-13", "response.authenticatorData is not a DOMString", { $0.settingResponse("authenticatorData", 7) }),
            ("F-14", "response.authenticatorData is not base64url", { $0.settingResponse("authenticatorData", "**not base64url**") }),
            ("F-15", "response.authenticatorData is an empty DOMString", { $0.settingResponse("authenticatorData", "") }),
            ("F-16", "missing response.signature", { $0.settingResponse("signature", nil) }),
            ("F-17", "response.signature is not a DOMString", { $0.settingResponse("signature", .array([])) }),
            ("F-18", "response.signature is not base64url", { $0.settingResponse("signature", "**not base64url**") }),
            ("F-19", "response.signature is an empty DOMString", { $0.settingResponse("signature", "") }),
            ("F-21", "response.userHandle is not a DOMString", { $0.settingResponse("userHandle", 12) }),
        ]
        for (id, what, edit) in edits {
            g.F(id, "ServerAuthenticatorAssertionResponse with \(what)") { r in try signIn(r, edit: edit) }
        }
        g.F("F-20", "ServerAuthenticatorAssertionResponse whose response.signature can not be verified") { r in
            try signIn(r) { b in b.corruptSignature = true }
        }
        return g.items.sorted { itemOrder($0.id) < itemOrder($1.id) }
    }

    static var resp2: [ConformanceItem] {
        var g = ItemGroup("Server-ServerAuthenticatorAssertionResponse-Resp-2")
        for (id, what, edits) in clientDataItems(expectedType: "webauthn.get", otherType: "webauthn.create") {
            nonisolated(unsafe) let edits = edits
            g.F(id, "ServerAuthenticatorAssertionResponse with \(what)") { r in
                try signIn(r) { b in b.rawClientDataJSON = clientData(b.clientData, edits) }
            }
        }
        return g.items
    }

    static var resp3: [ConformanceItem] {
        var g = ItemGroup("Server-ServerAuthenticatorAssertionResponse-Resp-3")
        g.P("P-1", "A valid assertion from an authenticator without a counter (always 0): the server succeeds") { r in
            let a = SoftAuthenticator(signCount: 0)
            let name = try r.enrol(a)
            return succeeded(try r.login(a, username: name)) + succeeded(try r.login(a, username: name))
        }
        let flags: [(String, String, String, Bool, Bool)] = [
            ("P-2", "UV set (UP not set)", "required", false, true),
            ("P-3", "UV and UP set", "required", true, true),
            ("P-4", "neither UV nor UP set", "preferred", false, false),
            ("P-5", "UP set (UV not set)", "discouraged", true, false),
            ("P-6", "UV set, despite", "discouraged", true, true),
            ("P-7", "neither UV nor UP set", "discouraged", false, false),
        ]
        for (id, what, uv, up, verified) in flags {
            g.P(id, "A valid assertion with authenticatorData.flags \(what) for userVerification \"\(uv)\": the server succeeds") { r in
                succeeded(try signIn(r, userVerification: uv) { b in b.userPresent = up; b.userVerified = verified })
            }
        }
        g.P("P-8", "A valid assertion whose authenticatorData carries extension data with ED set: the server accepts it") { r in
            succeeded(try signIn(r) { b in b.extensionData = .map([CBORPair(.text("credProtect"), .unsigned(1))]) })
        }
        g.F("F-1", "authenticatorData with leftover bytes") { r in try signIn(r) { b in b.trailingAuthenticatorData = [0x00, 0x01] } }
        g.F("F-2", "authenticatorData.rpIdHash with an invalid hash") { r in try signIn(r) { b in b.rpId = "another-rp.example" } }
        g.F("F-3", "a signature over an invalid clientDataHash") { r in
            try signIn(r) { b in b.signedClientDataJSON = Array("{\"type\":\"webauthn.get\"}".utf8) }
        }
        g.F("F-4", "an authenticator with a counter: authenticatorData.counter is not increased") { r in
            let a = SoftAuthenticator(signCount: 5)
            let name = try r.enrol(a)
            return try r.login(a, username: name) { b in b.signCount = 5 }
        }
        g.F("F-5", "only authenticatorData.flags.UP set, for userVerification \"required\"") { r in
            try signIn(r, userVerification: "required") { b in b.userPresent = true; b.userVerified = false }
        }
        return g.items
    }
}

@Suite("FIDO2 server conformance: GetAssertion Request") struct GetAssertionRequestItems {
    @Test("Server-ServerPublicKeyCredentialGetOptionsResponse-Req-1", arguments: GetAssertionRequest.req1) func req1(_ item: ConformanceItem) { check(item) }
}

@Suite("FIDO2 server conformance: GetAssertion Response") struct GetAssertionResponseItems {
    @Test("Server-ServerAuthenticatorAssertionResponse-Resp-1", arguments: GetAssertionResponse.resp1) func resp1(_ item: ConformanceItem) { check(item) }
    @Test("Server-ServerAuthenticatorAssertionResponse-Resp-2", arguments: GetAssertionResponse.resp2) func resp2(_ item: ConformanceItem) { check(item) }
    @Test("Server-ServerAuthenticatorAssertionResponse-Resp-3", arguments: GetAssertionResponse.resp3) func resp3(_ item: ConformanceItem) { check(item) }
}
