import Foundation
import Storage
import Tokens

/// A DPoP proof as a request presented it (RFC 9449 §4.1), parsed at the edge (`DPoPPresentation.init(_:)`, beside `SessionDPoP`).
struct DPoPPresentation: Sendable {
    /// The `DPoP` header's value.
    let proof: String
    /// More than one `DPoP` header was sent (§4.3 step 1 refuses it).
    let repeated: Bool
    let method: String
    /// The request's path as sent (percent-encoded), without the query (RFC 9449 §4.3 normalises both sides).
    let path: String
}

extension DPoPProof {
    /// What replay refusal stores of this proof (RFC 9449 §11.1).
    var replay: DPoPReplayKey { DPoPReplayKey(replayKey) }
    /// What a request that issues tokens records (the `jti`) and binds (the key) in its one write.
    var binding: DPoPBinding { DPoPBinding(replay: replay, jkt: jkt) }
}

/// Sender-constrained tokens at the OpenID Provider (SPEC "Sender-constrained tokens"): proofs
/// checked with time from `Runtime`, nonces derived from the KEK (the deployment secret without one).
extension OpenIDProvider {
    /// SPEC `dpop_signing_alg_values_supported`.
    static let dpopAlgorithms = DPoPAlgorithm.allCases.map(\.rawValue)

    func dpopNonces() throws(OAuthError) -> DPoPNonces {
        if let key = policy.dpopNonceKey { return DPoPNonces(keyEncryptionKey: key) }
        return DPoPNonces(keyEncryptionKey: try requestIdKey())
    }

    /// The current nonce: every answer to a request that carried a proof or a DPoP-bound token has it.
    func currentDPoPNonce() -> String? { try? dpopNonces().nonce(at: runtime.unixTime) }

    /// SPEC "FAPI 2.0": the only JWS algorithms a `--profile fapi2` client's proofs may use.
    static let fapi2Algorithms: Set<DPoPAlgorithm> = [.es256, .ps256, .edDSA]

    /// §4.3's checks on a proof at the token or PAR endpoint, as `client` is held to them: a
    /// `--profile fapi2` client's proof carries a current server nonce (§8; `use_dpop_nonce`
    /// otherwise) and is ES256, PS256 or EdDSA.
    func checkedProof(_ presented: DPoPPresentation?, for client: OAuthClientRecord) throws(OAuthError) -> DPoPProof? {
        try checkedProof(presented, demandNonce: client.isFAPI2,
                         algorithms: client.isFAPI2 ? Self.fapi2Algorithms : Set(DPoPAlgorithm.allCases))
    }

    /// §4.3's checks on the presented proof (nil when none came). `accessToken`/`boundKey`: at a
    /// resource (userinfo), the token the proof must hash (`ath`) and the key it is bound to.
    func checkedProof(_ presented: DPoPPresentation?, accessToken: String? = nil, boundKey: String? = nil,
                      demandNonce: Bool = false, algorithms: Set<DPoPAlgorithm> = Set(DPoPAlgorithm.allCases)) throws(OAuthError) -> DPoPProof? {
        guard let presented else { return nil }
        let nonces = try dpopNonces()
        let now = runtime.unixTime
        func refusal(_ code: OAuthError.Code, _ why: String) -> OAuthError {
            var error = OAuthError(code, why)
            error.dpopNonce = nonces.nonce(at: now)
            return error
        }
        guard !presented.repeated else { throw refusal(.invalidDPoPProof, "more than one DPoP header") }
        let request = DPoPRequest(method: presented.method, path: presented.path, origins: policy.dpopOrigins, accessToken: accessToken,
                                  boundKey: boundKey, nonces: demandNonce ? nonces : nil, algorithms: algorithms)
        do {
            return try DPoP.verify(presented.proof, request: request, now: now)
        } catch {
            throw refusal(error.code == .useNonce ? .useDPoPNonce : .invalidDPoPProof, error.reason)
        }
    }

    static var replayedProof: OAuthError { OAuthError(.invalidDPoPProof, "the DPoP proof was used before (jti)") }

    /// RFC 9449 §7.1, §7.2 at userinfo: a DPoP-bound token works only as `Authorization: DPoP` with
    /// a proof by its key whose `ath` is its hash, each proof once (recorded: the route's one
    /// write); a Bearer token is not accepted under the DPoP scheme.
    func checkPossession(_ bearer: OAuthBearer, _ presented: DPoPPresentation?) throws(OAuthError) {
        func refusal(_ code: OAuthError.Code, _ why: String) -> OAuthError {
            var error = OAuthError(code, why)
            error.dpopNonce = currentDPoPNonce() ?? ""
            return error
        }
        guard let key = bearer.dpopKey else {
            if bearer.presentedAsDPoP { throw refusal(.invalidToken, "the access token is not DPoP-bound") }
            return
        }
        guard bearer.presentedAsDPoP else { throw refusal(.invalidToken, "a DPoP-bound access token is presented as Authorization: DPoP") }
        // SPEC "FAPI 2.0": a fapi2 client's token is presented with ES256, PS256 or EdDSA proofs only.
        let fapi2 = ((try? clients.client(id: bearer.clientId)) ?? nil)?.isFAPI2 ?? false
        guard let proof = try checkedProof(presented, accessToken: bearer.token, boundKey: key,
                                           algorithms: fapi2 ? Self.fapi2Algorithms : Set(DPoPAlgorithm.allCases)) else {
            throw refusal(.invalidDPoPProof, "a DPoP proof is required with this access token")
        }
        let fresh: Bool
        do { fresh = try store.recordDPoPProof(proof.replay) } catch { throw OAuthError.unavailable }
        guard fresh else { throw refusal(.invalidDPoPProof, Self.replayedProof.description) }
    }
}
