import Foundation

/// Latchkey's HTTP contract (docs/api.md) for an app: the passkey ceremonies, sessions,
/// step-up, device keys. Stateless: tokens are passed in and handed back, so the app decides where
/// they live (the Keychain, usually).
///
/// ```swift
/// let latchkey = Latchkey(baseURL: URL(string: "https://login.example.com")!)
/// let options = try await latchkey.registrationOptions(username: "ada", displayName: "Ada Lovelace")
/// let credential = try await PasskeyAuthorization(anchor: window).register(options)   // AuthenticationServices
/// let signIn = try await latchkey.verifyRegistration(credential)
/// ```
public struct Latchkey: Sendable {
    public let baseURL: URL
    public let transport: any LatchkeyTransport
    /// With a DPoP key (RFC 9449, docs/integration/ios.md): a proof on every sign-in and refresh,
    /// so the session's tokens are bound to the key, and `Authorization: DPoP <token>` with a proof
    /// (`ath`) on every call that presents an access token.
    public let dpop: DPoPProofs?

    public init(baseURL: URL, transport: any LatchkeyTransport = URLSessionTransport(), dpopKey: (any DPoPKey)? = nil) {
        self.baseURL = baseURL
        self.transport = transport
        dpop = dpopKey.map { DPoPProofs(key: $0) }
    }

    /// A client whose proofs come from `dpop` (e.g. with `publicBaseURL`).
    public init(baseURL: URL, transport: any LatchkeyTransport = URLSessionTransport(), dpop: DPoPProofs) {
        self.baseURL = baseURL
        self.transport = transport
        self.dpop = dpop
    }

    /// Who a request is made as.
    public enum Authorization: Sendable {
        /// An access token (sent as `DPoP <token>` with a proof when the client has a DPoP key).
        case bearer(String)
        /// An enrolment ticket from an app backend (`Authorization: Ticket …`).
        case ticket(String)
        /// A token DPoP never binds, always `Bearer`: a recovery token (on registration options), a
        /// step-up token (at `/v1/step-up/consume`).
        case unbound(String)

        var header: String {
            switch self {
            case .bearer(let t), .unbound(let t): "Bearer \(t)"
            case .ticket(let t): "Ticket \(t)"
            }
        }
    }

    /// The routes whose answer starts or renews a session: with a DPoP key they carry a proof
    /// without `ath`, and the tokens they issue are bound to the key.
    static let sessionIssuingPaths: Set<String> = [
        "/v1/passkeys/registration/verify", "/v1/passkeys/authentication/verify", "/v1/token", "/v1/email/verify",
    ]

    // MARK: Registration

    /// Options for a new account (`{"username","displayName"}`, no session): 409 `conflict` when the
    /// username is taken.
    public func registrationOptions(username: String, displayName: String) async throws(LatchkeyError) -> RegistrationOptions {
        let body: LatchkeyJSON = ["username": .string(username), "displayName": .string(displayName)]
        return try RegistrationOptions(json: try await call("POST", "/v1/passkeys/registration/options", body: body))
    }

    /// Options for another passkey on an account: a session's access token (with a step-up token
    /// for `StepUpAction.passkeyAddition` from a passkey session, docs/assurance.md), an enrolment
    /// ticket, or a recovery token. `conditional`: options for an automatic passkey upgrade.
    public func registrationOptions(_ authorization: Authorization, stepUpToken: String? = nil,
                                    conditional: Bool = false) async throws(LatchkeyError) -> RegistrationOptions {
        let body: LatchkeyJSON = conditional ? ["mediation": "conditional"] : [:]
        let headers = stepUpToken.map { [("Latchkey-Step-Up", $0)] } ?? []
        return try RegistrationOptions(json: try await call("POST", "/v1/passkeys/registration/options", body: body,
                                                            authorization: authorization, headers: headers))
    }

    /// Posts the new credential; 201 `{"user","passkey","tokens"}`.
    public func verifyRegistration(_ credential: RegistrationCredential) async throws(LatchkeyError) -> SignIn {
        try SignIn(try await call("POST", "/v1/passkeys/registration/verify", body: credential.json))
    }

    // MARK: Sign-in

    /// `{}` (discoverable: the account picker, or AutoFill) or `{"username"}`. An unknown username
    /// still gets options (decoys): the answer does not say whether the account exists.
    public func authenticationOptions(username: String? = nil) async throws(LatchkeyError) -> AuthenticationOptions {
        let body: LatchkeyJSON = username.map { ["username": .string($0)] } ?? [:]
        return try AuthenticationOptions(json: try await call("POST", "/v1/passkeys/authentication/options", body: body))
    }

