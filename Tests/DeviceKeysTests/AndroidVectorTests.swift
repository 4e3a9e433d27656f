import Crypto
import DeviceKeys
import Foundation
import JSON
import Testing

/// The shared device-key vectors (Tests/DeviceKeysTests/Fixtures/device-keys, copied from
/// /work/shared/vectors/device-keys): real Android Key Attestation chains from Pixel, Sony and
/// Samsung phones, verified at their `at` time with the shipped roots.
struct AndroidVector: CustomTestStringConvertible, Sendable {
    let name: String
    let publicKey: [UInt8]
    let chain: [[UInt8]]
    let challenge: [UInt8]
    let at: Int64
    let apps: [String]
    let expect: String
    let expectIfVerifiedBootRequired: String
    let expectIfStrict: String?
    let notes: String
    var testDescription: String { name }

    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/device-keys")

    static func load(_ file: String) -> JSONValue {
        let url = directory.appendingPathComponent(file)
        guard let data = try? Data(contentsOf: url), let json = try? JSONParser.parse([UInt8](data), maxDepth: 64) else {
            fatalError("cannot read \(url.path)")
        }
        return json
    }

    static let all: [AndroidVector] = (load("android.json").arrayValue ?? []).map { v in
        func bytes(_ s: JSONValue?) -> [UInt8] { s?.stringValue.flatMap(Base64URL.decode) ?? [] }
        return AndroidVector(
            name: v["name"]?.stringValue ?? "?",
            publicKey: bytes(v["input"]?["publicKey"]),
            chain: (v["input"]?["attestation"]?.arrayValue ?? []).map { bytes($0) },
            challenge: bytes(v["challenge"]),
            at: v["at"]?.stringValue.flatMap(ISOTime.parse) ?? 0,
            apps: (v["apps"]?.arrayValue ?? []).compactMap(\.stringValue),
            expect: v["expect"]?.stringValue ?? "?",
            expectIfVerifiedBootRequired: v["expectIfVerifiedBootRequired"]?.stringValue ?? v["expect"]?.stringValue ?? "?",
            expectIfStrict: v["expectIfStrict"]?.stringValue,
            notes: v["notes"]?.stringValue ?? "")
    }

    static func named(_ name: String) -> AndroidVector { all.first { $0.name == name }! }

    var certificates: [Certificate] { chain.map { try! Certificate(der: $0) } }

    /// `android:<package>:<AB:CD:… SHA-256>`, as the CLI's --app takes it.
    var androidApps: [AndroidAppIdentity] {
        apps.compactMap { app in
            let parts = app.split(separator: ":", maxSplits: 2).map(String.init)
            guard parts.count == 3, parts[0] == "android" else { return nil }
            let digest = parts[2].split(separator: ":").compactMap { UInt8($0, radix: 16) }
            return AndroidAppIdentity(packageName: parts[1], signatureDigests: [digest])
        }
    }

    func policy(requireVerifiedBoot: Bool = false, at: Int64? = nil) -> DeviceKeyAttestationPolicy {
        var p = DeviceKeyAttestationPolicy(trustAnchors: DeviceKeyAttestationPolicy.shippedRoots, now: at ?? self.at)
        p.androidApps = androidApps
        p.requireVerifiedBoot = requireVerifiedBoot
        return p
    }

    /// Runs the verifier the way the server does: parse the public key, then verify the chain.
    func run(_ policy: DeviceKeyAttestationPolicy, challenge: [UInt8]? = nil, chain: [Certificate]? = nil,
             publicKey: [UInt8]? = nil, trace: AttestationTrace? = nil) -> Result<AttestedDeviceKey, DeviceKeyError> {
        do throws(DeviceKeyError) {
            let key = try DevicePublicKey(bytes: publicKey ?? self.publicKey)
            return .success(try AndroidKeyAttestationVerifier.verify(chain: chain ?? certificates, publicKey: key,
                                                                     challenge: challenge ?? self.challenge, policy: policy, trace: trace))
        } catch {
            return .failure(error)
        }
    }

