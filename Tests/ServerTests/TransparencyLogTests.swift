import Crypto
import Foundation
import HTTP
import JSON
@testable import LatchkeyServer
import PostgreSQL
import Storage
import Synchronization
import Testing
import Transparency
import WebAuthnTesting

/// SPEC "Evidence" → "The log", over real HTTP and PostgreSQL, each test on a database of its own:
/// receipts written with a document and a commitment are integrated; the checkpoint verifies with
/// the key endpoint's key; the tiles and entry bundles reproduce its root; each receipt's tlog-proof
/// verifies; any two checkpoints are consistent, also with two instances integrating at once; a
/// rolled-back tree refuses start; a witness's cosignature is verified, stored and served.
@Suite("Transparency log", .serialized)
struct TransparencyLogTests {
    struct Log {
        let scratch: TestDatabase.Scratch
        let server: TestServer
        let owner: Session
        let client: Client
        /// Ends the writer before the database is dropped.
        func stop() { server.services.stop() }
    }

    static func makeLog(interval: Double = 0.05, rpId: String? = nil, scratch existing: TestDatabase.Scratch? = nil,
                        configure: @escaping (inout Configuration) -> Void = { _ in }) throws -> Log {
        let scratch = try existing ?? TestDatabase.Scratch()
        let server = try TestServer(name: "tlog", rpIdOverride: rpId) { c in
            c.databaseURL = scratch.url
            c.logInterval = interval
            configure(&c)
        }
        let client = server.client()
        let owner = try client.signUp(SoftAuthenticator(), username: server.username("tlog"))
        return Log(scratch: scratch, server: server, owner: owner, client: client)
    }

