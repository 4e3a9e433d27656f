import CBOR
import Crypto
import DeviceKeys
import DeviceKeysTesting
import JSON
import Testing

private let refused = DeviceKeyError(.attestationInvalid, "")

/// The reason of the refusal, or "" when `body` succeeded; any other error code fails the test.
private func reason(_ body: () throws -> Any) -> String {
    do { _ = try body(); return "" } catch let error as DeviceKeyError {
        #expect(error.code == .attestationInvalid, "\(error)")
        return error.reason
    } catch {
        Issue.record("unexpected \(error)")
        return "\(error)"
    }
}

/// Failures built from the real bytes of the first attestation vector: one change, one refusal.
@Suite("App Attest attestation: real bytes, one change")
struct AppAttestRealBytesTests {
    let vector = AppAttestVector.all[0]

    /// The vector's object with its top-level map changed; the rest re-encodes byte for byte.
    func rebuilt(_ change: (inout [CBORPair]) -> Void) throws -> [UInt8] {
        var pairs = try #require(try CBORDecoder.decode(vector.attestationObject).mapValue)
        change(&pairs)
        return CBOREncoder.encode(.map(pairs))
    }

    func replacing(_ key: String, _ transform: (CBORValue) -> CBORValue) throws -> [UInt8] {
        try rebuilt { pairs in pairs = pairs.map { $0.key == .text(key) ? CBORPair($0.key, transform($0.value)) : $0 } }
    }

