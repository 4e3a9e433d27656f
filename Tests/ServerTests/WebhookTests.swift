import Crypto
import Foundation
import HTTP
import JSON
import LatchkeyServer
import PostgreSQL
import Storage
import Synchronization
import Testing
import WebAuthn
import WebAuthnTesting

/// SPEC "Events: signed webhooks from an outbox" over real HTTP: real PostgreSQL, the server's own
/// senders, and a real HTTP receiver on loopback in this process.
@Suite("Webhooks")
struct WebhookTests {
    static let fixture = Result { try TestServer.sending(name: "webhooks") }
    static let allTypes = EventType.webhookTypes.map(\.rawValue)

    /// The exact `data` members SPEC lists per type.
    static let members: [String: Set<String>] = [
        "user.created": ["userId", "username"],
        "passkey.created": ["userId", "credentialId", "aaguid", "name"],
        "passkey.renamed": ["userId", "credentialId", "aaguid", "name"],
        "passkey.revoked": ["userId", "credentialId", "aaguid", "name"],
        "passkey.clone_suspected": ["userId", "credentialId", "storedSignCount", "receivedSignCount"],
        "passkey.backup_eligibility_changed": ["userId", "credentialId", "backupEligible"],
        "device_key.enrolled": ["userId", "keyId", "deviceId", "platform", "attested"],
        "device_key.revoked": ["userId", "keyId", "deviceId", "platform", "attested"],
        "session.revoked": ["userId", "sessionId", "reason"],
    ]

