import Foundation
import PostgreSQL

/// A console page the admin API's caller resolution may read with the admin's standing.
public enum AdminPageRequest: Sendable, Equatable {
    /// `GET /admin/v1/users?username=`: users whose username starts with `prefix`, at most `limit`.
    case users(prefix: String, limit: Int)
    /// `GET /admin/v1/users/{id}`.
    case userPage(id: String)
    /// `GET /admin/v1/me`: the account whose session the token names.
    case caller
    /// `GET /admin/v1/audit`: that page of the audit log.
    case audit(AuditQuery)
    /// `GET /admin/v1/origins`: the allowlist.
    case origins
    /// `GET /admin/v1/apps`: one rpId's apps.
    case apps(rpId: String)
    /// `POST /admin/v1/wellknown/preview`: one rpId's apps with the allowlist.
    case declarations(rpId: String)
    /// `GET /admin/v1/webhooks`: the live endpoints.
    case webhooks
    /// `DELETE /admin/v1/users/{id}/passkeys/{credentialId}`: what the last-way-in rule and the
    /// revocation's notice need (`AccountRepository.revocationRead`).
    case passkeyRevocation(userId: String, credentialId: [UInt8])
}

/// That page, read.
public enum AdminPageRead: Sendable {
    case users([UserSummary])
    /// nil: no such account.
    case userPage(AdminUserPage?)
    /// nil: the account is gone.
    case caller(UserSummary?)
    case audit([AuditEntry])
    case origins([AppDeclarationRows.OriginRow])
    case apps([AppRecord])
    case declarations(AppDeclarationRows)
    case webhooks([WebhookEndpointRecord])
    case passkeyRevocation(PasskeyRevocationRead)
}

/// What the admin API's caller resolution read: the role, the session's standing (nil: revoked)
/// and, when asked, a page and a quorum approval.
public struct AdminSessionRead: Sendable {
    public let isAdmin: Bool
    public let session: (record: SessionRecord, passkeyApprovesFrom: Date?, passkeyHardware: Bool)?
    public let page: AdminPageRead?
    /// The approval asked for, as `ApprovalRepository.read(id:caller:)` reads it (nil: none with that id).
    public let approval: ApprovalRead?
}

extension AdminRepository {
    /// The admin API's caller in one round trip: whether the user has the admin role, and the
    /// session its token names as `SessionRepository.session(id:userId:)` reads it (nil: revoked);
    /// with `preloading`, the page the route shows, and with `approval`, the quorum approval an
    /// admin change names (`Latchkey-Approval`), in the same pipeline. Both are read whoever asks,
    /// and the caller decides from the role and the standing whether they are used: a failure of
    /// any statement fails the whole read.
    public func adminSession(userId: String, sessionId: String, preloading: AdminPageRequest? = nil,
                             approval approvalId: String? = nil) throws(StorageError) -> AdminSessionRead {
        let pageStatements = preloading.map { AdminRepository.reading($0, userId: userId) } ?? []
        let statements: [SQL] = ["SELECT 1 AS one FROM admins WHERE user_id = \(userId)", SessionRepository.standing(id: sessionId, userId: userId)]
            + pageStatements + (approvalId.map { [ApprovalRepository.reading(id: $0, caller: userId)] } ?? [])
        return try pool.run { c in
            let rows = try c.pipeline(statements)
            let pageRows = rows[2..<(2 + pageStatements.count)]
            return AdminSessionRead(isAdmin: !rows[0].isEmpty, session: try rows[1].first.map(SessionRepository.standing),
                                    page: try preloading.map { try AdminRepository.page($0, pageRows) },
                                    approval: approvalId == nil ? nil : try ApprovalRepository.approvalRead(rows[rows.count - 1]))
        }
    }

    /// The statements that read `page` (`userId`: the caller's account), for one pipeline.
    static func reading(_ page: AdminPageRequest, userId: String) -> [SQL] {
        switch page {
        case .users(let prefix, let limit): [AdminRepository.findingUsers(prefix, limit: limit)]
        case .userPage(let id): AdminRepository.readingUserPage(id)
        case .caller: [AdminRepository.summaries(where: "u.id = \(userId)")]
        case .audit(let query): [AuditRepository.reading(query)]
        case .origins: [ConfigRepository.readingOrigins]
        case .apps(let rpId): [ConfigRepository.readingApps(rpId: rpId)]
        case .declarations(let rpId): ConfigRepository.readingDeclarations(rpId: rpId)
        case .webhooks: [WebhookRepository.listing]
        case .passkeyRevocation(let userId, let credentialId): [AccountRepository.readingRevocation(userId: userId, credentialId: credentialId)]
        }
    }

    /// `page` from what `reading(page)`'s statements returned, in order.
    static func page(_ page: AdminPageRequest, _ rows: ArraySlice<[Row]>) throws -> AdminPageRead {
        let first = rows.first ?? []
        return switch page {
        case .users: .users(try first.map(AdminRepository.summary))
        case .userPage: .userPage(try AdminRepository.userPage(rows))
        case .caller: .caller(try first.first.map(AdminRepository.summary))
        case .audit: .audit(try first.map(AuditRepository.entry))
        case .origins: .origins(try first.map(ConfigRepository.origin))
        case .apps: .apps(try first.map(ConfigRepository.app))
        case .declarations: .declarations(try ConfigRepository.declarations(rows))
        case .webhooks: .webhooks(try first.map { try WebhookRepository.endpoint($0) })
        case .passkeyRevocation: .passkeyRevocation(try AccountRepository.revocation(first))
        }
    }
}