    /// `notes` fields such as `attestationVersion=300; …`.
    /// The key may follow a sentence (`…expired.attestationVersion=3`), so it is found anywhere it is
    /// not the tail of a longer name.
    func note(_ key: String) -> String? {
        var search = notes.startIndex
        while let r = notes.range(of: key + "=", range: search..<notes.endIndex) {
            if r.lowerBound == notes.startIndex || !notes[notes.index(before: r.lowerBound)].isLetter {
                let rest = notes[r.upperBound...]
                return String(rest.prefix { $0 != ";" })
            }
            search = r.upperBound
        }
        return nil
    }
}

enum ISOTime {
    /// `YYYY-MM-DDTHH:MM:SSZ` → unix seconds.
    static func parse(_ s: String) -> Int64? {
        let f = ISO8601DateFormatter()
        return f.date(from: s).map { Int64($0.timeIntervalSince1970) }
    }
}

@Suite("Android Key Attestation: shared vectors")
struct AndroidVectorTests {
    @Test("Every vector: outcome at `at` matches expect (and expectIfVerifiedBootRequired)", arguments: AndroidVector.all)
    func vector(_ v: AndroidVector) {
        for strictBoot in [false, true] {
            let trace = AttestationTrace()
            let result = v.run(v.policy(requireVerifiedBoot: strictBoot), trace: trace)
            let outcome: String
            switch result {
            case .success: outcome = "ok"
            case .failure(let e):
                outcome = "fail"
                #expect(e.code == .attestationInvalid || e.code == .invalidRequest, "\(v.name): \(e)")
            }
            let expected = strictBoot ? v.expectIfVerifiedBootRequired : v.expect
            let failures = trace.checks.filter { !$0.ok }.map { "\($0.check): \($0.detail ?? "")" }
            let why: String
            if case .failure(let e) = result { why = e.reason } else { why = "verified" }
            #expect(outcome == expected || (!strictBoot && v.expectIfStrict == outcome),
                    "\(v.name) (requireVerifiedBoot \(strictBoot)): got \(outcome) — \(why) \(failures)")
        }
    }

    @Test("A verified vector reports what it proved", arguments: AndroidVector.all.filter { $0.expect == "ok" })
    func proved(_ v: AndroidVector) throws {
        let key = try v.run(v.policy()).get()
        #expect(key.format == .androidKey)
        let level = v.note("attestationSecurityLevel") == "StrongBox" ? KeySecurityLevel.strongBox : .tee
        #expect(key.securityLevel == level)
        #expect(key.app == v.androidApps.first?.packageName)
        #expect(key.publicKey.spkiDER == (try DevicePublicKey(bytes: v.publicKey)).spkiDER)
        #expect(key.userAuthenticationRequired == !v.notes.contains("noAuthRequired=True"))
        #expect(key.appAttestKeyId == nil && key.counter == nil)
        #expect(key.decoded["keyDescription"]?["attestationVersion"]?.intValue == Int(v.note("attestationVersion") ?? ""))
    }

    /// The parser reads every real extension (all attestation versions: 2, 3, 100-era 300/400, 500)
    /// and agrees with what the vector's notes say the source's own decoder found.
    @Test("Every leaf's key description parses and matches the vector's notes", arguments: AndroidVector.all)
    func parses(_ v: AndroidVector) throws {
        let kd = try AndroidKeyDescription(certificate: v.certificates[0])
        #expect(String(kd.attestationVersion) == v.note("attestationVersion"))
        #expect(String(kd.keyMintVersion) == v.note("keymasterOrKeyMintVersion"))
        #expect(kd.attestationSecurityLevel.description == v.note("attestationSecurityLevel"))
        #expect(kd.keyMintSecurityLevel.description == v.note("keymasterOrKeyMintSecurityLevel"))
        #expect(kd.attestationChallenge == v.challenge || v.name.hasPrefix("swa-"))  // WebAuthn: SHA-256(clientDataJSON)
        let aaid = try #require(kd.softwareEnforced.attestationApplicationId)
        let packages = aaid.packages.map { "\($0.name) (v\($0.version))" }.joined(separator: ", ")
        #expect(packages == v.note("package(s)"))
        let digest = v.note("signingCertSha256")
        #expect(aaid.signatureDigests.map { $0.map { String(format: "%02x", $0) }.joined() }.first ?? "none" == digest)
        let rot = v.note("rootOfTrust: verifiedBootState")
        if rot == "ABSENT" || v.notes.contains("rootOfTrust: ABSENT") {
            #expect(kd.hardwareEnforced.rootOfTrust == nil)
        } else {
            let r = try #require(kd.hardwareEnforced.rootOfTrust)
            #expect(v.notes.contains("verifiedBootState=\(["Verified", "SelfSigned", "Unverified", "Failed"][r.verifiedBootState.rawValue])"))
            #expect(v.notes.contains("deviceLocked=\(r.deviceLocked ? "True" : "False")"))
        }
        #expect(kd.hardwareEnforced.origin == 0 && v.note("origin") == "GENERATED")
        if let usage = v.note("usageCountLimit") {
            #expect(String(kd.hardwareEnforced.usageCountLimit ?? kd.softwareEnforced.usageCountLimit ?? -1) == usage)
        }
        #expect(kd.hardwareEnforced.tags.isEmpty == false)
    }

    @Test("Shipped roots: the five Google hardware roots and Apple's App Attestation root, never a software root")
    func shippedRoots() {
        let roots = DeviceKeyAttestationPolicy.shippedRoots
        #expect(roots.count == 6)
        let fingerprints = Set(roots.map { Digest.sha256($0.der).map { String(format: "%02X", $0) }.joined() })
        #expect(fingerprints == [
            "C1984A3EF45C1E2A918551DE10603C86F7051B2249C4891CAE3230EABD0C97D5",
            "1EF1A04B8BA58AB94589AC498C8982A783F24EA7307E0159A0C3A73B377D87CC",
            "AB6641178A36E179AA0C1CDDDF9A16EB45FA20943E2B8CD7C7C05C26CF8B487A",
            "CEDB1CB6DC896AE5EC797348BCE9286753C2B38EE71CE0FBE34A9A1248800DFC",
            "6D9DB4CE6C5C0B293166D08986E05774A8776CEB525D9E4329520DE12BA4BCC0",
            "1CB9823BA28BA6AD2D33A006941DE2AE4F513EF1D4E831B9F7E0FA7B6242C932",
        ])
        for file in ["android-software-attestation-root-ec-UNTRUSTED.pem", "android-software-attestation-root-rsa-UNTRUSTED.pem"] {
            let pem = try! String(contentsOf: AndroidVector.directory.appendingPathComponent("roots/\(file)"), encoding: .utf8)
            let software = try! Certificate.parsePEM(pem)[0]
            #expect(!roots.contains { $0.subjectPublicKeyInfoDER == software.subjectPublicKeyInfoDER }, "\(file)")
        }
    }
}