    /// A receipt row as the step-up writes it (migration 25): its RFC 8785 document and commitment.
    @discardableResult
    static func insertReceipt(_ connection: PostgresConnection, userId: String) throws -> (id: String, document: [UInt8]) {
        let id = Base64URL.encode(SecureRandom.bytes(16))
        let doc = Array(#"{"id":"\#(id)","nonce":"\#(Base64URL.encode(SecureRandom.bytes(32)))","v":1}"#.utf8)
        let commitment = Digest.sha256(doc)
        _ = try connection.execute("""
            INSERT INTO step_up_receipts (id, user_id, method, key_id, public_key, challenge, signed_data, signature, action, action_hash,
                                          key_binding, token_jti, token_expires_at, document, commitment)
            VALUES (\(id), \(userId), 'passkey', 'key', \([UInt8]([1])), \([UInt8]([2])), \([UInt8]([3])), \([UInt8]([4])), '{}', \(Digest.sha256([5])),
                    'binding', \("jti-" + id), now() + interval '1 hour', \(doc), \(commitment))
            """)
        return (id, doc)
    }

    static func logKey(_ client: Client) throws -> String {
        let r = try client.get("/v1/transparency/key")
        #expect(r.status == 200, "\(r)")
        return String(r.text.dropLast())
    }

    static func checkpoint(_ client: Client, key: String, witnesses: [VerifierKey] = []) throws -> VerifiedCheckpoint {
        let r = try client.get("/v1/transparency/checkpoint")
        #expect(r.status == 200, "\(r)")
        #expect(r.contentType == "text/plain; charset=utf-8")
        return try Checkpoint.open(r.text, logKey: try VerifierKey(parsing: key), witnesses: witnesses)
    }

    /// The newest checkpoint once it verifies, for polling (nil before).
    static func polled(_ client: Client, key: String, witnesses: [VerifierKey] = []) -> VerifiedCheckpoint? {
        guard let r = try? client.get("/v1/transparency/checkpoint"), r.status == 200, let k = try? VerifierKey(parsing: key) else { return nil }
        return try? Checkpoint.open(r.text, logKey: k, witnesses: witnesses)
    }

    static func size(_ client: Client, key: String) throws -> UInt64 {
        let r = try client.get("/v1/transparency/checkpoint")
        guard r.status == 200 else { return 0 }
        return try Checkpoint.open(r.text, logKey: try VerifierKey(parsing: key)).checkpoint.size
    }

    /// Every commitment of a tree of `size`, read through the entry bundles alone.
    static func commitments(_ client: Client, size: UInt64) throws -> [[UInt8]] {
        var out: [[UInt8]] = []
        var n: UInt64 = 0
        while n * 256 < size {
            let width = min(256, size - n * 256)
            let tile = TilePath(level: nil, index: n, width: width == 256 ? nil : Int(width))
            let r = try client.get("/v1/transparency/\(tile)")
            #expect(r.status == 200, "\(tile): \(r)")
            #expect(r.contentType == "application/octet-stream")
            out += try EntryBundle.decode(r.body)
            n += 1
        }
        return out
    }

    @Test("receipts are integrated, the checkpoint verifies, tiles reproduce the root, proofs verify, checkpoints are consistent")
    func integratesAndProves() throws {
        let log = try Self.makeLog()
        defer { log.stop() }
        let db = try log.scratch.connect()
        var receipts = try (0..<20).map { _ in try Self.insertReceipt(db, userId: log.owner.userId) }
        let key = try Self.logKey(log.client)
        #expect(key.hasPrefix("\(log.server.rpId)/latchkey/receipts+"))
        #expect(try waitFor { try Self.size(log.client, key: key) == 20 })
        let first = try Self.checkpoint(log.client, key: key)
        #expect(first.checkpoint.origin == "\(log.server.rpId)/latchkey/receipts")

        // The level-0 tile holds the leaf hashes of the entry bundle's commitments, in order, and they make the root.
        let entries = try Self.commitments(log.client, size: 20)
        #expect(Set(entries) == Set(receipts.map { Digest.sha256($0.document) }))
        let tile = try log.client.get("/v1/transparency/tile/0/000.p/20")
        #expect(tile.status == 200 && tile.body.count == 20 * 32, "\(tile)")
        #expect(tile.header("Cache-Control")?.contains("immutable") == true)
        let leafHashes = stride(from: 0, to: tile.body.count, by: 32).map { Array(tile.body[$0..<($0 + 32)]) }
        #expect(leafHashes == entries.map(MerkleTree.leafHash))
        #expect(MerkleTree.root(leafHashes: leafHashes) == first.checkpoint.root)

        // Each receipt's proof verifies for its own commitment, and not for another's.
        for r in receipts.prefix(5) {
            let reply = try log.client.get("/v1/receipts/\(r.id)", authorization: log.owner.bearer)
            #expect(reply.status == 200, "\(reply)")
            // The stored document, byte for byte.
            let body = reply.text
            #expect(body.hasPrefix(#"{"receipt":"# + String(decoding: r.document, as: UTF8.self) + #","log":""#))
            let proof = try #require(reply.json?["log"]?.stringValue)
            let checks = TlogProofVerifier.verify(proofText: proof, commitment: Digest.sha256(r.document), logKey: key)
            #expect(checks.allSatisfy { $0.passed }, "\(checks)")
            let wrong = TlogProofVerifier.verify(proofText: proof, commitment: Digest.sha256(Array("x".utf8)), logKey: key)
            #expect(wrong.last?.passed == false)
        }

        // Past 256 entries: a full level-0 tile and a level-1 tile.
        receipts += try (0..<280).map { _ in try Self.insertReceipt(db, userId: log.owner.userId) }
        #expect(try waitFor { try Self.size(log.client, key: key) == 300 })
        let second = try Self.checkpoint(log.client, key: key)
        let all = try Self.commitments(log.client, size: 300)
        #expect(Set(all) == Set(receipts.map { Digest.sha256($0.document) }))
        #expect(Array(all.prefix(20)) == entries, "the first 20 entries stay where they were")
        let tree = CompleteSubtrees(leafHashes: all.map(MerkleTree.leafHash))
        #expect(MerkleTree.root(size: 300) { tree.nodes[$0]! } == second.checkpoint.root)
        let full = try log.client.get("/v1/transparency/tile/0/000")
        #expect(full.status == 200 && full.body.count == 8192)
        let level1 = try log.client.get("/v1/transparency/tile/1/000.p/1")
        #expect(level1.status == 200 && level1.body == tree.nodes[MerkleTree.Node(level: 8, index: 0)])
        // The first checkpoint is a prefix of the second: from the tiles, and from the server's own proof.
        let proof = try MerkleTree.consistencyProof(oldSize: 20, size: 300) { tree.nodes[$0]! }
        #expect(MerkleTree.verifyConsistency(oldSize: 20, size: 300, oldRoot: first.checkpoint.root, root: second.checkpoint.root, proof: proof))
        let served = try log.server.services.transparency.consistencyProof(oldSize: 20, size: 300)
        #expect(served == proof)
        // Every checkpoint signed is consistent with the newest.
        for row in try db.query("SELECT size, root FROM transparency_log_checkpoints ORDER BY size") {
            let size = UInt64(try row.int64("size"))
            let p = try MerkleTree.consistencyProof(oldSize: size, size: 300) { tree.nodes[$0]! }
            #expect(MerkleTree.verifyConsistency(oldSize: size, size: 300, oldRoot: try row.bytes("root"), root: second.checkpoint.root, proof: p),
                    "checkpoint \(size)")
        }
        // An early receipt's proof is now against the newest checkpoint.
        let again = try log.client.get("/v1/receipts/\(receipts[0].id)", authorization: log.owner.bearer)
        let text = try #require(again.json?["log"]?.stringValue)
        #expect(try TlogProof(parsing: text).checkpoint.hasPrefix(second.checkpoint.text))
        #expect(TlogProofVerifier.verify(proofText: text, commitment: Digest.sha256(receipts[0].document), logKey: key).allSatisfy { $0.passed })
        // The admin reads it too.
        let admin = try log.client.get("/admin/v1/receipts/\(receipts[0].id)", authorization: "Bearer \(log.server.adminKey)")
        #expect(admin.status == 200, "\(admin)")
        #expect(admin.json?["log"]?.stringValue == text)
        // Erasing the receipt leaves its commitment in the log.
        _ = try db.execute("DELETE FROM step_up_receipts WHERE id = \(receipts[0].id)")
        #expect(try Self.commitments(log.client, size: 300) == all)
    }

