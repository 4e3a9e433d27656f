import Foundation
import JSON
import PostgreSQL

/// An import's read and write, a batch of accounts at a time (SPEC "Portability" → Import): the
/// batch travels as one JSON parameter (bytes in base64), so that each is one statement of the same
/// text whatever the batch holds, and one round trip.
extension PortabilityRepository {
    /// An import's one read for `accounts`, in their order: for each, the account stored under its
    /// id and which of its identifiers another account holds (a credential or device key id held
    /// by any account). One query.
    public func importPresences(_ accounts: [PortableAccount]) throws(StorageError) -> [ImportPresence] {
        guard !accounts.isEmpty else { return [] }
        let batch = JSONValue.array(accounts.enumerated().map { n, a in
            .object([("n", .number(Double(n))), ("id", .string(a.id)), ("username", .string(a.username)),
                     ("handle", .string(Self.base64(a.userHandle))), ("external_id", a.externalId.map(JSONValue.string) ?? .null),
                     ("email", a.email.map { .string($0.address) } ?? .null),
                     ("credential_ids", .array(a.passkeys.map { .string(Self.base64($0.credentialId)) })),
                     ("device_key_ids", .array(a.deviceKeys.map { .string($0.id) }))])
        })
        let statement: SQL = """
            SELECT b.n AS batch_n,
                   EXISTS (SELECT 1 FROM users WHERE username = b.username AND id <> b.id) AS username_taken,
                   EXISTS (SELECT 1 FROM users WHERE user_handle = decode(b.handle, 'base64') AND id <> b.id) AS handle_taken,
                   EXISTS (SELECT 1 FROM users WHERE external_id = b.external_id AND id <> b.id) AS external_taken,
                   EXISTS (SELECT 1 FROM account_emails WHERE email = b.email AND user_id <> b.id
                           UNION ALL SELECT 1 FROM unverified_addresses WHERE email = b.email AND user_id <> b.id) AS email_taken,
                   EXISTS (SELECT 1 FROM credentials
                           WHERE id = ANY (ARRAY(SELECT decode(x, 'base64') FROM jsonb_array_elements_text(b.credential_ids) x))
                           AND user_id <> b.id) AS credential_taken,
                   EXISTS (SELECT 1 FROM device_keys WHERE id = ANY (ARRAY(SELECT jsonb_array_elements_text(b.device_key_ids)))
                           AND user_id <> b.id) AS device_key_taken,
                   a.*
            FROM jsonb_to_recordset(\(PostgresValue.text(batch.text))::jsonb)
                 AS b(n int, id text, username text, handle text, external_id text, email text, credential_ids jsonb, device_key_ids jsonb)
            LEFT JOIN LATERAL (\(unsafeRaw: Self.accountSelect()) WHERE u.id = b.id) a ON true
            ORDER BY b.n
            """
        return try pool.run { c in
            let rows = try c.query(statement)
            guard rows.count == accounts.count else { throw StorageError.undecodable(column: "batch_n") }
            return try rows.map { r in
                var presence = ImportPresence(existing: try r.isNull("id") ? nil : Self.account(r))
                presence.usernameTaken = try r.bool("username_taken")
                presence.userHandleTaken = try r.bool("handle_taken")
                presence.externalIdTaken = try r.bool("external_taken")
                presence.emailTaken = try r.bool("email_taken")
                presence.credentialTaken = try r.bool("credential_taken")
                presence.deviceKeyTaken = try r.bool("device_key_taken")
                return presence
            }
        }
    }

    /// Creates each account of `batch` whole, with its audit line, in one statement: the users,
    /// their addresses (in `account_emails`, verified at `email.verifiedAt`, only when the line
    /// says it was verified and the operator trusts that; else in `unverified_addresses`, where it
    /// signs nobody in), their passkeys (`attestation` "none") and their device keys (unattested).
    /// Returns, per account in order, whether it was created. The batch's accounts were decided
    /// against one read, so a unique violation here means another writer (another import at the
    /// same time) took an identifier since, or two of them share one no read could see (a device
    /// twice in one account): the statement then wrote nothing, and each account is written again
    /// on its own (`importAccount`), so that one account's conflict fails no other; a deadlock
    /// with another import's batch is answered the same way.
    public func importAccounts(_ batch: [(account: PortableAccount, audit: AuditRecord)]) throws(StorageError) -> [Bool] {
        guard !batch.isEmpty else { return [] }
        let statement = Self.batchInsert(batch)
        let created: Int? = try pool.run { c in
            do {
                return try c.query(statement).count
            } catch let error as PostgresError where error.isUniqueViolation || error.sqlState == "40P01" {
                return nil
            }
        }
        if let created {
            guard created == batch.count else { throw StorageError.undecodable(column: "account") }
            return Array(repeating: true, count: batch.count)
        }
        var written: [Bool] = []
        for item in batch { written.append(try importAccount(item.account, audit: item.audit)) }
        return written
    }