    var authData: [UInt8] { get throws { try #require(try CBORDecoder.decode(vector.attestationObject)[text: "authData"]?.bytesValue) } }

    @Test("The object re-encodes to the same bytes, so a rebuilt object differs only where changed")
    func roundTrip() throws {
        #expect(try rebuilt { _ in } == vector.attestationObject)
        #expect(reason { try vector.verify(object: try rebuilt { _ in }) } == "")
    }

    @Test("Steps 2–4: another clientDataHash (challenge) → the nonce differs")
    func wrongClientDataHash() {
        #expect(reason { try vector.verify(clientDataHash: Digest.sha256(Array("another challenge".utf8))) }.contains("step 4"))
        // Any length is taken as given (Apple's clientDataHash is any Data): a shorter one is another value.
        #expect(reason { try vector.verify(clientDataHash: Array(vector.clientDataHash.dropLast())) }.contains("step 4"))
        #expect(reason { try vector.verify(clientDataHash: []) }.contains("step 4"))
    }

    @Test("Step 5: another key id")
    func wrongKeyId() {
        var other = vector.keyId
        other[0] ^= 1
        #expect(reason { try vector.verify(keyId: other) }.contains("step 5"))
        #expect(reason { try vector.verify(keyId: AppAttestVector.all[1].keyId) }.contains("step 5"))
        #expect(reason { try vector.verify(keyId: Array(vector.keyId.prefix(16))) }.contains("32 bytes"))
    }

    @Test("Step 6: an undeclared app, or none declared")
    func wrongApp() {
        var policy = vector.policy
        policy.iosApps = ["6MURL8TA57.de.vincent-haupert.other", "ABCDE12345.de.vincent-haupert.apple-appattest-poc"]
        #expect(reason { try vector.verify(policy) }.contains("step 6"))
        policy.iosApps = []
        #expect(reason { try vector.verify(policy) }.contains("no iOS app"))
        // Among several declared apps, the matching one is named.
        policy.iosApps = ["6MURL8TA57.de.other"] + vector.iosApps
        #expect((try? vector.verify(policy))?.app == vector.iosApps[0])
    }

    @Test("Step 8: a development key (appattestdevelop) on a production server")
    func developmentKeyInProduction() {
        var policy = vector.policy
        policy.appAttestDevelopment = false
        #expect(reason { try vector.verify(policy) }.contains("step 8"))
    }

    @Test("Step 1: verified before credCert's notBefore or after its notAfter")
    func outsideValidity() throws {
        let x5c = try #require(try CBORDecoder.decode(vector.attestationObject)[text: "attStmt"]?[text: "x5c"]?.arrayValue)
        let credCert = try Certificate(der: try #require(x5c[0].bytesValue))
        #expect(credCert.notBefore <= vector.at && vector.at <= credCert.notAfter)
        for time in [credCert.notBefore - 1, credCert.notAfter + 1, 0, Int64(4_102_444_800)] {
            var policy = vector.policy
            policy.now = time
            #expect(reason { try vector.verify(policy) }.contains("step 1"), "at \(time)")
        }
        var policy = vector.policy
        policy.now = credCert.notBefore
        #expect(reason { try vector.verify(policy) } == "")
    }

    @Test("Step 1: no trust anchors, or anchors that are not Apple's")
    func wrongAnchors() throws {
        var policy = vector.policy
        policy.trustAnchors = []
        #expect(reason { try vector.verify(policy) }.contains("step 1"))
        policy.trustAnchors = [try Certificate(der: AppAttestBuilder.root)]
        #expect(reason { try vector.verify(policy) }.contains("step 1"))
    }

    @Test("Tampered authData anywhere → the nonce no longer matches")
    func tamperedAuthData() throws {
        let original = try authData
        // rpIdHash, flags, counter, AAGUID, credentialId length and bytes, COSE key.
        for index in [0, 31, 32, 33, 36, 37, 52, 54, 55, 86, 87, original.count - 1] {
            var bytes = original
            bytes[index] ^= 0x01
            let object = try replacing("authData") { _ in .bytes(bytes) }
            #expect(!reason { try vector.verify(object: object) }.isEmpty, "authData[\(index)]")
        }
        let truncated = try replacing("authData") { _ in .bytes(Array(original.prefix(36))) }
        #expect(reason { try vector.verify(object: truncated) }.contains("shorter than 37"))
        let longer = try replacing("authData") { _ in .bytes(original + [0]) }
        #expect(reason { try vector.verify(object: longer) }.contains("after the credential public key"))
    }

    @Test("Truncated CBOR, at every length, and trailing bytes → attestation_invalid")
    func truncated() {
        let object = vector.attestationObject
        for length in 0..<object.count {
            #expect(reason { try vector.verify(object: Array(object.prefix(length))) } != "", "prefix \(length)")
        }
        #expect(reason { try vector.verify(object: object + [0x00]) }.contains("CBOR"))
    }

    @Test("A flipped bit anywhere is refused, except inside the receipt (which Apple's steps do not verify)")
    func flippedBits() throws {
        let object = vector.attestationObject
        let receipt = try #require(try CBORDecoder.decode(object)[text: "attStmt"]?[text: "receipt"]?.bytesValue)
        let receiptStart = try #require(object.firstRange(of: receipt)).lowerBound
        let receiptRange = receiptStart..<(receiptStart + receipt.count)
        var accepted = 0
        // Every third byte (a full sweep costs ~25 s in a debug build); offsets 0, 1, 2 all land in each region.
        for index in stride(from: 0, to: object.count, by: 3) {
            var bytes = object
            bytes[index] ^= 0x04
            if reason({ try vector.verify(object: bytes) }).isEmpty {
                accepted += 1
                #expect(receiptRange.contains(index), "a flip at byte \(index) outside the receipt was accepted")
            }
        }
        #expect(accepted <= receipt.count)
    }

    @Test("Structure: fmt, keys, x5c and receipt shapes")
    func structure() throws {
        let bad: [(String, [UInt8])] = [
            ("fmt apple", try replacing("fmt") { _ in .text("apple") }),
            ("fmt not text", try replacing("fmt") { _ in .bytes([1]) }),
            ("extra key", try rebuilt { $0.append(CBORPair(.text("extra"), .null)) }),
            ("missing authData", try rebuilt { $0.removeAll { $0.key == .text("authData") } }),
            ("authData not bytes", try replacing("authData") { _ in .text("x") }),
            ("attStmt not a map", try replacing("attStmt") { _ in .array([]) }),
            ("one certificate", try replacing("attStmt") { s in
                .map([CBORPair(.text("x5c"), .array(Array(s[text: "x5c"]!.arrayValue!.prefix(1)))),
                      CBORPair(.text("receipt"), s[text: "receipt"]!)]) }),
            ("certificate not bytes", try replacing("attStmt") { s in
                .map([CBORPair(.text("x5c"), .array([.text("leaf"), s[text: "x5c"]!.arrayValue![1]])),
                      CBORPair(.text("receipt"), s[text: "receipt"]!)]) }),
            ("certificate garbage", try replacing("attStmt") { s in
                .map([CBORPair(.text("x5c"), .array([.bytes([0x30, 0x03, 1, 2, 3]), s[text: "x5c"]!.arrayValue![1]])),
                      CBORPair(.text("receipt"), s[text: "receipt"]!)]) }),
            ("no receipt", try replacing("attStmt") { s in .map([CBORPair(.text("x5c"), s[text: "x5c"]!)]) }),
            ("swapped certificates", try replacing("attStmt") { s in
                .map([CBORPair(.text("x5c"), .array(s[text: "x5c"]!.arrayValue!.reversed())), CBORPair(.text("receipt"), s[text: "receipt"]!)]) }),
            ("not a map", CBOREncoder.encode(.array([]))),
            ("garbage", [0xFF, 0x00, 0x13]),
        ]
        for (label, bytes) in bad {
            #expect(reason { try vector.verify(object: bytes) } != "", "\(label)")
        }
    }

    @Test("The trace names every step, and the failing one")
    func trace() throws {
        let ok = AttestationTrace()
        _ = try vector.verify(trace: ok)
        let names = ok.checks.map(\.check)
        for step in ["step1.chain", "step4.nonce", "step5.keyId", "step6.rpIdHash", "step7.counter", "step8.aaguid", "step9.credentialId"] {
            #expect(names.contains("appattest.\(step)"))
        }
        #expect(ok.json["decoded"]?["app"]?.stringValue == vector.iosApps[0])
        let failed = AttestationTrace()
        var policy = vector.policy
        policy.appAttestDevelopment = false
        #expect(throws: refused) { try vector.verify(policy, trace: failed) }
        #expect(failed.checks.last?.check == "appattest.step8.aaguid" && failed.checks.last?.ok == false)
    }
}

/// Steps the real vectors cannot reach past the nonce: App Attest objects built under a test root.
@Suite("App Attest attestation: built objects")
struct AppAttestBuiltTests {
    @Test("A production object verifies on a production server")
    func production() throws {
        let builder = AppAttestBuilder()
        let key = try builder.verify()
        #expect(key.app == builder.appId && key.appAttestKeyId == builder.keyId && key.counter == 0)
        #expect(key.publicKey.x963 == builder.credentialKey.publicKey.x963Point)
        #expect(key.decoded["environment"]?.stringValue == "production")
    }

    @Test("clientDataHash is the app's bytes, of any length (a published sample uses 24), not only a SHA-256",
          arguments: [0, 1, 24, 31, 33, 64, 1000])
    func clientDataHashOfAnyLength(_ length: Int) throws {
        var builder = AppAttestBuilder()
        builder.clientDataHash = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        #expect(reason { try builder.verify() } == "")
        let other = builder.clientDataHash + [0]
        #expect(reason { try AppAttestVerifier.verifyAttestation(keyId: builder.keyId, attestationObject: builder.object(),
                                                                 clientDataHash: other, policy: builder.policy()) }.contains("step 4"))
    }

