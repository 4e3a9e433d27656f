import HTTP
import Storage
import Tokens

/// DPoP on the first-party routes (SPEC "Sender-constrained tokens", "HTTP contract"; RFC 9449):
/// a proof on a passkey verify, `POST /v1/email/verify` or `/v1/token` binds the session to its
/// key; every route that takes an access token then needs `Authorization: DPoP` with a proof by
/// that key whose `ath` is the token's hash. Every refusal is 401 `unauthorized` with
/// `WWW-Authenticate: DPoP error=…, algs=…`. `/v1` never demands a nonce; every answer to a
/// request that carried a proof names the current one (`DPoP-Nonce`, added by `AuthChallenge`).
/// Read at the edge: services get the checked proof as a `DPoPBinding`, never the request.
struct SessionDPoP: Sendable {
    /// `WWW-Authenticate`'s `algs` (RFC 9449 §7.1): what `DPoP.verify` accepts.
    static let algorithms = DPoPAlgorithm.allCases.map(\.rawValue).joined(separator: " ")

    /// The origins `htu` may name: the issuer's and the allowlisted https web origins.
    let origins: [String]
    /// Where an access-token route records a proof's `jti` (RFC 9449 §11.1).
    let proofs: DPoPProofRepository
    /// `Runtime.unixTime`.
    let now: @Sendable () -> Int64

    /// RFC 9449 §7.1's error codes on a resource.
    enum Failure: String, Sendable {
        case invalidProof = "invalid_dpop_proof"
        case invalidToken = "invalid_token"
    }

    static func refusal(_ failure: Failure, _ detail: String) -> ServiceError {
        ServiceError(.unauthorized, detail,
                     headers: [("WWW-Authenticate", "DPoP error=\"\(failure.rawValue)\", algs=\"\(algorithms)\"")])
    }

    static var replayed: ServiceError { refusal(.invalidProof, "the DPoP proof was used before (jti)") }

    /// Whether the request carries a `DPoP` header at all.
    static func carriesProof(_ request: Request) -> Bool { request.header("DPoP") != nil }

    /// The proof of a request that issues tokens (no `ath`), checked, as what the request's one
    /// write records and binds; nil when none came.
    func binding(_ request: Request) throws(ServiceError) -> DPoPBinding? {
        try checked(request, accessToken: nil, boundKey: nil)?.binding
    }

    /// RFC 9449 §4.3 on the request's one `DPoP` header; nil when there is none.
    func checked(_ request: Request, accessToken: String?, boundKey: String?) throws(ServiceError) -> DPoPProof? {
        guard let presented = DPoPPresentation(request) else { return nil }
        guard !presented.repeated else { throw Self.refusal(.invalidProof, "more than one DPoP header") }
        let target = DPoPRequest(method: presented.method, path: presented.path, origins: origins, accessToken: accessToken, boundKey: boundKey)
        do {
            return try DPoP.verify(presented.proof, request: target, now: now())
        } catch {
            throw Self.refusal(.invalidProof, error.reason)
        }
    }

    /// An access token as presented: its scheme (`DPoP` or `Bearer`, RFC 9449 §7.1) and value.
    struct Presented: Sendable {
        let token: String
        let asDPoP: Bool
    }

    static func presented(_ request: Request) -> Presented? {
        if let token = BearerCredentials.value(request, scheme: "DPoP") { return Presented(token: token, asDPoP: true) }
        return BearerCredentials.value(request, scheme: "Bearer").map { Presented(token: $0, asDPoP: false) }
    }

    /// RFC 9449 §7.1, §7.2 for a session's access token: a bound token only as `Authorization: DPoP`
    /// with a proof by its key and `ath` its hash, each proof accepted once on every instance: the
    /// `jti` goes with the route's one write (`DPoPProofRepository.carry`; `settle` after the
    /// route); an unbound token only as Bearer.
    func possession(_ caller: SessionService.Caller, _ presented: Presented, _ request: Request) throws(ServiceError) {
        guard let key = caller.jkt else {
            if presented.asDPoP { throw Self.refusal(.invalidToken, "the access token is not DPoP-bound: send it as Bearer") }
            return
        }
        guard presented.asDPoP else { throw Self.refusal(.invalidToken, "a DPoP-bound access token is sent as Authorization: DPoP") }
        guard let proof = try checked(request, accessToken: presented.token, boundKey: key) else {
            throw Self.refusal(.invalidProof, "a DPoP proof is required with this access token")
        }
        guard !proofs.carry(proof.replay) else { return }
        // No request under way (a caller resolved outside one): recorded now, on its own.
        let fresh = try storage { () throws(StorageError) in try proofs.record(proof.replay) }
        guard fresh else { throw Self.replayed }
    }

    /// After the route, for the proof `possession` handed to its write: nil when it was new (that
    /// write committed it, or, the route having written nothing that carried it, it is recorded
    /// now) or none was handed; `replayed` when it was seen before — that write then failed and
    /// wrote nothing, and the route's answer is not sent (a read-only route's read is discarded).
    func settle() -> ServiceError? {
        do {
            return try proofs.settleCarried() == false ? Self.replayed : nil
        } catch {
            return ServiceError(error)
        }
    }
}

extension DPoPPresentation {
    /// The request's `DPoP` header as sent (nil: none), read at the edge by the OAuth routes and the
    /// first-party caller resolution alike.
    init?(_ request: Request) {
        let values = request.headers.filter { $0.0.lowercased() == "dpop" }
        guard let first = values.first else { return nil }
        self.init(proof: first.1, repeated: values.count > 1, method: request.method, path: request.rawPath)
    }
}
