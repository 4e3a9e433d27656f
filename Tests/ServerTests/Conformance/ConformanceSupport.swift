import CBOR
import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQLTesting
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

// The project's own black-box run of the FIDO Alliance's public FIDO2 server test items, written
// from the items' published descriptions (no code of the conformance tools'). Every item is one
// test case named by its id; each outcome goes to LATCHKEY_CONFORMANCE_REPORT (JSON lines), and
// scripts/conformance-tally.py prints the tally per item group after the run.

/// One conformance item: its group (e.g. Server-ServerAuthenticatorAttestationResponse-Resp-1), its
/// id within the group (P-n must succeed, F-n must fail) and what it does.
struct ConformanceItem: Sendable, CustomTestStringConvertible {
    let group: String
    let id: String
    let text: String
    let run: @Sendable (ConformanceRun) throws -> [String]

    var testDescription: String { "\(group) \(id) \(text)" }
}

/// Builds a group's items: `P("P-1", "…") { run in … }`.
struct ItemGroup {
    let group: String
    var items: [ConformanceItem] = []
    init(_ group: String) { self.group = group }

    mutating func P(_ id: String, _ text: String, _ run: @escaping @Sendable (ConformanceRun) throws -> [String]) {
        items.append(ConformanceItem(group: group, id: id, text: text, run: run))
    }
    /// An F item whose whole check is "the server answers with FIDO's failure envelope".
    mutating func F(_ id: String, _ text: String, _ run: @escaping @Sendable (ConformanceRun) throws -> Reply) {
        items.append(ConformanceItem(group: group, id: id, text: text) { r in failed(try run(r)) })
    }
}

/// Runs one item, records the outcome for the tally, and fails the test case with its problems.
func check(_ item: ConformanceItem) {
    var problems: [String]
    do {
        let run = try ConformanceRun(fixture: ConformanceFixture.shared.get())
        problems = try item.run(run)
    } catch {
        problems = ["threw: \(error)"]
    }
    ConformanceReport.record(item, outcome: problems.isEmpty ? "pass" : "fail", detail: problems.joined(separator: "; "))
    #expect(problems.isEmpty, "\(item.testDescription): \(problems.joined(separator: "; "))")
}

/// FIDO's success envelope: 200, `"status":"ok"`, `"errorMessage":""`.
func succeeded(_ reply: Reply) -> [String] {
    guard reply.status == 200, let json = reply.json else { return ["expected 200 ok, got \(reply)"] }
    var problems: [String] = []
    if json["status"]?.stringValue != "ok" { problems.append("status is not \"ok\": \(reply)") }
    if json["errorMessage"]?.stringValue != "" { problems.append("errorMessage is not an empty string") }
    return problems
}

/// FIDO's failure envelope: a 4xx, application/json, `"status":"failed"`, a non-empty errorMessage.
func failed(_ reply: Reply) -> [String] {
    guard (400..<500).contains(reply.status) else { return ["expected a 4xx failure, got \(reply)"] }
    var problems: [String] = []
    if reply.contentType?.hasPrefix("application/json") != true { problems.append("Content-Type is \(reply.contentType ?? "none")") }
    if reply.json?["status"]?.stringValue != "failed" { problems.append("status is not \"failed\": \(reply)") }
    if (reply.json?["errorMessage"]?.stringValue ?? "").isEmpty { problems.append("errorMessage is empty") }
    return problems
}

/// Outcomes, one JSON line each, for the tally (only when LATCHKEY_CONFORMANCE_REPORT names a file).
enum ConformanceReport {
    static let lock = Mutex(())

    static func record(_ item: ConformanceItem, outcome: String, detail: String) {
        record(group: item.group, id: item.id, text: item.text, outcome: outcome, detail: detail)
    }

    static func record(group: String, id: String, text: String, outcome: String, detail: String) {
        guard let path = ProcessInfo.processInfo.environment["LATCHKEY_CONFORMANCE_REPORT"], !path.isEmpty else { return }
        let line = JSONValue.object([("group", .string(group)), ("id", .string(id)), ("text", .string(text)),
                                     ("outcome", .string(outcome)), ("detail", .string(String(detail.prefix(400))))]).serialized() + [0x0A]
        lock.withLock { _ in
            if !FileManager.default.fileExists(atPath: path) { FileManager.default.createFile(atPath: path, contents: nil) }
            guard let handle = FileHandle(forWritingAtPath: path) else { return }
            handle.seekToEndOfFile()
            handle.write(Data(line))
            try? handle.close()
        }
    }
}