    @Test("Step 8: a production AAGUID on a development server, and a development one on it")
    func environments() throws {
        var builder = AppAttestBuilder()
        #expect(reason { try builder.verify(development: true) }.contains("step 8"))
        builder.aaguid = AppAttestBuilder.developmentAAGUID
        #expect(try builder.verify(development: true).decoded["environment"]?.stringValue == "development")
        #expect(reason { try builder.verify(development: false) }.contains("step 8"))
        builder.aaguid = Array("appattest".utf8) + [UInt8](repeating: 1, count: 7)
        #expect(reason { try builder.verify(development: false) }.contains("step 8"))
        #expect(reason { try builder.verify(development: true) }.contains("step 8"))
    }

    @Test("Step 7: a counter other than 0")
    func counter() {
        var builder = AppAttestBuilder()
        builder.counter = 1
        #expect(reason { try builder.verify() }.contains("step 7"))
    }

    @Test("Step 9: a credentialId other than the key id")
    func credentialId() {
        var builder = AppAttestBuilder()
        builder.credentialId = Digest.sha256([1])
        #expect(reason { try builder.verify() }.contains("step 9"))
        builder.credentialId = []
        #expect(reason { try builder.verify() }.contains("step 9"))
    }

    @Test("authData's COSE key must be credCert's key")
    func coseKey() {
        var builder = AppAttestBuilder()
        builder.coseKeyX963 = PrivateKey.generateEC(.p256).publicKey.x963Point
        #expect(reason { try builder.verify() }.contains("credential public key differs"))
    }

    @Test("Step 5: a credCert key that is not P-256")
    func notP256() {
        var builder = AppAttestBuilder()
        builder.credentialKey = PrivateKey.generateEC(.p384)
        builder.coseKeyX963 = PrivateKey.generateEC(.p256).publicKey.x963Point
        #expect(reason { try builder.verify() }.contains("step 5"))
    }

