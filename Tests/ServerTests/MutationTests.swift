import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC: "No input a client can send yields a 5xx or a crash." 500 seeded mutations of valid
/// registration and assertion bodies (each on fresh options, so the challenge is live and the
/// mutation reaches the later checks) must all be refused with a 4xx problem+json.
///
/// Every mutation is one the server must refuse: the bodies carry only required members, and the
/// binary fields are covered by a signature (assertions; packed self attestation for registrations).
@Suite("Seeded mutations")
struct MutationTests {
    static let fixture = Result { try TestServer(name: "mutation") }
    static let seed: UInt64 = 0x1A7C_4B0E_5EED_2024
    static let count = 500

    enum Ceremony { case registration, authentication }

    /// The members a mutation may touch (only required ones, so any change breaks the body).
    static func essential(_ body: JSONValue, ceremony: Ceremony) -> JSONValue {
        let response = body["response"] ?? .object([])
        let keep = ceremony == .registration ? ["clientDataJSON", "attestationObject"] : ["clientDataJSON", "authenticatorData", "signature"]
        let trimmed = JSONValue.object(keep.compactMap { k in response[k].map { (k, $0) } })
        // id and rawId must agree, so changing either one alone is refused too.
        return .object([("id", body["id"] ?? .null), ("rawId", body["rawId"] ?? .null), ("type", "public-key"), ("response", trimmed)])
    }

    @Test("500 seeded mutations → only 4xx problem+json, and the server still answers")
    func mutations() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        var rng = SplitMix64(seed: Self.seed)
        let loginAuthenticator = SoftAuthenticator(algorithm: .es256)
        _ = try client.signUp(loginAuthenticator, username: server.username("mut"))