    @Test("a receipt not yet integrated has log null; others' and unknown ids are 404; bad tile paths are 4xx")
    func refusals() throws {
        let log = try Self.makeLog(interval: 0)  // this instance never integrates
        let db = try log.scratch.connect()
        let mine = try Self.insertReceipt(db, userId: log.owner.userId)
        let pending = try log.client.get("/v1/receipts/\(mine.id)", authorization: log.owner.bearer)
        #expect(pending.status == 200, "\(pending)")
        #expect(pending.json?["log"] == .null)
        #expect(pending.json?["receipt"]?["id"]?.stringValue == mine.id)
        // The log is not made until an integrating instance starts: its endpoints say so.
        #expect(try log.client.get("/v1/transparency/checkpoint").status == 404)

        let other = try log.client.signUp(SoftAuthenticator(), username: log.server.username("other"))
        let theirs = try Self.insertReceipt(db, userId: other.userId)
        let denied = try log.client.get("/v1/receipts/\(theirs.id)", authorization: log.owner.bearer)
        #expect(denied.status == 404 && denied.code == "not_found", "\(denied)")
        let unknown = try log.client.get("/v1/receipts/\(Base64URL.encode(SecureRandom.bytes(16)))", authorization: log.owner.bearer)
        #expect(unknown.status == 404 && unknown.code == "not_found")
        for bad in ["x", "%00", "AAAAAAAAAAAAAAAAAAAAA", String(repeating: "A", count: 300)] {
            let r = try log.client.get("/v1/receipts/\(bad)", authorization: log.owner.bearer)
            #expect(r.status == 404 && r.isProblem, "\(bad): \(r)")
        }
        #expect(try log.client.get("/v1/receipts/\(mine.id)").status == 401)
        #expect(try log.client.get("/v1/receipts/\(mine.id)?minWitnesses=x", authorization: log.owner.bearer).code == "invalid_request")
        #expect(try log.client.get("/v1/receipts/\(mine.id)?minWitnesses=2", authorization: log.owner.bearer).status == 200)
        // A receipt from before receipts were documents.
        let legacy = Base64URL.encode(SecureRandom.bytes(16))
        _ = try db.execute("""
            INSERT INTO step_up_receipts (id, user_id, method, key_id, public_key, challenge, signed_data, signature, action, action_hash,
                                          key_binding, token_jti, token_expires_at)
            VALUES (\(legacy), \(log.owner.userId), 'passkey', 'key', \([UInt8]([1])), \([UInt8]([2])), \([UInt8]([3])), \([UInt8]([4])), '{}',
                    \(Digest.sha256([5])), 'binding', \("jti-" + legacy), now() + interval '1 hour')
            """)
        let old = try log.client.get("/v1/receipts/\(legacy)", authorization: log.owner.bearer)
        #expect(old.status == 404 && old.code == "not_found" && old.json?["detail"]?.stringValue?.contains("/v1/step-up/receipts/") == true, "\(old)")

        // Tiles: malformed, non-canonical, out of range or not yet in the tree — never a 5xx.
        let integrating = try Self.makeLog(scratch: log.scratch)
        defer { integrating.stop() }
        let key = try Self.logKey(integrating.client)
        #expect(try waitFor { try Self.size(integrating.client, key: key) == 2 })
        for path in ["tile/0/5", "tile/0/x000/000", "tile/64/000", "tile/0/000.p/0", "tile/0/000.p/256", "tile/0/000.p/3", "tile/0/001",
                     "tile/0/000", "tile/entries/000", "tile/entries/000.p/3", "tile/1/000.p/1", "tile/0/x999/x999/999", "tile/a/000",
                     "tile/0/000.p/02", "tile/0/-01", "tile/entries/x001/000.p/x", "tile/0/%2e%2e/000", "tile/0/000/000/000/000"] {
            let r = try integrating.client.get("/v1/transparency/\(path)")
            #expect(r.status == 404 && r.isProblem, "\(path): \(r)")
        }
        #expect(try integrating.client.get("/v1/transparency/tile/0/000.p/2").body.count == 64)
        #expect(try EntryBundle.decode(try integrating.client.get("/v1/transparency/tile/entries/000.p/2").body).count == 2)
    }

    @Test("receipts past LATCHKEY_RECEIPT_RETENTION are deleted once logged; their commitments stay in the log")
    func retention() throws {
        let log = try Self.makeLog()
        defer { log.stop() }
        let db = try log.scratch.connect()
        let old = try (0..<3).map { _ in try Self.insertReceipt(db, userId: log.owner.userId) }
        let key = try Self.logKey(log.client)
        #expect(try waitFor { try Self.size(log.client, key: key) == 3 })
        log.stop()  // nothing integrates from here: the next receipt stays unlogged
        let unlogged = try Self.insertReceipt(db, userId: log.owner.userId)
        let recent = try Self.insertReceipt(db, userId: log.owner.userId)
        for id in old.map(\.id) + [unlogged.id] {
            _ = try db.execute("UPDATE step_up_receipts SET created_at = now() - interval '11 years' WHERE id = \(id)")
        }
        let repository = log.server.database.transparencyLog
        #expect(try repository.purgeReceipts(olderThan: 10 * 365 * 86400, limit: 2) == 2, "a batch is at most its limit")
        #expect(try repository.purgeReceipts(olderThan: 10 * 365 * 86400) == 1)
        #expect(try repository.purgeReceipts(olderThan: 10 * 365 * 86400) == 0)
        let left = Set(try db.query("SELECT id FROM step_up_receipts WHERE user_id = \(log.owner.userId)").map { try $0.string("id") })
        #expect(left == [unlogged.id, recent.id], "the old logged receipts went; an unlogged one waits for the log, a recent one stays")
        #expect(try db.query("SELECT count(*)::int AS n FROM transparency_log_entries")[0].int("n") == 3, "the commitments stay in the log")
        #expect(try log.client.get("/v1/receipts/\(old[0].id)", authorization: log.owner.bearer).status == 404)
    }

