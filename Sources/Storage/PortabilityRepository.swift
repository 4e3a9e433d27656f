import Foundation
import JSON
import PostgreSQL

/// One account as it moves between deployments: the user, the address, the live passkeys and the
/// live device keys. Never a secret (no token, code, code hash or key of Latchkey's). Times are
/// ISO 8601 UTC with microseconds, as PostgreSQL holds them, so an account round-trips exactly.
public struct PortableAccount: Sendable, Equatable {
    public var id: String
    public var username: String
    public var displayName: String
    public var externalId: String?
    public var createdAt: String
    /// The account's WebAuthn user handle (every passkey's `userHandle`).
    public var userHandle: [UInt8]
    public var email: PortableEmail?
    public var passkeys: [PortablePasskey]
    public var deviceKeys: [PortableDeviceKey]

    public init(id: String, username: String, displayName: String, externalId: String?, createdAt: String, userHandle: [UInt8],
                email: PortableEmail?, passkeys: [PortablePasskey], deviceKeys: [PortableDeviceKey]) {
        self.id = id
        self.username = username
        self.displayName = displayName
        self.externalId = externalId
        self.createdAt = createdAt
        self.userHandle = userHandle
        self.email = email
        self.passkeys = passkeys
        self.deviceKeys = deviceKeys
    }
}

public struct PortableEmail: Sendable, Equatable {
    public var address: String
    public var verifiedAt: String?

    public init(address: String, verifiedAt: String?) {
        self.address = address
        self.verifiedAt = verifiedAt
    }
}

public struct PortablePasskey: Sendable, Equatable {
    public var credentialId: [UInt8]
    /// COSE_Key as the authenticator sent it.
    public var publicKey: [UInt8]
    public var alg: Int
    public var signCount: Int64
    public var transports: [String]
    public var aaguid: [UInt8]
    public var backupEligible: Bool
    public var backedUp: Bool
    public var name: String
    public var createdAt: String
    public var lastUsedAt: String?

    public init(credentialId: [UInt8], publicKey: [UInt8], alg: Int, signCount: Int64, transports: [String], aaguid: [UInt8],
                backupEligible: Bool, backedUp: Bool, name: String, createdAt: String, lastUsedAt: String?) {
        self.credentialId = credentialId
        self.publicKey = publicKey
        self.alg = alg
        self.signCount = signCount
        self.transports = transports
        self.aaguid = aaguid
        self.backupEligible = backupEligible
        self.backedUp = backedUp
        self.name = name
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
    }
}

public struct PortableDeviceKey: Sendable, Equatable {
    public var id: String
    public var deviceId: String
    /// SubjectPublicKeyInfo DER.
    public var publicKey: [UInt8]
    public var platform: String
    public var attested: Bool
    public var createdAt: String

    public init(id: String, deviceId: String, publicKey: [UInt8], platform: String, attested: Bool, createdAt: String) {
        self.id = id
        self.deviceId = deviceId
        self.publicKey = publicKey
        self.platform = platform
        self.attested = attested
        self.createdAt = createdAt
    }
}

/// What an import's decision reads about one account in one query: the account already stored
/// under the line's user id (nil: none), and which of the line's identifiers another account holds.
public struct ImportPresence: Sendable, Equatable {
    public var existing: PortableAccount?
    public var usernameTaken = false
    public var userHandleTaken = false
    public var externalIdTaken = false
    public var emailTaken = false
    public var credentialTaken = false
    public var deviceKeyTaken = false

    public init(existing: PortableAccount?) { self.existing = existing }
}

/// Exported and imported accounts (`latchkey accounts export|import`, `GET /admin/v1/export`).
/// Reads page through users by id; an import reads and writes a batch of accounts at a time
/// (`PortabilityRepository+Import.swift`), each account whole or not at all.
public final class PortabilityRepository: Sendable {
    let pool: PostgresPool

    init(pool: PostgresPool) { self.pool = pool }

