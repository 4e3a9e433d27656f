import Crypto
import EventLoop
import JSON
import LatchkeyServer
import Synchronization
import WebAuthn
import WebAuthnTesting
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey bench …`: throughput measured against a baseline taken in the same run, so results
/// are ratios that mean the same on any machine.
enum BenchCommand: Command {
    static let name = "bench"
    static let summary = "measure verification and login throughput against baselines in the same run"
    static let help = """
        usage: latchkey bench verify [--seconds S] [--instructions]
               latchkey bench login --url U [--concurrency C] [--duration S] [--pid P] [--origin O] [--database-url D] [--no-dpop] [--rounds N]
                                    [--webhook URL|local --admin-key K]   (one endpoint on passkey.* and session.*; reports the outbox drain;
                                    `local`: a verifying receiver inside the bench, for a server in LATCHKEY_DEV=1)
               latchkey bench login --accounts N --database-url D [--concurrency 32] [--duration 10] [--rounds 2] [--instructions] [--reuse] [--server BIN]
                                    [--checkpoint-once]
               \(StepUpBenchmark.usage)
               \(OAuthBenchmark.usage)
               \(PortabilityBenchmark.usage)
               latchkey bench failover --urls U1,U2 --origin O [--concurrency C] [--duration S]   (scripts/failover-test.sh's load)

        verify   single-thread assertion verifications per second for ES256, EdDSA and RS256 (credential
                 JSON parsed, COSE key parsed and imported on every call, as a server must), beside the
                 raw OpenSSL rate for key import + EVP_DigestVerify on the same keys and messages; the
                 ES256 rate on two threads and in two processes; registrations per second (none, packed).
        login --accounts N
                 seeds N accounts with passkeys (COPY) in a database of D's cluster and a handful in another
                 ("empty"), both read into the buffer pool first (pg_prewarm), serves each in turn from this
                 executable, small first in odd rounds and large first in even ones, and measures both in the
                 same run: logins/s and the ratio (of the medians, round by round, and by AB/BA pair), p50/p95/p99, server and
                 PostgreSQL CPU µs per login (/proc), WAL bytes, full-page images and commits per login
                 (pg_stat_wal, pg_stat_database), the database sizes;
                 --instructions: the server's instructions per login under callgrind; --reuse: keep a database
                 already seeded with N accounts (what earlier runs' logins wrote is removed); --server BIN: run that
                 latchkey binary as the server (an older build). Every phase starts with a CHECKPOINT, the worst
                 case for a large database (each page a login dirties is a first touch, so a full-page image);
                 --checkpoint-once: one CHECKPOINT before the first round only, so later rounds see what the
                 cluster's own checkpoint cycle sees (pages dirtied earlier in the cycle are not imaged again).
        \(StepUpBenchmark.help)
        \(OAuthBenchmark.help)
        \(PortabilityBenchmark.help)
        """

    static func run(_ arguments: [String]) -> Int32 {
        guard let sub = arguments.first else { printError(help); return ExitCode.usage }
        do throws(UsageError) {
            let args = try ParsedArguments(Array(arguments.dropFirst()),
                                           valued: ["seconds", "worker", "url", "concurrency", "duration", "pid", "origin", "database-url", "webhook",
                                                   "admin-key", "accounts", "rounds", "count", "side", "server", "urls", "prefix", "log-interval"],
                                           flags: ["help", "instructions", "reuse", "checkpoint-once", "log-compare", "keep", "no-dpop"])
            if args.has("help") { print(help); return ExitCode.success }
            switch sub {
            case "verify":
                let seconds = Double(args.value("seconds") ?? "2") ?? 2
                if let worker = args.value("worker") {
                    let fixture = VerifyFixture(worker == "eddsa" ? .edDSA : worker == "rs256" ? .rs256 : .es256)
                    if let c = args.value("count"), let count = Int(c) {
                        // A fixed number of calls of one side, for instruction counts under callgrind
                        // (run with --count 0 too, to subtract the fixture's own cost).
                        let body: () -> Bool = switch args.value("side") ?? "latchkey" {
                        case "openssl": { fixture.verifyWithOpenSSL() }
                        case "warm": { fixture.verifyWarm() }
                        default: { fixture.verifyWithLatchkey() }
                        }
                        for _ in 0..<count { precondition(body(), "benchmark verification failed") }
                        print(count)
                        return ExitCode.success
                    }
                    // Child of the two-process measurement: print the count and nothing else.
                    print(countLoop(seconds: seconds) { fixture.verifyWithLatchkey() })
                    return ExitCode.success
                }
                if args.has("instructions") { return VerifyBenchmark.instructions() }
                return VerifyBenchmark.run(seconds: seconds)
            case "login":
                if let accounts = args.value("accounts") { return ScaleBenchmark.run(try ScaleBenchmark.parse(args, accounts: accounts)) }
                return LoginBenchmark.run(try LoginBenchmark.parse(args))
            case "step-up": return StepUpBenchmark.run(try StepUpBenchmark.parse(args))
            case "oauth": return OAuthBenchmark.run(try OAuthBenchmark.parse(args))
            case "failover": return try FailoverLoad.run(args)
            case "portability": return PortabilityBenchmark.run(try PortabilityBenchmark.parse(args))
            case "-h", "--help": print(help); return ExitCode.success
            default: throw UsageError(message: "unknown benchmark '\(sub)'")
            }
        } catch {
            printError("latchkey bench: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
    }
}

/// `x` rounded to `places` decimals.
func rounded(_ x: Double, places: Int) -> Double {
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    return (x * scale).rounded() / scale
}

/// `x` rounded to `places` decimals and written with that many (1.5 → "1.50" for 2 places).
func formatDecimal(_ x: Double, places: Int) -> String {
    var s = "\(rounded(x, places: places))"
    if let dot = s.firstIndex(of: ".") {
        let digits = s.distance(from: dot, to: s.endIndex) - 1
        if digits < places { s += String(repeating: "0", count: places - digits) }
    }
    return s
}

/// The `q` quantile of ascending latencies in seconds, as milliseconds rounded to `places`
/// decimals ("20.9 ms"); "-" when there are none.
func percentile(_ sorted: [Double], _ q: Double, places: Int) -> String {
    guard !sorted.isEmpty else { return "-" }
    return "\(rounded(sorted[min(sorted.count - 1, Int(Double(sorted.count) * q))] * 1000, places: places)) ms"
}

/// Runs `body` repeatedly for about `seconds`; returns how many calls completed.
func countLoop(seconds: Double, _ body: () -> Bool) -> Int {
    let end = monotonicNow() + seconds
    var count = 0
    while true {
        for _ in 0..<64 { precondition(body(), "benchmark verification failed"); count += 1 }
        if monotonicNow() >= end { return count }
    }
}

/// One credential and one assertion, verified over and over.
struct VerifyFixture: @unchecked Sendable {
    let algorithm: COSEAlgorithm
    let coseKey: [UInt8]
    let responseJSON: [UInt8]
    let challenge: [UInt8]
    let policy: VerificationPolicy
    // What the baseline needs: the signed message and the signature, already decoded.
    let clientDataJSON: [UInt8]
    let authenticatorData: [UInt8]
    let signature: [UInt8]
    /// The imported key a warm server holds in its CredentialKeyCache.
    let cachedKey: COSEKey

    static let rpId = "bench.example", origin = "https://bench.example"
    /// The bench's RSA-2048 key (a test key, nothing else uses it).
    static let rsaKeyPEM = """
        -----BEGIN PRIVATE KEY-----
        MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCfbgAuPROpqTTL
        TKg5JLfaChR8T3WJmbhbSjCx4YEN+EFvIklw1omwoBjEnUqKENqdLU29+uhj+mLR
        f+sGKVSzs57wRkBkqSX4F0f2jOxLphXDbY25L/NzQrYfR6Yuqd8SdbGVQwhHM4f5
        Xrr1dH27EjgbuRNA7Yt5tkTYuOjHv8+EDiJG1NymJmv7WUJZ5+3et62g6JIF0KWa
        ACGiDuJ5Yjgwl8iVqR+dMmQg4wPCpJI8vTFcj6Gwi2mE8ccACZvsciwoATAGfeWS
        FGO/VsA0+IyBx34jfk6de8rcb6xt1NtYQxymWEAHvsjYl4IjzJWiEEfx7FY1QIOj
        P6GUz6YHAgMBAAECggEATLaC2rzjzbLP5vTbSye6WW2ZPtmDDnNLjI2t0aHW1dB7
        N8zxNpzcgwL99/lRaQ7ECnZGnp/xG05bJ0BcZ8oSaieHVkkPagAj93TIWT+k4Z+o
        gDEiTRXgGDlk5bc1pOVzI3BDQzWOcag/iMPGxR3I8+9H1TsgIxFKGAYWqYuL4rTL
        09OaaI4KEetOVTPi46qGxGFc2GUAQePEcJx0hDeQV7pKbiAFLqKcvL3EKN1CpxCm
        cvAmQGKuPDmrFDZQPQJjFSCRWSarg86Nf11SMclJHSy3p0NiUte7LZDtmvWB5xmy
        vQ+SMcjHImDfDVIs1YycCMuhV/I5yKdONxR0YfA2/QKBgQDQVY6H63/OntIlsBLj
        uW1d0OxymkZlnc8qXEjtNZRx6IhntOKukpxaVrN58bVV8t+kFWAfRwSzq8HQJ1uU
        td1v52OjM3D1C4of+TzjVP7XXS8ERdvnHqENFuQ+jIO1CjpkEg4qnkMTT1qYjDoZ
        XB4usU1Kn8LzNpSwZTmUYGUNgwKBgQDD6AiyAe6izA1IrC3EWrE341n3ETiB02M9
        qYp/VgsUTBoIAfLYZ38o3YIszOCJYQckLtoI83WdXsodvXuIcLyNLlgcBVsD035i
        xajB1Y0UbeVtZVOIhKvIvQCtDrRBz5GzHmSnROhiPuNIM1GXl1amHsxMw5Q4DAly
        uSABY8XCLQKBgGQeabPKKg6a5rTz6/ACYZuvVqIwn9ofv7pExUsx75faPwtPs4xf
        qsIDXpcg4Jtgb7eECkCduZW62hZ1g55w0+z+TzTT+NnaZNO+zFMXuqy2/GxaQjbM
        0mre8GtazcTIGI2U27gBfIygGxKqeRVM3rhjvpg5NM/7D/PBga1bsdSPAoGADE3C
        XgupBShznSDTLwXTI4Nv3wiB2AWCshi3zg+FWpz89YvJyLWXUuW2i0HCyF4DqM4Y
        e39u35dYck24OHV8IhHLDtd3Q+JAicuIMcRLvAC67Af1GxnaAB1+sV+/CnMS34EF
        KUw2nBT/CUXP1gl3M6+zfQ67fFmlLkNaMzwk63ECgYEAsiRBWPYH9uWpHH3KvMsS
        1FCA//xymSgV0+/A8wmHNqYQma/BijUIz8+NtnknI/MHH6zB53P8btPmbZalp5Ux
        OjIJJDg+Ct5bbFJlhG4sYvMmHcqCvV9CM94kv42sJH9UhuXuJJs+/EL3cQLPzLFL
        ODpjcdL5fno9JAD8ZzbjoVg=
        -----END PRIVATE KEY-----
        """

    /// The bench's Ed25519 key (a test key, nothing else uses it).
    static let ed25519KeyPEM = """
        -----BEGIN PRIVATE KEY-----
        MC4CAQAwBQYDK2VwBCIEIMo/9ptdPBNEu5aRFDUGTP3ZUggH6yGWxrSGkn+CdGnA
        -----END PRIVATE KEY-----
        """

    init(_ algorithm: COSEAlgorithm) {
        self.algorithm = algorithm
        // RSA and EdDSA with fixed keys, a fixed credential id and challenge: `--instructions` runs
        // each side in its own process, and the sides must verify the same bytes. Generating an RSA
        // key costs a random amount of work (the prime search), and Ed25519 verification takes a
        // data-dependent number of steps (it need not be constant-time on public data), so fresh
        // keys per process moved the EdDSA ratio by ±2 %. Ed25519 and RSA PKCS#1 v1.5 signatures are
        // deterministic; ECDSA's are not (its cost varies far less).
        let fixedKey: String? = algorithm == .rs256 ? Self.rsaKeyPEM : algorithm == .edDSA ? Self.ed25519KeyPEM : nil
        let authenticator = fixedKey.map {
            SoftAuthenticator(algorithm: algorithm, privateKey: try! PrivateKey(pkcs8PEM: $0), credentialId: Array(repeating: 0x42, count: 32),
                              userHandle: nil)
        } ?? SoftAuthenticator(algorithm: algorithm)
        challenge = Array(repeating: 0x5A, count: 32)
        coseKey = authenticator.publicKeyCOSE
        let json = authenticator.assertion(challenge: challenge, rpId: Self.rpId, origin: Self.origin).json()
        responseJSON = json.serialized()
        clientDataJSON = Base64URL.decode(json["response"]!["clientDataJSON"]!.stringValue!)!
        authenticatorData = Base64URL.decode(json["response"]!["authenticatorData"]!.stringValue!)!
        signature = Base64URL.decode(json["response"]!["signature"]!.stringValue!)!
        policy = VerificationPolicy(rpId: Self.rpId, origins: OriginPolicy([Self.origin]))
        cachedKey = try! COSEKey(bytes: coseKey)
    }

    /// What the server does per login: parse the credential JSON, parse and import the stored COSE
    /// key, run every §7.2 check and the signature verification.
    func verifyWithLatchkey() -> Bool {
        do {
            let parsed = try ParsedAuthentication(bytes: responseJSON)
            let key = try COSEKey(bytes: coseKey)
            _ = try AuthenticationVerifier.verify(parsed, expectedChallenge: challenge,
                                                  stored: StoredCredential(publicKey: key, signCount: 0), policy: policy)
            return true
        } catch {
            return false
        }
    }

    /// A server with the credential's key in its cache (`CredentialKeyCache`): the credential JSON
    /// parsed and every check run, the COSE key neither parsed nor imported.
    func verifyWarm() -> Bool {
        do {
            let parsed = try ParsedAuthentication(bytes: responseJSON)
            _ = try AuthenticationVerifier.verify(parsed, expectedChallenge: challenge,
                                                  stored: StoredCredential(publicKey: cachedKey, signCount: 0), policy: policy)
            return true
        } catch {
            return false
        }
    }

    /// The same cryptographic work in plain C: components picked from the COSE bytes at known
    /// offsets, key imported with EVP_PKEY_fromdata, message hashed and verified.
    func verifyWithOpenSSL() -> Bool {
        let message = authenticatorData + Digest.sha256(clientDataJSON)
        let key: OpenSSLBaseline.Key
        let hash: HashFunction?
        switch algorithm {
        case .edDSA:
            key = .ed25519(Array(coseKey[(coseKey.count - 32)...]))
            hash = nil
        case .rs256:
            // {1:3, 3:-257, -1: n (256 bytes), -2: e (43 01 00 01)}
            let n = Array(coseKey[(coseKey.count - 5 - 256)..<(coseKey.count - 5)])
            key = .rsa(modulus: n, exponent: Array(coseKey[(coseKey.count - 3)...]))
            hash = .sha256
        default:
            // {1:2, 3:-7, -1:1, -2: x (32), -3: y (32)}
            key = .ec(.p256, point: [0x04] + Array(coseKey[(coseKey.count - 67)..<(coseKey.count - 35)]) + Array(coseKey[(coseKey.count - 32)...]))
            hash = .sha256
        }
        return OpenSSLBaseline.verify(key: key, hash: hash, signature: signature, message: message)
    }
}

enum VerifyBenchmark {
    static func run(seconds: Double) -> Int32 {
        print("latchkey bench verify: \(seconds) s per measurement, alternating Latchkey and OpenSSL in slices")
        for (label, alg) in [("es256", COSEAlgorithm.es256), ("eddsa", .edDSA), ("rs256", .rs256)] {
            let fixture = VerifyFixture(alg)
            guard fixture.verifyWithLatchkey(), fixture.verifyWithOpenSSL() else {
                printError("\(label): fixture does not verify"); return ExitCode.failure
            }
            // Alternate slices so that frequency changes and noise hit both sides alike.
            var ours = 0, theirs = 0, warm = 0
            let slices = 10
            for _ in 0..<slices {
                ours += countLoop(seconds: seconds / Double(slices * 3)) { fixture.verifyWithLatchkey() }
                theirs += countLoop(seconds: seconds / Double(slices * 3)) { fixture.verifyWithOpenSSL() }
                warm += countLoop(seconds: seconds / Double(slices * 3)) { fixture.verifyWarm() }
            }
            let oursRate = Double(ours) / (seconds / 3), theirsRate = Double(theirs) / (seconds / 3), warmRate = Double(warm) / (seconds / 3)
            print("\(label.padding(6)) latchkey \(Int(oursRate))/s  openssl \(Int(theirsRate))/s  ratio=\(formatDecimal(oursRate / theirsRate, places: 2)) (cold: key imported per call)  "
                  + "warm \(Int(warmRate))/s ratio \(formatDecimal(warmRate / theirsRate, places: 2)) (key from the server's CredentialKeyCache)")
        }

        // Two threads in one process against two processes (OpenSSL 3.0 takes shared locks).
        let fixture = VerifyFixture(.es256)
        let single = Double(countLoop(seconds: seconds / 2) { fixture.verifyWithLatchkey() }) / (seconds / 2)
        let total = Atomic<Int>(0)
        let threads = (0..<2).map { _ in
            spawnThread { total.add(countLoop(seconds: seconds) { fixture.verifyWithLatchkey() }, ordering: .relaxed) }
        }
        for t in threads { t.join() }
        let twoThreads = Double(total.load(ordering: .relaxed)) / seconds
        let twoProcesses = runWorkerProcesses(count: 2, seconds: seconds).map { Double($0) / seconds }.reduce(0, +)
        print("es256  1 thread \(Int(single))/s  2 threads \(Int(twoThreads))/s (x\(formatDecimal(twoThreads / single, places: 2)))  2 processes \(Int(twoProcesses))/s (x\(formatDecimal(twoProcesses / single, places: 2)))")

        // Registrations: none and packed self attestation, full §7.1 from the credential JSON.
        for (label, format) in [("none", RegistrationFormat.none), ("packed", .packedSelf)] {
            let auth = SoftAuthenticator(algorithm: .es256)
            let challenge = SecureRandom.bytes(32)
            var builder = auth.registration(challenge: challenge, rpId: VerifyFixture.rpId, origin: VerifyFixture.origin)
            builder.format = format
            let body = builder.bytes()
            let policy = VerificationPolicy(rpId: VerifyFixture.rpId, origins: OriginPolicy([VerifyFixture.origin]))
            let n = countLoop(seconds: seconds / 2) {
                (try? RegistrationVerifier.verify(try ParsedRegistration(bytes: body), expectedChallenge: challenge, policy: policy)) != nil
            }
            print("register-\(label.padding(6)) latchkey \(Int(Double(n) / (seconds / 2)))/s")
        }
        return ExitCode.success
    }

    /// `bench verify --instructions`: instructions per verification under callgrind (which does not
    /// drift with the machine's load), each side run `calls` times in a child and once with no
    /// calls, whose count (the fixture, key generation) is subtracted.
    static func instructions(calls: Int = 200) -> Int32 {
        guard let valgrind = findValgrind() else { printError("--instructions needs valgrind"); return ExitCode.failure }
        print("latchkey bench verify --instructions: instructions per verification under callgrind (\(calls) calls, minus the fixture's own)")
        func count(_ alg: String, _ side: String, _ n: Int) -> Double? {
            guard let directory = privateTemporaryDirectory("latchkey-verify-callgrind") else { return nil }
            let out = "\(directory)/callgrind.out"
            defer { unlink(out); rmdir(directory) }
            _ = runProcess([valgrind, "--tool=callgrind", "--callgrind-out-file=\(out)", executablePath(), "bench", "verify",
                            "--worker", alg, "--count", "\(n)", "--side", side])
            guard let bytes = readFile(out, limit: 1 << 28) else { return nil }
            for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("totals:") {
                return Double(line.split(separator: " ").dropFirst().first ?? "")
            }
            return nil
        }
        for alg in ["es256", "eddsa", "rs256"] {
            var per: [String: Double] = [:]
            for side in ["latchkey", "openssl", "warm"] {
                guard let zero = count(alg, side, 0), let full = count(alg, side, calls) else {
                    printError("callgrind run failed"); return ExitCode.failure
                }
                per[side] = (full - zero) / Double(calls)
            }
            let l = per["latchkey"]!, o = per["openssl"]!, w = per["warm"]!
            print("\(alg.padding(6)) latchkey \(Int(l))  openssl \(Int(o))  ratio=\(formatDecimal(o / l, places: 2)) (cold)  "
                  + "warm \(Int(w)) ratio \(formatDecimal(o / w, places: 2))  (instructions per verification; ratio = openssl / latchkey)")
        }
        return ExitCode.success
    }

    /// Starts `count` copies of this executable as `bench verify --worker es256` at once and
    /// returns what each counted.
    static func runWorkerProcesses(count: Int, seconds: Double) -> [Int] {
        let argv = ["/proc/self/exe", "bench", "verify", "--worker", "es256", "--seconds", "\(seconds)"]
        // All started before any is read, so they run at the same time.
        let children = (0..<count).compactMap { _ in spawn(argv, capture: .standardOutput) }
        return children.map { child in
            let text = String(decoding: child.finish() ?? [], as: UTF8.self).filter { $0.isNumber }
            return Int(text) ?? 0
        }
    }
}

/// A plain POSIX thread running `body` (benchmarks want threads, not a task pool), joinable.
@discardableResult
func spawnThread(_ body: @escaping @Sendable () -> Void) -> StartedThread {
    guard let thread = startThread(body) else { preconditionFailure("pthread_create failed") }
    return thread
}
