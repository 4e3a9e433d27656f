import Crypto
import DeviceKeys
import DeviceKeysTesting
import Foundation
import JSON
import LatchkeyServer
import Testing
import WebAuthnTesting

/// SPEC "Trust chain": attested keys and truthful claims, over HTTP. App Attest objects are built
/// under a test root (DeviceKeysTesting) that the server is configured to trust through
/// `LATCHKEY_ATTESTATION_ROOTS`, because a real attestation binds a challenge of its own; the real
/// vectors are checked by the core's tests and `latchkey inspect device-key`.
@Suite("Attested device keys: hwk only when proven")
struct AttestedDeviceKeyTests {
    static let rootsFolder: String = {
        let folder = NSTemporaryDirectory() + "latchkey-roots-\(uniqueSuffix())"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let pem = PEM.encode(AppAttestBuilder.root, label: "CERTIFICATE")
        FileManager.default.createFile(atPath: folder + "/test-app-attest-root.pem", contents: Data(pem.utf8))
        return folder
    }()
    static let fixture = Result { try TestServer(name: "attest") { $0.attestationRootsDirectory = rootsFolder } }
    static let strict = Result {
        try TestServer(name: "attest-required") { $0.attestationRootsDirectory = rootsFolder; $0.deviceKeyAttestation = .required }
    }
    let h = StepUpTests()

    /// Declares the builder's iOS app for `server`'s rpId (the same list that feeds the AASA file).
    func declareApp(_ server: TestServer, _ builder: AppAttestBuilder) throws {
        let r = try server.client().post("/admin/v1/apps", .object([("platform", "ios"), ("appId", .string(builder.appId))]),
                                         authorization: "Bearer \(server.adminKey)")
        #expect(r.status == 201 || r.status == 200, "\(r)")
    }

