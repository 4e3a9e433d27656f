import Crypto
import JSON
import LatchkeyServer
import WebAuthn

/// `latchkey inspect registration|authentication|device-key`: explains why a credential (or a device
/// key's attestation, `InspectDeviceKeyCommand`) passes or fails.
enum InspectCommand: Command {
    static let name = "inspect"
    static let summary = "verify a credential or device-key attestation JSON from stdin and show every field and check"
    static let help = """
        usage: latchkey inspect registration|authentication --rp-id R --origin O [--origin O …] --challenge C [options] < credential.json
               latchkey inspect device-key --challenge C [--app A …] [options] < enrolment.json   (see 'inspect device-key --help')

        Reads a RegistrationResponseJSON or AuthenticationResponseJSON on stdin, verifies it as
        WebAuthn Level 3 §7.1/§7.2 describe, and prints every decoded field and every check as JSON.
        Exit status: 0 verified, 1 not verified, 64 bad usage.

        options:
          --rp-id R                     relying-party id (required)
          --origin O                    an allowed origin; repeatable (required)
          --challenge C                 the challenge the options carried, base64url (required)
          --public-key K                authentication: the stored COSE public key, base64url (required)
          --sign-count N                authentication: the stored signature counter (default 0)
          --at TIME                     verify as if now were TIME (ISO 8601, e.g. 2021-09-03T21:07:20Z)
          --trust-anchor FILE           PEM file of attestation roots; repeatable
          --require-user-verification   refuse when the UV flag is clear
          --alg N                       a COSE algorithm the options offered; repeatable
          --allow-cross-origin          accept crossOrigin ceremonies (optionally only under --top-origin)
          --top-origin O                an allowed top origin for cross-origin ceremonies; repeatable
          --app-id URL                  FIDO AppID accepted when the client reports the appid extension
          --mds FILE                    registration: apply this FIDO MDS3 BLOB (verified now); the report
                                        shows which statement matched and why a chain failed
          --mds-root FILE               PEM root of the BLOB's signer (default: the shipped FIDO root); the
                                        signing certificate must name LATCHKEY_MDS_SIGNER (mds.fidoalliance.org)
          --mds-crls DIR                CRL files for the BLOB's and the attestation's chains
          --deny AAGUID                 with --mds: refuse this AAGUID; repeatable
          -h, --help                    show this help
        """

    static func run(_ arguments: [String]) -> Int32 {
        if arguments.first == "device-key" { return InspectDeviceKeyCommand.run(Array(arguments.dropFirst())) }
        do throws(UsageError) {
            let args = try ParsedArguments(arguments,
                valued: ["rp-id", "origin", "challenge", "public-key", "sign-count", "at", "trust-anchor", "alg", "top-origin", "app-id",
                         "mds", "mds-root", "mds-crls", "deny"],
                flags: ["require-user-verification", "allow-cross-origin", "help"])
            if args.has("help") { print(help); return ExitCode.success }
            guard args.positionals.count == 1, let ceremony = Inspection.Ceremony(rawValue: args.positionals[0]) else {
                throw UsageError(message: "say 'registration', 'authentication' or 'device-key'")
            }
            guard let rpId = args.value("rp-id"), !rpId.isEmpty else { throw UsageError(message: "--rp-id is required") }
            let origins = args.all("origin")
            guard !origins.isEmpty else { throw UsageError(message: "--origin is required") }
            guard let challengeText = args.value("challenge") else { throw UsageError(message: "--challenge is required") }
            guard let challenge = Base64URL.decode(challengeText) else { throw UsageError(message: "--challenge is not base64url") }
            var options = Inspection.Options(ceremony: ceremony, rpId: rpId, origins: origins, challenge: challenge)
            if ceremony == .authentication {
                guard let keyText = args.value("public-key") else { throw UsageError(message: "--public-key is required for authentication") }
                guard let key = Base64URL.decode(keyText) else { throw UsageError(message: "--public-key is not base64url") }
                options.publicKey = key
            }
            if let count = args.value("sign-count") {
                guard let n = UInt32(count) else { throw UsageError(message: "--sign-count must be 0…4294967295") }
                options.signCount = n
            }
            if let at = args.value("at") {
                guard let t = Inspection.parseISO8601(at) else { throw UsageError(message: "--at is not an ISO 8601 time") }
                options.at = t
            }
            for path in args.all("trust-anchor") {
                guard let bytes = readFile(path) else { throw UsageError(message: "cannot read \(path)") }
                do { options.trustAnchors += try Certificate.parsePEM(String(decoding: bytes, as: UTF8.self)) } catch {
                    throw UsageError(message: "\(path): \(error.reason)")
                }
            }
            for alg in args.all("alg") {
                guard let n = Int(alg) else { throw UsageError(message: "--alg takes a COSE algorithm number such as -7") }
                options.algorithms.append(COSEAlgorithm(n))
            }
            options.requireUserVerification = args.has("require-user-verification")
            options.allowCrossOrigin = args.has("allow-cross-origin")
            options.topOrigins = args.all("top-origin")
            options.appId = args.value("app-id")
            if let mds = args.value("mds") {
                guard ceremony == .registration else { throw UsageError(message: "--mds applies to registration") }
                // The BLOB is today's data: verified at the real time; the credential at --at.
                do {
                    let signer = Configuration.processEnvironment()["LATCHKEY_MDS_SIGNER"].flatMap { $0.isEmpty ? nil : $0 }
                        ?? MetadataBLOB.defaultSigner
                    let (blob, crls) = try MetadataFiles.load(blobPath: mds, rootPath: args.value("mds-root"),
                                                              crlDirectory: args.value("mds-crls"), signer: signer, maxStaleSeconds: 2_592_000,
                                                              at: VerificationPolicy.systemClock())
                    options.metadata = MetadataPolicy(source: .loaded(blob), crls: crls)
                } catch { throw UsageError(message: "--mds: \(error.description)") }
                for text in args.all("deny") {
                    guard let aaguid = parseUUID(text) else { throw UsageError(message: "--deny takes an AAGUID") }
                    options.metadata.deniedAAGUIDs.insert(aaguid)
                }
            } else if !args.all("deny").isEmpty || args.value("mds-root") != nil || args.value("mds-crls") != nil {
                throw UsageError(message: "--deny, --mds-root and --mds-crls need --mds")
            }
            // A credential JSON is a few KiB; refuse anything past 1 MiB as bad input, not bad usage.
            guard let input = readAllStandardInput(limit: 1 << 20) else {
                let refusal: JSONValue = .object([
                    ("ceremony", .string(ceremony.rawValue)), ("verified", false), ("decoded", .object([])),
                    ("checks", [.object([("check", "parse"), ("passed", false), ("detail", "input is larger than 1 MiB")])]),
                    ("error", .object([("code", "invalid_request"), ("reason", "input is larger than 1 MiB")])),
                ])
                print(refusal.text)
                return ExitCode.failure
            }
            let report = Inspection.run(input, options: options)
            print(report.json.text)
            return report.verified ? ExitCode.success : ExitCode.failure
        } catch {
            printError("latchkey inspect: \(error.message)\n\n\(help)")
            return ExitCode.usage
        }
    }
}