// MARK: The test PKI, metadata and server

/// Everything the run shares: test roots standing in for vendors, an MDS BLOB the run signs itself
/// (an entry per attested authenticator), and one server with LATCHKEY_CONFORMANCE=1 and that BLOB.
final class ConformanceFixture: Sendable {
    static let shared: Result<ConformanceFixture, any Error> = Result { try ConformanceFixture() }

    static func uuid(_ last: UInt8) -> [UInt8] { [0xc0, 0x2f, 0x1d, 0x0a, 0x51, 0x7e, 0x4c, 0x11, 0x9a, 0x3b, 0, 0, 0, 0, 0x10, last] }
    static let packedAAGUID = uuid(1), tpmAAGUID = uuid(2), androidKeyAAGUID = uuid(3), safetyNetAAGUID = uuid(4)
    static let compromised = ["USER_VERIFICATION_BYPASS", "ATTESTATION_KEY_COMPROMISE", "USER_KEY_REMOTE_COMPROMISE",
                              "USER_KEY_PHYSICAL_COMPROMISE"]
    static func compromisedAAGUID(_ i: Int) -> [UInt8] { uuid(UInt8(0x20 + i)) }

    let mds = TestMetadataService()
    let vendorRoot = TestCertificateAuthority.root("Latchkey Conformance Vendor Root")
    let vendorCA: TestCertificateAuthority
    /// packed full: leaf under the vendor's CA (x5c leaf, CA) and leaf directly under the root (x5c leaf).
    let packedIdentity: AttestationIdentity
    let packedIdentityUnderRoot: AttestationIdentity
    let tpmRoot = TestCertificateAuthority.root("Latchkey Conformance TPM Root", key: .generateRSA(bits: 2048))
    let tpmCA: TestCertificateAuthority
    let androidRoot = TestCertificateAuthority.root("Latchkey Conformance Android Root")
    let androidCA: TestCertificateAuthority
    let safetyNetRoot = TestCertificateAuthority.root("Latchkey Conformance SafetyNet Root")
    let safetyNetIdentity: AttestationIdentity
    let u2fRoot = TestCertificateAuthority.root("Latchkey Conformance U2F Root")
    let u2fIdentity: AttestationIdentity
    let directory: String
    let server: TestServer

    init() throws {
        vendorCA = vendorRoot.intermediate("Latchkey Conformance Vendor Attestation CA")
        packedIdentity = vendorCA.packedAttestation(aaguid: Self.packedAAGUID)
        packedIdentityUnderRoot = vendorRoot.packedAttestation(aaguid: Self.packedAAGUID)
        tpmCA = tpmRoot.intermediate("Latchkey Conformance TPM AIK CA", key: .generateRSA(bits: 2048))
        androidCA = androidRoot.intermediate("Latchkey Conformance Android Batch CA")
        safetyNetIdentity = SafetyNetAttestationBuilder.identity(under: safetyNetRoot.intermediate("Latchkey Conformance SafetyNet CA"))
        u2fIdentity = FIDOU2FAttestationBuilder.identity(under: u2fRoot)
        directory = try Self.folder(mds: mds, blob: mds.blob(MetadataBLOBBuilder(entries: [])))
        server = try TestServer(name: "conformance") { [directory] c in Self.configure(directory)(&c) }
        try Data(mds.blob(MetadataBLOBBuilder(entries: entries))).write(to: URL(fileURLWithPath: directory + "/blob.jwt"))
        guard try server.services.metadata.reload().get().number == 1 else { throw TestSetupError("the conformance BLOB did not load") }
    }