    @Test("an approval pack: two approvers' receipts, each in the log, make the quorum offline; a pack short of it is refused")
    func approvalPack() throws {
        let log = try Self.makeLog()
        defer { log.stop() }
        let server = log.server
        let quorum = ApprovalTests()
        let requester = try quorum.person(server, "req"), ana = try quorum.person(server, "ana"), ben = try quorum.person(server, "ben")
        let name = "pack-\(uniqueSuffix())"
        let policy: JSONValue = .object([
            ("approvers", .array([ana, ben].map { .object([("user", .string($0.id))]) })),
            ("requesters", .array([.object([("user", .string(requester.id))])])), ("needed", 2), ("delay", 0), ("expires", 3600),
            ("notifyOwner", false), ("breakGlass", false), ("requesterCounts", true),
        ])
        let admin = "Bearer \(server.endpoint.adminKey ?? "")"
        #expect(try server.client().send("PUT", "/admin/v1/approval-policies/\(name)", body: policy.serialized(), authorization: admin).status == 201)
        let action: JSONValue = .object([("type", "payment"), ("amount", "5000.00"), ("currency", "EUR")])
        let opened = try requester.client.post("/v1/approvals", .object([("policy", .string(name)), ("action", action)]), authorization: requester.bearer)
        let id = try #require(opened.json?["id"]?.stringValue), hash = try #require(opened.json?["actionHash"]?.stringValue)
        for p in [ana, ben] {
            let r = try quorum.approve(p, id: id, token: try quorum.vote(p, id: id, actionHash: hash))
            #expect(r.status == 200, "\(r)")
        }
        let key = try Self.logKey(log.client)
        let receipts = try #require(try server.database.approvals.read(id: id, caller: "")).approval.entries.map(\.receiptId)
        #expect(receipts.count == 2)
        #expect(try waitFor { try receipts.allSatisfy { r in
            try server.database.pool.query("SELECT log_index IS NOT NULL AS logged FROM step_up_receipts WHERE id = \(r)")[0].bool("logged") } })
        // One more checkpoint after the votes' integration, so the pack's holds them.
        #expect(try waitFor { try Self.checkpoint(log.client, key: key).checkpoint.size >= 2 })

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("approval-pack-\(uniqueSuffix())").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let env = ["DATABASE_URL": log.scratch.url]
        let exported = try LatchkeyCLI.run(["receipts", "export", "--approval", id, "--out", "\(folder)/pack.tar"], environment: env)
        #expect(exported.status == 0 && exported.stderr.contains("personal data"), "\(exported)")
        let verified = try LatchkeyCLI.run(["receipts", "verify", "--approval", "\(folder)/pack.tar", "--log-key", key], environment: [:])
        #expect(verified.status == 0 && verified.stdout.contains("approval verified: 2 of 2 approvers"), "\(verified)")
        #expect(try server.database.pool.query("SELECT count(*)::int AS n FROM audit_log WHERE action = 'receipts.exported' AND detail->>'approvalId' = \(id)")[0]
            .int("n") == 1, "the export is in the audit log")

        // The same pack claiming a quorum of three (GNU tar, ustar format, rewrites it): refused.
        let tar = ["/usr/bin/tar", "/bin/tar"].first { FileManager.default.isExecutableFile(atPath: $0) }!
        func sh(_ args: [String]) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: tar)
            p.arguments = args
            p.currentDirectoryURL = URL(fileURLWithPath: folder)
            try p.run(); p.waitUntilExit()
            #expect(p.terminationStatus == 0, "tar \(args)")
        }
        try FileManager.default.createDirectory(atPath: "\(folder)/x", withIntermediateDirectories: true)
        try sh(["-xf", "pack.tar", "-C", "x"])
        let approvalFile = "\(folder)/x/approval.json"
        let text = try String(contentsOfFile: approvalFile, encoding: .utf8).replacingOccurrences(of: #""needed":2"#, with: #""needed":3"#)
        try text.write(toFile: approvalFile, atomically: true, encoding: .utf8)
        try sh(["--format=ustar", "-cf", "three.tar", "-C", "x", "approval.json", "receipts.jsonl", "proofs", "checkpoint"])
        let short = try LatchkeyCLI.run(["receipts", "verify", "--approval", "\(folder)/three.tar", "--log-key", key], environment: [:])
        #expect(short.status == 1 && short.stdout.contains("FAIL  quorum: 2 distinct accounts approved this action (3 needed)"), "\(short)")
        // A user's pack is no approval pack.
        let userPack = try LatchkeyCLI.run(["receipts", "export", "--user", ana.id, "--out", "\(folder)/ana.tar"], environment: env)
        #expect(userPack.status == 0, "\(userPack)")
        let notApproval = try LatchkeyCLI.run(["receipts", "verify", "--approval", "\(folder)/ana.tar", "--log-key", key], environment: [:])
        #expect(notApproval.status == 1 && notApproval.stdout.contains("no approval.json"), "\(notApproval)")
    }

    @Test("two instances integrating at once never fork the tree")
    func twoInstances() throws {
        let a = try Self.makeLog(interval: 0.01)
        let b = try Self.makeLog(interval: 0.01, rpId: a.server.rpId, scratch: a.scratch)
        defer { a.stop(); b.stop() }
        let db = try a.scratch.connect()
        var documents: [[UInt8]] = []
        for _ in 0..<15 {
            for _ in 0..<20 { documents.append(try Self.insertReceipt(db, userId: a.owner.userId).document) }
            Thread.sleep(forTimeInterval: 0.02)
        }
        let key = try Self.logKey(a.client)
        #expect(try Self.logKey(b.client) == key)
        #expect(try waitFor { try Self.size(b.client, key: key) == 300 })
        let all = try Self.commitments(b.client, size: 300)
        #expect(Set(all) == Set(documents.map { Digest.sha256($0) }) && all.count == 300)
        let tree = CompleteSubtrees(leafHashes: all.map(MerkleTree.leafHash))
        let newest = try Self.checkpoint(a.client, key: key).checkpoint
        let checkpoints = try db.query("SELECT size, root FROM transparency_log_checkpoints ORDER BY size")
        print("two instances: \(checkpoints.count) checkpoints")
        for row in checkpoints {
            let size = UInt64(try row.int64("size"))
            let p = try MerkleTree.consistencyProof(oldSize: size, size: 300) { tree.nodes[$0]! }
            #expect(MerkleTree.verifyConsistency(oldSize: size, size: 300, oldRoot: try row.bytes("root"), root: newest.root, proof: p), "checkpoint \(size)")
        }
        // Every receipt has one index, 0..<300, and its commitment is the entry there.
        let indexed = try db.query("SELECT log_index, commitment FROM step_up_receipts WHERE log_index IS NOT NULL ORDER BY log_index")
        #expect(try indexed.map { try $0.int64("log_index") } == Array(0..<300))
        #expect(try indexed.map { try $0.bytes("commitment") } == all)
    }

    @Test("a stored tree smaller than the last size signed refuses start")
    func noRollback() throws {
        let stateFile = FileManager.default.temporaryDirectory.appendingPathComponent("tlog-state-\(uniqueSuffix())").path
        defer { try? FileManager.default.removeItem(atPath: stateFile) }
        let log = try Self.makeLog(configure: { $0.logStateFile = stateFile })
        let db = try log.scratch.connect()
        for _ in 0..<3 { try Self.insertReceipt(db, userId: log.owner.userId) }
        let key = try Self.logKey(log.client)
        #expect(try waitFor { try Self.size(log.client, key: key) == 3 })
        #expect(waitFor { TransparencyLog.readStateFile(stateFile)?.size == 3 })
        log.server.services.stop()
        // The state file says 3; a restored database says 2 (and 2 signed): refused, naming the file.
        _ = try db.execute("UPDATE transparency_log SET size = 2, signed_size = 2")
        #expect(throws: (any Error).self) { try Self.makeLog(rpId: log.server.rpId, scratch: log.scratch, configure: { $0.logStateFile = stateFile }) }
        do {
            _ = try Self.makeLog(rpId: log.server.rpId, scratch: log.scratch, configure: { $0.logStateFile = stateFile })
        } catch {
            #expect(String(describing: error).contains("LATCHKEY_LOG_STATE"), "\(error)")
        }
        // PostgreSQL alone: the tree below the size it says it signed.
        _ = try db.execute("UPDATE transparency_log SET size = 2, signed_size = 3")
        do {
            _ = try Self.makeLog(rpId: log.server.rpId, scratch: log.scratch)
            Issue.record("started on a rolled-back tree")
        } catch {
            #expect(String(describing: error).contains("smaller than the last checkpoint it signed"), "\(error)")
        }
    }

    /// A tlog-witness v1.0.0 witness written here from the text, for the submission test: it checks the
    /// log's signature and the consistency proof from the size it holds, and cosigns.
    final class TestWitness: Responder, Sendable {
        let key = PrivateKey.generateEd25519()
        let name = "witness.test/w1"
        let logKey: Mutex<VerifierKey?> = Mutex(nil)
        let held = Mutex<(size: UInt64, root: [UInt8])>((0, []))
        let requests = Mutex(0)
        let conflicts = Mutex(0)
        var vkey: VerifierKey { VerifierKey(name: name, type: .cosignatureV1, publicKey: key.publicKey.rawEd25519!) }

        func respond(to request: Request) -> Response {
            requests.withLock { $0 += 1 }
            guard request.method == "POST", request.path.hasSuffix("/add-checkpoint"), let logKey = logKey.withLock({ $0 }) else {
                return Response(status: 404)
            }
            let text = String(decoding: request.body, as: UTF8.self)
            guard let blank = text.firstRange(of: "\n\n") else { return Response(status: 400) }
            let head = text[..<blank.lowerBound].split(separator: "\n").map(String.init)
            let note = String(text[blank.upperBound...])
            guard let oldLine = head.first, oldLine.hasPrefix("old "), let old = UInt64(oldLine.dropFirst(4)) else { return Response(status: 400) }
            let proof = head.dropFirst().compactMap { Base64.decodeStandard($0) }
            guard let opened = try? Checkpoint.open(note, logKey: logKey) else { return Response(status: 403) }
            let c = opened.checkpoint
            guard old <= c.size else { return Response(status: 400) }
            return held.withLock { held in
                guard old == held.size else {
                    conflicts.withLock { $0 += 1 }
                    return Response(status: 409, headers: [("Content-Type", "text/x.tlog.size")], body: Array("\(held.size)\n".utf8))
                }
                if old > 0 {
                    guard MerkleTree.verifyConsistency(oldSize: old, size: c.size, oldRoot: held.root, root: c.root, proof: proof) else {
                        return Response(status: 422)
                    }
                }
                held = (c.size, c.root)
                let line = (try? CosignatureV1.sign(text: c.text, timestamp: 1_700_000_000, name: name, privateKey: key).line) ?? ""
                return Response(status: 200, body: Array(line.utf8))
            }
        }
    }

    @Test("each new checkpoint goes to the witness, whose verified cosignature is served with it; a 409 is followed")
    func witnesses() throws {
        let witness = TestWitness()
        let http = try HTTPServer(configuration: .init(host: "127.0.0.1", port: 0, threadPoolSize: 1), responder: witness)
        defer { http.stop() }
        let scratch = try TestDatabase.Scratch()
        let url = "http://127.0.0.1:\(http.port)/witness"
        let log = try Self.makeLog(interval: 0.05, scratch: scratch, configure: { $0.logWitnesses = [LogWitness(url: url, key: witness.vkey.description)] })
        defer { log.stop() }
        let key = try Self.logKey(log.client)
        witness.logKey.withLock { $0 = try? VerifierKey(parsing: key) }
        // The witness first hears of the log at some size: it answers 409 to nothing, cosigns from 0.
        let db = try scratch.connect()
        for _ in 0..<4 { try Self.insertReceipt(db, userId: log.owner.userId) }
        #expect(waitFor { Self.polled(log.client, key: key, witnesses: [witness.vkey])?.cosigners.count == 1 })
        // Forget what the log recorded of the witness: its next submission says `old 0`, gets 409 with
        // the witness's size, and is sent again from there.
        _ = try db.execute("DELETE FROM transparency_log_witnesses")
        var last: (String, [UInt8])?
        for _ in 0..<3 { last = try Self.insertReceipt(db, userId: log.owner.userId) }
        #expect(waitFor { Self.polled(log.client, key: key, witnesses: [witness.vkey])?.checkpoint.size == 7 })
        #expect(waitFor { Self.polled(log.client, key: key, witnesses: [witness.vkey])?.cosigners.count == 1 })
        #expect(witness.held.withLock { $0.size } == 7)
        #expect(witness.conflicts.withLock { $0 } >= 1, "the submission after the log forgot the witness's size met a 409")
        // The receipt's proof with ?minWitnesses=1 carries the cosignature, and verifies with the witness key.
        let (id, document) = try #require(last)
        let reply = try log.client.get("/v1/receipts/\(id)?minWitnesses=1", authorization: log.owner.bearer)
        let proof = try #require(reply.json?["log"]?.stringValue, "\(reply)")
        let cosigned = TlogProofVerifier.verify(proofText: proof, commitment: Digest.sha256(document), logKey: key,
                                                witnessKeys: [witness.vkey.description], minWitnesses: 1)
        #expect(cosigned.allSatisfy { $0.passed }, "\(cosigned)")
        let metrics = log.server.services.metrics.render(pool: (0, 0, 0))
        #expect(metrics.contains(#"latchkey_log_witness_total{witness="witness.test/w1",outcome="cosigned"}"#), "\(metrics)")
        #expect(metrics.contains("latchkey_log_size 7"))
        #expect(metrics.contains("latchkey_log_integration_lag_seconds_count"))

        // The witness stops answering: the next checkpoint has no cosignature. ?minWitnesses=1 proves an
        // older receipt against the cosigned checkpoint, a receipt no cosigned checkpoint holds against the newest.
        witness.logKey.withLock { $0 = nil }
        let (newId, newDocument) = try Self.insertReceipt(db, userId: log.owner.userId)
        #expect(try waitFor { try Self.size(log.client, key: key) == 8 })
        let older = try #require(try log.client.get("/v1/receipts/\(id)?minWitnesses=1", authorization: log.owner.bearer).json?["log"]?.stringValue)
        #expect(try Checkpoint(text: try SignedNote(parsing: try TlogProof(parsing: older).checkpoint).text).size == 7)
        #expect(TlogProofVerifier.verify(proofText: older, commitment: Digest.sha256(document), logKey: key,
                                         witnessKeys: [witness.vkey.description], minWitnesses: 1).allSatisfy { $0.passed })
        let newestProof = try #require(try log.client.get("/v1/receipts/\(id)", authorization: log.owner.bearer).json?["log"]?.stringValue)
        #expect(try Checkpoint(text: try SignedNote(parsing: try TlogProof(parsing: newestProof).checkpoint).text).size == 8)
        let fallback = try #require(try log.client.get("/v1/receipts/\(newId)?minWitnesses=1", authorization: log.owner.bearer).json?["log"]?.stringValue)
        let checks = TlogProofVerifier.verify(proofText: fallback, commitment: Digest.sha256(newDocument), logKey: key,
                                              witnessKeys: [witness.vkey.description], minWitnesses: 1)
        #expect(checks.map(\.passed) == [true, true, false, true], "the newest checkpoint, whose missing cosignature the verifier names: \(checks)")
        witness.logKey.withLock { $0 = try? VerifierKey(parsing: key) }

        // At start, `old 0` reads each witness's size back: one at the stored size starts; a witness
        // holding a larger size than the stored tree (a database restored behind it) refuses start.
        log.stop()
        let restarted = try Self.makeLog(interval: 0.05, rpId: log.server.rpId, scratch: scratch,
                                         configure: { $0.logWitnesses = [LogWitness(url: url, key: witness.vkey.description)] })
        restarted.stop()
        #expect(witness.conflicts.withLock { $0 } >= 2)
        witness.held.withLock { $0.size = 100 }
        do {
            _ = try Self.makeLog(interval: 0.05, rpId: log.server.rpId, scratch: scratch,
                                 configure: { $0.logWitnesses = [LogWitness(url: url, key: witness.vkey.description)] })
            Issue.record("started behind a witness")
        } catch {
            #expect(String(describing: error).contains("witness witness.test/w1 cosigned (size 100)"), "\(error)")
        }
    }

    @Test("log reset starts a new origin with a new key, and the new log holds every receipt; a KEK rotation carries the key")
    func reset() throws {
        #expect(TransparencyLogAdministration.nextOrigin(after: "rp.example/latchkey/receipts") == "rp.example/latchkey/receipts/2")
        #expect(TransparencyLogAdministration.nextOrigin(after: "rp.example/latchkey/receipts/2") == "rp.example/latchkey/receipts/3")
        #expect(TransparencyLogAdministration.nextOrigin(after: "rp.example/x/02") == "rp.example/x/02/2")
        let log = try Self.makeLog()
        let db = try log.scratch.connect()
        var documents: [[UInt8]] = []
        for _ in 0..<5 { documents.append(try Self.insertReceipt(db, userId: log.owner.userId).document) }
        let oldKey = try Self.logKey(log.client)
        #expect(try waitFor { try Self.size(log.client, key: oldKey) == 5 })
        log.stop()
        let (origin, newKey) = try TransparencyLogAdministration.reset(database: log.server.database, kek: TestDatabase.keyEncryptionKey)
        #expect(origin == "\(log.server.rpId)/latchkey/receipts/2")
        #expect(newKey != oldKey && newKey.hasPrefix(origin + "+"))
        for _ in 0..<2 { documents.append(try Self.insertReceipt(db, userId: log.owner.userId).document) }
        let again = try Self.makeLog(rpId: log.server.rpId, scratch: log.scratch, configure: { $0.logOrigin = origin })
        defer { again.stop() }
        #expect(try Self.logKey(again.client) == newKey)
        #expect(try waitFor { try Self.size(again.client, key: newKey) == 7 })
        #expect(Set(try Self.commitments(again.client, size: 7)) == Set(documents.map { Digest.sha256($0) }))
        // The old key no longer signs the checkpoint served.
        #expect(Self.polled(again.client, key: oldKey) == nil)

        // keys rotate --new-key: the log's key is sealed under the new KEK, and opens there only.
        let newKEK = try KeyEncryptionKey(bytes: SecureRandom.bytes(32))
        try TransparencyLogAdministration.reseal(database: again.server.database, from: TestDatabase.keyEncryptionKey, to: newKEK)
        let state = try #require(try again.server.database.transparencyLog.state())
        let binding = SealedSecret.Binding(purpose: TransparencyLog.sealPurpose, id: state.origin)
        #expect((try? SealedSecret.open(state.sealedKey, with: newKEK, binding: binding)) != nil)
        #expect((try? SealedSecret.open(state.sealedKey, with: TestDatabase.keyEncryptionKey, binding: binding)) == nil)
    }

    @Test("latchkey log reset asks for --i-understand, then prints the new origin and verifier key")
    func resetCommand() throws {
        let log = try Self.makeLog(interval: 0.05)
        defer { log.stop() }
        let env = ["DATABASE_URL": log.scratch.url, "LATCHKEY_KEY_ENCRYPTION_KEY": TestServer.keyEncryptionKeyBase64]
        let refused = try LatchkeyCLI.run(["log", "reset"], environment: env)
        #expect(refused.status == 64 && refused.stderr.contains("--i-understand"), "\(refused)")
        // The log is made by the first serve with a KEK (this test server's).
        let done = try LatchkeyCLI.run(["log", "reset", "--i-understand"], environment: env)
        #expect(done.status == 0, "\(done)")
        let origin = "\(log.server.rpId)/latchkey/receipts/2"
        #expect(done.lines.first == "origin \(origin)")
        let vkey = try VerifierKey(parsing: String(try #require(done.lines.last).dropFirst("vkey ".count)))
        #expect(vkey.name == origin && vkey.type == .ed25519)
        let state = try #require(try log.server.database.transparencyLog.state())
        #expect(state.origin == origin && state.publicKey == vkey.publicKey && state.size == 0)
    }

    @Test("kill -9 of the integrating instance mid-batch: every committed receipt is in a later checkpoint of a consistent tree; a rolled-back tree exits 1")
    func killNine() throws {
        let binary = try #require(ServeProcess.findBinary(), "build the latchkey executable (swift build --build-tests)")
        let scratch = try TestDatabase.Scratch()
        let rpId = "tlogcrash-\(uniqueSuffix()).latchkey.test"
        var environment = WebhookCrashTests.environment(databaseURL: scratch.url, rpId: rpId, adminKey: "admin-\(uniqueSuffix())")
        environment["LATCHKEY_LOG_INTERVAL"] = "0.05"
        let a = try ServeProcess(binary: binary, environment: environment)
        defer { a.stop() }
        let client = Client(Endpoint(port: try a.waitUntilServing(), rpId: rpId, origin: "https://\(rpId)", adminKey: nil))
        let owner = try client.signUp(SoftAuthenticator(), username: "crash-\(uniqueSuffix())")
        let key = try Self.logKey(client)
        let db = try scratch.connect()
        // 5000 receipts committed at once (each an answered step-up as far as the log can tell): the
        // writer takes them in batches, and is killed once the first batch is signed.
        func insert(_ count: Int) throws {
            _ = try db.execute("""
                INSERT INTO step_up_receipts (id, user_id, method, key_id, public_key, challenge, signed_data, signature, action, action_hash,
                                              key_binding, token_jti, token_expires_at, document, commitment)
                SELECT d.id, \(owner.userId), 'passkey', 'key', '\\x01', '\\x02', '\\x03', '\\x04', '{}', sha256('\\x05'), 'binding', 'jti-' || d.id,
                       now() + interval '1 hour', d.doc, sha256(d.doc)
                FROM (SELECT g.id, convert_to('{"id":"' || g.id || '","v":1}', 'UTF8') AS doc
                      FROM (SELECT md5(random()::text || i) AS id FROM generate_series(1, \(Int64(count))) AS i) g) d
                """)
        }
        try insert(5000)
        #expect(try waitFor(every: 0.001) { (Self.polled(client, key: key)?.checkpoint.size ?? 0) > 0 })
        a.kill9()
        let signedBefore = try db.query("SELECT size FROM transparency_log")[0].int64("size")
        print("kill -9 at tree size \(signedBefore) of 5000")
        try insert(100)
        let b = try ServeProcess(binary: binary, environment: environment)
        defer { b.stop() }
        let onB = Client(Endpoint(port: try b.waitUntilServing(), rpId: rpId, origin: "https://\(rpId)", adminKey: nil))
        #expect(try waitFor(seconds: 60) { Self.polled(onB, key: key)?.checkpoint.size == 5100 })
        let newest = try #require(Self.polled(onB, key: key)).checkpoint
        let all = try Self.commitments(onB, size: 5100)
        let stored = Set(try db.query("SELECT commitment FROM step_up_receipts WHERE commitment IS NOT NULL").map { try $0.bytes("commitment") })
        #expect(Set(all) == stored && all.count == 5100)
        let tree = CompleteSubtrees(leafHashes: all.map(MerkleTree.leafHash))
        #expect(MerkleTree.root(size: 5100) { tree.nodes[$0]! } == newest.root)
        for row in try db.query("SELECT size, root FROM transparency_log_checkpoints ORDER BY size") {
            let size = UInt64(try row.int64("size"))
            let p = try MerkleTree.consistencyProof(oldSize: size, size: 5100) { tree.nodes[$0]! }
            #expect(MerkleTree.verifyConsistency(oldSize: size, size: 5100, oldRoot: try row.bytes("root"), root: newest.root, proof: p), "checkpoint \(size)")
        }
        b.stop()
        // A database put back behind its last checkpoint: serve exits 1 and says why.
        _ = try db.execute("UPDATE transparency_log SET size = 5000")
        let c = try ServeProcess(binary: binary, environment: environment)
        defer { c.stop() }
        #expect(waitFor(seconds: 60) { !c.isRunning })
        #expect(c.exitStatus == 1)
        #expect(c.output.contains("smaller than the last checkpoint it signed"), "\(c.output)")
    }
}
