import Foundation
import JSON
import PostgreSQL
import Storage
import Testing

/// Builders: a valid value each, changed one field at a time by the tests.
enum Fixture {
    static func bytes(_ count: Int = 32) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }
    static func id() -> String { TestDatabase.uniqueName("id") }

    static func user(username: String? = nil) -> UserRecord {
        UserRecord(id: id(), userHandle: bytes(), username: username ?? TestDatabase.uniqueName("user"), displayName: "Test User")
    }

    static func credential(userId: String, id: [UInt8] = bytes(16), signCount: Int64 = 0) -> CredentialRecord {
        CredentialRecord(id: id, userId: userId, publicKey: bytes(77), alg: -7, signCount: signCount, aaguid: bytes(16),
                         transports: ["internal", "hybrid"], backupEligible: true, backedUp: false, attestationFormat: "none",
                         attestationType: "none", name: "Passkey", createdAt: Date())
    }

    /// A session a passkey ceremony began (`credentialId`), or one begun another way (nil: a ticket).
    static func session(userId: String, credentialId: [UInt8]? = nil, ttlSeconds: Int = 3600,
                        authTime: Date = Date(timeIntervalSince1970: Double(Int(Date().timeIntervalSince1970) - 60))) -> NewSession {
        NewSession(familyId: id(), userId: userId, refreshHash: bytes(), ttlSeconds: ttlSeconds,
                   method: credentialId == nil ? .ticket : .passkey, credentialId: credentialId, authTime: authTime)
    }

    static func audit(_ action: String, subject: String? = nil, detail: JSONValue = .object([])) -> AuditRecord {
        AuditRecord(actor: "test", action: action, subject: subject, detail: detail)
    }

    /// An audit line the statement writes once per row of its change (its subject the row's).
    static func template(_ action: String, detail: JSONValue = .object([])) -> AuditTemplate {
        AuditTemplate(actor: "test", action: action, detail: detail)
    }

    /// An event the statement writes once per row of its change.
    static func event(_ type: EventType) -> EventTemplate {
        EventTemplate(idPrefix: "evt_", seed: id(), type: type, maxAgeSeconds: 3600, createdAt: Date())
    }

    static func deviceKey(userId: String, deviceId: String = "device-1") -> NewDeviceKey {
        NewDeviceKey(id: id(), userId: userId, deviceId: deviceId, platform: .ios, name: "iPhone", publicKey: bytes(91),
                     attested: false, attestation: nil)
    }

    /// A passkey's id as a step-up receipt names it (base64url, no padding).
    static func base64url(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func receipt(userId: String, keyId: String, method: StepUpMethod = .deviceKey) -> StepUpReceiptRecord {
        StepUpReceiptRecord(id: id(), userId: userId, method: method, keyId: keyId, publicKey: bytes(91), challenge: bytes(),
                            signedData: bytes(), signature: bytes(70), action: #"{"op":"test"}"#, actionHash: bytes(),
                            keyBinding: "kb", tokenJTI: id(), tokenExpiresAt: Date().addingTimeInterval(300), createdAt: Date())
    }
}

extension Scratch {
    /// A registered user with one credential (and a session), as after a first registration.
    func registered(signCount: Int64 = 0) throws -> (UserRecord, CredentialRecord) {
        let user = Fixture.user()
        let credential = Fixture.credential(userId: user.id, signCount: signCount)
        try database.accounts.register(newUser: user, credential: credential, session: Fixture.session(userId: user.id, credentialId: credential.id),
                                       audit: Fixture.audit("passkey.registered", subject: user.id))
        return (user, credential)
    }

    /// A device-key ticket for `userId` as an enrolment gate (issue 10: every enrolment is gated).
    func deviceKeyGate(userId: String) throws -> EnrolmentGate {
        let hash = Fixture.bytes(32)
        _ = try database.accounts.createTicket(hash: hash, userId: userId, purpose: .deviceKey, ttlSeconds: 600,
                                               audit: Fixture.audit("device_key_ticket.issued", subject: userId))
        return .ticket(hash: hash)
    }

    /// Enrols `key` through a fresh device-key ticket.
    func enrol(_ key: NewDeviceKey, audit: AuditTemplate = Fixture.template("device_key.enrolled")) throws -> (DeviceKeyRecord, replaced: String?) {
        try #require(try database.deviceKeys.enrol(key, gate: deviceKeyGate(userId: key.userId), audit: audit))
    }

    /// A device key enrolled for `userId` and the receipt of a step-up it signed (its token unused).
    func deviceKeyWithReceipt(userId: String) throws -> (NewDeviceKey, StepUpReceiptRecord) {
        let key = Fixture.deviceKey(userId: userId)
        _ = try enrol(key)
        let receipt = Fixture.receipt(userId: userId, keyId: key.id)
        try #require(try database.deviceKeys.insertReceipt(receipt, liveDeviceKeyId: key.id, credentialUse: nil, audit: []))
        return (key, receipt)
    }

    /// The audit actions written so far, oldest first.
    func auditActions() throws -> [String] {
        try database.audit.entries(limit: 1000, before: nil).reversed().map(\.action)
    }
}

extension PostgresConnection {
    /// The plan PostgreSQL would run (`options`: EXPLAIN's, e.g. "ANALYZE, COSTS OFF"), one text.
    func plan(_ query: SQL, options: String? = nil) throws -> String {
        let explain: SQL = options.map { "EXPLAIN (\(unsafeRaw: $0)) " } ?? "EXPLAIN "
        return try self.query("\(fragment: explain)\(fragment: query)").map { try $0.string("QUERY PLAN") }.joined(separator: "\n")
    }
}