    /// The statements: packed (ES256), tpm (RS256 / RS1 over an RS256 key), android-key and
    /// SafetyNet (ES256), fido-u2f by key identifier, and four models with a compromise status.
    var entries: [TestMetadataEntry] {
        var u2f = TestMetadataEntry(aaguid: nil, description: "Latchkey Conformance U2F Key", roots: [u2fRoot.certificate])
        u2f.attestationCertificateKeyIdentifiers = [attestationKeyIdentifier(u2fIdentity.chain[0])!]
        u2f.protocolFamily = "u2f"
        return [
            TestMetadataEntry(aaguid: Self.packedAAGUID, description: "Latchkey Conformance Packed Key", roots: [vendorRoot.certificate]),
            TestMetadataEntry(aaguid: Self.tpmAAGUID, description: "Latchkey Conformance TPM", roots: [tpmRoot.certificate],
                              algorithms: [.rs256, .rs1], attestationTypes: ["attca"]),
            TestMetadataEntry(aaguid: Self.androidKeyAAGUID, description: "Latchkey Conformance Android Key", roots: [androidRoot.certificate]),
            TestMetadataEntry(aaguid: Self.safetyNetAAGUID, description: "Latchkey Conformance SafetyNet", roots: [safetyNetRoot.certificate]),
            u2f,
        ] + Self.compromised.enumerated().map { i, status in
            TestMetadataEntry(aaguid: Self.compromisedAAGUID(i), description: "Latchkey Conformance \(status)", roots: [vendorRoot.certificate],
                              statusReports: [("FIDO_CERTIFIED_L1", "2020-01-01"), (status, "2021-06-01")])
        }
    }

    /// A folder with root.pem (the MDS root), crls/ and blob.jwt.
    static func folder(mds: TestMetadataService, blob: [UInt8], crls: [CertificateRevocationList] = []) throws -> String {
        let dir = NSTemporaryDirectory() + "latchkey-conformance-\(uniqueSuffix())"
        try FileManager.default.createDirectory(atPath: dir + "/crls", withIntermediateDirectories: true)
        try Data(mds.root.certificate.pem.utf8).write(to: URL(fileURLWithPath: dir + "/root.pem"))
        for (i, crl) in crls.enumerated() { try Data(crl.der).write(to: URL(fileURLWithPath: dir + "/crls/\(i).crl")) }
        try Data(blob).write(to: URL(fileURLWithPath: dir + "/blob.jwt"))
        return dir
    }

    static func configure(_ dir: String) -> (inout Configuration) -> Void {
        { c in
            // SPEC "Assurance": the conformance profile exists in development mode only.
            c.developmentMode = true
            c.conformance = true
            c.mdsBlobPath = dir + "/blob.jwt"
            c.mdsRootPath = dir + "/root.pem"
            c.mdsCRLDirectory = dir + "/crls"
            c.mdsPollSeconds = 0
        }
    }
}

/// One item's connection to a conformance server, and the test API's two ceremonies.
struct ConformanceRun {
    let fixture: ConformanceFixture
    let server: TestServer
    let client: Client

    init(fixture: ConformanceFixture, server: TestServer? = nil) {
        self.fixture = fixture
        self.server = server ?? fixture.server
        client = self.server.client()
    }

    /// The same fixture against another conformance server (the metadata items' BLOBs).
    func on(_ other: TestServer) -> ConformanceRun { ConformanceRun(fixture: fixture, server: other) }

    func username() -> String { server.username("fido") }

    func attestationOptions(_ username: String, _ extra: [(key: String, value: JSONValue)] = []) throws -> Reply {
        var body = JSONValue.object([("username", .string(username)), ("displayName", .string("FIDO \(username)")), ("attestation", "direct")])
        for (key, value) in extra { body = body.setting(key, value) }
        return try client.post("/attestation/options", body)
    }

    /// /attestation/options, then the builder's credential (after `change`, then `edit` on its JSON) to /attestation/result.
    func register(_ authenticator: SoftAuthenticator, _ format: RegistrationFormat = .packedSelf, username: String? = nil,
                  options extra: [(key: String, value: JSONValue)] = [], change: (inout RegistrationBuilder) -> Void = { _ in },
                  edit: (JSONValue) -> JSONValue = { $0 }) throws -> Reply {
        let options = try attestationOptions(username ?? self.username(), extra)
        guard options.status == 200, let json = options.json else { throw TestSetupError("attestation options failed: \(options)") }
        var builder = authenticator.registration(challenge: try challengeBytes(json), rpId: server.rpId, origin: server.origin)
        builder.format = format
        change(&builder)
        return try client.send("POST", "/attestation/result", body: edit(builder.json()).serialized())
    }

    /// A registered account (packed self attestation) for `authenticator`: its username.
    func enrol(_ authenticator: SoftAuthenticator) throws -> String {
        let name = username()
        let reply = try register(authenticator, username: name)
        guard succeeded(reply).isEmpty else { throw TestSetupError("enrolment failed: \(reply)") }
        return name
    }

