import Crypto
import EventLoop
import HTTP
import JSON
import LatchkeyServer
import Synchronization
import WebAuthn
import WebAuthnTesting
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey bench step-up`: device-key step-up approvals against a running server over HTTP
/// with PostgreSQL. One approval = `POST /v1/step-up/challenges` + an OpenSSL P-256 signature (the
/// phone's part) + `POST /v1/step-up/verify`; the figure is verified approvals per second, with
/// the latency of the verify request and of the whole round, beside the in-process cost of the
/// signature check alone.
enum StepUpBenchmark {
    static let usage = """
        latchkey bench step-up --url U [--origin O] [--concurrency C] [--duration S]
               latchkey bench step-up --log-compare --database-url D [--log-interval 1] [--rounds 3] [--concurrency 8] [--duration 10] [--server BIN]
        """
    static let help = """
        step-up  device-key step-up verifications per second over HTTP with PostgreSQL: each thread has its
                 own account (passkey sign-up) and device key (enrolled with proof of possession), then
                 loops challenge → sign (OpenSSL, P-256, DER) → verify. Prints approvals/s, p50/p99 of the
                 verify request and of the full round, and the single-thread in-process rate of SPKI import
                 + ECDSA-SHA256 verify for comparison. --origin must be allowlisted (LATCHKEY_ORIGINS); run the
                 server with LATCHKEY_RATE_LIMIT=0, or the per-client limit is what gets measured (429s).
        step-up --log-compare
                 the same load with the transparency log's integrating writer off and on, in the same run: a database
                 latchkey_bench_stepup on D's cluster (created anew, dropped after), served in alternating rounds (off, on,
                 off, on, …) by a server of its own per phase (LATCHKEY_DEV=1, LATCHKEY_RATE_LIMIT=0, one KEK; off:
                 LATCHKEY_LOG_INTERVAL=0, on: --log-interval). Prints approvals/s per phase, the ratio on/off, and the
                 integration lag: for receipts sampled while the writer runs, the time from the verify's answer until
                 GET /v1/receipts/{id} shows their tlog-proof, p50/p99 beside 2 × the interval.
        """

    enum Mode {
        /// A running server at `--url`.
        case target(BenchTarget)
        /// `--log-compare`: servers of its own, the log off and on.
        case logCompare(StepUpLogComparison.Options)
    }

    static func parse(_ args: ParsedArguments) throws(UsageError) -> Mode {
        if args.has("log-compare") { return .logCompare(try StepUpLogComparison.parse(args)) }
        return .target(try BenchTarget(args, defaultConcurrency: 8))
    }

    static func run(_ mode: Mode) -> Int32 {
        switch mode {
        case .target(let o): return run(o)
        case .logCompare(let o): return StepUpLogComparison.run(o)
        }
    }

    /// One benchmark thread's account and device key.
    struct Phone: @unchecked Sendable {
        let bearer: String
        let keyId: String
        let key: PrivateKey
    }

    /// `count` phones, each a new account with a device key, on the server at `host:port`.
    static func enrolPhones(host: String, port: Int, origin: String, count: Int) -> Result<[Phone], SetupError> {
        var phones: [Phone] = []
        let client = HTTPClient(host: host, port: port)
        defer { client.close() }
        let runId = Base64URL.encode(SecureRandom.bytes(6))
        for i in 0..<count {
            switch enrol(client, name: "stepup-bench-\(runId)-\(i)", origin: origin) {
            case .success(let p): phones.append(p)
            case .failure(let e): return .failure(e)
            }
        }
        return .success(phones)
    }

    static func run(_ o: BenchTarget) -> Int32 {
        print("latchkey bench step-up: \(o.host):\(o.port), origin \(o.origin), concurrency \(o.concurrency), \(o.duration) s")
        let phones: [Phone]
        switch enrolPhones(host: o.host, port: o.port, origin: o.origin, count: o.concurrency) {
        case .success(let p): phones = p
        case .failure(let e): printError("setup failed: \(e.message)"); return ExitCode.failure
        }
        print("enrolled \(phones.count) accounts with a device key each")

        let result = load(host: o.host, port: o.port, phones: phones, duration: o.duration)
        let (ok, errors, elapsed) = (result.ok, result.errors, result.elapsed)
        print("step-up verifications: \(ok) in \(formatDecimal(elapsed, places: 1)) s = \(Int(Double(ok) / elapsed))/s (errors \(errors))")
        if errors > ok { printError("most requests failed: is the server rate-limiting (LATCHKEY_RATE_LIMIT=0 turns it off)?") }
        print("verify request   p50 \(percentile(result.verify, 0.50, places: 2))  p99 \(percentile(result.verify, 0.99, places: 2))")
        print("challenge+verify p50 \(percentile(result.round, 0.50, places: 2))  p99 \(percentile(result.round, 0.99, places: 2))")

        // The signature check alone, in process: SPKI import + ECDSA-SHA256 verify (what verify
        // costs besides HTTP, JSON and the two PostgreSQL round trips).
        let key = PrivateKey.generateEC(.p256)
        let spki = key.publicKey.spkiDER
        let message = SecureRandom.bytes(138)
        let sig = (try? key.sign(message, algorithm: .ecdsa(.sha256))) ?? []
        let n = countLoop(seconds: 1) {
            guard let k = try? PublicKey(spkiDER: spki) else { return false }
            return k.verify(signature: sig, message: message, algorithm: .ecdsa(.sha256))
        }
        print("in-process P-256 key import + verify, 1 thread: \(n)/s")
        return errors > 0 && ok == 0 ? ExitCode.failure : ExitCode.success
    }

    /// What one load measured: verified approvals, failures, seconds, and the latencies (ascending,
    /// seconds) of the verify request and of the whole round.
    struct LoadResult {
        var ok = 0
        var errors = 0
        var elapsed = 0.0
        var verify: [Double] = []
        var round: [Double] = []
        var rate: Double { elapsed > 0 ? Double(ok) / elapsed : 0 }
    }

    /// One thread per phone, each with its own keep-alive connection, looping challenge → sign →
    /// verify for `duration` seconds. An answered receipt is handed to `tap` when it asks for one.
    static func load(host: String, port: Int, phones: [Phone], duration: Double, tap: ReceiptTap? = nil) -> LoadResult {
        let action = #"{"type":"transfer","amount":"200.00","currency":"EUR","to":"DE89370400440532013000"}"#
        let verifyLatencies = Mutex<[Double]>([])
        let roundLatencies = Mutex<[Double]>([])
        let counts = Mutex<(ok: Int, errors: Int)>((0, 0))
        let deadline = monotonicNow() + duration
        let start = monotonicNow()
        let threads = phones.map { phone in
            spawnThread {
                let c = HTTPClient(host: host, port: port)
                defer { c.close() }
                let auth = [("Authorization", phone.bearer), ("Content-Type", "application/json")]
                let challengeBody = Array(#"{"keyId":"\#(phone.keyId)","action":\#(action)}"#.utf8)
                var mineVerify: [Double] = [], mineRound: [Double] = []
                var ok = 0, errors = 0
                while monotonicNow() < deadline {
                    let t0 = monotonicNow()
                    guard let r = try? c.send(method: "POST", path: "/v1/step-up/challenges", headers: auth, body: challengeBody),
                          r.status == 201, let json = try? JSONParser.parse(r.body), let id = json["challengeId"]?.stringValue,
                          let challenge = json["challenge"]?.stringValue.flatMap(Base64URL.decode),
                          let signature = try? phone.key.sign(challenge, algorithm: .ecdsa(.sha256)) else { errors += 1; continue }
                    let body = Array(#"{"challengeId":"\#(id)","signature":"\#(Base64URL.encode(signature))"}"#.utf8)
                    let t1 = monotonicNow()
                    let v = try? c.send(method: "POST", path: "/v1/step-up/verify", headers: auth, body: body)
                    let t2 = monotonicNow()
                    guard let v, v.status == 200 else { errors += 1; continue }
                    ok += 1; mineVerify.append(t2 - t1); mineRound.append(t2 - t0)
                    if let tap, tap.claim() {
                        if let receiptId = (try? JSONParser.parse(v.body))?["receiptId"]?.stringValue {
                            tap.hand(.init(id: receiptId, bearer: phone.bearer, answeredAt: t2))
                        } else {
                            tap.release()
                        }
                    }
                }
                verifyLatencies.withLock { $0 += mineVerify }
                roundLatencies.withLock { $0 += mineRound }
                counts.withLock { $0.ok += ok; $0.errors += errors }
            }
        }
        for t in threads { t.join() }
        let elapsed = monotonicNow() - start
        let (ok, errors) = counts.withLock { $0 }
        return LoadResult(ok: ok, errors: errors, elapsed: elapsed, verify: verifyLatencies.withLock { $0.sorted() },
                          round: roundLatencies.withLock { $0.sorted() })
    }

    struct SetupError: Error { let message: String }

    /// A new account (passkey sign-up through the real API) with one enrolled device key.
    static func enrol(_ c: HTTPClient, name: String, origin: String) -> Result<Phone, SetupError> {
        func post(_ path: String, _ body: [UInt8], bearer: String? = nil, headers: [(String, String)] = []) -> (Int, JSONValue?) {
            guard let r = c.postJSON(path, body, authorization: bearer, headers: headers) else { return (0, nil) }
            return (r.status, try? JSONParser.parse(r.body))
        }
        let token: String
        let account: BenchAccount
        switch BenchAccount.signUp(c, username: name, displayName: name, origin: origin) {
        case .success(let a) where a.accessToken != nil:
            token = a.accessToken!
            account = a
        case .success:
            return .failure(SetupError(message: "registration verify: HTTP 201; is \(origin) allowlisted (LATCHKEY_ORIGINS)?"))
        case .failure(.options(let r)):
            return .failure(SetupError(message: "registration options: HTTP \(r?.status ?? 0); is the server running?"))
        case .failure(.verify(let r)):
            return .failure(SetupError(message: "registration verify: HTTP \(r?.status ?? 0); is \(origin) allowlisted (LATCHKEY_ORIGINS)?"))
        }
        let bearer = "Bearer \(token)"
        // SPEC "Trust chain": the enrolment is gated by a user-verified passkey step-up for exactly it.
        let deviceId = "bench-\(name)"
        let action = JSONValue.object([("type", "latchkey.device-key.enrol"), ("deviceId", .string(deviceId))])
        let (s1, approvalChallenge) = post("/v1/step-up/challenges", JSONValue.object([("method", "passkey"), ("action", action)]).serialized(),
                                           bearer: bearer)
        guard s1 == 201, let approvalId = approvalChallenge?["challengeId"], let publicKey = approvalChallenge?["publicKey"],
              let approvalBytes = publicKey["challenge"]?.stringValue.flatMap(Base64URL.decode) else {
            return .failure(SetupError(message: "enrolment step-up challenge: HTTP \(s1)"))
        }
        let assertion = account.authenticator.assertion(challenge: approvalBytes, rpId: account.rpId, origin: origin).json()
        let (s2, approval) = post("/v1/step-up/verify", JSONValue.object([("challengeId", approvalId), ("credential", assertion)]).serialized(),
                                  bearer: bearer)
        guard s2 == 200, let stepUpToken = approval?["access_token"]?.stringValue else {
            return .failure(SetupError(message: "enrolment step-up: HTTP \(s2)"))
        }
        let (s3, enrolment) = post("/v1/device-keys/challenges", [], bearer: bearer)
        guard s3 == 201, let id = enrolment?["challengeId"]?.stringValue,
              let bytes = enrolment?["challenge"]?.stringValue.flatMap(Base64URL.decode) else {
            return .failure(SetupError(message: "device-key challenge: HTTP \(s3)"))
        }
        let key = PrivateKey.generateEC(.p256)
        guard let signature = try? key.sign(bytes, algorithm: .ecdsa(.sha256)), let point = key.publicKey.x963Point else {
            return .failure(SetupError(message: "signing failed"))
        }
        let body = JSONValue.object([("deviceId", .string(deviceId)), ("publicKey", .string(Base64URL.encode(point))),
                                     ("platform", "ios"), ("challengeId", .string(id)), ("signature", .string(Base64URL.encode(signature)))])
        let (s4, device) = post("/v1/device-keys", body.serialized(), bearer: bearer, headers: [("Latchkey-Step-Up", stepUpToken)])
        guard s4 == 201, let keyId = device?["id"]?.stringValue else { return .failure(SetupError(message: "device-key enrolment: HTTP \(s4)")) }
        return .success(Phone(bearer: bearer, keyId: keyId, key: key))
    }
}
