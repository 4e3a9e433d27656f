import Crypto
import Foundation
import JSON
import LatchkeyServer
import PostgreSQL
import Receipts
import Storage
import Testing
import WebAuthn
import WebAuthnTesting

/// Receipts a third party verifies (SPEC "Evidence"), over real HTTP and PostgreSQL: every step-up
/// writes its RFC 8785 document and commitment in the statement that stores it, the challenge is
/// version 2 exactly when a display was shown, Latchkey renders the display of its own actions, and
/// the document read back from the row passes the offline checker and `latchkey receipts verify`.
@Suite("Receipt documents")
struct ReceiptDocumentTests {
    static let fixture = Result { try TestServer(name: "receipts") { $0.stepUpTTL = 30 } }
    static let steps = StepUpTests()
    static let display: JSONValue = ["lang": "en", "lines": ["Pay 200.00 EUR", "to DE89 3704 0044 0532 0130 00"]]

    /// The row's document and commitment, as stored.
    static func stored(_ receiptId: String) throws -> (document: [UInt8], commitment: [UInt8], logIndex: Bool) {
        let rows = try TestDatabase.connect().query("""
            SELECT document, commitment, log_index IS NOT NULL AS logged FROM step_up_receipts WHERE id = \(receiptId)
            """)
        let row = try #require(rows.first, "no receipt \(receiptId)")
        return (try row.bytes("document"), try row.bytes("commitment"), try row.bool("logged"))
    }

    /// The stored document, checked: canonical, committed to, and every offline check passing.
    static func checkedDocument(_ receiptId: String) throws -> JSONValue {
        let (document, commitment, _) = try stored(receiptId)
        #expect(commitment == Digest.sha256(document))
        let receipt = try JSONParser.parse(document)
        #expect(receipt.canonicalized() == document, "the stored document is not RFC 8785")
        let checks = ReceiptChecker.check(receipt)
        #expect(ReceiptChecker.allPassed(checks), "\(checks)")
        #expect(receipt["id"]?.stringValue == receiptId)
        return receipt
    }

    /// docs/evidence.md's "by hand" commands (Python and openssl), run as written on `document` saved
    /// as receipt.json: their output, and whether they succeeded.
    static func handCheck(_ document: [UInt8]) throws -> (ok: Bool, output: String) {
        let page = try String(contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("docs/evidence.md"), encoding: .utf8)
        let marker = "runs these exact commands against one\n"
        let start = try #require(page.range(of: marker), "docs/evidence.md lost its by-hand block").upperBound
        let end = try #require(page.range(of: "\n```", range: start..<page.endIndex)).lowerBound
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("evidence-\(uniqueSuffix())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data(document).write(to: dir.appendingPathComponent("receipt.json"))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "set -e\n" + String(page[start..<end])]
        process.currentDirectoryURL = dir
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus == 0, text)
    }

    func deviceKeyStepUp(_ server: TestServer, body extra: [(String, JSONValue)]) throws -> (StepUpTests.Account, JSONValue, JSONValue) {
        let steps = Self.steps
        let a = try steps.account(server)
        let phone = StepUpTests.Phone(platform: "android")
        let keyId = try steps.enrolled(a, phone)
        let c = try a.client.post("/v1/step-up/challenges", .object([("keyId", .string(keyId)), ("action", StepUpTests.transfer)]
                                                                    + extra.map { (key: $0.0, value: $0.1) }), authorization: a.bearer)
        #expect(c.status == 201, "\(c)")
        let challenge = try #require(c.json)
        let r = try steps.verify(a, challenge, signature: try phone.sign(challenge["challenge"]!.stringValue!))
        #expect(r.status == 200, "\(r)")
        return (a, challenge, try #require(r.json))
    }

    @Test("A device key's step-up with an app's display: challenge version 2, the document stored with it and verified")
    func deviceKeyWithDisplay() throws {
        let server = try Self.fixture.get()
        let (a, challenge, approval) = try deviceKeyStepUp(server, body: [("display", Self.display)])
        let bytes = try #require(Base64URL.decode(challenge["challenge"]!.stringValue!))
        #expect(bytes.count == 170 && bytes[8] == 2)
        #expect(Array(bytes.suffix(32)) == Digest.sha256(StepUpTests.transfer.canonicalized()))
        let receiptId = try #require(approval["receiptId"]?.stringValue)
        let receipt = try Self.checkedDocument(receiptId)
        #expect(receipt["display"] == ["lang": "en", "lines": Self.display["lines"]!, "source": "app"])
        #expect(receipt["sub"]?.stringValue == a.session.userId)
        #expect(receipt["iss"]?.stringValue == server.configuration.issuer)
        #expect(receipt["approver"]?["kind"] == "device-key" && receipt["approver"]?["attestation"] == .null)
        #expect(receipt["evidence"]?["challengeVersion"]?.intValue == 2)
        #expect(receipt["approvedAt"]?.stringValue?.hasSuffix("Z") == true && receipt["approvedAt"]?.stringValue?.count == 20)
        #expect(try Self.stored(receiptId).logIndex == false)
        // By hand, as docs/evidence.md shows: the stored document checks; one with another action does not.
        let hand = try Self.handCheck(try Self.stored(receiptId).document)
        #expect(hand.ok && hand.output.contains("challenge binds sub, key, display and action") && hand.output.contains("Verified OK"),
                "\(hand.output)")
        let otherAction = StepUpTests.otherTransfer
        let tampered = receipt.setting("action", otherAction).setting("actionHash", .string(Base64URL.encode(Digest.sha256(otherAction.canonicalized()))))
        let refused = try Self.handCheck(tampered.canonicalized())
        #expect(!refused.ok && refused.output.contains("action"), "\(refused.output)")
        // The older receipt path keeps its shape, and says what was signed.
        let old = try a.client.get("/v1/step-up/receipts/\(receiptId)", authorization: a.bearer)
        #expect(old.status == 200 && old.json?["challengeFields"]?["version"]?.intValue == 2, "\(old)")
        #expect(old.json?["document"] == nil)
    }