    static func key(_ secret: String) throws -> [UInt8] { try #require(WebhookSignature.key(fromSecret: secret)) }

    /// HMAC-SHA256 computed by Python's standard library, independent of Latchkey's Crypto.
    static func pythonSignature(secret: String, id: String, timestamp: String, body: [UInt8]) throws -> String {
        let script = """
            import base64, hashlib, hmac, sys
            secret, msg_id, ts = sys.argv[1], sys.argv[2], sys.argv[3]
            key = base64.b64decode(secret[len("whsec_"):])
            body = sys.stdin.buffer.read()
            print("v1," + base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode())
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script, secret, id, timestamp]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data(body))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("every event a user's changes make reaches a subscribed receiver, signed, with exactly SPEC's data members")
    func everyEventSigned() throws {
        let server = try Self.fixture.get()
        let receiver = try TestReceiver()
        defer { receiver.stop() }
        let client = server.client()
        let (hookId, secret) = try client.subscribe(receiver.url, Self.allTypes)
        defer { client.unsubscribe(hookId) }
        let second = try TestReceiver()
        defer { second.stop() }
        let secondId = try client.subscribe(second.url, ["passkey.created"]).id
        defer { client.unsubscribe(secondId) }

        // user.created, passkey.created; a rename; a device key enrolled (after a passkey step-up) and
        // revoked; a device-key step-up; a second passkey revoked with the two sessions it began
        // (its registration's and a login's); a logout.
        let steps = StepUpTests()
        let account = try steps.account(server)
        let userId = account.session.userId
        let credentialId = Base64URL.encode(account.authenticator.credentialId)
        #expect(try client.send("PATCH", "/v1/passkeys/\(credentialId)", body: JSONValue.object([("name", "Work laptop")]).serialized(),
                                authorization: account.bearer).status == 200)
        let phone = StepUpTests.Phone(platform: "ios")
        let keyId = try steps.enrolled(account, phone)
        _ = try steps.approve(account, phone, keyId: keyId)
        #expect(try client.send("DELETE", "/v1/device-keys/\(keyId)", authorization: account.bearer).status == 204)
        let extraKey = SoftAuthenticator()
        _ = try client.register(extraKey, authorization: account.bearer, approver: account.authenticator)
        let other = try client.signIn(extraKey)
        #expect(try client.revokePasskey(extraKey.credentialId, authorization: account.bearer, approver: account.authenticator).status == 200)
        #expect(try client.send("POST", "/v1/logout", authorization: account.bearer).status == 204)

        // The second passkey began two sessions (its registration and its sign-in): revoking it ends both.
        // Adding and revoking a passkey are approved by a step-up each (SPEC "Assurance").
        let expected = ["user.created", "passkey.created", "passkey.renamed", "step_up.approved", "device_key.enrolled",
                        "step_up.approved", "device_key.revoked", "step_up.approved", "passkey.created", "step_up.approved", "passkey.revoked",
                        "session.revoked", "session.revoked", "session.revoked"]
        let got = receiver.wait { d in d.filter { $0.data?["userId"]?.stringValue == userId }.count >= expected.count }
            .filter { $0.data?["userId"]?.stringValue == userId }
        #expect(got.map { $0.type ?? "" }.sorted() == expected.sorted(), "\(got.map { $0.type ?? "" })")
        // Per account, in write order (SPEC: at least once, in order per account; README "Guarantees").
        #expect(got.map { $0.type ?? "" } == expected, "\(got.map { $0.type ?? "" })")

        let now = Int64(Date().timeIntervalSince1970)
        for d in got {
            // The shipped verifier and an independent computation agree.
            try WebhookSignature.verify(id: d.id, timestamp: d.timestamp, signature: d.signature, body: d.body, key: Self.key(secret), now: now)
            #expect(try Self.pythonSignature(secret: secret, id: d.id, timestamp: d.timestamp, body: d.body) == d.signature)
            #expect(d.id.hasPrefix("evt_"))
            let json = try #require(d.json)
            #expect(json.objectValue?.map(\.key) == ["type", "timestamp", "data"])
            #expect(json["timestamp"]?.stringValue?.hasSuffix("Z") == true)
            if let type = d.type, let names = Self.members[type] {
                #expect(Set(d.data?.objectValue?.map(\.key) ?? []) == names, "\(type): \(d.data?.text ?? "")")
            }
        }
        #expect(got.first { $0.type == "passkey.renamed" }?.data?["name"] == "Work laptop")
        let approvals = got.filter { $0.type == "step_up.approved" }.compactMap(\.data)
        #expect(approvals.contains { $0["method"] == "passkey" && $0["credentialId"]?.stringValue == credentialId && $0["keyId"] == nil })
        #expect(approvals.contains { $0["method"] == "device-key" && $0["keyId"]?.stringValue == keyId && $0["credentialId"] == nil })
        #expect(approvals.allSatisfy { Set($0.objectValue?.map(\.key) ?? []).count == 5 && $0["actionHash"] != nil && $0["receiptId"] != nil })
        let reasons = got.filter { $0.type == "session.revoked" }.compactMap { $0.data?["reason"]?.stringValue }
        #expect(reasons.sorted() == ["logout", "passkey_revoked", "passkey_revoked"])
        let otherSession = try StepUpTests.claims(other.accessToken)["sid"]?.stringValue
        #expect(got.contains { $0.type == "session.revoked" && $0.data?["reason"] == "passkey_revoked"
                && $0.data?["sessionId"]?.stringValue == otherSession })
        let mySession = try StepUpTests.claims(account.session.accessToken)["sid"]?.stringValue
        #expect(got.contains { $0.data?["reason"] == "logout" && $0.data?["sessionId"]?.stringValue == mySession })

        // Every endpoint gets the same webhook-id for one event.
        let created = got.filter { $0.type == "passkey.created" }.map(\.id)
        let atSecond = second.wait { d in created.allSatisfy { id in d.contains { $0.id == id } } }
        #expect(created.allSatisfy { id in atSecond.contains { $0.id == id } })

        // The deliveries API: all delivered, one attempt each.
        let listed = try client.deliveries(hookId).filter { d in got.contains { $0.id == d["eventId"]?.stringValue } }
        #expect(listed.count == got.count)
        let settled = try waitFor { try client.deliveries(hookId).filter { d in got.contains { $0.id == d["eventId"]?.stringValue } }
            .allSatisfy { $0["status"] == "delivered" } }
        #expect(settled)
        for d in try client.deliveries(hookId) where got.contains(where: { $0.id == d["eventId"]?.stringValue }) {
            #expect(d.objectValue?.map(\.key) == ["eventId", "type", "status", "attempts", "lastStatusCode", "nextAttemptAt"])
            #expect(d["attempts"] == 1 && d["lastStatusCode"] == 204 && d["nextAttemptAt"] == .null)
        }
    }

    @Test("an event written on another instance wakes this one's worker through NOTIFY: sent without waiting for a poll")
    func writeElsewhereWakesTheWorker() throws {
        // A database of its own (no other suite's writes or senders) shared by two instances: the
        // writer sends nothing, the sender polls once an hour. The sender's one look at start-up
        // finds nothing, so only the `latchkey_outbox` notification of the writer's commit can send it.
        let scratch = try TestDatabase.Scratch()
        let sender = try TestServer.sending(name: "wake") { c in
            c.databaseURL = scratch.url
            c.outboxPollInterval = 3600
        }
        let writer = try TestServer(name: "wake", rpIdOverride: sender.rpId) { c in
            c.databaseURL = scratch.url
            c.developmentMode = true
        }
        let worker = sender.services.webhookWorker
        #expect(waitFor { worker.counts.claims >= 1 && sender.services.isListening }, "the start-up look happened; the feed listens")
        let receiver = try TestReceiver()
        defer { receiver.stop() }
        let hookId = try writer.client().subscribe(receiver.url, ["user.created"]).id
        defer { writer.client().unsubscribe(hookId) }
        let before = worker.counts

        let user = try writer.client().signUp(SoftAuthenticator(), username: writer.username("wake"))
        let got = receiver.wait { d in d.contains { $0.data?["userId"]?.stringValue == user.userId } }
        #expect(got.contains { $0.data?["userId"]?.stringValue == user.userId && $0.type == "user.created" })
        #expect(worker.counts.wakeUps > before.wakeUps, "the writer's commit woke the other instance's worker")
        #expect(worker.counts.claimingClaims > before.claimingClaims)
    }

    @Test("a receiver answering 500 gets the same webhook-id again (new timestamp, valid signature) until it answers 2xx")
    func retriesKeepTheId() throws {
        let server = try Self.fixture.get()
        let receiver = try TestReceiver { attempt in attempt <= 2 ? 500 : 200 }
        defer { receiver.stop() }
        let client = server.client()
        let (hookId, secret) = try client.subscribe(receiver.url, ["user.created"])
        defer { client.unsubscribe(hookId) }
        let user = try client.signUp(SoftAuthenticator(), username: server.username("retry"))
        let got = receiver.wait { d in d.filter { $0.data?["userId"]?.stringValue == user.userId }.count >= 3 }
            .filter { $0.data?["userId"]?.stringValue == user.userId }
        #expect(got.count == 3)
        #expect(Set(got.map(\.id)).count == 1, "one event, one webhook-id on every attempt")
        #expect(Set(got.map(\.body)).count == 1, "the same body on every attempt")
        for d in got {
            try WebhookSignature.verify(id: d.id, timestamp: d.timestamp, signature: d.signature, body: d.body, key: Self.key(secret),
                                        now: Int64(Date().timeIntervalSince1970))
        }
        // First retry within 10 s (SPEC); the configured base here is 0.2 s.
        #expect(got[1].receivedAt.timeIntervalSince(got[0].receivedAt) < 10)
        #expect(try waitFor {
            try client.deliveries(hookId).first { $0["eventId"]?.stringValue == got[0].id }?["status"] == "delivered"
        })
        let row = try #require(try client.deliveries(hookId).first { $0["eventId"]?.stringValue == got[0].id })
        #expect(row["attempts"] == 3 && row["lastStatusCode"] == 200)
    }

    @Test("receiver down (connection refused), then up: the event arrives once it listens again")
    func receiverDownThenUp() throws {
        let server = try Self.fixture.get()
        let receiver = try TestReceiver()
        let port = receiver.boundPort
        receiver.stop()
        let client = server.client()
        let (hookId, _) = try client.subscribe("http://127.0.0.1:\(port)/down", ["user.created"])
        defer { client.unsubscribe(hookId) }
        let user = try client.signUp(SoftAuthenticator(), username: server.username("down"))
        // Refused attempts are retried: pending, no status code, a next attempt.
        #expect(try waitFor { try client.deliveries(hookId).first.map { ($0["attempts"]?.intValue ?? 0) >= 2 } ?? false })
        let pending = try #require(try client.deliveries(hookId).first)
        #expect(pending["status"] == "pending" && pending["lastStatusCode"] == .null && pending["nextAttemptAt"]?.stringValue != nil)
        try receiver.listen(port: port)
        defer { receiver.stop() }
        let got = receiver.wait(seconds: 30) { d in d.contains { $0.data?["userId"]?.stringValue == user.userId } }
        #expect(got.contains { $0.data?["userId"]?.stringValue == user.userId && $0.type == "user.created" })
        #expect(try waitFor { try client.deliveries(hookId).first?["status"] == "delivered" })
    }

    @Test("a registration that fails (an origin not allowed, a taken username) writes no event")
    func failedRegistrationNoEvent() throws {
        let server = try Self.fixture.get()
        let receiver = try TestReceiver()
        defer { receiver.stop() }
        let client = server.client()
        let (hookId, _) = try client.subscribe(receiver.url, ["user.created", "passkey.created"])
        defer { client.unsubscribe(hookId) }
        let username = server.username("fail")
        let (_, refused) = try client.register(SoftAuthenticator(), username: username) { $0.clientData.origin = "https://evil.example" }
        #expect(refused.status == 400, "\(refused)")
        // The same username then succeeds once: exactly one user.created and one passkey.created for it.
        let ok = try client.signUp(SoftAuthenticator(), username: username)
        #expect(try client.registrationOptions(username: username).status == 409)
        let got = receiver.wait { d in d.filter { $0.data?["userId"]?.stringValue == ok.userId }.count >= 2 }
        Thread.sleep(forTimeInterval: 0.5)
        let names = receiver.deliveries.filter { $0.data?["username"]?.stringValue == username || $0.data?["userId"]?.stringValue == ok.userId }
        #expect(names.map { $0.type ?? "" }.sorted() == ["passkey.created", "user.created"], "\(got.count)")
        // Every delivery row for this endpoint was sent (other suites' sign-ups on the shared database fan
        // out to it too, so wait until the sender has caught up rather than compare at one instant).
        #expect(try waitFor { try client.deliveries(hookId).count == receiver.deliveries.count })
    }

    @Test("a sign-count regression under LATCHKEY_SIGN_COUNT_POLICY=flag reports passkey.clone_suspected with both counters")
    func cloneEvent() throws {
        let server = try TestServer.sending(name: "clone") { $0.signCountPolicy = .flag }
        let receiver = try TestReceiver()
        defer { receiver.stop() }
        let client = server.client()
        let hookId = try client.subscribe(receiver.url, ["passkey.clone_suspected", "passkey.backup_eligibility_changed"]).id
        defer { client.unsubscribe(hookId) }
        let authenticator = SoftAuthenticator(signCount: 10)
        let user = try client.signUp(authenticator, username: server.username("clone"))
        let (_, reply) = try client.login(authenticator) { $0.signCount = 5 }  // the stored count is 10
        #expect(reply.status == 200, "\(reply)")
        #expect(reply.json?["passkey"]?["flagged"] == true)
        let got = receiver.wait { d in d.contains { $0.data?["userId"]?.stringValue == user.userId } }
        let clone = try #require(got.first { $0.data?["userId"]?.stringValue == user.userId })
        #expect(clone.type == "passkey.clone_suspected")
        #expect(clone.data?["storedSignCount"] == 10 && clone.data?["receivedSignCount"] == 5)
        #expect(clone.data?["credentialId"]?.stringValue == Base64URL.encode(authenticator.credentialId))
    }

    @Test("a changed backup eligibility is reported once (passkey.backup_eligibility_changed), not on every later login")
    func backupEligibilityChangeReportedOnce() throws {
        let server = try TestServer.sending(name: "be-change")
        let receiver = try TestReceiver()
        defer { receiver.stop() }
        let client = server.client()
        let hookId = try client.subscribe(receiver.url, ["passkey.backup_eligibility_changed"]).id
        defer { client.unsubscribe(hookId) }
        let authenticator = SoftAuthenticator()  // registered with BE clear
        let user = try client.signUp(authenticator, username: server.username("be"))
        authenticator.backupEligible = true
        for _ in 0..<3 { #expect(try client.login(authenticator).reply.status == 200) }
        let got = receiver.wait { d in d.contains { $0.data?["userId"]?.stringValue == user.userId } }
        Thread.sleep(forTimeInterval: 0.5)  // time for any repeat to arrive too
        let mine = receiver.deliveries.filter { $0.data?["userId"]?.stringValue == user.userId }
        // One event, counted by its webhook-id: delivery is at-least-once (Standard Webhooks), so a
        // send retried after a timeout on a loaded machine arrives again under the same id; a second
        // report of the change would carry a new one.
        #expect(Set(mine.map(\.id)).count == 1, "\(Set(mine.map(\.id)).count) events for one change (\(got.count) seen first)")
        #expect(mine.first?.data?["backupEligible"] == true)
        #expect(try client.get("/v1/passkeys", authorization: user.bearer).json?["passkeys"]?.arrayValue?.first?["backupEligible"] == true)
    }

    @Test("two instances on one database never send one delivery at the same time, and every delivery arrives")
    func twoInstancesNeverOverlap() throws {
        let a = try TestServer.sending(name: "overlap-a")
        let b = try TestServer.sending(name: "overlap-b")
        let receiver = try TestReceiver(delay: 0.05)
        defer { receiver.stop() }
        let (hookId, _) = try a.client().subscribe(receiver.url, ["user.created"])
        defer { a.client().unsubscribe(hookId) }
        let users = onThreads(4) { i, start in
            start()
            let client = (i % 2 == 0 ? a : b).client()
            return (0..<6).compactMap { _ in try? client.signUp(SoftAuthenticator(), username: a.username("overlap")).userId }
        }.flatMap { $0 }
        #expect(users.count == 24)
        let got = receiver.wait(seconds: 30) { d in Set(users).isSubset(of: Set(d.compactMap { $0.data?["userId"]?.stringValue })) }
        #expect(Set(users).isSubset(of: Set(got.compactMap { $0.data?["userId"]?.stringValue })))
        #expect(receiver.maxInFlightPerId == 1)
        // No failure answers, so each event was sent exactly once.
        let mine = got.filter { users.contains($0.data?["userId"]?.stringValue ?? "") }
        #expect(mine.count == users.count, "\(mine.count) deliveries for \(users.count) events")
        #expect(try waitFor { try a.client().deliveries(hookId).allSatisfy { $0["status"] == "delivered" } })
    }

    @Test("admin API: validation, no secrets in the list, delete cancels, deliveries of an unknown endpoint are 404")
    func adminAPI() throws {
        let server = try Self.fixture.get()
        let client = server.client()
        let admin = "Bearer \(server.adminKey)"
        func create(_ url: String, _ events: JSONValue) throws -> Reply {
            try client.post("/admin/v1/webhooks", .object([("url", .string(url)), ("events", events)]), authorization: admin)
        }
        #expect(try create("https://hooks.example.com/x", ["passkey.nope"]).code == "invalid_request")
        #expect(try create("https://hooks.example.com/x", []).code == "invalid_request")
        #expect(try create("https://hooks.example.com/x", [1]).code == "invalid_request")
        #expect(try create("ftp://hooks.example.com/x", ["user.created"]).code == "invalid_request")
        #expect(try create("http://hooks.example.com/x", ["user.created"]).code == "invalid_request", "http only to loopback")
        #expect(try client.post("/admin/v1/webhooks", .object([("url", "https://hooks.example.com")]), authorization: admin).code == "invalid_request")
        let example = try create("https://hooks.example.com/x", ["user.created"])
        #expect(example.status == 201)
        if let exampleId = example.json?["id"]?.stringValue { client.unsubscribe(exampleId) }
        #expect(try client.post("/admin/v1/webhooks", .object([("url", "https://x.example"), ("events", ["user.created"])])).status == 401)

        let created = try create("http://localhost:9/x", ["user.created", "session.revoked"])
        #expect(created.status == 201, "\(created)")
        let body = try #require(created.json)
        #expect(body.objectValue?.map(\.key) == ["id", "url", "events", "secret"])
        let secret = try #require(body["secret"]?.stringValue)
        #expect(secret.hasPrefix("whsec_") && Base64.decodeStandard(String(secret.dropFirst(6)))?.count == 32)
        let id = try #require(body["id"]?.stringValue)
        let list = try client.get("/admin/v1/webhooks", authorization: admin)
        #expect(list.status == 200 && !list.text.contains(secret) && !list.text.contains("secret"))
        #expect(list.json?["webhooks"]?.arrayValue?.contains { $0["id"]?.stringValue == id } == true)
        // The secret at rest is sealed: not the key bytes, and it does not open under another key.
        let row = try server.database.pool.query("SELECT secret FROM webhook_endpoints WHERE id = \(id)")[0]
        let sealed = try row.bytes("secret")
        let key = try #require(WebhookSignature.key(fromSecret: secret))
        // The signing keys' envelope (KeyEncryption.swift): version, KEK id, nonce, ciphertext, tag.
        #expect(sealed.count == 1 + 8 + 12 + 32 + 16 && !sealed.indices.dropLast(31).contains { Array(sealed[$0..<$0 + 32]) == key })
        let otherKEK = try KeyEncryptionKey(bytes: [UInt8](repeating: 7, count: 32))
        #expect(throws: SealedSecret.Failure.self) {
            try SealedSecret.open(sealed, with: otherKEK, binding: .webhookSecret(id))
        }

        // A pending delivery (port 9 refuses) is cancelled by the delete; nothing fans out to it afterwards.
        _ = try client.signUp(SoftAuthenticator(), username: server.username("cancel"))
        #expect(try waitFor { !(try client.deliveries(id)).isEmpty })
        #expect(try client.send("DELETE", "/admin/v1/webhooks/\(id)", authorization: admin).status == 204)
        #expect(try client.send("DELETE", "/admin/v1/webhooks/\(id)", authorization: admin).status == 404)
        #expect(try client.get("/admin/v1/webhooks/\(id)/deliveries", authorization: admin).status == 404)
        let cancelled = try server.database.pool.query("""
            SELECT count(*) AS n FROM outbox_deliveries WHERE target = \(id) AND status = 'pending'
            """)[0].int("n")
        #expect(cancelled == 0)
        #expect(try client.get("/admin/v1/webhooks/wh_unknown/deliveries", authorization: admin).code == "not_found")
    }

    @Test("/metrics: deliveries by type and outcome, outbox depth and oldest pending age")
    func metrics() throws {
        // A database of its own: on the shared one another suite's sender may claim and deliver the
        // event, and then this instance's /metrics never counts it.
        let scratch = try TestDatabase.Scratch()
        let server = try TestServer.sending(name: "metrics") { c in c.databaseURL = scratch.url }
        let receiver = try TestReceiver()
        defer { receiver.stop() }
        let client = server.client()
        let hookId = try client.subscribe(receiver.url, ["user.created"]).id
        defer { client.unsubscribe(hookId) }
        let user = try client.signUp(SoftAuthenticator(), username: server.username("metrics"))
        receiver.wait { d in d.contains { $0.data?["userId"]?.stringValue == user.userId } }
        #expect(try waitFor { try client.get("/metrics").text.contains("latchkey_webhook_deliveries_total{type=\"user.created\",outcome=\"delivered\"}") })
        let text = try client.get("/metrics").text
        #expect(text.contains("latchkey_outbox_depth{channel=\"webhook\"}"))
        #expect(text.contains("latchkey_outbox_oldest_pending_seconds{channel=\"webhook\"}"))
    }
}

