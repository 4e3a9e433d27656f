#if canImport(WebAuthnTesting)
import Crypto
import Foundation
import JSON
import LatchkeyClient
import Testing
import WebAuthn
import WebAuthnTesting

/// docs/integration/android.md shows the JSON body of every request its Kotlin code sends, each
/// after a `<!-- latchkey-body: NAME METHOD PATH -->` marker. This test takes those bodies out of the
/// markdown, fills their `"<placeholder>"` strings with live values, and posts them — as the Android
/// app would, from an `android:apk-key-hash:` origin — to a real server, in the guide's order. A body
/// that drifts from the contract (a renamed member, a wrong nesting) fails here. It also checks that
/// the Kotlin code puts every member the bodies show.
@Suite("The Android guide's request bodies against a live server")
struct AndroidGuideTests {
    static let guide = LiveServer.repositoryRoot.appendingPathComponent("docs/integration/android.md")

    struct Body {
        let name: String
        let method: String
        let path: String
        let json: LatchkeyJSON
    }

    static func bodies(_ markdown: String) throws -> [String: Body] {
        var out: [String: Body] = [:]
        let lines = markdown.components(separatedBy: "\n")
        var i = 0
        while i < lines.count {
            let line = lines[i].trimmingCharacters(in: .whitespaces)
            i += 1
            guard line.hasPrefix("<!-- latchkey-body:"), line.hasSuffix("-->") else { continue }
            let words = line.dropFirst("<!-- latchkey-body:".count).dropLast(3).split(separator: " ").map(String.init)
            guard words.count == 3 else { throw SetupError("bad marker: \(line)") }
            guard i < lines.count, lines[i].trimmingCharacters(in: .whitespaces) == "```json" else { throw SetupError("no ```json after \(line)") }
            i += 1
            var text: [String] = []
            while i < lines.count, lines[i].trimmingCharacters(in: .whitespaces) != "```" { text.append(lines[i]); i += 1 }
            i += 1
            out[words[0]] = Body(name: words[0], method: words[1], path: words[2], json: try LatchkeyJSON(parsing: text.joined(separator: "\n")))
        }
        return out
    }

    /// `"<name>"` strings replaced by `values[name]`; any other placeholder is a test failure.
    static func fill(_ v: LatchkeyJSON, _ values: [String: LatchkeyJSON]) throws -> LatchkeyJSON {
        switch v {
        case .string(let s) where s.hasPrefix("<") && s.hasSuffix(">"):
            guard let value = values[String(s.dropFirst().dropLast())] else { throw SetupError("no value for placeholder \(s)") }
            return value
        case .array(let a): return .array(try a.map { try fill($0, values) })
        case .object(let o): return .object(try o.map { ($0.key, try fill($0.value, values)) })
        default: return v
        }
    }

    static let expected: [(name: String, method: String, path: String)] = [
        ("registration-options", "POST", "/v1/passkeys/registration/options"),
        ("registration-verify", "POST", "/v1/passkeys/registration/verify"),
        ("authentication-options", "POST", "/v1/passkeys/authentication/options"),
        ("authentication-verify", "POST", "/v1/passkeys/authentication/verify"),
        ("passkey-step-up-challenge", "POST", "/v1/step-up/challenges"),
        ("passkey-step-up-verify", "POST", "/v1/step-up/verify"),
        ("device-key-challenge", "POST", "/v1/device-keys/challenges"),
        ("device-key-enrolment", "POST", "/v1/device-keys"),
        ("device-key-step-up-challenge", "POST", "/v1/step-up/challenges"),
        ("device-key-step-up-verify", "POST", "/v1/step-up/verify"),
        ("step-up-consume", "POST", "/v1/step-up/consume"),
    ]

    @Test("every body is there, and the Kotlin code puts every member it shows")
    func bodiesMatchTheKotlin() throws {
        let markdown = try String(contentsOf: Self.guide, encoding: .utf8)
        let bodies = try Self.bodies(markdown)
        #expect(Set(bodies.keys) == Set(Self.expected.map(\.name)))
        for e in Self.expected {
            let b = try #require(bodies[e.name])
            #expect(b.method == e.method && b.path == e.path, "\(e.name)")
            let called = markdown.contains("\"\(e.path)\"")
            #expect(called, "the Kotlin code never calls \(e.path)")
        }
        // Members the Kotlin code builds with JSONObject().put("…"): every member of our own bodies
        // (not the two Credential Manager produces, posted verbatim).
        let kotlin = markdown.components(separatedBy: "```kotlin").dropFirst().map { $0.components(separatedBy: "```")[0] }.joined()
        for name in Self.expected.map(\.name) where !name.hasSuffix("-verify") || name.contains("step-up") {
            guard case .object(let members)? = bodies[name]?.json else { continue }
            for m in members {
                let put = kotlin.contains(".put(\"\(m.key)\"")
                #expect(put, "\(name): the Kotlin code does not put \"\(m.key)\"")
            }
        }
    }