    public func verifyAuthentication(_ credential: AssertionCredential) async throws(LatchkeyError) -> SignIn {
        try SignIn(try await call("POST", "/v1/passkeys/authentication/verify", body: credential.json))
    }

    // MARK: Sessions and passkeys

    /// Rotates the refresh token (the old one is dead from now on; using it again ends the session).
    public func refresh(refreshToken: String) async throws(LatchkeyError) -> Tokens {
        try Tokens(try await call("POST", "/v1/token", body: ["grant_type": "refresh_token", "refresh_token": .string(refreshToken)]))
    }

    public func logout(accessToken: String) async throws(LatchkeyError) {
        _ = try await call("POST", "/v1/logout", body: [:], authorization: .bearer(accessToken))
    }

    public func passkeys(accessToken: String) async throws(LatchkeyError) -> [Passkey] {
        let list = try await call("GET", "/v1/passkeys", authorization: .bearer(accessToken))
        return try (list["passkeys"]?.arrayValue ?? []).map { p throws(LatchkeyError) in try Passkey(p) }
    }

    public func renamePasskey(id: String, name: String, accessToken: String) async throws(LatchkeyError) {
        _ = try await call("PATCH", "/v1/passkeys/\(Self.pathSegment(id))", body: ["name": .string(name)], authorization: .bearer(accessToken))
    }

    /// Needs a step-up for `StepUpAction.passkeyRevocation(credentialId: id)`.
    public func revokePasskey(id: String, accessToken: String, stepUpToken: String) async throws(LatchkeyError) {
        _ = try await call("DELETE", "/v1/passkeys/\(Self.pathSegment(id))", authorization: .bearer(accessToken),
                           headers: [("Latchkey-Step-Up", stepUpToken)])
    }

    // MARK: The exchange

    /// One request: JSON in, JSON out (`.null` for an empty 2xx body); any non-2xx becomes the
    /// `LatchkeyError` of its problem document.
    public func call(_ method: String, _ path: String, body: LatchkeyJSON? = nil, authorization: Authorization? = nil,
                     headers extra: [(String, String)] = []) async throws(LatchkeyError) -> LatchkeyJSON {
        var response = try await exchange(method, path, body: body, authorization: authorization, headers: extra)
        // RFC 9449 §8/§9: the server asked for its nonce; one retry with a fresh proof carrying it.
        if dpop != nil, DPoPProofs.asksForNonce(response) {
            response = try await exchange(method, path, body: body, authorization: authorization, headers: extra)
        }
        guard (200..<300).contains(response.status) else { throw LatchkeyError.fromResponse(response) }
        if response.body.isEmpty { return .null }
        do { return try LatchkeyJSON(parsing: response.body) } catch {
            throw LatchkeyError(.unexpectedResponse, "\(method) \(path): the answer is not JSON", status: response.status)
        }
    }

    /// One request as it goes out (with a DPoP proof where one belongs) and its answer, any status.
    func exchange(_ method: String, _ path: String, body: LatchkeyJSON?, authorization: Authorization?,
                  headers extra: [(String, String)]) async throws(LatchkeyError) -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("Accept", "application/json, application/problem+json")]
        if body != nil { headers.append(("Content-Type", "application/json")) }
        if let dpop, let url = URL(string: path, relativeTo: dpop.publicBaseURL ?? baseURL)?.absoluteURL {
            if case .bearer(let token) = authorization {
                headers.append(("Authorization", "DPoP \(token)"))
                headers.append(("DPoP", try await dpop.proof(method: method, url: url, accessToken: token)))
            } else {
                if let authorization { headers.append(("Authorization", authorization.header)) }
                if Self.sessionIssuingPaths.contains(String(path.prefix { $0 != "?" })) {
                    headers.append(("DPoP", try await dpop.proof(method: method, url: url)))
                }
            }
        } else if let authorization {
            headers.append(("Authorization", authorization.header))
        }
        headers += extra.map { (name: $0.0, value: $0.1) }
        let request = HTTPRequest(method: method, path: path, headers: headers, body: body.map { Data($0.serialized()) })
        let response: HTTPResponse
        do { response = try await transport.send(request, baseURL: baseURL) } catch let e as LatchkeyError { throw e } catch {
            throw LatchkeyError(.transport, "\(method) \(path): \(error)")
        }
        if let dpop, let nonce = response.header("DPoP-Nonce") { dpop.nonce = nonce }
        return response
    }

    /// A base64url id is already safe in a path; anything else is percent-encoded.
    static let base64URLAlphabet = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")

    static func pathSegment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: base64URLAlphabet) ?? id
    }
}