    @Test("Step 4: nonce extension missing, or not SEQUENCE { [1] OCTET STRING (32) }")
    func nonceExtension() {
        var builder = AppAttestBuilder()
        builder.nonce = .missing
        #expect(reason { try builder.verify() }.contains("no nonce extension"))
        let nonce = Digest.sha256(builder.authData + builder.clientDataHash)
        for value in [TestCertificate.tlv(0x04, nonce),                                                     // bare OCTET STRING
                      TestCertificate.seq(TestCertificate.tlv(0x04, nonce)),                                 // no [1]
                      TestCertificate.seq(TestCertificate.tlv(0xA1, TestCertificate.tlv(0x04, Array(nonce.prefix(31))))),
                      TestCertificate.seq(TestCertificate.tlv(0xA1, TestCertificate.tlv(0x04, nonce)), TestCertificate.tlv(0x05, [])),
                      TestCertificate.seq(TestCertificate.tlv(0xA1, TestCertificate.tlv(0x04, nonce))) + [0]] {
            builder.nonce = .extensionValue(value)
            #expect(reason { try builder.verify() }.contains("step 4"))
        }
    }

    @Test("Step 1: a built chain is not trusted under the shipped (Apple) roots")
    func shippedRootsRefuseTestChain() throws {
        let builder = AppAttestBuilder()
        var policy = try builder.policy()
        policy.trustAnchors = DeviceKeyAttestationPolicy.shippedRoots
        #expect(reason {
            try AppAttestVerifier.verifyAttestation(keyId: builder.keyId, attestationObject: builder.object(),
                                                    clientDataHash: builder.clientDataHash, policy: policy)
        }.contains("step 1"))
    }
}

@Suite("App Attest assertion: built")
struct AppAttestAssertionBuiltTests {
    let builder = AppAttestBuilder()
    let clientDataHash = Digest.sha256(Array("step-up challenge".utf8))

    func verify(_ assertion: [UInt8], previous: UInt32, appId: String? = nil) throws -> UInt32 {
        try AppAttestVerifier.verifyAssertion(assertion, publicKey: try DevicePublicKey(bytes: builder.credentialKey.publicKey.spkiDER),
                                              clientDataHash: clientDataHash, appId: appId ?? builder.appId, previousCounter: previous)
    }

    @Test("Step 5: the counter must exceed the stored one")
    func counterRules() throws {
        let a7 = try builder.assertion(counter: 7, clientDataHash: clientDataHash)
        #expect(try verify(a7, previous: 0) == 7)
        #expect(try verify(a7, previous: 6) == 7)
        #expect(reason { try verify(a7, previous: 7) }.contains("step 5"))
        #expect(reason { try verify(a7, previous: 8) }.contains("step 5"))
        let a0 = try builder.assertion(counter: 0, clientDataHash: clientDataHash)
        #expect(reason { try verify(a0, previous: 0) }.contains("step 5"))
        let aMax = try builder.assertion(counter: .max, clientDataHash: clientDataHash)
        #expect(try verify(aMax, previous: .max - 1) == .max)
    }

    @Test("Steps 3–4: another challenge, another app, another key")
    func bindings() throws {
        let a = try builder.assertion(counter: 1, clientDataHash: clientDataHash)
        #expect(reason { try verify(try builder.assertion(counter: 1, clientDataHash: Digest.sha256([0])), previous: 0) }.contains("step 3"))
        #expect(reason { try verify(a, previous: 0, appId: "ABCDE12345.com.example.other") }.contains("step 4"))
        var other = AppAttestBuilder()
        other.credentialKey = PrivateKey.generateEC(.p256)
        #expect(reason { try verify(try other.assertion(counter: 1, clientDataHash: clientDataHash), previous: 0) }.contains("step 3"))
    }

    @Test("Shapes: authenticatorData length, raw r||s signature, keys, truncation")
    func shapes() throws {
        let header = Digest.sha256(Array(builder.appId.utf8)) + [0x40, 0, 0, 0, 1]
        #expect(reason { try verify(try builder.assertion(counter: 1, clientDataHash: clientDataHash, authenticatorData: header + [0]), previous: 0) }
            .contains("37 bytes"))
        #expect(reason { try verify(try builder.assertion(counter: 1, clientDataHash: clientDataHash, authenticatorData: Array(header.prefix(36))), previous: 0) }
            .contains("shorter than 37"))
        let raw = try builder.assertion(counter: 1, clientDataHash: clientDataHash) {
            (try? ECDSASignature.rawFromDER($0, coordinateLength: 32)) ?? []
        }
        #expect(reason { try verify(raw, previous: 0) }.contains("raw r||s"))
        let good = try builder.assertion(counter: 1, clientDataHash: clientDataHash)
        for length in 0..<good.count {
            #expect(reason { try verify(Array(good.prefix(length)), previous: 0) } != "", "prefix \(length)")
        }
        #expect(reason { try verify(good + [0], previous: 0) }.contains("CBOR"))
        let extra = CBOREncoder.encode(.map((try CBORDecoder.decode(good).mapValue ?? []) + [CBORPair(.text("x"), .null)]))
        #expect(reason { try verify(extra, previous: 0) }.contains("exactly"))
    }
}
