import Crypto
import Foundation
import HTTP
import JSON
import Tokens
import WebAuthnTesting

/// What every flow of one `bench oauth` run shares: the server, the confidential client it
/// registered, and the redirect URI (never fetched: the code is read from the approve answer).
struct OAuthBenchSetup: Sendable {
    let host: String
    let port: Int
    /// The issuer's origin (the server's `LATCHKEY_ORIGINS`, and the page's `Origin`).
    let origin: String
    let clientId: String
    let clientSecret: String
    /// The `--profile fapi2` client the FAPI 2.0 flow uses.
    var fapi2: FAPI2BenchClient? = nil
    static let redirectURI = "https://client.bench.example/cb"

    var basic: String { "Basic " + Base64.encodeStandard(Array("\(clientId):\(clientSecret)".utf8)) }
}

/// One scripted run of requests as a value that performs its next step: the whole OpenID code flow
/// as SPEC "OpenID Provider" and Tests/OIDC/test_oidc.py (`OPBrowser`) drive it, or the baseline, a
/// plain passkey login (options + verify, what `bench login` times). The caller times or counts
/// each `step` on its own.
struct BenchFlow {
    /// `fapi2`: the same flow for a `--profile fapi2` client (private_key_jwt, DPoP with the server's
    /// nonce, PAR, a refresh that does not rotate).
    enum Kind: Sendable { case oauth, login, fapi2 }

