import PostgreSQL

/// Versioned schema: the numbered files in `Sources/Storage/Migrations/`, compiled into the binary
/// by SwiftPM (`resources: [.embedInCode("Migrations")]`, which generates `PackageResources`), so
/// no resource bundle is needed at run time. Each runs once, in a transaction, under an advisory
/// lock, and is recorded in `schema_migrations` (see PostgreSQL.Migrator). Never edit a shipped
/// migration: add the next number, and list it here (a test checks this list against the folder).
public enum LatchkeyMigrations {
    public struct File: Sendable {
        public let version: Int
        public let name: String
        /// The file in `Sources/Storage/Migrations/`, `NNNN_words.sql` with NNNN = version.
        public let file: String
        public let sql: String
    }

    public static let all: [File] = [
        File(version: 1, name: "core tables", file: "0001_core.sql", sql: PackageResources._001_core_sql),
        // The apps table is the one source of truth: the origins they need are kept in `origins` with
        // source 'app' by ConfigRepository.putApp / removeApp in the same transaction. Any change to
        // either table notifies every instance on channel `latchkey_config` (delivered at commit).
        File(version: 2, name: "associated apps and change notifications", file: "0002_apps.sql",
             sql: PackageResources._002_apps_sql),
        // Hardware-bound device keys and step-up receipts.
        File(version: 3, name: "device keys and step-up receipts", file: "0003_device_keys.sql",
             sql: PackageResources._003_device_keys_sql),
        // Challenges carry the core's encoded ceremony state.
        File(version: 4, name: "ceremony state on challenges", file: "0004_ceremony_state.sql",
             sql: PackageResources._004_ceremony_state_sql),
        // Sessions record how they began (method, passkey, auth_time); revoking one
        // notifies every instance on channel `latchkey_sessions`.
        File(version: 5, name: "sessions bound to how they began", file: "0005_sessions.sql",
             sql: PackageResources._005_sessions_sql),
        // Device-key tickets and what a device key's attestation proved.
        File(version: 6, name: "device-key trust chain", file: "0006_device_key_trust.sql",
             sql: PackageResources._006_device_key_trust_sql),
        // Signing keys sealed at rest (AES-256-GCM envelope); plaintext PEM only until sealed.
        File(version: 7, name: "signing keys encrypted at rest", file: "0007_encrypted_keys.sql",
             sql: PackageResources._007_encrypted_keys_sql),
        // The outbox (events written with the change they report, fanned out to webhook
        // deliveries claimed with SKIP LOCKED and leases) and webhook endpoints.
        File(version: 8, name: "outbox and webhooks", file: "0008_outbox.sql", sql: PackageResources._008_outbox_sql),
        // Verified email, one-time codes, per-account limits, recovery codes, recoveries,
        // and mail messages (sent through the outbox on channel `mail`).
        File(version: 9, name: "recovery and fallback sign-in", file: "0009_recovery.sql", sql: PackageResources._009_recovery_sql),
        // Admins are users with the admin role; indexes for the audit log's filters.
        File(version: 10, name: "admins and audit filters", file: "0010_admins.sql",
             sql: PackageResources._010_admins_sql),
        // A passkey added from an email sign-in approves step-ups only after the recovery delay.
        File(version: 11, name: "passkey approval hold", file: "0011_passkey_approval_hold.sql",
             sql: PackageResources._011_passkey_approval_hold_sql),
        // Single-use cancel links for recoveries and held passkeys (SPEC "Assurance").
        File(version: 12, name: "cancel tokens", file: "0012_cancel_tokens.sql", sql: PackageResources._012_cancel_tokens_sql),
        // The last accepted MDS3 BLOB number per signing root (no rollback to an older list).
        File(version: 13, name: "metadata BLOB state", file: "0013_metadata_state.sql", sql: PackageResources._013_metadata_state_sql),
        // HOT credential updates (fillfactor), challenge churn vacuumed promptly, one index
        // write less per challenge and per self-audited line.
        File(version: 14, name: "login path at scale", file: "0014_login_at_scale.sql", sql: PackageResources._014_login_at_scale_sql),
        // A retried registration whose first try committed is recognised (409 credential_exists).
        File(version: 15, name: "registration digest", file: "0015_registration_digest.sql", sql: PackageResources._015_registration_digest_sql),
        // The language an account last used, for its mail.
        File(version: 16, name: "account language", file: "0016_account_language.sql", sql: PackageResources._016_account_language_sql),
        // The OpenID Provider's clients, requests, codes, grants and client-assertion jtis.
        File(version: 17, name: "OpenID Provider", file: "0017_oauth.sql", sql: PackageResources._017_oauth_sql),
        // Starting a session does not lock (and dirty) the account's row.
        File(version: 18, name: "session owner lock", file: "0018_session_owner_lock.sql", sql: PackageResources._018_session_owner_lock_sql),
        // One index on live sessions by owner and passkey instead of one for each.
        File(version: 19, name: "one live session index", file: "0019_one_live_session_index.sql",
             sql: PackageResources._019_one_live_session_index_sql),
        // Grants bound to what approved them, the OP browser session, consents, client auth methods.
        File(version: 20, name: "OAuth grants bound", file: "0020_oauth_grants_bound.sql", sql: PackageResources._020_oauth_grants_bound_sql),
        // A ticket is used up by the verify that stores its passkey; tickets that always hold.
        File(version: 21, name: "enrolment ticket redemption", file: "0021_enrolment_ticket_redemption.sql",
             sql: PackageResources._021_enrolment_ticket_redemption_sql),
        // Writing outbox deliveries NOTIFYs `latchkey_outbox` (the channel as payload), so
        // every instance's workers look at once instead of at their next poll.
        File(version: 22, name: "outbox wake-ups", file: "0022_outbox_wake_ups.sql", sql: PackageResources._022_outbox_wake_ups_sql),
        // Sealed login challenges: their single use recorded at verify; ceremony-sealing keys a KEK rotation retired.
        File(version: 23, name: "sealed login challenges", file: "0023_sealed_login_challenges.sql",
             sql: PackageResources._023_sealed_login_challenges_sql),
        // A passkey's last use read from its live sessions, so a login leaves a synced passkey's row alone.
        File(version: 24, name: "passkey last use on session", file: "0024_passkey_last_use_on_session.sql",
             sql: PackageResources._024_passkey_last_use_on_session_sql),
        // Receipts as RFC 8785 documents with their commitment, and the transparency log's queue.
        File(version: 25, name: "receipt documents", file: "0025_receipt_documents.sql", sql: PackageResources._025_receipt_documents_sql),
        // The transparency log: its sealed key and state, the leaves (commitments, no reference to
        // receipts), every complete subtree's hash, the signed checkpoints and their cosignatures.
        File(version: 26, name: "transparency log", file: "0026_transparency_log.sql", sql: PackageResources._026_transparency_log_sql),
        // Quorum approvals: policies, approvals, who approved them, the subject's cancel links.
        File(version: 27, name: "quorum approvals", file: "0027_quorum_approvals.sql", sql: PackageResources._027_quorum_approvals_sql),
        // The PRF vault: a passkey's PRF support, the vault's salt and wrapped keys (ciphertext only),
        // a revoked passkey's wrapped key deleted with it.
        File(version: 28, name: "prf vault", file: "0028_prf_vault.sql", sql: PackageResources._028_prf_vault_sql),
        // Imported addresses nobody has verified here, kept apart from the verified ones.
        File(version: 29, name: "unverified addresses", file: "0029_unverified_addresses.sql",
             sql: PackageResources._029_unverified_addresses_sql),
        // DPoP proofs' jti kept 120 s, recorded in the request's one write (RFC 9449 replay).
        File(version: 30, name: "dpop proofs", file: "0030_dpop.sql", sql: PackageResources._030_dpop_sql),
        // CIBA: a client's registration for the grant, backchannel requests, unknown-user answers.
        File(version: 31, name: "ciba", file: "0031_ciba.sql", sql: PackageResources._031_ciba_sql),
        // CIBA: the session that enrolled each device key (device-key sessions approve with it), and
        // a ping-mode request's one notification (due at expiry, moved to now by a decision).
        File(version: 32, name: "ciba device-key sessions", file: "0032_ciba_device_key_sessions.sql",
             sql: PackageResources._032_ciba_device_key_sessions_sql),
        // A first-party session's DPoP key (`cnf.jkt`), set by the proof that began or first refreshed it.
        File(version: 33, name: "session dpop", file: "0033_session_dpop.sql", sql: PackageResources._033_session_dpop_sql),
        // A client's FAPI 2.0 Security Profile (`--profile fapi2`).
        File(version: 34, name: "fapi2 profile", file: "0034_fapi2_profile.sql", sql: PackageResources._034_fapi2_profile_sql),
    ]

    /// Versions another branch has claimed and not merged yet: the list may skip them (MigrationTests
    /// checks the numbers run 1…N with exactly these missing). Take a number out when its file lands.
    public static let reserved: Set<Int> = []

    /// `all` as PostgreSQL.Migrator takes them.
    static var migrations: [Migration] { all.map { Migration(version: $0.version, name: $0.name, sql: $0.sql) } }
}

extension LatchkeyMigrations.File {
    init(version: Int, name: String, file: String, sql bytes: [UInt8]) {
        self.init(version: version, name: name, file: file, sql: String(decoding: bytes, as: UTF8.self))
    }
}