    /// ISO 8601 UTC with microseconds: exact, so an imported time is the exported one.
    static func iso(_ column: String) -> String {
        "to_char(\(column) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    }

    /// The account columns with its live passkeys and device keys, for the users a WHERE after it
    /// keeps. Bytes come back as bytes: the user handle as bytea, the passkeys' ids, keys and
    /// AAGUIDs and the device keys' keys as comma-separated hex lists (`Row.hexList`) in the order
    /// of the JSON of their other fields.
    static func accountSelect() -> String {
        """
        SELECT u.id, u.username, u.display_name, u.external_id, \(iso("u.created_at")) AS created_at,
               u.user_handle, coalesce(e.email, ua.email) AS email, \(iso("e.verified_at")) AS verified_at,
               (SELECT coalesce(json_agg(json_build_object(
                    'alg', c.alg, 'signCount', c.sign_count,
                    'transports', c.transports, 'backupEligible', c.backup_eligible,
                    'backedUp', c.backed_up, 'name', c.name, 'createdAt', \(iso("c.created_at")),
                    'lastUsedAt', \(iso("credential_last_use(c.id, c.last_used_at)"))) ORDER BY c.created_at, c.id), '[]')::text
                FROM credentials c WHERE c.user_id = u.id AND c.revoked_at IS NULL) AS passkeys,
               (SELECT string_agg(encode(c.id, 'hex'), ',' ORDER BY c.created_at, c.id) \(live)) AS passkey_ids,
               (SELECT string_agg(encode(c.public_key, 'hex'), ',' ORDER BY c.created_at, c.id) \(live)) AS passkey_keys,
               (SELECT string_agg(encode(c.aaguid, 'hex'), ',' ORDER BY c.created_at, c.id) \(live)) AS passkey_aaguids,
               (SELECT string_agg(encode(d.public_key, 'hex'), ',' ORDER BY d.created_at, d.id) \(liveDevices)) AS device_key_keys,
               (SELECT coalesce(json_agg(json_build_object(
                    'id', d.id, 'deviceId', d.device_id, 'platform', d.platform,
                    'attested', d.attested, 'createdAt', \(iso("d.created_at"))) ORDER BY d.created_at, d.id), '[]')::text
                FROM device_keys d WHERE d.user_id = u.id AND d.revoked_at IS NULL) AS device_keys
        FROM users u LEFT JOIN account_emails e ON e.user_id = u.id LEFT JOIN unverified_addresses ua ON ua.user_id = u.id
        """
    }

    static let live = "FROM credentials c WHERE c.user_id = u.id AND c.revoked_at IS NULL"
    static let liveDevices = "FROM device_keys d WHERE d.user_id = u.id AND d.revoked_at IS NULL"

    /// Up to `limit` accounts with ids after `after` (nil: from the first), in id order: one query.
    public func exportPage(after: String?, limit: Int) throws(StorageError) -> [PortableAccount] {
        try pool.run { c in
            try c.query("""
                \(unsafeRaw: Self.accountSelect())
                WHERE u.id > \(after ?? "") ORDER BY u.id LIMIT \(limit)
                """).map(Self.account)
        }
    }

    /// The account `username` names (nil: none): one query.
    public func exportAccount(username: String) throws(StorageError) -> PortableAccount? {
        try pool.run { c in
            try c.query("\(unsafeRaw: Self.accountSelect()) WHERE u.username = \(username)").first.map(Self.account)
        }
    }

    /// Creates `account` whole, with `audit`, in one statement: the user, its address (in
    /// `account_emails`, verified at `email.verifiedAt`, only when the line says it was verified and
    /// the operator trusts that; else in `unverified_addresses`, where it signs nobody in), its
    /// passkeys (`attestation` "none") and its device keys (unattested). False, with nothing
    /// written, when another account took one of its identifiers meanwhile (or when it deadlocked
    /// three times with another import writing the same identifiers: nothing was written).
    public func importAccount(_ account: PortableAccount, audit: AuditRecord) throws(StorageError) -> Bool {
        var ctes: [(name: String, sql: SQL)] = [("account", """
            INSERT INTO users (id, user_handle, username, display_name, external_id, created_at)
            VALUES (\(account.id), \(account.userHandle), \(account.username), \(account.displayName), \(account.externalId),
                    \(account.createdAt)::timestamptz)
            RETURNING id
            """)]
        if let email = account.email {
            if let verifiedAt = email.verifiedAt {
                ctes.append(("address", """
                    INSERT INTO account_emails (user_id, email, verified_at) VALUES (\(account.id), \(email.address), \(verifiedAt)::timestamptz)
                    RETURNING user_id
                    """))
            } else {
                ctes.append(("address", """
                    INSERT INTO unverified_addresses (user_id, email) VALUES (\(account.id), \(email.address)) RETURNING user_id
                    """))
            }
        }
        for (i, p) in account.passkeys.enumerated() {
            let transports = String(decoding: JSONValue.array(p.transports.map(JSONValue.string)).serialized(), as: UTF8.self)
            ctes.append(("passkey\(i)", """
                INSERT INTO credentials (id, user_id, public_key, alg, sign_count, aaguid, transports, backup_eligible, backed_up,
                                         attestation_format, attestation_type, name, created_at, last_used_at)
                VALUES (\(p.credentialId), \(account.id), \(p.publicKey), \(p.alg), \(p.signCount), \(p.aaguid), \(transports)::jsonb,
                        \(p.backupEligible), \(p.backedUp), 'none', 'none', \(p.name), \(p.createdAt)::timestamptz,
                        \(p.lastUsedAt)::timestamptz)
                RETURNING id
                """))
        }
        for (i, d) in account.deviceKeys.enumerated() {
            ctes.append(("device\(i)", """
                INSERT INTO device_keys (id, user_id, device_id, platform, name, public_key, attested, created_at)
                VALUES (\(d.id), \(account.id), \(d.deviceId), \(d.platform), \(d.deviceId), \(d.publicKey), false,
                        \(d.createdAt)::timestamptz)
                RETURNING id
                """))
        }
        ctes += AuditRepository.cte([audit], onlyIf: "account")
        let statement = SQL.with(ctes, "SELECT id FROM account")
        for _ in 0..<3 {
            do {
                let created: Bool? = try pool.run { c in
                    do {
                        return !(try c.query(statement)).isEmpty
                    } catch let error as PostgresError where error.sqlState == "40P01" {
                        return nil
                    }
                }
                if let created { return created }
            } catch .conflict {
                return false
            }
        }
        return false
    }

    /// The start of an export or an import over HTTP: the admin's step-up (or quorum approval)
    /// used up with `audit`, in one statement; `.conflict(.stepUpUsed)` and nothing written when
    /// it cannot be redeemed. Without a redemption (the admin key) the audit line alone.
    public func begin(redeeming redemption: StepUpRedemption?, audit: AuditRecord) throws(StorageError) {
        let ctes: [(name: String, sql: SQL)]
        if let redemption {
            ctes = [("used", StepUpRedemption.use(redemption))] + AuditRepository.cte([audit], onlyIf: "used")
        } else {
            ctes = AuditRepository.cte([audit])
        }
        let written = try pool.run { c in try c.query(SQL.with(ctes, "SELECT count(*)::int AS n FROM audit")).first?.int("n") ?? 0 }
        guard written == 1 else { throw StorageError.conflict(.stepUpUsed) }
    }

    static func account(_ r: Row) throws -> PortableAccount {
        let email: PortableEmail? = try r.optionalString("email").map { PortableEmail(address: $0, verifiedAt: try r.optionalString("verified_at")) }
        let passkeys = try jsonArray(r, "passkeys"), ids = try r.hexList("passkey_ids"), keys = try r.hexList("passkey_keys"),
            aaguids = try r.hexList("passkey_aaguids")
        let devices = try jsonArray(r, "device_keys"), deviceKeys = try r.hexList("device_key_keys")
        guard ids.count == passkeys.count, keys.count == passkeys.count, aaguids.count == passkeys.count else {
            throw StorageError.undecodable(column: "passkeys")
        }
        guard deviceKeys.count == devices.count else { throw StorageError.undecodable(column: "device_keys") }
        return PortableAccount(id: try r.string("id"), username: try r.string("username"), displayName: try r.string("display_name"),
                               externalId: try r.optionalString("external_id"), createdAt: try r.string("created_at"),
                               userHandle: try r.bytes("user_handle"), email: email,
                               passkeys: try passkeys.indices.map { try passkey(passkeys[$0], id: ids[$0], key: keys[$0], aaguid: aaguids[$0]) },
                               deviceKeys: try devices.indices.map { try deviceKey(devices[$0], key: deviceKeys[$0]) })
    }

    static func jsonArray(_ r: Row, _ column: String) throws -> [JSONValue] {
        guard let items = (try? JSONParser.parse(try r.string(column)))?.arrayValue else { throw StorageError.undecodable(column: column) }
        return items
    }

    static func passkey(_ v: JSONValue, id: [UInt8], key: [UInt8], aaguid: [UInt8]) throws -> PortablePasskey {
        guard let alg = v["alg"]?.intValue, let count = v["signCount"]?.intValue, let transports = v["transports"]?.arrayValue,
              let be = v["backupEligible"]?.boolValue, let bs = v["backedUp"]?.boolValue,
              let name = v["name"]?.stringValue, let created = v["createdAt"]?.stringValue
        else { throw StorageError.undecodable(column: "passkeys") }
        return PortablePasskey(credentialId: id, publicKey: key, alg: alg, signCount: Int64(count), transports: transports.compactMap(\.stringValue),
                               aaguid: aaguid, backupEligible: be, backedUp: bs, name: name, createdAt: created,
                               lastUsedAt: v["lastUsedAt"]?.stringValue)
    }

    static func deviceKey(_ v: JSONValue, key: [UInt8]) throws -> PortableDeviceKey {
        guard let id = v["id"]?.stringValue, let device = v["deviceId"]?.stringValue,
              let platform = v["platform"]?.stringValue, let attested = v["attested"]?.boolValue, let created = v["createdAt"]?.stringValue
        else { throw StorageError.undecodable(column: "device_keys") }
        return PortableDeviceKey(id: id, deviceId: device, publicKey: key, platform: platform, attested: attested, createdAt: created)
    }
}
