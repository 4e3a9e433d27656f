import CBOR
import Crypto
import DeviceKeys
import Foundation
import JSON
import Testing
import WebAuthn

/// One attestation of Fixtures/appattest/appattest.json: a real App Attest object and how to verify it.
struct AppAttestVector: CustomTestStringConvertible, Sendable {
    let json: JSONValue
    var testDescription: String { name }
    var name: String { json["name"]?.stringValue ?? "?" }
    var expect: String { json["expect"]?.stringValue ?? "?" }
    var keyId: [UInt8] { Base64URL.decode(json["input"]?["appAttest"]?["keyId"]?.stringValue ?? "") ?? [] }
    var attestationObject: [UInt8] { Base64URL.decode(json["input"]?["appAttest"]?["attestationObject"]?.stringValue ?? "") ?? [] }
    var publicKey: [UInt8] { Base64URL.decode(json["input"]?["publicKey"]?.stringValue ?? "") ?? [] }
    var clientDataHash: [UInt8] { Base64URL.decode(json["clientDataHash"]?.stringValue ?? "") ?? [] }
    var at: Int64 { Inspection.parseISO8601(json["at"]?.stringValue ?? "") ?? 0 }
    /// "ios:<teamId>.<bundleId>" → "<teamId>.<bundleId>".
    var iosApps: [String] {
        (json["apps"]?.arrayValue ?? []).compactMap(\.stringValue).filter { $0.hasPrefix("ios:") }.map { String($0.dropFirst(4)) }
    }
    var development: Bool { json["development"]?.boolValue ?? false }

    /// The policy `latchkey inspect device-key` builds from the vector's flags, with the shipped roots.
    var policy: DeviceKeyAttestationPolicy {
        var p = DeviceKeyAttestationPolicy(trustAnchors: DeviceKeyAttestationPolicy.shippedRoots, now: at)
        p.iosApps = iosApps
        p.appAttestDevelopment = development
        return p
    }

    func verify(_ policy: DeviceKeyAttestationPolicy? = nil, keyId: [UInt8]? = nil, object: [UInt8]? = nil,
                clientDataHash: [UInt8]? = nil, trace: AttestationTrace? = nil) throws(DeviceKeyError) -> AttestedDeviceKey {
        try AppAttestVerifier.verifyAttestation(keyId: keyId ?? self.keyId, attestationObject: object ?? attestationObject,
                                                clientDataHash: clientDataHash ?? self.clientDataHash,
                                                policy: policy ?? self.policy, trace: trace)
    }

    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/appattest")

    static func loadJSON(_ url: URL) -> JSONValue? {
        guard let data = try? Data(contentsOf: url) else { return nil }
        return try? JSONParser.parse([UInt8](data), maxDepth: 64)
    }

    static let all: [AppAttestVector] =
        (loadJSON(fixtures.appendingPathComponent("appattest.json"))?.arrayValue ?? []).map { AppAttestVector(json: $0) }
}

/// One assertion of Fixtures/appattest/appattest-assertions/.
struct AppAttestAssertionVector: CustomTestStringConvertible, Sendable {
    let json: JSONValue
    var testDescription: String { name }
    var name: String { json["name"]?.stringValue ?? "?" }
    var expect: String { json["expect"]?.stringValue ?? "?" }
    var assertion: [UInt8] { Base64URL.decode(json["assertion"]?.stringValue ?? "") ?? [] }
    var keyId: [UInt8] { Base64.decodeStandard(json["keyId"]?.stringValue ?? "") ?? [] }
    var clientDataHash: [UInt8] { Base64.decodeStandard(json["clientDataHash"]?.stringValue ?? "") ?? [] }
    var clientData: [UInt8] { Base64URL.decode(json["clientData"]?.stringValue ?? "") ?? [] }
    var appId: String { json["appId"]?.stringValue ?? "" }
    var counter: UInt32 { UInt32(json["counter"]?.intValue ?? -1) }
    var previousCounter: UInt32 { UInt32(json["previousCounter"]?.intValue ?? 0) }
    var attestationName: String? { json["attestationVectorForThisKey"]?.stringValue }

    var publicKey: DevicePublicKey {
        get throws {
            let pem = json["publicKeyPem"]?.stringValue ?? ""
            let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            return try DevicePublicKey(bytes: try #require(Base64.decodeStandard(body)))
        }
    }

    static let all: [AppAttestAssertionVector] = {
        let folder = AppAttestVector.fixtures.appendingPathComponent("appattest-assertions")
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
        return files.compactMap { AppAttestVector.loadJSON(folder.appendingPathComponent($0)) }.map { AppAttestAssertionVector(json: $0) }
    }()
}

@Suite("App Attest vectors")
struct AppAttestVectorTests {
    @Test func vectorsAreLoaded() {
        #expect(AppAttestVector.all.count == 6)
        #expect(AppAttestAssertionVector.all.count == 7)
    }