@Suite("Attestation status list")
struct AttestationStatusListTests {
    @Test("Google's shape: REVOKED and SUSPENDED listed, keys are hex even when all digits")
    func fixture() throws {
        let fixture = AndroidVector.load("gak-revocation-status-fixture.json")
        let list = try AttestationStatusList(json: Array(try #require(fixture["statusList"]).text.utf8))
        #expect(list.revokedSerials.count == 5)
        #expect(list.isRevoked(serialHex: "cc66e9a93713b6e643b26c15879786f7"))   // SUSPENDED counts
        #expect(list.isRevoked(serialHex: "8350192447815228107"))
        #expect(list.isRevoked(serialHex: "CC66E9A93713B6E643B26C15879786F7"))   // case does not matter
        #expect(list.isRevoked(serialHex: "00cc66e9a93713b6e643b26c15879786f7")) // nor leading zeros
        #expect(!list.isRevoked(serialHex: "badbeef"))
        let cert = try Certificate(der: try #require(fixture["certificate"]?.stringValue.flatMap(Base64.decodeStandard)))
        #expect(cert.serialNumberHex == fixture["serialHexLowercase"]?.stringValue)
        #expect(list.isRevoked(serialHex: cert.serialNumberHex))
        #expect(!AttestationStatusList.empty.isRevoked(serialHex: cert.serialNumberHex))
    }

    @Test("A malformed list is invalid_request", arguments: [
        "", "[]", "{}", #"{"entries": []}"#, #"{"entries": {"xyz": {"status": "REVOKED"}}}"#,
        #"{"entries": {"ab": {}}}"#, #"{"entries": {"ab": {"status": "MAYBE"}}}"#, #"{"entries": {"ab": "REVOKED"}}"#,
    ])
    func malformed(_ text: String) {
        #expect(throws: DeviceKeyError(.invalidRequest, "")) { try AttestationStatusList(json: Array(text.utf8)) }
    }
}
