import Crypto
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
        usage: latchkey bench verify [--seconds S]
               latchkey bench login --url U [--concurrency C] [--duration S] [--pid P] [--origin O] [--database-url D]
                                    [--webhook URL|local --admin-key K]   (one endpoint on passkey.* and session.*; reports the outbox drain;
                                    `local`: a verifying receiver inside the bench, for a server in LATCHKEY_DEV=1)
               \(StepUpBenchmark.usage)
               latchkey bench failover --urls U1,U2 --origin O [--concurrency C] [--duration S]   (scripts/failover-test.sh's load)

        verify   single-thread assertion verifications per second for ES256, EdDSA and RS256 (credential
                 JSON parsed, COSE key parsed and imported on every call, as a server must), beside the
                 raw OpenSSL rate for key import + EVP_DigestVerify on the same keys and messages; the
                 ES256 rate on two threads and in two processes; registrations per second (none, packed).
        \(StepUpBenchmark.help)
        """

    static func run(_ arguments: [String]) -> Int32 {
        guard let sub = arguments.first else { printError(help); return ExitCode.usage }
        do throws(UsageError) {
            let args = try ParsedArguments(Array(arguments.dropFirst()),
                                           valued: ["seconds", "worker", "url", "concurrency", "duration", "pid", "origin", "database-url", "webhook",
                                                   "admin-key", "urls", "prefix"],
                                           flags: ["help"])
            if args.has("help") { print(help); return ExitCode.success }
            switch sub {
            case "verify":
                let seconds = Double(args.value("seconds") ?? "2") ?? 2
                if let worker = args.value("worker") {
                    // Child of the two-process measurement: print the count and nothing else.
                    let fixture = VerifyFixture(worker == "eddsa" ? .edDSA : worker == "rs256" ? .rs256 : .es256)
                    print(countLoop(seconds: seconds) { fixture.verifyWithLatchkey() })
                    return ExitCode.success
                }
                return VerifyBenchmark.run(seconds: seconds)
            case "login":
                return LoginBenchmark.run(try LoginBenchmark.parse(args))
            case "step-up": return StepUpBenchmark.run(try StepUpBenchmark.parse(args))
            case "failover": return try FailoverLoad.run(args)
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

    static let rpId = "bench.example", origin = "https://bench.example"

    init(_ algorithm: COSEAlgorithm) {
        self.algorithm = algorithm
        let authenticator = SoftAuthenticator(algorithm: algorithm)
        challenge = SecureRandom.bytes(32)
        coseKey = authenticator.publicKeyCOSE
        let json = authenticator.assertion(challenge: challenge, rpId: Self.rpId, origin: Self.origin).json()
        responseJSON = json.serialized()
        clientDataJSON = Base64URL.decode(json["response"]!["clientDataJSON"]!.stringValue!)!
        authenticatorData = Base64URL.decode(json["response"]!["authenticatorData"]!.stringValue!)!
        signature = Base64URL.decode(json["response"]!["signature"]!.stringValue!)!
        policy = VerificationPolicy(rpId: Self.rpId, origins: OriginPolicy([Self.origin]))
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
            var ours = 0, theirs = 0
            let slices = 10
            for _ in 0..<slices {
                ours += countLoop(seconds: seconds / Double(slices * 2)) { fixture.verifyWithLatchkey() }
                theirs += countLoop(seconds: seconds / Double(slices * 2)) { fixture.verifyWithOpenSSL() }
            }
            let oursRate = Double(ours) / (seconds / 2), theirsRate = Double(theirs) / (seconds / 2)
            print("\(label.padding(6)) latchkey \(Int(oursRate))/s  openssl \(Int(theirsRate))/s  ratio=\(formatDecimal(oursRate / theirsRate, places: 2))")
        }

        // Two threads in one process against two processes (OpenSSL 3.0 takes shared locks).
        let fixture = VerifyFixture(.es256)
        let single = Double(countLoop(seconds: seconds / 2) { fixture.verifyWithLatchkey() }) / (seconds / 2)
        let total = Atomic<Int>(0)
        let threads = (0..<2).map { _ in
            spawnThread { total.add(countLoop(seconds: seconds) { fixture.verifyWithLatchkey() }, ordering: .relaxed) }
        }
        for t in threads { pthread_join(t, nil) }
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

/// A plain POSIX thread running `body` (benchmarks want threads, not a task pool).
func spawnThread(_ body: @escaping @Sendable () -> Void) -> pthread_t {
    final class Box: @unchecked Sendable { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    pthread_create(&thread, nil, { raw in
        let box = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue() as! Box
        box.body()
        return nil
    }, box)
    return thread
}