    /// The batch's one statement: every table's rows from the one JSON parameter.
    static func batchInsert(_ batch: [(account: PortableAccount, audit: AuditRecord)]) -> SQL {
        let rows = JSONValue.array(batch.map { item in
            let a = item.account
            let passkeys = JSONValue.array(a.passkeys.map { p in
                .object([("id", .string(base64(p.credentialId))), ("key", .string(base64(p.publicKey))), ("alg", .number(Double(p.alg))),
                         ("sign_count", .number(Double(p.signCount))), ("aaguid", .string(base64(p.aaguid))),
                         ("transports", .array(p.transports.map(JSONValue.string))), ("be", .bool(p.backupEligible)),
                         ("bs", .bool(p.backedUp)), ("name", .string(p.name)), ("created_at", .string(p.createdAt)),
                         ("last_used_at", p.lastUsedAt.map(JSONValue.string) ?? .null)])
            })
            let devices = JSONValue.array(a.deviceKeys.map { d in
                .object([("id", .string(d.id)), ("device_id", .string(d.deviceId)), ("platform", .string(d.platform)),
                         ("key", .string(base64(d.publicKey))), ("created_at", .string(d.createdAt))])
            })
            let audit = JSONValue.object([("actor", .string(item.audit.actor)), ("action", .string(item.audit.action)),
                                          ("subject", item.audit.subject.map(JSONValue.string) ?? .null), ("detail", item.audit.detail)])
            return .object([("id", .string(a.id)), ("handle", .string(base64(a.userHandle))), ("username", .string(a.username)),
                            ("display_name", .string(a.displayName)), ("external_id", a.externalId.map(JSONValue.string) ?? .null),
                            ("created_at", .string(a.createdAt)), ("email", a.email.map { .string($0.address) } ?? .null),
                            ("verified_at", a.email?.verifiedAt.map(JSONValue.string) ?? .null),
                            ("passkeys", passkeys), ("device_keys", devices), ("audit", audit)])
        })
        let audit = AuditRepository.insert([.perRow("""
            SELECT l.actor, l.action, l.subject, l.detail
            FROM batch b, jsonb_to_record(b.audit) AS l(actor text, action text, subject text, detail jsonb)
            """)])!
        let ctes: [(name: String, sql: SQL)] = [
            ("batch", """
                SELECT * FROM jsonb_to_recordset(\(PostgresValue.text(rows.text))::jsonb)
                AS b(id text, handle text, username text, display_name text, external_id text, created_at timestamptz, email text,
                     verified_at timestamptz, passkeys jsonb, device_keys jsonb, audit jsonb)
                """),
            ("account", """
                INSERT INTO users (id, user_handle, username, display_name, external_id, created_at)
                SELECT id, decode(handle, 'base64'), username, display_name, external_id, created_at FROM batch
                RETURNING id
                """),
            ("verified", """
                INSERT INTO account_emails (user_id, email, verified_at)
                SELECT id, email, verified_at FROM batch WHERE email IS NOT NULL AND verified_at IS NOT NULL
                RETURNING user_id
                """),
            ("unverified", """
                INSERT INTO unverified_addresses (user_id, email)
                SELECT id, email FROM batch WHERE email IS NOT NULL AND verified_at IS NULL
                RETURNING user_id
                """),
            ("passkey", """
                INSERT INTO credentials (id, user_id, public_key, alg, sign_count, aaguid, transports, backup_eligible, backed_up,
                                         attestation_format, attestation_type, name, created_at, last_used_at)
                SELECT decode(p.id, 'base64'), b.id, decode(p.key, 'base64'), p.alg, p.sign_count, decode(p.aaguid, 'base64'),
                       p.transports, p.be, p.bs, 'none', 'none', p.name, p.created_at, p.last_used_at
                FROM batch b, jsonb_to_recordset(b.passkeys) AS p(id text, key text, alg int, sign_count bigint, aaguid text,
                     transports jsonb, be boolean, bs boolean, name text, created_at timestamptz, last_used_at timestamptz)
                RETURNING id
                """),
            ("device", """
                INSERT INTO device_keys (id, user_id, device_id, platform, name, public_key, attested, created_at)
                SELECT d.id, b.id, d.device_id, d.platform, d.device_id, decode(d.key, 'base64'), false, d.created_at
                FROM batch b, jsonb_to_recordset(b.device_keys) AS d(id text, device_id text, platform text, key text, created_at timestamptz)
                RETURNING id
                """),
            ("audit", audit),
        ]
        return SQL.with(ctes, "SELECT id FROM account")
    }

    /// Standard base64, as PostgreSQL's `decode(…, 'base64')` reads it.
    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}