    func assertionOptions(_ username: String, userVerification: String? = nil,
                          _ extra: [(key: String, value: JSONValue)] = []) throws -> Reply {
        try client.post("/assertion/options", .object([("username", .string(username))]
            + (userVerification.map { [("userVerification", .string($0))] } ?? []) + extra))
    }

    /// /assertion/options for `username`, then the builder's assertion (after `change`, `edit`) to /assertion/result.
    func login(_ authenticator: SoftAuthenticator, username: String, userVerification: String? = nil,
               change: (inout AssertionBuilder) -> Void = { _ in }, edit: (JSONValue) -> JSONValue = { $0 }) throws -> Reply {
        let options = try assertionOptions(username, userVerification: userVerification)
        guard options.status == 200, let json = options.json else { throw TestSetupError("assertion options failed: \(options)") }
        var builder = authenticator.assertion(challenge: try challengeBytes(json), rpId: server.rpId, origin: server.origin)
        change(&builder)
        return try client.send("POST", "/assertion/result", body: edit(builder.json()).serialized())
    }
}

/// clientDataJSON as `fields` would serialise it, with its members edited (set, replaced or removed).
func clientData(_ fields: ClientDataFields, _ edits: [(key: String, value: JSONValue?)]) -> [UInt8] {
    var value = (try? JSONParser.parse(fields.json)) ?? .object([])
    for (key, v) in edits { value = value.setting(key, v) }
    return value.serialized()
}

/// Resp-2 (both ceremonies): the clientDataJSON items F-1…F-17, alike but for the ceremony's own
/// `type` (`expectedType`) and the other ceremony's (`otherType`, F-5).
func clientDataItems(expectedType: String, otherType: String) -> [(id: String, what: String, edits: [(key: String, value: JSONValue?)])] {
    [
        ("F-1", "clientDataJSON missing \"type\"", [("type", nil)]),
        ("F-2", "clientDataJSON.type is not a DOMString", [("type", 5)]),
        ("F-3", "clientDataJSON.type is an empty DOMString", [("type", "")]),
        ("F-4", "clientDataJSON.type is not \"\(expectedType)\"", [("type", "webauthn.meow")]),
        ("F-5", "clientDataJSON.type is \"\(otherType)\"", [("type", .string(otherType))]),
        ("F-6", "clientDataJSON missing \"challenge\"", [("challenge", nil)]),
        ("F-7", "clientDataJSON.challenge is not a DOMString", [("challenge", .array([1, 2]))]),
        ("F-8", "clientDataJSON.challenge is an empty DOMString", [("challenge", "")]),
        ("F-9", "clientDataJSON.challenge is not base64url", [("challenge", "*not base64url*")]),
        ("F-10", "clientDataJSON.challenge is not request.challenge", [("challenge", .string(Base64URL.encode(SecureRandom.bytes(32))))]),
        ("F-11", "clientDataJSON missing \"origin\"", [("origin", nil)]),
        ("F-12", "clientDataJSON.origin is not a DOMString", [("origin", 443)]),
        ("F-13", "clientDataJSON.origin is an empty DOMString", [("origin", "")]),
        ("F-14", "clientDataJSON.origin is not the origin", [("origin", "https://evil.example")]),
        ("F-15", "clientDataJSON.tokenBinding is not an Object", [("tokenBinding", "present")]),
        ("F-16", "clientDataJSON.tokenBinding missing status", [("tokenBinding", .object([("id", "dGVzdA")]))]),
        ("F-17", "clientDataJSON.tokenBinding.status is not present, supported or not-supported",
         [("tokenBinding", .object([("status", "meow")]))]),
    ]
}

/// A CBOR map's pairs with `key` set (replaced in place, or appended) or removed (nil).
func setting(_ pairs: inout [CBORPair], _ key: String, _ value: CBORValue?) {
    if let i = pairs.firstIndex(where: { $0.key == .text(key) }) {
        if let value { pairs[i] = CBORPair(.text(key), value) } else { pairs.remove(at: i) }
    } else if let value {
        pairs.append(CBORPair(.text(key), value))
    }
}

extension JSONValue {
    func removing(_ key: String) -> JSONValue { setting(key, nil) }
}