    /// Enrols an App Attest key: the builder attests it for SHA-256(the enrolment challenge bytes).
    func enrolAppAttest(_ a: StepUpTests.Account, _ builder: inout AppAttestBuilder, deviceId: String) throws -> Reply {
        let c = try h.enrolmentChallenge(a)
        builder.clientDataHash = Digest.sha256(try #require(Base64URL.decode(c["challenge"]!.stringValue!)))
        let body: JSONValue = .object([
            ("deviceId", .string(deviceId)), ("platform", "ios"), ("challengeId", c["challengeId"]!),
            ("appAttest", .object([("keyId", .string(Base64URL.encode(builder.keyId))),
                                   ("attestationObject", .string(Base64URL.encode(builder.object())))])),
        ])
        return try h.gatedEnrol(a, body)
    }

    func assertionApproval(_ a: StepUpTests.Account, _ builder: AppAttestBuilder, keyId: String, counter: UInt32) throws -> Reply {
        let c = try h.challenge(a, keyId: keyId)
        let bytes = try #require(Base64URL.decode(c["challenge"]!.stringValue!))
        let assertion = try builder.assertion(counter: counter, clientDataHash: Digest.sha256(bytes))
        return try a.client.post("/v1/step-up/verify", .object([("challengeId", c["challengeId"]!), ("assertion", .string(Base64URL.encode(assertion)))]),
                                 authorization: a.bearer)
    }

    @Test("an App Attest key is enrolled as attested, and its step-up tokens say hwk")
    func appAttestKeySaysHardware() throws {
        let server = try Self.fixture.get()
        var builder = AppAttestBuilder()
        builder.appId = "ABCDE12345.com.example.\(uniqueSuffix())"
        try declareApp(server, builder)
        let a = try h.account(server)
        let enrolled = try enrolAppAttest(a, &builder, deviceId: "iphone-\(uniqueSuffix())")
        #expect(enrolled.status == 201, "\(enrolled)")
        #expect(enrolled.json?["attested"]?.boolValue == true)
        #expect(enrolled.json?["attestation"]?["format"]?.stringValue == "apple-appattest")
        #expect(enrolled.json?["attestation"]?["securityLevel"]?.stringValue == "secure-enclave")
        #expect(enrolled.json?["attestation"]?["app"]?.stringValue == builder.appId)
        let keyId = try #require(enrolled.json?["id"]?.stringValue)

        let approved = try assertionApproval(a, builder, keyId: keyId, counter: 1)
        #expect(approved.status == 200, "\(approved)")
        let claims = try StepUpTests.claims(try #require(approved.json?["access_token"]?.stringValue))
        #expect(claims["amr"]?.arrayValue == ["hwk", "pop"])
        #expect(claims["acr"]?.stringValue == "urn:latchkey:acr:device-key-attested")
        // Its receipt carries the App Attest evidence and the attestation summary, and checks offline
        // (also by docs/evidence.md's commands).
        let receipt = try ReceiptDocumentTests.checkedDocument(try #require(approved.json?["receiptId"]?.stringValue))
        #expect(receipt["approver"]?["attestation"] == ["format": "apple-appattest", "trust": "verified-chain"])
        #expect(receipt["evidence"]?["clientDataHash"] != nil && receipt["evidence"]?["authenticatorData"] != nil)
        let hand = try ReceiptDocumentTests.handCheck(receipt.canonicalized())
        #expect(hand.ok && hand.output.contains("Verified OK"), "\(hand.output)")

        // The counter only goes up: the same counter again is refused, a higher one works.
        #expect(try assertionApproval(a, builder, keyId: keyId, counter: 1).code == "signature_invalid")
        #expect(try assertionApproval(a, builder, keyId: keyId, counter: 2).status == 200)
        // A plain signature is not how an App Attest key approves.
        let c = try h.challenge(a, keyId: keyId)
        let plain = try builder.credentialKey.sign(try #require(Base64URL.decode(c["challenge"]!.stringValue!)), algorithm: .ecdsa(.sha256))
        #expect(try h.verify(a, c, signature: Base64URL.encode(plain)).code == "invalid_request")
    }

    @Test("two approvals carrying one App Attest counter never both succeed (16 rounds)")
    func appAttestCounterIsCompareAndSet() throws {
        let server = try Self.fixture.get()
        var builder = AppAttestBuilder()
        builder.appId = "ABCDE12345.com.example.\(uniqueSuffix())"
        try declareApp(server, builder)
        let a = try h.account(server)
        let enrolled = try enrolAppAttest(a, &builder, deviceId: "iphone-\(uniqueSuffix())")
        let keyId = try #require(enrolled.json?["id"]?.stringValue, "\(enrolled)")
        for round in 1...16 {
            let counter = UInt32(round)
            // Two challenges, two assertions with the same counter, sent at once from two connections.
            var bodies: [JSONValue] = []
            for _ in 0..<2 {
                let c = try h.challenge(a, keyId: keyId)
                let bytes = try #require(Base64URL.decode(c["challenge"]!.stringValue!))
                let assertion = try builder.assertion(counter: counter, clientDataHash: Digest.sha256(bytes))
                bodies.append(.object([("challengeId", c["challengeId"]!), ("assertion", .string(Base64URL.encode(assertion)))]))
            }
            let statuses = ConcurrentResults()
            let requests = bodies.map { $0.serialized() }, bearer = a.bearer
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                let client = server.client()
                let status = (try? client.send("POST", "/v1/step-up/verify", body: requests[i], authorization: bearer).status) ?? 0
                statuses.append(status)
            }
            #expect(statuses.values.sorted() == [200, 400], "round \(round): \(statuses.values)")
        }
    }

    @Test("a bad attestation is refused whatever the policy; under required, no attestation is too")
    func refusals() throws {
        let server = try Self.fixture.get()
        var builder = AppAttestBuilder()
        builder.appId = "ABCDE12345.com.example.\(uniqueSuffix())"
        let a = try h.account(server)
        // The app is not declared for this rpId.
        #expect(try enrolAppAttest(a, &builder, deviceId: "iphone-\(uniqueSuffix())").code == "attestation_invalid")
        try declareApp(server, builder)
        // An object made for another challenge.
        let c = try h.enrolmentChallenge(a)
        builder.clientDataHash = Digest.sha256(Array("some other challenge".utf8))
        let body: JSONValue = .object([
            ("deviceId", .string("iphone-\(uniqueSuffix())")), ("platform", "ios"), ("challengeId", c["challengeId"]!),
            ("appAttest", .object([("keyId", .string(Base64URL.encode(builder.keyId))),
                                   ("attestationObject", .string(Base64URL.encode(builder.object())))])),
        ])
        #expect(try h.gatedEnrol(a, body).code == "attestation_invalid")

        let strict = try Self.strict.get()
        let b = try h.account(strict)
        let plain = try h.enrol(b, StepUpTests.Phone(platform: "ios"))
        #expect(plain.code == "attestation_invalid", "\(plain)")
        var other = AppAttestBuilder()
        other.appId = "ABCDE12345.com.example.\(uniqueSuffix())"
        try declareApp(strict, other)
        #expect(try enrolAppAttest(b, &other, deviceId: "iphone-\(uniqueSuffix())").status == 201)
    }
}

/// Results gathered from concurrent work.
final class ConcurrentResults: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Int] = []
    func append(_ v: Int) { lock.lock(); items.append(v); lock.unlock() }
    var values: [Int] { lock.lock(); defer { lock.unlock() }; return items }
}
