import Crypto
import HTTP
import JSON
import WebAuthn
import WebAuthnTesting

/// The server a load benchmark talks to, and how hard: `--url http://host:port`, `--origin`,
/// `--concurrency`, `--duration`. Shared by `bench login` and `bench step-up`.
struct BenchTarget {
    var host = "127.0.0.1"
    var port = 8080
    var origin = "http://localhost:8080"
    var concurrency: Int
    var duration = 10.0

    init(_ args: ParsedArguments, defaultConcurrency: Int) throws(UsageError) {
        concurrency = defaultConcurrency
        guard let url = args.value("url") else { throw UsageError(message: "--url is required, e.g. --url http://127.0.0.1:8080") }
        guard url.hasPrefix("http://") else { throw UsageError(message: "--url must be http://host:port (the benchmark speaks plain HTTP)") }
        let rest = url.dropFirst(7).split(separator: "/").first.map(String.init) ?? ""
        let hostPort = rest.split(separator: ":")
        host = hostPort.first.map(String.init) ?? "127.0.0.1"
        if host == "localhost" { host = "127.0.0.1" }
        if hostPort.count > 1 {
            guard let p = Int(hostPort[1]), (1...65535).contains(p) else { throw UsageError(message: "bad port in --url") }
            port = p
        }
        origin = args.value("origin") ?? "http://" + rest
        if let c = args.value("concurrency") {
            guard let n = Int(c), n >= 1, n <= 1024 else { throw UsageError(message: "--concurrency 1…1024") }
            concurrency = n
        }
        if let d = args.value("duration") {
            guard let n = Double(d), n > 0, n <= 3600 else { throw UsageError(message: "--duration seconds (0…3600)") }
            duration = n
        }
    }
}

extension HTTPClient {
    /// A POST with a JSON body (and `Authorization` when given); nil when no answer came.
    func postJSON(_ path: String, _ body: [UInt8], authorization: String? = nil, headers extra: [(String, String)] = []) -> ClientResponse? {
        var headers = [("Content-Type", "application/json")] + extra
        if let authorization { headers.append(("Authorization", authorization)) }
        return try? send(method: "POST", path: path, headers: headers, body: body)
    }
}

/// A passkey account signed up through the real API (registration options, then a new soft ES256
/// authenticator's credential to verify, none attestation): where `bench login` and
/// `bench step-up` start.
struct BenchAccount: @unchecked Sendable {
    let authenticator: SoftAuthenticator
    let rpId: String
    /// `tokens.access_token` of the verify answer.
    let accessToken: String?

    enum Failure: Error {
        /// No 200 with a challenge and `rp.id` (nil: no answer).
        case options(ClientResponse?)
        /// No 201 (nil: no answer). The challenge is spent either way.
        case verify(ClientResponse?)
    }

    static func signUp(_ client: HTTPClient, username: String, displayName: String, origin: String) -> Result<BenchAccount, Failure> {
        let request = #"{"username":"\#(username)","displayName":"\#(displayName)"}"#
        let options = client.postJSON("/v1/passkeys/registration/options", Array(request.utf8))
        guard let options, options.status == 200, let json = try? JSONParser.parse(options.body),
              let challenge = json["challenge"]?.stringValue.flatMap(Base64URL.decode), let rpId = json["rp"]?["id"]?.stringValue else {
            return .failure(.options(options))
        }
        let authenticator = SoftAuthenticator(algorithm: .es256)
        // A passkey keeps the user handle and returns it in discoverable logins (WebAuthn L3 §7.2 step 6).
        authenticator.userHandle = json["user"]?["id"]?.stringValue.flatMap(Base64URL.decode)
        let body = authenticator.registration(challenge: challenge, rpId: rpId, origin: origin).bytes()
        let verify = client.postJSON("/v1/passkeys/registration/verify", body)
        guard let verify, verify.status == 201 else { return .failure(.verify(verify)) }
        let token = (try? JSONParser.parse(verify.body))?["tokens"]?["access_token"]?.stringValue
        return .success(BenchAccount(authenticator: authenticator, rpId: rpId, accessToken: token))
    }
}