    @Test("Shipped roots hold the Apple App Attestation Root CA")
    func shippedRoots() throws {
        let roots = DeviceKeyAttestationPolicy.shippedRoots
        let apple = try #require(roots.first { $0.subject.contains { $0.value == "Apple App Attestation Root CA" } })
        #expect(Digest.sha256(apple.der).map { String(format: "%02X", $0) }.joined(separator: ":")
                == "1C:B9:82:3B:A2:8B:A6:AD:2D:33:A0:06:94:1D:E2:AE:4F:51:3E:F1:D4:E8:31:B9:F7:E0:FA:7B:62:42:C9:32")
    }

    @Test("Every attestation vector gives its expected outcome", arguments: AppAttestVector.all)
    func attestation(_ vector: AppAttestVector) throws {
        let trace = AttestationTrace()
        let result = Result { () throws(DeviceKeyError) in try vector.verify(trace: trace) }
        switch (vector.expect, result) {
        case ("ok", .success(let key)):
            #expect(key.format == .appleAppAttest && key.securityLevel == .secureEnclave)
            #expect(key.app == vector.iosApps.first)
            #expect(key.appAttestKeyId == vector.keyId && key.counter == 0 && key.userAuthenticationRequired == nil)
            // The vector's publicKey is the credCert key: the same stored form.
            #expect(key.publicKey.spkiDER == (try DevicePublicKey(bytes: vector.publicKey)).spkiDER)
            #expect(key.decoded["environment"]?.stringValue == (vector.development ? "development" : "production"))
            #expect(trace.checks.allSatisfy { $0.ok })
            #expect(trace.checks.map(\.check).contains("appattest.step9.credentialId"))
        case ("fail", .failure(let error)):
            #expect(error.code == .attestationInvalid)
        case (let expected, let got):
            Issue.record("\(vector.name): expected \(expected), got \(got)")
        }
    }

    @Test("Every assertion vector verifies with its key, and its negative cases fail", arguments: AppAttestAssertionVector.all)
    func assertion(_ vector: AppAttestAssertionVector) throws {
        let key = try vector.publicKey
        #expect(Digest.sha256(key.x963) == vector.keyId, "keyId is SHA-256 of the X9.63 point")
        #expect(Digest.sha256(vector.clientData) == vector.clientDataHash)
        func verify(clientDataHash: [UInt8]? = nil, appId: String? = nil, previous: UInt32? = nil) throws(DeviceKeyError) -> UInt32 {
            try AppAttestVerifier.verifyAssertion(vector.assertion, publicKey: key, clientDataHash: clientDataHash ?? vector.clientDataHash,
                                                  appId: appId ?? vector.appId, previousCounter: previous ?? vector.previousCounter)
        }
        #expect(vector.expect == "ok")
        #expect(try verify() == vector.counter)
        let refused = DeviceKeyError(.attestationInvalid, "")
        // negativeCases[0]: other client data → the signature no longer verifies.
        #expect(throws: refused) { try verify(clientDataHash: Digest.sha256(Array("fporfplezruw".utf8))) }
        // Step 5: previous counter equal to the assertion's (a replay) or above it → refused; below → accepted.
        #expect(throws: refused) { try verify(previous: vector.counter) }
        #expect(throws: refused) { try verify(previous: vector.counter + 1) }
        #expect(throws: refused) { try verify(previous: .max) }
        #expect(try verify(previous: vector.counter - 1) == vector.counter)
        // Step 4: another App ID.
        #expect(throws: refused) { try verify(appId: "6MURL8TA57.de.vincent-haupert.other") }
        // Another key (the next vector's) does not verify it.
        let other = try #require(AppAttestAssertionVector.all.first { $0.name != vector.name })
        #expect(throws: refused) {
            try AppAttestVerifier.verifyAssertion(vector.assertion, publicKey: try other.publicKey, clientDataHash: vector.clientDataHash,
                                                  appId: vector.appId, previousCounter: 0)
        }
    }

    @Test("An assertion's key matches its attestation vector's attested key")
    func assertionKeysComeFromAttestations() throws {
        for assertion in AppAttestAssertionVector.all {
            guard let name = assertion.attestationName, let attestation = AppAttestVector.all.first(where: { $0.name == name }) else { continue }
            let attested = try attestation.verify()
            #expect(attested.publicKey.spkiDER == (try assertion.publicKey).spkiDER, "\(assertion.name)")
            #expect(attested.appAttestKeyId == assertion.keyId)
            #expect(try AppAttestVerifier.verifyAssertion(assertion.assertion, publicKey: attested.publicKey,
                                                          clientDataHash: assertion.clientDataHash, appId: try #require(attested.app),
                                                          previousCounter: try #require(attested.counter)) == assertion.counter)
        }
    }
}