        var failures: [String] = []
        var codes: [String: Int] = [:]
        for i in 0..<Self.count {
            let ceremony: Ceremony = i % 2 == 0 ? .registration : .authentication
            let valid: JSONValue
            let path: String
            switch ceremony {
            case .registration:
                let options = try #require(try client.registrationOptions(username: server.username("mut")).json)
                var builder = SoftAuthenticator(algorithm: .es256).registration(challenge: try challengeBytes(options),
                                                                                rpId: server.rpId, origin: server.origin)
                builder.format = .packedSelf
                valid = Self.essential(builder.json(), ceremony: ceremony)
                path = "/v1/passkeys/registration/verify"
            case .authentication:
                let options = try #require(try client.authenticationOptions().json)
                valid = Self.essential(try client.assertion(loginAuthenticator, options: options).json(), ceremony: ceremony)
                path = "/v1/passkeys/authentication/verify"
            }
            let (name, body) = Mutator.mutate(valid, ceremony: ceremony, using: &rng)
            let reply: Reply
            do {
                reply = try client.send("POST", path, body: body)
            } catch {
                failures.append("#\(i) \(name): transport error \(error)")
                client.http.close()
                continue
            }
            codes[reply.code ?? "none", default: 0] += 1
            if !(400...499).contains(reply.status) || !reply.isProblem || reply.code == nil {
                failures.append("#\(i) \(ceremony) \(name): \(reply)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) mutations not refused with 4xx problem+json:\n\(failures.prefix(20).joined(separator: "\n"))")
        // The mutations reach past parsing: several distinct codes come back.
        #expect(codes.keys.count >= 4, "\(codes)")
        #expect(try server.client().get("/healthz").status == 200)
        // And a valid login still works afterwards.
        #expect(try client.login(loginAuthenticator).reply.status == 200)
    }

    @Test("the mutator is deterministic for a seed")
    func deterministic() {
        let body = JSONValue.object([("id", "AAAA"), ("rawId", "AAAA"), ("type", "public-key"),
                                     ("response", .object([("clientDataJSON", "eyJ9"), ("signature", "AQID")]))])
        var a = SplitMix64(seed: 7), b = SplitMix64(seed: 7)
        for _ in 0..<50 {
            let x = Mutator.mutate(body, ceremony: .authentication, using: &a), y = Mutator.mutate(body, ceremony: .authentication, using: &b)
            #expect(x.name == y.name && x.body == y.body)
        }
    }
}

/// Mutations of a credential JSON body; each returns a name (for the failure message) and the bytes to send.
enum Mutator {
    static func mutate(_ valid: JSONValue, ceremony: MutationTests.Ceremony, using rng: inout SplitMix64)
        -> (name: String, body: [UInt8]) {
        let binaryFields = ceremony == .registration ? ["clientDataJSON", "attestationObject"]
                                                     : ["clientDataJSON", "authenticatorData", "signature"]
        let field = binaryFields.randomElement(using: &rng)!
        let decoded = valid["response"]?[field]?.stringValue.flatMap(Base64URL.decode) ?? []
        let bytes = decoded.isEmpty ? [0] : decoded
        func withField(_ b: [UInt8]) -> [UInt8] { valid.settingResponse(field, .string(Base64URL.encode(b))).serialized() }
        let serialized = valid.serialized()

        switch Int.random(in: 0..<14, using: &rng) {
        case 0:  // flip one bit of one byte of a binary field
            var b = bytes
            let at = Int.random(in: 0..<b.count, using: &rng), bit = UInt8(1) << UInt8.random(in: 0...7, using: &rng)
            b[at] ^= bit
            return ("flip \(field)[\(at)] ^ \(bit)", withField(b))
        case 1:  // truncate a binary field
            let n = Int.random(in: 0..<bytes.count, using: &rng)
            return ("truncate \(field) to \(n)", withField(Array(bytes.prefix(n))))
        case 2:  // append bytes to a binary field
            let extra = (0..<Int.random(in: 1...8, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            return ("append \(extra.count) to \(field)", withField(bytes + extra))
        case 3:  // replace a binary field by random bytes of the same length
            return ("randomise \(field)", withField((0..<bytes.count).map { _ in UInt8.random(in: 0...255, using: &rng) }))
        case 4:  // a binary field that is not base64url, or not a string
            let junk: [JSONValue] = ["!!!", "a+b/", "====", "", .number(42), .null, true, .array([]), .object([]), "\u{0}\u{1F600}"]
            let j = junk.randomElement(using: &rng)!
            return ("\(field) = \(j.text)", valid.settingResponse(field, j).serialized())
        case 5:  // a required member removed
            let members = ["id", "type", "response"] + binaryFields
            let m = members.randomElement(using: &rng)!
            let out = ["id", "type", "response"].contains(m) ? valid.setting(m, nil) : valid.settingResponse(m, nil)
            return ("remove \(m)", out.serialized())
        case 6:  // type is not public-key
            let t: JSONValue = ["public-keys", "", .number(1), .null, "PUBLIC-KEY"].randomElement(using: &rng)!
            return ("type = \(t.text)", valid.setting("type", t).serialized())
        case 7:  // id and rawId of another credential (consistently)
            let other = Base64URL.encode((0..<Int.random(in: 1...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            return ("id = rawId = \(other)", valid.setting("id", .string(other)).setting("rawId", .string(other)).serialized())
        case 8:  // rawId that does not match id
            let other = Base64URL.encode([UInt8.random(in: 0...255, using: &rng)] + [1, 2, 3])
            return ("rawId ≠ id", valid.setting("rawId", .string(other)).serialized())
        case 9:  // clientDataJSON re-made with one member changed
            guard let clientData = valid["response"]?["clientDataJSON"]?.stringValue.flatMap(Base64URL.decode),
                  let parsed = try? JSONParser.parse(clientData) else { return ("no clientData", serialized) }
            let choices: [(String, JSONValue?)] = [
                ("type", ceremony == .registration ? "webauthn.get" : "webauthn.create"), ("type", nil), ("type", .number(1)),
                ("origin", "https://evil.example"), ("origin", nil), ("origin", "http://localhost"),
                ("challenge", .string(Base64URL.encode((0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }))),
                ("challenge", nil), ("challenge", "not base64!"), ("crossOrigin", true), ("topOrigin", "https://evil.example"),
            ]
            let (key, value) = choices.randomElement(using: &rng)!
            let changed = parsed.setting(key, value).serialized()
            return ("clientData.\(key) = \(value?.text ?? "removed")",
                    valid.settingResponse("clientDataJSON", .string(Base64URL.encode(changed))).serialized())
        case 10:  // the whole body truncated
            let n = Int.random(in: 0..<serialized.count, using: &rng)
            return ("body truncated to \(n)", Array(serialized.prefix(n)))
        case 11:  // a byte of the body replaced by a non-whitespace byte (possibly invalid UTF-8)
            var b = serialized
            let at = Int.random(in: 0..<b.count, using: &rng)
            var v = UInt8.random(in: 0...255, using: &rng)
            while v == b[at] || [0x20, 0x09, 0x0A, 0x0D].contains(v) { v = UInt8.random(in: 0...255, using: &rng) }
            // Only where it cannot land in base64url padding bits: not in the last character of a string.
            if at + 1 < b.count, b[at + 1] == UInt8(ascii: "\"") { b[at] = UInt8(ascii: "\"") } else { b[at] = v }
            return ("body[\(at)] = \(b[at])", b)
        case 12:  // not an object at all
            let others: [[UInt8]] = [Array("[]".utf8), Array("null".utf8), Array("\"x\"".utf8), Array("[".utf8) + serialized + Array("]".utf8),
                                     Array(repeating: UInt8(ascii: "["), count: 5000), (0..<64).map { _ in UInt8.random(in: 0...255, using: &rng) }]
            let o = others.randomElement(using: &rng)!
            return ("not an object (\(o.count) bytes)", o)
        default:  // response of the wrong shape
            let r: JSONValue = [.array([]), "x", .null, .number(0), .object([])].randomElement(using: &rng)!
            return ("response = \(r.text)", valid.setting("response", r).serialized())
        }
    }
}
