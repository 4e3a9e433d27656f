import Crypto
import DeviceKeys
import JSON
import WebAuthn
import WellKnown
#if canImport(Glibc)
import Glibc
#endif

/// `latchkey inspect device-key`: explains why a device key's attestation proves (or does not prove)
/// that the key lives in hardware and belongs to a declared app (SPEC "Trust chain", "Command line").
enum InspectDeviceKeyCommand {
    static let help = """
        usage: latchkey inspect device-key --challenge C | --client-data-hash H [--app A …] [options] < enrolment.json

        Reads the device-key enrolment fields {"publicKey","platform","attestation"|"appAttest"} on stdin,
        verifies the Android Key Attestation chain or the Apple App Attest object, and prints the decoded
        attestation (format, security level, app, key purposes, user-auth settings, chain) and every check
        as JSON. Exit status: 0 proven hardware-bound for a declared app, 1 not, 64 bad usage.

        options:
          --challenge C                 the enrolment challenge bytes, base64url (Android; App Attest hashes it)
          --client-data-hash H          App Attest: the bytes the app passed as clientDataHash, base64url, of any
                                        length (instead of SHA-256(C))
          --app A                       a declared app; repeatable: android:<package>:<AB:CD:… SHA-256 of the
                                        signing certificate> or ios:<teamId>.<bundleId>
          --at TIME                     verify as if now were TIME (ISO 8601); default now
          --require-verified-boot       Android: also require verifiedBootState Verified and a locked bootloader
          --trust-anchor FILE           PEM file of attestation roots; repeatable (default: the shipped roots)
          --status-list FILE            a JSON status list in Google's attestation status shape
          --app-attest-development      App Attest: accept the development environment ("appattestdevelop")
          -h, --help                    show this help
        """

