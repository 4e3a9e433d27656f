import Crypto
import Foundation
import HTTP
import JSON
import Synchronization
import Tokens

/// `bench oauth`'s FAPI 2.0 client (SPEC "FAPI 2.0 Security Profile"): registered `--profile fapi2`
/// with `clients add`, authenticating with `private_key_jwt` (an ES256 key whose JWKS this bench
/// serves on loopback), and the last `DPoP-Nonce` the server sent, which every flow's proofs carry
/// (a client keeps it; a stale one costs a retry, as RFC 9449 §8 has it).
final class FAPI2BenchClient: Sendable {
    let id: String
    /// The server's issuer: a client assertion's `aud`, and the origin of every proof's `htu`.
    let issuer: String
    /// The client's assertion key, as a JWS signer (`DPoPKey` signs any header and claims).
    let signer: DPoPKey
    private let nonce = Mutex<String?>(nil)

    init(id: String, issuer: String, signer: DPoPKey) {
        self.id = id
        self.issuer = issuer
        self.signer = signer
    }

    var currentNonce: String? { nonce.withLock { $0 } }
    func remember(_ r: ClientResponse?) { if let n = r?.header("DPoP-Nonce") { nonce.withLock { $0 = n } } }

    /// `client_assertion_type` and a fresh `client_assertion` (ES256, `aud` the issuer).
    func assertion() -> [(String, String)] {
        let now = Int64(Date().timeIntervalSince1970)
        let claims: JSONValue = .object([("iss", .string(id)), ("sub", .string(id)), ("aud", .string(issuer)),
                                         ("jti", .string(Base64URL.encode(SecureRandom.bytes(16)))), ("iat", .number(Double(now))),
                                         ("exp", .number(Double(now + 60)))])
        let jwt = signer.sign(header: .object([("alg", "ES256"), ("typ", "JWT")]), claims: claims)
        return [("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"), ("client_assertion", jwt)]
    }

    /// POST `form` (the assertion added) to `path` with a proof by `key`; once more with the server's
    /// nonce when it answers `use_dpop_nonce`.
    func post(_ http: HTTPClient, _ path: String, _ form: [(String, String)], key: DPoPKey) -> ClientResponse? {
        var answer: ClientResponse? = nil
        for _ in 0..<2 {
            let proof = key.proof(method: "POST", url: issuer + path, iat: Int64(Date().timeIntervalSince1970), nonce: currentNonce)
            answer = try? http.send(method: "POST", path: path,
                                    headers: [("Content-Type", "application/x-www-form-urlencoded"), ("DPoP", proof)],
                                    body: formBody(form + assertion()))
            remember(answer)
            guard answer?.status == 400, let body = answer?.body, (try? JSONParser.parse(body))?["error"]?.stringValue == "use_dpop_nonce" else { break }
        }
        return answer
    }
}

/// The client's JWKS, served by the bench on a loopback port (`http://127.0.0.1:<port>/jwks.json`:
/// the server runs in development mode, whose address rules let it fetch there).
struct BenchJWKS: Responder {
    let keys: JSONValue

    func respond(to request: Request) -> Response { .json(bytes: JSONValue.object([("keys", keys)]).serialized()) }

    static func start(_ signer: DPoPKey) -> HTTPServer? {
        try? HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 2, maxBodyBytes: 4096),
                        responder: BenchJWKS(keys: .array([signer.jwk])))
    }
}

extension FlowReport {
    /// The FAPI 2.0 flow's figures beside the plain flow's, in the same run (same words as the
    /// plain flow's lines, with `fapi2` for `oauth`), and each as a ratio to the plain flow's.
    static func printFAPI2(_ f: Result, oauth: Result) {
        let what = "flows"
        Swift.print("fapi2      \(what) \(f.flows) in \(formatDecimal(f.seconds, places: 1)) s = \(f.rate.formatted)/s  "
                    + "p50 \(percentile(f.flowLatencies, 0.50, places: 2))  p99 \(percentile(f.flowLatencies, 0.99, places: 2))  "
                    + "errors \(f.errors)  server CPU \(Int(f.serverCPU * 1e6 / Double(max(f.flows, 1)))) µs/flow")
        for (i, name) in BenchFlow.steps(.fapi2).enumerated() {
            Swift.print("step fapi2 \(name.padding(10)) p50 \(percentile(f.stepLatencies[i], 0.50, places: 2))  "
                        + "p99 \(percentile(f.stepLatencies[i], 0.99, places: 2))")
        }
        for (i, name) in BenchFlow.steps(.fapi2).enumerated() {
            let s = f.samples[i]
            Swift.print("db fapi2 \(name.padding(10)) round trips \(stat(s) { $0.wire.roundTrips })  "
                        + "of which after the answer \(stat(s) { $0.afterAnswer.roundTrips })  "
                        + "statements \(stat(s) { $0.wire.statements })  commits \(stat(s) { $0.wire.commits })  "
                        + "WAL \(Int(median(s.map { Double($0.walBytes) }))) B  by tag \(tags(s))")
        }
        let t = Totals(f), o = Totals(oauth)
        Swift.print("per fapi2 flow (sum of the step medians, of the means in brackets): round trips \(num(t.median.roundTrips)) "
                    + "(\(formatDecimal(t.mean.roundTrips, places: 2)))  statements \(num(t.median.statements)) (\(formatDecimal(t.mean.statements, places: 2)))  "
                    + "commits \(num(t.median.commits)) (\(formatDecimal(t.mean.commits, places: 2)))  WAL \(Int(t.median.wal)) B")
        let n = Double(max(f.flows, 1)), w = f.loadWire
        Swift.print("under load fapi2 (the relay's counts over the timed load / completed, background included): "
                    + "round trips \(formatDecimal(Double(w.roundTrips) / n, places: 2))  statements \(formatDecimal(Double(w.statements) / n, places: 2))  "
                    + "commits \(formatDecimal(Double(w.commits) / n, places: 2))  connections opened \(w.connections)")
        let xf = f.commits / Double(max(f.allFlows, 1)), xo = oauth.commits / Double(max(oauth.allFlows, 1))
        Swift.print("xact_commit per fapi2 flow \(formatDecimal(xf, places: 2)) (pg_stat_database, server start to stop over \(f.allFlows))")
        let cpuF = f.serverCPU / Double(max(f.flows, 1)), cpuO = oauth.serverCPU / Double(max(oauth.flows, 1))
        Swift.print("fapi2 / oauth: p50 x\(ratio(at(f.flowLatencies, 0.5), at(oauth.flowLatencies, 0.5)))  "
                    + "round trips x\(ratio(t.median.roundTrips, o.median.roundTrips))  statements x\(ratio(t.median.statements, o.median.statements))  "
                    + "commits x\(ratio(t.median.commits, o.median.commits))  xact_commit x\(ratio(xf, xo))  WAL x\(ratio(t.median.wal, o.median.wal))  "
                    + "server CPU x\(ratio(cpuF, cpuO))")
    }
}