    @Test("the guide's bodies, posted in order from an Android origin")
    func bodiesAgainstTheServer() async throws {
        let bodies = try Self.bodies(try String(contentsOf: Self.guide, encoding: .utf8))
        let apkKeyHash = "android:apk-key-hash:" + Crypto.Base64URL.encode(Digest.sha256(Array("test signing certificate".utf8)))
        try await withLiveServer("client-android") { server in
            let http = URLSessionTransport()
            func post(_ name: String, _ values: [String: LatchkeyJSON], bearer: String? = nil, headers: [(String, String)] = [],
                      filled: LatchkeyJSON? = nil, change: (LatchkeyJSON) -> LatchkeyJSON = { $0 }) async throws -> (Int, LatchkeyJSON) {
                let b = try #require(bodies[name])
                let json = change(try filled ?? Self.fill(b.json, values))
                var h: [(name: String, value: String)] = [("Content-Type", "application/json")]
                if let bearer { h.append(("Authorization", "Bearer \(bearer)")) }
                h += headers.map { (name: $0.0, value: $0.1) }
                let r = try await http.send(HTTPRequest(method: b.method, path: b.path, headers: h, body: Data(json.serialized())), baseURL: server.baseURL)
                let answer = (try? LatchkeyJSON(parsing: r.body)) ?? .null
                return (r.status, answer)
            }
            func text(_ j: JSONValue?) -> LatchkeyJSON { .string(j?.stringValue ?? "") }

            // The server allowlists the app's origin as an admin would (latchkey origins add / admin API).
            let added = try await http.send(HTTPRequest(method: "POST", path: "/admin/v1/origins",
                                                        headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(server.adminKey)")],
                                                        body: Data(#"{"origin":"\#(apkKeyHash)"}"#.utf8)), baseURL: server.baseURL)
            #expect(added.status == 201 || added.status == 200, "\(String(decoding: added.body, as: UTF8.self))")

            let authenticator = SoftAuthenticator(algorithm: .es256)
            let username = "android-\(UInt32.random(in: 0...UInt32.max))"
            let (s1, options) = try await post("registration-options", ["username": .string(username)])
            #expect(s1 == 200, "\(options)")
            let creation = try RegistrationOptions(json: options)
            authenticator.userHandle = [UInt8](creation.userID)
            let registration = authenticator.registration(challenge: [UInt8](creation.challenge), rpId: creation.rpId, origin: apkKeyHash).json()
            let (s2, registered) = try await post("registration-verify", [
                "credentialId": text(registration["id"]), "clientDataJSON": text(registration["response"]?["clientDataJSON"]),
                "attestationObject": text(registration["response"]?["attestationObject"]),
            ])
            #expect(s2 == 201, "\(registered)")

            // Credential Manager's authenticationResponseJson, in the guide's shape.
            func assertion(_ options: LatchkeyJSON) throws -> LatchkeyJSON {
                let request = try AuthenticationOptions(json: options)
                let a = authenticator.assertion(challenge: [UInt8](request.challenge), rpId: request.rpId, origin: apkKeyHash).json()
                let r = a["response"]
                return try Self.fill(bodies["authentication-verify"]!.json, [
                    "credentialId": text(a["id"]), "clientDataJSON": text(r?["clientDataJSON"]), "authenticatorData": text(r?["authenticatorData"]),
                    "signature": text(r?["signature"]), "userHandle": text(r?["userHandle"]),
                ])
            }
            let (s3, request) = try await post("authentication-options", ["username": .string(username)])
            #expect(s3 == 200, "\(request)")
            let (s4, signedIn) = try await post("authentication-verify", [:], filled: try assertion(request))
            #expect(s4 == 200, "\(signedIn)")
            let access = try #require(signedIn["tokens"]?["access_token"]?.stringValue)

            // Passkey step-up for the enrolment of this device.
            let deviceId = "pixel-\(UInt32.random(in: 0...UInt32.max))"
            func enrolmentStepUp() async throws -> String {
                let (s5, challenge) = try await post("passkey-step-up-challenge", ["deviceId": .string(deviceId)], bearer: access)
                #expect(s5 == 201, "\(challenge)")
                #expect(challenge["actionHash"]?.stringValue == (try StepUpAction.deviceKeyEnrolment(deviceId: deviceId)).hashBase64URL)
                let (s6, token) = try await post("passkey-step-up-verify", [
                    "challengeId": challenge["challengeId"] ?? .null, "authenticationResponseJson": try assertion(try #require(challenge["publicKey"])),
                ], bearer: access)
                #expect(s6 == 200, "\(token)")
                return try #require(token["access_token"]?.stringValue)
            }

            // The Keystore key: SPKI DER public key (Android's `publicKey.encoded`), DER ECDSA-SHA256.
            let key = PrivateKey.generateEC(.p256)
            func sign(_ challenge: LatchkeyJSON?) throws -> LatchkeyJSON {
                let bytes = try #require(Crypto.Base64URL.decode(challenge?.stringValue ?? ""))
                return .string(Crypto.Base64URL.encode(try key.sign(bytes, algorithm: .ecdsa(.sha256))))
            }
            func enrolmentValues() async throws -> [String: LatchkeyJSON] {
                let (s7, challenge) = try await post("device-key-challenge", [:], bearer: access)
                #expect(s7 == 201, "\(challenge)")
                // A real Android Key Attestation chain (from the shared vectors): for another key and
                // challenge, so the server must parse it and refuse it as attestation_invalid.
                let vectors = try JSONParser.parse([UInt8](Data(contentsOf: LiveServer.repositoryRoot
                    .appendingPathComponent("Tests/DeviceKeysTests/Fixtures/device-keys/android.json"))))
                let chain = try #require(vectors.arrayValue?.first { $0["name"]?.stringValue == "ak-akita-sdk34-tee_ec_none" }?["input"]?["attestation"]?.arrayValue)
                return [
                    "deviceId": .string(deviceId), "publicKey": .string(Crypto.Base64URL.encode(key.publicKey.spkiDER)),
                    "challengeId": challenge["challengeId"] ?? .null, "signature": try sign(challenge["challenge"]),
                    "leafCertificate": text(chain[0]), "intermediateCertificate": text(chain[1]), "rootCertificate": text(chain[2]),
                ]
            }
            // With the chain of another key: the body is understood, the attestation refused.
            let (s8, refused) = try await post("device-key-enrolment", try await enrolmentValues(), bearer: access,
                                               headers: [("Latchkey-Step-Up", try await enrolmentStepUp())])
            #expect(s8 == 400 && refused["code"]?.stringValue == "attestation_invalid", "\(refused)")
            // Without `attestation` (an emulator; optional by default): enrolled, not attested.
            let (s9, enrolled) = try await post("device-key-enrolment", try await enrolmentValues(), bearer: access,
                                                headers: [("Latchkey-Step-Up", try await enrolmentStepUp())],
                                                change: { body in
                                                    guard case .object(let m) = body else { return body }
                                                    return .object(m.filter { $0.key != "attestation" })
                                                })
            #expect(s9 == 201, "\(enrolled)")
            #expect(enrolled["platform"]?.stringValue == "android")
            #expect(enrolled["attested"]?.boolValue == false)
            let keyId = try #require(enrolled["id"]?.stringValue)

            // Device-key step-up for the guide's payment, and the backend's consume.
            let (s10, challenge) = try await post("device-key-step-up-challenge", ["keyId": .string(keyId)], bearer: access)
            #expect(s10 == 201, "\(challenge)")
            let payment = try StepUpAction(try #require(try Self.fill(bodies["device-key-step-up-challenge"]!.json, ["keyId": .string(keyId)])["action"]))
            #expect(challenge["actionHash"]?.stringValue == payment.hashBase64URL)
            let (s11, token) = try await post("device-key-step-up-verify", [
                "challengeId": challenge["challengeId"] ?? .null, "signature": try sign(challenge["challenge"]),
            ], bearer: access)
            #expect(s11 == 200, "\(token)")
            let stepUpToken = try #require(token["access_token"]?.stringValue)
            let (s12, consumed) = try await post("step-up-consume", ["actionHash": .string(payment.hashBase64URL)], bearer: stepUpToken)
            #expect(s12 == 200, "\(consumed)")
        }
    }
}
#endif