    static func run(_ arguments: [String]) -> Int32 {
        let options: Options
        do throws(UsageError) { options = try Options(arguments) } catch {
            printError("latchkey inspect device-key: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
        if options.help { print(help); return ExitCode.success }
        // An enrolment body is a few KiB (five certificates); 1 MiB is far past any real one.
        guard let input = readAllStandardInput(limit: 1 << 20) else {
            print(report(platform: nil, format: .none, key: nil, trace: AttestationTrace(),
                         error: DeviceKeyError(.invalidRequest, "input is larger than 1 MiB")).text)
            return ExitCode.failure
        }
        let outcome = inspect(input, options)
        if case .usage(let message) = outcome {
            printError("latchkey inspect device-key: \(message)\n\n\(help)")
            return ExitCode.usage
        }
        guard case .report(let json, let attested) = outcome else { return ExitCode.failure }
        print(json.text)
        return attested ? ExitCode.success : ExitCode.failure
    }

    enum Outcome { case report(JSONValue, attested: Bool), usage(String) }

    static func inspect(_ input: [UInt8], _ options: Options) -> Outcome {
        let trace = AttestationTrace()
        var platform: String? = nil
        var format = AttestationFormatName.none
        func refuse(_ e: DeviceKeyError) -> Outcome {
            .report(report(platform: platform, format: format, key: nil, trace: trace, error: e), attested: false)
        }
        let body: JSONValue
        do { body = try JSONParser.parse(input) } catch {
            trace.record("parse", false, "input is not JSON: \(error.reason)")
            return refuse(DeviceKeyError(.invalidRequest, "input is not JSON"))
        }
        guard body.objectValue != nil else {
            trace.record("parse", false, "input is not a JSON object")
            return refuse(DeviceKeyError(.invalidRequest, "input is not a JSON object"))
        }
        platform = body["platform"]?.stringValue
        var policy = DeviceKeyAttestationPolicy(trustAnchors: options.trustAnchors ?? DeviceKeyAttestationPolicy.shippedRoots, now: options.at)
        policy.statusList = options.statusList
        policy.androidApps = options.androidApps
        policy.iosApps = options.iosApps
        policy.requireVerifiedBoot = options.requireVerifiedBoot
        policy.appAttestDevelopment = options.appAttestDevelopment

        do throws(DeviceKeyError) {
            switch platform {
            case "android":
                format = .androidKey
                guard body["appAttest"] == nil else { throw DeviceKeyError(.invalidRequest, "an android enrolment carries \"attestation\", not \"appAttest\"") }
                guard let challenge = options.challenge else { return .usage("--challenge is required for an Android attestation") }
                guard let items = body["attestation"]?.arrayValue, !items.isEmpty else {
                    throw DeviceKeyError(.invalidRequest, "\"attestation\" must be a non-empty array of base64url DER certificates")
                }
                var chain: [Certificate] = []
                for (i, item) in items.enumerated() {
                    guard let der = item.stringValue.flatMap(Base64URL.decode) else {
                        throw DeviceKeyError(.invalidRequest, "attestation[\(i)] is not base64url")
                    }
                    do { chain.append(try Certificate(der: der)) } catch {
                        throw DeviceKeyError(.attestationInvalid, "attestation[\(i)] is not a DER X.509 certificate")
                    }
                }
                trace.record("parse", true, "\(chain.count) certificates")
                let publicKey: DevicePublicKey
                do { publicKey = try parsePublicKey(body, trace: trace) } catch {
                    // Not a device key (RSA, ML-DSA, …): still show what the leaf says about it.
                    if let kd = try? AndroidKeyDescription(certificate: chain[0]) { trace.decoded.append((key: "keyDescription", value: kd.json)) }
                    throw error
                }
                let key = try AndroidKeyAttestationVerifier.verify(chain: chain, publicKey: publicKey, challenge: challenge,
                                                                   policy: policy, trace: trace)
                return .report(report(platform: platform, format: format, key: key, trace: trace, error: nil), attested: true)
            case "ios":
                format = .appleAppAttest
                guard body["attestation"] == nil else { throw DeviceKeyError(.invalidRequest, "an ios enrolment carries \"appAttest\", not \"attestation\"") }
                guard let clientDataHash = options.clientDataHash ?? options.challenge.map(Digest.sha256) else {
                    return .usage("--challenge or --client-data-hash is required for an App Attest attestation")
                }
                guard let appAttest = body["appAttest"], appAttest.objectValue != nil,
                      let keyId = appAttest["keyId"]?.stringValue.flatMap(Base64URL.decode),
                      let object = appAttest["attestationObject"]?.stringValue.flatMap(Base64URL.decode)
                else { throw DeviceKeyError(.invalidRequest, "\"appAttest\" must be {\"keyId\",\"attestationObject\"} in base64url") }
                let publicKey = body["publicKey"] == nil ? nil : try parsePublicKey(body, trace: trace)
                trace.record("parse", true)
                let key = try AppAttestVerifier.verifyAttestation(keyId: keyId, attestationObject: object, clientDataHash: clientDataHash,
                                                                  policy: policy, trace: trace)
                // The enrolment's publicKey, when sent, is the key App Attest certified.
                if let publicKey {
                    let same = publicKey.spkiDER == key.publicKey.spkiDER
                    trace.record("publicKey", same, same ? nil : "publicKey is not the attested key")
                    guard same else { throw DeviceKeyError(.attestationInvalid, "apple-appattest: publicKey is not the attested key") }
                }
                return .report(report(platform: platform, format: format, key: key, trace: trace, error: nil), attested: true)
            default:
                throw DeviceKeyError(.invalidRequest, "\"platform\" must be \"android\" or \"ios\"")
            }
        } catch {
            if !trace.checks.contains(where: { !$0.ok }) { trace.record("parse", false, error.reason) }
            return refuse(error)
        }
    }

    static func parsePublicKey(_ body: JSONValue, trace: AttestationTrace) throws(DeviceKeyError) -> DevicePublicKey {
        guard let bytes = body["publicKey"]?.stringValue.flatMap(Base64URL.decode) else {
            throw DeviceKeyError(.invalidRequest, "\"publicKey\" must be base64url")
        }
        do { return try DevicePublicKey(bytes: bytes) } catch {
            trace.record("publicKey.parse", false, error.reason)
            throw error
        }
    }

    static func report(platform: String?, format: AttestationFormatName, key: AttestedDeviceKey?, trace: AttestationTrace,
                       error: DeviceKeyError?) -> JSONValue {
        var m: [(key: String, value: JSONValue)] = [
            ("platform", platform.map(JSONValue.string) ?? .null),
            ("format", .string(key?.format.rawValue ?? format.rawValue)),
            ("securityLevel", .string(key?.securityLevel.rawValue ?? KeySecurityLevel.unknown.rawValue)),
            ("app", key?.app.map(JSONValue.string) ?? .null),
            ("attested", .bool(key != nil)),
        ]
        if let key {
            var decoded = key.decoded.objectValue ?? [("value", key.decoded)]
            if let auth = key.userAuthenticationRequired { decoded.append(("userAuthenticationRequired", .bool(auth))) }
            decoded.append(("publicKey", .string(Base64URL.encode(key.publicKey.spkiDER))))
            if let id = key.appAttestKeyId { decoded.append(("appAttestKeyId", .string(Base64URL.encode(id)))) }
            if let counter = key.counter { decoded.append(("counter", .number(Double(counter)))) }
            m.append(("decoded", .object(decoded)))
        } else {
            m.append(("decoded", .object(trace.decoded)))
        }
        m.append(("checks", trace.json["checks"] ?? .array([])))
        if let error { m.append(("error", .object([("code", .string(error.code.rawValue)), ("reason", .string(error.reason))]))) }
        return .object(m)
    }

    struct Options {
        var help = false
        var challenge: [UInt8]? = nil
        var clientDataHash: [UInt8]? = nil
        var at: Int64
        var requireVerifiedBoot = false
        var appAttestDevelopment = false
        var trustAnchors: [Certificate]? = nil
        var statusList = AttestationStatusList.empty
        var androidApps: [AndroidAppIdentity] = []
        var iosApps: [String] = []

        init(_ arguments: [String]) throws(UsageError) {
            let args = try ParsedArguments(arguments,
                valued: ["challenge", "client-data-hash", "at", "trust-anchor", "status-list", "app"],
                flags: ["require-verified-boot", "app-attest-development", "help"])
            at = Int64(time(nil))
            if args.has("help") { help = true; return }
            guard args.positionals.isEmpty else { throw UsageError(message: "unexpected argument '\(args.positionals[0])'") }
            if let c = args.value("challenge") {
                guard let bytes = Base64URL.decode(c), !bytes.isEmpty else { throw UsageError(message: "--challenge is not base64url") }
                challenge = bytes
            }
            if let h = args.value("client-data-hash") {
                // Any length: the bytes the app passed as clientDataHash (Apple takes any Data; samples use 24 bytes too).
                guard let bytes = Base64URL.decode(h) else { throw UsageError(message: "--client-data-hash is not base64url") }
                clientDataHash = bytes
            }
            guard challenge != nil || clientDataHash != nil else { throw UsageError(message: "--challenge (or, for App Attest, --client-data-hash) is required") }
            if let t = args.value("at") {
                guard let seconds = Inspection.parseISO8601(t) else { throw UsageError(message: "--at is not an ISO 8601 time") }
                at = seconds
            }
            requireVerifiedBoot = args.has("require-verified-boot")
            appAttestDevelopment = args.has("app-attest-development")
            for path in args.all("trust-anchor") {
                guard let bytes = readFile(path) else { throw UsageError(message: "cannot read \(path)") }
                do { trustAnchors = (trustAnchors ?? []) + (try Certificate.parsePEM(String(decoding: bytes, as: UTF8.self))) } catch {
                    throw UsageError(message: "\(path): \(error.reason)")
                }
            }
            if let path = args.value("status-list") {
                guard let bytes = readFile(path) else { throw UsageError(message: "cannot read \(path)") }
                do { statusList = try AttestationStatusList(json: bytes) } catch { throw UsageError(message: "\(path): \(error.reason)") }
            }
            for app in args.all("app") {
                if app.hasPrefix("android:") {
                    let rest = app.dropFirst("android:".count)
                    guard let colon = rest.firstIndex(of: ":"), colon != rest.startIndex else {
                        throw UsageError(message: "--app \(app): say android:<package>:<SHA-256 fingerprint AB:CD:…>")
                    }
                    // The same fingerprint forms `latchkey apps add --fingerprint` takes.
                    guard let fingerprint = try? SigningCertificateFingerprint(parsing: String(rest[rest.index(after: colon)...])) else {
                        throw UsageError(message: "--app \(app): the fingerprint must be 32 hex bytes (SHA-256), AB:CD:…")
                    }
                    androidApps.append(AndroidAppIdentity(packageName: String(rest[..<colon]), signatureDigests: [fingerprint.bytes]))
                } else if app.hasPrefix("ios:") {
                    let id = String(app.dropFirst("ios:".count))
                    guard let dot = id.firstIndex(of: "."), dot != id.startIndex, id.index(after: dot) != id.endIndex else {
                        throw UsageError(message: "--app \(app): say ios:<teamId>.<bundleId>")
                    }
                    iosApps.append(id)
                } else {
                    throw UsageError(message: "--app \(app): say android:<package>:<fingerprint> or ios:<teamId>.<bundleId>")
                }
            }
        }
    }
}