    static func steps(_ kind: Kind) -> [String] {
        switch kind {
        case .oauth, .fapi2: ["par", "authorize", "request", "sign-in", "approve", "token", "userinfo", "refresh"]
        case .login: ["options", "verify"]
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let step: String
        let status: Int
        let detail: String
        var description: String { "\(step): HTTP \(status) \(detail)" }
    }

    let kind: Kind
    let setup: OAuthBenchSetup
    let account: BenchAccount
    private(set) var index = 0
    var done: Bool { index == Self.steps(kind).count }

    // What the steps hand on.
    private let verifier = Base64URL.encode(SecureRandom.bytes(32))
    private var requestURI = "", requestId = "", cookie = "", code = ""
    private var challenge: [UInt8] = [], rpId = "localhost"
    private var accessToken = "", refreshToken = ""
    /// The FAPI 2.0 flow's DPoP key (one per flow, as one per app install).
    private let dpop = DPoPKey.generate()
    /// The browser's address, one per flow (`X-Forwarded-For` to a server that trusts it): SPEC
    /// "Limits" lets one address store 30 authorization requests a minute, whatever the rate
    /// limit, and the flows the bench runs stand for many people's browsers, not one.
    private let browserAddress = "10.\(UInt8.random(in: 0...255)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 1...254))"

    init(_ kind: Kind, setup: OAuthBenchSetup, account: BenchAccount) {
        self.kind = kind
        self.setup = setup
        self.account = account
    }

    /// The next request; throws the step's name, status and answer when it is not the expected one.
    mutating func step(_ http: HTTPClient) throws(Failure) {
        let name = Self.steps(kind)[index]
        switch (kind, name) {
        case (.login, "options"):
            let json = try expect(name, 200, http.postJSON("/v1/passkeys/authentication/options", Array("{}".utf8)))
            guard let c = json["challenge"]?.stringValue.flatMap(Base64URL.decode) else { throw Failure(step: name, status: 200, detail: "no challenge") }
            (challenge, rpId) = (c, json["rpId"]?.stringValue ?? rpId)
        case (.login, "verify"):
            let body = account.authenticator.assertion(challenge: challenge, rpId: rpId, origin: setup.origin).bytes()
            _ = try expect(name, 200, http.postJSON("/v1/passkeys/authentication/verify", body))
        case (.fapi2, "par"), (.fapi2, "token"), (.fapi2, "userinfo"), (.fapi2, "refresh"):
            try fapi2Step(http, name)
        case (_, "par"):
            let state = Base64URL.encode(SecureRandom.bytes(9)), nonce = Base64URL.encode(SecureRandom.bytes(9))
            let form = formBody([("response_type", "code"), ("client_id", setup.clientId), ("redirect_uri", OAuthBenchSetup.redirectURI),
                                 ("scope", "openid profile offline_access"), ("state", state), ("nonce", nonce),
                                 ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))), ("code_challenge_method", "S256")])
            let json = try expect(name, 201, try? http.send(method: "POST", path: "/oauth2/par", headers: formHeaders(), body: form))
            guard let uri = json["request_uri"]?.stringValue else { throw Failure(step: name, status: 201, detail: "no request_uri") }
            requestURI = uri
        case (_, "authorize"):
            // The pushed request's own client: a request_uri answers only the client that pushed it.
            let clientId = kind == .fapi2 ? (setup.fapi2?.id ?? setup.clientId) : setup.clientId
            let query = formBody([("client_id", clientId), ("request_uri", requestURI)])
            let r = try? http.send(method: "GET", path: "/oauth2/authorize?" + String(decoding: query, as: UTF8.self),
                                   headers: [("X-Forwarded-For", browserAddress)])
            guard let r, r.status == 303, let location = r.header("Location"),
                  let id = queryValue(location, "request"), id.hasPrefix("lkq_") else { throw failure(name, r) }
            requestId = id
        case (_, "request"):
            let r = try? http.send(method: "GET", path: "/v1/oauth/requests/\(requestId)", headers: [("Sec-Fetch-Site", "same-origin")])
            let json = try expect(name, 200, r)
            guard let c = json["publicKey"]?["challenge"]?.stringValue.flatMap(Base64URL.decode) else {
                throw Failure(step: name, status: 200, detail: "no publicKey.challenge")
            }
            (challenge, rpId) = (c, json["publicKey"]?["rpId"]?.stringValue ?? rpId)
        case (_, "sign-in"):
            let body = account.authenticator.assertion(challenge: challenge, rpId: rpId, origin: setup.origin).bytes()
            let r = http.postJSON("/v1/oauth/requests/\(requestId)/sign-in", body, headers: pageHeaders(cookie: false))
            _ = try expect(name, 200, r)
            // `latchkey-op=<value>; Path=/; …` (an http issuer; `__Host-latchkey-op` on https).
            guard let set = r?.header("Set-Cookie"), let pair = set.split(separator: ";").first, pair.contains("latchkey-op=") else {
                throw Failure(step: name, status: 200, detail: "no OP session cookie")
            }
            cookie = String(pair)
        case (_, "approve"):
            let r = http.postJSON("/v1/oauth/requests/\(requestId)/approve", Array("{}".utf8), headers: pageHeaders(cookie: true))
            let json = try expect(name, 200, r)
            guard let to = json["redirectTo"]?.stringValue, let c = queryValue(to, "code") else { throw Failure(step: name, status: 200, detail: "no code") }
            code = c
        case (_, "token"):
            let form = formBody([("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthBenchSetup.redirectURI),
                                 ("code_verifier", verifier)])
            let json = try expect(name, 200, try? http.send(method: "POST", path: "/oauth2/token", headers: formHeaders(), body: form))
            guard let a = json["access_token"]?.stringValue, let rt = json["refresh_token"]?.stringValue, json["id_token"] != nil else {
                throw Failure(step: name, status: 200, detail: "no access_token, refresh_token or id_token")
            }
            (accessToken, refreshToken) = (a, rt)
        case (_, "userinfo"):
            let json = try expect(name, 200, try? http.send(method: "GET", path: "/oauth2/userinfo", headers: [("Authorization", "Bearer \(accessToken)")]))
            guard json["sub"] != nil else { throw Failure(step: name, status: 200, detail: "no sub") }
        default:  // refresh
            let form = formBody([("grant_type", "refresh_token"), ("refresh_token", refreshToken)])
            let json = try expect(name, 200, try? http.send(method: "POST", path: "/oauth2/token", headers: formHeaders(), body: form))
            guard json["access_token"] != nil else { throw Failure(step: name, status: 200, detail: "no access_token") }
        }
        index += 1
    }

    /// The FAPI 2.0 client's steps: PAR and the token endpoint with `private_key_jwt` and a proof
    /// carrying the server's nonce (retried once when it is stale), userinfo with `Authorization: DPoP`.
    private mutating func fapi2Step(_ http: HTTPClient, _ name: String) throws(Failure) {
        guard let client = setup.fapi2 else { throw Failure(step: name, status: 0, detail: "no fapi2 client") }
        switch name {
        case "par":
            let form = [("response_type", "code"), ("client_id", client.id), ("redirect_uri", OAuthBenchSetup.redirectURI),
                        ("scope", "openid profile offline_access"), ("state", Base64URL.encode(SecureRandom.bytes(9))),
                        ("nonce", Base64URL.encode(SecureRandom.bytes(9))),
                        ("code_challenge", Base64URL.encode(Digest.sha256(Array(verifier.utf8)))), ("code_challenge_method", "S256")]
            let json = try expect(name, 201, client.post(http, "/oauth2/par", form, key: dpop))
            guard let uri = json["request_uri"]?.stringValue else { throw Failure(step: name, status: 201, detail: "no request_uri") }
            requestURI = uri
        case "token":
            let form = [("grant_type", "authorization_code"), ("code", code), ("redirect_uri", OAuthBenchSetup.redirectURI), ("code_verifier", verifier)]
            let json = try expect(name, 200, client.post(http, "/oauth2/token", form, key: dpop))
            guard let a = json["access_token"]?.stringValue, let rt = json["refresh_token"]?.stringValue, json["token_type"] == "DPoP" else {
                throw Failure(step: name, status: 200, detail: "no DPoP access_token or refresh_token")
            }
            (accessToken, refreshToken) = (a, rt)
        case "userinfo":
            let proof = dpop.proof(method: "GET", url: client.issuer + "/oauth2/userinfo", iat: Int64(Date().timeIntervalSince1970), accessToken: accessToken)
            let json = try expect(name, 200, try? http.send(method: "GET", path: "/oauth2/userinfo",
                                                            headers: [("Authorization", "DPoP \(accessToken)"), ("DPoP", proof)]))
            guard json["sub"] != nil else { throw Failure(step: name, status: 200, detail: "no sub") }
        default:  // refresh: the token does not rotate
            let json = try expect(name, 200, client.post(http, "/oauth2/token", [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], key: dpop))
            guard json["access_token"] != nil, json["refresh_token"] == nil else { throw Failure(step: name, status: 200, detail: "rotated or no access_token") }
        }
    }

    /// The headers the /authorize page's same-origin fetch sends (SPEC "The cookie routes").
    private func pageHeaders(cookie withCookie: Bool) -> [(String, String)] {
        [("Origin", setup.origin), ("Sec-Fetch-Site", "same-origin")] + (withCookie ? [("Cookie", cookie)] : [])
    }

    private func formHeaders() -> [(String, String)] {
        [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", setup.basic)]
    }

    private func expect(_ step: String, _ status: Int, _ r: ClientResponse?) throws(Failure) -> JSONValue {
        guard let r, r.status == status, let json = try? JSONParser.parse(r.body) else { throw failure(step, r) }
        return json
    }

    private func failure(_ step: String, _ r: ClientResponse?) -> Failure {
        Failure(step: step, status: r?.status ?? 0, detail: r.map { String($0.text.prefix(300)) } ?? "no answer")
    }
}

/// `application/x-www-form-urlencoded` (WHATWG URL §5.2): unreserved bytes as they are, the rest %XX.
func formBody(_ pairs: [(String, String)]) -> [UInt8] {
    func encode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                out += "%" + Hex.encode([b]).uppercased()
            }
        }
        return out
    }
    return Array(pairs.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&").utf8)
}

/// The value of `name` in a URL's query, percent-decoded; nil when absent.
func queryValue(_ url: String, _ name: String) -> String? {
    guard let q = url.firstIndex(of: "?") else { return nil }
    for pair in url[url.index(after: q)...].split(separator: "#").first?.split(separator: "&") ?? [] {
        let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.first.map(String.init) == name else { continue }
        var bytes: [UInt8] = []
        var it = Array((parts.count > 1 ? parts[1] : "").utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "%"), it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(v); it = it.dropFirst(2)
            } else { bytes.append(b == UInt8(ascii: "+") ? UInt8(ascii: " ") : b) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
    return nil
}