    @Test("Without a display the challenge stays version 1, byte for byte, and the receipt's display is null")
    func deviceKeyWithoutDisplay() throws {
        let server = try Self.fixture.get()
        let (_, challenge, approval) = try deviceKeyStepUp(server, body: [])
        let bytes = try #require(Base64URL.decode(challenge["challenge"]!.stringValue!))
        #expect(bytes.count == 138 && bytes[8] == 1)
        let receipt = try Self.checkedDocument(try #require(approval["receiptId"]?.stringValue))
        #expect(receipt["display"] == .null && receipt["evidence"]?["challengeVersion"]?.intValue == 1)
    }

    @Test("A passkey step-up for a latchkey.* action: Latchkey renders the display in the request's language, ignoring the request's")
    func passkeyLatchkeyAction() throws {
        let server = try Self.fixture.get()
        let a = try Self.steps.account(server)
        let action: JSONValue = ["type": "latchkey.device-key.enrol", "deviceId": "phone-1"]
        let c = try a.client.post("/v1/step-up/challenges",
                                  ["method": "passkey", "action": action, "display": ["lang": "en", "lines": ["Nothing to see"]]],
                                  authorization: a.bearer, headers: [("Accept-Language", "de-DE,de;q=0.9")])
        #expect(c.status == 201, "\(c)")
        let challenge = try #require(c.json)
        let assertion = try a.client.assertion(a.authenticator, options: try #require(challenge["publicKey"])).json()
        let r = try a.client.post("/v1/step-up/verify", ["challengeId": challenge["challengeId"]!, "credential": assertion], authorization: a.bearer)
        #expect(r.status == 200, "\(r)")
        let receipt = try Self.checkedDocument(try #require(r.json?["receiptId"]?.stringValue))
        #expect(receipt["display"] == ["lang": "de", "lines": ["Einen Geräteschlüssel für das Gerät phone-1 einrichten"], "source": "latchkey"])
        #expect(receipt["approver"]?["kind"] == "passkey")
        #expect(receipt["approver"]?["id"]?.stringValue == Base64URL.encode(a.authenticator.credentialId))
        #expect(receipt["approver"]?["publicKey"]?.stringValue == Base64URL.encode(a.authenticator.publicKeyCOSE))
        #expect(receipt["evidence"]?["rpId"]?.stringValue == server.configuration.rpId)
        let hand = try Self.handCheck(receipt.canonicalized())
        #expect(hand.ok && hand.output.contains("Verified OK"), "\(hand.output)")
        let stolen = receipt.setting("sub", "someone-else")
        #expect(try !Self.handCheck(stolen.canonicalized()).ok)
    }

    @Test("An admin change's and an OpenID approval's step-ups: the lines the console and the /authorize page show")
    func latchkeyActions() throws {
        let server = try Self.fixture.get()
        let a = try Self.steps.account(server)
        func approved(_ action: JSONValue) throws -> JSONValue {
            let c = try a.client.post("/v1/step-up/challenges", ["method": "passkey", "action": action], authorization: a.bearer)
            let challenge = try #require(c.json, "\(c)")
            let assertion = try a.client.assertion(a.authenticator, options: try #require(challenge["publicKey"])).json()
            let r = try a.client.post("/v1/step-up/verify", ["challengeId": challenge["challengeId"]!, "credential": assertion],
                                      authorization: a.bearer)
            #expect(r.status == 200, "\(r)")
            return try Self.checkedDocument(try #require(r.json?["receiptId"]?.stringValue))
        }
        let admin = try approved(["type": "latchkey.admin", "method": "POST", "path": "/admin/v1/origins", "body": ["origin": "https://shop.example"]])
        #expect(admin["display"] == ["lang": "en", "lines": ["Admin change: POST /admin/v1/origins", "body.origin: https://shop.example"],
                                     "source": "latchkey"])
        let payment: JSONValue = ["type": "payment_initiation", "instructedAmount": ["amount": "9.99", "currency": "EUR"],
                                  "creditorName": "Merchant A"]
        let oauth = try approved(["type": "latchkey.oauth.authorize", "clientId": "shop", "requestId": "lkq_1",
                                  "authorizationDetails": [payment]])
        let lines = (oauth["display"]?["lines"]?.arrayValue ?? []).compactMap { $0.stringValue }
        #expect(lines.first == "Approve the request of the app shop" && lines.contains("Payee: Merchant A") && lines.last == "requestId: lkq_1",
                "\(lines)")
        #expect(oauth["display"]?["source"] == "latchkey")
    }

    @Test("A passkey step-up for an app's action without a display is version 1 and verifies")
    func passkeyAppAction() throws {
        let server = try Self.fixture.get()
        let a = try Self.steps.account(server)
        let c = try a.client.post("/v1/step-up/challenges", ["method": "passkey", "action": StepUpTests.transfer], authorization: a.bearer)
        let challenge = try #require(c.json, "\(c)")
        let assertion = try a.client.assertion(a.authenticator, options: try #require(challenge["publicKey"])).json()
        let r = try a.client.post("/v1/step-up/verify", ["challengeId": challenge["challengeId"]!, "credential": assertion], authorization: a.bearer)
        #expect(r.status == 200, "\(r)")
        let receipt = try Self.checkedDocument(try #require(r.json?["receiptId"]?.stringValue))
        #expect(receipt["display"] == .null && receipt["evidence"]?["challengeVersion"]?.intValue == 1)
        let hand = try Self.handCheck(receipt.canonicalized())
        #expect(hand.ok && hand.output.contains("Verified OK"), "\(hand.output)")
    }

    @Test("A bad display is 400 invalid_request, and nothing is stored")
    func badDisplay() throws {
        let server = try Self.fixture.get()
        let a = try Self.steps.account(server)
        let bad: [JSONValue] = [
            "text", ["lang": "en"], ["lang": "en", "lines": []], ["lang": "not a tag", "lines": ["a"]], ["lang": "en", "lines": [7]],
            ["lang": "en", "lines": ["a\nb"]], ["lang": "en", "lines": .array((0..<33).map { _ in "a" })],
            ["lang": "en", "lines": [.string(String(repeating: "x", count: 257))]], ["lang": "en", "lines": ["a"], "source": "latchkey"],
        ]
        for display in bad {
            let r = try a.client.post("/v1/step-up/challenges", ["method": "passkey", "action": StepUpTests.transfer, "display": display],
                                      authorization: a.bearer)
            #expect(r.status == 400 && r.code == "invalid_request", "\(display): \(r)")
        }
    }

    @Test("latchkey receipts verify: 0 for the stored document (bare or wrapped), 1 when tampered, 64 for bad usage")
    func command() throws {
        let server = try Self.fixture.get()
        let (_, _, approval) = try deviceKeyStepUp(server, body: [("display", Self.display)])
        let document = try Self.stored(try #require(approval["receiptId"]?.stringValue)).document
        let receipt = try JSONParser.parse(document)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("receipts-\(uniqueSuffix())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func write(_ name: String, _ bytes: [UInt8]) throws -> String {
            let path = dir.appendingPathComponent(name).path
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
        let bare = try LatchkeyCLI.run(["receipts", "verify", try write("bare.json", document)], environment: [:])
        #expect(bare.status == 0, "\(bare)")
        #expect(bare.lines.filter { $0.hasPrefix("ok ") }.count == 8 && bare.stdout.contains("receipt verified"), "\(bare)")
        #expect(bare.stdout.contains("commitment: " + Hex.encode(Digest.sha256(document))), "\(bare)")
        let wrapped = JSONValue.object([("receipt", receipt), ("log", .null)]).serialized()
        #expect(try LatchkeyCLI.run(["receipts", "verify", try write("wrapped.json", wrapped)], environment: [:]).status == 0)

        let tampered = receipt.setting("display", Self.display.setting("source", "app").setting("lines", ["Pay 2.00 EUR"]))
        let refused = try LatchkeyCLI.run(["receipts", "verify", try write("tampered.json", tampered.canonicalized())], environment: [:])
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stdout.contains("FAIL  display:") && refused.stdout.contains("receipt NOT verified"), "\(refused)")

        for arguments in [["receipts"], ["receipts", "check", "x"], ["receipts", "verify"], ["receipts", "verify", dir.path + "/absent.json"],
                          ["receipts", "verify", try write("text.txt", Array("not json".utf8))]] {
            let usage = try LatchkeyCLI.run(arguments, environment: [:])
            #expect(usage.status == 64, "\(arguments): \(usage)")
        }
    }
}
